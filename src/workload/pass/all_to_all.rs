//! An all-to-all: every rank sends its share to every other at once.

use super::{Base, Pass, Released, Route, Shape};
use crate::workload::share;

/// Every rank sends its share to every other at once, over the channels
/// and in chunks.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct AllToAll {
    pub(super) bytes: u64,
    pub(super) channels: u32,
    pub(super) chunk: u64,
    pub(super) most: u32,
    /// Per rank: chunks that arrived, and that will.
    pub(super) arrived: Vec<u32>,
    pub(super) expect: Vec<u32>,
}

impl Pass {
    /// An all-to-all: `bytes` from every rank, a share to each other one
    /// (by the receiver's place), over `channels` and in chunks.
    /// (`base.channel` is not used: each pair has `channels`.)
    pub fn all_to_all(
        base: Base,
        bytes: u64,
        channels: u32,
        chunk: u64,
        route: &mut Route,
    ) -> Result<Pass, String> {
        let n = base.order.len();
        let pairs = (0..n).flat_map(|i| (0..n).filter(move |&k| k != i).map(move |k| (i, k)));
        let conns = base.connect(
            pairs.flat_map(|(i, k)| (0..channels).map(move |ch| (i, k, ch))),
            route,
        )?;
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
        Ok(base.into_pass(conns, Shape::AllToAll(a)))
    }
}

impl AllToAll {
    /// The bytes rank `k` gets from each other on channel `ch`, and their
    /// chunks.
    pub(super) fn slices(&self, n: usize, k: usize, ch: u32) -> (u64, u32) {
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
    pub(super) fn receiver(&self, n: usize, c: u32) -> usize {
        let pair = c as usize / self.channels as usize;
        let (i, kr) = (pair / (n - 1), pair % (n - 1));
        kr + usize::from(kr >= i)
    }

    /// Connection `c`'s bytes and chunks.
    pub(super) fn of_conn(&self, n: usize, c: u32) -> (u64, u32) {
        self.slices(n, self.receiver(n, c), c % self.channels)
    }

    /// Rank `i` sends everything at once.
    pub(super) fn send_all(&self, n: usize, i: u32, out: &mut Released) {
        let first = i as usize * (n - 1) * self.channels as usize;
        for c in first..first + (n - 1) * self.channels as usize {
            for j in 0..self.of_conn(n, c as u32).1 {
                out.send
                    .push(c as u64 * u64::from(self.most) + u64::from(j));
            }
        }
    }
}
