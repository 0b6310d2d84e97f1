//! Running the user's login shell to ask it something: which shell
//! ([`login_shell`]) and one bounded run ([`ask`]). The PATH probe
//! (`shellenv`) and the SSH agent hand-off (`agentsock`) both ask it, with
//! their own scripts, environments and deadlines.
//!
//! A run is `<shell> -l -i -c <script>` in its own process group, stdin
//! and stderr `/dev/null`; only stdout is read, until the caller's answer
//! is complete (a daemon the profile starts may keep the pipe open), the
//! output passes [`MAX_OUTPUT`], or the deadline. A shell still running
//! at the deadline has its group killed, and one that lingers after
//! answering gets the same deadline in the background, then the same kill.
//!
//! Every group is killed only while its shell is not reaped: the shell's
//! exit is *observed* without reaping it ([`crate::sys::process::wait_exit`]),
//! the group is killed then (so helpers a profile left in it, a `pyenv
//! rehash &`, go with the shell), and only after that is the shell reaped.
//! An unreaped shell, running or a zombie, holds its pid and so the group
//! id: the kill cannot reach a group that took the number over. After the
//! reap nothing is sent to the group any more, from anywhere.
//!
//! Every run's group is listed in [`RUNNING`] until its shell is reaped.
//! The daemon's teardown calls [`end_all`]: it kills the groups still
//! listed and closes the list, so a run that starts later (a spawn racing
//! the shutdown) is killed at once; a group's kill and its shell's reap
//! take the same lock, so the teardown can never signal a group whose
//! shell was reaped a moment before. A daemon stopped before a slow
//! profile answers leaves none of it behind. (A process the profile
//! detaches into a session of its own, such as `ssh-agent`, is not in the
//! group and is left alone.)

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Bytes of shell output read at most; a profile printing more is broken.
pub(crate) const MAX_OUTPUT: usize = 1 << 20;

/// Runs whose shell is not reaped yet; `closed` once the daemon's
/// teardown has run. Bounded by the runs in flight at once: the PATH
/// probe and the agent hand-off's runs (one at a time, each reaped within
/// two deadlines).
static RUNNING: Mutex<Groups> = Mutex::new(Groups {
    listed: Vec::new(),
    closed: false,
});

struct Groups {
    listed: Vec<Arc<Run>>,
    closed: bool,
}

/// One run's process group (the shell's pid), and whether the shell was
/// reaped, under one lock: a kill checks it, the reap sets it.
struct Run {
    group: i32,
    reaped: Mutex<bool>,
}

impl Run {
    /// Kills the group, unless its shell was reaped (then the id may name
    /// another group by now).
    fn kill(&self) {
        let reaped = self.reaped.lock().unwrap_or_else(PoisonError::into_inner);
        if !*reaped {
            // SAFETY: kill(2) on the group of a shell that is not reaped
            // (checked under the lock its reap takes), so the id is still
            // that group's.
            unsafe { libc::kill(-self.group, libc::SIGKILL) };
        }
    }
}

/// Kills the process group of every run not yet reaped, and of every run
/// started from now on. Called once the daemon's children are dealt
/// with, just before it exits.
pub(crate) fn end_all() {
    let runs = {
        let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        running.closed = true;
        std::mem::take(&mut running.listed)
    };
    for run in runs {
        run.kill();
    }
}

/// One run, listed while its shell is not reaped. Dropped without
/// [`Tracked::reap`] (the caller's future was dropped mid-run), it kills
/// the group: the shell is not reaped yet, so the id is still its own.
struct Tracked {
    run: Option<Arc<Run>>,
}

impl Tracked {
    fn new(pid: Option<u32>) -> Tracked {
        let run = pid.and_then(|p| i32::try_from(p).ok()).filter(|&p| p > 1).map(|group| {
            Arc::new(Run {
                group,
                reaped: Mutex::new(false),
            })
        });
        if let Some(run) = &run {
            let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
            if running.closed {
                run.kill();
            } else {
                running.listed.push(run.clone());
            }
        }
        Tracked { run }
    }

    fn kill(&self) {
        if let Some(run) = &self.run {
            run.kill();
        }
    }

    /// Reaps the shell, which has exited (its exit was observed), under
    /// the lock every kill of its group takes.
    fn reap(&self, child: &mut tokio::process::Child) {
        match &self.run {
            Some(run) => {
                let mut reaped = run.reaped.lock().unwrap_or_else(PoisonError::into_inner);
                // Ok(None) cannot follow an observed exit; an error means
                // there is nothing left to reap.
                *reaped = !matches!(child.try_wait(), Ok(None));
            }
            None => {
                let _ = child.try_wait();
            }
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(run) = &self.run {
            RUNNING
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .listed
                .retain(|listed| !Arc::ptr_eq(listed, run));
            run.kill();
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
    let pid = child.id().and_then(|p| i32::try_from(p).ok());
    tokio::spawn(async move {
        if let Some(pid) = pid {
            // Observed, not reaped (see the module comment).
            let exited = match tokio::time::timeout(deadline, crate::sys::process::wait_exit(pid)).await {
                Ok(exited) => exited,
                Err(_) => {
                    tracked.kill();
                    crate::sys::process::wait_exit(pid).await
                }
            };
            if exited.is_ok() {
                // The zombie holds the group id: this reaches exactly what
                // the profile left in the group.
                tracked.kill();
            }
        } else {
            let _ = child.wait().await;
        }
        tracked.reap(&mut child);
        // Dropped reaped: nothing more is sent.
        drop(tracked);
    });
    Ok(read.ok())
}

// Linux only: they read /proc, and plant pids in a pid namespace.
#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;

    /// A login shell's group is killed only while the shell is not
    /// reaped: once the run says reaped, a kill sends nothing (the id may
    /// belong to another group by then), and before, it reaches the group.
    #[test]
    fn a_run_whose_shell_was_reaped_never_signals_its_group() {
        use crate::sys::process::pidns::got_sigkill;
        use std::os::unix::process::CommandExt;
        let mut leader = std::process::Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .unwrap();
        let run = Run {
            group: leader.id() as i32,
            reaped: Mutex::new(true),
        };
        run.kill();
        assert!(!got_sigkill(&mut leader), "a reaped run's group was signalled");
        *run.reaped.lock().unwrap() = false;
        run.kill();
        assert!(got_sigkill(&mut leader), "an unreaped run's group was not killed");
        leader.wait().unwrap();
    }

    /// Planted for real in a pid namespace: a shell answers and exits, is
    /// reaped, and a new group leader gets its pid; the daemon's teardown
    /// (`end_all`) must not reach it.
    #[test]
    fn the_teardown_never_signals_the_group_that_took_a_reaped_shells_pid() {
        crate::sys::process::pidns::run("agent::loginshell::tests::reaped_shell_teardown_helper", &[]);
    }

    #[test]
    #[ignore = "runs only inside the pid namespace its parent test makes"]
    fn reaped_shell_teardown_helper() {
        use crate::sys::process::pidns;
        if !pidns::entered() {
            return;
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let pid = runtime.block_on(async {
            let answer = ask("/bin/sh", "echo $$", None, Duration::from_secs(10), |out| {
                out.ends_with(b"\n")
            })
            .await
            .unwrap()
            .expect("the shell answered");
            let pid: i32 = String::from_utf8(answer).unwrap().trim().parse().unwrap();
            // Reaped by the run's own task; nothing signals that moment.
            while !RUNNING.lock().unwrap().listed.is_empty() {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            pid
        });
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "reaped");
        let mut planted = pidns::plant(pid, || true);
        end_all();
        assert!(
            !pidns::got_sigkill(&mut planted),
            "the teardown reached the group that took the shell's pid"
        );
        planted.kill().unwrap();
        planted.wait().unwrap();
    }
}
