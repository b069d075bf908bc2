//! Helpers shared by the integration tests: run a scenario given as text
//! and look at what came out.
#![allow(dead_code)]

use fabricsim::engine::Simulation;
use fabricsim::report::Summary;
use fabricsim::scenario;

/// Runs a scenario text to the end; panics with the scenario error.
pub fn run(text: &str) -> (Simulation, Summary) {
    run_with(text, &[])
}

pub fn run_with(text: &str, sets: &[&str]) -> (Simulation, Summary) {
    run_named("test.toml", text, sets)
}

/// Runs a scenario file (files it names are found relative to it).
pub fn run_file(path: &std::path::Path, sets: &[&str]) -> (Simulation, Summary) {
    let text = std::fs::read_to_string(path).unwrap();
    run_named(&path.to_string_lossy(), &text, sets)
}

pub fn run_named(name: &str, text: &str, sets: &[&str]) -> (Simulation, Summary) {
    let (sim, summary) = run_to_stop(name, text, sets);
    assert_eq!(summary.stop_reason, "finished");
    (sim, summary)
}

/// Runs a scenario until it stops, for whatever reason.
pub fn run_to_stop(name: &str, text: &str, sets: &[&str]) -> (Simulation, Summary) {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let prepared = scenario::prepare(name, text, &sets).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Simulation::new(prepared);
    let stop = sim.run(|_| {});
    let summary = Summary::of(&sim, stop);
    (sim, summary)
}

/// A scenario file run until it stops.
pub fn run_file_to_stop(path: &std::path::Path, sets: &[&str]) -> (Simulation, Summary) {
    let text = std::fs::read_to_string(path).unwrap();
    run_to_stop(&path.to_string_lossy(), &text, sets)
}

/// The error message a scenario text produces.
pub fn error_of(text: &str, sets: &[&str]) -> String {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    match scenario::prepare("bad.toml", text, &sets) {
        Ok(_) => panic!("scenario was accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// Completion time of flow `i`, in picoseconds.
pub fn fct(sim: &Simulation, i: usize) -> u64 {
    let f = &sim.flows()[i];
    (f.finish.expect("flow finished") - f.start).0
}

/// The run's flows.csv as text.
pub fn flows_csv(sim: &Simulation) -> String {
    let mut out = Vec::new();
    fabricsim::report::tables::flows_csv(sim, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}
