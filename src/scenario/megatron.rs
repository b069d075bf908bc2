//! `kind = "megatron"`: a training job read from Megatron-LM's own
//! launch arguments (`args`) or launch script (`script`), mapped onto the
//! keys of `kind = "model"` with Megatron's defaults for every flag not
//! given (`megatron/training/arguments.py`, `TransformerConfig`).
//! `fabricsim import megatron` prints the mapping.
//!
//! Every flag that changes what the network carries or what the GPUs
//! compute is read; a flag that changes something fabricsim does not
//! model yet is refused when simulating without it would be wrong
//! (uneven stages, expert TP other than TP) and listed as not modelled otherwise, with its
//! reason; every other flag is listed as not changing the network.

use super::raw::{RawModel, RawParallel};
use crate::keys::{KeyError, KeyPath, Seg};
use crate::workload::model::{Parallel, Transformer};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Flags that take no value.
const SWITCHES: &[&str] = &[
    "sequence-parallel",
    "use-distributed-optimizer",
    "overlap-grad-reduce",
    "overlap-param-gather",
    "tp-comm-overlap",
    "bf16",
    "fp16",
    "grad-reduce-in-bf16",
    "accumulate-allreduce-grads-in-fp32",
    "untie-embeddings-and-output-weights",
    "disable-bias-linear",
    "add-bias-linear",
    "swiglu",
    "group-query-attention",
    "use-rotary-position-embeddings",
    "recompute-activations",
    "use-flash-attn",
    "use-mcore-models",
    "use-legacy-models",
    "no-masked-softmax-fusion",
    "no-bias-gelu-fusion",
    "no-bias-dropout-fusion",
    "no-gradient-accumulation-fusion",
    "no-async-tensor-model-parallel-allreduce",
    "no-rope-fusion",
    "cross-entropy-loss-fusion",
    "moe-grouped-gemm",
    "moe-permute-fusion",
    "moe-pad-expert-input-to-capacity",
    "fp8-param-gather",
    "mock-data",
    "account-for-embedding-in-pipeline-split",
    "account-for-loss-in-pipeline-split",
];

/// Flags read but whose effect is not modelled yet, and why it matters.
const NOT_MODELLED: &[(&str, &str)] = &[
    (
        "moe-shared-expert-overlap",
        "the shared experts run before the tokens' dispatch, not beside it",
    ),
    (
        "moe-layer-freq",
        "every layer's MLP is a mixture of experts",
    ),
    ("rampup-batch-size", "the final global batch is simulated"),
    (
        "moe-router-dtype",
        "routing probabilities are exchanged at the activations' bytes",
    ),
    (
        "recompute-modules",
        "selective recomputation recomputes the attention's scores",
    ),
    (
        "cross-entropy-fusion-impl",
        "the fused loss's all-reduces are Megatron's native ones",
    ),
];

/// Flags refused: the job they describe is not one fabricsim can run yet.
const REFUSED: &[(&str, &str)] = &[
    (
        "microbatch-group-size-per-virtual-pipeline-stage",
        "interleaved 1F1B is modelled with Megatron's default groups of pp micro-batches",
    ),
    (
        "pipeline-model-parallel-layout",
        "uneven pipeline stages are not modelled yet",
    ),
    (
        "account-for-embedding-in-pipeline-split",
        "the pipeline split counts layers only",
    ),
    (
        "account-for-loss-in-pipeline-split",
        "the pipeline split counts layers only",
    ),
];

/// The flags of a command line: name (without `--`) to value (`None`
/// for a switch), the last one given winning, as argparse does.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    pub values: BTreeMap<String, Option<String>>,
    /// Words that belong to no flag.
    pub stray: Vec<String>,
}

impl Flags {
    /// Reads `--name value`, `--name=value` and switches.
    pub fn parse(words: &[String]) -> Flags {
        let mut f = Flags::default();
        let mut i = 0;
        while i < words.len() {
            let w = &words[i];
            i += 1;
            let Some(name) = w.strip_prefix("--") else {
                f.stray.push(w.clone());
                continue;
            };
            if let Some((n, v)) = name.split_once('=') {
                f.values.insert(n.to_string(), Some(v.to_string()));
                continue;
            }
            let takes = !SWITCHES.contains(&name)
                && words.get(i).is_some_and(|next| !next.starts_with("--"));
            let value = takes.then(|| {
                i += 1;
                words[i - 1].clone()
            });
            f.values.insert(name.to_string(), value);
        }
        f
    }

    fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    fn text(&self, name: &str) -> Option<&str> {
        self.values.get(name).and_then(|v| v.as_deref())
    }

    fn int(&self, name: &str) -> Result<Option<u64>, String> {
        match self.values.get(name) {
            None => Ok(None),
            Some(None) => Err(format!("--{name}: expected a number after it")),
            Some(Some(v)) => v.parse::<u64>().map(Some).map_err(|_| {
                if v.contains('$') {
                    format!("--{name} {v}: {v} is not set in the script; give the flag in args")
                } else {
                    format!("--{name}: got \"{v}\", expected a whole number")
                }
            }),
        }
    }

    fn required(&self, name: &str) -> Result<u64, String> {
        self.int(name)?
            .ok_or_else(|| format!("--{name} is missing; Megatron-LM requires it"))
    }
}

/// One scenario key a job's flags set.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    /// `model.hidden`, `parallel.tp`...
    pub key: &'static str,
    pub value: toml::Value,
    /// The flags it comes from, or Megatron's default.
    pub from: String,
}

/// A job read from its flags.
#[derive(Clone, Debug, Default)]
pub struct Import {
    pub keys: Vec<Key>,
    /// Flags whose effect is not modelled, with why it matters.
    pub not_modelled: Vec<(String, &'static str)>,
    /// Flags that change nothing the network carries or the GPUs compute.
    pub no_effect: Vec<String>,
}

fn flag_text(f: &Flags, name: &str) -> String {
    match f.values.get(name) {
        Some(Some(v)) => format!("--{name} {v}"),
        _ => format!("--{name}"),
    }
}

/// Maps the flags of a job of `gpus` GPUs (if known: the default global
/// batch is micro-batch x DP) onto scenario keys.
pub fn import(f: &Flags, gpus: Option<u64>) -> Result<Import, String> {
    let mut out = Import::default();
    let mut used: Vec<&str> = Vec::new();
    for (name, why) in REFUSED {
        if f.has(name) {
            return Err(format!("{}: {why}", flag_text(f, name)));
        }
    }
    if f.has("overlap-param-gather")
        && !(f.has("use-distributed-optimizer") && f.has("overlap-grad-reduce"))
    {
        return Err(
            "--overlap-param-gather: Megatron-LM refuses it without --use-distributed-optimizer and --overlap-grad-reduce"
                .into(),
        );
    }
    used.extend(["expert-tensor-parallel-size", "cp-comm-type"]);
    let tp = f.int("tensor-model-parallel-size")?.unwrap_or(1);
    if f.int("expert-tensor-parallel-size")?
        .is_some_and(|n| n != tp)
    {
        return Err(format!(
            "{}: expert TP other than TP is not modelled yet",
            flag_text(f, "expert-tensor-parallel-size")
        ));
    }
    let mut set = |key: &'static str, value: toml::Value, from: &[&'static str], default: &str| {
        let given: Vec<String> = from
            .iter()
            .filter(|n| f.has(n))
            .map(|n| flag_text(f, n))
            .collect();
        used.extend(from);
        out.keys.push(Key {
            key,
            value,
            from: if given.is_empty() {
                format!("Megatron's default ({default})")
            } else {
                given.join(" ")
            },
        });
    };
    let int = |n: u64| toml::Value::Integer(n as i64);
    let hidden = f.required("hidden-size")?;
    let heads = f.required("num-attention-heads")?;
    set(
        "model.layers",
        int(f.required("num-layers")?),
        &["num-layers"],
        "",
    );
    set("model.hidden", int(hidden), &["hidden-size"], "");
    let gated = f.has("swiglu");
    let ffn = match f.int("ffn-hidden-size")? {
        Some(n) => n,
        None if gated => hidden.saturating_mul(8) / 3 / 64 * 64,
        None => hidden.saturating_mul(4),
    };
    set(
        "model.ffn",
        int(ffn),
        &["ffn-hidden-size"],
        if gated {
            "4h x 2/3, rounded down to 64, with --swiglu"
        } else {
            "4h"
        },
    );
    set(
        "model.heads",
        int(heads),
        &["num-attention-heads", "kv-channels"],
        "",
    );
    if f.int("kv-channels")?.is_some_and(|k| k * heads != hidden) {
        out.not_modelled.push((
            flag_text(f, "kv-channels"),
            "attention is as wide as the hidden size (heads x kv-channels is not)",
        ));
    }
    let kv = if f.has("group-query-attention") {
        f.int("num-query-groups")?.unwrap_or(1)
    } else {
        heads
    };
    set(
        "model.kv_heads",
        int(kv),
        &["group-query-attention", "num-query-groups"],
        "every head a KV head",
    );
    let seq = f.required("seq-length")?;
    set("model.seq", int(seq), &["seq-length"], "");
    let vocab = match (f.int("vocab-size")?, f.text("tokenizer-type")) {
        (Some(v), _) => v,
        (None, Some("GPT2BPETokenizer")) | (None, None) if f.has("vocab-file") => 50257,
        (None, t) => {
            return Err(format!(
            "the vocabulary size is not in the flags (tokenizer {}); add --vocab-size N to args",
            t.unwrap_or("not given")
        ))
        }
    };
    set(
        "model.vocab",
        int(vocab),
        &["vocab-size", "tokenizer-type", "vocab-file"],
        "",
    );
    set(
        "model.vocab_divisible_by",
        int(f.int("make-vocab-size-divisible-by")?.unwrap_or(128)),
        &["make-vocab-size-divisible-by"],
        "128",
    );
    let micro = f.int("micro-batch-size")?.unwrap_or(1);
    set("model.micro_batch", int(micro), &["micro-batch-size"], "1");
    let pp = f.int("pipeline-model-parallel-size")?.unwrap_or(1);
    let cp = f.int("context-parallel-size")?.unwrap_or(1);
    let split = tp.saturating_mul(pp).saturating_mul(cp);
    let global = match (f.int("global-batch-size")?, gpus) {
        (Some(g), _) => Some(g),
        (None, Some(n)) if split > 0 && n % split == 0 => Some(micro.saturating_mul(n / split)),
        _ => None,
    };
    if let Some(g) = global {
        set(
            "model.global_batch",
            int(g),
            &["global-batch-size"],
            "micro-batch x DP",
        );
    }
    let (param, grad) = if f.has("bf16") {
        let grad = if f.has("grad-reduce-in-bf16") { 2 } else { 4 };
        (2, grad)
    } else if f.has("fp16") {
        (
            2,
            if f.has("accumulate-allreduce-grads-in-fp32") {
                4
            } else {
                2
            },
        )
    } else {
        (4, 4)
    };
    let precision = [
        "bf16",
        "fp16",
        "grad-reduce-in-bf16",
        "accumulate-allreduce-grads-in-fp32",
    ];
    set("model.param_bytes", int(param), &precision, "fp32");
    set("model.grad_bytes", int(grad), &precision, "fp32");
    set("model.act_bytes", int(param), &precision, "fp32");
    set(
        "model.gated",
        toml::Value::Boolean(gated),
        &["swiglu"],
        "GeLU, 2 matrices",
    );
    let norm = match f.text("normalization").unwrap_or("LayerNorm") {
        "LayerNorm" => "layernorm",
        "RMSNorm" => "rmsnorm",
        other => {
            return Err(format!(
                "--normalization {other}: expected LayerNorm or RMSNorm"
            ))
        }
    };
    set(
        "model.norm",
        toml::Value::String(norm.into()),
        &["normalization"],
        "LayerNorm",
    );
    let bias = !f.has("disable-bias-linear");
    set(
        "model.bias",
        toml::Value::Boolean(bias),
        &["disable-bias-linear", "add-bias-linear"],
        "biases",
    );
    set(
        "model.fp8",
        toml::Value::Boolean(f.has("fp8-format")),
        &["fp8-format"],
        "bf16 GEMMs",
    );
    set(
        "model.fp8_param_gather",
        toml::Value::Boolean(f.has("fp8-param-gather") && f.has("fp8-format")),
        &["fp8-param-gather"],
        "off",
    );
    set(
        "model.loss_fusion",
        toml::Value::Boolean(f.has("cross-entropy-loss-fusion")),
        &["cross-entropy-loss-fusion"],
        "off",
    );
    set(
        "model.tied",
        toml::Value::Boolean(!f.has("untie-embeddings-and-output-weights")),
        &["untie-embeddings-and-output-weights"],
        "tied",
    );
    let position = if f.has("use-rotary-position-embeddings") {
        "rope"
    } else {
        f.text("position-embedding-type")
            .unwrap_or("learned_absolute")
    };
    let rows = match position {
        "learned_absolute" => f.int("max-position-embeddings")?.unwrap_or(seq),
        _ => 0,
    };
    set(
        "model.positions",
        int(rows),
        &[
            "position-embedding-type",
            "use-rotary-position-embeddings",
            "max-position-embeddings",
        ],
        "learned absolute positions",
    );
    if f.has("num-experts") && tp > 1 && !f.has("sequence-parallel") {
        out.not_modelled.push((
            "--sequence-parallel (absent)".into(),
            "Megatron-Core says experts with TP must use it; tokens are dispatched as if it were given",
        ));
    }
    let dispatcher = f.text("moe-token-dispatcher-type").unwrap_or("allgather");
    if f.has("num-experts") && !["alltoall", "allgather"].contains(&dispatcher) {
        out.not_modelled.push((
            format!("--moe-token-dispatcher-type {dispatcher}"),
            "tokens are dispatched by all-to-all (Megatron's alltoall dispatcher); this one's exchange is not modelled yet",
        ));
    }
    if let Some(e) = f.int("num-experts")? {
        set(
            "model.experts",
            int(e),
            &["num-experts", "moe-token-dispatcher-type"],
            "",
        );
        let aux = f
            .text("moe-aux-loss-coeff")
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|c| c > 0.0);
        set(
            "model.aux_loss",
            toml::Value::Boolean(aux),
            &["moe-aux-loss-coeff"],
            "no auxiliary loss",
        );
        set(
            "model.top_k",
            int(f.int("moe-router-topk")?.unwrap_or(2)),
            &["moe-router-topk"],
            "2",
        );
        set(
            "model.expert_ffn",
            int(f.int("moe-ffn-hidden-size")?.unwrap_or(ffn)),
            &["moe-ffn-hidden-size"],
            "the FFN size",
        );
        set(
            "model.dispatcher",
            toml::Value::String(
                if dispatcher == "allgather" {
                    "allgather"
                } else {
                    "alltoall"
                }
                .into(),
            ),
            &["moe-token-dispatcher-type"],
            "allgather",
        );
        set(
            "model.shared_ffn",
            int(f.int("moe-shared-expert-intermediate-size")?.unwrap_or(0)),
            &["moe-shared-expert-intermediate-size"],
            "no shared experts",
        );
        if let Some(c) = f.text("moe-expert-capacity-factor") {
            let c: f64 = c.parse().map_err(|_| {
                format!("--moe-expert-capacity-factor {c}: expected a number such as 1.25")
            })?;
            set(
                "model.capacity_factor",
                toml::Value::Float(c),
                &["moe-expert-capacity-factor"],
                "",
            );
        }
        set(
            "model.pad_to_capacity",
            toml::Value::Boolean(f.has("moe-pad-expert-input-to-capacity")),
            &["moe-pad-expert-input-to-capacity"],
            "dropless",
        );
    }
    set("parallel.tp", int(tp), &["tensor-model-parallel-size"], "1");
    set("parallel.cp", int(cp), &["context-parallel-size"], "1");
    if cp > 1 && f.text("cp-comm-type").is_some_and(|t| t != "p2p") {
        out.not_modelled.push((
            flag_text(f, "cp-comm-type"),
            "the keys and values go round the CP ring (p2p), not as this exchange",
        ));
    }
    set(
        "parallel.pp",
        int(pp),
        &["pipeline-model-parallel-size"],
        "1",
    );
    // Interleaved 1F1B: chunks per stage, given or from the layers per
    // chunk.
    let virtual_stages = match (
        f.int("num-virtual-stages-per-pipeline-rank")?,
        f.int("num-layers-per-virtual-pipeline-stage")?,
    ) {
        (Some(_), Some(_)) => {
            return Err("--num-virtual-stages-per-pipeline-rank and --num-layers-per-virtual-pipeline-stage: Megatron-LM takes one of them, not both".into())
        }
        (Some(v), None) => Some(v),
        (None, Some(n)) => {
            let layers = f.required("num-layers")?;
            let per = n.saturating_mul(pp);
            if per == 0 || !layers.is_multiple_of(per) {
                return Err(format!(
                    "{}: --num-layers {layers} is not a multiple of it times the {pp} pipeline stages",
                    flag_text(f, "num-layers-per-virtual-pipeline-stage")
                ));
            }
            Some(layers / per)
        }
        (None, None) => None,
    };
    if let Some(v) = virtual_stages {
        set(
            "parallel.virtual_stages",
            int(v),
            &[
                "num-virtual-stages-per-pipeline-rank",
                "num-layers-per-virtual-pipeline-stage",
            ],
            "1",
        );
    }
    for (key, flag) in [
        (
            "parallel.first_stage_layers",
            "decoder-first-pipeline-num-layers",
        ),
        (
            "parallel.last_stage_layers",
            "decoder-last-pipeline-num-layers",
        ),
    ] {
        if let Some(n) = f.int(flag)? {
            set(key, int(n), &[flag], "");
        }
    }
    if f.has("expert-model-parallel-size") {
        let ep = f.int("expert-model-parallel-size")?.unwrap_or(1);
        set("parallel.ep", int(ep), &["expert-model-parallel-size"], "1");
    }
    // Megatron turns sequence parallelism off without TP.
    set(
        "parallel.sequence_parallel",
        toml::Value::Boolean(f.has("sequence-parallel") && tp > 1),
        &["sequence-parallel"],
        "off",
    );
    set(
        "parallel.zero",
        int(u64::from(f.has("use-distributed-optimizer"))),
        &["use-distributed-optimizer"],
        "no distributed optimizer",
    );
    let recompute = match (
        f.text("recompute-granularity"),
        f.has("recompute-activations"),
    ) {
        (Some("full"), _) => "full",
        (Some("selective"), _) | (None, true) => "selective",
        (None, false) => "none",
        (Some(other), _) => {
            return Err(format!(
                "--recompute-granularity {other}: expected full or selective"
            ))
        }
    };
    set(
        "parallel.recompute",
        toml::Value::String(recompute.into()),
        &[
            "recompute-granularity",
            "recompute-activations",
            "recompute-method",
            "recompute-num-layers",
        ],
        "none",
    );
    set(
        "parallel.param_overlap",
        toml::Value::Boolean(f.has("overlap-param-gather")),
        &["overlap-param-gather"],
        "off",
    );
    set(
        "parallel.tp_overlap",
        toml::Value::Boolean(f.has("tp-comm-overlap")),
        &["tp-comm-overlap"],
        "off",
    );
    set(
        "parallel.overlap",
        toml::Value::Boolean(f.has("overlap-grad-reduce")),
        &["overlap-grad-reduce"],
        "gradients reduced after the backward",
    );
    if let Some(b) = f.int("ddp-bucket-size")? {
        set("parallel.bucket", int(b), &["ddp-bucket-size"], "");
    }
    set(
        "parallel.order",
        toml::Value::String("tp-dp-pp".into()),
        &[],
        "tp-cp-ep-dp-pp: CP next to TP, EP inside CP x DP",
    );
    for (name, why) in NOT_MODELLED {
        if f.has(name) {
            used.push(name);
            out.not_modelled.push((flag_text(f, name), why));
        }
    }
    for name in f.values.keys() {
        if !used.contains(&name.as_str()) {
            out.no_effect.push(flag_text(f, name));
        }
    }
    Ok(out)
}

impl Import {
    /// The `[workload.model]` and `[workload.parallel]` tables.
    pub fn raw(&self) -> Result<(RawModel, RawParallel), String> {
        let mut model = toml::Table::new();
        let mut parallel = toml::Table::new();
        for k in &self.keys {
            let (table, name) = k.key.split_once('.').unwrap_or(("model", k.key));
            let t = if table == "model" {
                &mut model
            } else {
                &mut parallel
            };
            t.insert(name.to_string(), k.value.clone());
        }
        let m = toml::Value::Table(model)
            .try_into()
            .map_err(|e| format!("the model's keys: {e}"))?;
        let p = toml::Value::Table(parallel)
            .try_into()
            .map_err(|e| format!("the parallelism's keys: {e}"))?;
        Ok((m, p))
    }

    /// An error in the keys these flags set, `p` the workload's path,
    /// said at `at` with the flag behind the key.
    pub fn flag_error(&self, e: KeyError, p: &KeyPath, at: &KeyPath) -> KeyError {
        let key = e.path.0[p.0.len().min(e.path.0.len())..]
            .iter()
            .map(|s| match s {
                Seg::Key(k) => k.clone(),
                Seg::Index(i) => i.to_string(),
            })
            .collect::<Vec<_>>()
            .join(".");
        match self.keys.iter().find(|k| k.key == key) {
            Some(k) => KeyError::new(at, format!("{} ({key}): {}", k.from, e.message)),
            None => e,
        }
    }

    /// The model and its parallelism these flags give a job of `gpus`
    /// GPUs, an error naming the flag.
    pub fn resolve(&self, gpus: u64) -> Result<(Transformer, Parallel), String> {
        let (m, r) = self.raw()?;
        let p = KeyPath::root();
        super::model::model_and_parallel(&m, Some(&r), gpus, &p)
            .map_err(|e| self.flag_error(e, &p, &p).message)
    }

    /// These flags with a key set to another value (as if its flag had
    /// been given so).
    pub fn with(&self, key: &str, value: toml::Value) -> Import {
        let mut out = self.clone();
        for k in out.keys.iter_mut().filter(|k| k.key == key) {
            k.value = value.clone();
        }
        out
    }

    /// The keys as TOML, each with the flags it comes from, then the
    /// flags not modelled.
    pub fn to_toml(&self) -> String {
        let mut s = String::new();
        for table in ["model", "parallel"] {
            if table == "parallel" {
                s.push('\n');
            }
            let _ = writeln!(s, "[workload.{table}]");
            for k in self.keys.iter().filter(|k| k.key.starts_with(table)) {
                let line = format!("{} = {}", &k.key[table.len() + 1..], k.value);
                let _ = writeln!(s, "{line:<26} # {}", k.from);
            }
        }
        if !self.not_modelled.is_empty() {
            let _ = writeln!(s, "\n# Read but not modelled:");
            for (flag, why) in &self.not_modelled {
                let _ = writeln!(s, "#   {flag}: {why}");
            }
        }
        if !self.no_effect.is_empty() {
            let _ = writeln!(
                s,
                "\n# No effect on the network or the GPUs' compute: {}",
                self.no_effect.join(" ")
            );
        }
        s
    }
}

/// The arguments a launch script gives its Python program
/// (`pretrain_gpt.py` or another `.py`): its command line with the
/// script's variables and arrays expanded (`$X`, `${X}`, `${X:-d}`,
/// `${X[@]}`); lines continued with `\`; comments dropped. A variable
/// the script does not set stays as written, and a flag that needs its
/// value says so.
pub fn script_args(text: &str) -> Result<Vec<String>, String> {
    let mut vars: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut command: Option<Vec<String>> = None;
    let mut lines = logical_lines(text).into_iter();
    while let Some((n, line)) = lines.next() {
        // A line the shell words cannot be read from (a here-document,
        // a quote closed lines later) gives the program no flags.
        let Ok(words) = shell_words::split(&line) else {
            continue;
        };
        let Some(first) = words.first() else { continue };
        let first = first.strip_prefix("export ").unwrap_or(first);
        let first = if first == "export" {
            match words.get(1) {
                Some(w) => w.as_str(),
                None => continue,
            }
        } else {
            first
        };
        if let Some((name, append, value)) = assignment(first) {
            let mut old = if append {
                vars.get(name).cloned().unwrap_or_default()
            } else {
                Vec::new()
            };
            if value.starts_with('(') {
                // An array, on this line or over several up to its `)`.
                let mut body = line[line.find('(').map_or(0, |i| i + 1)..].to_string();
                if !body.trim_end().ends_with(')') {
                    for (_, more) in lines.by_ref() {
                        body.push(' ');
                        body.push_str(&more);
                        if more.trim_end().ends_with(')') {
                            break;
                        }
                    }
                }
                let body = body.trim_end().trim_end_matches(')');
                let words = shell_words::split(body)
                    .map_err(|e| format!("script line {n}: {e}: array {name}"))?;
                old.extend(expand_all(&words, &vars));
            } else if append {
                // `X+=more` appends to the string.
                let mut v = old.join(" ");
                v.push_str(&expand(value, &vars));
                old = vec![v];
            } else {
                old.push(expand(value, &vars));
            }
            vars.insert(name.to_string(), old);
            continue;
        }
        if matches!(first, "echo" | "printf") {
            continue;
        }
        let words = expand_all(&words, &vars);
        let program = |w: &String| w.ends_with(".py") && !w.contains(char::is_whitespace);
        if let Some(at) = words.iter().position(program) {
            let pretrain = words[at].contains("pretrain");
            if pretrain || command.is_none() {
                command = Some(words[at + 1..].to_vec());
            }
        }
    }
    command.ok_or_else(|| {
        "no command running a Python program (such as pretrain_gpt.py) in the script".into()
    })
}

/// `NAME=value` or `NAME+=value` (a shell variable assignment, or an
/// append): the name, whether it appends, the value.
fn assignment(word: &str) -> Option<(&str, bool, &str)> {
    let (name, value) = word.split_once('=')?;
    let (name, append) = match name.strip_suffix('+') {
        Some(n) => (n, true),
        None => (name, false),
    };
    let ok = !name.is_empty()
        && !name.starts_with("--")
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    ok.then_some((name, append, value))
}

/// The script's lines, `\`-continued lines joined and comments dropped,
/// with their first line's number.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        if cur.is_empty() {
            start = i + 1;
        }
        let line = strip_comment(raw);
        match line.trim_end().strip_suffix('\\') {
            Some(body) => {
                cur.push_str(body);
                cur.push(' ');
            }
            None => {
                cur.push_str(line);
                if !cur.trim().is_empty() {
                    out.push((start, std::mem::take(&mut cur)));
                }
                cur.clear();
            }
        }
    }
    if !cur.trim().is_empty() {
        out.push((start, cur));
    }
    out
}

/// A line without its comment: a `#` that starts a word, outside quotes.
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double, mut prev) = (false, false, ' ');
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev.is_whitespace() => return &line[..i],
            _ => {}
        }
        prev = c;
    }
    line
}

/// Words with variables expanded: an array or an unquoted variable that
/// is a whole word splices its words in.
fn expand_all(words: &[String], vars: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for w in words {
        let name = w
            .strip_prefix("${")
            .and_then(|r| r.strip_suffix("[@]}").or_else(|| r.strip_suffix("[*]}")))
            .or_else(|| w.strip_prefix("${").and_then(|r| r.strip_suffix('}')))
            .or_else(|| w.strip_prefix('$'));
        match name.and_then(|n| vars.get(n)) {
            Some(v) => out.extend(
                v.iter()
                    .flat_map(|x| x.split_whitespace().map(String::from)),
            ),
            None => out.push(expand(w, vars)),
        }
    }
    out
}

/// A word with `$X`, `${X}` and `${X:-default}` replaced by the
/// variables' values (those the script sets; others stay as written).
fn expand(word: &str, vars: &BTreeMap<String, Vec<String>>) -> String {
    let mut out = String::new();
    let mut rest = word;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, default, len) = if let Some(body) = after.strip_prefix('{') {
            match body.find('}') {
                Some(end) => {
                    let inner = &body[..end];
                    let (n, d) = match inner.split_once(":-") {
                        Some((n, d)) => (n, Some(d)),
                        None => (inner, None),
                    };
                    (n, d, end + 2)
                }
                None => ("", None, 0),
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], None, end)
        };
        match (vars.get(name), default) {
            (Some(v), _) if !name.is_empty() => out.push_str(&v.join(" ")),
            (None, Some(d)) => out.push_str(d),
            _ => out.push_str(&rest[i..i + 1 + len]),
        }
        rest = &after[len..];
        if len == 0 && !after.is_empty() && name.is_empty() {
            // A lone `$`: keep it and go on.
            continue;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        shell_words::split(s).unwrap()
    }

    /// Megatron's defaults fill what the flags leave out: GeLU with a 4h
    /// FFN, LayerNorm, biases, tied embeddings, learned positions, fp32.
    #[test]
    fn flags_map_onto_keys_with_megatrons_defaults() {
        let f = Flags::parse(&words(
            "--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 \
             --max-position-embeddings 2048 --vocab-size 50257 --micro-batch-size 4 \
             --tensor-model-parallel-size 8 --lr 1e-4 --bf16",
        ));
        let i = import(&f, Some(64)).unwrap();
        let get = |k: &str| i.keys.iter().find(|x| x.key == k).unwrap().value.clone();
        assert_eq!(get("model.ffn").as_integer(), Some(8192));
        assert_eq!(get("model.global_batch").as_integer(), Some(32));
        assert_eq!(get("model.grad_bytes").as_integer(), Some(4));
        assert_eq!(get("model.norm").as_str(), Some("layernorm"));
        assert_eq!(get("model.positions").as_integer(), Some(2048));
        assert_eq!(get("model.tied").as_bool(), Some(true));
        assert_eq!(i.no_effect, ["--lr 1e-4"]);
        let f = Flags::parse(&words(
            "--hidden-size 4096 --swiglu --num-attention-heads 32",
        ));
        let e = import(&f, None).unwrap_err();
        assert!(e.contains("--num-layers is missing"), "{e}");
        let mut f = f;
        f.values.insert("num-layers".into(), Some("2".into()));
        f.values.insert("seq-length".into(), Some("4096".into()));
        f.values.insert("vocab-size".into(), Some("128256".into()));
        let i = import(&f, None).unwrap();
        let ffn = i.keys.iter().find(|x| x.key == "model.ffn").unwrap();
        assert_eq!(ffn.value.as_integer(), Some(10880));
        let f = Flags::parse(&words("--expert-tensor-parallel-size 2 --num-layers 2"));
        assert!(import(&f, None).unwrap_err().contains("expert TP"));
    }

    /// A script's arrays, string variables, defaults and continued lines
    /// reach the Python program's command line; comments do not.
    #[test]
    fn a_launch_script_gives_its_programs_flags() {
        let script = r#"#!/bin/bash
GPUS_PER_NODE=8
TP=${TP:-4}
MODEL_ARGS=(
    --num-layers 24   # the depth
    --hidden-size 2048
)
OTHER="--seq-length 2048 --lr 3e-4"
EXTRA=()
if [[ "$DTYPE" == "bf16" ]]; then
    EXTRA+=("--bf16" --vocab-size 32000)
fi
echo "running pretrain_gpt.py"
torchrun --nproc_per_node $GPUS_PER_NODE pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    --tensor-model-parallel-size $TP $OTHER ${EXTRA[@]} \
    --save $1
"#;
        let args = script_args(script).unwrap();
        assert_eq!(
            args,
            words("--num-layers 24 --hidden-size 2048 --tensor-model-parallel-size 4 --seq-length 2048 --lr 3e-4 --bf16 --vocab-size 32000 --save $1")
        );
        let e = script_args("echo hi\n").unwrap_err();
        assert!(e.contains("pretrain_gpt.py"), "{e}");
        let f = Flags::parse(&words("--tensor-model-parallel-size $TP"));
        let e = f.int("tensor-model-parallel-size").unwrap_err();
        assert!(e.contains("$TP is not set"), "{e}");
    }
}
