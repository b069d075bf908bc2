//! The pending-event queue, ordered by (time, key).
//!
//! An event's key comes from what it is (`Keyed::key`): its kind, then the
//! port, QP, task or host it is for. Events due at the same picosecond run
//! in key order. The key names no packet, arena slot or insertion count,
//! so every partitioning of the fabric computes the same keys and a run
//! cut into partitions handles each port's, QP's and task's events in the
//! order a single queue does: that rule, not the data structure, fixes the
//! order of simultaneous events, which is what makes a run deterministic at
//! any thread count. (An insertion counter shared by the whole run would
//! not do: partitions would count differently.) Two pending events with
//! the same time and key are either identical (a QP's timer set twice for
//! one instant), so that their order changes nothing, or impossible (two
//! frames arriving on one port at once: a link carries one at a time).
//!
//! The structure is a calendar queue: a ring of 8192 buckets, each 2^14 ps
//! (about 16 ns) wide, covering the next ~134 us; events further out wait
//! in a binary heap and move into the ring as time advances. Almost every
//! event in a packet simulation is due within a few microseconds (a
//! serialization plus a propagation delay), so pushes are O(1) appends.
//! When the drain reaches a bucket, its entries are put in time order by a
//! stable two-pass radix sort on the 14 bits of time inside the bucket (a
//! few operations per event, against a comparison sort's log of the
//! bucket's size), then each group of entries due at the same time is put
//! in key order. An event scheduled into the bucket already being drained
//! (an ACK's short serialization, a zero delay) goes to a small heap
//! beside it instead of being inserted into the sorted entries.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::units::SimTime;

/// What orders events due at the same time.
pub trait Keyed: Copy {
    fn key(&self) -> u32;
}

/// A pending event with its due time and key (worked out once, when it
/// is scheduled).
#[derive(Clone, Copy)]
struct Entry<E> {
    time: u64,
    key: u32,
    event: E,
}

impl<E> Entry<E> {
    #[inline]
    fn order(&self) -> (u64, u32) {
        (self.time, self.key)
    }
}

/// An entry in one of the heaps (a max-heap), earliest first.
#[derive(Clone, Copy)]
struct HeapEntry<E>(Entry<E>);

impl<E> PartialEq for HeapEntry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.0.order() == other.0.order()
    }
}
impl<E> Eq for HeapEntry<E> {}
impl<E> PartialOrd for HeapEntry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for HeapEntry<E> {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.order().cmp(&self.0.order())
    }
}

const SHIFT: u32 = 14;
const BUCKETS: u64 = 8192;
/// The radix sort's digit: two passes of 7 bits cover the 14 bits of time
/// inside a bucket.
const DIGIT: u32 = 7;
const RADIX: usize = 1 << DIGIT;
/// Below this many entries an insertion sort is cheaper than two passes.
const SMALL: usize = 24;

/// Events of type `E` ordered by due time, then by key.
pub struct EventQueue<E> {
    ring: Vec<Vec<Entry<E>>>,
    /// Entries held in `ring`.
    in_ring: usize,
    /// Absolute index (time >> SHIFT) of the bucket being drained.
    cur: u64,
    /// That bucket's entries, sorted earliest first; `head` of them have
    /// been popped.
    current: Vec<Entry<E>>,
    head: usize,
    /// Entries scheduled into the bucket being drained after it was
    /// sorted; popped in turn with `current`'s.
    late: BinaryHeap<HeapEntry<E>>,
    far: BinaryHeap<HeapEntry<E>>,
    /// Drained bucket allocations, reused by the next bucket that fills,
    /// so memory follows the number of non-empty buckets, not the ring.
    spare: Vec<Vec<Entry<E>>>,
    /// The radix sort's second buffer.
    scratch: Vec<Entry<E>>,
    len: usize,
}

impl<E: Keyed> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Keyed> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            ring: (0..BUCKETS).map(|_| Vec::new()).collect(),
            in_ring: 0,
            cur: 0,
            current: Vec::new(),
            head: 0,
            late: BinaryHeap::new(),
            far: BinaryHeap::new(),
            spare: Vec::new(),
            scratch: Vec::new(),
            len: 0,
        }
    }

    /// Almost every push goes to a bucket of the ring that already holds
    /// room for it: that path is the only one inlined at the callers.
    #[inline(always)]
    pub fn push(&mut self, at: SimTime, event: E) {
        self.len += 1;
        let e = Entry {
            time: at.0,
            key: event.key(),
            event,
        };
        let b = at.0 >> SHIFT;
        if b.wrapping_sub(self.cur + 1) < BUCKETS - 1 {
            let slot = &mut self.ring[(b % BUCKETS) as usize];
            if slot.len() < slot.capacity() {
                slot.push(e);
                self.in_ring += 1;
                return;
            }
        }
        self.push_slow(b, e);
    }

    /// A push into a bucket with no room left, into the bucket being
    /// drained, or beyond the ring.
    #[cold]
    #[inline(never)]
    fn push_slow(&mut self, b: u64, e: Entry<E>) {
        if b > self.cur && b < self.cur + BUCKETS {
            self.push_ring(b, e);
        } else if b <= self.cur {
            self.late.push(HeapEntry(e));
        } else {
            self.far.push(HeapEntry(e));
        }
    }

    #[inline]
    fn push_ring(&mut self, bucket: u64, e: Entry<E>) {
        let slot = &mut self.ring[(bucket % BUCKETS) as usize];
        if slot.capacity() == 0 {
            if let Some(v) = self.spare.pop() {
                *slot = v;
            }
        }
        slot.push(e);
        self.in_ring += 1;
    }

    /// Makes `current` or `late` non-empty if any event is pending.
    #[inline]
    fn fill(&mut self) -> bool {
        self.head < self.current.len() || !self.late.is_empty() || self.advance()
    }

    /// Moves the drain to the next non-empty bucket and sorts it.
    #[inline(never)]
    fn advance(&mut self) -> bool {
        while self.head == self.current.len() {
            self.current.clear();
            self.head = 0;
            if self.len == 0 {
                return false;
            }
            if self.in_ring == 0 {
                // Nothing near: jump straight to the earliest far event.
                let t = self.far.peek().expect("len > 0").0.time;
                self.cur = t >> SHIFT;
            } else {
                self.cur += 1;
            }
            while self
                .far
                .peek()
                .is_some_and(|e| (e.0.time >> SHIFT) < self.cur + BUCKETS)
            {
                let e = self.far.pop().expect("peeked").0;
                self.push_ring(e.time >> SHIFT, e);
            }
            let slot = (self.cur % BUCKETS) as usize;
            if !self.ring[slot].is_empty() {
                let bucket = std::mem::take(&mut self.ring[slot]);
                let drained = std::mem::replace(&mut self.current, bucket);
                if drained.capacity() > 0 {
                    self.spare.push(drained);
                }
                self.in_ring -= self.current.len();
                sort_by_time(&mut self.current, &mut self.scratch);
                order_ties(&mut self.current);
            }
        }
        true
    }

    #[inline(always)]
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        if !self.fill() {
            return None;
        }
        let e = match (self.current.get(self.head), self.late.peek()) {
            (Some(c), Some(l)) if l.0.order() < c.order() => self.late.pop().expect("peeked").0,
            (Some(c), _) => {
                let c = *c;
                self.head += 1;
                c
            }
            (None, _) => self.late.pop().expect("filled").0,
        };
        self.len -= 1;
        Some((SimTime(e.time), e.event))
    }

    /// An event after the one just popped, if it is in the bucket being
    /// drained (for prefetching what it will touch; a late entry may come
    /// first).
    #[inline]
    pub fn peek_next_in_bucket(&self, ahead: usize) -> Option<&E> {
        self.current.get(self.head + ahead).map(|e| &e.event)
    }

    #[inline]
    pub fn peek_time(&mut self) -> Option<SimTime> {
        if !self.fill() {
            return None;
        }
        let c = self.current.get(self.head).map(|e| e.time);
        let l = self.late.peek().map(|e| e.0.time);
        match (c, l) {
            (Some(c), Some(l)) => Some(SimTime(c.min(l))),
            (Some(t), None) | (None, Some(t)) => Some(SimTime(t)),
            (None, None) => None,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Puts each group of entries due at the same time (already sorted by
/// time) in key order, stably.
#[inline]
fn order_ties<E: Copy>(v: &mut [Entry<E>]) {
    let mut i = 0;
    while i + 1 < v.len() {
        if v[i].time != v[i + 1].time {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        let mut sorted = v[i].key <= v[j].key;
        while j + 1 < v.len() && v[j + 1].time == v[i].time {
            sorted &= v[j].key <= v[j + 1].key;
            j += 1;
        }
        if !sorted {
            sort_by_key(&mut v[i..=j]);
        }
        i = j + 1;
    }
}

/// Sorts entries by key. A group is mostly a few runs already in key
/// order (the events one instant's handling scheduled, in the order it
/// handled them): a large one goes to the standard library's stable sort,
/// which finds those runs and merges them, where an unstable sort of
/// (key, position) pairs took twice the instructions on
/// `fat-tree-k16-permutation` (see BENCHMARKS.md).
fn sort_by_key<E: Copy>(v: &mut [Entry<E>]) {
    if v.len() <= SMALL {
        // Equal keys are identical events (see the module's note), so an
        // unstable sort is as good as a stable one.
        v.sort_unstable_by_key(|e| e.key);
    } else {
        v.sort_by_key(|e| e.key);
    }
}

/// Sorts one bucket's entries stably by their time inside the bucket.
fn sort_by_time<E: Copy>(v: &mut [Entry<E>], scratch: &mut Vec<Entry<E>>) {
    let n = v.len();
    if n <= SMALL {
        for i in 1..n {
            let e = v[i];
            let mut j = i;
            while j > 0 && v[j - 1].time > e.time {
                v[j] = v[j - 1];
                j -= 1;
            }
            v[j] = e;
        }
        return;
    }
    let mask = (1u64 << SHIFT) - 1;
    let low = |e: &Entry<E>| ((e.time & mask) as usize) & (RADIX - 1);
    let high = |e: &Entry<E>| ((e.time & mask) as usize) >> DIGIT;
    let mut counts = [[0u32; RADIX]; 2];
    for e in v.iter() {
        counts[0][low(e)] += 1;
        counts[1][high(e)] += 1;
    }
    if scratch.len() < n {
        scratch.resize(n, v[0]);
    }
    let scratch = &mut scratch[..n];
    // A digit all entries share needs no pass.
    let pass0 = !counts[0].contains(&(n as u32));
    let pass1 = !counts[1].contains(&(n as u32));
    if !pass0 && !pass1 {
        return;
    }
    if pass0 {
        scatter(v, scratch, &mut counts[0], low);
    } else {
        scratch.copy_from_slice(v);
    }
    if pass1 {
        scatter(scratch, v, &mut counts[1], high);
    } else {
        v.copy_from_slice(scratch);
    }
}

/// One stable counting-sort pass of `from` into `to` on `digit`.
#[inline]
fn scatter<E: Copy>(
    from: &[Entry<E>],
    to: &mut [Entry<E>],
    counts: &mut [u32; RADIX],
    digit: impl Fn(&Entry<E>) -> usize,
) {
    let mut at = 0u32;
    for c in counts.iter_mut() {
        let k = *c;
        *c = at;
        at += k;
    }
    for e in from {
        let d = digit(e);
        to[counts[d] as usize] = *e;
        counts[d] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Stream, Streams};
    use std::collections::BTreeMap;

    /// A test event is its own key.
    impl Keyed for u32 {
        fn key(&self) -> u32 {
            *self
        }
    }

    fn drain(q: &mut EventQueue<u32>) -> Vec<(u64, u32)> {
        std::iter::from_fn(|| q.pop().map(|(t, e)| (t.0, e))).collect()
    }

    #[test]
    fn orders_by_time_then_key() {
        let mut q = EventQueue::new();
        for (t, k) in [(5, 9), (3, 4), (5, 1), (3, 2)] {
            q.push(SimTime(t), k);
        }
        assert_eq!(drain(&mut q), vec![(3, 2), (3, 4), (5, 1), (5, 9)]);
    }

    /// Events at one time, some scheduled while it was beyond the ring and
    /// some after it came within reach, run in key order whatever order
    /// they were scheduled in.
    #[test]
    fn far_and_near_events_at_one_time_run_in_key_order() {
        let t = 200_000_000; // 200 us: beyond the ring at first
        let step = 1_000;
        let mut q = EventQueue::new();
        q.push(SimTime(t), 30);
        q.push(SimTime(t), 10);
        q.push(SimTime(10_000_000), step);
        let mut order = Vec::new();
        while let Some((now, e)) = q.pop() {
            if e == step {
                if now.0 < t - 60_000_000 {
                    q.push(SimTime(now.0 + 10_000_000), step);
                } else {
                    q.push(SimTime(t), 20);
                    q.push(SimTime(t), 5);
                    q.push(SimTime(t - 1), 40);
                }
            } else {
                order.push(e);
            }
        }
        assert_eq!(order, vec![40, 5, 10, 20, 30]);
    }

    /// Random pushes (near, same-time, far beyond the ring) interleaved
    /// with pops come out exactly in (time, key) order.
    #[test]
    fn matches_a_sorted_reference_under_random_use() {
        check_against_reference(20_000, 3, 1 << 20, |rng| match rng.below(10) {
            0 => 0,
            1 => rng.below(1 << 40),
            2 => rng.below(1 << 30),
            _ => rng.below(1 << 20),
        });
    }

    /// Hundreds of events per bucket (the radix sort's case), many at the
    /// same picosecond with keys in no order, some into the bucket being
    /// drained, some with equal keys (identical events).
    #[test]
    fn dense_buckets_keep_time_then_key_order() {
        for keys in [4, 300, u32::MAX] {
            check_against_reference(20_000, 40, keys, |rng| match rng.below(8) {
                0 => 0,
                1 => rng.below(64),
                2 => rng.below(1 << 14) & !0xff,
                3 => rng.below(1 << 28),
                _ => rng.below(1 << 17) & !0x3ff,
            });
        }
    }

    /// Drives the queue and a reference ordered multiset side by side:
    /// every pop must be the reference's least pending (time, key).
    fn check_against_reference(
        rounds: u32,
        max_pushes: u64,
        keys: u32,
        dt: impl Fn(&mut Stream) -> u64,
    ) {
        let mut rng = Streams::new(42).stream("queue-test");
        let mut q = EventQueue::new();
        let mut pending: BTreeMap<(u64, u32), u32> = BTreeMap::new();
        let mut now = 0u64;
        let pop = |q: &mut EventQueue<u32>, pending: &mut BTreeMap<(u64, u32), u32>| {
            let got = q.pop().map(|(t, k)| (t.0, k));
            let want = pending.first_entry().map(|mut e| {
                *e.get_mut() -= 1;
                if *e.get() == 0 {
                    e.remove_entry().0
                } else {
                    *e.key()
                }
            });
            assert_eq!(got, want);
            got
        };
        for _ in 0..rounds {
            for _ in 0..rng.below(max_pushes) {
                let t = now + dt(&mut rng);
                let k = rng.below(u64::from(keys)) as u32;
                q.push(SimTime(t), k);
                *pending.entry((t, k)).or_default() += 1;
            }
            for _ in 0..rng.below(max_pushes + 1) {
                if let Some((t, _)) = pop(&mut q, &mut pending) {
                    assert!(t >= now, "time ran backwards");
                    now = t;
                }
            }
        }
        while pop(&mut q, &mut pending).is_some() {}
        assert!(q.is_empty());
    }
}
