//! The branch step of `git.worktree_remove` per reference build, on real
//! repositories: builds 89cb6289 and 5fd08069 delete `branchName` only
//! when another local branch or a remote-tracking ref reaches its tip and
//! otherwise keep it with `"branchKept":true`; f6010b97 deletes it with no
//! check and adds no member.

use crate::common::git::{git, repo};
use crate::common::reply::{ok, p};
use crate::common::TestDaemon;
use std::fs;
use std::path::{Path, PathBuf};

const GUARDED: &str = "89cb6289a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5";
const UNGUARDED: &str = "f6010b97a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5";

/// A daemon stamped `stamp` whose git ignores user and system config.
fn daemon(stamp: &str) -> TestDaemon {
    TestDaemon::start_with(
        &["-reference-build", stamp],
        &[("GIT_CONFIG_NOSYSTEM", "1"), ("GIT_CONFIG_GLOBAL", "/dev/null")],
    )
}

fn remove(d: &TestDaemon, r: &Path, wt: &Path, branch: &str) -> String {
    d.call(
        "git.worktree_remove",
        &format!(
            r#"{{"baseRepo":"{}","worktreePath":"{}","branchName":"{branch}"}}"#,
            p(r),
            p(wt)
        ),
    )
}

fn heads(r: &Path) -> String {
    git(r, &["for-each-ref", "--format=%(refname:short)", "refs/heads/"]).replace('\n', " ")
}

/// A worktree of `r` on a new branch `branch`, with `commits` commits of
/// its own.
fn worktree(r: &Path, name: &str, branch: &str, commits: usize) -> PathBuf {
    let wt = r.join(".claude/worktrees").join(name);
    git(r, &["worktree", "add", "-q", "-b", branch, &p(&wt)]);
    for i in 0..commits {
        fs::write(wt.join(format!("{name}-{i}.txt")), b"work\n").unwrap();
        git(&wt, &["add", "."]);
        git(&wt, &["commit", "-q", "-m", "work"]);
    }
    wt
}

#[test]
fn a_guarded_build_keeps_an_unpushed_branch_and_deletes_a_reached_one() {
    let d = daemon(GUARDED);
    let r = repo(&d.root().join("r"), false);

    // Commits only the branch reaches: kept, and said so.
    let wt = worktree(&r, "wt", "unpushed", 1);
    let tip = git(&r, &["rev-parse", "refs/heads/unpushed"]);
    assert_eq!(
        remove(&d, &r, &wt, "unpushed"),
        ok(1, r#"{"success":true,"branchKept":true}"#)
    );
    assert!(!wt.exists());
    assert_eq!(git(&r, &["rev-parse", "refs/heads/unpushed"]), tip);

    // Another branch reaches its commit: deleted, no member.
    let wt = worktree(&r, "wt2", "reached", 1);
    git(&r, &["branch", "keeper", "reached"]);
    assert_eq!(remove(&d, &r, &wt, "reached"), ok(1, r#"{"success":true}"#));
    assert_eq!(heads(&r), "keeper master unpushed");

    // A remote-tracking ref reaches it: deleted too.
    let wt = worktree(&r, "wt3", "pushed", 1);
    let sha = git(&r, &["rev-parse", "refs/heads/pushed"]);
    git(&r, &["update-ref", "refs/remotes/origin/pushed", &sha]);
    assert_eq!(remove(&d, &r, &wt, "pushed"), ok(1, r#"{"success":true}"#));
    assert_eq!(heads(&r), "keeper master unpushed");

    // No commits of its own (master reaches the tip): deleted.
    let wt = worktree(&r, "wt4", "fresh", 0);
    assert_eq!(remove(&d, &r, &wt, "fresh"), ok(1, r#"{"success":true}"#));
    assert_eq!(heads(&r), "keeper master unpushed");

    // No such branch: nothing to keep.
    let wt = worktree(&r, "wt5", "other", 0);
    assert_eq!(remove(&d, &r, &wt, "nope"), ok(1, r#"{"success":true}"#));

    // A baseRepo that does not exist (row X3): the error, then the member.
    let gone = d.root().join("gone");
    let wt = gone.join(".claude/worktrees/wt");
    assert_eq!(
        remove(&d, &gone, &wt, "b"),
        ok(
            1,
            &format!(
                r#"{{"success":false,"error":"failed to remove worktree: could not check whether {} is locked (its registrations could not be examined); retry","branchKept":true}}"#,
                p(&wt)
            )
        )
    );
}

#[test]
fn a_letter_case_twin_keeps_the_branch() {
    let d = daemon(GUARDED);
    let r = repo(&d.root().join("r"), false);
    let wt = worktree(&r, "wt", "twin", 0);
    git(&r, &["branch", "Twin"]);
    assert_eq!(
        remove(&d, &r, &wt, "twin"),
        ok(1, r#"{"success":true,"branchKept":true}"#)
    );
    assert_eq!(heads(&r), "Twin master twin");
}

/// A repository whose checkout fails after its smudge filter moved the
/// branch being checked out (`refs/heads/b`) to a commit only it has.
fn checkout_that_leaves_work(root: &Path) -> PathBuf {
    let r = repo(&root.join("r"), false);
    fs::write(r.join(".gitattributes"), "a.txt filter=broken\n").unwrap();
    git(&r, &["add", ".gitattributes"]);
    git(&r, &["commit", "-q", "-m", "attrs"]);
    let work = "c=$(git commit-tree -m work HEAD^{tree} -p HEAD) && git update-ref refs/heads/b \"$c\"; exit 3";
    git(&r, &["config", "user.name", "Remora Test"]);
    git(&r, &["config", "user.email", "test@example.com"]);
    git(&r, &["config", "filter.broken.smudge", work]);
    git(&r, &["config", "filter.broken.required", "true"]);
    r
}

fn create(d: &TestDaemon, r: &Path, wt: &Path) -> String {
    d.call(
        "git.worktree_create",
        &format!(
            r#"{{"baseRepo":"{}","branchName":"b","worktreePath":"{}"}}"#,
            p(r),
            p(wt)
        ),
    )
}

#[test]
fn a_create_rollback_keeps_a_branch_only_it_reaches_on_a_guarded_build() {
    let d = daemon(GUARDED);
    let r = checkout_that_leaves_work(d.root());
    let wt = r.join(".claude/worktrees/wt");
    let reply = create(&d, &r, &wt);
    let tail = format!(
        "; and the undo could not finish for {}: the worktree itself was removed, but branch b was left in place: it now has commits no other branch or remote-tracking ref reaches. To keep that work, push the branch or rename it. To discard it, run git branch -D b. This branch name cannot be reused until the branch is renamed or deleted\",\"errorCode\":\"worktree_add_failed\",\"branchKept\":true}}}}",
        p(&wt)
    );
    assert!(
        reply.starts_with(
            r#"{"jsonrpc":"2.0","id":1,"result":{"success":false,"error":"git worktree add failed (checkout): "#
        ),
        "{reply}"
    );
    assert!(reply.ends_with(&tail), "{reply}");
    assert!(!wt.exists());
    assert_eq!(heads(&r), "b master");

    // f6010b97: the branch goes, no text, no member.
    let d = daemon(UNGUARDED);
    let r = checkout_that_leaves_work(d.root());
    let reply = create(&d, &r, &wt_of(&r));
    assert!(
        reply.ends_with(r#"","errorCode":"worktree_add_failed"}}"#) && !reply.contains("undo"),
        "{reply}"
    );
    assert_eq!(heads(&r), "master");
}

fn wt_of(r: &Path) -> PathBuf {
    r.join(".claude/worktrees/wt")
}

#[test]
fn f6010b97_deletes_an_unpushed_branch_with_no_member() {
    let d = daemon(UNGUARDED);
    let r = repo(&d.root().join("r"), false);
    let wt = worktree(&r, "wt", "unpushed", 1);
    assert_eq!(remove(&d, &r, &wt, "unpushed"), ok(1, r#"{"success":true}"#));
    assert!(!wt.exists());
    assert_eq!(heads(&r), "master");

    let gone = d.root().join("gone");
    let wt = gone.join(".claude/worktrees/wt");
    assert_eq!(
        remove(&d, &gone, &wt, "b"),
        ok(
            1,
            &format!(
                r#"{{"success":false,"error":"failed to remove worktree: could not check whether {} is locked (its registrations could not be examined); retry"}}"#,
                p(&wt)
            )
        )
    );
}

#[test]
fn the_guarded_builds_list_the_feature() {
    for (stamp, listed) in [(GUARDED, true), (UNGUARDED, false)] {
        let d = daemon(stamp);
        let caps = d.call("server.capabilities", "{}");
        assert_eq!(
            caps.contains(
                r#""git.worktree_create.existingBranch","git.worktree_remove.unpushedGuard","process.spawn.shellAgentSocket""#
            ),
            listed,
            "{caps}"
        );
    }
}
