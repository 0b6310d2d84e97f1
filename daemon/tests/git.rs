//! git.* against real repositories built with the git CLI: unborn,
//! detached, subdirectories, every remote URL form, origin/HEAD, dirty
//! trees, branch sorting, worktrees. Replies are compared byte for byte.

#![allow(clippy::unwrap_used)] // a test or bench that unwraps fails loudly; the lint guards the daemon

mod common;

use common::git::{git, git_daemon as daemon, repo};
use common::TestDaemon;
use std::fs;
use std::path::Path;

fn ok(result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#)
}

fn p(path: &Path) -> String {
    path.to_str().expect("utf-8 temp path").to_string()
}

fn call(d: &TestDaemon, method: &str, params: &str) -> String {
    d.call(method, params)
}

fn path_param(dir: &str) -> String {
    format!(r#"{{"path":"{dir}"}}"#)
}

#[test]
fn non_repo_bodies_differ_per_method() {
    let d = daemon();
    let plain = d.root().join("plain");
    fs::create_dir(&plain).unwrap();
    for dir in [p(&plain), format!("{}/missing", p(&plain))] {
        let params = path_param(&dir);
        assert_eq!(
            call(&d, "git.info", &params),
            ok(r#"{"isRepo":false,"repoSlug":"","defaultBranch":""}"#)
        );
        assert_eq!(call(&d, "git.status", &params), ok(r#"{"isRepo":false,"clean":false}"#));
        assert_eq!(
            call(&d, "git.list_branches", &params),
            ok(r#"{"isRepo":false,"branches":[]}"#)
        );
    }
    // Inside the .git directory is not a work tree.
    let r = repo(&d.root().join("r"), false);
    assert_eq!(
        call(&d, "git.info", &path_param(&format!("{}/.git", p(&r)))),
        ok(r#"{"isRepo":false,"repoSlug":"","defaultBranch":""}"#)
    );
    // Namespace binding: a mistyped sibling field is Invalid params.
    assert_eq!(
        call(&d, "git.status", r#"{"path":"/","baseRepo":[1,2]}"#),
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params"}}"#
    );
}

#[test]
fn info_branch_root_and_detached() {
    let d = daemon();
    let unborn = repo(&d.root().join("empty"), true);
    let u = p(&unborn);
    assert_eq!(
        call(&d, "git.info", &path_param(&u)),
        ok(&format!(
            r#"{{"isRepo":true,"repo":"{u}","branch":"master","root":"{u}","repoSlug":"","defaultBranch":""}}"#
        ))
    );
    let r = repo(&d.root().join("full"), false);
    let rs = p(&r);
    git(&r, &["checkout", "-q", "-b", "feature/x"]);
    fs::create_dir_all(r.join("sub/deeper")).unwrap();
    let sub = format!("{rs}/sub/deeper");
    assert_eq!(
        call(&d, "git.info", &path_param(&sub)),
        ok(&format!(
            r#"{{"isRepo":true,"repo":"{sub}","branch":"feature/x","root":"{rs}","repoSlug":"","defaultBranch":""}}"#
        ))
    );
    // The path is echoed as given (a trailing slash is kept).
    assert_eq!(
        call(&d, "git.info", &path_param(&format!("{rs}/"))),
        ok(&format!(
            r#"{{"isRepo":true,"repo":"{rs}/","branch":"feature/x","root":"{rs}","repoSlug":"","defaultBranch":""}}"#
        ))
    );
    git(&r, &["checkout", "-q", "--detach"]);
    let short = git(&r, &["rev-parse", "--short", "HEAD"]);
    assert_eq!(
        call(&d, "git.info", &path_param(&rs)),
        ok(&format!(
            r#"{{"isRepo":true,"repo":"{rs}","branch":"detached:{short}","root":"{rs}","repoSlug":"","defaultBranch":""}}"#
        ))
    );
}

#[test]
fn info_repo_slug_and_default_branch() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    let rs = p(&r);
    let body = |slug: &str, default: &str| {
        ok(&format!(
            r#"{{"isRepo":true,"repo":"{rs}","branch":"master","root":"{rs}","repoSlug":"{slug}","defaultBranch":"{default}"}}"#
        ))
    };
    git(&r, &["remote", "add", "origin", "git@github.com:owner/repo.git"]);
    assert_eq!(call(&d, "git.info", &path_param(&rs)), body("owner/repo", ""));
    for (url, slug) in [
        ("git@github.com:Owner-1/Re_po.js.git", "Owner-1/Re_po.js"),
        ("https://github.com/owner/repo", "owner/repo"),
        ("https://github.com/owner/repo.git", "owner/repo"),
        ("https://github.com/owner/repo/", "owner/repo"),
        ("https://user:pw@example.com/owner/repo", "owner/repo"),
        ("ssh://git@example.com:22/owner/repo.git", "owner/repo"),
        ("ssh://git@example.com/owner/repo.git.git", "owner/repo.git"),
        ("https://gitlab.com/group/sub/proj.git", ""),
        ("/srv/git/repo.git", ""),
    ] {
        git(&r, &["remote", "set-url", "origin", url]);
        assert_eq!(call(&d, "git.info", &path_param(&rs)), body(slug, ""), "{url}");
    }
    git(
        &r,
        &["remote", "set-url", "origin", "https://github.com/owner/repo.git"],
    );
    let head = git(&r, &["rev-parse", "HEAD"]);
    git(&r, &["update-ref", "refs/remotes/origin/main", &head]);
    git(
        &r,
        &["symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main"],
    );
    assert_eq!(call(&d, "git.info", &path_param(&rs)), body("owner/repo", "main"));
    git(&r, &["update-ref", "refs/remotes/origin/release/v2", &head]);
    git(
        &r,
        &[
            "symbolic-ref",
            "refs/remotes/origin/HEAD",
            "refs/remotes/origin/release/v2",
        ],
    );
    assert_eq!(call(&d, "git.info", &path_param(&rs)), body("owner/repo", "release/v2"));
}

#[test]
fn status_clean_and_dirty() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    let rs = p(&r);
    assert_eq!(
        call(&d, "git.status", &path_param(&rs)),
        ok(r#"{"isRepo":true,"clean":true}"#)
    );
    fs::write(r.join("a.txt"), b"changed\n").unwrap();
    fs::write(r.join("new"), b"").unwrap();
    assert_eq!(
        call(&d, "git.status", &path_param(&rs)),
        ok(r#"{"isRepo":true,"clean":false,"changes":[" M a.txt","?? new"]}"#)
    );
    fs::write(r.join("b.txt"), b"b").unwrap();
    git(&r, &["add", "b.txt"]);
    fs::create_dir(r.join("dir")).unwrap();
    fs::write(r.join("dir/x"), b"").unwrap();
    // Every line keeps its columns, the first one too (build 4534d86).
    assert_eq!(
        call(&d, "git.status", &path_param(&format!("{rs}/dir"))),
        ok(r#"{"isRepo":true,"clean":false,"changes":[" M a.txt","A  b.txt","?? dir/","?? new"]}"#)
    );
    let unborn = repo(&d.root().join("u"), true);
    assert_eq!(
        call(&d, "git.status", &path_param(&p(&unborn))),
        ok(r#"{"isRepo":true,"clean":true}"#)
    );
    // Status never takes the index lock (GIT_OPTIONAL_LOCKS=0).
    assert!(!r.join(".git/index.lock").exists());
}

#[test]
fn list_branches_sorted_by_bytes() {
    let d = daemon();
    let unborn = repo(&d.root().join("u"), true);
    assert_eq!(
        call(&d, "git.list_branches", &path_param(&p(&unborn))),
        ok(r#"{"isRepo":true,"branches":[]}"#)
    );
    let r = repo(&d.root().join("r"), false);
    for b in ["feature/x", "Zeta", "alpha", "a-b", "alpha2"] {
        git(&r, &["branch", b]);
    }
    // A tag with a branch's name must not turn it into "heads/alpha".
    git(&r, &["tag", "alpha"]);
    git(&r, &["checkout", "-q", "--detach"]);
    assert_eq!(
        call(&d, "git.list_branches", &path_param(&p(&r))),
        ok(r#"{"isRepo":true,"branches":["Zeta","a-b","alpha","alpha2","feature/x","master"]}"#)
    );
}

#[test]
fn worktree_create_and_remove() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    let rs = p(&r);
    let wt = p(&d.root().join("wt1"));
    assert_eq!(
        call(
            &d,
            "git.worktree_create",
            &format!(r#"{{"baseRepo":"{rs}","worktreePath":"{wt}"}}"#)
        ),
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"branchName is required"}}"#
    );
    let plain = d.root().join("plain");
    fs::create_dir(&plain).unwrap();
    assert_eq!(
        call(
            &d,
            "git.worktree_create",
            &format!(
                r#"{{"baseRepo":"{}","branchName":"b","worktreePath":"{wt}"}}"#,
                p(&plain)
            )
        ),
        ok(r#"{"success":false,"error":"not a git repository","errorCode":"not_a_repo"}"#)
    );
    assert!(!Path::new(&wt).exists());

    // sourceBranch defaults to the current branch and is echoed.
    let create = |branch: &str, path: &str, extra: &str| {
        call(
            &d,
            "git.worktree_create",
            &format!(r#"{{"baseRepo":"{rs}","branchName":"{branch}","worktreePath":"{path}"{extra}}}"#),
        )
    };
    assert_eq!(
        create("nb", &wt, ""),
        ok(&format!(r#"{{"success":true,"path":"{wt}","sourceBranch":"master"}}"#))
    );
    assert_eq!(fs::read(Path::new(&wt).join("a.txt")).unwrap(), b"a\n");
    assert_eq!(git(Path::new(&wt), &["symbolic-ref", "--short", "HEAD"]), "nb");

    // An explicit source.
    git(&r, &["branch", "dev"]);
    let wt2 = p(&d.root().join("wt2"));
    assert_eq!(
        create("nb2", &wt2, r#","sourceBranch":"dev""#),
        ok(&format!(r#"{{"success":true,"path":"{wt2}","sourceBranch":"dev"}}"#))
    );

    // Failure: the branch exists. git's stderr, trimmed.
    let wt3 = p(&d.root().join("wt3"));
    let reply = create("nb", &wt3, "");
    assert!(
        reply.starts_with(r#"{"jsonrpc":"2.0","id":1,"result":{"success":false,"error":"git worktree add failed: "#),
        "{reply}"
    );
    assert!(
        reply.ends_with(r#"fatal: a branch named 'nb' already exists","errorCode":"worktree_add_failed"}}"#),
        "{reply}"
    );
    let reply = create("nb9", &wt3, r#","sourceBranch":"no-such-branch""#);
    assert!(reply.contains(r#""errorCode":"worktree_add_failed"}}"#), "{reply}");
    assert!(reply.contains("no-such-branch"), "{reply}");

    // A detached HEAD resolves to "HEAD".
    git(&r, &["checkout", "-q", "--detach"]);
    let wt4 = p(&d.root().join("wt4"));
    assert_eq!(
        create("nb4", &wt4, ""),
        ok(&format!(r#"{{"success":true,"path":"{wt4}","sourceBranch":"HEAD"}}"#))
    );

    // Remove is lenient: real worktree, already-deleted one, unknown path,
    // non-repo — all succeed.
    let remove = |base: &str, path: &str| {
        call(
            &d,
            "git.worktree_remove",
            &format!(r#"{{"baseRepo":"{base}","worktreePath":"{path}"}}"#),
        )
    };
    fs::write(Path::new(&wt).join("dirty"), b"").unwrap();
    assert_eq!(remove(&rs, &wt), ok(r#"{"success":true}"#));
    assert!(!Path::new(&wt).exists());
    fs::remove_dir_all(&wt2).unwrap();
    assert_eq!(remove(&rs, &wt2), ok(r#"{"success":true}"#));
    let list = git(&r, &["worktree", "list", "--porcelain"]);
    assert!(!list.contains(&wt) && !list.contains(&wt2), "{list}");
    assert!(list.contains(&wt4), "{list}");
    assert_eq!(remove(&rs, &format!("{}/nope", p(d.root()))), ok(r#"{"success":true}"#));
    assert_eq!(remove(&p(&plain), &wt4), ok(r#"{"success":true}"#));
    assert!(Path::new(&wt4).exists(), "a non-repo baseRepo removes nothing");
    assert_eq!(call(&d, "git.worktree_remove", "{}"), ok(r#"{"success":true}"#));
}

#[test]
fn worktree_on_unborn_head_and_default_repo() {
    let d = daemon();
    let unborn = repo(&d.root().join("u"), true);
    let wt = p(&d.root().join("orphan-wt"));
    assert_eq!(
        call(
            &d,
            "git.worktree_create",
            &format!(
                r#"{{"baseRepo":"{}","branchName":"fresh","worktreePath":"{wt}"}}"#,
                p(&unborn)
            )
        ),
        ok(&format!(r#"{{"success":true,"path":"{wt}"}}"#))
    );
    assert!(Path::new(&wt).join(".git").exists());

    // baseRepo absent: the daemon's cwd (the test daemon runs in its root).
    let root = d.root().to_path_buf();
    assert_eq!(
        call(
            &d,
            "git.worktree_create",
            r#"{"branchName":"b","worktreePath":"wt-rel"}"#
        ),
        ok(r#"{"success":false,"error":"not a git repository","errorCode":"not_a_repo"}"#)
    );
    repo(&root, false);
    assert_eq!(
        call(
            &d,
            "git.worktree_create",
            r#"{"branchName":"b","worktreePath":"wt-rel"}"#
        ),
        ok(r#"{"success":true,"path":"wt-rel","sourceBranch":"master"}"#)
    );
    assert!(root.join("wt-rel/a.txt").exists(), "relative to the repo dir");
    assert_eq!(
        call(&d, "git.worktree_remove", r#"{"worktreePath":"wt-rel"}"#),
        ok(r#"{"success":true}"#)
    );
    assert!(!root.join("wt-rel").exists());
}
