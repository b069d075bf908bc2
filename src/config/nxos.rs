//! NX-OS (Cisco Nexus 9000) configuration text: the grammar of the
//! commands a lossless RoCEv2 fabric is configured with, and the blocks
//! they form.
//!
//! A configuration is lines; a line indented under another belongs to
//! its block (`class-map`, `policy-map`, a policy's `class`, `system
//! qos`, `interface`, `hardware profile dlb`), and a line at the margin
//! to the innermost open block whose grammar reads it, else to the top
//! (`read`: flat text, `exit` and `end`, as the switch's modes). Each
//! line is parsed by the grammar of the block it is in. A line whose first words name no
//! command of that block is kept as "not modelled" with its number; a
//! line that starts a known command and then goes wrong is an error
//! naming the line and what was expected there.

use winnow::ascii::{digit1, space0, space1, Caseless};
use winnow::combinator::{alt, cut_err, eof, opt, preceded, separated, terminated};
use winnow::error::{ContextError, ErrMode, StrContext, StrContextValue};
use winnow::prelude::*;
use winnow::token::{literal, take_till, take_while};

/// The three kinds of class and policy maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Qos,
    Queuing,
    NetworkQos,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Qos => "qos",
            Kind::Queuing => "queuing",
            Kind::NetworkQos => "network-qos",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PfcMode {
    On,
    Off,
    Auto,
}

/// WRED as `random-detect` gives it: thresholds in bytes, the marking
/// (or drop) probability at the maximum in percent, the averaging weight
/// and whether it marks ECN instead of dropping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wred {
    /// The thresholds, if the line gives them (`random-detect ecn` and
    /// `random-detect threshold burst-optimized` leave them to the
    /// switch).
    pub min: Option<(u64, Unit)>,
    pub max: Option<(u64, Unit)>,
    /// The switch's predefined threshold set the line names
    /// (`burst-optimized`, `mesh-optimized`).
    pub preset: Option<&'static str>,
    /// The marking probability at the maximum, percent, if given.
    pub probability: Option<u8>,
    pub weight: u8,
    pub ecn: bool,
}

/// A size as written: the number and its unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Kbytes,
    Mbytes,
    /// Percent of the most a queue may hold (Junos fill levels).
    Percent,
}

impl Unit {
    pub fn bytes(self, n: u64) -> u64 {
        match self {
            Unit::Bytes => n,
            Unit::Kbytes => n.saturating_mul(1000),
            Unit::Mbytes => n.saturating_mul(1_000_000),
            Unit::Percent => n,
        }
    }

    /// The scenario's spelling of `n` of this unit.
    pub fn show(self, n: u64) -> String {
        match self {
            Unit::Bytes => format!("{n}B"),
            Unit::Kbytes => format!("{n}KB"),
            Unit::Mbytes => format!("{n}MB"),
            Unit::Percent => format!("{n}%"),
        }
    }
}

/// The fields a `port-channel load-balance` or `ip load-sharing` line
/// hashes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hash {
    pub src_ip: bool,
    pub dst_ip: bool,
    pub ports: bool,
    pub vlan: bool,
    pub symmetric: bool,
    pub mac: bool,
}

/// One command, as the grammar read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cmd {
    // Top level.
    Hostname(String),
    /// `class-map type KIND [match-any|match-all] NAME`; `all` is
    /// match-all, NX-OS's default.
    ClassMap {
        kind: Kind,
        all: bool,
        name: String,
    },
    PolicyMap {
        kind: Kind,
        name: String,
    },
    SystemQos,
    Interface(Vec<String>),
    HardwareProfileDlb,
    /// `priority-flow-control watch-dog-interval on|off`.
    WatchdogEnable(bool),
    /// `priority-flow-control watch-dog interval N` (ms).
    WatchdogInterval(u32),
    /// `priority-flow-control watch-dog shutdown-multiplier N`.
    WatchdogShutdown(u32),
    /// `priority-flow-control auto-restore multiplier N`.
    WatchdogRestore(u32),
    LoadBalance(Hash),
    // In a class-map.
    MatchDscp(Vec<u8>),
    MatchCos(Vec<u8>),
    // In a policy-map.
    Class {
        kind: Option<Kind>,
        name: String,
    },
    // In a policy's class.
    SetQosGroup(u8),
    BandwidthRemaining(u8),
    Bandwidth(u8),
    Priority(u8),
    RandomDetect(Wred),
    /// `shape min X max Y`: the most, bits per second.
    Shape(u64),
    Mtu(u32),
    PausePfcCos(Vec<u8>),
    /// `pause buffer-size B pause-threshold X resume-threshold Y` in an
    /// ingress queuing class: the no-drop buffer, xOFF and xON.
    PauseBuffer {
        size: (u64, Unit),
        xoff: (u64, Unit),
        xon: (u64, Unit),
    },
    /// `match qos-group N` in a queuing or network-qos class-map.
    MatchQosGroup(Vec<u8>),
    // In system qos and interfaces.
    ServicePolicy {
        kind: Kind,
        output: bool,
        name: String,
    },
    // In an interface.
    PfcMode(PfcMode),
    PfcWatchdog(bool),
    /// `description ...`: a label.
    Description,
    // In hardware profile dlb.
    DlbInterface(Vec<String>),
    /// `dlb-interface all`.
    DlbAll,
    /// `mode [policy-driven] flowlet|per-packet`: the mode, and whether a
    /// qos policy chooses the traffic it applies to.
    DlbMode(&'static str, bool),
    /// `flowlet-aging N` (microseconds).
    FlowletAging(u32),
    DlbMac(String),
}

/// The block a line is in, which decides the commands it may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    Top,
    ClassMap,
    PolicyMap(Kind),
    PolicyClass(Kind),
    SystemQos,
    Interface,
    Dlb,
    /// Under a line that is not modelled: nothing is read.
    Unknown,
}

/// How a line went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    Cmd(Cmd),
    /// No command of the block starts this way.
    NotModelled,
}

pub(super) type PResult<T> = ModalResult<T>;

pub(super) fn expected(what: &'static str) -> StrContext {
    StrContext::Expected(StrContextValue::Description(what))
}

/// A keyword, whole and in any case, and the spaces after it.
pub(super) fn kw<'a>(w: &'static str) -> impl Parser<&'a str, &'a str, ErrMode<ContextError>> {
    terminated(
        literal(Caseless(w)),
        alt((space1, eof)).context(StrContext::Expected(StrContextValue::StringLiteral(w))),
    )
}

/// Several keywords in a row.
fn kws<'a>(ws: &'static [&'static str]) -> impl Parser<&'a str, (), ErrMode<ContextError>> {
    move |input: &mut &'a str| {
        for w in ws {
            kw(w).parse_next(input)?;
        }
        Ok(())
    }
}

/// A word: anything up to a space.
pub(super) fn word<'a>(input: &mut &'a str) -> PResult<&'a str> {
    terminated(take_till(1.., |c: char| c.is_whitespace()), space0)
        .context(expected("a name"))
        .parse_next(input)
}

fn number(input: &mut &str) -> PResult<u64> {
    terminated(digit1.parse_to::<u64>(), space0)
        .context(expected("a number"))
        .parse_next(input)
}

pub(super) fn small(max: u64, what: &'static str) -> impl FnMut(&mut &str) -> PResult<u64> {
    move |input: &mut &str| {
        terminated(
            digit1
                .parse_to::<u64>()
                .verify(move |&n| n <= max)
                .context(expected(what)),
            space0,
        )
        .parse_next(input)
    }
}

/// The DSCP a standard name gives (`ef`, `csN`, `afXY`), in lower case.
pub(super) fn dscp_name(w: &str) -> Option<u8> {
    if w == "ef" {
        return Some(46);
    }
    if let Some(n) = w.strip_prefix("cs").and_then(|x| x.parse::<u8>().ok()) {
        return (n < 8).then(|| 8 * n);
    }
    let x = w.strip_prefix("af")?;
    let (class, drop) = x.split_at_checked(1)?;
    let (c, d) = (class.parse::<u8>().ok()?, drop.parse::<u8>().ok()?);
    ((1..=4).contains(&c) && (1..=3).contains(&d)).then(|| 8 * c + 2 * d)
}

/// A DSCP value: a number up to 63 or a name (`ef`, `csN`, `afXY`,
/// `default`).
fn dscp(input: &mut &str) -> PResult<u8> {
    let named = take_while(1.., |c: char| c.is_ascii_alphanumeric()).verify_map(|w: &str| {
        let w = w.to_ascii_lowercase();
        if let Ok(n) = w.parse::<u8>() {
            return (n < 64).then_some(n);
        }
        match w.as_str() {
            "default" => Some(0),
            w => dscp_name(w),
        }
    });
    named
        .context(expected("a DSCP value (0 to 63, ef, csN or afXY)"))
        .parse_next(input)
}

/// A list such as `24`, `24,26` or `10-12,46` (also with spaces).
fn list(item: fn(&mut &str) -> PResult<u8>) -> impl FnMut(&mut &str) -> PResult<Vec<u8>> {
    move |input: &mut &str| {
        let ranges: Vec<Vec<u8>> = separated(
            1..,
            cut_err(
                (item, opt(preceded('-', item)))
                    .verify(|&(a, b): &(u8, Option<u8>)| b.is_none_or(|b| b >= a))
                    .context(expected(
                        "a range from its lower value to its higher, such as 10-12",
                    )),
            )
            .map(|(a, b): (u8, Option<u8>)| match b {
                Some(b) => (a..=b).collect(),
                None => vec![a],
            }),
            (space0, ',', space0),
        )
        .parse_next(input)?;
        space0.parse_next(input)?;
        Ok(ranges.into_iter().flatten().collect())
    }
}

fn cos(input: &mut &str) -> PResult<u8> {
    digit1
        .parse_to::<u8>()
        .verify(|&n| n < 8)
        .context(expected("a CoS value from 0 to 7"))
        .parse_next(input)
}

fn qos_group(input: &mut &str) -> PResult<u8> {
    digit1
        .parse_to::<u8>()
        .verify(|&n| n < 8)
        .context(expected("a qos-group from 0 to 7"))
        .parse_next(input)
}

fn size(input: &mut &str) -> PResult<(u64, Unit)> {
    (
        number,
        alt((
            kw("bytes").value(Unit::Bytes),
            kw("kbytes").value(Unit::Kbytes),
            kw("mbytes").value(Unit::Mbytes),
        ))
        .context(expected("bytes, kbytes or mbytes")),
    )
        .parse_next(input)
}

/// A size whose unit may be left out: bytes.
fn size_or_bytes(input: &mut &str) -> PResult<(u64, Unit)> {
    (
        number,
        opt(alt((
            kw("bytes").value(Unit::Bytes),
            kw("kbytes").value(Unit::Kbytes),
            kw("mbytes").value(Unit::Mbytes),
        ))),
    )
        .map(|(n, u)| (n, u.unwrap_or(Unit::Bytes)))
        .parse_next(input)
}

/// A rate and its unit (`100 gbps`) in bits per second.
fn rate(input: &mut &str) -> PResult<u64> {
    (
        number,
        alt((
            kw("bps").value(1u64),
            kw("kbps").value(1_000),
            kw("mbps").value(1_000_000),
            kw("gbps").value(1_000_000_000),
        ))
        .context(expected("bps, kbps, mbps or gbps")),
    )
        .map(|(n, u)| n.saturating_mul(u))
        .parse_next(input)
}

fn kind(input: &mut &str) -> PResult<Kind> {
    alt((
        kw("qos").value(Kind::Qos),
        kw("queuing").value(Kind::Queuing),
        kw("network-qos").value(Kind::NetworkQos),
    ))
    .context(expected("qos, queuing or network-qos"))
    .parse_next(input)
}

/// Most interface names one line may give, its ranges expanded: more
/// than a switch has ports, even with every port broken out (a 64-port
/// switch in 8 x 100G breakouts has 512), so that a range cannot make
/// more of them than the line is long by a large factor.
pub const MAX_LINE_INTERFACES: usize = 4096;

/// Most interface names a whole file may give (each line's counted
/// once): far more than the ports of the switches one file configures.
pub const MAX_FILE_INTERFACES: usize = 1 << 16;

/// Interface names, as `Ethernet1/1`, `Ethernet 2/24`, `eth1/1-4` or a
/// comma-separated list of them: each one expanded and spelled
/// `EthernetS/P`. A list past `MAX_LINE_INTERFACES` names is refused
/// before it is expanded.
fn interfaces(input: &mut &str) -> PResult<Vec<String>> {
    // Each name as its type, its id up to the port, and the last port
    // of its range (if it is one that expands).
    let start = *input;
    let one = |input: &mut &str| -> PResult<(String, Option<(u32, u32)>)> {
        let ty: &str =
            take_while(1.., |c: char| c.is_ascii_alphabetic() || c == '-').parse_next(input)?;
        space0.parse_next(input)?;
        let id: &str = take_while(1.., |c: char| c.is_ascii_digit() || c == '/' || c == '.')
            .parse_next(input)?;
        let to: Option<u32> = opt(preceded('-', digit1.parse_to::<u32>())).parse_next(input)?;
        space0.parse_next(input)?;
        let ty = match ty.to_ascii_lowercase().as_str() {
            "ethernet" | "eth" | "e" => "Ethernet".to_string(),
            "port-channel" | "po" => "port-channel".to_string(),
            other => other.to_string(),
        };
        Ok(match (to, id.rsplit_once('/')) {
            (Some(to), Some((slot, first))) => match first.parse::<u32>() {
                Ok(first) if first <= to => (format!("{ty}{slot}/"), Some((first, to))),
                _ => (format!("{ty}{id}-{to}"), None),
            },
            _ => (format!("{ty}{id}"), None),
        })
    };
    let lists: Vec<(String, Option<(u32, u32)>)> = separated(1.., one, (',', space0))
        .context(expected("an interface such as Ethernet1/1"))
        .parse_next(input)?;
    let count: u64 = lists
        .iter()
        .map(|(_, r)| r.map_or(1, |(a, b)| u64::from(b - a) + 1))
        .sum();
    if count > MAX_LINE_INTERFACES as u64 {
        *input = start;
        return cut_err(winnow::combinator::fail)
            .context(expected(
                "at most 4096 interfaces on one line, ranges expanded (more than a switch has ports)",
            ))
            .parse_next(input);
    }
    // Each name once, in the order first given.
    let mut seen = std::collections::HashSet::with_capacity(count as usize);
    let mut names = Vec::with_capacity(count as usize);
    for (head, range) in lists {
        let expanded: Box<dyn Iterator<Item = String>> = match range {
            Some((a, b)) => Box::new((a..=b).map(move |p| format!("{head}{p}"))),
            None => Box::new(std::iter::once(head)),
        };
        for n in expanded {
            if seen.insert(n.clone()) {
                names.push(n);
            }
        }
    }
    Ok(names)
}

/// `random-detect`: thresholds given (`minimum-threshold ...
/// maximum-threshold ...`), a predefined set (`threshold
/// burst-optimized`, `threshold mesh-optimized`) or the switch's own
/// (`ecn` alone); then ECN.
fn random_detect(input: &mut &str) -> PResult<Cmd> {
    let preset = opt(preceded(
        kw("threshold"),
        cut_err(
            alt((
                kw("burst-optimized").value("burst-optimized"),
                kw("mesh-optimized").value("mesh-optimized"),
            ))
            .context(expected("burst-optimized or mesh-optimized")),
        ),
    ))
    .parse_next(input)?;
    let given = if preset.is_some() {
        None
    } else {
        let start = *input;
        match opt(preceded(kw("minimum-threshold"), cut_err(size))).parse_next(input)? {
            None if opt(kw("ecn")).parse_next(input)?.is_some() => {
                return Ok(Cmd::RandomDetect(Wred {
                    min: None,
                    max: None,
                    preset: None,
                    probability: None,
                    weight: 0,
                    ecn: true,
                }))
            }
            None => {
                *input = start;
                return cut_err(winnow::combinator::fail)
                    .context(expected(
                        "minimum-threshold, threshold burst-optimized|mesh-optimized or ecn",
                    ))
                    .parse_next(input);
            }
            Some(min) => Some(min),
        }
    };
    let (min, max) = match given {
        None => (None, None),
        Some(min) => {
            let at_max = *input;
            let max = preceded(kw("maximum-threshold"), size).parse_next(input)?;
            // A scenario refuses these: said here, at the line.
            let bytes = |(n, unit): (u64, Unit)| unit.bytes(n);
            if bytes(max) == 0 || bytes(min) > bytes(max) {
                *input = at_max;
                return cut_err(winnow::combinator::fail)
                    .context(expected(
                        "a maximum threshold above 0 and not below the minimum",
                    ))
                    .parse_next(input);
            }
            (Some(min), Some(max))
        }
    };
    let probability = if min.is_some() {
        opt(preceded(
            kw("drop-probability"),
            small(100, "a percentage from 0 to 100"),
        ))
        .parse_next(input)?
    } else {
        None
    };
    let weight = if min.is_some() {
        opt(preceded(kw("weight"), small(15, "a weight from 0 to 15"))).parse_next(input)?
    } else {
        None
    };
    let ecn = opt(kw("ecn")).parse_next(input)?.is_some();
    Ok(Cmd::RandomDetect(Wred {
        min,
        max,
        preset,
        probability: probability.map(|p| p as u8),
        weight: weight.unwrap_or(0) as u8,
        ecn,
    }))
}

/// `port-channel load-balance [ethernet] FIELDS [symmetric]` and `ip
/// load-sharing address source-destination [port source-destination]`.
fn load_balance(input: &mut &str) -> PResult<Cmd> {
    let fields = alt((
        preceded(
            opt(kw("ethernet")),
            (
                alt((
                    kw("src-dst").value((true, true)),
                    kw("source-dest").value((true, true)),
                    kw("src").value((true, false)),
                    kw("source").value((true, false)),
                    kw("dst").value((false, true)),
                    kw("destination").value((false, true)),
                )),
                alt((
                    kw("ip-l4port-vlan").value((true, true, true, false)),
                    kw("ip-l4port").value((true, true, false, false)),
                    kw("ip-vlan").value((true, false, true, false)),
                    kw("ip").value((true, false, false, false)),
                    kw("l4port").value((false, true, false, false)),
                    kw("mac").value((false, false, false, true)),
                ))
                .context(expected(
                    "ip, ip-l4port, ip-l4port-vlan, ip-vlan, l4port or mac",
                )),
            ),
        ),
        // `ip load-sharing` is read by its own entry below; here the
        // hyphenated forms `src-dst-ip` and the like.
        alt((
            kw("src-dst-ip-l4port").value(((true, true), (true, true, false, false))),
            kw("src-dst-ip").value(((true, true), (true, false, false, false))),
            kw("src-dst-mac").value(((true, true), (false, false, false, true))),
        )),
    ))
    .context(expected("the fields, e.g. src-dst ip-l4port"))
    .parse_next(input)?;
    let symmetric = opt(kw("symmetric")).parse_next(input)?.is_some();
    let ((s, d), (ip, ports, vlan, mac)) = fields;
    Ok(Cmd::LoadBalance(Hash {
        src_ip: s && ip,
        dst_ip: d && ip,
        ports,
        vlan,
        symmetric,
        mac,
    }))
}

fn ip_load_sharing(input: &mut &str) -> PResult<Cmd> {
    kws(&["address", "source-destination"]).parse_next(input)?;
    let ports = opt(kws(&["port", "source-destination"]))
        .parse_next(input)?
        .is_some();
    Ok(Cmd::LoadBalance(Hash {
        src_ip: true,
        dst_ip: true,
        ports,
        vlan: false,
        symmetric: false,
        mac: false,
    }))
}

/// A command of `block`, then the end of the line. `Ok(None)`: no
/// command of the block starts this way.
fn command(block: Block, input: &mut &str) -> PResult<Option<Cmd>> {
    let end = |input: &mut &str| -> PResult<()> {
        eof.void()
            .context(expected("the end of the line"))
            .parse_next(input)
    };
    macro_rules! cmd {
        ($prefix:expr, $rest:expr) => {
            preceded($prefix, cut_err(terminated($rest, end)))
        };
    }
    let parsed = match block {
        Block::Top => alt((
            alt((
                cmd!(kw("hostname"), word.map(|w| Cmd::Hostname(w.to_string()))),
                cmd!(
                    kws(&["class-map", "type"]),
                    (
                        kind,
                        opt(alt((
                            kw("match-any").value(false),
                            kw("match-all").value(true)
                        ))),
                        word
                    )
                        .map(|(kind, all, name)| Cmd::ClassMap {
                            kind,
                            all: all.unwrap_or(true),
                            name: name.to_string()
                        })
                ),
                cmd!(
                    kws(&["policy-map", "type"]),
                    (kind, word).map(|(kind, name)| Cmd::PolicyMap {
                        kind,
                        name: name.to_string()
                    })
                ),
                cmd!(kws(&["system", "qos"]), eof.value(Cmd::SystemQos)),
            )),
            alt((
                cmd!(kw("interface"), interfaces.map(Cmd::Interface)),
                cmd!(
                    kws(&["hardware", "profile", "dlb"]),
                    eof.value(Cmd::HardwareProfileDlb)
                ),
                cmd!(
                    kws(&["priority-flow-control", "watch-dog-interval"]),
                    alt((kw("on").value(true), kw("off").value(false)))
                        .context(expected("on or off"))
                        .map(Cmd::WatchdogEnable)
                ),
                cmd!(
                    kws(&["priority-flow-control", "watch-dog", "interval"]),
                    small(1000, "milliseconds from 100 to 1000")
                        .verify(|&n| n >= 100)
                        .context(expected("milliseconds from 100 to 1000"))
                        .map(|n| Cmd::WatchdogInterval(n as u32))
                ),
                cmd!(
                    kws(&["priority-flow-control", "watch-dog", "shutdown-multiplier"]),
                    small(10, "a multiplier from 1 to 10")
                        .verify(|&n| n >= 1)
                        .map(|n| Cmd::WatchdogShutdown(n as u32))
                ),
                cmd!(
                    kws(&["priority-flow-control", "auto-restore", "multiplier"]),
                    small(100, "a multiplier from 0 to 100")
                        .map(|n| Cmd::WatchdogRestore(n as u32))
                ),
                cmd!(kws(&["port-channel", "load-balance"]), load_balance),
                cmd!(kws(&["ip", "load-sharing"]), ip_load_sharing),
            )),
        ))
        .map(Some)
        .parse_next(input),
        Block::ClassMap => alt((
            cmd!(kws(&["match", "dscp"]), list(dscp).map(Cmd::MatchDscp)),
            cmd!(kws(&["match", "cos"]), list(cos).map(Cmd::MatchCos)),
            cmd!(
                kws(&["match", "qos-group"]),
                list(qos_group).map(Cmd::MatchQosGroup)
            ),
        ))
        .map(Some)
        .parse_next(input),
        Block::PolicyMap(_) => cmd!(
            kw("class"),
            (opt(preceded(kw("type"), kind)), word).map(|(kind, name)| Cmd::Class {
                kind,
                name: name.to_string()
            })
        )
        .map(Some)
        .parse_next(input),
        Block::PolicyClass(Kind::Qos) => cmd!(
            kws(&["set", "qos-group"]),
            small(7, "a qos-group from 0 to 7").map(|n| Cmd::SetQosGroup(n as u8))
        )
        .map(Some)
        .parse_next(input),
        Block::PolicyClass(Kind::Queuing) => alt((
            cmd!(
                kws(&["bandwidth", "remaining", "percent"]),
                small(100, "a percentage from 0 to 100").map(|n| Cmd::BandwidthRemaining(n as u8))
            ),
            cmd!(
                kws(&["bandwidth", "percent"]),
                small(100, "a percentage from 0 to 100").map(|n| Cmd::Bandwidth(n as u8))
            ),
            cmd!(
                kw("priority"),
                opt(preceded(
                    kw("level"),
                    cut_err(
                        small(7, "a level from 1 to 7")
                            .verify(|&l| l >= 1)
                            .context(expected("a level from 1 to 7"))
                    )
                ))
                .map(|l| Cmd::Priority(l.unwrap_or(1) as u8))
            ),
            cmd!(kw("random-detect"), random_detect),
            cmd!(
                kws(&["pause", "buffer-size"]),
                (
                    size_or_bytes,
                    preceded(kw("pause-threshold"), size_or_bytes),
                    preceded(kw("resume-threshold"), size_or_bytes),
                )
                    .verify(|&(b, x, r)| {
                        let n = |(n, u): (u64, Unit)| u.bytes(n);
                        n(r) <= n(x) && n(x) <= n(b)
                    })
                    .context(expected(
                        "a resume threshold not above the pause threshold, and that not above the buffer size",
                    ))
                    .map(|(size, xoff, xon)| Cmd::PauseBuffer { size, xoff, xon })
            ),
            cmd!(
                kw("shape"),
                (
                    preceded(kw("min"), rate),
                    preceded(
                        kw("max"),
                        rate.verify(|&r| r > 0)
                            .context(expected("a maximum rate above 0 (0 would stop the queue)")),
                    )
                )
                    .map(|(_, max)| Cmd::Shape(max))
            ),
        ))
        .map(Some)
        .parse_next(input),
        Block::PolicyClass(Kind::NetworkQos) => alt((
            cmd!(
                kw("mtu"),
                number
                    .verify(|&n| (576..=9216).contains(&n))
                    .context(expected("an MTU from 576 to 9216"))
                    .map(|n| Cmd::Mtu(n as u32))
            ),
            cmd!(kws(&["pause", "pfc-cos"]), list(cos).map(Cmd::PausePfcCos)),
        ))
        .map(Some)
        .parse_next(input),
        Block::SystemQos | Block::Interface => {
            let policy = cmd!(
                kws(&["service-policy", "type"]),
                (
                    kind,
                    opt(alt((kw("input").value(false), kw("output").value(true)))),
                    word
                )
                    .map(|(kind, out, name)| Cmd::ServicePolicy {
                        kind,
                        output: out.unwrap_or(false),
                        name: name.to_string()
                    })
            );
            if block == Block::SystemQos {
                policy.map(Some).parse_next(input)
            } else {
                alt((
                    policy,
                    cmd!(
                        kws(&["priority-flow-control", "mode"]),
                        alt((
                            // `send-tlv` advertises PFC in DCBX too; the
                            // NICs here take PFC from the scenario, so it
                            // changes nothing simulated.
                            terminated(kw("on"), opt(kw("send-tlv"))).value(PfcMode::On),
                            kw("off").value(PfcMode::Off),
                            kw("auto").value(PfcMode::Auto),
                        ))
                        .context(expected("on, off or auto"))
                        .map(Cmd::PfcMode)
                    ),
                    cmd!(
                        kws(&["priority-flow-control", "watch-dog"]),
                        eof.value(Cmd::PfcWatchdog(true))
                    ),
                    cmd!(
                        kws(&["no", "priority-flow-control", "watch-dog"]),
                        eof.value(Cmd::PfcWatchdog(false))
                    ),
                    preceded(
                        kw("description"),
                        winnow::token::rest.value(Cmd::Description),
                    ),
                ))
                .map(Some)
                .parse_next(input)
            }
        }
        Block::Dlb => alt((
            cmd!(kws(&["dlb-interface", "all"]), eof.value(Cmd::DlbAll)),
            cmd!(kw("dlb-interface"), interfaces.map(Cmd::DlbInterface)),
            cmd!(
                kw("mode"),
                (
                    opt(kw("policy-driven")),
                    alt((
                        kw("flowlet").value("flowlet"),
                        kw("per-packet").value("per-packet"),
                    ))
                    .context(expected("flowlet, per-packet or policy-driven"))
                )
                    .map(|(policy, mode)| Cmd::DlbMode(mode, policy.is_some()))
            ),
            cmd!(
                kw("flowlet-aging"),
                small(u64::from(u32::MAX), "microseconds from 0 to 4294967295")
                    .map(|n| Cmd::FlowletAging(n as u32))
            ),
            cmd!(kw("mac-address"), word.map(|w| Cmd::DlbMac(w.to_string()))),
        ))
        .map(Some)
        .parse_next(input),
        Block::Unknown => Ok(None),
    };
    match parsed {
        Err(ErrMode::Backtrack(_)) => Ok(None),
        other => other,
    }
}

/// Reads one line (without its indentation) in `block`. An error names
/// what was expected at which column.
pub fn parse_line(block: Block, text: &str) -> Result<Parsed, String> {
    let mut input = text;
    match command(block, &mut input) {
        Ok(Some(cmd)) => Ok(Parsed::Cmd(cmd)),
        Ok(None) => Ok(Parsed::NotModelled),
        Err(ErrMode::Cut(e) | ErrMode::Backtrack(e)) => {
            let at = text.len() - input.len();
            let want: Vec<String> = e
                .context()
                .filter_map(|c| match c {
                    StrContext::Expected(v) => Some(v.to_string()),
                    _ => None,
                })
                .collect();
            let got = input
                .split_whitespace()
                .next()
                .unwrap_or("the end of the line");
            Err(format!(
                "column {}: expected {}, got {}",
                at + 1,
                if want.is_empty() {
                    "something else".to_string()
                } else {
                    want.join(" or ")
                },
                if input.is_empty() {
                    got.to_string()
                } else {
                    format!("\"{got}\"")
                }
            ))
        }
        Err(ErrMode::Incomplete(_)) => Err("incomplete line".into()),
    }
}

/// Interface names as a scenario gives them (`"Ethernet1/49-56"`,
/// `"Ethernet1/1-8, Ethernet1/17"`), expanded and spelled as the reader
/// spells them.
pub fn interface_list(text: &str) -> Result<Vec<String>, String> {
    let mut input = text.trim();
    match interfaces(&mut input) {
        Ok(names) if input.is_empty() => Ok(names),
        _ => Err(format!(
            "got \"{text}\", expected interface names such as \"Ethernet1/1-16\" or \"Ethernet1/49, Ethernet1/50\""
        )),
    }
}

/// The block the lines under a command are in.
pub fn block_under(cmd: &Cmd, block: Block) -> Block {
    match (cmd, block) {
        (Cmd::ClassMap { .. }, _) => Block::ClassMap,
        (Cmd::PolicyMap { kind, .. }, _) => Block::PolicyMap(*kind),
        (Cmd::Class { .. }, Block::PolicyMap(k)) => Block::PolicyClass(k),
        (Cmd::SystemQos, _) => Block::SystemQos,
        (Cmd::Interface(_), _) => Block::Interface,
        (Cmd::HardwareProfileDlb, _) => Block::Dlb,
        _ => Block::Unknown,
    }
}

/// A line of the file: its number (from 1), indentation and text.
#[derive(Clone, Debug)]
pub struct Line<'a> {
    pub no: usize,
    pub indent: usize,
    pub text: &'a str,
}

/// The configuration's lines, without blank lines and comments (`!`).
pub fn lines(text: &str) -> Vec<Line<'_>> {
    text.lines()
        .enumerate()
        .filter_map(|(i, raw)| {
            let trimmed = raw.trim_end();
            let text = trimmed.trim_start();
            if text.is_empty() || text.starts_with('!') {
                return None;
            }
            let indent = trimmed.len() - text.len();
            Some(Line {
                no: i + 1,
                indent,
                text,
            })
        })
        .collect()
}

/// A line read: its number, the block it is in, what it was, its text.
pub type Read = (usize, Block, Parsed, String);

/// Configuration-mode boilerplate: a line that moves between modes or
/// frames a pasted configuration, and configures nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `configure terminal`, `copy running-config startup-config`.
    Frame,
    /// `exit`: back to the mode around this one.
    Exit,
    /// `end`: back to the top.
    End,
}

fn mode_line(text: &str) -> Option<Mode> {
    let words: Vec<String> = text
        .split_whitespace()
        .map(|w| w.to_ascii_lowercase())
        .collect();
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    match w.as_slice() {
        ["exit"] => Some(Mode::Exit),
        ["end"] => Some(Mode::End),
        ["conf" | "config" | "configure"]
        | ["conf" | "config" | "configure", "t" | "term" | "terminal"] => Some(Mode::Frame),
        ["copy", "run" | "running-config", "start" | "startup-config"] => Some(Mode::Frame),
        _ => None,
    }
}

/// A block open while reading: the indentation of the line that opened
/// it, its grammar, and whether lines indented under it were read (its
/// extent is then the indentation's).
struct Open {
    indent: usize,
    block: Block,
    indented: bool,
}

/// Every line read; an error is a line's number and what is wrong.
///
/// A line's mode (block) is found by its command, as the switch finds
/// it, so that flat text (`show running-config` snippets, generators'
/// output, `exit` and `end` lines) reads as indented text does: an
/// indented line belongs to the block above it with less indentation; a
/// line at the margin belongs to the innermost open block whose grammar
/// reads it, else to the top (the switch falls through to the global
/// mode the same way), unless that block's extent was set by indented
/// lines. A line no grammar reads is "not modelled" and keeps the open
/// blocks (it may be a command of theirs fabricsim does not read); the
/// lines indented under it are not read.
pub fn read(text: &str) -> Result<Vec<Read>, (usize, String)> {
    let mut open: Vec<Open> = Vec::new();
    let mut out = Vec::new();
    let error = |line: &Line, e: String| {
        let shown: String = line.text.chars().take(120).collect();
        (line.no, format!("\"{shown}\": {e}"))
    };
    for line in lines(text) {
        if line.indent > 0 {
            while open.last().is_some_and(|o| o.indent >= line.indent) {
                open.pop();
            }
            if let Some(o) = open.last_mut() {
                o.indented = true;
            }
        } else {
            // The margin closes what indentation opened, and an unknown
            // command's (nothing under it is read).
            while open
                .last()
                .is_some_and(|o| o.indented || o.block == Block::Unknown)
            {
                open.pop();
            }
        }
        match mode_line(line.text) {
            Some(Mode::Frame) => continue,
            Some(Mode::End) => {
                open.clear();
                continue;
            }
            Some(Mode::Exit) => {
                while open.last().is_some_and(|o| o.block == Block::Unknown) {
                    open.pop();
                }
                open.pop();
                continue;
            }
            None => {}
        }
        let (depth, block, parsed) = if line.indent > 0 {
            let block = open.last().map_or(Block::Top, |o| o.block);
            let parsed = parse_line(block, line.text).map_err(|e| error(&line, e))?;
            (open.len(), block, parsed)
        } else {
            // The innermost block that reads it, else the top.
            let mut found = None;
            let mut first_error = None;
            let tries = open
                .iter()
                .enumerate()
                .rev()
                .map(|(d, o)| (d + 1, o.block))
                .chain([(0, Block::Top)]);
            for (depth, block) in tries {
                match parse_line(block, line.text) {
                    Ok(Parsed::Cmd(c)) => {
                        found = Some((depth, block, Parsed::Cmd(c)));
                        break;
                    }
                    Ok(Parsed::NotModelled) => {}
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            match (found, first_error) {
                (Some(f), _) => f,
                (None, Some(e)) => return Err(error(&line, e)),
                (None, None) => {
                    let block = open.last().map_or(Block::Top, |o| o.block);
                    (open.len(), block, Parsed::NotModelled)
                }
            }
        };
        open.truncate(depth);
        let under = match &parsed {
            Parsed::Cmd(c) => block_under(c, block),
            Parsed::NotModelled => Block::Unknown,
        };
        open.push(Open {
            indent: line.indent,
            block: under,
            indented: false,
        });
        out.push((line.no, block, parsed, line.text.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(block: Block, text: &str) -> Cmd {
        match parse_line(block, text) {
            Ok(Parsed::Cmd(c)) => c,
            other => panic!("{text}: {other:?}"),
        }
    }

    /// Forms of current releases: a PFC mode with its DCBX TLV, and
    /// strict priority levels up to 7 (more than one is noted, as the
    /// simulator has one strict level); a bad level names the range.
    #[test]
    fn current_release_forms_parse() {
        assert_eq!(
            cmd(Block::Interface, "priority-flow-control mode on send-tlv"),
            Cmd::PfcMode(PfcMode::On)
        );
        assert_eq!(
            cmd(Block::PolicyClass(Kind::Queuing), "priority level 4"),
            Cmd::Priority(4)
        );
        let e = parse_line(Block::PolicyClass(Kind::Queuing), "priority level 9").unwrap_err();
        assert!(e.contains("a level from 1 to 7"), "{e}");
    }

    #[test]
    fn the_seed_commands_parse() {
        assert_eq!(
            cmd(Block::Top, "class-map type qos match-any ROCEv2"),
            Cmd::ClassMap {
                kind: Kind::Qos,
                all: false,
                name: "ROCEv2".into()
            }
        );
        assert_eq!(
            cmd(Block::Top, "class-map type qos RDMA"),
            Cmd::ClassMap {
                kind: Kind::Qos,
                all: true,
                name: "RDMA".into()
            }
        );
        assert_eq!(
            cmd(Block::ClassMap, "match cos 3,5"),
            Cmd::MatchCos(vec![3, 5])
        );
        assert_eq!(
            cmd(Block::ClassMap, "match dscp 24"),
            Cmd::MatchDscp(vec![24])
        );
        assert_eq!(
            cmd(Block::ClassMap, "match dscp 10-12, af31,ef"),
            Cmd::MatchDscp(vec![10, 11, 12, 26, 46])
        );
        assert_eq!(
            cmd(
                Block::PolicyClass(Kind::Queuing),
                "random-detect minimum-threshold 150 kbytes maximum-threshold 3000 kbytes drop-probability 7 weight 0 ecn"
            ),
            Cmd::RandomDetect(Wred {
                min: Some((150, Unit::Kbytes)),
                max: Some((3000, Unit::Kbytes)),
                preset: None,
                probability: Some(7),
                weight: 0,
                ecn: true
            })
        );
        assert_eq!(
            cmd(Block::PolicyClass(Kind::Queuing), "priority level 1"),
            Cmd::Priority(1)
        );
        assert_eq!(
            cmd(Block::Top, "interface Ethernet 2/24"),
            Cmd::Interface(vec!["Ethernet2/24".into()])
        );
        assert_eq!(
            cmd(Block::Top, "interface eth1/1-3, Ethernet1/9"),
            Cmd::Interface(vec![
                "Ethernet1/1".into(),
                "Ethernet1/2".into(),
                "Ethernet1/3".into(),
                "Ethernet1/9".into()
            ])
        );
        assert_eq!(
            cmd(
                Block::SystemQos,
                "service-policy type queuing output QOS_EGRESS_PORT"
            ),
            Cmd::ServicePolicy {
                kind: Kind::Queuing,
                output: true,
                name: "QOS_EGRESS_PORT".into()
            }
        );
        assert_eq!(
            cmd(Block::PolicyClass(Kind::NetworkQos), "pause pfc-cos 3"),
            Cmd::PausePfcCos(vec![3])
        );
        assert_eq!(
            cmd(Block::Top, "PRIORITY-FLOW-CONTROL watch-dog-interval on"),
            Cmd::WatchdogEnable(true)
        );
        assert_eq!(
            cmd(
                Block::Top,
                "port-channel load-balance src-dst ip-l4port symmetric"
            ),
            Cmd::LoadBalance(Hash {
                src_ip: true,
                dst_ip: true,
                ports: true,
                vlan: false,
                symmetric: true,
                mac: false
            })
        );
    }

    #[test]
    fn unknown_commands_are_not_modelled_and_bad_ones_are_errors() {
        assert_eq!(
            parse_line(Block::Top, "feature lldp"),
            Ok(Parsed::NotModelled)
        );
        assert_eq!(
            parse_line(Block::Interface, "ip address 10.0.0.1/31"),
            Ok(Parsed::NotModelled)
        );
        // A keyword's prefix is not the keyword.
        assert_eq!(
            parse_line(Block::Top, "class-maps type qos X"),
            Ok(Parsed::NotModelled)
        );
        let e = parse_line(
            Block::PolicyClass(Kind::Queuing),
            "random-detect minimum-threshold 150 kilos maximum-threshold 3000 kbytes",
        )
        .unwrap_err();
        assert!(e.contains("column 37") && e.contains("kbytes"), "{e}");
        let e = parse_line(Block::ClassMap, "match dscp 64").unwrap_err();
        assert!(e.contains("DSCP"), "{e}");
        // Names out of range are errors, not arithmetic overflows.
        for bad in ["cs99", "af99", "af93", "cs8", "af51"] {
            let e = parse_line(Block::ClassMap, &format!("match dscp {bad}")).unwrap_err();
            assert!(e.contains("DSCP"), "{bad}: {e}");
        }
        let e = parse_line(Block::PolicyClass(Kind::Qos), "set qos-group 3 extra").unwrap_err();
        assert!(
            e.contains("end of the line") && e.contains("\"extra\""),
            "{e}"
        );
    }

    #[test]
    fn blocks_follow_indentation() {
        let text = "policy-map type queuing Q\n  class type queuing c-out-8q-q3\n    bandwidth remaining percent 50\n  class type queuing c-out-8q-q7\n    priority level 1\nfeature lldp\n  anything at all\nsystem qos\n  service-policy type queuing output Q\n";
        let lines = read(text).unwrap();
        let blocks: Vec<Block> = lines.iter().map(|l| l.1).collect();
        assert_eq!(
            blocks,
            vec![
                Block::Top,
                Block::PolicyMap(Kind::Queuing),
                Block::PolicyClass(Kind::Queuing),
                Block::PolicyMap(Kind::Queuing),
                Block::PolicyClass(Kind::Queuing),
                Block::Top,
                Block::Unknown,
                Block::Top,
                Block::SystemQos
            ]
        );
        assert_eq!(lines[6].2, Parsed::NotModelled);
    }
}
