//! The Windows half of `base::homeguard` (issue 43): what the removals
//! and renames in the daemon's own directories ask (`base::safedir`):
//! [`check_entry`], and the path check `files.extract_tar` asks before it
//! wipes `destDir` ([`check`]). The Unix half's `Homes` and its bind-mount
//! judgements are still to come with `git.worktree_remove` and `-install`.

use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::{Path, PathBuf};
use windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE;
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_FLAG_BACKUP_SEMANTICS, FILE_READ_ATTRIBUTES, FILE_SHARE_DELETE, FILE_SHARE_READ,
    FILE_SHARE_WRITE, OPEN_EXISTING,
};

/// The daemon user's home: `%USERPROFILE%` (what `~` expands to on
/// Windows), made absolute.
fn home() -> Option<PathBuf> {
    let home = PathBuf::from(std::env::var_os("USERPROFILE")?);
    std::path::absolute(home).ok()
}

/// The identity (volume serial number, file index) of `path`, links
/// followed, as the home is reached through them.
fn identity_of(path: &Path) -> Option<(u64, u64)> {
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain([0]).collect();
    // SAFETY: a NUL-terminated path; no security attributes or template.
    let handle = unsafe {
        CreateFileW(
            wide.as_ptr(),
            FILE_READ_ATTRIBUTES,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
            std::ptr::null(),
            OPEN_EXISTING,
            FILE_FLAG_BACKUP_SEMANTICS,
            std::ptr::null_mut(),
        )
    };
    if handle == INVALID_HANDLE_VALUE {
        return None;
    }
    // SAFETY: a fresh handle nobody else owns.
    let handle = unsafe { OwnedHandle::from_raw_handle(handle) };
    crate::sys::openat::identity(handle.as_raw_handle()).ok()
}

/// Whether the directory entry `name`, whose identity (volume serial,
/// file index; a link not followed) is `entry`, is the daemon user's home
/// or a directory above one, as the error a removal or rename in a
/// directory handle fails with (`base::safedir` reads the identity and
/// asks here: removing or renaming a link leaves what it points at
/// alone). An entry that is not there (`None`) passes. The refusal text
/// is the Unix half's.
pub(crate) fn check_entry(entry: Option<(u64, u64)>, name: &[u8]) -> io::Result<()> {
    let Some(home) = home() else {
        return Ok(());
    };
    let Some(entry) = entry else {
        return Ok(());
    };
    if home.ancestors().filter_map(identity_of).any(|id| id == entry) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "directory entry must not be or contain the home directory: {}",
                crate::base::goerr::go_quote(name)
            ),
        ));
    }
    Ok(())
}

/// A path's names, cleaned (`.` dropped, `..` taken back) and in one
/// letter case, as Windows volumes compare them.
fn folded(path: &Path) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str().to_string_lossy().to_lowercase()),
        }
    }
    out
}

/// The refusal (`<what> must not be or contain the home directory: "<path>"`,
/// the Unix half's text) when `path` is the daemon user's home or a
/// directory above it: by its names (letter case ignored), or by identity
/// when it exists (another spelling, a link or junction to it).
pub(crate) fn check(what: &str, path: impl AsRef<Path>) -> Option<String> {
    let given = path.as_ref();
    let path = std::path::absolute(given).ok()?;
    let home = home()?;
    let refusal = || {
        Some(format!(
            "{what} must not be or contain the home directory: {}",
            crate::base::goerr::go_quote(given.as_os_str().as_encoded_bytes())
        ))
    };
    let names = folded(&path);
    if folded(&home).starts_with(&names) {
        return refusal();
    }
    if let Some(id) = identity_of(&path) {
        if home.ancestors().filter_map(identity_of).any(|a| a == id) {
            return refusal();
        }
    }
    None
}
