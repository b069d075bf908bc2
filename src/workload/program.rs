//! A ring pass made as it runs: its messages are numbered by formula and
//! released one at a time as the messages they wait for arrive, instead
//! of being put in the task graph up front.
//!
//! A ring pass over positions 0..n (ring order) moves `data` bytes cut
//! into n blocks in `steps` steps: at step k position i sends block
//! (i - k) mod n to position i + 1, slice by slice (a block is cut into
//! `slices` chunks that move through the steps as a pipeline). Message
//! (k, i, j) goes once position i has entered the pass and, for k > 0,
//! once message (k - 1, i - 1, j) has arrived at i. Position i's part is
//! done once the last step of every slice has arrived at it.
//!
//! What the pass holds is per position and slice (what each has sent and
//! received), so its memory follows the GPUs and chunks, not the
//! messages: a 32,768-GPU ring all-reduce has hundreds of millions of
//! messages, and only those in flight exist at any time (the engine's
//! `tasks::Dynamic`). Every partition of a parallel run holds the whole
//! pass but drives only its own positions: everything a position does
//! follows from what arrives at it, which happens in the partition of
//! its host.

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

/// One ring pass (see the module's notes).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RingPass {
    pub workload: u32,
    pub qps: u32,
    pub channel: u32,
    /// The GPUs in ring order.
    pub order: Vec<GpuId>,
    data: u64,
    steps: u32,
    slices: u32,
    /// How position i's messages to position i + 1 travel.
    pub via: Vec<Via>,
    /// Position i's connection key (`FlowSpec::conn`).
    pub conn: Vec<u64>,
    /// The task whose start lets position i enter, and the task done
    /// when its part is, by position.
    pub enter: Vec<u32>,
    pub exit: Vec<u32>,
    /// The number of its first message among every pass of the run.
    pub first: u64,
    entered: Vec<bool>,
    /// Per position and slice: steps sent, steps arrived.
    sent: Vec<u32>,
    arrived: Vec<u32>,
    /// Per position: slices whose last step has arrived.
    complete: Vec<u32>,
}

/// What a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// Sending position (it goes to the next).
    pub pos: u32,
    pub step: u32,
    pub slice: u32,
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

impl RingPass {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        workload: u32,
        qps: u32,
        channel: u32,
        order: Vec<GpuId>,
        data: u64,
        steps: u32,
        slices: u32,
        via: Vec<Via>,
        conn: Vec<u64>,
        first: u64,
    ) -> RingPass {
        let n = order.len();
        let cells = n * slices as usize;
        RingPass {
            workload,
            qps,
            channel,
            order,
            data,
            steps,
            slices,
            via,
            conn,
            enter: Vec::new(),
            exit: Vec::new(),
            first,
            entered: vec![false; n],
            sent: vec![0; cells],
            arrived: vec![0; cells],
            complete: vec![0; n],
        }
    }

    /// What it holds while it runs (its messages aside).
    pub fn state_bytes(&self) -> u64 {
        let n = self.order.len() as u64;
        n * (4 + 1 + 24 + 4 + 8 + 4 + 4) + n * u64::from(self.slices) * 8
    }

    pub fn positions(&self) -> usize {
        self.order.len()
    }

    /// Messages it numbers (zero-byte ones included: they are never sent).
    pub fn messages(&self) -> u64 {
        u64::from(self.steps) * self.order.len() as u64 * u64::from(self.slices)
    }

    /// Message `idx`: sender, step, slice and size.
    pub fn message(&self, idx: u64) -> Message {
        let slices = u64::from(self.slices);
        let n = self.order.len() as u64;
        let slice = (idx % slices) as u32;
        let rest = idx / slices;
        let pos = (rest % n) as u32;
        let step = (rest / n) as u32;
        Message {
            pos,
            step,
            slice,
            bytes: self.bytes(step, pos, slice),
        }
    }

    fn index(&self, step: u32, pos: u32, slice: u32) -> u64 {
        (u64::from(step) * self.order.len() as u64 + u64::from(pos)) * u64::from(self.slices)
            + u64::from(slice)
    }

    fn bytes(&self, step: u32, pos: u32, slice: u32) -> u64 {
        let n = self.order.len() as u64;
        let block = (u64::from(pos) + n - u64::from(step) % n) % n;
        share(
            share(self.data, n, block),
            u64::from(self.slices),
            u64::from(slice),
        )
    }

    /// Message `idx`'s write, if it has one: from the sender (or its PXN
    /// proxy) to the next position, on the connection's QPs.
    pub fn spec(&self, topo: &Topology, idx: u64) -> Option<FlowSpec> {
        let m = self.message(idx);
        let n = self.order.len();
        let to = self.order[(m.pos as usize + 1) % n];
        let from = match self.via[m.pos as usize] {
            Via::Local => return None,
            Via::Net { .. } => self.order[m.pos as usize],
            Via::Pxn { proxy, .. } => proxy,
        };
        Some(FlowSpec {
            src: from,
            dst: to,
            src_nic: topo.gpus[from.idx()].nic,
            dst_nic: topo.gpus[to.idx()].nic,
            bytes: m.bytes,
            start: crate::units::SimTime::ZERO,
            qps: self.qps,
            rate: None,
            workload: self.workload,
            gated: true,
            conn: Some(self.conn[m.pos as usize]),
        })
    }

    /// The first message position `pos` sends (its connection's first).
    pub fn first_of(&self, pos: u32) -> u64 {
        self.index(0, pos, 0)
    }

    /// Bytes position `pos` sends to the next over the whole pass.
    pub fn bytes_from(&self, pos: u32) -> u64 {
        self.over_steps(pos, |block| block)
    }

    /// Messages with bytes that position `pos` sends.
    pub fn sends_from(&self, pos: u32) -> u64 {
        let slices = u64::from(self.slices);
        self.over_steps(pos, |block| block.min(slices))
    }

    /// The sum over the steps of `f` of the block position `pos` sends at
    /// each, without going through the steps (a ring across thousands of
    /// GPUs has as many): the blocks cycle, and have two sizes.
    fn over_steps(&self, pos: u32, f: impl Fn(u64) -> u64) -> u64 {
        let n = self.order.len() as u64;
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

    /// Position `pos` enters the pass.
    pub fn enter(&mut self, pos: u32, out: &mut Released) {
        self.entered[pos as usize] = true;
        let mut work = Vec::new();
        for j in 0..self.slices {
            self.try_send(pos, j, out, &mut work);
        }
        self.settle(work, out);
        if self.complete[pos as usize] == self.slices {
            out.done.push(pos);
        }
    }

    /// Message `idx` (a number `message` decodes) has arrived.
    pub fn arrive(&mut self, idx: u64, out: &mut Released) {
        let m = self.message(idx);
        let to = (m.pos + 1) % self.order.len() as u32;
        self.settle(vec![(to, m.slice)], out);
    }

    /// Arrivals at (position, slice), and what follows from them;
    /// zero-byte messages arrive as they are released.
    fn settle(&mut self, mut work: Vec<(u32, u32)>, out: &mut Released) {
        while let Some((p, j)) = work.pop() {
            let c = self.cell(p, j);
            self.arrived[c] += 1;
            if self.arrived[c] == self.steps {
                self.complete[p as usize] += 1;
                if self.complete[p as usize] == self.slices && self.entered[p as usize] {
                    out.done.push(p);
                }
            }
            self.try_send(p, j, out, &mut work);
        }
    }

    fn cell(&self, p: u32, j: u32) -> usize {
        p as usize * self.slices as usize + j as usize
    }

    /// Sends what position `p` may of slice `j`: step k once it has entered
    /// and step k - 1 has arrived.
    fn try_send(&mut self, p: u32, j: u32, out: &mut Released, work: &mut Vec<(u32, u32)>) {
        if !self.entered[p as usize] {
            return;
        }
        let c = self.cell(p, j);
        while self.sent[c] < self.steps && self.sent[c] <= self.arrived[c] {
            let k = self.sent[c];
            self.sent[c] += 1;
            if self.bytes(k, p, j) == 0 {
                work.push(((p + 1) % self.order.len() as u32, j));
            } else {
                out.send.push(self.index(k, p, j));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(n: u32, data: u64, steps: u32, slices: u32) -> RingPass {
        let order = (0..n).map(GpuId).collect();
        let via = vec![Via::Local; n as usize];
        RingPass::new(
            0,
            1,
            0,
            order,
            data,
            steps,
            slices,
            via,
            vec![0; n as usize],
            0,
        )
    }

    /// Runs a pass to the end, delivering messages in the order they are
    /// released; returns the messages sent in that order.
    fn run(p: &mut RingPass) -> Vec<Message> {
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
        assert_eq!(out.done.len(), p.positions(), "every position done once");
        sent
    }

    /// An all-reduce over 4 ranks: 2(n-1) steps, each rank sending one
    /// block per step, each block once per step, in the pipeline's order.
    #[test]
    fn a_ring_all_reduce_sends_each_block_once_per_step() {
        let mut p = pass(4, 4000, 6, 2);
        let sent = run(&mut p);
        assert_eq!(sent.len() as u64, p.messages());
        for pos in 0..4 {
            let mine: Vec<&Message> = sent.iter().filter(|m| m.pos == pos).collect();
            assert_eq!(mine.len(), 12);
            assert_eq!(mine.iter().map(|m| m.bytes).sum::<u64>(), 6 * 1000);
            assert_eq!(p.bytes_from(pos), 6000);
            // Step by step for each slice.
            for j in 0..2 {
                let steps: Vec<u32> = mine
                    .iter()
                    .filter(|m| m.slice == j)
                    .map(|m| m.step)
                    .collect();
                assert_eq!(steps, (0..6).collect::<Vec<_>>());
            }
        }
    }

    /// A position sends step k only once step k - 1 has come from the one
    /// before it: with one position not yet entered, the ring stops there.
    #[test]
    fn a_position_waits_for_what_it_forwards() {
        let mut p = pass(3, 300, 4, 1);
        let mut out = Released::default();
        p.enter(0, &mut out);
        p.enter(1, &mut out);
        // 0 and 1 send step 0; 0's arrives at 1, which forwards step 1.
        let first: Vec<Message> = out.send.iter().map(|&i| p.message(i)).collect();
        assert_eq!(
            first.iter().map(|m| (m.pos, m.step)).collect::<Vec<_>>(),
            [(0, 0), (1, 0)]
        );
        let sends = out.send.clone();
        for idx in sends {
            p.arrive(idx, &mut out);
        }
        let now: Vec<(u32, u32)> = out.send[2..]
            .iter()
            .map(|&i| (p.message(i).pos, p.message(i).step))
            .collect();
        assert_eq!(now, [(1, 1)], "2 has not entered: it holds what 1 sent");
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
            let p = pass(n, data, steps, slices);
            for pos in 0..n {
                let mine = (0..p.messages())
                    .map(|i| p.message(i))
                    .filter(|m| m.pos == pos);
                let (b, c) = mine.fold((0, 0), |(b, c), m| {
                    (b + m.bytes, c + u64::from(m.bytes > 0))
                });
                assert_eq!(
                    (p.bytes_from(pos), p.sends_from(pos)),
                    (b, c),
                    "{n} {data} {steps} {slices} {pos}"
                );
            }
        }
    }

    /// Fewer bytes than positions: zero-byte blocks are never sent, yet
    /// the steps after them go on, and every position finishes.
    #[test]
    fn zero_byte_blocks_pass_through() {
        let mut p = pass(4, 2, 6, 1);
        let sent = run(&mut p);
        assert!(sent.iter().all(|m| m.bytes > 0));
        assert_eq!(sent.len(), 6 * 2, "two one-byte blocks, six steps");
    }
}
