//! The fabric map (`fabricsim topo --svg`, `plot_fabric.svg`): one box
//! per switch and host and one line per pair of ends on every example
//! topology (blocks and bundles past the size where links cannot be told
//! apart), the same picture every time, and after a run the marks of
//! what happened: pauses with their counts, failed links struck through.

mod common;

use common::scenarios;
use fabricsim::report::fabric::{self, Colouring};
use fabricsim::topology::{Owner, Topology};
use std::collections::BTreeSet;

/// The pauses the picture's marks count, summed.
fn pause_marks(svg: &str) -> u64 {
    svg.split("<g class=\"pause\"><title>")
        .skip(1)
        .map(|s| s.split(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

fn count(svg: &str, class: &str) -> usize {
    svg.matches(&format!("class=\"{class}\"")).count()
}

/// The pairs of ends the links join: switches, and a host's NIC by rail.
fn pairs(topo: &Topology) -> usize {
    let end = |p| match topo.port(p).owner {
        Owner::Switch(s) => (0, s.0, 0),
        Owner::Nic(n) => (1, topo.nics[n.idx()].host.0, topo.nics[n.idx()].rail),
    };
    let set: BTreeSet<_> = topo
        .links
        .iter()
        .map(|l| {
            let (a, b) = (end(l.a), end(l.b));
            (a.min(b), a.max(b))
        })
        .collect();
    set.len()
}

#[test]
fn every_example_topology_is_drawn_box_by_box_or_in_blocks() {
    let mut detailed = 0;
    let mut blocks = 0;
    for path in scenarios("examples") {
        let text = std::fs::read_to_string(&path).unwrap();
        let p = fabricsim::scenario::prepare(&path.to_string_lossy(), &text, &[])
            .unwrap_or_else(|e| panic!("{e}"));
        let topo = &p.topology;
        let map = fabric::draw(topo, None, "t");
        let again = fabric::draw(topo, None, "t");
        assert_eq!(map.svg, again.svg, "{}: the same picture", path.display());
        assert_eq!(count(&map.svg, "link"), map.lines, "{}", path.display());
        if map.aggregated {
            blocks += 1;
            let (sw_pod, host_pod, _) = fabric::pods(topo);
            let n_pods = sw_pod
                .iter()
                .chain(&host_pod)
                .filter(|&&x| x != u32::MAX)
                .max()
                .unwrap()
                + 1;
            assert_eq!(
                count(&map.svg, "pod"),
                n_pods as usize,
                "{}",
                path.display()
            );
            assert!(n_pods > 1, "{}", path.display());
            assert_eq!(
                count(&map.svg, "pod") + count(&map.svg, "switch"),
                map.boxes,
                "{}",
                path.display()
            );
            // Every pod's hosts are in it.
            assert!(host_pod.iter().all(|&x| x != u32::MAX));
        } else {
            detailed += 1;
            assert_eq!(
                count(&map.svg, "switch"),
                topo.switches.len(),
                "{}",
                path.display()
            );
            assert_eq!(
                count(&map.svg, "host"),
                topo.hosts.len(),
                "{}",
                path.display()
            );
            assert_eq!(map.lines, pairs(topo), "{}", path.display());
            for s in &topo.switches {
                assert!(
                    map.svg.contains(&format!(">{}</text>", s.name)),
                    "{}",
                    s.name
                );
            }
        }
    }
    assert!(
        detailed >= 30 && blocks >= 4,
        "{detailed} detailed, {blocks} in blocks"
    );
}

#[test]
fn the_largest_fabric_is_a_picture_of_its_pods() {
    let path = "examples/bench/rail-multipod-32768gpu-allreduce.toml";
    let text = std::fs::read_to_string(path).unwrap();
    let p = fabricsim::scenario::prepare(path, &text, &[]).unwrap();
    let map = fabric::draw(&p.topology, None, "32k");
    assert!(map.aggregated);
    // 16 pods and the 256 super-spines as one block, a bundle each.
    assert_eq!((count(&map.svg, "pod"), count(&map.svg, "switch")), (16, 1));
    assert_eq!(map.lines, 16);
    assert!(map.svg.contains("x2048"), "each bundle's members");
    assert!(map.svg.len() < 64 * 1024, "{} bytes", map.svg.len());
}

#[test]
fn a_run_colours_the_map_with_its_pauses_and_failures() {
    // Incast under PFC: the marks' counts add up to the pauses sent.
    let (sim, _) = common::run_file(std::path::Path::new("examples/lossless/incast.toml"), &[]);
    let c = Colouring::of(&sim);
    let sent: u64 = c.pauses.iter().sum();
    assert!(sent > 0);
    let map = fabric::draw(sim.topo(), Some(&c), "incast");
    assert_eq!(pause_marks(&map.svg), sent);
    // Coloured lines differ from the bare topology's.
    let bare = fabric::draw(sim.topo(), None, "incast");
    assert_ne!(bare.svg, map.svg);
    assert!(!bare.svg.contains("class=\"pause\""));
    // A spine that fails: its links are dashed and crossed out.
    let (sim, _) = common::run_file(
        std::path::Path::new("examples/failures/spine-failure.toml"),
        &[],
    );
    let c = Colouring::of(&sim);
    assert!(c.failed.iter().any(|&f| f));
    let map = fabric::draw(sim.topo(), Some(&c), "failure");
    assert!(map.svg.contains("stroke-dasharray"));
    assert!(map.svg.contains("member(s) failed"));
    // And spine1 itself is struck through, alone.
    assert_eq!(count(&map.svg, "struck"), 1);
    let box_of = |name: &str| {
        map.svg
            .split("<g class=\"switch\"")
            .find(|g| g.contains(&format!(">{name}</text>")))
            .unwrap()
            .to_string()
    };
    assert!(box_of("spine1").contains("failed during the run"));
    assert!(box_of("spine1").contains("class=\"struck\""));
    assert!(!box_of("spine0").contains("failed"));
    assert!(!fabric::draw(sim.topo(), None, "bare")
        .svg
        .contains("struck"));
}

/// What the report's script recolours by: every port of a drawn line is
/// on that line only, at the end it belongs to (lower end first), and
/// every switch is in exactly one box.
#[test]
fn each_line_knows_its_ports_by_end_and_each_box_its_switches() {
    for path in scenarios("examples") {
        let text = std::fs::read_to_string(&path).unwrap();
        let p = fabricsim::scenario::prepare(&path.to_string_lossy(), &text, &[]).unwrap();
        let topo = &p.topology;
        let map = fabric::draw(topo, None, "t");
        assert_eq!((map.ends.len(), map.ports.len()), (map.lines, map.lines));
        let mut seen = vec![0u32; topo.ports.len()];
        for (k, sides) in map.ports.iter().enumerate() {
            assert!(!sides[0].is_empty() && sides[0].len() == sides[1].len());
            for (side, ports) in sides.iter().enumerate() {
                for &q in ports {
                    seen[q as usize] += 1;
                    let port = fabricsim::topology::PortId(q);
                    // Its peer is at the other end of the same line.
                    let peer = topo.port(port).peer.0;
                    assert!(map.ports[k][1 - side].contains(&peer));
                    if !map.aggregated {
                        let owner = match topo.port(port).owner {
                            Owner::Switch(s) => topo.switches[s.idx()].name.clone(),
                            Owner::Nic(n) => {
                                let nic = &topo.nics[n.idx()];
                                format!("host{} nic{}", nic.host.0, nic.rail)
                            }
                        };
                        assert_eq!(owner, map.ends[k][side], "{}", path.display());
                    }
                }
            }
        }
        assert!(seen.iter().all(|&n| n <= 1), "{}", path.display());
        if !map.aggregated {
            assert!(seen.iter().all(|&n| n == 1), "{}", path.display());
        }
        let mut boxed = vec![0u32; topo.switches.len()];
        for sws in &map.switches {
            for &s in sws {
                boxed[s as usize] += 1;
            }
        }
        assert!(boxed.iter().all(|&n| n == 1), "{}", path.display());
        assert_eq!(
            map.svg.matches(" data-box=\"").count(),
            map.switches.len(),
            "{}",
            path.display()
        );
    }
}

/// The member-count labels of a picture: left, baseline, width (as the
/// picture lays them out, 5.5 px a character at font size 9).
fn member_labels(svg: &str) -> Vec<(f64, f64, f64)> {
    svg.split("<text class=\"members\" ")
        .skip(1)
        .map(|t| {
            let attr = |name: &str| -> f64 {
                let v = t.split(&format!("{name}=\"")).nth(1).unwrap();
                v[..v.find('"').unwrap()].parse().unwrap()
            };
            let text = &t[t.find('>').unwrap() + 1..t.find('<').unwrap()];
            (attr("x"), attr("y"), 5.5 * text.len() as f64 + 2.0)
        })
        .collect()
}

/// Aggregate pictures stay within a screen's width however many pods
/// there are, and their bundle labels (`x64`) never overlap.
#[test]
fn aggregate_pictures_fit_a_screen_with_their_labels_apart() {
    let mut pictures = 0;
    for path in scenarios("examples") {
        let text = std::fs::read_to_string(&path).unwrap();
        let p = fabricsim::scenario::prepare(&path.to_string_lossy(), &text, &[]).unwrap();
        let map = fabric::draw(&p.topology, None, "t");
        if !map.aggregated {
            continue;
        }
        pictures += 1;
        let width: f64 = {
            let w = map.svg.split("width=\"").nth(1).unwrap();
            w[..w.find('"').unwrap()].parse().unwrap()
        };
        assert!(width <= 1700.0, "{}: {width} px wide", path.display());
        let labels = member_labels(&map.svg);
        for (i, a) in labels.iter().enumerate() {
            for b in &labels[i + 1..] {
                let apart =
                    a.0 + a.2 <= b.0 || b.0 + b.2 <= a.0 || a.1 - 9.0 >= b.1 || b.1 - 9.0 >= a.1;
                assert!(
                    apart,
                    "{}: labels at {a:?} and {b:?} overlap",
                    path.display()
                );
            }
        }
    }
    assert!(pictures >= 4, "{pictures}");
}

/// A k=8 fat-tree (128 hosts: drawn in aggregate) with a 48-to-1 incast
/// under PFC, a failed edge-aggregation link and a failed aggregation
/// switch: what happened inside the pods shows on them. The incast port
/// (an edge switch's port to a host) is the busiest in its pod, its bar
/// and percentage say how busy; every pause sent is on a mark; the
/// failed link and switch are named under their pods, which are not
/// struck through (their other switches work).
#[test]
fn an_aggregate_picture_shows_what_happened_inside_its_pods() {
    let srcs: Vec<String> = (16..64).map(|g| g.to_string()).collect();
    let text = format!(
        r#"
[topology]
kind = "fat-tree"
k = 8
link_speed = "100G"
link_delay = "1us"

[switch]
buffer = "4MB"

[[qos.class]]
name = "rocev2"
dscp = [24]
queue = 3
lossless = true

[transport]
dscp = 24

[[failure]]
link = ["pod1-edge0", "pod1-agg0"]
at = "20us"

[[failure]]
switch = "pod2-agg1"
at = "20us"

[[workload]]
kind = "incast"
dst = 0
srcs = [{}]
bytes = "200KB"
"#,
        srcs.join(", ")
    );
    let (sim, _) = common::run(&text);
    let c = Colouring::of(&sim);
    let map = fabric::draw(sim.topo(), Some(&c), "inside");
    assert!(map.aggregated);
    let pod = |k: usize| {
        map.svg
            .split("<g class=\"pod\"")
            .nth(k + 1)
            .unwrap()
            .split("</g>\n")
            .next()
            .unwrap()
            .to_string()
    };
    // The incast port is pod0's busiest, over the run's active period.
    let topo = sim.topo();
    let port = topo
        .switches
        .iter()
        .find(|s| s.name == "pod0-edge0")
        .unwrap()
        .ports
        .iter()
        .copied()
        .find(|&p| topo.member_name(p) == "host0/nic0")
        .unwrap();
    let busy = 100.0 * c.util[port.idx()];
    assert!(busy > 50.0, "{busy}");
    let p0 = pod(0);
    assert!(
        p0.contains("busiest port inside: pod0-edge0 -&gt; host0/nic0"),
        "{p0}"
    );
    assert!(p0.contains(&format!("busiest {busy:.0}%")), "{p0}");
    assert!(p0.contains("class=\"hot\""));
    // Every pause sent is counted on a mark, a line's or a pod's.
    let sent: u64 = c.pauses.iter().sum();
    assert!(sent > 0);
    assert_eq!(pause_marks(&map.svg), sent);
    // The failed link inside pod1, the failed switch inside pod2.
    assert!(pod(1).contains("\u{2715} 1 link inside"), "{}", pod(1));
    assert!(pod(2).contains("1 switch down"), "{}", pod(2));
    assert!(!pod(2).contains("class=\"struck\""));
    for k in [0, 3, 4] {
        assert!(!pod(k).contains("inside</text>") && !pod(k).contains("down</text>"));
    }
}

/// A GB200 NVL72 rack is drawn as one host box of 72 GPUs, its 18
/// compute trays of 4 marked inside it (17 dividers) and named.
#[test]
fn a_rack_is_one_box_with_its_trays() {
    let text = std::fs::read_to_string("examples/training/nvl72-racks.toml").unwrap();
    let sim = common::prepare(&text, &[]);
    let map = fabric::draw(sim.topo(), None, "racks");
    assert_eq!(map.boxes, sim.topo().switches.len() + 2);
    assert_eq!(map.svg.matches("class=\"tray\"").count(), 2 * 17);
    assert!(map.svg.contains("host1 in 18 trays of 4"));
}
