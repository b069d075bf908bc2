//! The `fabricsim` command line: run, validate, topo, compare, sweep,
//! merge, plan, bench.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};

use fabricsim::engine::capture::CaptureSpec;
use fabricsim::engine::Simulation;
use fabricsim::report::{self, Perf, Summary};
use fabricsim::scenario::{self, Prepared, ScenarioError};
use fabricsim::topology::summary::TopologySummary;
use fabricsim::units::SimTime;
use fabricsim::{errln, input, out, outln};

#[derive(Parser)]
#[command(
    name = "fabricsim",
    version,
    about = "Packet-level simulator of Ethernet backend fabrics for AI training clusters"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Args, Clone, Default)]
struct ScenarioArgs {
    /// Override any scenario key by its dotted path, e.g.
    /// --set topology.k=8 --set workload[0].bytes=1MB (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
}

/// Limits on one run. A run stopped by one writes its results so far,
/// marked partial.
#[derive(clap::Args, Clone, Default)]
struct LimitArgs {
    #[command(flatten)]
    stop: StopArgs,
    /// Refuse to start when the estimated peak memory is above this, e.g.
    /// 8GB (default: the memory this machine has available).
    #[arg(long, value_name = "SIZE")]
    max_memory: Option<String>,
}

/// Where a run (or each point of a sweep) stops early.
#[derive(clap::Args, Clone, Default)]
struct StopArgs {
    /// Stop after this many events.
    #[arg(long, value_name = "N")]
    max_events: Option<u64>,
    /// Stop at this simulated time, e.g. 500us (as simulation.max_sim_time).
    #[arg(long, value_name = "TIME")]
    max_sim_time: Option<String>,
    /// Stop after this much wall-clock time, e.g. 90s, 10min, 2h.
    #[arg(long, value_name = "DURATION")]
    max_wall: Option<String>,
}

/// A wall-clock duration: a number and ms, s, min or h.
fn parse_wall(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "ms" => 1e-3,
        "s" => 1.0,
        "min" => 60.0,
        "h" => 3600.0,
        _ => f64::NAN,
    };
    let secs = num.parse::<f64>().map(|n| n * scale).unwrap_or(f64::NAN);
    if !(secs.is_finite() && secs > 0.0 && secs < 1e9) {
        return Err(format!(
            "--max-wall: got \"{s}\", expected a duration such as 90s, 10min or 2h"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

fn mb(bytes: u64) -> String {
    if bytes >= 10_000_000_000 {
        format!("{:.1} GB", bytes as f64 / 1e9)
    } else {
        format!("{:.0} MB", bytes as f64 / 1e6)
    }
}

/// Ctrl-C, SIGTERM and the other signals that would end the process
/// with nothing written (SIGHUP when the terminal goes, SIGQUIT, SIGUSR1,
/// SIGUSR2): the first asks the run to stop at the next safe point (the
/// flag) and write what it has, a second exits at once with status 130.
fn interrupt_flag() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>, String> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
    use signal_hook::flag;
    let f = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2] {
        // The shutdown goes first: it fires only once the flag is set.
        flag::register_conditional_shutdown(sig, 130, std::sync::Arc::clone(&f))
            .and_then(|_| flag::register(sig, std::sync::Arc::clone(&f)))
            .map_err(|e| format!("cannot handle signal {sig}: {e}"))?;
    }
    Ok(f)
}

/// What `run` writes besides the tables.
#[derive(clap::Args, Clone, Default)]
struct ViewArgs {
    /// Capture frames into capture.pcapng: `all`, `link=FROM->TO` (one
    /// direction, as named in links.csv), `link=DEVICE` (every link to or
    /// from it) or `flow=ID` (repeatable; links and flows combine).
    #[arg(long, value_name = "WHAT")]
    capture: Vec<String>,
    /// Capture only frames sent in this window, e.g. 10us..50us.
    #[arg(long, value_name = "FROM..TO", requires = "capture")]
    capture_window: Option<String>,
    /// Most frames to capture (default 1000000); later ones are counted.
    #[arg(long, value_name = "N", requires = "capture")]
    capture_limit: Option<u64>,
    /// Write no SVG plots (as report.plots = false).
    #[arg(long)]
    no_plots: bool,
    /// Write no report.html (as report.html = false).
    #[arg(long)]
    no_html: bool,
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Read an NX-OS configuration (classification, queuing, network-qos,
    /// system qos, interfaces' PFC, the PFC watchdog, DLB, hashing) and
    /// print the scenario keys it maps to, each with its lines, then the
    /// interfaces' settings, notes and the lines not modelled.
    Import {
        file: PathBuf,
        /// Refuse lines that are not modelled instead of listing them.
        #[arg(long)]
        strict: bool,
    },
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario (the built-in default when none is given; `-` reads
    /// it from standard input).
    Run {
        scenario: Option<PathBuf>,
        /// Run seed (overrides simulation.seed).
        #[arg(long)]
        seed: Option<u64>,
        /// Output folder.
        #[arg(long, default_value = "out")]
        out: PathBuf,
        /// Print nothing but errors.
        #[arg(long, short)]
        quiet: bool,
        /// Treat warnings (PFC headroom, ECN/PFC order, switch configuration
        /// lines not modelled) as errors.
        #[arg(long)]
        strict: bool,
        /// Threads to run on, each simulating a partition of the fabric
        /// (as simulation.threads); the outputs are the same at any count.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        threads: Option<u32>,
        /// `packet` (default) or `flow`: transfers as fluids at max-min
        /// fair rates on the same paths (as simulation.fidelity).
        #[arg(long, value_name = "packet|flow")]
        fidelity: Option<String>,
        /// Run as one of the MPI ranks started by `mpirun -np N` or `srun`,
        /// each simulating a partition; rank 0 writes the outputs, the same
        /// as on one thread (needs a build with `--features mpi`).
        #[arg(long)]
        mpi: bool,
        /// Hand partitions' results over as MPI ranks do, through bytes
        /// (tests the MPI path's encoding without MPI).
        #[arg(long, hide = true)]
        encode_partitions: bool,
        #[command(flatten)]
        args: ScenarioArgs,
        #[command(flatten)]
        view: ViewArgs,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Check a scenario and report what it would simulate, without running.
    Validate {
        scenario: PathBuf,
        /// Treat warnings (PFC headroom, ECN/PFC order, switch configuration
        /// lines not modelled) as errors.
        #[arg(long)]
        strict: bool,
        #[command(flatten)]
        args: ScenarioArgs,
    },
    /// Describe a scenario's fabric: tiers, ports, links, capacities.
    Topo {
        scenario: Option<PathBuf>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Draw the fabric as an SVG picture into this file (tiers of
        /// switches, hosts with their GPUs and NICs; pods as blocks past
        /// 64 hosts or 96 switches).
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// List the ports of the switches whose name matches (`*` any
        /// run of characters, e.g. leaf0 or "spine*"): interface name as
        /// the switch configuration calls it, facing, the other end,
        /// speed and PFC as negotiated.
        #[arg(long, value_name = "SWITCHES")]
        ports: Option<String>,
        #[command(flatten)]
        args: ScenarioArgs,
    },
    /// Switch configurations: `config import FILE` prints the scenario
    /// keys an NX-OS or Junos configuration maps to.
    Config {
        #[command(subcommand)]
        what: ConfigCommand,
    },
    /// Show what NCCL's tuner would pick (algorithm, protocol, channels)
    /// for a communicator of the scenario at sizes from 1 KiB to 4 GiB,
    /// and its modelled time for each choice: what `algorithm = "auto"`
    /// runs.
    Nccl {
        scenario: Option<PathBuf>,
        /// The collective: all-reduce, all-gather, reduce-scatter or
        /// broadcast.
        #[arg(long, default_value = "all-reduce")]
        op: String,
        /// The communicator of this workload entry (0 is the first;
        /// default: the first collective, training, model or Chakra
        /// entry, else every GPU).
        #[arg(long, value_name = "N")]
        workload: Option<usize>,
        /// For a model workload: the first group of this dimension of
        /// parallelism (tp, dp or ep) instead of the whole job.
        #[arg(long, value_name = "DIM")]
        group: Option<String>,
        #[command(flatten)]
        args: ScenarioArgs,
    },
    /// Run several scenarios (e.g. one workload under different
    /// balancers) and print their headline figures side by side.
    Compare {
        /// Scenario files: two or more, or one with --fidelity.
        #[arg(required = true, num_args = 1..)]
        scenarios: Vec<PathBuf>,
        /// Run each scenario at each of these fidelities (e.g.
        /// `packet,flow`) and print, besides the side-by-side table, each
        /// one's error against the first.
        #[arg(long, value_name = "LIST")]
        fidelity: Option<String>,
        /// With --fidelity: print the error table in Markdown.
        #[arg(long)]
        markdown: bool,
        /// Output folder: each run's results go in a subfolder named
        /// after its file.
        #[arg(long, default_value = "out/compare")]
        out: PathBuf,
        /// Settings applied to every scenario.
        #[command(flatten)]
        args: ScenarioArgs,
        /// Limits on each run, as for `run`.
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Plan a model's GPUs: memory its parameters need and the fewest
    /// GPUs and servers that hold them.
    Plan {
        /// Parameters: 405e9, 405B, 70B, 8B, 1.5T.
        #[arg(long)]
        params: String,
        /// Bytes per parameter (default 2, BF16 weights; 16 with --training).
        #[arg(long)]
        bytes_per_param: Option<f64>,
        /// Mixed-precision training with Adam: 16 bytes per parameter.
        #[arg(long)]
        training: bool,
        /// Memory of one GPU.
        #[arg(long, default_value = "80GB")]
        gpu_memory: String,
        /// Share of each GPU's memory the parameters may take.
        #[arg(long, default_value_t = 1.0)]
        usable: f64,
        #[arg(long, default_value_t = 8)]
        gpus_per_server: u32,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run a parameter sweep: every point of a grid of scenario settings
    /// and seeds, in parallel here or as a Slurm array job.
    Sweep {
        /// The sweep file (base scenario, axes, seeds).
        sweep: PathBuf,
        /// Output folder: manifest.csv, points/, and after the merge
        /// sweep.csv and plots/.
        #[arg(long, default_value = "out/sweep")]
        out: PathBuf,
        /// Points run at once (default: every core).
        #[arg(long, short)]
        jobs: Option<usize>,
        /// Run only point N (a batch task's index, e.g.
        /// $SLURM_ARRAY_TASK_ID or $JOB_COMPLETION_INDEX).
        #[arg(long, value_name = "N", conflicts_with = "emit")]
        point: Option<usize>,
        /// With --point: run it as one of the MPI ranks `srun` or
        /// `mpirun` started (rank 0 writes it; see `[slurm] ranks`).
        #[arg(long, requires = "point")]
        mpi: bool,
        /// Write batch scripts instead of running: `slurm`.
        #[arg(long, value_name = "SCHEDULER")]
        emit: Option<String>,
        /// With --emit slurm: submit the jobs with sbatch.
        #[arg(long, requires = "emit")]
        submit: bool,
        /// Print nothing but errors.
        #[arg(long, short)]
        quiet: bool,
        /// Limits on each point: a point stopped by one keeps its results,
        /// marked partial.
        #[command(flatten)]
        limits: StopArgs,
    },
    /// Gather a sweep's points into sweep.csv and comparison plots.
    Merge {
        /// The sweep's output folder.
        dir: PathBuf,
        /// Print nothing but errors.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Run the benchmark scenarios and report simulator speed.
    Bench {
        /// Run only benchmarks whose name contains this.
        #[arg(long)]
        only: Option<String>,
        /// Where to keep each benchmark's output folder.
        #[arg(long, default_value = "out/bench")]
        out: PathBuf,
        /// Simulate only the first microseconds of each: checks that they
        /// run, measures nothing.
        #[arg(long)]
        smoke: bool,
        /// Print the table as Markdown rows.
        #[arg(long)]
        markdown: bool,
        /// Thread counts to run each benchmark at, e.g. 1,2: one row
        /// each, with the speedup over the first and whether the files
        /// are the same.
        #[arg(long, value_delimiter = ',', value_name = "N,N,..")]
        threads: Vec<u32>,
        /// Run each thread count this many times, alternating (the VM is
        /// noisy); the fastest run of each is shown.
        #[arg(long, default_value_t = 1, value_name = "N")]
        repeat: u32,
    },
}

fn load(path: Option<&Path>, sets: &[String]) -> Result<Prepared, String> {
    load_within(path, sets, None)
}

/// Loads a scenario with its workloads held to `limit` bytes as they are
/// made, or to the memory the machine has available
/// (`scenario::prepare_within`).
fn load_within(
    path: Option<&Path>,
    sets: &[String],
    limit: Option<u64>,
) -> Result<Prepared, String> {
    let (name, text) = match path {
        None => (
            scenario::DEFAULT_NAME.to_string(),
            scenario::DEFAULT_SCENARIO.to_string(),
        ),
        Some(p) if p == Path::new("-") => (
            "<stdin>".to_string(),
            input::read_stdin_text(input::MAX_SCENARIO_BYTES, "scenario")?,
        ),
        Some(p) => (
            p.display().to_string(),
            input::read_text(p, input::MAX_SCENARIO_BYTES, "scenario")?,
        ),
    };
    let limit = limit.or_else(report::available_memory_bytes);
    scenario::prepare_within(&name, &text, sets, limit).map_err(|e: ScenarioError| e.to_string())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help, the version, or a usage error: printed as clap prints
        // them, and an output that cannot take them (a full disk) is an
        // error, not a success.
        Err(e) => {
            let code = e.exit_code();
            let printed = e.print().and_then(|()| {
                use std::io::Write;
                std::io::stdout().flush()
            });
            return match printed {
                Err(p) if p.kind() != std::io::ErrorKind::BrokenPipe => {
                    errln!("error: cannot print: {p}");
                    ExitCode::from(2)
                }
                _ => ExitCode::from(code as u8),
            };
        }
    };
    let command = cli.command.unwrap_or(Command::Run {
        scenario: None,
        seed: None,
        out: PathBuf::from("out"),
        quiet: false,
        strict: false,
        threads: None,
        fidelity: None,
        mpi: false,
        encode_partitions: false,
        args: ScenarioArgs::default(),
        view: ViewArgs::default(),
        limits: LimitArgs::default(),
    });
    let result = match command {
        Command::Run {
            scenario,
            seed,
            out,
            quiet,
            strict,
            threads,
            fidelity,
            mpi,
            encode_partitions,
            args,
            view,
            limits,
        } => {
            let mut sets = args.sets;
            if let Some(n) = threads {
                sets.push(format!("simulation.threads={n}"));
            }
            if let Some(f) = &fidelity {
                sets.push(format!("simulation.fidelity={f:?}"));
            }
            if let Some(t) = &limits.stop.max_sim_time {
                sets.push(format!("simulation.max_sim_time={t:?}"));
            }
            if let Some(s) = seed {
                sets.push(format!("simulation.seed={s}"));
            }
            if view.no_plots {
                sets.push("report.plots=false".into());
            }
            if view.no_html {
                sets.push("report.html=false".into());
            }
            let how = How {
                quiet,
                strict,
                mpi,
                encode_partitions,
            };
            match run_as_asked(scenario.as_deref(), &sets, &out, &how, &view, &limits) {
                Ok(0) => Ok(()),
                Ok(status) => std::process::exit(status.into()),
                Err(e) => Err(e),
            }
        }
        Command::Validate {
            scenario,
            strict,
            args,
        } => validate(&scenario, &args.sets, strict),
        Command::Config {
            what: ConfigCommand::Import { file, strict },
        } => config_import(&file, strict),
        Command::Topo {
            scenario,
            json,
            svg,
            ports,
            args,
        } => match ports {
            Some(pattern) => topo_ports(scenario.as_deref(), &args.sets, &pattern),
            None => topo(scenario.as_deref(), &args.sets, json, svg.as_deref()),
        },
        Command::Nccl {
            scenario,
            op,
            workload,
            group,
            args,
        } => nccl(
            scenario.as_deref(),
            &args.sets,
            &op,
            workload,
            group.as_deref(),
        ),
        Command::Compare {
            scenarios,
            fidelity,
            markdown,
            out,
            args,
            limits,
        } => {
            let mut sets = args.sets;
            if let Some(t) = &limits.stop.max_sim_time {
                sets.push(format!("simulation.max_sim_time={t:?}"));
            }
            fidelity
                .as_deref()
                .map(fidelity_list)
                .transpose()
                .and_then(|f| compare(&scenarios, f.as_deref(), markdown, &sets, &out, &limits))
        }
        Command::Bench {
            only,
            out,
            smoke,
            markdown,
            threads,
            repeat,
        } => fabricsim::bench::run(
            &fabricsim::bench::Options {
                only,
                smoke,
                markdown,
                threads,
                repeat,
            },
            &out,
        ),
        Command::Sweep {
            sweep,
            out,
            jobs,
            point,
            mpi,
            emit,
            submit,
            quiet,
            limits,
        } => run_sweep(
            &sweep,
            &out,
            jobs,
            (point, mpi),
            (emit.as_deref(), submit),
            quiet,
            &limits,
        ),
        Command::Merge { dir, quiet } => merge(&dir, quiet),
        Command::Plan {
            params,
            bytes_per_param,
            training,
            gpu_memory,
            usable,
            gpus_per_server,
            json,
        } => plan(
            &params,
            bytes_per_param,
            training,
            &gpu_memory,
            usable,
            gpus_per_server,
            json,
        ),
    };
    let code = match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("error: {e}");
            ExitCode::from(2)
        }
    };
    // Files were written before anything was printed about them; a
    // reader that closed the pipe early is a normal end of printing, but
    // output lost to a full disk or a dead terminal is said and shown in
    // the status.
    if let Some(e) = fabricsim::console::stdout_failure() {
        errln!("error: cannot write to standard output: {e}");
        return ExitCode::from(fabricsim::console::EXIT_IO);
    }
    code
}

/// Prints the scenario's threshold warnings; with `strict` they are an
/// error and nothing runs.
fn warnings(path: Option<&Path>, p: &Prepared, strict: bool) -> Result<(), String> {
    let file = path.map_or(scenario::DEFAULT_NAME.to_string(), |p| {
        p.display().to_string()
    });
    let w = &p.scenario.warnings;
    for f in w {
        errln!("warning: {file}: {}: {}", f.key, f.message);
    }
    if strict && !w.is_empty() {
        return Err(format!(
            "{file}: {} warning(s), which --strict makes errors",
            w.len()
        ));
    }
    Ok(())
}

/// The engine's limits from the command line, with the interrupt flag
/// (Ctrl-C, SIGTERM), and the `--max-memory` limit.
fn engine_limits(args: &LimitArgs) -> Result<(fabricsim::engine::Limits, Option<u64>), String> {
    let interrupt = interrupt_flag()?;
    let max_wall = args.stop.max_wall.as_deref().map(parse_wall).transpose()?;
    let max_memory = match &args.max_memory {
        None => None,
        Some(m) => Some(
            fabricsim::units::parse_bytes(m)
                .filter(|&b| b > 0)
                .ok_or_else(|| format!("--max-memory: got \"{m}\", expected a size such as 8GB"))?,
        ),
    };
    let limits = fabricsim::engine::Limits {
        max_events: args.stop.max_events,
        max_wall,
        interrupt: Some(interrupt),
        // Also while running: a run that grows past the limit despite the
        // estimate stops, its results so far written.
        max_memory: max_memory.map(|m| (m, report::rss_bytes as fn() -> u64)),
        ..Default::default()
    };
    Ok((limits, max_memory))
}

/// Refuses a run whose estimated peak memory is above `max_memory` or,
/// by default, above what the machine has available.
fn check_memory(
    path: Option<&Path>,
    prepared: &Prepared,
    max_memory: Option<u64>,
    threads: u32,
) -> Result<(), String> {
    let memory = fabricsim::engine::MemoryEstimate::of(prepared, report::rss_bytes());
    // Each thread of a parallel run holds the whole simulation (and the
    // scenario it was built from).
    let copies = u64::from(threads.max(1));
    let total = memory.total().saturating_mul(copies);
    let threads_note = if copies > 1 {
        format!(" on {copies} threads, each holding the whole simulation")
    } else {
        String::new()
    };
    let (limit, whose) = match max_memory {
        Some(m) => (Some(m), "the --max-memory limit"),
        None => (
            report::available_memory_bytes(),
            "the memory this machine has available",
        ),
    };
    if let Some(limit) = limit.filter(|&l| total > l) {
        let file = path.map_or(scenario::DEFAULT_NAME.to_string(), |p| {
            p.display().to_string()
        });
        return Err(format!(
            "{file}: the run needs an estimated {}{threads_note} of memory ({} for the scenario as loaded, {} for the simulation's state, up to {} packets alive at once at {} B each, {} of time series, {} to write the largest output), more than {} ({whose}); nothing was built or run. Try {}a smaller fabric or workload, [report] sample_interval = \"off\", or a higher --max-memory",
            mb(total),
            mb(memory.loaded_bytes),
            mb(memory.state_bytes),
            memory.packets,
            fabricsim::engine::MemoryEstimate::BYTES_PER_PACKET,
            mb(memory.series_bytes),
            mb(memory.output_bytes),
            mb(limit),
            if copies > 1 { "fewer threads, " } else { "" },
        ));
    }
    Ok(())
}

/// How a run was asked for on the command line.
struct How {
    quiet: bool,
    strict: bool,
    mpi: bool,
    encode_partitions: bool,
}

use fabricsim::engine::parallel::mpi::Ranks;

/// Runs a scenario, as one of several MPI ranks when asked; the exit
/// status (0, or that of an interrupted or stuck run, results written).
fn run_as_asked(
    path: Option<&Path>,
    sets: &[String],
    out: &Path,
    how: &How,
    view: &ViewArgs,
    limits: &LimitArgs,
) -> Result<u8, String> {
    if !how.mpi {
        return run(path, sets, out, how, view, limits, None);
    }
    let ranks = Ranks::start()?;
    let result = run(path, sets, out, how, view, limits, Some(&ranks));
    // Rank 0 says what went wrong; another rank only what it alone found
    // (`run` prints it). MPI is finalized when `ranks` drops.
    if ranks.rank() != 0 {
        return Ok(u8::from(result.is_err()) * 2);
    }
    result
}

fn run(
    path: Option<&Path>,
    sets: &[String],
    out: &Path,
    how: &How,
    view: &ViewArgs,
    limit_args: &LimitArgs,
    ranks: Option<&Ranks>,
) -> Result<u8, String> {
    // Under MPI, rank 0 prints and writes; the others only simulate.
    let lead = ranks.is_none_or(|r| r.rank() == 0);
    let quiet = how.quiet || !lead;
    let building = Instant::now();
    let ready = (|| {
        let (mut limits, max_memory) = engine_limits(limit_args)?;
        limits.encode_partitions = how.encode_partitions;
        let capture = if view.capture.is_empty() {
            None
        } else {
            let mut spec = CaptureSpec::parse(&view.capture)?;
            if let Some(w) = &view.capture_window {
                spec.set_window(w)?;
            }
            if let Some(n) = view.capture_limit {
                spec.limit = n;
            }
            Some(spec)
        };
        let mut sets = sets.to_vec();
        if let Some(r) = ranks {
            // Each rank runs one partition.
            sets.push("simulation.threads=1".into());
            if r.size() > scenario::MAX_THREADS {
                return Err(format!(
                    "--mpi: {} ranks, more than the {} partitions a run can have",
                    r.size(),
                    scenario::MAX_THREADS
                ));
            }
        }
        let prepared = load_within(path, &sets, max_memory)?;
        if prepared.scenario.fidelity == scenario::Fidelity::Flow {
            if capture.is_some() {
                return Err("--capture: a flow-level run (simulation.fidelity = \"flow\") has no packets to capture".into());
            }
            if ranks.is_some_and(|r| r.size() > 1) {
                return Err(
                    "--mpi: a flow-level run (simulation.fidelity = \"flow\") runs on one rank"
                        .into(),
                );
            }
        }
        if lead {
            warnings(path, &prepared, how.strict)?;
        } else if how.strict && !prepared.scenario.warnings.is_empty() {
            return Err("threshold warnings, which --strict makes errors".into());
        }
        let threads = prepared.scenario.threads;
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        if lead && !quiet && threads as usize > cores {
            errln!(
                "note: {threads} threads on the {cores} cores this process may use: the partitions take turns on them, so the run is slower than on {cores} (its results are the same)"
            );
        }
        check_memory(path, &prepared, max_memory, threads)?;
        if lead && std::env::var_os("FABRICSIM_MEMORY_ESTIMATE").is_some() {
            // For ACCURACY.md: the estimate, to set beside perf.json's peak.
            let m = fabricsim::engine::MemoryEstimate::of(&prepared, report::rss_bytes());
            errln!("memory estimate {} B ({m:?})", m.total());
        }
        // Each further partition builds its simulation from a copy.
        let source = (threads > 1).then(|| prepared.clone());
        let mut sim = Simulation::new(prepared);
        // A run that should take more than a few seconds says so first.
        if !quiet && sim.estimate().wall_seconds() >= 3.0 {
            errln!("{}", report::estimate_line(&sim));
        }
        if !lead {
            // Another rank's capture keeps its frames for rank 0.
            if let Some(spec) = &capture {
                sim.start_capture(spec, Box::new(fabricsim::engine::capture::NoSink))?;
            }
            return Ok((sim, source, limits, None));
        }
        // Results go where they can be written: found out now, not after
        // the whole simulation.
        fabricsim::output::check_writable(out)?;
        fabricsim::output::check_run_folder(out)?;
        // The capture is written beside the other outputs under a temporary
        // name and moved into place with them (removed if the run fails).
        let staged = match &capture {
            Some(spec) => {
                let tmp = fabricsim::output::temp_file_in(out, "capture")
                    .map_err(|e| format!("{}: cannot write the capture: {e}", out.display()))?;
                let file = tmp
                    .as_file()
                    .try_clone()
                    .map_err(|e| format!("{}: cannot write the capture: {e}", out.display()))?;
                let sink = report::pcapng::PcapngSink::new(file)
                    .map_err(|e| format!("{}: cannot write the capture: {e}", out.display()))?;
                sim.start_capture(spec, Box::new(sink))?;
                Some(tmp)
            }
            None => None,
        };
        Ok((sim, source, limits, staged))
    })();
    // Every rank starts, or none does (one alone would wait forever).
    if let Some(r) = ranks {
        let all = r.all(ready.is_ok());
        match &ready {
            Err(e) if !lead => errln!("error: MPI rank {}: {e}", r.rank()),
            Ok(_) if !all => {
                return Err(if lead {
                    "--mpi: another rank could not start the run (it said why)".into()
                } else {
                    String::new()
                })
            }
            _ => {}
        }
    }
    let (sim, source, limits, staged) = ready?;
    let build_seconds = building.elapsed().as_secs_f64();
    let threads = sim.scenario().threads;
    let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg}").expect("static template"),
        );
        b
    });
    let start = Instant::now();
    let mut show = |p: &fabricsim::engine::Progress| {
        if let Some(b) = &bar {
            b.set_message(report::progress_line(p, start.elapsed().as_secs_f64()));
            b.tick();
        }
    };
    if threads > 1 && !quiet {
        if let Err(why) = fabricsim::engine::parallel::plan(&sim, threads) {
            errln!("threads   running on one thread of the {threads} asked for: {why}");
        }
    }
    let (mut sim, stop) = match ranks {
        None => fabricsim::engine::parallel::run_on_threads(sim, source, &limits, &mut show),
        Some(r) => match fabricsim::engine::parallel::mpi::run(sim, r, &limits, &mut show) {
            Some(done) => done,
            None => return Ok(0),
        },
    };
    let wall = start.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if stop == fabricsim::engine::StopReason::Interrupted {
        errln!(
            "interrupted at {} simulated: writing the results so far, marked partial (interrupt again to quit at once)",
            sim.now()
        );
    }
    // A capture that could not be written (a full disk) must not cost
    // the other results: they are written first, and its error comes
    // after.
    let captured = sim.finish_capture().transpose();
    let summary = Summary::of(&sim, stop);
    let perf = Perf::of(&sim, wall).built_in(build_seconds);
    let written = report::write_outputs(out, &sim, &summary, &perf);
    let mut files =
        written.map_err(|e| format!("{}: cannot write the results: {e}", out.display()))?;
    let captured =
        captured.map_err(|e| format!("{e}; the other results are written in {}", out.display()))?;
    if let (Some(_), Some(tmp)) = (captured, staged) {
        let dst = out.join("capture.pcapng");
        let (_, staged_path) = tmp
            .keep()
            .map_err(|e| format!("{}: cannot write the capture: {e}", dst.display()))?;
        fabricsim::output::put_file(&staged_path, &dst)
            .map_err(|e| format!("{}: cannot write the capture: {e}", dst.display()))?;
        files.push(dst);
        fabricsim::output::replace_manifest(out, &files)
            .map_err(|e| format!("{}: cannot write the results: {e}", out.display()))?;
    }
    if !quiet {
        out!("{}", report::render(&sim, &summary));
        outln!(
            "speed     {:.2} s wall, {:.2} M events/s, {:.2} M link transmissions/s, peak memory {:.0} MB",
            perf.wall_seconds,
            perf.events_per_second / 1e6,
            perf.link_transmissions_per_second / 1e6,
            perf.peak_rss_bytes as f64 / 1e6
        );
        if let Some(p) = sim.parallel().filter(|p| p.partitions > 1) {
            outln!(
                "threads   {}: {}; {} windows, {} frames crossed a cut",
                p.partitions,
                p.cut,
                p.windows,
                p.messages
            );
        }
        if let Some((frames, links, over)) = captured {
            let over = if over > 0 {
                format!("; {over} more frames were over --capture-limit")
            } else {
                String::new()
            };
            outln!("capture   {frames} frames on {links} links{over}");
        }
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        outln!("outputs   {}", names.join(", "));
    }
    if stop == fabricsim::engine::StopReason::Interrupted {
        // As a shell reports a command stopped by Ctrl-C, results written.
        return Ok(130);
    }
    if stop.is_stuck() {
        // The results are written; the status says the workload could
        // not finish on this fabric, as a limit the user set would not.
        errln!(
            "{}: the workload could not finish: {}",
            path.map_or(scenario::DEFAULT_NAME.to_string(), |p| p
                .display()
                .to_string()),
            summary.stop_reason
        );
        return Ok(EXIT_STUCK);
    }
    Ok(0)
}

/// Exit status of a run whose fabric stopped moving (stalled, or a PFC
/// deadlock): results written, marked partial.
const EXIT_STUCK: u8 = 3;

/// Loads every scenario first (nothing runs if one is wrong), runs each
/// under the limits (a run stopped by one is kept, marked partial),
/// writes its outputs and prints the comparison. Ctrl-C stops the run
/// going on, writes it, prints what ran and exits with 130.
fn compare(
    scenarios: &[PathBuf],
    fidelities: Option<&[String]>,
    markdown: bool,
    sets: &[String],
    out: &Path,
    limit_args: &LimitArgs,
) -> Result<(), String> {
    let (limits, max_memory) = engine_limits(limit_args)?;
    if markdown && fidelities.is_none() {
        return Err("--markdown prints the table of --fidelity: give --fidelity too".into());
    }
    // Each scenario once, or once per fidelity (run `i` of scenario `s`
    // at fidelity `i % n`).
    let per = fidelities.map_or(1, <[String]>::len);
    if scenarios.len() * per < 2 {
        return Err(
            "compare needs two runs or more: two scenarios, or one with --fidelity packet,flow"
                .into(),
        );
    }
    let mut names: Vec<String> = Vec::new();
    let mut prepared = Vec::new();
    let mut paths = Vec::new();
    for p in scenarios {
        let stem = p
            .file_stem()
            .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
        for i in 0..per {
            let mut sets = sets.to_vec();
            let mut base = stem.clone();
            if let Some(f) = fidelities {
                sets.push(format!("simulation.fidelity={:?}", f[i]));
                base = format!("{stem}-{}", f[i]);
            }
            let mut name = base.clone();
            let mut k = 2;
            while names.contains(&name) {
                name = format!("{base}-{k}");
                k += 1;
            }
            let pr = load_within(Some(p), &sets, max_memory)?;
            warnings(Some(p), &pr, false)?;
            names.push(name);
            prepared.push(pr);
            paths.push(p.clone());
        }
    }
    fabricsim::output::check_writable(out)?;
    let mut runs = Vec::new();
    let mut curves = Vec::new();
    let mut fairness = Vec::new();
    let mut figures = Vec::new();
    let plots = prepared.iter().any(|pr| pr.scenario.report.plots);
    let mut interrupted = false;
    for ((name, pr), path) in names.into_iter().zip(prepared).zip(&paths) {
        check_memory(Some(path), &pr, max_memory, pr.scenario.threads)?;
        let building = Instant::now();
        let source = (pr.scenario.threads > 1).then(|| pr.clone());
        let sim = Simulation::new(pr);
        let build_seconds = building.elapsed().as_secs_f64();
        errln!("running {name}");
        let start = Instant::now();
        let (sim, stop) =
            fabricsim::engine::parallel::run_on_threads(sim, source, &limits, &mut |_| {});
        let summary = Summary::of(&sim, stop);
        let perf = Perf::of(&sim, start.elapsed().as_secs_f64()).built_in(build_seconds);
        let dir = out.join(&name);
        report::write_outputs(&dir, &sim, &summary, &perf)
            .map_err(|e| format!("{}: cannot write the results: {e}", dir.display()))?;
        if summary.partial {
            errln!(
                "{name}: stopped early ({}); its results are partial",
                summary.stop_reason
            );
        }
        fairness.push(report::rate_fairness(&sim));
        figures.push(report::fidelity::Figures::of(&sim, &summary, &perf));
        curves.push(report::plots::CompareRun::of(
            &name,
            &sim,
            SimTime(summary.makespan_ps),
        ));
        runs.push((name, summary));
        if stop == fabricsim::engine::StopReason::Interrupted {
            interrupted = true;
            break;
        }
    }
    let mean_peak: Vec<Option<f64>> = curves
        .iter()
        .map(|c| {
            (!c.deepest.is_empty()).then(|| c.deepest.iter().sum::<f64>() / c.deepest.len() as f64)
        })
        .collect();
    out!("{}", report::compare(&runs, &mean_peak, &fairness));
    if fidelities.is_some() {
        let groups: Vec<(String, Vec<report::fidelity::Figures>)> = scenarios
            .iter()
            .zip(figures.chunks(per))
            .map(|(p, f)| {
                let stem = p
                    .file_stem()
                    .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
                (stem, f.to_vec())
            })
            .collect();
        outln!();
        out!("{}", report::fidelity::table(&groups, markdown));
    }
    outln!("outputs   {}/<name>/", out.display());
    if plots {
        // Queue depth and sending rates of every run, side by side.
        let mut written = Vec::new();
        for (file, svg) in report::plots::compare(&curves)? {
            let path = out.join(file);
            fabricsim::output::write_atomic(&path, svg.as_bytes())
                .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
            written.push(path.display().to_string());
        }
        outln!("plots     {}", written.join(", "));
    }
    if interrupted {
        errln!(
            "interrupted: {} of {} scenarios ran (the last one partial)",
            runs.len(),
            paths.len()
        );
        std::process::exit(130);
    }
    Ok(())
}

/// `packet,flow`: fidelities, each known, at least one.
fn fidelity_list(list: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = list.split(',').map(|f| f.trim().to_string()).collect();
    for f in &names {
        if fabricsim::scenario::Fidelity::from_name(f).is_none() {
            return Err(format!(
                "--fidelity: got {f:?} in {list:?}, expected a list of packet and flow (e.g. packet,flow)"
            ));
        }
    }
    Ok(names)
}

/// Runs sweep point `id`, as one of several MPI ranks when asked; a rank
/// other than 0 leaves what went wrong to rank 0 to say.
fn point_as_asked(
    s: &fabricsim::sweep::Sweep,
    out: &Path,
    id: usize,
    limits: &fabricsim::sweep::PointLimits,
    mpi: bool,
) -> Result<fabricsim::sweep::Ran, String> {
    if !mpi {
        return fabricsim::sweep::run_one(s, out, id, limits, None);
    }
    let ranks = Ranks::start()?;
    let ran = fabricsim::sweep::run_one(s, out, id, limits, Some(&ranks));
    if ranks.rank() != 0 {
        return Ok(fabricsim::sweep::Ran::OtherRank);
    }
    ran
}

fn run_sweep(
    file: &Path,
    out: &Path,
    jobs: Option<usize>,
    (point, mpi): (Option<usize>, bool),
    (emit, submit): (Option<&str>, bool),
    quiet: bool,
    stop: &StopArgs,
) -> Result<(), String> {
    use fabricsim::sweep::{self, slurm, Sweep};
    let mut s = Sweep::load(file)?;
    let limits = sweep::PointLimits {
        max_events: stop.max_events,
        max_sim_time: stop.max_sim_time.clone(),
        max_wall: stop.max_wall.as_deref().map(parse_wall).transpose()?,
        interrupt: Some(interrupt_flag()?),
    };
    if let Some(t) = &stop.max_sim_time {
        s.extra.push(format!("simulation.max_sim_time={t:?}"));
    }
    if let Some(id) = point {
        let ran = point_as_asked(&s, out, id, &limits, mpi);
        return match ran? {
            sweep::Ran::AlreadyDone => {
                if !quiet {
                    outln!("point {id} was already done");
                }
                Ok(())
            }
            sweep::Ran::Done {
                wall_seconds,
                partial,
            } => {
                if !quiet {
                    let how = partial.map_or(String::new(), |why| {
                        format!(", partial ({})", sweep::limit_name(why))
                    });
                    outln!("point {id} done in {wall_seconds:.2} s{how}");
                }
                Ok(())
            }
            sweep::Ran::OtherRank => Ok(()),
            sweep::Ran::Interrupted | sweep::Ran::NotStarted => {
                errln!("point {id} interrupted: nothing of it was kept; run it again to redo it");
                std::process::exit(130);
            }
        };
    }
    match emit {
        None => {}
        Some("slurm") => {
            sweep::settle(&s, out)?;
            let e = slurm::emit(&s, file, out, &limits.args())?;
            for n in &e.notes {
                errln!("note: {n}");
            }
            if submit {
                let (array, merge) = slurm::submit(&e)?;
                outln!(
                    "submitted array job {array} ({} tasks) and merge job {merge}",
                    s.points_len()
                );
            } else {
                outln!(
                    "wrote {}, {} and {}; submit with: sh {}",
                    e.array.display(),
                    e.merge.display(),
                    e.submit.display(),
                    e.submit.display()
                );
            }
            return Ok(());
        }
        Some(other) => {
            return Err(format!(
                "--emit: got \"{other}\", expected \"slurm\" (for other schedulers, run each task as `fabricsim sweep FILE --out DIR --point INDEX`)"
            ))
        }
    }
    let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 {
        return Err("--jobs: got 0, expected at least 1".into());
    }
    let o = sweep::run_local(
        &s,
        out,
        &sweep::Local {
            jobs,
            quiet,
            limits,
        },
    )?;
    let merged = sweep::merge::merge(out)?;
    if !quiet {
        out!("{}", merged.table);
        let partial = if o.partial > 0 {
            format!(" ({} partial)", o.partial)
        } else {
            String::new()
        };
        outln!(
            "sweep     {} points: {} run now{partial}, {} done before, {} failed",
            o.points,
            o.ran,
            o.already_done,
            o.failures.len()
        );
        outln!(
            "outputs   {}, {} plots in {}",
            out.join("sweep.csv").display(),
            merged.plots,
            out.join("plots").display()
        );
    }
    if o.interrupted > 0 {
        errln!(
            "interrupted: {} points not finished and not kept; run the sweep again to resume",
            o.interrupted
        );
        let _ = std::io::Write::flush(&mut std::io::stdout());
        std::process::exit(130);
    }
    if o.failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} points failed (the others are done; run the sweep again to retry them):\n{}",
            o.failures.len(),
            o.points,
            o.failures.join("\n")
        ))
    }
}

fn merge(dir: &Path, quiet: bool) -> Result<(), String> {
    let m = fabricsim::sweep::merge::merge(dir)?;
    if !quiet {
        out!("{}", m.table);
        outln!(
            "merged    {} points: {} done, {} partial, {} failed, {} missing; {} and {} plots in {}",
            m.points,
            m.done,
            m.partial,
            m.failed.len(),
            m.missing.len(),
            dir.join("sweep.csv").display(),
            m.plots,
            dir.join("plots").display()
        );
    }
    if m.failed.is_empty() && m.missing.is_empty() {
        return Ok(());
    }
    let mut why: Vec<String> = m.failed.clone();
    if !m.missing.is_empty() {
        why.push(format!("not run yet: {}", m.missing.join(", ")));
    }
    Err(format!(
        "{}: {} of {} points have no results:\n{}",
        dir.display(),
        m.failed.len() + m.missing.len(),
        m.points,
        why.join("\n")
    ))
}

fn validate(path: &Path, sets: &[String], strict: bool) -> Result<(), String> {
    let p = load(Some(path), sets)?;
    warnings(Some(path), &p, strict)?;
    let s = &p.scenario;
    let mut bytes: u64 = p.flows.iter().map(|f| f.bytes).sum();
    let mut transfers = p.flows.len() as u64;
    for pass in &p.graph.passes {
        for (c, conn) in pass.conns.iter().enumerate() {
            if conn.via != fabricsim::workload::pass::Via::Local {
                bytes += pass.bytes_on(c as u32);
                transfers += pass.sends_on(c as u32);
            }
        }
    }
    // Jobs' iterations and traces' parts to be made as the run goes.
    if let Some(l) = &p.later {
        transfers += u64::from(l.end.2).saturating_sub(p.flows.len() as u64) + l.net_messages;
        bytes += l.flow_bytes + l.net_bytes;
    }
    outln!(
        "{}: valid. {} fabric with {} hosts, {} GPUs, {} switches, {} links; {} workload entries, {} transfers, {} bytes; seed {}{}",
        path.display(),
        p.topology.kind.name(),
        p.topology.hosts.len(),
        p.topology.gpus.len(),
        p.topology.switches.len(),
        p.topology.links.len(),
        s.workloads.len(),
        transfers,
        bytes,
        s.seed,
        s.max_sim_time.map_or(String::new(), |t: SimTime| format!("; stops at {t}")),
    );
    for line in scenario::lossless::describe(&p.topology, &s.qos, &p.pfc) {
        outln!("  {line}");
    }
    if let Some(c) = &s.configs {
        let files: Vec<&str> = c.files.iter().map(|a| a.file.as_str()).collect();
        let files = files.join(", ");
        let away = scenario::lossless::departures(&p.topology, &s.qos, &s.transport.dcqcn);
        if away.is_empty() {
            outln!("  switch configuration {files}: WRED as the DCQCN preset gives it");
        } else {
            outln!("  switch configuration {files} departs from the DCQCN preset:");
            for line in away {
                outln!("    {line}");
            }
        }
        outln!("  audit of the configured fabric (findings are the warnings above):");
        for line in c.audit(&p.topology, &s.qos, &s.transport, &p.pfc).lines {
            outln!("    {line}");
        }
    }
    Ok(())
}

fn config_import(file: &Path, strict: bool) -> Result<(), String> {
    let import = fabricsim::config::import_file(file).map_err(|e| e.to_string())?;
    if strict {
        import.strict().map_err(|e| e.to_string())?;
    }
    out!("{}", import.to_toml());
    if !import.not_modelled.is_empty() {
        errln!(
            "{}: {} lines not modelled (listed at the end; --strict refuses them)",
            file.display(),
            import.not_modelled.len()
        );
    }
    Ok(())
}

fn topo(
    path: Option<&Path>,
    sets: &[String],
    json: bool,
    svg: Option<&Path>,
) -> Result<(), String> {
    let p = load(path, sets)?;
    if let Some(file) = svg {
        let map = fabricsim::report::fabric::draw(&p.topology, None, &p.scenario.name);
        fabricsim::output::write_atomic(file, map.svg.as_bytes())
            .map_err(|e| format!("{}: {e}", file.display()))?;
        outln!(
            "{}: {} boxes, {} lines{}",
            file.display(),
            map.boxes,
            map.lines,
            if map.aggregated {
                " (pods drawn as blocks)"
            } else {
                ""
            }
        );
        return Ok(());
    }
    let summary = TopologySummary::of(
        &p.topology,
        fabricsim::scenario::resolve::cross_rail(&p.topology),
    );
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?
        );
    } else {
        out!("{}", summary.render());
    }
    Ok(())
}

/// `fabricsim topo --ports PATTERN`: each port of the matching switches,
/// by the name its switch configuration gives it.
fn topo_ports(path: Option<&Path>, sets: &[String], pattern: &str) -> Result<(), String> {
    use fabricsim::topology::{Owner, PortId};
    let p = load(path, sets)?;
    let topo = &p.topology;
    let configs = p.scenario.configs.as_ref();
    let owner = |q: PortId| match topo.port(q).owner {
        Owner::Switch(s) => topo.switches[s.idx()].name.clone(),
        Owner::Nic(n) => topo.nics[n.idx()].name.clone(),
    };
    let mut found = false;
    for sw in topo
        .switches
        .iter()
        .filter(|s| fabricsim::config::glob(pattern, &s.name))
    {
        found = true;
        outln!("{}", sw.name);
        outln!(
            "  {:>4}  {:<16} {:<5} {:<24} {:>6}  pfc",
            "port",
            "interface",
            "faces",
            "other end",
            "speed"
        );
        for (i, &q) in sw.ports.iter().enumerate() {
            let peer = topo.port(q).peer;
            let setting = configs.and_then(|c| c.ports[q.idx()].as_ref());
            let peer_name = match configs.and_then(|c| c.ports[peer.idx()].as_ref()) {
                Some(s) => format!("{} {}", owner(peer), s.name),
                None => owner(peer),
            };
            let pfc = match (p.pfc.slots, configs.map(|c| c.pfc_on(q))) {
                (0, _) => "no lossless class",
                (_, Some(false)) => "off",
                _ => "on",
            };
            outln!(
                "  {:>4}  {:<16} {:<5} {:<24} {:>6}  {pfc}",
                i,
                setting.map_or("-", |s| s.name.as_str()),
                if topo.links[topo.port(q).link.idx()].b == q {
                    "down"
                } else {
                    "up"
                },
                peer_name,
                topo.port(q).rate.to_string(),
            );
        }
    }
    if !found {
        return Err(format!(
            "--ports {pattern}: no switch matches; the switches are {} to {}",
            topo.switches.first().map_or("", |s| s.name.as_str()),
            topo.switches.last().map_or("", |s| s.name.as_str())
        ));
    }
    Ok(())
}

/// `fabricsim nccl`: NCCL's tuner's table for a communicator of the
/// scenario.
fn nccl(
    path: Option<&Path>,
    sets: &[String],
    op: &str,
    workload: Option<usize>,
    group: Option<&str>,
) -> Result<(), String> {
    use fabricsim::workload::collective::{comm_shape, Op};
    use fabricsim::workload::model::Dim;
    use fabricsim::workload::tuner::{Arch, Host};
    use fabricsim::workload::Pattern;
    let op = Op::parse(op)
        .filter(|o| *o != Op::AllToAll)
        .ok_or_else(|| {
            format!(
                "--op: got \"{op}\", expected all-reduce, all-gather, reduce-scatter or broadcast"
            )
        })?;
    let p = load(path, sets)?;
    let ws = &p.scenario.workloads;
    // The first TP, DP or EP group of a model job: places 0.. of that
    // dimension, the others at 0.
    let dim = match group {
        None => None,
        Some("tp") => Some(Dim::Tp),
        Some("dp") => Some(Dim::Dp),
        Some("ep") => Some(Dim::Ep),
        Some(other) => return Err(format!("--group: got \"{other}\", expected tp, dp or ep")),
    };
    let comm = |w: &fabricsim::workload::Workload| match (&w.pattern, dim) {
        (Pattern::Model(m), Some(d)) => {
            let p = &m.parallel;
            let ranks: Vec<u64> = match d {
                Dim::Tp => (0..p.tp).map(|i| m.rank_of(i, 0, 0)).collect(),
                Dim::Dp => (0..p.dp).map(|i| m.rank_of(0, 0, i)).collect(),
                _ => (0..p.ep).map(|i| m.rank_of(0, 0, i)).collect(),
            };
            let gpus = ranks.iter().map(|&r| m.gpus[r as usize]).collect();
            Some((gpus, m.gpu.arch))
        }
        (_, Some(_)) => None,
        (Pattern::Collective(c), None) => Some((c.gpus.clone(), Arch::Hopper)),
        (Pattern::Training(t), None) => Some((t.gpus.clone(), Arch::Hopper)),
        (Pattern::Chakra(t), None) => Some((t.1.gpus.clone(), Arch::Hopper)),
        (Pattern::Model(m), None) => Some((m.gpus.clone(), m.gpu.arch)),
        _ => None,
    };
    let what = if dim.is_some() {
        "a model workload (--group)"
    } else {
        "a collective, training, model or Chakra workload"
    };
    let (gpus, arch) = match workload {
        Some(n) => {
            let w = ws.get(n).ok_or_else(|| {
                format!(
                    "--workload: got {n}, expected 0 to {}",
                    ws.len().saturating_sub(1)
                )
            })?;
            comm(w).ok_or_else(|| format!("--workload: entry {n} is not {what}"))?
        }
        None if dim.is_some() => ws
            .iter()
            .find_map(comm)
            .ok_or_else(|| "--group: the scenario has no model workload".to_string())?,
        None => ws.iter().find_map(comm).unwrap_or_else(|| {
            let all = (0..p.topology.gpus.len() as u32)
                .map(fabricsim::topology::GpuId)
                .collect();
            (all, Arch::Hopper)
        }),
    };
    if gpus.len() < 2 {
        return Err("the communicator has fewer than 2 GPUs: nothing to tune".into());
    }
    let host = Host {
        nvlink_bytes_per_s: p.scenario.host.nvlink_bytes_per_s,
        pcie_bytes_per_s: p.scenario.host.pcie_bytes_per_s,
        arch,
    };
    out!("{}", comm_shape(&p.topology, &host, &gpus).table(op));
    Ok(())
}

fn plan(
    params: &str,
    bytes_per_param: Option<f64>,
    training: bool,
    gpu_memory: &str,
    usable: f64,
    gpus_per_server: u32,
    json: bool,
) -> Result<(), String> {
    use fabricsim::plan::{self, PlanInput};
    let params = plan::parse_params(params).ok_or_else(|| {
        format!("--params: got \"{params}\", expected a count such as 405e9 or 70B")
    })?;
    let gpu_memory = fabricsim::units::parse_bytes(gpu_memory)
        .filter(|&b| b > 0)
        .ok_or_else(|| {
            format!("--gpu-memory: got \"{gpu_memory}\", expected a size such as 80GB")
        })?;
    let p = plan::plan(&PlanInput {
        params,
        bytes_per_param: bytes_per_param.unwrap_or(if training {
            plan::TRAINING_BYTES_PER_PARAM
        } else {
            2.0
        }),
        gpu_memory: gpu_memory as f64,
        usable,
        gpus_per_server,
    })?;
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&p).map_err(|e| e.to_string())?
        );
    } else {
        out!("{}", p.render());
    }
    Ok(())
}
