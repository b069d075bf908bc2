//! `fabricsim merge DIR`: every point of a sweep in one table,
//! `sweep.csv` (axes as columns, headline metrics per point), and one
//! plot per metric against each axis.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use plotters::prelude::*;
use serde_json::Value;

use super::{write_atomic, Layout};
use crate::report::plots::PALETTE;

/// A headline metric: its column, what the plot's axis says, and how it
/// is read from a point's `summary.json`.
struct Metric {
    column: &'static str,
    label: &'static str,
    read: fn(&Value) -> Option<f64>,
}

fn num(v: &Value, path: &[&str]) -> Option<f64> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_f64()
}

fn ps_to_us(x: Option<f64>) -> Option<f64> {
    x.map(|ps| ps / 1e6)
}

const METRICS: &[Metric] = &[
    Metric {
        column: "makespan_us",
        label: "makespan (us)",
        read: |s| ps_to_us(num(s, &["makespan_ps"])),
    },
    Metric {
        column: "fct_mean_us",
        label: "mean completion time (us)",
        read: |s| ps_to_us(num(s, &["fct_ps", "mean"])),
    },
    Metric {
        column: "fct_p99_us",
        label: "p99 completion time (us)",
        read: |s| ps_to_us(num(s, &["fct_ps", "p99"])),
    },
    Metric {
        column: "slowdown_p99",
        label: "p99 slowdown (x)",
        read: |s| num(s, &["slowdown", "p99"]),
    },
    Metric {
        column: "busbw_gbps",
        label: "mean bus bandwidth of the collectives (Gb/s)",
        read: |s| {
            let v: Vec<f64> = s
                .get("collectives")?
                .as_array()?
                .iter()
                .filter_map(|c| c.get("busbw_gbps")?.as_f64())
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        },
    },
    Metric {
        column: "max_queue_bytes",
        label: "largest queue (bytes)",
        read: |s| num(s, &["max_queue_bytes"]),
    },
    Metric {
        column: "pfc_pause_frames",
        label: "PFC pause frames",
        read: |s| num(s, &["pfc_pause_frames"]),
    },
    Metric {
        column: "pfc_paused_us",
        label: "time paused by PFC, summed over ports (us)",
        read: |s| ps_to_us(num(s, &["pfc_paused_ps"])),
    },
    Metric {
        column: "ecn_marks",
        label: "ECN marks",
        read: |s| num(s, &["ecn_marks"]),
    },
    Metric {
        column: "drops",
        label: "dropped packets",
        read: |s| num(s, &["drops"]),
    },
    Metric {
        column: "timeouts",
        label: "retransmission timeouts",
        read: |s| num(s, &["timeouts"]),
    },
    Metric {
        column: "uplink_imbalance",
        label: "uplink imbalance (max / mean bytes)",
        read: |s| num(s, &["uplink_imbalance"]),
    },
];

/// One row of the manifest with what became of it.
struct Row {
    fields: Vec<String>,
    status: &'static str,
    summary: Option<Value>,
    error: String,
}

/// What a merge found.
pub struct Merged {
    pub points: usize,
    /// Points run to their end.
    pub done: usize,
    /// Points a limit stopped early (in `sweep.csv`, not in the plots).
    pub partial: usize,
    pub failed: Vec<String>,
    pub missing: Vec<String>,
    pub plots: usize,
    pub table: String,
}

fn read_manifest(layout: &Layout) -> Result<(Vec<String>, Vec<Vec<String>>), String> {
    let path = layout.manifest();
    let text = fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: cannot read the sweep's manifest: {e} (is this a `fabricsim sweep` output folder?)",
            path.display()
        )
    })?;
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = r
        .headers()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .iter()
        .map(str::to_string)
        .collect();
    if header.len() < 3 || header[..3] != ["point", "dir", "seed"] {
        return Err(format!(
            "{}: expected the columns point, dir, seed and the axes; got {}",
            path.display(),
            header.join(",")
        ));
    }
    let mut rows = Vec::new();
    for rec in r.records() {
        let rec = rec.map_err(|e| format!("{}: {e}", path.display()))?;
        let row: Vec<String> = rec.iter().map(str::to_string).collect();
        let dir = &row[1];
        if dir.is_empty() || dir.contains(['/', '\\']) || dir.starts_with('.') {
            return Err(format!(
                "{}: point folder \"{dir}\" is not a plain name",
                path.display()
            ));
        }
        rows.push(row);
    }
    Ok((header, rows))
}

fn format_value(x: Option<f64>) -> String {
    x.map_or(String::new(), |v| format!("{v}"))
}

/// Writes `sweep.csv` and the plots; says what it found. Points that
/// failed or have not run yet are rows with their status, without
/// metrics.
pub fn merge(out: &Path) -> Result<Merged, String> {
    let layout = Layout {
        root: out.to_path_buf(),
    };
    let (header, manifest) = read_manifest(&layout)?;
    let axes: Vec<String> = header[3..].to_vec();
    let mut rows = Vec::new();
    for fields in manifest {
        let dir = fields[1].clone();
        let summary = layout.summary(&dir);
        let row = if let Ok(v) = summary {
            // A point a limit stopped early has results, but not the run's;
            // one whose fabric stopped moving says so in its status.
            let partial = v.get("partial").and_then(Value::as_bool) == Some(true);
            let reason = v.get("stop_reason").and_then(Value::as_str).unwrap_or("");
            let status = if reason.starts_with("stalled") {
                "stalled"
            } else if reason.starts_with("PFC deadlock") {
                "deadlock"
            } else if partial {
                "partial"
            } else {
                "done"
            };
            Row {
                fields,
                status,
                summary: Some(v),
                error: String::new(),
            }
        } else if let Ok(e) = fs::read_to_string(layout.error(&dir)) {
            Row {
                fields,
                status: "failed",
                summary: None,
                error: e.trim().to_string(),
            }
        } else if layout.result(&dir).join("summary.json").exists() {
            // Results cut short or emptied: not done; the sweep runs the
            // point again.
            Row {
                fields,
                status: "corrupt",
                summary: None,
                error: summary.err().unwrap_or_default(),
            }
        } else {
            Row {
                fields,
                status: "missing",
                summary: None,
                error: String::new(),
            }
        };
        rows.push(row);
    }

    let mut w = csv::Writer::from_writer(Vec::new());
    let mut head: Vec<&str> = header.iter().map(String::as_str).collect();
    head.extend(["status", "complete", "events"]);
    head.extend(METRICS.iter().map(|m| m.column));
    head.push("error");
    w.write_record(&head).map_err(|e| e.to_string())?;
    for r in &rows {
        let mut rec = r.fields.clone();
        rec.push(r.status.to_string());
        let s = r.summary.as_ref();
        rec.push(
            s.and_then(|s| s.get("complete")?.as_bool())
                .map_or(String::new(), |b| b.to_string()),
        );
        rec.push(format_value(s.and_then(|s| num(s, &["events"]))));
        for m in METRICS {
            rec.push(format_value(s.and_then(m.read)));
        }
        rec.push(r.error.clone());
        w.write_record(&rec).map_err(|e| e.to_string())?;
    }
    let csv = w.into_inner().map_err(|e| e.to_string())?;
    write_atomic(&out.join("sweep.csv"), &csv)?;

    let plots = write_plots(out, &axes, &rows)?;
    let done = rows.iter().filter(|r| r.status == "done").count();
    let partial = rows
        .iter()
        .filter(|r| matches!(r.status, "partial" | "stalled" | "deadlock"))
        .count();
    let failed = rows
        .iter()
        .filter(|r| r.status == "failed")
        .map(|r| r.error.clone())
        .collect();
    let missing = rows
        .iter()
        .filter(|r| matches!(r.status, "missing" | "corrupt"))
        .map(|r| r.fields[1].clone())
        .collect();
    let mut table = table(&axes, &rows);
    let on_timer: Vec<&str> = rows
        .iter()
        .filter(|r| {
            r.summary
                .as_ref()
                .and_then(|s| s.get("ended_on_timer")?.as_bool())
                == Some(true)
        })
        .map(|r| r.fields[1].as_str())
        .collect();
    if !on_timer.is_empty() {
        table.push_str(&format!(
            "note      {} of {} points ended on a retransmission timeout ({}): their makespans are mostly that wait, and their rates are averaged over it (`ended_on_timer` in their summary.json; a shorter transport.rto ends them sooner)\n",
            on_timer.len(),
            rows.len(),
            match on_timer.len() {
                0..=12 => on_timer.join(", "),
                n => format!("{} and {} more", on_timer[..12].join(", "), n - 12),
            }
        ));
    }
    Ok(Merged {
        points: rows.len(),
        done,
        partial,
        failed,
        missing,
        plots,
        table,
    })
}

/// The headline columns of the first points, for the terminal.
fn table(axes: &[String], rows: &[Row]) -> String {
    const SHOWN: usize = 40;
    let cols = [
        "makespan_us",
        "fct_p99_us",
        "slowdown_p99",
        "max_queue_bytes",
        "pfc_pause_frames",
        "drops",
    ];
    let mut head: Vec<String> = vec!["point".into(), "seed".into()];
    head.extend(axes.iter().cloned());
    head.push("status".into());
    head.extend(cols.iter().map(|c| c.to_string()));
    let mut lines: Vec<Vec<String>> = vec![head];
    for r in rows.iter().take(SHOWN) {
        let mut l = vec![r.fields[1].clone(), r.fields[2].clone()];
        l.extend(r.fields[3..].iter().cloned());
        l.push(r.status.to_string());
        for c in cols {
            let m = METRICS.iter().find(|m| m.column == c).expect("listed");
            l.push(r.summary.as_ref().and_then(m.read).map_or("-".into(), |v| {
                if v.fract() == 0.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.2}")
                }
            }));
        }
        lines.push(l);
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|i| lines.iter().map(|l| l[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for l in &lines {
        let cells: Vec<String> = l
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    if rows.len() > SHOWN {
        let _ = writeln!(out, "... {} more points in sweep.csv", rows.len() - SHOWN);
    }
    out
}

/// A file name part from a column name.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// `plots/METRIC-by-AXIS.svg` for every metric some point has: the axis's
/// values along x, every point a dot (coloured by seed), the mean over
/// the other axes and seeds a line. Each is written whole; plots an
/// earlier merge wrote and this one did not are removed, and nothing
/// else in `plots/` is.
fn write_plots(out: &Path, axes: &[String], rows: &[Row]) -> Result<usize, String> {
    let dir = out.join("plots");
    // A link there would take the plots, and the removal of old ones,
    // into wherever it points.
    if fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(format!(
            "{} is a symbolic link; the plots go into a folder of the sweep's own: remove the link",
            dir.display()
        ));
    }
    fs::create_dir_all(&dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let mut written = Vec::new();
    let result = (|| -> Result<usize, String> {
        let seeds: Vec<&str> = {
            let mut s: Vec<&str> = rows.iter().map(|r| r.fields[2].as_str()).collect();
            s.sort_by_key(|x| (x.parse::<u64>().unwrap_or(u64::MAX), x.to_string()));
            s.dedup();
            s
        };
        let mut count = 0;
        for (a, axis) in axes.iter().enumerate() {
            let mut values: Vec<&str> = Vec::new();
            for r in rows {
                let v = r.fields[3 + a].as_str();
                if !values.contains(&v) {
                    values.push(v);
                }
            }
            for m in METRICS {
                let pts: Vec<(usize, usize, f64)> = rows
                    .iter()
                    .filter(|r| r.status == "done")
                    .filter_map(|r| {
                        let y = r.summary.as_ref().and_then(m.read)?;
                        let x = values.iter().position(|v| *v == r.fields[3 + a])?;
                        let s = seeds.iter().position(|s| *s == r.fields[2]).unwrap_or(0);
                        Some((x, s, y))
                    })
                    .collect();
                if pts.is_empty() {
                    continue;
                }
                let svg = plot(m, axis, &values, &seeds, &pts)?;
                let path = dir.join(format!("{}-by-{}.svg", m.column, slug(axis)));
                write_atomic(&path, svg.as_bytes())?;
                written.push(path);
                count += 1;
            }
        }
        Ok(count)
    })();
    // Plots of an earlier merge that this one did not draw again go;
    // anything else in the folder stays.
    let count = result?;
    crate::output::replace_manifest(&dir, &written)
        .map_err(|e| format!("{}: cannot write: {e}", dir.display()))?;
    Ok(count)
}

fn plot(
    m: &Metric,
    axis: &str,
    values: &[&str],
    seeds: &[&str],
    pts: &[(usize, usize, f64)],
) -> Result<String, String> {
    let e = |x: &dyn std::fmt::Debug| format!("plot {}: {x:?}", m.column);
    let ymax = pts.iter().map(|p| p.2).fold(0.0, f64::max);
    let ymin = pts.iter().map(|p| p.2).fold(0.0, f64::min);
    let pad = ((ymax - ymin) * 0.08).max(1e-9);
    let n = values.len();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 450)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{} by {axis}", m.label), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(75)
            .build_cartesian_2d(-0.5f64..n as f64 - 0.5, ymin.min(0.0)..ymax + pad)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(axis)
            .y_desc(m.label)
            .x_labels(n.min(24) * 2 + 1)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    values
                        .get(i as usize)
                        .map_or(String::new(), |v| v.to_string())
                } else {
                    String::new()
                }
            })
            .draw()
            .map_err(|x| e(&x))?;
        // Seeds side by side around each value.
        let spread = if seeds.len() > 1 { 0.3 } else { 0.0 };
        let offset = |s: usize| {
            if seeds.len() > 1 {
                -spread / 2.0 + spread * s as f64 / (seeds.len() - 1) as f64
            } else {
                0.0
            }
        };
        for (k, seed) in seeds.iter().enumerate() {
            let colour = PALETTE[k % PALETTE.len()];
            let series = chart
                .draw_series(
                    pts.iter()
                        .filter(|p| p.1 == k)
                        .map(|p| Circle::new((p.0 as f64 + offset(p.1), p.2), 4, colour.filled())),
                )
                .map_err(|x| e(&x))?;
            if seeds.len() > 1 && k < 12 {
                series
                    .label(format!("seed {seed}"))
                    .legend(move |(x, y)| Circle::new((x, y), 4, colour.filled()));
            }
        }
        let means: Vec<(f64, f64)> = (0..n)
            .filter_map(|x| {
                let ys: Vec<f64> = pts.iter().filter(|p| p.0 == x).map(|p| p.2).collect();
                (!ys.is_empty()).then(|| (x as f64, ys.iter().sum::<f64>() / ys.len() as f64))
            })
            .collect();
        chart
            .draw_series(LineSeries::new(means, BLACK.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label("mean")
            .legend(|(x, y)| PathElement::new(vec![(x - 8, y), (x + 8, y)], BLACK.stroke_width(2)));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|x| e(&x))?;
        root.present().map_err(|x| e(&x))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_read_what_the_summary_says() {
        let s: Value = serde_json::json!({
            "makespan_ps": 2_000_000,
            "fct_ps": {"mean": 1_000_000.0, "p99": 1_500_000.0},
            "slowdown": null,
            "collectives": [{"busbw_gbps": 100.0}, {"busbw_gbps": null}, {"busbw_gbps": 300.0}],
        });
        let get = |c: &str| (METRICS.iter().find(|m| m.column == c).unwrap().read)(&s);
        assert_eq!(get("makespan_us"), Some(2.0));
        assert_eq!(get("fct_p99_us"), Some(1.5));
        assert_eq!(get("slowdown_p99"), None);
        assert_eq!(get("busbw_gbps"), Some(200.0));
        assert_eq!(get("drops"), None);
    }
}
