//! The `git.*` safety rules of the later reference builds, end to end on
//! real repositories: where worktrees may be created and removed, which
//! `git.status` requests get a status, and the git-directory trust check.
//! Every refusal is checked to leave the disk as it was: no directory, no
//! branch, no registration.

use crate::common::git::{branches, git, git_daemon as daemon, repo, snapshot};
use crate::common::reply::{ok, p};
use crate::common::TestDaemon;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

fn internal(message: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":-32603,"message":"{message}"}}}}"#)
}

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

fn failed_remove(text: &str) -> String {
    ok(1, &format!(r#"{{"success":false,"error":"{}"}}"#, json_text(text)))
}

fn create(d: &TestDaemon, base: &str, branch: &str, path: &str) -> String {
    d.call(
        "git.worktree_create",
        &format!(r#"{{"baseRepo":"{base}","branchName":"{branch}","worktreePath":"{path}"}}"#),
    )
}

fn remove(d: &TestDaemon, base: &str, path: &str) -> String {
    d.call(
        "git.worktree_remove",
        &format!(r#"{{"baseRepo":"{base}","worktreePath":"{path}"}}"#),
    )
}

/// Runs `call`, then asserts it answered `want` and changed nothing under
/// `root` (the repository and everything beside it) nor `repo`'s branches.
fn refused_untouched(root: &Path, r: &Path, want: &str, call: impl FnOnce() -> String) {
    let (before, refs) = (snapshot(root), branches(r));
    assert_eq!(call(), want);
    assert_eq!(snapshot(root), before, "the refusal changed the disk");
    assert_eq!(branches(r), refs, "the refusal changed the branches");
}

const RELATIVE: &str = " is a relative path; choose the session folder by its absolute path, without \"..\"";
const DOTDOT: &str = " contains a \"..\" component; choose the session folder by its absolute path, without \"..\"";
const NOT_INSIDE: &str = "; session worktrees are only created and removed under <repository>/.claude/worktrees";
const SYMLINKED: &str = " is a symbolic link; a symlinked .claude or .claude/worktrees inside the repository is not supported for SSH sessions, because a repository can plant such a link and a planted one cannot reliably be told apart from your own. Replace it with a real directory (or delete it and it will be recreated)";
const EXISTS: &str = " already exists, and a new worktree is only ever created in a fresh directory";

#[test]
fn create_refusals_in_order_leave_the_disk_untouched() {
    let d = daemon();
    let root = d.root().to_path_buf();
    let r = repo(&root.join("r"), false);
    let rs = p(&r);
    let untouched = |path: &str, want: String| refused_untouched(&root, &r, &want, || create(&d, &rs, "w", path));

    untouched(
        "",
        failed(
            "failed to create parent directory: \"\" does not name a directory",
            "mkdir_failed",
        ),
    );
    untouched(
        "rel/w",
        failed(&format!("refusing to create worktree: rel/w{RELATIVE}"), "unsafe_path"),
    );
    // A relative path with `..` is relative first.
    untouched(
        "../w",
        failed(&format!("refusing to create worktree: ../w{RELATIVE}"), "unsafe_path"),
    );
    // `..` is judged as sent, even where it resolves back inside.
    let dotdot = format!("{rs}/.claude/../.claude/worktrees/w");
    untouched(
        &dotdot,
        failed(&format!("refusing to create worktree: {dotdot}{DOTDOT}"), "unsafe_path"),
    );
    for outside in [p(&root.join("wt")), rs.clone(), format!("{rs}/"), format!("{rs}x/w")] {
        untouched(
            &outside,
            failed(
                &format!("refusing to create worktree: {outside} is not inside the repository {rs}{NOT_INSIDE}"),
                "unsafe_path",
            ),
        );
    }

    // A planted link between the repository and the leaf.
    let escape = root.join("escape");
    fs::create_dir(&escape).unwrap();
    fs::create_dir(r.join(".claude")).unwrap();
    symlink(&escape, r.join(".claude/worktrees")).unwrap();
    let through = format!("{rs}/.claude/worktrees/w");
    untouched(
        &through,
        failed(
            &format!("refusing to create worktree: {rs}/.claude/worktrees{SYMLINKED}"),
            "symlinked_component",
        ),
    );
    assert_eq!(fs::read_dir(&escape).unwrap().count(), 0);
    fs::remove_file(r.join(".claude/worktrees")).unwrap();
    // A `.claude` that loops onto itself is a link too.
    fs::remove_dir(r.join(".claude")).unwrap();
    symlink(r.join(".claude"), r.join(".claude")).unwrap();
    untouched(
        &through,
        failed(
            &format!("refusing to create worktree: {rs}/.claude{SYMLINKED}"),
            "symlinked_component",
        ),
    );
    fs::remove_file(r.join(".claude")).unwrap();

    // The leaf exists: a directory, a file, a dangling link.
    fs::create_dir_all(r.join(".claude/worktrees/dir")).unwrap();
    fs::write(r.join(".claude/worktrees/file"), b"").unwrap();
    symlink("/nonexistent", r.join(".claude/worktrees/dangling")).unwrap();
    for leaf in ["dir", "file", "dangling"] {
        let path = format!("{rs}/.claude/worktrees/{leaf}");
        untouched(
            &path,
            failed(&format!("refusing to create worktree: {path}{EXISTS}"), "unsafe_path"),
        );
    }
    // Named with the parent's links resolved (the repository through a link).
    let alias = root.join("alias");
    symlink(&r, &alias).unwrap();
    let via = format!("{}/.claude/worktrees/dir/", p(&alias));
    refused_untouched(
        &root,
        &r,
        &failed(
            &format!("refusing to create worktree: {rs}/.claude/worktrees/dir{EXISTS}"),
            "unsafe_path",
        ),
        || create(&d, &p(&alias), "w", &via),
    );

    // The checks come after the repository test, the branch name first.
    let plain = root.join("plain");
    fs::create_dir(&plain).unwrap();
    refused_untouched(&root, &r, &failed("not a git repository", "not_a_repo"), || {
        create(&d, &p(&plain), "w", "rel")
    });

    // A path that passes every rule: the parents are made, then the add.
    let good = format!("{rs}/.claude/worktrees/new/leaf");
    assert_eq!(
        create(&d, &rs, "w", &good),
        ok(
            1,
            &format!(r#"{{"success":true,"path":"{good}","sourceBranch":"master","branch":"w"}}"#)
        )
    );
    assert!(Path::new(&good).join("a.txt").exists());
}

#[test]
fn nested_base_repo_is_refused_before_git_runs() {
    let d = daemon();
    let root = d.root().to_path_buf();
    let r = repo(&root.join("r"), false);
    let rs = p(&r);
    let s0 = format!("{rs}/.claude/worktrees/s0");
    git(&r, &["worktree", "add", "-q", "-b", "s0", &s0]);
    let text = "baseRepo is inside a managed worktrees directory (beneath .claude/worktrees, or beneath a directory holding a .claude-managed-worktrees marker), or could not be validated as a trust root";
    let inner = format!("{s0}/.claude/worktrees/x");
    refused_untouched(&root, &r, &failed(text, "nested_base_repo"), || {
        create(&d, &s0, "x", &inner)
    });
    refused_untouched(&root, &r, &failed_remove(text), || remove(&d, &s0, &inner));
    // A marker file in an ancestor does the same.
    let other = repo(&root.join("marked/o"), false);
    fs::write(root.join("marked/.claude-managed-worktrees"), b"").unwrap();
    let wt = format!("{}/.claude/worktrees/x", p(&other));
    refused_untouched(&root, &other, &failed(text, "nested_base_repo"), || {
        create(&d, &p(&other), "x", &wt)
    });
}

#[test]
fn remove_refusals_and_the_locked_worktree() {
    let d = daemon();
    let root = d.root().to_path_buf();
    let r = repo(&root.join("r"), false);
    let rs = p(&r);
    let untouched = |path: &str, want: String| refused_untouched(&root, &r, &want, || remove(&d, &rs, path));
    let s0 = format!("{rs}/.claude/worktrees/s0");
    git(&r, &["worktree", "add", "-q", "-b", "s0", &s0]);

    untouched(
        "",
        failed_remove("failed to remove worktree: \"\" does not name a directory"),
    );
    untouched(
        "s0",
        failed_remove(&format!("refusing to remove worktree: s0{RELATIVE}")),
    );
    let dotdot = format!("{rs}/.claude/worktrees/x/../s0");
    untouched(
        &dotdot,
        failed_remove(&format!("refusing to remove worktree: {dotdot}{DOTDOT}")),
    );
    // The repository itself is not inside: remove can never reach it.
    untouched(
        &rs,
        failed_remove(&format!(
            "refusing to remove worktree: {rs} is not inside the repository {rs}{NOT_INSIDE}"
        )),
    );

    // A locked worktree stays, whatever the lock's reason.
    git(&r, &["worktree", "lock", "--reason", "in use", &s0]);
    untouched(
        &s0,
        failed_remove(&format!(
            "refusing to remove worktree: {s0} is locked (git worktree lock); unlock it to remove it"
        )),
    );
    git(&r, &["worktree", "unlock", &s0]);
    assert_eq!(remove(&d, &rs, &s0), ok(1, r#"{"success":true}"#));
    assert!(!Path::new(&s0).exists());
    assert!(!r.join(".git/worktrees/s0").exists(), "the registration goes too");
    // The same path can be created again.
    assert!(create(&d, &rs, "s0b", &s0).contains(r#""success":true"#));

    // A leaf that is a link to a worktree elsewhere, or a file.
    let beside = root.join("beside");
    git(&r, &["worktree", "add", "-q", "-b", "beside", &p(&beside)]);
    symlink(&beside, r.join(".claude/worktrees/lnk")).unwrap();
    let lnk = format!("{rs}/.claude/worktrees/lnk");
    untouched(
        &lnk,
        failed_remove(&format!(
            "refusing to remove worktree: {lnk} is a symbolic link, not a worktree directory"
        )),
    );
    assert!(beside.join(".git").exists());
    fs::write(r.join(".claude/worktrees/f0"), b"x").unwrap();
    let f0 = format!("{rs}/.claude/worktrees/f0");
    untouched(
        &f0,
        failed_remove(&format!("refusing to remove worktree: {f0} is not a directory")),
    );

    // A planted link: the remove never reaches through it.
    let escape = root.join("escape");
    fs::create_dir_all(escape.join("victim")).unwrap();
    fs::create_dir_all(r.join("x")).unwrap();
    symlink(&escape, r.join("x/link")).unwrap();
    let victim = format!("{rs}/x/link/victim");
    untouched(
        &victim,
        failed_remove(&format!("refusing to remove worktree: {rs}/x/link{SYMLINKED}")),
    );
    assert!(escape.join("victim").exists());
}

#[test]
fn status_only_for_a_linked_worktree_of_base_repo() {
    let d = daemon();
    let root = d.root().to_path_buf();
    let t = repo(&root.join("T"), false);
    let ts = p(&t);
    let s0 = format!("{ts}/.claude/worktrees/s0");
    git(&t, &["worktree", "add", "-q", "-b", "s0", &s0]);
    let other = repo(&root.join("X"), false);
    let x0 = format!("{}/wt", p(&other));
    git(&other, &["worktree", "add", "-q", "-b", "x0", &x0]);
    fs::create_dir_all(root.join("T/sub")).unwrap();
    let nested = repo(&root.join("T/nested"), false);
    let status = |path: &str, base: &str| d.call("git.status", &format!(r#"{{"path":"{path}","baseRepo":"{base}"}}"#));
    let clean = ok(1, r#"{"isRepo":true,"clean":true}"#);
    let not_repo = ok(1, r#"{"isRepo":false,"clean":false}"#);
    assert_eq!(status(&s0, &ts), clean);
    assert_eq!(status(&format!("{s0}/."), &ts), clean);
    for (path, base) in [
        (p(&root), ts.clone()),                                  // a plain directory
        (format!("{ts}/sub"), ts.clone()),                       // a subdirectory of the repository
        (p(&nested), ts.clone()),                                // a nested repository
        (ts.clone(), ts.clone()),                                // the repository itself
        (x0.clone(), ts.clone()),                                // a worktree of another repository
        (s0.clone(), p(&other)),                                 // the right worktree, the wrong base
        (s0.clone(), format!("{ts}/sub")),                       // base not the top level
        (format!("{ts}/.claude/worktrees/q/../s0"), ts.clone()), // `..` inside base
    ] {
        assert_eq!(status(&path, &base), not_repo, "{path} against {base}");
    }
    // Through a link from outside the repository: still that worktree.
    symlink(&s0, root.join("L")).unwrap();
    assert_eq!(status(&p(&root.join("L")), &ts), clean);
    // baseRepo through a link: the same repository.
    symlink(&t, root.join("TL")).unwrap();
    assert_eq!(status(&s0, &p(&root.join("TL"))), clean);
}

const PREFIX: &str =
    "the repository's git directory could not be trusted; git not run: commondir not as git writes it: ";

fn m1(commondir: &str) -> String {
    format!(
        "{PREFIX}{commondir:?} exists where git itself never writes one (git keeps that file only in a linked worktree's entry under .git/worktrees/); remove it if you did not create it, and treat its appearance as tampering"
    )
}

/// A daemon stamped `stamp` whose git ignores user and system config.
fn daemon_as(stamp: &str) -> TestDaemon {
    TestDaemon::start_with(
        &["-reference-build", stamp],
        &[("GIT_CONFIG_NOSYSTEM", "1"), ("GIT_CONFIG_GLOBAL", "/dev/null")],
    )
}

/// Builds up to f6010b97 refuse every stray `commondir` with M1 (89cb6289
/// and later: [`a_stray_commondir_reading_dot_is_trusted_by_89cb6289`]).
#[test]
fn a_planted_commondir_in_a_main_repository_stops_every_method() {
    let d = daemon_as("f6010b97a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5");
    let root = d.root().to_path_buf();
    let t = repo(&root.join("T"), false);
    let ts = p(&t);
    let s0 = format!("{ts}/.claude/worktrees/s0");
    git(&t, &["worktree", "add", "-q", "-b", "s0", &s0]);
    let tw = p(&root.join("T_wt"));
    git(&t, &["worktree", "add", "-q", "-b", "lw", &tw]);
    let info = |path: &str| d.call("git.info", &format!(r#"{{"path":"{path}"}}"#));
    let list = |path: &str| d.call("git.list_branches", &format!(r#"{{"path":"{path}"}}"#));
    assert!(info(&ts).contains(r#""isRepo":true"#));

    let cd = format!("{ts}/.git/commondir");
    fs::write(&cd, b".\n").unwrap();
    let text = m1(&cd);
    assert_eq!(info(&ts), internal(&json_text(&text)));
    assert_eq!(
        list(&format!("{ts}/sub-that-is-missing")),
        ok(1, r#"{"isRepo":false,"branches":[]}"#)
    );
    assert_eq!(list(&ts), internal(&json_text(&text)));
    assert_eq!(
        d.call("git.status", &format!(r#"{{"path":"{s0}","baseRepo":"{ts}"}}"#)),
        internal(&json_text(&text))
    );
    let wt = format!("{ts}/.claude/worktrees/w1");
    refused_untouched(&root, &t, &failed(&text, "worktree_add_failed"), || {
        create(&d, &ts, "w1", &wt)
    });
    refused_untouched(
        &root,
        &t,
        &failed_remove(&format!(
            "failed to remove worktree: could not check whether {s0} is locked (its registrations could not be examined); retry"
        )),
        || remove(&d, &ts, &s0),
    );
    // The linked worktree's own git directory is an honest entry.
    assert!(info(&tw).contains(r#""isRepo":true"#));
    assert!(list(&tw).contains(r#""isRepo":true"#));
}

/// Build 89cb6289's stray `commondir` rules (PROTOCOL.md "Git-directory
/// trust check", rows T01 to T11): `.` or `./` (trailing CR and LF cut) in
/// a valid git directory is trusted; other content is S1, quoted and cut
/// to 60 characters; not a small plain file is S2; a directory git would
/// not take is S3, after the content test.
#[test]
fn a_stray_commondir_reading_dot_is_trusted_by_89cb6289() {
    let d = daemon_as("89cb6289a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5");
    let root = d.root().to_path_buf();
    let t = repo(&root.join("T"), false);
    let ts = p(&t);
    let info = || d.call("git.info", &format!(r#"{{"path":"{ts}"}}"#));
    let cd = format!("{ts}/.git/commondir");
    for honest in [".", ".\n", "./", "./\r\n", ".\n\n"] {
        fs::write(&cd, honest).unwrap();
        assert!(info().contains(r#""isRepo":true"#), "{honest:?}: {}", info());
    }
    let s1 = |content: &str| {
        format!(
            "{PREFIX}{cd:?} reads {content:?}; git writes that file only inside .git/worktrees/<name>/, and Claude Code's sandbox may leave one containing just \".\"; anything else sends git's configuration and hooks elsewhere, so treat it as tampering: delete it, and if you did not create it, find out what did"
        )
    };
    let own = format!("{ts}/.git");
    for (planted, quoted) in [
        (" .", " ."),
        (". ", ". "),
        (".\t", ".\t"),
        ("./x\n", "./x"),
        ("..", ".."),
        ("", ""),
        (own.as_str(), own.as_str()),
    ] {
        fs::write(&cd, planted).unwrap();
        assert_eq!(info(), internal(&json_text(&s1(quoted))), "{planted:?}");
    }
    // The content is cut to 60 characters.
    fs::write(&cd, "é".repeat(100)).unwrap();
    assert_eq!(info(), internal(&json_text(&s1(&"é".repeat(60)))));
    // The create answers the same text with its own code.
    fs::write(&cd, "..").unwrap();
    let wt = format!("{ts}/.claude/worktrees/w1");
    let before = snapshot(&root);
    assert_eq!(create(&d, &ts, "w1", &wt), failed(&s1(".."), "worktree_add_failed"));
    assert_eq!(snapshot(&root), before);
    // Not a small plain file: S2 with its reason.
    let s2 = |why: &str| {
        format!(
            "{PREFIX}{cd:?} is not a small plain file ({why}); git writes that file only inside .git/worktrees/<name>/; one here can send git's configuration and hooks elsewhere, so treat it as tampering: delete it, and if you did not create it, find out what did"
        )
    };
    fs::remove_file(&cd).unwrap();
    fs::create_dir(&cd).unwrap();
    assert_eq!(info(), internal(&json_text(&s2("commondir is not a regular file"))));
    fs::remove_dir(&cd).unwrap();
    symlink("/nonexistent", &cd).unwrap();
    assert_eq!(
        info(),
        internal(&json_text(&s2("openat commondir: path escapes from parent")))
    );
    // A relative link that stays in the git directory is followed (T07b).
    fs::remove_file(&cd).unwrap();
    fs::write(t.join(".git/dot"), ".\n").unwrap();
    symlink("dot", &cd).unwrap();
    assert!(info().contains(r#""isRepo":true"#), "{}", info());
    // `.` in a git directory git would not take (row T10a): S3.
    fs::write(t.join(".git/HEAD"), "garbage\n").unwrap();
    let s3 = format!(
        "{PREFIX}{cd:?} sits in a git directory git would not take as a repository (its HEAD, objects or refs missing or invalid), so git would look for one somewhere else; repair that directory (usually its HEAD file)"
    );
    assert_eq!(info(), internal(&json_text(&s3)));
    // The content test comes first.
    fs::remove_file(&cd).unwrap();
    fs::write(&cd, "x").unwrap();
    assert_eq!(info(), internal(&json_text(&s1("x"))));
}

#[test]
fn an_entrys_commondir_must_name_its_own_repository() {
    let d = daemon();
    let root = d.root().to_path_buf();
    let t = repo(&root.join("T"), false);
    let ts = p(&t);
    let tw = p(&root.join("T_wt"));
    git(&t, &["worktree", "add", "-q", "-b", "lw", &tw]);
    let entry = format!("{ts}/.git/worktrees/T_wt");
    let cd = format!("{entry}/commondir");
    let info = || d.call("git.info", &format!(r#"{{"path":"{tw}"}}"#));
    for honest in [
        "../..\n".to_string(),
        "../../\n".into(),
        "../..\r\n".into(),
        format!("{ts}/.git/worktrees/..\n"),
    ] {
        fs::write(&cd, &honest).unwrap();
        assert!(info().contains(r#""isRepo":true"#), "{honest:?}");
    }
    let other = repo(&root.join("X"), false);
    let m2 = format!(
        "{PREFIX}{cd:?} does not name the entry's own repository, {:?}; restore the file to read ../.. or remove that worktree entry and add the worktree again",
        format!("{ts}/.git")
    );
    for planted in [
        format!("{}/.git\n", p(&other)),
        "/nonexistent/.git\n".into(),
        String::new(),
        "../..\0x\n".into(),
    ] {
        fs::write(&cd, &planted).unwrap();
        assert_eq!(info(), internal(&json_text(&m2)), "{planted:?}");
    }
    let wt = format!("{tw}/.claude/worktrees/w1");
    refused_untouched(&root, &t, &failed(&m2, "worktree_add_failed"), || {
        create(&d, &tw, "w1", &wt)
    });

    // Missing (M3), too big or not a file (M4).
    fs::remove_file(&cd).unwrap();
    let m3 = format!(
        "{PREFIX}worktree entry {entry:?} has none (git always writes one there, containing ../..); the entry is damaged or was not made by git — recreate the worktree with git worktree add, or remove the entry"
    );
    assert_eq!(info(), internal(&json_text(&m3)));
    let m4 = |why: &str| {
        format!(
            "{PREFIX}{cd:?} is not a small plain file ({why}); remove it, or remove that worktree entry and add the worktree again so git rewrites it"
        )
    };
    let mut big = b"../..".to_vec();
    big.resize((1 << 20) + 1, b' ');
    fs::write(&cd, &big).unwrap();
    assert_eq!(
        info(),
        internal(&json_text(&m4("commondir is larger than 1048576 bytes")))
    );
    big.truncate(1 << 20);
    fs::write(&cd, &big).unwrap();
    // Exactly 1 MiB passes the check (git itself then rejects the padding).
    assert!(!info().contains("could not be trusted"), "exactly 1 MiB passes");
    fs::remove_file(&cd).unwrap();
    fs::create_dir(&cd).unwrap();
    assert_eq!(
        d.call("git.list_branches", &format!(r#"{{"path":"{tw}"}}"#)),
        internal(&json_text(&m4("commondir is not a regular file")))
    );
    // A FIFO is not a plain file either, and is never opened for reading
    // in a way that waits for a writer.
    fs::remove_dir(&cd).unwrap();
    let fifo = std::ffi::CString::new(cd.as_str()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    assert_eq!(info(), internal(&json_text(&m4("commondir is not a regular file"))));
}

#[test]
fn a_git_pointer_that_is_not_as_git_writes_it_means_no_repository() {
    let d = daemon();
    let root = d.root().to_path_buf();
    let t = repo(&root.join("T"), false);
    let tw = root.join("T_wt");
    git(&t, &["worktree", "add", "-q", "-b", "lw", &p(&tw)]);
    let entry = format!("{}/.git/worktrees/T_wt", p(&t));
    let info = || d.call("git.info", &format!(r#"{{"path":"{}"}}"#, p(&tw)));
    let no_repo = ok(1, r#"{"isRepo":false,"repoSlug":"","defaultBranch":""}"#);
    fs::write(tw.join(".git"), format!("GITDIR: {entry}\n")).unwrap();
    assert_eq!(info(), no_repo);
    fs::write(tw.join(".git"), format!("gitdir: {entry}\n")).unwrap();
    assert!(info().contains(r#""isRepo":true"#));
    fs::remove_dir_all(&entry).unwrap();
    assert_eq!(info(), no_repo);
    // A broken nested `.git` directory ends the walk: no repository, not T.
    fs::create_dir_all(t.join("a/.git")).unwrap();
    assert_eq!(
        d.call("git.list_branches", &format!(r#"{{"path":"{}/a"}}"#, p(&t))),
        ok(1, r#"{"isRepo":false,"branches":[]}"#)
    );
}

#[test]
fn existing_branch_attaches_or_falls_back() {
    let d = daemon();
    let root = d.root().to_path_buf();
    let r = repo(&root.join("r"), false);
    let rs = p(&r);
    git(&r, &["branch", "existing"]);
    let create_with = |branch: &str, path: &str, existing: &str| {
        d.call(
            "git.worktree_create",
            &format!(
                r#"{{"baseRepo":"{rs}","branchName":"{branch}","worktreePath":"{path}","existingBranch":"{existing}"}}"#
            ),
        )
    };
    // Attached: no new branch, `branch` is the existing one.
    let wt0 = format!("{rs}/.claude/worktrees/wt0");
    assert_eq!(
        create_with("nb0", &wt0, "existing"),
        ok(
            1,
            &format!(r#"{{"success":true,"path":"{wt0}","sourceBranch":"master","branch":"existing"}}"#)
        )
    );
    assert_eq!(git(Path::new(&wt0), &["symbolic-ref", "--short", "HEAD"]), "existing");
    assert!(!branches(&r).contains("nb0"));
    // Unknown or empty: a new branch, silently.
    for (n, existing) in [("1", "no-such"), ("2", "")] {
        let wt = format!("{rs}/.claude/worktrees/wt{n}");
        assert_eq!(
            create_with(&format!("nb{n}"), &wt, existing),
            ok(
                1,
                &format!(r#"{{"success":true,"path":"{wt}","sourceBranch":"master","branch":"nb{n}"}}"#)
            )
        );
    }
    // Checked out in baseRepo: git refuses the attach, a new branch is made.
    let wt3 = format!("{rs}/.claude/worktrees/wt3");
    assert_eq!(
        create_with("nb3", &wt3, "master"),
        ok(
            1,
            &format!(r#"{{"success":true,"path":"{wt3}","sourceBranch":"master","branch":"nb3"}}"#)
        )
    );
    // Both refused: both texts, and the leaf is taken back.
    let wt4 = format!("{rs}/.claude/worktrees/wt4");
    let reply = create_with("nb3", &wt4, "master");
    assert!(
        reply.starts_with(r#"{"jsonrpc":"2.0","id":1,"result":{"success":false,"error":"git worktree add failed: Preparing worktree (new branch 'nb3') fatal: a branch named 'nb3' already exists (attaching to the existing branch master was refused first: "#),
        "{reply}"
    );
    assert!(reply.ends_with(r#")","errorCode":"worktree_add_failed"}}"#), "{reply}");
    assert!(reply.contains("'master' is already"), "{reply}");
    assert!(!Path::new(&wt4).exists());
    // branchName stays required.
    assert_eq!(
        d.call(
            "git.worktree_create",
            &format!(r#"{{"baseRepo":"{rs}","worktreePath":"{wt4}","existingBranch":"existing"}}"#)
        ),
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"branchName is required"}}"#
    );
}

#[test]
fn ignored_claude_files_are_seeded_but_not_runtime_state() {
    let d = daemon();
    let root = d.root().to_path_buf();
    let r = repo(&root.join("r"), false);
    let rs = p(&r);
    fs::write(
        r.join(".gitignore"),
        ".claude/settings.local.json\n.claude/mailbox/\n.claude/Checkpoints/\n.claude/mailboxes/\n.claude/nested/\n.claude/link\n.claude/worktrees/\n",
    )
    .unwrap();
    git(&r, &["add", ".gitignore"]);
    git(&r, &["commit", "-q", "-m", "ignore"]);
    for (path, body) in [
        (".claude/settings.local.json", "{}"),
        (".claude/mailbox/m", "runtime"),
        (".claude/Checkpoints/c", "runtime"),
        (".claude/mailboxes/m", "kept"),
        (".claude/nested/mailbox/m", "kept"),
        (".claude/plain-untracked.txt", "not ignored"),
    ] {
        fs::create_dir_all(r.join(path).parent().unwrap()).unwrap();
        fs::write(r.join(path), body).unwrap();
    }
    symlink("/etc/passwd", r.join(".claude/link")).unwrap();
    let wt = format!("{rs}/.claude/worktrees/w");
    assert!(create(&d, &rs, "w", &wt).contains(r#""success":true"#));
    let w = Path::new(&wt);
    assert_eq!(fs::read_to_string(w.join(".claude/settings.local.json")).unwrap(), "{}");
    assert_eq!(fs::read_to_string(w.join(".claude/mailboxes/m")).unwrap(), "kept");
    assert_eq!(fs::read_to_string(w.join(".claude/nested/mailbox/m")).unwrap(), "kept");
    for absent in [
        ".claude/mailbox",
        ".claude/Checkpoints",
        ".claude/plain-untracked.txt",
        ".claude/link",
        ".claude/worktrees",
    ] {
        assert!(fs::symlink_metadata(w.join(absent)).is_err(), "{absent} was seeded");
    }
}
