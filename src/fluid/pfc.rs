//! PFC at the flow level: the rates of lossless QPs that run no
//! congestion control, as pauses set them rather than max-min fairness.
//!
//! Such a sender sends at its line rate until its NIC is paused, so every
//! queue from it to its bottleneck stays backlogged: each is paused by
//! the next hop whenever that hop's ingress counter for it passes xOFF.
//! In that steady state:
//!
//! - a backlogged egress port serves its ingress ports, not its flows,
//!   equally (each ingress counter hovers at xOFF, and a FIFO serves each
//!   ingress as its bytes fill the queue): max-min over ingress ports,
//!   and within one ingress in proportion to what it brings (FIFO). A
//!   NIC's port serves its QPs round robin: max-min over QPs;
//! - a port is paused until what it sends towards each congested egress
//!   of the next switch is what that egress grants it, and everything
//!   in its FIFO waits meanwhile: its rate is its load scaled by the
//!   tightest such grant. Flows through it towards free egresses (the
//!   victims) are slowed with the rest: head-of-line blocking.
//!
//! `solve` finds that state by rounds over the ports in the order
//! traffic crosses them (sources first): each round passes every
//! sender's rate forwards through the ports' shares at their current
//! pace, then sets each port's pace from the grants downstream, until the
//! paces stop moving. A sub-flow's rate is the least its pieces let
//! through. A component whose ports form a cycle (a routing loop, where
//! packets would deadlock) has no such order; it keeps max-min.

use super::Fluid;
use crate::topology::{Owner, Topology};

/// Which device owns each port and which device its link leads to, by
/// port id: whose ingress a port's traffic enters. How many components
/// were found paused (`perf.json`).
pub(super) struct Pfc {
    owner: Vec<u32>,
    peer: Vec<u32>,
    /// By port: the bytes its link's far end holds for it before it
    /// pauses it (xOFF; infinite where nothing pauses it).
    xoff: Vec<f64>,
    solves: u64,
}

/// Rounds at most per solve; the paces settle in about as many rounds as
/// the paths have hops.
const ROUNDS: usize = 64;

impl Fluid {
    /// Lossless QPs without congestion control over `topo` are shared as
    /// PFC pauses them from now on; `xoff` gives, by port, the bytes the
    /// device at its link's other end holds from it before pausing it.
    pub fn enable_pfc(&mut self, topo: &Topology, xoff: Vec<f64>) {
        let device = |o: Owner| match o {
            Owner::Switch(s) => s.0,
            Owner::Nic(n) => topo.switches.len() as u32 + n.0,
        };
        self.pfc = Some(Box::new(Pfc {
            owner: topo.ports.iter().map(|p| device(p.owner)).collect(),
            peer: topo
                .ports
                .iter()
                .map(|p| device(topo.port(p.peer).owner))
                .collect(),
            xoff,
            solves: 0,
        }));
    }

    /// How many shares found their lossless senders paused (`perf.json`).
    pub fn pfc_solves(&self) -> u64 {
        self.pfc.as_ref().map_or(0, |p| p.solves)
    }

    /// Rates of sub-flows `comp` (over resources `res`) as pauses set
    /// them, if one of them is a paused sender (`Sub::pfc`) and the ports
    /// have an order; `false` leaves them to max-min.
    pub(super) fn fill_pfc(&mut self, res: &[u32], comp: &[u32]) -> bool {
        if self.pfc.is_none() || !comp.iter().any(|&i| self.subs[i as usize].pfc) {
            return false;
        }
        // Max-min first: the rates while queues fill, and how long the
        // paused senders have left at them.
        self.fill(res, comp);
        let left: Vec<f64> = comp
            .iter()
            .map(|&i| &self.subs[i as usize])
            .filter(|s| s.pfc && s.rate > 0.0)
            .map(|s| s.left / s.rate)
            .collect();
        let horizon = left.iter().sum::<f64>() / left.len().max(1) as f64;
        let pfc = self.pfc.as_deref().expect("PFC");
        for (l, &r) in res.iter().enumerate() {
            self.local[r as usize] = l as u32;
        }
        let local = &self.local;
        let net = Net {
            cap: res.iter().map(|&r| self.cap[r as usize]).collect(),
            xoff: res
                .iter()
                .map(|&r| pfc.xoff.get(r as usize).copied().unwrap_or(f64::INFINITY))
                .collect(),
            dev: res
                .iter()
                .map(|&r| (r < self.ports).then(|| (pfc.owner[r as usize], pfc.peer[r as usize])))
                .collect(),
            subs: comp
                .iter()
                .map(|&i| {
                    let s = &self.subs[i as usize];
                    let uses = s
                        .uses
                        .iter()
                        .map(|&(r, w)| (local[r as usize], w))
                        .collect();
                    (s.cap, uses)
                })
                .collect(),
        };
        for &r in res {
            self.local[r as usize] = u32::MAX;
        }
        let Some(rates) = net.solve(horizon / 2.0) else {
            return true;
        };
        for (&i, r) in comp.iter().zip(rates) {
            self.subs[i as usize].rate = r;
        }
        self.pfc.as_deref_mut().expect("PFC").solves += 1;
        true
    }
}

/// One component in local numbers: each resource's capacity and, for a
/// port, its (owner, peer) devices (`None` for PCIe); each sub-flow's cap
/// and its uses (resource, share of its bytes).
pub(super) struct Net {
    pub cap: Vec<f64>,
    pub xoff: Vec<f64>,
    pub dev: Vec<Option<(u32, u32)>>,
    pub subs: Vec<(f64, Vec<(u32, f64)>)>,
}

/// A sub-flow's piece on one port: the sub-flow, its share of the bytes,
/// and the pieces of the same sub-flow on the ports feeding it (empty at
/// its first hop) with the share of what they bring that comes here.
struct Piece {
    sub: u32,
    share: f64,
    from: Vec<u32>,
    split: f64,
}

impl Net {
    /// Each sub-flow's rate in the paused steady state; `None` when the ports form a cycle, or when no ingress
    /// counter reaches xOFF within `onset_by` picoseconds of senders at
    /// full rate (the queues absorb what collides, and nothing pauses).
    pub fn solve(&self, onset_by: f64) -> Option<Vec<f64>> {
        let (n, m) = (self.subs.len(), self.cap.len());
        // Pieces by port, and each port's place in the order traffic
        // crosses them.
        let mut pieces: Vec<Piece> = Vec::new();
        let mut at_port: Vec<Vec<u32>> = vec![Vec::new(); m];
        // PCIe: every sender behind it is greedy, so each gets an equal
        // rate (its uses count payload per wire byte).
        let mut weight = vec![0.0f64; m];
        for (_, uses) in &self.subs {
            for &(r, w) in uses {
                weight[r as usize] += w;
            }
        }
        let mut source = vec![f64::INFINITY; n];
        for (i, (cap, uses)) in self.subs.iter().enumerate() {
            // A greedy sender brings as much as its fastest port could
            // take (a finite demand to share out).
            let fastest = uses
                .iter()
                .map(|u| self.cap[u.0 as usize])
                .fold(0.0, f64::max);
            source[i] = cap.min(fastest);
            for &(r, w) in uses {
                let ru = r as usize;
                if self.dev[ru].is_none() {
                    source[i] = source[i].min(self.cap[ru] / weight[ru].max(1e-30));
                    continue;
                }
                at_port[ru].push(pieces.len() as u32);
                pieces.push(Piece {
                    sub: i as u32,
                    share: w,
                    from: Vec::new(),
                    split: 0.0,
                });
            }
        }
        // Each piece's feeders: the same sub-flow's pieces on ports whose
        // link enters this port's device; what they bring splits over the
        // sub-flow's ports at this device by share.
        let mut by_sub: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (k, p) in pieces.iter().enumerate() {
            by_sub[p.sub as usize].push(k as u32);
        }
        let port_of = {
            let mut v = vec![0u32; pieces.len()];
            for (r, list) in at_port.iter().enumerate() {
                for &k in list {
                    v[k as usize] = r as u32;
                }
            }
            v
        };
        let dev = |k: u32| self.dev[port_of[k as usize] as usize].expect("a port");
        let mut indeg = vec![0u32; m];
        let mut next: Vec<Vec<u32>> = vec![Vec::new(); m];
        for list in &by_sub {
            for &k in list {
                let (owner, _) = dev(k);
                let from: Vec<u32> = list
                    .iter()
                    .copied()
                    .filter(|&j| dev(j).1 == owner)
                    .collect();
                let here: f64 = list
                    .iter()
                    .filter(|&&j| dev(j).0 == owner)
                    .map(|&j| pieces[j as usize].share)
                    .sum();
                let p = &mut pieces[k as usize];
                p.split = p.share / here.max(1e-30);
                for &j in &from {
                    let (a, b) = (port_of[j as usize], port_of[k as usize]);
                    if !next[a as usize].contains(&b) {
                        next[a as usize].push(b);
                        indeg[b as usize] += 1;
                    }
                }
                pieces[k as usize].from = from;
            }
        }
        let ports: Vec<u32> = (0..m as u32)
            .filter(|&r| self.dev[r as usize].is_some())
            .collect();
        let mut order: Vec<u32> = ports
            .iter()
            .copied()
            .filter(|&r| indeg[r as usize] == 0)
            .collect();
        let mut head = 0;
        while head < order.len() {
            let r = order[head];
            head += 1;
            for &s in &next[r as usize] {
                indeg[s as usize] -= 1;
                if indeg[s as usize] == 0 {
                    order.push(s);
                }
            }
        }
        if order.len() < ports.len() {
            return None;
        }
        // Each port's pace, and each piece's rate out of its port.
        let mut pace: Vec<f64> = self.cap.clone();
        let mut out = vec![0.0f64; pieces.len()];
        let mut grant = vec![f64::INFINITY; m];
        let mut groups: Vec<(Group, f64)> = Vec::new();
        let mut rounds = 0;
        let mut onset = f64::INFINITY;
        loop {
            rounds += 1;
            grant.iter_mut().for_each(|g| *g = f64::INFINITY);
            for &r in &order {
                let ru = r as usize;
                // What each piece brings, by group: at its first hop a
                // sub-flow is its own group (a NIC serves its QPs round
                // robin); later, the port feeding it is.
                groups.clear();
                for &k in &at_port[ru] {
                    let p = &pieces[k as usize];
                    if p.from.is_empty() {
                        add(
                            &mut groups,
                            Group::Sub(p.sub),
                            source[p.sub as usize] * p.share,
                        );
                    }
                    for &j in &p.from {
                        add(
                            &mut groups,
                            Group::Port(port_of[j as usize]),
                            out[j as usize] * p.split,
                        );
                    }
                }
                let level = water_level(pace[ru], &groups);
                if rounds == 1 && level.is_finite() {
                    for &(g, d) in &groups {
                        if let (Group::Port(q), true) = (g, d > level) {
                            onset = onset.min(self.xoff[q as usize] / (d - level));
                        }
                    }
                }
                // Each feeder's grant: the level over what it brings; where
                // the port has room, all may bring more in proportion
                // until it is full.
                let total: f64 = groups.iter().map(|g| g.1).sum();
                for &(g, d) in &groups {
                    if let (Group::Port(q), true) = (g, d > 0.0) {
                        let q = q as usize;
                        let room = if level.is_finite() {
                            level / d
                        } else {
                            pace[ru] / total
                        };
                        grant[q] = grant[q].min(room);
                    }
                }
                // Each group gets at most the level, its pieces in
                // proportion to what they bring.
                let scale = |g: Group| {
                    let d = groups.iter().find(|e| e.0 == g).map_or(0.0, |e| e.1);
                    if d > level {
                        level / d
                    } else {
                        1.0
                    }
                };
                for &k in &at_port[ru] {
                    let p = &pieces[k as usize];
                    out[k as usize] = if p.from.is_empty() {
                        source[p.sub as usize] * p.share * scale(Group::Sub(p.sub))
                    } else {
                        p.from
                            .iter()
                            .map(|&j| {
                                out[j as usize] * p.split * scale(Group::Port(port_of[j as usize]))
                            })
                            .sum()
                    };
                }
            }
            if rounds == 1 && onset > onset_by {
                return None;
            }
            // Each port's pace from the grants its next hop gives it.
            let mut moved = 0.0f64;
            for &r in &order {
                let ru = r as usize;
                let load: f64 = at_port[ru].iter().map(|&k| out[k as usize]).sum();
                let want = if grant[ru].is_finite() {
                    (load * grant[ru]).min(self.cap[ru])
                } else {
                    self.cap[ru]
                };
                moved = moved.max((want - pace[ru]).abs() / self.cap[ru].max(1e-30));
                pace[ru] = want;
            }
            if moved < 1e-9 || rounds >= ROUNDS {
                break;
            }
        }
        let mut rate = source;
        for (k, p) in pieces.iter().enumerate() {
            if p.share > 0.0 {
                let r = &mut rate[p.sub as usize];
                *r = r.min(out[k] / p.share);
            }
        }
        for r in &mut rate {
            if !r.is_finite() {
                *r = 0.0;
            }
        }
        Some(rate)
    }
}

/// Who an egress port serves in turn: a QP at its NIC, an ingress port
/// (the port feeding it) at a switch.
#[derive(Clone, Copy, PartialEq)]
enum Group {
    Sub(u32),
    Port(u32),
}

/// Adds `d` to group `g`'s demand.
fn add(groups: &mut Vec<(Group, f64)>, g: Group, d: f64) {
    match groups.iter_mut().find(|e| e.0 == g) {
        Some(e) => e.1 += d,
        None => groups.push((g, d)),
    }
}

/// The level that shares `cap` max-min over groups wanting these amounts
/// (infinite when they leave some of it unused: a port that fills
/// exactly still grants, so that its feeders keep their pace).
fn water_level(cap: f64, groups: &[(Group, f64)]) -> f64 {
    let total: f64 = groups.iter().map(|g| g.1).sum();
    if total < cap * (1.0 - 1e-9) {
        return f64::INFINITY;
    }
    let mut want: Vec<f64> = groups.iter().map(|g| g.1).collect();
    want.sort_by(f64::total_cmp);
    let mut left = cap;
    for (k, &w) in want.iter().enumerate() {
        let each = left / (want.len() - k) as f64;
        if w >= each {
            return each;
        }
        left -= w;
    }
    f64::INFINITY
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1e-3)
    }

    /// Ports as (owner, peer) devices, all of capacity 1, and sub-flows
    /// over lists of them.
    fn net(ports: &[(u32, u32)], subs: &[&[u32]]) -> Vec<f64> {
        paused(ports, subs, 1.0, f64::INFINITY).expect("no cycle")
    }

    /// The same with every ingress pausing at `xoff` bytes, if pauses
    /// start within `onset_by` picoseconds.
    fn paused(ports: &[(u32, u32)], subs: &[&[u32]], xoff: f64, onset_by: f64) -> Option<Vec<f64>> {
        let n = Net {
            cap: vec![1.0; ports.len()],
            xoff: vec![xoff; ports.len()],
            dev: ports.iter().map(|&p| Some(p)).collect(),
            subs: subs
                .iter()
                .map(|s| (f64::INFINITY, s.iter().map(|&r| (r, 1.0)).collect()))
                .collect(),
        };
        n.solve(onset_by)
    }

    /// Three senders behind switch X and one beside it, into one port of
    /// switch Y: Y serves its two ingress ports equally, so the lone
    /// sender gets half and the three a sixth each (max-min: a quarter
    /// each).
    #[test]
    fn an_egress_serves_its_ingress_ports_equally() {
        // Devices: NICs 0..=3, X = 4, Y = 5, the receiver 6.
        let ports = [(0, 4), (1, 4), (2, 4), (4, 5), (3, 5), (5, 6)];
        let subs: [&[u32]; 4] = [&[0, 3, 5], &[1, 3, 5], &[2, 3, 5], &[4, 5]];
        let r = net(&ports, &subs);
        for &x in &r[..3] {
            assert!(close(x, 1.0 / 6.0), "{r:?}");
        }
        assert!(close(r[3], 0.5), "{r:?}");

        // X's uplink is offered three times what it sends: each NIC's
        // counter at X grows by 2/3 of a byte per picosecond and reaches
        // 1,000 bytes of xOFF after 1,500 ps. Flows done sooner than that
        // never pause.
        assert!(paused(&ports, &subs, 1000.0, 1600.0).is_some());
        assert!(paused(&ports, &subs, 1000.0, 1400.0).is_none());
    }

    /// The victim of a pause: senders 0 and 1 behind T1 send through the
    /// spine to a port of T2 that two local senders also want; sender 2
    /// behind T1 sends through the same uplink to T3, where nothing is
    /// congested. T2's port gives each ingress a third; the spine's link
    /// to T2 is paused to that; T1's uplink, which serves its three
    /// senders equally, is paused until two thirds of it is a third: the
    /// victim gets a sixth (max-min would give it half).
    #[test]
    fn a_paused_uplink_slows_its_victims() {
        // Devices: NICs 0..=4, T1 = 5, spine = 6, T2 = 7, T3 = 8, the
        // receivers R = 9 and VR = 10.
        let ports = [
            (0, 5),  // 0: NIC 0
            (1, 5),  // 1: NIC 1
            (2, 5),  // 2: NIC 2 (the victim)
            (5, 6),  // 3: T1's uplink
            (6, 7),  // 4: spine to T2
            (6, 8),  // 5: spine to T3
            (3, 7),  // 6: NIC 3 under T2
            (4, 7),  // 7: NIC 4 under T2
            (7, 9),  // 8: T2 to R
            (8, 10), // 9: T3 to VR
        ];
        let r = net(
            &ports,
            &[
                &[0, 3, 4, 8],
                &[1, 3, 4, 8],
                &[2, 3, 5, 9],
                &[6, 8],
                &[7, 8],
            ],
        );
        assert!(close(r[0], 1.0 / 6.0) && close(r[1], 1.0 / 6.0), "{r:?}");
        assert!(close(r[2], 1.0 / 6.0), "the victim: {r:?}");
        assert!(close(r[3], 1.0 / 3.0) && close(r[4], 1.0 / 3.0), "{r:?}");
    }

    /// Where nothing is congested every sender gets its path's rate, and
    /// a NIC's port splits itself over its QPs.
    #[test]
    fn without_congestion_it_is_max_min() {
        let ports = [(0, 2), (2, 1), (2, 3)];
        let r = net(&ports, &[&[0, 1], &[0, 2]]);
        assert!(close(r[0], 0.5) && close(r[1], 0.5), "{r:?}");
        let r = net(&ports, &[&[0, 1]]);
        assert!(close(r[0], 1.0), "{r:?}");
    }

    /// Ports in a loop have no order to pass rates in.
    #[test]
    fn a_routing_loop_is_left_to_max_min() {
        let ports = [(0, 1), (1, 2), (2, 1)];
        let n = Net {
            cap: vec![1.0; 3],
            xoff: vec![1.0; 3],
            dev: ports.iter().map(|&p| Some(p)).collect(),
            subs: vec![
                (f64::INFINITY, vec![(0, 1.0), (1, 1.0)]),
                (f64::INFINITY, vec![(2, 1.0), (1, 1.0)]),
            ],
        };
        // Port 1 (device 1 to 2) and port 2 (2 to 1) feed each other.
        let _ = n.solve(f64::INFINITY);
        let m = Net {
            cap: vec![1.0; 2],
            xoff: vec![1.0; 2],
            dev: vec![Some((1, 2)), Some((2, 1))],
            subs: vec![(f64::INFINITY, vec![(0, 1.0), (1, 1.0)])],
        };
        assert!(m.solve(f64::INFINITY).is_none());
    }
}
