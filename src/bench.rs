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
    /// A flow-level run (`simulation.fidelity = "flow"`): one thread
    /// whatever `--threads` asks, no packets, no queues.csv.
    pub flow: bool,
}

pub const BENCHMARKS: &[Benchmark] = &[
    Benchmark {
        name: "fat-tree-k8-permutation",
        text: include_str!("../examples/bench/fat-tree-k8-permutation.toml"),
        smoke: &[],
        flow: false,
    },
    Benchmark {
        name: "fat-tree-k16-permutation",
        text: include_str!("../examples/bench/fat-tree-k16-permutation.toml"),
        smoke: &[],
        flow: false,
    },
    Benchmark {
        name: "fat-tree-k16-permutation-spray",
        text: include_str!("../examples/bench/fat-tree-k16-permutation-spray.toml"),
        smoke: &[],
        flow: false,
    },
    Benchmark {
        name: "fat-tree-k8-alltoall",
        text: include_str!("../examples/bench/fat-tree-k8-alltoall.toml"),
        smoke: &[],
        flow: false,
    },
    Benchmark {
        name: "rail-multipod-1024gpu-allreduce",
        text: include_str!("../examples/bench/rail-multipod-1024gpu-allreduce.toml"),
        // The all-reduce begins inside the hosts, over NVLink; a smaller
        // buffer reaches the network within the smoke run.
        smoke: &["workload.0.bytes=\"1MB\""],
        flow: false,
    },
    Benchmark {
        name: "fat-tree-k32-permutation",
        text: include_str!("../examples/bench/fat-tree-k32-permutation.toml"),
        smoke: &[],
        flow: false,
    },
    Benchmark {
        name: "rail-multipod-32768gpu-allreduce",
        text: include_str!("../examples/bench/rail-multipod-32768gpu-allreduce.toml"),
        // As for 1,024 GPUs: 256 MB spends its first 250 us on NVLink.
        smoke: &["workload.0.bytes=\"1MB\""],
        flow: false,
    },
    Benchmark {
        name: "rail-multipod-65536gpu-allreduce-flow",
        text: include_str!("../examples/bench/rail-multipod-65536gpu-allreduce-flow.toml"),
        smoke: &["workload.0.bytes=\"1MB\""],
        flow: true,
    },
    Benchmark {
        name: "nvl72-100800gpu-allreduce-flow",
        text: include_str!("../examples/bench/nvl72-100800gpu-allreduce-flow.toml"),
        // Without NVLS's 25 us launch, its network part starts within
        // the smoke run.
        smoke: &[
            "workload.0.bytes=\"1MB\"",
            "workload.0.step_latency=\"none\"",
        ],
        flow: true,
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
    /// Thread counts to run each benchmark at (none: 1).
    pub threads: Vec<u32>,
    /// Runs at each thread count, alternating; the fastest is shown.
    pub repeat: u32,
}

/// One run of a benchmark: its perf.json and summary.json, and the bytes
/// of the files that must not depend on the thread count.
struct Ran {
    perf: serde_json::Value,
    summary: serde_json::Value,
    files: Vec<Vec<u8>>,
}

/// Files compared across thread counts (a flow-level run writes no
/// queues.csv: it compares as empty).
const SAME_FILES: [&str; 4] = ["summary.json", "flows.csv", "links.csv", "queues.csv"];

fn run_once(
    exe: &Path,
    b: &Benchmark,
    dir: &Path,
    smoke: bool,
    threads: u32,
) -> Result<Ran, String> {
    let name = b.name;
    // The scenario goes to the child on standard input, so that only
    // the child's report writes files.
    let mut cmd = Command::new(exe);
    cmd.args(["run", "-", "--quiet", "--no-plots", "--no-html", "--out"])
        .arg(dir)
        .args(["--threads", &threads.to_string()]);
    if smoke {
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
        .write_all(b.text.as_bytes())
        .map_err(|e| format!("benchmark {name}: {e}"))?;
    let status = child.wait().map_err(|e| format!("benchmark {name}: {e}"))?;
    if !status.success() {
        return Err(format!("benchmark {name} failed ({status})"));
    }
    let read_bytes = |f: &str| -> Result<Vec<u8>, String> {
        let p = dir.join(f);
        std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))
    };
    let read = |f: &str| -> Result<serde_json::Value, String> {
        let s = read_bytes(f)?;
        serde_json::from_slice(&s).map_err(|e| format!("{}: {e}", dir.join(f).display()))
    };
    Ok(Ran {
        perf: read("perf.json")?,
        summary: read("summary.json")?,
        files: SAME_FILES
            .iter()
            .map(|&f| {
                if b.flow && f == "queues.csv" {
                    Ok(Vec::new())
                } else {
                    read_bytes(f)
                }
            })
            .collect::<Result<_, _>>()?,
    })
}

pub fn run(opts: &Options, out: &Path) -> Result<(), String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the fabricsim binary: {e}"))?;
    if opts.smoke {
        outln!(
            "smoke run: {SMOKE_SIM_TIME} of simulated time each; the figures are not a benchmark"
        );
    }
    let threads: Vec<u32> = if opts.threads.is_empty() {
        vec![1]
    } else {
        opts.threads.clone()
    };
    let repeat = opts.repeat.max(1);
    if repeat > 1 || threads.len() > 1 {
        outln!(
            "each benchmark runs {repeat} times at each of {} threads, alternating; the fastest run of each is shown, and its speedup over {} thread(s)",
            threads
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            threads[0]
        );
    }
    let columns = [
        "benchmark",
        "hosts",
        "threads",
        "events",
        "link tx",
        "wall s",
        "M events/s",
        "M link tx/s",
        "wall s/sim ms",
        "peak MB",
        "speedup",
        "same files",
        "build s",
    ];
    let widths = [32, 6, 7, 11, 11, 7, 10, 11, 13, 8, 7, 10, 7];
    let line = |cells: &[String]| {
        if opts.markdown {
            format!("| {} |", cells.join(" | "))
        } else {
            cells
                .iter()
                .zip(widths)
                .enumerate()
                .map(|(i, (c, w))| {
                    if i == 0 {
                        format!("{c:<w$}")
                    } else {
                        format!("{c:>w$}")
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        }
    };
    outln!(
        "{}",
        line(&columns.iter().map(|c| c.to_string()).collect::<Vec<_>>())
    );
    if opts.markdown {
        outln!("|{}", "---|".repeat(columns.len()));
    }
    let mut ran = 0;
    for b in BENCHMARKS {
        let name = b.name;
        if opts.only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        ran += 1;
        // The flow level runs on one thread.
        let threads: Vec<u32> = if b.flow { vec![1] } else { threads.clone() };
        let mut best: Vec<Option<Ran>> = threads.iter().map(|_| None).collect();
        let wall = |r: &Ran| r.perf["wall_seconds"].as_f64().unwrap_or(f64::MAX);
        for _ in 0..repeat {
            for (i, &t) in threads.iter().enumerate() {
                let dir = if threads.len() > 1 {
                    out.join(format!("{name}-t{t}"))
                } else {
                    out.join(name)
                };
                let r = run_once(&exe, b, &dir, opts.smoke, t)?;
                if best[i].as_ref().is_none_or(|old| wall(&r) < wall(old)) {
                    best[i] = Some(r);
                }
            }
        }
        let best: Vec<Ran> = best.into_iter().flatten().collect();
        let base = &best[0];
        let hosts = b
            .text
            .lines()
            .find_map(|l| l.strip_prefix("# hosts:"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        for (r, &t) in best.iter().zip(&threads) {
            let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(0.0);
            let (perf, summary) = (&r.perf, &r.summary);
            let partitions = perf["partitions"].as_u64().unwrap_or(1);
            let cells = [
                name.to_string(),
                hosts.clone(),
                if partitions == u64::from(t) {
                    t.to_string()
                } else {
                    format!("{t} (ran {partitions})")
                },
                thousands(f(summary, "events") as u64),
                thousands(f(summary, "link_transmissions") as u64),
                format!("{:.2}", f(perf, "wall_seconds")),
                format!("{:.2}", f(perf, "events_per_second") / 1e6),
                format!("{:.2}", f(perf, "link_transmissions_per_second") / 1e6),
                format!("{:.3}", f(perf, "wall_seconds_per_sim_ms")),
                format!("{:.0}", f(perf, "peak_rss_bytes") / 1e6),
                format!("{:.2}", wall(base) / wall(r).max(1e-9)),
                if r.files == base.files { "yes" } else { "NO" }.to_string(),
                format!("{:.3}", f(perf, "build_seconds")),
            ];
            outln!("{}", line(&cells));
            if r.files != base.files {
                return Err(format!(
                    "benchmark {name}: the files at {t} threads differ from those at {}",
                    threads[0]
                ));
            }
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
