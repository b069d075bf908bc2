//! In-band network telemetry (INT) as HPCC uses it (Li et al., "HPCC:
//! High Precision Congestion Control", SIGCOMM 2019, section 3.1): every
//! switch a data packet leaves stamps one record of the egress port it
//! leaves by, and the receiver copies the records into the ACK, so that
//! the sender sees each hop's load.
//!
//! A record holds what HPCC's sender needs of a port: when the packet left
//! (`ts`), the bytes the port had sent before it (`tx_bytes`), the bytes
//! still queued behind it (`qlen`) and the port's line rate. The paper
//! packs a record into 8 bytes (with up to 5 records and a 2-byte hop
//! count, 42 bytes on every data packet and ACK); the simulator keeps
//! exact values and charges those 42 bytes on the wire (`INT_BYTES`).
//! Past `MAX_HOPS` switches a packet is stamped no further, as a real
//! INT header has no room left.

use crate::units::SimTime;

/// Records an INT header has room for.
pub const MAX_HOPS: usize = 5;

/// Bytes the INT header adds to a data packet and to its ACK: a 2-byte
/// hop count and 8 bytes per record, room for `MAX_HOPS`.
pub const INT_BYTES: u32 = 2 + 8 * MAX_HOPS as u32;

/// One switch's record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hop {
    /// When the packet started on the egress link.
    pub ts: SimTime,
    /// Wire bytes the port had sent before this packet, since the start.
    pub tx_bytes: u64,
    /// Frame bytes queued at the port as the packet left (every class).
    pub qlen: u64,
    /// The port's line rate, bits per second.
    pub rate_bps: u64,
}

/// The records a packet collected, first switch first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Int {
    pub n: u8,
    pub hops: [Hop; MAX_HOPS],
}

impl Int {
    /// Adds a switch's record, if the header has room.
    #[inline]
    pub fn push(&mut self, hop: Hop) {
        if (self.n as usize) < MAX_HOPS {
            self.hops[self.n as usize] = hop;
            self.n += 1;
        }
    }

    pub fn hops(&self) -> &[Hop] {
        &self.hops[..self.n as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records go in switch order; a sixth switch finds no room.
    #[test]
    fn records_stop_at_the_header_size() {
        let mut int = Int::default();
        for i in 0..7 {
            int.push(Hop {
                ts: SimTime(i),
                ..Hop::default()
            });
        }
        assert_eq!(int.hops().len(), MAX_HOPS);
        assert_eq!(int.hops()[4].ts, SimTime(4));
        assert_eq!(INT_BYTES, 42);
    }
}
