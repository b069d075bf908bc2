//! Adaptive load balancing (ALB): hash-bucket ECMP with feedback. Every
//! sampling window the switch turns the bytes each bucket carried into a
//! rate; every monitoring interval it sums the rates per member and
//! compares each member with its ideal share of the group's total. When a
//! member is further from its share than the tolerance, buckets move from
//! the heaviest member to the lightest, a bounded number per interval
//! (the bin packing is done incrementally, as the product does it).

use super::ecmp::Buckets;
use crate::topology::routing::SwitchRoutes;
use crate::topology::PortId;
use crate::units::SimTime;

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AlbConfig {
    /// Bucket rates are measured over this window.
    pub window: SimTime,
    /// Members are compared with their share this often.
    pub interval: SimTime,
    /// Allowed deviation from the ideal rate, as a fraction of it.
    pub tolerance: f64,
    /// Buckets moved at most per group and interval.
    pub max_moves: u32,
}

impl Default for AlbConfig {
    fn default() -> Self {
        // The product scans every few seconds; simulated runs last
        // milliseconds, so the defaults are scaled down to match.
        AlbConfig {
            window: SimTime::from_us(10),
            interval: SimTime::from_us(50),
            tolerance: 0.2,
            max_moves: 4,
        }
    }
}

/// What ALB did at one switch.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct AlbStats {
    /// Group scans that found a member outside the tolerance.
    pub imbalanced: u64,
    pub moves: u64,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Alb {
    pub cfg: AlbConfig,
    /// Rate of each bucket over the last window, bytes per second.
    rates: Vec<f64>,
    last_sample: SimTime,
    next_scan: SimTime,
    pub stats: AlbStats,
}

impl Alb {
    pub fn new(cfg: AlbConfig, buckets: usize) -> Self {
        Alb {
            next_scan: cfg.interval,
            cfg,
            rates: vec![0.0; buckets],
            last_sample: SimTime::ZERO,
            stats: AlbStats::default(),
        }
    }

    /// New bucket tables: rates start again.
    pub fn resize(&mut self, buckets: usize) {
        self.rates = vec![0.0; buckets];
    }

    /// Nothing was carried or measured: a tick only moves its times.
    pub fn idle(&self, b: &Buckets) -> bool {
        self.rates.iter().all(|&r| r == 0.0) && b.bytes.iter().all(|&n| n == 0)
    }

    /// What the ticks from `first` to `last` (inclusive, `every` apart,
    /// on multiples of `every`) would have done to an idle switch: move
    /// the sampling and scanning times, and nothing else.
    pub fn skip_idle(&mut self, first: SimTime, last: SimTime, every: SimTime) {
        let e = every.0.max(1);
        let up = |t: u64| t.div_ceil(e).saturating_mul(e);
        // The last tick at or after `from` that repeats every `period`
        // (rounded up to ticks) up to `last`.
        let last_of = |from: u64, period: u64| {
            let t1 = up(from.max(first.0));
            let p = up(period).max(e);
            (t1 <= last.0).then(|| t1 + (last.0 - t1) / p * p)
        };
        if let Some(t) = last_of(
            self.last_sample.0.saturating_add(self.cfg.window.0),
            self.cfg.window.0,
        ) {
            self.last_sample = SimTime(t);
        }
        if let Some(t) = last_of(self.next_scan.0, self.cfg.interval.0) {
            self.next_scan = SimTime(t) + self.cfg.interval;
        }
    }

    /// Samples and scans when their times have come.
    /// `down` lists member ports that have failed.
    pub fn tick(&mut self, now: SimTime, b: &mut Buckets, routes: &SwitchRoutes, down: &[PortId]) {
        let span = now.saturating_sub(self.last_sample);
        if span >= self.cfg.window {
            let secs = span.0 as f64 * 1e-12;
            for (r, bytes) in self.rates.iter_mut().zip(b.bytes.iter_mut()) {
                *r = *bytes as f64 / secs;
                *bytes = 0;
            }
            self.last_sample = now;
        }
        if now >= self.next_scan {
            self.next_scan = now + self.cfg.interval;
            for g in 0..routes.groups.len() as u32 {
                self.scan(g, b, routes, down);
            }
        }
    }

    /// Moves buckets of one group from its heaviest member to its lightest
    /// while some member is outside the tolerance.
    fn scan(&mut self, group: u32, b: &mut Buckets, routes: &SwitchRoutes, down: &[PortId]) {
        let Some(range) = b.range(group) else { return };
        let members = routes.member_slice(group);
        let w = b.weights(group).to_vec();
        let live: Vec<bool> = members.iter().map(|p| !down.contains(p)).collect();
        let wsum: f64 = (0..members.len())
            .filter(|&i| live[i])
            .map(|i| w[i] as f64)
            .sum();
        let mut load = vec![0.0; members.len()];
        for k in range.clone() {
            let i = members
                .iter()
                .position(|&p| p == b.slot[k])
                .expect("member");
            load[i] += self.rates[k];
        }
        let total: f64 = load.iter().sum();
        if total <= 0.0 {
            return;
        }
        let ideal = |i: usize| total * w[i] as f64 / wsum;
        let mut counted = false;
        for _ in 0..self.cfg.max_moves {
            // Excess over the ideal share, relative to it.
            let excess = |i: usize| (load[i] - ideal(i)) / ideal(i);
            let alive = (0..members.len()).filter(|&i| live[i]);
            let heavy = alive
                .clone()
                .max_by(|&a, &c| excess(a).total_cmp(&excess(c)));
            let light = alive.min_by(|&a, &c| excess(a).total_cmp(&excess(c)));
            let (Some(h), Some(l)) = (heavy, light) else {
                return;
            };
            if excess(h) <= self.cfg.tolerance {
                return;
            }
            if !counted {
                self.stats.imbalanced += 1;
                counted = true;
            }
            // The bucket that brings the two closest to their shares: the
            // largest that does not overshoot the gap between them.
            let gap = (load[h] - ideal(h)) - (load[l] - ideal(l));
            let best = range
                .clone()
                .filter(|&k| b.slot[k] == members[h] && self.rates[k] > 0.0)
                .filter(|&k| self.rates[k] < gap)
                .max_by(|&x, &y| self.rates[x].total_cmp(&self.rates[y]));
            let Some(k) = best else { return };
            b.slot[k] = members[l];
            load[h] -= self.rates[k];
            load[l] += self.rates[k];
            self.stats.moves += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::routing::{Group, Hop};

    /// One group of two members (ports 10 and 11) and 16 buckets.
    fn two_members() -> (SwitchRoutes, Buckets) {
        let routes = SwitchRoutes {
            groups: vec![Group {
                first_hop: 0,
                n_hops: 2,
            }],
            hops: vec![
                Hop {
                    first_port: 0,
                    n_ports: 1,
                },
                Hop {
                    first_port: 1,
                    n_ports: 1,
                },
            ],
            ports: vec![PortId(10), PortId(11)],
            ..Default::default()
        };
        let b = Buckets::new(&routes, 16, false, |_| 1, true);
        (routes, b)
    }

    /// Four buckets of equal rate all on port 10, none on 11: ALB evens
    /// them out, at most `max_moves` buckets per interval, then stops.
    #[test]
    fn skewed_buckets_are_rebalanced_within_bounded_moves() {
        for (max_moves, intervals) in [(1, 2), (4, 1)] {
            let (routes, mut b) = two_members();
            let hot: Vec<usize> = (0..16)
                .filter(|&k| b.slot[k] == PortId(10))
                .take(4)
                .collect();
            let cfg = AlbConfig {
                window: SimTime::from_us(10),
                interval: SimTime::from_us(10),
                tolerance: 0.2,
                max_moves,
            };
            let mut alb = Alb::new(cfg, 16);
            let mut moves = Vec::new();
            for i in 1..=4u64 {
                // Each hot bucket carries 1000 B per window.
                for &k in &hot {
                    b.bytes[k] += 1000;
                }
                alb.tick(SimTime::from_us(10 * i), &mut b, &routes, &[]);
                moves.push(alb.stats.moves);
            }
            let on = |p| hot.iter().filter(|&&k| b.slot[k] == p).count();
            assert_eq!((on(PortId(10)), on(PortId(11))), (2, 2));
            assert_eq!(alb.stats.moves, 2);
            // Never more than `max_moves` in one interval; done in time.
            let per: Vec<u64> = std::iter::once(moves[0])
                .chain(moves.windows(2).map(|w| w[1] - w[0]))
                .collect();
            assert!(per.iter().all(|&m| m <= max_moves as u64), "{per:?}");
            assert_eq!(moves[intervals - 1], 2, "{moves:?}");
            assert_eq!(alb.stats.imbalanced, intervals as u64);
        }
    }

    /// Skipping idle ticks leaves the sampling and scanning times where
    /// ticking through them would, for windows and intervals on and off
    /// the tick grid, and idle ticks change nothing else.
    #[test]
    fn skipping_idle_ticks_matches_ticking_through_them() {
        let (routes, b0) = two_members();
        let us = SimTime::from_us;
        for (window, interval, every) in [(10, 50, 10), (7, 30, 3), (10, 10, 4), (1, 1, 1)] {
            let cfg = AlbConfig {
                window: us(window),
                interval: us(interval),
                ..AlbConfig::default()
            };
            for stop in [0u64, 1, 5] {
                for skipped in [1u64, 2, 9, 40] {
                    let mut ticked = Alb::new(cfg.clone(), 16);
                    let mut b = b0.clone();
                    let tick = |k: u64| us(every * k);
                    for k in 1..=stop {
                        ticked.tick(tick(k), &mut b, &routes, &[]);
                    }
                    let mut skipped_alb = ticked.clone();
                    for k in stop + 1..=stop + skipped {
                        ticked.tick(tick(k), &mut b, &routes, &[]);
                        assert!(ticked.idle(&b));
                    }
                    skipped_alb.skip_idle(tick(stop + 1), tick(stop + skipped), us(every));
                    let case = (window, interval, every, stop, skipped);
                    assert_eq!(ticked.last_sample, skipped_alb.last_sample, "{case:?}");
                    assert_eq!(ticked.next_scan, skipped_alb.next_scan, "{case:?}");
                    assert_eq!(ticked.stats.moves, 0);
                }
            }
        }
    }

    /// Within the tolerance nothing moves.
    #[test]
    fn balanced_enough_is_left_alone() {
        let (routes, mut b) = two_members();
        let a = (0..16).find(|&k| b.slot[k] == PortId(10)).unwrap();
        let c = (0..16).find(|&k| b.slot[k] == PortId(11)).unwrap();
        let mut alb = Alb::new(AlbConfig::default(), 16);
        b.bytes[a] = 1100;
        b.bytes[c] = 900;
        alb.tick(AlbConfig::default().interval, &mut b, &routes, &[]);
        assert_eq!(alb.stats.moves, 0);
        assert_eq!(alb.stats.imbalanced, 0);
    }
}
