//! The wire log (`-wire-log FILE`, or `wire-log` in `remora.conf`): every
//! frame of every connection, both ways, one JSON line each, for an
//! operator who records a real client's session (`harness import` turns
//! the file into a probe). Off by default.
//!
//! Each line is `{"ts","conn","pid","dir":"in"|"out","frame"|"raw"}`,
//! cleaned by [`crate::serve::wireredact`] (the token, secret-looking
//! environment, strings past `wire-log-max-string`).
//!
//! The connection only hands bytes over ([`WireTap::frame`]): a copy into
//! a bounded queue, never a wait. A thread of its own parses, cleans and
//! writes. When the queue is full (by count, [`QUEUE`], or by bytes,
//! [`QUEUE_BYTES`]) the frames are dropped and counted, and the next line
//! written is `{"ts","lost":N}`; a client is never slowed by the log.
//! When the log is off, the connection's only cost is the test of an
//! `Option`.
//!
//! The file is opened as the daemon log is ([`crate::rundir::daemonlog`]):
//! its directory through [`crate::base::safedir::open_private_dir`] (every
//! level ours or root's, missing levels made `0700`, a shared sticky
//! directory replaced by our own `remora-<uid>` in it), the file relative
//! to it with `O_NOFOLLOW` (a link is refused, never followed), `0600`,
//! ours, appended to. It rotates like the daemon log: a line that would
//! take it past [`CAP`] renames it, the session's first full file to
//! `<name>.1` (kept: the session's beginning), each later one to `<name>.2`,
//! and a fresh file takes over, so the log takes at most 3 × [`CAP`] of
//! disk. A rename is made only while the name still is the file being
//! written (same device and inode). On Windows every handle `safedir`
//! opens shares deletion, so the open file is renamed the same way; when
//! it cannot be (someone holds it open without sharing), the file is
//! started over through a handle reopened for writing
//! (`sys::os::truncate_file`: the log's own handle only appends). If the file cannot be opened the
//! daemon starts without it and says why: a logging knob never stops a
//! daemon Desktop relies on.

use crate::serve::wireredact::{Direction, Origin, Rules};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Mutex;
use std::thread::JoinHandle;

/// Chunks that may wait for the writer thread.
const QUEUE: usize = 4096;
/// Bytes those chunks may hold together.
const QUEUE_BYTES: usize = 32 << 20;
/// The most one wire-log file grows to before it rotates.
pub(crate) const CAP: u64 = 64 << 20;
/// Test-only override of [`CAP`] in bytes; not part of the documented
/// interface.
pub(crate) const TEST_CAP_ENV: &str = "REMORA_TEST_WIRE_LOG_CAP";

/// What the writer thread is sent.
enum Message {
    /// One or more whole lines that crossed one connection one way.
    Chunk { origin: Origin, bytes: Vec<u8> },
    /// Write what came before, then stop.
    Close,
}

/// The connections' side of the wire log.
pub(crate) struct WireTap {
    tx: SyncSender<Message>,
    /// Bytes queued and not yet taken by the writer thread.
    queued: AtomicUsize,
    /// Frames dropped since the last `lost` line.
    lost: AtomicU64,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Where the log is written (for the start-up line).
    pub path: PathBuf,
}

impl std::fmt::Debug for WireTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireTap").field("path", &self.path).finish()
    }
}

impl WireTap {
    /// Opens the log at `path` (absolute) and starts its writer. The error
    /// says why the daemon runs without it.
    pub(crate) fn open(path: &Path, rules: Rules) -> Result<std::sync::Arc<WireTap>, String> {
        let (dir_path, name) = split(path)?;
        let dir = crate::base::safedir::open_private_dir(&dir_path).map_err(|e| e.to_string())?;
        let shown = dir.path.join(path.file_name().unwrap_or_default());
        let file = open_log(&dir.fd, &name).map_err(|e| format!("{}: {e}", shown.display()))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let cap = std::env::var(TEST_CAP_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(CAP);
        std::env::remove_var(TEST_CAP_ENV);
        let (tx, rx) = sync_channel(QUEUE);
        let tap = std::sync::Arc::new(WireTap {
            tx,
            queued: AtomicUsize::new(0),
            lost: AtomicU64::new(0),
            thread: Mutex::new(None),
            path: shown,
        });
        let sink = Sink {
            dir: dir.fd,
            name,
            file,
            size,
            cap,
            first_kept: false,
        };
        let writer_tap = tap.clone();
        let handle = std::thread::Builder::new()
            .name("wire-log".into())
            .spawn(move || writer_tap.write_all(rx, sink, rules))
            .map_err(|e| format!("start the wire-log writer: {e}"))?;
        *tap.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
        Ok(tap)
    }

    /// Queues `bytes` (one or more whole lines with their newlines) that
    /// crossed connection `conn` in `direction`; drops and counts them if
    /// the queue is full. Never waits.
    pub(crate) fn frame(&self, conn: u64, peer: Option<i32>, direction: Direction, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let frames = || memchr::memchr_iter(b'\n', bytes).count().max(1) as u64;
        if self.queued.fetch_add(bytes.len(), Ordering::Relaxed) + bytes.len() > QUEUE_BYTES {
            self.queued.fetch_sub(bytes.len(), Ordering::Relaxed);
            self.lost.fetch_add(frames(), Ordering::Relaxed);
            return;
        }
        let origin = Origin {
            micros: now_micros(),
            conn,
            peer,
            direction,
        };
        let message = Message::Chunk {
            origin,
            bytes: bytes.to_vec(),
        };
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(message) {
            self.queued.fetch_sub(bytes.len(), Ordering::Relaxed);
            self.lost.fetch_add(frames(), Ordering::Relaxed);
        }
    }

    /// Writes everything queued so far and stops the writer (at shutdown).
    pub(crate) fn close(&self) {
        let _ = self.tx.send(Message::Close);
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }

    /// The writer thread: until [`Message::Close`] or every sender is gone.
    fn write_all(&self, rx: Receiver<Message>, mut sink: Sink, rules: Rules) {
        while let Ok(message) = rx.recv() {
            let (origin, bytes) = match message {
                Message::Chunk { origin, bytes } => (origin, bytes),
                Message::Close => break,
            };
            self.queued.fetch_sub(bytes.len(), Ordering::Relaxed);
            let lost = self.lost.swap(0, Ordering::Relaxed);
            if lost > 0 {
                sink.write(&Rules::lost(origin.micros, lost));
            }
            for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                sink.write(&rules.record(origin, line));
            }
        }
        let lost = self.lost.swap(0, Ordering::Relaxed);
        if lost > 0 {
            sink.write(&Rules::lost(now_micros(), lost));
        }
        let _ = sink.file.flush();
    }
}

/// The file being written and how to rotate it.
struct Sink {
    dir: crate::base::safedir::Dir,
    name: Vec<u8>,
    file: File,
    size: u64,
    cap: u64,
    /// Whether this session's first full file is kept as `<name>.1`.
    first_kept: bool,
}

impl Sink {
    fn write(&mut self, line: &[u8]) {
        if self.size > 0 && self.size + line.len() as u64 > self.cap {
            self.rotate();
        }
        // A failed write loses the line; the log is best effort.
        if self.file.write_all(line).is_ok() {
            self.size += line.len() as u64;
        }
    }

    /// Renames the full file and opens a fresh one; when the name is no
    /// longer this file, or the rename fails, the file is started over.
    fn rotate(&mut self) {
        let kept = if self.first_kept { ".2" } else { ".1" };
        let mut kept_name = self.name.clone();
        kept_name.extend_from_slice(kept.as_bytes());
        let ours = identity_of(&self.file).is_some()
            && identity_of(&self.file) == crate::rundir::daemonlog::identity_in(&self.dir, &self.name);
        if ours && crate::base::safedir::rename_in(&self.dir, &self.name, &kept_name).is_ok() {
            self.first_kept = true;
            if let Ok(file) = open_log(&self.dir, &self.name) {
                self.file = file;
                self.size = 0;
                return;
            }
        }
        if crate::sys::os::truncate_file(&self.file) {
            self.size = 0;
        }
    }
}

/// The directory and the file name of `path`, which must be absolute.
fn split(path: &Path) -> Result<(PathBuf, Vec<u8>), String> {
    let shown = path.display();
    if !path.is_absolute() {
        return Err(format!("{shown}: not an absolute path"));
    }
    let name = match path.file_name() {
        Some(name) if name != ".." => name.as_encoded_bytes().to_vec(),
        _ => return Err(format!("{shown}: does not name a file")),
    };
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    Ok((dir, name))
}

/// Opens (creating `0600`) the log `name` in `dir` for append: not through
/// a link, a regular file of ours, narrowed to `0600` if it was wider.
fn open_log(dir: &crate::base::safedir::Dir, name: &[u8]) -> Result<File, String> {
    let file = crate::base::safedir::open_file_at(dir, name, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND, 0o600)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => "is a symbolic link (the wire log is never written through one)".to_string(),
            _ => format!("cannot open: {}", crate::base::goerr::io_text(&e)),
        })?;
    if !crate::base::safedir::is_own_regular(&file) {
        return Err("is not a regular file of this user".to_string());
    }
    crate::sys::os::keep_owner_only(&file)
        .map_err(|e| format!("cannot make it 0600: {}", crate::base::goerr::io_text(&e)))?;
    Ok(file)
}

/// Device and inode of an open file.
fn identity_of(file: &File) -> Option<(u64, u64)> {
    crate::sys::os::file_identity(file)
}

fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink on `<fresh dir>/wire.jsonl` capped at `cap` bytes.
    fn sink(cap: u64) -> (tempfile::TempDir, Sink) {
        let t = tempfile::tempdir().unwrap();
        let dir = crate::base::safedir::open_private_dir(&std::path::absolute(t.path()).unwrap())
            .map_err(|e| e.to_string())
            .unwrap();
        let file = open_log(&dir.fd, b"wire.jsonl").unwrap();
        let sink = Sink {
            dir: dir.fd,
            name: b"wire.jsonl".to_vec(),
            file,
            size: 0,
            cap,
            first_kept: false,
        };
        (t, sink)
    }

    fn read(t: &tempfile::TempDir, name: &str) -> String {
        std::fs::read_to_string(t.path().join(name)).unwrap_or_else(|e| format!("<{name}: {e}>"))
    }

    #[test]
    fn a_full_log_rotates_to_the_first_then_the_latest() {
        let (t, mut sink) = sink(10);
        for line in ["a1234\n", "a5678\n", "b1234\n", "c1234\n", "d1234\n", "e12\n"] {
            sink.write(line.as_bytes());
        }
        assert_eq!(
            read(&t, "wire.jsonl.1"),
            "a1234\n",
            "the session's first full file, kept"
        );
        assert_eq!(read(&t, "wire.jsonl.2"), "c1234\n", "the latest other full file");
        assert_eq!(read(&t, "wire.jsonl"), "d1234\ne12\n");
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 3, "three files at most");
    }

    /// A log of ours that others may read (left by another tool, or
    /// widened by hand) is narrowed to its owner when the daemon opens it:
    /// mode `0600` on Unix, the owner-only DACL on Windows.
    #[test]
    fn a_wider_log_of_ours_is_narrowed_to_its_owner() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("wire.jsonl");
        std::fs::write(&path, b"earlier\n").unwrap();
        widen(&path);
        assert!(
            others_may_read(&File::open(&path).unwrap()),
            "the test's log is not wider"
        );
        let dir = crate::base::safedir::open_private_dir(&std::path::absolute(t.path()).unwrap())
            .map_err(|e| e.to_string())
            .unwrap();
        let file = open_log(&dir.fd, b"wire.jsonl").unwrap();
        assert_eq!(read(&t, "wire.jsonl"), "earlier\n", "nothing of it was lost");
        if dacls_kept() {
            assert!(!others_may_read(&file), "the log was not narrowed");
        } else {
            eprintln!("a_wider_log_…: the narrowing half skipped: Wine keeps no DACL set on an existing file");
        }
    }

    #[cfg(unix)]
    fn widen(path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }

    #[cfg(unix)]
    fn dacls_kept() -> bool {
        true
    }

    #[cfg(windows)]
    fn dacls_kept() -> bool {
        !crate::sys::acl::under_wine()
    }

    #[cfg(unix)]
    fn others_may_read(file: &File) -> bool {
        use std::os::unix::fs::MetadataExt;
        file.metadata().unwrap().mode() & 0o044 != 0
    }

    #[cfg(windows)]
    fn widen(path: &Path) {
        use std::os::windows::fs::OpenOptionsExt;
        use std::os::windows::io::AsRawHandle;
        use windows_sys::Win32::Storage::FileSystem::{READ_CONTROL, WRITE_DAC};
        let file = std::fs::OpenOptions::new()
            .access_mode(READ_CONTROL | WRITE_DAC)
            .open(path)
            .unwrap();
        // The owner, and everyone reading.
        crate::sys::acl::Descriptor::from_sddl("D:P(A;;FA;;;OW)(A;;FR;;;WD)")
            .unwrap()
            .apply_dacl(file.as_raw_handle())
            .unwrap();
    }

    #[cfg(windows)]
    fn others_may_read(file: &File) -> bool {
        crate::base::safedir::access_of(file).unwrap().others & crate::base::safedir::READ_RIGHTS != 0
    }

    #[test]
    fn a_log_that_is_no_longer_the_name_is_started_over() {
        let (t, mut sink) = sink(10);
        sink.write(b"a1234\n");
        // Moved aside while open: the name is not this file any more, so
        // the full file is started over where it is, nothing renamed.
        std::fs::rename(t.path().join("wire.jsonl"), t.path().join("aside")).unwrap();
        sink.write(b"b1234\n");
        assert_eq!(read(&t, "aside"), "b1234\n");
        assert!(!t.path().join("wire.jsonl.1").exists());
        assert!(!t.path().join("wire.jsonl").exists());
    }
}
