//! HPCC for RoCE QPs (`transport.congestion_control = "hpcc"`), after Li
//! et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019
//! (Algorithm 1), and the authors' simulator.
//!
//! Every switch stamps the data packets it sends with its egress port's
//! state (`wire::int`); the receiver echoes the records in the ACK. On
//! each ACK the sender estimates, per hop i, the link's normalized load
//! from this ACK's record and the previous one's:
//!
//! `u_i = min(qlen, qlen') / (B_i T) + txRate_i / B_i`, with `txRate_i =
//! (tx_bytes - tx_bytes') / (ts - ts')`,
//!
//! takes the most loaded hop (`U`, and `tau`, the time between its two
//! records, at most T) and smooths it, `u = (1 - tau/T) u + (tau/T) U`.
//! The rate then follows:
//!
//! - `u >= eta` or `max_stage` additive steps in a row: `R = Rc / (u /
//!   eta) + R_ai` (multiplicative, towards the target utilization);
//! - otherwise `R = Rc + R_ai`.
//!
//! `Rc`, the reference rate, and the stage count move only once per
//! round trip (when an ACK covers the first packet sent after the last
//! update); the ACKs between react from `Rc` without moving it, so that
//! the sender reacts to every ACK without counting one congestion event
//! many times. The QP is paced at `R` and keeps at most `W = R T` bytes
//! unacknowledged. T is the fabric's base round trip (`[hpcc] base_rtt`,
//! by default that of its longest path), as in the paper's evaluation.
//! Loss (a NAK, a timeout) leaves the rate alone: HPCC runs over a
//! lossless fabric and lets go-back-N resend.

use crate::units::SimTime;
use crate::wire::int::Int;

/// The scenario's `[hpcc]` settings.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HpccParams {
    /// Target utilization (the paper's eta).
    pub eta: f64,
    /// Additive steps before a multiplicative one (the paper's maxStage).
    pub max_stage: u32,
    /// Additive step, bits per second (`None`: 10 Mb/s per 25 Gb/s of the
    /// QP's line rate, the authors' simulations).
    pub ai_bps: Option<f64>,
    /// The rate never goes below this, bits per second.
    pub min_bps: f64,
    /// Base round trip T (`None`: the fabric's longest path's, set when
    /// the routes are known).
    pub base_rtt: Option<SimTime>,
}

impl Default for HpccParams {
    /// eta = 95% and maxStage = 5 (the paper's section 5.1); a floor of
    /// 100 Mb/s (the authors' simulator's minimum rate).
    fn default() -> Self {
        HpccParams {
            eta: 0.95,
            max_stage: 5,
            ai_bps: None,
            min_bps: 100e6,
            base_rtt: None,
        }
    }
}

/// One QP's HPCC state.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Hpcc {
    /// The NIC port's line rate, bits per second.
    pub line_bps: f64,
    /// T, picoseconds.
    pub t_ps: f64,
    ai_bps: f64,
    /// Current rate R and reference rate Rc, bits per second.
    pub rate_bps: f64,
    ref_bps: f64,
    inc_stage: u32,
    /// Smoothed utilization.
    pub u: f64,
    /// The previous ACK's records, and whether there was one.
    last: Int,
    have_last: bool,
    /// The next update of Rc waits for an ACK past this PSN.
    update_after: Option<u32>,
    pace: super::pacer::Pacer,
    /// Multiplicative decreases of Rc, and the smallest rate reached
    /// (for qps.csv).
    pub cuts: u64,
    pub min_bps: f64,
}

impl Hpcc {
    /// A QP sending at `line_bps`, starting at line rate (a window of one
    /// round trip's bytes), as in the paper.
    pub fn new(p: &HpccParams, line_bps: f64, base_rtt: SimTime) -> Self {
        Hpcc {
            line_bps,
            t_ps: base_rtt.0.max(1) as f64,
            ai_bps: p.ai_bps.unwrap_or(line_bps * 10e6 / 25e9),
            rate_bps: line_bps,
            ref_bps: line_bps,
            inc_stage: 0,
            u: 0.0,
            last: Int::default(),
            have_last: false,
            update_after: None,
            pace: super::pacer::Pacer::default(),
            cuts: 0,
            min_bps: line_bps,
        }
    }

    /// The window W = R T, bytes.
    pub fn window_bytes(&self) -> f64 {
        self.rate_bps * self.t_ps * 1e-12 / 8.0
    }

    /// Whether `inflight` unacknowledged packets of `mtu` payload bytes
    /// leave room for one more (always room for one).
    #[inline]
    pub fn open(&self, inflight: u32, mtu: u32) -> bool {
        inflight == 0 || f64::from(inflight) * f64::from(mtu) < self.window_bytes()
    }

    /// Earliest time the next packet may go: the last one's wire bytes at
    /// rate R after it left.
    #[inline]
    pub fn earliest_send(&self, now: SimTime) -> SimTime {
        self.pace.earliest(now, self.rate_bps, self.line_bps)
    }

    /// A packet of `wire` bytes went out at `now`.
    #[inline]
    pub fn on_send(&mut self, now: SimTime, wire: u32) {
        self.pace.sent(now, wire);
    }

    /// An ACK with records `int` acknowledged every PSN below `una`;
    /// `next` is the next new PSN the QP will send.
    pub fn on_ack(&mut self, p: &HpccParams, int: &Int, una: u32, next: u32) {
        let full = self.update_after.is_none_or(|s| una > s);
        if !self.have_last || int.n != self.last.n {
            // The first records, or a path of another length: nothing to
            // compare with yet.
            self.last = *int;
            self.have_last = true;
            self.update_after = Some(next);
            return;
        }
        let t = self.t_ps;
        let (mut big_u, mut tau) = (0.0f64, 0.0f64);
        for (now, before) in int.hops().iter().zip(self.last.hops()) {
            let dt = now.ts.0.saturating_sub(before.ts.0) as f64;
            let b = now.rate_bps as f64;
            if dt <= 0.0 || b <= 0.0 {
                continue;
            }
            let tx_bps = now.tx_bytes.saturating_sub(before.tx_bytes) as f64 * 8e12 / dt;
            let queue = now.qlen.min(before.qlen) as f64 * 8.0 / (b * t * 1e-12);
            let u = queue + tx_bps / b;
            if u > big_u {
                big_u = u;
                tau = dt;
            }
        }
        self.last = *int;
        if tau > 0.0 {
            let tau = tau.min(t);
            self.u = (self.u * (t - tau) + big_u * tau) / t;
            let c = self.u / p.eta;
            let (rate, stage) = if c >= 1.0 || self.inc_stage >= p.max_stage {
                (self.ref_bps / c.max(f64::MIN_POSITIVE) + self.ai_bps, 0)
            } else {
                (self.ref_bps + self.ai_bps, self.inc_stage + 1)
            };
            let rate = rate.clamp(p.min_bps.min(self.line_bps), self.line_bps);
            self.rate_bps = rate;
            self.min_bps = self.min_bps.min(rate);
            if full {
                if stage == 0 && rate < self.ref_bps {
                    self.cuts += 1;
                }
                self.ref_bps = rate;
                self.inc_stage = stage;
            }
        }
        if full {
            self.update_after = Some(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::int::Hop;

    const G100: f64 = 100e9;

    fn records(ts_us: u64, tx_bytes: u64, qlen: u64) -> Int {
        let mut int = Int::default();
        int.push(Hop {
            ts: SimTime::from_us(ts_us),
            tx_bytes,
            qlen,
            rate_bps: G100 as u64,
        });
        int
    }

    /// A link at full rate with a standing queue of one round trip's
    /// bytes reads u = 2: the reference rate is cut to eta / 2 of itself
    /// (plus the step); a half-loaded, empty link lets it grow by the
    /// step only.
    #[test]
    fn the_rate_follows_the_most_loaded_hop() {
        let p = HpccParams::default();
        let t = SimTime::from_us(10);
        let mut h = Hpcc::new(&p, G100, t);
        let bdp = 125_000; // 100 Gb/s x 10 us
        h.on_ack(&p, &records(0, 0, bdp), 0, 10);
        // 10 us later the link sent 125 kB (full rate), queue unchanged.
        h.on_ack(&p, &records(10, bdp, bdp), 11, 20);
        assert!((h.u - 2.0).abs() < 1e-9, "{}", h.u);
        let want = G100 / (2.0 / 0.95) + h.ai_bps;
        assert!((h.rate_bps - want).abs() < 1.0, "{} {want}", h.rate_bps);
        assert_eq!(h.cuts, 1);
        let mut h = Hpcc::new(&p, G100, t);
        h.rate_bps = 40e9;
        h.ref_bps = 40e9;
        h.on_ack(&p, &records(0, 0, 0), 0, 10);
        h.on_ack(&p, &records(10, bdp / 2, 0), 11, 20);
        assert!((h.u - 0.5).abs() < 1e-9);
        assert!((h.rate_bps - (40e9 + h.ai_bps)).abs() < 1.0);
    }

    /// ACKs within a round trip react from the reference rate without
    /// moving it; the first ACK past the update point moves it.
    #[test]
    fn the_reference_rate_moves_once_per_round_trip() {
        let p = HpccParams::default();
        let mut h = Hpcc::new(&p, G100, SimTime::from_us(10));
        let bdp = 125_000;
        h.on_ack(&p, &records(0, 0, bdp), 0, 10);
        // Within the round trip (una 5 <= 10): the rate reacts, Rc stays.
        h.on_ack(&p, &records(5, bdp / 2, bdp), 5, 15);
        assert!(h.rate_bps < G100);
        assert_eq!((h.ref_bps, h.cuts), (G100, 0));
        h.on_ack(&p, &records(10, bdp, bdp), 11, 20);
        assert_eq!(h.cuts, 1);
        assert_eq!(h.ref_bps, h.rate_bps);
    }

    /// W = R T; pacing spaces packets at R.
    #[test]
    fn window_and_pacing_follow_the_rate() {
        let p = HpccParams::default();
        let mut h = Hpcc::new(&p, G100, SimTime::from_us(10));
        assert!((h.window_bytes() - 125_000.0).abs() < 1e-6);
        assert!(h.open(30, 4096) && !h.open(31, 4096));
        h.rate_bps = 50e9;
        h.on_send(SimTime::from_us(1), 4178);
        // 4178 B at 50 Gb/s: 668.48 ns.
        assert_eq!(
            h.earliest_send(SimTime::from_us(1)),
            SimTime::from_us(1) + SimTime(668_480)
        );
    }
}
