//! The k-ary fat-tree (Al-Fares et al., SIGCOMM 2008): k pods of k/2 edge
//! and k/2 aggregation switches, (k/2)^2 core switches, k^3/4 hosts. It is
//! the common ground on which packet-level simulators are compared.

use super::*;

pub fn fat_tree(spec: &TopologySpec) -> Result<Topology, TopologyError> {
    let k = spec.k;
    if k < 2 || !k.is_multiple_of(2) {
        return Err(TopologyError::Invalid(format!(
            "fat-tree k must be even and at least 2, got {k}"
        )));
    }
    let half = k / 2;
    let mut b = TopoBuilder::new(TopologyKind::FatTree, spec);
    let cores: Vec<SwitchId> = (0..half * half)
        .map(|c| b.add_switch(format!("core{c}"), 2))
        .collect();
    for pod in 0..k {
        let edges: Vec<SwitchId> = (0..half)
            .map(|e| b.add_switch(format!("pod{pod}-edge{e}"), 0))
            .collect();
        let aggs: Vec<SwitchId> = (0..half)
            .map(|a| b.add_switch(format!("pod{pod}-agg{a}"), 1))
            .collect();
        for &edge in &edges {
            for _ in 0..half {
                let host = b.add_host(spec.gpus_per_host, spec.nics_per_host);
                for nic in b.nic_ids(host) {
                    for _ in 0..spec.nic_ports {
                        b.connect_nic(nic, edge);
                    }
                }
            }
            for &agg in &aggs {
                b.connect_switches(edge, agg, spec.uplink_speed, 1);
            }
        }
        for (j, &agg) in aggs.iter().enumerate() {
            for c in 0..half {
                let core = cores[j * half as usize + c as usize];
                b.connect_switches(agg, core, spec.uplink_speed, 1);
            }
        }
    }
    Ok(b.finish())
}
