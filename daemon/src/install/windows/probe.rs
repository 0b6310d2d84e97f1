//! Host probes, Windows half of `install/probe.rs` (same names): "does
//! this CLI run?" and "which libc?".
//!
//! The CLI's `--version` run starts suspended and is confined to a Job
//! Object that kills its tree when closed
//! ([`crate::sys::process::confine`]) before it runs: at the bound the
//! whole tree is ended, and whatever the CLI left running after an
//! answer ends when the run returns, so nothing outlives it.

use super::Ran;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `<cli> --version` for at most `timeout`, with stdin, stdout and
/// stderr on `NUL` and without `CLAUDE_RPC_TOKEN`. The clock starts
/// before the spawn, as the reference's does.
pub(super) fn run_version(cli: &Path, timeout: Duration) -> Ran {
    use std::os::windows::process::CommandExt;
    use windows_sys::Win32::System::Threading::CREATE_SUSPENDED;
    let deadline = Instant::now() + timeout;
    // Started suspended, put in its job, then resumed: nothing the CLI
    // starts can run outside the job.
    let spawned = Command::new(cli)
        .creation_flags(CREATE_SUSPENDED)
        .arg("--version")
        .env_remove("CLAUDE_RPC_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = spawned else {
        return Ran::Failed;
    };
    // A child that cannot be confined (or resumed) is not run at all.
    let confined =
        crate::sys::process::confine(&child).and_then(|job| crate::sys::process::resume(&child).map(|()| job));
    let Ok(job) = confined else {
        let _ = child.kill();
        let _ = child.wait();
        return Ran::Failed;
    };
    let mut pause = Duration::from_millis(2);
    let ran = loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break Ran::Answered,
            Ok(Some(_)) | Err(_) => break Ran::Failed,
            Ok(None) => {}
        }
        let now = Instant::now();
        if now >= deadline {
            break Ran::Stopped;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    };
    if ran == Ran::Stopped {
        let _ = job.kill_tree();
        let _ = child.kill();
        let _ = child.wait();
    }
    // Dropping the job ends whatever of the tree still runs.
    drop(job);
    ran
}

/// The host's C library as the facts report it. Windows has neither
/// `ldd` nor a `/lib/ld-musl-*` loader, so the Unix decision's fallback
/// applies: `"glibc"` (remora's reading; no record gives the reference's
/// Windows value).
pub fn detect_libc() -> &'static str {
    "glibc"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_cli_fails() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            run_version(&dir.path().join("none.exe"), Duration::from_secs(5)),
            Ran::Failed
        );
    }
}
