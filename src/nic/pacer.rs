//! Pacing at a rate in floating point, kept out of `rate` (whose
//! arithmetic is integer): the gap after each packet is its wire bytes
//! at the rate, rounded up to the picosecond.

use crate::units::SimTime;

/// Paces a QP at a rate: the next packet may start the last one's wire
/// bytes at the rate after the last one started (HPCC's and TIMELY's
/// rates; DCQCN's own follows its timers across the gap).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Pacer {
    last_send: SimTime,
    last_wire: u32,
}

impl Pacer {
    /// Earliest time the next packet may start at `rate_bps`; at once at
    /// `line_bps` or above.
    #[inline]
    pub fn earliest(&self, now: SimTime, rate_bps: f64, line_bps: f64) -> SimTime {
        if self.last_wire == 0 || rate_bps >= line_bps {
            return now;
        }
        let gap = f64::from(self.last_wire) * 8e12 / rate_bps;
        now.max(self.last_send + SimTime(gap.ceil() as u64))
    }

    /// A packet of `wire` bytes started at `now`.
    #[inline]
    pub fn sent(&mut self, now: SimTime, wire: u32) {
        self.last_send = now;
        self.last_wire = wire;
    }
}
