//! Incremental construction of a `Topology`: add hosts and switches, then
//! connect them; every connection makes two ports and one link.

use super::*;

pub struct TopoBuilder {
    topo: Topology,
    nic_speed: Rate,
    delay: SimTime,
}

impl TopoBuilder {
    pub fn new(kind: TopologyKind, spec: &TopologySpec) -> Self {
        TopoBuilder {
            topo: Topology {
                kind,
                switches: Vec::new(),
                nics: Vec::new(),
                hosts: Vec::new(),
                gpus: Vec::new(),
                ports: Vec::new(),
                links: Vec::new(),
                vlan_rails: false,
                gpus_per_tray: 0,
                vlan_id: 0,
                switch_radix: spec.switch_radix,
            },
            nic_speed: spec.nic_speed,
            delay: spec.link_delay,
        }
    }

    /// Adds a host with `gpus` GPUs and `nics` NICs (no ports yet).
    pub fn add_host(&mut self, gpus: u32, nics: u32) -> HostId {
        let host = HostId(self.topo.hosts.len() as u32);
        let first_nic = self.topo.nics.len() as u32;
        let nic_ids: Vec<NicId> = (0..nics).map(|i| NicId(first_nic + i)).collect();
        for (i, _) in nic_ids.iter().enumerate() {
            let n = self.topo.nics.len() as u32;
            self.topo.nics.push(Nic {
                name: format!("host{}/nic{}", host.0, i),
                host,
                rail: i as u32,
                ports: Vec::new(),
                ip: nic_ip(NicId(n)),
            });
        }
        let mut gpu_ids = Vec::new();
        for g in 0..gpus {
            let id = GpuId(self.topo.gpus.len() as u32);
            // Shared NICs: GPUs are spread evenly over the host's NICs.
            let nic = nic_ids[(g as u64 * nics as u64 / gpus as u64) as usize];
            self.topo.gpus.push(Gpu {
                host,
                local: g,
                nic,
            });
            gpu_ids.push(id);
        }
        self.topo.hosts.push(Host {
            gpus: gpu_ids,
            nics: nic_ids,
        });
        host
    }

    pub fn add_switch(&mut self, name: String, tier: u8) -> SwitchId {
        self.topo.switches.push(Switch {
            name,
            tier,
            ports: Vec::new(),
        });
        SwitchId(self.topo.switches.len() as u32 - 1)
    }

    fn add_port(&mut self, owner: Owner, link: LinkId, rate: Rate) -> PortId {
        let id = PortId(self.topo.ports.len() as u32);
        self.topo.ports.push(Port {
            owner,
            peer: id,
            link,
            rate,
            delay: self.delay,
        });
        match owner {
            Owner::Switch(s) => self.topo.switches[s.idx()].ports.push(id),
            Owner::Nic(n) => self.topo.nics[n.idx()].ports.push(id),
        }
        id
    }

    fn connect(&mut self, a: Owner, b: Owner, rate: Rate, tier: u8) {
        let link = LinkId(self.topo.links.len() as u32);
        let pa = self.add_port(a, link, rate);
        let pb = self.add_port(b, link, rate);
        self.topo.ports[pa.idx()].peer = pb;
        self.topo.ports[pb.idx()].peer = pa;
        self.topo.links.push(Link { a: pa, b: pb, tier });
    }

    /// Connects one port of a NIC to a switch at NIC speed.
    pub fn connect_nic(&mut self, nic: NicId, switch: SwitchId) {
        self.connect(Owner::Nic(nic), Owner::Switch(switch), self.nic_speed, 0);
    }

    /// Connects two switches with `members` parallel links (a port channel
    /// when more than one).
    pub fn connect_switches(&mut self, lower: SwitchId, upper: SwitchId, rate: Rate, members: u32) {
        let tier = self.topo.switches[upper.idx()].tier;
        for _ in 0..members {
            self.connect(Owner::Switch(lower), Owner::Switch(upper), rate, tier);
        }
    }

    pub fn nic_ids(&self, host: HostId) -> Vec<NicId> {
        self.topo.hosts[host.idx()].nics.clone()
    }

    pub fn set_vlan_rails(&mut self, on: bool) {
        self.topo.vlan_rails = on;
    }

    pub fn finish(self) -> Topology {
        self.topo
    }
}
