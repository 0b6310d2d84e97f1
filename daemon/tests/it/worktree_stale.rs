//! `git.worktree_create`'s registration steps of build 89cb6289 on real
//! repositories (`Switch::WorktreeRegistration`): the stale entry of the
//! new path removed before the add, and the tests of the registration git
//! made, run after the add and before the checkout. The states the
//! reference's cells reach with a daemon `GIT_COMMON_DIR` (which remora
//! never lets reach git) are made by a git wrapper first in the daemon's
//! `PATH`: it runs the real git and, after a successful `worktree add`,
//! changes what the add left (as the record's wrapper rows D-11 to D-13
//! and P-d do). Build f6010b97, which has none of these steps, is driven
//! through the same states to show it keeps its answers.

use crate::common::git::{branches, git, repo};
use crate::common::reply::{ok, p};
use crate::common::TestDaemon;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

const WITH_STEPS: &str = "89cb6289a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5";
const WITHOUT: &str = "f6010b97a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5";

const NOT_OURS: &str = "carries a .git file that does not name this repository's own worktree admin directory";
const NOT_POPULATED: &str = "was not populated by git worktree add";
const STALE: &str = "carries a .git file naming an admin entry other than the one just created for it";
const OTHER_RECORD: &str = "carries a .git file naming an admin directory whose own record is of a different worktree";

/// A git wrapper in its own folder: the real git, then, after a `worktree
/// add` that succeeded, the shell script `after-add` of that folder when
/// the test wrote one; when the test wrote `read-tree`, a checkout runs
/// that script and fails instead of running git.
struct Wrapper {
    dir: PathBuf,
    _home: tempfile::TempDir,
}

impl Wrapper {
    fn new() -> Wrapper {
        let home = tempfile::tempdir().unwrap();
        let dir = fs::canonicalize(home.path()).unwrap();
        let real = real_git();
        let script = format!(
            "#!/bin/sh\ncase \" $* \" in\n*\" read-tree \"*)\n  if [ -f \"{d}/read-tree\" ]; then sh \"{d}/read-tree\"; echo 'fatal: forced read-tree failure' >&2; exit 128; fi ;;\nesac\n\"{real}\" \"$@\"\nrc=$?\ncase \" $* \" in\n*\" worktree add \"*)\n  if [ $rc -eq 0 ] && [ -f \"{d}/after-add\" ]; then sh \"{d}/after-add\"; fi ;;\nesac\nexit $rc\n",
            real = real.display(),
            d = dir.display()
        );
        fs::write(dir.join("git"), script).unwrap();
        fs::set_permissions(dir.join("git"), fs::Permissions::from_mode(0o755)).unwrap();
        Wrapper { dir, _home: home }
    }

    /// What runs after the next successful adds.
    fn after_add(&self, script: &str) {
        fs::write(self.dir.join("after-add"), script).unwrap();
    }

    /// What runs in place of the next checkouts, which then fail.
    fn failing_checkout(&self, script: &str) {
        fs::write(self.dir.join("read-tree"), script).unwrap();
    }

    /// A daemon stamped `stamp` whose git is this wrapper.
    fn daemon(&self, stamp: &str) -> TestDaemon {
        let path = format!("{}:{}", self.dir.display(), std::env::var("PATH").unwrap_or_default());
        TestDaemon::start_with(
            &["-reference-build", stamp],
            &[
                ("GIT_CONFIG_NOSYSTEM", "1"),
                ("GIT_CONFIG_GLOBAL", "/dev/null"),
                ("PATH", &path),
            ],
        )
    }
}

/// The first `git` on this process's `PATH`.
fn real_git() -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("git"))
        .find(|candidate| candidate.is_file())
        .expect("git on PATH")
}

/// A daemon stamped `stamp` with the plain git.
fn daemon(stamp: &str) -> TestDaemon {
    TestDaemon::start_with(
        &["-reference-build", stamp],
        &[("GIT_CONFIG_NOSYSTEM", "1"), ("GIT_CONFIG_GLOBAL", "/dev/null")],
    )
}

fn create(d: &TestDaemon, r: &Path, wt: &Path, branch: &str, extra: &str) -> String {
    d.call(
        "git.worktree_create",
        &format!(
            r#"{{"baseRepo":"{}","branchName":"{branch}","worktreePath":"{}"{extra}}}"#,
            p(r),
            p(wt)
        ),
    )
}

fn created(wt: &Path, branch: &str) -> String {
    ok(
        1,
        &format!(
            r#"{{"success":true,"path":"{}","sourceBranch":"master","branch":"{branch}"}}"#,
            p(wt)
        ),
    )
}

/// The refusal frame for `leaf` (already spelled as the text names it).
fn refused(leaf: &Path, why: &str) -> String {
    ok(
        1,
        &format!(
            r#"{{"success":false,"error":"refusing to create worktree: {} {why}","errorCode":"unsafe_path"}}"#,
            p(leaf)
        ),
    )
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A registration of `leaf` in `r` with the branch `branch`, whose
/// worktree directory is then deleted: a stale entry as git leaves it.
fn stale_entry(r: &Path, leaf: &Path, branch: &str) -> PathBuf {
    git(r, &["worktree", "add", "-q", "-b", branch, &p(leaf)]);
    fs::remove_dir_all(leaf).unwrap();
    let entry = r.join(".git/worktrees").join(leaf.file_name().unwrap());
    assert!(entry.is_dir());
    entry
}

/// After a refused registration nothing was rolled back: the leaf holds
/// its `.git` file only, git's registration has no index, the branch stays.
fn nothing_rolled_back(r: &Path, leaf: &Path, registration: &Path, branch: &str) {
    assert_eq!(names(leaf), [".git"]);
    assert!(registration.join("HEAD").is_file(), "{}", registration.display());
    assert!(!registration.join("index").exists());
    assert!(branches(r).lines().any(|b| b == format!("refs/heads/{branch}")));
}

#[test]
fn the_one_stale_entry_of_the_path_goes_before_the_add() {
    let d = daemon(WITH_STEPS);
    let r = repo(&d.root().join("r"), false);
    let leaf = r.join(".claude/worktrees/w1");
    let entry = stale_entry(&r, &leaf, "old");
    assert_eq!(create(&d, &r, &leaf, "b1", ""), created(&leaf, "b1"));
    // The new registration took the old one's name.
    assert_eq!(names(&r.join(".git/worktrees")), ["w1"]);
    assert_eq!(fs::read_to_string(entry.join("HEAD")).unwrap(), "ref: refs/heads/b1\n");
    assert!(leaf.join("a.txt").is_file());

    // An entry of another name whose record is spelled `<L>/.git/` (cells
    // A1 and A8) goes too.
    let leaf = r.join(".claude/worktrees/w2");
    let old = stale_entry(&r, &leaf, "old2");
    let renamed = r.join(".git/worktrees/old9");
    fs::rename(&old, &renamed).unwrap();
    fs::write(renamed.join("gitdir"), format!("{}/.git/", p(&leaf))).unwrap();
    assert_eq!(create(&d, &r, &leaf, "b2", ""), created(&leaf, "b2"));
    assert_eq!(names(&r.join(".git/worktrees")), ["w1", "w2"]);
}

#[test]
fn without_the_step_the_stale_entry_stays_and_git_refuses_the_add() {
    let d = daemon(WITHOUT);
    let r = repo(&d.root().join("r"), false);
    let leaf = r.join(".claude/worktrees/w1");
    let entry = stale_entry(&r, &leaf, "old");
    let reply = create(&d, &r, &leaf, "b1", "");
    assert!(
        reply.starts_with(r#"{"jsonrpc":"2.0","id":1,"result":{"success":false,"error":"git worktree add failed: "#)
            && reply.contains("already registered worktree")
            && reply.ends_with(r#","errorCode":"worktree_add_failed"}}"#),
        "{reply}"
    );
    assert!(entry.join("gitdir").is_file());
}

#[test]
fn a_locked_stale_entry_and_two_stale_entries_stay() {
    let d = daemon(WITH_STEPS);
    let r = repo(&d.root().join("r"), false);
    // Locked, with a record git itself does not match (cell A9 p): kept,
    // and git names the new registration w11.
    let leaf = r.join(".claude/worktrees/w1");
    let entry = stale_entry(&r, &leaf, "old");
    fs::write(entry.join("gitdir"), format!("{}/.git/", p(&leaf))).unwrap();
    fs::write(entry.join("locked"), b"").unwrap();
    assert_eq!(create(&d, &r, &leaf, "b1", ""), created(&leaf, "b1"));
    assert_eq!(names(&r.join(".git/worktrees")), ["w1", "w11"]);
    assert!(entry.join("locked").exists() && entry.join("HEAD").is_file());

    // Two stale entries (cell S2): none goes.
    let leaf = r.join(".claude/worktrees/w2");
    for (branch, name) in [("old8", "old8"), ("old9", "old9")] {
        let old = stale_entry(&r, &leaf, branch);
        fs::rename(&old, r.join(".git/worktrees").join(name)).unwrap();
        fs::write(
            r.join(".git/worktrees").join(name).join("gitdir"),
            format!("{}/.git/", p(&leaf)),
        )
        .unwrap();
    }
    assert_eq!(create(&d, &r, &leaf, "b2", ""), created(&leaf, "b2"));
    assert_eq!(names(&r.join(".git/worktrees")), ["old8", "old9", "w1", "w11", "w2"]);
}

#[test]
fn a_stale_entry_left_in_place_is_refused_after_the_add() {
    let wrapper = Wrapper::new();
    let d = wrapper.daemon(WITH_STEPS);
    let r = repo(&d.root().join("r"), false);
    let leaf = r.join(".claude/worktrees/w1");
    let entry = stale_entry(&r, &leaf, "old");
    fs::write(entry.join("gitdir"), format!("{}/.git/", p(&leaf))).unwrap();
    fs::write(entry.join("locked"), b"").unwrap();
    // git registers the new worktree as w11; the leaf's `.git` file is
    // then pointed at the kept entry w1 (the state of cells A9 g, A9b g).
    wrapper.after_add(&format!("printf 'gitdir: {}\\n' > '{}/.git'\n", p(&entry), p(&leaf)));
    assert_eq!(create(&d, &r, &leaf, "b1", ""), refused(&leaf, STALE));
    nothing_rolled_back(&r, &leaf, &r.join(".git/worktrees/w11"), "b1");
    assert!(entry.join("locked").exists());
}

#[test]
fn test_1_a_git_file_naming_a_folder_not_called_worktrees() {
    let wrapper = Wrapper::new();
    let d = wrapper.daemon(WITH_STEPS);
    let r = repo(&d.root().join("r"), false);
    // Row P-d: `gitdir: /elsewhere/WTREG/w1`.
    let leaf = r.join(".claude/worktrees/w1");
    wrapper.after_add(&format!(
        "printf 'gitdir: /elsewhere/WTREG/w1\\n' > '{}/.git'\n",
        p(&leaf)
    ));
    assert_eq!(create(&d, &r, &leaf, "b1", ""), refused(&leaf, NOT_OURS));
    nothing_rolled_back(&r, &leaf, &r.join(".git/worktrees/w1"), "b1");

    // The test comes before the deadline (row D-9): an add that outlasts
    // `timeoutMs` still gets the refusal, not `timeout`.
    let leaf = r.join(".claude/worktrees/w2");
    wrapper.after_add(&format!(
        "sleep 0.3\nprintf 'gitdir: /elsewhere/WTREG/w2\\n' > '{}/.git'\n",
        p(&leaf)
    ));
    assert_eq!(
        create(&d, &r, &leaf, "b2", r#","timeoutMs":1"#),
        refused(&leaf, NOT_OURS)
    );
    nothing_rolled_back(&r, &leaf, &r.join(".git/worktrees/w2"), "b2");

    // A baseRepo and a path sent through a link (cell T1): the text names
    // the leaf with its parent's links resolved.
    let link = d.root().join("rl");
    symlink(&r, &link).unwrap();
    let sent = link.join(".claude/worktrees/w3");
    let leaf = r.join(".claude/worktrees/w3");
    wrapper.after_add(&format!(
        "printf 'gitdir: /elsewhere/WTREG/w3\\n' > '{}/.git'\n",
        p(&leaf)
    ));
    assert_eq!(create(&d, &link, &sent, "b3", ""), refused(&leaf, NOT_OURS));

    // f6010b97 runs no test: the checkout reads the `.git` file and fails,
    // and the create is rolled back.
    let d = wrapper.daemon(WITHOUT);
    let leaf = r.join(".claude/worktrees/w4");
    wrapper.after_add(&format!(
        "printf 'gitdir: /elsewhere/WTREG/w4\\n' > '{}/.git'\n",
        p(&leaf)
    ));
    let reply = create(&d, &r, &leaf, "b4", "");
    assert!(
        reply.starts_with(
            r#"{"jsonrpc":"2.0","id":1,"result":{"success":false,"error":"git worktree add failed (checkout): "#
        ),
        "{reply}"
    );
    assert!(!leaf.exists());
}

#[test]
fn test_2_no_registrations_folder_or_no_entry_of_the_name() {
    let wrapper = Wrapper::new();
    let d = wrapper.daemon(WITH_STEPS);
    let r = repo(&d.root().join("r"), false);
    // No `worktrees` folder (rows B-E1, D-8): "was not populated".
    let leaf = r.join(".claude/worktrees/w1");
    wrapper.after_add(&format!("mv '{0}/.git/worktrees' '{0}/.git/moved'\n", p(&r)));
    assert_eq!(create(&d, &r, &leaf, "b1", ""), refused(&leaf, NOT_POPULATED));
    nothing_rolled_back(&r, &leaf, &r.join(".git/moved/w1"), "b1");

    // The folder with no entry of the name (cell P-p): the text of test 1.
    let leaf = r.join(".claude/worktrees/w2");
    wrapper.after_add(&format!("mv '{0}/.git/worktrees/w2' '{0}/.git/worktrees/w9'\n", p(&r)));
    assert_eq!(create(&d, &r, &leaf, "b2", ""), refused(&leaf, NOT_OURS));
    nothing_rolled_back(&r, &leaf, &r.join(".git/worktrees/w9"), "b2");
}

#[test]
fn test_3_a_commondir_that_does_not_lead_back() {
    let wrapper = Wrapper::new();
    let d = wrapper.daemon(WITH_STEPS);
    let r = repo(&d.root().join("r"), false);
    // Row D-13: `../../x`.
    let leaf = r.join(".claude/worktrees/w1");
    let entry = r.join(".git/worktrees/w1");
    wrapper.after_add(&format!("printf '../../x\\n' > '{}/commondir'\n", p(&entry)));
    assert_eq!(create(&d, &r, &leaf, "b1", ""), refused(&leaf, NOT_OURS));
    nothing_rolled_back(&r, &leaf, &entry, "b1");

    // A commondir that is a folder cannot be read as a file.
    let leaf = r.join(".claude/worktrees/w2");
    let entry = r.join(".git/worktrees/w2");
    wrapper.after_add(&format!("rm '{0}/commondir' && mkdir '{0}/commondir'\n", p(&entry)));
    assert_eq!(create(&d, &r, &leaf, "b2", ""), refused(&leaf, NOT_OURS));
}

#[test]
fn test_4_a_gitdir_record_that_cannot_be_read_as_a_file() {
    let wrapper = Wrapper::new();
    let d = wrapper.daemon(WITH_STEPS);
    let r = repo(&d.root().join("r"), false);
    // Cells P-j (removed) and P-i (an empty folder).
    for (n, change) in [("1", "rm '{e}/gitdir'"), ("2", "rm '{e}/gitdir' && mkdir '{e}/gitdir'")] {
        let leaf = r.join(format!(".claude/worktrees/w{n}"));
        let entry = r.join(format!(".git/worktrees/w{n}"));
        wrapper.after_add(&format!("{}\n", change.replace("{e}", &p(&entry))));
        assert_eq!(create(&d, &r, &leaf, &format!("b{n}"), ""), refused(&leaf, NOT_OURS));
        nothing_rolled_back(&r, &leaf, &entry, &format!("b{n}"));
    }
}

#[test]
fn the_record_test_refuses_a_record_of_another_worktree() {
    let wrapper = Wrapper::new();
    let d = wrapper.daemon(WITH_STEPS);
    let r = repo(&d.root().join("r"), false);
    let leaf = r.join(".claude/worktrees/w1");
    let entry = r.join(".git/worktrees/w1");
    wrapper.after_add(&format!("printf '/nonexistent/.git\\n' > '{}/gitdir'\n", p(&entry)));
    assert_eq!(create(&d, &r, &leaf, "b1", ""), refused(&leaf, OTHER_RECORD));
    nothing_rolled_back(&r, &leaf, &entry, "b1");

    // A relative record counts from the entry (cell Z9a): it names the
    // new worktree, and the create goes on.
    let leaf = r.join(".claude/worktrees/w2");
    let entry = r.join(".git/worktrees/w2");
    wrapper.after_add(&format!(
        "printf '../../../.claude/worktrees/w2/.git\\n' > '{}/gitdir'\n",
        p(&entry)
    ));
    assert_eq!(create(&d, &r, &leaf, "b2", ""), created(&leaf, "b2"));
    assert!(leaf.join("a.txt").is_file());
}

#[test]
fn the_rollback_deletes_the_entry_the_tests_accepted() {
    let wrapper = Wrapper::new();
    let forced = r#"{"success":false,"error":"git worktree add failed (checkout): fatal: forced read-tree failure","errorCode":"worktree_add_failed"}"#;
    // Cell Z16: the record is rewritten before the checkout fails. The
    // rollback reads it no more and deletes the entry the tests accepted.
    let d = wrapper.daemon(WITH_STEPS);
    let r = repo(&d.root().join("r"), false);
    let leaf = r.join(".claude/worktrees/w1");
    let entry = r.join(".git/worktrees/w1");
    wrapper.failing_checkout(&format!("printf '/nonexistent/.git\\n' > '{}/gitdir'\n", p(&entry)));
    assert_eq!(create(&d, &r, &leaf, "b1", ""), ok(1, forced));
    assert!(!leaf.exists() && !entry.exists());
    assert!(!branches(&r).contains("refs/heads/b1"));

    // Cell B6: the entry is renamed and an empty folder takes its name.
    // Neither is deleted (remora's identity guard, D24); the frame is the
    // same.
    let leaf = r.join(".claude/worktrees/w2");
    let entry = r.join(".git/worktrees/w2");
    wrapper.failing_checkout(&format!("mv '{0}' '{0}x' && mkdir '{0}'\n", p(&entry)));
    assert_eq!(create(&d, &r, &leaf, "b2", ""), ok(1, forced));
    assert!(entry.is_dir() && r.join(".git/worktrees/w2x/HEAD").is_file());

    // f6010b97 finds the registration by the record, which no longer
    // names the leaf: the entry stays.
    let d = wrapper.daemon(WITHOUT);
    let leaf = r.join(".claude/worktrees/w3");
    let entry = r.join(".git/worktrees/w3");
    wrapper.failing_checkout(&format!("printf '/nonexistent/.git\\n' > '{}/gitdir'\n", p(&entry)));
    assert_eq!(create(&d, &r, &leaf, "b3", ""), ok(1, forced));
    assert!(!leaf.exists() && entry.join("HEAD").is_file());
}
