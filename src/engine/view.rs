//! The simulation as its readers see it: the report, the sweep, the bench
//! and the tests read the engine's state through these, never its fields.

use super::*;
use crate::runtime::later::RecordKind as Kind;
use crate::switch::classify::QUEUES;
use crate::switch::pfc::PfcPrio;
use crate::switch::port::{PortDrops, PortState};
use crate::switch::schedule::EgressQueues;

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
        (
            &mut self.egress.switch_mut(s).balancer,
            &self.routes.switches[s],
        )
    }

    /// Long stretches in which nothing of the model happened.
    pub fn idle_gaps(&self) -> &super::IdleGaps {
        &self.records.idle
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

    /// Every port's egress and the switches: queues, PFC, buffers.
    pub fn egress(&self) -> &Egress {
        &self.egress
    }

    pub fn ports(&self) -> &[PortState] {
        self.egress.ports()
    }

    pub fn queues(&self) -> &[EgressQueues] {
        self.egress.queues()
    }

    pub fn port_drops(&self) -> &[PortDrops] {
        self.egress.drops()
    }

    pub fn switches(&self) -> &[SwitchState] {
        self.egress.switches()
    }

    pub fn pfc(&self) -> &[PfcPrio] {
        self.egress.pfc()
    }

    pub fn pfc_slot(&self) -> [u8; QUEUES] {
        self.egress.pfc_slot()
    }

    pub fn pfc_slots(&self) -> usize {
        self.egress.pfc_slots()
    }

    /// Time PFC slot `i`'s transmitter has spent paused so far.
    pub fn paused_ps(&self, i: usize) -> u64 {
        self.egress.paused_ps(i, self.now)
    }

    pub fn balance(&self) -> &balance::BalanceState {
        &self.balance
    }

    pub fn qp_tenant(&self) -> &[u16] {
        self.nics.tenants()
    }

    pub fn paths(&self) -> &paths::PathLog {
        &self.records.paths
    }

    pub fn failures(&self) -> &failures::FailureState {
        &self.failures
    }

    pub fn reorder(&self) -> &[ReorderPool] {
        self.nics.reorder()
    }

    pub fn series(&self) -> &series::Series {
        &self.records.series
    }

    pub fn packets(&self) -> &PacketArena {
        &self.packets
    }

    pub fn qps(&self) -> &[QpState] {
        self.nics.qps()
    }

    /// Every NIC's QPs, rings, reorder buffers and counters.
    pub fn nics(&self) -> &Nics {
        &self.nics
    }

    /// The transfers made up front (a pass's messages are not: see
    /// `pass_flows`).
    pub fn flows(&self) -> &Vec<FlowState> {
        &self.jobs().flows
    }

    /// Every transfer in number order: those made before the run, then
    /// those of jobs' later iterations made so far (a pass's messages are
    /// not: see `every_pass_row`).
    pub fn every_flow(&self) -> impl Iterator<Item = std::borrow::Cow<'_, FlowState>> {
        let later = self.later_records(Kind::Flow).filter_map(|r| match r {
            crate::runtime::later::Record::Flow(f) => Some(std::borrow::Cow::Owned(f)),
            _ => None,
        });
        self.jobs()
            .flows
            .iter()
            .map(std::borrow::Cow::Borrowed)
            .chain(later)
    }

    /// Network messages per workload: its transfers and its pass
    /// connections' messages (those of jobs' forgotten iterations counted
    /// as they were written out, not read back).
    pub fn messages_per_workload(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.scenario.workloads.len()];
        for r in self.jobs().passes.rows.iter().filter(|r| r.qps > 0) {
            if let Some(m) = out.get_mut(r.workload as usize) {
                *m += r.planned;
            }
        }
        for f in &self.jobs().flows {
            if let Some(m) = out.get_mut(f.spec.workload as usize) {
                *m += 1;
            }
        }
        if let Some(l) = &self.jobs().tasks.later {
            l.count_messages(&mut out);
        }
        out
    }

    /// Every pass connection's row, in pass order: those of passes made
    /// before the run, then those of jobs' later iterations.
    pub fn every_pass_row(
        &self,
    ) -> impl Iterator<Item = std::borrow::Cow<'_, crate::runtime::pass_rows::ConnRow>> {
        let later = self.later_records(Kind::Row).filter_map(|r| match r {
            crate::runtime::later::Record::Row(r) => Some(std::borrow::Cow::Owned(r)),
            _ => None,
        });
        let rows = self.jobs().passes.rows.iter();
        rows.map(std::borrow::Cow::Borrowed).chain(later)
    }

    /// The NVLink copies of jobs' later iterations, in number order.
    pub fn later_copies(&self) -> impl Iterator<Item = crate::runtime::later::CopyRow> + '_ {
        self.later_records(Kind::Copy).filter_map(|r| match r {
            crate::runtime::later::Record::Copy(c) => Some(c),
            _ => None,
        })
    }

    /// What the outputs list of jobs' later iterations (`later`), of one
    /// kind.
    fn later_records(
        &self,
        kind: crate::runtime::later::RecordKind,
    ) -> impl Iterator<Item = crate::runtime::later::Record> + '_ {
        self.jobs()
            .tasks
            .later
            .iter()
            .flat_map(move |l| l.records(kind))
    }

    /// Whether link `l` went down at some time of the run.
    pub fn link_failed(&self, l: crate::topology::LinkId) -> bool {
        self.failures.was_down(l)
    }

    /// Jobs' iterations and traces' parts made as the run went, forgotten
    /// once over, and the most held at once; `None` if every one was made
    /// before the run.
    pub fn later_counts(&self) -> Option<(u64, u64, u64)> {
        let l = self.jobs().tasks.later.as_ref()?;
        Some((l.made, l.retired, l.most_held))
    }

    /// Why a job's later iteration or a trace's later part could not be
    /// made, if one could not (the run stops there, as stalled).
    pub fn later_failed(&self) -> Option<&str> {
        self.jobs().tasks.later.as_ref()?.failed.as_deref()
    }

    /// Whether rows of jobs' later iterations were lost on the way to
    /// the outputs (a temporary file that could not be written or read).
    pub fn later_rows_lost(&self) -> bool {
        self.jobs()
            .tasks
            .later
            .as_ref()
            .is_some_and(|l| l.records_lost())
    }

    /// Collective passes' messages: their connections' rows and totals.
    pub fn pass_flows(&self) -> &crate::runtime::pass_rows::PassFlows {
        &self.jobs().passes
    }

    /// Transfers in all: those made up front and the passes' writes.
    pub fn flows_total(&self) -> u64 {
        (self.jobs().flows.len() + self.jobs().later_flows.0) as u64
            + self.jobs().passes.net_messages
    }

    /// Bytes the run's transfers and passes offer, those of jobs'
    /// iterations not yet made included.
    pub fn bytes_offered(&self) -> u64 {
        self.jobs().flows.iter().map(|f| f.spec.bytes).sum::<u64>()
            + self.jobs().later_flows.1
            + self.jobs().passes.net_bytes
    }

    pub fn tasks(&self) -> &crate::runtime::tasks::TaskState {
        &self.jobs().tasks
    }

    /// The serving workloads as they ran, if the run has any.
    pub fn serving(&self) -> Option<&crate::runtime::serving::ServingState> {
        self.jobs().serving.as_deref()
    }

    /// At flow level: how often rates were shared anew, and over how
    /// many sub-flows in all (see `fluid`).
    pub fn fluid_shares(&self) -> Option<(u64, u64)> {
        self.fluid.as_ref().map(|f| (f.shares, f.shared_subs))
    }

    /// At flow level: how many shares found their lossless senders
    /// paused (`fluid::pfc`).
    pub fn fluid_pfc_shares(&self) -> Option<u64> {
        self.fluid
            .as_ref()
            .map(|f| f.pfc_solves())
            .filter(|&n| n > 0)
    }

    /// At flow level under DCQCN: how many ticks counted marks.
    pub fn fluid_cc_ticks(&self) -> Option<u64> {
        self.fluid.as_ref().map(|f| f.cc_ticks()).filter(|&n| n > 0)
    }

    /// In a hybrid run: its packet region and how transfers went.
    pub fn hybrid(&self) -> Option<HybridView> {
        self.hybrid.as_deref().map(|h| HybridView {
            region: h
                .region()
                .map(|s| self.topo.switches[s].name.clone())
                .collect(),
            packet_flows: h.boundary.packet_flows,
            fluid_flows: h.boundary.fluid_flows,
        })
    }

    /// At flow level: ring passes run as steady streams (`streams`).
    pub fn fluid_streams(&self) -> u64 {
        self.jobs().streams.started
    }

    /// How the run was spread over threads (after a run on more than
    /// one).
    pub fn parallel(&self) -> Option<&super::parallel::ParallelStats> {
        self.parallel.as_ref()
    }

    /// Where the run stands, for a progress line.
    pub fn progress(&self) -> Progress {
        let c = self.counters();
        Progress {
            now: self.now,
            done: self.done_fraction(),
            events: c.events,
            link_transmissions: c.link_transmissions,
            flows_completed: c.flows_completed,
            flows: self.flows_total(),
        }
    }

    /// The fabric-wide counters, egress's included.
    pub fn counters(&self) -> Counters {
        self.counters
            .with_egress(&self.egress.counters)
            .with_nics(&self.nics.counters)
    }

    pub fn estimate(&self) -> &Estimate {
        &self.records.estimate
    }

    pub fn deadlock(&self) -> &Vec<deadlock::Waiting> {
        &self.records.deadlock
    }

    /// When each congestion mechanism first acted, egress's included.
    pub fn firsts(&self) -> FirstEvents {
        self.records.firsts.with_egress(&self.egress.firsts)
    }

    /// Checks conservation of payload bytes: everything sent has arrived,
    /// been dropped, or is still in flight (queued or on a wire). Returns
    /// a description of the first violation.
    pub fn check_conservation(&self) -> Result<(), String> {
        let c = &self.counters;
        let in_flight: u64 = self
            .packets
            .iter_live()
            .filter(|p| p.opcode.is_data())
            .map(|p| p.payload as u64)
            .sum();
        if c.payload_sent != c.payload_arrived + c.payload_dropped + in_flight {
            return Err(format!(
                "sent {} != arrived {} + dropped {} + in flight {in_flight}",
                c.payload_sent, c.payload_arrived, c.payload_dropped
            ));
        }
        self.egress.check_buffers()
    }
}

/// A hybrid run's packet region (its switches' names) and the transfers
/// that went as packets and as fluids.
#[derive(Clone, Debug)]
pub struct HybridView {
    pub region: Vec<String>,
    pub packet_flows: u64,
    pub fluid_flows: u64,
}
