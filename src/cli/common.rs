//! What the subcommands share: loading a scenario, its warnings, the
//! engine's limits from the command line, the memory check.

use crate::LimitArgs;
use fabricsim::report::{self};
use fabricsim::scenario::{self, Prepared, ScenarioError};
use fabricsim::{errln, input, out, outln};
use std::path::Path;

/// A wall-clock duration: a number and ms, s, min or h.
pub(crate) fn parse_wall(s: &str) -> Result<std::time::Duration, String> {
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

pub(crate) fn mb(bytes: u64) -> String {
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
pub(crate) fn interrupt_flag() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>, String> {
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

pub(crate) fn load(path: Option<&Path>, sets: &[String]) -> Result<Prepared, String> {
    load_within(path, sets, None)
}

/// Loads a scenario with its workloads held to `limit` bytes as they are
/// made, or to the memory the machine has available
/// (`scenario::prepare_within`).
pub(crate) fn load_within(
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

/// Prints the scenario's threshold warnings; with `strict` they are an
/// error and nothing runs.
pub(crate) fn warnings(path: Option<&Path>, p: &Prepared, strict: bool) -> Result<(), String> {
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
pub(crate) fn engine_limits(
    args: &LimitArgs,
) -> Result<(fabricsim::engine::Limits, Option<u64>), String> {
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
pub(crate) fn check_memory(
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
pub(crate) struct How {
    pub(crate) quiet: bool,
    pub(crate) strict: bool,
    pub(crate) mpi: bool,
    pub(crate) encode_partitions: bool,
}

/// Prints a report as pretty JSON, or as the text it renders to.
pub(crate) fn print_json_or(
    json: bool,
    value: &impl serde::Serialize,
    text: impl FnOnce() -> String,
) -> Result<(), String> {
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(value).map_err(|e| e.to_string())?
        );
    } else {
        out!("{}", text());
    }
    Ok(())
}
