//! Results: the summary, the per-flow and per-link tables, the wall-clock
//! figures, and the text a user reads on the terminal.
//!
//! Only this module writes files. Everything in `summary.json`,
//! `flows.csv` and `links.csv` is a function of the scenario and the seed;
//! wall-clock figures go to `perf.json` alone. Files are staged in a
//! temporary folder inside the output folder and moved into place only
//! when all of them were written.

pub mod fabric;
pub mod fidelity;
pub mod html;
mod html_map;
pub mod pcapng;
pub mod plots;
pub mod series;
pub mod serving;
pub mod tables;
mod text;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::{Simulation, StopReason};
use crate::topology::{Owner, PortId, SwitchId};
use crate::units::SimTime;

pub use text::{compare, render};

#[derive(Serialize, Debug, Clone)]
pub struct Distribution {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Distribution {
    pub fn of(mut v: Vec<f64>) -> Option<Distribution> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Distribution {
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: rank(0.50),
            p99: rank(0.99),
            max: *v.last().expect("non-empty"),
        })
    }
}

/// Balance of traffic over the links a tier of switches chooses among:
/// its uplinks (`direction = "up"`, every one an equal-cost next hop) and
/// the members of its downlink port channels (`"down"`).
///
/// A balancer only ever chooses among the members of one equal-cost
/// group at one switch, so balance is measured per group (busiest member
/// over the group's mean, and Jain's index over its members), then
/// summed up over the tier's groups as a byte-weighted mean and the worst
/// group. The pooled figures lump every link of the tier together, so
/// they also count how unevenly traffic enters the leaves, which no
/// balancer controls (perfect spraying under a ring shows 1.0 per group
/// and about 2 pooled).
#[derive(Serialize, Debug, Clone)]
pub struct UplinkBalance {
    pub tier: String,
    pub direction: String,
    pub links: usize,
    pub bytes_total: u64,
    /// Equal-cost groups of two or more members in this tier and
    /// direction.
    pub groups: usize,
    /// Per group, busiest member over the group's mean, averaged weighted
    /// by the group's bytes (1.0 = every group perfectly even).
    pub max_over_mean: f64,
    /// Per group Jain's index over its members' bytes, weighted alike.
    pub jain: f64,
    /// The group with the highest max/mean: its switch and figure.
    pub worst_group: String,
    pub worst_max_over_mean: f64,
    /// Busiest link over the mean of every link of the tier together.
    pub pooled_max_over_mean: f64,
    /// Jain's index over every link of the tier together.
    pub pooled_jain: f64,
    /// Links that carried nothing.
    pub idle_links: usize,
}

#[derive(Serialize, Debug, Clone)]
pub struct Summary {
    pub scenario: String,
    pub seed: u64,
    pub topology: String,
    /// "packet", or "flow": transfers as fluids (`engine::fluid`), with no
    /// queues, marks, pauses or losses, so no queues.csv, pfc.csv,
    /// qps.csv or time series.
    pub fidelity: String,
    pub complete: bool,
    pub stop_reason: String,
    /// The queues of a PFC deadlock (`LINK priority P`), when the run
    /// stopped on one; empty otherwise.
    pub deadlock_cycle: Vec<String>,
    /// Cut short by a limit (`max_sim_time`, `--max-events`,
    /// `--max-wall`) or an interruption: the figures cover the run up to
    /// `sim_time_ps` only.
    pub partial: bool,
    pub sim_time_ps: u64,
    pub makespan_ps: u64,
    pub events: u64,
    pub link_transmissions: u64,
    pub flows_completed: u64,
    pub flows_total: u64,
    pub bytes_offered: u64,
    pub bytes_delivered: u64,
    pub drops: u64,
    pub drop_bytes: u64,
    pub data_packets_sent: u64,
    pub retransmitted_bytes: u64,
    pub timeouts: u64,
    /// The run's end waited on a retransmission timeout (one timeout
    /// waited at least half the makespan): its utilisation
    /// and rates are averaged over that wait (see `timer_tail`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ended_on_timer: bool,
    pub naks: u64,
    pub acks: u64,
    pub out_of_order_packets: u64,
    pub max_switch_buffer_bytes: u64,
    pub max_queue_bytes: u64,
    /// Packets marked CE by WRED, and dropped by it.
    pub ecn_marks: u64,
    pub wred_drops: u64,
    pub cnps_sent: u64,
    pub cnps_received: u64,
    /// QP rate cuts by DCQCN, and the lowest rate any QP fell to (Gb/s).
    pub dcqcn_rate_cuts: u64,
    pub dcqcn_min_rate_gbps: Option<f64>,
    /// The congestion controls the workloads run (`dcqcn`, or several as
    /// `dcqcn+dctcp`), and the cuts of the QPs' congestion windows (DCTCP,
    /// Swift, HPCC, UEC's decreases and quick adapts) and of TIMELY's
    /// rates, summed.
    pub congestion_control: String,
    pub window_cuts: u64,
    /// PFC frames sent with a pause time, and resumes (quanta 0).
    pub pfc_pause_frames: u64,
    pub pfc_resume_frames: u64,
    /// Time transmitters spent paused by PFC, summed over ports.
    pub pfc_paused_ps: u64,
    pub max_headroom_bytes: u64,
    pub watchdog_events: u64,
    pub watchdog_drops: u64,
    /// Packets of lossless classes dropped for lack of buffer or headroom
    /// (or by WRED on a lossless class without ECN).
    pub lossless_drops: u64,
    /// GLB heartbeat frames helpers sent, their bytes on the wire, and
    /// those dropped or lost on a failed link (their bands with them).
    pub glb_heartbeats_sent: u64,
    pub glb_heartbeat_bytes: u64,
    pub glb_heartbeats_lost: u64,
    /// Data packets that left a switch by another member than the
    /// previous packet of their QP there (dynamic balancers only).
    pub path_changes: u64,
    /// Frames lost to failures (put on or in flight over a dead link, or
    /// left without a route), and routing reconvergences.
    /// Out-of-order packets discarded for lack of reorder buffer, the
    /// most any QP held, and the most any NIC's buffer held.
    pub reorder_discards: u64,
    /// Data packets switches trimmed to their headers instead of dropping.
    pub trimmed_packets: u64,
    pub max_reorder_bytes_per_qp: u64,
    pub max_reorder_bytes_per_nic: u64,
    /// MRC-like transport: times a path was taken out of use, and PSNs
    /// resent after a trim or a timeout.
    pub mrc_paths_failed: u64,
    pub mrc_trim_resends: u64,
    pub mrc_timeout_resends: u64,
    /// MRC: times a path was rested for its share of ECN marks.
    pub mrc_ecn_rests: u64,
    /// MRC: PSNs resent because a later copy was acknowledged first, and
    /// paths that took a new entropy value after a loss.
    pub mrc_loss_resends: u64,
    pub mrc_paths_replaced: u64,
    pub failure_lost_packets: u64,
    pub failure_lost_bytes: u64,
    pub reconvergences: u64,
    /// What each scenario failure did.
    pub failures: Vec<FailureReport>,
    /// When ECN, CNPs, DCQCN, PFC and the watchdog first acted.
    pub first_events: crate::engine::FirstEvents,
    /// Completion times and slowdowns of the transfers made up front; a
    /// pass's messages are in its connections' rows of flows.csv
    /// and in collectives.csv instead.
    pub fct_ps: Option<Distribution>,
    pub slowdown: Option<Distribution>,
    pub uplink_balance: Vec<UplinkBalance>,
    /// Fabric-wide imbalance over equal-cost members: each tier's
    /// max/mean weighted by the bytes it carried (1.0 = perfectly even).
    pub uplink_imbalance: Option<f64>,
    /// What each tier's balancer did.
    pub balancers: Vec<BalancerReport>,
    /// Each collective, as nccl-tests reports it.
    pub collectives: Vec<CollectiveReport>,
    /// Bytes copied over NVLink inside hosts.
    pub nvlink_bytes: u64,
    /// Each training job.
    pub jobs: Vec<JobReport>,
    /// Each serving workload: its requests' latencies.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub serving: Vec<serving::ServingReport>,
}

/// A training job: its iteration times and how much of them went to
/// communication.
#[derive(Serialize, Debug, Clone)]
pub struct JobReport {
    pub workload: u32,
    pub tenant: u16,
    pub ranks: usize,
    /// Each finished iteration's time, from its start (after the previous
    /// one and its checkpoint) to its last collective's end.
    pub iteration_ps: Vec<u64>,
    pub mean_iteration_ps: Option<f64>,
    /// Time with some collective of the job in flight, over its
    /// iterations' time.
    pub comm_share: Option<f64>,
    /// Time spent writing checkpoints.
    pub checkpoint_ps: u64,
    /// Each finished iteration, broken down by parallelism.
    pub steps: Vec<StepReport>,
}

pub use crate::workload::training::{DimReport, StepReport};

/// A job's iterations broken down by parallelism (see `StepReport`).
fn steps(
    t: &crate::runtime::tasks::TaskState,
    j: &crate::workload::training::JobRun,
    ranks: usize,
) -> Vec<StepReport> {
    let done = |x: u32| Some(t.done_at(x)).filter(|&d| d != SimTime::MAX);
    let started = |x: u32| t.started_at(x);
    (0..j.iterations.len() as u32)
        .filter_map(|it| match j.resolved.get(&it) {
            Some(r) => r.step.clone(),
            None => j.step(it, &started, &done, ranks),
        })
        .collect()
}

impl JobReport {
    pub fn of(sim: &Simulation) -> Vec<JobReport> {
        let t = &sim.tasks();
        let span = |a: u32, b: u32| {
            let (a, b) = (t.done_at(a), t.done_at(b));
            (b != SimTime::MAX && a != SimTime::MAX).then(|| b.0 - a.0)
        };
        let runs = t.collective_times();
        t.jobs
            .iter()
            .map(|j| {
                let iteration_ps: Vec<u64> = j
                    .iterations
                    .iter()
                    .enumerate()
                    .filter_map(|(it, &(a, b))| match j.resolved.get(&(it as u32)) {
                        Some(r) => r.span.map(|(a, b)| b.0 - a.0),
                        None => span(a, b),
                    })
                    .collect();
                let total: u64 = iteration_ps.iter().sum();
                // Time with some collective of the job in flight (the
                // union of their spans: a model's TP groups and DP buckets
                // run side by side).
                let mut spans: Vec<(u64, u64)> = runs
                    .iter()
                    .filter(|(c, _, _)| c.workload == j.workload)
                    .filter_map(|&(_, a, b)| {
                        (a != SimTime::MAX && b != SimTime::MAX).then_some((a.0, b.0))
                    })
                    .collect();
                spans.sort_unstable();
                let (mut comm, mut reach) = (0u64, 0u64);
                for (a, b) in spans {
                    let a = a.max(reach);
                    if b > a {
                        comm += b - a;
                        reach = b;
                    }
                }
                let w = &sim.scenario().workloads[j.workload as usize];
                let ranks = match &w.pattern {
                    crate::workload::Pattern::Training(tr) => tr.gpus.len(),
                    crate::workload::Pattern::Model(m) => m.gpus.len(),
                    _ => 0,
                };
                JobReport {
                    workload: j.workload,
                    tenant: w.tenant,
                    ranks,
                    mean_iteration_ps: (!iteration_ps.is_empty())
                        .then(|| total as f64 / iteration_ps.len() as f64),
                    comm_share: (total > 0).then(|| comm as f64 / total as f64),
                    iteration_ps,
                    steps: steps(t, j, ranks),
                    checkpoint_ps: j
                        .checkpoints
                        .iter()
                        .filter_map(|&(_, a, b)| span(a, b))
                        .chain(j.resolved.values().filter_map(|r| r.checkpoint_ps))
                        .sum(),
                }
            })
            .collect()
    }
}

/// One collective: nccl-tests' size, time, algorithm and bus bandwidth
/// (GB/s are 1e9 bytes per second).
#[derive(Serialize, Debug, Clone)]
pub struct CollectiveReport {
    /// Index of its workload entry.
    pub workload: u32,
    pub collective: String,
    /// As run: NCCL's tuner's pick where the scenario said "auto".
    pub algorithm: String,
    pub protocol: String,
    pub channels: u32,
    pub ranks: usize,
    /// Where its bytes go: "nvlink" (all ranks in one host), "network"
    /// (one rank per host) or "nvlink+network".
    pub medium: &'static str,
    pub bytes: u64,
    pub start_ps: u64,
    /// `None` if it did not finish.
    pub time_ps: Option<u64>,
    pub algbw_gbps: Option<f64>,
    pub busbw_gbps: Option<f64>,
    /// The training iteration it belongs to.
    pub iteration: Option<u32>,
    /// The software time its steps were charged (`step_latency`):
    /// "nccl", "none" or a time per step.
    pub step_latency: String,
}

impl CollectiveReport {
    pub fn of(sim: &Simulation) -> Vec<CollectiveReport> {
        let t = &sim.tasks();
        // In workload order, each workload's in the order they were made
        // (jobs' later iterations are made as the run goes).
        let mut runs = t.collective_times();
        runs.sort_by_key(|c| c.0.workload);
        runs.into_iter()
            .map(|(c, start, end)| {
                let time = (end != SimTime::MAX).then(|| end.0 - start.0);
                let algbw = time.map(|ps| c.bytes as f64 * 1e3 / ps.max(1) as f64);
                CollectiveReport {
                    workload: c.workload,
                    collective: c.op.name().to_string(),
                    algorithm: c.algorithm.name().to_string(),
                    protocol: c.protocol.name().to_string(),
                    channels: c.channels,
                    ranks: c.ranks,
                    medium: match c.hosts {
                        1 => "nvlink",
                        h if h as usize == c.ranks => "network",
                        _ => "nvlink+network",
                    },
                    bytes: c.bytes,
                    start_ps: if start == SimTime::MAX { 0 } else { start.0 },
                    time_ps: time,
                    algbw_gbps: algbw,
                    busbw_gbps: algbw.map(|a| a * c.op.busbw_factor(c.ranks)),
                    iteration: c.iteration,
                    step_latency: c.step_latency.label(),
                }
            })
            .collect()
    }
}

/// The part of its NVLink each GPU keeps while `t` is down, when `t` is
/// a host's NVLink switch chips.
fn nvlink_kept(
    t: crate::scenario::failures::Target,
    host: &crate::scenario::HostConfig,
) -> Option<f64> {
    match (t, host.scale_up) {
        (
            crate::scenario::failures::Target::NvlinkSwitches { count, .. },
            crate::scenario::hosts::ScaleUp::Switched { switches },
        ) => Some(f64::from(switches.saturating_sub(count)) / f64::from(switches)),
        _ => None,
    }
}

/// One failure and what it cost.
#[derive(Serialize, Debug, Clone)]
pub struct FailureReport {
    /// `leaf0-spine1` (`/k` for one of parallel links) or a switch name.
    pub target: String,
    pub at_ps: u64,
    pub recover_ps: Option<u64>,
    /// A slowdown instead of a failure: the rate the link ran at.
    pub degraded_to_gbps: Option<f64>,
    /// NVLink switch chips: the part of its NVLink each GPU of the
    /// domain keeps while they are down.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvlink_kept: Option<f64>,
    pub lost_packets: u64,
    pub lost_bytes: u64,
    /// From the failure until the last frame lost to it: how long senders
    /// (or routing) kept using the dead path.
    pub losing_for_ps: Option<u64>,
    /// QPs that lost data packets to it.
    pub affected_qps: u64,
    pub reconverged_ps: Option<u64>,
    /// From the failure until every affected QP delivered in-order data
    /// again (`None` if one never did).
    pub progress_again_after_ps: Option<u64>,
    /// QPs still sending whose path changed when routing reconverged
    /// (static balancers; `None` where switches choose dynamically).
    pub flows_moved: Option<u64>,
}

/// One balancer setup and what it did, summed over the switches of a
/// tier that run it.
#[derive(Serialize, Debug, Clone)]
pub struct BalancerReport {
    pub tier: String,
    pub balancer: String,
    pub switches: usize,
    /// DLB/GLB: choices made on quality (new flows or flowlets, or packets).
    pub decisions: u64,
    /// DLB/GLB: new flowlets placed on another member than their flow had.
    pub flowlet_moves: u64,
    /// DLB/GLB: flows moved by reactive rebalancing.
    pub rebalances: u64,
    /// Spraying: packets sprayed.
    pub sprayed_packets: u64,
    /// Selective rules: packets that matched one.
    pub selected_packets: u64,
    /// ALB: group scans that found a member outside the tolerance, and
    /// buckets moved.
    pub alb_imbalanced_scans: u64,
    pub alb_bucket_moves: u64,
    /// GLB: heartbeats received.
    pub glb_heartbeats: u64,
    /// TELB: packets kept on their primary colour, moved to the backup,
    /// or left to the default balancer because both had failed.
    pub telb_primary: u64,
    pub telb_backup: u64,
    pub telb_fallback: u64,
}

#[derive(Serialize, Debug, Clone)]
pub struct Perf {
    /// Wall time from reading the scenario to the start of the run:
    /// resolving it, building the fabric, its routes, the workload's
    /// task graph and the simulation's state (the first partition's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_seconds: Option<f64>,
    pub wall_seconds: f64,
    pub events_per_second: f64,
    pub link_transmissions_per_second: f64,
    pub wall_seconds_per_sim_ms: f64,
    pub peak_rss_bytes: u64,
    /// `peak_rss_bytes` over the fabric's GPUs: what a larger fabric of
    /// the same shape will need per GPU.
    pub peak_rss_bytes_per_gpu: u64,
    pub peak_live_packets: usize,
    /// What was expected before the run (see `Estimate`).
    pub estimated_link_transmissions: u64,
    pub estimated_events: u64,
    /// Threads asked for and partitions run (see `engine::parallel`).
    pub threads: u32,
    pub partitions: u32,
    /// Why the run used one partition although more threads were asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one_partition_because: Option<String>,
    /// With more than one partition: the cut, the lookahead, the
    /// synchronization windows, the frames that crossed a cut and the
    /// events each partition handled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lookahead_ps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_windows: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_partition_frames: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partition_events: Vec<u64>,
    /// Wall time the further partitions took to build, not counted in
    /// `wall_seconds`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition_build_seconds: Option<f64>,
    /// At flow level: how many times rates were shared anew (once per
    /// instant at which sub-flows started or ended), and the mean number
    /// of sub-flows in the components filled each time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fluid_shares: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fluid_mean_component: Option<f64>,
    /// At flow level under DCQCN: ticks of its congestion control, each
    /// counting marks on the queues that hold bytes (`fluid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fluid_cc_ticks: Option<u64>,
    /// At flow level: shares that found lossless senders without
    /// congestion control paused (PFC's steady state, `fluid::pfc`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fluid_pfc_shares: Option<u64>,
    /// At flow level: ring passes run as one steady stream each
    /// (`simulation.flow_rings = "streams"`) instead of message by message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fluid_streams: Option<u64>,
    /// In a hybrid run: the packet region's switches, and the transfers
    /// that went as packets and as fluids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hybrid_region: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hybrid_packet_flows: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hybrid_fluid_flows: Option<u64>,
    /// Jobs' iterations and traces' parts made as the run went
    /// (`simulation.job_iterations = "as-they-run"`), those forgotten once
    /// over, and the most held at once (absent when every one was made
    /// before the run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations_made: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations_forgotten: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations_held_at_most: Option<u64>,
    /// Ticks of the balancers' periodic work (DLB quality, GLB heartbeats,
    /// ALB sampling) handled: they stop while the fabric is idle. Not
    /// counted in `events`; summed over partitions, each ticking for its
    /// own switches, so it may differ with the thread count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub balancer_ticks: Option<u64>,
}

impl Summary {
    pub fn of(sim: &Simulation, stop: StopReason) -> Summary {
        let c = &sim.counters();
        let mut fct = Vec::new();
        let mut slow = Vec::new();
        let mut makespan = 0;
        for f in sim.every_flow() {
            if let Some(fin) = f.finish {
                let t = fin - f.start;
                fct.push(t.0 as f64);
                slow.push(t.0 as f64 / f.ideal_fct.0.max(1) as f64);
                makespan = makespan.max(fin.0);
            }
        }
        // Work of the task graph (NVLink copies, compute) counts too, and
        // the passes'.
        makespan = makespan.max(sim.tasks().last_done().0);
        makespan = makespan.max(sim.pass_flows().last_done.0);
        if let Some(s) = sim.serving() {
            makespan = makespan.max(s.last_done().0);
        }
        let qps = &sim.qps();
        let balance = uplink_balance(sim);
        // Serving's KV writes count among the transfers, as made.
        let (writes, writes_done, served) = sim
            .serving()
            .map_or((0, 0, true), |s| (s.writes_made(), s.writes_done, s.done()));
        let mut s = Summary {
            scenario: sim.scenario().name.clone(),
            seed: sim.scenario().seed,
            topology: sim.topo().kind.name().to_string(),
            fidelity: sim.scenario().fidelity.name().to_string(),
            complete: c.flows_completed == sim.flows_total() && served,
            stop_reason: with_unmade(
                sim,
                stop,
                match stop {
                    StopReason::Finished => "finished".to_string(),
                    StopReason::SimTimeLimit => "max_sim_time reached".to_string(),
                    StopReason::Paused => "paused".to_string(),
                    StopReason::Stalled => match sim.later_failed() {
                        Some(why) => {
                            format!("stalled: a part of the workload could not be made: {why}")
                        }
                        None => format!(
                            "stalled: transfers waited on the network with no progress for {}",
                            sim.stall_after()
                        ),
                    },
                    StopReason::EventLimit => "max_events reached".to_string(),
                    StopReason::WallLimit => "max_wall reached".to_string(),
                    StopReason::Interrupted => "interrupted".to_string(),
                    StopReason::MemoryLimit => "max_memory reached".to_string(),
                    StopReason::Deadlock => format!(
                        "PFC deadlock: a cycle of paused queues, each waiting on the next: {}",
                        deadlock_cycle(sim).join(", ")
                    ),
                },
            ),
            deadlock_cycle: deadlock_cycle(sim),
            partial: stop.is_partial(),
            sim_time_ps: sim.now().0,
            makespan_ps: makespan,
            events: c.events,
            link_transmissions: c.link_transmissions,
            flows_completed: c.flows_completed + writes_done,
            flows_total: sim.flows_total() + writes,
            bytes_offered: sim.bytes_offered() + sim.serving().map_or(0, |s| s.bytes_made()),
            bytes_delivered: c.bytes_delivered,
            drops: c.drops,
            drop_bytes: c.drop_bytes,
            data_packets_sent: c.data_packets_sent,
            retransmitted_bytes: qps.iter().map(|q| q.req.retx_bytes).sum(),
            timeouts: qps.iter().map(|q| q.req.timeouts as u64).sum(),
            ended_on_timer: false,
            naks: c.naks_sent,
            acks: c.acks_sent,
            out_of_order_packets: qps.iter().map(|q| q.resp.out_of_order).sum(),
            max_switch_buffer_bytes: sim
                .switches()
                .iter()
                .map(|s| s.buffer.peak)
                .max()
                .unwrap_or(0),
            max_queue_bytes: sim
                .queues()
                .iter()
                .zip(&sim.topo().ports)
                .filter(|(_, p)| matches!(p.owner, Owner::Switch(_)))
                .map(|(q, _)| q.max_bytes)
                .max()
                .unwrap_or(0),
            ecn_marks: c.ecn_marks,
            wred_drops: c.wred_drops,
            cnps_sent: c.cnps_sent,
            cnps_received: c.cnps_received,
            dcqcn_rate_cuts: qps
                .iter()
                .filter_map(|q| q.req.rate.dcqcn())
                .map(|d| d.cuts)
                .sum(),
            dcqcn_min_rate_gbps: qps
                .iter()
                .filter_map(|q| q.req.rate.dcqcn())
                .filter(|d| d.cuts > 0)
                .map(|d| d.min_rc / 1e9)
                .reduce(f64::min),
            congestion_control: {
                let mut used: Vec<crate::nic::Cc> =
                    sim.scenario().workloads.iter().map(|w| w.cc).collect();
                used.sort_unstable();
                used.dedup();
                used.iter().map(|c| c.name()).collect::<Vec<_>>().join("+")
            },
            window_cuts: qps
                .iter()
                .map(|q| {
                    let r = &q.req.rate;
                    r.dctcp().map_or(0, |d| d.cuts)
                        + r.swift().map_or(0, |s| s.cuts)
                        + r.hpcc().map_or(0, |h| h.cuts)
                        + r.timely().map_or(0, |t| t.cuts)
                        + r.uec().map_or(0, |u| u.cuts + u.quick_adapts)
                })
                .sum(),
            pfc_pause_frames: c.pfc_pause_frames,
            pfc_resume_frames: c.pfc_resume_frames,
            pfc_paused_ps: (0..sim.pfc().len()).map(|i| sim.paused_ps(i)).sum(),
            max_headroom_bytes: sim
                .switches()
                .iter()
                .map(|s| s.buffer.headroom_peak)
                .max()
                .unwrap_or(0),
            watchdog_events: c.watchdog_events,
            watchdog_drops: c.watchdog_drops,
            lossless_drops: c.lossless_drops,
            glb_heartbeats_sent: sim.balance().heartbeats_sent,
            glb_heartbeat_bytes: sim.balance().heartbeat_bytes,
            glb_heartbeats_lost: sim.balance().heartbeats_lost,
            path_changes: sim.paths().qps.iter().map(|p| p.changes).sum(),
            reorder_discards: sim.qps().iter().map(|q| q.resp.discarded).sum(),
            trimmed_packets: c.trimmed_packets,
            mrc_paths_failed: mrc_sum(sim, |m| m.paths_failed),
            mrc_trim_resends: mrc_sum(sim, |m| m.trim_resends),
            mrc_timeout_resends: mrc_sum(sim, |m| m.timeout_resends),
            mrc_ecn_rests: mrc_sum(sim, |m| m.ecn_rests),
            mrc_loss_resends: mrc_sum(sim, |m| m.loss_resends),
            mrc_paths_replaced: mrc_sum(sim, |m| m.paths_replaced),
            max_reorder_bytes_per_qp: sim
                .qps()
                .iter()
                .map(|q| q.resp.max_held_bytes)
                .max()
                .unwrap_or(0),
            max_reorder_bytes_per_nic: sim.reorder().iter().map(|r| r.peak).max().unwrap_or(0),
            failure_lost_packets: sim.failures().lost_packets,
            failure_lost_bytes: sim.failures().lost_bytes,
            reconvergences: sim.failures().reconvergences,
            failures: sim
                .failures()
                .stats
                .iter()
                .zip(&sim.scenario().failures.events)
                .map(|(f, e)| FailureReport {
                    target: f.name.clone(),
                    at_ps: f.at.0,
                    recover_ps: f.recover.map(|t| t.0),
                    degraded_to_gbps: f.degrade.map(|r| r.bps() as f64 / 1e9),
                    nvlink_kept: nvlink_kept(e.target, &sim.scenario().host),
                    lost_packets: f.lost_packets,
                    lost_bytes: f.lost_bytes,
                    losing_for_ps: f.last_loss_at.map(|t| t.0.saturating_sub(f.at.0)),
                    affected_qps: f.affected_qps,
                    reconverged_ps: f.reconverged_at.map(|t| t.0),
                    progress_again_after_ps: f.recovered_at.map(|t| t.0.saturating_sub(f.at.0)),
                    flows_moved: f.flows_moved,
                })
                .collect(),
            first_events: sim.firsts(),
            fct_ps: Distribution::of(fct),
            slowdown: Distribution::of(slow),
            uplink_imbalance: imbalance(&balance),
            uplink_balance: balance,
            balancers: balancers(sim),
            collectives: CollectiveReport::of(sim),
            nvlink_bytes: sim.tasks().nvlink.bytes,
            jobs: JobReport::of(sim),
            serving: serving::ServingReport::of(sim),
        };
        s.ended_on_timer = timer_wait(sim).is_some();
        s
    }
}

/// A run stopped before its end makes the iterations it did not reach,
/// for the outputs to list (`Simulation::make_rest`): should one fail,
/// the stop reason says that the outputs lack it. (A stalled run already
/// gives the reason.)
fn with_unmade(sim: &Simulation, stop: StopReason, reason: String) -> String {
    match sim.later_failed() {
        Some(why) if stop != StopReason::Stalled => {
            format!("{reason}; the rest of the workload could not be made for the outputs: {why}")
        }
        _ => reason,
    }
}

/// How evenly the transfers made up front were slowed: Jain's index of
/// each one's ideal over its actual completion time (its rate as a share
/// of what it would get alone), 1 when all were slowed alike. None with
/// fewer than two finished.
pub fn rate_fairness(sim: &Simulation) -> Option<f64> {
    let shares: Vec<f64> = sim
        .every_flow()
        .filter_map(|f| {
            let t = (f.finish? - f.start).0.max(1) as f64;
            Some(f.ideal_fct.0 as f64 / t)
        })
        .collect();
    if shares.len() < 2 {
        return None;
    }
    let sum: f64 = shares.iter().sum();
    let squares: f64 = shares.iter().map(|x| x * x).sum();
    Some(sum * sum / (shares.len() as f64 * squares))
}

fn mrc_sum(sim: &Simulation, f: impl Fn(&crate::nic::mrc::MrcStats) -> u64) -> u64 {
    sim.qps()
        .iter()
        .filter_map(|q| q.req.mrc.as_ref())
        .map(|m| f(&m.stats))
        .sum()
}

fn imbalance(b: &[UplinkBalance]) -> Option<f64> {
    let total: u64 = b.iter().map(|x| x.bytes_total).sum();
    (total > 0).then(|| {
        b.iter()
            .map(|x| x.max_over_mean * x.bytes_total as f64)
            .sum::<f64>()
            / total as f64
    })
}

fn balancers(sim: &Simulation) -> Vec<BalancerReport> {
    let names = sim.topo().kind.tier_names();
    let cfg = &sim.scenario().switch.balance;
    let mut out: Vec<BalancerReport> = Vec::new();
    for tier in 0..3u8 {
        let start = out.len();
        for (i, sw) in sim.topo().switches.iter().enumerate() {
            if sw.tier != tier {
                continue;
            }
            let name = cfg.for_switch(SwitchId(i as u32), tier).name();
            let r = match out[start..].iter().position(|r| r.balancer == name) {
                Some(k) => &mut out[start + k],
                None => {
                    out.push(BalancerReport {
                        tier: names[tier as usize].to_string(),
                        balancer: name,
                        switches: 0,
                        decisions: 0,
                        flowlet_moves: 0,
                        rebalances: 0,
                        sprayed_packets: 0,
                        selected_packets: 0,
                        alb_imbalanced_scans: 0,
                        alb_bucket_moves: 0,
                        glb_heartbeats: 0,
                        telb_primary: 0,
                        telb_backup: 0,
                        telb_fallback: 0,
                    });
                    out.last_mut().expect("just pushed")
                }
            };
            let b = &sim.switches()[i].balancer;
            r.switches += 1;
            if let Some(d) = &b.parts.dlb {
                r.decisions += d.stats.decisions;
                r.flowlet_moves += d.stats.moves;
                r.rebalances += d.stats.rebalances;
            }
            if let Some(s) = &b.parts.spray {
                r.sprayed_packets += s.sprayed;
            }
            r.selected_packets += b.parts.selected.iter().sum::<u64>();
            if let Some(a) = &b.parts.alb {
                r.alb_imbalanced_scans += a.stats.imbalanced;
                r.alb_bucket_moves += a.stats.moves;
            }
            if let Some(g) = &b.parts.glb {
                r.glb_heartbeats += g.heartbeats;
            }
            if let Some(t) = &b.parts.telb {
                r.telb_primary += t.stats.primary;
                r.telb_backup += t.stats.backup;
                r.telb_fallback += t.stats.fallback;
            }
        }
    }
    out
}

fn uplink_balance(sim: &Simulation) -> Vec<UplinkBalance> {
    let topo = &sim.topo();
    let names = topo.kind.tier_names();
    let peer_switch = |p: PortId| match topo.port(topo.port(p).peer).owner {
        Owner::Switch(s) => Some(s),
        Owner::Nic(_) => None,
    };
    let mut out = Vec::new();
    let bytes_of = |p: &PortId| sim.ports()[p.idx()].tx_wire_bytes;
    for tier in 0..3u8 {
        let switches = || {
            topo.switches
                .iter()
                .enumerate()
                .filter(move |(_, s)| s.tier == tier)
        };
        // Every uplink is a choice among equal-cost next hops.
        let up: Vec<PortId> = switches()
            .flat_map(|(_, s)| s.ports.iter().copied())
            .filter(|&p| topo.owner_tier(topo.port(p).peer) > tier as i32)
            .collect();
        // A downlink is a choice only as a member of a port channel.
        let down: Vec<PortId> = switches()
            .flat_map(|(_, s)| {
                s.ports.iter().copied().filter(move |&p| {
                    let n = peer_switch(p);
                    n.is_some()
                        && topo.owner_tier(topo.port(p).peer) < tier as i32
                        && s.ports.iter().filter(|&&q| peer_switch(q) == n).count() > 1
                })
            })
            .collect();
        for (ports, direction) in [(up, "up"), (down, "down")] {
            let bytes: Vec<u64> = ports.iter().map(bytes_of).collect();
            let total: u64 = bytes.iter().sum();
            if bytes.is_empty() || total == 0 {
                continue;
            }
            // The equal-cost groups of these switches whose members are
            // among these ports.
            let mut chosen = vec![false; topo.ports.len()];
            for p in &ports {
                chosen[p.idx()] = true;
            }
            let mut groups: Vec<(String, Vec<u64>)> = Vec::new();
            for (si, s) in switches() {
                let r = &sim.routes().switches[si];
                for g in 0..r.groups.len() as u32 {
                    let members = r.member_slice(g);
                    if members.len() >= 2 && members.iter().all(|m| chosen[m.idx()]) {
                        groups.push((s.name.clone(), members.iter().map(bytes_of).collect()));
                    }
                }
            }
            let (pooled_max_over_mean, pooled_jain) = tables::spread(&bytes);
            let mut weighted = (0.0, 0.0, 0u64);
            let mut worst = (String::new(), 1.0f64);
            for (name, b) in &groups {
                let w: u64 = b.iter().sum();
                let (mom, jain) = tables::spread(b);
                weighted.0 += mom * w as f64;
                weighted.1 += jain * w as f64;
                weighted.2 += w;
                if w > 0 && mom > worst.1 {
                    worst = (name.clone(), mom);
                }
            }
            let (max_over_mean, jain) = if weighted.2 > 0 {
                (
                    weighted.0 / weighted.2 as f64,
                    weighted.1 / weighted.2 as f64,
                )
            } else {
                // No group of two: nothing was chosen among.
                (1.0, 1.0)
            };
            out.push(UplinkBalance {
                tier: names[tier as usize].to_string(),
                direction: direction.to_string(),
                links: bytes.len(),
                bytes_total: total,
                groups: groups.len(),
                max_over_mean,
                jain,
                worst_group: worst.0,
                worst_max_over_mean: worst.1,
                pooled_max_over_mean,
                pooled_jain,
                idle_links: bytes.iter().filter(|&&b| b == 0).count(),
            });
        }
    }
    out
}

/// The deadlock's queues as `FROM->TO priority P`.
fn deadlock_cycle(sim: &Simulation) -> Vec<String> {
    sim.deadlock()
        .iter()
        .map(|&(p, q)| format!("{} priority {q}", sim.topo().link_name(p)))
        .collect()
}

/// A `NAME: N kB` field of a Linux `/proc` file, in bytes.
fn proc_kb(file: &str, field: &str) -> Option<u64> {
    let s = fs::read_to_string(file).ok()?;
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Peak resident memory of this process (Linux `VmHWM`), 0 if unknown.
pub fn peak_rss_bytes() -> u64 {
    proc_kb("/proc/self/status", "VmHWM").unwrap_or(0)
}

/// The longest any retransmission timeout waited (zero: none fired).
fn longest_timeout(sim: &Simulation) -> SimTime {
    let qps = sim.qps();
    let waits = qps.iter().filter(|q| q.req.timeouts > 0);
    waits
        .map(|q| q.req.longest_wait)
        .max()
        .unwrap_or(SimTime::ZERO)
}

/// The wait of the retransmission timeout the run's end waited on: one
/// that waited at least half the run.
pub fn timer_wait(sim: &Simulation) -> Option<SimTime> {
    let wait = longest_timeout(sim);
    (wait > SimTime::ZERO && wait.0 >= sim.now().0 / 2).then_some(wait)
}

/// The times links' utilisation is averaged over: the run, and its
/// active period (the run less its idle stretches, `IdleGaps`), the
/// latter only where they differ by a tenth or more (a timer's wait, long
/// compute phases), as the console and report show it.
pub fn utilisation_spans(sim: &Simulation) -> (f64, Option<f64>) {
    let run = sim.now().0.max(1);
    let active = active_ps(sim);
    (
        run as f64,
        (active < run - run / 10).then_some(active as f64),
    )
}

/// The run less its idle stretches, in ps (at least 1).
pub fn active_ps(sim: &Simulation) -> u64 {
    let idle = sim.idle_gaps().total().0;
    sim.now().0.saturating_sub(idle).max(1)
}

/// When a run's end waited on a retransmission timeout (one timeout
/// waited at least half the run): what to tell the reader, whose
/// utilisation and rates are then averaged over that idle wait.
pub fn timer_tail(sim: &Simulation, s: &Summary) -> Option<String> {
    if !s.ended_on_timer {
        return None;
    }
    let rto = sim.scenario().transport.rto;
    let wait = longest_timeout(sim);
    let timer = if wait == rto {
        format!("of transport.rto = {rto}")
    } else {
        format!("waiting up to {wait}")
    };
    Some(format!(
        "{} retransmission timeout(s) {timer} in a run of {}: its end waited on that timer with little or nothing moving, so utilisation and rates over the run are averaged over the wait; utilisation over the {} of the run's active period is shown as well (a shorter transport.rto, or no loss, ends it sooner)",
        s.timeouts,
        SimTime(s.makespan_ps),
        SimTime(active_ps(sim))
    ))
}

/// Resident memory of this process now (Linux `VmRSS`), 0 if unknown.
pub fn rss_bytes() -> u64 {
    proc_kb("/proc/self/status", "VmRSS").unwrap_or(0)
}

/// Memory the machine can still give (Linux `MemAvailable`).
pub fn available_memory_bytes() -> Option<u64> {
    proc_kb("/proc/meminfo", "MemAvailable")
}

impl Perf {
    /// `wall_seconds`: from the start of the run to its end; the time a
    /// parallel run's further partitions took to build is not the run's.
    pub fn of(sim: &Simulation, wall_seconds: f64) -> Perf {
        let build = sim.parallel().map_or(0.0, |p| p.build_seconds);
        let wall_seconds = (wall_seconds - build).max(0.0);
        let w = wall_seconds.max(1e-9);
        let sim_ms = sim.now().0 as f64 / 1e9;
        let par = sim.parallel();
        let multi = par.filter(|p| p.partitions > 1);
        Perf {
            build_seconds: None,
            wall_seconds,
            events_per_second: sim.counters().events as f64 / w,
            link_transmissions_per_second: sim.counters().link_transmissions as f64 / w,
            wall_seconds_per_sim_ms: if sim_ms > 0.0 {
                wall_seconds / sim_ms
            } else {
                0.0
            },
            peak_rss_bytes: peak_rss_bytes(),
            peak_rss_bytes_per_gpu: peak_rss_bytes() / sim.topo().gpus.len().max(1) as u64,
            peak_live_packets: sim.packets().peak_live(),
            estimated_link_transmissions: sim.estimate().link_transmissions,
            estimated_events: sim.estimate().events,
            threads: par.map_or(sim.scenario().threads, |p| p.threads),
            partitions: par.map_or(1, |p| p.partitions),
            one_partition_because: par.and_then(|p| p.one_because.clone()),
            cut: multi.map(|p| p.cut.clone()),
            lookahead_ps: multi.map(|p| p.lookahead_ps),
            sync_windows: multi.map(|p| p.windows),
            cross_partition_frames: multi.map(|p| p.messages),
            partition_events: multi.map_or(Vec::new(), |p| p.events.clone()),
            partition_build_seconds: multi.map(|p| p.build_seconds),
            fluid_shares: sim.fluid_shares().map(|(n, _)| n),
            fluid_mean_component: sim
                .fluid_shares()
                .map(|(n, subs)| subs as f64 / n.max(1) as f64),
            fluid_cc_ticks: sim.fluid_cc_ticks(),
            fluid_pfc_shares: sim.fluid_pfc_shares(),
            fluid_streams: sim.fluid_shares().map(|_| sim.fluid_streams()),
            hybrid_region: sim.hybrid().map(|h| h.region),
            hybrid_packet_flows: sim.hybrid().map(|h| h.packet_flows),
            hybrid_fluid_flows: sim.hybrid().map(|h| h.fluid_flows),
            iterations_made: sim.later_counts().map(|c| c.0),
            iterations_forgotten: sim.later_counts().map(|c| c.1),
            iterations_held_at_most: sim.later_counts().map(|c| c.2),
            balancer_ticks: Some(sim.balance().ticks).filter(|&n| n > 0),
        }
    }

    /// The figures with the time the run took to build.
    pub fn built_in(self, build_seconds: f64) -> Perf {
        Perf {
            build_seconds: Some(build_seconds),
            ..self
        }
    }
}

/// The live line shown while a run goes on: simulated time reached,
/// speed, how much is done and, once there is enough to go on, the wall
/// time left at the pace so far.
pub fn progress_line(p: &crate::engine::Progress, wall_seconds: f64) -> String {
    let w = wall_seconds.max(1e-9);
    let done = p.done;
    let eta = eta_seconds(done, wall_seconds)
        .map(|left| format!(", ETA {}", wall_duration(left)))
        .unwrap_or_default();
    format!(
        "{:.1}% done{eta}  sim {}  {:.2} M events/s  {:.2} M link tx/s  {}/{} transfers",
        done * 100.0,
        p.now,
        p.events as f64 / w / 1e6,
        p.link_transmissions as f64 / w / 1e6,
        p.flows_completed,
        p.flows,
    )
}

/// The line shown before a large run starts: what it should cost.
pub fn estimate_line(sim: &Simulation) -> String {
    let e = sim.estimate();
    format!(
        "estimate  {:.1} M link transmissions, {:.1} M events; about {} at {:.0} M link transmissions/s",
        e.link_transmissions as f64 / 1e6,
        e.events as f64 / 1e6,
        wall_duration(e.wall_seconds()),
        crate::engine::Estimate::LINK_TX_PER_SECOND / 1e6
    )
}

/// Wall seconds left if the rest goes at the pace so far; none before
/// 1% is done or half a second has passed, when the guess is noise.
pub fn eta_seconds(done: f64, wall_seconds: f64) -> Option<f64> {
    ((0.01..1.0).contains(&done) && wall_seconds >= 0.5).then(|| wall_seconds * (1.0 - done) / done)
}

/// `42s`, `3m 05s`, `2h 10m`.
pub fn wall_duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
    }
}

/// Writes every output file into `dir`, all or nothing, through a private
/// staging folder; then files an earlier run left there and this one did
/// not write again are removed (see `crate::output`), so the folder holds
/// one run's outputs.
pub fn write_outputs(
    dir: &Path,
    sim: &Simulation,
    summary: &Summary,
    perf: &Perf,
) -> std::io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    crate::output::check_run_folder(dir).map_err(std::io::Error::other)?;
    crate::output::remove_dead_leftovers(dir);
    let staging = crate::output::stage_in(dir, "staging")?;
    let stage = staging.path().to_path_buf();
    let result = (|| -> std::io::Result<Vec<PathBuf>> {
        // Each file goes to the staging folder as soon as it is made, so
        // at most one file's bytes are held at once (flows.csv of a
        // million-transfer run is hundreds of MB).
        let mut files: Vec<&str> = Vec::new();
        let mut put =
            |name: &'static str, write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>| {
                let mut out = std::io::BufWriter::new(fs::File::create(stage.join(name))?);
                write(&mut out)?;
                out.flush()?;
                // The run-folder check knows every name a run writes.
                debug_assert!(crate::output::is_run_output(name), "{name}");
                files.push(name);
                std::io::Result::Ok(())
            };
        put("summary.json", &mut |w| json(summary, w))?;
        put("perf.json", &mut |w| json(perf, w))?;
        put("flows.csv", &mut |w| tables::flows_csv(sim, w))?;
        put("links.csv", &mut |w| tables::links_csv(sim, w))?;
        // A flow-level run has no packets: nothing queues, marks, pauses.
        let packets = sim.scenario().fidelity != crate::scenario::Fidelity::Flow;
        if packets {
            put("queues.csv", &mut |w| tables::queues_csv(sim, w))?;
            put("pfc.csv", &mut |w| tables::pfc_csv(sim, w))?;
            put("qps.csv", &mut |w| tables::qps_csv(sim, w))?;
        }
        put("groups.csv", &mut |w| tables::groups_csv(sim, w))?;
        if !summary.collectives.is_empty() {
            put("collectives.csv", &mut |w| {
                tables::collectives_csv(summary, w)
            })?;
        }
        if !summary.jobs.is_empty() {
            put("jobs.csv", &mut |w| tables::jobs_csv(summary, w))?;
        }
        if !summary.serving.is_empty() {
            put("requests.csv", &mut |w| serving::requests_csv(sim, w))?;
        }
        if sim.series().enabled && packets {
            for kind in series::Kind::ALL {
                put(kind.file(), &mut |w| series::csv(sim, kind, w))?;
            }
        }
        let views = &sim.scenario().report;
        if views.plots || views.html {
            let svgs = plots::all(sim).map_err(std::io::Error::other)?;
            if views.html {
                let page = html::render(sim, summary, &svgs).map_err(std::io::Error::other)?;
                put("report.html", &mut |w| w.write_all(page.as_bytes()))?;
            }
            if views.plots {
                for (name, svg) in &svgs {
                    put(name, &mut |w| w.write_all(svg.as_bytes()))?;
                }
            }
        }
        let mut written = Vec::new();
        for name in &files {
            let dst = dir.join(name);
            crate::output::put_file(&stage.join(name), &dst)?;
            written.push(dst);
        }
        crate::output::replace_manifest(dir, &written)?;
        Ok(written)
    })();
    drop(staging);
    result
}

/// Connections whose static route crosses each port: distinct (sending
/// port, receiving NIC, UDP source port) triples, so that the messages of
/// one collective connection count once. `None` where routes are chosen
/// dynamically (or for runs of more than 200,000 QPs, to keep reports
/// quick). Shows which uplinks per-flow hashing made collide.
pub fn connections_per_port(sim: &Simulation) -> Option<Vec<u32>> {
    if sim.qps().len() > 200_000 {
        return None;
    }
    let mut seen = std::collections::HashSet::new();
    let mut n = vec![0u32; sim.ports().len()];
    for q in 0..sim.qps().len() {
        let qp = &sim.qps()[q];
        let route = sim.qp_route(crate::topology::QpId(q as u32))?;
        let key = (qp.src_port.0, qp.dst_nic.0, qp.udp_sport);
        if !seen.insert(key) {
            continue;
        }
        for p in route {
            n[p.idx()] += 1;
        }
    }
    Some(n)
}

fn json<T: Serialize>(v: &T, mut out: &mut dyn Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut out, v).map_err(std::io::Error::other)?;
    out.write_all(b"\n")
}
