//! The job runtime: what the jobs do with the network the engine runs.
//!
//! It runs the task graph (`tasks`: tasks released as their predecessors
//! are done, one task at a time per lane, NVLink copies moved as a fluid
//! by `crate::nvlink`), jobs' iterations made as the run reaches them
//! (`later`), the messages of collectives' passes made as the passes go
//! (`passes`) and, at flow level, ring passes run as steady streams
//! (`streams`); it keeps every transfer's state (`flow`) and what each
//! would take alone on an idle fabric (`ideal`).
//!
//! It knows the engine only as a `Kernel`: the clock, a timer (`Due`),
//! the network's read-only facts (topology, routes, QPs), a way to start a
//! transfer, the flow-level network, the counters it adds to and, in a
//! partition of a parallel run, how the fabric is cut. The engine calls it
//! when a timer it set is due (`Runtime::due`) and when a transfer's
//! packets have all left, arrived or been acknowledged (`flow_sent`,
//! `qp_received`, `qp_acked`). A transfer the runtime starts is started
//! by the engine once the runtime's call has returned (`Kernel::start`),
//! so that the network never calls back into a runtime call in progress.

pub mod flow;
pub mod homes;
pub mod ideal;
pub mod later;
pub mod merge;
pub mod pass_rows;
pub mod passes;
pub mod serving;
mod streams;
pub mod tasks;

pub use flow::FlowState;

use crate::fluid::Fluid;
use crate::nic::nics::QpState;
use crate::scenario::Scenario;
use crate::topology::routing::Routes;
use crate::topology::{FlowId, NicId, PortId, QpId, Topology};
use crate::units::SimTime;
use homes::Home;

/// What the jobs keep: the transfers, the task graph (with NVLink copies
/// and the parts made as the run reaches them), collectives' pass
/// messages and, at flow level, ring passes as streams.
#[derive(Default)]
pub struct Runtime {
    pub flows: Vec<FlowState>,
    /// Pass messages in flight and their connections' rows.
    pub passes: pass_rows::PassFlows,
    /// The task graph of collectives and jobs, and NVLink copies.
    pub tasks: tasks::TaskState,
    /// Transfers of jobs' later iterations, and their bytes (counted in
    /// what the run offers before they are made).
    pub later_flows: (usize, u64),
    /// At flow level, ring passes run as steady streams.
    pub streams: streams::Streams,
    /// Ideal completion times of single-QP transfers by size and by their
    /// hops' rates and delays (see `Kernel::ideal_and_work`).
    pub ideal_cache: ideal::IdealCache,
    /// Serving workloads, if the run has any.
    pub serving: Option<Box<serving::ServingState>>,
}

/// A timer the runtime sets; the engine hands it back to `Runtime::due`
/// when its time comes, ordered among simultaneous events by its kind and
/// number as the engine's own events are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// A task of the graph may start (its time has come).
    TaskReady(u32),
    /// A task's time (compute, NVLink latency) is over.
    TaskDone(u32),
    /// A connection's message is on the wire: its next one may start.
    LaneFree(u32),
    /// An NVLink copy in this host may be done (host, generation), or
    /// (generation `nvlink::RESHARE`) the copies that started in it at
    /// this instant are all in and its rates are shared anew.
    Nvlink(u32, u32),
    /// Pass messages' NVLink copies in this host may have landed.
    Landed(u32),
    /// Flow level: ring pass `p`'s stream starts sending, or its last
    /// position has all its bytes (`streams`).
    Stream(u32),
    /// A serving workload's arrival, prefill layer or decode step
    /// (`serving`: the kind in the low two bits).
    Serve(u32),
}

/// What the runtime adds to the run's counters.
#[derive(Clone, Copy, Debug)]
pub enum Count {
    /// Payload bytes delivered in order.
    Delivered(u64),
    /// Transfers whose receiver has every byte, and whose sender has
    /// every acknowledgement.
    Completed(u64),
    Acked(u64),
    /// Events a run with every iteration made before it would have
    /// handled.
    Events(u64),
    /// Transfers this partition sends whose acknowledgement ends the run.
    ToFinish(u64),
}

/// How a parallel run cut the fabric, as a partition's runtime sees it.
pub struct Cut<'a> {
    /// This partition.
    pub me: u32,
    /// Each host's partition, and each port's.
    pub host_part: &'a [u32],
    pub port_part: &'a [u32],
    /// Where each task of the graph made before the run runs.
    pub homes: &'a [Home],
}

/// What the runtime asks of the engine.
pub trait Kernel {
    fn now(&self) -> SimTime;
    /// Hands `due` back to the runtime at `t`.
    fn at(&mut self, t: SimTime, due: Due);
    /// Starts transfer `f` (once the runtime's call has returned).
    fn start(&mut self, f: FlowId);
    fn topo(&self) -> &Topology;
    fn scenario(&self) -> &Scenario;
    fn routes(&self) -> &Routes;
    fn qp(&self, q: QpId) -> &QpState;
    /// Picoseconds a byte takes over a GPU's PCIe link, where it can bind.
    fn pcie_ps_per_byte(&self) -> Option<f64>;
    /// The ports QP `q`'s packets to `dst` take (its first path).
    fn route_of(&self, q: QpId, dst: NicId) -> Vec<PortId>;
    /// The ports QP `q`'s packets to `dst` cross, with the share of its
    /// bytes each carries.
    fn qp_split(&self, q: QpId, dst: NicId) -> Vec<(PortId, f64)>;
    /// Transfer `fl` (number `f`) alone on an idle fabric: its completion
    /// time, and the link transmissions it takes.
    fn ideal_and_work(
        &self,
        fl: &FlowState,
        f: u32,
        cache: &mut ideal::IdealCache,
    ) -> (SimTime, u64);
    /// The flow-level network (a `fidelity = "flow"` run only).
    fn fluid(&mut self) -> &mut Fluid;
    /// Rates are shared anew once this instant's other events are handled.
    fn fluid_share_later(&mut self);
    fn count(&mut self, c: Count);
    /// In a partition of a parallel run: how the fabric is cut.
    fn cut(&self) -> Option<Cut<'_>>;
    /// In a partition: job `j`'s iterations up to `upto` were made here at
    /// `at`; the other partitions make them too.
    fn made(&mut self, j: u32, upto: u32, at: SimTime);
}

/// A task, pass or transfer, by number.
#[derive(Clone, Copy)]
pub enum Loc {
    Task(u32),
    Pass(u32),
    Flow(u32),
}

impl Runtime {
    /// A timer the runtime set is due.
    pub fn due(&mut self, k: &mut dyn Kernel, due: Due) {
        match due {
            Due::TaskReady(t) => self.task_ready(k, t),
            Due::TaskDone(t) => self.task_done(k, t),
            Due::LaneFree(l) => self.lane_free(k, l),
            Due::Nvlink(h, gen) => self.nvlink_event(k, h, gen),
            Due::Landed(h) => self.landed(k, h),
            Due::Stream(p) => self.stream_event(k, p),
            Due::Serve(code) => self.serve_due(k, code),
        }
    }
}
