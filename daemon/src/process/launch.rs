//! The OS's part of starting a child, the seam between `process.spawn`
//! ([`super::spawn`]: checks, environment, the wiring of pumps and
//! supervisor, all portable) and the system: [`launch`] starts the
//! program in a process group of its own with three pipes (directly,
//! through the Linux spawner, or through the exec-child trampoline while
//! children are recorded), and [`Started::into_pipes`] hands the daemon's
//! ends to the reactor. The Windows half is `windows/launch.rs`.

use super::command;
use super::command::{ExecError, SpawnSpec};
use super::pumps::{grow_pipe, PIPE_SIZE};
use crate::sys::process as sys;
use std::os::unix::ffi::OsStrExt;
use std::process::Stdio;

/// What a child's stdout and stderr are read through.
pub(crate) type OutPipe = tokio::net::unix::pipe::Receiver;

/// What a child's stdin is written through.
pub(crate) type InPipe = tokio::process::ChildStdin;

/// A new child's pipes, as registered with the tokio reactor.
pub(super) type ChildPipes = (
    std::io::Result<InPipe>,
    std::io::Result<OutPipe>,
    std::io::Result<OutPipe>,
);

/// The command that runs `program` for `spec`, directly or (with `report`,
/// the trampoline's report pipe) through the exec-child trampoline.
fn child_command(
    spec: &SpawnSpec<'_>,
    program: &str,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    report: Option<&std::os::fd::OwnedFd>,
) -> std::process::Command {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let mut cmd = match report {
        Some(fd) => {
            let mut cmd = std::process::Command::new(crate::agent::trampoline::SELF_EXE);
            cmd.args(crate::agent::trampoline::arguments(
                fd.as_raw_fd(),
                program,
                spec.command,
                spec.args,
            ));
            let raw = fd.as_raw_fd();
            // SAFETY: fcntl is async-signal-safe; it makes the report pipe
            // survive the exec into the trampoline, in the child only.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::fcntl(raw, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            cmd
        }
        None => {
            let mut cmd = std::process::Command::new(program);
            cmd.arg0(spec.command).args(spec.args);
            cmd
        }
    };
    cmd.process_group(0)
        .env_clear()
        .envs(env.iter().cloned())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if !spec.cwd.is_empty() {
        cmd.current_dir(spec.cwd);
    }
    if let Some((name, run_dir)) = crate::rundir::childrec::child_marker() {
        cmd.env(name, run_dir);
    }
    cmd
}

/// A started child: its pid and the daemon's ends of its pipes.
pub(super) struct Started {
    pid: i32,
    stdin: Option<std::process::ChildStdin>,
    stdout: Option<std::process::ChildStdout>,
    stderr: Option<std::process::ChildStderr>,
}

impl Started {
    /// The child's pid.
    pub(super) fn pid(&self) -> i32 {
        self.pid
    }

    /// The daemon's ends of the child's pipes, registered with the
    /// reactor, and whether its stdout pipe was enlarged
    /// ([`grow_pipe`]: it then holds a slot until its reader ends).
    pub(super) fn into_pipes(self) -> (bool, ChildPipes) {
        use std::os::fd::AsRawFd;
        let grown = self
            .stdout
            .as_ref()
            .is_some_and(|pipe| grow_pipe(|| sys::resize_pipe(pipe.as_raw_fd(), PIPE_SIZE)));
        let pipes = match (self.stdin, self.stdout, self.stderr) {
            (Some(i), Some(o), Some(e)) => (
                tokio::process::ChildStdin::from_std(i),
                OutPipe::from_owned_fd(o.into()),
                OutPipe::from_owned_fd(e.into()),
            ),
            _ => (
                Err(std::io::Error::other("missing pipe")),
                Err(std::io::Error::other("missing pipe")),
                Err(std::io::Error::other("missing pipe")),
            ),
        };
        (grown, pipes)
    }
}

impl From<std::process::Child> for Started {
    /// The std handle is not kept: the supervisor reaps by pid, and
    /// dropping it neither kills nor waits.
    fn from(mut child: std::process::Child) -> Started {
        Started {
            pid: i32::try_from(child.id()).unwrap_or(0),
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
        }
    }
}

/// Starts the child: through the spawner where there is one
/// ([`sys::spawn_via_helper`], Linux: a spawn's cost then does not grow
/// with the children already running), stamped as the trampoline would;
/// else through the trampoline while children are recorded
/// ([`crate::agent::trampoline`]), answering an exec failure there exactly as a
/// direct spawn's; directly otherwise, or when the trampoline itself
/// cannot start.
pub(super) fn launch(
    spec: &SpawnSpec<'_>,
    program: &str,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    exec_error: ExecError,
) -> Result<Started, String> {
    if let Some(started) = through_helper(spec, program, env) {
        return started.map_err(|e| exec_error(program, &e));
    }
    let direct = |env: &[(std::ffi::OsString, std::ffi::OsString)]| {
        child_command(spec, program, env, None)
            .spawn()
            .map(Started::from)
            .map_err(|e| exec_error(program, &e))
    };
    if !crate::agent::trampoline::enabled() {
        return direct(env);
    }
    let (read, write) = match crate::sys::process::exec_report_pipe() {
        Ok(pair) => pair,
        Err(_) => return direct(env),
    };
    let spawned = child_command(spec, program, env, Some(&write)).spawn();
    drop(write);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            crate::log_warn!(
                "[process.Manager] exec trampoline failed for {} ({}); starting it directly \u{2014} a successor daemon will not be able to reap it",
                crate::base::logging::Untrusted(spec.id),
                command::fork_exec_error(crate::agent::trampoline::SELF_EXE, &e)
            );
            return direct(env);
        }
    };
    match crate::sys::process::read_exec_report(&read) {
        None => Ok(Started::from(child)),
        Some(errno) => {
            // The trampoline exits right after its report.
            let _ = child.wait();
            Err(exec_error(program, &std::io::Error::from_raw_os_error(errno)))
        }
    }
}

/// Starts the child through the spawner: the same program, argv,
/// working directory, group, signal state and environment (in the same
/// order, stamped as the trampoline stamps it) as [`child_command`]
/// gives. `None` where there is no spawner, or for a string holding a NUL
/// (std's `Command` words that refusal).
fn through_helper(
    spec: &SpawnSpec<'_>,
    program: &str,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> Option<std::io::Result<Started>> {
    use std::ffi::OsStr;
    let argv: Vec<&OsStr> = std::iter::once(spec.command)
        .chain(spec.args.iter().map(String::as_str))
        .map(OsStr::new)
        .collect();
    let has_nul = |s: &str| s.as_bytes().contains(&0);
    if has_nul(program) || has_nul(spec.cwd) || argv.iter().any(|a| a.as_bytes().contains(&0)) {
        return None;
    }
    let (env, stamp) = crate::agent::trampoline::child_environment(env);
    let request = sys::SpawnRequest {
        program: OsStr::new(program),
        cwd: OsStr::new(spec.cwd),
        argv: &argv,
        env: &env,
        stamp,
    };
    match sys::spawn_via_helper(&request) {
        sys::HelperSpawn::Spawned(s) => Some(Ok(Started {
            pid: s.pid,
            stdin: Some(s.stdin.into()),
            stdout: Some(s.stdout.into()),
            stderr: Some(s.stderr.into()),
        })),
        sys::HelperSpawn::Failed(e) => Some(Err(e)),
        sys::HelperSpawn::NoHelper(why) => {
            if let Some(why) = why {
                crate::log_warn!("[process.Manager] {why}; the daemon starts children itself until a spawner starts");
            }
            None
        }
    }
}

impl super::pumps::OutputPipe for OutPipe {
    fn readable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
        tokio::net::unix::pipe::Receiver::readable(self)
    }

    fn try_read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        tokio::net::unix::pipe::Receiver::try_read(self, buf)
    }
}
