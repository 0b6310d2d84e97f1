//! Real repositories for git tests: the git CLI with a fixed identity, no
//! user or system config and no hooks, and a daemon whose own git ignores
//! user config too.

use super::TestDaemon;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs git in `dir`; panics with git's stderr on failure, returns trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Remora Test", "-c", "user.email=test@example.com"])
        .args(["-c", "init.defaultBranch=master", "-c", "commit.gpgsign=false"])
        .args(["-c", "core.hooksPath=/dev/null"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A fresh repo at `dir` (created), with one commit unless `unborn`.
pub fn repo(dir: &Path, unborn: bool) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    if !unborn {
        fs::write(dir.join("a.txt"), b"a\n").unwrap();
        git(dir, &["add", "a.txt"]);
        git(dir, &["commit", "-q", "-m", "first"]);
    }
    fs::canonicalize(dir).unwrap()
}

/// A daemon whose git keeps user and system config out too.
pub fn git_daemon() -> TestDaemon {
    TestDaemon::start_with(&[], &[("GIT_CONFIG_NOSYSTEM", "1"), ("GIT_CONFIG_GLOBAL", "/dev/null")])
}

/// Every path under `dir` (links not followed) with its kind, sorted: two
/// equal snapshots mean nothing was created, removed or retyped.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(here) = pending.pop() {
        for entry in std::fs::read_dir(&here).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                pending.push(entry.path());
            }
            out.push((entry.path(), format!("{kind:?}")));
        }
    }
    out.sort();
    out
}

/// The full names of `r`'s local branches, one a line.
pub fn branches(r: &Path) -> String {
    git(r, &["for-each-ref", "--format=%(refname)", "refs/heads/"])
}
