//! Classification: the packet's DSCP picks its egress priority queue.
//!
//! The default map is the one AI fabrics deploy for RoCEv2: DSCP 24 (RDMA
//! data, lossless class) to queue 3, DSCP 48 (CNP) to queue 7, everything
//! else to queue 0. Scenarios can change it (`[[qos.class]]`).

/// Number of egress priority queues per port (IEEE 802.1Q priorities).
pub const QUEUES: usize = 8;

/// DSCP (0..63) to queue.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ClassMap {
    #[serde(with = "by_dscp")]
    queue: [u8; 64],
}

/// `ClassMap`'s table as a sequence (serde's arrays stop at 32).
mod by_dscp {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(q: &[u8; 64], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(q.iter())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 64], D::Error> {
        let v = Vec::<u8>::deserialize(d)?;
        v.try_into()
            .map_err(|_| serde::de::Error::custom("a DSCP table has 64 entries"))
    }
}

impl Default for ClassMap {
    fn default() -> Self {
        let mut queue = [0u8; 64];
        queue[24] = 3;
        queue[48] = 7;
        ClassMap { queue }
    }
}

impl ClassMap {
    /// Every DSCP to `default`, then the listed ones to their queues.
    pub fn new(default: u8, entries: &[(u8, u8)]) -> Self {
        let mut queue = [default; 64];
        for &(dscp, q) in entries {
            queue[(dscp & 63) as usize] = q;
        }
        ClassMap { queue }
    }

    /// The queues some DSCP maps to, one bit per queue: the only ones
    /// that ever hold a frame (trimmed headers go to the CNP's queue).
    pub fn queues_used(&self) -> u8 {
        self.queue.iter().fold(0, |m, &q| m | 1 << q)
    }

    #[inline]
    pub fn queue_of(&self, dscp: u8) -> u8 {
        self.queue[(dscp & 63) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_map_follows_the_rocev2_convention() {
        let m = ClassMap::default();
        assert_eq!(m.queue_of(24), 3);
        assert_eq!(m.queue_of(48), 7);
        assert_eq!(m.queue_of(0), 0);
        assert_eq!(m.queue_of(46), 0);
        assert_eq!(m.queues_used(), 0b1000_1001);
    }
}
