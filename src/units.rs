//! Units of the simulated world: picosecond time, bit rates and byte sizes.
//!
//! Simulated time is an integer count of picoseconds so that serialization
//! times at 100/200/400/800 Gb/s (80, 40, 20, 10 ps per byte) are exact and
//! runs are bit-for-bit repeatable. Floating point appears only in reports.
//! The parsers here read the unit strings scenario files use ("400G",
//! "2MB", "1us", "5m"); they know nothing about scenario keys.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point or span of simulated time, in picoseconds.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct SimTime(pub u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    pub const MAX: SimTime = SimTime(u64::MAX);

    pub const fn from_ns(ns: u64) -> SimTime {
        SimTime(ns * 1_000)
    }
    pub const fn from_us(us: u64) -> SimTime {
        SimTime(us * 1_000_000)
    }
    pub const fn ps(self) -> u64 {
        self.0
    }
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    pub fn saturating_sub(self, other: SimTime) -> SimTime {
        SimTime(self.0.saturating_sub(other.0))
    }
}

impl Add for SimTime {
    type Output = SimTime;
    fn add(self, rhs: SimTime) -> SimTime {
        SimTime(self.0 + rhs.0)
    }
}
impl AddAssign for SimTime {
    fn add_assign(&mut self, rhs: SimTime) {
        self.0 += rhs.0;
    }
}
impl Sub for SimTime {
    type Output = SimTime;
    fn sub(self, rhs: SimTime) -> SimTime {
        SimTime(self.0 - rhs.0)
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ps = self.0;
        if ps >= 1_000_000_000 {
            write!(f, "{:.3} ms", ps as f64 / 1e9)
        } else if ps >= 1_000_000 {
            write!(f, "{:.3} us", ps as f64 / 1e6)
        } else if ps >= 1_000 {
            write!(f, "{:.3} ns", ps as f64 / 1e3)
        } else {
            write!(f, "{ps} ps")
        }
    }
}

/// A link or sending rate in bits per second.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Rate(pub u64);

impl Rate {
    pub const fn gbps(g: u64) -> Rate {
        Rate(g * 1_000_000_000)
    }
    pub const fn bps(self) -> u64 {
        self.0
    }

    /// Time to put `bytes` on the wire at this rate, rounded up to a whole
    /// picosecond (a transmission never finishes early).
    pub fn serialize(self, bytes: u64) -> SimTime {
        let bits = bytes as u128 * 8 * 1_000_000_000_000;
        let r = self.0 as u128;
        SimTime(bits.div_ceil(r) as u64)
    }

    /// Picoseconds per byte when that is a whole number (true for every
    /// standard Ethernet speed from 1G to 1.6T), which lets the hot path
    /// multiply instead of divide.
    pub fn exact_ps_per_byte(self) -> Option<u64> {
        let num = 8_000_000_000_000u64;
        (self.0 != 0 && num.is_multiple_of(self.0)).then(|| num / self.0)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b.is_multiple_of(1_000_000_000_000) {
            write!(f, "{}T", b / 1_000_000_000_000)
        } else if b.is_multiple_of(1_000_000_000) {
            write!(f, "{}G", b / 1_000_000_000)
        } else if b.is_multiple_of(1_000_000) {
            write!(f, "{}M", b / 1_000_000)
        } else {
            write!(f, "{}bps", b)
        }
    }
}

/// Formats a rate in bits per second with a Mb/s, Gb/s or Tb/s suffix
/// (a DCQCN rate cut to its floor is a few Mb/s, not "0.0 Gb/s").
pub fn fmt_bps(bps: f64) -> String {
    if bps >= 1e12 {
        format!("{:.2} Tb/s", bps / 1e12)
    } else if bps >= 1e9 || bps == 0.0 {
        format!("{:.1} Gb/s", bps / 1e9)
    } else {
        format!("{:.1} Mb/s", bps / 1e6)
    }
}

/// Formats a byte count with a decimal (SI) suffix.
pub fn fmt_bytes(b: u64) -> String {
    let f = b as f64;
    if f >= 1e9 {
        format!("{:.2} GB", f / 1e9)
    } else if f >= 1e6 {
        format!("{:.2} MB", f / 1e6)
    } else if f >= 1e3 {
        format!("{:.1} KB", f / 1e3)
    } else {
        format!("{b} B")
    }
}

/// Splits "400Gbps" into (400.0, "gbps"), lower-casing the unit.
fn split_number(s: &str) -> Option<(f64, String)> {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.' || *c == '_'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let num: String = num.chars().filter(|c| *c != '_').collect();
    let value: f64 = num.parse().ok()?;
    if !value.is_finite() {
        return None;
    }
    Some((value, unit.trim().to_ascii_lowercase()))
}

/// Converts `value * scale` to an integer, refusing fractions of the base
/// unit and overflow.
fn scaled(value: f64, scale: f64) -> Option<u64> {
    let v = value * scale;
    if !(0.0..1.8e19).contains(&v) {
        return None;
    }
    let r = v.round();
    ((v - r).abs() < 1e-6 * v.max(1.0)).then_some(r as u64)
}

/// Parses a rate: "100G", "400Gbps", "400Gb/s", "25G", "800M", "1.6T".
/// Bytes per second ("100GB/s") is refused: link speeds are in bits.
pub fn parse_rate(s: &str) -> Option<Rate> {
    if s.contains('B') {
        return None;
    }
    let (v, unit) = split_number(s)?;
    let scale = match unit.as_str() {
        "bps" | "b/s" => 1.0,
        "k" | "kbps" | "kb/s" => 1e3,
        "m" | "mbps" | "mb/s" => 1e6,
        "g" | "gbps" | "gb/s" => 1e9,
        "t" | "tbps" | "tb/s" => 1e12,
        _ => return None,
    };
    scaled(v, scale).filter(|r| *r > 0).map(Rate)
}

/// Parses a bandwidth in bytes per second: "900GB/s", "64GB/s",
/// "32GBps", "1.8TB/s".
pub fn parse_byte_rate(s: &str) -> Option<u64> {
    let (v, unit) = split_number(s)?;
    let scale = match unit.as_str() {
        "b/s" | "bps" => 1.0,
        "kb/s" | "kbps" => 1e3,
        "mb/s" | "mbps" => 1e6,
        "gb/s" | "gbps" => 1e9,
        "tb/s" | "tbps" => 1e12,
        _ => return None,
    };
    // Bits are refused: "B" must be a capital.
    if !s.contains('B') {
        return None;
    }
    scaled(v, scale).filter(|r| *r > 0)
}

/// Parses a size in bytes: "4096", "4KB", "2MB" (decimal), "4KiB", "2MiB"
/// (binary), "9216B".
pub fn parse_bytes(s: &str) -> Option<u64> {
    let (v, unit) = split_number(s)?;
    let scale = match unit.as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    scaled(v, scale)
}

/// Parses a duration: "1us", "500ns", "2.5ms", "100ps", "1s".
pub fn parse_time(s: &str) -> Option<SimTime> {
    let (v, unit) = split_number(s)?;
    let scale = match unit.as_str() {
        "ps" => 1.0,
        "ns" => 1e3,
        "us" | "µs" => 1e6,
        "ms" => 1e9,
        "s" => 1e12,
        _ => return None,
    };
    scaled(v, scale).map(SimTime)
}

/// Parses a cable length in metres: "5m", "30m", "2.5m".
pub fn parse_length_m(s: &str) -> Option<f64> {
    let (v, unit) = split_number(s)?;
    match unit.as_str() {
        "m" => Some(v),
        "cm" => Some(v / 100.0),
        "km" => Some(v * 1000.0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_is_exact_at_standard_speeds() {
        assert_eq!(Rate::gbps(100).serialize(1), SimTime(80));
        assert_eq!(Rate::gbps(400).serialize(4194), SimTime(4194 * 20));
        assert_eq!(Rate::gbps(800).exact_ps_per_byte(), Some(10));
        // 3 bytes at 3 Gb/s is 8 ns exactly; 1 byte at 3 Gb/s rounds up.
        assert_eq!(Rate(3_000_000_000).serialize(3), SimTime(8_000));
        assert_eq!(Rate(3_000_000_000).serialize(1), SimTime(2_667));
    }

    #[test]
    fn rates_print_in_the_unit_that_shows_them() {
        assert_eq!(fmt_bps(1.6e12), "1.60 Tb/s");
        assert_eq!(fmt_bps(400e9), "400.0 Gb/s");
        assert_eq!(fmt_bps(1e6), "1.0 Mb/s");
        assert_eq!(fmt_bps(0.0), "0.0 Gb/s");
    }

    #[test]
    fn parses_units() {
        assert_eq!(parse_rate("400G"), Some(Rate::gbps(400)));
        assert_eq!(parse_rate("400Gbps"), Some(Rate::gbps(400)));
        assert_eq!(parse_rate("1.6T"), Some(Rate(1_600_000_000_000)));
        assert_eq!(parse_rate("100GB/s"), None);
        assert_eq!(parse_byte_rate("900GB/s"), Some(900_000_000_000));
        assert_eq!(parse_byte_rate("1.8TB/s"), Some(1_800_000_000_000));
        assert_eq!(parse_byte_rate("400Gb/s"), None);
        assert_eq!(parse_byte_rate("900"), None);
        assert_eq!(parse_bytes("2MB"), Some(2_000_000));
        assert_eq!(parse_bytes("4KiB"), Some(4096));
        assert_eq!(parse_bytes("-5"), None);
        assert_eq!(parse_bytes("1.5B"), None);
        assert_eq!(parse_time("1us"), Some(SimTime(1_000_000)));
        assert_eq!(parse_time("2.5ns"), Some(SimTime(2_500)));
        assert_eq!(parse_time("5"), None);
        assert_eq!(parse_length_m("5m"), Some(5.0));
    }
}
