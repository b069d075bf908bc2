//! Where each task runs when a parallel run cuts the fabric into
//! partitions by host (`Home`), worked out from the task graph, the
//! transfers' ends and the topology (`homes_of`).

use crate::topology::Topology;
use crate::workload::graph::{TaskGraph, TaskKind, NO_GPU};

/// Where a task runs when the fabric is cut into partitions by host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Home {
    /// Begins on host `begin` and is done on host `done`: a transfer
    /// begins at its sender and is done when its receiver has the last
    /// byte; any other task begins and is done on one host.
    Host { begin: u32, done: u32 },
    /// Runs on no lane and waits for nothing, or only for tasks that run
    /// everywhere: done at its time wherever something waits for it, so
    /// every partition runs it.
    Everywhere,
    /// Waits for tasks of several hosts and nothing waits for it (the end
    /// of a collective): done when the last of them is, worked out once
    /// the partitions are merged.
    Last,
}

/// Where each task of `g` runs when the fabric is cut by host (`Home`),
/// or why the graph cannot be cut: a task that waits, with no transfer
/// between, for a task of another host (a barrier across hosts that
/// something waits for), since a partition would learn of it only a
/// window later. `flow` gives a transfer's spec by number; `cross` are
/// `g`'s edges from tasks before it, whose homes `before` gives (a job's
/// iteration made as the run reaches it).
pub fn homes_of<'a>(
    g: &TaskGraph,
    topo: &Topology,
    flow: impl Fn(u32) -> Option<&'a crate::workload::FlowSpec>,
    cross: &[(u32, u32)],
    before: impl Fn(u32) -> Option<Home>,
) -> Result<Vec<Home>, String> {
    let n = g.tasks.len();
    let base = g.task_base;
    let gpu_host = |gpu: u32| topo.gpus[gpu as usize].host.0;
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    for x in base..base + n as u32 {
        for &s in g.successors(x) {
            preds[(s - base) as usize].push(x);
        }
    }
    for &(a, b) in cross {
        preds[(b - base) as usize].push(a);
    }
    let mut homes: Vec<Home> = Vec::with_capacity(n);
    let done_of = |h: Home| match h {
        Home::Host { done, .. } => Some(done),
        _ => None,
    };
    let no_flow = |f: u32| format!("task of transfer {f}, which does not exist");
    for (i, task) in g.tasks.iter().enumerate() {
        let t = base + i as u32;
        let lane_gpu = g
            .lane_gpu
            .get(task.lane as usize)
            .copied()
            .unwrap_or(NO_GPU);
        let home = match task.kind {
            TaskKind::Net(f) => {
                let spec = flow(f).ok_or_else(|| no_flow(f))?;
                Home::Host {
                    begin: gpu_host(spec.src.0),
                    done: gpu_host(spec.dst.0),
                }
            }
            TaskKind::Local { src: gpu, .. } | TaskKind::Switch { gpu, .. } => {
                let h = gpu_host(gpu.0);
                Home::Host { begin: h, done: h }
            }
            TaskKind::Acked(f) => {
                let h = gpu_host(flow(f).ok_or_else(|| no_flow(f))?.src.0);
                Home::Host { begin: h, done: h }
            }
            TaskKind::Enter { pass, pos } | TaskKind::Exit { pass, pos } => {
                let pass = g.pass(pass).ok_or("a task of a pass that does not exist")?;
                let h = gpu_host(pass.order[pos as usize].0);
                Home::Host { begin: h, done: h }
            }
            _ if lane_gpu != NO_GPU => {
                let h = gpu_host(lane_gpu);
                Home::Host { begin: h, done: h }
            }
            _ => {
                let home_of = |x: u32| {
                    if x >= base {
                        Some(homes[(x - base) as usize])
                    } else {
                        before(x)
                    }
                };
                let mut hosts: Vec<u32> = preds[i]
                    .iter()
                    .filter_map(|&x| home_of(x).and_then(done_of))
                    .collect();
                hosts.sort_unstable();
                hosts.dedup();
                match hosts[..] {
                    // Nothing to wait for but time, here or on every
                    // host alike.
                    [] => Home::Everywhere,
                    [h] => Home::Host { begin: h, done: h },
                    _ if g.successors(t).is_empty() => Home::Last,
                    _ => {
                        return Err(format!(
                            "task {t} waits for tasks of hosts {} and {} with no transfer between, and other tasks wait for it (a barrier across hosts)",
                            hosts[0], hosts[1]
                        ))
                    }
                }
            }
        };
        homes.push(home);
    }
    let home_of = |x: u32| {
        if x >= base {
            Some(homes[(x - base) as usize])
        } else {
            before(x)
        }
    };
    let edges = (base..base + n as u32)
        .flat_map(|x| g.successors(x).iter().map(move |&y| (x, y)))
        .chain(cross.iter().copied());
    for (x, y) in edges {
        // Within a graph an end has no successors; an edge from one is
        // from an earlier part, which took it for an end.
        if home_of(x) == Some(Home::Last) {
            return Err(format!(
                "task {x} waits for tasks of several hosts with no transfer between, and task {y} of a later part waits for it (a barrier across hosts)"
            ));
        }
        let Some(done) = home_of(x).and_then(done_of) else {
            continue;
        };
        if let Home::Host { begin, .. } = homes[(y - base) as usize] {
            if begin != done {
                return Err(format!(
                    "task {y} on host {begin} waits for task {x} done on host {done} with no transfer between"
                ));
            }
        }
    }
    Ok(homes)
}
