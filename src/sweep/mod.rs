//! Parameter sweeps: a base scenario, axes of values for any scenario
//! key, and seeds; expanded into a grid of points with stable ids, every
//! point checked before any runs, then run in parallel here or as the
//! tasks of a Slurm array job, each into its own result folder.
//!
//! The output folder holds `manifest.csv` (one row per point: its id,
//! folder, seed and axis values), `points/pNNNN/` (the point's results,
//! moved into place whole when the run ends), `points/pNNNN.error` (why a
//! point failed), and after a merge `sweep.csv` and `plots/`.
//!
//! Limits on each point (events, simulated and wall-clock time) stop it
//! early with its results kept and marked partial. An interrupt (Ctrl-C,
//! SIGTERM, a scheduler cancelling the task) stops the points running at
//! their next batch and starts no more; what they had done is dropped, so
//! running the sweep again picks them up.

pub mod merge;
pub mod slurm;

use std::fmt::Write as _;
use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::errln;
use rayon::prelude::*;
use serde::Deserialize;
use toml::Value;

use crate::engine::parallel::mpi::Ranks;
use crate::engine::{Limits, Simulation, StopReason};
use crate::report::{self, Perf, Summary};
use crate::scenario::{self, Prepared};

/// A sweep as written in its file, before expansion.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    base: Option<String>,
    seeds: Option<Value>,
    #[serde(default)]
    set: Vec<String>,
    #[serde(default)]
    axis: Vec<RawAxis>,
    slurm: Option<slurm::RawSlurm>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAxis {
    key: Option<String>,
    name: Option<String>,
    values: Option<Vec<Value>>,
    from: Option<Value>,
    to: Option<Value>,
    step: Option<Value>,
    unit: Option<String>,
}

/// One axis: a scenario key and the values it takes.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The dotted scenario key, as `--set` takes it.
    pub key: String,
    /// Its column in `manifest.csv` and `sweep.csv`.
    pub name: String,
    /// Each value as a TOML value (`"dlb"`, `8`, `"16us"`).
    pub values: Vec<Value>,
}

/// A sweep ready to expand.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The sweep file, as named on the command line.
    pub file: String,
    /// The base scenario's path (relative to the sweep file's folder in
    /// the file; resolved here) and text.
    pub base: PathBuf,
    pub base_text: String,
    /// Settings applied to every point before the axes.
    pub fixed: Vec<String>,
    pub axes: Vec<Axis>,
    /// `None`: every point keeps the base scenario's seed.
    pub seeds: Option<Vec<u64>>,
    pub slurm: slurm::Slurm,
    /// Settings the command line adds to every point after the axes
    /// (`--max-sim-time`); not part of the sweep's definition.
    pub extra: Vec<String>,
}

/// One point of the grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Its index in the expansion: stable for a given sweep file.
    pub id: usize,
    /// Index of its value on each axis.
    pub values: Vec<usize>,
    pub seed: Option<u64>,
}

/// How a value appears in the manifest and the tables: strings without
/// their quotes.
pub fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn err(file: &str, key: &str, message: impl std::fmt::Display) -> String {
    if key.is_empty() {
        format!("{file}: {message}")
    } else {
        format!("{file}: {key}: {message}")
    }
}

impl Sweep {
    /// Reads and checks a sweep file (not yet its points).
    pub fn load(path: &Path) -> Result<Sweep, String> {
        let file = path.display().to_string();
        let text = crate::input::read_text(path, crate::input::MAX_SCENARIO_BYTES, "sweep file")?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Sweep::parse(&file, &text, dir)
    }

    /// `dir` is where relative paths in the file start from.
    pub fn parse(file: &str, text: &str, dir: &Path) -> Result<Sweep, String> {
        let raw: RawSweep = {
            let de = toml::Deserializer::parse(text)
                .map_err(|e| err(file, "", format!("invalid TOML: {}", e.message())))?;
            serde_path_to_error::deserialize(de).map_err(|e| {
                let key = e.path().to_string();
                let key = if key == "." { String::new() } else { key };
                err(file, &key, e.inner().message())
            })?
        };
        let Some(base_name) = raw.base else {
            return Err(err(
                file,
                "base",
                "missing; expected the path of the base scenario, e.g. base = \"scenario.toml\"",
            ));
        };
        let base = dir.join(&base_name);
        let base_text =
            crate::input::read_text(&base, crate::input::MAX_SCENARIO_BYTES, "base scenario")
                .map_err(|e| err(file, "base", e))?;
        for (i, s) in raw.set.iter().enumerate() {
            if !s.contains('=') {
                return Err(err(
                    file,
                    &format!("set[{i}]"),
                    format!("got \"{s}\", expected KEY=VALUE, e.g. \"report.plots=false\""),
                ));
            }
        }
        let seeds = match raw.seeds {
            None => None,
            Some(v) => Some(seeds(&v).map_err(|m| err(file, "seeds", m))?),
        };
        let mut axes: Vec<Axis> = Vec::new();
        for (i, a) in raw.axis.iter().enumerate() {
            let axis = axis(a).map_err(|(k, m)| err(file, &format!("axis[{i}].{k}"), m))?;
            if let Some(j) = axes.iter().position(|b| b.name == axis.name) {
                return Err(err(
                    file,
                    &format!("axis[{i}]"),
                    format!("names the same column \"{}\" as axis[{j}]", axis.name),
                ));
            }
            if ["point", "dir", "seed", "status", "error"].contains(&axis.name.as_str()) {
                return Err(err(
                    file,
                    &format!("axis[{i}].name"),
                    format!(
                        "\"{}\" is a column of its own; give the axis another name",
                        axis.name
                    ),
                ));
            }
            axes.push(axis);
        }
        // The grid is refused before anything is expanded: five range
        // axes of 10,000 values would otherwise overflow the count.
        let mut sizes: Vec<usize> = axes.iter().map(|a| a.values.len()).collect();
        sizes.push(seeds.as_ref().map_or(1, Vec::len));
        let count = sizes
            .iter()
            .try_fold(1usize, |n, &k| n.checked_mul(k))
            .filter(|&n| n <= MAX_POINTS);
        if count.is_none() {
            let total: f64 = sizes.iter().map(|&k| k as f64).product();
            let parts: Vec<String> = sizes.iter().map(|k| k.to_string()).collect();
            return Err(err(
                file,
                "axis",
                format!(
                    "the grid has {total:.0} points ({}, the last factor being seeds); expected at most {MAX_POINTS}: split the study or use fewer values",
                    parts.join(" x ")
                ),
            ));
        }
        if count == Some(0) {
            return Err(err(
                file,
                "axis",
                "gives no points (an axis or the seeds have no values); expected at least one",
            ));
        }
        if axes.is_empty() && seeds.as_ref().is_none_or(|s| s.len() < 2) {
            return Err(err(
                file,
                "axis",
                "missing; a sweep needs at least one [[axis]] (key and values) or several seeds",
            ));
        }
        Ok(Sweep {
            file: file.to_string(),
            base,
            base_text,
            fixed: raw.set,
            axes,
            seeds,
            slurm: slurm::Slurm::from_raw(raw.slurm.as_ref()).map_err(|(k, m)| err(file, &k, m))?,
            extra: Vec::new(),
        })
    }

    /// Every point: the first axis varies slowest, seeds fastest.
    pub fn points(&self) -> Vec<Point> {
        let n_seeds = self.seeds.as_ref().map_or(1, Vec::len);
        let grid: usize = self.axes.iter().map(|a| a.values.len()).product();
        (0..grid * n_seeds)
            .map(|id| {
                let mut rest = id / n_seeds;
                let mut values = vec![0; self.axes.len()];
                for (slot, a) in values.iter_mut().zip(&self.axes).rev() {
                    *slot = rest % a.values.len();
                    rest /= a.values.len();
                }
                Point {
                    id,
                    values,
                    seed: self.seeds.as_ref().map(|s| s[id % n_seeds]),
                }
            })
            .collect()
    }

    /// The `--set`s that make a point's scenario from the base.
    pub fn sets(&self, p: &Point) -> Vec<String> {
        let mut sets = self.fixed.clone();
        for (a, &i) in self.axes.iter().zip(&p.values) {
            sets.push(format!("{}={}", a.key, a.values[i]));
        }
        if let Some(s) = p.seed {
            sets.push(format!("simulation.seed={s}"));
        }
        sets.extend(self.extra.iter().cloned());
        sets
    }

    /// A point's values as `key=value` for messages.
    pub fn describe(&self, p: &Point) -> String {
        let mut parts: Vec<String> = self
            .axes
            .iter()
            .zip(&p.values)
            .map(|(a, &i)| format!("{}={}", a.name, plain(&a.values[i])))
            .collect();
        if let Some(s) = p.seed {
            parts.push(format!("seed={s}"));
        }
        parts.join(" ")
    }

    /// The scenario of one point, checked.
    pub fn prepare(&self, p: &Point) -> Result<Prepared, String> {
        let name = self.base.display().to_string();
        scenario::prepare(&name, &self.base_text, &self.sets(p)).map_err(|e| {
            format!(
                "{}: point {} ({}): {e}",
                self.file,
                point_dir(p.id, self.points_len()),
                self.describe(p)
            )
        })
    }

    pub fn points_len(&self) -> usize {
        let grid: usize = self.axes.iter().map(|a| a.values.len()).product();
        grid * self.seeds.as_ref().map_or(1, Vec::len)
    }

    /// What, besides the manifest, decides every point's results: the
    /// base scenario's text (by CRC-32; its path may differ between a
    /// login node and the tasks) and the fixed settings.
    pub fn definition(&self) -> String {
        let crc = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC).checksum(self.base_text.as_bytes());
        let v = serde_json::json!({
            "base_crc32": format!("{crc:08x}"),
            "set": self.fixed,
        });
        serde_json::to_string_pretty(&v).expect("plain JSON") + "\n"
    }

    /// `manifest.csv`: one row per point. `seeds` holds each point's seed
    /// as its scenario resolved it.
    pub fn manifest(&self, seeds: &[u64]) -> String {
        let n = self.points_len();
        let mut w = csv::Writer::from_writer(Vec::new());
        let mut header = vec!["point".to_string(), "dir".into(), "seed".into()];
        header.extend(self.axes.iter().map(|a| a.name.clone()));
        w.write_record(&header).expect("in memory");
        for p in self.points() {
            let mut row = vec![
                p.id.to_string(),
                point_dir(p.id, n),
                seeds[p.id].to_string(),
            ];
            row.extend(
                self.axes
                    .iter()
                    .zip(&p.values)
                    .map(|(a, &i)| plain(&a.values[i])),
            );
            w.write_record(&row).expect("in memory");
        }
        String::from_utf8(w.into_inner().expect("in memory")).expect("UTF-8 fields")
    }
}

fn seeds(v: &Value) -> Result<Vec<u64>, String> {
    match v {
        Value::Integer(n) if (1..=100_000).contains(n) => Ok((1..=*n as u64).collect()),
        Value::Array(a) if !a.is_empty() => {
            let mut out = Vec::new();
            for x in a {
                match x {
                    Value::Integer(s) if *s >= 0 => {
                        if out.contains(&(*s as u64)) {
                            return Err(format!("seed {s} is listed twice"));
                        }
                        out.push(*s as u64);
                    }
                    other => {
                        return Err(format!(
                        "got {other}, expected non-negative integer seeds, e.g. seeds = [1, 2, 3]"
                    ))
                    }
                }
            }
            Ok(out)
        }
        other => Err(format!(
            "got {other}, expected a count (seeds = 3 runs seeds 1, 2 and 3) or a list of seeds"
        )),
    }
}

/// Most values one range may give.
const MAX_RANGE: usize = 10_000;

/// Most points in one sweep (axes' values times seeds).
pub const MAX_POINTS: usize = 100_000;

fn axis(a: &RawAxis) -> Result<Axis, (String, String)> {
    let e = |k: &str, m: String| (k.to_string(), m);
    let key = a.key.clone().ok_or_else(|| {
        e(
            "key",
            "missing; expected a scenario key as --set takes it, e.g. \"switch.balance.mode\""
                .into(),
        )
    })?;
    if key.trim().is_empty() || key.contains('=') {
        return Err(e(
            "key",
            format!("got \"{key}\", expected a dotted scenario key"),
        ));
    }
    let range = a.from.is_some() || a.to.is_some() || a.step.is_some();
    let values = match (&a.values, range) {
        (Some(_), true) => {
            return Err(e(
                "values",
                "given with from/to/step; an axis takes either a list of values or a range".into(),
            ))
        }
        (Some(v), false) if v.is_empty() => {
            return Err(e("values", "empty; expected at least one value".into()))
        }
        (Some(v), false) => {
            for (i, x) in v.iter().enumerate() {
                if matches!(x, Value::Array(_) | Value::Table(_)) {
                    return Err(e(
                        &format!("values[{i}]"),
                        format!("got {x}, expected a string, number or boolean"),
                    ));
                }
                if v[..i].contains(x) {
                    return Err(e(&format!("values[{i}]"), format!("{x} is listed twice")));
                }
            }
            if a.unit.is_some() {
                return Err(e(
                    "unit",
                    "only applies to a range; write the unit in each value, e.g. \"16us\"".into(),
                ));
            }
            v.clone()
        }
        (None, true) => range_values(a)?,
        (None, false) => {
            return Err(e(
                "values",
                "missing; expected values = [...] or a range (from, to, step)".into(),
            ))
        }
    };
    Ok(Axis {
        name: a.name.clone().unwrap_or_else(|| key.clone()),
        key,
        values,
    })
}

fn range_values(a: &RawAxis) -> Result<Vec<Value>, (String, String)> {
    let num = |k: &str, v: &Option<Value>| -> Result<Value, (String, String)> {
        match v {
            Some(x @ (Value::Integer(_) | Value::Float(_))) => Ok(x.clone()),
            Some(x) => Err((k.to_string(), format!("got {x}, expected a number"))),
            None => Err((
                k.to_string(),
                "missing; a range needs from, to and step".to_string(),
            )),
        }
    };
    let (from, to, step) = (
        num("from", &a.from)?,
        num("to", &a.to)?,
        num("step", &a.step)?,
    );
    let f = |v: &Value| {
        v.as_float()
            .or(v.as_integer().map(|i| i as f64))
            .unwrap_or(0.0)
    };
    let (lo, hi, st) = (f(&from), f(&to), f(&step));
    for (k, v, x) in [("from", &from, lo), ("to", &to, hi)] {
        if !x.is_finite() {
            return Err((k.into(), format!("got {v}, expected a finite number")));
        }
    }
    if !(st > 0.0 && st.is_finite()) {
        return Err((
            "step".into(),
            format!("got {step}, expected a positive number"),
        ));
    }
    if hi < lo {
        return Err((
            "to".into(),
            format!("got {to}, expected at least from ({from})"),
        ));
    }
    let count = ((hi - lo) / st + 1e-9).floor() + 1.0;
    if count > MAX_RANGE as f64 {
        return Err((
            "step".into(),
            format!("gives {count} values, expected at most {MAX_RANGE}"),
        ));
    }
    let integers = [&from, &to, &step]
        .iter()
        .all(|v| matches!(v, Value::Integer(_)));
    let mut out = Vec::new();
    for i in 0..count as i64 {
        let number = if integers {
            Value::Integer(from.as_integer().unwrap_or(0) + i * step.as_integer().unwrap_or(0))
        } else {
            // Rounded to 12 significant digits so that 0.1 steps print as
            // 0.3, not 0.30000000000000004.
            let x = lo + i as f64 * st;
            let x: f64 = format!("{x:.12e}").parse().unwrap_or(x);
            Value::Float(x)
        };
        out.push(match &a.unit {
            Some(u) => Value::String(format!("{}{u}", plain(&number))),
            None => number,
        });
    }
    Ok(out)
}

/// A point's folder name: `p` and its id, zero-padded to the same width
/// for every point of the sweep.
pub fn point_dir(id: usize, n: usize) -> String {
    let width = n.saturating_sub(1).to_string().len().max(4);
    format!("p{id:0width$}")
}

/// Where things go in a sweep's output folder.
pub struct Layout {
    pub root: PathBuf,
}

impl Layout {
    pub fn points(&self) -> PathBuf {
        self.root.join("points")
    }
    pub fn manifest(&self) -> PathBuf {
        self.root.join("manifest.csv")
    }
    pub fn result(&self, dir: &str) -> PathBuf {
        self.points().join(dir)
    }
    pub fn error(&self, dir: &str) -> PathBuf {
        self.points().join(format!("{dir}.error"))
    }
    /// A point counts as finished when its folder holds a whole summary:
    /// the folder is moved into place only once complete, but a file cut
    /// short or emptied later (a full disk, a hand) is not one, and the
    /// point runs again.
    pub fn finished(&self, dir: &str) -> bool {
        self.summary(dir).is_ok()
    }

    /// The point's summary, if its folder holds a whole one.
    pub fn summary(&self, dir: &str) -> Result<serde_json::Value, String> {
        let path = self.result(dir).join("summary.json");
        let text = fs::read_to_string(&path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a summary: {e}", path.display()))?;
        // What every summary has, whatever the run.
        for key in [
            "scenario",
            "stop_reason",
            "partial",
            "sim_time_ps",
            "makespan_ps",
        ] {
            if v.get(key).is_none() {
                return Err(format!(
                    "{}: not a whole summary (no \"{key}\")",
                    path.display()
                ));
            }
        }
        Ok(v)
    }
}

/// Writes a file whole or not at all (see `crate::output::write_atomic`).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    crate::output::write_atomic(path, bytes)
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// Writes `manifest.csv` and `definition.json`, or checks that those
/// there are this sweep's: a folder's finished points are reused only by
/// the same sweep.
fn settle_manifest(layout: &Layout, sweep: &Sweep, manifest: &str) -> Result<(), String> {
    // A folder that is neither new, nor empty, nor a sweep's is someone
    // else's: its files are not ours to overwrite.
    if !layout.manifest().is_file() {
        if let Ok(mut entries) = fs::read_dir(&layout.root) {
            if entries.next().is_some() {
                return Err(format!(
                    "{}: is not empty and holds no sweep (no manifest.csv); give a new or empty --out folder",
                    layout.root.display()
                ));
            }
        }
    }
    fs::create_dir_all(layout.points())
        .map_err(|e| format!("{}: cannot create: {e}", layout.points().display()))?;
    let definition = sweep.definition();
    for (path, text) in [
        (layout.root.join("definition.json"), definition.as_str()),
        (layout.manifest(), manifest),
    ] {
        match fs::read_to_string(&path) {
            Ok(old) if old == text => {}
            Ok(_) => {
                return Err(format!(
                    "{}: holds a different sweep (its base scenario, settings, points or values differ); give another --out folder, or remove this one to start over",
                    path.display()
                ))
            }
            Err(_) => write_atomic(&path, text.as_bytes())?,
        }
    }
    Ok(())
}

/// Checks every point, in parallel; returns each point's seed, or every
/// error found (at most a few shown).
fn validate_all(sweep: &Sweep, points: &[Point]) -> Result<Vec<u64>, String> {
    let results: Vec<Result<u64, String>> = points
        .par_iter()
        .map(|p| sweep.prepare(p).map(|pr| pr.scenario.seed))
        .collect();
    let errors: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    if errors.is_empty() {
        return Ok(results.into_iter().map(|r| r.unwrap_or(0)).collect());
    }
    let mut msg = String::new();
    for e in errors.iter().take(5) {
        let _ = writeln!(msg, "{e}");
    }
    if errors.len() > 5 {
        let _ = writeln!(msg, "... and {} more points", errors.len() - 5);
    }
    let _ = write!(
        msg,
        "{}: {} of {} points are invalid; nothing was run",
        sweep.file,
        errors.len(),
        points.len()
    );
    Err(msg)
}

/// Limits on each point's run, and the flag an interrupt raises.
#[derive(Clone, Debug, Default)]
pub struct PointLimits {
    pub max_events: Option<u64>,
    /// Simulated time, as written (`500us`); applied as the scenario
    /// setting `simulation.max_sim_time` (see `Sweep::extra`).
    pub max_sim_time: Option<String>,
    pub max_wall: Option<Duration>,
    pub interrupt: Option<Arc<AtomicBool>>,
}

impl PointLimits {
    fn engine(&self) -> Limits {
        Limits {
            max_events: self.max_events,
            max_wall: self.max_wall,
            interrupt: self.interrupt.clone(),
            max_memory: None,
            ..Limits::default()
        }
    }

    fn interrupted(&self) -> bool {
        self.interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// The same limits as `fabricsim sweep` arguments, for batch tasks.
    pub fn args(&self) -> Vec<String> {
        let mut a = Vec::new();
        if let Some(n) = self.max_events {
            a.extend(["--max-events".to_string(), n.to_string()]);
        }
        if let Some(t) = &self.max_sim_time {
            a.extend(["--max-sim-time".to_string(), t.clone()]);
        }
        if let Some(w) = self.max_wall {
            a.extend(["--max-wall".to_string(), format!("{}s", w.as_secs_f64())]);
        }
        a
    }
}

/// Which limit stopped a partial point, for messages.
pub fn limit_name(why: StopReason) -> &'static str {
    match why {
        StopReason::EventLimit => "max_events reached",
        StopReason::SimTimeLimit => "max_sim_time reached",
        StopReason::WallLimit => "max_wall reached",
        StopReason::MemoryLimit => "max_memory reached",
        StopReason::Stalled => "stalled",
        StopReason::Deadlock => "PFC deadlock",
        _ => "stopped early",
    }
}

/// What became of one point.
#[derive(Debug)]
pub enum Ran {
    /// Run to its end, or to a limit (`partial`, with the reason).
    Done {
        wall_seconds: f64,
        partial: Option<StopReason>,
    },
    AlreadyDone,
    /// Stopped by an interrupt; nothing of it was kept.
    Interrupted,
    /// Not started: an interrupt came first.
    NotStarted,
    /// Run as an MPI rank other than 0, which writes the results.
    OtherRank,
}

/// Runs one point into its folder, unless it is already there; as one
/// of several MPI ranks when `ranks` is given (rank 0 writes the folder,
/// the others only simulate). A panic in the simulation is caught and
/// reported as this point's failure.
pub fn run_point(
    sweep: &Sweep,
    layout: &Layout,
    p: &Point,
    limits: &PointLimits,
    ranks: Option<&Ranks>,
) -> Result<Ran, String> {
    let n = sweep.points_len();
    let dir = point_dir(p.id, n);
    let lead = ranks.is_none_or(|r| r.rank() == 0);
    let mut done = layout.finished(&dir);
    if let Some(r) = ranks {
        // Ranks agree, so that none waits for the others alone.
        done = !r.all(!done);
    }
    if done {
        return Ok(Ran::AlreadyDone);
    }
    if ranks.is_none() && limits.interrupted() {
        return Ok(Ran::NotStarted);
    }
    let staging = if lead {
        Some(
            crate::output::stage_in(&layout.points(), "point")
                .map_err(|e| format!("{}: cannot write: {e}", layout.points().display())),
        )
    } else {
        None
    };
    let building = Instant::now();
    let prepared = sweep.prepare(p);
    if let Some(r) = ranks {
        let ready = prepared.is_ok() && staging.as_ref().is_none_or(|s| s.is_ok());
        if !r.all(ready) && ready {
            return Err("another MPI rank could not start the point".into());
        }
    }
    let staging = staging.transpose()?;
    let mut prepared = prepared?;
    if ranks.is_some() {
        // Each rank runs one partition.
        prepared.scenario.threads = 1;
    }
    let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<Ran, String> {
        let source = (prepared.scenario.threads > 1).then(|| prepared.clone());
        let sim = Simulation::new(prepared);
        let build_seconds = building.elapsed().as_secs_f64();
        let start = Instant::now();
        let (sim, stop) = match ranks {
            None => {
                crate::engine::parallel::run_on_threads(sim, source, &limits.engine(), &mut |_| {})
            }
            Some(r) => {
                match crate::engine::parallel::mpi::run(sim, r, &limits.engine(), &mut |_| {}) {
                    Some(done) => done,
                    None => return Ok(Ran::OtherRank),
                }
            }
        };
        let wall = start.elapsed().as_secs_f64();
        if stop == StopReason::Interrupted {
            return Ok(Ran::Interrupted);
        }
        let stage = staging
            .as_ref()
            .expect("the lead rank stages")
            .path()
            .to_path_buf();
        let summary = Summary::of(&sim, stop);
        let perf = Perf::of(&sim, wall).built_in(build_seconds);
        report::write_outputs(&stage, &sim, &summary, &perf)
            .map_err(|e| format!("cannot write the results: {e}"))?;
        let dst = layout.result(&dir);
        if dst.is_dir() {
            fs::remove_dir_all(&dst)
                .map_err(|e| format!("{}: cannot replace: {e}", dst.display()))?;
        }
        fs::rename(&stage, &dst).map_err(|e| {
            format!(
                "cannot move the results into place at {}: {e}",
                dst.display()
            )
        })?;
        Ok(Ran::Done {
            wall_seconds: wall,
            partial: stop.is_partial().then_some(stop),
        })
    }))
    .unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(format!("the simulation panicked: {what}"))
    });
    drop(staging);
    match outcome {
        Ok(Ran::Interrupted) => Ok(Ran::Interrupted),
        Ok(Ran::OtherRank) => Ok(Ran::OtherRank),
        Ok(ran) => {
            let _ = fs::remove_file(layout.error(&dir));
            Ok(ran)
        }
        Err(e) if !lead => Err(e),
        Err(e) => {
            let msg = format!("{dir} ({}): {e}", sweep.describe(p));
            // The reason is kept for the merge; failing to keep it does
            // not hide it, as it is also returned.
            let _ = write_atomic(&layout.error(&dir), format!("{msg}\n").as_bytes());
            Err(msg)
        }
    }
}

/// Options of a local sweep.
pub struct Local {
    /// Points run at once.
    pub jobs: usize,
    pub quiet: bool,
    pub limits: PointLimits,
}

/// What a local sweep did.
pub struct Outcome {
    pub points: usize,
    pub ran: usize,
    pub already_done: usize,
    /// Run now but stopped by a limit (kept, marked partial).
    pub partial: usize,
    /// Stopped by an interrupt, or not started because of one.
    pub interrupted: usize,
    pub failures: Vec<String>,
}

/// Checks every point, writes the manifest, and prepares the folder; the
/// common start of a local sweep and of emitting a batch job.
pub fn settle(sweep: &Sweep, out: &Path) -> Result<(Layout, Vec<Point>), String> {
    let points = sweep.points();
    let seeds = validate_all(sweep, &points)?;
    let layout = Layout {
        root: out.to_path_buf(),
    };
    settle_manifest(&layout, sweep, &sweep.manifest(&seeds))?;
    Ok((layout, points))
}

/// Runs every point not yet finished, `jobs` at a time, then merges.
pub fn run_local(sweep: &Sweep, out: &Path, opts: &Local) -> Result<Outcome, String> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.jobs.max(1))
        .build()
        .map_err(|e| format!("cannot start {} worker threads: {e}", opts.jobs))?;
    let (layout, points) = pool.install(|| settle(sweep, out))?;
    remove_stale_stages(&layout);
    let n = points.len();
    let pending: Vec<&Point> = points
        .iter()
        .filter(|p| !layout.finished(&point_dir(p.id, n)))
        .collect();
    let already_done = n - pending.len();
    if !opts.quiet {
        errln!(
            "sweep: {n} points, {already_done} already done, running {} on {} threads",
            pending.len(),
            opts.jobs.max(1)
        );
    }
    let finished = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Result<Ran, String>> = pool.install(|| {
        pending
            .par_iter()
            .map(|p| {
                let r = run_point(sweep, &layout, p, &opts.limits, None);
                let k = finished.fetch_add(1, Ordering::Relaxed) + 1;
                if !opts.quiet {
                    let dir = point_dir(p.id, n);
                    let of = pending.len();
                    let what = sweep.describe(p);
                    match &r {
                        Ok(Ran::Done {
                            wall_seconds,
                            partial: None,
                        }) => errln!("[{k}/{of}] {dir} done in {wall_seconds:.2} s  {what}"),
                        Ok(Ran::Done {
                            wall_seconds,
                            partial: Some(why),
                        }) => errln!(
                            "[{k}/{of}] {dir} PARTIAL ({}) after {wall_seconds:.2} s  {what}",
                            limit_name(*why)
                        ),
                        Ok(Ran::Interrupted) => errln!("[{k}/{of}] {dir} interrupted  {what}"),
                        Ok(Ran::AlreadyDone | Ran::NotStarted | Ran::OtherRank) => {}
                        Err(e) => errln!("[{k}/{of}] FAILED {e}"),
                    }
                }
                r
            })
            .collect()
    });
    let mut o = Outcome {
        points: n,
        ran: 0,
        already_done,
        partial: 0,
        interrupted: 0,
        failures: Vec::new(),
    };
    for r in results {
        match r {
            Ok(Ran::Done { partial, .. }) => {
                o.ran += 1;
                o.partial += usize::from(partial.is_some());
            }
            Ok(Ran::AlreadyDone | Ran::OtherRank) => o.already_done += 1,
            Ok(Ran::Interrupted | Ran::NotStarted) => o.interrupted += 1,
            Err(e) => o.failures.push(e),
        }
    }
    Ok(o)
}

/// Removes the staging folders of runs that were stopped: a local sweep
/// is the only one writing into its folder.
fn remove_stale_stages(layout: &Layout) {
    crate::output::remove_dead_leftovers(&layout.root);
    crate::output::remove_dead_leftovers(&layout.points());
    let Ok(entries) = fs::read_dir(layout.points()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(".p") && name.contains(".partial-") {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// Runs the one point `id` (an array task's index), after checking it.
pub fn run_one(
    sweep: &Sweep,
    out: &Path,
    id: usize,
    limits: &PointLimits,
    ranks: Option<&Ranks>,
) -> Result<Ran, String> {
    let points = sweep.points();
    let Some(p) = points.get(id) else {
        return Err(format!(
            "--point {id}: {} has {} points, numbered 0 to {}",
            sweep.file,
            points.len(),
            points.len() - 1
        ));
    };
    let seed = sweep.prepare(p)?.scenario.seed;
    let layout = Layout {
        root: out.to_path_buf(),
    };
    // The manifest is normally written when the job is emitted; a task
    // started another way writes it, with every point's seed resolved
    // (under MPI, rank 0 does).
    if !layout.manifest().is_file() && ranks.is_none_or(|r| r.rank() == 0) {
        let mut seeds = vec![seed; points.len()];
        for q in &points {
            if q.id != id {
                seeds[q.id] = sweep.prepare(q)?.scenario.seed;
            }
        }
        settle_manifest(&layout, sweep, &sweep.manifest(&seeds))?;
    }
    run_point(sweep, &layout, p, limits, ranks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(text: &str) -> Result<Sweep, String> {
        let dir = std::env::temp_dir().join(format!("fabricsim-sweep-unit-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("base.toml"),
            "[topology]\nkind = \"fat-tree\"\nk = 4\n",
        )
        .unwrap();
        Sweep::parse("s.toml", text, &dir)
    }

    #[test]
    fn the_grid_varies_the_last_axis_fastest_and_seeds_fastest_of_all() {
        let s = sweep(
            "base = \"base.toml\"\nseeds = 2\n[[axis]]\nkey = \"a.x\"\nvalues = [\"p\", \"q\"]\n[[axis]]\nkey = \"b\"\nvalues = [1, 2, 3]\n",
        )
        .unwrap();
        let pts = s.points();
        assert_eq!(pts.len(), 12);
        assert_eq!(s.points_len(), 12);
        assert_eq!(pts[0].values, vec![0, 0]);
        assert_eq!(pts[0].seed, Some(1));
        assert_eq!(pts[1].values, vec![0, 0]);
        assert_eq!(pts[1].seed, Some(2));
        assert_eq!(pts[2].values, vec![0, 1]);
        assert_eq!(pts[6].values, vec![1, 0]);
        assert_eq!(pts[11].values, vec![1, 2]);
        assert_eq!(
            s.sets(&pts[7]),
            vec!["a.x=\"q\"", "b=1", "simulation.seed=2"]
        );
        assert_eq!(s.describe(&pts[7]), "a.x=q b=1 seed=2");
    }

    #[test]
    fn a_range_gives_numbers_or_sizes_with_a_unit() {
        let s = sweep(
            "base = \"base.toml\"\n[[axis]]\nkey = \"t\"\nfrom = 4\nto = 16\nstep = 4\nunit = \"us\"\n[[axis]]\nkey = \"w\"\nfrom = 0.1\nto = 0.3\nstep = 0.1\n",
        )
        .unwrap();
        let plain_values =
            |i: usize| -> Vec<String> { s.axes[i].values.iter().map(plain).collect() };
        assert_eq!(plain_values(0), vec!["4us", "8us", "12us", "16us"]);
        assert_eq!(plain_values(1), vec!["0.1", "0.2", "0.3"]);
    }

    #[test]
    fn folder_names_share_one_width() {
        assert_eq!(point_dir(3, 12), "p0003");
        assert_eq!(point_dir(12_345, 20_000), "p12345");
        assert_eq!(point_dir(7, 20_000), "p00007");
    }

    #[test]
    fn mistakes_in_a_sweep_file_name_the_key() {
        let cases = [
            (
                "[[axis]]\nkey = \"x\"\nvalues = [1]\n",
                "s.toml: base: missing",
            ),
            (
                "base = \"nope.toml\"\n[[axis]]\nkey = \"x\"\nvalues = [1]\n",
                "s.toml: base: cannot read",
            ),
            ("base = \"base.toml\"\n", "s.toml: axis: missing"),
            (
                "base = \"base.toml\"\n[[axis]]\nvalues = [1]\n",
                "s.toml: axis[0].key: missing",
            ),
            (
                "base = \"base.toml\"\n[[axis]]\nkey = \"x\"\nvalues = []\n",
                "axis[0].values: empty",
            ),
            (
                "base = \"base.toml\"\n[[axis]]\nkey = \"x\"\nvalues = [1, 1]\n",
                "axis[0].values[1]: 1 is listed twice",
            ),
            (
                "base = \"base.toml\"\n[[axis]]\nkey = \"x\"\nfrom = 1\nto = 5\nstep = 0\n",
                "axis[0].step: got 0, expected a positive number",
            ),
            (
                "base = \"base.toml\"\n[[axis]]\nkey = \"x\"\nfrom = 5\nto = 1\nstep = 1\n",
                "axis[0].to: got 1",
            ),
            (
                "base = \"base.toml\"\n[[axis]]\nkey = \"x\"\nvalues = [1]\nfrom = 1\n",
                "axis[0].values: given with from/to/step",
            ),
            (
                "base = \"base.toml\"\nseeds = 0\n[[axis]]\nkey = \"x\"\nvalues = [1]\n",
                "s.toml: seeds: got 0",
            ),
            ("base = \"base.toml\"\nsead = 2\n", "unknown field `sead`"),
            (
                "base = \"base.toml\"\nset = [\"report.plots\"]\nseeds = 2\n",
                "s.toml: set[0]: got \"report.plots\", expected KEY=VALUE",
            ),
            (
                "base = \"base.toml\"\n[[axis]]\nkey = \"x\"\nname = \"seed\"\nvalues = [1]\n",
                "axis[0].name: \"seed\" is a column of its own",
            ),
            (
                "base = \"base.toml\"\n[[axis]]\nkey = \"x\"\nfrom = 0\nto = 1e9\nstep = 1\n",
                "expected at most 10000",
            ),
        ];
        for (text, want) in cases {
            let got = sweep(text)
                .err()
                .unwrap_or_else(|| panic!("accepted:\n{text}"));
            assert!(got.contains(want), "for:\n{text}\ngot: {got}\nwant: {want}");
        }
    }
}
