//! `fabricsim plan`: the GPUs a model's parameters need.

use super::common::print_json_or;

pub(crate) fn plan(
    params: &str,
    bytes_per_param: Option<f64>,
    training: bool,
    gpu_memory: &str,
    usable: f64,
    gpus_per_server: u32,
    json: bool,
) -> Result<(), String> {
    use fabricsim::plan::{self, PlanInput};
    let params = plan::parse_params(params).ok_or_else(|| {
        format!("--params: got \"{params}\", expected a count such as 405e9 or 70B")
    })?;
    let gpu_memory = fabricsim::units::parse_bytes(gpu_memory)
        .filter(|&b| b > 0)
        .ok_or_else(|| {
            format!("--gpu-memory: got \"{gpu_memory}\", expected a size such as 80GB")
        })?;
    let p = plan::plan(&PlanInput {
        params,
        bytes_per_param: bytes_per_param.unwrap_or(if training {
            plan::TRAINING_BYTES_PER_PARAM
        } else {
            2.0
        }),
        gpu_memory: gpu_memory as f64,
        usable,
        gpus_per_server,
    })?;
    print_json_or(json, &p, || p.render())
}

/// The GPU memory and GPUs per server (NVLink domain) to plan with: those
/// given, else the `--host` preset's, else an 80 GB GPU in 8-GPU servers.
pub(crate) fn machine(
    host: Option<&str>,
    gpu_memory: Option<String>,
    gpus_per_server: Option<u32>,
) -> Result<(String, u32), String> {
    use fabricsim::scenario::hosts::HostPreset;
    let figures = match host {
        None => None,
        Some(name) => Some(
            HostPreset::from_name(name)
                .ok_or_else(|| {
                    format!(
                        "--host: got \"{name}\", expected one of {}",
                        HostPreset::NAMES.join(", ")
                    )
                })?
                .figures(),
        ),
    };
    let memory = gpu_memory.unwrap_or_else(|| {
        figures.map_or("80GB".to_string(), |f| format!("{}", f.gpu_memory_bytes))
    });
    let gpus = gpus_per_server.unwrap_or(figures.map_or(8, |f| f.gpus));
    Ok((memory, gpus))
}

/// A training job's memory per GPU, from Megatron-LM's arguments (or a
/// launch script's), against the GPU's; the smallest TP x PP that fits.
/// An error when it does not fit, saying by how much.
pub(crate) struct JobPlan<'a> {
    pub args: Option<&'a str>,
    pub script: Option<&'a std::path::Path>,
    pub gpus: u64,
    pub gpu_memory: &'a str,
    pub usable: f64,
    pub gpus_per_server: u32,
    pub json: bool,
}

pub(crate) fn plan_job(j: &JobPlan) -> Result<(), String> {
    use fabricsim::plan::memory::{busiest, StageMemory};
    use fabricsim::scenario::megatron::{import, script_args, Flags};
    let memory = fabricsim::units::parse_bytes(j.gpu_memory)
        .filter(|&b| b > 0)
        .ok_or_else(|| {
            format!(
                "--gpu-memory: got \"{}\", expected a size such as 80GB (1e9 bytes each) or 80GiB (2^30)",
                j.gpu_memory
            )
        })? as f64;
    if !(j.usable > 0.0 && j.usable <= 1.0) {
        return Err(format!(
            "--usable: got {}, expected a share above 0 and at most 1",
            j.usable
        ));
    }
    let mut words = Vec::new();
    if let Some(file) = j.script {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        words = script_args(&text).map_err(|m| format!("{}: {m}", file.display()))?;
    }
    if let Some(a) = j.args {
        words.extend(shell_words::split(a).map_err(|e| format!("--megatron: {e}"))?);
    }
    let flags = import(&Flags::parse(&words), Some(j.gpus))?;
    let (m, p) = flags.resolve(j.gpus)?;
    let need = busiest(&m, &p);
    let usable = memory * j.usable;
    // The smallest TP x PP that fits (TP inside a server first).
    let mut best: Option<(u64, u64, StageMemory)> = None;
    for tp in (1..=j.gpus_per_server as u64).filter(|t| j.gpus.is_multiple_of(*t)) {
        for pp in (1..=m.layers).filter(|q| j.gpus.is_multiple_of(tp * q)) {
            let int = |n: u64| toml::Value::Integer(n as i64);
            let other = flags
                .with("parallel.tp", int(tp))
                .with("parallel.pp", int(pp));
            let Ok((m2, p2)) = other.resolve(j.gpus) else {
                continue;
            };
            let b = busiest(&m2, &p2);
            let better = best
                .as_ref()
                .is_none_or(|(t, q, _)| (tp * pp, pp) < (t * q, *q));
            if b.total <= usable && better {
                best = Some((tp, pp, b));
            }
        }
    }
    let gb = |b: f64| format!("{:.2} GB", b / 1e9);
    let both = |b: f64| format!("{} ({:.2} GiB)", gb(b), b / (1u64 << 30) as f64);
    let fits = need.total <= usable;
    let report = serde_json::json!({
        "tp": p.tp, "pp": p.pp, "dp": p.dp, "gpus": j.gpus,
        "busiest_stage": need,
        "gpu_memory_bytes": memory,
        "usable": j.usable,
        "fits": fits,
        "smallest_fit": best.as_ref().map(|(t, q, b)| serde_json::json!({"tp": t, "pp": q, "dp": j.gpus / (t * q), "total": b.total})),
    });
    super::common::print_json_or(j.json, &report, || {
        let n = need.params as f64;
        let zero = match p.zero {
            0 => "no distributed optimizer".to_string(),
            1 => "distributed optimizer (ZeRO 1)".to_string(),
            z => format!("ZeRO {z}"),
        };
        let recompute = match p.recompute {
            fabricsim::workload::model::Recompute::None => "no recomputation",
            fabricsim::workload::model::Recompute::Selective => "selective recomputation",
            fabricsim::workload::model::Recompute::Full => "full recomputation",
        };
        let mut s = format!(
            "job        {} layers, hidden {}, TP {} x PP {} x DP {} on {} GPUs; {} B weights, {} B gradients, {zero}; {recompute}\n\
             per GPU    stage {} of {} (the busiest): {:.3e} parameters\n\
             \x20 weights      {}\n\
             \x20 gradients    {}\n\
             \x20 optimizer    {}\n\
             \x20 activations  {}  ({} micro-batch(es) in flight; Korthikanti et al. 2022, FlashAttention)\n\
             \x20 total        {} of {} x {:.0}% usable: ",
            m.layers, m.hidden, p.tp, p.pp, p.dp, j.gpus, m.param_bytes, m.grad_bytes,
            need.stage, p.pp, n,
            gb(need.weights), gb(need.gradients), gb(need.optimizer), gb(need.activations),
            need.in_flight, both(need.total), both(memory), j.usable * 100.0,
        );
        if fits {
            s += &format!("fits, {} to spare\n", gb(usable - need.total));
        } else {
            s += &format!("does not fit, {} over\n", gb(need.total - usable));
        }
        match &best {
            Some((t, q, b)) => {
                s += &format!(
                    "smallest   TP {t} x PP {q} (DP {}) fits: {} per GPU\n",
                    j.gpus / (t * q),
                    gb(b.total)
                )
            }
            None => {
                s += &format!(
                    "smallest   no TP (up to {} a server) x PP on {} GPUs fits\n",
                    j.gpus_per_server, j.gpus
                )
            }
        }
        s
    })?;
    if !fits {
        return Err(format!(
            "does not fit: stage {} needs {} per GPU, {} usable: {} ({:.0}%) over",
            need.stage,
            gb(need.total),
            gb(usable),
            gb(need.total - usable),
            (need.total / usable - 1.0) * 100.0
        ));
    }
    Ok(())
}
