//! The few raw OS calls the supervisor needs: signal names, signalling a
//! process group, observing a child's exit *without reaping it*, and a
//! hold on a process that its pid number cannot outlive ([`PidRef`], in
//! `pidref.rs`) for every signal to a process that is not an unreaped
//! child. `PidRef` is this crate's one public item below `sys`: the test
//! suite and the harness signal through it too.
//!
//! Why not reap at once: a child that is a zombie keeps its pid, and so its
//! process-group id, reserved. While the supervisor has not reaped the
//! leader, `kill(-pgid)` can only ever reach our own group, never a
//! recycled one. The supervisor therefore observes the exit with
//! `waitid(WNOWAIT)`, drains the pipes, and reaps last; teardown paths
//! (id reuse, shutdown) can still SIGKILL grandchildren that linger in the
//! group after the leader exited.
//!
//! What POSIX offers alike on every supported system (`kill`, `waitid`
//! with `WNOWAIT`, `waitpid`) lives here; what differs sits in one small
//! module per platform, with the same functions: `linux.rs` (a pidfd
//! signals the exit, `F_SETPIPE_SZ` grows pipes, `/proc` answers liveness,
//! Linux's signal table) and `macos.rs` (a kqueue `EVFILT_PROC` filter
//! signals the exit, pipes keep their size, `kill(pid, 0)` answers
//! liveness, Darwin's signal table). Both keep the invariant above: the
//! exit is only *observed* there, and reaping stays with [`reap`].

use std::io;

#[cfg(unix)]
mod execreport;
mod pidref;
#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod platform;
#[cfg(target_os = "macos")]
#[path = "macos.rs"]
mod platform;
#[cfg(target_os = "linux")]
mod spawner;

pub(crate) use execreport::{exec_report_pipe, read_exec_report, write_exec_report};
#[cfg(all(test, target_os = "linux"))]
pub(crate) use pidref::pidns;
#[cfg(test)]
pub(crate) use pidref::without_group_pidfd;
pub use pidref::{GroupError, PidRef};
pub(crate) use platform::{resize_pipe, run_spawner, signal_name, spawn_via_helper, stop_spawner};

/// The first argument that selects spawner mode (`spawner.rs`, Linux):
/// the helper that starts children at a cost that does not grow with
/// how many run.
pub(crate) const SPAWNER_FLAG: &str = "--spawner";

/// The signal that ends a child at once.
pub(crate) const SIGKILL: i32 = libc::SIGKILL;
/// The signal that asks a child to stop.
pub(crate) const SIGTERM: i32 = libc::SIGTERM;

/// What one spawn through the helper asks for. Every string is free of
/// NUL bytes (the caller checks; a NUL is refused with `EINVAL`).
// Read only by the Linux spawner: macOS starts children itself.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) struct SpawnRequest<'a> {
    pub program: &'a std::ffi::OsStr,
    /// Empty: the helper's own, which is the daemon's.
    pub cwd: &'a std::ffi::OsStr,
    pub argv: &'a [&'a std::ffi::OsStr],
    /// `key=value` entries, in order.
    pub env: &'a [std::ffi::OsString],
    /// Append `<stamp>=<pid>:<start ticks>` (the child's own) as the last
    /// entry.
    pub stamp: Option<&'a str>,
}

/// How a spawn through the helper went.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) enum HelperSpawn {
    /// The child runs.
    Spawned(Spawned),
    /// The spawn's own error: a pipe, the clone, the `chdir` or the exec
    /// failed (a child that existed was reaped), or the helper stopped
    /// while starting it.
    Failed(std::io::Error),
    /// No helper: nothing was started, the caller starts the child
    /// itself. With what went wrong just now, for the log.
    NoHelper(Option<String>),
}

/// A child the helper started: its pid (a child of this process) and
/// this process's ends of its pipes.
pub(crate) struct Spawned {
    pub pid: i32,
    pub stdin: std::os::fd::OwnedFd,
    pub stdout: std::os::fd::OwnedFd,
    pub stderr: std::os::fd::OwnedFd,
}

/// Parses a `signal` param as the reference does: exactly `TERM`, `KILL`,
/// `INT`, `HUP`, with or without the `SIG` prefix, case-sensitive. Anything
/// else (empty, `term`, `QUIT`, a number) means SIGTERM: the request is
/// fire-and-forget, and a stray value still stops the process politely.
pub(crate) fn parse_signal(name: &str) -> i32 {
    match name {
        "KILL" | "SIGKILL" => libc::SIGKILL,
        "INT" | "SIGINT" => libc::SIGINT,
        "HUP" | "SIGHUP" => libc::SIGHUP,
        _ => libc::SIGTERM,
    }
}

/// Sends `signal` to the process `pid` only (not its group), a child the
/// caller holds unreaped. Errors are ignored: every caller is best-effort.
pub(crate) fn signal_child(pid: i32, signal: i32) {
    if pid > 1 {
        // SAFETY: plain syscall on a positive pid.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// Sends `signal` to the process group `pgid` (the child is its group's
/// leader). Errors (ESRCH: the group is already empty) are ignored: every
/// caller is best-effort. Only for a leader the caller holds unreaped
/// (its zombie keeps the id its group's: the supervisor calls this under
/// the lock its reap takes); for any other process, [`PidRef`].
pub(crate) fn signal_group(pgid: i32, signal: i32) {
    if pgid > 1 {
        // SAFETY: plain syscall; a negative pid addresses the group.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

/// How a child ended, as the exit frame reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExitStatus {
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

/// Waits until child `pid` has exited, without reaping it. The
/// platform's exit notifier (a pidfd on Linux, a kqueue on macOS) becomes
/// readable once the child exits, so no thread is parked per child; where
/// no notifier can be had, a blocking `waitid` on the blocking pool waits
/// instead.
pub(crate) async fn wait_exit(pid: i32) -> io::Result<ExitStatus> {
    wait_exit_on(pid, platform::exit_notifier(pid)).await
}

/// [`wait_exit`] with the notifier given, so a test can hand in one that
/// fires before the child is waitable.
async fn wait_exit_on(pid: i32, notifier: Option<std::os::fd::OwnedFd>) -> io::Result<ExitStatus> {
    let registered = notifier.and_then(|fd| {
        // SAFETY: `fd` is an OwnedFd moved into the AsyncFd, so it stays
        // open (and is not replaced) for as long as it is registered.
        unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.ok()
    });
    if let Some(notifier) = registered {
        loop {
            // Peek first: the child may have exited before the notifier
            // was armed.
            if let Some(status) = peek_exit(pid, libc::WNOHANG)? {
                return Ok(status);
            }
            let mut guard = notifier.readable().await?;
            let spent = platform::take_exit_event(guard.get_inner());
            guard.clear_ready();
            if spent {
                // The notifier has reported the exit and will not fire
                // again, yet waitid may not see the exit yet (macOS posts
                // NOTE_EXIT before the child is a zombie). Waiting on the
                // notifier now would hang; the blocking waitid below
                // returns as soon as the child is waitable, which here is
                // a moment away.
                if let Some(status) = peek_exit(pid, libc::WNOHANG)? {
                    return Ok(status);
                }
                break;
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

/// Whether child `pid` exits within `limit`, leaving it unreaped either
/// way (`WNOWAIT`): while the leader is an unreaped zombie its pid, and so
/// its group id, cannot be reused, which makes a later group kill safe.
/// The caller reaps it. A thread does the blocking wait; the deadline is a
/// channel timeout, not a polling loop. On a timeout that thread ends when
/// the caller's kill makes the child exit.
pub(crate) fn exited_within(pid: i32, limit: std::time::Duration) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = peek_exit(pid, 0);
        let _ = tx.send(());
    });
    rx.recv_timeout(limit).is_ok()
}

/// How a bounded run of a program ended ([`run_bounded`]). Each half of
/// `sys::process` has it, the Windows one standing alone (ci/wine/jobcheck
/// mounts it without the rest of the daemon).
#[derive(Debug)]
pub(crate) enum Bounded {
    /// The program exited within the bound.
    Exited(std::process::ExitStatus),
    /// The bound passed: the program and everything it started were
    /// ended.
    Stopped,
    /// The program could not be started: the spawn's error.
    NotStarted(std::io::Error),
    /// The program could not be confined, or its end not observed:
    /// nothing of it runs.
    Failed,
}

/// Runs `cmd` in a process group of its own for at most `limit`: at the
/// bound the whole group is killed (`SIGKILL`), so a program that forked
/// leaves nothing behind. The group is killed while its leader is still
/// unreaped ([`exited_within`]), so the id cannot be another's.
pub(crate) fn run_bounded(cmd: &mut std::process::Command, limit: std::time::Duration) -> Bounded {
    use std::os::unix::process::CommandExt;
    let mut child = match cmd.process_group(0).spawn() {
        Ok(child) => child,
        Err(e) => return Bounded::NotStarted(e),
    };
    let pid = child.id() as i32;
    let in_time = exited_within(pid, limit);
    if !in_time {
        // SAFETY: kill(2) on the group this run created, whose leader is
        // not reaped yet.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    match (in_time, child.wait()) {
        (false, _) => Bounded::Stopped,
        (true, Ok(status)) => Bounded::Exited(status),
        (true, Err(_)) => Bounded::Failed,
    }
}

/// Reaps child `pid` if it has exited (WNOHANG). Returns true when the pid
/// is gone (reaped now, or not our child any more).
pub(crate) fn reap(pid: i32) -> bool {
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

#[cfg(test)]
pub(crate) use platform::pid_exists;

#[cfg(test)]
mod tests {
    use super::*;

    /// A notifier that fires while the child still runs, as a NOTE_EXIT
    /// posted before the child is waitable does: the wait must still end
    /// with the child's status, and leave the child unreaped. A pipe with
    /// a byte in it stands in for the notifier; only on Linux does any
    /// readiness count as the exit event, so only there can it stand in.
    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "current_thread")]
    async fn an_early_notification_falls_back_to_a_blocking_wait() {
        use std::os::fd::{FromRawFd, OwnedFd};
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 0.3; exit 7"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Close-on-exec, and the write end held open: no child may keep a
        // copy whose closing would wake the wait at the child's exit.
        let mut fds = [0; 2];
        // SAFETY: pipe2(2) fills both slots with fresh descriptors we own.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both descriptors are fresh and owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let mut write = std::fs::File::from(write);
        std::io::Write::write_all(&mut write, b"x").unwrap();
        let status = tokio::time::timeout(std::time::Duration::from_secs(10), wait_exit_on(pid, Some(read)))
            .await
            .expect("the wait ended")
            .unwrap();
        assert_eq!(status, ExitStatus { code: 7, signal: None });
        assert!(platform::pid_exists(pid), "observed, not reaped");
        assert_eq!(child.wait().unwrap().code(), Some(7), "still ours to reap");
        drop(write);
    }

    #[test]
    fn signal_names_are_the_reference_eight_case_sensitive() {
        assert_eq!(parse_signal(""), libc::SIGTERM);
        for (name, want) in [
            ("TERM", libc::SIGTERM),
            ("SIGTERM", libc::SIGTERM),
            ("KILL", libc::SIGKILL),
            ("SIGKILL", libc::SIGKILL),
            ("INT", libc::SIGINT),
            ("SIGINT", libc::SIGINT),
            ("HUP", libc::SIGHUP),
            ("SIGHUP", libc::SIGHUP),
        ] {
            assert_eq!(parse_signal(name), want, "{name}");
        }
        // Case-sensitive, four names only: everything else is SIGTERM.
        for other in [
            "sigkill", "Kill", "kill", "hup", " KILL", "QUIT", "USR2", "STOP", "bogus",
        ] {
            assert_eq!(parse_signal(other), libc::SIGTERM, "{other}");
        }
        assert_eq!(parse_signal("9"), libc::SIGTERM);
    }
}
