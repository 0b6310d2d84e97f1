//! The Windows half of `rundir` (issue 43): what the serve core asks of
//! it on Unix, with what Windows does. The reference has no run-dir lock,
//! child records or orphan reaping on Windows: every child is in a Job
//! Object that dies with the daemon, so nothing outlives it to be reaped.
//! What the daemon keeps beside its socket, `daemon.token` and
//! `remote-server.log`, is made through `base::safedir`'s Windows half
//! (the socket's directory opened level by level as ours, everything
//! created relative to that handle with an owner-only protected DACL, no
//! link or junction followed). The plugin directories are the Unix
//! module's, through its Windows half. The daemon log is capped and
//! rotated while the daemon runs, as on Unix, but not at launch (D21).

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

/// The daemon log's names and cap, shared with the Unix half.
#[path = "logfiles.rs"]
mod logfiles;

/// The daemon log beside the socket, `remote-server.log`. On Windows it
/// is appended to, not rotated at launch (D21 in docs/UPSTREAM.md: a
/// second daemon's lines follow the first's), and capped while the daemon
/// runs as on Unix: a line that would take it past [`daemonlog::CAP`]
/// first renames it, the session's first full file to `.1`, each later
/// one to `.2`, and a fresh owner-only file takes its place on stderr
/// (`sys::os::replace_stderr`, which closes the handle it replaces, so
/// the file renamed can be renamed over later and its disk is freed).
/// Every handle to it shares deletion, so the rename is made while it is
/// open; should someone hold it without sharing, the file is started over
/// instead (`base::logging`). Launches do not remove the last session's
/// `.1` and `.2` (they are renamed over as this session fills), so the
/// log takes at most 3 × [`daemonlog::CAP`] of disk. The cap applies once
/// the daemon serves (`launch/windows/daemonize.rs` `cap_log`): a second
/// daemon whose socket is taken only appends its lines and exits.
pub(crate) mod daemonlog {
    use crate::base::safedir;
    use std::fs::File;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};

    pub(crate) use crate::rundir::logfiles::{CAP, CAPPED_ENV, FIRST_NAME, LOG_NAME, PREVIOUS_NAME, TEST_CAP_ENV};

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

    /// In the detached daemon whose stderr is `remote-server.log` (capped):
    /// makes a full log rotate instead of start over. The directory is
    /// opened now, as the launch opened it, and used by handle from then
    /// on.
    pub(crate) fn arm_rotation(socket: &Path) {
        if !crate::base::logging::stderr_capped() {
            return;
        }
        let Some(dir) = crate::rundir::socket_dir_abs(socket).and_then(|d| safedir::open_own_dir(&d).ok()) else {
            return;
        };
        let first_kept = AtomicBool::new(false);
        crate::base::logging::rotate_with(Box::new(move || {
            rotate(&dir, crate::sys::os::stderr_identity()?, &first_kept)
        }));
    }

    /// One rotation of the log in `dir` whose open file has the identity
    /// `current`: renames it to [`FIRST_NAME`] the first time, to
    /// [`PREVIOUS_NAME`] after (replacing the one there), and creates a
    /// fresh one. Only while the name still is that file (same volume and
    /// file index): a file someone swapped in is left alone, and `None`
    /// makes the caller start its own file over.
    pub(crate) fn rotate(
        dir: &safedir::Dir,
        current: (u64, u64),
        first_kept: &AtomicBool,
    ) -> Option<(File, &'static str)> {
        if identity_in(dir, LOG_NAME.as_bytes())? != current {
            return None;
        }
        let kept_in = if first_kept.load(Ordering::Relaxed) {
            PREVIOUS_NAME
        } else {
            FIRST_NAME
        };
        safedir::rename_in(dir, LOG_NAME.as_bytes(), kept_in.as_bytes()).ok()?;
        first_kept.store(true, Ordering::Relaxed);
        create_log(dir).map(|file| (file, kept_in))
    }

    /// A fresh `remote-server.log` in `dir`: exclusive, owner-only, no
    /// link.
    fn create_log(dir: &safedir::Dir) -> Option<File> {
        let file = safedir::open_file_at(
            dir,
            LOG_NAME.as_bytes(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_APPEND,
            0o600,
        )
        .ok()?;
        safedir::is_own_regular(&file).then_some(file)
    }

    /// The identity of the entry `name` of `dir` (volume serial, file
    /// index), a link not followed; `None` when there is none or it
    /// cannot be read (also the wire log's check before it rotates).
    pub(crate) fn identity_in(dir: &safedir::Dir, name: &[u8]) -> Option<(u64, u64)> {
        safedir::entry_identity(dir, name).ok().flatten()
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use std::io::Write;

        /// A fresh directory of ours, the socket's, and the log opened
        /// as the launcher opens it.
        fn launched() -> (tempfile::TempDir, safedir::Dir, File) {
            let t = tempfile::tempdir().unwrap();
            let path = std::path::absolute(t.path()).unwrap();
            let log = open_for_launch(&path.join("rpc.sock")).expect("the log beside the socket");
            let dir = safedir::open_own_dir(&path).expect("our directory");
            (t, dir, log)
        }

        fn read(t: &tempfile::TempDir, name: &str) -> String {
            std::fs::read_to_string(t.path().join(name)).unwrap_or_else(|e| format!("<{name}: {e}>"))
        }

        fn id(file: &File) -> (u64, u64) {
            crate::sys::os::file_identity(file).expect("identity")
        }

        #[test]
        fn rotation_keeps_the_first_full_log_then_the_latest() {
            let (t, dir, mut log) = launched();
            log.write_all(b"zero\n").unwrap();
            let first_kept = AtomicBool::new(false);
            let (mut fresh, kept_in) = rotate(&dir, id(&log), &first_kept).expect("first rotation");
            assert_eq!(kept_in, FIRST_NAME);
            // Renamed while open (as stderr is): its handle writes on there.
            log.write_all(b"zero again\n").unwrap();
            assert_eq!(read(&t, FIRST_NAME), "zero\nzero again\n");
            assert_eq!(read(&t, LOG_NAME), "");
            assert_eq!(identity_in(&dir, LOG_NAME.as_bytes()), Some(id(&fresh)));
            assert!(safedir::is_own_regular(&fresh));
            let others = safedir::access_of(&fresh).unwrap().others;
            assert_eq!(others & (safedir::READ_RIGHTS | safedir::WRITE_RIGHTS), 0, "owner-only");
            // The replaced handle is closed (`replace_stderr`), so a later
            // rotation may rename over the file it wrote.
            drop(log);
            for line in ["one", "two", "three"] {
                fresh.write_all(format!("{line}\n").as_bytes()).unwrap();
                let (next, kept_in) = rotate(&dir, id(&fresh), &first_kept).expect("later rotation");
                assert_eq!(kept_in, PREVIOUS_NAME);
                assert_eq!(read(&t, PREVIOUS_NAME), format!("{line}\n"));
                fresh = next;
            }
            assert_eq!(
                read(&t, FIRST_NAME),
                "zero\nzero again\n",
                "the session's first full log is kept"
            );
            assert_eq!(read(&t, LOG_NAME), "");
            let mut names: Vec<_> = std::fs::read_dir(t.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            assert_eq!(names, [LOG_NAME, FIRST_NAME, PREVIOUS_NAME], "three files at most");
        }

        #[test]
        fn a_log_that_is_no_longer_the_name_is_not_rotated() {
            let (t, dir, mut log) = launched();
            log.write_all(b"ours\n").unwrap();
            let first_kept = AtomicBool::new(false);
            let elsewhere = (id(&log).0, id(&log).1 ^ 1);
            assert!(rotate(&dir, elsewhere, &first_kept).is_none());
            assert!(!t.path().join(FIRST_NAME).exists());
            assert_eq!(read(&t, LOG_NAME), "ours\n");
            assert!(!first_kept.load(Ordering::Relaxed));
        }

        #[test]
        fn a_launch_appends_and_keeps_the_last_sessions_rotated_logs() {
            let (t, dir, mut log) = launched();
            log.write_all(b"first daemon\n").unwrap();
            let (_fresh, _) = rotate(&dir, id(&log), &AtomicBool::new(false)).unwrap();
            drop(log);
            std::fs::write(t.path().join(LOG_NAME), "first daemon, later\n").unwrap();
            let path = std::path::absolute(t.path()).unwrap();
            let mut again = open_for_launch(&path.join("rpc.sock")).expect("appended to");
            again.write_all(b"second daemon\n").unwrap();
            assert_eq!(read(&t, LOG_NAME), "first daemon, later\nsecond daemon\n");
            assert_eq!(read(&t, FIRST_NAME), "first daemon\n");
        }

        #[test]
        fn a_log_moved_aside_is_truncated_by_its_handle() {
            let (t, _dir, mut log) = launched();
            log.write_all(&[b'x'; 100]).unwrap();
            // Windows reopens an append-only handle by the handle, not the
            // name (Wine truncates through the handle itself).
            std::fs::rename(t.path().join(LOG_NAME), t.path().join("aside")).unwrap();
            assert!(crate::sys::os::truncate_file(&log));
            assert_eq!(std::fs::metadata(t.path().join("aside")).unwrap().len(), 0);
            log.write_all(b"after\n").unwrap();
            assert_eq!(read(&t, "aside"), "after\n", "appends go on at the new end");
        }

        #[test]
        fn an_append_only_log_is_truncated_through_a_reopened_handle() {
            let (t, _dir, mut log) = launched();
            log.write_all(&[b'x'; 100]).unwrap();
            let writer = crate::sys::os::reopened_for_writing(&log).expect("reopened");
            assert_eq!(
                crate::sys::os::file_identity(&writer),
                crate::sys::os::file_identity(&log)
            );
            writer.set_len(0).unwrap();
            log.write_all(b"after\n").unwrap();
            assert_eq!(read(&t, LOG_NAME), "after\n", "appends go on at the new end");
        }

        /// Puts the test process's stderr back when dropped.
        struct Restore(std::os::windows::io::OwnedHandle);

        impl Drop for Restore {
            fn drop(&mut self) {
                use std::os::windows::io::IntoRawHandle;
                use windows_sys::Win32::System::Console::{SetStdHandle, STD_ERROR_HANDLE};
                let raw = self.0.try_clone().map(IntoRawHandle::into_raw_handle);
                if let Ok(raw) = raw {
                    // SAFETY: `raw` is open and ours; the replacement it
                    // takes the place of is left open (test only).
                    unsafe { SetStdHandle(STD_ERROR_HANDLE, raw) };
                }
            }
        }

        /// Whether anything holds `path` open: an open sharing nothing
        /// fails while another handle to the file is open.
        fn held_open(path: &Path) -> bool {
            use std::os::windows::fs::OpenOptionsExt;
            std::fs::OpenOptions::new().read(true).share_mode(0).open(path).is_err()
        }

        #[test]
        fn a_replaced_stderr_is_closed() {
            use std::os::windows::io::AsHandle;
            let (t, dir, log) = launched();
            // As the rotation does (`base::logging`): under the stderr lock,
            // which also keeps other tests' log lines out of these files.
            let _lock = std::io::stderr().lock();
            let _restore = Restore(std::io::stderr().as_handle().try_clone_to_owned().expect("stderr"));
            assert!(crate::sys::os::replace_stderr(&log));
            drop(log);
            std::io::stderr().write_all(b"to the first\n").unwrap();
            let (fresh, _) = rotate(
                &dir,
                crate::sys::os::stderr_identity().unwrap(),
                &AtomicBool::new(false),
            )
            .unwrap();
            assert!(held_open(&t.path().join(FIRST_NAME)), "stderr holds it");
            assert!(crate::sys::os::replace_stderr(&fresh));
            drop(fresh);
            std::io::stderr().write_all(b"to the second\n").unwrap();
            assert!(!held_open(&t.path().join(FIRST_NAME)), "the replaced stderr was closed");
            assert!(held_open(&t.path().join(LOG_NAME)), "stderr holds the fresh log");
            assert_eq!(read(&t, FIRST_NAME), "to the first\n");
            assert_eq!(read(&t, LOG_NAME), "to the second\n");
        }
    }
}
