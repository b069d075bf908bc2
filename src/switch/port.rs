//! The egress side of a port, switch or NIC: its transmitter (busy while a
//! frame is being serialized), the counters the link reports come from,
//! and, kept apart, its priority queues.
//!
//! Everything the packet path touches on every hop fits in one cache line
//! (`PortState`); the queues (`switch::schedule::EgressQueues`), a NIC
//! port's QP ring and the drop counters live in separate arrays indexed
//! by the same `PortId`, touched only when a frame must wait, by NICs, or
//! on drops. A frame leaves the switch buffer when its serialization
//! starts.

use crate::topology::{PortId, Topology};
use crate::units::SimTime;

/// The per-hop state of a port's transmitter.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
#[repr(C, align(64))]
pub struct PortState {
    /// When the frame now being serialized (if any) is fully sent.
    pub busy_until: SimTime,
    /// Picoseconds per byte when exact (every standard speed); 0 when the
    /// rate needs a division per frame (`Topology` has the rate).
    pub ps_per_byte: u64,
    pub delay: SimTime,
    pub tx_packets: u64,
    /// Bytes on the wire, preamble and gap included.
    pub tx_wire_bytes: u64,
    /// Picoseconds spent serializing.
    pub busy_ps: u64,
    pub peer: PortId,
    /// Frames waiting in this port's priority queues.
    pub queued: u32,
    /// A `TxDone` event is pending. The transmitter only asks to be woken
    /// when it has more to send, so an uncongested hop costs one event
    /// (the arrival) per packet instead of two.
    pub tx_event: bool,
    /// The partner has paused this port at least once (PFC), so an idle
    /// port must check its queues' pause state before sending.
    pub ever_paused: bool,
    /// The link is down: frames put on it, or arriving over it, are lost.
    pub down: bool,
}

/// Frames dropped at admission while headed for this egress port.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct PortDrops {
    pub packets: u64,
    pub wire_bytes: u64,
}

impl PortState {
    pub fn from_topology(topo: &Topology) -> Vec<PortState> {
        topo.ports
            .iter()
            .map(|p| PortState {
                busy_until: SimTime::ZERO,
                ps_per_byte: p.rate.exact_ps_per_byte().unwrap_or(0),
                delay: p.delay,
                tx_packets: 0,
                tx_wire_bytes: 0,
                busy_ps: 0,
                peer: p.peer,
                queued: 0,
                tx_event: false,
                ever_paused: false,
                down: false,
            })
            .collect()
    }

    /// Whether a frame offered now could go straight onto the wire.
    #[inline]
    pub fn idle(&self, now: SimTime) -> bool {
        self.queued == 0 && !self.tx_event && now >= self.busy_until
    }
}

const _: () = assert!(std::mem::size_of::<PortState>() == 64);
