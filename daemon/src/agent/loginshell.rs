//! Running the user's login shell to ask it something: which shell
//! ([`login_shell`]) and one bounded run ([`ask`]). The PATH probe
//! (`shellenv`) and the SSH agent hand-off (`agentsock`) both ask it, with
//! their own scripts, environments and deadlines.
//!
//! A run is `<shell> -l -i -c <script>` in its own process group, stdin
//! and stderr `/dev/null`; only stdout is read, until the caller's answer
//! is complete (a daemon the profile starts may keep the pipe open), the
//! output passes [`MAX_OUTPUT`], or the deadline. A shell still running
//! at the deadline has its group killed before anything may reap it (so
//! the group id is still its own), and one that lingers after answering
//! gets the same deadline in the background, then the same kill.
//!
//! Every group not yet reaped is listed in [`RUNNING`], and the daemon's
//! teardown calls [`end_all`]: a daemon stopped before a slow profile
//! answers (a `pyenv rehash` waiting on its lock, a hung network mount)
//! leaves none of it behind.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Bytes of shell output read at most; a profile printing more is broken.
pub(crate) const MAX_OUTPUT: usize = 1 << 20;

/// Process groups (the shell's pid) of runs not yet reaped. At most a
/// handful: the PATH probe runs once, the agent hand-off a bounded number
/// of times.
static RUNNING: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Kills the process group of every run not yet reaped. Called once the
/// daemon's children are dealt with, just before it exits.
pub(crate) fn end_all() {
    let groups = std::mem::take(&mut *RUNNING.lock().unwrap_or_else(PoisonError::into_inner));
    for group in groups {
        kill_group(Some(group));
    }
}

fn track(group: i32, running: bool) {
    let mut list = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
    list.retain(|&g| g != group);
    if running {
        list.push(group);
    }
}

/// The user's login shell: `$SHELL` when it names an executable file,
/// else the first of `/bin/zsh`, `/bin/bash`, `/bin/sh` that is one.
pub(crate) fn login_shell() -> String {
    let from_env = std::env::var("SHELL").ok().filter(|s| s.starts_with('/'));
    from_env
        .into_iter()
        .chain(["/bin/zsh", "/bin/bash"].map(String::from))
        .find(|s| is_executable_file(s))
        .unwrap_or_else(|| "/bin/sh".to_string())
}

fn is_executable_file(path: &str) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What a run gave: its stdout (up to the answer or the cap), or `None`
/// when the deadline passed first.
pub(crate) type Answer = Option<Vec<u8>>;

/// Runs `shell` with `script` once (see the module comment). `env`
/// replaces the environment when given. `answered` says when the output
/// holds a complete answer. Errors only when the shell does not start.
pub(crate) async fn ask(
    shell: &str,
    script: &str,
    env: Option<Vec<(OsString, OsString)>>,
    deadline: Duration,
    answered: impl Fn(&[u8]) -> bool,
) -> std::io::Result<Answer> {
    let mut command = tokio::process::Command::new(shell);
    command.args(["-l", "-i", "-c", script]);
    if let Some(env) = env {
        command.env_clear().envs(env);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // Own process group, so a kill reaches whatever the profile started.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id();
    let group = pid.and_then(|p| i32::try_from(p).ok()).filter(|&p| p > 1);
    if let Some(group) = group {
        track(group, true);
    }
    let Some(mut stdout) = child.stdout.take() else {
        return Err(std::io::Error::other("no stdout pipe"));
    };
    let read = async {
        let mut out = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match stdout.read(&mut buf).await {
                Ok(0) | Err(_) => return out,
                Ok(n) => {
                    out.extend_from_slice(buf.get(..n).unwrap_or_default());
                    if answered(&out) || out.len() > MAX_OUTPUT {
                        return out;
                    }
                }
            }
        }
    };
    let read = tokio::time::timeout(deadline, read).await;
    if read.is_err() {
        kill_group(pid);
    }
    tokio::spawn(async move {
        if tokio::time::timeout(deadline, child.wait()).await.is_err() {
            kill_group(pid);
            let _ = child.wait().await;
        }
        // Reaped: the group id may be reused from here on.
        if let Some(group) = group {
            track(group, false);
        }
    });
    Ok(read.ok())
}

fn kill_group(pid: Option<impl TryInto<i32>>) {
    if let Some(pid) = pid.and_then(|p| p.try_into().ok()).filter(|&p| p > 1) {
        // SAFETY: signalling the process group created for the shell.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
}
