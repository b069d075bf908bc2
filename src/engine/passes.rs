//! The messages of collective passes (`workload::program`), made as the passes
//! run: their tasks and transfers exist from when a pass releases them to
//! when they are done, and what they cost is then added to their
//! connection's row (`ConnRow`), so that memory follows the messages in
//! flight, not the messages a collective will send.
//!
//! Message g (numbered over every pass) has task `base_task + 2g` for an
//! NVLink copy (the copy itself, or a PXN proxy's hop) and `base_task +
//! 2g + 1` for its write, and its write is transfer `base_flow + g`:
//! numbers every partition of a parallel run works out alike.

use super::{FlowState, Simulation};
use crate::nic::transport::packets_of;
use crate::topology::{FlowId, GpuId, QpId};
use crate::units::SimTime;
use crate::workload::graph::{TaskKind, NO_LANE};
use crate::workload::pass::{Released, Via};
use rustc_hash::FxHashMap as HashMap;

/// The passes' messages in flight and their connections' totals.
#[derive(Default, serde::Serialize, serde::Deserialize)]
pub struct PassFlows {
    /// The first task and transfer numbers of the passes' messages.
    pub base_task: u32,
    pub base_flow: u32,
    /// Whether the numbers above are set: passes may come only in a
    /// later part (a trace's first part may be all compute), so whether
    /// the first part has passes does not say.
    numbered: bool,
    /// The first QP of each pass position's connection (`u32::MAX` for
    /// an NVLink connection).
    pub first_qp: Vec<Vec<u32>>,
    /// Transfers started or received and not yet added to their row
    /// (a partition's own; not handed over at the merge).
    #[serde(skip)]
    live: HashMap<u32, Live>,
    /// One row per network connection of a pass, in pass and position
    /// order; `row_of[pass]` is its first.
    pub rows: Vec<ConnRow>,
    row_of: Vec<u32>,
    /// Writes with bytes the passes will make, and their bytes.
    pub net_messages: u64,
    pub net_bytes: u64,
    /// When a pass's last task was done.
    pub last_done: SimTime,
    /// Ideal completion times by first QP and size (a connection's
    /// messages have a few sizes).
    #[serde(skip)]
    pub(super) ideal: HashMap<(u32, u64), SimTime>,
}

struct Live {
    flow: FlowState,
    /// Sender's and receiver's halves added to the row.
    sent: bool,
    received: bool,
}

/// What the messages of one connection of a pass cost, summed as they
/// finish: the sender's half (start, acknowledgement, resent bytes,
/// timeouts) and the receiver's (delivery, packets, out of order, NAKs).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ConnRow {
    pub workload: u32,
    pub src: GpuId,
    pub dst: GpuId,
    /// Its first QP and QP count (`u32::MAX` and 0 for NVLink).
    pub first_qp: u32,
    pub qps: u32,
    /// Messages with bytes it will carry.
    pub planned: u64,
    /// Messages the receiver has in full, and their bytes and packets.
    pub messages: u64,
    pub bytes: u64,
    pub pkts: u64,
    /// Messages the sender has every acknowledgement of.
    pub acked_messages: u64,
    pub start: SimTime,
    pub finish: Option<SimTime>,
    pub acked: Option<SimTime>,
    /// The sum of the messages' ideal completion times.
    pub ideal: SimTime,
    pub retx_bytes: u64,
    pub timeouts: u64,
    pub out_of_order: u64,
    pub naks: u64,
}

impl ConnRow {
    /// Adds another partition's halves of the same connection.
    pub(super) fn absorb(&mut self, o: &ConnRow) {
        self.messages += o.messages;
        self.bytes += o.bytes;
        self.pkts += o.pkts;
        self.acked_messages += o.acked_messages;
        self.start = self.start.min(o.start);
        self.finish = self.finish.max(o.finish);
        self.acked = self.acked.max(o.acked);
        self.ideal += o.ideal;
        self.retx_bytes += o.retx_bytes;
        self.timeouts += o.timeouts;
        self.out_of_order += o.out_of_order;
        self.naks += o.naks;
    }
}

impl PassFlows {
    pub fn is_pass_flow(&self, f: FlowId) -> bool {
        self.numbered && f.0 >= self.base_flow
    }

    pub fn is_pass_task(&self, t: u32) -> bool {
        self.numbered && t >= self.base_task
    }

    /// Transfers in flight.
    pub fn live(&self) -> impl Iterator<Item = &FlowState> {
        self.live.values().map(|l| &l.flow)
    }

    /// Adds another partition's rows (each half of a message is added in
    /// the one partition that has it).
    pub(super) fn absorb(&mut self, other: &PassFlows) {
        for (mine, theirs) in self.rows.iter_mut().zip(&other.rows) {
            mine.absorb(theirs);
        }
        self.last_done = self.last_done.max(other.last_done);
    }
}

impl Simulation {
    /// Numbers the passes' messages past every task and transfer (those
    /// of jobs' later iterations too), and makes their connections' rows.
    pub(super) fn set_up_passes(&mut self, first_qp: Vec<Vec<u32>>, end: (u32, u32)) {
        let (rows, row_of) = pass_rows(
            &self.topo,
            &mut self.jobs.passes,
            &self.jobs.tasks.graph.passes,
            &first_qp,
            true,
        );
        let pf = &mut self.jobs.passes;
        pf.base_task = end.0;
        pf.base_flow = end.1;
        pf.numbered = true;
        pf.rows = rows;
        pf.row_of = row_of;
        pf.first_qp = first_qp;
        self.jobs.tasks.pass_base = Some((pf.base_task, pf.base_flow));
        for pi in 0..self.jobs.tasks.graph.passes.len() {
            let net = self.unloaded_net_hop_of(pi as u32);
            let p = &mut self.jobs.tasks.graph.passes[pi];
            p.latency = p.latency.without_wire(self.jobs.tasks.nvlink.latency, net);
        }
    }

    /// The first QP of connection `c` of pass `p` (`u32::MAX` over NVLink).
    pub(super) fn pass_first_qp(&self, p: u32, c: u32) -> u32 {
        match self.jobs.passes.first_qp.get(p as usize) {
            Some(firsts) => firsts[c as usize],
            None => {
                let (part, i) = self.jobs.tasks.later_pass(p);
                part.first_qp[i][c as usize]
            }
        }
    }

    /// The row of connection `c` of pass `p`.
    pub(super) fn pass_row_mut(&mut self, p: u32, c: u32) -> &mut ConnRow {
        let pf = &mut self.jobs.passes;
        row_in(&mut pf.rows, &pf.row_of, &mut self.jobs.tasks.later, p, c)
    }

    /// The mean unloaded latency of pass `pi`'s network hops: each
    /// link's propagation and one full frame's time on it, over its
    /// connection's first path.
    pub(super) fn unloaded_net_hop_of(&self, pi: u32) -> SimTime {
        let pass = self.jobs.tasks.pass(pi).expect("a pass");
        let frame = u64::from(self.scenario.transport.mtu);
        let (mut sum, mut n) = (0u64, 0u64);
        for c in 0..pass.conns.len() as u32 {
            let q = self.pass_first_qp(pi, c);
            let Some(spec) = pass.conn_spec(&self.topo, c, 0).filter(|_| q != u32::MAX) else {
                continue;
            };
            for port in self.route_of(QpId(q), spec.dst_nic) {
                let port = self.topo.port(port);
                sum += port.delay.0 + port.rate.serialize(frame).0;
            }
            n += 1;
        }
        SimTime(sum.checked_div(n).unwrap_or(0))
    }

    /// Link transmissions the passes' writes take, roughly (a packet per
    /// MTU of each connection's bytes and one per message, and their ACKs,
    /// over its first QP's path).
    pub(super) fn pass_work(&self) -> u64 {
        let tc = &self.scenario.transport;
        let ack_every = tc.ack_every.max(1) as u64;
        let mut work = 0;
        for (pi, pass) in self.jobs.tasks.graph.passes.iter().enumerate() {
            for c in 0..pass.conns.len() as u32 {
                let q = self.jobs.passes.first_qp[pi][c as usize];
                let Some(spec) = pass.conn_spec(&self.topo, c, 0).filter(|_| q != u32::MAX) else {
                    continue;
                };
                let q = QpId(q);
                let hops = self.route_of(q, spec.dst_nic).len() as u64;
                let pkts = pass.bytes_on(c).div_ceil(u64::from(tc.mtu)) + pass.sends_on(c);
                work += (pkts + pkts.div_ceil(ack_every)) * hops;
            }
        }
        work
    }

    /// The pass message `g` belongs to, and its number within it.
    fn pass_of(&self, g: u64) -> (usize, u64) {
        let passes = &self.jobs.tasks.graph.passes;
        let p = passes.partition_point(|x| x.first <= g).saturating_sub(1);
        let p = match self.jobs.tasks.later.as_ref().filter(|l| g >= l.start.3) {
            Some(l) => l.pass_of_message(g).map_or(p, |p| p as usize),
            None => p,
        };
        (p, g - self.jobs.tasks.pass(p as u32).expect("a pass").first)
    }

    /// Position `pos` of pass `pass` enters it.
    pub(super) fn pass_enter(&mut self, pass: u32, pos: u32) {
        if self.streamed(pass) {
            self.stream_enter(pass, pos);
            return;
        }
        let mut out = Released::default();
        self.jobs
            .tasks
            .pass_mut(pass)
            .expect("a pass")
            .enter(pos, &mut out);
        self.pass_released(pass as usize, out, true);
    }

    /// Starts what a pass released (a position's first messages, when it
    /// `entered`) and ends the parts it says are done.
    pub(super) fn pass_released(&mut self, pass: usize, out: Released, entered: bool) {
        for idx in out.send {
            self.pass_send(pass, idx, entered);
        }
        for pos in out.done {
            let exit = self.jobs.tasks.pass(pass as u32).expect("a pass").exit[pos as usize];
            if self.jobs.tasks.release_one(exit) {
                self.task_ready(exit);
            }
        }
    }

    /// Message `idx` of pass `pass` goes: its copy or its write is ready
    /// once the pass's step time has passed.
    fn pass_send(&mut self, pass: usize, idx: u64, first: bool) {
        let p = self.jobs.tasks.pass(pass as u32).expect("a pass");
        let m = p.message(idx);
        let g = p.first + idx;
        let base = self.jobs.passes.base_task;
        let hop = base + 2 * g as u32;
        let conn = p.conns[m.conn as usize];
        let at = self.now + p.latency.before(conn.via, first);
        let (a, b) = (conn.from, conn.to);
        let (kind, lane, t) = match conn.via {
            Via::Local => (
                TaskKind::Local {
                    src: a,
                    dst: b,
                    bytes: m.bytes,
                },
                NO_LANE,
                hop,
            ),
            Via::Pxn { proxy, .. } => (
                TaskKind::Local {
                    src: a,
                    dst: proxy,
                    bytes: m.bytes,
                },
                NO_LANE,
                hop,
            ),
            Via::Net { lane } => (
                TaskKind::Net(self.jobs.passes.base_flow + g as u32),
                lane,
                hop + 1,
            ),
        };
        self.jobs.tasks.add_dynamic(t, kind, lane, at);
        self.task_ready(t);
    }

    /// Pass task `t` is done: a PXN hop's write goes, or the message has
    /// arrived and its pass goes on.
    pub(super) fn pass_task_done(&mut self, t: u32, started: SimTime) {
        self.jobs.passes.last_done = self.now;
        let rel = t - self.jobs.passes.base_task;
        let g = u64::from(rel / 2);
        let (pass, idx) = self.pass_of(g);
        let p = self.jobs.tasks.pass(pass as u32).expect("a pass");
        let m = p.message(idx);
        // Its NVLink copy (a copy, or a PXN hop), or its write.
        if rel.is_multiple_of(2) {
            match p.conns[m.conn as usize].via {
                Via::Pxn { lane, .. } => {
                    let f = self.jobs.passes.base_flow + g as u32;
                    self.jobs
                        .tasks
                        .add_dynamic(t + 1, TaskKind::Net(f), lane, SimTime::ZERO);
                    self.task_ready(t + 1);
                    return;
                }
                Via::Local => {
                    let ideal = self.jobs.tasks.nvlink.alone(m.bytes);
                    let now = self.now;
                    let r = self.pass_row_mut(pass as u32, m.conn);
                    r.messages += 1;
                    r.acked_messages += 1;
                    r.bytes += m.bytes;
                    r.start = r.start.min(started);
                    r.finish = r.finish.max(Some(now));
                    r.ideal += ideal;
                    self.later_progress(super::later::Loc::Pass(pass as u32), 1);
                }
                Via::Net { .. } => {}
            }
        }
        let mut out = Released::default();
        self.jobs
            .tasks
            .pass_mut(pass as u32)
            .expect("a pass")
            .arrive(idx, &mut out);
        self.pass_released(pass, out, false);
    }

    /// Transfer `f`'s state (made from its pass on first use: at the
    /// sender when it starts, at the receiver of a partitioned run when
    /// its first message is posted there).
    pub(super) fn flow_mut(&mut self, f: FlowId) -> &mut FlowState {
        if !self.jobs.passes.is_pass_flow(f) {
            if f.idx() < self.jobs.flows.len() {
                return &mut self.jobs.flows[f.idx()];
            }
            return self
                .later_flow_mut(f)
                .expect("a transfer of a later iteration");
        }
        if !self.jobs.passes.live.contains_key(&f.0) {
            let mut cache = std::mem::take(&mut self.jobs.ideal_cache);
            let flow = self.pass_flow(f, &mut cache);
            self.jobs.ideal_cache = cache;
            self.jobs
                .passes
                .ideal
                .insert((flow.first_qp, flow.spec.bytes), flow.ideal_fct);
            self.jobs.passes.live.insert(
                f.0,
                Live {
                    flow,
                    sent: false,
                    received: false,
                },
            );
        }
        &mut self
            .jobs
            .passes
            .live
            .get_mut(&f.0)
            .expect("inserted above")
            .flow
    }

    /// Transfer `f`'s bytes, first QP and QP count, made up front or a
    /// pass's (worked out from its number wherever it is).
    pub(super) fn write_of(&self, f: FlowId) -> Option<(u64, u32, u32)> {
        if !self.jobs.passes.is_pass_flow(f) {
            let fl = match self.jobs.flows.get(f.idx()) {
                Some(fl) => fl,
                None => {
                    let (part, i) = self.jobs.tasks.later.as_ref()?.part_of_flow(f.0)?;
                    &part.flows[i]
                }
            };
            return Some((fl.spec.bytes, fl.first_qp, fl.n_qps));
        }
        let (pass, idx) = self.pass_of(u64::from(f.0 - self.jobs.passes.base_flow));
        let p = self.jobs.tasks.pass(pass as u32)?;
        let spec = p.spec(&self.topo, idx)?;
        let first = self.pass_first_qp(pass as u32, p.message(idx).conn);
        Some((spec.bytes, first, spec.n_qps()))
    }

    /// A pass message's write, as it starts.
    fn pass_flow(&self, f: FlowId, cache: &mut super::build::IdealCache) -> FlowState {
        let g = u64::from(f.0 - self.jobs.passes.base_flow);
        let (pass, idx) = self.pass_of(g);
        let p = self.jobs.tasks.pass(pass as u32).expect("a pass");
        let spec = p
            .spec(&self.topo, idx)
            .expect("only a pass's network messages are transfers");
        let first_qp = self.pass_first_qp(pass as u32, p.message(idx).conn);
        let n_qps = spec.n_qps();
        let mtu = self.scenario.transport.mtu;
        let pkts = (0..n_qps)
            .map(|i| packets_of(super::build::share(spec.bytes, n_qps, i), mtu))
            .sum();
        let mut flow = FlowState::new(spec, first_qp, n_qps, true, pkts);
        flow.ideal_fct = match self.jobs.passes.ideal.get(&(first_qp, flow.spec.bytes)) {
            Some(&t) => t,
            None => self.ideal_and_work(&flow, f.0, cache).0,
        };
        flow
    }

    /// The pass and connection of pass message `g`.
    fn conn_of(&self, g: u64) -> (u32, u32) {
        let (pass, idx) = self.pass_of(g);
        let conn = self
            .jobs
            .tasks
            .pass(pass as u32)
            .expect("a pass")
            .message(idx)
            .conn;
        (pass as u32, conn)
    }

    /// Pass transfer `f`'s sender has every acknowledgement (`sender`) or
    /// its receiver every byte: that half goes into its row, and the
    /// transfer is forgotten once nothing here needs it.
    pub(super) fn pass_flow_half(&mut self, f: FlowId, sender: bool) {
        let (pass, conn) = self.conn_of(u64::from(f.0 - self.jobs.passes.base_flow));
        let (other_here, both) = {
            let l = &self.jobs.passes.live[&f.0];
            let q = QpId(l.flow.first_qp);
            let qp = self.nics.qp(q);
            let other_port = if sender { qp.dst_port } else { qp.src_port };
            let here = self
                .part
                .as_deref()
                .is_none_or(|part| part.port_part[other_port.idx()] == part.me);
            (here, if sender { l.received } else { l.sent })
        };
        let PassFlows {
            live, rows, row_of, ..
        } = &mut self.jobs.passes;
        let Some(l) = live.get_mut(&f.0) else {
            return;
        };
        let r = row_in(rows, row_of, &mut self.jobs.tasks.later, pass, conn);
        let fl = &l.flow;
        if sender {
            l.sent = true;
            r.acked_messages += 1;
            r.start = r.start.min(fl.start);
            r.acked = r.acked.max(fl.acked);
            r.retx_bytes += fl.retx_bytes;
            r.timeouts += u64::from(fl.timeouts);
        } else {
            l.received = true;
            r.messages += 1;
            r.bytes += fl.spec.bytes;
            r.pkts += u64::from(fl.pkts);
            r.finish = r.finish.max(fl.finish);
            r.ideal += fl.ideal_fct;
            r.out_of_order += u64::from(fl.out_of_order);
            r.naks += u64::from(fl.naks);
        }
        if both || !other_here {
            self.jobs.passes.live.remove(&f.0);
        }
        // In a partition, the sender of a write another partition
        // receives is done with its task (done there, on delivery).
        if sender && !other_here {
            let t = self.jobs.tasks.of_flow(f);
            if let Some(t) = t {
                self.jobs.tasks.forget_dynamic(t);
            }
        }
        self.later_progress(super::later::Loc::Pass(pass), 1);
    }
}

/// The row of connection `c` of pass `p`: among the rows of passes made
/// before the run (`rows`, first of each at `row_of`) or of a later
/// iteration's.
fn row_in<'a>(
    rows: &'a mut [ConnRow],
    row_of: &[u32],
    later: &'a mut Option<Box<super::later::LaterState>>,
    p: u32,
    c: u32,
) -> &'a mut ConnRow {
    if let Some(&at) = row_of.get(p as usize) {
        return &mut rows[(at + c) as usize];
    }
    let part = later
        .as_mut()
        .and_then(|l| l.part_of_pass_mut(p))
        .expect("a pass of a later iteration");
    let at = part.row_of[(p - part.graph.pass_base) as usize];
    &mut part.rows[(at + c) as usize]
}

/// The rows of `passes`' connections (`first_qp` per pass and
/// connection), and each pass's first row; adds the messages they
/// will write to what the run offers.
pub(super) fn pass_rows(
    topo: &crate::topology::Topology,
    pf: &mut PassFlows,
    passes: &[crate::workload::pass::Pass],
    first_qp: &[Vec<u32>],
    offered: bool,
) -> (Vec<ConnRow>, Vec<u32>) {
    let (mut rows, mut row_of) = (Vec::new(), Vec::with_capacity(passes.len()));
    for (pi, pass) in passes.iter().enumerate() {
        row_of.push(rows.len() as u32);
        for (c, conn) in pass.conns.iter().enumerate() {
            let first = first_qp[pi][c];
            let c = c as u32;
            let planned = pass.sends_on(c);
            let net = pass.conn_spec(topo, c, 0).filter(|_| first != u32::MAX);
            let (src, dst, qps) = match net {
                Some(spec) => {
                    if offered {
                        pf.net_messages += planned;
                        pf.net_bytes += pass.bytes_on(c);
                    }
                    (spec.src, spec.dst, spec.qps.max(1))
                }
                None => (conn.from, conn.to, 0),
            };
            rows.push(ConnRow {
                workload: pass.workload,
                src,
                dst,
                first_qp: first,
                qps,
                planned,
                messages: 0,
                bytes: 0,
                pkts: 0,
                acked_messages: 0,
                start: SimTime::MAX,
                finish: None,
                acked: None,
                ideal: SimTime::ZERO,
                retx_bytes: 0,
                timeouts: 0,
                out_of_order: 0,
                naks: 0,
            });
        }
    }
    (rows, row_of)
}
