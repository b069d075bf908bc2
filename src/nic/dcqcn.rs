//! DCQCN (Zhu et al., SIGCOMM 2015): the reaction point, one per QP, and
//! the parameter sets deployments use.
//!
//! On a CNP the QP remembers its rate as the target, cuts its current rate
//! by alpha/2 (at most once per rate-decrease interval) and raises alpha by
//! gain g; alpha decays by (1 - g) every alpha period without a CNP. The
//! rate then climbs back in stages counted by a timer and by a byte
//! counter: fast recovery (halfway to the target) while both stage counts
//! are below F, additive increase (target + RAI) once one reaches F, hyper
//! increase (target + i * RHAI) once both have.
//!
//! The timers are not events: they are pure functions of the time since
//! the last cut, so `advance` replays every expiry up to `now` whenever the
//! QP sends or hears a CNP. A QP at line rate costs nothing, and a run with
//! thousands of QPs schedules no timer events at all.

use crate::units::{Rate, SimTime};

/// Which published parameter set a scenario starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// The profile NVIDIA/Mellanox NICs ship and public simulators use:
    /// thresholds and increase steps scale with link speed (per 25G).
    Mellanox,
    /// The original paper's settings (measured at 40G).
    Paper,
    /// The ConnectX firmware's own defaults as `mlxconfig` lists them
    /// (RPG_*, DCE_TCP_*, RATE_REDUCE_MONITOR_PERIOD,
    /// MIN_TIME_BETWEEN_CNPS, CLAMP_TGT_RATE_AFTER_TIME_INC), units as
    /// NVIDIA documents them: increase steps in absolute Mb/s, a CNP at
    /// most every 4 us per QP, alpha's gain (1024 - 1019) / 1024.
    ConnectxFirmware,
}

impl Preset {
    pub const NAMES: &'static [&'static str] = &["mellanox", "dcqcn-paper", "connectx-firmware"];

    pub fn from_name(s: &str) -> Option<Preset> {
        match s {
            "mellanox" => Some(Preset::Mellanox),
            "dcqcn-paper" => Some(Preset::Paper),
            "connectx-firmware" => Some(Preset::ConnectxFirmware),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Preset::Mellanox => "mellanox",
            Preset::Paper => "dcqcn-paper",
            Preset::ConnectxFirmware => "connectx-firmware",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct DcqcnParams {
    pub preset: Preset,
    /// Alpha gain.
    pub g: f64,
    pub alpha_timer: SimTime,
    /// At most one rate cut per this interval.
    pub rate_decrease_interval: SimTime,
    pub rate_increase_timer: SimTime,
    /// Bytes sent per byte-counter stage.
    pub byte_counter: u64,
    /// Stages of fast recovery.
    pub f: u32,
    /// Additive and hyper increase steps; `None` follows the preset (scaled
    /// with the NIC port's speed for the Mellanox profile).
    pub rai: Option<Rate>,
    pub rhai: Option<Rate>,
    pub min_rate: Rate,
    /// Marking thresholds and probability the preset pairs with (switch
    /// side), at `threshold_ref` speed.
    pub kmin_ref: u64,
    pub kmax_ref: u64,
    pub pmax: f64,
    pub threshold_ref: Rate,
    /// Notification point: at most one CNP per QP per interval, sent this
    /// long after the CE-marked packet arrives.
    pub cnp_interval: SimTime,
    pub cnp_delay: SimTime,
    /// When a cut sets the target rate to the current rate (see
    /// `ClampTarget`).
    pub clamp_target: ClampTarget,
}

/// Whether a rate cut also lowers the target rate the QP recovers
/// towards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClampTarget {
    /// On every cut (the paper: Rt = Rc, then Rc is cut).
    Always,
    /// Only if the rate-increase timer fired since the last cut (the
    /// ConnectX firmware's CLAMP_TGT_RATE = 0 with
    /// CLAMP_TGT_RATE_AFTER_TIME_INC = 1): cuts in quick succession keep
    /// the target from before the congestion, so each recovery heads
    /// back towards it rather than towards the last cut rate.
    AfterTimerIncrease,
}

impl ClampTarget {
    pub const NAMES: &'static [&'static str] = &["always", "after-timer-increase"];

    pub fn from_name(s: &str) -> Option<ClampTarget> {
        match s {
            "always" => Some(ClampTarget::Always),
            "after-timer-increase" => Some(ClampTarget::AfterTimerIncrease),
            _ => None,
        }
    }
}

impl DcqcnParams {
    pub fn preset(p: Preset) -> DcqcnParams {
        match p {
            Preset::Mellanox => DcqcnParams {
                preset: p,
                g: 1.0 / 256.0,
                alpha_timer: SimTime::from_us(1),
                rate_decrease_interval: SimTime::from_us(4),
                rate_increase_timer: SimTime::from_us(300),
                // The NIC firmware default (rpg_byte_reset).
                byte_counter: 32_767,
                f: 1,
                rai: None,
                rhai: None,
                min_rate: Rate(100_000_000),
                kmin_ref: 100_000,
                kmax_ref: 400_000,
                pmax: 0.2,
                threshold_ref: Rate::gbps(25),
                cnp_interval: SimTime::from_us(50),
                cnp_delay: SimTime::ZERO,
                // The firmware clamps only after a timer increase; with its
                // 32 KB byte counter that lets a fast flow win back every
                // cut within microseconds at 400G (an incast of six went
                // to Jain 0.17), so the profile keeps the paper's rule
                // until issue 19's calibration settles it.
                clamp_target: ClampTarget::Always,
            },
            Preset::Paper => DcqcnParams {
                preset: p,
                g: 1.0 / 256.0,
                alpha_timer: SimTime::from_us(55),
                rate_decrease_interval: SimTime::from_us(50),
                rate_increase_timer: SimTime::from_us(55),
                byte_counter: 10_000_000,
                f: 5,
                rai: None,
                rhai: None,
                min_rate: Rate(100_000_000),
                kmin_ref: 40_000,
                kmax_ref: 1_000_000,
                pmax: 1.0,
                threshold_ref: Rate::gbps(40),
                cnp_interval: SimTime::from_us(50),
                cnp_delay: SimTime::ZERO,
                clamp_target: ClampTarget::Always,
            },
            Preset::ConnectxFirmware => DcqcnParams {
                preset: p,
                // DCE_TCP_G = 1019 of 1024 keeps alpha; the rest is gain.
                g: 5.0 / 1024.0,
                // DCE_TCP_RTT
                alpha_timer: SimTime::from_us(1),
                // RATE_REDUCE_MONITOR_PERIOD
                rate_decrease_interval: SimTime::from_us(4),
                // RPG_TIME_RESET, RPG_BYTE_RESET, RPG_THRESHOLD
                rate_increase_timer: SimTime::from_us(300),
                byte_counter: 32_767,
                f: 1,
                // RPG_AI_RATE, RPG_HAI_RATE, RPG_MIN_RATE (Mb/s)
                rai: Some(Rate(5_000_000)),
                rhai: Some(Rate(50_000_000)),
                min_rate: Rate(1_000_000),
                // Switch side: the Mellanox profile's thresholds.
                kmin_ref: 100_000,
                kmax_ref: 400_000,
                pmax: 0.2,
                threshold_ref: Rate::gbps(25),
                // MIN_TIME_BETWEEN_CNPS
                cnp_interval: SimTime::from_us(4),
                cnp_delay: SimTime::ZERO,
                // CLAMP_TGT_RATE = 0, CLAMP_TGT_RATE_AFTER_TIME_INC = 1
                clamp_target: ClampTarget::AfterTimerIncrease,
            },
        }
    }

    /// WRED min and max for a port of `speed`.
    pub fn thresholds_at(&self, speed: Rate) -> (u64, u64) {
        let scale =
            |b: u64| (b as u128 * speed.bps() as u128 / self.threshold_ref.bps() as u128) as u64;
        (scale(self.kmin_ref), scale(self.kmax_ref))
    }

    /// Additive and hyper increase steps (bits per second) for a QP whose
    /// NIC port runs at `speed`.
    pub fn increase_steps(&self, speed: Rate) -> (f64, f64) {
        let (rai, rhai, scale) = match self.preset {
            Preset::Mellanox => (5e6, 50e6, speed.bps() as f64 / 25e9),
            Preset::Paper => (40e6, 200e6, 1.0),
            Preset::ConnectxFirmware => (5e6, 50e6, 1.0),
        };
        (
            self.rai.map_or(rai * scale, |r| r.bps() as f64),
            self.rhai.map_or(rhai * scale, |r| r.bps() as f64),
        )
    }
}

/// One QP's reaction point.
#[derive(Clone, Debug)]
pub struct Dcqcn {
    line: f64,
    /// Current and target rate, bits per second.
    pub rc: f64,
    pub rt: f64,
    pub alpha: f64,
    rai: f64,
    rhai: f64,
    alpha_epoch: SimTime,
    rate_epoch: SimTime,
    t_stage: u32,
    bc_stage: u32,
    bc_bytes: u64,
    last_cut: Option<SimTime>,
    /// A CNP came within the rate-decrease interval of the last cut: the
    /// cut it asks for happens when the interval ends (the NIC checks for
    /// CNPs once per period and cuts then), not never.
    cut_pending: bool,
    next_send: SimTime,
    pub cnps: u64,
    pub cuts: u64,
    pub min_rc: f64,
}

/// Beyond this many timer expiries in one catch-up the QP is simply back
/// at line rate (a QP idle for a long time after a cut).
const MAX_REPLAY: u32 = 100_000;

impl Dcqcn {
    pub fn new(p: &DcqcnParams, line: Rate) -> Dcqcn {
        let (rai, rhai) = p.increase_steps(line);
        let l = line.bps() as f64;
        Dcqcn {
            line: l,
            rc: l,
            rt: l,
            alpha: 1.0,
            rai,
            rhai,
            alpha_epoch: SimTime::ZERO,
            rate_epoch: SimTime::ZERO,
            t_stage: 0,
            bc_stage: 0,
            bc_bytes: 0,
            last_cut: None,
            cut_pending: false,
            next_send: SimTime::ZERO,
            cnps: 0,
            cuts: 0,
            min_rc: l,
        }
    }

    fn at_line(&self) -> bool {
        self.rc >= self.line && self.rt >= self.line
    }

    /// One increase stage (timer or byte counter expired).
    fn increase(&mut self, p: &DcqcnParams) {
        let (t, b) = (self.t_stage, self.bc_stage);
        if t.min(b) >= p.f {
            let i = (t.min(b) - p.f + 1) as f64;
            self.rt += i * self.rhai;
        } else if t.max(b) >= p.f {
            self.rt += self.rai;
        }
        self.rt = self.rt.min(self.line);
        self.rc = ((self.rt + self.rc) / 2.0).min(self.line);
        // Halving the gap never closes it in floating point.
        if self.line - self.rc < self.line * 1e-6 {
            self.rc = self.rt.max(self.rc);
            if self.line - self.rc < self.line * 1e-6 {
                self.rc = self.line;
            }
        }
    }

    /// Replays the alpha and rate-increase timers, and a cut that was
    /// waiting for the end of its rate-decrease interval, up to `now`.
    pub fn advance(&mut self, now: SimTime, p: &DcqcnParams) {
        if self.cut_pending {
            if let Some(at) = self.last_cut.map(|t| t + p.rate_decrease_interval) {
                if at <= now {
                    self.replay(at, p);
                    self.cut(at, p);
                }
            }
        }
        self.replay(now, p);
    }

    fn replay(&mut self, now: SimTime, p: &DcqcnParams) {
        if self.last_cut.is_none() {
            return;
        }
        let n = now.saturating_sub(self.alpha_epoch).0 / p.alpha_timer.0;
        if n > 0 {
            self.alpha *= (1.0 - p.g).powi(n.min(i32::MAX as u64) as i32);
            self.alpha_epoch += SimTime(n * p.alpha_timer.0);
        }
        let period = p.rate_increase_timer.0;
        let mut replayed = 0;
        while !self.at_line() && self.rate_epoch.0 + period <= now.0 {
            self.rate_epoch += SimTime(period);
            self.t_stage += 1;
            self.increase(p);
            replayed += 1;
            if replayed == MAX_REPLAY {
                self.rc = self.line;
                self.rt = self.line;
            }
        }
        if self.rate_epoch.0 + period <= now.0 {
            let skip = (now.0 - self.rate_epoch.0) / period;
            self.rate_epoch = SimTime(self.rate_epoch.0 + skip * period);
        }
    }

    /// A CNP for this QP arrived: the rate is cut now, or at the end of
    /// the rate-decrease interval that the last cut started.
    pub fn on_cnp(&mut self, now: SimTime, p: &DcqcnParams) {
        self.advance(now, p);
        self.cnps += 1;
        let may_cut = self
            .last_cut
            .is_none_or(|t| now.saturating_sub(t) >= p.rate_decrease_interval);
        if may_cut {
            self.cut(now, p);
        } else {
            self.cut_pending = true;
        }
        self.alpha = (1.0 - p.g) * self.alpha + p.g;
        self.alpha_epoch = now;
    }

    fn cut(&mut self, at: SimTime, p: &DcqcnParams) {
        if p.clamp_target == ClampTarget::Always || self.t_stage > 0 {
            self.rt = self.rc;
        }
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(p.min_rate.bps() as f64);
        self.min_rc = self.min_rc.min(self.rc);
        self.last_cut = Some(at);
        self.cut_pending = false;
        self.cuts += 1;
        self.t_stage = 0;
        self.bc_stage = 0;
        self.bc_bytes = 0;
        self.rate_epoch = at;
    }

    /// Earliest time the next packet may start.
    #[inline]
    pub fn earliest_send(&self, now: SimTime) -> SimTime {
        self.next_send.max(now)
    }

    /// A packet of `wire_bytes` starts on the wire now.
    #[inline]
    pub fn on_send(&mut self, now: SimTime, wire_bytes: u32, p: &DcqcnParams) {
        if self.last_cut.is_none() {
            return;
        }
        self.advance(now, p);
        self.bc_bytes += wire_bytes as u64;
        while self.bc_bytes >= p.byte_counter {
            self.bc_bytes -= p.byte_counter;
            self.bc_stage += 1;
            self.increase(p);
        }
        self.next_send = if self.rc >= self.line {
            now
        } else {
            let gap_ps = wire_bytes as f64 * 8e12 / self.rc;
            now + SimTime(gap_ps.ceil() as u64)
        };
    }

    /// The current rate in bits per second (timers replayed to `now`).
    pub fn rate_at(&mut self, now: SimTime, p: &DcqcnParams) -> f64 {
        self.advance(now, p);
        self.rc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mlx() -> DcqcnParams {
        DcqcnParams::preset(Preset::Mellanox)
    }

    #[test]
    fn first_cnp_halves_the_rate_and_alpha_stays_near_one() {
        let p = mlx();
        let mut d = Dcqcn::new(&p, Rate::gbps(100));
        d.on_cnp(SimTime::from_us(10), &p);
        assert_eq!(d.rc, 50e9);
        assert_eq!(d.rt, 100e9);
        assert!((d.alpha - 1.0).abs() < 1e-12);
        // A second CNP inside the rate-decrease interval does not cut yet;
        // its cut comes at 14 us and uses the (slightly decayed) alpha.
        d.on_cnp(SimTime::from_us(12), &p);
        assert_eq!(d.cuts, 1);
        d.advance(SimTime::from_us(14), &p);
        assert_eq!(d.cuts, 2);
        assert!(d.rc < 26e9 && d.rc > 25e9, "rc = {}", d.rc);
    }

    #[test]
    fn alpha_decays_by_one_minus_g_per_period() {
        let p = mlx();
        let mut d = Dcqcn::new(&p, Rate::gbps(100));
        d.on_cnp(SimTime::ZERO, &p);
        let a0 = d.alpha;
        d.advance(SimTime::from_us(100), &p);
        let want = a0 * (1.0 - p.g).powi(100);
        assert!((d.alpha - want).abs() < 1e-12);
    }

    #[test]
    fn fast_recovery_halves_the_gap_each_timer_stage() {
        let mut p = DcqcnParams::preset(Preset::Paper);
        p.byte_counter = u64::MAX;
        let mut d = Dcqcn::new(&p, Rate::gbps(40));
        d.on_cnp(SimTime::ZERO, &p);
        assert_eq!(d.rc, 20e9);
        // Five fast-recovery stages (F = 5): 30, 35, 37.5, 38.75, 39.375.
        d.advance(SimTime::from_us(5 * 55), &p);
        assert!((d.rc - 39.375e9).abs() < 1.0, "rc = {}", d.rc);
        assert_eq!(d.rt, 40e9);
    }

    #[test]
    fn additive_then_hyper_increase_raise_the_target() {
        let mut p = DcqcnParams::preset(Preset::Paper);
        p.byte_counter = 1_000;
        p.f = 1;
        let mut d = Dcqcn::new(&p, Rate::gbps(400));
        d.on_cnp(SimTime::ZERO, &p);
        d.on_cnp(SimTime::from_us(60), &p);
        let rt0 = d.rt;
        // Byte stage 1 with timer stage 0: additive (max >= F, min < F).
        d.on_send(SimTime::from_us(61), 1_000, &p);
        assert!((d.rt - (rt0 + 40e6)).abs() < 1.0);
        // A timer stage makes both counts reach F: hyper, i = 1.
        let before = d.rt;
        d.advance(SimTime::from_us(60 + 55), &p);
        assert!((d.rt - (before + 200e6)).abs() < 1.0);
    }

    #[test]
    fn a_cnp_inside_the_decrease_interval_cuts_when_it_ends() {
        let p = mlx();
        let mut d = Dcqcn::new(&p, Rate::gbps(100));
        d.on_cnp(SimTime::from_us(10), &p);
        assert_eq!(d.cuts, 1);
        // 2 us later: no cut yet, but one is owed at 14 us.
        d.on_cnp(SimTime::from_us(12), &p);
        assert_eq!(d.cuts, 1);
        d.advance(SimTime::from_us(13), &p);
        assert_eq!(d.cuts, 1);
        let before = d.rc;
        d.advance(SimTime::from_us(14), &p);
        assert_eq!(d.cuts, 2);
        assert!(d.rc < before * 0.6, "{} -> {}", before, d.rc);
        assert_eq!(d.last_cut, Some(SimTime::from_us(14)));
    }

    #[test]
    fn clamping_after_a_timer_increase_keeps_the_target_of_a_burst_of_cuts() {
        let mut p = mlx();
        p.byte_counter = u64::MAX;
        p.clamp_target = ClampTarget::AfterTimerIncrease;
        let mut d = Dcqcn::new(&p, Rate::gbps(100));
        d.on_cnp(SimTime::ZERO, &p);
        d.on_cnp(SimTime::from_us(10), &p);
        // No timer stage between the cuts: the target stays at line rate.
        assert_eq!(d.rt, 100e9);
        // After a timer stage (300 us), the next cut lowers it.
        d.on_cnp(SimTime::from_us(10 + 301), &p);
        assert!(d.rt < 100e9, "rt = {}", d.rt);
        // The paper's rule lowers it on every cut.
        p.clamp_target = ClampTarget::Always;
        let mut d = Dcqcn::new(&p, Rate::gbps(100));
        d.on_cnp(SimTime::ZERO, &p);
        d.on_cnp(SimTime::from_us(10), &p);
        assert_eq!(d.rt, 50e9);
    }

    #[test]
    fn pacing_spaces_packets_at_the_current_rate() {
        let p = mlx();
        let mut d = Dcqcn::new(&p, Rate::gbps(100));
        // At line rate, no gap beyond the port's own serialization.
        d.on_send(SimTime::ZERO, 1_000, &p);
        assert_eq!(d.earliest_send(SimTime(1)), SimTime(1));
        d.on_cnp(SimTime::ZERO, &p);
        d.on_send(SimTime::ZERO, 1_000, &p);
        // 1000 B at 50 Gb/s: 160 ns.
        assert_eq!(d.earliest_send(SimTime(1)), SimTime::from_ns(160));
    }

    #[test]
    fn recovers_to_line_rate_and_stays_there() {
        let p = mlx();
        let mut d = Dcqcn::new(&p, Rate::gbps(200));
        d.on_cnp(SimTime::ZERO, &p);
        d.advance(SimTime(1_000_000_000_000), &p);
        assert_eq!(d.rc, 200e9);
        assert!(d.alpha < 1e-6);
    }

    #[test]
    fn presets_scale_thresholds_with_speed() {
        let p = mlx();
        assert_eq!(p.thresholds_at(Rate::gbps(400)), (1_600_000, 6_400_000));
        assert_eq!(p.increase_steps(Rate::gbps(100)), (20e6, 200e6));
        let q = DcqcnParams::preset(Preset::Paper);
        assert_eq!(q.thresholds_at(Rate::gbps(40)), (40_000, 1_000_000));
        assert_eq!(q.increase_steps(Rate::gbps(400)), (40e6, 200e6));
    }
}
