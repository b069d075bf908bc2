//! A ring: at step k position i sends block (i - k) mod n to position
//! i + 1, chunk by chunk, once it has entered and step k - 1 has come.

use super::{Base, Pass, Released, Route, Shape};
use crate::workload::share;

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Ring {
    pub(super) data: u64,
    pub(super) steps: u32,
    pub(super) slices: u32,
    /// Per position and slice: steps sent, steps arrived.
    pub(super) sent: Vec<u32>,
    pub(super) arrived: Vec<u32>,
    /// Per position: slices whose last step has arrived.
    pub(super) complete: Vec<u32>,
}

impl Pass {
    /// A ring pass of `steps` steps over `order` (see the module's notes),
    /// each connection routed by `route`.
    pub fn ring(
        base: Base,
        data: u64,
        steps: u32,
        slices: u32,
        route: &mut Route,
    ) -> Result<Pass, String> {
        let n = base.order.len();
        let conns = base.connect((0..n).map(|i| (i, (i + 1) % n, base.channel)), route)?;
        let cells = n * slices as usize;
        let ring = Ring {
            data,
            steps,
            slices,
            sent: vec![0; cells],
            arrived: vec![0; cells],
            complete: vec![0; n],
        };
        Ok(base.into_pass(conns, Shape::Ring(ring)))
    }
}

impl Ring {
    pub(super) fn decode(&self, n: u64, idx: u64) -> (u32, u32, u32) {
        let slices = u64::from(self.slices);
        let slice = (idx % slices) as u32;
        let rest = idx / slices;
        ((rest / n) as u32, (rest % n) as u32, slice)
    }

    pub(super) fn index(&self, n: u64, step: u32, pos: u32, slice: u32) -> u64 {
        (u64::from(step) * n + u64::from(pos)) * u64::from(self.slices) + u64::from(slice)
    }

    pub(super) fn bytes(&self, n: u64, step: u32, pos: u32, slice: u32) -> u64 {
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
    pub(super) fn over_steps(&self, n: u64, pos: u32, f: impl Fn(u64) -> u64) -> u64 {
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
    pub(super) fn settle(
        &mut self,
        n: u32,
        mut work: Vec<(u32, u32)>,
        entered: &[bool],
        out: &mut Released,
    ) {
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
    pub(super) fn try_send(
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
