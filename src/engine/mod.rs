//! The discrete-event core: the world, the event queue and the loop.
//!
//! `Simulation` owns every component (ports, switches, queue pairs, flows,
//! the packet arena) and a queue of events keyed by (time, sequence). Each
//! event is handled by handing the right component what it needs; the
//! components return what should happen next and the loop schedules it.
//! Nothing here reads the wall clock or global state, so several
//! simulations can run side by side in one process.
//!
//! One packet's life: the NIC port's transmitter pulls it from a QP
//! (`start_tx`), which schedules `TxDone` after serialization and `Arrive`
//! at the peer after serialization plus propagation; a switch runs its
//! pipeline on `Arrive` and queues it on an egress port; the destination
//! NIC's responder consumes it and may answer with an ACK or NAK, which
//! travels back the same way.
//!
//! The lossless machinery (WRED marking, PFC pause and resume, the
//! watchdog, CNPs) is in `lossless`; it hooks into admission at a switch,
//! the start of a transmission and a NIC's receive path.

mod balance;
pub mod build;
pub mod capture;
mod view;
pub use capture::FrameSink;
pub mod deadlock;
pub mod failures;
mod memory;
pub use memory::MemoryEstimate;
pub mod ideal;
mod lossless;
pub mod paths;
pub mod queue;
pub mod series;
pub mod tasks;

use crate::cache::prefetch_read;
use crate::nic::nics::{NicCounters, Nics, Pull, Rx};
use crate::nic::transport::{ReorderPool, TimerAction};
use crate::rng::Streams;
use crate::scenario::{Prepared, Scenario};
use crate::switch::balance::Ctx;
use crate::switch::egress::{Egress, EgressCounters, EgressFirsts, Fate, Io, NicTurn, Timed};
use crate::switch::schedule::{Queued, LOCAL};
use crate::switch::SwitchState;
use crate::topology::routing::Routes;
use crate::topology::{FlowId, NicId, Owner, PortId, QpId, Topology};
use crate::units::SimTime;
use crate::wire::{Opcode, Packet, PacketArena, PacketId};
use crate::workload::FlowSpec;
use queue::EventQueue;

#[derive(Clone, Copy, Debug)]
pub enum Event {
    /// A port finished serializing its current frame.
    TxDone(PortId),
    /// A frame arrives at a port (the ingress side of the port's owner).
    Arrive(PortId, PacketId),
    /// A transfer starts.
    FlowStart(FlowId),
    /// A NIC port may send again (a rate-limited QP became eligible).
    Wake(PortId),
    /// A QP's retransmission timer.
    Rto(QpId),
    /// The receiver of a QP sends its CNP (after the generation delay).
    Cnp(QpId),
    /// Re-send a pause on this port and priority if still congested.
    PfcRefresh(PortId, u8),
    /// The PFC watchdog checks this port's queue.
    Watchdog(PortId, u8),
    /// A NIC pause storm starts (true) or stops.
    Storm(u32, bool),
    /// Record queue depths and QP rates.
    Sample,
    /// DLB and GLB switches refresh their ports' quality bands.
    Quality,
    /// GLB helpers send heartbeats where their bands changed.
    Heartbeat,
    /// ALB switches sample bucket rates and rebalance.
    Alb,
    /// Failure `i` of the scenario happens, or ends.
    Fail(u32),
    Recover(u32),
    /// Routing reacts to the failures and recoveries so far.
    Reconverge,
    /// A task of the graph may start (its time has come).
    TaskReady(u32),
    /// A task's time (compute, NVLink latency) is over.
    TaskDone(u32),
    /// A connection's message is on the wire: its next one may start.
    LaneFree(u32),
    /// An NVLink copy in this host may be done (host, generation).
    Nvlink(u32, u32),
}

pub use crate::nic::nics::{mrc_sport, QpState};

pub struct FlowState {
    pub spec: FlowSpec,
    /// When it started (its task's start for a gated flow).
    pub start: SimTime,
    pub first_qp: u32,
    pub n_qps: u32,
    pub rx_done_qps: u32,
    pub tx_done_qps: u32,
    /// When the last byte was delivered in order at the destination.
    pub finish: Option<SimTime>,
    /// When the sender saw the last acknowledgement.
    pub acked: Option<SimTime>,
    /// Completion time on an idle fabric (see `ideal_fct`).
    pub ideal_fct: SimTime,
}

/// Fabric-wide counters. The engine keeps those of the payload ledger,
/// transfers and drops; those egress keeps (`EgressCounters`: link
/// transmissions, marks, drops in the switches, PFC frames, trims, the
/// watchdog) and the NICs keep (`NicCounters`: packets sent, ACKs, NAKs,
/// CNPs) are filled in by `Simulation::counters`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub events: u64,
    /// Frames of every kind put on any link.
    pub link_transmissions: u64,
    pub data_packets_sent: u64,
    pub payload_sent: u64,
    pub payload_arrived: u64,
    pub payload_dropped: u64,
    pub payload_in_flight: u64,
    /// Payload accepted in order by responders (goodput).
    pub bytes_delivered: u64,
    pub drops: u64,
    pub drop_bytes: u64,
    pub acks_sent: u64,
    pub naks_sent: u64,
    pub flows_completed: u64,
    /// Transfers whose sender has seen every acknowledgement.
    pub flows_acked: u64,
    pub ecn_marks: u64,
    pub wred_drops: u64,
    pub cnps_sent: u64,
    pub cnps_received: u64,
    /// PFC frames with a pause time, and with quanta 0 (resume).
    pub pfc_pause_frames: u64,
    pub pfc_resume_frames: u64,
    /// Packets of a lossless class dropped for lack of buffer or headroom.
    pub lossless_drops: u64,
    pub trimmed_packets: u64,
    pub watchdog_events: u64,
    pub watchdog_drops: u64,
}

impl Counters {
    /// These counters with egress's filled in.
    pub fn with_egress(self, e: &EgressCounters) -> Counters {
        Counters {
            link_transmissions: e.link_transmissions,
            ecn_marks: e.ecn_marks,
            wred_drops: e.wred_drops,
            lossless_drops: e.lossless_drops,
            trimmed_packets: e.trimmed_packets,
            watchdog_events: e.watchdog_events,
            watchdog_drops: e.watchdog_drops,
            pfc_pause_frames: e.pfc_pause_frames,
            pfc_resume_frames: e.pfc_resume_frames,
            ..self
        }
    }
}

impl Counters {
    /// These counters with the NICs' filled in.
    pub fn with_nics(self, n: &NicCounters) -> Counters {
        Counters {
            data_packets_sent: n.data_packets_sent,
            acks_sent: n.acks_sent,
            naks_sent: n.naks_sent,
            cnps_sent: n.cnps_sent,
            cnps_received: n.cnps_received,
            ..self
        }
    }
}

/// When each congestion mechanism first acted: the order a user reads
/// to see whether ECN acted before PFC. The engine sets the NIC's (CNP,
/// rate cut); egress's are filled in by `Simulation::firsts`.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct FirstEvents {
    pub ecn_mark_ps: Option<u64>,
    pub cnp_ps: Option<u64>,
    pub rate_cut_ps: Option<u64>,
    /// First pause sent by a switch of each tier (leaf, spine, super
    /// spine), and by a NIC.
    pub pause_by_tier_ps: [Option<u64>; 3],
    pub pause_by_nic_ps: Option<u64>,
    pub resume_ps: Option<u64>,
    pub watchdog_ps: Option<u64>,
    pub lossless_drop_ps: Option<u64>,
}

impl FirstEvents {
    /// These times with egress's filled in.
    pub fn with_egress(self, e: &EgressFirsts) -> FirstEvents {
        FirstEvents {
            ecn_mark_ps: e.ecn_mark_ps,
            pause_by_tier_ps: e.pause_by_tier_ps,
            pause_by_nic_ps: e.pause_by_nic_ps,
            resume_ps: e.resume_ps,
            watchdog_ps: e.watchdog_ps,
            lossless_drop_ps: e.lossless_drop_ps,
            ..self
        }
    }
}

pub(crate) use crate::switch::egress::first;

/// What a run should cost, worked out before it starts from its traffic
/// and paths: every data packet and ACK over each link of its QP's first
/// path, with nothing lost or retransmitted and no CNPs or PFC frames.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimate {
    pub link_transmissions: u64,
    pub events: u64,
}

impl Estimate {
    /// Events per link transmission on the benchmarks (1.5 to 1.9: an
    /// arrival per hop, plus transmitter wake-ups and timers).
    pub const EVENTS_PER_LINK_TX: f64 = 1.7;
    /// Link transmissions per wall second assumed for the wall-time
    /// guess: what the 1024-host benchmark reaches on the reference
    /// machine (BENCHMARKS.md); smaller fabrics run faster, larger slower.
    pub const LINK_TX_PER_SECOND: f64 = 2e6;

    /// The wall-time guess, in seconds.
    pub fn wall_seconds(&self) -> f64 {
        self.link_transmissions as f64 / Self::LINK_TX_PER_SECOND
    }
}

/// Why a run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
}

/// Events handled between checks of the wall clock and of interruption.
const BATCH: u64 = 1 << 16;

pub use crate::switch::egress::NO_SLOT;

/// The engine's side of egress's `Io`: the clock, the packets, the event
/// queue, and whether a NIC port's QPs have data.
struct Wires<'a> {
    now: SimTime,
    queue: &'a mut EventQueue<Event>,
    packets: &'a mut PacketArena,
    nics: &'a Nics,
}

impl Io for Wires<'_> {
    #[inline]
    fn now(&self) -> SimTime {
        self.now
    }

    #[inline]
    fn packets(&mut self) -> &mut PacketArena {
        self.packets
    }

    #[inline]
    fn at(&mut self, t: SimTime, what: Timed) {
        let ev = match what {
            Timed::Arrive(p, id) => Event::Arrive(p, id),
            Timed::TxDone(p) => Event::TxDone(p),
            Timed::Wake(p) => Event::Wake(p),
            Timed::PfcRefresh(p, prio) => Event::PfcRefresh(p, prio),
            Timed::Watchdog(p, prio) => Event::Watchdog(p, prio),
        };
        self.queue.push(t, ev);
    }

    #[inline]
    fn nic_backlog(&self, p: PortId) -> bool {
        self.nics.backlog(p)
    }
}

/// `Wires` over a simulation's fields, borrowed apart from its `egress`.
macro_rules! io {
    ($sim:ident) => {
        Wires {
            now: $sim.now,
            queue: &mut $sim.queue,
            packets: &mut $sim.packets,
            nics: &$sim.nics,
        }
    };
}
use io;

pub struct Simulation {
    now: SimTime,
    queue: EventQueue<Event>,
    scenario: Scenario,
    topo: Topology,
    routes: Routes,
    /// Every port's egress and the switches (see `switch::egress`).
    egress: Egress,
    /// Every NIC's QPs, rings, reorder buffers and PCIe (see `nic::nics`).
    nics: Nics,
    /// Quality bands, GLB heartbeats and ALB ticks.
    balance: balance::BalanceState,
    /// Tenant of each QP, which TELB policies match.
    qp_tenant: Vec<u16>,
    /// Where dynamic balancers sent each QP's packets.
    paths: paths::PathLog,
    /// Failed links and switches and what they cost.
    failures: failures::FailureState,
    /// Time series sampled as the run goes (see `series`).
    series: series::Series,
    /// A packet capture in progress, if one was asked for.
    capture: Option<Box<capture::Capture>>,
    packets: PacketArena,
    flows: Vec<FlowState>,
    /// The task graph of collectives and jobs, and NVLink copies.
    tasks: tasks::TaskState,
    counters: Counters,
    /// What the run should cost, from its traffic and paths.
    estimate: Estimate,
    /// The cycle of a PFC deadlock, once found (`StopReason::Deadlock`).
    deadlock: Vec<deadlock::Waiting>,
    firsts: FirstEvents,
}

impl Simulation {
    pub fn new(prepared: Prepared) -> Simulation {
        let Prepared {
            scenario,
            topology: topo,
            routes,
            flows: specs,
            graph,
            collectives,
            jobs,
        } = prepared;
        let streams = Streams::new(scenario.seed);
        let egress = build::egress(&topo, &routes, &scenario, &streams);
        let mut queue = EventQueue::new();
        let (qps, flows) = build::qps_and_flows(&topo, &scenario, specs, &streams, &mut queue);
        for (i, storm) in scenario.qos.pfc.storms.iter().enumerate() {
            queue.push(storm.start, Event::Storm(i as u32, true));
            if let Some(stop) = storm.stop {
                queue.push(stop, Event::Storm(i as u32, false));
            }
        }
        if let Some(every) = scenario.report.sample_interval {
            queue.push(every, Event::Sample);
        }
        let paths = paths::PathLog::new(
            scenario.transport.mrc.is_some()
                || egress
                    .switches()
                    .iter()
                    .any(|s: &SwitchState| !s.balancer.is_static()),
            qps.len(),
        );
        let failures =
            failures::FailureState::new(&scenario.failures, &topo, &routes, qps.len(), |t, e| {
                queue.push(t, e)
            });
        let balance = balance::BalanceState::new(&topo, &scenario, |t, e| queue.push(t, e));
        let nvlink = tasks::Nvlink::new(
            topo.hosts.len(),
            scenario.host.nvlink_bytes_per_s / 2,
            scenario.host.nvlink_latency,
        );
        let tasks = tasks::TaskState::new(graph, collectives, jobs, flows.len(), nvlink, |t, e| {
            queue.push(t, e)
        });
        let qp_tenant: Vec<u16> = qps
            .iter()
            .map(|q| {
                let w = flows[q.flow.idx()].spec.workload as usize;
                scenario.workloads.get(w).map_or(0, |w| w.tenant)
            })
            .collect();
        let series = series::Series::new(
            scenario.report.sample_interval,
            scenario.report.samples,
            topo.ports.len(),
            scenario.report.sample_qps.min(qps.len()),
            scenario.qos.map.queues_used(),
        );
        let nics = build::nics(&topo, &scenario, qps);
        let mut sim = Simulation {
            now: SimTime::ZERO,
            queue,
            scenario,
            topo,
            routes,
            egress,
            nics,
            paths,
            failures,
            balance,
            qp_tenant,
            series,
            capture: None,
            packets: PacketArena::default(),
            flows,
            tasks,
            counters: Counters::default(),
            estimate: Estimate::default(),
            deadlock: Vec::new(),
            firsts: FirstEvents::default(),
        };
        sim.estimate_and_ideal();
        sim
    }

    /// Runs until nothing is left, or the scenario's `max_sim_time`.
    /// `progress` is called every 2^18 events.
    ///
    /// A run that waits on the network (some transfer started and not
    /// acknowledged) for a thousand watch intervals (`watch_interval`),
    /// and at least eight retransmission timeouts, of simulated time
    /// without delivering or acknowledging a single byte
    /// is stuck (say, a buffer too small for the incast it gets, or a
    /// dead link with no way around) and stops as `Stalled`.
    pub fn run(&mut self, progress: impl FnMut(&Simulation)) -> StopReason {
        self.run_limited(&Limits::default(), progress)
    }

    /// As `run`, stopping early at any of `limits`.
    pub fn run_limited(
        &mut self,
        limits: &Limits,
        progress: impl FnMut(&Simulation),
    ) -> StopReason {
        let stop = self.run_to_end(limits, progress);
        self.finish_series();
        stop
    }

    fn run_to_end(&mut self, limits: &Limits, mut progress: impl FnMut(&Simulation)) -> StopReason {
        let limit = self.scenario.max_sim_time.unwrap_or(SimTime::MAX);
        let watch_every = self.watch_interval();
        let stall_after = self.stall_after();
        let mut last = (self.now, self.progress_mark());
        let started = std::time::Instant::now();
        let mut since_progress: u64 = 0;
        let mut watch = deadlock::Watch::default();
        let mut delivered = (self.counters.bytes_delivered, self.now);
        loop {
            let batch = match limits.max_events {
                Some(m) if self.counters.events >= m => return StopReason::EventLimit,
                Some(m) => BATCH.min(m - self.counters.events),
                None => BATCH,
            };
            // Batches end at least every watch interval of simulated
            // time, so that a run where little happens (a deadlock) is
            // still checked often. The window opens at the
            // next event, not at `now`: when nothing is due for longer
            // than a timeout (a long compute phase, a late start), a
            // window from `now` would hold no event and the loop would
            // ask for the same empty window forever.
            let from = self.queue.peek_time().map_or(self.now, |t| t.max(self.now));
            let until = limit.min(SimTime(from.0.saturating_add(watch_every.0)));
            let stop = self.run_until(until, batch);
            match stop {
                StopReason::Paused if self.queue.peek_time().is_some_and(|t| t <= limit) => {
                    if limits
                        .interrupt
                        .as_ref()
                        .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
                    {
                        return StopReason::Interrupted;
                    }
                    if limits.max_wall.is_some_and(|w| started.elapsed() >= w) {
                        return StopReason::WallLimit;
                    }
                    if limits.max_memory.is_some_and(|(most, now)| now() > most) {
                        return StopReason::MemoryLimit;
                    }
                    // Nothing delivered for a retransmission timeout: look
                    // for a PFC cycle.
                    if self.counters.bytes_delivered != delivered.0 {
                        delivered = (self.counters.bytes_delivered, self.now);
                        watch.clear();
                    } else if self.now.saturating_sub(delivered.1) >= watch_every
                        && self.deadlocked(&mut watch)
                    {
                        return StopReason::Deadlock;
                    }
                    since_progress += batch;
                    if since_progress >= 4 * BATCH {
                        since_progress = 0;
                        let mark = self.progress_mark();
                        // Only time spent waiting on the network counts
                        // towards a stall: a long compute phase or a late
                        // start is not one.
                        if mark != last.1 || !self.network_waiting() {
                            last = (self.now, mark);
                        } else if self.now.saturating_sub(last.0) > stall_after {
                            return StopReason::Stalled;
                        }
                        progress(self)
                    }
                }
                StopReason::Paused => return StopReason::SimTimeLimit,
                other => return other,
            }
        }
    }

    /// How far the run has got, from 0 to 1, for progress display: the
    /// larger of the share of offered bytes delivered, the share of
    /// workload tasks done and, with a `max_sim_time`, the share of it
    /// elapsed. Compute phases deliver no bytes, so bytes alone would
    /// stall the estimate through them.
    pub fn done_fraction(&self) -> f64 {
        let offered: u64 = self.flows.iter().map(|f| f.spec.bytes).sum();
        let bytes = if offered == 0 {
            0.0
        } else {
            self.counters.bytes_delivered as f64 / offered as f64
        };
        let tasks = self.tasks.graph.tasks.len();
        let tasks = if tasks == 0 {
            0.0
        } else {
            self.tasks.tasks_done as f64 / tasks as f64
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
        self.flows
            .iter()
            .any(|f| f.acked.is_none() && f.start <= self.now)
    }

    /// Changes whenever any transfer makes progress.
    fn progress_mark(&self) -> (u64, u64) {
        let acked: u64 = self.nics.qps().iter().map(|q| q.req.una as u64).sum();
        (self.counters.bytes_delivered, acked + self.tasks.tasks_done)
    }

    /// Handles events due at or before `until`, at most `max_events` of
    /// them. The run is finished when every transfer has been delivered
    /// and acknowledged; what is left then (timers that would lapse) is
    /// not simulated, so `now` is the time of the last acknowledgement.
    pub fn run_until(&mut self, until: SimTime, max_events: u64) -> StopReason {
        let mut handled = 0;
        let total = self.flows.len() as u64;
        while let Some(t) = self.queue.peek_time() {
            if self.counters.flows_acked == total && self.tasks.all_done() {
                return StopReason::Finished;
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
            self.counters.events += 1;
            handled += 1;
            self.handle(ev);
        }
        StopReason::Finished
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

    pub fn pending_events(&self) -> usize {
        self.queue.len()
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::TxDone(p) => {
                let turn = self.egress.tx_done(&mut io!(self), p);
                self.after(p, turn)
            }
            Event::Arrive(p, id) => self.arrive(p, id),
            Event::FlowStart(f) => self.flow_start(f),
            Event::Wake(p) => {
                let turn = self.egress.wake(&mut io!(self), p);
                self.after(p, turn)
            }
            Event::Rto(q) => self.rto(q),
            Event::Cnp(q) => self.send_cnp(q),
            Event::PfcRefresh(p, prio) => {
                let turn = self.egress.pfc_refresh(&mut io!(self), p, prio);
                self.after(p, turn)
            }
            Event::Watchdog(p, prio) => {
                self.egress.watchdog(&mut io!(self), p, prio);
                self.settle()
            }
            Event::Storm(i, on) => self.storm(i as usize, on),
            Event::Sample => {
                // Sampling only reads: it is not an event of the model.
                self.counters.events -= 1;
                self.sample()
            }
            Event::Quality => self.refresh_quality(),
            Event::Heartbeat => self.heartbeat(),
            Event::Alb => self.alb_tick(),
            Event::Fail(i) => self.fail(i, false),
            Event::Recover(i) => self.fail(i, true),
            Event::Reconverge => self.reconverge(),
            Event::TaskReady(t) => self.task_ready(t),
            Event::TaskDone(t) => self.task_done(t),
            Event::LaneFree(l) => self.lane_free(l),
            Event::Nvlink(h, gen) => self.nvlink_event(h, gen),
        }
    }

    fn flow_start(&mut self, f: FlowId) {
        self.flows[f.idx()].start = self.now;
        let (first, n) = {
            let fl = &self.flows[f.idx()];
            (fl.first_qp, fl.n_qps)
        };
        for q in first..first + n {
            self.nics.activate(QpId(q));
        }
        for q in first..first + n {
            self.kick_qp(QpId(q));
        }
    }

    /// Wakes every port a QP sends from.
    fn kick_qp(&mut self, q: QpId) {
        for k in 0..self.nics.qp(q).planes.len() {
            let p = self.nics.qp(q).planes[k];
            self.kick(p);
        }
    }

    /// Called when a port may have something new to send (see
    /// `Egress::kick`).
    #[inline]
    fn kick(&mut self, p: PortId) {
        let turn = self.egress.kick(&mut io!(self), p);
        self.after(p, turn)
    }

    /// Asks for a `Wake` of port `p` at `at` unless an earlier one is due.
    fn wake_at(&mut self, p: PortId, at: SimTime) {
        self.egress.wake_at(&mut io!(self), p, at)
    }

    /// A NIC offers a frame it made to its port `p`.
    fn offer(&mut self, p: PortId, queue: u8, id: PacketId) {
        let e = Queued {
            id,
            wire_bytes: self.packets.get(id).wire_bytes,
            ingress: LOCAL,
        };
        let turn = self.egress.offer(&mut io!(self), p, queue, e);
        self.after(p, turn)
    }

    /// After a call into egress: accounts what it dropped, lost, trimmed
    /// or captured, and gives a NIC port whose turn it is a data packet.
    #[inline(always)]
    fn after(&mut self, p: PortId, turn: NicTurn) {
        self.settle();
        if let NicTurn(Some(n)) = turn {
            self.nic_turn(p, n);
        }
    }

    /// NIC port `p` is idle with its data queue open: it sends the next
    /// data packet of its QPs, if one may go now.
    fn nic_turn(&mut self, p: PortId, n: NicId) {
        match self.nics.pull(self.now, p, n, &mut self.packets) {
            Pull::Sent { q, id, timer, last } => {
                if let Some(at) = timer {
                    self.queue.push(at, Event::Rto(q));
                }
                let payload = self.packets.get(id).payload as u64;
                self.counters.payload_sent += payload;
                self.counters.payload_in_flight += payload;
                if let Some(sent) = self.series.qp_sent.get_mut(q.idx()) {
                    *sent += payload;
                }
                if last {
                    self.flow_sent(self.nics.qp(q).flow);
                }
                let e = Queued {
                    id,
                    wire_bytes: self.packets.get(id).wire_bytes,
                    ingress: LOCAL,
                };
                let dq = self.nics.data_queue();
                self.egress.transmit(&mut io!(self), p, e, dq);
                self.settle();
            }
            Pull::WaitUntil(t) => self.wake_at(p, t),
            Pull::Idle => {}
        }
    }

    /// Accounts the frames egress reported as not simply going on.
    #[inline(always)]
    fn settle(&mut self) {
        if self.egress.has_fates() {
            self.settle_fates();
        }
    }

    #[inline(never)]
    fn settle_fates(&mut self) {
        let mut fates = self.egress.take_fates();
        for f in fates.drain(..) {
            match f {
                Fate::Dropped(pkt) => self.dropped(&pkt),
                Fate::Lost(p, pkt) => self.lost(Some(p), &pkt),
                Fate::Trimmed(payload) => {
                    self.counters.payload_dropped += payload as u64;
                    self.counters.payload_in_flight -= payload as u64;
                }
                Fate::Sent(p, pkt) => self.capture_frame(p, &pkt),
            }
        }
        self.egress.give_back_fates(fates);
    }

    fn arrive(&mut self, p: PortId, id: PacketId) {
        if self.egress.is_down(p) {
            let pkt = self.packets.take(id);
            self.lost(Some(p), &pkt);
            return;
        }
        match self.egress.owner(p) {
            Owner::Switch(s) => {
                let pkt = *self.packets.get(id);
                match pkt.opcode {
                    Opcode::Pause => {
                        self.packets.free(id);
                        let turn = self.egress.receive_pause(&mut io!(self), p, &pkt);
                        self.after(p, turn);
                        return;
                    }
                    Opcode::Heartbeat => {
                        self.receive_heartbeat(p, &pkt);
                        self.packets.free(id);
                        return;
                    }
                    _ => {}
                }
                let si = s.idx();
                let ctx = Ctx {
                    now: self.now,
                    quality: &self.balance.quality,
                    ingress: p,
                    queue: 0,
                    class: self.routes.nic_class[pkt.dst.idx()],
                    tenants: &self.qp_tenant,
                };
                let Some(to) =
                    self.egress
                        .switch_mut(si)
                        .route(&self.routes.switches[si], &pkt, ctx)
                else {
                    // Only failures leave validated traffic without a route.
                    debug_assert!(self.failures.any(), "validated traffic has a route");
                    let pkt = self.packets.take(id);
                    self.lost(None, &pkt);
                    return;
                };
                if self.paths.enabled && pkt.opcode.is_data() {
                    self.paths.qps[pkt.qp.idx()].record(s, to.0);
                }
                self.egress.admit(&mut io!(self), si, p, to, id, &pkt);
                self.settle();
            }
            Owner::Nic(_) => {
                if self.packets.get(id).opcode == Opcode::Pause {
                    let pkt = self.packets.take(id);
                    let turn = self.egress.receive_pause(&mut io!(self), p, &pkt);
                    self.after(p, turn);
                } else {
                    self.nic_receive(p, id);
                }
            }
        }
    }

    /// Counts a frame dropped anywhere (already freed).
    fn dropped(&mut self, pkt: &Packet) {
        if pkt.opcode == Opcode::Heartbeat {
            self.balance.heartbeat_lost(pkt);
        }
        self.counters.drops += 1;
        self.counters.drop_bytes += pkt.wire_bytes as u64;
        if pkt.opcode.is_data() {
            self.counters.payload_dropped += pkt.payload as u64;
            self.counters.payload_in_flight -= pkt.payload as u64;
        }
    }

    /// A frame arrived at NIC port `at`.
    fn nic_receive(&mut self, at: PortId, id: PacketId) {
        let pkt = self.packets.take(id);
        let now = self.now;
        match self.nics.receive(now, at, &pkt, &mut self.packets) {
            Rx::Nothing => {}
            Rx::Reply(f) => self.offer(f.port, f.queue, f.id),
            Rx::RateCut(port) => {
                series::count_cnp(&mut self.series, port);
                first(&mut self.firsts.rate_cut_ps, now);
            }
            Rx::Acked(flow) => {
                let f = &mut self.flows[flow.idx()];
                f.tx_done_qps += 1;
                if f.tx_done_qps == f.n_qps {
                    f.acked = Some(now);
                    self.counters.flows_acked += 1;
                }
            }
            Rx::Resend(q) => self.kick_qp(q),
            Rx::Data {
                q,
                ce,
                delivered,
                completed,
                reply,
            } => {
                self.counters.payload_arrived += pkt.payload as u64;
                self.counters.payload_in_flight -= pkt.payload as u64;
                if ce {
                    self.congestion_experienced(q);
                }
                if delivered > 0 {
                    self.counters.bytes_delivered += delivered;
                    self.progressed(q);
                }
                if completed {
                    let flow = self.nics.qp(q).flow;
                    let f = &mut self.flows[flow.idx()];
                    f.rx_done_qps += 1;
                    if f.rx_done_qps == f.n_qps {
                        f.finish = Some(now);
                        self.counters.flows_completed += 1;
                        if let Some(t) = self.tasks.of_flow(flow) {
                            self.task_done(t);
                        }
                    }
                }
                if let Some(r) = reply {
                    let f = self.nics.reply(q, at, &pkt, r, &mut self.packets);
                    self.offer(f.port, f.queue, f.id);
                }
            }
        }
    }

    fn rto(&mut self, q: QpId) {
        match self.nics.timer(self.now, q) {
            TimerAction::Lapse => {}
            TimerAction::Wait(at) => self.queue.push(at, Event::Rto(q)),
            TimerAction::Retransmit(at) => {
                self.queue.push(at, Event::Rto(q));
                self.kick_qp(q);
            }
        }
    }

    /// The egress ports a QP's data packets leave through, from its NIC
    /// port to the last switch, when every switch on the way balances by
    /// header alone; `None` if some choice is dynamic.
    pub fn qp_route(&self, q: QpId) -> Option<Vec<PortId>> {
        self.static_route(q, false)
    }

    /// The same for the QP's acknowledgements, from the receiver back.
    pub fn qp_ack_route(&self, q: QpId) -> Option<Vec<PortId>> {
        self.static_route(q, true)
    }

    fn static_route(&self, q: QpId, reverse: bool) -> Option<Vec<PortId>> {
        let qp = self.nics.qp(q);
        if !reverse && !qp.path_crc.is_empty() {
            // MRC sprays each QP over several UDP source ports.
            return None;
        }
        let start = if reverse { qp.dst_port } else { qp.src_port };
        let pkt = self.nics.probe(q, reverse);
        let mut route = vec![start];
        let mut at = self.topo.port(start).peer;
        for _ in 0..=self.topo.switches.len() {
            match self.egress.owner(at) {
                Owner::Nic(_) => return Some(route),
                Owner::Switch(s) => {
                    let routes = &self.routes.switches[s.idx()];
                    let group = crate::switch::forward::lookup(
                        routes,
                        pkt.dst,
                        self.routes.nic_class[pkt.dst.idx()],
                    )?;
                    let out = self.egress.switches()[s.idx()]
                        .balancer
                        .static_choice(routes, group, &pkt)?;
                    route.push(out);
                    at = self.topo.port(out).peer;
                }
            }
        }
        None
    }

    /// The switches a QP's data packets traverse (see `qp_route`).
    pub fn qp_path(&self, q: QpId) -> Option<Vec<crate::topology::SwitchId>> {
        let route = self.qp_route(q)?;
        Some(
            route[1..]
                .iter()
                .filter_map(|&p| match self.egress.owner(p) {
                    Owner::Switch(s) => Some(s),
                    Owner::Nic(_) => None,
                })
                .collect(),
        )
    }

    /// Checks conservation of payload bytes: everything sent has arrived,
    /// been dropped, or is still in flight (queued or on a wire). Returns
    /// a description of the first violation.
    pub fn check_conservation(&self) -> Result<(), String> {
        let c = &self.counters;
        let in_flight: u64 = self
            .packets
            .iter_live()
            .filter(|p| p.opcode.is_data())
            .map(|p| p.payload as u64)
            .sum();
        if in_flight != c.payload_in_flight {
            return Err(format!(
                "in-flight payload by walking packets is {in_flight}, by counting {}",
                c.payload_in_flight
            ));
        }
        if c.payload_sent != c.payload_arrived + c.payload_dropped + in_flight {
            return Err(format!(
                "sent {} != arrived {} + dropped {} + in flight {in_flight}",
                c.payload_sent, c.payload_arrived, c.payload_dropped
            ));
        }
        self.egress.check_buffers()
    }
}
