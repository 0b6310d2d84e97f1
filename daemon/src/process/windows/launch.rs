//! The Windows half of `process/launch.rs`, the OS's part of starting a
//! child: the same names `process/spawn.rs` calls on Unix.
//!
//! [`launch`] starts the child through `sys::process::start_child`:
//! created suspended, put into a Job Object of its own with
//! `KILL_ON_JOB_CLOSE`, then resumed, with three overlapped named pipes
//! whose daemon ends are already registered with the reactor. There is
//! no spawner, exec trampoline, child record or pipe growth on Windows:
//! the job is what ends a tree, whether the daemon kills it or dies.
//! `ManagedProcess` then kills, waits and releases through
//! `sys::process::{signal_group, wait_exit, reap}`.

use super::command::{ExecError, SpawnSpec};
use std::ffi::{OsStr, OsString};
use tokio::net::windows::named_pipe::NamedPipeServer;

/// What a child's stdout and stderr are read through: the daemon's end
/// of an overlapped named pipe (readiness and `try_read`, as the Unix
/// pipe receiver).
pub(crate) type OutPipe = NamedPipeServer;

/// What a child's stdin is written through.
pub(crate) type InPipe = NamedPipeServer;

/// A new child's pipes, as registered with the tokio reactor.
pub(super) type ChildPipes = (
    std::io::Result<InPipe>,
    std::io::Result<OutPipe>,
    std::io::Result<OutPipe>,
);

/// A started child: its pid and the daemon's ends of its pipes.
pub(super) struct Started(crate::sys::process::StartedChild);

impl Started {
    /// The child's pid.
    pub(super) fn pid(&self) -> i32 {
        self.0.pid
    }

    /// The daemon's ends of the child's pipes, registered with the
    /// reactor, and whether a pipe was enlarged (never on Windows: pipes
    /// are sized when made).
    pub(super) fn into_pipes(self) -> (bool, ChildPipes) {
        let child = self.0;
        (false, (Ok(child.stdin), Ok(child.stdout), Ok(child.stderr)))
    }
}

/// Starts `program` for `spec` in a Job Object of its own. `argv[0]` is
/// the command as the request named it, `program` its resolved path, as
/// on Unix; the environment block keeps `env`'s order (D23).
pub(super) fn launch(
    spec: &SpawnSpec<'_>,
    program: &str,
    env: &[(OsString, OsString)],
    exec_error: ExecError,
) -> Result<Started, String> {
    let argv: Vec<&OsStr> = std::iter::once(spec.command)
        .chain(spec.args.iter().map(String::as_str))
        .map(OsStr::new)
        .collect();
    let request = crate::sys::process::SpawnRequest {
        program: OsStr::new(program),
        cwd: OsStr::new(spec.cwd),
        argv: &argv,
        env,
    };
    crate::sys::process::start_child(&request)
        .map(Started)
        .map_err(|e| exec_error(program, &e))
}

impl super::pumps::OutputPipe for OutPipe {
    fn readable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
        NamedPipeServer::readable(self)
    }

    fn try_read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        NamedPipeServer::try_read(self, buf)
    }
}
