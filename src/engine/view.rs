//! The simulation as its readers see it: the report, the sweep, the bench
//! and the tests read the engine's state through these, never its fields.

use super::*;

impl Simulation {
    /// Switch `s`'s balancer with its routing table, for driving a
    /// balancer by hand (tests of hashing and member failure).
    pub fn balancer_mut(
        &mut self,
        s: usize,
    ) -> (
        &mut crate::switch::balance::Balancer,
        &crate::topology::routing::SwitchRoutes,
    ) {
        (&mut self.switches[s].balancer, &self.routes.switches[s])
    }

    pub fn now(&self) -> SimTime {
        self.now
    }

    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    pub fn topo(&self) -> &Topology {
        &self.topo
    }

    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    pub fn ports(&self) -> &Vec<PortState> {
        &self.ports
    }

    pub fn queues(&self) -> &Vec<EgressQueues> {
        &self.queues
    }

    pub fn port_drops(&self) -> &Vec<PortDrops> {
        &self.port_drops
    }

    pub fn switches(&self) -> &Vec<SwitchState> {
        &self.switches
    }

    pub fn pfc(&self) -> &Vec<PfcPrio> {
        &self.pfc
    }

    pub fn pfc_slot(&self) -> [u8; QUEUES] {
        self.pfc_slot
    }

    pub fn pfc_slots(&self) -> usize {
        self.pfc_slots
    }

    pub fn balance(&self) -> &balance::BalanceState {
        &self.balance
    }

    pub fn qp_tenant(&self) -> &Vec<u16> {
        &self.qp_tenant
    }

    pub fn paths(&self) -> &paths::PathLog {
        &self.paths
    }

    pub fn failures(&self) -> &failures::FailureState {
        &self.failures
    }

    pub fn reorder(&self) -> &Vec<ReorderPool> {
        &self.reorder
    }

    pub fn series(&self) -> &series::Series {
        &self.series
    }

    pub fn packets(&self) -> &PacketArena {
        &self.packets
    }

    pub fn qps(&self) -> &Vec<QpState> {
        &self.qps
    }

    pub fn flows(&self) -> &Vec<FlowState> {
        &self.flows
    }

    pub fn tasks(&self) -> &tasks::TaskState {
        &self.tasks
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    pub fn estimate(&self) -> &Estimate {
        &self.estimate
    }

    pub fn deadlock(&self) -> &Vec<deadlock::Waiting> {
        &self.deadlock
    }

    pub fn firsts(&self) -> &FirstEvents {
        &self.firsts
    }
}
