//! Time series of the fabric's state, in bounded memory.
//!
//! Every `interval` the sampler closes a bucket: per link the share of the
//! bucket spent serializing, per switch queue the deepest it got, per port
//! and lossless priority the share of the bucket it was paused, per port
//! the ECN marks and CNPs per second, and per tracked QP its sending rate
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
use std::collections::BTreeMap;

/// How two neighbouring buckets become one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// Rates and shares of time: the mean.
    Mean,
    /// Depths: the larger.
    Max,
}

/// Series of one kind, keyed by element (a port, a port's queue...).
#[derive(Debug)]
pub struct Group {
    pub merge: Merge,
    /// Only elements that were ever non-zero; every stored series has one
    /// value per closed bucket.
    pub series: BTreeMap<u32, Vec<f32>>,
}

impl Group {
    fn new(merge: Merge) -> Group {
        Group {
            merge,
            series: BTreeMap::new(),
        }
    }

    fn push(&mut self, key: u32, bucket: usize, cap: usize, v: f32) {
        if v == 0.0 {
            if let Some(s) = self.series.get_mut(&key) {
                s.push(0.0);
            }
            return;
        }
        let s = self.series.entry(key).or_insert_with(|| {
            let mut s = Vec::with_capacity(cap);
            s.resize(bucket, 0.0);
            s
        });
        s.push(v);
    }

    /// Series that have fallen behind (their element was skipped this
    /// bucket) are padded with zeros to `points`.
    fn pad(&mut self, points: usize) {
        for s in self.series.values_mut() {
            s.resize(points, 0.0);
        }
    }

    fn halve(&mut self) {
        for s in self.series.values_mut() {
            let n = s.len() / 2;
            for i in 0..n {
                let (a, b) = (s[2 * i], s[2 * i + 1]);
                s[i] = match self.merge {
                    Merge::Mean => (a + b) / 2.0,
                    Merge::Max => a.max(b),
                };
            }
            s.truncate(n);
        }
    }

    /// Heap bytes held by the values.
    pub fn heap_bytes(&self) -> usize {
        self.series
            .values()
            .map(|s| s.capacity() * 4 + 48)
            .sum::<usize>()
    }
}

/// What the sampler keeps.
#[derive(Debug)]
pub struct Series {
    /// Off: no buckets are ever closed.
    pub enabled: bool,
    /// The width of every closed bucket but possibly the last.
    pub interval: SimTime,
    pub cap: usize,
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
    prev_marks: Vec<u64>,
    prev_cnps: Vec<u64>,
    prev_sent: Vec<u64>,
}

impl Series {
    pub fn new(interval: Option<SimTime>, cap: usize, ports: usize, tracked_qps: usize) -> Series {
        let enabled = interval.is_some();
        let n = if enabled { ports } else { 0 };
        let q = if enabled { tracked_qps } else { 0 };
        Series {
            enabled,
            interval: interval.unwrap_or(SimTime::MAX),
            cap: cap.max(2) & !1,
            points: 0,
            last: SimTime::ZERO,
            link_util: Group::new(Merge::Mean),
            queue_depth: Group::new(Merge::Max),
            pfc_paused: Group::new(Merge::Mean),
            ecn_marks: Group::new(Merge::Mean),
            cnps: Group::new(Merge::Mean),
            qp_send: Group::new(Merge::Mean),
            qp_dcqcn: Group::new(Merge::Mean),
            cnp_count: vec![0; n],
            qp_sent: vec![0; q],
            prev_busy: vec![0; n],
            prev_paused: vec![0; n * QUEUES],
            prev_marks: vec![0; n],
            prev_cnps: vec![0; n],
            prev_sent: vec![0; q],
        }
    }

    fn groups_mut(&mut self) -> [&mut Group; 7] {
        [
            &mut self.link_util,
            &mut self.queue_depth,
            &mut self.pfc_paused,
            &mut self.ecn_marks,
            &mut self.cnps,
            &mut self.qp_send,
            &mut self.qp_dcqcn,
        ]
    }

    pub fn groups(&self) -> [&Group; 7] {
        [
            &self.link_util,
            &self.queue_depth,
            &self.pfc_paused,
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
        if self.series.points == self.series.cap {
            for g in self.series.groups_mut() {
                g.halve();
            }
            self.series.points /= 2;
            self.series.interval = SimTime(self.series.interval.0.saturating_mul(2));
        }
        let next = SimTime(self.now.0.saturating_add(self.series.interval.0));
        self.queue.push(next, super::Event::Sample);
    }

    /// Closes the last, possibly shorter, bucket when the run ends.
    pub fn finish_series(&mut self) {
        if self.series.enabled && self.now > self.series.last {
            self.close_bucket();
        }
    }

    fn close_bucket(&mut self) {
        let now = self.now;
        let dt = now.saturating_sub(self.series.last).0.max(1) as f64;
        let per_s = 1e12 / dt;
        let b = self.series.points;
        let cap = self.series.cap;
        let s = &mut self.series;
        for (i, port) in self.ports.iter().enumerate() {
            // The frame on the wire counts only up to now.
            let busy = port.busy_ps - port.busy_until.saturating_sub(now).0.min(port.busy_ps);
            let d = busy.saturating_sub(s.prev_busy[i]);
            s.prev_busy[i] = busy;
            s.link_util
                .push(i as u32, b, cap, (d as f64 / dt).min(1.0) as f32);
        }
        for (i, owner) in self.owners.iter().enumerate() {
            let qs = &mut self.queues[i];
            if matches!(owner, Owner::Switch(_)) {
                let mut marks = 0;
                for q in 0..QUEUES {
                    let depth = qs.queue_bytes(q as u8);
                    let st = &mut qs.stats[q];
                    marks += st.ecn_marks;
                    let deepest = st.window_max;
                    st.window_max = depth;
                    let key = (i * QUEUES + q) as u32;
                    s.queue_depth.push(key, b, cap, deepest as f32);
                }
                let d = marks - s.prev_marks[i];
                s.prev_marks[i] = marks;
                s.ecn_marks
                    .push(i as u32, b, cap, (d as f64 * per_s) as f32);
            } else {
                let c = s.cnp_count[i];
                let d = c - s.prev_cnps[i];
                s.prev_cnps[i] = c;
                s.cnps.push(i as u32, b, cap, (d as f64 * per_s) as f32);
            }
        }
        for (prio, &slot) in self.pfc_slot.iter().enumerate() {
            if slot == super::NO_SLOT {
                continue;
            }
            for i in 0..self.ports.len() {
                let paused = self.paused_ps(i * self.pfc_slots + slot as usize);
                let s = &mut self.series;
                let key = i * QUEUES + prio;
                let d = paused.saturating_sub(s.prev_paused[key]);
                s.prev_paused[key] = paused;
                let v = (d as f64 / dt).min(1.0) as f32;
                s.pfc_paused.push(key as u32, b, cap, v);
            }
        }
        let params = &self.scenario.transport.dcqcn;
        let s = &mut self.series;
        for q in 0..s.qp_sent.len() {
            let d = s.qp_sent[q] - s.prev_sent[q];
            s.prev_sent[q] = s.qp_sent[q];
            s.qp_send
                .push(q as u32, b, cap, (d as f64 * 8.0 * per_s) as f32);
            let qp = &self.qps[q];
            if let RateControl::Dcqcn(d) = &qp.req.rate {
                if !qp.req.is_done() || s.qp_dcqcn.series.contains_key(&(q as u32)) {
                    // A copy: replaying timers in other steps would round
                    // differently and change the run.
                    let bps = d.clone().rate_at(now, params);
                    s.qp_dcqcn.push(q as u32, b, cap, bps as f32);
                }
            }
        }
        s.points += 1;
        let points = s.points;
        for g in s.groups_mut() {
            g.pad(points);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halving_keeps_means_and_maxima() {
        let mut g = Group::new(Merge::Mean);
        for (b, v) in [1.0, 3.0, 0.0, 2.0].into_iter().enumerate() {
            g.push(7, b, 4, v);
        }
        g.halve();
        assert_eq!(g.series[&7], vec![2.0, 1.0]);
        let mut g = Group::new(Merge::Max);
        for (b, v) in [1.0, 3.0, 0.0, 2.0].into_iter().enumerate() {
            g.push(7, b, 4, v);
        }
        g.halve();
        assert_eq!(g.series[&7], vec![3.0, 2.0]);
    }

    #[test]
    fn a_series_starts_when_it_is_first_non_zero() {
        let mut g = Group::new(Merge::Mean);
        g.push(1, 0, 8, 0.0);
        g.push(1, 1, 8, 0.0);
        assert!(g.series.is_empty());
        g.push(1, 2, 8, 5.0);
        g.push(1, 3, 8, 0.0);
        assert_eq!(g.series[&1], vec![0.0, 0.0, 5.0, 0.0]);
    }
}
