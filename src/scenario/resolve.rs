//! From the raw file to resolved configuration: defaults applied, units
//! parsed, every value range-checked, so that nothing downstream sees an
//! `Option` for a required value or an unchecked number.

use crate::workload::chakra::CommSizes;
use toml::Value;

use super::error::{KeyError, KeyPath};
use super::hosts::{HostPreset, ScaleUp};
use super::raw::*;
use super::values::{choice, count, fraction, positive_time, rate, show, size, time};
use crate::nic::transport::OooPolicy;
use crate::nic::{Cc, TransportConfig, WindowParams, WriteMode};
use crate::switch::admit::ALPHA_ONE;
use crate::switch::SwitchConfig;
use crate::topology::{GpuId, Topology, TopologyKind, TopologySpec};
use crate::units::{parse_byte_rate, parse_length_m, Rate, SimTime};
use crate::workload::collective::StepLatency;
use crate::workload::collective::{Algorithm, Auto, Collective, Op, Protocol};
use crate::workload::{Pattern, Workload};

type R<T> = Result<T, KeyError>;

/// Keys of `[topology]` that only some kinds use.
const KIND_KEYS: &[(&str, &[TopologyKind])] = {
    use TopologyKind::*;
    &[
        ("hosts_per_leaf", &[RailOptimized, MultiPod]),
        ("rails_per_leaf", &[RailOptimized, MultiPod]),
        ("spines", &[RailOptimized, MultiPod]),
        ("uplink_speed", &[RailOptimized, MultiPod, FatTree]),
        ("uplinks_per_spine", &[RailOptimized, MultiPod]),
        ("pods", &[MultiPod]),
        ("super_spines", &[MultiPod]),
        ("spine_uplink_speed", &[MultiPod]),
        ("spine_uplinks_per_super_spine", &[MultiPod]),
        ("super_spine_planes", &[MultiPod]),
        ("k", &[FatTree]),
        ("link_speed", &[FatTree, Ring]),
        (
            "hosts",
            &[
                SingleRail,
                DualRail,
                RailOnly,
                RailOptimized,
                MultiPod,
                Ring,
            ],
        ),
    ]
};

pub fn topology(
    raw: Option<&RawTopology>,
    path: &KeyPath,
    preset: Option<HostPreset>,
) -> R<TopologySpec> {
    let Some(t) = raw else {
        return Err(KeyError::new(
            path,
            "missing [topology] table; every scenario needs one",
        ));
    };
    let kinds = [
        ("single-rail", TopologyKind::SingleRail),
        ("dual-rail", TopologyKind::DualRail),
        ("rail-only", TopologyKind::RailOnly),
        ("rail-optimized", TopologyKind::RailOptimized),
        ("multi-pod", TopologyKind::MultiPod),
        ("fat-tree", TopologyKind::FatTree),
        ("ring", TopologyKind::Ring),
    ];
    let Some(kind) = t.kind.as_deref() else {
        let names: Vec<&str> = kinds.iter().map(|k| k.0).collect();
        return Err(KeyError::new(
            &path.key("kind"),
            format!("missing; expected one of {}", names.join(", ")),
        ));
    };
    let kind = choice(Some(kind), &path.key("kind"), &kinds, TopologyKind::Ring)?;
    let present: &[(&str, bool)] = &[
        ("hosts_per_leaf", t.hosts_per_leaf.is_some()),
        ("rails_per_leaf", t.rails_per_leaf.is_some()),
        ("spines", t.spines.is_some()),
        ("uplink_speed", t.uplink_speed.is_some()),
        ("uplinks_per_spine", t.uplinks_per_spine.is_some()),
        ("pods", t.pods.is_some()),
        ("super_spines", t.super_spines.is_some()),
        ("spine_uplink_speed", t.spine_uplink_speed.is_some()),
        (
            "spine_uplinks_per_super_spine",
            t.spine_uplinks_per_super_spine.is_some(),
        ),
        ("super_spine_planes", t.super_spine_planes.is_some()),
        ("k", t.k.is_some()),
        ("link_speed", t.link_speed.is_some()),
        ("hosts", t.hosts.is_some()),
    ];
    for (key, kinds_ok) in KIND_KEYS {
        let given = present.iter().any(|(k, p)| k == key && *p);
        if given && !kinds_ok.contains(&kind) {
            let names: Vec<&str> = kinds_ok.iter().map(|k| k.name()).collect();
            return Err(KeyError::new(
                &path.key(key),
                format!(
                    "is not used by kind = \"{}\" (only by {})",
                    kind.name(),
                    names.join(", ")
                ),
            ));
        }
    }
    if t.link_delay.is_some() && t.cable_length.is_some() {
        return Err(KeyError::new(
            &path.key("cable_length"),
            "give either link_delay or cable_length, not both",
        ));
    }
    let fat = kind == TopologyKind::FatTree;
    // Every link at link_speed, one GPU per host by default.
    let uniform = matches!(kind, TopologyKind::FatTree | TopologyKind::Ring);
    let link_speed = rate(
        t.link_speed.as_ref(),
        &path.key("link_speed"),
        Rate::gbps(100),
    )?;
    let figures = preset.map(HostPreset::figures);
    let gpus_per_host = count(
        t.gpus_per_host,
        &path.key("gpus_per_host"),
        figures.map_or(if uniform { 1 } else { 8 }, |f| f.gpus),
        1,
    )?;
    if let (Some(p), Some(f)) = (preset, figures) {
        if gpus_per_host != f.gpus {
            return Err(KeyError::new(
                &path.key("gpus_per_host"),
                format!(
                    "got {gpus_per_host}, expected {}: host.preset = \"{}\" is a domain of {} GPUs, one host",
                    f.gpus,
                    p.name(),
                    f.gpus
                ),
            ));
        }
    }
    let nics_per_host = count(
        t.nics_per_host,
        &path.key("nics_per_host"),
        gpus_per_host,
        1,
    )?;
    if nics_per_host > gpus_per_host {
        return Err(KeyError::new(
            &path.key("nics_per_host"),
            format!("got {nics_per_host}, expected at most gpus_per_host ({gpus_per_host})"),
        ));
    }
    let nic_ports_default = if kind == TopologyKind::DualRail { 2 } else { 1 };
    let nic_ports = count(t.nic_ports, &path.key("nic_ports"), nic_ports_default, 1)?;
    if nic_ports > 2 {
        return Err(KeyError::new(
            &path.key("nic_ports"),
            format!("got {nic_ports}, expected 1 (single-port) or 2 (dual-port)"),
        ));
    }
    let nic_speed = rate(
        t.nic_speed.as_ref(),
        &path.key("nic_speed"),
        match figures {
            Some(f) => f.nic,
            None if uniform => link_speed,
            None => Rate::gbps(200),
        },
    )?;
    // 25G to 50G for the data-centre NICs of the published experiments
    // (DCQCN's were at 40G); 100G and up for GPU servers.
    if ![25u64, 40, 50, 100, 200, 400, 800].contains(&(nic_speed.bps() / 1_000_000_000))
        || nic_speed.bps() % 1_000_000_000 != 0
    {
        return Err(KeyError::new(
            &path.key("nic_speed"),
            format!("got \"{nic_speed}\", expected one of the NIC speeds 25G, 40G, 50G, 100G, 200G, 400G or 800G"),
        ));
    }
    let hosts = count(t.hosts, &path.key("hosts"), 4, 1)?;
    let uplink_speed = rate(
        t.uplink_speed.as_ref(),
        &path.key("uplink_speed"),
        if uniform { link_speed } else { nic_speed },
    )?;
    let link_delay = match (&t.link_delay, &t.cable_length) {
        (_, Some(v)) => {
            let p = path.key("cable_length");
            let m = match v {
                Value::String(s) => parse_length_m(s),
                _ => None,
            }
            .filter(|m| *m >= 0.0 && *m < 1e6)
            .ok_or_else(|| {
                KeyError::new(
                    &p,
                    format!("got {}, expected a length such as \"5m\"", show(v)),
                )
            })?;
            // Light in fibre or copper: about 5 ns per metre.
            SimTime((m * 5_000.0).round() as u64)
        }
        (v, None) => time(v.as_ref(), &path.key("link_delay"), SimTime::from_ns(500))?,
    };
    let switch_radix = t
        .switch_radix
        .map(|_| count(t.switch_radix, &path.key("switch_radix"), 0, 1))
        .transpose()?;
    let spec = TopologySpec {
        kind,
        hosts,
        gpus_per_host,
        nics_per_host,
        nic_ports,
        nic_speed,
        hosts_per_leaf: count(t.hosts_per_leaf, &path.key("hosts_per_leaf"), hosts, 1)?,
        rails_per_leaf: count(t.rails_per_leaf, &path.key("rails_per_leaf"), 1, 1)?,
        spines: count(t.spines, &path.key("spines"), 2, 1)?,
        uplink_speed,
        uplinks_per_spine: count(t.uplinks_per_spine, &path.key("uplinks_per_spine"), 1, 1)?,
        pods: count(t.pods, &path.key("pods"), 2, 1)?,
        super_spines: count(t.super_spines, &path.key("super_spines"), 2, 1)?,
        spine_uplink_speed: rate(
            t.spine_uplink_speed.as_ref(),
            &path.key("spine_uplink_speed"),
            uplink_speed,
        )?,
        spine_uplinks_per_super_spine: count(
            t.spine_uplinks_per_super_spine,
            &path.key("spine_uplinks_per_super_spine"),
            1,
            1,
        )?,
        super_spine_planes: count(t.super_spine_planes, &path.key("super_spine_planes"), 1, 1)?,
        k: count(t.k, &path.key("k"), 4, 2)?,
        link_delay,
        switch_radix,
    };
    let planes = spec.super_spine_planes;
    if planes > 1
        && (!spec.spines.is_multiple_of(planes) || !spec.super_spines.is_multiple_of(planes))
    {
        return Err(KeyError::new(
            &path.key("super_spine_planes"),
            format!(
                "got {planes}, expected a number that divides both spines ({}) and super_spines ({}): spine j of each pod connects to the super-spines of plane j mod {planes}",
                spec.spines, spec.super_spines
            ),
        ));
    }
    if fat && !spec.k.is_multiple_of(2) {
        return Err(KeyError::new(
            &path.key("k"),
            format!("got {}, expected an even number", spec.k),
        ));
    }
    if fat && spec.k > 64 {
        return Err(KeyError::new(
            &path.key("k"),
            format!("got {}, expected at most 64 (65,536 hosts)", spec.k),
        ));
    }
    // Bounds that keep a typo from asking for a fabric no machine holds.
    let limits: [(&str, u32, u32); 11] = [
        ("hosts", spec.hosts, 65_536),
        ("gpus_per_host", spec.gpus_per_host, 576),
        ("hosts_per_leaf", spec.hosts_per_leaf, 65_536),
        ("rails_per_leaf", spec.rails_per_leaf, 64),
        ("spines", spec.spines, 4_096),
        ("uplinks_per_spine", spec.uplinks_per_spine, 64),
        ("pods", spec.pods, 1_024),
        ("super_spines", spec.super_spines, 4_096),
        (
            "spine_uplinks_per_super_spine",
            spec.spine_uplinks_per_super_spine,
            64,
        ),
        ("switch_radix", spec.switch_radix.unwrap_or(0), 1_000_000),
        ("k", spec.k, 64),
    ];
    for (key, value, max) in limits {
        if value > max {
            return Err(KeyError::new(
                &path.key(key),
                format!("got {value}, expected at most {max}"),
            ));
        }
    }
    let hosts = match kind {
        TopologyKind::FatTree => spec.k as u64 * spec.k as u64 * spec.k as u64 / 4,
        TopologyKind::MultiPod => spec.hosts as u64 * spec.pods as u64,
        _ => spec.hosts as u64,
    };
    let total_gpus = hosts * spec.gpus_per_host as u64;
    let leaves = spec.hosts.div_ceil(spec.hosts_per_leaf) as u64
        * spec.nics_per_host.div_ceil(spec.rails_per_leaf) as u64
        * spec.nic_ports as u64;
    let links = hosts * spec.nics_per_host as u64 * spec.nic_ports as u64
        + match kind {
            TopologyKind::RailOptimized => leaves * (spec.spines * spec.uplinks_per_spine) as u64,
            TopologyKind::MultiPod => {
                spec.pods as u64
                    * (leaves * (spec.spines * spec.uplinks_per_spine) as u64
                        + spec.spines as u64
                            * (spec.super_spines / spec.super_spine_planes
                                * spec.spine_uplinks_per_super_spine)
                                as u64)
            }
            TopologyKind::FatTree => hosts * 2,
            TopologyKind::Ring => hosts,
            _ => 0,
        };
    if total_gpus > 1 << 20 || links > 4 << 20 {
        return Err(KeyError::new(
            path,
            format!(
                "the fabric would have {total_gpus} GPUs and {links} links; at most 1,048,576 GPUs and 4,194,304 links are supported"
            ),
        ));
    }
    Ok(spec)
}

pub fn switch(raw: Option<&RawSwitch>, path: &KeyPath, topo: &Topology) -> R<SwitchConfig> {
    let empty = RawSwitch::default();
    let s = raw.unwrap_or(&empty);
    let buffer_bytes = size(s.buffer.as_ref(), &path.key("buffer"), 32 * 1024 * 1024)?;
    if buffer_bytes >= 1 << 32 {
        return Err(KeyError::new(
            &path.key("buffer"),
            format!("got {buffer_bytes} bytes, expected less than 4 GiB"),
        ));
    }
    // Below two jumbo frames no transfer could ever get through.
    if buffer_bytes < 2 * 9216 {
        return Err(KeyError::new(
            &path.key("buffer"),
            format!("got {buffer_bytes} bytes, expected at least 18432 (two 9216 B frames)"),
        ));
    }
    let empty_ecmp = RawEcmp::default();
    let ecmp = super::balance::ecmp(
        s.ecmp.as_ref().unwrap_or(&empty_ecmp),
        &path.key("ecmp"),
        topo,
    )?;
    let alpha_256 = match &s.dynamic_threshold {
        None => Some(8 * ALPHA_ONE),
        Some(Value::String(v)) if v == "off" => None,
        Some(v) => {
            let a = match v {
                Value::Integer(n) => Some(*n as f64),
                Value::Float(f) => Some(*f),
                _ => None,
            }
            .filter(|a| (1.0 / 256.0..=256.0).contains(a))
            .ok_or_else(|| {
                KeyError::new(
                    &path.key("dynamic_threshold"),
                    format!(
                        "got {}, expected an alpha between 1/256 and 256 (e.g. 1, 2, 8) or \"off\"",
                        show(v)
                    ),
                )
            })?;
            Some((a * ALPHA_ONE as f64).round() as u64)
        }
    };
    let partitions = partitions(s.partitions.as_ref(), &path.key("partitions"), buffer_bytes)?;
    Ok(SwitchConfig {
        buffer_bytes,
        alpha_256,
        partitions,
        ecmp,
        balance: super::balance::balance(s.balance.as_ref(), &path.key("balance"), topo)?,
    })
}

/// `switch.partitions`: the most lossless and lossy classes may each hold
/// of the buffer, as "N%" of it or a size; together at most all of it.
fn partitions(v: Option<&Value>, path: &KeyPath, buffer: u64) -> R<(Option<u64>, Option<u64>)> {
    let Some(v) = v else {
        return Ok((None, None));
    };
    let Value::Table(t) = v else {
        return Err(KeyError::new(
            path,
            format!(
                "got {}, expected a table such as {{ lossless = \"80%\", lossy = \"10%\" }}",
                show(v)
            ),
        ));
    };
    let mut out = [None, None];
    for (k, v) in t {
        let i = match k.as_str() {
            "lossless" => 0,
            "lossy" => 1,
            _ => {
                return Err(KeyError::new(
                    &path.key(k),
                    "is not a partition; expected lossless or lossy",
                ))
            }
        };
        let at = path.key(k);
        let bytes = match v.as_str().and_then(|s| s.trim().strip_suffix('%')) {
            Some(p) => match p.trim().parse::<f64>() {
                Ok(p) if (0.0..=100.0).contains(&p) => (buffer as f64 * p / 100.0).round() as u64,
                _ => {
                    return Err(KeyError::new(
                        &at,
                        format!(
                        "got {}, expected a percentage of switch.buffer from 0% to 100%, or a size",
                        show(v)
                    ),
                    ))
                }
            },
            None => super::values::size(Some(v), &at, 0)?,
        };
        if bytes > buffer {
            return Err(KeyError::new(
                &at,
                format!("got {bytes} B, above switch.buffer ({buffer} B)"),
            ));
        }
        out[i] = Some(bytes);
    }
    if let [Some(a), Some(b)] = out {
        if a + b > buffer {
            return Err(KeyError::new(
                path,
                format!(
                    "the partitions come to {} B, more than switch.buffer ({buffer} B)",
                    a + b
                ),
            ));
        }
    }
    Ok((out[0], out[1]))
}

pub fn transport(raw: Option<&RawTransport>, path: &KeyPath) -> R<TransportConfig> {
    let empty = RawTransport::default();
    let t = raw.unwrap_or(&empty);
    let mtu = size(t.mtu.as_ref(), &path.key("mtu"), 4096)?;
    if !(256..=9000).contains(&mtu) {
        return Err(KeyError::new(
            &path.key("mtu"),
            format!("got {mtu}, expected a payload size per packet between 256 and 9000 bytes (a 9216 B jumbo frame)"),
        ));
    }
    let write_mode = choice(
        t.write_mode.as_deref(),
        &path.key("write_mode"),
        &[
            ("first-middle-last", WriteMode::FirstMiddleLast),
            ("write-only", WriteMode::WriteOnly),
        ],
        WriteMode::FirstMiddleLast,
    )?;
    let cc = choice(
        t.congestion_control.as_deref(),
        &path.key("congestion_control"),
        &Cc::ALL,
        Cc::Dcqcn,
    )?;
    let dscp = |v: Option<i64>, key: &str, default: u8| match v {
        None => Ok(default),
        Some(d @ 0..=63) => Ok(d as u8),
        Some(d) => Err(KeyError::new(
            &path.key(key),
            format!("got {d}, expected a DSCP from 0 to 63"),
        )),
    };
    let ooo = choice(
        t.out_of_order.as_deref(),
        &path.key("out_of_order"),
        &[("nak", OooPolicy::Nak), ("reorder", OooPolicy::Reorder)],
        OooPolicy::Nak,
    )?;
    if ooo == OooPolicy::Nak && t.reorder_buffer.is_some() {
        return Err(KeyError::new(
            &path.key("reorder_buffer"),
            "is only used with out_of_order = \"reorder\"",
        ));
    }
    let reorder_buffer = size(
        t.reorder_buffer.as_ref(),
        &path.key("reorder_buffer"),
        1 << 20,
    )?;
    let multipath = choice(
        t.protocol.as_deref(),
        &path.key("protocol"),
        &[("rc", false), ("mrc", true)],
        false,
    )?;
    let mrc = match multipath {
        false => {
            for (k, given) in [
                ("mrc_paths", t.mrc_paths.is_some()),
                ("mrc_probe", t.mrc_probe.is_some()),
                ("mrc_ecn_threshold", t.mrc_ecn_threshold.is_some()),
                ("mrc_reorder", t.mrc_reorder.is_some()),
            ] {
                if given {
                    return Err(KeyError::new(
                        &path.key(k),
                        "is only used with protocol = \"mrc\"",
                    ));
                }
            }
            None
        }
        true => {
            let d = crate::nic::mrc::MrcConfig::default();
            let paths = match t.mrc_paths {
                None => d.paths,
                Some(n @ 1..=256) => n as u32,
                Some(n) => {
                    return Err(KeyError::new(
                        &path.key("mrc_paths"),
                        format!("got {n}, expected 1 to 256 paths (UDP source ports) per QP"),
                    ))
                }
            };
            let probe = time(t.mrc_probe.as_ref(), &path.key("mrc_probe"), d.probe)?;
            if probe == SimTime::ZERO {
                return Err(KeyError::new(
                    &path.key("mrc_probe"),
                    "got 0, expected how long a lossy path rests, e.g. \"50us\"",
                ));
            }
            let ecn_threshold = match &t.mrc_ecn_threshold {
                None => d.ecn_threshold,
                Some(Value::Float(f)) if (0.0..=1.0).contains(f) => *f,
                Some(Value::Integer(n @ 0..=1)) => *n as f64,
                Some(other) => {
                    return Err(KeyError::new(
                        &path.key("mrc_ecn_threshold"),
                        format!("got {}, expected a share of CE-marked packets from 0 to 1 (1: never rest a path for ECN)", show(other)),
                    ))
                }
            };
            let reorder = time(t.mrc_reorder.as_ref(), &path.key("mrc_reorder"), d.reorder)?;
            Some(crate::nic::mrc::MrcConfig {
                paths,
                probe,
                ecn_threshold,
                reorder,
            })
        }
    };
    // An RC QP times out after its local ACK timeout, 4.096 us x
    // 2^timeout (InfiniBand Architecture Specification, the QP attribute
    // that RoCEv2 NICs take over); NCCL sets timeout = 20 on every QP it
    // creates (NCCL_IB_TIMEOUT's default in current releases; 18, or
    // 1.07 s, in older ones such as 2.19), so 4.29 s. The MRC-like transport keeps a short per-packet timer: it is
    // built to resend on its own after losses on sprayed paths.
    let default_rto = if mrc.is_some() {
        SimTime::from_us(1000)
    } else {
        RC_DEFAULT_RTO
    };
    let rto = time(t.rto.as_ref(), &path.key("rto"), default_rto)?;
    if rto == SimTime::ZERO {
        return Err(KeyError::new(
            &path.key("rto"),
            "got 0, expected a positive retransmission timeout",
        ));
    }
    // A window of fewer packets than the receiver waits for before it
    // acknowledges would stall until the retransmission timeout, and
    // TIMELY's round trips would include the wait: they get an ACK per
    // packet.
    let ack_driven = cc.ack_driven();
    let ack_every = count(
        t.ack_every,
        &path.key("ack_every"),
        if ack_driven { 1 } else { 4 },
        1,
    )?;
    if ack_driven && ack_every > 1 {
        let why = if cc.windowed() {
            format!("a window can be smaller than {ack_every} packets and would wait for an ACK the receiver never sends; windows take an ACK per packet (1)")
        } else if cc == Cc::Uec {
            "its window reads each packet's mark and round trip from its own ACK; it takes an ACK per packet (1)".to_string()
        } else {
            "its round trips would include the receiver's wait for more packets; TIMELY takes an ACK per packet (1)".to_string()
        };
        return Err(KeyError::new(
            &path.key("ack_every"),
            format!(
                "got {ack_every} with congestion_control = \"{}\": {why}",
                cc.name()
            ),
        ));
    }
    if ack_driven && mrc.is_some() && !cc.needs_mrc() {
        return Err(KeyError::new(
            &path.key("congestion_control"),
            mrc_window(cc),
        ));
    }
    if cc.needs_mrc() && mrc.is_none() {
        return Err(KeyError::new(
            &path.key("congestion_control"),
            uec_without_mrc(),
        ));
    }
    Ok(TransportConfig {
        mtu: mtu as u32,
        ooo,
        reorder_buffer,
        mrc,
        write_mode,
        ack_every,
        rto,
        data_dscp: dscp(t.dscp, "dscp", 24)?,
        tenant_dscp: tenant_dscp(t.tenant_dscp.as_ref(), &path.key("tenant_dscp"))?,
        cnp_dscp: dscp(t.cnp_dscp, "cnp_dscp", 48)?,
        cc,
        tenant_cc: tenant_cc(
            t.tenant_congestion_control.as_ref(),
            &path.key("tenant_congestion_control"),
        )?,
        windows: WindowParams::default(),
        dcqcn: crate::nic::dcqcn::DcqcnParams::preset(crate::nic::dcqcn::Preset::ConnectxFirmware),
    })
}

/// The `[dctcp]`, `[swift]`, `[hpcc]` and `[timely]` tables of a
/// scenario.
pub struct WindowTables<'a> {
    pub dctcp: Option<&'a RawDctcp>,
    pub swift: Option<&'a RawSwift>,
    pub hpcc: Option<&'a RawHpcc>,
    pub timely: Option<&'a RawTimely>,
    pub uec: Option<&'a RawUec>,
}

/// The windows' settings from their tables; `used`: the congestion
/// controls some workload runs (a table for one none runs is refused: it
/// would do nothing).
pub fn windows(used: &[Cc], tables: WindowTables, root: &KeyPath) -> R<WindowParams> {
    let WindowTables {
        dctcp,
        swift,
        hpcc,
        timely,
        uec,
    } = tables;
    let unused = |key: &str| {
        KeyError::new(
            &root.key(key),
            format!("is only used with congestion_control = \"{key}\" (in [transport], tenant_congestion_control or a workload), and no workload runs it"),
        )
    };
    for (name, cc, given) in [
        ("dctcp", Cc::Dctcp, dctcp.is_some()),
        ("swift", Cc::Swift, swift.is_some()),
        ("hpcc", Cc::Hpcc, hpcc.is_some()),
        ("timely", Cc::Timely, timely.is_some()),
        ("uec", Cc::Uec, uec.is_some()),
    ] {
        if given && !used.contains(&cc) {
            return Err(unused(name));
        }
    }
    let mut out = WindowParams::default();
    let number = |v: Option<&Value>, path: KeyPath, default: f64, lo: f64, hi: f64| {
        let x = match v {
            None => return Ok(default),
            Some(Value::Float(f)) => *f,
            Some(Value::Integer(n)) => *n as f64,
            Some(other) => {
                return Err(KeyError::new(
                    &path,
                    format!("got {}, expected a number from {lo} to {hi}", show(other)),
                ))
            }
        };
        if (lo..=hi).contains(&x) {
            Ok(x)
        } else {
            Err(KeyError::new(
                &path,
                format!("got {x}, expected a number from {lo} to {hi}"),
            ))
        }
    };
    {
        let p = &mut out.dctcp;
        {
            if let Some(r) = dctcp {
                let path = root.key("dctcp");
                p.g = fraction(r.g.as_ref(), &path.key("g"), p.g, "a weight")?;
                p.initial_window = count(
                    r.initial_window,
                    &path.key("initial_window"),
                    p.initial_window,
                    1,
                )?;
            }
        }
        let p = &mut out.swift;
        {
            if let Some(r) = swift {
                let path = root.key("swift");
                p.base_target = positive_time(
                    r.base_target.as_ref(),
                    &path.key("base_target"),
                    p.base_target,
                )?;
                p.per_hop = time(r.per_hop.as_ref(), &path.key("per_hop"), p.per_hop)?;
                p.fs_range = time(r.fs_range.as_ref(), &path.key("fs_range"), p.fs_range)?;
                p.ai = number(r.ai.as_ref(), path.key("ai"), p.ai, 0.0, 100.0)?;
                p.beta = number(r.beta.as_ref(), path.key("beta"), p.beta, 0.0, 1.0)?;
                p.max_mdf = number(r.max_mdf.as_ref(), path.key("max_mdf"), p.max_mdf, 0.0, 1.0)?;
                p.initial_window = f64::from(count(
                    r.initial_window,
                    &path.key("initial_window"),
                    p.initial_window as u32,
                    1,
                )?);
            }
        }
        let p = &mut out.hpcc;
        {
            if let Some(r) = hpcc {
                let path = root.key("hpcc");
                p.eta = fraction(
                    r.eta.as_ref(),
                    &path.key("eta"),
                    p.eta,
                    "a target utilization",
                )?;
                p.max_stage = match r.max_stage {
                    None => p.max_stage,
                    Some(n @ 0..=1000) => n as u32,
                    Some(n) => {
                        return Err(KeyError::new(
                            &path.key("max_stage"),
                            format!("got {n}, expected 0 to 1000 additive steps before a multiplicative one"),
                        ))
                    }
                };
                if let Some(v) = &r.ai {
                    p.ai_bps = Some(small_rate(v, &path.key("ai"))?);
                }
                if let Some(v) = &r.min_rate {
                    p.min_bps = small_rate(v, &path.key("min_rate"))?;
                }
                if r.base_rtt.is_some() {
                    p.base_rtt = Some(positive_time(
                        r.base_rtt.as_ref(),
                        &path.key("base_rtt"),
                        SimTime::ZERO,
                    )?);
                }
            }
        }
        let p = &mut out.timely;
        if let Some(r) = timely {
            let path = root.key("timely");
            p.t_low = positive_time(r.t_low.as_ref(), &path.key("t_low"), p.t_low)?;
            p.t_high = positive_time(r.t_high.as_ref(), &path.key("t_high"), p.t_high)?;
            if p.t_high <= p.t_low {
                return Err(KeyError::new(
                    &path.key("t_high"),
                    format!(
                        "got {}, expected more than t_low ({}): between them the gradient decides",
                        p.t_high, p.t_low
                    ),
                ));
            }
            p.min_rtt = positive_time(r.min_rtt.as_ref(), &path.key("min_rtt"), p.min_rtt)?;
            p.alpha = number(r.alpha.as_ref(), path.key("alpha"), p.alpha, 0.0, 1.0)?;
            p.beta = number(r.beta.as_ref(), path.key("beta"), p.beta, 0.0, 1.0)?;
            if let Some(v) = &r.delta {
                p.delta_bps = Some(small_rate(v, &path.key("delta"))?);
            }
            if let Some(v) = &r.min_rate {
                p.min_bps = small_rate(v, &path.key("min_rate"))?;
            }
        }
        let p = &mut out.uec;
        if let Some(r) = uec {
            let path = root.key("uec");
            p.target_delay = positive_time(
                r.target_delay.as_ref(),
                &path.key("target_delay"),
                p.target_delay,
            )?;
            p.gamma = number(r.gamma.as_ref(), path.key("gamma"), p.gamma, 0.0, 1.0)?;
            p.max_window = number(
                r.max_window.as_ref(),
                path.key("max_window"),
                p.max_window,
                0.1,
                100.0,
            )?;
            p.quick_adapt = r.quick_adapt.unwrap_or(p.quick_adapt);
        }
    }
    Ok(out)
}

/// The error for UEC's window without the multipath transport.
pub fn uec_without_mrc() -> String {
    "got \"uec\" with protocol = \"rc\": the UEC-style window spreads over the paths of the multipath transport and reads its ACKs' marks and round trips; set protocol = \"mrc\"".to_string()
}

/// The error for an ACK-driven congestion control over MRC.
pub fn mrc_window(cc: Cc) -> String {
    let what = if cc.windowed() { "window" } else { "rate" };
    let cc = cc.name();
    format!("got \"{cc}\" with protocol = \"mrc\": the {cc} {what} is for RC QPs (go-back-N, cumulative ACKs); MRC paces per path")
}

/// A rate that may be below a link's (an HPCC step or floor), bits per
/// second: above 0 and at most 10T.
fn small_rate(v: &Value, path: &KeyPath) -> R<f64> {
    match v {
        Value::String(s) => match crate::units::parse_rate(s) {
            Some(r) if r.bps() > 0 && r.bps() <= 10_000_000_000_000 => Ok(r.bps() as f64),
            _ => Err(KeyError::new(
                path,
                format!("got \"{s}\", expected a rate above 0 and at most 10T, such as \"40Mbps\" or \"1G\""),
            )),
        },
        other => Err(KeyError::new(
            path,
            format!("got {}, expected a rate string such as \"40Mbps\"", show(other)),
        )),
    }
}

/// A per-tenant table (`[transport] tenant_dscp`,
/// `tenant_congestion_control`): tenant id to a value `parse` reads, in
/// tenant order.
fn per_tenant<T: Copy + Ord>(
    raw: Option<&std::collections::BTreeMap<String, Value>>,
    path: &KeyPath,
    parse: impl Fn(&Value, &KeyPath) -> R<T>,
) -> R<Vec<(u16, T)>> {
    let mut out = Vec::new();
    for (k, v) in raw.into_iter().flatten() {
        let p = path.key(k);
        let tenant = k.parse::<u16>().map_err(|_| {
            KeyError::new(
                &p,
                format!("got tenant \"{k}\", expected a tenant (job) id 0 to 65535"),
            )
        })?;
        out.push((tenant, parse(v, &p)?));
    }
    out.sort_unstable();
    Ok(out)
}

/// `[transport] tenant_dscp`: tenant id to the DSCP of its data.
fn tenant_dscp(
    raw: Option<&std::collections::BTreeMap<String, Value>>,
    path: &KeyPath,
) -> R<Vec<(u16, u8)>> {
    per_tenant(raw, path, |v, p| match v.as_integer() {
        Some(d @ 0..=63) => Ok(d as u8),
        _ => Err(KeyError::new(
            p,
            format!("got {}, expected a DSCP from 0 to 63", show(v)),
        )),
    })
}

/// `[transport] tenant_congestion_control`: tenant id to the congestion
/// control of its workloads.
fn tenant_cc(
    raw: Option<&std::collections::BTreeMap<String, Value>>,
    path: &KeyPath,
) -> R<Vec<(u16, Cc)>> {
    per_tenant(raw, path, |v, p| match v.as_str() {
        Some(name) => choice(Some(name), p, &Cc::ALL, Cc::Dcqcn),
        None => Err(KeyError::new(
            p,
            format!(
                "got {}, expected one of dcqcn, dctcp, swift, hpcc, timely, uec, none",
                show(v)
            ),
        )),
    })
}

/// The retransmission timeout of an RC QP as NCCL configures it:
/// 4.096 us x 2^20 (see `transport`).
pub const RC_DEFAULT_RTO: SimTime = SimTime(4_096_000 << 20);

fn gpu(topo: &Topology, n: i64, path: &KeyPath) -> R<GpuId> {
    let total = topo.gpus.len();
    if n < 0 || n as usize >= total {
        return Err(KeyError::new(
            path,
            format!(
                "GPU {n} does not exist; the fabric has {total} GPUs, numbered 0 to {}",
                total - 1
            ),
        ));
    }
    Ok(GpuId(n as u32))
}

fn gpu_list(topo: &Topology, list: &Option<Vec<i64>>, path: &KeyPath) -> R<Vec<GpuId>> {
    match list {
        None => Ok((0..topo.gpus.len() as u32).map(GpuId).collect()),
        Some(v) => {
            let mut out = Vec::with_capacity(v.len());
            for (i, &n) in v.iter().enumerate() {
                let g = gpu(topo, n, &path.index(i))?;
                if out.contains(&g) {
                    return Err(KeyError::new(
                        &path.index(i),
                        format!("GPU {n} is listed twice"),
                    ));
                }
                out.push(g);
            }
            Ok(out)
        }
    }
}

pub fn workloads(
    raw: &[RawWorkload],
    topo: &Topology,
    transport: &TransportConfig,
    base: &std::path::Path,
    path: &KeyPath,
) -> R<Vec<Workload>> {
    let mtu = transport.mtu;
    let (tenant_dscp, default_dscp) = (&transport.tenant_dscp, transport.data_dscp);
    let mut out = Vec::new();
    for (i, w) in raw.iter().enumerate() {
        let p = path.index(i);
        let kinds =
            "transfer, permutation, incast, all-to-all, collective, chakra, training, model, megatron, deepspeed, serving or background";
        let kind = w.kind.as_deref().ok_or_else(|| {
            KeyError::new(&p.key("kind"), format!("missing; expected one of {kinds}"))
        })?;
        // What every kind that runs collectives takes, then its own keys.
        const COLLECTIVES: &[&str] = &[
            "gpus",
            "algorithm",
            "channels",
            "chunk",
            "pxn",
            "step_latency",
            "protocol",
        ];
        let (shared, own): (&[&str], &[&str]) = match kind {
            "transfer" => (&[], &["src", "dst"]),
            "permutation" => (&[], &["gpus", "rail_aligned"]),
            "incast" => (&[], &["dst", "srcs", "senders"]),
            "all-to-all" => (&[], &["gpus"]),
            "collective" => (COLLECTIVES, &["op", "root", "across"]),
            "chakra" => (COLLECTIVES, &["trace", "groups", "comm_size", "window"]),
            "background" => (&[], &["gpus", "cdf", "load", "duration"]),
            "model" => (COLLECTIVES, &["iterations", "model", "parallel", "gpu"]),
            "megatron" => (COLLECTIVES, &["iterations", "args", "script", "gpu"]),
            "deepspeed" => (
                COLLECTIVES,
                &["iterations", "config", "model", "parallel", "gpu"],
            ),
            "training" => (COLLECTIVES, &["iterations", "phase", "checkpoint"]),
            "serving" => (&[], &["gpus", "model", "gpu", "serving"]),
            other => {
                return Err(KeyError::new(
                    &p.key("kind"),
                    format!("got \"{other}\", expected one of {kinds}"),
                ));
            }
        };
        let allowed: Vec<&str> = shared.iter().chain(own).copied().collect();
        let given = [
            ("src", w.src.is_some()),
            ("dst", w.dst.is_some()),
            ("srcs", w.srcs.is_some()),
            ("senders", w.senders.is_some()),
            ("gpus", w.gpus.is_some()),
            ("rail_aligned", w.rail_aligned.is_some()),
            ("op", w.op.is_some()),
            ("algorithm", w.algorithm.is_some()),
            ("channels", w.channels.is_some()),
            ("chunk", w.chunk.is_some()),
            ("pxn", w.pxn.is_some()),
            ("step_latency", w.step_latency.is_some()),
            ("protocol", w.protocol.is_some()),
            ("root", w.root.is_some()),
            ("across", w.across.is_some()),
            ("trace", w.trace.is_some()),
            ("groups", w.groups.is_some()),
            ("comm_size", w.comm_size.is_some()),
            ("iterations", w.iterations.is_some()),
            ("phase", w.phase.is_some()),
            ("checkpoint", w.checkpoint.is_some()),
            ("cdf", w.cdf.is_some()),
            ("load", w.load.is_some()),
            ("duration", w.duration.is_some()),
            ("model", w.model.is_some()),
            ("parallel", w.parallel.is_some()),
            ("gpu", w.gpu.is_some()),
            ("args", w.args.is_some()),
            ("script", w.script.is_some()),
            ("config", w.config.is_some()),
            ("serving", w.serving.is_some()),
        ];
        for (key, present) in given {
            if present && !allowed.contains(&key) {
                return Err(KeyError::new(
                    &p.key(key),
                    format!(
                        "is not used by kind = \"{kind}\" (it takes {})",
                        allowed.join(", ")
                    ),
                ));
            }
        }
        let need = |v: Option<i64>, key: &str| {
            v.ok_or_else(|| KeyError::new(&p.key(key), format!("missing; a {kind} needs it")))
        };
        let pattern = match kind {
            "transfer" => Pattern::Transfer {
                src: gpu(topo, need(w.src, "src")?, &p.key("src"))?,
                dst: gpu(topo, need(w.dst, "dst")?, &p.key("dst"))?,
            },
            "permutation" => Pattern::Permutation {
                gpus: gpu_list(topo, &w.gpus, &p.key("gpus"))?,
                rail_aligned: w.rail_aligned.unwrap_or(!cross_rail(topo)),
            },
            "incast" => {
                let dst = gpu(topo, need(w.dst, "dst")?, &p.key("dst"))?;
                let srcs = match (&w.srcs, w.senders) {
                    (Some(_), Some(_)) => {
                        return Err(KeyError::new(
                            &p.key("senders"),
                            "give either srcs or senders, not both",
                        ))
                    }
                    (Some(_), None) => gpu_list(topo, &w.srcs, &p.key("srcs"))?,
                    (None, n) => {
                        let n = count(n, &p.key("senders"), 0, 1)?;
                        if n == 0 {
                            return Err(KeyError::new(
                                &p.key("senders"),
                                "missing; an incast needs srcs or senders",
                            ));
                        }
                        incast_senders(topo, dst, n)
                            .map_err(|m| KeyError::new(&p.key("senders"), m))?
                    }
                };
                Pattern::Incast { dst, srcs }
            }
            "collective" => Pattern::Collective(collective(w, topo, &p)?),
            "chakra" => {
                let (trace, settings) = chakra(w, topo, base, &p)?;
                Pattern::Chakra(Box::new((std::sync::Arc::new(trace), settings)))
            }
            "training" => Pattern::Training(Box::new(training(w, topo, &p)?)),
            "model" | "megatron" | "deepspeed" => {
                // The GPUs and collective settings, checked as for a
                // collective.
                let probe = RawWorkload {
                    kind: Some("collective".into()),
                    op: Some("all-reduce".into()),
                    algorithm: w.algorithm.clone(),
                    chunk: w.chunk.clone(),
                    pxn: w.pxn,
                    protocol: w.protocol.clone(),
                    gpus: w.gpus.clone(),
                    ..Default::default()
                };
                let c = collective(&probe, topo, &p)?;
                let mut job = if kind == "megatron" {
                    megatron(w, topo, base, c.gpus, c.algorithm, c.chunk, &p)?
                } else if kind == "deepspeed" {
                    deepspeed(w, topo, base, c.gpus, c.algorithm, c.chunk, &p)?
                } else {
                    super::model::model(w, None, topo, c.gpus, c.algorithm, c.chunk, &p)?
                };
                job.protocol = c.protocol;
                job.auto = c.auto;
                Pattern::Model(Box::new(job))
            }
            "background" => background(w, topo, base, &p)?,
            "serving" => {
                let gpus = match &w.gpus {
                    Some(_) => gpu_list(topo, &w.gpus, &p.key("gpus"))?,
                    None => (0..topo.gpus.len() as u32).map(GpuId).collect(),
                };
                let config = super::serving::serving(w, gpus, base, &p)?;
                Pattern::Serving(Box::new(config))
            }
            _ => Pattern::AllToAll {
                gpus: gpu_list(topo, &w.gpus, &p.key("gpus"))?,
            },
        };
        // Kinds whose sizes come from elsewhere take no bytes.
        const SIZED: [&str; 7] = [
            "chakra",
            "training",
            "model",
            "megatron",
            "deepspeed",
            "background",
            "serving",
        ];
        let bytes = match &w.bytes {
            None if SIZED.contains(&kind) => 0,
            Some(_) if SIZED.contains(&kind) => {
                let from = match kind {
                    "chakra" => "the trace",
                    "training" => "the phases",
                    "model" | "megatron" | "deepspeed" | "serving" => "the model",
                    _ => "the cdf file",
                };
                return Err(KeyError::new(
                    &p.key("bytes"),
                    format!("is not used by kind = \"{kind}\" (sizes come from {from})"),
                ));
            }
            _ => required_size(
                &w.bytes,
                &p.key("bytes"),
                "the size each transfer writes, e.g. \"2MB\"",
            )?,
        };
        let qps = count(w.qps, &p.key("qps"), 1, 1)?;
        if qps > 1024 {
            return Err(KeyError::new(
                &p.key("qps"),
                format!("got {qps}, expected at most 1024 QPs per transfer"),
            ));
        }
        // PSNs of one QP's message must fit in 31 bits.
        if bytes / (qps as u64 * mtu as u64) >= 1 << 31 {
            return Err(KeyError::new(
                &p.key("bytes"),
                format!("got {bytes}, which is more than 2^31 packets of {mtu} B per QP; use more qps or a larger mtu"),
            ));
        }
        let pattern = match pattern {
            Pattern::Collective(mut c) => {
                if w.rate.is_some() {
                    return Err(KeyError::new(
                        &p.key("rate"),
                        "is not used by kind = \"collective\" (its messages go as fast as the fabric lets them)",
                    ));
                }
                c.bytes = bytes;
                Pattern::Collective(c)
            }
            other => other,
        };
        out.push(Workload {
            pattern,
            bytes,
            step_latency: step_latency(w.step_latency.as_ref(), &p.key("step_latency"))?,
            start: time(w.start.as_ref(), &p.key("start"), SimTime::ZERO)?,
            qps,
            rate: w
                .rate
                .as_ref()
                .map(|v| rate(Some(v), &p.key("rate"), Rate::gbps(1)))
                .transpose()?,
            tenant: match w.tenant {
                None => 0,
                Some(t @ 0..=65535) => t as u16,
                Some(t) => {
                    return Err(KeyError::new(
                        &p.key("tenant"),
                        format!("got {t}, expected a tenant (job) id 0 to 65535"),
                    ))
                }
            },
            dscp: match w.dscp {
                None => tenant_dscp
                    .iter()
                    .find(|&&(t, _)| Some(i64::from(t)) == w.tenant)
                    .map_or(default_dscp, |&(_, d)| d),
                Some(d @ 0..=63) => d as u8,
                Some(d) => {
                    return Err(KeyError::new(
                        &p.key("dscp"),
                        format!("got {d}, expected a DSCP from 0 to 63"),
                    ))
                }
            },
            cc: match w.congestion_control.as_deref() {
                None => transport
                    .tenant_cc
                    .iter()
                    .find(|&&(t, _)| Some(i64::from(t)) == w.tenant)
                    .map_or(transport.cc, |&(_, c)| c),
                Some(name) => choice(
                    Some(name),
                    &p.key("congestion_control"),
                    &Cc::ALL,
                    Cc::Dcqcn,
                )?,
            },
            path: p,
        });
    }
    Ok(out)
}

/// Whether GPUs on different rails can reach each other over the network.
pub fn cross_rail(topo: &Topology) -> bool {
    matches!(
        topo.kind,
        TopologyKind::RailOptimized
            | TopologyKind::MultiPod
            | TopologyKind::FatTree
            | TopologyKind::Ring
    )
}

/// The first `n` GPUs, in GPU order, that can send to `dst` over the
/// network (other hosts; same rail where rails are separate).
fn incast_senders(topo: &Topology, dst: GpuId, n: u32) -> Result<Vec<GpuId>, String> {
    let d = topo.gpus[dst.idx()];
    let dst_rail = topo.nics[d.nic.idx()].rail;
    let same_rail_only = !cross_rail(topo);
    let v: Vec<GpuId> = (0..topo.gpus.len() as u32)
        .map(GpuId)
        .filter(|g| {
            let x = topo.gpus[g.idx()];
            x.host != d.host && (!same_rail_only || topo.nics[x.nic.idx()].rail == dst_rail)
        })
        .take(n as usize)
        .collect();
    if (v.len() as u32) < n {
        return Err(format!(
            "got {n}, but only {} GPUs can send to {} over the network",
            v.len(),
            topo.gpu_name(dst)
        ));
    }
    Ok(v)
}

/// A `kind = "collective"` workload entry.
fn collective(w: &RawWorkload, topo: &Topology, p: &KeyPath) -> R<Collective> {
    if w.op.is_none() {
        return Err(KeyError::new(
            &p.key("op"),
            format!("missing; expected one of {}", Op::NAMES),
        ));
    }
    let (op, algorithm) = op_and_algorithm(w.op.as_deref(), w.algorithm.as_deref(), p)?;
    let gpus = gpu_list(topo, &w.gpus, &p.key("gpus"))?;
    if gpus.len() < 2 {
        return Err(KeyError::new(
            &p.key("gpus"),
            format!(
                "got {} GPU(s), expected a communicator of at least 2",
                gpus.len()
            ),
        ));
    }
    let default = crate::workload::collective::default_channels(topo, &gpus);
    let channels = count(w.channels, &p.key("channels"), default, 1)?;
    if channels > 64 {
        return Err(KeyError::new(
            &p.key("channels"),
            format!("got {channels}, expected at most 64 (NCCL's maximum)"),
        ));
    }
    let protocol = match w.protocol.as_deref() {
        None => Protocol::Simple,
        Some(s) => Protocol::parse(s).ok_or_else(|| {
            KeyError::new(
                &p.key("protocol"),
                format!("got \"{s}\", expected {}", Protocol::NAMES),
            )
        })?,
    };
    let chunk = size(w.chunk.as_ref(), &p.key("chunk"), protocol.chunk())?;
    let root = match w.root {
        None => 0,
        Some(r) if r >= 0 && (r as usize) < gpus.len() && op == Op::Broadcast => r as usize,
        Some(r) if op == Op::Broadcast => {
            return Err(KeyError::new(
                &p.key("root"),
                format!("got {r}, expected a rank 0 to {}", gpus.len() - 1),
            ))
        }
        Some(_) => {
            return Err(KeyError::new(
                &p.key("root"),
                format!("is only used by op = \"broadcast\", not \"{}\"", op.name()),
            ))
        }
    };
    let across = match (w.across.as_deref(), algorithm) {
        (None, _) => Algorithm::Ring,
        (Some("ring"), Algorithm::Hierarchical) => Algorithm::Ring,
        (Some("tree"), Algorithm::Hierarchical) => Algorithm::Tree,
        (Some(other), Algorithm::Hierarchical) => {
            return Err(KeyError::new(
                &p.key("across"),
                format!("got \"{other}\", expected \"ring\" or \"tree\""),
            ))
        }
        (Some(_), other) => {
            return Err(KeyError::new(
                &p.key("across"),
                format!(
                    "is only used by algorithm = \"hierarchical\", not \"{}\"",
                    other.name()
                ),
            ))
        }
    };
    Ok(Collective {
        op,
        algorithm,
        gpus,
        bytes: 0,
        channels,
        chunk,
        pxn: w.pxn.unwrap_or(true),
        root,
        across,
        protocol,
        auto: Auto {
            protocol: w.protocol.is_none(),
            channels: w.channels.is_none(),
            chunk: w.chunk.is_none(),
        },
    })
}

/// `[host]`'s preset, which the topology's defaults follow.
pub fn host_preset(h: Option<&RawHost>, path: &KeyPath) -> R<Option<HostPreset>> {
    let Some(name) = h.and_then(|h| h.preset.as_deref()) else {
        return Ok(None);
    };
    HostPreset::from_name(name).map(Some).ok_or_else(|| {
        KeyError::new(
            &path.key("preset"),
            format!(
                "got \"{name}\", expected one of {}",
                HostPreset::NAMES.join(", ")
            ),
        )
    })
}

/// `[host]`: each host's scale-up domain (NVLink or Infinity Fabric),
/// from its preset and the keys given over it.
pub fn host(
    h: Option<&RawHost>,
    path: &KeyPath,
    topo: &Topology,
) -> R<crate::scenario::HostConfig> {
    let preset = host_preset(h, path)?;
    let mut d = crate::scenario::HostConfig::default();
    if let Some(f) = preset.map(HostPreset::figures) {
        d = crate::scenario::HostConfig {
            preset,
            scale_up: f.scale_up,
            gpus_per_tray: f.gpus_per_tray,
            nvlink_bytes_per_s: f.nvlink_bytes_per_s,
            nvlink_efficiency: f.nvlink_efficiency,
            pcie_bytes_per_s: f.pcie_bytes_per_s,
            arch: f.arch,
            nvls: f.nvls,
            ..d
        };
    }
    let Some(h) = h else {
        return Ok(d);
    };
    let gpus = topo.hosts.first().map_or(1, |x| x.gpus.len() as u32);
    let switches_key = path.key("nvlink_switches");
    let scale_up = match h.scale_up.as_deref().unwrap_or(match d.scale_up {
        ScaleUp::Switched { .. } => "switched",
        ScaleUp::Mesh => "mesh",
    }) {
        "switched" => {
            let default = match d.scale_up {
                ScaleUp::Switched { switches } => switches,
                ScaleUp::Mesh => 4,
            };
            ScaleUp::Switched {
                switches: count(h.nvlink_switches, &switches_key, default, 1)?,
            }
        }
        "mesh" if h.nvlink_switches.is_some() => {
            return Err(KeyError::new(
                &switches_key,
                "is not used where the GPUs are a mesh (scale_up = \"mesh\": linked pair by pair, no switch chips)",
            ))
        }
        "mesh" => ScaleUp::Mesh,
        other => {
            return Err(KeyError::new(
                &path.key("scale_up"),
                format!("got \"{other}\", expected switched or mesh"),
            ))
        }
    };
    if scale_up == ScaleUp::Mesh && gpus < 2 {
        return Err(KeyError::new(
            &path.key("scale_up"),
            format!("got \"mesh\" with {gpus} GPU per host, expected at least 2 GPUs to link"),
        ));
    }
    let gpus_per_tray = count(
        h.gpus_per_tray,
        &path.key("gpus_per_tray"),
        d.gpus_per_tray.min(gpus),
        1,
    )?;
    if h.gpus_per_tray.is_some() && !gpus.is_multiple_of(gpus_per_tray) {
        return Err(KeyError::new(
            &path.key("gpus_per_tray"),
            format!("got {gpus_per_tray}, expected a divisor of the {gpus} GPUs per host"),
        ));
    }
    let nvls = match (h.nvls, scale_up) {
        (Some(true), ScaleUp::Mesh) => {
            return Err(KeyError::new(
                &path.key("nvls"),
                "got true where the GPUs are a mesh (scale_up = \"mesh\"), expected false: NVLS is a reduction in NVLink switch chips",
            ))
        }
        (Some(v), _) => v,
        (None, ScaleUp::Mesh) => false,
        (None, _) => d.nvls,
    };
    d.scale_up = scale_up;
    d.gpus_per_tray = gpus_per_tray;
    let bandwidth = |v: &Option<Value>, key: &str, default: u64, example: &str| {
        match v {
        None => Ok(default),
        Some(Value::String(s)) => match parse_byte_rate(s) {
            Some(b) if (1_000_000_000..=100_000_000_000_000).contains(&b) => Ok(b),
            _ => Err(KeyError::new(
                &path.key(key),
                format!("got \"{s}\", expected a bandwidth in bytes per second between 1GB/s and 100TB/s, such as \"{example}\""),
            )),
        },
        Some(other) => Err(KeyError::new(
            &path.key(key),
            format!("got {}, expected a string such as \"{example}\"", show(other)),
        )),
    }
    };
    let nvlink = bandwidth(&h.nvlink, "nvlink", d.nvlink_bytes_per_s, "900GB/s")?;
    let pcie = bandwidth(&h.pcie, "pcie", d.pcie_bytes_per_s, "64GB/s")?;
    Ok(crate::scenario::HostConfig {
        preset: d.preset,
        scale_up: d.scale_up,
        gpus_per_tray: d.gpus_per_tray,
        nvlink_bytes_per_s: nvlink,
        nvlink_efficiency: fraction(
            h.nvlink_efficiency.as_ref(),
            &path.key("nvlink_efficiency"),
            d.nvlink_efficiency,
            "a share of the line rate",
        )?,
        nvlink_latency: time(
            h.nvlink_latency.as_ref(),
            &path.key("nvlink_latency"),
            d.nvlink_latency,
        )?,
        pcie_bytes_per_s: pcie,
        arch: d.arch,
        nvls,
    })
}

/// A `kind = "chakra"` workload entry: reads the trace.
fn chakra(
    w: &RawWorkload,
    topo: &Topology,
    base: &std::path::Path,
    p: &KeyPath,
) -> R<(
    crate::workload::chakra::Trace,
    crate::workload::chakra::Settings,
)> {
    let Some(dir) = &w.trace else {
        return Err(KeyError::new(
            &p.key("trace"),
            "missing; expected the folder of a Chakra trace (one PREFIX.RANK.et file per rank)",
        ));
    };
    let window = match w.window {
        None => crate::workload::chakra::WINDOW,
        Some(n) if (1..=1 << 30).contains(&n) => n as usize,
        Some(n) => {
            return Err(KeyError::new(
                &p.key("window"),
                format!("got {n}, expected a number of nodes from 1 to 1073741824 (how far ahead in each rank's file the trace's order looks)"),
            ))
        }
    };
    let trace = crate::workload::chakra::read_dir(&base.join(dir), window)
        .map_err(|m| KeyError::new(&p.key("trace"), m))?;
    let ranks = trace.rank_count();
    let gpus = match &w.gpus {
        None if ranks <= topo.gpus.len() => (0..ranks as u32).map(GpuId).collect(),
        None => {
            return Err(KeyError::new(
                &p.key("trace"),
                format!(
                    "the trace has {ranks} ranks but the fabric only {} GPUs",
                    topo.gpus.len()
                ),
            ))
        }
        Some(_) => {
            let g = gpu_list(topo, &w.gpus, &p.key("gpus"))?;
            if g.len() != ranks {
                return Err(KeyError::new(
                    &p.key("gpus"),
                    format!(
                        "got {} GPUs, expected one per rank of the trace ({ranks})",
                        g.len()
                    ),
                ));
            }
            g
        }
    };
    let groups = match &w.groups {
        Some(f) => groups_file(&base.join(f), &p.key("groups"))?,
        None => Vec::new(),
    };
    let sizes = match w.comm_size.as_deref() {
        None | Some("astra-sim") => CommSizes::AstraSim,
        Some("buffer") => CommSizes::Buffer,
        Some("shard") => CommSizes::Shard,
        Some(other) => {
            return Err(KeyError::new(
                &p.key("comm_size"),
                format!("got \"{other}\", expected \"astra-sim\" (as ASTRA-sim reads it: an all-gather's comm_size is one rank's share, a reduce-scatter's its whole input), \"buffer\" (both the whole buffer, as nccl-tests counts it) or \"shard\" (both one rank's share)"),
            ))
        }
    };
    // The collective settings, checked as for kind = "collective".
    let probe = RawWorkload {
        kind: Some("collective".into()),
        op: Some("all-reduce".into()),
        algorithm: w.algorithm.clone(),
        channels: w.channels,
        chunk: w.chunk.clone(),
        pxn: w.pxn,
        protocol: w.protocol.clone(),
        gpus: Some(gpus.iter().map(|g| g.0 as i64).collect()),
        ..Default::default()
    };
    let c = if ranks >= 2 {
        Some(collective(&probe, topo, p)?)
    } else {
        None
    };
    Ok((
        trace,
        crate::workload::chakra::Settings {
            gpus,
            algorithm: c
                .as_ref()
                .map(|c| c.algorithm)
                .filter(|_| w.algorithm.is_some()),
            channels: c.as_ref().map_or(1, |c| c.channels),
            chunk: c.as_ref().map_or(512 * 1024, |c| c.chunk),
            pxn: w.pxn.unwrap_or(true),
            protocol: c.as_ref().map_or(Protocol::Simple, |c| c.protocol),
            auto: c.as_ref().map_or(Auto::default(), |c| c.auto),
            groups,
            sizes,
            window,
        },
    ))
}

/// A Chakra workload's groups file: a JSON object of process group name
/// to its list of ranks (ASTRA-sim's communicator group file).
fn groups_file(path: &std::path::Path, key: &KeyPath) -> R<Vec<(String, Vec<i64>)>> {
    let text = crate::input::read_text(path, crate::input::MAX_CDF_BYTES, "groups file")
        .map_err(|m| KeyError::new(key, m))?;
    let bad = |m: String| {
        KeyError::new(
            key,
            format!(
                "{}: {m}; expected a JSON object of process group name to a list of ranks, like {{\"1\": [0, 1], \"2\": [2, 3]}}",
                path.display()
            ),
        )
    };
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    map.into_iter()
        .map(|(name, v)| {
            let ranks = v
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .map(serde_json::Value::as_i64)
                        .collect::<Option<Vec<i64>>>()
                })
                .ok_or_else(|| bad(format!("group \"{name}\" is {v}, not a list of ranks")))?;
            Ok((name, ranks))
        })
        .collect()
}

/// A `kind = "training"` workload entry.
fn training(
    w: &RawWorkload,
    topo: &Topology,
    p: &KeyPath,
) -> R<crate::workload::training::Training> {
    use crate::workload::training::{Checkpoint, Phase, Training};
    // The communicator and default algorithm settings, checked as for a
    // collective.
    let probe = RawWorkload {
        kind: Some("collective".into()),
        op: Some("all-reduce".into()),
        algorithm: w.algorithm.clone(),
        channels: w.channels,
        chunk: w.chunk.clone(),
        pxn: w.pxn,
        protocol: w.protocol.clone(),
        gpus: w.gpus.clone(),
        ..Default::default()
    };
    let base = collective(&probe, topo, p)?;
    let iterations = count(w.iterations, &p.key("iterations"), 1, 1)?;
    if iterations > 100_000 {
        return Err(KeyError::new(
            &p.key("iterations"),
            format!("got {iterations}, expected at most 100000"),
        ));
    }
    let raw_phases = match &w.phase {
        Some(v) if !v.is_empty() => v,
        _ => {
            return Err(KeyError::new(
                &p.key("phase"),
                "missing; a training job needs at least one [[workload.phase]] (compute, then collectives)",
            ))
        }
    };
    let mut phases = Vec::new();
    for (i, rp) in raw_phases.iter().enumerate() {
        let pp = p.key("phase").index(i);
        let (op, algorithm) = op_and_algorithm(
            rp.op.as_deref(),
            rp.algorithm.as_deref().or(w.algorithm.as_deref()),
            &pp,
        )?;
        let buckets = match &rp.bytes {
            None => Vec::new(),
            Some(Value::Array(v)) => v
                .iter()
                .enumerate()
                .map(|(k, b)| size(Some(b), &pp.key("bytes").index(k), 0))
                .collect::<R<Vec<u64>>>()?,
            Some(v) => vec![size(Some(v), &pp.key("bytes"), 0)?],
        };
        if buckets.iter().any(|&b| b > 1 << 40) || buckets.len() > 10_000 {
            return Err(KeyError::new(
                &pp.key("bytes"),
                "expected at most 10000 buckets of at most 1 TiB each",
            ));
        }
        let compute = time(rp.compute.as_ref(), &pp.key("compute"), SimTime::ZERO)?;
        if buckets.is_empty() && compute == SimTime::ZERO {
            return Err(KeyError::new(
                &pp,
                "expected compute time, bytes for collectives, or both",
            ));
        }
        phases.push(Phase {
            compute,
            op,
            algorithm,
            buckets,
        });
    }
    let checkpoint = match &w.checkpoint {
        None => None,
        Some(c) => {
            let cp = p.key("checkpoint");
            let storage =
                match &c.storage {
                    None => return Err(KeyError::new(
                        &cp.key("storage"),
                        "missing; expected the GPUs (of storage hosts) checkpoints are written to",
                    )),
                    Some(v) if v.is_empty() => {
                        return Err(KeyError::new(
                            &cp.key("storage"),
                            "expected at least one GPU",
                        ))
                    }
                    Some(_) => gpu_list(topo, &c.storage, &cp.key("storage"))?,
                };
            for (i, s) in storage.iter().enumerate() {
                let host = topo.gpus[s.idx()].host;
                if let Some(g) = base.gpus.iter().find(|g| topo.gpus[g.idx()].host == host) {
                    return Err(KeyError::new(
                        &cp.key("storage").index(i),
                        format!(
                            "{} shares a host with {}, which trains; storage must be on other hosts",
                            topo.gpu_name(*s),
                            topo.gpu_name(*g)
                        ),
                    ));
                }
            }
            let bytes = required_size(
                &c.bytes,
                &cp.key("bytes"),
                "the bytes each GPU writes, e.g. \"1GB\"",
            )?;
            Some(Checkpoint {
                every: count(c.every, &cp.key("every"), 1, 1)?,
                bytes,
                storage,
            })
        }
    };
    Ok(Training {
        gpus: base.gpus,
        iterations,
        phases,
        checkpoint,
        channels: base.channels,
        chunk: base.chunk,
        pxn: base.pxn,
        protocol: base.protocol,
        auto: base.auto,
    })
}

/// A `kind = "background"` workload entry: reads the CDF file.
fn background(w: &RawWorkload, topo: &Topology, base: &std::path::Path, p: &KeyPath) -> R<Pattern> {
    let Some(file) = &w.cdf else {
        return Err(KeyError::new(
            &p.key("cdf"),
            "missing; expected a flow-size CDF file (lines of `SIZE_BYTES CUMULATIVE_PROBABILITY`)",
        ));
    };
    let path = base.join(file);
    let text = crate::input::read_text(&path, crate::input::MAX_CDF_BYTES, "CDF file")
        .map_err(|e| KeyError::new(&p.key("cdf"), e))?;
    let cdf = crate::workload::background::Cdf::parse(&text)
        .map_err(|m| KeyError::new(&p.key("cdf"), format!("{}: {m}", path.display())))?;
    let load = match w.load {
        None => {
            return Err(KeyError::new(
                &p.key("load"),
                "missing; expected the share of each sender's line rate to offer, e.g. 0.3",
            ))
        }
        Some(l) if l > 0.0 && l <= 1.0 => l,
        Some(l) => {
            return Err(KeyError::new(
                &p.key("load"),
                format!("got {l}, expected a share of the line rate above 0 and at most 1"),
            ))
        }
    };
    let duration = match &w.duration {
        None => {
            return Err(KeyError::new(
                &p.key("duration"),
                "missing; expected how long flows keep arriving, e.g. \"1ms\"",
            ))
        }
        Some(v) => time(Some(v), &p.key("duration"), SimTime::ZERO)?,
    };
    let gpus = gpu_list(topo, &w.gpus, &p.key("gpus"))?;
    if gpus.len() < 2 {
        return Err(KeyError::new(&p.key("gpus"), "expected at least 2 GPUs"));
    }
    Ok(Pattern::Background {
        gpus,
        cdf,
        load,
        duration,
    })
}

/// A collective's `op` (default all-reduce) and `algorithm` (default the
/// op's usual one), checked against each other; errors at `p.op` and
/// `p.algorithm`.
fn op_and_algorithm(op: Option<&str>, algo: Option<&str>, p: &KeyPath) -> R<(Op, Algorithm)> {
    let op = match op {
        None => Op::AllReduce,
        Some(s) => Op::parse(s).ok_or_else(|| {
            KeyError::new(
                &p.key("op"),
                format!("got \"{s}\", expected one of {}", Op::NAMES),
            )
        })?,
    };
    let algos = Algorithm::for_op(op);
    let algorithm = match algo {
        None => algos[0],
        Some(s) => Algorithm::parse(s)
            .filter(|a| algos.contains(a))
            .ok_or_else(|| {
                let names: Vec<&str> = algos.iter().map(|a| a.name()).collect();
                KeyError::new(
                    &p.key("algorithm"),
                    format!(
                        "got \"{s}\", expected for {}: {}",
                        op.name(),
                        names.join(", ")
                    ),
                )
            })?,
    };
    Ok((op, algorithm))
}

/// A size that must be given (`what` says what it is), at most 1 TiB.
fn required_size(v: &Option<Value>, path: &KeyPath, what: &str) -> R<u64> {
    let Some(v) = v else {
        return Err(KeyError::new(path, format!("missing; expected {what}")));
    };
    let bytes = size(Some(v), path, 0)?;
    if bytes > 1 << 40 {
        return Err(KeyError::new(
            path,
            format!("got {bytes}, expected at most 1 TiB"),
        ));
    }
    Ok(bytes)
}

/// `step_latency`: NCCL's latency model ("nccl", the default), none, or
/// one duration for every hop of a collective's steps.
fn step_latency(v: Option<&Value>, path: &KeyPath) -> Result<StepLatency, KeyError> {
    match v {
        None => Ok(StepLatency::Nccl),
        Some(Value::String(s)) if s == "nccl" => Ok(StepLatency::Nccl),
        Some(Value::String(s)) if s == "none" => Ok(StepLatency::Fixed(SimTime::ZERO)),
        Some(Value::String(s)) if crate::units::parse_time(s).is_none() => Err(KeyError::new(
            path,
            format!("got \"{s}\", expected \"nccl\" (NCCL's latency model), \"none\" or a duration per step such as \"2us\""),
        )),
        other => Ok(StepLatency::Fixed(time(other, path, SimTime::ZERO)?)),
    }
}

/// `kind = "megatron"`: the job's flags (its script's, then `args`),
/// mapped onto the model's keys; an error in a value names the flag it
/// came from.
fn megatron(
    w: &RawWorkload,
    topo: &Topology,
    base: &std::path::Path,
    gpus: Vec<GpuId>,
    algorithm: Algorithm,
    chunk: u64,
    p: &KeyPath,
) -> R<crate::workload::model::ModelJob> {
    use super::megatron::{import, script_args, Flags};
    let mut words = Vec::new();
    let mut at = p.key("args");
    if let Some(file) = &w.script {
        at = p.key("script");
        let path = base.join(file);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| KeyError::new(&at, format!("cannot read {}: {e}", path.display())))?;
        words = script_args(&text)
            .map_err(|m| KeyError::new(&at, format!("{}: {m}", path.display())))?;
    }
    if let Some(args) = &w.args {
        at = p.key("args");
        let more = shell_words::split(args)
            .map_err(|e| KeyError::new(&at, format!("{e}; expected Megatron-LM's arguments")))?;
        words.extend(more);
    }
    if w.args.is_none() && w.script.is_none() {
        return Err(KeyError::new(
            &at,
            "missing; kind = \"megatron\" needs args (Megatron-LM's arguments) or script (a launch script)",
        ));
    }
    let flags = Flags::parse(&words);
    let job = import(&flags, Some(gpus.len() as u64)).map_err(|m| KeyError::new(&at, m))?;
    let (model, parallel) = job.raw().map_err(|m| KeyError::new(&at, m))?;
    let tables = (&model, &parallel);
    imported(w, &job, tables, topo, (gpus, algorithm, chunk), p, &at)
}

/// The model job of keys read from a job's own settings (`job`): an
/// error in a key names the setting behind it (said at `at`), and what
/// is not modelled becomes warnings.
fn imported(
    w: &RawWorkload,
    job: &super::megatron::Import,
    tables: (&RawModel, &RawParallel),
    topo: &Topology,
    (gpus, algorithm, chunk): (Vec<GpuId>, Algorithm, u64),
    p: &KeyPath,
    at: &KeyPath,
) -> R<crate::workload::model::ModelJob> {
    let mut out = super::model::model(w, Some(tables), topo, gpus, algorithm, chunk, p)
        .map_err(|e| job.flag_error(e, p, at))?;
    out.not_modelled = job
        .not_modelled
        .iter()
        .map(|(flag, why)| format!("{flag}: not modelled ({why})"))
        .collect();
    Ok(out)
}

/// `kind = "deepspeed"`: the model's shape and parallelism from its
/// tables, its batch, precision and ZeRO from the DeepSpeed
/// configuration; a key both give is refused, naming both.
fn deepspeed(
    w: &RawWorkload,
    topo: &Topology,
    base: &std::path::Path,
    gpus: Vec<GpuId>,
    algorithm: Algorithm,
    chunk: u64,
    p: &KeyPath,
) -> R<crate::workload::model::ModelJob> {
    let at = p.key("config");
    let Some(file) = &w.config else {
        return Err(KeyError::new(
            &at,
            "missing; kind = \"deepspeed\" needs config (a DeepSpeed JSON file) and [workload.model]",
        ));
    };
    let path = base.join(file);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| KeyError::new(&at, format!("cannot read {}: {e}", path.display())))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| KeyError::new(&at, format!("{}: not JSON: {e}", path.display())))?;
    // Data parallelism as the tables split the GPUs.
    let r = w.parallel.as_ref();
    let tp = r.and_then(|r| r.tp).unwrap_or(1).max(1) as u64;
    let pp = r.and_then(|r| r.pp).unwrap_or(1).max(1) as u64;
    let dp = (gpus.len() as u64 / (tp * pp)).max(1);
    let job = super::deepspeed::import(&json, dp)
        .map_err(|m| KeyError::new(&at, format!("{}: {m}", path.display())))?;
    let mut model = w.model.as_ref().map(raw_table).unwrap_or_default();
    let mut parallel = w.parallel.as_ref().map(raw_table).unwrap_or_default();
    for k in &job.keys {
        let (table, name) = k.key.split_once('.').unwrap_or(("model", k.key));
        let (t, tp) = if table == "model" {
            (&mut model, p.key("model"))
        } else {
            (&mut parallel, p.key("parallel"))
        };
        if t.contains_key(name) {
            return Err(KeyError::new(
                &tp.key(name),
                format!(
                    "is set by the DeepSpeed configuration ({}); leave it out here",
                    k.from
                ),
            ));
        }
        t.insert(name.to_string(), k.value.clone());
    }
    let model: RawModel = toml::Value::Table(model)
        .try_into()
        .map_err(|e| KeyError::new(&p.key("model"), e.to_string()))?;
    let parallel: RawParallel = toml::Value::Table(parallel)
        .try_into()
        .map_err(|e| KeyError::new(&p.key("parallel"), e.to_string()))?;
    let tables = (&model, &parallel);
    imported(w, &job, tables, topo, (gpus, algorithm, chunk), p, &at)
}

/// A table of the scenario as TOML again.
fn raw_table<T: serde::Serialize>(t: &T) -> toml::Table {
    toml::Table::try_from(t).unwrap_or_default()
}
