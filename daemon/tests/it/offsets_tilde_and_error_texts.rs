//! Behaviour adopted from reference build 5db5e4a (issue 25 item 3),
//! against a real daemon, real files, a real git repository and real
//! children: unsigned `offset`/`fromSeq`, the leading-`~` rule, and the
//! error texts of that build (`chdir …`, `open archive: …`, a 300-character
//! name as an error).

use crate::common::frames::{frames_until_exit, parse_frame, stdout_of};
use crate::common::git::{git, repo};
use crate::common::reply::{err, ok, p};
use crate::common::TestDaemon;
use std::fs;
use std::path::Path;
use std::process::Command;

const GAP: &str = "stdin offset gap: offset ahead of applied bytes";

#[test]
fn stdin_offset_and_reattach_from_seq_are_unsigned_64_bit() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    assert_eq!(
        c.call(1, "process.spawn", r#"{"id":"u","command":"cat"}"#),
        ok(1, r#"{"success":true}"#)
    );
    // Negative values no longer decode: nothing is applied.
    assert_eq!(
        c.call(2, "process.stdin", r#"{"id":"u","data":"aGVsbG8K","offset":-1}"#),
        err(2, -32602, "Invalid params")
    );
    assert_eq!(
        c.call(3, "process.reattach", r#"{"id":"u","fromSeq":-1}"#),
        err(3, -32602, "Invalid params")
    );
    assert_eq!(
        c.call(4, "process.stdin", r#"{"id":"u","data":"aGVsbG8K","offset":-0}"#),
        err(4, -32602, "Invalid params"),
        "no sign at all, as strconv.ParseUint"
    );
    // 2^64-1 is a valid offset, far ahead of what was applied.
    assert_eq!(
        c.call(
            5,
            "process.stdin",
            r#"{"id":"u","data":"aGVsbG8K","offset":18446744073709551615}"#
        ),
        err(5, -32003, GAP)
    );
    assert_eq!(
        c.call(
            6,
            "process.stdin",
            r#"{"id":"u","data":"aGVsbG8K","offset":18446744073709551616}"#
        ),
        err(6, -32602, "Invalid params"),
        "one past u64::MAX does not fit"
    );
    assert_eq!(
        c.call(7, "process.stdin", r#"{"id":"u","data":"aGVsbG8K","offset":0}"#),
        ok(7, r#"{"success":true,"applied":6}"#)
    );
    // cat echoes the applied line to `c`, still attached, before the kill
    // below is sent: a TERM that beat the echo would lose it (seen under
    // load).
    let echoed = |lines: &[String]| {
        let frames: Vec<_> = lines.iter().filter_map(|l| parse_frame(l)).map(|(_, f)| f).collect();
        stdout_of(&frames) == b"hello\n"
    };
    while !echoed(&c.backlog) {
        let line = c.recv_line();
        c.backlog.push(line);
    }
    assert_eq!(
        c.call(
            8,
            "process.stdin",
            r#"{"id":"u","data":"aGVsbG8K","offset":18446744073709551615}"#
        ),
        err(8, -32003, GAP)
    );
    let mut r = d.connect();
    let reply = r.call(9, "process.reattach", r#"{"id":"u","fromSeq":18446744073709551615}"#);
    assert!(
        reply.starts_with(r#"{"jsonrpc":"2.0","id":9,"result":{"found":true,"running":true,"#)
            && reply.ends_with(r#""stdinApplied":6}}"#),
        "{reply}"
    );
    // The reattach moved the process to `r` and closed `c`.
    assert_eq!(
        r.call(10, "process.stdin", r#"{"id":"u","data":"","offset":6}"#),
        ok(10, r#"{"success":true,"applied":6}"#)
    );
    assert_eq!(
        r.call(11, "process.killAndWait", r#"{"id":"u","signal":"TERM"}"#),
        ok(11, r#"{"found":true,"died":true}"#)
    );
    // cat echoed the one line that was applied: the refused writes
    // delivered nothing. The whole log, replayed on a fresh connection,
    // comes before its reply.
    let mut t = d.connect();
    t.call(12, "process.reattach", r#"{"id":"u","fromSeq":0}"#);
    let frames: Vec<_> = t
        .backlog
        .iter()
        .filter_map(|l| parse_frame(l))
        .map(|(_, f)| f)
        .collect();
    assert_eq!(frames.last().map(|f| f.stream.as_str()), Some("exit"));
    assert_eq!(stdout_of(&frames), b"hello\n");
}

/// A daemon whose `$HOME` is a fresh directory, with git kept away from
/// user and system config.
fn daemon_with_home(home: &Path) -> TestDaemon {
    TestDaemon::start_with(
        &[],
        &[
            ("HOME", home.to_str().unwrap()),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ],
    )
}

#[test]
fn a_leading_tilde_expands_in_files_git_and_spawn_cwd() {
    let tmp = tempfile::tempdir().unwrap();
    let home = fs::canonicalize(tmp.path()).unwrap().join("home");
    fs::create_dir(&home).unwrap();
    fs::write(home.join("f.txt"), b"in home\n").unwrap();
    fs::create_dir(home.join("~")).unwrap();
    fs::write(home.join("~").join("g.txt"), b"literal\n").unwrap();
    fs::create_dir(home.join("sub")).unwrap();
    let r = repo(&home.join("repo"), false);
    git(&r, &["branch", "side"]);
    let tarball = home.join("arc.tar.gz");
    let made = Command::new("tar")
        .args(["-czf", tarball.to_str().unwrap(), "-C", home.to_str().unwrap(), "f.txt"])
        .status()
        .unwrap();
    assert!(made.success());
    let h = p(&home);

    let d = daemon_with_home(&home);
    let mut c = d.connect();
    assert_eq!(
        c.call(1, "files.read", r#"{"path":"~/f.txt"}"#),
        ok(1, r#"{"content":"in home\n","exists":true}"#)
    );
    for (id, path) in [(2, "~"), (3, "~/"), (4, "~//sub"), (5, "~/sub/../sub")] {
        assert_eq!(
            c.call(id, "files.validate", &format!(r#"{{"path":"{path}"}}"#)),
            ok(id, r#"{"valid":true,"isDir":true}"#),
            "{path}"
        );
    }
    // `~user` and a `~` that is not first stay literal.
    let missing = r#"{"exists":false,"isDir":false,"size":0,"mode":""}"#;
    assert_eq!(
        c.call(6, "files.stat", r#"{"path":"~nosuchuser/f.txt"}"#),
        ok(6, missing)
    );
    let mid = c.call(7, "files.read", &format!(r#"{{"path":"{h}/~/g.txt"}}"#));
    assert_eq!(mid, ok(7, r#"{"content":"literal\n","exists":true}"#));
    // files.list echoes the expanded paths.
    let listed = c.call(8, "files.list", r#"{"path":"~/sub/.."}"#);
    assert!(
        listed.contains(&format!(r#"{{"name":"f.txt","path":"{h}/f.txt","isDir":false}}"#)),
        "{listed}"
    );
    assert!(
        listed.contains(&format!(r#"{{"name":"~","path":"{h}/~","isDir":true}}"#)),
        "{listed}"
    );
    // Both extract_tar paths.
    assert_eq!(
        c.call(
            9,
            "files.extract_tar",
            r#"{"archivePath":"~/arc.tar.gz","destDir":"~/dest"}"#
        ),
        ok(9, r#"{"success":true,"fileCount":1}"#)
    );
    assert_eq!(fs::read(home.join("dest").join("f.txt")).unwrap(), b"in home\n");
    assert!(!tarball.exists(), "the archive is removed after extraction");
    assert!(!home.join("~").join("dest").exists());

    // git.*: path, and worktree_create's baseRepo and worktreePath.
    let info = c.call(10, "git.info", r#"{"path":"~/repo"}"#);
    assert!(info.contains(&format!(r#""root":"{h}/repo""#)), "{info}");
    assert_eq!(
        c.call(11, "git.list_branches", r#"{"path":"~/repo"}"#),
        ok(11, r#"{"isRepo":true,"branches":["master","side"]}"#)
    );
    // The worktree goes where 7d193f89's containment allows it (under
    // <repository>/.claude/worktrees); `~` expands in both paths.
    let created = c.call(
        12,
        "git.worktree_create",
        r#"{"baseRepo":"~/repo","branchName":"wt","worktreePath":"~/repo/.claude/worktrees/wt"}"#,
    );
    assert!(
        created.contains(&format!(r#""path":"{h}/repo/.claude/worktrees/wt""#)),
        "{created}"
    );
    assert!(home.join("repo/.claude/worktrees/wt").join("a.txt").is_file());

    // The spawn cwd.
    assert_eq!(
        c.call(13, "process.spawn", r#"{"id":"pwd","command":"pwd","cwd":"~/sub"}"#),
        ok(13, r#"{"success":true}"#)
    );
    let frames = frames_until_exit(&mut c, "pwd");
    assert_eq!(stdout_of(&frames), format!("{h}/sub\n").as_bytes());
    assert_eq!(
        c.call(14, "process.spawn", r#"{"id":"x","command":"pwd","cwd":"~/nope"}"#),
        err(
            14,
            -32603,
            &format!("chdir {h}/nope: stat {h}/nope: no such file or directory")
        )
    );
}

#[test]
fn error_texts_of_5db5e4a() {
    let d = TestDaemon::start();
    let root = d.root().join("t");
    fs::create_dir(&root).unwrap();
    let file = root.join("regular.txt");
    fs::write(&file, b"x\n").unwrap();
    let (r, f) = (p(&root), p(&file));
    let mut c = d.connect();
    // A 300-character name: ENAMETOOLONG is an error, not "missing".
    let long = format!("{r}/{}", "L".repeat(300));
    let too_long = format!("stat {long}: file name too long");
    assert_eq!(
        c.call(1, "files.stat", &format!(r#"{{"path":"{long}"}}"#)),
        err(1, -32603, &too_long)
    );
    // files.read opens first since 5fd08069, so its text says `open`.
    assert_eq!(
        c.call(2, "files.read", &format!(r#"{{"path":"{long}"}}"#)),
        err(2, -32603, &format!("open {long}: file name too long"))
    );
    assert_eq!(
        c.call(3, "files.validate", &format!(r#"{{"path":"{long}"}}"#)),
        ok(3, &format!(r#"{{"valid":false,"isDir":false,"error":"{too_long}"}}"#))
    );
    // A missing archive.
    assert_eq!(
        c.call(
            4,
            "files.extract_tar",
            &format!(r#"{{"archivePath":"{r}/nosuch.tar.gz","destDir":"{r}/dest"}}"#)
        ),
        ok(
            4,
            &format!(
                r#"{{"success":false,"fileCount":0,"error":"open archive: open {r}/nosuch.tar.gz: no such file or directory"}}"#
            )
        )
    );
    // A bad spawn cwd is reported before the command is even looked up.
    assert_eq!(
        c.call(
            5,
            "process.spawn",
            &format!(r#"{{"id":"a","command":"/bin/pwd","cwd":"{r}/missingdir"}}"#)
        ),
        err(
            5,
            -32603,
            &format!("chdir {r}/missingdir: stat {r}/missingdir: no such file or directory")
        )
    );
    assert_eq!(
        c.call(
            6,
            "process.spawn",
            &format!(r#"{{"id":"b","command":"/bin/pwd","cwd":"{f}"}}"#)
        ),
        err(6, -32603, &format!("chdir {f}: not a directory"))
    );
    assert_eq!(
        c.call(
            7,
            "process.spawn",
            &format!(r#"{{"id":"c","command":"no-such-command-xyz","cwd":"{f}"}}"#)
        ),
        err(7, -32603, &format!("chdir {f}: not a directory"))
    );
}
