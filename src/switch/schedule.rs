//! Egress scheduling: eight FIFO priority queues per port, served in
//! strict priority (queue 7 first). Weighted sharing of the non-strict
//! queues (deficit round robin) comes with the QoS work.

use std::collections::VecDeque;

use super::classify::QUEUES;
use crate::wire::PacketId;

#[derive(Default, Debug)]
pub struct EgressQueues {
    fifo: [VecDeque<PacketId>; QUEUES],
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
    pub fn enqueue(&mut self, queue: u8, id: PacketId, bytes: u32) {
        let q = queue as usize;
        self.fifo[q].push_back(id);
        self.bytes[q] += bytes;
        self.total_bytes += bytes as u64;
        self.max_bytes = self.max_bytes.max(self.total_bytes);
        self.nonempty |= 1 << q;
    }

    /// The next packet in strict-priority order, with the bytes it held.
    #[inline]
    pub fn dequeue(&mut self, bytes_of: impl Fn(PacketId) -> u32) -> Option<PacketId> {
        if self.nonempty == 0 {
            return None;
        }
        let q = 7 - self.nonempty.leading_zeros() as usize;
        let id = self.fifo[q].pop_front()?;
        let b = bytes_of(id);
        self.bytes[q] -= b;
        self.total_bytes -= b as u64;
        if self.fifo[q].is_empty() {
            self.nonempty &= !(1 << q);
        }
        Some(id)
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
        self.fifo.iter().flat_map(|f| f.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_priority_then_fifo() {
        let mut q = EgressQueues::default();
        q.enqueue(0, PacketId(1), 100);
        q.enqueue(3, PacketId(2), 100);
        q.enqueue(0, PacketId(3), 100);
        q.enqueue(7, PacketId(4), 100);
        let order: Vec<u32> = std::iter::from_fn(|| q.dequeue(|_| 100).map(|p| p.0)).collect();
        assert_eq!(order, vec![4, 2, 1, 3]);
        assert_eq!(q.total_bytes, 0);
        assert_eq!(q.max_bytes, 400);
    }
}
