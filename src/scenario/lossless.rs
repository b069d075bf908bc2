//! Resolving `[qos]`, `[pfc]` and `[dcqcn]`, and the threshold checks a
//! lossless fabric needs (`check`): headroom per port against what the
//! link can have in flight, and xON < WRED min < WRED max < xOFF.

use toml::Value;

use super::error::{Finding, KeyError, KeyPath};
use super::raw::{RawClass, RawDcqcn, RawPfc, RawQos, RawWred};
use super::values::{
    choice, count, named, positive_time, probability, rate, show, size, small_rate, time,
};
use crate::nic::dcqcn::{AlphaUpdate, ClampTarget, DcqcnParams, Preset, BYTE_COUNTER_OFF};
use crate::switch::classify::{default_pcp, ClassMap, Match, QUEUES};
use crate::switch::qos::{
    Bytes, MarkPoint, PauseStorm, PfcConfig, PfcTable, QosConfig, QueueConfig, Watchdog,
    WatchdogAction, WredConfig,
};
use crate::topology::{GpuId, Owner, PortId, Topology};
use crate::units::{fmt_bytes, Rate, SimTime};
use crate::wire::frame::Opcode;

type R<T> = Result<T, KeyError>;

/// `[dcqcn]`: a preset and any overrides.
pub fn dcqcn(raw: Option<&RawDcqcn>, path: &KeyPath) -> R<DcqcnParams> {
    let empty = RawDcqcn::default();
    let d = raw.unwrap_or(&empty);
    let preset = named(
        d.preset.as_deref(),
        &path.key("preset"),
        Preset::NAMES,
        Preset::from_name,
        Preset::ConnectxFirmware,
    )?;
    let mut p = DcqcnParams::preset(preset);
    if let Some(v) = &d.g {
        let g = probability(v, &path.key("g"))?;
        if g == 0.0 {
            return Err(KeyError::new(
                &path.key("g"),
                "got 0, expected a gain above 0 (1/256 = 0.00390625)",
            ));
        }
        p.g = g;
    }
    p.alpha_timer = positive_time(
        d.alpha_timer.as_ref(),
        &path.key("alpha_timer"),
        p.alpha_timer,
    )?;
    p.rate_decrease_interval = time(
        d.rate_decrease_interval.as_ref(),
        &path.key("rate_decrease_interval"),
        p.rate_decrease_interval,
    )?;
    p.rate_increase_timer = positive_time(
        d.rate_increase_timer.as_ref(),
        &path.key("rate_increase_timer"),
        p.rate_increase_timer,
    )?;
    p.byte_counter = match &d.byte_counter {
        Some(Value::String(s)) if s == "off" => BYTE_COUNTER_OFF,
        v => size(v.as_ref(), &path.key("byte_counter"), p.byte_counter)?,
    };
    p.f = count(d.f, &path.key("f"), p.f, 1)?;
    p.rai = small_rate(d.rai.as_ref(), &path.key("rai"))?.or(p.rai);
    p.rhai = small_rate(d.rhai.as_ref(), &path.key("rhai"))?.or(p.rhai);
    p.min_rate = small_rate(d.min_rate.as_ref(), &path.key("min_rate"))?.unwrap_or(p.min_rate);
    p.cnp_interval = time(
        d.cnp_interval.as_ref(),
        &path.key("cnp_interval"),
        p.cnp_interval,
    )?;
    p.cnp_delay = time(d.cnp_delay.as_ref(), &path.key("cnp_delay"), p.cnp_delay)?;
    p.clamp_target = named(
        d.clamp_target.as_deref(),
        &path.key("clamp_target"),
        ClampTarget::NAMES,
        ClampTarget::from_name,
        p.clamp_target,
    )?;
    p.alpha_update = named(
        d.alpha_update.as_deref(),
        &path.key("alpha_update"),
        AlphaUpdate::NAMES,
        AlphaUpdate::from_name,
        p.alpha_update,
    )?;
    Ok(p)
}

fn bytes_or_auto(v: Option<&Value>, path: &KeyPath) -> R<Bytes> {
    match v {
        None => Ok(Bytes::Auto),
        Some(Value::String(s)) if s == "auto" => Ok(Bytes::Auto),
        Some(v) => Ok(Bytes::Given(size(Some(v), path, 0)?)),
    }
}

/// A WRED threshold: a size, or a percentage of `queue_limit` (the most
/// one queue may hold: the shared buffer's dynamic threshold with every
/// other queue empty), as Junos's fill levels give it.
fn threshold(v: &Value, path: &KeyPath, queue_limit: u64) -> R<u64> {
    if let Value::String(s) = v {
        if let Some(p) = s.trim().strip_suffix('%') {
            return match p.trim().parse::<f64>() {
                Ok(p) if (0.0..=100.0).contains(&p) => {
                    Ok((queue_limit as f64 * p / 100.0).round() as u64)
                }
                _ => Err(KeyError::new(
                    path,
                    format!("got \"{s}\", expected a percentage from 0% to 100% of the queue's limit, or a size"),
                )),
            };
        }
    }
    size(Some(v), path, 0)
}

fn wred(v: &Value, path: &KeyPath, queue_limit: u64) -> R<Option<WredConfig>> {
    let raw: RawWred = match v {
        Value::String(s) if s == "off" => return Ok(None),
        Value::Table(_) => v.clone().try_into().map_err(|e: toml::de::Error| {
            KeyError::new(path, e.message().to_string())
        })?,
        other => {
            return Err(KeyError::new(
                path,
                format!(
                    "got {}, expected \"off\" or a table such as {{ min = \"150KB\", max = \"3000KB\", max_probability = 0.07 }}",
                    show(other)
                ),
            ))
        }
    };
    let min = raw
        .min
        .as_ref()
        .map(|v| threshold(v, &path.key("min"), queue_limit))
        .transpose()?;
    let max = raw
        .max
        .as_ref()
        .map(|v| threshold(v, &path.key("max"), queue_limit))
        .transpose()?;
    if let (Some(lo), Some(hi)) = (min, max) {
        if lo > hi {
            return Err(KeyError::new(
                &path.key("min"),
                format!("got {lo} B, above max ({hi} B); expected min <= max"),
            ));
        }
    }
    let max_probability = raw
        .max_probability
        .as_ref()
        .map(|v| probability(v, &path.key("max_probability")))
        .transpose()?;
    let weight = match raw.weight {
        None => 0,
        Some(w @ 0..=15) => w as u8,
        Some(w) => {
            return Err(KeyError::new(
                &path.key("weight"),
                format!("got {w}, expected an averaging weight from 0 (instantaneous) to 15"),
            ))
        }
    };
    Ok(Some(WredConfig {
        min,
        max,
        max_probability,
        weight,
    }))
}

/// One `[[qos.class]]`: its queue, what it matches, whether it is the
/// catch-all (neither `dscp` nor `cos`), and its queue's settings.
fn class(c: &RawClass, path: &KeyPath, queue_limit: u64) -> R<(u8, Match, bool, QueueConfig)> {
    let name = c
        .name
        .clone()
        .ok_or_else(|| KeyError::new(&path.key("name"), "missing; every class needs a name"))?;
    let queue = match c.queue {
        Some(q @ 0..=7) => q as u8,
        Some(q) => {
            return Err(KeyError::new(
                &path.key("queue"),
                format!("got {q}, expected a queue from 0 to 7"),
            ))
        }
        None => {
            return Err(KeyError::new(
                &path.key("queue"),
                "missing; expected the egress queue (0 to 7) of this class",
            ))
        }
    };
    let dscps = small_ints(c.dscp.as_deref(), 64, &path.key("dscp"), "a DSCP")?;
    let cos = small_ints(
        c.cos.as_deref(),
        8,
        &path.key("cos"),
        "an 802.1p priority (CoS)",
    )?;
    let all = choice(
        c.match_.as_deref(),
        &path.key("match"),
        &[("any", false), ("all", true)],
        false,
    )?;
    if all && (c.dscp.is_none() || c.cos.is_none()) {
        return Err(KeyError::new(
            &path.key("match"),
            "got \"all\", which needs both dscp and cos to match together",
        ));
    }
    let catch_all = c.dscp.is_none() && c.cos.is_none();
    let rule = Match {
        dscp: dscps,
        cos,
        all,
    };
    let strict = c.strict.unwrap_or(false);
    let percent = match c.bandwidth_percent {
        None => 0,
        Some(_) if strict => {
            return Err(KeyError::new(
                &path.key("bandwidth_percent"),
                "a strict-priority class takes no bandwidth share",
            ))
        }
        Some(p @ 0..=100) => p as u32,
        Some(p) => {
            return Err(KeyError::new(
                &path.key("bandwidth_percent"),
                format!("got {p}, expected a percentage from 0 to 100"),
            ))
        }
    };
    let lossless = c.lossless.unwrap_or(false);
    for (key, given) in [
        ("xoff", c.xoff.is_some()),
        ("xon", c.xon.is_some()),
        ("headroom", c.headroom.is_some()),
        ("pfc_priority", c.pfc_priority.is_some()),
    ] {
        if given && !lossless {
            return Err(KeyError::new(
                &path.key(key),
                "is only used by a lossless class (lossless = true)",
            ));
        }
    }
    let mtu = size(c.mtu.as_ref(), &path.key("mtu"), 9216)?;
    if !(256..=9216).contains(&mtu) {
        return Err(KeyError::new(
            &path.key("mtu"),
            format!("got {mtu}, expected a frame size from 256 to 9216 bytes (jumbo)"),
        ));
    }
    let pfc_priority = match c.pfc_priority {
        None => None,
        Some(p @ 0..=7) => Some(p as u8),
        Some(p) => {
            return Err(KeyError::new(
                &path.key("pfc_priority"),
                format!("got {p}, expected a priority from 0 to 7"),
            ))
        }
    };
    let cfg = QueueConfig {
        pfc_priority,
        name,
        strict,
        percent,
        lossless,
        ecn: c.ecn.unwrap_or(lossless),
        trim: c.trim.unwrap_or(false),
        mtu: mtu as u32,
        wred: c
            .wred
            .as_ref()
            .map(|v| wred(v, &path.key("wred"), queue_limit))
            .transpose()?
            .flatten(),
        xoff: bytes_or_auto(c.xoff.as_ref(), &path.key("xoff"))?,
        xon: bytes_or_auto(c.xon.as_ref(), &path.key("xon"))?,
        headroom: bytes_or_auto(c.headroom.as_ref(), &path.key("headroom"))?,
        shape_bps: c
            .shape
            .as_ref()
            .map(|v| rate(Some(v), &path.key("shape"), Rate::gbps(1)).map(|r| r.bps()))
            .transpose()?,
    };
    if let (Bytes::Given(on), Bytes::Given(off)) = (cfg.xon, cfg.xoff) {
        if on >= off {
            return Err(KeyError::new(
                &path.key("xon"),
                format!("got {on} B, expected less than xoff ({off} B)"),
            ));
        }
    }
    Ok((queue, rule, catch_all, cfg))
}

/// `[qos.nic_priority]`: the priority the NICs give each DSCP: the
/// PCP they stamp on tagged frames, and, tagged or not, the priority
/// whose pauses stop that traffic (a NIC's DSCP-to-priority map).
fn nic_priority(q: &RawQos, path: &KeyPath) -> R<[u8; 64]> {
    let mut pcp = default_pcp();
    let Some(map) = &q.nic_priority else {
        return Ok(pcp);
    };
    let path = path.key("nic_priority");
    for (dscp, &p) in map {
        let at = path.key(dscp);
        let d = match dscp.parse::<u8>() {
            Ok(d) if d < 64 => d,
            _ => {
                return Err(KeyError::new(
                    &at,
                    format!("got the key {dscp:?}, expected a DSCP from 0 to 63"),
                ))
            }
        };
        if !(0..8).contains(&p) {
            return Err(KeyError::new(
                &at,
                format!("got {p}, expected an 802.1p priority from 0 to 7"),
            ));
        }
        pcp[d as usize] = p as u8;
    }
    Ok(pcp)
}

/// `[qos]` and `[pfc]`. `buffer` is the switch buffer, which bounds xOFF;
/// with the dynamic threshold's `alpha_256` it gives the most one queue
/// may hold, which WRED thresholds in percent are of.
pub fn qos(
    raw: Option<&RawQos>,
    pfc_raw: Option<&RawPfc>,
    topo: &Topology,
    (buffer, alpha_256): (u64, Option<u64>),
    root: &KeyPath,
) -> R<QosConfig> {
    let queue_limit = match alpha_256 {
        None => buffer,
        Some(a) => (buffer as u128 * a as u128 / (256 + a as u128)) as u64,
    };
    let path = root.key("qos");
    let mut cfg = QosConfig::rocev2_default();
    if let Some(q) = raw {
        cfg.mark_on = choice(
            q.mark_on.as_deref(),
            &path.key("mark_on"),
            &[
                ("enqueue", MarkPoint::Enqueue),
                ("dequeue", MarkPoint::Dequeue),
            ],
            MarkPoint::Dequeue,
        )?;
        cfg.framing.vlan_tag = q.vlan_tagging.unwrap_or(false);
        cfg.vlan_id = match q.vlan_id {
            None if cfg.framing.vlan_tag && !topo.vlan_rails => 1,
            None => 0,
            Some(id) if !cfg.framing.vlan_tag => {
                return Err(KeyError::new(
                    &path.key("vlan_id"),
                    format!("got {id}, but frames are untagged; set vlan_tagging = true"),
                ))
            }
            Some(id) if topo.vlan_rails => {
                return Err(KeyError::new(
                    &path.key("vlan_id"),
                    format!(
                        "got {id}, but this topology's rails are VLANs of their own \
                         (rail r is VLAN r + 1); leave vlan_id out"
                    ),
                ))
            }
            Some(id @ 1..=4094) => id as u16,
            Some(id) => {
                return Err(KeyError::new(
                    &path.key("vlan_id"),
                    format!("got {id}, expected a VLAN ID from 1 to 4094"),
                ))
            }
        };
        let pcp = nic_priority(q, &path)?;
        cfg.map.set_pcp(pcp);
        if !q.class.is_empty() {
            let mut queues: [QueueConfig; QUEUES] = std::array::from_fn(|_| QueueConfig::unused());
            let mut used = [false; QUEUES];
            let mut rules: Vec<(Match, u8)> = Vec::new();
            let mut catch_all = None;
            for (i, c) in q.class.iter().enumerate() {
                let cp = path.key("class").index(i);
                let (queue, rule, all, qc) = class(c, &cp, queue_limit)?;
                if used[queue as usize] {
                    return Err(KeyError::new(
                        &cp.key("queue"),
                        format!("got {queue}, which another class already uses"),
                    ));
                }
                used[queue as usize] = true;
                for &d in &rule.dscp {
                    if rules.iter().any(|(r, _)| !r.all && r.dscp.contains(&d)) && !rule.all {
                        return Err(KeyError::new(
                            &cp.key("dscp"),
                            format!("DSCP {d} is already in another class"),
                        ));
                    }
                }
                rules.push((rule, queue));
                if all {
                    if catch_all.is_some() {
                        return Err(KeyError::new(
                            &cp.key("dscp"),
                            "missing; only one class may leave out dscp (it takes every DSCP no class lists)",
                        ));
                    }
                    catch_all = Some(queue);
                }
                queues[queue as usize] = qc;
            }
            let default_queue = catch_all.unwrap_or(0);
            if !used[default_queue as usize] {
                queues[0] = QueueConfig {
                    name: "default".into(),
                    ..QueueConfig::unused()
                };
            }
            let total: u32 = queues.iter().filter(|q| !q.strict).map(|q| q.percent).sum();
            if total > 100 {
                return Err(KeyError::new(
                    &path.key("class"),
                    format!("bandwidth_percent adds up to {total}, expected at most 100"),
                ));
            }
            cfg.map = ClassMap::with_rules(default_queue, &rules, pcp, cfg.framing.vlan_tag);
            cfg.queues = queues;
        }
    }

    let pp = root.key("pfc");
    let empty = RawPfc::default();
    let p = pfc_raw.unwrap_or(&empty);
    let mut pfc = PfcConfig::default();
    if p.enabled == Some(false) {
        // Lossy fabric: every class drops on overflow.
        for q in cfg.queues.iter_mut() {
            q.lossless = false;
        }
    }
    if let Some(q) = p.quanta {
        if !(1..=0xFFFF).contains(&q) {
            return Err(KeyError::new(
                &pp.key("quanta"),
                format!("got {q}, expected pause quanta from 1 to 65535 (units of 512 bit times)"),
            ));
        }
        pfc.quanta = q as u16;
    }
    pfc.refresh = p
        .refresh
        .as_ref()
        .map(|v| positive_time(Some(v), &pp.key("refresh"), SimTime::ZERO))
        .transpose()?;
    pfc.response_time = time(
        p.response_time.as_ref(),
        &pp.key("response_time"),
        SimTime::ZERO,
    )?;
    if let Some(w) = &p.watchdog {
        let wp = pp.key("watchdog");
        let interval = match &w.interval {
            None => {
                return Err(KeyError::new(
                    &wp.key("interval"),
                    "missing; expected how long a queue may stay paused, e.g. \"200us\"",
                ))
            }
            Some(v) => positive_time(Some(v), &wp.key("interval"), SimTime::ZERO)?,
        };
        let action = choice(
            w.action.as_deref(),
            &wp.key("action"),
            &[
                ("drop", WatchdogAction::Drop),
                ("ignore", WatchdogAction::Ignore),
            ],
            WatchdogAction::Drop,
        )?;
        pfc.watchdog = Some(Watchdog {
            interval,
            action,
            recovery: positive_time(w.recovery.as_ref(), &wp.key("recovery"), interval)?,
        });
    }
    let data_queue_default = cfg.queues.iter().position(|q| q.lossless);
    for (i, s) in p.storm.iter().enumerate() {
        let sp = pp.key("storm").index(i);
        let gpu = match s.gpu {
            Some(g) if g >= 0 && (g as usize) < topo.gpus.len() => GpuId(g as u32),
            Some(g) => {
                return Err(KeyError::new(
                    &sp.key("gpu"),
                    format!(
                        "GPU {g} does not exist; the fabric has {} GPUs",
                        topo.gpus.len()
                    ),
                ))
            }
            None => {
                return Err(KeyError::new(
                    &sp.key("gpu"),
                    "missing; expected the GPU whose NIC sends the pauses",
                ))
            }
        };
        let priority = match (s.priority, data_queue_default) {
            (Some(q @ 0..=7), _) if cfg.queues[q as usize].lossless => q as u8,
            (Some(q), _) => {
                return Err(KeyError::new(
                    &sp.key("priority"),
                    format!("got {q}, expected the queue of a lossless class"),
                ))
            }
            (None, Some(q)) => q as u8,
            (None, None) => {
                return Err(KeyError::new(
                    &sp.key("priority"),
                    "no class is lossless, so there is nothing to pause",
                ))
            }
        };
        let start = time(s.start.as_ref(), &sp.key("start"), SimTime::ZERO)?;
        let stop = s
            .stop
            .as_ref()
            .map(|v| time(Some(v), &sp.key("stop"), SimTime::ZERO))
            .transpose()?;
        if stop.is_some_and(|t| t <= start) {
            return Err(KeyError::new(
                &sp.key("stop"),
                "expected a time after start",
            ));
        }
        pfc.storms.push(PauseStorm {
            gpu,
            priority,
            start,
            stop,
        });
    }
    cfg.pfc = pfc;

    // Thresholds given in bytes must fit the buffer.
    for (q, qc) in cfg.queues.iter().enumerate() {
        if let Bytes::Given(x) = qc.xoff {
            if x > buffer {
                return Err(KeyError::new(
                    &class_key(raw, q, &path).key("xoff"),
                    format!("got {x} B, above the switch buffer ({buffer} B)"),
                ));
            }
        }
    }
    Ok(cfg)
}

/// The `[[qos.class]]` entry that configures queue `q`, for error paths.
fn class_key(raw: Option<&RawQos>, q: usize, path: &KeyPath) -> KeyPath {
    let i = raw
        .and_then(|r| r.class.iter().position(|c| c.queue == Some(q as i64)))
        .unwrap_or(0);
    path.key("class").index(i)
}

/// A class's list of DSCPs or priorities: each below `below`, as bytes
/// (none when the key is absent).
fn small_ints(list: Option<&[i64]>, below: i64, key: &KeyPath, what: &str) -> R<Vec<u8>> {
    let mut out = Vec::new();
    for (i, &v) in list.unwrap_or_default().iter().enumerate() {
        if !(0..below).contains(&v) {
            return Err(KeyError::new(
                &key.index(i),
                format!("got {v}, expected {what} from 0 to {}", below - 1),
            ));
        }
        out.push(v as u8);
    }
    Ok(out)
}

/// Checks the data and CNP classes exist and the transport's frames fit
/// their class MTU.
pub fn check_transport(cfg: &QosConfig, mtu: u32, dscp: u8, transport: &KeyPath) -> R<()> {
    let q = cfg.map.queue_of(dscp) as usize;
    let frame = cfg.framing.frame_bytes(Opcode::WriteFirst, mtu);
    if frame > cfg.queues[q].mtu {
        return Err(KeyError::new(
            &transport.key("mtu"),
            format!(
                "got {mtu}: its {frame} B frames exceed the {} B MTU of class \"{}\" (queue {q})",
                cfg.queues[q].mtu, cfg.queues[q].name
            ),
        ));
    }
    Ok(())
}

/// Threshold checks per port kind (tier, speed, delay): headroom against
/// what the link can have in flight, and the order xON < WRED min < WRED
/// max < xOFF, as warnings; and the one error that needs the built fabric,
/// headroom reservations that leave no shared buffer.
pub fn check(
    topo: &Topology,
    cfg: &QosConfig,
    table: &PfcTable,
    (buffer, alpha_256): (u64, Option<u64>),
) -> (Vec<Finding>, Option<KeyError>) {
    let mut warnings: Vec<Finding> = Vec::new();
    let mut error = None;
    let max_frame = cfg.max_wire_frame();
    let names = topo.kind.tier_names();
    // Thresholds against the buffer they live in, per port speed.
    let mut rates: Vec<Rate> = topo.ports.iter().map(|p| p.rate).collect();
    rates.sort_by_key(|r| r.bps());
    rates.dedup();
    for (q, qc) in cfg.queues.iter().enumerate() {
        let room = queue_room(buffer, alpha_256, qc.lossless);
        let key = format!("qos.class \"{}\"", qc.name);
        for &rate in &rates {
            if let Some(w) = table.wred_at(rate, q).filter(|w| w.max as u64 > room) {
                warnings.push(Finding {
                    key: format!("{key}.wred"),
                    message: format!(
                        "{rate} ports: WRED max {} is above the most the queue can hold ({}{}), so it overflows before marking reaches its max_probability",
                        fmt_bytes(w.max as u64),
                        fmt_bytes(room),
                        room_why(buffer, alpha_256, qc.lossless)
                    ),
                });
                break;
            }
        }
        if qc.lossless {
            let xoff = (0..topo.ports.len() as u32)
                .filter_map(|p| table.get(PortId(p), q))
                .map(|p| p.xoff as u64)
                .max()
                .unwrap_or(0);
            if xoff > buffer {
                warnings.push(Finding {
                    key: format!("{key}.xoff"),
                    message: format!(
                        "xOFF {} is above the switch buffer ({}): the buffer fills before a port pauses, and lossless packets are dropped",
                        fmt_bytes(xoff),
                        fmt_bytes(buffer)
                    ),
                });
            }
        }
    }
    for (q, qc) in cfg.queues.iter().enumerate() {
        if !qc.lossless {
            continue;
        }
        let key = format!("qos.class \"{}\"", qc.name);
        // One finding per kind of port: tier, speed, delay.
        let mut seen = Vec::new();
        for (pi, port) in topo.ports.iter().enumerate() {
            let Owner::Switch(s) = port.owner else {
                continue;
            };
            let tier = topo.switches[s.idx()].tier;
            let kind = (tier, port.rate, port.delay);
            if seen.contains(&kind) {
                continue;
            }
            seen.push(kind);
            let pfc = *table.get(PortId(pi as u32), q).expect("a lossless class");
            let where_ = format!(
                "{} ports at {} with {} links",
                names[tier as usize], port.rate, port.delay
            );
            if pfc.headroom < pfc.headroom_needed {
                warnings.push(Finding {
                    key: format!("{key}.headroom"),
                    message: format!(
                        "{where_}: headroom {} is below the {} that can still arrive after a pause (2 x {} of flight and {} response at {}, plus three {} B frames and the pause frame); lossless packets may be dropped",
                        fmt_bytes(pfc.headroom as u64),
                        fmt_bytes(pfc.headroom_needed as u64),
                        port.delay,
                        cfg.pfc.response_time,
                        port.rate,
                        max_frame
                    ),
                });
            }
            if let Some(w) = table.wred_at(port.rate, q) {
                let ok = pfc.xon < w.min && w.min <= w.max && w.max < pfc.xoff;
                if !ok {
                    warnings.push(Finding {
                        key: key.clone(),
                        message: format!(
                            "{where_}: expected xON < WRED min < WRED max < xOFF so that ECN slows senders before PFC pauses them; got xON {}, WRED min {}, WRED max {}, xOFF {}",
                            fmt_bytes(pfc.xon as u64),
                            fmt_bytes(w.min as u64),
                            fmt_bytes(w.max as u64),
                            fmt_bytes(pfc.xoff as u64)
                        ),
                    });
                }
            } else if pfc.xon >= pfc.xoff {
                warnings.push(Finding {
                    key: format!("{key}.xon"),
                    message: format!(
                        "{where_}: xON {} is not below xOFF {}",
                        fmt_bytes(pfc.xon as u64),
                        fmt_bytes(pfc.xoff as u64)
                    ),
                });
            }
        }
    }
    if cfg.queues.iter().any(|q| q.lossless) {
        let (w, e) = check_refresh(topo, &cfg.pfc);
        warnings.extend(w);
        error = error.or(e);
    }
    // Headroom is set aside from each switch's buffer.
    if table.slots > 0 {
        let mut worst: Option<(u64, usize)> = None;
        for (si, sw) in topo.switches.iter().enumerate() {
            let reserved: u64 = sw
                .ports
                .iter()
                .flat_map(|&p| {
                    let at = p.idx() * table.slots;
                    table.ports[at..at + table.slots].iter()
                })
                .map(|pfc| pfc.headroom as u64)
                .sum();
            if worst.is_none_or(|(r, _)| reserved > r) {
                worst = Some((reserved, si));
            }
        }
        if let Some((reserved, si)) = worst {
            if reserved + 2 * max_frame as u64 > buffer {
                error = Some(KeyError::new(
                    &KeyPath::root().key("switch").key("buffer"),
                    format!(
                        "got {}, but {} reserves {} of PFC headroom over its {} ports, leaving no shared buffer; give a larger buffer or less headroom",
                        fmt_bytes(buffer),
                        topo.switches[si].name,
                        fmt_bytes(reserved),
                        topo.switches[si].ports.len()
                    ),
                ));
            }
        }
    }
    (warnings, error)
}

/// The most one queue can hold on a switch with `buffer` bytes: a lossy
/// queue alpha/(1+alpha) of it under the dynamic threshold (the whole
/// without one), a lossless one the whole (PFC bounds it, not the
/// threshold).
pub fn queue_room(buffer: u64, alpha_256: Option<u64>, lossless: bool) -> u64 {
    match alpha_256 {
        Some(a) if !lossless => (buffer as u128 * a as u128 / (256 + a) as u128) as u64,
        _ => buffer,
    }
}

/// What `queue_room` is, in words.
pub fn room_why(buffer: u64, alpha_256: Option<u64>, lossless: bool) -> String {
    match alpha_256 {
        Some(a) if !lossless => format!(
            ": alpha {}/(1 + alpha) of the {} switch buffer",
            a as f64 / 256.0,
            fmt_bytes(buffer)
        ),
        _ => ": the switch buffer".into(),
    }
}

/// A pause is re-sent every refresh while congestion lasts. A refresh
/// shorter than a pause frame's own time on the wire would fill the link
/// with pause frames (and the event queue with their timers): refused. A
/// refresh longer than the pause lets the pause lapse between frames, so
/// the partner sends into a full queue: a warning. Checked at each port
/// speed, where both times differ.
fn check_refresh(topo: &Topology, pfc: &PfcConfig) -> (Vec<Finding>, Option<KeyError>) {
    use crate::wire::frame;
    let mut rates: Vec<Rate> = topo.ports.iter().map(|p| p.rate).collect();
    rates.sort_by_key(|r| r.bps());
    rates.dedup();
    let mut warnings = Vec::new();
    let frame_bytes = frame::wire_bytes(Opcode::Pause, 0) as u64;
    for rate in rates {
        let pause = crate::switch::qos::pause_time(pfc.quanta, rate);
        let refresh = pfc.refresh.unwrap_or(SimTime(pause.0 / 2));
        let on_wire = rate.serialize(frame_bytes);
        if refresh < on_wire {
            let (key, given) = match pfc.refresh {
                Some(r) => ("refresh", format!("got {r}")),
                None => (
                    "quanta",
                    format!(
                        "got {}, which pauses for {pause} at {rate} and so refreshes every {refresh} (half of it)",
                        pfc.quanta
                    ),
                ),
            };
            return (
                warnings,
                Some(KeyError::new(
                    &KeyPath::root().key("pfc").key(key),
                    format!(
                        "{given}; a refresh must be at least one pause frame's time on the wire, {on_wire} at {rate}, or the port sends nothing but pause frames"
                    ),
                )),
            );
        }
        if pfc.refresh.is_some() && refresh > pause {
            warnings.push(Finding {
                key: "pfc.refresh".into(),
                message: format!(
                    "ports at {rate}: a pause lasts {pause} ({} quanta) but is refreshed only every {refresh}, so it lapses in between and the partner sends into a congested queue; lossless frames may be dropped. Refresh at most every {pause}, or raise pfc.quanta",
                    pfc.quanta
                ),
            });
        }
    }
    (warnings, None)
}

/// Where each class's WRED departs from what the DCQCN preset gives at
/// each switch port speed (thresholds scaled with speed, the preset's
/// marking probability): one line per class and speed, for `validate`.
pub fn departures(topo: &Topology, cfg: &QosConfig, preset: &DcqcnParams) -> Vec<String> {
    let mut rates: Vec<Rate> = topo
        .ports
        .iter()
        .filter(|p| matches!(p.owner, Owner::Switch(_)))
        .map(|p| p.rate)
        .collect();
    rates.sort_by_key(|r| r.bps());
    rates.dedup();
    let mut out = Vec::new();
    for q in cfg.queues.iter().filter(|q| q.wred.is_some()) {
        for &rate in &rates {
            let Some(w) = crate::switch::qos::PortWred::resolve(q, preset, rate) else {
                continue;
            };
            let (kmin, kmax) = preset.thresholds_at(rate);
            let p = w.pmax_u32 as f64 / 4_294_967_296.0;
            if (w.min as u64, w.max as u64) == (kmin, kmax) && (p - preset.pmax).abs() < 1e-9 {
                continue;
            }
            out.push(format!(
                "class \"{}\" at {rate} ports: WRED {}..{} marking up to {:.0}%{}; the {} preset gives {}..{} up to {:.0}%",
                q.name,
                fmt_bytes(w.min as u64),
                fmt_bytes(w.max as u64),
                100.0 * p,
                if q.ecn { "" } else { " (dropping: no ECN)" },
                preset.preset.name(),
                fmt_bytes(kmin),
                fmt_bytes(kmax),
                100.0 * preset.pmax
            ));
        }
    }
    out
}

/// One line per lossless class and kind of switch port (tier, speed,
/// cable) with the thresholds it runs with, for `validate`.
pub fn describe(topo: &Topology, cfg: &QosConfig, table: &PfcTable) -> Vec<String> {
    let names = topo.kind.tier_names();
    // One port of each kind (tier, speed, delay).
    let mut kinds = Vec::new();
    for (pi, port) in topo.ports.iter().enumerate() {
        if let Owner::Switch(s) = port.owner {
            let k = (topo.switches[s.idx()].tier, port.rate, port.delay);
            if !kinds.iter().any(|&(kind, _)| kind == k) {
                kinds.push((k, PortId(pi as u32)));
            }
        }
    }
    let mut out = Vec::new();
    for (q, qc) in cfg.queues.iter().enumerate().filter(|(_, q)| q.lossless) {
        for &((tier, rate, delay), p) in &kinds {
            let pfc = *table.get(p, q).expect("a lossless class");
            let wred = table.wred_at(rate, q).map_or("no WRED".to_string(), |w| {
                format!(
                    "WRED {}..{}",
                    fmt_bytes(w.min as u64),
                    fmt_bytes(w.max as u64)
                )
            });
            out.push(format!(
                "class \"{}\" at {} ports, {} with {} links: xON {}, {wred}, xOFF {}; headroom {} (needs {})",
                qc.name,
                names[tier as usize],
                rate,
                delay,
                fmt_bytes(pfc.xon as u64),
                fmt_bytes(pfc.xoff as u64),
                fmt_bytes(pfc.headroom as u64),
                fmt_bytes(pfc.headroom_needed as u64)
            ));
        }
    }
    out
}
