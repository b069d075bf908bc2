//! Rail-optimized Clos fabrics (seed 002): a two-tier (three-stage) pod in
//! which NIC r of every host in a segment lands on the leaf for rail r, all
//! leaves fully meshed to the spines; and a three-tier (five-stage)
//! multi-pod fabric whose pod spines are meshed to super-spines: to all
//! of them, or in planes (spine j of every pod to plane j's).
//!
//! Leaf-to-spine and spine-to-super-spine connections may be port channels
//! (several member links between the same pair of switches).

use super::*;

/// Builds one pod's hosts, leaves and spines; returns the spines.
fn build_pod(b: &mut TopoBuilder, spec: &TopologySpec, prefix: &str) -> Vec<SwitchId> {
    let segments = spec.hosts.div_ceil(spec.hosts_per_leaf);
    let rail_groups = spec.nics_per_host.div_ceil(spec.rails_per_leaf);
    let planes = spec.nic_ports;
    let mut leaves = Vec::new();
    for seg in 0..segments {
        for rg in 0..rail_groups {
            for p in 0..planes {
                let i = (seg * rail_groups + rg) * planes + p;
                leaves.push(b.add_switch(format!("{prefix}leaf{i}"), 0));
            }
        }
    }
    for h in 0..spec.hosts {
        let host = b.add_host(spec.gpus_per_host, spec.nics_per_host);
        let seg = h / spec.hosts_per_leaf;
        for (r, nic) in b.nic_ids(host).into_iter().enumerate() {
            let rg = r as u32 / spec.rails_per_leaf;
            for p in 0..planes {
                let leaf = leaves[((seg * rail_groups + rg) * planes + p) as usize];
                b.connect_nic(nic, leaf);
            }
        }
    }
    let spines: Vec<SwitchId> = (0..spec.spines)
        .map(|j| b.add_switch(format!("{prefix}spine{j}"), 1))
        .collect();
    for &leaf in &leaves {
        for &spine in &spines {
            b.connect_switches(leaf, spine, spec.uplink_speed, spec.uplinks_per_spine);
        }
    }
    spines
}

pub fn rail_optimized(spec: &TopologySpec) -> Result<Topology, TopologyError> {
    let mut b = TopoBuilder::new(TopologyKind::RailOptimized, spec);
    build_pod(&mut b, spec, "");
    Ok(b.finish())
}

pub fn multi_pod(spec: &TopologySpec) -> Result<Topology, TopologyError> {
    let mut b = TopoBuilder::new(TopologyKind::MultiPod, spec);
    let pods: Vec<Vec<SwitchId>> = (0..spec.pods)
        .map(|p| build_pod(&mut b, spec, &format!("pod{p}-")))
        .collect();
    let supers: Vec<SwitchId> = (0..spec.super_spines)
        .map(|j| b.add_switch(format!("super{j}"), 2))
        .collect();
    // Plane j mod planes of super-spines serves spine j of every pod.
    let planes = spec.super_spine_planes.max(1) as usize;
    let per_plane = supers.len() / planes;
    for spines in &pods {
        for (j, &spine) in spines.iter().enumerate() {
            let plane = j % planes;
            for &sup in &supers[plane * per_plane..(plane + 1) * per_plane] {
                b.connect_switches(
                    spine,
                    sup,
                    spec.spine_uplink_speed,
                    spec.spine_uplinks_per_super_spine,
                );
            }
        }
    }
    Ok(b.finish())
}
