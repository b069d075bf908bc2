//! Partitions' shares of the runtime's state, merged by owner at the end
//! of a parallel run and as jobs' iterations are forgotten: what each
//! partition knows of a later iteration (`PartEnds`) and of a transfer
//! (`FlowEnds`), and how another partition's share is given to the same
//! part or transfer here.

use super::homes::Home;
use super::later::Part;
use super::pass_rows::ConnRow;
use super::FlowState;
use crate::topology::{NicId, Topology};
use crate::units::SimTime;

/// What a partition knows of a job's iteration made as the run went: its
/// tasks' times, its transfers' ends, its pass connections' rows.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct PartEnds {
    made_at: SimTime,
    started: Vec<SimTime>,
    done: Vec<SimTime>,
    flows: Vec<FlowEnds>,
    rows: Vec<ConnRow>,
}

/// What a partition knows of a transfer: when it started and was
/// acknowledged (sender's side), delivered (receiver's).
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct FlowEnds {
    start: SimTime,
    tx_done_qps: u32,
    acked: Option<SimTime>,
    rx_done_qps: u32,
    finish: Option<SimTime>,
    retx_bytes: u64,
    timeouts: u32,
    out_of_order: u32,
    naks: u32,
}

impl PartEnds {
    pub fn of(p: &Part) -> PartEnds {
        PartEnds {
            made_at: p.made_at,
            started: p.started.clone(),
            done: p.done.clone(),
            flows: p.flows.iter().map(FlowEnds::of).collect(),
            rows: p.rows.clone(),
        }
    }

    /// Gives `mine`, the same part, what another partition, whose hosts
    /// `theirs` says, did of it.
    pub fn give(self, mine: &mut Part, topo: &Topology, theirs: impl Fn(u32) -> bool) {
        for (i, h) in mine.homes.iter().enumerate() {
            match *h {
                Home::Host { begin, done } => {
                    if theirs(begin) {
                        mine.started[i] = self.started[i];
                    }
                    if theirs(done) {
                        mine.done[i] = self.done[i];
                    }
                }
                // What runs everywhere waits for nothing on a host: it ran
                // first where the part was made first, when one queue
                // runs it.
                Home::Everywhere => {
                    mine.started[i] = mine.started[i].min(self.started[i]);
                    mine.done[i] = mine.done[i].min(self.done[i]);
                }
                Home::Last => {}
            }
        }
        mine.made_at = mine.made_at.min(self.made_at);
        for (f, ends) in mine.flows.iter_mut().zip(self.flows) {
            ends.give(f, |nic| theirs(topo.nics[nic.idx()].host.0));
        }
        for (r, o) in mine.rows.iter_mut().zip(&self.rows) {
            r.absorb(o);
        }
    }
}

impl FlowEnds {
    pub fn of(f: &FlowState) -> FlowEnds {
        FlowEnds {
            start: f.start,
            tx_done_qps: f.tx_done_qps,
            acked: f.acked,
            rx_done_qps: f.rx_done_qps,
            finish: f.finish,
            retx_bytes: f.retx_bytes,
            timeouts: f.timeouts,
            out_of_order: f.out_of_order,
            naks: f.naks,
        }
    }

    /// Gives `f` the sides of it that ran on NICs `theirs` says are the
    /// other partition's.
    pub fn give(self, f: &mut FlowState, theirs: impl Fn(NicId) -> bool) {
        if theirs(f.spec.src_nic) {
            f.start = self.start;
            f.tx_done_qps = self.tx_done_qps;
            f.acked = self.acked;
            f.retx_bytes = self.retx_bytes;
            f.timeouts = self.timeouts;
        }
        if theirs(f.spec.dst_nic) {
            f.rx_done_qps = self.rx_done_qps;
            f.finish = self.finish;
            f.out_of_order = self.out_of_order;
            f.naks = self.naks;
        }
    }
}
