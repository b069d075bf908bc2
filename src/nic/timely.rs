//! TIMELY for RoCE QPs (`transport.congestion_control = "timely"`), after
//! Mittal et al., "TIMELY: RTT-based Congestion Control for the
//! Datacenter", SIGCOMM 2015 (its Algorithm 1 and section 4).
//!
//! The sender paces each QP at a rate and moves it once per completion
//! event from the round-trip time of that event. A completion event here
//! is the ACK of the first packet sent after the previous event, so one
//! per round trip of data (the paper's completions are of 16 to 64 KB
//! segments at 10G, some tens of microseconds; the authors' successors
//! in HPCC's simulator take one per round trip, as here). With `rtt` the
//! event's round trip and `min_rtt` the unloaded one:
//!
//! `rtt_diff = (1 - alpha) rtt_diff + alpha (rtt - prev_rtt)`,
//! `gradient = rtt_diff / min_rtt`, then
//!
//! - `rtt < t_low`: `rate += delta`;
//! - `rtt > t_high`: `rate *= 1 - beta (1 - t_high / rtt)`;
//! - `gradient <= 0`: `rate += N delta`, N = 5 once five events in a row
//!   have raised the rate (hyper-active increase), else 1;
//! - otherwise `rate *= 1 - beta gradient`.
//!
//! The first event only records its round trip. There is no window: the
//! rate alone holds the QP back, as in the paper. Loss (a NAK, a
//! timeout) leaves the rate alone and drops the event under way, whose
//! round trip would include the recovery.

use crate::units::SimTime;

/// Increases in a row after which the gradient's increase is N = 5
/// steps (the paper's hyper-active increase).
const HAI_AFTER: u32 = 5;
const HAI_STEPS: f64 = 5.0;

/// The scenario's `[timely]` settings.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimelyParams {
    /// Below this round trip the rate only grows; above `t_high` it is
    /// cut in proportion to the excess.
    pub t_low: SimTime,
    pub t_high: SimTime,
    /// The round trip the gradient is normalized by (the paper's
    /// minRTT).
    pub min_rtt: SimTime,
    /// Weight of the newest round-trip difference in its moving average.
    pub alpha: f64,
    /// Multiplicative decrease factor.
    pub beta: f64,
    /// Additive step, bits per second (`None`: 10 Mb/s per 10 Gb/s of the
    /// QP's line rate: the paper's 10 Mb/s at 10G, scaled as HPCC's
    /// simulator scales it).
    pub delta_bps: Option<f64>,
    /// The rate never goes below this, bits per second.
    pub min_bps: f64,
}

impl Default for TimelyParams {
    /// The paper's evaluation values, for 10G: T_low 50 us, T_high 500 us,
    /// beta 0.8, 10 Mb/s steps; alpha 0.875, minRTT 20 us and a floor of
    /// 100 Mb/s as HPCC's simulator's TIMELY sets them.
    fn default() -> Self {
        TimelyParams {
            t_low: SimTime::from_us(50),
            t_high: SimTime::from_us(500),
            min_rtt: SimTime::from_us(20),
            alpha: 0.875,
            beta: 0.8,
            delta_bps: None,
            min_bps: 100e6,
        }
    }
}

/// One QP's TIMELY state.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Timely {
    pub line_bps: f64,
    /// The unloaded round trip, picoseconds.
    pub min_rtt_ps: f64,
    delta_bps: f64,
    pub rate_bps: f64,
    prev_rtt: Option<SimTime>,
    /// Moving average of the round-trip difference, picoseconds.
    rtt_diff: f64,
    increases: u32,
    /// The packet that ends the event under way: its PSN and when it left.
    probe: Option<(u32, SimTime)>,
    pace: super::pacer::Pacer,
    /// The last event's round trip; events; those above `t_high`; cuts;
    /// the lowest rate (for qps.csv).
    pub rtt: SimTime,
    pub events: u64,
    pub above_high: u64,
    pub cuts: u64,
    pub min_bps: f64,
}

impl Timely {
    /// A QP starting at line rate.
    pub fn new(p: &TimelyParams, line_bps: f64) -> Self {
        Timely {
            line_bps,
            min_rtt_ps: p.min_rtt.0.max(1) as f64,
            delta_bps: p.delta_bps.unwrap_or(line_bps * 10e6 / 10e9),
            rate_bps: line_bps,
            prev_rtt: None,
            rtt_diff: 0.0,
            increases: 0,
            probe: None,
            pace: super::pacer::Pacer::default(),
            rtt: SimTime::ZERO,
            events: 0,
            above_high: 0,
            cuts: 0,
            min_bps: line_bps,
        }
    }

    /// Earliest time the next packet may go: the last one's wire bytes at
    /// the rate after it left.
    #[inline]
    pub fn earliest_send(&self, now: SimTime) -> SimTime {
        self.pace.earliest(now, self.rate_bps, self.line_bps)
    }

    /// A packet of `wire` bytes went out at `now`.
    #[inline]
    pub fn on_send(&mut self, now: SimTime, wire: u32) {
        self.pace.sent(now, wire);
    }

    /// Packet `psn` is being sent at `now`; with no event under way it
    /// starts one.
    #[inline]
    pub fn on_packet(&mut self, psn: u32, now: SimTime) {
        if self.probe.is_none() {
            self.probe = Some((psn, now));
        }
    }

    /// An ACK at `now` moved the oldest unacknowledged PSN to `una`: if
    /// it covers the event's packet, the event completes.
    pub fn on_ack(&mut self, p: &TimelyParams, now: SimTime, una: u32) {
        match self.probe {
            Some((psn, at)) if psn < una => {
                self.probe = None;
                self.on_rtt(p, now - at);
            }
            _ => {}
        }
    }

    /// A loss: the event under way would time the recovery; it is dropped.
    pub fn on_loss(&mut self) {
        self.probe = None;
    }

    /// One completion event of round trip `rtt` (Algorithm 1).
    pub fn on_rtt(&mut self, p: &TimelyParams, rtt: SimTime) {
        self.rtt = rtt;
        self.events += 1;
        let Some(prev) = self.prev_rtt.replace(rtt) else {
            return;
        };
        let new_diff = rtt.0 as f64 - prev.0 as f64;
        self.rtt_diff = (1.0 - p.alpha) * self.rtt_diff + p.alpha * new_diff;
        let gradient = self.rtt_diff / self.min_rtt_ps;
        let cut = if rtt < p.t_low {
            self.rate_bps += self.delta_bps;
            None
        } else if rtt > p.t_high {
            self.above_high += 1;
            Some(1.0 - p.beta * (1.0 - p.t_high.0 as f64 / rtt.0 as f64))
        } else if gradient <= 0.0 {
            let n = if self.increases >= HAI_AFTER {
                HAI_STEPS
            } else {
                1.0
            };
            self.rate_bps += n * self.delta_bps;
            None
        } else {
            Some((1.0 - p.beta * gradient).max(0.0))
        };
        match cut {
            None => self.increases += 1,
            Some(f) => {
                self.rate_bps *= f;
                self.increases = 0;
                self.cuts += 1;
            }
        }
        self.rate_bps = self
            .rate_bps
            .clamp(p.min_bps.min(self.line_bps), self.line_bps);
        self.min_bps = self.min_bps.min(self.rate_bps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> SimTime {
        SimTime::from_us(n)
    }

    fn at_100g() -> (TimelyParams, Timely) {
        let p = TimelyParams {
            min_rtt: us(10),
            ..TimelyParams::default()
        };
        let t = Timely::new(&p, 100e9);
        (p, t)
    }

    #[test]
    fn below_t_low_the_rate_grows_by_delta_and_the_first_event_only_records() {
        let (p, mut t) = at_100g();
        t.rate_bps = 50e9;
        t.on_rtt(&p, us(12));
        assert_eq!(t.rate_bps, 50e9);
        t.on_rtt(&p, us(40));
        // 10 Mb/s per 10 Gb/s of a 100G port.
        assert_eq!(t.rate_bps, 50e9 + 100e6);
        assert_eq!(t.cuts, 0);
    }

    #[test]
    fn a_rising_round_trip_cuts_by_beta_times_the_normalized_gradient() {
        let (p, mut t) = at_100g();
        t.rate_bps = 50e9;
        t.on_rtt(&p, us(60));
        t.on_rtt(&p, us(62));
        // rtt_diff = 0.875 x 2 us; gradient = 1.75 / 10.
        let want = 50e9 * (1.0 - 0.8 * 0.175);
        assert!((t.rate_bps - want).abs() < 1.0, "{}", t.rate_bps);
        // Falling: additive, then hyper-active after five increases.
        for rtt in [61, 60, 59, 58, 57] {
            t.on_rtt(&p, us(rtt));
        }
        let before = t.rate_bps;
        t.on_rtt(&p, us(56));
        assert!((t.rate_bps - before - 5.0 * 100e6).abs() < 1.0);
    }

    #[test]
    fn above_t_high_the_cut_follows_the_excess() {
        let (p, mut t) = at_100g();
        t.rate_bps = 40e9;
        t.on_rtt(&p, us(1000));
        t.on_rtt(&p, us(1000));
        // 1 - 0.8 (1 - 500/1000) = 0.6, whatever the gradient.
        assert!((t.rate_bps - 24e9).abs() < 1.0);
        assert_eq!(t.above_high, 1);
    }

    #[test]
    fn an_event_is_the_ack_of_the_first_packet_after_the_last_and_loss_drops_it() {
        let (p, mut t) = at_100g();
        t.on_packet(0, us(0));
        t.on_packet(1, us(1));
        t.on_ack(&p, us(5), 1);
        assert_eq!((t.events, t.rtt), (1, us(5)));
        // Packet 1 was sent while the event was under way: the next event
        // starts with the next packet sent.
        t.on_ack(&p, us(6), 2);
        assert_eq!(t.events, 1);
        t.on_packet(2, us(7));
        t.on_loss();
        t.on_ack(&p, us(20), 3);
        assert_eq!(t.events, 1);
    }

    #[test]
    fn paces_at_its_rate_and_never_leaves_its_bounds() {
        let (p, mut t) = at_100g();
        t.rate_bps = 10e9;
        t.on_send(us(0), 1250);
        // 1250 B at 10 Gb/s: 1 us.
        assert_eq!(t.earliest_send(SimTime(1)), us(1));
        for _ in 0..50 {
            t.on_rtt(&p, us(5000));
        }
        assert_eq!(t.rate_bps, p.min_bps);
        for _ in 0..100_000 {
            t.on_rtt(&p, us(1));
        }
        assert_eq!(t.rate_bps, 100e9);
    }
}
