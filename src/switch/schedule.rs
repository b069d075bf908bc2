//! Egress scheduling: eight FIFO priority queues per port plus a control
//! slot for PFC frames. Control frames go first; then strict-priority
//! queues, highest first; then the other queues by deficit round robin,
//! each getting its "bandwidth remaining percent" of what strict priority
//! leaves. A queue paused by PFC is skipped until its pause expires or a
//! resume arrives; queues with weight 0 are served only when no weighted
//! queue has anything to send.

use std::collections::VecDeque;

use super::classify::QUEUES;
use super::ecn::Wred;
use crate::units::SimTime;
use crate::wire::frame::PREAMBLE_SFD_IFG;
use crate::wire::PacketId;

/// The queue index `Dequeued::Frame` reports for a PFC frame.
pub const CONTROL: u8 = QUEUES as u8;

/// No ingress port (the frame was made by this device).
pub const LOCAL: u32 = u32::MAX;

/// A queued frame: its packet, its size on the wire and the port it came
/// in on, kept here so that the transmitter never has to touch the packet
/// record to dequeue it.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct Queued {
    pub id: PacketId,
    pub wire_bytes: u32,
    pub ingress: u32,
}

/// Queue depths count the frame as buffered: destination MAC to FCS.
#[inline]
pub fn held(wire_bytes: u32) -> u32 {
    wire_bytes - PREAMBLE_SFD_IFG
}

/// How the queues of a port share it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Scheduler {
    /// Bit i set when queue i is strict priority.
    pub strict: u8,
    /// Deficit round robin quantum per queue, bytes; 0 = weight 0.
    pub quantum: [u32; QUEUES],
}

impl Scheduler {
    /// Quanta proportional to the percentages, the smallest one a whole
    /// `max_frame` so that every visit can send at least one frame.
    pub fn new(strict: u8, percent: [u32; QUEUES], max_frame: u32) -> Self {
        let min = percent
            .iter()
            .copied()
            .filter(|&p| p > 0)
            .min()
            .unwrap_or(1);
        Scheduler {
            strict,
            quantum: percent.map(|p| (p as u64 * max_frame as u64 / min as u64) as u32),
        }
    }
}

/// Counters of one egress queue, as reports read them.
#[derive(Clone, Copy, Debug, Default)]
pub struct QueueStats {
    pub max_bytes: u32,
    /// Frames that waited in the queue.
    pub enqueued: u64,
    /// Every frame the queue carried: those that waited and those that
    /// went straight onto an idle wire.
    pub frames: u64,
    pub ecn_marks: u64,
    /// Dropped at admission (buffer, headroom or WRED) while headed here.
    pub drops: u64,
    pub wred_drops: u64,
    /// Discarded by the PFC watchdog.
    pub watchdog_drops: u64,
    /// Data packets trimmed to their headers instead of dropped.
    pub trims: u64,
}

/// The counters of a queue that only marks and drops touch.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct QueueCounts {
    pub ecn_marks: u64,
    /// Dropped at admission (buffer, headroom or WRED) while headed here.
    pub drops: u64,
    pub wred_drops: u64,
    /// Discarded by the PFC watchdog.
    pub watchdog_drops: u64,
    /// Data packets trimmed to their headers instead of dropped.
    pub trims: u64,
}

/// One priority queue: its FIFO and everything an enqueue or a dequeue
/// updates, together in one cache line.
#[derive(Default, Debug, serde::Serialize, serde::Deserialize)]
#[repr(C, align(64))]
struct Fifo {
    frames: VecDeque<Queued>,
    bytes: u32,
    /// The largest depth since the time-series sampler last looked.
    window_max: u32,
    /// The largest depth ever.
    max_bytes: u32,
    deficit: u32,
    enqueued: u64,
    /// Frames sent at once on an idle port, without waiting (the line's
    /// spare eight bytes).
    direct: u64,
}

const _: () = assert!(std::mem::size_of::<Fifo>() == 64);

/// What the transmitter gets.
#[derive(Clone, Copy, Debug)]
pub enum Dequeued {
    /// A frame from this queue (`CONTROL` for PFC frames).
    Frame(Queued, u8),
    /// Frames wait, but every queue holding them is paused until at least
    /// this time.
    Blocked(SimTime),
    Empty,
}

/// Laid out by use: a first cache line with what every enqueue and
/// dequeue reads (masks, port totals), then one line per queue (its FIFO
/// header, depth and counters), then what only PFC, marking, round robin
/// among several queues and reports touch. A hop through one queue
/// touches two lines of this record.
#[derive(Default, Debug, serde::Serialize, serde::Deserialize)]
#[repr(C)]
pub struct EgressQueues {
    /// Bit i set when queue i is non-empty.
    nonempty: u8,
    /// Bit i set while queue i may be paused; `paused_until` says how long.
    paused: u8,
    /// Bit i set when queue i has WRED.
    pub wred_mask: u8,
    /// Strict-priority queues, and queues with a non-zero DRR weight.
    strict: u8,
    weighted: u8,
    current: u8,
    /// PFC frames waiting in `control`.
    n_control: u16,
    /// Bit i set when queue i is shaped (`shape_bps`).
    shaped: u8,
    /// ECN marks on this port, for the sampler (wraps; it takes
    /// differences). The per-queue totals are in `counts`.
    pub marks: u32,
    /// Bytes queued across all priorities.
    pub total_bytes: u64,
    /// Largest `total_bytes` seen.
    pub max_bytes: u64,
    fifo: [Fifo; QUEUES],
    control: VecDeque<Queued>,
    quantum: [u32; QUEUES],
    pub paused_until: [SimTime; QUEUES],
    pub counts: [QueueCounts; QUEUES],
    /// WRED per queue, inline: marking reads no other allocation.
    pub wred: [Option<Wred>; QUEUES],
    /// Shaped queues: their rate, and when each may send its next frame
    /// (a frame's time at that rate after the one before).
    shape_bps: [u64; QUEUES],
    shape_next: [SimTime; QUEUES],
}

impl EgressQueues {
    /// Queues scheduled by `sched`, with `wred` and at most `shape_bps`
    /// per queue where given.
    pub fn new(sched: Scheduler, wred: Vec<Wred>, shape_bps: [Option<u64>; QUEUES]) -> Self {
        let mut q = EgressQueues {
            strict: sched.strict,
            weighted: (0..QUEUES).fold(0u8, |m, i| m | (u8::from(sched.quantum[i] > 0) << i)),
            quantum: sched.quantum,
            ..Default::default()
        };
        for w in wred {
            q.wred_mask |= 1 << w.queue;
            let i = w.queue as usize;
            q.wred[i] = Some(w);
        }
        for (i, bps) in shape_bps.iter().enumerate() {
            if let Some(bps) = *bps {
                q.shaped |= 1 << i;
                q.shape_bps[i] = bps;
            }
        }
        q
    }

    /// Queues whose shaper lets them send at `now`.
    #[cold]
    #[inline(never)]
    fn unshaped(&self, now: SimTime) -> u8 {
        let mut held = 0;
        let mut m = self.shaped;
        while m != 0 {
            let q = m.trailing_zeros() as usize;
            m &= m - 1;
            if self.shape_next[q] > now {
                held |= 1 << q;
            }
        }
        !held
    }

    /// Whether queue `q`'s shaper holds its frames at `now`.
    #[inline]
    pub fn is_shaped(&self, q: u8, now: SimTime) -> bool {
        self.shaped & (1 << q) != 0 && self.shape_next[q as usize] > now
    }

    /// Whether some queue has a shaper.
    pub fn has_shapers(&self) -> bool {
        self.shaped != 0
    }

    /// A frame of queue `q` went out at `now`: its shaper's next time.
    #[cold]
    #[inline(never)]
    pub fn shaper_sent(&mut self, q: usize, wire_bytes: u32, now: SimTime) {
        if self.shaped & (1 << q) != 0 {
            let ps = (wire_bytes as u128 * 8_000_000_000_000).div_ceil(self.shape_bps[q] as u128);
            self.shape_next[q] = self.shape_next[q].max(now) + SimTime(ps as u64);
        }
    }

    /// When the first waiting queue may go: once its pause and its shaper
    /// allow.
    #[cold]
    #[inline(never)]
    fn blocked_until(&self, now: SimTime) -> SimTime {
        (0..QUEUES)
            .filter(|&q| self.nonempty & (1 << q) != 0)
            .map(|q| {
                let paused = self.paused & (1 << q) != 0;
                let p = if paused { self.paused_until[q] } else { now };
                let s = if self.shaped & (1 << q) != 0 {
                    self.shape_next[q]
                } else {
                    now
                };
                p.max(s)
            })
            .min()
            .unwrap_or(now)
    }

    /// Whether queue `q` has WRED.
    #[inline]
    pub fn has_wred(&self, q: u8) -> bool {
        self.wred_mask & (1 << q) != 0
    }

    #[inline]
    pub fn enqueue(&mut self, queue: u8, id: PacketId, wire_bytes: u32, ingress: u32) {
        let q = queue as usize;
        let bytes = held(wire_bytes);
        let f = &mut self.fifo[q];
        f.frames.push_back(Queued {
            id,
            wire_bytes,
            ingress,
        });
        f.bytes += bytes;
        f.max_bytes = f.max_bytes.max(f.bytes);
        f.window_max = f.window_max.max(f.bytes);
        f.enqueued += 1;
        self.total_bytes += bytes as u64;
        self.max_bytes = self.max_bytes.max(self.total_bytes);
        self.nonempty |= 1 << q;
    }

    /// Queues a PFC frame ahead of everything else.
    pub fn enqueue_control(&mut self, id: PacketId, wire_bytes: u32) {
        self.n_control += 1;
        self.control.push_back(Queued {
            id,
            wire_bytes,
            ingress: LOCAL,
        });
    }

    /// Queues not paused at `now` (expired pauses are cleared).
    #[inline]
    fn unpaused(&mut self, now: SimTime) -> u8 {
        let mut p = self.paused;
        while p != 0 {
            let q = p.trailing_zeros() as usize;
            p &= p - 1;
            if self.paused_until[q] <= now {
                self.paused &= !(1 << q);
            }
        }
        !self.paused
    }

    /// Whether queue `q` holds a frame that came in at `ingress`.
    pub fn holds_from(&self, q: u8, ingress: u32) -> bool {
        self.fifo[q as usize]
            .frames
            .iter()
            .any(|e| e.ingress == ingress)
    }

    /// Whether queue `q` has frames waiting.
    pub fn is_nonempty(&self, q: u8) -> bool {
        self.nonempty & (1 << q) != 0
    }

    /// The queues of `among` paused at `now` (a bit each).
    pub fn paused_among(&self, among: u8, now: SimTime) -> u8 {
        let mut held = 0;
        let mut m = self.paused & among;
        while m != 0 {
            let q = m.trailing_zeros() as usize;
            m &= m - 1;
            if self.paused_until[q] > now {
                held |= 1 << q;
            }
        }
        held
    }

    /// Whether queue `q` is paused at `now`.
    pub fn is_paused(&self, q: u8, now: SimTime) -> bool {
        self.paused & (1 << q) != 0 && self.paused_until[q as usize] > now
    }

    /// Pauses queue `q` until `until` (a resume passes `now`).
    pub fn pause(&mut self, q: u8, until: SimTime) {
        self.paused |= 1 << q;
        self.paused_until[q as usize] = until;
    }

    /// The next frame: control first, then strict priority, then DRR.
    #[inline(always)]
    pub fn dequeue(&mut self, now: SimTime) -> Dequeued {
        if self.n_control > 0 {
            self.n_control -= 1;
            let c = self.control.pop_front().expect("counted");
            return Dequeued::Frame(c, CONTROL);
        }
        if self.nonempty == 0 {
            return Dequeued::Empty;
        }
        let mut eligible = self.nonempty & self.unpaused(now);
        if self.shaped != 0 {
            eligible &= self.unshaped(now);
        }
        if eligible == 0 {
            return Dequeued::Blocked(self.blocked_until(now));
        }
        let strict = eligible & self.strict;
        let q = if strict != 0 {
            7 - strict.leading_zeros() as usize
        } else {
            self.drr_pick(eligible)
        };
        let f = &mut self.fifo[q];
        let e = f.frames.pop_front().expect("non-empty queue");
        let b = held(e.wire_bytes);
        f.bytes -= b;
        if f.deficit != 0 {
            f.deficit = f.deficit.saturating_sub(e.wire_bytes);
        }
        if f.frames.is_empty() {
            f.deficit = 0;
            self.nonempty &= !(1 << q);
        }
        self.total_bytes -= b as u64;
        if self.shaped & (1 << q) != 0 {
            self.shaper_sent(q, e.wire_bytes, now);
        }
        Dequeued::Frame(e, q as u8)
    }

    /// Deficit round robin among the eligible non-strict queues.
    #[inline(always)]
    fn drr_pick(&mut self, eligible: u8) -> usize {
        let weighted = self.weighted;
        let set = if eligible & weighted != 0 {
            eligible & weighted
        } else {
            eligible
        };
        if set.count_ones() == 1 {
            return set.trailing_zeros() as usize;
        }
        let floor = self.quantum.iter().copied().max().unwrap_or(0).max(9236);
        loop {
            let cur = self.current as usize;
            if cur < QUEUES && set & (1 << cur) != 0 {
                let f = &self.fifo[cur];
                let head = f.frames.front().expect("eligible").wire_bytes;
                if f.deficit >= head {
                    return cur;
                }
            }
            // Move to the next queue of the set, which gets its quantum.
            let next = (1..=QUEUES)
                .map(|d| (cur + d) % QUEUES)
                .find(|&q| set & (1 << q) != 0)
                .expect("set is non-empty");
            self.current = next as u8;
            let quantum = match self.quantum[next] {
                0 => floor,
                n => n,
            };
            self.fifo[next].deficit = self.fifo[next].deficit.saturating_add(quantum);
        }
    }

    /// A frame of queue `q` went straight onto the idle wire.
    #[inline]
    pub fn count_direct(&mut self, q: u8) {
        if let Some(f) = self.fifo.get_mut(q as usize) {
            f.direct += 1;
        }
    }

    /// Takes every frame out of every queue, the control slot too, each
    /// with its queue (`CONTROL` for the slot): a link that fails loses
    /// what waited for it.
    pub fn drain_all(&mut self) -> Vec<(Queued, u8)> {
        let mut out: Vec<(Queued, u8)> = self.control.drain(..).map(|e| (e, CONTROL)).collect();
        self.n_control = 0;
        for q in 0..QUEUES as u8 {
            out.extend(self.drain(q).into_iter().map(|e| (e, q)));
        }
        out
    }

    /// Takes every frame out of queue `q` (the watchdog drops them).
    pub fn drain(&mut self, q: u8) -> Vec<Queued> {
        let f = &mut self.fifo[q as usize];
        let out: Vec<Queued> = f.frames.drain(..).collect();
        self.total_bytes -= f.bytes as u64;
        f.bytes = 0;
        f.deficit = 0;
        self.nonempty &= !(1 << q);
        out
    }

    pub fn is_empty(&self) -> bool {
        self.nonempty == 0 && self.n_control == 0
    }

    #[inline]
    pub fn queue_bytes(&self, queue: u8) -> u32 {
        self.fifo[queue as usize].bytes
    }

    pub fn queue_len(&self, queue: u8) -> usize {
        self.fifo[queue as usize].frames.len()
    }

    /// The largest depth of queue `q` since the last call (the sampler's
    /// window), starting the next window at the present depth.
    #[inline]
    pub fn take_window_max(&mut self, q: usize) -> u32 {
        let f = &mut self.fifo[q];
        std::mem::replace(&mut f.window_max, f.bytes)
    }

    /// Where queue `q`'s line is, for prefetching; never dereferenced.
    #[inline]
    pub fn queue_line(&self, q: usize) -> *const u8 {
        (&self.fifo[q] as *const Fifo).cast()
    }

    /// Queue `q`'s counters.
    pub fn stats(&self, q: usize) -> QueueStats {
        let (f, c) = (&self.fifo[q], &self.counts[q]);
        QueueStats {
            max_bytes: f.max_bytes,
            enqueued: f.enqueued,
            frames: f.enqueued + f.direct,
            ecn_marks: c.ecn_marks,
            drops: c.drops,
            wred_drops: c.wred_drops,
            watchdog_drops: c.watchdog_drops,
            trims: c.trims,
        }
    }

    /// Frames waiting, control frames included.
    pub fn len(&self) -> usize {
        self.fifo.iter().map(|f| f.frames.len()).sum::<usize>() + self.control.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = PacketId> + '_ {
        self.fifo
            .iter()
            .flat_map(|f| f.frames.iter().map(|e| e.id))
            .chain(self.control.iter().map(|e| e.id))
    }

    /// Bytes of queued frames by the ingress port they came in on and
    /// their queue (for the PFC accounting invariant).
    pub fn iter_queued(&self) -> impl Iterator<Item = (u8, &Queued)> + '_ {
        self.fifo
            .iter()
            .enumerate()
            .flat_map(|(q, f)| f.frames.iter().map(move |e| (q as u8, e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(q: &mut EgressQueues, now: SimTime) -> Vec<u32> {
        std::iter::from_fn(|| match q.dequeue(now) {
            Dequeued::Frame(e, _) => Some(e.id.0),
            _ => None,
        })
        .collect()
    }

    fn strict7() -> EgressQueues {
        let mut pct = [0; QUEUES];
        pct[0] = 50;
        pct[3] = 50;
        EgressQueues::new(
            Scheduler::new(1 << 7, pct, 9236),
            Vec::new(),
            [None; QUEUES],
        )
    }

    #[test]
    fn control_then_strict_priority_then_fifo() {
        let mut q = strict7();
        q.enqueue(3, PacketId(2), 120, LOCAL);
        q.enqueue(7, PacketId(4), 120, LOCAL);
        q.enqueue_control(PacketId(9), 84);
        assert_eq!(ids(&mut q, SimTime::ZERO), vec![9, 4, 2]);
        assert_eq!(q.total_bytes, 0);
        assert_eq!(q.max_bytes, 200);
    }

    #[test]
    fn weighted_queues_share_by_their_percent() {
        let mut pct = [0; QUEUES];
        pct[0] = 25;
        pct[3] = 75;
        let mut q = EgressQueues::new(Scheduler::new(0, pct, 1000), Vec::new(), [None; QUEUES]);
        for i in 0..400 {
            q.enqueue(0, PacketId(i), 1000, LOCAL);
            q.enqueue(3, PacketId(1000 + i), 1000, LOCAL);
        }
        // Over the first 200 frames, three of every four come from queue 3.
        let first: Vec<u32> = ids(&mut q, SimTime::ZERO).into_iter().take(200).collect();
        let from3 = first.iter().filter(|&&i| i >= 1000).count();
        assert_eq!(from3, 150);
    }

    #[test]
    fn weight_zero_queue_only_when_others_are_idle() {
        let mut pct = [0; QUEUES];
        pct[3] = 100;
        let mut q = EgressQueues::new(Scheduler::new(0, pct, 1000), Vec::new(), [None; QUEUES]);
        q.enqueue(1, PacketId(1), 1000, LOCAL);
        q.enqueue(3, PacketId(2), 1000, LOCAL);
        q.enqueue(3, PacketId(3), 1000, LOCAL);
        assert_eq!(ids(&mut q, SimTime::ZERO), vec![2, 3, 1]);
    }

    #[test]
    fn paused_queue_is_skipped_until_it_expires() {
        let mut q = strict7();
        q.enqueue(3, PacketId(1), 1000, LOCAL);
        q.pause(3, SimTime(500));
        assert!(matches!(
            q.dequeue(SimTime(10)),
            Dequeued::Blocked(SimTime(500))
        ));
        // Other queues still go.
        q.enqueue(0, PacketId(2), 1000, LOCAL);
        assert_eq!(ids(&mut q, SimTime(10)), vec![2]);
        assert_eq!(ids(&mut q, SimTime(500)), vec![1]);
    }

    /// A shaped strict queue goes first only while its shaper allows:
    /// between its frames the weighted queue gets the wire, and when
    /// nothing else waits the port is blocked until the shaper's time.
    #[test]
    fn shaped_strict_queue_leaves_the_rest_to_the_others() {
        let mut pct = [0; QUEUES];
        pct[3] = 100;
        let mut shape = [None; QUEUES];
        // 1000 B frames at 8 Gb/s: one every 1000 ns.
        shape[7] = Some(8_000_000_000);
        let mut q = EgressQueues::new(Scheduler::new(1 << 7, pct, 1000), Vec::new(), shape);
        for i in 0..3 {
            q.enqueue(7, PacketId(i), 1000, LOCAL);
            q.enqueue(3, PacketId(10 + i), 1000, LOCAL);
        }
        let t = SimTime::from_ns;
        let take = |q: &mut EgressQueues, at: SimTime| match q.dequeue(at) {
            Dequeued::Frame(e, _) => Some(e.id.0),
            _ => None,
        };
        assert_eq!(take(&mut q, t(0)), Some(0));
        // The strict queue waits for its shaper; queue 3 goes meanwhile.
        assert_eq!(take(&mut q, t(100)), Some(10));
        assert_eq!(take(&mut q, t(200)), Some(11));
        assert_eq!(take(&mut q, t(1000)), Some(1));
        assert_eq!(take(&mut q, t(1100)), Some(12));
        assert!(matches!(q.dequeue(t(1200)), Dequeued::Blocked(b) if b == t(2000)));
        assert_eq!(take(&mut q, t(2000)), Some(2));
    }
}
