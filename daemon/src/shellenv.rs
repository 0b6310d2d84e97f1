//! Login-shell PATH extraction (`[shellenv]`).
//!
//! A daemon started over SSH gets a bare, non-login environment, while the
//! user's tools (node, the agent CLI, MCP servers) are usually put on PATH
//! by their login and interactive shell profiles. At start-up the daemon
//! asks the user's shell ([`crate::agentsock::login_shell`]: `$SHELL` when
//! executable, else zsh, bash, sh) for its PATH, once, in
//! the background — the socket never waits for it — and stores the answer
//! with the process supervisor ([`crate::process::ProcessManager::set_login_path`])
//! for spawned children.
//!
//! The shell runs as `<shell> -l -i -c <script>` with stdin on `/dev/null`,
//! stderr discarded, in its own process group; the script prints PATH
//! between two markers so banners and other profile noise on stdout are
//! ignored. After [`TIMEOUT`] the whole group is killed and the daemon's
//! own PATH stays in effect.

use crate::state::Daemon;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// How long a login shell may take to report.
pub const TIMEOUT: Duration = Duration::from_secs(5);
const BEGIN: &str = "__REMORA_PATH_BEGIN__";
const END: &str = "__REMORA_PATH_END__";
/// More output than any profile should print; past it the shell is
/// treated as broken.
const MAX_OUTPUT: usize = 1 << 20;

/// Starts the extraction in the background.
pub fn spawn(daemon: Arc<Daemon>) {
    tokio::spawn(async move {
        let shell = login_shell();
        match extract(&shell).await {
            Ok(path) => {
                crate::log_info!("[shellenv] Using PATH from login shell {shell}: {path}");
                daemon.processes.set_login_path(path);
            }
            Err(why) => {
                crate::log_warn!(
                    "[shellenv] Could not read PATH from login shell {shell}: {why}; children keep the daemon's PATH"
                );
            }
        }
    });
}

fn login_shell() -> String {
    crate::agentsock::login_shell()
}

/// Runs `shell` and returns the PATH it reports.
pub async fn extract(shell: &str) -> Result<String, String> {
    // `printf` with the markers as arguments: works in sh, bash, zsh, fish
    // and tcsh alike, and "$PATH" is expanded by the login shell only.
    let script = format!("printf '%s%s%s' {BEGIN} \"$PATH\" {END}");
    let mut child = tokio::process::Command::new(shell)
        .args(["-l", "-i", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // Own process group, so a timeout kills whatever the profile
        // started too.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| crate::goerr::io_text(&e))?;
    let pid = child.id();
    let Some(mut stdout) = child.stdout.take() else {
        return Err("no stdout pipe".to_string());
    };
    let read = async {
        let mut out = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match stdout.read(&mut buf).await {
                Ok(0) | Err(_) => return out,
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    // Done as soon as the end marker is in: a daemon
                    // started by the profile may keep the pipe open.
                    if find_path(&out).is_some() || out.len() > MAX_OUTPUT {
                        return out;
                    }
                }
            }
        }
    };
    let result = tokio::time::timeout(TIMEOUT, read).await;
    let outcome = match &result {
        Ok(out) => match find_path(out) {
            Some(path) if !path.is_empty() => Ok(path),
            Some(_) => Err("it printed an empty or multi-line PATH".to_string()),
            None => Err("it printed no PATH".to_string()),
        },
        Err(_) => Err(format!("timed out after {}s", TIMEOUT.as_secs())),
    };
    if outcome.is_err() {
        kill_group(pid);
    }
    // Reap in the background; a shell that lingers after printing gets the
    // same deadline, then its group is killed.
    tokio::spawn(async move {
        if tokio::time::timeout(TIMEOUT, child.wait()).await.is_err() {
            kill_group(pid);
            let _ = child.wait().await;
        }
    });
    outcome
}

fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: signalling the process group we created for the shell.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
}

/// The text between the markers, if both are present and it is one line.
fn find_path(out: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(out);
    let start = text.find(BEGIN)? + BEGIN.len();
    let len = text[start..].find(END)?;
    let path = &text[start..start + len];
    if path.contains(['\n', '\0']) {
        return Some(String::new());
    }
    Some(path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_skip_profile_noise() {
        let out = format!("Welcome!\n\x1b[?2004h{BEGIN}/a:/b{END}bye");
        assert_eq!(find_path(out.as_bytes()).as_deref(), Some("/a:/b"));
        assert_eq!(find_path(BEGIN.as_bytes()), None);
        assert_eq!(find_path(b"nothing"), None);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn reads_path_from_sh() {
        let path = extract("/bin/sh").await.expect("sh reports a PATH");
        assert!(!path.is_empty());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_shell_that_fails_is_an_error() {
        assert!(extract("/bin/false").await.is_err());
        assert!(extract("/nonexistent/shell").await.is_err());
    }
}
