//! The Windows half of `tarx/destdir.rs` (issue 43): `destDir`'s parent
//! reached through `base::safedir` handles, the levels that exist judged
//! as safedir's walk judges a trusted directory, the missing ones made
//! owner-only, and [`DestError`], what that can fail with.

use crate::base::goerr::path_error;
use crate::base::gojson::go_lossy;
use crate::base::safedir::{self, Dir};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Why `destDir` could not be made ready (the reply's `error`).
#[derive(Debug)]
pub(super) enum DestError {
    /// A level above it is another user's, or others may change it, or it
    /// is a link or junction: the Unix half's refusal, safedir's reason.
    Untrusted { dest: String, why: String },
    /// A level could not be made or opened: `mkdir destDir: <op> <path>: <error>`.
    Mkdir {
        op: &'static str,
        path: String,
        source: io::Error,
    },
    /// What the exclusive create made is not a directory of ours.
    NotOurs { dest: String },
}

impl fmt::Display for DestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DestError::Untrusted { dest, why } => write!(
                f,
                "destDir must not lie below a directory or link another user can change: {} ({why})",
                crate::base::goerr::go_quote(dest.as_bytes())
            ),
            DestError::Mkdir { op, path, source } => write!(f, "mkdir destDir: {}", path_error(op, path, source)),
            DestError::NotOurs { dest } => write!(f, "mkdir destDir: {dest}: not a directory this daemon created"),
        }
    }
}

impl std::error::Error for DestError {}

/// `dest` cleaned: its root (`C:\`, `\\srv\share\`) and its names, or
/// `None` when it is not absolute.
pub(super) fn split_dest(dest: &Path) -> Option<(PathBuf, Vec<Vec<u8>>)> {
    if !dest.is_absolute() {
        return None;
    }
    let mut root = PathBuf::new();
    let mut names: Vec<Vec<u8>> = Vec::new();
    for c in dest.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => root.push(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                names.pop();
            }
            Component::Normal(n) => names.push(n.as_encoded_bytes().to_vec()),
        }
    }
    Some((root, names))
}

pub(super) fn path_of(root: &Path, names: &[Vec<u8>]) -> PathBuf {
    let mut p = root.to_path_buf();
    for n in names {
        // SAFETY: the bytes came from `as_encoded_bytes` of an `OsStr`,
        // split at ASCII separators only.
        p.push(unsafe { std::ffi::OsStr::from_encoded_bytes_unchecked(n) });
    }
    p
}

/// Opens the parent of `dest` (`root` + `names`), judging the levels that
/// exist as [`safedir::open_trusted_dir`] does and making the missing
/// ones owner-only (Go's `MkdirAll`), each checked to be ours.
pub(super) fn open_parent(root: &Path, names: &[Vec<u8>], dest_text: &str) -> Result<Dir, DestError> {
    // The deepest level that exists now; the walk below judges it and
    // everything above it, so a change after this look only moves where
    // the making starts.
    let mut have = names.len();
    while have > 0 && std::fs::symlink_metadata(path_of(root, &names[..have])).is_err() {
        have -= 1;
    }
    let untrusted = |why: String| DestError::Untrusted {
        dest: dest_text.to_string(),
        why,
    };
    let mut dir = safedir::open_trusted_dir(&path_of(root, &names[..have])).map_err(|e| untrusted(e.to_string()))?;
    let me = safedir::own_uid();
    for n in have..names.len() {
        let at = path_of(root, &names[..=n]);
        let at_text = go_lossy(at.as_os_str().as_encoded_bytes());
        let mkdir = |source: io::Error| DestError::Mkdir {
            op: "mkdir",
            path: at_text.clone(),
            source,
        };
        match safedir::make_dir_in(&dir, &names[n], 0o700) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(mkdir(e)),
            _ => {}
        }
        let next = safedir::open_dir_in(&dir, &names[n]).map_err(mkdir)?;
        match safedir::owner_of(&next) {
            Ok(owner) if owner == me => {}
            _ => return Err(untrusted(format!("{at_text} is not this user's"))),
        }
        dir = next;
    }
    Ok(dir)
}
