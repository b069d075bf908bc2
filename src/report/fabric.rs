//! The fabric as a picture (`fabricsim topo --svg`, `plot_fabric.svg`):
//! tiers of switches from the top down, the hosts at the bottom with their
//! GPUs and NICs (a colour per rail), and a line per pair of ends, the
//! members of a port channel as one thicker line with their count. After
//! a run each half of a line takes the colour of the direction leaving
//! the end it touches (the "weathermap" convention), switches that of
//! their deepest queue, ports that sent PFC pauses get a mark with the
//! count, links that failed are dashed and crossed and switches that
//! failed struck through; each element's `<title>` has its figures.
//!
//! Past `DETAIL_HOSTS` hosts or `DETAIL_SWITCHES` switches single links
//! cannot be told apart: the fabric is drawn in aggregate, each pod (what
//! stays connected once the top tiers are taken away) one block, the top
//! tier's switches one by one (or one block past `DETAIL_TOP`), and the
//! bundle between a pod and a top switch one line with its members, its
//! capacity and its busiest member; the legend says so. The layout is a
//! function of the topology alone: the same scenario draws the same
//! picture.

use crate::topology::{Owner, PortId, Topology};
use std::fmt::Write;

/// Most hosts, and switches, drawn one by one.
pub const DETAIL_HOSTS: usize = 64;
pub const DETAIL_SWITCHES: usize = 96;
/// Most top-tier switches drawn one by one in an aggregate picture.
pub const DETAIL_TOP: usize = 32;

/// What a run did to each port and link, to colour the picture.
pub struct Colouring {
    /// Per port: share of the run's active period (`report::active_ps`)
    /// its egress was busy, bytes it sent,
    /// its deepest queue, frames it dropped and PFC pauses it sent.
    pub util: Vec<f64>,
    pub bytes: Vec<u64>,
    pub queue: Vec<u64>,
    pub drops: Vec<u64>,
    pub pauses: Vec<u64>,
    /// Per link: whether it was down at some time of the run.
    pub failed: Vec<bool>,
    /// Per switch: whether it failed at some time of the run.
    pub failed_switches: Vec<bool>,
    /// Per port: connections whose route leaves through it (none when
    /// too many connections to count cheaply).
    pub conns: Option<Vec<u32>>,
    /// A switch's shared buffer, against which its queues are coloured.
    pub buffer: u64,
}

impl Colouring {
    pub fn of(sim: &crate::engine::Simulation) -> Colouring {
        let topo = sim.topo();
        // Over the run's active period: a run that ended on a long timer
        // would otherwise show every link idle.
        let span = super::active_ps(sim) as f64;
        let ports = topo.ports.len();
        let slots = sim.pfc_slots().max(1);
        let pfc = sim.pfc();
        Colouring {
            util: (0..ports)
                .map(|p| sim.ports()[p].busy_ps as f64 / span)
                .collect(),
            bytes: (0..ports).map(|p| sim.ports()[p].tx_wire_bytes).collect(),
            queue: (0..ports).map(|p| sim.queues()[p].max_bytes).collect(),
            drops: (0..ports).map(|p| sim.port_drops()[p].packets).collect(),
            pauses: (0..ports)
                .map(|p| {
                    pfc.get(p * slots..(p + 1) * slots)
                        .map_or(0, |s| s.iter().map(|x| x.pauses_sent).sum())
                })
                .collect(),
            failed: (0..topo.links.len())
                .map(|l| sim.link_failed(crate::topology::LinkId(l as u32)))
                .collect(),
            failed_switches: {
                let mut f = vec![false; topo.switches.len()];
                for e in &sim.scenario().failures.events {
                    if let (crate::scenario::failures::Target::Switch(sw), None) =
                        (e.target, e.degrade)
                    {
                        f[sw.idx()] |= e.at <= sim.now();
                    }
                }
                f
            },
            buffer: sim.scenario().switch.buffer_bytes,
            conns: super::connections_per_port(sim),
        }
    }
}

/// A drawn picture: the SVG, and how many boxes (switches, hosts or
/// blocks) and lines it has. Line `i` is the SVG's `<g class="link"
/// data-i="i">`, switch or pod box `k` its `data-box="k"`, so that the
/// report's script can colour them again for one interval of the run.
pub struct Map {
    pub svg: String,
    pub boxes: usize,
    pub lines: usize,
    pub aggregated: bool,
    /// Per line: its two ends' names (lower end first) and the egress
    /// ports at each end (the lower end's send up the line).
    pub ends: Vec<[String; 2]>,
    pub ports: Vec<[Vec<u32>; 2]>,
    /// Per switch or pod box, by `data-box`: the switches it stands for.
    pub switches: Vec<Vec<u32>>,
}

/// One end of a line: a switch, a host's NIC (host, rail) or a block.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
enum End {
    Switch(u32),
    Nic(u32, u32),
    Block(u32),
}

/// A line: its two ends (lower first) and the links it stands for.
struct Line {
    ends: (End, End),
    links: Vec<u32>,
}

const RAILS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
];
const SW: f64 = 92.0;
const SH: f64 = 28.0;
const ROW: f64 = 120.0;
const GAP: f64 = 14.0;
const MARGIN: f64 = 40.0;

/// Draws `topo` (coloured by a run's `colour`, if given) under `title`.
pub fn draw(topo: &Topology, colour: Option<&Colouring>, title: &str) -> Map {
    if topo.hosts.len() > DETAIL_HOSTS || topo.switches.len() > DETAIL_SWITCHES {
        aggregate(topo, colour, title)
    } else {
        detailed(topo, colour, title)
    }
}

/// The owner of port `p` as a line's end.
fn end_of(topo: &Topology, p: PortId) -> End {
    match topo.port(p).owner {
        Owner::Switch(s) => End::Switch(s.0),
        Owner::Nic(n) => {
            let nic = &topo.nics[n.idx()];
            End::Nic(nic.host.0, nic.rail)
        }
    }
}

/// Links grouped by their ends (through `map`, which may merge ends into
/// blocks), in the order of their first link.
fn lines(topo: &Topology, map: impl Fn(End) -> End) -> Vec<Line> {
    let mut at: std::collections::HashMap<(End, End), usize> = Default::default();
    let mut out: Vec<Line> = Vec::new();
    for (li, l) in topo.links.iter().enumerate() {
        let (a, b) = (map(end_of(topo, l.a)), map(end_of(topo, l.b)));
        if a == b {
            continue;
        }
        let key = if a < b { (a, b) } else { (b, a) };
        let i = *at.entry(key).or_insert_with(|| {
            out.push(Line {
                ends: key,
                links: Vec::new(),
            });
            out.len() - 1
        });
        out[i].links.push(li as u32);
    }
    out
}

/// Green through yellow to red for 0 to 1.
fn heat(x: f64) -> String {
    let x = x.clamp(0.0, 1.0);
    let (r, g) = if x < 0.5 {
        (2.0 * x, 1.0)
    } else {
        (1.0, 2.0 * (1.0 - x))
    };
    format!(
        "#{:02x}{:02x}30",
        (40.0 + 200.0 * r) as u8,
        (40.0 + 160.0 * g) as u8
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn gbps(bps: u64) -> String {
    if bps >= 1_000_000_000_000 && bps.is_multiple_of(1_000_000_000_000) {
        format!("{}T", bps / 1_000_000_000_000)
    } else if bps >= 1_000_000_000_000 {
        format!("{:.2}T", bps as f64 / 1e12)
    } else {
        format!("{}G", bps / 1_000_000_000)
    }
}

/// What a line's links carried, for its colour and its title, each
/// direction apart (the lower end's ports send up, the upper end's
/// down): the utilization of the busiest member, bytes, connections
/// routed that way and pauses sent from that end; the deepest queue and
/// drops at either end, and members that failed.
struct Load {
    util: (f64, f64),
    bytes: (u64, u64),
    conns: Option<(u64, u64)>,
    queue: u64,
    drops: u64,
    pauses: (u64, u64),
    failed: usize,
}

fn load(c: &Colouring, line: &Line, sides: &[Vec<u32>; 2]) -> Load {
    let mut l = Load {
        util: (0.0, 0.0),
        bytes: (0, 0),
        conns: c.conns.as_ref().map(|_| (0, 0)),
        queue: 0,
        drops: 0,
        pauses: (0, 0),
        failed: 0,
    };
    for (side, ports) in sides.iter().enumerate() {
        let (util, bytes, pauses) = if side == 0 {
            (&mut l.util.0, &mut l.bytes.0, &mut l.pauses.0)
        } else {
            (&mut l.util.1, &mut l.bytes.1, &mut l.pauses.1)
        };
        for &p in ports {
            let i = p as usize;
            *util = util.max(c.util[i]);
            *bytes += c.bytes[i];
            *pauses += c.pauses[i];
            l.queue = l.queue.max(c.queue[i]);
            l.drops += c.drops[i];
            if let (Some(n), Some(per_port)) = (l.conns.as_mut(), &c.conns) {
                let n = if side == 0 { &mut n.0 } else { &mut n.1 };
                *n += u64::from(per_port[i]);
            }
        }
    }
    l.failed = line
        .links
        .iter()
        .filter(|&&li| c.failed[li as usize])
        .count();
    l
}

/// A line's member ports at its lower end and at its upper end.
fn sides(topo: &Topology, line: &Line, lower: &dyn Fn(PortId) -> bool) -> [Vec<u32>; 2] {
    let mut s = [Vec::new(), Vec::new()];
    for &li in &line.links {
        let link = topo.links[li as usize];
        for p in [link.a, link.b] {
            s[usize::from(!lower(p))].push(p.0);
        }
    }
    s
}

/// Writes line `i` from `a` to `b` (`a` at the lower end): two halves,
/// each coloured by the direction that leaves its end.
#[allow(clippy::too_many_arguments)]
fn line_svg(
    out: &mut String,
    i: usize,
    (a, b): ((f64, f64), (f64, f64)),
    names: (&str, &str),
    members: usize,
    capacity: u64,
    load: Option<&Load>,
    base: &str,
    labels: &mut Labels,
) {
    let width = (1.2 + 1.2 * (members as f64).log2()).min(9.0);
    let (up, down) = load.map_or((base.to_string(), base.to_string()), |l| {
        (heat(l.util.0), heat(l.util.1))
    });
    let failed = load.is_some_and(|l| l.failed > 0);
    let dash = if failed {
        " stroke-dasharray=\"6 4\""
    } else {
        ""
    };
    let mut title = format!(
        "{} \u{2014} {}: {members} x {} ({} in all)",
        esc(names.0),
        esc(names.1),
        gbps(capacity / members.max(1) as u64),
        gbps(capacity)
    );
    if let Some(l) = load {
        let _ = write!(
            title,
            "; busiest member {:.1}% busy up, {:.1}% down; bytes {} up, {} down",
            100.0 * l.util.0,
            100.0 * l.util.1,
            l.bytes.0,
            l.bytes.1,
        );
        if let Some((u, d)) = l.conns {
            let _ = write!(title, "; connections hashed {u} up, {d} down");
        }
        let _ = write!(
            title,
            "; max queue {} B; drops {}; pauses sent {} (lower end), {} (upper end)",
            l.queue, l.drops, l.pauses.0, l.pauses.1
        );
        if l.failed > 0 {
            let _ = write!(title, "; {} member(s) failed", l.failed);
        }
    }
    let mid = ((a.0 + b.0) / 2.0, (a.1 + b.1) / 2.0);
    let _ = writeln!(
        out,
        "<g class=\"link\" data-i=\"{i}\"><title>{title}</title>\
         <line class=\"up\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{up}\" stroke-width=\"{width:.1}\"{dash}/>\
         <line class=\"down\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{down}\" stroke-width=\"{width:.1}\"{dash}/>",
        a.0, a.1, mid.0, mid.1, mid.0, mid.1, b.0, b.1
    );
    if members > 1 {
        labels.add((a, b), &format!("x{members}"));
    }
    if failed {
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"14\" fill=\"#d00\" text-anchor=\"middle\">\u{2715}</text>",
            mid.0,
            mid.1 + 5.0
        );
    }
    if let Some(l) = load {
        // A mark at the end whose port sent pauses, with their count.
        for (n, at) in [(l.pauses.0, a), (l.pauses.1, b)] {
            if n == 0 {
                continue;
            }
            let p = pause_at(at, mid);
            let _ = write!(
                out,
                "<g class=\"pause\"><title>{n} PFC pauses sent</title><circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"7\" fill=\"#f80\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"8\" text-anchor=\"middle\" fill=\"#000\">{n}</text></g>",
                p.0,
                p.1,
                p.0,
                p.1 + 3.0
            );
        }
    }
    out.push_str("</g>\n");
}

/// The member-count labels of a picture's lines, kept apart: each goes
/// at the first of some points along its line (from near its lower end,
/// where the lines of one box fan out) where it overlaps no label placed
/// before it.
///
/// They are drawn after every line (`svg`), on a white halo, so that no
/// line hides one.
#[derive(Default)]
struct Labels {
    /// Placed labels' boxes: left, baseline, width.
    placed: Vec<(f64, f64, f64)>,
    svg: String,
}

impl Labels {
    /// Height of a label of font size 9, above its baseline.
    const HIGH: f64 = 9.0;

    /// Width of `text` at font size 9 (digits and an x: at most 5.5 px
    /// each), with a pixel either side.
    fn width(text: &str) -> f64 {
        5.5 * text.chars().count() as f64 + 2.0
    }

    fn overlaps(a: (f64, f64, f64), b: (f64, f64, f64)) -> bool {
        a.0 < b.0 + b.2 && b.0 < a.0 + a.2 && a.1 - Self::HIGH < b.1 && b.1 - Self::HIGH < a.1
    }

    /// Where the label `text` of the line from `a` (lower end) to `b`
    /// goes: its left end and baseline.
    fn place(&mut self, (a, b): ((f64, f64), (f64, f64)), text: &str) -> (f64, f64) {
        const ALONG: [f64; 16] = [
            0.3, 0.22, 0.38, 0.15, 0.46, 0.26, 0.34, 0.42, 0.54, 0.62, 0.1, 0.5, 0.58, 0.66, 0.7,
            0.78,
        ];
        let w = Self::width(text);
        let at = |t: f64| (a.0 + t * (b.0 - a.0) + 3.0, a.1 + t * (b.1 - a.1), w);
        let spot = ALONG
            .iter()
            .map(|&t| at(t))
            .find(|&c| !self.placed.iter().any(|&p| Self::overlaps(c, p)))
            .unwrap_or_else(|| at(ALONG[0]));
        self.placed.push(spot);
        (spot.0, spot.1)
    }

    /// Places `text` on the line from `a` to `b` and draws it.
    fn add(&mut self, line: ((f64, f64), (f64, f64)), text: &str) {
        let (x, y) = self.place(line, text);
        let _ = write!(
            self.svg,
            "<text class=\"members\" x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"9\" fill=\"#333\" stroke=\"white\" stroke-width=\"2.5\" paint-order=\"stroke\">{text}</text>"
        );
    }
}

/// Where the pause mark of the end at `at` goes: a fifth of the way to
/// the line's middle (the report's script puts its marks there too).
fn pause_at(at: (f64, f64), mid: (f64, f64)) -> (f64, f64) {
    (at.0 + 0.2 * (mid.0 - at.0), at.1 + 0.2 * (mid.1 - at.1))
}

/// `text` in lines of at most `width` characters, broken between words.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

/// The picture's frame: header with the title, and the legend.
fn frame(w: f64, h: f64, title: &str, body: &str, legend: &[String]) -> String {
    // Wide enough for the title; the legend's lines wrap to the width
    // (at least that of a short paragraph).
    let w = w.max(2.0 * MARGIN + 9.3 * title.len() as f64);
    let per_line = ((w.max(720.0) - 2.0 * MARGIN) / 6.2) as usize;
    let legend: Vec<String> = legend.iter().flat_map(|l| wrap(l, per_line)).collect();
    let w = legend
        .iter()
        .map(|l| 2.0 * MARGIN + 6.2 * l.chars().count() as f64)
        .fold(w, f64::max);
    let total = h + 24.0 + 16.0 * legend.len() as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{total:.0}\" viewBox=\"0 0 {w:.0} {total:.0}\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{MARGIN}\" y=\"22\" font-size=\"15\">{}</text>\n",
        esc(title)
    );
    s.push_str(body);
    for (i, l) in legend.iter().enumerate() {
        let _ = writeln!(
            s,
            "<text class=\"legend\" x=\"{MARGIN}\" y=\"{:.0}\" font-size=\"11\" fill=\"#333\">{}</text>",
            h + 16.0 + 16.0 * i as f64,
            esc(l)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn legend_common(colour: Option<&Colouring>) -> Vec<String> {
    match colour {
        Some(_) => vec![
            "lines: each half is the direction leaving its end, coloured by the busiest member's utilization over the run's active period, green 0% to red 100%; dashed with a cross: failed during the run; orange marks: PFC pauses sent from that end (count)".into(),
            "switches: deepest queue against the buffer, white to red; struck through in red: failed during the run; hover a line or a box for its figures".into(),
        ],
        None => vec!["lines: a link, or the members of a port channel (count, xN; thicker with more)".into()],
    }
}

fn switch_fill(topo: &Topology, c: Option<&Colouring>, s: usize) -> (String, u64) {
    let Some(c) = c else {
        return ("#eef".into(), 0);
    };
    let deepest = topo.switches[s]
        .ports
        .iter()
        .map(|p| c.queue[p.idx()])
        .max()
        .unwrap_or(0);
    let x = deepest as f64 / c.buffer.max(1) as f64;
    let v = (255.0 * (1.0 - x.clamp(0.0, 1.0))) as u8;
    (format!("#ff{v:02x}{v:02x}"), deepest)
}

/// How many of `switches` failed during the run, as a title's words and
/// a mark on the box at `(x, y)`, `w` wide and `h` high: a red diagonal
/// across it when all of them did, else the count in red in its corner
/// (a box of many switches with one down has not failed).
fn struck(
    c: Option<&Colouring>,
    switches: &[u32],
    (x, y, w, h): (f64, f64, f64, f64),
    count_at: Option<(f64, f64)>,
) -> (String, String) {
    let n = c.map_or(0, |c| {
        switches
            .iter()
            .filter(|&&s| c.failed_switches[s as usize])
            .count()
    });
    if n == 0 {
        return (String::new(), String::new());
    }
    let words = if switches.len() == 1 {
        "; failed during the run".to_string()
    } else {
        format!("; {n} of its switches failed during the run")
    };
    let mark = if n == switches.len() {
        format!(
            "<line class=\"struck\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#d00\" stroke-width=\"2\"/>",
            y + h,
            x + w
        )
    } else {
        let (at, anchor) = count_at.map_or(((x + w - 3.0, y + h - 3.0), "end"), |a| (a, "middle"));
        format!(
            "<text class=\"failed-switches\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" font-weight=\"bold\" fill=\"#d00\" text-anchor=\"{anchor}\">{n} switch{} down</text>",
            at.0,
            at.1,
            if n == 1 { "" } else { "es" }
        )
    };
    (words, mark)
}

/// The switches of tier `from` and above, a row per tier from the top,
/// each in id order.
fn tier_rows(topo: &Topology, from: u8) -> Vec<Vec<usize>> {
    let top = topo.switches.iter().map(|s| s.tier).max().unwrap_or(0);
    (from..=top)
        .rev()
        .map(|t| {
            (0..topo.switches.len())
                .filter(|&s| topo.switches[s].tier == t)
                .collect()
        })
        .collect()
}

/// The capacity of a line's links, one direction.
fn capacity(topo: &Topology, line: &Line) -> u64 {
    line.links
        .iter()
        .map(|&l| topo.port(topo.links[l as usize].a).rate.bps())
        .sum()
}

fn detailed(topo: &Topology, colour: Option<&Colouring>, title: &str) -> Map {
    let names = topo.kind.tier_names();
    let gpus = topo.hosts.iter().map(|h| h.gpus.len()).max().unwrap_or(1);
    let nics = topo.hosts.iter().map(|h| h.nics.len()).max().unwrap_or(1);
    let hw = (12.0 * gpus.max(nics) as f64 + 12.0).max(64.0);
    let tiers = tier_rows(topo, 0);
    let row_w = |n: usize, w: f64| n as f64 * (w + GAP) - GAP;
    let width = tiers
        .iter()
        .map(|r| row_w(r.len(), SW))
        .fold(row_w(topo.hosts.len(), hw), f64::max)
        + 2.0 * MARGIN;
    let x_of = |i: usize, n: usize, w: f64| (width - row_w(n, w)) / 2.0 + i as f64 * (w + GAP);
    let mut pos = vec![(0.0, 0.0); topo.switches.len()];
    for (r, row) in tiers.iter().enumerate() {
        for (i, &s) in row.iter().enumerate() {
            pos[s] = (x_of(i, row.len(), SW), MARGIN + 10.0 + r as f64 * ROW);
        }
    }
    let host_y = MARGIN + 10.0 + tiers.len() as f64 * ROW;
    let host_x: Vec<f64> = (0..topo.hosts.len())
        .map(|h| x_of(h, topo.hosts.len(), hw))
        .collect();
    let nic_at = |h: u32, rail: u32| {
        let n = topo.hosts[h as usize].nics.len().max(1) as f64;
        let step = (hw - 12.0) / n;
        (
            host_x[h as usize] + 6.0 + step * (rail as f64 + 0.5),
            host_y,
        )
    };
    let point = |e: End, above: bool| match e {
        End::Switch(s) => {
            let (x, y) = pos[s as usize];
            (x + SW / 2.0, if above { y } else { y + SH })
        }
        End::Nic(h, r) => nic_at(h, r),
        End::Block(_) => (0.0, 0.0),
    };
    let tier_of = |e: End| match e {
        End::Switch(s) => i32::from(topo.switches[s as usize].tier),
        _ => -1,
    };
    let ls = lines(topo, |e| e);
    let mut labels = Labels::default();
    let mut body = String::new();
    let (mut ends, mut ports) = (Vec::new(), Vec::new());
    for line in &ls {
        let (lo, hi) = if tier_of(line.ends.0) <= tier_of(line.ends.1) {
            line.ends
        } else {
            (line.ends.1, line.ends.0)
        };
        // Same-tier ends (a ring): from the side of one to the other.
        let same = tier_of(lo) == tier_of(hi);
        let a = point(lo, !same);
        let b = point(hi, false);
        let name = |e: End| match e {
            End::Switch(s) => topo.switches[s as usize].name.clone(),
            End::Nic(h, r) => format!("host{h} nic{r}"),
            End::Block(_) => String::new(),
        };
        let lower = |p: PortId| end_of(topo, p) == lo;
        let sd = sides(topo, line, &lower);
        let ld = colour.map(|c| load(c, line, &sd));
        let base = match lo {
            End::Nic(_, r) => RAILS[r as usize % RAILS.len()],
            _ => "#888",
        };
        let names = [name(lo), name(hi)];
        line_svg(
            &mut body,
            ends.len(),
            (a, b),
            (&names[0], &names[1]),
            line.links.len(),
            capacity(topo, line),
            ld.as_ref(),
            base,
            &mut labels,
        );
        ends.push(names);
        ports.push(sd);
    }
    body.push_str(&labels.svg);
    for (s, sw) in topo.switches.iter().enumerate() {
        let (x, y) = pos[s];
        let (fill, deepest) = switch_fill(topo, colour, s);
        let speed = sw
            .ports
            .iter()
            .map(|p| topo.port(*p).rate.bps())
            .max()
            .unwrap_or(0);
        let q = if colour.is_some() {
            format!("; deepest queue {deepest} B")
        } else {
            String::new()
        };
        let (dead, cross) = struck(colour, &[s as u32], (x, y, SW, SH), None);
        let _ = writeln!(
            body,
            "<g class=\"switch\" data-box=\"{s}\"><title>{} ({}, {} ports, up to {}){q}{dead}</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{SW}\" height=\"{SH}\" rx=\"4\" fill=\"{fill}\" stroke=\"#446\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>{cross}</g>",
            esc(&sw.name),
            names[sw.tier as usize],
            sw.ports.len(),
            gbps(speed),
            x + SW / 2.0,
            y + SH / 2.0 + 3.5,
            esc(&sw.name)
        );
    }
    for (h, host) in topo.hosts.iter().enumerate() {
        let x = host_x[h];
        let per = topo.gpus_per_tray as usize;
        let trays = if per > 0 && per < host.gpus.len() {
            host.gpus.len() / per
        } else {
            0
        };
        let in_trays = if trays > 0 {
            format!(" in {trays} trays of {per}")
        } else {
            String::new()
        };
        let _ = write!(
            body,
            "<g class=\"host\"><title>host{h}: {} GPUs{in_trays}, {} NICs</title><rect x=\"{x:.1}\" y=\"{host_y:.1}\" width=\"{hw:.1}\" height=\"40\" rx=\"3\" fill=\"#f6f6f6\" stroke=\"#666\"/>",
            host.gpus.len(),
            host.nics.len()
        );
        // A rack: a thin line between its compute trays.
        let gstep = (hw - 12.0) / host.gpus.len().max(1) as f64;
        for t in 1..trays {
            let tx = x + 6.0 + gstep * (t * per) as f64;
            let _ = write!(
                body,
                "<line class=\"tray\" x1=\"{tx:.1}\" y1=\"{:.1}\" x2=\"{tx:.1}\" y2=\"{:.1}\" stroke=\"#bbb\" stroke-width=\"0.6\"/>",
                host_y + 12.0,
                host_y + 28.0
            );
        }
        for (i, &n) in host.nics.iter().enumerate() {
            let (cx, cy) = nic_at(h as u32, topo.nics[n.idx()].rail);
            let _ = write!(
                body,
                "<rect x=\"{:.1}\" y=\"{cy:.1}\" width=\"7\" height=\"6\" fill=\"{}\"><title>{}</title></rect>",
                cx - 3.5,
                RAILS[i % RAILS.len()],
                esc(&topo.nics[n.idx()].name)
            );
        }
        for (i, &g) in host.gpus.iter().enumerate() {
            let rail = topo.nics[topo.gpus[g.idx()].nic.idx()].rail as usize;
            let _ = write!(
                body,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"8\" height=\"8\" fill=\"white\" stroke=\"{}\"><title>{}</title></rect>",
                x + 6.0 + gstep * (i as f64 + 0.5) - 4.0,
                host_y + 16.0,
                RAILS[rail % RAILS.len()],
                esc(&topo.gpu_name(g))
            );
        }
        let _ = writeln!(
            body,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" text-anchor=\"middle\">host{h}{in_trays}</text></g>",
            x + hw / 2.0,
            host_y + 36.0
        );
    }
    let mut legend = legend_common(colour);
    legend.push(format!(
        "{} switches, {} hosts; NICs and GPUs coloured by rail; host boxes: GPUs above, NICs on the top edge",
        topo.switches.len(),
        topo.hosts.len()
    ));
    let h = host_y + 48.0;
    Map {
        svg: frame(width, h, title, &body, &legend),
        boxes: topo.switches.len() + topo.hosts.len(),
        lines: ls.len(),
        aggregated: false,
        ends,
        ports,
        switches: (0..topo.switches.len() as u32).map(|s| vec![s]).collect(),
    }
}

/// The pods: what stays connected once switches of tier `cut` and above
/// are taken away, by the lowest tier cut that leaves more than one
/// (hosts and switches below it, each pod's in id order); the tier cut.
pub fn pods(topo: &Topology) -> (Vec<u32>, Vec<u32>, u8) {
    let top = topo.switches.iter().map(|s| s.tier).max().unwrap_or(0);
    let n_sw = topo.switches.len();
    let n = n_sw + topo.hosts.len();
    let node = |p: PortId| match topo.port(p).owner {
        Owner::Switch(s) => s.idx(),
        Owner::Nic(x) => n_sw + topo.nics[x.idx()].host.idx(),
    };
    let mut best = None;
    for cut in (1..=top).rev() {
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        let kept = |i: usize| i >= n_sw || topo.switches[i].tier < cut;
        for l in &topo.links {
            let (a, b) = (node(l.a), node(l.b));
            if kept(a) && kept(b) {
                let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                parent[ra.max(rb)] = ra.min(rb);
            }
        }
        let mut id = vec![u32::MAX; n];
        let mut next = 0u32;
        let mut of = vec![u32::MAX; n];
        for (i, pod) in of.iter_mut().enumerate() {
            if !kept(i) {
                continue;
            }
            let r = find(&mut parent, i);
            if id[r] == u32::MAX {
                id[r] = next;
                next += 1;
            }
            *pod = id[r];
        }
        best = Some((of, cut, next));
        if next > 1 {
            break;
        }
    }
    match best {
        Some((of, cut, _)) => (of[..n_sw].to_vec(), of[n_sw..].to_vec(), cut),
        // One tier: every switch and host one pod.
        None => (vec![0; n_sw], vec![0; topo.hosts.len()], 1),
    }
}

/// What happened inside a pod, on the links a block hides: its busiest
/// port and how busy, the PFC pauses its ports sent on them, and how many
/// of them failed.
#[derive(Default)]
struct Inside {
    busiest: Option<(f64, PortId)>,
    pauses: u64,
    failed: usize,
}

/// Per pod, what happened on the links between its own switches and
/// hosts.
fn insides(
    topo: &Topology,
    c: &Colouring,
    pod_of: &dyn Fn(PortId) -> u32,
    n: usize,
) -> Vec<Inside> {
    let mut inside: Vec<Inside> = (0..n).map(|_| Inside::default()).collect();
    for (li, l) in topo.links.iter().enumerate() {
        let pod = pod_of(l.a);
        if pod == u32::MAX || pod != pod_of(l.b) {
            continue;
        }
        let at = &mut inside[pod as usize];
        for p in [l.a, l.b] {
            let u = c.util[p.idx()];
            if c.bytes[p.idx()] > 0 && at.busiest.is_none_or(|(b, _)| u > b) {
                at.busiest = Some((u, p));
            }
            at.pauses += c.pauses[p.idx()];
        }
        at.failed += usize::from(c.failed[li]);
    }
    inside
}

/// Widest an aggregate picture gets (boxes narrow to fit, down to a
/// least width each).
const MAX_WIDTH: f64 = 1600.0;
/// Height of a pod's box.
const POD_H: f64 = 56.0;

fn aggregate(topo: &Topology, colour: Option<&Colouring>, title: &str) -> Map {
    let names = topo.kind.tier_names();
    let (sw_pod, host_pod, cut) = pods(topo);
    let n_pods = sw_pod
        .iter()
        .chain(&host_pod)
        .filter(|&&p| p != u32::MAX)
        .max()
        .map_or(0, |&m| m as usize + 1);
    // The switches above the cut, by tier from the top; one by one, or
    // one block per tier past DETAIL_TOP.
    let top = topo.switches.iter().map(|s| s.tier).max().unwrap_or(0);
    let upper = tier_rows(topo, cut);
    let pod_block = |p: u32| End::Block(p);
    let tier_block = |t: u8| End::Block(n_pods as u32 + u32::from(t));
    let map = |e: End| match e {
        End::Switch(s) if sw_pod[s as usize] != u32::MAX => pod_block(sw_pod[s as usize]),
        End::Switch(s) => {
            let t = topo.switches[s as usize].tier;
            let row = &upper[(top - t) as usize];
            if row.len() > DETAIL_TOP {
                tier_block(t)
            } else {
                End::Switch(s)
            }
        }
        End::Nic(h, _) => pod_block(host_pod[h as usize]),
        b => b,
    };
    let ls = lines(topo, map);
    // Rows: the upper tiers, then the pods, narrower where there are many.
    // Rows of many boxes stand closer.
    let gap = |n: usize| if n > 16 { 6.0 } else { GAP };
    let fit = |n: usize, most: f64, least: f64| {
        ((MAX_WIDTH - 2.0 * MARGIN) / n.max(1) as f64 - gap(n)).clamp(least, most)
    };
    let pw = fit(n_pods, 150.0, 40.0);
    let sw_w = |n: usize| fit(n, SW, 44.0);
    let row_w = |n: usize, w: f64| n as f64 * (w + gap(n)) - gap(n);
    let upper_items: Vec<Vec<End>> = upper
        .iter()
        .map(|row| {
            if row.len() > DETAIL_TOP {
                vec![tier_block(topo.switches[row[0]].tier)]
            } else {
                row.iter().map(|&s| End::Switch(s as u32)).collect()
            }
        })
        .collect();
    let width = upper_items
        .iter()
        .map(|r| row_w(r.len(), sw_w(r.len())))
        .fold(row_w(n_pods, pw), f64::max)
        + 2.0 * MARGIN;
    let x_of = |i: usize, n: usize, w: f64| (width - row_w(n, w)) / 2.0 + i as f64 * (w + gap(n));
    let mut at: std::collections::HashMap<End, (f64, f64, f64)> = Default::default();
    for (r, row) in upper_items.iter().enumerate() {
        let each = sw_w(row.len());
        for (i, &e) in row.iter().enumerate() {
            let w = if matches!(e, End::Block(_)) {
                SW * 1.6
            } else {
                each
            };
            let wide_row = row_w(row.len(), each);
            let x =
                (width - wide_row) / 2.0 + i as f64 * (each + gap(row.len())) - (w - each) / 2.0;
            at.insert(e, (x, MARGIN + 10.0 + r as f64 * ROW, w));
        }
    }
    let pod_y = MARGIN + 10.0 + upper_items.len() as f64 * ROW;
    for p in 0..n_pods {
        at.insert(pod_block(p as u32), (x_of(p, n_pods, pw), pod_y, pw));
    }
    let mut body = String::new();
    let mut labels = Labels::default();
    let (mut ends, mut ports) = (Vec::new(), Vec::new());
    for line in &ls {
        let (lo, hi) = line.ends;
        // Pods and lower tiers below: the end with the lower position.
        let (lo, hi) = if at[&lo].1 >= at[&hi].1 {
            (lo, hi)
        } else {
            (hi, lo)
        };
        let (la, ha) = (at[&lo], at[&hi]);
        let a = (la.0 + la.2 / 2.0, la.1);
        let b = (ha.0 + ha.2 / 2.0, ha.1 + SH);
        let name = |e: End| match e {
            End::Switch(s) => topo.switches[s as usize].name.clone(),
            End::Block(b) if (b as usize) < n_pods => format!("pod{b}"),
            End::Block(b) => format!("{} tier", names[(b as usize - n_pods).min(2)]),
            End::Nic(..) => String::new(),
        };
        let lower = |p: PortId| map(end_of(topo, p)) == lo;
        let sd = sides(topo, line, &lower);
        let ld = colour.map(|c| load(c, line, &sd));
        let names = [name(lo), name(hi)];
        line_svg(
            &mut body,
            ends.len(),
            (a, b),
            (&names[0], &names[1]),
            line.links.len(),
            capacity(topo, line),
            ld.as_ref(),
            "#888",
            &mut labels,
        );
        ends.push(names);
        ports.push(sd);
    }
    body.push_str(&labels.svg);
    let pod_of = |p: PortId| match topo.port(p).owner {
        Owner::Switch(s) => sw_pod[s.idx()],
        Owner::Nic(n) => host_pod[topo.nics[n.idx()].host.idx()],
    };
    let inside = colour.map(|c| insides(topo, c, &pod_of, n_pods));
    let mut boxes = 0;
    let mut switches: Vec<Vec<u32>> = Vec::new();
    for row in &upper_items {
        for &e in row {
            let (x, y, w) = at[&e];
            let (label, detail, fill, members) = match e {
                End::Switch(s) => {
                    let (fill, _) = switch_fill(topo, colour, s as usize);
                    let sw = &topo.switches[s as usize];
                    (
                        sw.name.clone(),
                        format!("{}, {} ports", names[sw.tier as usize], sw.ports.len()),
                        fill,
                        vec![s],
                    )
                }
                End::Block(b) => {
                    let t = (b as usize - n_pods) as u8;
                    let members: Vec<u32> = (0..topo.switches.len() as u32)
                        .filter(|&s| topo.switches[s as usize].tier == t)
                        .collect();
                    let fill = members
                        .iter()
                        .map(|&s| switch_fill(topo, colour, s as usize))
                        .max_by_key(|f| f.1)
                        .map_or("#eef".to_string(), |f| f.0);
                    (
                        format!("{} x{}", names[t as usize], members.len()),
                        format!(
                            "{} {} switches, drawn as one",
                            members.len(),
                            names[t as usize]
                        ),
                        fill,
                        members,
                    )
                }
                End::Nic(..) => continue,
            };
            boxes += 1;
            let k = switches.len();
            let (dead, cross) = struck(colour, &members, (x, y, w, SH), None);
            switches.push(members);
            let _ = writeln!(
                body,
                "<g class=\"switch\" data-box=\"{k}\"><title>{}</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{SH}\" rx=\"4\" fill=\"{fill}\" stroke=\"#446\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>{cross}</g>",
                esc(&format!("{label}: {detail}{dead}")),
                x + w / 2.0,
                y + SH / 2.0 + 3.5,
                esc(&label)
            );
        }
    }
    for p in 0..n_pods {
        let (x, y, w) = at[&pod_block(p as u32)];
        let hosts: Vec<usize> = (0..host_pod.len())
            .filter(|&h| host_pod[h] == p as u32)
            .collect();
        let gpus: usize = hosts.iter().map(|&h| topo.hosts[h].gpus.len()).sum();
        let sws: Vec<usize> = (0..sw_pod.len())
            .filter(|&s| sw_pod[s] == p as u32)
            .collect();
        let mut per_tier = [0usize; 3];
        for &s in &sws {
            per_tier[(topo.switches[s].tier as usize).min(2)] += 1;
        }
        let tiers: Vec<String> = (0..3)
            .filter(|&t| per_tier[t] > 0)
            .map(|t| format!("{} {}", per_tier[t], names[t]))
            .collect();
        let fill = sws
            .iter()
            .map(|&s| switch_fill(topo, colour, s))
            .max_by_key(|f| f.1)
            .map_or("#eef".to_string(), |f| f.0);
        boxes += 1;
        let k = switches.len();
        let members: Vec<u32> = sws.iter().map(|&s| s as u32).collect();
        let (dead, cross) = struck(
            colour,
            &members,
            (x, y, w, POD_H),
            Some((x + w / 2.0, y + POD_H + 22.0)),
        );
        switches.push(members);
        // Narrow boxes say less; the title has it all.
        let fits = |t: &str| 5.2 * t.len() as f64 <= w - 6.0;
        let counts = [
            format!("{} hosts, {gpus} GPUs", hosts.len()),
            format!("{} hosts", hosts.len()),
        ];
        let counts = counts.iter().find(|t| fits(t)).map_or("", |t| t.as_str());
        let mut about = format!(
            "pod{p}: {} hosts, {gpus} GPUs, {}{dead}",
            hosts.len(),
            tiers.join(", ")
        );
        // What happened on the links inside: the busiest port as a bar
        // across the box's foot, pauses as a mark on its corner, failed
        // links under it.
        let mut marks = String::new();
        let (third, third_class) = match &inside {
            Some(inside) => {
                let i = &inside[p];
                if let Some((u, port)) = i.busiest {
                    let _ = write!(
                        about,
                        "; busiest port inside: {} -> {}, {:.1}% busy",
                        topo.owner_name(port),
                        topo.member_name(port),
                        100.0 * u
                    );
                    let _ = write!(
                        marks,
                        "<rect class=\"hot\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"5\" fill=\"{}\" stroke=\"#333\" stroke-width=\"0.5\"/>",
                        x + 6.0,
                        y + POD_H - 9.0,
                        w - 12.0,
                        heat(u)
                    );
                }
                if i.pauses > 0 {
                    let _ = write!(about, "; {} PFC pauses sent inside", i.pauses);
                    let _ = write!(
                        marks,
                        "<g class=\"pause\"><title>{} PFC pauses sent</title><circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"8\" fill=\"#f80\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"7\" text-anchor=\"middle\" fill=\"#000\">{}</text></g>",
                        i.pauses,
                        x + 4.0,
                        y + 2.0,
                        x + 4.0,
                        y + 4.5,
                        i.pauses
                    );
                }
                if i.failed > 0 {
                    let _ = write!(about, "; {} link(s) inside failed", i.failed);
                    let _ = write!(
                        marks,
                        "<text class=\"failed-inside\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" font-weight=\"bold\" fill=\"#d00\" text-anchor=\"middle\">\u{2715} {} link{} inside</text>",
                        x + w / 2.0,
                        y + POD_H + 11.0,
                        i.failed,
                        if i.failed == 1 { "" } else { "s" }
                    );
                }
                let busiest = i.busiest.map_or(0.0, |b| b.0);
                (format!("busiest {:.0}%", 100.0 * busiest), "busiest")
            }
            None => (tiers.join(", "), "tiers"),
        };
        let third = if fits(&third) { third } else { String::new() };
        let _ = writeln!(
            body,
            "<g class=\"pod\" data-box=\"{k}\"><title>{}</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{POD_H}\" rx=\"6\" fill=\"{fill}\" stroke=\"#446\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">pod{p}</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" text-anchor=\"middle\">{counts}</text><text class=\"{third_class}\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" text-anchor=\"middle\">{}</text>{marks}{cross}</g>",
            esc(&about),
            x + w / 2.0,
            y + 14.0,
            x + w / 2.0,
            y + 28.0,
            x + w / 2.0,
            y + 41.0,
            esc(&third)
        );
    }
    let mut legend = legend_common(colour);
    legend.push(format!(
        "drawn in aggregate ({} switches, {} hosts: more than {DETAIL_SWITCHES} switches or {DETAIL_HOSTS} hosts): a pod is what stays connected without the {} tier and above; a line is the bundle between two boxes, with its member count and capacity, coloured by its busiest member",
        topo.switches.len(),
        topo.hosts.len(),
        names[(cut as usize).min(2)]
    ));
    if colour.is_some() {
        legend.push("inside a pod: the bar across its foot is its busiest port on the links inside it (hover for which), the orange mark on its corner the PFC pauses sent on them; under it, its links inside and switches that failed (struck through only when all did)".into());
    }
    let h = pod_y + POD_H + 32.0;
    Map {
        svg: frame(width, h, title, &body, &legend),
        boxes,
        lines: ls.len(),
        aggregated: true,
        ends,
        ports,
        switches,
    }
}
