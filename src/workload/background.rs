//! Background traffic: small flows between random pairs of GPUs, sizes
//! drawn from a flow-size distribution (a CDF file), arriving as a Poisson
//! process per sender so that each sender offers `load` of its NIC's line
//! rate on average.
//!
//! A CDF file has one point per line, `SIZE_BYTES CUMULATIVE_PROBABILITY`
//! (whitespace or a comma between them; `#` starts a comment). Sizes grow
//! and probabilities never fall, ending at 1; between points the
//! distribution is linear.

use crate::rng::Stream;
use crate::units::SimTime;

#[derive(Clone, Debug, PartialEq)]
pub struct Cdf {
    /// (size, cumulative probability), sizes increasing, last p = 1.
    pub points: Vec<(f64, f64)>,
}

impl Cdf {
    /// Parses the file's text; errors name the line.
    pub fn parse(text: &str) -> Result<Cdf, String> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let at = |m: String| format!("line {}: {m}", i + 1);
            let f: Vec<&str> = line
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|s| !s.is_empty())
                .collect();
            let [size, p] = f[..] else {
                return Err(at(format!(
                    "expected `SIZE_BYTES PROBABILITY`, got \"{line}\""
                )));
            };
            let size: f64 = size
                .parse()
                .ok()
                .filter(|s: &f64| s.is_finite() && *s >= 1.0 && *s <= 1e12)
                .ok_or_else(|| {
                    at(format!(
                        "size \"{size}\" is not a number of bytes from 1 to 1e12"
                    ))
                })?;
            let p: f64 = p
                .parse()
                .ok()
                .filter(|p: &f64| (0.0..=1.0).contains(p))
                .ok_or_else(|| at(format!("probability \"{p}\" is not between 0 and 1")))?;
            if let Some(&(s0, p0)) = points.last() {
                if size <= s0 || p < p0 {
                    return Err(at(format!(
                        "sizes must grow and probabilities not fall: ({size}, {p}) after ({s0}, {p0})"
                    )));
                }
            }
            if points.len() >= 100_000 {
                return Err(at("more than 100000 points".into()));
            }
            points.push((size, p));
        }
        match points.last() {
            None => Err("no points".into()),
            Some(&(_, p)) if (p - 1.0).abs() > 1e-9 => {
                Err(format!("the last probability is {p}; a CDF must end at 1"))
            }
            Some(_) => Ok(Cdf { points }),
        }
    }

    /// Mean flow size in bytes.
    pub fn mean(&self) -> f64 {
        let (s0, p0) = self.points[0];
        let mut m = s0 * p0;
        for w in self.points.windows(2) {
            let ((a, pa), (b, pb)) = (w[0], w[1]);
            m += (pb - pa) * (a + b) / 2.0;
        }
        m
    }

    /// The size at cumulative probability `u` in [0, 1).
    pub fn quantile(&self, u: f64) -> u64 {
        let pts = &self.points;
        if u <= pts[0].1 {
            return pts[0].0.round() as u64;
        }
        for w in pts.windows(2) {
            let ((a, pa), (b, pb)) = (w[0], w[1]);
            if u <= pb {
                let x = if pb > pa {
                    a + (b - a) * (u - pa) / (pb - pa)
                } else {
                    b
                };
                return x.round().max(1.0) as u64;
            }
        }
        pts[pts.len() - 1].0.round() as u64
    }
}

/// Flows one sender starts: (start, destination index, size), a Poisson
/// process of `rate_bytes` bytes per second on average for `duration`.
pub fn arrivals(
    cdf: &Cdf,
    rate_bytes: f64,
    start: SimTime,
    duration: SimTime,
    peers: usize,
    most: usize,
    rng: &mut Stream,
) -> Vec<(SimTime, usize, u64)> {
    let per_ps = rate_bytes / cdf.mean() / 1e12;
    let mut out = Vec::new();
    if per_ps <= 0.0 || peers == 0 {
        return out;
    }
    let mut t = 0.0f64;
    loop {
        t += -(1.0 - rng.unit()).ln() / per_ps;
        // Past `most` the caller refuses the workload: drawing the rest
        // would only fill memory first.
        if t >= duration.0 as f64 || out.len() > most {
            return out;
        }
        let dst = rng.below(peers as u64) as usize;
        let size = cdf.quantile(rng.unit());
        out.push((start + SimTime(t as u64), dst, size));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_samples_a_cdf() {
        let c = Cdf::parse("# size p\n1000 0.5\n3000, 1.0\n").unwrap();
        assert_eq!(c.mean(), 1000.0 * 0.5 + 0.5 * 2000.0);
        assert_eq!(c.quantile(0.25), 1000);
        assert_eq!(c.quantile(0.75), 2000);
        assert!(Cdf::parse("10 0.5\n5 1\n").unwrap_err().contains("line 2"));
        assert!(Cdf::parse("10 0.5\n").unwrap_err().contains("end at 1"));
        assert!(Cdf::parse("x 1\n").unwrap_err().contains("line 1"));
        assert!(Cdf::parse("").is_err());
    }

    /// The offered load matches the target within sampling noise.
    #[test]
    fn arrivals_offer_the_target_rate() {
        let c = Cdf::parse("1000 0.2\n100000 1\n").unwrap();
        let mut rng = crate::rng::Streams::new(3).stream("bg");
        let dur = SimTime::from_us(100_000);
        let a = arrivals(&c, 1e9, SimTime::ZERO, dur, 7, usize::MAX, &mut rng);
        let bytes: u64 = a.iter().map(|x| x.2).sum();
        let rate = bytes as f64 / 0.1;
        assert!((rate / 1e9 - 1.0).abs() < 0.05, "{rate}");
        assert!(a.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(a.iter().all(|x| x.1 < 7));
    }
}
