//! PFC deadlock: a cycle of switch egress queues, each paused by the
//! switch it sends to, where that switch's frames from the paused link
//! wait in the next queue of the cycle (a cyclic buffer dependency that
//! has closed). Nothing in it can move again, so a run in that state
//! stops and names the cycle instead of spinning until a time limit.

use super::{Owner, Simulation};
use crate::switch::classify::QUEUES;
use crate::topology::{PortId, Topology};
use crate::units::SimTime;

/// One queue of a cycle: a switch egress port and its priority.
pub type Waiting = (PortId, u8);

/// What the run keeps between checks: a cycle seen with no progress, and
/// when it was first seen.
#[derive(Debug, Default)]
pub struct Watch {
    suspect: Option<(SimTime, Vec<Waiting>)>,
}

/// A paused, non-empty switch egress queue (`port`, `prio`) and the
/// ingress ports of its switch whose frames it holds: what one partition
/// of a run knows of the queues it owns, enough to find a cycle across
/// partitions.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stuck {
    pub port: PortId,
    pub prio: u8,
    pub holds_from: Vec<PortId>,
}

impl Simulation {
    /// A cycle of paused, non-empty switch egress queues in which each
    /// queue's frames are stuck behind the next: the first found, from the
    /// lowest port, so the same state gives the same answer.
    pub fn pfc_cycle(&self) -> Option<Vec<Waiting>> {
        cycle_among(&self.topo, &self.stuck_queues(self.now, |_| true))
    }

    /// The paused, non-empty switch egress queues at `now` among the ports
    /// `mine` says are this simulation's, lowest port first.
    pub(super) fn stuck_queues(&self, now: SimTime, mine: impl Fn(usize) -> bool) -> Vec<Stuck> {
        let mut out = Vec::new();
        for (p, port) in self.topo.ports.iter().enumerate() {
            let Owner::Switch(s) = port.owner else {
                continue;
            };
            if !mine(p) {
                continue;
            }
            let queues = &self.egress.queues()[p];
            for q in 0..QUEUES as u8 {
                if queues.is_nonempty(q) && queues.is_paused(q, now) {
                    let holds_from = self.topo.switches[s.idx()]
                        .ports
                        .iter()
                        .copied()
                        .filter(|i| queues.holds_from(q, i.0))
                        .collect();
                    out.push(Stuck {
                        port: PortId(p as u32),
                        prio: q,
                        holds_from,
                    });
                }
            }
        }
        out
    }
}

/// The first cycle among `stuck` queues (sorted by port and priority),
/// each waiting on the next: a paused queue waits on the queues of the
/// switch at the far end of its link that hold frames which came in over
/// that link.
pub fn cycle_among(topo: &Topology, stuck: &[Stuck]) -> Option<Vec<Waiting>> {
    if stuck.len() < 2 {
        return None;
    }
    let node = |p: PortId, q: u8| p.idx() * QUEUES + q as usize;
    let mut index = std::collections::HashMap::with_capacity(stuck.len());
    for (i, s) in stuck.iter().enumerate() {
        index.insert(node(s.port, s.prio), i);
    }
    let next: Vec<Vec<usize>> = stuck
        .iter()
        .map(|s| {
            let ingress = topo.ports[s.port.idx()].peer;
            let Owner::Switch(sw) = topo.ports[ingress.idx()].owner else {
                return Vec::new();
            };
            let mut to = Vec::new();
            for &out in &topo.switches[sw.idx()].ports {
                for q2 in 0..QUEUES as u8 {
                    if let Some(&j) = index.get(&node(out, q2)) {
                        if stuck[j].holds_from.contains(&ingress) {
                            to.push(j);
                        }
                    }
                }
            }
            to
        })
        .collect();
    // Depth-first search for a back edge.
    const NEW: u8 = 0;
    const OPEN: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; stuck.len()];
    for start in 0..stuck.len() {
        if state[start] != NEW || next[start].is_empty() {
            continue;
        }
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        state[start] = OPEN;
        while let Some(&mut (v, ref mut i)) = path.last_mut() {
            if let Some(&w) = next[v].get(*i) {
                *i += 1;
                match state[w] {
                    NEW => {
                        state[w] = OPEN;
                        path.push((w, 0));
                    }
                    OPEN => {
                        let from = path.iter().position(|&(x, _)| x == w).unwrap_or(0);
                        return Some(
                            path[from..]
                                .iter()
                                .map(|&(x, _)| (stuck[x].port, stuck[x].prio))
                                .collect(),
                        );
                    }
                    _ => {}
                }
            } else {
                state[v] = DONE;
                path.pop();
            }
        }
    }
    None
}

impl Simulation {
    /// Called while no transfer makes progress: a deadlock is a cycle
    /// that is still there, unchanged, one watch interval (see
    /// `Simulation::watch_interval`) after it was first seen (so a
    /// passing alignment of pauses is not one).
    pub(super) fn deadlocked(&mut self, watch: &mut Watch) -> bool {
        let cycle = self.pfc_cycle();
        let now = self.now;
        self.confirm_deadlock(watch, cycle, now)
    }

    /// As `deadlocked`, given the cycle seen at `now` (in a partitioned
    /// run, found among every partition's queues).
    pub(super) fn confirm_deadlock(
        &mut self,
        watch: &mut Watch,
        cycle: Option<Vec<Waiting>>,
        now: SimTime,
    ) -> bool {
        let Some(cycle) = cycle else {
            watch.suspect = None;
            return false;
        };
        match &watch.suspect {
            Some((since, c)) if *c == cycle => {
                if now.saturating_sub(*since) >= self.watch_interval() {
                    self.records.deadlock = cycle;
                    return true;
                }
            }
            _ => watch.suspect = Some((now, cycle)),
        }
        false
    }
}

impl Watch {
    /// Progress was made: whatever was suspected is not a deadlock.
    pub fn clear(&mut self) {
        self.suspect = None;
    }
}
