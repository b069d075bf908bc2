//! `fabricsim nccl`: NCCL's tuner's choices by size for a communicator.

use super::common::load;
use fabricsim::out;
use std::path::Path;

/// `fabricsim nccl`: NCCL's tuner's table for a communicator of the
/// scenario.
pub(crate) fn nccl(
    path: Option<&Path>,
    sets: &[String],
    op: &str,
    workload: Option<usize>,
    group: Option<&str>,
) -> Result<(), String> {
    use fabricsim::workload::collective::{comm_shape, Op};
    use fabricsim::workload::model::Dim;
    use fabricsim::workload::tuner::Host;
    use fabricsim::workload::Pattern;
    let op = Op::parse(op)
        .filter(|o| *o != Op::AllToAll)
        .ok_or_else(|| {
            format!(
                "--op: got \"{op}\", expected all-reduce, all-gather, reduce-scatter or broadcast"
            )
        })?;
    let p = load(path, sets)?;
    let ws = &p.scenario.workloads;
    let host_arch = p.scenario.host.arch;
    // The first TP, DP or EP group of a model job: places 0.. of that
    // dimension, the others at 0.
    let dim = match group {
        None => None,
        Some("tp") => Some(Dim::Tp),
        Some("dp") => Some(Dim::Dp),
        Some("ep") => Some(Dim::Ep),
        Some("cp") => Some(Dim::Cp),
        Some(other) => {
            return Err(format!(
                "--group: got \"{other}\", expected tp, dp, ep or cp"
            ))
        }
    };
    let comm = |w: &fabricsim::workload::Workload| match (&w.pattern, dim) {
        (Pattern::Model(m), Some(d)) => {
            let p = &m.parallel;
            let ranks: Vec<u64> = match d {
                Dim::Tp => (0..p.tp).map(|i| m.rank_at(0, i)).collect(),
                Dim::Dp => (0..m.data_ranks())
                    .map(|j| m.rank_at(0, p.tp * j))
                    .collect(),
                Dim::Cp => (0..p.cp).map(|c| m.rank_at(0, p.tp * c)).collect(),
                _ => (0..p.ep).map(|j| m.rank_at(0, p.tp * j)).collect(),
            };
            let gpus = ranks.iter().map(|&r| m.gpus[r as usize]).collect();
            Some((gpus, m.gpu.arch))
        }
        (_, Some(_)) => None,
        (Pattern::Collective(c), None) => Some((c.gpus.clone(), host_arch)),
        (Pattern::Training(t), None) => Some((t.gpus.clone(), host_arch)),
        (Pattern::Chakra(t), None) => Some((t.1.gpus.clone(), host_arch)),
        (Pattern::Model(m), None) => Some((m.gpus.clone(), m.gpu.arch)),
        _ => None,
    };
    let what = if dim.is_some() {
        "a model workload (--group)"
    } else {
        "a collective, training, model or Chakra workload"
    };
    let (gpus, arch) = match workload {
        Some(n) => {
            let w = ws.get(n).ok_or_else(|| {
                format!(
                    "--workload: got {n}, expected 0 to {}",
                    ws.len().saturating_sub(1)
                )
            })?;
            comm(w).ok_or_else(|| format!("--workload: entry {n} is not {what}"))?
        }
        None if dim.is_some() => ws
            .iter()
            .find_map(comm)
            .ok_or_else(|| "--group: the scenario has no model workload".to_string())?,
        None => ws.iter().find_map(comm).unwrap_or_else(|| {
            let all = (0..p.topology.gpus.len() as u32)
                .map(fabricsim::topology::GpuId)
                .collect();
            (all, host_arch)
        }),
    };
    if gpus.len() < 2 {
        return Err("the communicator has fewer than 2 GPUs: nothing to tune".into());
    }
    let host = Host {
        nvlink_bytes_per_s: p.scenario.host.nvlink_bytes_per_s,
        pcie_bytes_per_s: p.scenario.host.pcie_bytes_per_s,
        arch,
        nvls: p.scenario.host.nvls,
    };
    out!("{}", comm_shape(&p.topology, &host, &gpus).table(op));
    Ok(())
}
