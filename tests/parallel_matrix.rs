//! Every example and benchmark scenario, cut into partitions on threads,
//! writes the files one thread writes, byte for byte: at 2 threads
//! against 1, and a quarter of them (chosen by the commit) at 3 and 8 and
//! through the bytes MPI ranks send. Scenarios whose mechanisms are not
//! yet partitioned run on one thread and say why; the list of them is
//! pinned here, so that one falling back unnoticed fails. Apart from
//! `tests/parallel.rs` so that each binary stays within CI's per-binary
//! time.

mod common;

use common::{scenarios, threaded_outputs, threaded_outputs_of};
use fabricsim::engine::Limits;

/// Scenarios that run on one thread whatever is asked, and why (the
/// start of the reason `parallel::plan` gives): serving, whose scheduler
/// picks groups from the whole fabric's load. Training jobs,
/// checkpoints included, are cut like any collective.
const SERVING: &str = "a serving workload picks";
const ONE_THREAD: &[(&str, &str)] = &[
    ("llama70b-disaggregated", SERVING),
    ("beside-training", SERVING),
    ("moe-beside-training", SERVING),
    ("deepep-low-latency", SERVING),
];

/// Whether `stem` gets the whole matrix this time (3 and 8 threads, and
/// the bytes MPI ranks send, besides 2 threads): a quarter of the
/// scenarios, chosen by the commit under test so that successive commits
/// cover them all; `FABRICSIM_FULL_MATRIX=1` gives every one the whole
/// matrix. Keeps this binary within CI's per-binary time.
fn whole_matrix(stem: &str) -> bool {
    if std::env::var_os("FABRICSIM_FULL_MATRIX").is_some() {
        return true;
    }
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default();
    // FNV-1a over the commit and the name.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in commit.iter().chain(stem.as_bytes()) {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    h.is_multiple_of(4)
}

#[test]
fn every_example_and_benchmark_writes_the_same_files_at_any_thread_count() {
    let mut failures = Vec::new();
    let mut cut = 0;
    for path in scenarios("examples") {
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        // The flow level runs on one thread (more are refused, as
        // tests/fluid.rs checks).
        if std::fs::read_to_string(&path)
            .unwrap()
            .contains("fidelity = \"flow\"")
        {
            continue;
        }
        // Benchmarks are cut short, as in a smoke run (whose extra sets
        // put the all-reduces' traffic on the network within it).
        let mut sets = Vec::new();
        if path.starts_with("examples/training") {
            sets.push("simulation.max_sim_time=\"2ms\"");
        }
        if path.starts_with("examples/bench") {
            sets.push("simulation.max_sim_time=\"20us\"");
            let b = fabricsim::bench::BENCHMARKS.iter().find(|b| b.name == stem);
            sets.extend(b.expect("every benchmark is listed").smoke);
        }
        let sets = &sets[..];
        let (one, _) = threaded_outputs(&path, 1, sets);
        // 2 again: the partitions' results handed over as the bytes MPI
        // ranks send (`Fragment::encode`), as `run --mpi` does.
        let through_bytes = Limits {
            encode_partitions: true,
            ..Limits::default()
        };
        let matrix = [
            (2, Limits::default()),
            (3, Limits::default()),
            (8, Limits::default()),
            (2, through_bytes),
        ];
        let whole = whole_matrix(&stem);
        if whole {
            eprintln!("{stem}: the whole matrix");
        }
        for (threads, limits) in matrix.into_iter().take(if whole { 4 } else { 1 }) {
            let text = std::fs::read_to_string(&path).unwrap();
            let (many, perf) = threaded_outputs_of(&path, &text, threads, sets, &limits);
            let expected_one = ONE_THREAD.iter().find(|(s, _)| *s == stem);
            match (perf.partitions, expected_one, &perf.one_partition_because) {
                (1, Some((_, why)), Some(because)) if because.starts_with(why) => {}
                (1, _, because) => failures.push(format!(
                    "{stem}: ran on one thread of {threads}: {because:?}"
                )),
                (_, Some(_), _) => failures.push(format!(
                    "{stem}: now runs on {} partitions: take it off ONE_THREAD",
                    perf.partitions
                )),
                _ => cut += 1,
            }
            if many.keys().ne(one.keys()) {
                failures.push(format!("{stem} at {threads} threads: other files"));
            }
            for (name, bytes) in &one {
                if many.get(name) != Some(bytes) {
                    failures.push(format!("{stem} at {threads} threads: {name} differs"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Not a test of nothing: most scenarios were really cut.
    assert!(cut >= 40, "only {cut} runs were cut into partitions");
}
