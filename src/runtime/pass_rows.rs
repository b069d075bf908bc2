//! What the passes' messages cost, by connection (`ConnRow`), and the
//! messages in flight (`PassFlows`): the data `passes` runs them with and
//! the outputs read.

use super::FlowState;
use crate::topology::{FlowId, GpuId};
use crate::units::SimTime;
use rustc_hash::FxHashMap as HashMap;

/// The passes' messages in flight and their connections' totals.
#[derive(Default, serde::Serialize, serde::Deserialize)]
pub struct PassFlows {
    /// The first task and transfer numbers of the passes' messages.
    pub base_task: u32,
    pub base_flow: u32,
    /// Whether the numbers above are set: passes may come only in a
    /// later part (a trace's first part may be all compute), so whether
    /// the first part has passes does not say.
    pub(crate) numbered: bool,
    /// The first QP of each pass position's connection (`u32::MAX` for
    /// an NVLink connection).
    pub first_qp: Vec<Vec<u32>>,
    /// Transfers started or received and not yet added to their row
    /// (a partition's own; not handed over at the merge).
    #[serde(skip)]
    pub(crate) live: HashMap<u32, Live>,
    /// One row per network connection of a pass, in pass and position
    /// order; `row_of[pass]` is its first.
    pub rows: Vec<ConnRow>,
    pub(crate) row_of: Vec<u32>,
    /// Writes with bytes the passes will make, and their bytes.
    pub net_messages: u64,
    pub net_bytes: u64,
    /// When a pass's last task was done.
    pub last_done: SimTime,
    /// Ideal completion times by first QP and size (a connection's
    /// messages have a few sizes).
    #[serde(skip)]
    pub(crate) ideal: HashMap<(u32, u64), SimTime>,
}

pub(crate) struct Live {
    pub(crate) flow: FlowState,
    /// Sender's and receiver's halves added to the row.
    pub(crate) sent: bool,
    pub(crate) received: bool,
}

/// What the messages of one connection of a pass cost, summed as they
/// finish: the sender's half (start, acknowledgement, resent bytes,
/// timeouts) and the receiver's (delivery, packets, out of order, NAKs).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ConnRow {
    pub workload: u32,
    pub src: GpuId,
    pub dst: GpuId,
    /// Its first QP and QP count (`u32::MAX` and 0 for NVLink).
    pub first_qp: u32,
    pub qps: u32,
    /// Messages with bytes it will carry.
    pub planned: u64,
    /// Messages the receiver has in full, and their bytes and packets.
    pub messages: u64,
    pub bytes: u64,
    pub pkts: u64,
    /// Messages the sender has every acknowledgement of.
    pub acked_messages: u64,
    pub start: SimTime,
    pub finish: Option<SimTime>,
    pub acked: Option<SimTime>,
    /// The sum of the messages' ideal completion times.
    pub ideal: SimTime,
    pub retx_bytes: u64,
    pub timeouts: u64,
    pub out_of_order: u64,
    pub naks: u64,
}

impl ConnRow {
    /// Adds another partition's halves of the same connection.
    pub(crate) fn absorb(&mut self, o: &ConnRow) {
        self.messages += o.messages;
        self.bytes += o.bytes;
        self.pkts += o.pkts;
        self.acked_messages += o.acked_messages;
        self.start = self.start.min(o.start);
        self.finish = self.finish.max(o.finish);
        self.acked = self.acked.max(o.acked);
        self.ideal += o.ideal;
        self.retx_bytes += o.retx_bytes;
        self.timeouts += o.timeouts;
        self.out_of_order += o.out_of_order;
        self.naks += o.naks;
    }
}

impl PassFlows {
    pub fn is_pass_flow(&self, f: FlowId) -> bool {
        self.numbered && f.0 >= self.base_flow && f.0 < super::serving::FLOW_BASE
    }

    pub fn is_pass_task(&self, t: u32) -> bool {
        self.numbered && t >= self.base_task
    }

    /// Transfers in flight.
    pub fn live(&self) -> impl Iterator<Item = &FlowState> {
        self.live.values().map(|l| &l.flow)
    }

    /// Adds another partition's rows (each half of a message is added in
    /// the one partition that has it).
    pub(crate) fn absorb(&mut self, other: &PassFlows) {
        for (mine, theirs) in self.rows.iter_mut().zip(&other.rows) {
            mine.absorb(theirs);
        }
        self.last_done = self.last_done.max(other.last_done);
    }
}

/// The rows of `passes`' connections (`first_qp` per pass and
/// connection), and each pass's first row; adds the messages they
/// will write to what the run offers.
pub(crate) fn pass_rows(
    topo: &crate::topology::Topology,
    pf: &mut PassFlows,
    passes: &[crate::workload::pass::Pass],
    first_qp: &[Vec<u32>],
    offered: bool,
) -> (Vec<ConnRow>, Vec<u32>) {
    let (mut rows, mut row_of) = (Vec::new(), Vec::with_capacity(passes.len()));
    for (pi, pass) in passes.iter().enumerate() {
        row_of.push(rows.len() as u32);
        for (c, conn) in pass.conns.iter().enumerate() {
            let first = first_qp[pi][c];
            let c = c as u32;
            let planned = pass.sends_on(c);
            let net = pass.conn_spec(topo, c, 0).filter(|_| first != u32::MAX);
            let (src, dst, qps) = match net {
                Some(spec) => {
                    if offered {
                        pf.net_messages += planned;
                        pf.net_bytes += pass.bytes_on(c);
                    }
                    (spec.src, spec.dst, spec.qps.max(1))
                }
                None => (conn.from, conn.to, 0),
            };
            rows.push(ConnRow {
                workload: pass.workload,
                src,
                dst,
                first_qp: first,
                qps,
                planned,
                messages: 0,
                bytes: 0,
                pkts: 0,
                acked_messages: 0,
                start: SimTime::MAX,
                finish: None,
                acked: None,
                ideal: SimTime::ZERO,
                retx_bytes: 0,
                timeouts: 0,
                out_of_order: 0,
                naks: 0,
            });
        }
    }
    (rows, row_of)
}
