//! DCQCN against its paper (Zhu et al., "Congestion Control for
//! Large-Scale RDMA Deployments", SIGCOMM 2015), at the paper's 40G and
//! with its section 5.3 parameters (`examples/congestion/dcqcn-paper.toml`,
//! the "dcqcn-paper" preset). Each test is one of the paper's
//! experiments, and each would fail if DCQCN did nothing: without it the
//! same incasts are held by PFC, with a queue far past Kmax. The figures
//! beside the paper's are in VALIDATION.md.

mod common;
use common::{goodput_over, jain, prepare, run_with, series_of};

use fabricsim::report::series::Kind;
use fabricsim::units::SimTime;

const EXAMPLE: &str = "examples/congestion/dcqcn-paper.toml";
/// The preset's marking thresholds at 40G (section 5.3).
const KMIN: f64 = 5e3;
const KMAX: f64 = 200e3;
/// The bottleneck: the switch port toward the receiver.
const BOTTLENECK: &str = "leaf0->host0/nic0";

fn example() -> String {
    std::fs::read_to_string(EXAMPLE).unwrap()
}

/// The example with its two transfers replaced by an N-to-1 incast of
/// `bytes` per sender.
fn incast(n: usize, bytes: &str) -> String {
    let text = example();
    let fabric = &text[..text.find("[[workload]]").unwrap()];
    let fabric = fabric
        .replace("hosts = 3\n", &format!("hosts = {}\n", n + 1))
        .replace(
            "hosts_per_leaf = 3\n",
            &format!("hosts_per_leaf = {}\n", n + 1),
        );
    format!(
        "{fabric}[[workload]]\nkind = \"incast\"\ndst = 0\nsenders = {n}\nbytes = \"{bytes}\"\n"
    )
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn ms(t: u64) -> SimTime {
    SimTime::from_us(t * 1000)
}

/// The paper's two-flow experiment: one flow at line rate, a second
/// joins; DCQCN brings both to half of the 40G link (20 + 20 Gb/s) with
/// the queue under Kmax and no PFC pause. With PFC alone the queue runs
/// up to xOFF and the senders are paused.
#[test]
fn two_flows_converge_to_twenty_gbps_each_under_kmax() {
    let text = example();
    // The second flow joins at 2 ms; both send until about 19 ms.
    let window = (ms(4), ms(16));
    let mut sim = prepare(&text, &[]);
    let gbps = goodput_over(&mut sim, window);
    for g in &gbps {
        assert!((g - 20.0).abs() < 2.5, "rates {gbps:?} Gb/s");
    }
    assert!(gbps.iter().sum::<f64>() > 36.0, "rates {gbps:?} Gb/s");

    let (sim, s) = run_with(&text, &[]);
    assert_eq!(s.pfc_pause_frames, 0);
    let q = series_of(
        &sim,
        Kind::QueueDepth,
        BOTTLENECK,
        (window.0 .0, window.1 .0),
    );
    let max = q.iter().cloned().fold(0.0, f64::max);
    println!(
        "rates {gbps:?} Gb/s, queue mean {} B, peak {max} B",
        mean(&q)
    );
    assert!(max < KMAX, "queue peaks at {max} B");

    let none = ["transport.congestion_control=\"none\""];
    let (sim, s) = run_with(&text, &none);
    assert!(s.pfc_pause_frames > 0);
    let q = series_of(
        &sim,
        Kind::QueueDepth,
        BOTTLENECK,
        (window.0 .0, window.1 .0),
    );
    println!(
        "PFC alone: {} pauses, queue mean {} B",
        s.pfc_pause_frames,
        mean(&q)
    );
    assert!(
        mean(&q) > 2.0 * KMAX,
        "PFC alone: mean queue {} B",
        mean(&q)
    );
}

/// Section 5: rate increase paced by the byte counter favours the faster
/// flow (it counts its bytes sooner), so two flows that start unequal
/// stay unequal; the paper therefore lets the 55 us timer pace recovery
/// (byte counter 10 MB). Here the joining flow starts behind: with the
/// timer in charge both converge, with a 150 KB byte counter and a
/// 1.5 ms timer they do not.
#[test]
fn timer_paced_recovery_converges_where_a_byte_counter_does_not() {
    let text = example();
    let window = (ms(10), ms(18));
    let mut sim = prepare(&text, &[]);
    let timer = goodput_over(&mut sim, window);
    let byte_paced = [
        "dcqcn.byte_counter=150000",
        "dcqcn.rate_increase_timer=\"1500us\"",
    ];
    let mut sim = prepare(&text, &byte_paced);
    let bytes = goodput_over(&mut sim, window);
    println!("timer {timer:?}, byte counter {bytes:?} Gb/s");
    assert!(jain(&timer) > 0.99, "timer-paced: {timer:?} Gb/s");
    assert!(jain(&bytes) < 0.97, "byte-counter-paced: {bytes:?} Gb/s");
    let (hi, lo) = (bytes[0].max(bytes[1]), bytes[0].min(bytes[1]));
    assert!(hi > 1.4 * lo, "byte-counter-paced: {bytes:?} Gb/s");
}

/// N-to-1 incasts: after the first cuts, the senders share the port
/// fairly, PFC never pauses, and the queue sits between Kmin and Kmax,
/// higher with more senders (at DCQCN's fixed point the marking
/// probability, so the queue, grows with the number of flows).
#[test]
fn n_to_one_incasts_share_fairly_with_the_queue_between_kmin_and_kmax() {
    let mut means = Vec::new();
    for n in [2usize, 8, 16] {
        let text = incast(n, "10MB");
        let (sim, s) = run_with(&text, &[]);
        assert_eq!(s.pfc_pause_frames, 0, "{n} senders");
        let end = s.makespan_ps;
        let window = (SimTime(end * 2 / 5), SimTime(end * 4 / 5));
        let q = series_of(
            &sim,
            Kind::QueueDepth,
            BOTTLENECK,
            (window.0 .0, window.1 .0),
        );
        let m = mean(&q);
        assert!(m > KMIN && m < KMAX, "{n} senders: mean queue {m} B");
        let mut sim = prepare(&text, &[]);
        let gbps = goodput_over(&mut sim, window);
        assert_eq!(gbps.len(), n);
        println!("{n} senders: queue {m:.0} B, rates {gbps:?} Gb/s");
        assert!(jain(&gbps) > 0.97, "{n} senders: {gbps:?} Gb/s");
        assert!(
            gbps.iter().sum::<f64>() > 34.0,
            "{n} senders: {gbps:?} Gb/s"
        );
        means.push(m);
    }
    assert!(means[0] < means[1] && means[1] < means[2], "{means:?}");

    // PFC alone holds the same 16-to-1 incast with pauses.
    let (_, s) = run_with(
        &incast(16, "10MB"),
        &["transport.congestion_control=\"none\""],
    );
    println!("16 senders, PFC alone: {} pauses", s.pfc_pause_frames);
    assert!(s.pfc_pause_frames > 0);
}
