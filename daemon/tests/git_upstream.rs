//! git.* changes of reference build 4534d86 against real repositories:
//! `git.worktree_create` `timeoutMs` (each phase a deadline can cut, with
//! hooks and filters that make git slow on purpose), and `git.status`
//! ignoring in-repo `.gitattributes`, keeping the first line's leading
//! space, and reporting a linked worktree's own changes.

#![allow(clippy::unwrap_used)] // a test or bench that unwraps fails loudly; the lint guards the daemon

mod common;

use common::git::{git, git_daemon as daemon, repo};
use common::TestDaemon;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn ok(result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#)
}

fn p(path: &Path) -> String {
    path.to_str().expect("utf-8 temp path").to_string()
}

fn create(d: &TestDaemon, repo: &Path, branch: &str, wt: &str, extra: &str) -> String {
    d.call(
        "git.worktree_create",
        &format!(
            r#"{{"baseRepo":"{}","branchName":"{branch}","worktreePath":"{wt}"{extra}}}"#,
            p(repo)
        ),
    )
}

fn hook(repo: &Path, name: &str, body: &str) {
    let path = repo.join(".git/hooks").join(name);
    fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
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
    let gate = Gate::new(d.root());
    // The branch creation runs the reference-transaction hook: a held add.
    // The hook is git's grandchild (`worktree add` runs `git branch`).
    let pids = d.root().join("hook-pids");
    let record = format!("echo $$ >> '{}'; ", pids.display());
    hook(&r, "reference-transaction", &(record + &gate.wait_cmd()));
    let wt = p(&d.root().join("wt"));
    let t = Instant::now();
    assert_eq!(
        create(&d, &r, "b", &wt, r#","timeoutMs":300"#),
        ok(
            r#"{"success":false,"error":"git worktree add timed out after 300ms (deadline expired before the checkout started)","errorCode":"timeout"}"#
        )
    );
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    // The timeout took git's whole group down, the held hook included,
    // while the gate is still closed.
    let hooks: Vec<i32> = fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert!(!hooks.is_empty());
    assert!(
        common::wait_until(Duration::from_secs(10), || hooks
            .iter()
            .all(|&pid| common::pid_gone(pid))),
        "a hook of the timed-out git outlived it: {hooks:?}"
    );
    drop(gate);
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
    let wt = p(&d.root().join("wt"));
    let t = Instant::now();
    assert_eq!(
        create(&d, &r, "b", &wt, r#","timeoutMs":5000"#),
        ok(
            r#"{"success":false,"error":"git worktree add timed out after 5000ms (deadline expired during the checkout): signal: killed","errorCode":"timeout"}"#
        )
    );
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

#[test]
fn worktree_create_within_the_deadline_is_unchanged() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    let wt = p(&d.root().join("wt"));
    assert_eq!(
        create(&d, &r, "b", &wt, r#","timeoutMs":20000"#),
        ok(&format!(r#"{{"success":true,"path":"{wt}","sourceBranch":"master"}}"#))
    );
    assert_eq!(fs::read(Path::new(&wt).join("a.txt")).unwrap(), b"a\n");
    assert_eq!(git(Path::new(&wt), &["symbolic-ref", "--short", "HEAD"]), "b");
    assert_eq!(
        git(Path::new(&wt), &["status", "--porcelain"]),
        "",
        "index matches HEAD"
    );
    // Failures keep their text and code.
    let reply = create(&d, &r, "b", &p(&d.root().join("wt2")), r#","timeoutMs":20000"#);
    assert!(
        reply.ends_with(r#"fatal: a branch named 'b' already exists","errorCode":"worktree_add_failed"}}"#),
        "{reply}"
    );
    // 0 and negative arm nothing.
    let wt3 = p(&d.root().join("wt3"));
    assert_eq!(
        create(&d, &r, "c", &wt3, r#","timeoutMs":0"#),
        ok(&format!(r#"{{"success":true,"path":"{wt3}","sourceBranch":"master"}}"#))
    );
    // A relative worktreePath is relative to the repo, in both phases.
    assert_eq!(
        create(&d, &r, "rel", "rel-wt", r#","timeoutMs":20000"#),
        ok(r#"{"success":true,"path":"rel-wt","sourceBranch":"master"}"#)
    );
    assert_eq!(fs::read(r.join("rel-wt/a.txt")).unwrap(), b"a\n");
    // An unborn HEAD: nothing to check out, no sourceBranch.
    let u = repo(&d.root().join("u"), true);
    let wt4 = p(&d.root().join("wt4"));
    assert_eq!(
        create(&d, &u, "fresh", &wt4, r#","timeoutMs":20000"#),
        ok(&format!(r#"{{"success":true,"path":"{wt4}"}}"#))
    );
}

fn status(d: &TestDaemon, path: &Path) -> String {
    d.call("git.status", &format!(r#"{{"path":"{}"}}"#, p(path)))
}

#[test]
fn status_keeps_the_first_lines_leading_space() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    fs::write(r.join("a.txt"), b"changed\n").unwrap();
    fs::write(r.join("new"), b"n").unwrap();
    assert_eq!(
        status(&d, &r),
        ok(r#"{"isRepo":true,"clean":false,"changes":[" M a.txt","?? new"]}"#)
    );
    git(&r, &["add", "a.txt"]);
    assert_eq!(
        status(&d, &r),
        ok(r#"{"isRepo":true,"clean":false,"changes":["M  a.txt","?? new"]}"#)
    );
}

#[test]
fn status_ignores_in_repo_gitattributes_and_runs_no_filter() {
    let d = daemon();
    let r = repo(&d.root().join("r"), false);
    fs::write(r.join(".gitattributes"), "a.txt filter=evil\n").unwrap();
    git(&r, &["add", ".gitattributes"]);
    git(&r, &["commit", "-q", "-m", "attrs"]);
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
        .open(r.join("a.txt"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    assert_eq!(status(&d, &r), ok(r#"{"isRepo":true,"clean":true}"#));
    assert!(!marker.exists(), "the repo's filter ran during git.status");
    // Control: plain git, which reads .gitattributes, does run it.
    let _ = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&r)
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
    let wt = d.root().join("wt");
    git(&r, &["worktree", "add", "-q", "-b", "side", &p(&wt)]);
    fs::write(wt.join("a.txt"), b"side\n").unwrap();
    fs::write(wt.join("only-here"), b"x").unwrap();
    assert_eq!(
        status(&d, &wt),
        ok(r#"{"isRepo":true,"clean":false,"changes":[" M a.txt","?? only-here"]}"#)
    );
    assert_eq!(status(&d, &r), ok(r#"{"isRepo":true,"clean":true}"#));
    fs::create_dir(wt.join("sub")).unwrap();
    assert_eq!(
        status(&d, &wt.join("sub")),
        ok(r#"{"isRepo":true,"clean":false,"changes":[" M a.txt","?? only-here"]}"#)
    );
}
