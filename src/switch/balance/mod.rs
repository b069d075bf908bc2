//! Load balancing: picking one egress port from an equal-cost group.
//!
//! One file per balancer: static ECMP (`ecmp`: modulo or bucket tables,
//! resilient and weighted) over the hash functions and header fields in
//! `hash`; dynamic load balancing on member quality (`dlb`: per-packet,
//! flowlet, assigned-flow, reactive rebalancing); global load balancing
//! on path quality (`glb`); adaptive bucket rebalancing (`alb`); per-packet
//! spraying (`spray`); and the traffic rules of selective DLB/spraying and
//! TELB path colours (`rules`). Each switch runs the balancer its tier, or
//! its own override, is configured with.

pub mod alb;
pub mod dlb;
pub mod ecmp;
pub mod glb;
pub mod hash;
pub mod rules;
pub mod spray;

pub use ecmp::{Ecmp, Weights};
pub use hash::{HashFields, HashFn};

use crate::rng::Stream;
use crate::topology::routing::{Routes, SwitchRoutes};
use crate::topology::{PortId, SwitchId, Topology};
use crate::units::SimTime;
use crate::wire::Packet;
use alb::{Alb, AlbConfig};
use dlb::{Dlb, DlbConfig};
use ecmp::Buckets;
use glb::{Glb, GlbConfig};
use rules::{Color, Compiled, Pinned, Policy, Selective, Telb};
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
    /// Bucket tables instead of modulo: fixed size, resilient to member
    /// failures.
    pub resilient: bool,
    /// Buckets per group in a bucket table.
    pub buckets: u32,
    /// Bucket shares (any weights but `Equal` need bucket tables).
    pub weights: Weights,
}

impl Default for EcmpConfig {
    fn default() -> Self {
        EcmpConfig {
            hash: HashFn::Crc32,
            fields: HashFields::FIVE_TUPLE,
            seed: EcmpSeed::PerSwitch,
            resilient: false,
            buckets: 512,
            weights: Weights::Equal,
        }
    }
}

/// The algorithms a switch can balance with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Algo {
    Ecmp,
    Dlb,
    Glb,
    Alb,
    Spray,
}

impl Algo {
    pub const NAMES: &'static [&'static str] = &["ecmp", "dlb", "glb", "alb", "spray"];

    pub fn from_name(s: &str) -> Option<Algo> {
        Some(match s {
            "ecmp" => Algo::Ecmp,
            "dlb" => Algo::Dlb,
            "glb" => Algo::Glb,
            "alb" => Algo::Alb,
            "spray" => Algo::Spray,
            _ => return None,
        })
    }
}

/// What one switch runs: a default algorithm with its settings, the
/// selective rules that send some traffic to DLB or spraying, and TELB
/// policies that pin some traffic to path colours.
#[derive(Clone, Debug, PartialEq)]
pub struct BalanceSpec {
    pub algo: Algo,
    /// Used by DLB and GLB (flow table, timers, quality bands).
    pub dlb: DlbConfig,
    pub spray: SprayOrder,
    pub alb: AlbConfig,
    pub glb: GlbConfig,
    pub select: Vec<Selective>,
    pub policies: Vec<Policy>,
}

impl Default for BalanceSpec {
    fn default() -> Self {
        BalanceSpec {
            algo: Algo::Ecmp,
            dlb: DlbConfig::default(),
            spray: SprayOrder::RoundRobin,
            alb: AlbConfig::default(),
            glb: GlbConfig::default(),
            select: Vec::new(),
            policies: Vec::new(),
        }
    }
}

impl BalanceSpec {
    /// Every algorithm the switch may use.
    pub fn algos(&self) -> impl Iterator<Item = Algo> + '_ {
        std::iter::once(self.algo).chain(self.select.iter().map(|r| r.algo))
    }

    pub fn uses(&self, a: Algo) -> bool {
        self.algos().any(|x| x == a)
    }

    /// Whether the switch needs its ports' quality bands.
    pub fn uses_quality(&self) -> bool {
        self.uses(Algo::Dlb) || self.uses(Algo::Glb)
    }

    /// A short name for reports, e.g. "dlb-flowlet", "ecmp+telb".
    pub fn name(&self) -> String {
        let mut n = match self.algo {
            Algo::Ecmp => "ecmp".to_string(),
            Algo::Dlb => format!("dlb-{}", self.dlb.mode.name()),
            Algo::Glb => format!("glb-{}", self.dlb.mode.name()),
            Algo::Alb => "alb".to_string(),
            Algo::Spray => format!("spray-{}", self.spray.name()),
        };
        for r in &self.select {
            n.push_str(match r.algo {
                Algo::Spray => "+selective-spray",
                Algo::Dlb => "+selective-dlb",
                Algo::Glb => "+selective-glb",
                Algo::Alb => "+selective-alb",
                Algo::Ecmp => "+selective-ecmp",
            });
        }
        if !self.policies.is_empty() {
            n.push_str("+telb");
        }
        n
    }
}

/// The balancer of every switch: a default, overrides by tier
/// (0 = leaf or edge, 1 = spine or aggregation, 2 = super-spine or core)
/// and by switch, and the TELB path colours.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct BalanceConfig {
    pub default: BalanceSpec,
    pub tiers: [Option<BalanceSpec>; 3],
    /// Per-switch overrides, sorted by switch.
    pub switches: Vec<(SwitchId, BalanceSpec)>,
    pub colors: Vec<Color>,
    /// Settings given for a mode no balancer uses (key, mode it is for),
    /// kept to warn about: a sweep or `--set` can change the mode
    /// without having to remove them.
    pub unused_keys: Vec<(String, String)>,
}

impl BalanceConfig {
    pub fn for_switch(&self, sw: SwitchId, tier: u8) -> &BalanceSpec {
        if let Ok(i) = self.switches.binary_search_by_key(&sw, |e| e.0) {
            return &self.switches[i].1;
        }
        self.tiers
            .get(tier as usize)
            .and_then(|t| t.as_ref())
            .unwrap_or(&self.default)
    }

    /// Every spec in the configuration.
    pub fn specs(&self) -> impl Iterator<Item = &BalanceSpec> {
        std::iter::once(&self.default)
            .chain(self.tiers.iter().flatten())
            .chain(self.switches.iter().map(|e| &e.1))
    }
}

/// What the engine knows about a packet when it balances it.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub now: SimTime,
    /// Quality band of every port (empty when no switch uses them).
    pub quality: &'a [u8],
    pub ingress: PortId,
    /// Egress queue (traffic class) the packet is in.
    pub queue: u8,
    /// The destination's attachment class (see `Routes::nic_class`).
    pub class: u32,
    /// Tenant of every QP.
    pub tenants: &'a [u16],
}

impl Ctx<'_> {
    #[inline]
    fn band(&self, p: PortId) -> u8 {
        self.quality.get(p.idx()).copied().unwrap_or(dlb::BEST)
    }
}

/// A member port's weight in a bucket table.
fn weight(w: &Weights, topo: &Topology, p: PortId) -> u32 {
    match w {
        Weights::Equal => 1,
        Weights::Capacity => (topo.port(p).rate.bps() / 1_000_000_000).max(1) as u32,
        Weights::Neighbours(list) => match topo.port(topo.port(p).peer).owner {
            crate::topology::Owner::Switch(n) => list.iter().find(|e| e.0 == n).map_or(1, |e| e.1),
            crate::topology::Owner::Nic(_) => 1,
        },
    }
}

/// Which of a group's members a choice is made among.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// All members (nothing down, no policy).
    All,
    /// The live members (bucket tables already account for failures).
    Live,
    /// A subset picked by a TELB policy.
    Pinned,
}

/// The state of one switch's balancer beyond static hashing: bucket
/// tables, the dynamic algorithms, selective rules, TELB and failed
/// members.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Parts {
    pub buckets: Option<Buckets>,
    /// The tables as built on the full fabric, which re-routing after
    /// failures starts from, and the weights they follow.
    buckets0: Option<Buckets>,
    weights: Weights,
    pub dlb: Option<Dlb>,
    pub glb: Option<Glb>,
    pub alb: Option<Alb>,
    pub spray: Option<Spray>,
    select: Vec<(Compiled, Algo)>,
    pub telb: Option<Telb>,
    /// Packets each selective rule sent to its algorithm.
    pub selected: Vec<u64>,
    /// Member ports that are down.
    pub down: Vec<PortId>,
    scratch: Vec<PortId>,
}

/// A switch's balancer: the hashing every switch has, the state of the
/// algorithms its spec uses, its rules and the members that are down.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Balancer {
    pub ecmp: Ecmp,
    pub algo: Algo,
    /// Everything else, off the common path.
    pub parts: Box<Parts>,
    /// No rules, policies or failures: every choice is over all members.
    plain: bool,
    /// Plain, and modulo hashing: the common case, on the fastest path.
    plain_ecmp: bool,
}

impl Balancer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cfg: &EcmpConfig,
        spec: &BalanceSpec,
        colors: &[Color],
        topo: &Topology,
        routes: &Routes,
        sw: SwitchId,
        seed: u32,
        rng: Stream,
    ) -> Self {
        let mine = &routes.switches[sw.idx()];
        let ecmp = Ecmp::new(cfg.hash, cfg.fields, seed);
        let alb = spec.uses(Algo::Alb);
        let buckets = (cfg.resilient || cfg.weights != Weights::Equal || alb).then(|| {
            Buckets::new(
                mine,
                cfg.buckets,
                cfg.resilient,
                |p| weight(&cfg.weights, topo, p),
                alb,
            )
        });
        let uses_table = spec.uses(Algo::Dlb) || spec.uses(Algo::Glb);
        let select: Vec<(Compiled, Algo)> = spec
            .select
            .iter()
            .map(|r| (Compiled::new(&r.when, topo, sw), r.algo))
            .collect();
        let telb = (!spec.policies.is_empty()).then(|| Telb::new(&spec.policies, colors, topo, sw));
        let plain_ecmp =
            select.is_empty() && telb.is_none() && spec.algo == Algo::Ecmp && buckets.is_none();
        Balancer {
            algo: spec.algo,
            plain: select.is_empty() && telb.is_none(),
            plain_ecmp,
            parts: Box::new(Parts {
                dlb: uses_table
                    .then(|| Dlb::new(spec.dlb.clone(), ecmp.clone(), mine.groups.len())),
                glb: spec
                    .uses(Algo::Glb)
                    .then(|| Glb::new(spec.glb.clone(), topo, routes, sw)),
                alb: alb.then(|| {
                    let n = buckets.as_ref().map_or(0, |b| b.slot.len());
                    Alb::new(spec.alb.clone(), n)
                }),
                spray: spec
                    .uses(Algo::Spray)
                    .then(|| Spray::new(spec.spray, mine.groups.len(), rng)),
                buckets0: buckets.clone(),
                buckets,
                weights: cfg.weights.clone(),
                selected: vec![0; select.len()],
                select,
                telb,
                down: Vec::new(),
                scratch: Vec::new(),
            }),
            ecmp,
        }
    }

    /// The egress port for a packet routed to `group`.
    #[inline]
    pub fn choose(&mut self, routes: &SwitchRoutes, group: u32, pkt: &Packet, ctx: &Ctx) -> PortId {
        if self.plain_ecmp {
            return self.ecmp.choose(routes, group, pkt);
        }
        let members = routes.member_slice(group);
        if self.plain {
            if members.len() == 1 {
                return members[0];
            }
            return self.run(self.algo, routes, group, members, Scope::All, pkt, ctx);
        }
        self.choose_with_rules(routes, group, members, pkt, ctx)
    }

    #[cold]
    fn choose_with_rules(
        &mut self,
        routes: &SwitchRoutes,
        group: u32,
        members: &[PortId],
        pkt: &Packet,
        ctx: &Ctx,
    ) -> PortId {
        let r = &mut *self.parts;
        let mut cands = std::mem::take(&mut r.scratch);
        cands.clear();
        let down = &r.down;
        let live = |p: PortId| !down.contains(&p);
        let mut scope = if down.is_empty() {
            Scope::All
        } else {
            Scope::Live
        };
        if let Some(t) = &mut r.telb {
            if let Pinned::To = t.pin(members, live, pkt, ctx, &mut cands) {
                scope = Scope::Pinned;
            }
        }
        if scope != Scope::Pinned {
            cands.extend(members.iter().copied().filter(|&p| live(p)));
        }
        let port = if cands.is_empty() {
            // Every member is down: the packet goes to a dead link.
            members[0]
        } else if cands.len() == 1 {
            cands[0]
        } else {
            let algo = match r.select.iter().position(|(m, _)| m.matches(pkt, ctx)) {
                Some(i) => {
                    r.selected[i] += 1;
                    r.select[i].1
                }
                None => self.algo,
            };
            let c = if scope == Scope::All { members } else { &cands };
            self.run(algo, routes, group, c, scope, pkt, ctx)
        };
        self.parts.scratch = cands;
        port
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn run(
        &mut self,
        algo: Algo,
        routes: &SwitchRoutes,
        group: u32,
        cands: &[PortId],
        scope: Scope,
        pkt: &Packet,
        ctx: &Ctx,
    ) -> PortId {
        let parts = &mut *self.parts;
        match algo {
            Algo::Ecmp | Algo::Alb => {
                let h = self.ecmp.flow_hash(pkt);
                if scope != Scope::Pinned {
                    if let Some(b) = &mut parts.buckets {
                        if let Some(k) = b.bucket(group, h) {
                            if !b.bytes.is_empty() {
                                b.bytes[k] += pkt.wire_bytes as u64;
                            }
                            return b.slot[k];
                        }
                    }
                }
                if scope == Scope::All {
                    self.ecmp.choose(routes, group, pkt)
                } else {
                    cands[(h % cands.len() as u32) as usize]
                }
            }
            Algo::Dlb => {
                let d = parts.dlb.as_mut().expect("DLB state");
                d.choose(group, cands, pkt, ctx.now, |p| ctx.band(p))
            }
            Algo::Glb => {
                let d = parts.dlb.as_mut().expect("DLB state");
                let g = parts.glb.as_ref().expect("GLB state");
                d.choose(group, cands, pkt, ctx.now, |p| {
                    g.path_band(ctx.band(p), p, ctx.class)
                })
            }
            Algo::Spray => parts
                .spray
                .as_mut()
                .expect("spray state")
                .choose(group, cands),
        }
    }

    /// At flow level, where a packet like `pkt` goes, changing nothing:
    /// `Ok` the one port every such packet takes (static hashing, also
    /// under a selective rule or TELB colour that leaves it to ECMP), or
    /// `Err` the ports its bytes split over evenly (spraying, DLB, GLB,
    /// ALB: the split they aim at), among the colour's ports where a
    /// TELB policy pins it.
    pub fn fluid_choice(
        &self,
        routes: &SwitchRoutes,
        group: u32,
        pkt: &Packet,
        ctx: &Ctx,
    ) -> Result<PortId, Vec<PortId>> {
        let members = routes.member_slice(group);
        if members.len() == 1 {
            return Ok(members[0]);
        }
        let r = &*self.parts;
        let live = |p: PortId| !r.down.contains(&p);
        let mut cands = Vec::new();
        let pinned = match &r.telb {
            Some(t) => matches!(t.pinned(members, live, pkt, ctx, &mut cands).0, Pinned::To),
            None => false,
        };
        if !pinned {
            cands.extend(members.iter().copied().filter(|&p| live(p)));
        }
        match cands.len() {
            0 => return Ok(members[0]),
            1 => return Ok(cands[0]),
            _ => {}
        }
        let algo = r
            .select
            .iter()
            .find(|(m, _)| m.matches(pkt, ctx))
            .map_or(self.algo, |x| x.1);
        if algo != Algo::Ecmp {
            return Err(cands);
        }
        let h = self.ecmp.flow_hash(pkt);
        if !pinned {
            if let Some(k) = r.buckets.as_ref().and_then(|b| b.bucket(group, h)) {
                return Ok(r.buckets.as_ref().expect("a bucket above").slot[k]);
            }
        }
        if !pinned && r.down.is_empty() {
            Ok(self.ecmp.choose(routes, group, pkt))
        } else {
            Ok(cands[(h % cands.len() as u32) as usize])
        }
    }

    /// Whether every choice follows from the packet header alone.
    pub fn is_static(&self) -> bool {
        self.plain && self.algo == Algo::Ecmp
    }

    /// The port every packet like `pkt` takes, for balancers whose choice
    /// depends only on the header (static hashing); used to report paths.
    pub fn static_choice(&self, routes: &SwitchRoutes, group: u32, pkt: &Packet) -> Option<PortId> {
        let members = routes.member_slice(group);
        if members.len() == 1 {
            return Some(members[0]);
        }
        if !self.is_static() {
            return None;
        }
        let h = self.ecmp.flow_hash(pkt);
        if let Some(b) = &self.parts.buckets {
            if let Some(k) = b.bucket(group, h) {
                return Some(b.slot[k]);
            }
        }
        Some(self.ecmp.choose(routes, group, pkt))
    }

    /// Marks a member port down or up again: bucket tables re-map, and
    /// every balancer stops or resumes choosing it.
    pub fn set_member(&mut self, routes: &SwitchRoutes, port: PortId, up: bool) {
        let r = &mut *self.parts;
        let was_down = r.down.contains(&port);
        if up != was_down {
            return;
        }
        if up {
            r.down.retain(|&p| p != port);
        } else {
            r.down.push(port);
        }
        self.plain = r.select.is_empty() && r.telb.is_none() && r.down.is_empty();
        self.plain_ecmp = self.plain && self.algo == Algo::Ecmp && r.buckets.is_none();
        if let Some(b) = &mut r.buckets {
            let down = &r.down;
            b.members_changed(routes, |p| !down.contains(&p));
        }
    }

    /// Routing reconverged after a failure or recovery: the switch now
    /// forwards on `now` instead of the full fabric's `then`. Bucket tables
    /// are re-derived (resilient ones move only failed members' buckets);
    /// state kept per group is resized.
    pub fn reroute(&mut self, then: &SwitchRoutes, now: &SwitchRoutes, topo: &Topology) {
        let p = &mut *self.parts;
        if let Some(b0) = &p.buckets0 {
            let b = b0.rerouted(then, now, |port| weight(&p.weights, topo, port));
            if let Some(a) = &mut p.alb {
                a.resize(b.slot.len());
            }
            p.buckets = Some(b);
        }
        if let Some(d) = &mut p.dlb {
            d.resize(now.groups.len());
        }
        if let Some(s) = &mut p.spray {
            s.resize(now.groups.len());
        }
    }

    /// ALB has nothing to sample or move (or there is no ALB).
    pub fn alb_idle(&self) -> bool {
        let r = &*self.parts;
        match (&r.alb, &r.buckets) {
            (Some(a), Some(b)) => a.idle(b),
            _ => true,
        }
    }

    /// ALB's times as if it had ticked, idle, from `first` to `last`.
    pub fn alb_skip_idle(&mut self, first: SimTime, last: SimTime, every: SimTime) {
        if let Some(a) = &mut self.parts.alb {
            a.skip_idle(first, last, every);
        }
    }

    /// Periodic work: ALB samples and rebalances.
    pub fn tick(&mut self, now: SimTime, routes: &SwitchRoutes) {
        let r = &mut *self.parts;
        if let (Some(a), Some(b)) = (&mut r.alb, &mut r.buckets) {
            a.tick(now, b, routes, &r.down);
        }
    }
}
