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
//! and no `remote-server.log` is made; the log is capped at [`CAP`] bytes.
//! When a line would pass the cap the daemon rotates it
//! ([`arm_rotation`], through [`crate::base::logging::cap_stderr`]): the
//! session's first full file becomes [`FIRST_NAME`] and is kept for the
//! session (its earliest lines: start-up, settings, the first clients),
//! each later one becomes [`PREVIOUS_NAME`] (replacing the one before),
//! and a fresh `remote-server.log` takes over. Nothing is truncated while
//! the rename can be made (audit D9: a churn of connections once wiped
//! the only copy, start-up lines included); the launch removes the last
//! session's two. With the previous session's `.old`, the log takes at
//! most 4 × [`CAP`] of disk. The file is not removed at shutdown: it is
//! the post-mortem.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::Path;

pub(crate) use super::logfiles::{CAP, CAPPED_ENV, FIRST_NAME, LOG_NAME, PREVIOUS_NAME, TEST_CAP_ENV};
/// The previous session's log (Unix only: a Windows launch appends, D21).
pub(crate) const OLD_NAME: &str = "remote-server.log.old";

/// The socket's directory, absolute.
fn log_dir(socket: &Path) -> Option<std::path::PathBuf> {
    let dir = crate::rundir::tokenfile::socket_dir(socket);
    Some(if dir.is_absolute() {
        dir
    } else {
        std::env::current_dir().ok()?.join(dir)
    })
}

/// Rotates and creates the log beside `socket`; `None` when the
/// directory is not safe or the fresh file cannot be made.
pub(crate) fn open_for_launch(socket: &Path) -> Option<File> {
    let fd = crate::base::safedir::open_own_dir(&log_dir(socket)?).ok()?;
    // The last session's rotated files go; its latest becomes `.old`.
    for rotated in [FIRST_NAME, PREVIOUS_NAME] {
        let _ = crate::base::safedir::unlink_in(&fd, rotated.as_bytes());
    }
    match crate::base::safedir::rename_in(&fd, LOG_NAME.as_bytes(), OLD_NAME.as_bytes()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        // The exclusive create below fails on the name that stayed.
        Err(_) => {}
    }
    create_log(&fd)
}

/// A fresh `remote-server.log` in `dir`: exclusive, `0600`, no link.
fn create_log(dir: &OwnedFd) -> Option<File> {
    let file = crate::base::safedir::open_file_at(
        dir,
        LOG_NAME.as_bytes(),
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_APPEND,
        0o600,
    )
    .ok()?;
    crate::base::safedir::is_own_regular(&file).then_some(file)
}

/// In the detached daemon whose stderr is `remote-server.log` (capped):
/// makes a full log rotate instead of start over. The directory is opened
/// now, as the launch opened it, and used by descriptor from then on; a
/// rotation renames only the file that is still this process's stderr
/// (same device and inode), so a file someone swapped in is left alone
/// (the log is then started over instead).
pub(crate) fn arm_rotation(socket: &Path) {
    if !crate::base::logging::stderr_capped() {
        return;
    }
    let Some(dir) = log_dir(socket).and_then(|d| crate::base::safedir::open_own_dir(&d).ok()) else {
        return;
    };
    let first_kept = std::sync::atomic::AtomicBool::new(false);
    crate::base::logging::rotate_with(Box::new(move || {
        if identity_of_stderr()? != identity_in(&dir, LOG_NAME.as_bytes())? {
            return None;
        }
        let kept_in = if first_kept.load(std::sync::atomic::Ordering::Relaxed) {
            PREVIOUS_NAME
        } else {
            FIRST_NAME
        };
        crate::base::safedir::rename_in(&dir, LOG_NAME.as_bytes(), kept_in.as_bytes()).ok()?;
        first_kept.store(true, std::sync::atomic::Ordering::Relaxed);
        create_log(&dir).map(|file| (file, kept_in))
    }));
}

/// Device and inode of this process's stderr (read on the descriptor:
/// the rotation runs under the stderr lock, so nothing here may lock it).
fn identity_of_stderr() -> Option<(u64, u64)> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on descriptor 2 with a valid out-pointer.
    if unsafe { libc::fstat(libc::STDERR_FILENO, &mut st) } != 0 {
        return None;
    }
    // `dev_t`/`ino_t` differ in width across targets.
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    Some((st.st_dev as u64, st.st_ino as u64))
}

/// Device and inode of the entry `name` of `dir`, not followed (also the
/// wire log's check before it rotates, `serve::wirelog`).
pub(crate) fn identity_in(dir: &OwnedFd, name: &[u8]) -> Option<(u64, u64)> {
    use std::os::fd::AsRawFd;
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `dir` is open, `c` is NUL-terminated, `st` is a valid out-pointer.
    if unsafe { libc::fstatat(dir.as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return None;
    }
    // `dev_t`/`ino_t` differ in width across targets.
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    Some((st.st_dev as u64, st.st_ino as u64))
}
