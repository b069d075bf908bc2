//! Switch load balancing: the seeds' SLB-versus-DLB cases, flowlet timers
//! and spraying.

mod common;
use common::{flows_csv, run_file, run_with};

use fabricsim::engine::Simulation;
use fabricsim::report::Summary;
use fabricsim::topology::{Owner, PortId, QpId};

/// Utilization of leaf0's uplinks (ports toward a spine), sorted.
fn leaf0_uplinks(sim: &Simulation) -> Vec<f64> {
    let leaf0 = &sim.topo().switches[0];
    assert_eq!(leaf0.name, "leaf0");
    let mut u: Vec<f64> = leaf0
        .ports
        .iter()
        .filter(|&&p| {
            matches!(sim.topo().port(sim.topo().port(p).peer).owner, Owner::Switch(s)
                if sim.topo().switches[s.idx()].name.starts_with("spine"))
        })
        .map(|&p: &PortId| sim.ports()[p.idx()].busy_ps as f64 / sim.now().0 as f64)
        .collect();
    u.sort_by(f64::total_cmp);
    u
}

/// Seed 001: flows of 50, 50, 100 and 100 Gb/s leave one leaf over two
/// 200G uplinks. A hash that pairs them badly loads the uplinks about
/// 50% and 100%; DLB brings both to about 75%.
#[test]
fn dlb_evens_out_the_seed_001_slb_example() {
    let text = r#"
[topology]
kind = "rail-optimized"
hosts = 8
gpus_per_host = 1
nic_speed = "100G"
hosts_per_leaf = 4
spines = 2
uplink_speed = "200G"
link_delay = "500ns"

[switch.ecmp]
seed = 3

[[workload]]
kind = "transfer"
src = 0
dst = 4
bytes = "5MB"
rate = "50G"

[[workload]]
kind = "transfer"
src = 1
dst = 5
bytes = "5MB"
rate = "50G"
start = "10us"

[[workload]]
kind = "transfer"
src = 2
dst = 6
bytes = "10MB"
start = "20us"

[[workload]]
kind = "transfer"
src = 3
dst = 7
bytes = "10MB"
start = "30us"
"#;
    let (ecmp, _) = run_with(text, &[]);
    let u = leaf0_uplinks(&ecmp);
    assert!(u[0] < 0.55 && u[1] > 0.9, "ECMP uplinks {u:?}");
    let (dlb, s) = run_with(text, &["switch.balance.mode=\"dlb\""]);
    let u = leaf0_uplinks(&dlb);
    assert!(
        u.iter().all(|&x| (0.65..0.8).contains(&x)) && u[1] - u[0] < 0.02,
        "DLB uplinks {u:?}"
    );
    assert_eq!(s.balancers[0].balancer, "dlb-flowlet");
    assert!(s.balancers[0].decisions >= 4);
}

/// Seed 000, figure 12-4 (the shipped load-balancing examples): with this
/// hash seed ECMP sends all three flows through one spine; DLB sends the
/// later flows to the other spine and the writes finish sooner; spraying
/// evens the uplinks exactly but reorders packets.
#[test]
fn figure_12_4_ecmp_collides_dlb_and_spraying_spread() {
    let run = |name: &str| {
        let text = std::fs::read_to_string(format!("examples/load-balancing/{name}.toml")).unwrap();
        run_with(&text, &[])
    };
    let (ecmp, e) = run("ecmp");
    let spines: Vec<_> = (0..3).map(|q| ecmp.qp_path(QpId(q)).unwrap()[1]).collect();
    assert!(spines.iter().all(|&s| s == spines[0]), "{spines:?}");
    let (dlb, d) = run("dlb-flowlet");
    assert!(dlb.qp_path(QpId(0)).is_none(), "DLB paths are dynamic");
    assert!(
        (d.makespan_ps as f64) < 0.75 * e.makespan_ps as f64,
        "DLB {} vs ECMP {}",
        d.makespan_ps,
        e.makespan_ps
    );
    assert_eq!(d.out_of_order_packets, 0);
    let u = leaf0_uplinks(&dlb);
    assert!(u[0] > 0.3, "DLB uses both uplinks: {u:?}");
    let (spray, s) = run("spray");
    let u = leaf0_uplinks(&spray);
    assert!(u[1] - u[0] < 0.01, "spraying evens the uplinks: {u:?}");
    assert!(s.out_of_order_packets > 0);
    assert!(s.balancers[0].sprayed_packets > 0);
    assert!(s.uplink_imbalance.unwrap() < e.uplink_imbalance.unwrap());
}

/// The flowlet timer on one workload: far too short, every gap starts a
/// flowlet, packets take both spines and arrive out of order; long, each
/// flow is placed once, exactly like assigned-flow DLB.
#[test]
fn flowlet_timer_short_reorders_long_is_per_flow() {
    let text = std::fs::read_to_string("examples/load-balancing/dlb-flowlet.toml").unwrap();
    let summary = |sets: &[&str]| -> Summary { run_with(&text, sets).1 };
    let short = summary(&["switch.balance.flowlet_timeout=\"100ns\""]);
    assert!(short.out_of_order_packets > 0);
    assert!(short.balancers[0].flowlet_moves > 0);
    // Each flowlet move shows up as a change in the QP's path record.
    assert!(short.path_changes >= short.balancers[0].flowlet_moves);
    let long = summary(&["switch.balance.flowlet_timeout=\"1s\""]);
    assert_eq!(long.out_of_order_packets, 0);
    assert_eq!(long.balancers[0].flowlet_moves, 0);
    assert_eq!(long.path_changes, 0);
    let assigned = summary(&["switch.balance.dlb_mode=\"assigned-flow\""]);
    assert_eq!(long.makespan_ps, assigned.makespan_ps);
    assert_eq!(long.balancers[0].decisions, assigned.balancers[0].decisions);
    assert!(short.makespan_ps > long.makespan_ps);
}

/// `set` gives a warning that contains `want` and ends in "ignored".
fn warned(text: &str, set: &str, want: &str) {
    let p = fabricsim::scenario::prepare("t.toml", text, &[set.to_string()]).unwrap();
    assert!(
        p.scenario
            .warnings
            .iter()
            .any(|w| w.message.contains(want) && w.message.ends_with("ignored")),
        "{set}: {:?}",
        p.scenario.warnings
    );
}

#[test]
fn balancer_settings_are_checked() {
    let text = std::fs::read_to_string("examples/load-balancing/ecmp.toml").unwrap();
    let e = common::error_of(&text, &["switch.balance.mode=\"glb2\""]);
    assert!(
        e.contains("switch.balance.mode") && e.contains("ecmp, dlb, glb, alb, spray"),
        "{e}"
    );
    // A setting of another mode is harmless (a sweep or --set may change
    // the mode alone): warned about, not refused.
    warned(
        &text,
        "switch.balance.flowlet_timeout=\"5us\"",
        "only used by mode = \"dlb or glb\"",
    );
    let e = common::error_of(&text, &["switch.balance.tier.core.mode=\"dlb\""]);
    assert!(
        e.contains("no tier \"core\"") && e.contains("leaf, spine"),
        "{e}"
    );
    // A tier override applies to that tier only.
    let (_, s) = run_with(&text, &["switch.balance.tier.spine.mode=\"spray\""]);
    assert_eq!(s.balancers[0].balancer, "ecmp");
    assert_eq!(s.balancers[1].balancer, "spray-round-robin");
}

/// Seed 001's GLB case: leaf2 (plain ECMP) fills spine0's downlink to
/// leaf3; then leaf0 and leaf1 each start a flow to leaf3. Their own
/// uplinks are idle, so DLB (with this hash seed) puts both on spine0,
/// behind the congested downlink. GLB hears from the spines' heartbeats
/// that spine0's link to leaf3 is full and sends both through spine1.
#[test]
fn glb_avoids_a_congested_remote_downlink_that_dlb_cannot_see() {
    let text = r#"
[topology]
kind = "rail-optimized"
hosts = 16
gpus_per_host = 1
hosts_per_leaf = 4
spines = 2
nic_speed = "100G"
uplink_speed = "100G"
link_delay = "500ns"

[switch.ecmp]
seed = 4

[switch.balance]
mode = "dlb"

[switch.balance.switch.leaf2]
mode = "ecmp"

[[workload]]
kind = "transfer"
src = 8
dst = 12
bytes = "20MB"

[[workload]]
kind = "transfer"
src = 0
dst = 13
bytes = "4MB"
start = "30us"

[[workload]]
kind = "transfer"
src = 4
dst = 14
bytes = "4MB"
start = "30us"
"#;
    // Bytes and deepest queue of each spine's downlink to leaf3.
    let downlinks = |sim: &Simulation| -> Vec<(u64, u64)> {
        sim.topo()
            .switches
            .iter()
            .filter(|s| s.name.starts_with("spine"))
            .map(|s| {
                let p = *s
                    .ports
                    .iter()
                    .find(|&&p| {
                        matches!(sim.topo().port(sim.topo().port(p).peer).owner,
                            Owner::Switch(l) if sim.topo().switches[l.idx()].name == "leaf3")
                    })
                    .unwrap();
                (
                    sim.ports()[p.idx()].tx_wire_bytes,
                    sim.queues()[p.idx()].max_bytes,
                )
            })
            .collect()
    };
    let (dlb, d) = run_with(text, &[]);
    let (glb, g) = run_with(text, &["switch.balance.mode=\"glb\""]);
    let (dd, gd) = (downlinks(&dlb), downlinks(&glb));
    // DLB: everything through spine0, whose downlink queues megabytes.
    assert_eq!(dd[1].0, 0, "DLB {dd:?}");
    assert!(dd[0].1 > 1_000_000, "DLB {dd:?}");
    // GLB: spine0's downlink carries only leaf2's flow and stays shallow.
    assert!(gd[0].1 < 20_000 && gd[1].0 > 8_000_000, "GLB {gd:?}");
    assert!(
        (g.makespan_ps as f64) < 0.8 * d.makespan_ps as f64,
        "GLB {} vs DLB {}",
        g.makespan_ps,
        d.makespan_ps
    );
    let later = |sim: &Simulation| common::fct(sim, 1).max(common::fct(sim, 2));
    assert!(later(&glb) < later(&dlb));
    // Heartbeats are real frames on the wire, counted.
    assert!(g.glb_heartbeats_sent > 0 && d.glb_heartbeats_sent == 0);
    assert!(g.glb_heartbeat_bytes >= 84 * g.glb_heartbeats_sent);
    let leaf = g
        .balancers
        .iter()
        .find(|b| b.balancer.starts_with("glb"))
        .unwrap();
    assert!(leaf.glb_heartbeats > 0 && leaf.decisions > 0);
    // leaf2's override shows as its own line.
    assert!(g
        .balancers
        .iter()
        .any(|b| b.tier == "leaf" && b.balancer == "ecmp" && b.switches == 1));
}

/// The fig 12-4 workload under TELB: tenant 1's traffic is pinned to the
/// blue colour (spine0) and stays there, ACKs included; when leaf0 and
/// rail switch 1 lose their spine0 members it moves to green (spine1).
#[test]
fn telb_pins_a_tenant_to_its_colour_and_falls_back_to_the_backup() {
    let text = std::fs::read_to_string("examples/load-balancing/ecmp.toml").unwrap();
    let text = format!(
        "{text}\n[switch.balance.colors]\nblue = [\"spine0\"]\ngreen = [\"spine1\"]\n\n\
         [[switch.balance.policy]]\ntenant = [1]\ncolor = \"blue\"\nbackup = \"green\"\n"
    )
    .replace("kind = \"transfer\"", "kind = \"transfer\"\ntenant = 1");
    let spine_bytes = |sim: &Simulation, name: &str| -> u64 {
        let s = sim.topo().switches.iter().find(|s| s.name == name).unwrap();
        s.ports
            .iter()
            .map(|p| sim.ports()[p.idx()].tx_wire_bytes)
            .sum()
    };
    let (sim, s) = run_with(&text, &[]);
    assert_eq!(spine_bytes(&sim, "spine1"), 0);
    assert!(spine_bytes(&sim, "spine0") > 24_000_000);
    let leaf = &s.balancers[0];
    assert_eq!(leaf.balancer, "ecmp+telb");
    assert!(leaf.telb_primary > 0 && leaf.telb_backup == 0);

    // The blue members fail before traffic starts.
    let prepared = fabricsim::scenario::prepare("t.toml", &text, &[]).unwrap();
    let mut sim = Simulation::new(prepared);
    for sw in 0..sim.topo().switches.len() {
        if !sim.topo().switches[sw].name.starts_with("leaf") {
            continue;
        }
        for p in sim.topo().switches[sw].ports.clone() {
            if let Owner::Switch(n) = sim.topo().port(sim.topo().port(p).peer).owner {
                if sim.topo().switches[n.idx()].name == "spine0" {
                    let (balancer, routes) = sim.balancer_mut(sw);
                    balancer.set_member(routes, p, false);
                }
            }
        }
    }
    assert_eq!(sim.run(|_| {}), fabricsim::engine::StopReason::Finished);
    let s = Summary::of(&sim, fabricsim::engine::StopReason::Finished);
    assert_eq!(spine_bytes(&sim, "spine0"), 0);
    assert!(s.balancers[0].telb_backup > 0 && s.balancers[0].telb_primary == 0);
}

/// Traffic that no policy matches uses the default balancer; a rule on
/// one QP range sprays only that QP's packets.
#[test]
fn selective_spraying_sprays_only_matching_traffic() {
    let text = std::fs::read_to_string("examples/load-balancing/ecmp.toml").unwrap();
    // QP numbers start at 256: this rule matches the first transfer's QP.
    let text = format!(
        "{text}\n[[switch.balance.select]]\nqp = [256, 256]\nopcode = [\"write-first\", \"write-middle\", \"write-last\"]\nmode = \"spray\"\n"
    );
    let (sim, s) = run_with(&text, &[]);
    assert_eq!(s.balancers[0].balancer, "ecmp+selective-spray");
    assert!(s.balancers[0].sprayed_packets > 0);
    assert_eq!(
        s.balancers[0].sprayed_packets,
        s.balancers[0].selected_packets
    );
    // Only the sprayed QP sees reordering; the others stay in order.
    assert!(sim.qps()[0].resp.out_of_order > 0);
    assert!(sim.qps()[1..].iter().all(|q| q.resp.out_of_order == 0));
    // Selective DLB on the same rule.
    let (_, d) = run_with(&text.replace("mode = \"spray\"", "mode = \"dlb\""), &[]);
    assert_eq!(d.balancers[0].balancer, "ecmp+selective-dlb");
    assert!(d.balancers[0].decisions > 0 && d.balancers[0].sprayed_packets == 0);
}

/// ALB on the fig 12-4 workload: the three flows collide on one uplink;
/// ALB sees the skew and moves buckets, and the writes finish sooner.
#[test]
fn alb_moves_buckets_off_the_hot_uplink() {
    let text = std::fs::read_to_string("examples/load-balancing/ecmp.toml").unwrap();
    let (_, e) = run_with(&text, &[]);
    let (sim, a) = run_with(
        &text,
        &[
            "switch.balance.mode=\"alb\"",
            "switch.balance.alb_max_moves=1",
        ],
    );
    let leaf = &a.balancers[0];
    assert_eq!(leaf.balancer, "alb");
    assert!(leaf.alb_imbalanced_scans > 0);
    assert!((1..=leaf.alb_imbalanced_scans).contains(&leaf.alb_bucket_moves));
    assert!((a.makespan_ps as f64) < 0.75 * e.makespan_ps as f64);
    let u = leaf0_uplinks(&sim);
    assert!(u[0] > 0.3, "ALB uses both uplinks: {u:?}");
}

#[test]
fn rule_and_policy_settings_are_checked() {
    let text = std::fs::read_to_string("examples/load-balancing/ecmp.toml").unwrap();
    let with = |extra: &str| format!("{text}\n{extra}\n");
    let e = common::error_of(
        &with("[[switch.balance.policy]]\ntenant = [1]\ncolor = \"red\""),
        &[],
    );
    assert!(
        e.contains("switch.balance.policy[0].color") && e.contains("defines no colours"),
        "{e}"
    );
    let e = common::error_of(&with("[switch.balance.colors]\nred = [\"spine7\"]"), &[]);
    assert!(
        e.contains("switch.balance.colors.red[0]") && e.contains("no switch \"spine7\""),
        "{e}"
    );
    let e = common::error_of(
        &with("[[switch.balance.select]]\nqp = [5, 1]\nmode = \"spray\""),
        &[],
    );
    assert!(
        e.contains("switch.balance.select[0].qp") && e.contains("first <= last"),
        "{e}"
    );
    let e = common::error_of(
        &with("[[switch.balance.select]]\nopcode = [\"read\"]\nmode = \"spray\""),
        &[],
    );
    assert!(e.contains("write-only"), "{e}");
    let e = common::error_of(&with("[[switch.balance.select]]\nopcode = [\"ack\"]"), &[]);
    assert!(e.contains("select[0].mode") && e.contains("missing"), "{e}");
    let e = common::error_of(
        &with("[[switch.balance.select]]\ningress = [\"nowhere\"]\nmode = \"dlb\""),
        &[],
    );
    assert!(e.contains("ingress[0]") && e.contains("host0/nic0"), "{e}");
    let e = common::error_of(&text, &["switch.balance.switch.leaf9.mode=\"dlb\""]);
    assert!(
        e.contains("switch.balance.switch.leaf9") && e.contains("no switch"),
        "{e}"
    );
    warned(
        &text,
        "switch.balance.alb_window=\"5us\"",
        "only used by mode = \"alb\"",
    );
    // The README's comparison of GLB with DLB on the same file.
    let glb =
        std::fs::read_to_string("examples/load-balancing/glb-remote-congestion.toml").unwrap();
    warned(
        &glb,
        "switch.balance.mode=\"dlb\"",
        "only used by mode = \"glb\"",
    );
    let e = common::error_of(
        &text,
        &[
            "switch.balance.mode=\"alb\"",
            "switch.balance.alb_interval=\"1us\"",
        ],
    );
    assert!(e.contains("at least as long as alb_window"), "{e}");
    // A spray selective rule allows spray settings with mode = "ecmp".
    let ok = with("[[switch.balance.select]]\ntraffic_class = [3]\nmode = \"spray\"");
    run_with(&ok, &["switch.balance.spray_order=\"random\""]);
}

/// Dynamic balancers keep a path record per QP: which next hop each run
/// of packets took at each switch, in flows.csv.
#[test]
fn dynamic_paths_are_recorded_per_switch() {
    let text = std::fs::read_to_string("examples/load-balancing/dlb-flowlet.toml").unwrap();
    let (sim, _) = run_with(&text, &["switch.balance.flowlet_timeout=\"100ns\""]);
    let rec = sim.paths().get(QpId(1)).unwrap();
    let leaf0 = &rec.steps.iter().filter(|s| s.switch.0 == 0).count();
    assert!(*leaf0 > 1, "several runs at leaf0");
    let data: u64 = rec
        .steps
        .iter()
        .filter(|s| s.switch.0 == 0)
        .map(|s| s.packets)
        .sum();
    assert!(
        rec.truncated || data == 1954,
        "every data packet counted once: {data}"
    );
    let csv = flows_csv(&sim);
    assert!(csv.contains("leaf0[spine"), "{csv}");
    // Static ECMP needs no record: the path follows from the header.
    let ecmp = std::fs::read_to_string("examples/load-balancing/ecmp.toml").unwrap();
    let (sim, s) = run_with(&ecmp, &[]);
    assert!(!sim.paths().enabled && s.path_changes == 0);
}

/// Reactive rebalancing: assigned-flow DLB places the three simultaneous
/// writes of figure 12-4 on one uplink (with this seed); rebalancing by
/// three bands moves flows to the idle uplink. DCQCN keeps changing the
/// senders' rates, so the members' quality keeps changing and flows move
/// more than once (at most one per group and quality interval).
#[test]
fn reactive_rebalancing_moves_a_flow_off_a_degraded_member() {
    let text = std::fs::read_to_string("examples/load-balancing/dlb-rebalance.toml").unwrap();
    let (_, off) = run_with(&text, &["switch.balance.rebalance_bands=0"]);
    let (sim, on) = run_with(&text, &[]);
    assert_eq!(off.balancers[0].rebalances, 0);
    let moves = on.balancers[0].rebalances;
    assert!(moves >= 1);
    assert_eq!(on.path_changes, moves);
    let interval = 1_000_000; // the default quality interval, 1 us
    assert!(moves <= on.makespan_ps / interval + 1, "{moves} moves");
    assert!((on.makespan_ps as f64) < 0.75 * off.makespan_ps as f64);
    assert!(leaf0_uplinks(&sim)[0] > 0.3);
    // Moving a flow mid-stream reorders some of its packets.
    assert!(on.out_of_order_packets > 0 && off.out_of_order_packets == 0);
}

/// GLB's product limits are warned about: more than one link between a
/// leaf and a spine, more than 64 leaves.
#[test]
fn glb_warns_where_the_product_would_not_run() {
    let text = |hosts: u32, uplinks: u32| {
        format!(
            r#"
[topology]
kind = "rail-optimized"
hosts = {hosts}
gpus_per_host = 1
hosts_per_leaf = 1
spines = 2
uplinks_per_spine = {uplinks}

[switch.balance]
mode = "glb"

[[workload]]
kind = "transfer"
src = 0
dst = 1
bytes = "4KB"
"#
        )
    };
    let warnings = |t: &str| -> Vec<String> {
        fabricsim::scenario::prepare("g.toml", t, &[])
            .unwrap()
            .scenario
            .warnings
            .iter()
            .map(|w| w.message.clone())
            .collect()
    };
    assert!(warnings(&text(4, 1)).is_empty());
    let w = warnings(&text(4, 2));
    assert!(
        w.iter().any(|m| m.contains("more than one link to spine")),
        "{w:?}"
    );
    let w = warnings(&text(65, 1));
    assert!(w.iter().any(|m| m.contains("65 leaves")), "{w:?}");
    // Parallel links still run: the best member of the port channel counts.
    run_with(&text(4, 2), &[]);
}

/// Balance is measured per equal-cost group, the only set a balancer
/// chooses among: perfect spraying is 1.0 per group though the pooled
/// figure over both leaves' uplinks is about 2 (traffic enters one leaf
/// only), which used to be the headline.
#[test]
fn balance_is_reported_per_equal_cost_group_with_the_pooled_figure_apart() {
    let text = std::fs::read_to_string("examples/load-balancing/spray.toml").unwrap();
    let (_, s) = common::run_with(&text, &[]);
    let leaf = s
        .uplink_balance
        .iter()
        .find(|b| b.tier == "leaf" && b.direction == "up")
        .unwrap();
    assert!(leaf.groups >= 1);
    assert!(leaf.max_over_mean < 1.02, "{leaf:?}");
    assert!(leaf.jain > 0.999, "{leaf:?}");
    assert!(leaf.pooled_max_over_mean > 1.9, "{leaf:?}");
    assert!(leaf.pooled_jain < 0.6, "{leaf:?}");
    assert!((s.uplink_imbalance.unwrap() - leaf.max_over_mean).abs() < 1e-9);
    // ECMP collides within a group: its worst group says where.
    let text = std::fs::read_to_string("examples/load-balancing/ecmp.toml").unwrap();
    let (_, e) = common::run_with(&text, &[]);
    let leaf = e.uplink_balance.iter().find(|b| b.tier == "leaf").unwrap();
    assert!(
        leaf.max_over_mean > 1.5 && leaf.worst_group == "leaf0",
        "{leaf:?}"
    );
}

/// The balancers' periodic work stops while the fabric is idle and
/// starts again with it, as if it had ticked all along. A go-back-N tail
/// that waits the 4.29 s retransmission timeout (`flowlet_timeout =
/// "2us"` reorders enough for it) ticked DLB's 1 us quality refresh 4.3
/// million times, through the wait; an idle gap between two bursts
/// ticked every balancer through it. Each kind of balancer, on one and
/// two threads, gives the same files, and ticks for the activity only.
#[test]
fn periodic_balancer_work_stops_while_the_fabric_waits() {
    let path = "examples/sweep/balancers-base.toml";
    for mode in ["dlb", "glb"] {
        let sets = [
            "switch.balance.flowlet_timeout=\"2us\"",
            &format!("switch.balance.mode=\"{mode}\""),
        ];
        let sims = common::same_on_threads(path, &[2], &sets);
        let (sim, s) = run_file(std::path::Path::new(path), &sets);
        assert!(
            s.makespan_ps > 4_000_000_000_000,
            "{mode}: {}",
            s.makespan_ps
        );
        assert!(s.timeouts > 0);
        // The activity lasts well under a millisecond: a tick a
        // microsecond through it, and a few for each heartbeat.
        let ticks = sim.balance().ticks;
        assert!((100..5_000).contains(&ticks), "{mode}: {ticks} ticks");
        assert!(sims[0].balance().ticks >= ticks / 2);
    }
    // Two bursts 3 ms apart: ALB's sampling (every 10 us) rests through
    // the gap and takes up its schedule after it.
    let dir = tempfile::tempdir().unwrap();
    let two = dir.path().join("two-bursts.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let later = "[[workload]]\nkind = \"all-to-all\"\nbytes = \"200KB\"\nstart = \"3ms\"\n";
    std::fs::write(
        &two,
        text.replace("[report]", &format!("{later}\n[report]")),
    )
    .unwrap();
    let sets = ["switch.balance.mode=\"alb\""];
    common::same_on_threads(two.to_str().unwrap(), &[2], &sets);
    let (sim, s) = run_file(&two, &sets);
    assert!(s.complete && s.makespan_ps > 3_000_000_000);
    let ticks = sim.balance().ticks;
    assert!((10..150).contains(&ticks), "alb: {ticks} ticks");
}
