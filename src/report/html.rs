//! `report.html`: one self-contained page with the run's summary, its
//! tables, zoomable and hoverable charts of the time series, and the
//! static plots. Its script and style are ours and inline; it loads
//! nothing, so it opens offline.

use super::plots::{self, columns, heatmap_links, HEATMAP_COLS};
use super::series::Kind;
use super::Summary;
use crate::engine::series::Series;
use crate::engine::Simulation;
use crate::switch::classify::QUEUES;
use crate::topology::PortId;
use crate::units::fmt_bytes;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::fmt::Write;

const SCRIPT: &str = include_str!("report.js");
const STYLE: &str = include_str!("report.css");
/// Most rows of each table.
const TABLE_ROWS: usize = 15;

/// Text made safe inside HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

fn table(o: &mut String, head: &[&str], rows: &[Vec<String>]) {
    tagged(o, head, rows, &[]);
}

/// A table whose rows are about links: row `i` carries `data-line` with
/// its map line `lines[i]`, so that clicking the line filters it.
fn tagged(o: &mut String, head: &[&str], rows: &[Vec<String>], lines: &[Option<u32>]) {
    o.push_str(if lines.is_empty() {
        "<table><tr>"
    } else {
        "<table class=\"bylink\"><tr>"
    });
    for h in head {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr>");
    for (i, r) in rows.iter().enumerate() {
        match lines.get(i).copied().flatten() {
            Some(k) => {
                let _ = write!(o, "<tr data-line=\"{k}\">");
            }
            None => o.push_str("<tr>"),
        }
        for c in r {
            let _ = write!(o, "<td>{}</td>", esc(c));
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
}

fn us(ps: u64) -> String {
    format!("{:.3}", ps as f64 / 1e6)
}

fn card(o: &mut String, value: &str, what: &str) {
    let _ = write!(
        o,
        "<div class=\"card\"><b>{}</b><span>{}</span></div>",
        esc(value),
        esc(what)
    );
}

/// The page.
pub fn render(sim: &Simulation, s: &Summary, svgs: &[(&str, String)]) -> Result<String, String> {
    let mut o = String::with_capacity(1 << 18);
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>fabricsim: {}</title><style>{STYLE}</style></head><body>",
        esc(&s.scenario)
    );
    let _ = write!(
        o,
        "<h1>{}</h1><p class=\"sub\">{} &middot; seed {} &middot; {} &middot; simulated {} us</p>\
         <pre id=\"errors\" hidden></pre><div id=\"selftest\"></div>",
        esc(&s.scenario),
        esc(&s.topology),
        s.seed,
        esc(&s.stop_reason),
        us(s.sim_time_ps)
    );
    if !sim.scenario().description.is_empty() {
        let _ = write!(o, "<p>{}</p>", esc(&sim.scenario().description));
    }
    if s.partial {
        let _ = write!(
            o,
            "<p class=\"partial\"><strong>Partial results</strong>: the run stopped early ({}); every figure covers the first {} us only.</p>",
            esc(&s.stop_reason),
            us(s.sim_time_ps)
        );
    }
    if let Some(note) = super::timer_tail(sim, s) {
        let _ = write!(
            o,
            "<p class=\"partial\"><strong>Ended on a timer</strong>: {}</p>",
            esc(&note)
        );
    }
    if s.fidelity == "flow" {
        o.push_str(
            "<p class=\"partial\"><strong>Flow level</strong>: transfers moved as fluids at max-min fair rates \
             on the paths their packets would take; where lossless senders without congestion control would be paused, \
             at PFC's steady state. Queues, ECN marks, DCQCN and the other congestion controls, \
             pause frames and losses are not modelled, so the queue, pause and QP tables and the time-series \
             charts are absent (queues.csv, pfc.csv, qps.csv and ts_*.csv are not written) and their figures \
             read zero. ACCURACY.md gives this level's error against the packet level.</p>",
        );
    }
    if let Some(h) = sim.hybrid() {
        let _ = write!(
            o,
            "<p class=\"partial\"><strong>Hybrid</strong>: the {} transfers that crossed the packet region ({}) ran \
             as packets, the other {} as fluids at the flow level, sharing the links both crossed. The queue, \
             pause and QP tables count the packets alone.</p>",
            h.packet_flows,
            esc(&h.region.join(", ")),
            h.fluid_flows
        );
    }
    headline(&mut o, s);
    o.push_str("<h2>Summary</h2>");
    let _ = write!(o, "<pre>{}</pre>", esc(&super::render(sim, s)));
    let (map, line_of) = super::html_map::section(&mut o, sim);
    tables(&mut o, sim, s, &line_of);
    charts(&mut o, sim);
    o.push_str("<h2>Plots</h2>");
    for (name, svg) in svgs {
        if matches!(
            *name,
            "plot_fct_cdf.svg"
                | "plot_slowdown.svg"
                | "plot_group_bytes.svg"
                | "plot_timeline.svg"
                | "plot_serving.svg"
        ) {
            let _ = write!(
                o,
                "<figure id=\"{}\">{svg}</figure>",
                name.trim_end_matches(".svg")
            );
        }
    }
    let summary_json = serde_json::to_string_pretty(s).map_err(|e| e.to_string())?;
    let _ = write!(
        o,
        "<h2>summary.json</h2><details><summary>the whole summary</summary><pre>{}</pre></details>",
        esc(&summary_json)
    );
    let data = json!({ "lines": lines(sim), "heatmaps": heatmaps(sim), "map": map });
    // `</` cannot end the script element early once escaped.
    let data = data.to_string().replace("</", "<\\/");
    let _ = writeln!(
        o,
        "<script type=\"application/json\" id=\"data\">{data}</script><script>{SCRIPT}</script></body></html>"
    );
    Ok(o)
}

fn headline(o: &mut String, s: &Summary) {
    o.push_str("<div class=\"cards\">");
    card(
        o,
        &format!("{}/{}", s.flows_completed, s.flows_total),
        "transfers complete",
    );
    card(o, &format!("{} us", us(s.makespan_ps)), "last completion");
    if let Some(f) = &s.fct_ps {
        card(o, &format!("{:.1} us", f.p50 / 1e6), "completion p50");
        card(o, &format!("{:.1} us", f.p99 / 1e6), "completion p99");
    }
    if let Some(d) = &s.slowdown {
        card(o, &format!("{:.2}", d.p99), "slowdown p99");
    }
    if let Some(c) = s.collectives.first() {
        if let Some(b) = c.busbw_gbps {
            card(
                o,
                &format!("{b:.1} GB/s"),
                &format!("busbw, {}", c.collective),
            );
        }
    }
    card(o, &s.drops.to_string(), "drops");
    card(o, &s.ecn_marks.to_string(), "ECN marks");
    card(o, &s.pfc_pause_frames.to_string(), "PFC pauses");
    card(o, &fmt_bytes(s.max_queue_bytes), "deepest queue");
    if let Some(i) = s.uplink_imbalance {
        card(o, &format!("{i:.2}"), "equal-cost max/mean");
    }
    o.push_str("</div>");
}

fn tables(o: &mut String, sim: &Simulation, s: &Summary, line_of: &[Option<u32>]) {
    if !s.collectives.is_empty() {
        o.push_str("<h2>Collectives</h2>");
        let rows: Vec<Vec<String>> = s
            .collectives
            .iter()
            .map(|c| {
                vec![
                    c.collective.clone(),
                    c.algorithm.clone(),
                    c.ranks.to_string(),
                    c.bytes.to_string(),
                    c.time_ps.map_or("-".into(), us),
                    c.algbw_gbps.map_or("-".into(), |b| format!("{b:.2}")),
                    c.busbw_gbps.map_or("-".into(), |b| format!("{b:.2}")),
                ]
            })
            .collect();
        table(
            o,
            &[
                "collective",
                "algorithm",
                "ranks",
                "size (B)",
                "time (us)",
                "algbw (GB/s)",
                "busbw (GB/s)",
            ],
            &rows,
        );
    }
    if !s.jobs.is_empty() {
        o.push_str("<h2>Training jobs</h2>");
        let rows: Vec<Vec<String>> = s
            .jobs
            .iter()
            .map(|j| {
                vec![
                    format!("workload {}", j.workload),
                    j.tenant.to_string(),
                    j.ranks.to_string(),
                    j.iteration_ps.len().to_string(),
                    j.mean_iteration_ps.map_or("-".into(), |t| us(t as u64)),
                    j.comm_share
                        .map_or("-".into(), |c| format!("{:.1}%", c * 100.0)),
                    us(j.checkpoint_ps),
                ]
            })
            .collect();
        table(
            o,
            &[
                "job",
                "tenant",
                "ranks",
                "iterations",
                "mean iteration (us)",
                "communication",
                "checkpoint (us)",
            ],
            &rows,
        );
    }
    // Links by bytes sent.
    let (span, active) = super::utilisation_spans(sim);
    let conns = super::connections_per_port(sim);
    let mut hot: Vec<usize> = (0..sim.ports().len())
        .filter(|&p| sim.ports()[p].tx_wire_bytes > 0)
        .collect();
    hot.sort_by_key(|&p| (std::cmp::Reverse(sim.ports()[p].tx_wire_bytes), p));
    o.push_str("<h2>Busiest links</h2>");
    let rows: Vec<Vec<String>> = hot
        .iter()
        .take(TABLE_ROWS)
        .map(|&p| {
            let port = &sim.ports()[p];
            let mut row = vec![
                sim.topo().link_name(PortId(p as u32)),
                fmt_bytes(port.tx_wire_bytes),
                format!("{:.1}%", 100.0 * port.busy_ps as f64 / span),
            ];
            if let Some(a) = active {
                row.push(format!(
                    "{:.1}%",
                    (100.0 * port.busy_ps as f64 / a).min(100.0)
                ));
            }
            row.extend([
                fmt_bytes(sim.queues()[p].max_bytes),
                sim.port_drops()[p].packets.to_string(),
                conns.as_ref().map_or("-".into(), |c| c[p].to_string()),
            ]);
            row
        })
        .collect();
    let lines: Vec<Option<u32>> = hot.iter().take(TABLE_ROWS).map(|&p| line_of[p]).collect();
    let mut head = vec!["link", "bytes on the wire", "utilization"];
    if active.is_some() {
        head.push("utilization while active");
    }
    head.extend(["deepest queue", "drops", "connections"]);
    tagged(o, &head, &rows, &lines);
    // Queues by peak depth.
    let mut queues: Vec<(u32, usize, usize)> = Vec::new();
    for p in 0..sim.ports().len() {
        for q in 0..QUEUES {
            let st = sim.queues()[p].stats(q);
            if st.max_bytes > 0 {
                queues.push((st.max_bytes, p, q));
            }
        }
    }
    queues.sort_by_key(|&(b, p, q)| (std::cmp::Reverse(b), p, q));
    if !queues.is_empty() {
        o.push_str("<h2>Deepest queues</h2>");
        let rows: Vec<Vec<String>> = queues
            .iter()
            .take(TABLE_ROWS)
            .map(|&(b, p, q)| {
                let st = sim.queues()[p].stats(q);
                vec![
                    format!("{} q{q}", sim.topo().link_name(PortId(p as u32))),
                    fmt_bytes(b as u64),
                    st.enqueued.to_string(),
                    st.ecn_marks.to_string(),
                    st.drops.to_string(),
                ]
            })
            .collect();
        let lines: Vec<Option<u32>> = queues
            .iter()
            .take(TABLE_ROWS)
            .map(|&(_, p, _)| line_of[p])
            .collect();
        tagged(
            o,
            &["queue", "deepest", "frames", "ECN marks", "drops"],
            &rows,
            &lines,
        );
    }
    // Ports paused longest.
    let mut paused: Vec<(u64, usize)> = (0..sim.pfc().len())
        .map(|i| (sim.paused_ps(i), i))
        .filter(|p| p.0 > 0)
        .collect();
    paused.sort_by_key(|&(t, i)| (std::cmp::Reverse(t), i));
    if !paused.is_empty() {
        o.push_str("<h2>Paused by PFC</h2>");
        let rows: Vec<Vec<String>> = paused
            .iter()
            .take(TABLE_ROWS)
            .map(|&(t, i)| {
                let port = i / sim.pfc_slots();
                let st = &sim.pfc()[i];
                vec![
                    sim.topo().link_name(PortId(port as u32)),
                    us(t),
                    format!("{:.1}%", 100.0 * t as f64 / span),
                    st.pauses_received.to_string(),
                ]
            })
            .collect();
        let lines: Vec<Option<u32>> = paused
            .iter()
            .take(TABLE_ROWS)
            .map(|&(_, i)| line_of[i / sim.pfc_slots()])
            .collect();
        tagged(
            o,
            &[
                "sender paused",
                "paused (us)",
                "of the run",
                "pauses received",
            ],
            &rows,
            &lines,
        );
    }
    if !s.balancers.is_empty() {
        o.push_str("<h2>Balancers</h2>");
        let rows: Vec<Vec<String>> = s
            .balancers
            .iter()
            .map(|b| {
                vec![
                    b.tier.clone(),
                    b.balancer.clone(),
                    b.switches.to_string(),
                    b.decisions.to_string(),
                    b.flowlet_moves.to_string(),
                    b.sprayed_packets.to_string(),
                ]
            })
            .collect();
        table(
            o,
            &[
                "tier",
                "balancer",
                "switches",
                "decisions",
                "flowlet moves",
                "sprayed packets",
            ],
            &rows,
        );
    }
    if !s.failures.is_empty() {
        o.push_str("<h2>Failures</h2>");
        let rows: Vec<Vec<String>> = s
            .failures
            .iter()
            .map(|f| {
                vec![
                    f.target.clone(),
                    us(f.at_ps),
                    f.lost_packets.to_string(),
                    f.affected_qps.to_string(),
                    f.progress_again_after_ps.map_or("-".into(), us),
                ]
            })
            .collect();
        table(
            o,
            &[
                "target",
                "at (us)",
                "frames lost",
                "QPs affected",
                "progress again after (us)",
            ],
            &rows,
        );
    }
}

/// Chart containers; the script fills them from the data.
fn charts(o: &mut String, sim: &Simulation) {
    if !sim.series().enabled {
        o.push_str("<h2>Over time</h2><p>No time series: <code>[report] sample_interval = \"off\"</code>.</p>");
        return;
    }
    let _ = write!(
        o,
        "<h2>Over time</h2><p class=\"hint\">Sampled every {} (the interval doubles as a run grows so that each series keeps at most {} points). Drag across a chart to zoom, double-click to reset; hover a heatmap to name its cell.</p>",
        sim.series().interval,
        sim.series().cap
    );
    for (id, title) in [
        (
            "link-util",
            "Link utilization (busiest links, grouped by tier)",
        ),
        ("queue-depth", "Deepest switch queues"),
        ("pfc-pause", "PFC pause timeline"),
        ("qp-rate", "QP sending rates"),
        ("ecn-cnp", "ECN marks and CNPs, whole fabric"),
    ] {
        let class = if matches!(id, "link-util" | "pfc-pause") {
            "heatmap"
        } else {
            "lines"
        };
        let _ = write!(
            o,
            "<h3>{}</h3><div class=\"{class}\" id=\"{id}\"></div>",
            esc(title)
        );
    }
}

fn end_us(s: &Series) -> f64 {
    s.last.0 as f64 / 1e6
}

fn round(v: f64) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let digits = 4 - v.abs().log10().ceil() as i32;
    let m = 10f64.powi(digits.clamp(0, 12));
    (v * m).round() / m
}

fn line_spec(
    id: &str,
    s: &Series,
    y: &str,
    series: Vec<(String, Vec<f64>, bool)>,
    marks: Vec<(String, f64)>,
) -> Value {
    json!({
        "id": id,
        "y": y,
        "interval_us": s.interval.0 as f64 / 1e6,
        "end_us": end_us(s),
        "series": series.into_iter().map(|(name, values, dashed)| json!({
            "name": name,
            "values": values.into_iter().map(round).collect::<Vec<f64>>(),
            "dashed": dashed,
        })).collect::<Vec<Value>>(),
        "marks": marks.into_iter().map(|(name, y)| json!({"name": name, "y": round(y)})).collect::<Vec<Value>>(),
    })
}

fn lines(sim: &Simulation) -> Vec<Value> {
    let s = &sim.series();
    if !s.enabled {
        return Vec::new();
    }
    let mut out = Vec::new();
    // Deepest queues, with the first one's thresholds.
    let mut peaks: Vec<(f32, u32)> = s
        .queue_depth
        .iter()
        .map(|(k, v)| (v.iter().copied().fold(0.0, f32::max), k))
        .collect();
    peaks.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let queues: Vec<(String, Vec<f64>, bool)> = peaks
        .iter()
        .take(6)
        .map(|&(_, k)| {
            let v = s
                .queue_depth
                .get(k)
                .unwrap_or_default()
                .iter()
                .map(|&x| x as f64 / 1e3)
                .collect();
            (Kind::QueueDepth.element_name(sim, k), v, false)
        })
        .collect();
    let mut marks = Vec::new();
    if let Some(&(_, k)) = peaks.first() {
        let (port, q) = (k as usize / QUEUES, k as usize % QUEUES);
        if let Some(w) = &sim.queues()[port].wred[q] {
            marks.push(("WRED min".to_string(), w.cfg.min as f64 / 1e3));
            marks.push(("WRED max".to_string(), w.cfg.max as f64 / 1e3));
        }
        let slot = sim.pfc_slot()[q];
        if slot != crate::engine::NO_SLOT {
            let cfg = &sim.pfc()[port * sim.pfc_slots() + slot as usize].cfg;
            marks.push((
                "PFC XOFF (per ingress port)".to_string(),
                cfg.xoff as f64 / 1e3,
            ));
        }
    }
    out.push(line_spec(
        "queue-depth",
        s,
        "deepest in the interval (KB)",
        queues,
        marks,
    ));
    let mut rates = Vec::new();
    for k in s.qp_send.series().into_keys().take(6) {
        let name = Kind::QpSend.element_name(sim, k);
        let v = s
            .qp_send
            .get(k)
            .unwrap_or_default()
            .iter()
            .map(|&x| x as f64 / 1e9)
            .collect();
        rates.push((format!("{name} sent"), v, false));
        if let Some(d) = s.qp_dcqcn.get(k) {
            let v = d.iter().map(|&x| x as f64 / 1e9).collect();
            rates.push((format!("{name} DCQCN rate"), v, true));
        }
    }
    out.push(line_spec("qp-rate", s, "rate (Gb/s)", rates, Vec::new()));
    let total = |g: &crate::engine::series::Group| -> Vec<f64> {
        (0..s.points)
            .map(|i| g.series().into_values().map(|v| v[i] as f64).sum::<f64>() / 1e6)
            .collect()
    };
    out.push(line_spec(
        "ecn-cnp",
        s,
        "per microsecond",
        vec![
            ("ECN marks".into(), total(&s.ecn_marks), false),
            ("CNPs received".into(), total(&s.cnps), true),
        ],
        Vec::new(),
    ));
    out
}

fn heatmap_spec(
    id: &str,
    s: &Series,
    unit: &str,
    hot: [u8; 3],
    rows: Vec<(String, String, Cow<[f32]>)>,
) -> Value {
    let mut span = 1;
    let values: Vec<Vec<u32>> = rows
        .iter()
        .map(|(_, _, v)| {
            let (cols, sp) = columns(v, HEATMAP_COLS);
            span = sp;
            cols.iter()
                .map(|&x| (x.clamp(0.0, 1.0) * 100.0).round() as u32)
                .collect()
        })
        .collect();
    json!({
        "id": id,
        "unit": unit,
        "scale": 100,
        "hot": hot,
        "interval_us": s.interval.0 as f64 / 1e6,
        "span": span,
        "end_us": end_us(s),
        "rows": rows.iter().map(|r| r.0.clone()).collect::<Vec<String>>(),
        "groups": rows.iter().map(|r| r.1.clone()).collect::<Vec<String>>(),
        "values": values,
    })
}

fn heatmaps(sim: &Simulation) -> Vec<Value> {
    let s = &sim.series();
    if !s.enabled {
        return Vec::new();
    }
    let links: Vec<(String, String, Cow<[f32]>)> = heatmap_links(sim)
        .into_iter()
        .map(|(p, tier)| {
            (
                sim.topo().link_name(p),
                tier,
                s.link_util.get(p.0).unwrap_or_default(),
            )
        })
        .collect();
    let pfc: Vec<(String, String, Cow<[f32]>)> = plots::pfc_rows(sim)
        .into_iter()
        .map(|(k, tier)| {
            (
                Kind::PfcPaused.element_name(sim, k),
                tier,
                s.pfc_paused.get(k).unwrap_or_default(),
            )
        })
        .collect();
    vec![
        heatmap_spec("link-util", s, "utilization", [215, 48, 39], links),
        heatmap_spec("pfc-pause", s, "share paused", [230, 85, 13], pfc),
    ]
}
