//! Undoing a `git.worktree_create` whose add succeeded but whose checkout
//! failed or whose `timeoutMs` fired (as
//! `docs/record/git-worktree-create.md` measures it), in four steps:
//! 1. delete the leaf's entries one at a time in directory-read order,
//!    stopping at the first that will not go (then nothing else is undone);
//! 2. delete the worktree's registration under `<common dir>/worktrees/`,
//!    then the branch the call made ([`branch_step`]); a registration that
//!    will not go keeps the branch;
//! 3. remove the now-empty leaf;
//! 4. say what stayed.
//!
//! The answer keeps its `errorCode`; what could not be undone is appended
//! as `; and the undo could not finish for <worktreePath>: …`. A leaf that
//! is or contains the daemon user's home ([`crate::base::homeguard`], remora's
//! own guard) is not undone at all: `…: worktreePath must not be or
//! contain the home directory: "<p>"; the worktree directory, its
//! registration, and the branch all remain`.
//!
//! Every delete is relative to a directory descriptor and follows no
//! link: the leaf is the directory the create made (its identity is
//! checked first), and the registration is deleted only when the leaf's
//! `.git` file names an entry directly inside this repository's own
//! `worktrees` directory whose `gitdir` record names the leaf back; on a
//! build with the registration tests, the entry they accepted
//! ([`Accepted`]) instead, if it is still that directory.

use super::branch_step;
use super::containment::{open_dir, Leaf};
use super::worktree_registered::Accepted;
use crate::base::goerr::io_text;
use crate::base::homeguard;
use crate::base::safedir;
use crate::methods::git::gitcli::{self, QUERY_TIMEOUT};
use crate::tarx;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The most of a `.git` file read (git writes one short line).
const GIT_FILE_CAP: u64 = 4096;

/// What a rollback works on.
pub(super) struct Undo<'a> {
    pub repo: &'a str,
    /// `worktreePath` as sent: the texts name it so.
    pub worktree: &'a str,
    pub branch: &'a str,
    /// Whether the call made `branch` (not an attached existing branch).
    pub created: bool,
    pub leaf: &'a Leaf,
    /// The build checks the branch before deleting it
    /// ([`branch_step`]'s guard).
    pub guard: bool,
    /// The registration the tests after the add accepted (build 89cb6289):
    /// step 2 deletes that entry, and reads nothing again.
    pub accepted: Option<&'a Accepted>,
}

/// What a rollback could not undo.
#[derive(Default)]
pub(super) struct Undone {
    /// The text to append to the error (empty: all undone).
    pub text: String,
    /// The guard kept the branch the call made, whose commits only it
    /// reaches (the reply's `branchKept`).
    pub branch_kept: bool,
}

impl Undo<'_> {
    /// Runs the four steps; what stayed.
    pub(super) async fn run(&self) -> Undone {
        if let Some(refused) = self.home_refusal() {
            return Undone {
                text: format!("; and the undo could not finish for {}: {refused}", self.worktree),
                branch_kept: false,
            };
        }
        let registration = match self.accepted {
            Some(accepted) => accepted.registration(),
            None => self.registration().await,
        };
        let mut branch_kept = false;
        let parts = match self.steps(registration, &mut branch_kept).await {
            Ok(()) => return Undone::default(),
            Err(parts) => parts,
        };
        Undone {
            text: format!(
                "; and the undo could not finish for {}: {}",
                self.worktree,
                parts.join("; ")
            ),
            branch_kept,
        }
    }

    async fn steps(&self, registration: Option<(OwnedFd, String)>, branch_kept: &mut bool) -> Result<(), Vec<String>> {
        let intact = self.leaf.is_intact();
        if intact {
            if let Err((entry, e)) = self.empty_leaf() {
                let what = if self.created {
                    "the worktree directory, its registration, and the branch all remain"
                } else {
                    "the worktree directory and its registration both remain"
                };
                return Err(vec![format!(
                    "{what}; remove them by hand before retrying (RemoveAll {entry}: {})",
                    io_text(&e)
                )]);
            }
        }
        let mut parts = Vec::new();
        let mut registration_stays = None;
        if let Some((dir, name)) = &registration {
            if let Err(e) = tarx::remove_tree_errno(dir, name.as_bytes()) {
                let what = if self.created {
                    "the worktree registration and the branch remain; remove them by hand"
                } else {
                    "the worktree registration remains; remove it by hand"
                };
                registration_stays = Some(format!("{what} before retrying (RemoveAll {name}: {})", io_text(&e)));
            }
        }
        let branch = match (&registration_stays, self.created) {
            (None, true) => branch_step::delete(self.repo, self.branch, self.guard).await.err(),
            _ => None,
        };
        if intact {
            if let Err(e) = self.leaf.remove_empty() {
                parts.push(format!(
                    "the worktree directory remains (re-populated while undoing?); remove it by hand before retrying (removeat {}: {})",
                    self.leaf.base_name(),
                    io_text(&e)
                ));
            }
        }
        if let Some(text) = registration_stays {
            return Err(vec![text]);
        }
        if let Some(kept) = branch {
            *branch_kept = matches!(kept, branch_step::Kept::Unpushed);
            parts.push(branch_step::kept_text(self.branch, &kept, parts.is_empty()));
        }
        if parts.is_empty() {
            Ok(())
        } else {
            Err(parts)
        }
    }

    /// remora's own guard, defense in depth behind the create's location
    /// checks: a leaf that is or contains the daemon user's home (by its
    /// path, or by the identity of the directory the create made) is not
    /// undone at all; the text says so and what remains.
    fn home_refusal(&self) -> Option<String> {
        let by_path = homeguard::check("worktreePath", self.worktree);
        let by_identity = || {
            let held = self
                .leaf
                .open()
                .is_ok_and(|dir| homeguard::Homes::of_daemon_user().holds_dir(&dir));
            held.then(|| homeguard::refusal("worktreePath", self.worktree))
        };
        let text = by_path.or_else(by_identity)?;
        let what = if self.created {
            "the worktree directory, its registration, and the branch all remain"
        } else {
            "the worktree directory and its registration both remain"
        };
        Some(format!("{text}; {what}"))
    }

    /// Step 1: every entry of the leaf, in the order the directory lists
    /// them; the first that will not go, with why.
    fn empty_leaf(&self) -> Result<(), (String, std::io::Error)> {
        let dir = self.leaf.open().map_err(|e| (".".to_string(), e))?;
        let names = safedir::read_names(&dir).map_err(|e| (".".to_string(), e))?;
        for name in names {
            tarx::remove_entry_errno(&dir, &name).map_err(|e| (String::from_utf8_lossy(&name).into_owned(), e))?;
        }
        Ok(())
    }

    /// The registration the leaf's `.git` file names, when it is an entry
    /// directly inside this repository's `worktrees` directory: that
    /// directory, open, and the entry's name. Read before step 1 takes
    /// the file away.
    async fn registration(&self) -> Option<(OwnedFd, String)> {
        // A directory put in the leaf's place is not ours to read.
        if !self.leaf.is_intact() {
            return None;
        }
        let named = self.gitdir_named()?;
        let common = gitcli::run(self.repo, &["rev-parse", "--git-common-dir"], true, QUERY_TIMEOUT)
            .await
            .ok_text()?;
        let registrations = std::fs::canonicalize(Path::new(self.repo).join(common).join("worktrees")).ok()?;
        let name = named.file_name()?.to_str()?.to_string();
        if std::fs::canonicalize(named.parent()?).ok()? != registrations {
            return None;
        }
        let dir = open_dir(libc::AT_FDCWD, registrations.to_str()?, true).ok()?;
        // The entry must be a directory (not a link to one) whose own
        // record names this leaf: never another worktree's registration.
        let entry = safedir::open_dir_in(&dir, name.as_bytes()).ok()?;
        // Never a registration that is or holds the home (left in place).
        if homeguard::Homes::of_daemon_user().holds_dir(&entry) {
            return None;
        }
        let record = read_small(&entry, b"gitdir")?;
        let leaf_git = std::fs::canonicalize(Path::new(self.worktree).join(".git")).ok()?;
        (std::fs::canonicalize(record.trim_end()).ok()? == leaf_git).then_some((dir, name))
    }

    /// The path after `gitdir: ` in the leaf's `.git` file (a regular
    /// file, opened without following a link).
    fn gitdir_named(&self) -> Option<PathBuf> {
        let text = read_small(&self.leaf.open().ok()?, b".git")?;
        let path = text.strip_prefix("gitdir: ")?.trim_end();
        let path = Path::new(path);
        if path.is_absolute() {
            Some(path.to_path_buf())
        } else {
            Some(Path::new(self.worktree).join(path))
        }
    }
}

/// The text of the regular file `name` in `dir` (opened without following
/// a link or waiting on a FIFO), at most [`GIT_FILE_CAP`] bytes.
fn read_small(dir: &OwnedFd, name: &[u8]) -> Option<String> {
    let file = safedir::open_file_at(dir, name, libc::O_RDONLY, 0).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(GIT_FILE_CAP).read_to_string(&mut text).ok()?;
    Some(text)
}
