//! Login-shell PATH extraction (`[shellenv]`).
//!
//! A daemon started over SSH gets a bare, non-login environment, while the
//! user's tools (node, the agent CLI, MCP servers) are usually put on PATH
//! by their login and interactive shell profiles. At start-up the daemon
//! asks the user's shell ([`crate::agent::loginshell::login_shell`]: `$SHELL` when
//! executable, else zsh, bash, sh) for its PATH, once, in
//! the background — the socket never waits for it — and stores the answer
//! with the process supervisor ([`crate::process::ProcessManager::set_login_path`])
//! for spawned children.
//!
//! The shell runs as [`crate::agent::loginshell::ask`] runs it (`-l -i -c`, stdin
//! on `/dev/null`, stderr discarded, its own process group); the script prints PATH
//! between two markers so banners and other profile noise on stdout are
//! ignored. After [`TIMEOUT`] the whole group is killed and the daemon's
//! own PATH stays in effect.

use crate::serve::state::Daemon;
use std::sync::Arc;
use std::time::Duration;

/// How long a login shell may take to report.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);
const BEGIN: &str = "__REMORA_PATH_BEGIN__";
const END: &str = "__REMORA_PATH_END__";

/// Starts the extraction in the background.
pub(crate) fn spawn(daemon: Arc<Daemon>) {
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
    crate::agent::loginshell::login_shell()
}

/// Runs `shell` and returns the PATH it reports.
pub(crate) async fn extract(shell: &str) -> Result<String, String> {
    // `printf` with the markers as arguments: works in sh, bash, zsh, fish
    // and tcsh alike, and "$PATH" is expanded by the login shell only.
    let script = format!("printf '%s%s%s' {BEGIN} \"$PATH\" {END}");
    let answered = |out: &[u8]| find_path(out).is_some();
    let run = crate::agent::loginshell::ask(shell, &script, None, TIMEOUT, answered).await;
    match run.map_err(|e| crate::base::goerr::io_text(&e))? {
        None => Err(format!("timed out after {}s", TIMEOUT.as_secs())),
        Some(out) => match find_path(&out) {
            Some(path) if !path.is_empty() => Ok(path),
            Some(_) => Err("it printed an empty or multi-line PATH".to_string()),
            None => Err("it printed no PATH".to_string()),
        },
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
