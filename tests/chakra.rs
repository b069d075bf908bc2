//! Chakra execution traces: every trace set runs, its collective type and
//! size are read right, and bad traces are refused with the node named.

mod common;

use common::{error_of, outputs, run_file, run_named, same_both_ways, same_on_threads};
use fabricsim::units::SimTime;
use fabricsim::workload::graph::TaskKind;
use std::path::Path;

const SETS: [(&str, &str); 4] = [
    ("all_reduce_8npus_1MB", "all-reduce"),
    ("all_gather_8npus_1MB", "all-gather"),
    ("all_to_all_8npus_1MB", "all-to-all"),
    ("reduce_scatter_8npus_1MB", "reduce-scatter"),
];

/// The repository's copies are the shared test data, byte for byte.
#[test]
fn trace_copies_match_the_shared_test_data() {
    let shared = Path::new("../shared/testdata/chakra");
    if !shared.is_dir() {
        eprintln!("{} not present; nothing to compare", shared.display());
        return;
    }
    for (set, _) in SETS {
        for r in 0..8 {
            let prefix = set.split("_8npus").next().unwrap();
            let name = format!("{set}/{prefix}.{r}.et");
            let ours = std::fs::read(Path::new("testdata/chakra").join(&name)).unwrap();
            let theirs = std::fs::read(shared.join(&name)).unwrap();
            assert_eq!(ours, theirs, "{name}");
        }
    }
}

/// Every trace set (ASTRA-sim's 1 MB microbenchmarks) runs to the end as
/// one collective over 8 ranks, of the right type, sized as ASTRA-sim
/// reads its `comm_size` of 1,048,576 B: the all-gather's is one rank's
/// share, so it gathers 8 MiB (ASTRA-sim's `Ring` and `HalvingDoubling`
/// end an all-gather of d with 8 d); the others' is their buffer.
#[test]
fn every_trace_set_runs_with_its_collective_and_size() {
    let example = Path::new("examples/collectives/chakra-allreduce.toml");
    for (set, op) in SETS {
        let trace = format!("workload.0.trace=\"../../testdata/chakra/{set}\"");
        let (sim, s) = run_file(example, &[&trace]);
        assert_eq!(s.collectives.len(), 1, "{set}");
        let c = &s.collectives[0];
        assert_eq!(c.collective, op, "{set}");
        let bytes = if op == "all-gather" { 8 << 20 } else { 1 << 20 };
        assert_eq!((c.bytes, c.ranks), (bytes, 8), "{set}");
        assert!(c.busbw_gbps.unwrap() > 5.0, "{set}: {c:?}");
        assert_eq!(s.flows_completed, s.flows_total);
        sim.check_conservation().unwrap();
    }
}

/// The trace's ranks go on the GPUs given; a wrong count is refused.
#[test]
fn ranks_map_to_the_gpus_given() {
    let example = Path::new("examples/collectives/chakra-allreduce.toml");
    let (sim, _) = run_file(example, &["workload.0.gpus=[7,6,5,4,3,2,1,0]"]);
    assert!(sim.flows().iter().all(|f| f.spec.src.0 < 8));
    let text = std::fs::read_to_string(example).unwrap();
    let e = error_of(
        &text
            .replace("../../testdata", "testdata")
            .replace("# gpus = [0, 1, 2, 3, 4, 5, 6, 7]", "gpus = [0, 1, 2]"),
        &[],
    );
    assert!(
        e.contains("workload[0].gpus") && e.contains("one per rank"),
        "{e}"
    );
}

/// Writes a trace of one file per rank from encoded messages.
fn write_trace(dir: &Path, ranks: &[Vec<Vec<u8>>]) {
    std::fs::create_dir_all(dir).unwrap();
    for (r, msgs) in ranks.iter().enumerate() {
        let mut out = vec![7, 0x0a, 5, b'0', b'.', b'0', b'.', b'4'];
        for m in msgs {
            assert!(m.len() < 128);
            out.push(m.len() as u8);
            out.extend(m);
        }
        std::fs::write(dir.join(format!("t.{r}.et")), out).unwrap();
    }
}

/// A node: id, type, dependencies, duration, int attributes.
fn node(id: u8, kind: u8, deps: &[u8], micros: u8, attrs: &[(&str, u8)]) -> Vec<u8> {
    let mut m = vec![0x08, id, 0x12, 1, b'n', 0x18, kind];
    if !deps.is_empty() {
        m.push(0x2a);
        m.push(deps.len() as u8);
        m.extend(deps);
    }
    if micros > 0 {
        m.extend([0x38, micros]);
    }
    for (name, v) in attrs {
        let mut a = vec![0x0a, name.len() as u8];
        a.extend(name.as_bytes());
        a.extend([0x48, *v]);
        m.push(0x52);
        m.push(a.len() as u8);
        m.extend(a);
    }
    m
}

fn scenario_for(dir: &Path) -> String {
    format!(
        r#"
[topology]
kind = "single-rail"
hosts = 2
gpus_per_host = 1

[[workload]]
kind = "chakra"
trace = "{}"
"#,
        dir.display()
    )
}

/// Dependencies are honoured: compute, then a send and its receive, then
/// compute on the receiver; the run takes exactly the two compute times
/// plus the transfer.
#[test]
fn compute_and_point_to_point_nodes_follow_their_dependencies() {
    let dir = std::env::temp_dir().join(format!("fabricsim-chakra-p2p-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Rank 0: compute 5 us, then send 100 B (sizes below 128 keep each
    // varint one byte), then compute 3 us; rank 1: receive, then compute
    // 7 us.
    let r0 = vec![
        node(1, 4, &[], 5, &[]),
        node(2, 5, &[1], 0, &[("comm_dst", 1), ("comm_size", 100)]),
        node(3, 4, &[2], 3, &[]),
    ];
    let r1 = vec![
        node(1, 6, &[], 0, &[("comm_src", 0)]),
        node(2, 4, &[1], 7, &[]),
    ];
    write_trace(&dir, &[r0, r1]);
    let (sim, s) = run_named("x.toml", &scenario_for(&dir), &[]);
    assert_eq!(sim.flows().len(), 1);
    let f = &sim.flows()[0];
    assert_eq!(f.start.0, 5_000_000, "the send waits for the compute");
    let arrive = f.finish.unwrap().0;
    let end = sim.tasks().done.iter().copied().max().unwrap().0;
    assert_eq!(end, arrive + 7_000_000, "the compute waits for the receive");
    assert_eq!(s.makespan_ps.max(end), end);
    // The sender goes on once its send is acknowledged: after the data
    // arrived, by the acknowledgement's way back.
    let t = sim.tasks();
    let after = (t.graph.tasks.iter())
        .position(|k| k.kind == TaskKind::Delay(SimTime(3_000_000)))
        .map(|i| t.started[i].0)
        .unwrap();
    assert!(after > arrive, "{after} {arrive}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Unsupported node kinds and broken traces name the node.
#[test]
fn bad_traces_name_the_node() {
    let dir = std::env::temp_dir().join(format!("fabricsim-chakra-bad-{}", std::process::id()));
    let cases: [(Vec<Vec<u8>>, &str); 4] = [
        (
            vec![node(3, 2, &[], 0, &[])],
            "rank 0 node 3 (\"n\"): MEM_LOAD",
        ),
        (
            vec![node(4, 7, &[], 0, &[("comm_type", 1), ("comm_size", 9)])],
            "REDUCE collectives",
        ),
        (vec![node(5, 4, &[9], 1, &[])], "depends on node 9"),
        // A receive without its send: refused as the trace is read.
        (
            vec![node(6, 6, &[], 0, &[("comm_src", 1)])],
            "rank 0 receives from rank 1 (tag 0) 1 more time(s) than rank 1 sends to it",
        ),
    ];
    for (nodes, want) in cases {
        let _ = std::fs::remove_dir_all(&dir);
        write_trace(&dir, &[nodes, vec![node(1, 4, &[], 1, &[])]]);
        let e = error_of(&scenario_for(&dir), &[]);
        assert!(e.contains("workload[0].trace") && e.contains(want), "{e}");
    }
    // A node that runs 2^64 - 1 us: refused, not cut to 2^40 us without
    // a word.
    let _ = std::fs::remove_dir_all(&dir);
    write_long_trace(&dir, &[vec![comp(1, &[], u64::MAX)], vec![comp(1, &[], 1)]]);
    let e = error_of(&scenario_for(&dir), &[]);
    assert!(
        e.contains("runs 18446744073709551615 us, more than the"),
        "{e}"
    );
    // A receive of another size than its send.
    let _ = std::fs::remove_dir_all(&dir);
    let send = send_4k();
    let recv = node_with(
        1,
        6,
        &[],
        &[("comm_src", 0), ("comm_size", 1000)],
        &[],
        None,
    );
    write_long_trace(&dir, &[vec![send], vec![recv]]);
    let e = error_of(&scenario_for(&dir), &[]);
    assert!(
        e.contains("receives 1000 B from rank 0 (tag 0), whose matching send sends 4096 B"),
        "{e}"
    );
    // A send without its receive runs (its data moves, nothing waits for
    // it), and is said.
    let _ = std::fs::remove_dir_all(&dir);
    let send = send_4k();
    write_long_trace(&dir, &[vec![send], vec![comp(1, &[], 1)]]);
    let p = fabricsim::scenario::prepare("t.toml", &scenario_for(&dir), &[]).unwrap();
    let said: Vec<&str> = p
        .scenario
        .warnings
        .iter()
        .filter(|w| w.key == "workload[0].trace")
        .map(|w| w.message.as_str())
        .collect();
    assert!(
        said.len() == 1
            && said[0].starts_with("1 send(s) have no receive")
            && said[0].contains("from rank 0 to rank 1 (tag 0) at rank 0 node 1"),
        "{said:?}"
    );
    // Two traces' files in one folder.
    let _ = std::fs::remove_dir_all(&dir);
    write_trace(
        &dir,
        &[vec![node(1, 4, &[], 1, &[])], vec![node(1, 4, &[], 1, &[])]],
    );
    std::fs::rename(dir.join("t.1.et"), dir.join("u.1.et")).unwrap();
    let e = error_of(&scenario_for(&dir), &[]);
    assert!(
        e.contains("holds the files of more than one trace (t.0.et and u.1.et)"),
        "{e}"
    );
    // Not a trace folder at all.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.0.et"), [0x40, 1, 2]).unwrap();
    let e = error_of(&scenario_for(&dir), &[]);
    assert!(e.contains("past the end"), "{e}");
    let e = error_of(&scenario_for(&dir.join("nope")), &[]);
    assert!(e.contains("cannot read the trace folder"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field.
fn field(tag: u64, bytes: &[u8], out: &mut Vec<u8>) {
    varint(tag << 3 | 2, out);
    varint(bytes.len() as u64, out);
    out.extend(bytes);
}

/// A node with integer and string attributes and, for a METADATA node,
/// its inputs' values.
fn node_with(
    id: u64,
    kind: u64,
    deps: &[u64],
    ints: &[(&str, u64)],
    strs: &[(&str, &str)],
    inputs: Option<&str>,
) -> Vec<u8> {
    let mut m = Vec::new();
    varint(1 << 3, &mut m);
    varint(id, &mut m);
    field(2, b"n", &mut m);
    varint(3 << 3, &mut m);
    varint(kind, &mut m);
    if !deps.is_empty() {
        let mut d = Vec::new();
        for &x in deps {
            varint(x, &mut d);
        }
        field(5, &d, &mut m);
    }
    if let Some(v) = inputs {
        let mut io = Vec::new();
        field(1, v.as_bytes(), &mut io);
        field(8, &io, &mut m);
    }
    for (name, v) in ints {
        let mut a = Vec::new();
        field(1, name.as_bytes(), &mut a);
        varint(9 << 3, &mut a);
        varint(*v, &mut a);
        field(10, &a, &mut m);
    }
    for (name, v) in strs {
        let mut a = Vec::new();
        field(1, name.as_bytes(), &mut a);
        field(29, v.as_bytes(), &mut a);
        field(10, &a, &mut m);
    }
    m
}

/// A compute node of `micros` microseconds.
/// Node 1 of rank 0: a send of 4096 B to rank 1, tag 0.
fn send_4k() -> Vec<u8> {
    node_with(
        1,
        5,
        &[],
        &[("comm_dst", 1), ("comm_size", 4096)],
        &[],
        None,
    )
}

fn comp(id: u64, deps: &[u64], micros: u64) -> Vec<u8> {
    let mut m = node_with(id, 4, deps, &[], &[], None);
    varint(7 << 3, &mut m);
    varint(micros, &mut m);
    m
}

/// One file per rank, any message length.
fn write_long_trace(dir: &Path, ranks: &[Vec<Vec<u8>>]) {
    std::fs::create_dir_all(dir).unwrap();
    for (r, msgs) in ranks.iter().enumerate() {
        let mut out = Vec::new();
        let mut meta = Vec::new();
        field(1, b"0.0.4", &mut meta);
        varint(meta.len() as u64, &mut out);
        out.extend(meta);
        for m in msgs {
            varint(m.len() as u64, &mut out);
            out.extend(m);
        }
        std::fs::write(dir.join(format!("t.{r}.et")), out).unwrap();
    }
}

fn four_ranks(dir: &Path, extra: &str) -> String {
    format!(
        r#"
[topology]
kind = "single-rail"
hosts = 4
gpus_per_host = 1

[[workload]]
kind = "chakra"
trace = "{}"
{extra}
"#,
        dir.display()
    )
}

/// The network writes of a run, as (sender, receiver) GPU pairs.
fn pairs(sim: &fabricsim::engine::Simulation) -> Vec<(u32, u32)> {
    sim.pass_flows()
        .rows
        .iter()
        .filter(|r| r.qps > 0 && r.bytes > 0)
        .map(|r| (r.src.0, r.dst.0))
        .collect()
}

/// Two process groups of a trace, each all-reducing among its own ranks:
/// given beside the trace (ASTRA-sim's groups file) or by the trace's
/// METADATA node (PyTorch's process_group:init), each collective runs on
/// its group's ranks only, and a node without `pg_name` on every rank.
#[test]
fn process_groups_run_their_collectives_on_their_ranks() {
    let dir = std::env::temp_dir().join(format!("fabricsim-chakra-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let coll = |id: u64, deps: &[u64], pg: Option<&str>| {
        let strs: Vec<(&str, &str)> = pg.map(|g| ("pg_name", g)).into_iter().collect();
        node_with(
            id,
            7,
            deps,
            &[("comm_type", 0), ("comm_size", 4000)],
            &strs,
            None,
        )
    };
    // Ranks 0 and 2 in group "10", 1 and 3 in "11"; then all four.
    let group = |r: usize| if r.is_multiple_of(2) { "10" } else { "11" };
    let ranks: Vec<Vec<Vec<u8>>> = (0..4)
        .map(|r| vec![coll(1, &[], Some(group(r))), coll(2, &[1], None)])
        .collect();
    write_long_trace(&dir, &ranks);
    std::fs::write(dir.join("groups.json"), r#"{"10": [0, 2], "11": [1, 3]}"#).unwrap();
    let groups = format!("groups = \"{}\"", dir.join("groups.json").display());
    let (sim, s) = run_named("x.toml", &four_ranks(&dir, &groups), &[]);
    let ranks: Vec<usize> = s.collectives.iter().map(|c| c.ranks).collect();
    assert_eq!(ranks, [2, 2, 4]);
    assert!(s.collectives.iter().all(|c| c.time_ps.is_some()));
    let p = pairs(&sim);
    for (a, b) in [(0, 2), (2, 0), (1, 3), (3, 1)] {
        assert!(p.contains(&(a, b)), "{a} to {b}: {p:?}");
    }
    // Without the groups the trace is refused, with the node named.
    let e = error_of(&four_ranks(&dir, ""), &[]);
    assert!(
        e.contains("rank 0 node 1") && e.contains("pg_name \"10\" is not a process group"),
        "{e}"
    );
    // A groups file that is not a map of names to rank lists, or names a
    // rank the trace does not have.
    for (json, want) in [
        ("[0, 1]", "expected a JSON object of process group name"),
        (
            r#"{"10": "all"}"#,
            "group \"10\" is \"all\", not a list of ranks",
        ),
        (
            r#"{"10": [0, 9], "11": [1, 3]}"#,
            "names rank 9; the trace has ranks 0 to 3",
        ),
    ] {
        std::fs::write(dir.join("groups.json"), json).unwrap();
        let e = error_of(&four_ranks(&dir, &groups), &[]);
        assert!(e.contains(want), "{json}: {e}");
    }

    // The same groups from a METADATA node in each rank's trace (as
    // PyTorch records them: a JSON list inside a one-string list).
    let meta = r#"["[{\"pg_name\": \"10\", \"ranks\": [0, 2]}, {\"pg_name\": \"11\", \"ranks\": [1, 3]}]"]"#;
    let ranks: Vec<Vec<Vec<u8>>> = (0..4)
        .map(|r| {
            vec![
                node_with(9, 1, &[], &[], &[], Some(meta)),
                coll(1, &[9], Some(group(r))),
            ]
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    write_long_trace(&dir, &ranks);
    let (sim, s) = run_named("x.toml", &four_ranks(&dir, ""), &[]);
    assert_eq!(
        s.collectives.iter().map(|c| c.ranks).collect::<Vec<_>>(),
        [2, 2]
    );
    let mut p = pairs(&sim);
    p.sort_unstable();
    p.dedup();
    assert_eq!(p, [(0, 2), (1, 3), (2, 0), (3, 1)]);

    // A rank outside the group its node names.
    let ranks: Vec<Vec<Vec<u8>>> = (0..4)
        .map(|r| {
            vec![
                node_with(9, 1, &[], &[], &[], Some(meta)),
                coll(1, &[9], Some(if r == 3 { "10" } else { group(r) })),
            ]
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    write_long_trace(&dir, &ranks);
    let e = error_of(&four_ranks(&dir, ""), &[]);
    assert!(
        e.contains("rank 3 node 1") && e.contains("not in its process group \"10\""),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every rank of a communicator must call the same collectives in the
/// same order (NCCL would hang otherwise): counts or types and sizes that
/// differ are refused with the node named. "" and an undefined "0" are
/// both the default communicator, mixed in any order.
#[test]
fn ranks_of_a_communicator_must_agree_on_its_collectives() {
    let dir = std::env::temp_dir().join(format!("fabricsim-chakra-agree-{}", std::process::id()));
    let all_reduce = |id: u64, bytes: u64, pg: Option<&str>| {
        let strs: Vec<(&str, &str)> = pg.map(|g| ("pg_name", g)).into_iter().collect();
        let deps: Vec<u64> = (1..id).collect();
        node_with(
            id,
            7,
            &deps,
            &[("comm_type", 0), ("comm_size", bytes)],
            &strs,
            None,
        )
    };
    let run = |ranks: &[Vec<Vec<u8>>]| {
        let _ = std::fs::remove_dir_all(&dir);
        write_long_trace(&dir, ranks);
    };
    // Rank 0 names the default communicator both ways, rank 1 one way.
    run(&[
        vec![all_reduce(1, 100, None), all_reduce(2, 120, Some("0"))],
        vec![all_reduce(1, 100, Some("")), all_reduce(2, 120, None)],
    ]);
    let (_, s) = run_named("x.toml", &scenario_for(&dir), &[]);
    let sizes: Vec<(u64, usize)> = s.collectives.iter().map(|c| (c.bytes, c.ranks)).collect();
    assert_eq!(sizes, [(100, 2), (120, 2)]);

    // One more collective on rank 0.
    run(&[
        vec![all_reduce(1, 100, None), all_reduce(2, 120, Some("0"))],
        vec![all_reduce(1, 100, None)],
    ]);
    let e = error_of(&scenario_for(&dir), &[]);
    assert!(
        e.contains(
            "rank 0 has 2 collective nodes in process group \"of every rank\" but rank 1 has 1"
        ),
        "{e}"
    );

    // The same count, a size that differs: the second rank's node is named.
    run(&[
        vec![all_reduce(1, 100, None), all_reduce(2, 120, None)],
        vec![all_reduce(1, 100, Some("0")), all_reduce(2, 124, None)],
    ]);
    let e = error_of(&scenario_for(&dir), &[]);
    assert!(
        e.contains("rank 1 node 2")
            && e.contains("collective 1 of rank 0 in its group is comm_type 0 of 120 B, this one comm_type 0 of 124 B"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `comm_size` as ASTRA-sim reads it by default (an all-gather's is one
/// rank's share, a reduce-scatter's its whole input), as nccl-tests
/// counts it (`"buffer"`: both whole) or as shares (`"shard"`); anything
/// else is refused with the three named.
#[test]
fn collective_sizes_follow_the_chosen_convention() {
    let dir = std::env::temp_dir().join(format!("fabricsim-chakra-size-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // An all-gather (comm_type 2) then a reduce-scatter (7), 4,000 B each.
    let ranks: Vec<Vec<Vec<u8>>> = (0..4)
        .map(|_| {
            vec![
                node_with(
                    1,
                    7,
                    &[],
                    &[("comm_type", 2), ("comm_size", 4000)],
                    &[],
                    None,
                ),
                node_with(
                    2,
                    7,
                    &[1],
                    &[("comm_type", 7), ("comm_size", 4000)],
                    &[],
                    None,
                ),
            ]
        })
        .collect();
    write_long_trace(&dir, &ranks);
    let sizes = |setting: &str| {
        let (_, s) = run_named("x.toml", &four_ranks(&dir, setting), &[]);
        let c = &s.collectives;
        assert_eq!(
            (c[0].collective.as_str(), c[1].collective.as_str()),
            ("all-gather", "reduce-scatter")
        );
        (c[0].bytes, c[1].bytes)
    };
    assert_eq!(sizes(""), (16000, 4000));
    assert_eq!(sizes("comm_size = \"astra-sim\""), (16000, 4000));
    assert_eq!(sizes("comm_size = \"buffer\""), (4000, 4000));
    assert_eq!(sizes("comm_size = \"shard\""), (16000, 16000));
    let e = error_of(&four_ranks(&dir, "comm_size = \"rank\""), &[]);
    assert!(
        e.contains("workload[0].comm_size")
            && e.contains("\"astra-sim\"")
            && e.contains("\"buffer\"")
            && e.contains("\"shard\""),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A rank's collective node is done when its own part is, as its NCCL
/// call returns: the root of a broadcast goes on to its next kernel at
/// once, without waiting for the others to receive.
#[test]
fn a_rank_goes_on_when_its_own_part_of_a_collective_is_done() {
    let dir = std::env::temp_dir().join(format!("fabricsim-chakra-own-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let bcast = |id: u64| {
        node_with(
            id,
            7,
            &[],
            &[("comm_type", 5), ("comm_size", 4_000_000)],
            &[],
            None,
        )
    };
    let ranks = vec![
        vec![bcast(1), node_with(2, 4, &[1], &[], &[], None)],
        vec![bcast(1)],
    ];
    // Rank 0's compute node lasts 0 us: its start is when it may go on.
    write_long_trace(&dir, &ranks);
    let (sim, s) = run_named("x.toml", &scenario_for(&dir), &[]);
    let end = s.collectives[0].time_ps.unwrap();
    let t = sim.tasks();
    let compute = (0..t.graph.tasks.len())
        .find(|&i| {
            matches!(
                t.graph.tasks[i].kind,
                fabricsim::workload::graph::TaskKind::Delay(_)
            )
        })
        .unwrap();
    let started = t.started[compute].0;
    assert!(
        started < end / 10,
        "root went on at {started} ps, broadcast took {end} ps"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A trace longer than a part (`chakra::PART_NODES`) is made part by part
/// as the run reaches it, each part forgotten once over, and writes the
/// files a run with every part made before it writes, byte for byte.
/// Each of four ranks computes, all-reduces with every rank, and passes
/// a message round the ring, many times over; near the end ranks 2 and 3
/// all-reduce in a group of their own, whose connections only a late
/// part opens.
#[test]
fn a_long_trace_is_made_part_by_part_as_the_run_reaches_it() {
    let dir = std::env::temp_dir().join(format!("fabricsim-chakra-parts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let coll = |id: u64, deps: &[u64], pg: &'static str| {
        node_with(
            id,
            7,
            deps,
            &[("comm_type", 0), ("comm_size", 64 << 10)],
            &[("pg_name", pg)],
            None,
        )
    };
    const ROUNDS: u64 = 1_500;
    let ranks: Vec<Vec<Vec<u8>>> = (0..4u64)
        .map(|r| {
            // First, a CPU op of 1 s that only the last round waits for.
            let mut cpu = node_with(0, 4, &[], &[("is_cpu_op", 1)], &[], None);
            varint(7 << 3, &mut cpu);
            varint(1_000_000, &mut cpu);
            let mut nodes = vec![cpu];
            let mut last: Vec<u64> = Vec::new();
            for k in 0..ROUNDS {
                let id = 10 * k + 1;
                if k == ROUNDS - 1 {
                    // Far back: more than any window below.
                    last.push(0);
                }
                nodes.push(comp(id, &last, 1));
                for c in 1..4 {
                    nodes.push(comp(id + c, &[id + c - 1], 1));
                }
                nodes.push(coll(id + 4, &[id + 3], "1"));
                let size = [("comm_size", 4096), ("comm_tag", k % 3)];
                let send = [&[("comm_dst", (r + 1) % 4)][..], &size[..]].concat();
                nodes.push(node_with(id + 5, 5, &[id + 4], &send, &[], None));
                let recv = [("comm_src", (r + 3) % 4), ("comm_tag", k % 3)];
                nodes.push(node_with(id + 6, 6, &[id + 4], &recv, &[], None));
                last = vec![id + 5, id + 6];
                if k == ROUNDS - 5 && r >= 2 {
                    nodes.push(coll(id + 7, &[id + 6], "2"));
                    last.push(id + 7);
                }
            }
            nodes
        })
        .collect();
    write_long_trace(&dir, &ranks);
    std::fs::write(
        dir.join("groups.json"),
        r#"{"1": [0, 1, 2, 3], "2": [2, 3]}"#,
    )
    .unwrap();
    let scenario = dir.join("long.toml");
    let groups = format!("groups = \"{}\"", dir.join("groups.json").display());
    std::fs::write(&scenario, four_ranks(&dir, &groups)).unwrap();
    let path = scenario.to_str().unwrap();
    let sim = same_both_ways(path, &[]);
    // Not a test of nothing: parts were made as the run went, and no
    // more than a few held at once.
    let (made, forgotten, most) = sim.later_counts().expect("parts made as the run went");
    assert!(made >= 2, "{made}");
    assert_eq!(forgotten, made);
    assert!(most <= 3, "{most} of {made} held at once");
    let s = fabricsim::report::Summary::of(&sim, fabricsim::engine::StopReason::Finished);
    assert_eq!(s.collectives.len() as u64, ROUNDS + 1);
    assert!(s.collectives.iter().all(|c| c.time_ps.is_some()));
    assert_eq!(s.collectives.iter().filter(|c| c.ranks == 2).count(), 1);
    assert_eq!(s.flows_completed, s.flows_total);
    // Cut short, the parts never reached are made for the outputs, as
    // they would be if made before the run.
    same_both_ways(path, &["simulation.max_sim_time=\"1ms\""]);
    // Cut into partitions, each makes the parts as the run reaches them
    // and forgets them once over everywhere (looked at between watch
    // intervals, so the last may still be held at the end), with one
    // thread's files, to the end or cut short.
    for cut in same_on_threads(path, &[2, 4], &[]) {
        let (made, forgotten, most) = cut.later_counts().expect("parts made as the run went");
        assert!(made >= 2 && forgotten >= 1, "{made} {forgotten}");
        assert!(most <= 3, "{most} of {made} held at once");
    }
    same_on_threads(path, &[2], &["simulation.max_sim_time=\"1ms\""]);
    // Each rank is read a window at a time (10,500 nodes each, the
    // default window 4,096): the same outputs as with each file held
    // whole, and with a window of 8 nodes. The last round waits for the
    // first node, further back than any of these windows, so the run
    // ends after it.
    assert!(s.makespan_ps > 1_000_000_000_000, "{}", s.makespan_ps);
    let (narrow, _) = outputs(path, &["workload.0.window=8"]);
    let (whole, _) = outputs(path, &["workload.0.window=1073741824"]);
    let (default, _) = outputs(path, &[]);
    assert!(narrow == whole && default == whole);
    // `validate` counts the transfers of every part, made or not.
    let validate = |sets: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_fabricsim"));
        c.arg("validate").arg(path);
        for s in sets {
            c.args(["--set", s]);
        }
        let out = String::from_utf8(c.output().unwrap().stdout).unwrap();
        out.lines().next().unwrap_or_default().to_string()
    };
    let lazy = validate(&[]);
    assert!(lazy.contains("valid."), "{lazy}");
    assert_eq!(lazy, validate(&["simulation.job_iterations=\"up-front\""]));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A part may wait only for tasks done before the part ahead of it is
/// made: it is made at once then. One rank: X (1 us) and Y (1 ms), then
/// many nodes that wait for Y and, after them in file order, many that
/// wait for X; the parts of the latter wait for X alone, done long before
/// Y ends and the first of them is made.
#[test]
fn a_part_waiting_only_for_tasks_already_done_is_made_at_once() {
    let dir = std::env::temp_dir().join(format!("fabricsim-chakra-done-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut nodes = vec![comp(1, &[], 1), comp(2, &[], 1000)];
    nodes.extend((0..40_000).map(|i| comp(10 + i, &[2], 0)));
    nodes.extend((0..40_000).map(|i| comp(100_000 + i, &[1], 0)));
    write_long_trace(&dir, &[nodes]);
    let scenario = dir.join("wide.toml");
    std::fs::write(&scenario, scenario_for(&dir)).unwrap();
    // The limit is far past the run's end (1 ms): a part never made
    // would leave tasks waiting, and the run going, until then.
    let sim = same_both_ways(
        scenario.to_str().unwrap(),
        &["simulation.max_sim_time=\"20ms\""],
    );
    let (made, forgotten, _) = sim.later_counts().expect("parts made as the run went");
    assert_eq!((made, forgotten), (4, 4));
    let path = scenario.to_str().unwrap();
    for cut in same_on_threads(path, &[2], &["simulation.max_sim_time=\"20ms\""]) {
        assert_eq!(cut.later_counts().map(|c| c.0), Some(4));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The window reaches the order: rank 0 waits to receive, then sends to
/// rank 2, and has a send to rank 3 that waits for nothing further on in
/// its file. With the whole file in view that send goes in first; with a
/// window of one node it waits its turn, after the receive and the send
/// before it. The transfers are numbered in the order they go in.
#[test]
fn the_window_decides_how_far_ahead_a_rank_is_looked_at() {
    let dir = std::env::temp_dir().join(format!("fabricsim-chakra-window-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let r0 = vec![
        node(1, 6, &[], 0, &[("comm_src", 1)]),
        node(2, 5, &[1], 0, &[("comm_dst", 2), ("comm_size", 100)]),
        node(3, 5, &[], 0, &[("comm_dst", 3), ("comm_size", 100)]),
    ];
    let r1 = vec![node(1, 5, &[], 0, &[("comm_dst", 0), ("comm_size", 100)])];
    let r2 = vec![node(1, 6, &[], 0, &[("comm_src", 0)])];
    let r3 = vec![node(1, 6, &[], 0, &[("comm_src", 0)])];
    write_trace(&dir, &[r0, r1, r2, r3]);
    let order = |extra: &str| -> Vec<(u32, u32)> {
        let (sim, _) = run_named("x.toml", &four_ranks(&dir, extra), &[]);
        sim.flows()
            .iter()
            .map(|f| (f.spec.src.0, f.spec.dst.0))
            .collect()
    };
    assert_eq!(order(""), [(0, 3), (1, 0), (0, 2)]);
    assert_eq!(order("window = 3"), [(0, 3), (1, 0), (0, 2)]);
    assert_eq!(order("window = 1"), [(1, 0), (0, 2), (0, 3)]);

    // Two ranks that each receive before they send need a window of two:
    // with one, neither send is ever in view.
    let _ = std::fs::remove_dir_all(&dir);
    let each = |peer: u8| {
        vec![
            node(1, 6, &[], 0, &[("comm_src", peer)]),
            node(2, 5, &[], 0, &[("comm_dst", peer), ("comm_size", 100)]),
        ]
    };
    write_trace(&dir, &[each(1), each(0)]);
    assert_eq!(order("window = 2").len(), 2);
    let e = error_of(&four_ranks(&dir, "window = 1"), &[]);
    assert!(
        e.contains("workload[0].trace")
            && e.contains("rank 0 node 1")
            && e.contains("window of 1 nodes"),
        "{e}"
    );
    let e = error_of(&four_ranks(&dir, "window = 0"), &[]);
    assert!(
        e.contains("workload[0].window") && e.contains("got 0"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A barrier across hosts that only a later part waits for cannot be
/// cut: no partition would see it done. Every part is made apart before
/// the run to find that out, so the run goes on one thread and says why,
/// rather than stopping midway. Two ranks on two hosts: a compute node,
/// a barrier after it, a chain longer than a part, and a last node that
/// waits for the chain and the barrier.
#[test]
fn a_trace_whose_later_part_cannot_be_cut_runs_on_one_thread_and_says_why() {
    let dir = std::env::temp_dir().join(format!("fabricsim-chakra-barrier-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    const CHAIN: u64 = 20_000;
    let barrier = node_with(2, 7, &[1], &[("comm_type", 9)], &[], None);
    let rank: Vec<Vec<u8>> = [comp(1, &[], 1), barrier]
        .into_iter()
        .chain((0..CHAIN).map(|i| comp(10 + i, &[10 + i - 1][..(i > 0) as usize], 0)))
        .chain([comp(9 + CHAIN + 10, &[2, 9 + CHAIN], 1)])
        .collect();
    write_long_trace(&dir, &[rank.clone(), rank]);
    let scenario = dir.join("barrier.toml");
    std::fs::write(&scenario, scenario_for(&dir)).unwrap();
    let path = scenario.to_str().unwrap();
    let (one, _) = outputs(path, &[]);
    let (two, perf, sim) = common::on_threads(path, 2, &[]);
    assert_eq!(perf.partitions, 1);
    let why = perf.one_partition_because.unwrap_or_default();
    assert!(
        why.starts_with("a later part of a trace cannot be cut by host")
            && why.contains("a barrier across hosts"),
        "{why}"
    );
    assert!(one == two);
    assert!(sim.later_counts().is_some_and(|c| c.0 >= 2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A small xorshift generator, for traces drawn at random.
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: u64) -> u64 {
        let x = &mut self.0;
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x % n
    }
}

/// A trace of four ranks drawn from `seed`, longer than a part: rounds
/// of GPU and CPU compute nodes waiting for some of the rank's last few
/// nodes (now and then for its first), and after them, in some rounds,
/// an all-reduce of every rank or a ring of sends and receives.
fn random_long_trace(seed: u64) -> Vec<Vec<Vec<u8>>> {
    const RANKS: u64 = 4;
    const ROUNDS: u64 = 2_000;
    let mut d = Draw(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut ranks: Vec<Vec<Vec<u8>>> = vec![Vec::new(); RANKS as usize];
    let mut recent: Vec<Vec<u64>> = vec![Vec::new(); RANKS as usize];
    let mut ids = vec![1u64; RANKS as usize];
    for k in 0..ROUNDS {
        let what = d.below(4);
        let size = 4096 << d.below(5);
        for r in 0..RANKS as usize {
            let mut id = || {
                ids[r] += 1;
                ids[r] - 1
            };
            for _ in 0..1 + d.below(3) {
                let last = &recent[r][recent[r].len().saturating_sub(6)..];
                let mut deps: Vec<u64> = (0..d.below(3))
                    .filter(|_| !last.is_empty())
                    .map(|_| last[d.below(last.len() as u64) as usize])
                    .collect();
                let n = id();
                if n > 1 && d.below(50) == 0 {
                    deps.push(1);
                }
                deps.sort_unstable();
                deps.dedup();
                let cpu = d.below(8) == 0;
                let ints: &[(&str, u64)] = if cpu { &[("is_cpu_op", 1)] } else { &[] };
                let mut m = node_with(n, 4, &deps, ints, &[], None);
                varint(7 << 3, &mut m);
                varint(d.below(5), &mut m);
                ranks[r].push(m);
                recent[r].push(n);
            }
            let last = *recent[r].last().unwrap();
            match what {
                0 => {
                    let n = id();
                    let ints = [("comm_type", 0), ("comm_size", size)];
                    ranks[r].push(node_with(n, 7, &[last], &ints, &[], None));
                    recent[r].push(n);
                }
                1 => {
                    let (s, v) = (id(), id());
                    let to = (r as u64 + 1) % RANKS;
                    let from = (r as u64 + RANKS - 1) % RANKS;
                    let send = [("comm_dst", to), ("comm_size", size), ("comm_tag", k)];
                    ranks[r].push(node_with(s, 5, &[last], &send, &[], None));
                    let recv = [("comm_src", from), ("comm_tag", k)];
                    ranks[r].push(node_with(v, 6, &[last], &recv, &[], None));
                    recent[r].extend([s, v]);
                }
                _ => {}
            }
        }
    }
    ranks
}

/// Traces drawn at random, each longer than a part, write on threads
/// the files one thread writes: every partition makes the parts as the
/// run reaches them, its sends, receives and collectives crossing the
/// cut.
#[test]
fn random_long_traces_write_the_same_files_cut_into_partitions() {
    for (seed, threads) in [(1, &[2, 3][..]), (2, &[2]), (3, &[2])] {
        let dir = std::env::temp_dir().join(format!(
            "fabricsim-chakra-random-{seed}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        write_long_trace(&dir, &random_long_trace(seed));
        let scenario = dir.join("random.toml");
        std::fs::write(&scenario, four_ranks(&dir, "")).unwrap();
        let path = scenario.to_str().unwrap();
        for cut in same_on_threads(path, threads, &[]) {
            let (made, _, _) = cut.later_counts().expect("parts made as the run went");
            assert!(made >= 1, "seed {seed}: one part only");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A trace whose first part is only compute: 8,192 nodes on each of two
/// ranks fill it, so the all-reduce after them, and its transfers, come
/// only in the second part. Those transfers were taken for transfers
/// made before the run, which panicked (the run's passes were numbered
/// only when the first part had one). The same with one node waiting
/// for 50,000 others, at packet and flow level.
#[test]
fn a_first_part_of_compute_alone_leaves_the_collectives_to_later_parts() {
    let dir = std::env::temp_dir().join(format!("fabricsim-chakra-comp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let coll = |id: u64, deps: &[u64]| {
        node_with(
            id,
            7,
            deps,
            &[("comm_type", 0), ("comm_size", 64 << 10)],
            &[],
            None,
        )
    };
    // A chain of compute nodes, then the all-reduce.
    let chain: Vec<Vec<u8>> = (0..8_192u64)
        .map(|i| comp(i, &(0..i).rev().take(1).collect::<Vec<_>>(), 1))
        .chain([coll(8_192, &[8_191])])
        .collect();
    write_long_trace(&dir, &[chain.clone(), chain]);
    let scenario = dir.join("chain.toml");
    std::fs::write(&scenario, scenario_for(&dir)).unwrap();
    let path = scenario.to_str().unwrap();
    let sim = same_both_ways(path, &[]);
    let (made, _, _) = sim.later_counts().expect("parts made as the run went");
    assert_eq!(made, 1);
    let s = fabricsim::report::Summary::of(&sim, fabricsim::engine::StopReason::Finished);
    assert_eq!(s.collectives.len(), 1);
    assert!(s.collectives[0].time_ps.is_some());
    // 8,192 us of compute, then the all-reduce.
    assert!(s.makespan_ps > 8_192_000_000, "{}", s.makespan_ps);
    same_on_threads(path, &[2], &[]);
    let (flow, _) = outputs(path, &["simulation.fidelity=\"flow\""]);
    assert!(!flow.is_empty());

    // One node waits for 50,000 others, on each rank.
    let wide: Vec<Vec<u8>> = (0..50_000u64)
        .map(|i| comp(i, &[], 1))
        .chain([coll(50_000, &(0..50_000).collect::<Vec<_>>())])
        .collect();
    write_long_trace(&dir, &[wide.clone(), wide]);
    let sim = same_both_ways(path, &[]);
    let s = fabricsim::report::Summary::of(&sim, fabricsim::engine::StopReason::Finished);
    assert!(s.collectives[0].time_ps.is_some());
    same_on_threads(path, &[2], &[]);
    outputs(path, &["simulation.fidelity=\"flow\""]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// ASTRA-sim's 16-NPU, 1 MB microbenchmarks (one collective node per
/// rank, `comm_size` 1,048,576), replayed on 16 single-GPU hosts with
/// ring algorithms and NCCL's Simple protocol (ASTRA-sim has no LL or
/// LL128 lines, whose flags add to the bytes on the wire), move over the
/// network the bytes ASTRA-sim's `Ring` moves for each (its source: an
/// all-gather of d sends d per step, the others d / N; all-reduce takes
/// 2 (N - 1) steps, the others N - 1), N x that in all. Read as
/// nccl-tests counts it, the all-gather would move a sixteenth of that.
#[test]
fn astra_sim_microbenchmarks_move_the_bytes_astra_sim_moves() {
    let n = 16u64;
    let d = 1u64 << 20;
    for (comm_type, op, steps, per_step) in [
        (0, "all-reduce", 2 * (n - 1), d / n),
        (2, "all-gather", n - 1, d),
        (7, "reduce-scatter", n - 1, d / n),
        (6, "all-to-all", n - 1, d / n),
    ] {
        let dir = std::env::temp_dir().join(format!(
            "fabricsim-chakra-astra-{comm_type}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let ranks: Vec<Vec<Vec<u8>>> = (0..n)
            .map(|_| {
                vec![node_with(
                    1,
                    7,
                    &[],
                    &[("comm_type", comm_type), ("comm_size", d)],
                    &[],
                    None,
                )]
            })
            .collect();
        write_long_trace(&dir, &ranks);
        let scenario = format!(
            "[topology]\nkind = \"single-rail\"\nhosts = {n}\ngpus_per_host = 1\n\n[[workload]]\nkind = \"chakra\"\ntrace = \"{}\"\nalgorithm = \"ring\"\nprotocol = \"simple\"\n",
            dir.display()
        );
        let (sim, s) = run_named("x.toml", &scenario, &[]);
        assert_eq!(s.collectives[0].collective, op);
        let moved: u64 = sim.pass_flows().rows.iter().map(|r| r.bytes).sum();
        assert_eq!(moved, n * steps * per_step, "{op}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
