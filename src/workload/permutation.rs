//! Random permutation traffic: every GPU sends to exactly one other GPU
//! and receives from exactly one, never within its own host.
//!
//! The targets are a seeded shuffle repaired pair by pair: wherever a GPU
//! would send to its own host (or, rail-aligned, off its rail), its target
//! is swapped with another whose swap fixes both. The result depends only
//! on the seed stream.

use super::network_path;
use crate::rng::Stream;
use crate::topology::routing::Routes;
use crate::topology::{GpuId, Topology};

pub fn pairs(
    topo: &Topology,
    routes: &Routes,
    gpus: &[GpuId],
    rail_aligned: bool,
    rng: &mut Stream,
) -> Result<Vec<(GpuId, GpuId)>, String> {
    if gpus.len() < 2 {
        return Err("a permutation needs at least two GPUs".into());
    }
    let rail = |g: GpuId| topo.nics[topo.gpus[g.idx()].nic.idx()].rail;
    // Rail-aligned: a separate permutation among the GPUs of each rail.
    let mut groups: Vec<(u32, Vec<GpuId>)> = Vec::new();
    for &g in gpus {
        let key = if rail_aligned { rail(g) } else { 0 };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(g),
            None => groups.push((key, vec![g])),
        }
    }
    let mut pairs = Vec::with_capacity(gpus.len());
    for (_, members) in &groups {
        pairs.extend(derange(topo, members, rng)?);
    }
    for &(a, b) in &pairs {
        network_path(topo, routes, a, b)?;
    }
    Ok(pairs)
}

/// Pairs every GPU of `gpus` with a distinct other one on another host.
fn derange(
    topo: &Topology,
    gpus: &[GpuId],
    rng: &mut Stream,
) -> Result<Vec<(GpuId, GpuId)>, String> {
    let host = |g: GpuId| topo.gpus[g.idx()].host;
    let ok = |a: GpuId, b: GpuId| host(a) != host(b);
    let mut targets = gpus.to_vec();
    rng.shuffle(&mut targets);
    let n = targets.len();
    for i in 0..n {
        if ok(gpus[i], targets[i]) {
            continue;
        }
        let start = rng.below(n as u64) as usize;
        let fix = (0..n)
            .map(|d| (start + d) % n)
            .find(|&j| ok(gpus[i], targets[j]) && ok(gpus[j], targets[i]));
        match fix {
            Some(j) => targets.swap(i, j),
            None => {
                return Err(format!(
                    "cannot pair {} with a GPU on another host among the {} GPUs it may send to",
                    topo.gpu_name(gpus[i]),
                    n
                ))
            }
        }
    }
    Ok(gpus.iter().copied().zip(targets).collect())
}
