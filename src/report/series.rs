//! The sampled time series as CSV: one file per kind, one row per bucket,
//! one column per element that was ever non-zero.

use crate::engine::series::{Group, Series};
use crate::engine::Simulation;
use crate::switch::classify::QUEUES;
use crate::topology::PortId;
use crate::units::SimTime;

/// The kinds of series, each with its file, its unit and how its elements
/// are named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    LinkUtil,
    QueueDepth,
    PfcPaused,
    PfcPauses,
    EcnMarks,
    Cnps,
    QpSend,
    QpDcqcn,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::LinkUtil,
        Kind::QueueDepth,
        Kind::PfcPaused,
        Kind::PfcPauses,
        Kind::EcnMarks,
        Kind::Cnps,
        Kind::QpSend,
        Kind::QpDcqcn,
    ];

    pub fn group(self, s: &Series) -> &Group {
        match self {
            Kind::LinkUtil => &s.link_util,
            Kind::QueueDepth => &s.queue_depth,
            Kind::PfcPaused => &s.pfc_paused,
            Kind::PfcPauses => &s.pfc_pauses,
            Kind::EcnMarks => &s.ecn_marks,
            Kind::Cnps => &s.cnps,
            Kind::QpSend => &s.qp_send,
            Kind::QpDcqcn => &s.qp_dcqcn,
        }
    }

    pub fn file(self) -> &'static str {
        match self {
            Kind::LinkUtil => "ts_link_util.csv",
            Kind::QueueDepth => "ts_queue_depth.csv",
            Kind::PfcPaused => "ts_pfc_paused.csv",
            Kind::PfcPauses => "ts_pfc_pauses.csv",
            Kind::EcnMarks => "ts_ecn_marks.csv",
            Kind::Cnps => "ts_cnps.csv",
            Kind::QpSend => "ts_qp_send.csv",
            Kind::QpDcqcn => "ts_qp_dcqcn.csv",
        }
    }

    /// What a value means, with its unit.
    pub fn unit(self) -> &'static str {
        match self {
            Kind::LinkUtil => "utilization (0-1)",
            Kind::QueueDepth => "deepest in the interval (bytes)",
            Kind::PfcPaused => "share of time paused (0-1)",
            Kind::PfcPauses => "PFC pauses sent per second",
            Kind::EcnMarks => "ECN marks per second",
            Kind::Cnps => "CNPs received per second",
            Kind::QpSend => "payload sent (Gb/s)",
            Kind::QpDcqcn => "DCQCN rate (Gb/s)",
        }
    }

    /// Stored value to the unit written.
    fn scale(self) -> f64 {
        match self {
            Kind::QpSend | Kind::QpDcqcn => 1e-9,
            _ => 1.0,
        }
    }

    pub fn element_name(self, sim: &Simulation, key: u32) -> String {
        let topo = &sim.topo();
        let k = key as usize;
        match self {
            Kind::LinkUtil | Kind::EcnMarks | Kind::Cnps => topo.link_name(PortId(key)),
            Kind::QueueDepth => format!(
                "{} q{}",
                topo.link_name(PortId((k / QUEUES) as u32)),
                k % QUEUES
            ),
            Kind::PfcPaused | Kind::PfcPauses => format!(
                "{} p{}",
                topo.link_name(PortId((k / QUEUES) as u32)),
                k % QUEUES
            ),
            Kind::QpSend | Kind::QpDcqcn => {
                format!("qp{} flow{}", key, sim.qps()[k].flow.0)
            }
        }
    }

    /// A value as it is written.
    pub fn value(self, v: f32) -> f64 {
        v as f64 * self.scale()
    }
}

/// The deepest switch queue in each interval, bytes, over the intervals
/// that start before `until` (empty without time series).
pub fn deepest_queue(sim: &Simulation, until: SimTime) -> Vec<f64> {
    let s = sim.series();
    let n = (0..s.points)
        .take_while(|&i| s.bucket_start(i) < until)
        .count();
    let mut deepest = vec![0f64; n];
    for (_, v) in s.queue_depth.iter() {
        for (d, &x) in deepest.iter_mut().zip(v.iter()) {
            *d = d.max(x as f64);
        }
    }
    deepest
}

/// Per interval before `until`: the mean and the lowest sending rate of
/// the tracked QPs that sent in it, bits per second (0 where none did).
pub fn qp_rates(sim: &Simulation, until: SimTime) -> (Vec<f64>, Vec<f64>) {
    let s = sim.series();
    let n = (0..s.points)
        .take_while(|&i| s.bucket_start(i) < until)
        .count();
    let (mut sum, mut count, mut low) = (vec![0f64; n], vec![0u32; n], vec![f64::MAX; n]);
    for (_, v) in s.qp_send.iter() {
        for (i, &x) in v.iter().take(n).enumerate() {
            if x > 0.0 {
                sum[i] += x as f64;
                count[i] += 1;
                low[i] = low[i].min(x as f64);
            }
        }
    }
    let mean = sum
        .iter()
        .zip(&count)
        .map(|(&s, &c)| if c > 0 { s / c as f64 } else { 0.0 })
        .collect();
    let low = low
        .into_iter()
        .map(|x| if x == f64::MAX { 0.0 } else { x })
        .collect();
    (mean, low)
}

/// Bucket start times in microseconds.
pub fn times_us(s: &Series) -> Vec<f64> {
    (0..s.points)
        .map(|i| s.bucket_start(i).0 as f64 / 1e6)
        .collect()
}

/// Appends `x` with four decimals, through integers: the float
/// formatter's exact decimal expansion is slow, and these files hold a
/// value per element and bucket.
fn push_fixed4(buf: &mut Vec<u8>, x: f64) {
    let n = (x.abs() * 1e4).round();
    if !n.is_finite() || n >= 9e18 {
        buf.extend_from_slice(format!("{x:.4}").as_bytes());
        return;
    }
    let n = n as u64;
    if x < 0.0 && n > 0 {
        buf.push(b'-');
    }
    push_u64(buf, n / 10_000);
    let frac = n % 10_000;
    buf.extend_from_slice(&[
        b'.',
        b'0' + (frac / 1000) as u8,
        b'0' + (frac / 100 % 10) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

fn push_u64(buf: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

/// One column per element that has a series (named as in the other
/// tables), one row per bucket; values are numbers, so only the header
/// goes through the CSV writer.
pub fn csv(sim: &Simulation, kind: Kind, mut out: impl std::io::Write) -> std::io::Result<()> {
    let s = &sim.series();
    let g = kind.group(s);
    let mut header = vec!["time_us".to_string()];
    header.extend(g.series().into_keys().map(|k| kind.element_name(sim, k)));
    {
        let mut w = csv::Writer::from_writer(&mut out);
        w.write_record(&header)?;
        w.flush()?;
    }
    let rows = g.series();
    let mut buf = Vec::new();
    for (i, t) in times_us(s).into_iter().enumerate() {
        buf.clear();
        buf.extend_from_slice(format!("{t:.3}").as_bytes());
        for v in rows.values() {
            buf.push(b',');
            let x = kind.value(v[i]);
            if x == 0.0 {
                buf.push(b'0');
            } else {
                push_fixed4(&mut buf, x);
            }
        }
        buf.push(b'\n');
        out.write_all(&buf)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    fn fixed4(x: f64) -> String {
        let mut buf = Vec::new();
        super::push_fixed4(&mut buf, x);
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn four_decimals_as_the_formatter_gives_them() {
        for x in [
            0.5,
            0.12344,
            0.12346,
            1.0,
            123456.78901,
            3e9,
            0.00004,
            7.25e-3,
        ] {
            assert_eq!(fixed4(x), format!("{x:.4}"), "{x}");
        }
        assert_eq!(fixed4(-0.25), "-0.2500");
        assert_eq!(fixed4(f64::INFINITY), "inf");
    }
}
