//! The engine as the job runtime's `Kernel`: what the runtime may ask of
//! the simulation it runs on, while the simulation lends it out for a call
//! (`Simulation::runtime`).

use super::{Event, FlowState, QpState, Simulation};
use crate::runtime::{Count, Cut, Due, Kernel};
use crate::scenario::Scenario;
use crate::topology::routing::Routes;
use crate::topology::{FlowId, NicId, PortId, QpId, Topology};
use crate::units::SimTime;

/// The engine as the job runtime's kernel (`runtime::Kernel`), over a
/// simulation whose runtime is out for the call.
pub(super) struct Kern<'a> {
    sim: &'a mut Simulation,
    /// Transfers the runtime started, started once its call returns.
    pub(super) starts: Vec<FlowId>,
}

impl<'a> Kern<'a> {
    pub(super) fn new(sim: &'a mut Simulation) -> Self {
        Kern {
            sim,
            starts: Vec::new(),
        }
    }
}

impl Kernel for Kern<'_> {
    fn now(&self) -> SimTime {
        self.sim.now
    }

    fn at(&mut self, t: SimTime, due: Due) {
        self.sim.queue.push(t, Event::from(due));
    }

    fn start(&mut self, f: FlowId) {
        self.starts.push(f);
    }

    fn topo(&self) -> &Topology {
        &self.sim.topo
    }

    fn scenario(&self) -> &Scenario {
        &self.sim.scenario
    }

    fn routes(&self) -> &Routes {
        &self.sim.routes
    }

    fn qp(&self, q: QpId) -> &QpState {
        self.sim.nics.qp(q)
    }

    fn pcie_ps_per_byte(&self) -> Option<f64> {
        self.sim.nics.pcie_ps_per_byte()
    }

    fn route_of(&self, q: QpId, dst: NicId) -> Vec<PortId> {
        self.sim.route_of(q, dst)
    }

    fn qp_split(&self, q: QpId, dst: NicId) -> Vec<(PortId, f64)> {
        self.sim.qp_split(q, dst)
    }

    fn ideal_and_work(
        &self,
        fl: &FlowState,
        f: u32,
        cache: &mut crate::runtime::ideal::IdealCache,
    ) -> (SimTime, u64) {
        self.sim.ideal_and_work(fl, f, cache)
    }

    fn fluid(&mut self) -> &mut crate::fluid::Fluid {
        self.sim.fluid.as_deref_mut().expect("a fluid run")
    }

    fn fluid_share_later(&mut self) {
        self.sim.fluid_share_later()
    }

    fn count(&mut self, c: Count) {
        let n = &mut self.sim.counters;
        match c {
            Count::Delivered(b) => n.bytes_delivered += b,
            Count::Completed(m) => n.flows_completed += m,
            Count::Acked(m) => n.flows_acked += m,
            Count::Events(e) => n.events += e,
            Count::ToFinish(m) => self.sim.ending.finish_total += m,
        }
    }

    fn cut(&self) -> Option<Cut<'_>> {
        self.sim.part.as_deref().map(|p| Cut {
            me: p.me,
            host_part: &p.host_part,
            port_part: &p.port_part,
            homes: &p.homes,
        })
    }

    fn made(&mut self, j: u32, upto: u32, at: SimTime) {
        if let Some(p) = self.sim.part.as_deref_mut() {
            p.made.push((j, upto, at));
        }
    }
}
