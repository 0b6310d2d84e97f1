//! Linux side of [`super`]: a pidfd reports a child's exit and carries
//! the signals of [`super::pidref`], `F_SETPIPE_SZ` grows a pipe,
//! `/proc/<pid>` answers liveness and start times, and Linux's signal
//! table names the exit frame's signal.

use std::io;

pub(crate) use super::spawner::{run as run_spawner, spawn as spawn_via_helper, stop as stop_spawner};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `pidfd_send_signal`'s flag (Linux 6.9) that sends to the process group
/// the pidfd's process leads, named by that process's own `struct pid`:
/// the group it reaches is the original one even after its leader was
/// reaped and the number reused. Older kernels refuse the flag (EINVAL).
const PIDFD_SIGNAL_PROCESS_GROUP: libc::c_uint = 1 << 2;

/// A pidfd for `pid`: it names that very process until the descriptor is
/// closed, whatever later holds the number, and turns readable once the
/// process has exited. `None` when there is no such process, on kernels
/// before 5.3, or where a seccomp filter forbids the call.
pub(super) fn open_pidfd(pid: i32) -> Option<OwnedFd> {
    // SAFETY: plain syscall; on success we own the returned descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return None;
    }
    let fd = i32::try_from(fd).ok()?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `pidfd_send_signal(fd, signal)`: to the pidfd's process, or with
/// `group` to the group it leads (see [`PIDFD_SIGNAL_PROCESS_GROUP`]).
/// Signal 0 sends nothing and only asks whether the target still exists
/// (a zombie does; a reaped process does not: ESRCH).
pub(super) fn pidfd_signal(fd: &OwnedFd, signal: i32, group: bool) -> io::Result<()> {
    let flags = if group { PIDFD_SIGNAL_PROCESS_GROUP } else { 0 };
    // SAFETY: plain syscall on a descriptor we own; no siginfo is passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            flags,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// When process `pid` started, in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`); `None` when there is no such process. A zombie
/// still answers.
pub(super) fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid …": comm may hold spaces or ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    rest.split(' ').nth(19)?.parse().ok()
}

/// Whether process `pid` is a zombie (exited, not reaped yet): state `Z`
/// (or `X`, on its way out) in `/proc/<pid>/stat`.
pub(super) fn zombie(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    stat.rsplit_once(')')
        .is_some_and(|(_, rest)| matches!(rest.trim_start().chars().next(), Some('Z' | 'X')))
}

/// The exit notifier is the pidfd itself.
pub(super) fn exit_notifier(pid: i32) -> Option<OwnedFd> {
    open_pidfd(pid)
}

/// Whether the pidfd reports the exit now. Its readiness is a state, not
/// a queued event: readable once the process has exited, and no further
/// edge follows.
pub(super) fn take_exit_event(fd: &OwnedFd) -> bool {
    // A pidfd is readable exactly when the process has exited; a readiness
    // without that (a spurious wake) must not send the caller to a
    // blocking wait that would hold a pool thread for the child's life.
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout: never blocks.
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    n == 1 && pfd.revents & libc::POLLIN != 0
}

/// Sets the pipe's capacity to `size` bytes; false when the kernel refused
/// (over `pipe-max-size` or the user's pipe budget).
pub(crate) fn resize_pipe(fd: RawFd, size: i32) -> bool {
    // SAFETY: fcntl on a descriptor the caller owns.
    unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, size) >= 0 }
}

/// The SIG-prefixed name the exit frame's `signal` carries (build
/// 4534d86). The table is Linux's signals 1..=31 under their canonical
/// names; anything else (the real-time signals) has no name, and the
/// frame then omits `signal`, as an empty omitempty string would.
pub(crate) fn signal_name(signal: i32) -> Option<&'static str> {
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

/// Whether `/proc/<pid>` exists (tests and diagnostics; a zombie counts).
#[cfg(test)]
pub(crate) fn pid_exists(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_pidfd_turns_readable_when_the_child_exits() {
        let mut child = std::process::Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
        let fd = exit_notifier(child.id() as i32).expect("pidfd_open");
        let mut pfd = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&fd),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 10_000) };
        assert_eq!(n, 1, "the pidfd became readable");
        assert_eq!(child.wait().unwrap().code(), Some(3));
    }
}
