//! A Swift-style delay-based congestion window for RoCE QPs
//! (`transport.congestion_control = "swift"`), after Kumar et al.,
//! "Swift: Delay is Simple and Effective for Congestion Control in the
//! Datacenter", SIGCOMM 2020 (its Algorithm 1 and section 3).
//!
//! The sender times each packet from its transmission to the ACK that
//! acknowledges it (the fabric delay: queues, serialization and
//! propagation both ways) and compares it with a target:
//!
//! `target = base_target + hops x per_hop + flow_scaling`, where
//! `flow_scaling = clamp(a / sqrt(cwnd) + b, 0, fs_range)` with `a` and
//! `b` such that the term is `fs_range` at `fs_min_cwnd` and 0 at
//! `fs_max_cwnd`: flows with small windows (many flows sharing a link)
//! get a larger target, which keeps the queue from swinging with the
//! flow count. `hops` is the QP's switch count on its path.
//!
//! - delay below target: additive increase, `cwnd += ai x acked / cwnd`
//!   (`ai x acked` below one packet);
//! - at or above it: multiplicative decrease at most once per round
//!   trip, `cwnd *= max(1 - beta (delay - target) / delay, 1 - max_mdf)`;
//! - a retransmission timeout or a NAK: `cwnd *= 1 - max_mdf`;
//! - the window may fall below one packet: then the QP sends one packet
//!   every `rtt / cwnd` (pacing).

use crate::units::SimTime;
use std::collections::VecDeque;

/// The scenario's Swift settings.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SwiftParams {
    pub base_target: SimTime,
    pub per_hop: SimTime,
    pub ai: f64,
    pub beta: f64,
    pub max_mdf: f64,
    pub fs_range: SimTime,
    pub fs_min_cwnd: f64,
    pub fs_max_cwnd: f64,
    pub min_cwnd: f64,
    pub max_cwnd: f64,
    pub initial_window: f64,
}

impl Default for SwiftParams {
    /// The paper's constants where it gives them (beta 0.8, max_mdf 0.5,
    /// flow scaling between 0.1 and 100 packets); targets for a fabric
    /// whose unloaded round trip is a few microseconds: 5 us plus 1 us
    /// per switch, up to 10 us more for flows with small windows.
    fn default() -> Self {
        SwiftParams {
            base_target: SimTime::from_us(5),
            per_hop: SimTime::from_us(1),
            ai: 1.0,
            beta: 0.8,
            max_mdf: 0.5,
            fs_range: SimTime::from_us(10),
            fs_min_cwnd: 0.1,
            fs_max_cwnd: 100.0,
            min_cwnd: 0.001,
            max_cwnd: 10_000.0,
            initial_window: 10.0,
        }
    }
}

/// One QP's Swift state.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Swift {
    pub cwnd: f64,
    /// Switches on the QP's path (set when the fabric's routes are known).
    pub hops: u32,
    /// The last delay measured, and the target it was held against.
    pub rtt: SimTime,
    pub target: SimTime,
    /// No decrease before this time (one round trip after the last).
    no_decrease_until: SimTime,
    /// When the last packet went, for pacing below one packet.
    last_send: SimTime,
    /// Packets sent and not yet acknowledged: PSN and send time.
    sent: VecDeque<(u32, SimTime)>,
    pub cuts: u64,
    pub min_cwnd: f64,
    /// Delay samples, and how many were above target, for qps.csv.
    pub samples: u64,
    pub over_target: u64,
}

impl Swift {
    pub fn new(p: &SwiftParams) -> Self {
        let w = p.initial_window.clamp(p.min_cwnd, p.max_cwnd);
        Swift {
            cwnd: w,
            hops: 0,
            rtt: SimTime::ZERO,
            target: p.base_target,
            no_decrease_until: SimTime::ZERO,
            last_send: SimTime::ZERO,
            sent: VecDeque::new(),
            cuts: 0,
            min_cwnd: w,
            samples: 0,
            over_target: 0,
        }
    }

    /// Whether `inflight` unacknowledged packets leave room for one more.
    #[inline]
    pub fn open(&self, inflight: u32) -> bool {
        f64::from(inflight) < self.cwnd.floor().max(1.0)
    }

    /// Earliest time the next packet may go: at once with a window of a
    /// packet or more, else one packet per `rtt / cwnd`.
    #[inline]
    pub fn earliest_send(&self, now: SimTime) -> SimTime {
        if self.cwnd >= 1.0 || self.rtt == SimTime::ZERO {
            return now;
        }
        let gap = (self.rtt.0 as f64 / self.cwnd).ceil() as u64;
        now.max(self.last_send + SimTime(gap))
    }

    /// Packet `psn` went out at `now`.
    pub fn on_send(&mut self, psn: u32, now: SimTime) {
        self.last_send = now;
        // A go-back-N resend starts over from an older PSN: its newer
        // records are moot.
        while self.sent.back().is_some_and(|&(q, _)| q >= psn) {
            self.sent.pop_back();
        }
        self.sent.push_back((psn, now));
    }

    fn target_for(&self, p: &SwiftParams) -> SimTime {
        let inv = |w: f64| 1.0 / w.sqrt();
        let range = p.fs_range.0 as f64;
        let a = range / (inv(p.fs_min_cwnd) - inv(p.fs_max_cwnd));
        let b = -a * inv(p.fs_max_cwnd);
        let fs = (a * inv(self.cwnd) + b).clamp(0.0, range);
        p.base_target + SimTime(p.per_hop.0 * u64::from(self.hops)) + SimTime(fs as u64)
    }

    /// An ACK at `now` moved the oldest unacknowledged PSN to `una`,
    /// `newly` packets further.
    pub fn on_ack(&mut self, p: &SwiftParams, now: SimTime, una: u32, newly: u32) {
        // The delay of the newest packet this ACK covers.
        let mut sample = None;
        while let Some(&(psn, at)) = self.sent.front() {
            if psn >= una {
                break;
            }
            sample = Some(now - at);
            self.sent.pop_front();
        }
        let Some(delay) = sample else {
            return;
        };
        self.rtt = delay;
        self.target = self.target_for(p);
        self.samples += 1;
        if delay < self.target {
            let n = f64::from(newly.max(1));
            if self.cwnd >= 1.0 {
                self.cwnd += p.ai * n / self.cwnd;
            } else {
                self.cwnd += p.ai * n;
            }
        } else {
            self.over_target += 1;
            if now >= self.no_decrease_until {
                let over = (delay.0 - self.target.0) as f64 / delay.0 as f64;
                let f = (1.0 - p.beta * over).max(1.0 - p.max_mdf);
                self.cwnd *= f;
                self.no_decrease_until = now + delay;
                self.cuts += 1;
            }
        }
        self.cwnd = self.cwnd.clamp(p.min_cwnd, p.max_cwnd);
        self.min_cwnd = self.min_cwnd.min(self.cwnd);
    }

    /// A loss (NAK) or a retransmission timeout.
    pub fn on_loss(&mut self, p: &SwiftParams, now: SimTime) {
        if now >= self.no_decrease_until {
            self.cwnd = (self.cwnd * (1.0 - p.max_mdf)).clamp(p.min_cwnd, p.max_cwnd);
            self.no_decrease_until = now + self.rtt;
            self.cuts += 1;
            self.min_cwnd = self.min_cwnd.min(self.cwnd);
        }
        self.sent.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> SimTime {
        SimTime::from_us(n)
    }

    /// Below target the window grows by ai per window; above it, it is
    /// cut in proportion to the excess, once per round trip.
    #[test]
    fn increases_below_target_and_cuts_above() {
        let p = SwiftParams::default();
        let mut s = Swift::new(&p);
        s.on_send(0, us(0));
        s.on_ack(&p, us(3), 1, 1);
        assert!((s.cwnd - 10.1).abs() < 1e-9, "{}", s.cwnd);
        // 30 us of delay against a target of about 5 us + flow scaling.
        s.on_send(1, us(3));
        s.on_ack(&p, us(33), 2, 1);
        let over = (30.0 - s.target.0 as f64 / 1e6) / 30.0;
        let want = 10.1 * (1.0 - 0.8 * over).max(0.5);
        assert!((s.cwnd - want).abs() < 1e-6, "{} against {want}", s.cwnd);
        // Within the next round trip: no second cut.
        s.on_send(2, us(33));
        s.on_ack(&p, us(60), 3, 1);
        assert_eq!(s.cuts, 1);
    }

    /// Flow scaling: the target is fs_range above base at fs_min_cwnd and
    /// base at fs_max_cwnd.
    #[test]
    fn small_windows_get_larger_targets() {
        let p = SwiftParams::default();
        let mut s = Swift::new(&p);
        s.cwnd = p.fs_min_cwnd;
        assert_eq!(s.target_for(&p), p.base_target + p.fs_range);
        s.cwnd = p.fs_max_cwnd;
        let t = s.target_for(&p);
        assert!(t.0.abs_diff(p.base_target.0) <= 1, "{t}");
        s.hops = 3;
        assert!(s.target_for(&p) >= p.base_target + us(3));
    }

    /// Below one packet the QP is paced at rtt / cwnd.
    #[test]
    fn paces_below_one_packet() {
        let p = SwiftParams::default();
        let mut s = Swift::new(&p);
        s.cwnd = 0.5;
        s.rtt = us(10);
        s.on_send(0, us(100));
        assert_eq!(s.earliest_send(us(101)), us(120));
        assert!(s.open(0) && !s.open(1));
    }
}
