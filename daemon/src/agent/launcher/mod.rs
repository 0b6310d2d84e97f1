//! The host's managed launcher outside the daemon (build 89cb6289):
//! `-install` and `-probe-cli` run the CLI's `--version` through it when
//! `CLAUDE_SSH_MANAGED_LAUNCHER` is exactly `1` and the served build has
//! the launcher. [`settings`] reads the host's policy (shared with the
//! daemon's `launcher.resolve`); this module owns the gate, the one bounded
//! run `<launcher argv…> <cli> --version`, and the words that describe its
//! outcome. What each mode prints is in `install/launcher.rs` and
//! `agent/probecli.rs`.
//!
//! Facts (docs/PROTOCOL.md "-install" and "-probe-cli", and the 89cb6289
//! rows of claustrum's launcher tests, `schubydoo/claustrum`): only the
//! value `1` opens the gate; the run is stopped at 33 s (123 s right after
//! a fresh install); the launcher's stderr is kept up to 8192 bytes with a
//! tail counting the rest; a failure reads `exit status N` or
//! `terminated by SIG…`; the gate does not reach the launcher's env.
//!
//! remora's own choices (not measured): the run has its own process group,
//! killed whole at the bound and also once the launcher exited, so nothing
//! it started in that group outlives the run; `CLAUDE_CODE_PROCESS_WRAPPER`,
//! `CLAUDE_SSH_E2E_MANAGED_SETTINGS_DIR` and `CLAUDE_RPC_TOKEN` do not
//! reach it either; a launcher that cannot start is `fork/exec <argv0>:
//! <errno>`, as Go words it.

pub(crate) mod settings;

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) use settings::Resolution;

/// The bound of a run through the launcher: a cache hit of `-install`, and
/// `-probe-cli` (the reference stopped a 60 s launcher at 33.06 s).
pub(crate) const RUN_BOUND: Duration = Duration::from_secs(33);
/// The bound of `-install`'s run right after a fresh install (stopped at
/// 123.05 s; a launcher taking 100 s finished).
pub(crate) const FIRST_RUN_BOUND: Duration = Duration::from_secs(123);
/// How much of the launcher's stderr is reported.
const STDERR_CAP: usize = 8192;
/// How long the stderr pipe may stay open once the run's group is gone (a
/// writer that left the group, such as a daemonized grandchild).
const DRAIN: Duration = Duration::from_secs(2);

/// The `launcherStatus` values of a run.
pub(crate) const STATUS_PROBE_FAILED: &str = "probe_failed";
pub(crate) const STATUS_UNRESPONSIVE: &str = "unresponsive";
/// `launcherReason` of a run stopped at [`RUN_BOUND`] / [`FIRST_RUN_BOUND`]
/// (the texts name the reference's bounds, whatever bound stopped it).
pub(crate) const STOPPED: &str = "did not exit within 33s and was stopped";
pub(crate) const FIRST_STOPPED: &str = "did not exit within 123s and was stopped";

/// The settings folder `-install` / `-probe-cli` read, when the served
/// build has the launcher (`managed`) and the gate is on; `None` runs the
/// CLI directly. The folder override's "ignored" note is the daemon's to
/// log, not these modes'.
pub(crate) fn settings_folder(managed: bool) -> Option<PathBuf> {
    (managed && gate_on()).then(|| settings::settings_dir().0)
}

/// Whether [`settings::LAUNCHER_GATE_ENV`] is exactly `1` (on -install
/// the empty value, `true` and `1 ` were measured off).
fn gate_on() -> bool {
    std::env::var_os(settings::LAUNCHER_GATE_ENV).is_some_and(|v| v == "1")
}

/// The `cliError` of a stopped run, and `-probe-cli`'s stderr after the
/// program prefix. It names the launcher's `argv[0]` only.
pub(crate) fn unresponsive_text(launcher: &str) -> String {
    format!(
        "cli unresponsive: the installed Claude Code binary was started through the host's managed launcher {launcher} and the run did not answer --version within 33s (123s for a first run), so it was stopped; the launcher or the host is not letting it finish"
    )
}

/// How one run through the launcher ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunOutcome {
    /// The launcher exited 0.
    Ran,
    /// It exited non-zero or on a signal, or could not start: the reason
    /// and its stderr, capped (empty when it printed nothing).
    Failed { reason: String, stderr: String },
    /// It was still running at the bound; its group was killed.
    Stopped,
}

/// What the run does not inherit from this process.
const NOT_INHERITED: [&str; 5] = [
    settings::STRIPPED_ENV[0],
    settings::STRIPPED_ENV[1],
    settings::WRAPPER_ENV,
    "CLAUDE_RPC_TOKEN",
    super::PROBE_LIMIT_ENV,
];

/// Runs `<argv…> <cli> --version` with stdin and stdout on `/dev/null` and
/// stderr captured, for at most `bound`. `argv` is a launcher that passed
/// [`settings::check_argv`] (never empty).
pub(crate) fn run(argv: &[String], cli: &OsStr, bound: Duration) -> RunOutcome {
    let Some((program, args)) = argv.split_first() else {
        return RunOutcome::Failed {
            reason: settings::NO_LAUNCHER.to_string(),
            stderr: String::new(),
        };
    };
    let start_failed = |e: &std::io::Error| RunOutcome::Failed {
        reason: format!("fork/exec {program}: {}", crate::base::goerr::io_text(e)),
        stderr: String::new(),
    };
    let (read_end, write_end) = match crate::sys::os::pipe_cloexec() {
        Ok(pipe) => pipe,
        Err(e) => return start_failed(&e),
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .arg(cli)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(write_end))
        .process_group(0);
    for name in NOT_INHERITED {
        command.env_remove(name);
    }
    let spawned = command.spawn();
    // The spawn consumed our write end (the child holds the only copies).
    drop(command);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return start_failed(&e),
    };
    let stderr = Arc::new(Mutex::new(Capped::default()));
    let (tx, rx) = std::sync::mpsc::channel();
    let sink = stderr.clone();
    std::thread::spawn(move || {
        let mut pipe = std::fs::File::from(read_end);
        let mut buf = [0u8; 4096];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => sink.lock().unwrap_or_else(|e| e.into_inner()).push(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send(());
    });
    let pid = child.id() as i32;
    let in_time = crate::sys::process::exited_within(pid, bound);
    // The leader is not reaped yet, so the group id is still its own: the
    // kill reaches what it started in its group, at the bound and after a
    // normal exit alike.
    // SAFETY: kill(2) on the group this run created.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    let status = child.wait();
    // The kill closed every writer the group held; one that left the group
    // keeps the reader thread, which ends when that writer does.
    let _ = rx.recv_timeout(DRAIN);
    if !in_time {
        return RunOutcome::Stopped;
    }
    let text = stderr.lock().unwrap_or_else(|e| e.into_inner()).text();
    match status {
        Ok(status) => match failure_reason(status) {
            None => RunOutcome::Ran,
            Some(reason) => RunOutcome::Failed { reason, stderr: text },
        },
        Err(e) => RunOutcome::Failed {
            reason: crate::base::goerr::io_text(&e),
            stderr: text,
        },
    }
}

/// `None` for exit 0; else `exit status N`, `terminated by SIG…`, or Go's
/// words for a signal without a name.
fn failure_reason(status: ExitStatus) -> Option<String> {
    if status.success() {
        return None;
    }
    if let Some(code) = status.code() {
        return Some(format!("exit status {code}"));
    }
    let signal = status.signal().unwrap_or(0);
    Some(match crate::sys::process::signal_name(signal) {
        Some(name) => format!("terminated by {name}"),
        None => format!("signal: signal {signal}"),
    })
}

/// The first [`STDERR_CAP`] bytes of a stream and a count of the rest.
#[derive(Debug, Default)]
struct Capped {
    kept: Vec<u8>,
    dropped: u64,
}

impl Capped {
    fn push(&mut self, bytes: &[u8]) {
        let room = STDERR_CAP.saturating_sub(self.kept.len()).min(bytes.len());
        self.kept.extend_from_slice(&bytes[..room]);
        self.dropped += (bytes.len() - room) as u64;
    }

    /// The kept bytes (invalid UTF-8 as Go's JSON layer shows it), then
    /// `\n[… N more bytes]` when some were dropped.
    fn text(&self) -> String {
        let mut text = crate::base::gojson::go_lossy(&self.kept);
        if self.dropped > 0 {
            text.push_str(&format!("\n[\u{2026} {} more bytes]", self.dropped));
        }
        text
    }
}

#[cfg(test)]
mod tests;
