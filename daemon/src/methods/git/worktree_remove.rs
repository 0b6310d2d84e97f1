//! The removal step of `git.worktree_remove`, once the path passed the
//! location, leaf and lock checks: `git worktree remove --force`; when git
//! will not (the directory is no registered worktree, or a damaged one),
//! the directory is deleted by hand, as the reference deletes it itself
//! (build f6010b97), and `git worktree prune` drops a registration whose
//! directory is gone. Then the branch `branchName` goes ([`branch_step`],
//! whatever the branch holds: the 5db5e4a golden file and f6010b97).
//!
//! The delete by hand walks from a descriptor of the leaf's parent and
//! follows no link: the entries other than `.git` go first, in the order
//! the directory lists them, and the first that will not go stops it
//! (`failed to remove worktree: RemoveAll <entry>: <reason>`, with `.git`,
//! the registration and the branch left, so the worktree stays whole
//! enough to retry).

use super::branch_step;
use super::containment::open_dir;
use super::paths::clean;
use super::WorktreeResult;
use crate::gitcli::{self, MUTATE_TIMEOUT};
use crate::goerr::io_text;
use crate::methods::Outcome;
use crate::safedir;
use crate::tarx;
use std::path::Path;

pub(super) async fn remove(repo: &str, worktree: &str, branch: &str) -> Outcome {
    let by_git = gitcli::run(
        repo,
        &["worktree", "remove", "--force", worktree],
        false,
        MUTATE_TIMEOUT,
    )
    .await;
    if !by_git.success && !holds_the_repository(repo, worktree).await {
        let path = worktree.to_string();
        let by_hand = tokio::task::spawn_blocking(move || delete_tree(&path))
            .await
            .unwrap_or_else(|_| Err("the delete did not finish".to_string()));
        if let Err(text) = by_hand {
            return Outcome::ok(&WorktreeResult {
                success: false,
                error: format!("failed to remove worktree: {text}"),
                ..WorktreeResult::default()
            });
        }
        gitcli::run(repo, &["worktree", "prune"], false, MUTATE_TIMEOUT).await;
    }
    // Lenient: a branch that is absent, or that will not go, changes nothing.
    let _ = branch_step::delete(repo, branch).await;
    Outcome::ok(&WorktreeResult {
        success: true,
        ..WorktreeResult::default()
    })
}

/// Whether `worktree` (links resolved) is or holds the repository's git
/// directory: remora's own guard, so a `worktreePath` of `<repo>/.git`
/// is never deleted by hand. Unknown counts as holding it.
async fn holds_the_repository(repo: &str, worktree: &str) -> bool {
    let common = gitcli::run(repo, &["rev-parse", "--git-common-dir"], true, gitcli::QUERY_TIMEOUT).await;
    let Some(common) = common.ok_text() else {
        return true;
    };
    let Ok(leaf) = std::fs::canonicalize(worktree) else {
        // Nothing there: nothing to delete either.
        return false;
    };
    std::fs::canonicalize(Path::new(repo).join(common)).map_or(true, |git_dir| git_dir.starts_with(&leaf))
}

/// Deletes the directory `worktree` and everything in it (see the module
/// comment); a directory already gone is no error.
fn delete_tree(worktree: &str) -> Result<(), String> {
    let cleaned = clean(worktree);
    let path = Path::new(&cleaned);
    let (Some(parent), Some(name)) = (path.parent().and_then(Path::to_str), path.file_name()) else {
        return Ok(());
    };
    let name = name.as_encoded_bytes();
    let shown = String::from_utf8_lossy(name).into_owned();
    let removeall = |entry: &str, e: &std::io::Error| format!("RemoveAll {entry}: {}", io_text(e));
    let parent = match open_dir(libc::AT_FDCWD, parent, true) {
        Ok(dir) => dir,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(removeall(&shown, &e)),
    };
    let leaf = match safedir::open_dir_in(&parent, name) {
        Ok(dir) => dir,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(removeall(&shown, &e)),
    };
    let names = safedir::read_names(&leaf).map_err(|e| removeall(&shown, &e))?;
    for entry in names.iter().filter(|n| n.as_slice() != b".git") {
        tarx::remove_tree_errno(&leaf, entry).map_err(|e| removeall(&String::from_utf8_lossy(entry), &e))?;
    }
    drop(leaf);
    tarx::remove_tree_errno(&parent, name).map_err(|e| removeall(&shown, &e))
}
