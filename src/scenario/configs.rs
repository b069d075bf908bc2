//! `[switch] config`: switch configurations run as the switches would.
//!
//! A configuration applies to every switch (`config = "leaf.nxos"`), or,
//! as `[[switch.config]]` entries, to a tier or to switches by name
//! pattern. Read before the scenario is resolved, each gives keys:
//! QoS, PFC and hash keys hold for the whole fabric, so every
//! configuration must agree on them; balance keys may differ and then
//! become overrides of the switches a configuration applies to. Once the
//! fabric is built, each switch port gets an interface name (the ports
//! facing down first, then those facing up, from `Ethernet1/1`, or the
//! names an entry's `down` and `up` give), the PFC mode its interface
//! block sets (NX-OS's default is `auto`), and PFC as DCBX negotiates it
//! with the port at the other end: `off` is off, `on` is on, `auto` is on
//! unless the other end is off. A port without PFC takes its lossless
//! classes into the shared buffer like lossy ones, sends no pause and
//! ignores the pauses it gets: its link is lossy.

use std::collections::HashMap;
use toml::{Table, Value};

use super::error::{Finding, KeyError, KeyPath};
use super::raw::RawBalance;
use crate::config::nxos::{self, PfcMode};
use crate::config::Import;
use crate::topology::{Owner, PortId, SwitchId, Topology};

/// Which switches a configuration applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Select {
    Every,
    Tier(String),
    /// Switch names, `*` matching any run of characters.
    Names(Vec<String>),
}

/// One configuration as the scenario names it.
#[derive(Clone, Debug)]
pub struct Applied {
    /// The file as the messages name it.
    pub file: String,
    pub import: Import,
    pub select: Select,
    /// Interface names of the ports facing down and up, in port order.
    pub down: Option<Vec<String>>,
    pub up: Option<Vec<String>>,
    /// Balance keys of its own, when the configurations differ in them.
    pub balance: Option<Value>,
    /// The key it was given at (`switch.config` or `switch.config[i]`).
    pub key: KeyPath,
    /// The switches it applies to, once the fabric is built.
    pub switches: Vec<SwitchId>,
}

/// One switch port as its configuration sets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSetting {
    /// Index of its configuration in `SwitchConfigs::files`.
    pub config: usize,
    /// Its interface name.
    pub name: String,
    /// The PFC mode its interface block sets, and that line (0: none,
    /// NX-OS's default `auto`).
    pub mode: PfcMode,
    pub line: usize,
    /// PFC as negotiated with the other end.
    pub pfc: bool,
    /// The `dlb-interface` line naming it, if any.
    pub dlb: Option<usize>,
}

/// The configurations and what they set on each port.
#[derive(Clone, Debug, Default)]
pub struct SwitchConfigs {
    pub files: Vec<Applied>,
    /// By `PortId`: switch ports a configuration covers.
    pub ports: Vec<Option<PortSetting>>,
}

/// Lines not modelled that warnings name one by one.
const NOT_MODELLED_NAMED: usize = 3;

/// Why `read` refused: the message and the key it is about.
pub type ReadError = (String, KeyPath);

fn text(v: &Value) -> Option<&str> {
    v.as_str()
}

/// Takes `switch.config` out of the table, reads each file (relative to
/// `base`) and merges the keys they agree on into the table. A key the
/// scenario sets too is refused, naming the file.
pub fn read(
    table: &mut Table,
    base: &std::path::Path,
) -> Result<(Vec<Applied>, Vec<Finding>), ReadError> {
    let at = KeyPath::root().key("switch").key("config");
    let Some(Value::Table(switch)) = table.get_mut("switch") else {
        return Ok((Vec::new(), Vec::new()));
    };
    let entries: Vec<(KeyPath, Table)> = match switch.remove("config") {
        None => return Ok((Vec::new(), Vec::new())),
        Some(Value::String(n)) => {
            let mut t = Table::new();
            t.insert("file".into(), Value::String(n));
            vec![(at.clone(), t)]
        }
        Some(Value::Array(a)) if !a.is_empty() => {
            let mut out = Vec::new();
            for (i, v) in a.into_iter().enumerate() {
                match v {
                    Value::Table(t) => out.push((at.index(i), t)),
                    other => {
                        return Err((
                            format!(
                                "got {}, expected a table with file and tier, switches, down or up",
                                super::values::show(&other)
                            ),
                            at.index(i),
                        ))
                    }
                }
            }
            out
        }
        Some(other) => {
            return Err((
                format!(
                    "got {}, expected the file name of an NX-OS configuration, e.g. \"leaf.nxos\", or [[switch.config]] entries",
                    super::values::show(&other)
                ),
                at,
            ))
        }
    };
    let mut applied = Vec::new();
    for (key, mut t) in entries {
        let file = match t.remove("file") {
            Some(Value::String(f)) => f,
            None => {
                return Err((
                    "missing; expected the configuration's file name".into(),
                    key.key("file"),
                ))
            }
            Some(other) => {
                return Err((
                    format!("got {}, expected a file name", super::values::show(&other)),
                    key.key("file"),
                ))
            }
        };
        let mut select = Select::Every;
        if let Some(v) = t.remove("tier") {
            let tier = text(&v).ok_or_else(|| {
                (
                    format!(
                        "got {}, expected a tier name such as \"leaf\"",
                        super::values::show(&v)
                    ),
                    key.key("tier"),
                )
            })?;
            select = Select::Tier(tier.to_string());
        }
        if let Some(v) = t.remove("switches") {
            if select != Select::Every {
                return Err((
                    "give tier or switches, not both".into(),
                    key.key("switches"),
                ));
            }
            let names: Option<Vec<String>> = match &v {
                Value::String(s) => Some(vec![s.clone()]),
                Value::Array(a) if !a.is_empty() => {
                    a.iter().map(|x| text(x).map(String::from)).collect()
                }
                _ => None,
            };
            select = Select::Names(names.ok_or_else(|| {
                (
                    format!(
                        "got {}, expected switch names or patterns, e.g. [\"spine*\"]",
                        super::values::show(&v)
                    ),
                    key.key("switches"),
                )
            })?);
        }
        let mut names = |k: &str| -> Result<Option<Vec<String>>, ReadError> {
            match t.remove(k) {
                None => Ok(None),
                Some(Value::String(s)) => nxos::interface_list(&s)
                    .map(Some)
                    .map_err(|m| (m, key.key(k))),
                Some(other) => Err((
                    format!(
                        "got {}, expected interface names such as \"Ethernet1/1-16\"",
                        super::values::show(&other)
                    ),
                    key.key(k),
                )),
            }
        };
        let down = names("down")?;
        let up = names("up")?;
        if let Some(k) = t.keys().next() {
            return Err((
                "unknown key; a configuration entry takes file, tier, switches, down and up"
                    .to_string(),
                key.key(k),
            ));
        }
        let path = base.join(&file);
        let import =
            crate::config::import_file(&path).map_err(|e| (e.to_string(), key.key("file")))?;
        applied.push(Applied {
            file: path.display().to_string(),
            import,
            select,
            down,
            up,
            balance: None,
            key,
            switches: Vec::new(),
        });
    }
    // Keys for the whole fabric: every configuration must give the same.
    let mut fabric: Option<(usize, Table)> = None;
    let mut balances = Vec::new();
    for (i, a) in applied.iter().enumerate() {
        let mut keys = a.import.table();
        let balance = match keys.get_mut("switch").and_then(Value::as_table_mut) {
            Some(sw) => {
                let b = sw.remove("balance");
                if sw.is_empty() {
                    keys.remove("switch");
                }
                b
            }
            None => None,
        };
        balances.push(balance);
        match &fabric {
            None => fabric = Some((i, keys)),
            Some((first, theirs)) => {
                if let Some((k, va, vb)) = differs(theirs, &keys) {
                    // Which class, by name, when the key is a class's.
                    let class = k
                        .strip_prefix("qos.class[")
                        .and_then(|r| r.split(']').next())
                        .and_then(|i| i.parse::<usize>().ok())
                        .and_then(|i| theirs.get("qos")?.get("class")?.get(i))
                        .and_then(|c| c.get("name"))
                        .map_or(String::new(), |n| format!(" (class {n})"));
                    return Err((
                        format!(
                            "{} and {} differ in {k}{class}: {} and {}; fabricsim runs one QoS, PFC and hash policy across the fabric, so the configurations must agree on it (balancing may differ)",
                            applied[*first].file,
                            a.file,
                            said(&applied[*first], &k, va),
                            said(a, &k, vb)
                        ),
                        a.key.clone(),
                    ));
                }
            }
        }
    }
    if balances.iter().all(|b| *b == balances[0]) {
        if let (Some(b), Some((_, keys))) = (balances[0].clone(), fabric.as_mut()) {
            keys.entry("switch")
                .or_insert_with(|| Value::Table(Table::new()))
                .as_table_mut()
                .expect("a table")
                .insert("balance".into(), b);
        }
    } else {
        for (a, b) in applied.iter_mut().zip(balances) {
            a.balance = b;
        }
    }
    if let Some((i, keys)) = fabric {
        merge(table, keys, "", &applied[i].file).map_err(|m| (m, applied[i].key.clone()))?;
    }
    // Lines not modelled: each named when there are a few; a running
    // configuration has hundreds (routing, management), so then one
    // finding with the first of them and the command that lists all.
    let mut findings = Vec::new();
    for a in &applied {
        let lines = &a.import.not_modelled;
        let one = |(line, text): &(usize, String)| format!("line {line}: \"{text}\"");
        if lines.len() <= NOT_MODELLED_NAMED {
            findings.extend(lines.iter().map(|l| Finding {
                key: a.key.to_string(),
                message: format!(
                    "{} {} is not modelled (fabricsim config import lists what is)",
                    a.file,
                    one(l)
                ),
            }));
        } else {
            let first: Vec<String> = lines.iter().take(NOT_MODELLED_NAMED).map(one).collect();
            findings.push(Finding {
                key: a.key.to_string(),
                message: format!(
                    "{}: {} lines are not modelled: {}, and {} more (fabricsim config import {} lists them all)",
                    a.file,
                    lines.len(),
                    first.join(", "),
                    lines.len() - NOT_MODELLED_NAMED,
                    a.file
                ),
            });
        }
    }
    Ok((applied, findings))
}

/// The first key (dotted) whose value differs between two tables.
/// The first key two tables differ in: its path (`qos.class[0].mtu`)
/// and each side's value, if it has one.
fn differs<'a>(
    a: &'a Table,
    b: &'a Table,
) -> Option<(String, Option<&'a Value>, Option<&'a Value>)> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let k = keys.into_iter().find(|k| a.get(*k) != b.get(*k))?;
    Some(match (a.get(k), b.get(k)) {
        (Some(Value::Table(x)), Some(Value::Table(y))) => {
            let (sub, va, vb) = differs(x, y)?;
            (format!("{k}.{sub}"), va, vb)
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) if x.len() == y.len() => {
            let (i, sub) = x
                .iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, pair)| match pair {
                    (Value::Table(x), Value::Table(y)) => differs(x, y).map(|d| (i, Some(d))),
                    (x, y) if x != y => Some((i, None)),
                    _ => None,
                })?;
            match sub {
                Some((sub, va, vb)) => (format!("{k}[{i}].{sub}"), va, vb),
                None => (format!("{k}[{i}]"), x.get(i), y.get(i)),
            }
        }
        (va, vb) => (k.clone(), va, vb),
    })
}

/// A value as the messages show it, and the line a configuration set it
/// on (`qos.class[0].mtu` from its origins).
fn said(a: &Applied, path: &str, v: Option<&Value>) -> String {
    let line = a
        .import
        .origins()
        .into_iter()
        .find(|(k, _)| k.to_string() == path)
        .map(|(_, l)| l);
    match v {
        Some(v) => format!("{v} ({})", a.at(line)),
        None => format!("not set ({})", a.file),
    }
}

fn merge(into: &mut Table, from: Table, at: &str, file: &str) -> Result<(), String> {
    for (k, v) in from {
        let key = if at.is_empty() {
            k.clone()
        } else {
            format!("{at}.{k}")
        };
        match (into.get_mut(&k), v) {
            (None, v) => {
                into.insert(k, v);
            }
            (Some(Value::Table(mine)), Value::Table(theirs)) => merge(mine, theirs, &key, file)?,
            (Some(_), _) => {
                return Err(format!(
                    "{file} sets {key}, which the scenario sets too; give it in one place (the scenario or the configuration)"
                ))
            }
        }
    }
    Ok(())
}

/// Where a port sits on its switch: facing down (toward hosts) or up.
fn faces_down(topo: &Topology, p: PortId) -> bool {
    topo.links[topo.port(p).link.idx()].b == p
}

/// Interface names given as a range when they are consecutive.
fn span(names: &[String]) -> String {
    match names {
        [] => "none".into(),
        [one] => one.clone(),
        [first, .., last] => format!("{first} to {last}"),
    }
}

impl SwitchConfigs {
    /// Applies the configurations to the built fabric: which switches
    /// each covers, their balance overrides (into `balance`), each
    /// port's name, PFC mode and negotiated PFC. Interfaces that name no
    /// port become findings.
    pub fn resolve(
        mut files: Vec<Applied>,
        topo: &Topology,
        balance: &mut Option<RawBalance>,
    ) -> Result<(SwitchConfigs, Vec<Finding>), KeyError> {
        let tiers = topo.kind.tier_names();
        let mut owner: Vec<Option<usize>> = vec![None; topo.switches.len()];
        for (c, a) in files.iter_mut().enumerate() {
            let chosen: Vec<SwitchId> = match &a.select {
                Select::Every => (0..topo.switches.len() as u32).map(SwitchId).collect(),
                Select::Tier(t) => {
                    let Some(i) = tiers.iter().position(|n| n == t) else {
                        return Err(KeyError::new(
                            &a.key.key("tier"),
                            format!(
                                "got \"{t}\", expected a tier of this {} fabric: {}",
                                topo.kind.name(),
                                tiers.join(", ")
                            ),
                        ));
                    };
                    let ids: Vec<SwitchId> = (0..topo.switches.len() as u32)
                        .map(SwitchId)
                        .filter(|s| topo.switches[s.idx()].tier as usize == i)
                        .collect();
                    if ids.is_empty() {
                        return Err(KeyError::new(
                            &a.key.key("tier"),
                            format!("this fabric has no {t} switches"),
                        ));
                    }
                    ids
                }
                Select::Names(patterns) => {
                    let mut ids = Vec::new();
                    for (i, p) in patterns.iter().enumerate() {
                        let found: Vec<SwitchId> = (0..topo.switches.len() as u32)
                            .map(SwitchId)
                            .filter(|s| crate::config::glob(p, &topo.switches[s.idx()].name))
                            .collect();
                        if found.is_empty() {
                            return Err(KeyError::new(
                                &a.key.key("switches").index(i),
                                format!(
                                    "\"{p}\" names no switch; the switches are {}",
                                    span(
                                        &topo
                                            .switches
                                            .iter()
                                            .map(|s| s.name.clone())
                                            .collect::<Vec<_>>()
                                    )
                                ),
                            ));
                        }
                        ids.extend(found);
                    }
                    ids.sort();
                    ids.dedup();
                    ids
                }
            };
            for s in &chosen {
                if let Some(other) = owner[s.idx()] {
                    return Err(KeyError::new(
                        &a.key,
                        format!(
                            "{} is configured by entry {other} already; each switch takes one configuration",
                            topo.switches[s.idx()].name
                        ),
                    ));
                }
                owner[s.idx()] = Some(c);
            }
            a.switches = chosen;
        }
        // Balance overrides per switch, where the configurations differ.
        for a in &files {
            let Some(b) = &a.balance else { continue };
            let raw: RawBalance = b.clone().try_into().map_err(|e| {
                KeyError::new(
                    &a.key,
                    format!("{}: its balance keys do not read: {e}", a.file),
                )
            })?;
            let into = balance.get_or_insert_with(RawBalance::default);
            let per = into.switch.get_or_insert_with(Default::default);
            for s in &a.switches {
                let name = &topo.switches[s.idx()].name;
                if per.contains_key(name) {
                    return Err(KeyError::new(
                        &a.key,
                        format!(
                            "{} sets switch.balance for {name}, which [switch.balance.switch.{name}] sets too; give it in one place",
                            a.file
                        ),
                    ));
                }
                per.insert(name.clone(), raw.clone());
            }
        }
        // Each covered port: name, mode, DLB.
        let mut ports: Vec<Option<PortSetting>> = vec![None; topo.ports.len()];
        let mut findings = Vec::new();
        for (c, a) in files.iter().enumerate() {
            let mut used = vec![false; a.import.interfaces.len()];
            let mut dlb_used = vec![false; a.import.dlb_ports.len()];
            // Which interfaces name a port: exact names looked up, the
            // few with wildcards matched in turn (a file may name tens of
            // thousands, a fabric have as many ports).
            let mut exact: HashMap<&str, Vec<usize>> = HashMap::new();
            let mut wild: Vec<(usize, &str)> = Vec::new();
            for (j, i) in a.import.interfaces.iter().enumerate() {
                for n in &i.names {
                    if n.contains('*') {
                        wild.push((j, n));
                    } else {
                        exact.entry(n).or_default().push(j);
                    }
                }
            }
            let mut dlb_named: HashMap<&str, Vec<usize>> = HashMap::new();
            let mut dlb_wild: Vec<(usize, &str)> = Vec::new();
            for (j, (_, n)) in a.import.dlb_ports.iter().enumerate() {
                if n.contains('*') {
                    dlb_wild.push((j, n));
                } else {
                    dlb_named.entry(n).or_default().push(j);
                }
            }
            for s in &a.switches {
                let sw = &topo.switches[s.idx()];
                let (down, up): (Vec<PortId>, Vec<PortId>) =
                    sw.ports.iter().partition(|&&p| faces_down(topo, p));
                // NX-OS numbers ports from 1, Junos from 0.
                let junos = a.import.dialect == "Junos";
                let numbered = |from: usize, n: usize| -> Vec<String> {
                    (from..from + n)
                        .map(|i| {
                            if junos {
                                format!("et-0/0/{}", i - 1)
                            } else {
                                format!("Ethernet1/{i}")
                            }
                        })
                        .collect()
                };
                let down_names = a.down.clone().unwrap_or_else(|| numbered(1, down.len()));
                let up_names =
                    a.up.clone()
                        .unwrap_or_else(|| numbered(down.len() + 1, up.len()));
                for (k, ports_, names) in [("down", &down, &down_names), ("up", &up, &up_names)] {
                    if names.len() < ports_.len() {
                        return Err(KeyError::new(
                            &a.key.key(k),
                            format!(
                                "names {} interfaces; {} has {} ports facing {k}",
                                names.len(),
                                sw.name,
                                ports_.len()
                            ),
                        ));
                    }
                    for (&p, name) in ports_.iter().zip(names.iter()) {
                        let mut setting = PortSetting {
                            config: c,
                            name: name.clone(),
                            mode: a.import.default_pfc,
                            line: 0,
                            pfc: true,
                            dlb: None,
                        };
                        // The interfaces naming it, in file order: the
                        // last one's mode holds.
                        let mut naming: Vec<usize> =
                            exact.get(name.as_str()).cloned().unwrap_or_default();
                        naming.extend(
                            wild.iter()
                                .filter(|(_, n)| crate::config::glob(n, name))
                                .map(|&(j, _)| j),
                        );
                        naming.sort_unstable();
                        naming.dedup();
                        for j in naming {
                            used[j] = true;
                            if let Some((line, mode)) = a.import.interfaces[j].pfc {
                                setting.mode = mode;
                                setting.line = line;
                            }
                        }
                        let wild_dlb = dlb_wild
                            .iter()
                            .filter(|(_, n)| crate::config::glob(n, name))
                            .map(|&(j, _)| j);
                        for j in dlb_named
                            .get(name.as_str())
                            .into_iter()
                            .flatten()
                            .copied()
                            .chain(wild_dlb)
                        {
                            dlb_used[j] = true;
                            setting.dlb = Some(a.import.dlb_ports[j].0);
                        }
                        ports[p.idx()] = Some(setting);
                    }
                }
            }
            let Some(first) = a.switches.first() else {
                continue;
            };
            let sw = &topo.switches[first.idx()];
            let names = |down: bool| -> Vec<String> {
                let list: Vec<String> = sw
                    .ports
                    .iter()
                    .filter(|&&p| faces_down(topo, p) == down)
                    .filter_map(|p| ports[p.idx()].as_ref().map(|s| s.name.clone()))
                    .collect();
                list
            };
            let hint = format!(
                "{}'s ports facing down are {}, facing up {} (down and up in [[switch.config]] name them as cabled)",
                sw.name,
                span(&names(true)),
                span(&names(false))
            );
            for (j, i) in a.import.interfaces.iter().enumerate() {
                if !used[j] && i.pfc.is_some() {
                    findings.push(Finding {
                        key: a.key.to_string(),
                        message: format!(
                            "{} line {}: interface {} names no port of the switches it configures; {hint}",
                            a.file,
                            i.line,
                            span(&i.names)
                        ),
                    });
                }
            }
            let unused: Vec<&(usize, String)> = a
                .import
                .dlb_ports
                .iter()
                .zip(&dlb_used)
                .filter(|(_, &u)| !u)
                .map(|(d, _)| d)
                .collect();
            if let (Some(first), Some(last)) = (unused.first(), unused.last()) {
                let names: Vec<String> = unused.iter().map(|(_, n)| n.clone()).collect();
                findings.push(Finding {
                    key: a.key.to_string(),
                    message: format!(
                        "{} {}: dlb-interface {} names no port of the switches it configures; {hint}",
                        a.file,
                        if first.0 == last.0 {
                            format!("line {}", first.0)
                        } else {
                            format!("lines {}-{}", first.0, last.0)
                        },
                        span(&names)
                    ),
                });
            }
        }
        // DCBX: a port's PFC is on when its mode is on, or auto and the
        // other end does not have it off. NICs and ports no configuration
        // covers run PFC as the scenario's classes say (on).
        let mode = |p: PortId| ports[p.idx()].as_ref().map_or(PfcMode::On, |s| s.mode);
        let negotiated: Vec<bool> = (0..topo.ports.len())
            .map(|i| {
                let p = PortId(i as u32);
                match mode(p) {
                    PfcMode::Off => false,
                    PfcMode::On => true,
                    PfcMode::Auto => mode(topo.port(p).peer) != PfcMode::Off,
                }
            })
            .collect();
        for (i, s) in ports.iter_mut().enumerate() {
            if let Some(s) = s {
                s.pfc = negotiated[i];
            }
        }
        Ok((SwitchConfigs { files, ports }, findings))
    }

    /// Whether port `p` runs PFC (ports no configuration covers do).
    pub fn pfc_on(&self, p: PortId) -> bool {
        self.ports
            .get(p.idx())
            .and_then(|s| s.as_ref())
            .is_none_or(|s| s.pfc)
    }

    /// Ports whose PFC is off, with NICs facing one counted as on.
    pub fn pfc_off_ports(&self) -> impl Iterator<Item = PortId> + '_ {
        self.ports
            .iter()
            .enumerate()
            .filter(|(_, s)| s.as_ref().is_some_and(|s| !s.pfc))
            .map(|(i, _)| PortId(i as u32))
    }

    /// By port: whether a `dlb-interface` line names it.
    pub fn dlb_ports(&self) -> Vec<bool> {
        self.ports
            .iter()
            .map(|s| s.as_ref().is_some_and(|s| s.dlb.is_some()))
            .collect()
    }

    /// A port's name as its configuration gives it, or its owner's.
    pub fn port_name(&self, topo: &Topology, p: PortId) -> String {
        let owner = match topo.port(p).owner {
            Owner::Switch(s) => topo.switches[s.idx()].name.clone(),
            Owner::Nic(n) => topo.nics[n.idx()].name.clone(),
        };
        match self.ports.get(p.idx()).and_then(|s| s.as_ref()) {
            Some(s) => format!("{owner} {}", s.name),
            None => owner,
        }
    }
}

/// What `validate` says of the configurations: a line per check, and
/// the mismatches as findings naming the configuration lines.
#[derive(Clone, Debug, Default)]
pub struct Audit {
    pub lines: Vec<String>,
    pub findings: Vec<Finding>,
}

/// Most links the audit names one by one.
const MAX_LISTED: usize = 12;

/// The first line number a key's note gives ("line 26", "lines 25, 26").
fn note_line(note: &str) -> Option<usize> {
    let at = note.find("line")?;
    let digits: String = note[at..]
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

impl Applied {
    /// The line a class's key comes from (`name` is the class-map).
    fn class_line(&self, class: &str, key: &str) -> Option<usize> {
        self.import
            .sections
            .iter()
            .filter(|s| s.path == "qos.class")
            .find(|s| {
                s.keys
                    .iter()
                    .any(|k| k.name == "name" && k.value.as_str() == Some(class))
            })?
            .keys
            .iter()
            .find(|k| k.name == key)
            .and_then(|k| note_line(&k.note))
    }

    /// `file line N` or `file` when the line is unknown.
    fn at(&self, line: Option<usize>) -> String {
        match line {
            Some(l) if l > 0 => format!("{} line {l}", self.file),
            _ => self.file.clone(),
        }
    }
}

impl SwitchConfigs {
    /// Checks the configured fabric per link and class: lossless end to
    /// end (PFC on and negotiated at both ends; one priority and MTU hold
    /// fabric-wide), the NICs' DSCPs against the classes, the xON < WRED
    /// min < WRED max < xOFF order and the headroom at every port, and
    /// the DLB ports whose egress QoS the hardware skips.
    pub fn audit(
        &self,
        topo: &Topology,
        qos: &crate::switch::qos::QosConfig,
        transport: &crate::nic::TransportConfig,
        table: &crate::switch::qos::PfcTable,
        (buffer, alpha_256): (u64, Option<u64>),
    ) -> Audit {
        use crate::units::fmt_bytes;
        let mut out = Audit::default();
        let first = &self.files[0];
        let finding = |message: String| Finding {
            key: "switch.config".into(),
            message,
        };
        let lossless: Vec<usize> = (0..qos.queues.len())
            .filter(|&q| qos.queues[q].lossless)
            .collect();
        let class_names: Vec<String> = lossless
            .iter()
            .map(|&q| format!("\"{}\" (CoS {q})", qos.queues[q].name))
            .collect();
        // Lossless end to end, per link.
        let (mut covered, mut lossy) = (0usize, Vec::new());
        for l in &topo.links {
            if self.ports[l.a.idx()].is_none() && self.ports[l.b.idx()].is_none() {
                continue;
            }
            covered += 1;
            if !self.pfc_on(l.a) || !self.pfc_on(l.b) {
                lossy.push(*l);
            }
        }
        if lossless.is_empty() {
            out.lines
                .push("no lossless class: every link is lossy by design".into());
        } else {
            out.lines.push(format!(
                "lossless end to end: {} of {covered} configured links carry {} with PFC on both ends",
                covered - lossy.len(),
                class_names.join(", ")
            ));
        }
        let why = |p: PortId| -> String {
            let Some(s) = self.ports[p.idx()].as_ref() else {
                return format!("{} runs PFC", self.port_name(topo, p));
            };
            let a = &self.files[s.config];
            let name = self.port_name(topo, p);
            let junos = a.import.dialect == "Junos";
            // What the configuration says, in its own words.
            let said = match (s.mode, s.line, junos) {
                (_, 0, false) => {
                    format!("{}: no priority-flow-control line, NX-OS's default", a.file)
                }
                (_, 0, true) => format!("{}: no congestion-notification-profile covers it", a.file),
                (PfcMode::Off, _, false) => {
                    format!("{}: priority-flow-control mode off", a.at(Some(s.line)))
                }
                (PfcMode::On, _, false) => {
                    format!("{}: priority-flow-control mode on", a.at(Some(s.line)))
                }
                (PfcMode::Auto, _, false) => {
                    format!("{}: priority-flow-control mode auto", a.at(Some(s.line)))
                }
                (PfcMode::Off, _, true) => format!(
                    "{}: its congestion-notification-profile enables PFC on no lossless class",
                    a.at(Some(s.line))
                ),
                (PfcMode::On, _, true) => format!(
                    "{}: priority-flow-control no-auto-negotiation",
                    a.at(Some(s.line))
                ),
                (PfcMode::Auto, _, true) => format!(
                    "{}: a congestion-notification-profile, negotiated by DCBX",
                    a.at(Some(s.line))
                ),
            };
            match s.mode {
                PfcMode::Off => format!("{name} has PFC off ({said})"),
                PfcMode::On => format!("{name} forces PFC on ({said})"),
                PfcMode::Auto => format!(
                    "{name} is in auto mode ({said}) and {}",
                    if s.pfc {
                        "negotiates it"
                    } else {
                        "finds no PFC to negotiate"
                    }
                ),
            }
        };
        if !lossless.is_empty() {
            for l in lossy.iter().take(MAX_LISTED) {
                out.findings.push(finding(format!(
                    "link {} to {} is lossy for {}: {}; {}",
                    self.port_name(topo, l.a),
                    self.port_name(topo, l.b),
                    class_names.join(", "),
                    why(l.a),
                    why(l.b)
                )));
            }
            if lossy.len() > MAX_LISTED {
                out.findings.push(finding(format!(
                    "and {} more lossy links, for the same reasons",
                    lossy.len() - MAX_LISTED
                )));
            }
            // Go-back-N: a tail loss has no later packet to reveal it.
            if !lossy.is_empty() && transport.mrc.is_none() {
                out.findings.push(finding(format!(
                    "what a lossy link costs: its drops are resent (go-back-N), and a transfer whose last packets are dropped learns of it only when its QP times out (transport.rto = {})",
                    transport.rto
                )));
            }
        }
        // MTU: the NICs' frames against their class's MTU.
        let dq = qos.map.queue_of(transport.data_dscp) as usize;
        let frame = qos
            .framing
            .frame_bytes(crate::wire::frame::Opcode::WriteFirst, transport.mtu);
        let data = &qos.queues[dq];
        out.lines.push(format!(
            "MTU: class \"{}\" carries frames up to {} B ({}); the NICs' largest is {frame} B",
            data.name,
            data.mtu,
            first.at(first.class_line(&data.name, "mtu"))
        ));
        // DSCP: data and CNPs land in the classes meant for them.
        let cq = qos.map.queue_of(transport.cnp_dscp) as usize;
        let cnp = &qos.queues[cq];
        let tagged = qos.framing.vlan_tag;
        let cos = |dscp: u8| {
            if tagged {
                format!("priority {}", qos.map.pcp_of(dscp))
            } else {
                "untagged: CoS 0".to_string()
            }
        };
        out.lines.push(format!(
            "DSCP: the NICs send data with DSCP {} ({}) into class \"{}\" (queue {dq}, {}; {}) and CNPs with DSCP {} ({}) into class \"{}\" (queue {cq}, {}; {})",
            transport.data_dscp,
            cos(transport.data_dscp),
            data.name,
            if data.lossless { "lossless" } else { "lossy" },
            first.at(first.class_line(&data.name, "name")),
            transport.cnp_dscp,
            cos(transport.cnp_dscp),
            cnp.name,
            if cnp.strict { "strict priority" } else { "shared by weight" },
            first.at(first.class_line(&cnp.name, "name")),
        ));
        if !lossless.is_empty() && !data.lossless {
            out.findings.push(finding(format!(
                "the NICs' data (transport.dscp = {}) lands in class \"{}\", which is lossy ({}); the lossless class is {}",
                transport.data_dscp,
                data.name,
                first.at(first.class_line(&data.name, "name")),
                class_names.join(", ")
            )));
        }
        if !tagged {
            // A class that matches CoS sees every frame as CoS 0.
            for q in &qos.queues {
                if let Some(line) = first.class_line(&q.name, "cos") {
                    out.findings.push(finding(format!(
                        "class \"{}\" matches by CoS ({}: match cos), but the NICs send untagged frames, which a switch takes as CoS 0; set qos.vlan_tagging = true if the hosts tag",
                        q.name,
                        first.at(Some(line))
                    )));
                }
            }
        }
        // PFC priorities: the one a lossless class's pauses name against
        // the one the NICs give its data.
        if data.lossless {
            let named = data.pfc_priority.unwrap_or(dq as u8);
            let given = qos.map.pcp_of(transport.data_dscp);
            let line = first
                .class_line(&data.name, "pfc_priority")
                .or(first.class_line(&data.name, "lossless"));
            out.lines.push(format!(
                "PFC priority: \"{}\" pauses priority {named} ({}); the NICs give its data priority {given}",
                data.name,
                first.at(line)
            ));
            if named != given {
                out.findings.push(finding(format!(
                    "class \"{}\" pauses priority {named} ({}), but the NICs give its data (DSCP {}) priority {given}: they do not stop for its pauses, and the switches drop what their headroom cannot hold; the run does the same",
                    data.name,
                    first.at(line),
                    transport.data_dscp
                )));
            }
        }
        if !cnp.strict && cq == dq {
            out.findings.push(finding(format!(
                "CNPs (transport.cnp_dscp = {}) share class \"{}\" with the data they slow down ({}): they wait behind it",
                transport.cnp_dscp,
                cnp.name,
                first.at(first.class_line(&cnp.name, "name"))
            )));
        }
        // Thresholds and headroom at every switch port.
        for &q in &lossless {
            let qc = &qos.queues[q];
            let (mut order_bad, mut room_bad, mut ports) = (0usize, 0usize, 0usize);
            let mut example = None;
            let (mut over, mut over_example) = (0usize, None);
            let room = super::lossless::queue_room(buffer, alpha_256, true);
            for (i, port) in topo.ports.iter().enumerate() {
                let p = PortId(i as u32);
                if !matches!(port.owner, Owner::Switch(_)) || !self.pfc_on(p) {
                    continue;
                }
                ports += 1;
                let Some(pfc) = table.get(p, q) else { continue };
                if let Some(w) = table.wred_at(port.rate, q) {
                    if !(pfc.xon < w.min && w.min < w.max && w.max < pfc.xoff) {
                        order_bad += 1;
                        example.get_or_insert(format!(
                            "xON {} < WRED min {} < WRED max {} < xOFF {} fails at {} ({}, {})",
                            fmt_bytes(pfc.xon as u64),
                            fmt_bytes(w.min as u64),
                            fmt_bytes(w.max as u64),
                            fmt_bytes(pfc.xoff as u64),
                            self.port_name(topo, p),
                            port.rate,
                            first.at(first.class_line(&qc.name, "wred"))
                        ));
                    }
                }
                if pfc.headroom < pfc.headroom_needed {
                    room_bad += 1;
                }
                // Thresholds the buffer cannot reach never act.
                let wred_max = table.wred_at(port.rate, q).map_or(0, |w| w.max as u64);
                if wred_max > room || pfc.xoff as u64 > buffer {
                    over += 1;
                    over_example.get_or_insert_with(|| {
                        let (what, value, line) = if wred_max > room {
                            ("WRED max", wred_max, first.class_line(&qc.name, "wred"))
                        } else {
                            ("xOFF", pfc.xoff as u64, first.class_line(&qc.name, "xoff"))
                        };
                        format!(
                            "{what} {} of \"{}\" is above the {} switch buffer at {} ({}): the buffer fills before it acts",
                            fmt_bytes(value),
                            qc.name,
                            fmt_bytes(buffer),
                            self.port_name(topo, p),
                            first.at(line)
                        )
                    });
                }
            }
            out.lines.push(format!(
                "thresholds of \"{}\": xON < WRED min < WRED max < xOFF holds at {} of {ports} ports with PFC ({}); WRED max and xOFF fit the {} buffer at {} of them; headroom covers the cable's round trip at {} of them",
                qc.name,
                ports - order_bad,
                first.at(first.class_line(&qc.name, "wred")),
                fmt_bytes(buffer),
                ports - over,
                ports - room_bad
            ));
            if let Some(e) = over_example {
                out.findings
                    .push(finding(format!("{e}, and at {over} ports in all")));
            }
            if let Some(e) = example {
                out.findings
                    .push(finding(format!("{e}, and at {} ports in all", order_bad)));
            }
            if room_bad > 0 {
                out.findings.push(finding(format!(
                    "class \"{}\": {room_bad} ports have less headroom than their link can have in flight once they pause (validate's thresholds list them by kind)",
                    qc.name
                )));
            }
        }
        // DLB ports: the hardware applies no egress QoS to DLB flows.
        let dlb: Vec<PortId> = (0..topo.ports.len() as u32)
            .map(PortId)
            .filter(|p| {
                self.ports[p.idx()]
                    .as_ref()
                    .is_some_and(|s| s.dlb.is_some())
            })
            .collect();
        if dlb.is_empty() {
            out.lines.push(
                "DLB: no port skips egress QoS for DLB flows (no dlb-interface names one)".into(),
            );
        } else {
            let s = self.ports[dlb[0].idx()].as_ref().expect("a DLB port");
            let a = &self.files[s.config];
            let wred: Vec<String> = qos
                .queues
                .iter()
                .filter(|q| q.wred.is_some() && q.ecn)
                .map(|q| format!("\"{}\"", q.name))
                .collect();
            out.findings.push(finding(format!(
                "DLB on {} ports ({} and more; {}): the hardware applies no egress QoS to DLB flows, so their queuing policy's WRED{} does not act there; the run does the same",
                dlb.len(),
                self.port_name(topo, dlb[0]),
                a.at(s.dlb),
                if wred.is_empty() {
                    String::new()
                } else {
                    format!(" (ECN marking of {})", wred.join(", "))
                }
            )));
        }
        out
    }
}

#[cfg(test)]
mod tests {

    use crate::config::glob;

    #[test]
    fn patterns_match_runs_of_characters() {
        assert!(glob("spine*", "spine12"));
        assert!(glob("*", "leaf0"));
        assert!(glob("pod*-leaf1", "pod3-leaf1"));
        assert!(!glob("pod*-leaf1", "pod3-leaf10"));
        assert!(!glob("spine", "spine0"));
        assert!(glob("leaf0", "leaf0"));
        assert!(glob("et-0/0/*", "et-0/0/17"));
    }
}
