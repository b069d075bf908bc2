//! `kind = "serving"`: a language model served on the fabric, with
//! prefill and decode on separate pools of GPUs (disaggregated serving).
//!
//! A request arrives, waits for a prefill replica, is prefilled there,
//! and its KV cache moves to a decode replica as RDMA writes, from each
//! prefill GPU to the decode GPUs that hold the same KV heads (layer by
//! layer as the prefill makes them, or whole once it is done). The
//! decode replica batches the requests whose caches are in (continuous
//! batching) and makes one token per request per step.
//!
//! This file holds the plan and its arithmetic (the KV cache's size and
//! who sends what to whom, the roofline's prefill and step times, the
//! requests); `runtime::serving` runs it.

use super::model::Gpu;
use crate::rng::Stream;
use crate::topology::{GpuId, Topology};
use crate::units::SimTime;

/// The served model's shape, as far as serving needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServeModel {
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub ffn: u64,
    pub vocab: u64,
    /// Gated MLP (three matrices) or not (two).
    pub gated: bool,
    /// Multi-head latent attention: the cache holds this many values per
    /// token and layer, the same on every tensor-parallel rank, instead
    /// of keys and values per KV head.
    pub kv_latent: Option<u64>,
    /// Bytes of a weight and of a cached key or value.
    pub param_bytes: u64,
    pub kv_bytes: u64,
    /// Bytes of an activation (the tensor-parallel all-reduces, the
    /// experts' combine).
    pub act_bytes: u64,
    /// Mixture of experts: routed experts (0: a dense model), those each
    /// token takes, their MLP's width, the shared experts' width (0:
    /// none) and how many layers come first with a dense MLP instead.
    pub experts: u64,
    pub top_k: u64,
    pub expert_ffn: u64,
    pub shared_ffn: u64,
    pub dense_layers: u64,
}

impl ServeModel {
    /// KV-cache bytes of one token in one layer, on the whole model:
    /// 2 x kv_heads x head_dim x kv_bytes (keys and values), or the
    /// latent's kv_latent x kv_bytes.
    pub fn kv_layer_token(&self) -> u64 {
        match self.kv_latent {
            Some(l) => l * self.kv_bytes,
            None => 2 * self.kv_heads * self.head_dim * self.kv_bytes,
        }
    }

    /// KV-cache bytes of one token over every layer.
    pub fn kv_token(&self) -> u64 {
        self.layers * self.kv_layer_token()
    }

    /// Weights of one layer's attention, in parameters: the query and
    /// output projections of every head, the key and value projections
    /// of every KV head.
    pub fn attention_params(&self) -> u64 {
        let q = self.heads * self.head_dim;
        let kv = self.kv_heads * self.head_dim;
        2 * self.hidden * q + 2 * self.hidden * kv
    }

    /// Weights of an MLP `ffn` wide (three matrices gated, else two).
    pub fn mlp_params(&self, ffn: u64) -> u64 {
        (if self.gated { 3 } else { 2 }) * self.hidden * ffn
    }

    /// Weights of one dense layer (attention and MLP), in parameters.
    pub fn layer_params(&self) -> u64 {
        self.attention_params() + self.mlp_params(self.ffn)
    }

    /// Whether layer `l` routes its tokens to experts.
    pub fn is_moe(&self, l: u64) -> bool {
        self.experts > 0 && l >= self.dense_layers
    }

    /// Which GPU of a prefill replica of `tp_p` GPUs sends which part of
    /// the cache to which GPU of a decode replica of `tp_d`: (prefill
    /// rank, decode rank, bytes per token and layer). Each KV head goes
    /// from the first prefill rank holding it to every decode rank that
    /// needs it (a head is split over no ranks: with fewer heads than
    /// ranks, ranks hold copies). A latent cache is on every rank: each
    /// decode rank takes it from the prefill rank of its number modulo
    /// `tp_p`.
    pub fn kv_pairs(&self, tp_p: u64, tp_d: u64) -> Vec<(u32, u32, u64)> {
        let mut out: Vec<(u32, u32, u64)> = Vec::new();
        let mut add = |s: u64, d: u64, b: u64| match out
            .iter_mut()
            .find(|x| (x.0, x.1) == (s as u32, d as u32))
        {
            Some(x) => x.2 += b,
            None => out.push((s as u32, d as u32, b)),
        };
        if let Some(l) = self.kv_latent {
            for d in 0..tp_d {
                add(d % tp_p, d, l * self.kv_bytes);
            }
        } else {
            let head = 2 * self.head_dim * self.kv_bytes;
            for h in 0..self.kv_heads {
                let src = holders(h, self.kv_heads, tp_p)[0];
                for dst in holders(h, self.kv_heads, tp_d) {
                    add(src, dst, head);
                }
            }
        }
        out.sort_unstable();
        out
    }
}

/// The ranks of `tp` holding KV head `h` of `heads`: its share of the
/// heads, or, with fewer heads than ranks, the ranks copying it.
fn holders(h: u64, heads: u64, tp: u64) -> Vec<u64> {
    if heads >= tp {
        vec![h * tp / heads]
    } else {
        (0..tp).filter(|r| r * heads / tp == h).collect()
    }
}

/// When a prefill sends its KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvMode {
    /// Each layer's part as soon as the prefill has made it.
    Layer,
    /// All of it once the prefill is done.
    Whole,
}

/// One request: when it arrives, its prompt and how many tokens it
/// asks for (the first made by the prefill).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub arrival: SimTime,
    pub prompt: u32,
    pub output: u32,
}

/// A count of tokens: fixed, or drawn uniformly from lo..=hi.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tokens(pub u32, pub u32);

impl Tokens {
    fn draw(self, rng: &mut Stream) -> u32 {
        self.0 + rng.below(u64::from(self.1 - self.0) + 1) as u32
    }
}

/// Where requests come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Arrivals {
    /// `count` requests, exponential gaps at `rate` per second from
    /// `start`, their sizes drawn.
    Poisson {
        rate: f64,
        count: u32,
        prompt: Tokens,
        output: Tokens,
    },
    /// Read from a trace file.
    Trace(Vec<Request>),
}

impl Arrivals {
    /// The requests, in arrival order.
    pub fn requests(&self, start: SimTime, rng: &mut Stream) -> Vec<Request> {
        match self {
            Arrivals::Trace(r) => r
                .iter()
                .map(|r| Request {
                    arrival: start + r.arrival,
                    ..*r
                })
                .collect(),
            Arrivals::Poisson {
                rate,
                count,
                prompt,
                output,
            } => {
                let mut t = start.0 as f64;
                (0..*count)
                    .map(|_| {
                        // 1 - u is in (0, 1]: its logarithm is finite.
                        let gap = -(1.0 - rng.unit()).ln() / rate * 1e12;
                        t += gap;
                        Request {
                            arrival: SimTime(t.round() as u64),
                            prompt: prompt.draw(rng),
                            output: output.draw(rng),
                        }
                    })
                    .collect()
            }
        }
    }
}

/// How a pool's instances are cut: `instances` of `gpus` GPUs each,
/// attention in groups of `tp` (a request runs on one group; with more
/// groups than one, their attention runs data-parallel), the experts of
/// a mixture spread over all `gpus` (expert parallelism).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    pub instances: u32,
    pub tp: u32,
    pub gpus: u32,
    /// The pattern of its experts' all-to-alls.
    pub a2a: A2a,
}

impl PoolConfig {
    /// Attention groups per instance.
    pub fn groups(&self) -> u32 {
        self.gpus / self.tp
    }
}

/// The message pattern of the experts' dispatch and combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum A2a {
    /// One write per pair of GPUs and phase, holding every token copy
    /// (a token once per expert it goes to), as an all-to-all of
    /// permuted tokens over NCCL sends them.
    Nccl,
    /// One write per token copy, as a low-latency kernel (DeepEP's)
    /// puts each token straight into its expert's buffer.
    LowLatency,
}

/// What serving runs on and how, as the scenario gives it.
#[derive(Clone, Debug)]
pub struct ServingConfig {
    pub model: ServeModel,
    pub gpu: Gpu,
    pub prefill: PoolConfig,
    pub decode: PoolConfig,
    pub kv: KvMode,
    /// Most requests an attention group decodes in one step.
    pub max_batch: u32,
    pub arrivals: Arrivals,
    /// Given times instead of the roofline's: a prefill's per prompt
    /// token, and a decode step's (the compute of every layer, spread
    /// evenly over them).
    pub prefill_per_token: Option<SimTime>,
    pub decode_step: Option<SimTime>,
    /// Bytes of a value the dispatch sends (1 for FP8).
    pub dispatch_bytes: u64,
    /// The GPUs, instances taking them in order: prefill's, then decode's.
    pub gpus: Vec<GpuId>,
}

/// The plan a serving run follows: its instances' GPUs, the connections
/// its KV caches and its experts' all-to-alls take, its requests and
/// the GPUs' speeds.
#[derive(Clone, Debug)]
pub struct Serving {
    pub workload: u32,
    pub config: ServingConfig,
    /// Each instance's GPUs, in rank order: [prefill, decode].
    pub pools: [Vec<Vec<GpuId>>; 2],
    /// (prefill rank, decode rank, bytes per token and layer).
    pub pairs: Vec<(u32, u32, u64)>,
    pub requests: Vec<Request>,
    /// The connections writes take, (sender, receiver), each once.
    pub conns: Vec<(GpuId, GpuId)>,
    /// NVLink inside a host: bytes per second each way per GPU, and a
    /// copy's latency (the tensor-parallel all-reduces, the all-to-alls'
    /// copies inside a host).
    pub nvlink: (u64, SimTime),
    /// Where tokens' experts are drawn from.
    pub routing: crate::rng::Streams,
}

/// Most requests one serving workload may hold.
pub const MAX_REQUESTS: u32 = 1 << 20;

/// Prefill or decode.
pub const PREFILL: usize = 0;
pub const DECODE: usize = 1;

/// Where a step's token copies go, over an instance of n GPUs.
#[derive(Clone, Debug, Default)]
pub struct Routing {
    /// Copies from GPU s to GPU d at `s * n + d`.
    pub copies: Vec<u32>,
    /// Per GPU: (token, expert) pairs it computes, and its experts
    /// that have any.
    pub pairs: Vec<u32>,
    pub touched: Vec<u32>,
}

impl Routing {
    /// The copies GPU `from` sends GPU `to` of `n` in a dispatch (its
    /// tokens for `to`'s experts) or a combine (`to`'s tokens back).
    pub fn sent(&self, n: u32, combine: bool, from: u32, to: u32) -> u32 {
        let (s, d) = if combine { (to, from) } else { (from, to) };
        self.copies[(s * n + d) as usize]
    }
}

impl Serving {
    /// Lays the instances on the GPUs and draws the requests. Each
    /// attention group's GPUs must share a host, prefill and decode
    /// instances no host, and every connection needs a network path.
    pub fn plan(
        workload: u32,
        config: ServingConfig,
        topo: &Topology,
        routes: &crate::topology::routing::Routes,
        start: SimTime,
        streams: &crate::rng::Streams,
        nvlink: (u64, SimTime),
    ) -> Result<Serving, String> {
        let (p, d) = (config.prefill, config.decode);
        let need = (p.instances * p.gpus + d.instances * d.gpus) as usize;
        if config.gpus.len() < need {
            return Err(format!(
                "{} prefill instances of {} GPUs and {} decode instances of {} need {need} GPUs; the workload has {}",
                p.instances,
                p.gpus,
                d.instances,
                d.gpus,
                config.gpus.len()
            ));
        }
        let mut at = 0;
        let mut take = |c: PoolConfig, what: &str| -> Result<Vec<Vec<GpuId>>, String> {
            let mut out = Vec::new();
            for i in 0..c.instances {
                let g = config.gpus[at..at + c.gpus as usize].to_vec();
                at += c.gpus as usize;
                for group in g.chunks(c.tp as usize) {
                    let host = topo.gpus[group[0].idx()].host;
                    if group.iter().any(|x| topo.gpus[x.idx()].host != host) {
                        return Err(format!(
                            "a tensor-parallel group of {what} instance {i} ({} to {}) spans hosts; its GPUs must share a host's NVLink",
                            topo.gpu_name(group[0]),
                            topo.gpu_name(*group.last().expect("a GPU"))
                        ));
                    }
                }
                out.push(g);
            }
            Ok(out)
        };
        let prefill = take(p, "prefill")?;
        let decode = take(d, "decode")?;
        let host = |g: &GpuId| topo.gpus[g.idx()].host;
        let shared = prefill
            .iter()
            .flatten()
            .find(|p| decode.iter().flatten().any(|d| host(d) == host(p)));
        if let Some(g) = shared {
            return Err(format!(
                "host {} holds both prefill and decode instances ({} among them); give each pool whole hosts (the KV cache moves over the network)",
                host(g).0,
                topo.gpu_name(*g)
            ));
        }
        let pairs = config.model.kv_pairs(u64::from(p.tp), u64::from(d.tp));
        let mut conns = Vec::new();
        for pi in &prefill {
            for pg in pi.chunks(p.tp as usize) {
                for di in &decode {
                    for dg in di.chunks(d.tp as usize) {
                        for &(s, r, _) in &pairs {
                            let (a, b) = (pg[s as usize], dg[r as usize]);
                            super::network_path(topo, routes, a, b)?;
                            conns.push((a, b));
                        }
                    }
                }
            }
        }
        // The experts' all-to-alls: every pair of an instance's GPUs in
        // different hosts (those in one host copy over NVLink).
        if config.model.experts > 0 {
            for inst in prefill.iter().chain(&decode) {
                for &a in inst {
                    for &b in inst {
                        if host(&a) != host(&b) {
                            super::network_path(topo, routes, a, b)?;
                            conns.push((a, b));
                        }
                    }
                }
            }
        }
        conns.sort_unstable();
        conns.dedup();
        let requests = config.arrivals.requests(
            start,
            &mut streams.stream(&format!("workload/{workload}/serving")),
        );
        check_sizes(&config, &pairs, &requests)?;
        let routing =
            crate::rng::Streams::new(streams.derive(&format!("workload/{workload}/experts")));
        let plan = Serving {
            workload,
            config,
            pools: [prefill, decode],
            pairs,
            requests,
            conns,
            nvlink,
            routing,
        };
        plan.check_times()?;
        Ok(plan)
    }

    /// Refuses plans whose longest prefill or decode step would take a
    /// day or more (a GPU given far too slow, a prompt far too long), and
    /// requests arriving past what a run simulates.
    fn check_times(&self) -> Result<(), String> {
        let last = self.requests.last().map_or(SimTime::ZERO, |r| r.arrival);
        if last > LAST_ARRIVAL {
            return Err(format!(
                "the last request arrives at {last}; at most {LAST_ARRIVAL} is simulated (a higher rate, or fewer requests)"
            ));
        }
        let m = &self.config.model;
        let prompt = self.requests.iter().map(|r| r.prompt).max().unwrap_or(1);
        let output = self.requests.iter().map(|r| r.output).max().unwrap_or(1);
        let batch = self.config.max_batch;
        let context = u64::from(batch) * u64::from(prompt + output);
        let (p, b) = (u64::from(prompt), u64::from(batch));
        let layer = [
            self.prefill_layer(prompt),
            self.attention(PREFILL, 0, p, None),
            self.attention(DECODE, 0, b, Some(context)),
            self.experts(
                PREFILL,
                (p * m.top_k).min(u64::from(u32::MAX)) as u32,
                m.experts as u32,
            ),
        ];
        let step = [
            self.decode_step(batch, context),
            self.output_layer(PREFILL, p),
        ];
        let most = layer
            .iter()
            .map(|t| scaled(*t, m.layers, 1))
            .chain(step)
            .max()
            .unwrap_or(SimTime::ZERO);
        if most >= LONGEST {
            return Err(format!(
                "the roofline gives a prefill or decode step of {most} or more; check [workload.gpu] and the prompt sizes"
            ));
        }
        Ok(())
    }

    pub fn pool(&self, pool: usize) -> PoolConfig {
        [self.config.prefill, self.config.decode][pool]
    }

    /// Whether instances of `pool` run layer by layer, their experts'
    /// all-to-alls on the network (a mixture of experts), rather than as
    /// one computation per layer or step.
    pub fn layered(&self) -> bool {
        self.config.model.experts > 0
    }

    /// The connection from `a` to `b`.
    pub fn conn(&self, a: GpuId, b: GpuId) -> u32 {
        self.conns
            .binary_search(&(a, b))
            .expect("a connection of the plan") as u32
    }

    /// KV-cache bytes of a request of `prompt` tokens, over all its
    /// writes: each pair's bytes per token and layer, times the prompt
    /// and the layers.
    pub fn kv_bytes(&self, prompt: u32) -> u64 {
        let per: u64 = self.pairs.iter().map(|p| p.2).sum();
        per * u64::from(prompt) * self.config.model.layers
    }

    /// A ring all-reduce of `bytes` over NVLink among `tp` GPUs:
    /// 2 (tp - 1) steps, each a copy's latency and 1/tp of the bytes.
    fn tp_all_reduce(&self, tp: u64, bytes: f64) -> f64 {
        if tp <= 1 {
            return 0.0;
        }
        let (rate, latency) = self.nvlink;
        let steps = 2.0 * (tp - 1) as f64;
        steps * (latency.0 as f64 * 1e-12 + bytes / tp as f64 / rate as f64)
    }

    /// The roofline of `flops` and of the `bytes` read, on one GPU, in
    /// seconds; FP8 weights (`param_bytes = 1`) run at the FP8 peak.
    fn roofline(&self, flops: f64, bytes: f64) -> f64 {
        let g = &self.config.gpu;
        let peak = if self.config.model.param_bytes == 1 {
            g.fp8_flops
        } else {
            g.flops
        };
        (flops / (peak * g.efficiency)).max(bytes / (g.hbm * g.efficiency))
    }

    /// One layer's attention over `tokens` tokens on a group of `tp`
    /// GPUs (each with 1/tp of the heads), then its MLP of `ffn` (the
    /// dense MLP, a mixture's shared experts, or none), each followed by
    /// an all-reduce of the tokens' activations. A prefill's attention is
    /// causal over the prompt (2 T^2 heads head_dim FLOPs); a decode
    /// step's reads `context` cached tokens. In seconds.
    fn layer_part(&self, tp: u64, tokens: u64, context: Option<u64>, ffn: u64) -> f64 {
        let m = &self.config.model;
        let t = tokens as f64;
        let w = m.attention_params() as f64;
        let (attention, cache) = match context {
            None => (2.0 * t * t * (m.heads * m.head_dim) as f64, 0.0),
            Some(c) => (
                4.0 * c as f64 * (m.heads * m.head_dim) as f64,
                c as f64 * m.kv_layer_token() as f64,
            ),
        };
        let tpf = tp as f64;
        let act = t * (m.hidden * m.act_bytes) as f64;
        let mut time = self.roofline(
            (2.0 * t * w + attention) / tpf,
            (w * m.param_bytes as f64 + cache) / tpf,
        ) + self.tp_all_reduce(tp, act);
        if ffn > 0 {
            let mlp = m.mlp_params(ffn) as f64;
            time += self.roofline(2.0 * t * mlp / tpf, mlp * m.param_bytes as f64 / tpf)
                + self.tp_all_reduce(tp, act);
        }
        time
    }

    /// The output layer over `tokens` tokens on `tp` GPUs, in seconds.
    fn head(&self, tp: u64, tokens: u64) -> f64 {
        let m = &self.config.model;
        let w = (m.hidden * m.vocab) as f64;
        self.roofline(
            2.0 * tokens as f64 * w / tp as f64,
            w * m.param_bytes as f64 / tp as f64,
        )
    }

    /// One layer of a prefill of `prompt` tokens on a dense model.
    pub fn prefill_layer(&self, prompt: u32) -> SimTime {
        let m = &self.config.model;
        if let Some(t) = self.config.prefill_per_token {
            return scaled(t, u64::from(prompt), m.layers);
        }
        let tp = u64::from(self.config.prefill.tp);
        seconds(self.layer_part(tp, u64::from(prompt), None, m.ffn))
    }

    /// A decode step of `batch` requests holding `context` tokens in
    /// all, on a dense model: every layer's GEMMs over the batch
    /// (reading its weights) and attention over the context (reading its
    /// cache), then the output layer.
    pub fn decode_step(&self, batch: u32, context: u64) -> SimTime {
        if let Some(t) = self.config.decode_step {
            return t;
        }
        let m = &self.config.model;
        let tp = u64::from(self.config.decode.tp);
        let b = u64::from(batch);
        let layer = self.layer_part(tp, b, Some(context), m.ffn);
        seconds(m.layers as f64 * layer + self.head(tp, b))
    }

    /// Layer `l`'s attention (and dense MLP or shared experts) on a group
    /// of `pool` over `tokens` tokens (`context`: cached tokens, for a
    /// decode step).
    pub fn attention(&self, pool: usize, l: u64, tokens: u64, context: Option<u64>) -> SimTime {
        let m = &self.config.model;
        let given = match pool {
            PREFILL => self
                .config
                .prefill_per_token
                .map(|t| scaled(t, tokens, m.layers)),
            _ => self.config.decode_step.map(|t| scaled(t, 1, m.layers)),
        };
        if let Some(t) = given {
            return t;
        }
        let ffn = if m.is_moe(l) { m.shared_ffn } else { m.ffn };
        let tp = u64::from(self.pool(pool).tp);
        seconds(self.layer_part(tp, tokens, context, ffn))
    }

    /// A GPU's experts computing `pairs` (token, expert) pairs over
    /// `touched` of its experts, each read once.
    pub fn experts(&self, pool: usize, pairs: u32, touched: u32) -> SimTime {
        let given = match pool {
            PREFILL => self.config.prefill_per_token.is_some(),
            _ => self.config.decode_step.is_some(),
        };
        if given || pairs == 0 {
            return SimTime::ZERO;
        }
        let m = &self.config.model;
        let w = m.mlp_params(m.expert_ffn) as f64;
        seconds(self.roofline(
            2.0 * f64::from(pairs) * w,
            f64::from(touched) * w * m.param_bytes as f64,
        ))
    }

    /// The output layer of a group of `pool` over `tokens` tokens.
    pub fn output_layer(&self, pool: usize, tokens: u64) -> SimTime {
        let given = match pool {
            PREFILL => self.config.prefill_per_token.is_some(),
            _ => self.config.decode_step.is_some(),
        };
        if given {
            return SimTime::ZERO;
        }
        seconds(self.head(u64::from(self.pool(pool).tp), tokens))
    }

    /// Bytes of one token copy: dispatched (`dispatch_bytes` a value),
    /// combined (`act_bytes`).
    pub fn copy_bytes(&self, combine: bool) -> u64 {
        let m = &self.config.model;
        m.hidden
            * if combine {
                m.act_bytes
            } else {
                self.config.dispatch_bytes
            }
    }

    /// Where the tokens of step `step` of instance `inst` of `pool` go
    /// in layer `l`: each group's `tokens[j]` tokens, sent by its GPUs in
    /// turn, each to `top_k` distinct experts drawn uniformly; expert
    /// `e` of E lives on GPU e n / E of the instance's n.
    pub fn route(&self, pool: usize, inst: u32, step: u64, l: u64, tokens: &[u32]) -> Routing {
        let m = &self.config.model;
        let c = self.pool(pool);
        let n = c.gpus as usize;
        let key = ((step * 2 + pool as u64) << 20 | u64::from(inst)) * 4096 + l;
        let mut rng = self.routing.stream_indexed("layer", key);
        let mut out = Routing {
            copies: vec![0; n * n],
            pairs: vec![0; n],
            touched: vec![0; n],
        };
        let mut hit = vec![false; m.experts as usize];
        let mut chosen = Vec::with_capacity(m.top_k as usize);
        for (j, &t) in tokens.iter().enumerate() {
            for i in 0..t {
                let src = j * c.tp as usize + (i % c.tp) as usize;
                chosen.clear();
                while chosen.len() < m.top_k as usize {
                    let e = rng.below(m.experts);
                    if !chosen.contains(&e) {
                        chosen.push(e);
                    }
                }
                for &e in &chosen {
                    let dst = (e * n as u64 / m.experts) as usize;
                    out.copies[src * n + dst] += 1;
                    out.pairs[dst] += 1;
                    if !hit[e as usize] {
                        hit[e as usize] = true;
                        out.touched[dst] += 1;
                    }
                }
            }
        }
        out
    }
}

/// Most bytes one write may carry: 2^31 packets of the smallest MTU,
/// halved (a QP's PSNs are 31 bits).
const MAX_WRITE: u128 = (1 << 31) * 256 / 2;

/// Most token copies a group's tokens make in a layer.
const MAX_COPIES: u64 = 1 << 24;

/// Serving's timers tell this many requests, instances or GPUs apart, in
/// all the run's serving workloads (the event key's id bits, less the
/// timer's kind).
pub const MAX_IDS: u32 = 1 << 24;

/// Refuses requests whose cache writes or all-to-all writes could not
/// be carried, or whose copies would take too long to draw.
fn check_sizes(
    config: &ServingConfig,
    pairs: &[(u32, u32, u64)],
    requests: &[Request],
) -> Result<(), String> {
    let m = &config.model;
    let prompt = requests.iter().map(|r| r.prompt).max().unwrap_or(0);
    let per = pairs.iter().map(|p| p.2).max().unwrap_or(0);
    let kv = u128::from(per) * u128::from(prompt) * u128::from(m.layers);
    if kv > MAX_WRITE {
        return Err(format!(
            "a prompt of {prompt} tokens makes a KV write of {kv} bytes; at most {MAX_WRITE} fit in one write"
        ));
    }
    if m.experts > 0 {
        let batch = u64::from(config.max_batch).max(u64::from(prompt));
        let copies = batch * m.top_k;
        if copies > MAX_COPIES {
            return Err(format!(
                "{batch} tokens to {} experts each make {copies} token copies a layer; at most {MAX_COPIES} are drawn",
                m.top_k
            ));
        }
        let bytes = u128::from(copies)
            * u128::from(m.hidden)
            * u128::from(config.dispatch_bytes.max(m.act_bytes));
        if bytes > MAX_WRITE {
            return Err(format!(
                "{copies} token copies of {} values make a write of up to {bytes} bytes; at most {MAX_WRITE} fit in one write",
                m.hidden
            ));
        }
    }
    Ok(())
}

/// Seconds to simulated time, rounded up to the picosecond.
fn seconds(s: f64) -> SimTime {
    SimTime((s * 1e12).ceil().min(LONGEST.0 as f64) as u64)
}

/// The longest compute time one layer or step may take (a day): longer
/// ones are refused when planned (`check_times`), so that no sum of them
/// carries the clock past what it holds.
const LONGEST: SimTime = SimTime(86_400 * 1_000_000_000_000);

/// The latest arrival a serving workload may have: 10^6 s after zero.
const LAST_ARRIVAL: SimTime = SimTime(1_000_000 * 1_000_000_000_000);

/// `t` times `n` over `d`, at most `LONGEST`.
fn scaled(t: SimTime, n: u64, d: u64) -> SimTime {
    let v = u128::from(t.0) * u128::from(n) / u128::from(d.max(1));
    SimTime(v.min(u128::from(LONGEST.0)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama70b() -> ServeModel {
        ServeModel {
            layers: 80,
            hidden: 8192,
            heads: 64,
            kv_heads: 8,
            head_dim: 128,
            ffn: 28672,
            vocab: 128256,
            gated: true,
            kv_latent: None,
            param_bytes: 2,
            kv_bytes: 2,
            act_bytes: 2,
            experts: 0,
            top_k: 0,
            expert_ffn: 0,
            shared_ffn: 0,
            dense_layers: 0,
        }
    }

    /// Llama-3-70B's cache: 2 x 80 layers x 8 KV heads x 128 x 2 bytes =
    /// 327,680 bytes (320 KiB) per token, as vLLM's and LMCache's sizing
    /// tables give it.
    #[test]
    fn a_70b_token_caches_320_kib() {
        assert_eq!(llama70b().kv_token(), 327_680);
    }

    /// With TP 8 on both sides each prefill rank sends its one KV head to
    /// the decode rank of its number; with TP 4 at decode, two prefill
    /// ranks feed each decode rank; with TP 16 at decode, each head goes
    /// to the two ranks that copy it. The bytes add up to the whole
    /// cache in the first two, twice it in the third.
    #[test]
    fn kv_heads_go_to_the_ranks_that_hold_them() {
        let m = llama70b();
        let head = 2 * 128 * 2;
        let p = m.kv_pairs(8, 8);
        assert_eq!(p, (0..8).map(|i| (i, i, head)).collect::<Vec<_>>());
        let p = m.kv_pairs(8, 4);
        assert_eq!(p.len(), 8);
        assert!(p.iter().all(|&(s, d, _)| d == s / 2));
        let p = m.kv_pairs(8, 16);
        assert_eq!(p.len(), 16);
        assert!(p.iter().all(|&(s, d, _)| d / 2 == s));
        let sum = |p: &[(u32, u32, u64)]| p.iter().map(|x| x.2).sum::<u64>();
        assert_eq!(sum(&m.kv_pairs(8, 4)), m.kv_layer_token());
        assert_eq!(sum(&m.kv_pairs(8, 16)), 2 * m.kv_layer_token());
        // A latent cache: every decode rank takes all of it.
        let mla = ServeModel {
            kv_latent: Some(576),
            ..m
        };
        assert_eq!(mla.kv_pairs(1, 1), vec![(0, 0, 1152)]);
        assert_eq!(mla.kv_pairs(2, 4).len(), 4);
    }

    /// Poisson arrivals: deterministic per seed, their mean gap within a
    /// few percent of 1/rate over many requests, sizes within bounds.
    #[test]
    fn poisson_arrivals_keep_their_rate() {
        let a = Arrivals::Poisson {
            rate: 100.0,
            count: 20_000,
            prompt: Tokens(100, 200),
            output: Tokens(5, 5),
        };
        let streams = crate::rng::Streams::new(7);
        let r = a.requests(SimTime::ZERO, &mut streams.stream("x"));
        let again = a.requests(SimTime::ZERO, &mut streams.stream("x"));
        assert_eq!(r, again);
        let mean = r.last().unwrap().arrival.0 as f64 / r.len() as f64 * 1e-12;
        assert!((mean - 0.01).abs() < 0.0003, "mean gap {mean}");
        assert!(r.windows(2).all(|w| w[0].arrival <= w[1].arrival));
        assert!(r.iter().all(|x| (100..=200).contains(&x.prompt)));
        assert!(r.iter().any(|x| x.prompt == 100) && r.iter().any(|x| x.prompt == 200));
    }
}
