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
//! The exit code is always 0. The probe runs in its own process group (the
//! deadline kills the whole group, so a `--version` that forked cannot
//! linger), with stdio on `/dev/null` (its output is not wanted, and no
//! grandchild can hold a pipe of ours open) and without
//! `CLAUDE_RPC_TOKEN`, as the reference does.
//!
//! For a build with the managed launcher (89cb6289) and
//! `CLAUDE_SSH_MANAGED_LAUNCHER=1`, a host policy that names a launcher
//! replaces the direct run ([`super::launcher`]): a usable launcher runs
//! `<launcher…> <path> --version` once (33 s; a stop prints
//! `__CLI_HUNG__`), a refused one runs nothing. Each verdict but "ran" puts
//! its reason on stderr. No policy runs the CLI directly.

use super::launcher::{self, Resolution, RunOutcome};
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The reference's fixed bound.
const LIMIT: Duration = Duration::from_secs(30);
use super::PROBE_LIMIT_ENV as LIMIT_ENV;

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
/// `settings` is the managed-settings folder when the launcher applies
/// ([`super::launcher::settings_folder`]).
pub(crate) fn run(path: &OsStr, settings: Option<&Path>) -> i32 {
    use std::io::Write;
    let report = match settings {
        Some(dir) => {
            let resolution = launcher::settings::resolve_in(dir, &display(path));
            through_launcher(path, &resolution, launcher::RUN_BOUND)
        }
        None => direct(path),
    };
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
        stdout: probe(path, limit()).line(),
        stderr: String::new(),
    }
}

/// A path as the texts show it.
fn display(path: &OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    crate::base::gojson::go_lossy(path.as_bytes())
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
    let verdict = if crate::sys::process::exited_within(pid, limit) {
        None
    } else {
        // SAFETY: kill(2) on the group this probe created, whose leader is
        // not reaped yet (see `sys::process::exited_within`).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        assert_eq!(Verdict::Runs.line(), "");
        assert_eq!(Verdict::Hung.line(), "__CLI_HUNG__\n");
        assert_eq!(Verdict::Bad.line(), "__CLI_BAD__\n");
    }

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
            through_launcher(OsStr::new("/opt/cli"), &unusable, LIMIT),
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
            through_launcher(OsStr::new("/opt/cli"), &unreadable, LIMIT).stderr,
            "remora: /opt/cli was not run: managed settings unreadable: /s.json: permission denied\n"
        );
    }

    #[test]
    fn a_missing_binary_is_bad() {
        let v = probe(OsStr::new("/nonexistent/remora-probe-cli"), LIMIT);
        assert_eq!(v, Verdict::Bad);
    }
}
