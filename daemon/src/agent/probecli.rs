//! `-probe-cli <path>`: does this agent CLI
//! binary run at all on this host? Runs `<path> --version` once, bounded,
//! and prints a verdict a driver can match without parsing:
//!
//! | stdout | meaning |
//! | --- | --- |
//! | (nothing) | it ran and exited 0 |
//! | `__CLI_HUNG__` | it was still running at the deadline (30 s) and was killed |
//! | `__CLI_BAD__` | it is missing, could not be started, or exited non-zero / on a signal |
//! | `__CLI_LAUNCHER__` | the managed launcher is unusable, its settings unreadable, or its run failed |
//!
//! The exit code is always 0. The direct run, the same on every host, is
//! [`super::versionprobe`]'s; this module adds the managed launcher.
//!
//! For a build with the managed launcher (89cb6289) and
//! `CLAUDE_SSH_MANAGED_LAUNCHER=1`, a host policy that names a launcher
//! replaces the direct run ([`super::launcher`]): a usable launcher runs
//! `<launcher…> <path> --version` once (33 s; a stop prints
//! `__CLI_HUNG__`), a refused one runs nothing. Each verdict but "ran" puts
//! its reason on stderr. No policy runs the CLI directly.

use super::launcher::{self, Resolution, RunOutcome};
pub(crate) use super::versionprobe::{probe, Verdict};
use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

/// Runs the probe and prints its verdict; returns the exit code (0).
/// `settings` is the managed-settings folder when the launcher applies
/// ([`super::launcher::settings_folder`]).
pub(crate) fn run(path: &OsStr, settings: Option<&Path>) -> i32 {
    use std::io::Write;
    let Some(dir) = settings else {
        return super::versionprobe::run_direct(path);
    };
    let resolution = launcher::settings::resolve_in(dir, &display(path));
    let report = through_launcher(path, &resolution, launcher::RUN_BOUND);
    let _ = std::io::stderr().lock().write_all(report.stderr.as_bytes());
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(report.stdout.as_bytes());
    let _ = out.flush();
    0
}

/// What the probe prints.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Report {
    pub stdout: &'static str,
    pub stderr: String,
}

/// The verdict line of a refused launcher or a failed launcher run.
const LAUNCHER_LINE: &str = "__CLI_LAUNCHER__\n";
/// What starts each stderr line (the reference's own program name there).
const PREFIX: &str = "remora: ";

/// The probe as the launcher `resolution` decides it (`None` is the direct
/// probe), a launcher run bounded by `bound` ([`launcher::RUN_BOUND`];
/// tests shorten it).
pub(crate) fn through_launcher(path: &OsStr, resolution: &Resolution, bound: Duration) -> Report {
    let path_text = display(path);
    let launcher_verdict = |stderr: String| Report {
        stdout: LAUNCHER_LINE,
        stderr,
    };
    let argv = match resolution {
        // No policy names a launcher: the direct probe.
        Resolution::None => return direct(path),
        Resolution::Unusable { reason, .. } => {
            return launcher_verdict(format!(
                "{PREFIX}{path_text} was not run: managed launcher unusable: {reason}\n"
            ))
        }
        Resolution::Unreadable { reason, path } => {
            return launcher_verdict(format!(
                "{PREFIX}{path_text} was not run: managed settings unreadable: {path}: {reason}\n"
            ))
        }
        Resolution::Usable { argv, .. } => argv,
    };
    let launcher = argv.first().map_or("", String::as_str);
    match launcher::run(argv, path, bound) {
        RunOutcome::Ran => Report {
            stdout: "",
            stderr: String::new(),
        },
        RunOutcome::Stopped => Report {
            stdout: Verdict::Hung.line(),
            stderr: format!("{PREFIX}{}\n", launcher::unresponsive_text(launcher)),
        },
        RunOutcome::Failed { reason, stderr } => {
            // An empty stderr leaves out the "printed:" block.
            let printed = if stderr.is_empty() {
                String::new()
            } else {
                format!("{PREFIX}the managed launcher's run printed:\n{stderr}\n")
            };
            launcher_verdict(format!(
                "{printed}{PREFIX}{path_text} --version through the managed launcher {launcher} did not succeed: {reason}\n"
            ))
        }
    }
}

/// The direct probe's report.
fn direct(path: &OsStr) -> Report {
    Report {
        stdout: probe(path, super::versionprobe::limit()).line(),
        stderr: String::new(),
    }
}

/// A path as the texts show it.
fn display(path: &OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    crate::base::gojson::go_lossy(path.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The launcher's run stopped at its bound (shortened here; 33 s in
    /// the mode) prints `__CLI_HUNG__` and names the launcher, and returns
    /// at the bound.
    #[test]
    fn a_stopped_launcher_run_is_hung() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let wrap = dir.path().join("wrap");
        std::fs::write(&wrap, "#!/bin/sh\ntrap '' TERM\nsleep 60\n").unwrap();
        std::fs::set_permissions(&wrap, std::fs::Permissions::from_mode(0o755)).unwrap();
        let wrap = wrap.to_string_lossy().into_owned();
        let usable = Resolution::Usable {
            argv: vec![wrap.clone()],
            source: "/etc/claude-code/managed-settings.json".into(),
        };
        let start = std::time::Instant::now();
        let report = through_launcher(OsStr::new("/opt/cli"), &usable, Duration::from_millis(300));
        assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
        assert_eq!(
            report,
            Report {
                stdout: "__CLI_HUNG__\n",
                stderr: format!("remora: {}\n", launcher::unresponsive_text(&wrap)),
            }
        );
    }

    #[test]
    fn a_refused_launcher_runs_nothing() {
        let unusable = Resolution::Unusable {
            source: "/s.json".into(),
            reason: "unterminated double quote".into(),
        };
        assert_eq!(
            through_launcher(OsStr::new("/opt/cli"), &unusable, Duration::from_secs(30)),
            Report {
                stdout: "__CLI_LAUNCHER__\n",
                stderr: "remora: /opt/cli was not run: managed launcher unusable: unterminated double quote\n".into(),
            }
        );
        let unreadable = Resolution::Unreadable {
            reason: "permission denied".into(),
            path: "/s.json".into(),
        };
        assert_eq!(
            through_launcher(OsStr::new("/opt/cli"), &unreadable, Duration::from_secs(30)).stderr,
            "remora: /opt/cli was not run: managed settings unreadable: /s.json: permission denied\n"
        );
    }
}
