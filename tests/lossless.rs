//! The lossless fabric: pause timing, the seed 002 walk-through, DCQCN
//! convergence, headroom, congestion spreading, the watchdog and the
//! errors bad thresholds give.

mod common;
use common::{error_of, fct, goodput_over, jain, prepare, run_with};

use fabricsim::engine::{Simulation, StopReason};
use fabricsim::report::Summary;
use fabricsim::scenario;
use fabricsim::topology::{Owner, PortId};
use fabricsim::units::SimTime;

/// PFC slot of switch port `p` (one lossless class).
fn slot(sim: &Simulation, p: PortId) -> usize {
    assert_eq!(sim.pfc_slots(), 1);
    p.idx()
}

/// A NIC that sends one pause of 0xFFFF quanta stops its switch port for
/// exactly 65535 x 512 bit times at the link speed.
#[test]
fn pause_of_0xffff_quanta_lasts_exactly_512_bit_times_each() {
    let text = r#"
[topology]
kind = "single-rail"
hosts = 3
gpus_per_host = 1
link_delay = "1us"

[pfc]
refresh = "1s"

[[pfc.storm]]
gpu = 0
start = "10us"

[[workload]]
kind = "transfer"
src = 1
dst = 2
bytes = "4KB"
start = "1ms"
"#;
    for (speed, ps) in [
        ("100G", 335_539_200u64),
        ("200G", 167_769_600),
        ("400G", 83_884_800),
        ("800G", 41_942_400),
    ] {
        let mut sim = prepare(text, &[&format!("topology.nic_speed=\"{speed}\"")]);
        assert_eq!(sim.run(|_| {}), StopReason::Finished);
        // The switch port facing GPU 0's NIC.
        let nic_port = sim.topo().nics[0].ports[0];
        let sw_port = sim.topo().port(nic_port).peer;
        let i = slot(&sim, sw_port);
        assert_eq!(sim.pfc()[i].pauses_received, 1, "{speed}");
        assert_eq!(sim.paused_ps(i), ps, "{speed}");
        // The NIC sent it (as a real frame on the link).
        assert_eq!(sim.pfc()[slot(&sim, nic_port)].pauses_sent, 1);
        assert_eq!(sim.counters().pfc_pause_frames, 1);
    }
}

/// Seed 002's sequence, from the shipped example: WRED min first (marks,
/// CNPs, rate cuts), then xOFF at the receiver's rail switch (pause to the
/// spine), then the spine pauses its upstream, then xON resumes.
#[test]
fn incast_walk_through_marks_then_pauses_then_resumes() {
    let text = include_str!("../examples/lossless/incast.toml");
    let mut sim = prepare(text, &[]);
    assert_eq!(sim.run(|_| {}), StopReason::Finished);
    let s = Summary::of(&sim, StopReason::Finished);
    let f = s.first_events;
    let mark = f.ecn_mark_ps.expect("marks");
    let cnp = f.cnp_ps.expect("CNPs");
    let cut = f.rate_cut_ps.expect("rate cuts");
    let leaf_pause = f.pause_by_tier_ps[0].expect("rail switch pauses");
    let spine_pause = f.pause_by_tier_ps[1].expect("spine pauses");
    let resume = f.resume_ps.expect("resumes");
    assert!(mark < cnp && cnp < cut, "{f:?}");
    assert!(cut < leaf_pause, "ECN acts before PFC: {f:?}");
    assert!(leaf_pause < spine_pause && leaf_pause < resume, "{f:?}");
    // The first pause comes from the receiver's rail switch, toward the spine.
    let leaf0 = &sim.topo().switches[0];
    assert_eq!(leaf0.name, "leaf0");
    let first_from = sim
        .topo()
        .ports
        .iter()
        .enumerate()
        .filter_map(|(p, _)| sim.pfc()[p].first_pause.map(|t| (t.0, p)))
        .min()
        .map(|(_, p)| PortId(p as u32))
        .unwrap();
    assert_eq!(sim.topo().owner_name(first_from), "leaf0");
    assert_eq!(
        sim.topo().owner_name(sim.topo().port(first_from).peer),
        "spine0"
    );
    assert!(s.complete);
    assert_eq!(s.lossless_drops, 0);
    assert_eq!(s.drops, 0);
    assert!(
        sim.scenario().warnings.is_empty(),
        "{:?}",
        sim.scenario().warnings
    );
}

const FOUR_INTO_ONE: &str = r#"
[topology]
kind = "single-rail"
hosts = 5
gpus_per_host = 1
nic_speed = "100G"
link_delay = "1us"

[switch]
buffer = "32MB"

[report]
sample_interval = "5us"
samples = 20000

[[workload]]
kind = "incast"
dst = 0
srcs = [1, 2, 3, 4]
bytes = "200MB"
"#;

/// Four long flows into one 100G port under the default DCQCN: over 50 ms
/// of steady state the four shares are fair (Jain above 0.95), the port
/// stays busy, the bottleneck queue settles around WRED min (400 KB at
/// 100G) and never reaches WRED max (1.6 MB), and no PFC pause is sent.
/// Prints the figures it checks.
#[test]
fn dcqcn_converges_to_a_fair_share_near_the_marking_thresholds() {
    let window = (SimTime::from_us(5000), SimTime::from_us(55000));
    let mut sim = prepare(FOUR_INTO_ONE, &[]);
    let gbps = goodput_over(&mut sim, window);
    let (sum, jain) = (gbps.iter().sum::<f64>(), jain(&gbps));
    // The bottleneck queue (switch port to GPU 0) over the window.
    let to0 = sim.topo().port(sim.topo().nics[0].ports[0]).peer;
    let series = &sim.series();
    assert_eq!(series.interval, SimTime::from_us(5), "no merging yet");
    let from = (window.0 .0 / series.interval.0) as usize;
    let depths: Vec<f32> = series
        .queue_depth
        .iter()
        .filter(|(k, _)| *k as usize / 8 == to0.idx())
        .flat_map(|(_, v)| v[from..].to_vec())
        .collect();
    let mean = depths.iter().map(|&d| d as f64).sum::<f64>() / depths.len() as f64;
    let max = depths.iter().copied().fold(0.0, f32::max);
    println!("rates {gbps:?} Gb/s, Jain {jain:.3}, queue mean {mean:.0} B, max {max} B");
    assert!(jain > 0.95, "Jain {jain:.3}, rates {gbps:?}");
    assert!(sum > 90.0, "the bottleneck stays busy: {sum} Gb/s");
    assert!(depths.len() >= 9_000, "{} samples", depths.len());
    assert!(max < 1_600_000.0, "queue peaks at {max} B");
    // It settles around WRED min (400 KB), where marking starts.
    assert!(
        (300_000.0..1_600_000.0).contains(&mean),
        "queue mean {mean} B"
    );
    assert!(sim.counters().cnps_sent > 0);
    assert_eq!(sim.counters().pfc_pause_frames, 0);
    assert_eq!(sim.counters().lossless_drops, 0);
}

/// Sixteen 400G senders into one port, no congestion control: PFC alone
/// keeps it lossless when headroom is sized; with headroom far too small
/// `validate` warns and packets are lost.
#[test]
fn sufficient_headroom_means_no_lossless_drop_and_too_little_is_warned() {
    let text = r#"
[host]
pcie = "128GB/s"

[topology]
kind = "rail-optimized"
hosts = 17
gpus_per_host = 1
nic_speed = "400G"
hosts_per_leaf = 17
spines = 1
cable_length = "100m"

[switch]
buffer = "16MB"

[transport]
congestion_control = "none"
rto = "100us"

[[workload]]
kind = "incast"
dst = 0
senders = 16
bytes = "2MB"
"#;
    let (sim, s) = run_with(text, &[]);
    assert!(
        sim.scenario().warnings.is_empty(),
        "{:?}",
        sim.scenario().warnings
    );
    assert!(s.pfc_pause_frames > 0);
    assert_eq!(s.lossless_drops, 0);
    assert_eq!(s.drops, 0);
    assert!(s.complete);

    let small = &["qos.class[0].headroom=\"2KB\""];
    let with_small = format!(
        "{text}\n[[qos.class]]\nname = \"rocev2\"\ndscp = [24]\nqueue = 3\nlossless = true\nbandwidth_percent = 50\nwred = {{}}\n\n[[qos.class]]\nname = \"cnp\"\ndscp = [48]\nqueue = 7\nstrict = true\n"
    );
    let prepared = scenario::prepare("test.toml", &with_small, &small.map(String::from)).unwrap();
    let w = &prepared.scenario.warnings;
    assert!(
        w.iter()
            .any(|f| f.key.ends_with(".headroom") && f.message.contains("below")),
        "{w:?}"
    );
    let mut sim = Simulation::new(prepared);
    sim.run(|_| {});
    let s = Summary::of(&sim, StopReason::Finished);
    assert!(s.lossless_drops > 0, "too little headroom must drop");
    assert!(s.complete, "go-back-N recovers the losses");
}

/// Congestion spreading: an incast into GPU 0 makes its rail switch pause
/// the spine, which stalls a victim flow to GPU 1 that never crosses the
/// congested port (head-of-line blocking). Without PFC the victim runs at
/// full speed while the incast drops.
#[test]
fn pauses_slow_a_victim_flow_that_never_crosses_the_congested_port() {
    let text = r#"
[host]
pcie = "128GB/s"

[topology]
kind = "rail-optimized"
hosts = 8
gpus_per_host = 1
nic_speed = "400G"
hosts_per_leaf = 2
spines = 1
uplink_speed = "800G"
uplinks_per_spine = 3
link_delay = "500ns"

[switch]
buffer = "8MB"

[transport]
congestion_control = "none"

[[qos.class]]
name = "rocev2"
dscp = [24]
queue = 3
bandwidth_percent = 50
lossless = true
xon = "50KB"
xoff = "600KB"

[[qos.class]]
name = "cnp"
dscp = [48]
queue = 7
strict = true

[[workload]]
kind = "incast"
dst = 0
srcs = [4, 5, 6, 7]
bytes = "8MB"

[[workload]]
kind = "transfer"
src = 2
dst = 1
bytes = "8MB"
start = "50us"
"#;
    let victim = |sets: &[&str]| {
        let (sim, s) = run_with(text, sets);
        let v = sim.flows().len() - 1;
        (fct(&sim, v) as f64 / sim.flows()[v].ideal_fct.0 as f64, s)
    };
    let (slow, with_pfc) = victim(&[]);
    assert!(with_pfc.pfc_pause_frames > 0);
    assert!(slow > 1.5, "paused victim slowdown {slow:.2}");
    let (fast, lossy) = victim(&["pfc.enabled=false"]);
    assert_eq!(lossy.pfc_pause_frames, 0);
    assert!(lossy.drops > 0, "the incast overflows without PFC");
    assert!(fast < 1.05, "unpaused victim slowdown {fast:.2}");
}

const STORM: &str = r#"
[host]
pcie = "128GB/s"

[simulation]
max_sim_time = "20ms"

[topology]
kind = "single-rail"
hosts = 4
gpus_per_host = 1
nic_speed = "400G"
link_delay = "500ns"

[transport]
rto = "200us"

[[pfc.storm]]
gpu = 0
start = "5us"

[[workload]]
kind = "incast"
dst = 0
srcs = [1, 2, 3]
bytes = "2MB"
"#;

/// GPU 0's NIC pauses its switch port forever. Without a watchdog nothing
/// reaches it; with one, the stuck queue is found, the event reported and
/// every transfer finishes.
#[test]
fn watchdog_breaks_a_stuck_pause() {
    let mut stuck = prepare(STORM, &[]);
    let stop = stuck.run(|_| {});
    assert_ne!(stop, StopReason::Finished);
    assert_eq!(stuck.counters().flows_completed, 0);
    assert_eq!(stuck.counters().watchdog_events, 0);

    // Ignoring the pause gets everything through while the storm lasts;
    // dropping discards what waits for the stuck NIC, which the senders
    // retransmit once the storm ends.
    for (action, stop) in [("ignore", "30ms"), ("drop", "3ms")] {
        let (sim, s) = run_with(
            STORM,
            &[
                "pfc.watchdog.interval=\"100us\"",
                &format!("pfc.watchdog.action=\"{action}\""),
                "pfc.watchdog.recovery=\"1ms\"",
                &format!("pfc.storm[0].stop=\"{stop}\""),
            ],
        );
        assert!(s.complete, "{action}");
        assert!(s.watchdog_events > 0, "{action}");
        let to0 = sim.topo().port(sim.topo().nics[0].ports[0]).peer;
        assert!(matches!(sim.topo().port(to0).owner, Owner::Switch(_)));
        assert!(sim.pfc()[slot(&sim, to0)].watchdog_events > 0);
        if action == "drop" {
            assert!(s.watchdog_drops > 0);
        } else {
            assert_eq!(s.watchdog_drops, 0);
        }
    }
}

#[test]
fn bad_thresholds_give_specific_errors() {
    let base = r#"
[topology]
kind = "single-rail"
hosts = 2
gpus_per_host = 1

[switch]
buffer = "8MB"

[[qos.class]]
name = "rocev2"
dscp = [24]
queue = 3
lossless = true
bandwidth_percent = 50
wred = { min = "100KB", max = "400KB", max_probability = 0.2 }

[[workload]]
kind = "transfer"
src = 0
dst = 1
bytes = "1MB"
"#;
    // The DCQCN keys with names: each error lists what is accepted, and
    // the byte counter can be turned off.
    let e = error_of(base, &["dcqcn.alpha_update=\"sometimes\""]);
    assert!(
        e.contains("dcqcn.alpha_update") && e.contains("on-cnp, per-period"),
        "{e}"
    );
    let e = error_of(base, &["dcqcn.preset=\"cx9\""]);
    assert!(
        e.contains("dcqcn.preset") && e.contains("connectx-firmware"),
        "{e}"
    );
    let e = error_of(base, &["dcqcn.byte_counter=\"never\""]);
    assert!(e.contains("dcqcn.byte_counter"), "{e}");
    let off = scenario::prepare("t.toml", base, &["dcqcn.byte_counter=\"off\"".to_string()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(off.scenario.transport.dcqcn.byte_counter, u64::MAX);
    let e = error_of(base, &["qos.class[0].xoff=\"9MB\""]);
    assert!(
        e.contains("qos.class[0].xoff") && e.contains("above the switch buffer"),
        "{e}"
    );
    let e = error_of(base, &["qos.class[0].wred.max_probability=-0.1"]);
    assert!(
        e.contains("max_probability") && e.contains("between 0 and 1"),
        "{e}"
    );
    let e = error_of(base, &["qos.class[0].wred.min=\"500KB\""]);
    assert!(e.contains("wred.min") && e.contains("min <= max"), "{e}");
    let e = error_of(
        base,
        &["qos.class[0].xon=\"300KB\"", "qos.class[0].xoff=\"200KB\""],
    );
    assert!(e.contains("xon") && e.contains("less than xoff"), "{e}");
    let e = error_of(base, &["switch.buffer=\"20KB\""]);
    assert!(e.contains("switch.buffer") && e.contains("headroom"), "{e}");
    let e = error_of(base, &["qos.class[0].bandwidth_percent=150"]);
    assert!(e.contains("bandwidth_percent"), "{e}");
    let e = error_of(base, &["pfc.quanta=70000"]);
    assert!(e.contains("pfc.quanta"), "{e}");
}

/// The ECN/PFC order and the headroom are checked with the numbers, and
/// `--strict` turns the warnings into errors.
#[test]
fn threshold_order_is_checked() {
    let text = r#"
[topology]
kind = "single-rail"
hosts = 2
gpus_per_host = 1

[[qos.class]]
name = "rocev2"
dscp = [24]
queue = 3
lossless = true
wred = { min = "100KB", max = "400KB" }
xoff = "300KB"
xon = "50KB"

[[workload]]
kind = "transfer"
src = 0
dst = 1
bytes = "1MB"
"#;
    let p = scenario::prepare("t.toml", text, &[]).unwrap();
    let w = &p.scenario.warnings;
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].message.contains("xON < WRED min < WRED max < xOFF"));
    assert!(w[0].message.contains("xOFF 300.0 KB"), "{}", w[0].message);
    let ok = scenario::prepare("t.toml", text, &["qos.class[0].xoff=\"500KB\"".into()]).unwrap();
    assert!(ok.scenario.warnings.is_empty());
}

/// The receiver sends its first CNP exactly the generation delay after the
/// first CE-marked packet, and at most one per QP per interval.
#[test]
fn cnps_wait_the_generation_delay_and_respect_the_interval() {
    let text = include_str!("../examples/lossless/incast.toml");
    let first = |sets: &[&str]| {
        let mut sim = prepare(text, sets);
        sim.run(|_| {});
        sim
    };
    let a = first(&[]);
    let b = first(&["dcqcn.cnp_delay=\"3us\""]);
    let (ca, cb) = (a.firsts().cnp_ps.unwrap(), b.firsts().cnp_ps.unwrap());
    assert_eq!(cb - ca, 3_000_000);
    let span = a.now().0 as f64;
    let interval = a.scenario().transport.dcqcn.cnp_interval.0 as f64;
    assert_eq!(interval, 4e6, "the firmware's MIN_TIME_BETWEEN_CNPS");
    for q in a.qps() {
        assert!(q.cnps_sent > 0);
        assert!(
            q.cnps_sent as f64 <= span / interval + 1.0,
            "{} CNPs in {span} ps",
            q.cnps_sent
        );
        assert_eq!(q.cnps_sent, q.cnps_received);
    }
}

/// Sampled outputs are part of the run's deterministic result.
#[test]
fn sampled_outputs_repeat_exactly() {
    let text = include_str!("../examples/lossless/incast.toml");
    let run = |dir: &std::path::Path| {
        let mut sim = prepare(text, &[]);
        let stop = sim.run(|_| {});
        let s = Summary::of(&sim, stop);
        let perf = fabricsim::report::Perf::of(&sim, 1.0);
        fabricsim::report::write_outputs(dir, &sim, &s, &perf).unwrap();
        [
            "summary.json",
            "ts_queue_depth.csv",
            "ts_qp_dcqcn.csv",
            "pfc.csv",
            "queues.csv",
            "qps.csv",
        ]
        .map(|f| std::fs::read(dir.join(f)).unwrap())
    };
    let base = std::env::temp_dir().join(format!("fabricsim-lossless-{}", std::process::id()));
    let (x, y) = (run(&base.join("a")), run(&base.join("b")));
    assert!(x == y);
    assert!(x[1].len() > 1000, "queue depths were sampled");
    let _ = std::fs::remove_dir_all(base);
}

/// A VLAN ID only means something on tagged frames, and rails that are
/// VLANs bring their own.
#[test]
fn vlan_settings_are_checked() {
    let text = |kind: &str| {
        format!(
            r#"
[topology]
kind = "{kind}"
hosts = 2
gpus_per_host = 1

[[workload]]
kind = "transfer"
src = 0
dst = 1
bytes = "1MB"
"#
        )
    };
    let fabric = text("rail-only");
    let e = error_of(&fabric, &["qos.vlan_id=10"]);
    assert!(
        e.contains("qos.vlan_id") && e.contains("got 10") && e.contains("vlan_tagging = true"),
        "{e}"
    );
    let e = error_of(&fabric, &["qos.vlan_tagging=true", "qos.vlan_id=4095"]);
    assert!(e.contains("from 1 to 4094"), "{e}");
    let e = error_of(
        &text("single-rail"),
        &["qos.vlan_tagging=true", "qos.vlan_id=10"],
    );
    assert!(e.contains("rails are VLANs"), "{e}");
    let e = error_of(&fabric, &["qos.vlan_tagging=\"yes\""]);
    assert!(e.contains("qos.vlan_tagging"), "{e}");
}

/// The walk-through with 16 MB per sender under the default DCQCN (the
/// NIC firmware's own parameters): CNPs, not pauses, slow the senders.
/// Their paused time is at most a third of PFC alone's, the six rates
/// converge to a fair share of a busy port (Jain above 0.95 over the
/// second half of the time all six send), and the bottleneck queue stays
/// below WRED max.
#[test]
fn firmware_dcqcn_takes_the_incast_over_from_pfc() {
    let text = std::fs::read_to_string("examples/lossless/incast.toml").unwrap();
    assert!(text.contains("preset = \"connectx-firmware\""));
    let paused = |sets: &[&str]| {
        let (_, s) = common::run_named("incast.toml", &text, sets);
        assert_eq!(s.flows_completed, s.flows_total);
        assert_eq!(s.lossless_drops, 0);
        s.pfc_paused_ps
    };
    let pfc_only = paused(&["transport.congestion_control=\"none\""]);
    let firmware = paused(&[]);
    assert!(
        firmware * 3 <= pfc_only,
        "paused {firmware} ps under DCQCN against {pfc_only} ps with PFC alone"
    );

    // The first sender finishes after about 2.4 ms; the window is the
    // second half of the time before that.
    let mut sim = prepare(&text, &["report.samples=4000"]);
    let window = (SimTime::from_us(1100), SimTime::from_us(2200));
    let gbps = goodput_over(&mut sim, window);
    assert!(sim
        .qps()
        .iter()
        .all(|q| q.resp.delivered_bytes < 16_000_000));
    assert_eq!(gbps.len(), 6);
    let (sum, jain) = (gbps.iter().sum::<f64>(), jain(&gbps));
    assert!(jain > 0.95, "Jain {jain:.3} over rates {gbps:?} Gb/s");
    assert!(
        sum > 0.85 * 400.0,
        "the 400G port stays busy: {sum:.1} Gb/s"
    );
    let to0 = sim.topo().port(sim.topo().nics[0].ports[0]).peer;
    let series = &sim.series();
    let (from, to) = (
        (window.0 .0 / series.interval.0) as usize,
        (window.1 .0 / series.interval.0) as usize,
    );
    let depths: Vec<f32> = series
        .queue_depth
        .iter()
        .filter(|(k, _)| *k as usize / 8 == to0.idx())
        .flat_map(|(_, v)| v[from..to.min(v.len())].to_vec())
        .collect();
    assert!(depths.len() > 100, "{} samples", depths.len());
    let max = depths.iter().copied().fold(0.0, f32::max);
    assert!(max < 400_000.0, "queue peaks at {max} B, above WRED max");
}
