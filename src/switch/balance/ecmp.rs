//! Static ECMP: hash the selected header fields with the switch's seed;
//! the hash modulo the number of next hops picks the next hop, and the
//! remaining high bits pick a member when that next hop is a port channel.
//! Every packet of a flow therefore takes the same path.

use super::hash::{HashFields, HashFn};
use crate::topology::routing::SwitchRoutes;
use crate::topology::PortId;
use crate::wire::Packet;

#[derive(Clone, Debug)]
pub struct Ecmp {
    pub hash: HashFn,
    pub fields: HashFields,
    pub seed: u32,
}

impl Ecmp {
    pub fn new(hash: HashFn, fields: HashFields, seed: u32) -> Self {
        Ecmp { hash, fields, seed }
    }

    #[inline]
    pub fn flow_hash(&self, pkt: &Packet) -> u32 {
        let mut buf = [0u8; 16];
        let n = self.fields.key(pkt, &mut buf);
        self.hash.hash(self.seed, &buf[..n])
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
