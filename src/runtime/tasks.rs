//! Runs the task graph (`workload::graph`): releases each task once its
//! predecessors are done, keeps each lane to one task at a time, starts
//! gated flows, and moves NVLink copies as a fluid.
//!
//! NVLink inside a host is modelled as a bandwidth-shared resource, not
//! packet by packet: every GPU can send and receive at its NVLink rate
//! (half the total it is quoted at, per direction), and the copies active
//! in a host share those rates max-min fairly (progressive filling). A
//! copy is done `latency` after its last byte has moved.

use super::{Count, Due, FlowState, Kernel, Runtime};
use crate::nvlink::Nvlink;
use crate::topology::FlowId;
use crate::topology::Topology;
use crate::units::SimTime;
use crate::workload::collective::CollectiveRun;
use crate::workload::graph::{Task, TaskGraph, TaskKind, NO_LANE};
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;

pub use super::flow::NO_TASK;
pub use super::homes::{homes_of, Home};

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct TaskState {
    pub graph: TaskGraph,
    /// Predecessors not yet done, per task.
    left: Vec<u32>,
    pub started: Vec<SimTime>,
    pub done: Vec<SimTime>,
    pub tasks_done: u64,
    lane_busy: Vec<bool>,
    lane_wait: Vec<VecDeque<u32>>,
    /// The task of each gated flow, `NO_TASK` for flows that start alone.
    pub flow_task: Vec<u32>,
    /// The tasks done when a flow's sender has every acknowledgement
    /// (`TaskKind::Acked`), by flow.
    acked_task: std::collections::BTreeMap<u32, u32>,
    /// Per flow: QPs whose last packet has gone out once.
    flow_sent_qps: Vec<u32>,
    pub collectives: Vec<CollectiveRun>,
    pub jobs: Vec<crate::workload::training::JobRun>,
    pub nvlink: Nvlink,
    /// Tasks done whose successors are still to be released.
    work: Vec<u32>,
    releasing: bool,
    /// Tasks done here when every task is (all of them, but in a
    /// partition of a parallel run: see `Home`).
    pub(crate) own_total: u64,
    /// In a partition: the tasks done when every task is, in the run as
    /// a whole (restored by the merge).
    all_total: u64,
    /// Tasks of pass messages on their way, by number (see
    /// `passes`): not in the graph, and not counted among its tasks.
    dynamic: HashMap<u32, Dynamic>,
    /// NVLink copies of pass messages done moving, by host: when each
    /// lands (the copies' latency later), in order.
    landing: Vec<VecDeque<(SimTime, u32)>>,
    /// The first task and transfer numbers of pass messages, if the run
    /// has passes.
    pub(crate) pass_base: Option<(u32, u32)>,
    /// Jobs' iterations made as the run reaches them, if any are.
    #[serde(skip)]
    pub(crate) later: Option<Box<super::later::LaterState>>,
}

/// A pass message's task.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Dynamic {
    kind: TaskKind,
    lane: u32,
    /// Its write's QPs that sent their last packet once.
    sent_qps: u32,
    started: SimTime,
    /// It starts no earlier (the pass's step time after its release).
    not_before: SimTime,
}

impl TaskState {
    pub fn new(
        graph: TaskGraph,
        collectives: Vec<CollectiveRun>,
        jobs: Vec<crate::workload::training::JobRun>,
        flows: usize,
        nvlink: Nvlink,
        mut push: impl FnMut(SimTime, Due),
    ) -> Self {
        let n = graph.tasks.len();
        let mut flow_task = vec![NO_TASK; if n == 0 { 0 } else { flows }];
        let mut acked_task = std::collections::BTreeMap::new();
        for (i, t) in graph.tasks.iter().enumerate() {
            match t.kind {
                TaskKind::Net(f) => flow_task[f as usize] = i as u32,
                TaskKind::Acked(f) => {
                    acked_task.insert(f, i as u32);
                }
                _ => {}
            }
            if graph.preds[i] == 0 {
                push(t.not_before, Due::TaskReady(i as u32));
            }
        }
        TaskState {
            left: graph.preds.clone(),
            started: vec![SimTime::MAX; n],
            done: vec![SimTime::MAX; n],
            tasks_done: 0,
            lane_busy: vec![false; graph.lanes as usize],
            lane_wait: (0..graph.lanes).map(|_| VecDeque::new()).collect(),
            flow_task,
            acked_task,
            flow_sent_qps: if n == 0 { Vec::new() } else { vec![0; flows] },
            collectives,
            jobs,
            nvlink,
            work: Vec::new(),
            releasing: false,
            own_total: n as u64,
            all_total: n as u64,
            dynamic: HashMap::default(),
            landing: Vec::new(),
            pass_base: None,
            later: None,
            graph,
        }
    }

    /// Task `t`, of the graph, of a later iteration or of a pass message.
    #[inline]
    pub fn task(&self, t: u32) -> Task {
        if let Some(&task) = self.graph.tasks.get(t as usize) {
            return task;
        }
        if let Some(part) = self.later.as_ref().and_then(|l| l.part_of_task(t)) {
            return part.graph.tasks[(t - part.graph.task_base) as usize];
        }
        let d = &self.dynamic[&t];
        Task {
            kind: d.kind,
            lane: d.lane,
            not_before: d.not_before,
        }
    }

    /// Pass `p`, made before the run or with a later iteration.
    #[inline]
    pub fn pass(&self, p: u32) -> Option<&crate::workload::pass::Pass> {
        match self.graph.passes.get(p as usize) {
            Some(pass) => Some(pass),
            None => self.later.as_ref()?.part_of_pass(p)?.graph.pass(p),
        }
    }

    #[inline]
    pub fn pass_mut(&mut self, p: u32) -> Option<&mut crate::workload::pass::Pass> {
        match self.graph.passes.get_mut(p as usize) {
            Some(pass) => Some(pass),
            None => self.later.as_mut()?.part_of_pass_mut(p)?.graph.pass_mut(p),
        }
    }

    /// The later iteration holding pass `p`, and the pass's place in it.
    pub(crate) fn later_pass(&self, p: u32) -> (&super::later::Part, usize) {
        let part = self
            .later
            .as_ref()
            .and_then(|l| l.part_of_pass(p))
            .expect("a pass of a later iteration");
        (part, (p - part.graph.pass_base) as usize)
    }

    /// Whether graph task `t` (made before the run or with a later
    /// iteration) is done.
    pub(crate) fn is_done(&self, t: u32) -> bool {
        match self.done.get(t as usize) {
            Some(&d) => d != SimTime::MAX,
            None => self
                .later
                .as_ref()
                .is_some_and(|l| match l.part_of_task(t) {
                    Some(p) => p.done[(t - p.graph.task_base) as usize] != SimTime::MAX,
                    None => l.retired(t),
                }),
        }
    }

    /// Task `t` of a forgotten iteration no longer waits for its
    /// transfer's acknowledgement.
    pub(crate) fn remove_acked(&mut self, f: u32) {
        self.acked_task.remove(&f);
    }

    /// When graph task `t` (made before the run or with a later
    /// iteration) was done, `SimTime::MAX` if it was not.
    pub fn done_at(&self, t: u32) -> SimTime {
        match self.done.get(t as usize) {
            Some(&d) => d,
            None => {
                self.later
                    .as_ref()
                    .map_or(SimTime::MAX, |l| match (l.part_of_task(t), l.kept(t)) {
                        (Some(p), _) => p.done[(t - p.graph.task_base) as usize],
                        (None, Some(k)) => k.1,
                        (None, None) => SimTime::MAX,
                    })
            }
        }
    }

    /// When graph task `t` started, `SimTime::MAX` if it did not.
    pub fn started_at(&self, t: u32) -> SimTime {
        match self.started.get(t as usize) {
            Some(&d) => d,
            None => {
                self.later
                    .as_ref()
                    .map_or(SimTime::MAX, |l| match (l.part_of_task(t), l.kept(t)) {
                        (Some(p), _) => p.started[(t - p.graph.task_base) as usize],
                        (None, Some(k)) => k.0,
                        (None, None) => SimTime::MAX,
                    })
            }
        }
    }

    /// When the last graph task done was (zero if none was).
    pub fn last_done(&self) -> SimTime {
        let later = self.later_parts().flat_map(|(_, p)| &p.done);
        let forgotten = self.later.as_ref().map_or(SimTime::ZERO, |l| l.last_done);
        self.done
            .iter()
            .chain(later)
            .filter(|&&d| d != SimTime::MAX)
            .max()
            .copied()
            .unwrap_or(SimTime::ZERO)
            .max(forgotten)
    }

    /// Each collective with when it started and ended (`SimTime::MAX`:
    /// it did not), those of forgotten iterations as they were worked
    /// out before.
    pub fn collective_times(&self) -> Vec<(&CollectiveRun, SimTime, SimTime)> {
        self.collectives
            .iter()
            .map(|c| match c.resolved {
                Some((a, b)) => (c, a, b),
                None => (c, self.done_at(c.start), self.done_at(c.end)),
            })
            .collect()
    }

    /// How many of jobs' iterations were made as the run went.
    pub fn later_made(&self) -> u64 {
        self.later.as_ref().map_or(0, |l| l.made)
    }

    /// Jobs' later iterations made so far, with their workload entry, in
    /// number order.
    pub fn later_parts(&self) -> impl Iterator<Item = (u32, &super::later::Part)> {
        self.later.iter().flat_map(|l| l.parts_of_workloads())
    }

    /// Task `t` is done when flow `f`'s sender has every acknowledgement.
    pub(crate) fn add_acked(&mut self, f: u32, t: u32) {
        self.acked_task.insert(f, t);
    }

    /// A pass message's task `t` is made, to start no earlier than
    /// `not_before`.
    /// Pass messages' tasks held (begun and not yet done, here).
    pub fn pass_tasks_held(&self) -> usize {
        self.dynamic.len()
    }

    /// Forgets pass message task `t`, done in another partition.
    pub(crate) fn forget_dynamic(&mut self, t: u32) {
        self.dynamic.remove(&t);
    }

    pub(crate) fn add_dynamic(&mut self, t: u32, kind: TaskKind, lane: u32, not_before: SimTime) {
        self.dynamic.insert(
            t,
            Dynamic {
                kind,
                lane,
                sent_qps: 0,
                started: SimTime::MAX,
                not_before,
            },
        );
    }

    /// One of task `t`'s predecessors outside the graph is done: whether
    /// it has none left.
    pub(crate) fn release_one(&mut self, t: u32) -> bool {
        let left = match self.left.get_mut(t as usize) {
            Some(left) => left,
            None => {
                let part = self
                    .later
                    .as_mut()
                    .and_then(|l| l.part_of_task_mut(t))
                    .expect("a task of the graph or of a later iteration");
                &mut part.left[(t - part.graph.task_base) as usize]
            }
        };
        *left -= 1;
        *left == 0
    }

    /// Where each task runs when the fabric is cut by host (`Home`), or
    /// why the graph cannot be cut (see `homes_of`).
    pub fn homes(&self, topo: &Topology, flows: &[FlowState]) -> Result<Vec<Home>, String> {
        homes_of(
            &self.graph,
            topo,
            |f| flows.get(f as usize).map(|f| &f.spec),
            &[],
            |_| None,
        )
    }

    /// Makes this task state run the tasks of one partition: those that
    /// begin on `mine` hosts and those that run everywhere; the ends
    /// (`Home::Last`) are left to the merge.
    pub(crate) fn keep_only(&mut self, homes: &[Home], mine: impl Fn(u32) -> bool) {
        self.all_total = self.own_total;
        self.own_total = 0;
        for (t, h) in homes.iter().enumerate() {
            match *h {
                Home::Host { begin, done } => {
                    self.own_total += u64::from(mine(done));
                    if !mine(begin) {
                        // Another partition's: never ready here, even when
                        // what it waits for runs everywhere.
                        self.left[t] = u32::MAX;
                    }
                }
                Home::Everywhere => self.own_total += 1,
                Home::Last => self.left[t] = u32::MAX,
            }
        }
    }

    /// Takes from `other`, another partition's tasks, when the tasks it
    /// began started and when those it finished were done, and the NVLink
    /// bytes its hosts copied.
    pub(crate) fn absorb(
        &mut self,
        other: TaskState,
        homes: &[Home],
        theirs: impl Fn(u32) -> bool,
    ) {
        self.absorb_times(&other.started, &other.done, homes, theirs);
        self.nvlink.bytes += other.nvlink.bytes;
    }

    /// Takes from another partition's times of the graph's tasks
    /// (`started`, `done`) those of the tasks it began and finished.
    pub(crate) fn absorb_times(
        &mut self,
        started: &[SimTime],
        done: &[SimTime],
        homes: &[Home],
        theirs: impl Fn(u32) -> bool,
    ) {
        for (t, h) in homes.iter().enumerate() {
            if let Home::Host { begin, done: end } = *h {
                if theirs(begin) {
                    self.started[t] = started[t];
                }
                if theirs(end) {
                    self.done[t] = done[t];
                }
            }
        }
    }

    /// Once every partition is absorbed: the ends are done when their last
    /// predecessor was; the count of tasks done.
    pub(crate) fn settle(&mut self, homes: &[Home]) {
        let n = self.graph.tasks.len();
        let mut last = vec![SimTime::ZERO; n];
        let mut left = self.graph.preds.clone();
        for x in 0..n {
            for &s in self.graph.successors(x as u32) {
                if homes[s as usize] == Home::Last && self.done[x] != SimTime::MAX {
                    last[s as usize] = last[s as usize].max(self.done[x]);
                    left[s as usize] -= 1;
                }
            }
        }
        for t in 0..n {
            if homes[t] == Home::Last && left[t] == 0 {
                self.done[t] = last[t];
                self.started[t] = last[t];
            }
        }
        self.tasks_done = self.done.iter().filter(|&&d| d != SimTime::MAX).count() as u64;
        if let Some(mut l) = self.later.take() {
            self.tasks_done += l.settle(|t| self.done.get(t as usize).copied());
            self.later = Some(l);
        }
        self.own_total = self.all_total;
    }

    pub fn all_done(&self) -> bool {
        // A partition counts the tasks of jobs' later iterations as it
        // makes them.
        self.tasks_done == self.own_total && self.later.as_ref().is_none_or(|l| l.all_made())
    }

    /// The task gating flow `f`, if any.
    #[inline]
    pub fn of_flow(&self, f: FlowId) -> Option<u32> {
        if let Some((task, flow)) = self.pass_base {
            if f.0 >= flow {
                // A pass message's write (see `passes`).
                return Some(task + 2 * (f.0 - flow) + 1);
            }
        }
        if let Some(&t) = self.flow_task.get(f.idx()) {
            return Some(t).filter(|&t| t != NO_TASK);
        }
        let (part, i) = self.later.as_ref()?.part_of_flow(f.0)?;
        Some(part.flow_task[i]).filter(|&t| t != NO_TASK)
    }
}

impl Runtime {
    /// Task `t`'s predecessors are done (or it has none) and its time has
    /// come: it waits for its lane or starts.
    pub(crate) fn task_ready(&mut self, k: &mut dyn Kernel, t: u32) {
        let task = self.tasks.task(t);
        if k.now() < task.not_before {
            k.at(task.not_before, Due::TaskReady(t));
            return;
        }
        if task.lane != NO_LANE {
            let l = task.lane as usize;
            if self.tasks.lane_busy[l] {
                self.tasks.lane_wait[l].push_back(t);
                return;
            }
            self.tasks.lane_busy[l] = true;
        }
        self.task_begin(k, t);
    }

    fn task_begin(&mut self, k: &mut dyn Kernel, t: u32) {
        match self.tasks.started.get_mut(t as usize) {
            Some(s) => *s = k.now(),
            None => {
                if let Some(d) = self.tasks.dynamic.get_mut(&t) {
                    d.started = k.now();
                } else if let Some(p) = self
                    .tasks
                    .later
                    .as_mut()
                    .and_then(|l| l.part_of_task_mut(t))
                {
                    p.started[(t - p.graph.task_base) as usize] = k.now();
                }
            }
        }

        match self.tasks.task(t).kind {
            TaskKind::Join | TaskKind::Exit { .. } => self.task_done(k, t),
            TaskKind::Enter { pass, pos } => {
                self.pass_enter(k, pass, pos);
                self.task_done(k, t)
            }
            TaskKind::Delay(d) => k.at(k.now() + d, Due::TaskDone(t)),
            TaskKind::Net(f) => k.start(FlowId(f)),
            // Done when its flow's last acknowledgement comes (`flow_acked`).
            TaskKind::Acked(_) => {}
            TaskKind::Local { src, dst, .. } if src == dst => self.task_done(k, t),
            TaskKind::Local { src, dst, bytes } => {
                let host = k.topo().gpus[src.idx()].host.idx();
                let (a, b) = (
                    k.topo().gpus[src.idx()].local,
                    k.topo().gpus[dst.idx()].local,
                );
                if let Some((at, gen)) = self.tasks.nvlink.add(host, t, a, b, bytes, k.now()) {
                    k.at(at, Due::Nvlink(host as u32, gen));
                }
            }
            TaskKind::Switch {
                gpu,
                up,
                cap,
                bytes,
            } => {
                let g = &k.topo().gpus[gpu.idx()];
                let (host, local) = (g.host.idx(), g.local);
                // Megabytes per second to bytes per picosecond.
                let cap = f64::from(cap) * 1e-6;
                let next = self
                    .tasks
                    .nvlink
                    .add_switch(host, t, (local, up), bytes, cap, k.now());
                if let Some((at, gen)) = next {
                    k.at(at, Due::Nvlink(host as u32, gen));
                }
            }
        }
    }

    /// Task `t` is done: its lane takes the next task, and successors whose
    /// predecessors are all done become ready.
    pub(crate) fn task_done(&mut self, k: &mut dyn Kernel, t: u32) {
        self.tasks.work.push(t);
        if self.tasks.releasing {
            // Reached from a release further up the stack, which will
            // take it from `work`.
            return;
        }
        self.tasks.releasing = true;
        while let Some(t) = self.tasks.work.pop() {
            if self.tasks.later.is_some() {
                self.later_due(k, t);
            }
            if self.passes.is_pass_task(t) {
                let task = self.tasks.dynamic.remove(&t);
                let started = task.map_or(SimTime::MAX, |d| d.started);
                if let Some(task) = task.filter(|d| d.lane != NO_LANE) {
                    if !matches!(task.kind, TaskKind::Net(_)) {
                        self.lane_free(k, task.lane);
                    }
                }
                self.pass_task_done(k, t, started);
                continue;
            }
            if (t as usize) >= self.tasks.graph.tasks.len() {
                self.later_task_done(k, t);
                continue;
            }
            let task = self.tasks.graph.tasks[t as usize];
            self.tasks.done[t as usize] = k.now();
            self.tasks.tasks_done += 1;
            // A network task freed its lane when its last byte left.
            if task.lane != NO_LANE && !matches!(task.kind, TaskKind::Net(_)) {
                self.lane_free(k, task.lane);
            }
            for i in 0..self.tasks.graph.successors(t).len() {
                let s = self.tasks.graph.successors(t)[i];
                if self.tasks.release_one(s) {
                    self.task_ready(k, s);
                }
            }
            self.later_successors(k, t);
        }
        self.tasks.releasing = false;
    }

    /// The lane's task no longer needs it: the next waiting one starts.
    pub(crate) fn lane_free(&mut self, k: &mut dyn Kernel, lane: u32) {
        let l = lane as usize;
        match self.tasks.lane_wait[l].pop_front() {
            Some(next) => self.task_begin(k, next),
            None => self.tasks.lane_busy[l] = false,
        }
    }

    /// Flow `f`'s sender has every acknowledgement.
    pub(crate) fn flow_acked(&mut self, k: &mut dyn Kernel, f: FlowId) {
        if let Some(&t) = self.tasks.acked_task.get(&f.0) {
            self.task_done(k, t);
        }
    }

    /// One QP's share of transfer `flow` is acknowledged (`again` bytes
    /// resent, `stalls` timeouts): the transfer is once every QP's is.
    pub fn qp_acked(&mut self, k: &mut dyn Kernel, flow: FlowId, again: u64, stalls: u32) {
        let now = k.now();
        if super::serving::ServingState::is_serving_flow(flow) {
            let f = self.serving_flow(flow);
            f.retx_bytes += again;
            f.timeouts += stalls;
            f.tx_done_qps += 1;
            if f.tx_done_qps == f.n_qps {
                f.acked = Some(now);
                self.serving_acked(flow);
            }
            return;
        }
        let f = self.flow_mut(k, flow);
        f.retx_bytes += again;
        f.timeouts += stalls;
        f.tx_done_qps += 1;
        if f.tx_done_qps == f.n_qps {
            f.acked = Some(now);
            k.count(Count::Acked(1));
            self.later_progress(k, super::Loc::Flow(flow.0), 1);
            if self.passes.is_pass_flow(flow) {
                self.pass_flow_half(k, flow, true);
            } else {
                self.flow_acked(k, flow);
            }
        }
    }

    /// One QP's receiver has its share of transfer `flow` (`again`
    /// packets out of order, `stalls` NAKs sent): the transfer is done
    /// (with its task) once every QP's is.
    pub fn qp_received(&mut self, k: &mut dyn Kernel, flow: FlowId, again: u32, stalls: u32) {
        let now = k.now();
        if super::serving::ServingState::is_serving_flow(flow) {
            let f = self.serving_flow(flow);
            f.out_of_order += again;
            f.naks += stalls;
            f.rx_done_qps += 1;
            if f.rx_done_qps == f.n_qps {
                f.finish = Some(now);
                self.serving_received(k, flow);
            }
            return;
        }
        let f = self.flow_mut(k, flow);
        f.out_of_order += again;
        f.naks += stalls;
        f.rx_done_qps += 1;
        if f.rx_done_qps == f.n_qps {
            f.finish = Some(now);
            k.count(Count::Completed(1));
            self.later_progress(k, super::Loc::Flow(flow.0), 1);
            let task = self.tasks.of_flow(flow);
            if self.passes.is_pass_flow(flow) {
                self.pass_flow_half(k, flow, false);
            }
            if let Some(t) = task {
                self.task_done(k, t);
            }
        }
    }

    /// A QP of flow `f` sent its last packet for the first time. Once all
    /// its QPs have, the connection may start its next message.
    #[inline(never)]
    pub fn flow_sent(&mut self, k: &mut dyn Kernel, f: FlowId) {
        // A KV write waits for nothing but its connection's turn.
        if super::serving::ServingState::is_serving_flow(f) {
            return;
        }
        let Some(t) = self.tasks.of_flow(f) else {
            return;
        };
        let sent = match self.tasks.dynamic.get_mut(&t) {
            Some(d) => &mut d.sent_qps,
            None => match self.tasks.flow_sent_qps.get_mut(f.idx()) {
                Some(s) => s,
                None => {
                    let (part, i) = self
                        .tasks
                        .later
                        .as_mut()
                        .and_then(|l| l.part_of_flow_mut(f.0))
                        .expect("a transfer of a later iteration");
                    &mut part.flow_sent_qps[i]
                }
            },
        };
        *sent += 1;
        let sent = *sent;
        if sent == self.flow_mut(k, f).n_qps {
            let lane = self.tasks.task(t).lane;
            if lane != NO_LANE {
                // From the event loop, not from inside a transmitter.
                k.at(k.now(), Due::LaneFree(lane));
            }
        }
    }

    /// Pass copies in `host` whose time has come are done.
    pub(crate) fn landed(&mut self, k: &mut dyn Kernel, host: u32) {
        while let Some(&(at, t)) = self.tasks.landing[host as usize].front() {
            if at > k.now() {
                break;
            }
            self.tasks.landing[host as usize].pop_front();
            self.task_done(k, t);
        }
    }

    /// Failed switch chips took `lost` of every GPU's NVLink in `host`:
    /// its copies go on at their new rates.
    pub(crate) fn nvlink_lost(&mut self, k: &mut dyn Kernel, host: u32, lost: f64) {
        if let Some((at, gen)) = self.tasks.nvlink.set_lost(host as usize, lost, k.now()) {
            k.at(at, Due::Nvlink(host, gen));
        }
    }

    /// An NVLink copy may have finished in `host`.
    pub(crate) fn nvlink_event(&mut self, k: &mut dyn Kernel, host: u32, gen: u32) {
        let latency = self.tasks.nvlink.latency;
        let (done, next) = self.tasks.nvlink.on_event(host as usize, gen, k.now());
        for pass in done.streams {
            self.stream_copied(k, pass);
        }
        for t in done.tasks {
            if self.passes.is_pass_task(t) {
                // Pass tasks are numbered past what an event's key holds:
                // the host's copies land in order.
                let h = host as usize;
                if self.tasks.landing.len() <= h {
                    self.tasks.landing.resize(h + 1, VecDeque::new());
                }
                self.tasks.landing[h].push_back((k.now() + latency, t));
                k.at(k.now() + latency, Due::Landed(host));
            } else {
                k.at(k.now() + latency, Due::TaskDone(t));
            }
        }
        if let Some((at, gen)) = next {
            k.at(at, Due::Nvlink(host, gen));
        }
    }
}
