//! `fabricsim config import`: a switch configuration as scenario keys.

use fabricsim::{errln, out};
use std::path::Path;

pub(crate) fn config_import(file: &Path, strict: bool) -> Result<(), String> {
    let import = fabricsim::config::import_file(file).map_err(|e| e.to_string())?;
    if strict {
        import.strict().map_err(|e| e.to_string())?;
    }
    out!("{}", import.to_toml());
    if !import.not_modelled.is_empty() {
        errln!(
            "{}: {} lines not modelled (listed at the end; --strict refuses them)",
            file.display(),
            import.not_modelled.len()
        );
    }
    Ok(())
}

/// `fabricsim config export --os nxos|junos SCENARIO`: the configuration
/// that makes a switch of the scenario (`--switch`, by default its first)
/// behave as the scenario says.
pub(crate) fn config_export(
    scenario: &Path,
    os: &str,
    switch: Option<&str>,
    sets: &[String],
) -> Result<(), String> {
    use fabricsim::scenario::export::{export, Design, Os};
    let os = match os {
        "nxos" | "nx-os" => Os::Nxos,
        "junos" => Os::Junos,
        other => return Err(format!("--os: got \"{other}\", expected nxos or junos")),
    };
    let p = super::common::load(Some(scenario), sets)?;
    let topo = &p.topology;
    let s = &p.scenario;
    let at = match switch {
        None => 0,
        Some(name) => topo
            .switches
            .iter()
            .position(|x| x.name == name)
            .ok_or_else(|| {
                format!(
                    "--switch: got \"{name}\", which is no switch of {} (its switches are {} to {})",
                    scenario.display(),
                    topo.switches.first().map_or("", |x| x.name.as_str()),
                    topo.switches.last().map_or("", |x| x.name.as_str())
                )
            })?,
    };
    let sw = topo
        .switches
        .get(at)
        .ok_or_else(|| format!("{} has no switch", scenario.display()))?;
    let id = fabricsim::topology::SwitchId(at as u32);
    // Its balancing keys: a configuration's own, a switch's or tier's
    // override, else the fabric's.
    let configured = s
        .configs
        .as_ref()
        .and_then(|c| c.files.iter().find(|a| a.switches.contains(&id)))
        .and_then(|a| a.balance.as_ref())
        .and_then(|v| v.as_table());
    let given = s
        .switch_keys
        .get("switch")
        .and_then(|x| x.get("balance"))
        .and_then(|b| b.as_table());
    let tier = topo.kind.tier_names()[sw.tier as usize];
    let balance = configured.or_else(|| {
        let g = given?;
        g.get("switch")
            .and_then(|x| x.get(&sw.name))
            .or_else(|| g.get("tier").and_then(|x| x.get(tier)))
            .and_then(|v| v.as_table())
    });
    // Its ports facing up, by the names its configuration gives them.
    let mut down = 0;
    let mut up_ports = Vec::new();
    for &q in &sw.ports {
        if topo.links[topo.port(q).link.idx()].a == q {
            up_ports.push(q);
        } else {
            down += 1;
        }
    }
    let up = up_ports
        .iter()
        .enumerate()
        .map(|(i, q)| {
            s.configs
                .as_ref()
                .and_then(|c| c.ports[q.idx()].as_ref())
                .map(|set| set.name.clone())
                .unwrap_or_else(|| match os {
                    Os::Nxos => format!("Ethernet1/{}", down + i + 1),
                    Os::Junos => format!("et-0/0/{}", down + i),
                })
        })
        .collect();
    let fastest = sw
        .ports
        .iter()
        .map(|&q| topo.port(q).rate)
        .max_by_key(|r| r.bps())
        .ok_or_else(|| format!("{} has no ports", sw.name))?;
    let design = Design {
        scenario: scenario.display().to_string(),
        hostname: sw.name.clone(),
        qos: &s.qos,
        keys: &s.switch_keys,
        balance,
        up,
        wred: std::array::from_fn(|q| p.pfc.wred_at(fastest, q)),
        queue_limit: fabricsim::scenario::lossless::queue_room(
            s.switch.buffer_bytes,
            s.switch.alpha_256,
            false,
        ),
    };
    out!("{}", export(&design, os));
    Ok(())
}
