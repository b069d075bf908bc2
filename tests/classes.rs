//! Traffic classes: workloads in DSCPs of their own, the switch's
//! scheduler sharing a congested port by the classes' bandwidth-remaining
//! percentages, a strict class held by its shaper, and NICs that pause
//! one class while the others go on.

mod common;
use common::{error_of, fct, run, run_file, run_with};

/// Six hosts on one leaf (400G, PCIe out of the way); classes training
/// (DSCP 24, 60%), storage (DSCP 26, 40%, priority 4 at the NICs), urgent (DSCP 46, strict,
/// shaped to 100G), CNPs strict; no congestion control, so that only the
/// scheduler and PFC decide. Workloads are appended.
const FABRIC: &str = r#"
[topology]
kind = "rail-optimized"
hosts = 6
gpus_per_host = 1
nic_speed = "400G"
hosts_per_leaf = 6
spines = 1
uplink_speed = "400G"

[host]
pcie = "128GB/s"

[transport]
mtu = 4096
congestion_control = "none"

# The NICs give DSCP 26 its queue's priority, 4, so that they stop it
# for the storage class's pauses (by default they would give it 3).
[qos.nic_priority]
26 = 4

[[qos.class]]
name = "training"
dscp = [24]
queue = 3
bandwidth_percent = 60
lossless = true
xoff = "200KB"
xon = "50KB"

[[qos.class]]
name = "storage"
dscp = [26]
queue = 4
bandwidth_percent = 40
lossless = true
xoff = "200KB"
xon = "50KB"

[[qos.class]]
name = "urgent"
dscp = [46]
queue = 5
strict = true
shape = "100G"

[[qos.class]]
name = "cnp"
dscp = [48]
queue = 7
strict = true

[[qos.class]]
name = "default"
queue = 0
"#;

fn transfer(src: u32, dst: u32, dscp: Option<u8>) -> String {
    let dscp = dscp.map_or(String::new(), |d| format!("dscp = {d}\n"));
    format!(
        "\n[[workload]]\nkind = \"transfer\"\nsrc = {src}\ndst = {dst}\nbytes = \"16MB\"\n{dscp}"
    )
}

/// Host 1 (training) and host 2 (storage) each send 16 MB to host 0:
/// while both wait at the leaf's port to host 0 it serves them 60/40, so
/// training is done when storage has 40/60 of its bytes, and storage
/// ends at the time both transfers take at line rate. Swapping the
/// percentages swaps who is done first; one class for both shares the
/// port evenly (both end together).
#[test]
fn two_lossless_classes_share_a_congested_port_60_40() {
    let text = format!(
        "{FABRIC}{}{}",
        transfer(1, 0, None),
        transfer(2, 0, Some(26))
    );
    let (sim, _) = run(&text);
    let (training, storage) = (fct(&sim, 0) as f64, fct(&sim, 1) as f64);
    // Training has its 16 MB when storage has 2/3 of that: storage ends
    // at 5/3 of a 60% share's time, 1.2 times training's.
    let ratio = storage / training;
    assert!((ratio - 1.2).abs() < 0.01, "storage / training = {ratio}");
    // Training's share while both wait: its bytes over its time, against
    // the port's rate over the whole (both transfers' bytes).
    let share = (16e6 / training) / (32e6 / storage);
    assert!((share - 0.6).abs() < 0.01, "training's share {share}");

    let (sim, _) = run_with(
        &text,
        &[
            "qos.class.0.bandwidth_percent=40",
            "qos.class.1.bandwidth_percent=60",
        ],
    );
    let ratio = fct(&sim, 0) as f64 / fct(&sim, 1) as f64;
    assert!(
        (ratio - 1.2).abs() < 0.01,
        "swapped: training / storage = {ratio}"
    );

    // Both in the training class: one FIFO, even shares.
    let (sim, _) = run_with(&text, &["workload.1.dscp=24"]);
    let ratio = fct(&sim, 1) as f64 / fct(&sim, 0) as f64;
    assert!((ratio - 1.0).abs() < 0.01, "one class: {ratio}");
}

/// An urgent transfer in the strict class joins them from host 3. Its
/// shaper holds it to 100G, so it takes a quarter of the port and the
/// other two split the remaining 300G 60/40. Unshaped (a shaper at line
/// rate), strict priority takes the whole port and the guaranteed
/// classes get nothing until the urgent transfer is done.
#[test]
fn a_shaped_strict_class_starves_no_class_with_a_guarantee() {
    let text = format!(
        "{FABRIC}{}{}{}",
        transfer(1, 0, None),
        transfer(2, 0, Some(26)),
        transfer(3, 0, Some(46))
    );
    let (sim, _) = run(&text);
    let ideal = sim.flows()[0].ideal_fct.0 as f64; // alone at 400G
    let near = |got: u64, want: f64| (got as f64 / want - 1.0).abs() < 0.01;
    let (training, storage, urgent) = (fct(&sim, 0), fct(&sim, 1), fct(&sim, 2));
    assert!(near(urgent, 4.0 * ideal), "urgent {urgent} ps against 100G");
    // Training at 60% of 300G; storage at 40% of it, then all 300G.
    assert!(
        near(training, ideal * 400.0 / 180.0),
        "training {training} ps"
    );
    let storage_want = ideal * 400.0 / 180.0 + ideal * (1.0 / 3.0) * 400.0 / 300.0;
    assert!(
        near(storage, storage_want),
        "storage {storage} ps, want {storage_want}"
    );

    let (sim, _) = run_with(&text, &["qos.class.2.shape=\"400G\""]);
    let urgent = fct(&sim, 2);
    assert!(near(urgent, ideal), "unshaped urgent {urgent} ps");
    for i in [0, 1] {
        assert!(
            fct(&sim, i) as f64 > ideal * 2.5,
            "transfer {i} starved while the urgent one ran: {}",
            fct(&sim, i)
        );
    }
}

/// Host 1 sends training data into an incast on host 0 (with hosts 2 and
/// 3) and storage data to idle host 4. The leaf pauses host 1's training
/// class; its storage QP goes on through the pause. In one class, the
/// same pause stops both (what a NIC with one data queue does).
#[test]
fn a_nic_pauses_one_class_and_sends_the_others() {
    let incast = "\n[[workload]]\nkind = \"incast\"\ndst = 0\nsrcs = [1, 2, 3]\nbytes = \"16MB\"\n";
    let text = format!("{FABRIC}{incast}{}", transfer(1, 4, Some(26)));
    let (sim, summary) = run(&text);
    let storage = fct(&sim, 3);
    let ideal = sim.flows()[3].ideal_fct.0;
    let paused = |s: &fabricsim::report::Summary| s.pfc_pause_frames;
    assert!(paused(&summary) > 0, "the incast pauses its senders");
    let (sim, summary) = run_with(&text, &["workload.1.dscp=24"]);
    let together = fct(&sim, 3);
    assert!(paused(&summary) > 0);
    assert!(
        (storage as f64) < 0.6 * together as f64,
        "own class {storage} ps, sharing the paused class {together} ps"
    );
    assert!(
        (storage as f64) < 1.6 * ideal as f64,
        "{storage} against ideal {ideal}"
    );
}

/// The example runs and shows the three shares.
#[test]
fn the_traffic_classes_example_shares_as_its_header_says() {
    let (sim, _) = run_file(
        std::path::Path::new("examples/lossless/traffic-classes.toml"),
        &[],
    );
    let us = |i: usize| fct(&sim, i) as f64 / 1e6;
    assert!((us(0) - 726.0).abs() < 5.0, "training {} us", us(0));
    assert!((us(1) - 871.0).abs() < 5.0, "storage {} us", us(1));
    assert!((us(2) - 1307.0).abs() < 10.0, "urgent {} us", us(2));
}

#[test]
fn class_settings_are_checked() {
    let one = format!("{FABRIC}{}", transfer(1, 0, None));
    let e = error_of(&one, &["workload.0.dscp=64"]);
    assert!(
        e.contains("workload[0].dscp") && e.contains("got 64"),
        "{e}"
    );
    let tenants = |table: &str| {
        one.replace(
            "congestion_control = \"none\"\n",
            &format!("congestion_control = \"none\"\ntenant_dscp = {table}\n"),
        )
    };
    let e = error_of(&tenants("{ x = 3 }"), &[]);
    assert!(
        e.contains("tenant_dscp.x") && e.contains("tenant (job) id"),
        "{e}"
    );
    let e = error_of(&tenants("{ 1 = 99 }"), &[]);
    assert!(e.contains("expected a DSCP from 0 to 63"), "{e}");
    let e = error_of(&one, &["qos.class.2.shape=\"fast\""]);
    assert!(e.contains("qos.class[2].shape"), "{e}");
    // A workload's class must carry the transport's frames.
    let e = error_of(&one, &["qos.class.1.mtu=1500", "workload.0.dscp=26"]);
    assert!(
        e.contains("workload[0].dscp") && e.contains("\"storage\""),
        "{e}"
    );
    // A tenant's DSCP applies to its workloads that give none.
    let (sim, _) = run_with(&tenants("{ 2 = 26 }"), &["workload.0.tenant=2"]);
    assert_eq!(sim.nics().qp(fabricsim::topology::QpId(0)).dscp, 26);
}
