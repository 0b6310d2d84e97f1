//! The persisted auth token `daemon.token` beside the socket (reference
//! build `5db5e4a`): written once the socket listens, so a client that
//! knows only the socket path can re-authenticate after the original
//! `-token-file` was unlinked or the `-token-fd` pipe closed; removed at
//! graceful shutdown.
//!
//! On-disk safety: the bytes are first written to a fresh
//! `daemon.token-<n>` created `O_CREAT|O_EXCL|O_NOFOLLOW` with mode 0600
//! (so no other user can read it at any instant, and a planted link is
//! never followed), then renamed over `daemon.token` (a rename replaces a
//! link, it does not write through it). Persisting is best-effort: a
//! failure is logged and the daemon serves on.
//!
//! Divergence of remora's own: at shutdown the file is removed only if it
//! is still the one this daemon wrote (same device and inode), so a
//! predecessor retiring after a successor took the socket over cannot
//! delete the successor's token.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The fixed name clients derive from the socket path.
pub(crate) const NAME: &str = "daemon.token";

/// A token file this daemon wrote; [`Persisted::remove`] at shutdown.
#[derive(Debug)]
pub(crate) struct Persisted {
    path: PathBuf,
    identity: (u64, u64),
}

/// `<dir of socket>/daemon.token`.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn path_for(socket: &Path) -> PathBuf {
    socket_dir(socket).join(NAME)
}

/// The socket's directory (`.` for a bare file name, like Go's `Dir`).
pub(crate) fn socket_dir(socket: &Path) -> PathBuf {
    match socket.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes `token` to `daemon.token` atomically. Logs and returns `None`
/// on failure.
pub(crate) fn persist(socket: &Path, token: &[u8]) -> Option<Persisted> {
    match write_atomically(&socket_dir(socket), token) {
        Ok(p) => Some(p),
        Err(message) => {
            crate::log_error!("[daemon] failed to persist token: {message}");
            None
        }
    }
}

fn write_atomically(dir: &Path, token: &[u8]) -> Result<Persisted, String> {
    let (tmp, mut file) = create_temp(dir)?;
    let shown = tmp.to_string_lossy().into_owned();
    let result = (|| {
        file.write_all(token)
            .map_err(|e| crate::base::goerr::path_error("write", &shown, &e))?;
        let meta = file
            .metadata()
            .map_err(|e| crate::base::goerr::path_error("stat", &shown, &e))?;
        let target = dir.join(NAME);
        std::fs::rename(&tmp, &target).map_err(|e| {
            format!(
                "rename {} {}: {}",
                shown,
                target.to_string_lossy(),
                crate::base::goerr::io_text(&e)
            )
        })?;
        Ok(Persisted {
            path: target,
            identity: (meta.dev(), meta.ino()),
        })
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A new `daemon.token-<digits>` in `dir`, owner-only from creation.
fn create_temp(dir: &Path) -> Result<(PathBuf, File), String> {
    let mut last = io::Error::from_raw_os_error(libc::EEXIST);
    for attempt in 0u32..10_000 {
        let suffix = temp_suffix(attempt);
        let path = dir.join(format!("{NAME}-{suffix}"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => last = e,
            Err(e) => {
                return Err(crate::base::goerr::path_error(
                    "open",
                    &dir.join(format!("{NAME}-*")).to_string_lossy(),
                    &e,
                ))
            }
        }
    }
    Err(crate::base::goerr::path_error(
        "open",
        &dir.join(format!("{NAME}-*")).to_string_lossy(),
        &last,
    ))
}

/// A decimal suffix that differs between attempts and between processes.
fn temp_suffix(attempt: u32) -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    nanos ^ std::process::id().rotate_left(16) ^ attempt.wrapping_mul(2_654_435_761)
}

impl Persisted {
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Unlinks the file if it is still the one written at start. An absent
    /// file is fine (removed by hand, or replaced and then removed).
    pub(crate) fn remove(self) {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if (m.dev(), m.ino()) == self.identity => {
                if let Err(e) = std::fs::remove_file(&self.path) {
                    crate::log_error!(
                        "[daemon] failed to remove persisted token: {}",
                        crate::base::goerr::io_text(&e)
                    );
                }
            }
            Ok(_) => {
                crate::log_info!("[daemon] daemon.token was replaced by another daemon; leaving it");
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => crate::log_error!(
                "[daemon] failed to stat persisted token: {}",
                crate::base::goerr::io_text(&e)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_owner_only_and_removes_only_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("rpc.sock");
        let p = persist(&socket, b"tok\xff en").unwrap();
        let path = path_for(&socket);
        assert_eq!(std::fs::read(&path).unwrap(), b"tok\xff en");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        // No temp file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(NAME)]);
        // A successor's file (new inode) survives our removal.
        let successor = persist(&socket, b"next").unwrap();
        p.remove();
        assert_eq!(std::fs::read(&path).unwrap(), b"next");
        successor.remove();
        assert!(!path.exists());
    }

    #[test]
    fn a_planted_symlink_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join(NAME)).unwrap();
        let p = persist(&dir.path().join("rpc.sock"), b"tok").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(p.path()).unwrap().file_type().is_symlink());
        p.remove();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }

    #[test]
    fn failure_is_reported_not_fatal() {
        assert!(persist(Path::new("/nonexistent-dir-for-remora/rpc.sock"), b"t").is_none());
    }
}
