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
//!
//! [`open`] is the walk for a caller that then works in the directory
//! (`files.extract_tar`'s `destDir`, audit F2): after [`walk`], it opens
//! the resolved path from `/` one level at a time (`O_NOFOLLOW`, so a level
//! that became a link since fails) and judges every level again on its
//! descriptor. The caller goes on from that descriptor, never by the path.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
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
    /// How many of `rest`'s first names came from a link's target rather
    /// than from the path itself: the path went through a link to
    /// something missing or not a directory (a dangling link).
    pub from_links: usize,
}

/// Resolves the absolute `path` for the user `me`, judging every step
/// (see the module doc). The `Err` text names the level that failed.
pub(crate) fn walk(path: &Path, me: u32) -> Result<Walked, String> {
    let io = |e: std::io::Error| crate::base::goerr::io_text(&e);
    if !path.is_absolute() {
        return Err("it is not an absolute path".to_string());
    }
    let mut pending: std::collections::VecDeque<OsString> = names(path).into();
    // The path's own names are always the last `own` of `pending`: a
    // link's target is pushed in front of them.
    let mut own = pending.len();
    let mut resolved = PathBuf::from("/");
    let mut links = 0;
    let mut last_safe: Option<PathBuf> = None;
    let stop = |resolved: PathBuf, pending: std::collections::VecDeque<OsString>, own: usize| Walked {
        resolved,
        from_links: pending.len().saturating_sub(own),
        rest: pending.into(),
    };
    loop {
        // Whether the next name is the path's own, not a link's.
        let is_own = pending.len() == own;
        let Some(name) = pending.pop_front() else {
            break;
        };
        own -= usize::from(is_own);
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
                    let own = own + usize::from(is_own);
                    return Ok(stop(resolved, pending, own));
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
                let own = own + usize::from(is_own);
                return Ok(stop(resolved, pending, own));
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
        from_links: 0,
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
    for level in dir.ancestors() {
        let meta = std::fs::symlink_metadata(level).map_err(|e| crate::base::goerr::io_text(&e))?;
        judge(
            level,
            Level {
                is_dir: meta.is_dir(),
                uid: meta.uid(),
                gid: meta.gid(),
                mode: meta.mode(),
            },
            me,
        )?;
    }
    Ok(())
}

/// What [`judge`] looks at in one directory.
#[derive(Clone, Copy)]
struct Level {
    is_dir: bool,
    uid: u32,
    gid: u32,
    mode: u32,
}

/// The rule for one level (see [`safe_directories`]); `path` is for the
/// text.
fn judge(path: &Path, level: Level, me: u32) -> Result<(), String> {
    // SAFETY: getegid has no preconditions and cannot fail.
    let my_group = unsafe { libc::getegid() };
    // As `safedir` judges a level: group write counts only when the
    // group is not the user's own private group (the user-private-group
    // convention makes a 0775 home or project directory common); a
    // primary group shared with others is theirs too (audit F6).
    let others_write = level.mode & 0o002 != 0;
    let group_write =
        level.mode & 0o020 != 0 && !(level.gid == my_group && crate::base::privgroup::is_private(level.gid, me));
    let shared = (others_write || group_write) && level.mode & 0o1000 == 0;
    if !level.is_dir || (level.uid != me && level.uid != 0) || shared {
        return Err(format!(
            "{} is not private to this user (owner uid {}, mode {:o})",
            path.display(),
            level.uid,
            level.mode & 0o7777
        ));
    }
    Ok(())
}

/// Where [`open`] ended: the deepest directory of the path that exists,
/// open, every level of it judged on its descriptor.
#[derive(Debug)]
pub(crate) struct Opened {
    /// A search descriptor ([`crate::sys::os::OPEN_SEARCH`]) of `dir`.
    pub fd: OwnedFd,
    /// The directory `fd` is, with no link in it: the walk's resolved
    /// path, or the directory holding it when that is not a directory.
    pub dir: PathBuf,
    /// The walk's result.
    pub walked: Walked,
}

impl Opened {
    /// Whether the walk ended on something that is not a directory
    /// (`fd` is then the directory holding it).
    pub(crate) fn blocked(&self) -> bool {
        self.dir != self.walked.resolved
    }
}

/// [`walk`]s `path`, then opens the deepest directory it reached from `/`,
/// one level at a time without following links, and judges every level
/// again by `fstat` on its descriptor, so what the caller works in is
/// what was judged (see the module doc). The `Err` text is [`walk`]'s, or
/// names the level that failed.
pub(crate) fn open(path: &Path, me: u32) -> Result<Opened, String> {
    let walked = walk(path, me)?;
    let is_dir = std::fs::symlink_metadata(&walked.resolved).map_or(true, |m| m.is_dir());
    let dir = match walked.resolved.parent() {
        Some(parent) if !is_dir => parent.to_path_buf(),
        _ => walked.resolved.clone(),
    };
    let changed = |at: &Path, e: io::Error| {
        format!(
            "{} changed while it was checked ({})",
            at.display(),
            crate::base::goerr::io_text(&e)
        )
    };
    let mut at = PathBuf::from("/");
    let mut fd = open_search(None, c"/").map_err(|e| changed(&at, e))?;
    judge(&at, level_of(&fd).map_err(|e| changed(&at, e))?, me)?;
    for name in names(&dir) {
        at.push(&name);
        let c = CString::new(name.as_bytes()).map_err(|e| changed(&at, e.into()))?;
        fd = open_search(Some(&fd), &c).map_err(|e| changed(&at, e))?;
        judge(&at, level_of(&fd).map_err(|e| changed(&at, e))?, me)?;
    }
    Ok(Opened { fd, dir, walked })
}

/// Judges the open directory `fd` (spelled `at`, for the text) by the
/// rule for every level (see [`safe_directories`]): for a level the
/// caller made below an [`open`]ed one, which another user may have won
/// the name of.
pub(crate) fn judge_dir(at: &Path, fd: &OwnedFd, me: u32) -> Result<(), String> {
    let level = level_of(fd).map_err(|e| format!("{}: {}", at.display(), crate::base::goerr::io_text(&e)))?;
    judge(at, level, me)
}

/// `openat(dir, name)` for searching only, never following a link; `None`
/// is the working directory (for an absolute `name`).
pub(crate) fn open_search(dir: Option<&OwnedFd>, name: &std::ffi::CStr) -> io::Result<OwnedFd> {
    let flags = crate::sys::os::OPEN_SEARCH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    loop {
        // SAFETY: `dirfd` is open or AT_FDCWD, `name` is NUL-terminated.
        let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: `fd` is a fresh descriptor nobody else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// What [`judge`] needs of an open directory.
// `st_mode` is a u16 on macOS.
#[allow(clippy::unnecessary_cast)]
fn level_of(fd: &OwnedFd) -> io::Result<Level> {
    // SAFETY: an all-zero `stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `st` is a valid out-pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mode = st.st_mode as u32;
    Ok(Level {
        is_dir: mode & 0o170000 == 0o040000,
        uid: st.st_uid,
        gid: st.st_gid,
        mode,
    })
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
            from_links: 0,
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
        assert_eq!(got.from_links, 0);
        // A dangling link: the first names of the rest are its target's.
        symlink(t.path().join("gone/y"), t.path().join("dangling")).unwrap();
        let got = walk(&t.path().join("dangling/x"), me()).unwrap();
        assert_eq!(got.resolved, t.path());
        let rest: Vec<OsString> = ["gone", "y", "x"].into_iter().map(OsString::from).collect();
        assert_eq!(got.rest, rest);
        assert_eq!(got.from_links, 2);
        // A link to a file, with a name below it.
        symlink(t.path().join("file"), t.path().join("to-file")).unwrap();
        let got = walk(&t.path().join("to-file/x"), me()).unwrap();
        assert_eq!(got.resolved, t.path().join("file"));
        assert_eq!((got.rest.len(), got.from_links), (1, 0));
    }

    #[test]
    fn open_returns_the_judged_directory_by_descriptor() {
        use std::os::unix::fs::MetadataExt as _;
        let t = tempfile::tempdir().unwrap();
        let private = t.path().join("private");
        std::fs::create_dir_all(private.join("sub")).unwrap();
        symlink(&private, t.path().join("via")).unwrap();
        let opened = open(&t.path().join("via/sub/missing/more"), me()).unwrap();
        assert_eq!(opened.dir, private.join("sub"));
        assert!(!opened.blocked());
        assert_eq!(opened.walked.rest.len(), 2);
        // SAFETY: an all-zero `stat` is a valid value to be overwritten.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: an open descriptor and a valid out-pointer.
        assert_eq!(unsafe { libc::fstat(opened.fd.as_raw_fd(), &mut st) }, 0);
        let meta = std::fs::metadata(private.join("sub")).unwrap();
        #[allow(clippy::unnecessary_cast)]
        let id = (st.st_dev as u64, st.st_ino as u64);
        assert_eq!(id, (meta.dev(), meta.ino()));
        // A file on the way: the directory holding it is what is open.
        std::fs::write(private.join("file"), "").unwrap();
        let opened = open(&private.join("file/x"), me()).unwrap();
        assert!(opened.blocked());
        assert_eq!(opened.dir, private);
        // The last level is judged too, not only the ones holding entries.
        std::fs::set_permissions(private.join("sub"), std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = open(&private.join("sub"), me()).unwrap_err();
        assert!(why.contains("is not private"), "{why}");
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
