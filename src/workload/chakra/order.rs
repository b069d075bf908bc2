//! The order a trace's nodes go in the task graph, worked out a step at
//! a time as its parts are made, over a window of each rank's file.
//!
//! The order is that of passes over the ranks' nodes in file order, each
//! pass followed by the communicators' collectives in order: a node goes
//! in once its dependencies are in (a receive once its send is too), a
//! collective once every member's node is ready; a node made ready by one
//! before it in that order goes in the same pass, else in the next one.
//! A pass only looks at each rank's window: its first node not yet in
//! and the `window - 1` after it. A window as long as the file gives the
//! order with no window at all; a shorter one changes it only where a
//! rank has a ready node further ahead than the window reaches, and a
//! rank that needs more lookahead than that gets stuck, which is the
//! error. Only the nodes just made ready, or just come into a window,
//! are visited, so the work is the nodes and their dependencies, not
//! passes times nodes; the state held is the windows' nodes and the
//! receives and sends not yet matched.

use super::{Group, Kind, Node, Step};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// What the order is worked out from: the ranks' nodes, of which it
/// looks only at those in the windows (`reach`), and the communicators.
pub(super) trait Ranks {
    fn groups(&self) -> &[Group];
    /// Rank r's nodes.
    fn len(&self, r: usize) -> usize;
    fn kind(&self, r: usize, i: usize) -> Kind;
    /// Node i's dependencies, as places in its rank.
    fn deps(&self, r: usize, i: usize) -> &[u32];
    fn node(&self, r: usize, i: usize) -> Node<'_>;
    /// The communicator of rank r's collective node at i, and the rank's
    /// place in it.
    fn group_of(&self, r: usize, i: usize) -> (usize, usize);
    /// Rank r's nodes before `end` can be looked at, and what they
    /// depend on; an error if they cannot be read.
    fn reach(&mut self, r: usize, end: usize) -> Result<(), String>;
}

/// Why the order stops short.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Stop {
    /// The node that can never go in, as (rank, place).
    Stuck(usize, usize),
    /// A rank's file could not be read again.
    Read(String),
}

impl From<String> for Stop {
    fn from(m: String) -> Stop {
        Stop::Read(m)
    }
}

/// No waiter (the end of a list in `Order::edges`).
const NONE: u32 = u32::MAX;

/// A node of a rank from its first not yet in the order on.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// Dependencies not yet in (counted once it has entered the window).
    missing: u32,
    placed: bool,
    /// The first of the nodes waiting for it, in `Order::edges`.
    waiters: u32,
}

const EMPTY: Slot = Slot {
    missing: 0,
    placed: false,
    waiters: NONE,
};

/// One rank's progress.
#[derive(Clone, Debug, Default)]
struct Lane {
    /// Its first node not yet in the order: every node before it is.
    lo: usize,
    /// Nodes before this one have entered the window.
    entered: usize,
    /// The nodes from `lo` on that have entered, or that an entered node
    /// waits for.
    slots: VecDeque<Slot>,
}

impl Lane {
    fn slot(&mut self, i: usize) -> &mut Slot {
        let k = i - self.lo;
        if k >= self.slots.len() {
            self.slots.resize(k + 1, EMPTY);
        }
        &mut self.slots[k]
    }

    /// Whether node `i` is in the order.
    fn placed(&self, i: usize) -> bool {
        i < self.lo || self.slots.get(i - self.lo).is_some_and(|s| s.placed)
    }
}

/// A communicator's progress: each member's collective nodes in the
/// window, not yet in the order, and how many members' first one is
/// missing or not ready.
#[derive(Clone, Debug)]
struct Comm {
    queues: Vec<VecDeque<u32>>,
    waiting: usize,
}

/// Where a pass is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Taking the pass's nodes, by place.
    Nodes,
    /// At this communicator's collectives.
    Collectives(usize),
}

/// The order, worked out step by step (`next`).
#[derive(Clone, Debug)]
pub(super) struct Order {
    window: usize,
    lanes: Vec<Lane>,
    comms: Vec<Comm>,
    /// Waiter lists: (waiting node's place, next), and the free entries.
    edges: Vec<(u32, u32)>,
    free: u32,
    this_pass: BinaryHeap<Reverse<(usize, usize)>>,
    next_pass: Vec<(usize, usize)>,
    /// Sends in and not yet received, and receives whose dependencies are
    /// in, waiting for their send; by (sender, receiver, tag).
    sent: HashMap<(usize, usize, i64), usize>,
    parked: HashMap<(usize, usize, i64), Vec<(usize, usize)>>,
    phase: Phase,
    progress: bool,
    /// Nodes in the order, and in the trace.
    emitted: usize,
    total: usize,
    /// The members' nodes of the last collective put in, by place.
    members: Vec<u32>,
}

impl Order {
    /// The order's start: every rank's first `window` nodes in view.
    pub fn new(src: &mut impl Ranks, window: usize) -> Result<Order, String> {
        let window = window.max(1);
        let ranks = src.groups()[0].ranks.len();
        let mut o = Order {
            window,
            lanes: vec![Lane::default(); ranks],
            comms: src
                .groups()
                .iter()
                .map(|g| Comm {
                    queues: vec![VecDeque::new(); g.ranks.len()],
                    waiting: g.ranks.len(),
                })
                .collect(),
            edges: Vec::new(),
            free: NONE,
            this_pass: BinaryHeap::new(),
            next_pass: Vec::new(),
            sent: HashMap::new(),
            parked: HashMap::new(),
            phase: Phase::Nodes,
            progress: false,
            emitted: 0,
            total: (0..ranks).map(|r| src.len(r)).sum(),
            members: Vec::new(),
        };
        for r in 0..ranks {
            o.enter(src, r, (usize::MAX, usize::MAX))?;
        }
        o.this_pass
            .extend(o.next_pass.drain(..).map(std::cmp::Reverse));
        Ok(o)
    }

    /// Whether every node is in the order.
    pub fn all_in(&self) -> bool {
        self.emitted == self.total
    }

    /// Rank r's first node not yet in the order.
    pub fn lo(&self, r: usize) -> usize {
        self.lanes[r].lo
    }

    /// The members' nodes of the collective `next` just gave, by place
    /// in its communicator.
    pub fn members(&self) -> &[u32] {
        &self.members
    }

    /// The next step; `None` once every node is in; else the node that
    /// can never go in (a cycle, a receive without its send, ranks that
    /// take a group's collectives in different orders, or more lookahead
    /// than the window), as (rank, place): the first left in file order.
    pub fn next(&mut self, src: &mut impl Ranks) -> Result<Option<Step>, Stop> {
        loop {
            match self.phase {
                Phase::Nodes => {
                    let Some(Reverse((r, i))) = self.this_pass.pop() else {
                        self.phase = Phase::Collectives(0);
                        continue;
                    };
                    let n = src.node(r, i);
                    let (kind, comm) = (n.kind, n.comm());
                    match kind {
                        Kind::Send => {
                            let key = (r, comm.comm_dst.unwrap_or(0) as usize, comm.comm_tag);
                            *self.sent.entry(key).or_default() += 1;
                            // Its receives: later in this pass, or in the next.
                            for p in self.parked.remove(&key).unwrap_or_default() {
                                self.push(p, (r, i));
                            }
                        }
                        Kind::Recv => {
                            let key = (comm.comm_src.unwrap_or(0) as usize, r, comm.comm_tag);
                            match self.sent.get_mut(&key) {
                                Some(c) if *c > 0 => *c -= 1,
                                _ => {
                                    self.parked.entry(key).or_default().push((r, i));
                                    continue;
                                }
                            }
                        }
                        _ => {}
                    }
                    self.place(src, r, i, (r, i))?;
                    return Ok(Some(Step::Node(r as u16, i as u32)));
                }
                Phase::Collectives(gi) if gi < self.comms.len() => {
                    if self.comms[gi].waiting > 0 {
                        self.phase = Phase::Collectives(gi + 1);
                        continue;
                    }
                    // Every member's node is ready: the collective goes
                    // in, and each member's next one is looked at.
                    let mut members = std::mem::take(&mut self.members);
                    members.clear();
                    let c = &mut self.comms[gi];
                    for q in &mut c.queues {
                        members.push(q.pop_front().expect("a ready member has its node"));
                    }
                    let ranks = src.groups()[gi].ranks.clone();
                    c.waiting = c
                        .queues
                        .iter()
                        .zip(&ranks)
                        .filter(|(q, &r)| match q.front() {
                            Some(&i) => {
                                let lane = &self.lanes[r];
                                lane.slots[i as usize - lane.lo].missing > 0
                            }
                            None => true,
                        })
                        .count();
                    for (&r, &i) in ranks.iter().zip(&members) {
                        self.place(src, r, i as usize, (usize::MAX, usize::MAX))?;
                    }
                    self.members = members;
                    return Ok(Some(Step::Collective(gi as u32)));
                }
                Phase::Collectives(_) => {
                    if self.emitted == self.total {
                        return Ok(None);
                    }
                    if !std::mem::take(&mut self.progress) {
                        let r = (0..self.lanes.len())
                            .find(|&r| self.lanes[r].lo < src.len(r))
                            .expect("some node is left");
                        return Err(Stop::Stuck(r, self.lanes[r].lo));
                    }
                    self.this_pass
                        .extend(self.next_pass.drain(..).map(std::cmp::Reverse));
                    self.phase = Phase::Nodes;
                }
            }
        }
    }

    /// A ready node goes in this pass if it is after `at`, else in the
    /// next.
    fn push(&mut self, p: (usize, usize), at: (usize, usize)) {
        if p > at {
            self.this_pass.push(Reverse(p));
        } else {
            self.next_pass.push(p);
        }
    }

    /// A node that is not a collective's, or a collective member's, is
    /// ready: into a pass, or its communicator is one member nearer.
    fn ready(&mut self, src: &impl Ranks, r: usize, i: usize, at: (usize, usize)) {
        if src.kind(r, i) != Kind::Coll {
            self.push((r, i), at);
            return;
        }
        let (gi, place) = src.group_of(r, i);
        let c = &mut self.comms[gi];
        if c.queues[place].front() == Some(&(i as u32)) {
            c.waiting -= 1;
        }
    }

    /// Node (r, i) goes in, at `at` of the pass: its waiters are a
    /// dependency nearer, and the rank's window may move on.
    fn place(
        &mut self,
        src: &mut impl Ranks,
        r: usize,
        i: usize,
        at: (usize, usize),
    ) -> Result<(), String> {
        self.emitted += 1;
        self.progress = true;
        let slot = self.lanes[r].slot(i);
        slot.placed = true;
        let mut e = std::mem::replace(&mut slot.waiters, NONE);
        while e != NONE {
            let (j, next) = self.edges[e as usize];
            self.edges[e as usize].1 = self.free;
            self.free = e;
            e = next;
            let s = self.lanes[r].slot(j as usize);
            s.missing -= 1;
            if s.missing == 0 {
                self.ready(src, r, j as usize, at);
            }
        }
        let lane = &mut self.lanes[r];
        while lane.slots.front().is_some_and(|s| s.placed) {
            lane.slots.pop_front();
            lane.lo += 1;
        }
        self.enter(src, r, at)
    }

    /// The nodes that have come into rank r's window enter it: their
    /// dependencies not yet in are counted, collective nodes join their
    /// communicator's queue, and those ready go in a pass.
    fn enter(&mut self, src: &mut impl Ranks, r: usize, at: (usize, usize)) -> Result<(), String> {
        let end = self.lanes[r].lo.saturating_add(self.window).min(src.len(r));
        if self.lanes[r].entered < end {
            src.reach(r, end)?;
        }
        while self.lanes[r].entered < end {
            let i = self.lanes[r].entered;
            self.lanes[r].entered += 1;
            let mut missing = 0;
            for &d in src.deps(r, i) {
                let d = d as usize;
                if self.lanes[r].placed(d) {
                    continue;
                }
                missing += 1;
                let e = if self.free != NONE {
                    let e = self.free;
                    self.free = self.edges[e as usize].1;
                    e
                } else {
                    self.edges.push((0, 0));
                    self.edges.len() as u32 - 1
                };
                let s = self.lanes[r].slot(d);
                self.edges[e as usize] = (i as u32, s.waiters);
                s.waiters = e;
            }
            self.lanes[r].slot(i).missing = missing;
            if src.kind(r, i) == Kind::Coll {
                let (gi, place) = src.group_of(r, i);
                self.comms[gi].queues[place].push_back(i as u32);
            }
            if missing == 0 {
                self.ready(src, r, i, at);
            }
        }
        Ok(())
    }
}
