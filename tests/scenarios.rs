//! Bad scenarios get errors that name the file, the line, the key, what was
//! given and what was expected; good ones build the fabric they describe.

mod common;
use common::error_of;
use fabricsim::scenario;
use fabricsim::topology::summary::TopologySummary;

const GOOD: &str = r#"
[topology]
kind = "rail-optimized"
hosts = 4
gpus_per_host = 8
nic_speed = "200G"
spines = 2
uplink_speed = "400G"

[[workload]]
kind = "transfer"
src = 0
dst = 9
bytes = "1MB"
"#;

#[test]
fn unknown_key_is_named_with_its_line() {
    let text = GOOD.replace("spines = 2", "spines = 2\nspine_count = 4");
    let e = error_of(&text, &[]);
    assert!(
        e.starts_with("bad.toml:8: topology.spine_count: unknown field `spine_count`"),
        "{e}"
    );
}

#[test]
fn wrong_unit_says_what_was_expected() {
    let e = error_of(&GOOD.replace("\"400G\"", "\"400GB/s\""), &[]);
    assert!(
        e.starts_with("bad.toml:8: topology.uplink_speed: got \"400GB/s\", expected a rate in bits per second"),
        "{e}"
    );
    let e = error_of(
        &GOOD.replace("bytes = \"1MB\"", "bytes = \"1 parsec\""),
        &[],
    );
    assert!(
        e.contains("workload[0].bytes: got \"1 parsec\", expected a positive size in bytes"),
        "{e}"
    );
}

#[test]
fn negative_size_is_refused() {
    let e = error_of(&GOOD.replace("bytes = \"1MB\"", "bytes = -5"), &[]);
    assert!(
        e.starts_with("bad.toml:14: workload[0].bytes: got -5, expected a positive size"),
        "{e}"
    );
}

#[test]
fn gpu_index_out_of_range_names_the_range() {
    let e = error_of(&GOOD.replace("dst = 9", "dst = 32"), &[]);
    assert!(
        e.starts_with("bad.toml:13: workload[0].dst: GPU 32 does not exist; the fabric has 32 GPUs, numbered 0 to 31"),
        "{e}"
    );
}

#[test]
fn radix_exceeded_says_by_how_many() {
    // With one rail per leaf, leaf 0 serves rail 0 of all 40 hosts and
    // has one uplink to each of 2 spines: 42 ports.
    let text = GOOD
        .replace("hosts = 4", "hosts = 40")
        .replace("spines = 2", "spines = 2\nswitch_radix = 32");
    let e = error_of(&text, &[]);
    assert!(
        e.contains("topology.switch_radix: switch leaf0 needs 42 ports but switch_radix is 32 (10 too many)"),
        "{e}"
    );
}

#[test]
fn cross_rail_transfer_in_a_rail_only_fabric_is_explained() {
    let text = r#"
[topology]
kind = "rail-only"
hosts = 2

[[workload]]
kind = "transfer"
src = 0
dst = 9
bytes = 1000
"#;
    let e = error_of(text, &[]);
    assert!(
        e.contains("no network path from host0/gpu0 (rail 0) to host1/gpu1 (rail 1)"),
        "{e}"
    );
    let e = error_of(&text.replace("rail-only", "single-rail"), &[]);
    assert!(e.contains("rails are separate VLANs"), "{e}");
}

#[test]
fn keys_of_another_topology_kind_are_refused() {
    let e = error_of(&GOOD.replace("spines = 2", "spines = 2\nk = 8"), &[]);
    assert!(
        e.contains("topology.k: is not used by kind = \"rail-optimized\" (only by fat-tree)"),
        "{e}"
    );
}

#[test]
fn toml_syntax_errors_carry_the_line() {
    let e = error_of("[topology]\nkind = \"fat-tree\"\nk = = 4\n", &[]);
    assert!(e.starts_with("bad.toml:3: invalid TOML"), "{e}");
}

#[test]
fn set_overrides_any_key_and_is_validated_like_the_file() {
    let p = scenario::prepare(
        "t.toml",
        GOOD,
        &["topology.spines=4".into(), "workload[0].bytes=2MB".into()],
    )
    .unwrap();
    assert_eq!(p.scenario.topology.spines, 4);
    assert_eq!(p.flows[0].bytes, 2_000_000);
    let p = scenario::prepare("t.toml", GOOD, &["workload.0.qps=4".into()]).unwrap();
    assert_eq!(p.flows[0].qps, 4);
    let e = error_of(GOOD, &["topology.nic_speed=300G"]);
    assert!(
        e.starts_with("bad.toml (--set): topology.nic_speed: got \"300G\"")
            && e.contains("25G, 40G, 50G, 100G"),
        "{e}"
    );
    // The 40G of the published DCQCN experiments is a NIC speed.
    let p = scenario::prepare("t.toml", GOOD, &["topology.nic_speed=40G".into()]).unwrap();
    assert_eq!(p.scenario.topology.nic_speed.bps(), 40_000_000_000);
    let e = error_of(GOOD, &["workload[3].bytes=1"]);
    assert!(e.contains("index 3 does not exist"), "{e}");
    let e = error_of(GOOD, &["nonsense"]);
    assert!(e.contains("expected --set KEY=VALUE"), "{e}");
}

/// A mistyped key is refused, never applied as another key: before,
/// `workload[0.bytes` set `workload[0].bytes`.
#[test]
fn set_keys_with_unbalanced_brackets_are_refused() {
    for (key, why) in [
        ("workload[0.bytes", "a '[' without its ']'"),
        ("workload]0.bytes", "a ']' without its '['"),
        ("workload[0]x.bytes", "characters after ']'"),
        ("workload[[0]].bytes", "a '[' inside brackets"),
        ("workload[].bytes", "empty brackets"),
        ("workload..bytes", "an empty name"),
        ("workload.0.bytes.", "an empty name"),
    ] {
        let e = error_of(GOOD, &[&format!("{key}=2MB")]);
        assert!(e.contains("is not a key") && e.contains(why), "{key}: {e}");
    }
}

/// A retransmission timeout shorter than a round trip would resend every
/// packet before its ACK could come back: refused with the round trip.
/// The default is the timeout NCCL gives its RC QPs.
#[test]
fn a_retransmission_timeout_below_the_round_trip_is_refused() {
    let e = error_of(GOOD, &["transport.rto=\"1ps\""]);
    assert!(
        e.contains("transport.rto: got 1 ps, expected at least")
            && e.contains("round trip of the fabric's longest path (4 links each way"),
        "{e}"
    );
    let p = scenario::prepare("t.toml", GOOD, &[]).unwrap();
    assert_eq!(p.scenario.transport.rto.0, 4_096_000 << 20);
    // The multipath transport keeps its own short timer.
    let p = scenario::prepare("t.toml", GOOD, &["transport.protocol=\"mrc\"".into()]).unwrap();
    assert_eq!(p.scenario.transport.rto.0, 1_000_000_000);
}

/// A pause refreshed faster than a pause frame takes on the wire fills
/// the link with pause frames (72 M of them in the incast walk-through
/// with quanta = 1): refused. A refresh longer than the pause lets it
/// lapse: a warning.
#[test]
fn pfc_refresh_shorter_than_a_pause_frame_is_refused_and_longer_than_a_pause_warned() {
    let e = error_of(GOOD, &["pfc.quanta=1"]);
    assert!(
        e.contains("pfc.quanta: got 1")
            && e.contains("at least one pause frame's time on the wire"),
        "{e}"
    );
    let e = error_of(GOOD, &["pfc.refresh=\"1ns\""]);
    assert!(e.contains("pfc.refresh: got 1.000 ns"), "{e}");
    let p = scenario::prepare(
        "t.toml",
        GOOD,
        &["pfc.quanta=2000".into(), "pfc.refresh=\"40us\"".into()],
    )
    .unwrap();
    assert!(
        p.scenario
            .warnings
            .iter()
            .any(|w| w.key == "pfc.refresh" && w.message.contains("lapses in between")),
        "{:?}",
        p.scenario.warnings
    );
    // The defaults raise neither.
    let p = scenario::prepare("t.toml", GOOD, &[]).unwrap();
    assert!(p.scenario.warnings.iter().all(|w| w.key != "pfc.refresh"));
}

fn topo(text: &str) -> (fabricsim::topology::Topology, TopologySummary) {
    let p = scenario::prepare("t.toml", text, &[]).unwrap_or_else(|e| panic!("{e}"));
    let s = TopologySummary::of(&p.topology, scenario::resolve::cross_rail(&p.topology));
    (p.topology, s)
}

#[test]
fn fat_tree_k16_has_1024_hosts_and_full_bisection() {
    let (t, s) = topo("[topology]\nkind = \"fat-tree\"\nk = 16\n[[workload]]\nkind = \"transfer\"\nsrc = 0\ndst = 1\nbytes = 1\n");
    assert_eq!(t.hosts.len(), 1024);
    assert_eq!(t.switches.len(), 64 + 128 + 128);
    assert_eq!(t.links.len(), 3 * 1024);
    assert!(t.switches.iter().all(|sw| sw.ports.len() == 16));
    assert_eq!(s.bisection_bps, 1024 * 100_000_000_000 / 2);
    assert!(s
        .tiers
        .iter()
        .take(2)
        .all(|t| t.oversubscription == Some(1.0)));
}

#[test]
fn rail_optimized_pod_matches_seed_002() {
    // The default scenario: 4 leaves x (16 x 200G down, 4 x 2 x 400G up).
    let (t, s) = topo(scenario::DEFAULT_SCENARIO);
    assert_eq!(t.gpus.len(), 64);
    let leaf = &s.tiers[0];
    assert_eq!((leaf.switches, leaf.ports_max), (4, 24));
    assert_eq!(leaf.down_bps, 4 * 3_200_000_000_000);
    assert_eq!(leaf.oversubscription, Some(1.0));
    // GPU k of every host on the leaf of its rail pair.
    let leaf_of = |g: usize| {
        t.attached_switch(t.nics[t.gpus[g].nic.idx()].ports[0])
            .unwrap()
    };
    assert_eq!(leaf_of(0), leaf_of(8 + 1));
    assert_ne!(leaf_of(0), leaf_of(2));
}

#[test]
fn oversubscribed_pod_reports_its_ratio_and_bisection() {
    let text = GOOD.replace("uplink_speed = \"400G\"", "uplink_speed = \"200G\"");
    let (_, s) = topo(&text);
    // Each leaf: 4 x 200G down, 2 x 200G up.
    assert_eq!(s.tiers[0].oversubscription, Some(2.0));
    assert_eq!(s.bisection_bps, s.host_injection_bps / 4);
}

#[test]
fn multi_pod_shared_nics_and_dual_ports_build_as_described() {
    let text = r#"
[topology]
kind = "multi-pod"
pods = 3
hosts = 4
gpus_per_host = 8
nics_per_host = 2
nic_ports = 2
spines = 2
super_spines = 3
spine_uplinks_per_super_spine = 2

[[workload]]
kind = "transfer"
src = 0
dst = 95
bytes = 1
"#;
    let (t, s) = topo(text);
    assert_eq!(t.gpus.len(), 96);
    assert_eq!(t.nics.len(), 24);
    // Shared NICs: GPUs 0-3 on NIC 0, 4-7 on NIC 1.
    assert_eq!(t.gpus[3].nic, t.gpus[0].nic);
    assert_ne!(t.gpus[4].nic, t.gpus[0].nic);
    // Dual-port NICs land on two different leaves.
    let n = &t.nics[0];
    assert_ne!(t.attached_switch(n.ports[0]), t.attached_switch(n.ports[1]));
    assert_eq!(s.tiers.len(), 3);
    assert_eq!(s.tiers[2].switches, 3);
    // Spine -> super-spine port channels of 2.
    let spine_up: usize = t.links.iter().filter(|l| l.tier == 2).count();
    assert_eq!(spine_up, 3 * 2 * 3 * 2);
}

/// `super_spine_planes`: spine j of every pod reaches only the
/// super-spines of plane j mod planes, so a super-spine has a port
/// channel from each of its plane's spines only (spines / planes per
/// pod), not from every spine of the fabric; a plane count
/// that does not divide the spines and super-spines is refused.
#[test]
fn multi_pod_planes_connect_spine_j_to_plane_j_only() {
    let text = r#"
[topology]
kind = "multi-pod"
pods = 3
hosts = 4
gpus_per_host = 2
spines = 4
super_spines = 6
super_spine_planes = 2
spine_uplinks_per_super_spine = 2

[[workload]]
kind = "transfer"
src = 0
dst = 23
bytes = 1
"#;
    let (t, _) = topo(text);
    let switch_of = |p: fabricsim::topology::PortId| match t.ports[p.idx()].owner {
        fabricsim::topology::Owner::Switch(s) => t.switches[s.idx()].name.clone(),
        other => panic!("{other:?}"),
    };
    let mut pairs = std::collections::BTreeSet::new();
    for l in t.links.iter().filter(|l| l.tier == 2) {
        pairs.insert((switch_of(l.a), switch_of(l.b)));
    }
    // 3 pods x 4 spines x 3 super-spines of their plane (2 members each).
    assert_eq!(
        t.links.iter().filter(|l| l.tier == 2).count(),
        3 * 4 * 3 * 2
    );
    for (spine, sup) in &pairs {
        let j: usize = spine.rsplit("spine").next().unwrap().parse().unwrap();
        let s: usize = sup.trim_start_matches("super").parse().unwrap();
        assert_eq!(s / 3, j % 2, "{spine} to {sup}");
    }
    // Every super-spine: 3 pods x 2 spines of its plane x 2 members.
    for s in t.switches.iter().filter(|s| s.tier == 2) {
        assert_eq!(s.ports.len(), 3 * 2 * 2, "{}", s.name);
    }
    let e = error_of(&text.replace("super_spines = 6", "super_spines = 5"), &[]);
    assert!(
        e.contains("topology.super_spine_planes: got 2, expected a number that divides both spines (4) and super_spines (5)"),
        "{e}"
    );
}

#[test]
fn sizes_beyond_what_a_machine_holds_are_refused_before_building() {
    let e = error_of(&GOOD.replace("spines = 2", "spines = 2000000"), &[]);
    assert!(
        e.contains("topology.spines: got 2000000, expected at most 4096"),
        "{e}"
    );
    let e = error_of(
        &GOOD
            .replace("hosts = 4", "hosts = 60000")
            .replace("gpus_per_host = 8", "gpus_per_host = 32"),
        &[],
    );
    assert!(e.contains("at most 1,048,576 GPUs"), "{e}");
    let e = error_of(
        &GOOD.replace("bytes = \"1MB\"", "bytes = \"1MB\"\nqps = 5000"),
        &[],
    );
    assert!(
        e.contains("workload[0].qps: got 5000, expected at most 1024"),
        "{e}"
    );
    let e = error_of(&GOOD.replace("\"400G\"", "\"5M\""), &[]);
    assert!(
        e.contains("topology.uplink_speed: got \"5M\", expected a rate between 1G and 10T"),
        "{e}"
    );
    let e = error_of(GOOD, &["workload[0].start=\"1e9s\""]);
    assert!(e.contains("workload[0].start"), "{e}");
    let e = error_of(GOOD, &["workload[0].start=\"5000000s\""]);
    assert!(e.contains("expected at most 1000000s"), "{e}");
    let e = error_of(GOOD, &["switch.dynamic_threshold=-1"]);
    assert!(
        e.contains("switch.dynamic_threshold: got -1, expected an alpha between 1/256 and 256"),
        "{e}"
    );
    let e = error_of(&format!("{GOOD}\n[switch]\nbuffer = 4000\n"), &[]);
    assert!(
        e.contains("switch.buffer: got 4000 bytes, expected at least 18432"),
        "{e}"
    );
}

#[test]
fn type_errors_speak_the_scenario_language_and_survive_unicode() {
    let e = error_of(
        "# 1 µs — a comment\n[topology]\nkind = \"fat-tree\"\nk = \"x\"\n",
        &[],
    );
    assert_eq!(
        e,
        "bad.toml:4: topology.k: invalid type: string \"x\", expected an integer"
    );
    let e = error_of("# µs\n[topology\n", &[]);
    assert!(e.starts_with("bad.toml:2: invalid TOML"), "{e}");
}

/// A host is one scale-up domain of at most 576 GPUs (the guide's
/// figure): one more is refused, naming the key.
#[test]
fn a_host_holds_at_most_576_gpus() {
    let text = GOOD.replace("gpus_per_host = 8", "gpus_per_host = 577");
    let e = error_of(&text, &[]);
    assert!(
        e.contains("topology.gpus_per_host") && e.contains("at most 576"),
        "{e}"
    );
}
