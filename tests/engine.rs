//! The engine as a library: several simulations in one process.

mod common;

#[test]
fn simulations_run_side_by_side_on_threads_with_identical_results() {
    let text = include_str!("../examples/multi-pod.toml");
    let runs: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || common::run(text).1))
        .collect();
    let results: Vec<_> = runs.into_iter().map(|h| h.join().unwrap()).collect();
    let a = serde_json::to_string(&results[0]).unwrap();
    let b = serde_json::to_string(&results[1]).unwrap();
    assert_eq!(a, b);
    assert_eq!(results[0].flows_completed, 128);
}

#[test]
fn routing_gives_every_equal_cost_next_hop() {
    use fabricsim::topology::Owner;
    let text = include_str!("../examples/fat-tree.toml");
    let p = fabricsim::scenario::prepare("t.toml", text, &[]).unwrap();
    let (t, r) = (&p.topology, &p.routes);
    // From an edge switch to a host in another pod: 4 aggregation next
    // hops (k/2); from an aggregation switch, 4 cores; from a core, the one
    // aggregation switch of the destination pod.
    let dst = t.gpus[127].nic;
    for (s, sw) in t.switches.iter().enumerate() {
        let g = r.group_for(fabricsim::topology::SwitchId(s as u32), dst);
        let ports: Vec<_> = r.switches[s].group_ports(g).collect();
        let in_dst_pod = sw.name.starts_with("pod7-");
        let expected = match (sw.tier, in_dst_pod) {
            (0, true) if sw.name == "pod7-edge3" => 1,
            (0, _) => 4,
            (1, true) => 1,
            (1, false) => 4,
            _ => 1,
        };
        assert_eq!(ports.len(), expected, "{}", sw.name);
        for p in ports {
            assert!(matches!(t.port(p).owner, Owner::Switch(_)));
        }
    }
}

/// Switches hash the CRC senders cached in each packet; that must equal
/// hashing the header fields directly, in both directions, everywhere.
#[test]
fn cached_header_crcs_give_the_hash_of_the_header() {
    use fabricsim::wire::{Opcode, Packet};
    for (text, fields) in [
        (
            include_str!("../examples/fat-tree.toml"),
            "[\"src_ip\", \"dst_ip\", \"udp_sport\"]",
        ),
        (
            include_str!("../examples/fat-tree.toml"),
            "[\"dst_qp\", \"protocol\", \"udp_dport\"]",
        ),
        // Rails as VLANs: the VLAN ID is part of the key.
        (
            include_str!("../examples/single-rail.toml"),
            "[\"src_ip\", \"dst_ip\", \"protocol\", \"udp_sport\", \"udp_dport\", \"dst_qp\", \"vlan\"]",
        ),
    ] {
        for hash in ["crc32", "crc16-ccitt"] {
            let sets = [
                format!("switch.ecmp.fields={fields}"),
                format!("switch.ecmp.hash=\"{hash}\""),
            ];
            let p = fabricsim::scenario::prepare("t.toml", text, &sets).unwrap();
            let sim = fabricsim::engine::Simulation::new(p);
            for (i, qp) in sim.qps().iter().enumerate().take(20) {
                let f = &sim.flows()[qp.flow.idx()];
                for (dir, (src, dst)) in [
                    (f.spec.src_nic, f.spec.dst_nic),
                    (f.spec.dst_nic, f.spec.src_nic),
                ]
                .into_iter()
                .enumerate()
                {
                    let pkt = Packet {
                        src,
                        dst,
                        qp: fabricsim::topology::QpId(i as u32),
                        psn: 0,
                        payload: 0,
                        wire_bytes: 0,
                        header_crc: qp.header_crc[dir],
                        udp_sport: qp.udp_sport,
                        opcode: Opcode::Ack,
                        tos: 24 << 2,
                        flow: fabricsim::wire::packet::NO_FLOW,
                    };
                    for sw in sim.switches() {
                        let e = &sw.balancer.ecmp;
                        assert_eq!(
                            e.flow_hash(&pkt),
                            e.flow_hash_uncached(&pkt, sim.topo().vlan_of(src))
                        );
                    }
                }
            }
        }
    }
}

/// The estimate made before a run counts every data packet and ACK over
/// each link of its path: exact when nothing is lost or paused, close on
/// a permutation with ECMP collisions, CNPs and PFC frames.
#[test]
fn the_estimate_before_a_run_matches_what_it_then_does() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // One transfer through one switch: 3 data packets and the ACK of the
    // last, each over two links.
    let (sim, s) = common::run_with(
        r#"
[topology]
kind = "single-rail"
hosts = 2
gpus_per_host = 1
nic_speed = "100G"
[[workload]]
kind = "transfer"
src = 0
dst = 1
bytes = 10000
"#,
        &[],
    );
    assert_eq!(s.link_transmissions, 8);
    assert_eq!(sim.estimate().link_transmissions, 8);
    let (sim, s) = common::run_file(
        &root.join("examples/bench/fat-tree-k8-permutation.toml"),
        &[],
    );
    let est = sim.estimate().link_transmissions as f64;
    let got = s.link_transmissions as f64;
    assert!((est / got - 1.0).abs() < 0.03, "estimated {est}, did {got}");
    let est = sim.estimate().events as f64;
    let got = s.events as f64;
    assert!(
        (est / got - 1.0).abs() < 0.15,
        "estimated {est} events, handled {got}"
    );
    let line = fabricsim::report::estimate_line(&sim);
    assert!(line.contains("0.5 M link transmissions"), "{line}");
}
