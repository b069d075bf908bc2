//! Runs serving workloads (`workload::serving`): requests arrive, wait
//! for a prefill group, are prefilled, send their KV cache to a decode
//! group as RDMA writes on the plan's connections, and are decoded in
//! batches, a token per request per step.
//!
//! A dense model's instance is one group: its prefill is a timer per
//! layer (or per prefill) and its decode step one timer. A mixture of
//! experts' instance runs its steps layer by layer on every GPU: a
//! group's attention, the dispatch of its tokens to their experts' GPUs,
//! the experts, and the combine back, each GPU going on as soon as
//! what it waits for is in (`Step`). Writes between hosts go on the
//! network; copies inside a host take the sender's NVLink share.
//!
//! The writes are transfers made as they start and forgotten once both
//! their ends are done, numbered from `FLOW_BASE` (past every other
//! transfer, pass messages included); what they cost is kept on their
//! request (`Req`) or step, which `requests.csv` reports.
//!
//! Which group takes a request is decided as the run goes, from the
//! load each has then: one state for the whole fabric, so a run with
//! serving is not cut into partitions (`engine::parallel::plan`).

use super::{Due, FlowState, Kernel, Runtime};
use crate::nic::transport::packets_of;
use crate::topology::{FlowId, GpuId};
use crate::units::SimTime;
use crate::workload::serving::{A2a, KvMode, Routing, Serving, DECODE, PREFILL};
use crate::workload::FlowSpec;
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;

/// The first number of serving transfers.
pub const FLOW_BASE: u32 = 1 << 30;

/// What a serving timer is for (`Due::Serve`'s low bits).
const ARRIVAL: u32 = 0;
const INSTANCE: u32 = 1;
const GPU: u32 = 2;
/// An idle instance's scheduler takes what is ready, once everything
/// else due at this instant has happened (`engine::Event::Serve` keys it
/// after the others): requests that arrive, or whose caches land,
/// together go in one step.
pub const START: u32 = 3;

pub use crate::workload::serving::MAX_IDS;

/// Every serving workload of the run, and their writes in flight.
#[derive(Default)]
pub struct ServingState {
    pub runs: Vec<Run>,
    pub(crate) live: HashMap<u32, Live>,
    next_flow: u32,
    /// Requests not yet done, in every run.
    left: u64,
    /// Writes done (received and acknowledged).
    pub writes_done: u64,
}

/// One serving workload as it runs.
pub struct Run {
    pub plan: Serving,
    pub reqs: Vec<Req>,
    /// [prefill, decode] instances.
    insts: [Vec<Inst>; 2],
    /// Each connection's first QP.
    first_qp: Vec<u32>,
    /// QPs and rate cap of its writes.
    qps: u32,
    rate: Option<crate::units::Rate>,
    /// Where its requests, instances and GPUs start in the timers'
    /// numbers.
    base: (u32, u32, u32),
    /// The next request to arrive.
    next: u32,
    /// Decode steps done, and what the network added to them.
    pub steps: u64,
}

/// A request's times and what its KV cache cost.
#[derive(Clone, Debug)]
pub struct Req {
    /// Its prefill and decode groups, numbered over their pool's
    /// instances.
    pub prefill: u32,
    pub decode: u32,
    pub prefill_start: SimTime,
    pub prefill_end: SimTime,
    /// From its first KV write's start to its last's delivery.
    pub kv_start: SimTime,
    pub kv_end: SimTime,
    pub kv_bytes: u64,
    pub kv_writes: u32,
    /// The longest ideal time (alone on an idle fabric) of the writes
    /// sent when its prefill ended: what the cache's tail takes at best.
    pub kv_ideal: SimTime,
    kv_left: u32,
    /// Its first token reaches the user once its cache is in at the
    /// decode group; its last when the decode step making it ends.
    pub first_token: SimTime,
    pub last_token: SimTime,
    /// Tokens made by decode steps so far.
    pub decoded: u32,
    /// Over the decode steps it was in: their groups' batches summed,
    /// and what the network added to them.
    pub batch_sum: u64,
    pub step_network: SimTime,
}

impl Default for Req {
    fn default() -> Self {
        Req {
            prefill: u32::MAX,
            decode: u32::MAX,
            prefill_start: SimTime::MAX,
            prefill_end: SimTime::MAX,
            kv_start: SimTime::MAX,
            kv_end: SimTime::MAX,
            kv_bytes: 0,
            kv_writes: 0,
            kv_ideal: SimTime::ZERO,
            kv_left: 0,
            first_token: SimTime::MAX,
            last_token: SimTime::MAX,
            decoded: 0,
            batch_sum: 0,
            step_network: SimTime::ZERO,
        }
    }
}

/// An attention group: a prefill's queue, or a decode's batch.
#[derive(Default)]
struct Group {
    queue: VecDeque<u32>,
    /// Prompt tokens queued or being prefilled.
    tokens: u64,
    /// The request being prefilled (its step's).
    current: Option<u32>,
    running: Vec<u32>,
    waiting: VecDeque<u32>,
    /// Requests sent to it and not yet done.
    load: u32,
}

#[derive(Default)]
struct Inst {
    groups: Vec<Group>,
    /// A step under way (a dense prefill: the layer next done), or
    /// about to start at this instant's end.
    busy: bool,
    starting: bool,
    layer: u32,
    /// Steps begun.
    steps: u64,
    step: Option<Box<Step>>,
}

/// Where a GPU of a layered step is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Its group's attention (and dense MLP, or shared experts) of the
    /// layer.
    Attention,
    /// Waiting for the dispatch's or the combine's copies.
    Dispatched,
    Experts,
    Combined,
    /// The output layer.
    Head,
    Done,
}

/// A mixture of experts' step on one instance, layer by layer.
struct Step {
    started: SimTime,
    /// Each group's tokens, and (decoding) its cached tokens.
    tokens: Vec<u32>,
    context: Vec<Option<u64>>,
    /// Per GPU: its layer and stage.
    layer: Vec<u32>,
    stage: Vec<Stage>,
    /// Per layer with experts: where its copies go.
    routes: Vec<Routing>,
    /// Per (GPU, phase 2 l + combine): network writes still to land,
    /// NVLink copies not yet sent, and when those sent are in.
    pending: HashMap<(u32, u32), (u32, u32, SimTime)>,
    /// The step on an idle network: its compute, and per phase its
    /// longest copy or write alone.
    compute: SimTime,
    phase_ideal: HashMap<u32, SimTime>,
    done: u32,
}

/// What a write in flight is for.
#[derive(Clone, Copy)]
enum Purpose {
    /// Request `req`'s KV cache.
    Kv(u32),
    /// A copy of `pool`'s instance `inst`'s step for its GPU `gpu`, in
    /// phase `phase` (2 l, + 1 for the combine).
    Copy {
        pool: u8,
        inst: u32,
        gpu: u32,
        phase: u32,
    },
}

pub(crate) struct Live {
    pub flow: FlowState,
    run: u32,
    purpose: Purpose,
    received: bool,
    acked: bool,
}

impl ServingState {
    /// Whether every request is done and every write acknowledged.
    pub fn done(&self) -> bool {
        self.left == 0 && self.live.is_empty()
    }

    pub fn is_serving_flow(f: FlowId) -> bool {
        f.0 >= FLOW_BASE
    }

    /// Writes made so far, and their KV bytes.
    pub fn writes_made(&self) -> u64 {
        u64::from(self.next_flow)
    }

    pub fn bytes_made(&self) -> u64 {
        self.runs
            .iter()
            .flat_map(|r| &r.reqs)
            .map(|q| q.kv_bytes)
            .sum()
    }

    /// When the last token of any request, or its cache, was done.
    pub fn last_done(&self) -> SimTime {
        let tokens = self
            .runs
            .iter()
            .flat_map(|r| &r.reqs)
            .map(|q| match q.last_token {
                SimTime::MAX => q.kv_end.min(q.prefill_end),
                t => t,
            });
        tokens
            .filter(|&t| t != SimTime::MAX)
            .max()
            .unwrap_or(SimTime::ZERO)
    }
}

impl Run {
    /// The GPU `g` of `pool`'s instance `i` belongs to which of its
    /// groups.
    fn group_of(&self, pool: usize, g: u32) -> usize {
        (g / self.plan.pool(pool).tp) as usize
    }

    /// The timer id of GPU `g` of `pool`'s instance `i`.
    fn gpu_id(&self, pool: usize, i: u32, g: u32) -> u32 {
        let p = self.plan.config.prefill;
        let before = match pool {
            PREFILL => 0,
            _ => p.instances * p.gpus,
        };
        self.base.2 + before + i * self.plan.pool(pool).gpus + g
    }

    fn inst_id(&self, pool: usize, i: u32) -> u32 {
        let before = match pool {
            PREFILL => 0,
            _ => self.plan.config.prefill.instances,
        };
        self.base.1 + before + i
    }
}

impl Runtime {
    /// Starts the serving workloads: `first_qp` holds each plan's
    /// connections' first QPs.
    pub fn set_up_serving(
        &mut self,
        k: &mut dyn Kernel,
        plans: Vec<Serving>,
        first_qp: Vec<Vec<u32>>,
    ) {
        let mut s = ServingState::default();
        let mut base = (0u32, 0u32, 0u32);
        for (plan, first_qp) in plans.into_iter().zip(first_qp) {
            let w = &k.scenario().workloads[plan.workload as usize];
            let (qps, rate) = (w.qps, w.rate);
            let n = plan.requests.len() as u32;
            s.left += u64::from(n);
            let insts = [PREFILL, DECODE].map(|pool| {
                let c = plan.pool(pool);
                (0..c.instances)
                    .map(|_| Inst {
                        groups: (0..c.groups()).map(|_| Group::default()).collect(),
                        ..Inst::default()
                    })
                    .collect::<Vec<_>>()
            });
            let (p, d) = (plan.config.prefill, plan.config.decode);
            let run = Run {
                reqs: vec![Req::default(); n as usize],
                insts,
                first_qp,
                qps,
                rate,
                base,
                next: 0,
                steps: 0,
                plan,
            };
            base.0 += n;
            base.1 += p.instances + d.instances;
            base.2 += p.instances * p.gpus + d.instances * d.gpus;
            s.runs.push(run);
        }
        for r in 0..s.runs.len() {
            arrive_next(&mut s, k, r);
        }
        self.serving = Some(Box::new(s));
    }

    pub(crate) fn serve_due(&mut self, k: &mut dyn Kernel, code: u32) {
        let Some(mut s) = self.serving.take() else {
            return;
        };
        let (kind, id) = (code & 3, code >> 2);
        let base = |run: &Run| match kind {
            ARRIVAL => run.base.0,
            INSTANCE | START => run.base.1,
            _ => run.base.2,
        };
        let r = s
            .runs
            .iter()
            .rposition(|run| id >= base(run))
            .expect("a serving run");
        let id = id - base(&s.runs[r]);
        let cache = &mut self.ideal_cache;
        match kind {
            ARRIVAL => arrive(&mut s, k, r, id),
            START => {
                let p = s.runs[r].plan.config.prefill.instances;
                let (pool, i) = match id.checked_sub(p) {
                    None => (PREFILL, id),
                    Some(i) => (DECODE, i),
                };
                s.runs[r].insts[pool][i as usize].starting = false;
                if !s.runs[r].insts[pool][i as usize].busy {
                    match pool {
                        PREFILL => prefill_next(&mut s, k, r, i),
                        _ => decode_next(&mut s, k, r, i),
                    }
                }
            }
            INSTANCE => {
                let p = s.runs[r].plan.config.prefill.instances;
                if id < p {
                    prefill_timer(&mut s, k, r, id, cache);
                } else {
                    step_over(&mut s, k, r, DECODE, id - p, SimTime::ZERO);
                }
            }
            _ => {
                let c = s.runs[r].plan.config.prefill;
                let (pool, id) = match id.checked_sub(c.instances * c.gpus) {
                    None => (PREFILL, id),
                    Some(id) => (DECODE, id),
                };
                let n = s.runs[r].plan.pool(pool).gpus;
                gpu_timer(&mut s, k, r, pool, id / n, id % n, cache);
            }
        }
        self.serving = Some(s);
    }

    /// A serving transfer's state.
    pub(crate) fn serving_flow(&mut self, f: FlowId) -> &mut FlowState {
        &mut self
            .serving
            .as_mut()
            .and_then(|s| s.live.get_mut(&f.0))
            .expect("a serving write in flight")
            .flow
    }

    /// Every byte of write `f` is at its receiver.
    pub(crate) fn serving_received(&mut self, k: &mut dyn Kernel, f: FlowId) {
        let Some(mut s) = self.serving.take() else {
            return;
        };
        let l = s.live.get_mut(&f.0).expect("a serving write in flight");
        l.received = true;
        let (run, purpose) = (l.run as usize, l.purpose);
        if l.acked {
            s.live.remove(&f.0);
            s.writes_done += 1;
        }
        match purpose {
            Purpose::Kv(q) => {
                let req = &mut s.runs[run].reqs[q as usize];
                req.kv_left -= 1;
                if req.kv_left == 0 && req.prefill_end != SimTime::MAX {
                    cache_in(&mut s, k, run, q);
                }
            }
            Purpose::Copy {
                pool,
                inst,
                gpu,
                phase,
            } => {
                let pool = pool as usize;
                let step = step_mut(&mut s, run, pool, inst);
                step.pending.get_mut(&(gpu, phase)).expect("a phase").0 -= 1;
                check_in(&mut s, k, run, pool, inst, gpu);
            }
        }
        self.serving = Some(s);
    }

    /// Write `f`'s sender has every acknowledgement.
    pub(crate) fn serving_acked(&mut self, f: FlowId) {
        let Some(s) = self.serving.as_mut() else {
            return;
        };
        let Some(l) = s.live.get_mut(&f.0) else {
            return;
        };
        l.acked = true;
        if l.received {
            s.live.remove(&f.0);
            s.writes_done += 1;
        }
    }

    /// Whether the serving workloads (if any) are over.
    pub fn serving_done(&self) -> bool {
        self.serving.as_ref().is_none_or(|s| s.done())
    }
}

fn step_mut(s: &mut ServingState, r: usize, pool: usize, inst: u32) -> &mut Step {
    s.runs[r].insts[pool][inst as usize]
        .step
        .as_deref_mut()
        .expect("a step under way")
}

/// Sets the timer of run `r`'s next arrival.
fn arrive_next(s: &mut ServingState, k: &mut dyn Kernel, r: usize) {
    let run = &mut s.runs[r];
    if let Some(q) = run.plan.requests.get(run.next as usize) {
        let id = run.base.0 + run.next;
        k.at(q.arrival, Due::Serve(id << 2 | ARRIVAL));
        run.next += 1;
    }
}

/// The group of `pool` with the least of `load`, the first of equals:
/// (instance, group).
fn least(run: &Run, pool: usize, load: impl Fn(&Group) -> u64) -> (u32, u32) {
    let mut best = (u64::MAX, 0, 0);
    for (i, inst) in run.insts[pool].iter().enumerate() {
        for (j, g) in inst.groups.iter().enumerate() {
            let l = load(g);
            if l < best.0 {
                best = (l, i as u32, j as u32);
            }
        }
    }
    (best.1, best.2)
}

/// `pool`'s instance `i` has something new: if idle, its scheduler
/// starts a step once this instant's other events are over.
fn wake(run: &mut Run, k: &mut dyn Kernel, pool: usize, i: u32) {
    let id = run.inst_id(pool, i);
    let inst = &mut run.insts[pool][i as usize];
    if !inst.busy && !inst.starting {
        inst.starting = true;
        k.at(k.now(), Due::Serve(id << 2 | START));
    }
}

/// Request `q` arrives: it queues at the prefill group with the fewest
/// prompt tokens to go.
fn arrive(s: &mut ServingState, k: &mut dyn Kernel, r: usize, q: u32) {
    arrive_next(s, k, r);
    let run = &mut s.runs[r];
    let prompt = u64::from(run.plan.requests[q as usize].prompt);
    let (i, j) = least(run, PREFILL, |g| g.tokens);
    let g = &mut run.insts[PREFILL][i as usize].groups[j as usize];
    g.queue.push_back(q);
    g.tokens += prompt;
    wake(run, k, PREFILL, i);
}

/// Prefill instance `i` starts its next step: each group takes its next
/// request, whose cache goes to the decode group with the fewest
/// requests.
fn prefill_next(s: &mut ServingState, k: &mut dyn Kernel, r: usize, i: u32) {
    let now = k.now();
    let run = &mut s.runs[r];
    let groups = run.insts[PREFILL][i as usize].groups.len();
    let mut any = false;
    for j in 0..groups {
        let Some(q) = run.insts[PREFILL][i as usize].groups[j].queue.pop_front() else {
            continue;
        };
        any = true;
        let (di, dj) = least(run, DECODE, |g| u64::from(g.load));
        let dec = run.plan.config.decode.groups();
        run.insts[DECODE][di as usize].groups[dj as usize].load += 1;
        let pre = run.plan.config.prefill.groups();
        let req = &mut run.reqs[q as usize];
        req.prefill = i * pre + j as u32;
        req.decode = di * dec + dj;
        req.prefill_start = now;
        run.insts[PREFILL][i as usize].groups[j].current = Some(q);
    }
    let inst = &mut run.insts[PREFILL][i as usize];
    inst.busy = any;
    if !any {
        return;
    }
    inst.layer = 0;
    inst.steps += 1;
    if run.plan.layered() {
        return step_start(s, k, r, PREFILL, i);
    }
    let q = inst.groups[0].current.expect("a request");
    let layer = run.plan.prefill_layer(run.plan.requests[q as usize].prompt);
    let layers = match run.plan.config.kv {
        KvMode::Layer => 1,
        KvMode::Whole => run.plan.config.model.layers,
    };
    let id = run.inst_id(PREFILL, i);
    k.at(
        now + SimTime(layer.0 * layers),
        Due::Serve(id << 2 | INSTANCE),
    );
}

/// A dense prefill on instance `i` has made a layer (or, sending whole
/// caches, all of them): its part of the cache goes, and the prefill
/// goes on or ends.
fn prefill_timer(
    s: &mut ServingState,
    k: &mut dyn Kernel,
    r: usize,
    i: u32,
    cache: &mut super::ideal::IdealCache,
) {
    let run = &mut s.runs[r];
    let inst = &run.insts[PREFILL][i as usize];
    let (q, layer) = (inst.groups[0].current.expect("a prefill"), inst.layer);
    let layers = run.plan.config.model.layers as u32;
    let (sent, next) = match run.plan.config.kv {
        KvMode::Layer => (1, layer + 1),
        KvMode::Whole => (layers, layers),
    };
    let last = next == layers;
    let tp = run.plan.config.prefill.tp;
    for g in 0..tp {
        send_cache(s, k, r, q, g, u64::from(sent), last, cache);
    }
    let run = &mut s.runs[r];
    if !last {
        run.insts[PREFILL][i as usize].layer = next;
        let id = run.inst_id(PREFILL, i);
        let at = k.now() + run.plan.prefill_layer(run.plan.requests[q as usize].prompt);
        k.at(at, Due::Serve(id << 2 | INSTANCE));
        return;
    }
    prefill_over(s, k, r, i);
}

/// Prefill instance `i`'s step is over: its requests' prefills end, and
/// it takes the next.
fn prefill_over(s: &mut ServingState, k: &mut dyn Kernel, r: usize, i: u32) {
    let now = k.now();
    let run = &mut s.runs[r];
    let mut ready = Vec::new();
    for g in &mut run.insts[PREFILL][i as usize].groups {
        if let Some(q) = g.current.take() {
            g.tokens -= u64::from(run.plan.requests[q as usize].prompt);
            let req = &mut run.reqs[q as usize];
            req.prefill_end = now;
            if req.kv_left == 0 {
                ready.push(q);
            }
        }
    }
    for q in ready {
        cache_in(s, k, r, q);
    }
    s.runs[r].insts[PREFILL][i as usize].busy = false;
    prefill_next(s, k, r, i);
}

/// GPU `g` (its rank in its prefill group) sends its part of request
/// `q`'s cache of `layers` layers to the decode group's GPUs, a write
/// per pair; `last`: the prefill is over.
#[allow(clippy::too_many_arguments)]
fn send_cache(
    s: &mut ServingState,
    k: &mut dyn Kernel,
    r: usize,
    q: u32,
    g: u32,
    layers: u64,
    last: bool,
    cache: &mut super::ideal::IdealCache,
) {
    let run = &s.runs[r];
    let req = &run.reqs[q as usize];
    let prompt = u64::from(run.plan.requests[q as usize].prompt);
    let (p, d) = (run.plan.config.prefill, run.plan.config.decode);
    let (pi, pj) = (req.prefill / p.groups(), req.prefill % p.groups());
    let (di, dj) = (req.decode / d.groups(), req.decode % d.groups());
    let pg = &run.plan.pools[PREFILL][pi as usize][(pj * p.tp) as usize..];
    let dg = &run.plan.pools[DECODE][di as usize][(dj * d.tp) as usize..];
    let writes: Vec<(GpuId, GpuId, u64)> = run
        .plan
        .pairs
        .iter()
        .filter(|x| x.0 == g)
        .map(|&(a, b, per)| (pg[a as usize], dg[b as usize], per * prompt * layers))
        .collect();
    for (src, dst, bytes) in writes {
        let ideal = write(s, k, r, (src, dst, bytes), Purpose::Kv(q), cache);
        let req = &mut s.runs[r].reqs[q as usize];
        req.kv_left += 1;
        req.kv_writes += 1;
        req.kv_bytes += bytes;
        req.kv_start = req.kv_start.min(k.now());
        if last {
            req.kv_ideal = req.kv_ideal.max(ideal);
        }
    }
}

/// Starts a write of `bytes` from `src` to `dst` on their connection:
/// its ideal time.
fn write(
    s: &mut ServingState,
    k: &mut dyn Kernel,
    r: usize,
    (src, dst, bytes): (GpuId, GpuId, u64),
    purpose: Purpose,
    cache: &mut super::ideal::IdealCache,
) -> SimTime {
    let run = &s.runs[r];
    let topo = k.topo();
    let spec = FlowSpec {
        src,
        dst,
        src_nic: topo.gpus[src.idx()].nic,
        dst_nic: topo.gpus[dst.idx()].nic,
        bytes,
        start: k.now(),
        qps: run.qps,
        rate: run.rate,
        workload: run.plan.workload,
        gated: false,
        conn: None,
    };
    let first = run.first_qp[run.plan.conn(src, dst) as usize];
    let n = spec.n_qps();
    let mtu = k.scenario().transport.mtu;
    let pkts = (0..n)
        .map(|i| packets_of(super::flow::share(bytes, n, i), mtu))
        .sum();
    let f = FLOW_BASE + s.next_flow;
    s.next_flow += 1;
    let mut flow = FlowState::new(spec, first, n, true, pkts);
    flow.ideal_fct = k.ideal_and_work(&flow, f, cache).0;
    let ideal = flow.ideal_fct;
    s.live.insert(
        f,
        Live {
            flow,
            run: r as u32,
            purpose,
            received: false,
            acked: false,
        },
    );
    k.start(FlowId(f));
    ideal
}

/// Request `q`'s whole cache is at its decode group: its first token
/// goes out, and it joins the group's next step.
fn cache_in(s: &mut ServingState, k: &mut dyn Kernel, r: usize, q: u32) {
    let now = k.now();
    let run = &mut s.runs[r];
    let groups = run.plan.config.decode.groups();
    let req = &mut run.reqs[q as usize];
    req.kv_end = now;
    req.first_token = now;
    let (i, j) = (
        (req.decode / groups) as usize,
        (req.decode % groups) as usize,
    );
    if run.plan.requests[q as usize].output <= 1 {
        req.last_token = now;
        run.insts[DECODE][i].groups[j].load -= 1;
        s.left -= 1;
        return;
    }
    run.insts[DECODE][i].groups[j].waiting.push_back(q);
    wake(run, k, DECODE, i as u32);
}

/// Decode instance `i` starts a step with the requests each group runs
/// and those waiting, up to its batch limit; it rests if none has any.
fn decode_next(s: &mut ServingState, k: &mut dyn Kernel, r: usize, i: u32) {
    let run = &mut s.runs[r];
    let max = run.plan.config.max_batch as usize;
    let inst = &mut run.insts[DECODE][i as usize];
    for g in &mut inst.groups {
        while g.running.len() < max {
            match g.waiting.pop_front() {
                Some(q) => g.running.push(q),
                None => break,
            }
        }
    }
    inst.busy = inst.groups.iter().any(|g| !g.running.is_empty());
    if !inst.busy {
        return;
    }
    inst.steps += 1;
    if run.plan.layered() {
        return step_start(s, k, r, DECODE, i);
    }
    let running = &run.insts[DECODE][i as usize].groups[0].running;
    let (batch, context) = (running.len() as u32, context_of(run, running));
    let id = run.inst_id(DECODE, i);
    let at = k.now() + run.plan.decode_step(batch, context);
    k.at(at, Due::Serve(id << 2 | INSTANCE));
}

/// The tokens requests `qs` hold in their caches.
fn context_of(run: &Run, qs: &[u32]) -> u64 {
    qs.iter()
        .map(|&q| {
            u64::from(run.plan.requests[q as usize].prompt + 1 + run.reqs[q as usize].decoded)
        })
        .sum()
}

/// `pool`'s instance `i`'s step is over (a decode's: each request in it
/// has one more token, those with all of theirs are done; `network`:
/// what the network added to it), and the next starts.
fn step_over(
    s: &mut ServingState,
    k: &mut dyn Kernel,
    r: usize,
    pool: usize,
    i: u32,
    network: SimTime,
) {
    if pool == PREFILL {
        return prefill_over(s, k, r, i);
    }
    let now = k.now();
    let run = &mut s.runs[r];
    run.steps += 1;
    let mut finished = 0;
    let inst = &mut run.insts[DECODE][i as usize];
    for g in &mut inst.groups {
        let batch = g.running.len() as u64;
        let mut done = 0;
        g.running.retain(|&q| {
            let req = &mut run.reqs[q as usize];
            req.decoded += 1;
            req.batch_sum += batch;
            req.step_network += network;
            let over = req.decoded + 1 >= run.plan.requests[q as usize].output;
            if over {
                req.last_token = now;
                done += 1;
            }
            !over
        });
        g.load -= done;
        finished += done;
    }
    s.left -= u64::from(finished);
    decode_next(s, k, r, i);
}

/// A layered step starts on `pool`'s instance `i`: where its tokens go
/// in every layer with experts is drawn, and every GPU starts its
/// group's first attention.
fn step_start(s: &mut ServingState, k: &mut dyn Kernel, r: usize, pool: usize, i: u32) {
    let now = k.now();
    let run = &mut s.runs[r];
    let c = run.plan.pool(pool);
    let inst = &run.insts[pool][i as usize];
    let (tokens, context): (Vec<u32>, Vec<Option<u64>>) = inst
        .groups
        .iter()
        .map(|g| match pool {
            PREFILL => (
                g.current
                    .map_or(0, |q| run.plan.requests[q as usize].prompt),
                None,
            ),
            _ => (g.running.len() as u32, Some(context_of(run, &g.running))),
        })
        .unzip();
    let m = &run.plan.config.model;
    let n = c.gpus;
    let mut routes = Vec::new();
    let mut pending = HashMap::default();
    let mut compute = SimTime::ZERO;
    for l in 0..m.layers {
        let attention = (0..tokens.len())
            .map(|j| {
                run.plan
                    .attention(pool, l, u64::from(tokens[j]), context[j])
            })
            .max()
            .unwrap_or(SimTime::ZERO);
        compute += attention;
        if !m.is_moe(l) {
            continue;
        }
        let rt = run.plan.route(pool, i, inst.steps, l, &tokens);
        let mut most = SimTime::ZERO;
        for g in 0..n {
            most = most.max(
                run.plan
                    .experts(pool, rt.pairs[g as usize], rt.touched[g as usize]),
            );
            for combine in [0, 1] {
                let phase = 2 * l as u32 + combine;
                let (mut net, mut local) = (0, 0);
                for o in 0..n {
                    let copies = rt.sent(n, combine == 1, o, g);
                    if copies == 0 || o == g {
                        continue;
                    }
                    if same_host(k, run, pool, i, o, g) {
                        local += 1;
                    } else {
                        net += match c.a2a {
                            A2a::Nccl => 1,
                            A2a::LowLatency => copies,
                        };
                    }
                }
                pending.insert((g, phase), (net, local, SimTime::ZERO));
            }
        }
        compute += most;
        routes.push(rt);
    }
    let head = (0..tokens.len())
        .map(|j| run.plan.output_layer(pool, u64::from(tokens[j])))
        .max()
        .unwrap_or(SimTime::ZERO);
    compute += head;
    let step = Step {
        started: now,
        tokens,
        context,
        layer: vec![0; n as usize],
        stage: vec![Stage::Attention; n as usize],
        routes,
        pending,
        compute,
        phase_ideal: HashMap::default(),
        done: 0,
    };
    for g in 0..n {
        let j = run.group_of(pool, g);
        let at = now
            + run
                .plan
                .attention(pool, 0, u64::from(step.tokens[j]), step.context[j]);
        k.at(at, Due::Serve(run.gpu_id(pool, i, g) << 2 | GPU));
    }
    run.insts[pool][i as usize].step = Some(Box::new(step));
}

/// Whether GPUs `a` and `b` of `pool`'s instance `i` share a host.
fn same_host(k: &dyn Kernel, run: &Run, pool: usize, i: u32, a: u32, b: u32) -> bool {
    let gpus = &run.plan.pools[pool][i as usize];
    let topo = k.topo();
    topo.gpus[gpus[a as usize].idx()].host == topo.gpus[gpus[b as usize].idx()].host
}

/// GPU `g` of `pool`'s instance `i` is done with what it was doing (or
/// what it waited for is in).
#[allow(clippy::too_many_arguments)]
fn gpu_timer(
    s: &mut ServingState,
    k: &mut dyn Kernel,
    r: usize,
    pool: usize,
    i: u32,
    g: u32,
    cache: &mut super::ideal::IdealCache,
) {
    let now = k.now();
    let run = &s.runs[r];
    let m = &run.plan.config.model;
    let layers = m.layers as u32;
    let step = run.insts[pool][i as usize].step.as_deref().expect("a step");
    let (l, stage) = (step.layer[g as usize], step.stage[g as usize]);
    let j = run.group_of(pool, g);
    match stage {
        Stage::Attention => {
            // A prefill's layer is in: its part of the cache goes.
            if pool == PREFILL && run.plan.config.kv == KvMode::Layer {
                if let Some(q) = run.insts[PREFILL][i as usize].groups[j].current {
                    let rank = g % run.plan.config.prefill.tp;
                    send_cache(s, k, r, q, rank, 1, l + 1 == layers, cache);
                }
            }
            if s.runs[r].plan.config.model.is_moe(u64::from(l)) {
                send_copies(s, k, r, (pool, i, g), 2 * l, cache);
                set_stage(s, r, pool, i, g, Stage::Dispatched);
                check_in(s, k, r, pool, i, g);
            } else {
                next_layer(s, k, r, pool, i, g);
            }
        }
        Stage::Dispatched => {
            let rt = &step.routes[moe_index(run, l)];
            let at = now
                + run
                    .plan
                    .experts(pool, rt.pairs[g as usize], rt.touched[g as usize]);
            set_stage(s, r, pool, i, g, Stage::Experts);
            let id = s.runs[r].gpu_id(pool, i, g);
            k.at(at, Due::Serve(id << 2 | GPU));
        }
        Stage::Experts => {
            send_copies(s, k, r, (pool, i, g), 2 * l + 1, cache);
            set_stage(s, r, pool, i, g, Stage::Combined);
            check_in(s, k, r, pool, i, g);
        }
        Stage::Combined => next_layer(s, k, r, pool, i, g),
        Stage::Head => {
            set_stage(s, r, pool, i, g, Stage::Done);
            let n = s.runs[r].plan.pool(pool).gpus;
            let step = step_mut(s, r, pool, i);
            step.done += 1;
            if step.done == n {
                let step = s.runs[r].insts[pool][i as usize]
                    .step
                    .take()
                    .expect("a step");
                if pool == PREFILL && s.runs[r].plan.config.kv == KvMode::Whole {
                    let groups = s.runs[r].insts[PREFILL][i as usize].groups.len();
                    let tp = s.runs[r].plan.config.prefill.tp;
                    let layers = u64::from(layers);
                    for j in 0..groups {
                        if let Some(q) = s.runs[r].insts[PREFILL][i as usize].groups[j].current {
                            for rank in 0..tp {
                                send_cache(s, k, r, q, rank, layers, true, cache);
                            }
                        }
                    }
                }
                let ideal =
                    step.compute + step.phase_ideal.values().fold(SimTime::ZERO, |a, &b| a + b);
                let network = (now - step.started).saturating_sub(ideal);
                step_over(s, k, r, pool, i, network);
            }
        }
        Stage::Done => {}
    }
}

fn set_stage(s: &mut ServingState, r: usize, pool: usize, i: u32, g: u32, stage: Stage) {
    step_mut(s, r, pool, i).stage[g as usize] = stage;
}

/// GPU `g` is done with layer `l`: the next layer's attention starts,
/// or the output layer after the last.
fn next_layer(s: &mut ServingState, k: &mut dyn Kernel, r: usize, pool: usize, i: u32, g: u32) {
    let now = k.now();
    let run = &mut s.runs[r];
    let layers = run.plan.config.model.layers as u32;
    let j = run.group_of(pool, g);
    let id = run.gpu_id(pool, i, g);
    let plan = &run.plan;
    let step = run.insts[pool][i as usize]
        .step
        .as_deref_mut()
        .expect("a step");
    let l = step.layer[g as usize] + 1;
    let (tokens, context) = (u64::from(step.tokens[j]), step.context[j]);
    let at = if l < layers {
        step.layer[g as usize] = l;
        step.stage[g as usize] = Stage::Attention;
        now + plan.attention(pool, u64::from(l), tokens, context)
    } else {
        step.stage[g as usize] = Stage::Head;
        now + plan.output_layer(pool, tokens)
    };
    k.at(at, Due::Serve(id << 2 | GPU));
}

/// GPU `g` sends its copies of phase `phase` (2 l: the dispatch of its
/// tokens to their experts; 2 l + 1: the experts' results back): a
/// write per peer in another host (one per copy with the low-latency
/// pattern), and its copies to peers in its host over NVLink, landing
/// once its share of NVLink has carried them all.
fn send_copies(
    s: &mut ServingState,
    k: &mut dyn Kernel,
    r: usize,
    (pool, i, g): (usize, u32, u32),
    phase: u32,
    cache: &mut super::ideal::IdealCache,
) {
    let now = k.now();
    let run = &s.runs[r];
    let n = run.plan.pool(pool).gpus;
    let combine = phase % 2 == 1;
    let l = phase / 2;
    let idx = moe_index(run, l);
    let step = run.insts[pool][i as usize].step.as_deref().expect("a step");
    let rt = &step.routes[idx];
    let per = run.plan.copy_bytes(combine);
    let gpus = &run.plan.pools[pool][i as usize];
    let mut net = Vec::new();
    let mut local = Vec::new();
    for o in 0..n {
        let copies = rt.sent(n, combine, g, o);
        if copies == 0 || o == g {
            continue;
        }
        if same_host(k, run, pool, i, g, o) {
            local.push((o, u64::from(copies) * per));
        } else {
            match run.plan.pool(pool).a2a {
                A2a::Nccl => net.push((o, u64::from(copies) * per)),
                A2a::LowLatency => net.extend((0..copies).map(|_| (o, per))),
            }
        }
    }
    let (rate, latency) = run.plan.nvlink;
    let out: u64 = local.iter().map(|x| x.1).sum();
    let landed =
        now + latency + SimTime((out as u128 * 1_000_000_000_000 / u128::from(rate.max(1))) as u64);
    let mut ideal = if local.is_empty() {
        SimTime::ZERO
    } else {
        landed - now
    };
    let src = gpus[g as usize];
    let dsts: Vec<(GpuId, u32, u64)> = net.iter().map(|&(o, b)| (gpus[o as usize], o, b)).collect();
    for (dst, o, bytes) in dsts {
        let purpose = Purpose::Copy {
            pool: pool as u8,
            inst: i,
            gpu: o,
            phase,
        };
        ideal = ideal.max(write(s, k, r, (src, dst, bytes), purpose, cache));
    }
    let step = step_mut(s, r, pool, i);
    let e = step.phase_ideal.entry(phase).or_insert(SimTime::ZERO);
    *e = (*e).max(ideal);
    for &(o, _) in &local {
        let p = step.pending.get_mut(&(o, phase)).expect("a phase");
        p.1 -= 1;
        p.2 = p.2.max(landed);
    }
    for (o, _) in local {
        check_in(s, k, r, pool, i, o);
    }
}

/// The place of layer `l` among the layers with experts.
fn moe_index(run: &Run, l: u32) -> usize {
    (l as u64 - run.plan.config.model.dense_layers) as usize
}

/// If GPU `g` waits for a phase's copies and they are all in (or will
/// be, over NVLink, at a known time), it goes on then.
fn check_in(s: &mut ServingState, k: &mut dyn Kernel, r: usize, pool: usize, i: u32, g: u32) {
    let now = k.now();
    let id = s.runs[r].gpu_id(pool, i, g);
    let step = step_mut(s, r, pool, i);
    let (l, stage) = (step.layer[g as usize], step.stage[g as usize]);
    let phase = match stage {
        Stage::Dispatched => 2 * l,
        Stage::Combined => 2 * l + 1,
        _ => return,
    };
    // Already in, and going on at a timer.
    let Some(&(net, local, landed)) = step.pending.get(&(g, phase)) else {
        return;
    };
    if net > 0 || local > 0 {
        return;
    }
    step.pending.remove(&(g, phase));
    // It goes on at `landed` (or now), as a timer in its stage.
    k.at(landed.max(now), Due::Serve(id << 2 | GPU));
}
