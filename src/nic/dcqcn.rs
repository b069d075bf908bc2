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
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Preset {
    /// The "Mellanox" DCQCN of the public simulators (HPCC's ns-3 and
    /// those built on it): the firmware's timers, thresholds and increase
    /// steps scaled with link speed (per 25G), increase by the timer alone
    /// (no byte counter), every CE mark echoed back.
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

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// When a CNP raises alpha (see `AlphaUpdate`).
    pub alpha_update: AlphaUpdate,
}

/// When a CNP raises alpha.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum AlphaUpdate {
    /// At once, on every CNP, and the decay timer restarts (the paper).
    OnCnp,
    /// Once per alpha period, if any CNP arrived in it; otherwise it
    /// decays (the firmware, and HPCC's ns-3: several CNPs in one period
    /// raise alpha once).
    PerPeriod,
}

impl AlphaUpdate {
    pub const NAMES: &'static [&'static str] = &["on-cnp", "per-period"];

    pub fn from_name(s: &str) -> Option<AlphaUpdate> {
        match s {
            "on-cnp" => Some(AlphaUpdate::OnCnp),
            "per-period" => Some(AlphaUpdate::PerPeriod),
            _ => None,
        }
    }
}

/// Whether a rate cut also lowers the target rate the QP recovers
/// towards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ClampTarget {
    /// On every cut (the paper: Rt = Rc, then Rc is cut).
    Always,
    /// Only if the rate rose since the last cut, by the timer or by the
    /// byte counter (the ConnectX firmware's CLAMP_TGT_RATE = 0 with
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

/// `byte_counter = "off"`: rate increase by the timer alone.
pub const BYTE_COUNTER_OFF: u64 = u64::MAX;

/// The firmware's byte counter: RPG_BYTE_RESET's default 32767 counts
/// 64-byte units, so a stage every 2 MB sent (not 32 KB).
pub const RPG_BYTE_RESET: u64 = 32_767 * 64;

impl DcqcnParams {
    pub fn preset(p: Preset) -> DcqcnParams {
        match p {
            Preset::Mellanox => DcqcnParams {
                preset: p,
                g: 1.0 / 256.0,
                alpha_timer: SimTime::from_us(1),
                rate_decrease_interval: SimTime::from_us(4),
                rate_increase_timer: SimTime::from_us(300),
                // The public simulators' DCQCN (HPCC's ns-3 and the
                // simulators built on it) has no byte counter.
                byte_counter: BYTE_COUNTER_OFF,
                f: 1,
                rai: None,
                rhai: None,
                min_rate: Rate(100_000_000),
                kmin_ref: 100_000,
                kmax_ref: 400_000,
                pmax: 0.2,
                threshold_ref: Rate::gbps(25),
                // They echo every CE mark back (in the ACK); the sender
                // samples that once per alpha and decrease period.
                cnp_interval: SimTime::ZERO,
                cnp_delay: SimTime::ZERO,
                // Their CLAMP_TARGET_RATE 0: clamp only after a timer
                // increase.
                clamp_target: ClampTarget::AfterTimerIncrease,
                alpha_update: AlphaUpdate::PerPeriod,
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
                // The marking section 5.3 settles on: Kmin 5 KB, Kmax
                // 200 KB, Pmax 1%. (The ns-3 code the authors released
                // with their 2016 analysis configures 40 KB, 1 MB, 100%.)
                kmin_ref: 5_000,
                kmax_ref: 200_000,
                pmax: 0.01,
                threshold_ref: Rate::gbps(40),
                cnp_interval: SimTime::from_us(50),
                cnp_delay: SimTime::ZERO,
                clamp_target: ClampTarget::Always,
                alpha_update: AlphaUpdate::OnCnp,
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
                byte_counter: RPG_BYTE_RESET,
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
                alpha_update: AlphaUpdate::PerPeriod,
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
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Dcqcn {
    line: f64,
    /// Current and target rate, bits per second.
    pub rc: f64,
    pub rt: f64,
    pub alpha: f64,
    rai: f64,
    rhai: f64,
    alpha_epoch: SimTime,
    /// A CNP arrived in the current alpha period (`AlphaUpdate::PerPeriod`).
    alpha_cnp: bool,
    rate_epoch: SimTime,
    t_stage: u32,
    bc_stage: u32,
    bc_bytes: u64,
    last_cut: Option<SimTime>,
    /// A CNP came within the rate-decrease interval of the last cut: the
    /// cut it asks for happens when the interval ends (the NIC checks for
    /// CNPs once per period and cuts then), not never.
    cut_pending: bool,
    /// When the last packet started and its size on the wire: the next
    /// may start its serialization time at the current rate later. The gap
    /// follows the rate as it changes (a rate limiter, not a timer set at
    /// the last send), so a QP cut to a crawl is not held back by the
    /// crawl's gap once its rate recovers.
    last_send: SimTime,
    last_bytes: u32,
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
            alpha_cnp: false,
            rate_epoch: SimTime::ZERO,
            t_stage: 0,
            bc_stage: 0,
            bc_bytes: 0,
            last_cut: None,
            cut_pending: false,
            last_send: SimTime::ZERO,
            last_bytes: 0,
            cnps: 0,
            cuts: 0,
            min_rc: l,
        }
    }

    fn at_line(&self) -> bool {
        self.rc >= self.line && self.rt >= self.line
    }

    /// One increase stage (timer or byte counter expired). The phase is
    /// chosen from the stage counts before this expiry is counted: F
    /// stages of fast recovery while both counts are below F, hyper
    /// increase once both have passed it, additive in between.
    fn increase(&mut self, p: &DcqcnParams) {
        let (t, b) = (self.t_stage, self.bc_stage);
        if t.min(b) > p.f {
            let i = (t.min(b) - p.f) as f64;
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
        let mut n = now.saturating_sub(self.alpha_epoch).0 / p.alpha_timer.0;
        if n > 0 {
            self.alpha_epoch += SimTime(n * p.alpha_timer.0);
            if self.alpha_cnp {
                self.alpha = (1.0 - p.g) * self.alpha + p.g;
                self.alpha_cnp = false;
                n -= 1;
            }
            self.alpha *= (1.0 - p.g).powi(n.min(i32::MAX as u64) as i32);
        }
        let period = p.rate_increase_timer.0;
        let mut replayed = 0;
        while !self.at_line() && self.rate_epoch.0 + period <= now.0 {
            self.rate_epoch += SimTime(period);
            self.increase(p);
            self.t_stage += 1;
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
        let first = self.last_cut.is_none();
        let may_cut = self
            .last_cut
            .is_none_or(|t| now.saturating_sub(t) >= p.rate_decrease_interval);
        if may_cut {
            self.cut(now, p);
        } else {
            self.cut_pending = true;
        }
        if first || p.alpha_update == AlphaUpdate::OnCnp {
            // The first CNP starts alpha's period grid.
            self.alpha = (1.0 - p.g) * self.alpha + p.g;
            self.alpha_epoch = now;
        } else {
            self.alpha_cnp = true;
        }
    }

    fn cut(&mut self, at: SimTime, p: &DcqcnParams) {
        if p.clamp_target == ClampTarget::Always || self.t_stage > 0 || self.bc_stage > 0 {
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

    fn gap(&self) -> SimTime {
        if self.rc >= self.line {
            SimTime::ZERO
        } else {
            SimTime((self.last_bytes as f64 * 8e12 / self.rc).ceil() as u64)
        }
    }

    /// When the rate next changes without a send or a CNP: a rate-increase
    /// stage, or a cut owed at the end of its decrease interval.
    fn next_change(&self, p: &DcqcnParams) -> Option<SimTime> {
        self.last_cut?;
        let timer = (!self.at_line()).then(|| self.rate_epoch + p.rate_increase_timer);
        let cut = self
            .cut_pending
            .then(|| self.last_cut.map(|t| t + p.rate_decrease_interval))
            .flatten();
        match (timer, cut) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Earliest time the next packet may start: the last packet's
    /// serialization time at the rate in force then after it started,
    /// following the timers' rate changes on the way.
    #[inline]
    pub fn earliest_send(&self, now: SimTime, p: &DcqcnParams) -> SimTime {
        let t = self.last_send + self.gap();
        if t <= now || self.next_change(p).is_none_or(|c| c >= t) {
            return t.max(now);
        }
        self.earliest_send_across_changes(now, p)
    }

    #[cold]
    fn earliest_send_across_changes(&self, now: SimTime, p: &DcqcnParams) -> SimTime {
        let mut d = self.clone();
        for _ in 0..MAX_REPLAY {
            let t = d.last_send + d.gap();
            let Some(c) = d.next_change(p).filter(|&c| c < t) else {
                return t.max(now);
            };
            d.advance(c, p);
            if d.last_send + d.gap() <= c {
                return c.max(now);
            }
        }
        (d.last_send + d.gap()).max(now)
    }

    /// A packet of `wire_bytes` starts on the wire now.
    #[inline]
    pub fn on_send(&mut self, now: SimTime, wire_bytes: u32, p: &DcqcnParams) {
        if self.last_cut.is_none() {
            return;
        }
        self.advance(now, p);
        self.count_bytes(wire_bytes as u64, p);
        self.last_send = now;
        self.last_bytes = wire_bytes;
    }

    /// The byte counter hears of `bytes` more sent.
    fn count_bytes(&mut self, bytes: u64, p: &DcqcnParams) {
        self.bc_bytes += bytes;
        while self.bc_bytes >= p.byte_counter {
            self.bc_bytes -= p.byte_counter;
            self.increase(p);
            self.bc_stage += 1;
        }
    }

    /// At flow level, where no packet is sent one by one: `sent` more wire
    /// bytes have left since the last call, and `cnps` CNPs arrived, the
    /// last now and the others `gap` apart before it. Returns the rate
    /// (bits per second) and when it next changes by itself.
    pub fn on_fluid(
        &mut self,
        now: SimTime,
        (sent, cnps, gap): (u64, u32, SimTime),
        p: &DcqcnParams,
    ) -> (f64, Option<SimTime>) {
        for k in (0..cnps).rev() {
            let at = SimTime(now.0.saturating_sub(u64::from(k) * gap.0));
            self.on_cnp(at.max(self.alpha_epoch.min(now)), p);
        }
        self.advance(now, p);
        if self.last_cut.is_some() && sent > 0 {
            self.count_bytes(sent, p);
        }
        (self.rc, self.next_change(p))
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
        // The first byte stage (counts 0 and 0, both below F) is fast
        // recovery: the target stays.
        d.on_send(SimTime::from_us(61), 1_000, &p);
        assert_eq!(d.rt, rt0);
        // The second (byte count 1 = F, timer count 0): additive.
        d.on_send(SimTime::from_us(62), 1_000, &p);
        assert!((d.rt - (rt0 + 40e6)).abs() < 1.0);
        // Timer stages at counts (0, 2) and (1, 2) are additive too; the
        // one at (2, 2), both past F, is hyper with i = 1.
        d.advance(SimTime::from_us(60 + 2 * 55), &p);
        assert!((d.rt - (rt0 + 3.0 * 40e6)).abs() < 1.0);
        d.advance(SimTime::from_us(60 + 3 * 55), &p);
        assert!((d.rt - (rt0 + 3.0 * 40e6 + 200e6)).abs() < 1.0);
    }

    #[test]
    fn the_firmware_byte_counter_counts_64_byte_units() {
        let p = DcqcnParams::preset(Preset::ConnectxFirmware);
        assert_eq!(p.byte_counter, 32_767 * 64);
        let mut d = Dcqcn::new(&p, Rate::gbps(400));
        d.on_cnp(SimTime::ZERO, &p);
        let rc0 = d.rc;
        // 32 KB sent (the old reading of RPG_BYTE_RESET): no stage yet.
        d.on_send(SimTime::from_ns(10), 32_768, &p);
        assert_eq!(d.rc, rc0);
        // 2 MB sent: one fast-recovery stage, halfway back to the target.
        d.on_send(SimTime::from_ns(20), 2_097_088 - 32_768, &p);
        assert!((d.rc - (rc0 + d.rt) / 2.0).abs() < 1.0, "rc = {}", d.rc);
    }

    #[test]
    fn per_period_alpha_counts_a_burst_of_cnps_once() {
        let p = DcqcnParams::preset(Preset::ConnectxFirmware);
        let mut d = Dcqcn::new(&p, Rate::gbps(400));
        d.on_cnp(SimTime::ZERO, &p);
        d.advance(SimTime::from_us(100), &p);
        let a0 = d.alpha;
        // Three CNPs inside one 1 us alpha period raise alpha once, at
        // the end of the period.
        for ns in [100, 400, 700] {
            d.on_cnp(SimTime::from_us(100) + SimTime::from_ns(ns), &p);
        }
        assert_eq!(d.alpha, a0);
        d.advance(SimTime::from_us(101), &p);
        assert!((d.alpha - ((1.0 - p.g) * a0 + p.g)).abs() < 1e-12);
        // Raised on every CNP instead, the same burst counts three times.
        let mut q = p.clone();
        q.alpha_update = AlphaUpdate::OnCnp;
        let mut e = Dcqcn::new(&q, Rate::gbps(400));
        e.on_cnp(SimTime::ZERO, &q);
        e.advance(SimTime::from_us(100), &q);
        for ns in [100, 400, 700] {
            e.on_cnp(SimTime::from_us(100) + SimTime::from_ns(ns), &q);
        }
        let mut want = a0;
        for _ in 0..3 {
            want = (1.0 - q.g) * want + q.g;
        }
        assert!((e.alpha - want).abs() < 1e-12);
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
        // No increase between the cuts: the target stays at line rate.
        assert_eq!(d.rt, 100e9);
        // After a timer stage (300 us), the next cut lowers it.
        d.on_cnp(SimTime::from_us(10 + 301), &p);
        assert!(d.rt < 100e9, "rt = {}", d.rt);
        // So does a cut after a byte-counter stage.
        p.byte_counter = 10_000;
        let mut d = Dcqcn::new(&p, Rate::gbps(100));
        d.on_cnp(SimTime::ZERO, &p);
        d.on_send(SimTime::from_us(1), 10_000, &p);
        let rc = d.rc;
        d.on_cnp(SimTime::from_us(10), &p);
        assert_eq!(d.rt, rc);
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
        assert_eq!(d.earliest_send(SimTime(1), &p), SimTime(1));
        d.on_cnp(SimTime::ZERO, &p);
        d.on_send(SimTime::ZERO, 1_000, &p);
        // 1000 B at 50 Gb/s: 160 ns.
        assert_eq!(d.earliest_send(SimTime(1), &p), SimTime::from_ns(160));
    }

    #[test]
    fn the_pacing_gap_follows_the_rate_as_it_recovers() {
        let p = DcqcnParams::preset(Preset::ConnectxFirmware);
        let mut d = Dcqcn::new(&p, Rate::gbps(100));
        // Cut after cut down to the 1 Mb/s floor.
        for i in 0..40 {
            d.on_cnp(SimTime::from_us(4 * i), &p);
        }
        assert_eq!(d.rc, 1e6);
        let sent = SimTime::from_us(160);
        d.on_send(sent, 4_000, &p);
        // 4000 B at 1 Mb/s is 32 ms; the first timer stage, 300 us after
        // the last cut, brings the rate halfway back to the target
        // (tens of Gb/s), and the packet may go then.
        let stage = d.last_cut.unwrap() + p.rate_increase_timer;
        assert_eq!(d.earliest_send(sent, &p), stage);
        // A CNP that lowers the rate pushes it back.
        let mut e = d.clone();
        e.on_cnp(SimTime::from_us(200), &p);
        assert!(e.earliest_send(SimTime::from_us(200), &p) > stage);
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
        assert_eq!(q.thresholds_at(Rate::gbps(40)), (5_000, 200_000));
        assert_eq!(q.pmax, 0.01);
        assert_eq!(q.increase_steps(Rate::gbps(400)), (40e6, 200e6));
    }
}
