//! fabricsim: a packet-level simulator of the Ethernet backend fabrics
//! that connect GPUs in AI training clusters.
//!
//! See ARCHITECTURE.md for the map. In short: `scenario` reads and checks
//! a TOML scenario; `topology` builds the fabric and its routes;
//! `workload` expands traffic into transfers; `engine` runs the
//! discrete-event loop over `switch` pipelines and `nic` transports, with
//! packets from `wire`; `report` writes the results.

pub mod bench;
pub mod cache;
pub mod config;
pub mod console;
pub mod engine;
pub mod fluid;
pub mod fuzz;
pub mod input;
pub mod keys;
pub mod nic;
pub mod nvlink;
pub mod output;
pub mod plan;
pub mod report;
pub mod rng;
pub mod runtime;
pub mod scenario;
pub mod sweep;
pub mod switch;
pub mod topology;
pub mod units;
pub mod wire;
pub mod workload;

use engine::{Simulation, StopReason};
use scenario::{Prepared, ScenarioError};

/// Loads a scenario from text and runs it to the end; for tests and tools.
pub fn run_text(
    file: &str,
    text: &str,
    sets: &[String],
) -> Result<(Simulation, StopReason), ScenarioError> {
    let prepared: Prepared = scenario::prepare(file, text, sets)?;
    let mut sim = Simulation::new(prepared);
    let stop = sim.run(|_| {});
    Ok((sim, stop))
}
