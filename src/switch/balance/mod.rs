//! Load balancing: picking one egress port from an equal-cost group.
//!
//! One file per balancer. Today there is static ECMP (`ecmp`) over the
//! hash functions and header fields in `hash`; dynamic balancers (DLB,
//! flowlets, GLB, spraying...) join as further variants of `Balancer`.

pub mod ecmp;
pub mod hash;

pub use ecmp::Ecmp;
pub use hash::{HashFields, HashFn};

use crate::topology::routing::SwitchRoutes;
use crate::topology::PortId;
use crate::wire::Packet;

/// Where each switch's hash seed comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcmpSeed {
    /// Derived from the run seed and the switch name, so tiers hash
    /// differently and do not polarize.
    PerSwitch,
    /// The same seed on every switch (shows hash polarization).
    Fixed(u32),
}

#[derive(Clone, Debug)]
pub struct EcmpConfig {
    pub hash: HashFn,
    pub fields: HashFields,
    pub seed: EcmpSeed,
}

/// A switch's balancer.
#[derive(Clone, Debug)]
pub enum Balancer {
    Ecmp(Ecmp),
}

impl Balancer {
    pub fn new(cfg: &EcmpConfig, seed: u32) -> Self {
        Balancer::Ecmp(Ecmp::new(cfg.hash, cfg.fields, seed))
    }

    #[inline]
    pub fn choose(&mut self, routes: &SwitchRoutes, group: u32, pkt: &Packet) -> PortId {
        match self {
            Balancer::Ecmp(e) => e.choose(routes, group, pkt),
        }
    }

    /// The port every packet like `pkt` takes, for balancers whose choice
    /// depends only on the header (static hashing); used to report paths.
    pub fn static_choice(&self, routes: &SwitchRoutes, group: u32, pkt: &Packet) -> Option<PortId> {
        match self {
            Balancer::Ecmp(e) => Some(e.choose(routes, group, pkt)),
        }
    }
}
