//! `kind = "serving"`: the served model, its prefill and decode pools,
//! and where its requests come from (`workload::serving`).

use super::error::{KeyError, KeyPath};
use super::model::int;
use super::raw::{RawModel, RawPool, RawServing, RawWorkload};
use super::values::{choice, show, time};
use crate::topology::GpuId;
use crate::units::SimTime;
use crate::workload::serving::{
    A2a, Arrivals, KvMode, PoolConfig, Request, ServeModel, ServingConfig, Tokens,
};
use toml::Value;

type R<T> = Result<T, KeyError>;

/// The serving workload's settings, with `gpus` its GPUs.
pub fn serving(
    w: &RawWorkload,
    gpus: Vec<GpuId>,
    base: &std::path::Path,
    p: &KeyPath,
) -> R<ServingConfig> {
    let Some(m) = &w.model else {
        return Err(KeyError::new(
            &p.key("model"),
            "missing; expected [workload.model] with layers, hidden, heads and vocab",
        ));
    };
    let model = model(m, &p.key("model"))?;
    let sp = p.key("serving");
    let empty = RawServing::default();
    let s = w.serving.as_ref().unwrap_or(&empty);
    if w.gpu.as_ref().is_some_and(|g| g.kernels.is_some()) {
        return Err(KeyError::new(
            &p.key("gpu").key("kernels"),
            "is not used by kind = \"serving\"; give serving.prefill_per_token or serving.decode_step instead",
        ));
    }
    let gpu = super::model::gpu(w, p)?;
    let moe = model.experts > 0;
    let (prefill, _) = pool(s.prefill.as_ref(), &sp.key("prefill"), false, moe)?;
    let (decode, max_batch) = pool(s.decode.as_ref(), &sp.key("decode"), true, moe)?;
    if !moe && s.dispatch_bytes.is_some() {
        return Err(KeyError::new(
            &sp.key("dispatch_bytes"),
            "is used only by a mixture of experts (model.experts)",
        ));
    }
    let kv = choice(
        s.kv_transfer.as_deref(),
        &sp.key("kv_transfer"),
        &[("layer", KvMode::Layer), ("whole", KvMode::Whole)],
        KvMode::Layer,
    )?;
    let positive = |v: Option<&Value>, key: &str| -> R<Option<SimTime>> {
        match v {
            None => Ok(None),
            Some(v) => match time(Some(v), &sp.key(key), SimTime::ZERO)? {
                SimTime::ZERO => Err(KeyError::new(
                    &sp.key(key),
                    format!("got {}, expected a duration above zero", show(v)),
                )),
                t => Ok(Some(t)),
            },
        }
    };
    Ok(ServingConfig {
        gpu,
        prefill,
        decode,
        kv,
        max_batch,
        arrivals: arrivals(s, base, &sp)?,
        prefill_per_token: positive(s.prefill_per_token.as_ref(), "prefill_per_token")?,
        decode_step: positive(s.decode_step.as_ref(), "decode_step")?,
        dispatch_bytes: int(
            s.dispatch_bytes,
            &sp.key("dispatch_bytes"),
            Some(model.act_bytes),
            1,
            8,
        )?,
        model,
        gpus,
    })
}

/// The model's shape; training-only keys are refused.
fn model(m: &RawModel, mp: &KeyPath) -> R<ServeModel> {
    let training_only = [
        ("seq", m.seq.is_some()),
        ("micro_batch", m.micro_batch.is_some()),
        ("global_batch", m.global_batch.is_some()),
        ("grad_bytes", m.grad_bytes.is_some()),
        ("vocab_divisible_by", m.vocab_divisible_by.is_some()),
        ("loss_fusion", m.loss_fusion.is_some()),
        ("aux_loss", m.aux_loss.is_some()),
        ("capacity_factor", m.capacity_factor.is_some()),
        ("pad_to_capacity", m.pad_to_capacity.is_some()),
        ("dispatcher", m.dispatcher.is_some()),
        ("fp8_param_gather", m.fp8_param_gather.is_some()),
    ];
    if let Some((key, _)) = training_only.iter().find(|k| k.1) {
        return Err(KeyError::new(
            &mp.key(key),
            "is not used by kind = \"serving\": it is a training setting",
        ));
    }
    let hidden = int(m.hidden, &mp.key("hidden"), None, 1, 1 << 20)?;
    let heads = int(m.heads, &mp.key("heads"), None, 1, 1 << 14)?;
    let kv_heads = int(m.kv_heads, &mp.key("kv_heads"), Some(heads), 1, heads)?;
    if heads % kv_heads != 0 {
        return Err(KeyError::new(
            &mp.key("kv_heads"),
            format!("got {kv_heads}, expected a divisor of heads ({heads})"),
        ));
    }
    let head_dim = match m.head_dim {
        Some(_) => int(m.head_dim, &mp.key("head_dim"), None, 1, 1 << 14)?,
        None if hidden % heads == 0 => hidden / heads,
        None => {
            return Err(KeyError::new(
                &mp.key("head_dim"),
                format!("missing; hidden ({hidden}) is not a multiple of heads ({heads}), so give a head's width"),
            ))
        }
    };
    let act_bytes = int(m.act_bytes, &mp.key("act_bytes"), Some(2), 1, 8)?;
    let layers = int(m.layers, &mp.key("layers"), None, 1, 10_000)?;
    let ffn = int(m.ffn, &mp.key("ffn"), Some(4 * hidden), 1, 1 << 22)?;
    let experts = int(m.experts, &mp.key("experts"), Some(0), 0, 4096)?;
    let moe_only = [
        ("top_k", m.top_k.is_some()),
        ("expert_ffn", m.expert_ffn.is_some()),
        ("shared_ffn", m.shared_ffn.is_some()),
        ("dense_layers", m.dense_layers.is_some()),
    ];
    if let Some((key, _)) = moe_only.iter().find(|k| k.1 && experts == 0) {
        return Err(KeyError::new(
            &mp.key(key),
            "given for a model without experts; set experts too, or leave it out",
        ));
    }
    let top_k = int(m.top_k, &mp.key("top_k"), Some(2.min(experts)), 0, experts)?;
    if experts > 0 && top_k == 0 {
        return Err(KeyError::new(
            &mp.key("top_k"),
            format!("got 0, expected 1 to {experts} experts per token"),
        ));
    }
    Ok(ServeModel {
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        ffn,
        vocab: int(m.vocab, &mp.key("vocab"), None, 1, 1 << 24)?,
        gated: m.gated.unwrap_or(true),
        kv_latent: match m.kv_latent {
            None => None,
            Some(_) => Some(int(m.kv_latent, &mp.key("kv_latent"), None, 1, 1 << 16)?),
        },
        param_bytes: int(m.param_bytes, &mp.key("param_bytes"), Some(2), 1, 8)?,
        kv_bytes: int(m.kv_bytes, &mp.key("kv_bytes"), Some(act_bytes), 1, 8)?,
        act_bytes,
        experts,
        top_k,
        expert_ffn: int(m.expert_ffn, &mp.key("expert_ffn"), Some(ffn), 1, 1 << 22)?,
        shared_ffn: int(m.shared_ffn, &mp.key("shared_ffn"), Some(0), 0, 1 << 22)?,
        dense_layers: int(m.dense_layers, &mp.key("dense_layers"), Some(0), 0, layers)?,
    })
}

/// A pool and, for decode, its batch limit.
fn pool(r: Option<&RawPool>, pp: &KeyPath, decode: bool, moe: bool) -> R<(PoolConfig, u32)> {
    let Some(r) = r else {
        return Err(KeyError::new(
            pp,
            "missing; expected a table with instances and tp, e.g. { instances = 2, tp = 8 }",
        ));
    };
    let instances = int(r.instances, &pp.key("instances"), None, 1, 1 << 16)? as u32;
    if r.a2a.is_some() && !moe {
        return Err(KeyError::new(
            &pp.key("a2a"),
            "is used only by a mixture of experts (model.experts)",
        ));
    }
    let a2a = choice(
        r.a2a.as_deref(),
        &pp.key("a2a"),
        &[("nccl", A2a::Nccl), ("low-latency", A2a::LowLatency)],
        A2a::Nccl,
    )?;
    let tp = int(r.tp, &pp.key("tp"), Some(1), 1, 1024)? as u32;
    let gpus = match r.ep {
        Some(_) if !moe => {
            return Err(KeyError::new(
                &pp.key("ep"),
                "is used only by a mixture of experts (model.experts); a dense model's instance is its tp GPUs",
            ))
        }
        None => tp,
        Some(_) => {
            let ep = int(r.ep, &pp.key("ep"), None, 1, 1 << 16)? as u32;
            if !ep.is_multiple_of(tp) {
                return Err(KeyError::new(
                    &pp.key("ep"),
                    format!("got {ep}, expected a multiple of tp ({tp}): an instance's GPUs are its attention groups of tp"),
                ));
            }
            ep
        }
    };
    let max_batch = match (decode, r.max_batch) {
        (false, Some(_)) => return Err(KeyError::new(
            &pp.key("max_batch"),
            "is not used by a prefill pool (each attention group prefills one request at a time)",
        )),
        _ => int(r.max_batch, &pp.key("max_batch"), Some(256), 1, 1 << 16)? as u32,
    };
    Ok((
        PoolConfig {
            instances,
            tp,
            gpus,
            a2a,
        },
        max_batch,
    ))
}

/// A token count: an integer, or [lo, hi] drawn uniformly.
fn tokens(v: Option<&Value>, path: &KeyPath, default: u32) -> R<Tokens> {
    let one = |v: &Value| match v {
        Value::Integer(n) if (1..=1 << 22).contains(n) => Ok(*n as u32),
        other => Err(KeyError::new(
            path,
            format!(
                "got {}, expected a token count from 1 to 4194304, or [lo, hi]",
                show(other)
            ),
        )),
    };
    match v {
        None => Ok(Tokens(default, default)),
        Some(Value::Array(a)) if a.len() == 2 => {
            let (lo, hi) = (one(&a[0])?, one(&a[1])?);
            if lo > hi {
                return Err(KeyError::new(
                    path,
                    format!("got [{lo}, {hi}], expected lo at most hi"),
                ));
            }
            Ok(Tokens(lo, hi))
        }
        Some(v) => one(v).map(|n| Tokens(n, n)),
    }
}

fn arrivals(s: &RawServing, base: &std::path::Path, sp: &KeyPath) -> R<Arrivals> {
    if let Some(file) = &s.trace {
        for (key, given) in [
            ("rate", s.rate.is_some()),
            ("requests", s.requests.is_some()),
            ("prompt_tokens", s.prompt_tokens.is_some()),
            ("output_tokens", s.output_tokens.is_some()),
        ] {
            if given {
                return Err(KeyError::new(
                    &sp.key(key),
                    "is not used with serving.trace (the trace gives every request)",
                ));
            }
        }
        let path = base.join(file);
        let text = crate::input::read_text(&path, 1 << 30, "request trace")
            .map_err(|m| KeyError::new(&sp.key("trace"), m))?;
        let requests = read_trace(&text)
            .map_err(|m| KeyError::new(&sp.key("trace"), format!("{}: {m}", path.display())))?;
        return Ok(Arrivals::Trace(requests));
    }
    let rate = match s.rate {
        Some(r) if r.is_finite() && r > 0.0 && r <= 1e7 => r,
        Some(r) => {
            return Err(KeyError::new(
                &sp.key("rate"),
                format!("got {r}, expected requests per second above 0 and at most 10000000"),
            ))
        }
        None => {
            return Err(KeyError::new(
                &sp.key("rate"),
                "missing; give requests per second (with requests), or a trace file",
            ))
        }
    };
    let max = u64::from(crate::workload::serving::MAX_REQUESTS);
    Ok(Arrivals::Poisson {
        rate,
        count: int(s.requests, &sp.key("requests"), Some(100), 1, max)? as u32,
        prompt: tokens(s.prompt_tokens.as_ref(), &sp.key("prompt_tokens"), 1024)?,
        output: tokens(s.output_tokens.as_ref(), &sp.key("output_tokens"), 128)?,
    })
}

/// A request trace, CSV with a header: Azure's LLM inference traces
/// (`TIMESTAMP,ContextTokens,GeneratedTokens`, the time a date and time
/// of day) or `arrival,prompt_tokens,output_tokens` (arrival in
/// seconds). Arrivals are taken from the first request's, in order.
pub fn read_trace(text: &str) -> Result<Vec<Request>, String> {
    let mut rd = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let header = rd.headers().map_err(|e| e.to_string())?.clone();
    let col = |names: &[&str]| header.iter().position(|h| names.contains(&h));
    let azure = col(&["TIMESTAMP"]).is_some();
    let (t, pr, out) = if azure {
        (
            col(&["TIMESTAMP"]),
            col(&["ContextTokens"]),
            col(&["GeneratedTokens"]),
        )
    } else {
        (
            col(&["arrival"]),
            col(&["prompt_tokens"]),
            col(&["output_tokens"]),
        )
    };
    let (Some(t), Some(pr), Some(out)) = (t, pr, out) else {
        return Err(format!(
            "the header is \"{}\"; expected TIMESTAMP, ContextTokens and GeneratedTokens (Azure's traces) or arrival, prompt_tokens and output_tokens",
            header.iter().collect::<Vec<_>>().join(",")
        ));
    };
    let mut reqs: Vec<(f64, u32, u32)> = Vec::new();
    // Azure's whole seconds are counted from the first request's, so
    // that the fractions keep their digits.
    let mut base = None;
    for (i, rec) in rd.records().enumerate() {
        let line = i + 2;
        let rec = rec.map_err(|e| format!("line {line}: {e}"))?;
        let field = |c: usize| rec.get(c).unwrap_or("");
        let at = if azure {
            datetime_seconds(field(t))
                .map(|(whole, frac)| (whole - *base.get_or_insert(whole)) as f64 + frac)
        } else {
            field(t)
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0)
        };
        let at =
            at.ok_or_else(|| format!("line {line}: arrival \"{}\" is not a time", field(t)))?;
        let count = |c: usize, what: &str, lo: u32| {
            field(c)
                .parse::<u32>()
                .ok()
                .filter(|n| (lo..=1 << 22).contains(n))
                .ok_or_else(|| {
                    format!(
                        "line {line}: {what} \"{}\" is not a token count from {lo} to 4194304",
                        field(c)
                    )
                })
        };
        reqs.push((at, count(pr, "prompt", 1)?, count(out, "output", 1)?));
        if reqs.len() > crate::workload::serving::MAX_REQUESTS as usize {
            return Err(format!(
                "more than {} requests",
                crate::workload::serving::MAX_REQUESTS
            ));
        }
    }
    if reqs.is_empty() {
        return Err("no requests".into());
    }
    if let Some(w) = reqs.windows(2).position(|w| w[1].0 < w[0].0) {
        return Err(format!(
            "line {}: arrivals go back in time; sort the trace by arrival",
            w + 3
        ));
    }
    let first = reqs[0].0;
    let span = reqs[reqs.len() - 1].0 - first;
    if span > 1e6 {
        return Err(format!(
            "the requests span {span:.0} s; at most 1000000 s is simulated"
        ));
    }
    Ok(reqs
        .into_iter()
        .map(|(at, prompt, output)| Request {
            arrival: SimTime(((at - first) * 1e12).round() as u64),
            prompt,
            output,
        })
        .collect())
}

/// Seconds since 1970 of "YYYY-MM-DD HH:MM:SS[.fraction]" (a "T" may
/// stand for the space): whole seconds and the fraction.
fn datetime_seconds(s: &str) -> Option<(i64, f64)> {
    let (date, time) = s.split_once([' ', 'T'])?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let mut t = time.split(':');
    let (h, min) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let sec = t.next()?.parse::<f64>().ok()?;
    if t.next().is_some() || !(0..24).contains(&h) || !(0..60).contains(&min) {
        return None;
    }
    if !(0.0..61.0).contains(&sec) {
        return None;
    }
    // Days from 1970-01-01 in the proleptic Gregorian calendar.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let whole = sec.trunc();
    Some((
        days * 86_400 + h * 3600 + min * 60 + whole as i64,
        sec - whole,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_traces_are_read_relative_to_their_first_request() {
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                    2023-11-16 18:15:46.6805900,374,44\n\
                    2023-11-16 18:15:50.9951690,396,109\n\
                    2023-11-17 00:00:00.0000000,1,1\n";
        let r = read_trace(text).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(
            (r[0].arrival, r[0].prompt, r[0].output),
            (SimTime::ZERO, 374, 44)
        );
        assert_eq!(r[1].arrival, SimTime(4_314_579_000_000));
        // Midnight: 5 h 44 min 13.319 s after the first.
        assert_eq!(r[2].arrival, SimTime(20_653_319_410_000_000));
        assert_eq!(datetime_seconds("1970-01-01 00:00:01.5"), Some((1, 0.5)));
        assert_eq!(
            datetime_seconds("2000-03-01T00:00:00"),
            Some((951_868_800, 0.0))
        );
    }

    #[test]
    fn bad_traces_say_which_line() {
        let e = read_trace("arrival,prompt_tokens,output_tokens\n0.5,10,2\n0.1,3,3\n").unwrap_err();
        assert!(e.contains("line 3") && e.contains("back in time"), "{e}");
        let e = read_trace("arrival,prompt_tokens,output_tokens\n0.5,zero,2\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("prompt"), "{e}");
        let e = read_trace("when,in,out\n1,2,3\n").unwrap_err();
        assert!(e.contains("TIMESTAMP"), "{e}");
    }
}
