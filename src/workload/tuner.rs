//! NCCL's choice of algorithm, protocol and channels for a collective
//! (`algorithm = "auto"`), as its topology-based tuner makes it
//! (`src/graph/tuning.cc`, `src/enqueue.cc`, NCCL 2.2x): a cost model of
//! latency plus bytes over bus bandwidth for each algorithm and protocol,
//! the cheapest taken, then the channel count cut down for small sizes.
//!
//! What it reads of the fabric stands in for NCCL's topology search
//! (`src/graph/search.cc`): per channel, the highest bandwidth of NCCL's
//! speed table that the GPU's path to its NIC (NIC and PCIe) carries
//! (NVLink within one server), one channel per NIC per such share,
//! doubled while a channel carries 25 GB/s or more, as the search does.
//! PAT (all-gather and reduce-scatter with one GPU per server), NVLS
//! (inside one NVLink domain whose switch chips reduce) and NVLS-tree
//! (all-reduce across domains) are in, with NVLS's own search
//! (`nvls_graph`). Left out, as in the rest of fabricsim: CollNet; the
//! CPU is taken as x86 from Intel (it sets LL's ceiling and the network
//! overhead of NCCL's model).

use super::op::{Algorithm, Op, Protocol};
pub use super::pass::StepShape;

/// GPU generation: NCCL's constants differ per compute capability.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Arch {
    Ampere,
    Hopper,
    Blackwell,
}

/// The servers as NCCL's tuner sees them: GPU buses (both directions
/// together, as `[host]` gives them), the GPU generation, and whether
/// the NVLink switch chips reduce and multicast (NVLS).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Host {
    pub nvlink_bytes_per_s: u64,
    pub pcie_bytes_per_s: u64,
    pub arch: Arch,
    pub nvls: bool,
}

impl Default for Host {
    /// `[host]`'s defaults, Hopper, without NVLS.
    fn default() -> Self {
        Host {
            nvlink_bytes_per_s: 900_000_000_000,
            pcie_bytes_per_s: 64_000_000_000,
            arch: Arch::Hopper,
            nvls: false,
        }
    }
}

/// What NCCL's tuner sees of a communicator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CommShape {
    pub ranks: u32,
    /// Servers the communicator spans.
    pub nodes: u32,
    /// Distinct NICs (rails) the communicator's GPUs use in a server.
    pub nics_per_node: u32,
    /// Whether two GPUs of a server share a NIC (NCCL can then split a
    /// tree's network traffic over two GPUs; otherwise its tree pattern
    /// puts all of it on one GPU, and its model charges that).
    pub shared_nics: bool,
    /// A NIC's rate and a GPU's PCIe and NVLink bandwidth, per direction,
    /// GB/s.
    pub nic_gbs: f64,
    pub pcie_gbs: f64,
    pub nvlink_gbs: f64,
    pub arch: Arch,
    /// The switch chips do NVLink SHARP (`Host::nvls`).
    pub nvls: bool,
}

/// NCCL's pick for one collective.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    pub channels: u32,
    /// The model's estimate, microseconds.
    pub time_us: f64,
}

/// The channels NCCL's search finds and what each carries (GB/s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Graph {
    pub channels: u32,
    pub bw: f64,
}

/// Before Hopper (`search.cc`'s `speedArrayIntra`, `speedArrayInter`).
const SM80_INTRA: &[f64] = &[
    40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
];
const SM80_INTER: &[f64] = &[
    48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
    0.24, 0.12,
];
const SM90_INTRA: &[f64] = &[
    60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0,
];
const SM90_INTER: &[f64] = &[
    48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24,
    0.12,
];
const SM100_INTRA: &[f64] = &[
    90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0,
];
const SM100_INTER: &[f64] = &[
    96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
    2.4, 1.2, 0.24, 0.12,
];
/// NCCL's MAXCHANNELS; a ring graph has at most half.
const MAX_CHANNELS: u32 = 64;
/// NVLS: at most this many heads (`NCCL_MAX_NVLS_ARITY`), each reducing
/// and multicasting its part of every loop.
pub const NVLS_MAX_HEADS: u32 = 32;
/// NVLS's share of what a channel could carry (`nvlsEfficiency`).
const NVLS_EFFICIENCY_HOPPER: f64 = 0.85;
const NVLS_EFFICIENCY_BLACKWELL: f64 = 0.74;
/// NVLS's latencies (`hwLatencies`, Simple): NVLink, and the network's
/// for NVLS-tree.
pub const NVLS_LATENCY_US: f64 = 25.0;
const NVLS_TREE_LAT_NET: f64 = 20.9;
/// NVLS-tree's per-channel ceiling for 2 and for more servers
/// (`perChMaxNVLSTreeBws`).
const NVLS_TREE_MAX_HOPPER: [f64; 2] = [57.7, 45.5];
const NVLS_TREE_MAX_BLACKWELL: [f64; 2] = [96.0, 80.0];
/// What NCCL counts per NVLink against the link's line rate, one
/// direction (`SM90_NVLINK_BW` 20.6 of NVLink 4's 25 GB/s,
/// `SM100_NVLINK_BW` 40.1 of NVLink 5's 50).
const NVLINK_COUNTED_HOPPER: f64 = 20.6 / 25.0;
const NVLINK_COUNTED_BLACKWELL: f64 = 40.1 / 50.0;
/// NVLS's default chunk per head (`NCCL_NVLS_CHUNKSIZE`).
pub const NVLS_CHUNK: u64 = 128 * 1024;

/// NVLS's graph as NCCL's search finds it (`search.cc`): its heads
/// (channels) and the bandwidth each carries inside the domain and to
/// the network.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NvlsGraph {
    pub heads: u32,
    pub bw_intra: f64,
    pub bw_inter: f64,
}

// Tuning constants, indexed [protocol] with LL, LL128, Simple.
const BASE_LAT_TREE: [f64; 3] = [6.8, 14.0, 8.4];
const BASE_LAT_RING: [f64; 3] = [6.6, 14.0, 8.4];
const HW_LAT_NVLINK_TREE: [f64; 3] = [0.6, 1.25, 4.0];
const HW_LAT_NVLINK_RING: [f64; 3] = [0.6, 1.9, 3.4];
const HW_LAT_NET_TREE: [f64; 3] = [5.0, 8.5, 14.0];
const HW_LAT_NET_RING: [f64; 3] = [2.7, 4.0, 14.0];
/// Per-size correction of the tree's bandwidth, powers of two from 64 B.
const TREE_CORRECTION: [[f64; 23]; 3] = [
    [
        1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8,
        0.9, 1.0, 1.0, 1.0, 1.0,
    ],
    [
        1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9,
        0.9, 0.9, 0.9, 1.0, 1.0,
    ],
    [
        0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8,
        0.7, 0.7, 0.8, 0.9, 0.9,
    ],
];

/// NCCL's software time per step of a pass, in microseconds, from its
/// latency model (`tuning.cc`): an NVLink hop, a network hop, and once
/// per collective (the launch). NCCL charges a ring `base + (steps -
/// network steps) x intra + network steps x inter` and a tree `base + 2
/// (local x nvlink + log2 servers x inter)`; charged per hop as a pass
/// runs, the same sum falls on the first chunk's way through. PAT's 2.8
/// us per rank is charged at launch, as NCCL's model charges it once.
pub fn step_latency(shape: StepShape, p: Protocol, servers: u32, ranks: u32) -> [f64; 3] {
    let pi = proto_index(p);
    match shape {
        StepShape::Tree => [
            HW_LAT_NVLINK_TREE[pi],
            HW_LAT_NET_TREE[pi],
            BASE_LAT_TREE[pi],
        ],
        StepShape::Pat => [
            HW_LAT_NVLINK_TREE[pi],
            HW_LAT_NET_TREE[pi] / 3.5,
            8.0 + 2.8 * f64::from(ranks),
        ],
        StepShape::Ring => {
            let one_per_server = servers == ranks;
            let inter = if one_per_server {
                HW_LAT_NET_TREE[pi]
            } else {
                HW_LAT_NET_RING[pi]
            };
            let overhead = match (servers > 1, p) {
                (false, _) => 0.0,
                (true, Protocol::Simple) => 3.0,
                (true, _) => 1.0,
            };
            [
                HW_LAT_NVLINK_RING[pi].max(overhead),
                inter,
                BASE_LAT_RING[pi],
            ]
        }
    }
}

/// The algorithms NCCL's tuner weighs, in its order (the first of equal
/// times wins).
const ORDER: [Algorithm; 5] = [
    Algorithm::Tree,
    Algorithm::Ring,
    Algorithm::Nvls,
    Algorithm::NvlsTree,
    Algorithm::Pat,
];

fn proto_index(p: Protocol) -> usize {
    match p {
        Protocol::Ll => 0,
        Protocol::Ll128 => 1,
        Protocol::Simple => 2,
    }
}

fn log2i(n: u64) -> i64 {
    if n == 0 {
        -1
    } else {
        63 - i64::from(n.leading_zeros())
    }
}

impl CommShape {
    /// The ring (and tree) graph NCCL's search would find.
    pub fn graph(&self) -> Graph {
        let (speeds, total, per_nic) = if self.nodes <= 1 {
            let s = match self.arch {
                Arch::Ampere => SM80_INTRA,
                Arch::Hopper => SM90_INTRA,
                Arch::Blackwell => SM100_INTRA,
            };
            (s, self.nvlink_gbs, self.nvlink_gbs)
        } else {
            let s = match self.arch {
                Arch::Ampere => SM80_INTER,
                Arch::Hopper => SM90_INTER,
                Arch::Blackwell => SM100_INTER,
            };
            let path = self.nic_gbs.min(self.pcie_gbs);
            (s, path * f64::from(self.nics_per_node), path)
        };
        let speed = speeds
            .iter()
            .copied()
            .find(|&s| s <= per_nic)
            .unwrap_or(speeds[speeds.len() - 1]);
        let mut channels = if self.nodes <= 1 {
            (total / speed).floor() as u32
        } else {
            let mut c = self.nics_per_node * (per_nic / speed).floor() as u32;
            // Every channel crosses each GPU's NVLink inside a server.
            if self.ranks > self.nodes {
                c = c.min((self.nvlink_gbs / speed).floor() as u32);
            }
            c
        };
        channels = channels.clamp(1, MAX_CHANNELS / 2);
        let mut bw = speed;
        if bw >= 25.0 {
            let dup = (2 * channels).min(MAX_CHANNELS / 2);
            bw /= f64::from(dup.div_ceil(channels));
            channels = dup;
        }
        Graph { channels, bw }
    }

    /// NVLS's graph, if NCCL would offer NVLS here: switch chips that
    /// reduce, Hopper or later, two GPUs or more per domain, and two
    /// heads or more. Heads: the domain's GPUs (across domains, those
    /// with a NIC), at most 32. A GPU's NVLink, as NCCL counts it, must
    /// carry every head's channel and its own head's once more; across
    /// domains each channel's speed is also one its NIC carries. The
    /// network side is then raised while under twice the NVLink side.
    pub fn nvls_graph(&self) -> Option<NvlsGraph> {
        let nodes = self.nodes.max(1);
        let ppn = self.ranks / nodes;
        if !self.nvls || self.arch == Arch::Ampere || ppn < 2 {
            return None;
        }
        let heads = if nodes == 1 {
            ppn
        } else {
            self.nics_per_node.min(ppn)
        }
        .min(NVLS_MAX_HEADS);
        if heads < 2 {
            return None;
        }
        let (counted, intra, inter) = match self.arch {
            Arch::Blackwell => (NVLINK_COUNTED_BLACKWELL, SM100_INTRA, SM100_INTER),
            _ => (NVLINK_COUNTED_HOPPER, SM90_INTRA, SM90_INTER),
        };
        let per_head = self.nvlink_gbs * counted / f64::from(heads + 1);
        let (speeds, limit) = if nodes == 1 {
            (intra, per_head)
        } else {
            let nic = self.nic_gbs.min(self.pcie_gbs);
            (inter, per_head.min(nic))
        };
        let bw_intra = speeds
            .iter()
            .copied()
            .find(|&s| s <= limit)
            .unwrap_or(speeds[speeds.len() - 1]);
        let ceiling = if nodes == 1 {
            f64::INFINITY
        } else {
            self.nic_gbs.min(self.pcie_gbs)
        };
        // Raised from bw_intra, a speed at a time, while under twice it.
        let mut bw_inter = bw_intra;
        for &s in speeds
            .iter()
            .rev()
            .filter(|&&s| s > bw_intra && s <= ceiling)
        {
            if bw_inter >= 2.0 * bw_intra {
                break;
            }
            bw_inter = s;
        }
        Some(NvlsGraph {
            heads,
            bw_intra,
            bw_inter,
        })
    }

    /// NVLS's CTAs (channels) as NCCL runs them.
    pub fn nvls_channels(&self) -> u32 {
        match self.arch {
            Arch::Blackwell if self.nodes > 1 => 32,
            Arch::Blackwell => 24,
            _ => 16,
        }
    }

    /// NCCL's NVLS bus bandwidth per channel and its number of channels
    /// for `op` (`tuning.cc`): the NVLink side is the channel's speed x
    /// NVLS's efficiency x (channels - 1)/channels, doubled for an
    /// all-reduce (it pipelines a reduce-scatter and an all-gather) or x
    /// (ppn - 1)/ppn otherwise; across domains no more than the network
    /// side (doubled for NVLS-tree on 2 servers) and, for NVLS-tree, its
    /// per-channel ceiling.
    fn nvls_bus(&self, op: Op, tree: bool) -> Option<(f64, f64)> {
        let g = self.nvls_graph()?;
        let nodes = self.nodes.max(1);
        let ch = f64::from(g.heads);
        let eff = match self.arch {
            Arch::Blackwell => NVLS_EFFICIENCY_BLACKWELL,
            _ => NVLS_EFFICIENCY_HOPPER,
        };
        let ppn = f64::from(self.ranks) / f64::from(nodes);
        let mut intra = g.bw_intra * eff * (ch - 1.0) / ch;
        intra *= if op == Op::AllReduce {
            2.0
        } else {
            (ppn - 1.0) / ppn
        };
        let inter = g.bw_inter * if tree && nodes <= 2 { 2.0 } else { 1.0 };
        let mut bw = intra.min(inter);
        if tree {
            let max = match self.arch {
                Arch::Blackwell => NVLS_TREE_MAX_BLACKWELL,
                _ => NVLS_TREE_MAX_HOPPER,
            };
            bw = bw.min(max[usize::from(nodes > 2)]);
        }
        Some((ch * bw, ch))
    }

    /// The rate, bytes per second, at which NVLS moves each GPU's bytes
    /// to and from the switch chips (one direction) inside a domain, such
    /// that an all-reduce alone on an idle domain takes the time NCCL's
    /// model gives it: each GPU sends its buffer to be reduced and the
    /// part it reduces to be multicast, 1 + 1/heads of the buffer, and
    /// receives as much. `None` where NCCL would not offer NVLS.
    pub fn nvls_rate(&self) -> Option<f64> {
        let one = CommShape {
            ranks: self.ranks / self.nodes.max(1),
            nodes: 1,
            ..*self
        };
        let g = one.nvls_graph()?;
        let (bus, _) = one.nvls_bus(Op::AllReduce, false)?;
        let n = f64::from(one.ranks);
        let algbw = bus * n / (2.0 * (n - 1.0));
        Some(algbw * (1.0 + 1.0 / f64::from(g.heads)) * 1e9)
    }

    /// Channels the communicator runs: the graph's, duplicated once more
    /// when connected (and again on Hopper and later for fast, narrow
    /// graphs).
    pub fn comm_channels(&self) -> u32 {
        let g = self.graph();
        let mut n = (2 * g.channels).min(MAX_CHANNELS);
        if self.arch != Arch::Ampere && self.nodes > 1 && g.bw > 45.0 && n < 16 {
            n = (2 * n).min(MAX_CHANNELS);
        }
        n
    }

    /// NCCL's bus bandwidth (GB/s, already converted to algorithm
    /// bandwidth) and latency (us) for `op` by `a` and `p`, or `None`
    /// where NCCL does not offer the pair.
    fn model(&self, op: Op, a: Algorithm, p: Protocol) -> Option<(f64, f64)> {
        let n = f64::from(self.ranks);
        let nodes = self.nodes.max(1);
        let ppn = n / f64::from(nodes);
        let pi = proto_index(p);
        match (op, a) {
            (Op::AllReduce, Algorithm::Ring | Algorithm::Tree) => {}
            (Op::AllGather | Op::ReduceScatter | Op::Broadcast, Algorithm::Ring) => {}
            // PAT: one GPU per server, Simple only.
            (Op::AllGather | Op::ReduceScatter, Algorithm::Pat)
                if self.ranks == nodes && p == Protocol::Simple => {}
            // NVLS: Simple only, inside one domain (across domains an
            // all-gather or reduce-scatter would need CollNet).
            (Op::AllReduce | Op::AllGather | Op::ReduceScatter, Algorithm::Nvls)
                if nodes == 1 && p == Protocol::Simple =>
            {
                let (bus, _) = self.nvls_bus(op, false)?;
                let bw = if op == Op::AllReduce {
                    bus * n / (2.0 * (n - 1.0))
                } else {
                    bus
                };
                return Some((bw, NVLS_LATENCY_US));
            }
            (Op::AllReduce, Algorithm::NvlsTree) if nodes > 1 && p == Protocol::Simple => {
                let (bus, _) = self.nvls_bus(op, true)?;
                let lat =
                    NVLS_LATENCY_US + 2.0 * log2i(u64::from(nodes)) as f64 * NVLS_TREE_LAT_NET;
                return Some((bus * n / (2.0 * (n - 1.0)), lat));
            }
            _ => return None,
        }
        let g = self.graph();
        let nsteps = match op {
            Op::AllReduce => 2.0 * (n - 1.0),
            Op::AllGather | Op::ReduceScatter => n - 1.0,
            _ => n,
        };
        let idx2 = (nodes.min(3) - 1) as usize;
        // NCCL's per-channel ceilings (`tuning.cc`) per generation.
        let ll_max = if nodes == 1 {
            match self.arch {
                Arch::Ampere => 87.7,
                Arch::Hopper => 141.0,
                Arch::Blackwell => 2.0 * 141.0,
            }
        } else {
            [39.0, 39.0, 20.4][idx2]
        };
        let (ring_ll128, tree_ll128, tree_max) = match self.arch {
            Arch::Ampere => (20.0, [20.0; 3], [24.0, 23.6, 17.8]),
            Arch::Hopper => (36.7, [36.7, 36.7, 29.0], [38.7, 41.4, 36.0]),
            Arch::Blackwell => (40.0, [55.6, 31.67, 20.0], [70.0, 42.8, 24.0]),
        };
        let (tree_ll128, tree_max) = (tree_ll128[idx2], tree_max[idx2]);
        let ch = f64::from(g.channels);
        let mut bus = ch * g.bw;
        if a == Algorithm::Ring && p == Protocol::Ll {
            bus = (bus * 0.5).min(ll_max);
        }
        if a == Algorithm::Ring && p == Protocol::Ll128 {
            bus = (bus * 0.92).min(ch * ring_ll128);
        }
        if a == Algorithm::Tree {
            bus = (bus * 0.92).min(ch * tree_max);
            if p == Protocol::Ll {
                bus = (bus / 3.8).min(ll_max);
            }
            if p == Protocol::Ll128 {
                let f = if nodes == 1 { 7.0 / 9.0 } else { 120.0 / 128.0 };
                bus = (bus * f).min(ch * tree_ll128);
            }
            if nodes > 1 && !self.shared_nics {
                bus *= 0.85;
            }
        }
        if a == Algorithm::Pat {
            // Its bus bandwidth x 0.75, not converted to algorithm
            // bandwidth; latency: log2 of the servers at 1/3.5 of the
            // network's, and 2.8 us per rank.
            let lat = 8.0 + log2i(u64::from(nodes)) as f64 * (HW_LAT_NET_TREE[pi] / 3.5) + 2.8 * n;
            return Some((bus * 0.75, lat));
        }
        let ratio = if a == Algorithm::Ring {
            n / nsteps
        } else {
            0.5
        };
        let bw = bus * ratio;
        // Latency.
        let nvlink = if a == Algorithm::Tree {
            HW_LAT_NVLINK_TREE[pi]
        } else {
            HW_LAT_NVLINK_RING[pi]
        };
        let base = if a == Algorithm::Tree {
            BASE_LAT_TREE[pi]
        } else {
            BASE_LAT_RING[pi]
        };
        let inter = if ppn == 1.0 || a == Algorithm::Tree {
            HW_LAT_NET_TREE[pi]
        } else {
            HW_LAT_NET_RING[pi]
        };
        let mut lat = base;
        if a == Algorithm::Ring {
            if op == Op::Broadcast {
                let hw = if nodes == 1 {
                    nvlink
                } else {
                    HW_LAT_NET_RING[pi]
                };
                lat += hw;
            } else {
                let overhead = if nodes > 1 {
                    if p == Protocol::Simple {
                        3.0
                    } else {
                        1.0
                    }
                } else {
                    0.0
                };
                let intra = nvlink.max(overhead);
                let inter_steps = if nodes == 1 {
                    0.0
                } else if op == Op::AllReduce {
                    2.0 * f64::from(nodes - 1)
                } else {
                    f64::from(nodes - 1)
                };
                lat += (nsteps - inter_steps) * intra + inter_steps * inter;
            }
        } else {
            // NCCL divides ranks by nodes in integers here.
            let local = f64::from(self.ranks / nodes - 1);
            lat += 2.0 * (local * nvlink + log2i(u64::from(nodes)) as f64 * inter);
        }
        Some((bw, lat))
    }

    /// The algorithm bandwidth NCCL's model gives `op` on `bytes` by `a`
    /// and `p` (GB/s), the tree's per-size correction applied.
    pub fn algbw(&self, op: Op, a: Algorithm, p: Protocol, bytes: u64) -> Option<f64> {
        let (mut bw, _) = self.model(op, a, p)?;
        let log = log2i(bytes >> 6);
        if a == Algorithm::Tree && op == Op::AllReduce && (0..23).contains(&log) {
            bw *= TREE_CORRECTION[proto_index(p)][log as usize];
        }
        Some(bw)
    }

    /// NCCL's estimate of `op` on `bytes` (the larger of its buffers) by
    /// `a` and `p`, microseconds; `None` where NCCL does not offer it.
    pub fn time_us(&self, op: Op, a: Algorithm, p: Protocol, bytes: u64) -> Option<f64> {
        let (_, mut lat) = self.model(op, a, p)?;
        let bw = self.algbw(op, a, p, bytes)?;
        if a == Algorithm::Ring
            && p == Protocol::Simple
            && self.nodes > 1
            && op == Op::AllReduce
            && bytes / (u64::from(self.comm_channels()) * u64::from(self.ranks)) >= 64
        {
            // The ring's plateau.
            lat *= 1.4;
        }
        Some(lat + bytes as f64 / (1000.0 * bw))
    }

    /// The cheapest algorithm and protocol among those allowed (`None`:
    /// any), in NCCL's order (tree, ring, PAT; LL, LL128, Simple; the
    /// first of equal times wins), and its channels.
    pub fn choose(
        &self,
        op: Op,
        bytes: u64,
        algorithm: Option<Algorithm>,
        protocol: Option<Protocol>,
    ) -> Option<Choice> {
        let mut best: Option<Choice> = None;
        for a in ORDER {
            if algorithm.is_some_and(|x| x != a) {
                continue;
            }
            for p in [Protocol::Ll, Protocol::Ll128, Protocol::Simple] {
                if protocol.is_some_and(|x| x != p) {
                    continue;
                }
                let Some(t) = self.time_us(op, a, p, bytes) else {
                    continue;
                };
                if best.is_none_or(|b| t < b.time_us) {
                    best = Some(Choice {
                        algorithm: a,
                        protocol: p,
                        channels: 0,
                        time_us: t,
                    });
                }
            }
        }
        let mut c = best?;
        c.channels = self.channels_for(c.algorithm, c.protocol, bytes);
        Some(c)
    }

    /// NCCL's tuning for `op` at every power-of-four size from 1 KiB to
    /// 4 GiB, as text: the graph it sees, then per size its pick (with
    /// channels, modelled time and algorithm bandwidth) and the modelled
    /// time of every algorithm and protocol it offers.
    pub fn table(&self, op: Op) -> String {
        use std::fmt::Write;
        let g = self.graph();
        let pairs: Vec<(Algorithm, Protocol)> = ORDER
            .into_iter()
            .flat_map(|a| {
                [Protocol::Ll, Protocol::Ll128, Protocol::Simple]
                    .into_iter()
                    .map(move |p| (a, p))
            })
            .filter(|&(a, p)| self.model(op, a, p).is_some())
            .collect();
        let mut s = String::new();
        let _ = writeln!(
            s,
            "NCCL's tuner for {} over {} ranks on {} servers: {} search channels of {} GB/s, {} run",
            op.name(),
            self.ranks,
            self.nodes,
            g.channels,
            g.bw,
            self.comm_channels()
        );
        let _ = write!(
            s,
            "{:>12} {:>22} {:>10} {:>9}",
            "bytes", "pick", "time us", "algbw"
        );
        for (a, p) in &pairs {
            let _ = write!(s, " {:>13}", format!("{}/{}", a.name(), p.name()));
        }
        s.push('\n');
        let mut bytes: u64 = 1024;
        while bytes <= 4 << 30 {
            if let Some(c) = self.choose(op, bytes, None, None) {
                let pick = format!(
                    "{}/{} x{}",
                    c.algorithm.name(),
                    c.protocol.name(),
                    c.channels
                );
                let _ = write!(
                    s,
                    "{bytes:>12} {pick:>22} {:>10.1} {:>9.1}",
                    c.time_us,
                    bytes as f64 / c.time_us / 1e3
                );
                for &(a, p) in &pairs {
                    let t = self.time_us(op, a, p, bytes).unwrap_or(f64::NAN);
                    let _ = write!(s, " {t:>13.1}");
                }
                s.push('\n');
            }
            bytes *= 4;
        }
        s
    }

    /// NCCL's channel count for `bytes` by `a` and `p`: fewer channels
    /// while each would get less than its threads' threshold of work.
    pub fn channels_for(&self, a: Algorithm, p: Protocol, bytes: u64) -> u32 {
        if matches!(a, Algorithm::Nvls | Algorithm::NvlsTree) {
            return self.nvls_channels();
        }
        if a == Algorithm::Pat {
            // NCCL sets no thread count for PAT's channel rule.
            return self.comm_channels();
        }
        let threads: u64 = match p {
            Protocol::Ll128 => 640,
            _ => 512,
        };
        let threshold: u64 = match p {
            Protocol::Simple => 64,
            Protocol::Ll if a == Algorithm::Ring => 8 * u64::from(self.ranks),
            _ => 8,
        };
        let mut nc = u64::from(self.comm_channels());
        while bytes < nc * threads * threshold && nc >= 2 {
            nc -= 1;
        }
        nc as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 8 servers of 8 H100s, a 400G NIC per GPU, PCIe 64 GB/s each way.
    fn dgx(nodes: u32) -> CommShape {
        CommShape {
            ranks: 8 * nodes,
            nodes,
            nics_per_node: 8,
            shared_nics: false,
            nic_gbs: 50.0,
            pcie_gbs: 64.0,
            nvlink_gbs: 450.0,
            arch: Arch::Hopper,
            nvls: false,
        }
    }

    /// NCCL's search on that server: 48 GB/s per NIC (its speed table),
    /// 8 channels, doubled to 16 of 24; the communicator runs 32.
    #[test]
    fn the_graph_is_what_nccls_search_finds() {
        assert_eq!(
            dgx(8).graph(),
            Graph {
                channels: 16,
                bw: 24.0
            }
        );
        assert_eq!(dgx(8).comm_channels(), 32);
        // PCIe Gen5 at 32 GB/s each way caps the path: 30 per channel.
        let slow = CommShape {
            pcie_gbs: 32.0,
            ..dgx(8)
        };
        assert_eq!(
            slow.graph(),
            Graph {
                channels: 16,
                bw: 15.0
            }
        );
        // 200G NICs: 24 GB/s per channel, not doubled.
        let g = CommShape {
            nic_gbs: 25.0,
            ..dgx(8)
        }
        .graph();
        assert_eq!(
            g,
            Graph {
                channels: 8,
                bw: 24.0
            }
        );
        // One server: NVLink, 60 GB/s channels, 7 of them, doubled.
        let one = CommShape {
            ranks: 8,
            nodes: 1,
            ..dgx(1)
        };
        assert_eq!(
            one.graph(),
            Graph {
                channels: 14,
                bw: 30.0
            }
        );
    }

    /// A100s (NCCL's pre-Hopper constants): one DGX A100's NVLink (300
    /// GB/s each way) gives 40 GB/s channels from the older speed table,
    /// 7 doubled to 14 of 20; across 8 servers of 200G NICs the tree's
    /// bus bandwidth is capped at Ampere's 17.8 GB/s per channel (Hopper's
    /// is 36 there), then LL128's at 20 (Hopper's 29).
    #[test]
    fn ampere_uses_nccls_older_constants() {
        let a100 = |nodes: u32| CommShape {
            nic_gbs: 25.0,
            pcie_gbs: 32.0,
            nvlink_gbs: 300.0,
            arch: Arch::Ampere,
            ..dgx(nodes)
        };
        let one = CommShape {
            ranks: 8,
            ..a100(1)
        };
        assert_eq!(
            one.graph(),
            Graph {
                channels: 14,
                bw: 20.0
            }
        );
        let g = a100(8).graph();
        assert_eq!(
            g,
            Graph {
                channels: 8,
                bw: 24.0
            }
        );
        let bytes = 64_000_000;
        let tree = |s: CommShape| {
            s.time_us(Op::AllReduce, Algorithm::Tree, Protocol::Ll128, bytes)
                .unwrap()
        };
        let tree_bus = (8.0 * 24.0 * 0.92f64).min(8.0 * 17.8);
        let bus = (tree_bus * 120.0 / 128.0).min(8.0 * 20.0) * 0.85;
        let want = 14.0 + 2.0 * (7.0 * 1.25 + 3.0 * 8.5) + 64e6 / (1000.0 * bus * 0.5 * 0.9);
        let got = tree(a100(8));
        assert!((got - want).abs() < 1e-6 * want, "{got} against {want}");
        let hopper = CommShape {
            arch: Arch::Hopper,
            ..a100(8)
        };
        assert!(tree(hopper) < got);
    }

    /// The model's figures worked by hand from tuning.cc for 64 MB on 8
    /// servers: ring Simple's bus bandwidth is 16 x 24 = 384 GB/s, its
    /// algorithm bandwidth 384 x 64/126; its latency 8.4 + 112 x 3.4 +
    /// 14 x 14 us, times 1.4 (the ring's plateau). The tree's LL128 bus
    /// bandwidth is min(384 x 0.92 x 120/128, 16 x 29) x 0.85 (one GPU
    /// carries a channel's network traffic), halved, times 0.9 at 64 MB;
    /// its latency 14 + 2 x (7 x 1.25 + 3 x 8.5).
    #[test]
    fn times_follow_nccls_model() {
        let s = dgx(8);
        let bytes = 64_000_000;
        let ring = s
            .time_us(Op::AllReduce, Algorithm::Ring, Protocol::Simple, bytes)
            .unwrap();
        let want = (8.4 + 112.0 * 3.4 + 14.0 * 14.0) * 1.4 + 64e6 / (1000.0 * 384.0 * 64.0 / 126.0);
        assert!((ring - want).abs() < 1e-6 * want, "{ring} against {want}");
        let tree = s
            .time_us(Op::AllReduce, Algorithm::Tree, Protocol::Ll128, bytes)
            .unwrap();
        let bus = (384.0 * 0.92 * 120.0 / 128.0f64).min(16.0 * 29.0) * 0.85;
        let want = 14.0 + 2.0 * (7.0 * 1.25 + 3.0 * 8.5) + 64e6 / (1000.0 * bus * 0.5 * 0.9);
        assert!((tree - want).abs() < 1e-6 * want, "{tree} against {want}");
        // No tree for an all-gather; no LL128 ceiling lifted by 0.85
        // where two GPUs share a NIC.
        assert!(s
            .time_us(Op::AllGather, Algorithm::Tree, Protocol::Simple, bytes)
            .is_none());
        let shared = CommShape {
            shared_nics: true,
            ..s
        };
        let t2 = shared
            .time_us(Op::AllReduce, Algorithm::Tree, Protocol::Ll128, bytes)
            .unwrap();
        assert!(t2 < tree);
    }

    /// NCCL's picks by size on 8 servers of 8 GPUs: LL on the tree for
    /// small buffers, LL128 on the tree in the middle, and the ring with
    /// Simple only for the largest; channels cut for small sizes.
    #[test]
    fn picks_by_size_as_nccls_tuner() {
        let s = dgx(8);
        let pick = |b: u64| s.choose(Op::AllReduce, b, None, None).unwrap();
        let small = pick(8 * 1024);
        assert_eq!(
            (small.algorithm, small.protocol),
            (Algorithm::Tree, Protocol::Ll)
        );
        // Channels while each gets its 512 threads x 8 bytes: two.
        assert_eq!(small.channels, 2);
        let mid = pick(64_000_000);
        assert_eq!(
            (mid.algorithm, mid.protocol),
            (Algorithm::Tree, Protocol::Ll128)
        );
        assert_eq!(mid.channels, 32);
        let big = pick(8 << 30);
        assert_eq!(
            (big.algorithm, big.protocol),
            (Algorithm::Ring, Protocol::Simple)
        );
        // Every pick is the cheapest of the pairs NCCL offers.
        for b in [1u64 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 28, 1 << 32] {
            let c = pick(b);
            for a in [Algorithm::Tree, Algorithm::Ring] {
                for p in [Protocol::Ll, Protocol::Ll128, Protocol::Simple] {
                    let t = s.time_us(Op::AllReduce, a, p, b).unwrap();
                    assert!(c.time_us <= t, "{b} B: {c:?} against {a:?}/{p:?} {t}");
                }
            }
        }
        // A fixed algorithm or protocol restricts the choice, as
        // NCCL_ALGO and NCCL_PROTO do.
        let ring = s
            .choose(Op::AllReduce, 64_000_000, Some(Algorithm::Ring), None)
            .unwrap();
        assert_eq!(ring.algorithm, Algorithm::Ring);
        let simple = s
            .choose(Op::AllReduce, 64_000_000, None, Some(Protocol::Simple))
            .unwrap();
        assert_eq!(simple.protocol, Protocol::Simple);
        // An all-gather has only the ring.
        let ag = s.choose(Op::AllGather, 64_000_000, None, None).unwrap();
        assert_eq!(ag.algorithm, Algorithm::Ring);
        assert!(s.choose(Op::AllToAll, 1 << 20, None, None).is_none());
    }

    /// PAT: only with one GPU per server and Simple; bus bandwidth x
    /// 0.75 taken as algorithm bandwidth; latency 8 + log2(servers) x
    /// 14/3.5 + 2.8 per rank. On 8 servers of one 400G GPU: 2 channels
    /// of 24 GB/s.
    #[test]
    fn pat_follows_nccls_model() {
        let one = CommShape {
            ranks: 8,
            nodes: 8,
            nics_per_node: 1,
            ..dgx(8)
        };
        assert_eq!(
            one.graph(),
            Graph {
                channels: 2,
                bw: 24.0
            }
        );
        let t = one
            .time_us(Op::AllGather, Algorithm::Pat, Protocol::Simple, 1 << 20)
            .unwrap();
        let want = 8.0 + 3.0 * 4.0 + 2.8 * 8.0 + f64::from(1 << 20) / (1000.0 * 48.0 * 0.75);
        assert!((t - want).abs() < 1e-6 * want, "{t} against {want}");
        assert!(one
            .time_us(Op::AllGather, Algorithm::Pat, Protocol::Ll, 1 << 20)
            .is_none());
        assert!(one
            .time_us(Op::AllReduce, Algorithm::Pat, Protocol::Simple, 1 << 20)
            .is_none());
        assert!(dgx(8)
            .time_us(Op::AllGather, Algorithm::Pat, Protocol::Simple, 1 << 20)
            .is_none());
        // Small all-gathers take it; the largest go to the ring.
        let pick = |b: u64| one.choose(Op::AllGather, b, None, None).unwrap().algorithm;
        assert_eq!(pick(64 << 10), Algorithm::Pat);
        assert_eq!(pick(1 << 30), Algorithm::Ring);
    }

    /// NVLS's graph and bus bandwidth as NCCL's search and model give
    /// them (`search.cc`, `tuning.cc`), worked by hand. A DGX H100: 18
    /// NVLinks counted at 20.6 GB/s (370.8), 8 heads, so each channel
    /// gets the fastest speed of which 9 fit: 40 GB/s; the network side
    /// raised to 60. Bus bandwidth: 8 x 40 x 0.85 x 7/8 x 2 = 476 GB/s,
    /// against ~480 GB/s measured on 8 H100s (NCCL's maintainer in
    /// NVIDIA/nccl-tests#212). A GB200 NVL72: 18 links at 40.1 (721.8),
    /// 32 of its 72 GPUs head, 33 channels fit at 20 GB/s; 32 x 20 x
    /// 0.74 x 31/32 x 2 = 917.6 GB/s.
    #[test]
    fn nvls_follows_nccls_search_and_model() {
        let h100 = CommShape {
            ranks: 8,
            nodes: 1,
            nvls: true,
            ..dgx(1)
        };
        let g = h100.nvls_graph().unwrap();
        assert_eq!(
            g,
            NvlsGraph {
                heads: 8,
                bw_intra: 40.0,
                bw_inter: 60.0
            }
        );
        let (bus, ch) = h100.nvls_bus(Op::AllReduce, false).unwrap();
        assert!((bus - 476.0).abs() < 1e-9, "{bus}");
        assert_eq!(ch, 8.0);
        let nvl72 = CommShape {
            ranks: 72,
            nvlink_gbs: 900.0,
            arch: Arch::Blackwell,
            ..h100
        };
        let g = nvl72.nvls_graph().unwrap();
        assert_eq!((g.heads, g.bw_intra, g.bw_inter), (32, 20.0, 40.0));
        let (bus, _) = nvl72.nvls_bus(Op::AllReduce, false).unwrap();
        assert!((bus - 917.6).abs() < 1e-9, "{bus}");
        // The rate NVLS moves a GPU's bytes at: the all-reduce's
        // algorithm bandwidth x (1 + 1/heads).
        let r = h100.nvls_rate().unwrap();
        assert!(
            (r - 476.0 * 8.0 / 14.0 * 9.0 / 8.0 * 1e9).abs() < 1.0,
            "{r}"
        );
        // Not without switches that reduce, before Hopper, or with one
        // GPU per server.
        assert!(CommShape {
            nvls: false,
            ..h100
        }
        .nvls_graph()
        .is_none());
        assert!(CommShape {
            arch: Arch::Ampere,
            ..h100
        }
        .nvls_graph()
        .is_none());
        let one_per_server = CommShape {
            ranks: 8,
            nodes: 8,
            nvls: true,
            ..dgx(8)
        };
        assert!(one_per_server.nvls_graph().is_none());
    }

    /// NCCL's picks on one DGX H100 with NVLS: the ring with LL up to
    /// 1 MB, NVLS from 4 MB (as a DGX H100 user reports NCCL's log in
    /// NVIDIA/nccl-tests#309: ring LL to 1 MB, NVLS from 2 MB); no NVLS
    /// across servers, where NVLS-tree takes large all-reduces.
    #[test]
    fn nvls_is_picked_for_large_all_reduces() {
        let h100 = CommShape {
            ranks: 8,
            nodes: 1,
            nvls: true,
            ..dgx(1)
        };
        let pick = |s: &CommShape, b: u64| s.choose(Op::AllReduce, b, None, None).unwrap();
        let small = pick(&h100, 1 << 20);
        assert_eq!(
            (small.algorithm, small.protocol),
            (Algorithm::Ring, Protocol::Ll)
        );
        let big = pick(&h100, 4 << 20);
        assert_eq!(big.algorithm, Algorithm::Nvls);
        assert_eq!(big.channels, 16);
        // NVLS's latency is NCCL's 25 us; its time bytes over algbw.
        let t = h100
            .time_us(Op::AllReduce, Algorithm::Nvls, Protocol::Simple, 1 << 30)
            .unwrap();
        let want = 25.0 + f64::from(1 << 30) / (1000.0 * 476.0 * 8.0 / 14.0);
        assert!((t - want).abs() < 1e-6 * want, "{t} against {want}");
        assert!(h100
            .time_us(Op::AllReduce, Algorithm::Nvls, Protocol::Ll128, 1 << 30)
            .is_none());
        let across = CommShape {
            nvls: true,
            ..dgx(8)
        };
        assert!(across
            .time_us(Op::AllReduce, Algorithm::Nvls, Protocol::Simple, 1 << 30)
            .is_none());
        assert!(across
            .time_us(
                Op::AllGather,
                Algorithm::NvlsTree,
                Protocol::Simple,
                1 << 30
            )
            .is_none());
        assert_eq!(pick(&across, 1 << 30).algorithm, Algorithm::NvlsTree);
        // NVLS-tree on 8 servers: min(40 x 0.85 x 7/8 x 2, 48, 45.5)
        // per channel, 8 channels; latency 25 + 2 x 3 x 20.9 us.
        let t = across
            .time_us(
                Op::AllReduce,
                Algorithm::NvlsTree,
                Protocol::Simple,
                1 << 30,
            )
            .unwrap();
        let bus = 8.0 * 45.5;
        let want = 25.0 + 6.0 * 20.9 + f64::from(1 << 30) / (1000.0 * bus * 64.0 / 126.0);
        assert!((t - want).abs() < 1e-6 * want, "{t} against {want}");
    }
}
