//! Training jobs: a communicator that repeats an iteration N times. An
//! iteration is a list of phases; in each, every GPU computes for a time
//! (its kernels one at a time, on its own compute lane), then the phase's
//! collectives run one after another (gradient buckets, as NCCL runs
//! them on one stream). Each rank moves on when its own part is done: its
//! compute starts once it has received all of the last collective, and
//! it joins the next collective once its compute is done, without a
//! barrier across ranks (so a job's ranks can be simulated in different
//! partitions). Between the bursts the network is idle for real, which
//! is what flowlet balancers see. Every `every` iterations a job may
//! write a checkpoint: each GPU writes its shard to one of the storage
//! GPUs (round robin) and starts its next iteration once its own write
//! is acknowledged.

use super::collective::{self, Algorithm, Collective, CollectiveRun, Emitter, Op};
use crate::topology::GpuId;
use crate::units::SimTime;

#[derive(Clone, Debug)]
pub struct Phase {
    pub compute: SimTime,
    pub op: Op,
    pub algorithm: Algorithm,
    /// One collective per bucket, in order.
    pub buckets: Vec<u64>,
}

#[derive(Clone, Debug)]
pub struct Checkpoint {
    pub every: u32,
    /// Bytes each GPU writes.
    pub bytes: u64,
    pub storage: Vec<GpuId>,
}

#[derive(Clone, Debug)]
pub struct Training {
    pub gpus: Vec<GpuId>,
    pub iterations: u32,
    pub phases: Vec<Phase>,
    pub checkpoint: Option<Checkpoint>,
    pub channels: u32,
    pub chunk: u64,
    pub pxn: bool,
    pub protocol: collective::Protocol,
    /// What the scenario left to NCCL's tuner.
    pub auto: collective::Auto,
}

/// A job in the graph: the tasks that mark each iteration's start and end.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct JobRun {
    pub workload: u32,
    pub iterations: Vec<(u32, u32)>,
    /// Its checkpoint writes (start, end) after iteration `i`.
    pub checkpoints: Vec<(u32, u32, u32)>,
    /// Each rank's communication, for the breakdown by parallelism.
    pub comm: Vec<CommSpan>,
    /// Each rank's kernels: (rank, iteration, task).
    pub kernels: Vec<(u32, u32, u32)>,
    /// Iterations whose tasks are forgotten (made as the run went and
    /// done, `runtime::later`): what the outputs need of each, worked out
    /// before; their kernels and communication are no longer listed.
    #[serde(skip)]
    pub resolved: std::collections::BTreeMap<u32, Resolved>,
}

/// What the outputs need of an iteration whose tasks are forgotten.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    /// Its start and end, if it finished.
    pub span: Option<(SimTime, SimTime)>,
    pub step: Option<StepReport>,
    /// The time its checkpoint took, if it wrote one.
    pub checkpoint_ps: Option<u64>,
}

impl JobRun {
    /// A job of workload entry `workload` (its collectives are those of
    /// the run's list with this workload).
    pub fn new(workload: u32) -> JobRun {
        JobRun {
            workload,
            iterations: Vec::new(),
            checkpoints: Vec::new(),
            comm: Vec::new(),
            kernels: Vec::new(),
            resolved: Default::default(),
        }
    }

    /// Iteration `it` broken down by parallelism, for `ranks` ranks, from
    /// when its tasks started and were done (`None`: not done); `None` if
    /// it did not finish.
    pub fn step(
        &self,
        it: u32,
        started: &dyn Fn(u32) -> SimTime,
        done: &dyn Fn(u32) -> Option<SimTime>,
        ranks: usize,
    ) -> Option<StepReport> {
        let &(a, b) = self.iterations.get(it as usize)?;
        let (a, b) = (done(a)?, done(b)?);
        let mut kernels: Vec<Vec<(u64, u64)>> = vec![Vec::new(); ranks];
        for &(r, _, k) in self.kernels.iter().filter(|x| x.1 == it) {
            if let Some(end) = done(k) {
                kernels[r as usize].push((started(k).0, end.0));
            }
        }
        let kernels: Vec<Vec<(u64, u64)>> = kernels.into_iter().map(merged).collect();
        let compute: u64 = kernels.iter().map(|k| covered(k)).sum();
        let dims = Dim::ALL
            .iter()
            .filter_map(|&d| {
                let mut spans: Vec<Vec<(u64, u64)>> = vec![Vec::new(); ranks];
                let mut bytes = 0;
                for c in self.comm.iter().filter(|c| c.iteration == it && c.dim == d) {
                    bytes += c.bytes;
                    if let (Some(x), Some(y)) = (done(c.from), done(c.to)) {
                        spans[c.rank as usize].push((x.0, y.0.max(x.0)));
                    }
                }
                if bytes == 0 {
                    return None;
                }
                let (mut comm, mut exposed) = (0, 0);
                for (s, k) in spans.into_iter().zip(&kernels) {
                    let s = merged(s);
                    comm += covered(&s);
                    exposed += outside(&s, k);
                }
                let n = ranks.max(1) as f64;
                Some(DimReport {
                    dim: d.name(),
                    comm_ps: comm as f64 / n,
                    exposed_ps: exposed as f64 / n,
                    bytes,
                })
            })
            .collect();
        Some(StepReport {
            iteration: it,
            step_ps: b.0 - a.0,
            compute_ps: compute as f64 / ranks.max(1) as f64,
            dims,
        })
    }
}

/// One iteration of a job: its time, the mean GPU's compute, and per
/// dimension of parallelism its communication.
#[derive(serde::Serialize, Debug, Clone)]
pub struct StepReport {
    pub iteration: u32,
    pub step_ps: u64,
    /// Time a rank's GPU runs kernels, averaged over the ranks.
    pub compute_ps: f64,
    pub dims: Vec<DimReport>,
}

/// A dimension's communication in one iteration, averaged over the ranks:
/// time with some of its collectives or transfers under way for the rank,
/// and the part of that time its GPU runs no kernel (exposed); bytes are
/// the collectives' sizes (nccl-tests') and the transfers' bytes, summed.
#[derive(serde::Serialize, Debug, Clone)]
pub struct DimReport {
    pub dim: &'static str,
    pub comm_ps: f64,
    pub exposed_ps: f64,
    pub bytes: u64,
}

/// Intervals merged where they overlap, in order.
fn merged(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn covered(v: &[(u64, u64)]) -> u64 {
    v.iter().map(|&(a, b)| b - a).sum()
}

/// Time of merged intervals `a` not within merged intervals `b`.
fn outside(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let (mut j, mut inside) = (0, 0);
    for &(x, y) in a {
        while j < b.len() && b[j].1 <= x {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].0 < y {
            inside += y.min(b[k].1) - x.max(b[k].0);
            k += 1;
        }
    }
    covered(a) - inside
}

/// A rank's part in a collective or a pipeline transfer: from when task
/// `from` is done (it joins) to when task `to` is (its part is over).
/// `bytes` is the collective's size (nccl-tests') on one rank of it
/// only, and a transfer's on its sender, so that they sum once.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct CommSpan {
    pub rank: u32,
    pub iteration: u32,
    pub dim: Dim,
    pub from: u32,
    pub to: u32,
    pub bytes: u64,
}

/// Where a training job's ranks are between iterations: each rank's last
/// task, and the next iteration to add. A job is added iteration by
/// iteration (`workload::jobs`), so that iterations after the first can
/// be made as the run reaches them.
#[derive(Clone, Debug)]
pub struct TrainingGen {
    ready: Vec<u32>,
    pub next: u32,
}

impl TrainingGen {
    /// Each rank's last task so far.
    pub fn ready(&self) -> &[u32] {
        &self.ready
    }

    /// The job's start, at `start`.
    pub fn start(e: &mut Emitter, t: &Training, start: SimTime) -> TrainingGen {
        // Each rank goes on as soon as its own part of what came before is
        // done (its compute, its part of the last collective), as a rank of
        // a framework does; only a checkpoint waits for every rank.
        let begin = e.join(&[], start);
        TrainingGen {
            ready: vec![begin; t.gpus.len()],
            next: 0,
        }
    }

    /// Adds the next iteration; its collectives are appended to `runs`.
    pub fn iteration(
        &mut self,
        e: &mut Emitter,
        t: &Training,
        job: &mut JobRun,
        runs: &mut Vec<CollectiveRun>,
    ) -> Result<(), String> {
        let it = self.next;
        self.next += 1;
        let ready = &mut self.ready;
        let it_start = e.join(ready, SimTime::ZERO);
        for p in &t.phases {
            if p.compute > SimTime::ZERO {
                for (rank, (r, &g)) in ready.iter_mut().zip(&t.gpus).enumerate() {
                    let lane = e.graph.gpu_lane(g);
                    *r = e.delay(p.compute, Some(lane), &[*r]);
                    job.kernels.push((rank as u32, it, *r));
                }
            }
            for &bytes in &p.buckets {
                let c = Collective {
                    op: p.op,
                    algorithm: p.algorithm,
                    gpus: t.gpus.clone(),
                    bytes,
                    channels: t.channels,
                    chunk: t.chunk,
                    pxn: t.pxn,
                    root: 0,
                    across: Algorithm::Ring,
                    protocol: t.protocol,
                    auto: t.auto,
                };
                let (mut run, ends) = collective::emit_per_rank(e, &c, ready)?;
                run.iteration = Some(it);
                for (rank, (&from, &to)) in ready.iter().zip(&ends).enumerate() {
                    job.comm.push(CommSpan {
                        rank: rank as u32,
                        iteration: it,
                        dim: Dim::Dp,
                        from,
                        to,
                        bytes: if rank == 0 { bytes } else { 0 },
                    });
                }
                *ready = ends;
                runs.push(run);
            }
        }
        let it_end = e.join(ready, SimTime::ZERO);
        job.iterations.push((it_start, it_end));
        if let Some(ck) = &t.checkpoint {
            if (it + 1).is_multiple_of(ck.every) {
                // Every rank writes its shard once its iteration is done,
                // and goes on once its own write is acknowledged.
                let mut writes = Vec::with_capacity(t.gpus.len());
                for (i, (&g, r)) in t.gpus.iter().zip(ready.iter_mut()).enumerate() {
                    let to = ck.storage[i % ck.storage.len()];
                    let w = e.send(g, to, ck.bytes, 0, &[*r])?;
                    writes.push(w);
                    *r = e.acked(w);
                }
                let done = e.join(&writes, SimTime::ZERO);
                job.checkpoints.push((it, it_end, done));
            }
        }
        Ok(())
    }
}

/// A dimension of parallelism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Dim {
    Tp,
    Pp,
    Dp,
    Ep,
    Cp,
}

impl Dim {
    pub const ALL: [Dim; 5] = [Dim::Tp, Dim::Pp, Dim::Dp, Dim::Ep, Dim::Cp];

    pub fn name(self) -> &'static str {
        match self {
            Dim::Tp => "tp",
            Dim::Pp => "pp",
            Dim::Dp => "dp",
            Dim::Ep => "ep",
            Dim::Cp => "cp",
        }
    }
}
