//! `process.spawn`'s SSH agent hand-off,
//! against a real daemon whose login shell (`$SHELL`, a script here)
//! exports a real listening agent socket.

use crate::common::frames::{frames_until_exit, stdout_of};
use crate::common::TestDaemon;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::Path;

/// A login shell that exports `sock`, logs each script it is given to
/// `<dir>/runs` and runs it.
fn fake_shell(dir: &Path, sock: &Path) -> String {
    let path = dir.join("login-shell");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$4\" >> '{}'\nSSH_AUTH_SOCK='{}'; export SSH_AUTH_SOCK\nexec /bin/sh -c \"$4\"\n",
            dir.join("runs").display(),
            sock.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_string_lossy().into_owned()
}

/// What the child `id` sees in `SSH_AUTH_SOCK` (`-` when unset).
/// A daemon whose login shell reports a link to `sock`, made in a new
/// folder `folder` of `scratch` with mode `mode`; the link and the daemon.
fn daemon_shown_a_link_in(scratch: &Path, folder: &str, mode: u32, sock: &Path) -> (std::path::PathBuf, TestDaemon) {
    let dir = scratch.join(folder);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
    let link = dir.join("agent");
    std::os::unix::fs::symlink(sock, &link).unwrap();
    let shell = fake_shell(scratch, &link);
    (
        link,
        TestDaemon::start_without(&["SSH_AUTH_SOCK"], &[("SHELL", &shell)]),
    )
}

fn child_sees(d: &TestDaemon, id: &str, extra: &str) -> String {
    let mut c = d.connect();
    let params =
        format!(r#"{{"id":"{id}","command":"/bin/sh","args":["-c","printf %s \"${{SSH_AUTH_SOCK--}}\""]{extra}}}"#);
    let reply = c.call(1, "process.spawn", &params);
    assert_eq!(reply, r#"{"jsonrpc":"2.0","id":1,"result":{"success":true}}"#);
    String::from_utf8(stdout_of(&frames_until_exit(&mut c, id))).unwrap()
}

/// How often the shell was asked for the agent socket (the PATH
/// extraction at start-up runs it too, with another script).
fn shell_runs(dir: &Path) -> usize {
    let runs = std::fs::read_to_string(dir.join("runs")).unwrap_or_default();
    runs.lines().filter(|l| l.contains("AGENT_SOCK")).count()
}

#[test]
fn a_child_without_an_agent_gets_the_login_shells_socket() {
    let scratch = tempfile::tempdir().unwrap();
    let sock = scratch.path().join("agent.sock");
    let _agent = UnixListener::bind(&sock).unwrap();
    let shell = fake_shell(scratch.path(), &sock);
    let d = TestDaemon::start_without(&["SSH_AUTH_SOCK"], &[("SHELL", &shell)]);
    assert_eq!(shell_runs(scratch.path()), 0, "not asked at start-up");
    let runs_at_start = 0;

    assert_eq!(child_sees(&d, "given", ""), sock.to_string_lossy());
    assert_eq!(
        shell_runs(scratch.path()),
        runs_at_start + 1,
        "asked at the first spawn"
    );
    assert_eq!(child_sees(&d, "cached", ""), sock.to_string_lossy());
    assert_eq!(
        shell_runs(scratch.path()),
        runs_at_start + 1,
        "then served from the cache"
    );

    // The two ways to opt out, and a caller's own value.
    assert_eq!(child_sees(&d, "off", r#","disableShellAgentSocket":true"#), "-");
    assert_eq!(
        child_sees(&d, "null", r#","disableShellAgentSocket":null"#),
        sock.to_string_lossy()
    );
    assert_eq!(child_sees(&d, "empty", r#","env":{"SSH_AUTH_SOCK":""}"#), "");
    assert_eq!(child_sees(&d, "own", r#","env":{"SSH_AUTH_SOCK":"/mine"}"#), "/mine");

    let bad = d.call(
        "process.spawn",
        r#"{"id":"bad","command":"/bin/true","disableShellAgentSocket":"yes"}"#,
    );
    assert!(bad.contains(r#""code":-32602"#), "{bad}");
    assert!(d.log().contains("[shellenv] Login shell"), "{}", d.log());
}

#[test]
fn a_socket_that_is_not_ours_or_not_a_socket_is_not_handed_on() {
    let scratch = tempfile::tempdir().unwrap();
    let plain = scratch.path().join("agent.sock");
    std::fs::write(&plain, "").unwrap();
    let shell = fake_shell(scratch.path(), &plain);
    let d = TestDaemon::start_without(&["SSH_AUTH_SOCK"], &[("SHELL", &shell)]);
    assert_eq!(child_sees(&d, "file", ""), "-");
    assert!(d.log().contains("it is not a socket"), "{}", d.log());

    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return; // only root can give a socket to another user
    }
    let scratch = tempfile::tempdir().unwrap();
    let sock = scratch.path().join("agent.sock");
    let _agent = UnixListener::bind(&sock).unwrap();
    std::os::unix::fs::chown(&sock, Some(65534), None).unwrap();
    let shell = fake_shell(scratch.path(), &sock);
    let d = TestDaemon::start_without(&["SSH_AUTH_SOCK"], &[("SHELL", &shell)]);
    assert_eq!(child_sees(&d, "foreign", ""), "-");
    assert!(d.log().contains("belongs to uid 65534"), "{}", d.log());
}

#[test]
fn capabilities_list_the_feature_where_f6010b97_does() {
    let stamp = format!("{:0<40}", "f6010b97");
    let d = TestDaemon::start_with(&["-reference-build", &stamp], &[]);
    let reply = d.call("server.capabilities", "{}");
    assert!(
        reply.contains(
            r#""features":["process.stdin.offset","git.status.baseRepo","git.worktree_create.timeoutMs","git.worktree_create.existingBranch","process.spawn.shellAgentSocket","git.worktree.external_root","server.instance_id"]"#
        ),
        "{reply}"
    );
}

#[test]
fn the_daemons_own_socket_is_checked_before_a_child_gets_it() {
    let scratch = tempfile::tempdir().unwrap();
    let sock = scratch.path().join("agent.sock");
    let _agent = UnixListener::bind(&sock).unwrap();
    let shell = fake_shell(scratch.path(), &sock);
    // A live socket of ours, inherited: passed on as it is.
    let own = scratch.path().join("own.sock");
    let _own = UnixListener::bind(&own).unwrap();
    let d = TestDaemon::start_without(&[], &[("SHELL", &shell), ("SSH_AUTH_SOCK", &own.to_string_lossy())]);
    assert_eq!(child_sees(&d, "kept", ""), own.to_string_lossy());
    // A stale one (here a plain file where the socket was): dropped, and
    // the login shell's socket handed on instead.
    let stale = scratch.path().join("stale.sock");
    std::fs::write(&stale, "").unwrap();
    let d = TestDaemon::start_without(&[], &[("SHELL", &shell), ("SSH_AUTH_SOCK", &stale.to_string_lossy())]);
    assert_eq!(child_sees(&d, "replaced", ""), sock.to_string_lossy());
    assert!(d.log().contains("is not handed on: it is not a socket"), "{}", d.log());
}

#[test]
fn a_link_to_the_socket_counts_only_where_no_one_else_can_change_it() {
    let scratch = tempfile::tempdir().unwrap();
    let sock = scratch.path().join("agent.sock");
    let _agent = UnixListener::bind(&sock).unwrap();
    // A link in a private folder (a profile's stable name for the newest
    // agent) is handed on as the link.
    let (link, d) = daemon_shown_a_link_in(scratch.path(), "private", 0o700, &sock);
    assert_eq!(child_sees(&d, "linked", ""), link.to_string_lossy());
    // The same link in a folder anyone may write (no sticky bit): anyone
    // could point it elsewhere later, so it is not handed on.
    let (_, d) = daemon_shown_a_link_in(scratch.path(), "shared", 0o777, &sock);
    assert_eq!(child_sees(&d, "shared", ""), "-");
    assert!(d.log().contains("is not private to this user"), "{}", d.log());
}

/// Another user's place on the way to the socket (audit N1): the link is
/// not the last component, so a check of the last one alone passed it,
/// and its owner could repoint it after the check. `..` after the link
/// and the daemon's own inherited socket get the same rule.
#[test]
fn a_link_halfway_in_another_users_place_is_not_handed_on() {
    let scratch = tempfile::tempdir().unwrap();
    let private = scratch.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::create_dir(private.join("sub")).unwrap();
    let sock = private.join("agent.sock");
    let _agent = UnixListener::bind(&sock).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // The other user's directory: owned by nobody when we can arrange it,
    // else one anyone may write.
    let shared = scratch.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let link = shared.join("agent-dir");
    std::os::unix::fs::symlink(&private, &link).unwrap();
    if root {
        std::os::unix::fs::lchown(&link, Some(65534), None).unwrap();
        std::os::unix::fs::chown(&shared, Some(65534), None).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    } else {
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let through = link.join("agent.sock");
    let shell = fake_shell(scratch.path(), &through);
    let d = TestDaemon::start_without(&["SSH_AUTH_SOCK"], &[("SHELL", &shell)]);
    assert_eq!(child_sees(&d, "halfway", ""), "-");
    assert!(d.log().contains("is not private to this user"), "{}", d.log());

    // Inherited, with `..` after the link: dropped, and the login shell
    // (here exporting the socket's own private path) is asked instead.
    let climbing = link.join("sub/../agent.sock");
    let direct = fake_shell(scratch.path(), &sock);
    let d = TestDaemon::start_without(
        &[],
        &[("SHELL", &direct), ("SSH_AUTH_SOCK", &climbing.to_string_lossy())],
    );
    assert_eq!(child_sees(&d, "inherited", ""), sock.to_string_lossy());
    assert!(d.log().contains("The daemon's own SSH_AUTH_SOCK="), "{}", d.log());
}
