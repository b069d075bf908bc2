//! A switch, built as the pipeline a packet goes through, one stage per
//! file in the order the packet meets them:
//! `classify` (DSCP -> queue), `forward` (destination -> equal-cost group),
//! `balance` (group -> one egress port), `admit` (shared buffer, dynamic
//! per-queue thresholds, tail drop) and `schedule` (priority queues,
//! dequeue order). Marking (ECN) and flow control (PFC) are the next
//! stages to slot in between admit and schedule; they are not modelled
//! yet, so there is no file for them.
//!
//! The stages are plain functions and small state structs composed here;
//! the event loop owns every switch and calls `ingress` once per arriving
//! packet. Cut-through forwarding and switch processing latency are not
//! modelled: a switch is store-and-forward with zero pipeline delay.

pub mod admit;
pub mod balance;
pub mod classify;
pub mod forward;
pub mod schedule;

use crate::topology::routing::SwitchRoutes;
use crate::topology::PortId;
use crate::wire::Packet;
use balance::{Balancer, EcmpConfig};
use classify::ClassMap;

/// Switch settings shared by every switch of a scenario.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    /// Shared packet buffer per switch.
    pub buffer_bytes: u64,
    /// Dynamic-threshold alpha in 1/256 units; `None` turns the per-queue
    /// limit off.
    pub alpha_256: Option<u64>,
    pub ecmp: EcmpConfig,
}

/// The run-time state of one switch.
pub struct SwitchState {
    pub classes: ClassMap,
    pub balancer: Balancer,
    pub buffer: admit::SharedBuffer,
}

/// What the pipeline decided for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted: goes out of this egress port, from this priority queue.
    Forward { port: PortId, queue: u8 },
    /// Dropped at admission: the shared buffer is full.
    BufferFull { port: PortId },
    /// No route to the destination (cannot happen for validated traffic).
    NoRoute,
}

impl SwitchState {
    pub fn new(cfg: &SwitchConfig, seed: u32) -> Self {
        SwitchState {
            classes: ClassMap::default(),
            balancer: Balancer::new(&cfg.ecmp, seed),
            buffer: admit::SharedBuffer::new(cfg.buffer_bytes, cfg.alpha_256),
        }
    }

    /// Runs one packet through classify, forward, balance and admit. The
    /// caller says how many bytes an egress queue holds, and hands an
    /// admitted packet to the egress port's scheduler.
    pub fn ingress(
        &mut self,
        routes: &SwitchRoutes,
        dst_class: u32,
        pkt: &Packet,
        queue_depth: impl Fn(PortId, u8) -> u32,
    ) -> Verdict {
        let queue = self.classes.queue_of(pkt.dscp);
        let Some(group) = forward::lookup(routes, pkt.dst, dst_class) else {
            return Verdict::NoRoute;
        };
        let port = self.balancer.choose(routes, group, pkt);
        let depth = queue_depth(port, queue);
        if !self.buffer.admit(pkt.buffer_bytes(), depth) {
            return Verdict::BufferFull { port };
        }
        Verdict::Forward { port, queue }
    }
}
