//! `fabricsim bench`: runs each benchmark scenario in its own process (so
//! that peak memory is the scenario's own) and tabulates the speed figures
//! from its `perf.json` and `summary.json`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::outln;

/// A benchmark scenario, as shipped in `examples/bench/`.
pub struct Benchmark {
    pub name: &'static str,
    pub text: &'static str,
    /// Extra `--set`s of a smoke run, beyond its time limit.
    pub smoke: &'static [&'static str],
}

pub const BENCHMARKS: &[Benchmark] = &[
    Benchmark {
        name: "fat-tree-k8-permutation",
        text: include_str!("../examples/bench/fat-tree-k8-permutation.toml"),
        smoke: &[],
    },
    Benchmark {
        name: "fat-tree-k16-permutation",
        text: include_str!("../examples/bench/fat-tree-k16-permutation.toml"),
        smoke: &[],
    },
    Benchmark {
        name: "fat-tree-k16-permutation-spray",
        text: include_str!("../examples/bench/fat-tree-k16-permutation-spray.toml"),
        smoke: &[],
    },
    Benchmark {
        name: "fat-tree-k8-alltoall",
        text: include_str!("../examples/bench/fat-tree-k8-alltoall.toml"),
        smoke: &[],
    },
    Benchmark {
        name: "rail-multipod-1024gpu-allreduce",
        text: include_str!("../examples/bench/rail-multipod-1024gpu-allreduce.toml"),
        // The all-reduce begins inside the hosts, over NVLink; a smaller
        // buffer reaches the network within the smoke run.
        smoke: &["workload.0.bytes=\"1MB\""],
    },
    Benchmark {
        name: "fat-tree-k32-permutation",
        text: include_str!("../examples/bench/fat-tree-k32-permutation.toml"),
        smoke: &[],
    },
];

/// How much of each benchmark a smoke run simulates: enough to go
/// through every part of the packet path, in about a second each.
pub const SMOKE_SIM_TIME: &str = "30us";

/// What `fabricsim bench` was asked for.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Only benchmarks whose name contains this.
    pub only: Option<String>,
    /// Simulate only the first `SMOKE_SIM_TIME` of each, to check that
    /// they still run; the figures mean nothing.
    pub smoke: bool,
    /// Print the table as Markdown (as BENCHMARKS.md keeps it).
    pub markdown: bool,
}

pub fn run(opts: &Options, out: &Path) -> Result<(), String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the fabricsim binary: {e}"))?;
    if opts.smoke {
        outln!(
            "smoke run: {SMOKE_SIM_TIME} of simulated time each; the figures are not a benchmark"
        );
    }
    let columns = [
        "benchmark",
        "hosts",
        "events",
        "link tx",
        "wall s",
        "M events/s",
        "M link tx/s",
        "wall s/sim ms",
        "peak MB",
    ];
    if opts.markdown {
        outln!("| {} |", columns.join(" | "));
        outln!("|{}", "---|".repeat(columns.len()));
    } else {
        outln!(
            "{:<32} {:>6} {:>11} {:>11} {:>7} {:>10} {:>11} {:>13} {:>8}",
            columns[0],
            columns[1],
            columns[2],
            columns[3],
            columns[4],
            columns[5],
            columns[6],
            columns[7],
            columns[8]
        );
    }
    let mut ran = 0;
    for b in BENCHMARKS {
        let (name, text) = (b.name, b.text);
        if opts.only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        ran += 1;
        let dir = out.join(name);
        // The scenario goes to the child on standard input, so that only
        // the child's report writes files.
        let mut cmd = Command::new(&exe);
        cmd.args(["run", "-", "--quiet", "--no-plots", "--no-html", "--out"])
            .arg(&dir);
        if opts.smoke {
            cmd.args([
                "--set",
                &format!("simulation.max_sim_time=\"{SMOKE_SIM_TIME}\""),
            ]);
            for set in b.smoke {
                cmd.args(["--set", set]);
            }
        }
        let mut child = cmd
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
        let cells = [
            name.to_string(),
            hosts,
            thousands(f(&summary, "events") as u64),
            thousands(f(&summary, "link_transmissions") as u64),
            format!("{:.2}", f(&perf, "wall_seconds")),
            format!("{:.2}", f(&perf, "events_per_second") / 1e6),
            format!("{:.2}", f(&perf, "link_transmissions_per_second") / 1e6),
            format!("{:.3}", f(&perf, "wall_seconds_per_sim_ms")),
            format!("{:.0}", f(&perf, "peak_rss_bytes") / 1e6),
        ];
        if opts.markdown {
            outln!("| {} |", cells.join(" | "));
        } else {
            outln!(
                "{:<32} {:>6} {:>11} {:>11} {:>7} {:>10} {:>11} {:>13} {:>8}",
                cells[0],
                cells[1],
                cells[2],
                cells[3],
                cells[4],
                cells[5],
                cells[6],
                cells[7],
                cells[8]
            );
        }
    }
    if ran == 0 {
        let names: Vec<&str> = BENCHMARKS.iter().map(|b| b.name).collect();
        return Err(format!(
            "--only {:?} matches no benchmark; they are: {}",
            opts.only.as_deref().unwrap_or(""),
            names.join(", ")
        ));
    }
    Ok(())
}

/// `16256` as `16,256`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_are_grouped() {
        assert_eq!(super::thousands(0), "0");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(16256), "16,256");
        assert_eq!(super::thousands(1234567), "1,234,567");
    }
}
