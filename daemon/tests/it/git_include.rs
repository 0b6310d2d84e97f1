//! The `.worktreeinclude` pass of build f6010b97 on real repositories: a
//! new worktree gets the git-ignored files the manifest names, searched
//! only in the ignored directories the manifest opens; a manifest that is
//! not a regular file copies nothing.

use crate::common;
use crate::common::git::{git, git_daemon as daemon, repo};
use std::fs;
use std::path::Path;

fn write(root: &Path, rel: &str, body: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, body).unwrap();
}

fn create(d: &common::TestDaemon, r: &Path, branch: &str, wt: &Path) {
    let reply = d.call(
        "git.worktree_create",
        &format!(
            r#"{{"baseRepo":"{}","branchName":"{branch}","worktreePath":"{}"}}"#,
            r.display(),
            wt.display()
        ),
    );
    assert!(reply.contains(r#""success":true"#), "{reply}");
}

/// Every file under `dir` but git's own, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(here) = pending.pop() {
        for entry in fs::read_dir(&here).unwrap() {
            let entry = entry.unwrap();
            let rel = entry.path().strip_prefix(dir).unwrap().to_str().unwrap().to_string();
            if rel == ".git" {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                pending.push(entry.path());
            } else {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

fn fixture(root: &Path) -> std::path::PathBuf {
    let r = repo(&root.join("r"), false);
    write(&r, ".gitignore", "build/\n*.env\n.secret/\nnotes.txt\n");
    write(&r, "sub/tracked.txt", "t\n");
    git(&r, &["add", ".gitignore", "sub/tracked.txt"]);
    git(&r, &["commit", "-q", "-m", "ignores"]);
    for (rel, body) in [
        ("build/a.txt", "a"),
        ("build/keep.cfg", "k"),
        ("app.env", "e"),
        ("sub/x.env", "x"),
        (".secret/key.env", "s"),
        ("notes.txt", "n"),
        ("free.cfg", "f"),
    ] {
        write(&r, rel, body);
    }
    r
}

#[test]
fn the_manifest_selects_ignored_files_in_the_directories_it_opens() {
    let d = daemon();
    let r = fixture(d.root());
    write(&r, ".worktreeinclude", "*.env\nbuild/keep.cfg\nfree.cfg\n");
    let wt = r.join(".claude/worktrees/wt");
    create(&d, &r, "b", &wt);
    assert_eq!(
        files(&wt),
        [
            ".gitignore",
            ".secret/key.env",
            "a.txt",
            "app.env",
            "build/keep.cfg",
            "sub/tracked.txt",
            "sub/x.env"
        ]
    );
    assert_eq!(fs::read_to_string(wt.join("build/keep.cfg")).unwrap(), "k");
}

#[test]
fn a_manifest_that_is_no_regular_file_copies_nothing() {
    let d = daemon();
    let r = fixture(d.root());
    write(&r, "elsewhere", "*.env\n");
    std::os::unix::fs::symlink(r.join("elsewhere"), r.join(".worktreeinclude")).unwrap();
    let wt = r.join(".claude/worktrees/wt");
    create(&d, &r, "b", &wt);
    assert_eq!(files(&wt), [".gitignore", "a.txt", "sub/tracked.txt"]);
}

/// Audit N2: a seeded copy never grants more than its source. A `0600`
/// `.env` and `.claude/settings.local.json` stayed `0600`-private in the
/// repository but came out `0644` in the worktree, readable by every
/// user who can traverse it; the reference copies `0666` less the umask.
#[test]
fn seeded_copies_are_no_wider_than_their_sources() {
    use std::os::unix::fs::PermissionsExt;
    let d = daemon();
    let r = fixture(d.root());
    write(&r, ".worktreeinclude", "*.env\nbuild/keep.cfg\n");
    let private = |rel: &str, mode: u32| {
        fs::set_permissions(r.join(rel), fs::Permissions::from_mode(mode)).unwrap();
    };
    private("app.env", 0o600);
    private(".secret", 0o700);
    private(".secret/key.env", 0o640);
    write(&r, ".claude/settings.local.json", "{\"env\":{\"API_KEY\":\"k\"}}");
    write(
        &r,
        ".gitignore",
        "build/\n*.env\n.secret/\nnotes.txt\n.claude/settings.local.json\n",
    );
    private(".claude/settings.local.json", 0o600);
    let wt = r.join(".claude/worktrees/wt");
    create(&d, &r, "b", &wt);
    let mode = |rel: &str| fs::metadata(wt.join(rel)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("app.env"), 0o600, "the manifest pass");
    assert_eq!(mode(".claude/settings.local.json"), 0o600, "the .claude pass");
    assert_eq!(mode(".secret/key.env") & 0o007, 0, "no access for others");
    assert_eq!(mode(".secret") & 0o077, 0, "a directory made on the way is as private");
    // What was readable stays readable (less the umask, as before).
    assert_eq!(mode("build/keep.cfg") & 0o600, 0o600);
    assert_eq!(fs::read_to_string(wt.join("app.env")).unwrap(), "e");
}
