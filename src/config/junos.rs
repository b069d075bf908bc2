//! Junos (QFX) configuration text: statements in either of the forms
//! `show configuration` gives, braces (`class-of-service { schedulers {
//! s1 { priority strict-high; } } }`) or `| display set` lines (`set
//! class-of-service schedulers s1 priority strict-high`), flattened to
//! one statement per leaf with the line it ends on, then read by the
//! grammar of the statements a lossless RoCEv2 fabric is configured with.
//!
//! A statement no rule of the grammar starts is kept as "not modelled"
//! with its line; one that starts a known statement and then goes wrong
//! is an error naming the line and what was expected there.
//!
//! `import` then follows the references as the switch does: forwarding
//! classes are the queues (`no-loss` ones lossless); the DSCP classifier
//! the interfaces apply gives them their code points; the scheduler map
//! they apply gives each class its scheduler (strict-high, a
//! transmit-rate share, a shaping rate) and, through its drop profile,
//! WRED in percent of the queue's limit, marking ECN when the scheduler
//! says so. PFC is per interface: on where a congestion notification
//! profile enables it on a lossless class (negotiated by DCBX unless
//! `no-auto-negotiation`), off elsewhere. `enhanced-hash-key ecmp-dlb`
//! gives DLB on every ECMP group.

use winnow::ascii::{digit1, space0, Caseless};
use winnow::combinator::{alt, cut_err, eof, fail, opt, preceded, repeat, terminated};
use winnow::error::{ContextError, ErrMode, StrContext};
use winnow::prelude::*;
use winnow::token::take_while;

use super::nxos::{self, expected, kw, small, PResult, PfcMode, Unit, Wred};
use super::{err, line_note, ConfigError, Import, Interface, Key, Queue, Section};
use std::collections::BTreeMap;
use toml::Value;

/// One flattened statement: the line it ends on and its words, joined
/// by single spaces (`[ a b ]` lists keep their brackets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    pub line: usize,
    pub text: String,
}

/// A scheduler's priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    StrictHigh,
    High,
    MediumHigh,
    MediumLow,
    Low,
}

/// DLB as `enhanced-hash-key ecmp-dlb` sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dlb {
    /// Flowlets, with the inactivity interval in microseconds if given.
    Flowlet(Option<u32>),
    PerPacket,
    /// Flows stay on the member they were given (no quality moves).
    AssignedFlow,
}

/// One statement, as the grammar read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stmt {
    HostName(String),
    /// `class-of-service forwarding-classes class FC queue-num N [no-loss]`.
    ForwardingClass {
        fc: String,
        queue: Option<u8>,
        no_loss: bool,
        pfc_priority: Option<u8>,
    },
    /// `class-of-service classifiers dscp|ieee-802.1 NAME
    /// forwarding-class FC loss-priority LP code-points CP...`: DSCPs, or
    /// with `ieee` 802.1p priorities.
    Classifier {
        name: String,
        ieee: bool,
        fc: String,
        codes: Vec<u8>,
    },
    /// `class-of-service drop-profiles DP interpolate fill-level ...` or
    /// `drop-probability ...` (percentages; each may come alone).
    DropProfile {
        name: String,
        fill: Vec<u8>,
        probability: Vec<u8>,
    },
    SchedulerRate {
        name: String,
        percent: u8,
    },
    SchedulerPriority {
        name: String,
        priority: Priority,
    },
    SchedulerEcn(String),
    SchedulerDropProfile {
        name: String,
        profile: String,
    },
    /// A shaping rate in bits per second.
    SchedulerShape {
        name: String,
        bps: u64,
    },
    SchedulerBuffer {
        name: String,
        percent: u8,
    },
    /// `class-of-service scheduler-maps SM forwarding-class FC scheduler S`.
    SchedulerMap {
        name: String,
        fc: String,
        scheduler: String,
    },
    /// `class-of-service congestion-notification-profile CNP input dscp
    /// code-point CP pfc` (DSCPs) or `input ieee-802.1 code-point CP pfc`
    /// (priorities).
    CnpDscp {
        name: String,
        dscp: u8,
    },
    CnpPriority {
        name: String,
        priority: u8,
    },
    /// `class-of-service interfaces IF congestion-notification-profile CNP`.
    InterfaceCnp {
        iface: String,
        cnp: String,
    },
    InterfaceSchedulerMap {
        iface: String,
        map: String,
    },
    InterfaceClassifier {
        iface: String,
        ieee: bool,
        name: String,
    },
    /// `protocols dcbx interface IF priority-flow-control
    /// no-auto-negotiation`: PFC on whatever the peer says.
    DcbxNoAutoNegotiation(String),
    /// `interfaces IF mtu N`.
    Mtu {
        iface: String,
        mtu: u32,
    },
    Dlb(Dlb),
    /// `class-of-service shared-buffer ingress|egress [buffer-partition
    /// P] percent N`: a direction's share of the buffer, or a
    /// partition's share of that.
    SharedBuffer {
        egress: bool,
        partition: Option<&'static str>,
        percent: u8,
    },
    /// `protocols bgp global-load-balancing [load-balancer-only |
    /// helper-only]`: true when the switch balances (not a helper only).
    Glb(bool),
}

/// Deepest nesting of braces read: Junos's own hierarchy is about a
/// dozen levels deep (`class-of-service interfaces et-0/0/0 unit 0
/// classifiers dscp X` is six).
pub const MAX_DEPTH: usize = 64;

/// How many times the file's length its statements may take once
/// flattened (each repeats the names of the blocks it is in): well above
/// what real configurations take, so that the text read stays linear in
/// the file.
pub const MAX_FLATTENED: usize = 32;

/// Flattens the text into statements. Braces and `set` lines may mix;
/// `#` and `/* */` are comments. Errors give the line.
pub fn statements(text: &str) -> Result<Vec<Statement>, (usize, String)> {
    let budget = MAX_FLATTENED * text.len() + (1 << 20);
    let mut flattened = 0usize;
    let mut out = Vec::new();
    let mut stack: Vec<Vec<String>> = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut line = 1usize;
    let mut rest = text;
    let mut in_list = false;
    let mut set_line: Option<usize> = None;
    while !rest.is_empty() {
        let c = rest.chars().next().expect("not empty");
        if c == '\n' {
            line += 1;
            rest = &rest[1..];
            if let Some(at) = set_line.take() {
                if in_list {
                    return Err((at, "a [ list is not closed on its set line".into()));
                }
                if !words.is_empty() {
                    out.push(Statement {
                        line: at,
                        text: std::mem::take(&mut words).join(" "),
                    });
                }
            }
            continue;
        }
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if c == '#' && words.is_empty() && !in_list {
            rest = rest.find('\n').map_or("", |i| &rest[i..]);
            continue;
        }
        if rest.starts_with("/*") {
            let end = rest[2..]
                .find("*/")
                .ok_or((line, "a /* comment is not closed".to_string()))?;
            line += rest[..end + 4].matches('\n').count();
            rest = &rest[end + 4..];
            continue;
        }
        match c {
            '{' | '}' | ';' if set_line.is_some() => {
                return Err((line, format!("\"{c}\" on a set line")));
            }
            '{' => {
                if words.is_empty() {
                    return Err((line, "expected a statement name before {".into()));
                }
                if stack.len() == MAX_DEPTH {
                    return Err((
                        line,
                        format!("braces nested more than {MAX_DEPTH} deep; a Junos configuration nests about a dozen"),
                    ));
                }
                stack.push(std::mem::take(&mut words));
                rest = &rest[1..];
            }
            '}' => {
                if !words.is_empty() {
                    return Err((line, format!("expected ; after \"{}\"", words.join(" "))));
                }
                if stack.pop().is_none() {
                    return Err((line, "a } closes nothing".into()));
                }
                rest = &rest[1..];
            }
            ';' => {
                if in_list {
                    return Err((line, "expected ] before ;".into()));
                }
                if !words.is_empty() {
                    flattened += stack
                        .iter()
                        .flatten()
                        .chain(&words)
                        .map(|w| w.len() + 1)
                        .sum::<usize>();
                    if flattened > budget {
                        return Err((
                            line,
                            format!("the statements, each with the names of the blocks it is in, come to more than {MAX_FLATTENED} times the file's length; a configuration this repetitive is not one a switch keeps"),
                        ));
                    }
                    let mut all: Vec<String> = stack.iter().flatten().cloned().collect();
                    all.append(&mut words);
                    out.push(Statement {
                        line,
                        text: all.join(" "),
                    });
                }
                rest = &rest[1..];
            }
            '[' => {
                in_list = true;
                words.push("[".into());
                rest = &rest[1..];
            }
            ']' => {
                if !in_list {
                    return Err((line, "a ] closes no list".into()));
                }
                in_list = false;
                words.push("]".into());
                rest = &rest[1..];
            }
            '"' => {
                let end = rest[1..]
                    .find('"')
                    .ok_or((line, "a quoted string is not closed".to_string()))?;
                let quoted = &rest[1..end + 1];
                if quoted.contains('\n') {
                    return Err((line, "a quoted string runs past its line".into()));
                }
                words.push(quoted.to_string());
                rest = &rest[end + 2..];
            }
            _ => {
                let end = rest
                    .find(|c: char| c.is_whitespace() || "{};[]\"".contains(c))
                    .unwrap_or(rest.len());
                let w = &rest[..end];
                rest = &rest[end..];
                if words.is_empty() && stack.is_empty() && set_line.is_none() && w == "set" {
                    set_line = Some(line);
                    continue;
                }
                words.push(w.to_string());
            }
        }
    }
    if let Some(at) = set_line {
        if !words.is_empty() {
            out.push(Statement {
                line: at,
                text: std::mem::take(&mut words).join(" "),
            });
        }
    }
    if !stack.is_empty() {
        return Err((line, format!("{} unclosed {{", stack.len())));
    }
    if !words.is_empty() {
        return Err((line, format!("expected ; after \"{}\"", words.join(" "))));
    }
    Ok(out)
}

/// An interface as a pattern the ports are matched against: `all` is
/// every one, and a group's `<et-*>` is `et-*`.
fn interface_name(name: String) -> String {
    if name.eq_ignore_ascii_case("all") {
        return "*".into();
    }
    match name.strip_prefix('<').and_then(|n| n.strip_suffix('>')) {
        Some(inner) => inner.to_string(),
        None => name,
    }
}

fn word(input: &mut &str) -> PResult<String> {
    nxos::word.map(String::from).parse_next(input)
}

fn percent(input: &mut &str) -> PResult<u8> {
    terminated(
        digit1
            .parse_to::<u8>()
            .verify(|&n| n <= 100)
            .context(expected("a percentage from 0 to 100")),
        space0,
    )
    .parse_next(input)
}

/// One value or a `[ ... ]` list of them.
fn one_or_list<'a, T>(
    mut item: impl Parser<&'a str, T, ErrMode<ContextError>>,
) -> impl FnMut(&mut &'a str) -> PResult<Vec<T>> {
    move |input: &mut &'a str| {
        if opt(kw("[")).parse_next(input)?.is_some() {
            let items: Vec<T> = repeat(1.., item.by_ref()).parse_next(input)?;
            // What stopped the list is a bad item or its end: an item
            // tried once more says which, if it can.
            if opt(kw("]")).parse_next(input)?.is_none() {
                item.parse_next(input).map_err(ErrMode::cut)?;
                cut_err(kw("]")).parse_next(input)?;
            }
            Ok(items)
        } else {
            Ok(vec![item.parse_next(input)?])
        }
    }
}

/// A DSCP code point: six bits (`011000`) or an alias (`ef`, `afXY`,
/// `csN`, `be`, `nc1`, `nc2`).
fn code_point(input: &mut &str) -> PResult<u8> {
    terminated(
        take_while(1.., |c: char| c.is_ascii_alphanumeric()).verify_map(|w: &str| {
            let w = w.to_ascii_lowercase();
            if w.len() == 6 && w.chars().all(|c| c == '0' || c == '1') {
                return u8::from_str_radix(&w, 2).ok();
            }
            match w.as_str() {
                "be" => Some(0),
                "nc1" => Some(48),
                "nc2" => Some(56),
                w => nxos::dscp_name(w),
            }
        }),
        space0,
    )
    .context(expected(
        "a DSCP code point (six bits such as 011000, or ef, afXY, csN, be)",
    ))
    .parse_next(input)
}

/// An 802.1p code point: three bits (`011`).
fn priority_bits(input: &mut &str) -> PResult<u8> {
    terminated(
        take_while(3, |c: char| c == '0' || c == '1')
            .map(|w: &str| u8::from_str_radix(w, 2).expect("three bits")),
        space0,
    )
    .context(expected("an 802.1p code point of three bits such as 011"))
    .parse_next(input)
}

/// A rate: `400g`, `100m`, `10k` or plain bits per second.
fn rate(input: &mut &str) -> PResult<u64> {
    terminated(
        (
            digit1.parse_to::<u64>(),
            opt(alt((
                Caseless("g").value(1_000_000_000u64),
                Caseless("m").value(1_000_000),
                Caseless("k").value(1_000),
            ))),
        )
            .map(|(n, u)| n.saturating_mul(u.unwrap_or(1))),
        space0,
    )
    .context(expected("a rate such as 100g"))
    .parse_next(input)
}

fn priority(input: &mut &str) -> PResult<Priority> {
    alt((
        kw("strict-high").value(Priority::StrictHigh),
        kw("high").value(Priority::High),
        kw("medium-high").value(Priority::MediumHigh),
        kw("medium-low").value(Priority::MediumLow),
        kw("low").value(Priority::Low),
    ))
    .context(expected(
        "strict-high, high, medium-high, medium-low or low",
    ))
    .parse_next(input)
}

fn scheduler(name: String, input: &mut &str) -> PResult<Option<Stmt>> {
    let stmt = alt((
        preceded(
            (kw("transmit-rate"), kw("percent")),
            cut_err(percent).map(|percent| Stmt::SchedulerRate {
                name: name.clone(),
                percent,
            }),
        ),
        preceded(
            kw("priority"),
            cut_err(priority).map(|priority| Stmt::SchedulerPriority {
                name: name.clone(),
                priority,
            }),
        ),
        kw("explicit-congestion-notification").map(|_| Stmt::SchedulerEcn(name.clone())),
        preceded(
            kw("drop-profile-map"),
            cut_err(preceded(
                (
                    kw("loss-priority"),
                    word,
                    kw("protocol"),
                    word,
                    kw("drop-profile"),
                ),
                word,
            ))
            .map(|profile| Stmt::SchedulerDropProfile {
                name: name.clone(),
                profile,
            }),
        ),
        preceded(
            kw("shaping-rate"),
            cut_err(rate).map(|bps| Stmt::SchedulerShape {
                name: name.clone(),
                bps,
            }),
        ),
        preceded(
            (kw("buffer-size"), kw("percent")),
            cut_err(percent).map(|percent| Stmt::SchedulerBuffer {
                name: name.clone(),
                percent,
            }),
        ),
    ))
    .parse_next(input)?;
    Ok(Some(stmt))
}

fn class_of_service(input: &mut &str) -> PResult<Option<Stmt>> {
    let fc_stmt = |input: &mut &str| -> PResult<Stmt> {
        (kw("forwarding-classes"), kw("class")).parse_next(input)?;
        let fc = cut_err(word).parse_next(input)?;
        let queue = opt(preceded(
            kw("queue-num"),
            cut_err(small(7, "a queue from 0 to 7")),
        ))
        .parse_next(input)?;
        let no_loss = opt(kw("no-loss")).parse_next(input)?.is_some();
        let pfc_priority = opt(preceded(
            kw("pfc-priority"),
            cut_err(small(7, "a PFC priority from 0 to 7")),
        ))
        .parse_next(input)?;
        if queue.is_none() && !no_loss && pfc_priority.is_none() {
            return Err(ErrMode::Backtrack(ContextError::new()));
        }
        cut_err(eof.context(expected("the end of the statement"))).parse_next(input)?;
        Ok(Stmt::ForwardingClass {
            fc,
            queue: queue.map(|q| q as u8),
            no_loss,
            pfc_priority: pfc_priority.map(|p| p as u8),
        })
    };
    let classifier = |input: &mut &str| -> PResult<Stmt> {
        kw("classifiers").parse_next(input)?;
        let ieee =
            alt((kw("dscp").value(false), kw("ieee-802.1").value(true))).parse_next(input)?;
        let name = cut_err(word).parse_next(input)?;
        cut_err(kw("forwarding-class")).parse_next(input)?;
        let fc = cut_err(word).parse_next(input)?;
        cut_err((kw("loss-priority"), word, kw("code-points"))).parse_next(input)?;
        let codes = if ieee {
            cut_err(one_or_list(priority_bits)).parse_next(input)?
        } else {
            cut_err(one_or_list(code_point)).parse_next(input)?
        };
        Ok(Stmt::Classifier {
            name,
            ieee,
            fc,
            codes,
        })
    };
    let drop_profile = |input: &mut &str| -> PResult<Stmt> {
        kw("drop-profiles").parse_next(input)?;
        let name = cut_err(word).parse_next(input)?;
        let _ = opt(kw("interpolate")).parse_next(input)?;
        let (mut fill, mut probability) = (Vec::new(), Vec::new());
        loop {
            if opt(kw("fill-level")).parse_next(input)?.is_some() {
                fill.extend(cut_err(one_or_list(percent)).parse_next(input)?);
            } else if opt(kw("drop-probability")).parse_next(input)?.is_some() {
                probability.extend(cut_err(one_or_list(percent)).parse_next(input)?);
            } else {
                break;
            }
        }
        if fill.is_empty() && probability.is_empty() {
            cut_err(fail::<_, (), _>.context(expected("fill-level or drop-probability")))
                .parse_next(input)?;
        }
        Ok(Stmt::DropProfile {
            name,
            fill,
            probability,
        })
    };
    let schedulers = |input: &mut &str| -> PResult<Option<Stmt>> {
        kw("schedulers").parse_next(input)?;
        let name = cut_err(word).parse_next(input)?;
        scheduler(name, input)
    };
    let shared_buffer = |input: &mut &str| -> PResult<Stmt> {
        kw("shared-buffer").parse_next(input)?;
        let egress = cut_err(
            alt((kw("ingress").value(false), kw("egress").value(true)))
                .context(expected("ingress or egress")),
        )
        .parse_next(input)?;
        let partition = opt(preceded(
            kw("buffer-partition"),
            cut_err(
                alt((
                    kw("lossless-headroom").value("lossless-headroom"),
                    kw("lossless").value("lossless"),
                    kw("lossy").value("lossy"),
                    kw("multicast").value("multicast"),
                ))
                .context(expected("lossless, lossless-headroom, lossy or multicast")),
            ),
        ))
        .parse_next(input)?;
        let percent = preceded(cut_err(kw("percent")), cut_err(percent)).parse_next(input)?;
        Ok(Stmt::SharedBuffer {
            egress,
            partition,
            percent,
        })
    };
    let scheduler_map = |input: &mut &str| -> PResult<Stmt> {
        kw("scheduler-maps").parse_next(input)?;
        let name = cut_err(word).parse_next(input)?;
        cut_err(kw("forwarding-class")).parse_next(input)?;
        let fc = cut_err(word).parse_next(input)?;
        cut_err(kw("scheduler")).parse_next(input)?;
        let scheduler = cut_err(word).parse_next(input)?;
        Ok(Stmt::SchedulerMap {
            name,
            fc,
            scheduler,
        })
    };
    let cnp = |input: &mut &str| -> PResult<Stmt> {
        kw("congestion-notification-profile").parse_next(input)?;
        let name = cut_err(word).parse_next(input)?;
        kw("input").parse_next(input)?;
        let stmt = alt((
            preceded(
                (kw("dscp"), cut_err(kw("code-point"))),
                cut_err(code_point).map(|dscp| Stmt::CnpDscp {
                    name: name.clone(),
                    dscp,
                }),
            ),
            preceded(
                (kw("ieee-802.1"), cut_err(kw("code-point"))),
                cut_err(priority_bits).map(|priority| Stmt::CnpPriority {
                    name: name.clone(),
                    priority,
                }),
            ),
        ))
        .parse_next(input)?;
        cut_err(kw("pfc")).parse_next(input)?;
        Ok(stmt)
    };
    let interfaces = |input: &mut &str| -> PResult<Stmt> {
        kw("interfaces").parse_next(input)?;
        let iface = interface_name(cut_err(word).parse_next(input)?);
        // Classifiers bind per logical unit (`unit 0`, `unit *`); the
        // simulator's ports have one, so the unit names the port.
        opt(preceded(kw("unit"), cut_err(word))).parse_next(input)?;
        let stmt = alt((
            preceded(kw("congestion-notification-profile"), cut_err(word)).map(|n| (0, n)),
            preceded(kw("scheduler-map"), cut_err(word)).map(|n| (1, n)),
            preceded((kw("classifiers"), kw("dscp")), cut_err(word)).map(|n| (2, n)),
            preceded((kw("classifiers"), kw("ieee-802.1")), cut_err(word)).map(|n| (3, n)),
        ))
        .parse_next(input)?;
        Ok(match stmt {
            (0, cnp) => Stmt::InterfaceCnp { iface, cnp },
            (1, map) => Stmt::InterfaceSchedulerMap { iface, map },
            (k, name) => Stmt::InterfaceClassifier {
                iface,
                ieee: k == 3,
                name,
            },
        })
    };
    kw("class-of-service").parse_next(input)?;
    alt((
        fc_stmt.map(Some),
        classifier.map(Some),
        drop_profile.map(Some),
        schedulers,
        scheduler_map.map(Some),
        shared_buffer.map(Some),
        cnp.map(Some),
        interfaces.map(Some),
    ))
    .parse_next(input)
}

fn statement(input: &mut &str) -> PResult<Option<Stmt>> {
    let host = preceded(
        (kw("system"), kw("host-name")),
        cut_err(word).map(Stmt::HostName),
    );
    let dcbx = preceded(
        (kw("protocols"), kw("dcbx"), kw("interface")),
        (word, kw("priority-flow-control"), kw("no-auto-negotiation"))
            .map(|(i, _, _)| Stmt::DcbxNoAutoNegotiation(interface_name(i))),
    );
    let mtu = preceded(
        kw("interfaces"),
        (
            word,
            kw("mtu"),
            cut_err(
                small(65_535, "an MTU in bytes")
                    .verify(|&m| m >= 256)
                    .context(expected("an MTU in bytes from 256 to 65535")),
            ),
        )
            .map(|(iface, _, m)| Stmt::Mtu {
                iface: interface_name(iface),
                mtu: m as u32,
            }),
    );
    let dlb = preceded(
        (
            kw("forwarding-options"),
            kw("enhanced-hash-key"),
            kw("ecmp-dlb"),
        ),
        alt((
            preceded(
                kw("flowlet"),
                opt(preceded(
                    kw("inactivity-interval"),
                    cut_err(small(u32::MAX as u64, "microseconds")),
                )),
            )
            .map(|us| Stmt::Dlb(Dlb::Flowlet(us.map(|u| u as u32)))),
            kw("per-packet").value(Stmt::Dlb(Dlb::PerPacket)),
            kw("assigned-flow").value(Stmt::Dlb(Dlb::AssignedFlow)),
        )),
    );
    let glb = preceded(
        (kw("protocols"), kw("bgp"), kw("global-load-balancing")),
        cut_err(alt((
            kw("load-balancer-only").value(true),
            kw("helper-only").value(false),
            eof.value(true),
        )))
        .context(expected(
            "load-balancer-only, helper-only or the end of the statement",
        )),
    )
    .map(Stmt::Glb);
    alt((
        host.map(Some),
        class_of_service,
        dcbx.map(Some),
        mtu.map(Some),
        dlb.map(Some),
        glb.map(Some),
    ))
    .parse_next(input)
}

/// Reads one flattened statement: `Ok(None)` when no rule starts it.
pub fn parse(text: &str) -> Result<Option<Stmt>, String> {
    let mut input = text;
    match statement(&mut input) {
        Ok(s) if input.trim().is_empty() || s.is_none() => Ok(s),
        Ok(_) => Err(format!(
            "column {}: expected the end of the statement, got \"{}\"",
            text.len() - input.len() + 1,
            input.split_whitespace().next().unwrap_or("")
        )),
        Err(ErrMode::Backtrack(_)) => Ok(None),
        Err(ErrMode::Cut(e)) => {
            let at = text.len() - input.len();
            let want: Vec<String> = e
                .context()
                .filter_map(|c| match c {
                    StrContext::Expected(v) => Some(v.to_string()),
                    _ => None,
                })
                .collect();
            Err(format!(
                "column {}: expected {}, got {}",
                at + 1,
                if want.is_empty() {
                    "something else".to_string()
                } else {
                    want.join(" or ")
                },
                input
                    .split_whitespace()
                    .next()
                    .map_or("the end of the statement".to_string(), |w| format!(
                        "\"{w}\""
                    ))
            ))
        }
        Err(ErrMode::Incomplete(_)) => Err("incomplete statement".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_and_set_lines_flatten_alike() {
        let braces = "class-of-service {\n  schedulers {\n    s3 {\n      transmit-rate percent 50;\n      explicit-congestion-notification;\n    }\n  }\n  /* a comment */\n  classifiers {\n    dscp c1 {\n      forwarding-class NO-LOSS {\n        loss-priority low code-points [ 011000 011010 ];\n      }\n    }\n  }\n}\n";
        let set = "set class-of-service schedulers s3 transmit-rate percent 50\n# a comment\nset class-of-service schedulers s3 explicit-congestion-notification\nset class-of-service classifiers dscp c1 forwarding-class NO-LOSS loss-priority low code-points [ 011000 011010 ]\n";
        let a: Vec<String> = statements(braces)
            .unwrap()
            .into_iter()
            .map(|s| s.text)
            .collect();
        let b: Vec<String> = statements(set)
            .unwrap()
            .into_iter()
            .map(|s| s.text)
            .collect();
        assert_eq!(a, b);
        assert_eq!(statements(braces).unwrap()[0].line, 4);
        assert_eq!(
            parse(&a[2]).unwrap(),
            Some(Stmt::Classifier {
                name: "c1".into(),
                ieee: false,
                fc: "NO-LOSS".into(),
                codes: vec![24, 26],
            })
        );
    }

    #[test]
    fn the_statements_read() {
        let p = |s: &str| parse(s).unwrap().unwrap();
        assert_eq!(
            p("class-of-service classifiers ieee-802.1 pcp forwarding-class NO-LOSS loss-priority low code-points [ 011 100 ]"),
            Stmt::Classifier {
                name: "pcp".into(),
                ieee: true,
                fc: "NO-LOSS".into(),
                codes: vec![3, 4],
            }
        );
        assert_eq!(
            p("class-of-service interfaces et-0/0/* classifiers ieee-802.1 pcp"),
            Stmt::InterfaceClassifier {
                iface: "et-0/0/*".into(),
                ieee: true,
                name: "pcp".into(),
            }
        );
        assert!(parse("class-of-service classifiers ieee-802.1 pcp forwarding-class X loss-priority low code-points 011000").is_err());
        assert_eq!(
            p("class-of-service forwarding-classes class NO-LOSS queue-num 3 no-loss pfc-priority 3"),
            Stmt::ForwardingClass {
                fc: "NO-LOSS".into(),
                queue: Some(3),
                no_loss: true,
                pfc_priority: Some(3)
            }
        );
        assert_eq!(
            p("class-of-service drop-profiles dp1 interpolate fill-level [ 10 50 ] drop-probability [ 0 20 ]"),
            Stmt::DropProfile {
                name: "dp1".into(),
                fill: vec![10, 50],
                probability: vec![0, 20]
            }
        );
        assert_eq!(
            p("class-of-service schedulers s7 priority strict-high"),
            Stmt::SchedulerPriority {
                name: "s7".into(),
                priority: Priority::StrictHigh
            }
        );
        assert_eq!(
            p("class-of-service congestion-notification-profile cnp1 input dscp code-point 011000 pfc"),
            Stmt::CnpDscp {
                name: "cnp1".into(),
                dscp: 24
            }
        );
        assert_eq!(
            p("class-of-service interfaces et-0/0/* congestion-notification-profile cnp1"),
            Stmt::InterfaceCnp {
                iface: "et-0/0/*".into(),
                cnp: "cnp1".into()
            }
        );
        assert_eq!(
            p("forwarding-options enhanced-hash-key ecmp-dlb flowlet inactivity-interval 128"),
            Stmt::Dlb(Dlb::Flowlet(Some(128)))
        );
        assert_eq!(
            p("protocols bgp global-load-balancing load-balancer-only"),
            Stmt::Glb(true)
        );
        assert_eq!(p("protocols bgp global-load-balancing"), Stmt::Glb(true));
        assert_eq!(
            p("protocols bgp global-load-balancing helper-only"),
            Stmt::Glb(false)
        );
        assert_eq!(
            p("class-of-service schedulers s0 shaping-rate 100g"),
            Stmt::SchedulerShape {
                name: "s0".into(),
                bps: 100_000_000_000
            }
        );
        // Unknown statements are not modelled; known ones gone wrong are
        // errors with a column.
        assert_eq!(parse("snmp community public").unwrap(), None);
        assert_eq!(
            parse("class-of-service host-outbound-traffic forwarding-class x").unwrap(),
            None
        );
        let e = parse("class-of-service schedulers s3 transmit-rate percent 150").unwrap_err();
        assert!(e.contains("column 54") && e.contains("percentage"), "{e}");
        let e = parse("class-of-service classifiers dscp c1 forwarding-class X loss-priority low code-points 0110").unwrap_err();
        assert!(e.contains("DSCP code point"), "{e}");
    }

    #[test]
    fn broken_structure_is_an_error_with_its_line() {
        assert_eq!(statements("a {\n b;\n").unwrap_err().1, "1 unclosed {");
        assert_eq!(
            statements("a;\n}\n").unwrap_err(),
            (2, "a } closes nothing".into())
        );
        assert_eq!(statements("a b\n").unwrap_err().0, 2);
        assert!(statements("set a [ b\n").is_err());
        assert!(statements("x \"open\n").is_err());
    }
}

// ---- mapping to scenario keys ----

#[derive(Default)]
struct Scheduler {
    percent: Option<(usize, u8)>,
    priority: Option<(usize, Priority)>,
    ecn: Option<usize>,
    profile: Option<(usize, String)>,
    shape: Option<(usize, u64)>,
}

#[derive(Default)]
struct DropProfile {
    line: usize,
    fill: Vec<u8>,
    probability: Vec<u8>,
}

/// The interfaces' one setting of a kind (classifier, scheduler map):
/// every interface must name the same, as the simulator applies one to
/// every port. Refused otherwise, naming both lines.
fn one_for_all(
    file: &str,
    what: &str,
    uses: &[(usize, String, String)],
) -> Result<Option<(usize, String)>, ConfigError> {
    let Some((first, _, name)) = uses.first() else {
        return Ok(None);
    };
    if let Some((line, iface, other)) = uses.iter().find(|u| u.2 != *name) {
        return Err(err(
            file,
            *line,
            format!(
                "{iface} uses {what} {other}, but line {first} {name}; the simulator applies one {what} to every port"
            ),
        ));
    }
    Ok(Some((*first, name.clone())))
}

/// Configuration groups applied where `apply-groups` names them, as
/// Junos inherits them: a group's statement (`groups G class-of-service
/// interfaces <*> unit * classifiers dscp X`) joins the configuration,
/// with its own line, under every hierarchy level that applies the group
/// (`apply-groups G` at the top, `class-of-service apply-groups G`
/// below). The statements of a group no level applies are returned
/// apart, as they configure nothing.
pub fn apply_groups(
    stmts: Vec<Statement>,
) -> Result<(Vec<Statement>, Vec<Statement>), (usize, String)> {
    let mut groups: BTreeMap<String, Vec<Statement>> = BTreeMap::new();
    let mut applied: Vec<(usize, Vec<String>, Vec<String>)> = Vec::new();
    let mut out = Vec::new();
    for s in stmts {
        let words: Vec<&str> = s.text.split(' ').collect();
        if words.first() == Some(&"groups") && words.len() > 2 {
            groups
                .entry(words[1].to_string())
                .or_default()
                .push(Statement {
                    line: s.line,
                    text: words[2..].join(" "),
                });
        } else if let Some(at) = words.iter().position(|w| *w == "apply-groups") {
            let names: Vec<String> = words[at + 1..]
                .iter()
                .filter(|w| !matches!(**w, "[" | "]"))
                .map(|w| w.to_string())
                .collect();
            if names.is_empty() {
                return Err((s.line, "apply-groups names no group".into()));
            }
            let prefix = words[..at].iter().map(|w| w.to_string()).collect();
            applied.push((s.line, prefix, names));
        } else {
            out.push(s);
        }
    }
    let mut used = std::collections::BTreeSet::new();
    for (line, prefix, names) in &applied {
        for name in names {
            let Some(group) = groups.get(name) else {
                return Err((
                    *line,
                    format!("apply-groups {name}: no group {name} is defined"),
                ));
            };
            used.insert(name.clone());
            for g in group {
                let words: Vec<&str> = g.text.split(' ').collect();
                if words.len() > prefix.len() && words.iter().zip(prefix).all(|(a, b)| a == b) {
                    out.push(g.clone());
                }
            }
        }
    }
    let unused = groups
        .into_iter()
        .filter(|(n, _)| !used.contains(n))
        .flat_map(|(n, g)| {
            g.into_iter().map(move |s| Statement {
                line: s.line,
                text: format!("groups {n} {}", s.text),
            })
        })
        .collect();
    Ok((out, unused))
}

/// Reads Junos text; `file` names it in messages.
pub fn import(file: &str, text: &str) -> Result<Import, ConfigError> {
    let stmts = statements(text).map_err(|(line, m)| err(file, line, m))?;
    let (stmts, unapplied) = apply_groups(stmts).map_err(|(line, m)| err(file, line, m))?;
    let mut hostname = None;
    let mut fcs: BTreeMap<String, (usize, Option<u8>, bool, Option<u8>)> = BTreeMap::new();
    let mut classifiers: BTreeMap<String, Vec<(usize, String, Vec<u8>)>> = BTreeMap::new();
    let mut profiles: BTreeMap<String, DropProfile> = BTreeMap::new();
    let mut schedulers: BTreeMap<String, Scheduler> = BTreeMap::new();
    let mut maps: BTreeMap<String, Vec<(usize, String, String)>> = BTreeMap::new();
    let mut cnps: BTreeMap<String, (usize, Vec<u8>, Vec<u8>)> = BTreeMap::new();
    let mut ieee_classifiers: BTreeMap<String, Vec<(usize, String, Vec<u8>)>> = BTreeMap::new();
    let (mut if_cnp, mut if_map, mut if_class) = (Vec::new(), Vec::new(), Vec::new());
    let mut if_ieee = Vec::new();
    let mut no_auto: Vec<(usize, String)> = Vec::new();
    let mut mtus: Vec<(usize, String, u32)> = Vec::new();
    let mut dlb: Option<(usize, Dlb)> = None;
    // `shared-buffer`: each direction's share and its partitions', with
    // their lines.
    let mut shared: BTreeMap<(bool, Option<&'static str>), (usize, u8)> = BTreeMap::new();
    let mut glb: Option<(usize, bool)> = None;
    let mut notes = Vec::new();
    let mut not_modelled: Vec<(usize, String)> = unapplied
        .into_iter()
        .map(|s| (s.line, format!("{} (its group is applied nowhere)", s.text)))
        .collect();
    let mut read = 0usize;
    for s in &stmts {
        let no = s.line;
        let stmt = parse(&s.text).map_err(|m| err(file, no, format!("\"{}\": {m}", s.text)))?;
        let Some(stmt) = stmt else {
            not_modelled.push((no, s.text.clone()));
            continue;
        };
        read += 1;
        match stmt {
            Stmt::HostName(h) => hostname = Some(h),
            Stmt::ForwardingClass {
                fc,
                queue,
                no_loss,
                pfc_priority,
            } => {
                let e = fcs.entry(fc).or_insert((no, None, false, None));
                e.1 = queue.or(e.1);
                e.2 |= no_loss;
                e.3 = pfc_priority.or(e.3);
            }
            Stmt::Classifier {
                name,
                ieee,
                fc,
                codes,
            } => if ieee {
                &mut ieee_classifiers
            } else {
                &mut classifiers
            }
            .entry(name)
            .or_default()
            .push((no, fc, codes)),
            Stmt::DropProfile {
                name,
                fill,
                probability,
            } => {
                let p = profiles.entry(name).or_insert_with(|| DropProfile {
                    line: no,
                    ..DropProfile::default()
                });
                p.fill.extend(fill);
                p.probability.extend(probability);
            }
            Stmt::SchedulerRate { name, percent } => {
                sched(&mut schedulers, name).percent = Some((no, percent))
            }
            Stmt::SchedulerPriority { name, priority } => {
                sched(&mut schedulers, name).priority = Some((no, priority))
            }
            Stmt::SchedulerEcn(name) => sched(&mut schedulers, name).ecn = Some(no),
            Stmt::SchedulerDropProfile { name, profile } => {
                sched(&mut schedulers, name).profile = Some((no, profile))
            }
            Stmt::SchedulerShape { name, bps } => {
                sched(&mut schedulers, name).shape = Some((no, bps))
            }
            Stmt::SchedulerBuffer { name, .. } => {
                sched(&mut schedulers, name);
                notes.push((
                    no,
                    "buffer-size: the simulator's queues share the switch buffer (switch.buffer, dynamic_threshold)".into(),
                ));
            }
            Stmt::SchedulerMap {
                name,
                fc,
                scheduler,
            } => maps.entry(name).or_default().push((no, fc, scheduler)),
            Stmt::CnpDscp { name, dscp } => cnps
                .entry(name)
                .or_insert((no, Vec::new(), Vec::new()))
                .1
                .push(dscp),
            Stmt::CnpPriority { name, priority } => cnps
                .entry(name)
                .or_insert((no, Vec::new(), Vec::new()))
                .2
                .push(priority),
            Stmt::InterfaceCnp { iface, cnp } => if_cnp.push((no, iface, cnp)),
            Stmt::InterfaceSchedulerMap { iface, map } => if_map.push((no, iface, map)),
            Stmt::InterfaceClassifier { iface, ieee, name } => {
                if ieee {
                    if_ieee.push((no, iface, name))
                } else {
                    if_class.push((no, iface, name))
                }
            }
            Stmt::DcbxNoAutoNegotiation(iface) => no_auto.push((no, iface)),
            Stmt::Mtu { iface, mtu } => mtus.push((no, iface, mtu)),
            Stmt::Dlb(d) => dlb = Some((no, d)),
            Stmt::SharedBuffer {
                egress,
                partition,
                percent,
            } => {
                shared.insert((egress, partition), (no, percent));
            }
            Stmt::Glb(balances) => glb = Some((no, balances)),
        }
    }
    super::no_configuration(file, "Junos", read, stmts.len())?;

    // Forwarding classes are the queues; the applied classifier gives
    // them their DSCPs.
    let mut queues: [Queue; 8] = Default::default();
    let mut queue_of: BTreeMap<String, u8> = BTreeMap::new();
    for (fc, &(line, queue, no_loss, pfc_priority)) in &fcs {
        let Some(q) = queue else {
            return Err(err(
                file,
                line,
                format!("forwarding class {fc} has no queue-num"),
            ));
        };
        if let Some((other, _)) = queues[q as usize].name.as_ref() {
            return Err(err(
                file,
                line,
                format!(
                    "forwarding class {fc} takes queue {q}, which line {other} gave another class"
                ),
            ));
        }
        queues[q as usize].name = Some((line, fc.clone()));
        queue_of.insert(fc.clone(), q);
        if no_loss {
            queues[q as usize].pfc = Some(line);
            if let Some(p) = pfc_priority.filter(|&p| p != q) {
                queues[q as usize].pfc_priority = Some((line, p));
            }
        }
    }
    if queues[0].name.is_none() {
        // Junos's default class for what nothing classifies, which a
        // scheduler map may name without defining it.
        queues[0].name = Some((0, "best-effort".into()));
        queue_of.entry("best-effort".into()).or_insert(0);
    }
    queues[0].catch_all = true;
    let classifier = one_for_all(file, "classifier", &if_class)?;
    let ieee_classifier = one_for_all(file, "IEEE 802.1 classifier", &if_ieee)?;
    // The classifier that classifies: the DSCP one, else the IEEE 802.1
    // one (by the priority of tagged frames).
    let chosen = match (&classifier, &ieee_classifier) {
        (Some(c), _) => Some((c, false)),
        (None, Some(c)) => Some((c, true)),
        (None, None) => None,
    };
    match chosen {
        None => notes.push((
            0,
            "no DSCP classifier is applied to an interface: every packet is in queue 0, one class"
                .into(),
        )),
        Some(((line, name), ieee)) => {
            let (defined, what, unit) = if ieee {
                (&ieee_classifiers, "IEEE 802.1 classifier", "priority")
            } else {
                (&classifiers, "classifier", "DSCP")
            };
            let entries = defined.get(name).ok_or_else(|| {
                err(
                    file,
                    *line,
                    format!("names {what} {name}, which the configuration does not define"),
                )
            })?;
            fn listed(o: &super::Queue, ieee: bool) -> &[u8] {
                if ieee {
                    &o.cos
                } else {
                    &o.dscp
                }
            }
            for (eline, fc, codes) in entries {
                let q = *queue_of.get(fc).ok_or_else(|| {
                    err(file, *eline, format!("forwarding class {fc} is not defined (forwarding-classes class {fc} queue-num N)"))
                })?;
                for &v in codes {
                    if let Some(other) = queues.iter().position(|o| listed(o, ieee).contains(&v)) {
                        notes.push((
                            *eline,
                            format!(
                                "{unit} {v} is already classified to queue {other}; the first wins"
                            ),
                        ));
                        continue;
                    }
                    let queue = &mut queues[q as usize];
                    if !ieee {
                        queue.dscp.push(v);
                        continue;
                    }
                    queue.cos.push(v);
                    if !queue.cos_lines.contains(eline) {
                        queue.cos_lines.push(*eline);
                    }
                }
            }
            if ieee {
                notes.push((
                    *line,
                    "an IEEE 802.1 classifier: the 802.1p priority of a tagged frame (qos.vlan_tagging = true; the NICs stamp qos.nic_priority); an untagged frame is priority 0".into(),
                ));
            }
        }
    }
    if let (Some(_), Some((line, _))) = (&classifier, &ieee_classifier) {
        // Which of the two takes IP traffic is not the same on every
        // platform: the DSCP classifier is the one RoCEv2 deployments
        // rely on.
        for (no, _, _) in &if_ieee {
            if let Some(st) = stmts.iter().find(|s| s.line == *no) {
                not_modelled.push((*no, st.text.clone()));
            }
        }
        notes.push((
            *line,
            "an IEEE 802.1 classifier besides the DSCP classifier: RoCEv2 frames are IP, and the simulation classifies them by DSCP alone (which of the two a switch applies to IP traffic depends on the platform)".into(),
        ));
    }
    // The applied scheduler map gives each class its scheduling, WRED
    // (ECN) and shaping.
    if let Some((line, name)) = one_for_all(file, "scheduler map", &if_map)? {
        let entries = maps.get(&name).ok_or_else(|| {
            err(
                file,
                line,
                format!("names scheduler map {name}, which the configuration does not define"),
            )
        })?;
        for (eline, fc, sname) in entries {
            let q = *queue_of.get(fc).ok_or_else(|| {
                err(
                    file,
                    *eline,
                    format!("forwarding class {fc} is not defined"),
                )
            })?;
            let s = schedulers
                .get(sname)
                .ok_or_else(|| err(file, *eline, format!("scheduler {sname} is not defined")))?;
            let queue = &mut queues[q as usize];
            match s.priority {
                Some((pl, Priority::StrictHigh)) => queue.strict = Some(pl),
                Some((pl, p)) if p != Priority::Low => notes.push((
                    pl,
                    format!("priority {p:?} in scheduler {sname}: the simulator schedules it by its transmit-rate share among the classes that are not strict-high"),
                )),
                _ => {}
            }
            if let Some((pl, p)) = s.percent {
                queue.percent = Some((pl, p));
                notes.push((
                    pl,
                    "transmit-rate percent is read as the class's share of what strict-high leaves"
                        .into(),
                ));
            }
            queue.shape = s.shape;
            if let Some((pl, pname)) = &s.profile {
                let p = profiles.get(pname).ok_or_else(|| {
                    err(file, *pl, format!("drop profile {pname} is not defined"))
                })?;
                let (Some(&lo), Some(&hi)) = (p.fill.first(), p.fill.last()) else {
                    return Err(err(
                        file,
                        p.line,
                        format!("drop profile {pname} gives no fill-level"),
                    ));
                };
                if p.fill.len() > 2 {
                    notes.push((p.line, format!("drop profile {pname} has {} points; the simulator's WRED is linear from the first to the last", p.fill.len())));
                }
                let top = p.probability.last().copied().unwrap_or(100);
                if p.probability.first().is_some_and(|&f| f != 0) {
                    notes.push((p.line, "the first drop-probability is not 0: the simulator's WRED starts from 0 at the first fill level".into()));
                }
                if hi == 0 {
                    return Err(err(
                        file,
                        p.line,
                        format!("drop profile {pname}'s last fill level is 0%: it would drop or mark from an empty queue (a profile that never drops has a last fill level of 100)"),
                    ));
                }
                if lo > hi {
                    return Err(err(file, p.line, "the fill levels decrease".to_string()));
                }
                queue.wred = Some((
                    p.line,
                    Wred {
                        min: Some((u64::from(lo), Unit::Percent)),
                        max: Some((u64::from(hi), Unit::Percent)),
                        preset: None,
                        probability: Some(top),
                        weight: 0,
                        ecn: s.ecn.is_some(),
                    },
                ));
            } else if let Some(el) = s.ecn {
                notes.push((
                    el,
                    format!("scheduler {sname} marks ECN but has no drop profile: nothing marks"),
                ));
            }
        }
    }
    if let Some((_, _, mtu)) = mtus.iter().min_by_key(|m| m.2) {
        let lines: Vec<usize> = mtus.iter().map(|m| m.0).collect();
        for q in queues.iter_mut().filter(|q| q.name.is_some()) {
            q.mtu = Some((lines[0], *mtu));
        }
        notes.push((
            lines[0],
            format!("interface MTUs: every class carries frames up to the smallest, {mtu} B"),
        ));
    }
    let (sections, lossless) = super::class_sections(
        file,
        &mut queues,
        "its forwarding class's queue-num",
        false,
        &mut notes,
    )?;
    let mut sections = sections;
    sections.push(Section {
        path: "pfc",
        repeated: false,
        keys: vec![Key {
            name: "enabled",
            value: Value::Boolean(lossless.is_some()),
            note: lossless.map_or("no no-loss forwarding class".into(), |l| line_note(&[l])),
        }],
    });
    // PFC per interface: a congestion notification profile that enables
    // it on a lossless class's DSCP or priority; DCBX negotiates it unless
    // told not to.
    let lossless_dscp: Vec<u8> = queues
        .iter()
        .filter(|q| q.pfc.is_some())
        .flat_map(|q| q.dscp.clone())
        .collect();
    let lossless_queues: Vec<u8> = (0..8u8)
        .filter(|&q| queues[q as usize].pfc.is_some())
        .collect();
    let mut interfaces = Vec::new();
    for (line, iface, cnp) in &if_cnp {
        let (cline, dscps, prios) = cnps.get(cnp).ok_or_else(|| {
            err(file, *line, format!("names congestion-notification-profile {cnp}, which the configuration does not define"))
        })?;
        let pauses = dscps.iter().any(|d| lossless_dscp.contains(d))
            || prios.iter().any(|p| lossless_queues.contains(p));
        if !pauses {
            notes.push((*cline, format!("congestion-notification-profile {cnp} enables PFC on no lossless class's DSCP or priority: {iface} does not pause")));
        }
        let forced = no_auto
            .iter()
            .find(|(_, i)| super::glob(i, iface) || super::glob(iface, i));
        interfaces.push(Interface {
            line: *line,
            names: vec![iface.clone()],
            pfc: Some(match (pauses, forced) {
                (false, _) => (*line, PfcMode::Off),
                (true, Some((fl, _))) => (*fl, PfcMode::On),
                (true, None) => (*line, PfcMode::Auto),
            }),
            watchdog: None,
            classification: classifier.clone().or_else(|| ieee_classifier.clone()),
        });
    }
    if lossless.is_some() {
        notes.push((
            0,
            "a port no congestion-notification-profile covers has PFC off: its links are lossy"
                .into(),
        ));
    }
    partitions(&shared, &mut sections, &mut notes);
    if let Some((gl, false)) = glb {
        notes.push((
            gl,
            "helper-only: the switch reports its link qualities; in the simulation every neighbour of a GLB switch does".into(),
        ));
    }
    let glb_line = glb.filter(|g| g.1).map(|g| g.0);
    if let (Some(gl), None) = (glb_line, dlb) {
        notes.push((
            gl,
            "GLB without ecmp-dlb: flowlets with the simulator's DLB defaults".into(),
        ));
    }
    if let Some((l, d)) = dlb.or(glb_line.map(|gl| (gl, Dlb::Flowlet(None)))) {
        let mut keys = vec![Key {
            name: "mode",
            value: Value::String(if glb_line.is_some() { "glb" } else { "dlb" }.into()),
            note: line_note(&[glb_line.unwrap_or(l)]),
        }];
        let mode = match d {
            Dlb::Flowlet(_) => "flowlet",
            Dlb::PerPacket => "per-packet",
            Dlb::AssignedFlow => {
                notes.push((l, "assigned-flow: DLB places new flows by quality and never moves them; the simulator's flowlet mode with the longest inactivity interval does the same".into()));
                "flowlet"
            }
        };
        keys.push(Key {
            name: "dlb_mode",
            value: Value::String(mode.into()),
            note: line_note(&[l]),
        });
        let us = match d {
            Dlb::Flowlet(Some(us)) => Some(us),
            Dlb::AssignedFlow => Some(1_000_000),
            _ => None,
        };
        if let Some(us) = us {
            keys.push(Key {
                name: "flowlet_timeout",
                value: Value::String(format!("{us}us")),
                note: line_note(&[l]),
            });
        }
        sections.push(Section {
            path: "switch.balance",
            repeated: false,
            keys,
        });
    }
    not_modelled.sort_by_key(|n| n.0);
    notes.sort_by_key(|n| n.0);
    Ok(Import {
        file: file.to_string(),
        dialect: "Junos",
        hostname,
        sections,
        interfaces,
        dlb_ports: Vec::new(),
        default_pfc: PfcMode::Off,
        notes,
        not_modelled,
    })
}

/// `shared-buffer`'s partitions as `switch.partitions`: what lossless and
/// lossy classes may hold, the smaller of their ingress and egress
/// partitions (each a direction's share times the partition's), in
/// percent of the buffer. The headroom and multicast partitions are
/// noted: headroom is reserved per port and priority here
/// (`qos.class headroom`), and the simulated traffic is unicast.
fn partitions(
    shared: &BTreeMap<(bool, Option<&'static str>), (usize, u8)>,
    sections: &mut Vec<Section>,
    notes: &mut Vec<(usize, String)>,
) {
    let mut keys = Vec::new();
    for kind in ["lossless", "lossy"] {
        let mut best: Option<(f64, Vec<usize>)> = None;
        for egress in [false, true] {
            let Some(&(pl, p)) = shared.get(&(egress, Some(kind))) else {
                continue;
            };
            let (dl, d) = shared.get(&(egress, None)).copied().unwrap_or((pl, 100));
            let share = f64::from(d) * f64::from(p) / 100.0;
            if best.as_ref().is_none_or(|b| share < b.0) {
                best = Some((share, vec![dl.min(pl), dl.max(pl)]));
            }
        }
        if let Some((share, mut lines)) = best {
            lines.dedup();
            let text = format!("{share:.2}");
            let text = text.trim_end_matches('0').trim_end_matches('.');
            keys.push(Key {
                name: kind,
                value: Value::String(format!("{text}%")),
                note: line_note(&lines),
            });
        }
    }
    for ((egress, part), (l, _)) in shared {
        match part {
            Some("lossless-headroom") => notes.push((*l, "the lossless-headroom partition: the simulator reserves headroom per port and lossless priority (qos.class headroom, by default what the port's cable needs); this partition is not used".into())),
            Some("multicast") => notes.push((*l, "the multicast partition: the simulated traffic is unicast".into())),
            None if !shared.keys().any(|k| k.0 == *egress && k.1.is_some()) => notes.push((*l, format!("shared-buffer {} percent without partitions: no partition caps a kind of class", if *egress { "egress" } else { "ingress" }))),
            _ => {}
        }
    }
    if !keys.is_empty() {
        sections.push(Section {
            path: "switch.partitions",
            repeated: false,
            keys,
        });
    }
}

fn sched(all: &mut BTreeMap<String, Scheduler>, name: String) -> &mut Scheduler {
    all.entry(name).or_default()
}
