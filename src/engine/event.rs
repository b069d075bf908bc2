//! The engine's events and the key that orders those due at the same
//! time.

use super::queue;
use crate::topology::{FlowId, PortId, QpId};
use crate::wire::PacketId;

#[derive(Clone, Copy, Debug)]
pub enum Event {
    /// A port finished serializing its current frame.
    TxDone(PortId),
    /// A frame arrives at a port (the ingress side of the port's owner).
    Arrive(PortId, PacketId),
    /// A transfer starts.
    FlowStart(FlowId),
    /// A NIC port may send again (a rate-limited QP became eligible).
    Wake(PortId),
    /// A QP's retransmission timer.
    Rto(QpId),
    /// The receiver of a QP sends its CNP (after the generation delay).
    Cnp(QpId),
    /// Re-send a pause on this port and priority if still congested.
    PfcRefresh(PortId, u8),
    /// The PFC watchdog checks this port's queue.
    Watchdog(PortId, u8),
    /// A NIC pause storm starts (true) or stops.
    Storm(u32, bool),
    /// Record queue depths and QP rates.
    Sample,
    /// DLB and GLB switches refresh their ports' quality bands.
    Quality,
    /// GLB helpers send heartbeats where their bands changed.
    Heartbeat,
    /// ALB switches sample bucket rates and rebalance.
    Alb,
    /// Failure `i` of the scenario happens, or ends.
    Fail(u32),
    Recover(u32),
    /// Routing reacts to the failures and recoveries so far.
    Reconverge,
    /// A task of the graph may start (its time has come).
    TaskReady(u32),
    /// A task's time (compute, NVLink latency) is over.
    TaskDone(u32),
    /// A connection's message is on the wire: its next one may start.
    LaneFree(u32),
    /// An NVLink copy in this host may be done (host, generation), or
    /// (generation `nvlink::RESHARE`) the copies that started in it at
    /// this instant are all in and its rates are shared anew.
    Nvlink(u32, u32),
    /// Pass messages' NVLink copies in this host may have landed.
    Landed(u32),
    /// Flow level: a sub-flow may have sent its last byte; its receiver
    /// has it; its sender has the acknowledgement.
    FluidNext,
    FluidRx(QpId, FlowId),
    FluidAck(QpId, FlowId),
    /// Flow level: ring pass `p`'s stream starts sending, or its last
    /// position has all its bytes (`runtime::streams`).
    Stream(u32),
    /// Flow level: congestion control counts marks and moves QP rates.
    FluidCc,
    /// Hybrid: links both packets and fluids cross are shared anew.
    HybridSync,
    /// Flow level: rates are shared anew where sub-flows started or
    /// ended, once everything else due at this time is handled.
    FluidShare,
    /// A serving workload's arrival, prefill layer or decode step
    /// (`runtime::serving`).
    Serve(u32),
}

/// Bits of an event's key that say what it is for; its kind is above.
const KEY_ID_BITS: u32 = 27;
// What the scenario allows fits in the id: a port with a priority (3
// bits), a QP, a task (and so a lane or a flow), a host.
const _: () = assert!(crate::topology::MAX_PORTS << 3 <= 1 << KEY_ID_BITS);
const _: () = assert!(crate::workload::MAX_QPS <= 1 << KEY_ID_BITS);
const _: () = assert!(crate::workload::collective::MAX_TASKS <= 1 << KEY_ID_BITS);
const _: () = assert!(crate::workload::MAX_FLOWS <= 1 << KEY_ID_BITS);
const _: () = assert!(crate::runtime::serving::MAX_IDS << 2 <= 1 << KEY_ID_BITS);

impl Event {
    /// A time-series sample or a balancer's tick: work on a clock, not an
    /// event of the model (see `outcome::IdleGaps`).
    #[inline(always)]
    pub fn is_clockwork(&self) -> bool {
        matches!(
            self,
            Event::Sample | Event::Quality | Event::Heartbeat | Event::Alb
        )
    }
}

impl queue::Keyed for Event {
    /// Orders events due at the same time: by kind (the run-wide ones
    /// first, so that they can happen between the windows of a run cut into
    /// partitions), then by what they are for. Nothing in it depends on how
    /// the run is cut or on where a packet is stored, so every partitioning
    /// orders the same way (see `queue`). The scenario's limits on ports,
    /// QPs and tasks keep every id within its bits (checked below).
    #[inline(always)]
    fn key(&self) -> u32 {
        let port = |p: PortId, prio: u8| p.0 << 3 | u32::from(prio & 7);
        let (kind, id): (u32, u32) = match *self {
            Event::Fail(i) => (0, i),
            Event::Recover(i) => (1, i),
            Event::Reconverge => (2, 0),
            Event::Sample => (3, 0),
            Event::Quality => (4, 0),
            Event::Heartbeat => (5, 0),
            Event::Alb => (6, 0),
            Event::Storm(i, on) => (7, i << 1 | u32::from(on)),
            Event::FlowStart(f) => (8, f.0),
            Event::TaskReady(t) => (9, t),
            Event::TaskDone(t) => (10, t),
            Event::LaneFree(l) => (11, l),
            // A stale generation does nothing, so which of two runs first
            // does not matter.
            Event::Nvlink(h, _) => (12, h),
            // Each lands what is due, in order: which of two runs first
            // does not matter either.
            Event::Landed(h) => (13, h),
            Event::Rto(q) => (14, q.0),
            Event::Cnp(q) => (15, q.0),
            Event::TxDone(p) => (16, port(p, 0)),
            // A link delivers one frame at a time: no two arrive on one
            // port at once.
            Event::Arrive(p, _) => (17, port(p, 0)),
            Event::Wake(p) => (18, port(p, 0)),
            Event::PfcRefresh(p, prio) => (19, port(p, prio)),
            Event::Watchdog(p, prio) => (20, port(p, prio)),
            // Flow level runs on one thread.
            Event::FluidNext => (21, 0),
            Event::FluidRx(q, _) => (22, q.0),
            Event::FluidAck(q, _) => (23, q.0),
            Event::Stream(p) => (24, p),
            Event::FluidCc => (25, 0),
            Event::HybridSync => (26, 0),
            // Serving runs on one thread; its own numbers order it, and
            // a scheduler's start comes after the rest of its instant.
            Event::Serve(code) if code & 3 == crate::runtime::serving::START => (29, code),
            Event::Serve(code) => (28, code),
            // The last kind: after every start and end of this instant.
            Event::FluidShare => (27, 0),
        };
        debug_assert!(id < 1 << KEY_ID_BITS, "{self:?}: id past the key's bits");
        kind << KEY_ID_BITS | id
    }
}

impl From<crate::runtime::Due> for Event {
    fn from(due: crate::runtime::Due) -> Event {
        use crate::runtime::Due;
        match due {
            Due::TaskReady(t) => Event::TaskReady(t),
            Due::TaskDone(t) => Event::TaskDone(t),
            Due::LaneFree(l) => Event::LaneFree(l),
            Due::Nvlink(h, gen) => Event::Nvlink(h, gen),
            Due::Landed(h) => Event::Landed(h),
            Due::Stream(p) => Event::Stream(p),
            Due::Serve(code) => Event::Serve(code),
        }
    }
}
