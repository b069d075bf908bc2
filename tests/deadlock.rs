//! PFC deadlock detection: a ring whose lossless flows close their pauses
//! into a cycle stops with the cycle named, instead of spinning until a
//! time limit; the same ring under light load, with DCQCN, or with the PFC
//! watchdog,
//! finishes.

mod common;

use std::path::Path;

const RING: &str = "examples/lossless/pfc-deadlock.toml";

#[test]
fn a_pfc_cycle_on_a_ring_is_reported_with_its_queues() {
    let (sim, s) = common::run_file_to_stop(Path::new(RING), &[]);
    assert!(
        s.stop_reason
            .starts_with("PFC deadlock: a cycle of paused queues"),
        "{}",
        s.stop_reason
    );
    let want: Vec<String> = (0..6)
        .map(|i| format!("ring{i}->ring{} priority 3", (i + 1) % 6))
        .collect();
    assert_eq!(s.deadlock_cycle, want);
    assert_eq!(s.flows_completed, 0);
    // The figures cover the run until the deadlock: partial.
    assert!(!s.complete && s.partial);
    assert_eq!(s.lossless_drops, 0);
    // Found within a few watch intervals of the last delivery, not after
    // the thousand of the stall limit.
    let watch = sim.watch_interval().0;
    assert!(s.sim_time_ps < 20 * watch, "{} ps", s.sim_time_ps);
    // Every queue of the cycle is paused and holds frames.
    for &(p, q) in sim.deadlock() {
        assert!(sim.queues()[p.idx()].is_paused(q, sim.now()));
        assert!(sim.queues()[p.idx()].is_nonempty(q));
    }
}

/// With DCQCN (the default firmware parameters) the same traffic
/// finishes: CNPs slow the senders before any queue reaches XOFF, so no
/// pause is sent and no cycle can form.
#[test]
fn dcqcn_slows_the_senders_before_the_cycle_forms() {
    let (_, s) =
        common::run_file_to_stop(Path::new(RING), &["transport.congestion_control=\"dcqcn\""]);
    assert_eq!(s.stop_reason, "finished");
    assert!(s.deadlock_cycle.is_empty());
    assert_eq!(s.flows_completed, 6);
    assert_eq!(s.pfc_pause_frames, 0);
    assert!(s.dcqcn_rate_cuts > 0);
}

#[test]
fn the_pfc_watchdog_breaks_the_deadlock() {
    let text = std::fs::read_to_string(RING).unwrap()
        + "\n[pfc.watchdog]\ninterval = \"200us\"\naction = \"drop\"\nrecovery = \"1ms\"\n";
    let (_, s) = common::run_named("ring-watchdog.toml", &text, &[]);
    assert_eq!(s.stop_reason, "finished");
    assert_eq!(s.flows_completed, 6);
    assert!(s.deadlock_cycle.is_empty());
    assert!(s.watchdog_events > 0 && s.watchdog_drops > 0);
}

#[test]
fn light_load_on_the_same_ring_finishes() {
    let sets: Vec<String> = (0..6)
        .map(|i| format!("workload.{i}.bytes=\"1MB\""))
        .collect();
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let (sim, s) = common::run_file(Path::new(RING), &sets);
    assert_eq!(s.stop_reason, "finished");
    assert_eq!(s.flows_completed, 6);
    assert!(sim.pfc_cycle().is_none());
}

#[test]
fn the_ring_is_described_as_a_ring() {
    let p = fabricsim::scenario::prepare("ring.toml", &std::fs::read_to_string(RING).unwrap(), &[])
        .unwrap();
    let s = fabricsim::topology::summary::TopologySummary::of(
        &p.topology,
        fabricsim::scenario::resolve::cross_rail(&p.topology),
    );
    let links: Vec<(String, usize)> = s.links.iter().map(|l| (l.tier.clone(), l.count)).collect();
    assert_eq!(
        links,
        vec![("host-ring".to_string(), 6), ("ring-ring".to_string(), 6)]
    );
    // Halving the ring cuts two 100G links.
    assert_eq!(s.bisection_bps, 200_000_000_000);
    assert!(s.cross_rail);
    // Fewer than three switches is no ring.
    let e = common::error_of("[topology]\nkind = \"ring\"\nhosts = 2\n", &[]);
    assert!(e.contains("a ring needs at least 3 switches"), "{e}");
}
