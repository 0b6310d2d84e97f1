//! The registration tests of `git.worktree_create` around the add (build
//! 89cb6289, [`crate::protocol::build::Switch::WorktreeRegistration`];
//! Linux and macOS), as `docs/record/git-worktree-create.md` gives them.
//!
//! Before the add: the stale-entry step ([`super::worktree_stale`]) and
//! `git rev-parse --absolute-git-dir` in `baseRepo`. Right after a
//! successful add, and before the deadline test, the leaf's `.git` file
//! (`gitdir: <path>`) is read and, in this order:
//! 1. the folder holding `<path>` must be named `worktrees`;
//! 2. `<common git dir>/worktrees` (of the git directory answered before
//!    the add) must exist, else "was not populated", and hold an entry
//!    named as `<path>`'s last name;
//! 3. that entry's `commondir`, a relative value joined to the entry as
//!    spelled and cleaned, must be the common git directory;
//! 4. its `gitdir` record must read as a file;
//!
//! then the entry must not be a stale entry the step before the add left
//! in place, and the record, a relative one taken from the entry, must be
//! `<worktreePath>/.git` with `worktreePath`'s links resolved, byte for
//! byte. Tests 1 to 4 failing other than "was not populated" share one
//! text. A refusal is `unsafe_path`, runs no checkout and rolls nothing
//! back (the leaf keeps its `.git` file, the entry and the branch stay).
//! The entry the tests accepted is the one a later rollback deletes
//! ([`Accepted`]), with no second read of the `.git` file or the record.
//! In every text the leaf is named with its parent's links resolved
//! ([`containment::resolved_leaf`]).
//!
//! Without an answer from `rev-parse`, or without a `.git` file in the leaf
//! that reads as `gitdir: …`, no test runs (claustrum's choice; neither is
//! measured). Not done: the `rev-parse --show-toplevel` pair the reference
//! runs before the record refusal (no effect on the frame).

use super::containment::{self, Leaf};
use super::gitcli::{self, QUERY_TIMEOUT};
use super::paths::clean;
use super::worktree_stale::{self, read_record, record_path, KeptStale};
use super::WorktreeResult;
use crate::base::homeguard;
use crate::base::safedir;
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Which test refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failed {
    /// Test 1, 3 or 4, or test 2 with no entry of the name.
    NotOurs,
    /// Test 2: no registrations folder.
    NotPopulated,
    /// The entry is a stale entry the step before the add kept.
    Stale,
    /// The record names another worktree.
    OtherRecord,
}

impl Failed {
    fn text(self) -> &'static str {
        match self {
            Failed::NotOurs => "carries a .git file that does not name this repository's own worktree admin directory",
            Failed::NotPopulated => "was not populated by git worktree add",
            Failed::Stale => "carries a .git file naming an admin entry other than the one just created for it",
            Failed::OtherRecord => {
                "carries a .git file naming an admin directory whose own record is of a different worktree"
            }
        }
    }
}

/// What the create learnt before the add.
pub(super) struct BeforeAdd {
    /// `rev-parse --absolute-git-dir` in `baseRepo` (`None`: no test runs).
    git_dir: Option<PathBuf>,
    kept: KeptStale,
}

impl BeforeAdd {
    /// Runs the stale-entry step for `worktree` (its parents made) and asks
    /// git for `repo`'s git directory.
    pub(super) async fn take(repo: &str, worktree: &str) -> BeforeAdd {
        let kept = worktree_stale::drop_stale(repo, worktree);
        let git_dir = gitcli::run(repo, &["rev-parse", "--absolute-git-dir"], true, QUERY_TIMEOUT)
            .await
            .ok_text()
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from);
        BeforeAdd { git_dir, kept }
    }

    /// After a successful add of `worktree` in `leaf`: the entry the tests
    /// accepted (`None` when no test ran), or the refusal of the first test
    /// that fails (`unsafe_path`, [`refused`]).
    pub(super) fn check(&self, worktree: &str, leaf: &Leaf) -> Result<Option<Accepted>, String> {
        let (Some(git_dir), Some(named)) = (self.git_dir.as_deref(), gitdir_of_leaf(leaf)) else {
            return Ok(None);
        };
        self.judge(worktree, git_dir, &named).map(Some).map_err(|failed| {
            format!(
                "refusing to create worktree: {} {}",
                containment::resolved_leaf(worktree),
                failed.text()
            )
        })
    }

    fn judge(&self, worktree: &str, git_dir: &Path, named: &str) -> Result<Accepted, Failed> {
        // Test 1.
        let named = clean(named);
        let named = Path::new(&named);
        let (Some(name), Some(holder)) = (named.file_name(), named.parent().and_then(Path::file_name)) else {
            return Err(Failed::NotOurs);
        };
        if holder != "worktrees" {
            return Err(Failed::NotOurs);
        }
        // Test 2.
        let common = common_dir(git_dir);
        let registrations = common.join("worktrees");
        let folder = match worktree_stale::open_dir_path(&registrations) {
            Ok(folder) => folder,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Err(Failed::NotPopulated),
            Err(_) => return Err(Failed::NotOurs),
        };
        let entry = safedir::open_dir_in(&folder, name.as_bytes()).map_err(|_| Failed::NotOurs)?;
        // Test 3: joined to the entry as spelled, so a `worktrees` link
        // (row D-3) still leads back.
        let spelled = registrations.join(name);
        let leads_back = read_record(&entry, b"commondir")
            .and_then(|value| record_path(&value, &spelled))
            .is_some_and(|led| same_dir(Path::new(&led), &common));
        if !leads_back {
            return Err(Failed::NotOurs);
        }
        // Test 4.
        let record = read_record(&entry, b"gitdir").ok_or(Failed::NotOurs)?;
        let identity = fd_identity(&entry).ok_or(Failed::NotOurs)?;
        if self.kept.holds(identity) {
            return Err(Failed::Stale);
        }
        let resolved_entry = fs::canonicalize(&registrations).unwrap_or(registrations).join(name);
        if !names_worktree(&record, &resolved_entry, worktree) {
            return Err(Failed::OtherRecord);
        }
        Ok(Accepted {
            folder,
            name: name.as_bytes().to_vec(),
            _entry: entry,
            identity,
        })
    }
}

/// The registration the tests accepted, held open until the create
/// answers (so no new directory can take its identity): the one a
/// rollback deletes.
pub(super) struct Accepted {
    /// The registrations folder, opened by the tests.
    folder: OwnedFd,
    name: Vec<u8>,
    _entry: OwnedFd,
    identity: (u64, u64),
}

impl Accepted {
    /// The folder and the entry's name for the rollback's delete, when the
    /// directory at the name is still the one the tests accepted and is
    /// not (and does not hold) the home directory; `None`: nothing is
    /// deleted, no text is added, the branch step runs (claustrum's
    /// identity and home guards, D24 and D2).
    pub(super) fn registration(&self) -> Option<(OwnedFd, String)> {
        if worktree_stale::identity_in(&self.folder, &self.name) != Some(self.identity) {
            return None;
        }
        if homeguard::check_entry(&self.folder, &self.name).is_err() {
            return None;
        }
        Some((
            self.folder.try_clone().ok()?,
            String::from_utf8_lossy(&self.name).into_owned(),
        ))
    }
}

/// The frame of a refusal [`BeforeAdd::check`] gave.
pub(super) fn refused(text: String) -> WorktreeResult {
    WorktreeResult::failed(text, "unsafe_path")
}

/// Whether a `gitdir` record names `<worktree>/.git`, `worktree` with its
/// links resolved: byte for byte after git's trim of the line's end, a
/// relative record taken from `entry` and cleaned.
fn names_worktree(record: &[u8], entry: &Path, worktree: &str) -> bool {
    let real = fs::canonicalize(worktree)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| worktree_stale::resolve_existing(worktree));
    let want = format!("{real}/.git");
    let record = record.trim_ascii_end();
    if record.starts_with(b"/") {
        return record == want.as_bytes();
    }
    record_path(record, entry).is_some_and(|named| named == want)
}

/// The path after `gitdir:` in the leaf's `.git` file (a regular file,
/// opened without following a link), trimmed.
fn gitdir_of_leaf(leaf: &Leaf) -> Option<String> {
    let bytes = read_record(&leaf.open().ok()?, b".git")?;
    let rest = bytes.strip_prefix(b"gitdir:")?.trim_ascii();
    (!rest.is_empty()).then(|| String::from_utf8_lossy(rest).into_owned())
}

/// The common git directory of `git_dir`: the one its `commondir` names
/// (relative to it), else itself. The trust check has already judged
/// that file.
fn common_dir(git_dir: &Path) -> PathBuf {
    let Ok(dir) = worktree_stale::open_dir_path(git_dir) else {
        return git_dir.to_path_buf();
    };
    read_record(&dir, b"commondir")
        .and_then(|value| record_path(&value, git_dir))
        .map_or_else(|| git_dir.to_path_buf(), PathBuf::from)
}

/// Whether two paths lead to the same directory (links followed).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.is_dir() && (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// Device and inode of an open directory.
// `dev_t` is `i32` on macOS, `u64` on Linux.
#[allow(clippy::unnecessary_cast)]
fn fd_identity(dir: &OwnedFd) -> Option<(u64, u64)> {
    // SAFETY: all-zero bytes are a valid `stat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and a writable stat.
    let rc = unsafe { libc::fstat(dir.as_raw_fd(), &mut st) };
    (rc == 0).then_some((st.st_dev as u64, st.st_ino as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_test_compares_bytes_and_takes_a_relative_record_from_the_entry() {
        let dir = std::env::temp_dir().join(format!("remora-registered-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("r/.claude/worktrees/w1")).unwrap();
        let real = fs::canonicalize(&dir).unwrap();
        let leaf = real.join("r/.claude/worktrees/w1");
        let leaf = leaf.to_str().unwrap();
        let entry = real.join("r/.git/worktrees/w1");
        assert!(names_worktree(format!("{leaf}/.git\n").as_bytes(), &entry, leaf));
        assert!(names_worktree(b"../../../.claude/worktrees/w1/.git\n", &entry, leaf));
        assert!(!names_worktree(format!("{leaf}/.git/\n").as_bytes(), &entry, leaf));
        assert!(!names_worktree(format!("{leaf}//.git").as_bytes(), &entry, leaf));
        assert!(!names_worktree(b"", &entry, leaf));
        assert!(!names_worktree(b"/nonexistent/.git\n", &entry, leaf));
        fs::remove_dir_all(&dir).unwrap();
    }
}
