//! `files.extract_tar`: streaming, confined extraction of a gzip'd tar.
//!
//! [`extract`] is the whole operation behind the method (and the entry point
//! the fuzz target calls). It streams file → [`gzip`] → [`reader`] → disk
//! with fixed-size buffers, so memory does not grow with the archive.
//!
//! Order of operations (mirrors the Go daemon, see `docs/PROTOCOL.md`):
//! 1. `destDir` must be absolute and not `/` after cleaning, and must not
//!    be or contain the daemon user's home directory ([`crate::base::homeguard`],
//!    remora's own rule), and the directories above it must be ones only
//!    the user and root can change ([`destdir`], remora's own rule too,
//!    audit F2) — otherwise the `{success:false,error}` body, and the
//!    archive is untouched; from here on destDir is reached only through
//!    the descriptor that walk returned;
//! 2. the archive is opened non-blocking and must not be a FIFO, socket or
//!    device (failure: `open archive: open <p>: …`, as at reference build
//!    5db5e4a; nothing else changes);
//!    from here on it is removed when extraction ends, whatever the outcome
//!    (removal failures are ignored, as Go ignores its deferred `os.Remove`);
//! 3. `destDir` is removed (a port of Go's `os.RemoveAll`, for its error
//!    texts, below the parent's descriptor) and recreated 0700: parents as
//!    Go's `os.MkdirAll` (by `mkdirat`), the last level by an exclusive
//!    `mkdirat`, verified through its fd (where
//!    [`Rules::relative_texts`]: parents made and the parent opened first,
//!    then the old `destDir` removed below it, as build 5fd08069 does);
//! 4. entries are extracted: the target is `filepath.Join(destDir, name)`,
//!    which must be `destDir` or lie under it (so an absolute name lands
//!    inside; a `../` that comes back inside is fine unless [`Rules`] says
//!    the build refuses it); only regular files (0600, or 0700 where
//!    [`Rules`] keeps the owner's execute bit) and directories (0700) are
//!    created, anything else is
//!    `unsupported tar entry type <c>: <name>`; a directory or file that
//!    cannot be made names the entry first (`mkdir parent <name>: `,
//!    `mkdir <name>: `, `create <name>: `, as build 89cb6289 does; the
//!    OS error after it is worded by [`texts`], per build);
//! 5. `.synced` is written empty at the root.
//!
//! Confinement does not rely on the lexical check alone: every directory is
//! walked from an fd of `destDir` with `openat(O_NOFOLLOW|O_DIRECTORY)`, and
//! files are created with `O_CREAT|O_EXCL|O_NOFOLLOW` after unlinking any
//! previous entry of the same name, so nothing is ever written through a
//! symlink or into a pre-existing inode (a hard link), even if another
//! process plants one in `destDir` while we extract.

#[cfg(unix)]
mod destdir;
#[cfg(windows)]
#[path = "windows/destdir.rs"]
mod destdir;
#[cfg(unix)]
mod engine;
#[cfg(windows)]
#[path = "windows/engine.rs"]
mod engine;
mod extract_error;
pub(crate) mod gzip;
mod read_error;
pub(crate) mod reader;
#[cfg(unix)]
mod removeall;
#[cfg(windows)]
#[path = "windows/removeall.rs"]
mod removeall;
#[cfg(unix)]
mod texts;

use crate::base::gopath;
use serde::Serialize;
#[cfg(unix)]
use std::ffi::CString;
use std::fs::File;
#[cfg(unix)]
use std::io;
use std::io::Write;
#[cfg(unix)]
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

pub(crate) use engine::extract;
use extract_error::ExtractError;
#[cfg(windows)]
pub(crate) use removeall::remove_tree_in;
#[cfg(unix)]
pub(crate) use removeall::{remove_entry_errno, remove_tree_errno, remove_tree_in};

/// The `files.extract_tar` result body. `fileCount` is absent only on the
/// destDir rejection, which the contract shows without it.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct ExtractResult {
    pub success: bool,
    #[serde(rename = "fileCount", skip_serializing_if = "Option::is_none")]
    pub file_count: Option<u64>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

impl ExtractResult {
    fn failed(error: &ExtractError) -> Self {
        ExtractResult {
            success: false,
            file_count: Some(0),
            error: error.to_string(),
        }
    }
}

const COPY_BUFFER: usize = 64 * 1024;

/// What differs between the builds that extract
/// ([`crate::protocol::build::Switch::TarExecBit`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Rules {
    /// A file whose owner execute bit is set lands `0700`, not `0600`.
    pub exec_bit: bool,
    /// A name that leaves `destDir` and comes back (`../dest/x`,
    /// `sub/../../dest/y`) is refused as unsafe, like one that stays out.
    pub no_come_back: bool,
    /// The entry and destDir failures are worded as build 5fd08069 does,
    /// relative to `destDir` (`mkdirat a: file exists`, `openat x: file
    /// exists`), and the parent of `destDir` is opened before the old
    /// `destDir` is removed ([`texts`] has the wording).
    pub relative_texts: bool,
}

/// Copies the current entry's data from `tar` into `out`.
fn copy_data<R: reader::GoRead>(
    tar: &mut reader::TarReader<R>,
    out: &mut File,
    buf: &mut [u8],
    target_text: &str,
) -> Result<(), ExtractError> {
    loop {
        let n = tar.read_data(buf)?;
        if n == 0 {
            return Ok(());
        }
        out.write_all(&buf[..n]).map_err(|source| ExtractError::Write {
            target: target_text.to_string(),
            source,
        })?;
    }
}

/// Whether a relative `name` climbs above its start once cleaned
/// (`../x`, `a/../../x`), whether or not the join lands back inside.
fn leaves_and_returns(name: &[u8]) -> bool {
    let cleaned = gopath::clean(name);
    cleaned == b".." || cleaned.starts_with(b"../")
}

#[cfg(unix)]
fn cstr(name: &[u8]) -> io::Result<CString> {
    // Go reports a NUL in a path as EINVAL.
    CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

#[cfg(unix)]
fn last_err() -> io::Error {
    io::Error::last_os_error()
}

/// `openat(dir, name, O_DIRECTORY|O_NOFOLLOW)`; `dir: None` is the cwd.
#[cfg(unix)]
fn open_dir_at(dir: Option<&OwnedFd>, name: &[u8]) -> io::Result<OwnedFd> {
    let c = cstr(name)?;
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    loop {
        // SAFETY: valid dirfd and NUL-terminated name.
        let fd = unsafe { libc::openat(dirfd, c.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: `fd` is a fresh descriptor we own.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = last_err();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
