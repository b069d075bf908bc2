//! `fabricsim config export`: the NX-OS or Junos configuration that makes
//! a switch behave as a scenario says, the reverse of `import` for the
//! part that maps, so that a design found in simulation can be deployed.
//!
//! The classes come from the scenario's `[[qos.class]]` entries as given
//! (their order, DSCP and CoS lists, and which settings they give) and
//! from the resolved queues (thresholds left to the DCQCN preset are
//! written as the preset gives them at the switch's fastest port). What a
//! configuration language cannot say (an NX-OS watchdog shorter than
//! 100 ms, a hash on QP numbers, Junos PFC thresholds) is listed in a
//! comment at the top, never dropped in silence. Importing an export
//! gives back the keys it was written from (tested on every example).

use crate::switch::qos::{Bytes, PortWred, QosConfig, WatchdogAction};
use std::fmt::Write;
use toml::{Table, Value};

/// The configuration language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Os {
    Nxos,
    Junos,
}

/// What one switch is to do: the scenario's classes and switch keys,
/// resolved where the scenario leaves them to defaults.
pub struct Design<'a> {
    /// The scenario's file, named in the header.
    pub scenario: String,
    pub hostname: String,
    pub qos: &'a QosConfig,
    /// `Scenario::switch_keys`: `qos`, `pfc`, `switch.ecmp`,
    /// `switch.balance` as given.
    pub keys: &'a Table,
    /// This switch's balancing keys as given (a tier's or a
    /// configuration's own), if not the top-level ones.
    pub balance: Option<&'a Table>,
    /// The interfaces facing up, where equal-cost groups are (DLB).
    pub up: Vec<String>,
    /// WRED of each queue at the switch's fastest port (what the preset
    /// gives where the scenario does not say).
    pub wred: [Option<PortWred>; 8],
    /// The most one queue may hold (Junos fill levels are percentages
    /// of it).
    pub queue_limit: u64,
}

/// One class as the scenario gives it.
struct Class {
    name: String,
    queue: usize,
    dscp: Vec<u8>,
    cos: Vec<u8>,
    all: bool,
    /// The settings the entry gives (`bandwidth_percent`, `mtu`, ...).
    given: Table,
}

fn ints(v: Option<&Value>) -> Vec<u8> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_integer)
                .filter_map(|i| u8::try_from(i).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The classes in the scenario's order; the built-in three where it gives
/// none.
fn classes(d: &Design) -> Vec<Class> {
    let given = d
        .keys
        .get("qos")
        .and_then(|q| q.get("class"))
        .and_then(Value::as_array);
    match given {
        Some(list) => list
            .iter()
            .filter_map(Value::as_table)
            .map(|t| Class {
                name: t
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("class")
                    .to_string(),
                queue: t.get("queue").and_then(Value::as_integer).unwrap_or(0) as usize & 7,
                dscp: ints(t.get("dscp")),
                cos: ints(t.get("cos")),
                all: t.get("match").and_then(Value::as_str) == Some("all"),
                given: t.clone(),
            })
            .collect(),
        None => [(3usize, 24u8), (7, 48)]
            .into_iter()
            .map(|(q, dscp)| Class {
                name: d.qos.queues[q].name.clone(),
                queue: q,
                dscp: vec![dscp],
                cos: Vec::new(),
                all: false,
                given: Table::new(),
            })
            .chain(std::iter::once(Class {
                name: d.qos.queues[0].name.clone(),
                queue: 0,
                dscp: Vec::new(),
                cos: Vec::new(),
                all: false,
                given: Table::new(),
            }))
            .collect(),
    }
}

/// A size as given (`"150KB"`, `"3000KB"`, `"2MB"`, `"500B"`, `"10%"`):
/// the number and its unit, when it is one of those spellings.
fn spelled(v: Option<&Value>) -> Option<(u64, &'static str)> {
    let s = v?.as_str()?.trim();
    for (suffix, unit) in [
        ("KB", "kbytes"),
        ("MB", "mbytes"),
        ("%", "%"),
        ("B", "bytes"),
    ] {
        if let Some(n) = s.strip_suffix(suffix) {
            return n.trim().parse().ok().map(|n| (n, unit));
        }
    }
    None
}

/// Bytes in the largest unit they are a whole number of.
fn exact(b: u64) -> (u64, &'static str) {
    match b {
        0 => (0, "bytes"),
        b if b % 1_000_000 == 0 => (b / 1_000_000, "mbytes"),
        b if b % 1_000 == 0 => (b / 1_000, "kbytes"),
        b => (b, "bytes"),
    }
}

/// A rate in the largest unit it is a whole number of.
fn rate(bps: u64) -> String {
    match bps {
        b if b % 1_000_000_000 == 0 => format!("{} gbps", b / 1_000_000_000),
        b if b % 1_000_000 == 0 => format!("{} mbps", b / 1_000_000),
        b if b % 1_000 == 0 => format!("{} kbps", b / 1_000),
        b => format!("{b} bps"),
    }
}

fn list(v: &[u8]) -> String {
    v.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
}

/// The WRED thresholds to write: as the class gives them (its spelling),
/// else the preset's at the switch's fastest port; and the probability
/// in whole percent with whether it was rounded.
struct Thresholds {
    min: (u64, &'static str),
    max: (u64, &'static str),
    percent: u64,
    rounded: bool,
    weight: u8,
}

fn thresholds(d: &Design, c: &Class) -> Option<Thresholds> {
    let q = &d.qos.queues[c.queue];
    let w = q.wred.as_ref()?;
    let at = d.wred[c.queue]?;
    let given = c.given.get("wred").and_then(Value::as_table);
    let side = |key: &str, resolved: u64| {
        spelled(given.and_then(|g| g.get(key)))
            .filter(|s| s.1 != "%")
            .unwrap_or_else(|| exact(resolved))
    };
    let p = w
        .max_probability
        .unwrap_or(at.pmax_u32 as f64 / 4_294_967_296.0);
    let percent = (p * 100.0).round();
    Some(Thresholds {
        min: side("min", at.min as u64),
        max: side("max", at.max as u64),
        percent: percent as u64,
        rounded: (percent - p * 100.0).abs() > 1e-6,
        weight: w.weight,
    })
}

/// The configuration text for `os`.
pub fn export(d: &Design, os: Os) -> String {
    match os {
        Os::Nxos => nxos(d),
        Os::Junos => junos(d),
    }
}

/// The balancing keys of the exported switch.
fn balance<'a>(d: &'a Design) -> Option<&'a Table> {
    d.balance.or_else(|| {
        d.keys
            .get("switch")
            .and_then(|s| s.get("balance"))
            .and_then(Value::as_table)
    })
}

/// Microseconds a duration key gives (`"128us"`, `"1ms"`), if whole.
fn micros(v: Option<&Value>) -> Option<u64> {
    let s = v?.as_str()?.trim();
    let t = crate::units::parse_time(s)?;
    (t.0 % 1_000_000 == 0).then_some(t.0 / 1_000_000)
}

/// `switch.partitions` as given: each kind's share in whole percent, or
/// what cannot be written so.
fn partitions(d: &Design) -> (Vec<(&'static str, u64)>, Option<String>) {
    let Some(t) = d
        .keys
        .get("switch")
        .and_then(|s| s.get("partitions"))
        .and_then(Value::as_table)
    else {
        return (Vec::new(), None);
    };
    let mut out = Vec::new();
    for kind in ["lossless", "lossy"] {
        match t.get(kind).map(|v| spelled(Some(v))) {
            None => {}
            Some(Some((n, "%"))) => out.push((kind, n)),
            Some(_) => {
                return (
                    Vec::new(),
                    Some(format!(
                        "switch.partitions {kind}: Junos gives a partition in whole percent of the buffer"
                    )),
                )
            }
        }
    }
    (out, None)
}

fn header(out: &mut String, d: &Design, comment: &str, not_said: &[String]) {
    let _ = writeln!(
        out,
        "{comment} Written by fabricsim config export from {}: the settings that make",
        d.scenario
    );
    let _ = writeln!(
        out,
        "{comment} this switch classify, queue, mark, pause and balance as the scenario does."
    );
    for n in not_said {
        let _ = writeln!(out, "{comment} Not exported: {n}");
    }
}

fn nxos(d: &Design) -> String {
    let classes = classes(d);
    let mut not_said = Vec::new();
    let mut body = String::new();
    let w = &mut body;
    let _ = writeln!(w, "hostname {}\n", d.hostname);
    let catch_all = classes
        .iter()
        .find(|c| c.dscp.is_empty() && c.cos.is_empty())
        .map_or(0, |c| c.queue);
    for c in classes
        .iter()
        .filter(|c| !c.dscp.is_empty() || !c.cos.is_empty())
    {
        let how = if c.all { "match-all" } else { "match-any" };
        let _ = writeln!(w, "class-map type qos {how} {}", c.name);
        if !c.dscp.is_empty() {
            let _ = writeln!(w, "  match dscp {}", list(&c.dscp));
        }
        if !c.cos.is_empty() {
            let _ = writeln!(w, "  match cos {}", list(&c.cos));
        }
    }
    let _ = writeln!(w, "\npolicy-map type qos FABRICSIM_CLASSIFY");
    for c in &classes {
        let name = if c.dscp.is_empty() && c.cos.is_empty() {
            "class-default"
        } else {
            c.name.as_str()
        };
        let _ = writeln!(w, "  class {name}\n    set qos-group {}", c.queue);
    }
    if !classes
        .iter()
        .any(|c| c.dscp.is_empty() && c.cos.is_empty())
    {
        let _ = writeln!(w, "  class class-default\n    set qos-group {catch_all}");
    }
    // Egress: priority or share, WRED, shaper.
    let _ = writeln!(w, "\npolicy-map type queuing FABRICSIM_OUT");
    for c in &classes {
        let q = &d.qos.queues[c.queue];
        let class = if c.queue == 0 {
            "c-out-8q-q-default".to_string()
        } else {
            format!("c-out-8q-q{}", c.queue)
        };
        let _ = writeln!(w, "  class type queuing {class}");
        if q.strict {
            let _ = writeln!(w, "    priority level 1");
        } else if q.percent > 0 || c.given.contains_key("bandwidth_percent") {
            let _ = writeln!(w, "    bandwidth remaining percent {}", q.percent);
        }
        if let Some(t) = thresholds(d, c) {
            if t.rounded {
                not_said.push(format!(
                    "class {}'s max_probability to the percent (drop-probability {})",
                    c.name, t.percent
                ));
            }
            let _ = writeln!(
                w,
                "    random-detect minimum-threshold {} {} maximum-threshold {} {} drop-probability {} weight {}{}",
                t.min.0,
                t.min.1,
                t.max.0,
                t.max.1,
                t.percent,
                t.weight,
                if q.ecn { " ecn" } else { "" }
            );
        }
        if let Some(bps) = q.shape_bps {
            let _ = writeln!(w, "    shape min 0 gbps max {}", rate(bps));
        }
    }
    // Ingress pause thresholds, where the scenario gives them.
    let pause: Vec<&Class> = classes
        .iter()
        .filter(|c| {
            let q = &d.qos.queues[c.queue];
            q.lossless
                && !matches!(
                    (q.xoff, q.xon, q.headroom),
                    (Bytes::Auto, Bytes::Auto, Bytes::Auto)
                )
        })
        .collect();
    let mut input = false;
    for c in &pause {
        let q = &d.qos.queues[c.queue];
        match (q.xoff, q.xon, q.headroom) {
            (Bytes::Given(x), Bytes::Given(y), Bytes::Given(h)) => {
                if !input {
                    let _ = writeln!(w, "\npolicy-map type queuing FABRICSIM_IN");
                    input = true;
                }
                let (b, x, y) = (exact(x + h), exact(x), exact(y));
                let _ = writeln!(
                    w,
                    "  class type queuing c-in-q{}\n    pause buffer-size {} {} pause-threshold {} {} resume-threshold {} {}",
                    c.queue, b.0, b.1, x.0, x.1, y.0, y.1
                );
            }
            _ => not_said.push(format!(
                "class {}'s xoff, xon and headroom: NX-OS sets them together (pause buffer-size), so give all three",
                c.name
            )),
        }
    }
    // MTU and PFC.
    let _ = writeln!(w, "\npolicy-map type network-qos FABRICSIM_NQ");
    for c in &classes {
        let q = &d.qos.queues[c.queue];
        if !q.lossless && !c.given.contains_key("mtu") && q.mtu == 9216 {
            continue;
        }
        let class = if c.queue == 0 {
            "c-8q-nq-default".to_string()
        } else {
            format!("c-8q-nq{}", c.queue)
        };
        let _ = writeln!(w, "  class type network-qos {class}\n    mtu {}", q.mtu);
        if q.lossless {
            let _ = writeln!(
                w,
                "    pause pfc-cos {}",
                q.pfc_priority.unwrap_or(c.queue as u8)
            );
        }
    }
    let _ = writeln!(w, "\nsystem qos");
    let _ = writeln!(w, "  service-policy type network-qos FABRICSIM_NQ");
    let _ = writeln!(w, "  service-policy type queuing output FABRICSIM_OUT");
    if input {
        let _ = writeln!(w, "  service-policy type queuing input FABRICSIM_IN");
    }
    let _ = writeln!(w, "  service-policy type qos input FABRICSIM_CLASSIFY");
    // The PFC watchdog: NX-OS's interval is 100 to 1000 ms, and it drops.
    if let Some(wd) = d.qos.pfc.watchdog {
        let ms = wd.interval.0 / 1_000_000_000;
        let whole = wd.interval.0 % 1_000_000_000 == 0;
        let restore = (wd.recovery.0 % wd.interval.0.max(1) == 0)
            .then(|| wd.recovery.0 / wd.interval.0.max(1))
            .filter(|&r| r <= 100);
        match (whole && (100..=1000).contains(&ms), restore, wd.action) {
            (true, Some(r), WatchdogAction::Drop) => {
                let _ = writeln!(
                    w,
                    "\npriority-flow-control watch-dog-interval on\npriority-flow-control watch-dog interval {ms}\npriority-flow-control watch-dog shutdown-multiplier 1\npriority-flow-control auto-restore multiplier {r}"
                );
            }
            _ => not_said.push(format!(
                "the PFC watchdog ({} interval, {} recovery, action {:?}): NX-OS's interval is 100 to 1000 ms in whole ms, its recovery a multiple of it up to 100, its action drop",
                wd.interval, wd.recovery, wd.action
            )),
        }
    }
    // Hashing.
    if let Some(ecmp) = d
        .keys
        .get("switch")
        .and_then(|s| s.get("ecmp"))
        .and_then(Value::as_table)
    {
        if let Some(fields) = ecmp.get("fields").and_then(Value::as_array) {
            let has = |f: &str| fields.iter().any(|v| v.as_str() == Some(f));
            let ports = has("udp_sport") || has("udp_dport") || has("protocol");
            let ip = has("src_ip") && has("dst_ip");
            let kind = match (ip, ports, has("vlan")) {
                (true, true, true) => Some("ip-l4port-vlan"),
                (true, true, false) => Some("ip-l4port"),
                (true, false, true) => Some("ip-vlan"),
                (true, false, false) => Some("ip"),
                _ => None,
            };
            match kind {
                Some(k) if !has("dst_qp") => {
                    let sym = ecmp.get("symmetric").and_then(Value::as_bool) == Some(true);
                    let _ = writeln!(
                        w,
                        "\nport-channel load-balance src-dst {k}{}",
                        if sym { " symmetric" } else { "" }
                    );
                }
                _ => not_said.push(
                    "the hash fields: NX-OS hashes both addresses, with or without the L4 ports and the VLAN".into(),
                ),
            }
        }
    }
    if d.keys
        .get("switch")
        .and_then(|s| s.get("partitions"))
        .is_some()
    {
        not_said.push(
            "switch.partitions: NX-OS does not partition its buffer by lossless and lossy classes"
                .into(),
        );
    }
    // DLB on the uplinks.
    if let Some(b) = balance(d) {
        match b.get("mode").and_then(Value::as_str) {
            Some("dlb") => {
                let mode = b
                    .get("dlb_mode")
                    .and_then(Value::as_str)
                    .unwrap_or("flowlet");
                let _ = writeln!(w, "\nhardware profile dlb");
                for i in &d.up {
                    let _ = writeln!(w, "  dlb-interface {i}");
                }
                match mode {
                    "flowlet" | "per-packet" => {
                        let _ = writeln!(w, "  mode {mode}");
                    }
                    other => not_said.push(format!(
                        "dlb_mode {other}: NX-OS's DLB is flowlet or per-packet"
                    )),
                }
                if let Some(us) = micros(b.get("flowlet_timeout")) {
                    let _ = writeln!(w, "  flowlet-aging {us}");
                }
            }
            Some("ecmp") | None => {}
            Some(other) => not_said.push(format!(
                "switch.balance mode {other}: NX-OS balances by hash or DLB"
            )),
        }
    }
    let mut out = String::new();
    header(&mut out, d, "!", &not_said);
    out.push_str(&body);
    out
}

/// A DSCP as six bits.
fn bits(d: u8) -> String {
    format!("{d:06b}")
}

fn junos(d: &Design) -> String {
    let classes = classes(d);
    let mut not_said = Vec::new();
    let mut w = String::new();
    let set = |w: &mut String, s: String| {
        let _ = writeln!(w, "set {s}");
    };
    set(&mut w, format!("system host-name {}", d.hostname));
    // One MTU for every class: Junos sets it per interface.
    let mtus: Vec<u32> = classes.iter().map(|c| d.qos.queues[c.queue].mtu).collect();
    let said =
        classes.iter().any(|c| c.given.contains_key("mtu")) || mtus.iter().any(|&m| m != 9216);
    if let Some(&m) = mtus.first().filter(|_| said) {
        if mtus.iter().any(|&x| x != m) {
            not_said.push(
                "an MTU per class: Junos sets one per interface (the smallest is written)".into(),
            );
        }
        let m = mtus.iter().copied().min().unwrap_or(m);
        set(&mut w, format!("interfaces et-* mtu {m}"));
    }
    let cos = "class-of-service";
    let by_dscp = classes.iter().any(|c| !c.dscp.is_empty());
    for c in &classes {
        if by_dscp && !c.dscp.is_empty() {
            let codes: Vec<String> = c.dscp.iter().map(|&x| bits(x)).collect();
            set(
                &mut w,
                format!(
                    "{cos} classifiers dscp fabricsim forwarding-class {} loss-priority low code-points [ {} ]",
                    c.name,
                    codes.join(" ")
                ),
            );
        } else if !by_dscp && !c.cos.is_empty() {
            let codes: Vec<String> = c.cos.iter().map(|&x| format!("{x:03b}")).collect();
            set(
                &mut w,
                format!(
                    "{cos} classifiers ieee-802.1 fabricsim forwarding-class {} loss-priority low code-points [ {} ]",
                    c.name,
                    codes.join(" ")
                ),
            );
        }
        if by_dscp && !c.cos.is_empty() {
            not_said.push(format!(
                "class {}'s CoS list beside DSCP classification",
                c.name
            ));
        }
    }
    let mut lossless_dscp = Vec::new();
    for c in &classes {
        let q = &d.qos.queues[c.queue];
        let mut fc = format!(
            "{cos} forwarding-classes class {} queue-num {}",
            c.name, c.queue
        );
        if q.lossless {
            fc.push_str(" no-loss");
            lossless_dscp.extend(c.dscp.iter().copied());
            if let Some(p) = q.pfc_priority {
                let _ = write!(fc, " pfc-priority {p}");
            }
            if !matches!(
                (q.xoff, q.xon, q.headroom),
                (Bytes::Auto, Bytes::Auto, Bytes::Auto)
            ) {
                not_said.push(format!(
                    "class {}'s xoff, xon and headroom (Junos sets them through shared-buffer partitions)",
                    c.name
                ));
            }
        }
        set(&mut w, fc);
        let s = format!("s-{}", c.name);
        if q.strict {
            set(&mut w, format!("{cos} schedulers {s} priority strict-high"));
        } else if q.percent > 0 || c.given.contains_key("bandwidth_percent") {
            set(
                &mut w,
                format!("{cos} schedulers {s} transmit-rate percent {}", q.percent),
            );
        }
        if let Some(bps) = q.shape_bps {
            set(&mut w, format!("{cos} schedulers {s} shaping-rate {bps}"));
        }
        if let Some(wr) = q.wred.as_ref() {
            let at = d.wred[c.queue];
            let given = c.given.get("wred").and_then(Value::as_table);
            let level = |key: &str, resolved: Option<u32>| -> u64 {
                match spelled(given.and_then(|g| g.get(key))) {
                    Some((n, "%")) => n,
                    _ => {
                        let b = u64::from(resolved.unwrap_or(0));
                        (b * 100 + d.queue_limit / 2) / d.queue_limit.max(1)
                    }
                }
            };
            let (lo, hi) = (
                level("min", at.map(|a| a.min)),
                level("max", at.map(|a| a.max)),
            );
            if !given.is_some_and(|g| {
                ["min", "max"]
                    .iter()
                    .all(|k| spelled(g.get(*k)).is_some_and(|s| s.1 == "%"))
            }) {
                not_said.push(format!(
                    "class {}'s WRED thresholds exactly: Junos gives fill levels in whole percent of the queue's limit ({} B), here {lo}% and {hi}%",
                    c.name, d.queue_limit
                ));
            }
            let p = wr
                .max_probability
                .or(at.map(|a| a.pmax_u32 as f64 / 4_294_967_296.0))
                .unwrap_or(0.0);
            let dp = format!("dp-{}", c.name);
            set(
                &mut w,
                format!(
                    "{cos} drop-profiles {dp} interpolate fill-level [ {lo} {hi} ] drop-probability [ 0 {} ]",
                    (p * 100.0).round() as u64
                ),
            );
            set(
                &mut w,
                format!("{cos} schedulers {s} drop-profile-map loss-priority any protocol any drop-profile {dp}"),
            );
            if q.ecn {
                set(
                    &mut w,
                    format!("{cos} schedulers {s} explicit-congestion-notification"),
                );
            }
        }
        set(
            &mut w,
            format!(
                "{cos} scheduler-maps fabricsim forwarding-class {} scheduler {s}",
                c.name
            ),
        );
    }
    if !lossless_dscp.is_empty() {
        for x in &lossless_dscp {
            set(
                &mut w,
                format!(
                    "{cos} congestion-notification-profile fabricsim input dscp code-point {} pfc",
                    bits(*x)
                ),
            );
        }
        set(
            &mut w,
            format!("{cos} interfaces et-* congestion-notification-profile fabricsim"),
        );
    }
    set(
        &mut w,
        format!("{cos} interfaces et-* scheduler-map fabricsim"),
    );
    set(
        &mut w,
        format!(
            "{cos} interfaces et-* classifiers {} fabricsim",
            if by_dscp { "dscp" } else { "ieee-802.1" }
        ),
    );
    let (parts, cannot) = partitions(d);
    not_said.extend(cannot);
    if !parts.is_empty() {
        set(&mut w, format!("{cos} shared-buffer ingress percent 100"));
        for (kind, n) in parts {
            set(
                &mut w,
                format!("{cos} shared-buffer ingress buffer-partition {kind} percent {n}"),
            );
        }
    }
    if d.qos.pfc.watchdog.is_some() {
        not_said.push("the PFC watchdog (not read from Junos either)".into());
    }
    if d.keys
        .get("switch")
        .and_then(|s| s.get("ecmp"))
        .and_then(|e| e.get("fields"))
        .is_some()
    {
        not_said.push("the hash fields (not read from Junos either)".into());
    }
    if let Some(b) = balance(d) {
        let mode = b.get("mode").and_then(Value::as_str);
        if matches!(mode, Some("dlb") | Some("glb")) {
            let how = match b
                .get("dlb_mode")
                .and_then(Value::as_str)
                .unwrap_or("flowlet")
            {
                "per-packet" => "per-packet".to_string(),
                "assigned-flow" => "assigned-flow".to_string(),
                _ => match micros(b.get("flowlet_timeout")) {
                    Some(us) => format!("flowlet inactivity-interval {us}"),
                    None => "flowlet".to_string(),
                },
            };
            set(
                &mut w,
                format!("forwarding-options enhanced-hash-key ecmp-dlb {how}"),
            );
        }
        match mode {
            Some("glb") => set(
                &mut w,
                "protocols bgp global-load-balancing load-balancer-only".into(),
            ),
            Some("dlb") | Some("ecmp") | None => {}
            Some(other) => not_said.push(format!(
                "switch.balance mode {other}: Junos balances by hash, DLB or GLB"
            )),
        }
    }
    let mut out = String::new();
    header(&mut out, d, "#", &not_said);
    out.push_str(&w);
    out
}
