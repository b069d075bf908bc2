//! Cutting the fabric into partitions for a run on several threads or
//! processes (issue 21).
//!
//! The units are hosts (with their NICs and GPUs: NVLink never crosses a
//! cut) and switches. The cut follows the fabric's own structure: with
//! the top tier of switches set aside, what stays connected is a pod (a
//! fat-tree pod, a pod of a multi-pod fabric); with the spines set aside
//! as well, a leaf group with its hosts. The coarsest such level that
//! splits into enough pieces to balance the partitions is taken, so that
//! a partition holds whole pods where it can and links inside a pod are
//! never cut; the pieces, then the switches set aside, go one by one,
//! largest first, to the partition with the least load so far. Load is
//! counted in ports, since the events of a run are those of its ports.
//!
//! A run cut this way synchronizes in windows as long as the shortest
//! propagation delay of a cut link (`lookahead`): a frame sent across a
//! cut in one window cannot arrive before the next.

use super::{Owner, Topology};
use crate::units::SimTime;

/// Where every host and switch runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partitioning {
    pub parts: u32,
    pub switch: Vec<u32>,
    pub host: Vec<u32>,
    /// Ports owned in each partition.
    pub load: Vec<u64>,
    /// Links with their two ends in different partitions.
    pub cut_links: usize,
    /// The shortest propagation delay of a cut link (`None` when nothing
    /// is cut).
    pub lookahead: Option<SimTime>,
    /// Switch tiers set aside to find the pieces (0: none, the whole
    /// fabric is one piece per connected part).
    pub tiers_set_aside: u8,
}

/// Largest load over the mean that a level of the cut may leave before a
/// finer level is tried.
const IMBALANCE: f64 = 1.1;

impl Partitioning {
    /// The partition of port `p`'s owner.
    pub fn of_port(&self, topo: &Topology, p: super::PortId) -> u32 {
        match topo.port(p).owner {
            Owner::Switch(s) => self.switch[s.idx()],
            Owner::Nic(n) => self.host[topo.nics[n.idx()].host.idx()],
        }
    }

    /// Largest partition load over the mean (1.0 is perfect balance).
    pub fn imbalance(&self) -> f64 {
        let total: u64 = self.load.iter().sum();
        let most = self.load.iter().copied().max().unwrap_or(0);
        if total == 0 {
            1.0
        } else {
            most as f64 * self.parts as f64 / total as f64
        }
    }

    /// One line for people: the parts, their balance, the cut.
    pub fn describe(&self) -> String {
        let lookahead = match self.lookahead {
            Some(t) => format!("lookahead {t}"),
            None => "nothing cut".to_string(),
        };
        format!(
            "{} partitions of {} ports (largest {:.2} x the mean), {} links cut, {lookahead}",
            self.parts,
            self.load
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join("/"),
            self.imbalance(),
            self.cut_links,
        )
    }
}

/// Cuts `topo` into `parts` partitions (at least one; no more than there
/// are hosts and switches).
pub fn partition(topo: &Topology, parts: u32) -> Partitioning {
    let units = topo.hosts.len() + topo.switches.len();
    let parts = parts.clamp(1, units.max(1) as u32);
    let top = topo.switches.iter().map(|s| s.tier + 1).max().unwrap_or(0);
    // From the coarsest level (nothing set aside) to the finest (every
    // switch set aside, hosts alone), the first that balances.
    let mut best: Option<Partitioning> = None;
    for aside in 0..=top {
        let p = at_level(topo, parts, top - aside, aside);
        let good = p.imbalance() <= IMBALANCE;
        if best.as_ref().is_none_or(|b| p.imbalance() < b.imbalance()) {
            best = Some(p);
        }
        if good {
            break;
        }
    }
    best.expect("at least one level")
}

/// The partitioning with switches of tier `>= keep_below` set aside.
fn at_level(topo: &Topology, parts: u32, keep_below: u8, aside: u8) -> Partitioning {
    let hosts = topo.hosts.len();
    // Units: hosts 0..hosts, then switches.
    let unit_of = |o: Owner| match o {
        Owner::Nic(n) => topo.nics[n.idx()].host.idx(),
        Owner::Switch(s) => hosts + s.idx(),
    };
    let kept = |u: usize| u < hosts || topo.switches[u - hosts].tier < keep_below;
    let mut sets = UnionFind::new(hosts + topo.switches.len());
    for l in &topo.links {
        let (a, b) = (unit_of(topo.port(l.a).owner), unit_of(topo.port(l.b).owner));
        if kept(a) && kept(b) {
            sets.union(a, b);
        }
    }
    let mut weight = vec![0u64; hosts + topo.switches.len()];
    for p in &topo.ports {
        weight[unit_of(p.owner)] += 1;
    }
    // Pieces: each connected set of kept units, then each unit set aside,
    // in order of their first unit.
    let mut piece_of = vec![usize::MAX; weight.len()];
    let mut pieces: Vec<(u64, Vec<usize>)> = Vec::new();
    for (u, &w) in weight.iter().enumerate() {
        let root = if kept(u) { sets.find(u) } else { u };
        if piece_of[root] == usize::MAX {
            piece_of[root] = pieces.len();
            pieces.push((0, Vec::new()));
        }
        let piece = &mut pieces[piece_of[root]];
        piece.0 += w;
        piece.1.push(u);
    }
    // Largest first (ties by position), each to the least loaded part
    // (ties to the lowest).
    let mut order: Vec<usize> = (0..pieces.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(pieces[i].0), i));
    let mut load = vec![0u64; parts as usize];
    let mut part_of_unit = vec![0u32; weight.len()];
    for i in order {
        let (w, units) = &pieces[i];
        let least = (0..parts as usize)
            .min_by_key(|&k| (load[k], k))
            .expect("parts >= 1");
        load[least] += w;
        for &u in units {
            part_of_unit[u] = least as u32;
        }
    }
    let mut cut_links = 0;
    let mut lookahead: Option<SimTime> = None;
    for l in &topo.links {
        let (a, b) = (unit_of(topo.port(l.a).owner), unit_of(topo.port(l.b).owner));
        if part_of_unit[a] != part_of_unit[b] {
            cut_links += 1;
            let d = topo.port(l.a).delay.min(topo.port(l.b).delay);
            lookahead = Some(lookahead.map_or(d, |t| t.min(d)));
        }
    }
    Partitioning {
        parts,
        host: part_of_unit[..hosts].to_vec(),
        switch: part_of_unit[hosts..].to_vec(),
        load,
        cut_links,
        lookahead,
        tiers_set_aside: aside,
    }
}

/// Disjoint sets with path halving; the root is the smallest member, so
/// the result does not depend on the order of unions.
struct UnionFind(Vec<usize>);

impl UnionFind {
    fn new(n: usize) -> Self {
        UnionFind((0..n).collect())
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        let (lo, hi) = (a.min(b), a.max(b));
        self.0[hi] = lo;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{TopologyKind, TopologySpec};

    fn spec(kind: TopologyKind) -> TopologySpec {
        TopologySpec {
            kind,
            hosts: 16,
            gpus_per_host: 8,
            nics_per_host: 8,
            nic_ports: 1,
            nic_speed: crate::units::Rate::gbps(400),
            hosts_per_leaf: 8,
            rails_per_leaf: 8,
            spines: 4,
            uplink_speed: crate::units::Rate::gbps(400),
            uplinks_per_spine: 1,
            pods: 2,
            super_spines: 4,
            spine_uplink_speed: crate::units::Rate::gbps(400),
            spine_uplinks_per_super_spine: 1,
            super_spine_planes: 1,
            k: 8,
            link_delay: SimTime::from_ns(500),
            switch_radix: None,
        }
    }

    /// Every link inside a partition joins units of that partition; a
    /// cut link's ends are in two; the loads add up to every port.
    fn check_consistent(topo: &Topology, p: &Partitioning) {
        let mut cut = 0;
        for l in &topo.links {
            if p.of_port(topo, l.a) != p.of_port(topo, l.b) {
                cut += 1;
            }
        }
        assert_eq!(cut, p.cut_links);
        assert_eq!(p.load.iter().sum::<u64>(), topo.ports.len() as u64);
        assert!(p.host.iter().chain(&p.switch).all(|&x| x < p.parts));
    }

    #[test]
    fn a_fat_tree_splits_into_whole_pods() {
        let topo = Topology::build(&spec(TopologyKind::FatTree)).unwrap();
        let p = partition(&topo, 2);
        check_consistent(&topo, &p);
        assert_eq!(p.tiers_set_aside, 1, "only the cores set aside");
        // k = 8: 8 pods of 4 edge and 4 aggregation switches and 16 hosts.
        for pod in 0..8 {
            let hosts: Vec<u32> = p.host[pod * 16..(pod + 1) * 16].to_vec();
            assert!(hosts.iter().all(|&x| x == hosts[0]), "pod {pod} is whole");
        }
        assert!(p.imbalance() <= IMBALANCE, "{}", p.describe());
        assert_eq!(p.lookahead, Some(SimTime::from_ns(500)));
        // Only core links are cut: pod switches stay with their hosts.
        for l in &topo.links {
            if p.of_port(&topo, l.a) != p.of_port(&topo, l.b) {
                assert_eq!(l.tier, 2, "{}", p.describe());
            }
        }
    }

    #[test]
    fn a_rail_optimized_pod_splits_by_leaf_group_and_keeps_hosts_whole() {
        let topo = Topology::build(&spec(TopologyKind::RailOptimized)).unwrap();
        let p = partition(&topo, 2);
        check_consistent(&topo, &p);
        assert_eq!(p.tiers_set_aside, 1, "{}", p.describe());
        // Two leaf groups of 8 hosts, one per partition.
        assert_ne!(p.host[0], p.host[8]);
        assert!(p.host[..8].iter().all(|&x| x == p.host[0]));
        for (h, host) in topo.hosts.iter().enumerate() {
            for &n in &host.nics {
                for &port in &topo.nics[n.idx()].ports {
                    assert_eq!(p.of_port(&topo, port), p.host[h]);
                }
            }
        }
    }

    /// More partitions than a level can balance go a level finer; one
    /// partition cuts nothing; more than there are units are capped.
    #[test]
    fn finer_levels_and_limits() {
        let topo = Topology::build(&spec(TopologyKind::FatTree)).unwrap();
        let one = partition(&topo, 1);
        assert_eq!((one.parts, one.cut_links, one.lookahead), (1, 0, None));
        let many = partition(&topo, 16);
        check_consistent(&topo, &many);
        assert!(many.tiers_set_aside >= 2, "{}", many.describe());
        assert!(many.load.iter().all(|&l| l > 0));
        let units = (topo.hosts.len() + topo.switches.len()) as u32;
        assert_eq!(partition(&topo, 1_000_000).parts, units);
        assert_eq!(partition(&topo, 3), partition(&topo, 3), "deterministic");
    }
}
