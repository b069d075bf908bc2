//! A DCTCP-style congestion window for RoCE QPs (`transport.congestion_control
//! = "dctcp"`), after Alizadeh et al., "Data Center TCP", SIGCOMM 2010,
//! and RFC 8257.
//!
//! Switches mark ECN-capable packets (the class's WRED; DCTCP wants a
//! step at one threshold K, `wred = { min = K, max = K }`). Each ACK or
//! NAK carries the receiver's running count of CE-marked packets, as
//! TCP's Accurate ECN counters do, so that coalesced ACKs lose nothing.
//! The sender keeps at most `cwnd` packets unacknowledged and:
//!
//! - once per window of data (from a PSN to the next one sent when that
//!   PSN is acknowledged) updates the marked fraction estimate
//!   `alpha = (1 - g) alpha + g F`, F the share of packets acknowledged in
//!   the window that were marked;
//! - on the first marked acknowledgement of a window, cuts
//!   `cwnd = cwnd (1 - alpha / 2)` (at most once per window);
//! - otherwise grows as TCP does: one packet per packet acknowledged below
//!   `ssthresh` (slow start), one packet per window above it;
//! - on a NAK (a loss, go-back-N) halves the window once per window, and
//!   on a retransmission timeout restarts from one packet.
//!
//! Windows count packets (MTU payloads): a QP's packets are all full but
//! the last of each message.

use crate::units::SimTime;

/// The scenario's `[dctcp]` settings.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DctcpParams {
    /// Weight of the newest window's marked fraction (the paper's g).
    pub g: f64,
    /// Window at the start, packets.
    pub initial_window: u32,
    /// Smallest window, packets.
    pub min_window: u32,
}

impl Default for DctcpParams {
    /// g = 1/16 (the paper's and RFC 8257's), an initial window of 10
    /// packets (RFC 6928), never below one packet.
    fn default() -> Self {
        DctcpParams {
            g: 1.0 / 16.0,
            initial_window: 10,
            min_window: 1,
        }
    }
}

/// One QP's window state.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Dctcp {
    /// Congestion window, packets (fractional during additive increase).
    pub cwnd: f64,
    pub ssthresh: f64,
    /// Estimated fraction of marked packets.
    pub alpha: f64,
    /// The CE count of the latest acknowledgement.
    ce_seen: u32,
    /// This observation window: it ends when `window_end` is
    /// acknowledged; packets acknowledged and marked in it so far.
    window_end: u32,
    acked: u32,
    marked: u32,
    /// No further cut until this PSN is acknowledged.
    cut_end: u32,
    /// Cuts so far, and the smallest window reached (for qps.csv).
    pub cuts: u64,
    pub min_cwnd: f64,
}

impl Dctcp {
    pub fn new(p: &DctcpParams) -> Self {
        let w = f64::from(p.initial_window.max(p.min_window));
        Dctcp {
            cwnd: w,
            ssthresh: f64::INFINITY,
            alpha: 1.0,
            ce_seen: 0,
            window_end: 0,
            acked: 0,
            marked: 0,
            cut_end: 0,
            cuts: 0,
            min_cwnd: w,
        }
    }

    /// Whether `inflight` unacknowledged packets leave room for one more.
    #[inline]
    pub fn open(&self, inflight: u32) -> bool {
        f64::from(inflight) < self.cwnd.floor().max(1.0)
    }

    /// An acknowledgement moved the oldest unacknowledged PSN to `una`,
    /// `newly` packets further, carrying the receiver's CE count `ce`;
    /// `next` is the next PSN to send.
    pub fn on_ack(&mut self, p: &DctcpParams, newly: u32, ce: u32, una: u32, next: u32) {
        // A running count: what this acknowledgement adds. Sprayed or
        // rebalanced ACKs may come back out of order, so a late one
        // carries an older, smaller count: it adds nothing.
        let marked_now = ce.saturating_sub(self.ce_seen);
        self.ce_seen = self.ce_seen.max(ce);
        self.acked = self.acked.saturating_add(newly);
        self.marked = self.marked.saturating_add(marked_now);
        if marked_now > 0 {
            if una > self.cut_end || self.cuts == 0 {
                self.cwnd = (self.cwnd * (1.0 - self.alpha / 2.0)).max(f64::from(p.min_window));
                self.ssthresh = self.cwnd;
                self.cut_end = next;
                self.cuts += 1;
                self.min_cwnd = self.min_cwnd.min(self.cwnd);
            }
        } else if newly > 0 {
            if self.cwnd < self.ssthresh {
                self.cwnd += f64::from(newly);
            } else {
                self.cwnd += f64::from(newly) / self.cwnd;
            }
        }
        if una > self.window_end {
            if self.acked > 0 {
                let f = (f64::from(self.marked) / f64::from(self.acked)).min(1.0);
                self.alpha = (1.0 - p.g) * self.alpha + p.g * f;
            }
            self.acked = 0;
            self.marked = 0;
            self.window_end = next;
        }
    }

    /// A NAK: a packet was lost (go-back-N resends from it).
    pub fn on_loss(&mut self, p: &DctcpParams, una: u32, next: u32) {
        if una >= self.cut_end {
            self.cwnd = (self.cwnd / 2.0).max(f64::from(p.min_window));
            self.ssthresh = self.cwnd;
            self.cut_end = next;
            self.cuts += 1;
            self.min_cwnd = self.min_cwnd.min(self.cwnd);
        }
    }

    /// The retransmission timer fired: start again from one window of
    /// `min_window`, half the old window as the slow-start threshold.
    pub fn on_timeout(&mut self, p: &DctcpParams, _now: SimTime) {
        self.ssthresh = (self.cwnd / 2.0).max(f64::from(p.min_window));
        self.cwnd = f64::from(p.min_window);
        self.min_cwnd = self.min_cwnd.min(self.cwnd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slow start doubles per window; with no marks alpha decays by
    /// (1 - g) per window.
    #[test]
    fn grows_and_forgets_without_marks() {
        let p = DctcpParams::default();
        let mut d = Dctcp::new(&p);
        // Ten packets acknowledged one by one.
        for una in 1..=10 {
            d.on_ack(&p, 1, 0, una, 10 + una);
        }
        assert_eq!(d.cwnd, 20.0);
        assert!((d.alpha - 15.0 / 16.0).abs() < 1e-12, "{}", d.alpha);
    }

    /// Every packet of a window marked: alpha moves g towards 1 and the
    /// window halves at most once per window.
    #[test]
    fn cuts_by_alpha_once_per_window() {
        let p = DctcpParams::default();
        let mut d = Dctcp::new(&p);
        d.alpha = 0.5;
        d.on_ack(&p, 1, 1, 1, 10);
        assert_eq!(d.cwnd, 10.0 * 0.75);
        // Later marks in the same window do not cut again.
        d.on_ack(&p, 1, 2, 2, 10);
        assert_eq!(d.cwnd, 7.5);
        assert_eq!(d.cuts, 1);
        // The first ACK closed the first window (F = 1); the next closes
        // when PSN 10 is acknowledged, every packet of it marked.
        for una in 3..=11 {
            d.on_ack(&p, 1, una, una, 12);
        }
        let a1 = 0.5 * 15.0 / 16.0 + 1.0 / 16.0;
        let a2 = a1 * 15.0 / 16.0 + 1.0 / 16.0;
        assert!((d.alpha - a2).abs() < 1e-12, "{}", d.alpha);
        assert_eq!(d.cuts, 2, "a new window may cut again");
    }

    /// An ACK that overtook an earlier one carries a larger CE count; the
    /// earlier one, arriving after, adds no marks (and no overflow).
    #[test]
    fn a_late_ack_with_an_older_count_adds_nothing() {
        let p = DctcpParams::default();
        let mut d = Dctcp::new(&p);
        d.on_ack(&p, 1, 5, 1, 10);
        let (cwnd, cuts) = (d.cwnd, d.cuts);
        d.on_ack(&p, 1, 3, 2, 10);
        assert_eq!((d.ce_seen, d.marked), (5, 0));
        // No cut: the window grows by one packet's share, as for an
        // unmarked ACK.
        assert_eq!(d.cuts, cuts);
        assert!((d.cwnd - (cwnd + 1.0 / cwnd)).abs() < 1e-12, "{}", d.cwnd);
    }

    #[test]
    fn window_gates_sending() {
        let p = DctcpParams::default();
        let mut d = Dctcp::new(&p);
        assert!(d.open(9) && !d.open(10));
        d.on_timeout(&p, SimTime::ZERO);
        assert!(d.open(0) && !d.open(1));
        assert_eq!(d.ssthresh, 5.0);
    }
}
