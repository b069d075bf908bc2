//! The hybrid fidelity (`simulation.fidelity = "hybrid"`): a transfer
//! whose path crosses a switch of the packet region runs packet by
//! packet, end to end, with its congestion control, PFC and losses; every
//! other transfer runs as a fluid (`engine::fluid`). The region is the
//! switches the scenario names, or, by default, those where queues would
//! build: the switches with a port that a flow-level run of the same
//! scenario saturates with transfers from two or more NICs or from one
//! faster than the port (`hot_switches`).
//!
//! Where packets and fluids cross one link they share it, sync by sync
//! (every `SYNC`): the fluids' capacity there is what the packets left
//! over the last sync, and at least the share of it their number gives
//! them beside the packet QPs through it; the packets serialize at the
//! link's rate less what the fluids send through it (`Egress::
//! set_packet_rate`). A link only fluids or only packets cross keeps its
//! whole rate for them.

use super::{Event, Simulation};
use crate::scenario::{Fidelity, FlowCc, PacketRegion, Prepared};
use crate::topology::{FlowId, Owner, PortId, QpId};
use crate::units::{Rate, SimTime};

/// How often links both kinds cross are shared anew.
pub const SYNC: SimTime = SimTime::from_us(10);

/// A hybrid run's state beside the fluid network.
pub(super) struct Hybrid {
    /// Per switch: in the packet region.
    region: Vec<bool>,
    /// Per port: QPs of packet transfers through it still sending.
    packet_qps: Vec<u32>,
    /// Packet transfers still sending, with the ports of their QPs.
    live: rustc_hash::FxHashMap<FlowId, Vec<PortId>>,
    /// Ports any packet transfer crossed (`in_touched` marks them), and
    /// the packet bytes each had sent at the last sync.
    touched: Vec<PortId>,
    in_touched: Vec<bool>,
    last_bytes: Vec<u64>,
    /// Ports both kinds cross, as of the last sync (`is_shared` marks
    /// them): their packets leave at what the fluids leave them.
    shared: Vec<PortId>,
    is_shared: Vec<bool>,
    last_sync: SimTime,
    /// When the next sync is due (`SimTime::MAX`: none).
    next: SimTime,
    /// Transfers run as packets and as fluids (`perf.json`).
    pub packet_flows: u64,
    pub fluid_flows: u64,
}

impl Hybrid {
    pub(super) fn new(region: Vec<bool>, ports: usize) -> Hybrid {
        Hybrid {
            region,
            packet_qps: vec![0; ports],
            live: Default::default(),
            touched: Vec::new(),
            in_touched: vec![false; ports],
            last_bytes: vec![0; ports],
            shared: Vec::new(),
            is_shared: vec![false; ports],
            last_sync: SimTime::ZERO,
            next: SimTime::MAX,
            packet_flows: 0,
            fluid_flows: 0,
        }
    }

    /// The switches of the packet region, by id.
    pub(super) fn region(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.region.len()).filter(|&s| self.region[s])
    }
}

/// The packet region of a hybrid run, one flag per switch: the switches
/// the scenario names, or those a flow-level run of it finds hot.
pub(super) fn region(prepared: &Prepared) -> Vec<bool> {
    let switches = prepared.topology.switches.len();
    match &prepared.scenario.packet_region {
        PacketRegion::Switches(ids) => {
            let mut region = vec![false; switches];
            for s in ids {
                region[s.idx()] = true;
            }
            region
        }
        PacketRegion::Auto => hot_switches(prepared),
    }
}

/// The switches with a port that a flow-level run (fair shares) of the
/// scenario saturates where packets would queue (`Fluid::watch`).
fn hot_switches(prepared: &Prepared) -> Vec<bool> {
    let mut flow = prepared.clone();
    flow.scenario.fidelity = Fidelity::Flow;
    flow.scenario.flow_cc = FlowCc::FairShare;
    flow.scenario.report.sample_interval = None;
    let topo = &prepared.topology;
    let switch_port = topo
        .ports
        .iter()
        .map(|p| matches!(p.owner, Owner::Switch(_)))
        .collect();
    let line = topo
        .nics
        .iter()
        .map(|n| {
            let bps = n.ports.iter().map(|&p| topo.port(p).rate.bps()).max();
            bps.unwrap_or(0) as f64 / 8e12
        })
        .collect();
    let mut sim = Simulation::new(flow);
    sim.fluid
        .as_mut()
        .expect("a flow-level run")
        .watch(switch_port, line);
    sim.run(|_| {});
    let mut region = vec![false; topo.switches.len()];
    for p in sim.fluid.as_ref().expect("a flow-level run").hot_ports() {
        if let Owner::Switch(s) = topo.port(p).owner {
            region[s.idx()] = true;
        }
    }
    region
}

impl Simulation {
    /// In a hybrid run, whether transfer `f` crosses the packet region:
    /// if so its QPs are counted on their ports and it goes as packets.
    pub(super) fn hybrid_packets(&mut self, f: FlowId) -> bool {
        if self.hybrid.is_none() {
            return false;
        }
        let fl = self.flow_mut(f);
        let (first, n, dst) = (fl.first_qp, fl.n_qps, fl.spec.dst_nic);
        let mut ports = Vec::new();
        for q in first..first + n {
            ports.extend(self.qp_split(QpId(q), dst).into_iter().map(|(p, _)| p));
        }
        let hy = self.hybrid.as_deref().expect("a hybrid run");
        let crosses = ports.iter().any(|&p| match self.topo.port(p).owner {
            Owner::Switch(s) => hy.region[s.idx()],
            Owner::Nic(_) => false,
        });
        let hy = self.hybrid.as_deref_mut().expect("a hybrid run");
        if !crosses {
            hy.fluid_flows += 1;
            return false;
        }
        hy.packet_flows += 1;
        for &p in &ports {
            hy.packet_qps[p.idx()] += 1;
            if !hy.in_touched[p.idx()] {
                hy.in_touched[p.idx()] = true;
                hy.touched.push(p);
                hy.last_bytes[p.idx()] = self.egress.packet_tx_bytes(p);
            }
        }
        hy.live.insert(f, ports);
        if hy.next == SimTime::MAX {
            hy.last_sync = self.now;
            hy.next = self.now + SYNC;
            self.queue.push(hy.next, Event::HybridSync);
        }
        true
    }

    /// Packet transfer `f` has sent its last packet: its QPs leave its
    /// ports (the next sync gives the fluids their room).
    pub(super) fn hybrid_sent(&mut self, f: FlowId) {
        if let Some(hy) = self.hybrid.as_deref_mut() {
            for p in hy.live.remove(&f).unwrap_or_default() {
                hy.packet_qps[p.idx()] -= 1;
            }
        }
    }

    /// A sync: on each port packets crossed, the fluids' capacity is what
    /// packets left since the last sync, and at least their share by
    /// number.
    pub(super) fn hybrid_sync(&mut self) {
        let now = self.now;
        let mut hy = self.hybrid.take().expect("a hybrid run");
        if hy.next != now {
            self.hybrid = Some(hy);
            return;
        }
        let span = (now.0 - hy.last_sync.0).max(1) as f64;
        hy.last_sync = now;
        let fluid = self.fluid.as_deref_mut().expect("a hybrid run");
        let before = std::mem::take(&mut hy.shared);
        for &p in &before {
            hy.is_shared[p.idx()] = false;
        }
        for &p in &hy.touched {
            if self.egress.is_down(p) {
                continue; // its fluids have nothing (`fluid_links`)
            }
            let bytes = self.egress.packet_tx_bytes(p);
            let sent = (bytes - hy.last_bytes[p.idx()]) as f64;
            hy.last_bytes[p.idx()] = bytes;
            let link = self.egress.line_rate(p).bps() as f64 / 8e12;
            let (n_fluid, _) = fluid.load_at(p.0);
            let n_packet = hy.packet_qps[p.idx()];
            let cap = if n_packet == 0 || n_fluid == 0 {
                link
            } else {
                hy.shared.push(p);
                hy.is_shared[p.idx()] = true;
                let by_number = link * n_fluid as f64 / (n_fluid as f64 + f64::from(n_packet));
                (link - sent / span).max(by_number)
            };
            fluid.set_cap(p.0, cap);
        }
        // Ports no longer shared: packets have the whole link again.
        for &p in &before {
            if !hy.is_shared[p.idx()] {
                self.egress.set_packet_rate(p, self.egress.line_rate(p));
            }
        }
        hy.next = if hy.live.is_empty() && hy.shared.is_empty() {
            SimTime::MAX
        } else {
            now + SYNC
        };
        if hy.next != SimTime::MAX {
            self.queue.push(hy.next, Event::HybridSync);
        }
        self.hybrid = Some(hy);
        self.hybrid_packet_rates();
        self.fluid_share_later();
    }

    /// Packets leave each port both kinds cross at the link's rate less
    /// what the fluids send there now.
    pub(super) fn hybrid_packet_rates(&mut self) {
        let Some(hy) = self.hybrid.as_deref() else {
            return;
        };
        let fluid = self.fluid.as_deref().expect("a hybrid run");
        for &p in &hy.shared {
            let link = self.egress.line_rate(p).bps() as f64;
            let (_, load) = fluid.load_at(p.0);
            // Packets keep at least a hundredth of the link.
            let left = (link - load * 8e12).max(link / 100.0);
            self.egress.set_packet_rate(p, Rate(left as u64));
        }
    }
}
