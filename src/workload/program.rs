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
//! A **tree** pass is NCCL's double binary tree all-reduce: half the
//! data goes up and back down each of two binary trees over the positions
//! (`btree`; the second shifted by one position), chunk by chunk. Up a
//! tree a node sends a chunk to its parent once it has entered and has
//! the chunk from all its children; the root, once it has entered and has
//! them, sends it down; down, a node passes a chunk to its children once
//! it has it from its parent. A position's part is done once it has every
//! reduced chunk (the root: once it has reduced them).
//!
//! What a pass holds is per position and chunk (what each has sent and
//! received), so its memory follows the GPUs and chunks, not the
//! messages: a 32,768-GPU ring all-reduce has hundreds of millions of
//! messages, and only those in flight exist at any time (the engine's
//! `passes`). Every partition of a parallel run holds the whole pass but
//! drives only its own positions: everything a position does follows
//! from what arrives at it, which happens in the partition of its host.

use super::collective::share;
use super::FlowSpec;
use crate::topology::{GpuId, Topology};

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
    entered: Vec<bool>,
    finished: Vec<bool>,
    shape: Shape,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
enum Shape {
    Ring(Ring),
    Tree(Box<Tree>),
    Halving(Halving),
    Chain(Chain),
    AllToAll(AllToAll),
}

/// Halving-doubling: stage after stage, each rank sends its share to its
/// partner at the stage's distance, once it has what its partner of the
/// stage before sent it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Halving {
    /// Per stage: distance, bytes, chunks.
    stages: Vec<(u32, u64, u32)>,
    most: u32,
    /// Distances a rank has partners at (log2 n).
    log: u32,
    /// Per rank: the next stage it sends.
    next: Vec<u32>,
    /// Per stage and rank: chunks that arrived.
    arrived: Vec<u32>,
}

/// A broadcast down a chain from position 0, chunk by chunk.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Chain {
    data: u64,
    slices: u32,
    /// Per position and slice: whether it has the chunk.
    has: Vec<bool>,
    /// Per position: chunks it has.
    got: Vec<u32>,
}

/// Every rank sends its share to every other at once, over the channels
/// and in chunks.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct AllToAll {
    bytes: u64,
    channels: u32,
    chunk: u64,
    most: u32,
    /// Per rank: chunks that arrived, and that will.
    arrived: Vec<u32>,
    expect: Vec<u32>,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Ring {
    data: u64,
    steps: u32,
    slices: u32,
    /// Per position and slice: steps sent, steps arrived.
    sent: Vec<u32>,
    arrived: Vec<u32>,
    /// Per position: slices whose last step has arrived.
    complete: Vec<u32>,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Tree {
    /// Each tree's half of the data and its chunks (none if it has no
    /// bytes).
    half: [u64; 2],
    slices: [u32; 2],
    /// Parent and children of each tree position (position p of tree t is
    /// pass position (p + t) mod n).
    parent: Vec<Option<u32>>,
    children: Vec<Vec<u32>>,
    /// Per tree, slice and tree position: chunks come from children, and
    /// whether its own went up (or, at the root, down).
    from_children: Vec<u8>,
    went: Vec<bool>,
    /// Per pass position: reduced chunks it has.
    got: Vec<u32>,
    /// The connection of (tree, up or down, tree position), `u32::MAX`
    /// for a root, and where each connection is in it.
    conn_at: Vec<u32>,
    conn_where: Vec<u32>,
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

/// How a pass's connection between two GPUs travels and its key.
pub type Route<'a> = dyn FnMut(GpuId, GpuId, u32) -> Result<(Via, u64), String> + 'a;

impl Pass {
    fn with(
        workload: u32,
        qps: u32,
        order: Vec<GpuId>,
        conns: Vec<Conn>,
        first: u64,
        shape: Shape,
    ) -> Pass {
        let n = order.len();
        Pass {
            workload,
            qps,
            order,
            conns,
            enter: Vec::new(),
            exit: Vec::new(),
            first,
            entered: vec![false; n],
            finished: vec![false; n],
            shape,
        }
    }

    /// A ring pass of `steps` steps over `order` (see the module's notes),
    /// each connection routed by `route`.
    #[allow(clippy::too_many_arguments)]
    pub fn ring(
        workload: u32,
        qps: u32,
        channel: u32,
        order: Vec<GpuId>,
        data: u64,
        steps: u32,
        slices: u32,
        first: u64,
        route: &mut Route,
    ) -> Result<Pass, String> {
        let n = order.len();
        let mut conns = Vec::with_capacity(n);
        for i in 0..n {
            let (from, to) = (order[i], order[(i + 1) % n]);
            let (via, key) = route(from, to, channel)?;
            conns.push(Conn { from, to, via, key });
        }
        let cells = n * slices as usize;
        let ring = Ring {
            data,
            steps,
            slices,
            sent: vec![0; cells],
            arrived: vec![0; cells],
            complete: vec![0; n],
        };
        Ok(Pass::with(
            workload,
            qps,
            order,
            conns,
            first,
            Shape::Ring(ring),
        ))
    }

    /// A double binary tree all-reduce of `data` bytes over `order`, each
    /// tree's half cut into chunks of `chunk` bytes.
    #[allow(clippy::too_many_arguments)]
    pub fn tree(
        workload: u32,
        qps: u32,
        channel: u32,
        order: Vec<GpuId>,
        data: u64,
        chunk: u64,
        first: u64,
        route: &mut Route,
    ) -> Result<Pass, String> {
        let n = order.len();
        let parent = btree(n);
        let mut children = vec![Vec::new(); n];
        for (p, q) in parent.iter().enumerate() {
            if let Some(q) = q {
                children[*q as usize].push(p as u32);
            }
        }
        let half = [share(data, 2, 0), share(data, 2, 1)];
        let slices = half.map(|h| {
            if h == 0 {
                0
            } else {
                h.div_ceil(chunk.max(1)) as u32
            }
        });
        let mut conns = Vec::new();
        let mut conn_at = vec![u32::MAX; 4 * n];
        let mut conn_where = Vec::new();
        for t in 0..2 {
            if half[t] == 0 {
                continue;
            }
            let at = |p: usize| order[(p + t) % n];
            for (p, q) in parent.iter().enumerate() {
                let Some(q) = *q else { continue };
                for (dir, (from, to)) in [(at(p), at(q as usize)), (at(q as usize), at(p))]
                    .into_iter()
                    .enumerate()
                {
                    let (via, key) = route(from, to, channel)?;
                    conn_at[(t * 2 + dir) * n + p] = conns.len() as u32;
                    conn_where.push(((t * 2 + dir) * n + p) as u32);
                    conns.push(Conn { from, to, via, key });
                }
            }
        }
        let most = slices[0].max(slices[1]) as usize;
        let tree = Tree {
            half,
            slices,
            parent: parent.clone(),
            children,
            from_children: vec![0; 2 * most * n],
            went: vec![false; 2 * most * n],
            got: vec![0; n],
            conn_at,
            conn_where,
        };
        Ok(Pass::with(
            workload,
            qps,
            order,
            conns,
            first,
            Shape::Tree(Box::new(tree)),
        ))
    }

    /// Halving-doubling (Rabenseifner) of `data` bytes over `order` (a
    /// power of two): `stages` as (distance, fraction 1/den of the data).
    #[allow(clippy::too_many_arguments)]
    pub fn halving(
        workload: u32,
        qps: u32,
        channel: u32,
        order: Vec<GpuId>,
        data: u64,
        stages: &[(u32, u64)],
        chunk: u64,
        first: u64,
        route: &mut Route,
    ) -> Result<Pass, String> {
        let n = order.len();
        let log = n.trailing_zeros();
        let mut conns = Vec::with_capacity(n * log as usize);
        for i in 0..n {
            for l in 0..log {
                let (from, to) = (order[i], order[i ^ (1 << l)]);
                let (via, key) = route(from, to, channel)?;
                conns.push(Conn { from, to, via, key });
            }
        }
        let stages: Vec<(u32, u64, u32)> = stages
            .iter()
            .map(|&(dist, den)| {
                let bytes = data / den;
                (dist, bytes, bytes.div_ceil(chunk.max(1)).max(1) as u32)
            })
            .collect();
        let most = stages.iter().map(|s| s.2).max().unwrap_or(1);
        let h = Halving {
            arrived: vec![0; stages.len() * n],
            next: vec![0; n],
            stages,
            most,
            log,
        };
        Ok(Pass::with(
            workload,
            qps,
            order,
            conns,
            first,
            Shape::Halving(h),
        ))
    }

    /// A broadcast of `data` bytes from `order[0]` down the chain of
    /// positions, in chunks of `chunk` bytes.
    #[allow(clippy::too_many_arguments)]
    pub fn chain(
        workload: u32,
        qps: u32,
        channel: u32,
        order: Vec<GpuId>,
        data: u64,
        chunk: u64,
        first: u64,
        route: &mut Route,
    ) -> Result<Pass, String> {
        let n = order.len();
        let mut conns = Vec::with_capacity(n - 1);
        for i in 0..n - 1 {
            let (from, to) = (order[i], order[i + 1]);
            let (via, key) = route(from, to, channel)?;
            conns.push(Conn { from, to, via, key });
        }
        let slices = data.div_ceil(chunk.max(1)).max(1) as u32;
        let c = Chain {
            data,
            slices,
            has: vec![false; n * slices as usize],
            got: vec![0; n],
        };
        Ok(Pass::with(
            workload,
            qps,
            order,
            conns,
            first,
            Shape::Chain(c),
        ))
    }

    /// An all-to-all: `bytes` from every rank, a share to each other one
    /// (by the receiver's place), over `channels` and in chunks.
    #[allow(clippy::too_many_arguments)]
    pub fn all_to_all(
        workload: u32,
        qps: u32,
        order: Vec<GpuId>,
        bytes: u64,
        channels: u32,
        chunk: u64,
        first: u64,
        route: &mut Route,
    ) -> Result<Pass, String> {
        let n = order.len();
        let mut conns = Vec::with_capacity(n * (n - 1) * channels as usize);
        for i in 0..n {
            for k in (0..n).filter(|&k| k != i) {
                for ch in 0..channels {
                    let (from, to) = (order[i], order[k]);
                    let (via, key) = route(from, to, ch)?;
                    conns.push(Conn { from, to, via, key });
                }
            }
        }
        let mut a = AllToAll {
            bytes,
            channels,
            chunk,
            most: 0,
            arrived: vec![0; n],
            expect: vec![0; n],
        };
        for k in 0..n {
            let per_ch: u32 = (0..channels).map(|ch| a.slices(n, k, ch).1).sum();
            a.expect[k] = per_ch * (n as u32 - 1);
            a.most = a.most.max(
                (0..channels)
                    .map(|ch| a.slices(n, k, ch).1)
                    .max()
                    .unwrap_or(0),
            );
        }
        a.most = a.most.max(1);
        Ok(Pass::with(
            workload,
            qps,
            order,
            conns,
            first,
            Shape::AllToAll(a),
        ))
    }

    /// What it holds while it runs (its messages aside).
    pub fn state_bytes(&self) -> u64 {
        let n = self.order.len() as u64;
        let common = n * (4 + 2 + 8 + 4) + self.conns.len() as u64 * 32;
        common
            + match &self.shape {
                Shape::Ring(r) => n * 4 + n * u64::from(r.slices) * 8,
                Shape::Tree(t) => {
                    let most = u64::from(t.slices[0].max(t.slices[1]));
                    n * (4 + 8 + 24 + 16 + 4) + 2 * most * n * 2 + self.conns.len() as u64 * 4
                }
                Shape::Halving(h) => n * 4 + h.stages.len() as u64 * (n * 4 + 16),
                Shape::Chain(c) => n * 4 + n * u64::from(c.slices),
                Shape::AllToAll(_) => n * 8,
            }
    }

    pub fn positions(&self) -> usize {
        self.order.len()
    }

    /// Messages it numbers (some never sent: zero-byte blocks of a ring,
    /// numbers past a tree's chunks).
    pub fn messages(&self) -> u64 {
        let n = self.order.len() as u64;
        match &self.shape {
            Shape::Ring(r) => u64::from(r.steps) * n * u64::from(r.slices),
            Shape::Tree(t) => 4 * u64::from(t.slices[0].max(t.slices[1])) * n,
            Shape::Halving(h) => h.stages.len() as u64 * u64::from(h.most) * n,
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
                    bytes: share(t.half[tree], u64::from(t.slices[tree]), u64::from(slice)),
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
            Shape::Chain(ch) => u64::from(c) * u64::from(ch.slices),
            Shape::AllToAll(a) => u64::from(c) * u64::from(a.most),
        }
    }

    /// Bytes connection `c` carries over the whole pass.
    pub fn bytes_on(&self, c: u32) -> u64 {
        match &self.shape {
            Shape::Ring(r) => r.over_steps(self.order.len() as u64, c, |block| block),
            Shape::Tree(t) => t.half[t.tree_of(self.order.len(), c)],
            Shape::Halving(h) => h.on(c).map(|st| st.1).sum(),
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
                    let p = (pos + n - tree as u32 % n) % n;
                    for j in 0..t.slices[tree] {
                        t.try_up(n, tree, j, p, &self.entered, out);
                    }
                }
            }
            Shape::Halving(h) => h.try_send(n, pos, out),
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
            Shape::Chain(c) => p == 0 || c.got[p] == c.slices,
            Shape::AllToAll(a) => a.arrived[p] == a.expect[p],
        };
        if complete {
            self.finished[p] = true;
            out.done.push(pos);
        }
    }
}

impl Ring {
    fn decode(&self, n: u64, idx: u64) -> (u32, u32, u32) {
        let slices = u64::from(self.slices);
        let slice = (idx % slices) as u32;
        let rest = idx / slices;
        ((rest / n) as u32, (rest % n) as u32, slice)
    }

    fn index(&self, n: u64, step: u32, pos: u32, slice: u32) -> u64 {
        (u64::from(step) * n + u64::from(pos)) * u64::from(self.slices) + u64::from(slice)
    }

    fn bytes(&self, n: u64, step: u32, pos: u32, slice: u32) -> u64 {
        let block = (u64::from(pos) + n - u64::from(step) % n) % n;
        share(
            share(self.data, n, block),
            u64::from(self.slices),
            u64::from(slice),
        )
    }

    /// The sum over the steps of `f` of the block position `pos` sends at
    /// each, without going through the steps (a ring across thousands of
    /// GPUs has as many): the blocks cycle, and have two sizes.
    fn over_steps(&self, n: u64, pos: u32, f: impl Fn(u64) -> u64) -> u64 {
        let (small, big) = (self.data / n, self.data / n + 1);
        // Blocks 0..r are one byte larger.
        let r = self.data % n;
        let steps = u64::from(self.steps);
        let cycle = r * f(big) + (n - r) * f(small);
        let rem = steps % n;
        // The last `rem` steps send blocks pos - rem + 1 ..= pos (cyclic).
        let hi = u64::from(pos);
        let lo = (hi + n - rem % n + 1) % n;
        let large = if rem == 0 {
            0
        } else if lo <= hi {
            r.min(hi + 1).saturating_sub(lo)
        } else {
            r.saturating_sub(lo) + r.min(hi + 1)
        };
        (steps / n) * cycle + large * f(big) + (rem - large) * f(small)
    }

    /// Arrivals at (position, slice), and what follows from them;
    /// zero-byte messages arrive as they are released. Positions that may
    /// be done go to `out.done` (checked by the caller).
    fn settle(&mut self, n: u32, mut work: Vec<(u32, u32)>, entered: &[bool], out: &mut Released) {
        while let Some((p, j)) = work.pop() {
            let c = p as usize * self.slices as usize + j as usize;
            self.arrived[c] += 1;
            if self.arrived[c] == self.steps {
                self.complete[p as usize] += 1;
                if self.complete[p as usize] == self.slices {
                    out.done.push(p);
                }
            }
            self.try_send(n, p, j, entered[p as usize], out, &mut work);
        }
    }

    /// Sends what position `p` may of slice `j`: step k once it has entered
    /// and step k - 1 has arrived.
    fn try_send(
        &mut self,
        n: u32,
        p: u32,
        j: u32,
        entered: bool,
        out: &mut Released,
        work: &mut Vec<(u32, u32)>,
    ) {
        if !entered {
            return;
        }
        let c = p as usize * self.slices as usize + j as usize;
        while self.sent[c] < self.steps && self.sent[c] <= self.arrived[c] {
            let k = self.sent[c];
            self.sent[c] += 1;
            if self.bytes(u64::from(n), k, p, j) == 0 {
                work.push(((p + 1) % n, j));
            } else {
                out.send.push(self.index(u64::from(n), k, p, j));
            }
        }
    }
}

impl Tree {
    fn most(&self) -> u64 {
        u64::from(self.slices[0].max(self.slices[1]))
    }

    /// (tree, slice, 0 up or 1 down, tree position) of message `idx`.
    fn decode(&self, n: u64, idx: u64) -> (usize, u32, usize, u32) {
        let p = (idx % n) as u32;
        let rest = idx / n;
        let dir = (rest % 2) as usize;
        let rest = rest / 2;
        let slice = (rest % self.most()) as u32;
        ((rest / self.most()) as usize, slice, dir, p)
    }

    fn index(&self, n: u64, tree: usize, slice: u32, dir: usize, p: u32) -> u64 {
        (((tree as u64 * self.most() + u64::from(slice)) * 2 + dir as u64) * n) + u64::from(p)
    }

    fn tree_of(&self, n: usize, c: u32) -> usize {
        self.conn_where[c as usize] as usize / n / 2
    }

    fn cell(&self, n: u32, tree: usize, j: u32, p: u32) -> usize {
        ((tree * self.most() as usize) + j as usize) * n as usize + p as usize
    }

    /// Tree position `p` of `tree` sends chunk `j` up (or, at the root,
    /// down) once it has entered and has it from all its children.
    fn try_up(
        &mut self,
        n: u32,
        tree: usize,
        j: u32,
        p: u32,
        entered: &[bool],
        out: &mut Released,
    ) {
        let pos = (p as usize + tree) % n as usize;
        let c = self.cell(n, tree, j, p);
        if self.went[c]
            || !entered[pos]
            || usize::from(self.from_children[c]) < self.children[p as usize].len()
        {
            return;
        }
        self.went[c] = true;
        if self.parent[p as usize].is_some() {
            out.send.push(self.index(u64::from(n), tree, j, 0, p));
        } else {
            // The root has the reduced chunk: down to its children.
            self.got[pos] += 1;
            out.done.push(pos as u32);
            self.down(n, tree, j, p, out);
        }
    }

    fn down(&mut self, n: u32, tree: usize, j: u32, p: u32, out: &mut Released) {
        for &x in &self.children[p as usize] {
            out.send.push(self.index(u64::from(n), tree, j, 1, x));
        }
    }

    fn arrive(&mut self, n: u32, idx: u64, entered: &[bool], out: &mut Released) {
        let (tree, j, dir, p) = self.decode(u64::from(n), idx);
        if dir == 0 {
            let Some(q) = self.parent[p as usize] else {
                return;
            };
            let c = self.cell(n, tree, j, q);
            self.from_children[c] += 1;
            self.try_up(n, tree, j, q, entered, out);
        } else {
            let pos = (p as usize + tree) % n as usize;
            self.got[pos] += 1;
            out.done.push(pos as u32);
            self.down(n, tree, j, p, out);
        }
    }
}

impl Halving {
    /// (stage, slice, sender) of message `idx`.
    fn decode(&self, n: u64, idx: u64) -> (usize, u32, u32) {
        let i = (idx % n) as u32;
        let rest = idx / n;
        let most = u64::from(self.most);
        ((rest / most) as usize, (rest % most) as u32, i)
    }

    fn index(&self, n: u64, s: usize, j: u32, i: u32) -> u64 {
        (s as u64 * u64::from(self.most) + u64::from(j)) * n + u64::from(i)
    }

    /// The stages connection `c` (of rank c / log, at distance 2^(c %
    /// log)) carries.
    fn on(&self, c: u32) -> impl Iterator<Item = &(u32, u64, u32)> {
        let dist = 1 << (c % self.log);
        self.stages.iter().filter(move |st| st.0 == dist)
    }

    /// Chunks with bytes of stage `s`.
    fn sends(&self, s: usize) -> u32 {
        let (_, bytes, slices) = self.stages[s];
        bytes.min(u64::from(slices)) as u32
    }

    /// Rank `i` (entered) sends its next stages while it has what the
    /// stage before each brought it.
    fn try_send(&mut self, n: u32, i: u32, out: &mut Released) {
        loop {
            let s = self.next[i as usize] as usize;
            if s == self.stages.len()
                || (s > 0 && self.arrived[(s - 1) * n as usize + i as usize] < self.sends(s - 1))
            {
                return;
            }
            self.next[i as usize] += 1;
            let (_, bytes, slices) = self.stages[s];
            for j in 0..slices {
                if share(bytes, u64::from(slices), u64::from(j)) > 0 {
                    out.send.push(self.index(u64::from(n), s, j, i));
                }
            }
        }
    }

    fn done(&self, n: usize, i: usize) -> bool {
        let last = self.stages.len();
        self.next[i] as usize == last
            && (last == 0 || self.arrived[(last - 1) * n + i] == self.sends(last - 1))
    }
}

impl Chain {
    /// Position `i` (entered) passes chunk `j` on; a chunk of no bytes
    /// arrives at once.
    fn forward(&self, n: u32, i: u32, j: u32, out: &mut Released, work: &mut Vec<(u32, u32)>) {
        if i + 1 >= n {
            return;
        }
        if share(self.data, u64::from(self.slices), u64::from(j)) == 0 {
            work.push((i + 1, j));
        } else {
            out.send
                .push(u64::from(i) * u64::from(self.slices) + u64::from(j));
        }
    }

    /// Chunks arriving at positions, and what follows.
    fn settle(&mut self, n: u32, mut work: Vec<(u32, u32)>, entered: &[bool], out: &mut Released) {
        while let Some((i, j)) = work.pop() {
            self.has[(i * self.slices + j) as usize] = true;
            self.got[i as usize] += 1;
            out.done.push(i);
            if entered[i as usize] {
                self.forward(n, i, j, out, &mut work);
            }
        }
    }
}

impl AllToAll {
    /// The bytes rank `k` gets from each other on channel `ch`, and their
    /// chunks.
    fn slices(&self, n: usize, k: usize, ch: u32) -> (u64, u32) {
        let pair = share(self.bytes, n as u64, k as u64);
        let data = share(pair, u64::from(self.channels), u64::from(ch));
        let slices = if data == 0 {
            0
        } else {
            data.div_ceil(self.chunk.max(1)).max(1) as u32
        };
        (data, slices)
    }

    /// The receiver of connection `c`.
    fn receiver(&self, n: usize, c: u32) -> usize {
        let pair = c as usize / self.channels as usize;
        let (i, kr) = (pair / (n - 1), pair % (n - 1));
        kr + usize::from(kr >= i)
    }

    /// Connection `c`'s bytes and chunks.
    fn of_conn(&self, n: usize, c: u32) -> (u64, u32) {
        self.slices(n, self.receiver(n, c), c % self.channels)
    }

    /// Rank `i` sends everything at once.
    fn send_all(&self, n: usize, i: u32, out: &mut Released) {
        let first = i as usize * (n - 1) * self.channels as usize;
        for c in first..first + (n - 1) * self.channels as usize {
            for j in 0..self.of_conn(n, c as u32).1 {
                out.send
                    .push(c as u64 * u64::from(self.most) + u64::from(j));
            }
        }
    }
}

/// Parent of each position in a balanced binary tree over positions
/// 0..n whose leaves are the even positions: each range's root is its
/// position p with the largest lowest set bit of p + 1.
pub fn btree(n: usize) -> Vec<Option<u32>> {
    fn build(lo: usize, hi: usize, up: Option<u32>, parent: &mut [Option<u32>]) {
        if lo >= hi {
            return;
        }
        let root = (lo..hi)
            .max_by_key(|&p| ((p + 1).trailing_zeros(), std::cmp::Reverse(p)))
            .unwrap_or(lo);
        parent[root] = up;
        build(lo, root, Some(root as u32), parent);
        build(root + 1, hi, Some(root as u32), parent);
    }
    let mut parent = vec![None; n];
    build(0, n, None, &mut parent);
    parent
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(_: GpuId, _: GpuId, _: u32) -> Result<(Via, u64), String> {
        Ok((Via::Local, 0))
    }

    fn ring(n: u32, data: u64, steps: u32, slices: u32) -> Pass {
        let order = (0..n).map(GpuId).collect();
        Pass::ring(0, 1, 0, order, data, steps, slices, 0, &mut local).unwrap()
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

    /// A double binary tree over 8 positions, 3 chunks per tree: every
    /// edge carries each chunk once up and once down, a chunk goes up only
    /// after the sender's children sent theirs, and every position is done.
    #[test]
    fn a_tree_reduces_up_and_broadcasts_down() {
        let order: Vec<GpuId> = (0..8).map(GpuId).collect();
        let mut p = Pass::tree(0, 1, 0, order, 6000, 1000, 0, &mut local).unwrap();
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
        let parent = btree(8);
        let up_at = |tree: usize, from: u32| {
            sent.iter()
                .position(|m| {
                    let c = p.conns[m.conn as usize];
                    c.from.0 == (from + tree as u32) % 8
                        && parent[from as usize].is_some_and(|q| c.to.0 == (q + tree as u32) % 8)
                })
                .unwrap()
        };
        for (x, q) in parent.iter().enumerate() {
            if let Some(q) = q {
                if parent[*q as usize].is_some() {
                    assert!(up_at(0, x as u32) < up_at(0, *q));
                }
            }
        }
    }

    /// The tree is a single rooted tree; its leaves are the even
    /// positions, so the second tree (shifted by one) has the odd
    /// positions as leaves and no rank is inner in both (n even).
    #[test]
    fn double_binary_tree_shapes() {
        for n in [2usize, 4, 8, 16, 6, 12] {
            let parent = btree(n);
            assert_eq!(parent.iter().filter(|p| p.is_none()).count(), 1, "n={n}");
            let mut children = vec![0; n];
            for p in parent.iter().flatten() {
                children[*p as usize] += 1;
            }
            assert!(children.iter().all(|&c| c <= 2));
            let inner_a: Vec<usize> = (0..n).filter(|&p| children[p] > 0).collect();
            assert!(inner_a.iter().all(|p| p % 2 == 1), "n={n}: {inner_a:?}");
            // Tree B holds rank (p + 1) mod n at position p.
            let inner_b: Vec<usize> = inner_a.iter().map(|p| (p + 1) % n).collect();
            assert!(inner_b.iter().all(|r| !inner_a.contains(r)), "n={n}");
        }
    }
}
