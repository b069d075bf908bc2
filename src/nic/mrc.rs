//! An MRC-like multipath sender (after OpenAI's Multipath Reliable
//! Connection): one transfer is sprayed over `paths` paths by giving each
//! packet one of the QP's UDP source ports (the entropy switches hash),
//! round robin over the paths in good health. The receiver places every
//! packet where it belongs and acknowledges each PSN selectively; the
//! sender resends exactly what is missing: a PSN whose headers came back
//! trimmed (NAKed by PSN), or one unacknowledged for a retransmission
//! timeout, or one sent more than a reordering window (`reorder`, or
//! twice the longest recent round trip if longer) before a copy that has
//! been acknowledged (on another path: the loss is seen within a few
//! round trips, not after a timeout, as RACK does for TCP); once round
//! trips are measured the timeout itself shrinks to twice that window,
//! for tail losses. A path that lost a packet
//! that way, or by a timeout, gets a new entropy value (another UDP
//! source port, so most likely another route through the ECMP hashes) where
//! the QP has spares; without spares, and after a trim (a congested
//! path, not a broken one), it is taken out of use for `probe` and then
//! tried again: its next packet is the probe, and a second loss takes it
//! out again for twice as long.

use crate::units::SimTime;

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MrcConfig {
    /// Entropy values (paths) per QP.
    pub paths: u32,
    /// How long a path that lost a packet stays out of use.
    pub probe: SimTime,
    /// A path whose share of CE-marked packets (an EWMA over its ACKs'
    /// echoes, weight 1/16) exceeds this is rested too; 1 or more: never.
    pub ecn_threshold: f64,
    /// A packet unacknowledged while one sent this much later has been
    /// acknowledged is taken as lost.
    pub reorder: SimTime,
}

impl Default for MrcConfig {
    fn default() -> Self {
        MrcConfig {
            paths: 8,
            probe: SimTime::from_us(50),
            ecn_threshold: 0.5,
            reorder: SimTime::from_us(50),
        }
    }
}

/// What the multipath sender did.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct MrcStats {
    /// Times a path was taken out of use.
    pub paths_failed: u64,
    /// PSNs resent because their headers came back trimmed.
    pub trim_resends: u64,
    /// PSNs resent after a timeout.
    pub timeout_resends: u64,
    /// Times a path was rested for its ECN marks.
    pub ecn_rests: u64,
    /// PSNs resent because a later copy was acknowledged first.
    pub loss_resends: u64,
    /// Times a path took a new entropy value after a loss.
    pub paths_replaced: u64,
}

/// Entropy values (UDP source ports) of a QP with `paths` paths: one per
/// path and as many spares, at most 256.
pub fn entropies(paths: u32) -> u16 {
    (2 * paths).min(256) as u16
}

const NEVER: SimTime = SimTime::MAX;
const NO_PROBE: u32 = u32::MAX;

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Mrc {
    pub cfg: MrcConfig,
    /// PSNs posted.
    n: u32,
    /// The per-PSN records below hold PSNs `base..n` (`base` a multiple
    /// of 64 at or below `una`): what is acknowledged in full is dropped,
    /// so a connection that posts message after message holds only what
    /// is in flight.
    base: u32,
    acked: Vec<u64>,
    pub n_acked: u32,
    /// Oldest unacknowledged PSN.
    pub una: u32,
    /// Next PSN never sent.
    pub next_new: u32,
    sent_at: Vec<SimTime>,
    /// Path of each PSN's last transmission (planes x paths per plane).
    path_of: Vec<u16>,
    per_plane: u32,
    queued: Vec<u64>,
    resend: std::collections::VecDeque<u32>,
    /// Next path to try, per plane.
    rr: Vec<u32>,
    bad_until: Vec<SimTime>,
    /// Share of CE-marked packets per path (EWMA).
    ce: Vec<f64>,
    /// A path that has rested carries one probe at a time until a probe
    /// is acknowledged: the probe's PSN, or `NO_PROBE`.
    probing: Vec<bool>,
    probe_psn: Vec<u32>,
    /// Current out-of-use time per path (doubles on repeated losses).
    penalty: Vec<SimTime>,
    /// Entropy value (index of the QP's UDP source ports) of each path,
    /// out of `entropies`; the next one to hand out.
    entropy: Vec<u16>,
    entropies: u16,
    next_entropy: u16,
    /// The latest send time of a copy acknowledged so far, and the send
    /// time of the copy the newest ACK acknowledged (`NEVER` once used).
    delivered_sent: SimTime,
    just_acked: SimTime,
    /// The longest round trip seen lately (it decays by 1/64 per sample),
    /// picoseconds: reordering across paths stays within it.
    max_rtt: f64,
    /// The round trip of the copy the newest ACK acknowledged, and
    /// whether that ACK acknowledged a PSN for the first time (for a
    /// window over the paths).
    pub last_rtt: Option<SimTime>,
    pub newly_acked: bool,
    pub stats: MrcStats,
}

fn bit(v: &[u64], i: u32) -> bool {
    v[i as usize / 64] & (1 << (i % 64)) != 0
}

fn set(v: &mut [u64], i: u32, on: bool) {
    let w = &mut v[i as usize / 64];
    if on {
        *w |= 1 << (i % 64);
    } else {
        *w &= !(1 << (i % 64));
    }
}

impl Mrc {
    pub fn new(cfg: MrcConfig, n_pkts: u32) -> Self {
        Self::with_planes(cfg, n_pkts, 1)
    }

    /// A sender whose QP sprays over `planes` NIC ports, `cfg.paths` paths
    /// on each.
    pub fn with_planes(cfg: MrcConfig, n_pkts: u32, planes: u32) -> Self {
        let words = n_pkts as usize / 64 + 1;
        let planes = planes.clamp(1, 8);
        let per_plane = cfg.paths.clamp(1, 256);
        let paths = (planes * per_plane) as usize;
        Mrc {
            n: n_pkts,
            base: 0,
            acked: vec![0; words],
            n_acked: 0,
            una: 0,
            next_new: 0,
            sent_at: vec![NEVER; n_pkts as usize],
            path_of: vec![0; n_pkts as usize],
            per_plane,
            queued: vec![0; words],
            resend: Default::default(),
            rr: vec![0; planes as usize],
            bad_until: vec![SimTime::ZERO; paths],
            ce: vec![0.0; paths],
            probing: vec![false; paths],
            probe_psn: vec![NO_PROBE; paths],
            penalty: vec![cfg.probe; paths],
            entropy: (0..paths).map(|p| (p as u32 % per_plane) as u16).collect(),
            entropies: per_plane as u16,
            next_entropy: per_plane as u16,
            delivered_sent: SimTime::ZERO,
            just_acked: NEVER,
            max_rtt: 0.0,
            last_rtt: None,
            newly_acked: false,
            cfg,
            stats: MrcStats::default(),
        }
    }

    /// The QP has `n` entropy values (UDP source ports) in all: those
    /// beyond its paths are spares, for paths that lose packets.
    pub fn with_entropies(mut self, n: u16) -> Self {
        self.entropies = n.max(self.per_plane as u16);
        self.next_entropy = self.per_plane as u16 % self.entropies;
        self
    }

    /// Paths in all: planes x paths per plane.
    pub fn path_count(&self) -> usize {
        self.entropy.len()
    }

    /// The NIC port (its place among the QP's planes) path `path` leaves
    /// by.
    pub fn plane_of(&self, path: usize) -> usize {
        path / self.per_plane as usize
    }

    /// The entropy value path `path` uses now.
    #[inline]
    pub fn entropy_of(&self, path: u16) -> usize {
        self.entropy[path as usize % self.entropy.len()] as usize
    }

    /// The path of NIC port `plane` that uses entropy value `k` now (none
    /// if `k` was retired).
    pub fn path_of_entropy(&self, plane: usize, k: usize) -> Option<usize> {
        let first = (plane % self.rr.len()) * self.per_plane as usize;
        (first..first + self.per_plane as usize).find(|&p| self.entropy[p] as usize == k)
    }

    /// Whether `psn` is acknowledged (everything below the records is).
    fn is_acked(&self, psn: u32) -> bool {
        psn < self.base || bit(&self.acked, psn - self.base)
    }

    fn is_queued(&self, psn: u32) -> bool {
        psn >= self.base && bit(&self.queued, psn - self.base)
    }

    fn at(&self, psn: u32) -> usize {
        (psn - self.base) as usize
    }

    /// `more` PSNs are posted after those before (a message on the
    /// connection).
    pub fn extend(&mut self, more: u32) {
        self.n += more;
        let len = (self.n - self.base) as usize;
        let words = len / 64 + 1;
        self.acked.resize(words, 0);
        self.queued.resize(words, 0);
        self.sent_at.resize(len, NEVER);
        self.path_of.resize(len, 0);
    }

    /// Drops the records of PSNs acknowledged in full, once they are at
    /// least half of what is held.
    fn trim(&mut self) {
        let drop = (self.una - self.base) / 64 * 64;
        if drop < 1024 || (drop as usize) < self.sent_at.len() / 2 {
            return;
        }
        let words = drop as usize / 64;
        self.acked.drain(..words);
        self.queued.drain(..words);
        self.sent_at.drain(..drop as usize);
        self.path_of.drain(..drop as usize);
        self.base += drop;
    }

    /// Copies sent and not yet acknowledged, less those waiting to be
    /// sent again.
    pub fn in_flight(&self) -> u32 {
        (self.next_new - self.n_acked).saturating_sub(self.resend.len() as u32)
    }

    /// PSNs waiting to be sent again.
    pub fn queued_resends(&self) -> u32 {
        self.resend.len() as u32
    }

    pub fn has_data(&self) -> bool {
        !self.resend.is_empty() || self.next_new < self.n
    }

    pub fn is_done(&self) -> bool {
        self.n_acked == self.n
    }

    /// Paths in full use at `now` (not resting, not probing).
    pub fn healthy(&self, now: SimTime) -> usize {
        (0..self.bad_until.len())
            .filter(|&p| self.bad_until[p] <= now && !self.probing[p])
            .count()
    }

    /// When some path may take a packet: `now` if one may, else when the
    /// first resting path is back (`MAX` while every path waits on a
    /// probe's fate).
    pub fn ready_at(&self, now: SimTime, plane: u8) -> SimTime {
        let mut t = NEVER;
        for p in self.plane_paths(plane) {
            if self.usable(p, now) {
                return now;
            }
            if self.bad_until[p] > now {
                t = t.min(self.bad_until[p]);
            }
        }
        t
    }

    /// Whether path `p` may take a packet now: healthy, or rested and
    /// without a probe in flight.
    fn usable(&self, p: usize, now: SimTime) -> bool {
        self.bad_until[p] <= now && (!self.probing[p] || self.probe_psn[p] == NO_PROBE)
    }

    fn plane_paths(&self, plane: u8) -> std::ops::Range<usize> {
        let first = (plane as u32 % self.rr.len() as u32 * self.per_plane) as usize;
        first..first + self.per_plane as usize
    }

    /// The next PSN to send on plane 0 (see `next_on`).
    pub fn next(&mut self, now: SimTime) -> (u32, u16, bool) {
        self.next_on(now, 0)
    }

    /// The next PSN to send from the NIC port of `plane`, the path it
    /// takes (numbered plane by plane), and whether it was sent before.
    pub fn next_on(&mut self, now: SimTime, plane: u8) -> (u32, u16, bool) {
        let psn = match self.resend.pop_front() {
            Some(p) => {
                // (Acknowledged since it was queued, its record perhaps
                // dropped: it goes again all the same.)
                if p >= self.base {
                    set(&mut self.queued, p - self.base, false);
                }
                p
            }
            None => {
                self.next_new += 1;
                self.next_new - 1
            }
        };
        let range = self.plane_paths(plane);
        let (first, paths) = (range.start as u32, self.per_plane);
        let slot = plane as usize % self.rr.len();
        let mut path = None;
        for k in 0..paths {
            let cand = first + (self.rr[slot] + k) % paths;
            if self.usable(cand as usize, now) {
                path = Some(cand);
                break;
            }
        }
        // Every path out of use: the one back soonest.
        let path = path.unwrap_or_else(|| {
            range
                .clone()
                .min_by_key(|&p| self.bad_until[p])
                .unwrap_or(range.start) as u32
        });
        self.rr[slot] = (path - first + 1) % paths;
        if self.probing[path as usize] {
            self.probe_psn[path as usize] = psn;
        }
        let again = if psn >= self.base {
            let i = self.at(psn);
            let again = self.sent_at[i] != NEVER;
            self.sent_at[i] = now;
            self.path_of[i] = path as u16;
            again
        } else {
            true
        };
        (psn, path as u16, again)
    }

    /// Path number of entropy value `k` on NIC port `plane`.
    pub fn path_index(&self, plane: usize, k: usize) -> usize {
        (plane % self.rr.len()) * self.per_plane as usize + k % self.per_plane as usize
    }

    /// An ACK came back for a copy sent on `path`, echoing whether it was
    /// CE-marked: a path that marks most of its packets is rested like a
    /// lossy one.
    pub fn on_echo(&mut self, now: SimTime, path: usize, ce: bool) {
        if path >= self.ce.len() || self.cfg.ecn_threshold >= 1.0 {
            return;
        }
        let p = path;
        self.ce[p] += (f64::from(u8::from(ce)) - self.ce[p]) / 16.0;
        if self.ce[p] > self.cfg.ecn_threshold && self.bad_until[p] <= now {
            self.stats.ecn_rests += 1;
            self.ce[p] = 0.0;
            self.path_lost(now, p);
        }
    }

    /// A copy sent on `path` arrived: the path is in full use again (a
    /// rest that a spurious timeout started ends), at its first penalty. (The path comes from the ACK, not from the PSN: after
    /// a spurious timeout the first copy's ACK must not clear the path the
    /// second copy took.)
    pub fn delivered_on(&mut self, path: usize) {
        if path < self.penalty.len() {
            self.bad_until[path] = SimTime::ZERO;
            self.penalty[path] = self.cfg.probe;
            self.probing[path] = false;
            self.probe_psn[path] = NO_PROBE;
        }
    }

    /// PSN `psn` arrived. True if it completed the transfer.
    pub fn on_ack(&mut self, psn: u32) -> bool {
        self.newly_acked = false;
        self.last_rtt = None;
        if psn >= self.n || self.is_acked(psn) {
            return false;
        }
        self.newly_acked = true;
        set(&mut self.acked, psn - self.base, true);
        self.just_acked = self.sent_at[self.at(psn)];
        self.delivered_sent = self.delivered_sent.max(self.just_acked);
        self.n_acked += 1;
        while self.una < self.n && self.is_acked(self.una) {
            self.una += 1;
        }
        self.trim();
        self.is_done()
    }

    fn requeue(&mut self, psn: u32) {
        if !self.is_acked(psn) && !self.is_queued(psn) {
            set(&mut self.queued, psn - self.base, true);
            self.resend.push_back(psn);
        }
    }

    /// Outstanding PSNs sent more than the reordering window before the
    /// latest copy acknowledged are lost: resent, and their paths take new
    /// entropy. The window is `reorder` or the longest recent round trip,
    /// whichever is longer: a copy on a slower path arrives within it.
    /// Returns how many. (The scan stops at the first PSN still within
    /// the window: new PSNs go out in order.)
    pub fn detect_losses(&mut self, now: SimTime) -> u64 {
        if self.just_acked != NEVER {
            let rtt = now.0.saturating_sub(self.just_acked.0);
            self.last_rtt = Some(SimTime(rtt));
            let rtt = rtt as f64;
            self.max_rtt = rtt.max(self.max_rtt - self.max_rtt / 64.0);
            self.just_acked = NEVER;
        }
        let window = self.window();
        let mut lost = 0;
        let mut psn = self.una;
        while psn < self.next_new {
            if !self.is_acked(psn) && !self.is_queued(psn) {
                let i = self.at(psn);
                if self.sent_at[i] == NEVER || self.sent_at[i] + window > self.delivered_sent {
                    break;
                }
                lost += 1;
                self.requeue(psn);
                self.path_broken(now, self.path_of[i] as usize);
            }
            psn += 1;
        }
        self.stats.loss_resends += lost;
        lost
    }

    /// The reordering window: `reorder`, or twice the longest recent round
    /// trip if longer (queues build between samples).
    fn window(&self) -> SimTime {
        self.cfg.reorder.max(SimTime(2 * self.max_rtt as u64))
    }

    /// How long a copy may go unacknowledged before it is resent and its
    /// path given new entropy: `rto` until a round trip has been seen,
    /// then twice the reordering window (at least four times the longest
    /// recent round trip), whatever `rto` says: a tail loss, with nothing
    /// later to reveal it, is found within a few round trips, and a
    /// timeout shorter than the fabric's queues can make a round trip
    /// never fires for copies that are only waiting in them (with `rto =
    /// "50us"` and queues of a few hundred microseconds, every copy was
    /// sent again, and again).
    pub fn timeout(&self, rto: SimTime) -> SimTime {
        if self.max_rtt == 0.0 {
            return rto;
        }
        SimTime(self.window().0.saturating_mul(2))
    }

    /// Path `p` lost a packet in a way congestion does not explain: it
    /// takes a spare entropy value, else it rests.
    fn path_broken(&mut self, now: SimTime, p: usize) {
        let per_plane = self.per_plane as usize;
        if usize::from(self.entropies) <= per_plane {
            self.path_lost(now, p);
            return;
        }
        // The next entropy value no path of this plane uses.
        let first = p / per_plane * per_plane;
        let in_use = |e: u16, v: &[u16]| v[first..first + per_plane].contains(&e);
        let mut e = self.next_entropy;
        while in_use(e, &self.entropy) {
            e = (e + 1) % self.entropies;
        }
        self.next_entropy = (e + 1) % self.entropies;
        self.entropy[p] = e;
        self.stats.paths_replaced += 1;
        self.stats.paths_failed += 1;
        // A new route, not yet known to work: it carries one probe at a
        // time, at once, until a copy on it is acknowledged.
        self.ce[p] = 0.0;
        self.bad_until[p] = SimTime::ZERO;
        self.penalty[p] = self.cfg.probe;
        self.probing[p] = true;
        self.probe_psn[p] = NO_PROBE;
    }

    fn path_lost(&mut self, now: SimTime, p: usize) {
        if self.bad_until[p] <= now {
            self.stats.paths_failed += 1;
            self.bad_until[p] = now + self.penalty[p];
            self.penalty[p] = SimTime(self.penalty[p].0.saturating_mul(2));
            self.probing[p] = true;
            self.probe_psn[p] = NO_PROBE;
        }
    }

    /// The headers of PSN `psn` came back trimmed: resend it, and rest
    /// the path it took.
    pub fn on_trim(&mut self, now: SimTime, psn: u32) {
        if psn >= self.n || self.is_acked(psn) {
            return;
        }
        self.stats.trim_resends += 1;
        self.requeue(psn);
        self.path_lost(now, self.path_of[self.at(psn)] as usize);
    }

    /// Every PSN sent at least `rto` ago and not acknowledged is resent,
    /// and its path rested. Returns how many, and when the oldest still
    /// outstanding times out.
    pub fn on_timer(&mut self, now: SimTime, rto: SimTime) -> (u64, SimTime) {
        let mut n = 0;
        let mut next = NEVER;
        for psn in self.una..self.next_new {
            if self.is_acked(psn) || self.is_queued(psn) {
                continue;
            }
            let at = self.sent_at[self.at(psn)];
            if at + rto <= now {
                n += 1;
                self.requeue(psn);
                self.path_broken(now, self.path_of[self.at(psn)] as usize);
            } else {
                next = next.min(at + rto);
            }
        }
        self.stats.timeout_resends += n;
        (n, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection posts message after message: the sender takes each,
    /// and holds records only for what is not yet acknowledged.
    #[test]
    fn messages_posted_one_after_another_keep_only_what_is_in_flight() {
        let cfg = MrcConfig {
            paths: 4,
            ..Default::default()
        };
        let mut m = Mrc::new(cfg, 0);
        assert!(!m.has_data() && m.is_done());
        let now = SimTime::ZERO;
        for round in 0..3u32 {
            m.extend(3000);
            assert!(m.has_data() && !m.is_done());
            for k in 0..3000 {
                let (psn, _, again) = m.next(now);
                assert_eq!((psn, again), (round * 3000 + k, false));
                m.on_ack(psn);
            }
            assert!(m.is_done() && !m.has_data());
            assert!(m.sent_at.len() < 3000, "acknowledged records dropped");
        }
        // A loss after the records before it were dropped: only it goes
        // again, found by its timer.
        m.extend(2);
        let (a, _, _) = m.next(now);
        let (b, _, _) = m.next(now);
        m.on_ack(b);
        let (n, _) = m.on_timer(SimTime::from_us(5000), SimTime::from_us(100));
        assert_eq!(n, 1);
        let (psn, _, again) = m.next(SimTime::from_us(5000));
        assert_eq!((psn, again), (a, true));
        assert!(m.on_ack(a));
    }

    #[test]
    fn sprays_round_robin_and_resends_only_what_is_missing() {
        let cfg = MrcConfig {
            paths: 4,
            probe: SimTime::from_us(10),
            ..Default::default()
        };
        let mut m = Mrc::new(cfg, 8);
        let sent: Vec<(u32, u16, bool)> = (0..8).map(|_| m.next(SimTime::ZERO)).collect();
        assert_eq!(
            sent.iter().map(|s| s.1).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 0, 1, 2, 3]
        );
        for psn in [0, 1, 3, 4, 5, 7] {
            m.on_ack(psn);
        }
        // PSN 2 (path 2) came back trimmed: only it is resent, not on path 2.
        m.on_trim(SimTime(5), 2);
        assert_eq!(m.healthy(SimTime(5)), 3);
        let (psn, path, again) = m.next(SimTime(5));
        assert_eq!((psn, again), (2, true));
        assert_ne!(path, 2);
        m.on_ack(2);
        // PSN 6 times out; the path it took rests too.
        let (n, _) = m.on_timer(SimTime::from_us(1000), SimTime::from_us(100));
        assert_eq!(n, 1);
        assert_eq!(m.next(SimTime::from_us(1000)).0, 6);
        assert!(!m.has_data());
        assert!(m.on_ack(6));
        assert_eq!(m.stats.paths_failed, 2);
        assert_eq!((m.stats.trim_resends, m.stats.timeout_resends), (1, 1));
    }

    #[test]
    fn a_rested_path_carries_one_probe_and_rests_longer_if_it_fails() {
        let mut m = Mrc::new(
            MrcConfig {
                paths: 2,
                probe: SimTime::from_us(10),
                ..Default::default()
            },
            100,
        );
        let (p0, path, _) = m.next(SimTime::ZERO);
        assert_eq!(path, 0);
        m.on_trim(SimTime::ZERO, p0);
        // Resting: everything goes to path 1.
        assert!((0..3).all(|_| m.next(SimTime::from_us(5)).1 == 1));
        // Back after 10 us, for one probe only.
        let t = SimTime::from_us(10);
        let probe = loop {
            let (psn, path, _) = m.next(t);
            if path == 0 {
                break psn;
            }
        };
        assert!((0..4).all(|_| m.next(t).1 == 1), "one probe at a time");
        // The probe is lost too: out for 20 us this time.
        m.on_trim(t, probe);
        assert_eq!(m.ready_at(t, 0), t, "path 1 is still fine");
        let u = t + SimTime::from_us(19);
        assert!((0..3).all(|_| m.next(u).1 == 1));
        let back = t + SimTime::from_us(20);
        let probe = loop {
            let (psn, path, _) = m.next(back);
            if path == 0 {
                break psn;
            }
        };
        // This probe arrives: the path is in full use again.
        m.on_ack(probe);
        m.delivered_on(0);
        assert_eq!(m.healthy(back), 2);
    }

    /// A path whose packets come back CE-marked most of the time rests.
    #[test]
    fn a_path_that_marks_most_packets_rests() {
        let mut m = Mrc::new(
            MrcConfig {
                paths: 2,
                ..Default::default()
            },
            200,
        );
        let t = SimTime::ZERO;
        for _ in 0..100 {
            let (psn, path, _) = m.next(t);
            m.on_echo(t, path as usize, path == 1);
            m.on_ack(psn);
            if m.stats.ecn_rests > 0 {
                break;
            }
        }
        assert_eq!(m.stats.ecn_rests, 1);
        assert_eq!(m.healthy(t), 1);
        assert_eq!(m.next(t).1, 0);
    }

    /// A spurious timeout: the first copy (path 0) arrives late, after the
    /// second went out on a path that is resting with a probe in flight.
    /// The first copy's ACK names path 0, so the resting path stays out.
    #[test]
    fn a_late_ack_of_an_earlier_copy_does_not_heal_another_path() {
        let mut m = Mrc::new(
            MrcConfig {
                paths: 2,
                probe: SimTime::from_us(10),
                ..Default::default()
            },
            10,
        );
        let (a, pa, _) = m.next(SimTime::ZERO);
        let (b, pb, _) = m.next(SimTime::ZERO);
        assert_eq!((pa, pb), (0, 1));
        m.on_ack(b);
        m.delivered_on(1);
        // PSN a times out; path 0 rests, and a goes again on path 1.
        m.on_timer(SimTime::from_us(100), SimTime::from_us(100));
        assert_eq!(m.healthy(SimTime::from_us(100)), 1);
        // Path 1 loses a packet and rests too.
        let (c, pc, _) = m.next(SimTime::from_us(100));
        assert_eq!((c, pc), (a, 1));
        m.on_trim(SimTime::from_us(101), c);
        assert_eq!(m.healthy(SimTime::from_us(101)), 0);
        // The first copy of a (path 0) is acknowledged late: path 0 is
        // healthy again, path 1 is not.
        m.on_ack(a);
        m.delivered_on(0);
        assert_eq!(m.healthy(SimTime::from_us(102)), 1);
        assert_eq!(m.next(SimTime::from_us(102)).1, 0);
    }
}
