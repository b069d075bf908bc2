//! The `fabricsim` command line: run, validate, topo, compare, sweep,
//! merge, plan, bench.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use fabricsim::errln;

mod cli;

use cli::common::How;
use cli::compare::{compare, fidelity_list};
use cli::config::config_import;
use cli::nccl::nccl;
use cli::plan::plan;
use cli::run::run_as_asked;
use cli::sweep::{merge, run_sweep};
use cli::topo::{topo, topo_ports};
use cli::validate::validate;

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
enum ImportCommand {
    /// Read Megatron-LM's launch arguments (or a launch script's) and
    /// print the `kind = "model"` keys they map to, each with the flags
    /// it comes from, then the flags not modelled. `kind = "megatron"`
    /// reads the same flags in a scenario.
    Megatron {
        /// The arguments, as given to pretrain_gpt.py (quoted as one, or
        /// after `--`).
        #[arg(allow_hyphen_values = true, trailing_var_arg = true)]
        args: Vec<String>,
        /// A launch script: the arguments it gives its Python program
        /// come first.
        #[arg(long)]
        script: Option<PathBuf>,
        /// GPUs of the job (for the default global batch, micro-batch x
        /// DP).
        #[arg(long)]
        gpus: Option<u64>,
    },
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
    /// Write the NX-OS or Junos configuration that makes a switch of the
    /// scenario classify, queue, mark, pause and balance as the scenario
    /// says (the reverse of import; what the language cannot say is
    /// listed in a comment at the top).
    Export {
        scenario: PathBuf,
        /// nxos or junos.
        #[arg(long)]
        os: String,
        /// The switch, by name (default: the first, e.g. leaf0).
        #[arg(long)]
        switch: Option<String>,
        /// Change a scenario key first (repeatable), as with run.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
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
        /// `packet` (default), `flow`: transfers as fluids at max-min
        /// fair rates on the same paths, or `hybrid`: packets through the
        /// switches where queues build, fluids elsewhere (as
        /// simulation.fidelity).
        #[arg(long, value_name = "packet|flow|hybrid")]
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
    /// A training job's own settings: `import megatron ARGS` prints the
    /// scenario keys Megatron-LM's arguments map to.
    Import {
        #[command(subcommand)]
        what: ImportCommand,
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
        /// parallelism (tp, dp, ep or cp) instead of the whole job.
        #[arg(long, value_name = "DIM")]
        group: Option<String>,
        #[command(flatten)]
        args: ScenarioArgs,
    },
    /// Run several scenarios (e.g. one workload under different
    /// balancers) and print their headline figures side by side.
    Compare {
        /// Scenario files: two or more, or one with --fidelity.
        #[arg(required_unless_present = "random", num_args = 1..)]
        scenarios: Vec<PathBuf>,
        /// With --fidelity: instead of files, this many scenarios drawn
        /// at random (fabric, balancing, congestion control, PFC,
        /// workloads), and the distribution of each figure's error.
        #[arg(
            long,
            value_name = "N",
            conflicts_with = "scenarios",
            requires = "fidelity"
        )]
        random: Option<u64>,
        /// The draw of --random: the same seed, the same scenarios.
        #[arg(long, value_name = "S", default_value_t = 1, requires = "random")]
        seed: u64,
        /// Run each scenario at each of these fidelities (e.g.
        /// `packet,flow,hybrid`) and print, besides the side-by-side table, each
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
        #[arg(long, required_unless_present_any = ["megatron", "script"])]
        params: Option<String>,
        /// A training job as Megatron-LM's arguments (quoted as one): its
        /// memory per GPU (weights, gradients, optimizer, activations) for
        /// its parallelism, whether it fits (an error if not, with by how
        /// much), and the smallest TP x PP that does.
        #[arg(long, allow_hyphen_values = true, conflicts_with = "params")]
        megatron: Option<String>,
        /// A launch script whose pretrain_gpt.py arguments give the job
        /// (read before those --megatron gives).
        #[arg(long, conflicts_with = "params")]
        script: Option<PathBuf>,
        /// GPUs of the job given by --megatron or --script.
        #[arg(long, default_value_t = 8)]
        gpus: u64,
        /// Bytes per parameter (default 2, BF16 weights; 16 with --training).
        #[arg(long)]
        bytes_per_param: Option<f64>,
        /// Mixed-precision training with Adam: 16 bytes per parameter.
        #[arg(long)]
        training: bool,
        /// Memory of one GPU [default: 80GB, or the --host preset's].
        #[arg(long)]
        gpu_memory: Option<String>,
        /// Share of each GPU's memory the parameters may take.
        #[arg(long, default_value_t = 1.0)]
        usable: f64,
        /// GPUs per server (NVLink domain) [default: 8, or the --host
        /// preset's]; tensor parallelism stays inside one.
        #[arg(long)]
        gpus_per_server: Option<u32>,
        /// A host preset (dgx-h100, gb200-nvl72, gb300-nvl72, mi300x):
        /// its GPU memory and domain size.
        #[arg(long)]
        host: Option<String>,
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
        Command::Config {
            what:
                ConfigCommand::Export {
                    scenario,
                    os,
                    switch,
                    sets,
                },
        } => cli::config::config_export(&scenario, &os, switch.as_deref(), &sets),
        Command::Import {
            what: ImportCommand::Megatron { args, script, gpus },
        } => cli::import::import_megatron(&args, script.as_deref(), gpus),
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
            random,
            seed,
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
                .and_then(|f| match (random, f) {
                    (Some(n), Some(f)) => {
                        cli::compare::compare_random((n, seed), &f, markdown, &sets, &out, &limits)
                    }
                    (_, f) => compare(&scenarios, f.as_deref(), markdown, &sets, &out, &limits),
                })
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
            params: None,
            megatron,
            script,
            gpus,
            gpu_memory,
            usable,
            gpus_per_server,
            host,
            json,
            ..
        } => cli::plan::machine(host.as_deref(), gpu_memory, gpus_per_server).and_then(
            |(gpu_memory, gpus_per_server)| {
                cli::plan::plan_job(&cli::plan::JobPlan {
                    args: megatron.as_deref(),
                    script: script.as_deref(),
                    gpus,
                    gpu_memory: &gpu_memory,
                    usable,
                    gpus_per_server,
                    json,
                })
            },
        ),
        Command::Plan {
            params: Some(params),
            bytes_per_param,
            training,
            gpu_memory,
            usable,
            gpus_per_server,
            host,
            json,
            ..
        } => cli::plan::machine(host.as_deref(), gpu_memory, gpus_per_server).and_then(
            |(gpu_memory, gpus_per_server)| {
                plan(
                    &params,
                    bytes_per_param,
                    training,
                    &gpu_memory,
                    usable,
                    gpus_per_server,
                    json,
                )
            },
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
