//! The Windows half of `rundir` (issue 43): what the serve core asks of
//! it on Unix, with what Windows does. The reference has no run-dir lock,
//! child records or orphan reaping on Windows: every child is in a Job
//! Object that dies with the daemon, so nothing outlives it to be reaped.
//! What the daemon keeps beside its socket, `daemon.token` and
//! `remote-server.log`, is made through `base::safedir`'s Windows half
//! (the socket's directory opened level by level as ours, everything
//! created relative to that handle with an owner-only protected DACL, no
//! link or junction followed). The plugin directories are the Unix
//! module's, through its Windows half. The daemon log's rotation is not
//! ported yet.

/// The socket's directory, absolute (what `safedir` walks): `.` for a
/// bare file name, like Go's `Dir`, made absolute against the working
/// directory. (`rpc.pipe` is written there too, `serve/windows/socket.rs`.)
pub(crate) fn socket_dir_abs(socket: &std::path::Path) -> Option<std::path::PathBuf> {
    let dir = tokenfile::socket_dir(socket);
    Some(if dir.is_absolute() {
        dir
    } else {
        std::env::current_dir().ok()?.join(dir)
    })
}

/// The persisted auth token `daemon.token` beside the socket, as on Unix
/// (reference build `5db5e4a`; `rundir/tokenfile.rs` has the why): written
/// once the daemon listens, removed at graceful shutdown if it is still
/// the file this daemon wrote. The Windows way of the Unix by-path
/// `O_CREAT|O_EXCL|O_NOFOLLOW` 0600 create and rename: the socket's
/// directory is opened as a handle, not through a link or junction
/// ([`crate::base::safedir::open_dir_nofollow`]; its levels are not
/// judged, as Unix does not judge them for this file), the token goes to
/// a fresh `daemon.token-<n>` created there exclusive and owner-only,
/// which is renamed over `daemon.token`
/// ([`crate::base::safedir::replace_file_in`]). Any failure is logged and
/// the daemon serves on without the file, as on Unix.
pub(crate) mod tokenfile {
    use crate::base::safedir;
    use std::path::{Path, PathBuf};

    /// The fixed name clients derive from the socket path.
    pub(crate) const NAME: &str = "daemon.token";

    /// A token file this daemon wrote; [`Persisted::remove`] at shutdown.
    #[derive(Debug)]
    pub(crate) struct Persisted {
        dir: safedir::Dir,
        identity: (u64, u64),
    }

    /// `<dir of socket>\daemon.token`.
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

    /// Writes `token` to `daemon.token` atomically, owner-only. Logs and
    /// returns `None` on failure.
    pub(crate) fn persist(socket: &Path, token: &[u8]) -> Option<Persisted> {
        let shown = path_for(socket).display().to_string();
        let written = crate::rundir::socket_dir_abs(socket)
            .ok_or_else(|| "no working directory".to_string())
            .and_then(|abs| {
                safedir::open_dir_nofollow(&abs)
                    .map_err(|e| crate::base::goerr::path_error("open", &abs.to_string_lossy(), &e))
            })
            .and_then(|dir| match safedir::replace_file_in(&dir, NAME, token) {
                Ok(identity) => Ok(Persisted { dir, identity }),
                Err(e) => Err(crate::base::goerr::path_error("write", &shown, &e)),
            });
        match written {
            Ok(p) => Some(p),
            Err(message) => {
                crate::log_error!("[daemon] failed to persist token: {message}");
                None
            }
        }
    }

    impl Persisted {
        /// Removes the file if it is still the one written at start (same
        /// volume and file index), through the directory handle it was
        /// written by. An absent file is fine.
        pub(crate) fn remove(self) {
            match safedir::entry_identity(&self.dir, NAME.as_bytes()) {
                Ok(Some(id)) if id == self.identity => {
                    if let Err(e) = safedir::unlink_in(&self.dir, NAME.as_bytes()) {
                        crate::log_error!(
                            "[daemon] failed to remove persisted token: {}",
                            crate::base::goerr::io_text(&e)
                        );
                    }
                }
                Ok(Some(_)) => {
                    crate::log_info!("[daemon] daemon.token was replaced by another daemon; leaving it");
                }
                Ok(None) => {}
                Err(e) => crate::log_error!(
                    "[daemon] failed to stat persisted token: {}",
                    crate::base::goerr::io_text(&e)
                ),
            }
        }
    }
}

/// Child records: none on Windows.
pub(crate) mod childrec {
    /// Nothing to record: a child cannot outlive the daemon's Job Object.
    pub(crate) fn record(_pid: i32, _argv0: &str) {}

    /// Nothing recorded, nothing to forget.
    pub(crate) fn forget(_pid: i32) {}
}

/// The plugin directories `plugins.prune` sweeps: shared with Unix, its
/// OS steps in `plugindirs/windows.rs`.
#[path = "plugindirs.rs"]
pub(crate) mod plugindirs;

/// The daemon log beside the socket, `remote-server.log`. On Windows it
/// is appended to, not rotated at launch (D21 in docs/UPSTREAM.md: a
/// second daemon's lines follow the first's), and not capped: the Unix
/// cap and rotation swap the file under stderr by descriptor, which the
/// Windows half does not do yet.
pub(crate) mod daemonlog {
    use crate::base::safedir;
    use std::fs::File;
    use std::path::Path;

    /// The log's name in the socket's directory.
    pub(crate) const LOG_NAME: &str = "remote-server.log";

    /// Opens `remote-server.log` beside `socket` for append, creating it
    /// owner-only, relative to the socket's directory opened by
    /// [`safedir::open_own_dir`] (ours, every level safe, nothing
    /// followed); `None` when the directory is not safe or the file is
    /// not a regular file of ours that nobody else may read or write (then
    /// no log is used, as on Unix).
    pub(crate) fn open_for_launch(socket: &Path) -> Option<File> {
        let dir = safedir::open_own_dir(&crate::rundir::socket_dir_abs(socket)?).ok()?;
        let file = safedir::open_file_at(
            &dir,
            LOG_NAME.as_bytes(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
            0o600,
        )
        .ok()?;
        // A log left by an earlier daemon is appended to only while it is
        // still owner-only: the daemon's lines are nobody else's to read.
        let private =
            safedir::access_of(&file).is_ok_and(|a| a.others & (safedir::READ_RIGHTS | safedir::WRITE_RIGHTS) == 0);
        (safedir::is_own_regular(&file) && private).then_some(file)
    }

    /// The identity of the entry `name` of `dir` (volume serial, file
    /// index), a link not followed; `None` when there is none or it
    /// cannot be read (the wire log's check before it rotates).
    pub(crate) fn identity_in(dir: &safedir::Dir, name: &[u8]) -> Option<(u64, u64)> {
        safedir::entry_identity(dir, name).ok().flatten()
    }
}
