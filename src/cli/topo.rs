//! `fabricsim topo`: a scenario's fabric described, drawn, or its ports
//! listed.

use super::common::load;
use super::common::print_json_or;
use fabricsim::outln;
use fabricsim::topology::summary::TopologySummary;
use std::path::Path;

pub(crate) fn topo(
    path: Option<&Path>,
    sets: &[String],
    json: bool,
    svg: Option<&Path>,
) -> Result<(), String> {
    let p = load(path, sets)?;
    if let Some(file) = svg {
        let map = fabricsim::report::fabric::draw(&p.topology, None, &p.scenario.name);
        fabricsim::output::write_atomic(file, map.svg.as_bytes())
            .map_err(|e| format!("{}: {e}", file.display()))?;
        outln!(
            "{}: {} boxes, {} lines{}",
            file.display(),
            map.boxes,
            map.lines,
            if map.aggregated {
                " (pods drawn as blocks)"
            } else {
                ""
            }
        );
        return Ok(());
    }
    let summary = TopologySummary::of(
        &p.topology,
        fabricsim::scenario::resolve::cross_rail(&p.topology),
    );
    print_json_or(json, &summary, || summary.render())
}

/// `fabricsim topo --ports PATTERN`: each port of the matching switches,
/// by the name its switch configuration gives it.
pub(crate) fn topo_ports(
    path: Option<&Path>,
    sets: &[String],
    pattern: &str,
) -> Result<(), String> {
    use fabricsim::topology::{Owner, PortId};
    let p = load(path, sets)?;
    let topo = &p.topology;
    let configs = p.scenario.configs.as_ref();
    let owner = |q: PortId| match topo.port(q).owner {
        Owner::Switch(s) => topo.switches[s.idx()].name.clone(),
        Owner::Nic(n) => topo.nics[n.idx()].name.clone(),
    };
    let mut found = false;
    for sw in topo
        .switches
        .iter()
        .filter(|s| fabricsim::config::glob(pattern, &s.name))
    {
        found = true;
        outln!("{}", sw.name);
        outln!(
            "  {:>4}  {:<16} {:<5} {:<24} {:>6}  pfc",
            "port",
            "interface",
            "faces",
            "other end",
            "speed"
        );
        for (i, &q) in sw.ports.iter().enumerate() {
            let peer = topo.port(q).peer;
            let setting = configs.and_then(|c| c.ports[q.idx()].as_ref());
            let peer_name = match configs.and_then(|c| c.ports[peer.idx()].as_ref()) {
                Some(s) => format!("{} {}", owner(peer), s.name),
                None => owner(peer),
            };
            let pfc = match (p.pfc.slots, configs.map(|c| c.pfc_on(q))) {
                (0, _) => "no lossless class",
                (_, Some(false)) => "off",
                _ => "on",
            };
            outln!(
                "  {:>4}  {:<16} {:<5} {:<24} {:>6}  {pfc}",
                i,
                setting.map_or("-", |s| s.name.as_str()),
                if topo.links[topo.port(q).link.idx()].b == q {
                    "down"
                } else {
                    "up"
                },
                peer_name,
                topo.port(q).rate.to_string(),
            );
        }
    }
    if !found {
        return Err(format!(
            "--ports {pattern}: no switch matches; the switches are {} to {}",
            topo.switches.first().map_or("", |s| s.name.as_str()),
            topo.switches.last().map_or("", |s| s.name.as_str())
        ));
    }
    Ok(())
}
