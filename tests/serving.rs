//! `kind = "serving"`: disaggregated prefill and decode. KV caches move
//! as the README's formula says, and time to first token and time per
//! output token move as they should with load, with the balancer and
//! with a training tenant beside.

mod common;

use common::{error_of, run_with};
use fabricsim::report::serving::{Percentiles, ServingReport};

/// 12 GPUs on each of two leaves (3 servers of 4), two 200G uplinks per
/// leaf: prefill on servers 0-1, decode on servers 3-4, every cache
/// crossing the spines. An 8-layer model with 8 KV heads of 128: 32 KiB
/// of cache per token.
const SMALL: &str = r#"
[simulation]
seed = 1

[topology]
kind = "rail-optimized"
hosts = 6
gpus_per_host = 4
hosts_per_leaf = 3
rails_per_leaf = 4
spines = 2
nic_speed = "400G"
uplink_speed = "200G"
link_delay = "500ns"

[host]
pcie = "128GB/s"

[[workload]]
kind = "serving"
gpus = [0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15, 16, 17, 18, 19]

[workload.model]
layers = 8
hidden = 1024
heads = 8
ffn = 4096
vocab = 32000

[workload.serving]
rate = 100.0
requests = 30
prompt_tokens = [512, 1024]
output_tokens = [4, 8]
prefill = { instances = 2, tp = 4 }
decode = { instances = 2, tp = 4 }
kv_transfer = "whole"
"#;

fn serving(s: &fabricsim::report::Summary) -> &ServingReport {
    assert_eq!(s.serving.len(), 1);
    &s.serving[0]
}

fn p(x: &Option<Percentiles>) -> &Percentiles {
    x.as_ref().expect("percentiles")
}

/// The requests.csv rows, as maps of column to value.
fn rows(sim: &fabricsim::engine::Simulation) -> Vec<std::collections::HashMap<String, String>> {
    let mut out = Vec::new();
    fabricsim::report::serving::requests_csv(sim, &mut out).unwrap();
    let mut rd = csv::Reader::from_reader(out.as_slice());
    let head: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    rd.records()
        .map(|r| {
            let r = r.unwrap();
            head.iter()
                .cloned()
                .zip(r.iter().map(String::from))
                .collect()
        })
        .collect()
}

fn num(row: &std::collections::HashMap<String, String>, col: &str) -> u64 {
    row[col]
        .parse()
        .unwrap_or_else(|_| panic!("{col} = {:?}", row[col]))
}

/// Every request's cache is 2 x layers x kv_heads x head_dim x kv_bytes
/// per prompt token, to the byte, sent whole (one write per TP rank) or
/// layer by layer (a write per rank and layer); the fabric delivers
/// exactly those bytes.
#[test]
fn kv_bytes_per_request_match_the_formula() {
    for (mode, writes) in [("whole", 4), ("layer", 4 * 8)] {
        let set = format!("workload.0.serving.kv_transfer=\"{mode}\"");
        let (sim, s) = run_with(SMALL, &[&set]);
        let v = serving(&s);
        assert_eq!(v.completed, 30);
        let mut total = 0;
        for r in rows(&sim) {
            let prompt = num(&r, "prompt_tokens");
            assert_eq!(num(&r, "kv_bytes"), prompt * 2 * 8 * 8 * 128 * 2, "{mode}");
            assert_eq!(num(&r, "kv_writes"), writes, "{mode}");
            total += num(&r, "kv_bytes");
        }
        assert_eq!(v.kv_bytes, total);
        assert_eq!(s.bytes_delivered, total, "{mode}");
        assert!(s.complete && s.flows_completed == s.flows_total);
        assert_eq!(s.flows_total, 30 * writes);
    }
    // Grouped-query attention with fewer KV heads than decode ranks:
    // each head goes to the two ranks that copy it, twice the bytes.
    let (sim, _) = run_with(
        SMALL,
        &[
            "workload.0.model.kv_heads=2",
            "workload.0.gpus=[0, 1, 12, 13, 14, 15]",
            "workload.0.serving.decode={ instances = 1, tp = 4 }",
            "workload.0.serving.prefill={ instances = 1, tp = 2 }",
        ],
    );
    for r in rows(&sim) {
        let prompt = num(&r, "prompt_tokens");
        assert_eq!(num(&r, "kv_bytes"), 2 * prompt * 2 * 8 * 2 * 128 * 2);
    }
}

/// More requests per second: prefills queue, caches share the uplinks
/// and decode batches grow, so time to first token and time per output
/// token both rise.
#[test]
fn ttft_and_tpot_rise_with_load() {
    let longer = "workload.0.serving.output_tokens=[32, 64]";
    let (quiet, light) = run_with(SMALL, &[longer, "workload.0.serving.rate=50.0"]);
    let (busy, heavy) = run_with(SMALL, &[longer, "workload.0.serving.rate=2000.0"]);
    let (l, h) = (serving(&light), serving(&heavy));
    assert!(p(&h.ttft_ps).p90 > 2.0 * p(&l.ttft_ps).p90, "{l:?}\n{h:?}");
    assert!(p(&h.ttft_network_ps).mean > 2.0 * p(&l.ttft_network_ps).mean);
    assert!(
        p(&h.tpot_ps).mean > 1.05 * p(&l.tpot_ps).mean,
        "{l:?}\n{h:?}"
    );
    let batch =
        |r: &std::collections::HashMap<String, String>| r["mean_batch"].parse::<f64>().unwrap();
    let most = |sim| rows(sim).iter().map(batch).fold(0.0, f64::max);
    assert!(most(&busy) > 2.0 * most(&quiet));
}

/// Four writes per cache over two uplinks: where ECMP hashes them
/// unevenly, spraying them evenly lowers what the network adds to time
/// to first token.
#[test]
fn spraying_the_caches_cuts_the_networks_part_of_ttft() {
    let (_, ecmp) = run_with(SMALL, &["switch.ecmp.seed=5"]);
    let (_, spray) = run_with(SMALL, &["switch.balance.mode=\"spray\""]);
    let (e, s) = (serving(&ecmp), serving(&spray));
    assert!(
        p(&s.ttft_network_ps).mean < 0.7 * p(&e.ttft_network_ps).mean,
        "{e:?}\n{s:?}"
    );
    assert!(p(&s.ttft_ps).mean < p(&e.ttft_ps).mean);
    // Decode steps use no network: the balancer leaves them alone.
    assert_eq!(p(&s.tpot_ps).p50, p(&e.tpot_ps).p50);
}

#[test]
fn bad_serving_settings_name_their_key() {
    let e = error_of(
        SMALL,
        &["workload.0.serving.prefill={ instances = 3, tp = 4 }"],
    );
    assert!(
        e.contains("workload[0].serving") && e.contains("need 20 GPUs"),
        "{e}"
    );
    let e = error_of(SMALL, &["workload.0.model.top_k=2"]);
    assert!(
        e.contains("model.top_k") && e.contains("without experts"),
        "{e}"
    );
    let e = error_of(
        SMALL,
        &["workload.0.serving.decode={ instances = 1, tp = 4, ep = 8 }"],
    );
    assert!(
        e.contains("decode.ep") && e.contains("mixture of experts"),
        "{e}"
    );
    let e = error_of(SMALL, &["workload.0.serving.requests=1048577"]);
    assert!(
        e.contains("serving.requests") && e.contains("1048576"),
        "{e}"
    );
    let e = error_of(
        SMALL,
        &[
            "workload.0.serving.prompt_tokens=4194304",
            "workload.0.model.layers=10000",
        ],
    );
    assert!(e.contains("KV write") && e.contains("at most"), "{e}");
    let e = error_of(SMALL, &["workload.0.model.seq=4096"]);
    assert!(e.contains("model.seq") && e.contains("training"), "{e}");
    let e = error_of(SMALL, &["workload.0.serving.rate=-1.0"]);
    assert!(e.contains("serving.rate") && e.contains("got -1"), "{e}");
    let e = error_of(SMALL, &["workload.0.serving.output_tokens=[9, 3]"]);
    assert!(
        e.contains("output_tokens") && e.contains("lo at most hi"),
        "{e}"
    );
    let e = error_of(SMALL, &["workload.0.serving.kv_transfer=\"stream\""]);
    assert!(
        e.contains("kv_transfer") && e.contains("layer, whole"),
        "{e}"
    );
    // A replica across two servers, and both pools on one server.
    let e = error_of(
        SMALL,
        &["workload.0.serving.prefill={ instances = 1, tp = 8 }"],
    );
    assert!(e.contains("spans hosts"), "{e}");
    let e = error_of(
        SMALL,
        &[
            "workload.0.serving.prefill={ instances = 1, tp = 2 }",
            "workload.0.serving.decode={ instances = 1, tp = 2 }",
        ],
    );
    assert!(e.contains("whole hosts"), "{e}");
}

/// A mixture of experts (32 experts, 4 per token, the first layer
/// dense) on 24 GPUs in two leaves: a prefill instance and a decode
/// instance of 8 GPUs each, expert-parallel over a server in each leaf,
/// so that every dispatch and combine crosses the spines. Serving is
/// tenant 1 in its own lossless class (DSCP 26, queue 4), half the
/// bandwidth when the training tenant's class (DSCP 24, queue 3) wants
/// the rest.
const MOE: &str = r#"[simulation]
seed = 1
[topology]
kind = "rail-optimized"
hosts = 6
gpus_per_host = 4
hosts_per_leaf = 3
rails_per_leaf = 4
spines = 2
nic_speed = "400G"
uplink_speed = "200G"
link_delay = "500ns"
[host]
pcie = "128GB/s"
[transport.tenant_dscp]
1 = 26
2 = 24
[qos.nic_priority]
26 = 4
[[qos.class]]
name = "serving"
dscp = [26]
queue = 4
bandwidth_percent = 50
lossless = true
[[qos.class]]
name = "training"
dscp = [24]
queue = 3
bandwidth_percent = 50
lossless = true
[[qos.class]]
name = "cnp"
dscp = [48]
queue = 7
strict = true

[[workload]]
kind = "serving"
tenant = 1
gpus = [0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19]
[workload.model]
layers = 4
dense_layers = 1
hidden = 2048
heads = 16
ffn = 8192
vocab = 32000
experts = 32
top_k = 4
expert_ffn = 1024
kv_latent = 576
[workload.serving]
rate = 2000.0
requests = 20
prompt_tokens = [512, 1024]
output_tokens = [16, 32]
prefill = { instances = 1, tp = 1, ep = 8 }
decode = { instances = 1, tp = 1, ep = 8, max_batch = 64 }
"#;

/// Tenant 2: a training job on the third server of each leaf, its
/// all-reduces crossing the same spines.
const TRAINING: &str = r#"
[[workload]]
kind = "training"
tenant = 2
gpus = [8, 9, 10, 11, 20, 21, 22, 23]
iterations = 20
[[workload.phase]]
compute = "100us"
bytes = "32MB"
"#;

/// Without a decode step of a dense model on the network, and with
/// every layer's experts an all-to-all across servers: the decode steps
/// are in requests.csv, with what the network added to them.
#[test]
fn experts_all_to_alls_run_every_decode_step() {
    let (sim, s) = run_with(MOE, &[]);
    let v = serving(&s);
    assert_eq!(v.completed, 20);
    assert!(p(&v.tpot_network_ps).p50 > 0.0, "{v:?}");
    // Each request's latent cache (576 values of 2 bytes per token and
    // layer) goes from one GPU to one GPU, layer by layer.
    for r in rows(&sim) {
        assert_eq!(num(&r, "kv_bytes"), num(&r, "prompt_tokens") * 4 * 576 * 2);
        assert_eq!(num(&r, "kv_writes"), 4);
    }
    // Far more writes than caches: the experts' copies, a write per pair
    // of servers' GPUs that has copies, per layer with experts and phase.
    assert!(s.flows_total > 20 * 4 * 50, "{}", s.flows_total);
    // The low-latency pattern: a write per token copy.
    let (_, ll) = run_with(
        MOE,
        &[
            "workload.0.serving.prefill.a2a=\"low-latency\"",
            "workload.0.serving.decode.a2a=\"low-latency\"",
        ],
    );
    assert!(
        ll.flows_total > 5 * s.flows_total,
        "{} {}",
        ll.flows_total,
        s.flows_total
    );
    assert_eq!(serving(&ll).completed, 20);
}

/// The training tenant beside slows serving's all-to-alls (time per
/// output token, and its network part) and serving slows the training
/// job's iterations: each does something to the other.
#[test]
fn serving_and_a_training_tenant_slow_each_other() {
    let both = format!("{MOE}{TRAINING}");
    let (_, alone) = run_with(MOE, &[]);
    let (sim, shared) = run_with(&both, &[]);
    let (a, b) = (serving(&alone), serving(&shared));
    assert!(p(&b.tpot_ps).p50 > 1.2 * p(&a.tpot_ps).p50, "{a:?}\n{b:?}");
    assert!(p(&b.tpot_network_ps).p50 > 1.5 * p(&a.tpot_network_ps).p50);
    assert!(p(&b.ttft_ps).p50 > p(&a.ttft_ps).p50);
    // The job alone (serving's GPUs idle) against the job beside serving.
    let head = MOE.split("[[workload]]").next().unwrap();
    let (_, solo) = run_with(&format!("{head}{TRAINING}"), &[]);
    let mean = |s: &fabricsim::report::Summary| s.jobs[0].mean_iteration_ps.unwrap();
    assert!(
        mean(&shared) > 1.1 * mean(&solo),
        "{} {}",
        mean(&shared),
        mean(&solo)
    );
    // Each in its own class: serving's QPs in queue 4, training's in 3.
    assert_eq!((shared.jobs[0].tenant, b.tenant), (2, 1));
    let base = fabricsim::runtime::serving::FLOW_BASE;
    for q in sim.qps() {
        assert_eq!(
            q.queue,
            if q.flow.0 >= base { 4 } else { 3 },
            "{:?}",
            q.flow
        );
    }
}

/// The examples move the caches the README gives: 327,680 bytes per
/// prompt token for Llama-3-70B (2 x 80 layers x 8 KV heads x 128 x 2
/// bytes), 70,272 for the DeepSeek-V3-class latent cache (61 layers x
/// 576 values x 2 bytes); a request takes output_tokens - 1 decode steps;
/// the report draws the latencies' distributions.
#[test]
fn the_examples_serve_what_the_readme_says() {
    for (file, per_token, writes) in [
        ("llama70b-disaggregated.toml", 327_680, 8 * 80),
        ("deepseek-v3-moe-flow.toml", 70_272, 61),
    ] {
        let path = std::path::Path::new("examples/serving").join(file);
        let (sim, s) = common::run_file(&path, &[]);
        let v = serving(&s);
        assert_eq!(v.completed, v.requests, "{file}");
        for r in rows(&sim) {
            let prompt = num(&r, "prompt_tokens");
            assert_eq!(num(&r, "kv_bytes"), prompt * per_token, "{file}");
            assert_eq!(num(&r, "kv_writes"), writes, "{file}");
            assert_eq!(num(&r, "decode_steps"), num(&r, "output_tokens") - 1);
        }
        let svgs = fabricsim::report::plots::all(&sim).unwrap();
        let plot = svgs.iter().find(|(n, _)| *n == "plot_serving.svg").unwrap();
        assert!(plot.1.contains("time to first token") && plot.1.contains("polyline"));
    }
}

/// DeepEP's low-latency kernels (deepseek-ai/DeepEP's README: H800s, a
/// 400 Gb/s NIC each, 128 tokens per rank, hidden 7168, top 8 of 256
/// experts, FP8 dispatch, BF16 combine) take, dispatch and combine
/// together, 428 us at EP 32, 487 us at EP 64 and 561 us at EP 128. Our
/// step of a write per token copy, every GPU on its own host, is within
/// 15% of each (VALIDATION.md has the table).
#[test]
fn low_latency_all_to_alls_take_deepeps_published_times() {
    let path = std::path::Path::new("examples/serving/deepep-low-latency.toml");
    for (ep, published, ours) in [(32, 428.0, 490.7), (64, 487.0, 478.4), (128, 561.0, 529.9)] {
        let sets = [
            format!("workload.0.serving.prefill.ep={ep}"),
            format!("topology.hosts={}", ep + 1),
        ];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let (sim, _) = common::run_file(path, &sets);
        let step = rows(&sim)[..ep]
            .iter()
            .map(|r| num(r, "prefill_ps"))
            .max()
            .unwrap() as f64
            * 1e-6;
        assert!((step - ours).abs() < 0.05, "EP {ep}: {step:.1} us");
        assert!(
            (step / published - 1.0).abs() < 0.15,
            "EP {ep}: {step:.1} us"
        );
    }
}

/// Beside the training tenant, the decode steps' small all-to-alls wait
/// where ECMP's hashing piles flows onto one spine; DLB moves flowlets
/// off busy uplinks and time per output token falls, with its network
/// part.
#[test]
fn dlb_cuts_a_mixtures_time_per_output_token_beside_training() {
    let both = format!("{MOE}{TRAINING}");
    let (_, ecmp) = run_with(&both, &["switch.ecmp.seed=1"]);
    let (_, dlb) = run_with(&both, &["switch.balance.mode=\"dlb\""]);
    let (e, d) = (serving(&ecmp), serving(&dlb));
    assert!(p(&d.tpot_ps).p50 < 0.9 * p(&e.tpot_ps).p50, "{e:?}\n{d:?}");
    assert!(p(&d.tpot_network_ps).p50 < 0.8 * p(&e.tpot_network_ps).p50);
    assert!(p(&d.ttft_ps).p50 < p(&e.ttft_ps).p50);
}
