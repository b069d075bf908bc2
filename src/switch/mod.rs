//! A switch, built as the pipeline a packet goes through, one stage per
//! file in the order the packet meets them:
//! `classify` (DSCP -> queue), `forward` (destination -> equal-cost group),
//! `balance` (group -> one egress port), `admit` (shared buffer, dynamic
//! per-queue thresholds, tail drop) and `schedule` (priority queues,
//! dequeue order), with `ecn` (WRED marking, on enqueue or dequeue) and
//! `pfc` (lossless admission by ingress port, pause and resume) beside
//! them; `qos` holds the class settings they read.
//!
//! The stages are plain functions and small state structs composed here;
//! the event loop owns every switch and calls `ingress` once per arriving
//! packet. Cut-through forwarding and switch processing latency are not
//! modelled: a switch is store-and-forward with zero pipeline delay.

pub mod admit;
pub mod balance;
pub mod classify;
pub mod ecn;
pub mod egress;
pub mod forward;
pub mod pfc;
pub mod port;
pub mod qos;
pub mod schedule;

use crate::rng::Stream;
use crate::topology::routing::{Routes, SwitchRoutes};
use crate::topology::{PortId, SwitchId, Topology};
use crate::wire::Packet;
use balance::{BalanceConfig, Balancer, Ctx, EcmpConfig};
use classify::ClassMap;

/// Switch settings shared by every switch of a scenario.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    /// Shared packet buffer per switch.
    pub buffer_bytes: u64,
    /// Dynamic-threshold alpha in 1/256 units; `None` turns the per-queue
    /// limit off.
    pub alpha_256: Option<u64>,
    /// Buffer partitions: the most lossless and lossy classes may hold,
    /// bytes (`None`: no cap).
    pub partitions: (Option<u64>, Option<u64>),
    pub ecmp: EcmpConfig,
    pub balance: BalanceConfig,
}

/// The run-time state of one switch.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct SwitchState {
    pub classes: ClassMap,
    pub balancer: Balancer,
    pub buffer: admit::SharedBuffer,
    /// WRED's random draws.
    pub rng: Stream,
}

impl SwitchState {
    /// `reserved` bytes of the buffer are set aside as PFC headroom; the
    /// switch runs the balancer configured for it.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cfg: &SwitchConfig,
        classes: ClassMap,
        topo: &Topology,
        routes: &Routes,
        sw: SwitchId,
        seed: u32,
        reserved: u64,
        rngs: [Stream; 2],
    ) -> Self {
        let [wred, balance] = rngs;
        let spec = cfg.balance.for_switch(sw, topo.switches[sw.idx()].tier);
        SwitchState {
            classes,
            balancer: Balancer::new(
                &cfg.ecmp,
                spec,
                &cfg.balance.colors,
                topo,
                routes,
                sw,
                seed,
                balance,
            ),
            buffer: admit::SharedBuffer::new(
                cfg.buffer_bytes.saturating_sub(reserved),
                cfg.alpha_256,
            )
            .partitioned(cfg.partitions),
            rng: wred,
        }
    }

    /// Classifies and forwards one packet: its egress port and queue.
    /// `ctx.queue` is filled in here.
    #[inline]
    pub fn route(
        &mut self,
        routes: &SwitchRoutes,
        pkt: &Packet,
        mut ctx: Ctx,
    ) -> Option<(PortId, u8)> {
        let queue = self.classes.queue_of(pkt.dscp());
        let group = forward::lookup(routes, pkt.dst, ctx.class)?;
        ctx.queue = queue;
        Some((self.balancer.choose(routes, group, pkt, &ctx), queue))
    }
}
