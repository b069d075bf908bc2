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
    let host = |g: GpuId| topo.gpus[g.idx()].host;
    let rail = |g: GpuId| topo.nics[topo.gpus[g.idx()].nic.idx()].rail;
    let ok = |a: GpuId, b: GpuId| host(a) != host(b) && (!rail_aligned || rail(a) == rail(b));

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
                    "cannot pair {} with a GPU on another host{}",
                    topo.gpu_name(gpus[i]),
                    if rail_aligned { " on its rail" } else { "" }
                ))
            }
        }
    }
    let pairs: Vec<(GpuId, GpuId)> = gpus.iter().copied().zip(targets).collect();
    for &(a, b) in &pairs {
        network_path(topo, routes, a, b)?;
    }
    Ok(pairs)
}
