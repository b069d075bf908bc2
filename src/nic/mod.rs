//! The RDMA NIC: reliable-connected queue pairs running RoCEv2.
//!
//! `transport` holds the two halves of a queue pair as caller-driven state
//! machines (the requester that segments an RDMA Write into packets and
//! recovers losses with go-back-N, the responder that checks PSNs and
//! acknowledges); `rate` the per-QP rate controller the requester consults
//! before each packet, and `dcqcn` the DCQCN reaction point it can run; `dctcp`, `swift`
//! and `hpcc` the congestion windows a QP can keep instead, and `timely`
//! a rate moved by round-trip times, and `uec` the NSCC-style window of
//! the multipath transport. The event loop owns them and turns what they return
//! into packets and timers. Each NIC port serves its active QPs round
//! robin, control packets (ACK/NAK) first. The sending GPU's PCIe link
//! paces its QPs in the event loop; NVLink copies never reach the NIC.

pub mod dcqcn;
pub mod dctcp;
pub mod hpcc;
pub mod mrc;
pub mod nics;
pub mod pacer;
pub mod rate;
pub mod swift;
pub mod timely;
pub mod transport;
pub mod uec;

use crate::units::SimTime;

/// How an RDMA Write is cut into packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum WriteMode {
    /// One message: Write First (with RETH), Middle..., Last; the
    /// responder needs the packets in order.
    FirstMiddleLast,
    /// Every packet is a Write Only with its own RETH, so each can be
    /// placed on its own.
    WriteOnly,
}

impl WriteMode {
    pub fn name(self) -> &'static str {
        match self {
            WriteMode::FirstMiddleLast => "first-middle-last",
            WriteMode::WriteOnly => "write-only",
        }
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct TransportConfig {
    /// Payload bytes per packet.
    pub mtu: u32,
    /// What receivers do with Write First/Middle/Last packets that arrive
    /// ahead of a gap (Write Only packets are always placed directly).
    pub ooo: transport::OooPolicy,
    /// Reorder buffer per NIC, in payload bytes (with `OooPolicy::Reorder`).
    pub reorder_buffer: u64,
    /// The MRC-like multipath transport instead of RC go-back-N.
    pub mrc: Option<mrc::MrcConfig>,
    pub write_mode: WriteMode,
    /// The responder acknowledges every this many in-order packets (and
    /// always the last one).
    pub ack_every: u32,
    /// Retransmission timeout: with data outstanding and no progress for
    /// this long, the requester goes back to its oldest unacknowledged PSN.
    pub rto: SimTime,
    /// DSCP of data and ACK packets (RoCEv2 convention: 24) of workloads
    /// that give none of their own and whose tenant has none.
    pub data_dscp: u8,
    /// DSCP of each tenant's data, by tenant id (`[transport]
    /// tenant_dscp`).
    pub tenant_dscp: Vec<(u16, u8)>,
    /// DSCP of CNPs (convention: 48).
    pub cnp_dscp: u8,
    /// The congestion control of workloads that give none of their own
    /// and whose tenant has none (`congestion_control`).
    pub cc: Cc,
    /// Each tenant's congestion control, by tenant id (`[transport]
    /// tenant_congestion_control`).
    pub tenant_cc: Vec<(u16, Cc)>,
    /// The ACK-driven congestion controls' settings (`[dctcp]`, `[swift]`,
    /// `[hpcc]`, `[timely]`), for the QPs that run them.
    pub windows: WindowParams,
    /// DCQCN parameters; their preset also gives the switch-side marking
    /// thresholds classes leave unset, whether or not NICs react.
    pub dcqcn: dcqcn::DcqcnParams,
}

/// A QP's congestion control.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Cc {
    /// Line rate: only PFC (and the port) hold the QP back.
    None,
    /// DCQCN's rate, cut by CNPs.
    Dcqcn,
    /// Congestion windows: DCTCP-style, Swift-style, HPCC's.
    Dctcp,
    Swift,
    Hpcc,
    /// TIMELY's rate, moved by round-trip times.
    Timely,
    /// An NSCC-style window over the multipath transport.
    Uec,
}

impl Cc {
    /// Every one, by its scenario name.
    pub const ALL: [(&'static str, Cc); 7] = [
        ("dcqcn", Cc::Dcqcn),
        ("dctcp", Cc::Dctcp),
        ("swift", Cc::Swift),
        ("hpcc", Cc::Hpcc),
        ("timely", Cc::Timely),
        ("uec", Cc::Uec),
        ("none", Cc::None),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Cc::None => "none",
            Cc::Dcqcn => "dcqcn",
            Cc::Dctcp => "dctcp",
            Cc::Swift => "swift",
            Cc::Hpcc => "hpcc",
            Cc::Timely => "timely",
            Cc::Uec => "uec",
        }
    }

    /// Keeps a congestion window (and so takes an ACK per packet).
    pub fn windowed(self) -> bool {
        matches!(self, Cc::Dctcp | Cc::Swift | Cc::Hpcc)
    }

    /// Reacts to each ACK (a window, or TIMELY's round trips), so takes
    /// an ACK per packet.
    pub fn ack_driven(self) -> bool {
        self.windowed() || matches!(self, Cc::Timely | Cc::Uec)
    }

    /// Runs over the multipath transport only (`uec`); the other
    /// ACK-driven ones over RC only.
    pub fn needs_mrc(self) -> bool {
        self == Cc::Uec
    }
}

/// The settings of the ACK-driven congestion controls (each its table's,
/// or its defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WindowParams {
    pub dctcp: dctcp::DctcpParams,
    pub swift: swift::SwiftParams,
    pub hpcc: hpcc::HpccParams,
    pub timely: timely::TimelyParams,
    pub uec: uec::UecParams,
}
