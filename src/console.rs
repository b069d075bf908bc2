//! Printing to standard output and standard error without ever panicking.
//!
//! `print!` and `eprint!` panic when the write fails, which turns a closed
//! pipe (`fabricsim topo --json | head`) or a full disk (`> /dev/full`)
//! into a crash, and can lose results when it happens before they are
//! written. Here a failed write to standard output ends printing: a
//! closed pipe means the reader has what it wanted, any other error is
//! remembered so the command can say so (on standard error) and exit
//! with `EXIT_IO`. Standard error is best effort: if it is gone there is
//! nowhere left to complain. Results files never depend on either.

use std::fmt;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicU8, Ordering};

/// Exit status of a command whose printed output could not be written
/// (sysexits' EX_IOERR).
pub const EXIT_IO: u8 = 74;

const OK: u8 = 0;
const CLOSED: u8 = 1;
const FAILED: u8 = 2;

static STDOUT: AtomicU8 = AtomicU8::new(OK);
static STDOUT_ERROR: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Writes to standard output unless an earlier write failed.
pub fn out(args: fmt::Arguments) {
    if STDOUT.load(Ordering::Relaxed) != OK {
        return;
    }
    let mut lock = std::io::stdout().lock();
    if let Err(e) = lock.write_fmt(args).and_then(|_| lock.flush()) {
        note_stdout_error(e);
    }
}

fn note_stdout_error(e: std::io::Error) {
    if e.kind() == ErrorKind::BrokenPipe {
        STDOUT.store(CLOSED, Ordering::Relaxed);
    } else {
        STDOUT.store(FAILED, Ordering::Relaxed);
        if let Ok(mut m) = STDOUT_ERROR.lock() {
            *m = Some(e.to_string());
        }
    }
}

/// Writes to standard error; a failure is ignored.
pub fn err(args: fmt::Arguments) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// Why standard output could not be written, unless it was only closed
/// by its reader (which is a normal end of printing).
pub fn stdout_failure() -> Option<String> {
    if STDOUT.load(Ordering::Relaxed) == FAILED {
        STDOUT_ERROR
            .lock()
            .ok()
            .and_then(|m| m.clone())
            .or(Some("write failed".into()))
    } else {
        None
    }
}

/// Like `print!`, never panicking (see the module).
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::console::out(format_args!($($t)*)) };
}

/// Like `println!`, never panicking (see the module).
#[macro_export]
macro_rules! outln {
    () => { $crate::console::out(format_args!("\n")) };
    ($($t:tt)*) => { $crate::console::out(format_args!("{}\n", format_args!($($t)*))) };
}

/// Like `eprintln!`, never panicking (see the module).
#[macro_export]
macro_rules! errln {
    ($($t:tt)*) => { $crate::console::err(format_args!("{}\n", format_args!($($t)*))) };
}
