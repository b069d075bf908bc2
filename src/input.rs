//! Reading the files a user points fabricsim at, with limits.
//!
//! A scenario, a sweep file or a size CDF is read whole into memory (a
//! Chakra trace a message at a time), so each kind has a stated largest
//! size, and only regular files are read: `/dev/zero` would fill memory
//! and a FIFO with no writer would block forever. The size is checked
//! before reading and the read itself stops at the limit, so a file that
//! grows while it is read cannot get past it either.

use std::io::Read;
use std::path::Path;

/// Largest scenario or sweep file (TOML). Parsing takes about 45 times
/// the file's size in memory (a 16 MB file of 342,000 transfer entries
/// peaked at 740 MB), so 4 MB keeps it under 200 MB; workloads that
/// large belong in a pattern (permutation, all-to-all) or a trace.
pub const MAX_SCENARIO_BYTES: u64 = 4 << 20;
/// Largest size-distribution (CDF) file.
pub const MAX_CDF_BYTES: u64 = 16 << 20;
/// Largest Chakra trace file of one rank.
pub const MAX_TRACE_BYTES: u64 = 1 << 30;

/// Reads a regular file of at most `max` bytes; `what` names it in errors
/// ("scenario", "CDF file").
pub fn read_bytes(path: &Path, max: u64, what: &str) -> Result<Vec<u8>, String> {
    let (f, _) = open_file(path, max, what)?;
    read_limited(f, max).map_err(|e| match e {
        Limited::Io(e) => format!("cannot read the {what} {}: {e}", path.display()),
        Limited::TooBig => too_big(path, what, max + 1, max),
    })
}

/// Opens a regular file of at most `max` bytes to be read in pieces;
/// returns it and its size. Whoever reads it reads no more than that
/// size, so a file that grows meanwhile cannot get past the limit.
pub fn open_file(path: &Path, max: u64, what: &str) -> Result<(std::fs::File, u64), String> {
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "the {what} {} is not a regular file (a folder, device or pipe); expected a file",
            path.display()
        ));
    }
    if meta.len() > max {
        return Err(too_big(path, what, meta.len(), max));
    }
    let f = std::fs::File::open(path)
        .map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))?;
    Ok((f, meta.len()))
}

/// As `read_bytes`, as UTF-8 text.
pub fn read_text(path: &Path, max: u64, what: &str) -> Result<String, String> {
    let bytes = read_bytes(path, max, what)?;
    String::from_utf8(bytes).map_err(|_| format!("the {what} {} is not UTF-8 text", path.display()))
}

/// Reads standard input as text, at most `max` bytes.
pub fn read_stdin_text(max: u64, what: &str) -> Result<String, String> {
    let bytes = read_limited(std::io::stdin().lock(), max).map_err(|e| match e {
        Limited::Io(e) => format!("cannot read the {what} from standard input: {e}"),
        Limited::TooBig => format!(
            "the {what} on standard input is larger than {} MB; at most that is read",
            max >> 20
        ),
    })?;
    String::from_utf8(bytes).map_err(|_| format!("the {what} on standard input is not UTF-8 text"))
}

enum Limited {
    Io(std::io::Error),
    TooBig,
}

fn read_limited(r: impl Read, max: u64) -> Result<Vec<u8>, Limited> {
    let mut buf = Vec::new();
    r.take(max + 1).read_to_end(&mut buf).map_err(Limited::Io)?;
    if buf.len() as u64 > max {
        return Err(Limited::TooBig);
    }
    Ok(buf)
}

fn too_big(path: &Path, what: &str, size: u64, max: u64) -> String {
    format!(
        "the {what} {} has {size} bytes, more than the {max} ({} MB) fabricsim reads",
        path.display(),
        max >> 20
    )
}
