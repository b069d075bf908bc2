//! A ring of switches, one host on each: not a fabric anyone builds for
//! training, but the smallest where shortest-path routes form a cyclic
//! buffer dependency. With lossless traffic two hops around the ring, every
//! switch-to-switch link carries two flows and the pauses can close into a
//! PFC deadlock; `examples/lossless/pfc-deadlock.toml` builds one.

use super::builder::TopoBuilder;
use super::{SwitchId, Topology, TopologyError, TopologyKind, TopologySpec};

pub fn ring(spec: &TopologySpec) -> Result<Topology, TopologyError> {
    let n = spec.hosts;
    if n < 3 {
        return Err(TopologyError::Invalid(format!(
            "a ring needs at least 3 switches (hosts), got {n}"
        )));
    }
    let mut b = TopoBuilder::new(TopologyKind::Ring, spec);
    let switches: Vec<SwitchId> = (0..n)
        .map(|i| b.add_switch(format!("ring{i}"), 0))
        .collect();
    for &sw in &switches {
        let host = b.add_host(spec.gpus_per_host, spec.nics_per_host);
        for nic in b.nic_ids(host) {
            for _ in 0..spec.nic_ports {
                b.connect_nic(nic, sw);
            }
        }
    }
    for i in 0..n as usize {
        b.connect_switches(
            switches[i],
            switches[(i + 1) % n as usize],
            spec.uplink_speed,
            1,
        );
    }
    Ok(b.finish())
}
