//! The fabric map in `report.html`: the picture of `fabric::draw`,
//! coloured by the whole run, and the data its script needs to colour it
//! again for one sampled interval (a time slider) and to list a line's
//! members when it is clicked. Per line and interval: the busiest
//! member's utilization each way, the PFC pauses each end sent and the
//! share of the interval the ports facing it were paused; per box, its
//! deepest queue.

use super::fabric::{self, Colouring, Map};
use super::plots::{columns, span_for, HEATMAP_COLS};
use crate::engine::Simulation;
use crate::switch::classify::QUEUES;
use crate::topology::{Owner, PortId};
use serde_json::{json, Value};
use std::fmt::Write;

/// Most members of a line listed when it is clicked.
const MEMBERS: usize = 16;

/// Per port: the map line it belongs to, if any.
pub type LineOf = Vec<Option<u32>>;

/// Writes the section (map, slider, readout) and returns the script's
/// data and each port's line, for the tables to be filtered by.
pub fn section(o: &mut String, sim: &Simulation) -> (Value, LineOf) {
    let colour = Colouring::of(sim);
    let map = fabric::draw(sim.topo(), Some(&colour), "the fabric after the run");
    let mut line_of: LineOf = vec![None; sim.topo().ports.len()];
    for (k, sides) in map.ports.iter().enumerate() {
        for &p in sides.iter().flatten() {
            line_of[p as usize] = Some(k as u32);
        }
    }
    let s = sim.series();
    o.push_str("<h2 id=\"fabric-map\">Fabric</h2>");
    let aggregate = if map.aggregated {
        " Drawn in aggregate: a line is a bundle, coloured by its busiest member."
    } else {
        ""
    };
    if s.enabled {
        let _ = write!(
            o,
            "<p class=\"hint\">Each half of a line is the direction leaving its end, green (idle) to red (busy); switches by their deepest queue; orange marks where an end paused its neighbour. Move the slider (or press play) to see one sampled interval at a time; hover a line or a box for its figures; click a line to list its members and filter the tables below to it (click again to clear).{aggregate}</p>\
             <div class=\"mapbar\"><button type=\"button\" id=\"map-play\">play</button>\
             <input type=\"range\" id=\"map-time\" min=\"0\" max=\"0\" value=\"0\" aria-label=\"interval\">\
             <span id=\"map-when\">whole run</span></div>"
        );
    } else {
        let _ = write!(
            o,
            "<p class=\"hint\">Coloured by the whole run (no time series were sampled, so no slider). Hover a line or a box for its figures; click a line to list its members and filter the tables below to it.{aggregate}</p>"
        );
    }
    let _ = write!(
        o,
        "<div class=\"fabric\" id=\"map\">{}</div><div class=\"readout\" id=\"map-readout\">hover a line or a box</div><div id=\"map-selected\"></div>",
        map.svg
    );
    (data(sim, &colour, &map), line_of)
}

/// Elementwise maximum into `into` (sized on first use).
fn max_into(into: &mut Vec<f32>, v: &[f32]) {
    if into.len() < v.len() {
        into.resize(v.len(), 0.0);
    }
    for (a, &b) in into.iter_mut().zip(v) {
        *a = a.max(b);
    }
}

/// Buckets merged `span` to a column, each column the largest of its
/// buckets (for depths).
fn columns_max(v: &[f32], span: usize) -> Vec<f32> {
    v.chunks(span)
        .map(|c| c.iter().copied().fold(0.0, f32::max))
        .collect()
}

/// Shares 0..1 as whole percents; an all-zero row as 0.
fn percents(v: &[f32]) -> Value {
    if v.iter().all(|&x| x <= 0.0) {
        return json!(0);
    }
    json!(v
        .iter()
        .map(|&x| (x.clamp(0.0, 1.0) * 100.0).round() as u32)
        .collect::<Vec<u32>>())
}

/// Counts, rounded; an all-zero row as 0.
fn counts(v: &[f32]) -> Value {
    let v: Vec<u64> = v.iter().map(|&x| x.max(0.0).round() as u64).collect();
    if v.iter().all(|&x| x == 0) {
        return json!(0);
    }
    json!(v)
}

fn data(sim: &Simulation, c: &Colouring, map: &Map) -> Value {
    let topo = sim.topo();
    let s = sim.series();
    let n = map.ends.len();
    // Per port: (line, side).
    let mut side_of: Vec<Option<(usize, usize)>> = vec![None; topo.ports.len()];
    for (k, sides) in map.ports.iter().enumerate() {
        for (side, ports) in sides.iter().enumerate() {
            for &p in ports {
                side_of[p as usize] = Some((k, side));
            }
        }
    }
    let mut util = vec![[Vec::new(), Vec::new()]; n];
    let mut paused = vec![[Vec::new(), Vec::new()]; n];
    let mut pauses = vec![[Vec::new(), Vec::new()]; n];
    let mut queue = vec![Vec::new(); map.switches.len()];
    let (mut span, mut cols) = (1, 0);
    if s.enabled {
        span = span_for(s.points, HEATMAP_COLS);
        cols = s.points.div_ceil(span);
        for (p, v) in s.link_util.iter() {
            if let Some((k, side)) = side_of[p as usize] {
                max_into(&mut util[k][side], &columns(&v, HEATMAP_COLS).0);
            }
        }
        // A transmitter paused is the mark of the end facing it, which
        // sent the pauses.
        for (key, v) in s.pfc_paused.iter() {
            let port = PortId(key / QUEUES as u32);
            if let Some((k, side)) = side_of[topo.port(port).peer.idx()] {
                max_into(&mut paused[k][side], &columns(&v, HEATMAP_COLS).0);
            }
        }
        // Pauses sent: each bucket's rate over the bucket's length (the
        // last one ends with the run), summed over a column's buckets and
        // over the end's members.
        let length = |b: usize| {
            let start = s.bucket_start(b).0;
            let end = if b + 1 == s.points {
                s.last.0
            } else {
                s.bucket_start(b + 1).0
            };
            end.saturating_sub(start) as f64 / 1e12
        };
        for (key, v) in s.pfc_pauses.iter() {
            if let Some((k, side)) = side_of[(key / QUEUES as u32) as usize] {
                let into: &mut Vec<f32> = &mut pauses[k][side];
                into.resize(cols, 0.0);
                for (b, &rate) in v.iter().enumerate() {
                    into[b / span] += (rate as f64 * length(b)) as f32;
                }
            }
        }
        let mut box_of = vec![usize::MAX; topo.switches.len()];
        for (b, sws) in map.switches.iter().enumerate() {
            for &sw in sws {
                box_of[sw as usize] = b;
            }
        }
        for (key, v) in s.queue_depth.iter() {
            let port = PortId(key / QUEUES as u32);
            if let Owner::Switch(sw) = topo.port(port).owner {
                if let Some(q) = queue.get_mut(box_of[sw.idx()]) {
                    max_into(q, &columns_max(&v, span));
                }
            }
        }
    }
    let lines: Vec<Value> = (0..n)
        .map(|k| {
            json!({
                "a": map.ends[k][0],
                "b": map.ends[k][1],
                "u": percents(&util[k][0]),
                "d": percents(&util[k][1]),
                "pa": percents(&paused[k][0]),
                "pb": percents(&paused[k][1]),
                "na": counts(&pauses[k][0]),
                "nb": counts(&pauses[k][1]),
                "members": members(sim, c, &map.ports[k]),
            })
        })
        .collect();
    let boxes: Vec<Value> = queue
        .iter()
        .map(|q| {
            if q.iter().all(|&x| x <= 0.0) {
                json!(0)
            } else {
                json!(q.iter().map(|&x| x.round() as u64).collect::<Vec<u64>>())
            }
        })
        .collect();
    json!({
        "cols": cols,
        "interval_us": s.interval.0 as f64 / 1e6,
        "span": span,
        "end_us": s.last.0 as f64 / 1e6,
        "buffer": c.buffer,
        "lines": lines,
        "boxes": boxes,
    })
}

/// The busiest `MEMBERS` member ports of a line (both directions), each
/// as its name, bytes, utilization (%), deepest queue (B), drops, pauses
/// sent and connections routed through it ("-" if not counted).
fn members(sim: &Simulation, c: &Colouring, sides: &[Vec<u32>; 2]) -> Value {
    let mut ports: Vec<u32> = sides.iter().flatten().copied().collect();
    ports.sort_by_key(|&p| (std::cmp::Reverse(c.bytes[p as usize]), p));
    let total = ports.len();
    let rows: Vec<Value> = ports
        .iter()
        .take(MEMBERS)
        .map(|&p| {
            let i = p as usize;
            json!([
                sim.topo().link_name(PortId(p)),
                c.bytes[i],
                (c.util[i] * 1000.0).round() / 10.0,
                c.queue[i],
                c.drops[i],
                c.pauses[i],
                c.conns.as_ref().map_or(json!("-"), |n| json!(n[i])),
            ])
        })
        .collect();
    json!({ "ports": total, "rows": rows })
}
