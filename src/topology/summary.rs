//! What `fabricsim topo` prints: switches per tier, ports used, links per
//! tier and speed, downlink versus uplink capacity and the oversubscription
//! ratio per tier, and bisection bandwidth.
//!
//! Bisection bandwidth is computed for the tree-shaped fabrics built here:
//! a cut splitting the hosts in half crosses at most half of every tier's
//! uplink capacity, and never more than half the hosts' injection
//! bandwidth; the minimum over tiers is the answer.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{Owner, Topology, TopologyKind};
use crate::units::{fmt_bps, Rate};

#[derive(Debug, Clone, serde::Serialize)]
pub struct TierSummary {
    pub tier: String,
    pub switches: usize,
    pub ports_min: usize,
    pub ports_max: usize,
    pub down_bps: u64,
    pub up_bps: u64,
    /// Downlink over uplink capacity; `None` for the top tier.
    pub oversubscription: Option<f64>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct LinkClass {
    pub tier: String,
    pub count: usize,
    pub rate_bps: u64,
}

/// One switch's port use.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SwitchPorts {
    pub name: String,
    pub tier: String,
    pub ports_used: usize,
    pub down_bps: u64,
    pub up_bps: u64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct TopologySummary {
    pub kind: String,
    pub hosts: usize,
    pub gpus: usize,
    pub nics: usize,
    pub tiers: Vec<TierSummary>,
    pub links: Vec<LinkClass>,
    pub host_injection_bps: u64,
    pub bisection_bps: u64,
    pub cross_rail: bool,
    pub switch_radix: Option<u32>,
    pub switches: Vec<SwitchPorts>,
}

impl TopologySummary {
    pub fn of(topo: &Topology, cross_rail: bool) -> TopologySummary {
        let names = topo.kind.tier_names();
        let max_tier = topo.switches.iter().map(|s| s.tier).max().unwrap_or(0);
        let switches: Vec<SwitchPorts> = topo
            .switches
            .iter()
            .map(|s| {
                let (mut down, mut up) = (0u64, 0u64);
                for &p in &s.ports {
                    let peer_tier = topo.owner_tier(topo.port(p).peer);
                    if peer_tier < s.tier as i32 {
                        down += topo.port(p).rate.bps();
                    } else if peer_tier > s.tier as i32 {
                        up += topo.port(p).rate.bps();
                    }
                }
                SwitchPorts {
                    name: s.name.clone(),
                    tier: names[s.tier as usize].to_string(),
                    ports_used: s.ports.len(),
                    down_bps: down,
                    up_bps: up,
                }
            })
            .collect();
        let mut tiers = Vec::new();
        for t in 0..=max_tier {
            let sws: Vec<_> = topo.switches.iter().filter(|s| s.tier == t).collect();
            let mine = || switches.iter().filter(|s| s.tier == names[t as usize]);
            let down: u64 = mine().map(|s| s.down_bps).sum();
            let up: u64 = mine().map(|s| s.up_bps).sum();
            tiers.push(TierSummary {
                tier: names[t as usize].to_string(),
                switches: sws.len(),
                ports_min: sws.iter().map(|s| s.ports.len()).min().unwrap_or(0),
                ports_max: sws.iter().map(|s| s.ports.len()).max().unwrap_or(0),
                down_bps: down,
                up_bps: up,
                oversubscription: (up > 0).then(|| down as f64 / up as f64),
            });
        }
        // (tier, between two switches of that tier, rate): a ring's links
        // join switches of one tier.
        let mut classes: BTreeMap<(u8, bool, u64), usize> = BTreeMap::new();
        let level =
            |l: &super::Link| matches!(topo.port(l.a).owner, Owner::Switch(_)) && l.tier == 0;
        for l in &topo.links {
            *classes
                .entry((l.tier, level(l), topo.port(l.a).rate.bps()))
                .or_default() += 1;
        }
        let links = classes
            .into_iter()
            .map(|((tier, level, rate), count)| LinkClass {
                tier: if level {
                    format!("{}-{}", names[0], names[0])
                } else if tier == 0 {
                    format!("host-{}", names[0])
                } else {
                    format!("{}-{}", names[tier as usize - 1], names[tier as usize])
                },
                count,
                rate_bps: rate,
            })
            .collect();
        let host_injection: u64 = topo
            .ports
            .iter()
            .filter(|p| matches!(p.owner, Owner::Nic(_)))
            .map(|p| p.rate.bps())
            .sum();
        let mut bisection = host_injection / 2;
        for t in &tiers {
            if t.up_bps > 0 {
                bisection = bisection.min(t.up_bps / 2);
            }
        }
        // Cutting a ring in two halves cuts two of its links.
        if topo.kind == TopologyKind::Ring {
            let ring: u64 = topo
                .links
                .iter()
                .filter(|l| level(l))
                .map(|l| topo.port(l.a).rate.bps())
                .min()
                .unwrap_or(0);
            bisection = bisection.min(2 * ring);
        }
        TopologySummary {
            kind: topo.kind.name().to_string(),
            hosts: topo.hosts.len(),
            gpus: topo.gpus.len(),
            nics: topo.nics.len(),
            tiers,
            links,
            host_injection_bps: host_injection,
            bisection_bps: bisection,
            cross_rail,
            switch_radix: topo.switch_radix,
            switches,
        }
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "topology {}: {} hosts, {} GPUs, {} NICs",
            self.kind, self.hosts, self.gpus, self.nics
        );
        let _ = writeln!(
            s,
            "\n{:<12} {:>8} {:>11} {:>14} {:>14} {:>10}",
            "tier", "switches", "ports used", "down capacity", "up capacity", "oversub"
        );
        for t in &self.tiers {
            let ports = if t.ports_min == t.ports_max {
                t.ports_min.to_string()
            } else {
                format!("{}-{}", t.ports_min, t.ports_max)
            };
            let over = match t.oversubscription {
                Some(r) => format!("{r:.2}:1"),
                None => "top".into(),
            };
            let _ = writeln!(
                s,
                "{:<12} {:>8} {:>11} {:>14} {:>14} {:>10}",
                t.tier,
                t.switches,
                ports,
                fmt_bps(t.down_bps as f64),
                if t.up_bps > 0 {
                    fmt_bps(t.up_bps as f64)
                } else {
                    "-".into()
                },
                over
            );
        }
        if self.switches.len() <= 32 {
            let _ = writeln!(
                s,
                "\n{:<16} {:<12} {:>10} {:>14} {:>14}",
                "switch", "tier", "ports used", "down", "up"
            );
            for sw in &self.switches {
                let _ = writeln!(
                    s,
                    "{:<16} {:<12} {:>10} {:>14} {:>14}",
                    sw.name,
                    sw.tier,
                    sw.ports_used,
                    fmt_bps(sw.down_bps as f64),
                    if sw.up_bps > 0 {
                        fmt_bps(sw.up_bps as f64)
                    } else {
                        "-".into()
                    }
                );
            }
        } else {
            let _ = writeln!(
                s,
                "\n({} switches; `--json` lists each one)",
                self.switches.len()
            );
        }
        let _ = writeln!(s, "\n{:<24} {:>7} {:>8}", "links", "count", "speed");
        for l in &self.links {
            let _ = writeln!(
                s,
                "{:<24} {:>7} {:>8}",
                l.tier,
                l.count,
                Rate(l.rate_bps).to_string()
            );
        }
        if let Some(r) = self.switch_radix {
            let most = self
                .switches
                .iter()
                .map(|s| s.ports_used)
                .max()
                .unwrap_or(0);
            let _ = writeln!(
                s,
                "\nswitch radix {r}: at most {most} ports used ({} spare)",
                r as usize - most
            );
        }
        let _ = writeln!(
            s,
            "\nhost injection bandwidth {}\nbisection bandwidth      {}{}",
            fmt_bps(self.host_injection_bps as f64),
            fmt_bps(self.bisection_bps as f64),
            if self.cross_rail {
                ""
            } else {
                " (within each rail: rails are not connected by the network)"
            }
        );
        s
    }
}
