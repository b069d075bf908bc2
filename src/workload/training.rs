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
    /// Its collectives: indices into the run's list of collectives.
    pub collectives: std::ops::Range<usize>,
    /// Its checkpoint writes (start, end) after iteration `i`.
    pub checkpoints: Vec<(u32, u32, u32)>,
    /// Each rank's communication, for the breakdown by parallelism.
    pub comm: Vec<CommSpan>,
    /// Each rank's kernels: (rank, iteration, task).
    pub kernels: Vec<(u32, u32, u32)>,
}

impl JobRun {
    /// A job of workload entry `workload` whose collectives will start at
    /// index `first` of the run's list.
    pub fn new(workload: u32, first: usize) -> JobRun {
        JobRun {
            workload,
            iterations: Vec::new(),
            collectives: first..first,
            checkpoints: Vec::new(),
            comm: Vec::new(),
            kernels: Vec::new(),
        }
    }
}

/// A rank's part in a collective or a pipeline transfer: from when task
/// `from` is done (it joins) to when task `to` is (its part is over).
/// `bytes` is the collective's size (nccl-tests') on one rank of it
/// only, and a transfer's on its sender, so that they sum once.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct CommSpan {
    pub rank: u32,
    pub iteration: u32,
    pub dim: super::model::Dim,
    pub from: u32,
    pub to: u32,
    pub bytes: u64,
}

/// Adds the job to the graph, starting at `start`; its collectives are
/// appended to `runs`.
pub fn emit(
    e: &mut Emitter,
    t: &Training,
    start: SimTime,
    runs: &mut Vec<CollectiveRun>,
) -> Result<JobRun, String> {
    let first = runs.len();
    let mut job = JobRun::new(e.workload, first);
    // Each rank goes on as soon as its own part of what came before is
    // done (its compute, its part of the last collective), as a rank of
    // a framework does; only a checkpoint waits for every rank.
    let begin = e.join(&[], start);
    let mut ready = vec![begin; t.gpus.len()];
    for it in 0..t.iterations {
        let it_start = e.join(&ready, SimTime::ZERO);
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
                let (mut run, ends) = collective::emit_per_rank(e, &c, &ready)?;
                run.iteration = Some(it);
                for (rank, (&from, &to)) in ready.iter().zip(&ends).enumerate() {
                    job.comm.push(CommSpan {
                        rank: rank as u32,
                        iteration: it,
                        dim: super::model::Dim::Dp,
                        from,
                        to,
                        bytes: if rank == 0 { bytes } else { 0 },
                    });
                }
                ready = ends;
                runs.push(run);
            }
        }
        let it_end = e.join(&ready, SimTime::ZERO);
        job.iterations.push((it_start, it_end));
        if let Some(ck) = &t.checkpoint {
            if (it + 1) % ck.every == 0 {
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
    }
    job.collectives = first..runs.len();
    Ok(job)
}
