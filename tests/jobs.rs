//! Training jobs made iteration by iteration as the run reaches them
//! (`simulation.job_iterations = "as-they-run"`, the default) write the
//! files that making every iteration before the run writes, byte for
//! byte, and hold only the iterations under way.

mod common;

use common::{outputs, same_both_ways};
use fabricsim::engine::Simulation;
use fabricsim::report::{Perf, Summary};

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
    // Cut short in its third iteration, the nine it did not reach are
    // made for the outputs and each forgotten at once: the run still
    // holds two at most, and writes what making all of them first does.
    let cut = ["simulation.fidelity=\"flow\"", "workload.0.iterations=12"];
    let mut cut = cut.to_vec();
    let third = s.jobs[0].iteration_ps[..2].iter().sum::<u64>() + s.jobs[0].iteration_ps[2] / 2;
    let limit = format!("simulation.max_sim_time=\"{}ps\"", third);
    cut.push(&limit);
    same_both_ways("examples/training/dense-8b-tp8-dp8.toml", &cut);
    let text = std::fs::read_to_string("examples/training/dense-8b-tp8-dp8.toml").unwrap();
    let sets: Vec<String> = cut.iter().map(|s| s.to_string()).collect();
    let mut sim =
        Simulation::new(fabricsim::scenario::prepare("dense.toml", &text, &sets).unwrap());
    let stop = sim.run(|_| {});
    assert!(matches!(stop, fabricsim::engine::StopReason::SimTimeLimit));
    let (made, forgotten, most) = sim.later_counts().unwrap();
    assert_eq!((made, forgotten), (11, 11));
    assert!(most <= 2, "{most} held at once");
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
