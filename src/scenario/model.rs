//! `kind = "model"`: a training job made from the model, its
//! parallelism and the GPU (`workload::model`).

use super::error::{KeyError, KeyPath};
use super::raw::{RawModel, RawParallel, RawWorkload};
use super::values::{choice, time};
use crate::topology::{GpuId, Topology};
use crate::units::{parse_byte_rate, SimTime};
use crate::workload::collective::Algorithm;
use crate::workload::model::{
    Accounting, Dim, Dispatcher, Framework, Gpu, KernelKind, ModelJob, Parallel, Recompute,
    Schedule, Transformer,
};
use toml::Value;

type R<T> = Result<T, KeyError>;

/// An integer key between `lo` and `hi`, or `default` (`None`: required).
pub(crate) fn int(
    v: Option<i64>,
    path: &KeyPath,
    default: Option<u64>,
    lo: u64,
    hi: u64,
) -> R<u64> {
    match (v, default) {
        (None, Some(d)) => Ok(d),
        (None, None) => Err(KeyError::new(
            path,
            format!("missing; expected an integer from {lo} to {hi}"),
        )),
        (Some(n), _) if n >= lo as i64 && n as u64 <= hi => Ok(n as u64),
        (Some(n), _) => Err(KeyError::new(
            path,
            format!("got {n}, expected an integer from {lo} to {hi}"),
        )),
    }
}

/// The job, with `gpus` the workload's GPUs and the collective settings
/// (`algorithm`, `channels`, `chunk`, `pxn`) already checked.
pub fn model(
    w: &RawWorkload,
    tables: Option<(&RawModel, &RawParallel)>,
    topo: &Topology,
    gpus: Vec<GpuId>,
    algorithm: Algorithm,
    chunk: u64,
    p: &KeyPath,
) -> R<ModelJob> {
    let Some(m) = tables.map(|t| t.0).or(w.model.as_ref()) else {
        return Err(KeyError::new(
            &p.key("model"),
            "missing; expected [workload.model] with layers, hidden, ffn, heads, seq, vocab and global_batch",
        ));
    };
    let r = tables.map(|t| t.1).or(w.parallel.as_ref());
    let (model, parallel) = model_and_parallel(m, r, gpus.len() as u64, p)?;
    let gpu = gpu(w, p)?;
    let iterations = int(w.iterations, &p.key("iterations"), Some(1), 1, 1000)? as u32;
    let channels = match w.channels {
        None => None,
        Some(c) => Some(int(Some(c), &p.key("channels"), None, 1, 64)? as u32),
    };
    let _ = topo;
    Ok(ModelJob {
        gpus,
        iterations,
        model,
        parallel,
        gpu,
        algorithm,
        channels,
        chunk,
        pxn: w.pxn.unwrap_or(true),
        protocol: crate::workload::collective::Protocol::Simple,
        auto: crate::workload::collective::Auto::default(),
        not_modelled: Vec::new(),
    })
}

/// The model and its parallelism for a job of `gpus` GPUs, checked, with
/// `p` the workload's key path.
pub fn model_and_parallel(
    m: &RawModel,
    r: Option<&RawParallel>,
    gpus: u64,
    p: &KeyPath,
) -> R<(Transformer, Parallel)> {
    let mp = p.key("model");
    let serving_only = [
        ("head_dim", m.head_dim.is_some()),
        ("kv_latent", m.kv_latent.is_some()),
        ("kv_bytes", m.kv_bytes.is_some()),
        ("dense_layers", m.dense_layers.is_some()),
    ];
    if let Some((key, _)) = serving_only.iter().find(|k| k.1) {
        return Err(KeyError::new(
            &mp.key(key),
            "is used only by kind = \"serving\" (a training job's cache is not modelled)",
        ));
    }
    let layers = int(m.layers, &mp.key("layers"), None, 1, 10_000)?;
    let hidden = int(m.hidden, &mp.key("hidden"), None, 1, 1 << 20)?;
    let heads = int(m.heads, &mp.key("heads"), None, 1, 1 << 14)?;
    if hidden % heads != 0 {
        return Err(KeyError::new(
            &mp.key("heads"),
            format!("got {heads}, expected a divisor of hidden ({hidden})"),
        ));
    }
    let kv_heads = int(m.kv_heads, &mp.key("kv_heads"), Some(heads), 1, heads)?;
    if heads % kv_heads != 0 {
        return Err(KeyError::new(
            &mp.key("kv_heads"),
            format!("got {kv_heads}, expected a divisor of heads ({heads})"),
        ));
    }
    let ffn = int(m.ffn, &mp.key("ffn"), Some(4 * hidden), 1, 1 << 22)?;
    let experts = int(m.experts, &mp.key("experts"), Some(0), 0, 4096)?;
    if experts == 0 && m.top_k.is_some_and(|k| k > 0) {
        return Err(KeyError::new(
            &mp.key("top_k"),
            "given for a model without experts; set experts too, or leave top_k out",
        ));
    }
    let top_k = int(m.top_k, &mp.key("top_k"), Some(2.min(experts)), 0, experts)?;
    if experts > 0 && top_k == 0 {
        return Err(KeyError::new(
            &mp.key("top_k"),
            format!("got 0, expected 1 to {experts} experts per token"),
        ));
    }
    let param_bytes = int(m.param_bytes, &mp.key("param_bytes"), Some(2), 1, 8)?;
    // Megatron-Core with --bf16 reduces gradients in fp32.
    let grad_default = if param_bytes == 2 { 4 } else { param_bytes };
    let model = Transformer {
        layers,
        hidden,
        ffn,
        heads,
        kv_heads,
        seq: int(m.seq, &mp.key("seq"), None, 1, 1 << 22)?,
        vocab: int(m.vocab, &mp.key("vocab"), None, 1, 1 << 24)?,
        micro_batch: int(m.micro_batch, &mp.key("micro_batch"), Some(1), 1, 4096)?,
        global_batch: int(m.global_batch, &mp.key("global_batch"), None, 1, 1 << 24)?,
        cp: 1,
        param_bytes,
        grad_bytes: int(
            m.grad_bytes,
            &mp.key("grad_bytes"),
            Some(grad_default),
            1,
            8,
        )?,
        act_bytes: int(m.act_bytes, &mp.key("act_bytes"), Some(2), 1, 8)?,
        gated: m.gated.unwrap_or(true),
        layernorm: choice(
            m.norm.as_deref(),
            &mp.key("norm"),
            &[("rmsnorm", false), ("layernorm", true)],
            false,
        )?,
        bias: m.bias.unwrap_or(false),
        tied: m.tied.unwrap_or(false),
        positions: int(m.positions, &mp.key("positions"), Some(0), 0, 1 << 24)?,
        loss_fusion: m.loss_fusion.unwrap_or(false),
        causal: m.causal.unwrap_or(true),
        fp8: m.fp8.unwrap_or(false),
        fp8_param_gather: m.fp8_param_gather.unwrap_or(false),
        aux_loss: m.aux_loss.unwrap_or(false),
        experts,
        top_k,
        expert_ffn: int(m.expert_ffn, &mp.key("expert_ffn"), Some(ffn), 1, 1 << 22)?,
        capacity_factor: capacity(m, experts, &mp)?,
        shared_ffn: int(m.shared_ffn, &mp.key("shared_ffn"), Some(0), 0, 1 << 22)?,
        dispatcher: choice(
            m.dispatcher.as_deref(),
            &mp.key("dispatcher"),
            &[
                ("alltoall", Dispatcher::AllToAll),
                ("allgather", Dispatcher::AllGather),
            ],
            Dispatcher::AllToAll,
        )?,
        pad_to_capacity: m.pad_to_capacity.unwrap_or(false),
    };
    if model.fp8_param_gather && !model.fp8 {
        return Err(KeyError::new(
            &mp.key("fp8_param_gather"),
            "true for a model without FP8 GEMMs; set model.fp8 too",
        ));
    }
    if model.shared_ffn > 0 && experts == 0 {
        return Err(KeyError::new(
            &mp.key("shared_ffn"),
            "given for a model without experts (model.experts)",
        ));
    }
    if model.pad_to_capacity && model.capacity_factor.is_none() {
        return Err(KeyError::new(
            &mp.key("pad_to_capacity"),
            "true without a capacity to pad to; set model.capacity_factor too",
        ));
    }
    let mut model = model;
    let parallel = parallel(r, &model, gpus, p)?;
    model.cp = parallel.cp;
    // Megatron-Core pads the vocabulary to a multiple of
    // --make-vocab-size-divisible-by times TP.
    let divisible = int(
        m.vocab_divisible_by,
        &mp.key("vocab_divisible_by"),
        Some(128),
        1,
        1 << 20,
    )?;
    model.vocab = model.vocab.next_multiple_of(divisible * parallel.tp);
    Ok((model, parallel))
}

/// An expert's capacity factor: for a model with experts, above 0.
fn capacity(m: &RawModel, experts: u64, mp: &KeyPath) -> R<Option<f64>> {
    let Some(f) = m.capacity_factor else {
        return Ok(None);
    };
    let key = mp.key("capacity_factor");
    if experts == 0 {
        return Err(KeyError::new(
            &key,
            "given for a model without experts (model.experts)",
        ));
    }
    if !(f > 0.0 && f <= 1e6) {
        return Err(KeyError::new(
            &key,
            format!("got {f}, expected a factor above 0 (1.0: an expert takes its even share)"),
        ));
    }
    Ok(Some(f))
}

fn parallel(r: Option<&RawParallel>, m: &Transformer, gpus: u64, p: &KeyPath) -> R<Parallel> {
    let pp_ = p.key("parallel");
    let d = RawParallel::default();
    let r = r.unwrap_or(&d);
    let tp = int(r.tp, &pp_.key("tp"), Some(1), 1, 1024)?;
    let pp = int(r.pp, &pp_.key("pp"), Some(1), 1, 1024)?;
    for (key, what, n) in [("heads", "heads", m.heads), ("ffn", "ffn", m.ffn)] {
        if n % tp != 0 {
            return Err(KeyError::new(
                &pp_.key("tp"),
                format!("got {tp}, expected a divisor of the model's {what} ({n}; model.{key})"),
            ));
        }
    }
    if pp > m.layers {
        return Err(KeyError::new(
            &pp_.key("pp"),
            format!(
                "got {pp}, expected at most one stage per layer ({} layers)",
                m.layers
            ),
        ));
    }
    let cp = int(r.cp, &pp_.key("cp"), Some(1), 1, 1024)?;
    if !m.seq.is_multiple_of(2 * cp) && cp > 1 {
        return Err(KeyError::new(
            &pp_.key("cp"),
            format!(
                "got {cp}, expected a divisor of half the sequence ({} tokens; model.seq): each CP rank takes two mirrored chunks of it",
                m.seq
            ),
        ));
    }
    let ranks = tp * cp * pp;
    if !gpus.is_multiple_of(ranks) {
        return Err(KeyError::new(
            &pp_,
            format!("tp x cp x pp = {ranks} does not divide the job's {gpus} GPUs"),
        ));
    }
    let dp = int(r.dp, &pp_.key("dp"), Some(gpus / ranks), 1, 1 << 20)?;
    if ranks * dp != gpus {
        return Err(KeyError::new(
            &pp_.key("dp"),
            format!(
                "got {dp}, but tp x cp x pp x dp must be the job's {gpus} GPUs (dp = {})",
                gpus / ranks
            ),
        ));
    }
    let ep = int(r.ep, &pp_.key("ep"), Some(1), 1, 4096)?;
    if ep > 1 && m.experts == 0 {
        return Err(KeyError::new(
            &pp_.key("ep"),
            format!("got {ep}, but the model has no experts (model.experts)"),
        ));
    }
    if !(cp * dp).is_multiple_of(ep) || !m.experts.is_multiple_of(ep) {
        return Err(KeyError::new(
            &pp_.key("ep"),
            format!(
                "got {ep}, expected a divisor of cp x dp ({}) and of the experts ({})",
                cp * dp,
                m.experts
            ),
        ));
    }
    if m.experts > 0 && !m.expert_ffn.is_multiple_of(tp) {
        return Err(KeyError::new(
            &pp_.key("tp"),
            format!(
                "got {tp}, expected a divisor of model.expert_ffn ({})",
                m.expert_ffn
            ),
        ));
    }
    if !m.shared_ffn.is_multiple_of(tp) {
        return Err(KeyError::new(
            &pp_.key("tp"),
            format!(
                "got {tp}, expected a divisor of model.shared_ffn ({})",
                m.shared_ffn
            ),
        ));
    }
    if !m.global_batch.is_multiple_of(m.micro_batch * dp) {
        return Err(KeyError::new(
            &p.key("model").key("global_batch"),
            format!(
                "got {}, expected a multiple of micro_batch x dp = {}",
                m.global_batch,
                m.micro_batch * dp
            ),
        ));
    }
    let schedule = choice(
        r.schedule.as_deref(),
        &pp_.key("schedule"),
        &[("1f1b", Schedule::OneFOneB), ("gpipe", Schedule::GPipe)],
        Schedule::OneFOneB,
    )?;
    let virtual_stages = int(
        r.virtual_stages,
        &pp_.key("virtual_stages"),
        Some(1),
        1,
        m.layers,
    )?;
    let framework = choice(
        r.framework.as_deref(),
        &pp_.key("framework"),
        &[
            ("megatron", Framework::Megatron),
            ("deepspeed", Framework::DeepSpeed),
        ],
        Framework::Megatron,
    )?;
    if cp > 1 && framework == Framework::DeepSpeed {
        return Err(KeyError::new(
            &pp_.key("cp"),
            format!("got {cp}, but DeepSpeed's sequence parallelism (Ulysses) is not modelled"),
        ));
    }
    if virtual_stages > 1 {
        interleaving(m, pp, dp, virtual_stages, schedule, framework, &pp_)?;
    }
    let (first_layers, last_layers) = uneven(r, m, pp, virtual_stages, &pp_)?;
    let zero = int(r.zero, &pp_.key("zero"), Some(0), 0, 3)? as u8;
    let accounting = choice(
        r.accounting.as_deref(),
        &pp_.key("accounting"),
        &[
            ("megatron-core", Accounting::MegatronCore),
            ("paper", Accounting::Paper),
        ],
        Accounting::MegatronCore,
    )?;
    // Megatron-Core's "tp-cp-ep-dp-pp", with EP inside DP and no CP.
    let s = r.order.as_deref().unwrap_or("tp-dp-pp");
    let dims: Option<Vec<Dim>> = s
        .split('-')
        .map(|x| match x {
            "tp" => Some(Dim::Tp),
            "pp" => Some(Dim::Pp),
            "dp" => Some(Dim::Dp),
            _ => None,
        })
        .collect();
    let order = match dims.as_deref() {
        Some(&[a, b, c]) if a != b && b != c && a != c => [a, b, c],
        _ => {
            return Err(KeyError::new(
                &pp_.key("order"),
                format!("got \"{s}\", expected the three of tp, pp and dp, fastest-varying first, such as \"tp-dp-pp\""),
            ))
        }
    };
    // Megatron-Core's default: max(40M, 1M x dp) parameters, its dp
    // counting CP.
    let bucket = int(
        r.bucket,
        &pp_.key("bucket"),
        Some((1_000_000 * dp * cp).max(40_000_000)),
        1,
        1 << 40,
    )?;
    Ok(Parallel {
        tp,
        cp,
        pp,
        dp,
        ep,
        schedule,
        virtual_stages,
        first_layers,
        last_layers,
        zero,
        sequence_parallel: r.sequence_parallel.unwrap_or(false),
        accounting,
        order,
        bucket,
        overlap: r.overlap.unwrap_or(false),
        tp_overlap: r.tp_overlap.unwrap_or(false),
        param_overlap: r.param_overlap.unwrap_or(false),
        // DeepSpeed's default stage3_prefetch_bucket_size.
        prefetch: int(
            r.prefetch,
            &pp_.key("prefetch"),
            Some(if framework == Framework::DeepSpeed {
                50_000_000
            } else {
                0
            }),
            0,
            1 << 40,
        )?,
        framework,
        recompute: choice(
            r.recompute.as_deref(),
            &pp_.key("recompute"),
            &[
                ("none", Recompute::None),
                ("selective", Recompute::Selective),
                ("full", Recompute::Full),
            ],
            Recompute::None,
        )?,
    })
}

/// Uneven first and last stages: their layers, the stages between
/// sharing the rest evenly, as Megatron-Core requires.
fn uneven(
    r: &RawParallel,
    m: &Transformer,
    pp: u64,
    v: u64,
    pp_: &KeyPath,
) -> R<(Option<u64>, Option<u64>)> {
    let first = r
        .first_stage_layers
        .map(|_| {
            int(
                r.first_stage_layers,
                &pp_.key("first_stage_layers"),
                None,
                0,
                m.layers,
            )
        })
        .transpose()?;
    let last = r
        .last_stage_layers
        .map(|_| {
            int(
                r.last_stage_layers,
                &pp_.key("last_stage_layers"),
                None,
                0,
                m.layers,
            )
        })
        .transpose()?;
    let Some(key) = (match (first, last) {
        (Some(_), _) => Some("first_stage_layers"),
        (None, Some(_)) => Some("last_stage_layers"),
        _ => None,
    }) else {
        return Ok((None, None));
    };
    let given = [first, last];
    let n = given.iter().flatten().count() as u64;
    let ends: u64 = given.iter().flatten().sum();
    let why = if pp < 2 {
        Some("it needs more than one pipeline stage (pp)".to_string())
    } else if v > 1 {
        Some("uneven stages are not modelled with virtual_stages".to_string())
    } else if ends > m.layers {
        Some(format!(
            "the first and last stages' {ends} layers are more than the model's {}",
            m.layers
        ))
    } else if n == pp && ends != m.layers {
        Some(format!(
            "the two stages hold {ends} of the model's {} layers",
            m.layers
        ))
    } else if n < pp && !(m.layers - ends).is_multiple_of(pp - n) {
        Some(format!(
            "the other {} stages cannot share the remaining {} layers evenly",
            pp - n,
            m.layers - ends
        ))
    } else {
        None
    };
    match why {
        Some(why) => Err(KeyError::new(
            &pp_.key(key),
            format!("{why} (model.layers = {}, pp = {pp})", m.layers),
        )),
        None => Ok((first, last)),
    }
}

/// Interleaved 1F1B with `v` chunks per stage, as Megatron-Core accepts
/// it: with 1F1B and more than one stage, an equal number of layers per
/// chunk, and micro-batches in whole groups of pp (its
/// `microbatch_group_size_per_vp_stage`, pp by default).
fn interleaving(
    m: &Transformer,
    pp: u64,
    dp: u64,
    v: u64,
    schedule: Schedule,
    framework: Framework,
    pp_: &KeyPath,
) -> R<()> {
    let key = pp_.key("virtual_stages");
    let micro = m.global_batch / (m.micro_batch * dp);
    let why = if schedule != Schedule::OneFOneB {
        "the interleaved schedule is 1F1B's; set schedule = \"1f1b\"".to_string()
    } else if framework != Framework::Megatron {
        "DeepSpeed's pipeline has no interleaved schedule".to_string()
    } else if pp < 2 {
        "it needs more than one pipeline stage (pp)".to_string()
    } else if !m.layers.is_multiple_of(pp * v) {
        format!(
            "pp x virtual_stages = {} does not divide the model's {} layers",
            pp * v,
            m.layers
        )
    } else if !micro.is_multiple_of(pp) {
        format!(
            "the iteration's {micro} micro-batches are not a multiple of pp ({pp}), as Megatron-Core's interleaved schedule requires"
        )
    } else {
        return Ok(());
    };
    Err(KeyError::new(&key, format!("got {v}, but {why}")))
}

pub(crate) fn gpu(w: &RawWorkload, p: &KeyPath) -> R<Gpu> {
    let gp = p.key("gpu");
    let Some(g) = &w.gpu else {
        return Ok(Gpu::H100);
    };
    let mut out = choice(
        g.preset.as_deref(),
        &gp.key("preset"),
        &[
            ("h100", Gpu::H100),
            ("b200", Gpu::B200),
            ("a100", Gpu::A100),
        ],
        Gpu::H100,
    )?;
    if let Some(t) = g.tflops {
        if !(t.is_finite() && (1.0..=1e6).contains(&t)) {
            return Err(KeyError::new(
                &gp.key("tflops"),
                format!("got {t}, expected dense TFLOP/s from 1 to 1000000"),
            ));
        }
        out.flops = t * 1e12;
    }
    if let Some(t) = g.fp8_tflops {
        if !(t.is_finite() && (1.0..=1e6).contains(&t)) {
            return Err(KeyError::new(
                &gp.key("fp8_tflops"),
                format!("got {t}, expected dense FP8 TFLOP/s from 1 to 1000000"),
            ));
        }
        out.fp8_flops = t * 1e12;
    }
    match &g.hbm {
        None => {}
        Some(Value::String(s)) => match parse_byte_rate(s) {
            Some(b) if (1_000_000_000..=1_000_000_000_000_000).contains(&b) => out.hbm = b as f64,
            _ => {
                return Err(KeyError::new(
                    &gp.key("hbm"),
                    format!("got \"{s}\", expected a bandwidth such as \"3.35TB/s\""),
                ))
            }
        },
        Some(other) => {
            return Err(KeyError::new(
                &gp.key("hbm"),
                format!("got {other}, expected a string such as \"3.35TB/s\""),
            ))
        }
    }
    if let Some(e) = g.efficiency {
        if !(e > 0.0 && e <= 1.0) {
            return Err(KeyError::new(
                &gp.key("efficiency"),
                format!("got {e}, expected a share of the peaks above 0 and at most 1"),
            ));
        }
        out.efficiency = e;
    }
    if let Some(given) = &g.kernels {
        let kp = gp.key("kernels");
        for (name, v) in given {
            let Some(kind) = KernelKind::ALL.iter().find(|k| k.name() == name) else {
                let names: Vec<&str> = KernelKind::ALL.iter().map(|k| k.name()).collect();
                return Err(KeyError::new(
                    &kp.key(name),
                    format!("is not a kernel of the step; expected {}", names.join(", ")),
                ));
            };
            out.given[*kind as usize] = Some(time(Some(v), &kp.key(name), SimTime::ZERO)?);
        }
    }
    Ok(out)
}
