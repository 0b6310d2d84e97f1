//! Where session worktrees may be created and removed (reference build
//! `7d193f89`): strictly inside the repository, named by an absolute path
//! without `..`, through no symbolic link, and (on create) in a directory
//! that does not exist yet. The checks run in the reference's order and
//! each refusal happens before anything on disk changes.
//!
//! The directories above a new worktree are then made by walking from an
//! open descriptor of the repository with `O_NOFOLLOW`, so a link planted
//! between the check and the walk cannot carry the create elsewhere.

use super::paths::{clean, has_dotdot, names_below};
use crate::base::goerr::path_error;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// Which method a text is for (the only word the two share texts on).
#[derive(Clone, Copy)]
pub(super) enum Verb {
    Create,
    Remove,
}

impl Verb {
    pub(super) fn word(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Remove => "remove",
        }
    }
}

/// A refused request: the `error` text and the create `errorCode`
/// (`git.worktree_remove` answers without one).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    pub text: String,
    pub code: &'static str,
}

/// The text of a `baseRepo` inside another session's worktree tree.
pub(super) const NESTED_BASE_REPO: &str = "baseRepo is inside a managed worktrees directory (beneath .claude/worktrees, or beneath a directory holding a .claude-managed-worktrees marker), or could not be validated as a trust root";

/// The marker file that tags a directory as holding managed worktrees.
const MANAGED_MARKER: &str = ".claude-managed-worktrees";

/// Whether `repo` (links resolved) lies beneath a `.claude/worktrees`
/// directory or beneath a directory that holds the managed-worktrees
/// marker file: a session worktree is never a base for another one.
pub(super) fn under_managed_worktrees(repo: &str) -> bool {
    let start = if repo.is_empty() {
        Path::new(".")
    } else {
        Path::new(repo)
    };
    let Ok(start) = fs::canonicalize(start) else {
        return false;
    };
    let mut here = start.as_path();
    loop {
        if fs::metadata(here.join(MANAGED_MARKER)).is_ok_and(|m| !m.is_dir()) {
            return true;
        }
        let Some(parent) = here.parent() else {
            return false;
        };
        if here.file_name() == Some("worktrees".as_ref()) && parent.file_name() == Some(".claude".as_ref()) {
            return true;
        }
        here = parent;
    }
}

/// The location rules both methods share, in order: absolute, no `..`,
/// strictly inside `repo` (as sent), no symbolic link between `repo` and
/// the leaf. `worktree` is non-empty.
pub(super) fn location_refusal(verb: Verb, repo: &str, worktree: &str) -> Option<Refusal> {
    let v = verb.word();
    let unsafe_path = |text: String| {
        Some(Refusal {
            text,
            code: "unsafe_path",
        })
    };
    if let Some(r) = folder_spelling_refusal(verb, worktree) {
        return Some(r);
    }
    let Some(names) = names_below(worktree, repo) else {
        return unsafe_path(format!(
            "refusing to {v} worktree: {worktree} is not inside the repository {repo}; session worktrees are only created and removed under <repository>/.claude/worktrees"
        ));
    };
    let mut walked = clean(repo);
    for name in &names[..names.len() - 1] {
        walked = clean(&format!("{walked}/{name}"));
        if fs::symlink_metadata(&walked).is_ok_and(|m| m.file_type().is_symlink()) {
            return Some(Refusal {
                text: format!(
                    "refusing to {v} worktree: {walked} is a symbolic link; a symlinked .claude or .claude/worktrees inside the repository is not supported for SSH sessions, because a repository can plant such a link and a planted one cannot reliably be told apart from your own. Replace it with a real directory (or delete it and it will be recreated)"
                ),
                code: "symlinked_component",
            });
        }
    }
    None
}

/// The first two location rules: absolute, no `..` component.
pub(super) fn folder_spelling_refusal(verb: Verb, worktree: &str) -> Option<Refusal> {
    let v = verb.word();
    let text = if !worktree.starts_with('/') {
        format!(
            "refusing to {v} worktree: {worktree} is a relative path; choose the session folder by its absolute path, without \"..\""
        )
    } else if has_dotdot(worktree) {
        format!(
            "refusing to {v} worktree: {worktree} contains a \"..\" component; choose the session folder by its absolute path, without \"..\""
        )
    } else {
        return None;
    };
    Some(Refusal {
        text,
        code: "unsafe_path",
    })
}

/// Create only: the leaf must not exist in any form (a link, dangling or
/// not, counts). The text names the leaf with its parent's links resolved.
pub(super) fn exists_refusal(worktree: &str) -> Option<Refusal> {
    fs::symlink_metadata(worktree).ok()?;
    Some(Refusal {
        text: format!(
            "refusing to create worktree: {} already exists, and a new worktree is only ever created in a fresh directory",
            resolved_leaf(worktree)
        ),
        code: "unsafe_path",
    })
}

/// Remove only: an existing leaf must be a directory, not a link to one.
/// The text names the leaf with its parent's links resolved.
pub(super) fn leaf_kind_refusal(worktree: &str) -> Option<String> {
    let meta = fs::symlink_metadata(worktree).ok()?;
    let what = if meta.file_type().is_symlink() {
        "is a symbolic link, not a worktree directory"
    } else if !meta.is_dir() {
        "is not a directory"
    } else {
        return None;
    };
    Some(format!(
        "refusing to remove worktree: {} {what}",
        resolved_leaf(worktree)
    ))
}

/// `worktree` cleaned, with the links of its parent resolved and its last
/// name kept (a leaf that is itself a link is named, not followed).
pub(super) fn resolved_leaf(worktree: &str) -> String {
    let cleaned = clean(worktree);
    let path = Path::new(&cleaned);
    match (path.parent().map(fs::canonicalize), path.file_name()) {
        (Some(Ok(parent)), Some(name)) => parent.join(name).to_string_lossy().into_owned(),
        _ => cleaned,
    }
}

/// The new worktree's directory, made by [`make_leaf`]; held so a failed
/// add can take it back.
pub(super) struct Leaf {
    parent: OwnedFd,
    name: CString,
    /// Device and inode of the directory the create made.
    identity: Option<(u64, u64)>,
}

impl Leaf {
    /// Whether the directory the create made is still at its name (not
    /// removed, not replaced by another one).
    pub(super) fn is_intact(&self) -> bool {
        let now = stat_at(&self.parent, &self.name);
        now.is_some() && now == self.identity
    }

    /// The leaf, opened without following a link.
    pub(super) fn open(&self) -> io::Result<OwnedFd> {
        let name = self
            .name
            .to_str()
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        open_dir(self.parent.as_raw_fd(), name, false)
    }

    /// Removes the leaf if it is an empty directory (`rmdir` refuses
    /// anything else), relative to the parent the create made it in.
    pub(super) fn remove_if_empty(&self) {
        let _ = self.remove_empty();
    }

    /// [`Leaf::remove_if_empty`], with the reason it failed.
    pub(super) fn remove_empty(&self) -> io::Result<()> {
        // Never the home directory, even an empty one ([`crate::base::homeguard`]).
        let name = self.name.to_bytes();
        crate::base::homeguard::check_entry(&self.parent, name)?;
        // SAFETY: valid directory descriptor and NUL-terminated name.
        if unsafe { libc::unlinkat(self.parent.as_raw_fd(), self.name.as_ptr(), libc::AT_REMOVEDIR) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The leaf's own name (its last path component).
    pub(super) fn base_name(&self) -> String {
        String::from_utf8_lossy(self.name.to_bytes()).into_owned()
    }
}

/// Makes the directories from `repo` down to the worktree (`names` from
/// [`names_below`]): missing parents 0755, the leaf 0777, both less the
/// umask. Every step below `repo` is `openat(O_NOFOLLOW)` from the step
/// before. The error is Go's `mkdir <path>: <reason>`.
pub(super) fn make_leaf(repo: &str, names: &[String]) -> Result<Leaf, String> {
    let (leaf, parents) = names.split_last().ok_or_else(|| "mkdir: no leaf".to_string())?;
    let mut shown = clean(repo);
    let open_err = |path: &str, e: &io::Error| path_error("open", path, e);
    let mut dir = open_dir(libc::AT_FDCWD, &shown, true).map_err(|e| open_err(&shown, &e))?;
    for name in parents {
        shown = clean(&format!("{shown}/{name}"));
        dir = match open_dir(dir.as_raw_fd(), name, false) {
            Ok(next) => next,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                make_dir(&dir, name, 0o755).map_err(|e| path_error("mkdir", &shown, &e))?;
                open_dir(dir.as_raw_fd(), name, false).map_err(|e| path_error("mkdir", &shown, &not_dir(e)))?
            }
            Err(e) => return Err(path_error("mkdir", &shown, &not_dir(e))),
        };
    }
    shown = clean(&format!("{shown}/{leaf}"));
    make_leaf_in(dir, leaf, &shown)
}

/// Makes the leaf `name` (0777 less the umask) in the open directory
/// `dir`; `shown` names it in the error.
pub(super) fn make_leaf_in(dir: OwnedFd, name: &str, shown: &str) -> Result<Leaf, String> {
    let name = make_dir(&dir, name, 0o777).map_err(|e| path_error("mkdir", shown, &e))?;
    let identity = stat_at(&dir, &name);
    Ok(Leaf {
        parent: dir,
        name,
        identity,
    })
}

/// Device and inode of the directory `name` in `dir` (a link is not
/// followed, and is not a directory).
fn stat_at(dir: &OwnedFd, name: &CString) -> Option<(u64, u64)> {
    // SAFETY: all-zero bytes are a valid `stat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid directory descriptor, a C string and a writable stat.
    let rc = unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    (rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFDIR).then_some((st.st_dev as u64, st.st_ino as u64))
}

pub(super) fn cstring(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `openat(dir, name, O_DIRECTORY)`, not following a last-component link
/// unless `follow`.
pub(super) fn open_dir(dir: libc::c_int, name: &str, follow: bool) -> io::Result<OwnedFd> {
    let c = cstring(name)?;
    let mut flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    loop {
        // SAFETY: a valid directory descriptor (or AT_FDCWD) and a C string.
        let fd = unsafe { libc::openat(dir, c.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: a fresh descriptor owned from here on.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn make_dir(dir: &OwnedFd, name: &str, mode: libc::mode_t) -> io::Result<CString> {
    let c = cstring(name)?;
    // SAFETY: a valid directory descriptor and a C string.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(c)
}

/// A link met with `O_NOFOLLOW` reads as the non-directory it is.
fn not_dir(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) => io::Error::from_raw_os_error(libc::ENOTDIR),
        _ => e,
    }
}
