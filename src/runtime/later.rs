//! Jobs' iterations made as the run reaches them (`workload::jobs`): when
//! a task of a job's newest iteration begins, the job's next iteration
//! is made, numbered where the layout put it, so that it carries the
//! numbers it would have had if made before the run. An iteration's
//! tasks, transfers and passes live in its `Part` until everything in it
//! is over (its tasks done, its transfers and pass messages delivered and
//! acknowledged) and the parts before it are: then what the outputs need
//! of it is worked out (its job's records, its collectives' times) or
//! written to a temporary file (its transfers', connections' and NVLink
//! copies' rows, read back when the outputs are written), and the part is
//! forgotten. Memory holds the iterations under way, whatever the count.
//!
//! A Chakra trace's parts after its first (`chakra::TraceGen`) go the same
//! way, with their own trigger: a part may wait for tasks of any part
//! before it, so every task some later part waits for is a trigger from
//! the start, and when one is about to be done every part up to the last
//! that waits for it is made. No task of a part can be ready before the
//! part exists, so it is released, and its lane taken, as if made before
//! the run. A trace has no job records.
//!
//! In a partition of a parallel run, an iteration (a trace's part) is
//! made when a task the partition runs triggers it, or when another
//! partition's mail says it was made (`Mail::made`, taken first at the
//! window's end), released from when it was made there. Each part is cut
//! as the graph is (`Part::homes`); its tasks that wait for nothing in it
//! run everywhere or only wait (`TaskGraph::begins_when_made` keeps it
//! so; a trace's parts are each made apart and checked before the run,
//! `LaterState::traces_cut`), so the partitions that made it later change
//! nothing but their times, which the merge takes from the first
//! (`LaterState::settle`). A partition sees only its share of a part
//! (`Part::open` counts what happens there): once a part is over in every
//! partition, partition 0 takes the others' shares, works out the part's
//! records and forgets it, and the others forget theirs
//! (`parallel::retire_over`).

use super::homes::Home;
use super::pass_rows::ConnRow;
use super::{Count, Due, FlowState, Kernel, Loc, Runtime};
use crate::nic::transport::packets_of;
use crate::topology::{FlowId, NicId};
use crate::units::SimTime;
use crate::workload::graph::{GraphBuilder, TaskGraph, TaskKind};
use crate::workload::jobs::{Later, LaterJob};
use rustc_hash::FxHashMap as HashMap;

/// Each connection's first QP, by (workload, sender, receiver, key).
pub type Conns = std::collections::HashMap<(u32, u32, u32, u64), u32>;

/// The later iterations: what makes them, and those made so far.
pub struct LaterState {
    jobs: Vec<LaterJob>,
    /// Each later job's record among the run's jobs.
    job_index: Vec<Option<usize>>,
    /// Per job: its iterations made so far (from 1), in order.
    pub(crate) parts: Vec<Vec<Part>>,
    /// The tasks whose end makes a job's next iteration (each rank's
    /// last of its newest), or a trace's parts up to the last that waits
    /// for it; and the job, and the iteration (part) to make up to.
    triggers: HashMap<u32, (usize, u32)>,
    /// The lanes of every connection and GPU (the builder of every part).
    lanes: GraphBuilder,
    /// Successors of tasks made before them: the tasks of later parts
    /// that wait for them.
    extra: HashMap<u32, Vec<u32>>,
    /// Where the later numbers begin: tasks, passes, transfers, pass
    /// messages.
    pub(crate) start: (u32, u32, u32, u64),
    /// Each connection's first QP: (workload, sender, receiver, key).
    conns: HashMap<(u32, u32, u32, u64), u32>,
    /// Why an iteration could not be made, if one could not.
    pub failed: Option<String>,
    /// Iterations made as the run went.
    pub made: u64,
    /// Per job: the rows of its forgotten iterations, by kind (so that
    /// an output reads only the kind it lists), and the number below
    /// which its later tasks are forgotten.
    spills: Vec<[Spill; 3]>,
    retired_below: Vec<u32>,
    /// Times of forgotten tasks that records of iterations under way
    /// name (a rank's part of a collective starts when its part of the
    /// iteration before ended): (started, done).
    kept: HashMap<u32, (SimTime, SimTime)>,
    /// When the last task of a forgotten iteration was done.
    pub last_done: SimTime,
    /// A forgotten iteration's records could not be read back.
    read_failed: std::sync::atomic::AtomicBool,
    /// Iterations forgotten, and the most parts held at once.
    pub retired: u64,
    pub most_held: u64,
    /// Tasks done in the iterations forgotten.
    done_retired: u64,
    /// Whether the traces' later parts can be cut by host, worked out
    /// once when a parallel run first asks (`traces_cut`).
    traces_cut: std::sync::OnceLock<Result<(), String>>,
}

/// What a forgotten iteration leaves for the outputs, in number order
/// per job: its transfers, its pass connections' rows, its NVLink copies.
#[derive(serde::Serialize, serde::Deserialize)]
pub enum Record {
    Flow(FlowState),
    Row(ConnRow),
    Copy(CopyRow),
}

/// The kinds of `Record`, each kept apart.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    Flow = 0,
    Row = 1,
    Copy = 2,
}

impl Record {
    fn kind(&self) -> RecordKind {
        match self {
            Record::Flow(_) => RecordKind::Flow,
            Record::Row(_) => RecordKind::Row,
            Record::Copy(_) => RecordKind::Copy,
        }
    }
}

/// An NVLink copy of the graph (flows.csv's row of it).
#[derive(Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct CopyRow {
    pub workload: u32,
    pub src: crate::topology::GpuId,
    pub dst: crate::topology::GpuId,
    pub bytes: u64,
    pub started: SimTime,
    pub done: SimTime,
}

/// Records of forgotten iterations: written to a temporary file (each a
/// length and its postcard bytes) and read back in order; kept in memory
/// if the file cannot be made or written.
#[derive(Default)]
struct Spill {
    file: Option<(tempfile::NamedTempFile, std::io::BufWriter<std::fs::File>)>,
    /// A record's bytes, in a buffer used again for each.
    bytes: Vec<u8>,
    memory: Vec<Record>,
    tried: bool,
    /// Records written to the file were lost with it.
    lost: bool,
    /// Network messages in the records, by workload: one a transfer,
    /// `planned` a connection's row (the text summary counts them
    /// without reading the records back).
    messages: Vec<u64>,
}

impl Spill {
    fn push(&mut self, r: Record) {
        let (w, n) = match &r {
            Record::Flow(f) => (f.spec.workload, 1),
            Record::Row(c) if c.qps > 0 => (c.workload, c.planned),
            Record::Row(_) | Record::Copy(_) => (0, 0),
        };
        if n > 0 {
            let w = w as usize;
            if self.messages.len() <= w {
                self.messages.resize(w + 1, 0);
            }
            self.messages[w] += n;
        }
        if !self.tried {
            self.tried = true;
            self.file = tempfile::NamedTempFile::new()
                .and_then(|f| {
                    let w = f.reopen()?;
                    Ok((f, std::io::BufWriter::new(w)))
                })
                .ok();
        }
        if let Some((_, w)) = &mut self.file {
            if write_record(w, &r, &mut self.bytes).is_ok() {
                return;
            }
            // The disk is full, or the file gone: what it holds is lost
            // to the outputs, which say so (`records_lost`); the rest is
            // kept in memory.
            self.file = None;
            self.lost = true;
        }
        self.memory.push(r);
    }

    fn flush(&mut self) {
        if let Some((_, w)) = &mut self.file {
            if std::io::Write::flush(w).is_err() {
                self.file = None;
                self.lost = true;
            }
        }
    }

    /// The records in order; an error if some could not be kept.
    fn read(&self) -> Box<dyn Iterator<Item = std::io::Result<Record>> + '_> {
        match &self.file {
            Some((f, _)) => match f.reopen() {
                Ok(r) => Box::new(Reader(std::io::BufReader::new(r), Vec::new())),
                Err(e) => Box::new(std::iter::once(Err(e))),
            },
            None => Box::new(self.memory.iter().map(|r| Ok(r.clone()))),
        }
    }
}

impl Clone for Record {
    fn clone(&self) -> Record {
        match self {
            Record::Flow(f) => Record::Flow(f.clone()),
            Record::Row(r) => Record::Row(r.clone()),
            Record::Copy(c) => Record::Copy(*c),
        }
    }
}

/// Writes a record, its length first, made in `bytes`.
fn write_record(
    w: &mut impl std::io::Write,
    r: &Record,
    bytes: &mut Vec<u8>,
) -> std::io::Result<()> {
    bytes.clear();
    let made = postcard::to_extend(r, std::mem::take(bytes)).map_err(std::io::Error::other)?;
    *bytes = made;
    w.write_all(&(bytes.len() as u32).to_le_bytes())?;
    w.write_all(bytes)
}

/// Reads records back.
/// Reads records back, each into a buffer used again for the next.
struct Reader(std::io::BufReader<std::fs::File>, Vec<u8>);

impl Iterator for Reader {
    type Item = std::io::Result<Record>;

    fn next(&mut self) -> Option<std::io::Result<Record>> {
        use std::io::Read;
        let mut len = [0u8; 4];
        match self.0.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
            Err(e) => return Some(Err(e)),
        }
        let buf = &mut self.1;
        buf.clear();
        buf.resize(u32::from_le_bytes(len) as usize, 0);
        Some(
            self.0
                .read_exact(buf)
                .and_then(|()| postcard::from_bytes(buf).map_err(std::io::Error::other)),
        )
    }
}

/// One iteration of a job: its tasks and their state, its transfers,
/// its passes and their connections' rows.
pub struct Part {
    pub iteration: u32,
    pub graph: TaskGraph,
    pub(crate) left: Vec<u32>,
    pub started: Vec<SimTime>,
    pub done: Vec<SimTime>,
    /// What is still to happen before it can be forgotten: tasks to be
    /// done, transfers to be delivered and acknowledged, pass messages'
    /// halves (delivery, acknowledgement) to be counted in their rows (in
    /// a partition, those that happen there).
    pub(crate) open: u64,
    /// Its collectives among the run's.
    runs: std::ops::Range<usize>,
    /// Its first transfer's number, its transfers, and per transfer its
    /// task and the QPs that sent their last packet once.
    pub flow_base: u32,
    pub flows: Vec<FlowState>,
    pub(crate) flow_task: Vec<u32>,
    pub(crate) flow_sent_qps: Vec<u32>,
    /// Per pass: the first QP of each connection, its first row, and
    /// how many channels of its collective share its NICs (streams).
    pub(crate) first_qp: Vec<Vec<u32>>,
    pub(crate) row_of: Vec<u32>,
    pub rows: Vec<ConnRow>,
    pub(crate) channels: Vec<u32>,
    /// The numbers of its pass messages.
    messages: std::ops::Range<u64>,
    /// In a partition of a parallel run: where each of its tasks runs,
    /// and its edges from earlier tasks to tasks done once the last of
    /// their predecessors is (`Home::Last`), for the merge.
    pub(crate) homes: Vec<Home>,
    pub(crate) last_cross: Vec<(u32, u32)>,
    /// When it was made (in a partition, when this one made it).
    pub(crate) made_at: SimTime,
}

impl std::fmt::Debug for LaterState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: usize = self.parts.iter().map(Vec::len).sum();
        write!(
            f,
            "LaterState {{ jobs: {}, parts: {parts} }}",
            self.jobs.len()
        )
    }
}

impl Part {
    /// Its records of one kind for the outputs (see `Record`), of
    /// workload `w`.
    fn records(&self, w: u32, kind: RecordKind) -> Box<dyn Iterator<Item = Record> + '_> {
        match kind {
            RecordKind::Flow => Box::new(self.flows.iter().map(|f| Record::Flow(f.clone()))),
            RecordKind::Row => Box::new(self.rows.iter().map(|r| Record::Row(r.clone()))),
            RecordKind::Copy => Box::new(self.copies(w)),
        }
    }

    /// Its NVLink copies' records.
    fn copies(&self, w: u32) -> impl Iterator<Item = Record> + '_ {
        self.graph
            .tasks
            .iter()
            .enumerate()
            .filter_map(move |(i, t)| match t.kind {
                TaskKind::Local { src, dst, bytes } if src != dst => Some(Record::Copy(CopyRow {
                    workload: w,
                    src,
                    dst,
                    bytes,
                    started: self.started[i],
                    done: self.done[i],
                })),
                _ => None,
            })
    }

    fn holds(&self, t: u32) -> bool {
        t >= self.graph.task_base && t - self.graph.task_base < self.graph.tasks.len() as u32
    }
}

impl LaterState {
    /// The state of `later`'s jobs, whose first iterations are in
    /// `graph` (their records in the runtime's `tasks.jobs`, in that order);
    /// `conns`: each connection's first QP.
    pub fn from_layout(
        later: Later,
        graph: &TaskGraph,
        eager_flows: u32,
        conns: Conns,
    ) -> LaterState {
        let n = later.jobs.len();
        let g = graph;
        let retired_below = later.jobs.iter().map(|j| j.layout.first.0).collect();
        LaterState {
            triggers: later
                .jobs
                .iter()
                .enumerate()
                .filter(|(_, j)| !j.gen.finished())
                .flat_map(|(i, j)| {
                    let next = j.gen.next();
                    let jobs = j.gen.ready().into_iter().map(move |t| (t, (i, next)));
                    let traces = j.gen.part_waits().map(move |(t, p)| (t, (i, p)));
                    jobs.chain(traces)
                })
                .collect(),
            job_index: later.jobs.iter().map(|j| j.job).collect(),
            lanes: GraphBuilder::lanes_of(g, later.stream_rings),
            start: (
                g.tasks.len() as u32,
                g.passes.len() as u32,
                eager_flows,
                later.jobs.first().map_or(later.end.3, |j| j.layout.first.3),
            ),
            jobs: later.jobs,
            parts: (0..n).map(|_| Vec::new()).collect(),
            extra: HashMap::default(),
            conns: conns.into_iter().collect(),
            failed: None,
            made: 0,
            spills: (0..n).map(|_| Default::default()).collect(),
            retired_below,
            kept: HashMap::default(),
            last_done: SimTime::ZERO,
            retired: 0,
            most_held: 0,
            done_retired: 0,
            read_failed: Default::default(),
            traces_cut: std::sync::OnceLock::new(),
        }
    }

    /// The part holding task `t`, if a later one does.
    pub fn part_of_task(&self, t: u32) -> Option<&Part> {
        if t < self.start.0 {
            return None;
        }
        self.parts.iter().flatten().find(|p| p.holds(t))
    }

    pub fn part_of_task_mut(&mut self, t: u32) -> Option<&mut Part> {
        if t < self.start.0 {
            return None;
        }
        self.parts.iter_mut().flatten().find(|p| p.holds(t))
    }

    /// The part holding transfer `f`, and its index there.
    pub fn part_of_flow(&self, f: u32) -> Option<(&Part, usize)> {
        if f < self.start.2 {
            return None;
        }
        self.parts
            .iter()
            .flatten()
            .find(|p| f >= p.flow_base && ((f - p.flow_base) as usize) < p.flows.len())
            .map(|p| (p, (f - p.flow_base) as usize))
    }

    pub fn part_of_flow_mut(&mut self, f: u32) -> Option<(&mut Part, usize)> {
        if f < self.start.2 {
            return None;
        }
        self.parts
            .iter_mut()
            .flatten()
            .find(|p| f >= p.flow_base && ((f - p.flow_base) as usize) < p.flows.len())
            .map(|p| {
                let i = (f - p.flow_base) as usize;
                (p, i)
            })
    }

    /// The part holding pass `p`, if a later one does.
    pub fn part_of_pass(&self, p: u32) -> Option<&Part> {
        if p < self.start.1 {
            return None;
        }
        self.parts
            .iter()
            .flatten()
            .find(|x| p >= x.graph.pass_base && p - x.graph.pass_base < x.graph.passes.len() as u32)
    }

    pub fn part_of_pass_mut(&mut self, p: u32) -> Option<&mut Part> {
        if p < self.start.1 {
            return None;
        }
        self.parts
            .iter_mut()
            .flatten()
            .find(|x| p >= x.graph.pass_base && p - x.graph.pass_base < x.graph.passes.len() as u32)
    }

    /// The pass whose messages include message `g`, among later parts.
    pub fn pass_of_message(&self, g: u64) -> Option<u32> {
        let part = self
            .parts
            .iter()
            .flatten()
            .find(|x| x.messages.contains(&g))?;
        let passes = &part.graph.passes;
        let i = passes.partition_point(|x| x.first <= g).saturating_sub(1);
        Some(part.graph.pass_base + i as u32)
    }

    /// The transfers of the iterations made, in number order.
    pub fn flows(&self) -> impl Iterator<Item = &FlowState> {
        self.parts.iter().flatten().flat_map(|p| &p.flows)
    }

    /// The parts made, in number order (job by job, iteration by
    /// iteration).
    pub fn parts(&self) -> impl Iterator<Item = &Part> {
        self.parts.iter().flatten()
    }

    pub(crate) fn parts_mut(&mut self) -> impl Iterator<Item = &mut Part> {
        self.parts.iter_mut().flatten()
    }

    /// The parts made with their job's workload entry, in number order.
    pub fn parts_of_workloads(&self) -> impl Iterator<Item = (u32, &Part)> {
        self.jobs
            .iter()
            .zip(&self.parts)
            .flat_map(|(j, parts)| parts.iter().map(move |p| (j.gen.workload, p)))
    }

    /// Whether later task `t` is of a forgotten iteration (and so done).
    pub(crate) fn retired(&self, t: u32) -> bool {
        self.jobs
            .iter()
            .zip(&self.retired_below)
            .any(|(j, &below)| j.layout.first.0 <= t && t < below)
    }

    /// When forgotten task `t`, which a record under way names, started
    /// and was done.
    pub fn kept(&self, t: u32) -> Option<(SimTime, SimTime)> {
        self.kept.get(&t).copied()
    }

    /// What the outputs list of every iteration made, of one kind, job by
    /// job, in number order: those forgotten as written out, then those
    /// under way. A record that cannot be read back is left out, and
    /// `read_failed` says so.
    pub fn records(&self, kind: RecordKind) -> impl Iterator<Item = Record> + '_ {
        self.spills
            .iter()
            .zip(&self.parts)
            .zip(&self.jobs)
            .flat_map(move |((spills, parts), job)| {
                let w = job.gen.workload;
                let forgotten = spills[kind as usize].read().filter_map(move |r| match r {
                    Ok(r) => Some(r),
                    Err(_) => {
                        self.read_failed
                            .store(true, std::sync::atomic::Ordering::Relaxed);
                        None
                    }
                });
                forgotten.chain(parts.iter().flat_map(move |p| p.records(w, kind)))
            })
    }

    /// Adds the network messages of jobs' later iterations (transfers,
    /// and pass connections' messages) to their workloads' counts in
    /// `out`.
    pub fn count_messages(&self, out: &mut [u64]) {
        let mut add = |w: u32, n: u64| {
            if let Some(m) = out.get_mut(w as usize) {
                *m += n;
            }
        };
        for s in self.spills.iter().flatten() {
            for (w, &n) in s.messages.iter().enumerate() {
                add(w as u32, n);
            }
        }
        for p in self.parts.iter().flatten() {
            for f in &p.flows {
                add(f.spec.workload, 1);
            }
            for r in p.rows.iter().filter(|r| r.qps > 0) {
                add(r.workload, r.planned);
            }
        }
    }

    /// Whether a forgotten iteration's records could not be kept or read
    /// back (the outputs miss them).
    pub fn records_lost(&self) -> bool {
        self.spills.iter().flatten().any(|s| s.lost)
            || self.read_failed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The job and place of the part holding task `t`, pass `p` or
    /// transfer `f` (whichever is given).
    fn locate(&self, what: Loc) -> Option<(usize, usize)> {
        self.parts.iter().enumerate().find_map(|(j, parts)| {
            let i = parts.iter().position(|x| match what {
                super::Loc::Task(t) => x.holds(t),
                super::Loc::Pass(p) => {
                    p >= x.graph.pass_base && p - x.graph.pass_base < x.graph.passes.len() as u32
                }
                super::Loc::Flow(f) => {
                    f >= x.flow_base && ((f - x.flow_base) as usize) < x.flows.len()
                }
            })?;
            Some((j, i))
        })
    }

    /// Once every partition's parts are absorbed: the ends of the parts
    /// (`Home::Last`) are done when their last predecessor was (`main`
    /// gives the done times of the graph's tasks); returns how many of
    /// their tasks are done.
    pub(crate) fn settle(&mut self, main: impl Fn(u32) -> Option<SimTime>) -> u64 {
        let mut done = self.done_retired;
        for j in 0..self.parts.len() {
            for i in 0..self.parts[j].len() {
                done += self.settle_part(j, i, &main);
            }
        }
        done
    }

    /// As `settle`, for job `j`'s part `i`.
    pub(crate) fn settle_part(
        &mut self,
        j: usize,
        i: usize,
        main: impl Fn(u32) -> Option<SimTime>,
    ) -> u64 {
        use super::homes::Home;
        let part = &self.parts[j][i];
        let base = part.graph.task_base;
        let n = part.graph.tasks.len();
        let mut last = vec![SimTime::ZERO; n];
        let mut left = part.graph.preds.clone();
        let mut edges: Vec<(u32, u32, SimTime)> = Vec::new();
        for x in base..base + n as u32 {
            for &y in part.graph.successors(x) {
                edges.push((x, y, part.done[(x - base) as usize]));
            }
        }
        for &(x, y) in &part.last_cross {
            let d = if x >= self.start.0 {
                self.part_of_task(x)
                    .map(|p| p.done[(x - p.graph.task_base) as usize])
                    .or(self.kept(x).map(|k| k.1))
            } else {
                main(x)
            };
            edges.push((x, y, d.unwrap_or(SimTime::MAX)));
        }
        for (_, y, d) in edges {
            let y = (y - base) as usize;
            if part.homes.get(y) == Some(&Home::Last) && d != SimTime::MAX {
                last[y] = last[y].max(d);
                left[y] -= 1;
            }
        }
        let part = &mut self.parts[j][i];
        for y in 0..n {
            if part.homes.get(y) == Some(&Home::Last) && left[y] == 0 {
                part.done[y] = last[y];
                part.started[y] = last[y];
            }
        }
        // Its tasks that wait for nothing began when the part was made:
        // as the first partition to make it did (one queue makes it
        // then), though the others made it later.
        let g = &part.graph;
        for (y, free) in g.waiting_for_nothing().into_iter().enumerate() {
            let t = &g.tasks[y];
            if free && t.lane == crate::workload::graph::NO_LANE && part.started[y] != SimTime::MAX
            {
                part.started[y] = t.not_before.max(part.made_at);
            }
        }
        part.done.iter().filter(|&&d| d != SimTime::MAX).count() as u64
    }

    /// Per job: how many of its oldest parts have nothing left to happen
    /// (in a partition, to its share of them).
    pub(crate) fn over(&self) -> Vec<u32> {
        self.parts
            .iter()
            .map(|parts| parts.iter().take_while(|p| p.open == 0).count() as u32)
            .collect()
    }

    /// A later iteration's task that begins on a host as soon as the
    /// iteration is made (`Layout::begins_when_made`), if a job has one.
    pub fn begins_when_made(&self) -> Option<(u32, crate::workload::graph::TaskKind)> {
        self.jobs.iter().find_map(|j| j.layout.begins_when_made)
    }

    /// Whether every iteration of every job has been made.
    pub fn all_made(&self) -> bool {
        self.jobs.iter().all(|j| j.gen.finished())
    }

    /// Whether every later part of the traces can be cut by host as the
    /// graph is (`tasks::homes_of`; `first`: where the graph's tasks run).
    /// A part that could not would stop a parallel run midway, so each is
    /// made apart and let go before the run, once.
    pub(crate) fn traces_cut(
        &self,
        topo: &crate::topology::Topology,
        routes: &crate::topology::routing::Routes,
        first: &[Home],
    ) -> Result<(), String> {
        self.traces_cut
            .get_or_init(|| self.cut_traces(topo, routes, first))
            .clone()
    }

    fn cut_traces(
        &self,
        topo: &crate::topology::Topology,
        routes: &crate::topology::routing::Routes,
        first: &[Home],
    ) -> Result<(), String> {
        // Where the tasks that later parts wait for run: a part's homes
        // hang on those of the tasks it waits for.
        let mut homes: HashMap<u32, Home> = HashMap::default();
        let start = self.start.0;
        for lj in self.jobs.iter().filter(|j| j.gen.is_trace()) {
            let waited: rustc_hash::FxHashSet<u32> = lj.gen.part_waits().map(|(t, _)| t).collect();
            // The lanes so far, apart from those the run goes on with.
            let mut lanes = GraphBuilder::part(Default::default(), &self.lanes);
            let each = |graph: TaskGraph,
                        flows: Vec<crate::workload::FlowSpec>,
                        first_of: crate::workload::jobs::Numbers,
                        _| {
                let mine = super::homes::homes_of(
                    &graph,
                    topo,
                    |f| flows.get(f.checked_sub(first_of.2)? as usize),
                    &graph.cross,
                    |x| {
                        if x < start {
                            first.get(x as usize).copied()
                        } else {
                            homes.get(&x).copied()
                        }
                    },
                )?;
                if let Some((t, kind)) = graph.begins_when_made() {
                    return Err(format!(
                        "its task {t} ({kind:?}) waits for nothing in its part and begins on a host or takes time"
                    ));
                }
                let base = graph.task_base;
                for (t, h) in (base..).zip(mine) {
                    if waited.contains(&t) {
                        homes.insert(t, h);
                    }
                }
                Ok(())
            };
            lj.gen
                .trial_parts(topo, routes, &mut lanes, lj.layout.first, each)
                .map_err(|why| format!("workload {}: {why}", lj.gen.workload))?;
        }
        Ok(())
    }

    /// In a partition of a parallel run: where later task `t` runs.
    pub(crate) fn home(&self, t: u32) -> Option<Home> {
        let part = self.part_of_task(t)?;
        part.homes.get((t - part.graph.task_base) as usize).copied()
    }

    /// Later tasks waiting for task `t`, which is done.
    pub fn take_extra(&mut self, t: u32) -> Option<Vec<u32>> {
        self.extra.remove(&t)
    }
}

impl Runtime {
    /// Task `t` is about to be done: if the next iteration of a job
    /// waits for it (it is a rank's last task of the job's newest
    /// iteration), that iteration is made first, so that `t` lets its
    /// tasks go as it would if it had been made before the run.
    pub(crate) fn later_due(&mut self, k: &mut dyn Kernel, t: u32) {
        let Some(&(j, upto)) = self.tasks.later.as_ref().and_then(|l| l.triggers.get(&t)) else {
            return;
        };
        // A job's trigger goes when its next iteration is made; a trace's
        // here, once every part that waits for `t` is made.
        self.tasks
            .later
            .as_mut()
            .expect("checked above")
            .triggers
            .remove(&t);
        let now = k.now();
        self.make_up_to(k, j, upto, now);
        // The other partitions of a parallel run make them too.
        if k.cut().is_some() {
            k.made(j as u32, upto, now);
        }
    }

    /// Makes job `j`'s iterations up to `upto`, if not yet made, as if
    /// at `at` (when the run reached them).
    pub(crate) fn make_up_to(&mut self, k: &mut dyn Kernel, j: usize, upto: u32, at: SimTime) {
        while self
            .tasks
            .later
            .as_ref()
            .is_some_and(|l| l.jobs[j].gen.next() <= upto && !l.jobs[j].gen.finished())
        {
            if let Err(why) = self.make_iteration(k, j, at) {
                let l = self.tasks.later.as_mut().expect("checked above");
                l.failed.get_or_insert(why);
                l.triggers.retain(|_, &mut (k, _)| k != j);
                return;
            }
        }
    }

    /// Makes job `j`'s next iteration and lets its tasks go, from `at`
    /// on.
    fn make_iteration(&mut self, k: &mut dyn Kernel, j: usize, at: SimTime) -> Result<(), String> {
        let mut l = self.tasks.later.take().expect("a later job");
        let made = self.make_part(k, &mut l, j);
        self.tasks.later = Some(l);
        let mut part = made?;
        if k.cut().is_some() {
            self.cut_part(k, &mut part)?;
        }
        self.tasks.later.as_mut().expect("a later job").made += 1;
        self.start_part(k, j, part, at);
        Ok(())
    }

    fn make_part(
        &mut self,
        k: &mut dyn Kernel,
        l: &mut LaterState,
        j: usize,
    ) -> Result<Part, String> {
        let lj = &mut l.jobs[j];
        let it = lj.gen.next();
        let numbers = lj.gen.numbers(&lj.layout, it);
        let sizes = lj.gen.sizes(&lj.layout, it);
        let mut builder = GraphBuilder::part(numbers, &l.lanes);
        let mut specs = Vec::new();
        // A trace's parts keep no job records.
        let mut none = crate::workload::training::JobRun::new(lj.gen.workload);
        let job = match l.job_index[j] {
            Some(i) => &mut self.tasks.jobs[i],
            None => &mut none,
        };
        let mut runs = Vec::new();
        lj.gen.iteration(
            k.topo(),
            k.routes(),
            &mut builder,
            &mut specs,
            job,
            &mut runs,
        )?;
        let next = builder.next_numbers(specs.len());
        let made = (
            next.0 - numbers.0,
            next.1 - numbers.1,
            next.2 - numbers.2,
            next.3 - numbers.3,
        );
        let laid = (sizes.tasks, sizes.passes, sizes.flows, sizes.messages);
        if made != laid || builder.lanes() != l.lanes.lanes() {
            return Err(format!(
                "iteration {it} of workload {} took (tasks, passes, transfers, messages) {made:?}, not the {laid:?} laid out for it",
                lj.gen.workload
            ));
        }
        // A job's next iteration waits for this one's last tasks; a
        // trace's triggers were all set at the start.
        if !lj.gen.is_trace() {
            l.triggers.retain(|_, &mut (k, _)| k != j);
            if !lj.gen.finished() {
                let next = lj.gen.next();
                l.triggers
                    .extend(lj.gen.ready().into_iter().map(|t| (t, (j, next))));
            }
        }
        let run0 = self.tasks.collectives.len();
        self.tasks.collectives.extend(runs);
        let runs = run0..self.tasks.collectives.len();
        let graph = builder.build();
        let mtu = k.scenario().transport.mtu;
        let mut flows = Vec::with_capacity(specs.len());
        for spec in specs {
            let key = (
                spec.workload,
                spec.src.0,
                spec.dst.0,
                spec.conn.unwrap_or(0),
            );
            let first = *l
                .conns
                .get(&key)
                .ok_or("a transfer on a connection that has no QPs")?;
            let n_qps = spec.n_qps();
            let pkts = (0..n_qps)
                .map(|i| packets_of(super::flow::share(spec.bytes, n_qps, i), mtu))
                .sum();
            flows.push(FlowState::new(spec, first, n_qps, true, pkts));
        }
        let mut flow_task = vec![super::flow::NO_TASK; flows.len()];
        for (i, t) in graph.tasks.iter().enumerate() {
            match t.kind {
                TaskKind::Net(f) => {
                    flow_task[(f - numbers.2) as usize] = graph.task_base + i as u32
                }
                TaskKind::Acked(f) => self.tasks.add_acked(f, graph.task_base + i as u32),
                _ => {}
            }
        }
        let mut first_qp = Vec::with_capacity(graph.passes.len());
        for pass in &graph.passes {
            let mut firsts = Vec::with_capacity(pass.conns.len());
            for c in 0..pass.conns.len() as u32 {
                let spec = pass
                    .spec(k.topo(), pass.first_on(c))
                    .filter(|_| pass.sends_on(c) > 0);
                let first = match spec {
                    Some(spec) => {
                        let key = (
                            spec.workload,
                            spec.src.0,
                            spec.dst.0,
                            spec.conn.unwrap_or(0),
                        );
                        *l.conns
                            .get(&key)
                            .ok_or("a pass connection that has no QPs")?
                    }
                    None => u32::MAX,
                };
                firsts.push(first);
            }
            first_qp.push(firsts);
        }
        let n = graph.tasks.len();
        Ok(Part {
            open: 0,
            runs,
            iteration: it,
            left: graph.preds.clone(),
            started: vec![SimTime::MAX; n],
            done: vec![SimTime::MAX; n],
            flow_base: numbers.2,
            flow_sent_qps: vec![0; flows.len()],
            flow_task,
            flows,
            first_qp,
            row_of: Vec::new(),
            rows: Vec::new(),
            channels: Vec::new(),
            messages: numbers.3..next.3,
            homes: Vec::new(),
            last_cross: Vec::new(),
            made_at: SimTime::MAX,
            graph,
        })
    }

    /// Puts `part` among job `j`'s and lets go, from `at` on, the tasks
    /// that wait for nothing left.
    fn start_part(&mut self, k: &mut dyn Kernel, j: usize, mut part: Part, at: SimTime) {
        part.made_at = at;
        let mut cross = self.keep_part(k, j, part);
        if k.cut().is_some() {
            cross = self.cut_part_rows(k, j, cross);
        }
        let l = self.tasks.later.as_ref().expect("a later job");
        let part = l.parts[j].last().expect("kept above");
        let base = part.graph.task_base;
        // What the new tasks wait for among those before them.
        let mut ready: Vec<u32> = (part.left.iter().enumerate())
            .filter(|(_, &left)| left == 0)
            .map(|(i, _)| base + i as u32)
            .collect();
        for (a, b) in cross {
            if self.tasks.is_done(a) {
                if self.tasks.release_one(b) {
                    ready.push(b);
                }
            } else {
                let l = self.tasks.later.as_mut().expect("a later job");
                l.extra.entry(a).or_default().push(b);
            }
        }
        ready.sort_unstable();
        ready.dedup();
        for t in ready {
            let at = self.tasks.task(t).not_before.max(at);
            k.at(at, Due::TaskReady(t));
        }
    }

    /// Puts `part` among job `j`'s, with its rows and its transfers'
    /// ideal times; returns its edges from earlier tasks.
    fn keep_part(&mut self, k: &mut dyn Kernel, j: usize, mut part: Part) -> Vec<(u32, u32)> {
        // Its passes' rows, latency without the wire, and streams.
        let (rows, row_of) = super::pass_rows::pass_rows(
            k.topo(),
            &mut self.passes,
            &part.graph.passes,
            &part.first_qp,
            // Counted in what the run offers when laid out.
            false,
        );
        part.open = part.graph.tasks.len() as u64 + 2 * part.flows.len() as u64;
        for r in &rows {
            part.open += if r.qps > 0 { 2 * r.planned } else { r.planned };
        }
        part.rows = rows;
        part.row_of = row_of;
        part.channels = crate::workload::pass::channels_of(&part.graph.passes);
        for i in 0..part.flows.len() {
            let f = part.flow_base + i as u32;
            let mut cache = std::mem::take(&mut self.ideal_cache);
            part.flows[i].ideal_fct = k.ideal_and_work(&part.flows[i], f, &mut cache).0;
            self.ideal_cache = cache;
        }
        let cross = std::mem::take(&mut part.graph.cross);
        let pass_base = part.graph.pass_base;
        let passes = part.graph.passes.len() as u32;
        let l = self.tasks.later.as_mut().expect("a later job");
        l.parts[j].push(part);
        let held = l.parts.iter().map(Vec::len).sum::<usize>() as u64;
        l.most_held = l.most_held.max(held);
        for p in pass_base..pass_base + passes {
            let net = self.unloaded_net_hop_of(k, p);
            let nvlink = self.tasks.nvlink.latency;
            let pass = self.tasks.pass_mut(p).expect("made above");
            pass.latency = pass.latency.without_wire(nvlink, net);
        }
        cross
    }

    /// Flow `f`, if a later part holds it.
    pub(crate) fn later_flow_mut(&mut self, f: FlowId) -> Option<&mut FlowState> {
        let l = self.tasks.later.as_mut()?;
        let (part, i) = l.part_of_flow_mut(f.0)?;
        Some(&mut part.flows[i])
    }
}

impl Runtime {
    /// Task `t` of a later iteration is done: as `task_done` does for the
    /// graph's tasks.
    pub(crate) fn later_task_done(&mut self, k: &mut dyn Kernel, t: u32) {
        let now = k.now();
        let (task, succ) = {
            let part = self
                .tasks
                .later
                .as_mut()
                .and_then(|l| l.part_of_task_mut(t))
                .expect("a task of a later iteration");
            let i = (t - part.graph.task_base) as usize;
            part.done[i] = now;
            (part.graph.tasks[i], part.graph.successors(t).to_vec())
        };
        self.tasks.tasks_done += 1;
        if task.lane != crate::workload::graph::NO_LANE && !matches!(task.kind, TaskKind::Net(_)) {
            self.lane_free(k, task.lane);
        }
        for s in succ {
            if self.tasks.release_one(s) {
                self.task_ready(k, s);
            }
        }
        self.later_successors(k, t);
        self.later_progress(k, super::Loc::Task(t), 1);
    }

    /// Tasks of later iterations that wait for task `t`, which is done.
    pub(crate) fn later_successors(&mut self, k: &mut dyn Kernel, t: u32) {
        let Some(succ) = self.tasks.later.as_mut().and_then(|l| l.take_extra(t)) else {
            return;
        };
        for s in succ {
            if self.tasks.release_one(s) {
                self.task_ready(k, s);
            }
        }
    }
}

impl Runtime {
    /// `n` of what a later part waits for before it can be forgotten has
    /// happened to the task, pass or transfer `what` (if a later part
    /// holds it): once nothing is left there, nor in the parts before it,
    /// they are forgotten.
    pub(crate) fn later_progress(&mut self, k: &mut dyn Kernel, what: Loc, n: u64) {
        let Some(l) = self.tasks.later.as_mut() else {
            return;
        };
        let Some((j, i)) = l.locate(what) else {
            return;
        };
        let part = &mut l.parts[j][i];
        part.open -= n;
        // A partition of a parallel run sees only its share of a part:
        // the partitions forget a part together, once over in each
        // (`parallel::retire_over`).
        if part.open == 0 && i == 0 && k.cut().is_none() {
            self.retire_parts(k, j);
        }
    }

    /// Forgets job `j`'s oldest parts while nothing is left to happen in
    /// them.
    fn retire_parts(&mut self, k: &mut dyn Kernel, j: usize) {
        let mut l = self.tasks.later.take().expect("a later job");
        // Nothing left to happen: its tasks done, its transfers and
        // messages over (counted, and the tasks checked once more).
        while l.parts[j]
            .first()
            .is_some_and(|p| p.open == 0 && p.done.iter().all(|&d| d != SimTime::MAX))
        {
            let part = l.parts[j].remove(0);
            self.retire(k, &mut l, j, part);
        }
        self.tasks.later = Some(l);
    }

    /// Forgets every part job `j` holds, oldest first, whatever is left
    /// in them: for when the run is over.
    fn retire_held(&mut self, k: &mut dyn Kernel, j: usize) {
        let mut l = self.tasks.later.take().expect("a later job");
        while !l.parts[j].is_empty() {
            let part = l.parts[j].remove(0);
            self.retire(k, &mut l, j, part);
        }
        self.tasks.later = Some(l);
    }

    /// Works out what the outputs need of `part`, job `j`'s oldest, and
    /// writes out its rows (see the module's note).
    pub(crate) fn retire(&mut self, k: &mut dyn Kernel, l: &mut LaterState, j: usize, part: Part) {
        let base = part.graph.task_base;
        let it = part.iteration;
        let in_part = |t: u32| {
            (t >= base && ((t - base) as usize) < part.done.len()).then(|| {
                (
                    part.started[(t - base) as usize],
                    part.done[(t - base) as usize],
                )
            })
        };
        let tasks = &self.tasks;
        let kept = &l.kept;
        let times = |t: u32| {
            in_part(t)
                .or_else(|| kept.get(&t).copied())
                .unwrap_or((tasks.started_at(t), tasks.done_at(t)))
        };
        let done = |t: u32| Some(times(t).1).filter(|&d| d != SimTime::MAX);
        let started = |t: u32| times(t).0;
        let w = l.jobs[j].gen.workload as usize;
        // The job's records of the iteration (a trace has none).
        let records = l.job_index[j].map(|ji| {
            let ranks = match &k.scenario().workloads[w].pattern {
                crate::workload::Pattern::Training(t) => t.gpus.len(),
                crate::workload::Pattern::Model(m) => m.gpus.len(),
                _ => 0,
            };
            let job = &tasks.jobs[ji];
            let span = job
                .iterations
                .get(it as usize)
                .and_then(|&(a, b)| Some((done(a)?, done(b)?)));
            let step = job.step(it, &started, &done, ranks);
            let checkpoint_ps = job
                .checkpoints
                .iter()
                .find(|c| c.0 == it)
                .and_then(|&(_, a, b)| Some((done(b)? - done(a)?).0));
            // Times of its tasks that records of later iterations name.
            let mut keep: Vec<(u32, (SimTime, SimTime))> = job
                .comm
                .iter()
                .filter(|c| c.iteration > it)
                .filter_map(|c| Some((c.from, in_part(c.from)?)))
                .collect();
            keep.sort_unstable_by_key(|k| k.0);
            keep.dedup_by_key(|k| k.0);
            let resolved = crate::workload::training::Resolved {
                span,
                step,
                checkpoint_ps,
            };
            (ji, resolved, keep)
        });
        let runs: Vec<(SimTime, SimTime)> = self.tasks.collectives[part.runs.clone()]
            .iter()
            .map(|c| {
                let (a, b) = (times(c.start).1, times(c.end).1);
                (a, b)
            })
            .collect();
        for (c, r) in self.tasks.collectives[part.runs.clone()]
            .iter_mut()
            .zip(runs)
        {
            c.resolved = Some(r);
        }
        if let Some((ji, resolved, keep)) = records {
            let job = &mut self.tasks.jobs[ji];
            job.resolved.insert(it, resolved);
            job.kernels.retain(|k| k.1 != it);
            job.comm.retain(|c| c.iteration != it);
            job.checkpoints.retain(|c| c.0 != it);
            // Those this job's earlier parts kept are named no more (the
            // other jobs' are theirs).
            let first = l.jobs[j].layout.first.0;
            l.kept.retain(|&t, _| t < first || t >= base);
            l.kept.extend(keep);
        }
        // In a partition of a parallel run: the times of its tasks that
        // the ends of later parts wait for, which the merge works out.
        let ends: Vec<u32> = (l.parts[j].iter())
            .flat_map(|p| &p.last_cross)
            .filter(|&&(x, _)| part.holds(x))
            .map(|&(x, _)| x)
            .collect();
        for x in ends {
            let i = (x - base) as usize;
            l.kept.insert(x, (part.started[i], part.done[i]));
        }
        // Its rows, written out.
        let spills = &mut l.spills[j];
        let mut spill = |r: Record| spills[r.kind() as usize].push(r);
        for f in part.flows {
            spill(Record::Flow(f));
        }
        for r in part.rows {
            spill(Record::Row(r));
        }
        for (i, t) in part.graph.tasks.iter().enumerate() {
            match t.kind {
                TaskKind::Local { src, dst, bytes } if src != dst => {
                    spill(Record::Copy(CopyRow {
                        workload: w as u32,
                        src,
                        dst,
                        bytes,
                        started: part.started[i],
                        done: part.done[i],
                    }));
                }
                TaskKind::Acked(f) => self.tasks.remove_acked(f),
                _ => {}
            }
        }
        for s in &mut l.spills[j] {
            s.flush();
        }
        if let Some(&d) = part.done.iter().filter(|&&d| d != SimTime::MAX).max() {
            l.last_done = l.last_done.max(d);
        }
        l.retired_below[j] = base + part.graph.tasks.len() as u32;
        l.retired += 1;
        l.done_retired += part.done.iter().filter(|&&d| d != SimTime::MAX).count() as u64;
    }
}

impl Runtime {
    /// In a partition other than the first of a parallel run: forgets
    /// job `j`'s oldest part, whose share partition 0 took to work out
    /// what the outputs need of it (`parallel::retire_over`).
    pub(crate) fn forget(&mut self, l: &mut LaterState, j: usize, part: Part) {
        let it = part.iteration;
        if let Some(ji) = l.job_index[j] {
            let job = &mut self.tasks.jobs[ji];
            job.kernels.retain(|k| k.1 != it);
            job.comm.retain(|c| c.iteration != it);
            job.checkpoints.retain(|c| c.0 != it);
        }
        for t in &part.graph.tasks {
            if let TaskKind::Acked(f) = t.kind {
                self.tasks.remove_acked(f);
            }
        }
        l.retired_below[j] = part.graph.task_base + part.graph.tasks.len() as u32;
        l.retired += 1;
    }
}

impl Runtime {
    /// The run is over before every job's iterations were made: the rest
    /// are made (never run), so that the outputs list their collectives
    /// and transfers, not started, as a run with every iteration made
    /// before it does. Nothing more happens to any part, so each is
    /// forgotten as soon as it is made, the parts held before it first:
    /// memory holds one part at a time, not every one the run did not
    /// reach.
    pub(crate) fn make_rest(&mut self, k: &mut dyn Kernel) {
        let Some(jobs) = self.tasks.later.as_ref().map(|l| l.jobs.len()) else {
            return;
        };
        for j in 0..jobs {
            if self
                .tasks
                .later
                .as_ref()
                .is_some_and(|l| !l.jobs[j].gen.finished() && l.failed.is_none())
            {
                self.retire_held(k, j);
            }
            while self
                .tasks
                .later
                .as_ref()
                .is_some_and(|l| !l.jobs[j].gen.finished() && l.failed.is_none())
            {
                let mut l = self.tasks.later.take().expect("checked above");
                let made = self.make_part(k, &mut l, j);
                l.made += u64::from(made.is_ok());
                self.tasks.later = Some(l);
                match made {
                    Ok(part) => {
                        // A run with it made before would have let its
                        // tasks that wait for nothing go, an event each
                        // (joins, done at once; acknowledgements, done
                        // when their transfer is).
                        let now = k.now();
                        let events = part
                            .graph
                            .tasks
                            .iter()
                            .zip(&part.left)
                            .filter(|(t, &left)| left == 0 && t.not_before <= now)
                            .count() as u64;
                        k.count(Count::Events(events));
                        self.keep_part(k, j, part);
                        self.retire_held(k, j);
                    }
                    Err(why) => {
                        let l = self.tasks.later.as_mut().expect("put back above");
                        l.failed.get_or_insert(why);
                    }
                }
            }
        }
    }
}

impl Runtime {
    /// In a partition: cuts `part`, a job's iteration just made, as the
    /// graph was cut (`make_partition`): where each task runs, the tasks
    /// this partition begins, and the tasks and transfers it sees done.
    pub(crate) fn cut_part(&mut self, k: &mut dyn Kernel, part: &mut Part) -> Result<(), String> {
        let p = k.cut().expect("a partition");
        let later = self.tasks.later.as_deref().expect("a later job");
        let start = later.start.0;
        let flow_base = part.flow_base;
        let homes = super::homes::homes_of(
            &part.graph,
            k.topo(),
            |f| {
                let i = f.checked_sub(flow_base)? as usize;
                part.flows.get(i).map(|f| &f.spec)
            },
            &part.graph.cross,
            |x| {
                if x < start {
                    p.homes.get(x as usize).copied()
                } else {
                    later.home(x)
                }
            },
        )
        .map_err(|why| format!("a job's iteration cannot be cut by host: {why}"))?;
        let mine = |h: u32| p.host_part[h as usize] == p.me;
        let mut own = 0;
        for (i, h) in homes.iter().enumerate() {
            match *h {
                Home::Host { begin, done } => {
                    own += u64::from(mine(done));
                    if !mine(begin) {
                        part.left[i] = u32::MAX;
                    }
                }
                Home::Everywhere => own += 1,
                Home::Last => part.left[i] = u32::MAX,
            }
        }
        let host_of = |nic: NicId| p.host_part[k.topo().nics[nic.idx()].host.idx()];
        let flows = part
            .flows
            .iter()
            .filter(|f| host_of(f.spec.src_nic) == p.me)
            .count() as u64;
        // `plan` refuses a cut when a job's layout has such a task; a part
        // is checked once more, as it is made.
        if let Some((t, kind)) = part.graph.begins_when_made() {
            return Err(format!(
                "a job's iteration cannot be cut by host: its task {t} ({kind:?}) waits for nothing in it and begins on a host or takes time"
            ));
        }
        part.homes = homes;
        self.tasks.own_total += own;
        k.count(Count::ToFinish(flows));
        Ok(())
    }

    /// In a partition, once job `j`'s newest part is kept: counts the
    /// pass messages it sends, and keeps of the part's edges from earlier
    /// tasks (`cross`) those to tasks it begins, and for the merge those
    /// to the part's ends.
    pub(crate) fn cut_part_rows(
        &mut self,
        k: &mut dyn Kernel,
        j: usize,
        cross: Vec<(u32, u32)>,
    ) -> Vec<(u32, u32)> {
        let p = k.cut().expect("a partition");
        let mine = |h: u32| p.host_part[h as usize] == p.me;
        let topo = k.topo();
        let l = self.tasks.later.as_deref_mut().expect("a later job");
        let part = l.parts[j].last_mut().expect("kept");
        let base = part.graph.task_base;
        let planned: u64 = part
            .rows
            .iter()
            .filter(|r| r.qps > 0 && mine(topo.gpus[r.src.idx()].host.0))
            .map(|r| r.planned)
            .sum();
        // What happens here before it can be forgotten (as `keep_part`
        // counts for the whole): its tasks done here, the sides of its
        // transfers and of its pass messages that are here.
        let nic_mine = |nic: NicId| mine(topo.nics[nic.idx()].host.0);
        let gpu_mine = |g: crate::topology::GpuId| mine(topo.gpus[g.idx()].host.0);
        let tasks = part
            .homes
            .iter()
            .filter(|h| match **h {
                Home::Host { done, .. } => mine(done),
                Home::Everywhere => true,
                Home::Last => false,
            })
            .count() as u64;
        let flows: u64 = part
            .flows
            .iter()
            .map(|f| u64::from(nic_mine(f.spec.src_nic)) + u64::from(nic_mine(f.spec.dst_nic)))
            .sum();
        let rows: u64 = part
            .rows
            .iter()
            .map(|r| {
                let halves = u64::from(gpu_mine(r.src)) + u64::from(r.qps > 0 && gpu_mine(r.dst));
                halves * r.planned
            })
            .sum();
        part.open = tasks + flows + rows;
        let mut keep = Vec::with_capacity(cross.len());
        for (a, b) in cross {
            match part.homes[(b - base) as usize] {
                Home::Host { begin, .. } if mine(begin) => keep.push((a, b)),
                Home::Everywhere => keep.push((a, b)),
                Home::Last => part.last_cross.push((a, b)),
                Home::Host { .. } => {}
            }
        }
        k.count(Count::ToFinish(planned));
        keep
    }
}
