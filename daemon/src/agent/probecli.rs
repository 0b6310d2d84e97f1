//! `-probe-cli <path>`: does this agent CLI
//! binary run at all on this host? Runs `<path> --version` once, bounded,
//! and prints a verdict a driver can match without parsing:
//!
//! | stdout | meaning |
//! | --- | --- |
//! | (nothing) | it ran and exited 0 |
//! | `__CLI_HUNG__` | it was still running at the deadline (30 s) and was killed |
//! | `__CLI_BAD__` | it is missing, could not be started, or exited non-zero / on a signal |
//!
//! The exit code is always 0. The probe runs in its own process group (the
//! deadline kills the whole group, so a `--version` that forked cannot
//! linger), with stdio on `/dev/null` (its output is not wanted, and no
//! grandchild can hold a pipe of ours open) and without
//! `CLAUDE_RPC_TOKEN`, as the reference does.

use std::ffi::OsStr;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The reference's fixed bound.
const LIMIT: Duration = Duration::from_secs(30);
/// Test hook: the bound in milliseconds, so a test need not wait 30 s.
/// Never passed on to the probed binary.
pub(crate) const LIMIT_ENV: &str = "REMORA_TEST_PROBE_CLI_LIMIT_MS";

/// The three outcomes, with the line each prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Runs,
    Hung,
    Bad,
}

impl Verdict {
    pub(crate) fn line(self) -> &'static str {
        match self {
            Verdict::Runs => "",
            Verdict::Hung => "__CLI_HUNG__\n",
            Verdict::Bad => "__CLI_BAD__\n",
        }
    }
}

/// Runs the probe and prints its verdict; returns the exit code (0).
pub(crate) fn run(path: &OsStr) -> i32 {
    use std::io::Write;
    let verdict = probe(path, limit());
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(verdict.line().as_bytes());
    let _ = out.flush();
    0
}

fn limit() -> Duration {
    std::env::var(LIMIT_ENV)
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
        .map_or(LIMIT, Duration::from_millis)
}

/// Runs `<path> --version` with at most `limit` to finish.
pub(crate) fn probe(path: &OsStr, limit: Duration) -> Verdict {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(path);
    cmd.arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_remove("CLAUDE_RPC_TOKEN")
        .env_remove(LIMIT_ENV)
        .process_group(0);
    let Ok(mut child) = cmd.spawn() else {
        return Verdict::Bad;
    };
    let pid = child.id() as i32;
    let verdict = if exited_within(pid, limit) {
        None
    } else {
        // SAFETY: kill(2) on the group this probe created, whose leader is
        // not reaped yet (see `exited_within`).
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        Some(Verdict::Hung)
    };
    let status = child.wait();
    match (verdict, status) {
        (Some(v), _) => v,
        (None, Ok(status)) if status.success() => Verdict::Runs,
        _ => Verdict::Bad,
    }
}

/// Whether child `pid` exits within `limit`, leaving it unreaped either
/// way (`WNOWAIT`): while the leader is an unreaped zombie its pid, and so
/// its group id, cannot be reused, which makes a later group kill safe.
/// The caller reaps it. A thread does the blocking wait; the deadline is a
/// channel timeout, not a polling loop. On a timeout that thread ends when
/// the caller's kill makes the child exit.
pub(crate) fn exited_within(pid: i32, limit: Duration) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        exited(pid);
        let _ = tx.send(());
    });
    rx.recv_timeout(limit).is_ok()
}

/// Blocks until `pid` has exited, leaving it unreaped.
fn exited(pid: i32) {
    loop {
        // SAFETY: waitid fills the zeroed siginfo or fails.
        let rc = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        if rc == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        assert_eq!(Verdict::Runs.line(), "");
        assert_eq!(Verdict::Hung.line(), "__CLI_HUNG__\n");
        assert_eq!(Verdict::Bad.line(), "__CLI_BAD__\n");
    }

    #[test]
    fn a_missing_binary_is_bad() {
        let v = probe(OsStr::new("/nonexistent/remora-probe-cli"), LIMIT);
        assert_eq!(v, Verdict::Bad);
    }
}
