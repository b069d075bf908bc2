//! Halving-doubling (Rabenseifner): stage after stage, each rank sends
//! its share to its partner at the stage's distance.

use super::{Base, Pass, Released, Route, Shape};
use crate::workload::share;

/// Halving-doubling: stage after stage, each rank sends its share to its
/// partner at the stage's distance, once it has what its partner of the
/// stage before sent it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Halving {
    /// Per stage: distance, bytes, chunks.
    pub(super) stages: Vec<(u32, u64, u32)>,
    pub(super) most: u32,
    /// Distances a rank has partners at (log2 n).
    pub(super) log: u32,
    /// Per rank: the next stage it sends.
    pub(super) next: Vec<u32>,
    /// Per stage and rank: chunks that arrived.
    pub(super) arrived: Vec<u32>,
}

impl Pass {
    /// Halving-doubling (Rabenseifner) of `data` bytes over `order` (a
    /// power of two): `stages` as (distance, fraction 1/den of the data).
    pub fn halving(
        base: Base,
        data: u64,
        stages: &[(u32, u64)],
        chunk: u64,
        route: &mut Route,
    ) -> Result<Pass, String> {
        let n = base.order.len();
        let log = n.trailing_zeros();
        let pairs = (0..n).flat_map(|i| (0..log).map(move |l| (i, i ^ (1 << l))));
        let conns = base.connect(pairs.map(|(a, b)| (a, b, base.channel)), route)?;
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
        Ok(base.into_pass(conns, Shape::Halving(h)))
    }
}

impl Halving {
    /// (stage, slice, sender) of message `idx`.
    pub(super) fn decode(&self, n: u64, idx: u64) -> (usize, u32, u32) {
        let i = (idx % n) as u32;
        let rest = idx / n;
        let most = u64::from(self.most);
        ((rest / most) as usize, (rest % most) as u32, i)
    }

    pub(super) fn index(&self, n: u64, s: usize, j: u32, i: u32) -> u64 {
        (s as u64 * u64::from(self.most) + u64::from(j)) * n + u64::from(i)
    }

    /// The stages connection `c` (of rank c / log, at distance 2^(c %
    /// log)) carries.
    pub(super) fn on(&self, c: u32) -> impl Iterator<Item = &(u32, u64, u32)> {
        let dist = 1 << (c % self.log);
        self.stages.iter().filter(move |st| st.0 == dist)
    }

    /// Chunks with bytes of stage `s`.
    pub(super) fn sends(&self, s: usize) -> u32 {
        let (_, bytes, slices) = self.stages[s];
        bytes.min(u64::from(slices)) as u32
    }

    /// Rank `i` (entered) sends its next stages while it has what the
    /// stage before each brought it.
    pub(super) fn try_send(&mut self, n: u32, i: u32, out: &mut Released) {
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

    pub(super) fn done(&self, n: usize, i: usize) -> bool {
        let last = self.stages.len();
        self.next[i] as usize == last
            && (last == 0 || self.arrived[(last - 1) * n + i] == self.sends(last - 1))
    }
}
