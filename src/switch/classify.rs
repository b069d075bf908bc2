//! Classification: the packet's DSCP, and the 802.1p priority (CoS) its
//! VLAN tag carries, pick its egress priority queue.
//!
//! The default map is the one AI fabrics deploy for RoCEv2: DSCP 24 (RDMA
//! data, lossless class) to queue 3, DSCP 48 (CNP) to queue 7, everything
//! else to queue 0. Scenarios can change it (`[[qos.class]]`), matching
//! by DSCP, by CoS or by both.
//!
//! A frame's CoS is the priority its sending NIC stamps for its DSCP
//! (`[qos.nic_priority]`; by default the DSCP's top three bits, the
//! DSCP-to-priority map of NICs that trust DSCP), or 0 when frames are
//! untagged, as a switch takes an untagged frame to be CoS 0. Switches
//! keep the tag as it came, so a frame's CoS is a function of its DSCP and
//! the table stays indexed by DSCP alone: matching by CoS costs nothing
//! per packet.

/// Number of egress priority queues per port (IEEE 802.1Q priorities).
pub const QUEUES: usize = 8;

/// DSCP (0..63) to queue, and to the priority a tagged frame carries.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ClassMap {
    #[serde(with = "by_dscp")]
    queue: [u8; 64],
    #[serde(with = "by_dscp")]
    pcp: [u8; 64],
}

/// The priority a NIC that trusts DSCP stamps by default: the DSCP's top
/// three bits (its class selector: 24 is 3, 48 is 6).
pub fn default_pcp() -> [u8; 64] {
    std::array::from_fn(|d| (d >> 3) as u8)
}

/// What a class matches: DSCPs, CoS values (802.1p priorities), or both.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Match {
    pub dscp: Vec<u8>,
    pub cos: Vec<u8>,
    /// A frame must match both lists (`match-all`); otherwise either.
    pub all: bool,
}

impl Match {
    /// A list left empty takes no part; a rule with both empty matches
    /// nothing (the catch-all is the map's default, not a rule).
    pub fn matches(&self, dscp: u8, cos: u8) -> bool {
        let d = self.dscp.contains(&dscp);
        let c = self.cos.contains(&cos);
        match (self.dscp.is_empty(), self.cos.is_empty()) {
            (true, true) => false,
            (false, true) => d,
            (true, false) => c,
            (false, false) if self.all => d && c,
            (false, false) => d || c,
        }
    }
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
        ClassMap {
            queue,
            pcp: default_pcp(),
        }
    }
}

impl ClassMap {
    /// Every DSCP to `default`, then the listed ones to their queues.
    pub fn new(default: u8, entries: &[(u8, u8)]) -> Self {
        let mut queue = [default; 64];
        for &(dscp, q) in entries {
            queue[(dscp & 63) as usize] = q;
        }
        ClassMap {
            queue,
            pcp: default_pcp(),
        }
    }

    /// Classes in order, each a rule and its queue; the first whose rule
    /// a frame matches takes it, and `default` what none matches. `pcp`
    /// is what the NICs stamp per DSCP; with `tagged` false every frame
    /// is CoS 0 at the switch.
    pub fn with_rules(default: u8, rules: &[(Match, u8)], pcp: [u8; 64], tagged: bool) -> Self {
        let queue = std::array::from_fn(|d| {
            let cos = if tagged { pcp[d] } else { 0 };
            rules
                .iter()
                .find(|(m, _)| m.matches(d as u8, cos))
                .map_or(default, |&(_, q)| q)
        });
        ClassMap { queue, pcp }
    }

    /// The same classes with the NICs stamping `pcp`, for a map built by
    /// DSCP alone (whose queues do not depend on it).
    pub fn set_pcp(&mut self, pcp: [u8; 64]) {
        self.pcp = pcp;
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

    /// The priority (PCP) a tagged frame with this DSCP carries.
    pub fn pcp_of(&self, dscp: u8) -> u8 {
        self.pcp[(dscp & 63) as usize]
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
        assert_eq!((m.pcp_of(24), m.pcp_of(48), m.pcp_of(26)), (3, 6, 3));
    }

    fn cos(c: &[u8]) -> Match {
        Match {
            cos: c.to_vec(),
            ..Match::default()
        }
    }

    #[test]
    fn a_cos_rule_takes_the_frames_whose_nic_stamps_that_priority() {
        let m = ClassMap::with_rules(0, &[(cos(&[3]), 3)], default_pcp(), true);
        // DSCP 24 to 31 carry priority 3 by default.
        assert_eq!(m.queue_of(24), 3);
        assert_eq!(m.queue_of(31), 3);
        assert_eq!(m.queue_of(32), 0);
        assert_eq!(m.queue_of(23), 0);
        // Untagged, every frame is CoS 0: the rule takes nothing.
        let m = ClassMap::with_rules(0, &[(cos(&[3]), 3)], default_pcp(), false);
        assert_eq!(m.queues_used(), 1);
        // CoS 0 matches every untagged frame.
        let m = ClassMap::with_rules(5, &[(cos(&[0]), 2)], default_pcp(), false);
        assert_eq!(m.queues_used(), 1 << 2);
    }

    #[test]
    fn match_all_needs_both_and_the_first_matching_class_wins() {
        let mut pcp = default_pcp();
        pcp[26] = 5;
        let both = Match {
            dscp: vec![24, 26],
            cos: vec![3],
            all: true,
        };
        let either = Match {
            all: false,
            ..both.clone()
        };
        let m = ClassMap::with_rules(0, &[(both, 3)], pcp, true);
        assert_eq!((m.queue_of(24), m.queue_of(26), m.queue_of(27)), (3, 0, 0));
        let m = ClassMap::with_rules(0, &[(either.clone(), 3)], pcp, true);
        assert_eq!((m.queue_of(24), m.queue_of(26), m.queue_of(27)), (3, 3, 3));
        // Order decides a frame two classes match.
        let m = ClassMap::with_rules(0, &[(cos(&[3]), 4), (either, 3)], pcp, true);
        assert_eq!((m.queue_of(24), m.queue_of(26)), (4, 3));
        assert_eq!(m.pcp_of(26), 5);
    }
}
