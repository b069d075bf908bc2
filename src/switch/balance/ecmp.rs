//! Static ECMP: hash the selected header fields with the switch's seed;
//! the hash modulo the number of next hops picks the next hop, and the
//! remaining high bits pick a member when that next hop is a port channel.
//! Every packet of a flow therefore takes the same path.
//!
//! A CRC is affine over GF(2): changing its initial value only XORs a
//! constant into the result, so two switches whose CRCs differ only in
//! seed still pick next hops from the same linear function of the header,
//! and flows that one tier sent one way stay bunched at the next tier.
//! Switch ASICs break that correlation by how they use the hash output
//! (per-device bit offsets and selection); here the CRC result is folded
//! with the seed through a multiplicative finaliser. With distinct seeds
//! per switch the tiers decorrelate; with one seed everywhere they still
//! polarize, as they do in real fabrics.

use super::hash::{HashFields, HashFn, KEY_MAX};
use crate::topology::routing::SwitchRoutes;
use crate::topology::{PortId, SwitchId};
use crate::wire::Packet;

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Ecmp {
    pub hash: HashFn,
    pub fields: HashFields,
    pub seed: u32,
    /// `hash.seed_term(seed, fields.key_len())`.
    seed_term: u32,
}

impl Ecmp {
    pub fn new(hash: HashFn, fields: HashFields, seed: u32) -> Self {
        Ecmp {
            hash,
            fields,
            seed,
            seed_term: hash.seed_term(seed, fields.key_len()),
        }
    }

    /// The header CRC without a seed, which senders cache in the packet
    /// (`vlan`: the frame's VLAN ID, 0 if untagged).
    pub fn header_crc(hash: HashFn, fields: HashFields, pkt: &Packet, vlan: u16) -> u32 {
        let mut buf = [0u8; KEY_MAX];
        let n = fields.key(pkt, vlan, &mut buf);
        hash.hash(0, &buf[..n])
    }

    /// This switch's hash of the packet, from the sender's cached header
    /// CRC (all switches of a scenario hash the same fields the same way).
    #[inline]
    pub fn flow_hash(&self, pkt: &Packet) -> u32 {
        fold(pkt.header_crc ^ self.seed_term, self.seed)
    }

    /// The same hash computed from the header fields, without the cache.
    pub fn flow_hash_uncached(&self, pkt: &Packet, vlan: u16) -> u32 {
        let mut buf = [0u8; KEY_MAX];
        let n = self.fields.key(pkt, vlan, &mut buf);
        fold(self.hash.hash(self.seed, &buf[..n]), self.seed)
    }

    #[inline(always)]
    pub fn choose(&self, routes: &SwitchRoutes, group: u32, pkt: &Packet) -> PortId {
        let g = routes.groups[group as usize];
        if g.n_hops == 1 {
            let hop = routes.hops[g.first_hop as usize];
            if hop.n_ports == 1 {
                return routes.ports[hop.first_port as usize];
            }
        }
        let h = self.flow_hash(pkt);
        let hop = routes.hop(group, h % g.n_hops);
        let member = (h / g.n_hops) % hop.n_ports;
        routes.member(hop, member)
    }
}

/// Folds a CRC result with the switch seed (a 64-bit multiply-xorshift
/// finaliser), keeping all 32 output bits well mixed.
#[inline]
fn fold(crc: u32, seed: u32) -> u32 {
    let mut x = (crc as u64) | ((seed as u64) << 32);
    x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> 32) as u32
}

/// How bucket tables share buckets among a group's members.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Weights {
    /// Every member the same share.
    Equal,
    /// In proportion to each member link's rate.
    Capacity,
    /// By the neighbour switch a member leads to (1 for unlisted ones).
    Neighbours(Vec<(SwitchId, u32)>),
}

/// Bucket tables: one fixed-size table per equal-cost group, each bucket
/// naming a member port. A packet's hash picks a bucket. Shares follow
/// the members' weights (weighted ECMP). When a member fails, resilient
/// tables hand only its buckets to the surviving members and give them
/// back when it recovers; plain tables are rebuilt over the survivors,
/// which moves most flows.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Buckets {
    /// Buckets per group.
    pub n: u32,
    pub resilient: bool,
    /// Offset of each group's table in `slot`; `NO_TABLE` for groups of
    /// one member.
    off: Vec<u32>,
    /// The member each bucket sends to now.
    pub slot: Vec<PortId>,
    /// The member each bucket was given when every member was up.
    home: Vec<PortId>,
    /// Weight of each member port, by position in the group's members.
    weights: Vec<Vec<u32>>,
    /// Bytes hashed to each bucket since the last ALB sample (empty when
    /// ALB is off).
    pub bytes: Vec<u64>,
}

pub const NO_TABLE: u32 = u32::MAX;

impl Buckets {
    pub fn new(
        routes: &SwitchRoutes,
        n: u32,
        resilient: bool,
        weight: impl Fn(PortId) -> u32,
        count_bytes: bool,
    ) -> Self {
        let mut b = Buckets {
            n,
            resilient,
            off: Vec::with_capacity(routes.groups.len()),
            slot: Vec::new(),
            home: Vec::new(),
            weights: Vec::with_capacity(routes.groups.len()),
            bytes: Vec::new(),
        };
        for g in 0..routes.groups.len() as u32 {
            let members = routes.member_slice(g);
            let w: Vec<u32> = members.iter().map(|&p| weight(p).max(1)).collect();
            if members.len() < 2 {
                b.off.push(NO_TABLE);
            } else {
                b.off.push(b.slot.len() as u32);
                let all = vec![true; members.len()];
                b.slot.extend(fill(members, &w, &all, n));
            }
            b.weights.push(w);
        }
        b.home = b.slot.clone();
        if count_bytes {
            b.bytes = vec![0; b.slot.len()];
        }
        b
    }

    /// The group's buckets, `None` for a group of one member.
    #[inline]
    pub fn range(&self, group: u32) -> Option<std::ops::Range<usize>> {
        let off = self.off[group as usize];
        (off != NO_TABLE).then(|| off as usize..(off + self.n) as usize)
    }

    /// The bucket a hash selects in the group's table.
    #[inline]
    pub fn bucket(&self, group: u32, h: u32) -> Option<usize> {
        let off = self.off[group as usize];
        (off != NO_TABLE).then(|| (off + h % self.n) as usize)
    }

    /// Weight of each member of a group (in member order).
    pub fn weights(&self, group: u32) -> &[u32] {
        &self.weights[group as usize]
    }

    /// Buckets each member of a group holds (in member order).
    pub fn shares(&self, routes: &SwitchRoutes, group: u32) -> Vec<u32> {
        let members = routes.member_slice(group);
        let mut c = vec![0u32; members.len()];
        if let Some(r) = self.range(group) {
            for p in &self.slot[r] {
                let i = members.iter().position(|m| m == p).expect("a member");
                c[i] += 1;
            }
        }
        c
    }

    /// Re-maps every group's buckets after the set of live members
    /// changed (`up[i]` for member port `i`): a resilient table moves the
    /// buckets of failed members to survivors and returns recovered
    /// members' own buckets; a plain table is rebuilt.
    pub fn members_changed(&mut self, routes: &SwitchRoutes, live: impl Fn(PortId) -> bool) {
        for g in 0..routes.groups.len() as u32 {
            let Some(r) = self.range(g) else { continue };
            let members = routes.member_slice(g);
            let up: Vec<bool> = members.iter().map(|&p| live(p)).collect();
            if !up.iter().any(|&u| u) {
                continue;
            }
            let w = &self.weights[g as usize];
            let t = if self.resilient {
                reassign(
                    &self.home[r.clone()],
                    &self.slot[r.clone()],
                    members,
                    w,
                    &up,
                )
            } else {
                fill(members, w, &up, self.n)
            };
            self.slot[r].copy_from_slice(&t);
        }
    }

    /// The tables for routes recomputed after failures (`now`), from the
    /// tables built on the full fabric's routes (`self`, `then`): a group
    /// that is a full-fabric group minus failed members keeps that group's
    /// home buckets and, if resilient, hands out only the failed members'
    /// buckets; other groups get fresh tables. Bucket bytes restart.
    pub fn rerouted(
        &self,
        then: &SwitchRoutes,
        now: &SwitchRoutes,
        weight: impl Fn(PortId) -> u32,
    ) -> Buckets {
        let mut b = Buckets {
            n: self.n,
            resilient: self.resilient,
            off: Vec::with_capacity(now.groups.len()),
            slot: Vec::new(),
            home: Vec::new(),
            weights: Vec::with_capacity(now.groups.len()),
            bytes: Vec::new(),
        };
        for g in 0..now.groups.len() as u32 {
            let members = now.member_slice(g);
            let w: Vec<u32> = members.iter().map(|&p| weight(p).max(1)).collect();
            if members.len() < 2 {
                b.off.push(NO_TABLE);
                b.weights.push(w);
                continue;
            }
            b.off.push(b.slot.len() as u32);
            // The smallest full-fabric group holding every member.
            let origin = (0..then.groups.len() as u32)
                .filter(|&o| self.range(o).is_some())
                .filter(|&o| {
                    let full = then.member_slice(o);
                    members.iter().all(|p| full.contains(p))
                })
                .min_by_key(|&o| then.member_slice(o).len());
            match origin {
                Some(o) if self.resilient => {
                    let full = then.member_slice(o);
                    let fw: Vec<u32> = full.iter().map(|&p| weight(p).max(1)).collect();
                    let up: Vec<bool> = full.iter().map(|p| members.contains(p)).collect();
                    let r = self.range(o).expect("has a table");
                    let t = reassign(&self.home[r.clone()], &self.home[r.clone()], full, &fw, &up);
                    b.home.extend_from_slice(&self.home[r]);
                    b.slot.extend(t);
                }
                _ => {
                    let all = vec![true; members.len()];
                    let t = fill(members, &w, &all, self.n);
                    b.home.extend_from_slice(&t);
                    b.slot.extend(t);
                }
            }
            b.weights.push(w);
        }
        if !self.bytes.is_empty() {
            b.bytes = vec![0; b.slot.len()];
        }
        b
    }
}

/// Resilient re-mapping of one group's buckets: a bucket goes home where
/// its home member is up, keeps an earlier reassignment while that member
/// lives, and otherwise goes to the live member furthest below its
/// weighted share.
fn reassign(
    home: &[PortId],
    slot: &[PortId],
    members: &[PortId],
    w: &[u32],
    up: &[bool],
) -> Vec<PortId> {
    let mut out = slot.to_vec();
    let mut count = vec![0u64; members.len()];
    let idx = |p: PortId| members.iter().position(|&m| m == p);
    let mut orphans = Vec::new();
    for b in 0..home.len() {
        let h = idx(home[b]);
        let s = idx(slot[b]);
        match (h, s) {
            (Some(h), _) if up[h] => {
                out[b] = home[b];
                count[h] += 1;
            }
            (_, Some(s)) if up[s] && slot[b] != home[b] => count[s] += 1,
            _ => orphans.push(b),
        }
    }
    for b in orphans {
        let i = (0..members.len())
            .filter(|&i| up[i])
            .min_by(|&a, &c| (count[a] * w[c] as u64).cmp(&(count[c] * w[a] as u64)))
            .expect("a live member");
        out[b] = members[i];
        count[i] += 1;
    }
    out
}

/// A table of `n` buckets over the live members, shares in proportion to
/// the weights (largest remainder), interleaved by smooth weighted round
/// robin so that neighbouring buckets go to different members.
fn fill(members: &[PortId], w: &[u32], up: &[bool], n: u32) -> Vec<PortId> {
    let total: u64 = (0..members.len())
        .filter(|&i| up[i])
        .map(|i| w[i] as u64)
        .sum();
    let mut quota: Vec<u64> = (0..members.len())
        .map(|i| {
            if up[i] {
                n as u64 * w[i] as u64 / total
            } else {
                0
            }
        })
        .collect();
    let mut left = n as u64 - quota.iter().sum::<u64>();
    let mut by_rem: Vec<usize> = (0..members.len()).filter(|&i| up[i]).collect();
    by_rem.sort_by_key(|&i| std::cmp::Reverse(n as u64 * w[i] as u64 % total));
    for &i in &by_rem {
        if left == 0 {
            break;
        }
        quota[i] += 1;
        left -= 1;
    }
    // Smooth weighted round robin over one cycle of `n` picks gives each
    // member exactly its quota, spread out.
    let mut credit = vec![0i64; members.len()];
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let mut best = usize::MAX;
        for i in 0..members.len() {
            if quota[i] == 0 {
                continue;
            }
            credit[i] += quota[i] as i64;
            if best == usize::MAX || credit[i] > credit[best] {
                best = i;
            }
        }
        credit[best] -= n as i64;
        out.push(members[best]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::routing::{Group, Hop};

    /// Seed 001's capacity example: 400G, 400G and 200G members get 40%,
    /// 40% and 20% of the buckets, interleaved rather than in runs.
    #[test]
    fn capacity_weights_give_40_40_20() {
        let routes = SwitchRoutes {
            groups: vec![Group {
                first_hop: 0,
                n_hops: 3,
            }],
            hops: (0..3)
                .map(|i| Hop {
                    first_port: i,
                    n_ports: 1,
                })
                .collect(),
            ports: vec![PortId(0), PortId(1), PortId(2)],
            ..Default::default()
        };
        let gbps = [400, 400, 200];
        let b = Buckets::new(&routes, 1000, true, |p| gbps[p.idx()], false);
        assert_eq!(b.shares(&routes, 0), vec![400, 400, 200]);
        let longest_run = b
            .slot
            .chunk_by(|a, c| a == c)
            .map(|r| r.len())
            .max()
            .unwrap();
        assert_eq!(longest_run, 1);
    }
}
