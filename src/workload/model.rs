//! Training jobs made from the model and its parallelism: a transformer
//! (Megatron-style), dense or with a mixture of experts, split by tensor
//! (TP), pipeline (PP), data (DP) and expert (EP, inside DP) parallelism,
//! with ZeRO sharding and sequence parallelism, as a task graph of
//! kernels and collectives per rank.
//!
//! Ranks: `tp x pp x dp` GPUs, placed by `order` (the first dimension
//! varies fastest: with "tp-dp-pp", the default and Megatron-Core's
//! order (its "tp-cp-ep-dp-pp" with EP inside DP), a TP group is
//! consecutive GPUs, so it sits inside a server). Stage s holds layers
//! `share(L, pp, s)`, the first stage the embedding and the last the
//! final norm and output layer. The embedding's output and the LM head's
//! input are TP collectives too, and the loss's three all-reduces.
//!
//! Per micro-batch (b sequences of s tokens, T = b s tokens), per layer,
//! per TP rank: attention then MLP, forward and backward, each a kernel
//! on the GPU's compute lane with a roofline time (`Gpu::time`); after
//! each of the four, the TP group all-reduces T h a bytes (a bytes per
//! activation), or with sequence parallelism all-gathers before and
//! reduce-scatters after, and (as Megatron-Core does, `Accounting`)
//! gathers a column-parallel part's input again before its backward.
//! Between stages each TP rank sends T h a bytes (T h a / tp with
//! sequence parallelism or in the papers' accounting; activations
//! forward, gradients backward) to the rank of the next (previous) stage
//! with the same TP and DP index. The micro-batches
//! (global batch / (b dp)) run in the schedule's order: GPipe (every
//! forward, then every backward) or 1F1B (pp - s - 1 forwards, then one
//! forward and one backward in turn, then the last backwards), or with
//! `virtual_stages` chunks per stage Megatron-Core's interleaved 1F1B
//! (`schedule`): a micro-batch goes through every stage once per chunk,
//! the last stage handing it back to the first.
//!
//! Context parallelism (`cp`): each rank holds s / cp tokens of each
//! sequence; its attention runs in cp steps while the keys and values
//! go round the CP ring (`attention`); the gradients are reduced over
//! the cp x dp ranks of a stage with the same TP index.
//!
//! Data parallelism: each rank's gradients (its tensors, `params`, at
//! `grad_bytes` each) are all-reduced (ZeRO 0) or reduce-scattered (ZeRO
//! 1 to 3, the distributed optimizer) over the DP group: each buffer at
//! once after the backward, or with `overlap` in Megatron-Core's buckets
//! as the last micro-batch's backward fills them, one bucket after
//! another on the communication stream. Then, as Megatron-Core's
//! `finalize_model_grads`, the norms' gradients over the TP group
//! (sequence parallelism) and a tied embedding's between the first and
//! last stage; then the optimizer step (memory-bound: 16 bytes read and
//! written per parameter it updates, its 1/dp share with ZeRO 1 to 3),
//! then with ZeRO 1 to 3 an all-gather of the updated parameters per
//! bucket. ZeRO 3 also all-gathers each layer's parameters over the DP
//! group before its forward and its backward of every micro-batch.
//!
//! Experts: every layer's MLP is `experts` experts, each token going to
//! `top_k` of them (routing balanced). An EP group is `ep` consecutive DP
//! ranks with the same TP index, each holding experts / ep of every
//! layer's experts; the tokens are all-to-all'ed to their experts and
//! back around the experts' kernel, forward and backward. The experts'
//! gradients are reduced over the dp / ep ranks that hold the same
//! experts, in buckets of their own.
//!
//! A kernel waits only for what it depends on: the compute lane runs one
//! kernel at a time in program order, TP collectives sit between the
//! kernels that need them, and the DP buckets overlap the backward.

use super::collective::{self, share, Algorithm, Collective, CollectiveRun, Emitter, Op};
use super::params::{self, Bucket, Param, Ready, Shape, Stage};
pub use super::training::Dim;
use super::training::{CommSpan, JobRun};
use crate::topology::GpuId;
use crate::units::SimTime;
use std::collections::HashMap;

/// The model.
#[derive(Clone, Debug)]
pub struct Transformer {
    pub layers: u64,
    pub hidden: u64,
    pub ffn: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub seq: u64,
    pub vocab: u64,
    pub micro_batch: u64,
    pub global_batch: u64,
    /// Ranks each sequence is split over (context parallelism, set from
    /// `Parallel::cp`): a rank holds s / cp of each sequence's tokens,
    /// and its queries attend to all s keys.
    pub cp: u64,
    /// Bytes per parameter (and per parameter all-gathered), per
    /// gradient reduced (4 with Megatron-Core's `--bf16`: gradients are
    /// reduced in fp32 unless `--grad-reduce-in-bf16`) and per
    /// activation.
    pub param_bytes: u64,
    pub grad_bytes: u64,
    pub act_bytes: u64,
    /// Norms are LayerNorm (a weight and a bias) or RMSNorm (a weight).
    pub layernorm: bool,
    /// Linear layers have biases.
    pub bias: bool,
    /// The output layer is the word embedding (tied); with pipeline
    /// parallelism the last stage keeps a copy, whose gradient is
    /// all-reduced with the first stage's.
    pub tied: bool,
    /// Rows of learned position embeddings (0: rotary, no parameters).
    pub positions: u64,
    /// Megatron's fused cross-entropy (`--cross-entropy-loss-fusion`):
    /// two TP all-reduces of the loss, not three.
    pub loss_fusion: bool,
    /// Causal attention: half the scores computed.
    pub causal: bool,
    /// The transformer layers' GEMMs in FP8 (Transformer Engine; the
    /// attention's scores and the output layer stay in BF16).
    pub fp8: bool,
    /// The distributed optimizer's parameter all-gathers in FP8, a byte
    /// per parameter (Megatron's `--fp8-param-gather`).
    pub fp8_param_gather: bool,
    /// Experts with an auxiliary load-balancing loss (Megatron's
    /// `--moe-aux-loss-coeff` above 0): its token counts all-reduced over
    /// TP.
    pub aux_loss: bool,
    /// A gated MLP (SwiGLU: three matrices) or a plain one (two).
    pub gated: bool,
    /// Mixture of experts in every layer's MLP (0: dense): experts, how
    /// many each token goes to, and an expert's FFN width.
    pub experts: u64,
    pub top_k: u64,
    pub expert_ffn: u64,
    /// The shared experts' FFN width (Megatron's
    /// `--moe-shared-expert-intermediate-size`; 0: none): a dense MLP
    /// every token goes through beside the routed experts.
    pub shared_ffn: u64,
    /// How the tokens reach their experts (Megatron's
    /// `--moe-token-dispatcher-type`).
    pub dispatcher: Dispatcher,
    /// Megatron's `--moe-expert-capacity-factor`: an expert takes at most
    /// ceil(k T' / E x factor) of a rank's T' tokens, the rest dropped.
    pub capacity_factor: Option<f64>,
    /// `--moe-pad-expert-input-to-capacity`: and every expert's input is
    /// padded to that capacity.
    pub pad_to_capacity: bool,
}

/// Megatron-Core's token dispatchers (`moe/token_dispatcher.py`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatcher {
    /// Tokens all-to-all'ed over EP to their experts and back.
    AllToAll,
    /// Every token of the TP x EP group gathered to every rank, each
    /// keeping those of its own experts, the results reduce-scattered
    /// back (Megatron's default).
    AllGather,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    GPipe,
    OneFOneB,
}

/// The groups of a stage a collective runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Group {
    /// Same DP index: the TP group.
    Tp,
    /// Same TP index: the DP group (dense gradients; Megatron-Core's
    /// `dp_cp` group).
    Dp,
    /// Same TP and DP index: the CP group.
    Cp,
    /// Same TP index, `ep` consecutive CP x DP indices: the EP group.
    Ep,
    /// Same TP index and place in the EP group: the experts' DP group.
    ExpertDp,
    /// Every TP index of an EP group's ranks (Megatron's `tp_ep_group`).
    TpEp,
}

/// How the model is split.
#[derive(Clone, Debug)]
pub struct Parallel {
    pub tp: u64,
    /// Context parallelism: each micro-batch's sequence split over `cp`
    /// ranks, placed next to TP (Megatron-Core's "tp-cp-..." orders); the
    /// gradients are reduced over cp x dp ranks.
    pub cp: u64,
    pub pp: u64,
    pub dp: u64,
    /// Expert parallelism, inside CP x DP: experts spread over `ep` ranks.
    pub ep: u64,
    pub schedule: Schedule,
    /// Model chunks per stage (Megatron's virtual pipeline, with 1F1B:
    /// the interleaved schedule). Chunk c of stage s is the model's piece
    /// c pp + s of pp v.
    pub virtual_stages: u64,
    /// Layers of the first and of the last stage when they differ from
    /// the others' (Megatron's `--decoder-first-pipeline-num-layers`,
    /// `--decoder-last-pipeline-num-layers`); the stages between share the
    /// rest evenly.
    pub first_layers: Option<u64>,
    pub last_layers: Option<u64>,
    pub zero: u8,
    pub sequence_parallel: bool,
    /// Whose accounting of the communication: Megatron-Core's as it runs
    /// or the papers'.
    pub accounting: Accounting,
    /// Rank placement, fastest-varying first.
    pub order: [Dim; 3],
    /// Elements per DP gradient bucket (Megatron-Core's
    /// `--ddp-bucket-size`; it buckets only with `overlap`, on the first
    /// stage).
    pub bucket: u64,
    /// Buckets reduced as the backward fills them (false: each buffer in
    /// one collective after the backward, Megatron-Core's default).
    pub overlap: bool,
    /// Activations recomputed in the backward.
    pub recompute: Recompute,
    /// Whose data parallelism: Megatron-Core's or DeepSpeed's.
    pub framework: Framework,
    /// TP collectives beside the GEMMs they feed or drain (with sequence
    /// parallelism; Megatron's `--tp-comm-overlap`).
    pub tp_overlap: bool,
    /// The distributed optimizer's parameter all-gathers overlapped with
    /// the next iteration's first forward (Megatron's
    /// `--overlap-param-gather`).
    pub param_overlap: bool,
    /// ZeRO 3: parameter elements gathered ahead of the layer that needs
    /// them (DeepSpeed's `stage3_prefetch_bucket_size`; 0: each layer's
    /// as it comes).
    pub prefetch: u64,
}

/// Whose data parallelism reduces the gradients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framework {
    /// Megatron-Core's DDP and distributed optimizer (ZeRO 1): buckets
    /// only with overlap and on the first stage, padded; reduced after
    /// the last micro-batch's backward.
    Megatron,
    /// DeepSpeed's ZeRO (`runtime/zero/stage_1_and_2.py`,
    /// `stage3.py`): buckets of `reduce_bucket_size` elements on every
    /// stage as the backward fills them, on the compute stream unless
    /// `overlap_comm`; ZeRO 2 and 3 reduce at every micro-batch (the
    /// gradients are kept as partitions), ZeRO 0 and 1 at the last.
    DeepSpeed,
}

/// Activation recomputation (Korthikanti et al. 2022; Megatron's
/// `--recompute-granularity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recompute {
    None,
    /// The attention's scores and weighted sum, again in the backward.
    Selective,
    /// Every layer's forward, again before its backward, from its input.
    Full,
}

/// Whose accounting of a job's communication the graph follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accounting {
    /// Megatron-Core as it runs (its `schedules.get_tensor_shapes` and
    /// `tensor_parallel/layers.py`): every TP rank sends the whole
    /// micro-batch's activations to the next stage (a 1/tp share with
    /// sequence parallelism), and with sequence parallelism the backward
    /// of each column-parallel part gathers its saved input again for
    /// the weight gradient (6 all-gathers and 4 reduce-scatters per layer
    /// and micro-batch).
    MegatronCore,
    /// The 2021 and 2022 papers' (Narayanan et al., Korthikanti et al.):
    /// a 1/tp share between stages (the scatter/gather optimization,
    /// since removed), and 4 all-gathers and 4 reduce-scatters per layer
    /// and micro-batch with sequence parallelism.
    Paper,
}

/// A GPU's roofline.
#[derive(Clone, Copy, Debug)]
pub struct Gpu {
    /// Peak dense FLOP/s at the model's precision (BF16).
    pub flops: f64,
    /// Peak dense FP8 FLOP/s, for the GEMMs of an FP8 model.
    pub fp8_flops: f64,
    /// HBM bytes per second.
    pub hbm: f64,
    /// Share of both peaks a kernel reaches.
    pub efficiency: f64,
    /// Its generation, for NCCL's tuning constants.
    pub arch: crate::workload::tuner::Arch,
    /// Times given per kernel (by `KernelKind`), instead of the
    /// roofline's.
    pub given: [Option<SimTime>; 9],
}

impl Gpu {
    /// A100 SXM 80 GB: 312 TFLOP/s dense BF16, no FP8 (its GEMMs at the
    /// BF16 peak), 2.039 TB/s HBM2e.
    pub const A100: Gpu = Gpu {
        flops: 312e12,
        fp8_flops: 312e12,
        hbm: 2.039e12,
        efficiency: 0.6,
        arch: crate::workload::tuner::Arch::Ampere,
        given: [None; 9],
    };
    /// H100 SXM: 989 TFLOP/s dense BF16, 1,979 FP8, 3.35 TB/s HBM3.
    pub const H100: Gpu = Gpu {
        flops: 989e12,
        fp8_flops: 1979e12,
        hbm: 3.35e12,
        efficiency: 0.6,
        arch: crate::workload::tuner::Arch::Hopper,
        given: [None; 9],
    };
    /// B200: 2.25 PFLOP/s dense BF16, 4.5 FP8, 8 TB/s HBM3e.
    pub const B200: Gpu = Gpu {
        flops: 2.25e15,
        fp8_flops: 4.5e15,
        hbm: 8e12,
        efficiency: 0.6,
        arch: crate::workload::tuner::Arch::Blackwell,
        given: [None; 9],
    };

    /// A kernel's time: the one given for its kind, else the roofline's.
    pub fn kernel_time(&self, k: Kernel) -> SimTime {
        self.given[k.kind as usize].unwrap_or_else(|| self.time(k))
    }

    /// A kernel's roofline time: the slower of its FLOPs at the compute
    /// peaks (its FP8 ones at the FP8 peak) and its bytes at the HBM
    /// bandwidth, both at `efficiency`.
    pub fn time(&self, k: Kernel) -> SimTime {
        let compute = (k.flops - k.fp8) / self.flops + k.fp8 / self.fp8_flops;
        let s = compute.max(k.bytes / self.hbm) / self.efficiency;
        SimTime((s * 1e12).ceil() as u64)
    }
}

/// What a kernel does: floating-point operations and HBM bytes moved,
/// and which of the step's kernels it is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Kernel {
    pub flops: f64,
    /// Of them, those run at the FP8 peak (GEMMs, with `fp8`).
    pub fp8: f64,
    pub bytes: f64,
    pub kind: KernelKind,
}

impl Kernel {
    /// The backward of a forward kernel: twice its work.
    fn backward(self) -> Kernel {
        use KernelKind::*;
        Kernel {
            flops: self.flops * 2.0,
            fp8: self.fp8 * 2.0,
            bytes: self.bytes * 2.0,
            kind: match self.kind {
                AttentionForward => AttentionBackward,
                MlpForward => MlpBackward,
                ExpertsForward => ExpertsBackward,
                HeadForward => HeadBackward,
                other => other,
            },
        }
    }
}

/// The kernels a step runs (per layer and micro-batch, on one rank),
/// whose times may be given instead of the roofline's
/// (`[workload.gpu.kernels]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelKind {
    AttentionForward,
    AttentionBackward,
    MlpForward,
    MlpBackward,
    ExpertsForward,
    ExpertsBackward,
    HeadForward,
    HeadBackward,
    Optimizer,
}

impl KernelKind {
    pub const ALL: [KernelKind; 9] = [
        KernelKind::AttentionForward,
        KernelKind::AttentionBackward,
        KernelKind::MlpForward,
        KernelKind::MlpBackward,
        KernelKind::ExpertsForward,
        KernelKind::ExpertsBackward,
        KernelKind::HeadForward,
        KernelKind::HeadBackward,
        KernelKind::Optimizer,
    ];

    /// Its key under `[workload.gpu.kernels]`.
    pub fn name(self) -> &'static str {
        match self {
            KernelKind::AttentionForward => "attention_forward",
            KernelKind::AttentionBackward => "attention_backward",
            KernelKind::MlpForward => "mlp_forward",
            KernelKind::MlpBackward => "mlp_backward",
            KernelKind::ExpertsForward => "experts_forward",
            KernelKind::ExpertsBackward => "experts_backward",
            KernelKind::HeadForward => "head_forward",
            KernelKind::HeadBackward => "head_backward",
            KernelKind::Optimizer => "optimizer",
        }
    }
}

impl Transformer {
    /// Bytes per parameter the distributed optimizer all-gathers.
    pub fn gathered_bytes(&self) -> u64 {
        if self.fp8_param_gather {
            1
        } else {
            self.param_bytes
        }
    }

    /// Width of the keys and values (grouped-query attention).
    pub fn kv_hidden(&self) -> u64 {
        self.hidden * self.kv_heads / self.heads
    }

    /// Parameters of a layer's attention: Q, K, V and output projections.
    pub fn attn_params(&self) -> u64 {
        let h = self.hidden;
        h * (h + 2 * self.kv_hidden()) + h * h
    }

    /// The shape the parameter list is made from.
    pub fn shape(&self) -> Shape {
        Shape {
            hidden: self.hidden,
            kv_hidden: self.kv_hidden(),
            ffn: self.ffn,
            mats: self.mats(),
            experts: self.experts,
            expert_ffn: self.expert_ffn,
            shared_ffn: self.shared_ffn,
            vocab: self.vocab,
            layernorm: self.layernorm,
            bias: self.bias,
            tied: self.tied,
            positions: self.positions,
        }
    }

    fn mats(&self) -> u64 {
        if self.gated {
            3
        } else {
            2
        }
    }

    /// A dense layer's MLP parameters (none with experts).
    pub fn mlp_params(&self) -> u64 {
        if self.experts > 0 {
            return 0;
        }
        self.mats() * self.hidden * self.ffn
    }

    /// One expert's parameters.
    pub fn expert_params(&self) -> u64 {
        self.mats() * self.hidden * self.expert_ffn
    }

    /// A rank's tokens of a micro-batch: b s / cp.
    pub fn tokens(&self) -> u64 {
        self.micro_batch * self.seq / self.cp
    }

    /// Of a kernel's GEMM FLOPs, those at the FP8 peak: all with `fp8`.
    fn fp8_share(&self, gemms: f64) -> f64 {
        if self.fp8 {
            gemms
        } else {
            0.0
        }
    }

    /// The attention's scores and weighted sum on one of `tp` ranks (and
    /// of `cp`, its s / cp queries against all s keys): 4 b s^2 h / (tp
    /// cp) FLOPs, half of them with a causal mask (a FlashAttention
    /// kernel skips the masked blocks; Megatron's own count,
    /// `num_floating_point_operations`, halves them too; with CP,
    /// Megatron gives each rank two mirrored chunks of the sequence so
    /// that every rank has half).
    pub fn attn_core_flops(&self, tp: u64) -> f64 {
        let (s, b, h) = (self.seq as f64, self.micro_batch as f64, self.hidden as f64);
        let full = 4.0 * b * s * s * h / (tp * self.cp) as f64;
        if self.causal {
            full / 2.0
        } else {
            full
        }
    }

    /// Forward attention of one layer on one of `tp` ranks: the
    /// projections (2 T P_attn / tp) and the scores and weighted sum
    /// (4 b s^2 h / tp); weights read once, activations in and out.
    pub fn attn(&self, tp: u64) -> Kernel {
        let (t, h, a) = (
            self.tokens() as f64,
            self.hidden as f64,
            self.act_bytes as f64,
        );
        let tpf = tp as f64;
        let gemms = 2.0 * t * self.attn_params() as f64 / tpf;
        let flops = gemms + self.attn_core_flops(tp);
        let weights = self.attn_params() as f64 * self.param_bytes as f64 / tpf;
        let qkv = (self.hidden + 2 * self.kv_hidden()) as f64 / tpf;
        let acts = t * a * (2.0 * h + qkv + 2.0 * h / tpf);
        Kernel {
            flops,
            fp8: self.fp8_share(gemms),
            bytes: weights + acts,
            kind: KernelKind::AttentionForward,
        }
    }

    /// The token copies one of `tp` ranks dispatches to the experts, of
    /// its T / tp tokens (with sequence parallelism; routing balanced):
    /// k T / tp; with a capacity factor at most E x the capacity
    /// (Megatron's `get_capacity`: ceil(k T / tp / E x factor)), and
    /// exactly that padded.
    pub fn routed(&self, tp: u64) -> u64 {
        let copies = (self.tokens() * self.top_k).div_ceil(tp);
        let Some(factor) = self.capacity_factor else {
            return copies;
        };
        let capacity = (copies as f64 / self.experts as f64 * factor).ceil() as u64;
        let full = capacity.saturating_mul(self.experts);
        if self.pad_to_capacity {
            full
        } else {
            copies.min(full)
        }
    }

    /// Forward of the experts one of `tp` ranks of an EP group of `ep`
    /// holds: its share of the token copies the TP group routes (routing
    /// balanced) through its experts.
    pub fn experts_kernel(&self, tp: u64, ep: u64) -> Kernel {
        let (h, a) = (self.hidden as f64, self.act_bytes as f64);
        let tpf = tp as f64;
        let copies = (self.routed(tp) * tp) as f64;
        let local = (self.experts / ep) as f64;
        let f = self.expert_ffn as f64 / tpf;
        Kernel {
            flops: 2.0 * copies * self.expert_params() as f64 / tpf,
            fp8: self.fp8_share(2.0 * copies * self.expert_params() as f64 / tpf),
            bytes: local * self.expert_params() as f64 * self.param_bytes as f64 / tpf
                + copies * a * (2.0 * h + self.mats() as f64 * f),
            kind: KernelKind::ExpertsForward,
        }
    }

    /// What a rank sends in one all-to-all of the EP group (dispatch or
    /// combine): its routed token copies of h activations.
    pub fn ep_bytes(&self, tp: u64) -> u64 {
        self.routed(tp) * self.hidden * self.act_bytes
    }

    /// Forward MLP of one layer on one of `tp` ranks.
    pub fn mlp(&self, tp: u64) -> Kernel {
        self.dense_mlp(tp, self.ffn)
    }

    /// Forward of a dense MLP `ffn` wide (a layer's, or the shared
    /// experts') on one of `tp` ranks.
    pub fn dense_mlp(&self, tp: u64, ffn: u64) -> Kernel {
        let (t, h, a) = (
            self.tokens() as f64,
            self.hidden as f64,
            self.act_bytes as f64,
        );
        let tpf = tp as f64;
        let f = ffn as f64 / tpf;
        let mats = if self.gated { 3.0 } else { 2.0 };
        let params = (mats as u64 * self.hidden * ffn) as f64;
        Kernel {
            flops: 2.0 * t * params / tpf,
            fp8: self.fp8_share(2.0 * t * params / tpf),
            bytes: params * self.param_bytes as f64 / tpf + t * a * (2.0 * h + mats * f),
            kind: KernelKind::MlpForward,
        }
    }

    /// Forward LM head (logits over the vocabulary) on one of `tp` ranks.
    pub fn head(&self, tp: u64) -> Kernel {
        let (t, h, v) = (self.tokens() as f64, self.hidden as f64, self.vocab as f64);
        let tpf = tp as f64;
        Kernel {
            flops: 2.0 * t * h * v / tpf,
            // Megatron's output layer is not one of Transformer Engine's
            // FP8 layers.
            fp8: 0.0,
            bytes: h * v * self.param_bytes as f64 / tpf
                + t * self.act_bytes as f64 * (h + v / tpf),
            kind: KernelKind::HeadForward,
        }
    }

    /// The bytes a TP collective of one layer part moves (nccl-tests'
    /// size): the micro-batch's activations, T h a.
    pub fn tp_bytes(&self) -> u64 {
        self.tokens() * self.hidden * self.act_bytes
    }

    /// What each TP rank sends to the next stage per micro-batch: the
    /// whole micro-batch's activations, or a 1/tp share of them (`split`:
    /// with sequence parallelism, or in the papers' accounting).
    pub fn pp_bytes(&self, tp: u64, split: bool) -> u64 {
        if split {
            self.tp_bytes().div_ceil(tp)
        } else {
            self.tp_bytes()
        }
    }
}

/// A `kind = "model"` job.
#[derive(Clone, Debug)]
pub struct ModelJob {
    pub gpus: Vec<GpuId>,
    pub iterations: u32,
    pub model: Transformer,
    pub parallel: Parallel,
    pub gpu: Gpu,
    pub algorithm: Algorithm,
    /// Channels of collectives that cross servers (default: 2 per NIC
    /// rail of the group; 1 inside a server, where NVLink is shared as a
    /// fluid whatever the channels).
    pub channels: Option<u32>,
    pub chunk: u64,
    pub pxn: bool,
    pub protocol: collective::Protocol,
    /// What the scenario left to NCCL's tuner.
    pub auto: collective::Auto,
    /// What the job's own settings ask for that is not modelled (a
    /// Megatron-LM flag and why it matters), said as a warning.
    pub not_modelled: Vec<String>,
}

/// One step of a stage's schedule: forward or backward of micro-batch i
/// through the stage's model chunk c.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    F(u64, u64),
    B(u64, u64),
}

/// What chunk `c` of stage `s` of a model split by `p` holds: the
/// model's piece c pp + s of pp v.
fn chunk_of(m: &Transformer, p: &Parallel, s: u64, c: u64) -> Stage {
    let pieces = p.pp * p.virtual_stages;
    let index = c * p.pp + s;
    Stage {
        tp: p.tp,
        ep: p.ep,
        pp: pieces,
        index,
        layers: piece_layers(m.layers, p, index),
    }
}

/// Layers of the model's piece `index` of pp x virtual_stages: an even
/// share, or with uneven first and last stages (one chunk each) theirs,
/// the stages between sharing the rest.
pub fn piece_layers(layers: u64, p: &Parallel, index: u64) -> u64 {
    let pieces = p.pp * p.virtual_stages;
    if p.first_layers.is_none() && p.last_layers.is_none() {
        return share(layers, pieces, index);
    }
    let last = pieces - 1;
    match (index, p.first_layers, p.last_layers) {
        (0, Some(f), _) => f,
        (i, _, Some(l)) if i == last => l,
        _ => {
            let ends = [p.first_layers, p.last_layers];
            let rest = layers - ends.iter().flatten().sum::<u64>();
            let between = pieces - ends.iter().flatten().count() as u64;
            let offset = u64::from(p.first_layers.is_some());
            share(rest, between, index - offset)
        }
    }
}

/// The parameters a rank of stage `s` holds, chunk after chunk, each in
/// Megatron-Core's order.
pub fn stage_params(m: &Transformer, p: &Parallel, s: u64) -> Vec<Param> {
    (0..p.virtual_stages)
        .flat_map(|c| params::stage_params(&m.shape(), chunk_of(m, p, s, c)))
        .collect()
}

/// The order stage `s` of `pp`, with `v` model chunks each, runs `m`
/// micro-batches in. 1F1B as Megatron-Core's schedules run it: with one
/// chunk, pp - s - 1 forwards then one forward and one backward in turn;
/// interleaved (`get_schedule_table`, `get_pp_rank_microbatches`), the
/// micro-batches in groups of pp, each group through every chunk in turn
/// (the backward through the chunks in reverse), 2 (pp - s - 1) + (v - 1)
/// pp forwards first.
pub fn schedule(kind: Schedule, pp: u64, v: u64, s: u64, m: u64) -> Vec<Step> {
    if kind == Schedule::GPipe {
        let f = (0..m).map(|i| Step::F(i, 0));
        return f.chain((0..m).map(|i| Step::B(i, 0))).collect();
    }
    let table: Vec<(u64, u64)> = (0..m)
        .step_by(pp as usize)
        .flat_map(|lo| {
            let hi = if lo + pp >= m { m } else { lo + pp };
            (0..v).flat_map(move |c| (lo..hi).map(move |i| (i, c)))
        })
        .collect();
    let total = m * v;
    let warm = if v == 1 {
        pp - s - 1
    } else {
        (pp - s - 1) * 2 + (v - 1) * pp
    }
    .min(total);
    let f = |k: u64| {
        let (i, c) = table[k as usize];
        Step::F(i, c)
    };
    let b = |k: u64| {
        let (i, c) = table[k as usize];
        Step::B(i, v - 1 - c)
    };
    let mut out: Vec<Step> = (0..warm).map(f).collect();
    for k in 0..total - warm {
        out.push(f(warm + k));
        out.push(b(k));
    }
    out.extend((total - warm..total).map(b));
    out
}

impl ModelJob {
    /// Micro-batches per iteration.
    pub fn micro_batches(&self) -> u64 {
        self.model.global_batch / (self.model.micro_batch * self.parallel.dp)
    }

    /// Ranks that share a stage's data: CP x DP (Megatron-Core's
    /// `dp_cp`), over which the gradients are reduced.
    pub fn data_ranks(&self) -> u64 {
        self.parallel.cp * self.parallel.dp
    }

    /// The GPU of the rank with these indices.
    pub fn gpu_of(&self, tp: u64, pp: u64, dp: u64) -> GpuId {
        self.gpus[self.rank_of(tp, pp, dp) as usize]
    }

    /// The rank with these indices, `tp` the TP and CP index (tp index +
    /// tp x cp index: CP is placed next to TP).
    pub fn rank_of(&self, tp: u64, pp: u64, dp: u64) -> u64 {
        let p = &self.parallel;
        let (mut rank, mut stride) = (0, 1);
        for d in p.order {
            let (i, n) = match d {
                Dim::Tp => (tp, p.tp * p.cp),
                Dim::Pp => (pp, p.pp),
                Dim::Dp => (dp, p.dp),
                // Inside DP, and next to TP: not placement dimensions of
                // their own.
                Dim::Ep | Dim::Cp => (0, 1),
            };
            rank += i * stride;
            stride *= n;
        }
        rank
    }

    /// The rank at place k (tp index + tp (cp index + cp dp index)) of
    /// stage s.
    pub fn rank_at(&self, s: u64, k: u64) -> u64 {
        let tc = self.parallel.tp * self.parallel.cp;
        self.rank_of(k % tc, s, k / tc)
    }

    /// What chunk `c` of stage `s` holds.
    fn chunk(&self, s: u64, c: u64) -> Stage {
        chunk_of(&self.model, &self.parallel, s, c)
    }

    /// Whether chunk `c` of stage `s` is the model's first piece (the
    /// embedding) or its last (the LM head).
    fn ends(&self, s: u64, c: u64) -> (bool, bool) {
        let x = self.chunk(s, c);
        (x.index == 0, x.index + 1 == x.pp)
    }

    /// The parameters a rank of stage `s` holds, in Megatron-Core's
    /// order.
    pub fn params(&self, s: u64) -> Vec<Param> {
        stage_params(&self.model, &self.parallel, s)
    }

    /// Elements a rank of stage `s` holds: those reduced over the whole
    /// DP group, and its experts'.
    pub fn rank_params(&self, s: u64) -> [u64; 2] {
        let mut n = [0; 2];
        for p in self.params(s) {
            n[usize::from(p.expert)] += p.numel;
        }
        n
    }

    /// Elements of one layer on a rank: those reduced over the whole DP
    /// group, and its experts'.
    pub fn layer_params(&self) -> [u64; 2] {
        let mut n = [0; 2];
        let middle = Stage {
            pp: 3,
            index: 1,
            layers: 1,
            ..self.chunk(0, 0)
        };
        for p in params::stage_params(&self.model.shape(), middle) {
            n[usize::from(p.expert)] += p.numel;
        }
        n
    }

    /// The gradient buckets of chunk `c` of a rank of stage `s`, per
    /// buffer (the whole DP group's, the experts' DP group's), in the
    /// backward's order. Megatron-Core buckets only with the reduction
    /// overlapped, and only the first stage's first chunk; elsewhere a
    /// buffer is one bucket.
    pub fn buckets(&self, s: u64, c: u64) -> [Vec<Bucket>; 2] {
        let p = &self.parallel;
        let ps = params::stage_params(&self.model.shape(), self.chunk(s, c));
        let megatron = p.framework == Framework::Megatron;
        let size = (!megatron || (p.overlap && s == 0 && c == 0)).then_some(p.bucket);
        let shard = |n: u64| (p.zero > 0 && megatron).then_some(n);
        [
            params::buckets(&ps, false, size, shard(self.data_ranks())),
            params::buckets(&ps, true, size, shard(self.data_ranks() / p.ep)),
        ]
    }

    /// The optimizer step of a rank of stage `s`: Adam reads and writes
    /// 16 bytes per parameter it updates (its 1/dp share with ZeRO).
    pub fn optimizer(&self, s: u64) -> Kernel {
        let p = &self.parallel;
        let [n, x] = self.rank_params(s);
        let (mut n, mut x) = (n as f64, x as f64);
        if p.zero > 0 {
            n /= self.data_ranks() as f64;
            x /= (self.data_ranks() / p.ep) as f64;
        }
        let n = n + x;
        Kernel {
            flops: 10.0 * n,
            fp8: 0.0,
            bytes: 16.0 * n,
            kind: KernelKind::Optimizer,
        }
    }
}

/// Where a model job's ranks are between iterations: each rank's last
/// task by stage and place (tp + tp * dp), and the next iteration to add
/// (see `TrainingGen`).
#[derive(Clone, Debug)]
pub struct ModelGen {
    ready: Vec<Vec<u32>>,
    pub next: u32,
}

impl ModelGen {
    /// Each rank's last task so far, by stage and place.
    pub fn ready(&self) -> &[Vec<u32>] {
        &self.ready
    }

    /// The job's start, at `start`.
    pub fn start(e: &mut Emitter, j: &ModelJob, start: SimTime) -> ModelGen {
        let p = &j.parallel;
        let begin = e.join(&[], start);
        ModelGen {
            ready: (0..p.pp)
                .map(|_| vec![begin; (p.tp * j.data_ranks()) as usize])
                .collect(),
            next: 0,
        }
    }

    /// Adds the next iteration; its collectives are appended to `runs`.
    pub fn iteration(
        &mut self,
        e: &mut Emitter,
        j: &ModelJob,
        job: &mut JobRun,
        runs: &mut Vec<CollectiveRun>,
    ) -> Result<(), String> {
        let it = self.next;
        self.next += 1;
        let all: Vec<u32> = self.ready.iter().flatten().copied().collect();
        let it_start = e.join(&all, SimTime::ZERO);
        // Megatron's --overlap-param-gather: the updated parameters are
        // gathered as the next iteration's forward needs them; after the
        // last iteration, once it is over.
        let defer = j.parallel.param_overlap && j.parallel.zero > 0;
        let mut g = Gen {
            j,
            it,
            runs,
            sends: HashMap::new(),
            job,
            fetch: defer && it > 0,
            defer,
        };
        g.iteration(e, &mut self.ready)?;
        let all: Vec<u32> = self.ready.iter().flatten().copied().collect();
        let end = e.join(&all, SimTime::ZERO);
        if defer && it + 1 == j.iterations {
            for (s, ready) in self.ready.iter_mut().enumerate() {
                g.gather_params(e, s as u64, ready)?;
            }
        }
        job.iterations.push((it_start, end));
        Ok(())
    }
}

/// A stage's DP buckets while its last backward runs: each buffer's
/// buckets, how many are reduced so far, and each rank's DP stream.
struct Grads<'a> {
    plan: &'a [Vec<Bucket>; 2],
    next: [usize; 2],
    dp_last: &'a mut Vec<u32>,
}

/// ZeRO 3's parameter gathers of one pass over a stage's layers, when
/// they are prefetched: each layer's start, and the end of the last
/// gather per place.
#[derive(Default)]
struct Prefetch {
    starts: Vec<Vec<u32>>,
    stream: Option<Vec<u32>>,
}

/// The DP groups gradients are reduced in, by buffer.
const GRAD_GROUPS: [Group; 2] = [Group::Dp, Group::ExpertDp];

/// Emits one iteration.
struct Gen<'j, 'r> {
    j: &'j ModelJob,
    it: u32,
    runs: &'r mut Vec<CollectiveRun>,
    /// Sends between stages not yet waited for: (receiving stage, step,
    /// place) to the task done when the data has arrived.
    sends: HashMap<(u64, Step, u64), u32>,
    /// Where each rank's kernels and communication are recorded.
    job: &'r mut JobRun,
    /// The first forward gathers the parameters the last iteration's
    /// optimizer updated (`param_overlap`).
    fetch: bool,
    /// This iteration's parameter all-gathers are left to the next.
    defer: bool,
}

impl Gen<'_, '_> {
    fn iteration(&mut self, e: &mut Emitter, ready: &mut [Vec<u32>]) -> Result<(), String> {
        let p = &self.j.parallel;
        let m = self.j.micro_batches();
        let v = p.virtual_stages;
        let plans: Vec<Vec<Step>> = (0..p.pp)
            .map(|s| schedule(p.schedule, p.pp, v, s, m))
            .collect();
        let mut next = vec![0usize; p.pp as usize];
        let places = (p.tp * self.j.data_ranks()) as usize;
        // The DP stream of each rank: its last bucket's collective.
        let mut dp_last: Vec<Vec<u32>> = ready.to_vec();
        // Each chunk's buckets, and (Megatron-Core without overlap,
        // `finalize_model_grads`) every chunk's in turn once the stage's
        // last backward is done.
        let buckets: Vec<Vec<[Vec<Bucket>; 2]>> = (0..p.pp)
            .map(|s| (0..v).map(|c| self.j.buckets(s, c)).collect())
            .collect();
        let at_end = p.framework == Framework::Megatron && !p.overlap;
        let whole: Vec<[Vec<Bucket>; 2]> = buckets
            .iter()
            .map(|chunks| [0, 1].map(|gi| chunks.iter().flat_map(|b| b[gi].clone()).collect()))
            .collect();
        loop {
            let mut progress = false;
            for s in 0..p.pp {
                let su = s as usize;
                while let Some(&step) = plans[su].get(next[su]) {
                    let mut cur = ready[su].clone();
                    if self.receives(s, step) {
                        // Every place's send is made at once, or none yet.
                        if !self.sends.contains_key(&(s, step, 0)) {
                            break;
                        }
                        let got: Vec<u32> = (0..places as u64)
                            .map(|k| self.sends.remove(&(s, step, k)))
                            .collect::<Option<_>>()
                            .ok_or("a stage's sends are made for every rank at once")?;
                        for (c, t) in cur.iter_mut().zip(got) {
                            *c = e.join(&[*c, t], SimTime::ZERO);
                        }
                    }
                    match step {
                        Step::F(i, c) => self.forward(e, s, c, i == 0 && self.fetch, &mut cur)?,
                        Step::B(i, c) => {
                            // DeepSpeed's ZeRO 2 and 3 reduce every
                            // micro-batch's gradients.
                            let every = p.framework == Framework::DeepSpeed && p.zero >= 2;
                            let plan = match (i + 1 == m || every, at_end) {
                                (false, _) => None,
                                (true, false) => Some(&buckets[su][c as usize]),
                                (true, true) => (c == 0).then_some(&whole[su]),
                            };
                            let grads = plan.map(|plan| Grads {
                                plan,
                                next: [0; 2],
                                dp_last: &mut dp_last[su],
                            });
                            self.backward(e, s, c, &mut cur, grads)?
                        }
                    }
                    self.send_on(e, s, step, &cur)?;
                    ready[su] = cur;
                    next[su] += 1;
                    progress = true;
                }
            }
            if (0..p.pp as usize).all(|s| next[s] == plans[s].len()) {
                break;
            }
            if !progress {
                return Err(
                    "the pipeline schedule cannot go on (a stage waits for a step no stage sends)"
                        .into(),
                );
            }
        }
        // Once the gradients are reduced (Megatron-Core's
        // `finalize_model_grads`): sequence parallelism's norm gradients
        // over the TP group, then a tied embedding's over its two stages.
        for s in 0..p.pp {
            let su = s as usize;
            for (r, d) in ready[su].iter_mut().zip(&dp_last[su]) {
                *r = e.join(&[*r, *d], SimTime::ZERO);
            }
            if p.sequence_parallel {
                let n: u64 = self
                    .j
                    .params(s)
                    .iter()
                    .filter(|x| x.sequence)
                    .map(|x| x.numel)
                    .sum();
                let bytes = n * self.j.model.grad_bytes;
                self.collective(e, s, Group::Tp, Op::AllReduce, bytes, &mut ready[su])?;
            }
        }
        self.embedding_sync(e, ready)?;
        // The optimizer, then (ZeRO) the updated parameters gathered
        // back, bucket by bucket.
        for s in 0..p.pp {
            let su = s as usize;
            let opt = self.j.gpu.kernel_time(self.j.optimizer(s));
            for (k, r) in ready[su].iter_mut().enumerate() {
                let g = self.gpu_at(s, k as u64);
                let lane = e.graph.gpu_lane(g);
                *r = e.delay(opt, Some(lane), &[*r]);
                let rank = self.rank_at(s, k as u64);
                self.job.kernels.push((rank, self.it, *r));
            }
            if p.zero > 0 && !self.defer {
                self.gather_params(e, s, &mut ready[su])?;
            }
        }
        Ok(())
    }

    /// The distributed optimizer's updated parameters all-gathered over
    /// the DP groups, bucket by bucket, after `cur`.
    fn gather_params(&mut self, e: &mut Emitter, s: u64, cur: &mut [u32]) -> Result<(), String> {
        for c in 0..self.j.parallel.virtual_stages {
            for (group, plan) in GRAD_GROUPS.into_iter().zip(self.j.buckets(s, c)) {
                for b in plan {
                    let bytes = b.numel * self.j.model.gathered_bytes();
                    self.collective(e, s, group, Op::AllGather, bytes, cur)?;
                }
            }
        }
        Ok(())
    }

    /// With `param_overlap`, the last iteration's parameter all-gathers
    /// of chunk c start with its first forward: every bucket's on the DP
    /// stream, in the forward's order (the buckets' reverse); each
    /// bucket's end per place.
    fn fetch(
        &mut self,
        e: &mut Emitter,
        s: u64,
        c: u64,
        cur: &[u32],
    ) -> Result<Vec<(Bucket, Vec<u32>)>, String> {
        let mut stream = cur.to_vec();
        let mut out = Vec::new();
        for (group, plan) in GRAD_GROUPS.into_iter().zip(self.j.buckets(s, c)) {
            for b in plan.into_iter().rev() {
                let bytes = b.numel * self.j.model.gathered_bytes();
                self.collective(e, s, group, Op::AllGather, bytes, &mut stream)?;
                out.push((b, stream.clone()));
            }
        }
        Ok(out)
    }

    /// `cur` waits for the fetched buckets that hold parameters of the
    /// parts at `parts`.
    fn wait_for(e: &mut Emitter, fetched: &[(Bucket, Vec<u32>)], parts: &[Ready], cur: &mut [u32]) {
        for (b, ends) in fetched {
            if parts.iter().any(|&r| b.holds(r)) {
                for (c, &t) in cur.iter_mut().zip(ends) {
                    *c = e.join(&[*c, t], SimTime::ZERO);
                }
            }
        }
    }

    /// A tied embedding with pipeline parallelism: the first and the last
    /// stage all-reduce its gradient, rank by rank (Megatron-Core's
    /// embedding group).
    fn embedding_sync(&mut self, e: &mut Emitter, ready: &mut [Vec<u32>]) -> Result<(), String> {
        let (m, p) = (&self.j.model, &self.j.parallel);
        if !m.tied || p.pp < 2 {
            return Ok(());
        }
        let bytes = m.vocab / p.tp * m.hidden * m.grad_bytes;
        let last = p.pp - 1;
        for k in 0..p.tp * self.j.data_ranks() {
            let members = [(0, k), (last, k)];
            let at = [ready[0][k as usize], ready[last as usize][k as usize]];
            let ends = self.emit(e, &members, Op::AllReduce, bytes, &at, Dim::Pp)?;
            ready[0][k as usize] = ends[0];
            ready[last as usize][k as usize] = ends[1];
        }
        Ok(())
    }

    /// The GPU at place k (tp index + tp (cp index + cp dp index)) of
    /// stage s.
    fn gpu_at(&self, s: u64, k: u64) -> GpuId {
        self.j.gpus[self.rank_at(s, k) as usize]
    }

    /// The rank at place k of stage s.
    fn rank_at(&self, s: u64, k: u64) -> u32 {
        self.j.rank_at(s, k) as u32
    }

    /// One kernel on every rank of stage s.
    fn kernel(&mut self, e: &mut Emitter, s: u64, k: Kernel, cur: &mut [u32]) {
        let d = self.j.gpu.kernel_time(k);
        for (place, c) in cur.iter_mut().enumerate() {
            let lane = e.graph.gpu_lane(self.gpu_at(s, place as u64));
            *c = e.delay(d, Some(lane), &[*c]);
            self.job
                .kernels
                .push((self.rank_at(s, place as u64), self.it, *c));
        }
    }

    /// The places (tp index + tp x dp index) of each group of a stage.
    fn groups(&self, group: Group) -> Vec<Vec<u64>> {
        let p = &self.j.parallel;
        let (tp, dp, ep) = (p.tp, self.j.data_ranks(), p.ep);
        match group {
            Group::Cp => (0..tp)
                .flat_map(|a| {
                    (0..p.dp).map(move |d| (0..p.cp).map(|c| a + tp * (c + p.cp * d)).collect())
                })
                .collect(),
            Group::Tp => (0..dp)
                .map(|d| (0..tp).map(|i| i + d * tp).collect())
                .collect(),
            Group::Dp => (0..tp)
                .map(|a| (0..dp).map(|i| a + i * tp).collect())
                .collect(),
            Group::Ep => (0..tp)
                .flat_map(|a| {
                    (0..dp / ep).map(move |b| (0..ep).map(|i| a + tp * (b * ep + i)).collect())
                })
                .collect(),
            Group::ExpertDp => (0..tp)
                .flat_map(|a| {
                    (0..ep).map(move |x| (0..dp / ep).map(|j| a + tp * (x + ep * j)).collect())
                })
                .collect(),
            Group::TpEp => (0..dp / ep)
                .map(|b| (0..ep * tp).map(|i| i + tp * ep * b).collect())
                .collect(),
        }
    }

    /// A collective in each group of stage s of a kind. Each rank joins
    /// when its `cur` is done and goes on when its own part is.
    fn collective(
        &mut self,
        e: &mut Emitter,
        s: u64,
        group: Group,
        op: Op,
        bytes: u64,
        cur: &mut [u32],
    ) -> Result<(), String> {
        let groups = self.groups(group);
        if groups[0].len() < 2 || bytes == 0 {
            return Ok(());
        }
        let dim = match group {
            Group::Tp => Dim::Tp,
            Group::Dp | Group::ExpertDp => Dim::Dp,
            Group::Ep | Group::TpEp => Dim::Ep,
            Group::Cp => Dim::Cp,
        };
        for places in groups {
            let members: Vec<(u64, u64)> = places.iter().map(|&k| (s, k)).collect();
            let at: Vec<u32> = places.iter().map(|&k| cur[k as usize]).collect();
            let ends = self.emit(e, &members, op, bytes, &at, dim)?;
            for (&k, t) in places.iter().zip(ends) {
                cur[k as usize] = t;
            }
        }
        Ok(())
    }

    /// One collective of the ranks at `members` (stage, place), each
    /// joining when its `at` is done; each rank's end.
    fn emit(
        &mut self,
        e: &mut Emitter,
        members: &[(u64, u64)],
        op: Op,
        bytes: u64,
        at: &[u32],
        dim: Dim,
    ) -> Result<Vec<u32>, String> {
        let gpus: Vec<GpuId> = members.iter().map(|&(s, k)| self.gpu_at(s, k)).collect();
        let one_server = self.channels(e, &gpus) == 1 && self.j.channels.is_none();
        let c = Collective {
            op,
            algorithm: if Algorithm::for_op(op).contains(&self.j.algorithm) {
                self.j.algorithm
            } else {
                Algorithm::for_op(op)[0]
            },
            channels: self.channels(e, &gpus),
            gpus,
            bytes,
            chunk: self.j.chunk,
            pxn: self.j.pxn,
            root: 0,
            across: Algorithm::Ring,
            protocol: self.j.protocol,
            auto: collective::Auto {
                // One channel inside a server (see `channels`).
                channels: self.j.auto.channels && !one_server,
                ..self.j.auto
            },
        };
        let (mut run, ends) = collective::emit_per_rank(e, &c, at)?;
        run.iteration = Some(self.it);
        self.runs.push(run);
        for (i, ((&(s, k), &t), &from)) in members.iter().zip(&ends).zip(at).enumerate() {
            self.job.comm.push(CommSpan {
                rank: self.rank_at(s, k),
                iteration: self.it,
                dim,
                from,
                to: t,
                bytes: if i == 0 { bytes } else { 0 },
            });
        }
        Ok(ends)
    }

    fn channels(&self, e: &Emitter, gpus: &[GpuId]) -> u32 {
        let topo = e.topo;
        let host = topo.gpus[gpus[0].idx()].host;
        if gpus.iter().all(|g| topo.gpus[g.idx()].host == host) {
            return 1;
        }
        self.j
            .channels
            .unwrap_or_else(|| collective::default_channels(topo, gpus))
    }

    /// A TP collective after (or, with sequence parallelism, a gather
    /// before) a layer part: `before` says which.
    fn tp_sync(
        &mut self,
        e: &mut Emitter,
        s: u64,
        before: bool,
        cur: &mut [u32],
    ) -> Result<(), String> {
        let (sp, bytes) = (self.j.parallel.sequence_parallel, self.j.model.tp_bytes());
        match (sp, before) {
            (false, false) => self.collective(e, s, Group::Tp, Op::AllReduce, bytes, cur),
            (false, true) => Ok(()),
            (true, true) => self.collective(e, s, Group::Tp, Op::AllGather, bytes, cur),
            (true, false) => self.collective(e, s, Group::Tp, Op::ReduceScatter, bytes, cur),
        }
    }

    /// Megatron-Core with sequence parallelism: a column-parallel part's
    /// backward gathers its saved input again, for its weight gradient.
    fn regather(&mut self, e: &mut Emitter, s: u64, cur: &mut [u32]) -> Result<(), String> {
        let p = &self.j.parallel;
        if !p.sequence_parallel || p.accounting != Accounting::MegatronCore {
            return Ok(());
        }
        let bytes = self.j.model.tp_bytes();
        self.collective(e, s, Group::Tp, Op::AllGather, bytes, cur)
    }

    /// ZeRO 3: a layer's parameters gathered over the DP group first
    /// (and its experts' over the experts' DP group). Without prefetch,
    /// on the compute stream as the layer comes; with it (DeepSpeed's
    /// `stage3_prefetch_bucket_size`), on a stream of their own, each
    /// layer's gather starting once the one before is done and the layer
    /// `depth` before this one has begun, so that up to `prefetch`
    /// elements are fetched ahead of the compute.
    fn gather_layer(
        &mut self,
        e: &mut Emitter,
        s: u64,
        ahead: &mut Prefetch,
        cur: &mut [u32],
    ) -> Result<(), String> {
        let p = &self.j.parallel;
        if p.zero < 3 {
            return Ok(());
        }
        let params = self.j.layer_params();
        let [dense, experts] = params.map(|n| n * self.j.model.param_bytes);
        let depth = (p.prefetch / (params[0] + params[1]).max(1)).max(1) as usize;
        if p.prefetch == 0 {
            self.collective(e, s, Group::Dp, Op::AllGather, dense, cur)?;
            return self.collective(e, s, Group::ExpertDp, Op::AllGather, experts, cur);
        }
        ahead.starts.push(cur.to_vec());
        let from = ahead.starts.len().saturating_sub(1 + depth);
        let stream = ahead.stream.get_or_insert_with(|| cur.to_vec());
        let mut at: Vec<u32> = stream
            .iter()
            .zip(&ahead.starts[from])
            .map(|(&a, &b)| e.join(&[a, b], SimTime::ZERO))
            .collect();
        self.collective(e, s, Group::Dp, Op::AllGather, dense, &mut at)?;
        self.collective(e, s, Group::ExpertDp, Op::AllGather, experts, &mut at)?;
        for (c, &t) in cur.iter_mut().zip(&at) {
            *c = e.join(&[*c, t], SimTime::ZERO);
        }
        ahead.stream = Some(at);
        Ok(())
    }

    /// The MLP part of a layer: a dense MLP kernel, or with experts the
    /// tokens dispatched over the EP group, the experts' kernel, and the
    /// results combined back (`work`: 1 forward, 2 backward).
    fn mlp(
        &mut self,
        e: &mut Emitter,
        s: u64,
        backward: bool,
        cur: &mut [u32],
    ) -> Result<(), String> {
        let (m, p) = (&self.j.model, &self.j.parallel);
        let pass = |k: Kernel| if backward { k.backward() } else { k };
        if m.experts == 0 {
            let k = pass(m.mlp(p.tp));
            self.kernel(e, s, k, cur);
            return Ok(());
        }
        let (k, bytes) = (pass(m.experts_kernel(p.tp, p.ep)), m.ep_bytes(p.tp));
        if p.accounting == Accounting::Paper {
            self.collective(e, s, Group::Ep, Op::AllToAll, bytes, cur)?;
            self.kernel(e, s, k, cur);
            return self.collective(e, s, Group::Ep, Op::AllToAll, bytes, cur);
        }
        // Megatron-Core's alltoall dispatcher (`moe/token_dispatcher.py`):
        // the tokens' counts per expert all-gathered over TP x EP (E
        // int64 per rank) and, with the auxiliary loss, all-reduced over
        // TP (`moe/router.py`); the tokens and their routing
        // probabilities all-to-all'ed over EP; gathered over TP for the
        // experts (expert TP = TP) and reduce-scattered back; the tokens
        // all-to-all'ed home. The backward runs the same in reverse,
        // without the counts.
        if m.shared_ffn > 0 {
            // The shared experts first (Megatron-Core's MoE layer runs
            // them before the dispatch, without
            // `--moe-shared-expert-overlap`): a dense MLP with its own
            // TP gather and reduction.
            let k = pass(m.dense_mlp(p.tp, m.shared_ffn));
            self.part(e, s, backward, true, cur, |g, e, c| {
                g.kernel(e, s, k, c);
                Ok(())
            })?;
        }
        if m.dispatcher == Dispatcher::AllGather {
            return self.gathered_experts(e, s, k, backward, cur);
        }
        let counts = 8 * m.experts;
        let probs = m.routed(p.tp) * m.act_bytes;
        let gathered = m.routed(p.tp) * p.tp * m.hidden * m.act_bytes;
        let (ag, rs) = (Op::AllGather, Op::ReduceScatter);
        if !backward {
            // Padded to capacity, every count is known: none exchanged.
            if !m.pad_to_capacity {
                self.collective(e, s, Group::TpEp, ag, counts * p.tp * p.ep, cur)?;
            }
            if m.aux_loss {
                self.collective(e, s, Group::Tp, Op::AllReduce, counts, cur)?;
            }
            self.collective(e, s, Group::Ep, Op::AllToAll, bytes, cur)?;
            self.collective(e, s, Group::Ep, Op::AllToAll, probs, cur)?;
            self.collective(e, s, Group::Tp, ag, gathered, cur)?;
            self.kernel(e, s, k, cur);
            self.collective(e, s, Group::Tp, rs, gathered, cur)?;
            self.collective(e, s, Group::Ep, Op::AllToAll, bytes, cur)
        } else {
            self.collective(e, s, Group::Ep, Op::AllToAll, bytes, cur)?;
            self.collective(e, s, Group::Tp, ag, gathered, cur)?;
            self.kernel(e, s, k, cur);
            self.collective(e, s, Group::Tp, rs, gathered, cur)?;
            self.collective(e, s, Group::Ep, Op::AllToAll, probs, cur)?;
            self.collective(e, s, Group::Ep, Op::AllToAll, bytes, cur)
        }
    }

    /// Megatron-Core's allgather dispatcher: forward, over the TP x EP
    /// group, the routing map (a byte per token and expert), the routing
    /// probabilities and the tokens all-gathered from every rank's T /
    /// tp, the local experts' kernel on the tokens routed to them, the
    /// results reduce-scattered back; backward, the output's gradient
    /// gathered, the kernel, the tokens' and the probabilities'
    /// gradients reduce-scattered.
    fn gathered_experts(
        &mut self,
        e: &mut Emitter,
        s: u64,
        k: Kernel,
        backward: bool,
        cur: &mut [u32],
    ) -> Result<(), String> {
        let (m, p) = (&self.j.model, &self.j.parallel);
        let (ag, rs) = (Op::AllGather, Op::ReduceScatter);
        let group = p.tp * p.ep;
        let local = m.tokens().div_ceil(p.tp);
        let tokens = local * group * m.hidden * m.act_bytes;
        let probs = local * group * m.experts * m.act_bytes;
        let map = local * group * m.experts;
        if !backward {
            self.collective(e, s, Group::TpEp, ag, map, cur)?;
            self.collective(e, s, Group::TpEp, ag, probs, cur)?;
            self.collective(e, s, Group::TpEp, ag, tokens, cur)?;
            self.kernel(e, s, k, cur);
            self.collective(e, s, Group::TpEp, rs, tokens, cur)
        } else {
            self.collective(e, s, Group::TpEp, ag, tokens, cur)?;
            self.kernel(e, s, k, cur);
            self.collective(e, s, Group::TpEp, rs, tokens, cur)?;
            self.collective(e, s, Group::TpEp, rs, probs, cur)
        }
    }

    /// The word embedding's output (first stage): a lookup in each TP
    /// rank's share of the vocabulary, then all-reduced over the TP group
    /// (reduce-scattered with sequence parallelism); its backward
    /// all-gathers the gradient back with sequence parallelism.
    fn embedding(
        &mut self,
        e: &mut Emitter,
        backward: bool,
        cur: &mut [u32],
    ) -> Result<(), String> {
        let (sp, bytes) = (self.j.parallel.sequence_parallel, self.j.model.tp_bytes());
        let op = match (sp, backward) {
            (false, false) => Op::AllReduce,
            (true, false) => Op::ReduceScatter,
            (true, true) => Op::AllGather,
            (false, true) => return Ok(()),
        };
        self.collective(e, 0, Group::Tp, op, bytes, cur)
    }

    /// The vocabulary-parallel cross-entropy (last stage): the maximum
    /// logit, the target's logit and the sum of exponentials, each
    /// all-reduced over the TP group in fp32 (T values); fused, the last
    /// two in one all-reduce.
    fn cross_entropy(&mut self, e: &mut Emitter, s: u64, cur: &mut [u32]) -> Result<(), String> {
        let t = self.j.model.tokens() * 4;
        let sizes: &[u64] = if self.j.model.loss_fusion {
            &[t, 2 * t]
        } else {
            &[t, t, t]
        };
        for &bytes in sizes {
            self.collective(e, s, Group::Tp, Op::AllReduce, bytes, cur)?;
        }
        Ok(())
    }

    /// A layer's forward: attention and MLP with their TP collectives.
    fn layer_forward(
        &mut self,
        e: &mut Emitter,
        s: u64,
        attn: Kernel,
        cur: &mut [u32],
    ) -> Result<(), String> {
        self.part(e, s, false, true, cur, |g, e, c| {
            g.attention(e, s, attn, false, c)
        })?;
        let gemms = self.j.model.experts == 0;
        self.part(e, s, false, gemms, cur, |g, e, c| g.mlp(e, s, false, c))
    }

    /// One part of a layer (attention, or the MLP) between its TP
    /// collectives: the gather before (and, in the backward, the input
    /// gathered again: `regather`) and the reduction after. With
    /// `tp_overlap` (Megatron's `--tp-comm-overlap`, Transformer Engine's
    /// userbuffers) and sequence parallelism, the collectives of a part
    /// whose work is GEMMs (`gemms`) run beside them, and the part ends
    /// when all are done.
    fn part(
        &mut self,
        e: &mut Emitter,
        s: u64,
        regather: bool,
        gemms: bool,
        cur: &mut [u32],
        work: impl FnOnce(&mut Self, &mut Emitter, &mut [u32]) -> Result<(), String>,
    ) -> Result<(), String> {
        let p = &self.j.parallel;
        if !(p.tp_overlap && p.sequence_parallel && gemms) {
            self.tp_sync(e, s, true, cur)?;
            if regather {
                self.regather(e, s, cur)?;
            }
            work(self, e, cur)?;
            return self.tp_sync(e, s, false, cur);
        }
        let mut before = cur.to_vec();
        self.tp_sync(e, s, true, &mut before)?;
        if regather {
            self.regather(e, s, &mut before)?;
        }
        let mut body = cur.to_vec();
        work(self, e, &mut body)?;
        let mut after = cur.to_vec();
        self.tp_sync(e, s, false, &mut after)?;
        for (i, c) in cur.iter_mut().enumerate() {
            *c = e.join(&[before[i], body[i], after[i]], SimTime::ZERO);
        }
        Ok(())
    }

    /// The forward of chunk c of stage s; `fetch`: its parameters are
    /// gathered first (`param_overlap`), each layer waiting for its own.
    fn forward(
        &mut self,
        e: &mut Emitter,
        s: u64,
        c: u64,
        fetch: bool,
        cur: &mut [u32],
    ) -> Result<(), String> {
        let (m, tp) = (&self.j.model, self.j.parallel.tp);
        let (attn, head) = (m.attn(tp), m.head(tp));
        let fetched = if fetch {
            self.fetch(e, s, c, cur)?
        } else {
            Vec::new()
        };
        let (first, last) = self.j.ends(s, c);
        if first {
            Self::wait_for(e, &fetched, &[Ready::Embedding], cur);
            self.embedding(e, false, cur)?;
        }
        let layers = self.j.chunk(s, c).layers;
        let mut ahead = Prefetch::default();
        for l in 0..layers {
            let back = layers - 1 - l;
            let parts = [Ready::Layer(back, false), Ready::Layer(back, true)];
            Self::wait_for(e, &fetched, &parts, cur);
            self.gather_layer(e, s, &mut ahead, cur)?;
            self.layer_forward(e, s, attn, cur)?;
        }
        if last {
            Self::wait_for(e, &fetched, &[Ready::Head], cur);
            // The LM head is column-parallel: with sequence parallelism its
            // input is gathered first; its logits stay split by vocabulary.
            self.tp_sync(e, s, true, cur)?;
            self.kernel(e, s, head, cur);
            self.cross_entropy(e, s, cur)?;
        }
        Ok(())
    }

    /// Backward of chunk c of stage s (twice the forward's work). With
    /// `grads` (the last micro-batch), its DP buckets are reduced as
    /// their gradients are ready.
    fn backward(
        &mut self,
        e: &mut Emitter,
        s: u64,
        c: u64,
        cur: &mut [u32],
        mut grads: Option<Grads>,
    ) -> Result<(), String> {
        let j = self.j;
        let (m, p) = (&j.model, &j.parallel);
        let (mut attn, head) = (m.attn(p.tp).backward(), m.head(p.tp).backward());
        if p.recompute == Recompute::Selective {
            // The attention's scores and weighted sum computed again.
            attn.flops += m.attn_core_flops(p.tp);
        }
        let (first, last) = j.ends(s, c);
        if last {
            // The head's input gradient: reduce-scattered with sequence
            // parallelism (its input gathered again for the weight
            // gradient), all-reduced without.
            self.regather(e, s, cur)?;
            self.kernel(e, s, head, cur);
            self.tp_sync(e, s, false, cur)?;
            self.gradients(e, s, Ready::Head, cur, grads.as_mut())?;
        }
        let mut ahead = Prefetch::default();
        for i in 0..j.chunk(s, c).layers {
            self.gather_layer(e, s, &mut ahead, cur)?;
            if p.recompute == Recompute::Full {
                // The layer's forward again, from its saved input.
                self.layer_forward(e, s, m.attn(p.tp), cur)?;
            }
            let gemms = m.experts == 0;
            self.part(e, s, true, gemms, cur, |g, e, c| g.mlp(e, s, true, c))?;
            self.gradients(e, s, Ready::Layer(i, false), cur, grads.as_mut())?;
            self.part(e, s, true, true, cur, |g, e, c| {
                g.attention(e, s, attn, true, c)
            })?;
            self.gradients(e, s, Ready::Layer(i, true), cur, grads.as_mut())?;
        }
        if first {
            self.embedding(e, true, cur)?;
            self.gradients(e, s, Ready::Embedding, cur, grads.as_mut())?;
        }
        if let Some(mut g) = grads {
            // Without overlap, every bucket once the backward is done.
            for (gi, group) in GRAD_GROUPS.into_iter().enumerate() {
                while let Some(&b) = g.plan[gi].get(g.next[gi]) {
                    g.next[gi] += 1;
                    self.bucket(e, s, group, b, cur, g.dp_last)?;
                }
            }
        }
        Ok(())
    }

    /// The gradients ready at `now` are in: with overlap, each bucket
    /// whose last gradient that is goes to its group.
    fn gradients(
        &mut self,
        e: &mut Emitter,
        s: u64,
        now: Ready,
        cur: &mut [u32],
        g: Option<&mut Grads>,
    ) -> Result<(), String> {
        let Some(g) = g else { return Ok(()) };
        let p = &self.j.parallel;
        // DeepSpeed reduces a full bucket as the backward fills it, on
        // the compute stream without `overlap_comm`.
        let deepspeed = p.framework == Framework::DeepSpeed;
        let (overlap, blocking) = (p.overlap, deepspeed && !p.overlap);
        if !overlap && !deepspeed {
            return Ok(());
        }
        for (gi, group) in GRAD_GROUPS.into_iter().enumerate() {
            while let Some(&b) = g.plan[gi].get(g.next[gi]).filter(|b| b.ready <= now) {
                g.next[gi] += 1;
                self.bucket(e, s, group, b, cur, g.dp_last)?;
                if blocking {
                    cur.copy_from_slice(g.dp_last);
                }
            }
        }
        Ok(())
    }

    /// One bucket's reduction on the DP stream: after the gradients (at
    /// `cur`) and the bucket before; all-reduced, or reduce-scattered with
    /// the distributed optimizer (ZeRO 1 to 3), at `grad_bytes` each.
    fn bucket(
        &mut self,
        e: &mut Emitter,
        s: u64,
        group: Group,
        b: Bucket,
        cur: &[u32],
        dp_last: &mut [u32],
    ) -> Result<(), String> {
        let p = &self.j.parallel;
        if self.groups(group)[0].len() < 2 {
            return Ok(());
        }
        let op = if p.zero == 0 {
            Op::AllReduce
        } else {
            Op::ReduceScatter
        };
        let mut at: Vec<u32> = cur
            .iter()
            .zip(dp_last.iter())
            .map(|(&c, &d)| e.join(&[c, d], SimTime::ZERO))
            .collect();
        let bytes = b.numel * self.j.model.grad_bytes;
        self.collective(e, s, group, op, bytes, &mut at)?;
        dp_last.copy_from_slice(&at);
        Ok(())
    }

    /// Whether step `step` of stage s waits for what another stage sends
    /// it: the chunk's input from the piece before (forward), or its
    /// output's gradient from the piece after (backward).
    fn receives(&self, s: u64, step: Step) -> bool {
        let (first, last) = match step {
            Step::F(_, c) | Step::B(_, c) => self.j.ends(s, c),
        };
        match step {
            Step::F(..) => !first,
            Step::B(..) => !last,
        }
    }

    /// Where step `step` of stage s sends its result: the stage, and the
    /// step it feeds there (the next piece's forward, the previous
    /// piece's backward; the wrap from the last stage to the first, and
    /// back, changes chunk).
    fn destination(&self, s: u64, step: Step) -> Option<(u64, Step)> {
        let (pp, v) = (self.j.parallel.pp, self.j.parallel.virtual_stages);
        match step {
            Step::F(i, c) if s + 1 < pp => Some((s + 1, Step::F(i, c))),
            Step::F(i, c) if c + 1 < v => Some((0, Step::F(i, c + 1))),
            Step::B(i, c) if s > 0 => Some((s - 1, Step::B(i, c))),
            Step::B(i, c) if c > 0 => Some((pp - 1, Step::B(i, c - 1))),
            _ => None,
        }
    }

    /// After step `step` of stage s: activations to the next piece
    /// (forward) or gradients to the one before (backward).
    fn send_on(&mut self, e: &mut Emitter, s: u64, step: Step, cur: &[u32]) -> Result<(), String> {
        let p = &self.j.parallel;
        let Some((to, fed)) = self.destination(s, step) else {
            return Ok(());
        };
        let split = p.sequence_parallel || p.accounting == Accounting::Paper;
        let bytes = self.j.model.pp_bytes(p.tp, split);
        for (k, &c) in cur.iter().enumerate() {
            let k = k as u64;
            let t = self.transfer(e, (s, k), (to, k), bytes, c, Dim::Pp)?;
            self.sends.insert((to, fed, k), t);
        }
        Ok(())
    }

    /// A write of `bytes` from the rank at `from` (stage, place) to the
    /// one at `to`, after `after`; the task done when it has arrived.
    fn transfer(
        &mut self,
        e: &mut Emitter,
        from: (u64, u64),
        to: (u64, u64),
        bytes: u64,
        after: u32,
        dim: Dim,
    ) -> Result<u32, String> {
        let (a, b) = (self.gpu_at(from.0, from.1), self.gpu_at(to.0, to.1));
        let t = e.send(a, b, bytes, 0, &[after])?;
        for (rank, b) in [
            (self.rank_at(from.0, from.1), bytes),
            (self.rank_at(to.0, to.1), 0),
        ] {
            self.job.comm.push(CommSpan {
                rank,
                iteration: self.it,
                dim,
                from: after,
                to: t,
                bytes: b,
            });
        }
        Ok(t)
    }

    /// A layer's attention kernel `k`; with context parallelism as
    /// Transformer Engine's ring (`cp_comm_type = "p2p"`, Megatron's
    /// default) runs it: in cp steps, each the rank's queries against one
    /// rank's keys and values (1/cp of the work), while that block goes
    /// on to the next rank of the CP ring: 2 T h_kv a / tp bytes, twice
    /// that in the backward, where the keys' and values' gradients travel
    /// with them.
    fn attention(
        &mut self,
        e: &mut Emitter,
        s: u64,
        k: Kernel,
        backward: bool,
        cur: &mut [u32],
    ) -> Result<(), String> {
        let (m, p) = (&self.j.model, &self.j.parallel);
        let cp = p.cp;
        if cp == 1 {
            self.kernel(e, s, k, cur);
            return Ok(());
        }
        let passes = if backward { 2 } else { 1 };
        let block = passes * 2 * m.tokens() * (m.kv_hidden() / p.tp) * m.act_bytes;
        let n = cp as f64;
        let piece = Kernel {
            flops: k.flops / n,
            fp8: k.fp8 / n,
            bytes: k.bytes / n,
            kind: k.kind,
        };
        let ring = self.groups(Group::Cp);
        // When the block each place works on next has arrived.
        let mut have = cur.to_vec();
        for step in 0..cp {
            let mut next = have.clone();
            if step + 1 < cp {
                for g in &ring {
                    for (i, &a) in g.iter().enumerate() {
                        let b = g[(i + 1) % g.len()];
                        let t =
                            self.transfer(e, (s, a), (s, b), block, have[a as usize], Dim::Cp)?;
                        next[b as usize] = t;
                    }
                }
            }
            for (c, &h) in cur.iter_mut().zip(&have) {
                *c = e.join(&[*c, h], SimTime::ZERO);
            }
            self.kernel(e, s, piece, cur);
            have = next;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1F1B: the last stage alternates from the start; the first runs
    /// pp - 1 forwards ahead; every step once.
    #[test]
    fn one_f_one_b_order() {
        use Step::*;
        assert_eq!(
            schedule(Schedule::OneFOneB, 4, 1, 3, 3),
            [F(0, 0), B(0, 0), F(1, 0), B(1, 0), F(2, 0), B(2, 0)]
        );
        assert_eq!(
            schedule(Schedule::OneFOneB, 4, 1, 0, 4),
            [
                F(0, 0),
                F(1, 0),
                F(2, 0),
                F(3, 0),
                B(0, 0),
                B(1, 0),
                B(2, 0),
                B(3, 0)
            ]
        );
        assert_eq!(
            schedule(Schedule::OneFOneB, 4, 1, 1, 4),
            [
                F(0, 0),
                F(1, 0),
                F(2, 0),
                B(0, 0),
                F(3, 0),
                B(1, 0),
                B(2, 0),
                B(3, 0)
            ]
        );
        assert_eq!(
            schedule(Schedule::GPipe, 2, 1, 0, 2),
            [F(0, 0), F(1, 0), B(0, 0), B(1, 0)]
        );
    }

    /// Interleaved 1F1B as Megatron-Core's table lays it out: with pp 2,
    /// 2 chunks and 4 micro-batches, the micro-batches go in groups of 2
    /// through chunk 0 then chunk 1; stage 0 runs 2 (2 - 0 - 1) + (2 - 1)
    /// 2 = 4 forwards first, stage 1 runs 2; the backward takes the
    /// chunks in reverse.
    #[test]
    fn interleaved_order() {
        use Step::*;
        assert_eq!(
            schedule(Schedule::OneFOneB, 2, 2, 0, 4),
            [
                F(0, 0),
                F(1, 0),
                F(0, 1),
                F(1, 1),
                F(2, 0),
                B(0, 1),
                F(3, 0),
                B(1, 1),
                F(2, 1),
                B(0, 0),
                F(3, 1),
                B(1, 0),
                B(2, 1),
                B(3, 1),
                B(2, 0),
                B(3, 0)
            ]
        );
        let last = schedule(Schedule::OneFOneB, 2, 2, 1, 4);
        assert_eq!(last[..4], [F(0, 0), F(1, 0), F(0, 1), B(0, 1)]);
        assert_eq!(last.len(), 16);
    }

    /// Placement: the first dimension of `order` varies fastest.
    #[test]
    fn ranks_are_placed_in_order() {
        let m = Transformer {
            layers: 4,
            hidden: 64,
            ffn: 256,
            heads: 4,
            kv_heads: 4,
            seq: 16,
            vocab: 100,
            micro_batch: 1,
            global_batch: 2,
            cp: 1,
            param_bytes: 2,
            grad_bytes: 2,
            act_bytes: 2,
            gated: true,
            layernorm: false,
            bias: false,
            tied: false,
            positions: 0,
            loss_fusion: false,
            causal: false,
            fp8: false,
            fp8_param_gather: false,
            aux_loss: false,
            experts: 0,
            top_k: 0,
            expert_ffn: 0,
            shared_ffn: 0,
            dispatcher: Dispatcher::AllToAll,
            capacity_factor: None,
            pad_to_capacity: false,
        };
        let mut j = ModelJob {
            gpus: (0..8).map(GpuId).collect(),
            iterations: 1,
            model: m,
            parallel: Parallel {
                tp: 2,
                cp: 1,
                pp: 2,
                dp: 2,
                schedule: Schedule::OneFOneB,
                virtual_stages: 1,
                first_layers: None,
                last_layers: None,
                zero: 0,
                sequence_parallel: false,
                accounting: Accounting::MegatronCore,
                ep: 1,
                order: [Dim::Tp, Dim::Pp, Dim::Dp],
                bucket: 1,
                overlap: true,
                recompute: Recompute::None,
                framework: Framework::Megatron,
                tp_overlap: false,
                param_overlap: false,
                prefetch: 0,
            },
            gpu: Gpu::H100,
            algorithm: Algorithm::Ring,
            channels: None,
            chunk: 1 << 19,
            pxn: true,
            protocol: collective::Protocol::Simple,
            auto: collective::Auto::default(),
            not_modelled: Vec::new(),
        };
        assert_eq!(
            [j.gpu_of(1, 0, 0), j.gpu_of(0, 1, 0), j.gpu_of(0, 0, 1)],
            [GpuId(1), GpuId(2), GpuId(4)]
        );
        j.parallel.order = [Dim::Tp, Dim::Dp, Dim::Pp];
        assert_eq!(
            [j.gpu_of(1, 0, 0), j.gpu_of(0, 1, 0), j.gpu_of(0, 0, 1)],
            [GpuId(1), GpuId(4), GpuId(2)]
        );
        assert_eq!(j.micro_batches(), 1);
    }

    /// Llama-3-8B-like: 32 layers of 218 M parameters (with 8 KV heads),
    /// 7.5 B in the layers; a layer's forward on 4,096 tokens is about
    /// 2 x 4096 x 218 M + 4 x 4096^2 x 4096 FLOPs.
    #[test]
    fn parameters_and_flops_follow_the_formulas() {
        let m = Transformer {
            layers: 32,
            hidden: 4096,
            ffn: 14336,
            heads: 32,
            kv_heads: 8,
            seq: 4096,
            vocab: 128_256,
            micro_batch: 1,
            global_batch: 8,
            cp: 1,
            param_bytes: 2,
            grad_bytes: 2,
            act_bytes: 2,
            gated: true,
            layernorm: false,
            bias: false,
            tied: false,
            positions: 0,
            loss_fusion: false,
            causal: false,
            fp8: false,
            fp8_param_gather: false,
            aux_loss: false,
            experts: 0,
            top_k: 0,
            expert_ffn: 0,
            shared_ffn: 0,
            dispatcher: Dispatcher::AllToAll,
            capacity_factor: None,
            pad_to_capacity: false,
        };
        assert_eq!(m.kv_hidden(), 1024);
        assert_eq!(m.attn_params(), 4096 * (4096 + 2048) + 4096 * 4096);
        let layer = Stage {
            tp: 1,
            ep: 1,
            pp: 3,
            index: 1,
            layers: 1,
        };
        let n: u64 = params::stage_params(&m.shape(), layer)
            .iter()
            .map(|p| p.numel)
            .sum();
        assert_eq!(n, 41_943_040 + 176_160_768 + 8192);
        let f = m.attn(1).flops + m.mlp(1).flops;
        let want = 2.0 * 4096.0 * (41_943_040.0 + 176_160_768.0) + 4.0 * 4096f64.powi(3);
        assert!((f - want).abs() < 1.0, "{f} {want}");
        assert!((m.attn(8).flops * 8.0 - m.attn(1).flops).abs() < 1.0);
        // Compute-bound on an H100: FLOPs at 60% of 989 TFLOP/s.
        let t = Gpu::H100.time(m.mlp(1));
        let want = 2.0 * 4096.0 * 176_160_768.0 / (989e12 * 0.6);
        assert!((t.0 as f64 * 1e-12 - want).abs() < 1e-9, "{t:?}");
        // The optimizer step is memory-bound.
        let opt = Kernel {
            flops: 10.0,
            fp8: 0.0,
            bytes: 16.0,
            kind: KernelKind::Optimizer,
        };
        assert_eq!(
            Gpu::H100.time(opt),
            SimTime((16.0 / 3.35e12 / 0.6 * 1e12f64).ceil() as u64)
        );
        assert_eq!(m.tp_bytes(), 4096 * 4096 * 2);
    }
}
