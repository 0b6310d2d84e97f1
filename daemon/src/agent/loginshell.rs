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
//! Every run's group is listed in [`RUNNING`] until its shell is reaped,
//! and the group is killed then too, so helpers a profile left in it (a
//! `pyenv rehash &`) go with the shell. The daemon's teardown calls
//! [`end_all`]: it kills the groups still listed and closes the list, so
//! a run that starts later (a spawn racing the shutdown) is killed at
//! once. A daemon stopped before a slow profile answers leaves none of it
//! behind. (A process the profile detaches into a session of its own,
//! such as `ssh-agent`, is not in the group and is left alone.)

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Bytes of shell output read at most; a profile printing more is broken.
pub(crate) const MAX_OUTPUT: usize = 1 << 20;

/// Process groups (the shell's pid) of runs not yet reaped; `closed` once
/// the daemon's teardown has run. Bounded by the runs in flight at once:
/// the PATH probe and the agent hand-off's runs (one at a time, each
/// reaped within two deadlines).
static RUNNING: Mutex<Groups> = Mutex::new(Groups {
    listed: Vec::new(),
    closed: false,
});

struct Groups {
    listed: Vec<i32>,
    closed: bool,
}

/// Kills the process group of every run not yet reaped, and of every run
/// started from now on. Called once the daemon's children are dealt
/// with, just before it exits.
pub(crate) fn end_all() {
    let groups = {
        let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        running.closed = true;
        std::mem::take(&mut running.listed)
    };
    for group in groups {
        kill_group(group);
    }
}

/// One run's group, listed while its shell is not reaped. Dropped without
/// [`Tracked::reaped`] (the caller's future was dropped mid-run), it kills
/// the group: the shell is not reaped yet, so the id is still its own.
struct Tracked {
    group: Option<i32>,
    reaped: bool,
}

impl Tracked {
    fn new(pid: Option<u32>) -> Tracked {
        let group = pid.and_then(|p| i32::try_from(p).ok()).filter(|&p| p > 1);
        if let Some(group) = group {
            let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
            if running.closed {
                kill_group(group);
            } else {
                running.listed.push(group);
            }
        }
        Tracked { group, reaped: false }
    }

    fn kill(&self) {
        if let Some(group) = self.group {
            kill_group(group);
        }
    }

    /// The shell was reaped. Its group's other members still hold the id
    /// (it cannot be reused while they live), so killing it now reaches
    /// exactly them; with none left the kill finds nothing.
    fn reaped(mut self) {
        self.reaped = true;
        self.kill();
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(group) = self.group {
            RUNNING
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .listed
                .retain(|&g| g != group);
            if !self.reaped {
                kill_group(group);
            }
        }
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
    let Some(mut stdout) = child.stdout.take() else {
        return Err(std::io::Error::other("no stdout pipe"));
    };
    let tracked = Tracked::new(child.id());
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
        tracked.kill();
    }
    tokio::spawn(async move {
        if tokio::time::timeout(deadline, child.wait()).await.is_err() {
            tracked.kill();
            let _ = child.wait().await;
        }
        tracked.reaped();
    });
    Ok(read.ok())
}

fn kill_group(group: i32) {
    // SAFETY: signalling the process group created for a shell run (see
    // `Tracked` for why the id is still that group's).
    unsafe { libc::kill(-group, libc::SIGKILL) };
}
