//! A broadcast down a chain of positions from the first, chunk by chunk.

use super::{Base, Pass, Released, Route, Shape};
use crate::workload::share;

/// A broadcast down a chain from position 0, chunk by chunk.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Chain {
    pub(super) data: u64,
    pub(super) slices: u32,
    /// Per position and slice: whether it has the chunk.
    pub(super) has: Vec<bool>,
    /// Per position: chunks it has.
    pub(super) got: Vec<u32>,
}

impl Pass {
    /// A broadcast of `data` bytes from `order[0]` down the chain of
    /// positions, in chunks of `chunk` bytes.
    pub fn chain(base: Base, data: u64, chunk: u64, route: &mut Route) -> Result<Pass, String> {
        let n = base.order.len();
        let conns = base.connect((0..n - 1).map(|i| (i, i + 1, base.channel)), route)?;
        let slices = data.div_ceil(chunk.max(1)).max(1) as u32;
        let c = Chain {
            data,
            slices,
            has: vec![false; n * slices as usize],
            got: vec![0; n],
        };
        Ok(base.into_pass(conns, Shape::Chain(c)))
    }
}

impl Chain {
    /// Position `i` (entered) passes chunk `j` on; a chunk of no bytes
    /// arrives at once.
    pub(super) fn forward(
        &self,
        n: u32,
        i: u32,
        j: u32,
        out: &mut Released,
        work: &mut Vec<(u32, u32)>,
    ) {
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
    pub(super) fn settle(
        &mut self,
        n: u32,
        mut work: Vec<(u32, u32)>,
        entered: &[bool],
        out: &mut Released,
    ) {
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
