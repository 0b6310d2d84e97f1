//! Resolving a path that will be used by path again later (handed to a
//! child, or re-resolved at every step of `-install`) so that nobody but
//! the daemon's user and root can make it lead anywhere else.
//!
//! Checking only the last component, or only the directories above the
//! *resolved* path, is not enough: a link another user owns halfway along
//! (`/shared/agent-dir/agent.sock` with `agent-dir` theirs) can be
//! repointed after the check, and a `..` after a link climbs out of
//! wherever that link points. [`walk`] resolves the path by hand, one
//! component at a time, the way the kernel will, and judges each step:
//!
//! * the directory holding each entry passed through (link or not), and
//!   every directory above it, is owned by the user or root and writable
//!   by no one else unless sticky ([`safe_directories`]; group write by
//!   the user's own private group is the user's, as in `safedir`:
//!   [`crate::base::privgroup`]), so nobody else can rename, replace or
//!   add an entry on the way;
//! * each link is owned by the user or root (a link in a sticky directory
//!   could still be someone else's);
//! * a `..` climbs from where the links so far actually led.
//!
//! At most [`MAX_LINKS`] links are followed, the kernel's own bound. The
//! walk stops at the first name that does not exist (or whose parent is
//! not a directory) and returns what is left; callers decide what a
//! missing rest means. [`crate::base::safedir`] is the stricter sibling for
//! directories remora makes itself: it follows no link at all.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Links followed before the path is refused (Linux's `ELOOP` bound).
pub(crate) const MAX_LINKS: usize = 40;

/// Where a walk ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Walked {
    /// The existing part, resolved, with no link in it.
    pub resolved: PathBuf,
    /// The names not reached (missing, or below something that is not a
    /// directory), in order; empty when the whole path exists.
    pub rest: Vec<OsString>,
}

/// Resolves the absolute `path` for the user `me`, judging every step
/// (see the module doc). The `Err` text names the level that failed.
pub(crate) fn walk(path: &Path, me: u32) -> Result<Walked, String> {
    let io = |e: std::io::Error| crate::base::goerr::io_text(&e);
    if !path.is_absolute() {
        return Err("it is not an absolute path".to_string());
    }
    let mut pending: std::collections::VecDeque<OsString> = names(path).into();
    let mut resolved = PathBuf::from("/");
    let mut links = 0;
    let mut last_safe: Option<PathBuf> = None;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        // `resolved` has no link in it: judging it judges every level
        // above the entry. A directory is judged once per visit.
        if last_safe.as_ref() != Some(&resolved) {
            match std::fs::symlink_metadata(&resolved) {
                Ok(meta) if !meta.is_dir() => {
                    pending.push_front(name);
                    return Ok(Walked {
                        resolved,
                        rest: pending.into(),
                    });
                }
                _ => {}
            }
            safe_directories(&resolved, me)?;
            last_safe = Some(resolved.clone());
        }
        let entry = resolved.join(&name);
        let meta = match std::fs::symlink_metadata(&entry) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                pending.push_front(name);
                return Ok(Walked {
                    resolved,
                    rest: pending.into(),
                });
            }
            Err(e) => return Err(io(e)),
        };
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
                "{} is a link that belongs to uid {}, not to this user or root",
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
    Ok(Walked {
        resolved,
        rest: Vec::new(),
    })
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
pub(crate) fn safe_directories(dir: &Path, me: u32) -> Result<(), String> {
    // SAFETY: getegid has no preconditions and cannot fail.
    let my_group = unsafe { libc::getegid() };
    for level in dir.ancestors() {
        let meta = std::fs::symlink_metadata(level).map_err(|e| crate::base::goerr::io_text(&e))?;
        // As `safedir` judges a level: group write counts only when the
        // group is not the user's own private group (the user-private-group
        // convention makes a 0775 home or project directory common); a
        // primary group shared with others is theirs too (audit F6).
        let others_write = meta.mode() & 0o002 != 0;
        let group_write =
            meta.mode() & 0o020 != 0 && !(meta.gid() == my_group && crate::base::privgroup::is_private(meta.gid(), me));
        let shared = (others_write || group_write) && meta.mode() & 0o1000 == 0;
        if !meta.is_dir() || (meta.uid() != me && meta.uid() != 0) || shared {
            return Err(format!(
                "{} is not private to this user (owner uid {}, mode {:o})",
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

    fn whole(p: &Path) -> Walked {
        Walked {
            resolved: p.to_path_buf(),
            rest: Vec::new(),
        }
    }

    #[test]
    fn links_of_ours_in_private_places_resolve() {
        let t = tempfile::tempdir().unwrap();
        let private = t.path().join("private");
        std::fs::create_dir_all(private.join("sub")).unwrap();
        std::fs::write(private.join("f"), "").unwrap();
        let f = private.join("f");
        assert_eq!(walk(&f, me()).unwrap(), whole(&f));
        symlink(&private, t.path().join("via")).unwrap();
        assert_eq!(walk(&t.path().join("via/f"), me()).unwrap(), whole(&f));
        // A `..` after a link climbs from where the link led.
        symlink(private.join("sub"), t.path().join("deep")).unwrap();
        assert_eq!(walk(&t.path().join("deep/../f"), me()).unwrap(), whole(&f));
        // A relative target resolves from the link's own directory.
        symlink("private/./f", t.path().join("rel")).unwrap();
        assert_eq!(walk(&t.path().join("rel"), me()).unwrap(), whole(&f));
    }

    #[test]
    fn a_missing_rest_is_returned() {
        let t = tempfile::tempdir().unwrap();
        let got = walk(&t.path().join("a/b"), me()).unwrap();
        assert_eq!(got.resolved, t.path());
        assert_eq!(got.rest, vec![OsString::from("a"), OsString::from("b")]);
        std::fs::write(t.path().join("file"), "").unwrap();
        let got = walk(&t.path().join("file/x"), me()).unwrap();
        assert_eq!(got.resolved, t.path().join("file"));
        assert_eq!(got.rest, vec![OsString::from("x")]);
    }

    #[test]
    fn a_shared_place_or_a_foreign_link_anywhere_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let private = t.path().join("private");
        std::fs::create_dir(&private).unwrap();
        let shared = t.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        symlink(&private, shared.join("agent-dir")).unwrap();
        let why = walk(&shared.join("agent-dir/x"), me()).unwrap_err();
        assert!(why.contains("is not private"), "{why}");
        let why = walk(&shared.join("agent-dir/sub/../x"), me()).unwrap_err();
        assert!(why.contains("is not private"), "{why}");
        // A sticky place is fine for our own link, not for another's.
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(walk(&shared.join("agent-dir/x"), me()).is_ok());
        if me() == 0 {
            std::os::unix::fs::lchown(shared.join("agent-dir"), Some(65534), None).unwrap();
            let why = walk(&shared.join("agent-dir/x"), me()).unwrap_err();
            assert!(why.contains("belongs to uid 65534"), "{why}");
        }
    }

    #[test]
    fn group_write_counts_only_for_another_group() {
        let t = tempfile::tempdir().unwrap();
        let shared = t.path().join("team");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o775)).unwrap();
        // Made by us: its group is our primary group (user private groups).
        assert!(walk(&shared.join("x"), me()).is_ok());
        if me() == 0 {
            std::os::unix::fs::chown(&shared, None, Some(65534)).unwrap();
            let why = walk(&shared.join("x"), me()).unwrap_err();
            assert!(why.contains("is not private"), "{why}");
        }
    }

    #[test]
    fn loops_and_relative_paths_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        symlink(t.path().join("b"), &a).unwrap();
        symlink(&a, t.path().join("b")).unwrap();
        let why = walk(&a, me()).unwrap_err();
        assert!(why.contains("more than 40 links"), "{why}");
        assert_eq!(walk(Path::new("x/y"), me()).unwrap_err(), "it is not an absolute path");
    }
}
