//! Limits on a run and interruption: each stops the run cleanly and the
//! results so far are written whole and marked partial; a run that would
//! not fit in memory is refused before it starts.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn fabricsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fabricsim"))
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fabricsim-limits-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn run(args: &[&str], out: &Path) -> Output {
    fabricsim()
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// The k = 16 benchmark with ten times the bytes: tens of seconds, far
/// longer than any of these tests waits.
const LONG: [&str; 5] = [
    "examples/bench/fat-tree-k16-permutation.toml",
    "--set",
    "workload.0.bytes=20000000",
    "--no-plots",
    "--no-html",
];

#[test]
fn the_event_limit_is_exact_and_the_results_are_partial() {
    let out = temp("events");
    let o = run(&["--max-events", "1000", "-q"], &out);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = summary(&out);
    assert_eq!(s["events"], 1000);
    assert_eq!(s["partial"], true);
    assert_eq!(s["complete"], false);
    assert_eq!(s["stop_reason"], "max_events reached");
    // Every output is written, as for a whole run.
    for f in ["flows.csv", "links.csv", "perf.json", "ts_link_util.csv"] {
        assert!(out.join(f).is_file(), "{f}");
    }
}

#[test]
fn the_simulated_time_limit_marks_the_text_summary_too() {
    let out = temp("simtime");
    let o = run(&["--max-sim-time", "10us"], &out);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains("PARTIAL: stopped early (max_sim_time reached); the figures cover the first 10.000 us only"),
        "{stdout}"
    );
    let s = summary(&out);
    assert_eq!(s["partial"], true);
    assert!(s["sim_time_ps"].as_u64().unwrap() <= 10_000_000);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<strong>Partial results</strong>"));
    // A whole run is not partial.
    let out = temp("whole");
    let o = run(&["examples/lossless/incast.toml", "-q", "--no-plots"], &out);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(summary(&out)["partial"], false);
}

#[test]
fn the_wall_clock_limit_stops_a_long_run() {
    let out = temp("wall");
    let start = Instant::now();
    let mut args = LONG.to_vec();
    args.extend(["--max-wall", "300ms", "-q"]);
    let o = run(&args, &out);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(start.elapsed() < Duration::from_secs(60));
    let s = summary(&out);
    assert_eq!(s["stop_reason"], "max_wall reached");
    assert_eq!(s["partial"], true);
    assert!(s["flows_completed"].as_u64().unwrap() < 1024);
}

#[test]
fn a_run_that_would_not_fit_in_memory_is_refused_with_its_estimate() {
    let out = temp("memory");
    let o = run(&["--max-memory", "1MB"], &out);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    for want in [
        "the run needs an estimated",
        "MB for the scenario as loaded",
        "MB for the simulation's state",
        "packets alive at once at 72 B each",
        "more than 1 MB (the --max-memory limit); nothing was built or run",
    ] {
        assert!(e.contains(want), "{want} not in {e}");
    }
    assert!(!out.exists(), "nothing may be written");
    // On threads, each holding the whole simulation: fewer is the first
    // way out.
    let o = run(&["--max-memory", "1MB", "--threads", "2"], &out);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    for want in [
        "on 2 threads, each holding the whole simulation",
        "Try fewer threads, a smaller fabric",
    ] {
        assert!(e.contains(want), "{want} not in {e}");
    }
    assert!(!out.exists(), "nothing may be written");
}

#[test]
fn limits_that_make_no_sense_are_refused() {
    let out = temp("bad");
    for (args, want) in [
        (
            &["--max-wall", "5 parsecs"][..],
            "--max-wall: got \"5 parsecs\", expected a duration",
        ),
        (&["--max-wall", "0s"][..], "--max-wall: got \"0s\""),
        (
            &["--max-memory", "lots"][..],
            "--max-memory: got \"lots\", expected a size",
        ),
        (&["--max-sim-time", "soon"][..], "simulation.max_sim_time"),
    ] {
        let o = run(args, &out);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            text(&o.stderr).contains(want),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
    assert!(!out.exists());
}

fn start_long(out: &Path) -> Child {
    start(&LONG, out)
}

/// `run ARGS --out OUT` started, its output piped.
fn start(args: &[&str], out: &Path) -> Child {
    fabricsim()
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Waits until the run has built its fabric and is simulating: its
/// handlers are in place long before, as they are set first.
fn settle() {
    std::thread::sleep(Duration::from_millis(1500));
}

#[test]
fn ctrl_c_stops_the_run_and_writes_the_results_so_far() {
    let out = temp("sigint");
    let child = start_long(&out);
    settle();
    signal(&child, "INT");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    let e = text(&o.stderr);
    assert!(e.contains("interrupted at"), "{e}");
    assert!(
        e.contains("writing the results so far, marked partial"),
        "{e}"
    );
    let s = summary(&out);
    assert_eq!(s["stop_reason"], "interrupted");
    assert_eq!(s["partial"], true);
    assert!(text(&o.stdout).contains("PARTIAL: stopped early (interrupted)"));
    assert!(out.join("flows.csv").is_file());
    // Nothing staged is left behind.
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| !n.starts_with('.') || n == ".fabricsim-outputs"),
        "{names:?}"
    );
}

#[test]
fn sigterm_does_the_same() {
    let out = temp("sigterm");
    let child = start_long(&out);
    settle();
    signal(&child, "TERM");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    assert_eq!(summary(&out)["stop_reason"], "interrupted");
}

#[test]
fn a_second_ctrl_c_quits_at_once() {
    let out = temp("sigint2");
    let child = start_long(&out);
    settle();
    signal(&child, "INT");
    // Apart, so that the two are not merged into one pending signal.
    std::thread::sleep(Duration::from_millis(20));
    signal(&child, "INT");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    // Whatever was written is whole: every JSON file there parses.
    if let Ok(entries) = std::fs::read_dir(&out) {
        for e in entries {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "json") {
                let t = std::fs::read_to_string(&p).unwrap();
                serde_json::from_str::<serde_json::Value>(&t)
                    .unwrap_or_else(|err| panic!("{}: {err}", p.display()));
            }
        }
    }
}

/// Ctrl-C on `fabricsim run ... 2>&1 | tee log` after `tee` died: both
/// pipes are closed when the run is told to stop. It must still write
/// every result and exit with 130, not panic on the dead pipe.
#[test]
fn ctrl_c_with_closed_pipes_still_writes_the_results() {
    let out = temp("sigint-closed");
    let mut child = start_long(&out);
    drop(child.stdout.take());
    drop(child.stderr.take());
    settle();
    signal(&child, "INT");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let s = summary(&out);
    assert_eq!(s["stop_reason"], "interrupted");
    assert!(out.join("flows.csv").is_file());
}

/// Printing to a full disk or into a closed pipe never panics: a full
/// disk is an error with its own status (74) and a message; a reader
/// that stops early is a normal end of printing.
#[test]
fn printing_into_a_full_disk_or_a_closed_pipe_does_not_panic() {
    if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        let o = fabricsim()
            .args(["validate", "examples/fat-tree.toml"])
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(74), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains("cannot write to standard output"));
    }
    let mut child = fabricsim()
        .args(["topo", "examples/multi-pod.toml", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("panicked"));
}

/// `compare` takes the same limits and interruption as `run`.
#[test]
fn compare_has_the_limits_of_run() {
    let out = temp("compare");
    let o = fabricsim()
        .args([
            "compare",
            "examples/load-balancing/ecmp.toml",
            "examples/load-balancing/spray.toml",
            "--max-events",
            "500",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("(partial)"), "{}", text(&o.stdout));
    for name in ["ecmp", "spray"] {
        let s = summary(&out.join(name));
        assert_eq!(s["events"], 500);
        assert_eq!(s["stop_reason"], "max_events reached");
    }
    let o = fabricsim()
        .args([
            "compare",
            "examples/load-balancing/ecmp.toml",
            "examples/load-balancing/spray.toml",
            "--max-memory",
            "1MB",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("the --max-memory limit"));

    // Ctrl-C: the run going on is written, marked partial; exit 130.
    let out = temp("compare-int");
    let child = fabricsim()
        .args([
            "compare",
            LONG[0],
            LONG[0],
            "--set",
            LONG[2],
            "--set",
            "report.plots=false",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    settle();
    signal(&child, "INT");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    let first = out.join("fat-tree-k16-permutation");
    assert_eq!(summary(&first)["stop_reason"], "interrupted");
    assert!(!out.join("fat-tree-k16-permutation-2").exists());
}

/// Memory is checked while running too: a run that grows past
/// `--max-memory` stops between batches with its results so far, marked
/// partial (`max_memory reached`). The reader is the caller's, here one
/// that reports 2 GB from the start.
#[test]
fn a_run_that_grows_past_its_memory_limit_stops_partial() {
    let text = std::fs::read_to_string("examples/lossless/incast.toml").unwrap();
    let p = fabricsim::scenario::prepare("incast.toml", &text, &[]).unwrap();
    let mut sim = fabricsim::engine::Simulation::new(p);
    let limits = fabricsim::engine::Limits {
        max_memory: Some((1 << 30, || 2 << 30)),
        ..Default::default()
    };
    let stop = sim.run_limited(&limits, |_| {});
    assert_eq!(stop, fabricsim::engine::StopReason::MemoryLimit);
    let s = fabricsim::report::Summary::of(&sim, stop);
    assert!(s.partial && !s.complete);
    assert_eq!(s.stop_reason, "max_memory reached");
    // Under the limit the same run finishes.
    let p = fabricsim::scenario::prepare("incast.toml", &text, &[]).unwrap();
    let mut sim = fabricsim::engine::Simulation::new(p);
    let limits = fabricsim::engine::Limits {
        max_memory: Some((1 << 30, || 1 << 20)),
        ..Default::default()
    };
    assert_eq!(
        sim.run_limited(&limits, |_| {}),
        fabricsim::engine::StopReason::Finished
    );
}

/// A model job whose first iteration alone would hold gigabytes of
/// collectives (128 experts on EP 32, 4,096 sequences a step: 128
/// micro-batches of all-to-alls among 32 ranks) is refused once what it
/// made reaches the limit, not after it took the machine's memory.
#[test]
fn a_workload_is_refused_as_it_reaches_the_memory_limit() {
    let out = temp("expand");
    let file = "examples/training/moe-8x7b-ep8.toml";
    let scenario = std::fs::read_to_string(file).unwrap();
    let example: toml::Table = toml::from_str(&scenario).unwrap();
    let args = example["workload"][0]["args"]
        .as_str()
        .unwrap()
        .replace('\n', " ");
    // The last of a flag wins.
    let set = format!(
        "workload.0.args=\"{args} --num-experts 128 --expert-model-parallel-size 32 --global-batch-size 4096\""
    );
    let grown = [file, "--set", &set];
    let o = run(&[&grown[..], &["--max-memory", "300MB"]].concat(), &out);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(
        e.contains("the workload's collectives would hold more than")
            && e.contains("more than the")
            && e.contains("nothing was run"),
        "{e}"
    );
    assert!(!out.exists(), "nothing may be written");
    // The library's own bound: what was made stays under the limit.
    let sets: Vec<String> = grown[1..]
        .iter()
        .skip(1)
        .step_by(2)
        .map(|s| s.to_string())
        .collect();
    let e = fabricsim::scenario::prepare_within(grown[0], &scenario, &sets, Some(200_000_000))
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("more than the"), "{e}");
}

/// The flow level stops on Ctrl-C as the packet level does, with its
/// results so far: its windows hold few events, each costly, and the
/// interruption was looked at only inside a batch of 65,536.
#[test]
fn ctrl_c_stops_a_flow_level_run_too() {
    let out = temp("sigint-flow");
    let child = start(
        &[
            "examples/training/dense-8b-tp8-dp8.toml",
            "--set",
            "workload.0.iterations=400",
            "--fidelity",
            "flow",
            "--no-plots",
            "--no-html",
        ],
        &out,
    );
    settle();
    signal(&child, "INT");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    let s = summary(&out);
    assert_eq!(s["stop_reason"], "interrupted");
    assert_eq!(s["partial"], true);
    // A gigabyte or two of outputs: not left behind.
    let _ = std::fs::remove_dir_all(&out);
}

/// SIGHUP (the terminal went away), SIGQUIT and SIGUSR1 stop the run as
/// SIGTERM does, with the results so far written.
#[test]
fn other_ending_signals_keep_the_results() {
    for sig in ["HUP", "QUIT", "USR1"] {
        let out = temp(&format!("sig{sig}"));
        let child = start_long(&out);
        settle();
        signal(&child, sig);
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(130), "{sig}: {}", text(&o.stderr));
        assert_eq!(summary(&out)["stop_reason"], "interrupted", "{sig}");
    }
}
