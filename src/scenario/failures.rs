//! `[[failure]]` and `[routing]`: links and switches that fail and
//! recover, links that slow down, and how long routing takes to react.

use super::error::{KeyError, KeyPath};
use super::raw::{RawFailure, RawRouting};
use super::values::{rate, time};
use crate::scenario::hosts::ScaleUp;
use crate::topology::{HostId, LinkId, Owner, SwitchId, Topology};
use crate::units::{Rate, SimTime};

type R<T> = Result<T, KeyError>;

/// What fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Link(LinkId),
    Switch(SwitchId),
    /// `count` of the NVLink switch chips of `host`'s domain.
    NvlinkSwitches {
        host: HostId,
        count: u32,
    },
    /// The links of the NICs of `host`'s GPUs `first..first + gpus`: a
    /// compute tray, or the whole host (a rack).
    Nics {
        host: HostId,
        first: u32,
        gpus: u32,
        tray: Option<u32>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub target: Target,
    pub at: SimTime,
    /// When it comes back (`None`: never).
    pub recover: Option<SimTime>,
    /// A link that slows to this rate instead of failing.
    pub degrade: Option<Rate>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FailureConfig {
    pub events: Vec<Failure>,
    /// Time from a failure or recovery until every switch forwards on the
    /// new routes; frames sent onto a dead link meanwhile are lost.
    pub reconverge: SimTime,
}

impl Default for FailureConfig {
    fn default() -> Self {
        FailureConfig {
            events: Vec::new(),
            reconverge: SimTime::from_us(50),
        }
    }
}

impl Target {
    /// `leaf0-spine1` (with `/k` for the k-th of parallel links) or the
    /// switch's name.
    pub fn name(self, topo: &Topology) -> String {
        match self {
            Target::Switch(s) => topo.switches[s.idx()].name.clone(),
            Target::NvlinkSwitches { host, count } => {
                format!("host{} NVLink switches x{count}", host.0)
            }
            Target::Nics { host, tray, .. } => match tray {
                Some(t) => format!("host{}/tray{t}", host.0),
                None => format!("host{}", host.0),
            },
            Target::Link(l) => {
                let link = topo.links[l.idx()];
                let (a, b) = (topo.owner_name(link.a), topo.owner_name(link.b));
                let parallel: Vec<LinkId> = parallel_links(topo, link.a, link.b);
                if parallel.len() > 1 {
                    let k = parallel.iter().position(|&x| x == l).unwrap_or(0);
                    format!("{a}-{b}/{k}")
                } else {
                    format!("{a}-{b}")
                }
            }
        }
    }
}

/// Every link between the owners of ports `a` and `b`, in link order.
fn parallel_links(
    topo: &Topology,
    a: crate::topology::PortId,
    b: crate::topology::PortId,
) -> Vec<LinkId> {
    let (oa, ob) = (topo.port(a).owner, topo.port(b).owner);
    (0..topo.links.len() as u32)
        .map(LinkId)
        .filter(|&l| {
            let x = topo.links[l.idx()];
            let (xa, xb) = (topo.port(x.a).owner, topo.port(x.b).owner);
            (xa == oa && xb == ob) || (xa == ob && xb == oa)
        })
        .collect()
}

fn owner_by_name(topo: &Topology, name: &str) -> Option<Owner> {
    if let Some(i) = topo.switches.iter().position(|s| s.name == name) {
        return Some(Owner::Switch(SwitchId(i as u32)));
    }
    topo.nics
        .iter()
        .position(|n| n.name == name)
        .map(|i| Owner::Nic(crate::topology::NicId(i as u32)))
}

pub fn failures(
    raw: &[RawFailure],
    routing: Option<&RawRouting>,
    topo: &Topology,
    host: &super::HostConfig,
    root: &KeyPath,
) -> R<FailureConfig> {
    let mut cfg = FailureConfig::default();
    if let Some(r) = routing {
        let p = root.key("routing").key("reconverge");
        cfg.reconverge = time(r.reconverge.as_ref(), &p, cfg.reconverge)?;
    }
    for (i, f) in raw.iter().enumerate() {
        let p = root.key("failure").index(i);
        let nvlink = f.nvlink_switches.is_some() || f.host.is_some() || f.tray.is_some();
        let target = match (&f.link, &f.switch) {
            (None, None) if nvlink => nvlink_target(f, topo, host, &p)?,
            (Some(_), _) | (_, Some(_)) if nvlink => {
                return Err(KeyError::new(
                    &p,
                    "expected a link, a switch, or a host's nvlink_switches, one at a time",
                ))
            }
            (Some(_), Some(_)) | (None, None) => {
                return Err(KeyError::new(
                    &p,
                    "expected exactly one of link = [\"a\", \"b\"] or switch = \"name\"",
                ))
            }
            (None, Some(name)) => {
                for k in ["index", "rate"] {
                    let given = if k == "index" {
                        f.index.is_some()
                    } else {
                        f.rate.is_some()
                    };
                    if given {
                        return Err(KeyError::new(&p.key(k), "only applies to a link failure"));
                    }
                }
                match owner_by_name(topo, name) {
                    Some(Owner::Switch(s)) => Target::Switch(s),
                    _ => {
                        return Err(KeyError::new(
                            &p.key("switch"),
                            format!(
                                "no switch \"{name}\" in this topology (e.g. \"{}\")",
                                topo.switches[0].name
                            ),
                        ))
                    }
                }
            }
            (Some(ends), None) => {
                let lp = p.key("link");
                let [a, b] = ends.as_slice() else {
                    return Err(KeyError::new(
                        &lp,
                        "expected the two ends of the link, e.g. [\"leaf0\", \"spine1\"]",
                    ));
                };
                let mut owners = Vec::new();
                for (k, n) in [a, b].into_iter().enumerate() {
                    owners.push(owner_by_name(topo, n).ok_or_else(|| {
                        KeyError::new(
                            &lp.index(k),
                            format!("no switch or NIC \"{n}\" in this topology"),
                        )
                    })?);
                }
                let links: Vec<LinkId> = (0..topo.links.len() as u32)
                    .map(LinkId)
                    .filter(|&l| {
                        let x = topo.links[l.idx()];
                        let (xa, xb) = (topo.port(x.a).owner, topo.port(x.b).owner);
                        (xa == owners[0] && xb == owners[1]) || (xa == owners[1] && xb == owners[0])
                    })
                    .collect();
                if links.is_empty() {
                    return Err(KeyError::new(&lp, format!("no link between {a} and {b}")));
                }
                let k = match f.index {
                    None => 0,
                    Some(k) if (0..links.len() as i64).contains(&k) => k as usize,
                    Some(k) => {
                        return Err(KeyError::new(
                            &p.key("index"),
                            format!(
                            "got {k}, but {a} and {b} have {} link(s) between them (index 0 to {})",
                            links.len(),
                            links.len() - 1
                        ),
                        ))
                    }
                };
                Target::Link(links[k])
            }
        };
        let Some(at) = f.at.as_ref() else {
            return Err(KeyError::new(
                &p.key("at"),
                "missing; expected when it fails, e.g. \"100us\"",
            ));
        };
        let at = time(Some(at), &p.key("at"), SimTime::ZERO)?;
        let recover = match &f.recover {
            None => None,
            Some(v) => {
                let t = time(Some(v), &p.key("recover"), SimTime::ZERO)?;
                if t <= at {
                    return Err(KeyError::new(
                        &p.key("recover"),
                        format!("got {t}, expected a time after at ({at})"),
                    ));
                }
                Some(t)
            }
        };
        let degrade = match (&f.rate, target) {
            (None, _) => None,
            (Some(v), Target::Link(l)) => {
                let r = rate(Some(v), &p.key("rate"), Rate::gbps(1))?;
                let full = topo.port(topo.links[l.idx()].a).rate;
                if r.bps() == 0 || r >= full {
                    return Err(KeyError::new(
                        &p.key("rate"),
                        format!("got {r}, expected a rate above 0 and below the link's {full}"),
                    ));
                }
                Some(r)
            }
            (Some(_), Target::Switch(_) | Target::NvlinkSwitches { .. } | Target::Nics { .. }) => {
                return Err(KeyError::new(
                    &p.key("rate"),
                    "only applies to a link failure",
                ))
            }
        };
        // One target down twice at once would come back at the first
        // recovery, whatever the second said.
        let ends = |f: &Failure| f.recover.unwrap_or(SimTime::MAX);
        if let Some(j) = cfg.events.iter().position(|e| {
            e.target == target && e.at < recover.unwrap_or(SimTime::MAX) && at < ends(e)
        }) {
            return Err(KeyError::new(
                &p,
                format!(
                    "fails the same {} as failure[{j}] while that one is still down (from {} to {}); give one failure for the whole time, or make them follow each other",
                    match target {
                        Target::Link(_) => "link",
                        Target::Switch(_) => "switch",
                        Target::NvlinkSwitches { .. } => "host's NVLink switches",
                        Target::Nics { .. } => "host's NICs",
                    },
                    cfg.events[j].at,
                    cfg.events[j]
                        .recover
                        .map_or("the end".to_string(), |t| t.to_string())
                ),
            ));
        }
        cfg.events.push(Failure {
            target,
            at,
            recover,
            degrade,
        });
    }
    Ok(cfg)
}

/// `host = H` with `nvlink_switches = N`: N of the switch chips of host
/// H's NVLink domain fail (a GB200 NVL72 switch tray holds two); with
/// `tray = T`, the links of compute tray T's NICs; alone, those of every
/// NIC of the host (a rack).
fn nvlink_target(
    f: &RawFailure,
    topo: &Topology,
    host: &super::HostConfig,
    p: &KeyPath,
) -> R<Target> {
    let Some(h) = f.host else {
        return Err(KeyError::new(
            &p.key("host"),
            "missing; expected the index of the host (scale-up domain) the failure is in, e.g. host = 0",
        ));
    };
    if h < 0 || h as usize >= topo.hosts.len() {
        return Err(KeyError::new(
            &p.key("host"),
            format!("got {h}, expected a host index below {}", topo.hosts.len()),
        ));
    }
    let hid = HostId(h as u32);
    if f.nvlink_switches.is_none() {
        return nics_target(f, topo, host, hid, p);
    }
    if f.tray.is_some() {
        return Err(KeyError::new(
            &p.key("tray"),
            "is not used with nvlink_switches: give one failure for the tray's NICs and one for the switch chips",
        ));
    }
    let ScaleUp::Switched { switches } = host.scale_up else {
        return Err(KeyError::new(
            &p.key("nvlink_switches"),
            "the hosts' GPUs are a mesh (host.scale_up = \"mesh\"), with no switch chips to fail",
        ));
    };
    let count = match f.nvlink_switches {
        Some(n) if n >= 1 && n < i64::from(switches) => n as u32,
        Some(n) => {
            return Err(KeyError::new(
                &p.key("nvlink_switches"),
                format!("got {n}, expected 1 to {} of the domain's {switches} switch chips (one must stay up)", switches - 1),
            ))
        }
        None => {
            return Err(KeyError::new(
                &p.key("nvlink_switches"),
                format!("missing; expected how many of host {h}'s {switches} NVLink switch chips fail"),
            ))
        }
    };
    if let Some(k) = ["index", "rate"].into_iter().find(|&k| {
        if k == "index" {
            f.index.is_some()
        } else {
            f.rate.is_some()
        }
    }) {
        return Err(KeyError::new(&p.key(k), "only applies to a link failure"));
    }
    Ok(Target::NvlinkSwitches { host: hid, count })
}

/// A compute tray's NICs (`tray = T`) or every NIC of the host.
fn nics_target(
    f: &RawFailure,
    topo: &Topology,
    host: &super::HostConfig,
    h: HostId,
    p: &KeyPath,
) -> R<Target> {
    if f.index.is_some() {
        return Err(KeyError::new(
            &p.key("index"),
            "only applies to a link failure",
        ));
    }
    let all = topo.hosts[h.idx()].gpus.len() as u32;
    let Some(t) = f.tray else {
        return Ok(Target::Nics {
            host: h,
            first: 0,
            gpus: all,
            tray: None,
        });
    };
    let per = host.gpus_per_tray;
    if per == 0 || per >= all {
        return Err(KeyError::new(
            &p.key("tray"),
            "the host is one board (host.gpus_per_tray is not below its GPUs); give host alone for all its NICs",
        ));
    }
    let trays = all / per;
    if t < 0 || t >= i64::from(trays) {
        return Err(KeyError::new(
            &p.key("tray"),
            format!("got {t}, expected a tray index below {trays}"),
        ));
    }
    Ok(Target::Nics {
        host: h,
        first: t as u32 * per,
        gpus: per,
        tray: Some(t as u32),
    })
}
