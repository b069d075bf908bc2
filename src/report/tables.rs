//! The CSV tables: one row per transfer, one row per link direction.

use crate::engine::Simulation;
use crate::switch::classify::QUEUES;
use crate::topology::{Owner, PortId};
use crate::units::SimTime;
use crate::workload::graph::TaskKind;
use std::io::Write;

/// Flushes a table's writer: its last rows reach the file.
fn finish<W: Write>(mut w: csv::Writer<W>) -> std::io::Result<()> {
    w.flush()
}

/// jobs.csv: one row per training job iteration: its time, the mean
/// GPU's compute, and per dimension of parallelism (tp, pp, dp) the mean
/// rank's communication time, the part of it no kernel hides, and bytes.
pub fn jobs_csv(s: &super::Summary, out: impl Write) -> std::io::Result<()> {
    use crate::workload::model::Dim;
    let mut w = csv::Writer::from_writer(out);
    let mut head = vec![
        "workload".to_string(),
        "tenant".into(),
        "ranks".into(),
        "iteration".into(),
        "step_ps".into(),
        "compute_ps".into(),
    ];
    for d in Dim::ALL {
        for col in ["comm_ps", "exposed_ps", "bytes"] {
            head.push(format!("{}_{col}", d.name()));
        }
    }
    w.write_record(&head)?;
    for j in &s.jobs {
        for st in &j.steps {
            let mut row = vec![
                j.workload.to_string(),
                j.tenant.to_string(),
                j.ranks.to_string(),
                st.iteration.to_string(),
                st.step_ps.to_string(),
                format!("{:.0}", st.compute_ps),
            ];
            for d in Dim::ALL {
                match st.dims.iter().find(|x| x.dim == d.name()) {
                    Some(x) => row.extend([
                        format!("{:.0}", x.comm_ps),
                        format!("{:.0}", x.exposed_ps),
                        x.bytes.to_string(),
                    ]),
                    None => row.extend(["0".into(), "0".into(), "0".into()]),
                }
            }
            w.write_record(&row)?;
        }
    }
    finish(w)
}

/// collectives.csv: one row per collective, nccl-tests' columns first.
pub fn collectives_csv(s: &super::Summary, out: impl Write) -> std::io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "collective",
        "algorithm",
        "protocol",
        "channels",
        "ranks",
        "bytes",
        "time_ps",
        "algbw_gbps",
        "busbw_gbps",
        "workload",
        "iteration",
        "start_ps",
        "step_latency",
        "medium",
    ])?;
    let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.3}"));
    for c in &s.collectives {
        w.write_record([
            c.collective.clone(),
            c.algorithm.clone(),
            c.protocol.clone(),
            c.channels.to_string(),
            c.ranks.to_string(),
            c.bytes.to_string(),
            c.time_ps.map_or(String::new(), |t| t.to_string()),
            opt(c.algbw_gbps),
            opt(c.busbw_gbps),
            c.workload.to_string(),
            c.iteration.map_or(String::new(), |i| i.to_string()),
            c.start_ps.to_string(),
            c.step_latency.clone(),
            c.medium.to_string(),
        ])?;
    }
    finish(w)
}

/// What transfer `i`'s messages cost: those done, counted in its
/// `FlowState`, and those its QPs still hold.
struct Cost {
    retx_bytes: u64,
    timeouts: u64,
    out_of_order: u64,
    naks: u64,
}

fn message_costs(sim: &Simulation, i: usize, f: &crate::runtime::FlowState) -> Cost {
    let mut c = Cost {
        retx_bytes: f.retx_bytes,
        timeouts: f.timeouts as u64,
        out_of_order: f.out_of_order as u64,
        naks: f.naks as u64,
    };
    for qp in &sim.qps()[f.first_qp as usize..(f.first_qp + f.n_qps) as usize] {
        for m in qp.req.unfinished().filter(|m| m.flow as usize == i) {
            c.retx_bytes += m.again;
            c.timeouts += m.stalls;
        }
        for m in qp.resp.unfinished().filter(|m| m.flow as usize == i) {
            c.out_of_order += m.again;
            c.naks += m.stalls;
        }
    }
    c
}

pub fn flows_csv(sim: &Simulation, out: impl Write) -> std::io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "flow_id",
        "workload",
        "src",
        "dst",
        "src_name",
        "dst_name",
        "bytes",
        "qps",
        "start_ps",
        "finish_ps",
        "fct_ps",
        "ideal_fct_ps",
        "slowdown",
        "acked_ps",
        "retransmitted_bytes",
        "timeouts",
        "out_of_order",
        "naks",
        "paths",
        "path_changes",
        "ack_paths",
        "paths_used",
        "out_of_order_fraction",
        "medium",
        "messages",
    ])?;
    let mut row = FlowRow::new(sim);
    for (i, f) in sim.every_flow().enumerate() {
        let f = &*f;
        let cost = message_costs(sim, i, f);
        let start = (f.start != SimTime::MAX).then_some(f.start);
        row.head(
            Some(i),
            f.spec.workload,
            (f.spec.src, f.spec.dst),
            f.spec.bytes,
            f.n_qps,
            (start, f.finish, f.ideal_fct),
        );
        row.network(
            sim,
            (f.first_qp, f.n_qps),
            f.acked,
            &cost,
            u64::from(f.pkts),
            1,
        );
        w.write_byte_record(&row.rec)?;
    }
    // A pass's connections: a row each, its messages summed.
    for r in sim.every_pass_row().filter(|r| r.planned > 0) {
        connection_row(sim, &mut row, &r);
        w.write_byte_record(&row.rec)?;
    }
    // Copies between GPUs of one host went over NVLink: rows of their own,
    // with no flow id and no network figures.
    let graph = &sim.tasks().graph;
    let regions = &graph.workload_first_task;
    let first = graph.tasks.iter().enumerate().filter_map(|(t, task)| {
        let TaskKind::Local { src, dst, bytes } = task.kind else {
            return None;
        };
        let at = regions
            .partition_point(|&(first, _)| first as usize <= t)
            .saturating_sub(1);
        let tasks = sim.tasks();
        Some(crate::runtime::later::CopyRow {
            workload: regions.get(at).map_or(0, |r| r.1),
            src,
            dst,
            bytes,
            started: tasks.started[t],
            done: tasks.done[t],
        })
    });
    for c in first.chain(sim.later_copies()) {
        if c.src == c.dst {
            continue;
        }
        let start = (c.started != SimTime::MAX).then_some(c.started);
        let finish = (c.done != SimTime::MAX).then_some(c.done);
        let ideal = sim.tasks().nvlink.alone(c.bytes);
        row.head(
            None,
            c.workload,
            (c.src, c.dst),
            c.bytes,
            0,
            (start, finish, ideal),
        );
        row.nvlink(1);
        w.write_byte_record(&row.rec)?;
    }
    if sim.later_rows_lost() {
        return Err(std::io::Error::other(
            "rows of jobs' iterations written to a temporary file during the run could not be read back",
        ));
    }
    finish(w)
}

/// A row of flows.csv, made in buffers used again for every row: a run
/// with a million connections writes its rows without allocating for
/// each.
struct FlowRow {
    rec: csv::ByteRecord,
    text: String,
    /// Each GPU's name, `hostH/gpuL`.
    names: Vec<String>,
    /// The path columns of QP ranges (first QP, count) seen: a
    /// connection's messages share its QPs, and its rows their paths,
    /// which take hundreds of instructions a hop to work out. Emptied
    /// when full.
    paths: rustc_hash::FxHashMap<(u32, u32), PathColumns>,
}

/// QP ranges whose path columns `FlowRow` keeps (about 100 bytes each).
const PATHS_KEPT: usize = 65_536;

/// The path columns of the transfers on a range of QPs.
struct PathColumns {
    paths: String,
    changes: u64,
    ack_paths: String,
    used: usize,
}

impl PathColumns {
    fn of(sim: &Simulation, first: u32, n: u32) -> PathColumns {
        PathColumns {
            paths: paths(sim, first, n),
            changes: (first..first + n)
                .filter_map(|q| sim.paths().get(crate::topology::QpId(q)))
                .map(|p| p.changes)
                .sum(),
            ack_paths: ack_paths(sim, first, n),
            used: paths_used(sim, first, n),
        }
    }
}

impl FlowRow {
    fn new(sim: &Simulation) -> FlowRow {
        let topo = sim.topo();
        FlowRow {
            rec: csv::ByteRecord::new(),
            text: String::new(),
            names: (0..topo.gpus.len() as u32)
                .map(|g| topo.gpu_name(crate::topology::GpuId(g)))
                .collect(),
            paths: Default::default(),
        }
    }

    fn num(&mut self, v: impl itoa::Integer) {
        self.rec
            .push_field(itoa::Buffer::new().format(v).as_bytes());
    }

    fn opt(&mut self, v: Option<SimTime>) {
        match v {
            Some(t) => self.num(t.0),
            None => self.rec.push_field(b""),
        }
    }

    /// A ratio to four places.
    fn ratio(&mut self, a: u64, b: u64) {
        self.text.clear();
        four_places(a as f64 / b.max(1) as f64, &mut self.text);
        self.rec.push_field(self.text.as_bytes());
    }

    /// The columns every row has, from the transfer number (none for a
    /// connection or a copy) to the slowdown; starts the row.
    fn head(
        &mut self,
        id: Option<usize>,
        workload: u32,
        (src, dst): (crate::topology::GpuId, crate::topology::GpuId),
        bytes: u64,
        qps: u32,
        (start, finish, ideal): (Option<SimTime>, Option<SimTime>, SimTime),
    ) {
        self.rec.clear();
        match id {
            Some(i) => self.num(i),
            None => self.rec.push_field(b""),
        }
        self.num(workload);
        self.num(src.0);
        self.num(dst.0);
        self.rec.push_field(self.names[src.idx()].as_bytes());
        self.rec.push_field(self.names[dst.idx()].as_bytes());
        self.num(bytes);
        self.num(qps);
        let fct = start.zip(finish).map(|(s, f)| f - s);
        self.opt(start);
        self.opt(finish);
        self.opt(fct);
        self.num(ideal.0);
        match fct {
            Some(t) => self.ratio(t.0, ideal.0),
            None => self.rec.push_field(b""),
        }
    }

    /// The network columns of a transfer or connection on QPs `first`
    /// and on (`n` of them), then its messages.
    fn network(
        &mut self,
        sim: &Simulation,
        (first, n): (u32, u32),
        acked: Option<SimTime>,
        cost: &Cost,
        pkts: u64,
        messages: u64,
    ) {
        self.opt(acked);
        self.num(cost.retx_bytes);
        self.num(cost.timeouts);
        self.num(cost.out_of_order);
        self.num(cost.naks);
        if self.paths.len() >= PATHS_KEPT && !self.paths.contains_key(&(first, n)) {
            self.paths.clear();
        }
        let c = self
            .paths
            .entry((first, n))
            .or_insert_with(|| PathColumns::of(sim, first, n));
        self.rec.push_field(c.paths.as_bytes());
        let mut num = itoa::Buffer::new();
        self.rec.push_field(num.format(c.changes).as_bytes());
        self.rec.push_field(c.ack_paths.as_bytes());
        self.rec.push_field(num.format(c.used).as_bytes());
        self.ratio(cost.out_of_order, pkts);
        self.rec.push_field(b"network");
        self.num(messages);
    }

    /// No acknowledgement, retransmission or path: empty network
    /// columns, then the medium and the messages.
    fn nvlink(&mut self, messages: u64) {
        for _ in 0..10 {
            self.rec.push_field(b"");
        }
        self.rec.push_field(b"nvlink");
        self.num(messages);
    }
}

/// Writes `x` (at least 0) as `{:.4}` does, to the digit: the exact value
/// of the double rounded half to even. The formatter's exact path
/// reaches for big-number arithmetic on most such values (about 4,000
/// instructions); this is a 128-bit multiply and shift.
fn four_places(x: f64, out: &mut String) {
    use std::fmt::Write;
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1 << 52) - 1);
    if x.is_sign_negative() || exp == 0x7ff || exp > 1075 + 40 {
        // Not a ratio of counts: the formatter's own way.
        let _ = write!(out, "{x:.4}");
        return;
    }
    // x = m * 2^e exactly.
    let (m, e) = if exp == 0 {
        (frac, -1074)
    } else {
        (frac | 1 << 52, exp - 1075)
    };
    let scaled = u128::from(m) * 10_000;
    let q = if e >= 0 {
        scaled << e
    } else if e <= -128 {
        0
    } else {
        let s = -e as u32;
        let (q, rem, half) = (scaled >> s, scaled & ((1 << s) - 1), 1u128 << (s - 1));
        q + u128::from(rem > half || (rem == half && q & 1 == 1))
    };
    out.push_str(itoa::Buffer::new().format(q / 10_000));
    let f = (q % 10_000) as u32;
    out.push('.');
    for d in [f / 1000, f / 100 % 10, f / 10 % 10, f % 10] {
        out.push(char::from(b'0' + d as u8));
    }
}

/// flows.csv's row of a pass connection: the bytes its receiver has,
/// from its first message's start to its last one's delivery, against the
/// sum of its messages' ideal times; no transfer number (its messages
/// have theirs, but no row each).
fn connection_row(sim: &Simulation, row: &mut FlowRow, r: &crate::runtime::pass_rows::ConnRow) {
    let start = (r.start != SimTime::MAX).then_some(r.start);
    row.head(
        None,
        r.workload,
        (r.src, r.dst),
        r.bytes,
        r.qps,
        (start, r.finish, r.ideal),
    );
    if r.qps == 0 {
        row.nvlink(r.messages);
    } else {
        let cost = Cost {
            retx_bytes: r.retx_bytes,
            timeouts: r.timeouts,
            out_of_order: r.out_of_order,
            naks: r.naks,
        };
        row.network(sim, (r.first_qp, r.qps), r.acked, &cost, r.pkts, r.messages);
    }
}

/// The switches each QP of a transfer crosses, `leaf0>spine2>leaf1`, QPs
/// separated by `;` (distinct paths only, in QP order). Where a balancer
/// chose dynamically, the record of what it chose instead, per switch:
/// `leaf0[spine1*120 spine0*40] spine1[leaf3*120] spine0[leaf3*40]`
/// (next hop and data packets of each run).
fn paths(sim: &Simulation, first_qp: u32, n_qps: u32) -> String {
    let mut seen: Vec<String> = Vec::new();
    for q in first_qp..first_qp + n_qps {
        let q = crate::topology::QpId(q);
        let p = match (sim.qp_path(q), sim.paths().get(q)) {
            (Some(hops), _) => hops
                .iter()
                .map(|s| sim.topo().switches[s.idx()].name.as_str())
                .collect::<Vec<_>>()
                .join(">"),
            (None, Some(record)) => record.describe(sim.topo()),
            (None, None) => "dynamic".to_string(),
        };
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    seen.join(";")
}

/// Every equal-cost group of more than one member at every switch: the
/// bytes each member sent, max/mean and Jain's index over them. Member
/// bytes are the port's, so a port in several groups of one switch counts
/// all its traffic in each (`shared` says so).
pub fn groups_csv(sim: &Simulation, out: impl Write) -> std::io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "switch",
        "group",
        "members",
        "member_names",
        "member_bytes",
        "max_over_mean",
        "jain",
        "shared",
    ])?;
    for (si, routes) in sim.routes().switches.iter().enumerate() {
        let groups: Vec<&[PortId]> = (0..routes.groups.len() as u32)
            .map(|g| routes.member_slice(g))
            .collect();
        for (g, members) in groups.iter().enumerate() {
            if members.len() < 2 {
                continue;
            }
            let bytes: Vec<u64> = members
                .iter()
                .map(|p| sim.ports()[p.idx()].tx_wire_bytes)
                .collect();
            let shared = groups
                .iter()
                .enumerate()
                .any(|(h, o)| h != g && o.iter().any(|p| members.contains(p)));
            let (mom, jain) = spread(&bytes);
            let names: Vec<String> = members.iter().map(|&p| sim.topo().member_name(p)).collect();
            w.write_record([
                sim.topo().switches[si].name.clone(),
                g.to_string(),
                members.len().to_string(),
                names.join(";"),
                bytes
                    .iter()
                    .map(|b| b.to_string())
                    .collect::<Vec<_>>()
                    .join(";"),
                format!("{mom:.4}"),
                format!("{jain:.4}"),
                shared.to_string(),
            ])?;
        }
    }
    finish(w)
}

/// Max over mean and Jain's fairness index of a set of loads (1 and 1 for
/// an even or an all-idle set).
pub fn spread(bytes: &[u64]) -> (f64, f64) {
    let total: u64 = bytes.iter().sum();
    if bytes.is_empty() || total == 0 {
        return (1.0, 1.0);
    }
    let n = bytes.len() as f64;
    let max = *bytes.iter().max().unwrap_or(&0) as f64;
    let sq: f64 = bytes.iter().map(|&b| (b as f64) * (b as f64)).sum();
    (max * n / total as f64, (total as f64).powi(2) / (n * sq))
}

/// How many distinct paths a transfer's data took: distinct static paths
/// over its QPs or, where balancers chose dynamically, the branches of its
/// path records (distinct switch and next-hop pairs, less one per switch,
/// plus one).
fn paths_used(sim: &Simulation, first_qp: u32, n_qps: u32) -> usize {
    let qps = || (first_qp..first_qp + n_qps).map(crate::topology::QpId);
    let mut statics: Vec<Vec<PortId>> = Vec::new();
    let mut pairs: Vec<(u32, PortId)> = Vec::new();
    let mut switches: Vec<u32> = Vec::new();
    for q in qps() {
        if let Some(r) = sim.qp_route(q) {
            if !statics.contains(&r) {
                statics.push(r);
            }
        } else if let Some(rec) = sim.paths().get(q) {
            for st in &rec.steps {
                if !pairs.contains(&(st.switch.0, st.port)) {
                    pairs.push((st.switch.0, st.port));
                }
                if !switches.contains(&st.switch.0) {
                    switches.push(st.switch.0);
                }
            }
        }
    }
    statics.len()
        + (pairs.len() + 1)
            .saturating_sub(switches.len())
            .min(pairs.len())
}

/// The switches each QP's ACKs cross on their way back, where they
/// follow from the header (`dynamic` otherwise).
fn ack_paths(sim: &Simulation, first_qp: u32, n_qps: u32) -> String {
    let mut seen: Vec<String> = Vec::new();
    for q in first_qp..first_qp + n_qps {
        let p = match sim.qp_ack_route(crate::topology::QpId(q)) {
            Some(route) => route[1..]
                .iter()
                .map(|&p| sim.topo().owner_name(p))
                .collect::<Vec<_>>()
                .join(">"),
            None => "dynamic".to_string(),
        };
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    seen.join(";")
}

pub fn links_csv(sim: &Simulation, out: impl Write) -> std::io::Result<()> {
    let topo = &sim.topo();
    let names = topo.kind.tier_names();
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "link",
        "from",
        "to",
        "tier",
        "rate_bps",
        "bytes",
        "packets",
        "utilization",
        "active_utilization",
        "max_queue_bytes",
        "drops",
        "connections",
    ])?;
    let span = sim.now().0.max(1) as f64;
    let active = super::active_ps(sim) as f64;
    let conns = super::connections_per_port(sim);
    for (li, l) in topo.links.iter().enumerate() {
        for p in [l.a, l.b] {
            let port = &sim.ports()[p.idx()];
            let peer = topo.port(p).peer;
            let tier = if l.tier == 0 {
                format!("host-{}", names[0])
            } else {
                format!("{}-{}", names[l.tier as usize - 1], names[l.tier as usize])
            };
            w.write_record([
                li.to_string(),
                topo.owner_name(p).to_string(),
                topo.owner_name(peer).to_string(),
                tier,
                topo.port(p).rate.bps().to_string(),
                port.tx_wire_bytes.to_string(),
                port.tx_packets.to_string(),
                format!("{:.4}", port.busy_ps as f64 / span),
                format!("{:.4}", (port.busy_ps as f64 / active).min(1.0)),
                sim.queues()[p.idx()].max_bytes.to_string(),
                sim.port_drops()[p.idx()].packets.to_string(),
                conns
                    .as_ref()
                    .map_or(String::new(), |c| c[p.idx()].to_string()),
            ])?;
        }
    }
    finish(w)
}

/// One row per switch egress queue that carried or dropped anything.
pub fn queues_csv(sim: &Simulation, out: impl Write) -> std::io::Result<()> {
    let topo = &sim.topo();
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "from",
        "to",
        "queue",
        "class",
        "frames",
        "enqueued",
        "max_depth_bytes",
        "ecn_marks",
        "drops",
        "wred_drops",
        "watchdog_drops",
        "trims",
    ])?;
    for (p, q) in sim.queues().iter().enumerate() {
        let pid = PortId(p as u32);
        if !matches!(topo.port(pid).owner, Owner::Switch(_)) {
            continue;
        }
        for i in 0..QUEUES {
            let st = q.stats(i);
            if st.frames + st.drops + st.wred_drops + st.watchdog_drops + st.trims == 0 {
                continue;
            }
            w.write_record([
                topo.owner_name(pid).to_string(),
                topo.owner_name(topo.port(pid).peer).to_string(),
                i.to_string(),
                sim.scenario().qos.queues[i].name.clone(),
                st.frames.to_string(),
                st.enqueued.to_string(),
                st.max_bytes.to_string(),
                st.ecn_marks.to_string(),
                st.drops.to_string(),
                st.wred_drops.to_string(),
                st.watchdog_drops.to_string(),
                st.trims.to_string(),
            ])?;
        }
    }
    finish(w)
}

/// One row per port and lossless priority that sent or received a PFC
/// frame, or dropped lossless traffic: the port's node, its peer, what it
/// sent (it was congested) and what it received (its transmitter was
/// paused); whether it runs PFC (a configuration can leave it off), and
/// the pauses it ignored for that.
pub fn pfc_csv(sim: &Simulation, out: impl Write) -> std::io::Result<()> {
    let topo = &sim.topo();
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "node",
        "peer",
        "priority",
        "pauses_sent",
        "first_pause_ps",
        "resumes_sent",
        "pauses_received",
        "resumes_received",
        "paused_ps",
        "peak_ingress_bytes",
        "peak_headroom_bytes",
        "headroom_bytes",
        "headroom_needed_bytes",
        "watchdog_events",
        "lossless_drops",
        "pfc",
        "pauses_ignored",
    ])?;
    let n = sim.pfc_slots().max(1);
    for (i, st) in sim.pfc().iter().enumerate() {
        let active = st.pauses_sent
            + st.pauses_received
            + st.lossless_drops
            + st.watchdog_events
            + st.pauses_ignored;
        if active == 0 {
            continue;
        }
        let pid = PortId((i / n) as u32);
        let prio = (0..8)
            .find(|&q| sim.pfc_slot()[q] as usize == i % n)
            .unwrap_or(0);
        w.write_record([
            topo.owner_name(pid).to_string(),
            topo.owner_name(topo.port(pid).peer).to_string(),
            prio.to_string(),
            st.pauses_sent.to_string(),
            st.first_pause.map_or(String::new(), |t| t.0.to_string()),
            st.resumes_sent.to_string(),
            st.pauses_received.to_string(),
            st.resumes_received.to_string(),
            sim.paused_ps(i).to_string(),
            st.peak_bytes.to_string(),
            st.peak_headroom.to_string(),
            st.cfg.headroom.to_string(),
            st.cfg.headroom_needed.to_string(),
            st.watchdog_events.to_string(),
            st.lossless_drops.to_string(),
            if st.cfg.off { "off" } else { "on" }.to_string(),
            st.pauses_ignored.to_string(),
        ])?;
    }
    finish(w)
}

/// One row per QP: its transfer, CNPs and DCQCN rate.
pub fn qps_csv(sim: &Simulation, out: impl Write) -> std::io::Result<()> {
    let mut w_out = csv::Writer::from_writer(out);
    w_out.write_record([
        "qp",
        "flow_id",
        "dscp",
        "congestion_control",
        "cnps_sent",
        "cnps_received",
        "rate_cuts",
        "min_rate_gbps",
        "final_rate_gbps",
        "retransmitted_bytes",
        "out_of_order",
        "duplicates",
        "naks_sent",
        "max_reorder_bytes",
        "reorder_discards",
        "window_cuts",
        "min_window_packets",
        "final_window_packets",
    ])?;
    for (i, q) in sim.qps().iter().enumerate() {
        // A paced rate's cuts, lowest and final value (DCQCN's, HPCC's,
        // TIMELY's).
        let (d, h) = (q.req.rate.dcqcn(), q.req.rate.hpcc());
        let rate = d
            .map(|d| (d.cuts, d.min_rc, d.rc))
            .or(h.map(|h| (h.cuts, h.min_bps, h.rate_bps)))
            .or(q.req.rate.timely().map(|t| (t.cuts, t.min_bps, t.rate_bps)));
        // A congestion window's cuts, smallest and final size, packets.
        let mtu = f64::from(sim.scenario().transport.mtu);
        let w = match (q.req.rate.dctcp(), q.req.rate.swift(), h) {
            (Some(d), _, _) => Some((d.cuts, d.min_cwnd, d.cwnd)),
            (_, Some(s), _) => Some((s.cuts, s.min_cwnd, s.cwnd)),
            _ if q.req.rate.uec().is_some() => q
                .req
                .rate
                .uec()
                .map(|u| (u.cuts + u.quick_adapts, u.min_cwnd / mtu, u.cwnd / mtu)),
            (_, _, Some(h)) => Some((
                h.cuts,
                h.min_bps * h.t_ps * 1e-12 / 8.0 / mtu,
                h.window_bytes() / mtu,
            )),
            _ => None,
        };
        w_out.write_record([
            i.to_string(),
            q.flow.0.to_string(),
            q.dscp.to_string(),
            q.req.rate.cc().name().to_string(),
            q.cnps_sent.to_string(),
            q.cnps_received.to_string(),
            rate.map_or(0, |r| r.0).to_string(),
            rate.map_or(String::new(), |r| format!("{:.3}", r.1 / 1e9)),
            rate.map_or(String::new(), |r| format!("{:.3}", r.2 / 1e9)),
            q.req.retx_bytes.to_string(),
            q.resp.out_of_order.to_string(),
            q.resp.duplicates.to_string(),
            q.resp.naks_sent.to_string(),
            q.resp.max_held_bytes.to_string(),
            q.resp.discarded.to_string(),
            w.map_or(0, |w| w.0).to_string(),
            w.map_or(String::new(), |w| format!("{:.3}", w.1)),
            w.map_or(String::new(), |w| format!("{:.3}", w.2)),
        ])?;
    }
    finish(w_out)
}

#[cfg(test)]
mod tests {
    use super::four_places;
    use proptest::prelude::*;

    fn both(x: f64) -> (String, String) {
        let mut ours = String::new();
        four_places(x, &mut ours);
        (ours, format!("{x:.4}"))
    }

    /// Ties (a double exactly halfway between two fourth places), the
    /// smallest and largest doubles, and what is not a ratio.
    #[test]
    fn four_places_writes_what_the_formatter_writes() {
        for x in [
            0.0,
            1.0 / 32.0,
            3.0 / 32.0,
            0.00005,
            0.00015,
            1.00005,
            2.5e-5,
            7.5e-5,
            f64::MIN_POSITIVE,
            5e-324,
            1.0,
            123_456.789_05,
            2f64.powi(60),
            2f64.powi(100),
            f64::MAX,
            -0.5,
            f64::INFINITY,
            f64::NAN,
        ] {
            let (ours, std) = both(x);
            assert_eq!(ours, std, "{x:e}");
        }
        assert_eq!(both(1.0 / 32.0).0, "0.0312");
        assert_eq!(both(3.0 / 32.0).0, "0.0938");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]
        #[test]
        fn four_places_of_any_ratio(a in 0u64..u64::MAX, b in 1u64..u64::MAX, shift in 0u32..64) {
            let (ours, std) = both((a >> shift) as f64 / b as f64);
            prop_assert_eq!(ours, std);
        }

        #[test]
        fn four_places_of_any_double(bits in 0u64..0x7ff0_0000_0000_0000) {
            let (ours, std) = both(f64::from_bits(bits));
            prop_assert_eq!(ours, std);
        }
    }
}
