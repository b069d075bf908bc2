//! Single-tier rail designs (seed 002): one rail switch with a VLAN per
//! rail, dual-rail switches with dual-port NICs, and rail-only fabrics with
//! one switch per rail and no spine.
//!
//! MLAG / EVPN ESI multihoming of dual-port NICs is modelled as what the
//! data plane sees: the NIC has one address and the two switches are both
//! one hop from it. The MLAG peer link and its control plane are left out.

use super::*;

fn add_hosts(b: &mut TopoBuilder, spec: &TopologySpec) -> Vec<HostId> {
    (0..spec.hosts)
        .map(|_| b.add_host(spec.gpus_per_host, spec.nics_per_host))
        .collect()
}

/// One switch; ports grouped by host; rail r of every host in VLAN r.
pub fn single_rail(spec: &TopologySpec) -> Result<Topology, TopologyError> {
    let mut b = TopoBuilder::new(TopologyKind::SingleRail, spec);
    let hosts = add_hosts(&mut b, spec);
    let sw = b.add_switch("rail-sw".into(), 0);
    for h in hosts {
        for nic in b.nic_ids(h) {
            for _ in 0..spec.nic_ports {
                b.connect_nic(nic, sw);
            }
        }
    }
    b.set_vlan_rails(true);
    Ok(b.finish())
}

/// Two switches; port 0 of every NIC on switch A, port 1 on switch B.
pub fn dual_rail(spec: &TopologySpec) -> Result<Topology, TopologyError> {
    if spec.nic_ports != 2 {
        return Err(TopologyError::Invalid(format!(
            "dual-rail needs dual-port NICs (nic_ports = 2), got nic_ports = {}",
            spec.nic_ports
        )));
    }
    let mut b = TopoBuilder::new(TopologyKind::DualRail, spec);
    let hosts = add_hosts(&mut b, spec);
    let sw = [
        b.add_switch("rail-a".into(), 0),
        b.add_switch("rail-b".into(), 0),
    ];
    for h in hosts {
        for nic in b.nic_ids(h) {
            b.connect_nic(nic, sw[0]);
            b.connect_nic(nic, sw[1]);
        }
    }
    b.set_vlan_rails(true);
    Ok(b.finish())
}

/// One switch per rail (per NIC port plane), no spine: cross-rail traffic
/// has no network path.
pub fn rail_only(spec: &TopologySpec) -> Result<Topology, TopologyError> {
    let mut b = TopoBuilder::new(TopologyKind::RailOnly, spec);
    let hosts = add_hosts(&mut b, spec);
    let mut rail_sw = Vec::new();
    for r in 0..spec.nics_per_host {
        let planes: Vec<SwitchId> = (0..spec.nic_ports)
            .map(|p| {
                let name = if spec.nic_ports == 1 {
                    format!("rail{r}")
                } else {
                    format!("rail{r}-{}", (b'a' + p as u8) as char)
                };
                b.add_switch(name, 0)
            })
            .collect();
        rail_sw.push(planes);
    }
    for h in hosts {
        for (r, nic) in b.nic_ids(h).into_iter().enumerate() {
            for &sw in &rail_sw[r] {
                b.connect_nic(nic, sw);
            }
        }
    }
    Ok(b.finish())
}
