//! A transfer's state in the job runtime: one RDMA Write, from its start to
//! its delivery and last acknowledgement.

use crate::units::SimTime;
use crate::workload::FlowSpec;

/// The task of a transfer that no task gates: it starts alone.
pub const NO_TASK: u32 = u32::MAX;

#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct FlowState {
    pub spec: FlowSpec,
    /// When it started (its task's start for a gated flow).
    pub start: SimTime,
    /// Its QPs: `first_qp..first_qp + n_qps` (its connection's first QPs
    /// when `posts`).
    pub first_qp: u32,
    pub n_qps: u32,
    /// Its messages are posted on its connection's QPs when it starts
    /// (otherwise its QPs are its own and carry its write from the
    /// start).
    pub posts: bool,
    /// Packets it takes (over all its QPs).
    pub pkts: u32,
    pub rx_done_qps: u32,
    pub tx_done_qps: u32,
    /// When the last byte was delivered in order at the destination.
    pub finish: Option<SimTime>,
    /// When the sender saw the last acknowledgement.
    pub acked: Option<SimTime>,
    /// Completion time on an idle fabric (see `ideal_fct`).
    pub ideal_fct: SimTime,
    /// What its messages cost once done (`transport::Msg`), at the
    /// sender: payload bytes resent and retransmission timeouts; at the
    /// receiver: packets out of order and NAKs sent.
    pub retx_bytes: u64,
    pub timeouts: u32,
    pub out_of_order: u32,
    pub naks: u32,
}

impl FlowState {
    /// A transfer not yet started, on QPs `first_qp..first_qp + n_qps`,
    /// taking `pkts` packets.
    pub fn new(spec: FlowSpec, first_qp: u32, n_qps: u32, posts: bool, pkts: u32) -> FlowState {
        FlowState {
            start: if spec.gated { SimTime::MAX } else { spec.start },
            spec,
            first_qp,
            n_qps,
            posts,
            pkts,
            rx_done_qps: 0,
            tx_done_qps: 0,
            finish: None,
            acked: None,
            ideal_fct: SimTime::ZERO,
            retx_bytes: 0,
            timeouts: 0,
            out_of_order: 0,
            naks: 0,
        }
    }
}

/// Share `i` of `bytes` over `n` QPs.
pub fn share(bytes: u64, n: u32, i: u32) -> u64 {
    bytes / n as u64 + u64::from((i as u64) < bytes % n as u64)
}
