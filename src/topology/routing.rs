//! Routing tables: from every switch to every NIC, the set of equal-cost
//! next hops on all shortest paths.
//!
//! NICs that hang off the same set of switches share one route at every
//! other switch, so one breadth-first search per attachment set (per leaf,
//! in a Clos) fills the tables; a switch a NIC is attached to forwards to it
//! directly. A next hop is a neighbour switch reached by one or more
//! parallel links (a port channel), so a group is a list of hops, each a
//! list of member ports. Groups are interned per switch, in the order first
//! met, so table contents never depend on hash-map iteration order.

use std::collections::HashMap;

use super::{LinkId, NicId, Owner, PortId, SwitchId, Topology};

pub const NO_ROUTE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct Hop {
    pub first_port: u32,
    pub n_ports: u32,
}

#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct Group {
    pub first_hop: u32,
    pub n_hops: u32,
}

/// One switch's forwarding state.
#[derive(Default, Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SwitchRoutes {
    /// Route per attachment class (see `Routes::nic_class`).
    pub by_class: Vec<u32>,
    /// NICs attached to this switch and the group of ports that reach them,
    /// sorted by NIC.
    pub local: Vec<(NicId, u32)>,
    pub groups: Vec<Group>,
    pub hops: Vec<Hop>,
    pub ports: Vec<PortId>,
}

impl SwitchRoutes {
    #[inline]
    pub fn group_for(&self, dst: NicId, class: u32) -> u32 {
        if !self.local.is_empty() {
            if let Ok(i) = self.local.binary_search_by_key(&dst, |e| e.0) {
                return self.local[i].1;
            }
        }
        self.by_class[class as usize]
    }

    #[inline]
    pub fn hop(&self, group: u32, i: u32) -> Hop {
        let g = self.groups[group as usize];
        self.hops[(g.first_hop + i) as usize]
    }

    /// Every member port of an equal-cost group: each next hop's ports in
    /// turn (the flat list dynamic balancers choose from).
    pub fn members(&self, group: u32) -> impl Iterator<Item = PortId> + '_ {
        let g = self.groups[group as usize];
        (0..g.n_hops).flat_map(move |i| {
            let hop = self.hop(group, i);
            (0..hop.n_ports).map(move |m| self.member(hop, m))
        })
    }

    /// The same members as one slice: a group's hops are stored one after
    /// the other, so its ports are contiguous.
    #[inline]
    pub fn member_slice(&self, group: u32) -> &[PortId] {
        let g = self.groups[group as usize];
        let first = self.hops[g.first_hop as usize].first_port as usize;
        let last = self.hops[(g.first_hop + g.n_hops - 1) as usize];
        &self.ports[first..(last.first_port + last.n_ports) as usize]
    }

    #[inline]
    pub fn member(&self, hop: Hop, i: u32) -> PortId {
        self.ports[(hop.first_port + i) as usize]
    }

    /// All egress ports of a group (every member of every hop).
    pub fn group_ports(&self, group: u32) -> impl Iterator<Item = PortId> + '_ {
        let g = self.groups[group as usize];
        (g.first_hop..g.first_hop + g.n_hops).flat_map(move |h| {
            let hop = self.hops[h as usize];
            (hop.first_port..hop.first_port + hop.n_ports).map(move |p| self.ports[p as usize])
        })
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Routes {
    /// Attachment class of each NIC: NICs with the same set of attached
    /// switches share a class.
    pub nic_class: Vec<u32>,
    pub switches: Vec<SwitchRoutes>,
    /// Switch-to-switch links on the longest shortest path between two
    /// switches that NICs hang off (0 when every NIC shares a switch).
    pub longest_switch_hops: u32,
}

/// One switch's groups, interned by the neighbour indices they are made
/// of (lookups borrow the caller's scratch slice, so finding an existing
/// group allocates nothing).
#[derive(Default)]
struct Interner {
    ids: HashMap<Vec<u32>, u32>,
    local_ids: HashMap<Vec<PortId>, u32>,
}

fn push_group<'a>(sw: &mut SwitchRoutes, hops: impl Iterator<Item = &'a [PortId]>) -> u32 {
    let id = sw.groups.len() as u32;
    let first_hop = sw.hops.len() as u32;
    for members in hops {
        sw.hops.push(Hop {
            first_port: sw.ports.len() as u32,
            n_ports: members.len() as u32,
        });
        sw.ports.extend_from_slice(members);
    }
    sw.groups.push(Group {
        first_hop,
        n_hops: sw.hops.len() as u32 - first_hop,
    });
    id
}

impl Interner {
    /// The group whose hops are the neighbours `hops` (indices into
    /// `neigh`).
    fn intern(
        &mut self,
        sw: &mut SwitchRoutes,
        hops: &[u32],
        neigh: &[(SwitchId, Vec<PortId>)],
    ) -> u32 {
        if let Some(&id) = self.ids.get(hops) {
            return id;
        }
        let id = push_group(sw, hops.iter().map(|&i| neigh[i as usize].1.as_slice()));
        self.ids.insert(hops.to_vec(), id);
        id
    }

    /// The one-hop group of the ports that reach an attached NIC.
    fn intern_local(&mut self, sw: &mut SwitchRoutes, ports: Vec<PortId>) -> u32 {
        if let Some(&id) = self.local_ids.get(&ports) {
            return id;
        }
        let id = push_group(sw, std::iter::once(ports.as_slice()));
        self.local_ids.insert(ports, id);
        id
    }
}

impl Routes {
    pub fn compute(topo: &Topology) -> Routes {
        Self::compute_live(topo, |_| true)
    }

    /// Routes over the links for which `up` holds (a failed switch is all
    /// its links down). Attachment classes are those of the whole fabric,
    /// so that `nic_class` never changes; a class whose switches are all
    /// cut off has no route.
    pub fn compute_live(topo: &Topology, up: impl Fn(LinkId) -> bool) -> Routes {
        let live = |p: PortId| up(topo.port(p).link);
        let n_sw = topo.switches.len();
        // Neighbour switches of each switch, with the ports reaching them,
        // in port order.
        let mut neigh: Vec<Vec<(SwitchId, Vec<PortId>)>> = vec![Vec::new(); n_sw];
        for (s, sw) in topo.switches.iter().enumerate() {
            for &p in sw.ports.iter().filter(|&&p| live(p)) {
                if let Owner::Switch(n) = topo.port(topo.port(p).peer).owner {
                    match neigh[s].iter_mut().find(|e| e.0 == n) {
                        Some(e) => e.1.push(p),
                        None => neigh[s].push((n, vec![p])),
                    }
                }
            }
        }

        let mut class_of: HashMap<Vec<SwitchId>, u32> = HashMap::new();
        let mut classes: Vec<Vec<SwitchId>> = Vec::new();
        let mut nic_class = Vec::with_capacity(topo.nics.len());
        for nic in &topo.nics {
            let mut att: Vec<SwitchId> = nic
                .ports
                .iter()
                .filter_map(|&p| topo.attached_switch(p))
                .collect();
            att.sort();
            att.dedup();
            let next = classes.len() as u32;
            let c = *class_of.entry(att.clone()).or_insert_with(|| {
                classes.push(att);
                next
            });
            nic_class.push(c);
        }

        let mut switches: Vec<SwitchRoutes> = (0..n_sw)
            .map(|_| SwitchRoutes {
                by_class: vec![NO_ROUTE; classes.len()],
                ..Default::default()
            })
            .collect();
        let mut interners: Vec<Interner> = (0..n_sw).map(|_| Interner::default()).collect();
        let mut scratch: Vec<u32> = Vec::new();

        let mut dist = vec![u32::MAX; n_sw];
        let mut frontier = Vec::new();
        let mut next = Vec::new();
        // Where each class is still attached over live links.
        let mut reach: Vec<Vec<SwitchId>> = vec![Vec::new(); classes.len()];
        for (nic, &c) in topo.nics.iter().zip(&nic_class) {
            for &p in nic.ports.iter().filter(|&&p| live(p)) {
                if let Some(s) = topo.attached_switch(p) {
                    if !reach[c as usize].contains(&s) {
                        reach[c as usize].push(s);
                    }
                }
            }
        }
        let mut attached = vec![false; n_sw];
        for sources in &reach {
            for s in sources {
                attached[s.idx()] = true;
            }
        }
        let mut longest_switch_hops = 0;
        for (c, sources) in reach.iter_mut().enumerate() {
            sources.sort();
            dist.fill(u32::MAX);
            frontier.clear();
            for &s in sources.iter() {
                dist[s.idx()] = 0;
                frontier.push(s);
            }
            let mut d = 0;
            while !frontier.is_empty() {
                next.clear();
                for &s in &frontier {
                    for (n, _) in &neigh[s.idx()] {
                        if dist[n.idx()] == u32::MAX {
                            dist[n.idx()] = d + 1;
                            next.push(*n);
                        }
                    }
                }
                std::mem::swap(&mut frontier, &mut next);
                d += 1;
            }
            for s in 0..n_sw {
                if dist[s] == u32::MAX || dist[s] == 0 {
                    continue;
                }
                if attached[s] {
                    longest_switch_hops = longest_switch_hops.max(dist[s]);
                }
                scratch.clear();
                scratch.extend(
                    neigh[s]
                        .iter()
                        .enumerate()
                        .filter(|(_, (n, _))| dist[n.idx()] + 1 == dist[s])
                        .map(|(i, _)| i as u32),
                );
                let g = interners[s].intern(&mut switches[s], &scratch, &neigh[s]);
                switches[s].by_class[c] = g;
            }
        }

        for (n, nic) in topo.nics.iter().enumerate() {
            let mut per_switch: Vec<(SwitchId, Vec<PortId>)> = Vec::new();
            for &p in nic.ports.iter().filter(|&&p| live(p)) {
                let peer = topo.port(p).peer;
                if let Owner::Switch(s) = topo.port(peer).owner {
                    match per_switch.iter_mut().find(|e| e.0 == s) {
                        Some(e) => e.1.push(peer),
                        None => per_switch.push((s, vec![peer])),
                    }
                }
            }
            for (s, ports) in per_switch {
                let g = interners[s.idx()].intern_local(&mut switches[s.idx()], ports);
                switches[s.idx()].local.push((NicId(n as u32), g));
            }
        }
        for sw in &mut switches {
            sw.local.sort_by_key(|e| e.0);
        }
        Routes {
            nic_class,
            switches,
            longest_switch_hops,
        }
    }

    pub fn group_for(&self, sw: SwitchId, dst: NicId) -> u32 {
        self.switches[sw.idx()].group_for(dst, self.nic_class[dst.idx()])
    }

    /// One shortest path from a NIC port to a NIC, as the egress ports it
    /// leaves through (first hop and first member at every switch), or
    /// `None` if the destination is unreachable.
    pub fn first_path(&self, topo: &Topology, src_port: PortId, dst: NicId) -> Option<Vec<PortId>> {
        let mut path = vec![src_port];
        let mut at = topo.port(src_port).peer;
        for _ in 0..=topo.switches.len() {
            match topo.port(at).owner {
                Owner::Nic(n) => return (n == dst).then_some(path),
                Owner::Switch(s) => {
                    let g = self.group_for(s, dst);
                    if g == NO_ROUTE {
                        return None;
                    }
                    let sr = &self.switches[s.idx()];
                    let out = sr.member(sr.hop(g, 0), 0);
                    path.push(out);
                    at = topo.port(out).peer;
                }
            }
        }
        None
    }
}
