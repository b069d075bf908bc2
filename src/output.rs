//! Output folders: files written whole, temporaries no one else can
//! predict, and nothing removed that fabricsim did not write.
//!
//! Every temporary (a staging folder, a capture being written, a file
//! about to be renamed into place) is created with a random name and
//! `O_EXCL` (by the `tempfile` crate), so a link planted in a shared
//! folder is never followed. Its name also carries the process id, so a
//! later run can tell the leftovers of a run that was killed (`SIGKILL`
//! leaves them) from those of a run still going, and removes only the
//! former. A run's folder keeps a list of the files the run wrote
//! (`MANIFEST`); the next run into the same folder removes the files of
//! that list it does not write again, and nothing else.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The list of files the last run wrote into its folder.
pub const MANIFEST: &str = ".fabricsim-outputs";

/// Start of every temporary's name: `.fabricsim-KIND-PID-RANDOM`.
const TEMP_PREFIX: &str = ".fabricsim-";

fn temp_prefix(kind: &str) -> String {
    format!("{TEMP_PREFIX}{kind}-{}-", std::process::id())
}

/// Writes a file whole or not at all: a random temporary beside it, then
/// a rename (which replaces a link at `path` rather than following it).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(&temp_prefix("tmp"))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A private staging folder inside `dir` (mode 0700, random name),
/// removed when dropped.
pub fn stage_in(dir: &Path, kind: &str) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&temp_prefix(kind))
        .tempdir_in(dir)
}

/// A new temporary file inside `dir` (random name, `O_EXCL`), removed
/// when dropped unless persisted.
pub fn temp_file_in(dir: &Path, kind: &str) -> std::io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(&temp_prefix(kind))
        .tempfile_in(dir)
}

/// Makes sure results can be written into `dir` before anything is run:
/// creates it if needed and creates and removes a temporary file in it.
pub fn check_writable(dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir)
        .and_then(|()| temp_file_in(dir, "check").map(drop))
        .map_err(|e| format!("{}: cannot write results here: {e}", dir.display()))
}

/// Removes what runs that no longer exist left in `dir`: temporaries
/// named by this module whose process id is not running. Only where
/// `/proc` tells which processes run; elsewhere nothing is removed.
pub fn remove_dead_leftovers(dir: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(TEMP_PREFIX) else {
            continue;
        };
        // KIND-PID-RANDOM
        let mut parts = rest.splitn(3, '-');
        let (Some(_kind), Some(pid), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = e.path();
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => {
                let _ = fs::remove_dir_all(&path);
            }
            Ok(_) => {
                let _ = fs::remove_file(&path);
            }
            Err(_) => {}
        }
    }
}

/// Whether `name` could be a file fabricsim wrote into its own folder: a
/// plain name, no separator, not a dot file. Names read back from a
/// manifest are checked with this before anything is removed.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && !name.contains('/')
        && !name.contains('\\')
        && !name.chars().any(char::is_control)
}

/// After a run's files are in place: removes the files the previous run
/// listed in `dir`'s manifest that this run did not write again (an
/// earlier run's `collectives.csv`, `ts_*` or plots), then lists this
/// run's. Files the manifest does not list are never touched, nor
/// anything that is not a regular file.
pub fn replace_manifest(dir: &Path, written: &[PathBuf]) -> std::io::Result<()> {
    let names: Vec<String> = written
        .iter()
        .filter_map(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    let manifest = dir.join(MANIFEST);
    if let Ok(old) = fs::read_to_string(&manifest) {
        for old_name in old.lines().filter(|n| plain_name(n)) {
            if names.iter().any(|n| n == old_name) {
                continue;
            }
            let p = dir.join(old_name);
            if fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
                fs::remove_file(&p)?;
            }
        }
    }
    let mut text = String::new();
    for n in &names {
        text.push_str(n);
        text.push('\n');
    }
    write_atomic(&manifest, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_names_that_are_not_plain_are_ignored() {
        for bad in ["", ".hidden", "../x", "a/b", "a\\b", "a\nb"] {
            assert!(!plain_name(bad), "{bad:?}");
        }
        assert!(plain_name("ts_queue_depth.csv"));
    }
}
