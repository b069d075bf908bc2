//! One scenario at two fidelities side by side (`fabricsim compare
//! --fidelity packet,flow`): each headline figure of the flow level
//! against the packet level, with its relative error, and how much
//! faster it ran.

use super::{Perf, Summary};
use crate::engine::Simulation;
use std::fmt::Write;

/// What a run is compared on.
#[derive(Clone, Debug)]
pub struct Figures {
    pub fidelity: String,
    pub partial: bool,
    pub makespan_ps: u64,
    /// Completion times of the transfers made up front (`fct_ps`).
    pub mean_fct_ps: Option<f64>,
    pub p99_fct_ps: Option<f64>,
    /// Each collective's time, in the order of `collectives.csv`.
    pub collective_ps: Vec<Option<u64>>,
    /// The jobs' mean iteration times.
    pub iteration_ps: Vec<Option<f64>>,
    /// Each link's utilization over the makespan (its busy time over it).
    pub link_util: Vec<f64>,
    pub wall_seconds: f64,
}

impl Figures {
    pub fn of(sim: &Simulation, s: &Summary, perf: &Perf) -> Figures {
        let span = s.makespan_ps.max(1) as f64;
        Figures {
            fidelity: s.fidelity.clone(),
            partial: s.partial,
            makespan_ps: s.makespan_ps,
            mean_fct_ps: s.fct_ps.as_ref().map(|d| d.mean),
            p99_fct_ps: s.fct_ps.as_ref().map(|d| d.p99),
            collective_ps: s.collectives.iter().map(|c| c.time_ps).collect(),
            iteration_ps: s.jobs.iter().map(|j| j.mean_iteration_ps).collect(),
            link_util: sim
                .ports()
                .iter()
                .map(|p| (p.busy_ps as f64 / span).min(1.0))
                .collect(),
            // A hybrid run's flow-level pre-run (in its build) is part of
            // what it costs.
            wall_seconds: perf.wall_seconds
                + perf
                    .hybrid_region
                    .as_ref()
                    .map_or(0.0, |_| perf.build_seconds.unwrap_or(0.0)),
        }
    }
}

/// The errors of `other` against `reference` (fractions; `None` where a
/// run has no such figure).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Errors {
    pub makespan: Option<f64>,
    pub mean_fct: Option<f64>,
    pub p99_fct: Option<f64>,
    /// The mean of each collective's error, over those both finished.
    pub collective: Option<f64>,
    /// The mean of each job's mean iteration time's error.
    pub iteration: Option<f64>,
    /// Per-link utilization: the sum over links of the absolute
    /// difference over the sum of the reference's (a relative L1 error;
    /// never negative).
    pub link_util: Option<f64>,
    /// Reference wall time over the other's.
    pub speedup: f64,
}

fn rel(other: f64, reference: f64) -> Option<f64> {
    (reference > 0.0).then(|| other / reference - 1.0)
}

/// Mean relative error of pairs both runs have.
fn mean_rel<T: Copy + Into<f64>>(other: &[Option<T>], reference: &[Option<T>]) -> Option<f64> {
    let errs: Vec<f64> = other
        .iter()
        .zip(reference)
        .filter_map(|(o, r)| rel((*o)?.into(), (*r)?.into()))
        .collect();
    (!errs.is_empty()).then(|| errs.iter().sum::<f64>() / errs.len() as f64)
}

impl Errors {
    pub fn of(other: &Figures, reference: &Figures) -> Errors {
        let opt = |o: Option<f64>, r: Option<f64>| rel(o?, r?);
        let (collective, collective_ref) = (
            as_f64(&other.collective_ps),
            as_f64(&reference.collective_ps),
        );
        let used: f64 = reference.link_util.iter().sum();
        let diff: f64 = other
            .link_util
            .iter()
            .zip(&reference.link_util)
            .map(|(o, r)| (o - r).abs())
            .sum();
        Errors {
            makespan: rel(other.makespan_ps as f64, reference.makespan_ps as f64),
            mean_fct: opt(other.mean_fct_ps, reference.mean_fct_ps),
            p99_fct: opt(other.p99_fct_ps, reference.p99_fct_ps),
            collective: mean_rel(&collective, &collective_ref),
            iteration: mean_rel(&other.iteration_ps, &reference.iteration_ps),
            link_util: (used > 0.0).then(|| diff / used),
            speedup: reference.wall_seconds / other.wall_seconds.max(1e-6),
        }
    }
}

/// One row per scenario: its runs' headline figures at the first
/// fidelity and each other's error against it, and the wall times. As a
/// Markdown table with `markdown`.
pub fn table(scenarios: &[(String, Vec<Figures>)], markdown: bool) -> String {
    let pct = |e: Option<f64>| e.map_or("-".to_string(), |e| format!("{:+.1}%", e * 100.0));
    let us = |ps: f64| format!("{:.1} us", ps / 1e6);
    let mut header = vec![
        "scenario".to_string(),
        "fidelity".to_string(),
        "makespan".to_string(),
        "error".to_string(),
        "mean FCT".to_string(),
        "p99 FCT".to_string(),
        "collective".to_string(),
        "iteration".to_string(),
        "link util.".to_string(),
        "wall s".to_string(),
        "speedup".to_string(),
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (name, runs) in scenarios {
        let Some(reference) = runs.first() else {
            continue;
        };
        let partial = |f: &Figures| if f.partial { " (partial)" } else { "" };
        rows.push(vec![
            name.clone(),
            format!("{}{}", reference.fidelity, partial(reference)),
            us(reference.makespan_ps as f64),
            String::new(),
            reference.mean_fct_ps.map_or("-".into(), us),
            reference.p99_fct_ps.map_or("-".into(), us),
            mean_of(&as_f64(&reference.collective_ps)).map_or("-".into(), us),
            mean_of(&reference.iteration_ps).map_or("-".into(), us),
            format!("{:.1}% mean", mean_util(reference) * 100.0),
            format!("{:.3}", reference.wall_seconds),
            String::new(),
        ]);
        for other in &runs[1..] {
            let e = Errors::of(other, reference);
            rows.push(vec![
                String::new(),
                format!("{}{}", other.fidelity, partial(other)),
                us(other.makespan_ps as f64),
                pct(e.makespan),
                pct(e.mean_fct),
                pct(e.p99_fct),
                pct(e.collective),
                pct(e.iteration),
                e.link_util
                    .map_or("-".into(), |x| format!("{:.1}% off", x * 100.0)),
                format!("{:.3}", other.wall_seconds),
                format!("{:.0}x", e.speedup),
            ]);
        }
    }
    if markdown {
        header[3] = "makespan error".to_string();
    }
    let mut o = render(&header, &rows, markdown);
    if markdown {
        return o;
    }
    o.push_str(
        "errors against the first fidelity; FCT of transfers made up front; collective and iteration: the mean of each one's error; link util.: per-link utilization, sum of differences over the sum of the first's\n",
    );
    o
}

/// Rows under a header, as a Markdown table or in aligned columns (the
/// first to the left, the others to the right).
fn render(header: &[String], rows: &[Vec<String>], markdown: bool) -> String {
    let mut o = String::new();
    if markdown {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        o.push_str(&line(header));
        o.push_str(&line(&vec!["---".to_string(); header.len()]));
        for r in rows {
            o.push_str(&line(r));
        }
        return o;
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in std::iter::once(header).chain(rows.iter().map(Vec::as_slice)) {
        for (i, (c, w)) in r.iter().zip(&widths).enumerate() {
            if i == 0 {
                let _ = write!(o, "{c:<w$}");
            } else {
                let _ = write!(o, "  {c:>w$}");
            }
        }
        o.push('\n');
    }
    o
}

fn as_f64(v: &[Option<u64>]) -> Vec<Option<f64>> {
    v.iter().map(|x| x.map(|x| x as f64)).collect()
}

fn mean_of<T: Copy + Into<f64>>(v: &[Option<T>]) -> Option<f64> {
    let x: Vec<f64> = v.iter().filter_map(|x| x.map(Into::into)).collect();
    (!x.is_empty()).then(|| x.iter().sum::<f64>() / x.len() as f64)
}

fn mean_util(f: &Figures) -> f64 {
    let used: Vec<f64> = f.link_util.iter().copied().filter(|&u| u > 0.0).collect();
    used.iter().sum::<f64>() / used.len().max(1) as f64
}

/// The distribution of each figure's error over many scenarios (the
/// absolute errors' median, 90th percentile and maximum, over the
/// scenarios that have the figure), and of the speedup.
pub fn distribution(errors: &[Errors], markdown: bool) -> String {
    fn quantile(sorted: &[f64], q: f64) -> f64 {
        // Nearest rank.
        let at = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
        sorted[at]
    }
    type Get = fn(&Errors) -> Option<f64>;
    let figures: [(&str, Get); 6] = [
        ("makespan", |e| e.makespan),
        ("mean FCT", |e| e.mean_fct),
        ("p99 FCT", |e| e.p99_fct),
        ("collective", |e| e.collective),
        ("iteration", |e| e.iteration),
        ("link util.", |e| e.link_util),
    ];
    let mut rows = Vec::new();
    for (name, get) in figures {
        let mut v: Vec<f64> = errors.iter().filter_map(get).map(f64::abs).collect();
        if v.is_empty() {
            continue;
        }
        v.sort_by(f64::total_cmp);
        let pct = |x: f64| format!("{:.1}%", x * 100.0);
        rows.push(vec![
            name.to_string(),
            v.len().to_string(),
            pct(quantile(&v, 0.5)),
            pct(quantile(&v, 0.9)),
            pct(quantile(&v, 1.0)),
        ]);
    }
    let mut s: Vec<f64> = errors.iter().map(|e| e.speedup).collect();
    s.sort_by(f64::total_cmp);
    if !s.is_empty() {
        let x = |v: f64| {
            if v < 10.0 {
                format!("{v:.1}x")
            } else {
                format!("{v:.0}x")
            }
        };
        rows.push(vec![
            "speedup".into(),
            s.len().to_string(),
            x(quantile(&s, 0.5)),
            x(quantile(&s, 0.1)),
            x(s[0]),
        ]);
    }
    let header: Vec<String> = ["figure", "scenarios", "median", "90th pct.", "worst"]
        .map(String::from)
        .to_vec();
    let mut o = render(&header, &rows, markdown);
    if markdown {
        return o;
    }
    o.push_str("absolute errors against the first fidelity (speedup: the median, the 10th percentile and the least)\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(fidelity: &str, makespan: u64, util: Vec<f64>, wall: f64) -> Figures {
        Figures {
            fidelity: fidelity.into(),
            partial: false,
            makespan_ps: makespan,
            mean_fct_ps: Some(makespan as f64 / 2.0),
            p99_fct_ps: Some(makespan as f64),
            collective_ps: vec![Some(100), None, Some(300)],
            iteration_ps: vec![],
            link_util: util,
            wall_seconds: wall,
        }
    }

    #[test]
    fn errors_are_relative_to_the_reference() {
        let p = figures("packet", 1000, vec![0.5, 0.5, 0.0], 2.0);
        let mut f = figures("flow", 900, vec![0.4, 0.6, 0.1], 0.02);
        f.collective_ps = vec![Some(110), Some(5), Some(240)];
        let e = Errors::of(&f, &p);
        assert!((e.makespan.unwrap() + 0.1).abs() < 1e-12);
        assert!((e.mean_fct.unwrap() + 0.1).abs() < 1e-12);
        // (+10% and -20%) / 2; the second finished in one run only.
        assert!((e.collective.unwrap() + 0.05).abs() < 1e-12);
        assert_eq!(e.iteration, None);
        // |0.1| + |0.1| + |0.1| over 1.0.
        assert!((e.link_util.unwrap() - 0.3).abs() < 1e-12);
        assert!((e.speedup - 100.0).abs() < 1e-9);
        let t = table(&[("s".into(), vec![p, f])], false);
        assert!(
            t.contains("-10.0%") && t.contains("-5.0%") && t.contains("100x"),
            "{t}"
        );
    }

    /// The distribution takes absolute errors, by nearest rank, over the
    /// scenarios that have each figure.
    #[test]
    fn the_distribution_is_of_absolute_errors_by_nearest_rank() {
        let errors: Vec<Errors> = (1..=10)
            .map(|i| Errors {
                makespan: Some(if i % 2 == 0 {
                    0.01 * i as f64
                } else {
                    -0.01 * i as f64
                }),
                mean_fct: (i <= 4).then_some(0.1),
                speedup: 10.0 * i as f64,
                ..Errors::default()
            })
            .collect();
        let d = distribution(&errors, true);
        assert!(d.contains("| makespan | 10 | 5.0% | 9.0% | 10.0% |"), "{d}");
        assert!(
            d.contains("| mean FCT | 4 | 10.0% | 10.0% | 10.0% |"),
            "{d}"
        );
        assert!(d.contains("| speedup | 10 | 50x | 10x | 10x |"), "{d}");
        assert!(!d.contains("p99 FCT"), "{d}");
    }
}
