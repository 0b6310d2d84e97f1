//! The doctor's look at the host around the daemons: whether logout kills
//! them (systemd-logind's `KillUserProcesses`, and whether this user
//! lingers; the rules are `launch::logind`'s), and whether
//! `~/.claude/remote/ccd-cli`, where `-install` puts the agent CLI, is
//! something `mkdir` can use (a leftover flat file there breaks every
//! install: `patrickjaja/claude-desktop-extra` #106).

use super::{shell_word, Problem};
use crate::launch::logind::KillSettings;
use serde::Serialize;
use std::path::Path;

/// logind as it concerns this user.
#[derive(Debug, Serialize)]
pub(crate) struct Logind {
    /// systemd runs this host (else there is no logind to kill anything).
    pub systemd: bool,
    #[serde(rename = "killUserProcesses")]
    pub kill_user_processes: bool,
    /// Logout kills this user's session processes (the setting, with
    /// `KillOnlyUsers` / `KillExcludeUsers` applied).
    #[serde(rename = "killsUser")]
    pub kills_user: bool,
    /// `loginctl enable-linger` is on for this user.
    pub linger: bool,
    pub advice: String,
}

/// What `ccd-cli` is.
#[derive(Debug, Serialize)]
pub(crate) struct CcdCli {
    pub path: String,
    /// `absent`, `directory`, `link to a directory`, or what else it is.
    pub kind: String,
    pub ok: bool,
}

pub(crate) fn logind(user: &str, settings: &KillSettings, problems: &mut Vec<Problem>) -> Logind {
    let systemd = crate::launch::logind::systemd_running();
    let kills_user = systemd && settings.kills(user);
    let linger = crate::launch::logind::linger_enabled(user);
    let advice = if !systemd {
        "systemd does not run here: logout kills no daemon".to_string()
    } else if !kills_user {
        format!("logout does not kill {user}'s processes (KillUserProcesses=no for this user)")
    } else if linger {
        format!(
            "logout kills processes left in a login session; {user} lingers, so `remora -serve` moves itself into a scope of its own that survives"
        )
    } else {
        let fix = crate::launch::logind::remedy(user);
        problems.push(Problem {
            section: "logind",
            subject: user.to_string(),
            problem: format!(
                "systemd-logind has KillUserProcesses=yes for {user} and {user} does not linger: a daemon dies when the last login session ends"
            ),
            fix: fix.clone(),
        });
        format!("logout kills the daemon: {fix}")
    };
    Logind {
        systemd,
        kill_user_processes: settings.kill_user_processes,
        kills_user,
        linger,
        advice,
    }
}

pub(crate) fn ccd_cli(path: &Path, problems: &mut Vec<Problem>) -> CcdCli {
    let kind = match std::fs::symlink_metadata(path) {
        Err(_) => "absent".to_string(),
        Ok(m) if m.is_dir() => "directory".to_string(),
        Ok(m) if m.file_type().is_symlink() => match std::fs::metadata(path) {
            Ok(target) if target.is_dir() => "link to a directory".to_string(),
            Ok(_) => "link to something that is not a directory".to_string(),
            Err(_) => "dangling link".to_string(),
        },
        Ok(m) if m.is_file() => "regular file".to_string(),
        Ok(_) => "special file".to_string(),
    };
    let ok = matches!(kind.as_str(), "absent" | "directory" | "link to a directory");
    if !ok {
        problems.push(Problem {
            section: "ccdCli",
            subject: path.display().to_string(),
            problem: format!("a {kind} where -install needs a directory: every CLI install fails"),
            fix: format!("mv {} {}.old", shell_word(path), shell_word(path)),
        });
    }
    CcdCli {
        path: path.display().to_string(),
        kind,
        ok,
    }
}
