//! The Windows half of `sys::process`: the names the supervisor
//! (`process/`) and the handlers call on Unix, with what Windows does.
//!
//! Stand-ins so far (issue 43): no child is ever started on Windows yet
//! (`process/windows/launch.rs` answers every spawn with the OS's "not
//! supported"), so nothing here is reached for a live child. Helper
//! wproc's Job Object primitives (spawn with piped stdio in a job with
//! `KILL_ON_JOB_CLOSE`, kill the tree, wait) go in this file and are wired
//! in behind these names: `signal_group` ends the job, `wait_exit` waits
//! on the process handle, `reap` closes it.

use std::io;

/// Go's `syscall.SIGKILL` on Windows (the numbers are Go's, not the OS's:
/// Windows has no signals, and Go maps Kill to `TerminateProcess`).
pub(crate) const SIGKILL: i32 = 9;
/// Go's `syscall.SIGTERM` on Windows.
pub(crate) const SIGTERM: i32 = 15;
/// Go's `syscall.SIGINT` on Windows.
const SIGINT: i32 = 2;
/// Go's `syscall.SIGHUP` on Windows.
const SIGHUP: i32 = 1;

/// Parses a `signal` param as the Unix half does (`TERM`, `KILL`, `INT`,
/// `HUP`, with or without `SIG`; anything else is SIGTERM), to Go's
/// Windows numbers.
pub(crate) fn parse_signal(name: &str) -> i32 {
    match name {
        "KILL" | "SIGKILL" => SIGKILL,
        "INT" | "SIGINT" => SIGINT,
        "HUP" | "SIGHUP" => SIGHUP,
        _ => SIGTERM,
    }
}

/// The SIG-prefixed name an exit frame carries, for Go's Windows signal
/// numbers (only a kill ends a Windows child "by signal").
pub(crate) fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        SIGHUP => "SIGHUP",
        SIGINT => "SIGINT",
        SIGKILL => "SIGKILL",
        SIGTERM => "SIGTERM",
        _ => return None,
    })
}

/// Sends `signal` to the child `pid` only. Stand-in: no child exists on
/// Windows yet; with wproc's primitives, a SIGKILL terminates the process.
pub(crate) fn signal_child(_pid: i32, _signal: i32) {}

/// Sends `signal` to the child's whole tree. Stand-in: no child exists on
/// Windows yet; with wproc's primitives, this terminates the child's Job
/// Object (Windows has no polite signal to a tree: every signal kills).
pub(crate) fn signal_group(_pgid: i32, _signal: i32) {}

/// How a child ended, as the exit frame reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExitStatus {
    /// The exit code, or -1 when the child was killed.
    pub code: i64,
    /// The "signal" that ended it (Go's Windows numbers), when killed.
    pub signal: Option<i32>,
}

/// Waits for the child `pid` to exit. Stand-in: no child exists on
/// Windows yet, so there is nothing to wait for.
pub(crate) async fn wait_exit(_pid: i32) -> io::Result<ExitStatus> {
    Err(io::Error::from_raw_os_error(ERROR_NOT_SUPPORTED))
}

/// Releases an exited child. Stand-in: nothing is held yet, so it is gone.
pub(crate) fn reap(_pid: i32) -> bool {
    true
}

/// No spawner on Windows: children are started with `CreateProcess`.
pub(crate) fn stop_spawner() {}

/// `ERROR_NOT_SUPPORTED`: "The request is not supported."
pub(crate) const ERROR_NOT_SUPPORTED: i32 = 50;
