//! Packet captures decoded by tshark, as a user would open them in
//! Wireshark. tshark is installed by `.ci/setup`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fabricsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fabricsim"))
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fabricsim-capture-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn incast() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/lossless/incast.toml")
}

/// Runs the incast example with these capture arguments; the output folder.
fn capture(name: &str, args: &[&str]) -> PathBuf {
    let out = temp(name);
    let o = fabricsim()
        .arg("run")
        .arg(incast())
        .args(["--no-plots", "--no-html", "--quiet", "--out"])
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// tshark's fields, one map per frame.
fn tshark(file: &Path, filter: &str, fields: &[&str]) -> Vec<HashMap<String, String>> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-o", "ip.check_checksum:TRUE", "-n", "-r"])
        .arg(file)
        .args(["-Y", filter, "-T", "fields", "-E", "separator=\t"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let o = cmd
        .output()
        .expect("tshark is needed for this test: run .ci/setup (installs Debian's tshark)");
    assert!(
        o.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            fields
                .iter()
                .zip(l.split('\t'))
                .map(|(f, v)| (f.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn num(v: &str) -> u64 {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => v.parse().unwrap_or_else(|_| panic!("not a number: {v:?}")),
    }
}

/// The incast's first 30 us on every link: RoCEv2 data with RETH on the
/// first packet of each message, ACKs with AETH, CE marks, CNPs and PFC
/// pauses, with correct checksums, ICRCs and nanosecond times.
#[test]
fn tshark_decodes_every_header_of_a_capture() {
    let out = capture(
        "all",
        &["--capture", "all", "--capture-window", "0us..30us"],
    );
    let file = out.join("capture.pcapng");
    assert!(file.exists());
    let fields = [
        "frame.time_relative",
        "frame.interface_name",
        "frame.len",
        "ip.src",
        "ip.dst",
        "ip.dsfield.dscp",
        "ip.dsfield.ecn",
        "ip.checksum.status",
        "udp.dstport",
        "infiniband.bth.opcode",
        "infiniband.bth.destqp",
        "infiniband.bth.psn",
        "infiniband.reth.dmalen",
        "infiniband.aeth.syndrome",
        "infiniband.invariant.crc",
    ];
    let frames = tshark(&file, "ip", &fields);
    assert!(frames.len() > 1000, "{} frames", frames.len());
    let raw = read_pcapng(&file);
    assert_eq!(
        raw.len(),
        frames.len() + tshark(&file, "macc", &["frame.len"]).len()
    );
    let mut next_psn: HashMap<u64, u64> = HashMap::new();
    let (mut ce, mut cnps, mut acks, mut firsts) = (0, 0, 0, 0);
    for f in &frames {
        assert_eq!(f["ip.checksum.status"], "1", "IPv4 header checksum is good");
        assert_eq!(f["udp.dstport"], "4791");
        assert!(f["ip.dst"].starts_with("10.0.0."));
        let opcode = num(&f["infiniband.bth.opcode"]);
        let qp = num(&f["infiniband.bth.destqp"]);
        // Six senders, QPs 0 to 5 on the wire as 256 to 261.
        assert!((0x100..0x106).contains(&qp), "QP {qp:#x}");
        match opcode {
            // RDMA Write First / Middle: PSNs in order on the first hop.
            6 | 7 => {
                assert_eq!(f["ip.dsfield.dscp"], "24");
                assert!(f["ip.dsfield.ecn"] == "2" || f["ip.dsfield.ecn"] == "3");
                ce += (f["ip.dsfield.ecn"] == "3") as u32;
                let psn = num(&f["infiniband.bth.psn"]);
                if f["frame.interface_name"].starts_with("host") {
                    let want = next_psn.entry(qp).or_insert(0);
                    assert_eq!(psn, *want, "QP {qp:#x} sends in order");
                    *want += 1;
                }
                if opcode == 6 {
                    // Seen on each of the four hops.
                    firsts += 1;
                    assert_eq!(psn, 0);
                    assert_eq!(
                        f["infiniband.reth.dmalen"], "16000000",
                        "RETH carries the message length"
                    );
                    assert_eq!(f["frame.len"], "4170");
                } else {
                    assert_eq!(f["infiniband.reth.dmalen"], "");
                    assert_eq!(f["frame.len"], "4154");
                }
            }
            // Acknowledge: AETH syndrome ACK with no credit limit.
            17 => {
                acks += 1;
                assert_eq!(f["infiniband.aeth.syndrome"], "31");
                assert_eq!(f["ip.src"], "10.0.0.1", "the receiver acknowledges");
            }
            // CNP: the congestion notification to the sender's QP.
            129 => {
                cnps += 1;
                assert_eq!(f["ip.dsfield.dscp"], "48");
                assert_eq!(f["ip.src"], "10.0.0.1");
            }
            other => panic!("unexpected opcode {other}"),
        }
    }
    assert_eq!(
        firsts,
        6 * 4,
        "one RDMA Write First per sender, on four hops"
    );
    assert!(
        ce > 0 && cnps > 0 && acks > 0,
        "CE {ce}, CNPs {cnps}, ACKs {acks}"
    );
    // The ICRC tshark reads is the CRC of the bytes before it, computed
    // as soft-RoCE does (see `wire::encode`).
    let mut checked = 0;
    for (f, (_, frame)) in frames
        .iter()
        .zip(raw.iter().filter(|r| r.1[12..14] == [8, 0]))
    {
        let n = frame.len();
        let ip_len = u16::from_be_bytes([frame[16], frame[17]]) as usize;
        let icrc = fabricsim::wire::encode::icrc(&frame[14..14 + ip_len - 4]);
        assert_eq!(frame[14 + ip_len - 4..14 + ip_len], icrc.to_le_bytes());
        // tshark shows the four bytes read as a big-endian number. It does
        // not know the CNP opcode, so shows its 16 reserved bytes and ICRC
        // as vendor data.
        if f["infiniband.bth.opcode"] != "129" {
            assert_eq!(
                num(&f["infiniband.invariant.crc"]),
                icrc.swap_bytes() as u64
            );
        }
        assert!(n >= 60);
        checked += 1;
    }
    assert_eq!(checked, frames.len());
    // Nanosecond timestamps: a sender's back-to-back frames are one
    // serialization apart (4190 B with preamble and gap at 400G: 83.8 ns).
    let times: Vec<f64> = frames
        .iter()
        .filter(|f| f["frame.interface_name"] == "host2/nic0->leaf1")
        .map(|f| f["frame.time_relative"].parse().unwrap())
        .collect();
    let gap = ((times[2] - times[1]) * 1e9).round() as u64;
    assert!((83..=84).contains(&gap), "{gap} ns");
    assert!(times.iter().all(|&t| t < 30e-6));
    // PFC frames: MAC control, priority 3 enabled, a pause time.
    let pfc = tshark(
        &file,
        "macc",
        &[
            "eth.dst",
            "eth.type",
            "macc.opcode",
            "macc.cbfc.enbv",
            "macc.cbfc.pause_time.c3",
            "macc.cbfc.pause_time.c0",
        ],
    );
    assert!(!pfc.is_empty(), "the incast pauses within 30 us");
    for f in &pfc {
        assert_eq!(f["eth.dst"], "01:80:c2:00:00:01");
        assert_eq!(f["eth.type"], "0x8808");
        assert_eq!(f["macc.opcode"], "0x0101");
        assert_eq!(f["macc.cbfc.enbv"], "0x0008");
        assert_eq!(f["macc.cbfc.pause_time.c3"], "65535");
        assert_eq!(f["macc.cbfc.pause_time.c0"], "0");
    }
    // Nothing tshark finds malformed.
    assert!(tshark(
        &file,
        "_ws.malformed || _ws.expert.severity >= \"error\"",
        &["frame.number"]
    )
    .is_empty());
    let _ = std::fs::remove_dir_all(out);
}

/// Selections: one direction of one link, or one transfer's frames on
/// every link, within a window; and the frame limit.
#[test]
fn captures_take_only_what_was_selected() {
    let out = capture(
        "link",
        &[
            "--capture",
            "link=leaf0->host0/nic0",
            "--capture-window",
            "5us..20us",
        ],
    );
    let file = out.join("capture.pcapng");
    let frames = tshark(&file, "", &["frame.interface_name", "frame.time_relative"]);
    assert!(!frames.is_empty());
    for f in &frames {
        assert_eq!(f["frame.interface_name"], "leaf0->host0/nic0");
        let t: f64 = f["frame.time_relative"].parse().unwrap();
        assert!(t < 15e-6, "relative to the first frame, within the window");
    }
    let _ = std::fs::remove_dir_all(out);

    let out = capture("flow", &["--capture", "flow=2", "--capture-limit", "500"]);
    let file = out.join("capture.pcapng");
    let frames = tshark(&file, "", &["infiniband.bth.destqp", "eth.type"]);
    assert_eq!(frames.len(), 500, "the limit");
    for f in &frames {
        assert_eq!(f["eth.type"], "0x0800", "no PFC frame in a flow capture");
        assert_eq!(f["infiniband.bth.destqp"], "0x000102");
    }
    let _ = std::fs::remove_dir_all(out);
}

/// With `[qos] vlan_tagging`, RoCEv2 frames carry an 802.1Q tag with the
/// NIC's priority for their DSCP and the VLAN ID; PFC frames stay untagged; frames are
/// 4 bytes longer and still decode to the end.
#[test]
fn tagged_frames_carry_priority_and_vlan() {
    let out = capture(
        "vlan",
        &[
            "--set",
            "qos.vlan_tagging=true",
            "--set",
            "qos.vlan_id=42",
            "--capture",
            "all",
            "--capture-window",
            "0us..30us",
        ],
    );
    let file = out.join("capture.pcapng");
    let fields = [
        "eth.type",
        "vlan.id",
        "vlan.priority",
        "vlan.etype",
        "frame.len",
        "infiniband.bth.opcode",
        "infiniband.bth.psn",
        "ip.dsfield.dscp",
    ];
    let frames = tshark(&file, "", &fields);
    let (mut data, mut cnps, mut pfc) = (0, 0, 0);
    for f in &frames {
        match f["eth.type"].as_str() {
            "0x8100" => {
                assert_eq!(f["vlan.id"], "42");
                assert_eq!(f["vlan.etype"], "0x0800");
                // The NICs stamp a DSCP's top three bits: DSCP 24 (data,
                // ACKs) is priority 3, DSCP 48 (CNPs) priority 6, though
                // the switches queue CNPs in queue 7.
                let want = if f["ip.dsfield.dscp"] == "48" {
                    "6"
                } else {
                    "3"
                };
                assert_eq!(f["vlan.priority"], want, "{f:?}");
                match f["infiniband.bth.opcode"].as_str() {
                    "6" => {
                        // Write First of 4096 B: 4170 B untagged without
                        // the FCS, and the 4 B tag.
                        assert_eq!(f["frame.len"], "4174");
                        data += 1;
                    }
                    "129" => cnps += 1,
                    _ => {}
                }
            }
            "0x8808" => {
                assert_eq!(f["vlan.id"], "");
                pfc += 1;
            }
            other => panic!("unexpected ethertype {other}"),
        }
    }
    assert!(data > 0 && cnps > 0 && pfc > 0, "{data} {cnps} {pfc}");
    let _ = std::fs::remove_dir_all(out);
}

/// A capture only reads the run: every result file is the same with and
/// without one.
#[test]
fn capturing_does_not_change_the_results() {
    let plain = capture("unchanged-plain", &[]);
    let all = capture("unchanged-all", &["--capture", "all"]);
    assert!(all.join("capture.pcapng").exists());
    assert!(!plain.join("capture.pcapng").exists());
    for name in [
        "summary.json",
        "flows.csv",
        "links.csv",
        "queues.csv",
        "pfc.csv",
    ] {
        let a = std::fs::read(plain.join(name)).unwrap();
        let b = std::fs::read(all.join(name)).unwrap();
        assert!(a == b, "{name} differs with --capture all");
    }
    let _ = std::fs::remove_dir_all(plain);
    let _ = std::fs::remove_dir_all(all);
}

#[test]
fn a_bad_capture_selection_is_refused_before_anything_runs() {
    for (args, want) in [
        (
            vec!["--capture", "link=leaf9->nowhere"],
            "--capture link=leaf9->nowhere: no link or device",
        ),
        (
            vec!["--capture", "flow=99"],
            "--capture flow=99: there are 6 transfers",
        ),
        (
            vec!["--capture", "packets"],
            "--capture packets: expected `all`",
        ),
        (
            vec!["--capture", "all", "--capture-window", "20us..10us"],
            "ends before it starts",
        ),
        (
            vec!["--capture", "all", "--capture-window", "soon"],
            "expected FROM..TO",
        ),
    ] {
        let out = temp("bad");
        let o = fabricsim()
            .arg("run")
            .arg(incast())
            .arg("--out")
            .arg(&out)
            .args(&args)
            .output()
            .unwrap();
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
        let left: Vec<_> = std::fs::read_dir(&out)
            .map(|d| d.flatten().collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{args:?} left {left:?}");
    }
}

/// Every enhanced packet block's interface and frame bytes.
fn read_pcapng(file: &Path) -> Vec<(u32, Vec<u8>)> {
    let b = std::fs::read(file).unwrap();
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let (kind, len) = (u32_at(i), u32_at(i + 4) as usize);
        assert_eq!(
            u32_at(i + len - 4) as usize,
            len,
            "block at {i} ends with its length"
        );
        if kind == 6 {
            let caplen = u32_at(i + 20) as usize;
            out.push((u32_at(i + 8), b[i + 28..i + 28 + caplen].to_vec()));
        }
        i += len;
    }
    out
}

/// A capture that cannot be written (here the file-size limit, as a full
/// disk would) costs none of the other results: they are written, the
/// error names the capture and says where they are, and no partial
/// capture is left behind.
#[test]
fn a_capture_that_cannot_be_written_keeps_the_other_results() {
    let out = temp("too-large");
    // 1 MiB per file (bash counts 1,024-byte blocks); SIGXFSZ ignored so
    // that a write past it fails instead of killing the process.
    let script = "trap '' XFSZ; ulimit -f 1024; exec \"$0\" run \"$1\" --capture all --no-plots --no-html --quiet --out \"$2\"";
    let o = Command::new("bash")
        .args(["-c", script])
        .arg(env!("CARGO_BIN_EXE_fabricsim"))
        .arg(incast())
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot write the capture"), "{err}");
    assert!(err.contains("the other results are written in"), "{err}");
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    assert!(
        summary.contains("\"stop_reason\": \"finished\""),
        "{summary}"
    );
    assert!(out.join("flows.csv").exists() && out.join("links.csv").exists());
    let left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("pcapng"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(&out);
}
