//! Opening a directory path that other local users cannot have tampered
//! with, one level at a time, as a directory fd.
//!
//! A path such as `/var/tmp/remora-1000/replay` is only as private as its
//! least private level: another user who owns, or can write to, any level
//! can swap what lies below it. So the walk starts at `/`, opens each
//! component relative to the fd of the level above with `O_NOFOLLOW |
//! O_DIRECTORY` (a planted link or file fails instead of being followed),
//! and judges each level by its owner and mode before going on:
//!
//! * every level must be owned by root or by us;
//! * a level others can write must carry the sticky bit (`/tmp`), so they
//!   cannot rename or remove what we own inside it; a group-writable level
//!   is accepted only when its group is our effective group and private
//!   to us ([`crate::base::privgroup`], the user-private-group
//!   convention; a primary group shared with other users is not);
//! * the final level must be ours. One this walk created is set `0700`
//!   with `fchmod`. The mode of one that was already there is never
//!   changed (audit F4: `replay-dir = ~/` narrowed the home to `0700`, and
//!   a root daemon given a `1777` directory took its sticky bit away): it
//!   must pass the rule for the levels above, and is used as it is when
//!   nobody else can write it (a `0755` home; what is kept inside is
//!   `0700` anyway). One others can write (sticky, as `/tmp`) is a shared
//!   place: the walk goes on into a subdirectory of our own in it,
//!   `remora-<uid>`, created `0700` or, when it exists, ours and not
//!   writable by others ([`UnsafeDir::TooWide`] otherwise, not
//!   narrowed). [`PrivateDir::path`] says which directory was used.
//!
//! Missing levels are created `0700` with `mkdirat` and then opened and
//! judged like any other, so a name another user wins a race for is
//! refused, not used. Callers then work relative to the returned fd
//! (`openat`, `unlinkat`, …) and never go back to the path.

use std::ffi::{CString, OsStr};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// An open directory, the handle every function here hands out and takes.
pub(crate) type Dir = std::os::fd::OwnedFd;

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
    /// write it, and it was not made by this walk, so its mode is not
    /// ours to change.
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
                write!(
                    f,
                    "{}: writable by other users (mode {mode:04o}, no sticky bit)",
                    path.display()
                )
            }
            UnsafeDir::NotADirectory(p) => write!(f, "{}: a symlink or not a directory", p.display()),
            UnsafeDir::TooWide { path, mode } => write!(
                f,
                "{}: writable by other users (mode {mode:04o}) and not made by this daemon, so left as it is; make it 0700 or remove it",
                path.display()
            ),
            UnsafeDir::Io { op, path, error } => write!(f, "{op} {}: {error}", path.display()),
        }
    }
}

impl std::error::Error for UnsafeDir {}

/// Who we are, for the ownership checks.
#[derive(Debug, Clone, Copy)]
struct Identity {
    uid: u32,
    gid: u32,
}

impl Identity {
    fn current() -> Identity {
        // SAFETY: geteuid/getegid cannot fail and touch no memory.
        unsafe {
            Identity {
                uid: libc::geteuid(),
                gid: libc::getegid(),
            }
        }
    }
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open for the call and `st` is a valid out-pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn open_dir_at(parent: Option<&OwnedFd>, name: &CString) -> io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
    let dirfd = parent.map_or(libc::AT_FDCWD, |p| p.as_raw_fd());
    // SAFETY: `name` is NUL-terminated and `dirfd` is open or AT_FDCWD.
    let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Judges one intermediate level.
fn check_level(st: &libc::stat, path: &Path, me: Identity) -> Result<(), UnsafeDir> {
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(UnsafeDir::NotADirectory(path.to_path_buf()));
    }
    if st.st_uid != 0 && st.st_uid != me.uid {
        return Err(UnsafeDir::ForeignOwner {
            path: path.to_path_buf(),
            uid: st.st_uid,
        });
    }
    let mode = mode_bits(st);
    if others_can_write(st, me) && mode & 0o1000 == 0 {
        return Err(UnsafeDir::WritableByOthers {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// The permission bits of `st`, sticky bit included.
// `st_mode` is a u16 on macOS and a u32 on Linux.
#[allow(clippy::unnecessary_cast)]
fn mode_bits(st: &libc::stat) -> u32 {
    (st.st_mode & 0o7777) as u32
}

/// Whether users other than us may add, rename or remove entries in the
/// directory (sticky bit aside): write by others, or by a group that is
/// not our own private one ([`crate::base::privgroup`]).
fn others_can_write(st: &libc::stat, me: Identity) -> bool {
    let mode = mode_bits(st);
    let others_write = mode & 0o002 != 0;
    let group_write = mode & 0o020 != 0 && !(st.st_gid == me.gid && crate::base::privgroup::is_private(me.gid, me.uid));
    others_write || group_write
}

/// A private directory of ours, open.
#[derive(Debug)]
pub(crate) struct PrivateDir {
    pub fd: Dir,
    /// The directory `fd` is: the path asked for, or (when others can
    /// write that one) our own subdirectory in it.
    pub path: PathBuf,
}

/// The subdirectory of our own used inside a configured directory others
/// can write: `remora-<uid>`, so that users sharing one directory (`/tmp`)
/// each get theirs.
fn own_subdir_name(uid: u32) -> String {
    format!("remora-{uid}")
}

/// Opens `path` as a private directory of ours, creating missing levels
/// `0700`. See the module doc for what is refused, and for the
/// subdirectory used when others can write `path` itself.
pub(crate) fn open_private_dir(path: &Path) -> Result<PrivateDir, UnsafeDir> {
    open_private_dir_as(path, Identity::current())
}

/// Opens an existing directory `path` of ours without creating or
/// changing anything: every level is judged as in [`open_private_dir`],
/// and the last one must be owned by us and pass the same rule as the
/// levels above it (others cannot write to it, unless it is sticky), but
/// it may stay readable by others. For files placed beside something the
/// operator chose (the daemon log beside the socket).
pub(crate) fn open_own_dir(path: &Path) -> Result<Dir, UnsafeDir> {
    walk(path, Identity::current(), false)
}

/// Opens an existing directory `path` that nobody but us and root can
/// change, without creating or changing anything: every level, the last
/// one included, is judged by the rule for the levels above it (owned by
/// us or root; others cannot write to it unless it is sticky). For
/// removing an entry the caller named in a place that may be root's own
/// (`-stop` clearing a socket in `/tmp`); as root, a directory another
/// user owns or can write is refused.
pub(crate) fn open_trusted_dir(path: &Path) -> Result<Dir, UnsafeDir> {
    walk_to(path, Identity::current(), Last::Trusted)
}

fn open_private_dir_as(path: &Path, me: Identity) -> Result<PrivateDir, UnsafeDir> {
    let fd = walk(path, me, true)?;
    let st = fstat(&fd).map_err(|error| UnsafeDir::Io {
        op: "fstat",
        path: path.to_path_buf(),
        error,
    })?;
    if !others_can_write(&st, me) {
        return Ok(PrivateDir {
            fd,
            path: path.to_path_buf(),
        });
    }
    // A shared directory (the walk let it through: sticky, as /tmp) that
    // we did not make: not ours to narrow, and not a place for our
    // entries among everyone else's. A subdirectory of our own in it.
    let name = own_subdir_name(me.uid);
    let sub = path.join(&name);
    let io_error = |op: &'static str, error: io::Error| UnsafeDir::Io {
        op,
        path: sub.clone(),
        error,
    };
    let cname = CString::new(name.as_bytes()).map_err(|e| io_error("open", e.into()))?;
    // SAFETY: `fd` is an open directory and `cname` is NUL-terminated.
    let created = unsafe { libc::mkdirat(fd.as_raw_fd(), cname.as_ptr(), 0o700) } == 0;
    if !created {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(io_error("mkdir", e));
        }
    }
    let sub_fd = open_dir_at(Some(&fd), &cname).map_err(|e| refine(e, &sub, |op, _, e| io_error(op, e)))?;
    let st = fstat(&sub_fd).map_err(|e| io_error("fstat", e))?;
    if st.st_uid != me.uid {
        return Err(UnsafeDir::ForeignOwner {
            path: sub,
            uid: st.st_uid,
        });
    }
    if created {
        // SAFETY: `sub_fd` is an open directory fd of ours, just made.
        if unsafe { libc::fchmod(sub_fd.as_raw_fd(), 0o700) } != 0 {
            return Err(io_error("chmod", io::Error::last_os_error()));
        }
    } else if others_can_write(&st, me) {
        let mode = mode_bits(&st);
        return Err(UnsafeDir::TooWide { path: sub, mode });
    }
    Ok(PrivateDir { fd: sub_fd, path: sub })
}

/// What the last level of a walk must be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    /// Ours; made 0700 when the walk created it, else judged like the
    /// levels above when it is wider than 0700 ([`open_private_dir_as`]
    /// goes into a subdirectory of its own when others can write it).
    Private,
    /// Ours, judged like the levels above.
    Own,
    /// Judged like the levels above (ours or root's).
    Trusted,
}

/// The walk behind [`open_private_dir`] and [`open_own_dir`]; `private`
/// creates missing levels and makes the last one `0700` when it created
/// it.
fn walk(path: &Path, me: Identity, private: bool) -> Result<Dir, UnsafeDir> {
    walk_to(path, me, if private { Last::Private } else { Last::Own })
}

fn walk_to(path: &Path, me: Identity, last_rule: Last) -> Result<Dir, UnsafeDir> {
    let private = last_rule == Last::Private;
    if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
        return Err(UnsafeDir::NotPlain(path.to_path_buf()));
    }
    let io_error = |op: &'static str, at: &Path, error: io::Error| UnsafeDir::Io {
        op,
        path: at.to_path_buf(),
        error,
    };
    let root = CString::new("/").map_err(|e| io_error("open", Path::new("/"), e.into()))?;
    let mut current = open_dir_at(None, &root).map_err(|e| io_error("open", Path::new("/"), e))?;
    let mut walked = PathBuf::from("/");
    let st = fstat(&current).map_err(|e| io_error("fstat", &walked, e))?;
    check_level(&st, &walked, me)?;
    let names: Vec<&OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    for (i, name) in names.iter().enumerate() {
        walked.push(name);
        let last = i + 1 == names.len();
        let cname = CString::new(name.as_bytes()).map_err(|e| io_error("open", &walked, e.into()))?;
        let mut created = false;
        let next = match open_dir_at(Some(&current), &cname) {
            Ok(fd) => fd,
            Err(e) if private && e.raw_os_error() == Some(libc::ENOENT) => {
                // SAFETY: `current` is an open directory fd and `cname` is
                // NUL-terminated.
                if unsafe { libc::mkdirat(current.as_raw_fd(), cname.as_ptr(), 0o700) } == 0 {
                    created = true;
                } else {
                    let e = io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::EEXIST) {
                        return Err(io_error("mkdir", &walked, e));
                    }
                }
                open_dir_at(Some(&current), &cname).map_err(|e| refine(e, &walked, io_error))?
            }
            Err(e) => return Err(refine(e, &walked, io_error)),
        };
        let st = fstat(&next).map_err(|e| io_error("fstat", &walked, e))?;
        if last && last_rule == Last::Trusted {
            check_level(&st, &walked, me)?;
        } else if last {
            if st.st_uid != me.uid {
                return Err(UnsafeDir::ForeignOwner {
                    path: walked,
                    uid: st.st_uid,
                });
            }
            if created {
                // SAFETY: `next` is an open directory fd of ours, just made.
                if unsafe { libc::fchmod(next.as_raw_fd(), 0o700) } != 0 {
                    return Err(io_error("chmod", &walked, io::Error::last_os_error()));
                }
            } else {
                // Never narrowed: a directory we did not make keeps its
                // mode (audit F4), and must pass the rule above.
                check_level(&st, &walked, me)?;
            }
        } else {
            check_level(&st, &walked, me)?;
        }
        current = next;
    }
    Ok(current)
}

/// `O_NOFOLLOW|O_DIRECTORY` on a link or a file fails with `ELOOP` or
/// `ENOTDIR`; report those as what they are.
fn refine(error: io::Error, path: &Path, io_error: impl Fn(&'static str, &Path, io::Error) -> UnsafeDir) -> UnsafeDir {
    match error.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::ENOTDIR) => UnsafeDir::NotADirectory(path.to_path_buf()),
        _ => io_error("open", path, error),
    }
}

// ---- Working inside a verified directory ---------------------------------
//
// Once a directory is open, everything below it is reached through its fd:
// `openat` with `O_NOFOLLOW`, `unlinkat`, `fdopendir` on a duplicate. A path
// is never resolved again, so nothing swapped in above can redirect us.

fn c_name(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Opens `name` in `dir` without following a link and without blocking on
/// a FIFO or device (`O_NONBLOCK`); the caller checks the kind with
/// [`is_regular`] before reading. `flags` adds the access mode and
/// `O_CREAT`/`O_EXCL`; `mode` is used when creating.
pub(crate) fn open_file_at(dir: &Dir, name: &[u8], flags: libc::c_int, mode: u32) -> io::Result<std::fs::File> {
    let cname = c_name(name)?;
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: `dir` is open and `cname` is NUL-terminated; the mode is
    // passed as the variadic argument `openat` reads with O_CREAT.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), cname.as_ptr(), flags, mode) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and belongs to nobody else.
    let file = unsafe { std::fs::File::from_raw_fd(fd) };
    // Reads and writes of regular files never block anyway; drop the flag
    // so a later `read` behaves as usual.
    // SAFETY: F_GETFL/F_SETFL on a descriptor we own.
    unsafe {
        let fl = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(file.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}

/// Whether an open file is a regular file owned by this user.
pub(crate) fn is_own_regular(file: &std::fs::File) -> bool {
    use std::os::unix::fs::MetadataExt;
    file.metadata()
        .is_ok_and(|m| m.file_type().is_file() && m.uid() == Identity::current().uid)
}

/// Opens the directory `name` inside `dir` without following a link.
pub(crate) fn open_dir_in(dir: &Dir, name: &[u8]) -> io::Result<Dir> {
    open_dir_at(Some(dir), &c_name(name)?)
}

/// Creates the directory `name` inside `dir` with `mode`; fails if it
/// exists (`EEXIST`), so what is opened next is what we made.
// `mode_t` is a u16 on macOS and a u32 on Linux.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn make_dir_in(dir: &Dir, name: &[u8], mode: u32) -> io::Result<()> {
    let cname = c_name(name)?;
    // SAFETY: `dir` is open and `cname` is NUL-terminated.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), cname.as_ptr(), mode as libc::mode_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The owner's uid of an open directory.
pub(crate) fn owner_of(dir: &Dir) -> io::Result<u32> {
    fstat(dir).map(|st| st.st_uid)
}

/// This process's effective uid.
pub(crate) fn own_uid() -> u32 {
    Identity::current().uid
}

/// Renames the entry `from` of `dir` to `to` in the same directory (a
/// link is renamed itself, never followed; an entry already at `to` is
/// replaced). Neither may be or contain the user's home
/// ([`crate::base::homeguard`]).
pub(crate) fn rename_in(dir: &Dir, from: &[u8], to: &[u8]) -> io::Result<()> {
    crate::base::homeguard::check_entry(dir, from)?;
    crate::base::homeguard::check_entry(dir, to)?;
    let (from, to) = (c_name(from)?, c_name(to)?);
    // SAFETY: `dir` is open and both names are NUL-terminated.
    if unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Removes the entry `name` of `dir` (a file, a link or an empty
/// directory), never following it.
pub(crate) fn unlink_in(dir: &Dir, name: &[u8]) -> io::Result<()> {
    let cname = c_name(name)?;
    // SAFETY: `dir` is open and `cname` is NUL-terminated.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), cname.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if matches!(e.raw_os_error(), Some(libc::EISDIR) | Some(libc::EPERM)) {
        // An (empty) directory: never the user's home.
        crate::base::homeguard::check_entry(dir, name)?;
        // SAFETY: as above.
        if unsafe { libc::unlinkat(dir.as_raw_fd(), cname.as_ptr(), libc::AT_REMOVEDIR) } == 0 {
            return Ok(());
        }
        return Err(io::Error::last_os_error());
    }
    Err(e)
}

/// Removes the directory `name` of `parent` and the files in it (one
/// level: replay directories hold only files). A subdirectory that is not
/// empty makes it fail, with nothing followed. A directory that is or
/// holds the user's home is refused before anything goes
/// ([`crate::base::homeguard`]).
pub(crate) fn remove_flat_dir_in(parent: &Dir, name: &[u8]) -> io::Result<()> {
    crate::base::homeguard::check_entry(parent, name)?;
    let dir = open_dir_in(parent, name)?;
    for entry in read_names(&dir)? {
        unlink_in(&dir, &entry)?;
    }
    drop(dir);
    let cname = c_name(name)?;
    // SAFETY: `parent` is open and `cname` is NUL-terminated.
    if unsafe { libc::unlinkat(parent.as_raw_fd(), cname.as_ptr(), libc::AT_REMOVEDIR) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The names in a directory, without `.` and `..`.
pub(crate) fn read_names(dir: &Dir) -> io::Result<Vec<Vec<u8>>> {
    // fdopendir takes ownership of its descriptor: give it a duplicate.
    // SAFETY: `dir` is a valid descriptor.
    let dup = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` is a fresh descriptor; on success the DIR owns it.
    let stream = unsafe { libc::fdopendir(dup) };
    if stream.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so we still own `dup`.
        unsafe { libc::close(dup) };
        return Err(e);
    }
    let mut names = Vec::new();
    let result = loop {
        // readdir signals errors only through errno; clear it first.
        crate::sys::os::clear_errno();
        // SAFETY: `stream` is a valid DIR*.
        let entry = unsafe { crate::sys::os::next_dir_name(stream) };
        if entry.is_null() {
            let e = io::Error::last_os_error();
            break match e.raw_os_error() {
                Some(0) | None => Ok(()),
                _ => Err(e),
            };
        }
        // SAFETY: d_name is NUL-terminated within the entry.
        let name = unsafe { std::ffi::CStr::from_ptr(entry) }.to_bytes();
        if name != b"." && name != b".." {
            names.push(name.to_vec());
        }
    };
    // SAFETY: `stream` is valid and closed exactly once.
    unsafe { libc::closedir(stream) };
    result.map(|()| names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn me() -> Identity {
        Identity::current()
    }

    fn tmp() -> tempfile::TempDir {
        // The temp dir's parents (/tmp: sticky, root) pass the checks.
        tempfile::tempdir().expect("tempdir")
    }

    #[test]
    fn creates_missing_levels_private_and_reopens_them() {
        let t = tmp();
        let path = t.path().join("a/b/replay");
        let dir = open_private_dir(&path).expect("private dir");
        for level in ["a", "a/b", "a/b/replay"] {
            let m = std::fs::metadata(t.path().join(level)).unwrap();
            assert_eq!(m.mode() & 0o777, 0o700, "{level}");
        }
        assert!(fstat(&dir.fd).is_ok());
        assert_eq!(dir.path, path);
        open_private_dir(&path).expect("the same dir again");
    }

    #[test]
    fn refuses_links_files_and_dotdot() {
        let t = tmp();
        std::fs::create_dir(t.path().join("real")).unwrap();
        std::os::unix::fs::symlink(t.path().join("real"), t.path().join("link")).unwrap();
        std::fs::write(t.path().join("file"), b"x").unwrap();
        for bad in ["link", "link/below", "file", "file/below"] {
            let got = open_private_dir(&t.path().join(bad));
            assert!(matches!(got, Err(UnsafeDir::NotADirectory(_))), "{bad}: {got:?}");
        }
        assert!(
            !t.path().join("real/below").exists(),
            "nothing created through the link"
        );
        assert!(matches!(
            open_private_dir(&t.path().join("real/../real")),
            Err(UnsafeDir::NotPlain(_))
        ));
        assert!(matches!(
            open_private_dir(Path::new("rel/dir")),
            Err(UnsafeDir::NotPlain(_))
        ));
    }

    #[test]
    fn refuses_levels_others_can_write_without_the_sticky_bit() {
        let t = tmp();
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let got = open_private_dir(&open.join("replay"));
        assert!(matches!(got, Err(UnsafeDir::WritableByOthers { .. })), "{got:?}");
        assert!(!open.join("replay").exists());
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        open_private_dir(&open.join("replay")).expect("sticky like /tmp is fine");
    }

    #[test]
    fn a_foreign_owner_is_refused_at_any_level() {
        let t = tmp();
        let level = t.path().join("theirs");
        std::fs::create_dir(&level).unwrap();
        // Pretend to be another user: our own directory is then foreign.
        let stranger = Identity {
            uid: me().uid.wrapping_add(4242),
            gid: me().gid,
        };
        let got = open_private_dir_as(&level.join("x"), stranger);
        assert!(matches!(got, Err(UnsafeDir::ForeignOwner { .. })), "{got:?}");
        let got = open_private_dir_as(&level, stranger);
        assert!(matches!(got, Err(UnsafeDir::ForeignOwner { .. })), "{got:?}");
    }

    #[test]
    fn a_trusted_dir_may_be_roots_but_never_anothers_or_shared() {
        let t = tmp();
        open_trusted_dir(t.path()).expect("our own");
        open_trusted_dir(Path::new("/tmp")).expect("root's, sticky");
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let got = open_trusted_dir(&open);
        assert!(matches!(got, Err(UnsafeDir::WritableByOthers { .. })), "{got:?}");
        std::os::unix::fs::symlink(t.path(), t.path().join("link")).unwrap();
        let got = open_trusted_dir(&t.path().join("link"));
        assert!(matches!(got, Err(UnsafeDir::NotADirectory(_))), "{got:?}");
        let theirs = t.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        let got = if me().uid == 0 {
            std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
            open_trusted_dir(&theirs)
        } else {
            // Judged as another user, our directory is a stranger's.
            let stranger = Identity {
                uid: me().uid.wrapping_add(4242),
                gid: me().gid,
            };
            walk_to(&theirs, stranger, Last::Trusted)
        };
        assert!(matches!(got, Err(UnsafeDir::ForeignOwner { .. })), "{got:?}");
        assert!(!t.path().join("missing").exists());
        assert!(
            open_trusted_dir(&t.path().join("missing")).is_err(),
            "nothing is created"
        );
    }

    #[test]
    fn a_wide_final_level_keeps_its_mode() {
        let t = tmp();
        let dir = t.path().join("wide");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let got = open_private_dir(&dir).expect("ours");
        assert_eq!(
            std::fs::metadata(&dir).unwrap().mode() & 0o7777,
            0o755,
            "left as it was"
        );
        assert_eq!(got.path, dir, "nobody else can write it: used as it is");
        assert_eq!(fstat(&got.fd).unwrap().st_ino, std::fs::metadata(&dir).unwrap().ino());
    }

    #[test]
    fn a_shared_sticky_final_level_keeps_its_bits_and_a_subdirectory_of_our_own_is_used() {
        let t = tmp();
        let shared = t.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let got = open_private_dir(&shared).expect("sticky, as /tmp");
        assert_eq!(std::fs::metadata(&shared).unwrap().mode() & 0o7777, 0o1777);
        let sub = shared.join(own_subdir_name(me().uid));
        assert_eq!(got.path, sub);
        assert_eq!(std::fs::metadata(&sub).unwrap().mode() & 0o7777, 0o700);
        assert_eq!(fstat(&got.fd).unwrap().st_ino, std::fs::metadata(&sub).unwrap().ino());
        // The second time the subdirectory is there already.
        assert_eq!(open_private_dir(&shared).expect("again").path, sub);
        // Readable by others, ours: used as it is.
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(open_private_dir(&shared).expect("0755").path, sub);
        assert_eq!(std::fs::metadata(&sub).unwrap().mode() & 0o7777, 0o755);
        // Writable by others since: refused, not narrowed.
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o777)).unwrap();
        let got = open_private_dir(&shared);
        assert!(matches!(got, Err(UnsafeDir::TooWide { mode: 0o777, .. })), "{got:?}");
        assert_eq!(std::fs::metadata(&sub).unwrap().mode() & 0o7777, 0o777);
    }

    #[test]
    fn a_wide_final_level_others_can_write_is_refused_unchanged() {
        let t = tmp();
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let got = open_private_dir(&open);
        assert!(matches!(got, Err(UnsafeDir::WritableByOthers { .. })), "{got:?}");
        assert_eq!(std::fs::metadata(&open).unwrap().mode() & 0o7777, 0o777);
        assert!(!open.join(own_subdir_name(me().uid)).exists());
    }
}
