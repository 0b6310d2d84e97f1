//! The Windows half of `process/launch.rs`, the OS's part of starting a
//! child: the same names `process/spawn.rs` calls on Unix.
//!
//! Not wired yet (issue 43): [`launch`] answers every spawn as a failed
//! start with the OS's `ERROR_NOT_SUPPORTED` ("The request is not
//! supported."), through the handler's exec-failure wording, so a client
//! gets the same -32603 shape a missing program gives. [`Started`] has no
//! value until then.
//!
//! The seam for the Job Object spawn (`sys/windows/process.rs`):
//! [`launch`] creates the child suspended in a job with
//! `KILL_ON_JOB_CLOSE` and three overlapped pipes, and returns a
//! [`Started`] holding its pid and the daemon's ends; [`Started::into_pipes`]
//! hands those to the reactor as [`ChildPipes`]. `ManagedProcess` then
//! kills and waits through `sys::process::{signal_group, wait_exit,
//! reap}`, whose Windows halves end, wait on and release the job.

use super::command::{ExecError, SpawnSpec};

/// What a child's stdout and stderr are read through: the daemon's end
/// of an overlapped named pipe (readiness and `try_read`, as the Unix
/// pipe receiver).
pub(crate) type OutPipe = tokio::net::windows::named_pipe::NamedPipeClient;

/// A new child's pipes, as registered with the tokio reactor.
pub(super) type ChildPipes = (
    std::io::Result<tokio::process::ChildStdin>,
    std::io::Result<OutPipe>,
    std::io::Result<OutPipe>,
);

/// A started child. No value yet: [`launch`] starts nothing on Windows
/// so far.
pub(super) enum Started {}

impl Started {
    /// The child's pid.
    pub(super) fn pid(&self) -> i32 {
        match *self {}
    }

    /// The daemon's ends of the child's pipes, registered with the
    /// reactor, and whether a pipe was enlarged (never on Windows: pipes
    /// are sized when made).
    pub(super) fn into_pipes(self) -> (bool, ChildPipes) {
        match self {}
    }
}

/// Starts `program` for `spec`. Not wired yet: every spawn fails as an
/// exec failure with `ERROR_NOT_SUPPORTED`.
pub(super) fn launch(
    _spec: &SpawnSpec<'_>,
    program: &str,
    _env: &[(std::ffi::OsString, std::ffi::OsString)],
    exec_error: ExecError,
) -> Result<Started, String> {
    let reason = std::io::Error::from_raw_os_error(crate::sys::process::ERROR_NOT_SUPPORTED);
    Err(exec_error(program, &reason))
}

impl super::pumps::OutputPipe for OutPipe {
    fn readable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
        tokio::net::windows::named_pipe::NamedPipeClient::readable(self)
    }

    fn try_read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        tokio::net::windows::named_pipe::NamedPipeClient::try_read(self, buf)
    }
}
