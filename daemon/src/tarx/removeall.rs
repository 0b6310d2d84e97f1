//! Go's `os.RemoveAll` and `removeAllFrom` (the `removeall_at.go` variant
//! Linux uses), ported for their error texts and semantics: nothing is
//! followed (a link is removed, not its target), a child's failure is
//! kept and reported only when its directory will not go.
//!
//! The walk is iterative, so a deep tree cannot overflow a thread stack
//! (Go's goroutine stacks grow; ours do not), and it holds at most
//! [`OPEN_LEVELS`] directory descriptors however deep the tree is: the
//! levels further up are closed and reopened through `..` of the level
//! below on the way back, and a reopened level must be the directory it
//! was (same device and inode), else the removal stops there with
//! `ESTALE` (the tree was moved while it was being removed). A tree deeper
//! than about 500 levels could not be removed at a descriptor limit of
//! 1024 before (an odd result of the second audit).
//!
//! The descent never enters a directory that is the daemon user's home or
//! a directory above one (by device and inode, [`Homes`]), nor one on
//! another mount than the tree's root: a bind mount of the home, or of its
//! parent, inside the tree was emptied before (audit F3). Such a directory
//! is left in place, and the removal fails naming it ([`HOME_HERE`],
//! [`OTHER_FILESYSTEM`]). The mount is told by its id where the kernel
//! gives one (Linux 5.8's `statx`, `sys::os::mount_id`), so a btrfs
//! subvolume (a device number of its own on the same mount) is entered and
//! a bind mount of a directory of the root's own filesystem is not; where
//! it does not (older kernels, macOS), by the device, which refuses a
//! subvolume and cannot tell such a bind mount.

use super::{cstr, last_err, open_dir_at};
use crate::base::goerr::path_error;
use crate::base::gojson::go_lossy;
use crate::base::homeguard::Homes;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Directory descriptors one removal keeps open at most.
pub(super) const OPEN_LEVELS: usize = 16;

/// Why a directory the descent met is left in place: it is the home or a
/// directory above it (a bind mount of it in the tree, audit F3).
pub(crate) const HOME_HERE: &str = "the home directory or a directory above it is mounted here; left in place";

/// Why a directory the descent met is left in place: another filesystem,
/// or another mount, is there (audit F3).
pub(crate) const OTHER_FILESYSTEM: &str = "another filesystem is mounted here; left in place";

/// Where the parent of the path [`remove_all`] removes is, as the caller
/// found it without looking it up by path again (`tarx::destdir`).
#[derive(Debug)]
pub(super) enum ParentNow<'a> {
    /// The parent is this directory (a descriptor that may only search).
    Dir(&'a OwnedFd),
    /// The parent does not exist, or a link on the way leads nowhere.
    Missing,
    /// The parent is not a directory (a file, or a link to one).
    NotDir,
    /// A level above the parent is not a directory.
    BelowNotDir,
}

/// A failure of [`remove_all`] or [`remove_tree_in`]: Go's `*PathError`
/// (`unlinkat <path>: directory not empty`), with the path as the caller
/// spelled it. The OS error is its cause (a refusal of the descent, audit
/// F3, is one of [`HOME_HERE`] or [`OTHER_FILESYSTEM`]).
#[derive(Debug)]
pub(crate) struct RemoveAllError {
    op: &'static str,
    path: Vec<u8>,
    source: io::Error,
}

impl RemoveAllError {
    fn new(op: &'static str, path: &[u8], source: io::Error) -> Self {
        RemoveAllError {
            op,
            path: path.to_vec(),
            source,
        }
    }

    /// A failure of [`remove_all_from`], whose path is relative to the
    /// directory at `parent_path`.
    fn below(parent_path: &[u8], (op, rel, source): RelError) -> Self {
        let mut path = parent_path.to_vec();
        path.push(b'/');
        path.extend_from_slice(&rel);
        RemoveAllError { op, path, source }
    }
}

impl fmt::Display for RemoveAllError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&path_error(self.op, &go_lossy(&self.path), &self.source))
    }
}

impl std::error::Error for RemoveAllError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Go's `os.RemoveAll` (the `removeall_at.go` variant Linux uses), ported
/// for its error texts (`unlinkat <path>: …`, `openfdat <path>: …`), of
/// the entry `base` of `parent`: `path` is the path as the request spelled
/// it, for the texts, and nothing is looked up by it (audit F2). It never
/// follows symlinks: a link is removed, not its target. A path of
/// `PATH_MAX` bytes or more, or one the kernel refuses for its length,
/// fails (`RemoveAll <path>: file name too long`) with nothing removed.
pub(super) fn remove_all(path: &[u8], base: &[u8], parent: ParentNow<'_>) -> Result<(), RemoveAllError> {
    remove_all_within(path, base, parent, Bounds::of_daemon_user(None))
}

/// [`remove_all`] with the descent kept within `bounds` (tests name their
/// own homes).
fn remove_all_within(path: &[u8], base: &[u8], parent: ParentNow<'_>, bounds: Bounds) -> Result<(), RemoveAllError> {
    if path.is_empty() {
        return Ok(());
    }
    if path == b"." || path.ends_with(b"/.") {
        let e = io::Error::from_raw_os_error(libc::EINVAL);
        return Err(RemoveAllError::new("RemoveAll", path, e));
    }
    // A path the kernel cannot take is not removed at all: Go splits it
    // and removes the name from the shorter parent, which may be a
    // different place than the path names (`/proc/self/root/./…/home`
    // past PATH_MAX emptied the home, audit F1).
    let too_long = || {
        let e = io::Error::from_raw_os_error(libc::ENAMETOOLONG);
        Err(RemoveAllError::new("RemoveAll", path, e))
    };
    if crate::base::homeguard::too_long_for_the_kernel(path) {
        return too_long();
    }
    let (parent_dir, _) = split_path(path);
    let dir = match parent {
        // Go's `Remove` meets ENOENT: nothing to do.
        ParentNow::Missing => return Ok(()),
        // Go's `Remove` meets ENOTDIR; its `Open` of the parent opens the
        // file, and `unlinkat` in it fails.
        ParentNow::NotDir => {
            let e = io::Error::from_raw_os_error(libc::ENOTDIR);
            return Err(RemoveAllError::below(&parent_dir, ("unlinkat", base.to_vec(), e)));
        }
        // Go's `Remove` meets ENOTDIR, and so does its `Open` of the parent.
        ParentNow::BelowNotDir => {
            let e = io::Error::from_raw_os_error(libc::ENOTDIR);
            return Err(RemoveAllError::new("open", &parent_dir, e));
        }
        ParentNow::Dir(dir) => dir,
    };
    // os.Remove first: a file, a link or an empty directory.
    let c = cstr(base).map_err(|e| RemoveAllError::new("remove", path, e))?;
    // SAFETY: valid dirfd and NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let unlink_errno = last_err().raw_os_error();
    // SAFETY: valid dirfd and NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) } == 0 {
        return Ok(());
    }
    let rmdir_errno = last_err().raw_os_error();
    // Go's Remove reports the rmdir error unless it is ENOTDIR.
    let errno = if rmdir_errno != Some(libc::ENOTDIR) {
        rmdir_errno
    } else {
        unlink_errno
    };
    if errno == Some(libc::ENOENT) {
        return Ok(());
    }
    if errno == Some(libc::ENAMETOOLONG) || unlink_errno == Some(libc::ENAMETOOLONG) {
        return too_long();
    }
    let parent = match open_for_reading(dir) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(RemoveAllError::new("open", &parent_dir, e)),
    };
    remove_all_from(&parent, base, bounds).map_err(|e| RemoveAllError::below(&parent_dir, e))
}

/// Removes the entry `name` of the open directory `parent` and everything
/// below it, as Go's `removeAllFrom` does, never following a link (a link
/// is removed, not its target). `parent_path` is only for the error text
/// (`unlinkat <parent_path>/<rel>: …`). Used by `plugins.prune` too.
pub(crate) fn remove_tree_in(parent: &OwnedFd, name: &[u8], parent_path: &[u8]) -> Result<(), RemoveAllError> {
    remove_all_from(parent, name, Bounds::of_daemon_user(None)).map_err(|e| RemoveAllError::below(parent_path, e))
}

/// [`remove_tree_in`] for callers whose texts name the entry themselves
/// (`RemoveAll <entry>: …`): the bare OS error of the first failure.
pub(crate) fn remove_tree_errno(parent: &OwnedFd, name: &[u8]) -> io::Result<()> {
    remove_all_from(parent, name, Bounds::of_daemon_user(None)).map_err(|(_, _, e)| e)
}

/// [`remove_tree_errno`] of an entry of the tree whose root is `root`
/// (emptying a worktree before it goes): the walk stays on `root`'s
/// filesystem (mount), so an entry that is itself a mount point is left
/// too.
pub(crate) fn remove_entry_errno(root: &OwnedFd, name: &[u8]) -> io::Result<()> {
    let fs = filesystem_of(root, identity(root)?.0);
    remove_all_from(root, name, Bounds::of_daemon_user(Some(fs))).map_err(|(_, _, e)| e)
}

/// `openat(dir, ".", O_RDONLY)`: a directory reached by a search-only
/// descriptor, opened for reading as Go's `os.Open` of it would be (one
/// that cannot be read fails here, with Go's error).
pub(super) fn open_for_reading(dir: &OwnedFd) -> io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    loop {
        // SAFETY: valid dirfd and NUL-terminated name.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), c".".as_ptr(), flags) };
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

/// Go's `splitPath` for RemoveAll.
pub(super) fn split_path(path: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut p = path;
    while p.len() > 1 && p[0] == b'/' && p[1] == b'/' {
        p = &p[1..];
    }
    let mut i = p.len().saturating_sub(1);
    while i > 0 && p[i] == b'/' {
        p = &p[..i];
        i -= 1;
    }
    let mut dirname: &[u8] = b".";
    let mut basename = p;
    let mut k = i;
    while k > 0 {
        k -= 1;
        if p[k] == b'/' {
            dirname = if k == 0 { &p[..1] } else { &p[..k] };
            basename = &p[k + 1..];
            break;
        }
    }
    (dirname.to_vec(), basename.to_vec())
}

/// A failure inside [`remove_all_from`]: Go's op, the path relative to
/// the top-level parent, the OS error.
type RelError = (&'static str, Vec<u8>, io::Error);

/// A directory being emptied by [`remove_all_from`].
struct Level {
    /// Closed (`None`) while the level is deep enough above the top.
    fd: Option<OwnedFd>,
    /// Device and inode, to know it again when it is reopened.
    id: (u64, u64),
    /// The descriptor is the parent's, duplicated (the level could not be
    /// opened): going back up reuses it as the parent's.
    stand_in: bool,
    /// Path relative to the top-level parent, for error texts.
    rel: Vec<u8>,
    names: std::vec::IntoIter<Vec<u8>>,
    /// Go's `recurseErr`: the first failure among the children.
    first_err: Option<RelError>,
}

/// The stack of levels, with the descriptors of all but the last
/// [`OPEN_LEVELS`] closed: the levels from `first_open` on are open.
struct Levels {
    stack: Vec<Level>,
    first_open: usize,
}

impl Levels {
    fn push(&mut self, level: Level) {
        self.stack.push(level);
        if self.stack.len() - self.first_open > OPEN_LEVELS {
            self.stack[self.first_open].fd = None;
            self.first_open += 1;
        }
    }

    /// Takes the top level off; the level below it (if any) is open
    /// again afterwards, reopened through the popped level's `..`.
    fn pop(&mut self) -> Option<Result<Level, RelError>> {
        let done = self.stack.pop()?;
        let Some(below_at) = self.stack.len().checked_sub(1) else {
            return Some(Ok(done));
        };
        let below = &mut self.stack[below_at];
        if below.fd.is_some() {
            return Some(Ok(done));
        }
        self.first_open = below_at;
        match reopen_parent(&done, below) {
            Ok(fd) => {
                below.fd = Some(fd);
                Some(Ok(done))
            }
            Err(e) => Some(Err(("openfdat", below.rel.clone(), e))),
        }
    }
}

/// The descriptor of `below`, the directory `done` was opened from.
fn reopen_parent(done: &Level, below: &Level) -> io::Result<OwnedFd> {
    let fd = done
        .fd
        .as_ref()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
    let parent = if done.stand_in {
        fd.try_clone()?
    } else {
        open_dir_at(Some(fd), b"..")?
    };
    if identity(&parent)? != below.id {
        return Err(io::Error::from_raw_os_error(libc::ESTALE));
    }
    Ok(parent)
}

/// Device and inode of an open directory.
fn identity(fd: &OwnedFd) -> io::Result<(u64, u64)> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `st` is a valid out-pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(last_err());
    }
    // `dev_t`/`ino_t` differ in width across targets.
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    Ok((st.st_dev as u64, st.st_ino as u64))
}

/// Go's `removeAllFrom(parent, base)` (see the module doc). The error's
/// path is relative to `parent`. Semantics per entry: unlink; on
/// `EISDIR`/`EPERM`/`EACCES` empty it as a directory and rmdir it; a
/// child's failure is kept and reported only if the rmdir fails.
fn remove_all_from(parent: &OwnedFd, base: &[u8], mut bounds: Bounds) -> Result<(), RelError> {
    let mut levels = Levels {
        stack: Vec::new(),
        first_open: 0,
    };
    match descend(parent, base, base.to_vec(), &mut bounds)? {
        Some(level) => levels.push(level),
        None => return Ok(()),
    }
    loop {
        let Some(top) = levels.stack.last_mut() else {
            return Ok(());
        };
        if let Some(name) = top.names.next() {
            let mut rel = top.rel.clone();
            rel.push(b'/');
            rel.extend_from_slice(&name);
            let Some(fd) = top.fd.as_ref() else {
                return Err(("openfdat", rel, io::Error::from_raw_os_error(libc::EBADF)));
            };
            match descend(fd, &name, rel, &mut bounds) {
                Ok(Some(level)) => levels.push(level),
                Ok(None) => {}
                Err(e) => {
                    top.first_err.get_or_insert(e);
                }
            }
            continue;
        }
        // All children handled: remove the directory itself.
        let done = match levels.pop() {
            None => return Ok(()),
            Some(Ok(done)) => done,
            // The way back up is lost: nothing above can be finished.
            Some(Err(e)) => return Err(e),
        };
        let holder = match levels.stack.last() {
            None => parent,
            Some(level) => match level.fd.as_ref() {
                Some(fd) => fd,
                None => return Err(("openfdat", level.rel.clone(), io::Error::from_raw_os_error(libc::EBADF))),
            },
        };
        let leaf = done.rel.rsplit(|&b| b == b'/').next().unwrap_or(&done.rel);
        let result = match cstr(leaf) {
            Err(e) => Err(done.first_err.unwrap_or(("unlinkat", done.rel.clone(), e))),
            // SAFETY: valid dirfd and NUL-terminated name.
            Ok(c) => match unsafe { libc::unlinkat(holder.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) } {
                0 => Ok(()),
                _ => {
                    let e = last_err();
                    if e.raw_os_error() == Some(libc::ENOENT) {
                        Ok(())
                    } else {
                        Err(done.first_err.unwrap_or(("unlinkat", done.rel, e)))
                    }
                }
            },
        };
        match (result, levels.stack.last_mut()) {
            (Err(e), Some(up)) => {
                up.first_err.get_or_insert(e);
            }
            (Err(e), None) => return Err(e),
            (Ok(()), _) => {}
        }
    }
}

/// Which filesystem a directory is on, as far as the descent can tell
/// (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Filesystem {
    /// The id of the mount it lies on.
    Mount(u64),
    /// Its device, where the kernel gives no mount id.
    Device(u64),
}

/// The [`Filesystem`] of the open directory `fd`, whose device is `dev`.
fn filesystem_of(fd: &OwnedFd, dev: u64) -> Filesystem {
    match crate::sys::os::mount_id(fd.as_raw_fd()) {
        Some(id) => Filesystem::Mount(id),
        None => Filesystem::Device(dev),
    }
}

/// Where a descent may go (audit F3, see the module doc).
struct Bounds {
    homes: Homes,
    /// The filesystem of the tree's root: the first directory entered,
    /// unless the caller named it.
    root: Option<Filesystem>,
}

impl Bounds {
    /// The daemon user's homes, and the tree's root on `root` (`None`:
    /// wherever its first directory is).
    fn of_daemon_user(root: Option<Filesystem>) -> Bounds {
        Bounds {
            homes: Homes::of_daemon_user(),
            root,
        }
    }

    /// Why the directory `id` on `fs` must not be entered, if it must not.
    /// A mount id and a device never compare equal: a walk where the
    /// kernel stopped giving mount ids cannot tell, so it does not enter.
    fn refuse(&mut self, id: (u64, u64), fs: Filesystem) -> Option<&'static str> {
        if self.homes.holds_identity(id) {
            return Some(HOME_HERE);
        }
        match self.root {
            None => {
                self.root = Some(fs);
                None
            }
            Some(root) if root != fs => Some(OTHER_FILESYSTEM),
            Some(_) => None,
        }
    }
}

/// One step of `removeAllFrom`: removes `name` in `dir` if it is not a
/// directory (`Ok(None)`), or opens it for emptying (`Ok(Some)`), unless
/// `bounds` refuse it.
fn descend(dir: &OwnedFd, name: &[u8], rel: Vec<u8>, bounds: &mut Bounds) -> Result<Option<Level>, RelError> {
    let c = match cstr(name) {
        Ok(c) => c,
        Err(e) => return Err(("unlinkat", rel, e)),
    };
    // SAFETY: valid dirfd and NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } == 0 {
        return Ok(None);
    }
    let unlink_err = last_err();
    match unlink_err.raw_os_error() {
        Some(libc::ENOENT) => return Ok(None),
        Some(libc::EISDIR) | Some(libc::EPERM) | Some(libc::EACCES) => {}
        _ => return Err(("unlinkat", rel, unlink_err)),
    }
    let (fd, first_err, names, stand_in) = match open_dir_at(Some(dir), name) {
        Ok(fd) => match crate::base::safedir::read_names(&fd) {
            Ok(names) => (fd, None, names, false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(("readdirnames", rel, e)),
        },
        Err(e) => match e.raw_os_error() {
            Some(libc::ENOENT) => return Ok(None),
            Some(libc::ENOTDIR) | Some(libc::ELOOP) => return Err(("unlinkat", rel, unlink_err)),
            // Go still tries the rmdir, reporting this error if it fails;
            // an empty level does exactly that. It needs an fd to sit on
            // the stack: the parent's, duplicated, with no names.
            _ => {
                // SAFETY: `dir` is a valid descriptor.
                let dup = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
                if dup < 0 {
                    return Err(("openfdat", rel, e));
                }
                // SAFETY: `dup` is a fresh descriptor we own.
                let fd = unsafe { OwnedFd::from_raw_fd(dup) };
                (fd, Some(("openfdat", rel.clone(), e)), Vec::new(), true)
            }
        },
    };
    let id = identity(&fd).map_err(|e| ("openfdat", rel.clone(), e))?;
    if !stand_in {
        if let Some(why) = bounds.refuse(id, filesystem_of(&fd, id.0)) {
            return Err(("unlinkat", rel, io::Error::other(why)));
        }
    }
    Ok(Some(Level {
        fd: Some(fd),
        id,
        stand_in,
        rel,
        names: names.into_iter(),
        first_err,
    }))
}

// Linux only: `/proc`, a private mount namespace.
#[cfg(test)]
#[cfg(target_os = "linux")]
mod props;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn a_directory_on_the_roots_mount_is_entered_whatever_its_device() {
        let mut bounds = Bounds {
            homes: Homes::default(),
            root: Some(Filesystem::Mount(7)),
        };
        // A btrfs subvolume: a device number of its own, the same mount
        // (by device it was refused).
        assert_eq!(bounds.refuse((1, 10), Filesystem::Mount(7)), None);
        assert_eq!(bounds.refuse((2, 10), Filesystem::Mount(7)), None);
        // Another mount of the same device (a bind mount): refused.
        assert_eq!(bounds.refuse((1, 11), Filesystem::Mount(8)), Some(OTHER_FILESYSTEM));
        // Where the kernel gives no mount id, the device decides.
        bounds.root = Some(Filesystem::Device(1));
        assert_eq!(bounds.refuse((1, 12), Filesystem::Device(1)), None);
        assert_eq!(bounds.refuse((2, 12), Filesystem::Device(2)), Some(OTHER_FILESYSTEM));
        // A walk where the mount id came and went cannot tell: refused.
        assert_eq!(bounds.refuse((1, 13), Filesystem::Mount(1)), Some(OTHER_FILESYSTEM));
        // The first directory entered sets the root.
        bounds.root = None;
        assert_eq!(bounds.refuse((3, 1), Filesystem::Mount(9)), None);
        assert_eq!(bounds.root, Some(Filesystem::Mount(9)));
    }

    #[test]
    fn remove_all_is_iterative_on_deep_trees() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path().join("deep");
        std::fs::create_dir(&top).unwrap();
        let mut fd = open_dir_at(None, top.as_os_str().as_bytes()).unwrap();
        // Deeper than PATH_MAX allows by path: only reachable via openat.
        for _ in 0..3000 {
            // SAFETY: valid dirfd and NUL-terminated name.
            assert_eq!(unsafe { libc::mkdirat(fd.as_raw_fd(), c"d".as_ptr(), 0o700) }, 0);
            fd = open_dir_at(Some(&fd), b"d").unwrap();
        }
        drop(fd);
        std::fs::write(top.parent().unwrap().join("keep"), b"").unwrap();
        let path = top.as_os_str().as_bytes().to_vec();
        let parent = open_dir_at(None, tmp.path().as_os_str().as_bytes()).unwrap();
        // A small stack: a recursive port would overflow here.
        let result = std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || remove_all(&path, b"deep", ParentNow::Dir(&parent)).map_err(|e| e.to_string()))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(result, Ok(()));
        assert!(!top.exists());
        assert!(tmp.path().join("keep").exists());
        let parent = open_dir_at(None, tmp.path().as_os_str().as_bytes()).unwrap();
        let path = top.as_os_str().as_bytes();
        assert_eq!(
            remove_all(path, b"deep", ParentNow::Dir(&parent)).map_err(|e| e.to_string()),
            Ok(()),
            "missing is fine"
        );
        assert_eq!(
            remove_all(path, b"deep", ParentNow::Missing).map_err(|e| e.to_string()),
            Ok(())
        );
    }

    #[test]
    fn a_parent_that_is_not_a_directory_fails_with_gos_texts() {
        assert_eq!(
            remove_all(b"/x/file/dest", b"dest", ParentNow::NotDir).map_err(|e| e.to_string()),
            Err("unlinkat /x/file/dest: not a directory".to_string())
        );
        assert_eq!(
            remove_all(b"/x/file/sub/dest", b"dest", ParentNow::BelowNotDir).map_err(|e| e.to_string()),
            Err("open /x/file/sub: not a directory".to_string())
        );
        // The OS error is the cause.
        let err = remove_all(b"/x/file/dest", b"dest", ParentNow::NotDir).unwrap_err();
        let cause = std::error::Error::source(&err).and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(cause.and_then(io::Error::raw_os_error), Some(libc::ENOTDIR));
    }

    /// Descriptors this process has open now.
    fn open_descriptors() -> usize {
        std::fs::read_dir("/dev/fd").map_or(0, |d| d.count())
    }

    #[test]
    fn a_deep_tree_is_removed_with_a_bounded_number_of_descriptors() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path().join("deep");
        std::fs::create_dir(&top).unwrap();
        let mut fd = open_dir_at(None, top.as_os_str().as_bytes()).unwrap();
        for level in 0..600 {
            // SAFETY: valid dirfd and NUL-terminated name.
            assert_eq!(unsafe { libc::mkdirat(fd.as_raw_fd(), c"d".as_ptr(), 0o700) }, 0);
            // A file and a second directory on the way back up.
            std::fs::write(format!("/dev/fd/{}/f{level}", fd.as_raw_fd()), b"x").unwrap();
            // SAFETY: as above.
            assert_eq!(unsafe { libc::mkdirat(fd.as_raw_fd(), c"e".as_ptr(), 0o700) }, 0);
            fd = open_dir_at(Some(&fd), b"d").unwrap();
        }
        drop(fd);
        let parent = open_dir_at(None, tmp.path().as_os_str().as_bytes()).unwrap();
        let before = open_descriptors();
        // Count the descriptors from a thread that watches the removal.
        let peak = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = {
            let (peak, stop) = (peak.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    peak.fetch_max(open_descriptors(), std::sync::atomic::Ordering::Relaxed);
                }
            })
        };
        assert_eq!(
            remove_all_from(&parent, b"deep", Bounds::of_daemon_user(None)).map_err(|(_, _, e)| e.to_string()),
            Ok(())
        );
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        watcher.join().unwrap();
        assert!(!top.exists());
        let grew = peak.load(std::sync::atomic::Ordering::Relaxed).saturating_sub(before);
        // Other tests run beside this one: a loose bound, far below 600.
        assert!(grew < OPEN_LEVELS + 64, "{grew} more descriptors at the peak");
    }

    #[test]
    fn a_level_reopened_as_another_directory_stops_the_removal() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        let parent = open_dir_at(None, tmp.path().as_os_str().as_bytes()).unwrap();
        let mut bounds = Bounds {
            homes: Homes::default(),
            root: None,
        };
        let a = descend(&parent, b"a", b"a".to_vec(), &mut bounds)
            .map_err(|e| e.2)
            .unwrap()
            .unwrap();
        let b = descend(a.fd.as_ref().unwrap(), b"b", b"a/b".to_vec(), &mut bounds)
            .map_err(|e| e.2)
            .unwrap()
            .unwrap();
        assert_eq!(reopen_parent(&b, &a).map(|fd| identity(&fd).unwrap()).ok(), Some(a.id));
        // What `..` leads to is no longer the level it was.
        let elsewhere = Level {
            id: (0, 0),
            fd: None,
            ..a
        };
        let e = reopen_parent(&b, &elsewhere).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESTALE));
    }

    #[test]
    fn the_descent_enters_no_home_and_no_other_filesystem() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("tree/home/keep")).unwrap();
        std::fs::create_dir_all(tmp.path().join("tree/plain")).unwrap();
        let parent = open_dir_at(None, tmp.path().as_os_str().as_bytes()).unwrap();
        let tree = open_dir_at(Some(&parent), b"tree").unwrap();
        let mut bounds = Bounds {
            homes: Homes::of(&[tmp.path().join("tree/home")]),
            root: None,
        };
        // The tree itself (above the home here) is refused by the guard
        // before any removal; the descent is asked about what it enters.
        let (op, rel, e) = descend(&tree, b"home", b"tree/home".to_vec(), &mut bounds)
            .map(|_| ())
            .unwrap_err();
        assert_eq!((op, rel.as_slice()), ("unlinkat", &b"tree/home"[..]));
        assert_eq!(e.to_string(), HOME_HERE);
        assert!(tmp.path().join("tree/home/keep").exists());
        // The first directory entered sets the filesystem; another
        // device is refused.
        let plain = descend(&tree, b"plain", b"tree/plain".to_vec(), &mut bounds).map_err(|e| e.2);
        assert!(plain.unwrap().is_some());
        bounds.root = Some(Filesystem::Device(u64::MAX));
        std::fs::create_dir(tmp.path().join("tree/other")).unwrap();
        let (_, _, e) = descend(&tree, b"other", b"tree/other".to_vec(), &mut bounds)
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e.to_string(), OTHER_FILESYSTEM);
        assert!(tmp.path().join("tree/other").exists());
    }

    #[test]
    fn a_path_too_long_for_the_kernel_is_never_removed_through_a_shorter_parent() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::write(victim.join("keep"), b"x").unwrap();
        // `<tmp>/././…/victim`, PATH_MAX bytes or more: Go's split would
        // open `<tmp>/././…` (short enough) and remove `victim` in it.
        let mut path = tmp.path().as_os_str().as_bytes().to_vec();
        while path.len() + b"/victim".len() < crate::base::homeguard::PATH_MAX {
            path.extend_from_slice(b"/.");
        }
        path.extend_from_slice(b"/victim");
        let top = open_dir_at(None, tmp.path().as_os_str().as_bytes()).unwrap();
        let err = remove_all(&path, b"victim", ParentNow::Dir(&top))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("RemoveAll "), "{err}");
        assert!(err.ends_with(": file name too long"), "{err}");
        assert!(victim.join("keep").exists());
        // A name too long for the kernel, below a short parent: the same.
        let mut long_name = victim.as_os_str().as_bytes().to_vec();
        long_name.push(b'/');
        long_name.extend(std::iter::repeat_n(b'n', 300));
        let below = open_dir_at(None, victim.as_os_str().as_bytes()).unwrap();
        let err = remove_all(&long_name, &[b'n'; 300], ParentNow::Dir(&below))
            .unwrap_err()
            .to_string();
        assert!(err.ends_with(": file name too long"), "{err}");
        assert!(victim.join("keep").exists());
    }

    #[test]
    fn split_path_matches_go() {
        let s = |p: &str| {
            let (d, b) = split_path(p.as_bytes());
            (String::from_utf8(d).unwrap(), String::from_utf8(b).unwrap())
        };
        assert_eq!(s("/a/b"), ("/a".into(), "b".into()));
        assert_eq!(s("/a"), ("/".into(), "a".into()));
        assert_eq!(s("//a//"), ("/".into(), "a".into()));
        assert_eq!(s("a"), (".".into(), "a".into()));
        assert_eq!(s("/a/b/"), ("/a".into(), "b".into()));
    }
}
