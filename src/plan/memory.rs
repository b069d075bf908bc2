//! Does a training job fit: the memory each GPU of its busiest pipeline
//! stage needs for the model's parameters, gradients, optimizer state
//! and activations, for the job's parallelism; and the smallest TP x PP
//! that fits.
//!
//! Parameters are counted tensor by tensor (`workload::params`, the
//! stage's own). Bytes per parameter, as Megatron-Core's distributed
//! optimizer documents them: the weights (`param_bytes`), the gradient
//! buffer (`grad_bytes`), and Adam's state: two fp32 moments, an fp32
//! master copy of weights kept in less than fp32, and an fp32 copy of
//! gradients reduced in less than fp32 (bf16 weights with fp32
//! gradients: 2 + 4 + 12 = 18 bytes; 6 + 12 / d with the distributed
//! optimizer over d data-parallel ranks, CP x DP with context
//! parallelism). ZeRO 2 shards the gradients too, ZeRO 3 the weights as
//! well. Experts' state is sharded over their own DP group (cp dp / ep).
//! With context parallelism every activation is of s / cp tokens.
//!
//! Activations per layer and micro-batch, after Korthikanti et al. 2022
//! ("Reducing activation recomputation in large transformer models",
//! section 4), generalised to the layer's own shape: s b (10 h) bytes not
//! split by TP (the two norms' inputs, the attention's and the MLP's
//! inputs, two dropout masks; split too with sequence parallelism), and s
//! b (4 h + 4 h_kv + 2 (m - 1) f + 2 f) / t split (Q, K, V, the output
//! projection's input, the MLP's first matrix's output and its
//! activation's, m the MLP's matrices: 24 s b h / t for a GPT layer, the
//! paper's 10 + 24 / t). Attention is FlashAttention's (Megatron's
//! default backend), which keeps no s x s score matrix, so selective
//! recomputation holds the same; full recomputation keeps each layer's
//! input, 2 s b h (/ t with sequence parallelism). The first stage of
//! 1F1B holds min(pp, micro-batches) micro-batches' activations, stage s
//! min(pp - s, m) (GPipe: all m); interleaved over v chunks of L / (pp v)
//! layers, stage s holds its warm-up's forwards and one more, that is
//! 2 (pp - s - 1) + (v - 1) pp + 1 chunks (the first stage's are
//! L (1 + (pp - 1) / (pp v)) layers' worth, as the paper says). The last
//! stage also holds its logits in fp32 for the loss, 4 s b V / t. Not
//! counted: the CUDA context, communication buffers and fragmentation
//! (leave them room with `usable`).

use crate::workload::model::{self, Parallel, Recompute, Schedule, Transformer};
use serde::Serialize;

/// One stage's memory per GPU, bytes.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StageMemory {
    pub stage: u64,
    /// Elements its ranks hold.
    pub params: u64,
    pub weights: f64,
    pub gradients: f64,
    pub optimizer: f64,
    /// Micro-batches whose activations it holds at once (interleaved:
    /// micro-batches times chunks).
    pub in_flight: u64,
    pub activations: f64,
    pub total: f64,
}

/// Adam's bytes per parameter for weights of `p` bytes and gradients
/// reduced in `g`: two fp32 moments, and fp32 copies of what is kept in
/// less.
pub fn optimizer_bytes(p: u64, g: u64) -> f64 {
    8.0 + if p < 4 { 4.0 } else { 0.0 } + if g < 4 { 4.0 } else { 0.0 }
}

/// Activation bytes of one layer and one micro-batch on a TP rank.
pub fn layer_activations(m: &Transformer, p: &Parallel) -> f64 {
    // A rank's share of the sequence (context parallelism).
    let s = (m.seq / m.cp) as f64;
    let (b, h) = (m.micro_batch as f64, m.hidden as f64);
    let t = p.tp as f64;
    let scale = m.act_bytes as f64 / 2.0;
    if p.recompute == Recompute::Full {
        let split = if p.sequence_parallel { t } else { 1.0 };
        return 2.0 * s * b * h * scale / split;
    }
    let (ffn, copies) = if m.experts > 0 {
        (m.expert_ffn as f64, m.top_k as f64)
    } else {
        (m.ffn as f64, 1.0)
    };
    let mats = if m.gated { 3.0 } else { 2.0 };
    let kv = m.kv_hidden() as f64;
    let whole = 10.0 * s * b * h * scale;
    // The shared experts: a dense MLP's activations too.
    let shared = m.shared_ffn as f64;
    let mlp = copies * (2.0 * (mats - 1.0) * ffn + 2.0 * ffn) + 2.0 * mats * shared;
    let split = s * b * (4.0 * h + 4.0 * kv + mlp) * scale;
    let whole = if p.sequence_parallel {
        whole / t
    } else {
        whole
    };
    whole + split / t
}

/// Micro-batches (through one chunk) stage `s` holds activations of at
/// once.
pub fn in_flight(p: &Parallel, s: u64, micro_batches: u64) -> u64 {
    let v = p.virtual_stages;
    match p.schedule {
        Schedule::GPipe => micro_batches,
        Schedule::OneFOneB if v == 1 => (p.pp - s).min(micro_batches),
        Schedule::OneFOneB => (2 * (p.pp - s - 1) + (v - 1) * p.pp + 1).min(micro_batches * v),
    }
}

/// Every stage's memory per GPU.
pub fn stages(m: &Transformer, p: &Parallel) -> Vec<StageMemory> {
    let micro_batches = m.global_batch / (m.micro_batch * p.dp);
    let layer = layer_activations(m, p);
    let (pb, gb) = (m.param_bytes as f64, m.grad_bytes as f64);
    let opt = optimizer_bytes(m.param_bytes, m.grad_bytes);
    (0..p.pp)
        .map(|s| {
            let mut n = [0u64; 2];
            for t in model::stage_params(m, p, s) {
                n[usize::from(t.expert)] += t.numel;
            }
            let [dense, experts] = n.map(|x| x as f64);
            // Sharded over CP x DP (Megatron-Core's dp_cp group).
            let data = p.dp * p.cp;
            let (d, de) = (data as f64, (data / p.ep) as f64);
            let shard = |x: f64, by: f64, from: u8| if p.zero >= from { x / by } else { x };
            let weights = shard(dense * pb, d, 3) + shard(experts * pb, de, 3);
            let gradients = shard(dense * gb, d, 2) + shard(experts * gb, de, 2);
            let optimizer = shard(dense * opt, d, 1) + shard(experts * opt, de, 1);
            let flight = in_flight(p, s, micro_batches);
            let chunk = model::piece_layers(m.layers, p, s);
            let mut activations = layer * chunk as f64 * flight as f64;
            if s + 1 == p.pp {
                let (sq, b) = ((m.seq / m.cp) as f64, m.micro_batch as f64);
                activations += 4.0 * sq * b * m.vocab as f64 / p.tp as f64;
            }
            StageMemory {
                stage: s,
                params: n[0] + n[1],
                weights,
                gradients,
                optimizer,
                in_flight: flight,
                activations,
                total: weights + gradients + optimizer + activations,
            }
        })
        .collect()
}

/// The stage that needs the most.
pub fn busiest(m: &Transformer, p: &Parallel) -> StageMemory {
    stages(m, p)
        .into_iter()
        .max_by(|a, b| a.total.total_cmp(&b.total))
        .expect("a job has a stage")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Megatron-Core's table of bytes per parameter: 18 for bf16 weights
    /// with fp32 gradients (6 + 12 / d distributed), 20 for fp16 with
    /// fp16 gradients (4 + 16 / d), 16 for fp32 (8 + 8 / d).
    #[test]
    fn bytes_per_parameter_follow_megatron_cores_table() {
        assert_eq!(2.0 + 4.0 + optimizer_bytes(2, 4), 18.0);
        assert_eq!(2.0 + 2.0 + optimizer_bytes(2, 2), 20.0);
        assert_eq!(4.0 + 4.0 + optimizer_bytes(4, 4), 16.0);
    }
}

#[cfg(test)]
mod interleaving {
    use super::*;
    use crate::scenario::megatron::{import, Flags};

    /// Interleaved 1F1B over v chunks: the first stage holds the
    /// activations of L (1 + (pp - 1) / (pp v)) layers (Korthikanti et
    /// al., section 4.2.3), more than the L of 1F1B with one chunk; the
    /// last stage holds (v - 1) pp + 1 chunks, not 1F1B's one
    /// micro-batch.
    #[test]
    fn the_first_stage_holds_more_with_chunks() {
        let job = |v: &str| {
            let args = format!(
                "--num-layers 16 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 \
                 --vocab-size 32000 --global-batch-size 16 --pipeline-model-parallel-size 4 \
                 --bf16 {v}"
            );
            let words = shell_words::split(&args).unwrap();
            let (m, p) = import(&Flags::parse(&words), Some(4))
                .unwrap()
                .resolve(4)
                .unwrap();
            let layer = layer_activations(&m, &p);
            let s = stages(&m, &p);
            let logits = 4.0 * 1024.0 * 32000.0;
            let last = (s[3].activations - logits) / layer;
            (s[0].activations / layer, last, s[0].in_flight)
        };
        let (first, _, flight) = job("");
        assert_eq!((first, flight), (16.0, 4));
        let (first, last, flight) = job("--num-virtual-stages-per-pipeline-rank 2");
        assert_eq!(first, 16.0 * (1.0 + 3.0 / 8.0));
        assert_eq!(flight, 11);
        // The last stage: (v - 1) pp + 1 = 5 chunks of 2 layers.
        assert_eq!(last, 10.0);
    }
}
