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

use super::hash::{HashFields, HashFn};
use crate::topology::routing::SwitchRoutes;
use crate::topology::PortId;
use crate::wire::Packet;

#[derive(Clone, Debug)]
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

    /// The header CRC without a seed, which senders cache in the packet.
    pub fn header_crc(hash: HashFn, fields: HashFields, pkt: &Packet) -> u32 {
        let mut buf = [0u8; 16];
        let n = fields.key(pkt, &mut buf);
        hash.hash(0, &buf[..n])
    }

    /// This switch's hash of the packet, from the sender's cached header
    /// CRC (all switches of a scenario hash the same fields the same way).
    #[inline]
    pub fn flow_hash(&self, pkt: &Packet) -> u32 {
        fold(pkt.header_crc ^ self.seed_term, self.seed)
    }

    /// The same hash computed from the header fields, without the cache.
    pub fn flow_hash_uncached(&self, pkt: &Packet) -> u32 {
        let mut buf = [0u8; 16];
        let n = self.fields.key(pkt, &mut buf);
        fold(self.hash.hash(self.seed, &buf[..n]), self.seed)
    }

    #[inline]
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
