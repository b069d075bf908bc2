//! ECMP variants: resilient bucket tables against member failures,
//! weighted bucket shares, and symmetric hashing.

mod common;
use common::run_with;

use fabricsim::engine::Simulation;
use fabricsim::scenario;
use fabricsim::switch::balance::Ctx;
use fabricsim::topology::{NicId, Owner, PortId, QpId, SwitchId};
use fabricsim::units::SimTime;
use fabricsim::wire::{Opcode, Packet};

/// Two leaves of four hosts, `spines` spines, no traffic to speak of.
fn leaf_spine(spines: u32, extra: &str) -> String {
    format!(
        r#"
[topology]
kind = "rail-optimized"
hosts = 8
gpus_per_host = 1
hosts_per_leaf = 4
spines = {spines}
nic_speed = "100G"
uplink_speed = "100G"

{extra}

[[workload]]
kind = "transfer"
src = 0
dst = 4
bytes = "4KB"
"#
    )
}

fn build(text: &str) -> Simulation {
    Simulation::new(scenario::prepare("test.toml", text, &[]).unwrap_or_else(|e| panic!("{e}")))
}

/// A packet from leaf0's first host to leaf1's first host whose header
/// hashes as flow number `i`.
fn flow_packet(i: u32) -> Packet {
    Packet {
        src: NicId(0),
        dst: NicId(4),
        qp: QpId(i),
        psn: 0,
        payload: 0,
        wire_bytes: 100,
        // A well-mixed stand-in for the sender's cached header CRC.
        header_crc: i.wrapping_mul(0x9E37_79B9) ^ (i >> 7),
        udp_sport: 49152,
        opcode: Opcode::WriteMiddle,
        tos: 24 << 2,
        flow: fabricsim::wire::packet::NO_FLOW,
    }
}

/// The member leaf0 picks for each of `n` flows.
fn placements(sim: &mut Simulation, n: u32) -> Vec<PortId> {
    let class = sim.routes().nic_class[4];
    let (balancer, routes) = sim.balancer_mut(0);
    let group = routes.by_class[class as usize];
    let ctx = Ctx {
        now: SimTime::ZERO,
        quality: &[],
        ingress: PortId(0),
        queue: 3,
        class,
        tenants: &[],
    };
    (0..n)
        .map(|i| balancer.choose(routes, group, &flow_packet(i), &ctx))
        .collect()
}

fn uplinks(sim: &Simulation) -> Vec<PortId> {
    let routes = &sim.routes().switches[0];
    let group = routes.by_class[sim.routes().nic_class[4] as usize];
    routes.member_slice(group).to_vec()
}

fn fail(sim: &mut Simulation, port: PortId, up: bool) {
    let (balancer, routes) = sim.balancer_mut(0);
    balancer.set_member(routes, port, up);
}

/// One of eight members fails: with a resilient table only the flows that
/// were on it move, and they come back when it recovers; modulo hashing
/// over the seven survivors moves most flows.
#[test]
fn resilient_hashing_moves_only_the_failed_members_flows() {
    let n = 4000;
    let mut moved = Vec::new();
    for resilient in [true, false] {
        let mut sim = build(&leaf_spine(
            8,
            &format!("[switch.ecmp]\nresilient = {resilient}\nbuckets = 1024"),
        ));
        let members = uplinks(&sim);
        assert_eq!(members.len(), 8);
        let before = placements(&mut sim, n);
        let dead = members[3];
        let on_dead = before.iter().filter(|&&p| p == dead).count();
        assert!(
            on_dead > n as usize / 16,
            "member 3 carries {on_dead} flows"
        );
        fail(&mut sim, dead, false);
        let after = placements(&mut sim, n);
        assert!(
            after.iter().all(|&p| p != dead),
            "nothing goes to a dead member"
        );
        let changed = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        if resilient {
            assert_eq!(changed, on_dead, "only the failed member's flows move");
            // Its buckets are shared out among all seven survivors.
            let mut got: Vec<PortId> = before
                .iter()
                .zip(&after)
                .filter(|(a, _)| **a == dead)
                .map(|(_, b)| *b)
                .collect();
            got.sort();
            got.dedup();
            assert_eq!(got.len(), 7);
            fail(&mut sim, dead, true);
            assert_eq!(
                placements(&mut sim, n),
                before,
                "recovery restores every flow"
            );
        } else {
            assert!(changed > n as usize / 2, "modulo moved only {changed}");
        }
        moved.push(changed);
    }
    assert!(moved[1] > 5 * moved[0], "{moved:?}");
}

/// Seed 001's weighted ECMP example: spines A and B (400G, weight 2) and
/// C (200G, weight 1) get 40%, 40% and 20% of the buckets, and of flows.
#[test]
fn weighted_ecmp_shares_buckets_40_40_20() {
    let sim = build(&leaf_spine(
        3,
        "[switch.ecmp]\nweights = { spine0 = 2, spine1 = 2, spine2 = 1 }",
    ));
    let members = uplinks(&sim);
    let b = sim.switches()[0].balancer.parts.buckets.as_ref().unwrap();
    let routes = &sim.routes().switches[0];
    let group = routes.by_class[sim.routes().nic_class[4] as usize];
    // 512 buckets: 204.8, 204.8, 102.4, rounded by largest remainder.
    assert_eq!(b.shares(routes, group), vec![205, 205, 102]);
    let mut sim = sim;
    let placed = placements(&mut sim, 10_000);
    let share = |m: PortId| placed.iter().filter(|&&p| p == m).count() as f64 / 1e4;
    for (m, want) in members.iter().zip([0.4, 0.4, 0.2]) {
        assert!((share(*m) - want).abs() < 0.02, "{} vs {want}", share(*m));
    }
}

/// Weights by capacity and a weighted failure: the failed member's
/// buckets go to the survivors in proportion to their weights.
#[test]
fn weighted_tables_by_capacity_and_after_failure() {
    let mut sim = build(&leaf_spine(
        3,
        "[switch.ecmp]\nweights = \"capacity\"\nresilient = true",
    ));
    let members = uplinks(&sim);
    let routes = &sim.routes().switches[0];
    let group = routes.by_class[sim.routes().nic_class[4] as usize];
    let shares = |s: &Simulation| {
        s.switches()[0]
            .balancer
            .parts
            .buckets
            .as_ref()
            .unwrap()
            .shares(routes, group)
    };
    // Equal 100G links: equal shares.
    assert_eq!(shares(&sim), vec![171, 171, 170]);
    fail(&mut sim, members[2], false);
    let routes = &sim.routes().switches[0];
    let after = sim.switches()[0]
        .balancer
        .parts
        .buckets
        .as_ref()
        .unwrap()
        .shares(routes, group);
    assert_eq!(after, vec![256, 256, 0]);
}

/// Symmetric hashing with one seed on every switch: each QP's ACKs take
/// exactly the reverse of its data path through a k = 4 fat-tree. Plain
/// 5-tuple hashing does not.
#[test]
fn symmetric_hashing_keeps_both_directions_on_one_path() {
    let text = |symmetric: bool| {
        format!(
            r#"
[topology]
kind = "fat-tree"
k = 4

[switch.ecmp]
seed = 7
symmetric = {symmetric}

[[workload]]
kind = "all-to-all"
bytes = "8KB"
"#
        )
    };
    let switches = |sim: &Simulation, route: Vec<PortId>| -> Vec<SwitchId> {
        route[1..]
            .iter()
            .map(|&p| match sim.topo().port(p).owner {
                Owner::Switch(s) => s,
                Owner::Nic(_) => unreachable!(),
            })
            .collect()
    };
    let mut asymmetric = Vec::new();
    for symmetric in [true, false] {
        let (sim, _) = run_with(&text(symmetric), &[]);
        let mut differ = 0;
        for q in 0..sim.qps().len() as u32 {
            let fwd = switches(&sim, sim.qp_route(QpId(q)).unwrap());
            let mut back = switches(&sim, sim.qp_ack_route(QpId(q)).unwrap());
            back.reverse();
            differ += usize::from(fwd != back);
        }
        if symmetric {
            assert_eq!(differ, 0);
        }
        asymmetric.push(differ);
    }
    assert!(asymmetric[1] > 0, "5-tuple hashing should split some QPs");
}

#[test]
fn hashing_settings_are_checked() {
    let base = leaf_spine(3, "");
    let e = common::error_of(&base, &["switch.ecmp.weights.spine9=2"]);
    assert!(
        e.contains("switch.ecmp.weights.spine9") && e.contains("no switch"),
        "{e}"
    );
    let e = common::error_of(&base, &["switch.ecmp.weights.spine0=0"]);
    assert!(e.contains("weight from 1 to 1000"), "{e}");
    let e = common::error_of(&base, &["switch.ecmp.buckets=3"]);
    assert!(
        e.contains("switch.ecmp.buckets") && e.contains("16 to 65536"),
        "{e}"
    );
    let e = common::error_of(
        &base,
        &[
            "switch.ecmp.symmetric=true",
            "switch.ecmp.fields=[\"dst_ip\", \"udp_sport\"]",
        ],
    );
    assert!(e.contains("needs both src_ip and dst_ip"), "{e}");
    // Symmetric hashing with per-switch seeds runs, with a warning.
    let p = scenario::prepare("w.toml", &base, &["switch.ecmp.symmetric=true".into()]).unwrap();
    assert!(p
        .scenario
        .warnings
        .iter()
        .any(|w| w.key == "switch.ecmp.symmetric"));
}

/// The shipped weighted-ECMP example: with 512 QPs per leaf, the bytes
/// each leaf sends to the three spines come out near 40/40/20.
#[test]
fn weighted_example_carries_bytes_40_40_20() {
    let text =
        std::fs::read_to_string("examples/load-balancing/weighted-resilient-ecmp.toml").unwrap();
    let (sim, _) = run_with(&text, &[]);
    for leaf in 0..2 {
        let routes = &sim.routes().switches[leaf];
        let members = routes.member_slice(0);
        let bytes: Vec<f64> = members
            .iter()
            .map(|p| sim.ports()[p.idx()].tx_wire_bytes as f64)
            .collect();
        let total: f64 = bytes.iter().sum();
        for (b, want) in bytes.iter().zip([0.4, 0.4, 0.2]) {
            assert!((b / total - want).abs() < 0.05, "leaf{leaf}: {bytes:?}");
        }
    }
}
