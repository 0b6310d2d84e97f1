//! Deleting the branch a session worktree used: `git.worktree_remove`'s
//! `branchName` (golden file of build 5db5e4a) and the branch a failed
//! `git.worktree_create` made (its rollback, build f6010b97).
//!
//! Build f6010b97 deletes with no check of what the branch holds:
//! `git update-ref --no-deref -d refs/heads/<b>`, no old value, so an
//! unmerged branch goes too. A name that is empty is no branch; one that
//! starts with `+` or `-` is never passed to git.
//!
//! Builds 89cb6289 and 5fd08069 check first
//! ([`crate::protocol::build::Switch::UnpushedGuard`], claustrum's
//! PROTOCOL.md "The branch step"): the branch goes only when another local
//! branch or a remote-tracking ref reaches its tip. In `baseRepo`:
//! 1. `for-each-ref --count=10001 --format=%(objectname)%00%(refname)%00%(symref) refs/heads/`;
//! 2. `rev-parse --verify --quiet refs/heads/<b>^{commit}`, only when the
//!    listing lacks the ref (exit 1: no such branch, nothing to delete);
//! 3. `rev-list -n 1 <tip> --not --remotes --not --stdin --`, stdin
//!    `^<refname>` of every other head that is no symbolic ref;
//! 4. `update-ref --no-deref -d refs/heads/<b> <tip>` (the old value too).
//!
//! The branch stays when for-each-ref fails or is stopped, the listing
//! holds 10001 records or one it cannot read, a refname is a letter-case
//! twin of the branch's, rev-parse exits 0 or fails otherwise than with
//! exit 1, rev-list prints a commit, fails or is stopped, or update-ref
//! fails or is stopped. Steps 1 and 3 share one 60 s bound.

use crate::methods::git::gitcli;
use std::path::Path;
use std::time::{Duration, Instant};

/// The time `update-ref` gets before it is stopped (the reference sends
/// its stop 5 s after the start).
const UPDATE_REF_LIMIT: Duration = Duration::from_secs(5);

/// The bound for-each-ref and rev-list share (the guard's check).
const CHECK_LIMIT: Duration = Duration::from_secs(60);

/// The listing's record cap: this many records means "too many to check".
const HEADS_CAP: usize = 10001;

/// Why a branch stayed, as the create rollback words it.
pub(super) enum Kept {
    /// The name is not passed to git.
    UnsafeName,
    /// `update-ref` failed: its process error, and whether git's lock file
    /// for the ref was left behind.
    Failed { error: String, lock_left: bool },
    /// The guard: rev-list printed a commit no other ref reaches.
    Unpushed,
    /// The guard could not check; the process error of the step that
    /// failed or was stopped, if one did.
    Unchecked(Option<String>),
}

impl Kept {
    /// Whether a `git.worktree_remove` reply says so (`branchKept`): every
    /// branch the guard kept, not a name never passed to git.
    pub(super) fn reported_on_remove(&self) -> bool {
        !matches!(self, Kept::UnsafeName)
    }
}

/// Whether the branch step would run git for `branch` at all.
pub(super) fn is_passed_to_git(branch: &str) -> bool {
    !branch.is_empty() && !branch.starts_with(['+', '-'])
}

/// Deletes `refs/heads/<branch>` in `repo`, after the guard when `guard`.
/// `Ok` also when there was no name or no such branch.
pub(super) async fn delete(repo: &str, branch: &str, guard: bool) -> Result<(), Kept> {
    if branch.is_empty() {
        return Ok(());
    }
    if branch.starts_with(['+', '-']) {
        return Err(Kept::UnsafeName);
    }
    let full = format!("refs/heads/{branch}");
    let tip = if guard {
        match check(repo, &full).await? {
            Some(tip) => Some(tip),
            None => return Ok(()),
        }
    } else {
        None
    };
    let mut args = vec!["update-ref", "--no-deref", "-d", full.as_str()];
    args.extend(tip.as_deref());
    let out = gitcli::run(repo, &args, false, UPDATE_REF_LIMIT).await;
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

/// The guard's steps 1 to 3 for the ref `full`: its tip when only to be
/// deleted, `None` when there is no such branch.
async fn check(repo: &str, full: &str) -> Result<Option<String>, Kept> {
    let deadline = Instant::now() + CHECK_LIMIT;
    let stopped = |out: &gitcli::GitOutput| Kept::Unchecked(Some(out.status_text.clone()));
    let listing = gitcli::run(
        repo,
        &[
            "for-each-ref",
            "--count=10001",
            "--format=%(objectname)%00%(refname)%00%(symref)",
            "refs/heads/",
        ],
        true,
        CHECK_LIMIT,
    )
    .await;
    if !listing.success {
        return Err(stopped(&listing));
    }
    let heads = parse_heads(&listing.stdout).ok_or(Kept::Unchecked(None))?;
    let folded = full.to_lowercase();
    let mut tip = None;
    let mut others = Vec::new();
    for head in &heads {
        if head.refname == full {
            tip = Some(head.objectname.clone());
        } else if head.refname.to_lowercase() == folded {
            return Err(Kept::Unchecked(None));
        } else if head.symref.is_empty() {
            others.push(head.refname.as_str());
        }
    }
    let Some(tip) = tip else {
        let spec = format!("{full}^{{commit}}");
        let probe = gitcli::run(
            repo,
            &["rev-parse", "--verify", "--quiet", &spec],
            true,
            gitcli::QUERY_TIMEOUT,
        )
        .await;
        return match (probe.success, probe.status_text.as_str()) {
            (false, "exit status 1") => Ok(None),
            (false, _) => Err(stopped(&probe)),
            (true, _) => Err(Kept::Unchecked(None)),
        };
    };
    let mut input = Vec::new();
    for refname in others {
        input.extend_from_slice(format!("^{refname}\n").as_bytes());
    }
    let left = deadline.saturating_duration_since(Instant::now());
    let reach = gitcli::run_with_input(
        repo,
        &[
            "rev-list",
            "-n",
            "1",
            &tip,
            "--not",
            "--remotes",
            "--not",
            "--stdin",
            "--",
        ],
        true,
        left,
        Some(input),
    )
    .await;
    if !reach.success {
        return Err(stopped(&reach));
    }
    if !reach.stdout.trim_ascii().is_empty() {
        return Err(Kept::Unpushed);
    }
    Ok(Some(tip))
}

/// One record of the guard's listing.
struct Head {
    objectname: String,
    refname: String,
    symref: String,
}

/// The listing's records, `None` when it holds [`HEADS_CAP`] of them or
/// one that is not three NUL-separated fields of UTF-8.
fn parse_heads(stdout: &[u8]) -> Option<Vec<Head>> {
    let body = stdout.strip_suffix(b"\n").unwrap_or(stdout);
    if body.is_empty() {
        return Some(Vec::new());
    }
    let mut heads = Vec::new();
    for record in body.split(|&b| b == b'\n') {
        if heads.len() + 1 >= HEADS_CAP {
            return None;
        }
        let text = std::str::from_utf8(record).ok()?;
        let mut fields = text.split('\0');
        let (Some(objectname), Some(refname), Some(symref), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return None;
        };
        if objectname.is_empty() || !refname.starts_with("refs/heads/") {
            return None;
        }
        heads.push(Head {
            objectname: objectname.to_string(),
            refname: refname.to_string(),
            symref: symref.to_string(),
        });
    }
    Some(heads)
}

/// The guard's words when it could not check.
fn unchecked_text(branch: &str, error: Option<&str>) -> String {
    let mut text = format!(
        "branch {branch} still exists; delete it by hand (for example: git branch -d {branch}, which git refuses if that would lose commits) before retrying this branch name: could not check whether another branch or remote-tracking ref reaches its commits"
    );
    if let Some(error) = error {
        text.push_str(&format!(" ({error})"));
    }
    text
}

/// The guard's words for a branch only it reaches; the undo says first
/// that the worktree went, unless the leaf's own text stands before.
fn unpushed_text(branch: &str, worktree_gone: bool) -> String {
    let tail = format!(
        "branch {branch} was left in place: it now has commits no other branch or remote-tracking ref reaches. To keep that work, push the branch or rename it. To discard it, run git branch -D {branch}. This branch name cannot be reused until the branch is renamed or deleted"
    );
    if worktree_gone {
        format!("the worktree itself was removed, but {tail}")
    } else {
        tail
    }
}

/// The rollback's words for a branch that stayed; `worktree_gone` when
/// the leaf went (no text of its own before this one).
pub(super) fn kept_text(branch: &str, kept: &Kept, worktree_gone: bool) -> String {
    match kept {
        Kept::Unpushed => unpushed_text(branch, worktree_gone),
        Kept::Unchecked(error) => unchecked_text(branch, error.as_deref()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_is_read_strictly() {
        let heads = parse_heads(b"aa\0refs/heads/a\0\nbb\0refs/heads/s\0refs/heads/a\n").unwrap();
        assert_eq!(heads.len(), 2);
        assert_eq!(
            (heads[0].objectname.as_str(), heads[0].refname.as_str()),
            ("aa", "refs/heads/a")
        );
        assert_eq!(heads[1].symref, "refs/heads/a");
        assert_eq!(parse_heads(b"").map(|h| h.len()), Some(0));
        assert!(parse_heads(b"aa\0refs/heads/a\n").is_none());
        assert!(parse_heads(b"aa\0refs/heads/a\0\0x\n").is_none());
        assert!(parse_heads(b"aa\0refs/heads/\xff\0\n").is_none());
        let many: Vec<u8> = (0..HEADS_CAP)
            .flat_map(|i| format!("aa\0refs/heads/b{i}\0\n").into_bytes())
            .collect();
        assert!(parse_heads(&many).is_none());
        let fewer = &many[..many.len() - "aa\0refs/heads/b10000\0\n".len()];
        assert_eq!(parse_heads(fewer).map(|h| h.len()), Some(HEADS_CAP - 1));
    }

    #[test]
    fn the_undo_texts() {
        assert_eq!(
            kept_text("b", &Kept::Unpushed, true),
            "the worktree itself was removed, but branch b was left in place: it now has commits no other branch or remote-tracking ref reaches. To keep that work, push the branch or rename it. To discard it, run git branch -D b. This branch name cannot be reused until the branch is renamed or deleted"
        );
        assert!(kept_text("b", &Kept::Unpushed, false).starts_with("branch b was left in place: it now has"));
        let unchecked = "branch b still exists; delete it by hand (for example: git branch -d b, which git refuses if that would lose commits) before retrying this branch name: could not check whether another branch or remote-tracking ref reaches its commits";
        assert_eq!(kept_text("b", &Kept::Unchecked(None), true), unchecked);
        assert_eq!(
            kept_text("b", &Kept::Unchecked(Some("exit status 128".into())), true),
            format!("{unchecked} (exit status 128)")
        );
        assert!(!Kept::UnsafeName.reported_on_remove());
        assert!(Kept::Unpushed.reported_on_remove());
    }
}
