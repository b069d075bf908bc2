//! `fabricsim bench`: runs each benchmark scenario in its own process (so
//! that peak memory is the scenario's own) and tabulates the speed figures
//! from its `perf.json` and `summary.json`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The benchmark scenarios, as shipped in `examples/bench/`.
pub const BENCHMARKS: &[(&str, &str)] = &[
    (
        "fat-tree-k8-permutation",
        include_str!("../examples/bench/fat-tree-k8-permutation.toml"),
    ),
    (
        "fat-tree-k16-permutation",
        include_str!("../examples/bench/fat-tree-k16-permutation.toml"),
    ),
];

pub fn run(only: Option<&str>, out: &Path) -> Result<(), String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the fabricsim binary: {e}"))?;
    println!(
        "{:<28} {:>7} {:>11} {:>11} {:>8} {:>10} {:>10} {:>12} {:>9}",
        "benchmark",
        "hosts",
        "events",
        "link tx",
        "wall s",
        "Mevents/s",
        "Mlinktx/s",
        "wall s/sim ms",
        "peak MB"
    );
    for (name, text) in BENCHMARKS {
        if only.is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let dir = out.join(name);
        // The scenario goes to the child on standard input, so that only
        // the child's report writes files.
        let mut child = Command::new(&exe)
            .args(["run", "-", "--quiet", "--out"])
            .arg(&dir)
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        child
            .stdin
            .take()
            .expect("stdin is piped")
            .write_all(text.as_bytes())
            .map_err(|e| format!("benchmark {name}: {e}"))?;
        let status = child.wait().map_err(|e| format!("benchmark {name}: {e}"))?;
        if !status.success() {
            return Err(format!("benchmark {name} failed ({status})"));
        }
        let read = |f: &str| -> Result<serde_json::Value, String> {
            let p = dir.join(f);
            let s = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            serde_json::from_str(&s).map_err(|e| format!("{}: {e}", p.display()))
        };
        let perf = read("perf.json")?;
        let summary = read("summary.json")?;
        let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(0.0);
        let hosts = text
            .lines()
            .find_map(|l| l.strip_prefix("# hosts:"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        println!(
            "{:<28} {:>7} {:>11} {:>11} {:>8.2} {:>10.2} {:>10.2} {:>12.3} {:>9.0}",
            name,
            hosts,
            f(&summary, "events"),
            f(&summary, "link_transmissions"),
            f(&perf, "wall_seconds"),
            f(&perf, "events_per_second") / 1e6,
            f(&perf, "link_transmissions_per_second") / 1e6,
            f(&perf, "wall_seconds_per_sim_ms"),
            f(&perf, "peak_rss_bytes") / 1e6
        );
    }
    Ok(())
}
