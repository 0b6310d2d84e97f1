//! destDir's own steps, through descriptors: the trust walk of the
//! directories above it (audit F2), its parents made as Go's
//! `os.MkdirAll` makes them, and the new destDir created and verified.
//!
//! The reference (and remora before this) wiped and created destDir by
//! path, so every link above its last name was followed again at each
//! step. A destDir below a directory another user owns let that user aim
//! the wipe and the extraction: with `att/d` pointing at the victim's
//! home, `destDir = att/d/.ssh` replaced `~/.ssh` (inside the home, so the
//! home guard let it pass), and a link flipping between two targets
//! emptied the home. Now the parent of destDir is walked as the agent
//! socket's path and `-cli-dir` are ([`crate::base::trustpath::open`]):
//! every directory on the way, the parent itself included, is owned by
//! the user or root and writable by no one else unless sticky
//! (group write as [`crate::base::privgroup`] says), and every link is the
//! user's or root's. A destDir that fails is refused before the archive is
//! opened, with [`DestError::Untrusted`]'s text.
//!
//! From then on nothing is looked up by path: the missing parents are made
//! with `mkdirat` below the descriptor the walk returned and judged on
//! their own descriptors (a name another user won the race for is
//! refused), the wipe unlinks below the parent's descriptor
//! ([`DestParent::now`]), and destDir is made by an exclusive `mkdirat` in
//! it ([`create_dest`]). Go's texts are kept ([`DestError`]), spelled as the request did:
//! `mkdir <parent>: not a directory`, `mkdir <link>: file exists` for a
//! link that leads nowhere, `mkdir <level>: <error>`.

use super::removeall::{open_for_reading, remove_tree_errno, split_path, ParentNow};
use super::texts::{DestStep, Texts};
use super::{cstr, last_err, open_dir_at};
use crate::base::goerr::{go_quote, path_error};
use crate::base::gojson::go_lossy;
use crate::base::gopath;
use crate::base::trustpath::{self, Opened};
use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Why destDir could not be made ready: the reply's `error`, worded as
/// Go words its `os.MkdirAll` failures, or as remora's own refusals.
#[derive(Debug)]
pub(super) enum DestError {
    /// A directory or link on the way another user could change (audit
    /// F2): the style of the other destDir refusals (what it must not be,
    /// then destDir as `%q`), then the trust walk's `why`.
    Untrusted { dest: Vec<u8>, why: String },
    /// A parent could not be made or reached, or the new destDir could
    /// not be examined: `mkdir destDir: <op> <path>: <error>`.
    Mkdir {
        op: &'static str,
        path: String,
        source: io::Error,
    },
    /// A step on the cleaned destDir in its parent, worded for the build
    /// by [`Texts::dest`].
    Step {
        texts: Texts,
        step: DestStep,
        dest: Vec<u8>,
        source: io::Error,
    },
    /// What the exclusive `mkdirat` made is not a directory of ours (a
    /// name another user planted in the gap).
    NotOurs { dest: Vec<u8>, uid: u32 },
}

impl DestError {
    fn mkdir(op: &'static str, path: String, source: io::Error) -> Self {
        DestError::Mkdir { op, path, source }
    }
}

impl fmt::Display for DestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DestError::Untrusted { dest, why } => write!(
                f,
                "destDir must not lie below a directory or link another user can change: {} ({why})",
                go_quote(dest)
            ),
            DestError::Mkdir { op, path, source } => write!(f, "mkdir destDir: {}", path_error(op, path, source)),
            DestError::Step {
                texts,
                step,
                dest,
                source,
            } => {
                let (parent, base) = split_path(dest);
                f.write_str(&texts.dest(*step, &parent, &base, dest, source))
            }
            DestError::NotOurs { dest, uid } => write!(
                f,
                "mkdir destDir: {}: not a directory this daemon created (owner uid {uid})",
                go_lossy(dest)
            ),
        }
    }
}

impl std::error::Error for DestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DestError::Mkdir { source, .. } | DestError::Step { source, .. } => Some(source),
            DestError::Untrusted { .. } | DestError::NotOurs { .. } => None,
        }
    }
}

/// The parent of destDir, as the trust walk left it.
#[derive(Debug)]
pub(super) struct DestParent {
    opened: Opened,
    /// destDir as the request spelled it, for the refusal.
    dest: Vec<u8>,
    /// The cleaned parent's names, for Go's `mkdir` texts.
    names: Vec<Vec<u8>>,
}

/// Walks the parent of `dest` (cleaned) for the daemon's user; `Err` is
/// the [`DestError::Untrusted`] refusal.
pub(super) fn trust(dest: &[u8]) -> Result<DestParent, DestError> {
    let (parent, _) = split_path(&gopath::clean(dest));
    let me = crate::base::safedir::own_uid();
    let opened = trustpath::open(Path::new(OsStr::from_bytes(&parent)), me).map_err(|why| DestError::Untrusted {
        dest: dest.to_vec(),
        why,
    })?;
    let names = parent
        .split(|&b| b == b'/')
        .filter(|n| !n.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    Ok(DestParent {
        opened,
        dest: dest.to_vec(),
        names,
    })
}

impl DestParent {
    /// What the wipe finds where the parent should be.
    pub(super) fn now(&self) -> ParentNow<'_> {
        let rest = &self.opened.walked.rest;
        match (self.opened.blocked(), rest.is_empty()) {
            (true, true) => ParentNow::NotDir,
            (true, false) => ParentNow::BelowNotDir,
            (false, false) => ParentNow::Missing,
            (false, true) => ParentNow::Dir(&self.opened.fd),
        }
    }

    /// `/` and the first `n` names of the parent.
    fn spelled(&self, n: usize) -> String {
        let mut out = Vec::new();
        for name in &self.names[..n] {
            out.push(b'/');
            out.extend_from_slice(name);
        }
        if out.is_empty() {
            out.push(b'/');
        }
        go_lossy(&out)
    }

    /// Go's `os.MkdirAll(<parent>, 0700)`, below the walked descriptor:
    /// the parent's search descriptor.
    fn make(&self) -> Result<OwnedFd, DestError> {
        let walked = &self.opened.walked;
        let own_left = walked.rest.len() - walked.from_links;
        let reached = self.names.len().saturating_sub(own_left);
        let mkdir =
            |n: usize, code: i32| DestError::mkdir("mkdir", self.spelled(n), io::Error::from_raw_os_error(code));
        // The walk went through a link that leads nowhere (or to a file):
        // Go's `Mkdir` of the link fails, and `Lstat` says it is no
        // directory.
        if walked.from_links > 0 {
            return Err(mkdir(reached, libc::EEXIST));
        }
        if self.opened.blocked() {
            return Err(mkdir(reached, libc::ENOTDIR));
        }
        let mut fd = self
            .opened
            .fd
            .try_clone()
            .map_err(|e| DestError::mkdir("open", self.spelled(reached), e))?;
        let me = crate::base::safedir::own_uid();
        for n in reached..self.names.len() {
            let name = &self.names[n];
            let fail = |e: io::Error| DestError::mkdir("mkdir", self.spelled(n + 1), e);
            let c = cstr(name).map_err(fail)?;
            // SAFETY: valid dirfd and NUL-terminated name.
            if unsafe { libc::mkdirat(fd.as_raw_fd(), c.as_ptr(), 0o700) } != 0 {
                let e = last_err();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(fail(e));
                }
            }
            fd = match trustpath::open_search(Some(&fd), &c) {
                Ok(next) => next,
                // What is there is a link or a file: Go's `Lstat` after
                // its failed `Mkdir` finds no directory.
                Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                    return Err(fail(io::Error::from_raw_os_error(libc::EEXIST)));
                }
                Err(e) => return Err(fail(e)),
            };
            let at = self.spelled(n + 1);
            trustpath::judge_dir(Path::new(&at), &fd, me).map_err(|why| DestError::Untrusted {
                dest: self.dest.clone(),
                why,
            })?;
        }
        Ok(fd)
    }
}

/// Creates the cleaned, absolute `dest` (just wiped) as a fresh 0700
/// directory in `parent` and returns an fd of it, verified through that
/// fd.
///
/// Go's `MkdirAll` accepts a directory that already exists, so in a
/// directory other users can write (`/tmp`) a directory planted between
/// the wipe and the mkdir would be extracted into. Here the parents are
/// made as `MkdirAll` does ([`DestParent::make`]), but the last level is
/// created with an exclusive `mkdirat` on the parent's fd — a name that
/// reappeared meanwhile is `mkdir <dest>: file exists` — then opened
/// `O_NOFOLLOW|O_DIRECTORY` and `fstat`ed: it must be a directory owned by
/// the daemon's effective uid, else `<dest>: not a directory this daemon
/// created (owner uid <n>)`.
pub(super) fn create_dest(dest: &[u8], parent: &DestParent, texts: Texts) -> Result<OwnedFd, DestError> {
    let (_, base) = split_path(dest);
    let parent_search = parent.make()?;
    let step = |step: DestStep, source: io::Error| DestError::Step {
        texts,
        step,
        dest: dest.to_vec(),
        source,
    };
    let parent_fd = open_for_reading(&parent_search).map_err(|e| step(DestStep::OpenParent, e))?;
    if texts.relative {
        // 5fd08069 removes the old destDir below the parent it opened.
        match remove_tree_errno(&parent_fd, &base) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(step(DestStep::Clean, e)),
            _ => {}
        }
    }
    let c = cstr(&base).map_err(|e| step(DestStep::Make, e))?;
    // SAFETY: valid dirfd and NUL-terminated name.
    if unsafe { libc::mkdirat(parent_fd.as_raw_fd(), c.as_ptr(), 0o700) } != 0 {
        return Err(step(DestStep::Make, last_err()));
    }
    let fd = open_dir_at(Some(&parent_fd), &base).map_err(|e| step(DestStep::Open, e))?;
    if texts.relative {
        // 5fd08069 looks at `.` inside it: a destDir it cannot search
        // fails here, before any entry.
        // SAFETY: an all-zero `stat` is a valid value to be overwritten.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid dirfd, NUL-terminated name, sized out-parameter.
        if unsafe { libc::fstatat(fd.as_raw_fd(), c".".as_ptr(), &mut st, 0) } != 0 {
            return Err(step(DestStep::Examine, last_err()));
        }
    }
    // SAFETY: an all-zero `stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and a properly sized out-parameter.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(DestError::mkdir("stat", go_lossy(dest), last_err()));
    }
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_uid != me {
        return Err(DestError::NotOurs {
            dest: dest.to_vec(),
            uid: st.st_uid,
        });
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

    fn b(p: &Path) -> &[u8] {
        p.as_os_str().as_bytes()
    }

    /// What `make` answers for destDir `<dir>/<rel>/dest`.
    fn made(dir: &Path, rel: &str) -> Result<OwnedFd, DestError> {
        let dest = dir.join(rel).join("dest");
        trust(b(&dest))?.make()
    }

    #[test]
    fn parents_are_made_below_the_walked_descriptor_with_gos_texts() {
        let t = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(t.path()).unwrap();
        // Missing parents are made, 0700, ours.
        made(&top, "a/b").unwrap();
        let meta = std::fs::metadata(top.join("a/b")).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.mode() & 0o777, 0o700);
        // The parent is a file, or lies below one.
        std::fs::write(top.join("file"), "").unwrap();
        let file = top.join("file").display().to_string();
        let text = |s: &str| format!("mkdir destDir: {s}");
        assert_eq!(
            made(&top, "file").unwrap_err().to_string(),
            text(&format!("mkdir {file}: not a directory"))
        );
        assert_eq!(
            made(&top, "file/x").unwrap_err().to_string(),
            text(&format!("mkdir {file}: not a directory"))
        );
        // A link that leads nowhere, or into a file: Go's `Mkdir` of the
        // link meets it, and it is no directory.
        symlink(top.join("gone/deeper"), top.join("dangling")).unwrap();
        let dangling = top.join("dangling").display().to_string();
        assert_eq!(
            made(&top, "dangling/x").unwrap_err().to_string(),
            text(&format!("mkdir {dangling}: file exists"))
        );
        symlink(top.join("file/y"), top.join("through-file")).unwrap();
        let through = top.join("through-file").display().to_string();
        assert_eq!(
            made(&top, "through-file/x").unwrap_err().to_string(),
            text(&format!("mkdir {through}: file exists"))
        );
        // A link of ours to a directory is followed.
        symlink(top.join("a"), top.join("to-a")).unwrap();
        made(&top, "to-a/c").unwrap();
        assert!(top.join("a/c").is_dir());
    }

    #[test]
    fn a_way_another_user_can_change_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(t.path()).unwrap();
        let shared = top.join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let dest = shared.join("dest");
        let why = format!("{} is not private to this user (owner uid ", shared.display());
        let err = trust(b(&dest)).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "destDir must not lie below a directory or link another user can change: \"{}\" ({why}",
                dest.display()
            )),
            "{err}"
        );
        // Sticky, as /tmp: fine.
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(trust(b(&dest)).is_ok());
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            // A missing parent another user made first, in the sticky
            // place, after the walk: refused when it is reached.
            let parent = trust(b(&shared.join("theirs/dest"))).unwrap();
            std::fs::create_dir(shared.join("theirs")).unwrap();
            std::os::unix::fs::chown(shared.join("theirs"), Some(65534), Some(65534)).unwrap();
            let err = parent.make().unwrap_err().to_string();
            assert!(
                err.contains("theirs is not private to this user (owner uid 65534"),
                "{err}"
            );
        }
    }
}
