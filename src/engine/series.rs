//! Time series of the fabric's state, in bounded memory.
//!
//! Every `interval` the sampler closes a bucket: per link the share of the
//! bucket spent serializing, per switch queue the deepest it got, per port
//! and lossless priority the share of the bucket it was paused and the
//! PFC pauses it sent per second, per port the ECN marks and CNPs per
//! second, and per tracked QP its sending rate
//! (and its DCQCN rate). When `cap` buckets are full, neighbours are merged
//! pairwise and the interval doubles, so a run of any length ends with
//! between `cap / 2` and `cap` points and memory never grows past `cap`
//! values per series. A series is only stored once it is non-zero.
//!
//! Sampling reads the simulation and never changes it: a run gives the
//! same results with sampling on or off.

use super::{Owner, Simulation};
use crate::nic::rate::RateControl;
use crate::switch::classify::QUEUES;
use crate::topology::PortId;
use crate::units::SimTime;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// How two neighbouring buckets become one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Merge {
    /// Rates and shares of time: the mean.
    Mean,
    /// Depths: the larger.
    Max,
}

/// Series of one kind, keyed by element (a port, a port's queue...).
///
/// The sampler visits every element at every bucket (some 60,000 on a
/// 1024-host fabric), so values are stored by bucket: each bucket is one
/// contiguous frame holding a value per row, and rows are found through
/// a dense table indexed by key. Writing a bucket is then a sequential
/// pass instead of one cache miss per element; reading a row back, done
/// once at the end, strides over the frames.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Group {
    pub merge: Merge,
    /// Per key: its row, or `NO_ROW`.
    row_of: Vec<u32>,
    /// Per row: its key. Rows exist only for elements that were ever
    /// non-zero, numbered in the order they first were.
    keys: Vec<u32>,
    /// Where each bucket's frame starts in `values`; a frame holds one
    /// value for each row that existed when it was written, so rows that
    /// started later read as zero there.
    frame_start: Vec<usize>,
    values: Vec<f32>,
    /// Once the run has ended: the same values row by row, every row
    /// full length, so the several readers of the outputs need not
    /// transpose the frames again. `values` is then empty.
    finished: Option<Vec<Vec<f32>>>,
}

const NO_ROW: u32 = u32::MAX;

impl Group {
    fn new(merge: Merge) -> Group {
        Group {
            merge,
            row_of: Vec::new(),
            keys: Vec::new(),
            frame_start: Vec::new(),
            values: Vec::new(),
            finished: None,
        }
    }

    /// Opens the next bucket's frame, every existing row at zero.
    fn begin(&mut self) {
        if let Some(rows) = self.finished.take() {
            // Sampling goes on after `finish` (a caller ran further):
            // back to frames, each now holding every row.
            for b in 0..self.frame_start.len() {
                self.frame_start[b] = self.values.len();
                self.values.extend(rows.iter().map(|r| r[b]));
            }
        }
        self.frame_start.push(self.values.len());
        self.values.resize(self.values.len() + self.keys.len(), 0.0);
    }

    /// Sets `key`'s value in the open frame; a zero starts no row.
    fn push(&mut self, key: u32, v: f32) {
        let base = *self.frame_start.last().expect("a frame is open");
        let row = self.row_of.get(key as usize).copied().unwrap_or(NO_ROW);
        if row != NO_ROW {
            self.values[base + row as usize] = v;
            return;
        }
        if v == 0.0 {
            return;
        }
        if self.row_of.len() <= key as usize {
            self.row_of.resize(key as usize + 1, NO_ROW);
        }
        // The open frame is last in `values`: the new row's slot is
        // appended to it.
        self.row_of[key as usize] = self.keys.len() as u32;
        self.keys.push(key);
        self.values.push(v);
    }

    fn frame(&self, b: usize) -> &[f32] {
        let end = self
            .frame_start
            .get(b + 1)
            .copied()
            .unwrap_or(self.values.len());
        &self.values[self.frame_start[b]..end]
    }

    /// Transposes the frames into rows for the readers to come.
    fn finish(&mut self) {
        if self.finished.is_none() {
            self.finished = Some(self.transpose());
            self.values = Vec::new();
        }
    }

    fn row(&self, row: usize) -> Cow<'_, [f32]> {
        if let Some(rows) = &self.finished {
            return Cow::Borrowed(&rows[row]);
        }
        Cow::Owned(
            (0..self.frame_start.len())
                .map(|b| self.frame(b).get(row).copied().unwrap_or(0.0))
                .collect(),
        )
    }

    /// The series of `key`, one value per closed bucket, if it was ever
    /// non-zero.
    pub fn get(&self, key: u32) -> Option<Cow<'_, [f32]>> {
        match self.row_of.get(key as usize) {
            Some(&r) if r != NO_ROW => Some(self.row(r as usize)),
            _ => None,
        }
    }

    /// Every row, read a block of frames at a time so that both the
    /// frames and the rows are walked in order; borrowed once finished.
    fn rows(&self) -> Vec<Cow<'_, [f32]>> {
        if let Some(rows) = &self.finished {
            return rows.iter().map(|r| Cow::Borrowed(r.as_slice())).collect();
        }
        self.transpose().into_iter().map(Cow::Owned).collect()
    }

    fn transpose(&self) -> Vec<Vec<f32>> {
        const BLOCK: usize = 16;
        let points = self.frame_start.len();
        let mut rows = vec![Vec::with_capacity(points); self.keys.len()];
        for first in (0..points).step_by(BLOCK) {
            let frames: Vec<&[f32]> = (first..points.min(first + BLOCK))
                .map(|b| self.frame(b))
                .collect();
            for (r, row) in rows.iter_mut().enumerate() {
                row.extend(frames.iter().map(|f| f.get(r).copied().unwrap_or(0.0)));
            }
        }
        rows
    }

    /// Every stored series by key, in key order.
    pub fn series(&self) -> BTreeMap<u32, Cow<'_, [f32]>> {
        self.keys.iter().copied().zip(self.rows()).collect()
    }

    /// Every stored series with its key, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, Cow<'_, [f32]>)> {
        self.keys.iter().copied().zip(self.rows())
    }

    /// How many elements have a series.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Merges neighbouring buckets pairwise (an even number of them).
    fn halve(&mut self) {
        debug_assert!(self.finished.is_none(), "a frame was opened first");
        let n = self.frame_start.len() / 2;
        let mut values = Vec::with_capacity(self.values.capacity());
        let mut starts = Vec::with_capacity(self.frame_start.capacity());
        for i in 0..n {
            let (a, b) = (self.frame(2 * i), self.frame(2 * i + 1));
            starts.push(values.len());
            // A later frame has at least the rows of an earlier one.
            values.extend(b.iter().enumerate().map(|(r, &y)| {
                let x = a.get(r).copied().unwrap_or(0.0);
                match self.merge {
                    Merge::Mean => (x + y) / 2.0,
                    Merge::Max => x.max(y),
                }
            }));
        }
        self.values = values;
        self.frame_start = starts;
    }

    /// Heap bytes held by the values and the index.
    pub fn heap_bytes(&self) -> usize {
        let finished: usize = self
            .finished
            .iter()
            .flatten()
            .map(|r| r.capacity() * 4 + 24)
            .sum();
        finished
            + self.values.capacity() * 4
            + self.frame_start.capacity() * 8
            + self.row_of.capacity() * 4
            + self.keys.capacity() * 4
    }
}

/// What the sampler keeps.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Series {
    /// Off: no buckets are ever closed.
    pub enabled: bool,
    /// The width of every closed bucket but possibly the last.
    pub interval: SimTime,
    pub cap: usize,
    /// The queues the class map uses (a bit each); the others are
    /// always empty and are not visited.
    queues_used: u8,
    /// Closed buckets.
    pub points: usize,
    /// When the last bucket closed (the run's end, once `finish` ran).
    pub last: SimTime,
    /// Per port: share of the bucket spent serializing (0..1).
    pub link_util: Group,
    /// Per `port * QUEUES + queue` of a switch port: deepest in bytes.
    pub queue_depth: Group,
    /// Per `port * QUEUES + priority`: share of the bucket the port's
    /// transmitter was paused by PFC.
    pub pfc_paused: Group,
    /// Per `port * QUEUES + priority`: PFC pause frames the port sent to
    /// its neighbour, per second.
    pub pfc_pauses: Group,
    /// Per switch port: ECN marks per second.
    pub ecn_marks: Group,
    /// Per NIC port: CNPs received per second.
    pub cnps: Group,
    /// Per tracked QP: payload sent, in bits per second.
    pub qp_send: Group,
    /// Per tracked QP under DCQCN: its rate at the bucket's end, bits per
    /// second.
    pub qp_dcqcn: Group,
    /// Per port: CNPs received there (counted by the engine).
    pub cnp_count: Vec<u64>,
    /// Per tracked QP (the first ones by id): payload bytes sent.
    pub qp_sent: Vec<u64>,
    prev_busy: Vec<u64>,
    prev_paused: Vec<u64>,
    prev_pauses: Vec<u64>,
    prev_marks: Vec<u32>,
    prev_cnps: Vec<u64>,
    prev_sent: Vec<u64>,
}

impl Series {
    pub fn new(
        interval: Option<SimTime>,
        cap: usize,
        ports: usize,
        tracked_qps: usize,
        queues_used: u8,
    ) -> Series {
        let enabled = interval.is_some();
        let n = if enabled { ports } else { 0 };
        let q = if enabled { tracked_qps } else { 0 };
        Series {
            enabled,
            interval: interval.unwrap_or(SimTime::MAX),
            cap: cap.max(2) & !1,
            queues_used,
            points: 0,
            last: SimTime::ZERO,
            link_util: Group::new(Merge::Mean),
            queue_depth: Group::new(Merge::Max),
            pfc_paused: Group::new(Merge::Mean),
            pfc_pauses: Group::new(Merge::Mean),
            ecn_marks: Group::new(Merge::Mean),
            cnps: Group::new(Merge::Mean),
            qp_send: Group::new(Merge::Mean),
            qp_dcqcn: Group::new(Merge::Mean),
            cnp_count: vec![0; n],
            qp_sent: vec![0; q],
            prev_busy: vec![0; n],
            prev_paused: vec![0; n * QUEUES],
            prev_pauses: vec![0; n * QUEUES],
            prev_marks: vec![0; n],
            prev_cnps: vec![0; n],
            prev_sent: vec![0; q],
        }
    }

    fn groups_mut(&mut self) -> [&mut Group; 8] {
        [
            &mut self.link_util,
            &mut self.queue_depth,
            &mut self.pfc_paused,
            &mut self.pfc_pauses,
            &mut self.ecn_marks,
            &mut self.cnps,
            &mut self.qp_send,
            &mut self.qp_dcqcn,
        ]
    }

    pub fn groups(&self) -> [&Group; 8] {
        [
            &self.link_util,
            &self.queue_depth,
            &self.pfc_paused,
            &self.pfc_pauses,
            &self.ecn_marks,
            &self.cnps,
            &self.qp_send,
            &self.qp_dcqcn,
        ]
    }

    /// Start time of bucket `i`.
    pub fn bucket_start(&self, i: usize) -> SimTime {
        SimTime(self.interval.0.saturating_mul(i as u64))
    }

    /// Heap bytes of everything the sampler holds.
    pub fn heap_bytes(&self) -> usize {
        let groups: usize = self.groups().iter().map(|g| g.heap_bytes()).sum();
        let counters = self.cnp_count.len()
            + self.qp_sent.len()
            + self.prev_busy.len()
            + self.prev_paused.len()
            + self.prev_pauses.len()
            + self.prev_marks.len()
            + self.prev_cnps.len()
            + self.prev_sent.len();
        groups + counters * 8
    }
}

impl Simulation {
    /// Closes the bucket that ends now and schedules the next.
    pub(super) fn sample(&mut self) {
        self.close_bucket();
        if self.records.series.points == self.records.series.cap {
            for g in self.records.series.groups_mut() {
                g.halve();
            }
            self.records.series.points /= 2;
            self.records.series.interval =
                SimTime(self.records.series.interval.0.saturating_mul(2));
        }
        let next = SimTime(self.now.0.saturating_add(self.records.series.interval.0));
        self.queue.push(next, super::Event::Sample);
    }

    /// Closes the last, possibly shorter, bucket when the run ends.
    pub fn finish_series(&mut self) {
        if self.records.series.enabled && self.now > self.records.series.last {
            self.close_bucket();
        }
        for g in self.records.series.groups_mut() {
            g.finish();
        }
    }

    fn close_bucket(&mut self) {
        let now = self.now;
        let dt = now.saturating_sub(self.records.series.last).0.max(1) as f64;
        let per_s = 1e12 / dt;
        // In a partition, only its own ports and QPs (the others' series
        // come from their partitions).
        let part = self.part.as_deref();
        let port_mine = |i: usize| part.is_none_or(|p| p.port_part[i] == p.me);
        let qp_mine = |q: usize| part.is_none_or(|p| p.qp_mine[q]);
        let s = &mut self.records.series;
        for g in s.groups_mut() {
            g.begin();
        }
        for (i, port) in self.egress.ports().iter().enumerate() {
            if !port_mine(i) {
                continue;
            }
            // The frame on the wire counts only up to now.
            let busy = port.busy_ps - port.busy_until.saturating_sub(now).0.min(port.busy_ps);
            let d = busy.saturating_sub(s.prev_busy[i]);
            s.prev_busy[i] = busy;
            s.link_util.push(i as u32, (d as f64 / dt).min(1.0) as f32);
        }
        // Each port's queue record is a cache miss: ask for those a few
        // ports ahead so that the misses overlap.
        const AHEAD: usize = 16;
        for i in 0..self.egress.owners().len() {
            if !port_mine(i) {
                continue;
            }
            let owner = self.egress.owners()[i];
            if let Some(ahead) = self.egress.queues().get(i + AHEAD) {
                crate::cache::prefetch_read(
                    ahead.queue_line(s.queues_used.trailing_zeros() as usize % QUEUES),
                );
            }
            let qs = self.egress.queues_mut(i);
            if matches!(owner, Owner::Switch(_)) {
                for q in (0..QUEUES).filter(|q| s.queues_used >> q & 1 == 1) {
                    let deepest = qs.take_window_max(q);
                    let key = (i * QUEUES + q) as u32;
                    s.queue_depth.push(key, deepest as f32);
                }
                let d = qs.marks.wrapping_sub(s.prev_marks[i]);
                s.prev_marks[i] = qs.marks;
                s.ecn_marks.push(i as u32, (d as f64 * per_s) as f32);
            } else {
                let c = s.cnp_count[i];
                let d = c - s.prev_cnps[i];
                s.prev_cnps[i] = c;
                s.cnps.push(i as u32, (d as f64 * per_s) as f32);
            }
        }
        for (prio, &slot) in self.egress.pfc_slot().iter().enumerate() {
            if slot == super::NO_SLOT {
                continue;
            }
            for i in 0..self.egress.ports().len() {
                if !port_mine(i) {
                    continue;
                }
                let at = i * self.egress.pfc_slots() + slot as usize;
                let paused = self.paused_ps(at);
                let sent = self.egress.pfc()[at].pauses_sent;
                let s = &mut self.records.series;
                let key = i * QUEUES + prio;
                let d = paused.saturating_sub(s.prev_paused[key]);
                s.prev_paused[key] = paused;
                let v = (d as f64 / dt).min(1.0) as f32;
                s.pfc_paused.push(key as u32, v);
                let n = sent.saturating_sub(s.prev_pauses[key]);
                s.prev_pauses[key] = sent;
                s.pfc_pauses.push(key as u32, (n as f64 * per_s) as f32);
            }
        }
        let params = &self.scenario.transport.dcqcn;
        let s = &mut self.records.series;
        for q in 0..s.qp_sent.len() {
            if !qp_mine(q) {
                continue;
            }
            let d = s.qp_sent[q] - s.prev_sent[q];
            s.prev_sent[q] = s.qp_sent[q];
            s.qp_send.push(q as u32, (d as f64 * 8.0 * per_s) as f32);
            let qp = &self.nics.qps()[q];
            if let RateControl::Dcqcn(d) = &qp.req.rate {
                if !qp.req.is_done() || s.qp_dcqcn.get(q as u32).is_some() {
                    // A copy: replaying timers in other steps would round
                    // differently and change the run.
                    let bps = d.clone().rate_at(now, params);
                    s.qp_dcqcn.push(q as u32, bps as f32);
                }
            }
        }
        s.points += 1;
        s.last = now;
    }
}

/// The port a CNP for QP `q` arrives at counts it.
#[inline]
pub(super) fn count_cnp(s: &mut Series, port: PortId) {
    if let Some(c) = s.cnp_count.get_mut(port.idx()) {
        *c += 1;
    }
}

impl Group {
    /// Keeps the rows of the keys that are not
    /// `theirs` and takes the rows of those that are from `other`, the
    /// same group of another partition (both finished).
    pub fn absorb(&mut self, other: &Group, theirs: impl Fn(u32) -> bool) {
        let mut rows: BTreeMap<u32, Vec<f32>> = BTreeMap::new();
        for (k, r) in self.iter() {
            if !theirs(k) {
                rows.insert(k, r.into_owned());
            }
        }
        for (k, r) in other.iter() {
            if theirs(k) {
                rows.insert(k, r.into_owned());
            }
        }
        self.row_of.clear();
        self.keys.clear();
        for (i, &k) in rows.keys().enumerate() {
            if self.row_of.len() <= k as usize {
                self.row_of.resize(k as usize + 1, NO_ROW);
            }
            self.row_of[k as usize] = i as u32;
            self.keys.push(k);
        }
        self.values = Vec::new();
        self.finished = Some(rows.into_values().collect());
    }
}

impl Series {
    /// Takes from `other`, the series of another partition of the same
    /// run, the series of the
    /// ports and QPs `port_theirs` and `qp_theirs` say are its partition's.
    pub fn absorb(
        &mut self,
        other: &Series,
        port_theirs: impl Fn(u32) -> bool,
        qp_theirs: impl Fn(u32) -> bool,
    ) {
        let q = QUEUES as u32;
        self.link_util.absorb(&other.link_util, &port_theirs);
        self.queue_depth
            .absorb(&other.queue_depth, |k| port_theirs(k / q));
        self.pfc_paused
            .absorb(&other.pfc_paused, |k| port_theirs(k / q));
        self.pfc_pauses
            .absorb(&other.pfc_pauses, |k| port_theirs(k / q));
        self.ecn_marks.absorb(&other.ecn_marks, &port_theirs);
        self.cnps.absorb(&other.cnps, &port_theirs);
        self.qp_send.absorb(&other.qp_send, &qp_theirs);
        self.qp_dcqcn.absorb(&other.qp_dcqcn, &qp_theirs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halving_keeps_means_and_maxima() {
        let mut g = Group::new(Merge::Mean);
        for v in [1.0, 3.0, 0.0, 2.0] {
            g.begin();
            g.push(7, v);
        }
        g.halve();
        assert_eq!(*g.get(7).unwrap(), [2.0, 1.0]);
        let mut g = Group::new(Merge::Max);
        for v in [1.0, 3.0, 0.0, 2.0] {
            g.begin();
            g.push(7, v);
        }
        g.halve();
        assert_eq!(*g.get(7).unwrap(), [3.0, 2.0]);
    }

    #[test]
    fn a_series_starts_when_it_is_first_non_zero() {
        let mut g = Group::new(Merge::Mean);
        for v in [0.0, 0.0] {
            g.begin();
            g.push(1, v);
        }
        assert!(g.is_empty());
        for v in [5.0, 0.0] {
            g.begin();
            g.push(1, v);
        }
        assert_eq!(*g.get(1).unwrap(), [0.0, 0.0, 5.0, 0.0]);
    }
}
