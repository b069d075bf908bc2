//! Switch configurations as engineers write them, read into scenario
//! keys (`fabricsim config import`, `[switch] config`).
//!
//! NX-OS (`nxos`) is read by its grammar into commands; this module then
//! follows the configuration's own references, as the switch does:
//! interfaces' (or `system qos`'s) classification policy sets each class
//! map's DSCPs a qos-group, the queue; `system qos`'s queuing policy
//! gives each queue strict priority or its share of what is left, WRED
//! with or without ECN and a shaper; its network-qos policy gives each
//! queue its MTU and PFC. The global PFC watchdog, `hardware profile
//! dlb` and the hash fields complete it. Every key carries the lines it
//! came from; lines the simulator has nothing for are listed as not
//! modelled, never dropped in silence.

pub mod junos;
pub mod nxos;

use nxos::{Block, Cmd, Hash, Kind, Parsed, PfcMode, Wred};
use std::collections::BTreeMap;
use std::fmt::Write;
use toml::{Table, Value};

/// Largest configuration file read.
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// A configuration could not be read: the file, the line (0: the file
/// as a whole) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: line {}: {}", self.file, self.line, self.message)
        }
    }
}

/// A key the configuration sets: its section (`qos.class` repeated per
/// class), name, value and the lines it comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    pub name: &'static str,
    pub value: Value,
    pub note: String,
}

/// A section of keys: `[pfc]`, or one `[[qos.class]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    pub path: &'static str,
    pub repeated: bool,
    pub keys: Vec<Key>,
}

/// An interface's own settings, which a scenario does not set per port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub line: usize,
    pub names: Vec<String>,
    pub pfc: Option<(usize, PfcMode)>,
    pub watchdog: Option<(usize, bool)>,
    pub classification: Option<(usize, String)>,
}

/// What a configuration maps to.
#[derive(Clone, Debug, PartialEq)]
pub struct Import {
    pub file: String,
    pub dialect: &'static str,
    pub hostname: Option<String>,
    pub sections: Vec<Section>,
    pub interfaces: Vec<Interface>,
    /// PFC mode of a port no interface setting covers (NX-OS: auto;
    /// Junos: off, as PFC needs a congestion notification profile).
    pub default_pfc: PfcMode,
    /// Interfaces `dlb-interface` names, each with its line.
    pub dlb_ports: Vec<(usize, String)>,
    /// Choices the mapping made that the keys do not show, by line.
    pub notes: Vec<(usize, String)>,
    /// Lines with nothing to map to: number and text.
    pub not_modelled: Vec<(usize, String)>,
}

/// Reads the configuration at `path`: Junos when its name ends in
/// `.junos` or `.conf`, or its text is `set` lines or braces; NX-OS
/// otherwise.
pub fn import_file(path: &std::path::Path) -> Result<Import, ConfigError> {
    let file = path.display().to_string();
    let text = crate::input::read_text(path, MAX_CONFIG_BYTES, "switch configuration").map_err(
        |message| ConfigError {
            file: file.clone(),
            line: 0,
            message,
        },
    )?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if ext.eq_ignore_ascii_case("junos")
        || ext.eq_ignore_ascii_case("conf")
        || looks_like_junos(&text)
    {
        junos::import(&file, &text)
    } else {
        import_nxos(&file, &text)
    }
}

/// Whether text is Junos rather than NX-OS, by the weight of evidence,
/// so that no single line decides: a Junos line is a `set` of a Junos
/// hierarchy (`set class-of-service ...`, `set interfaces ...`) or a
/// statement in braces; an NX-OS line starts with one of its commands
/// (its own `set qos-group`, `set dscp` and `set cos` among them).
fn looks_like_junos(text: &str) -> bool {
    const JUNOS: &[&str] = &[
        "class-of-service",
        "interfaces",
        "system",
        "protocols",
        "chassis",
        "groups",
        "apply-groups",
        "policy-options",
        "firewall",
        "routing-options",
        "forwarding-options",
        "routing-instances",
        "snmp",
        "vlans",
        "security",
        "services",
        "version",
    ];
    const NXOS: &[&str] = &[
        "class-map",
        "policy-map",
        "class",
        "match",
        "system",
        "interface",
        "hostname",
        "priority-flow-control",
        "hardware",
        "feature",
        "service-policy",
        "bandwidth",
        "priority",
        "random-detect",
        "pause",
        "mtu",
        "queue-limit",
        "port-channel",
        "dlb-interface",
        "ip",
        "vlan",
        "spanning-tree",
        "description",
        "switchport",
        "no",
        "exit",
        "end",
    ];
    let (mut junos, mut nxos) = (0usize, 0usize);
    for l in text.lines() {
        let t = l.trim();
        if t.is_empty() || t.starts_with('!') || t.starts_with('#') {
            continue;
        }
        let mut words = t.split_whitespace();
        let first = words.next().unwrap_or("");
        if t.ends_with('{') || t == "}" || t == "};" {
            junos += 1;
        } else if first == "set" {
            match words.next() {
                Some(w) if JUNOS.contains(&w) => junos += 1,
                Some("qos-group" | "dscp" | "cos" | "precedence") => nxos += 1,
                _ => {}
            }
        } else if NXOS.contains(&first) {
            nxos += 1;
        }
    }
    junos > nxos
}

/// `*` matches any run of characters, the rest itself (switch names,
/// Junos interface wildcards such as `et-0/0/*`). Linear in the name's
/// length per piece of the pattern: the pieces between stars are found
/// leftmost in turn, which is enough when a star is the only wildcard.
pub fn glob(pattern: &str, name: &str) -> bool {
    let mut pieces = pattern.split('*');
    let head = pieces.next().unwrap_or_default();
    let Some(rest) = name.strip_prefix(head) else {
        return false;
    };
    let mut middle: Vec<&str> = pieces.collect();
    let Some(tail) = middle.pop() else {
        // No star: the whole name.
        return rest.is_empty();
    };
    let Some(mut rest) = rest.strip_suffix(tail) else {
        return false;
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

/// A `class-map type qos`: the DSCPs and CoS values its `match` lines
/// give (`None` where it has no such line).
#[derive(Default)]
struct ClassMap {
    line: usize,
    all: bool,
    dscp: Option<Vec<u8>>,
    cos: Option<Vec<u8>>,
    cos_lines: Vec<usize>,
}

impl ClassMap {
    /// One more `match` line: match-any adds to what the class takes,
    /// match-all keeps what every line of that kind matches.
    fn add(list: &mut Option<Vec<u8>>, all: bool, values: Vec<u8>) {
        match list {
            None => *list = Some(values),
            Some(l) if all => l.retain(|v| values.contains(v)),
            Some(l) => l.extend(
                values
                    .into_iter()
                    .filter(|v| !l.contains(v))
                    .collect::<Vec<_>>(),
            ),
        }
    }
}

#[derive(Default)]
struct PolicyClass {
    line: usize,
    name: String,
    cmds: Vec<(usize, Cmd)>,
}

/// A policy map's classes (its kind and name key `policy_at`).
struct Policy {
    classes: Vec<PolicyClass>,
}

/// One queue's settings, gathered from the three policies.
#[derive(Default)]
struct Queue {
    name: Option<(usize, String)>,
    dscp: Vec<u8>,
    cos: Vec<u8>,
    cos_lines: Vec<usize>,
    /// DSCP and CoS must both match (a match-all class-map with both),
    /// and the class-map's line.
    all: Option<usize>,
    catch_all: bool,
    strict: Option<usize>,
    percent: Option<(usize, u8)>,
    wred: Option<(usize, Wred)>,
    shape: Option<(usize, u64)>,
    mtu: Option<(usize, u32)>,
    pfc: Option<usize>,
    /// The priority the queue's pauses name, where it is not the queue's
    /// number, and its line.
    pfc_priority: Option<(usize, u8)>,
    /// An ingress queuing policy's `pause buffer-size`: its line, the
    /// no-drop buffer, xOFF and xON, as written.
    pause: Option<(usize, [(u64, nxos::Unit); 3])>,
}

/// A file none of whose lines is a command the reader knows is not a
/// switch configuration (a scenario given by mistake, say): an error, not
/// an empty import.
fn no_configuration(
    file: &str,
    dialect: &str,
    read: usize,
    lines: usize,
) -> Result<(), ConfigError> {
    if read > 0 {
        return Ok(());
    }
    Err(err(
        file,
        0,
        format!(
            "holds no {dialect} configuration: none of its {lines} lines or statements is a command fabricsim reads (class and policy maps, system qos, interfaces, PFC, DLB; or Junos class-of-service); is it a switch configuration?"
        ),
    ))
}

/// A rate in bits per second as a scenario gives it, exactly: in the
/// largest unit it is a whole number of.
fn exact_rate(bps: u64) -> String {
    match bps {
        b if b % 1_000_000_000 == 0 => format!("{}G", b / 1_000_000_000),
        b if b % 1_000_000 == 0 => format!("{}M", b / 1_000_000),
        b if b % 1_000 == 0 => format!("{}K", b / 1_000),
        b => format!("{b}bps"),
    }
}

fn err(file: &str, line: usize, message: impl Into<String>) -> ConfigError {
    ConfigError {
        file: file.to_string(),
        line,
        message: message.into(),
    }
}

/// The queue a queuing or network-qos class names (`c-out-8q-q3`,
/// `c-8q-nq3`, `...-default` for queue 0).
fn queue_of(class: &str, prefixes: &[&str]) -> Option<u8> {
    let lower = class.to_ascii_lowercase();
    prefixes.iter().find_map(|p| {
        let rest = lower.strip_prefix(p)?;
        if rest == "-default" {
            return Some(0);
        }
        rest.parse::<u8>().ok().filter(|&q| q < 8)
    })
}

/// Reads NX-OS text; `file` names it in messages.
pub fn import_nxos(file: &str, text: &str) -> Result<Import, ConfigError> {
    let lines = nxos::read(text).map_err(|(line, m)| err(file, line, m))?;
    let mut hostname = None;
    let mut class_maps: BTreeMap<String, ClassMap> = BTreeMap::new();
    let mut policies: Vec<Policy> = Vec::new();
    // Each policy map's place among `policies`, and its line.
    let mut policy_at: std::collections::HashMap<(Kind, String), (usize, usize)> =
        Default::default();
    // Interface names given so far, and ports dlb-interface names.
    let mut named = 0;
    let mut system: Vec<(usize, Kind, bool, String)> = Vec::new();
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut watchdog_on: Option<(usize, bool)> = None;
    let (mut wd_interval, mut wd_shutdown, mut wd_restore) = (None, None, None);
    let mut dlb: Option<usize> = None;
    let (mut dlb_mode, mut dlb_aging, mut dlb_ports) = (None, None, Vec::new());
    let mut hash: Option<(usize, Hash)> = None;
    let mut notes = Vec::new();
    let mut not_modelled = Vec::new();
    let mut class_map: Option<String> = None;
    // User-defined queuing and network-qos class maps: the qos-groups
    // (queues) each matches, by kind and name.
    let mut system_maps: BTreeMap<(Kind, String), (usize, Vec<u8>)> = BTreeMap::new();
    let mut system_map: Option<(Kind, String)> = None;
    // Input queuing policies applied on interfaces: line and name.
    let mut interface_input: Vec<(usize, String)> = Vec::new();
    let mut read = 0usize;
    for (no, block, parsed, line) in lines {
        let cmd = match parsed {
            Parsed::NotModelled => {
                not_modelled.push((no, line));
                continue;
            }
            Parsed::Cmd(c) => c,
        };
        read += 1;
        match (block, cmd) {
            (_, Cmd::Hostname(h)) => hostname = Some(h),
            (_, Cmd::ClassMap { kind, all, name }) => {
                class_map = None;
                system_map = None;
                if kind != Kind::Qos {
                    // A queuing or network-qos class map of the user's:
                    // it names queues by the qos-groups it matches.
                    if let Some((old, _)) = system_maps.get(&(kind, name.clone())) {
                        return Err(err(
                            file,
                            no,
                            format!(
                                "class-map type {} {name} is defined again (first at line {old})",
                                kind.name()
                            ),
                        ));
                    }
                    system_maps.insert((kind, name.clone()), (no, Vec::new()));
                    system_map = Some((kind, name));
                    continue;
                }
                if let Some(old) = class_maps.get(&name) {
                    return Err(err(
                        file,
                        no,
                        format!(
                            "class-map {name} is defined again (first at line {})",
                            old.line
                        ),
                    ));
                }
                class_maps.insert(
                    name.clone(),
                    ClassMap {
                        line: no,
                        all,
                        ..Default::default()
                    },
                );
                class_map = Some(name);
            }
            (Block::ClassMap, Cmd::MatchQosGroup(g)) => match &system_map {
                Some(key) => {
                    if let Some(m) = system_maps.get_mut(key) {
                        m.1.extend(g);
                    }
                }
                None => not_modelled.push((no, line)),
            },
            (Block::ClassMap, Cmd::MatchDscp(_) | Cmd::MatchCos(_)) if system_map.is_some() => {
                return Err(err(
                    file,
                    no,
                    "a queuing or network-qos class-map matches qos-groups (match qos-group N); DSCP and CoS are matched by a class-map type qos".to_string(),
                ))
            }
            (Block::ClassMap, Cmd::MatchDscp(d)) => {
                if let Some(cm) = class_map.as_ref().and_then(|n| class_maps.get_mut(n)) {
                    ClassMap::add(&mut cm.dscp, cm.all, d);
                }
            }
            (Block::ClassMap, Cmd::MatchCos(c)) => {
                if let Some(cm) = class_map.as_ref().and_then(|n| class_maps.get_mut(n)) {
                    ClassMap::add(&mut cm.cos, cm.all, c);
                    cm.cos_lines.push(no);
                    notes.push((
                        no,
                        "match cos: the 802.1p priority of a tagged frame (qos.vlan_tagging = true; the NICs stamp qos.nic_priority); an untagged frame is CoS 0".into(),
                    ));
                }
            }
            (_, Cmd::PolicyMap { kind, name }) => {
                if let Some((_, old)) = policy_at.get(&(kind, name.clone())) {
                    return Err(err(
                        file,
                        no,
                        format!(
                            "policy-map type {} {name} is defined again (first at line {old})",
                            kind.name(),
                        ),
                    ));
                }
                policy_at.insert((kind, name.clone()), (policies.len(), no));
                policies.push(Policy {
                    classes: Vec::new(),
                });
            }
            (Block::PolicyMap(_), Cmd::Class { name, .. }) => {
                if let Some(p) = policies.last_mut() {
                    p.classes.push(PolicyClass {
                        line: no,
                        name,
                        cmds: Vec::new(),
                    });
                }
            }
            (Block::PolicyClass(_), c) => {
                if let Some(pc) = policies.last_mut().and_then(|p| p.classes.last_mut()) {
                    pc.cmds.push((no, c));
                }
            }
            (_, Cmd::SystemQos) => {}
            (Block::SystemQos, Cmd::ServicePolicy { kind, output, name }) => {
                if let Some((first, ..)) = system.iter().find(|s| s.1 == kind && s.2 == output) {
                    return Err(err(
                        file,
                        no,
                        format!(
                            "a second {} service-policy type {} in system qos (the first at line {first}); a switch applies one of each",
                            if output { "output" } else { "input" },
                            kind.name()
                        ),
                    ));
                }
                system.push((no, kind, output, name));
            }
            (_, Cmd::Interface(names)) if named + names.len() > nxos::MAX_FILE_INTERFACES => {
                return Err(err(
                    file,
                    no,
                    format!(
                        "the interface lines name more than {} interfaces in all; a configuration of one switch names far fewer",
                        nxos::MAX_FILE_INTERFACES
                    ),
                ))
            }
            (_, Cmd::Interface(names)) => interfaces.push(Interface {
                line: no,
                names: {
                    named += names.len();
                    names
                },
                pfc: None,
                watchdog: None,
                classification: None,
            }),
            (Block::Interface, c) => {
                let Some(i) = interfaces.last_mut() else {
                    continue;
                };
                match c {
                    Cmd::PfcMode(m) => i.pfc = Some((no, m)),
                    Cmd::PfcWatchdog(on) => i.watchdog = Some((no, on)),
                    Cmd::Description => {
                        notes.push((no, "a description: no effect on a simulation".into()))
                    }
                    Cmd::ServicePolicy {
                        kind: Kind::Qos,
                        output: false,
                        name,
                    } => i.classification = Some((no, name)),
                    Cmd::ServicePolicy {
                        kind: Kind::Queuing,
                        output: false,
                        name,
                    } => interface_input.push((no, name)),
                    _ => not_modelled.push((no, line)),
                }
            }
            (_, Cmd::HardwareProfileDlb) => dlb = Some(no),
            (Block::Dlb, Cmd::DlbInterface(n)) => {
                if dlb_ports.len() + n.len() > nxos::MAX_FILE_INTERFACES {
                    return Err(err(
                        file,
                        no,
                        format!(
                            "dlb-interface names more than {} interfaces in all",
                            nxos::MAX_FILE_INTERFACES
                        ),
                    ));
                }
                dlb_ports.extend(n.into_iter().map(|n| (no, n)))
            }
            (Block::Dlb, Cmd::DlbAll) => dlb_ports.push((no, "*".to_string())),
            (Block::Dlb, Cmd::DlbMode(m, policy)) => {
                if policy {
                    notes.push((
                        no,
                        format!("policy-driven {m}: the switch balances the traffic its qos policy selects this way and the rest by flowlet; fabricsim does not read that selection and balances all of it {m} (to select, give [[switch.balance.select]] rules by traffic_class)"),
                    ));
                }
                dlb_mode = Some((no, m))
            }
            (Block::Dlb, Cmd::FlowletAging(us)) => dlb_aging = Some((no, us)),
            (Block::Dlb, Cmd::DlbMac(_)) => notes.push((
                no,
                "the DLB MAC is a virtual next hop; it changes nothing a simulation measures"
                    .to_string(),
            )),
            (_, Cmd::WatchdogEnable(on)) => watchdog_on = Some((no, on)),
            (_, Cmd::WatchdogInterval(ms)) => wd_interval = Some((no, ms)),
            (_, Cmd::WatchdogShutdown(m)) => wd_shutdown = Some((no, m)),
            (_, Cmd::WatchdogRestore(m)) => wd_restore = Some((no, m)),
            (_, Cmd::LoadBalance(h)) => {
                if let Some((first, old)) = &hash {
                    if *old != h {
                        return Err(err(
                            file,
                            no,
                            format!(
                                "hashes on other fields than line {first}; the simulator hashes ECMP and port channels alike, so give one set of fields"
                            ),
                        ));
                    }
                }
                hash = Some((no, h));
            }
            (_, _) => not_modelled.push((no, line)),
        }
    }

    no_configuration(file, "NX-OS", read, read + not_modelled.len())?;
    // The classification policy: every port's must be the same one.
    let mut uses: Vec<(usize, String)> = interfaces
        .iter()
        .filter_map(|i| i.classification.clone())
        .collect();
    uses.extend(
        system
            .iter()
            .filter(|s| s.1 == Kind::Qos)
            .map(|s| (s.0, s.3.clone())),
    );
    if let Some((first, name)) = uses.first() {
        if let Some((line, other)) = uses.iter().find(|(_, n)| n != name) {
            return Err(err(
                file,
                *line,
                format!(
                    "classifies with policy-map {other}, but line {first} with {name}; the simulator classifies every port alike"
                ),
            ));
        }
    }
    let find = |kind: Kind, name: &str, line: usize| {
        policy_at
            .get(&(kind, name.to_string()))
            .map(|&(i, _)| &policies[i])
            .ok_or_else(|| {
                err(
                    file,
                    line,
                    format!(
                        "names policy-map type {} {name}, which the configuration does not define",
                        kind.name()
                    ),
                )
            })
    };
    let system_policy = |kind: Kind, output: bool| {
        system
            .iter()
            .find(|s| s.1 == kind && s.2 == output)
            .map(|s| (s.0, s.3.clone()))
    };
    let mut queues: [Queue; 8] = Default::default();
    match uses.first() {
        None => notes.push((
            0,
            "no classification policy (service-policy type qos input) is applied: every packet is in qos-group 0, one class"
                .into(),
        )),
        Some((line, name)) => {
            let policy = find(Kind::Qos, name, *line)?;
            for pc in &policy.classes {
                let group = pc
                    .cmds
                    .iter()
                    .find_map(|(no, c)| match c {
                        Cmd::SetQosGroup(g) => Some((*no, *g)),
                        _ => None,
                    });
                let (gline, group) = match group {
                    Some(g) => g,
                    None => {
                        notes.push((
                            pc.line,
                            format!("class {} sets no qos-group: qos-group 0", pc.name),
                        ));
                        (pc.line, 0)
                    }
                };
                let q = &mut queues[group as usize];
                if q.name.is_none() {
                    q.name = Some((pc.line, pc.name.clone()));
                }
                let _ = gline;
                if pc.name.eq_ignore_ascii_case("class-default") {
                    q.catch_all = true;
                    continue;
                }
                let cm = class_maps.get(&pc.name).ok_or_else(|| {
                    err(
                        file,
                        pc.line,
                        format!(
                            "class {} is not a class-map type qos of the configuration",
                            pc.name
                        ),
                    )
                })?;
                let (dscp, cos) = (
                    cm.dscp.clone().unwrap_or_default(),
                    cm.cos.clone().unwrap_or_default(),
                );
                if dscp.is_empty() && cos.is_empty() {
                    notes.push((
                        cm.line,
                        format!(
                            "class-map {} matches no DSCP and no CoS: it takes no traffic",
                            pc.name
                        ),
                    ));
                    continue;
                }
                // Both kinds in a match-all class-map: one rule that
                // needs both, which a queue cannot share.
                let both = cm.all && cm.dscp.is_some() && cm.cos.is_some();
                let q = &queues[group as usize];
                let shared = !q.dscp.is_empty() || !q.cos.is_empty();
                if shared && (both || q.all.is_some()) {
                    return Err(err(
                        file,
                        pc.line,
                        format!(
                            "class {} sets qos-group {group} as another class does, and one of them is a match-all class-map with both DSCP and CoS (line {}); the simulator gives a qos-group one rule: give it one class-map",
                            pc.name,
                            q.all.unwrap_or(cm.line)
                        ),
                    ));
                }
                if both {
                    let q = &mut queues[group as usize];
                    q.all = Some(cm.line);
                    q.dscp = dscp;
                    q.cos = cos;
                    q.cos_lines.clone_from(&cm.cos_lines);
                    continue;
                }
                for d in dscp {
                    if let Some(other) = queues
                        .iter()
                        .position(|o| o.all.is_none() && o.dscp.contains(&d))
                    {
                        notes.push((
                            cm.line,
                            format!("DSCP {d} is already classified to qos-group {other}; the first match wins"),
                        ));
                        continue;
                    }
                    queues[group as usize].dscp.push(d);
                }
                let q = &mut queues[group as usize];
                q.cos_lines.extend(&cm.cos_lines);
                for c in cos {
                    if !q.cos.contains(&c) {
                        q.cos.push(c);
                    }
                }
            }
        }
    }
    if !uses.is_empty() && !queues.iter().any(|q| q.catch_all) {
        // What no class matches is class-default's, qos-group 0, even
        // when the policy does not list it.
        let q = &mut queues[0];
        q.catch_all = true;
        if q.name.is_none() {
            q.name = Some((0, "class-default".into()));
        }
    }
    // The queues a queuing or network-qos class names: the switch's own
    // (`c-out-8q-q3`) or a class map of the user's (`match qos-group`).
    let queues_of = |kind: Kind, pc: &PolicyClass, prefixes: &[&str], example: &str| {
        if let Some(q) = queue_of(&pc.name, prefixes) {
            return Ok(vec![q]);
        }
        match system_maps.get(&(kind, pc.name.clone())) {
            Some((_, groups)) if !groups.is_empty() => Ok(groups.clone()),
            Some((l, _)) => Err(err(
                file,
                pc.line,
                format!(
                    "class {} (class-map at line {l}) matches no qos-group: give it match qos-group N",
                    pc.name
                ),
            )),
            None => Err(err(
                file,
                pc.line,
                format!(
                    "expected a {} class such as {example}, or a class-map type {} of the configuration, got {}",
                    kind.name(),
                    kind.name(),
                    pc.name
                ),
            )),
        }
    };
    if let Some((line, name)) = system_policy(Kind::Queuing, true) {
        let policy = find(Kind::Queuing, &name, line)?;
        for pc in &policy.classes {
            for q in queues_of(
                Kind::Queuing,
                pc,
                &["c-out-8q-q", "c-out-q"],
                "c-out-8q-q3 or c-out-8q-q-default",
            )? {
                let queue = &mut queues[q as usize];
                for (no, c) in &pc.cmds {
                    match c {
                        Cmd::Priority(level) => {
                            if *level > 1 {
                                notes.push((
                                    *no,
                                    format!(
                                        "priority level {level}: the simulator has one strict level"
                                    ),
                                ));
                            }
                            queue.strict = Some(*no);
                        }
                        Cmd::BandwidthRemaining(p) => queue.percent = Some((*no, *p)),
                        Cmd::Bandwidth(p) => {
                            notes.push((
                                *no,
                                "bandwidth percent is read as a share of what strict priority leaves (bandwidth remaining percent)".into(),
                            ));
                            queue.percent = Some((*no, *p));
                        }
                        Cmd::RandomDetect(w) => {
                            if w.min.is_none() {
                                notes.push((
                                    *no,
                                    format!(
                                        "random-detect {}: the switch's own thresholds, which Cisco does not publish; the simulation marks from the DCQCN preset's (qos.class wred min, max and max_probability left out); give them in the scenario to pin them",
                                        w.preset.map_or("ecn".to_string(), |p| format!("threshold {p}"))
                                    ),
                                ));
                            } else if w.probability.is_none() {
                                notes.push((
                                    *no,
                                    "random-detect without drop-probability: read as 0% (nothing marked between the thresholds, everything above the maximum); give drop-probability to mark between them".into(),
                                ));
                            }
                            queue.wred = Some((*no, *w));
                        }
                        Cmd::Shape(bps) => queue.shape = Some((*no, *bps)),
                        Cmd::PauseBuffer { .. } => notes.push((
                            *no,
                            "pause buffer-size in an output queuing policy: the switch reads it in an input one; not used".into(),
                        )),
                        _ => {}
                    }
                }
            }
        }
    }
    // The ingress queuing policy: per no-drop queue, the buffer, xOFF and
    // xON (`pause buffer-size`), from system qos or, the same one, on
    // interfaces.
    let input = match (system_policy(Kind::Queuing, false), interface_input.first()) {
        (Some(s), _) => {
            if let Some((l, _)) = interface_input.first() {
                notes.push((*l, "an interface's input queuing policy: the simulator gives every port system qos's".into()));
            }
            Some(s)
        }
        (None, Some((first, name))) => {
            if let Some((l, other)) = interface_input.iter().find(|(_, n)| n != name) {
                return Err(err(
                    file,
                    *l,
                    format!("applies input queuing policy {other}, but line {first} {name}; the simulator gives every port the same pause thresholds"),
                ));
            }
            Some((*first, name.clone()))
        }
        (None, None) => None,
    };
    if let Some((line, name)) = input {
        let policy = find(Kind::Queuing, &name, line)?;
        for pc in &policy.classes {
            for q in queues_of(
                Kind::Queuing,
                pc,
                &["c-in-8q-q", "c-in-q"],
                "c-in-q3 or c-in-q-default",
            )? {
                for (no, c) in &pc.cmds {
                    match c {
                        Cmd::PauseBuffer { size, xoff, xon } => {
                            queues[q as usize].pause = Some((*no, [*size, *xoff, *xon]))
                        }
                        _ => notes.push((
                            *no,
                            "in an input queuing policy the simulator reads pause buffer-size only; scheduling is the output policy's".into(),
                        )),
                    }
                }
            }
        }
    }
    if let Some((line, name)) = system_policy(Kind::NetworkQos, false) {
        let policy = find(Kind::NetworkQos, &name, line)?;
        for pc in &policy.classes {
            for q in queues_of(
                Kind::NetworkQos,
                pc,
                &["c-8q-nq", "c-nq"],
                "c-8q-nq3 or c-8q-nq-default",
            )? {
                let queue = &mut queues[q as usize];
                for (no, c) in &pc.cmds {
                    match c {
                        Cmd::Mtu(m) => queue.mtu = Some((*no, *m)),
                        Cmd::PausePfcCos(cos) => {
                            // The priority its pauses name: where it is
                            // not the queue's, the NICs' traffic of the
                            // class may not stop (simulated, and audited).
                            let named = if cos.contains(&q) { q } else { cos[0] };
                            if cos.len() > 1 {
                                notes.push((
                                    *no,
                                    format!("pause pfc-cos {cos:?}: the simulator pauses a queue by one priority, here {named}"),
                                ));
                            }
                            if named != q {
                                queue.pfc_priority = Some((*no, named));
                            }
                            queue.pfc = Some(*no);
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    if uses.is_empty() {
        queues[0].catch_all = true;
        queues[0].name = Some((0, "default".into()));
    }
    let (mut sections, lossless) =
        class_sections(file, &mut queues, "its qos-group", true, &mut notes)?;
    let mut pfc = Section {
        path: "pfc",
        repeated: false,
        keys: vec![Key {
            name: "enabled",
            value: Value::Boolean(lossless.is_some()),
            note: lossless.map_or("no pause pfc-cos".into(), |l| line_note(&[l])),
        }],
    };
    let off: Vec<&Interface> = interfaces
        .iter()
        .filter(|i| matches!(i.pfc, Some((_, PfcMode::Off))))
        .collect();
    if !off.is_empty() {
        notes.push((
            off[0].pfc.map_or(0, |p| p.0),
            format!(
                "priority-flow-control mode off on {}: PFC is off there and on the port at the other end, so those links are lossy",
                off.iter().flat_map(|i| i.names.clone()).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    sections.push(pfc.clone());
    pfc.keys.clear();
    if let Some((l, true)) = watchdog_on {
        // NX-OS's defaults: a 100 ms interval, shut down after one
        // interval, restored after ten.
        let interval = wd_interval.map_or(100, |w| w.1);
        let shutdown = wd_shutdown.map_or(1, |w| w.1);
        let restore = wd_restore.map_or(10, |w| w.1);
        let lines: Vec<usize> = [Some(l), wd_interval.map(|w| w.0), wd_shutdown.map(|w| w.0)]
            .into_iter()
            .flatten()
            .collect();
        sections.push(Section {
            path: "pfc.watchdog",
            repeated: false,
            keys: vec![
                Key {
                    name: "interval",
                    value: Value::String(format!("{}ms", interval * shutdown)),
                    note: format!(
                        "{} ms x shutdown-multiplier {shutdown}; {}",
                        interval,
                        line_note(&lines)
                    ),
                },
                Key {
                    name: "action",
                    value: Value::String("drop".into()),
                    note: "a stuck no-drop queue drops".into(),
                },
                Key {
                    name: "recovery",
                    value: Value::String(format!("{}ms", (interval * restore).max(1))),
                    note: format!(
                        "auto-restore multiplier {restore} x {interval} ms{}",
                        wd_restore.map_or(String::new(), |w| format!("; {}", line_note(&[w.0])))
                    ),
                },
            ],
        });
    }
    if let Some(l) = dlb {
        let (ml, mode) = dlb_mode.unwrap_or((l, "flowlet"));
        let mut keys = vec![
            Key {
                name: "mode",
                value: Value::String("dlb".into()),
                note: line_note(&[l]),
            },
            Key {
                name: "dlb_mode",
                value: Value::String(mode.into()),
                note: line_note(&[ml]),
            },
        ];
        if let Some((al, us)) = dlb_aging {
            keys.push(Key {
                name: "flowlet_timeout",
                value: Value::String(format!("{us}us")),
                note: line_note(&[al]),
            });
        }
        if !dlb_ports.is_empty() {
            notes.push((
                l,
                format!(
                    "DLB on {} (dlb-interface): the simulator balances every equal-cost group of the switch with it",
                    dlb_ports.iter().map(|(_, n)| if n == "*" { "every interface" } else { n.as_str() }).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        notes.push((
            l,
            "with DLB on, the switch applies no egress QoS to DLB flows: the simulation runs no WRED (no ECN marking) and no shaper on the dlb-interface ports, and still schedules them by class".into(),
        ));
        sections.push(Section {
            path: "switch.balance",
            repeated: false,
            keys,
        });
    }
    if let Some((l, h)) = hash {
        if h.mac {
            notes.push((
                l,
                "hashing on MAC addresses: the simulator hashes IP fields; read as the 5-tuple"
                    .into(),
            ));
        }
        let mut fields = Vec::new();
        if h.src_ip || h.mac {
            fields.push("src_ip");
        }
        if h.dst_ip || h.mac {
            fields.push("dst_ip");
        }
        if h.ports || h.mac {
            fields.extend(["protocol", "udp_sport", "udp_dport"]);
        }
        if h.vlan {
            fields.push("vlan");
        }
        let mut keys = vec![Key {
            name: "fields",
            value: Value::Array(
                fields
                    .iter()
                    .map(|f| Value::String(f.to_string()))
                    .collect(),
            ),
            note: line_note(&[l]),
        }];
        if h.symmetric {
            keys.push(Key {
                name: "symmetric",
                value: Value::Boolean(true),
                note: line_note(&[l]),
            });
        }
        sections.push(Section {
            path: "switch.ecmp",
            repeated: false,
            keys,
        });
    }
    notes.sort_by_key(|n| n.0);
    Ok(Import {
        file: file.to_string(),
        dialect: "NX-OS",
        hostname,
        sections,
        interfaces,
        default_pfc: PfcMode::Auto,
        dlb_ports,
        notes,
        not_modelled,
    })
}

/// The classes, one `[[qos.class]]` per queue traffic is classified to,
/// from the queues' settings as a configuration gave them; and the line
/// that made the first class lossless. With `policy_order`, the classes
/// come in the order of their names' lines (a frame takes the first
/// class that matches it, as in an NX-OS policy), the catch-all last;
/// otherwise by queue.
fn class_sections(
    file: &str,
    queues: &mut [Queue; 8],
    queue_note: &str,
    policy_order: bool,
    notes: &mut Vec<(usize, String)>,
) -> Result<(Vec<Section>, Option<usize>), ConfigError> {
    // Shares of one port cannot add up to more than all of it: refused
    // here, at the configuration's line, not later under a scenario key
    // the user never wrote.
    let shares: Vec<(usize, u8)> = queues
        .iter()
        .filter(|q| q.strict.is_none())
        .filter_map(|q| q.percent)
        .collect();
    let total: u32 = shares.iter().map(|&(_, p)| u32::from(p)).sum();
    if total > 100 {
        let last = shares.iter().map(|&(l, _)| l).max().unwrap_or(0);
        return Err(err(
            file,
            last,
            format!(
                "the classes' bandwidth shares add up to {total}%, more than the whole port (100%)"
            ),
        ));
    }
    // Every share 0: weight 0 is served only when no weighted queue has
    // frames, so with no weighted queue at all they split the port equally
    // -- said, as the configuration cannot have meant that.
    let mut named_shares: Vec<(usize, u8)> = queues
        .iter()
        .filter(|q| q.name.is_some() && q.strict.is_none())
        .filter_map(|q| q.percent)
        .collect();
    named_shares.sort_unstable();
    if named_shares.len() > 1 && named_shares.iter().all(|&(_, p)| p == 0) {
        notes.push((
            named_shares[0].0,
            format!(
                "every class's bandwidth share is 0% (lines {}): the simulator then splits what strict priority leaves equally among them; give the shares the classes should have",
                named_shares.iter().map(|(l, _)| l.to_string()).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    let mut sections = Vec::new();
    let mut lossless = None;
    let mut order: Vec<usize> = (0..queues.len()).collect();
    if policy_order {
        order.sort_by_key(|&q| (queues[q].catch_all, queues[q].name.as_ref().map(|n| n.0)));
    }
    for q in order {
        let queue = &queues[q];
        let Some((name_line, name)) = &queue.name else {
            for (what, line) in [
                ("a share", queue.percent.filter(|p| p.1 > 0).map(|p| p.0)),
                ("strict priority", queue.strict),
                ("PFC", queue.pfc),
            ] {
                if let Some(l) = line {
                    notes.push((
                        l,
                        format!("queue {q} has {what} but no class is classified to it"),
                    ));
                }
            }
            continue;
        };
        let mut keys = vec![Key {
            name: "name",
            value: Value::String(name.clone()),
            note: line_note(&[*name_line]),
        }];
        let list =
            |v: &[u8]| Value::Array(v.iter().map(|&d| Value::Integer(i64::from(d))).collect());
        if !queue.catch_all {
            // A class that matches by CoS alone lists no DSCP (an empty
            // list would still not be the catch-all, but says less).
            if !queue.dscp.is_empty() || queue.cos.is_empty() {
                keys.push(Key {
                    name: "dscp",
                    value: list(&queue.dscp),
                    note: String::new(),
                });
            }
            if !queue.cos.is_empty() {
                keys.push(Key {
                    name: "cos",
                    value: list(&queue.cos),
                    note: line_note(&queue.cos_lines),
                });
            }
            if let Some(l) = queue.all {
                keys.push(Key {
                    name: "match",
                    value: Value::String("all".into()),
                    note: line_note(&[l]),
                });
            }
        }
        keys.push(Key {
            name: "queue",
            value: Value::Integer(q as i64),
            note: queue_note.into(),
        });
        if let Some(l) = queue.strict {
            keys.push(Key {
                name: "strict",
                value: Value::Boolean(true),
                note: line_note(&[l]),
            });
            if let Some((pl, _)) = queue.percent {
                notes.push((pl, format!("queue {q} is strict; its share is not used")));
            }
        } else if let Some((l, p)) = queue.percent {
            keys.push(Key {
                name: "bandwidth_percent",
                value: Value::Integer(i64::from(p)),
                note: line_note(&[l]),
            });
        }
        keys.push(Key {
            name: "lossless",
            value: Value::Boolean(queue.pfc.is_some()),
            note: queue.pfc.map_or(String::new(), |l| line_note(&[l])),
        });
        if queue.pfc.is_some() && lossless.is_none() {
            lossless = queue.pfc;
        }
        if let (Some((l, p)), Some(_)) = (queue.pfc_priority, queue.pfc) {
            keys.push(Key {
                name: "pfc_priority",
                value: Value::Integer(i64::from(p)),
                note: line_note(&[l]),
            });
        }
        match queue.wred {
            Some((l, w)) => {
                keys.push(Key {
                    name: "ecn",
                    value: Value::Boolean(w.ecn),
                    note: line_note(&[l]),
                });
                // What the line leaves out follows the DCQCN preset.
                let mut t = Table::new();
                if let (Some(min), Some(max)) = (w.min, w.max) {
                    if min.1.bytes(min.0) > max.1.bytes(max.0) {
                        return Err(err(
                            file,
                            l,
                            "the minimum threshold is above the maximum".to_string(),
                        ));
                    }
                    t.insert("min".into(), Value::String(min.1.show(min.0)));
                    t.insert("max".into(), Value::String(max.1.show(max.0)));
                    t.insert(
                        "max_probability".into(),
                        Value::Float(f64::from(w.probability.unwrap_or(0)) / 100.0),
                    );
                }
                if w.min.is_some() {
                    t.insert("weight".into(), Value::Integer(i64::from(w.weight)));
                }
                keys.push(Key {
                    name: "wred",
                    value: Value::Table(t),
                    note: line_note(&[l]),
                });
            }
            None => {
                keys.push(Key {
                    name: "ecn",
                    value: Value::Boolean(false),
                    note: "no random-detect".into(),
                });
                keys.push(Key {
                    name: "wred",
                    value: Value::String("off".into()),
                    note: "no random-detect".into(),
                });
            }
        }
        if let Some((l, m)) = queue.mtu {
            keys.push(Key {
                name: "mtu",
                value: Value::Integer(i64::from(m)),
                note: line_note(&[l]),
            });
        }
        if let Some((l, [size, xoff, xon])) = queue.pause {
            let bytes = |(n, u): (u64, nxos::Unit)| u.bytes(n);
            for (name, value) in [
                ("xoff", xoff.1.show(xoff.0)),
                ("xon", xon.1.show(xon.0)),
                ("headroom", format!("{}B", bytes(size) - bytes(xoff))),
            ] {
                keys.push(Key {
                    name,
                    value: Value::String(value),
                    note: line_note(&[l]),
                });
            }
            if queue.pfc.is_none() {
                notes.push((l, format!("queue {q} has pause thresholds but no pause pfc-cos: it is not lossless, so they are not used")));
            }
        }
        if let Some((l, bps)) = queue.shape {
            keys.push(Key {
                name: "shape",
                value: Value::String(exact_rate(bps)),
                note: line_note(&[l]),
            });
        }
        sections.push(Section {
            path: "qos.class",
            repeated: true,
            keys,
        });
    }
    Ok((sections, lossless))
}

/// Text from the file made safe in a comment: no control characters
/// (which TOML does not allow there).
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

/// The first line a key's note (`line_note`) names.
fn first_line(note: &str) -> Option<usize> {
    let at = note.find("line")?;
    let rest = note[at..]
        .trim_start_matches("lines")
        .trim_start_matches("line");
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn line_note(lines: &[usize]) -> String {
    let lines: Vec<String> = lines
        .iter()
        .filter(|&&l| l > 0)
        .map(|l| l.to_string())
        .collect();
    match lines.len() {
        0 => String::new(),
        1 => format!("line {}", lines[0]),
        _ => format!("lines {}", lines.join(", ")),
    }
}

impl Import {
    /// Where the keys came from: each key's place in the scenario
    /// (`qos.class[1].wred`) and the first line of the file that gives it.
    pub fn origins(&self) -> Vec<(crate::keys::KeyPath, usize)> {
        let mut out = Vec::new();
        let mut seen: std::collections::HashMap<&str, usize> = Default::default();
        for s in &self.sections {
            let mut at = crate::keys::KeyPath::root();
            for part in s.path.split('.') {
                at = at.key(part);
            }
            if s.repeated {
                let n = seen.entry(s.path).or_insert(0);
                at = at.index(*n);
                *n += 1;
            }
            for k in &s.keys {
                if let Some(line) = first_line(&k.note) {
                    out.push((at.key(k.name), line));
                }
            }
        }
        out
    }

    /// The keys as a scenario table.
    pub fn table(&self) -> Table {
        let mut root = Table::new();
        for s in &self.sections {
            let mut t = Table::new();
            for k in &s.keys {
                t.insert(k.name.to_string(), k.value.clone());
            }
            let mut at = &mut root;
            let parts: Vec<&str> = s.path.split('.').collect();
            for p in &parts[..parts.len() - 1] {
                at = at
                    .entry(p.to_string())
                    .or_insert_with(|| Value::Table(Table::new()))
                    .as_table_mut()
                    .expect("sections nest in tables");
            }
            let last = parts[parts.len() - 1].to_string();
            if s.repeated {
                if let Value::Array(a) = at.entry(last).or_insert_with(|| Value::Array(Vec::new()))
                {
                    a.push(Value::Table(t));
                }
            } else {
                let into = at.entry(last).or_insert_with(|| Value::Table(Table::new()));
                if let Value::Table(into) = into {
                    into.extend(t);
                }
            }
        }
        root
    }

    /// The keys as scenario text, each with the lines it came from, then
    /// the interfaces' settings, the notes and the lines not modelled,
    /// as comments.
    pub fn to_toml(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# {}: {} configuration{}, as scenario keys",
            clean(&self.file),
            self.dialect,
            self.hostname
                .as_ref()
                .map_or(String::new(), |h| format!(" of {}", clean(h)))
        );
        for s in &self.sections {
            if s.keys.is_empty() {
                continue;
            }
            let _ = writeln!(
                o,
                "\n{}{}{}",
                if s.repeated { "[[" } else { "[" },
                s.path,
                if s.repeated { "]]" } else { "]" }
            );
            for k in &s.keys {
                let value = k.value.to_string();
                if k.note.is_empty() {
                    let _ = writeln!(o, "{} = {value}", k.name);
                } else {
                    let _ = writeln!(o, "{} = {value}  # {}", k.name, clean(&k.note));
                }
            }
        }
        if !self.interfaces.is_empty() {
            let _ = writeln!(o, "\n# Interfaces (set per port on the switch):");
            for i in &self.interfaces {
                let mut what = Vec::new();
                if let Some((l, m)) = i.pfc {
                    what.push(format!(
                        "PFC mode {} (line {l})",
                        match m {
                            PfcMode::On => "on",
                            PfcMode::Off => "off",
                            PfcMode::Auto => "auto (negotiated by DCBX)",
                        }
                    ));
                }
                if let Some((l, on)) = i.watchdog {
                    what.push(format!(
                        "PFC watchdog {} (line {l})",
                        if on { "on" } else { "off" }
                    ));
                }
                if let Some((l, p)) = &i.classification {
                    what.push(format!("classified by {p} (line {l})"));
                }
                if what.is_empty() {
                    what.push("nothing the simulator reads".into());
                }
                let _ = writeln!(
                    o,
                    "#   {} (line {}): {}",
                    clean(&i.names.join(", ")),
                    i.line,
                    clean(&what.join("; "))
                );
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(o, "\n# Notes:");
            for (l, n) in &self.notes {
                let n = clean(n);
                if *l == 0 {
                    let _ = writeln!(o, "#   {n}");
                } else {
                    let _ = writeln!(o, "#   line {l}: {n}");
                }
            }
        }
        if !self.not_modelled.is_empty() {
            let _ = writeln!(
                o,
                "\n# Not modelled ({} lines; --strict refuses them):",
                self.not_modelled.len()
            );
            for (l, t) in &self.not_modelled {
                let _ = writeln!(o, "#   line {l}: {}", clean(t));
            }
        }
        o
    }

    /// The lines not modelled, as one error (for `--strict`).
    pub fn strict(&self) -> Result<(), ConfigError> {
        match self.not_modelled.first() {
            None => Ok(()),
            Some(&(line, ref text)) => Err(err(
                &self.file,
                line,
                format!(
                    "\"{text}\" is not modelled ({} such lines: {}); without --strict they are listed and left out",
                    self.not_modelled.len(),
                    self.not_modelled
                        .iter()
                        .map(|(l, _)| l.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }
}

#[cfg(test)]
mod glob_tests {
    use super::glob;

    /// Stars before a piece that is not there: every way of splitting the
    /// name was tried once (exponential); now each piece is found once.
    /// (`tests/fuzz_harness.rs` checks random patterns against the
    /// definition, `fuzz::glob_input`.)
    #[test]
    fn many_stars_cost_one_search_per_piece() {
        let p = format!("{}Z", "*".repeat(22));
        let s = "pod7-agg3-with-a-long-name-".repeat(40);
        assert!(!glob(&p, &s));
        assert!(glob(&p, &format!("{s}Z")));
        assert!(glob("et-0/0/*", "et-0/0/17") && !glob("et-0/0/*", "et-0/1/17"));
        assert!(glob("a*b*c", "aXbYc") && !glob("a*b*c", "aXcYb"));
        assert!(!glob("ab*ba", "aba") && glob("ab*ba", "abba"));
    }
}
