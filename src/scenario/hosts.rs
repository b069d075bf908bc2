//! Scale-up domains: how the GPUs of one host (an NVLink domain) reach
//! each other, and the presets of the systems users build on. Their
//! figures and sources are in the README ("Hosts").

use crate::units::Rate;
use crate::workload::tuner::Arch;

/// How a domain's GPUs are joined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleUp {
    /// Through switch chips: each GPU has as many links to each of
    /// `switches` chips, and a copy's bytes spread over all of them, so
    /// a GPU sends and receives at its full rate to any peer and a chip
    /// that fails takes its share of every GPU's rate.
    Switched { switches: u32 },
    /// Point to point: one link between every pair of GPUs, each an equal
    /// part of a GPU's rate (AMD's Infinity Fabric on an 8-GPU board).
    Mesh,
}

impl Default for ScaleUp {
    fn default() -> Self {
        // An HGX H100 baseboard: four NVSwitch chips.
        ScaleUp::Switched { switches: 4 }
    }
}

/// What NVLink 4 carries of its line rate: NCCL counts 20.6 GB/s per
/// 25 GB/s link (`SM90_NVLINK_BW`), and measures 370 GB/s over an
/// H100's 450 (NCCL's maintainer, NVIDIA/nccl-tests#212).
pub const NVLINK4_EFFICIENCY: f64 = 20.6 / 25.0;
/// NVLink 5: 40.1 GB/s counted per 50 GB/s link (`SM100_NVLINK_BW`).
pub const NVLINK5_EFFICIENCY: f64 = 40.1 / 50.0;

/// A system whose domain, trays, links and NICs a host takes at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostPreset {
    DgxH100,
    Gb200Nvl72,
    Gb300Nvl72,
    Mi300x,
}

/// A preset's figures (sources in the README).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figures {
    /// GPUs in the domain (one host), and per compute tray.
    pub gpus: u32,
    pub gpus_per_tray: u32,
    /// NVLink (or Infinity Fabric) per GPU, both directions together.
    pub nvlink_bytes_per_s: u64,
    /// The share of that line rate that carries data
    /// (`HostConfig::nvlink_efficiency`).
    pub nvlink_efficiency: f64,
    pub scale_up: ScaleUp,
    /// The scale-out NIC of each GPU, and the PCIe between them (both
    /// directions together).
    pub nic: Rate,
    pub pcie_bytes_per_s: u64,
    /// Each GPU's memory (HBM), as `plan` takes it.
    pub gpu_memory_bytes: u64,
    /// The GPU generation, and whether the switch chips reduce and
    /// multicast (NVLink SHARP, which NCCL uses by default where it can).
    pub arch: Arch,
    pub nvls: bool,
}

impl HostPreset {
    pub const NAMES: &'static [&'static str] =
        &["dgx-h100", "gb200-nvl72", "gb300-nvl72", "mi300x"];

    pub fn from_name(s: &str) -> Option<HostPreset> {
        Some(match s {
            "dgx-h100" => HostPreset::DgxH100,
            "gb200-nvl72" => HostPreset::Gb200Nvl72,
            "gb300-nvl72" => HostPreset::Gb300Nvl72,
            "mi300x" => HostPreset::Mi300x,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            HostPreset::DgxH100 => "dgx-h100",
            HostPreset::Gb200Nvl72 => "gb200-nvl72",
            HostPreset::Gb300Nvl72 => "gb300-nvl72",
            HostPreset::Mi300x => "mi300x",
        }
    }

    pub fn figures(self) -> Figures {
        const GB: u64 = 1_000_000_000;
        match self {
            // 8 H100 on NVLink 4 (18 links, 900 GB/s) through 4 NVSwitch
            // chips; a ConnectX-7 at 400G per GPU on PCIe Gen5 x16.
            HostPreset::DgxH100 => Figures {
                gpus: 8,
                gpus_per_tray: 8,
                nvlink_bytes_per_s: 900 * GB,
                nvlink_efficiency: NVLINK4_EFFICIENCY,
                scale_up: ScaleUp::Switched { switches: 4 },
                nic: Rate::gbps(400),
                pcie_bytes_per_s: 128 * GB,
                gpu_memory_bytes: 80 * GB,
                arch: Arch::Hopper,
                nvls: true,
            },
            // 18 compute trays of 4 Blackwell GPUs, NVLink 5 (18 links,
            // 1.8 TB/s) to the 18 NVLink switch chips of 9 switch trays;
            // a ConnectX-7 at 400G per GPU.
            HostPreset::Gb200Nvl72 => Figures {
                gpus: 72,
                gpus_per_tray: 4,
                nvlink_bytes_per_s: 1800 * GB,
                nvlink_efficiency: NVLINK5_EFFICIENCY,
                scale_up: ScaleUp::Switched { switches: 18 },
                nic: Rate::gbps(400),
                pcie_bytes_per_s: 128 * GB,
                gpu_memory_bytes: 186 * GB,
                arch: Arch::Blackwell,
                nvls: true,
            },
            // The same domain with Blackwell Ultra and a ConnectX-8 at
            // 800G per GPU on PCIe Gen6 x16.
            HostPreset::Gb300Nvl72 => Figures {
                gpus: 72,
                gpus_per_tray: 4,
                nvlink_bytes_per_s: 1800 * GB,
                nvlink_efficiency: NVLINK5_EFFICIENCY,
                scale_up: ScaleUp::Switched { switches: 18 },
                nic: Rate::gbps(800),
                pcie_bytes_per_s: 256 * GB,
                gpu_memory_bytes: 279 * GB,
                arch: Arch::Blackwell,
                nvls: true,
            },
            // 8 MI300X fully connected by Infinity Fabric: 7 links of
            // 128 GB/s each (896 GB/s), one per peer; 400G NICs on PCIe
            // Gen5 x16.
            HostPreset::Mi300x => Figures {
                gpus: 8,
                gpus_per_tray: 8,
                nvlink_bytes_per_s: 896 * GB,
                // No measured figure checked: the line rate.
                nvlink_efficiency: 1.0,
                scale_up: ScaleUp::Mesh,
                nic: Rate::gbps(400),
                pcie_bytes_per_s: 128 * GB,
                gpu_memory_bytes: 192 * GB,
                // No NCCL constants of its own: Hopper's stand in.
                arch: Arch::Hopper,
                nvls: false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &n in HostPreset::NAMES {
            assert_eq!(HostPreset::from_name(n).unwrap().name(), n);
        }
        assert_eq!(HostPreset::from_name("dgx-a100"), None);
    }
}
