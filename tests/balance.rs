//! Switch load balancing: the seeds' SLB-versus-DLB cases, flowlet timers
//! and spraying.

mod common;
use common::run_with;

use fabricsim::engine::Simulation;
use fabricsim::report::Summary;
use fabricsim::topology::{Owner, PortId, QpId};

/// Utilization of leaf0's uplinks (ports toward a spine), sorted.
fn leaf0_uplinks(sim: &Simulation) -> Vec<f64> {
    let leaf0 = &sim.topo.switches[0];
    assert_eq!(leaf0.name, "leaf0");
    let mut u: Vec<f64> = leaf0
        .ports
        .iter()
        .filter(|&&p| {
            matches!(sim.topo.port(sim.topo.port(p).peer).owner, Owner::Switch(s)
                if sim.topo.switches[s.idx()].name.starts_with("spine"))
        })
        .map(|&p: &PortId| sim.ports[p.idx()].busy_ps as f64 / sim.now.0 as f64)
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
    let long = summary(&["switch.balance.flowlet_timeout=\"1s\""]);
    assert_eq!(long.out_of_order_packets, 0);
    assert_eq!(long.balancers[0].flowlet_moves, 0);
    let assigned = summary(&["switch.balance.dlb_mode=\"assigned-flow\""]);
    assert_eq!(long.makespan_ps, assigned.makespan_ps);
    assert_eq!(long.balancers[0].decisions, assigned.balancers[0].decisions);
    assert!(short.makespan_ps > long.makespan_ps);
}

#[test]
fn balancer_settings_are_checked() {
    let text = std::fs::read_to_string("examples/load-balancing/ecmp.toml").unwrap();
    let e = common::error_of(&text, &["switch.balance.mode=\"glb2\""]);
    assert!(
        e.contains("switch.balance.mode") && e.contains("ecmp, dlb, glb, alb, spray"),
        "{e}"
    );
    let e = common::error_of(&text, &["switch.balance.flowlet_timeout=\"5us\""]);
    assert!(e.contains("only used by mode = \"dlb or glb\""), "{e}");
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
