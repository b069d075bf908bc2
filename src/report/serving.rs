//! What serving workloads report: per request (`requests.csv`) and, per
//! workload, the percentiles users quote (time to first token, time per
//! output token, KV transfer time) and how much of each the network
//! added.

use crate::engine::Simulation;
use crate::runtime::serving::{Req, Run};
use crate::units::SimTime;
use serde::Serialize;
use std::io::Write;

/// Percentiles of a latency, in picoseconds.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Percentiles {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles, `None` of nothing.
    pub fn of(mut v: Vec<f64>) -> Option<Percentiles> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Percentiles {
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            max: *v.last().expect("non-empty"),
        })
    }
}

/// One serving workload's requests, summed up.
#[derive(Serialize, Debug, Clone)]
pub struct ServingReport {
    pub workload: u32,
    pub tenant: u16,
    pub requests: u64,
    /// Requests whose last token was made.
    pub completed: u64,
    /// Output tokens made per second, from the first arrival to the last
    /// token.
    pub tokens_per_s: Option<f64>,
    /// Time to first token: arrival to the cache's last byte at the
    /// decode replica.
    pub ttft_ps: Option<Percentiles>,
    /// Time per output token after the first.
    pub tpot_ps: Option<Percentiles>,
    /// From a request's first KV write's start to its last's delivery.
    pub kv_ps: Option<Percentiles>,
    /// What the network added to time to first token: the wait for the
    /// cache after the prefill, less what it takes on an idle fabric.
    pub ttft_network_ps: Option<Percentiles>,
    /// What the network added to time per output token: its decode
    /// steps' time less their compute and their experts' copies alone on
    /// an idle fabric, per token (zero for a dense model, whose decode
    /// steps use no network).
    pub tpot_network_ps: Option<Percentiles>,
    /// KV-cache bytes moved, over every request.
    pub kv_bytes: u64,
}

/// A request's figures, once it has them.
struct Figures {
    ttft: SimTime,
    tpot: Option<SimTime>,
    kv: SimTime,
    kv_wait: SimTime,
    network: SimTime,
    tpot_network: Option<SimTime>,
}

fn figures(run: &Run, q: usize) -> Option<Figures> {
    let (r, req): (_, &Req) = (&run.plan.requests[q], &run.reqs[q]);
    if req.first_token == SimTime::MAX {
        return None;
    }
    let kv_wait = req.kv_end.saturating_sub(req.prefill_end);
    Some(Figures {
        ttft: req.first_token.saturating_sub(r.arrival),
        tpot: (req.last_token != SimTime::MAX && r.output > 1).then(|| {
            SimTime(req.last_token.saturating_sub(req.first_token).0 / u64::from(r.output - 1))
        }),
        kv: req.kv_end.saturating_sub(req.kv_start),
        kv_wait,
        network: kv_wait.saturating_sub(req.kv_ideal),
        tpot_network: (req.decoded > 0)
            .then(|| SimTime(req.step_network.0 / u64::from(req.decoded))),
    })
}

/// Every served request's time to first token, time per output token
/// and KV transfer time, in milliseconds, by name (for the plot).
pub fn latencies(sim: &Simulation) -> Vec<(&'static str, Vec<f64>)> {
    let mut out = vec![
        ("time to first token", Vec::new()),
        ("time per output token", Vec::new()),
        ("KV transfer", Vec::new()),
    ];
    let ms = |t: SimTime| t.0 as f64 * 1e-9;
    for run in sim.serving().iter().flat_map(|s| &s.runs) {
        for f in (0..run.reqs.len()).filter_map(|q| figures(run, q)) {
            out[0].1.push(ms(f.ttft));
            out[1].1.extend(f.tpot.map(ms));
            out[2].1.push(ms(f.kv));
        }
    }
    out
}

impl ServingReport {
    pub fn of(sim: &Simulation) -> Vec<ServingReport> {
        let Some(s) = sim.serving() else {
            return Vec::new();
        };
        s.runs
            .iter()
            .map(|run| {
                let n = run.reqs.len();
                let f: Vec<Figures> = (0..n).filter_map(|q| figures(run, q)).collect();
                let ps = |get: &dyn Fn(&Figures) -> Option<SimTime>| {
                    Percentiles::of(f.iter().filter_map(get).map(|t| t.0 as f64).collect())
                };
                let done: Vec<usize> = (0..n)
                    .filter(|&q| run.reqs[q].last_token != SimTime::MAX)
                    .collect();
                let tokens: u64 = done
                    .iter()
                    .map(|&q| u64::from(run.plan.requests[q].output))
                    .sum();
                let first = run
                    .plan
                    .requests
                    .first()
                    .map_or(SimTime::ZERO, |r| r.arrival);
                let last = done.iter().map(|&q| run.reqs[q].last_token).max();
                let tokens_per_s = last
                    .filter(|&l| l > first)
                    .map(|l| tokens as f64 / ((l.0 - first.0) as f64 * 1e-12));
                let w = &sim.scenario().workloads[run.plan.workload as usize];
                ServingReport {
                    workload: run.plan.workload,
                    tenant: w.tenant,
                    requests: n as u64,
                    completed: done.len() as u64,
                    tokens_per_s,
                    ttft_ps: ps(&|x| Some(x.ttft)),
                    tpot_ps: ps(&|x| x.tpot),
                    kv_ps: ps(&|x| Some(x.kv)),
                    ttft_network_ps: ps(&|x| Some(x.network)),
                    tpot_network_ps: ps(&|x| x.tpot_network),
                    kv_bytes: run.reqs.iter().map(|r| r.kv_bytes).sum(),
                }
            })
            .collect()
    }
}

/// requests.csv: one row per request of every serving workload, in
/// arrival order; a time it did not reach is empty.
pub fn requests_csv(sim: &Simulation, out: impl Write) -> std::io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "workload",
        "request",
        "arrival_ps",
        "prompt_tokens",
        "output_tokens",
        "prefill_replica",
        "decode_replica",
        "queue_ps",
        "prefill_ps",
        "kv_bytes",
        "kv_writes",
        "kv_ps",
        "kv_wait_ps",
        "kv_ideal_ps",
        "ttft_ps",
        "tpot_ps",
        "decode_steps",
        "mean_batch",
        "ttft_network_ps",
        "tpot_network_ps",
    ])?;
    let Some(s) = sim.serving() else {
        return w.flush();
    };
    let t = |t: SimTime| {
        if t == SimTime::MAX {
            String::new()
        } else {
            t.0.to_string()
        }
    };
    let replica = |r: u32| {
        if r == u32::MAX {
            String::new()
        } else {
            r.to_string()
        }
    };
    for run in &s.runs {
        for (q, (r, req)) in run.plan.requests.iter().zip(&run.reqs).enumerate() {
            let f = figures(run, q);
            let started = |a: SimTime, b: SimTime| {
                if b == SimTime::MAX {
                    SimTime::MAX
                } else {
                    b.saturating_sub(a)
                }
            };
            let mean_batch = if req.decoded > 0 {
                format!("{:.2}", req.batch_sum as f64 / f64::from(req.decoded))
            } else {
                String::new()
            };
            let or_none = |x: Option<SimTime>| x.map_or(String::new(), |x| x.0.to_string());
            w.write_record([
                run.plan.workload.to_string(),
                q.to_string(),
                r.arrival.0.to_string(),
                r.prompt.to_string(),
                r.output.to_string(),
                replica(req.prefill),
                replica(req.decode),
                t(started(r.arrival, req.prefill_start)),
                t(started(req.prefill_start, req.prefill_end)),
                req.kv_bytes.to_string(),
                req.kv_writes.to_string(),
                or_none(f.as_ref().map(|f| f.kv)),
                or_none(f.as_ref().map(|f| f.kv_wait)),
                t(req.kv_ideal),
                or_none(f.as_ref().map(|f| f.ttft)),
                or_none(f.as_ref().and_then(|f| f.tpot)),
                req.decoded.to_string(),
                mean_batch,
                or_none(f.as_ref().map(|f| f.network)),
                or_none(f.as_ref().and_then(|f| f.tpot_network)),
            ])?;
        }
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let p = Percentiles::of((1..=100).map(f64::from).collect()).unwrap();
        assert_eq!((p.p50, p.p90, p.p99, p.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(p.mean, 50.5);
        assert!(Percentiles::of(Vec::new()).is_none());
    }
}
