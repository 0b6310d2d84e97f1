//! `-stop` as the Desktop client runs it (no `CLAUDE_RPC_TOKEN`), and each
//! word it prints: `stopped` (the socket answered), `none` (nothing
//! serves), `terminated` / `killed` (a silent daemon holding the run dir),
//! `survivor` (a lock holder that is not ours to signal). Real daemons,
//! real signals; waits are on process state with deadlines.

use crate::common;
use crate::common::{pid_gone, request_line, wait_until, TestDaemon};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

const UNAUTHORIZED: &str =
    r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Unauthorized: invalid or missing auth token"}}"#;
const PONG: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"pong":true}}"#;

/// `remora -stop -socket <socket>` with `CLAUDE_RPC_TOKEN` unset, or set
/// to `token`.
fn stop(socket: &Path, token: Option<&str>) -> Output {
    let mut cmd = common::remora_command();
    cmd.args(["-stop", "-socket", socket.to_str().unwrap()]);
    match token {
        Some(t) => cmd.env("CLAUDE_RPC_TOKEN", t),
        None => cmd.env_remove("CLAUDE_RPC_TOKEN"),
    };
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The daemon's pid, from its owner record in `daemon.lock`.
fn daemon_pid(d: &TestDaemon) -> i32 {
    let record = std::fs::read_to_string(d.root().join("daemon.lock")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&record).unwrap();
    v["pid"].as_i64().unwrap() as i32
}

#[test]
fn a_token_less_stop_stops_the_daemon() {
    let d = TestDaemon::start();
    let pid = daemon_pid(&d);
    let out = stop(&d.socket, None);
    assert_eq!(stdout(&out), "stopped\n");
    assert_eq!(stderr(&out), "");
    // -stop returns once the daemon is gone.
    assert!(pid_gone(pid));
    assert!(!d.socket.exists());
    assert!(!d.root().join("daemon.token").exists());
}

#[test]
fn a_refused_environment_token_falls_back_to_daemon_token() {
    let d = TestDaemon::start();
    let pid = daemon_pid(&d);
    let out = stop(&d.socket, Some("stale-token"));
    assert_eq!(stdout(&out), "stopped\n");
    assert_eq!(stderr(&out), "");
    assert!(pid_gone(pid));
}

#[test]
fn a_raw_unauthenticated_shutdown_frame_is_still_refused() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    c.send_raw(br#"{"jsonrpc":"2.0","id":1,"method":"server.shutdown"}"#);
    c.send_raw(b"\n");
    assert_eq!(c.recv_line(), UNAUTHORIZED);
    assert_eq!(d.call("server.ping", "{}"), PONG);
}

#[test]
fn an_untrusted_token_file_is_not_used_and_the_refusal_is_explained() {
    let d = TestDaemon::start();
    let token = d.root().join("daemon.token");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = stop(&d.socket, None);
    assert_eq!(stdout(&out), "stopped\n");
    assert_eq!(
        stderr(&out),
        format!("remora: stop: the daemon did not accept server.shutdown: {UNAUTHORIZED}\n")
    );
    assert_eq!(d.call("server.ping", "{}"), PONG);
}

#[test]
fn nothing_serving_prints_none_and_clears_stale_files() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    // A stale socket (nobody listens) and a stale token.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    std::fs::write(dir.path().join("daemon.token"), "old").unwrap();
    let out = stop(&socket, None);
    assert_eq!(stdout(&out), "none\n");
    assert_eq!(stderr(&out), "");
    assert!(!socket.exists());
    assert!(!dir.path().join("daemon.token").exists());
    // A missing socket in a missing directory is `none` too.
    assert_eq!(stdout(&stop(&dir.path().join("no/such.sock"), None)), "none\n");
}

#[test]
fn a_silent_daemon_holding_the_run_dir_is_terminated() {
    let d = TestDaemon::start();
    let pid = daemon_pid(&d);
    // The daemon lives on but no longer answers on the path.
    std::fs::remove_file(&d.socket).unwrap();
    let out = stop(&d.socket, None);
    assert_eq!(stdout(&out), "terminated\n");
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "[daemon] stop: run dir is held by a live daemon, pid {pid} (instance \""
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("[daemon] stop: previous daemon pid {pid} (instance \"")),
        "{err}"
    );
    assert!(err.contains("\") exited after SIGTERM\n"), "{err}");
    assert!(wait_until(Duration::from_secs(10), || pid_gone(pid)));
    assert!(!d.root().join("daemon.token").exists());
}

#[test]
fn a_daemon_ignoring_sigterm_is_killed() {
    let d = TestDaemon::start();
    let pid = daemon_pid(&d);
    // Held once proven: the lock record's process, naming the socket.
    let daemon = common::recorded_daemon(&d.socket).expect("a hold on the daemon");
    assert_eq!(daemon.pid(), pid);
    std::fs::remove_file(&d.socket).unwrap();
    // A stopped process cannot act on SIGTERM; SIGKILL still ends it.
    assert!(daemon.signal(libc::SIGSTOP));
    let out = stop(&d.socket, None);
    assert_eq!(stdout(&out), "killed\n");
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "[daemon] stop: WARNING previous daemon pid {pid} (instance \""
        )),
        "{err}"
    );
    assert!(
        err.contains("\") ignored SIGTERM for 4s; sending SIGKILL (its Claude Code children, if any, are ended next, before this daemon serves)\n"),
        "{err}"
    );
    assert!(wait_until(Duration::from_secs(10), || pid_gone(pid)));
    // Killed: the daemon could not clean up, -stop did.
    assert!(!d.root().join("daemon.token").exists());
}

#[test]
fn a_lock_holder_that_is_not_a_daemon_survives_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    std::fs::write(dir.path().join("daemon.token"), "old").unwrap();
    // This test process holds the lock, with a record naming itself as a
    // serve daemon: its command line proves otherwise.
    let lock = std::fs::File::create(dir.path().join("daemon.lock")).unwrap();
    let record = format!(r#"{{"pid":{},"role":"serve","node":"x"}}"#, std::process::id());
    std::fs::write(dir.path().join("daemon.lock"), record).unwrap();
    // SAFETY: flock on a descriptor this test owns.
    let locked = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(locked, 0);
    let out = stop(&socket, None);
    assert_eq!(stdout(&out), "survivor\n");
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "[daemon] stop: WARNING {}/daemon.lock is held by a live process we will not signal (pid {} is not a remora --serve process for {}); leaving it alone\n",
            dir.path().display(),
            std::process::id(),
            socket.display()
        )),
        "{err}"
    );
    // Survivor: nothing is removed.
    assert!(socket.exists());
    assert!(dir.path().join("daemon.token").exists());
    drop(lock);
}

#[test]
fn the_daemon_token_beside_the_socket_authenticates_stop() {
    // Without CLAUDE_RPC_TOKEN the request carries the private daemon.token
    // found beside the socket, exactly as a client would send it.
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let token = dir.path().join("daemon.token");
    std::fs::write(&token, "file-token").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(conn.try_clone().unwrap()).read_line(&mut line).unwrap();
        conn.write_all(b"{}\n").unwrap();
        line
    });
    let out = stop(&socket, None);
    assert_eq!(stdout(&out), "stopped\n");
    let line = server.join().unwrap();
    assert_eq!(line, request_line("1", "server.shutdown", None, "file-token"));
}

/// Audit N3: the cleanup after a failed connect goes through the socket's
/// directory opened without following links, and never through a
/// directory another user controls. A root `-stop` on a path through a
/// user's link removed root's own `rpc.sock` and `daemon.token` in a
/// root-only directory the link pointed at.
#[test]
fn the_cleanup_follows_no_link_and_no_directory_of_another_user() {
    let scratch = tempfile::tempdir().unwrap();
    let private = scratch.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let plant = |dir: &Path| {
        drop(std::os::unix::net::UnixListener::bind(dir.join("rpc.sock")).unwrap());
        std::fs::write(dir.join("daemon.token"), "tok").unwrap();
    };
    plant(&private);
    // The user's directory, holding a link to the private one.
    let users = scratch.path().join("users");
    std::fs::create_dir(&users).unwrap();
    std::os::unix::fs::symlink(&private, users.join("run")).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        std::os::unix::fs::lchown(users.join("run"), Some(65534), None).unwrap();
        std::os::unix::fs::chown(&users, Some(65534), None).unwrap();
    }
    let out = stop(&users.join("run/rpc.sock"), None);
    assert_eq!(stdout(&out), "none\n");
    assert!(private.join("rpc.sock").exists(), "removed through a link");
    assert!(private.join("daemon.token").exists(), "removed through a link");
    assert!(stderr(&out).contains("not removing the socket"), "{}", stderr(&out));
    if root {
        // A stale socket in a directory the user owns: root leaves it.
        plant(&users);
        let out = stop(&users.join("rpc.sock"), None);
        assert_eq!(stdout(&out), "none\n");
        assert!(users.join("rpc.sock").exists());
        assert!(users.join("daemon.token").exists());
        assert!(stderr(&out).contains("owned by uid 65534"), "{}", stderr(&out));
    }
}
