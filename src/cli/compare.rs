//! `fabricsim compare`: several runs, or one at several fidelities, side by
//! side.

use super::common::{check_memory, engine_limits, load_within, warnings};
use crate::LimitArgs;
use fabricsim::engine::Simulation;
use fabricsim::report::{self, Perf, Summary};
use fabricsim::units::SimTime;
use fabricsim::{errln, out, outln};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Loads every scenario first (nothing runs if one is wrong), runs each
/// under the limits (a run stopped by one is kept, marked partial),
/// writes its outputs and prints the comparison. Ctrl-C stops the run
/// going on, writes it, prints what ran and exits with 130.
pub(crate) fn compare(
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
pub(crate) fn fidelity_list(list: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = list.split(',').map(|f| f.trim().to_string()).collect();
    for f in &names {
        if fabricsim::scenario::Fidelity::from_name(f).is_none() {
            return Err(format!(
                "--fidelity: got {f:?} in {list:?}, expected a list of packet, flow and hybrid (e.g. packet,flow,hybrid)"
            ));
        }
    }
    Ok(names)
}

/// `compare --fidelity packet,flow --random N --seed S`: N scenarios the
/// generator draws (`scenario::random`), each run at every fidelity;
/// prints each one's errors against the first fidelity and their
/// distribution. The scenarios are kept in `OUT/scenarios/` so that any
/// can be run again.
pub(crate) fn compare_random(
    (n, seed): (u64, u64),
    fidelities: &[String],
    markdown: bool,
    sets: &[String],
    out: &Path,
    limit_args: &LimitArgs,
) -> Result<(), String> {
    let (limits, max_memory) = engine_limits(limit_args)?;
    if fidelities.len() < 2 {
        return Err(
            "--random compares fidelities: give --fidelity with two or more (e.g. packet,flow)"
                .into(),
        );
    }
    fabricsim::output::check_writable(out)?;
    let dir = out.join("scenarios");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut groups = Vec::new();
    // Each other fidelity's errors against the first.
    let mut errors = vec![Vec::new(); fidelities.len() - 1];
    let mut interrupted = false;
    'scenarios: for i in 0..n {
        let (name, text) = fabricsim::scenario::random::scenario(seed, i);
        let path = dir.join(format!("{name}.toml"));
        fabricsim::output::write_atomic(&path, text.as_bytes())
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
        let mut figures = Vec::new();
        for f in fidelities {
            let mut sets = sets.to_vec();
            sets.push(format!("simulation.fidelity={f:?}"));
            let pr = load_within(Some(&path), &sets, max_memory)?;
            check_memory(Some(&path), &pr, max_memory, pr.scenario.threads)?;
            let building = Instant::now();
            let source = (pr.scenario.threads > 1).then(|| pr.clone());
            let sim = Simulation::new(pr);
            let build_seconds = building.elapsed().as_secs_f64();
            let start = Instant::now();
            let (sim, stop) =
                fabricsim::engine::parallel::run_on_threads(sim, source, &limits, &mut |_| {});
            let summary = Summary::of(&sim, stop);
            let perf = Perf::of(&sim, start.elapsed().as_secs_f64()).built_in(build_seconds);
            figures.push(report::fidelity::Figures::of(&sim, &summary, &perf));
            if stop == fabricsim::engine::StopReason::Interrupted {
                interrupted = true;
                break 'scenarios;
            }
        }
        errln!("{}/{n} {name}", i + 1);
        for (k, other) in figures[1..].iter().enumerate() {
            errors[k].push(report::fidelity::Errors::of(other, &figures[0]));
        }
        groups.push((name, figures));
    }
    out!("{}", report::fidelity::table(&groups, markdown));
    outln!();
    for (k, errors) in errors.iter().enumerate() {
        outln!("{} against {}:", fidelities[k + 1], fidelities[0]);
        out!("{}", report::fidelity::distribution(errors, markdown));
        outln!();
    }
    outln!("scenarios {}/", dir.display());
    if interrupted {
        errln!("interrupted: {} of {n} scenarios ran", groups.len());
        std::process::exit(130);
    }
    Ok(())
}
