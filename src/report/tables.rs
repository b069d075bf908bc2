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

fn message_costs(sim: &Simulation, i: usize, f: &crate::engine::FlowState) -> Cost {
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
    for (i, f) in sim.every_flow().enumerate() {
        let f = &*f;
        let cost = message_costs(sim, i, f);
        let fct = f.finish.map(|t| t - f.start);
        let opt = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
        w.write_record([
            i.to_string(),
            f.spec.workload.to_string(),
            f.spec.src.0.to_string(),
            f.spec.dst.0.to_string(),
            sim.topo().gpu_name(f.spec.src),
            sim.topo().gpu_name(f.spec.dst),
            f.spec.bytes.to_string(),
            f.n_qps.to_string(),
            opt((f.start != SimTime::MAX).then_some(f.start.0)),
            opt(f.finish.map(|t| t.0)),
            opt(fct.map(|t| t.0)),
            f.ideal_fct.0.to_string(),
            fct.map_or(String::new(), |t| {
                format!("{:.4}", t.0 as f64 / f.ideal_fct.0.max(1) as f64)
            }),
            opt(f.acked.map(|t| t.0)),
            cost.retx_bytes.to_string(),
            cost.timeouts.to_string(),
            cost.out_of_order.to_string(),
            cost.naks.to_string(),
            paths(sim, f.first_qp, f.n_qps),
            (f.first_qp..f.first_qp + f.n_qps)
                .filter_map(|q| sim.paths().get(crate::topology::QpId(q)))
                .map(|p| p.changes)
                .sum::<u64>()
                .to_string(),
            ack_paths(sim, f.first_qp, f.n_qps),
            paths_used(sim, f.first_qp, f.n_qps).to_string(),
            format!("{:.4}", cost.out_of_order as f64 / f.pkts.max(1) as f64),
            "network".to_string(),
            "1".to_string(),
        ])?;
    }
    // A pass's connections: a row each, its messages summed.
    for r in sim.every_pass_row().filter(|r| r.planned > 0) {
        w.write_record(connection_row(sim, &r))?;
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
        Some(crate::engine::later::CopyRow {
            workload: regions.get(at).map_or(0, |r| r.1),
            src,
            dst,
            bytes,
            started: tasks.started[t],
            done: tasks.done[t],
        })
    });
    for c in first.chain(sim.later_copies()) {
        let (workload, src, dst, bytes) = (c.workload, c.src, c.dst, c.bytes);
        let (started, done) = (c.started, c.done);
        if src == dst {
            continue;
        }
        let start = (started != SimTime::MAX).then_some(started);
        let finish = (done != SimTime::MAX).then_some(done);
        let fct = start.zip(finish).map(|(s, f)| f - s);
        let ideal = sim.tasks().nvlink.alone(bytes);
        let opt = |v: Option<SimTime>| v.map_or(String::new(), |x| x.0.to_string());
        let mut row = vec![
            String::new(),
            workload.to_string(),
            src.0.to_string(),
            dst.0.to_string(),
            sim.topo().gpu_name(src),
            sim.topo().gpu_name(dst),
            bytes.to_string(),
            "0".into(),
            opt(start),
            opt(finish),
            opt(fct),
            ideal.0.to_string(),
            fct.map_or(String::new(), |f| {
                format!("{:.4}", f.0 as f64 / ideal.0.max(1) as f64)
            }),
        ];
        // No acknowledgement, retransmission or path: empty network columns.
        row.resize(23, String::new());
        row.push("nvlink".into());
        row.push("1".into());
        w.write_record(&row)?;
    }
    if sim.later_rows_lost() {
        return Err(std::io::Error::other(
            "rows of jobs' iterations written to a temporary file during the run could not be read back",
        ));
    }
    finish(w)
}

/// flows.csv's row of a pass connection: the bytes its receiver has,
/// from its first message's start to its last one's delivery, against the
/// sum of its messages' ideal times; no transfer number (its messages
/// have theirs, but no row each).
fn connection_row(sim: &Simulation, r: &crate::engine::passes::ConnRow) -> Vec<String> {
    let opt = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
    let start = (r.start != SimTime::MAX).then_some(r.start);
    let fct = start.zip(r.finish).map(|(s, f)| f - s);
    let mut row = vec![
        String::new(),
        r.workload.to_string(),
        r.src.0.to_string(),
        r.dst.0.to_string(),
        sim.topo().gpu_name(r.src),
        sim.topo().gpu_name(r.dst),
        r.bytes.to_string(),
        r.qps.to_string(),
        opt(start.map(|t| t.0)),
        opt(r.finish.map(|t| t.0)),
        opt(fct.map(|t| t.0)),
        r.ideal.0.to_string(),
        fct.map_or(String::new(), |t| {
            format!("{:.4}", t.0 as f64 / r.ideal.0.max(1) as f64)
        }),
    ];
    if r.qps == 0 {
        row.resize(23, String::new());
        row.push("nvlink".into());
    } else {
        let (first, n) = (r.first_qp, r.qps);
        row.extend([
            opt(r.acked.map(|t| t.0)),
            r.retx_bytes.to_string(),
            r.timeouts.to_string(),
            r.out_of_order.to_string(),
            r.naks.to_string(),
            paths(sim, first, n),
            (first..first + n)
                .filter_map(|q| sim.paths().get(crate::topology::QpId(q)))
                .map(|p| p.changes)
                .sum::<u64>()
                .to_string(),
            ack_paths(sim, first, n),
            paths_used(sim, first, n).to_string(),
            format!("{:.4}", r.out_of_order as f64 / r.pkts.max(1) as f64),
            "network".to_string(),
        ]);
    }
    row.push(r.messages.to_string());
    row
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
        "max_queue_bytes",
        "drops",
        "connections",
    ])?;
    let span = sim.now().0.max(1) as f64;
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
