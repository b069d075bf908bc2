//! NCCL's PAT (parallel aggregated trees) all-gather and reduce-scatter:
//! every rank exchanges with the ranks a power of two away, log2 n stages
//! instead of the ring's n - 1 (NCCL connects rank r to r - 2^d and
//! r + 2^d for each d; its `PatAGAlgorithm` / `PatRSAlgorithm`). In the
//! all-gather a block travels from its rank to a rank s below along the
//! set bits of s, highest first (a binomial tree rooted at every rank),
//! so at distance 2^d a rank sends the blocks whose remaining offset has
//! no bit below d: ceil((n - 2^d) / 2^(d+1)) of them, one at the farthest
//! distance and half of all at the nearest. Its stages go from the
//! farthest distance to the nearest; the reduce-scatter sends partial
//! sums the same way back, nearest first. Each block is cut into chunks,
//! and the stages of one chunk follow each other while the next chunks
//! are in flight, as NCCL loops its schedule over chunk offsets. NCCL's
//! aggregation of several steps into one send when chunks are small (its
//! `aggFactor`) is not modelled: each stage of a chunk is one message.

use super::{Base, Pass, Released, Route, Shape};
use crate::workload::share;

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Pat {
    /// Per stage: the distance (a power of two) and the blocks it moves.
    pub(super) stages: Vec<(u32, u32)>,
    /// One rank's block and the chunks it is cut into.
    pub(super) block: u64,
    pub(super) slices: u32,
    /// Distances (connections per rank).
    pub(super) log: u32,
    /// Per rank and chunk: the next stage it sends, and the stages that
    /// have arrived (bit s for stage s).
    pub(super) next: Vec<u8>,
    pub(super) arrived: Vec<u32>,
    /// Per rank: chunks with every stage arrived.
    pub(super) complete: Vec<u32>,
}

/// The stages of a PAT over `n` ranks: (distance, blocks), distances
/// shrinking for an all-gather and growing for a reduce-scatter.
pub fn pat_stages(n: u32, gather: bool) -> Vec<(u32, u32)> {
    let log = n.next_power_of_two().trailing_zeros();
    let mut s: Vec<(u32, u32)> = (0..log)
        .map(|d| {
            let dist = 1u64 << d;
            let blocks = (u64::from(n) - dist).div_ceil(2 * dist);
            (dist as u32, blocks as u32)
        })
        .collect();
    if gather {
        s.reverse();
    }
    s
}

impl Pass {
    /// A PAT all-gather (`gather`) or reduce-scatter of `data` bytes (the
    /// whole buffer, `data / n` per rank) over `order`, blocks cut into
    /// chunks of `chunk` bytes.
    pub fn pat(
        base: Base,
        data: u64,
        gather: bool,
        chunk: u64,
        route: &mut Route,
    ) -> Result<Pass, String> {
        let n = base.order.len();
        let stages = pat_stages(n as u32, gather);
        let log = stages.len() as u32;
        if log > 32 {
            return Err("a PAT over more than 2^32 ranks".into());
        }
        let pairs = (0..n).flat_map(|i| (0..log).map(move |l| (i, (i + n - (1 << l)) % n)));
        let conns = base.connect(pairs.map(|(a, b)| (a, b, base.channel)), route)?;
        let block = data / n as u64;
        let slices = if block == 0 {
            0
        } else {
            u32::try_from(block.div_ceil(chunk.max(1))).map_err(|_| "too many chunks")?
        };
        let cells = n * slices as usize;
        let p = Pat {
            stages,
            block,
            slices,
            log,
            next: vec![0; cells],
            arrived: vec![0; cells],
            complete: vec![0; n],
        };
        Ok(base.into_pass(conns, Shape::Pat(p)))
    }
}

impl Pat {
    /// (stage, chunk, sender) of message `idx`.
    pub(super) fn decode(&self, n: u64, idx: u64) -> (usize, u32, u32) {
        let i = (idx % n) as u32;
        let rest = idx / n;
        let slices = u64::from(self.slices.max(1));
        ((rest / slices) as usize, (rest % slices) as u32, i)
    }

    pub(super) fn index(&self, n: u64, s: usize, j: u32, i: u32) -> u64 {
        (s as u64 * u64::from(self.slices.max(1)) + u64::from(j)) * n + u64::from(i)
    }

    pub(super) fn messages(&self, n: u64) -> u64 {
        self.stages.len() as u64 * u64::from(self.slices) * n
    }

    /// Bytes of stage `s`'s message for chunk `j`.
    pub(super) fn bytes(&self, s: usize, j: u32) -> u64 {
        u64::from(self.stages[s].1) * share(self.block, u64::from(self.slices), u64::from(j))
    }

    /// Connection of rank `i` at the distance of stage `s`.
    pub(super) fn conn(&self, s: usize, i: u32) -> u32 {
        i * self.log + self.stages[s].0.trailing_zeros()
    }

    /// The stage connection `c` carries (one per distance).
    pub(super) fn stage_of(&self, c: u32) -> usize {
        let dist = 1u32 << (c % self.log);
        self.stages.iter().position(|st| st.0 == dist).unwrap_or(0)
    }

    /// The rank a message of stage `s` from `i` goes to.
    pub(super) fn receiver(&self, n: u32, s: usize, i: u32) -> u32 {
        (i + n - self.stages[s].0 % n) % n
    }

    /// Rank `i` (entered) sends chunk `j`'s next stages while it has
    /// every stage before each.
    pub(super) fn try_send(&mut self, n: u32, i: u32, j: u32, out: &mut Released) {
        let cell = (i * self.slices + j) as usize;
        loop {
            let s = u32::from(self.next[cell]);
            if s as usize == self.stages.len() {
                return;
            }
            let need = (1u32 << s) - 1;
            if self.arrived[cell] & need != need {
                return;
            }
            self.next[cell] += 1;
            out.send.push(self.index(u64::from(n), s as usize, j, i));
        }
    }

    /// Every stage's bit.
    fn all_stages(&self) -> u32 {
        u32::MAX
            .checked_shr(32 - self.stages.len() as u32)
            .unwrap_or(0)
    }

    /// Message `idx` arrived: returns its receiver and chunk.
    pub(super) fn arrive(&mut self, n: u32, idx: u64) -> (u32, u32) {
        let (s, j, i) = self.decode(u64::from(n), idx);
        let p = self.receiver(n, s, i);
        let cell = (p * self.slices + j) as usize;
        self.arrived[cell] |= 1 << s;
        if self.arrived[cell] == self.all_stages() {
            self.complete[p as usize] += 1;
        }
        (p, j)
    }
}
