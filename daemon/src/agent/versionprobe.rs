//! The direct `<path> --version` probe of `-probe-cli`, the same on every
//! host: one run, bounded (30 s), with stdio on the null device (its
//! output is not wanted, and no grandchild can hold a pipe of ours open)
//! and without `CLAUDE_RPC_TOKEN`, as the reference does. The run and
//! everything it starts are ended at the bound
//! ([`crate::sys::process::run_bounded`]: its process group on Unix, its
//! kill-on-close Job Object on Windows, where it starts suspended and
//! runs only once confined), so a `--version` that forked cannot linger.
//!
//! Unix adds the managed launcher in front of it ([`super::probecli`]);
//! Windows resolves no launcher (claustrum's rows RES-30 and IW of
//! `89cb6289`), so there `-probe-cli` is this probe alone.

use std::ffi::OsStr;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Test hook of the probe: its bound in milliseconds, so a test need not
/// wait 30 s. Never passed on to the probed binary or a launcher run.
pub(crate) const PROBE_LIMIT_ENV: &str = "REMORA_TEST_PROBE_CLI_LIMIT_MS";

/// The reference's fixed bound.
const LIMIT: Duration = Duration::from_secs(30);

/// The three outcomes of a direct run, with the line each prints.
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

/// The probe's bound: 30 s, or the test hook's.
pub(crate) fn limit() -> Duration {
    std::env::var(PROBE_LIMIT_ENV)
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
        .map_or(LIMIT, Duration::from_millis)
}

/// `-probe-cli <path>` where no launcher applies: prints the verdict of
/// one direct run; the exit code is always 0.
pub(crate) fn run_direct(path: &OsStr) -> i32 {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(probe(path, limit()).line().as_bytes());
    let _ = out.flush();
    0
}

/// Runs `<path> --version` with at most `limit` to finish, everything it
/// started ended at the bound.
pub(crate) fn probe(path: &OsStr, limit: Duration) -> Verdict {
    use crate::sys::process::{run_bounded, Bounded};
    let mut cmd = Command::new(path);
    cmd.arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_remove("CLAUDE_RPC_TOKEN")
        .env_remove(PROBE_LIMIT_ENV);
    match run_bounded(&mut cmd, limit) {
        Bounded::Exited(status) if status.success() => Verdict::Runs,
        Bounded::Stopped => Verdict::Hung,
        Bounded::Exited(_) | Bounded::NotStarted(_) | Bounded::Failed => Verdict::Bad,
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
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("remora-probe-cli-none");
        assert_eq!(probe(missing.as_os_str(), LIMIT), Verdict::Bad);
    }
}
