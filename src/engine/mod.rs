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

pub mod ideal;
pub mod port;
pub mod queue;

use crate::nic::transport::{Requester, Responder, TimerAction};
use crate::rng::Streams;
use crate::scenario::{Prepared, Scenario};
use crate::switch::balance::{Ecmp, EcmpSeed};
use crate::switch::classify::ClassMap;
use crate::switch::schedule::EgressQueues;
use crate::switch::{SwitchState, Verdict};
use crate::topology::routing::Routes;
use crate::topology::{FlowId, NicId, Owner, PortId, QpId, Topology};
use crate::units::SimTime;
use crate::wire::{frame, Opcode, Packet, PacketArena, PacketId};
use crate::workload::FlowSpec;
use port::{PortDrops, PortState};
use queue::EventQueue;
use std::collections::VecDeque;

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
}

/// Both halves of a queue pair and where they sit.
pub struct QpState {
    pub flow: FlowId,
    pub src_port: PortId,
    pub dst_port: PortId,
    pub udp_sport: u16,
    /// ECMP header CRC (unseeded) of its data packets and of the ACK/NAKs
    /// going back.
    pub header_crc: [u32; 2],
    pub in_ring: bool,
    pub req: Requester,
    pub resp: Responder,
}

pub struct FlowState {
    pub spec: FlowSpec,
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

/// Fabric-wide counters.
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
}

pub struct Simulation {
    pub now: SimTime,
    queue: EventQueue<Event>,
    pub scenario: Scenario,
    pub topo: Topology,
    pub routes: Routes,
    pub ports: Vec<PortState>,
    /// Each port's priority queues (see `port` for why they are apart).
    pub queues: Vec<EgressQueues>,
    /// NIC ports: QPs with data to send, served round robin.
    qp_rings: Vec<VecDeque<QpId>>,
    pub port_drops: Vec<PortDrops>,
    /// Owner of each port, apart from `ports` so that an arrival does not
    /// pull the ingress port's whole state into cache.
    owners: Vec<Owner>,
    pub switches: Vec<SwitchState>,
    /// The DSCP-to-queue map NICs use for the frames they send.
    nic_classes: ClassMap,
    pub packets: PacketArena,
    pub qps: Vec<QpState>,
    pub flows: Vec<FlowState>,
    pub counters: Counters,
}

impl Simulation {
    pub fn new(prepared: Prepared) -> Simulation {
        let Prepared {
            scenario,
            topology: topo,
            routes,
            flows: specs,
        } = prepared;
        let streams = Streams::new(scenario.seed);
        let ports = PortState::from_topology(&topo);
        let owners = topo.ports.iter().map(|p| p.owner).collect();
        let switches = topo
            .switches
            .iter()
            .map(|s| {
                let seed = match scenario.switch.ecmp.seed {
                    EcmpSeed::PerSwitch => streams.derive(&format!("ecmp/{}", s.name)) as u32,
                    EcmpSeed::Fixed(n) => n,
                };
                SwitchState::new(&scenario.switch, seed)
            })
            .collect();

        let tc = &scenario.transport;
        let mut qps = Vec::new();
        let mut flows = Vec::with_capacity(specs.len());
        let mut queue = EventQueue::new();
        for (fi, spec) in specs.into_iter().enumerate() {
            let n_qps = (spec.qps as u64).min(spec.bytes).max(1) as u32;
            let first_qp = qps.len() as u32;
            let src_ports = &topo.nics[spec.src_nic.idx()].ports;
            let dst_ports = &topo.nics[spec.dst_nic.idx()].ports;
            for i in 0..n_qps {
                let id = first_qp + i;
                let bytes =
                    spec.bytes / n_qps as u64 + u64::from((i as u64) < spec.bytes % n_qps as u64);
                let req = Requester::new(bytes, tc.mtu, tc.write_mode);
                let resp = Responder::new(req.n_pkts);
                let sport =
                    49152 + (streams.derive_indexed("qp/udp-sport", id as u64) % 16384) as u16;
                let ecmp = &scenario.switch.ecmp;
                let crc = |src, dst| {
                    let template = Packet {
                        src,
                        dst,
                        qp: QpId(id),
                        psn: 0,
                        payload: 0,
                        wire_bytes: 0,
                        header_crc: 0,
                        udp_sport: sport,
                        opcode: Opcode::WriteMiddle,
                        dscp: tc.data_dscp,
                    };
                    Ecmp::header_crc(ecmp.hash, ecmp.fields, &template)
                };
                qps.push(QpState {
                    flow: FlowId(fi as u32),
                    src_port: src_ports[id as usize % src_ports.len()],
                    dst_port: dst_ports[id as usize % dst_ports.len()],
                    udp_sport: sport,
                    header_crc: [
                        crc(spec.src_nic, spec.dst_nic),
                        crc(spec.dst_nic, spec.src_nic),
                    ],
                    in_ring: false,
                    req,
                    resp,
                });
            }
            queue.push(spec.start, Event::FlowStart(FlowId(fi as u32)));
            flows.push(FlowState {
                spec,
                first_qp,
                n_qps,
                rx_done_qps: 0,
                tx_done_qps: 0,
                finish: None,
                acked: None,
                ideal_fct: SimTime::ZERO,
            });
        }
        let mut sim = Simulation {
            now: SimTime::ZERO,
            queue,
            scenario,
            topo,
            routes,
            owners,
            queues: (0..ports.len()).map(|_| EgressQueues::default()).collect(),
            qp_rings: (0..ports.len()).map(|_| VecDeque::new()).collect(),
            port_drops: vec![PortDrops::default(); ports.len()],
            ports,
            switches,
            nic_classes: ClassMap::default(),
            packets: PacketArena::default(),
            qps,
            flows,
            counters: Counters::default(),
        };
        for f in 0..sim.flows.len() {
            let (first, n, dst) = {
                let fl = &sim.flows[f];
                (fl.first_qp, fl.n_qps, fl.spec.dst_nic)
            };
            let qps = first..first + n;
            let routes: Vec<Vec<PortId>> = qps
                .clone()
                .map(|q| {
                    sim.qp_route(QpId(q)).unwrap_or_else(|| {
                        let src = sim.qps[q as usize].src_port;
                        sim.routes
                            .first_path(&sim.topo, src, dst)
                            .unwrap_or(vec![src])
                    })
                })
                .collect();
            let reqs: Vec<&Requester> = qps.map(|q| &sim.qps[q as usize].req).collect();
            sim.flows[f].ideal_fct = ideal::ideal_fct(&sim.topo, &reqs, &routes);
        }
        sim
    }

    /// Runs until nothing is left, or the scenario's `max_sim_time`.
    /// `progress` is called every 2^18 events.
    ///
    /// A run that handles a whole batch of events over more than a
    /// thousand retransmission timeouts of simulated time without
    /// delivering or acknowledging a single byte is stuck (say, a buffer
    /// too small for the incast it gets) and stops as `Stalled`.
    pub fn run(&mut self, mut progress: impl FnMut(&Simulation)) -> StopReason {
        let limit = self.scenario.max_sim_time.unwrap_or(SimTime::MAX);
        let stall_after = SimTime(self.scenario.transport.rto.0.saturating_mul(1000));
        let mut last = (self.now, self.progress_mark());
        loop {
            match self.run_until(limit, 1 << 18) {
                StopReason::Paused if self.queue.peek_time().is_some_and(|t| t <= limit) => {
                    let mark = self.progress_mark();
                    if mark != last.1 {
                        last = (self.now, mark);
                    } else if self.now.saturating_sub(last.0) > stall_after {
                        return StopReason::Stalled;
                    }
                    progress(self)
                }
                StopReason::Paused => return StopReason::SimTimeLimit,
                other => return other,
            }
        }
    }

    /// Changes whenever any transfer makes progress.
    fn progress_mark(&self) -> (u64, u64) {
        let acked: u64 = self.qps.iter().map(|q| q.req.una as u64).sum();
        (self.counters.bytes_delivered, acked)
    }

    /// Handles events due at or before `until`, at most `max_events` of
    /// them. The run is finished when every transfer has been delivered
    /// and acknowledged; what is left then (timers that would lapse) is
    /// not simulated, so `now` is the time of the last acknowledgement.
    pub fn run_until(&mut self, until: SimTime, max_events: u64) -> StopReason {
        let mut handled = 0;
        let total = self.flows.len() as u64;
        while let Some(t) = self.queue.peek_time() {
            if self.counters.flows_acked == total {
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
            Event::Arrive(_, id) => prefetch_read(self.packets.slot_ptr(id)),
            Event::TxDone(p) => prefetch_read(&self.ports[p.idx()]),
            _ => {}
        }
    }

    /// For the next event, whose packet is on its way into the cache: the
    /// switch state and routing entry it will read.
    #[inline]
    fn prefetch_near(&self, ev: Event) {
        if let Event::Arrive(p, id) = ev {
            if let Owner::Switch(s) = self.owners[p.idx()] {
                let dst = self.packets.get(id).dst;
                let routes = &self.routes.switches[s.idx()];
                let class = self.routes.nic_class[dst.idx()] as usize;
                if let Some(g) = routes.by_class.get(class) {
                    prefetch_read(g);
                }
                prefetch_read(&self.switches[s.idx()]);
            }
        }
    }

    pub fn pending_events(&self) -> usize {
        self.queue.len()
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::TxDone(p) => self.tx_done(p),
            Event::Arrive(p, id) => self.arrive(p, id),
            Event::FlowStart(f) => self.flow_start(f),
            Event::Wake(p) => {
                self.ports[p.idx()].wake_pending = false;
                self.kick(p);
            }
            Event::Rto(q) => self.rto(q),
        }
    }

    fn flow_start(&mut self, f: FlowId) {
        let (first, n) = {
            let fl = &self.flows[f.idx()];
            (fl.first_qp, fl.n_qps)
        };
        for q in first..first + n {
            self.activate(QpId(q));
        }
        for q in first..first + n {
            let p = self.qps[q as usize].src_port;
            self.kick(p);
        }
    }

    /// Puts a QP with data to send on its port's round-robin ring.
    fn activate(&mut self, q: QpId) {
        let qp = &mut self.qps[q.idx()];
        if !qp.in_ring && qp.req.has_data() {
            qp.in_ring = true;
            self.qp_rings[qp.src_port.idx()].push_back(q);
        }
    }

    /// Called when a port may have something new to send: starts the
    /// transmitter if idle, or asks to be woken when the current frame is
    /// done.
    #[inline]
    fn kick(&mut self, p: PortId) {
        let port = &mut self.ports[p.idx()];
        if port.tx_event {
            return;
        }
        if self.now >= port.busy_until {
            self.start_tx(p);
        } else {
            port.tx_event = true;
            let at = port.busy_until;
            self.queue.push(at, Event::TxDone(p));
        }
    }

    /// Offers a frame to an egress port: straight onto the wire if the
    /// port is idle with nothing waiting, else into its priority queue.
    #[inline]
    fn offer(&mut self, p: PortId, queue: u8, id: PacketId, wire: u32) {
        if self.ports[p.idx()].idle(self.now) {
            self.transmit(p, id, wire);
        } else {
            self.queues[p.idx()].enqueue(queue, id, wire);
            self.ports[p.idx()].queued += 1;
            self.kick(p);
        }
    }

    /// Puts the next waiting frame on the wire. The port must be idle with
    /// no `TxDone` pending.
    fn start_tx(&mut self, p: PortId) {
        let (id, wire) = if self.ports[p.idx()].queued > 0 {
            let q = self.queues[p.idx()].dequeue().expect("queued > 0");
            self.ports[p.idx()].queued -= 1;
            (q.id, q.wire_bytes)
        } else {
            match self.owners[p.idx()] {
                Owner::Nic(n) => match self.pull_from_qps(p, n) {
                    Some(id) => (id, self.packets.get(id).wire_bytes),
                    None => return,
                },
                Owner::Switch(_) => return,
            }
        };
        self.transmit(p, id, wire);
    }

    /// Serializes a frame on an idle port: schedules its arrival at the
    /// peer, and a `TxDone` only if more is waiting.
    #[inline]
    fn transmit(&mut self, p: PortId, id: PacketId, wire: u32) {
        let owner = self.owners[p.idx()];
        if let Owner::Switch(s) = owner {
            self.switches[s.idx()]
                .buffer
                .release(wire - frame::PREAMBLE_SFD_IFG);
        }
        let port = &mut self.ports[p.idx()];
        let ser = if port.ps_per_byte != 0 {
            SimTime(port.ps_per_byte * wire as u64)
        } else {
            self.topo.ports[p.idx()].rate.serialize(wire as u64)
        };
        let done = self.now + ser;
        port.busy_until = done;
        port.tx_packets += 1;
        port.tx_wire_bytes += wire as u64;
        port.busy_ps += ser.0;
        let more = port.queued > 0
            || (matches!(owner, Owner::Nic(_)) && !self.qp_rings[p.idx()].is_empty());
        if more {
            port.tx_event = true;
        }
        let (peer, delay) = (port.peer, port.delay);
        self.counters.link_transmissions += 1;
        self.queue.push(done + delay, Event::Arrive(peer, id));
        if more {
            self.queue.push(done, Event::TxDone(p));
        }
    }

    /// The next data packet from the port's QPs, round robin.
    fn pull_from_qps(&mut self, p: PortId, nic: NicId) -> Option<PacketId> {
        let now = self.now;
        let rto = self.scenario.transport.rto;
        let mut earliest = SimTime::MAX;
        for _ in 0..self.qp_rings[p.idx()].len() {
            let q = self.qp_rings[p.idx()].pop_front()?;
            let qp = &mut self.qps[q.idx()];
            if !qp.req.has_data() {
                qp.in_ring = false;
                continue;
            }
            let t = qp.req.rate.earliest_send(now);
            if t > now {
                earliest = earliest.min(t);
                self.qp_rings[p.idx()].push_back(q);
                continue;
            }
            let (out, timer) = qp.req.send_next(now, rto);
            let pkt = Packet {
                src: nic,
                dst: self.flows[qp.flow.idx()].spec.dst_nic,
                qp: q,
                psn: out.psn,
                payload: out.payload,
                wire_bytes: frame::wire_bytes(out.opcode, out.payload),
                header_crc: qp.header_crc[0],
                udp_sport: qp.udp_sport,
                opcode: out.opcode,
                dscp: self.scenario.transport.data_dscp,
            };
            qp.req.rate.on_send(now, pkt.wire_bytes);
            if qp.req.has_data() {
                self.qp_rings[p.idx()].push_back(q);
            } else {
                qp.in_ring = false;
            }
            if let Some(at) = timer {
                self.queue.push(at, Event::Rto(q));
            }
            self.counters.data_packets_sent += 1;
            self.counters.payload_sent += out.payload as u64;
            self.counters.payload_in_flight += out.payload as u64;
            return Some(self.packets.alloc(pkt));
        }
        let port = &mut self.ports[p.idx()];
        if earliest < SimTime::MAX && !port.wake_pending {
            port.wake_pending = true;
            self.queue.push(earliest, Event::Wake(p));
        }
        None
    }

    fn tx_done(&mut self, p: PortId) {
        self.ports[p.idx()].tx_event = false;
        self.start_tx(p);
    }

    fn arrive(&mut self, p: PortId, id: PacketId) {
        match self.owners[p.idx()] {
            Owner::Switch(s) => {
                let pkt = *self.packets.get(id);
                let class = self.routes.nic_class[pkt.dst.idx()];
                let verdict = {
                    let (ports, queues) = (&self.ports, &self.queues);
                    // An empty queue is known from the port's hot line,
                    // which spares a cache miss on the common path.
                    let depth = |p: PortId, q: u8| {
                        if ports[p.idx()].queued == 0 {
                            0
                        } else {
                            queues[p.idx()].queue_bytes(q)
                        }
                    };
                    self.switches[s.idx()].ingress(
                        &self.routes.switches[s.idx()],
                        class,
                        &pkt,
                        depth,
                    )
                };
                match verdict {
                    Verdict::Forward { port, queue } => self.offer(port, queue, id, pkt.wire_bytes),
                    Verdict::BufferFull { port } => {
                        let d = &mut self.port_drops[port.idx()];
                        d.packets += 1;
                        d.wire_bytes += pkt.wire_bytes as u64;
                        self.drop_packet(id);
                    }
                    Verdict::NoRoute => {
                        debug_assert!(false, "validated traffic always has a route");
                        self.drop_packet(id);
                    }
                }
            }
            Owner::Nic(_) => self.nic_receive(id),
        }
    }

    fn drop_packet(&mut self, id: PacketId) {
        let pkt = self.packets.get(id);
        self.counters.drops += 1;
        self.counters.drop_bytes += pkt.wire_bytes as u64;
        if pkt.opcode.is_data() {
            self.counters.payload_dropped += pkt.payload as u64;
            self.counters.payload_in_flight -= pkt.payload as u64;
        }
        self.packets.free(id);
    }

    fn nic_receive(&mut self, id: PacketId) {
        let pkt = *self.packets.get(id);
        self.packets.free(id);
        let q = pkt.qp;
        let now = self.now;
        let rto = self.scenario.transport.rto;
        match pkt.opcode {
            Opcode::Ack => {
                let qp = &mut self.qps[q.idx()];
                if qp.req.on_ack(now, pkt.psn, rto) {
                    let f = &mut self.flows[qp.flow.idx()];
                    f.tx_done_qps += 1;
                    if f.tx_done_qps == f.n_qps {
                        f.acked = Some(now);
                        self.counters.flows_acked += 1;
                    }
                }
            }
            Opcode::Nak => {
                self.qps[q.idx()].req.on_nak(now, pkt.psn, rto);
                self.activate(q);
                let p = self.qps[q.idx()].src_port;
                self.kick(p);
            }
            _ => {
                self.counters.payload_arrived += pkt.payload as u64;
                self.counters.payload_in_flight -= pkt.payload as u64;
                let ack_every = self.scenario.transport.ack_every;
                let qp = &mut self.qps[q.idx()];
                let out = qp.resp.on_data(pkt.psn, pkt.payload, ack_every);
                if out.accepted {
                    self.counters.bytes_delivered += pkt.payload as u64;
                }
                if out.completed {
                    let f = &mut self.flows[qp.flow.idx()];
                    f.rx_done_qps += 1;
                    if f.rx_done_qps == f.n_qps {
                        f.finish = Some(now);
                        self.counters.flows_completed += 1;
                    }
                }
                if let Some((opcode, psn)) = out.reply {
                    let reply = Packet {
                        src: pkt.dst,
                        dst: pkt.src,
                        qp: q,
                        psn,
                        payload: 0,
                        wire_bytes: frame::wire_bytes(opcode, 0),
                        header_crc: self.qps[q.idx()].header_crc[1],
                        udp_sport: pkt.udp_sport,
                        opcode,
                        dscp: pkt.dscp,
                    };
                    match opcode {
                        Opcode::Nak => self.counters.naks_sent += 1,
                        _ => self.counters.acks_sent += 1,
                    }
                    let port = self.qps[q.idx()].dst_port;
                    let queue = self.nic_classes.queue_of(pkt.dscp);
                    let rid = self.packets.alloc(reply);
                    self.offer(port, queue, rid, reply.wire_bytes);
                }
            }
        }
    }

    fn rto(&mut self, q: QpId) {
        let rto = self.scenario.transport.rto;
        match self.qps[q.idx()].req.on_timer(self.now, rto) {
            TimerAction::Lapse => {}
            TimerAction::Wait(at) => self.queue.push(at, Event::Rto(q)),
            TimerAction::Retransmit(at) => {
                self.queue.push(at, Event::Rto(q));
                self.activate(q);
                let p = self.qps[q.idx()].src_port;
                self.kick(p);
            }
        }
    }

    /// The egress ports a QP's data packets leave through, from its NIC
    /// port to the last switch, when every switch on the way balances by
    /// header alone; `None` if some choice is dynamic.
    pub fn qp_route(&self, q: QpId) -> Option<Vec<PortId>> {
        let qp = &self.qps[q.idx()];
        let flow = &self.flows[qp.flow.idx()];
        let pkt = Packet {
            src: flow.spec.src_nic,
            dst: flow.spec.dst_nic,
            qp: q,
            psn: 0,
            payload: 0,
            wire_bytes: 0,
            header_crc: qp.header_crc[0],
            udp_sport: qp.udp_sport,
            opcode: Opcode::WriteMiddle,
            dscp: self.scenario.transport.data_dscp,
        };
        let mut route = vec![qp.src_port];
        let mut at = self.topo.port(qp.src_port).peer;
        for _ in 0..=self.topo.switches.len() {
            match self.owners[at.idx()] {
                Owner::Nic(_) => return Some(route),
                Owner::Switch(s) => {
                    let routes = &self.routes.switches[s.idx()];
                    let group = crate::switch::forward::lookup(
                        routes,
                        pkt.dst,
                        self.routes.nic_class[pkt.dst.idx()],
                    )?;
                    let out = self.switches[s.idx()]
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
                .filter_map(|&p| match self.owners[p.idx()] {
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
        let buffered: u64 = self.switches.iter().map(|s| s.buffer.used).sum();
        let queued: u64 = self
            .queues
            .iter()
            .zip(&self.owners)
            .filter(|(_, o)| matches!(o, Owner::Switch(_)))
            .map(|(q, _)| q.total_bytes)
            .sum();
        for (i, (q, p)) in self.queues.iter().zip(&self.ports).enumerate() {
            if q.len() != p.queued as usize {
                return Err(format!(
                    "port {i} counts {} queued frames but holds {}",
                    p.queued,
                    q.len()
                ));
            }
        }
        if buffered != queued {
            return Err(format!(
                "switch buffers hold {buffered} B but their queues hold {queued} B"
            ));
        }
        Ok(())
    }
}

/// A hint to pull the cache line holding `*ptr` in; a no-op off x86-64.
#[inline(always)]
fn prefetch_read<T>(ptr: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: prefetching is a hint; it never faults, even on an
        // invalid address, and SSE is part of the x86-64 baseline.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(ptr as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}
