//! Training jobs made iteration by iteration as the run reaches them
//! (`simulation.job_iterations = "as-they-run"`, the default) write the
//! files that making every iteration before the run writes, byte for
//! byte, and hold only the iterations under way.

use fabricsim::engine::Simulation;
use fabricsim::report::{self, Perf, Summary};
use std::collections::BTreeMap;
use std::path::Path;

/// Every file a run of `path` writes (`perf.json` apart), by name, and
/// the simulation.
fn outputs(path: &str, sets: &[&str]) -> (BTreeMap<String, Vec<u8>>, Simulation) {
    let text = std::fs::read_to_string(path).unwrap();
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let prepared =
        fabricsim::scenario::prepare(path, &text, &sets).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Simulation::new(prepared);
    let stop = sim.run(|_| {});
    let summary = Summary::of(&sim, stop);
    let perf = Perf::of(&sim, 1.0);
    let dir = tempfile::tempdir().unwrap();
    report::write_outputs(dir.path(), &sim, &summary, &perf).unwrap();
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name != "perf.json" {
            files.insert(name, std::fs::read(Path::new(&p)).unwrap());
        }
    }
    (files, sim)
}

/// Runs `path` both ways; panics naming every file that differs.
fn same_both_ways(path: &str, sets: &[&str]) -> Simulation {
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

#[test]
fn jobs_made_as_they_run_write_what_jobs_made_up_front_write() {
    // At flow level, three iterations of the training examples (the
    // expert-parallel one and the 1,024-GPU one are slow at flow level;
    // tests/parallel.rs runs every example both ways at packet level, to
    // its time limit, at one thread and at several).
    for path in [
        "examples/training/dense-8b-tp8-dp8.toml",
        "examples/training/pipeline-13b-pp4.toml",
        "examples/collectives/training-with-background.toml",
    ] {
        let sim = same_both_ways(
            path,
            &["simulation.fidelity=\"flow\"", "workload.0.iterations=3"],
        );
        // Not a test of nothing: iterations were made as the run went.
        assert!(sim.tasks().later_made() >= 2, "{path}");
    }
    // At packet level: two jobs writing checkpoints every two
    // iterations (iterations of two kinds, the connections to storage
    // opened by the second), and a job cut short by the time limit.
    let sim = same_both_ways("examples/collectives/training-two-tenants.toml", &[]);
    assert!(sim.tasks().later_made() >= 2);
    same_both_ways(
        "examples/training/dense-8b-tp8-dp8.toml",
        &["workload.0.iterations=3", "simulation.max_sim_time=\"3ms\""],
    );
}

/// A job of many iterations holds two at a time, whatever the count:
/// the one finishing and the one starting (an iteration is made when a
/// rank ends the one before), and forgets each once it is over.
#[test]
fn a_long_job_holds_two_iterations_at_a_time() {
    let (_, many) = outputs(
        "examples/training/dense-8b-tp8-dp8.toml",
        &["simulation.fidelity=\"flow\"", "workload.0.iterations=12"],
    );
    let perf = |sets: &[&str]| {
        let text = std::fs::read_to_string("examples/training/dense-8b-tp8-dp8.toml").unwrap();
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let p = fabricsim::scenario::prepare("dense.toml", &text, &sets).unwrap();
        let mut sim = Simulation::new(p);
        let stop = sim.run(|_| {});
        assert_eq!(Summary::of(&sim, stop).stop_reason, "finished");
        Perf::of(&sim, 1.0)
    };
    let p = perf(&["simulation.fidelity=\"flow\"", "workload.0.iterations=12"]);
    assert_eq!(p.iterations_made, Some(11));
    assert_eq!(p.iterations_forgotten, Some(11));
    assert!(p.iterations_held_at_most.unwrap() <= 2, "{p:?}");
    // The job's report still has every iteration.
    let s = Summary::of(&many, fabricsim::engine::StopReason::Finished);
    assert_eq!(s.jobs[0].iteration_ps.len(), 12);
    assert_eq!(s.jobs[0].steps.len(), 12);
    assert_eq!(
        s.collectives.iter().filter(|c| c.time_ps.is_some()).count(),
        s.collectives.len()
    );
    // Made up front, nothing is made as the run goes.
    let p = perf(&[
        "simulation.fidelity=\"flow\"",
        "workload.0.iterations=12",
        "simulation.job_iterations=\"up-front\"",
    ]);
    assert_eq!(p.iterations_made, None);
}

/// `job_iterations` takes "as-they-run" or "up-front" and nothing else.
#[test]
fn job_iterations_is_checked() {
    let text = std::fs::read_to_string("examples/training/dense-8b-tp8-dp8.toml").unwrap();
    let sets = vec!["simulation.job_iterations=\"lazy\"".to_string()];
    let e = match fabricsim::scenario::prepare("dense.toml", &text, &sets) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("simulation.job_iterations") && e.contains("\"lazy\"") && e.contains("up-front"),
        "{e}"
    );
}
