//! Seeded random streams, one per component, derived from the run seed by a
//! stable name.
//!
//! A component asks for `streams.stream("ecmp/leaf-3")` and gets a PCG
//! generator whose seed depends only on the run seed and that name, so an
//! extra draw in one switch never shifts another's sequence. There is no
//! global generator and nothing reads the wall clock.

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// The run seed and the rule that turns names into per-component seeds.
#[derive(Clone, Copy, Debug)]
pub struct Streams {
    seed: u64,
}

/// One component's random stream.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Stream(Pcg64Mcg);

impl Streams {
    pub fn new(seed: u64) -> Self {
        Streams { seed }
    }

    /// A stable 64-bit value for `name` under this run seed (FNV-1a over the
    /// name, then a SplitMix64 finaliser mixed with the seed).
    pub fn derive(&self, name: &str) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in name.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        splitmix(h ^ splitmix(self.seed))
    }

    /// A stable value for item `i` of the family `name` (one draw per QP,
    /// say), without formatting a name per item.
    pub fn derive_indexed(&self, name: &str, i: u64) -> u64 {
        splitmix(self.derive(name) ^ splitmix(i.wrapping_add(0x5851_f42d_4c95_7f2d)))
    }

    pub fn stream(&self, name: &str) -> Stream {
        Stream(Pcg64Mcg::seed_from_u64(self.derive(name)))
    }

    /// The stream of item `i` of the family `name` (see
    /// `derive_indexed`).
    pub fn stream_indexed(&self, name: &str, i: u64) -> Stream {
        Stream(Pcg64Mcg::seed_from_u64(self.derive_indexed(name, i)))
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Stream {
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A uniform integer in `0..n` without modulo bias (Lemire's method with
    /// rejection). `n` must be positive.
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// A uniform float in [0, 1) (53 random bits).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_independent_and_repeatable() {
        let s = Streams::new(7);
        let mut a1 = s.stream("a");
        let mut a2 = s.stream("a");
        let mut b = s.stream("b");
        let x: Vec<u64> = (0..4).map(|_| a1.next_u64()).collect();
        let y: Vec<u64> = (0..4).map(|_| a2.next_u64()).collect();
        assert_eq!(x, y);
        assert_ne!(x[0], b.next_u64());
        assert_ne!(Streams::new(8).derive("a"), s.derive("a"));
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = Streams::new(1).stream("t");
        for n in 1..50 {
            assert!(r.below(n) < n);
        }
    }
}
