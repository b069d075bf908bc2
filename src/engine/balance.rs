//! The balancers' periodic work in the event loop: quality bands for DLB
//! and GLB, GLB heartbeats between switches, and ALB's bucket sampling.

use super::{io, Event, Simulation, Wires};
use crate::scenario::Scenario;
use crate::switch::balance::dlb::{self, BEST};
use crate::switch::balance::glb::heartbeat_port;
use crate::switch::balance::Algo;
use crate::topology::{NicId, Owner, PortId, QpId, SwitchId, Topology};
use crate::units::SimTime;
use crate::wire::frame::{self, ecn};
use crate::wire::{Opcode, Packet};

/// A port whose quality band is kept, and how it is computed.
#[derive(Clone, Copy, Debug)]
struct QualityPort {
    port: PortId,
    load_weight: f64,
    queue_full: u64,
    load: f64,
    last_tx: u64,
}

/// A switch that tells its GLB neighbours about its ports.
#[derive(Debug)]
struct Helper {
    sw: SwitchId,
    /// Bands as of the last heartbeat (empty before the first).
    last: Vec<u8>,
    /// Heartbeat links (indices into `BalanceState::links`).
    links: Vec<u32>,
}

/// One helper-to-balancer link.
#[derive(Debug)]
struct HeartbeatLink {
    port: PortId,
}

/// The bands each heartbeat in flight carries, in slots its frame names
/// (`Packet::psn`), so a heartbeat delivers its own bands whatever
/// happened to the ones before it, and a lost one frees its slot.
#[derive(Debug, Default)]
struct HeartbeatSlots {
    bands: Vec<Box<[u8]>>,
    free: Vec<u32>,
}

impl HeartbeatSlots {
    fn put(&mut self, bands: Box<[u8]>) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.bands[i as usize] = bands;
                i
            }
            None => {
                self.bands.push(bands);
                (self.bands.len() - 1) as u32
            }
        }
    }

    fn take(&mut self, slot: u32) -> Box<[u8]> {
        self.free.push(slot);
        std::mem::take(&mut self.bands[slot as usize])
    }

    /// Heartbeats in flight.
    fn len(&self) -> usize {
        self.bands.len() - self.free.len()
    }
}

/// Periodic balancer state of the whole fabric.
#[derive(Debug, Default)]
pub struct BalanceState {
    /// Quality band of every port (empty when no switch needs them).
    pub quality: Vec<u8>,
    ports: Vec<QualityPort>,
    quality_every: SimTime,
    helpers: Vec<Helper>,
    links: Vec<HeartbeatLink>,
    slots: HeartbeatSlots,
    heartbeat_every: SimTime,
    /// Switches running ALB, and how often they are ticked.
    alb: Vec<SwitchId>,
    alb_every: SimTime,
    pub heartbeats_sent: u64,
    pub heartbeat_bytes: u64,
    /// Heartbeats dropped or lost on a failed link.
    pub heartbeats_lost: u64,
}

impl BalanceState {
    /// A heartbeat frame was dropped or lost: its bands go with it.
    pub(super) fn heartbeat_lost(&mut self, pkt: &Packet) {
        self.slots.take(pkt.psn);
        self.heartbeats_lost += 1;
    }

    /// Each helper switch, the bands of its last heartbeat (one per port)
    /// and the ports it sends heartbeats on.
    pub fn helpers(&self) -> impl Iterator<Item = (SwitchId, &[u8], Vec<PortId>)> {
        self.helpers.iter().map(|h| {
            let ports = h
                .links
                .iter()
                .map(|&l| self.links[l as usize].port)
                .collect();
            (h.sw, &h.last[..], ports)
        })
    }

    /// Heartbeats sent and not yet delivered or lost.
    pub fn heartbeats_in_flight(&self) -> usize {
        self.slots.len()
    }

    /// What each switch's balancer needs, and the first event of each
    /// periodic task.
    pub fn new(topo: &Topology, scenario: &Scenario, mut push: impl FnMut(SimTime, Event)) -> Self {
        let cfg = &scenario.switch.balance;
        let mut st = BalanceState {
            quality_every: SimTime::MAX,
            heartbeat_every: SimTime::MAX,
            alb_every: SimTime::MAX,
            ..Default::default()
        };
        let spec = |s: usize| cfg.for_switch(SwitchId(s as u32), topo.switches[s].tier);
        let mut tracked = vec![false; topo.ports.len()];
        let mut track = |st: &mut BalanceState, sw: usize, d: &dlb::DlbConfig| {
            st.quality_every = st.quality_every.min(d.interval);
            for &p in &topo.switches[sw].ports {
                if !std::mem::replace(&mut tracked[p.idx()], true) {
                    st.ports.push(QualityPort {
                        port: p,
                        load_weight: d.load_weight,
                        queue_full: d.queue_full,
                        load: 0.0,
                        last_tx: 0,
                    });
                }
            }
        };
        let mut helper_of: Vec<Vec<SwitchId>> = vec![Vec::new(); topo.switches.len()];
        for s in 0..topo.switches.len() {
            let sp = spec(s);
            if sp.uses_quality() {
                track(&mut st, s, &sp.dlb);
            }
            if sp.uses(Algo::Glb) {
                st.heartbeat_every = st.heartbeat_every.min(sp.glb.heartbeat);
                for &p in &topo.switches[s].ports {
                    if let Owner::Switch(n) = topo.port(topo.port(p).peer).owner {
                        let to = &mut helper_of[n.idx()];
                        if !to.contains(&SwitchId(s as u32)) {
                            to.push(SwitchId(s as u32));
                        }
                    }
                }
            }
            if sp.uses(Algo::Alb) {
                st.alb.push(SwitchId(s as u32));
                st.alb_every = st.alb_every.min(sp.alb.window);
            }
        }
        for (h, to) in helper_of.iter().enumerate() {
            if to.is_empty() {
                continue;
            }
            // A helper's bands come from the settings of the first
            // balancer it serves.
            track(&mut st, h, &spec(to[0].idx()).dlb);
            let mut links = Vec::new();
            for &l in to {
                if let Some(port) = heartbeat_port(topo, SwitchId(h as u32), l) {
                    links.push(st.links.len() as u32);
                    st.links.push(HeartbeatLink { port });
                }
            }
            st.helpers.push(Helper {
                sw: SwitchId(h as u32),
                last: Vec::new(),
                links,
            });
        }
        if !st.ports.is_empty() {
            st.quality = vec![BEST; topo.ports.len()];
            push(st.quality_every, Event::Quality);
        }
        if !st.helpers.is_empty() {
            push(st.heartbeat_every, Event::Heartbeat);
        }
        if !st.alb.is_empty() {
            push(st.alb_every, Event::Alb);
        }
        st
    }
}

impl Simulation {
    fn traffic_left(&self) -> bool {
        self.counters.flows_acked < self.flows.len() as u64
    }

    /// DLB: each tracked port's load (EWMA of bytes sent over what the
    /// link could send in the interval) and queue depth, as a band.
    #[inline(never)]
    pub(super) fn refresh_quality(&mut self) {
        let span = self.balance.quality_every;
        for d in &mut self.balance.ports {
            let i = d.port.idx();
            let port = &self.egress.ports()[i];
            let sent = port.tx_wire_bytes - d.last_tx;
            d.last_tx = port.tx_wire_bytes;
            let capacity = self.topo.ports[i].rate.bps() as f64 * span.0 as f64 / 8e12;
            let util = (sent as f64 / capacity).min(1.0);
            d.load += d.load_weight * (util - d.load);
            self.balance.quality[i] = if port.down {
                0
            } else {
                let queued = self.egress.queues()[i].total_bytes;
                dlb::quality(d.load, queued, d.queue_full)
            };
        }
        if self.traffic_left() {
            let t = self.now + span;
            self.queue.push(t, Event::Quality);
        }
    }

    /// GLB helpers whose bands changed send a heartbeat to each balancing
    /// neighbour: a frame with one byte per port, ahead of queued data.
    #[inline(never)]
    pub(super) fn heartbeat(&mut self) {
        for h in 0..self.balance.helpers.len() {
            let sw = self.balance.helpers[h].sw;
            let bands: Vec<u8> = self.topo.switches[sw.idx()]
                .ports
                .iter()
                .map(|p| self.balance.quality[p.idx()])
                .collect();
            if bands == self.balance.helpers[h].last {
                continue;
            }
            for li in self.balance.helpers[h].links.clone() {
                let port = self.balance.links[li as usize].port;
                let wire = frame::wire_bytes(Opcode::Heartbeat, bands.len() as u32);
                let slot = self.balance.slots.put(bands.clone().into_boxed_slice());
                let pkt = Packet {
                    src: NicId(0),
                    dst: NicId(0),
                    qp: QpId(sw.0),
                    psn: slot,
                    payload: 0,
                    wire_bytes: wire,
                    header_crc: 0,
                    udp_sport: 0,
                    opcode: Opcode::Heartbeat,
                    tos: Packet::tos_of(self.scenario.transport.cnp_dscp, ecn::NOT_ECT),
                };
                self.balance.heartbeats_sent += 1;
                self.balance.heartbeat_bytes += wire as u64;
                let turn = self.egress.send_control(&mut io!(self), port, pkt);
                self.after(port, turn);
            }
            self.balance.helpers[h].last = bands;
        }
        if self.traffic_left() {
            let t = self.now + self.balance.heartbeat_every;
            self.queue.push(t, Event::Heartbeat);
        }
    }

    /// A heartbeat arrived at a balancing switch on port `p`.
    #[inline(never)]
    pub(super) fn receive_heartbeat(&mut self, p: PortId, pkt: &Packet) {
        let bands = self.balance.slots.take(pkt.psn);
        if let Owner::Switch(s) = self.egress.owner(p) {
            if let Some(g) = &mut self.egress.switch_mut(s.idx()).balancer.parts.glb {
                g.receive(p, &bands);
            }
        }
    }

    /// ALB switches sample their buckets and rebalance.
    #[inline(never)]
    pub(super) fn alb_tick(&mut self) {
        for &s in &self.balance.alb {
            self.egress
                .switch_mut(s.idx())
                .balancer
                .tick(self.now, &self.routes.switches[s.idx()]);
        }
        if self.traffic_left() {
            let t = self.now + self.balance.alb_every;
            self.queue.push(t, Event::Alb);
        }
    }
}
