//! The doctor's look at `~/.claude/remote/srv/<sha>/`, where Desktop
//! caches the daemon it uploads (and `ci/install-remote --desktop` puts
//! remora): whether `server` is remora, the build it answers as, whether
//! Desktop's own build is kept as `server.reference`, and whether
//! `remora.conf` beside it is read.
//!
//! `server --version` is run as Desktop runs it (stdin closed, bounded
//! by [`VERSION_BOUND`], its output cut at [`MAX_OUTPUT`]), and only for
//! a regular file of this user or root that is executable: its line says
//! what Desktop will see. Desktop takes the token after `claude-ssh` and
//! compares it with the build it pins, the directory's name.

use super::Problem;
use crate::protocol::build::{Build, Choice};
use serde::Serialize;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long `server --version` may take.
const VERSION_BOUND: Duration = Duration::from_secs(10);
/// What is read of its output.
const MAX_OUTPUT: u64 = 4096;

/// One `srv/<name>` entry, members in this order in the JSON.
#[derive(Debug, Serialize)]
pub(crate) struct SrvDir {
    pub path: String,
    pub name: String,
    /// `false` for an entry that is not a directory (nothing else is
    /// looked at).
    pub directory: bool,
    pub server: Option<Server>,
    /// `server.reference` is there (a regular file): Desktop's own build,
    /// kept by `ci/install-remote --desktop`.
    #[serde(rename = "serverReference")]
    pub server_reference: bool,
    /// `remora.conf` beside `server`: `absent`, `read`, or `refused: why`.
    #[serde(rename = "remoraConf")]
    pub remora_conf: String,
}

/// What `srv/<name>/server` is.
#[derive(Debug, Serialize)]
pub(crate) struct Server {
    /// `file`, `missing`, `link` or `other` (not followed, not run).
    pub kind: &'static str,
    /// The first line of `server --version`.
    #[serde(rename = "versionLine")]
    pub version_line: Option<String>,
    /// Whether that line is remora's; `None` when it was not run.
    pub remora: Option<bool>,
    /// The build id it answers as: for remora, the recorded build its
    /// `reference-build` stamp selects; for another server, its own token.
    #[serde(rename = "answersAs")]
    pub answers_as: Option<String>,
    /// The token Desktop reads (`claude-ssh <token>`).
    pub token: Option<String>,
    /// For remora: `recorded`, `unstamped` or `unrecorded` (the last two
    /// answer as the newest recorded build).
    pub stamp: Option<&'static str>,
    /// Why `--version` gave nothing usable.
    pub error: Option<String>,
}

/// Every entry of `srv` (sorted by name); problems go to `problems`.
pub(crate) fn examine(srv: &Path, problems: &mut Vec<Problem>) -> Vec<SrvDir> {
    let Ok(entries) = std::fs::read_dir(srv) else {
        return Vec::new();
    };
    let mut names: Vec<std::ffi::OsString> = entries.flatten().map(|e| e.file_name()).collect();
    names.sort();
    names
        .into_iter()
        .map(|name| one(&srv.join(&name), &name.to_string_lossy(), problems))
        .collect()
}

fn one(dir: &Path, name: &str, problems: &mut Vec<Problem>) -> SrvDir {
    let directory = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
    let mut entry = SrvDir {
        path: dir.display().to_string(),
        name: name.to_string(),
        directory,
        server: None,
        server_reference: false,
        remora_conf: String::new(),
    };
    if !directory {
        return entry;
    }
    entry.server = Some(server(&dir.join("server")));
    entry.server_reference = std::fs::symlink_metadata(dir.join("server.reference")).is_ok_and(|m| m.is_file());
    let conf = crate::launch::settings::load(&dir.join(crate::launch::settings::FILE_NAME));
    entry.remora_conf = match conf.state {
        crate::launch::settings::FileState::Absent => "absent".to_string(),
        crate::launch::settings::FileState::Read => "read".to_string(),
        crate::launch::settings::FileState::Refused(why) => format!("refused: {why}"),
    };
    judge(&entry, dir, problems);
    entry
}

/// The problems of one directory: a remora `server` whose token is not
/// the build Desktop pins there (Desktop would upload over it), and a
/// `server` that did not answer `--version`.
fn judge(entry: &SrvDir, dir: &Path, problems: &mut Vec<Problem>) {
    let Some(server) = &entry.server else {
        return;
    };
    let path = dir.join("server");
    if let Some(error) = &server.error {
        problems.push(Problem {
            section: "srv",
            subject: path.display().to_string(),
            problem: format!("`server --version` {error}: Desktop cannot tell which build this is"),
            fix: format!(
                "move it away so that Desktop uploads its build again: mv {} {}.broken",
                super::shell_word(&path),
                super::shell_word(&path)
            ),
        });
        return;
    }
    let pinned = is_full_sha(&entry.name);
    if server.remora == Some(true) && pinned {
        let token = server.token.as_deref().unwrap_or("");
        if !token.eq_ignore_ascii_case(&entry.name) {
            let conf = dir.join(crate::launch::settings::FILE_NAME);
            problems.push(Problem {
                section: "srv",
                subject: path.display().to_string(),
                problem: format!(
                    "remora here answers `--version` with {}, not the build Desktop pins ({}): Desktop uploads its own build over it",
                    if token.is_empty() { "no claude-ssh token" } else { token },
                    entry.name
                ),
                fix: format!(
                    "write `reference-build = {}` into {} (or run ci/install-remote --desktop again)",
                    entry.name,
                    super::shell_word(&conf)
                ),
            });
        }
    }
}

/// A full commit id: what Desktop names a `srv` directory.
fn is_full_sha(name: &str) -> bool {
    (name.len() == 40 || name.len() == 64) && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// What `server` is, and what its `--version` says.
fn server(path: &Path) -> Server {
    let mut server = Server {
        kind: "missing",
        version_line: None,
        remora: None,
        answers_as: None,
        token: None,
        stamp: None,
        error: None,
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(_) => return server,
    };
    server.kind = if meta.file_type().is_symlink() {
        "link"
    } else if meta.is_file() {
        "file"
    } else {
        "other"
    };
    if server.kind != "file" {
        return server;
    }
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me && meta.uid() != 0 {
        server.error = Some(format!("was not run: the file belongs to uid {}", meta.uid()));
        return server;
    }
    if meta.mode() & 0o111 == 0 {
        server.error = Some("was not run: the file is not executable".to_string());
        return server;
    }
    match version_line(path) {
        Ok(line) => {
            let remora = line.starts_with("remora ") || line.contains("(via remora ");
            let token = claude_ssh_token(&line);
            if remora {
                let (build, choice) = Build::for_stamp(token.as_deref().unwrap_or(""));
                server.answers_as = Some(build.id.to_string());
                server.stamp = Some(match choice {
                    Choice::Recorded => "recorded",
                    Choice::Unstamped => "unstamped",
                    Choice::Unrecorded => "unrecorded",
                });
            } else {
                server.answers_as = token.clone();
            }
            server.remora = Some(remora);
            server.token = token;
            server.version_line = Some(line);
        }
        Err(why) => server.error = Some(why),
    }
    server
}

/// The token Desktop takes from a `--version` line:
/// `/claude-ssh\s+(\S+)/`.
fn claude_ssh_token(line: &str) -> Option<String> {
    let at = line.find("claude-ssh")?;
    let rest = &line[at + "claude-ssh".len()..];
    let trimmed = rest.trim_start();
    if trimmed.len() == rest.len() {
        return None;
    }
    trimmed.split_whitespace().next().map(str::to_string)
}

/// The first line `path --version` prints, within [`VERSION_BOUND`].
fn version_line(path: &Path) -> Result<String, String> {
    let mut child = Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("could not start: {}", crate::base::goerr::io_text(&e)))?;
    let Some(stdout) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("could not start: no output pipe".to_string());
    };
    let (tx, rx) = std::sync::mpsc::channel();
    // The reader ends at EOF: the program exited, or was killed below.
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.take(MAX_OUTPUT).read_to_end(&mut out);
        let _ = tx.send(out);
    });
    let outcome = rx.recv_timeout(VERSION_BOUND);
    // An unreaped child (a zombie at worst): the kill cannot reach another
    // process, and the wait reaps it.
    let _ = child.kill();
    let status = child.wait();
    let out = match outcome {
        // The reader has sent: it is done. After a timeout it is left to
        // end with the pipe (a grandchild may still hold it open).
        Ok(out) => {
            let _ = reader.join();
            out
        }
        Err(_) => return Err(format!("hung (killed after {}s)", VERSION_BOUND.as_secs())),
    };
    let text = String::from_utf8_lossy(&out);
    match text.lines().map(str::trim).find(|l| !l.is_empty()) {
        Some(line) => Ok(line.to_string()),
        None => Err(match status {
            Ok(s) if !s.success() => format!("failed ({s}) and printed nothing"),
            _ => "printed nothing".to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_as_desktop_reads_them() {
        assert_eq!(
            claude_ssh_token("claude-ssh abc123 (via remora 1.0, built x)").as_deref(),
            Some("abc123")
        );
        assert_eq!(claude_ssh_token("claude-ssh\tdef").as_deref(), Some("def"));
        assert_eq!(claude_ssh_token("remora 1.0 (built x)"), None);
        assert_eq!(claude_ssh_token("claude-sshx y"), None);
        assert!(is_full_sha(&"a".repeat(40)) && is_full_sha(&"B".repeat(64)));
        assert!(!is_full_sha("abc") && !is_full_sha(&"g".repeat(40)));
    }
}
