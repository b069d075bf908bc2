//! The RDMA NIC: reliable-connected queue pairs running RoCEv2.
//!
//! `transport` holds the two halves of a queue pair as caller-driven state
//! machines (the requester that segments an RDMA Write into packets and
//! recovers losses with go-back-N, the responder that checks PSNs and
//! acknowledges); `rate` the per-QP rate controller the requester consults
//! before each packet, and `dcqcn` the DCQCN reaction point it can run; `dctcp`, `swift`
//! and `hpcc` the congestion windows a QP can keep instead. The event loop owns them and turns what they return
//! into packets and timers. Each NIC port serves its active QPs round
//! robin, control packets (ACK/NAK) first. The sending GPU's PCIe link
//! paces its QPs in the event loop; NVLink copies never reach the NIC.

pub mod dcqcn;
pub mod dctcp;
pub mod hpcc;
pub mod mrc;
pub mod nics;
pub mod rate;
pub mod swift;
pub mod transport;

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
    /// QPs run DCQCN; otherwise every QP sends at line rate (or under
    /// `dctcp`'s window).
    pub dcqcn_enabled: bool,
    /// QPs keep a congestion window: DCTCP-style (`congestion_control =
    /// "dctcp"`), Swift-style (`"swift"`) or HPCC's (`"hpcc"`).
    pub window: Option<WindowParams>,
    /// DCQCN parameters; their preset also gives the switch-side marking
    /// thresholds classes leave unset, whether or not NICs react.
    pub dcqcn: dcqcn::DcqcnParams,
}

impl TransportConfig {
    /// The QPs' congestion control, as the scenario names it.
    pub fn congestion_control(&self) -> &'static str {
        match (&self.window, self.dcqcn_enabled) {
            (Some(WindowParams::Dctcp(_)), _) => "dctcp",
            (Some(WindowParams::Swift(_)), _) => "swift",
            (Some(WindowParams::Hpcc(_)), _) => "hpcc",
            (None, true) => "dcqcn",
            (None, false) => "none",
        }
    }
}

/// A window-based congestion control and its parameters.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum WindowParams {
    Dctcp(dctcp::DctcpParams),
    Swift(swift::SwiftParams),
    Hpcc(hpcc::HpccParams),
}
