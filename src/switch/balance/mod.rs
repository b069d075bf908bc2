//! Load balancing: picking one egress port from an equal-cost group.
//!
//! One file per balancer: static ECMP (`ecmp`) over the hash functions
//! and header fields in `hash`; dynamic load balancing on member quality
//! (`dlb`: per-packet, flowlet, assigned-flow, reactive rebalancing); and
//! per-packet spraying (`spray`). Each switch runs the balancer its tier
//! is configured with.

pub mod dlb;
pub mod ecmp;
pub mod hash;
pub mod spray;

pub use ecmp::Ecmp;
pub use hash::{HashFields, HashFn};

use crate::rng::Stream;
use crate::topology::routing::SwitchRoutes;
use crate::topology::PortId;
use crate::units::SimTime;
use crate::wire::Packet;
use dlb::{Dlb, DlbConfig};
use spray::{Spray, SprayOrder};

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

/// Which balancer a switch runs.
#[derive(Clone, Debug, PartialEq)]
pub enum BalancerKind {
    Ecmp,
    Dlb(DlbConfig),
    Spray(SprayOrder),
}

impl BalancerKind {
    pub fn name(&self) -> String {
        match self {
            BalancerKind::Ecmp => "ecmp".into(),
            BalancerKind::Dlb(c) => format!("dlb-{}", c.mode.name()),
            BalancerKind::Spray(o) => format!("spray-{}", o.name()),
        }
    }
}

/// The balancer of every switch: a default and overrides by tier
/// (0 = leaf or edge, 1 = spine or aggregation, 2 = super-spine or core).
#[derive(Clone, Debug, PartialEq)]
pub struct BalanceConfig {
    pub default: BalancerKind,
    pub tiers: [Option<BalancerKind>; 3],
}

impl Default for BalanceConfig {
    fn default() -> Self {
        BalanceConfig {
            default: BalancerKind::Ecmp,
            tiers: [None, None, None],
        }
    }
}

impl BalanceConfig {
    pub fn for_tier(&self, tier: u8) -> &BalancerKind {
        self.tiers
            .get(tier as usize)
            .and_then(|t| t.as_ref())
            .unwrap_or(&self.default)
    }

    /// Whether some switch needs member qualities.
    pub fn any_dlb(&self) -> bool {
        std::iter::once(&self.default)
            .chain(self.tiers.iter().flatten())
            .any(|k| matches!(k, BalancerKind::Dlb(_)))
    }
}

/// A switch's balancer.
pub enum Balancer {
    Ecmp(Ecmp),
    Dlb(Box<Dlb>),
    Spray(Box<Spray>),
}

impl Balancer {
    pub fn new(
        cfg: &EcmpConfig,
        kind: &BalancerKind,
        seed: u32,
        groups: usize,
        rng: Stream,
    ) -> Self {
        let ecmp = Ecmp::new(cfg.hash, cfg.fields, seed);
        match kind {
            BalancerKind::Ecmp => Balancer::Ecmp(ecmp),
            BalancerKind::Dlb(c) => Balancer::Dlb(Box::new(Dlb::new(c.clone(), ecmp))),
            BalancerKind::Spray(o) => Balancer::Spray(Box::new(Spray::new(*o, groups, rng))),
        }
    }

    /// `quality` is each port's DLB band (empty when no switch runs DLB).
    #[inline]
    pub fn choose(
        &mut self,
        routes: &SwitchRoutes,
        group: u32,
        pkt: &Packet,
        now: SimTime,
        quality: &[u8],
    ) -> PortId {
        match self {
            Balancer::Ecmp(e) => e.choose(routes, group, pkt),
            Balancer::Dlb(d) => d.choose(routes, group, pkt, now, quality),
            Balancer::Spray(s) => s.choose(routes, group),
        }
    }

    /// The port every packet like `pkt` takes, for balancers whose choice
    /// depends only on the header (static hashing); used to report paths.
    pub fn static_choice(&self, routes: &SwitchRoutes, group: u32, pkt: &Packet) -> Option<PortId> {
        match self {
            Balancer::Ecmp(e) => Some(e.choose(routes, group, pkt)),
            Balancer::Dlb(_) | Balancer::Spray(_) => None,
        }
    }
}
