//! One run cut into partitions, one thread each, giving the files a
//! single queue gives.
//!
//! `topology::partition` cuts the fabric into partitions of whole hosts
//! and switches. Every partition builds the whole simulation (the same
//! scenario, so the same state and random streams) and then handles only
//! the events of what it owns: its ports, the sending side of the QPs
//! whose source host it runs (transfer starts, timeouts) and the receiving
//! side of those whose destination it runs. A frame that reaches a port
//! of another partition leaves as a message and becomes that port's
//! arrival there.
//!
//! **Synchronization: conservative windows of the lookahead.** A frame
//! sent across a cut at `t` arrives no sooner than `t` plus the cut link's
//! delay, and the lookahead is the shortest such delay. So once every
//! partition has handled its events up to `g + lookahead - 1`, where `g`
//! is the earliest event anywhere, nothing can arrive inside that window
//! any more: each partition runs it alone, then the messages are swapped
//! at one barrier. Null messages would let neighbours drift apart, but
//! every partition of a fat tree or a multi-pod fabric talks to every
//! other through the top tier each window, so they would buy nothing
//! here and cost a message per pair and window; windows also give the
//! natural points for what is global (below).
//!
//! **Bit-identical.** Events are ordered by (time, key), and the key is
//! the same whichever partition handles the event (`Keyed`), so every
//! partition handles its events in the order a single queue would. What
//! is global is decided by every partition from the same figures,
//! gathered at the barrier, at the times a single queue decides it: the
//! end of the run (every partition's transfers acknowledged, then the
//! tail), and, at the end of each watch window of simulated time, the
//! time limit, a PFC deadlock (found among every partition's stuck
//! queues) and a stall. The event limit, the wall-clock limit, memory and
//! an interruption are looked at between windows: a run stopped by one is
//! partial anyway, and stops within one window of where one queue would.
//!
//! At the end, the partitions' state is merged into one simulation by
//! owner (each port, switch, side of a QP and transfer from the partition
//! that ran it; counters, which only grow, summed) and the outputs are
//! written from it as from any run.

use super::failures::LossNotice;
use super::{deadlock, Event, Limits, Progress, Simulation, StopReason, Wires};
use crate::runtime::homes::Home;
use crate::runtime::merge::{FlowEnds, PartEnds};
use crate::scenario::Prepared;
use crate::topology::partition::{self, Partitioning};
use crate::topology::{FlowId, NicId, PortId, QpId};
use crate::units::SimTime;
use crate::wire::PacketId;
use crate::wire::{Opcode, Packet};
use std::sync::atomic::{AtomicU32, AtomicUsize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[cfg(feature = "mpi")]
pub mod mpi;

/// A build without the `mpi` feature has no ranks: `--mpi` says how to
/// get them.
#[cfg(not(feature = "mpi"))]
pub mod mpi {
    use crate::engine::{Limits, Progress, Simulation, StopReason};

    pub enum Ranks {}

    impl Ranks {
        pub fn start() -> Result<Ranks, String> {
            Err("--mpi: this fabricsim was built without MPI; build it with `cargo build --release --features mpi` (needs Open MPI or MPICH, and libclang)".into())
        }
        pub fn rank(&self) -> u32 {
            match *self {}
        }
        pub fn size(&self) -> u32 {
            match *self {}
        }
        pub fn all(&self, _: bool) -> bool {
            match *self {}
        }
    }

    pub fn run(
        _: Simulation,
        ranks: &Ranks,
        _: &Limits,
        _: &mut dyn FnMut(&Progress),
    ) -> Option<(Simulation, StopReason)> {
        match *ranks {}
    }
}

/// A frame on its way to a port of another partition: when it arrives,
/// where, and the frame.
/// A frame for another partition: when it arrives at which port, and its
/// INT records under HPCC.
type Message = (SimTime, PortId, Packet, Option<Box<crate::wire::int::Int>>);

/// A message posted on a QP (QP, transfer, bytes), for its receiver.
pub(super) type Post = (QpId, FlowId, u64);

/// The bands a GLB heartbeat crossing a cut carries (the frame only
/// names them).
type Bands = (Packet, Box<[u8]>);

/// What a simulation running one partition knows of the others.
pub(super) struct Part {
    pub me: u32,
    /// Every port's partition.
    pub port_part: Arc<[u32]>,
    /// The QPs whose sending side this partition runs.
    pub qp_mine: Vec<bool>,
    /// Frames for other partitions, by partition, sent this window.
    pub outbox: Vec<Vec<Message>>,
    /// Messages posted this window on QPs other partitions receive, by
    /// partition.
    pub posts: Vec<Vec<Post>>,
    /// Where each task of the task graph runs.
    pub homes: Arc<[Home]>,
    /// Every host's partition.
    pub host_part: Arc<[u32]>,
    /// Jobs' iterations this partition made this window, for the others
    /// to make too: (job, up to which iteration, when).
    pub made: Vec<Made>,
}

/// A job's iterations made up to one, and when (see `Simulation::later_due`).
pub(super) type Made = (u32, u32, SimTime);

/// How a run was spread over threads, for `perf.json` and the console.
#[derive(Clone, Debug, Default)]
pub struct ParallelStats {
    /// Threads asked for.
    pub threads: u32,
    /// Partitions run (one thread each).
    pub partitions: u32,
    /// Why the run used one partition although more threads were asked.
    pub one_because: Option<String>,
    /// The cut, in one line (`Partitioning::describe`).
    pub cut: String,
    pub lookahead_ps: u64,
    /// Synchronization windows and the frames that crossed a cut.
    pub windows: u64,
    pub messages: u64,
    /// Events each partition handled.
    pub events: Vec<u64>,
    /// Wall time the further partitions took to copy the scenario and
    /// build their simulations (the first is built before the run, as on
    /// one thread).
    pub build_seconds: f64,
}

/// How `sim`'s scenario is cut for `threads` threads, or why it runs as
/// one partition.
pub fn plan(sim: &Simulation, threads: u32) -> Result<Partitioning, String> {
    if threads <= 1 {
        return Err("one thread was asked for".into());
    }
    if sim.jobs().serving.is_some() {
        return Err("a serving workload picks each request's replicas from the whole fabric's load as it goes, one state that is not cut".into());
    }
    if let Some((t, kind)) = sim
        .jobs()
        .tasks
        .later
        .as_ref()
        .and_then(|l| l.begins_when_made())
    {
        return Err(format!(
            "a job's later iteration has a task ({t}, {kind:?}) that waits for nothing in it and begins on a host or takes time: made as the run reaches it, it would begin when each partition made it, not when the first did"
        ));
    }
    let homes = sim
        .jobs()
        .tasks
        .homes(&sim.topo, &sim.jobs().flows)
        .map_err(|why| format!("its task graph cannot be cut by host yet: {why}"))?;
    if let Some(l) = sim.jobs().tasks.later.as_ref() {
        l.traces_cut(&sim.topo, &sim.routes, &homes)
            .map_err(|why| format!("a later part of a trace cannot be cut by host: {why}"))?;
    }
    let p = partition::partition(&sim.topo, threads);
    match p.lookahead {
        _ if p.parts < 2 => Err("the fabric has too few hosts and switches to cut".into()),
        None => Err("nothing could be cut".into()),
        Some(l) if l.0 == 0 => {
            Err("a link the cut would cross has no propagation delay (no lookahead)".into())
        }
        Some(_) => Ok(p),
    }
}

impl Simulation {
    /// Records that this run, asked for `threads` threads, runs as one
    /// partition, and why.
    pub fn note_one_partition(&mut self, threads: u32, because: String) {
        self.parallel = Some(ParallelStats {
            threads,
            partitions: 1,
            one_because: Some(because),
            ..ParallelStats::default()
        });
    }
}

/// Runs `sim` on the threads its scenario asks for (`simulation.threads`):
/// cut into partitions when `plan` allows, each further partition built
/// from a copy of `source` (the scenario `sim` was built from); on one
/// thread otherwise, with the reason noted for `perf.json`.
pub fn run_on_threads(
    mut sim: Simulation,
    source: Option<Prepared>,
    limits: &Limits,
    progress: &mut dyn FnMut(&Progress),
) -> (Simulation, StopReason) {
    let threads = sim.scenario.threads;
    match (plan(&sim, threads), source) {
        (Ok(cut), Some(source)) => run(sim, source, &cut, limits, progress),
        (plan, source) => {
            // The copy for further partitions is not needed: let it go
            // before the run.
            drop(source);
            if let (Err(why), true) = (plan, threads > 1) {
                sim.note_one_partition(threads, why);
            }
            let stop = sim.run_limited(limits, progress);
            (sim, stop)
        }
    }
}

/// A value alone on its cache lines (two, for adjacent-line prefetch).
#[repr(align(128))]
struct Alone<T>(T);

/// The barrier between windows. A window is often a few microseconds of
/// work, and waking a parked thread takes tens (the standard barrier
/// parks): so a waiter first spins on a counter of its own cache line,
/// then yields its core a few times, and only then sleeps until the last
/// thread wakes it. How long it spins adapts: a wait that had to sleep
/// halves the spinning of the next ones (the cores are shared, or the
/// windows long, and spinning holds a core the awaited thread needs), a
/// wait that ended while spinning doubles it again, up to `MAX_SPINS`.
/// With more threads than cores there is no spinning at all.
struct SpinBarrier {
    n: usize,
    /// Spins a waiter makes before it yields (0 where it never should).
    spins: AtomicU32,
    most_spins: u32,
    arrived: Alone<AtomicUsize>,
    generation: Alone<AtomicUsize>,
    /// Waiters asleep, and what wakes them.
    sleepers: AtomicUsize,
    lock: std::sync::Mutex<()>,
    wake: std::sync::Condvar,
    /// A partition's thread panicked: the others must not wait for it.
    broken: std::sync::atomic::AtomicBool,
}

/// Most spins before yielding: about a hundred microseconds.
const MAX_SPINS: u32 = 1 << 16;

/// Yields before sleeping.
const YIELDS: u32 = 16;

/// Breaks the barrier if its thread unwinds from a panic, so that the
/// other partitions stop instead of waiting for it forever.
struct BreakOnPanic<'a>(&'a SpinBarrier);

impl Drop for BreakOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.broken.store(true, Ordering::Release);
            let _guard = self.0.lock.lock();
            self.0.wake.notify_all();
        }
    }
}

impl SpinBarrier {
    fn new(n: usize) -> SpinBarrier {
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let most_spins = if n <= cores { MAX_SPINS } else { 0 };
        SpinBarrier {
            n,
            spins: AtomicU32::new(most_spins),
            most_spins,
            arrived: Alone(AtomicUsize::new(0)),
            generation: Alone(AtomicUsize::new(0)),
            sleepers: AtomicUsize::new(0),
            lock: std::sync::Mutex::new(()),
            wake: std::sync::Condvar::new(),
            broken: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Returns once all `n` threads have called it; what each wrote
    /// before is visible to every one after.
    fn wait(&self) {
        let generation = self.generation.0.load(Ordering::Acquire);
        if self.arrived.0.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.0.store(0, Ordering::Relaxed);
            self.generation.0.fetch_add(1, Ordering::SeqCst);
            // A sleeper counted itself before it looked at the
            // generation a last time, under the lock: it is woken.
            if self.sleepers.load(Ordering::SeqCst) > 0 {
                let _guard = self.lock.lock();
                self.wake.notify_all();
            }
            return;
        }
        let passed = || {
            if self.broken.load(Ordering::Acquire) {
                panic!("another partition of the run failed");
            }
            self.generation.0.load(Ordering::Acquire) != generation
        };
        let budget = self.spins.load(Ordering::Relaxed);
        for _ in 0..budget {
            if passed() {
                if budget < self.most_spins {
                    self.spins
                        .store((budget * 2).clamp(64, self.most_spins), Ordering::Relaxed);
                }
                return;
            }
            std::hint::spin_loop();
        }
        for _ in 0..YIELDS {
            if passed() {
                return;
            }
            std::thread::yield_now();
        }
        // Spinning did not pay: the next waits spin less.
        self.spins
            .store((budget / 2).max(64.min(self.most_spins)), Ordering::Relaxed);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        while self.generation.0.load(Ordering::SeqCst) == generation
            && !self.broken.load(Ordering::Acquire)
        {
            guard = self.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
        drop(guard);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        if self.broken.load(Ordering::Acquire) {
            panic!("another partition of the run failed");
        }
    }
}

impl Part {
    /// Whether QP `q` (received at port `at`) is received in another
    /// partition: if so, the message of `bytes` for transfer `f` just
    /// posted on it goes there at the end of the window.
    pub(super) fn post_elsewhere(&mut self, q: QpId, at: PortId, f: FlowId, bytes: u64) -> bool {
        let to = self.port_part[at.idx()];
        if to == self.me {
            return false;
        }
        self.posts[to as usize].push((q, f, bytes));
        true
    }
}

impl Wires<'_> {
    /// In a partition of a parallel run: a frame for another partition's
    /// port goes to that partition (out of line, so that one queue's
    /// path stays as it was).
    #[cold]
    #[inline(never)]
    pub(super) fn send_to_other_partition(&mut self, t: SimTime, p: PortId, id: PacketId) -> bool {
        let Some(part) = self.part.as_deref_mut() else {
            return false;
        };
        let to = part.port_part[p.idx()];
        if to == part.me {
            return false;
        }
        let int = self.packets.int(id).map(|i| Box::new(*i));
        let pkt = self.packets.take(id);
        part.outbox[to as usize].push((t, p, pkt, int));
        true
    }
}

/// What one partition tells the others at the end of a window.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Slot {
    /// Its next event, or the earliest message it sent (`u64::MAX`: none).
    next: u64,
    /// When its transfers were all acknowledged.
    finished: Option<SimTime>,
    now: SimTime,
    bytes_delivered: u64,
    events: u64,
    link_transmissions: u64,
    flows_completed: u64,
    tasks_done: u64,
    /// A job's iteration could not be made (`Simulation::later_failed`).
    later_failed: bool,
    /// Set by partition 0 only: stop the run (interrupt, wall clock,
    /// memory).
    stop: Option<StopReason>,
}

/// The run as a whole, as every partition reads it after a window.
#[derive(Clone, Copy, Debug)]
pub(super) struct Global {
    next: u64,
    all_finished: bool,
    last_finish: SimTime,
    now: SimTime,
    bytes_delivered: u64,
    events: u64,
    link_transmissions: u64,
    flows_completed: u64,
    /// Tasks done, summed (those that run everywhere count once in each
    /// partition: for progress only).
    tasks_done: u64,
    later_failed: bool,
    stop: Option<StopReason>,
}

impl Global {
    /// The run from every partition's slot, in partition order.
    fn of(slots: &[Slot]) -> Global {
        Global {
            next: slots.iter().map(|s| s.next).min().unwrap_or(u64::MAX),
            all_finished: slots.iter().all(|s| s.finished.is_some()),
            last_finish: slots
                .iter()
                .filter_map(|s| s.finished)
                .max()
                .unwrap_or(SimTime::ZERO),
            now: slots.iter().map(|s| s.now).max().unwrap_or(SimTime::ZERO),
            bytes_delivered: slots.iter().map(|s| s.bytes_delivered).sum(),
            events: slots.iter().map(|s| s.events).sum(),
            link_transmissions: slots.iter().map(|s| s.link_transmissions).sum(),
            flows_completed: slots.iter().map(|s| s.flows_completed).sum(),
            tasks_done: slots.iter().map(|s| s.tasks_done).sum(),
            later_failed: slots.iter().any(|s| s.later_failed),
            stop: slots[0].stop,
        }
    }
}

/// What one partition sends another at the end of a window: frames,
/// the bands of the GLB heartbeats among them, and data lost to failures
/// on QPs the other receives.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Mail {
    frames: Vec<Message>,
    bands: Vec<Bands>,
    losses: Vec<LossNotice>,
    /// Messages posted on QPs the other receives: a message's first
    /// packet crosses a cut link, at least a window long, so the post
    /// is there before it.
    posts: Vec<Post>,
    /// Jobs' iterations the sender made (the receiver makes them before
    /// it takes frames or posts, some of which may be theirs).
    made: Vec<Made>,
}

impl Mail {
    fn is_empty(&self) -> bool {
        self.frames.is_empty()
            && self.bands.is_empty()
            && self.losses.is_empty()
            && self.posts.is_empty()
            && self.made.is_empty()
    }

    fn append(&mut self, other: &mut Mail) {
        self.frames.append(&mut other.frames);
        self.bands.append(&mut other.bands);
        self.losses.append(&mut other.losses);
        self.posts.append(&mut other.posts);
        self.made.append(&mut other.made);
    }
}

/// How the partitions of a run swap what they must: between threads
/// (`Threads`) or between processes (`mpi::Ranks`). Every call is made by
/// every partition, in the same order.
pub(super) trait Exchange {
    /// Ends a window: publishes this partition's slot and its mail for
    /// the others (by partition; its own is empty), and returns the run
    /// as every partition published it and the mail sent to this one.
    fn window(&mut self, slot: Slot, out: Vec<Mail>) -> (Global, Mail);
    /// Every partition's stuck queues, in partition order.
    fn stuck(&mut self, mine: Vec<deadlock::Stuck>) -> Vec<deadlock::Stuck>;
    /// Packets acknowledged and tasks done, summed, and whether any
    /// partition has a transfer waiting.
    fn watch(&mut self, mine: (u64, bool)) -> (u64, bool);
    /// Per job, the least of every partition's count of oldest parts
    /// over (`LaterState::over`).
    fn over(&mut self, mine: Vec<u32>) -> Vec<u32>;
    /// Gives partition 0 every other partition's share of the parts to
    /// forget, in partition order (the others get nothing).
    fn share(&mut self, mine: Share) -> Vec<Share>;
}

/// A partition's share of the parts every partition has over, for
/// partition 0 to merge and forget (`retire_over`), with its times of the
/// graph's tasks (which the parts' records may name).
#[derive(Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Share {
    me: u32,
    /// Job by job, oldest first.
    parts: Vec<PartEnds>,
    started: Vec<SimTime>,
    done: Vec<SimTime>,
}

/// What the threads share.
struct Shared {
    barrier: SpinBarrier,
    /// Mail to each partition, by window parity: a box is filled before
    /// a barrier and emptied after it, and not filled again until after
    /// the next.
    mail: [Vec<Mutex<Mail>>; 2],
    /// Slots by window parity, likewise.
    slots: [Vec<Mutex<Slot>>; 2],
    /// At the end of a watch window without bytes delivered: packets
    /// acknowledged and tasks done, and whether a transfer waits.
    watch: Vec<Mutex<(u64, bool)>>,
    /// At a deadlock check: each partition's stuck queues.
    stuck: Vec<Mutex<Vec<deadlock::Stuck>>>,
    /// At a watch window's end: each partition's parts over, and its
    /// share of those over everywhere.
    over: Vec<Mutex<Vec<u32>>>,
    shares: Vec<Mutex<Share>>,
    messages: AtomicU64,
}

/// One thread's side of `Shared`.
struct Threads<'a> {
    sh: &'a Shared,
    me: usize,
    parity: usize,
}

impl Exchange for Threads<'_> {
    fn window(&mut self, slot: Slot, out: Vec<Mail>) -> (Global, Mail) {
        let (sh, parity) = (self.sh, self.parity);
        for (to, mut m) in out.into_iter().enumerate() {
            if !m.is_empty() {
                sh.messages
                    .fetch_add(m.frames.len() as u64, Ordering::Relaxed);
                sh.mail[parity][to]
                    .lock()
                    .expect("no partition panicked")
                    .append(&mut m);
            }
        }
        *sh.slots[parity][self.me]
            .lock()
            .expect("no partition panicked") = slot;
        sh.barrier.wait();
        self.parity ^= 1;
        let mail = std::mem::take(
            &mut *sh.mail[parity][self.me]
                .lock()
                .expect("no partition panicked"),
        );
        let slots: Vec<Slot> = sh.slots[parity]
            .iter()
            .map(|s| *s.lock().expect("no partition panicked"))
            .collect();
        (Global::of(&slots), mail)
    }

    fn stuck(&mut self, mine: Vec<deadlock::Stuck>) -> Vec<deadlock::Stuck> {
        let sh = self.sh;
        *sh.stuck[self.me].lock().expect("no partition panicked") = mine;
        sh.barrier.wait();
        let mut all = Vec::new();
        for s in &sh.stuck {
            all.extend(s.lock().expect("no partition panicked").iter().cloned());
        }
        sh.barrier.wait();
        all
    }

    fn watch(&mut self, mine: (u64, bool)) -> (u64, bool) {
        let sh = self.sh;
        *sh.watch[self.me].lock().expect("no partition panicked") = mine;
        sh.barrier.wait();
        let all = sh.watch.iter().fold((0, false), |(m, w), s| {
            let s = *s.lock().expect("no partition panicked");
            (m + s.0, w || s.1)
        });
        sh.barrier.wait();
        all
    }

    fn over(&mut self, mine: Vec<u32>) -> Vec<u32> {
        let sh = self.sh;
        *sh.over[self.me].lock().expect("no partition panicked") = mine;
        sh.barrier.wait();
        let all = least(
            sh.over
                .iter()
                .map(|o| o.lock().expect("no partition panicked").clone()),
        );
        sh.barrier.wait();
        all
    }

    fn share(&mut self, mine: Share) -> Vec<Share> {
        let sh = self.sh;
        if self.me != 0 {
            *sh.shares[self.me].lock().expect("no partition panicked") = mine;
        }
        sh.barrier.wait();
        if self.me != 0 {
            return Vec::new();
        }
        // Taken before partition 0 reaches the next barrier, which every
        // partition must pass before it shares again.
        sh.shares[1..]
            .iter()
            .map(|s| std::mem::take(&mut *s.lock().expect("no partition panicked")))
            .collect()
    }
}

/// The least of each element over `all`, which are as long as each other.
pub(super) fn least(mut all: impl Iterator<Item = Vec<u32>>) -> Vec<u32> {
    let mut out = all.next().unwrap_or_default();
    for v in all {
        for (o, x) in out.iter_mut().zip(v) {
            *o = (*o).min(x);
        }
    }
    out
}

impl Simulation {
    /// Whether this simulation handles port `p`'s events (every port, but
    /// in a partition of a parallel run).
    pub(super) fn owns_port(&self, p: PortId) -> bool {
        self.part
            .as_ref()
            .is_none_or(|part| part.port_part[p.idx()] == part.me)
    }

    /// In a partition, before each event: keeps its key (captures and
    /// losses are ordered by it) and counts a fabric-wide event (a
    /// failure, routing reconverging, a task every partition runs) in
    /// partition 0 only, as the one event it is. Out of
    /// line, so that one queue's loop is as it was.
    #[cold]
    #[inline(never)]
    pub(super) fn partition_event(&mut self, ev: &Event) {
        self.keying.handling = super::queue::Keyed::key(ev);
        let Some(p) = self.part.as_deref() else {
            return;
        };
        let everywhere = match *ev {
            Event::Fail(_) | Event::Recover(_) | Event::Reconverge => true,
            Event::TaskReady(t) | Event::TaskDone(t) => match p.homes.get(t as usize) {
                Some(h) => *h == Home::Everywhere,
                None => {
                    let later = self.jobs().tasks.later.as_ref().and_then(|l| l.home(t));
                    later == Some(Home::Everywhere)
                }
            },
            _ => false,
        };
        if everywhere && p.me != 0 {
            self.counters.events -= 1;
        }
    }

    /// Makes this simulation run partition `me` of `p`: drops the
    /// starts and timeouts of transfers other partitions send.
    fn make_partition(
        &mut self,
        p: &Partitioning,
        port_part: Arc<[u32]>,
        homes: Arc<[Home]>,
        me: u32,
    ) {
        let host_of = |nic: NicId| p.host[self.topo.nics[nic.idx()].host.idx()];
        let mut keep = Vec::new();
        while let Some((t, ev)) = self.queue.pop() {
            let mine = match ev {
                Event::TaskReady(task) => match homes[task as usize] {
                    Home::Host { begin, .. } => p.host[begin as usize] == me,
                    Home::Everywhere => true,
                    Home::Last => false,
                },
                Event::FlowStart(f) => host_of(self.jobs().flows[f.idx()].spec.src_nic) == me,
                Event::Rto(q) => host_of(self.nics.qp(q).src_nic) == me,
                Event::Storm(i, _) => {
                    let gpu = self.scenario.qos.pfc.storms[i as usize].gpu;
                    host_of(self.topo.gpus[gpu.idx()].nic) == me
                }
                _ => true,
            };
            if mine {
                keep.push((t, ev));
            }
        }
        for (t, ev) in keep {
            self.queue.push(t, ev);
        }
        let gpu_part = |g: crate::topology::GpuId| host_of(self.topo.gpus[g.idx()].nic);
        self.ending.finish_total = self
            .jobs()
            .flows
            .iter()
            .filter(|f| host_of(f.spec.src_nic) == me)
            .count() as u64
            + self
                .jobs()
                .passes
                .rows
                .iter()
                .filter(|r| r.qps > 0 && gpu_part(r.src) == me)
                .map(|r| r.planned)
                .sum::<u64>();
        let qp_mine = self
            .nics
            .qps()
            .iter()
            .map(|q| host_of(q.src_nic) == me)
            .collect();
        self.balance.keep_only(
            |port| port_part[port.idx()] == me,
            |s| p.switch[s.idx()] == me,
        );
        self.jobs_mut()
            .tasks
            .keep_only(&homes, |h| p.host[h as usize] == me);
        self.failures.partitioned = self.failures.any();
        self.keying.keyed = true;
        self.part = Some(Box::new(Part {
            me,
            port_part,
            qp_mine,
            outbox: vec![Vec::new(); p.parts as usize],
            posts: vec![Vec::new(); p.parts as usize],
            homes,
            host_part: p.host.clone().into(),
            made: Vec::new(),
        }));
    }

    fn part(&self) -> &Part {
        self.part.as_deref().expect("a partition")
    }

    /// At the end of a watch window: jobs' oldest parts over in every
    /// partition are merged in partition 0, which works out what the
    /// outputs need of them and forgets them as one queue does; the other
    /// partitions forget their shares. Memory holds the parts under way,
    /// as on one queue.
    fn retire_over(&mut self, ex: &mut dyn Exchange) {
        let Some(l) = self.jobs().tasks.later.as_deref() else {
            return;
        };
        let over = ex.over(l.over());
        if over.iter().all(|&n| n == 0) {
            return;
        }
        let me = self.part().me;
        let mut share = Share {
            me,
            ..Share::default()
        };
        if me != 0 {
            for (parts, &n) in l.parts.iter().zip(&over) {
                share
                    .parts
                    .extend(parts[..n as usize].iter().map(PartEnds::of));
            }
            share.started = self.jobs().tasks.started.clone();
            share.done = self.jobs().tasks.done.clone();
        }
        let theirs = ex.share(share);
        let p = self.part.as_deref().expect("a partition");
        let rt = self
            .jobs
            .as_deref_mut()
            .expect("the runtime is not in a call");
        let mut l = rt.tasks.later.take().expect("checked above");
        if me == 0 {
            for s in theirs {
                let them = |h: u32| p.host_part[h as usize] == s.me;
                rt.tasks.absorb_times(&s.started, &s.done, &p.homes, them);
                let mut shares = s.parts.into_iter();
                for (parts, &n) in l.parts.iter_mut().zip(&over) {
                    for (mine, theirs) in parts[..n as usize].iter_mut().zip(&mut shares) {
                        theirs.give(mine, &self.topo, them);
                    }
                }
            }
        }
        for (j, &n) in over.iter().enumerate() {
            for i in 0..n as usize {
                if me == 0 {
                    let done = &self.jobs().tasks.done;
                    l.settle_part(j, i, |t| done.get(t as usize).copied());
                }
            }
            for _ in 0..n {
                let part = l.parts[j].remove(0);
                if me == 0 {
                    self.runtime(|rt, k| rt.retire(k, &mut l, j, part));
                } else {
                    self.jobs_mut().forget(&mut l, j, part);
                }
            }
        }
        self.jobs_mut().tasks.later = Some(l);
    }

    /// Takes the mail other partitions sent here.
    fn take_mail(&mut self, mail: Mail) {
        // Iterations another partition made, made here too, as when it
        // made them; what they let go at once is handled now, so that a
        // run stopped at this window counts it as one queue would.
        let mut due = None;
        let mut made = mail.made;
        made.sort_unstable();
        for (j, upto, at) in made {
            let at = at.max(self.now);
            self.runtime(|rt, k| rt.make_up_to(k, j as usize, upto, at));
            due = due.max(Some(at));
        }
        if let Some(due) = due {
            self.run_until(due, u64::MAX);
        }
        for (q, f, bytes) in mail.posts {
            self.nics.post(q, f, bytes, (false, true));
        }
        if self.failures.partitioned {
            self.replay_losses(mail.losses);
        }
        for (pkt, b) in mail.bands {
            self.balance.put_bands(&pkt, b);
        }
        for (t, port, pkt, int) in mail.frames {
            let id = self.packets.alloc(pkt);
            if let Some(int) = int {
                self.packets.set_int(id, *int);
            }
            self.queue.push(t, Event::Arrive(port, id));
        }
    }

    /// This window's mail for the other partitions, by partition, and the
    /// earliest arrival among it.
    fn send_mail(&mut self) -> (Vec<Mail>, u64) {
        let mut first = u64::MAX;
        let part = self.part.as_deref_mut().expect("a partition");
        let mut out: Vec<Mail> = (0..part.outbox.len()).map(|_| Mail::default()).collect();
        for notice in self.failures.notices.drain(..) {
            let to = part.port_part[self.nics.qp(notice.q).dst_port.idx()];
            out[to as usize].losses.push(notice);
        }
        for (to, posts) in part.posts.iter_mut().enumerate() {
            out[to].posts = std::mem::take(posts);
        }
        if !part.made.is_empty() {
            for (to, m) in out.iter_mut().enumerate() {
                if to != part.me as usize {
                    m.made = part.made.clone();
                }
            }
            part.made.clear();
        }
        for (to, frames) in part.outbox.iter_mut().enumerate() {
            if frames.is_empty() {
                continue;
            }
            first = first.min(frames.iter().map(|m| m.0 .0).min().unwrap_or(u64::MAX));
            out[to].bands = frames
                .iter()
                .filter(|m| m.2.opcode == Opcode::Heartbeat)
                .map(|m| (m.2, self.balance.take_bands(&m.2)))
                .collect();
            out[to].frames = std::mem::take(frames);
        }
        (out, first)
    }

    fn slot(&mut self, first_message: u64, stop: Option<StopReason>) -> Slot {
        let c = self.counters();
        Slot {
            next: self
                .queue
                .peek_time()
                .map_or(u64::MAX, |t| t.0)
                .min(first_message),
            finished: self.ending.finished_at,
            now: self.now,
            bytes_delivered: c.bytes_delivered,
            events: c.events,
            link_transmissions: c.link_transmissions,
            flows_completed: c.flows_completed,
            tasks_done: self.jobs().tasks.tasks_done,
            later_failed: self.later_failed().is_some(),
            stop,
        }
    }

    /// Whether a transfer this partition sends has started and is not
    /// yet acknowledged.
    fn own_network_waiting(&self) -> bool {
        let part = self.part();
        let later = self.jobs().tasks.later.iter().flat_map(|l| l.flows());
        self.jobs()
            .flows
            .iter()
            .chain(self.jobs().passes.live())
            .chain(later)
            .any(|f| {
                f.acked.is_none()
                    && f.start <= self.now
                    && part.qp_mine.get(f.first_qp as usize) == Some(&true)
            })
    }

    /// Packets this partition's QPs had acknowledged, and tasks it did.
    fn own_acked_mark(&self) -> u64 {
        let part = self.part();
        self.nics
            .qps()
            .iter()
            .zip(&part.qp_mine)
            .filter(|(_, &mine)| mine)
            .map(|(q, _)| q.req.una as u64)
            .sum::<u64>()
            + self.jobs().tasks.tasks_done
    }
}

/// What partition 0 (on the caller's thread) does beyond its share: the
/// limits only one thread should look at, and progress.
struct Lead<'a> {
    limits: &'a Limits,
    progress: &'a mut dyn FnMut(&Progress),
    /// When the run started (the wall-clock limit and progress only).
    started: Instant,
    shown_at: std::time::Duration,
    offered: u64,
    flows: u64,
    tasks: u64,
    windows: u64,
}

impl<'a> Lead<'a> {
    fn new(
        sim: &Simulation,
        limits: &'a Limits,
        progress: &'a mut dyn FnMut(&Progress),
        started: Instant,
    ) -> Lead<'a> {
        Lead {
            limits,
            progress,
            started,
            shown_at: std::time::Duration::ZERO,
            offered: sim.jobs().flows.iter().map(|f| f.spec.bytes).sum::<u64>()
                + sim.jobs().passes.net_bytes,
            flows: sim.flows_total(),
            tasks: sim.jobs().tasks.graph.tasks.len() as u64,
            windows: 0,
        }
    }

    fn check(&mut self, g: &Global, limit: SimTime) -> Option<StopReason> {
        self.windows += 1;
        if self
            .limits
            .interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
        {
            return Some(StopReason::Interrupted);
        }
        if self
            .limits
            .max_wall
            .is_some_and(|w| self.started.elapsed() >= w)
        {
            return Some(StopReason::WallLimit);
        }
        if self.windows.is_multiple_of(256)
            && self
                .limits
                .max_memory
                .is_some_and(|(most, now)| now() > most)
        {
            return Some(StopReason::MemoryLimit);
        }
        let elapsed = self.started.elapsed();
        if (elapsed - self.shown_at).as_millis() >= 250 {
            self.shown_at = elapsed;
            let bytes = if self.offered == 0 {
                0.0
            } else {
                g.bytes_delivered as f64 / self.offered as f64
            };
            // Compute phases deliver no bytes: tasks count too.
            let tasks = if self.tasks == 0 {
                0.0
            } else {
                g.tasks_done as f64 / self.tasks as f64
            };
            let time = if limit < SimTime::MAX && limit.0 > 0 {
                g.now.0 as f64 / limit.0 as f64
            } else {
                0.0
            };
            (self.progress)(&Progress {
                now: g.now,
                done: bytes.max(tasks).max(time).clamp(0.0, 1.0),
                events: g.events,
                link_transmissions: g.link_transmissions,
                flows_completed: g.flows_completed,
                flows: self.flows,
            });
        }
        None
    }
}

/// Runs one partition to the end of the run, deciding what is global
/// from the figures every partition publishes (see the module's doc).
fn drive(
    sim: &mut Simulation,
    ex: &mut dyn Exchange,
    lookahead: u64,
    max_events: Option<u64>,
    mut lead: Option<Lead>,
) -> (StopReason, u64) {
    let mut windows = 0;
    let stop = drive_windows(sim, ex, lookahead, max_events, &mut lead, &mut windows);
    (stop, windows)
}

fn drive_windows(
    sim: &mut Simulation,
    ex: &mut dyn Exchange,
    lookahead: u64,
    max_events: Option<u64>,
    lead: &mut Option<Lead>,
    windows: &mut u64,
) -> StopReason {
    let limit = sim.scenario.max_sim_time.unwrap_or(SimTime::MAX);
    let watch_every = sim.watch_interval();
    let stall_after = sim.stall_after();
    let mut watch = deadlock::Watch::default();
    // As in `run_to_end`: the bytes delivered at the last change and
    // when, and when the run last moved, the bytes then, and the
    // packets acknowledged as last counted.
    let mut delivered = (0u64, sim.now);
    let mut last = (sim.now, 0u64, 0u64);
    let mut watch_until: Option<SimTime> = None;
    let parts = sim.part().outbox.len();
    let nothing = || (0..parts).map(|_| Mail::default()).collect();
    let (mut g, mut mail) = ex.window(sim.slot(u64::MAX, None), nothing());
    loop {
        sim.take_mail(std::mem::take(&mut mail));
        if let Some(stop) = g.stop {
            return stop;
        }
        // As on one queue: the tasks that wait for it would never run.
        if g.later_failed {
            return StopReason::Stalled;
        }
        if max_events.is_some_and(|m| g.events >= m) {
            return StopReason::EventLimit;
        }
        if g.all_finished && sim.ending.end.is_none() {
            sim.ending.end = Some(SimTime(g.last_finish.0.saturating_add(sim.ending.tail.0)));
        }
        if let Some(end) = sim.ending.end {
            if g.next == u64::MAX || g.next > end.0 {
                // Nothing is left before the end: as one queue, `now` goes
                // to the end unless the time limit comes first with events
                // still due.
                if g.next == u64::MAX || end <= limit {
                    sim.now = sim.now.max(end).min(limit);
                }
                return StopReason::Finished;
            }
        }
        // The watch window: the checks at its end, then a new one from
        // the next event.
        let until = loop {
            let until = *watch_until.get_or_insert_with(|| {
                let from = if g.next == u64::MAX {
                    g.now
                } else {
                    SimTime(g.next).max(g.now)
                };
                limit.min(SimTime(from.0.saturating_add(watch_every.0)))
            });
            if g.next <= until.0 {
                break until;
            }
            watch_until = None;
            if g.next == u64::MAX || g.next > limit.0 {
                return if g.next == u64::MAX || g.all_finished {
                    StopReason::Finished
                } else {
                    StopReason::SimTimeLimit
                };
            }
            sim.retire_over(ex);
            if g.bytes_delivered != delivered.0 {
                delivered = (g.bytes_delivered, until);
                watch.clear();
            } else if until.saturating_sub(delivered.1) >= watch_every {
                let mine = {
                    let part = sim.part();
                    let me = part.me;
                    let port_part = &part.port_part;
                    sim.stuck_queues(g.now, |p| port_part[p] == me)
                };
                let mut all = ex.stuck(mine);
                all.sort_by_key(|s| (s.port, s.prio));
                let cycle = deadlock::cycle_among(&sim.topo, &all);
                if sim.confirm_deadlock(&mut watch, cycle, g.now) {
                    return StopReason::Deadlock;
                }
            }
            let moved = if g.bytes_delivered != last.1 {
                last.1 = g.bytes_delivered;
                true
            } else {
                let (mark, waiting) = ex.watch((sim.own_acked_mark(), sim.own_network_waiting()));
                let moved = std::mem::replace(&mut last.2, mark) != mark;
                if !moved && waiting && until.saturating_sub(last.0) > stall_after {
                    return StopReason::Stalled;
                }
                moved || !waiting
            };
            if moved {
                last.0 = until;
            }
        };
        let window_end = SimTime(g.next.saturating_add(lookahead - 1).min(until.0));
        sim.run_until(window_end, u64::MAX);
        *windows += 1;
        let (out, first) = sim.send_mail();
        let stop = lead.as_mut().and_then(|l| l.check(&g, limit));
        (g, mail) = ex.window(sim.slot(first, stop), out);
    }
}

/// Runs `first` (built from `source`) cut as `p` says: partition 0 on
/// this thread, the others, each built from a copy of `source`, on
/// threads of their own; then merges them into one
/// simulation whose outputs are those of a run on one queue. `progress`
/// is called from this thread a few times a second.
pub fn run(
    mut first: Simulation,
    source: Prepared,
    p: &Partitioning,
    limits: &Limits,
    progress: &mut dyn FnMut(&Progress),
) -> (Simulation, StopReason) {
    let t0 = Instant::now();
    let n = p.parts as usize;
    // Each further partition copies the scenario and builds its
    // simulation on its own thread; the copy goes once all are built.
    let source = Arc::new(source);
    let lookahead = p.lookahead.expect("a cut with a lookahead").0;
    let (port_part, homes) = first.cut(p);
    let fresh = || (0..n).map(|_| Mutex::new(Slot::default())).collect();
    let boxes = || (0..n).map(|_| Mutex::new(Mail::default())).collect();
    let sh = Shared {
        barrier: SpinBarrier::new(n),
        mail: [boxes(), boxes()],
        slots: [fresh(), fresh()],
        watch: (0..n).map(|_| Mutex::new((0, false))).collect(),
        stuck: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
        over: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
        shares: (0..n).map(|_| Mutex::new(Share::default())).collect(),
        messages: AtomicU64::new(0),
    };
    first.make_partition(p, port_part.clone(), homes.clone(), 0);
    // A capture: every partition keeps its frames, partition 0 writes them
    // all, in order, at the end.
    let capture = first.capture.as_deref().map(|c| c.for_partition());
    if let Some(c) = first.capture.as_deref_mut() {
        c.record();
    }
    let max_events = limits.max_events;
    let (stop, windows, rest, build) = std::thread::scope(|s| {
        let handles: Vec<_> = (1..n)
            .map(|i| {
                let (sh, port_part, homes) = (&sh, port_part.clone(), homes.clone());
                let capture = capture.as_ref().map(|c| c.for_partition());
                let source = source.clone();
                s.spawn(move || {
                    let _guard = BreakOnPanic(&sh.barrier);
                    let prep = Prepared::clone(&source);
                    drop(source);
                    let mut sim = Simulation::new(prep);
                    if let Some(c) = capture {
                        sim.capture = Some(Box::new(c));
                        sim.egress.capturing = true;
                    }
                    sim.make_partition(p, port_part, homes, i as u32);
                    // Built.
                    sh.barrier.wait();
                    let mut ex = Threads {
                        sh,
                        me: i,
                        parity: 0,
                    };
                    let (stop, _) = drive(&mut sim, &mut ex, lookahead, max_events, None);
                    (sim, stop)
                })
            })
            .collect();
        drop(source);
        let guard = BreakOnPanic(&sh.barrier);
        sh.barrier.wait();
        // The run starts once every partition is built.
        let build = t0.elapsed();
        let lead = Lead::new(&first, limits, progress, t0 + build);
        let mut ex = Threads {
            sh: &sh,
            me: 0,
            parity: 0,
        };
        let (stop, windows) = drive(&mut first, &mut ex, lookahead, max_events, Some(lead));
        drop(guard);
        let rest: Vec<(Simulation, StopReason)> = handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => r,
                Err(e) => std::panic::resume_unwind(e),
            })
            .collect();
        (stop, windows, rest, build)
    });
    let mut sims = vec![first];
    for (sim, theirs) in rest {
        debug_assert_eq!(theirs, stop, "every partition decides the same");
        sims.push(sim);
    }
    // Every partition closes its last bucket of samples where the run
    // ended.
    let end = sims.iter().map(|s| s.now).max().unwrap_or(SimTime::ZERO);
    for s in &mut sims {
        s.close(end);
    }
    let stats = ParallelStats {
        threads: n as u32,
        partitions: n as u32,
        one_because: None,
        cut: p.describe(),
        lookahead_ps: lookahead,
        windows,
        messages: sh.messages.load(Ordering::Relaxed),
        events: Vec::new(),
        build_seconds: build.as_secs_f64(),
    };
    let mut sims = sims.into_iter();
    let first = sims.next().expect("partition 0");
    let through_bytes = limits.encode_partitions;
    let fragments = sims.map(|s| {
        let f = s.into_fragment();
        if through_bytes {
            Fragment::decode(&f.encode()).expect("a fragment decodes from its own bytes")
        } else {
            f
        }
    });
    let merged = merge(first, fragments, p, stats);
    (merged, stop)
}

impl Simulation {
    /// How this simulation's fabric and task graph are cut as `p` says:
    /// every port's partition, and where each task runs.
    fn cut(&self, p: &Partitioning) -> (Arc<[u32]>, Arc<[Home]>) {
        let port_part: Arc<[u32]> = (0..self.topo.ports.len())
            .map(|i| p.of_port(&self.topo, PortId(i as u32)))
            .collect();
        let homes: Arc<[Home]> = self
            .jobs()
            .tasks
            .homes(&self.topo, &self.jobs().flows)
            .expect("`plan` checked the task graph")
            .into();
        (port_part, homes)
    }

    /// Ends a partition's run at `end`, the latest any partition reached:
    /// its last bucket of samples closes there.
    fn close(&mut self, end: SimTime) {
        self.now = end;
        self.finish_series();
        self.close_idle();
    }
}

/// Partition 0 (`first`) merged with the others' fragments into one
/// simulation whose outputs are those of a run on one queue; `stats`
/// gets each partition's event count.
fn merge(
    mut merged: Simulation,
    fragments: impl Iterator<Item = Fragment>,
    p: &Partitioning,
    mut stats: ParallelStats,
) -> Simulation {
    stats.events = vec![merged.counters.events];
    for f in fragments {
        stats.events.push(f.counters.events);
        merged.absorb(f, p);
    }
    let homes = merged.part().homes.clone();
    if !homes.is_empty() {
        merged.jobs_mut().tasks.settle(&homes);
    }
    if merged.failures.partitioned {
        merged.failures.settle();
        merged.failures.partitioned = false;
    }
    let topo = &merged.topo;
    if let Some(c) = merged.capture.as_deref_mut() {
        c.write_recorded(topo);
    }
    merged.part = None;
    merged.parallel = Some(stats);
    // What a run that stopped early did not reach, as on one queue.
    merged.runtime(|rt, k| rt.make_rest(k));
    merged
}

/// What a partition hands over at the end of a run: the state of what
/// it owns (and, for simplicity, the rest of its components, which the
/// merge ignores), its counters and its frames in flight. It crosses
/// threads as it is and processes (MPI ranks) encoded (`encode`).
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Fragment {
    me: u32,
    qp_mine: Vec<bool>,
    series: super::series::Series,
    in_flight: Vec<Packet>,
    egress: crate::switch::egress::Egress,
    nics: crate::nic::nics::Nics,
    /// Each transfer's start and ends (`FlowEnds`).
    flows: Vec<FlowEnds>,
    /// Its share of jobs' iterations made as the run went, in order.
    later: Vec<PartEnds>,
    /// Its halves of the passes' connection rows.
    passes: crate::runtime::pass_rows::PassFlows,
    counters: super::Counters,
    firsts: super::FirstEvents,
    idle: super::IdleGaps,
    now: SimTime,
    finished_at: Option<SimTime>,
    paths: super::paths::PathLog,
    balance: super::balance::BalanceState,
    failures: super::failures::FailureState,
    tasks: crate::runtime::tasks::TaskState,
    /// The capture's frames, kept in its temporary files: moved between
    /// threads, packed into bytes between processes.
    #[serde(skip)]
    capture: Option<Box<super::capture::Capture>>,
    packed_capture: Option<super::capture::Packed>,
}

impl Fragment {
    /// The bytes that carry it to another process.
    pub(super) fn encode(mut self) -> Vec<u8> {
        self.packed_capture = self.capture.take().map(|c| c.pack());
        postcard::to_stdvec(&self).expect("a partition's state encodes")
    }

    /// A fragment from `encode`'s bytes.
    pub(super) fn decode(bytes: &[u8]) -> Result<Fragment, postcard::Error> {
        postcard::from_bytes(bytes)
    }
}

impl Simulation {
    /// This partition's part of the results.
    pub(super) fn into_fragment(self) -> Fragment {
        let part = self.part.expect("a partition");
        let jobs = *self.jobs.expect("the runtime is not in a call");
        Fragment {
            me: part.me,
            qp_mine: part.qp_mine,
            in_flight: self.packets.iter_live().copied().collect(),
            series: self.records.series,
            egress: self.egress,
            nics: self.nics,
            flows: jobs.flows.iter().map(FlowEnds::of).collect(),
            later: jobs
                .tasks
                .later
                .iter()
                .flat_map(|l| l.parts())
                .map(PartEnds::of)
                .collect(),
            passes: jobs.passes,
            counters: self.counters,
            firsts: self.records.firsts,
            idle: self.records.idle,
            now: self.now,
            finished_at: self.ending.finished_at,
            paths: self.records.paths,
            balance: self.balance,
            failures: self.failures,
            tasks: jobs.tasks,
            capture: self.capture,
            packed_capture: None,
        }
    }

    /// Takes from `other`, the results of another partition of the same
    /// run, what its partition owns (ports, switches, each side of its
    /// QPs and transfers, its time series, the frames it holds) and adds
    /// its counts.
    fn absorb(&mut self, other: Fragment, p: &Partitioning) {
        let them = other.me;
        let host_of = |nic: NicId| p.host[self.topo.nics[nic.idx()].host.idx()];
        let port_part = self.part().port_part.clone();
        let port_theirs = |i: usize| port_part[i] == them;
        let switch_theirs = |s: usize| p.switch[s] == them;
        let qp_theirs = |q: u32| other.qp_mine[q as usize];
        self.records
            .series
            .absorb(&other.series, |i| port_theirs(i as usize), qp_theirs);
        for pkt in &other.in_flight {
            self.packets.alloc(*pkt);
        }
        let homes = self.part().homes.clone();
        let jobs = self
            .jobs
            .as_deref_mut()
            .expect("the runtime is not in a call");
        jobs.tasks
            .absorb(other.tasks, &homes, |h| p.host[h as usize] == them);
        if let Some(mine) = self.capture.as_deref_mut() {
            if let Some(theirs) = other.capture {
                mine.absorb(*theirs);
            } else if let Some(packed) = other.packed_capture {
                mine.unpack(packed);
            }
        }
        self.records.paths.absorb(other.paths);
        self.balance.absorb(other.balance);
        self.failures.absorb(other.failures);
        self.egress
            .absorb(other.egress, |i| port_part[i] == them, switch_theirs);
        self.nics.absorb(
            other.nics,
            |q| host_of(q.src_nic) == them,
            |q| host_of(q.dst_nic) == them,
        );
        for (mine, theirs) in jobs.flows.iter_mut().zip(other.flows) {
            theirs.give(mine, |nic| host_of(nic) == them);
        }
        // Jobs' iterations made as the run went: every partition made the
        // same, in the same order.
        let parts = jobs.tasks.later.iter_mut().flat_map(|l| l.parts_mut());
        for (mine, theirs) in parts.zip(other.later) {
            theirs.give(mine, &self.topo, |h| p.host[h as usize] == them);
        }
        jobs.passes.absorb(&other.passes);
        self.counters = sum(&[self.counters, other.counters]);
        self.records.firsts.absorb(&other.firsts);
        self.records.idle.absorb(&other.idle);
        self.ending.finished_at = self.ending.finished_at.max(other.finished_at);
        self.now = self.now.max(other.now);
    }
}

/// Every counter summed (they only grow, so the partitions' add up).
fn sum(all: &[super::Counters]) -> super::Counters {
    let mut t = super::Counters::default();
    for c in all {
        macro_rules! add {
            ($($f:ident),*) => { $( t.$f += c.$f; )* };
        }
        add!(
            events,
            link_transmissions,
            data_packets_sent,
            payload_sent,
            payload_arrived,
            payload_dropped,
            bytes_delivered,
            drops,
            drop_bytes,
            acks_sent,
            naks_sent,
            flows_completed,
            flows_acked,
            ecn_marks,
            wred_drops,
            cnps_sent,
            cnps_received,
            pfc_pause_frames,
            pfc_resume_frames,
            lossless_drops,
            trimmed_packets,
            watchdog_events,
            watchdog_drops
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every thread passes the barrier together, many times over.
    #[test]
    fn the_barrier_holds_every_thread_each_time() {
        let b = SpinBarrier::new(3);
        let count = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for round in 0..1000 {
                        count.fetch_add(1, Ordering::SeqCst);
                        b.wait();
                        // Nobody has started the next round yet.
                        assert_eq!(count.load(Ordering::SeqCst), 3 * (round + 1));
                        b.wait();
                    }
                });
            }
        });
    }

    /// A partition whose thread panics does not leave the others waiting
    /// for it: they stop too.
    #[test]
    fn a_panicking_partition_breaks_the_barrier() {
        let b = SpinBarrier::new(2);
        let waited = std::thread::scope(|s| {
            let h = s.spawn(|| {
                let _guard = BreakOnPanic(&b);
                panic!("a partition fails");
            });
            let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.wait()));
            assert!(h.join().is_err());
            waited
        });
        assert!(waited.is_err(), "the barrier returned as if whole");
    }

    /// The CPU time the calling thread has used.
    fn thread_cpu() -> std::time::Duration {
        // SAFETY: getrusage fills the struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
        let t =
            |v: libc::timeval| std::time::Duration::new(v.tv_sec as u64, v.tv_usec as u32 * 1000);
        t(u.ru_utime) + t(u.ru_stime)
    }

    /// A thread waiting long at the barrier sleeps rather than holds its
    /// core (with the cores shared, spinning or yielding in a loop took
    /// the core the awaited thread needed: 30 s for a run of 0.03 s).
    /// Each of many waits of 20 ms costs its waiter far less CPU than
    /// its length.
    #[test]
    fn a_long_wait_at_the_barrier_sleeps() {
        let b = std::sync::Arc::new(SpinBarrier::new(2));
        let other = std::sync::Arc::clone(&b);
        let late = std::thread::spawn(move || {
            for _ in 0..10 {
                std::thread::sleep(std::time::Duration::from_millis(20));
                other.wait();
            }
        });
        let before = thread_cpu();
        for _ in 0..10 {
            b.wait();
        }
        let used = thread_cpu() - before;
        late.join().unwrap();
        assert!(
            used < std::time::Duration::from_millis(60),
            "{used:?} of CPU in 200 ms of waiting"
        );
    }
}
