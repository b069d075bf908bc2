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
    glob_input(data);
    config_input(data, |text| crate::config::import_nxos("fuzz.nxos", text))
}

/// The same for a Junos configuration, in either of its forms. Both
/// dialects' targets also match their input's first line, as a wildcard
/// pattern, against the rest (`glob_input`).
pub fn junos_input(data: &[u8]) -> bool {
    glob_input(data);
    config_input(data, |text| {
        crate::config::junos::import("fuzz.junos", text)
    })
}

/// The first line of arbitrary text as a wildcard pattern (switch names,
/// interface names), the rest as a name: matched in time linear in their
/// lengths, and as the definition says where both are short enough to
/// check by trying every split.
pub fn glob_input(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let (pattern, name) = text.split_once('\n').unwrap_or((&text, ""));
    let got = crate::config::glob(pattern, name);
    if pattern.len() <= 64 && name.len() <= 256 {
        assert_eq!(
            got,
            glob_by_definition(pattern.as_bytes(), name.as_bytes()),
            "{pattern:?} {name:?}"
        );
    }
    got
}

/// A star takes any run of bytes: every split tried.
fn glob_by_definition(p: &[u8], s: &[u8]) -> bool {
    let mut m = vec![vec![false; s.len() + 1]; p.len() + 1];
    m[0][0] = true;
    for i in 1..=p.len() {
        for j in 0..=s.len() {
            m[i][j] = if p[i - 1] == b'*' {
                m[i - 1][j] || (j > 0 && m[i][j - 1])
            } else {
                j > 0 && m[i - 1][j - 1] && p[i - 1] == s[j - 1]
            };
        }
    }
    m[p.len()][s.len()]
}

/// Writes an output file over whatever the first byte makes at its path
/// in a fresh folder (nothing, a regular file, a folder, a named pipe no
/// process reads, a link to a file, a dangling link, a link to a named
/// pipe), the rest of the bytes as its contents. What was there is never
/// replaced unless it was a regular file or nothing, a link's target is
/// never written, and nothing waits. Returns whether it was written.
pub fn output_input(data: &[u8]) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let Some((&kind, bytes)) = data.split_first() else {
        return false;
    };
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("out.svg");
    let target = dir.path().join("target");
    let fifo = |p: &std::path::Path| {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("no NUL");
        // SAFETY: a path this function made.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    };
    match kind % 7 {
        0 => {}
        1 => std::fs::write(&path, b"before").expect("write"),
        2 => std::fs::create_dir(&path).expect("mkdir"),
        3 => fifo(&path),
        4 => {
            std::fs::write(&target, b"before").expect("write");
            std::os::unix::fs::symlink(&target, &path).expect("link");
        }
        5 => std::os::unix::fs::symlink(&target, &path).expect("link"),
        _ => {
            fifo(&target);
            std::os::unix::fs::symlink(&target, &path).expect("link");
        }
    }
    let before = std::fs::symlink_metadata(&path).ok().map(|m| m.file_type());
    let written = crate::output::write_atomic(&path, bytes).is_ok();
    let after = std::fs::symlink_metadata(&path).ok().map(|m| m.file_type());
    match kind % 7 {
        0 | 1 => {
            assert!(written);
            assert_eq!(std::fs::read(&path).expect("written"), bytes);
        }
        _ => {
            assert!(
                !written,
                "nothing reads the pipe; links and folders are refused"
            );
            assert_eq!(before, after, "what was there is as it was");
        }
    }
    if kind % 7 == 4 {
        assert_eq!(std::fs::read(&target).expect("target"), b"before");
    }
    if kind % 7 == 6 {
        assert!(std::fs::symlink_metadata(&target)
            .expect("pipe")
            .file_type()
            .is_fifo());
    }
    written
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
        sizes: crate::workload::chakra::CommSizes::AstraSim,
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
