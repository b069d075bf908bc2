//! The discrete-event core: the world, its events and their handlers.
//!
//! `Simulation` holds the components (`switch::egress::Egress`: every
//! port's egress and the switches; `nic::nics::Nics`: the QPs and what
//! NICs do; `runtime::Runtime`: the transfers and the task graph, which
//! sees this engine as its `Kernel`), the packet arena and a queue of
//! events ordered by (time, key), the key naming the event's kind and the
//! port, QP, task or host it is for (see `Event::key`). Each event is handled by handing the
//! right component the time and what it needs; components return what
//! should happen next (`Timed` actions, a NIC's turn to send, `Fate`s of
//! frames that did not go on, `Rx` of what arrived) and the handlers here
//! schedule and account it. The loop itself is in `run`.
//!
//! One packet's life: a NIC port whose egress is idle gets its turn
//! (`nic_turn`): its QPs build the next data packet (`Nics::pull`) and
//! egress serializes it, scheduling `Arrive` at the peer; a switch routes
//! it on `Arrive` and egress admits and queues or sends it; the
//! destination NIC's responder consumes it (`Nics::receive`) and may
//! answer with an ACK, NAK or CNP, which travels back the same way.
//!
//! `lossless` holds the NIC side of PFC storms and CNPs; `failures`,
//! `balance` (DLB bands, GLB heartbeats, ALB), `series` and `capture`
//! the other event handlers; the runtime's timers go to `Runtime::due`.

mod balance;
pub mod build;
pub mod capture;
mod view;
pub use capture::FrameSink;
pub mod deadlock;
mod event;
pub mod failures;
pub mod fluid;
mod hybrid;
mod kernel;
mod memory;
mod outcome;
pub mod parallel;
mod run;
pub use memory::MemoryEstimate;
mod lossless;
pub mod paths;
pub mod queue;
pub mod series;

use crate::cache::prefetch_read;
use crate::nic::nics::{Nics, Pull, Rx};
use crate::nic::transport::{ReorderPool, TimerAction};
use crate::rng::Streams;
use crate::scenario::{Prepared, Scenario};
use crate::switch::balance::Ctx;
use crate::switch::egress::{Egress, Fate, Io, NicTurn, Timed};
use crate::switch::schedule::{Queued, LOCAL};
use crate::switch::SwitchState;
use crate::topology::routing::Routes;
use crate::topology::{FlowId, NicId, Owner, PortId, QpId, Topology};
use crate::units::SimTime;
use crate::wire::{Opcode, Packet, PacketArena, PacketId};
use queue::EventQueue;

pub use event::Event;

pub use crate::nic::nics::{mrc_sport, QpState};
pub use crate::runtime::FlowState;
use crate::runtime::{Due, Kernel, Runtime};
use kernel::Kern;

pub(crate) use crate::switch::egress::first;
pub use outcome::{Counters, Estimate, FirstEvents, IdleGaps, Progress};
pub use run::{Limits, StopReason};

pub use crate::switch::egress::NO_SLOT;

/// The engine's side of egress's `Io`: the clock, the packets, the event
/// queue, and whether a NIC port's QPs have data.
struct Wires<'a> {
    now: SimTime,
    queue: &'a mut EventQueue<Event>,
    packets: &'a mut PacketArena,
    nics: &'a Nics,
    part: &'a mut Option<Box<parallel::Part>>,
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

    #[inline(always)]
    fn at(&mut self, t: SimTime, what: Timed) {
        let ev = match what {
            Timed::Arrive(p, id) => {
                if self.part.is_some() && self.send_to_other_partition(t, p, id) {
                    return;
                }
                Event::Arrive(p, id)
            }
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
            part: &mut $sim.part,
        }
    };
}
use io;

/// In a partition of a parallel run (`keyed`): the key of the event
/// being handled, which orders its frames and losses among the other
/// partitions' (see `parallel::partition_event`).
#[derive(Default)]
struct Keying {
    handling: u32,
    keyed: bool,
}

/// When the run ends.
struct Ending {
    /// When every transfer was acknowledged and every task done (in a
    /// partition: every transfer it sends).
    finished_at: Option<SimTime>,
    /// The transfers whose acknowledgement ends the run (in a partition,
    /// those it sends).
    finish_total: u64,
    /// When the run ends: a tail after `finished_at` (in a partition,
    /// after the last partition's).
    end: Option<SimTime>,
    /// How long the run goes on after that: the longest link delay.
    tail: SimTime,
}

/// What the run records for its outputs, besides its counters.
struct Records {
    /// Where dynamic balancers sent each QP's packets.
    paths: paths::PathLog,
    /// Time series sampled as the run goes (see `series`).
    series: series::Series,
    /// What the run should cost, from its traffic and paths.
    estimate: Estimate,
    /// When the first mark, cut, pause... happened.
    firsts: FirstEvents,
    /// Long stretches with no event of the model.
    idle: IdleGaps,
    /// The cycle of a PFC deadlock, once found (`StopReason::Deadlock`).
    deadlock: Vec<deadlock::Waiting>,
}

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
    /// Failed links and switches and what they cost.
    failures: failures::FailureState,
    /// A packet capture in progress, if one was asked for.
    capture: Option<Box<capture::Capture>>,
    packets: PacketArena,
    /// The job runtime (`crate::runtime`): transfers, the task graph,
    /// collectives' passes, ring streams. Taken out while it runs a call
    /// (`Simulation::runtime`).
    jobs: Option<Box<Runtime>>,
    counters: Counters,
    /// When the run ends.
    ending: Ending,
    /// What the run records for its outputs besides its counters.
    records: Records,
    /// The partition this simulation runs, in a parallel run.
    part: Option<Box<parallel::Part>>,
    /// The flow-level network, in a `fidelity = "flow"` or `"hybrid"` run.
    fluid: Option<Box<crate::fluid::Fluid>>,
    /// In a hybrid run, the packet region and the links shared with the
    /// fluids (`hybrid`).
    hybrid: Option<Box<hybrid::Hybrid>>,
    /// How the run was spread over threads, once it has been.
    parallel: Option<parallel::ParallelStats>,
    /// In a partition of a parallel run: the key of the event being
    /// handled (see `Keying`).
    keying: Keying,
}

impl Simulation {
    pub fn new(prepared: Prepared) -> Simulation {
        let region = (prepared.scenario.fidelity == crate::scenario::Fidelity::Hybrid)
            .then(|| hybrid::region(&prepared));
        let Prepared {
            scenario,
            topology: topo,
            routes,
            flows: specs,
            graph,
            collectives,
            jobs,
            later,
            pfc,
            serving,
        } = prepared;
        let streams = Streams::new(scenario.seed);
        let egress = build::egress(&topo, &routes, &scenario, &pfc, &streams);
        let mut queue = EventQueue::new();
        let eager_flows = specs.len();
        // Jobs' later iterations are numbered after everything made now.
        let (end_tasks, end_flows) = match &later {
            Some(l) => (l.end.0, l.end.2),
            None => (graph.tasks.len() as u32, specs.len() as u32),
        };
        let none = crate::workload::jobs::Prototypes::default();
        let prototypes = later.as_ref().map_or(&none, |l| &l.prototypes);
        let build::QpsAndFlows {
            mut qps,
            flows,
            pass_qps,
            conns,
        } = build::qps_and_flows(
            &topo,
            &scenario,
            specs,
            (prototypes, u64::from(end_flows)),
            &graph.passes,
            &streams,
            &mut queue,
        );
        let serving_qps = build::serving_qps(&topo, &scenario, &streams, &serving, &mut qps);
        build::path_settings(&mut qps, &topo, &routes, &scenario);
        for (i, storm) in scenario.qos.pfc.storms.iter().enumerate() {
            queue.push(storm.start, Event::Storm(i as u32, true));
            if let Some(stop) = storm.stop {
                queue.push(stop, Event::Storm(i as u32, false));
            }
        }
        // Queues, pauses and QP rates are packet-level series: a fluid
        // run samples nothing (its ports count their bytes lazily).
        let flow_level = scenario.fidelity == crate::scenario::Fidelity::Flow;
        let sample_interval = scenario.report.sample_interval.filter(|_| !flow_level);
        if let Some(every) = sample_interval {
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
        let per_gpu = scenario.host.nvlink_data_rate();
        let mut nvlink =
            crate::nvlink::Nvlink::new(topo.hosts.len(), per_gpu, scenario.host.nvlink_latency);
        if scenario.host.scale_up == crate::scenario::hosts::ScaleUp::Mesh {
            // Each GPU's rate split evenly over its links, one per peer.
            let peers = topo.hosts.first().map_or(1, |h| h.gpus.len().max(2) - 1);
            nvlink = nvlink.with_mesh(per_gpu / peers as u64);
        }
        let mut tasks = crate::runtime::tasks::TaskState::new(
            graph,
            collectives,
            jobs,
            flows.len(),
            nvlink,
            |t, e| queue.push(t, Event::from(e)),
        );
        let qp_tenant: Vec<u16> = qps
            .iter()
            .map(|q| {
                let w = match flows.get(q.flow.idx()) {
                    // A serving workload's connection is labelled with it.
                    _ if q.flow.0 >= crate::runtime::serving::FLOW_BASE => {
                        q.flow.0 - crate::runtime::serving::FLOW_BASE
                    }
                    Some(f) => f.spec.workload,
                    None if q.flow.0 < end_flows => {
                        // A connection a later iteration opens.
                        prototypes
                            .flows
                            .iter()
                            .find(|(f, _)| *f == q.flow.0)
                            .map_or(0, |(_, s)| s.workload)
                    }
                    None => {
                        // A pass's connection: its first message's, of a
                        // pass made now or of a later part's.
                        let g = u64::from(q.flow.0 - end_flows);
                        let later = prototypes.passes.iter().find(|(m, _)| *m == g);
                        match later {
                            Some((_, s)) => s.workload,
                            None => {
                                let at = tasks.graph.passes.partition_point(|p| p.first <= g);
                                tasks.graph.passes[at.saturating_sub(1)].workload
                            }
                        }
                    }
                };
                scenario.workloads.get(w as usize).map_or(0, |w| w.tenant)
            })
            .collect();
        let mut later_flows = (0, 0);
        let mut later_messages = (0, 0);
        if let Some(l) = later {
            later_flows = (l.end.2 as usize - eager_flows, l.flow_bytes);
            later_messages = (l.net_messages, l.net_bytes);
            tasks.own_total = u64::from(end_tasks);
            tasks.later = Some(Box::new(crate::runtime::later::LaterState::from_layout(
                *l,
                &tasks.graph,
                eager_flows as u32,
                conns,
            )));
        }
        let series = series::Series::new(
            sample_interval,
            scenario.report.samples,
            topo.ports.len(),
            scenario.report.sample_qps.min(qps.len()),
            scenario.qos.map.queues_used(),
        );
        let nics = build::nics(&topo, &scenario, qps, qp_tenant);
        let topo_tail = topo
            .ports
            .iter()
            .map(|p| p.delay)
            .max()
            .unwrap_or(SimTime::ZERO);
        let packets = PacketArena::new(scenario.qos.framing.int_bytes > 0);
        let mut sim = Simulation {
            now: SimTime::ZERO,
            queue,
            scenario,
            topo,
            routes,
            egress,
            nics,
            failures,
            balance,
            capture: None,
            packets,
            jobs: Some(Box::new(Runtime {
                flows,
                tasks,
                ..Runtime::default()
            })),
            counters: Counters::default(),
            ending: Ending {
                finished_at: None,
                finish_total: 0,
                end: None,
                tail: topo_tail,
            },
            records: Records {
                paths,
                series,
                estimate: Estimate::default(),
                firsts: FirstEvents::default(),
                idle: IdleGaps::default(),
                deadlock: Vec::new(),
            },
            part: None,
            fluid: None,
            hybrid: None,
            parallel: None,
            keying: Keying::default(),
        };
        if !sim.jobs().tasks.graph.passes.is_empty() || sim.jobs().tasks.later.is_some() {
            let end = (end_tasks, end_flows);
            sim.runtime(|rt, k| rt.set_up_passes(k, pass_qps, end));
        }
        if !serving.is_empty() {
            sim.runtime(|rt, k| rt.set_up_serving(k, serving, serving_qps));
        }
        let jobs = sim.jobs_mut();
        jobs.passes.net_messages += later_messages.0;
        jobs.passes.net_bytes += later_messages.1;
        jobs.later_flows = later_flows;
        if sim.scenario.fidelity != crate::scenario::Fidelity::Packet {
            let fluid = build::fluid(&sim.topo, &sim.scenario, &pfc, &sim.nics);
            sim.fluid = Some(Box::new(fluid));
            sim.jobs_mut().set_up_streams();
        }
        if let Some(region) = region {
            let ports = sim.topo.ports.len();
            sim.hybrid = Some(Box::new(hybrid::Hybrid::new(region, ports)));
        }
        sim.ending.finish_total = sim.flows_total();
        sim.estimate_and_ideal();
        sim
    }

    pub fn pending_events(&self) -> usize {
        self.queue.len()
    }

    /// Handles `ev`; `due` is `IdleGaps::due` as it was before it, which
    /// clockwork (samples, balancers' ticks) leaves as it was.
    #[inline(always)]
    fn handle(&mut self, ev: Event, due: SimTime) {
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
            // Sampling only reads, and the balancers' ticks are
            // bookkeeping on a clock (they stop while there is nothing to
            // do, see `balance::Resting`): not events of the model.
            Event::Sample => {
                self.clockwork(due);
                self.sample()
            }
            Event::Quality => {
                self.clockwork(due);
                self.refresh_quality()
            }
            Event::Heartbeat => {
                self.clockwork(due);
                self.heartbeat()
            }
            Event::Alb => {
                self.clockwork(due);
                self.alb_tick()
            }
            Event::Fail(i) => self.fail(i, false),
            Event::Recover(i) => self.fail(i, true),
            Event::Reconverge => self.reconverge(),
            Event::TaskReady(t) => self.due(Due::TaskReady(t)),
            Event::TaskDone(t) => self.due(Due::TaskDone(t)),
            Event::LaneFree(l) => self.due(Due::LaneFree(l)),
            Event::Nvlink(h, gen) => self.due(Due::Nvlink(h, gen)),
            Event::Landed(h) => self.due(Due::Landed(h)),
            Event::FluidNext => self.fluid_next(),
            Event::FluidRx(q, f) => self.fluid_rx(q, f),
            Event::FluidAck(_, f) => self.runtime(|rt, k| rt.qp_acked(k, f, 0, 0)),
            Event::FluidShare => self.fluid_share(),
            Event::FluidCc => self.fluid_cc(),
            Event::HybridSync => self.hybrid_sync(),
            Event::Stream(p) => self.due(Due::Stream(p)),
            Event::Serve(code) => self.due(Due::Serve(code)),
        }
    }

    /// Clockwork is not counted as an event and leaves the idle
    /// stretch's time (`due`) as it was.
    fn clockwork(&mut self, due: SimTime) {
        self.counters.events -= 1;
        self.records.idle.due = due;
    }

    fn flow_start(&mut self, f: FlowId) {
        let now = self.now;
        let fl = self.flow_mut(f);
        fl.start = now;
        if self.fluid.is_some() && !self.hybrid_packets(f) {
            return self.fluid_start(f);
        }
        let fl = self.flow_mut(f);
        let (first, n, posts) = (fl.first_qp, fl.n_qps, fl.posts);
        if posts {
            self.post(f);
        }
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
    #[inline(always)]
    fn nic_turn(&mut self, p: PortId, n: NicId) {
        let held = self.egress.held(p, self.now);
        match self.nics.pull(self.now, p, n, held, &mut self.packets) {
            Pull::Sent {
                q,
                id,
                queue,
                timer,
                last,
            } => {
                if let Some(at) = timer {
                    self.queue.push(at, Event::Rto(q));
                }
                let payload = self.packets.get(id).payload as u64;
                self.counters.payload_sent += payload;
                if let Some(sent) = self.records.series.qp_sent.get_mut(q.idx()) {
                    *sent += payload;
                }
                if let Some(f) = last {
                    self.runtime(|rt, k| rt.flow_sent(k, f));
                    self.hybrid_sent(f);
                }
                let e = Queued {
                    id,
                    wire_bytes: self.packets.get(id).wire_bytes,
                    ingress: LOCAL,
                };
                self.egress.transmit(&mut io!(self), p, e, queue);
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
                }
                Fate::Sent(p, pkt, int) => self.capture_frame(p, &pkt, int.as_deref()),
            }
        }
        self.egress.give_back_fates(fates);
    }

    #[inline(always)]
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
                    tenants: self.nics.tenants(),
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
                if self.records.paths.enabled && pkt.opcode.is_data() {
                    self.records.paths.qps[pkt.qp.idx()].record(s, to.0, (self.now, p));
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
        }
    }

    /// A frame arrived at NIC port `at`.
    fn nic_receive(&mut self, at: PortId, id: PacketId) {
        // HPCC's records, read before the slot is reused.
        let int = self.packets.int(id).copied();
        let pkt = self.packets.take(id);
        let now = self.now;
        let before = if self.failures.any() && pkt.opcode.is_data() {
            self.nics.qp(pkt.qp).resp.expected
        } else {
            0
        };
        match self
            .nics
            .receive(now, at, (&pkt, int.as_ref()), &mut self.packets)
        {
            Rx::Nothing => {}
            Rx::Reply(f) => self.offer(f.port, f.queue, f.id),
            Rx::RateCut(port) => {
                series::count_cnp(&mut self.records.series, port);
                first(&mut self.records.firsts.rate_cut_ps, now);
            }
            Rx::Acked(q) => {
                self.messages_acked(q);
                if self.nics.qp(q).req.rate.ack_driven() {
                    // Its window may have opened.
                    self.kick_qp(q);
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
                if ce {
                    self.congestion_experienced(q);
                }
                self.counters.bytes_delivered += delivered;
                if (delivered > 0 || completed) && self.failures.any() {
                    self.progressed(q, before);
                }
                if completed {
                    self.messages_received(q);
                }
                if let Some(r) = reply {
                    let f = self
                        .nics
                        .reply(q, at, (&pkt, int.as_ref()), r, &mut self.packets);
                    self.offer(f.port, f.queue, f.id);
                }
            }
        }
    }

    /// Transfer `f`'s state (made on first use for a pass message's).
    fn flow_mut(&mut self, f: FlowId) -> &mut FlowState {
        self.runtime(|rt, k| rt.make_flow(k, f));
        self.jobs_mut().flow_made(f)
    }

    /// Posts transfer `f`'s message on its connection's QPs (a share on
    /// each), at the sender and at the receiver, which in a partitioned
    /// run may be another partition's (`Part::post_elsewhere`).
    fn post(&mut self, f: FlowId) {
        let fl = self.flow_mut(f);
        let (first, n, bytes) = (fl.first_qp, fl.n_qps, fl.spec.bytes);
        for i in 0..n {
            let q = QpId(first + i);
            let b = build::share(bytes, n, i);
            let at = self.nics.qp(q).dst_port;
            let away = self
                .part
                .as_deref_mut()
                .is_some_and(|part| part.post_elsewhere(q, at, f, b));
            self.nics.post(q, f, b, (true, !away));
        }
    }

    /// QP `q`'s sender has every acknowledgement of its oldest messages:
    /// their transfers count them, and are acknowledged once every QP of
    /// theirs is.
    fn messages_acked(&mut self, q: QpId) {
        while let Some(m) = self.nics.pop_acked(q) {
            let f = FlowId(m.flow);
            self.runtime(|rt, k| rt.qp_acked(k, f, m.again, m.stalls as u32));
        }
    }

    /// QP `q`'s receiver has its oldest messages in full: their transfers
    /// count them, and are done (with their tasks) once every QP of
    /// theirs has.
    fn messages_received(&mut self, q: QpId) {
        while let Some(m) = self.nics.pop_received(q) {
            let f = FlowId(m.flow);
            self.runtime(|rt, k| rt.qp_received(k, f, m.again as u32, m.stalls as u32));
        }
    }

    /// A timer the job runtime set is due.
    fn due(&mut self, due: Due) {
        self.runtime(|rt, k| rt.due(k, due))
    }

    /// Calls the job runtime with this simulation as its kernel, then
    /// starts the transfers it started.
    fn runtime<R>(&mut self, call: impl FnOnce(&mut Runtime, &mut dyn Kernel) -> R) -> R {
        let mut rt = self.jobs.take().expect("the runtime is not in a call");
        let mut k = Kern::new(self);
        let out = call(&mut rt, &mut k);
        let starts = std::mem::take(&mut k.starts);
        self.jobs = Some(rt);
        for f in starts {
            self.flow_start(f);
        }
        out
    }

    /// The job runtime, between its calls.
    fn jobs(&self) -> &Runtime {
        self.jobs.as_deref().expect("the runtime is not in a call")
    }

    fn jobs_mut(&mut self) -> &mut Runtime {
        self.jobs
            .as_deref_mut()
            .expect("the runtime is not in a call")
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
}
