//! Whether an agent socket path may be handed to a child: nobody but the
//! daemon's user (and root) can make the path lead anywhere else, now or
//! later.
//!
//! A child gets the path as it was given, not resolved (a link a profile
//! keeps pointing at the newest forwarded agent stays useful), and
//! resolves it again each time it connects. So every entry the path passes
//! through must be beyond another user's reach, not only the last one:
//! a link another user owns halfway along (`/shared/agent-dir/agent.sock`
//! with `agent-dir` theirs) could be repointed after the check, and a `..`
//! after a link climbs out of wherever that link points.
//!
//! [`vet`] resolves the path by hand, one component at a time, the way the
//! kernel will, and judges each step:
//!
//! * the directory holding each entry passed through (link or not), and
//!   every directory above it, is owned by the user or root and writable
//!   by no one else unless sticky ([`safe_directories`]); so nobody else
//!   can rename, replace or add an entry on the way;
//! * each link is owned by the user or root (a link in a sticky directory
//!   could still be someone else's);
//! * a `..` climbs from where the links so far actually led;
//! * the end is a socket owned by the user.
//!
//! The path must be absolute: a child may run in another directory.
//! At most [`MAX_LINKS`] links are followed, as the kernel's own bound.

use std::ffi::OsString;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// Links followed before the path is refused (Linux's `ELOOP` bound).
pub const MAX_LINKS: usize = 40;

/// Checks `path` for the user `me`; `Ok` is the socket it resolves to
/// now. The `Err` text completes "not handed on: …".
pub fn vet(path: &str, me: u32) -> Result<PathBuf, String> {
    let io = |e: std::io::Error| crate::base::goerr::io_text(&e);
    if !path.starts_with('/') {
        return Err("it is not an absolute path".to_string());
    }
    let mut pending: std::collections::VecDeque<OsString> = names(Path::new(path)).into();
    let mut resolved = PathBuf::from("/");
    let mut links = 0;
    let mut last_safe: Option<PathBuf> = None;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        // `resolved` has no link in it: judging it judges every level
        // above the entry. The same directory is judged once in a row.
        if last_safe.as_ref() != Some(&resolved) {
            safe_directories(&resolved, me)?;
            last_safe = Some(resolved.clone());
        }
        let entry = resolved.join(&name);
        let meta = std::fs::symlink_metadata(&entry).map_err(io)?;
        if !meta.file_type().is_symlink() {
            resolved = entry;
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(format!("it passes through more than {MAX_LINKS} links"));
        }
        if meta.uid() != me && meta.uid() != 0 {
            return Err(format!(
                "{} is a link that belongs to uid {}, not to this daemon's user or root",
                entry.display(),
                meta.uid()
            ));
        }
        let target = std::fs::read_link(&entry).map_err(io)?;
        if target.is_absolute() {
            resolved = PathBuf::from("/");
        }
        for name in names(&target).into_iter().rev() {
            pending.push_front(name);
        }
    }
    let meta = std::fs::symlink_metadata(&resolved).map_err(io)?;
    if !meta.file_type().is_socket() {
        return Err("it is not a socket".to_string());
    }
    if meta.uid() != me {
        return Err(format!("it belongs to uid {}, not to this daemon's user", meta.uid()));
    }
    Ok(resolved)
}

/// The names of `path` in order, `..` kept as a name and `.` dropped.
fn names(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Whether `dir` (no links in it) and every directory above it are owned
/// by `me` or root and writable by no one else, unless sticky (where
/// others cannot rename or delete our entries): otherwise another user
/// could swap what lies below for their own.
pub fn safe_directories(dir: &Path, me: u32) -> Result<(), String> {
    for level in dir.ancestors() {
        let meta = std::fs::symlink_metadata(level).map_err(|e| crate::base::goerr::io_text(&e))?;
        let shared = meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0;
        if !meta.is_dir() || (meta.uid() != me && meta.uid() != 0) || shared {
            return Err(format!(
                "{} is not private to this daemon's user (owner uid {}, mode {:o})",
                level.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn me() -> u32 {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() }
    }

    fn text(p: &Path) -> String {
        p.to_string_lossy().into_owned()
    }

    /// A private folder holding a live socket; the folder and the socket.
    fn private_socket(scratch: &Path) -> (PathBuf, PathBuf, std::os::unix::net::UnixListener) {
        let private = scratch.join("private");
        std::fs::create_dir(&private).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        let sock = private.join("agent.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        (private, sock, listener)
    }

    #[test]
    fn links_of_ours_in_private_places_resolve() {
        let t = tempfile::tempdir().unwrap();
        let (private, sock, _l) = private_socket(t.path());
        assert_eq!(vet(&text(&sock), me()).unwrap(), sock);
        let via = t.path().join("via");
        symlink(&private, &via).unwrap();
        assert_eq!(vet(&text(&via.join("agent.sock")), me()).unwrap(), sock);
        // A `..` after a link climbs from where the link led.
        std::fs::create_dir(private.join("sub")).unwrap();
        let deep = t.path().join("deep");
        symlink(private.join("sub"), &deep).unwrap();
        assert_eq!(vet(&text(&deep.join("../agent.sock")), me()).unwrap(), sock);
        // Relative link targets resolve from the link's own directory.
        let rel = t.path().join("rel");
        symlink("private/./agent.sock", &rel).unwrap();
        assert_eq!(vet(&text(&rel), me()).unwrap(), sock);
    }

    #[test]
    fn a_link_in_a_shared_place_anywhere_on_the_path_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let (private, sock, _l) = private_socket(t.path());
        let shared = t.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        symlink(&private, shared.join("agent-dir")).unwrap();
        // Not the last component: the old check looked only there.
        let why = vet(&text(&shared.join("agent-dir/agent.sock")), me()).unwrap_err();
        assert!(why.contains("is not private"), "{why}");
        let why = vet(&text(&shared.join("agent-dir/sub/../agent.sock")), me()).unwrap_err();
        assert!(why.contains("is not private"), "{why}");
        assert!(vet(&text(&sock), me()).is_ok());
    }

    #[test]
    fn another_users_link_is_refused_even_in_a_sticky_place() {
        let t = tempfile::tempdir().unwrap();
        let (private, _sock, _l) = private_socket(t.path());
        let sticky = t.path().join("sticky");
        std::fs::create_dir(&sticky).unwrap();
        std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let link = sticky.join("agent-dir");
        symlink(&private, &link).unwrap();
        assert!(vet(&text(&link.join("agent.sock")), me()).is_ok());
        // Judged as if we were someone else: the link is then foreign.
        let stranger = me().wrapping_add(4242);
        let why = vet(&text(&link.join("agent.sock")), stranger).unwrap_err();
        assert!(why.contains("not private") || why.contains("belongs to uid"), "{why}");
    }

    #[test]
    fn loops_relative_paths_and_non_sockets_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        symlink(t.path().join("b"), &a).unwrap();
        symlink(&a, t.path().join("b")).unwrap();
        let why = vet(&text(&a), me()).unwrap_err();
        assert!(why.contains("more than 40 links"), "{why}");
        assert_eq!(vet("agent.sock", me()).unwrap_err(), "it is not an absolute path");
        std::fs::write(t.path().join("plain"), "").unwrap();
        assert_eq!(
            vet(&text(&t.path().join("plain")), me()).unwrap_err(),
            "it is not a socket"
        );
    }
}
