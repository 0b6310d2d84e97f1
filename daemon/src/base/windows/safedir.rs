//! The Windows half of `base::safedir` (issue 43): a stand-in with exactly
//! the Unix API, every operation answering "not available on Windows
//! yet", so the modules above build. Helper wsafedir writes the real half
//! (directory handles opened without following reparse points, judged by
//! owner and DACL); this file is replaced by theirs, so it holds no logic.

// The whole Unix API, whether or not a Windows caller uses it yet.
#![allow(dead_code)]

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// A handle to an opened directory.
pub(crate) type Dir = std::os::windows::io::OwnedHandle;

/// Why a directory is not safe to use.
#[derive(Debug)]
pub(crate) enum UnsafeDir {
    /// The path is relative or names `..`.
    NotPlain(PathBuf),
    /// A level is owned by another (non-root) user.
    ForeignOwner { path: PathBuf, uid: u32 },
    /// A level others can write to without the sticky bit.
    WritableByOthers { path: PathBuf, mode: u32 },
    /// A level is a symlink or not a directory.
    NotADirectory(PathBuf),
    /// Our own subdirectory in a shared directory exists, but others can
    /// write it.
    TooWide { path: PathBuf, mode: u32 },
    /// A system call failed.
    Io {
        op: &'static str,
        path: PathBuf,
        error: io::Error,
    },
}

impl fmt::Display for UnsafeDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnsafeDir::NotPlain(p) => write!(f, "{}: not an absolute path without '..'", p.display()),
            UnsafeDir::ForeignOwner { path, uid } => {
                write!(f, "{}: owned by uid {uid}, not by this user or root", path.display())
            }
            UnsafeDir::WritableByOthers { path, mode } => {
                write!(f, "{}: writable by other users (mode {mode:04o})", path.display())
            }
            UnsafeDir::NotADirectory(p) => write!(f, "{}: a symlink or not a directory", p.display()),
            UnsafeDir::TooWide { path, mode } => {
                write!(f, "{}: writable by other users (mode {mode:04o})", path.display())
            }
            UnsafeDir::Io { op, path, error } => write!(f, "{op} {}: {error}", path.display()),
        }
    }
}

impl std::error::Error for UnsafeDir {}

/// A private directory of ours, open.
#[derive(Debug)]
pub(crate) struct PrivateDir {
    pub fd: Dir,
    /// The directory `fd` is.
    pub path: PathBuf,
}

fn unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "safe directory operations are not available on Windows yet (issue 43)",
    )
}

fn unsafe_dir(op: &'static str, path: &Path) -> UnsafeDir {
    UnsafeDir::Io {
        op,
        path: path.to_path_buf(),
        error: unsupported(),
    }
}

/// Opens `path` as a private directory of ours: not available yet.
pub(crate) fn open_private_dir(path: &Path) -> Result<PrivateDir, UnsafeDir> {
    Err(unsafe_dir("open", path))
}

/// Opens an existing directory of ours: not available yet.
pub(crate) fn open_own_dir(path: &Path) -> Result<Dir, UnsafeDir> {
    Err(unsafe_dir("open", path))
}

/// Opens an existing directory nobody else can change: not available yet.
pub(crate) fn open_trusted_dir(path: &Path) -> Result<Dir, UnsafeDir> {
    Err(unsafe_dir("open", path))
}

/// Opens `name` in `dir`: not available yet.
pub(crate) fn open_file_at(_dir: &Dir, _name: &[u8], _flags: libc::c_int, _mode: u32) -> io::Result<std::fs::File> {
    Err(unsupported())
}

/// Whether an open file is a regular file owned by this user: not known
/// yet, so no.
pub(crate) fn is_own_regular(_file: &std::fs::File) -> bool {
    false
}

/// Opens the directory `name` inside `dir`: not available yet.
pub(crate) fn open_dir_in(_dir: &Dir, _name: &[u8]) -> io::Result<Dir> {
    Err(unsupported())
}

/// Creates the directory `name` inside `dir`: not available yet.
pub(crate) fn make_dir_in(_dir: &Dir, _name: &[u8], _mode: u32) -> io::Result<()> {
    Err(unsupported())
}

/// The owner of an open directory: not available yet.
pub(crate) fn owner_of(_dir: &Dir) -> io::Result<u32> {
    Err(unsupported())
}

/// This process's user, as the Unix half's uid: none on Windows yet.
pub(crate) fn own_uid() -> u32 {
    0
}

/// Renames an entry of `dir`: not available yet.
pub(crate) fn rename_in(_dir: &Dir, _from: &[u8], _to: &[u8]) -> io::Result<()> {
    Err(unsupported())
}

/// Removes an entry of `dir`: not available yet.
pub(crate) fn unlink_in(_dir: &Dir, _name: &[u8]) -> io::Result<()> {
    Err(unsupported())
}

/// Removes a flat directory of `parent`: not available yet.
pub(crate) fn remove_flat_dir_in(_parent: &Dir, _name: &[u8]) -> io::Result<()> {
    Err(unsupported())
}

/// The names in a directory: not available yet.
pub(crate) fn read_names(_dir: &Dir) -> io::Result<Vec<Vec<u8>>> {
    Err(unsupported())
}
