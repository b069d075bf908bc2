//! Global load balancing (GLB): DLB that also sees the links one hop
//! further. A balancing switch (a leaf) knows which ports of each next hop
//! lead on towards each destination (the next-next-hop topology that BGP
//! NNHN would signal, taken here from the routing tables), and its
//! neighbours (the helpers, spines) send it heartbeats with the quality
//! bands of their ports whenever those change, checked every heartbeat
//! interval. A path's quality combines the local member's band with the
//! best band among the next hop's ports towards the destination, as last
//! heard; new flows and flowlets take the best path.
//!
//! Heartbeats are real frames: they queue behind other strict-priority
//! traffic, take the link's time, and a band is only as fresh as the last
//! heartbeat that arrived.

use crate::topology::routing::{Routes, NO_ROUTE};
use crate::topology::{Owner, PortId, SwitchId, Topology};
use crate::units::SimTime;

use super::dlb::BEST;

/// How a path's quality is made of its two links' bands.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Combine {
    /// The worse of the two.
    Simple,
    /// A weighted mean, `remote_weight` on the remote band.
    Compound { remote_weight: f64 },
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GlbConfig {
    /// Helpers check their bands this often and send a heartbeat when
    /// one changed.
    pub heartbeat: SimTime,
    pub combine: Combine,
}

impl Default for GlbConfig {
    fn default() -> Self {
        GlbConfig {
            heartbeat: SimTime::from_us(5),
            combine: Combine::Simple,
        }
    }
}

impl Combine {
    pub fn path_band(self, local: u8, remote: u8) -> u8 {
        match self {
            Combine::Simple => local.min(remote),
            Combine::Compound { remote_weight } => {
                let q = local as f64 * (1.0 - remote_weight) + remote as f64 * remote_weight;
                q.round().clamp(0.0, BEST as f64) as u8
            }
        }
    }
}

/// The remote view of one balancing switch.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Glb {
    pub cfg: GlbConfig,
    /// (member port, destination class) -> range of `slots`, sorted.
    index: Vec<((PortId, u32), (u32, u32))>,
    /// Remote link ids, each an index into `remote`.
    slots: Vec<u32>,
    /// Band of each remote link as last heard.
    pub remote: Vec<u8>,
    /// Per port heartbeats arrive on: which remote links they update, as
    /// (remote link, position of its port among the sender's ports).
    feeds: Vec<(PortId, Vec<(u32, u32)>)>,
    /// Heartbeats received.
    pub heartbeats: u64,
}

/// The port a helper sends its heartbeats to `to` on: its first link to
/// that switch.
pub fn heartbeat_port(topo: &Topology, helper: SwitchId, to: SwitchId) -> Option<PortId> {
    topo.switches[helper.idx()]
        .ports
        .iter()
        .copied()
        .find(|&p| topo.port(topo.port(p).peer).owner == Owner::Switch(to))
}

impl Glb {
    pub fn new(cfg: GlbConfig, topo: &Topology, routes: &Routes, sw: SwitchId) -> Self {
        let mine = &routes.switches[sw.idx()];
        let mut remote_id: Vec<(PortId, u32)> = Vec::new();
        let mut known: std::collections::HashMap<PortId, u32> = Default::default();
        let mut entries: Vec<((PortId, u32), Vec<u32>)> = Vec::new();
        for (class, &g) in mine.by_class.iter().enumerate() {
            if g == NO_ROUTE {
                continue;
            }
            for &p in mine.member_slice(g) {
                let Owner::Switch(n) = topo.port(topo.port(p).peer).owner else {
                    continue;
                };
                let theirs = &routes.switches[n.idx()];
                let rg = theirs.by_class.get(class).copied().unwrap_or(NO_ROUTE);
                if rg == NO_ROUTE {
                    continue;
                }
                let ids = theirs
                    .member_slice(rg)
                    .iter()
                    .map(|&rp| {
                        *known.entry(rp).or_insert_with(|| {
                            remote_id.push((rp, n.0));
                            remote_id.len() as u32 - 1
                        })
                    })
                    .collect();
                entries.push(((p, class as u32), ids));
            }
        }
        entries.sort_by_key(|e| e.0);
        let mut slots = Vec::new();
        let index = entries
            .into_iter()
            .map(|(k, ids)| {
                let first = slots.len() as u32;
                slots.extend(ids);
                (k, (first, slots.len() as u32 - first))
            })
            .collect();
        let mut feeds: Vec<(PortId, Vec<(u32, u32)>)> = Vec::new();
        for (id, &(rp, n)) in remote_id.iter().enumerate() {
            let helper = SwitchId(n);
            let Some(hp) = heartbeat_port(topo, helper, sw) else {
                continue;
            };
            let ingress = topo.port(hp).peer;
            let pos = topo.switches[n as usize]
                .ports
                .iter()
                .position(|&q| q == rp)
                .expect("a helper's own port") as u32;
            match feeds.iter_mut().find(|f| f.0 == ingress) {
                Some(f) => f.1.push((id as u32, pos)),
                None => feeds.push((ingress, vec![(id as u32, pos)])),
            }
        }
        Glb {
            cfg,
            index,
            slots,
            remote: vec![BEST; remote_id.len()],
            feeds,
            heartbeats: 0,
        }
    }

    /// The band of the path through member `p` towards destinations of
    /// `class`, given the member's own band.
    #[inline]
    pub fn path_band(&self, local: u8, p: PortId, class: u32) -> u8 {
        let Ok(i) = self.index.binary_search_by_key(&(p, class), |e| e.0) else {
            return local;
        };
        let (first, n) = self.index[i].1;
        let remote = self.slots[first as usize..(first + n) as usize]
            .iter()
            .map(|&s| self.remote[s as usize])
            .max()
            .unwrap_or(BEST);
        self.cfg.combine.path_band(local, remote)
    }

    /// The bands last heard on `ingress`: (position of the port among the
    /// sender's ports, its band).
    pub fn heard_on(&self, ingress: PortId) -> Vec<(u32, u8)> {
        self.feeds
            .iter()
            .find(|f| f.0 == ingress)
            .map(|(_, feed)| {
                feed.iter()
                    .map(|&(slot, pos)| (pos, self.remote[slot as usize]))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A heartbeat arrived on `ingress` with the sender's bands, one per
    /// port of the sender.
    pub fn receive(&mut self, ingress: PortId, bands: &[u8]) {
        self.heartbeats += 1;
        if let Some((_, feed)) = self.feeds.iter().find(|f| f.0 == ingress) {
            for &(slot, pos) in feed {
                self.remote[slot as usize] = bands[pos as usize];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_takes_the_worse_band_compound_a_weighted_mean() {
        assert_eq!(Combine::Simple.path_band(7, 2), 2);
        assert_eq!(Combine::Simple.path_band(1, 6), 1);
        let c = Combine::Compound { remote_weight: 0.5 };
        assert_eq!(c.path_band(7, 2), 5); // 4.5 rounds up
        assert_eq!(c.path_band(6, 2), 4);
        let local_only = Combine::Compound { remote_weight: 0.0 };
        assert_eq!(local_only.path_band(3, 0), 3);
    }
}
