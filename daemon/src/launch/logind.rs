//! Whether logging out will kill the daemon, and what `-serve` does about
//! it before it detaches.
//!
//! With `KillUserProcesses=yes`, systemd-logind stops a login session's
//! scope unit (`session-<n>.scope`) at logout and kills everything in it:
//! a daemon started from an SSH session dies with the session, `setsid`
//! or not, and every client then fails its handshake. `setsid` moves a
//! process to a new session of the kernel's, not out of the cgroup.
//!
//! The launcher, still in the foreground, reads its cgroup
//! (`/proc/self/cgroup`) and logind's configuration (the same files, in
//! the same order, as logind) and decides:
//!
//! - not in a session scope, or logind will not kill this user there:
//!   nothing to do;
//! - `systemd-run --user --scope` works here (a user manager is running):
//!   the launcher re-executes itself through it, into a scope of its own
//!   under the user manager, which logout does not stop. `systemd-run
//!   --scope` execs the command in place, so descriptors (`-token-fd`),
//!   the environment and the token file are all still there;
//!   `REMORA_NO_SYSTEMD_SCOPE=1` opts out;
//! - otherwise: a warning on stderr naming `loginctl enable-linger`.
//!
//! `remora -doctor` reports the same settings, the linger mark and the
//! same remedy ([`remedy`]).
//!
//! Where logind's configuration sets nothing, the build's default is
//! unknown here: the commented `#KillUserProcesses=` line that systemd
//! ships in the main file records it, and without one `no` is assumed
//! (the default of Debian, Ubuntu and Fedora builds).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Set (to anything but empty or `0`) to keep `-serve` from moving itself
/// into a scope of its own.
pub(crate) const OPT_OUT_ENV: &str = "REMORA_NO_SYSTEMD_SCOPE";
/// Marks the launcher re-executed through `systemd-run`, so that it never
/// tries twice.
const SCOPED_ENV: &str = "REMORA_SYSTEMD_SCOPED";

/// What `-serve` does about logout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Logout will not kill the daemon (or there is no logind).
    Stay,
    /// Re-run the launcher through `systemd-run --user --scope`.
    OwnScope,
    /// Logout will kill it and remora cannot prevent it: say so.
    Warn(String),
}

/// logind's kill settings, as its configuration files leave them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KillSettings {
    pub kill_user_processes: bool,
    pub kill_only_users: Vec<String>,
    pub kill_exclude_users: Vec<String>,
}

impl KillSettings {
    /// Whether logout kills `user`'s session processes.
    pub(crate) fn kills(&self, user: &str) -> bool {
        self.kill_user_processes
            && (self.kill_only_users.is_empty() || self.kill_only_users.iter().any(|u| u == user))
            && !self.kill_exclude_users.iter().any(|u| u == user)
    }
}

/// The session scope unit (`session-3.scope`) this process runs in, from
/// the text of `/proc/self/cgroup` (cgroup v2's `0::` line, or v1's
/// `name=systemd` hierarchy).
pub(crate) fn session_scope(cgroup: &str) -> Option<String> {
    cgroup.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (hierarchy, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        if !(hierarchy == "0" && controllers.is_empty() || controllers == "name=systemd") {
            return None;
        }
        let unit = path.rsplit('/').next()?;
        (path.contains("/user.slice/") && unit.starts_with("session-") && unit.ends_with(".scope"))
            .then(|| unit.to_string())
    })
}

/// Where logind's configuration lives under `root` (`/` for the real
/// system), in the order logind applies it: the main file (the first of
/// `/etc`, `/run`, `/usr/local/lib`, `/usr/lib` that has one), then the
/// `logind.conf.d/*.conf` drop-ins of those directories sorted by file
/// name, a name in an earlier directory hiding the same name in later ones.
pub(crate) fn config_files(root: &Path) -> Vec<PathBuf> {
    let dirs = ["etc/systemd", "run/systemd", "usr/local/lib/systemd", "usr/lib/systemd"].map(|d| root.join(d));
    let mut files: Vec<PathBuf> = dirs
        .iter()
        .map(|d| d.join("logind.conf"))
        .find(|f| f.is_file())
        .into_iter()
        .collect();
    let mut drop_ins: Vec<(OsString, PathBuf)> = Vec::new();
    for dir in &dirs {
        let Ok(entries) = std::fs::read_dir(dir.join("logind.conf.d")) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "conf") && !drop_ins.iter().any(|(n, _)| *n == name) {
                drop_ins.push((name, path));
            }
        }
    }
    drop_ins.sort();
    files.extend(drop_ins.into_iter().map(|(_, p)| p));
    files
}

/// logind's kill settings from the texts of its configuration files, in
/// the order [`config_files`] gives them. Later assignments win; a list
/// assignment adds to the list and an empty one clears it.
pub(crate) fn kill_settings(texts: &[String]) -> KillSettings {
    let mut settings = KillSettings {
        kill_user_processes: false,
        kill_only_users: Vec::new(),
        kill_exclude_users: vec!["root".to_string()],
    };
    // The build's default, as the shipped main file records it.
    if let Some(main) = texts.first() {
        for line in main.lines() {
            if let Some(value) = line.trim().strip_prefix("#KillUserProcesses=") {
                if let Some(b) = parse_bool(value) {
                    settings.kill_user_processes = b;
                }
            }
        }
    }
    for text in texts {
        let mut in_login = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_login = line == "[Login]";
                continue;
            }
            if !in_login || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            let list = |list: &mut Vec<String>| {
                if value.is_empty() {
                    list.clear();
                } else {
                    list.extend(value.split_whitespace().map(str::to_string));
                }
            };
            match key {
                "KillUserProcesses" => {
                    if let Some(b) = parse_bool(value) {
                        settings.kill_user_processes = b;
                    }
                }
                "KillOnlyUsers" => list(&mut settings.kill_only_users),
                "KillExcludeUsers" => list(&mut settings.kill_exclude_users),
                _ => {}
            }
        }
    }
    settings
}

/// systemd's boolean spellings.
fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "yes" | "y" | "true" | "t" | "on" => Some(true),
        "0" | "no" | "n" | "false" | "f" | "off" => Some(false),
        _ => None,
    }
}

/// The decision for `user` in the cgroup `cgroup`. `opted_out`: the
/// operator set [`OPT_OUT_ENV`] (or this launcher already went through
/// `systemd-run`); `can_scope` is asked only when it matters.
pub(crate) fn decide(
    cgroup: &str,
    settings: &KillSettings,
    user: &str,
    opted_out: bool,
    can_scope: impl FnOnce() -> bool,
) -> Decision {
    let Some(scope) = session_scope(cgroup) else {
        return Decision::Stay;
    };
    if !settings.kills(user) {
        return Decision::Stay;
    }
    if !opted_out && can_scope() {
        return Decision::OwnScope;
    }
    let why = if opted_out {
        format!("{OPT_OUT_ENV} is set")
    } else {
        "`systemd-run --user --scope` does not work here".to_string()
    };
    Decision::Warn(format!(
        "logout will kill this daemon: it runs in the login session's {scope}, and systemd-logind has \
         KillUserProcesses=yes for {user}; {why}, so it stays there. To keep it: {}",
        remedy(user)
    ))
}

/// What keeps a daemon alive across logout, for `user` (the warning of
/// `-serve` and `remora -doctor` both say it).
pub(crate) fn remedy(user: &str) -> String {
    format!(
        "`loginctl enable-linger {user}` (starts a user manager), then start it again with `systemd-run --user \
         --scope` or without {OPT_OUT_ENV}; or set KillUserProcesses=no"
    )
}

/// logind's kill settings on this host (its configuration files under `/`).
pub(crate) fn host_kill_settings() -> KillSettings {
    let texts: Vec<String> = config_files(Path::new("/"))
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .collect();
    kill_settings(&texts)
}

/// Whether `user` has lingering on: logind keeps a user manager for them
/// from boot to shutdown, which is what `loginctl enable-linger` marks
/// with this file.
pub(crate) fn linger_enabled(user: &str) -> bool {
    !user.is_empty()
        && !user.contains('/')
        && std::fs::symlink_metadata(Path::new("/var/lib/systemd/linger").join(user)).is_ok()
}

/// Whether systemd runs this host (and so logind may be there).
pub(crate) fn systemd_running() -> bool {
    std::fs::symlink_metadata("/run/systemd/system").is_ok_and(|m| m.is_dir())
}

/// The name of the user this process runs as (empty when unknown).
pub(crate) fn user_name() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_default()
}

/// Launcher side of `-serve`, before the token is read: moves this
/// launcher into a scope of its own when logout would kill the daemon
/// (does not return then), or warns on stderr when it cannot.
pub(crate) fn escape_session_scope() {
    let scoped_already = std::env::var_os(SCOPED_ENV).is_some();
    let Ok(cgroup) = std::fs::read_to_string("/proc/self/cgroup") else {
        return; // No cgroups (macOS, or no /proc): no logind either.
    };
    if session_scope(&cgroup).is_none() {
        return;
    }
    let user = user_name();
    let opted_out = std::env::var(OPT_OUT_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
    // Re-executed through systemd-run and still in the session's scope:
    // trying again would loop.
    let can_scope = || !scoped_already && systemd_run_works();
    match decide(&cgroup, &host_kill_settings(), &user, opted_out, can_scope) {
        Decision::Stay => {}
        Decision::OwnScope => {
            let error = reexec_in_own_scope();
            crate::log_warn!(
                "[daemon] could not re-run through systemd-run ({}); logout will kill this daemon",
                crate::base::goerr::io_text(&error)
            );
        }
        Decision::Warn(message) => crate::log_warn!("[daemon] {message}"),
    }
}

/// Whether `systemd-run --user --scope` can run a command here.
fn systemd_run_works() -> bool {
    std::process::Command::new("systemd-run")
        .args(["--user", "--scope", "--quiet", "--collect", "--", "true"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Replaces this process with `systemd-run --user --scope -- <own
/// executable> <own arguments>`; returns only the error if that fails.
fn reexec_in_own_scope() -> std::io::Error {
    use std::os::unix::process::CommandExt;
    let exe = match std::fs::read_link("/proc/self/exe") {
        Ok(p) => p,
        Err(e) => return e,
    };
    std::process::Command::new("systemd-run")
        .args(["--user", "--scope", "--quiet", "--collect", "--"])
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .env(SCOPED_ENV, "1")
        .exec()
}

#[cfg(test)]
mod tests {
    use super::*;

    const IN_SESSION: &str = "0::/user.slice/user-1000.slice/session-3.scope\n";
    const UNDER_USER_MANAGER: &str = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope\n";

    fn kill_yes() -> KillSettings {
        kill_settings(&["[Login]\nKillUserProcesses=yes\n".to_string()])
    }

    #[test]
    fn session_scopes_from_cgroup_v2_and_v1() {
        assert_eq!(session_scope(IN_SESSION).as_deref(), Some("session-3.scope"));
        let v1 = "12:cpu,cpuacct:/user.slice\n1:name=systemd:/user.slice/user-0.slice/session-c7.scope\n0::/\n";
        assert_eq!(session_scope(v1).as_deref(), Some("session-c7.scope"));
        assert_eq!(session_scope(UNDER_USER_MANAGER), None);
        assert_eq!(session_scope("0::/system.slice/ssh.service\n"), None);
        assert_eq!(session_scope("0::/\n"), None);
        assert_eq!(session_scope(""), None);
    }

    #[test]
    fn settings_follow_logind_order_and_list_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let write = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        // The shipped main file records the build's default in a comment.
        write("usr/lib/systemd/logind.conf", "[Login]\n#KillUserProcesses=yes\n");
        write(
            "usr/lib/systemd/logind.conf.d/10-vendor.conf",
            "[Login]\nKillExcludeUsers=root alice\n",
        );
        write(
            "etc/systemd/logind.conf.d/20-site.conf",
            "[Login]\nKillOnlyUsers=bob carol\n",
        );
        write(
            "run/systemd/logind.conf.d/20-site.conf",
            "[Login]\nKillUserProcesses=no\n",
        );
        write(
            "etc/systemd/logind.conf.d/ignored.txt",
            "[Login]\nKillUserProcesses=no\n",
        );
        let files = config_files(root);
        assert_eq!(
            files,
            vec![
                root.join("usr/lib/systemd/logind.conf"),
                root.join("usr/lib/systemd/logind.conf.d/10-vendor.conf"),
                root.join("etc/systemd/logind.conf.d/20-site.conf"),
            ]
        );
        let texts: Vec<String> = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
        let s = kill_settings(&texts);
        assert!(s.kill_user_processes);
        assert_eq!(s.kill_only_users, ["bob", "carol"]);
        assert_eq!(s.kill_exclude_users, ["root", "root", "alice"]);
        assert!(s.kills("bob"));
        assert!(!s.kills("alice") && !s.kills("root") && !s.kills("dave"));

        // /etc's main file wins over /usr/lib's; an empty list resets.
        write(
            "etc/systemd/logind.conf",
            "[Login]\n#KillUserProcesses=no\nKillExcludeUsers=\n",
        );
        let texts: Vec<String> = config_files(root)
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect();
        let s = kill_settings(&texts);
        assert!(!s.kill_user_processes);
        assert_eq!(s.kill_exclude_users, ["root", "alice"]);
    }

    #[test]
    fn no_configuration_means_no_killing() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(config_files(tmp.path()).is_empty());
        assert!(!kill_settings(&[]).kills("alice"));
        // Only the [Login] section counts.
        assert!(!kill_settings(&["[Other]\nKillUserProcesses=yes\n".to_string()]).kills("alice"));
    }

    #[test]
    fn decisions() {
        let never = || -> bool { panic!("systemd-run asked when it does not matter") };
        assert_eq!(
            decide(UNDER_USER_MANAGER, &kill_yes(), "alice", false, never),
            Decision::Stay
        );
        assert_eq!(
            decide(IN_SESSION, &kill_settings(&[]), "alice", false, never),
            Decision::Stay
        );
        assert_eq!(decide(IN_SESSION, &kill_yes(), "root", false, never), Decision::Stay);
        assert_eq!(
            decide(IN_SESSION, &kill_yes(), "alice", false, || true),
            Decision::OwnScope
        );

        let Decision::Warn(cannot) = decide(IN_SESSION, &kill_yes(), "alice", false, || false) else {
            panic!("no warning");
        };
        assert!(cannot.contains("session-3.scope"), "{cannot}");
        assert!(cannot.contains("`loginctl enable-linger alice`"), "{cannot}");
        assert!(
            cannot.contains("`systemd-run --user --scope` does not work here"),
            "{cannot}"
        );

        let Decision::Warn(opted) = decide(IN_SESSION, &kill_yes(), "alice", true, never) else {
            panic!("no warning");
        };
        assert!(opted.contains("REMORA_NO_SYSTEMD_SCOPE is set"), "{opted}");
        assert!(opted.contains("`loginctl enable-linger alice`"), "{opted}");
    }
}
