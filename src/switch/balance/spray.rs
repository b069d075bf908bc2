//! Per-packet spraying without quality checks: every packet goes to the
//! next member of its equal-cost group (round robin) or to a random one.
//! Packets of one flow take different paths and may arrive out of order.

use crate::rng::Stream;
use crate::topology::PortId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SprayOrder {
    RoundRobin,
    Random,
}

impl SprayOrder {
    pub fn from_name(s: &str) -> Option<SprayOrder> {
        match s {
            "round-robin" => Some(SprayOrder::RoundRobin),
            "random" => Some(SprayOrder::Random),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SprayOrder::RoundRobin => "round-robin",
            SprayOrder::Random => "random",
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
pub struct Spray {
    pub order: SprayOrder,
    /// Next member per group (round robin).
    next: Vec<u32>,
    rng: Stream,
    pub sprayed: u64,
}

impl Spray {
    pub fn new(order: SprayOrder, groups: usize, rng: Stream) -> Self {
        Spray {
            order,
            next: vec![0; groups],
            rng,
            sprayed: 0,
        }
    }

    /// Routes changed: one round-robin position per new group.
    pub fn resize(&mut self, groups: usize) {
        self.next = vec![0; groups];
    }

    /// Picks one of `cands`, the group's usable members.
    pub fn choose(&mut self, group: u32, cands: &[PortId]) -> PortId {
        let n = cands.len() as u32;
        self.sprayed += 1;
        let k = match self.order {
            SprayOrder::RoundRobin => {
                let slot = &mut self.next[group as usize];
                let k = *slot % n;
                *slot = (k + 1) % n;
                k
            }
            SprayOrder::Random => self.rng.below(n as u64) as u32,
        };
        cands[k as usize]
    }
}
