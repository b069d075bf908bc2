//! Analytic cases that pin the physics: exact completion times on idle
//! paths, fair sharing of a bottleneck, and what an ECMP collision costs.

mod common;
use common::{fct, run, run_with};

/// 100 Gb/s is 80 ps per byte.
const PS_PER_BYTE_100G: u64 = 80;
const DELAY_PS: u64 = 1_000_000;
/// Wire bytes: preamble+SFD+IFG 20, Ethernet 14 + FCS 4, IPv4 20, UDP 8,
/// BTH 12, ICRC 4 = 82, plus RETH 16 on Write First / Write Only.
const OVERHEAD: u64 = 82;
const RETH: u64 = 16;

const ONE_SWITCH: &str = r#"
[topology]
kind = "single-rail"
hosts = 2
gpus_per_host = 1
nic_speed = "100G"
link_delay = "1us"

[transport]
mtu = 4096

[[workload]]
kind = "transfer"
src = 0
dst = 1
bytes = 10000
"#;

#[test]
fn one_transfer_through_one_switch_finishes_exactly_on_time() {
    // Untagged, then with an 802.1Q tag (4 more bytes on every frame).
    for (tag, sets, want) in [
        (0, &[][..], 3_156_480),
        (4, &["qos.vlan_tagging=true"][..], 3_157_760),
    ] {
        let (sim, s) = run_with(ONE_SWITCH, sets);
        // Three packets: Write First 4096 B, Middle 4096 B, Last 1808 B.
        let w = [4096 + OVERHEAD + RETH, 4096 + OVERHEAD, 1808 + OVERHEAD].map(|b| b + tag);
        let ser = |b: u64| b * PS_PER_BYTE_100G;
        // The NIC sends back to back; the switch forwards each packet once
        // received whole (store and forward) and as soon as its port is free.
        let mut nic_done = 0;
        let mut sw_done = 0;
        for &b in &w {
            nic_done += ser(b);
            let arrive = nic_done + DELAY_PS;
            sw_done = arrive.max(sw_done) + ser(b);
        }
        let expected = sw_done + DELAY_PS;
        assert_eq!(expected, want);
        assert_eq!(fct(&sim, 0), expected);
        assert_eq!(sim.flows()[0].ideal_fct.0, expected);
        assert_eq!(s.slowdown.unwrap().max, 1.0);
        assert_eq!(s.bytes_delivered, 10_000);
        // 3 data packets and one ACK (the last packet is always
        // acknowledged), each over two links.
        assert_eq!(s.link_transmissions, 3 * 2 + 2);
    }
}

#[test]
fn one_packet_over_leaf_spine_leaf_finishes_exactly_on_time() {
    let text = r#"
[topology]
kind = "rail-optimized"
hosts = 2
gpus_per_host = 1
hosts_per_leaf = 1
spines = 1
nic_speed = "100G"
uplink_speed = "400G"
link_delay = "1us"

[[workload]]
kind = "transfer"
src = 0
dst = 1
bytes = 1000
"#;
    let (sim, _) = run(text);
    let wire = 1000 + OVERHEAD + RETH; // a Write Only
                                       // NIC -> leaf and leaf -> NIC at 100G; leaf -> spine -> leaf at 400G.
    let expected = 2 * wire * 80 + 2 * wire * 20 + 4 * DELAY_PS;
    assert_eq!(fct(&sim, 0), expected);
    assert_eq!(sim.flows()[0].ideal_fct.0, expected);
}

#[test]
fn multi_qp_write_only_transfer_matches_its_ideal_on_an_idle_path() {
    let (sim, s) = run_with(
        ONE_SWITCH,
        &[
            "workload[0].bytes=\"1MB\"",
            "workload[0].qps=3",
            "transport.write_mode=\"write-only\"",
        ],
    );
    assert_eq!(sim.flows()[0].n_qps, 3);
    assert_eq!(fct(&sim, 0), sim.flows()[0].ideal_fct.0);
    assert_eq!(s.bytes_delivered, 1_000_000);
}

#[test]
fn two_equal_transfers_share_one_bottleneck_equally() {
    let text = r#"
[topology]
kind = "single-rail"
hosts = 3
gpus_per_host = 1
nic_speed = "100G"
link_delay = "1us"

# Line-rate senders: the test is about how the link is shared.
[transport]
congestion_control = "none"

[[workload]]
kind = "incast"
dst = 0
srcs = [1, 2]
bytes = "4MB"
"#;
    let (sim, _) = run(text);
    let (a, b) = (fct(&sim, 0) as f64, fct(&sim, 1) as f64);
    let alone = sim.flows()[0].ideal_fct.0 as f64;
    // Each gets half of the 100G port to host 0, so each takes about
    // twice as long as alone, and they finish together.
    assert!((a / b - 1.0).abs() < 0.01, "{a} vs {b}");
    assert!((a / alone - 2.0).abs() < 0.02, "slowdown {}", a / alone);
    let goodput_gbps = 4e6 * 8.0 / (a / 1e12) / 1e9;
    assert!(
        (goodput_gbps - 48.5).abs() < 1.5,
        "{goodput_gbps} Gb/s each"
    );
}

/// Two hosts under leaf 0 each write 8 MB to a host under leaf 1, across
/// two spines with one 100G uplink each. Whether ECMP puts both flows on
/// one uplink depends on the seed; over seeds we see both outcomes.
#[test]
fn ecmp_collision_doubles_completion_time() {
    let text = r#"
[topology]
kind = "rail-optimized"
hosts = 4
gpus_per_host = 1
hosts_per_leaf = 2
spines = 2
nic_speed = "100G"
uplink_speed = "100G"
link_delay = "1us"

[transport]
congestion_control = "none"

[[workload]]
kind = "transfer"
src = 0
dst = 2
bytes = "8MB"

[[workload]]
kind = "transfer"
src = 1
dst = 3
bytes = "8MB"
"#;
    let mut collided = None;
    let mut split = None;
    for seed in 1..40 {
        let (sim, _) = run_with(text, &[&format!("simulation.seed={seed}")]);
        // Uplinks of leaf 0 that carried data.
        let leaf0 = &sim.topo().switches[0];
        assert_eq!(leaf0.name, "leaf0");
        let used = leaf0
            .ports
            .iter()
            .filter(|&&p| sim.topo().owner_tier(sim.topo().port(p).peer) == 1)
            .filter(|&&p| sim.ports()[p.idx()].tx_wire_bytes > 1_000_000)
            .count();
        let worst = fct(&sim, 0).max(fct(&sim, 1));
        // The reported paths agree with the links that carried the bytes.
        let spine = |f: usize| sim.qp_path(fabricsim::topology::QpId(f as u32)).unwrap()[1];
        assert_eq!(sim.qp_path(fabricsim::topology::QpId(0)).unwrap().len(), 3);
        assert_eq!(spine(0) == spine(1), used == 1);
        match used {
            1 => collided = collided.or(Some(worst)),
            2 => split = split.or(Some(worst)),
            n => panic!("{n} uplinks used"),
        }
        if collided.is_some() && split.is_some() {
            break;
        }
    }
    let (c, s) = (
        collided.expect("some seed collides") as f64,
        split.expect("some seed splits") as f64,
    );
    let ratio = c / s;
    assert!((1.9..2.1).contains(&ratio), "collision costs {ratio:.3}x");
}

/// Six hosts under leaf 0 write to six hosts under leaf 1 across four
/// spines. Hashing only the destination address sends every flow to one
/// destination the same way; the 5-tuple spreads them; every hash function
/// delivers everything.
#[test]
fn hash_fields_and_functions_decide_the_spread() {
    let text = r#"
[topology]
kind = "rail-optimized"
hosts = 12
gpus_per_host = 1
hosts_per_leaf = 6
spines = 4
nic_speed = "100G"
uplink_speed = "100G"

[[workload]]
kind = "incast"
dst = 6
srcs = [0, 1, 2, 3, 4, 5]
bytes = "200KB"
"#;
    let uplinks_used = |sets: &[&str]| {
        let (sim, s) = run_with(text, sets);
        assert_eq!(s.bytes_delivered, s.bytes_offered);
        let leaf0 = &sim.topo().switches[0];
        leaf0
            .ports
            .iter()
            .filter(|&&p| sim.topo().owner_tier(sim.topo().port(p).peer) == 1)
            .filter(|&&p| sim.ports()[p.idx()].tx_wire_bytes > 100_000)
            .count()
    };
    assert_eq!(uplinks_used(&["switch.ecmp.fields=[\"dst_ip\"]"]), 1);
    for hash in ["crc32", "crc32c", "crc16-ccitt", "crc16-arc"] {
        let set = format!("switch.ecmp.hash=\"{hash}\"");
        assert!(
            uplinks_used(&[&set]) >= 2,
            "{hash} put six flows on one uplink"
        );
        let one = uplinks_used(&[
            &set,
            "switch.ecmp.fields=[\"dst_ip\", \"protocol\", \"udp_dport\"]",
        ]);
        assert_eq!(one, 1, "{hash}: flows to one address with no varying field");
    }
    // The BTH destination QP alone also separates flows (each has its own QP).
    assert!(uplinks_used(&["switch.ecmp.fields=[\"dst_qp\"]"]) >= 2);
}
