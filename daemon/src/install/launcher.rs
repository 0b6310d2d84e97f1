//! `-install`'s managed launcher (build 89cb6289, with
//! `CLAUDE_SSH_MANAGED_LAUNCHER=1`): the launcher is resolved once for the
//! CLI path, before the CLI runs, and decides how the CLI is checked
//! ([`Managed::how`]); the outcome becomes the `launcher*` facts
//! ([`Managed::facts`]).
//!
//! Facts (docs/PROTOCOL.md "-install", claustrum's 89cb6289 rows I0–I11,
//! H1–H4, L01–L10):
//!
//! | resolution | the check | facts |
//! | --- | --- | --- |
//! | none | the direct `--version` run | `launcherStatus` `none` |
//! | usable | one run `<launcher…> <final path> --version`, no direct run: 33 s on a cache hit, 123 s right after an install | `usable`, `launcher`, `launcherSource`; a failed run `probe_failed` with `launcherReason` and `launcherStderr` (the CLI still counts as runnable); a stopped run `unresponsive` with the stop's reason, and `cliError` / `cliUnresponsive` |
//! | unusable | nothing runs; the CLI counts as runnable | `unusable`, `launcherSource`, `launcherReason` |
//! | unreadable | nothing runs; the CLI counts as runnable | `unreadable`, `launcherPath`, `launcherReason` |
//!
//! A stopped run keeps the CLI (a new one is installed all the same) and
//! prunes nothing. An install with no CLI path, or whose cli dir cannot be
//! made, carries no `launcher*` field. claustrum's own choice, followed:
//! after a `-cli-zst` install, and for an unreadable answer after any
//! install, the cache-hit rules apply as measured after a `-cli-url` one.

use super::InstallResult;
use crate::agent::launcher::{self, Resolution, RunOutcome};
/// The bounds of a run through the launcher (33 s, 123 s right after an
/// install), the agent's.
pub(super) use crate::agent::launcher::{FIRST_RUN_BOUND, RUN_BOUND};
use std::path::Path;
use std::time::Duration;

/// How this install checks that a CLI runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum How {
    /// `<cli> --version`, as without the launcher.
    Direct,
    /// Through the usable launcher, on the final path.
    Launcher,
    /// Not at all: a refused launcher runs nothing.
    Nothing,
}

/// The result of a check through the launcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Checked {
    /// It exited, well or not: the CLI counts as runnable.
    Runnable,
    /// It was stopped at its bound: the `cliError`.
    Stopped(String),
}

/// The launcher of one install and its run.
#[derive(Debug)]
pub(super) struct Managed {
    resolution: Resolution,
    /// The run, and whether it came right after an install.
    run: Option<(RunOutcome, bool)>,
}

impl Managed {
    /// Resolves the launcher in `folder` for the CLI at `cli_path`.
    pub(super) fn resolve(folder: &Path, cli_path: &str) -> Managed {
        Managed {
            resolution: launcher::settings::resolve_in(folder, cli_path),
            run: None,
        }
    }

    pub(super) fn how(&self) -> How {
        match self.resolution {
            Resolution::None => How::Direct,
            Resolution::Usable { .. } => How::Launcher,
            Resolution::Unusable { .. } | Resolution::Unreadable { .. } => How::Nothing,
        }
    }

    /// Runs the CLI at `cli` through the launcher for at most `bound`
    /// (`first`: right after an install). Only for [`How::Launcher`].
    pub(super) fn check(&mut self, cli: &Path, bound: Duration, first: bool) -> Checked {
        let Resolution::Usable { argv, .. } = &self.resolution else {
            return Checked::Runnable;
        };
        let outcome = launcher::run(argv, cli.as_os_str(), bound);
        let checked = match outcome {
            RunOutcome::Stopped => {
                Checked::Stopped(launcher::unresponsive_text(argv.first().map_or("", String::as_str)))
            }
            RunOutcome::Ran | RunOutcome::Failed { .. } => Checked::Runnable,
        };
        self.run = Some((outcome, first));
        checked
    }

    /// Fills the `launcher*` facts, each only where it applies.
    pub(super) fn facts(&self, result: &mut InstallResult) {
        let (status, reason) = match &self.resolution {
            Resolution::None => ("none", None),
            Resolution::Usable { argv, source } => {
                result.launcher = Some(argv.clone());
                result.launcher_source = Some(source.clone());
                match &self.run {
                    None | Some((RunOutcome::Ran, _)) => ("usable", None),
                    Some((RunOutcome::Stopped, first)) => (
                        launcher::STATUS_UNRESPONSIVE,
                        Some(
                            if *first {
                                launcher::FIRST_STOPPED
                            } else {
                                launcher::STOPPED
                            }
                            .to_string(),
                        ),
                    ),
                    Some((RunOutcome::Failed { reason, stderr }, _)) => {
                        result.launcher_stderr = Some(stderr.clone()).filter(|s| !s.is_empty());
                        (launcher::STATUS_PROBE_FAILED, Some(reason.clone()))
                    }
                }
            }
            Resolution::Unusable { source, reason } => {
                result.launcher_source = Some(source.clone());
                ("unusable", Some(reason.clone()))
            }
            Resolution::Unreadable { reason, path } => {
                result.launcher_path = Some(path.clone());
                ("unreadable", Some(reason.clone()))
            }
        };
        result.launcher_status = Some(status.to_string());
        result.launcher_reason = reason;
    }
}
