//! Collective passes made as they run: a pass's messages are numbered by
//! formula and released as the messages they wait for arrive, instead of
//! being put in the task graph up front.
//!
//! A **ring** pass over positions 0..n (ring order) moves `data` bytes
//! cut into n blocks in `steps` steps: at step k position i sends block
//! (i - k) mod n to position i + 1, slice by slice (a block is cut into
//! `slices` chunks that move through the steps as a pipeline). Message
//! (k, i, j) goes once position i has entered the pass and, for k > 0,
//! once message (k - 1, i - 1, j) has arrived at i. Position i's part is
//! done once the last step of every slice has arrived at it.
//!
//! A **tree** pass is NCCL's tree all-reduce: its bytes for each of two
//! trees go up and back down that tree, chunk by chunk; each tree is a chain
//! inside every server, from its head, and NCCL's double binary tree
//! across the servers' heads (`nccl_trees`). Up a tree a node sends a
//! chunk to its parent once it has entered and has the chunk from all its
//! children; the root, once it has entered and has them, sends it down;
//! down, a node passes a chunk to its children once it has it from its
//! parent. A position's part is done once it has every
//! reduced chunk (the root: once it has reduced them).
//!
//! **Halving-doubling** goes stage by stage: a rank sends a stage's
//! share to its partner at that stage's distance once it has what its
//! partner of the stage before sent it. A **PAT** (NCCL's all-gather
//! and reduce-scatter for one GPU per server) exchanges with the ranks a
//! power of two away, chunk by chunk, a chunk's stage once its earlier
//! stages arrived (`pat`). A **chain** (a ring broadcast)
//! passes each chunk from the root down the positions as it arrives. An
//! **all-to-all** sends everything at once; a rank is done once it has
//! its share from every other. One file per shape; this one numbers,
//! routes and dispatches.
//!
//! A position enters when its entry task in the graph starts (after what
//! it waits for and, in a training job, after its own gate) and sends
//! nothing before; its exit task is done when the shape says its part is.
//!
//! What a pass holds is per position and chunk (what each has sent and
//! received), so its memory follows the GPUs and chunks, not the
//! messages: a 32,768-GPU ring all-reduce has hundreds of millions of
//! messages, and only those in flight exist at any time (the engine's
//! `passes`). Every partition of a parallel run holds the whole pass but
//! drives only its own positions: everything a position does follows
//! from what arrives at it, which happens in the partition of its host.

mod all_to_all;
mod chain;
mod halving;
mod pat;
mod ring;
mod tree;

pub use pat::pat_stages;
pub use tree::{btree, dtree, nccl_trees};

use super::share;
use super::FlowSpec;
use crate::topology::{GpuId, Topology};
use crate::units::SimTime;
use all_to_all::AllToAll;
use chain::Chain;
use halving::Halving;
use pat::Pat;
use ring::Ring;
use tree::Tree;

/// How the messages of one connection of a pass travel.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Via {
    /// An NVLink copy inside a host.
    Local,
    /// An RDMA Write from the sender's NIC, one at a time on `lane`.
    Net { lane: u32 },
    /// An NVLink copy to `proxy` (the sender's host's GPU on the
    /// receiver's rail), then a write from the proxy's NIC on `lane`.
    Pxn { proxy: GpuId, lane: u32 },
}

/// A connection of a pass: from one position's GPU to another's.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct Conn {
    pub from: GpuId,
    pub to: GpuId,
    pub via: Via,
    /// Its key (`FlowSpec::conn`).
    pub key: u64,
}

/// One pass (see the module's notes).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Pass {
    pub workload: u32,
    pub qps: u32,
    /// The GPUs by position.
    pub order: Vec<GpuId>,
    /// Its connections; a message is on one of them.
    pub conns: Vec<Conn>,
    /// The task whose start lets position i enter, and the task done
    /// when its part is, by position.
    pub enter: Vec<u32>,
    pub exit: Vec<u32>,
    /// The number of its first message among every pass of the run.
    pub first: u64,
    /// At flow level, it runs as one steady stream (`runtime::streams`)
    /// and its messages take no numbers (the next pass's first is its).
    pub streamed: bool,
    /// Software time of its steps (NCCL's kernel, proxy and flags, which
    /// the wire does not show): a message goes this long after what
    /// released it, and a position's first ones the launch time later.
    pub latency: StepTimes,
    entered: Vec<bool>,
    finished: Vec<bool>,
    shape: Shape,
}

/// The software time of a pass's steps, by how a message travels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StepTimes {
    pub nvlink: SimTime,
    pub net: SimTime,
    /// Once, before a position's first messages.
    pub launch: SimTime,
    /// The figures are NCCL's, measured end to end: they include the
    /// hardware's own latency, which the simulation adds by itself, so
    /// the engine takes the unloaded latency of the pass's hops off them
    /// (`without_wire`).
    pub with_wire: bool,
}

impl StepTimes {
    /// NCCL's figures less the hardware's unloaded latency of an NVLink
    /// hop and of a network hop (never below zero).
    pub fn without_wire(self, nvlink: SimTime, net: SimTime) -> StepTimes {
        if !self.with_wire {
            return self;
        }
        StepTimes {
            nvlink: self.nvlink.saturating_sub(nvlink),
            net: self.net.saturating_sub(net),
            launch: self.launch,
            with_wire: false,
        }
    }

    /// Before a message over `via` goes.
    pub fn before(&self, via: Via, first: bool) -> SimTime {
        let hop = match via {
            Via::Local => self.nvlink,
            Via::Net { .. } | Via::Pxn { .. } => self.net,
        };
        if first {
            hop + self.launch
        } else {
            hop
        }
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
enum Shape {
    Ring(Ring),
    Tree(Box<Tree>),
    Halving(Halving),
    Pat(Pat),
    Chain(Chain),
    AllToAll(AllToAll),
}

/// What a message is: its connection and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    pub conn: u32,
    pub bytes: u64,
}

/// What a pass says after a position entered or a message arrived: the
/// messages to send (by number within the pass) and the positions whose
/// part is done.
#[derive(Debug, Default)]
pub struct Released {
    pub send: Vec<u64>,
    pub done: Vec<u32>,
}

/// What every pass is made from: whose it is, the QPs of each of its
/// connections, its channel (an all-to-all has one per connection), its
/// GPUs by position and the number of its first message.
pub struct Base {
    pub workload: u32,
    pub qps: u32,
    pub channel: u32,
    pub order: Vec<GpuId>,
    pub first: u64,
}

impl Base {
    /// Connections between positions (from, to, channel), each routed.
    fn connect(
        &self,
        pairs: impl IntoIterator<Item = (usize, usize, u32)>,
        route: &mut Route,
    ) -> Result<Vec<Conn>, String> {
        pairs
            .into_iter()
            .map(|(a, b, ch)| {
                let (from, to) = (self.order[a], self.order[b]);
                let (via, key) = route(from, to, ch)?;
                Ok(Conn { from, to, via, key })
            })
            .collect()
    }

    /// The pass over these connections, in this shape.
    fn into_pass(self, conns: Vec<Conn>, shape: Shape) -> Pass {
        let n = self.order.len();
        Pass {
            workload: self.workload,
            qps: self.qps,
            order: self.order,
            conns,
            enter: Vec::new(),
            exit: Vec::new(),
            first: self.first,
            streamed: false,
            latency: StepTimes::default(),
            entered: vec![false; n],
            finished: vec![false; n],
            shape,
        }
    }
}

/// How a pass's connection between two GPUs travels and its key.
pub type Route<'a> = dyn FnMut(GpuId, GpuId, u32) -> Result<(Via, u64), String> + 'a;

impl Pass {
    /// What it holds while it runs (its messages aside).
    pub fn state_bytes(&self) -> u64 {
        let n = self.order.len() as u64;
        let common = n * (4 + 2 + 8 + 4) + self.conns.len() as u64 * 32;
        common
            + match &self.shape {
                Shape::Ring(r) => n * 4 + n * u64::from(r.slices) * 8,
                Shape::Tree(t) => {
                    let most = u64::from(t.slices[0].max(t.slices[1]));
                    n * (2 * (8 + 24 + 8) + 4 + 16) + 2 * most * n * 2 + self.conns.len() as u64 * 4
                }
                Shape::Halving(h) => n * 4 + h.stages.len() as u64 * (n * 4 + 16),
                Shape::Pat(p) => n * 4 + n * u64::from(p.slices) * 5 + p.stages.len() as u64 * 8,
                Shape::Chain(c) => n * 4 + n * u64::from(c.slices),
                Shape::AllToAll(_) => n * 8,
            }
    }

    /// Whether it can run as one steady stream: a ring of two positions
    /// or more whose connections all copy over NVLink inside one host, or
    /// all write over the network and each carries bytes.
    pub fn can_stream(&self) -> bool {
        let local = self.conns.iter().all(|c| c.via == Via::Local);
        let net =
            self.conns.iter().enumerate().all(|(c, conn)| {
                matches!(conn.via, Via::Net { .. }) && self.sends_on(c as u32) > 0
            });
        self.ring_steps().is_some() && self.order.len() > 1 && (local || net)
    }

    /// A ring pass's steps and slices (`None` for any other shape).
    pub fn ring_steps(&self) -> Option<(u32, u32)> {
        match &self.shape {
            Shape::Ring(r) => Some((r.steps, r.slices)),
            _ => None,
        }
    }

    /// Over the messages connection `c` of a ring pass carries, the sum
    /// of `f` of their sizes, without going through the steps (zero-byte
    /// ones included: `f(0)` should be 0). 0 for any other shape.
    pub fn over_ring_messages(&self, c: u32, f: impl Fn(u64) -> u64) -> u64 {
        let Shape::Ring(r) = &self.shape else {
            return 0;
        };
        let slices = u64::from(r.slices);
        r.over_steps(self.order.len() as u64, c, |block| {
            (0..slices).map(|j| f(share(block, slices, j))).sum()
        })
    }

    /// The sizes a ring pass's messages with bytes may have, smallest
    /// first (a few: its blocks differ by a byte, and so do their slices).
    pub fn ring_sizes(&self) -> Vec<u64> {
        let Shape::Ring(r) = &self.shape else {
            return Vec::new();
        };
        let (n, slices) = (self.order.len() as u64, u64::from(r.slices));
        let mut sizes: Vec<u64> = [r.data / n, r.data / n + 1]
            .into_iter()
            .flat_map(|b| [b / slices, b / slices + 1])
            .filter(|&m| m > 0)
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    /// Its shape as NCCL's latency model sees it.
    pub fn step_shape(&self) -> StepShape {
        match self.shape {
            Shape::Tree(_) => StepShape::Tree,
            Shape::Pat(_) => StepShape::Pat,
            _ => StepShape::Ring,
        }
    }

    pub fn positions(&self) -> usize {
        self.order.len()
    }

    /// The memory it holds, counted from its lengths: what bounds the
    /// passes a workload may make before the run (`GraphBuilder::held_bytes`).
    /// Its shape keeps at most a few words per position.
    pub fn held_bytes(&self) -> u64 {
        let n = self.order.capacity() as u64;
        let word = std::mem::size_of::<u64>() as u64;
        std::mem::size_of::<Pass>() as u64
            + n * std::mem::size_of::<GpuId>() as u64
            + self.conns.capacity() as u64 * std::mem::size_of::<Conn>() as u64
            + (self.enter.capacity() + self.exit.capacity()) as u64 * 4
            + (self.entered.capacity() + self.finished.capacity()) as u64
            + 4 * n * word
    }

    /// Messages it numbers (some never sent: zero-byte blocks of a ring,
    /// numbers past a tree's chunks).
    pub fn messages(&self) -> u64 {
        let n = self.order.len() as u64;
        match &self.shape {
            Shape::Ring(r) => u64::from(r.steps) * n * u64::from(r.slices),
            Shape::Tree(t) => 4 * u64::from(t.slices[0].max(t.slices[1])) * n,
            Shape::Halving(h) => h.stages.len() as u64 * u64::from(h.most) * n,
            Shape::Pat(p) => p.messages(n),
            Shape::Chain(c) => (n - 1) * u64::from(c.slices),
            Shape::AllToAll(a) => self.conns.len() as u64 * u64::from(a.most),
        }
    }

    /// Message `idx`: its connection and size.
    pub fn message(&self, idx: u64) -> Message {
        let n = self.order.len() as u64;
        match &self.shape {
            Shape::Ring(r) => {
                let (step, pos, slice) = r.decode(n, idx);
                Message {
                    conn: pos,
                    bytes: r.bytes(n, step, pos, slice),
                }
            }
            Shape::Tree(t) => {
                let (tree, slice, dir, p) = t.decode(n, idx);
                Message {
                    conn: t.conn_at[(tree * 2 + dir) * n as usize + p as usize],
                    bytes: share(
                        t.per_tree[tree],
                        u64::from(t.slices[tree]),
                        u64::from(slice),
                    ),
                }
            }
            Shape::Halving(h) => {
                let (s, j, i) = h.decode(n, idx);
                let (dist, bytes, slices) = h.stages[s];
                Message {
                    conn: i * h.log + dist.trailing_zeros(),
                    bytes: share(bytes, u64::from(slices), u64::from(j)),
                }
            }
            Shape::Pat(p) => {
                let (s, j, i) = p.decode(n, idx);
                Message {
                    conn: p.conn(s, i),
                    bytes: p.bytes(s, j),
                }
            }
            Shape::Chain(c) => {
                let slices = u64::from(c.slices);
                Message {
                    conn: (idx / slices) as u32,
                    bytes: share(c.data, slices, idx % slices),
                }
            }
            Shape::AllToAll(a) => {
                let conn = (idx / u64::from(a.most)) as u32;
                let (data, slices) = a.of_conn(n as usize, conn);
                let j = idx % u64::from(a.most);
                Message {
                    conn,
                    bytes: if j < u64::from(slices) {
                        share(data, u64::from(slices), j)
                    } else {
                        0
                    },
                }
            }
        }
    }

    /// Message `idx`'s write, if it has one: from the sender (or its PXN
    /// proxy) to the receiver, on the connection's QPs.
    pub fn spec(&self, topo: &Topology, idx: u64) -> Option<FlowSpec> {
        let m = self.message(idx);
        self.conn_spec(topo, m.conn, m.bytes)
    }

    /// A write of `bytes` on connection `c`, if it goes over the network.
    pub fn conn_spec(&self, topo: &Topology, c: u32, bytes: u64) -> Option<FlowSpec> {
        let conn = &self.conns[c as usize];
        let from = match conn.via {
            Via::Local => return None,
            Via::Net { .. } => conn.from,
            Via::Pxn { proxy, .. } => proxy,
        };
        Some(FlowSpec {
            src: from,
            dst: conn.to,
            src_nic: topo.gpus[from.idx()].nic,
            dst_nic: topo.gpus[conn.to.idx()].nic,
            bytes,
            start: crate::units::SimTime::ZERO,
            qps: self.qps,
            rate: None,
            workload: self.workload,
            gated: true,
            conn: Some(conn.key),
        })
    }

    /// The number of connection `c`'s first message.
    pub fn first_on(&self, c: u32) -> u64 {
        let n = self.order.len() as u64;
        match &self.shape {
            Shape::Ring(r) => r.index(n, 0, c, 0),
            Shape::Tree(t) => {
                let at = u64::from(t.conn_where[c as usize]);
                // (tree * 2 + dir) * n + p, slice 0.
                let (td, p) = (at / n, at % n);
                let (tree, dir) = (td / 2, td % 2);
                t.index(n, tree as usize, 0, dir as usize, p as u32)
            }
            Shape::Halving(h) => {
                let (i, l) = (c / h.log, c % h.log);
                let s = h.stages.iter().position(|st| st.0 == 1 << l).unwrap_or(0);
                h.index(n, s, 0, i)
            }
            Shape::Pat(p) => p.index(n, p.stage_of(c), 0, c / p.log),
            Shape::Chain(ch) => u64::from(c) * u64::from(ch.slices),
            Shape::AllToAll(a) => u64::from(c) * u64::from(a.most),
        }
    }

    /// Bytes connection `c` carries over the whole pass.
    pub fn bytes_on(&self, c: u32) -> u64 {
        match &self.shape {
            Shape::Ring(r) => r.over_steps(self.order.len() as u64, c, |block| block),
            Shape::Tree(t) => t.per_tree[t.tree_of(self.order.len(), c)],
            Shape::Halving(h) => h.on(c).map(|st| st.1).sum(),
            Shape::Pat(p) => u64::from(p.stages[p.stage_of(c)].1) * p.block,
            Shape::Chain(ch) => ch.data,
            Shape::AllToAll(a) => a.of_conn(self.order.len(), c).0,
        }
    }

    /// Messages with bytes connection `c` carries.
    pub fn sends_on(&self, c: u32) -> u64 {
        match &self.shape {
            Shape::Ring(r) => {
                let slices = u64::from(r.slices);
                r.over_steps(self.order.len() as u64, c, |block| block.min(slices))
            }
            Shape::Tree(t) => u64::from(t.slices[t.tree_of(self.order.len(), c)]),
            Shape::Halving(h) => h.on(c).map(|st| st.1.min(u64::from(st.2))).sum(),
            Shape::Pat(p) => u64::from(p.slices),
            Shape::Chain(ch) => ch.data.min(u64::from(ch.slices)),
            Shape::AllToAll(a) => u64::from(a.of_conn(self.order.len(), c).1),
        }
    }

    /// Position `pos` enters the pass.
    pub fn enter(&mut self, pos: u32, out: &mut Released) {
        self.entered[pos as usize] = true;
        let n = self.order.len() as u32;
        let from = out.done.len();
        match &mut self.shape {
            Shape::Ring(r) => {
                let mut work = Vec::new();
                for j in 0..r.slices {
                    r.try_send(n, pos, j, true, out, &mut work);
                }
                r.settle(n, work, &self.entered, out);
            }
            Shape::Tree(t) => {
                for tree in 0..2 {
                    for j in 0..t.slices[tree] {
                        t.try_up(n, tree, j, pos, &self.entered, out);
                    }
                }
            }
            Shape::Halving(h) => h.try_send(n, pos, out),
            Shape::Pat(p) => {
                for j in 0..p.slices {
                    p.try_send(n, pos, j, out);
                }
            }
            Shape::Chain(c) => {
                if pos == 0 {
                    c.has[..c.slices as usize].fill(true);
                }
                let mut work = Vec::new();
                for j in 0..c.slices {
                    if c.has[(pos * c.slices + j) as usize] {
                        c.forward(n, pos, j, out, &mut work);
                    }
                }
                c.settle(n, work, &self.entered, out);
            }
            Shape::AllToAll(a) => a.send_all(n as usize, pos, out),
        }
        out.done.push(pos);
        self.confirm(from, out);
    }

    /// Message `idx` (a number `message` decodes) has arrived.
    pub fn arrive(&mut self, idx: u64, out: &mut Released) {
        let n = self.order.len() as u32;
        let from = out.done.len();
        match &mut self.shape {
            Shape::Ring(r) => {
                let (_, pos, slice) = r.decode(u64::from(n), idx);
                r.settle(n, vec![((pos + 1) % n, slice)], &self.entered, out);
            }
            Shape::Tree(t) => t.arrive(n, idx, &self.entered, out),
            Shape::Halving(h) => {
                let (s, _, i) = h.decode(u64::from(n), idx);
                let p = i ^ h.stages[s].0;
                h.arrived[s * n as usize + p as usize] += 1;
                if self.entered[p as usize] {
                    h.try_send(n, p, out);
                }
                out.done.push(p);
            }
            Shape::Pat(pat) => {
                let (p, j) = pat.arrive(n, idx);
                if self.entered[p as usize] {
                    pat.try_send(n, p, j, out);
                }
                out.done.push(p);
            }
            Shape::Chain(c) => {
                let i = (idx / u64::from(c.slices)) as u32;
                let j = (idx % u64::from(c.slices)) as u32;
                c.settle(n, vec![(i + 1, j)], &self.entered, out);
            }
            Shape::AllToAll(a) => {
                let k = a.receiver(n as usize, (idx / u64::from(a.most)) as u32);
                a.arrived[k] += 1;
                out.done.push(k as u32);
            }
        }
        self.confirm(from, out);
    }

    /// The positions the shape put in `out.done` from `from` on may be
    /// done: keeps those that are, once each.
    fn confirm(&mut self, from: usize, out: &mut Released) {
        let maybe: Vec<u32> = out.done.drain(from..).collect();
        for p in maybe {
            self.check_done(p, out);
        }
    }

    /// Says once that position `pos`'s part is done, when it is.
    fn check_done(&mut self, pos: u32, out: &mut Released) {
        let p = pos as usize;
        if self.finished[p] || !self.entered[p] {
            return;
        }
        let complete = match &self.shape {
            Shape::Ring(r) => r.complete[p] == r.slices,
            Shape::Tree(t) => t.got[p] == t.slices[0] + t.slices[1],
            Shape::Halving(h) => h.done(self.order.len(), p),
            Shape::Pat(pat) => pat.complete[p] == pat.slices,
            Shape::Chain(c) => p == 0 || c.got[p] == c.slices,
            Shape::AllToAll(a) => a.arrived[p] == a.expect[p],
        };
        if complete {
            self.finished[p] = true;
            out.done.push(pos);
        }
    }
}

/// The kind of pass a step latency is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepShape {
    /// NCCL's ring (and the other ring-like passes: chains, halving,
    /// all-to-all), with `servers` servers and `ranks` ranks.
    Ring,
    Tree,
    Pat,
}

/// Per pass of `passes` (consecutive, as the workload made them): how many
/// channels of its collective run over the same GPUs. A collective's
/// channels are consecutive passes over the same GPUs, each on
/// connections of its own: the next collective over them takes the first
/// channel's connections again.
pub fn channels_of(passes: &[Pass]) -> Vec<u32> {
    let lane = |p: &Pass| match p.conns.first().map(|c| c.via) {
        Some(Via::Net { lane }) => lane,
        _ => u32::MAX,
    };
    let gpus = |p: &Pass| {
        let mut g: Vec<u32> = p.order.iter().map(|g| g.0).collect();
        g.sort_unstable();
        g
    };
    let mut channels = vec![1u32; passes.len()];
    let mut i = 0;
    while i < passes.len() {
        let mine = gpus(&passes[i]);
        let mut lanes = vec![lane(&passes[i])];
        let mut j = i + 1;
        while j < passes.len()
            && passes[i].streamed
            && passes[j].streamed
            && passes[j].workload == passes[i].workload
            && !lanes.contains(&lane(&passes[j]))
            && gpus(&passes[j]) == mine
        {
            lanes.push(lane(&passes[j]));
            j += 1;
        }
        channels[i..j].fill((j - i) as u32);
        i = j;
    }
    channels
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(_: GpuId, _: GpuId, _: u32) -> Result<(Via, u64), String> {
        Ok((Via::Local, 0))
    }

    fn base(n: u32) -> Base {
        Base {
            workload: 0,
            qps: 1,
            channel: 0,
            order: (0..n).map(GpuId).collect(),
            first: 0,
        }
    }

    fn ring(n: u32, data: u64, steps: u32, slices: u32) -> Pass {
        Pass::ring(base(n), data, steps, slices, &mut local).unwrap()
    }

    /// Runs a pass to the end, delivering messages in the order they are
    /// released; returns the messages sent in that order.
    fn run(p: &mut Pass) -> Vec<Message> {
        let mut out = Released::default();
        for i in 0..p.positions() as u32 {
            p.enter(i, &mut out);
        }
        let mut sent = Vec::new();
        let mut at = 0;
        while at < out.send.len() {
            let idx = out.send[at];
            at += 1;
            sent.push(p.message(idx));
            p.arrive(idx, &mut out);
        }
        let mut done = out.done.clone();
        done.sort_unstable();
        let all: Vec<u32> = (0..p.positions() as u32).collect();
        assert_eq!(done, all, "every position done once");
        sent
    }

    /// An all-reduce over 4 ranks: 2(n-1) steps, each rank sending one
    /// block per step, each block once per step.
    #[test]
    fn a_ring_all_reduce_sends_each_block_once_per_step() {
        let mut p = ring(4, 4000, 6, 2);
        let sent = run(&mut p);
        assert_eq!(sent.len() as u64, p.messages());
        for c in 0..4 {
            let mine: Vec<&Message> = sent.iter().filter(|m| m.conn == c).collect();
            assert_eq!(mine.len(), 12);
            assert_eq!(mine.iter().map(|m| m.bytes).sum::<u64>(), 6 * 1000);
            assert_eq!((p.bytes_on(c), p.sends_on(c)), (6000, 12));
        }
    }

    /// A position sends step k only once step k - 1 has come from the one
    /// before it: with one position not yet entered, the ring stops there.
    #[test]
    fn a_position_waits_for_what_it_forwards() {
        let mut p = ring(3, 300, 4, 1);
        let mut out = Released::default();
        p.enter(0, &mut out);
        p.enter(1, &mut out);
        // 0 and 1 send step 0; 0's arrives at 1, which forwards step 1.
        assert_eq!(out.send.len(), 2);
        let sends = out.send.clone();
        for idx in sends {
            p.arrive(idx, &mut out);
        }
        let now: Vec<u32> = out.send[2..].iter().map(|&i| p.message(i).conn).collect();
        assert_eq!(now, [1], "2 has not entered: it holds what 1 sent");
        assert!(out.done.is_empty());
    }

    /// The totals worked out without going through the steps agree with
    /// the messages one by one.
    #[test]
    fn totals_follow_the_messages() {
        for (n, data, steps, slices) in [
            (4, 4003, 6, 3),
            (5, 7, 4, 2),
            (3, 2, 2, 4),
            (6, 6001, 11, 1),
        ] {
            let p = ring(n, data, steps, slices);
            for c in 0..n {
                let mine = (0..p.messages())
                    .map(|i| p.message(i))
                    .filter(|m| m.conn == c);
                let (b, k) = mine.fold((0, 0), |(b, k), m| {
                    (b + m.bytes, k + u64::from(m.bytes > 0))
                });
                assert_eq!(
                    (p.bytes_on(c), p.sends_on(c)),
                    (b, k),
                    "{n} {data} {steps} {slices} {c}"
                );
            }
        }
    }

    /// Fewer bytes than positions: zero-byte blocks are never sent, yet
    /// the steps after them go on, and every position finishes.
    #[test]
    fn zero_byte_blocks_pass_through() {
        let mut p = ring(4, 2, 6, 1);
        let sent = run(&mut p);
        assert!(sent.iter().all(|m| m.bytes > 0));
        assert_eq!(sent.len(), 6 * 2, "two one-byte blocks, six steps");
        // No byte at all: every position is done as it enters, once.
        run(&mut ring(3, 0, 4, 1));
    }

    /// A double binary tree over 8 positions (one GPU per server), 3
    /// chunks per tree: every edge carries each chunk once up and once
    /// down, a chunk goes up only after the sender's children sent
    /// theirs, and every position is done.
    #[test]
    fn a_tree_reduces_up_and_broadcasts_down() {
        let mut p = Pass::tree(base(8), &[1; 8], [3000, 3000], 1000, &mut local).unwrap();
        assert_eq!(p.conns.len(), 2 * 2 * 7, "two trees, 7 edges, both ways");
        let sent = run(&mut p);
        assert_eq!(sent.len(), 2 * 3 * 2 * 7);
        for c in 0..p.conns.len() as u32 {
            let mine: Vec<&Message> = sent.iter().filter(|m| m.conn == c).collect();
            assert_eq!(mine.len(), 3);
            assert_eq!(mine.iter().map(|m| m.bytes).sum::<u64>(), 3000);
            assert_eq!((p.bytes_on(c), p.sends_on(c)), (3000, 3));
            assert_eq!(p.message(p.first_on(c)).conn, c);
        }
        // Up: a node's chunk goes after those of its children.
        let Shape::Tree(t) = &p.shape else {
            unreachable!()
        };
        for (tree, parent) in dtree(8).iter().enumerate() {
            let up_at = |from: u32| {
                let conn = t.conn_at[tree * 2 * 8 + from as usize];
                let c = p.conns[conn as usize];
                assert_eq!((Some(c.to.0), c.from.0), (parent[from as usize], from));
                sent.iter().position(|m| m.conn == conn).unwrap()
            };
            for (x, q) in parent.iter().enumerate() {
                if let Some(q) = q.filter(|&q| parent[q as usize].is_some()) {
                    assert!(up_at(x as u32) < up_at(q), "tree {tree}: {x} before {q}");
                }
            }
        }
    }

    /// NCCL's binary tree: one root (rank 0, with one child), at most two
    /// children, odd ranks as leaves; the second tree (mirrored for an
    /// even count, shifted for an odd one) has no inner rank in common
    /// with the first but rank 0's.
    #[test]
    fn double_binary_tree_shapes() {
        for n in [2usize, 3, 4, 7, 8, 12, 13, 14, 16, 33] {
            let trees = dtree(n);
            let inner: Vec<Vec<usize>> = trees
                .iter()
                .map(|parent| {
                    assert_eq!(parent.iter().filter(|p| p.is_none()).count(), 1, "n={n}");
                    let mut children = vec![0; n];
                    for q in parent.iter().flatten() {
                        children[*q as usize] += 1;
                    }
                    assert!(children.iter().all(|&c| c <= 2), "n={n}");
                    // Every rank reaches the root.
                    for r in 0..n {
                        let (mut x, mut hops) = (r, 0);
                        while let Some(q) = parent[x] {
                            x = q as usize;
                            hops += 1;
                            assert!(hops <= n, "n={n}: a cycle");
                        }
                    }
                    (0..n).filter(|&p| children[p] > 0).collect()
                })
                .collect();
            assert_eq!(trees[0][0], None);
            assert!(inner[0].iter().all(|&p| p == 0 || p % 2 == 0), "n={n}");
            let both: Vec<&usize> = inner[0].iter().filter(|r| inner[1].contains(r)).collect();
            assert!(both.iter().all(|&&r| r == 0), "n={n}: {both:?}");
        }
        // The picture in NCCL's source: 14 ranks, 8 under 0, 12 under 8,
        // 13 under 12.
        let t = btree(14);
        assert_eq!(
            (t[8], t[12], t[13], t[4], t[1]),
            (Some(0), Some(8), Some(12), Some(8), Some(2))
        );
    }

    /// Servers of 4, 4 and 2 GPUs: each tree is a chain inside every
    /// server from its first GPU, and the heads (positions 0, 4, 8) form
    /// the double binary tree over 3 servers; every chunk still reaches
    /// every position.
    #[test]
    fn tree_chains_inside_servers() {
        let trees = nccl_trees(&[4, 4, 2]);
        for parent in &trees {
            for (p, want) in [(1, 0), (2, 1), (3, 2), (5, 4), (6, 5), (7, 6), (9, 8)] {
                assert_eq!(parent[p], Some(want));
            }
            let heads: Vec<Option<u32>> = [0, 4, 8].iter().map(|&h| parent[h]).collect();
            assert_eq!(heads.iter().filter(|h| h.is_none()).count(), 1);
            assert!(heads.iter().flatten().all(|q| [0, 4, 8].contains(q)));
        }
        let mut p = Pass::tree(base(10), &[4, 4, 2], [2000, 2000], 1000, &mut local).unwrap();
        let sent = run(&mut p);
        // 9 edges per tree, both ways, 2 chunks of each tree's half.
        assert_eq!(sent.len(), 2 * 2 * 9 * 2);
    }

    /// PAT over 6 ranks (not a power of two): the all-gather's stages at
    /// distances 4, 2, 1 move 1, 1 and 3 blocks, 5 blocks a rank in all;
    /// each rank sends to the rank the distance below; a chunk's stage
    /// goes only after the chunk's earlier stages reached the sender;
    /// every rank is done. The reduce-scatter runs the distances the
    /// other way.
    #[test]
    fn pat_exchanges_with_ranks_a_power_of_two_away() {
        assert_eq!(pat_stages(6, true), [(4, 1), (2, 1), (1, 3)]);
        assert_eq!(pat_stages(6, false), [(1, 3), (2, 1), (4, 1)]);
        assert_eq!(pat_stages(8, true), [(4, 1), (2, 2), (1, 4)]);
        assert_eq!(pat_stages(128, false)[6], (64, 1));
        // 6,000 bytes: blocks of 1,000 in chunks of 500.
        let mut p = Pass::pat(base(6), 6000, true, 500, &mut local).unwrap();
        assert_eq!(p.conns.len(), 6 * 3);
        for (c, conn) in p.conns.iter().enumerate() {
            let (i, l) = (c as u32 / 3, c as u32 % 3);
            assert_eq!(conn.from.0, i);
            assert_eq!(conn.to.0, (i + 6 - (1 << l)) % 6);
        }
        // Release order: a message is released once what it needs arrived.
        let mut out = Released::default();
        for i in 0..6 {
            p.enter(i, &mut out);
        }
        // Only stage 0 goes at first: 6 ranks x 2 chunks.
        assert_eq!(out.send.len(), 12);
        let mut seen = std::collections::HashSet::new();
        let mut at = 0;
        let mut per_rank = [0u64; 6];
        while at < out.send.len() {
            let idx = out.send[at];
            at += 1;
            let Shape::Pat(pat) = &p.shape else {
                unreachable!()
            };
            let (s, j, i) = pat.decode(6, idx);
            for earlier in 0..s {
                // The sender had the chunk's earlier stages.
                let from = (i + pat.stages[earlier].0) % 6;
                assert!(seen.contains(&(earlier, j, from)), "{s} {j} {i}");
            }
            seen.insert((s, j, i));
            per_rank[i as usize] += p.message(idx).bytes;
            p.arrive(idx, &mut out);
        }
        assert_eq!(per_rank, [5000; 6], "n - 1 blocks from every rank");
        assert_eq!(seen.len(), 3 * 2 * 6);
        let mut done = out.done.clone();
        done.sort_unstable();
        assert_eq!(done, [0, 1, 2, 3, 4, 5]);
        for c in 0..p.conns.len() as u32 {
            let l = c % 3;
            let blocks = [3, 1, 1][l as usize];
            assert_eq!((p.bytes_on(c), p.sends_on(c)), (blocks * 1000, 2));
            assert_eq!(p.message(p.first_on(c)).conn, c);
        }
        let mut rs = Pass::pat(base(6), 6000, false, 500, &mut local).unwrap();
        let sent = run(&mut rs);
        assert_eq!(sent.iter().map(|m| m.bytes).sum::<u64>(), 6 * 5000);
        // Fewer bytes than ranks: nothing to send, every rank done.
        assert!(run(&mut Pass::pat(base(6), 5, true, 500, &mut local).unwrap()).is_empty());
    }
}
