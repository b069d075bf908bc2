//! Collectives as task graphs, executed the way NCCL does: the data is
//! split over channels, each channel runs the algorithm's steps on its own
//! connections (one QP set per peer pair and channel, so every message of
//! a connection hashes onto the same path), and each step's data is cut
//! into chunks that move through the steps as a pipeline.
//!
//! Sizes follow nccl-tests: `bytes` is the buffer of one rank (all-reduce,
//! broadcast), the gathered output (all-gather), the input before the
//! scatter (reduce-scatter), or everything one rank sends (all-to-all).
//!
//! A send between GPUs of one host is an NVLink copy. Between hosts it is
//! an RDMA Write from the sender's NIC; with PXN, a send to a GPU whose
//! NIC is on another rail first moves over NVLink to the GPU of the
//! sending host on the receiver's rail, and leaves from that GPU's NIC.

use super::graph::{GraphBuilder, TaskKind, NO_LANE};
pub use super::op::{Algorithm, Op, Protocol};
use super::pass::{Base, Pass, StepTimes, Via};
use super::tuner;
use super::{network_path, FlowSpec, MAX_FLOWS};
use crate::topology::routing::Routes;
use crate::topology::{GpuId, Topology};
use crate::units::SimTime;
use rustc_hash::FxHashMap as HashMap;

/// A collective as the scenario gives it, resolved.
#[derive(Clone, Debug)]
pub struct Collective {
    pub op: Op,
    pub algorithm: Algorithm,
    /// The communicator: rank i is `gpus[i]`.
    pub gpus: Vec<GpuId>,
    pub bytes: u64,
    pub channels: u32,
    /// Largest message a step's data is cut into.
    pub chunk: u64,
    pub pxn: bool,
    /// Broadcast: the rank that sends.
    pub root: usize,
    /// Hierarchical: the all-reduce across hosts, `Ring` or `Tree`.
    pub across: Algorithm,
    pub protocol: Protocol,
    /// What the scenario left to NCCL's tuner.
    pub auto: Auto,
}

/// Which settings of a collective the scenario left to NCCL's tuner:
/// for ring and tree (chosen or automatic), the protocol and the channel
/// count are NCCL's pick when not given, and the chunk follows the
/// protocol when not given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Auto {
    pub protocol: bool,
    pub channels: bool,
    pub chunk: bool,
}

/// One collective in the graph: the tasks that mark its start and end.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct CollectiveRun {
    pub workload: u32,
    pub op: Op,
    /// As run (NCCL's tuner's pick where the scenario said "auto").
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    pub channels: u32,
    pub ranks: usize,
    /// The hosts (scale-up domains) its ranks are in: 1 when it moves
    /// over NVLink only.
    pub hosts: u32,
    pub bytes: u64,
    pub start: u32,
    pub end: u32,
    /// The training iteration it belongs to, if any.
    pub iteration: Option<u32>,
    /// The software time its steps were charged.
    pub step_latency: StepLatency,
    /// When it started and ended, once its tasks are forgotten
    /// (`runtime::later`).
    #[serde(skip)]
    pub resolved: Option<(SimTime, SimTime)>,
}

pub use super::share;

/// Most tasks the task graph may hold, made before the run, or one part
/// of it made as the run goes (bounds memory and set-up time).
pub const MAX_TASKS: usize = 8 << 20;

pub(crate) fn too_many() -> String {
    format!(
        "the workloads need more than {MAX_TASKS} tasks (messages, copies, joins); use a larger chunk, fewer channels or fewer iterations"
    )
}

/// Turns sends into tasks and flows for one workload entry.
pub struct Emitter<'a> {
    pub topo: &'a Topology,
    pub routes: &'a Routes,
    pub graph: &'a mut GraphBuilder,
    pub flows: &'a mut Vec<FlowSpec>,
    pub workload: u32,
    pub qps: u32,
    pub pxn: bool,
    /// The servers' buses and GPU generation, for NCCL's tuner.
    pub host: tuner::Host,
    /// Lane of each connection (sender, receiver, channel).
    lanes: HashMap<(u32, u32, u32), u32>,
    /// NIC pairs already checked for a network path.
    reachable: HashMap<(u32, u32), bool>,
    /// While a collective runs rank by rank (`emit_per_rank`): the task
    /// each GPU waits for before it takes part, by GPU id.
    gate: Option<HashMap<u32, u32>>,
    /// The software time of the collectives' steps (`step_latency`).
    pub step_latency: StepLatency,
    /// The protocol of the collective being added.
    protocol: Protocol,
}

/// An emitter's settings and what it has learned (each connection's
/// lane, which NIC pairs have a path), kept between the parts of a job
/// added at different times, so that a connection keeps its lane.
#[derive(Clone, Debug, Default)]
pub struct EmitterState {
    workload: u32,
    qps: u32,
    pxn: bool,
    host: tuner::Host,
    step_latency: StepLatency,
    lanes: HashMap<(u32, u32, u32), u32>,
    reachable: HashMap<(u32, u32), bool>,
}

/// The software time of a collective's steps that the wire does not show
/// (`step_latency`): NCCL's own latency model, charged per step as the
/// passes run, or one time for every hop (zero: the network alone).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StepLatency {
    #[default]
    Nccl,
    Fixed(SimTime),
}

impl StepLatency {
    /// As the scenario would say it: "nccl", "none" or a duration.
    pub fn label(self) -> String {
        match self {
            StepLatency::Nccl => "nccl".into(),
            StepLatency::Fixed(SimTime::ZERO) => "none".into(),
            StepLatency::Fixed(d) => format!("{d} per step"),
        }
    }
}

impl<'a> Emitter<'a> {
    pub fn new(
        topo: &'a Topology,
        routes: &'a Routes,
        graph: &'a mut GraphBuilder,
        flows: &'a mut Vec<FlowSpec>,
        workload: u32,
        qps: u32,
        pxn: bool,
    ) -> Self {
        Emitter {
            topo,
            routes,
            graph,
            flows,
            workload,
            qps,
            pxn,
            host: tuner::Host::default(),
            lanes: HashMap::default(),
            reachable: HashMap::default(),
            gate: None,
            step_latency: StepLatency::Nccl,
            protocol: Protocol::Simple,
        }
    }

    /// What this emitter keeps for the next part of its workload (see
    /// `EmitterState`).
    pub fn into_state(self) -> EmitterState {
        EmitterState {
            workload: self.workload,
            qps: self.qps,
            pxn: self.pxn,
            host: self.host,
            step_latency: self.step_latency,
            lanes: self.lanes,
            reachable: self.reachable,
        }
    }

    /// An emitter that goes on from `state`.
    pub fn resume(
        topo: &'a Topology,
        routes: &'a Routes,
        graph: &'a mut GraphBuilder,
        flows: &'a mut Vec<FlowSpec>,
        state: EmitterState,
    ) -> Self {
        let mut e = Emitter::new(
            topo,
            routes,
            graph,
            flows,
            state.workload,
            state.qps,
            state.pxn,
        );
        e.host = state.host;
        e.step_latency = state.step_latency;
        e.lanes = state.lanes;
        e.reachable = state.reachable;
        e
    }

    pub fn join(&mut self, deps: &[u32], not_before: SimTime) -> u32 {
        let t = self.graph.task(TaskKind::Join, NO_LANE, not_before);
        for &d in deps {
            self.graph.edge(d, t);
        }
        t
    }

    /// `d` of time after `deps` (on `lane`, one at a time, if given).
    pub fn delay(&mut self, d: SimTime, lane: Option<u32>, deps: &[u32]) -> u32 {
        let t = self
            .graph
            .task(TaskKind::Delay(d), lane.unwrap_or(NO_LANE), SimTime::ZERO);
        for &x in deps {
            self.graph.edge(x, t);
        }
        t
    }

    /// The task done when the sender of `sent` (a task `send` returned)
    /// has every acknowledgement; a copy inside a host is its own.
    pub fn acked(&mut self, sent: u32) -> u32 {
        match self.graph.kind(sent) {
            TaskKind::Net(f) => self.graph.task(TaskKind::Acked(f), NO_LANE, SimTime::ZERO),
            _ => sent,
        }
    }

    /// `bytes` from GPU `a` to GPU `b` on `channel`, after `deps`. Returns
    /// the task that is done when the data is at `b`.
    pub fn send(
        &mut self,
        a: GpuId,
        b: GpuId,
        bytes: u64,
        channel: u32,
        deps: &[u32],
    ) -> Result<u32, String> {
        if self.graph.held() >= MAX_TASKS {
            return Err(too_many());
        }
        // A GPU sends nothing before it takes part in the collective.
        let gated;
        let deps = match self.gate.as_ref().and_then(|g| g.get(&a.0)) {
            Some(&ready) => {
                gated = [deps, &[ready]].concat();
                &gated[..]
            }
            None => deps,
        };
        let topo = self.topo;
        if topo.gpus[a.idx()].host == topo.gpus[b.idx()].host {
            return Ok(self.local(a, b, bytes, deps));
        }
        if let Some(p) = self.proxy(a, b) {
            let hop = self.local(a, p, bytes, deps);
            return self.net(p, b, bytes, channel, &[hop]);
        }
        self.net(a, b, bytes, channel, deps)
    }

    /// With PXN, the GPU of `a`'s host on `b`'s rail, if `a`'s NIC is on
    /// another: sends from `a` to `b` leave from its NIC.
    fn proxy(&self, a: GpuId, b: GpuId) -> Option<GpuId> {
        let topo = self.topo;
        let (ga, gb) = (topo.gpus[a.idx()], topo.gpus[b.idx()]);
        let rail_b = topo.nics[gb.nic.idx()].rail;
        if !self.pxn || topo.nics[ga.nic.idx()].rail == rail_b {
            return None;
        }
        topo.hosts[ga.host.idx()]
            .gpus
            .iter()
            .copied()
            .find(|g| topo.nics[topo.gpus[g.idx()].nic.idx()].rail == rail_b)
    }

    fn local(&mut self, a: GpuId, b: GpuId, bytes: u64, deps: &[u32]) -> u32 {
        if a == b {
            return self.join(deps, SimTime::ZERO);
        }
        let t = self.graph.task(
            TaskKind::Local {
                src: a,
                dst: b,
                bytes,
            },
            NO_LANE,
            SimTime::ZERO,
        );
        for &d in deps {
            self.graph.edge(d, t);
        }
        t
    }

    /// The lane of the connection from `a` to `b` on `channel`, once a
    /// network path between them is known.
    fn connection(&mut self, a: GpuId, b: GpuId, channel: u32) -> Result<u32, String> {
        let topo = self.topo;
        let (na, nb) = (topo.gpus[a.idx()].nic, topo.gpus[b.idx()].nic);
        let ok = *self
            .reachable
            .entry((na.0, nb.0))
            .or_insert_with(|| network_path(topo, self.routes, a, b).is_ok());
        if !ok {
            return Err(network_path(topo, self.routes, a, b)
                .err()
                .unwrap_or_default());
        }
        let graph = &mut *self.graph;
        Ok(*self
            .lanes
            .entry((a.0, b.0, channel))
            .or_insert_with(|| graph.new_lane()))
    }

    /// What a pass of this workload over `order` on `channel` starts
    /// from, numbered after the passes so far.
    fn base(&self, order: Vec<GpuId>, channel: u32) -> Base {
        Base {
            workload: self.workload,
            qps: self.qps,
            channel,
            order,
            first: self.graph.pass_messages,
        }
    }

    /// `via` for a pass's constructor.
    fn router(
        &mut self,
    ) -> impl FnMut(GpuId, GpuId, u32) -> Result<(Via, u64), String> + use<'_, 'a> {
        |a, b, ch| self.via(a, b, ch)
    }

    /// How a pass's messages from `a` to `b` on `channel` travel (as
    /// `send` would move them), and their connection's key.
    fn via(&mut self, a: GpuId, b: GpuId, channel: u32) -> Result<(Via, u64), String> {
        let topo = self.topo;
        if topo.gpus[a.idx()].host == topo.gpus[b.idx()].host {
            return Ok((Via::Local, 0));
        }
        if let Some(p) = self.proxy(a, b) {
            let lane = self.connection(p, b, channel)?;
            let key = connection_key(self.workload, p, b, channel);
            return Ok((Via::Pxn { proxy: p, lane }, key));
        }
        let lane = self.connection(a, b, channel)?;
        Ok((
            Via::Net { lane },
            connection_key(self.workload, a, b, channel),
        ))
    }

    fn net(
        &mut self,
        a: GpuId,
        b: GpuId,
        bytes: u64,
        channel: u32,
        deps: &[u32],
    ) -> Result<u32, String> {
        let lane = self.connection(a, b, channel)?;
        let f = self.graph.flow_base as usize + self.flows.len();
        if f >= MAX_FLOWS {
            return Err(format!(
                "the collective needs more than {MAX_FLOWS} messages; use a larger chunk or fewer channels"
            ));
        }
        let topo = self.topo;
        let (na, nb) = (topo.gpus[a.idx()].nic, topo.gpus[b.idx()].nic);
        let f = f as u32;
        self.flows.push(FlowSpec {
            src: a,
            dst: b,
            src_nic: na,
            dst_nic: nb,
            bytes,
            start: SimTime::ZERO,
            qps: self.qps,
            rate: None,
            workload: self.workload,
            gated: true,
            conn: Some(connection_key(self.workload, a, b, channel)),
        });
        let t = self.graph.task(TaskKind::Net(f), lane, SimTime::ZERO);
        for &d in deps {
            self.graph.edge(d, t);
        }
        Ok(t)
    }
}

/// Identifies a connection (communicator, sender, receiver, channel) for
/// the UDP source ports of its QPs.
fn connection_key(workload: u32, a: GpuId, b: GpuId, channel: u32) -> u64 {
    (u64::from(workload) << 48)
        ^ (u64::from(a.0) << 32)
        ^ (u64::from(b.0) << 8)
        ^ u64::from(channel)
}

/// NCCL's default channel count for a communicator: 2 per NIC rail
/// among its GPUs (at most 64).
pub fn default_channels(topo: &Topology, gpus: &[GpuId]) -> u32 {
    let mut rails: Vec<u32> = gpus
        .iter()
        .map(|g| topo.nics[topo.gpus[g.idx()].nic.idx()].rail)
        .collect();
    rails.sort_unstable();
    rails.dedup();
    (2 * rails.len() as u32).min(64)
}

/// Rank order of `channel`'s ring: host by host in the order the hosts
/// first appear, each host's GPUs by local index, rotated by the channel,
/// so that channel c enters each host at its c-th GPU and (with PXN)
/// crosses between hosts on that GPU's rail.
pub fn ring_order(topo: &Topology, gpus: &[GpuId], channel: u32) -> Vec<GpuId> {
    let mut out = Vec::with_capacity(gpus.len());
    for mut v in by_host(topo, gpus) {
        let r = channel as usize % v.len();
        v.rotate_left(r);
        out.extend(v);
    }
    out
}

/// Adds collective `c` to the graph, starting after `deps` and not before
/// `not_before`.
pub fn emit(
    e: &mut Emitter,
    c: &Collective,
    deps: &[u32],
    not_before: SimTime,
) -> Result<CollectiveRun, String> {
    let c = &tuned(e, c);
    let start = e.join(deps, not_before);
    let last = steps(e, &on_the_wire(e.topo, c), start)?;
    let end = e.join(&last, SimTime::ZERO);
    Ok(run_of(e, c, start, end))
}

/// `c` with what the scenario left to NCCL's tuner chosen as NCCL's
/// tuner chooses it (`workload::tuner`): for ring and tree, the
/// algorithm (if "auto"), the protocol and the channels if not given,
/// and the protocol's own chunk if none was given. Other algorithms keep
/// their settings.
pub fn tuned(e: &Emitter, c: &Collective) -> Collective {
    let mut t = c.clone();
    if matches!(c.algorithm, Algorithm::Nvls | Algorithm::NvlsTree) {
        // NVLS has Simple only.
        t.protocol = Protocol::Simple;
    }
    if !matches!(
        c.algorithm,
        Algorithm::Auto
            | Algorithm::Ring
            | Algorithm::Tree
            | Algorithm::Pat
            | Algorithm::Nvls
            | Algorithm::NvlsTree
    ) {
        return t;
    }
    let shape = comm_shape(e.topo, &e.host, &c.gpus);
    let algorithm = (c.algorithm != Algorithm::Auto).then_some(c.algorithm);
    let protocol = (!c.auto.protocol).then_some(c.protocol);
    let Some(pick) = shape.choose(c.op, c.bytes, algorithm, protocol) else {
        // Not one NCCL tunes (an all-to-all): its own algorithm.
        if t.algorithm == Algorithm::Auto {
            t.algorithm = Algorithm::for_op(c.op)
                .iter()
                .copied()
                .find(|&a| a != Algorithm::Auto)
                .unwrap_or(Algorithm::Ring);
        }
        return t;
    };
    t.algorithm = pick.algorithm;
    t.protocol = pick.protocol;
    if c.auto.channels {
        t.channels = pick.channels;
    }
    if c.auto.chunk {
        t.chunk = pick.protocol.chunk();
    }
    t
}

/// What NCCL's tuner sees of the communicator `gpus`.
pub fn comm_shape(topo: &Topology, host: &tuner::Host, gpus: &[GpuId]) -> tuner::CommShape {
    let hosts = by_host(topo, gpus);
    let nics_per_node = hosts
        .iter()
        .map(|h| {
            let mut nics: Vec<u32> = h.iter().map(|g| topo.gpus[g.idx()].nic.0).collect();
            nics.sort_unstable();
            nics.dedup();
            nics.len() as u32
        })
        .max()
        .unwrap_or(1);
    let nic = topo.gpus[gpus[0].idx()].nic;
    let nic_bps: u64 = topo.nics[nic.idx()]
        .ports
        .iter()
        .map(|p| topo.ports[p.idx()].rate.bps())
        .sum();
    let shared_nics = topo.hosts.iter().any(|h| h.gpus.len() > h.nics.len());
    tuner::CommShape {
        ranks: gpus.len() as u32,
        nodes: hosts.len() as u32,
        nics_per_node,
        shared_nics,
        nic_gbs: nic_bps as f64 / 8e9,
        pcie_gbs: host.pcie_bytes_per_s as f64 / 2e9,
        nvlink_gbs: host.nvlink_bytes_per_s as f64 / 2e9,
        arch: host.arch,
        nvls: host.nvls,
    }
}

/// `c` as its protocol moves it: the bytes its lines take, in the
/// protocol's steps (for LL128's tree, NCCL's smaller steps when the
/// buffer is small against the tree's depth, if the chunk is the
/// protocol's own).
fn on_the_wire(topo: &Topology, c: &Collective) -> Collective {
    let mut w = c.clone();
    w.bytes = c.protocol.wire(c.bytes);
    let mut chunk = c.chunk;
    if c.protocol == Protocol::Ll128
        && c.algorithm == Algorithm::Tree
        && c.chunk == Protocol::Ll128.chunk()
    {
        chunk = ll128_tree_chunk(topo, c);
    }
    if c.algorithm == Algorithm::Pat && c.chunk == c.protocol.chunk() {
        chunk = pat_chunk(c);
    }
    w.chunk = c.protocol.wire(chunk);
    w
}

/// NCCL's LL128 tree step (its `enqueue.cc`): halved while the buffer
/// gives fewer than 64 steps per channel per pipeline stage and a server
/// (1 + log2 servers + 0.1 GPUs per server, over the GPUs per server),
/// down to 128 KiB, then below 16 down to 32 KiB.
fn ll128_tree_chunk(topo: &Topology, c: &Collective) -> u64 {
    let servers = by_host(topo, &c.gpus).len().max(1);
    let ppn = c.gpus.len() as f64 / servers as f64;
    let steps = 1.0 + servers.ilog2() as f64 + 0.1 * ppn;
    let channels = u64::from(c.channels.max(1));
    let mut chunk = Protocol::Ll128.chunk();
    let per = |chunk: u64| (c.bytes / (channels * chunk)) as f64;
    while per(chunk) < steps * 64.0 / ppn && chunk > 131_072 {
        chunk /= 2;
    }
    while per(chunk) < steps * 16.0 / ppn && chunk > 32_768 {
        chunk /= 2;
    }
    chunk
}

/// NCCL's PAT chunk (its `enqueue.cc`): the step halved while the
/// channels would get fewer than 32 (all-gather) or 16 (reduce-scatter)
/// chunks of the buffer, down to 64 KiB.
fn pat_chunk(c: &Collective) -> u64 {
    let per = if c.op == Op::AllGather { 32 } else { 16 };
    let mut chunk = c.protocol.chunk();
    while chunk * u64::from(c.channels.max(1)) * per > c.bytes && chunk > 65_536 {
        chunk /= 2;
    }
    chunk
}

/// The algorithm's tasks, after `start`; the tasks it ends with.
fn steps(e: &mut Emitter, c: &Collective, start: u32) -> Result<Vec<u32>, String> {
    if c.gpus.len() < 2 {
        return Err("a collective needs at least 2 GPUs".into());
    }
    let mut last = Vec::new();
    e.protocol = c.protocol;
    match (c.op, c.algorithm) {
        (Op::AllToAll, _) => direct_all_to_all(e, c, start, &mut last)?,
        (Op::Broadcast, _) => ring_broadcast(e, c, start, &mut last)?,
        (_, Algorithm::Hierarchical) => hierarchical(e, c, start, &mut last)?,
        (Op::AllReduce, Algorithm::NvlsTree) => nvls_tree(e, c, start, &mut last)?,
        (_, Algorithm::Nvls) => {
            let n = c.gpus.len();
            let done = nvls(e, &c.gpus, c.op, c.bytes, &vec![start; n])?;
            last.extend(done);
        }
        (_, Algorithm::Tree) => double_tree(e, c, start, &mut last)?,
        (_, Algorithm::HalvingDoubling) => halving_doubling(e, c, start, &mut last)?,
        (_, Algorithm::Pat) => pat(e, c, start, &mut last)?,
        _ => ring(e, c, start, &mut last)?,
    }
    Ok(last)
}

fn run_of(e: &Emitter, c: &Collective, start: u32, end: u32) -> CollectiveRun {
    CollectiveRun {
        workload: e.workload,
        op: c.op,
        algorithm: c.algorithm,
        protocol: c.protocol,
        channels: c.channels,
        ranks: c.gpus.len(),
        hosts: {
            let mut h: Vec<u32> = c.gpus.iter().map(|g| e.topo.gpus[g.idx()].host.0).collect();
            h.sort_unstable();
            h.dedup();
            h.len() as u32
        },
        bytes: c.bytes,
        start,
        end,
        iteration: None,
        step_latency: e.step_latency,
        resolved: None,
    }
}

/// Adds collective `c` to the graph rank by rank, as a framework runs
/// it: rank i takes part once `ready[i]` is done (it sends nothing
/// before), and its part is done once it has received everything the
/// collective brings it (and not before `ready[i]`), without waiting for
/// the other ranks. Returns the run (its start: the last rank's
/// arrival; its end: the last rank's completion) and the task that ends
/// each rank's part, by rank.
pub fn emit_per_rank(
    e: &mut Emitter,
    c: &Collective,
    ready: &[u32],
) -> Result<(CollectiveRun, Vec<u32>), String> {
    debug_assert_eq!(ready.len(), c.gpus.len());
    let c = &tuned(e, c);
    // The algorithm starts at once; each send waits for its sender.
    let now = e.join(&[], SimTime::ZERO);
    let first = e.graph.len() as u32;
    let gate = c.gpus.iter().zip(ready).map(|(g, &r)| (g.0, r)).collect();
    e.gate = Some(gate);
    let done = steps(e, &on_the_wire(e.topo, c), now);
    e.gate = None;
    done?;
    // What each rank receives: the transfers and copies that end at it.
    let rank_of: HashMap<u32, usize> = c.gpus.iter().enumerate().map(|(i, g)| (g.0, i)).collect();
    let mut got: Vec<Vec<u32>> = ready.iter().map(|&r| vec![r]).collect();
    for t in first..e.graph.len() as u32 {
        let dst = match e.graph.kind(t) {
            TaskKind::Net(f) => e.flows[(f - e.graph.flow_base) as usize].dst,
            TaskKind::Local { dst, .. } => dst,
            // What the switch writes to a rank.
            TaskKind::Switch { gpu, up: false, .. } => gpu,
            TaskKind::Switch { up: true, .. } => continue,
            // Done once everything the pass brings the rank has come.
            TaskKind::Exit { pass, pos } => e.graph.pass(pass).order[pos as usize],
            TaskKind::Delay(_) | TaskKind::Join | TaskKind::Acked(_) | TaskKind::Enter { .. } => {
                continue
            }
        };
        if let Some(&i) = rank_of.get(&dst.0) {
            got[i].push(t);
        }
    }
    let ends: Vec<u32> = got.iter().map(|g| e.join(g, SimTime::ZERO)).collect();
    let start = e.join(ready, SimTime::ZERO);
    let end = e.join(&ends, SimTime::ZERO);
    Ok((run_of(e, c, start, end), ends))
}

/// Ring all-reduce (reduce-scatter then all-gather, 2(n-1) steps),
/// all-gather or reduce-scatter (n-1 steps), one ring per channel.
fn ring(e: &mut Emitter, c: &Collective, start: u32, last: &mut Vec<u32>) -> Result<(), String> {
    let n = c.gpus.len();
    let steps = ring_steps(c.op, n);
    for ch in 0..c.channels {
        let order = ring_order(e.topo, &c.gpus, ch);
        let data = share(c.bytes, c.channels as u64, ch as u64);
        let done = ring_pass(e, &order, data, steps, c.chunk, ch, &vec![start; n])?;
        last.extend(done);
    }
    Ok(())
}

fn ring_steps(op: Op, n: usize) -> usize {
    match op {
        Op::AllReduce => 2 * (n - 1),
        _ => n - 1,
    }
}

/// `steps` ring steps over `order` with `data` bytes cut into n blocks: at
/// step k the rank at position i sends block (i - k) mod n to position
/// i + 1, chunk by chunk, and a chunk goes on once it has arrived.
/// Position i starts after `ready[i]`. Returns, per position, a task done
/// when its last chunk has arrived.
#[allow(clippy::too_many_arguments)]
fn ring_pass(
    e: &mut Emitter,
    order: &[GpuId],
    data: u64,
    steps: usize,
    chunk: u64,
    ch: u32,
    ready: &[u32],
) -> Result<Vec<u32>, String> {
    let n = order.len();
    let slices = share(data, n as u64, 0).div_ceil(chunk.max(1)).max(1);
    let messages = (steps as u64)
        .checked_mul(n as u64)
        .and_then(|m| m.checked_mul(slices));
    let (Ok(steps), Ok(slices), Some(messages)) =
        (u32::try_from(steps), u32::try_from(slices), messages)
    else {
        return Err(passes_too_many());
    };
    let order = order.to_vec();
    let base = e.base(order, ch);
    let mut pass = Pass::ring(base, data, steps, slices, &mut e.router())?;
    pass.streamed = e.graph.stream_rings && pass.can_stream();
    if !pass.streamed && messages > MAX_PASS_MESSAGES {
        return Err(passes_too_many());
    }
    add_pass(e, pass, ready)
}

/// Adds `pass` to the graph, its positions entering after `ready` (and
/// their GPU's gate); returns the task that ends each position's part.
fn add_pass(e: &mut Emitter, mut pass: Pass, ready: &[u32]) -> Result<Vec<u32>, String> {
    let n = pass.positions();
    // A stream's messages are never made, and need no numbers.
    let messages = if pass.streamed { 0 } else { pass.messages() };
    if e.graph.pass_messages + messages > MAX_PASS_MESSAGES {
        return Err(passes_too_many());
    }
    if e.graph.held() + 2 * n > MAX_TASKS {
        return Err(too_many());
    }
    if let Some(limit) = e.graph.would_pass_limit(pass.held_bytes() + 16 * n as u64) {
        return Err(too_large(e.graph, limit));
    }
    e.graph.pass_messages += messages;
    pass.latency = step_times(e, &pass);
    let index = e.graph.next_pass();
    for (i, &g) in pass.order.iter().enumerate() {
        let pos = i as u32;
        let t = e
            .graph
            .task(TaskKind::Enter { pass: index, pos }, NO_LANE, SimTime::ZERO);
        e.graph.edge(ready[i], t);
        // A GPU sends nothing before it takes part in the collective.
        if let Some(&gate) = e.gate.as_ref().and_then(|gates| gates.get(&g.0)) {
            e.graph.edge(gate, t);
        }
        pass.enter.push(t);
    }
    for i in 0..n as u32 {
        let t = e.graph.task(
            TaskKind::Exit {
                pass: index,
                pos: i,
            },
            NO_LANE,
            SimTime::ZERO,
        );
        pass.exit.push(t);
    }
    let exits = pass.exit.clone();
    e.graph.push_pass(pass);
    Ok(exits)
}

/// The software time of `pass`'s steps under the emitter's setting.
fn step_times(e: &Emitter, pass: &Pass) -> StepTimes {
    match e.step_latency {
        StepLatency::Fixed(d) => StepTimes {
            nvlink: d,
            net: d,
            launch: SimTime::ZERO,
            with_wire: false,
        },
        StepLatency::Nccl => {
            let servers = hosts_of(e.topo, &pass.order);
            let ranks = pass.positions() as u32;
            let us = |x: f64| SimTime((x * 1e6).round() as u64);
            let [nvlink, net, launch] =
                tuner::step_latency(pass.step_shape(), e.protocol, servers, ranks);
            StepTimes {
                nvlink: us(nvlink),
                net: us(net),
                launch: us(launch),
                with_wire: true,
            }
        }
    }
}

/// The error of a workload whose collectives would hold more memory,
/// before the run, than the run may take.
fn too_large(g: &GraphBuilder, limit: u64) -> String {
    let conns: usize = g.passes.iter().map(|p| p.conns.len()).sum();
    format!(
        "the workload's collectives would hold more than {} MB before the run ({} collectives so far, with {conns} connections), more than the {} MB the run may take (--max-memory, or the memory this machine has available); nothing was run. Use fewer micro-batches, fewer iterations made at once, or a smaller parallel group",
        g.held_bytes() / 1_000_000,
        g.passes.len(),
        limit / 1_000_000
    )
}

fn passes_too_many() -> String {
    format!(
        "the collectives need more than {MAX_PASS_MESSAGES} messages; use a larger chunk or fewer channels"
    )
}

/// Most messages the passes of a run may number (their tasks and
/// flows are numbered past the graph's, in 32 bits).
pub const MAX_PASS_MESSAGES: u64 = 1 << 30;

/// Hierarchical all-reduce: a reduce-scatter among the GPUs of each host
/// over NVLink, an all-reduce of each GPU's 1/g share among the GPUs of
/// the same local index (one rail) across hosts, and an all-gather inside
/// each host again. Each phase of a GPU starts when its own previous
/// phase is done.
fn hierarchical(
    e: &mut Emitter,
    c: &Collective,
    start: u32,
    last: &mut Vec<u32>,
) -> Result<(), String> {
    let hosts = even_hosts(e.topo, &c.gpus, "hierarchical")?;
    let g = hosts[0].len();
    let rails_ch = c.channels.div_ceil(g as u32).max(1);
    // Ready time of each GPU (by communicator order within `hosts`).
    let mut ready: Vec<Vec<u32>> = hosts.iter().map(|h| vec![start; h.len()]).collect();
    let local = |e: &mut Emitter, op: Op, ready: &mut Vec<Vec<u32>>| -> Result<(), String> {
        if g < 2 {
            return Ok(());
        }
        for (hi, h) in hosts.iter().enumerate() {
            ready[hi] = ring_pass(e, h, c.bytes, ring_steps(op, g), c.chunk, 0, &ready[hi])?;
        }
        Ok(())
    };
    local(e, Op::ReduceScatter, &mut ready)?;
    if hosts.len() > 1 {
        for l in 0..g {
            let rail: Vec<GpuId> = hosts.iter().map(|h| h[l]).collect();
            let part = share(c.bytes, g as u64, l as u64);
            let mut outs = vec![Vec::new(); hosts.len()];
            for ch in 0..rails_ch {
                let data = share(part, rails_ch as u64, ch as u64);
                let r: Vec<u32> = (0..hosts.len()).map(|hi| ready[hi][l]).collect();
                let done = if c.across == Algorithm::Tree {
                    let data = tree_bytes(data, rails_ch, ch);
                    tree_pass(e, &rail, &vec![1; rail.len()], data, c.chunk, 1 + ch, &r)?
                        .iter()
                        .map(|got| e.join(got, SimTime::ZERO))
                        .collect()
                } else {
                    let steps = ring_steps(Op::AllReduce, hosts.len());
                    ring_pass(e, &rail, data, steps, c.chunk, 1 + ch, &r)?
                };
                for (hi, d) in done.into_iter().enumerate() {
                    outs[hi].push(d);
                }
            }
            for (hi, o) in outs.into_iter().enumerate() {
                ready[hi][l] = e.join(&o, SimTime::ZERO);
            }
        }
    }
    local(e, Op::AllGather, &mut ready)?;
    last.extend(ready.into_iter().flatten());
    Ok(())
}

/// NVLS (NVLink SHARP) among `gpus`, GPUs of one host whose switch
/// chips reduce and multicast, as NCCL runs it (`all_reduce.h`): the
/// buffer goes in loops, each split among the heads (up to 32 of the
/// GPUs); for its part of a loop a head has the switch read and reduce
/// the part from every GPU, then writes the sum once for the switch to
/// multicast to all. So each GPU sends its buffer and the parts it
/// heads, and receives as much, at the rate NCCL's model gives NVLS
/// (`CommShape::nvls_rate`). A reduce-scatter is the reading half (each
/// GPU heads its own part), an all-gather the multicast half.
///
/// The loops go in lockstep steps (at most 64, fewer for small
/// buffers: one per 128 KiB per head): in step k
/// every GPU sends loop k to be reduced while the heads write the sums
/// of loop k - 1, so the two halves overlap as NCCL's warps do. A step
/// starts once every GPU has entered and the step before is done. Each
/// step's copies are one-sided, between a GPU and the switch chips
/// (`TaskKind::Switch`). Returns the task ending each GPU's part.
fn nvls(
    e: &mut Emitter,
    gpus: &[GpuId],
    op: Op,
    bytes: u64,
    ready: &[u32],
) -> Result<Vec<u32>, String> {
    let shape = comm_shape(e.topo, &e.host, gpus);
    if shape.nodes != 1 {
        return Err(format!(
            "nvls runs inside one NVLink domain (one host), and these {} ranks span {} hosts; use nvls-tree (all-reduce) or hierarchical",
            gpus.len(),
            shape.nodes
        ));
    }
    let (cap, graph) = nvls_cap(&shape)?;
    let heads = if op == Op::AllReduce {
        graph.heads as usize
    } else {
        gpus.len()
    };
    let loops = match op {
        Op::AllReduce => nvls_loops(&shape, bytes, 64),
        _ => 1,
    };
    let start = e.join(ready, SimTime::ZERO);
    let step = NvlsStep {
        heads,
        loops,
        cap,
        launch: true,
    };
    let done = nvls_steps(e, gpus, op, bytes, step, start)?;
    Ok(vec![done; gpus.len()])
}

/// NVLS's rate cap for `shape`'s GPUs in one host (megabytes per
/// second) and its graph, or why NCCL would not offer it.
fn nvls_cap(shape: &tuner::CommShape) -> Result<(u32, tuner::NvlsGraph), String> {
    match (shape.nvls_rate(), shape.nvls_graph()) {
        (Some(rate), Some(graph)) => {
            let cap = (rate / 1e6).round().clamp(1.0, f64::from(u32::MAX)) as u32;
            Ok((cap, graph))
        }
        _ => Err(
            "nvls needs NVLink switch chips that reduce ([host] nvls = true, scale_up = \"switched\", a Hopper or later GPU) and at least 2 GPUs per host"
                .into(),
        ),
    }
}

/// The steps NVLS's pipeline takes for `bytes`: one per chunk of 128
/// KiB per head (NCCL's CTAs each pipeline their share chunk by chunk),
/// at least one and at most `most`.
fn nvls_loops(shape: &tuner::CommShape, bytes: u64, most: u64) -> u64 {
    let heads = shape.nvls_graph().map_or(1, |g| u64::from(g.heads));
    (bytes / (heads * tuner::NVLS_CHUNK)).clamp(1, most)
}

/// How an NVLS phase runs: its heads (the first GPUs), loops, rate cap
/// (MB/s), and whether NCCL's launch latency comes before it.
#[derive(Clone, Copy)]
struct NvlsStep {
    heads: usize,
    loops: u64,
    cap: u32,
    launch: bool,
}

/// The steps of one NVLS phase among `gpus` (see `nvls`), after task
/// `start`; returns the task done once its last step is.
fn nvls_steps(
    e: &mut Emitter,
    gpus: &[GpuId],
    op: Op,
    bytes: u64,
    s: NvlsStep,
    start: u32,
) -> Result<u32, String> {
    if e.graph.held() + (s.loops as usize + 1) * (2 * gpus.len() + 2) > MAX_TASKS {
        return Err(too_many());
    }
    let halves = match op {
        Op::AllReduce => [true, true],
        Op::ReduceScatter => [true, false],
        _ => [false, true],
    };
    // The part of `data` GPU i heads.
    let head_part =
        |data: u64, i: usize| (i < s.heads).then(|| share(data, s.heads as u64, i as u64));
    // A GPU sends nothing before it takes part in the collective, and
    // the switch reads from every GPU.
    let gates: Vec<u32> = gpus
        .iter()
        .filter_map(|g| e.gate.as_ref().and_then(|gates| gates.get(&g.0)).copied())
        .collect();
    let mut prev = if gates.is_empty() {
        start
    } else {
        e.join(&[&[start][..], &gates[..]].concat(), SimTime::ZERO)
    };
    for k in 0..=s.loops {
        let latency = match e.step_latency {
            StepLatency::Nccl if k == 0 && s.launch => {
                SimTime::from_ns((tuner::NVLS_LATENCY_US * 1000.0) as u64)
            }
            StepLatency::Nccl => SimTime::ZERO,
            StepLatency::Fixed(d) => d,
        };
        if latency > SimTime::ZERO {
            prev = e.delay(latency, None, &[prev]);
        }
        // Loop k to be reduced, the sums of loop k - 1 to be multicast.
        let reduce = (halves[0] && k < s.loops).then(|| share(bytes, s.loops, k));
        let cast = (halves[1] && k > 0).then(|| share(bytes, s.loops, k - 1));
        let mut copies = Vec::with_capacity(2 * gpus.len());
        for (i, &g) in gpus.iter().enumerate() {
            let up = reduce.unwrap_or(0) + cast.and_then(|d| head_part(d, i)).unwrap_or(0);
            let down = reduce.and_then(|d| head_part(d, i)).unwrap_or(0) + cast.unwrap_or(0);
            for (up, bytes) in [(true, up), (false, down)] {
                if bytes > 0 {
                    let kind = TaskKind::Switch {
                        gpu: g,
                        up,
                        cap: s.cap,
                        bytes,
                    };
                    let t = e.graph.task(kind, NO_LANE, SimTime::ZERO);
                    e.graph.edge(prev, t);
                    copies.push(t);
                }
            }
        }
        if !copies.is_empty() {
            prev = e.join(&copies, SimTime::ZERO);
        }
    }
    Ok(prev)
}

/// NVLS-tree all-reduce, as NCCL runs it across NVLink domains
/// (`all_reduce.h`, `NCCL_ALGO_NVLS_TREE`): in each host NVLS reduces
/// every loop to the heads (the GPUs with a NIC, at most 32), each head
/// all-reduces its part with the same head of the other hosts over its
/// NIC by NCCL's tree, and NVLS multicasts the sums in each host. The
/// loops (at most 16) pipeline the three: a host reduces loop k + 1 and
/// multicasts loop k - 1 while loop k crosses the network.
fn nvls_tree(
    e: &mut Emitter,
    c: &Collective,
    start: u32,
    last: &mut Vec<u32>,
) -> Result<(), String> {
    let hosts = even_hosts(e.topo, &c.gpus, "nvls-tree")?;
    let shape = comm_shape(e.topo, &e.host, &c.gpus);
    let (_, graph) = nvls_cap(&shape)?;
    let (cap, _) = nvls_cap(&comm_shape(e.topo, &e.host, &hosts[0]))?;
    let heads = graph.heads as usize;
    let loops = nvls_loops(&shape, c.bytes, 16);
    let channels = c.channels.div_ceil(graph.heads).max(1);
    let mut reduced: Vec<u32> = vec![start; hosts.len()];
    let mut cast: Vec<u32> = vec![start; hosts.len()];
    for k in 0..loops {
        let part = share(c.bytes, loops, k);
        let step = |launch| NvlsStep {
            heads,
            loops: 1,
            cap,
            launch,
        };
        for (hi, h) in hosts.iter().enumerate() {
            let s = step(k == 0);
            reduced[hi] = nvls_steps(e, h, Op::ReduceScatter, part, s, reduced[hi])?;
        }
        // A host multicasts loop k once it multicast loop k - 1 and
        // every head has loop k's sums from the network.
        let mut crossed: Vec<Vec<u32>> = cast.iter().map(|&t| vec![t]).collect();
        if hosts.len() > 1 {
            for l in 0..heads {
                let rail: Vec<GpuId> = hosts.iter().map(|h| h[l]).collect();
                let data = share(part, heads as u64, l as u64);
                let ch = (k as u32) % channels;
                let data = tree_bytes(data, 1, 0);
                let done = tree_pass(
                    e,
                    &rail,
                    &vec![1; rail.len()],
                    data,
                    c.chunk,
                    1 + ch,
                    &reduced,
                )?;
                for (hi, d) in done.into_iter().enumerate() {
                    crossed[hi].extend(d);
                }
            }
        }
        for (hi, h) in hosts.iter().enumerate() {
            let ready = e.join(&crossed[hi], SimTime::ZERO);
            cast[hi] = nvls_steps(e, h, Op::AllGather, part, step(false), ready)?;
        }
    }
    for (hi, h) in hosts.iter().enumerate() {
        last.extend(std::iter::repeat_n(cast[hi], h.len()));
    }
    Ok(())
}

/// The communicator's GPUs host by host (`by_host`), if every host
/// gives it as many; otherwise why `algorithm` cannot run.
fn even_hosts(topo: &Topology, gpus: &[GpuId], algorithm: &str) -> Result<Vec<Vec<GpuId>>, String> {
    let hosts = by_host(topo, gpus);
    let g = hosts[0].len();
    if let Some(h) = hosts.iter().find(|h| h.len() != g) {
        return Err(format!(
            "{algorithm} needs the same number of GPUs from every host; {} has {} and {} has {g}",
            topo.gpu_name(h[0]),
            h.len(),
            topo.gpu_name(hosts[0][0])
        ));
    }
    Ok(hosts)
}

/// How many hosts `gpus` are in.
fn hosts_of(topo: &Topology, gpus: &[GpuId]) -> u32 {
    let mut hosts: Vec<u32> = gpus.iter().map(|g| topo.gpus[g.idx()].host.0).collect();
    hosts.sort_unstable();
    hosts.dedup();
    hosts.len() as u32
}

/// The communicator's GPUs host by host (hosts in order of first
/// appearance, GPUs by local index).
fn by_host(topo: &Topology, gpus: &[GpuId]) -> Vec<Vec<GpuId>> {
    // Host -> its place in `hosts` (found in one pass: thousands of
    // hosts make a search per GPU quadratic).
    let mut at: HashMap<u32, usize> = HashMap::default();
    let mut hosts: Vec<Vec<GpuId>> = Vec::new();
    for &g in gpus {
        let h = topo.gpus[g.idx()].host.0;
        let i = *at.entry(h).or_insert_with(|| {
            hosts.push(Vec::new());
            hosts.len() - 1
        });
        hosts[i].push(g);
    }
    for v in &mut hosts {
        v.sort_by_key(|g| topo.gpus[g.idx()].local);
    }
    hosts
}

/// Tree all-reduce as NCCL builds it: per channel, a chain through the
/// GPUs of each server (in the channel's ring order, so channel c's
/// chain starts at each server's c-th GPU) and one of the two binary
/// trees of NCCL's double tree over the servers between the chains'
/// heads (`tree_bytes`: NCCL's first half of channels take one, their
/// duplicates the other). Up a tree a node sends a chunk to its parent
/// once it has it from all its children; down, a node passes a chunk to
/// its children once it has it from its parent.
fn double_tree(
    e: &mut Emitter,
    c: &Collective,
    start: u32,
    last: &mut Vec<u32>,
) -> Result<(), String> {
    let n = c.gpus.len();
    let servers: Vec<usize> = by_host(e.topo, &c.gpus).iter().map(Vec::len).collect();
    for ch in 0..c.channels {
        let order = ring_order(e.topo, &c.gpus, ch);
        let data = tree_bytes(share(c.bytes, c.channels as u64, ch as u64), c.channels, ch);
        let got = tree_pass(e, &order, &servers, data, c.chunk, ch, &vec![start; n])?;
        last.extend(got.into_iter().flatten());
    }
    Ok(())
}

/// The bytes channel `ch` of `channels` carries up and down each of the
/// two trees, given its share `data`. NCCL duplicates its channels after
/// building them, the first half using tree 0 and their duplicates (the
/// same GPUs, the same NIC) tree 1, so each channel runs one tree with
/// all of its share: half as many pipelines as both trees on every
/// channel would make, each twice as deep. A lone channel (or the last of
/// an odd count, which NCCL never makes) carries half on each tree.
pub fn tree_bytes(data: u64, channels: u32, ch: u32) -> [u64; 2] {
    let pairs = channels / 2;
    if ch < 2 * pairs {
        if ch < pairs {
            [data, 0]
        } else {
            [0, data]
        }
    } else {
        [share(data, 2, 0), share(data, 2, 1)]
    }
}

/// One tree all-reduce over `order`, `data[t]` bytes on tree t, grouped
/// by server as `servers` says (see `double_tree`), position i starting
/// after `ready[i]`. Returns, per position, the tasks that bring it the
/// reduced chunks (the root's: when it has reduced them).
fn tree_pass(
    e: &mut Emitter,
    order: &[GpuId],
    servers: &[usize],
    data: [u64; 2],
    chunk: u64,
    ch: u32,
    ready: &[u32],
) -> Result<Vec<Vec<u32>>, String> {
    if data[0].max(data[1]).div_ceil(chunk.max(1)) > u64::from(u32::MAX) {
        return Err(passes_too_many());
    }
    let base = e.base(order.to_vec(), ch);
    let pass = Pass::tree(base, servers, data, chunk, &mut e.router())?;
    Ok(add_pass(e, pass, ready)?
        .into_iter()
        .map(|x| vec![x])
        .collect())
}

/// Halving-doubling (Rabenseifner): a reduce-scatter by recursive halving
/// (partners at distance n/2, n/4, ... 1 exchange half of what each
/// holds) and an all-gather by recursive doubling (distances 1, 2, ...
/// n/2, the data doubling each step). A rank's step starts once it has
/// what its previous partner sent.
fn halving_doubling(
    e: &mut Emitter,
    c: &Collective,
    start: u32,
    last: &mut Vec<u32>,
) -> Result<(), String> {
    let n = c.gpus.len();
    if !n.is_power_of_two() {
        return Err(format!(
            "halving-doubling needs a power-of-two number of ranks; the communicator has {n}"
        ));
    }
    let log = n.trailing_zeros() as usize;
    // (distance, share of the buffer sent as a fraction 1/den)
    let mut plan: Vec<(usize, u64)> = Vec::new();
    if matches!(c.op, Op::AllReduce | Op::ReduceScatter) {
        plan.extend((0..log).map(|s| (n >> (s + 1), 1u64 << (s + 1))));
    }
    if matches!(c.op, Op::AllReduce | Op::AllGather) {
        plan.extend((0..log).map(|s| (1 << s, (n >> s) as u64)));
    }
    for ch in 0..c.channels {
        let order = ring_order(e.topo, &c.gpus, ch);
        let data = share(c.bytes, c.channels as u64, ch as u64);
        let stages: Vec<(u32, u64)> = plan.iter().map(|&(d, den)| (d as u32, den)).collect();
        if data.div_ceil(c.chunk.max(1)) > u64::from(u32::MAX) {
            return Err(passes_too_many());
        }
        let base = e.base(order, ch);
        let pass = Pass::halving(base, data, &stages, c.chunk, &mut e.router())?;
        last.extend(add_pass(e, pass, &vec![start; n])?);
    }
    Ok(())
}

/// NCCL's PAT all-gather or reduce-scatter (see `pass::pat`), one pass
/// per channel on its share of the buffer; NCCL offers it only with one
/// GPU per server.
fn pat(e: &mut Emitter, c: &Collective, start: u32, last: &mut Vec<u32>) -> Result<(), String> {
    let n = c.gpus.len();
    if c.protocol != Protocol::Simple {
        return Err(format!(
            "pat: NCCL's PAT runs only the simple protocol, not {}",
            c.protocol.name()
        ));
    }
    let hosts = by_host(e.topo, &c.gpus);
    if let Some(h) = hosts.iter().find(|h| h.len() > 1) {
        return Err(format!(
            "pat: NCCL runs PAT only with one GPU per server; the communicator has {} on the host of {}",
            h.len(),
            e.topo.gpu_name(h[0])
        ));
    }
    for ch in 0..c.channels {
        let data = share(c.bytes, c.channels as u64, ch as u64);
        if (data / n as u64).div_ceil(c.chunk.max(1)) > u64::from(u32::MAX) {
            return Err(passes_too_many());
        }
        let base = e.base(c.gpus.clone(), ch);
        let pass = Pass::pat(base, data, c.op == Op::AllGather, c.chunk, &mut e.router())?;
        last.extend(add_pass(e, pass, &vec![start; n])?);
    }
    Ok(())
}

/// Broadcast down a ring from the root, pipelined chunk by chunk.
fn ring_broadcast(
    e: &mut Emitter,
    c: &Collective,
    start: u32,
    last: &mut Vec<u32>,
) -> Result<(), String> {
    let n = c.gpus.len();
    let root = c.gpus[c.root.min(n - 1)];
    for ch in 0..c.channels {
        let mut order = ring_order(e.topo, &c.gpus, ch);
        let at = order.iter().position(|&g| g == root).unwrap_or(0);
        order.rotate_left(at);
        let data = share(c.bytes, c.channels as u64, ch as u64);
        if data.div_ceil(c.chunk.max(1)) > u64::from(u32::MAX) {
            return Err(passes_too_many());
        }
        let base = e.base(order, ch);
        let pass = Pass::chain(base, data, c.chunk, &mut e.router())?;
        last.extend(add_pass(e, pass, &vec![start; n])?);
    }
    Ok(())
}

/// All-to-all: every rank sends its share to every other rank at once,
/// each pair's data over the channels and in chunks.
fn direct_all_to_all(
    e: &mut Emitter,
    c: &Collective,
    start: u32,
    last: &mut Vec<u32>,
) -> Result<(), String> {
    let n = c.gpus.len() as u64;
    let per_pair = c.bytes.div_ceil(n).div_ceil(u64::from(c.channels.max(1)));
    if per_pair.div_ceil(c.chunk.max(1)) > u64::from(u32::MAX) {
        return Err(passes_too_many());
    }
    let (order, channels) = (c.gpus.clone(), c.channels);
    let base = e.base(order, 0);
    let pass = Pass::all_to_all(base, c.bytes, channels, c.chunk, &mut e.router())?;
    last.extend(add_pass(e, pass, &vec![start; n as usize])?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of 120 data bytes in 128 (LL128) and 8 in 16 (LL); NCCL's
    /// step sizes.
    #[test]
    fn protocols_lay_data_in_lines() {
        assert_eq!(Protocol::Simple.wire(1000), 1000);
        assert_eq!(Protocol::Ll128.wire(120), 128);
        assert_eq!(Protocol::Ll128.wire(121), 256);
        assert_eq!(Protocol::Ll.wire(8), 16);
        assert_eq!(Protocol::Ll.wire(9), 32);
        assert_eq!(Protocol::Ll128.chunk(), 614_400 / 16 * 15);
        assert_eq!(Protocol::Ll.chunk(), 524_288 / 8 / 2);
    }

    #[test]
    fn busbw_factors_follow_nccl_tests() {
        assert_eq!(Op::AllReduce.busbw_factor(8), 1.75);
        assert_eq!(Op::AllGather.busbw_factor(8), 0.875);
        assert_eq!(Op::ReduceScatter.busbw_factor(4), 0.75);
        assert_eq!(Op::AllToAll.busbw_factor(2), 0.5);
        assert_eq!(Op::Broadcast.busbw_factor(16), 1.0);
    }
}
