//! The flow-level network (`simulation.fidelity = "flow"`): fluids at
//! max-min fair rates on the packets' own paths, checked against the
//! packet level on the same scenarios.

mod common;
use common::{error_of, fct, run_file, run_with};
use std::path::Path;

const FLOW: &str = "simulation.fidelity=\"flow\"";

/// The text of an example scenario, by its path in the repository.
fn example_text(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// Two senders into one 100G port: each gets half of it, so both end at
/// about twice the time one alone takes, as in the packet simulation
/// without congestion control (within 2%); alone, a transfer takes its
/// ideal time to the picosecond.
#[test]
fn two_senders_share_a_port_equally() {
    let text = r#"
[topology]
kind = "single-rail"
hosts = 4
gpus_per_host = 1
nic_speed = "100G"
[transport]
congestion_control = "none"
[[workload]]
kind = "incast"
dst = 0
srcs = [1, 2]
bytes = "4MB"
"#;
    let (sim, flow) = run_with(text, &[FLOW]);
    assert_eq!(flow.fidelity, "flow");
    assert_eq!(flow.link_transmissions, 0, "no packets");
    assert_eq!(flow.bytes_delivered, flow.bytes_offered);
    let fcts: Vec<u64> = sim
        .flows()
        .iter()
        .map(|f| (f.finish.unwrap() - f.start).0)
        .collect();
    assert!(fcts[0].abs_diff(fcts[1]) < 1_000, "{fcts:?}");
    let (_, packet) = run_with(text, &[]);
    let (a, b) = (flow.makespan_ps as f64, packet.makespan_ps as f64);
    assert!((a / b - 1.0).abs() < 0.02, "flow {a} ps, packet {b} ps");

    let alone = text.replace("srcs = [1, 2]", "srcs = [1]");
    let (sim, _) = run_with(&alone, &[FLOW]);
    let f = &sim.flows()[0];
    assert_eq!(f.finish.unwrap() - f.start, f.ideal_fct);
    assert!(f.acked.unwrap() > f.finish.unwrap());
}

/// A permutation on a k = 8 fat tree: the same ECMP collisions, so the
/// same makespan within 2% and mean completion within 10% of the packet
/// level without congestion control; and the links carry the same bytes
/// within 1%.
#[test]
fn a_permutation_matches_the_packet_level() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bench/fat-tree-k8-permutation.toml");
    let none = "transport.congestion_control=\"none\"";
    let (fsim, flow) = run_file(&path, &[FLOW, none]);
    let (psim, packet) = run_file(&path, &[none]);
    let ratio = |a: f64, b: f64| a / b - 1.0;
    let mk = ratio(flow.makespan_ps as f64, packet.makespan_ps as f64);
    assert!(mk.abs() < 0.02, "makespan {mk:+.3}");
    let mean = ratio(
        flow.fct_ps.as_ref().unwrap().mean,
        packet.fct_ps.as_ref().unwrap().mean,
    );
    assert!(mean.abs() < 0.1, "mean completion {mean:+.3}");
    let bytes = |sim: &fabricsim::engine::Simulation| -> f64 {
        sim.ports().iter().map(|p| p.tx_wire_bytes as f64).sum()
    };
    // The packet level also carries ACKs; data dominates.
    let b = ratio(bytes(&fsim), bytes(&psim));
    assert!(b.abs() < 0.01, "bytes on links {b:+.4}");
    // Link by link: the same collisions put the same transfers, so the
    // same bytes, on every link (ACKs aside).
    let mut busy = 0;
    for (i, (f, p)) in fsim.ports().iter().zip(psim.ports()).enumerate() {
        let (f, p) = (f.tx_wire_bytes as f64, p.tx_wire_bytes as f64);
        if p > 1e6 {
            busy += 1;
            assert!(
                (f / p - 1.0).abs() < 0.03,
                "port {i}: {f} against {p} bytes"
            );
        } else {
            assert!(f < 1e6, "port {i}: {f} bytes at flow level, {p} in packets");
        }
    }
    assert!(busy > 100, "{busy} links carried the permutation");
    // So the same number of transfers on every link (each sends the same
    // bytes; a link carries a whole number of them): ECMP's collisions,
    // counted link by link, are the packet level's.
    let unit = |sim: &fabricsim::engine::Simulation| -> f64 {
        sim.ports()
            .iter()
            .map(|p| p.tx_wire_bytes)
            .filter(|&b| b > 1_000_000)
            .min()
            .unwrap() as f64
    };
    let (uf, up) = (unit(&fsim), unit(&psim));
    let counts = |sim: &fabricsim::engine::Simulation, u: f64| -> Vec<u64> {
        sim.ports()
            .iter()
            .map(|p| (p.tx_wire_bytes as f64 / u).round() as u64)
            .collect()
    };
    let (cf, cp) = (counts(&fsim, uf), counts(&psim, up));
    assert_eq!(cf, cp);
    assert!(cf.iter().any(|&c| c >= 2), "no collision to compare");
}

/// Spraying splits a transfer evenly over the equal-cost members: the
/// uplinks of the sending rail switch carry the same bytes (to the
/// rounding of the split), and the transfer takes within 10% of the
/// packet level's time without congestion control; under static ECMP
/// the same transfer takes one uplink and is slower.
#[test]
fn spraying_splits_a_transfer_evenly() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/load-balancing/spray.toml");
    let none = "transport.congestion_control=\"none\"";
    let (fsim, flow) = run_file(&path, &[FLOW, none]);
    let (_, packet) = run_file(&path, &[none]);
    let topo = fsim.topo();
    let up: Vec<u64> = topo
        .ports
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            matches!(p.owner, fabricsim::topology::Owner::Switch(s) if topo.switches[s.idx()].name.starts_with("leaf"))
                && matches!(topo.port(p.peer).owner, fabricsim::topology::Owner::Switch(_))
        })
        .map(|(i, _)| fsim.ports()[i].tx_wire_bytes)
        .filter(|&b| b > 0)
        .collect();
    assert!(up.len() >= 2, "uplinks used: {up:?}");
    let (lo, hi) = (up.iter().min().unwrap(), up.iter().max().unwrap());
    assert!(hi - lo <= up.len() as u64, "uneven split {up:?}");
    let (a, b) = (flow.makespan_ps as f64, packet.makespan_ps as f64);
    assert!((a / b - 1.0).abs() < 0.1, "flow {a} ps, packet {b} ps");
    let text = fabricsim::report::render(&fsim, &flow);
    assert!(
        text.contains("splits evenly over the equal-cost members"),
        "{text}"
    );
    let (_, ecmp) = run_file(&path, &[FLOW, none, "switch.balance.mode=\"ecmp\""]);
    assert!(
        ecmp.makespan_ps as f64 > 1.2 * a,
        "{} against {a}",
        ecmp.makespan_ps
    );
}

/// The task graph runs over the fluid network: the default pod's ring
/// all-reduce takes within 5% of its packet-level time.
#[test]
fn a_collective_runs_over_fluids() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rail-optimized-pod.toml");
    let (_, flow) = run_file(&path, &[FLOW]);
    let (_, packet) = run_file(&path, &[]);
    let (a, b) = (
        flow.collectives[0].time_ps.unwrap() as f64,
        packet.collectives[0].time_ps.unwrap() as f64,
    );
    assert!((a / b - 1.0).abs() < 0.05, "flow {a} ps, packet {b} ps");
}

/// What the fluid does not model is refused with the key named.
#[test]
fn what_the_flow_level_does_not_model_is_refused() {
    let text = example_text("examples/rail-optimized-pod.toml");
    let e = error_of(&text, &[FLOW, "simulation.threads=2"]);
    assert!(
        e.contains("simulation.fidelity") && e.contains("2 threads"),
        "{e}"
    );
    let e = error_of(&text, &["simulation.fidelity=\"fluid\""]);
    assert!(e.contains("expected one of packet, flow"), "{e}");
}

/// A failure on a sub-flow's path stops it (a dead link carries nothing)
/// until routing reconverges, when it moves to the paths that are left:
/// one transfer whose spine fails ends exactly the reconvergence delay
/// later than without the failure, within 3% of the packet level (which
/// also loses what was on the link and sends it again); a failure off
/// its path changes nothing.
#[test]
fn a_failure_stops_a_sub_flow_until_routing_reconverges() {
    let text = |spine: u32| {
        format!(
            r#"
[topology]
kind = "rail-optimized"
hosts = 8
gpus_per_host = 1
hosts_per_leaf = 4
spines = 2
nic_speed = "100G"
uplink_speed = "100G"
link_delay = "500ns"
[transport]
congestion_control = "none"
rto = "100us"
[routing]
reconverge = "50us"
[[failure]]
switch = "spine{spine}"
at = "100us"
[[workload]]
kind = "transfer"
src = 0
dst = 4
bytes = "4MB"
"#
        )
    };
    let (_, healthy) = run_with(&text(0), &[FLOW, "failure=[]"]);
    let (a, b) = (run_with(&text(0), &[FLOW]).1, run_with(&text(1), &[FLOW]).1);
    // The transfer's ECMP path crosses one of the two spines.
    let (on, off) = if a.makespan_ps > b.makespan_ps {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(off.makespan_ps, healthy.makespan_ps);
    assert_eq!(on.makespan_ps, healthy.makespan_ps + 50_000_000);
    assert_eq!(on.failures[0].flows_moved, Some(1));
    let spine = if on.failures[0].target == "spine0" {
        0
    } else {
        1
    };
    let (_, packet) = run_with(&text(spine), &[]);
    let (f, p) = (on.makespan_ps as f64, packet.makespan_ps as f64);
    assert!((f / p - 1.0).abs() < 0.03, "flow {f} ps, packet {p} ps");
    assert!(packet.failures[0].lost_packets > 0);
}

/// The memory estimate that may refuse a run counts no packets and no
/// time series at flow level, only a sub-flow per QP: a permutation the
/// packet level is estimated to need tens of MB for is a few MB as
/// fluids, and the run stays within it.
#[test]
fn the_memory_estimate_counts_sub_flows_not_packets() {
    use fabricsim::engine::MemoryEstimate;
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bench/fat-tree-k8-permutation.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let estimate = |sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let p = fabricsim::scenario::prepare("k8.toml", &text, &sets).unwrap();
        MemoryEstimate::of(&p, 0)
    };
    let (packet, flow) = (estimate(&[]), estimate(&[FLOW]));
    assert!(
        packet.packets > 10_000 && packet.series_bytes > 0,
        "{packet:?}"
    );
    assert_eq!((flow.packets, flow.series_bytes), (0, 0), "{flow:?}");
    let qps = 128; // one QP per transfer
    assert_eq!(
        flow.state_bytes - packet.state_bytes,
        qps * MemoryEstimate::BYTES_PER_SUBFLOW
    );
    assert!(
        flow.total() * 3 < packet.total(),
        "{flow:?} against {packet:?}"
    );
}

const MESSAGES: &str = "simulation.flow_rings=\"messages\"";

/// A ring all-reduce between servers runs as one steady stream per
/// channel (`runtime::streams`): the same collective time as its messages
/// run one by one as fluids (within 1%), the same rows in flows.csv with
/// the same messages and bytes, the same bytes delivered, and a small
/// fraction of the events.
#[test]
fn a_ring_between_servers_runs_as_one_stream_per_channel() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/collectives/ring-allreduce.toml");
    let (s_sim, stream) = run_file(&path, &[FLOW]);
    let (m_sim, msgs) = run_file(&path, &[FLOW, MESSAGES]);
    let (a, b) = (
        stream.collectives[0].time_ps.unwrap() as f64,
        msgs.collectives[0].time_ps.unwrap() as f64,
    );
    assert!((a / b - 1.0).abs() < 0.01, "stream {a} ps, messages {b} ps");
    assert_eq!(
        s_sim.fluid_streams(),
        u64::from(stream.collectives[0].channels)
    );
    assert_eq!(m_sim.fluid_streams(), 0);
    assert_eq!(stream.bytes_delivered, msgs.bytes_delivered);
    assert!(
        stream.events * 20 < msgs.events,
        "{} against {}",
        stream.events,
        msgs.events
    );
    // flows.csv: one row per connection, with its messages and bytes.
    let cols = |csv: &str| -> Vec<(String, String, String)> {
        csv.lines()
            .skip(1)
            .map(|l| {
                let c: Vec<&str> = l.split(',').collect();
                (
                    c[2].to_string(),
                    c[6].to_string(),
                    c[c.len() - 1].to_string(),
                )
            })
            .collect()
    };
    let (sc, mc) = (
        cols(&common::flows_csv(&s_sim)),
        cols(&common::flows_csv(&m_sim)),
    );
    assert!(!sc.is_empty());
    assert_eq!(sc, mc);
}

/// A ring whose steps are short next to their latency (NCCL's step time,
/// here 20 us, over 64 KB messages) cannot go at its bytes' rate: the
/// stream keeps the pipeline's window (one message in flight per slice,
/// a step time apart), so it takes about as long as its messages do,
/// far longer than its bytes alone would.
#[test]
fn a_latency_bound_ring_stream_keeps_its_pipeline_window() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/collectives/ring-allreduce.toml");
    let sets = [
        FLOW,
        "workload.0.bytes=\"2MB\"",
        "workload.0.step_latency=\"20us\"",
    ];
    let (_, stream) = run_file(&path, &sets);
    let mut with_messages = sets.to_vec();
    with_messages.push(MESSAGES);
    let (_, msgs) = run_file(&path, &with_messages);
    let c = &stream.collectives[0];
    let (a, b) = (
        c.time_ps.unwrap() as f64,
        msgs.collectives[0].time_ps.unwrap() as f64,
    );
    assert!((a / b - 1.0).abs() < 0.03, "stream {a} ps, messages {b} ps");
    // 2 (n - 1) = 30 steps, each at least the step time.
    assert!(a > 30.0 * 20e6, "{a} ps");
}

/// Rings inside a server (NVLink) run as streams too: a hierarchical
/// all-reduce (rings in each server, then across them per rail) at flow
/// level takes within 3% of its messages' time, in a fraction of the
/// events.
#[test]
fn nvlink_rings_run_as_streams_too() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rail-optimized-pod.toml");
    let sets = [FLOW, "workload.0.algorithm=\"hierarchical\""];
    let (s_sim, stream) = run_file(&path, &sets);
    let mut with_messages = sets.to_vec();
    with_messages.push(MESSAGES);
    let (_, msgs) = run_file(&path, &with_messages);
    let (a, b) = (
        stream.collectives[0].time_ps.unwrap() as f64,
        msgs.collectives[0].time_ps.unwrap() as f64,
    );
    assert!((a / b - 1.0).abs() < 0.03, "stream {a} ps, messages {b} ps");
    assert!(s_sim.fluid_streams() > 0);
    assert!(
        stream.events * 10 < msgs.events,
        "{} against {}",
        stream.events,
        msgs.events
    );
}

/// `flow_rings` takes "streams" or "messages" and nothing else.
#[test]
fn flow_rings_is_checked() {
    let text = example_text("examples/collectives/ring-allreduce.toml");
    let e = error_of(&text, &["simulation.flow_rings=\"fast\""]);
    assert!(
        e.contains("simulation.flow_rings") && e.contains("\"fast\""),
        "{e}"
    );
}

/// Bytes into each spine, from links.csv.
fn into_spines(sim: &fabricsim::engine::Simulation) -> (u64, u64) {
    let mut out = Vec::new();
    fabricsim::report::tables::links_csv(sim, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let mut by = (0, 0);
    for l in text.lines().skip(1) {
        let c: Vec<&str> = l.split(',').collect();
        let bytes: u64 = c[5].parse().unwrap();
        match c[2] {
            "spine0" => by.0 += bytes,
            "spine1" => by.1 += bytes,
            _ => {}
        }
    }
    by
}

/// TELB colours pin traffic at flow level as at the packet level: the
/// example's policies (tenant 1 to spine0, tenant 2 to spine1) end within
/// 1% of the packet level without congestion control; with both tenants
/// pinned to spine0, spine1 carries nothing and both levels take longer
/// alike. A selective rule that sprays every QP splits the bytes evenly
/// over the spines.
#[test]
fn telb_colours_and_selective_rules_hold_at_flow_level() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/load-balancing/telb.toml");
    let none = "transport.congestion_control=\"none\"";
    let (_, flow) = run_file(&path, &[FLOW, none]);
    let (_, packet) = run_file(&path, &[none]);
    let (a, b) = (flow.makespan_ps as f64, packet.makespan_ps as f64);
    assert!((a / b - 1.0).abs() < 0.01, "flow {a} ps, packet {b} ps");
    let blue = "switch.balance.policy=[{ tenant = [1], color = \"blue\" }, { tenant = [2], color = \"blue\" }]";
    let (f_sim, flow_blue) = run_file(&path, &[FLOW, none, blue]);
    let (p_sim, packet_blue) = run_file(&path, &[none, blue]);
    let (s0, s1) = into_spines(&f_sim);
    assert!(s0 > 16_000_000 && s1 == 0, "{s0} {s1}");
    assert_eq!(into_spines(&p_sim).1, 0);
    let (a, b) = (flow_blue.makespan_ps as f64, packet_blue.makespan_ps as f64);
    assert!(
        a > 1.5 * flow.makespan_ps as f64,
        "{a} against {}",
        flow.makespan_ps
    );
    assert!((a / b - 1.0).abs() < 0.02, "flow {a} ps, packet {b} ps");
    // One transfer between two leaves: hashed onto one spine, or sprayed
    // over both by a selective rule that names its QP.
    let one = r#"
[topology]
kind = "rail-optimized"
hosts = 2
gpus_per_host = 1
hosts_per_leaf = 1
spines = 2
nic_speed = "100G"
uplink_speed = "100G"
[transport]
congestion_control = "none"
[[workload]]
kind = "transfer"
src = 0
dst = 1
bytes = "4MB"
"#;
    let (sim, _) = common::run_with(one, &[FLOW]);
    let (s0, s1) = into_spines(&sim);
    assert!(s0.min(s1) == 0 && s0.max(s1) > 4_000_000, "{s0} {s1}");
    let spray = "switch.balance.select=[{ qp = [0, 65535], mode = \"spray\" }]";
    let (sim, _) = common::run_with(one, &[FLOW, spray]);
    let (s0, s1) = into_spines(&sim);
    assert!(
        s0 > 0 && (s0 as f64 / s1 as f64 - 1.0).abs() < 0.01,
        "{s0} {s1}"
    );
}

/// The multipath transport at flow level: each QP's bytes split evenly
/// over its paths (entropy values and planes), within 3% of the packet
/// level without congestion control; when a link on some of them fails,
/// the sender leaves those paths at once instead of waiting for routing
/// to reconverge (5 ms here), as it does at the packet level.
#[test]
fn multipath_qps_spread_over_their_paths_and_leave_dead_ones() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let none = "transport.congestion_control=\"none\"";
    let (_, flow) = run_file(&dir.join("multipath/mrc.toml"), &[FLOW, none]);
    let (_, packet) = run_file(&dir.join("multipath/mrc.toml"), &[none]);
    let (a, b) = (flow.makespan_ps as f64, packet.makespan_ps as f64);
    assert!((a / b - 1.0).abs() < 0.03, "flow {a} ps, packet {b} ps");
    let (_, failed) = run_file(&dir.join("failures/mrc-link-failure.toml"), &[FLOW]);
    let (_, packet) = run_file(&dir.join("failures/mrc-link-failure.toml"), &[]);
    assert!(failed.complete);
    assert!(failed.makespan_ps < 5_000_000_000, "{}", failed.makespan_ps);
    assert!(packet.makespan_ps < 5_000_000_000, "{}", packet.makespan_ps);
}

/// A ring stream whose spines fail stops until routing reconverges, then
/// takes the routes left, as its messages do: three of four spines down
/// for the 200 us before reconvergence cost the all-reduce those 200 us,
/// streamed or message by message alike; under the multipath transport
/// the sender leaves the dead paths at once and loses nothing.
#[test]
fn a_ring_stream_waits_for_reconvergence_like_its_messages() {
    let text = r#"
name = "ring through a spine failure"
[topology]
kind = "rail-optimized"
hosts = 16
gpus_per_host = 1
hosts_per_leaf = 8
spines = 4
nic_speed = "100G"
uplink_speed = "100G"
link_delay = "500ns"
[routing]
reconverge = "200us"
[[failure]]
switch = "spine0"
at = "300us"
[[failure]]
switch = "spine1"
at = "300us"
[[failure]]
switch = "spine2"
at = "300us"
[[workload]]
kind = "collective"
op = "all-reduce"
algorithm = "ring"
bytes = "64MB"
"#;
    let time = |sets: &[&str]| {
        let mut all = vec![FLOW];
        all.extend_from_slice(sets);
        let (_, s) = common::run_with(text, &all);
        s.collectives[0].time_ps.unwrap() as f64
    };
    let alone = time(&["failure=[]"]);
    let stream = time(&[]);
    let msgs = time(&[MESSAGES]);
    assert!(
        (stream - alone - 200e6).abs() < 1e6,
        "{stream} against {alone}"
    );
    assert!(
        (stream / msgs - 1.0).abs() < 0.001,
        "{stream} against {msgs}"
    );
    let mrc = time(&["transport.protocol=\"mrc\""]);
    assert!(mrc < alone + 1e6, "{mrc} against {alone}");
}

/// DCQCN at flow level (`simulation.flow_cc = "dcqcn"`): its QPs hear
/// CNPs from the switch ports' queues and cut their rates, so a DCQCN
/// permutation and incast end within 5% of the packet level, where fair
/// shares alone (the default) end more than 10% early.
const DCQCN: &str = "simulation.flow_cc=\"dcqcn\"";

#[test]
fn dcqcn_cuts_rates_at_flow_level_as_in_packets() {
    for name in ["permutation-dcqcn", "incast-dcqcn"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/congestion")
            .join(format!("{name}.toml"));
        let (fsim, flow) = run_file(&path, &[FLOW, DCQCN]);
        let (_, packet) = run_file(&path, &[]);
        let (a, b) = (flow.makespan_ps as f64, packet.makespan_ps as f64);
        assert!(
            (a / b - 1.0).abs() < 0.05,
            "{name}: flow {a} ps, packet {b} ps"
        );
        assert!(flow.cnps_received > 0, "{name}: no CNP at flow level");
        let cut = fsim
            .nics()
            .qps()
            .iter()
            .filter(|q| q.req.rate.dcqcn().is_some_and(|d| d.cuts > 0));
        assert!(cut.count() > 0, "{name}: no QP cut its rate");
        let (_, fair) = run_file(&path, &[FLOW]);
        let f = fair.makespan_ps as f64;
        assert!(f < 0.9 * b, "{name}: fair shares {f} ps, packet {b} ps");
    }
}

/// `simulation.flow_cc` is checked, and the guide's tick is the code's.
#[test]
fn flow_cc_is_checked_and_its_tick_documented() {
    let text = example_text("examples/congestion/permutation-dcqcn.toml");
    let e = error_of(&text, &["simulation.flow_cc=\"dctcp\""]);
    assert!(
        e.contains("simulation.flow_cc") && e.contains("\"dctcp\"") && e.contains("fair-share"),
        "{e}"
    );
    let guide = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/howto/flow-level.md"),
    )
    .unwrap();
    let us = fabricsim::fluid::TICK.0 / 1_000_000;
    assert!(
        guide.contains(&format!("as CNPs every {us} us")),
        "the guide's tick"
    );
}

const HYBRID: &str = "simulation.fidelity=\"hybrid\"";

/// The hybrid on four pods with one hot: the flow-level pre-run finds
/// pod 0's switches and no other; the transfers through them run as
/// packets and end exactly as in a packet run (the rest share no link
/// with them), where the flow level alone is off by more than 10%; and
/// the run takes a fraction of the packet run's events.
#[test]
fn a_hybrid_runs_the_hot_pod_as_packets_and_the_rest_as_fluids() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hot-pod.toml");
    let (hsim, hybrid) = run_file(&path, &[HYBRID]);
    let (_, packet) = run_file(&path, &[]);
    let (_, flow) = run_file(&path, &[FLOW]);
    let h = hsim.hybrid().expect("a hybrid run");
    assert!(!h.region.is_empty(), "no packet region");
    assert!(
        h.region.iter().all(|s| s.starts_with("pod0-")),
        "{:?}",
        h.region
    );
    // The permutation and the incast of pod 0 as packets, the three
    // all-reduces' messages as fluids.
    assert_eq!(h.packet_flows, 64 + 8);
    assert!(h.fluid_flows > 1000, "{}", h.fluid_flows);
    assert_eq!(hybrid.makespan_ps, packet.makespan_ps);
    assert_eq!(
        hybrid.fct_ps.as_ref().map(|d| d.mean),
        packet.fct_ps.as_ref().map(|d| d.mean)
    );
    let off = |a: u64, b: u64| (a as f64 / b as f64 - 1.0).abs();
    assert!(off(flow.makespan_ps, packet.makespan_ps) > 0.1);
    assert!(
        hybrid.events * 3 < packet.events,
        "{} {}",
        hybrid.events,
        packet.events
    );
    assert!(
        hybrid.ecn_marks > 0 && hybrid.max_queue_bytes > 0,
        "packets queue"
    );
}

/// A NIC sends one transfer through the packet region (the spine) and one
/// that stays on its leaf, as a fluid: they share the NIC's link, each at
/// about half, and end within 3% of the packet run; were the link not
/// shared, both would end near their ideal time, half as late.
#[test]
fn packets_and_fluids_share_the_links_both_cross() {
    let text = r#"
[simulation]
packet_region = ["spine*"]
[topology]
kind = "rail-optimized"
hosts = 4
gpus_per_host = 1
nic_speed = "100G"
hosts_per_leaf = 2
spines = 1
uplink_speed = "100G"
uplinks_per_spine = 2
[transport]
congestion_control = "none"
[[workload]]
kind = "transfer"
src = 0
dst = 1
bytes = "4MB"
[[workload]]
kind = "transfer"
src = 0
dst = 2
bytes = "4MB"
"#;
    let (sim, hybrid) = run_with(text, &[HYBRID]);
    let h = sim.hybrid().expect("a hybrid run");
    assert_eq!((h.packet_flows, h.fluid_flows), (1, 1));
    assert_eq!(h.region, ["spine0"]);
    for f in sim.flows() {
        let fct = (f.finish.unwrap() - f.start).0;
        assert!(
            fct > 18 * f.ideal_fct.0 / 10,
            "{fct} ps, ideal {}",
            f.ideal_fct.0
        );
    }
    let (_, packet) = run_with(text, &[]);
    let (a, b) = (hybrid.makespan_ps as f64, packet.makespan_ps as f64);
    assert!((a / b - 1.0).abs() < 0.03, "hybrid {a} ps, packet {b} ps");
}

/// `simulation.packet_region` names switches that exist, or is "auto".
#[test]
fn packet_region_is_checked() {
    let text = example_text("examples/hot-pod.toml");
    let e = error_of(&text, &["simulation.packet_region=[\"pod9-*\"]"]);
    assert!(
        e.contains("simulation.packet_region[0]")
            && e.contains("\"pod9-*\"")
            && e.contains("pod0-leaf0"),
        "{e}"
    );
    let e = error_of(&text, &["simulation.packet_region=\"everywhere\""]);
    assert!(
        e.contains("simulation.packet_region") && e.contains("\"auto\""),
        "{e}"
    );
    let e = error_of(&text, &[HYBRID, "simulation.threads=2"]);
    assert!(e.contains("\"hybrid\"") && e.contains("threads"), "{e}");
}

/// PFC at flow level: the lossless incast without congestion control
/// pauses from the receiver's rail switch back to the senders (806 pause
/// frames in packets). Its egress serves the spine's three links into it
/// equally, not the six transfers, so the pair whose link it shares with
/// nobody of theirs ends first and the rail switch's pair that shares
/// links ends last, as in packets; mean completion comes within 3% of
/// packets, where fair shares (every transfer ending together) are 14%
/// off. Without PFC the same fabric is shared max-min.
#[test]
fn pauses_share_a_lossless_incast_by_ingress_port() {
    let text = example_text("examples/lossless/incast.toml");
    let none = "transport.congestion_control=\"none\"";
    let (fsim, flow) = run_with(&text, &[FLOW, none]);
    let (psim, packet) = run_with(&text, &[none]);
    assert!(packet.pfc_pause_frames > 100, "{}", packet.pfc_pause_frames);
    let ratio = |a: f64, b: f64| a / b - 1.0;
    let mean = |s: &fabricsim::report::Summary| s.fct_ps.as_ref().unwrap().mean;
    let mk = ratio(flow.makespan_ps as f64, packet.makespan_ps as f64);
    assert!(mk.abs() < 0.01, "makespan {mk:+.3}");
    let m = ratio(mean(&flow), mean(&packet));
    assert!(m.abs() < 0.03, "mean completion {m:+.3}");
    // Transfers 0 and 1 (the first rail switch's) end last at both levels.
    for sim in [&fsim, &psim] {
        let last = (2..6).map(|i| fct(sim, i)).max().unwrap();
        assert!(fct(sim, 0).min(fct(sim, 1)) > last);
    }
    assert!(fsim.fluid_pfc_shares().is_some_and(|n| n > 0));

    let (lossy, _) = run_with(&text, &[FLOW, none, "pfc.enabled=false"]);
    assert!(lossy.fluid_pfc_shares().is_none());
    let first = fct(&lossy, 0);
    assert!((1..6).all(|i| fct(&lossy, i) == first));
}
