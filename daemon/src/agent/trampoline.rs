//! The exec-child trampoline: on Linux, while
//! the daemon records its children ([`crate::rundir::childrec`]), a spawned child
//! starts as `/proc/self/exe --exec-child <report fd> <path> <argv0>
//! <args…>`, a fresh copy of this binary that stamps the child's own
//! identity into its environment and then `execve`s the real program in
//! the same process.
//!
//! The stamp is `CLAUDE_SSH_CHILD=<pid>:<start ticks>` (the process's own
//! pid and its `/proc` start time), appended after `CLAUDE_SSH_RUN_DIR` so
//! the two markers are always the last two entries. The next daemon's
//! orphan reap only signals a recorded process whose marker names itself:
//! a process that merely inherited the environment of one of our children
//! (anything a child started) carries its parent's pid and start, so it
//! is never mistaken for a child even when it leads its own group and runs
//! the recorded program at a reused pid. A caller's values for the two
//! variables never reach the program.
//!
//! The spawn reply must stay what a direct spawn answers: an `execve`
//! failure in the trampoline (missing file, no permission, not an
//! executable format) is written as the 4-byte errno to the report pipe
//! (close-on-exec, so a successful exec leaves it empty) and the daemon
//! answers `fork/exec <path>: <errno text>` as before. If the trampoline
//! itself cannot start, the daemon logs it and starts the program
//! directly (without the marker, so a successor will not reap it).
//!
//! The reference also parks Go runtime variables (`GODEBUG`, `GOGC`, …)
//! across its re-exec because its trampoline is a Go program; this one is
//! not affected by them, so they pass through unchanged and the program
//! sees the same values either way. macOS has no `/proc`: no records are
//! written there, so no trampoline runs.

use crate::rundir::childrec::{CHILD_ENV, RUN_DIR_ENV};
use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// The first argument that selects trampoline mode.
pub(crate) const FLAG: &str = "--exec-child";
/// What the daemon executes to start the trampoline.
pub(crate) const SELF_EXE: &str = "/proc/self/exe";
/// Exit status of a trampoline whose `execve` failed.
const EXEC_FAILED: i32 = 127;

/// Whether children start through the trampoline in this daemon.
pub(crate) fn enabled() -> bool {
    cfg!(target_os = "linux") && crate::rundir::childrec::child_marker().is_some()
}

/// The trampoline's arguments (after the program name) for running
/// `program` as `argv0 args…`, reporting an exec failure on `report_fd`.
pub(crate) fn arguments(report_fd: i32, program: &str, argv0: &str, args: &[String]) -> Vec<String> {
    let mut out = vec![
        FLAG.to_string(),
        report_fd.to_string(),
        program.to_string(),
        argv0.to_string(),
    ];
    out.extend(args.iter().cloned());
    out
}

/// Trampoline mode: `args` is the whole argv (`[self, FLAG, fd, path,
/// argv0, …]`). Returns only when the exec failed (the exit status).
pub(crate) fn run(args: &[OsString]) -> i32 {
    let report_fd = args
        .get(2)
        .and_then(|a| a.to_str())
        .and_then(|a| a.parse::<i32>().ok())
        .filter(|fd| *fd > 2);
    let (Some(program), Some(_)) = (args.get(3), args.get(4)) else {
        return EXEC_FAILED;
    };
    if let Some(fd) = report_fd {
        // SAFETY: marks our own descriptor close-on-exec; a bad number fails harmlessly.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    let errno = exec(program, &args[4..]);
    if let Some(fd) = report_fd {
        crate::sys::process::write_exec_report(fd, errno);
    }
    EXEC_FAILED
}

/// `execve(program, argv, env + markers)`; returns the errno on failure.
fn exec(program: &OsString, argv: &[OsString]) -> i32 {
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() };
    let mut env: Vec<OsString> = Vec::new();
    let mut run_dir = None;
    for (k, v) in std::env::vars_os() {
        if k == RUN_DIR_ENV {
            run_dir = Some(v);
        } else if !is_marker(&k) {
            env.push(pair(&k, &v));
        }
    }
    if let Some(dir) = run_dir {
        env.push(pair(OsStr::new(RUN_DIR_ENV), &dir));
    }
    if let Some(start) = crate::rundir::childrec::start_ticks(pid) {
        env.push(pair(OsStr::new(CHILD_ENV), OsStr::new(&format!("{pid}:{start}"))));
    }
    let to_c = |s: &OsString| CString::new(s.as_bytes().to_vec()).ok();
    let (Some(path), Some(argv), Some(env)) = (
        to_c(program),
        argv.iter().map(to_c).collect::<Option<Vec<_>>>(),
        env.iter().map(to_c).collect::<Option<Vec<_>>>(),
    ) else {
        return libc::EINVAL;
    };
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut env_ptrs: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());
    // The Rust runtime of this copy ignored SIGPIPE at start-up; the
    // program must start with the default, as a direct spawn does.
    // SAFETY: resetting a disposition, then execve with NUL-terminated
    // arrays that outlive the call.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::execve(path.as_ptr(), argv_ptrs.as_ptr(), env_ptrs.as_ptr());
    }
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// Whether `name` is one of the two markers, which only the stamp sets.
fn is_marker(name: &OsStr) -> bool {
    name == RUN_DIR_ENV || name == CHILD_ENV
}

/// The environment a child starts with, as `key=value` entries, and the
/// name of the stamp the spawner appends (its own pid and start), for a
/// child started without this trampoline but as if through it: what
/// `Command::env_clear().envs(env)` and the run-dir marker pass (sorted by
/// name, a name's last value winning), and, when the trampoline is
/// [`enabled`], that list as its copy reads it back (an entry with no `=`
/// after its first byte is not a variable to it) without the markers,
/// then the run-dir marker last. So the program sees the same list either
/// way.
pub(crate) fn child_environment(env: &[(OsString, OsString)]) -> (Vec<OsString>, Option<&'static str>) {
    let mut map: std::collections::BTreeMap<&OsStr, &OsStr> =
        env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str())).collect();
    let marker = crate::rundir::childrec::child_marker();
    if let Some((name, dir)) = marker {
        map.insert(OsStr::new(name), dir.as_os_str());
    }
    let entries = map.iter().map(|(k, v)| pair(k, v));
    let Some((_, dir)) = marker.filter(|_| enabled()) else {
        return (entries.collect(), None);
    };
    let mut out: Vec<OsString> = entries
        .filter(|e| {
            let b = e.as_bytes();
            // std's reading of `environ`: the name ends at the first `=`
            // after the first byte.
            let name = b
                .get(1..)
                .and_then(|rest| rest.iter().position(|&c| c == b'='))
                .map(|at| &b[..at + 1]);
            name.is_some_and(|n| !is_marker(OsStr::from_bytes(n)))
        })
        .collect();
    out.push(pair(OsStr::new(RUN_DIR_ENV), dir.as_os_str()));
    (out, Some(CHILD_ENV))
}

fn pair(k: &OsStr, v: &OsStr) -> OsString {
    let mut bytes = k.as_bytes().to_vec();
    bytes.push(b'=');
    bytes.extend_from_slice(v.as_bytes());
    OsString::from_vec(bytes)
}
