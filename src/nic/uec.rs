//! A sender-based window in the spirit of the Ultra Ethernet Transport's
//! NSCC (network-signal congestion control) for the multipath transport
//! (`transport.congestion_control = "uec"` with `protocol = "mrc"`), after
//! the UE specification 1.0's description and htsim's NSCC (`uec.cpp`
//! in Broadcom's csg-htsim), whose constants are used here.
//!
//! One window of bytes per QP, whatever path each packet takes. Every ACK
//! brings two signals: whether the copy it acknowledges was CE-marked (an
//! MRC ACK echoes its packet's mark) and the copy's queueing delay, its
//! round trip less the QP's unloaded one. The four combinations:
//!
//! - no mark, delay under the target: proportional increase, more the
//!   further under (plus the fair increase below); a QP that has seen
//!   almost no delay (under 1 us) for a window's worth of bytes grows by
//!   half of what each ACK acknowledges (fast increase);
//! - no mark, delay at or over the target: fair increase, a few packets
//!   per window of data, the same for every QP (it converges to fair
//!   shares);
//! - marked, delay over the target: multiplicative decrease, by `gamma`
//!   times the average delay's excess over the target (at most half), at
//!   most once per unloaded round trip;
//! - marked, delay under the target: nothing (the queue is not this QP's
//!   doing, or not yet; MRC moves the path if its marks go on).
//!
//! Increases are gathered and applied every 12 us or every few kilobytes
//! acknowledged. Once per round trip plus target, if the average delay
//! passed four times the target or a packet was lost, the window is set
//! to what was acknowledged in the last such period (quick adapt: an
//! incast's senders fall to their share in one step), and the marked ACKs
//! of what was in flight then are ignored. A trimmed or timed-out packet
//! takes its bytes off the window. Constants scale as htsim scales them
//! from its 100 Gb/s, 12 us reference, by the QP's
//! bandwidth-delay product and the target. The window starts at 1.5 times
//! that product, its ceiling.

use crate::units::SimTime;

/// The reference the constants are scaled from: 100 Gb/s and a 12 us
/// round trip.
const REF_BDP_BYTES: f64 = 100e9 * 12e-6 / 8.0;
const REF_RTT_PS: f64 = 12e6;

/// The scenario's `[uec]` settings.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UecParams {
    /// Queueing delay the window aims at.
    pub target_delay: SimTime,
    /// Multiplicative decrease per unit of relative excess delay.
    pub gamma: f64,
    /// The window's ceiling and start, in bandwidth-delay products.
    pub max_window: f64,
    /// Quick adapt on.
    pub quick_adapt: bool,
}

impl Default for UecParams {
    /// htsim's: a 6 us target, gamma 0.8, 1.5 BDP.
    fn default() -> Self {
        UecParams {
            target_delay: SimTime::from_us(6),
            gamma: 0.8,
            max_window: 1.5,
            quick_adapt: true,
        }
    }
}

/// One QP's window.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Uec {
    /// Payload bytes per packet.
    mtu: f64,
    /// The QP's unloaded round trip, picoseconds (set when the routes are
    /// known, with the constants that depend on it).
    pub base_rtt_ps: f64,
    line_bps: f64,
    max_wnd: f64,
    pub cwnd: f64,
    /// Scaled constants: proportional gain (bytes of window per
    /// picosecond under target), fair increase (packets per window), the
    /// periodic step (bytes), the increase gathered before it is applied
    /// (bytes).
    alpha: f64,
    fi: f64,
    eta: f64,
    adjust_bytes: f64,
    inc_bytes: f64,
    received_bytes: f64,
    last_adjust: SimTime,
    last_eta: SimTime,
    last_decrease: SimTime,
    /// Average queueing delay (EWMA, weight 1/80), picoseconds.
    pub avg_delay: f64,
    fi_count: f64,
    increasing: bool,
    /// Bytes acknowledged in the quick-adapt period ending at `qa_end`.
    achieved: f64,
    qa_end: SimTime,
    trigger_qa: bool,
    /// After a quick adapt, marked ACKs of what was then in flight are
    /// ignored.
    to_ignore: f64,
    ignored: f64,
    pub cuts: u64,
    pub quick_adapts: u64,
    pub min_cwnd: f64,
}

const ADJUST_PERIOD: SimTime = SimTime(12_000_000);
const DELAY_WEIGHT: f64 = 0.0125;
const FAST_INCREASE_BELOW: f64 = 1e6;

impl Uec {
    pub fn new(p: &UecParams, line_bps: f64, mtu: u32) -> Self {
        let mut u = Uec {
            mtu: f64::from(mtu),
            base_rtt_ps: 0.0,
            line_bps,
            max_wnd: 0.0,
            cwnd: 0.0,
            alpha: 0.0,
            fi: 0.0,
            eta: 0.0,
            adjust_bytes: 0.0,
            inc_bytes: 0.0,
            received_bytes: 0.0,
            last_adjust: SimTime::ZERO,
            last_eta: SimTime::ZERO,
            last_decrease: SimTime::ZERO,
            avg_delay: 0.0,
            fi_count: 0.0,
            increasing: false,
            achieved: 0.0,
            qa_end: SimTime::ZERO,
            trigger_qa: false,
            to_ignore: 0.0,
            ignored: 0.0,
            cuts: 0,
            quick_adapts: 0,
            min_cwnd: 0.0,
        };
        u.set_base_rtt(p, SimTime::from_us(12));
        u
    }

    /// The QP's unloaded round trip is `rtt`: the window's ceiling and the
    /// constants follow from it.
    pub fn set_base_rtt(&mut self, p: &UecParams, rtt: SimTime) {
        self.base_rtt_ps = rtt.0.max(1) as f64;
        let bdp = self.line_bps * self.base_rtt_ps * 1e-12 / 8.0;
        let a = bdp / REF_BDP_BYTES;
        let target = p.target_delay.0.max(1) as f64;
        let b = target / REF_RTT_PS;
        self.alpha = 4.0 * a * b * self.mtu / target;
        self.fi = 5.0 * a;
        self.eta = 0.15 * self.mtu * a;
        self.adjust_bytes = 16_000.0 * b;
        self.max_wnd = (p.max_window * bdp).max(self.mtu);
        self.cwnd = self.max_wnd;
        self.min_cwnd = self.cwnd;
    }

    /// Whether `inflight` packets leave room for one more (always room
    /// for one).
    #[inline]
    pub fn open(&self, inflight: u32) -> bool {
        inflight == 0 || (f64::from(inflight) + 1.0) * self.mtu <= self.cwnd
    }

    /// An ACK at `now` acknowledged `newly` new packets (0 or 1 with
    /// MRC's selective ACKs) of a copy that was CE-marked or not, with
    /// round trip `rtt` (None: unknown), while `inflight` packets were
    /// outstanding.
    pub fn on_ack(
        &mut self,
        p: &UecParams,
        now: SimTime,
        (ce, rtt, newly, inflight): (bool, Option<SimTime>, u32, u32),
    ) {
        let newly = f64::from(newly) * self.mtu;
        let inflight = f64::from(inflight) * self.mtu;
        let delay = match rtt {
            Some(r) if r.0 as f64 >= self.base_rtt_ps => {
                let d = r.0 as f64 - self.base_rtt_ps;
                self.avg_delay += (d - self.avg_delay) * DELAY_WEIGHT;
                d
            }
            _ => self.avg_delay,
        };
        self.achieved += newly;
        if self.ignored < self.to_ignore {
            self.ignored += newly;
            if ce {
                return;
            }
        }
        if p.quick_adapt && self.quick_adapt(p, now, false, inflight) {
            return;
        }
        let target = p.target_delay.0 as f64;
        match (ce, delay >= target) {
            (false, true) => self.inc_bytes += self.fi * self.mtu * newly,
            (false, false) => {
                if !self.fast_increase(newly, delay) {
                    self.inc_bytes += self.alpha * (target - delay) * newly;
                    self.inc_bytes += self.fi * self.mtu * newly;
                }
            }
            (true, true) => {
                self.increasing = false;
                self.fi_count = 0.0;
                if self.avg_delay > target && (now - self.last_decrease).0 as f64 > self.base_rtt_ps
                {
                    let excess = (self.avg_delay - target) / self.avg_delay;
                    self.cwnd *= (1.0 - p.gamma * excess).max(0.5);
                    self.last_decrease = now;
                    self.cuts += 1;
                }
            }
            (true, false) => {}
        }
        self.received_bytes += newly;
        if self.received_bytes > self.adjust_bytes || now - self.last_adjust > ADJUST_PERIOD {
            self.cwnd += (self.inc_bytes / self.cwnd).min(self.adjust_bytes);
            self.inc_bytes = 0.0;
            self.received_bytes = 0.0;
            self.last_adjust = now;
        }
        if now - self.last_eta > ADJUST_PERIOD {
            self.cwnd += self.eta;
            self.last_eta = now;
        }
        self.clamp();
    }

    /// Fast increase: after a window's worth of bytes with almost no
    /// delay, each ACK grows the window by half what it acknowledges.
    fn fast_increase(&mut self, newly: f64, delay: f64) -> bool {
        if delay < FAST_INCREASE_BELOW {
            self.fi_count += newly;
            if self.fi_count > self.cwnd || self.increasing {
                self.cwnd += newly * 0.5;
                self.increasing = true;
                return true;
            }
        } else {
            self.fi_count = 0.0;
        }
        self.increasing = false;
        false
    }

    /// At the end of each period of a round trip plus the target: after a
    /// loss or with the average delay past four targets, the window
    /// becomes what the period acknowledged. True if it did.
    fn quick_adapt(&mut self, p: &UecParams, now: SimTime, loss: bool, inflight: f64) -> bool {
        if now <= self.qa_end {
            return false;
        }
        let fire = self.qa_end != SimTime::ZERO
            && (self.trigger_qa || loss || self.avg_delay > 4.0 * p.target_delay.0 as f64)
            && self.cwnd > self.achieved;
        if fire {
            self.cwnd = self.achieved.max(self.mtu);
            self.to_ignore = inflight;
            self.ignored = 0.0;
            self.trigger_qa = false;
            self.quick_adapts += 1;
            self.min_cwnd = self.min_cwnd.min(self.cwnd);
        }
        self.achieved = 0.0;
        self.qa_end = now + SimTime(self.base_rtt_ps as u64) + p.target_delay;
        fire
    }

    /// `lost` packets were lost (a trimmed packet, a timeout) with
    /// `inflight` outstanding: their bytes come off the window, and the
    /// next period ends in a quick adapt.
    pub fn on_loss(&mut self, p: &UecParams, now: SimTime, lost: u32, inflight: u32) {
        let inflight = f64::from(inflight) * self.mtu;
        self.cwnd -= f64::from(lost) * self.mtu;
        self.trigger_qa = true;
        self.clamp();
        if p.quick_adapt && self.ignored >= self.to_ignore {
            self.quick_adapt(p, now, true, inflight);
        }
    }

    fn clamp(&mut self) {
        self.cwnd = self.cwnd.clamp(self.mtu, self.max_wnd);
        self.min_cwnd = self.min_cwnd.min(self.cwnd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> SimTime {
        SimTime::from_us(n)
    }

    /// A 100G QP with the reference's 12 us round trip: a = 1.
    fn reference() -> (UecParams, Uec) {
        let p = UecParams::default();
        let mut u = Uec::new(&p, 100e9, 4096);
        u.set_base_rtt(&p, us(12));
        (p, u)
    }

    #[test]
    fn starts_at_one_and_a_half_bdp_and_scales_with_it() {
        let (p, u) = reference();
        assert!((u.cwnd - 225_000.0).abs() < 1.0);
        assert!((u.fi - 5.0).abs() < 1e-9);
        let mut v = Uec::new(&p, 400e9, 4096);
        v.set_base_rtt(&p, us(3));
        // 400G x 3 us is the same product: the same constants.
        assert!((v.cwnd - u.cwnd).abs() < 1.0 && (v.fi - u.fi).abs() < 1e-9);
    }

    #[test]
    fn marked_and_late_cuts_by_the_excess_once_per_round_trip() {
        let (p, mut u) = reference();
        let q = UecParams {
            quick_adapt: false,
            ..p
        };
        u.avg_delay = 12e6;
        let before = u.cwnd;
        u.on_ack(&q, us(100), (true, Some(us(12 + 12)), 1, 0));
        // Average delay about 12 us against a 6 us target: 1 - 0.8 x 0.5.
        // (Plus the periodic step, due on this first ACK.)
        let want = before * (1.0 - 0.8 * (u.avg_delay - 6e6) / u.avg_delay) + u.eta;
        assert!((u.cwnd - want).abs() / want < 1e-9, "{} {want}", u.cwnd);
        let after = u.cwnd;
        u.on_ack(&q, us(105), (true, Some(us(24)), 1, 0));
        assert_eq!(u.cwnd, after, "at most once per round trip");
        assert_eq!(u.cuts, 1);
        // Marked but early: nothing but the periodic step.
        u.on_ack(&q, us(200), (true, Some(us(13)), 1, 0));
        assert!((u.cwnd - after - u.eta).abs() < 1e-6);
    }

    #[test]
    fn unmarked_acks_grow_the_window_more_when_the_queue_is_short() {
        let (p, _) = reference();
        let q = UecParams {
            quick_adapt: false,
            ..p
        };
        let grow = |rtt_us: u64| {
            let mut u = Uec::new(&q, 100e9, 4096);
            u.set_base_rtt(&q, us(12));
            u.cwnd = 100_000.0;
            u.avg_delay = 3e6;
            // 3 us and 9 us of queue: under and over the 6 us target.
            for k in 0..40 {
                u.on_ack(&q, us(10 + k), (false, Some(us(rtt_us)), 1, 0));
            }
            u.cwnd - 100_000.0
        };
        let (under, over) = (grow(15), grow(21));
        assert!(over > 0.0 && under > over, "{under} {over}");
    }

    #[test]
    fn quick_adapt_sets_the_window_to_what_was_acknowledged() {
        let (p, mut u) = reference();
        u.avg_delay = 30e6;
        // The first ACK starts the first period (12 + 6 us).
        u.on_ack(&p, us(1), (false, Some(us(42)), 1, 0));
        for k in 2..10 {
            u.on_ack(&p, us(k), (false, Some(us(42)), 1, 0));
        }
        assert_eq!(u.quick_adapts, 0);
        // Past the period, with the average delay past four targets: the
        // window falls to the bytes acknowledged in it.
        u.on_ack(&p, us(20), (true, Some(us(42)), 1, 22));
        assert_eq!(u.quick_adapts, 1);
        assert!((u.cwnd - 9.0 * 4096.0).abs() < 1.0, "{}", u.cwnd);
        // Marked ACKs of what was in flight then are ignored.
        let w = u.cwnd;
        u.on_ack(&p, us(21), (true, Some(us(42)), 1, 0));
        assert_eq!(u.cwnd, w);
    }

    #[test]
    fn a_loss_takes_its_bytes_off_and_never_below_one_packet() {
        let (p, mut u) = reference();
        u.cwnd = 20_000.0;
        u.on_loss(&p, us(5), 1, 0);
        assert!((u.cwnd - 15_904.0).abs() < 1.0);
        u.on_loss(&p, us(6), 1_000_000, 0);
        assert_eq!(u.cwnd, 4096.0);
        assert!(u.open(0) && !u.open(1));
    }
}
