//! Marking: WRED with ECN (RFC 3168) on an egress queue.
//!
//! Below the minimum threshold nothing happens; between minimum and
//! maximum a packet is hit with a probability rising linearly from 0 to
//! the maximum probability; at or above the maximum every packet is hit.
//! A hit on an ECN-capable packet (ECT(0) or ECT(1)) of a class with ECN
//! on sets CE; any other hit drops the packet. The depth compared is the
//! instantaneous queue depth (weight 0) or an exponentially weighted
//! average, avg += (depth - avg) / 2^weight, updated at each decision.

use super::qos::PortWred;
use crate::rng::Stream;
use crate::wire::frame::ecn;

/// WRED on one egress queue of one port.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Wred {
    pub queue: u8,
    pub cfg: PortWred,
    avg: f64,
}

/// What WRED does to one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    Pass,
    /// Set CE.
    Mark,
    Drop,
}

impl Wred {
    pub fn new(queue: u8, cfg: PortWred) -> Self {
        Wred {
            queue,
            cfg,
            avg: 0.0,
        }
    }

    /// Whether WRED hits a packet seeing `depth` bytes in the queue;
    /// draws from `rng` only between the thresholds.
    #[inline]
    pub fn hit(&mut self, depth: u32, rng: &mut Stream) -> bool {
        let c = &self.cfg;
        let avg = if c.weight == 0 {
            depth as f64
        } else {
            self.avg += (depth as f64 - self.avg) / (1u64 << c.weight) as f64;
            self.avg
        };
        if avg < c.min as f64 {
            false
        } else if avg >= c.max as f64 {
            true
        } else {
            let span = (c.max - c.min).max(1) as f64;
            let p = (c.pmax_u32 as f64 * (avg - c.min as f64) / span) as u64;
            (rng.next_u64() >> 32) < p
        }
    }

    /// What a hit does to a packet with ECN codepoint `ecn_bits`.
    #[inline]
    pub fn action(&self, ecn_bits: u8) -> Mark {
        if self.cfg.ecn && ecn_bits != ecn::NOT_ECT {
            Mark::Mark
        } else {
            Mark::Drop
        }
    }

    /// `hit`, then `action` (for tests and callers that hold the packet).
    pub fn decide(&mut self, depth: u32, ecn_bits: u8, rng: &mut Stream) -> Mark {
        if self.hit(depth, rng) {
            self.action(ecn_bits)
        } else {
            Mark::Pass
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Streams;

    fn wred(ecn_on: bool, weight: u8) -> Wred {
        Wred::new(
            3,
            PortWred {
                min: 1000,
                max: 3000,
                pmax_u32: 1 << 31, // 0.5
                weight,
                ecn: ecn_on,
            },
        )
    }

    #[test]
    fn marks_with_linear_probability_between_thresholds() {
        let mut rng = Streams::new(1).stream("t");
        let mut w = wred(true, 0);
        assert_eq!(w.decide(999, ecn::ECT0, &mut rng), Mark::Pass);
        assert_eq!(w.decide(3000, ecn::ECT0, &mut rng), Mark::Mark);
        // Halfway: probability 0.25.
        let n = 40_000;
        let marks = (0..n)
            .filter(|_| w.decide(2000, ecn::ECT0, &mut rng) == Mark::Mark)
            .count();
        let frac = marks as f64 / n as f64;
        assert!((frac - 0.25).abs() < 0.01, "fraction {frac}");
    }

    #[test]
    fn drops_non_ect_and_when_ecn_is_off() {
        let mut rng = Streams::new(1).stream("t");
        assert_eq!(
            wred(true, 0).decide(5000, ecn::NOT_ECT, &mut rng),
            Mark::Drop
        );
        assert_eq!(wred(false, 0).decide(5000, ecn::ECT0, &mut rng), Mark::Drop);
    }

    #[test]
    fn averaging_weight_smooths_a_burst() {
        let mut rng = Streams::new(1).stream("t");
        let mut w = wred(true, 4);
        // One sample of 5000 moves the average by 5000/16 only.
        assert_eq!(w.decide(5000, ecn::ECT0, &mut rng), Mark::Pass);
        for _ in 0..200 {
            w.decide(5000, ecn::ECT0, &mut rng);
        }
        assert_eq!(w.decide(5000, ecn::ECT0, &mut rng), Mark::Mark);
    }
}
