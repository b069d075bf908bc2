//! Scenario files: TOML in, resolved configuration out.
//!
//! Loading goes text -> TOML table -> `--set` overrides -> raw serde structs
//! (`raw`) -> resolved types (`resolve`) -> built topology, routes and the
//! expanded transfers. Every failure becomes a `ScenarioError` naming the
//! file, the line, the key, the value given and what was expected; nothing
//! runs on an invalid scenario.

pub mod balance;
pub mod configs;
pub use crate::keys as error;
pub mod deepspeed;
pub mod export;
pub mod failures;
pub mod hosts;
pub mod lossless;
pub mod megatron;
mod model;
pub mod random;
pub mod raw;
pub mod resolve;
pub mod serving;
pub mod values;

use toml::{Table, Value};

use crate::nic::TransportConfig;
use crate::rng::Streams;
use crate::switch::qos::QosConfig;
use crate::switch::SwitchConfig;
use crate::topology::routing::Routes;
use crate::topology::{Topology, TopologyError, TopologySpec};
use crate::units::SimTime;
use crate::workload::{self, FlowSpec, Workload};
pub use error::ScenarioError;
use error::{line_at, Finding, KeyError, KeyPath, Seg};

/// The built-in scenario `fabricsim run` uses when given none.
pub const DEFAULT_SCENARIO: &str = include_str!("../../examples/rail-optimized-pod.toml");
pub const DEFAULT_NAME: &str = "built-in default (examples/rail-optimized-pod.toml)";

/// Most threads a run may ask for (each builds the whole simulation).
pub const MAX_THREADS: u32 = 1024;

/// A fully resolved scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub seed: u64,
    /// Stop the run at this simulated time even if transfers remain.
    pub max_sim_time: Option<SimTime>,
    /// Threads to run on, each a partition of the fabric (see
    /// `engine::parallel`); the outputs do not depend on it.
    pub threads: u32,
    /// Packets (the default) or fluids on the same paths (`engine::fluid`).
    pub fidelity: Fidelity,
    /// At flow level: how ring passes between servers run.
    pub flow_rings: FlowRings,
    /// At flow level: whether DCQCN's QPs follow their rate controller
    /// over virtual queues and marks (`fluid::cc`), or take their fair
    /// shares at once.
    pub flow_cc: FlowCc,
    /// In a hybrid run, the switches whose transfers go as packets.
    pub packet_region: PacketRegion,
    /// When jobs' iterations after their first are made.
    pub job_iterations: JobIterations,
    pub topology: TopologySpec,
    pub switch: SwitchConfig,
    pub transport: TransportConfig,
    pub qos: QosConfig,
    /// Time series and which output files to write.
    pub report: ReportConfig,
    pub workloads: Vec<Workload>,
    /// Links and switches that fail, and routing's reaction time.
    pub failures: failures::FailureConfig,
    /// Threshold checks that did not pass (see `lossless::check`).
    pub warnings: Vec<Finding>,
    pub host: HostConfig,
    /// The switch configurations `[switch] config` names, as applied.
    pub configs: Option<configs::SwitchConfigs>,
    /// The keys a switch configuration can set (`qos`, `pfc`,
    /// `switch.ecmp`, `switch.balance`, `switch.partitions`) as the scenario and its
    /// configurations give them, for `config export`.
    pub switch_keys: Table,
}

/// How the network is simulated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Fidelity {
    /// Packet by packet.
    #[default]
    Packet,
    /// Transfers as fluids at their max-min fair rates.
    Flow,
    /// Transfers that cross the packet region (`Scenario::packet_region`)
    /// as packets, the rest as fluids (`engine::hybrid`).
    Hybrid,
}

impl Fidelity {
    pub fn name(self) -> &'static str {
        match self {
            Fidelity::Packet => "packet",
            Fidelity::Flow => "flow",
            Fidelity::Hybrid => "hybrid",
        }
    }

    pub fn from_name(s: &str) -> Option<Fidelity> {
        match s {
            "packet" => Some(Fidelity::Packet),
            "flow" => Some(Fidelity::Flow),
            "hybrid" => Some(Fidelity::Hybrid),
            _ => None,
        }
    }
}

/// When a training job's iterations after its first are made
/// (`workload::jobs`): the outputs are the same either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum JobIterations {
    /// As the run reaches each, and forgotten once done and written
    /// out: memory holds the iterations under way, whatever the count.
    /// A run on several threads or MPI ranks makes and forgets them as it
    /// goes too, and a trace's parts likewise.
    #[default]
    AsTheyRun,
    /// Every one before the run starts.
    UpFront,
}

/// At flow level, how a ring pass whose hops all cross the network runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FlowRings {
    /// One steady stream per ring for all its bytes, at the rate its
    /// slowest hop allows, with the pipeline's fill and drain added
    /// (`runtime::streams`).
    #[default]
    Streams,
    /// Message by message, as the packet level sends them.
    Messages,
}

/// At flow level, what sets a DCQCN QP's rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlowCc {
    /// Its max-min fair share, at once.
    #[default]
    FairShare,
    /// Its own DCQCN reaction point, hearing CNPs from the switch ports'
    /// virtual queues and their WRED marks.
    Dcqcn,
}

/// In a hybrid run, which switches are simulated packet by packet: a
/// transfer whose path crosses one of them runs as packets end to end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PacketRegion {
    /// Wherever queues would build: the switches with a port that a
    /// flow-level run of the same scenario saturates with transfers from
    /// two or more NICs, or with one faster than the port
    /// (`engine::hybrid::hot_switches`).
    #[default]
    Auto,
    /// These switches.
    Switches(Vec<crate::topology::SwitchId>),
}

/// Inside each host: its scale-up domain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostConfig {
    /// The system it was taken from, if a preset.
    pub preset: Option<hosts::HostPreset>,
    /// How the GPUs are joined, and how many sit on one compute tray
    /// (0: the host is one board).
    pub scale_up: hosts::ScaleUp,
    pub gpus_per_tray: u32,
    /// NVLink bandwidth of one GPU, both directions together (half each
    /// way), as GPU data sheets quote it.
    pub nvlink_bytes_per_s: u64,
    /// The share of that line rate that carries data: NVLink's packet
    /// headers and flow control take the rest.
    pub nvlink_efficiency: f64,
    /// From a copy's last byte to its receiver seeing it.
    pub nvlink_latency: SimTime,
    /// PCIe bandwidth between a GPU and the PCIe switch its NIC hangs off,
    /// both directions together (half each way). A GPU's network sends
    /// go no faster than its half.
    pub pcie_bytes_per_s: u64,
    /// The GPU generation (NCCL's constants), and whether NCCL may use
    /// the switch chips' reduction (NVLS).
    pub arch: crate::workload::tuner::Arch,
    pub nvls: bool,
}

impl HostConfig {
    /// The data one GPU sends (and receives) over NVLink per second:
    /// half the line rate, less NVLink's own overhead.
    pub fn nvlink_data_rate(&self) -> u64 {
        (self.nvlink_bytes_per_s as f64 / 2.0 * self.nvlink_efficiency).round() as u64
    }
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            preset: None,
            scale_up: hosts::ScaleUp::default(),
            gpus_per_tray: 0,
            nvlink_bytes_per_s: 900_000_000_000,
            nvlink_efficiency: hosts::NVLINK4_EFFICIENCY,
            nvlink_latency: SimTime::from_ns(1000),
            // PCIe Gen5 x16 as seed 002 gives it: 64 GB/s, 32 each way.
            pcie_bytes_per_s: 64_000_000_000,
            arch: crate::workload::tuner::Arch::Hopper,
            nvls: false,
        }
    }
}

/// An idle round trip over the fabric's longest path, bounded above: on
/// each of its links, NIC to NIC, a full data frame out and an ACK back,
/// each at the slowest rate and longest delay of any link.
fn longest_round_trip(
    topo: &Topology,
    routes: &Routes,
    mtu: u32,
    framing: crate::wire::frame::Framing,
) -> SimTime {
    use crate::wire::frame::Opcode;
    let links = routes.longest_switch_hops as u64 + 2;
    let Some(slowest) = topo.ports.iter().map(|p| p.rate).min_by_key(|r| r.bps()) else {
        return SimTime::ZERO;
    };
    let delay = topo.ports.iter().map(|p| p.delay).max().unwrap_or_default();
    let out = slowest.serialize(framing.wire_bytes(Opcode::WriteMiddle, mtu) as u64);
    let back = slowest.serialize(framing.wire_bytes(Opcode::Ack, 0) as u64);
    SimTime(links * (out.0 + back.0 + 2 * delay.0))
}

/// A scenario with its fabric built and its traffic expanded: everything a
/// simulation needs.
#[derive(Clone)]
pub struct Prepared {
    pub scenario: Scenario,
    pub topology: Topology,
    pub routes: Routes,
    pub flows: Vec<FlowSpec>,
    /// Dependencies between transfers, NVLink copies and compute.
    pub graph: crate::workload::graph::TaskGraph,
    pub collectives: Vec<crate::workload::collective::CollectiveRun>,
    pub jobs: Vec<crate::workload::training::JobRun>,
    /// Jobs' iterations to make as the run reaches them (`workload::jobs`).
    pub later: Option<Box<crate::workload::jobs::Later>>,
    /// Every port's PFC thresholds and headroom, resolved once.
    pub pfc: crate::switch::qos::PfcTable,
    /// Serving workloads' plans (`workload::serving`).
    pub serving: Vec<crate::workload::serving::Serving>,
}

impl Prepared {
    /// The audit of the switch configurations the scenario runs
    /// (`SwitchConfigs::audit`), if it names any.
    pub fn audit(&self) -> Option<configs::Audit> {
        let s = &self.scenario;
        s.configs.as_ref().map(|c| {
            c.audit(
                &self.topology,
                &s.qos,
                &s.transport,
                &self.pfc,
                (s.switch.buffer_bytes, s.switch.alpha_256),
            )
        })
    }
}

/// Loads a scenario from text. `file` names it in error messages.
pub fn prepare(file: &str, text: &str, sets: &[String]) -> Result<Prepared, ScenarioError> {
    prepare_within(file, text, sets, None)
}

/// As `prepare`, with the workloads' tasks and collectives held to
/// `limit_bytes` as they are made (the command line gives `--max-memory`,
/// or the memory the machine has available): a workload that would take
/// more is refused before it does. `prepare` sets no such limit.
pub fn prepare_within(
    file: &str,
    text: &str,
    sets: &[String],
    limit_bytes: Option<u64>,
) -> Result<Prepared, ScenarioError> {
    let mut table: Table = text.parse().map_err(|e: toml::de::Error| ScenarioError {
        file: file.to_string(),
        line: e.span().map(|s| line_at(text, s.start)),
        key: String::new(),
        message: format!("invalid TOML: {}", e.message()),
        from_set: false,
    })?;

    let mut set_paths = Vec::new();
    for s in sets {
        let err = |key: &str, message: String| ScenarioError {
            file: file.to_string(),
            line: None,
            key: key.to_string(),
            message,
            from_set: true,
        };
        let Some((k, v)) = s.split_once('=') else {
            return Err(err(
                s,
                "expected --set KEY=VALUE, e.g. --set topology.k=8".into(),
            ));
        };
        let path = KeyPath::parse_dotted(k.trim()).map_err(|m| err(k.trim(), m))?;
        let value = parse_set_value(v.trim());
        apply_set(&mut table, &path, value).map_err(|m| err(k.trim(), m))?;
        set_paths.push(path);
    }

    // Files a scenario names are relative to it.
    let base = match file {
        "-" | DEFAULT_NAME => std::path::Path::new(""),
        f => std::path::Path::new(f)
            .parent()
            .unwrap_or(std::path::Path::new("")),
    };
    let (applied, config_findings) =
        configs::read(&mut table, base).map_err(|(message, key)| {
            let from_set = set_paths.iter().any(|p| p.to_string() == "switch.config");
            ScenarioError {
                file: file.to_string(),
                line: if from_set {
                    None
                } else {
                    error::line_of(text, &key)
                },
                key: key.to_string(),
                message,
                from_set,
            }
        })?;

    // Keys a switch configuration gave, with the file and line each came
    // from: an error about one names them, not a key the user never
    // wrote.
    let mut switch_keys = Table::new();
    for k in ["qos", "pfc"] {
        if let Some(v) = table.get(k) {
            switch_keys.insert(k.into(), v.clone());
        }
    }
    if let Some(Value::Table(sw)) = table.get("switch") {
        let mut t = Table::new();
        for k in ["ecmp", "balance", "partitions"] {
            if let Some(v) = sw.get(k) {
                t.insert(k.into(), v.clone());
            }
        }
        switch_keys.insert("switch".into(), Value::Table(t));
    }
    let origins: Vec<(String, KeyPath, usize)> = applied
        .iter()
        .flat_map(|a| {
            let file = a.file.clone();
            a.import
                .origins()
                .into_iter()
                .map(move |(k, l)| (file.clone(), k, l))
        })
        .collect();
    let locate = |e: KeyError| {
        let from_set = set_paths.iter().any(|p| e.path.starts_with(p));
        let line = if from_set {
            None
        } else {
            error::line_of(text, &e.path)
        };
        let imported = origins
            .iter()
            .find(|(_, k, _)| e.path.starts_with(k))
            .or_else(|| origins.iter().find(|(_, k, _)| k.starts_with(&e.path)));
        match imported {
            Some((config, _, config_line)) if line.is_none() && !from_set => ScenarioError {
                file: config.clone(),
                line: Some(*config_line),
                key: e.path.to_string(),
                message: format!("{} ({file} gets the key from this line)", e.message),
                from_set,
            },
            _ => ScenarioError {
                file: file.to_string(),
                line,
                key: e.path.to_string(),
                message: e.message,
                from_set,
            },
        }
    };

    let mut raw: raw::RawScenario =
        serde_path_to_error::deserialize(Value::Table(table)).map_err(|e| {
            let mut path = KeyPath::root();
            for seg in e.path().iter() {
                match seg {
                    serde_path_to_error::Segment::Map { key } => path = path.key(key),
                    serde_path_to_error::Segment::Seq { index } => path = path.index(*index),
                    serde_path_to_error::Segment::Enum { variant } => path = path.key(variant),
                    serde_path_to_error::Segment::Unknown => {}
                }
            }
            // Serde speaks of Rust types; say what a scenario author writes.
            let msg = e
                .inner()
                .message()
                .replace("expected i64", "expected an integer")
                .replace("expected u64", "expected a non-negative integer")
                .replace("expected a sequence", "expected an array");
            // A table given as an array: serde names the Rust struct.
            let msg = match msg.find("expected struct Raw") {
                Some(at) => format!(
                    "{}expected a table of keys",
                    msg[..at].replace("invalid length", "got an array of length")
                ),
                None => msg,
            };
            // Point at the unknown key itself, not the table holding it.
            if let Some(rest) = msg.strip_prefix("unknown field `") {
                if let Some(name) = rest.split('`').next() {
                    if path.0.last() != Some(&Seg::Key(name.to_string())) {
                        path = path.key(name);
                    }
                }
            }
            locate(KeyError::new(&path, msg))
        })?;

    let root = KeyPath::root();
    let resolved = (|| -> Result<Prepared, KeyError> {
        let sim = raw.simulation.as_ref();
        let sp = root.key("simulation");
        let seed = sim.and_then(|s| s.seed).unwrap_or(1);
        let max_sim_time = match sim.and_then(|s| s.max_sim_time.as_ref()) {
            None => None,
            Some(v) => Some(values::time(
                Some(v),
                &sp.key("max_sim_time"),
                SimTime::ZERO,
            )?),
        };
        let threads = values::count(sim.and_then(|s| s.threads), &sp.key("threads"), 1, 1)?;
        if threads > MAX_THREADS {
            return Err(KeyError::new(
                &sp.key("threads"),
                format!("got {threads}, expected at most {MAX_THREADS}"),
            ));
        }
        let preset = resolve::host_preset(raw.host.as_ref(), &root.key("host"))?;
        let tspec = resolve::topology(raw.topology.as_ref(), &root.key("topology"), preset)?;
        let mut topology = Topology::build(&tspec).map_err(|e| {
            let key = match e {
                TopologyError::RadixExceeded { .. } => "switch_radix",
                TopologyError::Invalid(_) => "kind",
            };
            KeyError::new(&root.key("topology").key(key), e.to_string())
        })?;
        if topology.ports.len() > crate::topology::MAX_PORTS {
            return Err(KeyError::new(
                &root.key("topology"),
                format!(
                    "the fabric has {} ports; at most {} are supported",
                    topology.ports.len(),
                    crate::topology::MAX_PORTS
                ),
            ));
        }
        let routes = Routes::compute(&topology);
        let mut warnings = config_findings;
        let configs = if applied.is_empty() {
            None
        } else {
            let balance = &mut raw.switch.get_or_insert_with(Default::default).balance;
            let (c, found) = configs::SwitchConfigs::resolve(applied, &topology, balance)?;
            warnings.extend(found);
            Some(c)
        };
        let switch = resolve::switch(raw.switch.as_ref(), &root.key("switch"), &topology)?;
        let mut transport = resolve::transport(raw.transport.as_ref(), &root.key("transport"))?;
        transport.dcqcn = lossless::dcqcn(raw.dcqcn.as_ref(), &root.key("dcqcn"))?;
        let mut qos = lossless::qos(
            raw.qos.as_ref(),
            raw.pfc.as_ref(),
            &topology,
            (switch.buffer_bytes, switch.alpha_256),
            &root,
        )?;
        topology.vlan_id = qos.vlan_id;
        lossless::check_transport(
            &qos,
            transport.mtu,
            transport.data_dscp,
            &root.key("transport"),
        )
        .map_err(|e| {
            // A transport MTU left at its default against a class's MTU
            // someone wrote (or a switch configuration gave): the class's.
            let given = raw.transport.as_ref().is_some_and(|t| t.mtu.is_some());
            let q = qos.map.queue_of(transport.data_dscp) as usize;
            let name = &qos.queues[q].name;
            let classes = raw.qos.as_ref().map_or(&[][..], |r| &r.class[..]);
            match classes.iter().position(|c| c.name.as_deref() == Some(name)) {
                Some(i) if !given => KeyError::new(
                    &root.key("qos").key("class").index(i).key("mtu"),
                    format!(
                        "got {} B, below the {} B frames of the transport's default MTU of {} (lower transport.mtu, or raise the class's)",
                        qos.queues[q].mtu,
                        qos.framing
                            .frame_bytes(crate::wire::Opcode::WriteFirst, transport.mtu),
                        transport.mtu
                    ),
                ),
                _ => e,
            }
        })?;
        let mut pfc = crate::switch::qos::PfcTable::resolve(&topology, &qos, &transport.dcqcn);
        for p in configs.iter().flat_map(|c| c.pfc_off_ports()) {
            pfc.set_off(p);
        }
        let (found, error) = lossless::check(
            &topology,
            &qos,
            &pfc,
            (switch.buffer_bytes, switch.alpha_256),
        );
        warnings.extend(found);
        if let Some(c) = &configs {
            warnings.extend(
                c.audit(
                    &topology,
                    &qos,
                    &transport,
                    &pfc,
                    (switch.buffer_bytes, switch.alpha_256),
                )
                .findings,
            );
        }
        warnings.extend(balance::check(&topology, &switch.ecmp, &switch.balance));
        if let Some(e) = error {
            return Err(e);
        }
        let report = report_config(raw.report.as_ref(), &root.key("report"))?;
        let mut workloads = resolve::workloads(
            &raw.workload,
            &topology,
            &transport,
            base,
            &root.key("workload"),
        )?;
        if workloads.is_empty() {
            return Err(KeyError::new(
                &root.key("workload"),
                "missing; expected at least one [[workload]] entry",
            ));
        }
        // A Megatron-LM flag read but not modelled is said.
        for w in &workloads {
            if let crate::workload::Pattern::Model(job) = &w.pattern {
                for note in &job.not_modelled {
                    warnings.push(Finding {
                        key: w.path.to_string(),
                        message: note.clone(),
                    });
                }
            }
        }
        // The congestion controls the workloads run, and their settings.
        let mut used: Vec<crate::nic::Cc> = workloads.iter().map(|w| w.cc).collect();
        used.sort_unstable();
        used.dedup();
        transport.windows = resolve::windows(
            &used,
            resolve::WindowTables {
                dctcp: raw.dctcp.as_ref(),
                swift: raw.swift.as_ref(),
                hpcc: raw.hpcc.as_ref(),
                timely: raw.timely.as_ref(),
                uec: raw.uec.as_ref(),
            },
            &root,
        )?;
        // Where a workload's congestion control came from, for errors.
        let cc_key = |i: usize| {
            let w = &workloads[i];
            if raw.workload[i].congestion_control.is_some() {
                w.path.key("congestion_control")
            } else if transport.tenant_cc.iter().any(|&(t, _)| t == w.tenant) {
                root.key("transport")
                    .key("tenant_congestion_control")
                    .key(&w.tenant.to_string())
            } else {
                root.key("transport").key("congestion_control")
            }
        };
        if transport.mrc.is_some() {
            if let Some(i) = workloads
                .iter()
                .position(|w| w.cc.ack_driven() && !w.cc.needs_mrc())
            {
                let cc = workloads[i].cc;
                return Err(KeyError::new(&cc_key(i), resolve::mrc_window(cc)));
            }
        } else if let Some(i) = workloads.iter().position(|w| w.cc.needs_mrc()) {
            return Err(KeyError::new(&cc_key(i), resolve::uec_without_mrc()));
        }
        if let Some(i) = workloads.iter().position(|w| w.cc == crate::nic::Cc::Hpcc) {
            // HPCC anywhere: the fabric runs INT, and every RoCE frame
            // carries the header (the NICs insert it, the switches fill it).
            qos.framing.int_bytes = crate::wire::int::INT_BYTES;
            if routes.longest_switch_hops > crate::wire::int::MAX_HOPS as u32 {
                return Err(KeyError::new(
                    &cc_key(i),
                    format!(
                        "got \"hpcc\" on a fabric whose longest path crosses {} switches: an INT header has room for {} records",
                        routes.longest_switch_hops,
                        crate::wire::int::MAX_HOPS
                    ),
                ));
            }
        }
        let round_trip = longest_round_trip(&topology, &routes, transport.mtu, qos.framing);
        if transport.rto < round_trip {
            return Err(KeyError::new(
                &root.key("transport").key("rto"),
                format!(
                    "got {}, expected at least {round_trip}: the round trip of the fabric's longest path ({} links each way, a full data frame out and an ACK back on its slowest and longest links); a shorter timeout resends every packet before its ACK can arrive",
                    transport.rto,
                    routes.longest_switch_hops + 2
                ),
            ));
        }
        // Settings that leave a congestion control doing nothing a
        // deployment's would: run as given, and said.
        let warn = |warnings: &mut Vec<Finding>, key: &str, message: String| {
            warnings.push(Finding {
                key: key.into(),
                message,
            })
        };
        let nic_rate = topology
            .nics
            .iter()
            .flat_map(|n| n.ports.iter())
            .map(|&p| topology.port(p).rate)
            .min();
        let d = &transport.dcqcn;
        if used.contains(&crate::nic::Cc::Dcqcn) {
            if let Some(line) = nic_rate.filter(|&r| d.min_rate >= r) {
                warn(
                    &mut warnings,
                    "dcqcn.min_rate",
                    format!(
                        "{} is at or above the NICs' line rate ({}): DCQCN can never lower a rate",
                        d.min_rate, line
                    ),
                );
            }
            if d.cnp_delay > transport.rto.min(SimTime::from_us(100)) {
                warn(&mut warnings, "dcqcn.cnp_delay", format!(
                    "{}: a NIC sends its CNP within microseconds of the marked packet; this late, the rate is cut long after the queue it answers",
                    d.cnp_delay
                ));
            }
        }
        let w = &transport.windows;
        if used.contains(&crate::nic::Cc::Hpcc) && w.hpcc.eta < 0.5 {
            warn(
                &mut warnings,
                "hpcc.eta",
                format!(
                    "{}: HPCC would keep links below half full (the paper uses 0.95)",
                    w.hpcc.eta
                ),
            );
        }
        // Swift's target adds per_hop for each switch; a base far below
        // the round trip (a quarter of it) leaves every delay over target.
        let target = w.swift.base_target
            + SimTime(w.swift.per_hop.0 * u64::from(routes.longest_switch_hops));
        if used.contains(&crate::nic::Cc::Swift) && target.0 < round_trip.0 / 4 {
            warn(&mut warnings, "swift.base_target", format!(
                "{} (with per_hop, {target} on the longest path) is far below the fabric's longest unloaded round trip ({round_trip}): every delay reads as congestion and windows only shrink",
                w.swift.base_target
            ));
        }
        // Data in a lossless class must carry the priority that class's
        // pauses name: a NIC stops only that priority (tagged or not, it
        // gives each DSCP a priority, [qos.nic_priority]).
        let mut dscps: Vec<u8> = workloads.iter().map(|w| w.dscp).collect();
        dscps.push(transport.data_dscp);
        dscps.sort_unstable();
        dscps.dedup();
        for d in dscps {
            let (q, pcp) = (qos.map.queue_of(d), qos.map.pcp_of(d));
            let named = qos.queues[q as usize].pfc_priority.unwrap_or(q);
            if qos.queues[q as usize].lossless && pcp != named {
                warnings.push(Finding {
                    key: "qos.nic_priority".into(),
                    message: format!(
                        "the NICs give data with DSCP {d} priority {pcp}, but its class \"{}\" (queue {q}) pauses priority {named}: a NIC stops only the priority a pause names, so it keeps sending into the switch's full queue, and the switch drops what its headroom cannot hold (as the run does); set [qos.nic_priority] {d} = {named}{}",
                        qos.queues[q as usize].name,
                        if named != q { String::new() } else { format!(" or the class's pfc_priority = {pcp}") }
                    ),
                });
            }
        }
        // A workload in a class of its own: that class must carry its frames.
        for w in workloads.iter().filter(|w| w.dscp != transport.data_dscp) {
            let q = qos.map.queue_of(w.dscp) as usize;
            let frame = qos
                .framing
                .frame_bytes(crate::wire::frame::Opcode::WriteFirst, transport.mtu);
            if frame > qos.queues[q].mtu {
                return Err(KeyError::new(
                    &w.path.key("dscp"),
                    format!(
                        "got {}: its class \"{}\" (queue {q}) has an MTU of {} B, under the transport's {frame} B frames",
                        w.dscp, qos.queues[q].name, qos.queues[q].mtu
                    ),
                ));
            }
        }
        let host = resolve::host(raw.host.as_ref(), &root.key("host"), &topology)?;
        topology.gpus_per_tray = host.gpus_per_tray;
        warnings.extend(pcie_check(&topology, &host));
        let streams = Streams::new(seed);
        let tuning = workload::tuner::Host {
            nvlink_bytes_per_s: host.nvlink_bytes_per_s,
            pcie_bytes_per_s: host.pcie_bytes_per_s,
            arch: host.arch,
            nvls: host.nvls,
        };
        let fidelity = values::choice(
            sim.and_then(|s| s.fidelity.as_deref()),
            &sp.key("fidelity"),
            &[
                ("packet", Fidelity::Packet),
                ("flow", Fidelity::Flow),
                ("hybrid", Fidelity::Hybrid),
            ],
            Fidelity::Packet,
        )?;
        // Read at either fidelity, so that one scenario runs at both.
        let flow_rings = values::choice(
            sim.and_then(|s| s.flow_rings.as_deref()),
            &sp.key("flow_rings"),
            &[
                ("streams", FlowRings::Streams),
                ("messages", FlowRings::Messages),
            ],
            FlowRings::Streams,
        )?;
        let flow_cc = values::choice(
            sim.and_then(|s| s.flow_cc.as_deref()),
            &sp.key("flow_cc"),
            &[("fair-share", FlowCc::FairShare), ("dcqcn", FlowCc::Dcqcn)],
            FlowCc::FairShare,
        )?;
        // At flow level, rings may run as streams, whose messages are
        // not numbered.
        let stream_rings = fidelity == Fidelity::Flow && flow_rings == FlowRings::Streams;
        let job_iterations = values::choice(
            sim.and_then(|s| s.job_iterations.as_deref()),
            &sp.key("job_iterations"),
            &[
                ("as-they-run", JobIterations::AsTheyRun),
                ("up-front", JobIterations::UpFront),
            ],
            JobIterations::AsTheyRun,
        )?;
        // A trace's sends without their receive run, and are said.
        for w in &workloads {
            if let workload::Pattern::Chakra(t) = &w.pattern {
                if let Some(m) = &t.0.unmatched {
                    warnings.push(Finding {
                        key: w.path.key("trace").to_string(),
                        message: m.clone(),
                    });
                }
            }
        }
        // The traces go to their workloads' parts, which keep only what
        // making tasks needs; the scenario keeps their counts.
        let traces: Vec<_> = workloads
            .iter_mut()
            .filter_map(|w| match &mut w.pattern {
                workload::Pattern::Chakra(t) => {
                    let counts = std::sync::Arc::new(t.0.counts_only());
                    Some(std::mem::replace(&mut t.0, counts))
                }
                _ => None,
            })
            .collect();
        // Partitions of a parallel run make jobs' iterations and traces'
        // parts as they go, as one queue does (see `engine::parallel`).
        let expanded = workload::expand(
            &workloads,
            traces,
            &topology,
            &routes,
            &streams,
            tuning,
            stream_rings,
            job_iterations == JobIterations::AsTheyRun,
            limit_bytes,
        )?;
        let mut serving = Vec::new();
        for (wi, w) in workloads.iter().enumerate() {
            if let workload::Pattern::Serving(c) = &w.pattern {
                let nvlink = (host.nvlink_data_rate(), host.nvlink_latency);
                let plan = workload::serving::Serving::plan(
                    wi as u32,
                    (**c).clone(),
                    &topology,
                    &routes,
                    w.start,
                    &streams,
                    nvlink,
                )
                .map_err(|m| KeyError::new(&w.path.key("serving"), m))?;
                let ids = serving
                    .iter()
                    .chain([&plan])
                    .map(|s: &workload::serving::Serving| s.requests.len() as u64)
                    .sum::<u64>();
                if ids > u64::from(workload::serving::MAX_IDS) {
                    return Err(KeyError::new(
                        &w.path.key("serving"),
                        format!(
                            "the serving workloads hold {ids} requests; at most {} are supported in one run",
                            workload::serving::MAX_IDS
                        ),
                    ));
                }
                serving.push(plan);
            }
        }
        let qps: u64 = expanded.flows.iter().map(|f| u64::from(f.n_qps())).sum();
        if qps > workload::MAX_QPS as u64 {
            return Err(KeyError::new(
                &root.key("workload"),
                format!(
                    "the workloads open {qps} QPs; at most {} are supported (use fewer qps per transfer or fewer transfers)",
                    workload::MAX_QPS
                ),
            ));
        }
        let failures =
            failures::failures(&raw.failure, raw.routing.as_ref(), &topology, &host, &root)?;
        let packet_region = packet_region(
            sim.and_then(|s| s.packet_region.as_ref()),
            &sp.key("packet_region"),
            &topology,
        )?;
        if fidelity != Fidelity::Packet {
            let name = fidelity.name();
            let refuse = |why: String| {
                Err(KeyError::new(
                    &sp.key("fidelity"),
                    format!("got \"{name}\", which does not model {why} yet; use \"packet\""),
                ))
            };
            if threads > 1 {
                return refuse(format!("a run on {threads} threads (it runs on one)"));
            }
            if configs
                .as_ref()
                .is_some_and(|c| c.pfc_off_ports().next().is_some())
            {
                return refuse("a link whose PFC is off, lossy by configuration".into());
            }
            // Dynamic balancers and spraying split a transfer evenly over
            // the equal-cost members, selective rules and TELB colours as
            // a QP's data packets meet them (`Simulation::qp_split`).
        }
        let scenario = Scenario {
            name: raw.name.clone().unwrap_or_else(|| file.to_string()),
            description: raw.description.clone().unwrap_or_default(),
            seed,
            max_sim_time,
            threads,
            fidelity,
            flow_rings,
            flow_cc,
            packet_region,
            job_iterations,
            topology: tspec,
            switch,
            transport,
            qos,
            report,
            workloads,
            failures,
            warnings,
            host,
            configs,
            switch_keys,
        };
        Ok(Prepared {
            scenario,
            topology,
            routes,
            flows: expanded.flows,
            graph: expanded.graph,
            collectives: expanded.collectives,
            jobs: expanded.jobs,
            later: expanded.later,
            pfc,
            serving,
        })
    })();
    resolved.map_err(locate)
}

/// Reads a `--set` value as TOML (numbers, booleans, quoted strings,
/// arrays), falling back to a bare string: `--set topology.nic_speed=400G`.
fn parse_set_value(v: &str) -> Value {
    match format!("v = {v}").parse::<Table>() {
        Ok(mut t) => t.remove("v").unwrap_or(Value::String(v.to_string())),
        Err(_) => Value::String(v.to_string()),
    }
}

fn apply_set(table: &mut Table, path: &KeyPath, value: Value) -> Result<(), String> {
    let mut root = Value::Table(std::mem::take(table));
    let result = set_in(&mut root, &path.0, value, path);
    if let Value::Table(t) = root {
        *table = t;
    }
    result
}

fn set_in(cur: &mut Value, segs: &[Seg], value: Value, full: &KeyPath) -> Result<(), String> {
    let Some((seg, rest)) = segs.split_first() else {
        return Err("empty key".into());
    };
    match (seg, cur) {
        (Seg::Key(k), Value::Table(t)) => {
            if rest.is_empty() {
                t.insert(k.clone(), value);
                return Ok(());
            }
            let child = t
                .entry(k.clone())
                .or_insert_with(|| Value::Table(Table::new()));
            set_in(child, rest, value, full)
        }
        (Seg::Index(i), Value::Array(a)) => {
            let n = a.len();
            let child = a
                .get_mut(*i)
                .ok_or_else(|| format!("index {i} does not exist (there are {n} entries)"))?;
            if rest.is_empty() {
                *child = value;
                return Ok(());
            }
            set_in(child, rest, value, full)
        }
        // A table's key may be digits (`qos.nic_priority.24`).
        (Seg::Index(i), t @ Value::Table(_)) => {
            let mut segs = vec![Seg::Key(i.to_string())];
            segs.extend_from_slice(rest);
            set_in(t, &segs, value, full)
        }
        _ => Err(format!(
            "cannot set {full}: a parent key is not a table or an array"
        )),
    }
}

/// A warning when a GPU's PCIe link (one way) is slower than its NIC, so
/// that the GPU cannot fill the NIC.
/// `simulation.packet_region`: `"auto"`, or a list of switch names in
/// which `*` matches any run of characters (`["pod1-*"]`); each name
/// must match a switch.
fn packet_region(
    v: Option<&Value>,
    path: &KeyPath,
    topo: &Topology,
) -> Result<PacketRegion, KeyError> {
    let expected =
        "expected \"auto\" or a list of switch names (\"*\" matches any run of characters)";
    let names = match v {
        None => return Ok(PacketRegion::Auto),
        Some(Value::String(s)) if s == "auto" => return Ok(PacketRegion::Auto),
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(v) => {
            return Err(KeyError::new(
                path,
                format!("got {}, {expected}", values::show(v)),
            ))
        }
    };
    let mut picked = vec![false; topo.switches.len()];
    for (i, v) in names.iter().enumerate() {
        let Value::String(pattern) = v else {
            return Err(KeyError::new(
                &path.index(i),
                format!("got {}, expected a switch name", values::show(v)),
            ));
        };
        let mut any = false;
        for (s, sw) in topo.switches.iter().enumerate() {
            if crate::config::glob(pattern, &sw.name) {
                picked[s] = true;
                any = true;
            }
        }
        if !any {
            return Err(KeyError::new(
                &path.index(i),
                format!(
                    "\"{pattern}\" names no switch in this topology (e.g. \"{}\")",
                    topo.switches.first().map_or("", |s| s.name.as_str())
                ),
            ));
        }
    }
    let ids = (0..picked.len() as u32)
        .filter(|&s| picked[s as usize])
        .map(crate::topology::SwitchId)
        .collect();
    Ok(PacketRegion::Switches(ids))
}

fn pcie_check(topo: &Topology, host: &HostConfig) -> Option<Finding> {
    let one_way = host.pcie_bytes_per_s / 2 * 8;
    let nic = topo
        .gpus
        .iter()
        .map(|g| {
            topo.nics[g.nic.idx()]
                .ports
                .iter()
                .map(|&p| topo.port(p).rate.bps())
                .sum::<u64>()
        })
        .max()?;
    (nic > one_way).then(|| Finding {
        key: "host.pcie".into(),
        message: format!(
            "a GPU's PCIe link carries {:.0} Gb/s each way ({} GB/s both ways), less than its NIC's {:.0} Gb/s: its sends are capped there; set [host] pcie = \"128GB/s\" for PCIe Gen5 x16 at 64 GB/s each way",
            one_way as f64 / 1e9,
            host.pcie_bytes_per_s / 1_000_000_000,
            nic as f64 / 1e9
        ),
    })
}

/// What the run records over time and which views it writes.
#[derive(Clone, Debug)]
pub struct ReportConfig {
    /// The first sampling interval (`None`: no time series).
    pub sample_interval: Option<SimTime>,
    /// Most points a series holds before neighbours merge.
    pub samples: usize,
    /// QPs (the first by id) whose rates are recorded.
    pub sample_qps: usize,
    /// Write the SVG plots.
    pub plots: bool,
    /// Write `report.html`.
    pub html: bool,
}

impl Default for ReportConfig {
    fn default() -> Self {
        ReportConfig {
            sample_interval: Some(SimTime::from_ns(1000)),
            samples: 200,
            sample_qps: 16,
            plots: true,
            html: true,
        }
    }
}

fn report_config(raw: Option<&raw::RawReport>, path: &KeyPath) -> Result<ReportConfig, KeyError> {
    let mut c = ReportConfig::default();
    let Some(raw) = raw else {
        return Ok(c);
    };
    c.sample_interval = match raw.sample_interval.as_ref() {
        None => c.sample_interval,
        Some(Value::String(s)) if s == "off" => None,
        Some(v) => {
            let p = path.key("sample_interval");
            let t = values::time(Some(v), &p, SimTime::ZERO)?;
            if t < SimTime::from_ns(100) {
                return Err(KeyError::new(
                    &p,
                    format!(
                        "got {}, expected \"off\" or an interval of at least 100ns",
                        values::show(v)
                    ),
                ));
            }
            Some(t)
        }
    };
    let bounded = |v: Option<i64>, key: &str, default: usize, lo: i64, hi: i64| match v {
        None => Ok(default),
        Some(n) if (lo..=hi).contains(&n) => Ok(n as usize),
        Some(n) => Err(KeyError::new(
            &path.key(key),
            format!("got {n}, expected an integer from {lo} to {hi}"),
        )),
    };
    c.samples = bounded(raw.samples, "samples", c.samples, 2, 100_000)?;
    c.sample_qps = bounded(raw.sample_qps, "sample_qps", c.sample_qps, 0, 10_000)?;
    c.plots = raw.plots.unwrap_or(c.plots);
    c.html = raw.html.unwrap_or(c.html);
    Ok(c)
}
