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
/// a rename over what is there (see `put_file` for what is not replaced).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(special) = special_target(path)? {
        return write_into(&special, bytes);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(&temp_prefix("tmp"))
        .permissions(as_created())
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Puts the finished file `staged` at `path`: renamed over a regular file
/// or into a free name, its bytes written into a special file.
/// `staged` is gone afterwards, put in place or not.
pub fn put_file(staged: &Path, path: &Path) -> std::io::Result<()> {
    let put = special_target(path).and_then(|special| match special {
        Some(special) => write_into(&special, &fs::read(staged)?),
        None => fs::rename(staged, path),
    });
    if fs::symlink_metadata(staged).is_ok() {
        let _ = fs::remove_file(staged);
    }
    put
}

/// What a file written to `path` goes into. `None`: nothing is there, or
/// a regular file, which a rename replaces. `Some(p)`: a FIFO, a device
/// or a socket, which is written into as it is (`/dev/null`, a named
/// pipe a reader waits on, `/dev/stdout` through its link); a rename
/// would put a regular file in its place (as root, over the system's
/// `/dev/full`). A link to anything else, or a folder, is an error: a
/// rename would replace the link, and following it would write where a
/// link planted in a shared folder points.
fn special_target(path: &Path) -> std::io::Result<Option<PathBuf>> {
    let here = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let kind = here.file_type();
    if kind.is_file() {
        return Ok(None);
    }
    if kind.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is a folder, not a file",
            path.display()
        )));
    }
    if kind.is_symlink() {
        // A process's own descriptors by name (`--svg /dev/stdout`): what
        // the shell opened for it, whatever it is.
        if own_descriptor(path).is_some() {
            return Ok(Some(path.to_path_buf()));
        }
        return match fs::metadata(path) {
            Ok(m) if is_special(&m.file_type()) => Ok(Some(path.to_path_buf())),
            _ => Err(std::io::Error::other(format!(
                "{} is a symbolic link; fabricsim neither writes through it nor replaces it: name the file itself",
                path.display()
            ))),
        };
    }
    Ok(Some(path.to_path_buf()))
}

fn is_special(t: &fs::FileType) -> bool {
    use std::os::unix::fs::FileTypeExt;
    t.is_fifo() || t.is_char_device() || t.is_block_device() || t.is_socket()
}

/// The descriptor `path` names among the process's own: `/dev/stdout`,
/// `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`.
fn own_descriptor(path: &Path) -> Option<i32> {
    let s = path.to_str()?;
    match s {
        "/dev/stdout" => Some(1),
        "/dev/stderr" => Some(2),
        _ => s
            .strip_prefix("/dev/fd/")
            .or_else(|| s.strip_prefix("/proc/self/fd/"))
            .and_then(|n| n.parse().ok()),
    }
}

/// Writes `bytes` into the special file at `path`, as it is. A named pipe
/// that no process reads is an error, not a wait without end. One of the
/// process's own descriptors is written through a copy of it, so that
/// what goes there follows what was printed before (a file the shell
/// redirected standard output to keeps both).
fn write_into(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::{AsRawFd, FromRawFd};
    if let Some(fd) = own_descriptor(path) {
        // Printed text waiting in the buffer goes first.
        let _ = std::io::stdout().flush();
        // SAFETY: dup makes a new descriptor, which the File owns.
        let copy = unsafe { libc::dup(fd) };
        if copy < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut file = unsafe { fs::File::from_raw_fd(copy) };
        file.write_all(bytes)?;
        return file.flush();
    }
    let file = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ENXIO) {
                std::io::Error::other("a named pipe no process reads")
            } else {
                e
            }
        })?;
    // Opened without waiting for a reader; written as any file is.
    // SAFETY: fcntl on a descriptor this function owns, with flags it read.
    unsafe {
        let fd = file.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
    let mut file = file;
    file.write_all(bytes)?;
    file.flush()
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
        .permissions(as_created())
        .tempfile_in(dir)
}

/// The mode a file gets when created the ordinary way (0666 less the
/// umask, so 0644 as a rule): a temporary that becomes an output must not
/// keep the 0600 of a private one. Nobody can open it first all the same:
/// it is made with a random name and `O_EXCL`.
fn as_created() -> fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    fs::Permissions::from_mode(0o666)
}

/// Makes sure results can be written into `dir` before anything is run:
/// creates it if needed and creates and removes a temporary file in it.
pub fn check_writable(dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir)
        .and_then(|()| temp_file_in(dir, "check").map(drop))
        .map_err(|e| format!("{}: cannot write results here: {e}", dir.display()))
}

/// Whether a run may write into `dir`: refused where it holds a file a
/// run would write (`summary.json`, `flows.csv`, a `plot_*.svg`...) that
/// the folder's manifest does not list, so a file of the user's own is
/// never replaced (a folder that holds no run's outputs has no manifest).
pub fn check_run_folder(dir: &Path) -> Result<(), String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(());
    };
    let listed = fs::read_to_string(dir.join(MANIFEST)).unwrap_or_default();
    let listed: Vec<&str> = listed.lines().collect();
    let mut foreign: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| is_run_output(n) && !listed.contains(&n.as_str()))
        .collect();
    if foreign.is_empty() {
        return Ok(());
    }
    foreign.sort();
    let more = foreign.len().saturating_sub(3);
    foreign.truncate(3);
    Err(format!(
        "{} holds {}{}, which no run wrote there (the folder has no {MANIFEST} list naming it); a run would replace it. Give --out a new folder, or one an earlier run wrote",
        dir.display(),
        foreign.join(", "),
        if more > 0 { format!(" and {more} more") } else { String::new() }
    ))
}

/// A name a run's outputs may take (`report::write_outputs` asserts
/// each name it writes is one).
pub(crate) fn is_run_output(name: &str) -> bool {
    const FIXED: [&str; 13] = [
        "summary.json",
        "requests.csv",
        "perf.json",
        "flows.csv",
        "links.csv",
        "queues.csv",
        "pfc.csv",
        "qps.csv",
        "groups.csv",
        "collectives.csv",
        "jobs.csv",
        "report.html",
        "capture.pcapng",
    ];
    FIXED.contains(&name)
        || (name.starts_with("ts_") && name.ends_with(".csv"))
        || (name.starts_with("plot_") && name.ends_with(".svg"))
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
