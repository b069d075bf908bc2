//! Fuzzing harnesses: what the fuzz targets in `fuzz/` (libFuzzer) and the
//! randomized test `tests/fuzz_harness.rs` (proptest, in every CI run)
//! feed arbitrary bytes to. Neither may panic, hang or allocate without
//! bound on any input; errors are the expected outcome of most inputs.

use std::sync::OnceLock;

use crate::scenario::{self, Prepared};
use crate::units::SimTime;
use crate::workload::chakra::{self, Settings, Trace};
use crate::workload::collective::Emitter;
use crate::workload::graph::GraphBuilder;

/// Largest integer a fuzzed scenario may give under `[topology]` (but
/// `switch_radix`). The
/// scenario's own caps (65,536 hosts, 4 M links, 4 M transfers) bound
/// every input, but building a fabric near them takes seconds and
/// gigabytes, too slow for a fuzzing iteration; the caps are tested on
/// their own.
pub const FUZZ_TOPOLOGY_MAX: i64 = 16;

/// Whether a scenario text asks for a fabric small enough to fuzz.
fn small_fabric(text: &str) -> bool {
    let Ok(table) = text.parse::<toml::Table>() else {
        return true;
    };
    let Some(toml::Value::Table(t)) = table.get("topology") else {
        return true;
    };
    // The radix bounds ports per switch; it does not make a fabric large.
    t.iter()
        .filter(|(k, _)| *k != "switch_radix")
        .all(|(_, v)| match v {
            toml::Value::Integer(i) => *i <= FUZZ_TOPOLOGY_MAX,
            toml::Value::Float(f) => *f <= FUZZ_TOPOLOGY_MAX as f64,
            _ => true,
        })
}

/// Parses and resolves a scenario from arbitrary bytes (as text), and
/// describes what it would simulate. Returns whether it was valid.
pub fn scenario_input(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    if !small_fabric(&text) {
        return false;
    }
    match scenario::prepare("fuzz.toml", &text, &[]) {
        Ok(p) => {
            // What `validate` prints must not fail either.
            let _ = scenario::lossless::describe(&p.topology, &p.scenario.qos, &p.pfc);
            true
        }
        Err(e) => {
            let _ = e.to_string();
            false
        }
    }
}

/// Reads arbitrary bytes (as text) as an NX-OS configuration. A valid one
/// must print as scenario text that parses back to the same keys.
/// Returns whether it was valid.
pub fn nxos_input(data: &[u8]) -> bool {
    config_input(data, |text| crate::config::import_nxos("fuzz.nxos", text))
}

/// The same for a Junos configuration, in either of its forms.
pub fn junos_input(data: &[u8]) -> bool {
    config_input(data, |text| {
        crate::config::junos::import("fuzz.junos", text)
    })
}

fn config_input(
    data: &[u8],
    read: impl Fn(&str) -> Result<crate::config::Import, crate::config::ConfigError>,
) -> bool {
    let text = String::from_utf8_lossy(data);
    match read(&text) {
        Ok(import) => {
            let printed = import.to_toml();
            let back: toml::Table = printed
                .parse()
                .unwrap_or_else(|e| panic!("the import prints invalid TOML: {e}\n{printed}"));
            assert_eq!(back, import.table(), "the printed keys are the keys");
            let _ = import.strict();
            true
        }
        Err(e) => {
            let _ = e.to_string();
            false
        }
    }
}

/// A small fabric (16 hosts) for the traces' ranks, built once.
fn fabric() -> &'static Prepared {
    static FABRIC: OnceLock<Prepared> = OnceLock::new();
    FABRIC.get_or_init(|| {
        scenario::prepare(
            "fuzz-fabric.toml",
            "[topology]\nkind = \"fat-tree\"\nk = 4\n[[workload]]\nkind = \"transfer\"\nsrc = 0\ndst = 1\nbytes = 1000\n",
            &[],
        )
        .expect("the fuzzing fabric is valid")
    })
}

/// Splits fuzz input into rank files: the first byte gives the number of
/// ranks (1 to 8), then each rank's file is a 2-byte little-endian length
/// and that many bytes (cut short at the end of the input).
pub fn rank_files(data: &[u8]) -> Option<Vec<&[u8]>> {
    let (&first, mut rest) = data.split_first()?;
    let n = (first % 8) as usize + 1;
    let mut files = Vec::with_capacity(n);
    for _ in 0..n {
        let len = match rest {
            [a, b, tail @ ..] => {
                rest = tail;
                u16::from_le_bytes([*a, *b]) as usize
            }
            _ => {
                rest = &[];
                0
            }
        };
        let (file, tail) = rest.split_at(len.min(rest.len()));
        files.push(file);
        rest = tail;
    }
    Some(files)
}

/// The fuzz input that holds these rank files (the inverse of
/// `rank_files`), for seed corpora and tests.
pub fn pack_rank_files(files: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![(files.len().clamp(1, 8) - 1) as u8];
    for f in files.iter().take(8) {
        out.extend((f.len().min(u16::MAX as usize) as u16).to_le_bytes());
        out.extend(&f[..f.len().min(u16::MAX as usize)]);
    }
    out
}

/// Decodes arbitrary bytes as a Chakra trace (see `rank_files`) and, when
/// they decode, adds the trace to a task graph on a small fabric, as a
/// scenario would. Returns whether it was valid.
pub fn chakra_input(data: &[u8]) -> bool {
    let Some(files) = rank_files(data) else {
        return false;
    };
    for f in &files {
        assert!(
            chakra::lean_matches_prost(f),
            "the lean reader gives a node prost does not"
        );
    }
    let n = files.len();
    let ranks = files.iter().map(|f| f.to_vec()).collect();
    let trace = match Trace::from_bytes(ranks, chakra::WINDOW) {
        Ok(t) => t,
        Err(e) => {
            let _ = e.len();
            return false;
        }
    };
    let f = fabric();
    let settings = Settings {
        gpus: (0..n as u32).map(crate::topology::GpuId).collect(),
        algorithm: None,
        channels: 1,
        chunk: 1 << 20,
        pxn: false,
        protocol: crate::workload::collective::Protocol::Simple,
        auto: crate::workload::collective::Auto::default(),
        groups: Vec::new(),
        shard_sizes: false,
        window: chakra::WINDOW,
    };
    let mut graph = GraphBuilder::default();
    let mut flows = Vec::new();
    let mut e = Emitter::new(&f.topology, &f.routes, &mut graph, &mut flows, 0, 1, false);
    chakra::emit(&mut e, std::sync::Arc::new(trace), &settings, SimTime::ZERO).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_traces_and_examples_go_through() {
        let dir = std::path::Path::new("../shared/testdata/chakra/all_reduce_8npus_1MB");
        let files: Vec<Vec<u8>> = (0..8)
            .filter_map(|r| std::fs::read(dir.join(format!("all_reduce.{r}.et"))).ok())
            .collect();
        if files.len() == 8 {
            let input = pack_rank_files(&files);
            assert_eq!(rank_files(&input).unwrap().len(), 8);
            assert!(chakra_input(&input));
            // One rank alone: its collective is over one rank and moves
            // nothing, as NCCL's would.
            assert!(chakra_input(&pack_rank_files(&files[..1])));
        }
        let text = std::fs::read("examples/fat-tree.toml").unwrap();
        assert!(scenario_input(&text));
        assert!(!scenario_input(
            b"[topology]\nkind = \"fat-tree\"\nk = 64\n"
        ));
        assert!(!scenario_input(b"\xff\xfe[["));
        assert!(!chakra_input(&[]));
        assert!(!chakra_input(&[3, 1, 2, 3]));
    }
}
