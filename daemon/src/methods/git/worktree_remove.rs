//! The removal step of `git.worktree_remove`, once the path passed the
//! location, leaf and lock checks. A path that is or contains the daemon
//! user's home is refused first ([`crate::base::homeguard`]: `worktreePath must
//! not be or contain the home directory: "<p>"`), whatever git would say.
//! Then `git worktree remove --force`; when git will not (the directory is
//! no registered worktree, or a damaged one), the directory is deleted by
//! hand, as the reference deletes it itself, and `git worktree prune` drops
//! a registration whose directory is gone. Then the branch `branchName`
//! goes ([`branch_step`], whatever the branch holds: the 5db5e4a golden
//! file and f6010b97; builds 89cb6289 and 5fd08069 keep a branch only it
//! reaches and answer `"branchKept":true` after `success`).
//!
//! remora deletes by hand only a plain directory (no `.git` entry) or a
//! worktree of this repository (a `.git` file naming an entry of its
//! `worktrees` directory), and never a path that is, holds or sits inside
//! the repository's git directories: the reference would delete whatever
//! git refused, so a `worktreePath` of `<repo>/.git/objects`, a nested
//! clone or a submodule's checkout would go. Such a path is left in place
//! and the remove fails.
//!
//! The delete by hand walks from a descriptor of the repository down the
//! path's components (the location check refused links among them; the
//! walk follows none, so one planted since cannot redirect it) and follows
//! no link below: the entries other than `.git` go first, in the order
//! the directory lists them, and the first that will not go stops it
//! (`failed to remove worktree: RemoveAll <entry>: <reason>`, with `.git`,
//! the registration and the branch left, so the worktree stays whole
//! enough to retry). The delete holds a bounded number of descriptors
//! however deep the tree ([`crate::tarx`]'s `removeall`).
//!
//! Whichever way it went, the answer is `success:true` only when nothing
//! is left at `worktreePath` afterwards (a lookup that fails for any
//! reason but "no such entry" counts as something left); otherwise
//! `failed to remove worktree: <path> is still there after the remove`,
//! the branch kept.

use super::branch_step;
use super::containment::open_dir;
use super::paths::{clean, names_below};
use super::WorktreeResult;
use crate::base::goerr::io_text;
use crate::base::safedir;
use crate::methods::git::gitcli::{self, MUTATE_TIMEOUT};
use crate::methods::Outcome;
use crate::tarx;
use std::os::fd::AsRawFd;
use std::path::Path;

/// `external`: the worktree lies under a `worktreeRoot`, outside the
/// repository; then only git's own remove (which removes only a worktree
/// registered in this repository) may delete it, never a delete by hand.
pub(super) async fn remove(repo: &str, worktree: &str, branch: &str, guard: bool, external: bool) -> Outcome {
    // remora's own refusal, in front of both deletes (git's and ours): a
    // repository above the home lets the home pass the location checks.
    if let Some(error) = crate::base::homeguard::check("worktreePath", worktree) {
        return Outcome::ok(&WorktreeResult {
            success: false,
            error,
            ..WorktreeResult::default()
        });
    }
    let by_git = gitcli::run(
        repo,
        &["worktree", "remove", "--force", worktree],
        false,
        MUTATE_TIMEOUT,
    )
    .await;
    if !by_git.success {
        let present = !is_gone(worktree);
        if (external && present) || (!external && !may_delete_by_hand(repo, worktree).await) {
            let error = if external {
                format!(
                    "failed to remove worktree: git did not remove {worktree}, and under a worktree location only a worktree git removes is deleted, so it is left in place"
                )
            } else {
                format!(
                    "failed to remove worktree: git did not remove {worktree}, and it is not a worktree of this repository or a plain directory, so it is left in place"
                )
            };
            return Outcome::ok(&WorktreeResult {
                success: false,
                error,
                ..WorktreeResult::default()
            });
        }
        let (repo_path, path) = (repo.to_string(), worktree.to_string());
        let by_hand = tokio::task::spawn_blocking(move || match external {
            // Already gone: nothing to delete, only the registration to prune.
            true => Ok(()),
            false => delete_tree(&repo_path, &path),
        })
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
    // remora's own rule (an odd result of the second audit): success only
    // when the path is gone. A delete that met a missing level while the
    // path was being swapped answered success with the directory back in
    // place; then the branch stays too, as after any failed delete.
    if !is_gone(worktree) {
        return Outcome::ok(&WorktreeResult {
            success: false,
            error: format!("failed to remove worktree: {worktree} is still there after the remove"),
            ..WorktreeResult::default()
        });
    }
    // Lenient: a branch that is absent, or that will not go, changes
    // nothing but `branchKept` (guarded builds only).
    let kept = branch_step::delete(repo, branch, guard).await.err();
    Outcome::ok(&WorktreeResult {
        success: true,
        branch_kept: guard && kept.is_some_and(|k| k.reported_on_remove()),
        ..WorktreeResult::default()
    })
}

/// Whether nothing is at `worktree`: only a lookup that says "no such
/// entry" counts; one that fails otherwise (a path too long for the
/// kernel, a directory that cannot be searched) cannot tell, and counts
/// as something there.
fn is_gone(worktree: &str) -> bool {
    matches!(std::fs::symlink_metadata(worktree), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// Whether git's refusal may be followed by a delete by hand (see the
/// module comment). Unknown counts as no; a path that is not there may be
/// "deleted" (the walk finds nothing). A path the kernel cannot resolve
/// for another reason is unknown (audit F1: past `PATH_MAX` this answered
/// yes, and the walk by descriptor deleted the home).
async fn may_delete_by_hand(repo: &str, worktree: &str) -> bool {
    let leaf = match std::fs::canonicalize(worktree) {
        Ok(leaf) => leaf,
        Err(e) => return e.kind() == std::io::ErrorKind::NotFound,
    };
    let mut common = None;
    for which in ["--git-common-dir", "--git-dir"] {
        let out = gitcli::run(repo, &["rev-parse", which], true, gitcli::QUERY_TIMEOUT).await;
        let Some(dir) = out
            .ok_text()
            .and_then(|t| std::fs::canonicalize(Path::new(repo).join(t)).ok())
        else {
            return false;
        };
        if dir.starts_with(&leaf) || leaf.starts_with(&dir) {
            return false;
        }
        common.get_or_insert(dir);
    }
    let Some(common) = common else {
        return false;
    };
    names_a_registration(&leaf, &common.join("worktrees"))
}

/// Whether the directory `leaf` has no `.git` entry, or a `.git` file
/// (at most 4 KiB, as git writes it) naming a directory under
/// `registrations`.
fn names_a_registration(leaf: &Path, registrations: &Path) -> bool {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let dot_git = leaf.join(".git");
    match std::fs::symlink_metadata(&dot_git) {
        Err(e) => return e.kind() == std::io::ErrorKind::NotFound,
        Ok(meta) if !meta.is_file() => return false,
        Ok(_) => {}
    }
    let mut text = String::new();
    let read = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&dot_git)
        .and_then(|f| f.take(4096).read_to_string(&mut text));
    let Some(target) = read
        .ok()
        .and_then(|_| text.trim_end().strip_prefix("gitdir: ").map(str::to_string))
    else {
        return false;
    };
    let target = leaf.join(target);
    let target = std::fs::canonicalize(&target).unwrap_or_else(|_| clean(&target.to_string_lossy()).into());
    target.starts_with(registrations) && target != registrations
}

/// Deletes the directory `worktree` and everything in it (see the module
/// comment); a directory already gone is no error.
fn delete_tree(repo: &str, worktree: &str) -> Result<(), String> {
    // The location check made sure the path lies below the repository.
    let Some(names) = names_below(worktree, repo) else {
        return Ok(());
    };
    let Some((name, parents)) = names.split_last() else {
        return Ok(());
    };
    let shown = name.clone();
    let name = name.as_bytes();
    let removeall = |entry: &str, e: &std::io::Error| format!("RemoveAll {entry}: {}", io_text(e));
    let mut parent = match open_dir(libc::AT_FDCWD, &clean(repo), true) {
        Ok(dir) => dir,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(removeall(&shown, &e)),
    };
    for component in parents {
        parent = match open_dir(parent.as_raw_fd(), component, false) {
            Ok(dir) => dir,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Err(e) => return Err(removeall(&shown, &e)),
        };
    }
    let leaf = match safedir::open_dir_in(&parent, name) {
        Ok(dir) => dir,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(removeall(&shown, &e)),
    };
    let names = safedir::read_names(&leaf).map_err(|e| removeall(&shown, &e))?;
    for entry in names.iter().filter(|n| n.as_slice() != b".git") {
        tarx::remove_entry_errno(&leaf, entry).map_err(|e| removeall(&String::from_utf8_lossy(entry), &e))?;
    }
    drop(leaf);
    tarx::remove_tree_errno(&parent, name).map_err(|e| removeall(&shown, &e))
}
