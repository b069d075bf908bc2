//! Work with dependencies: the task graph collectives, training jobs and
//! execution traces become.
//!
//! A task is a network transfer (a gated flow, done when its receiver
//! has the data), the acknowledgement of one (done when its sender has
//! every ACK), an NVLink copy inside a host, a delay (compute time) or a
//! join that only waits for its predecessors. A task starts once all its predecessors are done (and
//! not before its `not_before` time). Tasks may share a lane: a lane runs
//! one task at a time in the order they became ready, as a QP sends its
//! messages in order or a GPU runs its kernels one after another. A
//! network task frees its lane once its last byte is on the wire, so the
//! next message of the same connection follows without a gap.

use super::pass::Pass;
use crate::topology::GpuId;
use crate::units::SimTime;

/// No lane: the task starts as soon as it is ready.
pub const NO_LANE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum TaskKind {
    /// A network transfer: this flow, which waits for the task.
    Net(u32),
    /// A copy between two GPUs of one host over NVLink.
    Local { src: GpuId, dst: GpuId, bytes: u64 },
    /// A one-sided NVLink copy between a GPU and its host's switch
    /// chips (NVLS): `up`, the switch reads (and reduces) from the GPU;
    /// otherwise it writes (multicasts) to it. At most `cap` megabytes
    /// per second with every switch chip up, less the failed chips'
    /// share.
    Switch {
        gpu: GpuId,
        up: bool,
        cap: u32,
        bytes: u64,
    },
    /// Time that passes (compute on a GPU, or a fixed wait).
    Delay(SimTime),
    /// Waits for its predecessors and is done at once.
    Join,
    /// Done when the sender of this flow (a `Net` task's) has every
    /// acknowledgement: what a sending rank waits for before it goes on,
    /// where the receiver waits for the data (the `Net` task). It waits
    /// for nothing in the graph.
    Acked(u32),
    /// Position `pos` of pass `pass` enters it (`workload::program`);
    /// done at once.
    Enter { pass: u32, pos: u32 },
    /// Done when the pass says position `pos`'s part is: besides its
    /// predecessors in the graph, it waits for that.
    Exit { pass: u32, pos: u32 },
}

#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct Task {
    pub kind: TaskKind,
    pub lane: u32,
    pub not_before: SimTime,
}

/// The graph, with successors in compressed rows.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct TaskGraph {
    pub tasks: Vec<Task>,
    /// Predecessors of each task.
    pub preds: Vec<u32>,
    succ_at: Vec<u32>,
    succ: Vec<u32>,
    pub lanes: u32,
    /// The GPU of each lane that is a GPU's compute lane (`NO_GPU` for
    /// the lanes of connections).
    pub lane_gpu: Vec<u32>,
    /// Where each workload's tasks begin, in task order: (first task,
    /// workload entry). Tasks are added workload by workload, then the
    /// jobs' iterations after their first, job by job (`jobs`).
    pub workload_first_task: Vec<(u32, u32)>,
    /// Collective passes whose messages are made as they run.
    pub passes: Vec<Pass>,
    /// The number of the first task (and of the first pass) of this
    /// graph: zero, but for an iteration of a job made as the run
    /// reaches it (`jobs`), whose tasks are numbered after those before.
    pub task_base: u32,
    pub pass_base: u32,
    /// Edges from tasks before `task_base` (earlier parts) to this
    /// graph's: (earlier task, task).
    pub cross: Vec<(u32, u32)>,
}

impl TaskGraph {
    /// Task `t`'s successors; `t` counts from `task_base`.
    pub fn successors(&self, t: u32) -> &[u32] {
        let t = (t - self.task_base) as usize;
        &self.succ[self.succ_at[t] as usize..self.succ_at[t + 1] as usize]
    }

    /// Per task: whether it waits for nothing, but tasks of this graph
    /// that do (so that it is released as soon as the graph exists, or
    /// its time allows). Tasks come after what they wait for.
    pub fn waiting_for_nothing(&self) -> Vec<bool> {
        let n = self.tasks.len();
        let mut free_preds = vec![0u32; n];
        let mut free = vec![false; n];
        for i in 0..n {
            free[i] = free_preds[i] == self.preds[i];
            // An acknowledgement's task is released at once, but done
            // when the network says: what waits for it waits for that.
            if free[i] && !matches!(self.tasks[i].kind, TaskKind::Acked(_)) {
                let t = self.task_base + i as u32;
                for &s in self.successors(t) {
                    if let Some(c) = s
                        .checked_sub(self.task_base)
                        .and_then(|s| free_preds.get_mut(s as usize))
                    {
                        *c += 1;
                    }
                }
            }
        }
        free
    }

    /// The first task, if any, that waits for nothing in this graph
    /// (`waiting_for_nothing`) and yet begins on a host (a transfer, a
    /// copy, a pass's step or a GPU's work) or takes time (a wait, whose
    /// end a task on a host may wait for). Made as the run reaches it,
    /// it begins when the graph is made; a partition of a parallel run
    /// that makes it a window after another would begin it late.
    pub fn begins_when_made(&self) -> Option<(u32, TaskKind)> {
        let free = self.waiting_for_nothing();
        self.tasks.iter().enumerate().find_map(|(i, t)| {
            let on_gpu = self
                .lane_gpu
                .get(t.lane as usize)
                .is_some_and(|&g| g != NO_GPU);
            let begins = match t.kind {
                TaskKind::Net(_)
                | TaskKind::Local { .. }
                | TaskKind::Switch { .. }
                | TaskKind::Enter { .. }
                | TaskKind::Exit { .. } => true,
                TaskKind::Delay(d) => d > SimTime::ZERO,
                TaskKind::Join | TaskKind::Acked(_) => false,
            };
            (free[i] && (begins || on_gpu)).then_some((self.task_base + i as u32, t.kind))
        })
    }

    /// Task `t` (numbered from `task_base`).
    pub fn task(&self, t: u32) -> Option<&Task> {
        self.tasks.get(t.checked_sub(self.task_base)? as usize)
    }

    /// Pass `p` (numbered from `pass_base`).
    pub fn pass(&self, p: u32) -> Option<&Pass> {
        self.passes.get(p.checked_sub(self.pass_base)? as usize)
    }

    pub fn pass_mut(&mut self, p: u32) -> Option<&mut Pass> {
        self.passes.get_mut(p.checked_sub(self.pass_base)? as usize)
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

/// No GPU: the lane of a connection.
pub const NO_GPU: u32 = u32::MAX;

/// Builds a `TaskGraph`.
#[derive(Debug, Default)]
pub struct GraphBuilder {
    tasks: Vec<Task>,
    edges: Vec<(u32, u32)>,
    lanes: u32,
    /// Each GPU's compute lane (kernels run one at a time), by GPU id.
    gpu_lanes: std::collections::HashMap<u32, u32>,
    pub passes: Vec<Pass>,
    /// Messages the passes number so far.
    pub pass_messages: u64,
    /// Ring passes that can run as one stream do, and number no messages
    /// (a flow-level run with `flow_rings = "streams"`).
    pub stream_rings: bool,
    /// The numbers of the first task, pass and transfer it adds (see
    /// `TaskGraph::task_base`).
    task_base: u32,
    pass_base: u32,
    pub flow_base: u32,
    cross: Vec<(u32, u32)>,
    /// The memory its passes hold (`Pass::held_bytes`), and the most its
    /// tasks, edges and passes may hold (the run's memory limit): a
    /// workload is refused once it would pass it, not after it took it.
    pass_bytes: u64,
    pub limit_bytes: Option<u64>,
}

impl GraphBuilder {
    /// A builder of a later part of the tasks (an iteration of a job,
    /// `jobs`): its tasks, passes, pass messages and transfers are
    /// numbered from these, and it shares `lanes` (the lanes so far, and
    /// each GPU's compute lane) with the parts before.
    pub fn part(
        (task_base, pass_base, flow_base, pass_messages): (u32, u32, u32, u64),
        lanes: &GraphBuilder,
    ) -> GraphBuilder {
        GraphBuilder {
            lanes: lanes.lanes,
            gpu_lanes: lanes.gpu_lanes.clone(),
            pass_messages,
            stream_rings: lanes.stream_rings,
            limit_bytes: lanes.limit_bytes,
            task_base,
            pass_base,
            flow_base,
            ..GraphBuilder::default()
        }
    }

    /// A builder that only keeps `graph`'s lanes (each GPU's compute
    /// lane and the lane count), for `part`.
    pub fn lanes_of(graph: &TaskGraph, stream_rings: bool) -> GraphBuilder {
        let gpu_lanes = graph
            .lane_gpu
            .iter()
            .enumerate()
            .filter(|&(_, &g)| g != NO_GPU)
            .map(|(l, &g)| (g, l as u32))
            .collect();
        GraphBuilder {
            lanes: graph.lanes,
            gpu_lanes,
            stream_rings,
            ..GraphBuilder::default()
        }
    }

    /// What the next task, pass, transfer and pass message are numbered.
    pub fn next_numbers(&self, flows: usize) -> (u32, u32, u32, u64) {
        (
            self.len() as u32,
            self.pass_base + self.passes.len() as u32,
            self.flow_base + flows as u32,
            self.pass_messages,
        )
    }

    /// Lanes made by `part` go on in this builder too.
    pub fn take_lanes(&mut self, part: &GraphBuilder) {
        self.lanes = part.lanes;
        self.gpu_lanes.clone_from(&part.gpu_lanes);
    }

    pub fn lanes(&self) -> u32 {
        self.lanes
    }

    pub fn task(&mut self, kind: TaskKind, lane: u32, not_before: SimTime) -> u32 {
        self.tasks.push(Task {
            kind,
            lane,
            not_before,
        });
        self.len() as u32 - 1
    }

    /// `b` waits for `a`.
    pub fn edge(&mut self, a: u32, b: u32) {
        debug_assert!(a < b, "tasks are added after what they wait for");
        if a < self.task_base {
            self.cross.push((a, b));
        } else {
            self.edges.push((a, b));
        }
    }

    /// Pass `p`, by its number.
    pub fn pass(&self, p: u32) -> &Pass {
        &self.passes[(p - self.pass_base) as usize]
    }

    /// The number the next pass gets.
    pub fn next_pass(&self) -> u32 {
        self.pass_base + self.passes.len() as u32
    }

    pub fn new_lane(&mut self) -> u32 {
        self.lanes += 1;
        self.lanes - 1
    }

    /// The lane GPU `g` computes on, shared by every workload.
    pub fn gpu_lane(&mut self, g: GpuId) -> u32 {
        if let Some(&l) = self.gpu_lanes.get(&g.0) {
            return l;
        }
        let l = self.new_lane();
        self.gpu_lanes.insert(g.0, l);
        l
    }

    /// The number the next task gets.
    pub fn len(&self) -> usize {
        self.task_base as usize + self.tasks.len()
    }

    /// The tasks this builder holds: all of them, or one part's (whose
    /// numbers start at `task_base`). What `collective::MAX_TASKS` bounds;
    /// the numbers themselves are bounded where the parts are laid out
    /// (`jobs::MAX_TASK_NUMBERS`).
    pub fn held(&self) -> usize {
        self.tasks.len()
    }

    pub fn kind(&self, t: u32) -> TaskKind {
        self.tasks[(t - self.task_base) as usize].kind
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    pub fn edges(&self) -> usize {
        self.edges.len()
    }

    /// The memory its tasks, edges and passes hold.
    pub fn held_bytes(&self) -> u64 {
        self.tasks.capacity() as u64 * std::mem::size_of::<Task>() as u64
            + (self.edges.capacity() + self.cross.capacity()) as u64 * 8
            + self.pass_bytes
    }

    /// Whether `more` bytes would take it past its limit.
    pub fn would_pass_limit(&self, more: u64) -> Option<u64> {
        self.limit_bytes
            .filter(|&l| self.held_bytes().saturating_add(more) > l)
    }

    /// Adds `pass` (numbered `next_pass`).
    pub fn push_pass(&mut self, pass: Pass) {
        self.pass_bytes += pass.held_bytes();
        self.passes.push(pass);
    }

    pub fn build(mut self) -> TaskGraph {
        self.cross.sort_unstable();
        self.cross.dedup();
        let n = self.tasks.len();
        let base = self.task_base as usize;
        let (succ_at, succ) = successors(std::mem::take(&mut self.edges), base, n);
        let mut preds = vec![0u32; n];
        for &b in &succ {
            preds[b as usize - base] += 1;
        }
        for &(_, b) in &self.cross {
            preds[b as usize - base] += 1;
        }
        // A pass's exits also wait for the pass.
        for p in &self.passes {
            for &x in &p.exit {
                preds[x as usize - base] += 1;
            }
        }
        let mut lane_gpu = vec![NO_GPU; self.lanes as usize];
        for (&g, &l) in &self.gpu_lanes {
            lane_gpu[l as usize] = g;
        }
        TaskGraph {
            tasks: self.tasks,
            preds,
            succ_at,
            succ,
            lanes: self.lanes,
            lane_gpu,
            workload_first_task: Vec::new(),
            passes: self.passes,
            task_base: self.task_base,
            pass_base: self.pass_base,
            cross: self.cross,
        }
    }
}

/// Each task's successors, in task order, each list sorted and without
/// repeats, as offsets (`n + 1`) into one list: the edges `(a, b)` of
/// tasks numbered from `base` counted into place by `a`, then each
/// task's few successors sorted. Sorting every edge at once was the
/// larger part of building a part of a long trace.
fn successors(edges: Vec<(u32, u32)>, base: usize, n: usize) -> (Vec<u32>, Vec<u32>) {
    let mut at = vec![0u32; n + 1];
    for &(a, _) in &edges {
        at[a as usize - base + 1] += 1;
    }
    for i in 0..n {
        at[i + 1] += at[i];
    }
    let mut fill = at.clone();
    let mut succ = vec![0u32; edges.len()];
    for &(a, b) in &edges {
        let next = &mut fill[a as usize - base];
        succ[*next as usize] = b;
        *next += 1;
    }
    drop((edges, fill));
    // Sort and dedup each task's list, moving it down over the repeats
    // dropped before it.
    let mut kept = 0;
    let mut start = 0;
    for i in 0..n {
        let end = at[i + 1] as usize;
        succ[start..end].sort_unstable();
        at[i] = kept as u32;
        for k in start..end {
            if k == start || succ[k] != succ[k - 1] {
                succ[kept] = succ[k];
                kept += 1;
            }
        }
        start = end;
    }
    at[n] = kept as u32;
    succ.truncate(kept);
    (at, succ)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The successor lists are the edges sorted, without repeats,
        /// whatever their order and repeats.
        #[test]
        fn successors_are_the_distinct_edges_in_order(
            edges in proptest::collection::vec((0u32..40, 0u32..40), 0..400)
        ) {
            let base = 1000;
            let edges: Vec<(u32, u32)> = edges.into_iter().map(|(a, b)| (a + base, b + base)).collect();
            let mut want = edges.clone();
            want.sort_unstable();
            want.dedup();
            let (at, succ) = successors(edges, base as usize, 40);
            prop_assert_eq!(at.len(), 41);
            let got: Vec<(u32, u32)> = (0..40)
                .flat_map(|i| {
                    succ[at[i] as usize..at[i + 1] as usize]
                        .iter()
                        .map(move |&b| (i as u32 + base, b))
                })
                .collect();
            prop_assert_eq!(got, want);
        }
    }

    /// Joins, an empty wait and an acknowledgement's task that wait for
    /// nothing (or for each other) are released when the graph is made,
    /// and begin nowhere and take no time; a wait of some time, a GPU's
    /// work or a transfer after them would end, or begin on a host, at a
    /// time that hangs on when the graph was made.
    #[test]
    fn tasks_that_begin_as_soon_as_the_graph_is_made() {
        let mut b = GraphBuilder::default();
        let join = b.task(TaskKind::Join, NO_LANE, SimTime::ZERO);
        let empty = b.task(TaskKind::Delay(SimTime::ZERO), NO_LANE, SimTime::ZERO);
        b.task(TaskKind::Acked(0), NO_LANE, SimTime::ZERO);
        b.edge(join, empty);
        let g = b.build();
        assert_eq!(g.waiting_for_nothing(), vec![true, true, true]);
        assert_eq!(g.begins_when_made(), None);

        let mut b = GraphBuilder::default();
        let join = b.task(TaskKind::Join, NO_LANE, SimTime::ZERO);
        let wait = b.task(TaskKind::Delay(SimTime(5)), NO_LANE, SimTime::ZERO);
        b.edge(join, wait);
        let g = b.build();
        assert_eq!(
            g.begins_when_made(),
            Some((wait, TaskKind::Delay(SimTime(5))))
        );

        let mut b = GraphBuilder::default();
        let gpu = b.gpu_lane(crate::topology::GpuId(3));
        let join = b.task(TaskKind::Join, NO_LANE, SimTime::ZERO);
        let work = b.task(TaskKind::Delay(SimTime(5)), gpu, SimTime::ZERO);
        b.edge(join, work);
        let g = b.build();
        assert_eq!(
            g.begins_when_made(),
            Some((work, TaskKind::Delay(SimTime(5))))
        );

        let mut b = GraphBuilder::default();
        let join = b.task(TaskKind::Join, NO_LANE, SimTime::ZERO);
        let net = b.task(TaskKind::Net(0), NO_LANE, SimTime::ZERO);
        b.edge(join, net);
        let g = b.build();
        assert_eq!(g.begins_when_made(), Some((net, TaskKind::Net(0))));

        // An acknowledgement's task is released when the graph is made
        // but done by the network: a GPU's work after it waits for that.
        let mut b = GraphBuilder::default();
        let gpu = b.gpu_lane(crate::topology::GpuId(3));
        let acked = b.task(TaskKind::Acked(0), NO_LANE, SimTime::ZERO);
        let work = b.task(TaskKind::Delay(SimTime(5)), gpu, SimTime::ZERO);
        b.edge(acked, work);
        let g = b.build();
        assert_eq!(g.waiting_for_nothing(), vec![true, false]);
        assert_eq!(g.begins_when_made(), None);
    }

    #[test]
    fn successors_and_predecessor_counts() {
        let mut b = GraphBuilder::default();
        let a = b.task(TaskKind::Join, NO_LANE, SimTime::ZERO);
        let c = b.task(TaskKind::Delay(SimTime(5)), NO_LANE, SimTime::ZERO);
        let d = b.task(TaskKind::Join, NO_LANE, SimTime::ZERO);
        b.edge(a, c);
        b.edge(a, d);
        b.edge(c, d);
        b.edge(c, d);
        let g = b.build();
        assert_eq!(g.successors(a), &[c, d]);
        assert_eq!(g.successors(c), &[d]);
        assert!(g.successors(d).is_empty());
        assert_eq!(g.preds, vec![0, 1, 2]);
    }
}
