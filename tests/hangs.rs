//! Runs that used to hang, wrap their clock or stop without saying so:
//! each test runs the binary with a deadline, so a regression fails the
//! test instead of hanging the suite.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fabricsim-hangs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs `fabricsim ARGS`, killing it after `secs` seconds (a hang fails).
fn within(secs: u64, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fabricsim"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "fabricsim {args:?} still running after {secs} s: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Nothing scheduled for longer than a retransmission timeout (a late
/// start, no sampling): the run goes straight to the next event instead
/// of asking for the same empty window forever.
#[test]
fn a_workload_that_starts_late_runs_and_the_limits_still_fire() {
    let out = temp("late");
    // `fabricsim run examples/fat-tree.toml -q` with these options; its
    // summary.
    let fat_tree = |extra: &[&str]| {
        let mut args = vec!["run", "examples/fat-tree.toml", "-q", "--out"];
        args.push(out.to_str().unwrap());
        args.extend(extra);
        let o = within(60, &args);
        assert!(o.status.success(), "{extra:?}: {}", text(&o.stderr));
        summary(&out)
    };
    let no_series = "report.sample_interval=\"off\"";
    let s = fat_tree(&[
        "--set",
        no_series,
        "--set",
        "workload.0.start=\"2ms\"",
        "--max-sim-time",
        "5ms",
    ]);
    assert_eq!(s["stop_reason"], "finished");
    assert!(s["sim_time_ps"].as_u64().unwrap() > 2_000_000_000);
    // With default sampling and a start 200 ms away.
    let s = fat_tree(&["--set", "workload.0.start=\"200ms\""]);
    assert!(s["makespan_ps"].as_u64().unwrap() > 200_000_000_000);
    // A limit that falls inside the idle gap stops the run there.
    let s = fat_tree(&[
        "--set",
        no_series,
        "--set",
        "workload.0.start=\"200ms\"",
        "--max-sim-time",
        "100ms",
    ]);
    assert_eq!(s["stop_reason"], "max_sim_time reached");
    assert_eq!(s["flows_completed"], 0);
}

/// A transfer whose only link is dead never finishes: after a thousand
/// retransmission timeouts without progress the run stops, marked
/// partial as stalled, exits with status 3, and a sweep would list it as
/// stalled.
#[test]
fn a_stalled_run_is_partial_and_says_why() {
    let out = temp("stalled");
    let o = within(
        120,
        &[
            "run",
            "examples/single-rail.toml",
            "--set",
            "failure=[{link=[\"host0/nic0\", \"rail-sw\"], at=\"0us\"}]",
            "--set",
            "transport.rto=\"20us\"",
            "--no-plots",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let s = summary(&out);
    assert_eq!(s["partial"], true);
    assert!(
        s["stop_reason"].as_str().unwrap().starts_with("stalled"),
        "{}",
        s["stop_reason"]
    );
    assert!(text(&o.stdout).contains("PARTIAL: stopped early (stalled"));
    assert!(text(&o.stderr).contains("the workload could not finish: stalled"));
}

/// Twenty chained kernels of 2^40 us would carry simulated time past
/// 2^64 ps: refused before the run, with the trace named.
#[test]
fn compute_that_would_wrap_the_clock_is_refused() {
    let dir = temp("wrap-trace");
    std::fs::create_dir_all(&dir).unwrap();
    let huge: u64 = 1 << 40;
    for r in 0..2 {
        let nodes: Vec<Vec<u8>> = (1..=20u64)
            .map(|id| comp_node(id, (id > 1).then_some(id - 1), huge))
            .collect();
        write_rank(&dir, r, &nodes);
    }
    let scenario = format!(
        "[topology]\nkind = \"single-rail\"\nhosts = 2\ngpus_per_host = 1\n\n[[workload]]\nkind = \"chakra\"\ntrace = \"{}\"\n",
        dir.display()
    );
    let e = common::error_of(&scenario, &[]);
    assert!(
        e.contains("workload[0].trace") && e.contains("a run can simulate at most"),
        "{e}"
    );
    // Two such kernels in a row are fine and the run ends after them.
    for r in 0..2 {
        let nodes = vec![comp_node(1, None, huge), comp_node(2, Some(1), huge)];
        write_rank(&dir, r, &nodes);
    }
    let (_, s) = common::run_named("x.toml", &scenario, &[]);
    assert_eq!(s.makespan_ps, 2 * huge * 1_000_000);
    // The run goes on for one link delay (500 ns by default) after.
    assert_eq!(s.sim_time_ps, s.makespan_ps + 500_000);
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A Chakra `COMP` node (type 4) with an optional data dependency.
fn comp_node(id: u64, dep: Option<u64>, micros: u64) -> Vec<u8> {
    let mut m = vec![0x08];
    varint(id, &mut m);
    m.extend([0x12, 1, b'n', 0x18, 4]);
    if let Some(d) = dep {
        let mut packed = Vec::new();
        varint(d, &mut packed);
        m.push(0x2a);
        m.push(packed.len() as u8);
        m.extend(packed);
    }
    m.push(0x38);
    varint(micros, &mut m);
    m
}

/// One rank's file: the metadata message, then each node, each
/// length-delimited.
fn write_rank(dir: &Path, rank: usize, nodes: &[Vec<u8>]) {
    let mut out = vec![7, 0x0a, 5, b'0', b'.', b'0', b'.', b'4'];
    for m in nodes {
        varint(m.len() as u64, &mut out);
        out.extend(m);
    }
    std::fs::write(dir.join(format!("t.{rank}.et")), out).unwrap();
}
