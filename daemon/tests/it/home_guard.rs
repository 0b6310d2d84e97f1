//! The home guard (`homeguard.rs`, remora's own divergence, issue 34):
//! `files.extract_tar`, `git.worktree_remove` and `-install` refuse a target
//! that is, or contains, the daemon user's home directory. Each test runs
//! the real binary with `HOME` set to a temp dir that holds files, and
//! checks that every file in it is still there, unchanged, after each
//! refusal; a control next to each refusal shows the same request does
//! delete or replace what it names when that is not the home.

use crate::common;
use crate::common::git::{git, repo};
use crate::common::reply::{ok, p};
use crate::common::TestDaemon;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A JSON string body as the daemon writes it (quotes and backslashes
/// escaped).
fn json_text(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Every file and directory below `dir` with the bytes of each file: what
/// "left untouched" is checked against.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(here) = pending.pop() {
        for entry in fs::read_dir(&here).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                pending.push(path.clone());
                out.insert(path, None);
            } else {
                out.insert(path.clone(), Some(fs::read(&path).unwrap()));
            }
        }
    }
    out
}

/// `<tmp>/top/home` with a few files a user would miss, and the daemon's
/// state dir kept outside it (by default it would be under `~/.local`).
struct Fixture {
    tmp: tempfile::TempDir,
    home: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let top = fs::canonicalize(tmp.path()).unwrap().join("top");
        Fixture::with_home(tmp, &top)
    }

    fn with_home(tmp: tempfile::TempDir, top: &Path) -> Fixture {
        let home = top.join("home");
        fs::create_dir_all(home.join("docs")).unwrap();
        fs::write(home.join("notes.txt"), b"my notes\n").unwrap();
        fs::write(home.join(".profile"), b"export X=1\n").unwrap();
        fs::write(home.join("docs/thesis.tex"), b"\\begin{document}\n").unwrap();
        Fixture { tmp, home }
    }

    fn top(&self) -> PathBuf {
        self.home.parent().unwrap().to_path_buf()
    }

    fn state_dir(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    fn daemon(&self) -> TestDaemon {
        TestDaemon::start_with(
            &[],
            &[
                ("HOME", &p(&self.home)),
                ("XDG_STATE_HOME", &p(&self.state_dir())),
                ("GIT_CONFIG_NOSYSTEM", "1"),
                ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ],
        )
    }

    /// A gzip'd tar holding `x.txt`, at `<tmp>/<name>`.
    fn archive(&self, name: &str) -> PathBuf {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(3);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, "x.txt", &b"abc"[..]).unwrap();
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(&builder.into_inner().unwrap()).unwrap();
        let path = self.tmp.path().join(name);
        fs::write(&path, gz.finish().unwrap()).unwrap();
        path
    }
}

fn extract(d: &TestDaemon, archive: &Path, dest: &str) -> String {
    d.call(
        "files.extract_tar",
        &format!(r#"{{"archivePath":"{}","destDir":"{dest}"}}"#, p(archive)),
    )
}

#[test]
fn extract_tar_refuses_every_spelling_of_the_home_and_leaves_it_untouched() {
    let f = Fixture::new();
    let d = f.daemon();
    let home = p(&f.home);
    let link = f.tmp.path().join("link-to-home");
    symlink(&f.home, &link).unwrap();
    let before_home = snapshot(&f.home);
    let before_top = snapshot(&f.top());
    let archive = f.archive("a.tgz");
    // (destDir as sent, the path the text names: `~` expanded, else as sent)
    let cases = [
        ("~".to_string(), home.clone()),
        ("~/".to_string(), home.clone()),
        (home.clone(), home.clone()),
        (format!("{home}/.."), format!("{home}/..")),
        (p(&link), p(&link)),
        (format!("{}/", p(&link)), format!("{}/", p(&link))),
        ("~/docs/..".to_string(), home.clone()),
    ];
    for (sent, named) in cases {
        let text = format!("destDir must not be or contain the home directory: \"{named}\"");
        assert_eq!(
            extract(&d, &archive, &sent),
            ok(1, &format!(r#"{{"success":false,"error":"{}"}}"#, json_text(&text))),
            "destDir {sent}"
        );
        assert_eq!(snapshot(&f.home), before_home, "the home changed after destDir {sent}");
        assert_eq!(snapshot(&f.top()), before_top, "the home's parent changed after {sent}");
        assert!(archive.exists(), "a refused request consumes no archive ({sent})");
    }
    assert_eq!(fs::read_link(&link).unwrap(), f.home, "the link stays");
}

#[test]
fn extract_tar_below_the_home_still_works() {
    let f = Fixture::new();
    let d = f.daemon();
    let before = snapshot(&f.home);
    let archive = f.archive("b.tgz");
    assert_eq!(
        extract(&d, &archive, "~/sub"),
        ok(1, r#"{"success":true,"fileCount":1}"#)
    );
    assert_eq!(fs::read(f.home.join("sub/x.txt")).unwrap(), b"abc");
    assert!(!archive.exists(), "the archive was consumed");
    // Everything that was there before is still there, as it was.
    let after = snapshot(&f.home);
    for (path, content) in &before {
        assert_eq!(after.get(path), Some(content), "{}", path.display());
    }
    // A directory that is not the home is still wiped, as the reference
    // does (so the refusals above are the guard's, not a general no).
    fs::write(f.home.join("sub/old.txt"), b"old").unwrap();
    let again = f.archive("c.tgz");
    assert_eq!(
        extract(&d, &again, &format!("{}/sub", p(&f.home))),
        ok(1, r#"{"success":true,"fileCount":1}"#)
    );
    assert!(!f.home.join("sub/old.txt").exists());
}

#[test]
fn worktree_remove_refuses_a_home_below_the_repository() {
    let tmp = tempfile::tempdir().unwrap();
    // The repository is the home's parent, so the home passes the
    // reference's location checks (strictly inside, no link, no `..`).
    let top = repo(&tmp.path().join("top"), false);
    let f = Fixture::with_home(tmp, &top);
    fs::create_dir(top.join("plain")).unwrap();
    fs::write(top.join("plain/f"), b"f").unwrap();
    let d = f.daemon();
    let before = snapshot(&f.home);
    let remove = |path: &str| {
        d.call(
            "git.worktree_remove",
            &format!(r#"{{"baseRepo":"{}","worktreePath":"{path}"}}"#, p(&top)),
        )
    };
    let text = format!(
        "worktreePath must not be or contain the home directory: \"{}\"",
        p(&f.home)
    );
    let refused = ok(1, &format!(r#"{{"success":false,"error":"{}"}}"#, json_text(&text)));
    assert_eq!(remove("~"), refused);
    assert_eq!(remove(&p(&f.home)), refused);
    assert_eq!(snapshot(&f.home), before);
    // The control: a plain directory at the same place is deleted by hand
    // (git refuses it, it is no worktree), as the home would have been.
    assert_eq!(remove(&p(&top.join("plain"))), ok(1, r#"{"success":true}"#));
    assert!(!top.join("plain").exists());
}

#[test]
fn a_create_rollback_never_empties_the_home() {
    // The home does not exist yet when the create makes the leaf at its
    // path (the create refuses an existing leaf), so only the rollback's
    // own guard stands between a failed checkout and the home's files.
    let tmp = tempfile::tempdir().unwrap();
    let r = repo(&tmp.path().join("r"), false);
    fs::write(r.join(".gitattributes"), "a.txt filter=broken\n").unwrap();
    git(&r, &["add", ".gitattributes"]);
    git(&r, &["commit", "-q", "-m", "attrs"]);
    // The failing filter runs in the new worktree: it leaves a file there.
    git(
        &r,
        &["config", "filter.broken.smudge", "echo mine > precious.txt; exit 3"],
    );
    git(&r, &["config", "filter.broken.required", "true"]);
    let wt = r.join(".claude/worktrees/wt");
    let state = tmp.path().join("state");
    let d = TestDaemon::start_with(
        &[],
        &[
            ("HOME", &p(&wt)),
            ("XDG_STATE_HOME", &p(&state)),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ],
    );
    let reply = d.call(
        "git.worktree_create",
        &format!(
            r#"{{"baseRepo":"{}","branchName":"b","worktreePath":"{}"}}"#,
            p(&r),
            p(&wt)
        ),
    );
    let tail = format!(
        "; and the undo could not finish for {0}: worktreePath must not be or contain the home directory: \\\"{0}\\\"; the worktree directory, its registration, and the branch all remain\",\"errorCode\":\"worktree_add_failed\"}}}}",
        p(&wt)
    );
    assert!(reply.contains("git worktree add failed (checkout): "), "{reply}");
    assert!(reply.ends_with(&tail), "{reply}\nwant the end {tail}");
    assert_eq!(fs::read(wt.join("precious.txt")).unwrap(), b"mine\n");
    assert!(wt.join(".git").is_file(), "the registration's link stays");
    assert_eq!(
        git(&r, &["for-each-ref", "--format=%(refname:short)", "refs/heads/b"]),
        "b"
    );
}

// ---------------------------------------------------------------- -install

fn cli_blob() -> Vec<u8> {
    zstd::encode_all(&b"#!/bin/sh\necho \"fake-cli 1.0\"\n"[..], 3).unwrap()
}

fn install(f: &Fixture, prefix: &[&str], cli_dir: &Path, version: &str, source: &[&str]) -> Output {
    let (program, before) = match prefix.split_first() {
        Some((program, rest)) => (program.to_string(), rest.to_vec()),
        None => (env!("CARGO_BIN_EXE_remora").to_string(), Vec::new()),
    };
    let mut command = Command::new(program);
    command.args(before);
    if !prefix.is_empty() {
        command.arg(env!("CARGO_BIN_EXE_remora"));
    }
    command
        .args(["-install", "-cli-dir"])
        .arg(cli_dir)
        .args(["-cli-version", version, "-cli-keep", "1"])
        .args(source)
        .env("HOME", &f.home)
        .output()
        .unwrap()
}

fn cli_error(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("__INSTALL_RESULT__"))
        .unwrap_or_else(|| panic!("no facts line: {stdout}"));
    let facts: serde_json::Value = serde_json::from_str(line).unwrap();
    facts["cliError"].as_str().unwrap_or_default().to_string()
}

#[test]
fn install_refuses_the_home_as_its_cli_path_or_cli_dir() {
    let f = Fixture::new();
    let before = snapshot(&f.home);
    let upload = f.tmp.path().join("cli.zst");
    fs::write(&upload, cli_blob()).unwrap();
    let zst = ["-cli-zst", upload.to_str().unwrap()];

    // cli-dir = the home's parent, version = the home's name: the CLI path
    // is the home, which the install would replace with the CLI file.
    let out = install(&f, &[], &f.top(), "home", &zst);
    assert_eq!(
        cli_error(&out),
        format!("cli path must not be or contain the home directory: \"{}\"", p(&f.home))
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(snapshot(&f.home), before);
    assert!(upload.exists(), "the upload is not consumed by a refusal");

    // cli-dir = the home: the prune (keep 1) would delete its files.
    let out = install(&f, &[], &f.home, "1.0", &zst);
    assert_eq!(
        cli_error(&out),
        format!("cli dir must not be or contain the home directory: \"{}\"", p(&f.home))
    );
    assert_eq!(snapshot(&f.home), before);

    // Through `~/..` spelled out, and a download that is never attempted.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/cli.zst", listener.local_addr().unwrap());
    let dotdot = f.home.join("..");
    let out = install(&f, &[], &dotdot, "home", &["-cli-url", &url]);
    assert_eq!(
        cli_error(&out),
        format!("cli path must not be or contain the home directory: \"{}\"", p(&f.home))
    );
    assert!(listener.accept().is_err(), "no download was attempted");
    assert_eq!(snapshot(&f.home), before);

    // The control: a cli dir beside the home installs and prunes as before.
    let beside = f.top().join("cli");
    fs::create_dir(&beside).unwrap();
    fs::write(beside.join("0.9"), b"old").unwrap();
    let out = install(&f, &[], &beside, "1.0", &zst);
    assert_eq!(cli_error(&out), "");
    assert!(beside.join("1.0").exists());
    assert!(!beside.join("0.9").exists(), "pruned to one");
}

#[test]
fn install_refuses_the_home_reached_through_a_bind_mount_of_its_parent() {
    let prefix = match common::unshare_prefix() {
        Ok(prefix) => prefix,
        Err(why) => {
            common::skip::skip(&format!("no private mount namespace here: {why}"));
            return;
        }
    };
    let f = Fixture::new();
    let before = snapshot(&f.home);
    let upload = f.tmp.path().join("cli.zst");
    fs::write(&upload, cli_blob()).unwrap();
    let bind = f.tmp.path().join("bind");
    fs::create_dir(&bind).unwrap();
    // Inside its own mount namespace (gone when the command ends), the
    // home's parent is mounted a second time at `bind`: `bind/home` has no
    // spelling in common with the home, only its device and inode.
    let mut shell: Vec<&str> = prefix.clone();
    shell.extend(["sh", "-c", r#"mount --bind "$1" "$2" && shift 2 && exec "$@""#, "sh"]);
    let (top, bind_text) = (p(&f.top()), p(&bind));
    shell.extend([top.as_str(), bind_text.as_str()]);
    let out = install(&f, &shell, &bind, "home", &["-cli-zst", upload.to_str().unwrap()]);
    assert_eq!(
        cli_error(&out),
        format!("cli path must not be or contain the home directory: \"{bind_text}/home\""),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(snapshot(&f.home), before);
    assert!(upload.exists());
}
