//! `kind = "deepspeed"`: a training job's DeepSpeed configuration (its
//! JSON file: batch sizes, ZeRO stage and buckets, precision) with the
//! model's shape from `[workload.model]`, mapped onto the keys of
//! `kind = "model"` with `parallel.framework = "deepspeed"` and
//! DeepSpeed's defaults for what the file leaves out
//! (`runtime/config.py`, `runtime/zero/config.py`).

use super::megatron::{Import, Key};
use serde_json::Value;

/// Keys of the file whose effect is not modelled yet, and why it
/// matters.
const NOT_MODELLED: &[(&str, &str)] = &[
    (
        "zero_optimization.offload_optimizer",
        "the optimizer's state stays on the GPU: no PCIe traffic to the host",
    ),
    (
        "zero_optimization.offload_param",
        "the parameters stay on the GPU: no PCIe traffic to the host",
    ),
    (
        "zero_optimization.allgather_bucket_size",
        "parameters are gathered in the reduce buckets",
    ),
    (
        "activation_checkpointing",
        "what the model checkpoints is its code's; set parallel.recompute",
    ),
    (
        "communication_data_type",
        "gradients are reduced in the parameters' type",
    ),
];

/// The keys a DeepSpeed configuration sets, for a job whose data
/// parallelism is `dp`.
pub fn import(config: &Value, dp: u64) -> Result<Import, String> {
    let Value::Object(top) = config else {
        return Err("expected a JSON object of DeepSpeed settings".into());
    };
    let mut out = Import::default();
    let mut used: Vec<String> = Vec::new();
    let get = |path: &str| -> Option<&Value> {
        let mut v = config;
        for part in path.split('.') {
            v = v.get(part)?;
        }
        Some(v)
    };
    let int = |path: &str| -> Result<Option<u64>, String> {
        match get(path) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .or_else(|| {
                    v.as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                        .map(|f| f as u64)
                })
                .map(Some)
                .ok_or_else(|| format!("{path}: got {v}, expected a whole number")),
        }
    };
    let flag = |path: &str| get(path).and_then(Value::as_bool).unwrap_or(false);
    let mut set = |key: &'static str, value: toml::Value, from: &[&str], default: &str| {
        let given: Vec<String> = from
            .iter()
            .filter_map(|p| get(p).map(|v| format!("{p} = {v}")))
            .collect();
        used.extend(from.iter().map(|s| s.to_string()));
        out.keys.push(Key {
            key,
            value,
            from: if given.is_empty() {
                format!("DeepSpeed's default ({default})")
            } else {
                given.join(", ")
            },
        });
    };
    let n = |x: u64| toml::Value::Integer(x as i64);
    let positive = |path: &str| -> Result<Option<u64>, String> {
        match int(path)? {
            Some(0) => Err(format!("{path}: got 0, expected at least 1")),
            n => Ok(n),
        }
    };
    let micro = positive("train_micro_batch_size_per_gpu")?;
    let steps = positive("gradient_accumulation_steps")?;
    let total = positive("train_batch_size")?;
    // DeepSpeed's rule: train_batch_size = micro x steps x dp, any two
    // giving the third.
    let dp = dp.max(1);
    let times = |a: u64, b: u64| a.saturating_mul(b).saturating_mul(dp);
    let (micro, global) = match (micro, steps, total) {
        (Some(m), Some(g), Some(t)) if times(m, g) != t => {
            return Err(format!(
                "train_batch_size {t} is not train_micro_batch_size_per_gpu {m} x gradient_accumulation_steps {g} x {dp} data-parallel ranks"
            ))
        }
        (Some(m), _, Some(t)) => (m, t),
        (Some(m), Some(g), None) => (m, times(m, g)),
        (Some(m), None, None) => (m, times(m, 1)),
        (None, Some(g), Some(t)) if t % times(g, 1) == 0 => (t / times(g, 1), t),
        (None, None, Some(t)) if t % dp == 0 => (t / dp, t),
        _ => {
            return Err(
                "train_micro_batch_size_per_gpu, gradient_accumulation_steps and train_batch_size: expected train_batch_size = micro x steps x data-parallel ranks, two of them given"
                    .into(),
            )
        }
    };
    let batch = [
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "train_batch_size",
    ];
    set("model.micro_batch", n(micro), &batch, "");
    set("model.global_batch", n(global), &batch, "");
    // Gradients are reduced in the parameters' type.
    let (param, grad) = if flag("bf16.enabled") || flag("fp16.enabled") {
        (2, 2)
    } else {
        (4, 4)
    };
    let precision = ["bf16.enabled", "fp16.enabled"];
    set("model.param_bytes", n(param), &precision, "fp32");
    set("model.grad_bytes", n(grad), &precision, "fp32");
    set("model.act_bytes", n(param), &precision, "fp32");
    let stage = int("zero_optimization.stage")?.unwrap_or(0);
    if stage > 3 {
        return Err(format!(
            "zero_optimization.stage: got {stage}, expected 0 to 3"
        ));
    }
    set("parallel.zero", n(stage), &["zero_optimization.stage"], "0");
    set(
        "parallel.bucket",
        n(int("zero_optimization.reduce_bucket_size")?.unwrap_or(500_000_000)),
        &["zero_optimization.reduce_bucket_size"],
        "500,000,000",
    );
    // ZeRO 3 overlaps by default, the others not.
    let overlap = get("zero_optimization.overlap_comm")
        .and_then(Value::as_bool)
        .unwrap_or(stage == 3);
    set(
        "parallel.overlap",
        toml::Value::Boolean(overlap),
        &["zero_optimization.overlap_comm"],
        if stage == 3 { "on with ZeRO 3" } else { "off" },
    );
    set(
        "parallel.prefetch",
        n(int("zero_optimization.stage3_prefetch_bucket_size")?.unwrap_or(50_000_000)),
        &["zero_optimization.stage3_prefetch_bucket_size"],
        "50,000,000",
    );
    set(
        "parallel.framework",
        toml::Value::String("deepspeed".into()),
        &[],
        "deepspeed",
    );
    for (path, why) in NOT_MODELLED {
        if get(path).is_some() {
            used.push(path.to_string());
            out.not_modelled
                .push((format!("{path} = {}", get(path).unwrap()), why));
        }
    }
    // Every other setting, listed.
    for (k, v) in top {
        match v {
            Value::Object(inner) if k == "zero_optimization" || k == "bf16" || k == "fp16" => {
                for (k2, v2) in inner {
                    let path = format!("{k}.{k2}");
                    if !used.contains(&path) && k2 != "enabled" {
                        out.no_effect.push(format!("{path} = {v2}"));
                    }
                }
            }
            _ if used.iter().any(|u| u == k) => {}
            _ => out.no_effect.push(format!("{k} = {v}")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The batch sizes follow DeepSpeed's rule, ZeRO 3 overlaps by
    /// default, and what does not change the network is listed.
    #[test]
    fn a_deepspeed_config_maps_onto_keys() {
        let c: Value = serde_json::from_str(
            r#"{"train_batch_size": 64, "gradient_accumulation_steps": 4,
                "bf16": {"enabled": true},
                "zero_optimization": {"stage": 3, "reduce_bucket_size": 1000000, "contiguous_gradients": true},
                "gradient_clipping": 1.0}"#,
        )
        .unwrap();
        let i = import(&c, 8).unwrap();
        let get = |k: &str| i.keys.iter().find(|x| x.key == k).unwrap().value.clone();
        assert_eq!(get("model.micro_batch").as_integer(), Some(2));
        assert_eq!(get("parallel.zero").as_integer(), Some(3));
        assert_eq!(get("parallel.overlap").as_bool(), Some(true));
        assert_eq!(get("parallel.bucket").as_integer(), Some(1_000_000));
        assert!(i
            .no_effect
            .iter()
            .any(|x| x.starts_with("gradient_clipping")));
        assert!(i
            .no_effect
            .iter()
            .any(|x| x.starts_with("zero_optimization.contiguous_gradients")));
        let bad: Value = serde_json::from_str(r#"{"train_batch_size": 63, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4}"#).unwrap();
        assert!(import(&bad, 8)
            .unwrap_err()
            .contains("is not train_micro_batch_size_per_gpu"));
        let zero: Value =
            serde_json::from_str(r#"{"train_batch_size": 64, "gradient_accumulation_steps": 0}"#)
                .unwrap();
        assert!(import(&zero, 8)
            .unwrap_err()
            .contains("gradient_accumulation_steps: got 0"));
    }
}
