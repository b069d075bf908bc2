//! The hybrid fidelity (`simulation.fidelity = "hybrid"`): a transfer
//! whose path crosses a switch of the packet region runs packet by
//! packet, end to end, with its congestion control, PFC and losses; every
//! other transfer runs as a fluid (`engine::fluid`). The region is the
//! switches the scenario names, or, by default, those where queues would
//! build: the switches with a port that a flow-level run of the same
//! scenario saturates with transfers from two or more NICs or from one
//! faster than the port (`hot_switches`). Links both cross are shared
//! every `SYNC` as `fluid::boundary` says; packets serialize at what the
//! fluids leave them (`Egress::set_packet_rate`).

use super::{Event, Simulation};
use crate::fluid::boundary::Boundary;
use crate::scenario::{Fidelity, FlowCc, PacketRegion, Prepared};
use crate::topology::{FlowId, Owner, QpId};
use crate::units::{Rate, SimTime};

/// How often links both kinds cross are shared anew.
pub const SYNC: SimTime = SimTime::from_us(10);

/// A hybrid run's state beside the fluid network.
pub(super) struct Hybrid {
    /// Per switch: in the packet region.
    region: Vec<bool>,
    pub boundary: Boundary,
    /// When the next sync is due (`SimTime::MAX`: none).
    next: SimTime,
}

impl Hybrid {
    pub(super) fn new(region: Vec<bool>, ports: usize) -> Hybrid {
        Hybrid {
            region,
            boundary: Boundary::new(ports),
            next: SimTime::MAX,
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
        let hy = self.hybrid.as_deref_mut().expect("a hybrid run");
        let crosses = ports.iter().any(|&p| match self.topo.port(p).owner {
            Owner::Switch(s) => hy.region[s.idx()],
            Owner::Nic(_) => false,
        });
        if !crosses {
            hy.boundary.fluid_flows += 1;
            return false;
        }
        let egress = &self.egress;
        let bytes = |p| egress.packet_tx_bytes(p);
        if hy.boundary.packets(self.now, f, ports, bytes) && hy.next == SimTime::MAX {
            hy.next = self.now + SYNC;
            self.queue.push(hy.next, Event::HybridSync);
        }
        true
    }

    /// Packet transfer `f` has sent its last packet.
    pub(super) fn hybrid_sent(&mut self, f: FlowId) {
        if let Some(hy) = self.hybrid.as_deref_mut() {
            hy.boundary.sent(f);
        }
    }

    /// A sync: the fluids' capacity anew on every port packets crossed,
    /// and the packets' rates on those both cross.
    pub(super) fn hybrid_sync(&mut self) {
        let now = self.now;
        let hy = self.hybrid.as_deref_mut().expect("a hybrid run");
        if hy.next != now {
            return;
        }
        let fluid = self.fluid.as_deref_mut().expect("a hybrid run");
        let egress = &self.egress;
        let (freed, more) = hy.boundary.sync(
            now,
            fluid,
            |p| (!egress.is_down(p)).then(|| egress.packet_tx_bytes(p)),
            |p| egress.line_rate(p).bps() as f64 / 8e12,
        );
        for p in freed {
            self.egress.set_packet_rate(p, self.egress.line_rate(p));
        }
        hy.next = if more { now + SYNC } else { SimTime::MAX };
        if more {
            self.queue.push(hy.next, Event::HybridSync);
        }
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
        let egress = &self.egress;
        let line = |p| egress.line_rate(p).bps() as f64;
        let rates: Vec<_> = hy.boundary.packet_rates(fluid, line).collect();
        for (p, bps) in rates {
            self.egress.set_packet_rate(p, Rate(bps as u64));
        }
    }
}
