//! `[switch.ecmp]` and `[switch.balance]`: hashing, the balancer of each
//! tier and switch with its settings, selective rules, TELB colours and
//! policies; and the warnings a balancer setup deserves.

use toml::Value;

use super::error::Finding;
use super::error::{KeyError, KeyPath};
use super::raw::{RawBalance, RawEcmp, RawRule};
use super::values::{choice, fraction, named, show, size, time};
use crate::switch::balance::alb::AlbConfig;
use crate::switch::balance::dlb::{DlbConfig, DlbMode};
use crate::switch::balance::glb::{Combine, GlbConfig};
use crate::switch::balance::rules::{opcode_bit, Color, Match, Policy, Selective, OPCODE_NAMES};
use crate::switch::balance::spray::SprayOrder;
use crate::switch::balance::{
    Algo, BalanceConfig, BalanceSpec, EcmpConfig, EcmpSeed, HashFields, HashFn, Weights,
};
use crate::topology::{NicId, Owner, SwitchId, Topology};
use crate::units::SimTime;

type R<T> = Result<T, KeyError>;
/// Setting names and whether each was given.
type Keys<'a> = &'a [(&'a str, bool)];

fn switch_id(topo: &Topology, name: &str) -> Option<SwitchId> {
    topo.switches
        .iter()
        .position(|s| s.name == name)
        .map(|i| SwitchId(i as u32))
}

fn no_switch(path: &KeyPath, name: &str, topo: &Topology) -> KeyError {
    let first: Vec<&str> = topo
        .switches
        .iter()
        .take(4)
        .map(|s| s.name.as_str())
        .collect();
    KeyError::new(
        path,
        format!(
            "no switch \"{name}\" in this topology (switches are named like {})",
            first.join(", ")
        ),
    )
}

pub fn ecmp(e: &RawEcmp, ep: &KeyPath, topo: &Topology) -> R<EcmpConfig> {
    let hash = match e.hash.as_deref() {
        None => HashFn::Crc32,
        Some(name) => HashFn::from_name(name).ok_or_else(|| {
            KeyError::new(
                &ep.key("hash"),
                format!(
                    "got \"{name}\", expected one of {}",
                    HashFn::NAMES.join(", ")
                ),
            )
        })?,
    };
    let mut fields = match &e.fields {
        None => HashFields::FIVE_TUPLE,
        Some(list) => {
            let mut f = HashFields::NONE;
            for (i, name) in list.iter().enumerate() {
                let bit = HashFields::from_name(name).ok_or_else(|| {
                    KeyError::new(
                        &ep.key("fields").index(i),
                        format!(
                            "got \"{name}\", expected one of {}",
                            HashFields::NAMES.join(", ")
                        ),
                    )
                })?;
                f = f.with(bit);
            }
            if f == HashFields::NONE {
                return Err(KeyError::new(
                    &ep.key("fields"),
                    "is empty; expected at least one hash field",
                ));
            }
            f
        }
    };
    if e.symmetric == Some(true) {
        if !(fields.has(HashFields::SRC_IP) && fields.has(HashFields::DST_IP)) {
            return Err(KeyError::new(
                &ep.key("symmetric"),
                "needs both src_ip and dst_ip in fields (it hashes them in sorted order)",
            ));
        }
        fields = fields.with(HashFields::SYMMETRIC);
    }
    let seed = match &e.seed {
        None => EcmpSeed::PerSwitch,
        Some(Value::String(s)) if s == "per-switch" => EcmpSeed::PerSwitch,
        Some(Value::Integer(n)) if (0..=u32::MAX as i64).contains(n) => EcmpSeed::Fixed(*n as u32),
        Some(other) => {
            return Err(KeyError::new(
                &ep.key("seed"),
                format!(
                "got {}, expected \"per-switch\" or an integer 0..4294967295 used by every switch",
                show(other)
            ),
            ))
        }
    };
    let buckets = match e.buckets {
        None => 512,
        Some(n @ 16..=65536) => n as u32,
        Some(n) => {
            return Err(KeyError::new(
                &ep.key("buckets"),
                format!("got {n}, expected 16 to 65536 buckets per group (512 or 1024 are usual)"),
            ))
        }
    };
    let weights = match &e.weights {
        None => Weights::Equal,
        Some(Value::String(s)) if s == "equal" => Weights::Equal,
        Some(Value::String(s)) if s == "capacity" => Weights::Capacity,
        Some(Value::Table(t)) => {
            let mut list = Vec::new();
            for (name, w) in t {
                let wp = ep.key("weights").key(name);
                let id = switch_id(topo, name).ok_or_else(|| no_switch(&wp, name, topo))?;
                match w {
                    Value::Integer(n @ 1..=1000) => list.push((id, *n as u32)),
                    other => {
                        return Err(KeyError::new(
                            &wp,
                            format!("got {}, expected a weight from 1 to 1000", show(other)),
                        ))
                    }
                }
            }
            Weights::Neighbours(list)
        }
        Some(other) => {
            return Err(KeyError::new(
                &ep.key("weights"),
                format!(
                "got {}, expected \"equal\", \"capacity\" or a table of next-hop switch = weight",
                show(other)
            ),
            ))
        }
    };
    Ok(EcmpConfig {
        hash,
        fields,
        seed,
        resilient: e.resilient.unwrap_or(false),
        buckets,
        weights,
    })
}

fn algo(name: &str, path: &KeyPath) -> R<Algo> {
    named(Some(name), path, Algo::NAMES, Algo::from_name, Algo::Ecmp)
}

fn range(v: &Option<Vec<i64>>, path: &KeyPath, max: i64) -> R<Option<(i64, i64)>> {
    match v.as_deref() {
        None => Ok(None),
        Some(&[lo, hi]) if 0 <= lo && lo <= hi && hi <= max => Ok(Some((lo, hi))),
        Some(_) => Err(KeyError::new(
            path,
            format!("expected [first, last] with 0 <= first <= last <= {max}"),
        )),
    }
}

/// The match part of a rule.
fn matcher(r: &RawRule, path: &KeyPath, topo: &Topology) -> R<Match> {
    let mut m = Match::default();
    for (i, &t) in r.tenant.iter().flatten().enumerate() {
        if !(0..=65535).contains(&t) {
            return Err(KeyError::new(
                &path.key("tenant").index(i),
                format!("got {t}, expected a tenant id 0 to 65535"),
            ));
        }
        m.tenants.push(t as u16);
    }
    for (i, &g) in r.gpu.iter().flatten().enumerate() {
        let Some(gpu) = usize::try_from(g).ok().and_then(|g| topo.gpus.get(g)) else {
            return Err(KeyError::new(
                &path.key("gpu").index(i),
                format!("got {g}, expected a GPU id 0 to {}", topo.gpus.len() - 1),
            ));
        };
        if !m.src_nics.contains(&gpu.nic) {
            m.src_nics.push(gpu.nic);
        }
    }
    m.qpn = range(&r.qp, &path.key("qp"), 0xFF_FFFF)?.map(|(a, b)| (a as u32, b as u32));
    m.udp_sport =
        range(&r.udp_sport, &path.key("udp_sport"), 65535)?.map(|(a, b)| (a as u16, b as u16));
    for (i, name) in r.ingress.iter().flatten().enumerate() {
        let owner = if let Some(s) = switch_id(topo, name) {
            Owner::Switch(s)
        } else if let Some(n) = topo.nics.iter().position(|n| &n.name == name) {
            Owner::Nic(NicId(n as u32))
        } else {
            return Err(KeyError::new(
                &path.key("ingress").index(i),
                format!(
                    "got \"{name}\", expected the name of a switch or NIC at the other end of the ingress link (e.g. \"{}\" or \"{}\")",
                    topo.switches[0].name, topo.nics[0].name
                ),
            ));
        };
        m.ingress.push(owner);
    }
    for (i, name) in r.opcode.iter().flatten().enumerate() {
        let Some(&(_, o)) = OPCODE_NAMES.iter().find(|(n, _)| n == name) else {
            let names: Vec<&str> = OPCODE_NAMES.iter().map(|e| e.0).collect();
            return Err(KeyError::new(
                &path.key("opcode").index(i),
                format!("got \"{name}\", expected one of {}", names.join(", ")),
            ));
        };
        m.opcodes |= opcode_bit(o);
    }
    for (i, &q) in r.traffic_class.iter().flatten().enumerate() {
        if !(0..=7).contains(&q) {
            return Err(KeyError::new(
                &path.key("traffic_class").index(i),
                format!("got {q}, expected a traffic class (queue) 0 to 7"),
            ));
        }
        m.queues |= 1 << q;
    }
    Ok(m)
}

fn color_index(colors: &[Color], name: &str, path: &KeyPath) -> R<usize> {
    colors.iter().position(|c| c.name == name).ok_or_else(|| {
        let names: Vec<&str> = colors.iter().map(|c| c.name.as_str()).collect();
        KeyError::new(
            path,
            if names.is_empty() {
                format!("got \"{name}\", but [switch.balance.colors] defines no colours")
            } else {
                format!("got \"{name}\", expected one of {}", names.join(", "))
            },
        )
    })
}

/// One balance table: the default algorithm and its settings.
fn spec(
    b: &RawBalance,
    path: &KeyPath,
    topo: &Topology,
    colors: &[Color],
    unused: &mut Vec<(String, String)>,
) -> R<BalanceSpec> {
    let mut s = BalanceSpec {
        algo: algo(b.mode.as_deref().unwrap_or("ecmp"), &path.key("mode"))?,
        ..BalanceSpec::default()
    };
    for (i, r) in b.select.iter().flatten().enumerate() {
        let rp = path.key("select").index(i);
        for (k, given) in [("color", r.color.is_some()), ("backup", r.backup.is_some())] {
            if given {
                return Err(KeyError::new(
                    &rp.key(k),
                    "belongs in a [[switch.balance.policy]] (TELB), not a selective rule",
                ));
            }
        }
        let Some(mode) = &r.mode else {
            return Err(KeyError::new(
                &rp.key("mode"),
                "missing; a selective rule names the balancer its traffic uses, e.g. \"spray\" or \"dlb\"",
            ));
        };
        s.select.push(Selective {
            when: matcher(r, &rp, topo)?,
            algo: algo(mode, &rp.key("mode"))?,
        });
    }
    for (i, r) in b.policy.iter().flatten().enumerate() {
        let rp = path.key("policy").index(i);
        if r.mode.is_some() {
            return Err(KeyError::new(
                &rp.key("mode"),
                "belongs in a [[switch.balance.select]] rule; a policy names a color",
            ));
        }
        let Some(color) = &r.color else {
            return Err(KeyError::new(
                &rp.key("color"),
                "missing; a TELB policy pins its traffic to a path colour",
            ));
        };
        let color = color_index(colors, color, &rp.key("color"))?;
        let backup = match &r.backup {
            None => None,
            Some(n) => {
                let c = color_index(colors, n, &rp.key("backup"))?;
                if c == color {
                    return Err(KeyError::new(
                        &rp.key("backup"),
                        "is the same colour as color; expected another colour or none",
                    ));
                }
                Some(c)
            }
        };
        s.policies.push(Policy {
            when: matcher(r, &rp, topo)?,
            color,
            backup,
        });
    }
    let uses_dlb = s.uses_quality();
    // (what uses them, whether something does, the keys given)
    let groups: [(&str, bool, Keys); 4] = [
        (
            "dlb or glb",
            uses_dlb,
            &[
                ("dlb_mode", b.dlb_mode.is_some()),
                ("flowlet_timeout", b.flowlet_timeout.is_some()),
                ("quality_interval", b.quality_interval.is_some()),
                ("load_weight", b.load_weight.is_some()),
                ("queue_full", b.queue_full.is_some()),
                ("rebalance_bands", b.rebalance_bands.is_some()),
                ("table_size", b.table_size.is_some()),
            ],
        ),
        (
            "spray",
            s.uses(Algo::Spray),
            &[("spray_order", b.spray_order.is_some())],
        ),
        (
            "alb",
            s.uses(Algo::Alb),
            &[
                ("alb_window", b.alb_window.is_some()),
                ("alb_interval", b.alb_interval.is_some()),
                ("alb_tolerance", b.alb_tolerance.is_some()),
                ("alb_max_moves", b.alb_max_moves.is_some()),
            ],
        ),
        (
            "glb",
            s.uses(Algo::Glb),
            &[
                ("glb_heartbeat", b.glb_heartbeat.is_some()),
                ("glb_combine", b.glb_combine.is_some()),
                ("glb_remote_weight", b.glb_remote_weight.is_some()),
            ],
        ),
    ];
    for (needs, used, keys) in groups {
        if used {
            continue;
        }
        for (k, _) in keys.iter().filter(|(_, given)| *given) {
            unused.push((
                path.key(k).to_string(),
                format!(
                    "is only used by mode = \"{needs}\" (here mode is \"{}\" and no selective rule uses it); ignored",
                    b.mode.as_deref().unwrap_or("ecmp")
                ),
            ));
        }
    }
    s.dlb = dlb(b, path)?;
    if let Some(o) = &b.spray_order {
        s.spray = SprayOrder::from_name(o).ok_or_else(|| {
            KeyError::new(
                &path.key("spray_order"),
                format!("got \"{o}\", expected \"round-robin\" or \"random\""),
            )
        })?;
    }
    s.alb = alb(b, path)?;
    s.glb = glb(b, path)?;
    Ok(s)
}

fn dlb(b: &RawBalance, path: &KeyPath) -> R<DlbConfig> {
    let mut c = DlbConfig::default();
    c.mode = named(
        b.dlb_mode.as_deref(),
        &path.key("dlb_mode"),
        DlbMode::NAMES,
        DlbMode::from_name,
        c.mode,
    )?;
    c.inactivity = time(
        b.flowlet_timeout.as_ref(),
        &path.key("flowlet_timeout"),
        c.inactivity,
    )?;
    c.interval = time(
        b.quality_interval.as_ref(),
        &path.key("quality_interval"),
        c.interval,
    )?;
    if c.interval < SimTime::from_ns(10) {
        return Err(KeyError::new(
            &path.key("quality_interval"),
            "expected at least 10ns between quality refreshes",
        ));
    }
    c.load_weight = fraction(
        b.load_weight.as_ref(),
        &path.key("load_weight"),
        c.load_weight,
        "a weight",
    )?;
    c.queue_full = size(b.queue_full.as_ref(), &path.key("queue_full"), c.queue_full)?;
    c.rebalance_bands = match b.rebalance_bands {
        None => 0,
        Some(n @ 0..=7) => n as u8,
        Some(n) => {
            return Err(KeyError::new(
                &path.key("rebalance_bands"),
                format!("got {n}, expected 0 (off) to 7 quality bands"),
            ))
        }
    };
    c.table_size = match b.table_size {
        None => c.table_size,
        Some(n @ 1..=1_048_576) => n as u32,
        Some(n) => {
            return Err(KeyError::new(
                &path.key("table_size"),
                format!("got {n}, expected 1 to 1048576 flow-table entries"),
            ))
        }
    };
    Ok(c)
}

fn alb(b: &RawBalance, path: &KeyPath) -> R<AlbConfig> {
    let mut c = AlbConfig::default();
    c.window = time(b.alb_window.as_ref(), &path.key("alb_window"), c.window)?;
    c.interval = time(
        b.alb_interval.as_ref(),
        &path.key("alb_interval"),
        c.interval,
    )?;
    if c.window < SimTime::from_ns(100) {
        return Err(KeyError::new(
            &path.key("alb_window"),
            "expected a sampling window of at least 100ns",
        ));
    }
    if c.interval < c.window {
        return Err(KeyError::new(
            &path.key("alb_interval"),
            format!(
                "got {}, expected a monitoring interval at least as long as alb_window ({})",
                c.interval, c.window
            ),
        ));
    }
    c.tolerance = match &b.alb_tolerance {
        None => c.tolerance,
        Some(Value::Float(f)) if (0.0..=10.0).contains(f) => *f,
        Some(Value::Integer(n)) if (0..=10).contains(n) => *n as f64,
        Some(other) => {
            return Err(KeyError::new(
                &path.key("alb_tolerance"),
                format!(
                "got {}, expected a deviation from the ideal rate as a fraction, e.g. 0.2 for 20%",
                show(other)
            ),
            ))
        }
    };
    c.max_moves = match b.alb_max_moves {
        None => c.max_moves,
        Some(n @ 1..=4096) => n as u32,
        Some(n) => {
            return Err(KeyError::new(
                &path.key("alb_max_moves"),
                format!("got {n}, expected 1 to 4096 bucket moves per interval"),
            ))
        }
    };
    Ok(c)
}

fn glb(b: &RawBalance, path: &KeyPath) -> R<GlbConfig> {
    let mut c = GlbConfig::default();
    c.heartbeat = time(
        b.glb_heartbeat.as_ref(),
        &path.key("glb_heartbeat"),
        c.heartbeat,
    )?;
    if c.heartbeat < SimTime::from_ns(100) {
        return Err(KeyError::new(
            &path.key("glb_heartbeat"),
            "expected a heartbeat interval of at least 100ns",
        ));
    }
    let compound = choice(
        b.glb_combine.as_deref(),
        &path.key("glb_combine"),
        &[("simple", false), ("compound", true)],
        false,
    )?;
    c.combine = match compound {
        false => {
            if b.glb_remote_weight.is_some() {
                return Err(KeyError::new(
                    &path.key("glb_remote_weight"),
                    "is only used by glb_combine = \"compound\"",
                ));
            }
            Combine::Simple
        }
        true => Combine::Compound {
            remote_weight: fraction(
                b.glb_remote_weight.as_ref(),
                &path.key("glb_remote_weight"),
                0.5,
                "a weight",
            )?,
        },
    };
    Ok(c)
}

/// `[switch.balance]` with its tier and switch overrides.
pub fn balance(raw: Option<&RawBalance>, path: &KeyPath, topo: &Topology) -> R<BalanceConfig> {
    let Some(b) = raw else {
        return Ok(BalanceConfig::default());
    };
    let tiers = topo.kind.tier_names();
    let mut colors = Vec::new();
    for (name, list) in b.colors.iter().flatten() {
        let cp = path.key("colors").key(name);
        if list.is_empty() {
            return Err(KeyError::new(
                &cp,
                "is empty; expected next-hop switch names",
            ));
        }
        let mut switches = Vec::new();
        for (i, s) in list.iter().enumerate() {
            switches.push(switch_id(topo, s).ok_or_else(|| no_switch(&cp.index(i), s, topo))?);
        }
        colors.push(Color {
            name: name.clone(),
            switches,
        });
    }
    let mut unused = Vec::new();
    let mut cfg = BalanceConfig {
        default: spec(b, path, topo, &colors, &mut unused)?,
        ..BalanceConfig::default()
    };
    let nested = |o: &RawBalance, op: &KeyPath| -> R<()> {
        for (k, given) in [
            ("tier", o.tier.is_some()),
            ("switch", o.switch.is_some()),
            ("colors", o.colors.is_some()),
        ] {
            if given {
                return Err(KeyError::new(
                    &op.key(k),
                    format!("belongs in [switch.balance] itself; overrides do not nest {k}"),
                ));
            }
        }
        Ok(())
    };
    for (name, t) in b.tier.iter().flatten() {
        let tp = path.key("tier").key(name);
        let Some(i) = tiers.iter().position(|n| n == name) else {
            return Err(KeyError::new(
                &tp,
                format!(
                    "no tier \"{name}\" in this topology; its tiers are {}",
                    tiers.join(", ")
                ),
            ));
        };
        nested(t, &tp)?;
        cfg.tiers[i] = Some(spec(t, &tp, topo, &colors, &mut unused)?);
    }
    for (name, o) in b.switch.iter().flatten() {
        let sp = path.key("switch").key(name);
        let id = switch_id(topo, name).ok_or_else(|| no_switch(&sp, name, topo))?;
        nested(o, &sp)?;
        cfg.switches
            .push((id, spec(o, &sp, topo, &colors, &mut unused)?));
    }
    cfg.switches.sort_by_key(|e| e.0);
    cfg.colors = colors;
    cfg.unused_keys = unused;
    Ok(cfg)
}

/// Balancer setups that run but do not mean what the user may expect.
pub fn check(topo: &Topology, ecmp: &EcmpConfig, cfg: &BalanceConfig) -> Vec<Finding> {
    let mut out: Vec<Finding> = cfg
        .unused_keys
        .iter()
        .map(|(key, message)| Finding {
            key: key.clone(),
            message: message.clone(),
        })
        .collect();
    if ecmp.fields.has(HashFields::SYMMETRIC) && ecmp.seed == EcmpSeed::PerSwitch {
        out.push(Finding {
            key: "switch.ecmp.symmetric".into(),
            message: "each switch hashes with its own seed, so a flow and its reverse agree only within one switch; set switch.ecmp.seed to a number to keep both directions on one path".into(),
        });
    }
    let glb: Vec<SwitchId> = topo
        .switches
        .iter()
        .enumerate()
        .map(|(i, s)| (SwitchId(i as u32), s.tier))
        .filter(|&(id, tier)| cfg.for_switch(id, tier).uses(Algo::Glb))
        .map(|e| e.0)
        .collect();
    if glb.is_empty() {
        return out;
    }
    // The product's limits: one link between a balancing switch and each
    // neighbour, and 64 path-quality profiles (egress leaves).
    for &s in &glb {
        let mut peers: Vec<SwitchId> = topo.switches[s.idx()]
            .ports
            .iter()
            .filter_map(|&p| match topo.port(topo.port(p).peer).owner {
                Owner::Switch(n) => Some(n),
                Owner::Nic(_) => None,
            })
            .collect();
        peers.sort();
        if let Some(w) = peers.windows(2).find(|w| w[0] == w[1]) {
            out.push(Finding {
                key: "switch.balance".into(),
                message: format!(
                    "GLB on {}: more than one link to {}; GLB products support one link between a leaf and each spine",
                    topo.switches[s.idx()].name,
                    topo.switches[w[0].idx()].name
                ),
            });
            break;
        }
    }
    let leaves = topo.switches.iter().filter(|s| s.tier == 0).count();
    if leaves > 64 {
        out.push(Finding {
            key: "switch.balance".into(),
            message: format!(
                "GLB with {leaves} leaves: GLB products hold 64 path-quality profiles, so at most 64 leaves"
            ),
        });
    }
    out
}
