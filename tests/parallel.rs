//! A run cut into partitions on threads writes the files one thread
//! writes, byte for byte: packet captures, limits, stalls, deadlocks,
//! pause storms, jobs and traces made as the run goes. Every example and
//! benchmark through the thread matrix is `tests/parallel_matrix.rs`.

mod common;

use common::{threaded_outputs, threaded_outputs_of};
use fabricsim::engine::parallel;
use fabricsim::engine::Limits;
use fabricsim::engine::Simulation;
use fabricsim::report::Summary;
use std::path::Path;

/// Runs `path` on `threads` threads under `limits`.
fn run_limited(path: &str, threads: u32, limits: &Limits) -> (Simulation, Summary) {
    let text = std::fs::read_to_string(path).unwrap();
    let sets = vec![format!("simulation.threads={threads}")];
    let prepared = fabricsim::scenario::prepare(path, &text, &sets).unwrap();
    let source = Some(prepared.clone());
    let sim = Simulation::new(prepared);
    let (sim, stop) = parallel::run_on_threads(sim, source, limits, &mut |_| {});
    let summary = Summary::of(&sim, stop);
    (sim, summary)
}

/// The event limit is looked at between windows: the run stops within
/// one window of it, partial, its results written as far as it got.
#[test]
fn the_event_limit_stops_a_cut_run_within_a_window() {
    let limits = Limits {
        max_events: Some(50_000),
        ..Limits::default()
    };
    let (sim, s) = run_limited("examples/fat-tree.toml", 2, &limits);
    assert_eq!(sim.parallel().unwrap().partitions, 2);
    assert_eq!(s.stop_reason, "max_events reached");
    assert!(s.partial);
    let events = sim.counters().events;
    assert!((50_000..60_000).contains(&events), "{events} events");
    sim.check_conservation().unwrap();
}

/// An interruption (Ctrl-C) raised before the run stops it at once,
/// partial.
#[test]
fn an_interruption_stops_every_partition() {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let limits = Limits {
        interrupt: Some(flag),
        ..Limits::default()
    };
    let (sim, s) = run_limited("examples/fat-tree.toml", 3, &limits);
    assert_eq!(sim.parallel().unwrap().partitions, 3);
    assert!(s.partial);
    assert_eq!(s.flows_completed, 0);
    assert!(sim.counters().events < 20_000);
}

/// A PFC deadlock whose cycle crosses every cut is found from the
/// partitions' stuck queues, at the time one queue finds it.
#[test]
fn a_deadlock_across_the_cut_is_found() {
    let (one, a) = run_limited("examples/lossless/pfc-deadlock.toml", 1, &Limits::default());
    let (three, b) = run_limited("examples/lossless/pfc-deadlock.toml", 3, &Limits::default());
    assert_eq!(three.parallel().unwrap().partitions, 3);
    assert!(
        a.stop_reason.starts_with("PFC deadlock"),
        "{}",
        a.stop_reason
    );
    assert_eq!(a.deadlock_cycle.len(), 6);
    assert_eq!(a.deadlock_cycle, b.deadlock_cycle);
    assert_eq!(one.now(), three.now());
}

/// A NIC pause storm (handled by the partition of the NIC's host) and the
/// PFC watchdog that breaks it give the same files on any thread count.
#[test]
fn a_pause_storm_and_its_watchdog_are_the_same_cut() {
    let text = r#"
[topology]
kind = "fat-tree"
k = 4
link_speed = "100G"
link_delay = "500ns"

[transport]
rto = "200us"

[pfc.watchdog]
interval = "100us"
action = "drop"
recovery = "1ms"

[[pfc.storm]]
gpu = 0
start = "5us"
stop = "2ms"

[[workload]]
kind = "incast"
dst = 0
srcs = [5, 9, 13]
bytes = "1MB"
"#;
    let path = Path::new("storm.toml");
    let (one, _) = threaded_outputs_of(path, text, 1, &[], &Limits::default());
    let summary: serde_json::Value = serde_json::from_slice(&one["summary.json"]).unwrap();
    assert_eq!(summary["complete"], true);
    assert!(summary["watchdog_events"].as_u64().unwrap() > 0);
    for threads in [2, 3] {
        let (many, perf) = threaded_outputs_of(path, text, threads, &[], &Limits::default());
        assert_eq!(perf.partitions, threads);
        for (name, bytes) in &one {
            assert!(many.get(name) == Some(bytes), "{name} at {threads} threads");
        }
    }
}

/// A capture on a run cut into partitions holds the frames one thread
/// writes, in its order, with its link numbering and limit: the pcapng
/// files are the same bytes.
#[test]
fn captures_are_the_same_file_at_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    for example in [
        "examples/fat-tree.toml",
        "examples/load-balancing/glb.toml",
        "examples/multipath/mrc.toml",
        // HPCC's INT records cross the cut with their frames.
        "examples/congestion/incast-hpcc.toml",
    ] {
        let mut first: Option<Vec<u8>> = None;
        for (threads, bytes) in [("1", false), ("2", false), ("3", false), ("2", true)] {
            let out = dir.path().join(format!("{threads}{bytes}"));
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_fabricsim"));
            cmd.args([
                "run",
                example,
                "--capture",
                "all",
                "--capture-limit",
                "30000",
                "--no-plots",
                "--no-html",
                "-q",
                "--threads",
                threads,
                "--out",
            ])
            .arg(&out);
            if bytes {
                cmd.arg("--encode-partitions");
            }
            let o = cmd.output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let perf: serde_json::Value =
                serde_json::from_slice(&std::fs::read(out.join("perf.json")).unwrap()).unwrap();
            assert_eq!(perf["partitions"].to_string(), threads, "{example}");
            let pcap = std::fs::read(out.join("capture.pcapng")).unwrap();
            assert!(pcap.len() > 1_000_000, "{example}: {} bytes", pcap.len());
            match &first {
                None => first = Some(pcap),
                Some(one) => assert!(*one == pcap, "{example} at {threads} threads"),
            }
        }
    }
}

/// A transfer whose only link is dead: every partition sees the run
/// stall at the simulated time one thread does.
#[test]
fn a_stall_is_found_at_the_same_time_cut() {
    let sets = [
        "failure=[{link=[\"host0/nic0\", \"rail-sw\"], at=\"0us\"}]",
        "transport.rto=\"20us\"",
    ];
    let path = Path::new("examples/single-rail.toml");
    let (one, _) = threaded_outputs(path, 1, &sets);
    let (two, perf) = threaded_outputs(path, 2, &sets);
    assert_eq!(perf.partitions, 2);
    let s: serde_json::Value = serde_json::from_slice(&two["summary.json"]).unwrap();
    assert!(s["stop_reason"].as_str().unwrap().starts_with("stalled"));
    assert!(one == two, "files differ");
}

/// The projection in BENCHMARKS.md for the 32,768-GPU benchmark assumes
/// its fabric cuts into 16, 64 and 256 equal partitions with the links'
/// 1 us of lookahead: by pods, by leaf groups, and at 256 by hosts and
/// single switches (almost every link then crosses a cut).
#[test]
fn the_largest_benchmark_cuts_evenly_into_hundreds_of_partitions() {
    let path = "examples/bench/rail-multipod-32768gpu-allreduce.toml";
    let text = std::fs::read_to_string(path).unwrap();
    let sets = ["workload.0.bytes=\"1MB\"".to_string()];
    let p = fabricsim::scenario::prepare(path, &text, &sets).unwrap();
    for (parts, cut) in [(16, 30_720), (64, 64_512), (256, 98_048)] {
        let c = fabricsim::topology::partition::partition(&p.topology, parts);
        assert_eq!(c.load.len(), parts as usize);
        assert_eq!(c.imbalance(), 1.0, "{}", c.describe());
        assert_eq!(c.cut_links, cut, "{}", c.describe());
        assert_eq!(c.lookahead, Some(fabricsim::units::SimTime::from_ns(1000)));
    }
}

/// A job too long to make before the run (here 12 iterations of the
/// 1,024-GPU job: more than the 8,388,608 tasks the task graph may hold)
/// runs on several threads as on one: each partition makes the job's
/// iterations as it goes (until this was so, such a job ran on one
/// thread), and the ones the run did not reach are made after the merge
/// for the outputs to list.
#[test]
fn a_job_too_long_to_make_up_front_runs_cut_into_partitions() {
    let path = Path::new("examples/training/gpt-1b-1024gpu.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let sets = [
        "workload.0.iterations=12",
        "simulation.max_sim_time=\"100us\"",
    ];
    let with =
        |more: &[&str]| -> Vec<String> { sets.iter().chain(more).map(|s| s.to_string()).collect() };
    let refused = fabricsim::scenario::prepare(
        "gpt.toml",
        &text,
        &with(&[
            "simulation.threads=2",
            "simulation.job_iterations=\"up-front\"",
        ]),
    )
    .err()
    .expect("up front, the job is past the limit");
    assert!(refused.to_string().contains("8388608 tasks"), "{refused}");
    // One thread makes all 11 later iterations, for the outputs to list,
    // though their tasks are numbered past 8,388,608: the limit is on
    // the tasks a part holds (7 were made, and the rest left out of the
    // outputs without a word, when it was on the numbers).
    let (one, perf) = threaded_outputs(path, 1, &sets);
    assert_eq!(perf.iterations_made, Some(11));
    let (two, perf) = threaded_outputs(path, 2, &sets);
    assert_eq!(perf.partitions, 2, "{:?}", perf.one_partition_because);
    assert_eq!(perf.iterations_made, Some(11));
    assert!(one == two, "files differ");
}
/// Jobs' iterations are made as the run reaches them on threads too:
/// each partition makes an iteration when a task it runs needs it, or
/// when another partition says it made it (at the window's end, before
/// that partition's frames). Cut at times spread over the runs of two
/// training scenarios (so that some stop just after an iteration was
/// made in one partition and not yet in the others), the files are
/// those of one thread. Were a partition to miss an iteration, its tasks
/// would never run and the files would differ.
#[test]
fn jobs_made_as_they_run_on_threads_match_one_thread_wherever_the_run_stops() {
    let mut failures = Vec::new();
    for (file, end_us) in [
        ("examples/collectives/training-two-tenants.toml", 3_500),
        ("examples/collectives/training-with-background.toml", 5_700),
    ] {
        let path = Path::new(file);
        for k in 1..=12u64 {
            let cut = format!(
                "simulation.max_sim_time=\"{}ns\"",
                end_us * 1000 * k / 12 + 37 * k
            );
            let sets = [cut.as_str()];
            let (one, perf) = threaded_outputs(path, 1, &sets);
            assert!(perf.iterations_made.is_some_and(|n| n > 0));
            for threads in [2, 8] {
                let (many, perf) = threaded_outputs(path, threads, &sets);
                assert!(
                    perf.partitions > 1,
                    "{file}: {:?}",
                    perf.one_partition_because
                );
                for (name, bytes) in &one {
                    if many.get(name) != Some(bytes) {
                        failures.push(format!("{file} to {cut} at {threads} threads: {name}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A partition forgets a job's iteration once it is over in every
/// partition, as one thread does once it is over (partition 0 first takes
/// the others' shares of it and works out what the outputs need): with
/// 40 iterations of the second tenant's job, the run on 2 threads forgets
/// all but the last and holds no more at once than one thread, and writes
/// the same files. Without it, every partition held every iteration to
/// the end.
#[test]
fn partitions_forget_iterations_once_over_everywhere() {
    let path = Path::new("examples/collectives/training-two-tenants.toml");
    let sets = ["workload.1.iterations=40"];
    let (one, one_perf) = threaded_outputs(path, 1, &sets);
    let (two, perf) = threaded_outputs(path, 2, &sets);
    assert_eq!(perf.partitions, 2, "{:?}", perf.one_partition_because);
    assert_eq!(perf.iterations_made, Some(41));
    assert!(
        perf.iterations_forgotten.is_some_and(|n| n >= 40),
        "{perf:?}"
    );
    assert_eq!(
        perf.iterations_held_at_most,
        one_perf.iterations_held_at_most
    );
    assert!(one == two, "files differ");
}

/// The sender of a pass message another partition receives forgets the
/// message's task once it has every acknowledgement (the task is done
/// where the message arrives): a run's partitions end holding none, and
/// memory does not grow with the messages a run sends.
#[test]
fn a_partition_forgets_the_pass_messages_it_sent_elsewhere() {
    let path = "examples/collectives/ring-allreduce.toml";
    let text = std::fs::read_to_string(path).unwrap();
    let sets = vec!["simulation.threads=2".to_string()];
    let prepared = fabricsim::scenario::prepare(path, &text, &sets).unwrap();
    let source = Some(prepared.clone());
    let sim = Simulation::new(prepared);
    let (sim, stop) = parallel::run_on_threads(sim, source, &Limits::default(), &mut |_| {});
    assert_eq!(stop, fabricsim::engine::StopReason::Finished);
    let perf = fabricsim::report::Perf::of(&sim, 1.0);
    assert_eq!(perf.partitions, 2);
    // Partition 0's state, merged: none of its messages' tasks is left.
    assert_eq!(sim.tasks().pass_tasks_held(), 0);
}
