//! SVG plots of a run, drawn with plotters: what a network engineer looks
//! at first. Every plot is written even when its subject did not occur
//! (it then says so), so a run's set of files does not depend on what
//! happened in it.

use super::series::Kind;
use crate::engine::series::Series;
use crate::engine::Simulation;
use crate::switch::classify::QUEUES;
use crate::topology::{Owner, PortId};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::borrow::Cow;

const W: u32 = 960;
const H: u32 = 540;
const FONT: &str = "sans-serif";
/// Most rows a heatmap shows (the busiest), and most columns.
pub const HEATMAP_ROWS: usize = 96;
pub const HEATMAP_COLS: usize = 100;
/// Most lines a line plot shows.
const LINES: usize = 6;
/// Most points of the slowdown scatter plot.
const SCATTER: usize = 1500;
/// Most equal-cost groups shown.
const GROUPS: usize = 12;

pub(crate) const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

type Res = Result<(), String>;
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Draw = fn(&Simulation, &Area) -> Res;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// Every plot: (file name, SVG text).
pub fn all(sim: &Simulation) -> Result<Vec<(&'static str, String)>, String> {
    let mut out = Vec::new();
    let plots: [(&'static str, Draw); 9] = [
        ("plot_link_util.svg", link_heatmap),
        ("plot_queue_depth.svg", queue_depth),
        ("plot_pfc_pause.svg", pfc_timeline),
        ("plot_ecn_cnp.svg", ecn_cnp),
        ("plot_fct_cdf.svg", fct_cdf),
        ("plot_slowdown.svg", slowdown),
        ("plot_qp_rate.svg", qp_rate),
        ("plot_group_bytes.svg", group_bytes),
        ("plot_timeline.svg", timeline),
    ];
    for (name, draw) in plots {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
            root.fill(&WHITE).map_err(err)?;
            draw(sim, &root)?;
            root.present().map_err(err)?;
        }
        out.push((name, svg));
    }
    // Serving's latencies, when the run serves.
    if sim.serving().is_some() {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
            root.fill(&WHITE).map_err(err)?;
            serving_cdf(sim, &root)?;
            root.present().map_err(err)?;
        }
        out.push(("plot_serving.svg", svg));
    }
    // The fabric, coloured by the run (`fabric`).
    let colour = super::fabric::Colouring::of(sim);
    let title = format!("{}: the fabric after the run", sim.scenario().name);
    let map = super::fabric::draw(sim.topo(), Some(&colour), &title);
    out.push(("plot_fabric.svg", map.svg));
    Ok(out)
}

/// A plot with nothing to show says why.
fn empty(root: &Area, title: &str, why: &str) -> Res {
    root.titled(title, (FONT, 20)).map_err(err)?;
    root.draw(&Text::new(
        why.to_string(),
        (40, (H / 2) as i32),
        (FONT, 16).into_font(),
    ))
    .map_err(err)
}

/// The busiest links (by bytes sent), ordered by tier pair and then by
/// name, with the label of each tier pair.
pub fn heatmap_links(sim: &Simulation) -> Vec<(PortId, String)> {
    let topo = &sim.topo();
    let names = topo.kind.tier_names();
    let tier = |p: PortId| match topo.port(p).owner {
        Owner::Switch(s) => names[topo.switches[s.idx()].tier as usize],
        Owner::Nic(_) => "nic",
    };
    let mut busy: Vec<(u64, u32)> = sim
        .series()
        .link_util
        .series()
        .into_keys()
        .map(|k| (sim.ports()[k as usize].tx_wire_bytes, k))
        .collect();
    busy.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    busy.truncate(HEATMAP_ROWS);
    let mut rows: Vec<(i32, i32, u32)> = busy
        .iter()
        .map(|&(_, k)| {
            let p = PortId(k);
            (topo.owner_tier(p), topo.owner_tier(topo.port(p).peer), k)
        })
        .collect();
    // Up the tiers first, then down.
    rows.sort_by_key(|&(a, b, k)| (b < a, if b < a { -a } else { a }, k));
    rows.into_iter()
        .map(|(_, _, k)| {
            let p = PortId(k);
            (p, format!("{}->{}", tier(p), tier(topo.port(p).peer)))
        })
        .collect()
}

/// How many of `len` buckets a column spans for at most `cols` columns
/// (a power of two).
pub fn span_for(len: usize, cols: usize) -> usize {
    let mut span = 1;
    while len.div_ceil(span) > cols {
        span *= 2;
    }
    span
}

/// Merges buckets pairwise (by mean) until at most `cols` remain:
/// returns the values and how many buckets each column spans.
pub fn columns(v: &[f32], cols: usize) -> (Vec<f32>, usize) {
    let span = span_for(v.len(), cols);
    let out = v
        .chunks(span)
        .map(|c| c.iter().sum::<f32>() / c.len() as f32)
        .collect();
    (out, span)
}

/// White through blue to red.
fn heat(v: f64, hot: RGBColor) -> RGBColor {
    let v = v.clamp(0.0, 1.0);
    let mix = |a: u8, b: u8, t: f64| (a as f64 + (b as f64 - a as f64) * t).round() as u8;
    let cool = RGBColor(49, 130, 189);
    if v < 0.5 {
        let t = v * 2.0;
        RGBColor(
            mix(255, cool.0, t),
            mix(255, cool.1, t),
            mix(255, cool.2, t),
        )
    } else {
        let t = (v - 0.5) * 2.0;
        RGBColor(
            mix(cool.0, hot.0, t),
            mix(cool.1, hot.1, t),
            mix(cool.2, hot.2, t),
        )
    }
}

/// Rows of values over time as coloured cells; runs of cells of the same
/// colour are drawn as one rectangle, zeros not at all.
#[allow(clippy::too_many_arguments)]
fn heatmap(
    root: &Area,
    title: &str,
    series: &Series,
    rows: &[(String, Cow<[f32]>, String)],
    rows_desc: &str,
    value_desc: &str,
    scale: f64,
    hot: RGBColor,
) -> Res {
    let t_end = series.last.0 as f64 / 1e6;
    let (main, legend) = root.split_horizontally(W - 90);
    let mut chart = ChartBuilder::on(&main)
        .caption(title, (FONT, 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(190)
        .build_cartesian_2d(0f64..t_end.max(1e-6), 0f64..rows.len() as f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("time (us)")
        .y_desc(format!("{} {rows_desc}, grouped by tier", rows.len()))
        .y_labels(0)
        .label_style((FONT, 11))
        .draw()
        .map_err(err)?;
    let mut cells = Vec::new();
    let interval = series.interval.0 as f64 / 1e6;
    for (r, (_, values, _)) in rows.iter().enumerate() {
        let (cols, span) = columns(values, HEATMAP_COLS);
        let width = interval * span as f64;
        let level = |v: f32| ((v as f64 / scale).clamp(0.0, 1.0) * 16.0).round() as u32;
        let mut c = 0;
        while c < cols.len() {
            let l = level(cols[c]);
            let mut e = c + 1;
            while e < cols.len() && level(cols[e]) == l {
                e += 1;
            }
            if l > 0 {
                let x0 = c as f64 * width;
                let x1 = (e as f64 * width).min(t_end);
                let y = (rows.len() - 1 - r) as f64;
                cells.push(Rectangle::new(
                    [(x0, y), (x1, y + 1.0)],
                    heat(l as f64 / 16.0, hot).filled(),
                ));
            }
            c = e;
        }
    }
    chart.draw_series(cells).map_err(err)?;
    // Tier boundaries.
    let mut boundaries = Vec::new();
    for r in 1..rows.len() {
        if rows[r].2 != rows[r - 1].2 {
            let y = (rows.len() - r) as f64;
            boundaries.push(PathElement::new(vec![(0.0, y), (t_end, y)], BLACK));
        }
    }
    chart.draw_series(boundaries).map_err(err)?;
    // Row names at row centres, every row if they fit.
    let row_px = (H as f64 - 90.0) / rows.len() as f64;
    let every = (11.0 / row_px).ceil().max(1.0) as usize;
    for (r, row) in rows.iter().enumerate().step_by(every) {
        let y = (rows.len() - 1 - r) as f64 + 0.5;
        let (px, py) = chart.backend_coord(&(0.0, y));
        let style = (FONT, 10)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Right, VPos::Center));
        root.draw(&Text::new(row.0.clone(), (px - 6, py), style))
            .map_err(err)?;
    }
    // The colour scale.
    let bar = legend.margin(60, 60, 10, 40);
    let (_, h) = bar.dim_in_pixel();
    for i in 0..h {
        let v = 1.0 - i as f64 / h as f64;
        bar.draw(&Rectangle::new(
            [(0, i as i32), (16, i as i32 + 1)],
            heat(v, hot).filled(),
        ))
        .map_err(err)?;
    }
    let style = (FONT, 11).into_font();
    bar.draw(&Text::new(format!("{scale}"), (18, 0), style.clone()))
        .map_err(err)?;
    bar.draw(&Text::new("0", (18, h as i32 - 10), style.clone()))
        .map_err(err)?;
    bar.draw(&Text::new(
        value_desc.to_string(),
        (-50, h as i32 + 14),
        style,
    ))
    .map_err(err)?;
    Ok(())
}

fn link_heatmap(sim: &Simulation, root: &Area) -> Res {
    let title = "Link utilization";
    if !sim.series().enabled {
        return empty(
            root,
            title,
            "no time series: [report] sample_interval is \"off\"",
        );
    }
    let links = heatmap_links(sim);
    if links.is_empty() {
        return empty(root, title, "no link carried traffic");
    }
    let rows: Vec<(String, Cow<[f32]>, String)> = links
        .iter()
        .map(|(p, tier)| {
            let v = sim.series().link_util.get(p.0).unwrap_or_default();
            (sim.topo().link_name(*p), v, tier.clone())
        })
        .collect();
    let desc = format!("busiest links of {}", sim.series().link_util.len());
    heatmap(
        root,
        title,
        sim.series(),
        &rows,
        &desc,
        "utilization",
        1.0,
        RGBColor(215, 48, 39),
    )
}

/// Keys of a group's series with the largest values first (by peak).
fn top_by_peak(g: &crate::engine::series::Group, n: usize) -> Vec<u32> {
    let mut v: Vec<(f32, u32)> = g
        .iter()
        .map(|(k, s)| (s.iter().copied().fold(0.0, f32::max), k))
        .collect();
    v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    v.into_iter().take(n).map(|(_, k)| k).collect()
}

/// Lines over time: (name, values scaled, colour, dashed), a value per
/// interval of `interval` microseconds.
struct Line {
    name: String,
    values: Vec<f64>,
    color: RGBColor,
    dashed: bool,
    interval: f64,
}

/// When a run's last bucket closed, microseconds.
fn t_end_us(series: &Series) -> f64 {
    series.last.0 as f64 / 1e6
}

/// A run's sampling interval, microseconds.
fn interval_us(series: &Series) -> f64 {
    series.interval.0 as f64 / 1e6
}

/// Lines over time, up to `t_end` microseconds.
fn lines_over_time(
    root: &Area,
    title: &str,
    t_end: f64,
    y_desc: &str,
    lines: &[Line],
    marks: &[(String, f64)],
) -> Res {
    let ymax = lines
        .iter()
        .flat_map(|l| l.values.iter().copied())
        .chain(marks.iter().map(|m| m.1))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.08;
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..t_end.max(1e-6), 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time (us)")
        .y_desc(y_desc)
        .label_style((FONT, 12))
        .draw()
        .map_err(err)?;
    for l in lines {
        let pts: Vec<(f64, f64)> = l
            .values
            .iter()
            .enumerate()
            .map(|(i, &v)| (((i as f64 + 0.5) * l.interval).min(t_end), v))
            .collect();
        let color = l.color;
        let style = color.stroke_width(2);
        let drawn = if l.dashed {
            chart
                .draw_series(DashedLineSeries::new(pts, 6, 4, style))
                .map_err(err)?
        } else {
            chart
                .draw_series(LineSeries::new(pts, style))
                .map_err(err)?
        };
        drawn.label(l.name.clone()).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
        });
    }
    for (i, (name, y)) in marks.iter().enumerate() {
        let color = PALETTE[(i + 3) % PALETTE.len()].mix(0.9);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(0.0, *y), (t_end, *y)],
                3,
                3,
                color.stroke_width(1),
            ))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                name.clone(),
                (t_end * 0.01, *y),
                (FONT, 11).into_font(),
            )))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 11))
        .draw()
        .map_err(err)
}

fn queue_depth(sim: &Simulation, root: &Area) -> Res {
    let title = "Deepest switch queues";
    if !sim.series().enabled {
        return empty(
            root,
            title,
            "no time series: [report] sample_interval is \"off\"",
        );
    }
    let g = &sim.series().queue_depth;
    let keys = top_by_peak(g, LINES);
    if keys.is_empty() {
        return empty(root, title, "no switch queue ever held a frame");
    }
    let lines: Vec<Line> = keys
        .iter()
        .enumerate()
        .map(|(i, &k)| Line {
            name: Kind::QueueDepth.element_name(sim, k),
            values: g
                .get(k)
                .unwrap_or_default()
                .iter()
                .map(|&v| v as f64 / 1e3)
                .collect(),
            color: PALETTE[i % PALETTE.len()],
            dashed: false,
            interval: interval_us(sim.series()),
        })
        .collect();
    // Thresholds of the deepest queue: where it marks, and where the
    // ingress ports feeding it would pause.
    let (port, q) = (keys[0] as usize / QUEUES, keys[0] as usize % QUEUES);
    let mut marks = Vec::new();
    if let Some(w) = &sim.queues()[port].wred[q] {
        marks.push(("WRED min".to_string(), w.cfg.min as f64 / 1e3));
        marks.push(("WRED max".to_string(), w.cfg.max as f64 / 1e3));
    }
    if let Some(slot) = sim
        .pfc_slot()
        .get(q)
        .filter(|&&s| s != crate::engine::NO_SLOT)
    {
        let cfg = &sim.pfc()[port * sim.pfc_slots() + *slot as usize].cfg;
        marks.push((
            "PFC XOFF (per ingress port)".to_string(),
            cfg.xoff as f64 / 1e3,
        ));
    }
    lines_over_time(
        root,
        title,
        t_end_us(sim.series()),
        "deepest in the interval (KB)",
        &lines,
        &marks,
    )
}

/// The (port, priority) series paused longest, ordered by the tier of
/// the paused sender and then by name, with that tier.
pub fn pfc_rows(sim: &Simulation) -> Vec<(u32, String)> {
    let g = &sim.series().pfc_paused;
    let mut keys: Vec<(f32, u32)> = g.iter().map(|(k, s)| (s.iter().sum::<f32>(), k)).collect();
    keys.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    keys.truncate(HEATMAP_ROWS);
    let names = sim.topo().kind.tier_names();
    let tier = |p: PortId| match sim.topo().port(p).owner {
        Owner::Switch(s) => names[sim.topo().switches[s.idx()].tier as usize],
        Owner::Nic(_) => "nic",
    };
    let mut rows: Vec<(u32, String, String)> = keys
        .iter()
        .map(|&(_, k)| {
            let p = PortId(k / QUEUES as u32);
            (
                k,
                format!("{} sender", tier(p)),
                Kind::PfcPaused.element_name(sim, k),
            )
        })
        .collect();
    rows.sort_by(|a, b| a.1.cmp(&b.1).then(a.2.cmp(&b.2)));
    rows.into_iter().map(|(k, t, _)| (k, t)).collect()
}

fn pfc_timeline(sim: &Simulation, root: &Area) -> Res {
    let title = "PFC pause timeline";
    if !sim.series().enabled {
        return empty(
            root,
            title,
            "no time series: [report] sample_interval is \"off\"",
        );
    }
    let g = &sim.series().pfc_paused;
    if g.is_empty() {
        return empty(root, title, "no port was paused by PFC");
    }
    let rows: Vec<(String, Cow<[f32]>, String)> = pfc_rows(sim)
        .into_iter()
        .map(|(k, tier)| {
            (
                Kind::PfcPaused.element_name(sim, k),
                g.get(k).unwrap_or_default(),
                tier,
            )
        })
        .collect();
    heatmap(
        root,
        title,
        sim.series(),
        &rows,
        "ports and priorities paused longest",
        "share paused",
        1.0,
        RGBColor(230, 85, 13),
    )
}

fn ecn_cnp(sim: &Simulation, root: &Area) -> Res {
    let title = "ECN marks and CNPs, whole fabric";
    if !sim.series().enabled {
        return empty(
            root,
            title,
            "no time series: [report] sample_interval is \"off\"",
        );
    }
    let s = &sim.series();
    let total = |g: &crate::engine::series::Group| -> Vec<f64> {
        (0..s.points)
            .map(|i| g.series().into_values().map(|v| v[i] as f64).sum::<f64>() / 1e6)
            .collect()
    };
    let lines = vec![
        Line {
            name: "ECN marks".into(),
            values: total(&s.ecn_marks),
            color: PALETTE[0],
            dashed: false,
            interval: interval_us(s),
        },
        Line {
            name: "CNPs received".into(),
            values: total(&s.cnps),
            color: PALETTE[1],
            dashed: true,
            interval: interval_us(s),
        },
    ];
    lines_over_time(root, title, t_end_us(s), "per microsecond", &lines, &[])
}

/// Why a plot of transfers is empty: none finished, or the run's traffic
/// was collectives, whose messages are counted per connection.
fn no_transfer(sim: &Simulation) -> &'static str {
    if sim.every_flow().next().is_none() && sim.every_pass_row().next().is_some() {
        "collective messages only: see collectives.csv and flows.csv's connection rows"
    } else {
        "no transfer finished"
    }
}

fn fct_cdf(sim: &Simulation, root: &Area) -> Res {
    let title = "Transfer completion times";
    let mut fct: Vec<f64> = sim
        .every_flow()
        .filter_map(|f| f.finish.map(|t| (t - f.start).0 as f64 / 1e6))
        .collect();
    if fct.is_empty() {
        return empty(root, title, no_transfer(sim));
    }
    fct.sort_by(f64::total_cmp);
    let n = fct.len();
    let (lo, hi) = (fct[0].max(1e-3), fct[n - 1].max(1e-3));
    let mut chart = ChartBuilder::on(root)
        .caption(format!("{title}: CDF of {n} transfers"), (FONT, 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((lo * 0.9..hi * 1.1).log_scale(), 0f64..1.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("completion time (us, log scale)")
        .y_desc("fraction of transfers")
        .label_style((FONT, 12))
        .draw()
        .map_err(err)?;
    // At most 2000 steps.
    let stride = n.div_ceil(2000);
    let mut pts: Vec<(f64, f64)> = (0..n)
        .step_by(stride)
        .map(|i| (fct[i].max(lo), (i + 1) as f64 / n as f64))
        .collect();
    pts.push((hi, 1.0));
    chart
        .draw_series(LineSeries::new(pts, PALETTE[0].stroke_width(2)))
        .map_err(err)?
        .label("all transfers")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], PALETTE[0].stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// Serving: the CDFs of every request's time to first token, time per
/// output token and KV transfer time, on one log scale.
fn serving_cdf(sim: &Simulation, root: &Area) -> Res {
    let title = "Serving latencies";
    let series = super::serving::latencies(sim);
    let all: Vec<f64> = series.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    if all.is_empty() {
        return empty(root, title, "no request got its first token");
    }
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min).max(1e-6);
    let hi = all.iter().copied().fold(0.0, f64::max).max(lo * 10.0);
    let mut chart = ChartBuilder::on(root)
        .caption(format!("{title}: CDFs over requests"), (FONT, 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((lo * 0.9..hi * 1.1).log_scale(), 0f64..1.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time (ms, log scale)")
        .y_desc("fraction of requests")
        .label_style((FONT, 12))
        .draw()
        .map_err(err)?;
    for (k, (name, mut v)) in series.into_iter().enumerate() {
        if v.is_empty() {
            continue;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mut pts: Vec<(f64, f64)> = (0..n)
            .step_by(n.div_ceil(2000))
            .map(|i| (v[i].max(lo), (i + 1) as f64 / n as f64))
            .collect();
        pts.push((v[n - 1].max(lo), 1.0));
        let colour = PALETTE[k % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(pts, colour.stroke_width(2)))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

fn slowdown(sim: &Simulation, root: &Area) -> Res {
    let title = "Slowdown by transfer size";
    let pts: Vec<(f64, f64)> = sim
        .every_flow()
        .filter_map(|f| {
            let fin = f.finish?;
            let slow = (fin - f.start).0 as f64 / f.ideal_fct.0.max(1) as f64;
            Some((f.spec.bytes.max(1) as f64, slow.max(1e-3)))
        })
        .collect();
    if pts.is_empty() {
        return empty(root, title, no_transfer(sim));
    }
    let stride = pts.len().div_ceil(SCATTER);
    let (xlo, xhi) = pts
        .iter()
        .fold((f64::MAX, 0f64), |a, p| (a.0.min(p.0), a.1.max(p.0)));
    let (ylo, yhi) = pts
        .iter()
        .fold((f64::MAX, 0f64), |a, p| (a.0.min(p.1), a.1.max(p.1)));
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (xlo * 0.8..xhi * 1.25).log_scale(),
            (ylo.min(1.0) * 0.9..yhi.max(1.0) * 1.1).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("transfer size (bytes, log scale)")
        .y_desc("slowdown (completion / ideal, log scale)")
        .label_style((FONT, 12))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(
            pts.iter()
                .step_by(stride)
                .map(|&p| Circle::new(p, 2, PALETTE[0].mix(0.5).filled())),
        )
        .map_err(err)?
        .label(format!(
            "transfers{}",
            if stride > 1 {
                format!(" (every {stride}th)")
            } else {
                String::new()
            }
        ))
        .legend(|(x, y)| Circle::new((x + 9, y), 3, PALETTE[0].filled()));
    chart
        .draw_series(LineSeries::new(
            vec![(xlo * 0.8, 1.0), (xhi * 1.25, 1.0)],
            BLACK.stroke_width(1),
        ))
        .map_err(err)?
        .label("ideal (1)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

fn qp_rate(sim: &Simulation, root: &Area) -> Res {
    let title = "QP sending rates";
    if !sim.series().enabled {
        return empty(
            root,
            title,
            "no time series: [report] sample_interval is \"off\"",
        );
    }
    let s = &sim.series();
    let keys: Vec<u32> = s.qp_send.series().into_keys().take(LINES).collect();
    if keys.is_empty() {
        return empty(root, title, "no tracked QP sent data ([report] sample_qps)");
    }
    let mut lines = Vec::new();
    for (i, &k) in keys.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        lines.push(Line {
            name: format!("{} sent", Kind::QpSend.element_name(sim, k)),
            values: s
                .qp_send
                .get(k)
                .unwrap_or_default()
                .iter()
                .map(|&v| v as f64 / 1e9)
                .collect(),
            color,
            dashed: false,
            interval: interval_us(s),
        });
        if let Some(d) = s.qp_dcqcn.get(k) {
            lines.push(Line {
                name: format!("{} DCQCN rate", Kind::QpDcqcn.element_name(sim, k)),
                values: d.iter().map(|&v| v as f64 / 1e9).collect(),
                color,
                dashed: true,
                interval: interval_us(s),
            });
        }
    }
    lines_over_time(root, title, t_end_us(s), "rate (Gb/s)", &lines, &[])
}

/// The equal-cost groups that carried the most bytes, with each
/// member's bytes.
pub fn busiest_groups(sim: &Simulation) -> Vec<(String, Vec<(String, u64)>)> {
    let mut groups = Vec::new();
    for (si, routes) in sim.routes().switches.iter().enumerate() {
        for g in 0..routes.groups.len() as u32 {
            let members = routes.member_slice(g);
            if members.len() < 2 {
                continue;
            }
            let bytes: Vec<(String, u64)> = members
                .iter()
                .map(|&p| {
                    (
                        sim.topo().member_name(p),
                        sim.ports()[p.idx()].tx_wire_bytes,
                    )
                })
                .collect();
            let total: u64 = bytes.iter().map(|b| b.1).sum();
            // A switch's groups often share members: show each set once.
            let key: Vec<PortId> = members.to_vec();
            groups.push((
                total,
                key,
                format!("{} g{g}", sim.topo().switches[si].name),
                bytes,
            ));
        }
    }
    groups.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(&b.2)));
    let mut seen = std::collections::HashSet::new();
    groups
        .into_iter()
        .filter(|g| g.0 > 0 && seen.insert(g.1.clone()))
        .take(GROUPS)
        .map(|(_, _, name, bytes)| (name, bytes))
        .collect()
}

fn group_bytes(sim: &Simulation, root: &Area) -> Res {
    let title = "Bytes per member of the busiest equal-cost groups";
    let groups = busiest_groups(sim);
    if groups.is_empty() {
        return empty(root, title, "no equal-cost group carried traffic");
    }
    let ymax = groups
        .iter()
        .flat_map(|g| g.1.iter().map(|m| m.1 as f64 / 1e6))
        .fold(0.0, f64::max)
        * 1.1;
    let names: Vec<String> = groups.iter().map(|g| g.0.clone()).collect();
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 20))
        .margin(10)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..groups.len() as f64, 0f64..ymax.max(1e-9))
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("group (switch, group id); one bar per member")
        .y_desc("bytes sent (MB)")
        .x_labels(groups.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = (*x - 0.5).round();
            if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .label_style((FONT, 11))
        .draw()
        .map_err(err)?;
    let mut bars = Vec::new();
    for (i, (_, members)) in groups.iter().enumerate() {
        let w = 0.8 / members.len() as f64;
        for (j, (_, b)) in members.iter().enumerate() {
            let x0 = i as f64 + 0.1 + j as f64 * w;
            bars.push(Rectangle::new(
                [(x0, 0.0), (x0 + w * 0.9, *b as f64 / 1e6)],
                PALETTE[j % PALETTE.len()].filled(),
            ));
        }
    }
    chart.draw_series(bars).map_err(err)?;
    Ok(())
}

/// A row of the timeline: its label, its intervals (ms) and colour.
type Row = (String, Vec<(f64, f64)>, RGBColor);

/// Most ranks the timeline shows (spread over the job's ranks).
const TIMELINE_RANKS: usize = 8;

/// Intervals closer than `gap` made one, so that a row draws no more
/// rectangles than it has pixels.
fn coalesce(mut v: Vec<(f64, f64)>, gap: f64) -> Vec<(f64, f64)> {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 + gap => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// The first training job's first finished iteration, rank by rank: when
/// its GPU runs kernels, and when it takes part in each dimension's
/// communication (TP, PP, DP, EP), one row each.
fn timeline(sim: &Simulation, root: &Area) -> Res {
    use crate::workload::model::Dim;
    let title = "Training step: kernels and communication per rank";
    let t = sim.tasks();
    let done = |x: u32| Some(t.done_at(x)).filter(|&d| d != crate::units::SimTime::MAX);
    let found = t.jobs.iter().find_map(|j| {
        let (it, &(a, b)) = j
            .iterations
            .iter()
            .enumerate()
            .find(|(_, &(a, b))| done(a).is_some() && done(b).is_some())?;
        Some((j, it as u32, done(a)?.0, done(b)?.0))
    });
    let Some((job, it, start, end)) = found.filter(|f| !f.0.kernels.is_empty()) else {
        return empty(root, title, "no training iteration finished");
    };
    let ranks = job.kernels.iter().map(|k| k.0).max().unwrap_or(0) as usize + 1;
    let step = ranks.div_ceil(TIMELINE_RANKS).max(1);
    let shown: Vec<u32> = (0..ranks).step_by(step).map(|r| r as u32).collect();
    let ms = |ps: u64| ps.saturating_sub(start) as f64 / 1e9;
    let span = ms(end).max(1e-9);
    let gap = span / W as f64;
    // Rows, top down: a rank's kernels, then its communication.
    let mut rows: Vec<Row> = Vec::new();
    let dims = Dim::ALL;
    for &r in &shown {
        let k: Vec<(f64, f64)> = job
            .kernels
            .iter()
            .filter(|x| x.0 == r && x.1 == it)
            .filter_map(|&(_, _, task)| Some((ms(t.started_at(task).0), ms(done(task)?.0))))
            .collect();
        rows.push((format!("rank {r} kernels"), coalesce(k, gap), PALETTE[7]));
        for (di, d) in dims.iter().enumerate() {
            let c: Vec<(f64, f64)> = job
                .comm
                .iter()
                .filter(|c| c.rank == r && c.iteration == it && c.dim == *d)
                .filter_map(|c| Some((ms(done(c.from)?.0), ms(done(c.to)?.0))))
                .collect();
            if !c.is_empty() {
                rows.push((
                    format!("rank {r} {}", d.name()),
                    coalesce(c, gap),
                    PALETTE[di],
                ));
            }
        }
    }
    let n = rows.len();
    let names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{title} (iteration {it}, {} of {ranks} ranks)", shown.len()),
            (FONT, 18),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(110)
        .build_cartesian_2d(0f64..span, -0.5f64..n as f64 - 0.5)
        .map_err(err)?;
    // Row i (from the top) is centred on n - 1 - i, where its label is.
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("time from the iteration's start (ms)")
        .y_labels(n.min(64))
        .y_label_formatter(&|y| {
            let i = y.round();
            if (y - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            names
                .get(n.saturating_sub(i as usize + 1))
                .cloned()
                .unwrap_or_default()
        })
        .label_style((FONT, 9))
        .draw()
        .map_err(err)?;
    let mut bars = Vec::new();
    for (i, (_, spans, color)) in rows.iter().enumerate() {
        let y = (n - i - 1) as f64;
        for &(a, b) in spans {
            bars.push(Rectangle::new(
                [(a, y - 0.35), (b.max(a + gap / 2.0), y + 0.35)],
                color.filled(),
            ));
        }
    }
    chart.draw_series(bars).map_err(err)?;
    Ok(())
}

/// What a comparison of runs (`fabricsim compare`) plots of one: its
/// sampling interval and, per interval up to its makespan, the deepest
/// switch queue and its tracked QPs' mean and lowest sending rates.
pub struct CompareRun {
    pub name: String,
    pub interval_us: f64,
    pub deepest: Vec<f64>,
    pub mean_rate: Vec<f64>,
    pub low_rate: Vec<f64>,
}

impl CompareRun {
    pub fn of(name: &str, sim: &Simulation, makespan: crate::units::SimTime) -> CompareRun {
        let (mean_rate, low_rate) = super::series::qp_rates(sim, makespan);
        CompareRun {
            name: name.to_string(),
            interval_us: interval_us(sim.series()),
            deepest: super::series::deepest_queue(sim, makespan),
            mean_rate,
            low_rate,
        }
    }
}

/// The comparison's plots: (file name, SVG text). Runs without time
/// series are left out of them (the plot says so when none has any).
pub fn compare(runs: &[CompareRun]) -> Result<Vec<(&'static str, String)>, String> {
    let t_end = runs
        .iter()
        .map(|r| r.interval_us * r.deepest.len() as f64)
        .fold(0.0, f64::max);
    let queue: Vec<Line> = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.deepest.is_empty())
        .map(|(i, r)| Line {
            name: r.name.clone(),
            values: r.deepest.iter().map(|&b| b / 1e3).collect(),
            color: PALETTE[i % PALETTE.len()],
            dashed: false,
            interval: r.interval_us,
        })
        .collect();
    let mut rates = Vec::new();
    for (i, r) in runs
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.mean_rate.is_empty())
    {
        let color = PALETTE[i % PALETTE.len()];
        rates.push(Line {
            name: format!("{}: mean", r.name),
            values: r.mean_rate.iter().map(|&b| b / 1e9).collect(),
            color,
            dashed: false,
            interval: r.interval_us,
        });
        rates.push(Line {
            name: format!("{}: lowest", r.name),
            values: r.low_rate.iter().map(|&b| b / 1e9).collect(),
            color,
            dashed: true,
            interval: r.interval_us,
        });
    }
    let mut out = Vec::new();
    let plots: [(&'static str, &str, &str, &[Line]); 2] = [
        (
            "compare_queue.svg",
            "Deepest switch queue in each interval",
            "KB",
            &queue,
        ),
        (
            "compare_rates.svg",
            "QP sending rates: mean and lowest of those sending",
            "rate (Gb/s)",
            &rates,
        ),
    ];
    for (i, (file, title, y_desc, lines)) in plots.into_iter().enumerate() {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
            root.fill(&WHITE).map_err(err)?;
            if lines.is_empty() {
                empty(
                    &root,
                    title,
                    "no run has time series ([report] sample_interval)",
                )?;
            } else if i == 0 {
                // Queues of different algorithms differ by orders of
                // magnitude.
                log_lines_over_time(&root, title, t_end, y_desc, lines)?;
            } else {
                lines_over_time(&root, title, t_end, y_desc, lines, &[])?;
            }
            root.present().map_err(err)?;
        }
        out.push((file, svg));
    }
    Ok(out)
}

/// Lines over time on a logarithmic axis, values below 1 drawn at 1.
fn log_lines_over_time(root: &Area, title: &str, t_end: f64, y_desc: &str, lines: &[Line]) -> Res {
    let ymax = lines
        .iter()
        .flat_map(|l| l.values.iter().copied())
        .fold(10.0, f64::max)
        * 1.5;
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..t_end.max(1e-6), (1f64..ymax).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time (us)")
        .y_desc(format!("{y_desc} (log scale; under 1 drawn at 1)"))
        .label_style((FONT, 12))
        .draw()
        .map_err(err)?;
    for l in lines {
        let pts: Vec<(f64, f64)> = l
            .values
            .iter()
            .enumerate()
            .map(|(i, &v)| (((i as f64 + 0.5) * l.interval).min(t_end), v.max(1.0)))
            .collect();
        let color = l.color;
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(err)?
            .label(l.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 11))
        .draw()
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_intervals_are_drawn_as_one() {
        let v = vec![(5.0, 6.0), (0.0, 1.0), (1.05, 2.0), (2.5, 3.0)];
        assert_eq!(coalesce(v, 0.1), vec![(0.0, 2.0), (2.5, 3.0), (5.0, 6.0)]);
    }

    #[test]
    fn columns_merge_pairs_until_they_fit() {
        let v: Vec<f32> = (0..10).map(|i| i as f32).collect();
        let (c, span) = columns(&v, 4);
        assert_eq!(span, 4);
        assert_eq!(c, vec![1.5, 5.5, 8.5]);
        let (c, span) = columns(&v, 10);
        assert_eq!((c.len(), span), (10, 1));
    }

    #[test]
    fn heat_runs_from_white_to_the_hot_colour() {
        let hot = RGBColor(200, 0, 0);
        assert_eq!(heat(0.0, hot), RGBColor(255, 255, 255));
        assert_eq!(heat(1.0, hot), hot);
    }
}
