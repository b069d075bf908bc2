//! `fabricsim run`: one scenario, on threads or as an MPI rank.

use super::common::{check_memory, engine_limits, load_within, warnings, How};
use crate::{LimitArgs, ViewArgs};
use fabricsim::engine::capture::CaptureSpec;
use fabricsim::engine::parallel::mpi::Ranks;
use fabricsim::engine::Simulation;
use fabricsim::report::{self, Perf, Summary};
use fabricsim::scenario::{self};
use fabricsim::{errln, out, outln};
use std::io::IsTerminal;
use std::path::Path;
use std::time::Instant;

/// Runs a scenario, as one of several MPI ranks when asked; the exit
/// status (0, or that of an interrupted or stuck run, results written).
pub(crate) fn run_as_asked(
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

pub(crate) fn run(
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
        let fidelity = prepared.scenario.fidelity;
        if fidelity == scenario::Fidelity::Flow && capture.is_some() {
            return Err("--capture: a flow-level run (simulation.fidelity = \"flow\") has no packets to capture".into());
        }
        if fidelity != scenario::Fidelity::Packet && ranks.is_some_and(|r| r.size() > 1) {
            return Err(format!(
                "--mpi: a {} run (simulation.fidelity = \"{}\") runs on one rank",
                if fidelity == scenario::Fidelity::Flow {
                    "flow-level"
                } else {
                    "hybrid"
                },
                fidelity.name()
            ));
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
pub(crate) const EXIT_STUCK: u8 = 3;
