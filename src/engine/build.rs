//! The build step: the state a run starts from, resolved once from the
//! prepared scenario: PFC thresholds and headroom per port and lossless
//! priority, WRED per switch egress queue, each switch's balancer with its
//! seed and random streams, and the QP table (source ports, header CRCs,
//! planes, rate control). Then, on the assembled simulation, each
//! transfer's ideal completion time and the run's estimate.

use super::{mrc_sport, Estimate, Event, EventQueue, FlowState, QpState, Simulation};
use crate::nic::dcqcn::Dcqcn;
use crate::nic::nics::Nics;
use crate::nic::rate::RateControl;
use crate::nic::transport::{packets_of, Requester, Responder};
use crate::nic::Cc;
use crate::rng::Streams;
use crate::runtime::ideal;
use crate::scenario::Scenario;
use crate::switch::balance::{Ecmp, EcmpSeed};
use crate::switch::classify::QUEUES;
use crate::switch::ecn::Wred;
use crate::switch::egress::{Egress, EgressConfig};
use crate::switch::pfc::PfcPrio;
use crate::switch::qos::{PfcTable, QosConfig};
use crate::switch::schedule::{EgressQueues, Scheduler};
use crate::switch::SwitchState;
use crate::topology::routing::Routes;
use crate::topology::{FlowId, NicId, Owner, PortId, QpId, Topology};
use crate::units::SimTime;
use crate::wire::frame::ecn;
use crate::wire::{Opcode, Packet};
use crate::workload::pass::Pass;
use crate::workload::FlowSpec;

/// Every port's egress and the switches, resolved from the scenario: PFC
/// thresholds and headroom, WRED, schedulers, the switches' buffers and
/// balancers with their seeds and streams.
pub fn egress(
    topo: &Topology,
    routes: &Routes,
    scenario: &Scenario,
    table: &PfcTable,
    streams: &Streams,
) -> Egress {
    let qos = &scenario.qos;
    let max_frame = qos.max_wire_frame();
    let (pfc, reserved) = pfc(topo, table);
    let dlb = scenario
        .configs
        .as_ref()
        .map_or_else(Vec::new, |c| c.dlb_ports());
    let queues = egress_queues(topo, qos, table, max_frame, &dlb);
    let switches = switches(topo, routes, scenario, streams, &reserved);
    let mut nic_dscps: Vec<u8> = scenario.workloads.iter().map(|w| w.dscp).collect();
    nic_dscps.push(scenario.transport.data_dscp);
    nic_dscps.push(scenario.transport.cnp_dscp);
    let (pause_priority, paused_by) = EgressConfig::priorities(qos, &nic_dscps);
    let cfg = EgressConfig {
        mark_on: qos.mark_on,
        pfc: qos.pfc.clone(),
        trim: std::array::from_fn(|q| qos.queues[q].trim),
        framing: qos.framing,
        header_queue: qos.map.queue_of(scenario.transport.cnp_dscp),
        header_dscp: scenario.transport.cnp_dscp,
        nic_data_classes: scenario
            .workloads
            .iter()
            .fold(0, |m, w| m | 1 << qos.map.queue_of(w.dscp)),
        pause_priority,
        paused_by,
    };
    Egress::new(topo, cfg, queues, switches, pfc)
}

/// PFC state for every port and lossless priority from the scenario's
/// resolved table, and the headroom each switch sets aside from its
/// shared pool.
fn pfc(topo: &Topology, table: &PfcTable) -> (([u8; QUEUES], usize, Vec<PfcPrio>), Vec<u64>) {
    let mut reserved = vec![0u64; topo.switches.len()];
    let mut pfc = Vec::with_capacity(table.ports.len());
    for (i, &cfg) in table.ports.iter().enumerate() {
        if let (Owner::Switch(s), false) = (topo.ports[i / table.slots].owner, cfg.off) {
            reserved[s.idx()] += cfg.headroom as u64;
        }
        pfc.push(PfcPrio::new(cfg));
    }
    ((table.slot, table.slots, pfc), reserved)
}

/// Every port's egress queues: the scheduler, and WRED where a switch
/// marks or drops. On a port its configuration makes a DLB interface
/// (`dlb`, by port; empty for none) the hardware applies no egress QoS
/// to the DLB flows: no WRED and no shaper there.
fn egress_queues(
    topo: &Topology,
    qos: &QosConfig,
    table: &PfcTable,
    max_frame: u32,
    dlb: &[bool],
) -> Vec<EgressQueues> {
    let strict = (0..QUEUES).fold(0u8, |m, q| m | (u8::from(qos.queues[q].strict) << q));
    let percent = std::array::from_fn(|q| qos.queues[q].percent);
    let sched = Scheduler::new(strict, percent, max_frame);
    topo.ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            if dlb.get(i).copied().unwrap_or(false) {
                return EgressQueues::new(sched, Vec::new(), [None; QUEUES]);
            }
            let wred = match port.owner {
                Owner::Switch(_) => (0..QUEUES)
                    .filter_map(|q| table.wred_at(port.rate, q).map(|w| Wred::new(q as u8, w)))
                    .collect(),
                Owner::Nic(_) => Vec::new(),
            };
            // Shapers are switch queuing policy; NICs pace by rate.
            let shape = match port.owner {
                Owner::Switch(_) => std::array::from_fn(|q| qos.queues[q].shape_bps),
                Owner::Nic(_) => [None; QUEUES],
            };
            EgressQueues::new(sched, wred, shape)
        })
        .collect()
}

/// The flow level's network over this fabric: its ports, the GPUs'
/// PCIe, and where DCQCN runs and `simulation.flow_cc = "dcqcn"` asks,
/// its congestion control: WRED with ECN on
/// the data queue of each switch port (none where DLB takes the egress
/// QoS away), the virtual queues up to the switch's buffer. Where a
/// class is lossless, the devices each port joins, for PFC.
pub(super) fn fluid(
    topo: &Topology,
    scenario: &Scenario,
    table: &PfcTable,
    nics: &Nics,
) -> crate::fluid::Fluid {
    let pcie = nics.pcie_ps_per_byte().map(|ps| 1e12 / ps);
    let rates = topo.ports.iter().map(|p| p.rate.bps());
    let mut fluid = crate::fluid::Fluid::new(rates, topo.gpus.len(), pcie);
    let dcqcn = scenario.workloads.iter().any(|w| w.cc == Cc::Dcqcn);
    if dcqcn && scenario.flow_cc == crate::scenario::FlowCc::Dcqcn {
        let queue = nics.data_queue() as usize;
        let limit = scenario.switch.buffer_bytes as f64;
        let dlb = scenario
            .configs
            .as_ref()
            .map_or_else(Vec::new, |c| c.dlb_ports());
        let marking = table.fluid_marking(topo, queue, &dlb);
        let sender = topo
            .ports
            .iter()
            .map(|p| matches!(p.owner, Owner::Nic(_)))
            .collect();
        let mtu = scenario.transport.mtu;
        let packet = scenario.qos.framing.wire_bytes(Opcode::WriteMiddle, mtu);
        fluid.enable_cc(marking, sender, limit, f64::from(packet));
    }
    if scenario.qos.lossless_mask() != 0 {
        fluid.enable_pfc(topo, table.fluid_xoff(topo));
    }
    fluid
}

/// Every switch's pipeline state: its ECMP seed (per switch from the run's
/// streams, or the scenario's fixed one), its WRED and balancer streams,
/// and the headroom `reserved` from its pool.
fn switches(
    topo: &Topology,
    routes: &Routes,
    scenario: &Scenario,
    streams: &Streams,
    reserved: &[u64],
) -> Vec<SwitchState> {
    let qos = &scenario.qos;
    topo.switches
        .iter()
        .enumerate()
        .map(|(si, s)| {
            let seed = match scenario.switch.ecmp.seed {
                EcmpSeed::PerSwitch => streams.derive(&format!("ecmp/{}", s.name)) as u32,
                EcmpSeed::Fixed(n) => n,
            };
            SwitchState::new(
                &scenario.switch,
                qos.map.clone(),
                topo,
                routes,
                crate::topology::SwitchId(si as u32),
                seed,
                reserved[si],
                [
                    streams.stream(&format!("wred/{}", s.name)),
                    streams.stream(&format!("balance/{}", s.name)),
                ],
            )
        })
        .collect()
}

/// The NICs, with the QP table, each NIC's reorder buffer and, where a
/// GPU's PCIe is slower than its NIC's ports, PCIe pacing.
pub fn nics(topo: &Topology, scenario: &Scenario, qps: Vec<QpState>, tenants: Vec<u16>) -> Nics {
    let pcie_one_way = scenario.host.pcie_bytes_per_s / 2;
    let pcie_binds = topo.gpus.iter().any(|g| {
        let line: u64 = topo.nics[g.nic.idx()]
            .ports
            .iter()
            .map(|&p| topo.port(p).rate.bps())
            .sum();
        line > pcie_one_way * 8
    });
    Nics::new(
        qps,
        tenants,
        (topo.ports.len(), topo.nics.len(), topo.gpus.len()),
        (
            scenario.qos.map.queue_of(scenario.transport.data_dscp),
            scenario.qos.map.queue_of(scenario.transport.cnp_dscp),
        ),
        scenario.transport.clone(),
        scenario.qos.framing,
        pcie_one_way,
        pcie_binds,
    )
}

/// The QP table and the transfers: each QP's halves, rate control, UDP
/// source port, header CRCs (per direction, and per MRC path), ports and
/// planes; transfers that are not gated by a task start on their own.
///
/// The messages of one connection (a collective's sender, receiver and
/// channel: `FlowSpec::conn`) share its QPs, as NCCL's do, so its rate
/// control and PSNs carry from one message to the next; each is posted
/// when it starts. Any other transfer has QPs of its own with its write
/// posted from the start, and so has every transfer under MRC, whose
/// sender tracks one message's PSNs.
/// Each QP of the run, each transfer's state, and the first QP of each
/// pass connection (`u32::MAX` where it copies over
/// NVLink); a pass's messages number from `base_flow` on.
/// Jobs' later iterations (`workload::jobs`) add transfers numbered
/// from the end of `specs` to `base_flow`: `prototypes` are those of them
/// that may open connections (by number), whose QPs are made here, after
/// the transfers made before the run, as if those transfers were. Returns
/// also each connection's first QP.
pub fn qps_and_flows(
    topo: &Topology,
    scenario: &Scenario,
    specs: Vec<FlowSpec>,
    (prototypes, base_flow): (&crate::workload::jobs::Prototypes, u64),
    passes: &[Pass],
    streams: &Streams,
    queue: &mut EventQueue<Event>,
) -> QpsAndFlows {
    let tc = &scenario.transport;
    let mut qps = Vec::new();
    let mut flows = Vec::with_capacity(specs.len());
    // Connection (workload, sender, receiver, key) -> its first QP.
    let mut conns: Conns = Default::default();
    for (fi, spec) in specs.into_iter().enumerate() {
        let n_qps = spec.n_qps();
        let shared = spec.conn;
        let reuse = shared.and_then(|c| conns.get(&(spec.workload, spec.src.0, spec.dst.0, c)));
        let first_qp = match reuse {
            Some(&q) => q,
            None => {
                let first = qps.len() as u32;
                if let Some(c) = shared {
                    conns.insert((spec.workload, spec.src.0, spec.dst.0, c), first);
                }
                // A connection has the workload's QPs; a message takes as
                // many of them as it has bytes, at most.
                let count = if shared.is_some() {
                    spec.qps.max(1)
                } else {
                    n_qps
                };
                for i in 0..count {
                    let bytes = share(spec.bytes, n_qps, i);
                    let posted = (shared.is_none() && i < n_qps).then_some(bytes);
                    let at = (first + i, i);
                    qps.push(new_qp(
                        topo, scenario, streams, &spec, fi, at, n_qps, posted,
                    ));
                }
                first
            }
        };
        if !spec.gated {
            queue.push(spec.start, Event::FlowStart(FlowId(fi as u32)));
        }
        let pkts = (0..n_qps)
            .map(|i| packets_of(share(spec.bytes, n_qps, i), tc.mtu))
            .sum();
        flows.push(FlowState::new(
            spec,
            first_qp,
            n_qps,
            shared.is_some(),
            pkts,
        ));
    }
    for (fi, spec) in &prototypes.flows {
        let Some(c) = spec.conn else {
            continue;
        };
        let key = (spec.workload, spec.src.0, spec.dst.0, c);
        if conns.contains_key(&key) {
            continue;
        }
        let first = qps.len() as u32;
        conns.insert(key, first);
        let n = spec.qps.max(1);
        for i in 0..n {
            qps.push(new_qp(
                topo,
                scenario,
                streams,
                spec,
                *fi as usize,
                (first + i, i),
                spec.n_qps(),
                None,
            ));
        }
    }
    // A pass's connections, one QP set each, shared with the messages of
    // the same connection made up front.
    let mut pass_qps = Vec::with_capacity(passes.len());
    let mut open = |spec: &FlowSpec, message: u64, qps: &mut Vec<_>| {
        let key = (
            spec.workload,
            spec.src.0,
            spec.dst.0,
            spec.conn.unwrap_or(0),
        );
        let fi = (base_flow + message) as usize;
        *conns.entry(key).or_insert_with(|| {
            let first = qps.len() as u32;
            for i in 0..spec.qps.max(1) {
                qps.push(new_qp(
                    topo,
                    scenario,
                    streams,
                    spec,
                    fi,
                    (first + i, i),
                    spec.qps.max(1),
                    None,
                ));
            }
            first
        })
    };
    for pass in passes {
        let mut firsts = Vec::with_capacity(pass.conns.len());
        for c in 0..pass.conns.len() as u32 {
            let idx = pass.first_on(c);
            let spec = pass.spec(topo, idx).filter(|_| pass.sends_on(c) > 0);
            let Some(spec) = spec else {
                // Over NVLink, or carrying nothing: no QP.
                firsts.push(u32::MAX);
                continue;
            };
            firsts.push(open(&spec, pass.first + idx, &mut qps));
        }
        pass_qps.push(firsts);
    }
    // Connections that passes of later parts open, after those of the
    // passes made now, as the passes are numbered.
    for (message, spec) in &prototypes.passes {
        open(spec, *message, &mut qps);
    }
    QpsAndFlows {
        qps,
        flows,
        pass_qps,
        conns,
    }
}

pub use crate::runtime::later::Conns;

/// The QPs of serving workloads' connections (`workload::serving`),
/// after every other: each plan's connections' first QPs. A connection's
/// QPs are labelled with its workload, past every transfer
/// (`runtime::serving::FLOW_BASE`).
pub fn serving_qps(
    topo: &Topology,
    scenario: &Scenario,
    streams: &Streams,
    plans: &[crate::workload::serving::Serving],
    qps: &mut Vec<QpState>,
) -> Vec<Vec<u32>> {
    let mut out = Vec::with_capacity(plans.len());
    for plan in plans {
        let w = &scenario.workloads[plan.workload as usize];
        let label = (crate::runtime::serving::FLOW_BASE + plan.workload) as usize;
        let mut firsts = Vec::with_capacity(plan.conns.len());
        for &(src, dst) in &plan.conns {
            let spec = FlowSpec {
                src,
                dst,
                src_nic: topo.gpus[src.idx()].nic,
                dst_nic: topo.gpus[dst.idx()].nic,
                bytes: u64::MAX,
                start: SimTime::ZERO,
                qps: w.qps,
                rate: w.rate,
                workload: plan.workload,
                gated: true,
                conn: None,
            };
            let first = qps.len() as u32;
            for i in 0..w.qps {
                qps.push(new_qp(
                    topo,
                    scenario,
                    streams,
                    &spec,
                    label,
                    (first + i, i),
                    w.qps,
                    None,
                ));
            }
            firsts.push(first);
        }
        out.push(firsts);
    }
    out
}

/// What `qps_and_flows` makes: every QP, each transfer's state, the first
/// QP of each pass connection, and each connection's first QP.
pub struct QpsAndFlows {
    pub qps: Vec<QpState>,
    pub flows: Vec<FlowState>,
    pub pass_qps: Vec<Vec<u32>>,
    pub conns: Conns,
}

/// What congestion control takes from each QP's path (its first path:
/// ECMP paths have one length in every fabric built here): Swift scales
/// its delay target by the switches on it; HPCC's T is the longest base
/// round trip of any QP (unless `[hpcc] base_rtt` gives one), as in the
/// HPCC paper, where every flow uses the fabric's largest; UEC's window
/// takes its QP's own unloaded round trip (its ceiling is 1.5 times that
/// bandwidth-delay product).
pub fn path_settings(
    qps: &mut [QpState],
    topo: &Topology,
    routes: &crate::topology::routing::Routes,
    scenario: &Scenario,
) {
    for q in qps.iter_mut() {
        if let RateControl::Swift(s) = &mut q.req.rate {
            let path = routes.first_path(topo, q.src_port, q.dst_nic);
            s.hops = path.map_or(0, |p| p.len().saturating_sub(1) as u32);
        }
    }
    let framing = scenario.qos.framing;
    let data = framing.wire_bytes(Opcode::WriteMiddle, scenario.transport.mtu);
    let ack = framing.wire_bytes(Opcode::Ack, 0);
    let one_way = |port: PortId, to: NicId, wire: u32| {
        routes
            .first_path(topo, port, to)
            .map_or(SimTime::ZERO, |path| {
                path.iter()
                    .map(|&p| topo.port(p).rate.serialize(wire as u64) + topo.port(p).delay)
                    .fold(SimTime::ZERO, |a, b| a + b)
            })
    };
    let round_trip = |(a, to_b, b, to_a): (PortId, NicId, PortId, NicId)| {
        one_way(a, to_b, data) + one_way(b, to_a, ack)
    };
    let uec = &scenario.transport.windows.uec;
    for q in qps.iter_mut() {
        let ends = (q.src_port, q.dst_nic, q.dst_port, q.src_nic);
        if let RateControl::Uec(u) = &mut q.req.rate {
            u.set_base_rtt(uec, round_trip(ends));
        }
    }
    if !qps.iter().any(|q| q.req.rate.hpcc().is_some()) {
        return;
    }
    let p = scenario.transport.windows.hpcc;
    let t = p.base_rtt.unwrap_or_else(|| {
        let mut pairs: Vec<(PortId, NicId, PortId, NicId)> = qps
            .iter()
            .map(|q| (q.src_port, q.dst_nic, q.dst_port, q.src_nic))
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        pairs
            .into_iter()
            .map(round_trip)
            .max()
            .unwrap_or(SimTime::ZERO)
    });
    for q in qps.iter_mut() {
        if let RateControl::Hpcc(h) = &mut q.req.rate {
            h.t_ps = t.0.max(1) as f64;
        }
    }
}

pub use crate::runtime::flow::share;

/// QP `id`, the `k`-th of transfer `fi`'s (or of its connection's), with
/// its write of `posted` bytes if it carries one from the start; `n_qps`
/// QPs share the transfer's rate cap.
#[allow(clippy::too_many_arguments)]
fn new_qp(
    topo: &Topology,
    scenario: &Scenario,
    streams: &Streams,
    spec: &FlowSpec,
    fi: usize,
    (id, k): (u32, u32),
    n_qps: u32,
    posted: Option<u64>,
) -> QpState {
    let tc = &scenario.transport;
    let src_ports = &topo.nics[spec.src_nic.idx()].ports;
    let dst_ports = &topo.nics[spec.dst_nic.idx()].ports;
    let mut req = Requester::new(tc.mtu, tc.write_mode);
    let mut resp = Responder::new(tc.mtu, tc.write_mode, tc.ooo);
    if let Some(bytes) = posted {
        req.post(fi as u32, bytes);
        resp.post(fi as u32, bytes);
    }
    let rate = topo.ports[src_ports[id as usize % src_ports.len()].idx()].rate;
    let w = &tc.windows;
    req.rate = match scenario.workloads[spec.workload as usize].cc {
        Cc::None => RateControl::LineRate,
        Cc::Dcqcn => RateControl::Dcqcn(Dcqcn::new(&tc.dcqcn, rate)),
        Cc::Dctcp => RateControl::Dctcp(crate::nic::dctcp::Dctcp::new(&w.dctcp)),
        Cc::Swift => RateControl::Swift(Box::new(crate::nic::swift::Swift::new(&w.swift))),
        // T is set once the routes are known (`path_settings`).
        Cc::Hpcc => RateControl::Hpcc(Box::new(crate::nic::hpcc::Hpcc::new(
            &w.hpcc,
            rate.bps() as f64,
            w.hpcc.base_rtt.unwrap_or(SimTime::ZERO),
        ))),
        Cc::Timely => RateControl::Timely(Box::new(crate::nic::timely::Timely::new(
            &w.timely,
            rate.bps() as f64,
        ))),
        // Its unloaded round trip, and what follows from it, too.
        Cc::Uec => RateControl::Uec(Box::new(crate::nic::uec::Uec::new(
            &w.uec,
            rate.bps() as f64,
            tc.mtu,
        ))),
    };
    if let Some(m) = tc.mrc {
        req = req.with_mrc(m, src_ports.len().min(8) as u32);
        resp = resp.with_sack();
    }
    // The QPs of one connection keep its source ports.
    let sport = match spec.conn {
        Some(c) => streams.derive_indexed("conn/udp-sport", c.wrapping_mul(1024) + k as u64),
        None => streams.derive_indexed("qp/udp-sport", id as u64),
    };
    let sport = 49152 + (sport % 16384) as u16;
    let ecmp = &scenario.switch.ecmp;
    let dscp = scenario.workloads[spec.workload as usize].dscp;
    let crc_on = |src, dst, sport| {
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
            tos: Packet::tos_of(dscp, ecn::ECT0),
            flow: crate::wire::packet::NO_FLOW,
        };
        Ecmp::header_crc(ecmp.hash, ecmp.fields, &template, topo.vlan_of(src))
    };
    let crc = |src, dst| crc_on(src, dst, sport);
    // An MRC QP's entropy values: one per path and as many spares, for
    // paths that lose packets (at most 256).
    let per_path = |src, dst| {
        tc.mrc.map_or(Vec::new(), |m| {
            (0..crate::nic::mrc::entropies(m.paths))
                .map(|p| crc_on(src, dst, mrc_sport(sport, p as u8)))
                .collect::<Vec<u32>>()
        })
    };
    QpState {
        flow: FlowId(fi as u32),
        src_nic: spec.src_nic,
        dst_nic: spec.dst_nic,
        src_gpu: spec.src,
        src_port: src_ports[id as usize % src_ports.len()],
        dst_port: dst_ports[id as usize % dst_ports.len()],
        udp_sport: sport,
        dscp,
        queue: scenario.qos.map.queue_of(dscp),
        header_crc: [
            crc(spec.src_nic, spec.dst_nic),
            crc(spec.dst_nic, spec.src_nic),
        ],
        path_crc: per_path(spec.src_nic, spec.dst_nic),
        path_crc_back: per_path(spec.dst_nic, spec.src_nic),
        planes: if tc.mrc.is_some() && src_ports.len() > 1 {
            let first = id as usize % src_ports.len();
            (0..src_ports.len().min(8))
                .map(|k| src_ports[(first + k) % src_ports.len()])
                .collect()
        } else {
            vec![src_ports[id as usize % src_ports.len()]]
        },
        in_ring: 0,
        req,
        resp,
        cap_bps: spec.rate.map_or(0.0, |r| r.bps() as f64 / n_qps as f64),
        cap_next: SimTime::ZERO,
        cnp_last: None,
        cnps_sent: 0,
        cnps_received: 0,
    }
}

/// Ideal completion times of single-QP transfers by size and by their
/// hops' (rate in bits per second, delay in picoseconds): all such a
/// transfer's ideal time depends on, and most transfers of a fabric share
/// them.
pub(super) use crate::runtime::ideal::IdealCache;

impl Simulation {
    /// Each transfer's ideal completion time, and the run's estimate of
    /// link transmissions and events.
    pub(super) fn estimate_and_ideal(&mut self) {
        let mut rt = self.jobs.take().expect("the runtime is not in a call");
        let mut cache = std::mem::take(&mut rt.ideal_cache);
        for f in 0..rt.flows.len() {
            let (ideal, work) = self.ideal_and_work(&rt.flows[f], f as u32, &mut cache);
            self.records.estimate.link_transmissions += work;
            rt.flows[f].ideal_fct = ideal;
        }
        rt.ideal_cache = cache;
        self.jobs = Some(rt);
        self.records.estimate.link_transmissions += self.runtime(|rt, k| rt.pass_work(k));
        self.records.estimate.events =
            (self.records.estimate.link_transmissions as f64 * Estimate::EVENTS_PER_LINK_TX) as u64;
    }

    /// Transfer `fl`'s (number `f`) completion time alone on an idle
    /// fabric, and the link transmissions it takes (data and ACKs).
    pub(super) fn ideal_and_work(
        &self,
        fl: &FlowState,
        f: u32,
        cache: &mut IdealCache,
    ) -> (SimTime, u64) {
        let ack_every = self.scenario.transport.ack_every.max(1) as u64;
        let (first, n, dst) = (fl.first_qp, fl.n_qps, fl.spec.dst_nic);
        let routes: Vec<Vec<PortId>> = (first..first + n)
            .map(|q| self.route_of(QpId(q), dst))
            .collect();
        // Each QP's share of this transfer alone, as its own write.
        let tc = &self.scenario.transport;
        let bytes = fl.spec.bytes;
        let alone: Vec<Requester> = (0..n)
            .map(|i| Requester::one(f, share(bytes, n, i), tc.mtu, tc.write_mode))
            .collect();
        let reqs: Vec<&Requester> = alone.iter().collect();
        let mut work = 0;
        for (r, route) in reqs.iter().zip(&routes) {
            let pkts = r.n_pkts as u64;
            work += (pkts + pkts.div_ceil(ack_every)) * route.len() as u64;
        }
        let framing = self.scenario.qos.framing;
        let pcie = self.nics.pcie_ps_per_byte();
        // One QP alone: its time follows from its size and its hops'
        // rates and delays, which most transfers of a fabric share.
        let key = (n == 1).then(|| {
            let hops = routes[0]
                .iter()
                .map(|&p| {
                    let port = self.topo.port(p);
                    (port.rate.bps(), port.delay.0)
                })
                .collect::<Vec<_>>();
            (bytes, hops)
        });
        let known = key.as_ref().and_then(|k| cache.get(k).copied());
        let mut ideal = match known {
            Some(t) => t,
            None => {
                let t = ideal::ideal_fct(&self.topo, framing, &reqs, &routes, pcie);
                if let Some(k) = key {
                    cache.insert(k, t);
                }
                t
            }
        };
        // A rate cap: the whole transfer on the wire at that rate.
        if let Some(cap) = fl.spec.rate {
            let wire: u64 = reqs.iter().map(|r| ideal::message_wire(r, framing)).sum();
            ideal = ideal.max(cap.serialize(wire));
        }
        (ideal, work)
    }

    /// The ports QP `q`'s packets cross to `dst`: its static route, or
    /// the first equal-cost path.
    pub(super) fn route_of(&self, q: QpId, dst: NicId) -> Vec<PortId> {
        self.qp_route(q).unwrap_or_else(|| {
            let src = self.nics.qps()[q.idx()].src_port;
            self.routes
                .first_path(&self.topo, src, dst)
                .unwrap_or(vec![src])
        })
    }
}
