//! The `git worktree add` step of `git.worktree_create`: a new branch, or
//! the attach to an existing branch with its fallback,
//! the new branch's start commit, and the text a failed
//! add answers with (builds 90fca6e6/f6010b97).
//!
//! Start commit: a `sourceBranch` `s` is looked up as the local branch
//! `refs/heads/<s>` (L) and as origin's `refs/remotes/origin/<s>` (R).
//! One found: that one. Both: R when L is R or behind it, or when the two
//! share no history; otherwise L only when L changed neither the root
//! `.claude` nor the root `.mcp.json` since their merge base (any letter
//! case), else R. The add then gets the commit's full id, so the branch's
//! reflog reads `Created from <sha>` and it tracks nothing. Neither found:
//! the add starts at HEAD, as without `sourceBranch`.
//!
//! Attach: when `existingBranch` names a local branch (`git show-ref
//! --verify refs/heads/<b>`), the add checks that branch out, no `-b`. If
//! git refuses (typically: the branch is checked out elsewhere), a new
//! branch `branchName` is made instead, as if no `existingBranch` had been
//! sent; when that fails too, the text names both refusals. An empty or
//! unknown `existingBranch` is the new-branch path, silently.

use super::containment::Leaf;
use super::WorktreeResult;
use crate::methods::git::gitcli::{self, GitOutput, QUERY_TIMEOUT};
use std::time::Duration;

/// Git's stderr is quoted up to this many bytes.
const TEXT_CAP: usize = 512;

/// What to add.
pub(super) struct AddPlan<'a> {
    pub branch_name: &'a str,
    pub worktree: &'a str,
    /// The start commit of a new branch (empty: HEAD).
    pub start: &'a str,
    /// A local branch to attach to, already verified to exist.
    pub existing: Option<&'a str>,
}

/// The commit a revision names, as a full id.
async fn commit_of(repo: &str, rev: &str) -> Option<String> {
    let spec = format!("{rev}^{{commit}}");
    let out = gitcli::run(repo, &["rev-parse", "--verify", "--quiet", &spec], true, QUERY_TIMEOUT).await;
    out.ok_text().filter(|sha| !sha.is_empty())
}

async fn query(repo: &str, args: &[&str]) -> GitOutput {
    gitcli::run(repo, args, true, QUERY_TIMEOUT).await
}

/// The start commit for `sourceBranch` (non-empty), by the rule above;
/// `None` when neither candidate names a commit.
pub(super) async fn start_commit(repo: &str, source: &str) -> Option<String> {
    let (local_ref, remote_ref) = (format!("refs/heads/{source}"), format!("refs/remotes/origin/{source}"));
    let (local, remote) = tokio::join!(commit_of(repo, &local_ref), commit_of(repo, &remote_ref));
    let (local, remote) = match (local, remote) {
        (Some(local), Some(remote)) => (local, remote),
        (one, other) => return one.or(other),
    };
    if query(repo, &["merge-base", "--is-ancestor", &local, &remote])
        .await
        .success
    {
        return Some(remote);
    }
    let Some(base) = query(repo, &["merge-base", &remote, &local]).await.ok_text() else {
        return Some(remote);
    };
    let diff = query(
        repo,
        &[
            "diff",
            "--quiet",
            "--no-ext-diff",
            "--no-textconv",
            "--submodule=short",
            &base,
            &local,
            "--",
            ":(top,icase).claude",
            ":(top,icase).mcp.json",
        ],
    )
    .await;
    Some(if diff.success { local } else { remote })
}

/// How the add ended.
pub(super) enum Added {
    /// The worktree is registered, with nothing checked out yet; `branch`
    /// is the one it will check out, `created` whether this call made it.
    Done {
        branch: String,
        created: bool,
    },
    Failed(WorktreeResult),
    /// The time limit killed git.
    TimedOut,
}

/// The branch `existingBranch` names, when it is a local branch.
pub(super) async fn existing_branch<'a>(repo: &str, requested: &'a str) -> Option<&'a str> {
    if requested.is_empty() {
        return None;
    }
    let full = format!("refs/heads/{requested}");
    let out = gitcli::run(repo, &["show-ref", "--verify", "--quiet", &full], true, QUERY_TIMEOUT).await;
    out.success.then_some(requested)
}

/// Runs `git worktree add --no-checkout` (the checkout is the caller's
/// next step, build f6010b97) within `limit`. After a failure the leaf is
/// removed if git left it empty; nothing else is undone.
pub(super) async fn add(repo: &str, plan: &AddPlan<'_>, limit: Duration, leaf: &Leaf) -> Added {
    let base = vec!["worktree", "add", "--no-checkout"];
    let mut new_branch = base.clone();
    new_branch.extend(["--no-track", "-b", plan.branch_name, plan.worktree]);
    if !plan.start.is_empty() {
        new_branch.push(plan.start);
    }
    let Some(existing) = plan.existing else {
        let out = gitcli::run(repo, &new_branch, false, limit).await;
        return finish(out, plan.branch_name, leaf, |out| add_failed(&git_text(out)));
    };
    let mut attach = base;
    attach.extend([plan.worktree, existing]);
    let refused = gitcli::run(repo, &attach, false, limit).await;
    if refused.timed_out {
        return Added::TimedOut;
    }
    if refused.success {
        return Added::Done {
            branch: existing.to_string(),
            created: false,
        };
    }
    // The fallback needs the very directory the create made: if the failed
    // add took it away or replaced it, the attach failure is the answer.
    if !leaf.is_intact() {
        leaf.remove_if_empty();
        return Added::Failed(add_failed(&git_text(&refused)));
    }
    let fallback = gitcli::run(repo, &new_branch, false, limit).await;
    finish(fallback, plan.branch_name, leaf, |out| {
        add_failed(&format!(
            "{} (attaching to the existing branch {existing} was refused first: {})",
            git_text(out),
            git_text(&refused)
        ))
    })
}

fn finish(out: GitOutput, branch: &str, leaf: &Leaf, failed: impl FnOnce(&GitOutput) -> WorktreeResult) -> Added {
    if out.timed_out {
        return Added::TimedOut;
    }
    if out.success {
        return Added::Done {
            branch: branch.to_string(),
            created: true,
        };
    }
    // The usual failures (a branch that exists, a bad source) leave the
    // directory empty: then the create leaves no trace.
    leaf.remove_if_empty();
    Added::Failed(failed(&out))
}

/// `git worktree add failed: <text>`, `worktree_add_failed`.
pub(super) fn add_failed(text: &str) -> WorktreeResult {
    WorktreeResult::failed(format!("git worktree add failed: {text}"), "worktree_add_failed")
}

/// Git's error as the reference quotes it: stderr only, its first 512
/// bytes, bytes that are not UTF-8 dropped (a character the cap cut
/// included), every character that is not printable one space, spaces
/// trimmed at both ends; when nothing is left, the exit status text.
pub(super) fn git_text(out: &GitOutput) -> String {
    let head = &out.stderr[..out.stderr.len().min(TEXT_CAP)];
    let mut text = String::with_capacity(head.len());
    for chunk in head.utf8_chunks() {
        for c in chunk.valid().chars() {
            text.push(if c == ' ' || crate::base::goerr::is_go_printable(c) {
                c
            } else {
                ' '
            });
        }
    }
    let text = text.trim_matches(' ');
    if text.is_empty() {
        out.status_text.clone()
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(stderr: &[u8]) -> GitOutput {
        GitOutput {
            stderr: stderr.to_vec(),
            status_text: "exit status 128".to_string(),
            ..GitOutput::default()
        }
    }

    #[test]
    fn the_text_rule() {
        assert_eq!(
            git_text(&out(
                b"Preparing worktree (new branch 'dup')\nfatal: a branch named 'dup' already exists\n"
            )),
            "Preparing worktree (new branch 'dup') fatal: a branch named 'dup' already exists"
        );
        assert_eq!(git_text(&out(b"a\r\nb\t\x00c\x7f")), "a  b  c");
        assert_eq!(git_text(&out(b"x\xffy")), "xy");
        assert_eq!(git_text(&out("a\u{a0}b\u{200b}c\u{2028}".as_bytes())), "a b c");
        assert_eq!(git_text(&out(b" \n ")), "exit status 128");
        // The cap comes first: a character it cuts goes entirely.
        let mut long = vec![b'a'; 511];
        long.extend("é tail".as_bytes());
        assert_eq!(git_text(&out(&long)), "a".repeat(511));
        // stdout is never quoted.
        let mut only_stdout = out(b"");
        only_stdout.stdout = b"something".to_vec();
        assert_eq!(git_text(&only_stdout), "exit status 128");
    }
}
