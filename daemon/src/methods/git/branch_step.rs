//! Deleting the branch a session worktree used: `git.worktree_remove`'s
//! `branchName` (golden file of build 5db5e4a) and the branch a failed
//! `git.worktree_create` made (its rollback, build f6010b97).
//!
//! Build f6010b97 deletes with no check of what the branch holds:
//! `git update-ref --no-deref -d refs/heads/<b>`, no old value, so an
//! unmerged branch goes too. A name that is empty is no branch; one that
//! starts with `+` or `-` is never passed to git. Build 89cb6289 keeps a
//! branch whose commits no other ref reaches (`branchKept`); the pinned
//! build wins, see `docs/PROTOCOL.md`.

use crate::methods::git::gitcli;
use std::path::Path;
use std::time::Duration;

/// The time `update-ref` gets before it is stopped (the reference sends
/// its stop 5 s after the start).
const UPDATE_REF_LIMIT: Duration = Duration::from_secs(5);

/// Why a branch stayed, as the create rollback words it.
pub(super) enum Kept {
    /// The name is not passed to git.
    UnsafeName,
    /// `update-ref` failed: its process error, and whether git's lock file
    /// for the ref was left behind.
    Failed { error: String, lock_left: bool },
}

/// Deletes `refs/heads/<branch>` in `repo`. `Ok` also when there was no
/// name or no such branch.
pub(super) async fn delete(repo: &str, branch: &str) -> Result<(), Kept> {
    if branch.is_empty() {
        return Ok(());
    }
    if branch.starts_with(['+', '-']) {
        return Err(Kept::UnsafeName);
    }
    let full = format!("refs/heads/{branch}");
    let out = gitcli::run(
        repo,
        &["update-ref", "--no-deref", "-d", &full],
        false,
        UPDATE_REF_LIMIT,
    )
    .await;
    if out.success {
        return Ok(());
    }
    let common = gitcli::run(repo, &["rev-parse", "--git-common-dir"], true, gitcli::QUERY_TIMEOUT).await;
    let lock_left = common.ok_text().is_some_and(|dir| {
        let lock = Path::new(repo).join(dir).join(format!("{full}.lock"));
        std::fs::symlink_metadata(lock).is_ok()
    });
    Err(Kept::Failed {
        error: out.status_text,
        lock_left,
    })
}

/// The rollback's words for a branch that stayed.
pub(super) fn kept_text(branch: &str, kept: &Kept) -> String {
    match kept {
        Kept::UnsafeName => {
            format!("branch {branch} left in place (its name is unsafe to pass to update-ref); delete it by hand")
        }
        Kept::Failed { error, lock_left: false } => format!(
            "branch {branch} still exists; delete it by hand (for example: git branch -D {branch}) before retrying this branch name: {error}"
        ),
        Kept::Failed { error, lock_left: true } => format!(
            "branch {branch} still exists; delete it by hand (for example: git branch -D {branch}) before retrying this branch name. A lock refs/heads/{branch}.lock is also present: if another git process is running against this repository, the lock may be live and clears on its own; if none is, it is stale debris of the interrupted delete \u{2014} remove the lock file by hand too: {error}"
        ),
    }
}
