//! git.* against real repositories built with the git CLI: unborn,
//! detached, subdirectories, every remote URL form, origin/HEAD, dirty
//! trees, branch sorting, worktrees. Replies are compared byte for byte.

use crate::common::git::{git, git_daemon as daemon, repo};
use crate::common::reply::{ok, p};
use crate::common::TestDaemon;
use std::fs;
use std::path::Path;

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
            ok(1, r#"{"isRepo":false,"repoSlug":"","defaultBranch":""}"#)
        );
        // Since 7d193f89 a status needs the repository the worktree belongs to.
        assert_eq!(
            call(&d, "git.status", &params),
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"baseRepo is required"}}"#
        );
        assert_eq!(
            call(&d, "git.status", &format!(r#"{{"path":"{dir}","baseRepo":"{dir}"}}"#)),
            ok(1, r#"{"isRepo":false,"clean":false}"#)
        );
        assert_eq!(
            call(&d, "git.list_branches", &params),
            ok(1, r#"{"isRepo":false,"branches":[]}"#)
        );
    }
    // Inside the .git directory is not a work tree.
    let r = repo(&d.root().join("r"), false);
    assert_eq!(
        call(&d, "git.info", &path_param(&format!("{}/.git", p(&r)))),
        ok(1, r#"{"isRepo":false,"repoSlug":"","defaultBranch":""}"#)
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
        ok(
            1,
            &format!(
                r#"{{"isRepo":true,"repo":"empty","branch":"master","root":"{u}","repoSlug":"","defaultBranch":""}}"#
            )
        )
    );
    let r = repo(&d.root().join("full"), false);
    let rs = p(&r);
    git(&r, &["checkout", "-q", "-b", "feature/x"]);
    fs::create_dir_all(r.join("sub/deeper")).unwrap();
    let sub = format!("{rs}/sub/deeper");
    assert_eq!(
        call(&d, "git.info", &path_param(&sub)),
        ok(
            1,
            &format!(
                r#"{{"isRepo":true,"repo":"full","branch":"feature/x","root":"{rs}","repoSlug":"","defaultBranch":""}}"#
            )
        )
    );
    // `repo` is the folder name of `root` whatever the spelling of `path`,
    // a trailing slash included.
    assert_eq!(
        call(&d, "git.info", &path_param(&format!("{rs}/"))),
        ok(
            1,
            &format!(
                r#"{{"isRepo":true,"repo":"full","branch":"feature/x","root":"{rs}","repoSlug":"","defaultBranch":""}}"#
            )
        )
    );
    git(&r, &["checkout", "-q", "--detach"]);
    let short = git(&r, &["rev-parse", "--short", "HEAD"]);
    assert_eq!(
        call(&d, "git.info", &path_param(&rs)),
        ok(
            1,
            &format!(
                r#"{{"isRepo":true,"repo":"full","branch":"detached:{short}","root":"{rs}","repoSlug":"","defaultBranch":""}}"#
            )
        )
    );
}

#[test]
fn info_repo_slug_and_default_branch() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    let rs = p(&r);
    let body = |slug: &str, default: &str| {
        ok(
            1,
            &format!(
                r#"{{"isRepo":true,"repo":"r","branch":"master","root":"{rs}","repoSlug":"{slug}","defaultBranch":"{default}"}}"#
            ),
        )
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

/// Issue 25, as the golden file of `TestSocketGitRepoDetection` records
/// build 5db5e4a: `git.list_branches` takes any directory where git finds
/// a git directory (a bare repository, the inside of `.git`), while
/// `git.info` answers only for a work tree and `git.status` only for a
/// linked worktree of `baseRepo`.
#[test]
fn bare_repositories_and_dot_git_folders_per_method() {
    let d = daemon();
    let r = repo(&d.root().join("work"), false);
    git(&r, &["branch", "wtbranch"]);
    let rs = p(&r);
    let dot_git = format!("{rs}/.git");
    let empty_bare = d.root().join("bare.git");
    git(d.root(), &["init", "-q", "--bare", "bare.git"]);
    let full_bare = d.root().join("full.git");
    git(d.root(), &["clone", "-q", "--bare", &rs, "full.git"]);
    let info_not_repo = ok(1, r#"{"isRepo":false,"repoSlug":"","defaultBranch":""}"#);
    let status_not_repo = ok(1, r#"{"isRepo":false,"clean":false}"#);
    let branches = ok(1, r#"{"isRepo":true,"branches":["master","wtbranch"]}"#);

    for dir in [
        p(&empty_bare),
        p(&full_bare),
        dot_git.clone(),
        format!("{dot_git}/refs"),
    ] {
        assert_eq!(call(&d, "git.info", &path_param(&dir)), info_not_repo, "{dir}");
        let status = format!(r#"{{"path":"{dir}","baseRepo":"{dir}"}}"#);
        assert_eq!(call(&d, "git.status", &status), status_not_repo, "{dir}");
        assert_eq!(
            call(&d, "git.status", &status_params(&dir, &rs)),
            status_not_repo,
            "{dir}"
        );
    }
    assert_eq!(
        call(&d, "git.list_branches", &path_param(&p(&empty_bare))),
        ok(1, r#"{"isRepo":true,"branches":[]}"#)
    );
    assert_eq!(call(&d, "git.list_branches", &path_param(&p(&full_bare))), branches);
    assert_eq!(call(&d, "git.list_branches", &path_param(&dot_git)), branches);
    assert_eq!(
        call(&d, "git.list_branches", &path_param(&format!("{dot_git}/refs"))),
        branches
    );
    assert_eq!(call(&d, "git.list_branches", &path_param(&rs)), branches);

    // A listing git cannot make is the Go error of the call
    // (docs/record/git-list-branches.md), not the non-repo body.
    git(&r, &["pack-refs", "--all"]);
    let mut packed = fs::read(r.join(".git/packed-refs")).unwrap();
    packed.extend_from_slice(b"garbage line\n");
    fs::write(r.join(".git/packed-refs"), packed).unwrap();
    assert_eq!(
        call(&d, "git.list_branches", &path_param(&rs)),
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"exit status 128"}}"#
    );
}

/// Build 89cb6289 (`git.info.discovered_root`): `root` is the folder where
/// the trust check's walk found `.git`, links resolved, and `repo` is its
/// name; `core.worktree` does not move it, and a name that starts with `-`
/// or `+` leaves `repo` out.
#[test]
fn info_root_is_the_folder_holding_dot_git() {
    let d = daemon();
    let r = repo(&d.root().join("real"), false);
    let rs = p(&r);
    let body = |repo: &str, root: &str| {
        ok(
            1,
            &format!(r#"{{"isRepo":true,{repo}"branch":"master","root":"{root}","repoSlug":"","defaultBranch":""}}"#),
        )
    };
    // Through a symbolic link, from a subdirectory: the real folder's name.
    fs::create_dir(r.join("sub")).unwrap();
    std::os::unix::fs::symlink(&r, d.root().join("alias")).unwrap();
    let via_link = format!("{}/alias/sub", p(d.root()));
    assert_eq!(
        call(&d, "git.info", &path_param(&via_link)),
        body(r#""repo":"real","#, &rs)
    );
    // core.worktree names another folder: git's --show-toplevel follows it,
    // the walk does not.
    let elsewhere = d.root().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    git(&r, &["config", "core.worktree", &p(&elsewhere)]);
    assert_eq!(git(&r, &["rev-parse", "--show-toplevel"]), p(&elsewhere));
    assert_eq!(call(&d, "git.info", &path_param(&rs)), body(r#""repo":"real","#, &rs));
    git(&r, &["config", "--unset", "core.worktree"]);
    // A linked worktree (a `.git` file): its own folder.
    let wt = d.root().join("wt-linked");
    git(&r, &["worktree", "add", "-q", "-b", "side", &p(&wt)]);
    assert_eq!(
        call(&d, "git.info", &path_param(&p(&wt))),
        ok(
            1,
            &format!(
                r#"{{"isRepo":true,"repo":"wt-linked","branch":"side","root":"{}","repoSlug":"","defaultBranch":""}}"#,
                p(&wt)
            )
        )
    );
    // A folder name that starts with a sign: no `repo` member.
    for name in ["-repo", "+repo"] {
        let signed = repo(&d.root().join(name), false);
        assert_eq!(
            call(&d, "git.info", &path_param(&p(&signed))),
            body("", &p(&signed)),
            "{name}"
        );
    }
}

/// `{"path":<worktree>,"baseRepo":<repo>}`.
fn status_params(path: &str, base: &str) -> String {
    format!(r#"{{"path":"{path}","baseRepo":"{base}"}}"#)
}

#[test]
fn status_clean_and_dirty() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    let rs = p(&r);
    let s0 = format!("{rs}/.claude/worktrees/s0");
    git(&r, &["worktree", "add", "-q", "-b", "s0", &s0]);
    let w = Path::new(&s0);
    assert_eq!(
        call(&d, "git.status", &status_params(&s0, &rs)),
        ok(1, r#"{"isRepo":true,"clean":true}"#)
    );
    fs::write(w.join("a.txt"), b"changed\n").unwrap();
    fs::write(w.join("new"), b"").unwrap();
    assert_eq!(
        call(&d, "git.status", &status_params(&s0, &rs)),
        ok(1, r#"{"isRepo":true,"clean":false,"changes":[" M a.txt","?? new"]}"#)
    );
    fs::write(w.join("b.txt"), b"b").unwrap();
    git(w, &["add", "b.txt"]);
    fs::create_dir_all(w.join("dir/deeper")).unwrap();
    fs::write(w.join("dir/x"), b"").unwrap();
    fs::write(w.join("dir/deeper/y"), b"").unwrap();
    // Every line keeps its columns, the first one too, and
    // an untracked directory is listed file by file.
    assert_eq!(
        call(&d, "git.status", &status_params(&s0, &rs)),
        ok(
            1,
            r#"{"isRepo":true,"clean":false,"changes":[" M a.txt","A  b.txt","?? dir/deeper/y","?? dir/x","?? new"]}"#
        )
    );
    // Only the worktree itself: not its subdirectory, not the repository.
    let not_repo = ok(1, r#"{"isRepo":false,"clean":false}"#);
    assert_eq!(
        call(&d, "git.status", &status_params(&format!("{s0}/dir"), &rs)),
        not_repo
    );
    assert_eq!(call(&d, "git.status", &status_params(&rs, &rs)), not_repo);
    // Status never takes the index lock (GIT_OPTIONAL_LOCKS=0).
    assert!(!r.join(".git/worktrees/s0/index.lock").exists());
}

#[test]
fn list_branches_sorted_by_bytes() {
    let d = daemon();
    let unborn = repo(&d.root().join("u"), true);
    assert_eq!(
        call(&d, "git.list_branches", &path_param(&p(&unborn))),
        ok(1, r#"{"isRepo":true,"branches":[]}"#)
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
        ok(
            1,
            r#"{"isRepo":true,"branches":["Zeta","a-b","alpha","alpha2","feature/x","master"]}"#
        )
    );
}

#[test]
fn worktree_create_and_remove() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    let rs = p(&r);
    let wt = format!("{rs}/.claude/worktrees/wt1");
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
        ok(
            1,
            r#"{"success":false,"error":"not a git repository","errorCode":"not_a_repo"}"#
        )
    );
    assert!(!Path::new(&wt).exists());

    // sourceBranch defaults to the current branch and is echoed; the
    // directories above the worktree are made on a fresh repository.
    let create = |branch: &str, path: &str, extra: &str| {
        call(
            &d,
            "git.worktree_create",
            &format!(r#"{{"baseRepo":"{rs}","branchName":"{branch}","worktreePath":"{path}"{extra}}}"#),
        )
    };
    assert_eq!(
        create("nb", &wt, ""),
        ok(
            1,
            &format!(r#"{{"success":true,"path":"{wt}","sourceBranch":"master","branch":"nb"}}"#)
        )
    );
    assert_eq!(fs::read(Path::new(&wt).join("a.txt")).unwrap(), b"a\n");
    assert_eq!(git(Path::new(&wt), &["symbolic-ref", "--short", "HEAD"]), "nb");

    // An explicit source; any path strictly inside the repository will do.
    git(&r, &["branch", "dev"]);
    let wt2 = format!("{rs}/elsewhere/wt2");
    assert_eq!(
        create("nb2", &wt2, r#","sourceBranch":"dev""#),
        ok(
            1,
            &format!(r#"{{"success":true,"path":"{wt2}","sourceBranch":"dev","branch":"nb2"}}"#)
        )
    );

    // Failure: the branch exists. git's stderr, trimmed; the directory the
    // create made for it is taken back, so a retry can use the path.
    let wt3 = format!("{rs}/.claude/worktrees/wt3");
    let reply = create("nb", &wt3, "");
    assert!(
        reply.starts_with(r#"{"jsonrpc":"2.0","id":1,"result":{"success":false,"error":"git worktree add failed: "#),
        "{reply}"
    );
    assert!(
        reply.ends_with(r#"fatal: a branch named 'nb' already exists","errorCode":"worktree_add_failed"}}"#),
        "{reply}"
    );
    assert!(!Path::new(&wt3).exists(), "the empty leaf is removed");
    // A sourceBranch that names nothing starts at HEAD, echoing the current branch.
    assert_eq!(
        create("nb9", &wt3, r#","sourceBranch":"no-such-branch""#),
        ok(
            1,
            &format!(r#"{{"success":true,"path":"{wt3}","sourceBranch":"master","branch":"nb9"}}"#)
        )
    );

    // A detached HEAD: no current branch to echo.
    git(&r, &["checkout", "-q", "--detach"]);
    let wt4 = format!("{rs}/.claude/worktrees/wt4");
    assert_eq!(
        create("nb4", &wt4, ""),
        ok(1, &format!(r#"{{"success":true,"path":"{wt4}","branch":"nb4"}}"#))
    );

    // Remove: a real (dirty) worktree, an already-deleted one, an unknown
    // path inside the repository.
    let remove = |base: &str, path: &str| {
        call(
            &d,
            "git.worktree_remove",
            &format!(r#"{{"baseRepo":"{base}","worktreePath":"{path}"}}"#),
        )
    };
    fs::write(Path::new(&wt).join("dirty"), b"").unwrap();
    assert_eq!(remove(&rs, &wt), ok(1, r#"{"success":true}"#));
    assert!(!Path::new(&wt).exists());
    fs::remove_dir_all(&wt2).unwrap();
    assert_eq!(remove(&rs, &wt2), ok(1, r#"{"success":true}"#));
    let list = git(&r, &["worktree", "list", "--porcelain"]);
    assert!(!list.contains(&wt) && !list.contains(&wt2), "{list}");
    assert!(list.contains(&wt4), "{list}");
    assert_eq!(
        remove(&rs, &format!("{rs}/.claude/worktrees/nope")),
        ok(1, r#"{"success":true}"#)
    );
    // A non-repo baseRepo: its registrations cannot be examined.
    let plain_wt = format!("{}/.claude/worktrees/wt4", p(&plain));
    assert_eq!(
        remove(&p(&plain), &plain_wt),
        ok(
            1,
            &format!(
                r#"{{"success":false,"error":"failed to remove worktree: could not check whether {plain_wt} is locked (its registrations could not be examined); retry"}}"#
            )
        )
    );
    assert!(Path::new(&wt4).exists());
    assert_eq!(
        call(&d, "git.worktree_remove", "{}"),
        ok(
            1,
            r#"{"success":false,"error":"failed to remove worktree: \"\" does not name a directory"}"#
        )
    );
}

#[test]
fn worktree_on_unborn_head_and_default_repo() {
    let d = daemon();
    let unborn = repo(&d.root().join("u"), true);
    let wt = format!("{}/.claude/worktrees/orphan-wt", p(&unborn));
    // Since 7d193f89 an unborn HEAD fails the add (seed 000: an orphan
    // branch); the leaf the create made is taken back.
    let reply = call(
        &d,
        "git.worktree_create",
        &format!(
            r#"{{"baseRepo":"{}","branchName":"fresh","worktreePath":"{wt}"}}"#,
            p(&unborn)
        ),
    );
    assert!(
        reply.starts_with(r#"{"jsonrpc":"2.0","id":1,"result":{"success":false,"error":"git worktree add failed: "#),
        "{reply}"
    );
    assert!(reply.ends_with(r#""errorCode":"worktree_add_failed"}}"#), "{reply}");
    assert!(!Path::new(&wt).exists());

    // baseRepo absent: the daemon's cwd (the test daemon runs in its root).
    let root = d.root().to_path_buf();
    assert_eq!(
        call(
            &d,
            "git.worktree_create",
            r#"{"branchName":"b","worktreePath":"wt-rel"}"#
        ),
        ok(
            1,
            r#"{"success":false,"error":"not a git repository","errorCode":"not_a_repo"}"#
        )
    );
    repo(&root, false);
    // A relative path is refused, and so is every absolute one:
    // no path is inside the repository an absent baseRepo names.
    assert_eq!(
        call(
            &d,
            "git.worktree_create",
            r#"{"branchName":"b","worktreePath":"wt-rel"}"#
        ),
        ok(
            1,
            r#"{"success":false,"error":"refusing to create worktree: wt-rel is a relative path; choose the session folder by its absolute path, without \"..\"","errorCode":"unsafe_path"}"#
        )
    );
    let inside = format!("{}/.claude/worktrees/w", p(&root));
    assert_eq!(
        call(
            &d,
            "git.worktree_create",
            &format!(r#"{{"branchName":"b","worktreePath":"{inside}"}}"#)
        ),
        ok(
            1,
            &format!(
                r#"{{"success":false,"error":"refusing to create worktree: {inside} is not inside the repository ; session worktrees are only created and removed under \u003crepository\u003e/.claude/worktrees","errorCode":"unsafe_path"}}"#
            )
        )
    );
    assert!(!root.join("wt-rel").exists() && !root.join(".claude").exists());
    assert_eq!(
        call(&d, "git.worktree_remove", r#"{"worktreePath":"wt-rel"}"#),
        ok(
            1,
            r#"{"success":false,"error":"refusing to remove worktree: wt-rel is a relative path; choose the session folder by its absolute path, without \"..\""}"#
        )
    );
}
