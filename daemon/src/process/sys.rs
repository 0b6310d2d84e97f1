//! The few raw OS calls the supervisor needs: signal names, signalling a
//! process group, and observing a child's exit *without reaping it*.
//!
//! Why not reap at once: a child that is a zombie keeps its pid, and so its
//! process-group id, reserved. While the supervisor has not reaped the
//! leader, `kill(-pgid)` can only ever reach our own group, never a
//! recycled one. The supervisor therefore observes the exit with
//! `waitid(WNOWAIT)`, drains the pipes, and reaps last; teardown paths
//! (id reuse, shutdown) can still SIGKILL grandchildren that linger in the
//! group after the leader exited.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// Parses a `signal` param: a name with or without the `SIG` prefix, any
/// case. Empty means SIGTERM, and so does an unknown name (the request is
/// fire-and-forget; a typo should still stop the process politely rather
/// than be silently ignored or rejected with a code the contract lacks).
pub fn parse_signal(name: &str) -> i32 {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    match bare {
        "TERM" => libc::SIGTERM,
        "KILL" => libc::SIGKILL,
        "INT" => libc::SIGINT,
        "HUP" => libc::SIGHUP,
        "QUIT" => libc::SIGQUIT,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "ABRT" => libc::SIGABRT,
        "ALRM" => libc::SIGALRM,
        "PIPE" => libc::SIGPIPE,
        "STOP" => libc::SIGSTOP,
        "CONT" => libc::SIGCONT,
        "TSTP" => libc::SIGTSTP,
        "TTIN" => libc::SIGTTIN,
        "TTOU" => libc::SIGTTOU,
        "WINCH" => libc::SIGWINCH,
        _ => libc::SIGTERM,
    }
}

/// Sends `signal` to the process group `pgid` (the child is its group's
/// leader). Errors (ESRCH: the group is already empty) are ignored: every
/// caller is best-effort.
pub fn signal_group(pgid: i32, signal: i32) {
    if pgid > 1 {
        // SAFETY: plain syscall; a negative pid addresses the group.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

/// How a child ended, as the exit frame reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    /// The exit code, or -1 when a signal ended the child (Go's
    /// `ProcessState.ExitCode()`).
    pub code: i64,
    /// The terminating signal's number, when a signal ended the child.
    pub signal: Option<i32>,
}

fn exit_status_of(info: &libc::siginfo_t) -> ExitStatus {
    // SAFETY: si_status is valid for SIGCHLD siginfo filled by waitid.
    let status = unsafe { info.si_status() };
    match info.si_code {
        libc::CLD_EXITED => ExitStatus {
            code: i64::from(status),
            signal: None,
        },
        libc::CLD_KILLED | libc::CLD_DUMPED => ExitStatus {
            code: -1,
            signal: Some(status),
        },
        _ => ExitStatus { code: -1, signal: None },
    }
}

/// The SIG-prefixed name the exit frame's `signal` carries (build
/// 4534d86). The table is Linux's signals 1..=31 under their canonical
/// names; anything else (the real-time signals) has no name, and the
/// frame then omits `signal`, as an empty omitempty string would.
pub fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSTKFLT => "SIGSTKFLT",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGIO => "SIGIO",
        libc::SIGPWR => "SIGPWR",
        libc::SIGSYS => "SIGSYS",
        _ => return None,
    })
}

/// `waitid(P_PID, pid, WEXITED | WNOWAIT | extra)`: Some(code) once the
/// child has exited (it stays a zombie), None if it is still running (only
/// with WNOHANG in `extra`).
fn peek_exit(pid: i32, extra: i32) -> io::Result<Option<ExitStatus>> {
    loop {
        // SAFETY: zeroed siginfo is a valid out-parameter for waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: plain syscall writing into `info`.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT | extra,
            )
        };
        if rc == 0 {
            // SAFETY: si_pid is valid after a successful waitid.
            if unsafe { info.si_pid() } == 0 {
                return Ok(None);
            }
            return Ok(Some(exit_status_of(&info)));
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// Waits until child `pid` has exited, without reaping it. Uses a pidfd
/// (readable once the process exits) so no thread is parked per child;
/// falls back to a blocking `waitid` on the blocking pool where pidfds are
/// unavailable.
pub async fn wait_exit(pid: i32) -> io::Result<ExitStatus> {
    if let Some(fd) = pidfd_open(pid) {
        // SAFETY: `fd` is an OwnedFd moved into the AsyncFd, so it stays
        // open (and is not replaced) for as long as it is registered.
        let registered = unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) };
        if let Ok(async_fd) = registered {
            loop {
                let mut guard = async_fd.readable().await?;
                if let Some(status) = peek_exit(pid, libc::WNOHANG)? {
                    return Ok(status);
                }
                guard.clear_ready();
            }
        }
    }
    match tokio::task::spawn_blocking(move || peek_exit(pid, 0)).await {
        Ok(Ok(Some(status))) => Ok(status),
        Ok(Ok(None)) => Err(io::Error::from_raw_os_error(libc::ECHILD)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(io::Error::other("wait task failed")),
    }
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: plain syscall; on success we own the returned descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return None;
    }
    let fd = i32::try_from(fd).ok()?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reaps child `pid` if it has exited (WNOHANG). Returns true when the pid
/// is gone (reaped now, or not our child any more).
pub fn reap(pid: i32) -> bool {
    let mut status = 0;
    loop {
        // SAFETY: plain syscall writing into `status`.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc == pid {
            return true;
        }
        if rc == 0 {
            return false;
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return true;
        }
    }
}

/// Whether `/proc/<pid>` exists (used by tests and diagnostics).
pub fn pid_exists(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_are_case_insensitive_with_optional_prefix() {
        assert_eq!(parse_signal(""), libc::SIGTERM);
        assert_eq!(parse_signal("TERM"), libc::SIGTERM);
        assert_eq!(parse_signal("sigkill"), libc::SIGKILL);
        assert_eq!(parse_signal("Kill"), libc::SIGKILL);
        assert_eq!(parse_signal("SIGINT"), libc::SIGINT);
        assert_eq!(parse_signal("hup"), libc::SIGHUP);
        assert_eq!(parse_signal("USR2"), libc::SIGUSR2);
        assert_eq!(parse_signal("bogus"), libc::SIGTERM);
        assert_eq!(parse_signal("9"), libc::SIGTERM);
    }

    #[test]
    fn signal_names_cover_the_classic_signals_only() {
        assert_eq!(signal_name(libc::SIGTERM), Some("SIGTERM"));
        assert_eq!(signal_name(libc::SIGKILL), Some("SIGKILL"));
        assert_eq!(signal_name(libc::SIGSEGV), Some("SIGSEGV"));
        for n in 1..=31 {
            assert!(signal_name(n).is_some_and(|s| s.starts_with("SIG")), "{n}");
        }
        assert_eq!(signal_name(0), None);
        assert_eq!(signal_name(libc::SIGRTMIN()), None);
        assert_eq!(signal_name(64), None);
    }
}
