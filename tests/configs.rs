//! Switch configurations (`fabricsim config import`, `[switch] config`):
//! the seed's NX-OS configuration imports to exactly its own values, and a
//! scenario that names it resolves as one that sets those values by keys;
//! lines not modelled are listed with their numbers (refused by
//! `--strict`), a malformed line is an error naming it.

use fabricsim::config::{import_nxos, nxos, ConfigError};

fn leaf() -> String {
    std::fs::read_to_string("examples/configs/leaf.nxos").unwrap()
}

/// The keys the seed configuration means, written by hand.
/// The classes come in the policy's order: a frame takes the first that
/// matches it.
const SEED_KEYS: &str = r#"
[[qos.class]]
name = "ROCEv2"
dscp = [24]
queue = 3
bandwidth_percent = 50
lossless = true
ecn = true
wred = { min = "150KB", max = "3000KB", max_probability = 0.07, weight = 0 }
mtu = 9216

[[qos.class]]
name = "CNP"
dscp = [48]
queue = 7
strict = true
lossless = false
ecn = false
wred = "off"

[[qos.class]]
name = "class-default"
queue = 0
bandwidth_percent = 50
lossless = false
ecn = false
wred = "off"

[pfc]
enabled = true

[pfc.watchdog]
interval = "100ms"
action = "drop"
recovery = "1000ms"

[switch.balance]
mode = "dlb"
dlb_mode = "per-packet"
"#;

#[test]
fn the_seed_configuration_imports_to_exactly_its_own_values() {
    let import = import_nxos("leaf.nxos", &leaf()).unwrap();
    let want: toml::Table = SEED_KEYS.parse().unwrap();
    assert_eq!(import.table(), want);
    assert_eq!(import.hostname.as_deref(), Some("rail-leaf-1"));
    // The printed keys are the keys, and say where each came from.
    let printed = import.to_toml();
    assert_eq!(printed.parse::<toml::Table>().unwrap(), want);
    assert!(
        printed.contains("bandwidth_percent = 50  # line 25"),
        "{printed}"
    );
    assert!(printed.contains("lossless = true  # line 39"), "{printed}");
    assert!(printed.contains("strict = true  # line 34"), "{printed}");
    // Both interface ranges with their PFC mode and watchdog.
    assert_eq!(import.interfaces.len(), 2);
    assert_eq!(import.interfaces[0].names.len(), 16);
    assert_eq!(import.dlb_ports.len(), 8);
    assert_eq!(import.dlb_ports[7], (67, "Ethernet1/56".to_string()));
    assert_eq!(import.interfaces[1].pfc, Some((55, nxos::PfcMode::Auto)));
    assert!(import.not_modelled.is_empty(), "{:?}", import.not_modelled);
}

const SCENARIO: &str = r#"
name = "t"
[topology]
kind = "rail-optimized"
hosts = 8
gpus_per_host = 8
nic_speed = "200G"
hosts_per_leaf = 8
rails_per_leaf = 2
spines = 4
uplink_speed = "400G"
uplinks_per_spine = 2
switch_radix = 64
[[workload]]
kind = "collective"
op = "all-reduce"
bytes = "16MB"
"#;

/// What a simulation runs with: classes and queues, each port's PFC
/// thresholds, the switches' balancing.
fn resolved(p: &fabricsim::scenario::Prepared) -> String {
    format!("{:?}\n{:?}\n{:?}", p.scenario.qos, p.pfc, p.scenario.switch)
}

#[test]
fn a_scenario_naming_the_configuration_runs_as_one_with_its_keys() {
    let by_config = fabricsim::scenario::prepare(
        "examples/configs/t.toml",
        &format!("{SCENARIO}[switch]\nconfig = \"leaf.nxos\"\n"),
        &[],
    )
    .unwrap();
    let by_keys = fabricsim::scenario::prepare(
        "examples/configs/t.toml",
        &format!("{SCENARIO}{SEED_KEYS}"),
        &[],
    )
    .unwrap();
    assert_eq!(resolved(&by_config), resolved(&by_keys));
    // And not as the defaults: the preset's WRED scales with port speed.
    let default = fabricsim::scenario::prepare("t.toml", SCENARIO, &[]).unwrap();
    assert_ne!(resolved(&by_config), resolved(&default));
    let q = &by_config.scenario.qos.queues[3];
    let w = q.wred.as_ref().unwrap();
    assert_eq!(
        (w.min, w.max, w.weight),
        (Some(150_000), Some(3_000_000), 0)
    );
    assert_eq!(w.max_probability, Some(0.07));
    assert!(q.lossless && q.ecn && q.percent == 50 && q.mtu == 9216);
    assert!(by_config.scenario.qos.queues[7].strict);
    assert!(by_config.scenario.qos.queues[0].wred.is_none());
}

#[test]
fn a_key_given_twice_is_refused_with_both_places() {
    let e = fabricsim::scenario::prepare(
        "examples/configs/t.toml",
        &format!("{SCENARIO}[switch]\nconfig = \"leaf.nxos\"\n[pfc]\nenabled = false\n"),
        &[],
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("switch.config") && e.contains("leaf.nxos sets pfc.enabled"),
        "{e}"
    );
    let e = fabricsim::scenario::prepare(
        "examples/configs/t.toml",
        &format!("{SCENARIO}[switch]\nconfig = \"nothere.nxos\"\n"),
        &[],
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("switch.config") && e.contains("nothere.nxos"),
        "{e}"
    );
}

#[test]
fn lines_not_modelled_are_listed_by_number_and_refused_when_strict() {
    let text = format!("feature lldp\n{}\ninterface Ethernet1/1\n  ip address 10.0.0.1/31\n  mtu 9216\nfeature nv overlay\n", leaf());
    let import = import_nxos("x.nxos", &text).unwrap();
    let lines: Vec<usize> = import.not_modelled.iter().map(|l| l.0).collect();
    let n = leaf().lines().count();
    assert_eq!(lines, vec![1, n + 4, n + 5, n + 6]);
    assert_eq!(import.not_modelled[0].1, "feature lldp");
    let printed = import.to_toml();
    assert!(printed.contains(&format!("#   line {}: ip address 10.0.0.1/31", n + 4)));
    let e = import.strict().unwrap_err();
    assert_eq!(e.line, 1);
    assert!(e
        .to_string()
        .starts_with("x.nxos: line 1: \"feature lldp\" is not modelled"));
    // The keys do not change for the lines left out.
    assert_eq!(
        import.table(),
        import_nxos("leaf.nxos", &leaf()).unwrap().table()
    );
}

#[test]
fn a_malformed_line_is_an_error_naming_it() {
    let bad = leaf().replace(
        "maximum-threshold 3000 kbytes",
        "maximum-threshold 3000 kilobytes",
    );
    let e: ConfigError = import_nxos("leaf.nxos", &bad).unwrap_err();
    assert_eq!(e.line, 26);
    let msg = e.to_string();
    assert!(
        msg.starts_with("leaf.nxos: line 26: \"random-detect")
            && msg.contains("bytes, kbytes or mbytes")
            && msg.contains("\"kilobytes\""),
        "{msg}"
    );
    // A reference to a policy the file does not define.
    let bad = leaf().replace("output QOS_EGRESS_PORT", "output QOS_EGRESS");
    let e = import_nxos("leaf.nxos", &bad).unwrap_err();
    assert_eq!(e.line, 45);
    assert!(e
        .message
        .contains("QOS_EGRESS, which the configuration does not define"));
    // Two classification policies: the simulator classifies every port alike.
    let bad = format!(
        "{}\ninterface Ethernet1/9\n  service-policy type qos input OTHER\n",
        leaf()
    );
    let e = import_nxos("leaf.nxos", &bad).unwrap_err();
    assert!(e.message.contains("every port alike"), "{e}");
}

#[test]
fn the_import_command_prints_the_keys() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fabricsim"))
        .args(["config", "import", "examples/configs/leaf.nxos"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let keys: toml::Table = text.parse().unwrap();
    assert_eq!(keys, SEED_KEYS.parse::<toml::Table>().unwrap());
    // --strict refuses what is not modelled, naming the line.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.nxos");
    std::fs::write(&path, format!("{}\nfeature lldp\n", leaf())).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fabricsim"))
        .args(["config", "import", "--strict"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let n = leaf().lines().count() + 2;
    assert!(
        err.contains(&format!("line {n}: \"feature lldp\" is not modelled")),
        "{err}"
    );
}

#[test]
fn validate_says_where_the_configuration_departs_from_the_preset() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fabricsim"))
        .args(["validate", "examples/configs/rail-pod-nxos.toml"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "switch configuration examples/configs/leaf.nxos, examples/configs/spine.nxos departs from the DCQCN preset"
        ),
        "{text}"
    );
    assert!(
        text.contains("class \"ROCEv2\" at 200G ports: WRED 150.0 KB..3.00 MB marking up to 7%; the connectx-firmware preset gives 800.0 KB..3.20 MB up to 20%"),
        "{text}"
    );
    // The thresholds the ports run with follow the configuration.
    assert!(
        text.contains("xON 75.0 KB, WRED 150.0 KB..3.00 MB, xOFF 3.15 MB"),
        "{text}"
    );
}

fn run_summary(scenario: &str, sets: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["run", scenario, "--out", dir.path().to_str().unwrap()];
    for s in sets {
        args.extend(["--set", s]);
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fabricsim"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    let pfc = std::fs::read_to_string(dir.path().join("pfc.csv")).unwrap();
    s["pfc_csv"] = serde_json::Value::String(pfc);
    s
}

#[test]
fn a_port_left_with_pfc_off_makes_its_link_lossy_and_the_incast_loses_there() {
    const MISTAKE: &str = "examples/configs/incast-nxos-pfc-off.toml";
    let p = fabricsim::scenario::prepare(MISTAKE, &std::fs::read_to_string(MISTAKE).unwrap(), &[])
        .unwrap();
    let topo = &p.topology;
    let configs = p.scenario.configs.as_ref().unwrap();
    // Exactly the two ends of leaf2's uplink run without PFC: spine0's
    // port by its `mode off`, leaf2's because auto finds nothing to
    // negotiate.
    let off: Vec<String> = configs
        .pfc_off_ports()
        .map(|q| configs.port_name(topo, q))
        .collect();
    assert_eq!(off, ["leaf2 Ethernet1/49", "spine0 Ethernet1/3"]);
    for q in 0..topo.ports.len() as u32 {
        let q = fabricsim::topology::PortId(q);
        let is_off = off.contains(&configs.port_name(topo, q));
        assert_eq!(p.pfc.get(q, 3).unwrap().off, is_off);
    }
    // validate names both lines.
    let finding = p
        .scenario
        .warnings
        .iter()
        .find(|w| w.message.contains("is lossy"))
        .unwrap();
    assert!(
        finding
            .message
            .contains("spine-pfc-off.nxos line 56: priority-flow-control mode off")
            && finding
                .message
                .contains("leaf.nxos line 55: priority-flow-control mode auto"),
        "{}",
        finding.message
    );

    assert!(p.scenario.warnings.iter().any(|w| w
        .message
        .contains("times out (transport.rto = 4294.967 ms)")));

    // The run: leaf2 cannot pause spine0, so it drops what PFC held.
    let mistake = run_summary(MISTAKE, &[]);
    let right = run_summary(MISTAKE, &["switch.config[0].file=\"spine.nxos\""]);
    assert_eq!(right["lossless_drops"], 0);
    assert_eq!(right["retransmitted_bytes"], 0);
    assert!(right["pfc_pause_frames"].as_u64().unwrap() > 0);
    assert_eq!(mistake["pfc_pause_frames"], 0);
    let drops = mistake["lossless_drops"].as_u64().unwrap();
    assert!(drops > 100, "{drops}");
    assert!(mistake["retransmitted_bytes"].as_u64().unwrap() > 1_000_000);
    assert_eq!(mistake["complete"], true);
    // All of them at leaf2, on traffic in from spine0.
    let row = mistake["pfc_csv"]
        .as_str()
        .unwrap()
        .lines()
        .find(|l| l.starts_with("leaf2,spine0,3,"))
        .unwrap()
        .to_string();
    assert!(row.ends_with(&format!(",{drops},off,0")), "{row}");

    // Forcing PFC on at leaf2 does not mend it: leaf2 pauses, spine0
    // (off) ignores every PFC frame, and leaf2 still drops.
    let set = "switch.config[1].file=\"leaf-pfc-on.nxos\"";
    let one_sided = run_summary(MISTAKE, &[set]);
    let csv = one_sided["pfc_csv"].as_str().unwrap().to_string();
    let mut rows = csv.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    let col = |row: &str, name: &str| -> String {
        let i = header.iter().position(|h| *h == name).unwrap();
        row.split(',').nth(i).unwrap().to_string()
    };
    let row = |prefix: &str| csv.lines().find(|l| l.starts_with(prefix)).unwrap();
    let (leaf2, spine0) = (row("leaf2,spine0,3,"), row("spine0,leaf2,3,"));
    assert_eq!(col(leaf2, "pfc"), "on");
    assert_eq!(col(spine0, "pfc"), "off");
    let sent: u64 = col(leaf2, "pauses_sent").parse().unwrap();
    let resumes: u64 = col(leaf2, "resumes_sent").parse().unwrap();
    assert!(sent > 0);
    assert_eq!(col(spine0, "pauses_ignored"), (sent + resumes).to_string());
    assert_eq!(col(spine0, "pauses_received"), "0");
    assert!(col(leaf2, "lossless_drops").parse::<u64>().unwrap() > 100);
}

#[test]
fn each_tier_runs_its_own_configuration_and_balancing() {
    const POD: &str = "examples/configs/rail-pod-nxos.toml";
    let p = fabricsim::scenario::prepare(POD, &std::fs::read_to_string(POD).unwrap(), &[]).unwrap();
    let topo = &p.topology;
    let configs = p.scenario.configs.as_ref().unwrap();
    assert_eq!(configs.files.len(), 2);
    // Leaves: uplinks named as cabled, DLB on them; spines: no DLB.
    let leaf0 = &topo.switches[0];
    assert_eq!(leaf0.name, "leaf0");
    let names: Vec<String> = leaf0
        .ports
        .iter()
        .map(|&q| configs.ports[q.idx()].as_ref().unwrap().name.clone())
        .collect();
    assert_eq!(names[0], "Ethernet1/1");
    assert_eq!(names[15], "Ethernet1/16");
    assert_eq!(names[16], "Ethernet1/49");
    assert_eq!(names[23], "Ethernet1/56");
    let dlb = configs.dlb_ports();
    for s in &topo.switches {
        let ups = s
            .ports
            .iter()
            .filter(|q| topo.links[topo.port(**q).link.idx()].a == **q);
        for q in ups {
            assert_eq!(dlb[q.idx()], s.name.starts_with("leaf"), "{}", s.name);
        }
    }
    // Balancing differs by tier: DLB spraying on the leaves only.
    use fabricsim::switch::balance::Algo;
    for (i, s) in topo.switches.iter().enumerate() {
        let spec = p
            .scenario
            .switch
            .balance
            .for_switch(fabricsim::topology::SwitchId(i as u32), s.tier);
        assert_eq!(spec.uses(Algo::Dlb), s.tier == 0, "{}", s.name);
    }
    assert!(configs.pfc_off_ports().next().is_none());
    let audit = p.audit().unwrap();
    assert!(
        audit.lines[0]
            .contains("96 of 96 configured links carry \"ROCEv2\" (CoS 3) with PFC on both ends"),
        "{:?}",
        audit.lines
    );
}

#[test]
fn configurations_that_disagree_on_qos_are_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let leaf = leaf();
    std::fs::write(dir.path().join("leaf.nxos"), &leaf).unwrap();
    std::fs::write(
        dir.path().join("spine.nxos"),
        leaf.replace(
            "maximum-threshold 3000 kbytes",
            "maximum-threshold 2000 kbytes",
        ),
    )
    .unwrap();
    let scenario = format!(
        "{SCENARIO}[[switch.config]]\nfile = \"leaf.nxos\"\ntier = \"leaf\"\n[[switch.config]]\nfile = \"spine.nxos\"\ntier = \"spine\"\n"
    );
    let file = dir.path().join("t.toml");
    let e = fabricsim::scenario::prepare(file.to_str().unwrap(), &scenario, &[])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("leaf.nxos and ") && e.contains("spine.nxos differ in qos.class"),
        "{e}"
    );
    // A tier that is not one, and a switch configured twice.
    let bad = format!("{SCENARIO}[[switch.config]]\nfile = \"leaf.nxos\"\ntier = \"core\"\n");
    let e = fabricsim::scenario::prepare(file.to_str().unwrap(), &bad, &[])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("switch.config[0].tier") && e.contains("\"core\""),
        "{e}"
    );
    let twice = format!(
        "{SCENARIO}[[switch.config]]\nfile = \"leaf.nxos\"\n[[switch.config]]\nfile = \"leaf.nxos\"\nswitches = [\"spine*\"]\n"
    );
    let e = fabricsim::scenario::prepare(file.to_str().unwrap(), &twice, &[])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("switch.config[1]") && e.contains("configured by entry 0"),
        "{e}"
    );
}

/// What the Junos pair means, written by hand.
const JUNOS_KEYS: &str = r#"
[[qos.class]]
name = "best-effort"
queue = 0
bandwidth_percent = 50
lossless = false
ecn = false
wred = "off"
mtu = 9216

[[qos.class]]
name = "NO-LOSS"
dscp = [24]
queue = 3
bandwidth_percent = 50
lossless = true
ecn = true
wred = { min = "1%", max = "10%", max_probability = 0.2, weight = 0 }
mtu = 9216

[[qos.class]]
name = "CNP"
dscp = [48]
queue = 7
strict = true
lossless = false
ecn = false
wred = "off"
mtu = 9216

[pfc]
enabled = true

[switch.balance]
mode = "dlb"
dlb_mode = "flowlet"
flowlet_timeout = "128us"
"#;

#[test]
fn the_junos_pair_imports_in_both_forms_to_the_same_keys() {
    let leaf = fabricsim::config::import_file(std::path::Path::new("examples/configs/leaf.junos"))
        .unwrap();
    let spine =
        fabricsim::config::import_file(std::path::Path::new("examples/configs/spine.junos"))
            .unwrap();
    assert_eq!((leaf.dialect, spine.dialect), ("Junos", "Junos"));
    let want: toml::Table = JUNOS_KEYS.parse().unwrap();
    assert_eq!(leaf.table(), want);
    // The braces and the set lines say the same.
    assert_eq!(spine.table(), want);
    assert_eq!(leaf.hostname.as_deref(), Some("rail-leaf-1"));
    assert!(leaf.not_modelled.is_empty(), "{:?}", leaf.not_modelled);
    assert!(spine.not_modelled.is_empty(), "{:?}", spine.not_modelled);
    // PFC: the leaf's interfaces carry the notification profile (auto,
    // negotiated); the spine has none, so its ports run without.
    assert_eq!(leaf.interfaces.len(), 1);
    assert_eq!(leaf.interfaces[0].names, ["et-0/0/*"]);
    assert_eq!(
        leaf.interfaces[0].pfc,
        Some((50, fabricsim::config::nxos::PfcMode::Auto))
    );
    assert!(spine.interfaces.is_empty());
    assert_eq!(spine.default_pfc, fabricsim::config::nxos::PfcMode::Off);
    // A statement gone wrong names its line and column.
    let e = fabricsim::config::junos::import(
        "x.junos",
        "set class-of-service schedulers s transmit-rate percent 150\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("x.junos: line 1:") && e.contains("percentage from 0 to 100"),
        "{e}"
    );
}

#[test]
fn junos_fill_levels_are_shares_of_the_queue_limit_and_pfc_follows_the_profiles() {
    const POD: &str = "examples/configs/rail-pod-junos.toml";
    let p = fabricsim::scenario::prepare(POD, &std::fs::read_to_string(POD).unwrap(), &[]).unwrap();
    // 32 MiB shared, alpha 8: a queue may hold 8/9 of it; WRED from 1%
    // to 10% of that.
    let limit = (32u64 << 20) * 8 / 9;
    let w = p.pfc.wred_at(fabricsim::units::Rate::gbps(200), 3).unwrap();
    assert_eq!(
        (w.min as u64, w.max as u64),
        (
            (limit as f64 * 0.01).round() as u64,
            (limit as f64 * 0.10).round() as u64
        )
    );
    assert!(w.ecn);
    // Only the leaves run PFC: their NIC links are lossless, their
    // uplinks (the spines have no profile) are not.
    let topo = &p.topology;
    let configs = p.scenario.configs.as_ref().unwrap();
    let off: Vec<_> = configs.pfc_off_ports().collect();
    assert_eq!(off.len(), 64, "both ends of the 32 leaf-spine links");
    for q in &off {
        assert_eq!(topo.links[topo.port(*q).link.idx()].tier, 1);
    }
    let audit = p.audit().unwrap();
    assert!(audit.lines[0].contains("64 of 96"), "{:?}", audit.lines);
    assert!(
        audit.findings[0]
            .message
            .contains("spine.junos: no congestion-notification-profile covers it")
            && audit.findings[0].message.contains("leaf.junos line 50"),
        "{}",
        audit.findings[0].message
    );
    // A percentage out of range is refused, naming the key.
    let e = fabricsim::scenario::prepare(
        "t.toml",
        &format!("{SCENARIO}[[qos.class]]\nname = \"x\"\nqueue = 3\nlossless = true\nwred = {{ min = \"150%\" }}\n"),
        &[],
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("qos.class[0].wred.min") && e.contains("percentage"),
        "{e}"
    );
}

#[test]
fn junos_global_load_balancing_runs_glb_on_the_balancing_switches() {
    let leaf = std::fs::read_to_string("examples/configs/leaf.junos").unwrap();
    let glb = fabricsim::config::junos::import(
        "leaf.junos",
        &format!("{leaf}protocols {{\n    bgp {{\n        global-load-balancing {{\n            load-balancer-only;\n        }}\n    }}\n}}\n"),
    )
    .unwrap();
    let balance = &glb.table()["switch"]["balance"];
    assert_eq!(balance["mode"].as_str(), Some("glb"));
    // GLB balances flowlets: the ecmp-dlb settings stay.
    assert_eq!(balance["flowlet_timeout"].as_str(), Some("128us"));
    let helper = fabricsim::config::junos::import(
        "spine.junos",
        &format!(
            "{}set protocols bgp global-load-balancing helper-only\n",
            std::fs::read_to_string("examples/configs/spine.junos").unwrap()
        ),
    )
    .unwrap();
    assert_eq!(
        helper.table()["switch"]["balance"]["mode"].as_str(),
        Some("dlb")
    );
    assert!(helper.notes.iter().any(|(_, n)| n.contains("helper-only")));
}

#[test]
fn a_running_configuration_warns_once_for_its_many_lines_not_modelled() {
    let dir = tempfile::tempdir().unwrap();
    let mut text =
        String::from("feature lldp\nfeature bgp\nfeature nv overlay\nrouter bgp 65001\n");
    text.push_str(&leaf());
    std::fs::write(dir.path().join("run.nxos"), text).unwrap();
    let file = dir.path().join("t.toml");
    let p = fabricsim::scenario::prepare(
        file.to_str().unwrap(),
        &format!("{SCENARIO}[switch]\nconfig = \"run.nxos\"\n"),
        &[],
    )
    .unwrap();
    let w: Vec<&str> = p
        .scenario
        .warnings
        .iter()
        .filter(|w| w.message.contains("not modelled"))
        .map(|w| w.message.as_str())
        .collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("4 lines are not modelled: line 1: \"feature lldp\"")
            && w[0].contains("and 1 more")
            && w[0].contains("lists them all"),
        "{}",
        w[0]
    );
}

#[test]
fn topo_lists_ports_by_interface_name_with_pfc_as_negotiated() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fabricsim"))
        .args([
            "topo",
            "examples/configs/incast-nxos-pfc-off.toml",
            "--ports",
            "spine*",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let row = |name: &str| {
        text.lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("{name} in {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        row("Ethernet1/3 "),
        [
            "2",
            "Ethernet1/3",
            "down",
            "leaf2",
            "Ethernet1/49",
            "800G",
            "off"
        ]
    );
    assert_eq!(
        row("Ethernet1/1 "),
        [
            "0",
            "Ethernet1/1",
            "down",
            "leaf0",
            "Ethernet1/49",
            "800G",
            "on"
        ]
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fabricsim"))
        .args(["topo", "--ports", "nope"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no switch matches"));
}

#[test]
fn the_mistake_costs_a_ring_all_reduce_drops_resends_and_time() {
    const RING: &str = "examples/configs/ring-fat-tree-nxos-pfc-off.toml";
    let mistake = run_summary(RING, &[]);
    let right = run_summary(RING, &["switch.config[0].file=\"spine.nxos\""]);
    // As configured, the edges pause their NICs and nothing is lost.
    assert!(right["pfc_pause_frames"].as_u64().unwrap() > 100);
    assert_eq!(right["lossless_drops"], 0);
    assert_eq!(right["retransmitted_bytes"], 0);
    // With host1's port left off, pod0-edge0 drops host1's frames instead
    // of pausing it; go-back-N resends them and the ring waits.
    let drops = mistake["lossless_drops"].as_u64().unwrap();
    assert!(drops > 50, "{drops}");
    assert!(mistake["retransmitted_bytes"].as_u64().unwrap() > 1_000_000);
    let row = mistake["pfc_csv"]
        .as_str()
        .unwrap()
        .lines()
        .find(|l| l.starts_with("pod0-edge0,host1/nic0,3,"))
        .unwrap()
        .to_string();
    assert!(
        row.starts_with("pod0-edge0,host1/nic0,3,0,,0,"),
        "it never pauses: {row}"
    );
    assert!(row.ends_with(&format!(",{drops},off,0")), "{row}");
    let t = |s: &serde_json::Value| s["makespan_ps"].as_u64().unwrap();
    assert!(
        t(&mistake) > t(&right) * 103 / 100,
        "{} {}",
        t(&mistake),
        t(&right)
    );
}

/// `match cos`: the seed configuration with its ROCEv2 class matched by
/// the 802.1p priority the NICs stamp (`match cos 3`) instead of DSCP 24.
/// Tagged, the NICs stamp a DSCP's top three bits, so DSCP 24 to 31 land
/// in the lossless class and the incast pauses and loses nothing;
/// untagged, every frame is CoS 0 at the switches, the data lands in
/// class-default, `validate` says why, and the incast drops.
#[test]
fn match_cos_classifies_tagged_frames_by_the_priority_their_nic_stamps() {
    let dir = tempfile::tempdir().unwrap();
    let cos = |f: &str| {
        std::fs::read_to_string(format!("examples/configs/{f}"))
            .unwrap()
            .replace("  match dscp 24", "  match cos 3")
    };
    std::fs::write(dir.path().join("leaf.nxos"), cos("leaf.nxos")).unwrap();
    std::fs::write(dir.path().join("spine.nxos"), cos("spine.nxos")).unwrap();
    let import = fabricsim::config::import_file(&dir.path().join("leaf.nxos")).unwrap();
    let printed = import.to_toml();
    assert!(printed.contains("cos = [3]  # line 5"), "{printed}");
    assert!(import.not_modelled.is_empty(), "{:?}", import.not_modelled);

    let scenario = dir.path().join("incast.toml");
    let text = std::fs::read_to_string("examples/configs/incast-nxos-pfc-off.toml")
        .unwrap()
        .replace("spine-pfc-off.nxos", "spine.nxos");
    std::fs::write(&scenario, &text).unwrap();
    let file = scenario.to_str().unwrap();
    let prep = |sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        fabricsim::scenario::prepare(file, &text, &sets).unwrap()
    };
    let tagged = prep(&["qos.vlan_tagging=true"]);
    let map = &tagged.scenario.qos.map;
    // By priority, not DSCP: 26 is priority 3 too; CNPs stay by DSCP.
    assert_eq!(
        (
            map.queue_of(24),
            map.queue_of(26),
            map.queue_of(48),
            map.queue_of(0)
        ),
        (3, 3, 7, 0)
    );
    assert!(!tagged
        .scenario
        .warnings
        .iter()
        .any(|w| w.message.contains("CoS")));
    // A NIC that stamps another priority on DSCP 24 misses the class.
    let other = prep(&["qos.vlan_tagging=true", "qos.nic_priority.24=5"]);
    assert_eq!(other.scenario.qos.map.queue_of(24), 0);
    assert_eq!(other.scenario.qos.map.queue_of(26), 3);
    // Untagged: CoS 0, class-default, and validate names the line.
    let untagged = prep(&[]);
    assert_eq!(untagged.scenario.qos.map.queue_of(24), 0);
    let finding = untagged
        .scenario
        .warnings
        .iter()
        .find(|w| w.message.contains("matches by CoS"))
        .expect("a finding");
    assert!(
        finding.message.contains("spine.nxos line 5: match cos")
            && finding.message.contains("untagged"),
        "{}",
        finding.message
    );
    // The warning names the key the NICs' DSCP is set by.
    assert!(untagged
        .scenario
        .warnings
        .iter()
        .any(|w| w.message.contains(
            "the NICs' data (transport.dscp = 24) lands in class \"class-default\", which is lossy"
        )));

    // The runs: tagged pauses and loses nothing; untagged drops.
    let run = run_summary(file, &["qos.vlan_tagging=true"]);
    assert_eq!(run["drops"], 0);
    assert!(run["pfc_pause_frames"].as_u64().unwrap() > 0);
    let run = run_summary(file, &[]);
    assert_eq!(run["pfc_pause_frames"], 0);
    assert!(run["drops"].as_u64().unwrap() > 100, "{}", run["drops"]);
    assert_eq!(run["lossless_drops"], 0);
}

/// `[qos.nic_priority]` names a bad DSCP or priority; tagged or not,
/// data whose priority is not the one its lossless class's pauses name
/// is warned about.
#[test]
fn nic_priorities_are_valid_values_and_match_the_pauses() {
    let base = SCENARIO;
    for (extra, want) in [
        (
            "[qos]\nvlan_tagging = true\n[qos.nic_priority]\n64 = 5\n",
            "expected a DSCP from 0 to 63",
        ),
        (
            "[qos]\nvlan_tagging = true\n[qos.nic_priority]\n24 = 8\n",
            "got 8, expected an 802.1p priority from 0 to 7",
        ),
        (
            "[qos]\n[[qos.class]]\nname = \"a\"\nqueue = 3\ncos = [3]\nmatch = \"all\"\n",
            "needs both dscp and cos",
        ),
    ] {
        let e = fabricsim::scenario::prepare("t.toml", &format!("{base}{extra}"), &[])
            .err()
            .unwrap_or_else(|| panic!("{extra} was accepted"));
        assert!(e.to_string().contains(want), "{extra}: {e}");
    }
    // Data classified by DSCP into the lossless class but tagged with
    // another priority would not stop for PFC: a warning says so.
    let warned = |extra: &str| {
        let p = fabricsim::scenario::prepare("t.toml", &format!("{base}{extra}"), &[]).unwrap();
        p.scenario
            .warnings
            .iter()
            .any(|w| w.key == "qos.nic_priority" && w.message.contains("priority 5, but"))
    };
    assert!(warned(
        "[qos]\nvlan_tagging = true\n[qos.nic_priority]\n24 = 5\n"
    ));
    assert!(warned("[qos.nic_priority]\n24 = 5\n"));
    assert!(!warned(
        "[qos]\nvlan_tagging = true\n[qos.nic_priority]\n24 = 3\n"
    ));
}

/// Junos's IEEE 802.1 classifiers: alone on the interfaces they classify
/// tagged frames by the priority their NIC stamps (priority 3 to NO-LOSS,
/// 6 to CNP, as `cos` keys); beside a DSCP classifier the binding is
/// listed as not modelled and frames are classified by DSCP.
#[test]
fn junos_ieee_classifiers_classify_by_priority() {
    use fabricsim::config::junos;
    let spine = std::fs::read_to_string("examples/configs/spine.junos").unwrap();
    let by_pcp = spine
        .replace(
            "classifiers dscp ai-dscp forwarding-class NO-LOSS loss-priority low code-points 011000",
            "classifiers ieee-802.1 ai-pcp forwarding-class NO-LOSS loss-priority low code-points 011",
        )
        .replace(
            "classifiers dscp ai-dscp forwarding-class CNP loss-priority low code-points 110000",
            "classifiers ieee-802.1 ai-pcp forwarding-class CNP loss-priority low code-points 110",
        )
        .replace("classifiers dscp ai-dscp\n", "classifiers ieee-802.1 ai-pcp\n");
    let import = junos::import("spine.junos", &by_pcp).unwrap();
    assert!(import.not_modelled.is_empty(), "{:?}", import.not_modelled);
    let classes = import.table()["qos"]["class"].as_array().unwrap().clone();
    let class = |name: &str| {
        classes
            .iter()
            .find(|c| c["name"].as_str() == Some(name))
            .unwrap()
            .clone()
    };
    assert_eq!(
        class("NO-LOSS")["cos"].as_array().unwrap()[0].as_integer(),
        Some(3)
    );
    assert_eq!(
        class("CNP")["cos"].as_array().unwrap()[0].as_integer(),
        Some(6)
    );
    assert!(class("NO-LOSS").get("dscp").is_none());
    // Tagged, DSCP 24 (priority 3) lands in NO-LOSS and CNPs (DSCP 48,
    // priority 6) in CNP; untagged, both in best-effort.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spine.junos"), &by_pcp).unwrap();
    let scenario = dir.path().join("t.toml");
    let text = format!("{SCENARIO}[switch]\nconfig = \"spine.junos\"\n");
    let map = |sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let p = fabricsim::scenario::prepare(scenario.to_str().unwrap(), &text, &sets).unwrap();
        let m = &p.scenario.qos.map;
        (m.queue_of(24), m.queue_of(48))
    };
    assert_eq!(map(&["qos.vlan_tagging=true"]), (3, 7));
    assert_eq!(map(&[]), (0, 0));

    // Both kinds on the interfaces: by DSCP, the 802.1 binding listed.
    let both = spine.replace(
        "set class-of-service interfaces et-0/0/* classifiers dscp ai-dscp\n",
        "set class-of-service interfaces et-0/0/* classifiers dscp ai-dscp\nset class-of-service interfaces et-0/0/* classifiers ieee-802.1 ai-pcp\nset class-of-service classifiers ieee-802.1 ai-pcp forwarding-class NO-LOSS loss-priority low code-points 011\n",
    );
    let import = junos::import("spine.junos", &both).unwrap();
    assert_eq!(import.not_modelled.len(), 1, "{:?}", import.not_modelled);
    assert!(import.not_modelled[0]
        .1
        .contains("classifiers ieee-802.1 ai-pcp"));
    assert_eq!(
        import.table(),
        junos::import("spine.junos", &spine).unwrap().table()
    );
}

/// A file is read in time and memory linear in its length: interface
/// ranges are counted before they are expanded (and each name kept once),
/// brace nesting and the flattened statements are bounded, and policy
/// maps are looked up by name, not searched (100,000 of them).
#[test]
fn hostile_configurations_cost_no_more_than_their_length() {
    // 50 ranges of 4,095 ports on one line: refused before expanding.
    let line = format!(
        "interface {}\n  priority-flow-control mode on\n",
        vec!["Ethernet1/1-4095"; 50].join(", ")
    );
    let e = import_nxos("wide.nxos", &line.repeat(200))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 1") && e.contains("at most 4096 interfaces on one line"),
        "{e}"
    );
    // The same range many times on a line is its names once.
    let line = format!("interface {}\n", vec!["Ethernet1/1-64"; 50].join(", "));
    let i = import_nxos("dup.nxos", &line).unwrap();
    assert_eq!(i.interfaces[0].names.len(), 64);
    // Many such lines: refused past the file's bound.
    let e = import_nxos("many.nxos", &line.repeat(3_000))
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than 65536 interfaces in all"), "{e}");
    // Junos nested 16,000 deep, and one long block name repeated in a
    // million statements.
    let n = 16_000;
    let deep = format!("{}{}{}", "a {".repeat(n), "b;".repeat(n), "}".repeat(n));
    let e = fabricsim::config::junos::import("deep.junos", &deep)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nested more than 64 deep"), "{e}");
    let wide = format!("{} {{ {}}}", "a".repeat(1_000_000), "b; ".repeat(1_000_000));
    let e = fabricsim::config::junos::import("wide.junos", &wide)
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than 32 times the file's length"), "{e}");
    // 100,000 policy maps, the last one used: each name found at once.
    let mut text: String = (0..100_000)
        .map(|i| format!("policy-map type qos P{i}\n  class class-default\n    set qos-group 0\n"))
        .collect();
    text.push_str("system qos\n  service-policy type qos input P99999\n");
    let i = import_nxos("policies.nxos", &text).unwrap();
    assert!(!i.sections.is_empty());
    let again = format!("{text}policy-map type qos P5\n");
    let e = import_nxos("twice.nxos", &again).unwrap_err().to_string();
    assert!(
        e.contains("policy-map type qos P5 is defined again (first at line 16)"),
        "{e}"
    );
}

/// A file with no configuration in it (a scenario given by mistake) is
/// an error, in either dialect, not an import of defaults.
#[test]
fn a_file_without_configuration_is_refused() {
    let scenario = std::fs::read_to_string("examples/fat-tree.toml").unwrap();
    let e = import_nxos("fat-tree.toml", &scenario)
        .unwrap_err()
        .to_string();
    assert!(e.contains("holds no NX-OS configuration"), "{e}");
    let e = fabricsim::config::junos::import("x.junos", "foo { bar; }\nset baz qux\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("holds no Junos configuration"), "{e}");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fabricsim"))
        .args(["config", "import", "examples/fat-tree.toml"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
}

/// Values convert exactly or are refused: a shaper of 1,500 kb/s is
/// "1500K" (it was "1M"), of 999,999 b/s "999999bps" (it was "0M"), of 0
/// an error; a DSCP range written high to low is an error (it was its
/// first value alone); a second system qos policy of one kind is an error
/// (it was ignored).
#[test]
fn values_convert_exactly_or_are_refused() {
    let shaped = |rate: &str| {
        leaf().replace(
            "  class type queuing c-out-8q-q7\n    priority level 1\n",
            &format!("  class type queuing c-out-8q-q7\n    priority level 1\n    shape min 0 kbps max {rate}\n"),
        )
    };
    let shape_of = |text: &str| {
        let i = import_nxos("leaf.nxos", text).unwrap();
        let printed = i.to_toml();
        printed
            .lines()
            .find(|l| l.starts_with("shape"))
            .map(|l| l.split("  #").next().unwrap_or(l).to_string())
            .unwrap_or_else(|| panic!("{printed}"))
    };
    assert_eq!(shape_of(&shaped("1500 kbps")), "shape = \"1500K\"");
    assert_eq!(shape_of(&shaped("999999 bps")), "shape = \"999999bps\"");
    assert_eq!(shape_of(&shaped("2 gbps")), "shape = \"2G\"");
    let e = import_nxos("leaf.nxos", &shaped("0 bps"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("a maximum rate above 0"), "{e}");
    // The keys a shaper converts to are ones a scenario takes.
    assert!(fabricsim::units::parse_rate("999999bps").is_some());
    assert!(fabricsim::units::parse_rate("1500K").is_some());
    let e = import_nxos(
        "leaf.nxos",
        &leaf().replace("match dscp 24", "match dscp 50-45"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("line 5") && e.contains("from its lower value to its higher"),
        "{e}"
    );
    let twice = leaf().replace(
        "  service-policy type queuing output QOS_EGRESS_PORT\n",
        "  service-policy type queuing output QOS_EGRESS_PORT\n  service-policy type queuing output QOS_EGRESS_PORT\n",
    );
    let e = import_nxos("leaf.nxos", &twice).unwrap_err().to_string();
    assert!(
        e.contains(
            "a second output service-policy type queuing in system qos (the first at line 45)"
        ),
        "{e}"
    );
}

/// Values a scenario would refuse are refused at import, at their line:
/// shares adding to more than the port, WRED thresholds of 0, a Junos
/// MTU of 0.
#[test]
fn values_a_scenario_refuses_are_refused_at_their_line() {
    let over = leaf().replace(
        "  class type queuing c-out-8q-q-default\n    bandwidth remaining percent 50",
        "  class type queuing c-out-8q-q-default\n    bandwidth remaining percent 100",
    );
    let e = import_nxos("leaf.nxos", &over).unwrap_err().to_string();
    assert!(
        e.contains("add up to 150%, more than the whole port"),
        "{e}"
    );
    let zero = leaf().replace(
        "minimum-threshold 150 kbytes maximum-threshold 3000 kbytes",
        "minimum-threshold 0 kbytes maximum-threshold 0 kbytes",
    );
    let e = import_nxos("leaf.nxos", &zero).unwrap_err().to_string();
    assert!(
        e.contains("line 26") && e.contains("a maximum threshold above 0"),
        "{e}"
    );
    let e = fabricsim::config::junos::import("m.junos", "set interfaces et-0/0/0 mtu 0\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 1") && e.contains("an MTU in bytes from 256 to 65535"),
        "{e}"
    );
    // A flowlet aging past what the simulator keeps is refused, not cut.
    let aging = format!("{}  flowlet-aging 99999999999\n", leaf());
    let e = import_nxos("leaf.nxos", &aging).unwrap_err().to_string();
    assert!(
        e.contains("expected microseconds from 0 to 4294967295, got \"99999999999\""),
        "{e}"
    );
    // A drop profile whose last fill level is 0% (WRED from an empty
    // queue) is refused at its line.
    let junos = std::fs::read_to_string("examples/configs/leaf.junos").unwrap();
    let flat = junos.replace("fill-level [ 1 10 ];", "fill-level [ 0 0 ];");
    let e = fabricsim::config::junos::import("leaf.junos", &flat)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 27") && e.contains("last fill level is 0%"),
        "{e}"
    );
}

/// A value a configuration gives that the scenario then refuses is
/// reported at the configuration's file and line, not at a key the user
/// never wrote: a Junos MTU of 300 B against the transport's default
/// 4096 B frames.
#[test]
fn a_configured_value_the_scenario_refuses_names_the_configuration_line() {
    let dir = tempfile::tempdir().unwrap();
    let junos = std::fs::read_to_string("examples/configs/leaf.junos").unwrap();
    std::fs::write(
        dir.path().join("leaf.junos"),
        junos.replace("mtu 9216;", "mtu 300;"),
    )
    .unwrap();
    let scenario = dir.path().join("s.toml");
    let text = format!("{SCENARIO}[switch]\nconfig = \"leaf.junos\"\n");
    let e = fabricsim::scenario::prepare(&scenario.to_string_lossy(), &text, &[])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("leaf.junos:10: qos.class["), "{e}");
    assert!(e.contains("got 300 B, below the 4174 B frames"), "{e}");
    // The same class MTU written in the scenario is blamed there.
    let keys = "[[qos.class]]\nname = \"rocev2\"\ndscp = [24]\nqueue = 3\nmtu = 300\n";
    let e = fabricsim::scenario::prepare("t.toml", &format!("{SCENARIO}{keys}"), &[])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("t.toml:") && e.contains("qos.class[0].mtu"),
        "{e}"
    );
}

/// NX-OS modes are found by their commands, as the switch finds them:
/// the seed configuration with no indentation at all, framed the way a
/// pasted session is (`configure terminal`, `exit` after each block,
/// `end`, `copy running-config startup-config`), imports to exactly the
/// same keys and interfaces as the indented file, and `--strict`
/// (nothing not modelled) accepts it: the framing configures nothing.
#[test]
fn a_flat_configuration_with_exit_and_end_reads_as_the_indented_one() {
    let indented = import_nxos("leaf.nxos", &leaf()).unwrap();
    let mut flat = String::from("configure terminal\n");
    let mut first = true;
    for line in leaf().lines() {
        let text = line.trim_start();
        let top = !line.starts_with(' ') && !text.is_empty() && !text.starts_with('!');
        if top && !first {
            flat.push_str("exit\n");
        }
        first &= !top;
        flat.push_str(text);
        flat.push('\n');
    }
    flat.push_str("end\ncopy running-config startup-config\n");
    assert!(!flat.lines().any(|l| l.starts_with(' ')));
    let read = import_nxos("flat.nxos", &flat).unwrap();
    assert_eq!(read.table(), indented.table());
    assert_eq!(read.interfaces.len(), indented.interfaces.len());
    for (a, b) in read.interfaces.iter().zip(&indented.interfaces) {
        assert_eq!(a.names, b.names);
        assert_eq!(a.pfc.map(|p| p.1), b.pfc.map(|p| p.1));
    }
    assert_eq!(read.dlb_ports.len(), 8);
    read.strict().unwrap();
    // Without the exits too: each line goes to the innermost mode that
    // reads it.
    let bare: String = flat
        .lines()
        .filter(|l| *l != "exit")
        .map(|l| format!("{l}\n"))
        .collect();
    let read = import_nxos("bare.nxos", &bare).unwrap();
    assert_eq!(read.table(), indented.table());
    read.strict().unwrap();
}

/// The dialect is decided by the weight of the lines, not by one: flat
/// NX-OS, whose `set qos-group` lines start at the margin, is read as
/// NX-OS; Junos `set` lines and braces are read as Junos.
#[test]
fn one_set_line_does_not_make_nxos_junos() {
    let dir = tempfile::tempdir().unwrap();
    let flat: String = leaf()
        .lines()
        .map(|l| format!("{}\n", l.trim_start()))
        .collect();
    assert!(flat.lines().any(|l| l.starts_with("set qos-group")));
    let path = dir.path().join("leaf.cfg");
    std::fs::write(&path, &flat).unwrap();
    let read = fabricsim::config::import_file(&path).unwrap();
    assert_eq!(
        read.dialect,
        import_nxos("leaf.nxos", &leaf()).unwrap().dialect
    );
    assert_eq!(
        read.table(),
        import_nxos("leaf.nxos", &leaf()).unwrap().table()
    );
    // Junos in both forms, under a name that does not say: read as the
    // same files named .junos are.
    for name in ["spine.junos", "leaf.junos"] {
        let junos = fabricsim::config::import_file(std::path::Path::new(&format!(
            "examples/configs/{name}"
        )))
        .unwrap();
        let path = dir.path().join(name.replace(".junos", ".txt"));
        std::fs::copy(format!("examples/configs/{name}"), &path).unwrap();
        let read = fabricsim::config::import_file(&path).unwrap();
        assert_eq!(read.dialect, junos.dialect, "{name}");
        assert_ne!(
            read.dialect,
            import_nxos("leaf.nxos", &leaf()).unwrap().dialect
        );
        assert_eq!(read.table(), junos.table(), "{name}");
    }
}

/// `random-detect` without `drop-probability` is not lost silently: it
/// is read as 0% at the maximum, and a note on its line says so.
#[test]
fn random_detect_without_a_probability_is_noted() {
    let text = leaf().replace("drop-probability 7 ", "");
    let read = import_nxos("leaf.nxos", &text).unwrap();
    let line = text
        .lines()
        .position(|l| l.contains("random-detect"))
        .unwrap()
        + 1;
    assert!(
        read.notes
            .iter()
            .any(|(l, n)| *l == line && n.contains("without drop-probability: read as 0%")),
        "{:?}",
        read.notes
    );
    let printed = read.to_toml();
    assert!(printed.contains("max_probability = 0.0"), "{printed}");
    let seed = import_nxos("leaf.nxos", &leaf()).unwrap();
    assert!(!seed
        .notes
        .iter()
        .any(|(_, n)| n.contains("drop-probability")));
}

/// A scenario with `[switch] config` naming the corpus file `name`,
/// prepared.
fn with_corpus(name: &str, extra: &str) -> fabricsim::scenario::Prepared {
    let file = format!("fuzz/corpus/nxos/{name}");
    fabricsim::scenario::prepare(
        &file.replace(name, "t.toml"),
        &format!("{SCENARIO}[switch]\nconfig = \"{name}\"\n{extra}"),
        &[],
    )
    .unwrap()
}

/// `random-detect threshold burst-optimized ecn` and `random-detect ecn`
/// (Nexus 9000 forms that name no thresholds) mark ECN from the switch's
/// own thresholds, which Cisco does not publish: the keys leave them out,
/// so they follow the DCQCN preset, and a note says so at the line.
#[test]
fn wred_without_thresholds_marks_ecn_from_the_preset() {
    for (name, form) in [
        ("pasted-flat.nxos", "threshold burst-optimized"),
        ("user-classes.nxos", "ecn"),
    ] {
        let text = std::fs::read_to_string(format!("fuzz/corpus/nxos/{name}")).unwrap();
        let read = import_nxos(name, &text).unwrap();
        let line = text
            .lines()
            .position(|l| l.contains("random-detect"))
            .unwrap()
            + 1;
        let class = &read.table()["qos"]["class"][0];
        assert_eq!(class["queue"].as_integer(), Some(3), "{name}");
        assert_eq!(class["ecn"].as_bool(), Some(true), "{name}");
        assert_eq!(class["wred"].as_table().map(|t| t.len()), Some(0), "{name}");
        assert!(
            read.notes.iter().any(|(l, n)| *l == line
                && n.contains(&format!(
                    "random-detect {form}: the switch's own thresholds"
                ))),
            "{name}: {:?}",
            read.notes
        );
        let p = with_corpus(name, "");
        let q = &p.scenario.qos.queues[3];
        let w = q.wred.as_ref().unwrap();
        assert!(q.ecn && q.lossless, "{name}");
        assert_eq!((w.min, w.max, w.max_probability), (None, None, None));
        // Marking at the preset's thresholds for a 200G port.
        let at = p.pfc.wred_at(fabricsim::units::Rate::gbps(200), 3).unwrap();
        assert_eq!((at.min, at.max), (800_000, 3_200_000), "{name}");
    }
    let e = nxos::parse_line(
        nxos::Block::PolicyClass(nxos::Kind::Queuing),
        "random-detect threshold fast ecn",
    )
    .unwrap_err();
    assert!(
        e.contains("burst-optimized or mesh-optimized") && e.contains("\"fast\""),
        "{e}"
    );
    let e = nxos::parse_line(
        nxos::Block::PolicyClass(nxos::Kind::Queuing),
        "random-detect max 3",
    )
    .unwrap_err();
    assert!(
        e.contains("minimum-threshold, threshold burst-optimized|mesh-optimized or ecn"),
        "{e}"
    );
}

/// Queuing and network-qos class maps of the user's name their queue by
/// `match qos-group`; an input queuing policy's `pause buffer-size B
/// pause-threshold X resume-threshold Y` is the no-drop queue's xOFF, xON
/// and headroom (B - X), and every port pauses at it.
#[test]
fn user_classes_name_queues_by_qos_group_and_pause_thresholds_reach_the_run() {
    let text = std::fs::read_to_string("fuzz/corpus/nxos/user-classes.nxos").unwrap();
    let read = import_nxos("user-classes.nxos", &text).unwrap();
    let printed = read.to_toml();
    for want in [
        "bandwidth_percent = 70  # line 24",
        "mtu = 9216  # line 20",
        "lossless = true  # line 21",
        "xoff = \"204800B\"  # line 30",
        "xon = \"184320B\"  # line 30",
        "headroom = \"204800B\"  # line 30",
    ] {
        assert!(printed.contains(want), "{want}\n{printed}");
    }
    assert!(read.not_modelled.is_empty(), "{:?}", read.not_modelled);
    let p = with_corpus("user-classes.nxos", "");
    let port = p.topology.switches[0].ports[0];
    let pfc = p.pfc.get(port, 3).unwrap();
    assert_eq!(
        (pfc.xoff, pfc.xon, pfc.headroom),
        (204_800, 184_320, 204_800)
    );
    // Without the input policy, the thresholds are the preset's.
    let without = text.replace("  service-policy type queuing input INGRESS\n", "");
    let read = import_nxos("x.nxos", &without).unwrap();
    assert!(!read.to_toml().contains("xoff"));
    // A class map of the wrong kind, or matching nothing, is named.
    let bad = text.replace(
        "class-map type queuing Q_ROCE\n  match qos-group 3\n",
        "class-map type queuing Q_ROCE\n",
    );
    let e = import_nxos("x.nxos", &bad).unwrap_err().to_string();
    assert!(
        e.contains("class Q_ROCE (class-map at line") && e.contains("matches no qos-group"),
        "{e}"
    );
    let bad = text.replace(
        "class-map type network-qos NQ_ROCE\n  match qos-group 3",
        "class-map type network-qos NQ_ROCE\n  match dscp 24",
    );
    let e = import_nxos("x.nxos", &bad).unwrap_err().to_string();
    assert!(
        e.contains("line 10") && e.contains("match qos-group N"),
        "{e}"
    );
    let bad = text.replace("pause-threshold 204800", "pause-threshold 504800");
    let e = import_nxos("x.nxos", &bad).unwrap_err().to_string();
    assert!(
        e.contains("line 30") && e.contains("not above the buffer size"),
        "{e}"
    );
}

/// `dlb-interface all` puts DLB on every port of the switch;
/// `mode policy-driven per-packet` sprays, with a note that the selecting
/// policy is not read.
#[test]
fn dlb_on_every_interface_and_policy_driven_mode() {
    let text = std::fs::read_to_string("fuzz/corpus/nxos/dlb-all.nxos").unwrap();
    let read = import_nxos("dlb-all.nxos", &text).unwrap();
    assert_eq!(read.dlb_ports, [(6, "*".to_string())]);
    let balance = &read.table()["switch"]["balance"];
    assert_eq!(balance["dlb_mode"].as_str(), Some("per-packet"));
    assert_eq!(balance["flowlet_timeout"].as_str(), Some("500us"));
    assert!(read
        .notes
        .iter()
        .any(|(l, n)| *l == 7 && n.contains("policy-driven per-packet")));
    let p = fabricsim::scenario::prepare(
        "fuzz/corpus/nxos/t.toml",
        &format!("{SCENARIO}[[switch.config]]\nfile = \"dlb-all.nxos\"\ntier = \"spine\"\n"),
        &[],
    )
    .unwrap();
    let configs = p.scenario.configs.as_ref().unwrap();
    let dlb = configs.dlb_ports();
    for s in &p.topology.switches {
        for q in &s.ports {
            assert_eq!(dlb[q.idx()], s.tier == 1, "{}", s.name);
        }
    }
}

/// `bandwidth remaining percent 0` on every weighted queue is said, not
/// run silently as an equal split.
#[test]
fn every_share_zero_is_noted() {
    let text = leaf().replace(
        "bandwidth remaining percent 50",
        "bandwidth remaining percent 0",
    );
    let read = import_nxos("leaf.nxos", &text).unwrap();
    assert!(
        read.notes
            .iter()
            .any(|(l, n)| *l == 25
                && n.contains("every class's bandwidth share is 0% (lines 25, 32)")),
        "{:?}",
        read.notes
    );
    let seed = import_nxos("leaf.nxos", &leaf()).unwrap();
    assert!(!seed.notes.iter().any(|(_, n)| n.contains("share is 0%")));
}

/// Juniper's JVD binds the classifier per logical unit on `all`
/// interfaces and the notification profile through an applied group:
/// RoCEv2 (DSCP 26) lands in its lossless queue and every port pauses.
/// Without the per-unit binding every packet would be in queue 0; without
/// the group, every port would be lossy.
#[test]
fn junos_per_unit_bindings_and_applied_groups_classify_roce_as_lossless() {
    const FILE: &str = "fuzz/corpus/junos/jvd-per-unit.junos";
    let read = fabricsim::config::import_file(std::path::Path::new(FILE)).unwrap();
    assert!(read.not_modelled.is_empty(), "{:?}", read.not_modelled);
    let classes = read.table()["qos"]["class"].as_array().unwrap().clone();
    let roce = classes
        .iter()
        .find(|c| c["name"].as_str() == Some("NO-LOSS"))
        .unwrap();
    assert_eq!(roce["dscp"].as_array().unwrap()[0].as_integer(), Some(26));
    assert_eq!(roce["queue"].as_integer(), Some(3));
    assert_eq!(roce["lossless"].as_bool(), Some(true));
    assert_eq!(read.interfaces.len(), 1);
    assert_eq!(read.interfaces[0].names, ["et-*"]);
    assert_eq!(
        read.interfaces[0].classification,
        Some((19, "dscp-ai".to_string()))
    );
    let p = fabricsim::scenario::prepare(
        "fuzz/corpus/junos/t.toml",
        &format!("{SCENARIO}[switch]\nconfig = \"jvd-per-unit.junos\"\n"),
        &[],
    )
    .unwrap();
    let configs = p.scenario.configs.as_ref().unwrap();
    assert!(configs.pfc_off_ports().next().is_none());
    let q = &p.scenario.qos.queues[3];
    assert!(q.lossless && q.ecn);
    // The same in braces, with the group's interface as <*>; and a group
    // no level applies configures nothing (listed, not read).
    let braces = "groups { g { class-of-service { interfaces { <*> { congestion-notification-profile c; } } } } }\napply-groups g;\nclass-of-service {\n forwarding-classes { class R queue-num 3 no-loss; }\n classifiers { dscp d { forwarding-class R { loss-priority low code-points 011010; } } }\n congestion-notification-profile { c { input { dscp { code-point 011010 { pfc; } } } } }\n interfaces { all { unit 0 { classifiers { dscp d; } } } }\n}\ngroups { unused { class-of-service { interfaces { <*> { scheduler-map nothing; } } } } }\n";
    let read = fabricsim::config::junos::import("b.junos", braces).unwrap();
    assert_eq!(read.interfaces[0].names, ["*"]);
    assert_eq!(
        read.interfaces[0].classification,
        Some((7, "d".to_string()))
    );
    assert_eq!(read.not_modelled.len(), 1, "{:?}", read.not_modelled);
    assert!(read.not_modelled[0]
        .1
        .contains("its group is applied nowhere"));
    let e = fabricsim::config::junos::import("b.junos", "apply-groups nope;\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 1") && e.contains("no group nope is defined"),
        "{e}"
    );
}

/// The audit sets each threshold against the buffer it lives in, and a
/// leaf and a spine that disagree on a class's MTU are refused with both
/// values and both lines.
#[test]
fn thresholds_above_the_buffer_and_mtu_mismatches_name_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    let leaf = leaf();
    // A 40 MB WRED maximum on a 16 MB buffer.
    std::fs::write(
        dir.path().join("big.nxos"),
        leaf.replace(
            "maximum-threshold 3000 kbytes",
            "maximum-threshold 40 mbytes",
        ),
    )
    .unwrap();
    let file = dir.path().join("t.toml");
    let p = fabricsim::scenario::prepare(
        file.to_str().unwrap(),
        &format!("{SCENARIO}[switch]\nconfig = \"big.nxos\"\nbuffer = \"16MB\"\n"),
        &[],
    )
    .unwrap();
    let audit = p.audit().unwrap();
    let line = audit
        .lines
        .iter()
        .find(|l| l.starts_with("thresholds of \"ROCEv2\""))
        .unwrap();
    assert!(
        line.contains("holds at 128 of 128")
            && line.contains("fit the 16.00 MB buffer at 0 of them"),
        "{line}"
    );
    let finding = audit
        .findings
        .iter()
        .find(|f| f.message.contains("WRED max 40.00 MB"))
        .unwrap();
    assert!(
        finding.message.contains("big.nxos line 26")
            && finding.message.contains("128 ports in all"),
        "{}",
        finding.message
    );
    // The checks every scenario gets say it too, by key.
    assert!(
        p.scenario
            .warnings
            .iter()
            .any(|w| w.key.contains("wred")
                && w.message.contains("above the most the queue can hold"))
    );
    // The seed's fits.
    let seed = fabricsim::scenario::prepare(
        "examples/configs/t.toml",
        &format!("{SCENARIO}[switch]\nconfig = \"leaf.nxos\"\n"),
        &[],
    )
    .unwrap();
    assert!(!seed
        .scenario
        .warnings
        .iter()
        .any(|w| w.message.contains("above the most the queue can hold")));

    std::fs::write(dir.path().join("leaf.nxos"), &leaf).unwrap();
    std::fs::write(
        dir.path().join("spine.nxos"),
        leaf.replace("mtu 9216", "mtu 4200"),
    )
    .unwrap();
    let e = fabricsim::scenario::prepare(
        file.to_str().unwrap(),
        &format!("{SCENARIO}[[switch.config]]\nfile = \"leaf.nxos\"\ntier = \"leaf\"\n[[switch.config]]\nfile = \"spine.nxos\"\ntier = \"spine\"\n"),
        &[],
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("differ in qos.class[0].mtu (class \"ROCEv2\"): 9216 (")
            && e.contains("leaf.nxos line 38) and 4200 (")
            && e.contains("spine.nxos line 38)"),
        "{e}"
    );
}

/// `pause pfc-cos 4` in the class of queue 3 makes the switches pause
/// priority 4. Between switches, configured alike, that still stops
/// queue 3; but the NICs give RoCEv2 (DSCP 24) priority 3 and do not stop
/// for a pause of 4: in a seven-to-one incast under one leaf (no DCQCN, so
/// that PFC has the work) the leaf's headroom overflows and lossless
/// packets are lost, as on a real fabric. The NICs giving DSCP 24
/// priority 4 repairs it; validate says why.
#[test]
fn a_pfc_priority_other_than_the_nics_is_simulated_as_the_mistake_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = r#"
name = "seven to one under a leaf"
[topology]
kind = "rail-optimized"
hosts = 8
gpus_per_host = 1
nic_speed = "400G"
hosts_per_leaf = 8
spines = 1
uplink_speed = "800G"
uplinks_per_spine = 1
[switch]
buffer = "32MB"
[[switch.config]]
file = "spine.nxos"
tier = "spine"
[[switch.config]]
file = "leaf.nxos"
tier = "leaf"
up = "Ethernet1/49"
[transport]
mtu = 4096
congestion_control = "none"
rto = "1ms"
[[workload]]
kind = "incast"
dst = 0
srcs = [1, 2, 3, 4, 5, 6, 7]
bytes = "4MB"
[host]
pcie = "128GB/s"
"#;
    let file = dir.path().join("incast.toml");
    std::fs::write(&file, scenario).unwrap();
    let file = file.to_str().unwrap();
    for name in ["leaf.nxos", "spine.nxos"] {
        let text = std::fs::read_to_string(format!("examples/configs/{name}")).unwrap();
        std::fs::write(dir.path().join(name), &text).unwrap();
        std::fs::write(
            dir.path().join(format!("wrong-{name}")),
            text.replace("pause pfc-cos 3", "pause pfc-cos 4"),
        )
        .unwrap();
    }
    let wrong = [
        "switch.config[0].file=\"wrong-spine.nxos\"",
        "switch.config[1].file=\"wrong-leaf.nxos\"",
    ];
    let read = import_nxos(
        "wrong-leaf.nxos",
        &std::fs::read_to_string(dir.path().join("wrong-leaf.nxos")).unwrap(),
    )
    .unwrap();
    assert!(read.to_toml().contains("pfc_priority = 4  # line 39"));
    let meant = run_summary(file, &[]);
    assert_eq!(meant["lossless_drops"], 0);
    assert!(meant["pfc_pause_frames"].as_u64().unwrap() > 0);
    let mistake = run_summary(file, &wrong);
    assert!(
        mistake["lossless_drops"].as_u64().unwrap() > 100,
        "{}",
        mistake["lossless_drops"]
    );
    let mut repaired = wrong.to_vec();
    repaired.push("qos.nic_priority.24=4");
    let repaired = run_summary(file, &repaired);
    assert_eq!(repaired["lossless_drops"], 0);
    assert_eq!(repaired["ecn_marks"], meant["ecn_marks"]);
    // validate says why, with the key to set.
    let mut sets: Vec<String> = wrong.iter().map(|s| s.to_string()).collect();
    let p = fabricsim::scenario::prepare(file, scenario, &sets).unwrap();
    assert!(p
        .scenario
        .warnings
        .iter()
        .any(|w| w.key == "qos.nic_priority"
            && w.message
                .contains("priority 3, but its class \"ROCEv2\" (queue 3) pauses priority 4")));
    sets.push("qos.nic_priority.24=4".into());
    let p = fabricsim::scenario::prepare(file, scenario, &sets).unwrap();
    assert!(!p
        .scenario
        .warnings
        .iter()
        .any(|w| w.key == "qos.nic_priority"));
}

/// The audit states each lossless class's PFC priority against the one
/// the NICs give its data, naming the configuration line.
#[test]
fn the_audit_checks_pfc_priorities_against_the_nics() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("leaf.nxos"),
        leaf().replace("pause pfc-cos 3", "pause pfc-cos 4"),
    )
    .unwrap();
    let file = dir.path().join("t.toml");
    let p = fabricsim::scenario::prepare(
        file.to_str().unwrap(),
        &format!("{SCENARIO}[switch]\nconfig = \"leaf.nxos\"\n"),
        &[],
    )
    .unwrap();
    let audit = p.audit().unwrap();
    assert!(
        audit.lines.iter().any(
            |l| l.starts_with("PFC priority: \"ROCEv2\" pauses priority 4 (")
                && l.contains("leaf.nxos line 39); the NICs give its data priority 3")
        ),
        "{:?}",
        audit.lines
    );
    assert!(audit
        .findings
        .iter()
        .any(|f| f.message.contains("do not stop for its pauses")));
    let seed = fabricsim::scenario::prepare(
        "examples/configs/t.toml",
        &format!("{SCENARIO}[switch]\nconfig = \"leaf.nxos\"\n"),
        &[],
    )
    .unwrap();
    assert!(!seed
        .scenario
        .warnings
        .iter()
        .any(|w| w.message.contains("do not stop for its pauses")));
}

/// `config export` writes what the scenario's switches do in the
/// language of each; importing that gives back the keys the scenario
/// had: the identity on every example configuration (and the JVD-style
/// corpus file), run through the command as a user runs it.
#[test]
fn export_then_import_is_the_identity_on_every_example() {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir("examples/configs")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "nxos" || e == "junos"))
        .collect();
    files.sort();
    files.push("fuzz/corpus/junos/jvd-per-unit.junos".into());
    assert!(files.len() >= 8, "{files:?}");
    for f in files {
        let dir = tempfile::tempdir().unwrap();
        let name = f.file_name().unwrap().to_str().unwrap();
        std::fs::copy(&f, dir.path().join(name)).unwrap();
        let scenario = dir.path().join("t.toml");
        std::fs::write(
            &scenario,
            format!("{SCENARIO}[switch]\nconfig = \"{name}\"\n"),
        )
        .unwrap();
        let os = if name.ends_with(".junos") {
            "junos"
        } else {
            "nxos"
        };
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_fabricsim"))
            .args(["config", "export", "--os", os, scenario.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let written = String::from_utf8(out.stdout).unwrap();
        let back = dir.path().join(format!("back.{os}"));
        std::fs::write(&back, &written).unwrap();
        let again = fabricsim::config::import_file(&back)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{written}"));
        let first = fabricsim::config::import_file(&f).unwrap();
        assert_eq!(again.table(), first.table(), "{name}\n{written}");
        assert!(
            again.not_modelled.is_empty(),
            "{name}: {:?}",
            again.not_modelled
        );
        assert!(!written.contains("Not exported"), "{name}\n{written}");
    }
}

/// What a language cannot say is listed at the top, not dropped: an
/// NX-OS watchdog of 200 us, a hash on QP numbers; thresholds the
/// scenario leaves to the preset are written as the preset gives them.
#[test]
fn export_lists_what_the_language_cannot_say() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("t.toml");
    std::fs::write(
        &scenario,
        format!("{SCENARIO}[pfc.watchdog]\ninterval = \"200us\"\n[switch.ecmp]\nfields = [\"src_ip\", \"dst_ip\", \"dst_qp\"]\n"),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fabricsim"))
        .args([
            "config",
            "export",
            "--os",
            "nxos",
            scenario.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("! Not exported: the PFC watchdog (200.000 us interval"),
        "{text}"
    );
    assert!(text.contains("! Not exported: the hash fields"), "{text}");
    // The default classes, with the preset's thresholds at 400G.
    assert!(
        text.contains("random-detect minimum-threshold 1600 kbytes maximum-threshold 6400 kbytes drop-probability 20 weight 0 ecn"),
        "{text}"
    );
    let e = std::process::Command::new(env!("CARGO_BIN_EXE_fabricsim"))
        .args([
            "config",
            "export",
            "--os",
            "eos",
            scenario.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!e.status.success());
    assert!(String::from_utf8_lossy(&e.stderr).contains("expected nxos or junos"));
}

/// Junos's `shared-buffer` partitions become `switch.partitions` (the
/// smaller of each kind's ingress and egress shares), and a run holds
/// each kind of class to its partition: a lossy seven-to-one incast that
/// fills 24 MB of a 32 MB buffer holds under 10% of it with a 10% lossy
/// partition.
#[test]
fn shared_buffer_partitions_cap_each_kind_of_class() {
    let read = fabricsim::config::import_file(std::path::Path::new(
        "fuzz/corpus/junos/jvd-per-unit.junos",
    ))
    .unwrap();
    let parts = &read.table()["switch"]["partitions"];
    assert_eq!(parts["lossless"].as_str(), Some("66%"));
    assert_eq!(parts["lossy"].as_str(), Some("10%"));
    assert!(read
        .notes
        .iter()
        .any(|(_, n)| n.contains("lossless-headroom partition")));
    let p = fabricsim::scenario::prepare(
        "fuzz/corpus/junos/t.toml",
        &format!("{SCENARIO}[switch]\nconfig = \"jvd-per-unit.junos\"\nbuffer = \"32MB\"\n"),
        &[],
    )
    .unwrap();
    assert_eq!(
        p.scenario.switch.partitions,
        (Some(21_120_000), Some(3_200_000))
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lossy.toml");
    std::fs::write(
        &file,
        r#"
name = "seven to one, lossy"
[topology]
kind = "rail-optimized"
hosts = 8
gpus_per_host = 1
nic_speed = "400G"
hosts_per_leaf = 8
spines = 1
uplink_speed = "800G"
uplinks_per_spine = 1
[switch]
buffer = "32MB"
[pfc]
enabled = false
[transport]
mtu = 4096
congestion_control = "none"
rto = "1ms"
[[workload]]
kind = "incast"
dst = 0
srcs = [1, 2, 3, 4, 5, 6, 7]
bytes = "4MB"
[host]
pcie = "128GB/s"
"#,
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let whole = run_summary(file, &[]);
    let capped = run_summary(file, &["switch.partitions={lossy=\"10%\"}"]);
    let peak = |s: &serde_json::Value| s["max_switch_buffer_bytes"].as_u64().unwrap();
    assert!(peak(&whole) > 20_000_000, "{}", peak(&whole));
    assert!(peak(&capped) <= 3_200_000, "{}", peak(&capped));
    assert!(capped["drops"].as_u64().unwrap() > whole["drops"].as_u64().unwrap());
    for (set, want) in [
        (
            "switch.partitions={lossless=\"80%\",lossy=\"30%\"}",
            "more than switch.buffer",
        ),
        (
            "switch.partitions={shared=\"10%\"}",
            "expected lossless or lossy",
        ),
        (
            "switch.partitions={lossy=\"120%\"}",
            "percentage of switch.buffer",
        ),
    ] {
        let e = fabricsim::scenario::prepare(
            file,
            &std::fs::read_to_string(file).unwrap(),
            &[set.into()],
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains("switch.partitions") && e.contains(want),
            "{set}: {e}"
        );
    }
}

/// The guide's "Not modelled" table is true: each form it lists is read,
/// listed as not modelled with its line, and refused by --strict.
#[test]
fn the_forms_the_guide_lists_as_not_modelled_are_listed_so() {
    let guide = std::fs::read_to_string("docs/src/howto/switch-configs.md").unwrap();
    let table = guide
        .split("**Not modelled.**")
        .nth(1)
        .unwrap()
        .split("\n\n")
        .find(|p| p.starts_with("| line"))
        .unwrap();
    let nxos_base = leaf();
    let mut checked = 0;
    for row in table.lines().skip(2) {
        let cell = row.split('|').nth(1).unwrap().trim();
        let (dialect, forms) = cell.split_once(' ').unwrap();
        for form in forms.split(", ") {
            let form = form.trim_matches('`').replace(" ...", "");
            let (read, line) = if dialect == "NX-OS" {
                // A queuing or qos class's command goes in such a class.
                let text = match form.as_str() {
                    "afd queue-desired" | "queue-limit" => nxos_base.replace(
                        "    bandwidth remaining percent 50\n    random-detect",
                        &format!("    bandwidth remaining percent 50\n    {form} 150 kbytes\n    random-detect"),
                    ),
                    "set dscp" | "set cos" | "police" => nxos_base.replace(
                        "    set qos-group 3\n",
                        &format!("    set qos-group 3\n    {form} 5\n"),
                    ),
                    _ => format!("{nxos_base}{form} ing-racl 0\n"),
                };
                let line = text
                    .lines()
                    .position(|l| l.trim().starts_with(&form))
                    .unwrap()
                    + 1;
                (import_nxos("x.nxos", &text).unwrap(), line)
            } else {
                let junos = std::fs::read_to_string("examples/configs/spine.junos").unwrap();
                let stmt = if form.starts_with("forwarding-options") {
                    format!("set {form} ipv4-source-address\n")
                } else {
                    format!("set class-of-service {form} x y\n")
                };
                let text = format!("{junos}{stmt}");
                let line = text.lines().count();
                (
                    fabricsim::config::junos::import("x.junos", &text).unwrap(),
                    line,
                )
            };
            assert!(
                read.not_modelled.iter().any(|(l, _)| *l == line),
                "{dialect} {form}: {:?}",
                read.not_modelled
            );
            assert!(read.strict().is_err(), "{dialect} {form}");
            checked += 1;
        }
    }
    assert_eq!(checked, 10);
}

/// `pfc_priority` is a priority from 0 to 7 and belongs to a lossless
/// class; either mistake names the key.
#[test]
fn a_pfc_priority_out_of_range_or_on_a_lossy_class_is_refused() {
    let class = "[[qos.class]]\nname = \"r\"\ndscp = [24]\nqueue = 3\nlossless = true\n";
    for (extra, want) in [
        (
            "pfc_priority = 8\n",
            "got 8, expected a priority from 0 to 7",
        ),
        (
            "pfc_priority = 4\nlossless = false\n",
            "is only used by a lossless class",
        ),
    ] {
        let text = format!(
            "{SCENARIO}{}{extra}",
            class.replace(
                "lossless = true\n",
                if extra.contains("lossless") {
                    ""
                } else {
                    "lossless = true\n"
                }
            )
        );
        let e = fabricsim::scenario::prepare("t.toml", &text, &[])
            .err()
            .unwrap_or_else(|| panic!("{extra} was accepted"))
            .to_string();
        assert!(
            e.contains("qos.class[0].pfc_priority") && e.contains(want),
            "{extra}: {e}"
        );
    }
    let ok = format!("{SCENARIO}{class}pfc_priority = 4\n");
    let p = fabricsim::scenario::prepare("t.toml", &ok, &[]).unwrap();
    assert_eq!(p.scenario.qos.queues[3].pfc_priority, Some(4));
}
