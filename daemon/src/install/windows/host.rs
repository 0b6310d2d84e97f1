//! The steps of `-install` that differ by OS, Windows half (same names as
//! `install/host.rs`).
//!
//! * The CLI is `<cli-dir>\<cli-version>.exe`: `CreateProcessW` (and
//!   `process.spawn` of the reported path) runs a program by its `.exe`
//!   name, and claustrum's Windows layout names the file so (its
//!   `docs/ARCHITECTURE.md`, "CLI-version manager": "On Windows the CLI
//!   file is `<cli-version>.exe`").
//! * `cliPath` is Go's Windows `filepath.Join`: `\` separators, cleaned.
//! * The cli dir's missing levels and every temporary are created
//!   through [`crate::base::safedir`]: relative to a verified directory
//!   handle, no link or junction followed, owner-only DACL. Windows has no
//!   mode bits: "runnable" is the `.exe` name, so the `chmod` step does
//!   nothing.

use crate::base::safedir;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// The CLI's file name in `-cli-dir`: `<version>.exe`.
pub(super) fn cli_file_name(version: &str) -> String {
    format!("{version}.exe")
}

/// `cliPath` as the facts report it: Go's Windows
/// `filepath.Join(dir, "<version>.exe")`, `\` separators, cleaned; the
/// cli dir alone without a version.
pub(super) fn cli_path(dir: &str, version: &str) -> String {
    // No version, no file: the path is the cli dir's, as on Unix.
    let name = if version.is_empty() {
        String::new()
    } else {
        cli_file_name(version)
    };
    let joined = if dir.is_empty() { name } else { format!("{dir}\\{name}") };
    clean(&joined)
}

/// Go's Windows `filepath.Clean`, for the paths `-install` reports: `/`
/// read as `\`, the volume (`C:`, `\\host\share`) kept, `.` and `..`
/// resolved lexically, repeated separators collapsed.
fn clean(path: &str) -> String {
    let slashed = path.replace('/', "\\");
    let (volume, rest) = split_volume(&slashed);
    let cleaned = crate::base::gopath::clean(rest.replace('\\', "/").as_bytes());
    let rest = String::from_utf8_lossy(&cleaned).replace('/', "\\");
    if volume.is_empty() {
        rest
    } else if rest == "." {
        // Go keeps `C:.` for a bare volume-relative `.`.
        format!("{volume}.")
    } else {
        format!("{volume}{rest}")
    }
}

/// The volume name of a `\`-separated path and what follows it.
fn split_volume(path: &str) -> (&str, &str) {
    let bytes = path.as_bytes();
    if bytes.len() >= 2 && bytes[1] == b':' && bytes[0].is_ascii_alphabetic() {
        return path.split_at(2);
    }
    if let Some(unc) = path.strip_prefix("\\\\") {
        // `\\host\share`: the volume ends before the third separator.
        let mut seps = unc.match_indices('\\').map(|(i, _)| i + 2);
        if let (Some(_), share_end) = (seps.next(), seps.next()) {
            return path.split_at(share_end.unwrap_or(path.len()));
        }
    }
    ("", path)
}

/// Whether `version` would name something other than one entry directly
/// in `-cli-dir`: either separator, a `:` (a drive or a stream), a NUL.
pub(super) fn leaves_dir(version: &str) -> bool {
    version.contains(['/', '\\', ':', '\0'])
}

/// Makes `-cli-dir` and its missing parents, each owner-only and each
/// inside the handle of the level above (no link or junction followed).
/// The existing part must be one nobody else can change
/// ([`safedir::open_trusted_dir`]).
pub(super) fn create_cli_dir(dir: &str) -> io::Result<()> {
    let mut path = PathBuf::from(dir);
    if !path.is_absolute() {
        path = std::env::current_dir()?.join(path);
    }
    let mut missing = Vec::new();
    let mut existing = path.as_path();
    while std::fs::symlink_metadata(existing).is_err() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        };
        missing.push(name.to_os_string());
        existing = parent;
    }
    let mut level = safedir::open_trusted_dir(existing).map_err(|e| io::Error::other(e.to_string()))?;
    for name in missing.iter().rev() {
        let name = name.as_encoded_bytes();
        match safedir::make_dir_in(&level, name, 0o700) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        level = safedir::open_dir_in(&level, name)?;
    }
    Ok(())
}

/// Creates `path` exclusively, read-write, owner-only, inside the handle
/// of its directory (which must be ours, and no link).
pub(super) fn create_private(path: &Path) -> io::Result<File> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    let dir = safedir::open_own_dir(parent).map_err(|e| io::Error::other(e.to_string()))?;
    safedir::open_file_at(
        &dir,
        name.as_encoded_bytes(),
        libc::O_RDWR | libc::O_CREAT | libc::O_EXCL,
        0o600,
    )
}

/// Nothing to do: Windows runs a file by its `.exe` name, not a mode bit.
pub(super) fn make_runnable(_file: &File) -> io::Result<()> {
    Ok(())
}

/// Whether `pid` names a live process.
pub(super) fn owner_alive(pid: i32) -> bool {
    crate::sys::os::process_alive(pid)
}

/// Volume serial and file index of the open upload.
pub(super) fn file_identity(file: &File) -> Option<(u64, u64)> {
    crate::sys::os::file_identity(file)
}

/// The same of what `path` names now.
pub(super) fn path_identity(path: &str) -> Option<(u64, u64)> {
    let file = crate::sys::os::open_nonblocking(Path::new(path)).ok()?;
    crate::sys::os::file_identity(&file)
}

/// The home guard's refusal of the CLI path (as `cliPath` names it) or
/// of the cli dir, `None` when neither is or contains the daemon user's
/// home, `%USERPROFILE%`. Windows has no `Homes` judgement yet
/// (`base/windows/homeguard.rs`), so this one is `-install`'s own: a
/// target is refused when the home or a directory above it is that
/// target, lexically (made absolute, case-insensitive) or by identity
/// (volume serial and file index, links followed), the Unix half's texts.
pub(super) fn home_refusal(dir: &Path, final_path: &Path, cli_path: &str) -> Option<String> {
    let home = std::path::absolute(std::env::var_os("USERPROFILE").filter(|h| !h.is_empty())?).ok()?;
    let refused = |target: &Path, what: &str, shown: &[u8]| {
        holds_home(&home, target).then(|| {
            format!(
                "{what} must not be or contain the home directory: {}",
                crate::base::goerr::go_quote(shown)
            )
        })
    };
    refused(final_path, "cli path", cli_path.as_bytes())
        .or_else(|| refused(dir, "cli dir", dir.as_os_str().as_encoded_bytes()))
}

/// Whether `target` is `home` or one of the directories above it.
fn holds_home(home: &Path, target: &Path) -> bool {
    let Ok(target) = std::path::absolute(target) else {
        return true;
    };
    let lower = |p: &Path| p.to_string_lossy().to_lowercase().replace('/', "\\");
    let wanted = lower(&target);
    let identity = |p: &Path| {
        crate::sys::os::open_dir_nonblocking(p)
            .ok()
            .and_then(|f| crate::sys::os::file_identity(&f))
    };
    let target_identity = identity(&target);
    home.ancestors().any(|level| {
        lower(level).trim_end_matches('\\') == wanted.trim_end_matches('\\')
            || (target_identity.is_some() && identity(level) == target_identity)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cli_is_an_exe_named_by_a_windows_join() {
        assert_eq!(cli_file_name("2.1.3"), "2.1.3.exe");
        assert_eq!(
            cli_path(r"C:\Users\u\ccd-cli", "2.1.3"),
            r"C:\Users\u\ccd-cli\2.1.3.exe"
        );
        assert_eq!(cli_path("C:/Users/u/ccd-cli/", "1.0"), r"C:\Users\u\ccd-cli\1.0.exe");
        assert_eq!(cli_path(r"C:\a\.\b\..\c", "1"), r"C:\a\c\1.exe");
        assert_eq!(cli_path(r"\\host\share\d", "1"), r"\\host\share\d\1.exe");
        assert_eq!(cli_path("rel", "1"), r"rel\1.exe");
        assert_eq!(cli_path("", "1"), "1.exe");
        assert_eq!(cli_path(r"C:\d\", ""), r"C:\d");
    }

    #[test]
    fn the_home_and_its_parents_are_refused() {
        let Some(home) = std::env::var_os("USERPROFILE").map(PathBuf::from) else {
            return;
        };
        let parent = home.parent().unwrap();
        let inside = home.join("ccd-cli");
        assert!(home_refusal(parent, &home, "x")
            .unwrap()
            .starts_with("cli path must not be"));
        assert!(home_refusal(&home, &inside, "x")
            .unwrap()
            .starts_with("cli dir must not be"));
        assert_eq!(home_refusal(&inside, &inside.join("1.exe"), "x"), None);
    }

    #[test]
    fn a_version_stays_one_name() {
        assert!(!leaves_dir("2.1.3"));
        for bad in ["a\\b", "a/b", "C:x", "x:stream", "a\0"] {
            assert!(leaves_dir(bad), "{bad:?}");
        }
    }
}
