//! Traffic rules for the balancers: a `Match` on packet fields (as a
//! switch ACL or policy would see them) used by selective DLB and
//! selective spraying, and by traffic-engineering load balancing (TELB /
//! BGP-DPF), which pins matching traffic to a path colour, a named set of
//! next-hop switches, with a backup colour for when the first has lost
//! every member.

use super::{Algo, Ctx};
use crate::topology::{NicId, Owner, PortId, SwitchId, Topology};
use crate::wire::{Opcode, Packet};

/// Packet fields a rule can match; an empty field matches anything.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Match {
    /// Tenant (job) ids of the workload that sent the packet.
    pub tenants: Vec<u16>,
    /// Sending NICs (a GPU's NIC).
    pub src_nics: Vec<NicId>,
    /// BTH destination QP number, inclusive range.
    pub qpn: Option<(u32, u32)>,
    /// UDP source port, inclusive range.
    pub udp_sport: Option<(u16, u16)>,
    /// Ingress interfaces, by who is at the other end of the link.
    pub ingress: Vec<Owner>,
    /// BTH opcodes, as a mask of `opcode_bit`.
    pub opcodes: u16,
    /// Traffic classes (egress queues), as a mask.
    pub queues: u8,
}

/// The bit of an opcode in `Match::opcodes`.
pub fn opcode_bit(o: Opcode) -> u16 {
    1 << (o as u16)
}

/// Opcode names rules accept.
pub const OPCODE_NAMES: &[(&str, Opcode)] = &[
    ("write-first", Opcode::WriteFirst),
    ("write-middle", Opcode::WriteMiddle),
    ("write-last", Opcode::WriteLast),
    ("write-only", Opcode::WriteOnly),
    ("ack", Opcode::Ack),
    ("nak", Opcode::Nak),
    ("cnp", Opcode::Cnp),
];

/// A `Match` compiled for one switch: ingress interfaces become the
/// switch's own ports.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Compiled {
    m: Match,
    ingress: Vec<PortId>,
}

impl Compiled {
    pub fn new(m: &Match, topo: &Topology, sw: SwitchId) -> Self {
        let ingress = topo.switches[sw.idx()]
            .ports
            .iter()
            .copied()
            .filter(|&p| m.ingress.contains(&topo.port(topo.port(p).peer).owner))
            .collect();
        Compiled {
            m: m.clone(),
            ingress,
        }
    }

    #[inline]
    pub fn matches(&self, pkt: &Packet, ctx: &Ctx) -> bool {
        let m = &self.m;
        (m.opcodes == 0 || m.opcodes & opcode_bit(pkt.opcode) != 0)
            && (m.queues == 0 || m.queues & (1 << ctx.queue) != 0)
            && m.qpn.is_none_or(|(lo, hi)| {
                let q = super::hash::qpn(pkt.qp);
                lo <= q && q <= hi
            })
            && m.udp_sport
                .is_none_or(|(lo, hi)| lo <= pkt.udp_sport && pkt.udp_sport <= hi)
            && (m.src_nics.is_empty() || m.src_nics.contains(&pkt.src))
            && (m.ingress.is_empty() || self.ingress.contains(&ctx.ingress))
            && (m.tenants.is_empty()
                || m.tenants
                    .contains(&ctx.tenants.get(pkt.qp.idx()).copied().unwrap_or(0)))
    }
}

/// Selective DLB or spraying: matching packets use `algo`.
#[derive(Clone, Debug, PartialEq)]
pub struct Selective {
    pub when: Match,
    pub algo: Algo,
}

/// A named set of next-hop switches.
#[derive(Clone, Debug, PartialEq)]
pub struct Color {
    pub name: String,
    pub switches: Vec<SwitchId>,
}

/// A TELB policy: matching traffic uses the ports towards `color`, or
/// towards `backup` once `color` has no live member.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub when: Match,
    pub color: usize,
    pub backup: Option<usize>,
}

/// What TELB did at one switch, in packets.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct TelbStats {
    pub primary: u64,
    pub backup: u64,
    /// Neither colour had a live member: the default balancer chose.
    pub fallback: u64,
}

/// TELB at one switch: each policy with the switch's ports towards its
/// colours.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Telb {
    rules: Vec<(Compiled, Vec<PortId>, Vec<PortId>)>,
    pub stats: TelbStats,
}

/// Which members TELB allows for a packet.
pub enum Pinned {
    /// No policy applies here.
    Free,
    /// These members (a colour's live ports in the group).
    To,
    /// A policy applies but neither colour has a live member.
    Fallback,
}

impl Telb {
    pub fn new(policies: &[Policy], colors: &[Color], topo: &Topology, sw: SwitchId) -> Self {
        let towards = |c: usize| -> Vec<PortId> {
            topo.switches[sw.idx()]
                .ports
                .iter()
                .copied()
                .filter(|&p| match topo.port(topo.port(p).peer).owner {
                    Owner::Switch(n) => colors[c].switches.contains(&n),
                    Owner::Nic(_) => false,
                })
                .collect()
        };
        Telb {
            rules: policies
                .iter()
                .map(|p| {
                    (
                        Compiled::new(&p.when, topo, sw),
                        towards(p.color),
                        p.backup.map(towards).unwrap_or_default(),
                    )
                })
                .collect(),
            stats: TelbStats::default(),
        }
    }

    /// Fills `out` with the members of the group the first matching
    /// policy allows. A policy applies where one of its colours has ports
    /// in the group (after a failure the primary's may have gone from the
    /// routes altogether).
    pub fn pin(
        &mut self,
        members: &[PortId],
        live: impl Fn(PortId) -> bool,
        pkt: &Packet,
        ctx: &Ctx,
        out: &mut Vec<PortId>,
    ) -> Pinned {
        let (pinned, colour) = self.pinned(members, live, pkt, ctx, out);
        match (&pinned, colour) {
            (Pinned::To, 0) => self.stats.primary += 1,
            (Pinned::To, _) => self.stats.backup += 1,
            (Pinned::Fallback, _) => self.stats.fallback += 1,
            (Pinned::Free, _) => {}
        }
        pinned
    }

    /// What `pin` does, counting nothing: and which colour it pinned to
    /// (0 the primary, 1 the backup).
    pub fn pinned(
        &self,
        members: &[PortId],
        live: impl Fn(PortId) -> bool,
        pkt: &Packet,
        ctx: &Ctx,
        out: &mut Vec<PortId>,
    ) -> (Pinned, usize) {
        for (m, primary, backup) in &self.rules {
            let applies = members
                .iter()
                .any(|p| primary.contains(p) || backup.contains(p));
            if !applies || !m.matches(pkt, ctx) {
                continue;
            }
            for (colour, ports) in [primary, backup].into_iter().enumerate() {
                out.extend(
                    members
                        .iter()
                        .copied()
                        .filter(|&p| ports.contains(&p) && live(p)),
                );
                if !out.is_empty() {
                    return (Pinned::To, colour);
                }
            }
            return (Pinned::Fallback, 0);
        }
        (Pinned::Free, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::QpId;
    use crate::units::SimTime;

    fn pkt(src: u32, qp: u32, sport: u16, opcode: Opcode) -> Packet {
        Packet {
            src: NicId(src),
            dst: NicId(9),
            qp: QpId(qp),
            psn: 0,
            payload: 0,
            wire_bytes: 0,
            header_crc: 0,
            udp_sport: sport,
            opcode,
            tos: 0,
            flow: crate::wire::packet::NO_FLOW,
        }
    }

    fn ctx(tenants: &[u16], ingress: u32, queue: u8) -> Ctx<'_> {
        Ctx {
            now: SimTime::ZERO,
            quality: &[],
            ingress: PortId(ingress),
            queue,
            class: 0,
            tenants,
        }
    }

    fn compiled(m: Match, ingress: Vec<PortId>) -> Compiled {
        Compiled { m, ingress }
    }

    /// Each field alone: matches what it names and nothing else.
    #[test]
    fn every_field_narrows_the_match() {
        let tenants = [0, 7];
        let base = pkt(1, 1, 50000, Opcode::WriteMiddle);
        let c = ctx(&tenants, 4, 3);
        let any = compiled(Match::default(), vec![]);
        assert!(any.matches(&base, &c));
        let cases: Vec<(Match, Packet)> = vec![
            (
                Match {
                    tenants: vec![7],
                    ..Default::default()
                },
                pkt(1, 0, 50000, Opcode::WriteMiddle),
            ),
            (
                Match {
                    src_nics: vec![NicId(1)],
                    ..Default::default()
                },
                pkt(2, 1, 50000, Opcode::WriteMiddle),
            ),
            (
                Match {
                    qpn: Some((0x101, 0x101)),
                    ..Default::default()
                },
                pkt(1, 2, 50000, Opcode::WriteMiddle),
            ),
            (
                Match {
                    udp_sport: Some((49152, 50000)),
                    ..Default::default()
                },
                pkt(1, 1, 50001, Opcode::WriteMiddle),
            ),
            (
                Match {
                    opcodes: opcode_bit(Opcode::WriteMiddle),
                    ..Default::default()
                },
                pkt(1, 1, 50000, Opcode::Ack),
            ),
        ];
        for (m, other) in cases {
            let r = compiled(m.clone(), vec![]);
            assert!(r.matches(&base, &c), "{m:?} should match");
            assert!(!r.matches(&other, &c), "{m:?} should not match {other:?}");
        }
        let class = compiled(
            Match {
                queues: 1 << 3,
                ..Default::default()
            },
            vec![],
        );
        assert!(class.matches(&base, &c));
        assert!(!class.matches(&base, &ctx(&tenants, 4, 0)));
        let ingress = compiled(
            Match {
                ingress: vec![Owner::Nic(NicId(1))],
                ..Default::default()
            },
            vec![PortId(4)],
        );
        assert!(ingress.matches(&base, &c));
        assert!(!ingress.matches(&base, &ctx(&tenants, 5, 3)));
    }
}
