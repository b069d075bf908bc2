//! The pending-event queue, ordered by (time, sequence).
//!
//! The sequence number is assigned at scheduling, so events due at the same
//! picosecond run in the order they were scheduled. That rule, not the data
//! structure, fixes the order of simultaneous events, which is what makes a
//! run deterministic.
//!
//! The structure is a calendar queue: a ring of 8192 buckets, each 2^14 ps
//! (about 16 ns) wide, covering the next ~134 us; events further out wait
//! in a binary heap and move into the ring as time advances. Almost every
//! event in a packet simulation is due within a few microseconds (a
//! serialization plus a propagation delay), so pushes are O(1) appends.
//! When the drain reaches a bucket, its entries (appended in sequence
//! order) are put in time order by a stable two-pass radix sort on the 14
//! bits of time inside the bucket: a few operations per event, against a
//! comparison sort's log of the bucket's size. An event scheduled into the
//! bucket already being drained (an ACK's short serialization, a zero
//! delay) goes to a small heap beside it instead of being inserted into
//! the sorted entries.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::units::SimTime;

/// An event in the ring. It needs no sequence number: a bucket's entries
/// are in scheduling order (see `advance`), and a stable sort keeps it.
#[derive(Clone, Copy)]
struct Entry<E> {
    time: u64,
    event: E,
}

/// An event in one of the heaps, which order by (time, sequence).
#[derive(Clone, Copy)]
struct Keyed<E> {
    time: u64,
    seq: u64,
    event: E,
}

impl<E> Keyed<E> {
    #[inline]
    fn key(&self) -> (u64, u64) {
        (self.time, self.seq)
    }

    #[inline]
    fn entry(self) -> Entry<E> {
        Entry {
            time: self.time,
            event: self.event,
        }
    }
}

impl<E> PartialEq for Keyed<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl<E> Eq for Keyed<E> {}
impl<E> PartialOrd for Keyed<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Keyed<E> {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
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

/// Events of type `E` ordered by due time, then by scheduling order.
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
    /// sorted; popped in turn with `current`'s. Each was scheduled after
    /// every entry of `current`, so it goes after those due at its time.
    late: BinaryHeap<Keyed<E>>,
    far: BinaryHeap<Keyed<E>>,
    /// Drained bucket allocations, reused by the next bucket that fills,
    /// so memory follows the number of non-empty buckets, not the ring.
    spare: Vec<Vec<Entry<E>>>,
    /// The radix sort's second buffer.
    scratch: Vec<Entry<E>>,
    next_seq: u64,
    len: usize,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> EventQueue<E> {
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
            next_seq: 0,
            len: 0,
        }
    }

    #[inline]
    pub fn push(&mut self, at: SimTime, event: E) {
        self.len += 1;
        let b = at.0 >> SHIFT;
        if b > self.cur && b < self.cur + BUCKETS {
            self.push_ring(b, Entry { time: at.0, event });
            return;
        }
        let e = Keyed {
            time: at.0,
            seq: self.next_seq,
            event,
        };
        self.next_seq += 1;
        if b <= self.cur {
            self.late.push(e);
        } else {
            self.far.push(e);
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
    ///
    /// A bucket's entries are in (time, sequence) order once sorted
    /// stably on time: those moved in from the far heap come first, in
    /// heap order, and were all scheduled before any entry pushed into
    /// the bucket directly (an event goes to the far heap only while its
    /// bucket is beyond the ring, and is moved in by the advance that
    /// brings the bucket within reach, before anything else can be pushed
    /// there); the direct pushes follow in the order they were made.
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
                let t = self.far.peek().expect("len > 0").time;
                self.cur = t >> SHIFT;
            } else {
                self.cur += 1;
            }
            while self
                .far
                .peek()
                .is_some_and(|e| (e.time >> SHIFT) < self.cur + BUCKETS)
            {
                let e = self.far.pop().expect("peeked");
                self.push_ring(e.time >> SHIFT, e.entry());
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
            }
        }
        true
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        if !self.fill() {
            return None;
        }
        let e = match (self.current.get(self.head), self.late.peek()) {
            (Some(c), Some(l)) if l.time < c.time => self.late.pop().expect("peeked").entry(),
            (Some(c), _) => {
                let c = *c;
                self.head += 1;
                c
            }
            (None, _) => self.late.pop().expect("filled").entry(),
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
        let l = self.late.peek().map(|e| e.time);
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

    #[test]
    fn orders_by_time_then_schedule_order() {
        let mut q = EventQueue::new();
        q.push(SimTime(5), 'a');
        q.push(SimTime(3), 'b');
        q.push(SimTime(5), 'c');
        q.push(SimTime(3), 'd');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['b', 'd', 'a', 'c']);
    }

    /// Events at one time, some scheduled while it was beyond the ring and
    /// one after it came within reach, still run in scheduling order.
    #[test]
    fn far_and_near_events_at_one_time_keep_schedule_order() {
        let t = 200_000_000; // 200 us: beyond the ring at first
        let mut q = EventQueue::new();
        q.push(SimTime(t), "far-1");
        q.push(SimTime(t), "far-2");
        q.push(SimTime(10_000_000), "step");
        let mut order = Vec::new();
        while let Some((now, e)) = q.pop() {
            order.push(e);
            if e == "step" {
                if now.0 < t - 60_000_000 {
                    q.push(SimTime(now.0 + 10_000_000), "step");
                } else {
                    q.push(SimTime(t), "near");
                    q.push(SimTime(t - 1), "just-before");
                }
            }
        }
        let tail: Vec<&str> = order.into_iter().filter(|&e| e != "step").collect();
        assert_eq!(tail, vec!["just-before", "far-1", "far-2", "near"]);
    }

    /// Random pushes (near, same-time, far beyond the ring) interleaved
    /// with pops come out exactly in (time, sequence) order.
    #[test]
    fn matches_a_sorted_reference_under_random_use() {
        check_against_reference(20_000, 3, |rng| match rng.below(10) {
            0 => 0,
            1 => rng.below(1 << 40),
            2 => rng.below(1 << 30),
            _ => rng.below(1 << 20),
        });
    }

    /// Hundreds of events per bucket (the radix sort's case), many at the
    /// same picosecond, some into the bucket being drained.
    #[test]
    fn dense_buckets_keep_time_then_schedule_order() {
        check_against_reference(40_000, 40, |rng| match rng.below(8) {
            0 => 0,
            1 => rng.below(64),
            2 => rng.below(1 << 14) & !0xff,
            3 => rng.below(1 << 28),
            _ => rng.below(1 << 17),
        });
    }

    fn check_against_reference(rounds: u32, max_pushes: u64, dt: impl Fn(&mut Stream) -> u64) {
        let mut rng = Streams::new(42).stream("queue-test");
        let mut q = EventQueue::new();
        let mut reference: Vec<(u64, u64)> = Vec::new();
        let mut seq = 0u64;
        let mut now = 0u64;
        let mut popped = Vec::new();
        for _ in 0..rounds {
            let pushes = rng.below(max_pushes);
            for _ in 0..pushes {
                let t = now + dt(&mut rng);
                q.push(SimTime(t), seq);
                reference.push((t, seq));
                seq += 1;
            }
            for _ in 0..rng.below(max_pushes + 1) {
                if let Some((t, s)) = q.pop() {
                    assert!(t.0 >= now, "time ran backwards");
                    now = t.0;
                    popped.push((t.0, s));
                }
            }
        }
        while let Some((t, s)) = q.pop() {
            popped.push((t.0, s));
        }
        // Popping interleaved with pushing is a merge of sorted runs; the
        // whole output must still be exactly the reference when no push
        // lands in the past, which holds since every push is >= now.
        reference.sort();
        assert_eq!(popped, reference);
        assert!(q.is_empty());
    }
}
