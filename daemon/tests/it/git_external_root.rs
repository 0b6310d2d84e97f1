//! `git.worktree_create` / `git.worktree_remove` with a `worktreeRoot`
//! (feature `git.worktree.external_root`, build 7d193f89) on real
//! repositories and real directories: the placement at
//! `<worktreeRoot>/<directory>/<name>` with its marker, the refusals of a
//! root others can write, a root leading into the repository, a symlinked
//! `<directory>` level, and the remove of such a worktree. Every refusal is
//! checked to leave the disk as it was.

use crate::common::git::{branches, git, git_daemon as daemon, repo, snapshot};
use crate::common::reply::{ok, p};
use crate::common::TestDaemon;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::Path;

const MARKER: &str = "This directory holds Claude Code session worktrees placed here by the\n\
claude-ssh daemon (the \"Worktree location\" setting). Its subdirectories are\n\
managed checkouts; open the repository itself, not one of them, as a\n\
session folder. Safe to delete once the directory is otherwise empty.\n";

/// A JSON string body (quotes and backslashes escaped, `<`/`>` as Go writes them).
fn json_text(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
}

fn failed(text: &str, code: &str) -> String {
    ok(
        1,
        &format!(
            r#"{{"success":false,"error":"{}","errorCode":"{code}"}}"#,
            json_text(text)
        ),
    )
}

fn create(d: &TestDaemon, base: &str, branch: &str, path: &str, root: &str) -> String {
    d.call(
        "git.worktree_create",
        &format!(r#"{{"baseRepo":"{base}","branchName":"{branch}","worktreePath":"{path}","worktreeRoot":"{root}"}}"#),
    )
}

fn remove(d: &TestDaemon, base: &str, branch: &str, path: &str, root: &str) -> String {
    d.call(
        "git.worktree_remove",
        &format!(r#"{{"baseRepo":"{base}","branchName":"{branch}","worktreePath":"{path}","worktreeRoot":"{root}"}}"#),
    )
}

fn mkdir(path: &Path, mode: u32) -> String {
    fs::create_dir_all(path).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    p(path)
}

#[test]
fn a_create_under_a_good_root_places_the_worktree_and_the_marker_and_a_remove_takes_it_back() {
    let d = daemon();
    let r = repo(&d.root().join("repo"), false);
    let rs = p(&r);
    let root = mkdir(&d.root().join("wt"), 0o700);
    let wp = format!("{root}/proj/w1");
    assert_eq!(
        create(&d, &rs, "b1", &wp, &root),
        ok(
            1,
            &format!(r#"{{"success":true,"path":"{wp}","sourceBranch":"master","branch":"b1"}}"#)
        )
    );
    assert_eq!(fs::read_to_string(format!("{wp}/a.txt")).unwrap(), "a\n");
    let marker = Path::new(&root).join("proj/.claude-managed-worktrees");
    assert_eq!(fs::read_to_string(&marker).unwrap(), MARKER);
    assert_eq!(fs::metadata(&marker).unwrap().len(), 285);
    // The <directory> level the create made asks for 0700.
    assert_eq!(fs::metadata(format!("{root}/proj")).unwrap().mode() & 0o777, 0o700);
    assert!(git(&r, &["worktree", "list", "--porcelain"]).contains(&format!("worktree {wp}")));
    assert_eq!(branches(&r), "refs/heads/b1\nrefs/heads/master");

    // A second worktree in the marked <directory> is fine.
    let wp2 = format!("{root}/proj/w2");
    assert_eq!(
        create(&d, &rs, "b2", &wp2, &root),
        ok(
            1,
            &format!(r#"{{"success":true,"path":"{wp2}","sourceBranch":"master","branch":"b2"}}"#)
        )
    );

    // The remove of such a worktree: the worktree, its registration and
    // its branch go; the marker, the other worktree and the root stay.
    assert_eq!(remove(&d, &rs, "b1", &wp, &root), ok(1, r#"{"success":true}"#));
    assert!(!Path::new(&wp).exists());
    assert!(marker.exists());
    assert!(Path::new(&wp2).join("a.txt").exists());
    assert!(!git(&r, &["worktree", "list", "--porcelain"]).contains(&format!("worktree {wp}\n")));
    assert_eq!(branches(&r), "refs/heads/b2\nrefs/heads/master");
}

#[test]
fn a_remove_never_deletes_a_directory_that_is_no_worktree_of_the_repository() {
    let d = daemon();
    let r = repo(&d.root().join("repo"), false);
    let rs = p(&r);
    let root = mkdir(&d.root().join("wt"), 0o700);
    let plain = format!("{root}/proj/plain");
    fs::create_dir_all(&plain).unwrap();
    fs::write(format!("{plain}/keep.txt"), "x").unwrap();
    assert_eq!(
        remove(&d, &rs, "nope", &plain, &root),
        ok(
            1,
            &format!(
                r#"{{"success":false,"error":"{}"}}"#,
                json_text(&format!("failed to remove worktree: git did not remove {plain}, and under a worktree location only a worktree git removes is deleted, so it is left in place"))
            )
        )
    );
    assert_eq!(fs::read_to_string(format!("{plain}/keep.txt")).unwrap(), "x");
    // A worktree of another repository under the same root stays whole.
    let other = repo(&d.root().join("other"), false);
    let theirs = format!("{root}/theirs/w1");
    assert!(create(&d, &p(&other), "t1", &theirs, &root).contains(r#""success":true"#));
    assert_eq!(
        remove(&d, &rs, "t1", &theirs, &root),
        ok(
            1,
            &format!(
                r#"{{"success":false,"error":"{}"}}"#,
                json_text(&format!("failed to remove worktree: git did not remove {theirs}, and under a worktree location only a worktree git removes is deleted, so it is left in place"))
            )
        )
    );
    assert!(Path::new(&theirs).join("a.txt").exists());
    assert_eq!(branches(&other), "refs/heads/master\nrefs/heads/t1");
    // A root that does not exist: the recorded remove refusal.
    let gone = format!("{}/gone", p(d.root()));
    assert_eq!(
        remove(&d, &rs, "nope", &format!("{gone}/proj/w1"), &gone),
        ok(
            1,
            &format!(
                r#"{{"success":false,"error":"{}"}}"#,
                json_text(&format!("failed to remove worktree: the worktree location {gone} is not reachable ({gone} does not exist); nothing was removed — retry once it is available, or remove the worktree by hand"))
            )
        )
    );
}

#[test]
fn a_root_others_can_write_is_refused_and_nothing_is_created() {
    let d = daemon();
    let r = repo(&d.root().join("repo"), false);
    let rs = p(&r);
    let root = mkdir(&d.root().join("wt"), 0o757);
    let before = snapshot(d.root());
    let wp = format!("{root}/proj/w1");
    assert_eq!(
        create(&d, &rs, "b1", &wp, &root),
        failed(
            &format!("refusing to create worktree: {root} is writable by every user on this host (mode 0757); choose a directory only you can write to, or remove the extra write permission (chmod go-w)"),
            "unsafe_path"
        )
    );
    // A group that is not the user's private group.
    fs::set_permissions(&root, fs::Permissions::from_mode(0o770)).unwrap();
    std::os::unix::fs::chown(&root, None, Some(4242)).unwrap();
    assert_eq!(
        create(&d, &rs, "b1", &wp, &root),
        failed(
            &format!("refusing to create worktree: {root} is writable by its group (mode 0770); choose a directory only you can write to, or remove the extra write permission (chmod go-w)"),
            "unsafe_path"
        )
    );
    assert_eq!(snapshot(d.root()), before);
    assert_eq!(branches(&r), "refs/heads/master");

    // A directory above the root that others can write, without the sticky bit.
    let open = mkdir(&d.root().join("open"), 0o777);
    let root2 = mkdir(&d.root().join("open/wt"), 0o700);
    let before = snapshot(d.root());
    assert_eq!(
        create(&d, &rs, "b1", &format!("{root2}/proj/w1"), &root2),
        failed(
            &format!("refusing to create worktree: {root2} passes through {open}, which is writable by every user on this host without the sticky bit (mode 0777), so they could replace what is beneath it; choose a location under directories only you (or the system) control, or remove the extra write permission (chmod go-w)"),
            "unsafe_path"
        )
    );
    assert_eq!(snapshot(d.root()), before);
}

#[test]
fn a_symlinked_root_or_directory_level_is_judged_by_what_it_leads_to() {
    let d = daemon();
    let r = repo(&d.root().join("repo"), false);
    let rs = p(&r);
    // A root that is a link into the repository: checkout test B.
    let link = d.root().join("into-repo");
    symlink(r.join("sub"), &link).unwrap();
    fs::create_dir(r.join("sub")).unwrap();
    let ls = p(&link);
    // A root in a linked worktree of the repository: checkout test C.
    let linked = d.root().join("linked");
    git(&r, &["worktree", "add", "-q", &p(&linked)]);
    let lw = p(&linked);
    // A root that is a link into another repository: the root chain finds
    // that repository's .git entry.
    let other = repo(&d.root().join("other"), false);
    let os = p(&other);
    let link2 = d.root().join("into-other");
    symlink(&other, &link2).unwrap();
    let l2 = p(&link2);
    let before = snapshot(d.root());
    assert_eq!(
        create(&d, &rs, "b1", &format!("{ls}/proj/w1"), &ls),
        failed(
            &format!("refusing to create worktree: {ls} leads into the repository {rs} (at {rs}); a worktree location must be outside the repository"),
            "unsafe_path"
        )
    );
    assert_eq!(
        create(&d, &rs, "b1", &format!("{lw}/x/proj/w1"), &format!("{lw}/x")),
        failed(
            &format!("refusing to create worktree: {lw}/x leads into {lw}, a worktree of the repository {rs} (at {lw}); a worktree location must be outside the repository's checkouts"),
            "unsafe_path"
        )
    );
    assert_eq!(
        create(&d, &rs, "b1", &format!("{l2}/proj/w1"), &l2),
        failed(
            &format!("refusing to create worktree: {l2} is inside a git checkout ({os} has a .git entry); a worktree location must be outside every checkout, so that no session working in one can reach it — choose a directory that is not part of any repository"),
            "unsafe_path"
        )
    );
    assert_eq!(snapshot(d.root()), before);
    // A <directory> level that is a link.
    let root = mkdir(&d.root().join("wt"), 0o700);
    let elsewhere = mkdir(&d.root().join("elsewhere"), 0o700);
    symlink(&elsewhere, format!("{root}/proj")).unwrap();
    let before_dir = snapshot(d.root());
    assert_eq!(
        create(&d, &rs, "b1", &format!("{root}/proj/w1"), &root),
        failed(
            &format!("refusing to create worktree: {root}/proj is a symbolic link; the directory under the worktree location must be a real directory"),
            "unsafe_path"
        )
    );
    assert_eq!(snapshot(d.root()), before_dir);
    assert!(before.len() < before_dir.len());
    assert_eq!(branches(&r), "refs/heads/linked\nrefs/heads/master");

    // A root that is the user's own link to a good directory is accepted
    // (the record: the root itself may be a link); the directories are made
    // in the link's target.
    let real = mkdir(&d.root().join("real"), 0o700);
    let alias = d.root().join("alias");
    symlink(&real, &alias).unwrap();
    let als = p(&alias);
    let wp = format!("{als}/proj/w1");
    assert_eq!(
        create(&d, &rs, "b1", &wp, &als),
        ok(
            1,
            &format!(r#"{{"success":true,"path":"{wp}","sourceBranch":"master","branch":"b1"}}"#)
        )
    );
    assert!(Path::new(&real).join("proj/w1/a.txt").exists());
    assert!(Path::new(&real).join("proj/.claude-managed-worktrees").exists());
}

#[test]
fn a_missing_root_is_made_private_and_the_lexical_rules_come_first() {
    let d = daemon();
    let r = repo(&d.root().join("repo"), false);
    let rs = p(&r);
    // The record: every missing directory from the highest one down to
    // <directory> is made, each asking for 0700.
    let root = format!("{}/new/wt", p(d.root()));
    let wp = format!("{root}/proj/w1");
    assert_eq!(
        create(&d, &rs, "b1", &wp, &root),
        ok(
            1,
            &format!(r#"{{"success":true,"path":"{wp}","sourceBranch":"master","branch":"b1"}}"#)
        )
    );
    for made in ["new", "new/wt", "new/wt/proj"] {
        assert_eq!(
            fs::metadata(d.root().join(made)).unwrap().mode() & 0o777,
            0o700,
            "{made}"
        );
    }
    let before = snapshot(d.root());
    for (path, root, text) in [
        (
            format!("{root}/w9"),
            root.clone(),
            format!("refusing to create worktree: {root}/w9 is not <worktree location>/<directory>/<name> beneath {root}"),
        ),
        (
            "/a/b".to_string(),
            "/".to_string(),
            "refusing to create worktree: / is a filesystem root; choose the worktree location by its absolute path, without \"..\", beneath the filesystem root".to_string(),
        ),
        (
            format!("{rs}/x/p/w"),
            format!("{rs}/x"),
            format!("refusing to create worktree: {rs}/x is the repository {rs} or inside it; a worktree location must be outside the repository"),
        ),
        (
            "rel/p/w".to_string(),
            "rel".to_string(),
            "refusing to create worktree: rel is a relative path; choose the worktree location by its absolute path, without \"..\", beneath the filesystem root".to_string(),
        ),
    ] {
        assert_eq!(create(&d, &rs, "b2", &path, &root), failed(&text, "unsafe_path"), "{path}");
    }
    // An unmarked <directory> that holds files.
    fs::create_dir_all(format!("{root}/other")).unwrap();
    fs::write(format!("{root}/other/z"), "").unwrap();
    fs::write(format!("{root}/other/b"), "").unwrap();
    let before_other = snapshot(d.root());
    assert_eq!(
        create(&d, &rs, "b2", &format!("{root}/other/w1"), &root),
        failed(
            &format!("refusing to create worktree: {root}/other already exists, is not marked as a worktree directory, and holds other files (for example \"b\"); the per-repository directory under a worktree location must start out empty — remove it, restore its .claude-managed-worktrees file if you deleted it, or choose another location"),
            "unsafe_path"
        )
    );
    assert_eq!(snapshot(d.root()), before_other);
    assert!(before.len() < before_other.len());
    // The leaf exists.
    assert_eq!(
        create(&d, &rs, "b2", &wp, &root),
        failed(
            &format!("refusing to create worktree: {wp} already exists, and a new worktree is only ever created in a fresh directory"),
            "unsafe_path"
        )
    );
    assert_eq!(branches(&r), "refs/heads/b1\nrefs/heads/master");
}

#[test]
fn a_marked_directory_is_reused_as_it_is_and_a_worktree_in_it_is_no_base_repo() {
    let d = daemon();
    let r = repo(&d.root().join("repo"), false);
    let rs = p(&r);
    let root = mkdir(&d.root().join("wt"), 0o700);
    // A <directory> that holds files and an existing marker (its own bytes
    // and mode): the create goes on, and the marker is kept as it was.
    let proj = mkdir(&d.root().join("wt/proj"), 0o755);
    fs::write(format!("{proj}/notes"), "n").unwrap();
    fs::write(format!("{proj}/.claude-managed-worktrees"), "mine").unwrap();
    fs::set_permissions(
        format!("{proj}/.claude-managed-worktrees"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let wp = format!("{proj}/w1");
    assert_eq!(
        create(&d, &rs, "b1", &wp, &root),
        ok(
            1,
            &format!(r#"{{"success":true,"path":"{wp}","sourceBranch":"master","branch":"b1"}}"#)
        )
    );
    let marker = format!("{proj}/.claude-managed-worktrees");
    assert_eq!(fs::read_to_string(&marker).unwrap(), "mine");
    assert_eq!(fs::metadata(&marker).unwrap().mode() & 0o777, 0o600);
    assert_eq!(fs::metadata(&proj).unwrap().mode() & 0o777, 0o755);
    // The new worktree sits under a marker, so it is no base for another.
    assert_eq!(
        create(&d, &wp, "b2", &format!("{root}/other/w2"), &root),
        failed(
            "baseRepo is inside a managed worktrees directory (beneath .claude/worktrees, or beneath a directory holding a .claude-managed-worktrees marker), or could not be validated as a trust root",
            "nested_base_repo"
        )
    );
    assert!(!Path::new(&format!("{root}/other")).exists());
}
