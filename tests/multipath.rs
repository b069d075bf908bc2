//! Receiver semantics under spraying: Write First/Middle/Last must be
//! delivered in order (go-back-N or a reorder buffer), Write Only packets
//! are placed wherever they arrive.

mod common;
use common::{flows_csv, run_with};

fn example(name: &str) -> String {
    std::fs::read_to_string(format!("examples/multipath/{name}.toml")).unwrap()
}

/// Spraying over paths of unequal delay reorders packets. With Write
/// First/Middle/Last and go-back-N every overtaking packet costs a NAK and
/// a resend; with Write Only nothing is resent and the writes finish
/// much sooner.
#[test]
fn spraying_write_first_naks_and_write_only_does_not() {
    let (_, fml) = run_with(&example("spray-write-first"), &[]);
    let (sim, wo) = run_with(&example("spray-write-only"), &[]);
    // Per transfer: both spines used, and the out-of-order share.
    let csv = flows_csv(&sim);
    let mut rows = csv.lines();
    let head: Vec<&str> = rows.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    for row in rows {
        let f: Vec<&str> = row.split(',').collect();
        assert_eq!(f[col("paths_used")], "2", "{row}");
        let frac: f64 = f[col("out_of_order_fraction")].parse().unwrap();
        assert!(frac > 0.0 && frac < 1.0, "{row}");
    }
    assert!(fml.out_of_order_packets > 0 && fml.naks > 0);
    assert!(fml.retransmitted_bytes > 0);
    assert!(
        wo.out_of_order_packets > 0,
        "Write Only packets still arrive out of order"
    );
    assert_eq!((wo.naks, wo.retransmitted_bytes, wo.timeouts), (0, 0, 0));
    assert!(
        wo.makespan_ps * 2 < fml.makespan_ps,
        "{} vs {}",
        wo.makespan_ps,
        fml.makespan_ps
    );
    assert_eq!(wo.bytes_delivered, wo.bytes_offered);
}

/// A reorder buffer per NIC: too small, it overflows, discards and NAKs
/// (reported); large enough, it absorbs the reordering with no NAK.
#[test]
fn a_reorder_buffer_too_small_discards_and_reports_it() {
    let text = example("spray-write-first");
    let sets = |size: &str| {
        vec![
            "transport.out_of_order=\"reorder\"".to_string(),
            format!("transport.reorder_buffer=\"{size}\""),
        ]
    };
    let small = sets("64KB");
    let small: Vec<&str> = small.iter().map(String::as_str).collect();
    let (sim, s) = run_with(&text, &small);
    assert!(s.reorder_discards > 0 && s.naks > 0);
    let peak = s.max_reorder_bytes_per_nic;
    assert!(
        peak <= 64_000 && peak > 64_000 - 4096,
        "filled but never over: {peak}"
    );
    let per_qp: u64 = sim.qps().iter().map(|q| q.resp.discarded).sum();
    assert_eq!(per_qp, s.reorder_discards);
    let big = sets("16MB");
    let big: Vec<&str> = big.iter().map(String::as_str).collect();
    let (_, b) = run_with(&text, &big);
    assert_eq!(
        (b.reorder_discards, b.naks, b.retransmitted_bytes),
        (0, 0, 0)
    );
    assert!(b.out_of_order_packets > 0 && b.max_reorder_bytes_per_qp > 0);
    assert!(b.makespan_ps < s.makespan_ps);
    // The buffer only matters for in-order opcodes.
    let e = common::error_of(&text, &["transport.reorder_buffer=\"1MB\""]);
    assert!(
        e.contains("only used with out_of_order = \"reorder\""),
        "{e}"
    );
    // Enumerated keys name what they accept.
    for (set, key, names) in [
        (
            "transport.out_of_order=\"drop\"",
            "transport.out_of_order",
            "nak, reorder",
        ),
        (
            "transport.protocol=\"uec\"",
            "transport.protocol",
            "rc, mrc",
        ),
        (
            "switch.balance.glb_combine=\"max\"",
            "switch.balance.glb_combine",
            "simple, compound",
        ),
    ] {
        let e = common::error_of(&text, &[set]);
        assert!(e.contains(key) && e.contains(names), "{e}");
    }
}

/// Trimming on a lossy incast (MRC, selective NAKs): packets that would
/// be dropped arrive as headers, the receiver NAKs each at once, and the
/// senders resend without waiting for timeouts: fewer timeouts, done
/// sooner.
#[test]
fn trimming_recovers_an_incast_faster_than_timeouts() {
    let text = example("trimming");
    let (sim, trim) = run_with(&text, &[]);
    let (_, drop) = run_with(&text, &["qos.class[0].trim=false"]);
    assert!(trim.trimmed_packets > 0 && drop.trimmed_packets == 0);
    assert!(drop.drops > 0, "without trimming the incast drops");
    assert_eq!(trim.drops, 0, "every would-be drop was trimmed");
    assert!(
        trim.timeouts < drop.timeouts,
        "{} vs {}",
        trim.timeouts,
        drop.timeouts
    );
    assert!(trim.makespan_ps < drop.makespan_ps);
    let received: u64 = sim.qps().iter().map(|q| q.resp.trimmed).sum();
    assert_eq!(
        received, trim.trimmed_packets,
        "every trimmed header reached its receiver"
    );
    sim.check_conservation().unwrap();
}

/// The MRC-like transport sprays each QP over 8 paths: on a 2:1
/// oversubscribed pod it evens out the uplinks that per-flow ECMP loads
/// unevenly, and the permutation finishes sooner.
#[test]
fn mrc_beats_per_flow_ecmp_on_an_oversubscribed_pod() {
    let text = example("mrc");
    let (_, mrc) = run_with(&text, &[]);
    let (_, rc) = run_with(&text, &["transport.protocol=\"rc\""]);
    assert!(
        mrc.makespan_ps < rc.makespan_ps,
        "{} vs {}",
        mrc.makespan_ps,
        rc.makespan_ps
    );
    assert!(mrc.uplink_imbalance.unwrap() < rc.uplink_imbalance.unwrap());
    assert!(
        mrc.out_of_order_packets > 0,
        "placed out of order, as designed"
    );
    assert_eq!((mrc.naks, mrc.retransmitted_bytes), (0, 0));
    assert_eq!(mrc.bytes_delivered, mrc.bytes_offered);
}

/// A per-packet timeout shorter than the queues can make a round trip:
/// once round trips are measured, MRC times copies out after twice its
/// reordering window (four times the longest recent round trip), so
/// copies only waiting in a queue are not sent again. Before, `rto =
/// "50us"` on this pod resent 30 MB of the 128 MB in 7,486 timeouts and
/// took 1.48 ms instead of 1.01; without congestion control and with
/// 64 MB each, 1.86 GB in 454,778 timeouts and 26.5 ms instead of 7.0.
#[test]
fn a_timeout_shorter_than_the_queues_resends_no_copy_still_waiting() {
    let text = example("mrc");
    let (_, normal) = run_with(&text, &[]);
    let (_, short) = run_with(&text, &["transport.rto=\"50us\""]);
    assert_eq!((short.timeouts, short.retransmitted_bytes), (0, 0));
    assert_eq!(short.makespan_ps, normal.makespan_ps);
    let heavy = [
        "transport.rto=\"50us\"",
        "transport.congestion_control=\"none\"",
        "workload.0.bytes=\"64MB\"",
    ];
    let (_, s) = run_with(&text, &heavy);
    assert!(
        s.retransmitted_bytes * 20 < s.bytes_offered,
        "{} of {} bytes sent again",
        s.retransmitted_bytes,
        s.bytes_offered
    );
    assert!(s.makespan_ps < 8_000_000_000, "{} ps", s.makespan_ps);
}

/// A link dies and routing does not react for 5 ms. Go-back-N QPs hashed
/// onto it wait for the reconvergence; MRC takes the paths that lose
/// packets out of use (probing them now and then) and finishes long before.
#[test]
fn mrc_stops_using_a_failed_path_without_routing_help() {
    let text = example("mrc")
        .replace("spines = 2", "spines = 4")
        .replace("uplink_speed = \"200G\"", "uplink_speed = \"100G\"")
        .replace(
            "\nprotocol = \"mrc\"\n",
            "\nprotocol = \"mrc\"\nrto = \"100us\"\n",
        );
    let text = format!(
        "{text}\n[routing]\nreconverge = \"5ms\"\n\n[[failure]]\nlink = [\"leaf0\", \"spine1\"]\nat = \"100us\"\n"
    );
    let (sim, mrc) = run_with(&text, &[]);
    let (_, rc) = run_with(&text, &["transport.protocol=\"rc\""]);
    assert_eq!(mrc.flows_completed, mrc.flows_total);
    assert!(
        mrc.makespan_ps < 5_100_000_000,
        "done before routing reconverged"
    );
    assert!(
        rc.makespan_ps > 5_100_000_000,
        "go-back-N QPs waited for routing"
    );
    assert!(mrc.mrc_paths_failed > 0 && mrc.mrc_timeout_resends > 0);
    // RC keeps sending into the dead link until routing reconverges; MRC
    // loses what it sent before its timeouts found the dead paths, then
    // only the odd probe.
    assert!(
        10 * mrc.failure_lost_packets < rc.failure_lost_packets,
        "mrc lost {}, rc {}",
        mrc.failure_lost_packets,
        rc.failure_lost_packets
    );
    sim.check_conservation().unwrap();
}

/// MRC over two planes: on a dual-rail fabric each NIC has a port on each
/// rail (two disjoint fabrics). One QP sprays over both ports and moves
/// twice what a one-port RC QP moves; when one plane's link dies it
/// carries on over the other without routing help.
#[test]
fn mrc_sprays_over_planes_and_survives_losing_one() {
    let text = r#"
[topology]
kind = "dual-rail"
hosts = 2
gpus_per_host = 1
nic_speed = "200G"
nic_ports = 2

[host]
pcie = "128GB/s"

[transport]
protocol = "mrc"
rto = "100us"

[[workload]]
kind = "transfer"
src = 0
dst = 1
bytes = "16MB"
"#;
    let (sim, mrc) = run_with(text, &[]);
    let (_, rc) = run_with(text, &["transport.protocol=\"rc\""]);
    let ratio = rc.makespan_ps as f64 / mrc.makespan_ps as f64;
    assert!(
        (1.9..2.1).contains(&ratio),
        "two planes, twice as fast: {ratio}"
    );
    let up: Vec<u64> = sim.topo().nics[0]
        .ports
        .iter()
        .map(|p| sim.ports()[p.idx()].tx_wire_bytes)
        .collect();
    assert!(
        up.iter().all(|&b| b > 7_000_000),
        "both planes carry data: {up:?}"
    );

    let nic = &sim.topo().nics[0].name;
    let failed = format!(
        "{text}\n[routing]\nreconverge = \"10ms\"\n\n[[failure]]\nlink = [\"{nic}\", \"rail-a\"]\nat = \"50us\"\n"
    );
    let (_, f) = run_with(&failed, &[]);
    assert_eq!(f.flows_completed, 1);
    assert!(f.failure_lost_packets > 0 && f.mrc_paths_failed > 0);
    assert!(
        f.makespan_ps < 1_000_000_000,
        "finished on plane B alone: {}",
        f.makespan_ps
    );
    assert!(f.makespan_ps > mrc.makespan_ps);
}

/// The guide's trimming figures are this example's: its makespan with
/// trimming, and with the class dropping instead.
#[test]
fn the_guide_gives_the_trimming_example_its_own_figures() {
    let path = std::path::Path::new("examples/multipath/trimming.toml");
    let ms = |sets: &[&str]| common::run_file(path, sets).1.makespan_ps as f64 / 1e9;
    let (trimmed, dropped) = (ms(&[]), ms(&["qos.class[0].trim=false"]));
    assert!(trimmed < dropped / 2.0, "{trimmed} ms against {dropped} ms");
    let said = format!("{trimmed:.2} ms against {dropped:.2} ms dropping");
    let page = "docs/src/explanations/models.md";
    let text = std::fs::read_to_string(page).unwrap();
    assert!(text.contains(&said), "{page} should say \"{said}\"");
}
