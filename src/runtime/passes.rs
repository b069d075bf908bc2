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

use super::pass_rows::{pass_rows, ConnRow, Live, PassFlows};
use super::{FlowState, Kernel, Runtime};
use crate::nic::transport::packets_of;
use crate::topology::{FlowId, QpId};
use crate::units::SimTime;
use crate::workload::graph::{TaskKind, NO_LANE};
use crate::workload::pass::{Released, Via};

impl Runtime {
    /// Numbers the passes' messages past every task and transfer (those
    /// of jobs' later iterations too), and makes their connections' rows.
    pub(crate) fn set_up_passes(
        &mut self,
        k: &mut dyn Kernel,
        first_qp: Vec<Vec<u32>>,
        end: (u32, u32),
    ) {
        let (rows, row_of) = pass_rows(
            k.topo(),
            &mut self.passes,
            &self.tasks.graph.passes,
            &first_qp,
            true,
        );
        let pf = &mut self.passes;
        pf.base_task = end.0;
        pf.base_flow = end.1;
        pf.numbered = true;
        pf.rows = rows;
        pf.row_of = row_of;
        pf.first_qp = first_qp;
        self.tasks.pass_base = Some((pf.base_task, pf.base_flow));
        for pi in 0..self.tasks.graph.passes.len() {
            let net = self.unloaded_net_hop_of(k, pi as u32);
            let p = &mut self.tasks.graph.passes[pi];
            p.latency = p.latency.without_wire(self.tasks.nvlink.latency, net);
        }
    }

    /// The first QP of connection `c` of pass `p` (`u32::MAX` over NVLink).
    pub(crate) fn pass_first_qp(&self, p: u32, c: u32) -> u32 {
        match self.passes.first_qp.get(p as usize) {
            Some(firsts) => firsts[c as usize],
            None => {
                let (part, i) = self.tasks.later_pass(p);
                part.first_qp[i][c as usize]
            }
        }
    }

    /// The row of connection `c` of pass `p`.
    pub(crate) fn pass_row_mut(&mut self, p: u32, c: u32) -> &mut ConnRow {
        let pf = &mut self.passes;
        row_in(&mut pf.rows, &pf.row_of, &mut self.tasks.later, p, c)
    }

    /// The mean unloaded latency of pass `pi`'s network hops: each
    /// link's propagation and one full frame's time on it, over its
    /// connection's first path.
    pub(crate) fn unloaded_net_hop_of(&self, k: &dyn Kernel, pi: u32) -> SimTime {
        let pass = self.tasks.pass(pi).expect("a pass");
        let frame = u64::from(k.scenario().transport.mtu);
        let (mut sum, mut n) = (0u64, 0u64);
        for c in 0..pass.conns.len() as u32 {
            let q = self.pass_first_qp(pi, c);
            let Some(spec) = pass.conn_spec(k.topo(), c, 0).filter(|_| q != u32::MAX) else {
                continue;
            };
            for port in k.route_of(QpId(q), spec.dst_nic) {
                let port = k.topo().port(port);
                sum += port.delay.0 + port.rate.serialize(frame).0;
            }
            n += 1;
        }
        SimTime(sum.checked_div(n).unwrap_or(0))
    }

    /// Link transmissions the passes' writes take, roughly (a packet per
    /// MTU of each connection's bytes and one per message, and their ACKs,
    /// over its first QP's path).
    pub(crate) fn pass_work(&self, k: &dyn Kernel) -> u64 {
        let tc = &k.scenario().transport;
        let ack_every = tc.ack_every.max(1) as u64;
        let mut work = 0;
        for (pi, pass) in self.tasks.graph.passes.iter().enumerate() {
            for c in 0..pass.conns.len() as u32 {
                let q = self.passes.first_qp[pi][c as usize];
                let Some(spec) = pass.conn_spec(k.topo(), c, 0).filter(|_| q != u32::MAX) else {
                    continue;
                };
                let q = QpId(q);
                let hops = k.route_of(q, spec.dst_nic).len() as u64;
                let pkts = pass.bytes_on(c).div_ceil(u64::from(tc.mtu)) + pass.sends_on(c);
                work += (pkts + pkts.div_ceil(ack_every)) * hops;
            }
        }
        work
    }

    /// The pass message `g` belongs to, and its number within it.
    fn pass_of(&self, g: u64) -> (usize, u64) {
        let passes = &self.tasks.graph.passes;
        let p = passes.partition_point(|x| x.first <= g).saturating_sub(1);
        let p = match self.tasks.later.as_ref().filter(|l| g >= l.start.3) {
            Some(l) => l.pass_of_message(g).map_or(p, |p| p as usize),
            None => p,
        };
        (p, g - self.tasks.pass(p as u32).expect("a pass").first)
    }

    /// Position `pos` of pass `pass` enters it.
    pub(crate) fn pass_enter(&mut self, k: &mut dyn Kernel, pass: u32, pos: u32) {
        if self.streamed(pass) {
            self.stream_enter(k, pass, pos);
            return;
        }
        let mut out = Released::default();
        self.tasks
            .pass_mut(pass)
            .expect("a pass")
            .enter(pos, &mut out);
        self.pass_released(k, pass as usize, out, true);
    }

    /// Starts what a pass released (a position's first messages, when it
    /// `entered`) and ends the parts it says are done.
    pub(crate) fn pass_released(
        &mut self,
        k: &mut dyn Kernel,
        pass: usize,
        out: Released,
        entered: bool,
    ) {
        for idx in out.send {
            self.pass_send(k, pass, idx, entered);
        }
        for pos in out.done {
            let exit = self.tasks.pass(pass as u32).expect("a pass").exit[pos as usize];
            if self.tasks.release_one(exit) {
                self.task_ready(k, exit);
            }
        }
    }

    /// Message `idx` of pass `pass` goes: its copy or its write is ready
    /// once the pass's step time has passed.
    fn pass_send(&mut self, k: &mut dyn Kernel, pass: usize, idx: u64, first: bool) {
        let p = self.tasks.pass(pass as u32).expect("a pass");
        let m = p.message(idx);
        let g = p.first + idx;
        let base = self.passes.base_task;
        let hop = base + 2 * g as u32;
        let conn = p.conns[m.conn as usize];
        let at = k.now() + p.latency.before(conn.via, first);
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
                TaskKind::Net(self.passes.base_flow + g as u32),
                lane,
                hop + 1,
            ),
        };
        self.tasks.add_dynamic(t, kind, lane, at);
        self.task_ready(k, t);
    }

    /// Pass task `t` is done: a PXN hop's write goes, or the message has
    /// arrived and its pass goes on.
    pub(crate) fn pass_task_done(&mut self, k: &mut dyn Kernel, t: u32, started: SimTime) {
        self.passes.last_done = k.now();
        let rel = t - self.passes.base_task;
        let g = u64::from(rel / 2);
        let (pass, idx) = self.pass_of(g);
        let p = self.tasks.pass(pass as u32).expect("a pass");
        let m = p.message(idx);
        // Its NVLink copy (a copy, or a PXN hop), or its write.
        if rel.is_multiple_of(2) {
            match p.conns[m.conn as usize].via {
                Via::Pxn { lane, .. } => {
                    let f = self.passes.base_flow + g as u32;
                    self.tasks
                        .add_dynamic(t + 1, TaskKind::Net(f), lane, SimTime::ZERO);
                    self.task_ready(k, t + 1);
                    return;
                }
                Via::Local => {
                    let ideal = self.tasks.nvlink.alone(m.bytes);
                    let now = k.now();
                    let r = self.pass_row_mut(pass as u32, m.conn);
                    r.messages += 1;
                    r.acked_messages += 1;
                    r.bytes += m.bytes;
                    r.start = r.start.min(started);
                    r.finish = r.finish.max(Some(now));
                    r.ideal += ideal;
                    self.later_progress(k, super::Loc::Pass(pass as u32), 1);
                }
                Via::Net { .. } => {}
            }
        }
        let mut out = Released::default();
        self.tasks
            .pass_mut(pass as u32)
            .expect("a pass")
            .arrive(idx, &mut out);
        self.pass_released(k, pass, out, false);
    }

    /// Transfer `f`'s state (made from its pass on first use: at the
    /// sender when it starts, at the receiver of a partitioned run when
    /// its first message is posted there).
    pub fn flow_mut(&mut self, k: &dyn Kernel, f: FlowId) -> &mut FlowState {
        self.make_flow(k, f);
        self.flow_made(f)
    }

    /// Makes pass transfer `f`'s state if it is one and is not made yet.
    pub fn make_flow(&mut self, k: &dyn Kernel, f: FlowId) {
        if !self.passes.is_pass_flow(f) || self.passes.live.contains_key(&f.0) {
            return;
        }
        let mut cache = std::mem::take(&mut self.ideal_cache);
        let flow = self.pass_flow(k, f, &mut cache);
        self.ideal_cache = cache;
        self.passes
            .ideal
            .insert((flow.first_qp, flow.spec.bytes), flow.ideal_fct);
        self.passes.live.insert(
            f.0,
            Live {
                flow,
                sent: false,
                received: false,
            },
        );
    }

    /// Transfer `f`'s state, made up front, with a later iteration or
    /// (`make_flow`) as its pass message started.
    pub fn flow_made(&mut self, f: FlowId) -> &mut FlowState {
        if super::serving::ServingState::is_serving_flow(f) {
            return self.serving_flow(f);
        }
        if !self.passes.is_pass_flow(f) {
            if f.idx() < self.flows.len() {
                return &mut self.flows[f.idx()];
            }
            return self
                .later_flow_mut(f)
                .expect("a transfer of a later iteration");
        }
        &mut self
            .passes
            .live
            .get_mut(&f.0)
            .expect("a pass message's transfer, made as it started")
            .flow
    }

    /// Transfer `f`'s bytes, first QP and QP count, made up front or a
    /// pass's (worked out from its number wherever it is).
    pub(crate) fn write_of(&self, k: &dyn Kernel, f: FlowId) -> Option<(u64, u32, u32)> {
        if super::serving::ServingState::is_serving_flow(f) {
            let fl = &self.serving.as_ref()?.live.get(&f.0)?.flow;
            return Some((fl.spec.bytes, fl.first_qp, fl.n_qps));
        }
        if !self.passes.is_pass_flow(f) {
            let fl = match self.flows.get(f.idx()) {
                Some(fl) => fl,
                None => {
                    let (part, i) = self.tasks.later.as_ref()?.part_of_flow(f.0)?;
                    &part.flows[i]
                }
            };
            return Some((fl.spec.bytes, fl.first_qp, fl.n_qps));
        }
        let (pass, idx) = self.pass_of(u64::from(f.0 - self.passes.base_flow));
        let p = self.tasks.pass(pass as u32)?;
        let spec = p.spec(k.topo(), idx)?;
        let first = self.pass_first_qp(pass as u32, p.message(idx).conn);
        Some((spec.bytes, first, spec.n_qps()))
    }

    /// A pass message's write, as it starts.
    fn pass_flow(
        &self,
        k: &dyn Kernel,
        f: FlowId,
        cache: &mut super::ideal::IdealCache,
    ) -> FlowState {
        let g = u64::from(f.0 - self.passes.base_flow);
        let (pass, idx) = self.pass_of(g);
        let p = self.tasks.pass(pass as u32).expect("a pass");
        let spec = p
            .spec(k.topo(), idx)
            .expect("only a pass's network messages are transfers");
        let first_qp = self.pass_first_qp(pass as u32, p.message(idx).conn);
        let n_qps = spec.n_qps();
        let mtu = k.scenario().transport.mtu;
        let pkts = (0..n_qps)
            .map(|i| packets_of(super::flow::share(spec.bytes, n_qps, i), mtu))
            .sum();
        let mut flow = FlowState::new(spec, first_qp, n_qps, true, pkts);
        flow.ideal_fct = match self.passes.ideal.get(&(first_qp, flow.spec.bytes)) {
            Some(&t) => t,
            None => k.ideal_and_work(&flow, f.0, cache).0,
        };
        flow
    }

    /// The pass and connection of pass message `g`.
    fn conn_of(&self, g: u64) -> (u32, u32) {
        let (pass, idx) = self.pass_of(g);
        let conn = self
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
    pub(crate) fn pass_flow_half(&mut self, k: &mut dyn Kernel, f: FlowId, sender: bool) {
        let (pass, conn) = self.conn_of(u64::from(f.0 - self.passes.base_flow));
        let (other_here, both) = {
            let l = &self.passes.live[&f.0];
            let q = QpId(l.flow.first_qp);
            let qp = k.qp(q);
            let other_port = if sender { qp.dst_port } else { qp.src_port };
            let here = k
                .cut()
                .is_none_or(|cut| cut.port_part[other_port.idx()] == cut.me);
            (here, if sender { l.received } else { l.sent })
        };
        let PassFlows {
            live, rows, row_of, ..
        } = &mut self.passes;
        let Some(l) = live.get_mut(&f.0) else {
            return;
        };
        let r = row_in(rows, row_of, &mut self.tasks.later, pass, conn);
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
            self.passes.live.remove(&f.0);
        }
        // In a partition, the sender of a write another partition
        // receives is done with its task (done there, on delivery).
        if sender && !other_here {
            let t = self.tasks.of_flow(f);
            if let Some(t) = t {
                self.tasks.forget_dynamic(t);
            }
        }
        self.later_progress(k, super::Loc::Pass(pass), 1);
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
