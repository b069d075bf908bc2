//! Chakra execution traces: every trace set runs, its collective type and
//! size are read right, and bad traces are refused with the node named.

mod common;

use common::{error_of, run_file, run_named};
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

/// Every trace set runs to the end as one collective of 1,048,576 B over
/// 8 ranks, of the right type, with nccl-tests' figures.
#[test]
fn every_trace_set_runs_with_its_collective_and_size() {
    let example = Path::new("examples/collectives/chakra-allreduce.toml");
    for (set, op) in SETS {
        let trace = format!("workload.0.trace=\"../../testdata/chakra/{set}\"");
        let (sim, s) = run_file(example, &[&trace]);
        assert_eq!(s.collectives.len(), 1, "{set}");
        let c = &s.collectives[0];
        assert_eq!(c.collective, op, "{set}");
        assert_eq!((c.bytes, c.ranks), (1_048_576, 8), "{set}");
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
    // varint one byte); rank 1: receive, then compute 7 us.
    let r0 = vec![
        node(1, 4, &[], 5, &[]),
        node(2, 5, &[1], 0, &[("comm_dst", 1), ("comm_size", 100)]),
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
        (
            vec![node(6, 6, &[], 0, &[("comm_src", 1)])],
            "can never run",
        ),
    ];
    for (nodes, want) in cases {
        let _ = std::fs::remove_dir_all(&dir);
        write_trace(&dir, &[nodes, vec![node(1, 4, &[], 1, &[])]]);
        let e = error_of(&scenario_for(&dir), &[]);
        assert!(e.contains("workload[0].trace") && e.contains(want), "{e}");
    }
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
