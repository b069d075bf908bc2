//! Traffic offered to the fabric, expanded into transfers.
//!
//! A workload entry in the scenario (an explicit transfer, a permutation,
//! an incast, an all-to-all) becomes a list of `FlowSpec`s: one RDMA Write
//! of `bytes` from a source GPU's NIC to a destination GPU's NIC, starting
//! at a given time, split over one or more QPs. A collective becomes a
//! task graph (`graph`) of gated transfers and NVLink copies
//! (`collective`).

pub mod background;
pub mod chakra;
pub mod collective;
pub mod graph;
pub mod jobs;
pub mod model;
pub mod op;
pub mod params;
pub mod pass;
mod permutation;
pub mod serving;
pub mod training;
pub mod tuner;

use crate::keys::{KeyError, KeyPath};
use crate::rng::Streams;
use crate::topology::routing::Routes;
use crate::topology::{GpuId, NicId, Topology};
use crate::units::SimTime;

/// `total` split into `parts` near-equal shares: share `i`.
pub fn share(total: u64, parts: u64, i: u64) -> u64 {
    total / parts + u64::from(i < total % parts)
}

/// A workload entry, resolved (GPU ids checked, units applied).
#[derive(Clone, Debug)]
pub struct Workload {
    pub pattern: Pattern,
    pub bytes: u64,
    pub start: SimTime,
    pub qps: u32,
    /// Cap on each transfer's sending rate (`None`: as fast as allowed).
    pub rate: Option<crate::units::Rate>,
    /// Tenant (job) id, which TELB policies can match.
    pub tenant: u16,
    /// DSCP of its data and ACKs, so its traffic class at every switch
    /// and NIC: its own `dscp`, else its tenant's (`[transport]
    /// tenant_dscp`), else `transport.dscp`.
    pub dscp: u8,
    /// Congestion control of its QPs: its own `congestion_control`, else
    /// its tenant's (`[transport] tenant_congestion_control`), else the
    /// transport's.
    pub cc: crate::nic::Cc,
    /// Software time of its collectives' steps (`step_latency`).
    pub step_latency: collective::StepLatency,
    /// Where this entry sits in the scenario, for error messages.
    pub path: KeyPath,
}

#[derive(Clone, Debug)]
pub enum Pattern {
    Transfer {
        src: GpuId,
        dst: GpuId,
    },
    /// Every participating GPU sends to one distinct GPU on another host.
    Permutation {
        gpus: Vec<GpuId>,
        rail_aligned: bool,
    },
    /// Many senders to one receiver.
    Incast {
        dst: GpuId,
        srcs: Vec<GpuId>,
    },
    /// Every participating GPU sends to every other reachable one.
    AllToAll {
        gpus: Vec<GpuId>,
    },
    /// A collective over a communicator.
    Collective(collective::Collective),
    /// A Chakra execution trace, its ranks on these GPUs.
    Chakra(Box<(std::sync::Arc<chakra::Trace>, chakra::Settings)>),
    /// A training job: iterations of compute and collectives.
    Training(Box<training::Training>),
    /// A training job made from the model and its parallelism.
    Model(Box<model::ModelJob>),
    /// Requests served by prefill and decode pools.
    Serving(Box<serving::ServingConfig>),
    /// Random small flows among these GPUs at a target load.
    Background {
        gpus: Vec<GpuId>,
        cdf: background::Cdf,
        load: f64,
        duration: SimTime,
    },
}

impl Pattern {
    pub fn name(&self) -> &'static str {
        match self {
            Pattern::Transfer { .. } => "transfer",
            Pattern::Permutation { .. } => "permutation",
            Pattern::Incast { .. } => "incast",
            Pattern::AllToAll { .. } => "all-to-all",
            Pattern::Collective(_) => "collective",
            Pattern::Chakra(_) => "chakra",
            Pattern::Training(_) => "training",
            Pattern::Model(_) => "model",
            Pattern::Serving(_) => "serving",
            Pattern::Background { .. } => "background",
        }
    }
}

/// One transfer: an RDMA Write from `src` to `dst`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct FlowSpec {
    pub src: GpuId,
    pub dst: GpuId,
    pub src_nic: NicId,
    pub dst_nic: NicId,
    pub bytes: u64,
    pub start: SimTime,
    pub qps: u32,
    /// Cap on the transfer's sending rate, shared by its QPs.
    pub rate: Option<crate::units::Rate>,
    /// Index of the workload entry it came from.
    pub workload: u32,
    /// Started by the task graph rather than at `start`.
    pub gated: bool,
    /// The connection it belongs to: messages of one connection share
    /// their QPs' UDP source ports (and so their ECMP paths).
    pub conn: Option<u64>,
}

impl FlowSpec {
    /// How many QPs carry it: `qps`, but no more than it has bytes.
    pub fn n_qps(&self) -> u32 {
        u64::from(self.qps).min(self.bytes).max(1) as u32
    }
}

/// Everything the workload entries expand into.
#[derive(Debug, Default)]
pub struct Expanded {
    pub flows: Vec<FlowSpec>,
    pub graph: graph::TaskGraph,
    pub collectives: Vec<collective::CollectiveRun>,
    pub jobs: Vec<training::JobRun>,
    /// The jobs' iterations after their first, when they are made as the
    /// run reaches them.
    pub later: Option<Box<jobs::Later>>,
}

/// Whether `a` can reach `b` over the network: different hosts, same rail
/// where rails are separate VLANs, and a routed path.
pub fn network_path(topo: &Topology, routes: &Routes, a: GpuId, b: GpuId) -> Result<(), String> {
    let (ga, gb) = (topo.gpus[a.idx()], topo.gpus[b.idx()]);
    if ga.host == gb.host {
        return Err(format!(
            "{} and {} are in the same host; a transfer between them is an NVLink copy (kind = \"transfer\" or a collective), not network traffic",
            topo.gpu_name(a),
            topo.gpu_name(b)
        ));
    }
    let (na, nb) = (&topo.nics[ga.nic.idx()], &topo.nics[gb.nic.idx()]);
    if topo.vlan_rails && na.rail != nb.rail {
        return Err(format!(
            "{} is on rail {} and {} on rail {}; rails are separate VLANs in a {} fabric, so cross-rail traffic needs PXN over NVLink (a collective with pxn = true)",
            topo.gpu_name(a),
            na.rail,
            topo.gpu_name(b),
            nb.rail,
            topo.kind.name()
        ));
    }
    let reachable = na
        .ports
        .iter()
        .any(|&p| routes.first_path(topo, p, gb.nic).is_some());
    if !reachable {
        return Err(format!(
            "no network path from {} (rail {}) to {} (rail {}) in this {} fabric",
            topo.gpu_name(a),
            na.rail,
            topo.gpu_name(b),
            nb.rail,
            topo.kind.name()
        ));
    }
    Ok(())
}

/// Most transfers one scenario may hold.
pub const MAX_FLOWS: usize = 4 << 20;

/// Most QPs one scenario may open (the event queue's keys tell this many
/// apart; see `engine::queue`).
pub const MAX_QPS: usize = 1 << 27;

/// The latest simulated time a workload may reach through its start and
/// compute times alone: half of what `SimTime` holds (about 106 days),
/// which leaves the other half for the network time on top and for the
/// timers the engine adds to `now`, each at most a scenario duration.
pub const MAX_SPAN_PS: u64 = u64::MAX / 2;

/// Refuses workloads whose start and compute times could carry simulated
/// time past `MAX_SPAN_PS`. Kernels of every workload may share a GPU
/// and so run one after another; their sum, after the latest start, is
/// a bound on when the last one ends that holds whatever the order.
fn check_time_span(
    workloads: &[Workload],
    graph: &graph::TaskGraph,
    regions: &[(u32, u32)],
    later_compute: u128,
) -> Result<(), KeyError> {
    let mut latest_start: u128 = 0;
    // The jobs' iterations made as the run goes come after every region.
    let mut compute: u128 = later_compute;
    for (i, &(first, wi)) in regions.iter().enumerate() {
        let w = &workloads[wi as usize];
        let end = regions
            .get(i + 1)
            .map_or(graph.tasks.len(), |r| r.0 as usize);
        for t in &graph.tasks[first as usize..end] {
            latest_start = latest_start.max(t.not_before.0 as u128);
            if let graph::TaskKind::Delay(d) = t.kind {
                compute += d.0 as u128;
            }
        }
        latest_start = latest_start.max(w.start.0 as u128);
        if let Pattern::Background { duration, .. } = &w.pattern {
            latest_start = latest_start.max(w.start.0 as u128 + duration.0 as u128);
        }
        let span = latest_start + compute;
        if span > MAX_SPAN_PS as u128 {
            let path = match &w.pattern {
                Pattern::Chakra(_) => w.path.key("trace"),
                _ => w.path.clone(),
            };
            return Err(KeyError::new(
                &path,
                format!(
                    "start and compute times up to this workload add up to {:.3e} s of simulated time; a run can simulate at most {:.3e} s (2^63 ps)",
                    span as f64 * 1e-12,
                    MAX_SPAN_PS as f64 * 1e-12
                ),
            ));
        }
    }
    Ok(())
}

/// Expands every workload entry into transfers, in scenario order.
/// `traces` are the Chakra workloads' traces, in order, given apart so
/// that their nodes can go once put in order (a Chakra workload's own is
/// taken where none is given).
#[allow(clippy::too_many_arguments)]
pub fn expand(
    workloads: &[Workload],
    traces: Vec<std::sync::Arc<chakra::Trace>>,
    topo: &Topology,
    routes: &Routes,
    streams: &Streams,
    host: tuner::Host,
    stream_rings: bool,
    as_it_runs: bool,
    limit_bytes: Option<u64>,
) -> Result<Expanded, KeyError> {
    let mut flows = Vec::new();
    let mut graph = graph::GraphBuilder::default();
    graph.stream_rings = stream_rings;
    graph.limit_bytes = limit_bytes;
    let mut collectives = Vec::new();
    let mut runs = Vec::new();
    let mut gens = Vec::new();
    let mut tasks_from = Vec::with_capacity(workloads.len());
    let mut traces = traces.into_iter();
    for (wi, w) in workloads.iter().enumerate() {
        tasks_from.push(graph.len());
        let pairs: Vec<(GpuId, GpuId)> = match &w.pattern {
            Pattern::Collective(c) => {
                let mut e = collective::Emitter::new(
                    topo, routes, &mut graph, &mut flows, wi as u32, w.qps, c.pxn,
                );
                e.host = host;
                e.step_latency = w.step_latency;
                let run = collective::emit(&mut e, c, &[], w.start)
                    .map_err(|m| KeyError::new(&w.path, m))?;
                collectives.push(run);
                continue;
            }
            Pattern::Chakra(t) => {
                let (trace, settings) = &**t;
                let mut e = collective::Emitter::new(
                    topo,
                    routes,
                    &mut graph,
                    &mut flows,
                    wi as u32,
                    w.qps,
                    settings.pxn,
                );
                e.host = host;
                e.step_latency = w.step_latency;
                // Its first part now; the rest after every workload's
                // first part, as a job's later iterations (`jobs`).
                let trace = traces
                    .next()
                    .unwrap_or_else(|| std::sync::Arc::clone(trace));
                let gen = chakra::TraceGen::new(trace, settings, w.start)
                    .and_then(|g| jobs::JobGen::trace(e, g, &mut collectives))
                    .map_err(|m| KeyError::new(&w.path.key("trace"), m))?;
                gens.push((gen, None));
                continue;
            }
            Pattern::Training(t) => {
                let mut e = collective::Emitter::new(
                    topo, routes, &mut graph, &mut flows, wi as u32, w.qps, t.pxn,
                );
                e.host = host;
                e.step_latency = w.step_latency;
                let mut job = training::JobRun::new(wi as u32);
                let gen = jobs::JobGen::training(
                    e,
                    std::sync::Arc::new((**t).clone()),
                    w.start,
                    &mut job,
                    &mut collectives,
                )
                .map_err(|m| KeyError::new(&w.path, m))?;
                gens.push((gen, Some(runs.len())));
                runs.push(job);
                continue;
            }
            Pattern::Model(m) => {
                let mut e = collective::Emitter::new(
                    topo, routes, &mut graph, &mut flows, wi as u32, w.qps, m.pxn,
                );
                e.host = tuner::Host {
                    arch: m.gpu.arch,
                    ..host
                };
                e.step_latency = w.step_latency;
                let mut job = training::JobRun::new(wi as u32);
                let gen = jobs::JobGen::model(
                    e,
                    std::sync::Arc::new((**m).clone()),
                    w.start,
                    &mut job,
                    &mut collectives,
                )
                .map_err(|msg| KeyError::new(&w.path, msg))?;
                gens.push((gen, Some(runs.len())));
                runs.push(job);
                continue;
            }
            // Planned once the run's NVLink is known (`scenario`), run by
            // `runtime::serving`.
            Pattern::Serving(_) => continue,
            Pattern::Transfer { src, dst }
                if topo.gpus[src.idx()].host == topo.gpus[dst.idx()].host =>
            {
                // Inside one host: an NVLink copy, at its start time.
                if src == dst {
                    return Err(KeyError::new(&w.path.key("dst"), "is the same GPU as src"));
                }
                let mut e = collective::Emitter::new(
                    topo, routes, &mut graph, &mut flows, wi as u32, w.qps, false,
                );
                e.host = host;
                let at = e.join(&[], w.start);
                e.send(*src, *dst, w.bytes, 0, &[at])
                    .map_err(|m| KeyError::new(&w.path, m))?;
                continue;
            }
            Pattern::Transfer { src, dst } => {
                network_path(topo, routes, *src, *dst).map_err(|m| KeyError::new(&w.path, m))?;
                vec![(*src, *dst)]
            }
            Pattern::Incast { dst, srcs } => {
                for s in srcs {
                    network_path(topo, routes, *s, *dst)
                        .map_err(|m| KeyError::new(&w.path.key("srcs"), m))?;
                }
                srcs.iter().map(|s| (*s, *dst)).collect()
            }
            Pattern::Permutation { gpus, rail_aligned } => {
                let mut rng = streams.stream(&format!("workload/{wi}/permutation"));
                permutation::pairs(topo, routes, gpus, *rail_aligned, &mut rng)
                    .map_err(|m| KeyError::new(&w.path, m))?
            }
            Pattern::Background {
                gpus,
                cdf,
                load,
                duration,
            } => {
                let mut rng = streams.stream(&format!("workload/{wi}/background"));
                let mut starts = Vec::new();
                for &a in gpus {
                    let peers: Vec<GpuId> = gpus
                        .iter()
                        .copied()
                        .filter(|&b| network_path(topo, routes, a, b).is_ok())
                        .collect();
                    let nic = &topo.nics[topo.gpus[a.idx()].nic.idx()];
                    let line: u64 = nic.ports.iter().map(|&p| topo.port(p).rate.bps()).sum();
                    let rate = load * line as f64 / 8.0;
                    let most = MAX_FLOWS.saturating_sub(flows.len() + starts.len());
                    for (t, d, size) in background::arrivals(
                        cdf,
                        rate,
                        w.start,
                        *duration,
                        peers.len(),
                        most,
                        &mut rng,
                    ) {
                        starts.push((a, peers[d], t, size));
                        if flows.len() + starts.len() > MAX_FLOWS {
                            return Err(KeyError::new(
                                &w.path,
                                format!("background traffic would have more than {MAX_FLOWS} flows; lower load or duration"),
                            ));
                        }
                    }
                }
                for (src, dst, start, bytes) in starts {
                    flows.push(FlowSpec {
                        src,
                        dst,
                        src_nic: topo.gpus[src.idx()].nic,
                        dst_nic: topo.gpus[dst.idx()].nic,
                        bytes,
                        start,
                        qps: w.qps,
                        rate: w.rate,
                        workload: wi as u32,
                        gated: false,
                        conn: None,
                    });
                }
                continue;
            }
            Pattern::AllToAll { gpus } => {
                if gpus.len() * gpus.len() > MAX_FLOWS {
                    return Err(KeyError::new(
                        &w.path,
                        format!(
                            "an all-to-all among {} GPUs has more than {MAX_FLOWS} transfers",
                            gpus.len()
                        ),
                    ));
                }
                let mut v = Vec::new();
                for &a in gpus {
                    for &b in gpus {
                        if a != b && network_path(topo, routes, a, b).is_ok() {
                            v.push((a, b));
                        }
                    }
                }
                if v.is_empty() {
                    return Err(KeyError::new(
                        &w.path,
                        "all-to-all has no pair of GPUs with a network path between them",
                    ));
                }
                v
            }
        };
        if flows.len() + pairs.len() > MAX_FLOWS {
            return Err(KeyError::new(
                &w.path,
                format!(
                    "the workload would have {} transfers; at most {MAX_FLOWS} are supported",
                    flows.len() + pairs.len()
                ),
            ));
        }
        for (src, dst) in pairs {
            flows.push(FlowSpec {
                src,
                dst,
                src_nic: topo.gpus[src.idx()].nic,
                dst_nic: topo.gpus[dst.idx()].nic,
                bytes: w.bytes,
                start: w.start,
                qps: w.qps,
                rate: w.rate,
                workload: wi as u32,
                gated: false,
                conn: None,
            });
        }
    }
    // The jobs' later iterations, job by job (`jobs`): made now, or laid
    // out to be made as the run reaches them.
    let mut later = None;
    let path = |gen: &jobs::JobGen| {
        let w = &workloads[gen.workload as usize];
        if gen.is_trace() {
            w.path.key("trace")
        } else {
            w.path.clone()
        }
    };
    let gen_workloads: Vec<u32> = gens.iter().map(|g| g.0.workload).collect();
    if as_it_runs && gens.iter().any(|g| !g.0.finished()) {
        let mut l = jobs::Later::new(graph.next_numbers(flows.len()), stream_rings);
        for (gen, job) in gens {
            let p = path(&gen);
            l.add(gen, job, topo, routes, &mut graph)
                .map_err(|m| KeyError::new(&p, m))?;
        }
        later = Some(Box::new(l));
    } else {
        for (gen, job) in &mut gens {
            tasks_from.push(graph.len());
            // A trace keeps no job records.
            let mut none = training::JobRun::new(gen.workload);
            let job = match job {
                Some(j) => &mut runs[*j],
                None => &mut none,
            };
            while !gen.finished() {
                gen.iteration(topo, routes, &mut graph, &mut flows, job, &mut collectives)
                    .map_err(|m| KeyError::new(&path(gen), m))?;
            }
        }
    }
    // Collectives in workload order, each workload's as they were added.
    collectives.sort_by_key(|c| c.workload);
    let mut graph = graph.build();
    let owners = (0..workloads.len() as u32).chain(gen_workloads);
    graph.workload_first_task = tasks_from
        .iter()
        .zip(owners)
        .map(|(&t, w)| (t as u32, w))
        .collect();
    let later_compute = later.as_ref().map_or(0, |l| l.compute);
    check_time_span(workloads, &graph, &graph.workload_first_task, later_compute)?;
    Ok(Expanded {
        flows,
        graph,
        collectives,
        jobs: runs,
        later,
    })
}
