//! The event loop: running to the end or to a time, the limits a caller
//! puts on a run, and how it tells a stuck run (a stall, a PFC deadlock)
//! from one that is only slow.

use super::{deadlock, prefetch_read, Event, IdleGaps, Progress, Simulation};
use crate::topology::Owner;
use crate::units::SimTime;

/// Why a run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StopReason {
    /// Nothing left to do.
    Finished,
    /// The `max_sim_time` limit was reached.
    SimTimeLimit,
    /// `run_until` reached its target.
    Paused,
    /// No transfer made progress for a long time (see `run`).
    Stalled,
    /// `Limits::max_events` events were handled.
    EventLimit,
    /// `Limits::max_wall` of wall-clock time went by.
    WallLimit,
    /// `Limits::interrupt` was raised (Ctrl-C or SIGTERM).
    Interrupted,
    /// The process grew past `Limits::max_memory`.
    MemoryLimit,
    /// A PFC deadlock: `Simulation::deadlock` holds the cycle.
    Deadlock,
}

impl StopReason {
    /// Whether the run stopped before its workload was done, because a
    /// limit or an interruption cut it short or because the simulated
    /// fabric stopped moving (a stall, a PFC deadlock): its results
    /// cover only the time until then.
    pub fn is_partial(self) -> bool {
        matches!(
            self,
            StopReason::SimTimeLimit
                | StopReason::EventLimit
                | StopReason::WallLimit
                | StopReason::Interrupted
                | StopReason::MemoryLimit
                | StopReason::Stalled
                | StopReason::Deadlock
        )
    }

    /// Whether the simulated workload itself could not finish (as
    /// opposed to a limit the user set): the run exits with its own
    /// status and a sweep point gets its own.
    pub fn is_stuck(self) -> bool {
        matches!(self, StopReason::Stalled | StopReason::Deadlock)
    }
}

/// Limits a caller puts on one run, beyond the scenario's own
/// `max_sim_time`. The event limit is exact; the wall-clock limit and
/// the interruption are checked between batches of events (a fraction of
/// a second apart), always at an event boundary, so the state is whole.
#[derive(Clone, Debug, Default)]
pub struct Limits {
    pub max_events: Option<u64>,
    pub max_wall: Option<std::time::Duration>,
    pub interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Stop once the process holds more than this many bytes, as the
    /// given reader measures it (the engine reads no operating-system
    /// state itself).
    pub max_memory: Option<(u64, fn() -> u64)>,
    /// In a run on threads: hand each partition's results over as the
    /// bytes an MPI rank sends (`run --encode-partitions`, which tests
    /// the MPI path's encoding on a machine without MPI).
    pub encode_partitions: bool,
}

/// Events handled between checks of the wall clock and of interruption.
const BATCH: u64 = 1 << 16;

impl Limits {
    /// The limit the run has reached that does not follow from what it
    /// simulates: an interruption, the wall clock (from `started`), and,
    /// with `memory` (it reads `/proc`: once a batch, not a window),
    /// memory.
    pub(crate) fn reached(&self, started: std::time::Instant, memory: bool) -> Option<StopReason> {
        if self
            .interrupt
            .as_ref()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
        {
            return Some(StopReason::Interrupted);
        }
        if self.max_wall.is_some_and(|w| started.elapsed() >= w) {
            return Some(StopReason::WallLimit);
        }
        if memory && self.max_memory.is_some_and(|(most, now)| now() > most) {
            return Some(StopReason::MemoryLimit);
        }
        None
    }
}

impl Simulation {
    /// Runs until nothing is left, or the scenario's `max_sim_time`.
    /// `progress` is called every 2^18 events.
    ///
    /// A run that waits on the network (some transfer started and not
    /// acknowledged) for a thousand watch intervals (`watch_interval`),
    /// and at least eight retransmission timeouts, of simulated time
    /// without delivering or acknowledging a single byte
    /// is stuck (say, a buffer too small for the incast it gets, or a
    /// dead link with no way around) and stops as `Stalled`.
    pub fn run(&mut self, progress: impl FnMut(&Progress)) -> StopReason {
        self.run_limited(&Limits::default(), progress)
    }

    /// As `run`, stopping early at any of `limits`.
    pub fn run_limited(&mut self, limits: &Limits, progress: impl FnMut(&Progress)) -> StopReason {
        let stop = self.run_to_end(limits, progress);
        self.runtime(|rt, k| rt.make_rest(k));
        self.fluid_stop();
        self.finish_series();
        self.close_idle();
        stop
    }

    /// The run ended: a long stretch since its last event of the model is
    /// idle too (in a partition, since its own last event).
    pub(super) fn close_idle(&mut self) {
        let due = self.records.idle.model_due();
        if self.now >= due {
            let last = SimTime(due.0 - IdleGaps::AT_LEAST.0);
            self.records.idle.gaps.push((last, self.now));
        }
    }

    /// The loop goes window by window, each as long as the watch
    /// interval of simulated time, starting at the next event (a window
    /// from `now` would hold no event when nothing is due for longer than
    /// a timeout, a long compute phase or a late start, and the loop would
    /// ask for the same empty window forever). What may stop the run for
    /// what the fabric does (a deadlock, a stall) is looked at between
    /// windows only, at times that follow from simulated time alone, never
    /// from how many events were handled: a run cut into partitions has its
    /// windows end at the same times. Inside a window, events go in batches
    /// between which only the wall clock, an interruption and memory are
    /// looked at.
    fn run_to_end(&mut self, limits: &Limits, mut progress: impl FnMut(&Progress)) -> StopReason {
        let limit = self.scenario.max_sim_time.unwrap_or(SimTime::MAX);
        let watch_every = self.watch_interval();
        let stall_after = self.stall_after();
        let started = std::time::Instant::now();
        let mut watch = deadlock::Watch::default();
        let mut delivered = (self.counters.bytes_delivered, self.now);
        // When the run last made progress, the bytes delivered then, and
        // the packets acknowledged and tasks done as last counted.
        let mut last = (self.now, self.counters.bytes_delivered, self.acked_mark());
        let mut shown_at_events = self.counters.events;
        loop {
            let from = self.queue.peek_time().map_or(self.now, |t| t.max(self.now));
            let until = limit.min(SimTime(from.0.saturating_add(watch_every.0)));
            loop {
                let batch = match limits.max_events {
                    Some(m) if self.counters.events >= m => return StopReason::EventLimit,
                    Some(m) => BATCH.min(m - self.counters.events),
                    None => BATCH,
                };
                match self.run_until(until, batch) {
                    StopReason::Paused if self.queue.peek_time().is_some_and(|t| t <= until) => {
                        if let Some(stop) = limits.reached(started, true) {
                            return stop;
                        }
                        if self.counters.events - shown_at_events >= 4 * BATCH {
                            shown_at_events = self.counters.events;
                            progress(&self.progress());
                        }
                    }
                    StopReason::Paused => break,
                    StopReason::Finished => {
                        self.now = self.now.min(limit);
                        return StopReason::Finished;
                    }
                    other => return other,
                }
            }
            // Also between windows: a window may hold fewer events than a
            // batch (the flow level has few, each costly), and a run made
            // of such windows must stop too.
            if let Some(stop) = limits.reached(started, false) {
                return stop;
            }
            if self.counters.events - shown_at_events >= 4 * BATCH {
                shown_at_events = self.counters.events;
                progress(&self.progress());
            }
            // A part that could not be made leaves tasks that wait for
            // it forever (a defect; `later_failed` says which).
            if self.later_failed().is_some() {
                return StopReason::Stalled;
            }
            if self.queue.peek_time().is_none_or(|t| t > limit) {
                // A workload done before the limit is finished, even when
                // its tail would have gone past it.
                return if self.queue.is_empty() || self.ending.finished_at.is_some() {
                    StopReason::Finished
                } else {
                    StopReason::SimTimeLimit
                };
            }
            // Nothing delivered for a watch interval: look for a PFC
            // cycle.
            if self.counters.bytes_delivered != delivered.0 {
                delivered = (self.counters.bytes_delivered, until);
                watch.clear();
            } else if until.saturating_sub(delivered.1) >= watch_every
                && self.deadlocked(&mut watch)
            {
                return StopReason::Deadlock;
            }
            // Only time spent waiting on the network counts towards a
            // stall: a long compute phase or a late start is not one.
            // (Bytes delivered are compared first: summing every QP's
            // acknowledged packets is needed only when none were.)
            let moved = if self.counters.bytes_delivered != last.1 {
                last.1 = self.counters.bytes_delivered;
                true
            } else {
                let mark = self.acked_mark();
                std::mem::replace(&mut last.2, mark) != mark
            };
            if moved || !self.network_waiting() {
                last.0 = until;
            } else if until.saturating_sub(last.0) > stall_after {
                return StopReason::Stalled;
            }
        }
    }

    /// How far the run has got, from 0 to 1, for progress display: the
    /// larger of the share of offered bytes delivered, the share of
    /// workload tasks done and, with a `max_sim_time`, the share of it
    /// elapsed. Compute phases deliver no bytes, so bytes alone would
    /// stall the estimate through them.
    pub fn done_fraction(&self) -> f64 {
        let offered = self.bytes_offered();
        let bytes = if offered == 0 {
            0.0
        } else {
            self.counters.bytes_delivered as f64 / offered as f64
        };
        let tasks = self.jobs().tasks.own_total;
        let tasks = if tasks == 0 {
            0.0
        } else {
            self.jobs().tasks.tasks_done as f64 / tasks as f64
        };
        let time = match self.scenario.max_sim_time {
            Some(limit) if limit.0 > 0 => self.now.0 as f64 / limit.0 as f64,
            _ => 0.0,
        };
        bytes.max(tasks).max(time).clamp(0.0, 1.0)
    }

    /// How often a run that makes no progress is looked at (for a PFC
    /// deadlock, for a stall): the retransmission timeout, at most 1 ms,
    /// since the timeouts RC NICs use (seconds) are far longer than any
    /// pause a working fabric holds.
    pub fn watch_interval(&self) -> SimTime {
        self.scenario
            .transport
            .rto
            .min(SimTime::from_us(1000))
            .max(SimTime(1))
    }

    /// How long transfers may wait on the network without any progress
    /// before the run stops as stalled: a thousand watch intervals, and
    /// at least the eight timeouts after which an RC QP gives up (NCCL's
    /// IB_RETRY_CNT of 7 retries).
    pub fn stall_after(&self) -> SimTime {
        SimTime(
            self.watch_interval()
                .0
                .saturating_mul(1000)
                .max(self.scenario.transport.rto.0.saturating_mul(8)),
        )
    }

    /// Whether some transfer has started and is not yet acknowledged in
    /// full, so that the run is waiting on the fabric.
    fn network_waiting(&self) -> bool {
        let later = self.jobs().tasks.later.iter().flat_map(|l| l.flows());
        self.jobs()
            .flows
            .iter()
            .chain(self.jobs().passes.live())
            .chain(later)
            .any(|f| f.acked.is_none() && f.start <= self.now)
    }

    /// Changes whenever a packet is acknowledged or a task is done.
    fn acked_mark(&self) -> u64 {
        let acked: u64 = self.nics.qps().iter().map(|q| q.req.una as u64).sum();
        acked + self.jobs().tasks.tasks_done
    }

    /// Handles events due at or before `until`, at most `max_events` of
    /// them. Once every transfer has been delivered and acknowledged and
    /// every task is done, at `t`, the run handles what is due up to the
    /// fabric's longest link delay later (`tail`), so that frames already
    /// on a wire land, and is finished then, with `now` at that time; what
    /// is left (timers that would lapse) is not simulated. (The tail also
    /// lets a run cut into partitions, whose windows are no longer than a
    /// link delay, stop where a single queue does.)
    pub fn run_until(&mut self, until: SimTime, max_events: u64) -> StopReason {
        let mut handled = 0;
        let total = self.ending.finish_total;
        while let Some(t) = self.queue.peek_time() {
            if self.ending.finished_at.is_none()
                && self.counters.flows_acked == total
                && self.jobs().tasks.all_done()
                && self.jobs().serving_done()
            {
                self.workload_done();
            }
            if let Some(end) = self.ending.end {
                if t > end && end <= until {
                    self.now = self.now.max(end);
                    return StopReason::Finished;
                }
            }
            if t > until || handled == max_events {
                return StopReason::Paused;
            }
            let (t, ev) = self.queue.pop().expect("peeked");
            if let Some(&next) = self.queue.peek_next_in_bucket(2) {
                self.prefetch_far(next);
            }
            if let Some(&next) = self.queue.peek_next_in_bucket(1) {
                self.prefetch_near(next);
            }

            debug_assert!(t >= self.now, "time ran backwards");
            self.now = t;
            // Clockwork puts `due` back (see `handle`).
            let due = self.records.idle.due;
            if t >= due {
                self.attend(&ev);
            }
            self.records.idle.due = SimTime(t.0 + IdleGaps::AT_LEAST.0);
            self.counters.events += 1;
            handled += 1;
            if self.keying.keyed {
                self.partition_event(&ev);
            }
            self.handle(ev, due);
        }
        if self.ending.finished_at.is_none()
            && self.counters.flows_acked == total
            && self.jobs().tasks.all_done()
            && self.jobs().serving_done()
        {
            self.workload_done();
        }
        if let Some(end) = self.ending.end {
            // Nothing is left to happen before the tail's end.
            self.now = self.now.max(end);
        } else if self.part.is_some() {
            return StopReason::Paused;
        }
        StopReason::Finished
    }

    /// Before an event due now that comes a long stretch after the last
    /// event of the model, or while a balancer's task is stopped: unless
    /// `ev` is clockwork, the stretch ends and the tasks start again.
    #[cold]
    #[inline(never)]
    fn attend(&mut self, ev: &Event) {
        let t = self.now;
        if ev.is_clockwork() {
            return;
        }
        let due = self.records.idle.model_due();
        if t >= due {
            let last = SimTime(due.0 - IdleGaps::AT_LEAST.0);
            self.records.idle.gaps.push((last, t));
        }
        if self.balancers_resting() {
            self.wake_balancers(ev);
        }
    }

    /// Every transfer is acknowledged and every task done (in a
    /// partition, its own): the run ends a tail later (in a partition,
    /// once the run as a whole knows it, see `parallel`).
    #[cold]
    fn workload_done(&mut self) {
        self.ending.finished_at = Some(self.now);
        if self.part.is_none() {
            self.ending.end = Some(SimTime(self.now.0.saturating_add(self.ending.tail.0)));
        }
    }

    /// Asks the CPU to start loading what the event after next will read
    /// first, so that the cache misses of successive events overlap.
    #[inline]
    fn prefetch_far(&self, ev: Event) {
        match ev {
            Event::Arrive(p, id) => {
                prefetch_read(self.packets.slot_ptr(id));
                // Most arrivals are data of the lossless class: its PFC
                // account at this ingress port.
                self.egress.prefetch_arrival(p, self.nics.data_queue());
            }
            Event::TxDone(p) => self.egress.prefetch_port(p),
            _ => {}
        }
    }

    /// For the next event, whose packet is on its way into the cache: the
    /// switch state and routing entry it will read.
    #[inline]
    fn prefetch_near(&self, ev: Event) {
        if let Event::Arrive(p, id) = ev {
            if let Owner::Switch(s) = self.egress.owner(p) {
                let dst = self.packets.get(id).dst;
                let routes = &self.routes.switches[s.idx()];
                let class = self.routes.nic_class[dst.idx()] as usize;
                if let Some(g) = routes.by_class.get(class) {
                    prefetch_read(g);
                }
                self.egress.prefetch_switch(s.idx());
            }
        }
    }
}
