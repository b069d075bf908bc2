//! Link and switch failures: what is lost, how routing and the balancers
//! react, and that runs with failures stay exact and repeatable.

mod common;
use common::run_with;

use fabricsim::engine::Simulation;
use fabricsim::report::Summary;

fn spine_bytes(sim: &Simulation, name: &str) -> u64 {
    let s = sim.topo().switches.iter().find(|s| s.name == name).unwrap();
    s.ports
        .iter()
        .map(|p| sim.ports()[p.idx()].tx_wire_bytes)
        .sum()
}

/// A spine dies mid-permutation: frames are lost until routing
/// reconverges, then every transfer completes over the other spines.
/// Resilient hashing moves only the flows that used the dead spine;
/// modulo hashing moves most of them.
#[test]
fn spine_failure_mid_transfer_is_survived_and_reported() {
    let text = std::fs::read_to_string("examples/failures/spine-failure.toml").unwrap();
    let (sim, s) = run_with(&text, &[]);
    assert_eq!(s.flows_completed, s.flows_total);
    assert!(s.failure_lost_packets > 0);
    assert_eq!(s.reconvergences, 2, "after the failure and the recovery");
    let f = &s.failures[0];
    assert_eq!(f.target, "spine1");
    assert_eq!(f.lost_packets, s.failure_lost_packets);
    assert_eq!(f.reconverged_ps, Some(200_000_000));
    assert!(f.affected_qps > 0);
    let back = f
        .progress_again_after_ps
        .expect("every hit QP progressed again");
    assert!(back > 50_000_000, "not before routing reconverged: {back}");
    let moved = f.flows_moved.unwrap();
    // Resilient: exactly the QPs that lost data through the dead spine.
    assert_eq!(moved, f.affected_qps);
    // Nothing crosses the dead spine between the reconvergence and its
    // recovery: its bytes are those sent before and after.
    assert!(spine_bytes(&sim, "spine1") > 0);
    sim.check_conservation().unwrap();

    let (_, m) = run_with(&text, &["switch.ecmp.resilient=false"]);
    let modulo = m.failures[0].flows_moved.unwrap();
    assert!(
        modulo > 2 * moved,
        "modulo moved {modulo}, resilient {moved}"
    );
    assert_eq!(m.flows_completed, m.flows_total);
}

/// Frames are only lost between the failure and the reconvergence: a
/// near-instant reconvergence loses little more than what was queued and
/// in flight at the failure.
#[test]
fn a_later_reconvergence_loses_more() {
    let text = std::fs::read_to_string("examples/failures/spine-failure.toml").unwrap();
    let (_, fast) = run_with(&text, &["routing.reconverge=\"1us\""]);
    let (_, slow) = run_with(&text, &["routing.reconverge=\"100us\""]);
    assert!(fast.failure_lost_packets < slow.failure_lost_packets);
    assert!(fast.failures[0].progress_again_after_ps < slow.failures[0].progress_again_after_ps);
}

/// TELB with a failed colour: tenant 1 is pinned to spine0 with spine1
/// as backup; when spine0 fails the tenant's traffic moves to spine1 and
/// completes.
#[test]
fn telb_moves_to_the_backup_colour_when_its_spine_fails() {
    let text = std::fs::read_to_string("examples/load-balancing/telb.toml").unwrap();
    let text = format!(
        "{text}\n[routing]\nreconverge = \"2us\"\n\n[[failure]]\nswitch = \"spine0\"\nat = \"100us\"\n"
    );
    let (sim, s) = run_with(&text, &[]);
    assert_eq!(s.flows_completed, s.flows_total);
    let leaf = &s.balancers[0];
    assert!(leaf.telb_primary > 0 && leaf.telb_backup > 0, "{leaf:?}");
    // Tenant 2 was on spine1 all along; tenant 1 joined it.
    assert!(spine_bytes(&sim, "spine1") > spine_bytes(&sim, "spine0"));
}

/// A link that slows to half its rate: a transfer over it alone takes
/// about twice as long.
#[test]
fn a_degraded_link_runs_at_its_new_rate() {
    let text = r#"
[topology]
kind = "single-rail"
hosts = 2
gpus_per_host = 1
nic_speed = "100G"

[[workload]]
kind = "transfer"
src = 0
dst = 1
bytes = "10MB"
"#;
    let (sim, base) = run_with(text, &[]);
    let nic = &sim.topo().nics[0].name;
    let leaf = &sim.topo().switches[0].name;
    let slow = format!(
        "{text}\n[[failure]]\nlink = [\"{nic}\", \"{leaf}\"]\nat = \"0us\"\nrate = \"50G\"\n"
    );
    let (_, s) = run_with(&slow, &[]);
    let ratio = s.makespan_ps as f64 / base.makespan_ps as f64;
    assert!((1.9..2.1).contains(&ratio), "{ratio}");
    assert_eq!(s.failure_lost_packets, 0);
    assert_eq!(s.failures[0].degraded_to_gbps, Some(50.0));
}

/// Failures are events like any other: the same scenario and seed give
/// the same outputs.
#[test]
fn runs_with_failures_are_deterministic() {
    let text = std::fs::read_to_string("examples/failures/spine-failure.toml").unwrap();
    let out = |dir: &str| {
        let p = fabricsim::scenario::prepare("f.toml", &text, &[]).unwrap();
        let mut sim = Simulation::new(p);
        let stop = sim.run(|_| {});
        let s = Summary::of(&sim, stop);
        let d = std::env::temp_dir().join(format!("fabricsim-fail-{}-{dir}", std::process::id()));
        let perf = fabricsim::report::Perf::of(&sim, 1.0);
        fabricsim::report::write_outputs(&d, &sim, &s, &perf).unwrap();
        ["summary.json", "flows.csv", "links.csv", "groups.csv"]
            .map(|f| std::fs::read(d.join(f)).unwrap())
    };
    assert!(out("a") == out("b"));
}

#[test]
fn failure_settings_are_checked() {
    let text = std::fs::read_to_string("examples/failures/spine-failure.toml").unwrap();
    let e = common::error_of(&text, &["failure[0].switch=\"spine9\""]);
    assert!(
        e.contains("failure[0].switch") && e.contains("no switch \"spine9\""),
        "{e}"
    );
    let e = common::error_of(&text, &["failure[0].recover=\"100us\""]);
    assert!(
        e.contains("failure[0].recover") && e.contains("after at"),
        "{e}"
    );
    let e = common::error_of(&text, &["failure[0].rate=\"50G\""]);
    assert!(
        e.contains("failure[0].rate") && e.contains("only applies to a link"),
        "{e}"
    );
    let link = text.replace("switch = \"spine1\"", "link = [\"leaf0\", \"leaf1\"]");
    let e = common::error_of(&link, &[]);
    assert!(e.contains("no link between leaf0 and leaf1"), "{e}");
    let link = text.replace(
        "switch = \"spine1\"",
        "link = [\"leaf0\", \"spine1\"]\nindex = 3",
    );
    let e = common::error_of(&link, &[]);
    assert!(
        e.contains("failure[0].index") && e.contains("1 link(s)"),
        "{e}"
    );
    let link = text.replace(
        "switch = \"spine1\"",
        "link = [\"leaf0\", \"spine1\"]\nrate = \"400G\"",
    );
    let e = common::error_of(&link, &[]);
    assert!(e.contains("below the link's"), "{e}");
}

/// Dynamic balancers after a spine failure: DLB and GLB stop choosing the
/// dead spine once routing reconverges (GLB even sees it as the worst
/// path before), and every transfer completes.
#[test]
fn dlb_and_glb_route_around_a_dead_spine() {
    let text = std::fs::read_to_string("examples/failures/spine-failure.toml").unwrap();
    let text = text.replace("recover = \"500us\"\n", "");
    for mode in ["dlb", "glb"] {
        let (sim, s) = run_with(&text, &[&format!("switch.balance.mode=\"{mode}\"")]);
        assert_eq!(s.flows_completed, s.flows_total, "{mode}");
        assert!(s.failure_lost_packets > 0, "{mode}");
        assert_eq!(s.failures[0].flows_moved, None, "{mode}: paths are dynamic");
        // After the reconvergence nothing reaches spine1: its ports sent
        // only what they sent before the failure.
        let before_fail: u64 = spine_bytes(&sim, "spine1");
        let total: u64 = ["spine0", "spine2", "spine3"]
            .iter()
            .map(|n| spine_bytes(&sim, n))
            .sum();
        assert!(
            before_fail * 4 < total,
            "{mode}: spine1 {before_fail} vs {total}"
        );
    }
}

/// A link that fails loses what waited for it at once, and its port
/// stops: frames are lost only until routing reconverges (plus what was
/// on the wires), not while a dead port drained its queue at line rate
/// (99 us of losses against a 50 us reconvergence before).
#[test]
fn a_dead_port_loses_its_queue_at_once_and_stops() {
    let text = std::fs::read_to_string("examples/failures/spine-failure.toml").unwrap();
    for reconverge_us in [20u64, 50] {
        let (sim, s) = run_with(
            &text,
            &[&format!("routing.reconverge=\"{reconverge_us}us\"")],
        );
        let f = &s.failures[0];
        let losing = f.losing_for_ps.unwrap();
        let slack = 2_000_000; // a link's delay and a frame on the wire
        assert!(
            losing <= reconverge_us * 1_000_000 + slack,
            "lost frames for {losing} ps with a {reconverge_us} us reconvergence"
        );
        assert!(f.lost_packets > 0);
        sim.check_conservation().unwrap();
        assert_eq!(s.flows_completed, s.flows_total);
    }
}

/// GLB heartbeats lost on a failed link take their bands with them: once
/// the spine is back, every leaf hears each spine's latest bands, not the
/// ones of an earlier, lost heartbeat (consecutive heartbeats always
/// differ: a helper sends one only when a band changed).
#[test]
fn glb_heartbeats_lost_to_a_failure_do_not_shift_the_later_ones() {
    let text = std::fs::read_to_string("examples/failures/spine-failure.toml").unwrap();
    let (sim, s) = run_with(&text, &["switch.balance.mode=\"glb\""]);
    assert_eq!(s.flows_completed, s.flows_total);
    assert!(
        sim.balance().heartbeats_lost > 0,
        "the failure cost heartbeats"
    );
    assert_eq!(s.glb_heartbeats_lost, sim.balance().heartbeats_lost);
    assert_eq!(sim.balance().heartbeats_in_flight(), 0);
    let mut checked = 0;
    for (helper, last, ports) in sim.balance().helpers() {
        for p in ports {
            let at = sim.topo().port(p).peer;
            let fabricsim::topology::Owner::Switch(sw) = sim.topo().port(at).owner else {
                continue;
            };
            let glb = sim.switches()[sw.idx()]
                .balancer
                .parts
                .glb
                .as_ref()
                .unwrap();
            for (pos, band) in glb.heard_on(at) {
                assert_eq!(
                    band,
                    last[pos as usize],
                    "{} hears port {pos} of {} as band {band}",
                    sim.topo().switches[sw.idx()].name,
                    sim.topo().switches[helper.idx()].name
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 0);
}

/// MRC through a dead leaf-spine link with 5 ms reconvergence: losses
/// are found from later copies' ACKs and the paths that lost them take
/// new entropy, so the run ends long before the routes change, within
/// 1.5 times its time with no failure (1.19 times; 3.2 times when only
/// the retransmission timeout found losses). With no failure the loss
/// detection resends nothing that arrived.
#[test]
fn mrc_routes_around_a_dead_link_before_routing_reacts() {
    let path = std::path::Path::new("examples/failures/mrc-link-failure.toml");
    let (_, failed) = common::run_file(path, &[]);
    let (_, clean) = common::run_file(path, &["failure=[]"]);
    assert_eq!(failed.flows_completed, failed.flows_total);
    let ratio = failed.makespan_ps as f64 / clean.makespan_ps as f64;
    assert!(
        ratio < 1.5,
        "{} ps against {} ps with no failure: {ratio:.2} times",
        failed.makespan_ps,
        clean.makespan_ps
    );
    assert!(failed.makespan_ps < 2_500_000_000, "before reconvergence");
    assert!(failed.mrc_loss_resends > 100 && failed.mrc_paths_replaced > 10);
    // Nothing is resent on the healthy fabric, whose paths reorder.
    assert!(clean.out_of_order_packets > 1000);
    assert_eq!((clean.timeouts, clean.retransmitted_bytes), (0, 0));
}

/// A switch failed twice over overlapping times is refused (it came back
/// at the first recovery); one failure after another recovered is fine.
#[test]
fn overlapping_failures_of_one_target_are_refused() {
    let text = std::fs::read_to_string("examples/fat-tree.toml").unwrap();
    let with = |f: &str| {
        fabricsim::scenario::prepare("f.toml", &text, &[format!("failure={f}")])
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let e = with("[{switch=\"core0\", at=\"10us\", recover=\"100us\"}, {switch=\"core0\", at=\"50us\", recover=\"200us\"}]")
        .unwrap_err();
    assert!(
        e.contains("failure[1]")
            && e.contains("fails the same switch as failure[0] while that one is still down"),
        "{e}"
    );
    let e = with(
        "[{switch=\"core0\", at=\"10us\"}, {switch=\"core0\", at=\"50us\", recover=\"200us\"}]",
    )
    .unwrap_err();
    assert!(e.contains("to the end"), "{e}");
    with("[{switch=\"core0\", at=\"10us\", recover=\"100us\"}, {switch=\"core0\", at=\"100us\", recover=\"200us\"}]").unwrap();
    with("[{switch=\"core0\", at=\"10us\", recover=\"100us\"}, {switch=\"core1\", at=\"50us\"}]")
        .unwrap();
}

/// An NVL72 rack: 72 GPUs of one NVLink domain through 18 switch chips.
const NVL72: &str = r#"
[topology]
kind = "rail-optimized"
hosts = 2
spines = 2
uplink_speed = "800G"
[host]
preset = "gb200-nvl72"
nvlink_efficiency = 1    # the line rate, for round figures
[[workload]]
kind = "transfer"
src = 0
dst = 37
bytes = "90MB"
"#;

/// A GB200 NVL72 switch tray (two of the domain's 18 switch chips) fails
/// halfway through a copy: from then on each GPU of that rack keeps 16/18
/// of its 900 GB/s each way, and the copy's second half takes 9/8 as
/// long; back up, the rate returns. The other rack is untouched.
#[test]
fn a_failed_nvlink_switch_tray_lowers_its_racks_bandwidth_by_its_share() {
    let us = |x: f64| (x * 1e6).round() as u64;
    let (_, s) = run_with(NVL72, &[]);
    // 90 MB at 900 GB/s, and 1 us of NVLink latency.
    assert_eq!(s.makespan_ps, us(101.0));

    let tray = format!("{NVL72}\n[[failure]]\nhost = 0\nnvlink_switches = 2\nat = \"50us\"\n");
    let (_, s) = run_with(&tray, &[]);
    // 45 MB left at 800 GB/s: 56.25 us.
    assert!(s.makespan_ps.abs_diff(us(107.25)) <= 1, "{}", s.makespan_ps);
    assert_eq!(s.failures[0].target, "host0 NVLink switches x2");
    assert_eq!(s.failures[0].nvlink_kept, Some(16.0 / 18.0));

    let back = tray.replace("at = \"50us\"", "at = \"50us\"\nrecover = \"60us\"");
    let (_, s) = run_with(&back, &[]);
    // 10 us at 800 GB/s, then the 37 MB left at 900 GB/s again.
    let want = 60.0 + (90e6 - 45e6 - 8e6) / 900e3 + 1.0;
    assert!(
        s.makespan_ps.abs_diff(us(want)) <= 1,
        "{} against {want} us",
        s.makespan_ps
    );

    let other = tray.replace("host = 0", "host = 1");
    let (_, s) = run_with(&other, &[]);
    assert_eq!(s.makespan_ps, us(101.0));
}

/// Switch chips the domain does not have, or a mesh with none, are
/// refused, naming the key.
#[test]
fn nvlink_switch_failures_name_what_is_wrong() {
    let bad = |extra: &str, sets: &[&str]| {
        common::error_of(
            &format!("{NVL72}\n[[failure]]\nat = \"5us\"\n{extra}\n"),
            sets,
        )
    };
    let e = bad("host = 0\nnvlink_switches = 18", &[]);
    assert!(
        e.contains("failure[0].nvlink_switches") && e.contains("1 to 17"),
        "{e}"
    );
    let e = bad("nvlink_switches = 2", &[]);
    assert!(
        e.contains("failure[0].host") && e.contains("missing"),
        "{e}"
    );
    let e = bad("host = 2\nnvlink_switches = 2", &[]);
    assert!(e.contains("below 2"), "{e}");
    let e = bad("host = 0\nnvlink_switches = 2", &["host.scale_up=\"mesh\""]);
    assert!(e.contains("mesh"), "{e}");
    let e = bad("host = 0\nnvlink_switches = 1\nswitch = \"spine0\"", &[]);
    assert!(e.contains("one at a time"), "{e}");
}

/// A compute tray of an NVL72 rack fails: the links of its four NICs go
/// down, so a transfer from one of its GPUs stalls until they are back,
/// and one from another tray of the same rack does not notice; the whole
/// rack (`host` alone) takes every NIC's link.
#[test]
fn a_compute_tray_or_a_rack_takes_its_nics_links() {
    let text = r#"
[topology]
kind = "rail-optimized"
hosts = 2
hosts_per_leaf = 2
rails_per_leaf = 8
spines = 2
uplink_speed = "800G"
[transport]
rto = "1ms"
[host]
preset = "gb200-nvl72"
[[workload]]
kind = "transfer"
src = 5
dst = 77
bytes = "8MB"
[[workload]]
kind = "transfer"
src = 1
dst = 73
bytes = "8MB"
"#;
    let fct = |sim: &Simulation, i: usize| common::fct(sim, i);
    let (base, _) = run_with(text, &[]);
    let failing =
        |what: &str| format!("{text}\n[[failure]]\n{what}\nat = \"50us\"\nrecover = \"300us\"\n");
    let (sim, s) = run_with(&failing("host = 0\ntray = 1"), &[]);
    assert_eq!(s.failures[0].target, "host0/tray1");
    assert!(
        fct(&sim, 0) > 300_000_000,
        "GPU 5 sits on tray 1: {}",
        fct(&sim, 0)
    );
    assert_eq!(fct(&sim, 1), fct(&base, 1), "GPU 1 sits on tray 0");
    assert_eq!(s.failures[0].affected_qps, 1);

    let (sim, s) = run_with(&failing("host = 1"), &[]);
    assert_eq!(s.failures[0].target, "host1");
    assert!((0..2).all(|i| fct(&sim, i) > 300_000_000));

    let e = common::error_of(&failing("host = 0\ntray = 18"), &[]);
    assert!(
        e.contains("failure[0].tray") && e.contains("below 18"),
        "{e}"
    );
    let e = common::error_of(&failing("tray = 1"), &[]);
    assert!(
        e.contains("failure[0].host") && e.contains("missing"),
        "{e}"
    );
}
