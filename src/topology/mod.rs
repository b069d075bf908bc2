//! The physical fabric: hosts with GPUs and NICs, switches in tiers, and
//! full-duplex links between ports, plus the builders for every topology
//! family and the routing tables derived from it.
//!
//! A topology is plain data (arenas of switches, NICs, ports and links,
//! indexed by typed ids); it has no behaviour. The builders in this folder
//! produce it from a `TopologySpec`; `routing` turns it into equal-cost
//! groups; `summary` describes it for `fabricsim topo`. Intra-host fabrics
//! (NVLink, PCIe) are not modelled here yet.

mod builder;
mod clos;
mod fat_tree;
pub mod partition;
mod rails;
mod ring;
pub mod routing;
pub mod summary;

pub use builder::TopoBuilder;

use crate::units::{Rate, SimTime};

macro_rules! id_type {
    ($($(#[$m:meta])* $name:ident),*) => {$(
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        pub struct $name(pub u32);
        impl $name {
            #[inline]
            pub fn idx(self) -> usize {
                self.0 as usize
            }
        }
    )*};
}

id_type!(
    /// A switch in `Topology::switches`.
    SwitchId,
    /// A NIC in `Topology::nics`; the unit of addressing (one IP per NIC).
    NicId,
    /// A port of a switch or a NIC, in `Topology::ports`.
    PortId,
    /// A full-duplex link (two ports), in `Topology::links`.
    LinkId,
    /// A GPU, numbered host-major (host 0's GPUs first).
    GpuId,
    /// A host (GPU server).
    HostId,
    /// A reliable-connected queue pair (both ends share the id).
    QpId,
    /// A transfer (one RDMA Write split over one or more QPs).
    FlowId
);

/// The IPv4 address of a NIC: 10.0.0.0/8, one per NIC, skipping .0.
pub fn nic_ip(n: NicId) -> u32 {
    0x0A00_0000 + n.0 + 1
}

/// Which device owns a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Owner {
    Switch(SwitchId),
    Nic(NicId),
}

/// The family a topology was built from, with its tier names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopologyKind {
    SingleRail,
    DualRail,
    RailOnly,
    RailOptimized,
    MultiPod,
    FatTree,
    Ring,
}

impl TopologyKind {
    pub fn name(self) -> &'static str {
        match self {
            TopologyKind::SingleRail => "single-rail",
            TopologyKind::DualRail => "dual-rail",
            TopologyKind::RailOnly => "rail-only",
            TopologyKind::RailOptimized => "rail-optimized",
            TopologyKind::MultiPod => "multi-pod",
            TopologyKind::FatTree => "fat-tree",
            TopologyKind::Ring => "ring",
        }
    }

    /// Names of switch tiers 0, 1, 2 (bottom up).
    pub fn tier_names(self) -> [&'static str; 3] {
        match self {
            TopologyKind::FatTree => ["edge", "aggregation", "core"],
            TopologyKind::Ring => ["ring", "-", "-"],
            _ => ["leaf", "spine", "super-spine"],
        }
    }
}

/// Everything a builder needs, already validated and in units.
#[derive(Clone, Debug)]
pub struct TopologySpec {
    pub kind: TopologyKind,
    /// Hosts in the fabric (per pod for multi-pod; ignored by fat-tree,
    /// which has k^3/4).
    pub hosts: u32,
    pub gpus_per_host: u32,
    /// NICs per host; equal to `gpus_per_host` for NIC-per-GPU, fewer for
    /// shared NICs (GPU g uses NIC g * nics / gpus).
    pub nics_per_host: u32,
    pub nic_ports: u32,
    pub nic_speed: Rate,
    /// Hosts under one leaf group (rail-optimized, multi-pod).
    pub hosts_per_leaf: u32,
    /// Rails (NIC indices) carried by one leaf.
    pub rails_per_leaf: u32,
    pub spines: u32,
    pub uplink_speed: Rate,
    /// Port-channel members between each leaf and each spine.
    pub uplinks_per_spine: u32,
    pub pods: u32,
    pub super_spines: u32,
    pub spine_uplink_speed: Rate,
    pub spine_uplinks_per_super_spine: u32,
    /// Super-spine planes: spine j of every pod connects only to the
    /// super-spines of plane j mod planes (1: to every super-spine).
    pub super_spine_planes: u32,
    /// Fat-tree arity (even).
    pub k: u32,
    pub link_delay: SimTime,
    pub switch_radix: Option<u32>,
}

#[derive(Clone, Debug)]
pub struct Switch {
    pub name: String,
    pub tier: u8,
    pub ports: Vec<PortId>,
}

#[derive(Clone, Debug)]
pub struct Nic {
    pub name: String,
    pub host: HostId,
    /// Index of the NIC within its host, which is also its rail.
    pub rail: u32,
    pub ports: Vec<PortId>,
    pub ip: u32,
}

#[derive(Clone, Debug)]
pub struct Host {
    pub gpus: Vec<GpuId>,
    pub nics: Vec<NicId>,
}

#[derive(Clone, Copy, Debug)]
pub struct Gpu {
    pub host: HostId,
    /// Index within the host (0..gpus_per_host).
    pub local: u32,
    pub nic: NicId,
}

#[derive(Clone, Copy, Debug)]
pub struct Port {
    pub owner: Owner,
    /// The port at the other end of the link.
    pub peer: PortId,
    pub link: LinkId,
    pub rate: Rate,
    pub delay: SimTime,
}

#[derive(Clone, Copy, Debug)]
pub struct Link {
    /// The two ends; `a` is the lower tier (the NIC for host links).
    pub a: PortId,
    pub b: PortId,
    /// 0 = host link, 1 = tier0-tier1, 2 = tier1-tier2.
    pub tier: u8,
}

/// Most ports a fabric may have (the event queue's keys tell this many
/// apart; see `engine::queue`).
pub const MAX_PORTS: usize = 1 << 24;

#[derive(Clone, Debug)]
pub struct Topology {
    pub kind: TopologyKind,
    pub switches: Vec<Switch>,
    pub nics: Vec<Nic>,
    pub hosts: Vec<Host>,
    pub gpus: Vec<Gpu>,
    pub ports: Vec<Port>,
    pub links: Vec<Link>,
    /// Rails are separate layer-2 domains (a VLAN per rail, no routing
    /// between them): traffic only flows between NICs of the same rail.
    pub vlan_rails: bool,
    /// GPUs per compute tray inside a host (0: the host is one board;
    /// from `[host]`), which the fabric map draws.
    pub gpus_per_tray: u32,
    /// The VLAN of every NIC where rails are not VLANs: 0 when frames
    /// are untagged, else `[qos] vlan_id`.
    pub vlan_id: u16,
    pub switch_radix: Option<u32>,
}

/// A topology that cannot be built as asked.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("switch {switch} needs {used} ports but switch_radix is {radix} ({excess} too many)")]
    RadixExceeded {
        switch: String,
        used: u32,
        radix: u32,
        excess: u32,
    },
    #[error("{0}")]
    Invalid(String),
}

impl Topology {
    pub fn build(spec: &TopologySpec) -> Result<Topology, TopologyError> {
        let topo = match spec.kind {
            TopologyKind::SingleRail => rails::single_rail(spec)?,
            TopologyKind::DualRail => rails::dual_rail(spec)?,
            TopologyKind::RailOnly => rails::rail_only(spec)?,
            TopologyKind::RailOptimized => clos::rail_optimized(spec)?,
            TopologyKind::MultiPod => clos::multi_pod(spec)?,
            TopologyKind::FatTree => fat_tree::fat_tree(spec)?,
            TopologyKind::Ring => ring::ring(spec)?,
        };
        topo.check_radix()?;
        Ok(topo)
    }

    fn check_radix(&self) -> Result<(), TopologyError> {
        let Some(radix) = self.switch_radix else {
            return Ok(());
        };
        // Report the switch that overflows most, so the message tells the
        // user how far off the design is.
        let worst = self
            .switches
            .iter()
            .filter(|s| s.ports.len() as u32 > radix)
            .rev()
            .max_by_key(|s| s.ports.len());
        match worst {
            Some(s) => Err(TopologyError::RadixExceeded {
                switch: s.name.clone(),
                used: s.ports.len() as u32,
                radix,
                excess: s.ports.len() as u32 - radix,
            }),
            None => Ok(()),
        }
    }

    pub fn port(&self, p: PortId) -> &Port {
        &self.ports[p.idx()]
    }

    /// The switch at the other end of a NIC port.
    pub fn attached_switch(&self, nic_port: PortId) -> Option<SwitchId> {
        match self.port(self.port(nic_port).peer).owner {
            Owner::Switch(s) => Some(s),
            Owner::Nic(_) => None,
        }
    }

    /// Human-readable name of a port's owner.
    /// The VLAN ID a NIC's frames belong to: its rail's VLAN (rail + 1)
    /// where rails are separate VLANs, else `vlan_id` (0: untagged).
    pub fn vlan_of(&self, nic: NicId) -> u16 {
        if self.vlan_rails {
            (self.nics[nic.idx()].rail + 1) as u16
        } else {
            self.vlan_id
        }
    }

    /// `from->to`: the link port `p` sends on, with `/k` on `to` when the
    /// two devices have parallel links (as in `groups.csv`).
    pub fn link_name(&self, p: PortId) -> String {
        format!("{}->{}", self.owner_name(p), self.member_name(p))
    }

    /// A member port by the neighbour it leads to, with `/k` (its position
    /// among the links to that neighbour) when there are parallel links.
    pub fn member_name(&self, p: PortId) -> String {
        let owner = self.port(p).owner;
        let peer = self.port(self.port(p).peer).owner;
        let name = self.owner_name(self.port(p).peer).to_string();
        let Owner::Switch(s) = owner else {
            return name;
        };
        let parallel: Vec<PortId> = self.switches[s.idx()]
            .ports
            .iter()
            .copied()
            .filter(|&q| self.port(self.port(q).peer).owner == peer)
            .collect();
        if parallel.len() > 1 {
            let k = parallel.iter().position(|&q| q == p).unwrap_or(0);
            format!("{name}/{k}")
        } else {
            name
        }
    }

    pub fn owner_name(&self, p: PortId) -> &str {
        match self.port(p).owner {
            Owner::Switch(s) => &self.switches[s.idx()].name,
            Owner::Nic(n) => &self.nics[n.idx()].name,
        }
    }

    /// Tier of the device owning a port; NICs are tier -1 (below leaves).
    pub fn owner_tier(&self, p: PortId) -> i32 {
        match self.port(p).owner {
            Owner::Switch(s) => self.switches[s.idx()].tier as i32,
            Owner::Nic(_) => -1,
        }
    }

    pub fn gpu_name(&self, g: GpuId) -> String {
        let gpu = self.gpus[g.idx()];
        format!("host{}/gpu{}", gpu.host.0, gpu.local)
    }
}
