//! Congestion control beyond DCQCN, each against a published result.
//!
//! DCTCP (Alizadeh et al., SIGCOMM 2010): with step marking at K, long
//! flows through one bottleneck keep its queue near K at full
//! throughput, where senders without congestion control fill the buffer
//! (here, until PFC pauses them).

mod common;
use common::{error_of, run_file, run_with};

const EXAMPLE: &str = "examples/congestion/dctcp-incast.toml";

/// The peaks of the bottleneck's queue per sampling interval, bytes,
/// from 200 us (slow start over) to the end of the transfers.
fn queue_peaks(sim: &fabricsim::engine::Simulation, until_ps: u64) -> Vec<f64> {
    bottleneck_series(sim, fabricsim::report::series::Kind::QueueDepth, until_ps)
}

/// The bottleneck's series of one kind, from 200 us to `until_ps`.
fn bottleneck_series(
    sim: &fabricsim::engine::Simulation,
    kind: fabricsim::report::series::Kind,
    until_ps: u64,
) -> Vec<f64> {
    common::series_of(sim, kind, "leaf0->host0/nic0", (200_000_000, until_ps))
}

#[test]
fn dctcp_holds_the_queue_near_k_at_full_throughput() {
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let (sim, summary) = run_file(std::path::Path::new(EXAMPLE), &[]);
    let k = 100e3;
    let end = summary.makespan_ps;
    let peaks = queue_peaks(&sim, end);
    assert!(peaks.len() > 100, "{} samples", peaks.len());
    let mean = peaks.iter().sum::<f64>() / peaks.len() as f64;
    let max = peaks.iter().cloned().fold(0.0, f64::max);
    assert!(
        mean > 0.8 * k && mean < k + 30e3,
        "mean peak {mean} B against K {k}"
    );
    assert!(max < k + 64e3, "highest peak {max} B");
    assert_eq!(
        summary.pfc_pause_frames, 0,
        "the window, not PFC, holds them"
    );
    // Full throughput: 64 MB through the 100G port in the time the port
    // needs for them (the first transfer's ideal is one 32 MB alone).
    let ideal = sim.flows()[0].ideal_fct.0 as f64;
    assert!(
        (end as f64) < 2.0 * ideal * 1.01,
        "makespan {end} ps, ideal {ideal}"
    );
    // Both progress: DCTCP converges to fair shares slowly (the paper's
    // section 3.3): over 5 ms they end within 15% of each other.
    let (a, b) = (common::fct(&sim, 0) as f64, common::fct(&sim, 1) as f64);
    assert!((a / b - 1.0).abs() < 0.15, "{a} against {b}");

    // Without congestion control the queue grows until PFC pauses.
    let (_, none) = run_with(&text, &["transport.congestion_control=\"none\""]);
    assert!(none.pfc_pause_frames > 0);
    let (sim_none, _) = run_with(&text, &["transport.congestion_control=\"none\""]);
    let max_none = queue_peaks(&sim_none, none.makespan_ps)
        .into_iter()
        .fold(0.0, f64::max);
    assert!(max_none > 5.0 * k, "no window: peak {max_none} B");

    // The queue follows K: at 300 KB it sits near 300 KB.
    let k3 = [
        "qos.class.0.wred.min=\"300KB\"",
        "qos.class.0.wred.max=\"300KB\"",
    ];
    let (sim3, s3) = run_with(&text, &k3);
    let peaks = queue_peaks(&sim3, s3.makespan_ps);
    let mean = peaks.iter().sum::<f64>() / peaks.len() as f64;
    assert!(
        mean > 240e3 && mean < 330e3,
        "K = 300 KB: mean peak {mean} B"
    );
}

#[test]
fn dctcp_windows_are_reported_and_checked() {
    let (sim, _) = run_file(std::path::Path::new(EXAMPLE), &[]);
    let mut out = Vec::new();
    fabricsim::report::tables::qps_csv(&sim, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let head: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let cuts = head.iter().position(|h| *h == "window_cuts").unwrap();
    for row in text.lines().skip(1) {
        let n: u64 = row.split(',').nth(cuts).unwrap().parse().unwrap();
        assert!(n > 10, "each QP cut its window many times: {row}");
    }
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let e = error_of(&text, &["transport.protocol=\"mrc\""]);
    assert!(
        e.contains("transport.congestion_control") && e.contains("mrc"),
        "{e}"
    );
}

/// Swift (Kumar et al., SIGCOMM 2020): senders hold the fabric delay at
/// their target. Eight senders into one 100G port keep it busy without
/// PFC, share it evenly, and the queue's delay follows the target: ten
/// more microseconds of target, about ten more of queue.
#[test]
fn swift_holds_the_delay_at_its_target() {
    let path = "examples/congestion/incast-swift.toml";
    let text = std::fs::read_to_string(path).unwrap();
    let queue_us = |text: &str, sets: &[&str]| {
        let (sim, s) = run_with(text, sets);
        assert_eq!(s.pfc_pause_frames, 0, "{sets:?}");
        let ideal = sim.flows()[0].ideal_fct.0 as f64;
        assert!(
            (s.makespan_ps as f64) < 8.0 * ideal * 1.01,
            "{sets:?}: not full throughput"
        );
        let peaks = queue_peaks(&sim, s.makespan_ps);
        let mean = peaks.iter().sum::<f64>() / peaks.len() as f64;
        let fcts: Vec<f64> = (0..8).map(|i| common::fct(&sim, i) as f64).collect();
        let max = fcts.iter().cloned().fold(0.0, f64::max);
        let min = fcts.iter().cloned().fold(f64::MAX, f64::min);
        (mean * 8.0 / 100e3, max / min)
    };
    let (at5, spread) = queue_us(&text, &[]);
    assert!(spread < 1.05, "eight transfers end within 5%: {spread}");
    // Target about 7.3 us (5 + 1 per switch + flow scaling) against an
    // unloaded round trip of about 3.3 us: some 4 to 7 us of queue.
    assert!(
        at5 > 3.0 && at5 < 8.0,
        "queue {at5} us at a 5 us base target"
    );
    let (at15, _) = queue_us(&text, &["swift.base_target=\"15us\""]);
    assert!(
        ((at15 - at5) - 10.0).abs() < 2.0,
        "5 us: {at5} us of queue, 15 us: {at15} us"
    );
    // Without a reaction to delay (the same incast, no congestion
    // control) the queue grows until PFC pauses.
    let (_, none) = run_file(
        std::path::Path::new("examples/congestion/incast-none.toml"),
        &[],
    );
    assert!(none.pfc_pause_frames > 0);
    // A table for a window not chosen is refused.
    let e = error_of(&text, &["transport.congestion_control=\"dctcp\""]);
    assert!(e.contains("swift") && e.contains("only used with"), "{e}");
}

/// HPCC (Li et al., SIGCOMM 2019): with every switch's load in each ACK,
/// senders hold the bottleneck at their target utilization with a queue
/// near zero, where DCQCN on the same incast keeps a deep one; the
/// target sets the utilization; the INT records cost bytes on the wire.
#[test]
fn hpcc_holds_the_bottleneck_at_its_target_with_a_queue_near_zero() {
    use fabricsim::report::series::Kind;
    let path = "examples/congestion/incast-hpcc.toml";
    let text = std::fs::read_to_string(path).unwrap();
    let measure = |text: &str, sets: &[&str]| {
        let (sim, s) = run_with(text, sets);
        assert_eq!(s.pfc_pause_frames, 0, "{sets:?}");
        // While all eight send (the first 3 ms).
        let until = 3_000_000_000;
        let q = queue_peaks(&sim, until);
        let u = bottleneck_series(&sim, Kind::LinkUtil, until);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        (sim, mean(&q), mean(&u))
    };
    let (sim, queue, util) = measure(&text, &[]);
    // The link runs at eta = 95% of its capacity less the queue's share
    // of the round trip (HPCC counts both): 85 to 95% busy, the queue's
    // peaks a few packets (a 4 KB frame is 4.2 KB).
    assert!(util > 0.85 && util < 0.95, "utilization {util}");
    assert!(queue < 25e3, "mean queue peak {queue} B");
    // DCQCN, on the same incast: a queue of hundreds of kilobytes.
    let same = |cc: &str| {
        std::fs::read_to_string(format!("examples/congestion/incast-{cc}.toml")).unwrap()
    };
    let (_, dcqcn_queue, _) = measure(&same("dcqcn"), &[]);
    assert!(
        dcqcn_queue > 20.0 * queue,
        "DCQCN {dcqcn_queue} B against HPCC {queue} B"
    );
    // The target sets the utilization.
    let (_, _, util80) = measure(&text, &["hpcc.eta=0.8"]);
    assert!(
        util80 > 0.7 && util80 < 0.8,
        "eta 0.8: utilization {util80}"
    );
    // Every QP cut its rate; qps.csv reports it.
    let mut out = Vec::new();
    fabricsim::report::tables::qps_csv(&sim, &mut out).unwrap();
    let csv = String::from_utf8(out).unwrap();
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let cuts = head.iter().position(|h| *h == "rate_cuts").unwrap();
    let low = head.iter().position(|h| *h == "min_rate_gbps").unwrap();
    for row in csv.lines().skip(1) {
        let f: Vec<&str> = row.split(',').collect();
        assert!(f[cuts].parse::<u64>().unwrap() > 10, "{row}");
        assert!(f[low].parse::<f64>().unwrap() < 12.5, "{row}");
    }
    // 42 bytes of INT on every data frame: the ideal completion time of
    // a transfer grows by that share of a 4,178-byte frame.
    let (none, _) = run_with(&same("none"), &[]);
    let ratio = sim.flows()[0].ideal_fct.0 as f64 / none.flows()[0].ideal_fct.0 as f64;
    assert!(
        (ratio - 4220.0 / 4178.0).abs() < 1e-3,
        "ideal time ratio {ratio}"
    );
    // An [hpcc] table without HPCC is refused; so is HPCC over MRC.
    let e = error_of(&text, &["transport.congestion_control=\"dcqcn\""]);
    assert!(e.contains("hpcc") && e.contains("only used with"), "{e}");
    let e = error_of(&text, &["transport.protocol=\"mrc\""]);
    assert!(e.contains("congestion_control") && e.contains("mrc"), "{e}");
}

/// TIMELY (Mittal et al., SIGCOMM 2015): rates moved by the round trip's
/// gradient keep the incast's queue far from PFC's thresholds at high
/// throughput, and the round trip under T_high. But TIMELY has no single
/// fair point to converge to (Zhu et al., "ECN or Delay", CoNEXT 2016):
/// the eight transfers end far apart, where Swift's, on the same incast,
/// end together.
#[test]
fn timely_keeps_the_round_trip_under_t_high_but_not_fair_shares() {
    use fabricsim::report::series::Kind;
    let path = "examples/congestion/incast-timely.toml";
    let text = std::fs::read_to_string(path).unwrap();
    let (sim, s) = run_with(&text, &[]);
    assert_eq!(s.pfc_pause_frames, 0);
    let ideal = sim.flows()[0].ideal_fct.0 as f64;
    assert!(
        (s.makespan_ps as f64) < 8.0 * ideal * 1.15,
        "makespan {} ps against {} for the port's work",
        s.makespan_ps,
        8.0 * ideal
    );
    // The queue's peak per interval, as delay at 100G, against T_high.
    let peaks = bottleneck_series(&sim, Kind::QueueDepth, s.makespan_ps);
    let mean_us = peaks.iter().sum::<f64>() / peaks.len() as f64 * 8.0 / 100e3;
    assert!(mean_us < 100.0 / 2.0, "mean queue {mean_us} us");
    let fcts: Vec<f64> = (0..8).map(|i| common::fct(&sim, i) as f64).collect();
    let spread = |f: &[f64]| {
        f.iter().cloned().fold(0.0, f64::max) / f.iter().cloned().fold(f64::MAX, f64::min)
    };
    println!("TIMELY: queue {mean_us:.1} us, ends {fcts:?}");
    assert!(spread(&fcts) > 1.5, "ends {fcts:?}");
    let (swift, _) = run_file(
        std::path::Path::new("examples/congestion/incast-swift.toml"),
        &[],
    );
    let swift: Vec<f64> = (0..8).map(|i| common::fct(&swift, i) as f64).collect();
    assert!(spread(&swift) < 1.05, "Swift's ends {swift:?}");
    // Every QP cut its rate; qps.csv has the cuts and rates.
    let mut out = Vec::new();
    fabricsim::report::tables::qps_csv(&sim, &mut out).unwrap();
    let csv = String::from_utf8(out).unwrap();
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (cc, cuts, low) = (
        col("congestion_control"),
        col("rate_cuts"),
        col("min_rate_gbps"),
    );
    for row in csv.lines().skip(1) {
        let f: Vec<&str> = row.split(',').collect();
        assert_eq!(f[cc], "timely");
        assert!(f[cuts].parse::<u64>().unwrap() > 0, "{row}");
        assert!(f[low].parse::<f64>().unwrap() < 50.0, "{row}");
    }
    assert!(s.window_cuts > 100, "{} cuts", s.window_cuts);
    // The thresholds' order, the table, MRC and ACK coalescing are checked.
    let e = error_of(&text, &["timely.t_high=\"5us\""]);
    assert!(e.contains("timely.t_high") && e.contains("t_low"), "{e}");
    let e = error_of(&text, &["transport.congestion_control=\"dcqcn\""]);
    assert!(e.contains("timely") && e.contains("only used with"), "{e}");
    let e = error_of(&text, &["transport.protocol=\"mrc\""]);
    assert!(
        e.contains("congestion_control") && e.contains("rate is for RC"),
        "{e}"
    );
    let e = error_of(&text, &["transport.ack_every=4"]);
    assert!(e.contains("ack_every") && e.contains("TIMELY"), "{e}");
}

/// The UEC-style window (NSCC: the UE specification 1.0 and its
/// reference simulator): with marks below the target, a window that
/// grows under the target delay and shrinks by the delay's excess when
/// marked holds the bottleneck's queueing delay at the target at full
/// throughput, without PFC; the target moves the queue with it. Over the
/// multipath transport the permutation's ECMP collisions are sprayed
/// away: it finishes first of all the algorithms.
#[test]
fn uec_holds_the_queueing_delay_at_its_target_over_every_path() {
    use fabricsim::report::series::Kind;
    let path = "examples/congestion/incast-uec.toml";
    let text = std::fs::read_to_string(path).unwrap();
    let delay_us = |target: &str| {
        let (sim, s) = run_with(&text, &[&format!("uec.target_delay=\"{target}\"")]);
        assert_eq!(s.pfc_pause_frames, 0, "{target}");
        let ideal = sim.flows()[0].ideal_fct.0 as f64;
        assert!(
            (s.makespan_ps as f64) < 8.0 * ideal * 1.01,
            "{target}: not full throughput"
        );
        let peaks = bottleneck_series(&sim, Kind::QueueDepth, s.makespan_ps);
        peaks.iter().sum::<f64>() / peaks.len() as f64 * 8.0 / 100e3
    };
    let (at6, at12, at20) = (delay_us("6us"), delay_us("12us"), delay_us("20us"));
    println!("UEC: queue {at6:.1}, {at12:.1}, {at20:.1} us at targets of 6, 12, 20 us");
    for (got, want) in [(at6, 6.0), (at12, 12.0), (at20, 20.0)] {
        assert!((got - want).abs() < 2.0, "target {want} us: {got} us");
    }
    // Without a window the same multipath incast fills the buffer.
    let (_, none) = run_file(
        std::path::Path::new("examples/congestion/incast-none.toml"),
        &["transport.protocol=\"mrc\""],
    );
    assert!(none.pfc_pause_frames > 0);
    // Every QP's window was cut, and qps.csv has its sizes.
    let (sim, s) = run_with(&text, &[]);
    assert_eq!(s.congestion_control, "uec");
    let mut out = Vec::new();
    fabricsim::report::tables::qps_csv(&sim, &mut out).unwrap();
    let csv = String::from_utf8(out).unwrap();
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (cuts, low) = (col("window_cuts"), col("min_window_packets"));
    for row in csv.lines().skip(1) {
        let f: Vec<&str> = row.split(',').collect();
        assert!(f[cuts].parse::<u64>().unwrap() > 10, "{row}");
        assert!(f[low].parse::<f64>().unwrap() < 10.0, "{row}");
    }
    // Over the permutation, spraying beats every single-path algorithm.
    let makespan = |cc: &str| {
        let p = format!("examples/congestion/permutation-{cc}.toml");
        run_file(std::path::Path::new(&p), &[]).1.makespan_ps
    };
    let uec = makespan("uec");
    for cc in ["none", "dcqcn", "dctcp", "swift", "hpcc", "timely"] {
        assert!(uec < makespan(cc), "uec {uec} ps against {cc}");
    }
    // UEC needs the multipath transport; its table needs UEC.
    let e = error_of(&text, &["transport.protocol=\"rc\""]);
    assert!(
        e.contains("congestion_control") && e.contains("protocol = \"mrc\""),
        "{e}"
    );
    let e = error_of(&text, &["transport.congestion_control=\"dcqcn\""]);
    assert!(e.contains("uec") && e.contains("only used with"), "{e}");
}

/// The comparison sets (`examples/congestion/incast-*.toml`,
/// `permutation-*.toml`) run the same workload on the same fabric: they
/// differ only in the congestion control, its table, and (DCTCP) the
/// step marking its switches need.
#[test]
fn each_comparison_set_differs_only_in_congestion_control() {
    for set in ["incast", "permutation"] {
        let mut first: Option<toml::Table> = None;
        for cc in ["none", "dcqcn", "dctcp", "swift", "hpcc", "timely", "uec"] {
            let path = format!("examples/congestion/{set}-{cc}.toml");
            let mut t: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
            let transport = t["transport"].as_table_mut().unwrap();
            let given = transport.remove("congestion_control").unwrap();
            assert_eq!(given.as_str(), Some(cc), "{path}");
            // UEC's window runs over the multipath transport.
            let protocol = transport.remove("protocol");
            assert_eq!(protocol.is_some(), cc == "uec", "{path}");
            for key in ["name", "dctcp", "swift", "hpcc", "timely", "uec"] {
                t.remove(key);
            }
            let qos = t.remove("qos");
            assert_eq!(
                qos.is_some(),
                cc == "dctcp" || cc == "uec",
                "{path}: only DCTCP and UEC set their marking"
            );
            match &first {
                None => first = Some(t),
                Some(f) => assert_eq!(f, &t, "{path} against {set}-none.toml"),
            }
        }
    }
}

/// Congestion control per tenant and per workload: each QP runs its own
/// workload's algorithm, whatever the others run.
#[test]
fn each_workload_runs_its_own_congestion_control() {
    let path = "examples/congestion/mixed-incast.toml";
    let text = std::fs::read_to_string(path).unwrap();
    let ccs_of = |sim: &fabricsim::engine::Simulation| {
        let mut out = Vec::new();
        fabricsim::report::tables::qps_csv(sim, &mut out).unwrap();
        let csv = String::from_utf8(out).unwrap();
        let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
        let (cc, cnps, cuts) = (
            col("congestion_control"),
            col("cnps_received"),
            col("window_cuts"),
        );
        csv.lines()
            .skip(1)
            .map(|r| {
                let f: Vec<&str> = r.split(',').collect();
                (
                    f[cc].to_string(),
                    f[cnps].parse::<u64>().unwrap(),
                    f[cuts].parse::<u64>().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    let (sim, s) = run_file(std::path::Path::new(path), &[]);
    assert_eq!(s.congestion_control, "dcqcn+dctcp");
    assert_eq!(s.pfc_pause_frames, 0);
    let qps = ccs_of(&sim);
    assert_eq!(qps.len(), 8);
    for (i, (cc, cnps, cuts)) in qps.iter().enumerate() {
        if i < 4 {
            // The training job: DCQCN, slowed by CNPs.
            assert_eq!((cc.as_str(), *cuts), ("dcqcn", 0), "QP {i}");
            assert!(*cnps > 10, "QP {i}: {cnps} CNPs");
        } else {
            // Tenant 2: DCTCP's window, cut by the marks its ACKs carry.
            assert_eq!((cc.as_str(), *cnps), ("dctcp", 0), "QP {i}");
            assert!(*cuts > 10, "QP {i}: {cuts} window cuts");
        }
    }
    // A workload's own key wins over its tenant's.
    let (sim, s) = run_with(&text, &["workload.1.congestion_control=\"swift\""]);
    assert_eq!(s.congestion_control, "dcqcn+swift");
    assert!(ccs_of(&sim)[4..].iter().all(|q| q.0 == "swift"));
    // A table for an algorithm no workload runs does nothing: refused.
    let e = error_of(&format!("{text}\n[swift]\nbase_target = \"5us\"\n"), &[]);
    assert!(
        e.contains("swift") && e.contains("no workload runs it"),
        "{e}"
    );
    // Bad names are refused where they are given.
    let e = error_of(&text.replace("2 = \"dctcp\"", "2 = \"reno\""), &[]);
    assert!(
        e.contains("tenant_congestion_control.2") && e.contains("reno"),
        "{e}"
    );
    let e = error_of(&text, &["workload.0.congestion_control=\"cubic\""]);
    assert!(
        e.contains("workload[0].congestion_control") || e.contains("workload.0.congestion_control"),
        "{e}"
    );
    // A window over MRC is refused at the key that chose it.
    let e = error_of(&text, &["transport.protocol=\"mrc\""]);
    assert!(
        e.contains("tenant_congestion_control") && e.contains("mrc"),
        "{e}"
    );
}

/// Settings that leave a congestion control doing nothing a deployment's
/// would run, with a warning naming the key (they ran without a word):
/// a DCQCN floor above line rate, a CNP a second late, an HPCC target of
/// almost nothing, a Swift target far below the round trip.
#[test]
fn absurd_congestion_settings_are_warned_of() {
    let warned = |path: &str, set: &str| {
        let text = std::fs::read_to_string(path).unwrap();
        let p = fabricsim::scenario::prepare(path, &text, &[set.to_string()]).unwrap();
        p.scenario
            .warnings
            .iter()
            .map(|f| format!("{}: {}", f.key, f.message))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let dcqcn = "examples/congestion/incast-dcqcn.toml";
    assert!(warned(dcqcn, "dcqcn.min_rate=\"1000G\"")
        .contains("dcqcn.min_rate: 1T is at or above the NICs' line rate"));
    assert!(warned(dcqcn, "dcqcn.cnp_delay=\"1s\"").contains("dcqcn.cnp_delay"));
    assert!(warned("examples/congestion/incast-hpcc.toml", "hpcc.eta=1e-9").contains("hpcc.eta"));
    assert!(warned(
        "examples/congestion/incast-swift.toml",
        "swift.base_target=\"1ps\""
    )
    .contains("swift.base_target"));
    // The examples' own settings are not warned of.
    for path in [
        dcqcn,
        "examples/congestion/permutation-swift.toml",
        "examples/congestion/incast-hpcc.toml",
    ] {
        let w = warned(path, "simulation.seed=1");
        assert!(
            !w.contains("dcqcn.") && !w.contains("hpcc.") && !w.contains("swift."),
            "{path}: {w}"
        );
    }
}
