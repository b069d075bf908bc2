//! What a run produces besides its components' own state: the fabric-wide
//! counters, when each congestion mechanism first acted, and the estimate
//! of what the run should cost.

use crate::nic::nics::NicCounters;
use crate::switch::egress::{EgressCounters, EgressFirsts};
use crate::units::SimTime;

/// Fabric-wide counters, each only growing, so that the counts of a run
/// cut into partitions add up (payload in flight is not kept: it is sent
/// less arrived and dropped). The engine keeps those of the payload ledger,
/// transfers and drops; those egress keeps (`EgressCounters`: link
/// transmissions, marks, drops in the switches, PFC frames, trims, the
/// watchdog) and the NICs keep (`NicCounters`: packets sent, ACKs, NAKs,
/// CNPs) are filled in by `Simulation::counters`.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    pub events: u64,
    /// Frames of every kind put on any link.
    pub link_transmissions: u64,
    pub data_packets_sent: u64,
    pub payload_sent: u64,
    pub payload_arrived: u64,
    pub payload_dropped: u64,
    /// Payload accepted in order by responders (goodput).
    pub bytes_delivered: u64,
    pub drops: u64,
    pub drop_bytes: u64,
    pub acks_sent: u64,
    pub naks_sent: u64,
    pub flows_completed: u64,
    /// Transfers whose sender has seen every acknowledgement.
    pub flows_acked: u64,
    pub ecn_marks: u64,
    pub wred_drops: u64,
    pub cnps_sent: u64,
    pub cnps_received: u64,
    /// PFC frames with a pause time, and with quanta 0 (resume).
    pub pfc_pause_frames: u64,
    pub pfc_resume_frames: u64,
    /// Packets of a lossless class dropped for lack of buffer or headroom.
    pub lossless_drops: u64,
    pub trimmed_packets: u64,
    pub watchdog_events: u64,
    pub watchdog_drops: u64,
}

impl Counters {
    /// These counters with egress's filled in.
    pub fn with_egress(self, e: &EgressCounters) -> Counters {
        Counters {
            link_transmissions: e.link_transmissions,
            ecn_marks: e.ecn_marks,
            wred_drops: e.wred_drops,
            lossless_drops: e.lossless_drops,
            trimmed_packets: e.trimmed_packets,
            watchdog_events: e.watchdog_events,
            watchdog_drops: e.watchdog_drops,
            pfc_pause_frames: e.pfc_pause_frames,
            pfc_resume_frames: e.pfc_resume_frames,
            ..self
        }
    }
}

impl Counters {
    /// These counters with the NICs' filled in.
    pub fn with_nics(self, n: &NicCounters) -> Counters {
        Counters {
            data_packets_sent: n.data_packets_sent,
            acks_sent: n.acks_sent,
            naks_sent: n.naks_sent,
            cnps_sent: n.cnps_sent,
            cnps_received: n.cnps_received,
            ..self
        }
    }
}

/// When each congestion mechanism first acted: the order a user reads
/// to see whether ECN acted before PFC. The engine sets the NIC's (CNP,
/// rate cut); egress's are filled in by `Simulation::firsts`.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct FirstEvents {
    pub ecn_mark_ps: Option<u64>,
    pub cnp_ps: Option<u64>,
    pub rate_cut_ps: Option<u64>,
    /// First pause sent by a switch of each tier (leaf, spine, super
    /// spine), and by a NIC.
    pub pause_by_tier_ps: [Option<u64>; 3],
    pub pause_by_nic_ps: Option<u64>,
    pub resume_ps: Option<u64>,
    pub watchdog_ps: Option<u64>,
    pub lossless_drop_ps: Option<u64>,
}

impl FirstEvents {
    /// These times with egress's filled in.
    pub fn with_egress(self, e: &EgressFirsts) -> FirstEvents {
        FirstEvents {
            ecn_mark_ps: e.ecn_mark_ps,
            pause_by_tier_ps: e.pause_by_tier_ps,
            pause_by_nic_ps: e.pause_by_nic_ps,
            resume_ps: e.resume_ps,
            watchdog_ps: e.watchdog_ps,
            lossless_drop_ps: e.lossless_drop_ps,
            ..self
        }
    }

    /// The NICs' first times (egress keeps its own): the earlier of
    /// these and `other`'s, another partition of the same run.
    pub fn absorb(&mut self, other: &FirstEvents) {
        use crate::switch::egress::earlier;
        earlier(&mut self.cnp_ps, other.cnp_ps);
        earlier(&mut self.rate_cut_ps, other.rate_cut_ps);
    }
}

/// Where a run stands, for a progress line (of one queue, or summed over
/// the partitions of a parallel run).
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    pub now: SimTime,
    /// From 0 to 1 (see `Simulation::done_fraction`).
    pub done: f64,
    pub events: u64,
    pub link_transmissions: u64,
    pub flows_completed: u64,
    pub flows: u64,
}

/// What a run should cost, worked out before it starts from its traffic
/// and paths: every data packet and ACK over each link of its QP's first
/// path, with nothing lost or retransmitted and no CNPs or PFC frames.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimate {
    pub link_transmissions: u64,
    pub events: u64,
}

impl Estimate {
    /// Events per link transmission on the benchmarks (1.5 to 1.9: an
    /// arrival per hop, plus transmitter wake-ups and timers).
    pub const EVENTS_PER_LINK_TX: f64 = 1.7;
    /// Link transmissions per wall second assumed for the wall-time
    /// guess: what the 1024-host benchmark reaches on the reference
    /// machine (BENCHMARKS.md); smaller fabrics run faster, larger slower.
    pub const LINK_TX_PER_SECOND: f64 = 2e6;

    /// The wall-time guess, in seconds.
    pub fn wall_seconds(&self) -> f64 {
        self.link_transmissions as f64 / Self::LINK_TX_PER_SECOND
    }
}

/// Stretches of at least `IdleGaps::AT_LEAST` in which no event of the
/// model happened anywhere (a retransmission timer's wait, a compute
/// phase with nothing in flight, a late start): the run less these is
/// its active period, over which links' utilisation is reported as well.
/// Time-series samples and the balancers' ticks are clockwork, not
/// events of the model, and do not break a stretch.
///
/// A run cut into partitions records each partition's own stretches; the
/// run's are where every partition's overlap (no partition had an event
/// there), kept when still that long. A stretch of the whole run lies
/// inside one of each partition's, so the pieces are exactly the run's.
///
/// The run loop looks at one time before each event, `due`: the last
/// event of the model plus `AT_LEAST`, or zero while a balancer's
/// periodic task is stopped, so that the next event starts it again
/// (`held` then keeps the time). Below it nothing needs doing.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct IdleGaps {
    pub due: SimTime,
    pub held: SimTime,
    /// The stretches, in time order, each from one event to the next.
    pub gaps: Vec<(SimTime, SimTime)>,
}

impl Default for IdleGaps {
    fn default() -> Self {
        IdleGaps {
            due: Self::AT_LEAST,
            held: Self::AT_LEAST,
            gaps: Vec::new(),
        }
    }
}

impl IdleGaps {
    /// The shortest stretch kept: far above any serialization, round
    /// trip or PFC pause of a working fabric.
    pub const AT_LEAST: SimTime = SimTime::from_us(100);

    /// The idle time in all.
    pub fn total(&self) -> SimTime {
        SimTime(self.gaps.iter().map(|(a, b)| b.0 - a.0).sum())
    }

    /// Keeps the stretches in which `other`, another partition of the
    /// same run, was idle too.
    pub fn absorb(&mut self, other: &IdleGaps) {
        let (mut i, mut j) = (0, 0);
        let mut both = Vec::new();
        while i < self.gaps.len() && j < other.gaps.len() {
            let (a, b) = (self.gaps[i], other.gaps[j]);
            let (from, to) = (a.0.max(b.0), a.1.min(b.1));
            if to.saturating_sub(from) >= Self::AT_LEAST {
                both.push((from, to));
            }
            if a.1 < b.1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        self.gaps = both;
    }

    /// The last event of the model plus `AT_LEAST`.
    pub fn model_due(&self) -> SimTime {
        if self.due == SimTime::ZERO {
            self.held
        } else {
            self.due
        }
    }

    /// Makes the next event look at the balancers (`attend`) while `wake`.
    pub fn attend_every_event(&mut self, wake: bool) {
        if wake && self.due != SimTime::ZERO {
            self.held = self.due;
            self.due = SimTime::ZERO;
        } else if !wake && self.due == SimTime::ZERO {
            self.due = self.held;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(us: &[(u64, u64)]) -> IdleGaps {
        IdleGaps {
            gaps: us
                .iter()
                .map(|&(a, b)| (SimTime::from_us(a), SimTime::from_us(b)))
                .collect(),
            ..IdleGaps::default()
        }
    }

    /// Two partitions' stretches: the run's are where both were idle, as
    /// long as the shortest kept.
    #[test]
    fn a_cut_run_is_idle_where_every_partition_was() {
        let mut a = gaps(&[(0, 500), (1000, 5000), (6000, 6150)]);
        let b = gaps(&[
            (100, 450),
            (900, 1050),
            (1200, 4000),
            (4100, 5100),
            (6000, 6200),
        ]);
        a.absorb(&b);
        assert_eq!(
            a.gaps,
            gaps(&[(100, 450), (1200, 4000), (4100, 5000), (6000, 6150)]).gaps
        );
        assert_eq!(a.total(), SimTime::from_us(350 + 2800 + 900 + 150));
        // Overlaps shorter than the shortest kept are not idle stretches.
        let mut c = gaps(&[(0, 150)]);
        c.absorb(&gaps(&[(90, 300)]));
        assert!(c.gaps.is_empty());
    }
}
