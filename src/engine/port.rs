//! The egress side of a port, switch or NIC: its priority queues, its
//! transmitter (busy while a frame is being serialized) and the counters
//! the link reports come from. A frame leaves the switch buffer when its
//! serialization starts.

use std::collections::VecDeque;

use crate::switch::schedule::EgressQueues;
use crate::topology::{Owner, PortId, QpId, Topology};
use crate::units::{Rate, SimTime};

#[derive(Clone, Copy, Debug, Default)]
pub struct PortStats {
    pub tx_packets: u64,
    /// Bytes on the wire, preamble and gap included.
    pub tx_wire_bytes: u64,
    /// Picoseconds spent serializing.
    pub busy_ps: u64,
    pub drops: u64,
    pub drop_bytes: u64,
}

pub struct PortState {
    pub owner: Owner,
    pub peer: PortId,
    pub delay: SimTime,
    pub rate: Rate,
    /// Picoseconds per byte when exact (all standard speeds).
    pub ps_per_byte: Option<u64>,
    pub queues: EgressQueues,
    /// When the frame now being serialized (if any) is fully sent.
    pub busy_until: SimTime,
    /// A `TxDone` event is pending. The transmitter only asks to be woken
    /// when it has more to send, so an uncongested hop costs one event
    /// (the arrival) per packet instead of two.
    pub tx_event: bool,
    /// NIC ports: QPs with data to send, served round robin.
    pub qp_ring: VecDeque<QpId>,
    /// NIC ports: a wake-up event is pending (rate-limited QPs).
    pub wake_pending: bool,
    pub stats: PortStats,
}

impl PortState {
    pub fn from_topology(topo: &Topology) -> Vec<PortState> {
        topo.ports
            .iter()
            .map(|p| PortState {
                owner: p.owner,
                peer: p.peer,
                delay: p.delay,
                rate: p.rate,
                ps_per_byte: p.rate.exact_ps_per_byte(),
                queues: EgressQueues::default(),
                busy_until: SimTime::ZERO,
                tx_event: false,
                qp_ring: VecDeque::new(),
                wake_pending: false,
                stats: PortStats::default(),
            })
            .collect()
    }

    #[inline]
    pub fn serialize(&self, wire_bytes: u32) -> SimTime {
        match self.ps_per_byte {
            Some(k) => SimTime(k * wire_bytes as u64),
            None => self.rate.serialize(wire_bytes as u64),
        }
    }
}
