//! Training jobs added iteration by iteration. A job's first iteration is
//! added with every other workload; the iterations after it follow every
//! workload's first part, job by job, each numbered (tasks, transfers,
//! passes, collectives) after the one before. That order does not depend
//! on when an iteration is added, so the same numbers come out whether
//! the whole job is added before the run or each iteration as the run
//! reaches it.

use super::chakra::TraceGen;
use super::collective::{CollectiveRun, Emitter, EmitterState};
use super::graph::{GraphBuilder, TaskKind};
use super::model::{ModelGen, ModelJob};
use super::training::{JobRun, Training, TrainingGen};
use super::FlowSpec;
use crate::topology::routing::Routes;
use crate::topology::Topology;
use std::sync::Arc;

/// A job's iterations still to add, and what adding them needs.
#[derive(Clone, Debug)]
pub struct JobGen {
    pub workload: u32,
    what: What,
    emitter: EmitterState,
    /// The iterations the job runs.
    pub iterations: u32,
}

#[derive(Clone, Debug)]
enum What {
    Training(Arc<Training>, TrainingGen),
    Model(Arc<ModelJob>, ModelGen),
    /// A Chakra trace, whose parts (`chakra::TraceGen`) are its
    /// "iterations"; once laid out, what each part after the first
    /// takes and the tasks before it that it waits for.
    Trace(Box<TraceGen>, Vec<(Sizes, Box<[u32]>)>),
}

impl JobGen {
    /// Adds a training job's start and first iteration.
    pub fn training(
        mut e: Emitter,
        t: Arc<Training>,
        start: crate::units::SimTime,
        job: &mut JobRun,
        runs: &mut Vec<CollectiveRun>,
    ) -> Result<JobGen, String> {
        let mut g = TrainingGen::start(&mut e, &t, start);
        if t.iterations > 0 {
            g.iteration(&mut e, &t, job, runs)?;
        }
        Ok(JobGen {
            workload: e.workload,
            iterations: t.iterations,
            what: What::Training(t, g),
            emitter: e.into_state(),
        })
    }

    /// Adds a model job's start and first iteration.
    pub fn model(
        mut e: Emitter,
        m: Arc<ModelJob>,
        start: crate::units::SimTime,
        job: &mut JobRun,
        runs: &mut Vec<CollectiveRun>,
    ) -> Result<JobGen, String> {
        let mut g = ModelGen::start(&mut e, &m, start);
        if m.iterations > 0 {
            g.iteration(&mut e, &m, job, runs)?;
        }
        Ok(JobGen {
            workload: e.workload,
            iterations: m.iterations,
            what: What::Model(m, g),
            emitter: e.into_state(),
        })
    }

    /// Adds a Chakra trace's first part.
    pub fn trace(
        mut e: Emitter,
        mut g: TraceGen,
        runs: &mut Vec<CollectiveRun>,
    ) -> Result<JobGen, String> {
        runs.extend(g.part(&mut e)?);
        Ok(JobGen {
            workload: e.workload,
            // Counted as they are laid out (`lay_out_parts`).
            iterations: g.made() + u32::from(!g.finished()),
            what: What::Trace(Box::new(g), Vec::new()),
            emitter: e.into_state(),
        })
    }

    /// Whether it is a trace's parts, not a job's iterations (a trace
    /// has no job records).
    pub fn is_trace(&self) -> bool {
        matches!(self.what, What::Trace(..))
    }

    /// The next iteration to add.
    pub fn next(&self) -> u32 {
        match &self.what {
            What::Training(_, g) => g.next,
            What::Model(_, g) => g.next,
            What::Trace(g, _) => g.made(),
        }
    }

    /// The tasks each rank's part of the next iteration waits for (the
    /// last of the iteration before): every task of the next iteration
    /// waits, through others or directly, for one of these, or for
    /// nothing.
    pub fn ready(&self) -> Vec<u32> {
        let mut v: Vec<u32> = match &self.what {
            What::Training(_, g) => g.ready().to_vec(),
            What::Model(_, g) => g.ready().iter().flatten().copied().collect(),
            // A trace's parts are made by `part_waits`.
            What::Trace(..) => Vec::new(),
        };
        v.sort_unstable();
        v.dedup();
        v
    }

    /// A trace's parts wait for tasks of any part before them: each such
    /// task, and the last part that waits for it. Every part is made
    /// once the first task it waits for is about to be done, so none of
    /// its tasks becomes ready before it is made.
    pub fn part_waits(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let laid = match &self.what {
            What::Trace(_, laid) => &laid[..],
            _ => &[],
        };
        let mut last: Vec<(u32, u32)> = laid
            .iter()
            .enumerate()
            .flat_map(|(i, l)| l.1.iter().map(move |&t| (t, i as u32 + 1)))
            .collect();
        // The last part per task.
        last.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(last.len());
        for (t, p) in last {
            match out.last_mut() {
                Some(o) if o.0 == t => o.1 = p,
                _ => out.push((t, p)),
            }
        }
        out.into_iter()
    }

    pub fn finished(&self) -> bool {
        match &self.what {
            What::Trace(g, _) => g.finished(),
            _ => self.next() >= self.iterations,
        }
    }

    /// Adds the next iteration to `graph` and `flows`; its collectives are
    /// appended to `runs`, its records to `job`.
    pub fn iteration(
        &mut self,
        topo: &Topology,
        routes: &Routes,
        graph: &mut GraphBuilder,
        flows: &mut Vec<FlowSpec>,
        job: &mut JobRun,
        runs: &mut Vec<CollectiveRun>,
    ) -> Result<(), String> {
        let state = std::mem::take(&mut self.emitter);
        let mut e = Emitter::resume(topo, routes, graph, flows, state);
        let r = match &mut self.what {
            What::Training(t, g) => g.iteration(&mut e, t, job, runs),
            What::Model(m, g) => g.iteration(&mut e, m, job, runs),
            What::Trace(g, _) => g.part(&mut e).map(|r| runs.extend(r)),
        };
        self.emitter = e.into_state();
        r
    }
}

/// What one iteration of a job adds: tasks, passes, transfers, pass
/// messages, and network messages the passes send (what the run waits
/// to see acknowledged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sizes {
    pub tasks: u32,
    pub passes: u32,
    pub flows: u32,
    pub messages: u64,
    pub net_messages: u64,
    /// Bytes its passes write over the network, and its transfers'.
    pub net_bytes: u64,
    pub flow_bytes: u64,
    /// Compute time of its tasks (`Delay`), in picoseconds.
    pub compute: u128,
}

impl Sizes {
    fn times(self, n: u32) -> Sizes {
        Sizes {
            tasks: self.tasks * n,
            passes: self.passes * n,
            flows: self.flows * n,
            messages: self.messages * u64::from(n),
            net_messages: self.net_messages * u64::from(n),
            net_bytes: self.net_bytes * u64::from(n),
            flow_bytes: self.flow_bytes * u64::from(n),
            compute: self.compute * u128::from(n),
        }
    }

    fn plus(self, o: Sizes) -> Sizes {
        Sizes {
            tasks: self.tasks + o.tasks,
            passes: self.passes + o.passes,
            flows: self.flows + o.flows,
            messages: self.messages + o.messages,
            net_messages: self.net_messages + o.net_messages,
            net_bytes: self.net_bytes + o.net_bytes,
            flow_bytes: self.flow_bytes + o.flow_bytes,
            compute: self.compute + o.compute,
        }
    }
}

/// Where a job's iterations after its first are numbered: the numbers of
/// iteration 1's first task, pass, transfer and pass message, and what an
/// iteration without and with a checkpoint takes.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub first: (u32, u32, u32, u64),
    pub plain: Sizes,
    pub checkpoint: Sizes,
    /// A task of a later iteration that waits for nothing in it but
    /// begins on a host or takes time (`TaskGraph::begins_when_made`),
    /// if one does: such a job runs on one thread.
    pub begins_when_made: Option<(u32, super::graph::TaskKind)>,
}

impl JobGen {
    /// Every how many iterations the job writes a checkpoint.
    fn checkpoint_every(&self) -> Option<u32> {
        match &self.what {
            What::Training(t, _) => t.checkpoint.as_ref().map(|c| c.every.max(1)),
            What::Model(..) | What::Trace(..) => None,
        }
    }

    fn writes_checkpoint(&self, it: u32) -> bool {
        self.checkpoint_every()
            .is_some_and(|e| (it + 1).is_multiple_of(e))
    }

    /// Checkpoint iterations among 1..it.
    fn checkpoints_before(&self, it: u32) -> u32 {
        match self.checkpoint_every() {
            // Iterations k in 1..it with (k + 1) a multiple of e.
            Some(e) => it / e - 1 / e,
            None => 0,
        }
    }

    /// What iterations 1..it take together.
    fn before(&self, layout: &Layout, it: u32) -> Sizes {
        if let What::Trace(_, laid) = &self.what {
            let n = it.saturating_sub(1) as usize;
            return laid[..n.min(laid.len())]
                .iter()
                .fold(Sizes::default(), |a, l| a.plus(l.0));
        }
        let ck = self.checkpoints_before(it);
        let plain = it.saturating_sub(1) - ck;
        layout.plain.times(plain).plus(layout.checkpoint.times(ck))
    }

    /// The numbers of iteration `it`'s (at least 1) first task, pass,
    /// transfer and pass message.
    pub fn numbers(&self, layout: &Layout, it: u32) -> (u32, u32, u32, u64) {
        let b = self.before(layout, it);
        let f = layout.first;
        (
            f.0 + b.tasks,
            f.1 + b.passes,
            f.2 + b.flows,
            f.3 + b.messages,
        )
    }

    /// What iteration `it` takes.
    pub fn sizes(&self, layout: &Layout, it: u32) -> Sizes {
        if let What::Trace(_, laid) = &self.what {
            return laid.get(it as usize - 1).map_or(Sizes::default(), |l| l.0);
        }
        if self.writes_checkpoint(it) {
            layout.checkpoint
        } else {
            layout.plain
        }
    }

    /// What every iteration after the first takes together.
    pub fn total(&self, layout: &Layout) -> Sizes {
        self.before(layout, self.iterations)
    }

    /// Works out where the job's later iterations are numbered, from
    /// `first` on, by making one iteration of each kind (with and without
    /// a checkpoint) and counting what it adds. Lanes and connections
    /// those make first are kept (in `lanes` and in the job's emitter),
    /// as making every iteration would make them; the transfers of the
    /// iterations made are returned, for the QPs of the connections they
    /// open.
    pub fn layout(
        &mut self,
        topo: &Topology,
        routes: &Routes,
        lanes: &mut GraphBuilder,
        first: (u32, u32, u32, u64),
    ) -> Result<(Layout, Prototypes), String> {
        let mut layout = Layout {
            first,
            plain: Sizes::default(),
            checkpoint: Sizes::default(),
            begins_when_made: None,
        };
        if self.is_trace() {
            let specs = self.lay_out_parts(topo, routes, lanes, first)?;
            return Ok((layout, specs));
        }
        let mut made = Vec::new();
        let later = 1..self.iterations;
        let plain = later.clone().find(|&i| !self.writes_checkpoint(i));
        let ck = later.clone().find(|&i| self.writes_checkpoint(i));
        let mut kinds: Vec<u32> = plain.into_iter().chain(ck).collect();
        kinds.sort_unstable();
        for it in kinds {
            let mut trial = self.clone();
            trial.set_next(it);
            let (graph, flows, next) = trial.trial_part(topo, routes, lanes, first)?;
            self.emitter = trial.emitter;
            let sizes = sizes_of(topo, &graph, &flows, first, next);
            layout.begins_when_made = layout.begins_when_made.or(graph.begins_when_made());
            if self.writes_checkpoint(it) {
                layout.checkpoint = sizes;
            } else {
                layout.plain = sizes;
            }
            made.push((it, flows));
        }
        // Numbered as if every iteration were made.
        let mut specs = Prototypes::default();
        for (it, flows) in made {
            let first = self.numbers(&layout, it).2;
            specs.flows.extend((first..).zip(flows));
        }
        Ok((layout, specs))
    }

    /// Makes the next iteration (part) apart, numbered from `first`, to
    /// lay it out: its graph, its transfers and the numbers after it. The
    /// lanes it opens are kept in `lanes`.
    fn trial_part(
        &mut self,
        topo: &Topology,
        routes: &Routes,
        lanes: &mut GraphBuilder,
        first: (u32, u32, u32, u64),
    ) -> Result<(super::graph::TaskGraph, Vec<FlowSpec>, Numbers), String> {
        let mut part = GraphBuilder::part(first, lanes);
        let mut flows = Vec::new();
        let mut runs = Vec::new();
        let mut job = JobRun::new(self.workload);
        self.iteration(topo, routes, &mut part, &mut flows, &mut job, &mut runs)?;
        lanes.take_lanes(&part);
        let next = part.next_numbers(flows.len());
        Ok((part.build(), flows, next))
    }

    fn set_next(&mut self, it: u32) {
        match &mut self.what {
            What::Training(_, g) => g.next = it,
            What::Model(_, g) => g.next = it,
            What::Trace(..) => unreachable!("a trace's parts are laid out in order"),
        }
    }

    /// Makes a job's parts after those made so far one after another, as
    /// the run will, numbered from `first`; each is handed to `each` (its
    /// graph, its transfers and its first numbers) and let go. The lanes
    /// they open are kept in `lanes`. Returns the generator past the
    /// last part.
    pub fn trial_parts(
        &self,
        topo: &Topology,
        routes: &Routes,
        lanes: &mut GraphBuilder,
        first: Numbers,
        mut each: impl FnMut(
            super::graph::TaskGraph,
            Vec<FlowSpec>,
            Numbers,
            Numbers,
        ) -> Result<(), String>,
    ) -> Result<JobGen, String> {
        let mut trial = self.clone();
        let mut numbers = first;
        while !trial.finished() {
            let (graph, flows, next) = trial.trial_part(topo, routes, lanes, numbers)?;
            each(graph, flows, numbers, next)?;
            numbers = next;
        }
        Ok(trial)
    }

    /// A trace's parts after its first, laid out by making each in turn
    /// (and letting it go) with the numbers it will have: what each takes
    /// and waits for is kept. Returns the transfers that open
    /// connections, by number, and the pass connections, by the number of
    /// their first message (see `Later`).
    fn lay_out_parts(
        &mut self,
        topo: &Topology,
        routes: &Routes,
        lanes: &mut GraphBuilder,
        first: (u32, u32, u32, u64),
    ) -> Result<Prototypes, String> {
        let mut laid = Vec::new();
        let mut out = Prototypes::default();
        let mut opened = std::collections::HashSet::new();
        let trial =
            self.trial_parts(topo, routes, lanes, first, |graph, flows, numbers, next| {
                let sizes = sizes_of(topo, &graph, &flows, numbers, next);
                let mut waits: Vec<u32> = graph.cross.iter().map(|c| c.0).collect();
                waits.sort_unstable();
                waits.dedup();
                laid.push((sizes, waits.into_boxed_slice()));
                for (f, spec) in (numbers.2..).zip(flows) {
                    if opened.insert(conn_key(&spec)) {
                        out.flows.push((f, spec));
                    }
                }
                for pass in &graph.passes {
                    for c in 0..pass.conns.len() as u32 {
                        let idx = pass.first_on(c);
                        let spec = pass.spec(topo, idx).filter(|_| pass.sends_on(c) > 0);
                        if let Some(spec) = spec.filter(|s| opened.insert(conn_key(s))) {
                            out.passes.push((pass.first + idx, spec));
                        }
                    }
                }
                Ok(())
            })?;
        self.emitter = trial.emitter;
        self.iterations = laid.len() as u32 + 1;
        if let What::Trace(_, l) = &mut self.what {
            *l = laid;
        }
        Ok(out)
    }
}

/// What a part made between `first` and `next` (numbers of tasks, passes,
/// transfers and pass messages) takes.
fn sizes_of(
    topo: &Topology,
    graph: &super::graph::TaskGraph,
    flows: &[FlowSpec],
    first: (u32, u32, u32, u64),
    next: (u32, u32, u32, u64),
) -> Sizes {
    let compute = graph
        .tasks
        .iter()
        .map(|t| match t.kind {
            TaskKind::Delay(d) => u128::from(d.0),
            _ => 0,
        })
        .sum();
    let (mut net_messages, mut net_bytes) = (0, 0);
    for pass in &graph.passes {
        for c in 0..pass.conns.len() as u32 {
            if pass.sends_on(c) > 0 && pass.conn_spec(topo, c, 0).is_some() {
                net_messages += pass.sends_on(c);
                net_bytes += pass.bytes_on(c);
            }
        }
    }
    Sizes {
        tasks: next.0 - first.0,
        passes: next.1 - first.1,
        flows: flows.len() as u32,
        messages: next.3 - first.3,
        net_messages,
        net_bytes,
        flow_bytes: flows.iter().map(|f| f.bytes).sum(),
        compute,
    }
}

/// A connection's key: (workload, sender, receiver, key).
fn conn_key(s: &FlowSpec) -> (u32, u32, u32, u64) {
    (s.workload, s.src.0, s.dst.0, s.conn.unwrap_or(0))
}

/// What the parts made to lay jobs and traces out open: their transfers
/// that open connections, by number, and (traces only, whose parts may
/// hold collectives on new communicators) their passes' connections, by
/// the number of the message that opens each. Their QPs are made before
/// the run, in the order a run with every part made before it makes them.
#[derive(Clone, Debug, Default)]
pub struct Prototypes {
    pub flows: Vec<(u32, FlowSpec)>,
    pub passes: Vec<(u64, FlowSpec)>,
}

/// The numbers of a task, pass, transfer and pass message.
pub type Numbers = (u32, u32, u32, u64);

/// Most task numbers a run may use when jobs are made as they run (what
/// an event's key tells apart); only the iterations under way are held.
pub const MAX_TASK_NUMBERS: u32 = 1 << 27;

/// The jobs' iterations after their first, to be made as the run
/// reaches them, job by job in the numbers after every workload's first
/// part (see the module's note).
#[derive(Clone, Debug)]
pub struct Later {
    pub jobs: Vec<LaterJob>,
    /// The numbers after every job's last iteration: where pass
    /// messages' tasks and transfers are numbered from.
    pub end: (u32, u32, u32, u64),
    /// What the parts made to lay the jobs out open (their connections
    /// need QPs before the run).
    pub prototypes: Prototypes,
    /// Network messages the later iterations' passes send, and their
    /// bytes; the bytes of their transfers.
    pub net_messages: u64,
    pub net_bytes: u64,
    pub flow_bytes: u64,
    /// Compute time of the later iterations, in picoseconds.
    pub compute: u128,
    /// Ring passes that can run as streams do (`GraphBuilder`).
    pub stream_rings: bool,
}

#[derive(Clone, Debug)]
pub struct LaterJob {
    pub gen: JobGen,
    pub layout: Layout,
    /// Its records among the run's jobs (none for a trace).
    pub job: Option<usize>,
}

impl Later {
    pub fn new(first: (u32, u32, u32, u64), stream_rings: bool) -> Later {
        Later {
            stream_rings,
            jobs: Vec::new(),
            end: first,
            prototypes: Prototypes::default(),
            net_messages: 0,
            net_bytes: 0,
            flow_bytes: 0,
            compute: 0,
        }
    }

    /// Lays out `gen`'s later iterations after those so far.
    pub fn add(
        &mut self,
        mut gen: JobGen,
        job: Option<usize>,
        topo: &Topology,
        routes: &Routes,
        lanes: &mut GraphBuilder,
    ) -> Result<(), String> {
        let (layout, specs) = gen.layout(topo, routes, lanes, self.end)?;
        let total = gen.total(&layout);
        let e = self.end;
        let (what, fewer) = if gen.is_trace() {
            (
                format!("trace's {} parts", gen.iterations),
                "a shorter trace",
            )
        } else {
            (
                format!("job's {} iterations", gen.iterations),
                "fewer iterations",
            )
        };
        let tasks = u64::from(e.0) + u64::from(total.tasks);
        if tasks > u64::from(MAX_TASK_NUMBERS) {
            return Err(format!(
                "the {what} need {tasks} tasks (messages, copies, joins); at most {MAX_TASK_NUMBERS} are supported; use {fewer}, a larger chunk or fewer channels"
            ));
        }
        let flows = u64::from(e.2) + u64::from(total.flows);
        if flows > super::MAX_FLOWS as u64 {
            return Err(format!(
                "the {what} need {flows} transfers; at most {} are supported; use {fewer}",
                super::MAX_FLOWS
            ));
        }
        let messages = e.3 + total.messages;
        if messages > super::collective::MAX_PASS_MESSAGES {
            return Err(format!(
                "the {what} need {messages} collective messages; at most {} are supported; use {fewer} or a larger chunk",
                super::collective::MAX_PASS_MESSAGES
            ));
        }
        self.end = (
            e.0 + total.tasks,
            e.1 + total.passes,
            e.2 + total.flows,
            messages,
        );
        self.net_messages += total.net_messages;
        self.net_bytes += total.net_bytes;
        self.flow_bytes += total.flow_bytes;
        self.compute += total.compute;
        self.prototypes.flows.extend(specs.flows);
        self.prototypes.passes.extend(specs.passes);
        self.jobs.push(LaterJob { gen, layout, job });
        Ok(())
    }
}
