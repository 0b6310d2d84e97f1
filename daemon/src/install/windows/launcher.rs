//! `-install`'s managed launcher, Windows half: the reference resolves no
//! launcher on Windows (claustrum's Windows rows RES-30 and IW of
//! `89cb6289`: `launcher.resolve` answers `{"status":"none"}` for every
//! settings folder, and an install with `CLAUDE_SSH_MANAGED_LAUNCHER=1`
//! appends `"launcherStatus":"none"` and runs the CLI directly). So the
//! resolution here is always `none`: the check is the direct run, and
//! the facts carry `launcherStatus` `none` alone. Same names as the Unix
//! half (`install/launcher.rs`).

use super::InstallResult;
use std::path::Path;
use std::time::Duration;

/// The bounds a run through a launcher would have (never used here: no
/// launcher runs on Windows); the Unix half's values.
pub(super) const RUN_BOUND: Duration = Duration::from_secs(33);
pub(super) const FIRST_RUN_BOUND: Duration = Duration::from_secs(123);

/// How this install checks that a CLI runs: always directly here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum How {
    /// `<cli> --version`, as without the launcher.
    Direct,
    /// Through a usable launcher (never on Windows).
    Launcher,
    /// Not at all (never on Windows).
    #[allow(dead_code)] // the Unix half's variant, matched by the shared flow
    Nothing,
}

/// The result of a check through the launcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Checked {
    /// The CLI counts as runnable.
    Runnable,
    /// Stopped at its bound (never on Windows).
    #[allow(dead_code)] // the Unix half's variant, matched by the shared flow
    Stopped(String),
}

/// The launcher of one install: `none` on Windows.
#[derive(Debug)]
pub(super) struct Managed;

impl Managed {
    /// No settings file is read on Windows: the resolution is `none`.
    pub(super) fn resolve(_folder: &Path, _cli_path: &str) -> Managed {
        Managed
    }

    pub(super) fn how(&self) -> How {
        How::Direct
    }

    /// Never called ([`How::Launcher`] does not occur here).
    pub(super) fn check(&mut self, _cli: &Path, _bound: Duration, _first: bool) -> Checked {
        Checked::Runnable
    }

    /// `launcherStatus` `none`, nothing else.
    pub(super) fn facts(&self, result: &mut InstallResult) {
        result.launcher_status = Some("none".to_string());
    }
}
