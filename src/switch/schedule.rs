//! Egress scheduling: eight FIFO priority queues per port, served in
//! strict priority (queue 7 first). Weighted sharing of the non-strict
//! queues (deficit round robin) comes with the QoS work.

use std::collections::VecDeque;

use super::classify::QUEUES;
use crate::wire::frame::PREAMBLE_SFD_IFG;
use crate::wire::PacketId;

/// A queued frame: its packet and its size on the wire, kept here so that
/// the transmitter never has to touch the packet record to dequeue it.
#[derive(Clone, Copy, Debug)]
pub struct Queued {
    pub id: PacketId,
    pub wire_bytes: u32,
}

/// Queue depths count the frame as buffered: destination MAC to FCS.
#[inline]
fn held(wire_bytes: u32) -> u32 {
    wire_bytes - PREAMBLE_SFD_IFG
}

#[derive(Default, Debug)]
pub struct EgressQueues {
    fifo: [VecDeque<Queued>; QUEUES],
    bytes: [u32; QUEUES],
    /// Bytes queued across all priorities.
    pub total_bytes: u64,
    /// Largest `total_bytes` seen.
    pub max_bytes: u64,
    /// Bit i set when queue i is non-empty.
    nonempty: u8,
}

impl EgressQueues {
    #[inline]
    pub fn enqueue(&mut self, queue: u8, id: PacketId, wire_bytes: u32) {
        let q = queue as usize;
        let bytes = held(wire_bytes);
        self.fifo[q].push_back(Queued { id, wire_bytes });
        self.bytes[q] += bytes;
        self.total_bytes += bytes as u64;
        self.max_bytes = self.max_bytes.max(self.total_bytes);
        self.nonempty |= 1 << q;
    }

    /// The next frame in strict-priority order.
    #[inline]
    pub fn dequeue(&mut self) -> Option<Queued> {
        if self.nonempty == 0 {
            return None;
        }
        let q = 7 - self.nonempty.leading_zeros() as usize;
        let e = self.fifo[q].pop_front()?;
        let b = held(e.wire_bytes);
        self.bytes[q] -= b;
        self.total_bytes -= b as u64;
        if self.fifo[q].is_empty() {
            self.nonempty &= !(1 << q);
        }
        Some(e)
    }

    pub fn is_empty(&self) -> bool {
        self.nonempty == 0
    }

    pub fn queue_bytes(&self, queue: u8) -> u32 {
        self.bytes[queue as usize]
    }

    pub fn len(&self) -> usize {
        self.fifo.iter().map(|f| f.len()).sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = PacketId> + '_ {
        self.fifo.iter().flat_map(|f| f.iter().map(|e| e.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_priority_then_fifo() {
        let mut q = EgressQueues::default();
        q.enqueue(0, PacketId(1), 120);
        q.enqueue(3, PacketId(2), 120);
        q.enqueue(0, PacketId(3), 120);
        q.enqueue(7, PacketId(4), 120);
        let order: Vec<u32> = std::iter::from_fn(|| q.dequeue().map(|e| e.id.0)).collect();
        assert_eq!(order, vec![4, 2, 1, 3]);
        assert_eq!(q.total_bytes, 0);
        assert_eq!(q.max_bytes, 400);
    }
}
