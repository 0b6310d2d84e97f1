//! The daemon's own log file, `remote-server.log` beside the socket (the
//! reference's since `4534d86`; `docs/PROTOCOL.md` "Daemon log").
//!
//! The launcher of a self-daemonizing `-serve` makes it for the detached
//! daemon: the previous session's log is renamed to
//! `remote-server.log.old` (replacing an older one) and a fresh file is
//! created `0600` with `O_CREAT|O_EXCL|O_NOFOLLOW`, relative to the socket's
//! directory opened by [`crate::base::safedir::open_own_dir`] (ours, every level
//! safe, nothing followed). The daemon's stderr then goes there. So a
//! planted link is renamed, never followed, and a name that cannot be
//! renamed (another user's entry in a sticky directory) makes the create
//! fail: then no log is used, as before.
//!
//! Remora's own rules beside the reference's: an operator who sent the
//! launcher's stderr to a regular file (`2>>daemon.log`) keeps that file,
//! and no `remote-server.log` is made; the log is capped at [`CAP`] bytes
//! (the daemon starts it over when it would pass the cap, see
//! [`crate::base::logging::cap_stderr`]), so the two generations take at most
//! 2 × [`CAP`] of disk. The file is not removed at shutdown: it is the
//! post-mortem.

use std::fs::File;
use std::path::Path;

/// The log's name in the socket's directory.
pub const LOG_NAME: &str = "remote-server.log";
/// The previous session's log.
pub const OLD_NAME: &str = "remote-server.log.old";
/// The most one log file grows to before the daemon starts it over.
pub const CAP: u64 = 32 << 20;
/// Test-only override of [`CAP`] in bytes (read and removed by the
/// detached daemon); not part of the documented interface.
pub const TEST_CAP_ENV: &str = "REMORA_TEST_DAEMON_LOG_CAP";
/// Tells the detached daemon that its stderr is this log (so it applies
/// [`CAP`]); removed from its environment at start.
pub const CAPPED_ENV: &str = "REMORA_DAEMON_LOG_CAPPED";

/// Rotates and creates the log beside `socket`; `None` when the
/// directory is not safe or the fresh file cannot be made.
pub fn open_for_launch(socket: &Path) -> Option<File> {
    let dir = crate::rundir::tokenfile::socket_dir(socket);
    let dir = if dir.is_absolute() {
        dir
    } else {
        std::env::current_dir().ok()?.join(dir)
    };
    let fd = crate::base::safedir::open_own_dir(&dir).ok()?;
    match crate::base::safedir::rename_in(&fd, LOG_NAME.as_bytes(), OLD_NAME.as_bytes()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        // The exclusive create below fails on the name that stayed.
        Err(_) => {}
    }
    let file = crate::base::safedir::open_file_at(
        &fd,
        LOG_NAME.as_bytes(),
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_APPEND,
        0o600,
    )
    .ok()?;
    crate::base::safedir::is_own_regular(&file).then_some(file)
}
