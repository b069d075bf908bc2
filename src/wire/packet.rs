//! The in-flight packet record and the arena that owns every live packet.
//!
//! A packet is 36 bytes of header fields; events and queues hold its
//! `PacketId`, an index into the arena. Freed slots are reused, so a run in
//! steady state allocates nothing per packet.

use super::frame::Opcode;
use crate::topology::{NicId, QpId};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct PacketId(pub u32);

#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct Packet {
    pub src: NicId,
    pub dst: NicId,
    /// The queue pair this packet belongs to (both ends share the id).
    pub qp: QpId,
    /// Packet sequence number; on ACK/NAK, the PSN acknowledged or expected;
    /// on a PFC frame, the pause time in quanta (0 = resume).
    pub psn: u32,
    pub payload: u32,
    /// Bytes on the wire including preamble and inter-frame gap.
    pub wire_bytes: u32,
    /// CRC of the header fields ECMP hashes, with initial value 0,
    /// computed once per QP and direction by the sender. Because a CRC is
    /// affine, each switch turns it into the CRC with its own seed in O(1)
    /// (`switch::balance::hash`).
    pub header_crc: u32,
    pub udp_sport: u16,
    pub opcode: Opcode,
    /// The IPv4 TOS byte: DiffServ code point in bits 7..2, ECN codepoint
    /// in bits 1..0. On a PFC frame: the class-enable vector.
    pub tos: u8,
    /// On data: the transfer whose message it carries (the messages of a
    /// connection share its QP). On an ACK or NAK of a QP with a DCTCP-style
    /// window: the receiver's running count of CE-marked data packets (as
    /// TCP's Accurate ECN counters carry it). `NO_FLOW` on anything else.
    pub flow: u32,
}

/// The `flow` of a frame that carries no transfer's data.
pub const NO_FLOW: u32 = u32::MAX;

impl Packet {
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.tos >> 2
    }

    #[inline]
    pub fn ecn(&self) -> u8 {
        self.tos & 3
    }

    pub fn tos_of(dscp: u8, ecn: u8) -> u8 {
        (dscp << 2) | (ecn & 3)
    }

    /// Bytes held in a switch buffer: the frame without preamble and gap.
    pub fn buffer_bytes(&self) -> u32 {
        self.wire_bytes - super::frame::PREAMBLE_SFD_IFG
    }
}

/// Owner of all live packets. A freed slot holds the index of the next
/// free one (in its `psn` field), so the free list costs no memory of its
/// own.
pub struct PacketArena {
    slots: Vec<Packet>,
    /// Each slot's INT records (`wire::int`), only when HPCC is on: a
    /// data packet's, stamped by the switches, and its ACK's, copied from
    /// it (`set_int`; other frames' slots hold stale records nobody
    /// reads). Empty otherwise.
    int: Vec<super::int::Int>,
    int_on: bool,
    /// The first free slot, `NONE` if every slot is live.
    free_head: u32,
    live: usize,
    peak_live: usize,
}

const NONE: u32 = u32::MAX;

impl Default for PacketArena {
    fn default() -> Self {
        PacketArena {
            slots: Vec::new(),
            int: Vec::new(),
            int_on: false,
            free_head: NONE,
            live: 0,
            peak_live: 0,
        }
    }
}

impl PacketArena {
    pub fn alloc(&mut self, p: Packet) -> PacketId {
        self.live += 1;
        self.peak_live = self.peak_live.max(self.live);
        if self.free_head != NONE {
            let i = self.free_head;
            self.free_head = self.slots[i as usize].psn;
            self.slots[i as usize] = p;
            PacketId(i)
        } else {
            self.slots.push(p);
            PacketId(self.slots.len() as u32 - 1)
        }
    }

    /// An arena whose packets carry INT records if `int` (HPCC).
    pub fn new(int: bool) -> Self {
        PacketArena {
            int_on: int,
            ..Default::default()
        }
    }

    /// Gives every packet room for INT records from now on.
    pub fn enable_int(&mut self) {
        self.int_on = true;
    }

    pub fn int_on(&self) -> bool {
        self.int_on
    }

    /// Gives packet `id` these INT records (a data packet none as it
    /// leaves its NIC, an ACK its data packet's); nothing when INT is off.
    pub fn set_int(&mut self, id: PacketId, int: super::int::Int) {
        if !self.int_on {
            return;
        }
        let i = id.0 as usize;
        if self.int.len() <= i {
            self.int
                .resize(self.slots.len().max(i + 1), Default::default());
        }
        self.int[i] = int;
    }

    /// Packet `id`'s INT records (`None` when INT is off). Still readable
    /// after `take` or `free`, until the slot is allocated again.
    #[inline]
    pub fn int(&self, id: PacketId) -> Option<&super::int::Int> {
        self.int.get(id.0 as usize).filter(|_| self.int_on)
    }

    #[inline]
    pub fn int_mut(&mut self, id: PacketId) -> Option<&mut super::int::Int> {
        if !self.int_on {
            return None;
        }
        self.int.get_mut(id.0 as usize)
    }

    pub fn free(&mut self, id: PacketId) {
        self.live -= 1;
        self.slots[id.0 as usize].psn = self.free_head;
        self.free_head = id.0;
    }

    /// Frees a packet's slot and returns what it held.
    pub fn take(&mut self, id: PacketId) -> Packet {
        let p = self.slots[id.0 as usize];
        self.free(id);
        p
    }

    #[inline]
    pub fn get(&self, id: PacketId) -> &Packet {
        &self.slots[id.0 as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, id: PacketId) -> &mut Packet {
        &mut self.slots[id.0 as usize]
    }

    /// Where a packet's record sits, for prefetching; never dereferenced
    /// here.
    #[inline]
    pub fn slot_ptr(&self, id: PacketId) -> *const Packet {
        self.slots.as_ptr().wrapping_add(id.0 as usize)
    }

    pub fn live(&self) -> usize {
        self.live
    }

    pub fn peak_live(&self) -> usize {
        self.peak_live
    }

    /// Every live packet (slow: walks the arena and its free list; for
    /// invariant checks).
    pub fn iter_live(&self) -> impl Iterator<Item = &Packet> {
        let mut is_free = vec![false; self.slots.len()];
        let mut i = self.free_head;
        while i != NONE {
            is_free[i as usize] = true;
            i = self.slots[i as usize].psn;
        }
        self.slots
            .iter()
            .enumerate()
            .filter(move |(i, _)| !is_free[*i])
            .map(|(_, p)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{NicId, QpId};

    fn packet(psn: u32) -> Packet {
        Packet {
            src: NicId(0),
            dst: NicId(1),
            qp: QpId(0),
            psn,
            payload: 0,
            wire_bytes: 84,
            header_crc: 0,
            udp_sport: 0,
            opcode: Opcode::Ack,
            tos: 0,
            flow: crate::wire::packet::NO_FLOW,
        }
    }

    /// Freed slots are reused, last freed first, and the walk of live
    /// packets skips exactly the free ones.
    #[test]
    fn free_slots_are_reused_and_skipped() {
        let mut a = PacketArena::default();
        let ids: Vec<PacketId> = (0..5).map(|i| a.alloc(packet(100 + i))).collect();
        a.free(ids[1]);
        a.free(ids[3]);
        let mut live: Vec<u32> = a.iter_live().map(|p| p.psn).collect();
        live.sort();
        assert_eq!(live, vec![100, 102, 104]);
        assert_eq!(a.alloc(packet(7)), ids[3]);
        assert_eq!(a.alloc(packet(8)), ids[1]);
        assert_eq!(a.alloc(packet(9)), PacketId(5));
        assert_eq!(a.get(ids[1]).psn, 8);
        assert_eq!((a.live(), a.peak_live()), (6, 6));
    }
}
