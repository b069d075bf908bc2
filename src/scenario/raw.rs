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
    #[serde(default)]
    pub workload: Vec<RawWorkload>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawSimulation {
    pub seed: Option<u64>,
    pub max_sim_time: Option<Value>,
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
    pub ecmp: Option<RawEcmp>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawEcmp {
    pub hash: Option<String>,
    pub fields: Option<Vec<String>>,
    pub seed: Option<Value>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawTransport {
    pub mtu: Option<Value>,
    pub write_mode: Option<String>,
    pub ack_every: Option<i64>,
    pub rto: Option<Value>,
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
}
