//! The vocabulary of collectives: which operation (`Op`), which of
//! NCCL's algorithms carries it (`Algorithm`) and which protocol lays its
//! data on the wire (`Protocol`). Below both the collectives' builder
//! (`collective`) and NCCL's tuner (`tuner`), which choose among them.

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Op {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    AllToAll,
}

impl Op {
    pub const NAMES: &'static str =
        "all-reduce, all-gather, reduce-scatter, broadcast or all-to-all";

    pub fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "all-reduce" => Op::AllReduce,
            "all-gather" => Op::AllGather,
            "reduce-scatter" => Op::ReduceScatter,
            "broadcast" => Op::Broadcast,
            "all-to-all" => Op::AllToAll,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Op::AllReduce => "all-reduce",
            Op::AllGather => "all-gather",
            Op::ReduceScatter => "reduce-scatter",
            Op::Broadcast => "broadcast",
            Op::AllToAll => "all-to-all",
        }
    }

    /// nccl-tests' bus bandwidth factor: busbw = algbw * factor, which
    /// makes busbw comparable with the hardware's link speed whatever the
    /// rank count.
    pub fn busbw_factor(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            Op::AllReduce => 2.0 * (n - 1.0) / n,
            Op::AllGather | Op::ReduceScatter | Op::AllToAll => (n - 1.0) / n,
            Op::Broadcast => 1.0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Algorithm {
    /// NCCL's tuner chooses (`workload::tuner`); resolved before the
    /// collective is built.
    Auto,
    Ring,
    Tree,
    /// NCCL's PAT all-gather and reduce-scatter (one GPU per server).
    Pat,
    HalvingDoubling,
    Direct,
    Hierarchical,
    /// NVLink SHARP: the NVLink switch chips reduce and multicast, inside
    /// one scale-up domain.
    Nvls,
    /// NVLS inside each domain and a tree across them over the network.
    NvlsTree,
}

impl Algorithm {
    pub fn parse(s: &str) -> Option<Algorithm> {
        Some(match s {
            "auto" => Algorithm::Auto,
            "ring" => Algorithm::Ring,
            "tree" => Algorithm::Tree,
            "pat" => Algorithm::Pat,
            "halving-doubling" => Algorithm::HalvingDoubling,
            "direct" => Algorithm::Direct,
            "hierarchical" => Algorithm::Hierarchical,
            "nvls" => Algorithm::Nvls,
            "nvls-tree" => Algorithm::NvlsTree,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Auto => "auto",
            Algorithm::Ring => "ring",
            Algorithm::Tree => "tree",
            Algorithm::Pat => "pat",
            Algorithm::HalvingDoubling => "halving-doubling",
            Algorithm::Direct => "direct",
            Algorithm::Hierarchical => "hierarchical",
            Algorithm::Nvls => "nvls",
            Algorithm::NvlsTree => "nvls-tree",
        }
    }

    /// The algorithms that implement `op`.
    pub fn for_op(op: Op) -> &'static [Algorithm] {
        use Algorithm::*;
        match op {
            Op::AllToAll => &[Direct],
            Op::AllReduce => &[
                Auto,
                Ring,
                Tree,
                HalvingDoubling,
                Hierarchical,
                Nvls,
                NvlsTree,
            ],
            Op::AllGather | Op::ReduceScatter => &[Auto, Ring, Pat, HalvingDoubling, Nvls],
            Op::Broadcast => &[Auto, Ring],
        }
    }
}

/// NCCL's protocols: how data is laid out on the wire and how large a
/// step is. Simple sends the data as it is, in steps of 512 KiB (a 4 MiB
/// buffer over NCCL's 8 steps); LL128 sends 128-byte lines of 120 bytes
/// of data and an 8-byte flag, in steps of 576,000 data bytes; LL sends
/// 16-byte lines of two 4-byte data words, each with its flag, in steps
/// of 32 KiB of data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Protocol {
    Simple,
    Ll128,
    Ll,
}

impl Protocol {
    pub const NAMES: &'static str = "simple, ll128 or ll";

    pub fn parse(s: &str) -> Option<Protocol> {
        Some(match s {
            "simple" => Protocol::Simple,
            "ll128" => Protocol::Ll128,
            "ll" => Protocol::Ll,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Simple => "simple",
            Protocol::Ll128 => "ll128",
            Protocol::Ll => "ll",
        }
    }

    /// Bytes on the wire (and over NVLink) for `data` bytes of payload.
    pub fn wire(self, data: u64) -> u64 {
        match self {
            Protocol::Simple => data,
            Protocol::Ll128 => data.div_ceil(120) * 128,
            Protocol::Ll => data.div_ceil(8) * 16,
        }
    }

    /// The largest message a step sends by default (data bytes).
    pub fn chunk(self) -> u64 {
        match self {
            Protocol::Simple => 512 * 1024,
            Protocol::Ll128 => 576_000,
            Protocol::Ll => 32 * 1024,
        }
    }
}
