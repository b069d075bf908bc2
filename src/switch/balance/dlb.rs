//! Dynamic load balancing (DLB) as switch ASICs do it: each equal-cost
//! member port has a quality band (0 worst to 7 best) that the switch
//! refreshes on an interval from the port's load (an EWMA of transmitted
//! bytes over capacity) and its queue depth; traffic goes to a member of
//! the best band, ties broken by the flow hash so flows still spread.
//!
//! Modes:
//! - per-packet: every packet goes to a best member (reordering possible);
//! - flowlet: a flow keeps its member while its packets come closer
//!   together than the inactivity timer; after a longer gap its next burst
//!   may move to the best member;
//! - assigned-flow: a flow is placed once, when it first appears.
//!
//! Flows are tracked in a fixed-size table indexed by the flow hash, as in
//! hardware: flows that collide share an entry. Reactive rebalancing moves
//! a flow whose member has fallen a given number of bands below the best,
//! even in the middle of a burst.

use super::ecmp::Ecmp;
use crate::topology::PortId;
use crate::units::SimTime;
use crate::wire::Packet;

/// Quality bands: 0 (worst) to `BEST`.
pub const BEST: u8 = 7;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DlbMode {
    PerPacket,
    Flowlet,
    AssignedFlow,
}

impl DlbMode {
    pub const NAMES: &'static [&'static str] = &["flowlet", "per-packet", "assigned-flow"];

    pub fn from_name(s: &str) -> Option<DlbMode> {
        match s {
            "per-packet" => Some(DlbMode::PerPacket),
            "flowlet" => Some(DlbMode::Flowlet),
            "assigned-flow" => Some(DlbMode::AssignedFlow),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DlbMode::PerPacket => "per-packet",
            DlbMode::Flowlet => "flowlet",
            DlbMode::AssignedFlow => "assigned-flow",
        }
    }
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DlbConfig {
    pub mode: DlbMode,
    /// Flowlet inactivity timer.
    pub inactivity: SimTime,
    /// How often member qualities are refreshed.
    pub interval: SimTime,
    /// EWMA weight of the newest load sample (0 < w <= 1).
    pub load_weight: f64,
    /// Queue depth that counts as the worst band.
    pub queue_full: u64,
    /// Move a tracked flow whose member is this many bands below the best
    /// (0: never).
    pub rebalance_bands: u8,
    /// Entries in the flow table.
    pub table_size: u32,
}

impl Default for DlbConfig {
    fn default() -> Self {
        DlbConfig {
            mode: DlbMode::Flowlet,
            inactivity: SimTime::from_us(16),
            interval: SimTime::from_us(1),
            load_weight: 0.25,
            queue_full: 1_000_000,
            rebalance_bands: 0,
            table_size: 4096,
        }
    }
}

/// The band of a member from its load (0..1 of capacity, EWMA) and its
/// queue depth: the worse of the two, each cut into eight bands.
pub fn quality(load: f64, queue_bytes: u64, queue_full: u64) -> u8 {
    let load_band = (load * 8.0).floor().clamp(0.0, 7.0) as u8;
    let queue_band = (queue_bytes.saturating_mul(8) / queue_full.max(1)).min(7) as u8;
    BEST - load_band.max(queue_band)
}

#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Entry {
    group: u32,
    port: PortId,
    last: SimTime,
}

const EMPTY: u32 = u32::MAX;

/// What DLB did, for the report.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct DlbStats {
    /// Decisions made on quality (new flowlets, per-packet choices).
    pub decisions: u64,
    /// New flowlets (or flows) that went to another member than before.
    pub moves: u64,
    /// Flows moved by reactive rebalancing.
    pub rebalances: u64,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Dlb {
    pub cfg: DlbConfig,
    /// Hashing for ties and the flow table.
    pub hash: Ecmp,
    table: Vec<Entry>,
    /// When each group last moved a flow by rebalancing: at most one move
    /// per group per quality interval, since every flow on a bad member
    /// sees the same stale bands and would otherwise all move together.
    rebalanced: Vec<SimTime>,
    pub stats: DlbStats,
}

impl Dlb {
    pub fn new(cfg: DlbConfig, hash: Ecmp, groups: usize) -> Self {
        let n = if cfg.mode == DlbMode::PerPacket {
            0
        } else {
            cfg.table_size as usize
        };
        Dlb {
            table: vec![
                Entry {
                    group: EMPTY,
                    port: PortId(EMPTY),
                    last: SimTime::ZERO,
                };
                n
            ],
            rebalanced: vec![SimTime::MAX; groups],
            cfg,
            hash,
            stats: DlbStats::default(),
        }
    }

    /// The best band among the candidates, and the member that the flow
    /// hash `h` picks among those in it. `band` gives a member's band.
    fn best(cands: &[PortId], band: impl Fn(PortId) -> u8, h: u32) -> (u8, PortId) {
        let best = cands.iter().map(|&p| band(p)).max().unwrap_or(BEST);
        let n = cands.iter().filter(|&&p| band(p) == best).count() as u32;
        let pick = h % n.max(1);
        let port = cands
            .iter()
            .copied()
            .filter(|&p| band(p) == best)
            .nth(pick as usize)
            .unwrap_or(cands[0]);
        (best, port)
    }

    /// Routes changed: groups are renumbered. Flow entries of stale
    /// groups are re-decided when next seen (their port is checked).
    pub fn resize(&mut self, groups: usize) {
        self.rebalanced = vec![SimTime::MAX; groups];
    }

    fn may_rebalance(&self, group: u32, now: SimTime) -> bool {
        let last = self.rebalanced[group as usize];
        last == SimTime::MAX || now.saturating_sub(last) >= self.cfg.interval
    }

    /// Picks a member among `cands` (the group's usable members) for the
    /// packet; `band` is each member's quality (local for DLB, the path's
    /// for GLB).
    pub fn choose(
        &mut self,
        group: u32,
        cands: &[PortId],
        pkt: &Packet,
        now: SimTime,
        band: impl Fn(PortId) -> u8,
    ) -> PortId {
        let h = self.hash.flow_hash(pkt);
        if self.cfg.mode == DlbMode::PerPacket {
            self.stats.decisions += 1;
            // Per packet, ties rotate so equal members share the packets.
            let spin = (self.stats.decisions as u32).wrapping_mul(0x9E37_79B9) ^ h;
            return Self::best(cands, band, spin).1;
        }
        let i = ((h ^ group.wrapping_mul(0x85EB_CA6B)) % self.table.len() as u32) as usize;
        let e = self.table[i];
        let fresh = e.group == group && cands.contains(&e.port);
        let expired = match self.cfg.mode {
            DlbMode::Flowlet => now.saturating_sub(e.last) > self.cfg.inactivity,
            _ => false,
        };
        let port = if !fresh || expired {
            self.stats.decisions += 1;
            let (_, p) = Self::best(cands, &band, h);
            if fresh && p != e.port {
                self.stats.moves += 1;
            }
            p
        } else if self.cfg.rebalance_bands > 0 && self.may_rebalance(group, now) {
            let (best, p) = Self::best(cands, &band, h);
            if band(e.port) + self.cfg.rebalance_bands <= best {
                self.stats.rebalances += 1;
                self.rebalanced[group as usize] = now;
                p
            } else {
                e.port
            }
        } else {
            e.port
        };
        self.table[i] = Entry {
            group,
            port,
            last: now,
        };
        port
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quality_is_the_worse_of_load_and_queue_bands() {
        assert_eq!(quality(0.0, 0, 1000), 7);
        assert_eq!(quality(0.5, 0, 1000), 3);
        assert_eq!(quality(0.1, 600, 1000), 3);
        assert_eq!(quality(1.0, 0, 1000), 0);
        assert_eq!(quality(0.0, 5000, 1000), 0);
    }
}
