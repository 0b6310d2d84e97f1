//! Host probes, Windows half of `install/probe.rs` (same names): "does
//! this CLI run?" and "which libc?".
//!
//! The CLI's `--version` run is `-probe-cli`'s direct run
//! ([`crate::agent::versionprobe::probe`]): started suspended, confined to
//! a kill-on-close Job Object before it runs, its whole tree ended at the
//! bound, and whatever the CLI left running after an answer ended when
//! the run returns, so nothing outlives it.

use super::Ran;
use crate::agent::versionprobe::{probe, Verdict};
use std::path::Path;
use std::time::Duration;

/// Runs `<cli> --version` for at most `timeout`, with stdin, stdout and
/// stderr on `NUL` and without `CLAUDE_RPC_TOKEN`. The clock starts
/// before the spawn, as the reference's does.
pub(super) fn run_version(cli: &Path, timeout: Duration) -> Ran {
    match probe(cli.as_os_str(), timeout) {
        Verdict::Runs => Ran::Answered,
        Verdict::Hung => Ran::Stopped,
        Verdict::Bad => Ran::Failed,
    }
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
