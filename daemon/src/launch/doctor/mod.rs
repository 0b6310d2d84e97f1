//! `remora -doctor`: what the daemon's life on this host looks like for
//! the user it runs as, each problem with what to do about it, as text a
//! person reads or (`-json`) one JSON object.
//!
//! It changes nothing: it creates, writes, renames, removes, locks and
//! signals nothing. It reads files without following links where a link
//! could mislead it (the token file, the lock file, `remora.conf`), and
//! opens them non-blocking so a FIFO cannot hang it; it runs each
//! `srv/<sha>/server --version` (bounded, as Desktop does) and connects
//! to each daemon's socket once, to see who answers and to ask
//! `server.capabilities` with the token file beside it (only of a
//! listener of this user). That connection counts as activity for the
//! daemon (it restarts an `idle-exit-min` clock).
//!
//! | module | owns |
//! | --- | --- |
//! | [`srv`] | `~/.claude/remote/srv/<sha>/`: remora or not, the build it answers as, `server.reference` |
//! | [`daemons`] | running daemons of this home, stale ones and stale sockets, with the command that ends each |
//! | [`host`] | logind's `KillUserProcesses` and linger; `ccd-cli` that must be a directory |
//! | [`render`] | the text report |
//!
//! Exit status: [`HEALTHY`] when nothing needs doing, [`PROBLEMS`] when
//! the report lists at least one problem (a bad command line is 2, as for
//! every mode).

mod daemons;
mod host;
mod render;
mod srv;

use serde::Serialize;
use std::path::{Path, PathBuf};

/// Nothing needs doing.
pub(crate) const HEALTHY: i32 = 0;
/// At least one problem is listed, with what to do.
pub(crate) const PROBLEMS: i32 = 1;

/// The whole report, members in this order in the JSON.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub user: User,
    pub healthy: bool,
    pub problems: Vec<Problem>,
    pub srv: Vec<srv::SrvDir>,
    pub daemons: Vec<daemons::Daemon>,
    #[serde(rename = "staleSockets")]
    pub stale_sockets: Vec<daemons::StaleSocket>,
    pub logind: host::Logind,
    #[serde(rename = "ccdCli")]
    pub ccd_cli: host::CcdCli,
    /// Said once when any daemon is stale or idle: the key that ends such
    /// daemons by themselves.
    pub hint: Option<String>,
}

/// Who the report is about.
#[derive(Debug, Serialize)]
pub(crate) struct User {
    pub name: String,
    pub uid: u32,
    pub home: String,
}

/// One thing to fix.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Problem {
    /// `srv`, `daemons`, `staleSockets`, `logind` or `ccdCli`.
    pub section: &'static str,
    /// The path or pid it is about.
    pub subject: String,
    pub problem: String,
    /// What to do: a command where there is one.
    pub fix: String,
}

/// The key the doctor names for stale or idle daemons.
const IDLE_HINT: &str = "set `idle-exit-min = 60` (minutes) in remora.conf beside the server binary \
     (~/.claude/remote/srv/<sha>/remora.conf): a daemon with no client and no process for that long then stops by itself";

/// Runs `-doctor` for the user whose home is `home`; prints the report;
/// returns [`HEALTHY`] or [`PROBLEMS`].
pub(crate) fn run(home: &Path, json: bool) -> i32 {
    let report = examine(home);
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("remora: doctor: {e}");
                return PROBLEMS;
            }
        }
    } else {
        print!("{}", render::text(&report));
    }
    if report.healthy {
        HEALTHY
    } else {
        PROBLEMS
    }
}

/// Looks at everything, in the report's order.
fn examine(home: &Path) -> Report {
    let remote = home.join(".claude").join("remote");
    let own_exe = own_executable();
    let mut problems = Vec::new();
    let srv = srv::examine(&remote.join("srv"), &mut problems);
    let user_name = crate::launch::logind::user_name();
    let host_kill = crate::launch::logind::host_kill_settings();
    let kills = crate::launch::logind::systemd_running() && host_kill.kills(&user_name);
    let found = daemons::examine(home, &remote, &own_exe, kills, &mut problems);
    let logind = host::logind(&user_name, &host_kill, &mut problems);
    let ccd_cli = host::ccd_cli(&crate::launch::homepaths::default_cli_dir(home), &mut problems);
    let hint = (found.daemons.iter().any(|d| d.stale || d.idle) || !found.stale_sockets.is_empty())
        .then(|| IDLE_HINT.to_string());
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    Report {
        user: User {
            name: user_name,
            uid,
            home: home.display().to_string(),
        },
        healthy: problems.is_empty(),
        problems,
        srv,
        daemons: found.daemons,
        stale_sockets: found.stale_sockets,
        logind,
        ccd_cli,
        hint,
    }
}

/// This binary's path, for the commands the report suggests.
fn own_executable() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("remora"))
}

/// `path` as one shell word: as is when it holds only safe characters,
/// else single-quoted.
pub(crate) fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+:@%=,".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        text
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words() {
        assert_eq!(shell_word(Path::new("/a/b.sock")), "/a/b.sock");
        assert_eq!(shell_word(Path::new("/a b/it's")), "'/a b/it'\\''s'");
        assert_eq!(shell_word(Path::new("")), "''");
    }
}
