//! Helpers shared by the integration tests: run a scenario given as text
//! and look at what came out.
#![allow(dead_code)]

use fabricsim::engine::Simulation;
use fabricsim::report::Summary;
use fabricsim::scenario;
use fabricsim::units::SimTime;

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

/// A scenario text made ready to run, not yet run.
pub fn prepare(text: &str, sets: &[&str]) -> Simulation {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Simulation::new(scenario::prepare("test.toml", text, &sets).unwrap_or_else(|e| panic!("{e}")))
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

/// Runs `sim` through `window`; each QP's payload delivered in it, in
/// Gb/s.
pub fn goodput_over(sim: &mut Simulation, window: (SimTime, SimTime)) -> Vec<f64> {
    sim.run_until(window.0, u64::MAX);
    let before: Vec<u64> = sim.qps().iter().map(|q| q.resp.delivered_bytes).collect();
    sim.run_until(window.1, u64::MAX);
    let secs = (window.1 - window.0).0 as f64 / 1e12;
    sim.qps()
        .iter()
        .zip(&before)
        .map(|(q, b)| (q.resp.delivered_bytes - b) as f64 * 8.0 / secs / 1e9)
        .collect()
}

/// Jain's fairness index of `x`.
pub fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    sum * sum / (x.len() as f64 * x.iter().map(|v| v * v).sum::<f64>())
}

/// The samples of one time series of the run's first column whose name
/// starts with `column` (a link or queue, as in the `ts_*.csv` files),
/// for the intervals that start inside `window` (picoseconds, ends
/// excluded).
pub fn series_of(
    sim: &Simulation,
    kind: fabricsim::report::series::Kind,
    column: &str,
    window: (u64, u64),
) -> Vec<f64> {
    let mut out = Vec::new();
    fabricsim::report::series::csv(sim, kind, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let mut rows = text.lines();
    let head: Vec<&str> = rows.next().unwrap().split(',').collect();
    let col = head
        .iter()
        .position(|h| h.starts_with(column))
        .unwrap_or_else(|| panic!("no series {column} in {head:?}"));
    rows.map(|r| r.split(',').collect::<Vec<_>>())
        .filter(|r| {
            let t: f64 = r[0].parse().unwrap();
            t * 1e6 > window.0 as f64 && t * 1e6 < window.1 as f64
        })
        .map(|r| r[col].parse().unwrap_or(0.0))
        .collect()
}

/// Every scenario under `dir` (the sweep folder apart), sorted.
pub fn scenarios(dir: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "sweep") {
                out.extend(scenarios(&p.to_string_lossy()));
            }
        } else if p.extension().is_some_and(|e| e == "toml") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Every file a run of `path` writes (`perf.json` apart), by name, and
/// the simulation.
pub fn outputs(
    path: &str,
    sets: &[&str],
) -> (std::collections::BTreeMap<String, Vec<u8>>, Simulation) {
    let text = std::fs::read_to_string(path).unwrap();
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let prepared =
        fabricsim::scenario::prepare(path, &text, &sets).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Simulation::new(prepared);
    let stop = sim.run(|_| {});
    (written_files(&sim, stop).0, sim)
}

/// Every file the outputs of `sim`, stopped for `stop`, are (`perf.json`,
/// wall-clock figures, apart), by name, and its perf.
pub fn written_files(
    sim: &Simulation,
    stop: fabricsim::engine::StopReason,
) -> (
    std::collections::BTreeMap<String, Vec<u8>>,
    fabricsim::report::Perf,
) {
    let summary = Summary::of(sim, stop);
    let perf = fabricsim::report::Perf::of(sim, 1.0);
    let dir = tempfile::tempdir().unwrap();
    fabricsim::report::write_outputs(dir.path(), sim, &summary, &perf).unwrap();
    let mut files = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name != "perf.json" {
            files.insert(name, std::fs::read(&p).unwrap());
        }
    }
    (files, perf)
}

/// Runs `path` with its jobs' iterations and traces' parts made as the
/// run reaches them and made before it; panics naming every file that
/// differs.
pub fn same_both_ways(path: &str, sets: &[&str]) -> Simulation {
    let mut up_front = sets.to_vec();
    up_front.push("simulation.job_iterations=\"up-front\"");
    let (one, _) = outputs(path, &up_front);
    let (other, sim) = outputs(path, sets);
    assert_eq!(
        one.keys().collect::<Vec<_>>(),
        other.keys().collect::<Vec<_>>()
    );
    let differ: Vec<&String> = one.keys().filter(|k| one[*k] != other[*k]).collect();
    assert!(differ.is_empty(), "{path} {sets:?}: {differ:?} differ");
    sim
}

/// Runs `path` cut over `threads` threads (`simulation.threads`): the
/// files it writes (as `written_files`), its perf, and the merged
/// simulation.
pub fn on_threads(
    path: &str,
    threads: u32,
    sets: &[&str],
) -> (
    std::collections::BTreeMap<String, Vec<u8>>,
    fabricsim::report::Perf,
    Simulation,
) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    sets.push(format!("simulation.threads={threads}"));
    let prepared =
        fabricsim::scenario::prepare(path, &text, &sets).unwrap_or_else(|e| panic!("{e}"));
    let source = Some(prepared.clone());
    let sim = Simulation::new(prepared);
    let limits = fabricsim::engine::Limits::default();
    let (sim, stop) =
        fabricsim::engine::parallel::run_on_threads(sim, source, &limits, &mut |_| {});
    let (files, perf) = written_files(&sim, stop);
    (files, perf, sim)
}

/// Runs `path` on one thread and cut over each of `threads`; panics
/// naming every file that differs, or a run not cut into partitions.
/// Returns the runs cut.
pub fn same_on_threads(path: &str, threads: &[u32], sets: &[&str]) -> Vec<Simulation> {
    let (one, _) = outputs(path, sets);
    threads
        .iter()
        .map(|&n| {
            let (many, perf, sim) = on_threads(path, n, sets);
            assert!(
                perf.partitions > 1,
                "{path} {sets:?} at {n} threads ran on one: {:?}",
                perf.one_partition_because
            );
            assert_eq!(
                one.keys().collect::<Vec<_>>(),
                many.keys().collect::<Vec<_>>()
            );
            let differ: Vec<&String> = one.keys().filter(|k| one[*k] != many[*k]).collect();
            assert!(
                differ.is_empty(),
                "{path} {sets:?} at {n} threads: {differ:?} differ"
            );
            sim
        })
        .collect()
}

/// Runs `path` on `threads` threads; every file it writes, by name
/// (`perf.json`, wall-clock figures, apart), and its perf.
pub fn threaded_outputs(
    path: &std::path::Path,
    threads: u32,
    sets: &[&str],
) -> (
    std::collections::BTreeMap<String, Vec<u8>>,
    fabricsim::report::Perf,
) {
    let text = std::fs::read_to_string(path).unwrap();
    threaded_outputs_of(
        path,
        &text,
        threads,
        sets,
        &fabricsim::engine::Limits::default(),
    )
}

pub fn threaded_outputs_of(
    path: &std::path::Path,
    text: &str,
    threads: u32,
    sets: &[&str],
    limits: &fabricsim::engine::Limits,
) -> (
    std::collections::BTreeMap<String, Vec<u8>>,
    fabricsim::report::Perf,
) {
    let mut sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    sets.push(format!("simulation.threads={threads}"));
    let prepared = fabricsim::scenario::prepare(&path.to_string_lossy(), text, &sets)
        .unwrap_or_else(|e| panic!("{e}"));
    let source = Some(prepared.clone());
    let sim = Simulation::new(prepared);
    let (sim, stop) = fabricsim::engine::parallel::run_on_threads(sim, source, limits, &mut |_| {});
    sim.check_conservation()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    written_files(&sim, stop)
}
