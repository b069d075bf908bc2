//! Serde mirror of the scenario file: every key optional, unknown keys
//! refused. Values with units stay as raw TOML values here; `resolve`
//! interprets them and reports what it expected.

use serde::Deserialize;
use toml::Value;

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    pub name: Option<String>,
    pub description: Option<String>,
    pub simulation: Option<RawSimulation>,
    pub topology: Option<RawTopology>,
    pub switch: Option<RawSwitch>,
    pub transport: Option<RawTransport>,
    pub qos: Option<RawQos>,
    pub pfc: Option<RawPfc>,
    pub dcqcn: Option<RawDcqcn>,
    pub dctcp: Option<RawDctcp>,
    pub swift: Option<RawSwift>,
    pub hpcc: Option<RawHpcc>,
    pub timely: Option<RawTimely>,
    pub uec: Option<RawUec>,
    pub report: Option<RawReport>,
    pub host: Option<RawHost>,
    #[serde(default)]
    pub workload: Vec<RawWorkload>,
    #[serde(default)]
    pub failure: Vec<RawFailure>,
    pub routing: Option<RawRouting>,
}

/// A link or switch that fails (or a link that slows down) at a time.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawFailure {
    /// The two ends of a link, by device name.
    pub link: Option<Vec<String>>,
    /// Which of several parallel links (0-based).
    pub index: Option<i64>,
    pub switch: Option<String>,
    /// NVLink switch chips of a host's domain that fail.
    pub nvlink_switches: Option<i64>,
    pub host: Option<i64>,
    /// A compute tray of `host`: its NICs' links fail.
    pub tray: Option<i64>,
    pub at: Option<Value>,
    pub recover: Option<Value>,
    /// The link runs at this rate from `at` instead of failing.
    pub rate: Option<Value>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawRouting {
    pub reconverge: Option<Value>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawReport {
    pub sample_interval: Option<Value>,
    pub samples: Option<i64>,
    pub sample_qps: Option<i64>,
    pub plots: Option<bool>,
    pub html: Option<bool>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawQos {
    pub mark_on: Option<String>,
    pub vlan_tagging: Option<bool>,
    pub vlan_id: Option<i64>,
    /// The 802.1p priority the NICs stamp on tagged frames, per DSCP
    /// (`48 = 7`); unlisted DSCPs get their top three bits.
    pub nic_priority: Option<std::collections::BTreeMap<String, i64>>,
    #[serde(default)]
    pub class: Vec<RawClass>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawClass {
    pub name: Option<String>,
    pub dscp: Option<Vec<i64>>,
    /// 802.1p priorities (CoS) of tagged frames this class takes.
    pub cos: Option<Vec<i64>>,
    /// "any" (default): a frame that matches `dscp` or `cos`; "all": both.
    #[serde(rename = "match")]
    pub match_: Option<String>,
    pub queue: Option<i64>,
    pub strict: Option<bool>,
    pub bandwidth_percent: Option<i64>,
    pub lossless: Option<bool>,
    pub ecn: Option<bool>,
    pub trim: Option<bool>,
    pub mtu: Option<Value>,
    /// "off" or a table of `RawWred`.
    pub wred: Option<Value>,
    pub xoff: Option<Value>,
    pub xon: Option<Value>,
    pub headroom: Option<Value>,
    /// The priority the class's pause frames name (default: the queue).
    pub pfc_priority: Option<i64>,
    /// Most the class may send out of a port, as a rate ("100G").
    pub shape: Option<Value>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawWred {
    pub min: Option<Value>,
    pub max: Option<Value>,
    pub max_probability: Option<Value>,
    pub weight: Option<i64>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawPfc {
    pub enabled: Option<bool>,
    pub quanta: Option<i64>,
    pub refresh: Option<Value>,
    pub response_time: Option<Value>,
    pub watchdog: Option<RawWatchdog>,
    #[serde(default)]
    pub storm: Vec<RawStorm>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawWatchdog {
    pub interval: Option<Value>,
    pub action: Option<String>,
    pub recovery: Option<Value>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawStorm {
    pub gpu: Option<i64>,
    pub priority: Option<i64>,
    pub start: Option<Value>,
    pub stop: Option<Value>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawDcqcn {
    pub preset: Option<String>,
    pub g: Option<Value>,
    pub alpha_timer: Option<Value>,
    pub rate_decrease_interval: Option<Value>,
    pub rate_increase_timer: Option<Value>,
    pub byte_counter: Option<Value>,
    pub f: Option<i64>,
    pub rai: Option<Value>,
    pub rhai: Option<Value>,
    pub min_rate: Option<Value>,
    pub cnp_interval: Option<Value>,
    pub cnp_delay: Option<Value>,
    pub clamp_target: Option<String>,
    pub alpha_update: Option<String>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawSimulation {
    pub seed: Option<u64>,
    pub max_sim_time: Option<Value>,
    pub threads: Option<i64>,
    pub fidelity: Option<String>,
    pub flow_rings: Option<String>,
    pub flow_cc: Option<String>,
    pub packet_region: Option<Value>,
    pub job_iterations: Option<String>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawTopology {
    pub kind: Option<String>,
    pub hosts: Option<i64>,
    pub gpus_per_host: Option<i64>,
    pub nics_per_host: Option<i64>,
    pub nic_ports: Option<i64>,
    pub nic_speed: Option<Value>,
    pub hosts_per_leaf: Option<i64>,
    pub rails_per_leaf: Option<i64>,
    pub spines: Option<i64>,
    pub uplink_speed: Option<Value>,
    pub uplinks_per_spine: Option<i64>,
    pub pods: Option<i64>,
    pub super_spines: Option<i64>,
    pub spine_uplink_speed: Option<Value>,
    pub spine_uplinks_per_super_spine: Option<i64>,
    pub super_spine_planes: Option<i64>,
    pub k: Option<i64>,
    pub link_speed: Option<Value>,
    pub link_delay: Option<Value>,
    pub cable_length: Option<Value>,
    pub switch_radix: Option<i64>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawSwitch {
    pub buffer: Option<Value>,
    pub dynamic_threshold: Option<Value>,
    /// `{ lossless = "80%", lossy = "10%" }`: the most each kind of class
    /// may hold of the buffer.
    pub partitions: Option<Value>,
    pub ecmp: Option<RawEcmp>,
    pub balance: Option<RawBalance>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawBalance {
    pub mode: Option<String>,
    pub dlb_mode: Option<String>,
    pub flowlet_timeout: Option<Value>,
    pub quality_interval: Option<Value>,
    pub load_weight: Option<Value>,
    pub queue_full: Option<Value>,
    pub rebalance_bands: Option<i64>,
    pub table_size: Option<i64>,
    pub spray_order: Option<String>,
    pub alb_window: Option<Value>,
    pub alb_interval: Option<Value>,
    pub alb_tolerance: Option<Value>,
    pub alb_max_moves: Option<i64>,
    pub glb_heartbeat: Option<Value>,
    pub glb_combine: Option<String>,
    pub glb_remote_weight: Option<Value>,
    /// Selective DLB / spraying rules.
    pub select: Option<Vec<RawRule>>,
    /// TELB policies.
    pub policy: Option<Vec<RawRule>>,
    /// TELB path colours: name -> next-hop switch names.
    pub colors: Option<std::collections::BTreeMap<String, Vec<String>>>,
    /// Overrides by tier name (leaf, spine, super-spine; edge,
    /// aggregation, core).
    pub tier: Option<std::collections::BTreeMap<String, RawBalance>>,
    /// Overrides by switch name.
    pub switch: Option<std::collections::BTreeMap<String, RawBalance>>,
}

/// A selective rule or a TELB policy: what it matches and what it does.
#[derive(Deserialize, Default, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    pub tenant: Option<Vec<i64>>,
    pub gpu: Option<Vec<i64>>,
    pub qp: Option<Vec<i64>>,
    pub udp_sport: Option<Vec<i64>>,
    pub ingress: Option<Vec<String>>,
    pub opcode: Option<Vec<String>>,
    pub traffic_class: Option<Vec<i64>>,
    /// Selective rules: the balancer matching traffic uses.
    pub mode: Option<String>,
    /// Policies: the path colour and its backup.
    pub color: Option<String>,
    pub backup: Option<String>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawEcmp {
    pub hash: Option<String>,
    pub fields: Option<Vec<String>>,
    pub seed: Option<Value>,
    pub symmetric: Option<bool>,
    pub resilient: Option<bool>,
    pub buckets: Option<i64>,
    pub weights: Option<Value>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawTransport {
    pub mtu: Option<Value>,
    pub write_mode: Option<String>,
    pub ack_every: Option<i64>,
    pub rto: Option<Value>,
    pub congestion_control: Option<String>,
    pub out_of_order: Option<String>,
    pub protocol: Option<String>,
    pub mrc_paths: Option<i64>,
    pub mrc_probe: Option<Value>,
    pub mrc_ecn_threshold: Option<Value>,
    pub mrc_reorder: Option<Value>,
    pub reorder_buffer: Option<Value>,
    pub dscp: Option<i64>,
    pub cnp_dscp: Option<i64>,
    /// DSCP of each tenant's data (tenant id to DSCP), for workloads that
    /// give none of their own.
    pub tenant_dscp: Option<std::collections::BTreeMap<String, Value>>,
    /// Congestion control of each tenant's workloads (tenant id to its
    /// name), for workloads that give none of their own.
    pub tenant_congestion_control: Option<std::collections::BTreeMap<String, Value>>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawWorkload {
    pub kind: Option<String>,
    pub src: Option<i64>,
    pub dst: Option<i64>,
    pub srcs: Option<Vec<i64>>,
    pub senders: Option<i64>,
    pub gpus: Option<Vec<i64>>,
    pub bytes: Option<Value>,
    pub start: Option<Value>,
    pub qps: Option<i64>,
    pub rail_aligned: Option<bool>,
    pub rate: Option<Value>,
    pub tenant: Option<i64>,
    /// DSCP of this workload's data and ACKs (default: its tenant's, or
    /// the transport's).
    pub dscp: Option<i64>,
    /// Congestion control of this workload's QPs (default: its tenant's,
    /// or the transport's).
    pub congestion_control: Option<String>,
    pub op: Option<String>,
    pub algorithm: Option<String>,
    pub channels: Option<i64>,
    pub chunk: Option<Value>,
    pub pxn: Option<bool>,
    /// Software time of a collective's steps: "nccl", "none" or a
    /// duration per hop.
    pub step_latency: Option<Value>,
    /// NCCL protocol of collectives: simple, ll128 or ll.
    pub protocol: Option<String>,
    pub across: Option<String>,
    pub root: Option<i64>,
    /// A Chakra trace folder, relative to the scenario file.
    pub trace: Option<String>,
    /// `kind = "megatron"`: Megatron-LM's arguments, and a launch script
    /// (relative to the scenario file) whose Python program's arguments
    /// come first.
    pub args: Option<String>,
    pub script: Option<String>,
    /// `kind = "deepspeed"`: the DeepSpeed configuration (JSON), relative
    /// to the scenario file.
    pub config: Option<String>,
    /// A Chakra trace's process groups (a JSON file of group name to
    /// ranks, relative to the scenario file).
    pub groups: Option<String>,
    /// What a Chakra all-gather's or reduce-scatter's comm_size counts:
    /// "astra-sim" (the default), "buffer" or "shard".
    pub comm_size: Option<String>,
    /// How far a Chakra trace's order looks ahead in each rank's file.
    pub window: Option<i64>,
    pub iterations: Option<i64>,
    pub phase: Option<Vec<RawPhase>>,
    /// Background flows: flow-size CDF file, load, how long.
    pub cdf: Option<String>,
    pub load: Option<f64>,
    pub duration: Option<Value>,
    pub checkpoint: Option<RawCheckpoint>,
    /// `kind = "model"`: the transformer, its parallelism and the GPU.
    pub model: Option<RawModel>,
    pub parallel: Option<RawParallel>,
    pub gpu: Option<RawGpu>,
    /// `kind = "serving"`: requests, pools and KV transfers.
    pub serving: Option<RawServing>,
}

/// `[workload.serving]`.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawServing {
    /// Poisson arrivals: requests per second, how many, their sizes (a
    /// count or [lo, hi]).
    pub rate: Option<f64>,
    pub requests: Option<i64>,
    pub prompt_tokens: Option<Value>,
    pub output_tokens: Option<Value>,
    /// Or a trace file of requests, relative to the scenario file.
    pub trace: Option<String>,
    pub prefill: Option<RawPool>,
    pub decode: Option<RawPool>,
    /// "layer" or "whole".
    pub kv_transfer: Option<String>,
    /// Times given instead of the roofline's.
    pub prefill_per_token: Option<Value>,
    pub decode_step: Option<Value>,
    /// The bytes of a value the experts' dispatch sends.
    pub dispatch_bytes: Option<i64>,
}

/// A pool of serving replicas.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawPool {
    pub instances: Option<i64>,
    pub tp: Option<i64>,
    pub ep: Option<i64>,
    pub max_batch: Option<i64>,
    /// The experts' all-to-all: "nccl" or "low-latency".
    pub a2a: Option<String>,
}

#[derive(Deserialize, serde::Serialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    pub layers: Option<i64>,
    pub hidden: Option<i64>,
    pub ffn: Option<i64>,
    pub heads: Option<i64>,
    pub kv_heads: Option<i64>,
    pub seq: Option<i64>,
    pub vocab: Option<i64>,
    pub vocab_divisible_by: Option<i64>,
    pub micro_batch: Option<i64>,
    pub global_batch: Option<i64>,
    pub param_bytes: Option<i64>,
    pub grad_bytes: Option<i64>,
    pub act_bytes: Option<i64>,
    pub gated: Option<bool>,
    pub norm: Option<String>,
    pub bias: Option<bool>,
    pub tied: Option<bool>,
    pub positions: Option<i64>,
    pub loss_fusion: Option<bool>,
    pub causal: Option<bool>,
    pub fp8: Option<bool>,
    pub aux_loss: Option<bool>,
    pub experts: Option<i64>,
    pub top_k: Option<i64>,
    pub expert_ffn: Option<i64>,
    pub capacity_factor: Option<f64>,
    pub shared_ffn: Option<i64>,
    pub dispatcher: Option<String>,
    pub fp8_param_gather: Option<bool>,
    pub pad_to_capacity: Option<bool>,
    /// Serving: a head's width (default hidden / heads), a latent KV
    /// cache's width per token and layer, and a cached value's bytes.
    pub head_dim: Option<i64>,
    pub kv_latent: Option<i64>,
    pub kv_bytes: Option<i64>,
    /// Serving a mixture of experts: layers before the first with
    /// experts.
    pub dense_layers: Option<i64>,
}

#[derive(Deserialize, serde::Serialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawParallel {
    pub tp: Option<i64>,
    pub cp: Option<i64>,
    pub pp: Option<i64>,
    pub dp: Option<i64>,
    pub ep: Option<i64>,
    pub schedule: Option<String>,
    pub virtual_stages: Option<i64>,
    pub first_stage_layers: Option<i64>,
    pub last_stage_layers: Option<i64>,
    pub zero: Option<i64>,
    pub sequence_parallel: Option<bool>,
    pub accounting: Option<String>,
    pub order: Option<String>,
    pub bucket: Option<i64>,
    pub overlap: Option<bool>,
    pub recompute: Option<String>,
    pub framework: Option<String>,
    pub tp_overlap: Option<bool>,
    pub param_overlap: Option<bool>,
    pub prefetch: Option<i64>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawGpu {
    pub preset: Option<String>,
    pub tflops: Option<f64>,
    pub fp8_tflops: Option<f64>,
    pub hbm: Option<Value>,
    pub efficiency: Option<f64>,
    /// Times given per kernel, by `KernelKind` name.
    pub kernels: Option<toml::Table>,
}

/// One phase of a training iteration: compute, then collectives.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawPhase {
    pub compute: Option<Value>,
    pub op: Option<String>,
    pub algorithm: Option<String>,
    /// A size, or a list of sizes (one collective per gradient bucket).
    pub bytes: Option<Value>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawCheckpoint {
    pub every: Option<i64>,
    pub bytes: Option<Value>,
    pub storage: Option<Vec<i64>>,
}

/// Inside each host: NVLink between the GPUs.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawHost {
    pub preset: Option<String>,
    pub nvlink: Option<Value>,
    pub nvlink_latency: Option<Value>,
    pub nvlink_efficiency: Option<Value>,
    pub pcie: Option<Value>,
    pub scale_up: Option<String>,
    pub nvlink_switches: Option<i64>,
    pub gpus_per_tray: Option<i64>,
    pub nvls: Option<bool>,
}

/// `[dctcp]`: the DCTCP-style window's settings.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawDctcp {
    pub g: Option<Value>,
    pub initial_window: Option<i64>,
}

/// `[hpcc]`: HPCC's settings.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawHpcc {
    pub eta: Option<Value>,
    pub max_stage: Option<i64>,
    pub ai: Option<Value>,
    pub min_rate: Option<Value>,
    pub base_rtt: Option<Value>,
}

/// `[timely]`: TIMELY's settings.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawTimely {
    pub t_low: Option<Value>,
    pub t_high: Option<Value>,
    pub min_rtt: Option<Value>,
    pub alpha: Option<Value>,
    pub beta: Option<Value>,
    pub delta: Option<Value>,
    pub min_rate: Option<Value>,
}

/// `[uec]`: the NSCC-style window's settings.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawUec {
    pub target_delay: Option<Value>,
    pub gamma: Option<Value>,
    pub max_window: Option<Value>,
    pub quick_adapt: Option<bool>,
}

/// `[swift]`: the Swift-style window's settings.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawSwift {
    pub base_target: Option<Value>,
    pub per_hop: Option<Value>,
    pub fs_range: Option<Value>,
    pub ai: Option<Value>,
    pub beta: Option<Value>,
    pub max_mdf: Option<Value>,
    pub initial_window: Option<i64>,
}
