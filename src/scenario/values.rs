//! The value parsers every scenario section uses: sizes, durations,
//! rates, counts, probabilities and enumerated names, each with the error
//! that names the key, what was given and what was expected. A leaf: it
//! knows nothing of the sections.

use toml::Value;

use super::error::{KeyError, KeyPath};
use crate::units::{parse_bytes, parse_rate, parse_time, Rate, SimTime};

type R<T> = Result<T, KeyError>;

/// An enumerated key whose type parses its own names (`names` lists them
/// for the error): `parse(name)`, or `default` when the key is absent.
pub fn named<T>(
    v: Option<&str>,
    path: &KeyPath,
    names: &[&str],
    parse: impl Fn(&str) -> Option<T>,
    default: T,
) -> R<T> {
    let Some(name) = v else {
        return Ok(default);
    };
    parse(name).ok_or_else(|| {
        KeyError::new(
            path,
            format!("got \"{name}\", expected one of {}", names.join(", ")),
        )
    })
}

/// An enumerated key: one of `options` (name, value), or `default` when
/// the key is absent.
pub fn choice<T: Copy>(v: Option<&str>, path: &KeyPath, options: &[(&str, T)], default: T) -> R<T> {
    let Some(name) = v else {
        return Ok(default);
    };
    options
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, t)| t)
        .ok_or_else(|| {
            let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
            KeyError::new(
                path,
                format!("got \"{name}\", expected one of {}", names.join(", ")),
            )
        })
}

pub fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{s}\""),
        other => other.to_string(),
    }
}

pub fn count(v: Option<i64>, path: &KeyPath, default: u32, min: u32) -> R<u32> {
    match v {
        None => Ok(default),
        Some(n) if n >= min as i64 && n <= u32::MAX as i64 => Ok(n as u32),
        Some(n) => Err(KeyError::new(
            path,
            format!("got {n}, expected an integer of at least {min}"),
        )),
    }
}

/// Link speeds the simulator accepts: 1 Gb/s to 10 Tb/s.
const RATE_RANGE: std::ops::RangeInclusive<u64> = 1_000_000_000..=10_000_000_000_000;
/// Longest duration a scenario may name (about 11.6 days), so that no sum
/// of times can overflow the picosecond clock.
const MAX_TIME_PS: u64 = 1_000_000_000_000_000_000;

pub fn rate(v: Option<&Value>, path: &KeyPath, default: Rate) -> R<Rate> {
    match v {
        None => Ok(default),
        Some(Value::String(s)) => match parse_rate(s) {
            Some(r) if RATE_RANGE.contains(&r.bps()) => Ok(r),
            Some(_) => Err(KeyError::new(path, format!("got \"{s}\", expected a rate between 1G and 10T"))),
            None => Err(KeyError::new(
                path,
                format!("got \"{s}\", expected a rate in bits per second such as \"100G\", \"400Gbps\" or \"1.6T\""),
            )),
        },
        Some(other) => Err(KeyError::new(
            path,
            format!("got {}, expected a rate string such as \"400G\"", show(other)),
        )),
    }
}

pub fn size(v: Option<&Value>, path: &KeyPath, default: u64) -> R<u64> {
    let bad = |given: String| {
        KeyError::new(
            path,
            format!(
                "got {given}, expected a positive size in bytes such as 4096, \"4KiB\" or \"2MB\""
            ),
        )
    };
    match v {
        None => Ok(default),
        Some(Value::Integer(n)) if *n > 0 => Ok(*n as u64),
        Some(Value::String(s)) => match parse_bytes(s) {
            Some(b) if b > 0 => Ok(b),
            _ => Err(bad(format!("\"{s}\""))),
        },
        Some(other) => Err(bad(show(other))),
    }
}

pub fn time(v: Option<&Value>, path: &KeyPath, default: SimTime) -> R<SimTime> {
    match v {
        None => Ok(default),
        Some(Value::String(s)) => match parse_time(s) {
            Some(t) if t.0 <= MAX_TIME_PS => Ok(t),
            Some(_) => Err(KeyError::new(path, format!("got \"{s}\", expected at most 1000000s"))),
            None => Err(KeyError::new(
                path,
                format!("got \"{s}\", expected a duration with a unit such as \"500ns\", \"1us\" or \"2ms\""),
            )),
        },
        Some(other) => Err(KeyError::new(
            path,
            format!("got {}, expected a duration string such as \"1us\"", show(other)),
        )),
    }
}

/// A number between 0 and 1.
pub fn probability(v: &Value, path: &KeyPath) -> R<f64> {
    let x = match v {
        Value::Float(f) => Some(*f),
        Value::Integer(n) => Some(*n as f64),
        _ => None,
    };
    match x {
        Some(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(KeyError::new(
            path,
            format!(
                "got {}, expected a probability between 0 and 1 (0.07 = 7%)",
                show(v)
            ),
        )),
    }
}

/// A rate from 1 b/s up (DCQCN steps are a few Mb/s).
pub fn small_rate(v: Option<&Value>, path: &KeyPath) -> R<Option<Rate>> {
    match v {
        None => Ok(None),
        Some(Value::String(s)) => match parse_rate(s) {
            Some(r) if r.bps() > 0 && r.bps() <= 10_000_000_000_000 => Ok(Some(r)),
            _ => Err(KeyError::new(
                path,
                format!("got \"{s}\", expected a rate such as \"5M\", \"40Mbps\" or \"1G\""),
            )),
        },
        Some(other) => Err(KeyError::new(
            path,
            format!(
                "got {}, expected a rate string such as \"40M\"",
                show(other)
            ),
        )),
    }
}

pub fn positive_time(v: Option<&Value>, path: &KeyPath, default: SimTime) -> R<SimTime> {
    let t = time(v, path, default)?;
    if t == SimTime::ZERO {
        return Err(KeyError::new(path, "got 0, expected a positive duration"));
    }
    Ok(t)
}

pub fn fraction(v: Option<&Value>, path: &KeyPath, default: f64, what: &str) -> R<f64> {
    match v {
        None => Ok(default),
        Some(Value::Float(f)) if *f > 0.0 && *f <= 1.0 => Ok(*f),
        Some(Value::Integer(1)) => Ok(1.0),
        Some(other) => Err(KeyError::new(
            path,
            format!("got {}, expected {what} above 0 and at most 1", show(other)),
        )),
    }
}
