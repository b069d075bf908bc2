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
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct QualityPort {
    port: PortId,
    load_weight: f64,
    queue_full: u64,
    load: f64,
    last_tx: u64,
}

/// A switch that tells its GLB neighbours about its ports.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Helper {
    sw: SwitchId,
    /// Bands as of the last heartbeat (empty before the first).
    last: Vec<u8>,
    /// Heartbeat links (indices into `BalanceState::links`).
    links: Vec<u32>,
}

/// One helper-to-balancer link.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct HeartbeatLink {
    port: PortId,
    /// Heartbeats sent on it so far.
    sent: u32,
}

/// The bands each heartbeat in flight carries, by its link and its number
/// on that link (the frame's `qp` and `psn`), so a heartbeat delivers its
/// own bands whatever happened to the ones before it, a lost one frees
/// its entry, and the key is the same whichever partition of a run holds
/// it.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct HeartbeatSlots {
    bands: std::collections::HashMap<(u32, u32), Box<[u8]>>,
}

impl HeartbeatSlots {
    fn put(&mut self, key: (u32, u32), bands: Box<[u8]>) {
        self.bands.insert(key, bands);
    }

    fn take(&mut self, key: (u32, u32)) -> Box<[u8]> {
        self.bands.remove(&key).unwrap_or_default()
    }

    /// Heartbeats in flight.
    fn len(&self) -> usize {
        self.bands.len()
    }
}

/// The key of a heartbeat frame's bands.
fn slot_of(pkt: &Packet) -> (u32, u32) {
    (pkt.qp.0, pkt.psn)
}

/// Periodic balancer state of the whole fabric.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
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
    /// Ticks of the periodic tasks handled (in a run cut into
    /// partitions, summed over them: each ticks for its own switches).
    pub ticks: u64,
    /// The tick at which each periodic task found nothing to do and
    /// stopped (see `Resting`).
    resting: Resting,
}

/// The periodic tasks that are stopped, and the tick at which each
/// stopped.
///
/// A task ticks on multiples of its interval. A tick that changes
/// nothing (no bytes sent, loads and bands as they were; bands as last
/// told; no bucket carried a byte) is followed by ticks that change
/// nothing until an event of the model happens, since each reads only
/// what events change. So such a tick schedules no next one, and the
/// next event of the model (in a partition, its own) schedules the tick
/// the task would have had then, in the order a running task would have
/// had it. Results are as if the tasks had ticked all along; a run that
/// waits a long retransmission timeout on an idle fabric no longer
/// handles millions of ticks that do nothing.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Resting {
    quality: Option<SimTime>,
    heartbeat: Option<SimTime>,
    alb: Option<SimTime>,
    /// Some task is stopped (looked at before every event).
    any: bool,
}

impl Resting {
    fn update(&mut self) {
        self.any = self.quality.is_some() || self.heartbeat.is_some() || self.alb.is_some();
    }
}

/// The first tick, on a multiple of `every`, that comes after an event
/// handled at `now` with key `after` in a queue ordered by (time, key).
fn next_tick(now: SimTime, after: u32, every: SimTime, tick: Event) -> SimTime {
    use super::queue::Keyed;
    let e = every.0.max(1);
    if now.0.is_multiple_of(e) && tick.key() > after {
        now
    } else {
        SimTime((now.0 / e).saturating_add(1).saturating_mul(e))
    }
}

impl BalanceState {
    /// A heartbeat frame was dropped or lost: its bands go with it.
    pub(super) fn heartbeat_lost(&mut self, pkt: &Packet) {
        self.slots.take(slot_of(pkt));
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

    /// In a partition of a run: keeps the periodic work of the ports and
    /// switches it owns only.
    pub(super) fn keep_only(
        &mut self,
        port_mine: impl Fn(PortId) -> bool,
        switch_mine: impl Fn(SwitchId) -> bool,
    ) {
        self.ports.retain(|d| port_mine(d.port));
        self.helpers.retain(|h| switch_mine(h.sw));
        self.alb.retain(|&s| switch_mine(s));
    }

    /// The bands of a heartbeat leaving for another partition.
    pub(super) fn take_bands(&mut self, pkt: &Packet) -> Box<[u8]> {
        self.slots.take(slot_of(pkt))
    }

    /// The bands of a heartbeat that came from another partition.
    pub(super) fn put_bands(&mut self, pkt: &Packet, bands: Box<[u8]>) {
        self.slots.put(slot_of(pkt), bands);
    }

    /// Takes from `other`, another partition of the same run, its
    /// helpers' last bands, its heartbeat counts and the heartbeats it
    /// has in flight.
    pub(super) fn absorb(&mut self, other: BalanceState) {
        for d in &other.ports {
            self.quality[d.port.idx()] = other.quality[d.port.idx()];
        }
        self.ports.extend(other.ports);
        self.helpers.extend(other.helpers);
        self.helpers.sort_by_key(|h| h.sw);
        self.alb.extend(other.alb);
        self.alb.sort();
        for (mine, theirs) in self.links.iter_mut().zip(&other.links) {
            mine.sent = mine.sent.max(theirs.sent);
        }
        self.slots.bands.extend(other.slots.bands);
        self.heartbeats_sent += other.heartbeats_sent;
        self.heartbeat_bytes += other.heartbeat_bytes;
        self.heartbeats_lost += other.heartbeats_lost;
        self.ticks += other.ticks;
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
                    st.links.push(HeartbeatLink { port, sent: 0 });
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
    /// Some periodic task is stopped: the event about to be handled may
    /// give it something to do.
    pub(super) fn balancers_resting(&self) -> bool {
        self.balance.resting.any
    }

    /// A task stopped or started: the run loop looks at them before each
    /// event while one is stopped.
    fn resting_changed(&mut self) {
        self.balance.resting.update();
        self.records
            .idle
            .attend_every_event(self.balance.resting.any);
    }

    /// Starts again the stopped periodic tasks before an event of the
    /// model (any but clockwork) due now, at the tick each would have had
    /// after it.
    pub(super) fn wake_balancers(&mut self, ev: &Event) {
        let after = super::queue::Keyed::key(ev);
        self.wake_quality(after);
        self.wake_heartbeat(after);
        if let Some(stopped) = self.balance.resting.alb.take() {
            let every = self.balance.alb_every;
            let at = next_tick(self.now, after, every, Event::Alb);
            let (first, last) = (stopped + every, SimTime(at.0 - every.0));
            if first <= last {
                for &s in &self.balance.alb {
                    self.egress
                        .switch_mut(s.idx())
                        .balancer
                        .alb_skip_idle(first, last, every);
                }
            }
            self.queue.push(at, Event::Alb);
        }
        self.resting_changed();
    }

    fn wake_quality(&mut self, after: u32) {
        if self.balance.resting.quality.take().is_some() {
            let at = next_tick(self.now, after, self.balance.quality_every, Event::Quality);
            self.queue.push(at, Event::Quality);
            self.resting_changed();
        }
    }

    fn wake_heartbeat(&mut self, after: u32) {
        if self.balance.resting.heartbeat.take().is_some() {
            let every = self.balance.heartbeat_every;
            let at = next_tick(self.now, after, every, Event::Heartbeat);
            self.queue.push(at, Event::Heartbeat);
            self.resting_changed();
        }
    }

    /// DLB: each tracked port's load (EWMA of bytes sent over what the
    /// link could send in the interval) and queue depth, as a band.
    #[inline(never)]
    pub(super) fn refresh_quality(&mut self) {
        self.balance.ticks += 1;
        let span = self.balance.quality_every;
        let mut changed = false;
        for d in &mut self.balance.ports {
            let i = d.port.idx();
            let port = &self.egress.ports()[i];
            let sent = port.tx_wire_bytes - d.last_tx;
            d.last_tx = port.tx_wire_bytes;
            let capacity = self.topo.ports[i].rate.bps() as f64 * span.0 as f64 / 8e12;
            let util = (sent as f64 / capacity).min(1.0);
            let load = d.load + d.load_weight * (util - d.load);
            let band = if port.down {
                0
            } else {
                let queued = self.egress.queues()[i].total_bytes;
                dlb::quality(load, queued, d.queue_full)
            };
            changed |=
                sent != 0 || load.to_bits() != d.load.to_bits() || band != self.balance.quality[i];
            d.load = load;
            self.balance.quality[i] = band;
        }
        if !changed {
            self.balance.resting.quality = Some(self.now);
            self.resting_changed();
            return;
        }
        // New bands are news for the heartbeats.
        self.wake_heartbeat(super::queue::Keyed::key(&Event::Quality));
        // Until the run ends (a tick past its end is never handled): when
        // the workload is done is known to a partitioned run only later.
        let t = self.now + span;
        self.queue.push(t, Event::Quality);
    }

    /// GLB helpers whose bands changed send a heartbeat to each balancing
    /// neighbour: a frame with one byte per port, ahead of queued data.
    #[inline(never)]
    pub(super) fn heartbeat(&mut self) {
        self.balance.ticks += 1;
        let mut sent = false;
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
            sent = true;
            for li in self.balance.helpers[h].links.clone() {
                let link = &mut self.balance.links[li as usize];
                let port = link.port;
                let seq = link.sent;
                link.sent = link.sent.wrapping_add(1);
                let wire = frame::wire_bytes(Opcode::Heartbeat, bands.len() as u32);
                self.balance
                    .slots
                    .put((li, seq), bands.clone().into_boxed_slice());
                let pkt = Packet {
                    src: NicId(0),
                    dst: NicId(0),
                    // Its link and its number on the link name its bands.
                    qp: QpId(li),
                    psn: seq,
                    payload: 0,
                    wire_bytes: wire,
                    header_crc: 0,
                    udp_sport: 0,
                    opcode: Opcode::Heartbeat,
                    tos: Packet::tos_of(self.scenario.transport.cnp_dscp, ecn::NOT_ECT),
                    flow: crate::wire::packet::NO_FLOW,
                };
                self.balance.heartbeats_sent += 1;
                self.balance.heartbeat_bytes += wire as u64;
                let turn = self.egress.send_control(&mut io!(self), port, pkt);
                self.after(port, turn);
            }
            self.balance.helpers[h].last = bands;
        }
        if !sent {
            self.balance.resting.heartbeat = Some(self.now);
            self.resting_changed();
            return;
        }
        // The frames sent are news for the ports' loads.
        self.wake_quality(super::queue::Keyed::key(&Event::Heartbeat));
        let t = self.now + self.balance.heartbeat_every;
        self.queue.push(t, Event::Heartbeat);
    }

    /// A heartbeat arrived at a balancing switch on port `p`.
    #[inline(never)]
    pub(super) fn receive_heartbeat(&mut self, p: PortId, pkt: &Packet) {
        let bands = self.balance.slots.take(slot_of(pkt));
        if let Owner::Switch(s) = self.egress.owner(p) {
            if let Some(g) = &mut self.egress.switch_mut(s.idx()).balancer.parts.glb {
                g.receive(p, &bands);
            }
        }
    }

    /// ALB switches sample their buckets and rebalance.
    #[inline(never)]
    pub(super) fn alb_tick(&mut self) {
        self.balance.ticks += 1;
        let mut idle = true;
        for &s in &self.balance.alb {
            let b = &mut self.egress.switch_mut(s.idx()).balancer;
            b.tick(self.now, &self.routes.switches[s.idx()]);
            idle &= b.alb_idle();
        }
        if idle {
            self.balance.resting.alb = Some(self.now);
            self.resting_changed();
            return;
        }
        let t = self.now + self.balance.alb_every;
        self.queue.push(t, Event::Alb);
    }
}
