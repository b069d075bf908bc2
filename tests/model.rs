//! `kind = "model"`: a training job made from a transformer and its
//! parallelism. The collectives and transfers it makes follow the
//! formulas in the README, overlap shortens the step, and bad settings
//! name their key.

mod common;

use common::{error_of, run, run_with};
use std::collections::HashMap;

/// 16 GPUs (4 servers of 4): TP 2 x PP 2 x DP 4, a 4-layer model, 2
/// micro-batches of 1,024 tokens per DP rank.
const SMALL: &str = r#"
[topology]
kind = "rail-optimized"
hosts = 4
gpus_per_host = 4
hosts_per_leaf = 4
rails_per_leaf = 4
spines = 4
nic_speed = "400G"
uplink_speed = "400G"

[host]
pcie = "128GB/s"

[[workload]]
kind = "model"

[workload.model]
layers = 4
hidden = 1024
ffn = 4096
heads = 16
seq = 1024
vocab = 32000
global_batch = 8

[workload.parallel]
tp = 2
pp = 2
dp = 4
"#;

/// (collective, ranks, bytes) -> count.
fn census(s: &fabricsim::report::Summary) -> HashMap<(String, usize, u64), usize> {
    let mut m = HashMap::new();
    for c in &s.collectives {
        assert!(c.time_ps.is_some(), "{c:?}");
        *m.entry((c.collective.clone(), c.ranks, c.bytes))
            .or_insert(0) += 1;
    }
    m
}

// The model's figures: T = 1024 tokens, h = 1024, 2 bytes each.
const TP_BYTES: u64 = 1024 * 1024 * 2;
/// A layer's parameters on one of 2 TP ranks: its 1/2 of the attention
/// (4 h^2 with every head a KV head) and of the gated MLP (3 h f), and
/// two RMSNorm weights of h, whole.
const LAYER: u64 = (4 * 1024 * 1024 + 3 * 1024 * 4096) / 2 + 2 * 1024;
/// The word embedding (first stage) and the output layer (last, untied),
/// each V h / 2 on a TP rank.
const VOCAB: u64 = 32000 / 2 * 1024;
/// Elements of a rank of each stage: the embedding and two layers; two
/// layers, the final norm and the output layer.
const STAGES: [u64; 2] = [VOCAB + 2 * LAYER, 2 * LAYER + 1024 + VOCAB];

/// Per micro-batch and layer, each TP group all-reduces T h a bytes
/// twice forward and twice backward; the embedding's output is
/// all-reduced too (first stage, forward) and the LM head's input
/// gradient (last stage, backward), and the cross-entropy all-reduces T
/// fp32 values three times. Without overlap (Megatron-Core's default) each
/// DP group all-reduces its ranks' gradients once, in fp32 (bf16
/// parameters), after the backward. Between the two stages each TP rank
/// sends T h a bytes forward and backward per micro-batch, as
/// Megatron-Core does (T h a / tp in the papers' accounting, or with
/// sequence parallelism).
#[test]
fn collectives_and_transfers_follow_the_formulas() {
    let (sim, s) = run(SMALL);
    let c = census(&s);
    let (dp, pp, m, layers_per_stage) = (4, 2, 2, 2);
    assert_eq!(
        c[&("all-reduce".into(), 2, TP_BYTES)],
        dp * pp * m * layers_per_stage * 4 + dp * m * 2
    );
    assert_eq!(c[&("all-reduce".into(), 2, 1024 * 4)], dp * m * 3);
    // Two DP groups (one per TP index) per stage.
    for n in STAGES {
        assert_eq!(c[&("all-reduce".into(), 4, n * 4)], 2, "{c:?}");
    }
    assert_eq!(c.len(), 4, "{c:?}");
    // With overlap, Megatron-Core's buckets on the first stage (here of 1
    // parameter: one per tensor, 13 of them) and one on the others; the
    // same bytes.
    let overlap = [
        "workload.0.parallel.overlap=true",
        "workload.0.parallel.bucket=1",
    ];
    let (_, o) = run_with(SMALL, &overlap);
    let dp_reduces: Vec<u64> = o
        .collectives
        .iter()
        .filter(|c| c.ranks == 4)
        .map(|c| c.bytes)
        .collect();
    assert_eq!(dp_reduces.len(), 2 * (1 + 2 * 6) + 2);
    assert_eq!(
        dp_reduces.iter().sum::<u64>(),
        2 * 4 * (STAGES[0] + STAGES[1])
    );
    // With "tp-dp-pp" (the default, Megatron-Core's) the stages are two
    // servers apart, the pipeline's transfers writes over the network:
    // forward and backward, per micro-batch, per rank of a stage (tp x dp
    // = 8); "tp-pp-dp" places both stages of a TP pair in one server, and
    // the transfers are NVLink copies.
    let (sim_pp, s_pp) = run_with(SMALL, &["workload.0.parallel.order=\"tp-pp-dp\""]);
    assert!(sim_pp.flows().is_empty());
    assert_eq!(census(&s_pp), c);
    assert_eq!(sim.flows().len(), 2 * m * 8, "the default is tp-dp-pp");
    let (sim, s2) = run_with(SMALL, &["workload.0.parallel.order=\"tp-dp-pp\""]);
    assert_eq!(census(&s2), c);
    let sends = sim.flows();
    assert_eq!(sends.len(), 2 * m * 8);
    assert!(sends.iter().all(|f| f.spec.bytes == TP_BYTES));
    assert!(sends.iter().all(|f| f.finish.is_some()));
    for set in [
        "workload.0.parallel.accounting=\"paper\"",
        "workload.0.parallel.sequence_parallel=true",
    ] {
        let (sim, _) = run_with(SMALL, &["workload.0.parallel.order=\"tp-dp-pp\"", set]);
        let sends = sim.flows();
        assert_eq!(sends.len(), 2 * m * 8, "{set}");
        assert!(sends.iter().all(|f| f.spec.bytes == TP_BYTES / 2), "{set}");
    }
    let job = &s.jobs[0];
    assert_eq!(job.ranks, 16);
    assert_eq!(job.iteration_ps.len(), 1);
    let share = job.comm_share.unwrap();
    assert!(share > 0.0 && share <= 1.0, "{share}");
}

/// Tied embeddings: with pipeline parallelism the last stage keeps a
/// copy of the word embedding as its output layer, and after the DP
/// reduction each rank of the first stage all-reduces its gradient with
/// the rank of the last stage at the same place (V h / tp in fp32).
#[test]
fn tied_embeddings_are_reduced_between_the_first_and_last_stage() {
    let (_, s) = run_with(SMALL, &["workload.0.model.tied=true"]);
    let c = census(&s);
    let pairs = c[&("all-reduce".into(), 2, VOCAB * 4)];
    assert_eq!(pairs, 8, "one per place of a stage (tp x dp): {c:?}");
    let (_, untied) = run(SMALL);
    assert!(!census(&untied).contains_key(&("all-reduce".into(), 2, VOCAB * 4)));
}

/// The iteration takes at least the compute of the busiest stage (every
/// micro-batch's forward and backward, the LM head included), from the
/// roofline: twice as long on a GPU with half the peak.
#[test]
fn compute_follows_the_roofline() {
    use fabricsim::workload::model::{Gpu, Transformer};
    let m = Transformer {
        layers: 4,
        hidden: 1024,
        ffn: 4096,
        heads: 16,
        kv_heads: 16,
        seq: 1024,
        vocab: 32000,
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
        dispatcher: fabricsim::workload::model::Dispatcher::AllToAll,
        capacity_factor: None,
        pad_to_capacity: false,
    };
    let g = Gpu::H100;
    let layer = g.time(m.attn(2)).0 + g.time(m.mlp(2)).0;
    let head = g.time(m.head(2)).0;
    // Forward and backward (twice the work) of 2 micro-batches, last stage.
    let busiest = 2 * 3 * (2 * layer + head);
    let (_, s) = run(SMALL);
    let it = s.jobs[0].iteration_ps[0];
    assert!(it > busiest, "{it} <= {busiest}");
    let (_, slow) = run_with(SMALL, &["workload.0.gpu.tflops=494.5"]);
    let slow_it = slow.jobs[0].iteration_ps[0];
    assert!(slow_it > it + busiest / 2, "{slow_it} against {it}");
}

/// With the buckets reduced only after the backward, the step is longer:
/// the same collectives, no longer hidden behind the backward's compute.
/// The DP groups span servers here ("tp-pp-dp"), so that the buckets go
/// over the network and do not share NVLink with the TP collectives.
#[test]
fn overlap_shortens_the_step() {
    let order = "workload.0.parallel.order=\"tp-pp-dp\"";
    let on = [
        order,
        "workload.0.parallel.overlap=true",
        "workload.0.parallel.bucket=4000000",
    ];
    let (_, on) = run_with(SMALL, &on);
    let (_, off) = run_with(SMALL, &[order]);
    let (a, b) = (on.jobs[0].iteration_ps[0], off.jobs[0].iteration_ps[0]);
    assert!(a < b, "overlap {a} ps, none {b} ps");
    // The breakdown shows where: the DP buckets' time is partly hidden by
    // the backward's kernels, and with no overlap all of it is exposed;
    // the TP all-reduces sit between kernels, never hidden.
    let dim = |s: &fabricsim::report::Summary, d: &str| {
        let st = &s.jobs[0].steps[0];
        st.dims.iter().find(|x| x.dim == d).unwrap().clone()
    };
    let (dp_on, dp_off) = (dim(&on, "dp"), dim(&off, "dp"));
    assert_eq!(dp_on.bytes, dp_off.bytes);
    assert_eq!(dp_off.exposed_ps, dp_off.comm_ps);
    assert!(dp_on.exposed_ps < dp_on.comm_ps, "{dp_on:?}");
    let tp = dim(&on, "tp");
    assert_eq!(tp.exposed_ps, tp.comm_ps);
    assert_eq!(tp.bytes, (128 + 16) * TP_BYTES + 24 * 1024 * 4);
    // Compute: every rank's kernels, the same in both.
    let st = &on.jobs[0].steps[0];
    assert_eq!(st.compute_ps, off.jobs[0].steps[0].compute_ps);
    assert!(st.compute_ps > 0.0 && st.compute_ps < st.step_ps as f64);
}

/// ZeRO 1 reduce-scatters the gradients and all-gathers the parameters
/// after the optimizer; ZeRO 3 also gathers each layer's parameters
/// before its forward and its backward of every micro-batch; sequence
/// parallelism turns each TP all-reduce into a reduce-scatter and an
/// all-gather of the same size, and Megatron-Core's backward gathers each
/// column-parallel part's input again (6 all-gathers and 4
/// reduce-scatters per layer and micro-batch; the papers' accounting has
/// 4 and 4).
#[test]
fn zero_stages_and_sequence_parallelism() {
    let (_, s) = run_with(SMALL, &["workload.0.parallel.zero=1"]);
    let c = census(&s);
    // One bucket per stage; every tensor here is a multiple of 64
    // elements and each stage's total of lcm(dp, 128) = 128, so nothing
    // is padded. Gradients in fp32, parameters in bf16.
    for n in STAGES {
        assert_eq!(c[&("reduce-scatter".into(), 4, n * 4)], 2);
        assert_eq!(c[&("all-gather".into(), 4, n * 2)], 2);
        assert!(!c.contains_key(&("all-reduce".into(), 4, n * 4)));
    }
    let (_, s3) = run_with(SMALL, &["workload.0.parallel.zero=3"]);
    let c3 = census(&s3);
    // 2 DP groups x 2 stages x 2 layers x 2 micro-batches x (forward,
    // backward).
    assert_eq!(c3[&("all-gather".into(), 4, LAYER * 2)], 2 * 2 * 2 * 2 * 2);
    // Per TP group (4 DP x 2 stages), layer (2 per stage) and
    // micro-batch (2); and per TP group of one stage and micro-batch (8)
    // the embedding's reduce-scatter (forward) and all-gather (backward)
    // and the LM head's all-gather (forward), input gathered again
    // (Megatron-Core) and reduce-scatter (backward).
    let groups_layers_batches = 4 * 2 * 2 * 2;
    let sp = "workload.0.parallel.sequence_parallel=true";
    for (accounting, gathers, head) in [("megatron-core", 6, 2), ("paper", 4, 1)] {
        let set = format!("workload.0.parallel.accounting=\"{accounting}\"");
        let (_, run) = run_with(SMALL, &[sp, &set]);
        let c = census(&run);
        assert!(!c.contains_key(&("all-reduce".into(), 2, TP_BYTES)));
        assert_eq!(
            c[&("all-gather".into(), 2, TP_BYTES)],
            groups_layers_batches * gathers + 8 * (1 + head),
            "{accounting}"
        );
        assert_eq!(
            c[&("reduce-scatter".into(), 2, TP_BYTES)],
            groups_layers_batches * 4 + 8 * 2,
            "{accounting}"
        );
        // The norms' gradients (2 per layer, and the final one), in fp32,
        // over each TP group of a stage once.
        assert_eq!(c[&("all-reduce".into(), 2, 4 * 1024 * 4)], 4);
        assert_eq!(c[&("all-reduce".into(), 2, 5 * 1024 * 4)], 4);
    }
}

/// Bad settings name the key and what was expected.
#[test]
fn bad_model_settings_name_the_key() {
    for (set, key, want) in [
        (
            "workload.0.parallel.tp=3",
            "workload[0].parallel.tp",
            "divisor of the model's heads",
        ),
        (
            "workload.0.parallel.dp=2",
            "workload[0].parallel.dp",
            "must be the job's 16 GPUs",
        ),
        (
            "workload.0.model.global_batch=6",
            "workload[0].model.global_batch",
            "multiple of micro_batch x dp",
        ),
        (
            "workload.0.parallel.order=\"tp-tp-dp\"",
            "workload[0].parallel.order",
            "three of tp, pp and dp",
        ),
        (
            "workload.0.parallel.zero=4",
            "workload[0].parallel.zero",
            "from 0 to 3",
        ),
        (
            "workload.0.parallel.accounting=\"papers\"",
            "workload[0].parallel.accounting",
            "megatron-core, paper",
        ),
        (
            "workload.0.gpu.preset=\"v100\"",
            "workload[0].gpu.preset",
            "h100, b200, a100",
        ),
        (
            "workload.0.model.heads=7",
            "workload[0].model.heads",
            "divisor of hidden",
        ),
    ] {
        let e = error_of(SMALL, &[set]);
        assert!(e.contains(key) && e.contains(want), "{set}: {e}");
    }
    let e = error_of(&SMALL.replace("layers = 4\n", ""), &[]);
    assert!(
        e.contains("workload[0].model.layers") && e.contains("missing"),
        "{e}"
    );
}

/// SMALL with 8 experts of 1,024, top-2, sequence parallelism and EP 4.
const MOE: [&str; 5] = [
    "workload.0.model.experts=8",
    "workload.0.model.top_k=2",
    "workload.0.model.expert_ffn=1024",
    "workload.0.parallel.sequence_parallel=true",
    "workload.0.parallel.ep=4",
];

/// Mixture of experts: 8 experts of FFN 1,024, 2 per token, over EP
/// groups inside DP, with sequence parallelism (as Megatron-Core asks of
/// experts with TP), through Megatron-Core's alltoall dispatcher. Per
/// MoE layer and micro-batch, forward: the counts of tokens per expert
/// all-gathered over TP x EP (8 int64 per rank), the tokens (T top_k h a
/// / tp a rank) and their probabilities (T top_k a / tp) all-to-all'ed
/// over EP, gathered over TP for the experts (T top_k h a) and
/// reduce-scattered back, the tokens all-to-all'ed home; backward the
/// same without the counts. The router's gradient joins the norms' over
/// TP. The experts' gradients are reduced over the ranks that hold the
/// same experts (dp / ep of them), the rest over DP. This is
/// VALIDATION.md's third table ("Megatron-Core's collectives").
#[test]
fn experts_exchange_tokens_in_their_ep_group() {
    let moe = &MOE[..4];
    let a2a = 1024 * 2 * 1024 * 2 / 2;
    // A layer's attention (its 1/2), the router (h x experts) and the
    // norms, per TP rank; fp32 gradients.
    let dense = 4 * 1024 * 1024 / 2 + 1024 * 8 + 2 * 1024;
    let stages = [VOCAB + 2 * dense, 2 * dense + 1024 + VOCAB];
    // EP 4: one EP group per TP index and stage, one TP x EP group per
    // stage; every rank holds 2 experts of its own, nothing to reduce
    // them with.
    let (sim, s) = run_with(SMALL, &[moe, &["workload.0.parallel.ep=4"]].concat());
    let mut want: HashMap<(String, usize, u64), usize> = [
        ("all-gather", 2, TP_BYTES, 216),
        ("reduce-scatter", 2, TP_BYTES, 144),
        ("all-reduce", 2, 1024 * 4, 24),
        ("all-reduce", 2, (2 * (2 * 1024 + 8 * 1024)) * 4, 4),
        ("all-reduce", 2, (2 * (2 * 1024 + 8 * 1024) + 1024) * 4, 4),
        ("all-gather", 8, 8 * 8 * 8, 8),
        ("all-to-all", 4, a2a, 64),
        ("all-to-all", 4, 1024 * 2 * 2 / 2, 32),
        ("all-gather", 2, 2 * a2a, 64),
        ("reduce-scatter", 2, 2 * a2a, 64),
    ]
    .into_iter()
    .map(|(c, r, b, n)| ((c.to_string(), r, b), n))
    .collect();
    for n in stages {
        want.insert(("all-reduce".into(), 4, n * 4), 2);
    }
    assert_eq!(census(&s), want);
    // Sequence parallelism: a 1/tp share between stages.
    assert!(sim.flows().iter().all(|f| f.spec.bytes == TP_BYTES / 2));
    let st = &s.jobs[0].steps[0];
    let ep = st.dims.iter().find(|d| d.dim == "ep").unwrap();
    assert_eq!(ep.bytes, 64 * a2a + 32 * 2048 + 8 * 512);
    assert!(ep.comm_ps > 0.0);
    // EP 2: two EP groups per TP index; each expert's gradients are
    // all-reduced by the 2 ranks that hold it, after the backward (2
    // layers of 4 experts of 3 x 1024 x 1024 per rank, halved by TP).
    let (_, s) = run_with(SMALL, &[moe, &["workload.0.parallel.ep=2"]].concat());
    let c = census(&s);
    assert_eq!(c[&("all-to-all".into(), 2, a2a)], 2 * 4 * 2 * 2 * 4);
    let experts = 2 * 4 * 3 * 1024 * 1024 / 2 * 4;
    assert_eq!(c[&("all-reduce".into(), 2, experts)], 2 * 4);
    // The auxiliary loss: the counts all-reduced over TP too.
    let aux = [
        moe,
        &["workload.0.parallel.ep=2", "workload.0.model.aux_loss=true"],
    ]
    .concat();
    let (_, s) = run_with(SMALL, &aux);
    assert_eq!(census(&s)[&("all-reduce".into(), 2, 8 * 8)], 2 * 2 * 2 * 4);
    let e = error_of(SMALL, &[moe, &["workload.0.parallel.ep=3"]].concat());
    assert!(
        e.contains("workload[0].parallel.ep") && e.contains("divisor of cp x dp"),
        "{e}"
    );
    let e = error_of(SMALL, &["workload.0.parallel.ep=2"]);
    assert!(e.contains("no experts"), "{e}");
}

/// A capacity factor (Megatron's `--moe-expert-capacity-factor`): a
/// rank's 1,024 token copies (1,024 tokens / TP 2, top-2) over 8
/// experts are 128 per expert; at factor 0.5 an expert takes 64, the
/// rest dropped, so the tokens' all-to-alls and the experts' work
/// halve; padded to a factor of 2.0 (`--moe-pad-expert-input-to-capacity`)
/// every expert gets 256, twice the bytes, and the counts are not
/// exchanged (they are known).
#[test]
fn a_capacity_factor_drops_or_pads_the_tokens() {
    let moe = MOE;
    let a2a = 1024 * 2 * 1024 * 2 / 2;
    let counts = ("all-gather".to_string(), 8, 8 * 8 * 8);
    let with = |extra: &[&str]| census(&run_with(SMALL, &[&moe[..], extra].concat()).1);
    let full = with(&[]);
    assert_eq!(full[&("all-to-all".into(), 4, a2a)], 64);
    let half = with(&["workload.0.model.capacity_factor=0.5"]);
    assert_eq!(half[&("all-to-all".into(), 4, a2a / 2)], 64);
    // The experts' TP gathers are of a2a bytes now, as large as the
    // sequence-parallel ones (216 of them).
    assert_eq!(half[&("all-gather".into(), 2, a2a)], 216 + 64);
    assert!(!half.contains_key(&("all-gather".into(), 2, 2 * a2a)));
    assert_eq!(half[&counts], 8);
    let padded = with(&[
        "workload.0.model.capacity_factor=2.0",
        "workload.0.model.pad_to_capacity=true",
    ]);
    assert_eq!(padded[&("all-to-all".into(), 4, 2 * a2a)], 64);
    assert!(!padded.contains_key(&counts));
    // Without padding, a factor above 1 drops nothing here.
    let roomy = with(&["workload.0.model.capacity_factor=2.0"]);
    assert_eq!(roomy, full);
    let e = error_of(SMALL, &["workload.0.model.capacity_factor=1.0"]);
    assert!(
        e.contains("workload[0].model.capacity_factor: given for a model without experts"),
        "{e}"
    );
}

/// Kernel times given per kernel replace the roofline's: the compute of
/// a step is then exactly their sum per rank (2 micro-batches x 2 layers
/// per stage of attention and MLP, forward and backward, the LM head on
/// the last stage, the optimizer once), and an unknown kernel name is
/// refused with the names it takes.
#[test]
fn kernel_times_can_be_given() {
    let given = format!(
        "{SMALL}\n[workload.gpu.kernels]\nattention_forward = \"100us\"\nattention_backward = \"300us\"\nmlp_forward = \"200us\"\nmlp_backward = \"400us\"\nhead_forward = \"50us\"\nhead_backward = \"60us\"\noptimizer = \"1ms\"\n"
    );
    let (_, s) = run(&given);
    let step = &s.jobs[0].steps[0];
    let us = 1_000_000.0;
    let first_stage = 2.0 * 2.0 * (100.0 + 200.0 + 300.0 + 400.0) * us + 1000.0 * us;
    // Half the ranks are on the last stage, with the head's 2 x 110 us.
    let want = first_stage + 110.0 * us;
    assert_eq!(step.compute_ps, want);
    // Without them the roofline gives another figure.
    let (_, r) = run(SMALL);
    assert_ne!(r.jobs[0].steps[0].compute_ps, want);
    let e = error_of(
        &format!("{SMALL}\n[workload.gpu.kernels]\nattn_fwd = \"1us\"\n"),
        &[],
    );
    assert!(
        e.contains("workload[0].gpu.kernels.attn_fwd: is not a kernel of the step; expected attention_forward"),
        "{e}"
    );
    let e = error_of(
        &format!("{SMALL}\n[workload.gpu.kernels]\nmlp_forward = 5\n"),
        &[],
    );
    assert!(e.contains("workload[0].gpu.kernels.mlp_forward"), "{e}");
}

/// The SMALL job as Megatron-LM's arguments (Megatron's defaults fill
/// the rest: untied here, RMSNorm, no biases, rotary positions, bf16).
const SMALL_ARGS: &str = "--num-layers 4 --hidden-size 1024 --ffn-hidden-size 4096 \
    --num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024 \
    --position-embedding-type rope --vocab-size 32000 --micro-batch-size 1 \
    --global-batch-size 8 --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 --swiglu --normalization RMSNorm \
    --disable-bias-linear --untie-embeddings-and-output-weights --bf16 --lr 3e-4";

/// `kind = "megatron"` reads a job from its launch script (arrays,
/// variables, continued lines) or its arguments, and runs the same
/// collectives as the same job given by its keys; a flag's bad value
/// names the flag; a flag not modelled is a warning.
#[test]
fn megatron_jobs_read_their_launch_script() {
    let topo = &SMALL[..SMALL.find("[[workload]]").unwrap()];
    let (_, want) = run(SMALL);
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "#!/bin/bash\nTP=2\nMODEL=(\n  {}\n)\ntorchrun --nproc_per_node 4 pretrain_gpt.py \\\n  ${{MODEL[@]}} \\\n  --tensor-model-parallel-size $TP --save $1\n",
        SMALL_ARGS.replace("--tensor-model-parallel-size 2 ", "")
    );
    std::fs::write(dir.path().join("train.sh"), script).unwrap();
    let scenario = format!("{topo}[[workload]]\nkind = \"megatron\"\nscript = \"train.sh\"\n");
    let path = dir.path().join("job.toml");
    std::fs::write(&path, &scenario).unwrap();
    let (_, got) = common::run_file(&path, &[]);
    assert_eq!(census(&got), census(&want));
    let args = format!("{topo}[[workload]]\nkind = \"megatron\"\nargs = \"{SMALL_ARGS}\"\n");
    let (_, got) = run(&args);
    assert_eq!(census(&got), census(&want));
    // Tied (Megatron's default): the embedding all-reduce between stages.
    let tied = args.replace(" --untie-embeddings-and-output-weights", "");
    let (_, got) = run(&tied);
    assert_eq!(census(&got)[&("all-reduce".into(), 2, VOCAB * 4)], 8);
    let e = error_of(
        &args.replace("--num-attention-heads 16", "--num-attention-heads 7"),
        &[],
    );
    assert!(
        e.contains("workload[0].args: --num-attention-heads 7 (model.heads)")
            && e.contains("divisor of hidden"),
        "{e}"
    );
    let e = error_of(&args.replace("--vocab-size 32000", ""), &[]);
    assert!(e.contains("add --vocab-size"), "{e}");
    let e = error_of(&scenario.replace("train.sh", "missing.sh"), &[]);
    assert!(
        e.contains("workload[0].script") && e.contains("missing.sh"),
        "{e}"
    );
    let s = fabricsim::scenario::prepare(
        "job.toml",
        &args.replace("--lr 3e-4", "--recompute-modules core_attn"),
        &[],
    )
    .unwrap();
    assert!(
        s.scenario.warnings.iter().any(|w| w
            .message
            .contains("--recompute-modules core_attn: not modelled")),
        "{:?}",
        s.scenario.warnings
    );
}

/// A GPT as Megatron-LM's defaults make it (GeLU, LayerNorm, biases,
/// learned positions, tied embeddings), 4 layers, on the SMALL fabric.
const GPT_ARGS: &str = "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 \
    --seq-length 1024 --max-position-embeddings 1024 --vocab-size 32000 \
    --micro-batch-size 1 --global-batch-size 8 --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 --bf16";

/// Every collective of one iteration, as (collective, ranks, bytes) ->
/// count, against the counts and sizes Megatron-Core's code gives for the
/// same job, worked out by hand from its sources (the table and its
/// derivation are in VALIDATION.md, "Megatron-Core's collectives"):
/// with sequence parallelism, the distributed optimizer and overlapped
/// gradient buckets of 3,000,000 parameters; and without any of them.
#[test]
fn collectives_per_iteration_are_megatron_cores() {
    let topo = &SMALL[..SMALL.find("[[workload]]").unwrap()];
    let job = |extra: &str| {
        format!("{topo}[[workload]]\nkind = \"megatron\"\nargs = \"{GPT_ARGS} {extra}\"\n")
    };
    let t_h_a: u64 = 1024 * 1024 * 2;
    // The word embedding's gradient (V h / tp, fp32), the tied copy's.
    let embedding = 32000 / 2 * 1024 * 4;
    let table = |rows: &[(&str, usize, u64, usize)]| -> HashMap<(String, usize, u64), usize> {
        rows.iter()
            .map(|&(c, r, b, n)| ((c.to_string(), r, b), n))
            .collect()
    };
    // Sequence parallelism, distributed optimizer, overlap.
    let (sim, s) = run(&job(
        "--sequence-parallel --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 3000000",
    ));
    let mut want = table(&[
        ("all-gather", 2, t_h_a, 216),
        ("reduce-scatter", 2, t_h_a, 144),
        ("all-reduce", 2, 1024 * 4, 24),
        ("all-reduce", 2, 12288 * 4, 4),
        ("all-reduce", 2, 14336 * 4, 4),
        ("all-reduce", 2, embedding, 8),
    ]);
    // First stage: 5 buckets; last: the output layer's, and the rest.
    for n in [4197376, 4201984, 3675648, 1575936, 16384000, 12604416] {
        let k = if n == 16384000 { 2 * 2 } else { 2 };
        want.insert(("reduce-scatter".into(), 4, n * 4), k);
        want.insert(("all-gather".into(), 4, n * 2), k);
    }
    assert_eq!(census(&s), want);
    let sends = sim.flows();
    assert_eq!(sends.len(), 32);
    assert!(sends.iter().all(|f| f.spec.bytes == t_h_a / 2));
    // None of them.
    let (sim, s) = run(&job(""));
    let want = table(&[
        ("all-reduce", 2, t_h_a, 144),
        ("all-reduce", 2, 1024 * 4, 24),
        ("all-reduce", 2, embedding, 8),
        ("all-reduce", 4, 30034944 * 4, 2),
        ("all-reduce", 4, 28988416 * 4, 2),
    ]);
    assert_eq!(census(&s), want);
    assert!(sim.flows().iter().all(|f| f.spec.bytes == t_h_a));
}

/// Full recomputation runs each layer's forward again before its
/// backward, TP collectives included (2 more all-reduces per layer and
/// micro-batch); selective recomputation only the attention's scores,
/// more compute and no more communication; causal attention (the
/// default) computes half the scores.
#[test]
fn recomputation_and_causal_attention_change_the_work() {
    let (_, none) = run(SMALL);
    let (_, selective) = run_with(SMALL, &["workload.0.parallel.recompute=\"selective\""]);
    let (_, full) = run_with(SMALL, &["workload.0.parallel.recompute=\"full\""]);
    let (_, full_scores) = run_with(SMALL, &["workload.0.model.causal=false"]);
    let ar = |s: &fabricsim::report::Summary| census(s)[&("all-reduce".into(), 2, TP_BYTES)];
    assert_eq!(ar(&none), 144);
    assert_eq!(ar(&selective), 144);
    assert_eq!(ar(&full), 144 + 4 * 2 * 2 * 2 * 2);
    let compute = |s: &fabricsim::report::Summary| s.jobs[0].steps[0].compute_ps;
    assert!(
        compute(&none) < compute(&selective),
        "selective adds compute"
    );
    assert!(compute(&selective) < compute(&full), "full adds more");
    assert!(
        compute(&none) < compute(&full_scores),
        "causal halves the scores"
    );
    let e = error_of(SMALL, &["workload.0.parallel.recompute=\"some\""]);
    assert!(
        e.contains("workload[0].parallel.recompute") && e.contains("selective"),
        "{e}"
    );
}

/// `kind = "deepspeed"`: the batch, precision and ZeRO come from the
/// DeepSpeed configuration, the shape from `[workload.model]`. ZeRO 2
/// reduce-scatters the gradients at every micro-batch (DeepSpeed keeps
/// them as partitions), ZeRO 1 at the last only; both all-gather the
/// bf16 parameters after the step. Without `overlap_comm` a full bucket
/// is reduced on the compute stream, and the step is longer.
#[test]
fn deepspeed_zero_2_reduces_at_every_micro_batch() {
    let dir = tempfile::tempdir().unwrap();
    let topo = &SMALL[..SMALL.find("[[workload]]").unwrap()];
    let model = &SMALL
        [SMALL.find("[workload.model]").unwrap()..SMALL.find("[workload.parallel]").unwrap()]
        .replace("global_batch = 8\n", "");
    let job = |stage: u32, bucket: u64, overlap: bool| {
        let config = format!(
            r#"{{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1,
                "bf16": {{"enabled": true}}, "gradient_clipping": 1.0,
                "zero_optimization": {{"stage": {stage}, "reduce_bucket_size": {bucket}, "overlap_comm": {overlap}}}}}"#
        );
        std::fs::write(dir.path().join("ds.json"), config).unwrap();
        let text = format!(
            "{topo}[[workload]]\nkind = \"deepspeed\"\nconfig = \"ds.json\"\n{model}[workload.parallel]\ntp = 2\npp = 2\n"
        );
        let path = dir.path().join("job.toml");
        std::fs::write(&path, text).unwrap();
        common::run_file(&path, &[]).1
    };
    let rs = |s: &fabricsim::report::Summary, n: u64| {
        census(s).get(&("reduce-scatter".into(), 4, n * 2)).copied()
    };
    let ag = |s: &fabricsim::report::Summary, n: u64| {
        census(s).get(&("all-gather".into(), 4, n * 2)).copied()
    };
    let two = job(2, 100_000_000, true);
    let one = job(1, 100_000_000, true);
    for n in STAGES {
        // 2 DP groups a stage, 2 micro-batches; one bucket each.
        assert_eq!(rs(&two, n), Some(4), "ZeRO 2");
        assert_eq!(rs(&one, n), Some(2), "ZeRO 1");
        assert_eq!(ag(&two, n), Some(2));
        assert_eq!(ag(&one, n), Some(2));
    }
    let overlapped = job(2, 1_000_000, true).jobs[0].iteration_ps[0];
    let blocking = job(2, 1_000_000, false).jobs[0].iteration_ps[0];
    assert!(overlapped < blocking, "{overlapped} against {blocking}");
    // A key both give is refused.
    std::fs::write(
        dir.path().join("both.toml"),
        format!("{topo}[[workload]]\nkind = \"deepspeed\"\nconfig = \"ds.json\"\n{model}micro_batch = 1\n"),
    )
    .unwrap();
    let text = std::fs::read_to_string(dir.path().join("both.toml")).unwrap();
    let path = dir.path().join("both.toml").to_string_lossy().to_string();
    let e = fabricsim::scenario::prepare(&path, &text, &[])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("workload[0].model.micro_batch") && e.contains("DeepSpeed configuration"),
        "{e}"
    );
}

/// With sequence parallelism, `tp_overlap` (Megatron's
/// `--tp-comm-overlap`) runs each layer part's TP collectives beside its
/// GEMMs: the same collectives, a shorter step, less of the TP time
/// exposed.
#[test]
fn tp_overlap_hides_tp_collectives_behind_the_gemms() {
    let sp = "workload.0.parallel.sequence_parallel=true";
    let (_, plain) = run_with(SMALL, &[sp]);
    let (_, over) = run_with(SMALL, &[sp, "workload.0.parallel.tp_overlap=true"]);
    assert_eq!(census(&plain), census(&over));
    let (a, b) = (plain.jobs[0].iteration_ps[0], over.jobs[0].iteration_ps[0]);
    assert!(b < a, "overlapped {b} against {a}");
    let tp = |s: &fabricsim::report::Summary| {
        let st = &s.jobs[0].steps[0];
        st.dims.iter().find(|d| d.dim == "tp").unwrap().exposed_ps
    };
    assert!(
        tp(&over) < tp(&plain),
        "{} against {}",
        tp(&over),
        tp(&plain)
    );
}

/// With `param_overlap` (Megatron's `--overlap-param-gather`, which
/// needs `--overlap-grad-reduce`), an iteration's parameter all-gathers
/// run under the next one's first forward, each layer waiting for its
/// own bucket: the same collectives, and two iterations take less time
/// than with each gathered after its own optimizer step; the last
/// iteration's all-gathers still run, once it is over. One stage, TP 2
/// x DP 8, buckets of 4,000,000 parameters.
#[test]
fn param_gathers_overlap_the_next_forward() {
    let two = [
        "workload.0.iterations=2",
        "workload.0.parallel.zero=1",
        "workload.0.parallel.pp=1",
        "workload.0.parallel.dp=8",
        "workload.0.parallel.overlap=true",
        "workload.0.parallel.bucket=4000000",
    ];
    let (_, plain) = run_with(SMALL, &two);
    let (_, over) = run_with(
        SMALL,
        &[&two[..], &["workload.0.parallel.param_overlap=true"]].concat(),
    );
    assert_eq!(census(&plain), census(&over));
    let gathers = census(&over)
        .iter()
        .filter(|(k, _)| k.0 == "all-gather" && k.1 == 8)
        .map(|(_, n)| n)
        .sum::<usize>();
    assert!(
        gathers > 2 * 2 * 2,
        "several buckets, two iterations: {gathers}"
    );
    let total = |s: &fabricsim::report::Summary| s.jobs[0].iteration_ps.iter().sum::<u64>();
    assert!(
        total(&over) < total(&plain),
        "{} against {}",
        total(&over),
        total(&plain)
    );
}

/// FP8 runs the layers' GEMMs at the FP8 peak (twice BF16's on an H100):
/// less compute, but more than half of BF16's, since the attention's
/// scores, the output layer and the optimizer stay as they were.
#[test]
fn fp8_gemms_run_at_the_fp8_peak() {
    let (_, bf16) = run(SMALL);
    let (_, fp8) = run_with(SMALL, &["workload.0.model.fp8=true"]);
    let compute = |s: &fabricsim::report::Summary| s.jobs[0].steps[0].compute_ps;
    assert!(compute(&fp8) < compute(&bf16));
    assert!(compute(&fp8) > compute(&bf16) / 2.0);
    assert_eq!(census(&fp8), census(&bf16));
}

/// Four stages of one server (NVLink), TP 1, 8 layers, 4 micro-batches,
/// with the kernels' times given: a stage's forward of one layer takes
/// 300 us and its backward 700 us.
const PIPELINE: &str = r#"
[topology]
kind = "rail-optimized"
hosts = 1
gpus_per_host = 4
hosts_per_leaf = 1
rails_per_leaf = 4
spines = 1
nic_speed = "400G"
uplink_speed = "400G"

[[workload]]
kind = "model"

[workload.model]
layers = 8
hidden = 1024
heads = 16
seq = 1024
vocab = 32000
global_batch = 4

[workload.parallel]
pp = 4

[workload.gpu.kernels]
attention_forward = "100us"
mlp_forward = "200us"
attention_backward = "300us"
mlp_backward = "400us"
head_forward = "1us"
head_backward = "1us"
optimizer = "1us"
"#;

/// Interleaved 1F1B (Megatron's virtual pipeline): with v chunks per
/// stage the pipeline's bubble is (pp - 1) / v of a micro-batch's work
/// instead of pp - 1, so 4 micro-batches of 2 ms per stage take about
/// (4 + 3) x 2 ms in one chunk and (4 + 3/2) x 2 ms in two; every
/// micro-batch crosses pp v - 1 boundaries each way, so the pipeline
/// carries 2 (pp v - 1) m activations. The importer reads Megatron's
/// flags for it; a job Megatron would refuse is refused.
#[test]
fn interleaved_1f1b_shrinks_the_bubble() {
    let ms = 1e9;
    let (_, one) = run(PIPELINE);
    let (_, two) = run_with(PIPELINE, &["workload.0.parallel.virtual_stages=2"]);
    let t1 = one.jobs[0].iteration_ps[0] as f64;
    let t2 = two.jobs[0].iteration_ps[0] as f64;
    assert!(t1 >= 14.0 * ms && t1 < 14.3 * ms, "{t1}");
    assert!(t2 >= 11.0 * ms && t2 < 11.3 * ms, "{t2}");
    let pp_bytes = |s: &fabricsim::report::Summary| {
        let d = s.jobs[0].steps[0].dims.iter().find(|d| d.dim == "pp");
        d.unwrap().bytes
    };
    let act = 1024 * 1024 * 2;
    assert_eq!(pp_bytes(&one), 2 * 3 * 4 * act);
    assert_eq!(pp_bytes(&two), 2 * 7 * 4 * act);
    for (set, want) in [
        (
            "workload.0.parallel.virtual_stages=3",
            "pp x virtual_stages = 12 does not divide the model's 8 layers",
        ),
        (
            "workload.0.model.global_batch=6",
            "the iteration's 6 micro-batches are not a multiple of pp (4)",
        ),
    ] {
        let e = error_of(PIPELINE, &["workload.0.parallel.virtual_stages=2", set]);
        assert!(
            e.contains("workload[0].parallel.virtual_stages: got"),
            "{e}"
        );
        assert!(e.contains(want), "{e}");
    }
    let args = "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 \
        --vocab-size 32000 --global-batch-size 4 --pipeline-model-parallel-size 4 --bf16 \
        --num-layers-per-virtual-pipeline-stage 1";
    let f = fabricsim::scenario::megatron::Flags::parse(&shell_words::split(args).unwrap());
    let i = fabricsim::scenario::megatron::import(&f, Some(4)).unwrap();
    let v = i.keys.iter().find(|k| k.key == "parallel.virtual_stages");
    assert_eq!(v.unwrap().value.as_integer(), Some(2));
}

/// Context parallelism (CP 2 of SMALL's DP 4): a rank holds half of
/// each sequence, so the TP collectives carry T h a / 2; its attention
/// runs as Transformer Engine's ring, each rank passing its keys and
/// values (2 x 512 tokens x 1024 / 2 wide x 2 B = 1 MiB) to the next CP
/// rank once per layer and micro-batch forward (cp - 1 = 1 step), and
/// with their gradients (2 MiB) backward; the gradients are reduced over
/// CP x DP = 4 ranks, as before. Megatron's --context-parallel-size
/// gives it; a sequence CP cannot split in mirrored chunks is refused.
#[test]
fn context_parallelism_splits_the_sequence_and_rings_the_keys() {
    let cp = ["workload.0.parallel.cp=2", "workload.0.parallel.dp=2"];
    let (_, s) = run_with(SMALL, &cp);
    let c = census(&s);
    let (pp, m, layers_per_stage, data) = (2, 4, 2, 2 * 2);
    assert_eq!(
        c[&("all-reduce".into(), 2, TP_BYTES / 2)],
        data * pp * m * layers_per_stage * 4 + data * m * 2
    );
    for n in STAGES {
        assert_eq!(c[&("all-reduce".into(), 4, n * 4)], 2, "{c:?}");
    }
    let step = &s.jobs[0].steps[0];
    let bytes = |d: &str| step.dims.iter().find(|x| x.dim == d).map_or(0, |x| x.bytes);
    let (mib, m, layers) = (1 << 20, m as u64, layers_per_stage as u64);
    assert_eq!(bytes("cp"), 16 * layers * m * (mib + 2 * mib));
    assert_eq!(bytes("pp"), 2 * m * 8 * TP_BYTES / 2);
    let (_, plain) = run(SMALL);
    assert_eq!(
        plain.jobs[0].steps[0]
            .dims
            .iter()
            .find(|x| x.dim == "cp")
            .map(|x| x.bytes),
        None
    );
    let e = error_of(
        SMALL,
        &["workload.0.parallel.cp=3", "workload.0.parallel.dp=1"],
    );
    assert!(
        e.contains("workload[0].parallel.cp: got 3, expected a divisor of half the sequence"),
        "{e}"
    );
    let args = format!("{SMALL_ARGS} --context-parallel-size 2");
    let f = fabricsim::scenario::megatron::Flags::parse(&shell_words::split(&args).unwrap());
    let i = fabricsim::scenario::megatron::import(&f, Some(16)).unwrap();
    let v = i.keys.iter().find(|k| k.key == "parallel.cp");
    assert_eq!(v.unwrap().value.as_integer(), Some(2));
}

/// ZeRO 3 with DeepSpeed's prefetch (`stage3_prefetch_bucket_size`,
/// 50M elements by default, here more than a layer): each layer's
/// parameter all-gather runs on its own stream ahead of the layer, so
/// the same gathers leave the step shorter and less of their time
/// exposed than gathering each layer as it comes (prefetch = 0).
#[test]
fn zero_3_prefetch_gathers_ahead_of_the_layers() {
    let z3 = [
        "workload.0.parallel.zero=3",
        "workload.0.parallel.framework=\"deepspeed\"",
    ];
    let (_, ahead) = run_with(SMALL, &z3);
    let (_, inline) = run_with(
        SMALL,
        &[&z3[..], &["workload.0.parallel.prefetch=0"]].concat(),
    );
    assert_eq!(census(&ahead), census(&inline));
    let (a, b) = (
        ahead.jobs[0].iteration_ps[0],
        inline.jobs[0].iteration_ps[0],
    );
    assert!(a < b, "{a} against {b}");
    let exposed = |s: &fabricsim::report::Summary| {
        let d = s.jobs[0].steps[0].dims.iter().find(|d| d.dim == "dp");
        d.unwrap().exposed_ps
    };
    assert!(
        exposed(&ahead) < exposed(&inline),
        "{} {}",
        exposed(&ahead),
        exposed(&inline)
    );
}

/// Shared experts (Megatron's `--moe-shared-expert-intermediate-size`):
/// a dense MLP 1,024 wide every token goes through beside the routed
/// experts, with sequence parallelism its own TP gather before and
/// reduce-scatter after (and backward a gather of the output gradient,
/// the input gathered again, and a reduce-scatter): 3 more all-gathers
/// and 2 more reduce-scatters per layer and micro-batch in each of the 8
/// TP groups-stages; its weights (a 2 x 1,024 x 1,024 first matrix and
/// a 1,024 x 1,024 second one, halved by TP) join the DP reduction.
#[test]
fn shared_experts_run_a_dense_mlp_beside_the_routed_ones() {
    let moe = MOE;
    let (_, plain) = run_with(SMALL, &moe);
    let (_, shared) = run_with(
        SMALL,
        &[&moe[..], &["workload.0.model.shared_ffn=1024"]].concat(),
    );
    let (a, b) = (census(&plain), census(&shared));
    let n = 4 * 2 * 2 * 2;
    let ag = ("all-gather".to_string(), 2, TP_BYTES);
    let rs = ("reduce-scatter".to_string(), 2, TP_BYTES);
    assert_eq!(b[&ag], a[&ag] + 3 * n);
    assert_eq!(b[&rs], a[&rs] + 2 * n);
    let dense = 4 * 1024 * 1024 / 2 + 1024 * 8 + 2 * 1024;
    let extra = (2 * 1024 * 1024 + 1024 * 1024) / 2;
    let first = VOCAB + 2 * (dense + extra);
    assert_eq!(b[&("all-reduce".into(), 4, first * 4)], 2, "{b:?}");
    assert!(shared.jobs[0].iteration_ps[0] > plain.jobs[0].iteration_ps[0]);
    let e = error_of(SMALL, &["workload.0.model.shared_ffn=1024"]);
    assert!(
        e.contains("workload[0].model.shared_ffn: given for a model without experts"),
        "{e}"
    );
}

/// Uneven stages (Megatron's `--decoder-first-pipeline-num-layers` and
/// `--decoder-last-pipeline-num-layers`): 8 layers over 4 stages with 1
/// on the first and 1 on the last leave 3 on each of the two between;
/// the busiest stage sets the pace, so the step is longer than the even
/// split's 2 per stage, and the first stage's gradients (embedding and
/// one layer) shrink. A split the other stages cannot share evenly is
/// refused.
#[test]
fn uneven_stages_take_their_layers() {
    let uneven = [
        "workload.0.parallel.first_stage_layers=1",
        "workload.0.parallel.last_stage_layers=1",
    ];
    let (_, even) = run(PIPELINE);
    let (_, s) = run_with(PIPELINE, &uneven);
    let (t_even, t) = (even.jobs[0].iteration_ps[0], s.jobs[0].iteration_ps[0]);
    // At least the busiest stage's 4 micro-batches of 3 ms (3 layers of
    // 300 us forward and 700 us backward), at most 1F1B's bound: every
    // stage's one micro-batch (8 ms) and 3 more of the busiest's.
    assert!(t as f64 >= 12e9 && (t as f64) <= 17e9, "{t}");
    assert!(t > t_even + 1_000_000_000, "{t} against {t_even}");
    let e = error_of(PIPELINE, &["workload.0.parallel.first_stage_layers=3"]);
    assert!(
        e.contains("workload[0].parallel.first_stage_layers: the other 3 stages cannot share the remaining 5 layers evenly"),
        "{e}"
    );
    let args = "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 \
        --vocab-size 32000 --global-batch-size 4 --pipeline-model-parallel-size 4 --bf16 \
        --decoder-first-pipeline-num-layers 1 --decoder-last-pipeline-num-layers 1";
    let f = fabricsim::scenario::megatron::Flags::parse(&shell_words::split(args).unwrap());
    let i = fabricsim::scenario::megatron::import(&f, Some(4)).unwrap();
    let (m, p) = i.resolve(4).unwrap();
    let layers: Vec<u64> = (0..4)
        .map(|s| fabricsim::workload::model::piece_layers(m.layers, &p, s))
        .collect();
    assert_eq!(layers, [1, 3, 3, 1]);
}

/// Megatron-Core's allgather dispatcher (its default): over the 8 ranks
/// of the TP x EP group, each of its 512 tokens (1,024 / TP 2) is
/// gathered to every rank with its routing probabilities and its row of
/// the routing map, and the experts' results are reduce-scattered back;
/// no all-to-all. Per layer and micro-batch (2 x 2 x 2 of them): the
/// tokens gathered and scattered forward and backward, the map and the
/// probabilities gathered forward, the probabilities' gradient
/// scattered backward.
#[test]
fn the_allgather_dispatcher_gathers_every_token() {
    let moe = [&MOE[..], &["workload.0.model.dispatcher=\"allgather\""]].concat();
    let c = census(&run_with(SMALL, &moe).1);
    let n = 2 * 2 * 2;
    let tokens = 512 * 8 * 1024 * 2;
    assert_eq!(c[&("all-gather".into(), 8, tokens)], 2 * n);
    assert_eq!(c[&("reduce-scatter".into(), 8, tokens)], 2 * n);
    assert_eq!(c[&("all-gather".into(), 8, 512 * 8 * 8)], n);
    assert_eq!(c[&("all-gather".into(), 8, 512 * 8 * 8 * 2)], n);
    assert_eq!(c[&("reduce-scatter".into(), 8, 512 * 8 * 8 * 2)], n);
    assert!(!c.keys().any(|k| k.0 == "all-to-all"), "{c:?}");
    let f = fabricsim::scenario::megatron::Flags::parse(
        &shell_words::split(&format!("{SMALL_ARGS} --num-experts 8")).unwrap(),
    );
    let i = fabricsim::scenario::megatron::import(&f, Some(16)).unwrap();
    let d = i.keys.iter().find(|k| k.key == "model.dispatcher").unwrap();
    assert_eq!(d.value.as_str(), Some("allgather"), "Megatron's default");
}

/// `--fp8-param-gather`: the distributed optimizer's parameter
/// all-gathers carry a byte per parameter, half the bf16 ones; the
/// gradients' reduce-scatters do not change. It needs FP8 GEMMs.
#[test]
fn fp8_param_gather_halves_the_parameter_gathers() {
    let z1 = ["workload.0.parallel.zero=1", "workload.0.model.fp8=true"];
    let dp_bytes = |s: &fabricsim::report::Summary, op: &str| -> u64 {
        s.collectives
            .iter()
            .filter(|c| c.ranks == 4 && c.collective == op)
            .map(|c| c.bytes)
            .sum()
    };
    let (_, bf16) = run_with(SMALL, &z1);
    let (_, fp8) = run_with(
        SMALL,
        &[&z1[..], &["workload.0.model.fp8_param_gather=true"]].concat(),
    );
    assert!(dp_bytes(&bf16, "all-gather") > 0);
    assert_eq!(
        dp_bytes(&fp8, "all-gather") * 2,
        dp_bytes(&bf16, "all-gather")
    );
    assert_eq!(
        dp_bytes(&fp8, "reduce-scatter"),
        dp_bytes(&bf16, "reduce-scatter")
    );
    let e = error_of(SMALL, &["workload.0.model.fp8_param_gather=true"]);
    assert!(e.contains("workload[0].model.fp8_param_gather"), "{e}");
}

/// Two GB200 NVL72 racks (examples/training/nvl72-racks.toml): every
/// tensor-parallel collective (8 ranks) stays inside a rack and moves
/// over NVLink only; every data-parallel one (18 ranks, 9 per rack)
/// also crosses the Ethernet fabric, and the NICs carry its bytes.
#[test]
fn a_rack_scale_job_keeps_tp_on_nvlink_and_dp_on_the_network() {
    let text = std::fs::read_to_string("examples/training/nvl72-racks.toml").unwrap();
    let (sim, s) = run_with(&text, &[]);
    assert_eq!(sim.topo().hosts[0].gpus.len(), 72);
    let (mut tp, mut dp) = (0, 0);
    for c in &s.collectives {
        match c.ranks {
            8 => {
                assert_eq!(c.medium, "nvlink", "{}", c.collective);
                tp += 1;
            }
            18 => {
                assert_eq!(c.medium, "nvlink+network", "{}", c.collective);
                dp += 1;
            }
            n => panic!("a collective of {n} ranks"),
        }
    }
    assert!(tp > 100 && dp == 16, "{tp} TP and {dp} DP collectives");
    assert!(s.nvlink_bytes > 0);
    let nic_bytes: u64 = sim.ports().iter().map(|p| p.tx_wire_bytes).sum();
    assert!(nic_bytes > 1_000_000_000, "{nic_bytes} B on the wire");
}

/// Eight GB200 NVL72 racks (examples/training/nvl72-8-racks.toml), a
/// mixture-of-experts job with TP 8 and EP 9 inside each rack, PP 2 and
/// DP 36 across: tensor- and expert-parallel collectives (8 and 72 ranks,
/// the latter by NVLS) move over NVLink only; data-parallel ones (36
/// ranks, and the experts' 4) cross the Ethernet fabric, as do the
/// pipeline's sends from racks 0-3 to racks 4-7.
#[test]
fn eight_racks_keep_tp_and_ep_inside_and_pp_and_dp_across() {
    let text = std::fs::read_to_string("examples/training/nvl72-8-racks.toml").unwrap();
    let (sim, s) = run_with(&text, &[]);
    let topo = sim.topo();
    assert_eq!((topo.hosts.len(), topo.gpus.len()), (8, 576));
    let mut by_ranks = std::collections::BTreeMap::new();
    for c in &s.collectives {
        let e = by_ranks.entry(c.ranks).or_insert((c.medium, 0));
        assert_eq!(e.0, c.medium, "{} ranks: {}", c.ranks, c.collective);
        e.1 += 1;
    }
    assert_eq!(by_ranks[&8].0, "nvlink");
    assert_eq!(by_ranks[&72].0, "nvlink");
    assert_eq!(by_ranks[&36].0, "nvlink+network");
    assert_eq!(by_ranks[&4].0, "network");
    assert!(s
        .collectives
        .iter()
        .any(|c| c.ranks == 72 && c.algorithm == "nvls"));
    // The pipeline's sends: stage 0 (racks 0-3) to stage 1 (racks 4-7).
    let host = |g: fabricsim::topology::GpuId| topo.gpus[g.idx()].host.0;
    let pp = sim
        .flows()
        .iter()
        .filter(|f| host(f.spec.src) < 4 && host(f.spec.dst) >= 4)
        .count();
    assert!(pp > 0, "no pipeline sends across the racks");
}
