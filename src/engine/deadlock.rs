//! PFC deadlock: a cycle of switch egress queues, each paused by the
//! switch it sends to, where that switch's frames from the paused link
//! wait in the next queue of the cycle (a cyclic buffer dependency that
//! has closed). Nothing in it can move again, so a run in that state
//! stops and names the cycle instead of spinning until a time limit.

use super::{Owner, Simulation};
use crate::switch::classify::QUEUES;
use crate::topology::PortId;
use crate::units::SimTime;

/// One queue of a cycle: a switch egress port and its priority.
pub type Waiting = (PortId, u8);

/// What the run keeps between checks: a cycle seen with no progress, and
/// when it was first seen.
#[derive(Debug, Default)]
pub struct Watch {
    suspect: Option<(SimTime, Vec<Waiting>)>,
}

impl Simulation {
    /// A cycle of paused, non-empty switch egress queues in which each
    /// queue's frames are stuck behind the next: the first found, from the
    /// lowest port, so the same state gives the same answer.
    pub fn pfc_cycle(&self) -> Option<Vec<Waiting>> {
        let n = self.egress.ports().len();
        let node = |p: usize, q: usize| p * QUEUES + q;
        let waiting = |p: usize, q: u8| {
            matches!(self.topo.ports[p].owner, Owner::Switch(_))
                && self.egress.queues()[p].is_nonempty(q)
                && self.egress.queues()[p].is_paused(q, self.now)
        };
        let stuck: Vec<(usize, u8)> = (0..n)
            .flat_map(|p| (0..QUEUES as u8).map(move |q| (p, q)))
            .filter(|&(p, q)| waiting(p, q))
            .collect();
        if stuck.len() < 2 {
            return None;
        }
        // Edges: a paused queue (p, q) waits on the queues of the switch
        // at the far end that hold frames which came in over p's link.
        let mut next: Vec<Vec<usize>> = vec![Vec::new(); n * QUEUES];
        for &(p, q) in &stuck {
            {
                let ingress = self.topo.ports[p].peer;
                let Owner::Switch(s) = self.topo.ports[ingress.idx()].owner else {
                    continue;
                };
                for &out in &self.topo.switches[s.idx()].ports {
                    for q2 in 0..QUEUES as u8 {
                        if waiting(out.idx(), q2)
                            && self.egress.queues()[out.idx()].holds_from(q2, ingress.0)
                        {
                            next[node(p, q as usize)].push(node(out.idx(), q2 as usize));
                        }
                    }
                }
            }
        }
        // Depth-first search for a back edge.
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let mut state = vec![NEW; n * QUEUES];
        for start in 0..n * QUEUES {
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
                                    .map(|&(x, _)| {
                                        (PortId((x / QUEUES) as u32), (x % QUEUES) as u8)
                                    })
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

    /// Called while no transfer makes progress: a deadlock is a cycle
    /// that is still there, unchanged, one watch interval (see
    /// `Simulation::watch_interval`) after it was first seen (so a
    /// passing alignment of pauses is not one).
    pub(super) fn deadlocked(&mut self, watch: &mut Watch) -> bool {
        let Some(cycle) = self.pfc_cycle() else {
            watch.suspect = None;
            return false;
        };
        match &watch.suspect {
            Some((since, c)) if *c == cycle => {
                if self.now.saturating_sub(*since) >= self.watch_interval() {
                    self.deadlock = cycle;
                    return true;
                }
            }
            _ => watch.suspect = Some((self.now, cycle)),
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
