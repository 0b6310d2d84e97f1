//! git.* changes of reference builds 4534d86 and f6010b97 against real
//! repositories: the start commit of a new worktree's branch;
//! `git.worktree_create` `timeoutMs` (each phase a deadline can cut, with
//! hooks and filters that make git slow on purpose), and `git.status`
//! ignoring in-repo `.gitattributes`, keeping the first line's leading
//! space, and reporting a linked worktree's own changes.

use crate::common::git::{git, git_daemon as daemon, repo};
use crate::common::reply::{ok, p};
use crate::common::TestDaemon;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn create(d: &TestDaemon, repo: &Path, branch: &str, wt: &str, extra: &str) -> String {
    d.call(
        "git.worktree_create",
        &format!(
            r#"{{"baseRepo":"{}","branchName":"{branch}","worktreePath":"{wt}"{extra}}}"#,
            p(repo)
        ),
    )
}

/// A FIFO a hook or filter blocks on (`read x < FIFO`) until the test
/// releases it: git stays in the phase under test however slow the
/// machine, and a blocked script the daemon did not kill exits once
/// released instead of lingering.
struct Gate(std::path::PathBuf);

impl Gate {
    fn new(dir: &Path) -> Gate {
        let path = dir.join("gate");
        let made = Command::new("mkfifo").arg(&path).status().unwrap();
        assert!(made.success());
        Gate(path)
    }

    fn wait_cmd(&self) -> String {
        format!("read x < '{}'", self.0.display())
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        use std::os::unix::fs::OpenOptionsExt;
        // Non-blocking: with no reader left, the open fails instead of hanging.
        let _ = fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.0)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"go\n"));
    }
}

#[test]
fn worktree_create_timeout_before_the_checkout() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    let wt = p(&r.join(".claude/worktrees/wt"));
    // No add finishes within 1 ms. The add is waited for, not killed, and
    // what it made is rolled back: the leaf, the registration and the new
    // branch go; the parents made stay.
    assert_eq!(
        create(&d, &r, "b", &wt, r#","timeoutMs":1"#),
        ok(
            1,
            r#"{"success":false,"error":"git worktree add timed out after 1ms (deadline expired before the checkout started)","errorCode":"timeout"}"#
        )
    );
    assert!(!Path::new(&wt).exists());
    assert!(r.join(".claude/worktrees").is_dir());
    assert_eq!(fs::read_dir(r.join(".git/worktrees")).unwrap().count(), 0);
    assert_eq!(
        git(&r, &["for-each-ref", "--format=%(refname)", "refs/heads/"]),
        "refs/heads/master"
    );
    // So the same request succeeds without the deadline.
    assert!(create(&d, &r, "b", &wt, "").contains(r#""success":true"#));
}

#[test]
fn worktree_create_timeout_during_the_checkout() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    fs::write(r.join(".gitattributes"), "a.txt filter=slow\n").unwrap();
    git(&r, &["add", ".gitattributes"]);
    git(&r, &["commit", "-q", "-m", "attrs"]);
    // Checking a.txt out runs its smudge filter, held until the test ends;
    // the add before it has the whole 5 s budget.
    let gate = Gate::new(d.root());
    git(
        &r,
        &["config", "filter.slow.smudge", &format!("{}; cat", gate.wait_cmd())],
    );
    let wt = p(&r.join(".claude/worktrees/wt"));
    let t = Instant::now();
    assert_eq!(
        create(&d, &r, "b", &wt, r#","timeoutMs":5000"#),
        ok(
            1,
            r#"{"success":false,"error":"git worktree add timed out after 5000ms (deadline expired during the checkout): signal: killed","errorCode":"timeout"}"#
        )
    );
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    // Rolled back as a failed checkout is.
    assert!(!Path::new(&wt).exists());
    assert_eq!(fs::read_dir(r.join(".git/worktrees")).unwrap().count(), 0);
    assert_eq!(
        git(&r, &["for-each-ref", "--format=%(refname)", "refs/heads/"]),
        "refs/heads/master"
    );
}

#[test]
fn worktree_create_within_the_deadline_is_unchanged() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    let wt = p(&r.join(".claude/worktrees/wt"));
    assert_eq!(
        create(&d, &r, "b", &wt, r#","timeoutMs":20000"#),
        ok(
            1,
            &format!(r#"{{"success":true,"path":"{wt}","sourceBranch":"master","branch":"b"}}"#)
        )
    );
    assert_eq!(fs::read(Path::new(&wt).join("a.txt")).unwrap(), b"a\n");
    assert_eq!(git(Path::new(&wt), &["symbolic-ref", "--short", "HEAD"]), "b");
    assert_eq!(
        git(Path::new(&wt), &["status", "--porcelain"]),
        "",
        "index matches HEAD"
    );
    // Failures keep their text and code.
    let reply = create(
        &d,
        &r,
        "b",
        &p(&r.join(".claude/worktrees/wt2")),
        r#","timeoutMs":20000"#,
    );
    assert!(
        reply.ends_with(r#"fatal: a branch named 'b' already exists","errorCode":"worktree_add_failed"}}"#),
        "{reply}"
    );
    // 0 and negative arm nothing.
    let wt3 = p(&r.join(".claude/worktrees/wt3"));
    assert_eq!(
        create(&d, &r, "c", &wt3, r#","timeoutMs":0"#),
        ok(
            1,
            &format!(r#"{{"success":true,"path":"{wt3}","sourceBranch":"master","branch":"c"}}"#)
        )
    );
    // The location rules come before the deadline.
    assert_eq!(
        create(&d, &r, "rel", "rel-wt", r#","timeoutMs":20000"#),
        ok(
            1,
            r#"{"success":false,"error":"refusing to create worktree: rel-wt is a relative path; choose the session folder by its absolute path, without \"..\"","errorCode":"unsafe_path"}"#
        )
    );
    // An unborn HEAD fails the add under a deadline too.
    let u = repo(&d.root().join("u"), true);
    let wt4 = p(&u.join(".claude/worktrees/wt4"));
    let reply = create(&d, &u, "fresh", &wt4, r#","timeoutMs":20000"#);
    assert!(reply.ends_with(r#""errorCode":"worktree_add_failed"}}"#), "{reply}");
}

/// A status of the session worktree `s0` of `r` (made here), as a client
/// of build 7d193f89 asks for one.
fn session(r: &Path) -> std::path::PathBuf {
    let s0 = r.join(".claude/worktrees/s0");
    git(r, &["worktree", "add", "-q", "-b", "s0", &p(&s0)]);
    s0
}

fn status(d: &TestDaemon, path: &Path, base: &Path) -> String {
    d.call(
        "git.status",
        &format!(r#"{{"path":"{}","baseRepo":"{}"}}"#, p(path), p(base)),
    )
}

#[test]
fn status_keeps_the_first_lines_leading_space() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    let s0 = session(&r);
    fs::write(s0.join("a.txt"), b"changed\n").unwrap();
    fs::write(s0.join("new"), b"n").unwrap();
    assert_eq!(
        status(&d, &s0, &r),
        ok(1, r#"{"isRepo":true,"clean":false,"changes":[" M a.txt","?? new"]}"#)
    );
    git(&s0, &["add", "a.txt"]);
    assert_eq!(
        status(&d, &s0, &r),
        ok(1, r#"{"isRepo":true,"clean":false,"changes":["M  a.txt","?? new"]}"#)
    );
}

#[test]
fn status_ignores_in_repo_gitattributes_and_runs_no_filter() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    fs::write(r.join(".gitattributes"), "a.txt filter=evil\n").unwrap();
    git(&r, &["add", ".gitattributes"]);
    git(&r, &["commit", "-q", "-m", "attrs"]);
    let s0 = session(&r);
    let marker = d.root().join("filter-ran");
    // A clean filter that would make a.txt look modified, and say it ran.
    git(
        &r,
        &["config", "filter.evil.clean", &format!("touch {}; tr a b", p(&marker))],
    );
    // Same content, new mtime: git must look at the content again.
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(s0.join("a.txt"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    assert_eq!(status(&d, &s0, &r), ok(1, r#"{"isRepo":true,"clean":true}"#));
    assert!(!marker.exists(), "the repo's filter ran during git.status");
    // Control: plain git, which reads .gitattributes, does run it.
    let _ = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&s0)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(marker.exists(), "control: the filter is live");
}

#[test]
fn status_of_a_linked_worktree_is_its_own() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    let wt = session(&r);
    fs::write(wt.join("a.txt"), b"side\n").unwrap();
    fs::write(wt.join("only-here"), b"x").unwrap();
    fs::write(r.join("a.txt"), b"main\n").unwrap();
    assert_eq!(
        status(&d, &wt, &r),
        ok(
            1,
            r#"{"isRepo":true,"clean":false,"changes":[" M a.txt","?? only-here"]}"#
        )
    );
    // A worktree created beside the repository counts too.
    let beside = d.root().join("beside");
    git(&r, &["worktree", "add", "-q", "-b", "beside", &p(&beside)]);
    assert_eq!(status(&d, &beside, &r), ok(1, r#"{"isRepo":true,"clean":true}"#));
}

#[test]
fn start_commit_prefers_origin_unless_the_local_branch_is_ahead_cleanly() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    let first = git(&r, &["rev-parse", "HEAD"]);
    let commit = |file: &str| {
        fs::create_dir_all(r.join(file).parent().unwrap()).unwrap();
        fs::write(r.join(file), file).unwrap();
        git(&r, &["add", file]);
        git(&r, &["commit", "-q", "-m", file]);
        git(&r, &["rev-parse", "HEAD"])
    };
    let ahead = commit("remote.txt");
    git(&r, &["update-ref", "refs/remotes/origin/feat", &ahead]);
    git(&r, &["update-ref", "refs/remotes/origin/only-remote", &ahead]);
    git(&r, &["reset", "-q", "--hard", &first]);
    let head = |wt: &str| git(Path::new(wt), &["rev-parse", "HEAD"]);
    let made = |branch: &str, source: &str| {
        let wt = p(&r.join(".claude/worktrees").join(branch));
        let reply = create(&d, &r, branch, &wt, &format!(r#","sourceBranch":"{source}""#));
        assert_eq!(
            reply,
            ok(
                1,
                &format!(r#"{{"success":true,"path":"{wt}","sourceBranch":"{source}","branch":"{branch}"}}"#)
            )
        );
        wt
    };
    // Local behind origin: origin's commit, by its full id.
    git(&r, &["branch", "feat", &first]);
    let wt = made("a", "feat");
    assert_eq!(head(&wt), ahead);
    let reflog = git(&r, &["reflog", "show", "--format=%gs", "refs/heads/a"]);
    assert_eq!(reflog, format!("branch: Created from {ahead}"));
    let config = fs::read_to_string(r.join(".git/config")).unwrap();
    assert!(!config.contains("[branch \"a\"]"), "no upstream: {config}");
    // Only origin has it.
    assert_eq!(head(&made("b", "only-remote")), ahead);
    // Local ahead of the merge base without touching .claude: the local one.
    git(&r, &["checkout", "-q", "feat"]);
    let local = commit("src/x.txt");
    assert_eq!(head(&made("c", "feat")), local);
    // Local changed .claude (any case) since the merge base: origin's.
    commit(".Claude/settings.json");
    assert_eq!(head(&made("e", "feat")), ahead);
}
