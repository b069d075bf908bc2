//! The flow level's congestion control, for QPs under a rate controller
//! (DCQCN): their sending rates, the switch ports' virtual queues, marks
//! and the rates the queues let through (see the parent's docs).
//!
//! Every change is local: a sub-flow that starts, ends or changes rate
//! changes the sending rates at its NIC port and PCIe, the demand on its
//! switch ports, and the rates of the sub-flows through those; nothing
//! else is worked out again.

use super::Fluid;
use crate::topology::{PortId, QpId};
use crate::units::SimTime;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How often marks are counted while a queue holds bytes. Each QP takes
/// up to one CNP per rate-decrease interval of it. Ticks of 5 and 20 us
/// moved the examples' errors by a few percent; 10 us ran the k = 16
/// permutation twice as fast as 4 us.
pub const TICK: SimTime = SimTime::from_us(10);

/// WRED with ECN on a port's data queue, in bytes of depth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Marking {
    pub min: f64,
    pub max: f64,
    pub pmax: f64,
}

impl Marking {
    /// The probability a packet is marked at depth `q`.
    fn p(&self, q: f64) -> f64 {
        if q < self.min {
            0.0
        } else if q >= self.max {
            1.0
        } else {
            self.pmax * (q - self.min) / (self.max - self.min).max(1.0)
        }
    }
}

/// One switch port's virtual queue: its depth at `since`, and the rate its
/// senders put into it (bytes per picosecond).
#[derive(Clone, Copy, Debug, Default)]
struct VQueue {
    q: f64,
    since: SimTime,
    demand: f64,
}

/// The state of congestion control over the fluid network.
pub(super) struct Cc {
    /// By port: its marking, if it marks; whether it is a NIC's (its
    /// senders share it as they send; it holds no queue of its own).
    marking: Vec<Option<Marking>>,
    sender: Vec<bool>,
    /// The most a queue holds (the switch's buffer).
    limit: f64,
    queues: Vec<VQueue>,
    /// Ports whose queue holds bytes or whose senders exceed them.
    hot: Vec<u32>,
    is_hot: Vec<bool>,
    /// Wire bytes of a full data packet (marks are counted per packet).
    packet: f64,
    /// When marks were last counted; by port, the probability of a mark
    /// over the last interval (while a tick counts them).
    last_tick: SimTime,
    p: Vec<f64>,
    /// By resource: the rate level its senders share it at, and the
    /// epoch of the share that worked it out.
    level: Vec<(f64, u32)>,
    /// Scratch: what each sender of a resource wants, and its weight.
    want: Vec<(f64, f64)>,
    /// When a QP's rate next moves by itself: (time, sub-flow, QP).
    recover: BinaryHeap<Reverse<(SimTime, u32, u32)>>,
    ticks: u64,
}

/// What a tick found for one sub-flow under a rate controller.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tick {
    pub id: u32,
    pub qp: QpId,
    /// How many CNPs its marked packets brought back since the last tick
    /// (at most one per `cnp_gap` of it), and the wire bytes it sent.
    pub cnps: u32,
    pub sent: u64,
}

impl Cc {
    /// Port `r`'s queue brought up to `now` at its senders' rate against
    /// its capacity `cap` (bytes per picosecond).
    fn advance(&mut self, r: u32, cap: f64, now: SimTime) {
        let v = &mut self.queues[r as usize];
        let dt = now.0.saturating_sub(v.since.0) as f64;
        v.since = now;
        if dt > 0.0 {
            v.q = (v.q + (v.demand - cap) * dt).clamp(0.0, self.limit);
        }
    }

    /// Whether port `r` (of capacity `cap`) sets the pace of what goes
    /// through it: its queue holds bytes or its senders exceed it.
    fn busy(&self, r: u32, cap: f64) -> bool {
        let v = &self.queues[r as usize];
        v.q > 0.0 || v.demand > cap * (1.0 + 1e-9)
    }

    /// Port `r` is listed for ticks if it is busy; the first busy port
    /// starts the interval the next tick counts marks over.
    fn heat(&mut self, r: u32, cap: f64, now: SimTime) {
        if !self.is_hot[r as usize] && self.busy(r, cap) {
            if self.hot.is_empty() {
                self.last_tick = now;
            }
            self.is_hot[r as usize] = true;
            self.hot.push(r);
        }
    }
}

impl Fluid {
    /// Congestion control from now on: ports mark as `marking` says (by
    /// port), NIC ports (`sender`) are shared as their senders send, the
    /// other ports queue up to `limit` bytes, and marks count per data
    /// packet of `packet` wire bytes.
    pub fn enable_cc(
        &mut self,
        marking: Vec<Option<Marking>>,
        sender: Vec<bool>,
        limit: f64,
        packet: f64,
    ) {
        let n = marking.len();
        self.cc = Some(Box::new(Cc {
            marking,
            sender,
            limit,
            queues: vec![VQueue::default(); n],
            hot: Vec::new(),
            is_hot: vec![false; n],
            packet: packet.max(1.0),
            last_tick: SimTime::ZERO,
            p: vec![0.0; n],
            level: vec![(0.0, 0); self.cap.len()],
            want: Vec::new(),
            recover: BinaryHeap::new(),
            ticks: 0,
        }));
    }

    /// Whether a port's queue holds bytes or is filling: ticks are due.
    pub fn hot(&self) -> bool {
        self.cc.as_ref().is_some_and(|cc| !cc.hot.is_empty())
    }

    /// How many ticks counted marks (`perf.json`).
    pub fn cc_ticks(&self) -> u64 {
        self.cc.as_ref().map_or(0, |cc| cc.ticks)
    }

    /// Whether resource `r` is one its senders share as they send (a NIC
    /// port or PCIe) rather than a switch port that queues.
    fn sends(&self, r: u32) -> bool {
        r >= self.ports || self.cc.as_ref().is_some_and(|cc| cc.sender[r as usize])
    }

    /// Sub-flow `id`'s QP now sends at `rate` (wire bytes per picosecond)
    /// and moves by itself next at `next`: what it sends is worked out
    /// anew at the next share.
    pub fn set_cc_rate(&mut self, id: u32, rate: f64, next: Option<SimTime>) {
        let s = &mut self.subs[id as usize];
        let qp = s.qp.0;
        if s.cc_rate != rate {
            s.cc_rate = rate;
            for k in 0..self.subs[id as usize].uses.len() {
                let r = self.subs[id as usize].uses[k].0;
                if self.sends(r) {
                    self.dirty.push(r);
                }
            }
        }
        let s = &mut self.subs[id as usize];
        let next = next.unwrap_or(SimTime::MAX);
        if next != s.cc_next {
            s.cc_next = next;
            if next != SimTime::MAX {
                let cc = self.cc.as_mut().expect("congestion control");
                cc.recover.push(Reverse((next, id, qp)));
            }
        }
    }

    /// When the next tick is due: `interval` after `now` while a queue is
    /// busy, else when the first QP's rate moves by itself.
    pub fn cc_due(&mut self, now: SimTime, interval: SimTime) -> SimTime {
        let Some(cc) = self.cc.as_mut() else {
            return SimTime::MAX;
        };
        let subs = &self.subs;
        while let Some(&Reverse((t, id, qp))) = cc.recover.peek() {
            let s = &subs[id as usize];
            if s.live && s.cc && s.qp.0 == qp && s.cc_next == t {
                break;
            }
            cc.recover.pop();
        }
        let recover = cc.recover.peek().map_or(SimTime::MAX, |e| e.0 .0);
        if cc.hot.is_empty() {
            recover
        } else {
            recover.min(now + interval)
        }
    }

    /// The level at which resource `r`'s senders share it (wire bytes
    /// per picosecond of a unit-weight user): each sends what its own cap
    /// and QP's rate allow, those that want more share what is left.
    fn send_level(&mut self, r: u32, epoch: u32) -> f64 {
        let cc = self.cc.as_ref().expect("congestion control");
        let (level, at) = cc.level[r as usize];
        if at == epoch {
            return level;
        }
        let mut want = std::mem::take(&mut self.cc.as_mut().expect("congestion control").want);
        want.clear();
        want.extend(self.users[r as usize].iter().map(|&i| {
            let s = &self.subs[i as usize];
            let w = s.uses.iter().find(|u| u.0 == r).map_or(1.0, |u| u.1);
            (s.cap.min(s.cc_rate), w)
        }));
        want.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let (mut left, mut weight) = (self.cap[r as usize], want.iter().map(|u| u.1).sum::<f64>());
        let mut level = f64::INFINITY;
        for &(c, w) in &want {
            if c * weight <= left {
                left -= c * w;
                weight -= w;
            } else {
                level = left.max(0.0) / weight;
                break;
            }
        }
        let cc = self.cc.as_mut().expect("congestion control");
        cc.level[r as usize] = (level, epoch);
        cc.want = want;
        level
    }

    /// Port `r`'s queue brought up to `now`, holding no more than its
    /// sub-flows still have to deliver (a queue holds only their bytes:
    /// once the last of them is through, it is empty).
    fn advance_queue(&mut self, cc: &mut Cc, r: u32, now: SimTime) {
        cc.advance(r, self.cap[r as usize], now);
        let v = &mut cc.queues[r as usize];
        if v.q > 0.0 {
            let held: f64 = self.users[r as usize]
                .iter()
                .map(|&i| {
                    let s = &self.subs[i as usize];
                    let dt = now.0.saturating_sub(s.since.0) as f64;
                    (s.left - s.rate * dt).max(0.0)
                })
                .sum();
            v.q = v.q.min(held);
        }
    }

    /// The rate sub-flow `i` moves at: what it sends, scaled at each busy
    /// switch port on its path by the port's capacity over what its
    /// senders put in (a queue that fills passes its share of the port; a
    /// queue that drains passes more than it is sent), at most the
    /// narrowest port on its path.
    fn cc_rate_of(&self, i: u32) -> f64 {
        let cc = self.cc.as_ref().expect("congestion control");
        let s = &self.subs[i as usize];
        let (mut scale, mut narrowest) = (f64::INFINITY, s.cap);
        for &(r, w) in s.uses.iter().filter(|u| u.0 < self.ports) {
            let c = self.cap[r as usize];
            narrowest = narrowest.min(c / w);
            if !cc.sender[r as usize] && cc.busy(r, c) {
                let d = cc.queues[r as usize].demand;
                scale = scale.min(if d > 0.0 { c / d } else { f64::INFINITY });
            }
        }
        let rate = if scale.is_finite() {
            s.demand * scale
        } else {
            s.demand
        };
        rate.min(narrowest)
    }

    /// Rates anew around the resources that changed, under congestion
    /// control: the sending rates at the senders' resources that changed,
    /// the demand and queue of each switch port whose senders changed
    /// rate, and the rates of the sub-flows through those ports.
    pub(super) fn share_cc(&mut self, now: SimTime, sent: &mut impl FnMut(PortId, u64)) {
        let epoch = self.next_epoch();
        let dirty = std::mem::take(&mut self.dirty);
        let (mut senders, mut ports) = (Vec::new(), Vec::new());
        for r in dirty {
            if self.seen_res[r as usize] == epoch {
                continue;
            }
            self.seen_res[r as usize] = epoch;
            if self.sends(r) {
                senders.push(r);
            } else {
                ports.push(r);
            }
        }
        // What each sub-flow at a changed sender's resource sends.
        let mut moved: Vec<u32> = Vec::new();
        for &r in &senders {
            for k in 0..self.users[r as usize].len() {
                let i = self.users[r as usize][k];
                if self.seen_sub[i as usize] == epoch {
                    continue;
                }
                self.seen_sub[i as usize] = epoch;
                moved.push(i);
                let s = &self.subs[i as usize];
                let mut d = s.cap.min(s.cc_rate);
                for u in 0..s.uses.len() {
                    let r2 = self.subs[i as usize].uses[u].0;
                    if self.sends(r2) {
                        d = d.min(self.send_level(r2, epoch));
                    }
                }
                let s = &mut self.subs[i as usize];
                if s.demand != d {
                    s.demand = d;
                    for &(r2, _) in &s.uses {
                        if r2 < self.ports && self.seen_res[r2 as usize] != epoch {
                            self.seen_res[r2 as usize] = epoch;
                            ports.push(r2);
                        }
                    }
                }
            }
        }
        // The switch ports' queues, up to now at the demand they had, and
        // their demand from now on.
        let mut cc = self.cc.take().expect("congestion control");
        for &r in &ports {
            if cc.sender[r as usize] {
                continue;
            }
            let cap = self.cap[r as usize];
            self.advance_queue(&mut cc, r, now);
            cc.queues[r as usize].demand = self.users[r as usize]
                .iter()
                .map(|&i| {
                    let s = &self.subs[i as usize];
                    let w = s.uses.iter().find(|u| u.0 == r).map_or(1.0, |u| u.1);
                    s.demand * w
                })
                .sum();
            cc.heat(r, cap, now);
        }
        self.cc = Some(cc);
        // The sub-flows through them move at new rates.
        for &r in &ports {
            for k in 0..self.users[r as usize].len() {
                let i = self.users[r as usize][k];
                if self.seen_sub[i as usize] != epoch {
                    self.seen_sub[i as usize] = epoch;
                    moved.push(i);
                }
            }
        }
        for &i in &moved {
            self.settle(i, now, sent);
            let rate = self.cc_rate_of(i);
            self.subs[i as usize].rate = rate;
            self.due_at(i, now);
        }
        self.shares += 1;
        self.shared_subs += moved.len() as u64;
    }

    /// Counts marks up to `now` on the busy queues, and says for each sub-
    /// flow under a rate controller through them, or whose QP's rate
    /// moves by itself by now, how many CNPs came back (a whole mark each,
    /// at most one per `cnp_gap`) and what it sent since the last tick. A
    /// queue that has drained no longer sets the pace of the sub-flows
    /// through it, from the next share.
    pub fn tick(
        &mut self,
        now: SimTime,
        cnp_gap: SimTime,
        sent: &mut impl FnMut(PortId, u64),
    ) -> Vec<Tick> {
        let Some(mut cc) = self.cc.take() else {
            return Vec::new();
        };
        let since = cc.last_tick;
        let dt = now.0.saturating_sub(since.0) as f64;
        cc.last_tick = now;
        cc.ticks += 1;
        // Mark probabilities over the interval: the mean of its ends (the
        // depth moves linearly between shares).
        let hot = std::mem::take(&mut cc.hot);
        for &r in &hot {
            let cap = self.cap[r as usize];
            let m = cc.marking[r as usize];
            let before = m.map_or(0.0, |m| m.p(cc.queues[r as usize].q));
            self.advance_queue(&mut cc, r, now);
            let after = m.map_or(0.0, |m| m.p(cc.queues[r as usize].q));
            cc.p[r as usize] = (before + after) / 2.0;
            cc.is_hot[r as usize] = false;
            cc.heat(r, cap, now);
            if !cc.is_hot[r as usize] {
                self.dirty.push(r);
            }
        }
        let epoch = self.next_epoch();
        let mut out = Vec::new();
        for &r in &hot {
            for k in 0..self.users[r as usize].len() {
                let i = self.users[r as usize][k];
                let s = &self.subs[i as usize];
                if self.seen_sub[i as usize] == epoch || !s.cc {
                    continue;
                }
                self.seen_sub[i as usize] = epoch;
                let keep: f64 = s
                    .uses
                    .iter()
                    .filter(|u| u.0 < self.ports)
                    .map(|u| 1.0 - cc.p[u.0 as usize])
                    .product();
                self.settle(i, now, sent);
                let s = &mut self.subs[i as usize];
                let packets = s.rate * dt / cc.packet;
                // One CNP per gap at most: the slots since the last.
                let from = s.cnp_at.map_or(since, |t| (t + cnp_gap).max(since));
                let slots = if now < from {
                    0
                } else {
                    (1 + (now.0 - from.0) / cnp_gap.0.max(1)).min(64) as u32
                };
                s.marks = (s.marks + (1.0 - keep) * packets).min(f64::from(slots) + 1.0);
                let cnps = (s.marks.floor() as u32).min(slots);
                s.marks -= f64::from(cnps);
                if cnps > 0 {
                    s.cnp_at = Some(now);
                }
                out.push(self.tick_of(i, cnps));
            }
        }
        for &r in &hot {
            cc.p[r as usize] = 0.0;
        }
        while let Some(&Reverse((t, i, qp))) = cc.recover.peek() {
            if t > now {
                break;
            }
            cc.recover.pop();
            let s = &self.subs[i as usize];
            let valid = s.live && s.cc && s.qp.0 == qp && s.cc_next == t;
            if valid && self.seen_sub[i as usize] != epoch {
                self.seen_sub[i as usize] = epoch;
                self.settle(i, now, sent);
                out.push(self.tick_of(i, 0));
            }
        }
        self.cc = Some(cc);
        out
    }

    /// Sub-flow `i`'s part of a tick: its bytes sent since the last.
    fn tick_of(&mut self, i: u32, cnps: u32) -> Tick {
        let s = &mut self.subs[i as usize];
        let sent = (s.left_at_tick - s.left).max(0.0);
        s.left_at_tick = s.left;
        Tick {
            id: i,
            qp: s.qp,
            cnps,
            sent: sent.round() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fluid::Sub;
    use crate::topology::FlowId;

    /// Three ports of 1 byte per picosecond: ports 0 and 1 are two
    /// senders' NICs (they never queue), port 2 a switch port marking
    /// from 100 to 1,100 bytes, with certainty past the top; buffers of
    /// 10,000 bytes; packets of 10.
    fn fabric() -> Fluid {
        let mut f = Fluid::new([8e12 as u64; 3].into_iter(), 0, None);
        let mark = Marking {
            min: 100.0,
            max: 1_100.0,
            pmax: 1.0,
        };
        let marking = vec![None, None, Some(mark)];
        f.enable_cc(marking, vec![true, true, false], 10_000.0, 10.0);
        f
    }

    /// A sub-flow of `bytes` from NIC port `id` over the switch port, its
    /// QP at `rate`.
    fn sub(f: &mut Fluid, id: u32, bytes: u64, rate: f64) -> u32 {
        let uses = vec![(id, 1.0), (2, 1.0)];
        let mut s = Sub::new(FlowId(id), QpId(id), bytes, f64::INFINITY, uses);
        s.cc = true;
        s.cc_rate = rate;
        f.add(s, SimTime::ZERO)
    }

    /// Two QPs at the port's whole rate each: the port passes half of
    /// each, its queue fills at the port's rate, marks come once it is
    /// past the minimum and every QP hears of them.
    #[test]
    fn senders_past_a_port_fill_its_queue_and_are_marked() {
        let mut f = fabric();
        let a = sub(&mut f, 0, 1_000_000, 1.0);
        let b = sub(&mut f, 1, 1_000_000, 1.0);
        f.share(SimTime::ZERO, |_, _| {});
        assert_eq!((f.rate(a), f.rate(b)), (0.5, 0.5));
        assert!(f.hot());
        // 100 ps: 100 bytes queued, nothing marked yet.
        let t = f.tick(SimTime(100), SimTime(1), &mut |_, _| {});
        assert!(t.iter().all(|t| t.cnps == 0), "{t:?}");
        // 600 ps: 600 bytes, p from 0 to 0.5 over the interval; each QP
        // moved 250 bytes (25 packets of 10), about 6 of them marked.
        let t = f.tick(SimTime(600), SimTime(1), &mut |_, _| {});
        assert_eq!(t.len(), 2);
        for t in &t {
            assert_eq!(t.sent, 250);
            assert_eq!(t.cnps, 6, "{t:?}");
        }
        // At most one CNP per gap.
        let t = f.tick(SimTime(1_100), SimTime(250), &mut |_, _| {});
        assert!(t.iter().all(|t| t.cnps == 2), "{t:?}");
    }

    /// QPs cut below the port while its queue holds bytes: the port stays
    /// busy and passes them at its whole rate until the queue is empty,
    /// then they move at their own rates.
    #[test]
    fn a_draining_queue_keeps_its_port_busy() {
        let mut f = fabric();
        let a = sub(&mut f, 0, 1_000_000, 1.0);
        let b = sub(&mut f, 1, 1_000_000, 1.0);
        f.share(SimTime::ZERO, |_, _| {});
        f.tick(SimTime(1_000), SimTime(1), &mut |_, _| {});
        // 1,000 bytes queued; both cut to a quarter.
        f.set_cc_rate(a, 0.25, None);
        f.set_cc_rate(b, 0.25, None);
        f.share(SimTime(1_000), |_, _| {});
        assert_eq!((f.rate(a), f.rate(b)), (0.5, 0.5), "the port drains");
        // It drains at 0.5 a picosecond: empty by 3,000 ps.
        f.tick(SimTime(3_000), SimTime(1), &mut |_, _| {});
        assert!(!f.hot());
        f.share(SimTime(3_000), |_, _| {});
        assert_eq!((f.rate(a), f.rate(b)), (0.25, 0.25));
    }

    /// A queue holds only bytes its sub-flows still have to deliver: once
    /// the last has gone, it is empty and marks nothing.
    #[test]
    fn a_queue_empties_with_its_last_sub_flow() {
        let mut f = fabric();
        let a = sub(&mut f, 0, 600, 1.0);
        let b = sub(&mut f, 1, 600, 1.0);
        f.share(SimTime::ZERO, |_, _| {});
        // Both done at 1,200 ps (half the port each); the queue would
        // hold 1,200 bytes at the senders' rates.
        assert_eq!(f.next_due(), SimTime(1_200));
        for id in f.due_by(SimTime(1_200)) {
            f.finish(id, SimTime(1_200), &mut |_, _| {});
        }
        assert!(f.due_by(SimTime(1_200)).is_empty() && a != b);
        f.share(SimTime(1_200), |_, _| {});
        let t = f.tick(SimTime(1_210), SimTime(1), &mut |_, _| {});
        assert!(t.is_empty() && !f.hot());
    }
}
