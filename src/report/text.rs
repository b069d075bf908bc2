//! The result as a network engineer reads it on the terminal.

use std::fmt::Write;

use super::Summary;
use crate::engine::Simulation;
use crate::units::{fmt_bps, fmt_bytes, SimTime};

fn us(ps: f64) -> String {
    SimTime(ps as u64).to_string()
}

/// Collectives listed in the terminal; collectives.csv has them all.
const MAX_COLLECTIVE_ROWS: usize = 12;

pub fn render(sim: &Simulation, s: &Summary) -> String {
    let mut o = String::new();
    let t = &sim.topo();
    let _ = writeln!(o, "fabricsim: {} (seed {})", s.scenario, s.seed);
    let _ = writeln!(
        o,
        "fabric    {}: {} hosts, {} GPUs, {} NICs, {} switches, {} links",
        t.kind.name(),
        t.hosts.len(),
        t.gpus.len(),
        t.nics.len(),
        t.switches.len(),
        t.links.len()
    );
    let mut kinds: Vec<String> = Vec::new();
    let messages = sim.messages_per_workload();
    for w in &sim.scenario().workloads {
        let w_id = kinds.len() as u32;
        let n = messages[w_id as usize];
        kinds.push(match &w.pattern {
            crate::workload::Pattern::Collective(c) => {
                // As run: NCCL's tuner may have chosen the algorithm,
                // protocol and channels.
                let run = sim.tasks().collectives.iter().find(|r| r.workload == w_id);
                let (algorithm, how) = match run {
                    Some(r) => (
                        r.algorithm.name(),
                        format!("{}, {} channels, ", r.protocol.name(), r.channels),
                    ),
                    None => (c.algorithm.name(), String::new()),
                };
                let picked = if c.algorithm == crate::workload::collective::Algorithm::Auto {
                    " (NCCL's pick)"
                } else {
                    ""
                };
                format!(
                    "{algorithm}{picked} {} over {} GPUs ({}, {how}{n} messages, step latency {})",
                    c.op.name(),
                    c.gpus.len(),
                    fmt_bytes(w.bytes),
                    w.step_latency.label(),
                )
            }
            crate::workload::Pattern::Training(t) => format!(
                "training over {} GPUs ({} iterations of {} phases, {} messages)",
                t.gpus.len(),
                t.iterations,
                t.phases.len(),
                n
            ),
            crate::workload::Pattern::Model(m) => format!(
                "model over {} GPUs (tp {} pp {} dp {}, {} layers, {} micro-batches, {} iterations, {} messages)",
                m.gpus.len(),
                m.parallel.tp,
                m.parallel.pp,
                m.parallel.dp,
                m.model.layers,
                m.micro_batches(),
                m.iterations,
                n
            ),
            crate::workload::Pattern::Background { load, .. } => {
                format!("background ({} flows at {:.0}% load)", n, load * 100.0)
            }
            crate::workload::Pattern::Serving(c) => {
                let (p, d) = (c.prefill, c.decode);
                let requests = sim
                    .serving()
                    .and_then(|s| s.runs.iter().find(|r| r.plan.workload == w_id))
                    .map_or(0, |r| r.reqs.len());
                let moe = if c.model.experts > 0 {
                    format!(", {} experts top {}", c.model.experts, c.model.top_k)
                } else {
                    String::new()
                };
                format!(
                    "serving ({requests} requests; {} prefill x {} GPUs (tp {}), {} decode x {} GPUs (tp {}){moe}; KV by {})",
                    p.instances,
                    p.gpus,
                    p.tp,
                    d.instances,
                    d.gpus,
                    d.tp,
                    match c.kv {
                        crate::workload::serving::KvMode::Layer => "layer",
                        crate::workload::serving::KvMode::Whole => "whole cache",
                    }
                )
            }
            crate::workload::Pattern::Chakra(t) => format!(
                "chakra trace ({} ranks, {} nodes, {} messages)",
                t.0.rank_count(),
                t.0.node_count(),
                n
            ),
            p => format!("{} ({} x {})", p.name(), n, fmt_bytes(w.bytes)),
        });
    }
    let _ = writeln!(o, "traffic   {}", kinds.join(", "));
    if sim.scenario().fidelity == crate::scenario::Fidelity::Flow {
        let _ = writeln!(
            o,
            "fidelity  flow level: transfers as fluids at max-min fair rates on the packets' paths (where lossless senders without congestion control would be paused, at PFC's steady state); no queues, ECN, pause frames or losses (no queues.csv, pfc.csv, qps.csv or time series)"
        );
        let dynamic = sim
            .scenario()
            .switch
            .balance
            .specs()
            .any(|b| b.algo != crate::switch::balance::Algo::Ecmp);
        if dynamic {
            let _ = writeln!(
                o,
                "          past switches that spray or balance dynamically (DLB, GLB, ALB), each transfer splits evenly over the equal-cost members (ACCURACY.md says where that is wrong)"
            );
        }
    }
    if let Some(h) = sim.hybrid() {
        let region = match h.region.len() {
            0 => "no switch".to_string(),
            1..=6 => h.region.join(", "),
            n => format!("{n} switches ({}, ...)", h.region[..3].join(", ")),
        };
        let _ = writeln!(
            o,
            "fidelity  hybrid: packets through {region}: {} transfers as packets, {} as fluids (the flow level) sharing the links both cross",
            h.packet_flows, h.fluid_flows
        );
    }
    let _ = writeln!(
        o,
        "result    {}/{} transfers complete; last at {}; {} events, {} link transmissions",
        s.flows_completed,
        s.flows_total,
        SimTime(s.makespan_ps),
        s.events,
        s.link_transmissions
    );
    if s.partial {
        let _ = writeln!(
            o,
            "          PARTIAL: stopped early ({}); the figures cover the first {} only",
            s.stop_reason,
            SimTime(s.sim_time_ps)
        );
    } else if !s.complete {
        let _ = writeln!(o, "          stopped early: {}", s.stop_reason);
    }
    for j in &s.jobs {
        let its: Vec<String> = j
            .iteration_ps
            .iter()
            .take(8)
            .map(|&t| SimTime(t).to_string())
            .collect();
        let _ = writeln!(
            o,
            "job       workload {} (tenant {}, {} GPUs): {} iterations, mean {} ({}{}); communication {} of the time{}",
            j.workload,
            j.tenant,
            j.ranks,
            j.iteration_ps.len(),
            j.mean_iteration_ps
                .map_or("-".to_string(), |m| SimTime(m.round() as u64).to_string()),
            its.join(", "),
            if j.iteration_ps.len() > 8 { ", ..." } else { "" },
            j.comm_share
                .map_or("-".to_string(), |c| format!("{:.1}%", c * 100.0)),
            if j.checkpoint_ps > 0 {
                format!("; checkpoints took {}", SimTime(j.checkpoint_ps))
            } else {
                String::new()
            }
        );
        // Per dimension of parallelism, the mean iteration of the mean GPU.
        if let Some(first) = j.steps.first() {
            let n = j.steps.len() as f64;
            let mean = |f: &dyn Fn(&super::StepReport) -> f64| {
                SimTime((j.steps.iter().map(f).sum::<f64>() / n).round() as u64)
            };
            let mut parts = vec![format!("compute {}", mean(&|s| s.compute_ps))];
            for d in &first.dims {
                let of = |s: &super::StepReport, f: &dyn Fn(&super::DimReport) -> f64| {
                    s.dims.iter().find(|x| x.dim == d.dim).map_or(0.0, f)
                };
                parts.push(format!(
                    "{} {} ({} exposed)",
                    d.dim.to_uppercase(),
                    mean(&|s| of(s, &|x| x.comm_ps)),
                    mean(&|s| of(s, &|x| x.exposed_ps))
                ));
            }
            let _ = writeln!(o, "          per GPU and iteration: {}", parts.join(", "));
        }
    }
    for v in &s.serving {
        let ms = |p: &Option<super::serving::Percentiles>| {
            p.as_ref().map_or("-".to_string(), |p| {
                format!(
                    "p50 {} p90 {} p99 {}",
                    SimTime(p.p50 as u64),
                    SimTime(p.p90 as u64),
                    SimTime(p.p99 as u64)
                )
            })
        };
        let _ = writeln!(
            o,
            "serving   workload {} (tenant {}): {}/{} requests done, {} output tokens/s, {} of KV cache moved",
            v.workload,
            v.tenant,
            v.completed,
            v.requests,
            v.tokens_per_s.map_or("-".to_string(), |t| format!("{t:.0}")),
            fmt_bytes(v.kv_bytes)
        );
        let _ = writeln!(o, "          time to first token   {}", ms(&v.ttft_ps));
        let _ = writeln!(o, "          time per output token {}", ms(&v.tpot_ps));
        let _ = writeln!(o, "          KV transfer           {}", ms(&v.kv_ps));
        let _ = writeln!(
            o,
            "          network's part: TTFT {}, TPOT {} (against an idle fabric)",
            ms(&v.ttft_network_ps),
            ms(&v.tpot_network_ps)
        );
    }
    if !s.collectives.is_empty() {
        let _ = writeln!(
            o,
            "\ncollectives (nccl-tests style; GB/s = 1e9 bytes/s)\n{:>14} {:<15} {:<16} {:>6} {:>12} {:>9} {:>9}",
            "size (B)", "collective", "algorithm", "ranks", "time (us)", "algbw", "busbw"
        );
        let f2 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
        for c in s.collectives.iter().take(MAX_COLLECTIVE_ROWS) {
            let _ = writeln!(
                o,
                "{:>14} {:<15} {:<16} {:>6} {:>12} {:>9} {:>9}",
                c.bytes,
                c.collective,
                c.algorithm,
                c.ranks,
                c.time_ps
                    .map_or("-".to_string(), |t| format!("{:.2}", t as f64 / 1e6)),
                f2(c.algbw_gbps),
                f2(c.busbw_gbps)
            );
        }
        if s.collectives.len() > MAX_COLLECTIVE_ROWS {
            let _ = writeln!(
                o,
                "{:>14} ... {} more in collectives.csv",
                "",
                s.collectives.len() - MAX_COLLECTIVE_ROWS
            );
        }
    }
    if let (Some(f), Some(sl)) = (&s.fct_ps, &s.slowdown) {
        let _ = writeln!(
            o,
            "\n{:<22} {:>12} {:>12} {:>12} {:>12}",
            "", "mean", "p50", "p99", "max"
        );
        let _ = writeln!(
            o,
            "{:<22} {:>12} {:>12} {:>12} {:>12}",
            "completion time",
            us(f.mean),
            us(f.p50),
            us(f.p99),
            us(f.max)
        );
        let _ = writeln!(
            o,
            "{:<22} {:>11.2}x {:>11.2}x {:>11.2}x {:>11.2}x",
            "slowdown vs idle", sl.mean, sl.p50, sl.p99, sl.max
        );
    }
    if !s.uplink_balance.is_empty() {
        let bal: Vec<String> = s
            .balancers
            .iter()
            .map(|b| format!("{} {}", b.tier, b.balancer))
            .collect();
        let _ = writeln!(
            o,
            "\nequal-cost balance (bytes per member of each group a switch chooses among; {}; weighted max/mean {:.2})",
            bal.join(", "),
            s.uplink_imbalance.unwrap_or(1.0)
        );
        let _ = writeln!(
            o,
            "  {:<30} {:>6} {:>6} {:>6} {:>10} {:>8} {:>18} {:>15}",
            "links",
            "count",
            "idle",
            "groups",
            "max/mean",
            "Jain",
            "worst group",
            "pooled max/mean"
        );
        for b in &s.uplink_balance {
            let what = match b.direction.as_str() {
                "up" => format!("{} uplinks", b.tier),
                _ => format!("{} port-channel downlinks", b.tier),
            };
            let worst = if b.groups == 0 {
                "-".to_string()
            } else {
                format!("{} {:.2}", b.worst_group, b.worst_max_over_mean)
            };
            let _ = writeln!(
                o,
                "  {:<30} {:>6} {:>6} {:>6} {:>10.2} {:>8.3} {:>18} {:>15.2}",
                what,
                b.links,
                b.idle_links,
                b.groups,
                b.max_over_mean,
                b.jain,
                worst,
                b.pooled_max_over_mean
            );
        }
    }
    // The busiest switch egress ports.
    let mut hot: Vec<usize> = (0..sim.ports().len())
        .filter(|&p| matches!(t.ports[p].owner, crate::topology::Owner::Switch(_)))
        .filter(|&p| sim.ports()[p].busy_ps > 0)
        .collect();
    hot.sort_by_key(|&p| (std::cmp::Reverse(sim.ports()[p].busy_ps), p));
    if !hot.is_empty() {
        let (span, active) = super::utilisation_spans(sim);
        let _ = writeln!(o, "\nbusiest switch egress ports");
        // Static routes: how many connections hash onto each port.
        let conns = super::connections_per_port(sim);
        let _ = writeln!(
            o,
            "  {:<34} {:>6}{} {:>11} {:>7}{}",
            "link",
            "util",
            if active.is_some() { "  active" } else { "" },
            "max queue",
            "drops",
            if conns.is_some() {
                "   connections"
            } else {
                ""
            }
        );
        for &p in hot.iter().take(5) {
            let port = &sim.ports()[p];
            let pid = crate::topology::PortId(p as u32);
            // A port-channel member by its place among the parallel
            // links (`/k`), as links.csv and the report name it.
            let name = format!("{} -> {}", t.owner_name(pid), t.member_name(pid));
            let _ = writeln!(
                o,
                "  {:<34} {:>5.1}%{} {:>11} {:>7}{}",
                name,
                100.0 * port.busy_ps as f64 / span,
                active.map_or(String::new(), |a| format!(
                    " {:>6.1}%",
                    (100.0 * port.busy_ps as f64 / a).min(100.0)
                )),
                fmt_bytes(sim.queues()[p].max_bytes),
                sim.port_drops()[p].packets,
                conns
                    .as_ref()
                    .map_or(String::new(), |c| format!(" {:>13}", c[p]))
            );
        }
    }
    let _ = writeln!(
        o,
        "\nlosses    {} drops, {} retransmitted, {} NAKs, {} timeouts, {} out-of-order arrivals; peak switch buffer {}",
        s.drops,
        fmt_bytes(s.retransmitted_bytes),
        s.naks,
        s.timeouts,
        s.out_of_order_packets,
        fmt_bytes(s.max_switch_buffer_bytes)
    );
    if let Some(note) = super::timer_tail(sim, s) {
        let _ = writeln!(o, "note      {note}");
    }
    if s.ecn_marks + s.pfc_pause_frames + s.lossless_drops + s.watchdog_events > 0 {
        let _ = writeln!(
            o,
            "lossless  {} ECN marks, {} CNPs, {} DCQCN rate cuts{}; {} PFC pauses, {} resumes, {} paused; {} watchdog events; {} lossless drops",
            s.ecn_marks,
            s.cnps_sent,
            s.dcqcn_rate_cuts,
            s.dcqcn_min_rate_gbps
                .map_or(String::new(), |r| format!(" (lowest {})", fmt_bps(r * 1e9))),
            s.pfc_pause_frames,
            s.pfc_resume_frames,
            SimTime(s.pfc_paused_ps),
            s.watchdog_events,
            s.lossless_drops
        );
    }
    for f in &s.failures {
        let back = f
            .recover_ps
            .map_or(String::new(), |t| format!(", back at {}", SimTime(t)));
        if let Some(kept) = f.nvlink_kept {
            let _ = writeln!(
                o,
                "failure   {} fail at {}{back}: each GPU of the domain keeps {:.1}% of its NVLink",
                f.target,
                SimTime(f.at_ps),
                kept * 100.0
            );
            continue;
        }
        let what = match f.degraded_to_gbps {
            Some(g) => format!("{} slows to {g} Gb/s", f.target),
            None => format!("{} fails", f.target),
        };
        let _ = writeln!(
            o,
            "failure   {what} at {}{back}: {} frames lost ({}) over {}, {} QPs hit{}; routing reconverged at {}, {} flows moved",
            SimTime(f.at_ps),
            f.lost_packets,
            fmt_bytes(f.lost_bytes),
            SimTime(f.losing_for_ps.unwrap_or(0)),
            f.affected_qps,
            match (f.affected_qps, f.progress_again_after_ps) {
                (0, _) => String::new(),
                (_, Some(t)) => format!(", all progressing again after {}", SimTime(t)),
                (_, None) => ", not all progressing again by the end".to_string(),
            },
            f.reconverged_ps
                .map_or("-".to_string(), |t| SimTime(t).to_string()),
            f.flows_moved.map_or("?".to_string(), |n| n.to_string()),
        );
    }
    o
}

/// How one row of the comparison reads its figure from a summary.
type Cell<'a> = Box<dyn Fn(&Summary) -> String + 'a>;

/// Several runs side by side: one column per run, one row per headline
/// figure. Two figures come from the runs themselves, not from
/// `summary.json`: per run, `mean_peak_queue`, its deepest switch queue
/// per sampling interval, averaged (from its time series, which sampling
/// changes), and `fairness`, `report::rate_fairness`.
pub fn compare(
    runs: &[(String, Summary)],
    mean_peak_queue: &[Option<f64>],
    fairness: &[Option<f64>],
) -> String {
    let us = |ps: f64| format!("{:.1} us", ps / 1e6);
    let opt_us = |d: &Option<super::Distribution>, f: fn(&super::Distribution) -> f64| {
        d.as_ref().map_or("-".to_string(), |d| us(f(d)))
    };
    // The balancers of the lowest tier, where uplinks are chosen first.
    let balancer = |s: &Summary| {
        let first = s.balancers.first().map(|b| b.tier.clone());
        s.balancers
            .iter()
            .filter(|b| Some(&b.tier) == first.as_ref())
            .map(|b| b.balancer.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let rows: Vec<(&str, Cell)> = vec![
        ("leaf balancer", Box::new(balancer)),
        (
            "congestion control",
            Box::new(|s: &Summary| s.congestion_control.clone()),
        ),
        (
            "transfers done",
            Box::new(|s: &Summary| {
                let partial = if s.partial { " (partial)" } else { "" };
                format!("{}/{}{partial}", s.flows_completed, s.flows_total)
            }),
        ),
        (
            "makespan",
            Box::new(move |s: &Summary| us(s.makespan_ps as f64)),
        ),
        (
            "mean completion",
            Box::new(move |s: &Summary| opt_us(&s.fct_ps, |d| d.mean)),
        ),
        (
            "p99 completion",
            Box::new(move |s: &Summary| opt_us(&s.fct_ps, |d| d.p99)),
        ),
        (
            "p99 slowdown",
            Box::new(|s: &Summary| {
                s.slowdown
                    .as_ref()
                    .map_or("-".into(), |d| format!("{:.2}x", d.p99))
            }),
        ),
        (
            "group max/mean",
            Box::new(|s: &Summary| s.uplink_imbalance.map_or("-".into(), |x| format!("{x:.2}"))),
        ),
        (
            "max queue",
            Box::new(|s: &Summary| format!("{} B", s.max_queue_bytes)),
        ),
        ("ECN marks", Box::new(|s: &Summary| s.ecn_marks.to_string())),
        ("CNPs", Box::new(|s: &Summary| s.cnps_sent.to_string())),
        (
            "rate cuts (DCQCN)",
            Box::new(|s: &Summary| s.dcqcn_rate_cuts.to_string()),
        ),
        (
            "window cuts",
            Box::new(|s: &Summary| s.window_cuts.to_string()),
        ),
        (
            "PFC pauses",
            Box::new(|s: &Summary| s.pfc_pause_frames.to_string()),
        ),
        ("drops", Box::new(|s: &Summary| s.drops.to_string())),
        (
            "out-of-order packets",
            Box::new(|s: &Summary| s.out_of_order_packets.to_string()),
        ),
        (
            "path changes",
            Box::new(|s: &Summary| s.path_changes.to_string()),
        ),
        (
            "GLB heartbeats",
            Box::new(|s: &Summary| s.glb_heartbeats_sent.to_string()),
        ),
    ];
    let mut labels: Vec<&str> = rows.iter().map(|r| r.0).collect();
    let mut cells: Vec<Vec<String>> = runs
        .iter()
        .map(|(_, s)| rows.iter().map(|(_, f)| f(s)).collect())
        .collect();
    // Figures from the runs themselves, each after the row it belongs by:
    // how evenly the transfers were slowed, how deep queues ran.
    let mut insert = |after: &str, label: &'static str, values: Vec<String>| {
        let at = labels
            .iter()
            .position(|&l| l == after)
            .map_or(labels.len(), |i| i + 1);
        labels.insert(at, label);
        let mut values = values.into_iter();
        for c in cells.iter_mut() {
            c.insert(at, values.next().unwrap_or_else(|| "-".into()));
        }
    };
    let shown = |v: &[Option<f64>], f: fn(f64) -> String| -> Vec<String> {
        v.iter().map(|x| x.map_or("-".into(), f)).collect()
    };
    insert(
        "p99 slowdown",
        "rate fairness (Jain)",
        shown(fairness, |j| format!("{j:.3}")),
    );
    insert(
        "max queue",
        "mean peak queue",
        shown(mean_peak_queue, |b| format!("{b:.0} B")),
    );
    let label_w = labels.iter().map(|l| l.len()).max().unwrap_or(0);
    let widths: Vec<usize> = runs
        .iter()
        .zip(&cells)
        .map(|((name, _), c)| {
            c.iter()
                .map(|x| x.len())
                .chain([name.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut o = String::new();
    let _ = write!(o, "{:<label_w$}", "");
    for ((name, _), w) in runs.iter().zip(&widths) {
        let _ = write!(o, "  {name:>w$}");
    }
    o.push('\n');
    for (i, label) in labels.iter().enumerate() {
        let _ = write!(o, "{label:<label_w$}");
        for (c, w) in cells.iter().zip(&widths) {
            let _ = write!(o, "  {:>w$}", c[i]);
        }
        o.push('\n');
    }
    o
}
