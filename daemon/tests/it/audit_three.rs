//! The third audit's findings (issue 44), one attack each, against the real
//! binary: F1 (a path of `PATH_MAX` bytes or more spelling the home passed
//! the home guard, and the wipe emptied the home), F2 (a destDir through
//! another user's link to the home was wiped and extracted into), F3 (a
//! bind mount of the home inside a deleted tree was emptied), F4 (a replay dir naming
//! an existing directory was narrowed to `0700`), F6 (a group-writable
//! directory of a primary group shared with another user counted as
//! private) and item 8 (`-stop` sent the token to whatever listened on the
//! socket path). The attacks that need another account run as root, with
//! throwaway accounts made by `useradd` and removed after.

use crate::common::frames::{frames_until_exit, stdout_of};
use crate::common::git::repo;
use crate::common::reply::{ok, p};
use crate::common::{launch_to_banner, serve_command, Client, StopOnDrop, TestDaemon, TOKEN};
use flate2::write::GzEncoder;
use flate2::Compression;
use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The kernel's limit the guard refuses at (4096 on Linux, 1024 on macOS).
const PATH_MAX: usize = libc::PATH_MAX as usize;

/// A JSON string body as the daemon writes it.
fn json_text(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Every file and directory below `dir`, with each file's bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(here) = pending.pop() {
        for entry in fs::read_dir(&here).unwrap() {
            let path = entry.unwrap().path();
            if fs::symlink_metadata(&path).unwrap().is_dir() {
                pending.push(path.clone());
                out.insert(path, None);
            } else {
                out.insert(path.clone(), Some(fs::read(&path).unwrap()));
            }
        }
    }
    out
}

/// `<tmp>/top/home` holding files a user would miss, `<tmp>/link` a link
/// to `<tmp>/top`, and the daemon's state kept outside the home.
struct Home {
    tmp: tempfile::TempDir,
    top: PathBuf,
    home: PathBuf,
}

impl Home {
    fn new(top_is_a_repository: bool) -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let top = fs::canonicalize(tmp.path()).unwrap().join("top");
        let top = if top_is_a_repository {
            repo(&top, false)
        } else {
            fs::create_dir(&top).unwrap();
            top
        };
        let home = top.join("home");
        fs::create_dir_all(home.join("docs")).unwrap();
        fs::write(home.join("notes.txt"), b"my notes\n").unwrap();
        fs::write(home.join("docs/thesis.tex"), b"\\begin{document}\n").unwrap();
        std::os::unix::fs::symlink(&top, tmp.path().join("link")).unwrap();
        Home { tmp, top, home }
    }

    fn link(&self) -> PathBuf {
        fs::canonicalize(self.tmp.path()).unwrap().join("link")
    }

    /// `<link>`, then `/.` until the whole is at least `len` bytes, then
    /// `/home`: the home, spelled so that cleaning does not show it.
    fn spelled(&self, len: usize) -> String {
        let mut path = p(&self.link());
        while path.len() + "/home".len() < len {
            path.push_str("/.");
        }
        path.push_str("/home");
        path
    }

    fn daemon(&self) -> TestDaemon {
        TestDaemon::start_with(
            &[],
            &[
                ("HOME", &p(&self.home)),
                ("XDG_STATE_HOME", &p(&self.tmp.path().join("state"))),
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

fn too_long_text(what: &str, path: &str) -> String {
    format!(
        "{what} is too long to be checked against the home directory (a path of {PATH_MAX} bytes or more, or a name of more than 255 bytes, is refused): \"{path}\""
    )
}

// ------------------------------------------------------------------ F1

#[test]
fn a_destdir_of_path_max_bytes_spelling_the_home_is_refused() {
    let h = Home::new(false);
    let d = h.daemon();
    let before = snapshot(&h.home);
    let archive = h.archive("a.tgz");
    let extract = |dest: &str| {
        d.call(
            "files.extract_tar",
            &format!(r#"{{"archivePath":"{}","destDir":"{dest}"}}"#, p(&archive)),
        )
    };
    // Written short, the link's spelling is refused as the home.
    let short = h.spelled(0);
    let home_text = format!("destDir must not be or contain the home directory: \"{short}\"");
    assert_eq!(
        extract(&short),
        ok(
            1,
            &format!(r#"{{"success":false,"error":"{}"}}"#, json_text(&home_text))
        )
    );
    // Written PATH_MAX bytes long, the same directory: the kernel cannot
    // resolve it, so the guard cannot tell, and refuses.
    let long = h.spelled(PATH_MAX);
    assert!(long.len() >= PATH_MAX);
    assert_eq!(
        extract(&long),
        ok(
            1,
            &format!(
                r#"{{"success":false,"error":"{}"}}"#,
                json_text(&too_long_text("destDir", &long))
            )
        )
    );
    assert_eq!(snapshot(&h.home), before, "the home changed");
    assert!(archive.exists(), "a refused request consumes no archive");
    // The control: the same archive still extracts below the home.
    assert_eq!(
        extract(&format!("{}/sub", p(&h.home))),
        ok(1, r#"{"success":true,"fileCount":1}"#)
    );
}

#[test]
fn a_worktree_path_of_path_max_bytes_spelling_the_home_is_refused() {
    // The repository is the home's parent, named through the link, so the
    // long spelling lies lexically inside it and passes the location
    // checks; git refuses it (no worktree), and the delete by hand walks
    // by descriptor from the repository to `home`.
    let h = Home::new(true);
    let d = h.daemon();
    let before = snapshot(&h.home);
    let repo = p(&h.link());
    let remove = |path: &str| {
        d.call(
            "git.worktree_remove",
            &format!(r#"{{"baseRepo":"{repo}","worktreePath":"{path}"}}"#),
        )
    };
    let long = h.spelled(PATH_MAX);
    assert_eq!(
        remove(&long),
        ok(
            1,
            &format!(
                r#"{{"success":false,"error":"{}"}}"#,
                json_text(&too_long_text("worktreePath", &long))
            )
        )
    );
    assert_eq!(snapshot(&h.home), before, "the home changed");
    // The control: a plain directory beside the home, spelled the same
    // way but short, is deleted by hand.
    fs::create_dir(h.top.join("plain")).unwrap();
    fs::write(h.top.join("plain/f"), b"f").unwrap();
    assert_eq!(remove(&format!("{repo}/plain")), ok(1, r#"{"success":true}"#));
    assert!(!h.top.join("plain").exists());
    assert_eq!(snapshot(&h.home), before);
}

// ------------------------------------------------------------------ F3

/// What the descent says of a directory it left in place (`tarx`'s
/// `HOME_HERE` and `OTHER_FILESYSTEM`).
const HOME_HERE: &str = "the home directory or a directory above it is mounted here; left in place";
const OTHER_FILESYSTEM: &str = "another filesystem is mounted here; left in place";

/// A daemon started in a private mount namespace (`unshare --mount`) after
/// `mounts` (shell lines) ran there, with `HOME` at `home`; `None` (after
/// saying why) where no such namespace can be had.
fn daemon_with_mounts(dir: &Path, home: &Path, mounts: &[String]) -> Option<TestDaemon> {
    let prefix = match crate::common::unshare_prefix() {
        Ok(prefix) => prefix,
        Err(why) => {
            crate::common::skip::skip(&format!("no private mount namespace here: {why}"));
            return None;
        }
    };
    use std::os::unix::fs::OpenOptionsExt;
    let wrapper = dir.join("remora-in-a-mount-namespace");
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(&wrapper)
        .unwrap();
    writeln!(
        f,
        "#!/bin/sh\nexport HOME='{}' XDG_STATE_HOME='{}' GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null\nexec {} sh -c 'set -e\n{}\nexec \"$0\" \"$@\"' '{}' \"$@\"",
        p(home),
        p(&dir.join("state")),
        prefix.join(" "),
        mounts.join("\n"),
        crate::common::remora_bin()
    )
    .unwrap();
    drop(f);
    Some(TestDaemon::start_binary(&wrapper, &[]))
}

/// Whether `file` holds `kept` as the daemon sees it (in its namespace).
fn daemon_sees_kept(d: &TestDaemon, file: &Path, id: &str) -> bool {
    let mut c = d.connect();
    let params = format!(r#"{{"id":"{id}","command":"/bin/cat","args":["{}"]}}"#, p(file));
    assert!(c.call(1, "process.spawn", &params).contains(r#""success":true"#));
    stdout_of(&frames_until_exit(&mut c, id)) == b"kept\n"
}

#[test]
fn a_bind_mount_of_the_home_or_its_parent_inside_a_deleted_tree_survives() {
    let h = Home::new(false);
    let base = fs::canonicalize(h.tmp.path()).unwrap();
    // Trees to delete, each holding a mount point `m`: the home bound
    // there, its parent (`top`), and a filesystem of its own.
    let repo = repo(&base.join("repo"), false);
    let mut mounts = Vec::new();
    let kinds = ["home", "top", "fs"];
    for kind in kinds {
        for tree in [base.join(format!("dest-{kind}/sub")), repo.join(format!("wt-{kind}"))] {
            fs::create_dir_all(tree.join("m")).unwrap();
            fs::write(tree.join("f"), b"f").unwrap();
            let m = p(&tree.join("m"));
            mounts.push(match kind {
                "home" => format!("mount --bind '{}' '{m}'", p(&h.home)),
                "top" => format!("mount --bind '{}' '{m}'", p(&h.top)),
                _ => format!("mount -t tmpfs tmpfs '{m}'\necho kept > '{m}/kept'"),
            });
        }
    }
    let before = snapshot(&h.home);
    let Some(d) = daemon_with_mounts(&base, &h.home, &mounts) else {
        return;
    };
    for kind in kinds {
        let why = if kind == "fs" { OTHER_FILESYSTEM } else { HOME_HERE };
        // `files.extract_tar`'s wipe of `dest-<kind>`.
        let dest = base.join(format!("dest-{kind}"));
        let archive = h.archive(&format!("{kind}.tgz"));
        // The newest build's words: the entry below destDir's parent.
        let text = format!("clean destDir: RemoveAll dest-{kind}: {why}");
        assert_eq!(
            d.call("files.extract_tar", &extract_params(&archive, &dest)),
            ok(
                1,
                &format!(r#"{{"success":false,"fileCount":0,"error":"{}"}}"#, json_text(&text))
            ),
            "{kind}"
        );
        assert_eq!(snapshot(&h.home), before, "the home changed ({kind})");
        assert!(!dest.join("sub/f").exists(), "the rest of the tree goes ({kind})");
        // `git.worktree_remove`'s delete by hand of `wt-<kind>`.
        let wt = repo.join(format!("wt-{kind}"));
        let reply = d.call(
            "git.worktree_remove",
            &format!(r#"{{"baseRepo":"{}","worktreePath":"{}"}}"#, p(&repo), p(&wt)),
        );
        assert!(reply.contains(r#""success":false"#), "{kind}: {reply}");
        assert!(reply.contains(&format!("RemoveAll m: {why}")), "{kind}: {reply}");
        assert_eq!(snapshot(&h.home), before, "the home changed ({kind})");
    }
    // The other filesystem's file is still there, as the daemon sees it.
    assert!(daemon_sees_kept(&d, &base.join("dest-fs/sub/m/kept"), "dest"));
    assert!(daemon_sees_kept(&d, &repo.join("wt-fs/m/kept"), "wt"));
}

// ------------------------------------------------------------------ F4

/// Waits for a `daemon-*` directory in `dir` (the store makes it at start).
fn holds_a_daemon_dir(dir: &Path) -> bool {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("daemon-"))
        })
        .unwrap_or(false)
}

/// Replay works from the daemon's replay dir.
fn replays_a_process(d: &TestDaemon) {
    let mut c = d.connect();
    let reply = c.call(
        1,
        "process.spawn",
        r#"{"id":"p","command":"sh","args":["-c","seq 1 500"]}"#,
    );
    assert!(reply.contains(r#""success":true"#), "{reply}");
    let want: String = (1..=500).map(|i| format!("{i}\n")).collect();
    assert_eq!(stdout_of(&frames_until_exit(&mut c, "p")), want.as_bytes());
}

#[test]
fn a_replay_dir_naming_an_existing_wide_directory_keeps_its_mode() {
    let tmp = tempfile::tempdir().unwrap();
    // `replay-dir = ~/`: a home is commonly 0755. Nobody else can write
    // it, so it is used as it is (it used to be narrowed to 0700).
    let home = tmp.path().join("home");
    fs::create_dir(&home).unwrap();
    fs::set_permissions(&home, fs::Permissions::from_mode(0o755)).unwrap();
    let d = TestDaemon::start_with(&["-replay-dir", &p(&home)], &[]);
    assert_eq!(
        fs::metadata(&home).unwrap().mode() & 0o7777,
        0o755,
        "the home was narrowed"
    );
    assert!(holds_a_daemon_dir(&home), "replay is kept in {}", home.display());
    assert!(!d.log().contains("cannot use"), "{}", d.log());
    replays_a_process(&d);

    // A sticky directory anyone may write, standing in for /tmp (a root
    // daemon's own): it kept losing its sticky bit. Now a subdirectory
    // of the daemon's own holds the replay, and the log says where.
    let shared = tmp.path().join("shared-tmp");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
    let d = TestDaemon::start_with(&["-replay-dir", &p(&shared)], &[]);
    assert_eq!(
        fs::metadata(&shared).unwrap().mode() & 0o7777,
        0o1777,
        "the shared directory's mode changed"
    );
    // SAFETY: geteuid cannot fail.
    let sub = shared.join(format!("remora-{}", unsafe { libc::geteuid() }));
    assert_eq!(fs::metadata(&sub).unwrap().mode() & 0o7777, 0o700);
    assert!(holds_a_daemon_dir(&sub), "replay is kept in {}", sub.display());
    assert!(!holds_a_daemon_dir(&shared));
    let said = format!("replay logs go to {}", p(&sub));
    assert!(d.log().contains(&said), "{}", d.log());
    replays_a_process(&d);
}

// ------------------------------------------------------- throwaway accounts

/// Accounts and groups made for one test, removed when dropped.
struct Accounts {
    users: Vec<String>,
    groups: Vec<String>,
    prefix: String,
}

impl Accounts {
    /// `None` (after saying why) unless running as root with the tools.
    fn new() -> Option<Accounts> {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            crate::common::skip::skip("making accounts of other users needs root");
            return None;
        }
        if Command::new("useradd").arg("--help").output().is_err() {
            crate::common::skip::skip("no useradd to make throwaway accounts");
            return None;
        }
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(Accounts {
            users: Vec::new(),
            groups: Vec::new(),
            prefix: format!("ra3-{}-{n}", std::process::id()),
        })
    }

    fn run(args: &[&str]) {
        let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A new group; its gid.
    fn group(&mut self, suffix: &str) -> u32 {
        let name = format!("{}-{suffix}", self.prefix);
        Accounts::run(&["groupadd", &name]);
        self.groups.push(name.clone());
        nix::unistd::Group::from_name(&name).unwrap().unwrap().gid.as_raw()
    }

    /// A new account whose primary group is `gid`; its uid and name.
    fn user(&mut self, suffix: &str, gid: u32) -> (u32, String) {
        let name = format!("{}-{suffix}", self.prefix);
        Accounts::run(&["useradd", "-M", "-N", "-s", "/bin/sh", "-g", &gid.to_string(), &name]);
        self.users.push(name.clone());
        let uid = nix::unistd::User::from_name(&name).unwrap().unwrap().uid.as_raw();
        (uid, name)
    }

    fn remove_user(&mut self, name: &str) {
        Accounts::run(&["userdel", name]);
        self.users.retain(|u| u != name);
    }
}

impl Drop for Accounts {
    fn drop(&mut self) {
        for user in &self.users {
            let _ = Command::new("userdel").arg(user).status();
        }
        for group in &self.groups {
            let _ = Command::new("groupdel").arg(group).status();
        }
    }
}

fn chown(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).unwrap();
}

// ------------------------------------------------------------------ F6

/// A daemon run as `uid`/`gid` on `<base>/<name>/rpc.sock`, with its
/// replay dir at `replay` and `SSH_AUTH_SOCK` set to `agent`; its socket,
/// its stopper and its log (`<base>/<name>.log`).
fn serve_as(
    base: &Path,
    name: &str,
    (uid, gid): (u32, u32),
    replay: &Path,
    agent: &Path,
) -> (PathBuf, StopOnDrop, PathBuf) {
    let run = base.join(name);
    fs::create_dir(&run).unwrap();
    fs::set_permissions(&run, fs::Permissions::from_mode(0o700)).unwrap();
    let token = run.join("token");
    fs::write(&token, format!("{TOKEN}\n")).unwrap();
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    chown(&token, uid, gid);
    chown(&run, uid, gid);
    let socket = run.join("rpc.sock");
    let log = base.join(format!("{name}.log"));
    let mut command = serve_command(&socket, &token);
    command
        .arg("-replay-dir")
        .arg(replay)
        .current_dir(base)
        .env("HOME", base.join("home"))
        .env("SSH_AUTH_SOCK", agent)
        .uid(uid)
        .gid(gid);
    let stop = StopOnDrop::new(&socket, TOKEN);
    launch_to_banner(command, &log);
    (socket, stop, log)
}

/// What a child of the daemon on `socket` sees in `SSH_AUTH_SOCK`.
fn child_sees_agent(socket: &Path, id: &str) -> String {
    let mut c = Client::connect(socket);
    let params = format!(r#"{{"id":"{id}","command":"/bin/sh","args":["-c","printf %s \"${{SSH_AUTH_SOCK--}}\""]}}"#);
    assert_eq!(
        c.call(1, "process.spawn", &params),
        r#"{"jsonrpc":"2.0","id":1,"result":{"success":true}}"#
    );
    String::from_utf8(stdout_of(&frames_until_exit(&mut c, id))).unwrap()
}

#[test]
fn a_group_writable_directory_of_a_primary_group_shared_with_another_user_is_not_private() {
    let Some(mut accounts) = Accounts::new() else {
        return;
    };
    let shared = accounts.group("team");
    let (victim, _) = accounts.user("victim", shared);
    let (_, other) = accounts.user("other", shared);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    // The victim opens its directories through root's temp dir.
    fs::set_permissions(base, fs::Permissions::from_mode(0o755)).unwrap();
    let home = base.join("home");
    fs::create_dir(&home).unwrap();
    chown(&home, victim, shared);
    // The victim's project directory, writable by its primary group: the
    // other member of that group can rename and replace what is in it.
    let team = base.join("team");
    fs::create_dir(&team).unwrap();
    fs::set_permissions(&team, fs::Permissions::from_mode(0o775)).unwrap();
    chown(&team, victim, shared);
    let agent = team.join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&agent).unwrap();
    chown(&agent, victim, shared);
    let replay = team.join("replay");

    let (socket, stop, log) = serve_as(base, "shared", (victim, shared), &replay, &agent);
    assert_eq!(
        child_sees_agent(&socket, "shared"),
        "-",
        "the agent socket was handed on"
    );
    let text = fs::read_to_string(&log).unwrap();
    drop(stop);
    let why = format!("{}: writable by other users (mode 0775, no sticky bit)", p(&team));
    assert!(text.contains("[replay] cannot use"), "the replay dir was used: {text}");
    assert!(text.contains(&why), "refused for another reason: {text}");
    assert!(text.contains("is not private to this user"), "{text}");
    assert!(!replay.exists(), "the replay dir was made in the shared place");

    // The control: once the group is the victim's alone, the same
    // directory counts as private, for both.
    accounts.remove_user(&other);
    let (socket, stop, log) = serve_as(base, "private", (victim, shared), &replay, &agent);
    assert_eq!(child_sees_agent(&socket, "private"), p(&agent));
    let text = fs::read_to_string(&log).unwrap();
    drop(stop);
    assert!(!text.contains("cannot use"), "{text}");
    assert!(replay.exists(), "{text}");
}

// ------------------------------------------------------------------ F2

/// A gzip'd tar holding the one file `name` with `data`, at `path`.
fn archive_of(path: &Path, name: &str, data: &[u8]) {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(data.len() as u64);
    header.set_mode(0o600);
    header.set_cksum();
    builder.append_data(&mut header, name, data).unwrap();
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(&builder.into_inner().unwrap()).unwrap();
    fs::write(path, gz.finish().unwrap()).unwrap();
}

/// The refusal of a destDir below another user's directory or link.
fn foreign_way_text(dest: &Path, why: &str) -> String {
    format!(
        "destDir must not lie below a directory or link another user can change: \"{}\" ({why})",
        p(dest)
    )
}

/// `files.extract_tar`'s params.
fn extract_params(archive: &Path, dest: &Path) -> String {
    format!(r#"{{"archivePath":"{}","destDir":"{}"}}"#, p(archive), p(dest))
}

#[test]
fn a_destdir_through_another_users_link_to_the_home_is_refused() {
    let Some(mut accounts) = Accounts::new() else {
        return;
    };
    let group = accounts.group("f2");
    let (victim, _) = accounts.user("victim", group);
    let (attacker, _) = accounts.user("attacker", group);
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).unwrap();
    // The victim's home (`serve_as` makes it the daemon's HOME), with the
    // keys an attacker would like to replace.
    let home = base.join("home");
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(home.join(".ssh/authorized_keys"), b"ssh-ed25519 AAAA the-victims-key\n").unwrap();
    for dir in [&home, &home.join(".ssh"), &home.join(".ssh/authorized_keys")] {
        chown(dir, victim, group);
    }
    let replay = base.join("replay");
    fs::create_dir(&replay).unwrap();
    fs::set_permissions(&replay, fs::Permissions::from_mode(0o700)).unwrap();
    chown(&replay, victim, group);
    // The attacker's own directory (0755, not sticky), and in it a link of
    // theirs to the victim's home.
    let att = base.join("att");
    fs::create_dir_all(att.join("own")).unwrap();
    fs::set_permissions(&att, fs::Permissions::from_mode(0o755)).unwrap();
    chown(&att, attacker, group);
    chown(&att.join("own"), attacker, group);
    std::os::unix::fs::symlink(&home, att.join("d")).unwrap();
    chown(&att.join("d"), attacker, group);
    let archive = base.join("keys.tgz");
    archive_of(&archive, "authorized_keys", b"ssh-ed25519 AAAA the-attackers-key\n");
    chown(&archive, victim, group);
    let before = snapshot(&home);

    let (socket, stop, _log) = serve_as(&base, "daemon", (victim, group), &replay, &base.join("no-agent"));
    let mut c = Client::connect(&socket);
    // `att/d/.ssh` is inside the home, not the home: the home guard lets
    // it pass. The way to it is the attacker's.
    let dest = att.join("d/.ssh");
    let why = format!(
        "{} is not private to this user (owner uid {attacker}, mode 755)",
        p(&att)
    );
    assert_eq!(
        c.call(1, "files.extract_tar", &extract_params(&archive, &dest)),
        ok(
            1,
            &format!(
                r#"{{"success":false,"error":"{}"}}"#,
                json_text(&foreign_way_text(&dest, &why))
            )
        )
    );
    assert_eq!(snapshot(&home), before, "the home changed");
    assert!(archive.exists(), "a refused request consumes no archive");

    // The link flipping between the attacker's own directory and the
    // home's parent, so that `att/d/home` is the home at one moment and
    // not at the next: every request is refused, and the home stays.
    let flipping = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flipper = {
        let (flipping, att, base) = (flipping.clone(), att.clone(), base.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while flipping.load(std::sync::atomic::Ordering::Relaxed) {
                let target = if flips.is_multiple_of(2) {
                    att.join("own")
                } else {
                    base.clone()
                };
                let next = att.join("d.next");
                let _ = fs::remove_file(&next);
                std::os::unix::fs::symlink(&target, &next).unwrap();
                std::os::unix::fs::lchown(&next, Some(attacker), Some(group)).unwrap();
                fs::rename(&next, att.join("d")).unwrap();
                flips += 1;
            }
            flips
        })
    };
    let dest = att.join("d/home");
    let refusals = [
        foreign_way_text(&dest, &why),
        format!("destDir must not be or contain the home directory: \"{}\"", p(&dest)),
    ];
    let mut seen = [0usize; 2];
    for id in 0..300 {
        let reply = c.call(id, "files.extract_tar", &extract_params(&archive, &dest));
        let which = refusals
            .iter()
            .position(|text| reply == ok(id, &format!(r#"{{"success":false,"error":"{}"}}"#, json_text(text))));
        let Some(which) = which else {
            panic!("try {id}: {reply}");
        };
        seen[which] += 1;
    }
    flipping.store(false, std::sync::atomic::Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    assert_eq!(snapshot(&home), before, "the home changed");
    assert!(seen[0] > 0, "never refused for the way ({seen:?}, {flips} flips)");

    // The control: the same archive extracts below the victim's own home.
    let own = home.join("project");
    assert_eq!(
        c.call(1, "files.extract_tar", &extract_params(&archive, &own)),
        ok(1, r#"{"success":true,"fileCount":1}"#)
    );
    assert_eq!(
        fs::read(own.join("authorized_keys")).unwrap(),
        b"ssh-ed25519 AAAA the-attackers-key\n"
    );
    drop(c);
    drop(stop);
}

// -------------------------------------------------------------- item 8

const IMPOSTOR_SOCKET_ENV: &str = "REMORA_TEST_IMPOSTOR_SOCKET";

/// Not a test of its own: the body of the impostor, run as another user by
/// the test below. It listens on the socket path, takes one connection,
/// and reports every byte it was sent.
#[test]
#[ignore = "run by the tests as a helper process"]
fn impostor_listener_helper() {
    let Some(socket) = std::env::var_os(IMPOSTOR_SOCKET_ENV) else {
        return;
    };
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    println!("listening");
    std::io::stdout().flush().unwrap();
    let (mut conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(15))).unwrap();
    let mut got = Vec::new();
    let _ = conn.read_to_end(&mut got);
    println!("got {}", String::from_utf8_lossy(&got).escape_debug());
}

#[test]
fn stop_never_sends_the_token_to_a_listener_of_another_user() {
    let Some(mut accounts) = Accounts::new() else {
        return;
    };
    let group = accounts.group("imp");
    let (impostor, _) = accounts.user("impostor", group);
    // A socket directory where another user can take the name over once
    // the daemon is gone (sticky and open to all, as /tmp).
    let tmp = tempfile::tempdir().unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o1777)).unwrap();
    let socket = tmp.path().join("rpc.sock");
    let secret = "the-owners-daemon-token";
    let token_file = tmp.path().join("daemon.token");
    fs::write(&token_file, secret).unwrap();
    fs::set_permissions(&token_file, fs::Permissions::from_mode(0o600)).unwrap();

    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args([
            "audit_three::impostor_listener_helper",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(IMPOSTOR_SOCKET_ENV, &socket)
        .uid(impostor)
        .gid(group)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(helper.stdout.take().unwrap()).lines();
    assert!(
        lines.by_ref().map_while(Result::ok).any(|l| l == "listening"),
        "the impostor did not listen"
    );
    assert_eq!(fs::metadata(&socket).unwrap().uid(), impostor);

    let out = crate::common::remora_command()
        .args(["-stop", "-socket"])
        .arg(&socket)
        .env_remove("CLAUDE_RPC_TOKEN")
        .output()
        .unwrap();
    let report: Vec<String> = lines.map_while(Result::ok).collect();
    let _ = helper.wait();
    let report = report.join("\n");
    assert!(!report.contains(secret), "the token reached the impostor: {report}");
    let got = report.lines().find_map(|l| l.strip_prefix("got "));
    assert_eq!(got, Some(""), "the impostor was sent something: {report}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "survivor\n");
    assert!(
        stderr.contains(&format!(
            "is served by uid {impostor}, not by this user (uid 0) or root"
        )),
        "{stderr}"
    );
    assert!(token_file.exists(), "nothing is cleaned up after a refusal");
}
