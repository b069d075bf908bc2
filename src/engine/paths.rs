//! Per-QP path records for dynamic balancers: at every switch, the
//! sequence of egress members a QP's data packets took, run-length
//! encoded, and how often the choice changed. Static hashing needs no
//! record (the path follows from the header, see `qp_route`), so records
//! are kept only when some switch balances dynamically.

use crate::topology::{PortId, QpId, SwitchId, Topology};
use crate::units::SimTime;

/// Steps kept per QP; later changes are still counted.
pub const MAX_STEPS: usize = 64;

/// A run of packets of one QP that one switch sent out of one port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Step {
    pub switch: SwitchId,
    pub port: PortId,
    pub packets: u64,
    /// When its first packet arrived at the switch, and on which port: the
    /// order of steps whatever partition recorded them (two arrivals of
    /// one QP at one time are ordered as the event queue orders them, by
    /// port).
    pub since: (SimTime, PortId),
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct QpPath {
    pub steps: Vec<Step>,
    /// Latest step per switch: (switch, index into `steps`, port).
    last: Vec<(SwitchId, u32, PortId)>,
    /// Packets that left a switch by another member than the previous
    /// packet of the QP at that switch.
    pub changes: u64,
    /// Steps were dropped after `MAX_STEPS`.
    pub truncated: bool,
}

impl QpPath {
    #[inline]
    pub fn record(&mut self, sw: SwitchId, port: PortId, since: (SimTime, PortId)) {
        if let Some(e) = self.last.iter_mut().find(|e| e.0 == sw) {
            if e.2 == port {
                if let Some(s) = self.steps.get_mut(e.1 as usize) {
                    s.packets += 1;
                }
                return;
            }
            self.changes += 1;
            e.2 = port;
            e.1 = self.steps.len() as u32;
        } else {
            self.last.push((sw, self.steps.len() as u32, port));
        }
        if self.steps.len() < MAX_STEPS {
            self.steps.push(Step {
                switch: sw,
                port,
                packets: 1,
                since,
            });
        } else {
            self.truncated = true;
            // Points past the end: later packets of this run go uncounted.
            if let Some(e) = self.last.iter_mut().find(|e| e.0 == sw) {
                e.1 = u32::MAX;
            }
        }
    }

    /// `leaf0[spine1*120 spine0*40] spine1[leaf3*120] spine0[leaf3*40]`:
    /// per switch in the order first met, the neighbour each run went to
    /// and its packets.
    pub fn describe(&self, topo: &Topology) -> String {
        let mut switches: Vec<SwitchId> = Vec::new();
        for s in &self.steps {
            if !switches.contains(&s.switch) {
                switches.push(s.switch);
            }
        }
        let mut out: Vec<String> = switches
            .iter()
            .map(|&sw| {
                let runs: Vec<String> = self
                    .steps
                    .iter()
                    .filter(|s| s.switch == sw)
                    .map(|s| format!("{}*{}", topo.member_name(s.port), s.packets))
                    .collect();
                format!("{}[{}]", topo.switches[sw.idx()].name, runs.join(" "))
            })
            .collect();
        if self.truncated {
            out.push("...".into());
        }
        out.join(" ")
    }
}

/// Records of every QP, when some balancer is dynamic.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct PathLog {
    pub enabled: bool,
    pub qps: Vec<QpPath>,
}

impl PathLog {
    pub fn new(enabled: bool, qps: usize) -> Self {
        PathLog {
            enabled,
            qps: if enabled {
                vec![QpPath::default(); qps]
            } else {
                Vec::new()
            },
        }
    }

    pub fn get(&self, q: QpId) -> Option<&QpPath> {
        self.qps.get(q.idx())
    }

    /// Adds the records `other`, another partition of the same run, kept
    /// at its switches: each QP's steps from every partition in the order
    /// they began, the first `MAX_STEPS` of them (each partition kept its
    /// own first `MAX_STEPS`, so no step of those is missing), and the
    /// changes summed.
    pub fn absorb(&mut self, other: PathLog) {
        for (mine, theirs) in self.qps.iter_mut().zip(other.qps) {
            if theirs.steps.is_empty() && theirs.changes == 0 {
                continue;
            }
            mine.changes += theirs.changes;
            mine.truncated |= theirs.truncated;
            mine.steps.extend(theirs.steps);
            mine.steps.sort_by_key(|s| s.since);
            if mine.steps.len() > MAX_STEPS {
                mine.steps.truncate(MAX_STEPS);
                mine.truncated = true;
            }
            mine.last.clear();
        }
    }
}

use crate::topology::Owner;

impl super::Simulation {
    /// The egress ports a QP's data packets leave through, from its NIC
    /// port to the last switch, when every switch on the way balances by
    /// header alone; `None` if some choice is dynamic.
    pub fn qp_route(&self, q: QpId) -> Option<Vec<PortId>> {
        self.static_route(q, false)
    }

    /// The same for the QP's acknowledgements, from the receiver back.
    pub fn qp_ack_route(&self, q: QpId) -> Option<Vec<PortId>> {
        self.static_route(q, true)
    }

    fn static_route(&self, q: QpId, reverse: bool) -> Option<Vec<PortId>> {
        let qp = self.nics.qp(q);
        if !reverse && !qp.path_crc.is_empty() {
            // MRC sprays each QP over several UDP source ports.
            return None;
        }
        let start = if reverse { qp.dst_port } else { qp.src_port };
        let pkt = self.nics.probe(q, reverse);
        let mut route = vec![start];
        let mut at = self.topo.port(start).peer;
        for _ in 0..=self.topo.switches.len() {
            match self.egress.owner(at) {
                Owner::Nic(_) => return Some(route),
                Owner::Switch(s) => {
                    let routes = &self.routes.switches[s.idx()];
                    let group = crate::switch::forward::lookup(
                        routes,
                        pkt.dst,
                        self.routes.nic_class[pkt.dst.idx()],
                    )?;
                    let out = self.egress.switches()[s.idx()]
                        .balancer
                        .static_choice(routes, group, &pkt)?;
                    route.push(out);
                    at = self.topo.port(out).peer;
                }
            }
        }
        None
    }

    /// How QP `q`'s data bytes spread over the egress ports on their way
    /// to `dst`, as shares of them: its static route whole, or, past a
    /// switch that balances dynamically (DLB, GLB, ALB, spraying, also
    /// by a selective rule its data packets match), an equal share on
    /// every member of the equal-cost group (of a TELB colour's members
    /// where a policy pins it), the split those balancers aim at and
    /// per-packet spraying reaches (the flow level's paths, `fluid`).
    /// Ports in order of first reach.
    pub(super) fn qp_split(&self, q: QpId, dst: crate::topology::NicId) -> Vec<(PortId, f64)> {
        if let Some(route) = self.qp_route(q) {
            return route.into_iter().map(|p| (p, 1.0)).collect();
        }
        // Most of a message's packets: what selective rules see.
        let data_opcode = |mut pkt: crate::wire::Packet| {
            if self.scenario.transport.write_mode == crate::nic::WriteMode::WriteOnly {
                pkt.opcode = crate::wire::Opcode::WriteOnly;
            }
            pkt
        };
        let mut out: Vec<(PortId, f64)> = Vec::new();
        // A multipath QP sprays its packets over its paths evenly.
        let paths = self.nics.mrc_paths(q);
        if paths.is_empty() {
            let start = self.nics.qp(q).src_port;
            let pkt = data_opcode(self.nics.probe(q, false));
            self.spread(start, 1.0, &pkt, dst, &mut out);
        } else {
            // Its paths through a dead link are dropped, as the sender
            // moves them to spare entropy values once they lose packets
            // (unless every path is dead: then they wait for routing).
            let mut each: Vec<Vec<(PortId, f64)>> = paths
                .into_iter()
                .map(|(start, pkt)| {
                    let mut one = Vec::new();
                    self.spread(start, 1.0, &data_opcode(pkt), dst, &mut one);
                    one
                })
                .collect();
            let dead = |one: &Vec<(PortId, f64)>| one.iter().any(|e| self.egress.is_down(e.0));
            if each.iter().any(|one| !dead(one)) {
                each.retain(|one| !dead(one));
            }
            let w = 1.0 / each.len() as f64;
            for (p, share) in each.into_iter().flatten() {
                match out.iter_mut().find(|e| e.0 == p) {
                    Some(e) => e.1 += share * w,
                    None => out.push((p, share * w)),
                }
            }
        }
        out
    }

    /// Adds to `out` the ports `share` of a QP's bytes crosses from port
    /// `start` on, as packets like `pkt` go to `dst` (see `qp_split`).
    fn spread(
        &self,
        start: PortId,
        share: f64,
        pkt: &crate::wire::Packet,
        dst: crate::topology::NicId,
        out: &mut Vec<(PortId, f64)>,
    ) {
        let add_to = |out: &mut Vec<(PortId, f64)>, p: PortId, share: f64| match out
            .iter_mut()
            .find(|e| e.0 == p)
        {
            Some(e) => e.1 += share,
            None => out.push((p, share)),
        };
        add_to(out, start, share);
        let mut here: Vec<(PortId, f64)> = vec![(self.topo.port(start).peer, share)];
        for _ in 0..=self.topo.switches.len() {
            let mut next: Vec<(PortId, f64)> = Vec::new();
            let mut add = |p: PortId, share: f64, next: &mut Vec<(PortId, f64)>| {
                add_to(out, p, share);
                add_to(next, self.topo.port(p).peer, share);
            };
            for &(at, share) in &here {
                let Owner::Switch(s) = self.egress.owner(at) else {
                    continue;
                };
                let routes = &self.routes.switches[s.idx()];
                let Some(group) =
                    crate::switch::forward::lookup(routes, dst, self.routes.nic_class[dst.idx()])
                else {
                    continue;
                };
                let ctx = crate::switch::balance::Ctx {
                    now: self.now,
                    quality: &self.balance.quality,
                    ingress: at,
                    queue: 0,
                    class: self.routes.nic_class[dst.idx()],
                    tenants: self.nics.tenants(),
                };
                match self.egress.switches()[s.idx()]
                    .balancer
                    .fluid_choice(routes, group, pkt, &ctx)
                {
                    Ok(p) => add(p, share, &mut next),
                    Err(members) => {
                        let each = share / members.len() as f64;
                        for p in members {
                            add(p, each, &mut next);
                        }
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            here = next;
        }
    }

    /// The switches a QP's data packets traverse (see `qp_route`).
    pub fn qp_path(&self, q: QpId) -> Option<Vec<crate::topology::SwitchId>> {
        let route = self.qp_route(q)?;
        Some(
            route[1..]
                .iter()
                .filter_map(|&p| match self.egress.owner(p) {
                    Owner::Switch(s) => Some(s),
                    Owner::Nic(_) => None,
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_changes_per_switch() {
        let mut p = QpPath::default();
        let (a, b) = (SwitchId(0), SwitchId(1));
        for (t, port) in [1, 1, 2, 2, 2, 1].into_iter().enumerate() {
            p.record(a, PortId(port), (SimTime(t as u64), PortId(0)));
            p.record(b, PortId(9), (SimTime(t as u64), PortId(1)));
        }
        assert_eq!(p.changes, 2);
        let runs: Vec<(u32, u64)> = p.steps.iter().map(|s| (s.port.0, s.packets)).collect();
        assert_eq!(runs, vec![(1, 2), (9, 6), (2, 3), (1, 1)]);
    }

    #[test]
    fn long_records_are_capped_but_changes_counted() {
        let mut p = QpPath::default();
        for i in 0..1000u32 {
            p.record(SwitchId(0), PortId(i % 2), (SimTime(i as u64), PortId(0)));
        }
        assert_eq!(p.steps.len(), MAX_STEPS);
        assert!(p.truncated);
        assert_eq!(p.changes, 999);
    }

    /// Records split between two partitions by switch, then merged, are
    /// the records of one log, truncation included.
    #[test]
    fn partitions_merge_into_the_one_log() {
        for n in [10u64, 70, 400] {
            let mut one = PathLog::new(true, 1);
            let mut parts = [PathLog::new(true, 1), PathLog::new(true, 1)];
            for i in 0..n {
                let sw = SwitchId((i * 7 % 5) as u32);
                let port = PortId((i * 13 % 3) as u32 + 10 * sw.0);
                // As the queue orders them: two arrivals at one time by
                // their ports.
                let since = (SimTime(i / 2), PortId((i % 2) as u32));
                one.qps[0].record(sw, port, since);
                parts[(sw.0 % 2) as usize].qps[0].record(sw, port, since);
            }
            let [mut a, b] = parts;
            a.absorb(b);
            let (x, y) = (&one.qps[0], &a.qps[0]);
            assert_eq!(x.steps, y.steps, "{n} records");
            assert_eq!((x.changes, x.truncated), (y.changes, y.truncated));
        }
    }
}
