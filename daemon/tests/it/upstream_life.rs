//! Lifecycle changes of later reference builds, with real daemons, sockets
//! and child processes: the persisted `daemon.token`, the
//! per-boot capabilities identity, the run-dir lock with predecessor
//! eviction, and orphan exit.

use crate::common;
use crate::common::{request_line, wait_until, TestDaemon, TOKEN};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const PONG: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"pong":true}}"#;

/// One request on a fresh connection; returns the first line back.
fn call_with(socket: &Path, token: &str, method: &str, params: Option<&str>) -> String {
    let mut s = UnixStream::connect(socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request_line("1", method, params, token).as_bytes())
        .unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).expect("reply");
    line.trim_end_matches('\n').to_string()
}

fn ping_with(socket: &Path, token: &str) -> String {
    call_with(socket, token, "server.ping", None)
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Gone, or a zombie nobody reaped yet.
fn is_dead(pid: u32) -> bool {
    common::pid_gone(pid as i32)
}

/// The pid in the run-dir lock's owner record.
fn lock_pid(dir: &Path) -> u32 {
    let body = std::fs::read_to_string(dir.join("daemon.lock")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    v["pid"].as_u64().unwrap() as u32
}

/// Starts `remora -serve` on `socket` with `token`; returns the launcher's
/// exit status and stderr (the daemon's log goes to `log`).
fn serve(socket: &Path, token: &str, log: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let token_file = socket.with_file_name(format!("token-{}", std::process::id()));
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let mut cmd = common::remora_command();
    cmd.args([
        "-serve",
        "-socket",
        socket.to_str().unwrap(),
        "-token-file",
        token_file.to_str().unwrap(),
    ])
    .stdin(Stdio::null())
    .stderr(std::fs::File::create(log).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        std::fs::read_to_string(log).unwrap_or_default(),
    )
}

/// Authenticated `server.shutdown`; waits for the socket to go.
fn shutdown(socket: &Path, token: &str) {
    let mut pid = None;
    if let Ok(mut s) = UnixStream::connect(socket) {
        pid = common::peer_pid(&s);
        let _ = s.write_all(request_line("0", "server.shutdown", None, token).as_bytes());
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let _ = s.read_to_end(&mut Vec::new());
    }
    assert!(wait_until(Duration::from_secs(10), || !socket.exists()));
    // The token file and the lock record are cleaned up after the socket.
    if let Some(pid) = pid {
        assert!(wait_until(Duration::from_secs(10), || common::pid_gone(pid)));
    }
}

fn capabilities(socket: &Path, token: &str) -> serde_json::Value {
    let line = call_with(socket, token, "server.capabilities", None);
    serde_json::from_str::<serde_json::Value>(&line).unwrap()["result"].clone()
}

// ------------------------------------------------------------- daemon.token

#[test]
fn token_file_is_written_owner_only_and_serves_a_reconnect() {
    let mut d = TestDaemon::start();
    let persisted = d.root().join("daemon.token");
    // The original -token-file is consumed; the persisted one replaces it.
    assert!(!d.root().join("token").exists());
    assert_eq!(std::fs::read(&persisted).unwrap(), TOKEN.as_bytes());
    assert_eq!(mode(&persisted), 0o600);
    // No temp file is left beside it.
    let leftovers: Vec<_> = std::fs::read_dir(d.root())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("daemon.token-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // A client that knows only the socket reconnects with the file's token.
    let token = String::from_utf8(std::fs::read(&persisted).unwrap()).unwrap();
    assert_eq!(ping_with(&d.socket, &token), PONG);
    d.stop();
    assert!(!persisted.exists(), "graceful shutdown removes daemon.token");
}

#[test]
fn token_file_survives_sigkill_and_is_replaced_by_the_next_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let (code, log) = serve(&socket, "first", &dir.path().join("a.log"), &[]);
    let _stop_1 = common::StopOnDrop::new(&socket, "first");
    assert_eq!(code, 0, "{log}");
    let pid = lock_pid(dir.path());
    // Held while it is known alive (it just started and holds the lock).
    let daemon = common::proven::Proc::open(pid as i32).expect("a pidfd on the daemon");
    assert!(daemon.signal(libc::SIGKILL));
    assert!(wait_until(Duration::from_secs(10), || daemon.gone()));
    assert_eq!(std::fs::read(dir.path().join("daemon.token")).unwrap(), b"first");
    let (code, log) = serve(&socket, "second", &dir.path().join("b.log"), &[]);
    let _stop_2 = common::StopOnDrop::new(&socket, "second");
    assert_eq!(code, 0, "{log}");
    assert_eq!(std::fs::read(dir.path().join("daemon.token")).unwrap(), b"second");
    assert_eq!(ping_with(&socket, "second"), PONG);
    shutdown(&socket, "second");
    assert!(!dir.path().join("daemon.token").exists());
}

// ------------------------------------------------------ capabilities identity

#[test]
fn capabilities_identity_is_fixed_per_boot_and_new_on_restart() {
    let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    let mut d = TestDaemon::start();
    let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    let a = capabilities(&d.socket, TOKEN);
    let id = a["instanceId"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32);
    assert!(id.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')), "{id}");
    let started = a["startedAt"].as_i64().unwrap();
    assert!(
        before <= started && started <= after,
        "{before} <= {started} <= {after}"
    );
    assert_eq!(capabilities(&d.socket, TOKEN), a, "stable within one boot");
    // The run-dir lock's record carries the same identity.
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.root().join("daemon.lock")).unwrap()).unwrap();
    assert_eq!(record["instanceId"], a["instanceId"]);
    assert_eq!(record["startedAt"], a["startedAt"]);
    assert_eq!(record["role"], "serve");
    assert_eq!(mode(&d.root().join("daemon.lock")), 0o600);
    d.stop();
    // Graceful shutdown empties the record and keeps the file.
    assert_eq!(std::fs::read(d.root().join("daemon.lock")).unwrap(), b"");
    let (code, log) = serve(&d.socket, "again", &d.root().join("b.log"), &[]);
    let _stop_3 = common::StopOnDrop::new(&d.socket, "again");
    assert_eq!(code, 0, "{log}");
    let b = capabilities(&d.socket, "again");
    assert_ne!(b["instanceId"], a["instanceId"]);
    shutdown(&d.socket, "again");
}

// ------------------------------------------------------------ run-dir lock

#[test]
fn a_new_serve_evicts_a_live_predecessor_of_the_same_socket() {
    let first = TestDaemon::start();
    let old_pid = lock_pid(first.root());
    // A client of the predecessor sees its connection end.
    let mut client = first.connect();
    assert_eq!(client.call(1, "server.ping", "{}"), PONG);
    let (code, log) = serve(&first.socket, "next", &first.root().join("b.log"), &[]);
    let _stop_4 = common::StopOnDrop::new(&first.socket, "next");
    assert_eq!(code, 0, "{log}");
    assert!(wait_until(Duration::from_secs(10), || is_dead(old_pid)));
    assert_eq!(client.read_to_eof(), "");
    assert!(
        first
            .log()
            .contains("[Server] Received signal: terminated, shutting down"),
        "{}",
        first.log()
    );
    let new_log = std::fs::read_to_string(first.root().join("b.log")).unwrap();
    assert!(
        new_log.contains(&format!("run dir is held by a live daemon, pid {old_pid}")),
        "{new_log}"
    );
    assert!(new_log.contains("previous owner of"), "{new_log}");
    assert!(new_log.contains(": terminated"), "{new_log}");
    // The successor owns the socket, the token file and the lock.
    assert_eq!(ping_with(&first.socket, "next"), PONG);
    assert_eq!(std::fs::read(first.root().join("daemon.token")).unwrap(), b"next");
    assert_ne!(lock_pid(first.root()), old_pid);
    shutdown(&first.socket, "next");
}

/// Spawns `sleep 777` in the daemon behind `client`; returns it held,
/// from the moment its pid is known (it was just spawned).
fn spawn_sleeper(client: &mut common::Client) -> common::proven::Proc {
    let reply = client.call(
        2,
        "process.spawn",
        r#"{"id":"agent","command":"sleep","args":["777"],"wantPid":true}"#,
    );
    let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
    let pid = v["result"]["pid"].as_i64().unwrap_or_else(|| panic!("{reply}")) as i32;
    common::proven::Proc::open(pid).expect("a pidfd on the sleeper")
}

/// A second `-serve` started from a terminal or over ssh (stderr not a
/// file, so the daemons log to `remote-server.log`): its launcher says on
/// stderr, in one line, that it replaced the running daemon and what
/// happened to that daemon's children.
fn replace_and_read_the_launcher(first: &TestDaemon, keep_children: bool) -> (common::proven::Proc, String) {
    let old_pid = lock_pid(first.root());
    let mut client = first.connect();
    let child = spawn_sleeper(&mut client);
    let token_file = first.root().join("next-token");
    std::fs::write(&token_file, "next\n").unwrap();
    let out = common::serve_command(&first.socket, &token_file)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("Remora remote server listening on {}\n", first.socket.display())
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    let expected = if keep_children {
        format!("replacing the daemon pid {old_pid} on this socket (it runs with -keep-children, so its children keep running)\n")
    } else {
        format!(
            "replacing the daemon pid {old_pid} on this socket (its children are stopped; -keep-children keeps them)\n"
        )
    };
    assert_eq!(stderr, expected);
    assert!(wait_until(Duration::from_secs(10), || is_dead(old_pid)));
    (child, stderr)
}

#[test]
fn a_second_serve_says_it_replaces_the_daemon_and_stops_its_children() {
    let first = TestDaemon::start();
    let (child, _) = replace_and_read_the_launcher(&first, false);
    assert!(wait_until(Duration::from_secs(10), || child.gone()));
    assert_eq!(ping_with(&first.socket, "next"), PONG);
    shutdown(&first.socket, "next");
}

#[test]
fn a_second_serve_says_when_the_replaced_daemon_keeps_its_children() {
    let first = TestDaemon::start_with(&["-keep-children"], &[]);
    let (child, _) = replace_and_read_the_launcher(&first, true);
    let alive = !child.gone();
    // Through the hold: the sleeper this test spawned (kept alive by
    // -keep-children), so that it does not outlive the test.
    child.signal(libc::SIGKILL);
    assert!(alive, "the kept child {} is gone", child.pid());
    shutdown(&first.socket, "next");
}

/// Writes an owner record naming `pid` as a serve daemon of this machine.
fn forge_record(dir: &Path, pid: u32) -> PathBuf {
    let lock = dir.join("daemon.lock");
    let record = serde_json::json!({
        "pid": pid,
        "role": "serve",
        "node": remora::rundir::runlock::node_id(),
        "instanceId": "00000000000000000000000000000000",
        "startedAt": 1,
    });
    std::fs::write(&lock, record.to_string()).unwrap();
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o600)).unwrap();
    lock
}

#[test]
fn a_foreign_lock_holder_is_never_signalled() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let lock = forge_record(dir.path(), 0);
    // A process that is not a remora daemon holds the lock (flock(1) keeps
    // it while its command runs) and is named in the record.
    // flock(1) runs `sleep` as its child: in a group of its own, killed
    // whole when the test ends (pass or fail), and away from the test's
    // stdout (an orphaned sleep holding cargo's pipe stalls `cargo test |
    // tee` for its whole 300 s).
    let mut holder = Command::new("flock")
        .arg(&lock)
        .args(["sleep", "300"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("flock(1)");
    let holder_pid = holder.id();
    // The group goes when the test ends, pass or fail, always before its
    // leader is reaped (`holder.wait()` comes after): the unreaped leader
    // keeps the id its group's. Through the hold it would be that group
    // even after (issue 44, item 9).
    let group = common::proven::Proc::open(holder_pid as i32).expect("a pidfd on flock(1)");
    struct KillGroup(common::proven::Proc);
    impl Drop for KillGroup {
        fn drop(&mut self) {
            self.0.signal_group(libc::SIGKILL);
        }
    }
    let group = KillGroup(group);
    assert!(wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string("/proc/locks")
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("FLOCK") && l.split_whitespace().any(|w| w == holder_pid.to_string()))
    }));
    forge_record(dir.path(), holder_pid);
    let (code, log) = serve(&socket, "tok", &dir.path().join("d.log"), &[]);
    let _stop_5 = common::StopOnDrop::new(&socket, "tok");
    // The newcomer serves without run-dir ownership; the holder lives.
    assert_eq!(code, 0, "{log}");
    assert!(log.contains(&format!("not signaling pid {holder_pid}")), "{log}");
    assert!(log.contains("holder is not our serve process for this socket"), "{log}");
    assert!(!is_dead(holder_pid));
    assert_eq!(holder.try_wait().unwrap(), None);
    assert_eq!(ping_with(&socket, "tok"), PONG);
    shutdown(&socket, "tok");
    drop(group);
    let _ = holder.wait();
}

#[test]
fn a_daemon_of_another_socket_named_in_a_record_is_never_signalled() {
    // A real remora daemon, but of another socket and not holding this lock.
    let other = TestDaemon::start();
    let other_pid = lock_pid(other.root());
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let lock = forge_record(dir.path(), other_pid);
    // This test process holds the lock, so the newcomer must decide.
    let held = std::fs::OpenOptions::new().read(true).open(&lock).unwrap();
    assert_eq!(
        // SAFETY: flock on a descriptor this test owns.
        unsafe { libc::flock(std::os::unix::io::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) },
        0
    );
    let (code, log) = serve(&socket, "tok", &dir.path().join("d.log"), &[]);
    let _stop_6 = common::StopOnDrop::new(&socket, "tok");
    assert_eq!(code, 0, "{log}");
    assert!(log.contains(&format!("not signaling pid {other_pid}")), "{log}");
    assert!(log.contains("does not hold the lock"), "{log}");
    assert!(!is_dead(other_pid));
    assert_eq!(other.call("server.ping", "{}"), PONG);
    shutdown(&socket, "tok");
    drop(held);
}

#[test]
fn a_symlinked_lock_file_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("daemon.lock")).unwrap();
    let socket = dir.path().join("rpc.sock");
    let (code, log) = serve(&socket, "tok", &dir.path().join("d.log"), &[]);
    let _stop_7 = common::StopOnDrop::new(&socket, "tok");
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("proceeding without run-dir ownership"), "{log}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    shutdown(&socket, "tok");
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
}

#[test]
fn a_hard_linked_lock_file_is_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    std::fs::hard_link(&victim, dir.path().join("daemon.lock")).unwrap();
    let socket = dir.path().join("rpc.sock");
    let (code, log) = serve(&socket, "tok", &dir.path().join("d.log"), &[]);
    let _stop_8 = common::StopOnDrop::new(&socket, "tok");
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("has 2 links"), "{log}");
    shutdown(&socket, "tok");
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
}

// ------------------------------------------------------------- orphan exit

const FAST: (&str, &str) = ("REMORA_TEST_ORPHAN_TIMERS", "40,200");

/// Moves the daemon's socket aside and puts a foreign listener at its path.
fn take_over(socket: &Path) -> UnixListener {
    std::fs::rename(socket, socket.with_extension("old")).unwrap();
    UnixListener::bind(socket).unwrap()
}

#[test]
fn a_daemon_whose_socket_was_taken_over_exits_once_no_client_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let log_path = dir.path().join("d.log");
    let (code, log) = serve(&socket, "tok", &log_path, &[FAST]);
    let _stop_9 = common::StopOnDrop::new(&socket, "tok");
    assert_eq!(code, 0, "{log}");
    let pid = lock_pid(dir.path());
    // A connected client keeps the orphan alive.
    let mut client = UnixStream::connect(&socket).unwrap();
    client
        .write_all(request_line("1", "server.ping", None, "tok").as_bytes())
        .unwrap();
    let mut pong = String::new();
    BufReader::new(client.try_clone().unwrap())
        .read_line(&mut pong)
        .unwrap();
    assert_eq!(pong.trim_end(), PONG);
    let _intruder = take_over(&socket);
    std::thread::sleep(Duration::from_millis(600));
    assert!(!is_dead(pid), "exited while a client was connected");
    drop(client);
    assert!(
        wait_until(Duration::from_secs(10), || is_dead(pid)),
        "{}",
        std::fs::read_to_string(&log_path).unwrap()
    );
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("probe 2 of 2"), "{log}");
    assert!(log.contains("[Server] Shutting down"), "graceful: {log}");
    // The foreign listener's socket and a successor's files are left alone.
    assert!(socket.exists());
}

#[test]
fn a_daemon_still_reachable_at_its_path_does_not_exit() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let (code, log) = serve(&socket, "tok", &dir.path().join("d.log"), &[FAST]);
    let _stop_10 = common::StopOnDrop::new(&socket, "tok");
    assert_eq!(code, 0, "{log}");
    let pid = lock_pid(dir.path());
    // Well past grace plus two probes: nothing happens.
    std::thread::sleep(Duration::from_millis(800));
    assert!(!is_dead(pid));
    assert_eq!(ping_with(&socket, "tok"), PONG);
    shutdown(&socket, "tok");
}

#[test]
fn the_orphan_test_hook_does_not_reach_children() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let (code, log) = serve(&socket, "tok", &dir.path().join("d.log"), &[FAST]);
    let _stop_11 = common::StopOnDrop::new(&socket, "tok");
    assert_eq!(code, 0, "{log}");
    let out = dir.path().join("env.txt");
    let params = format!(r#"{{"id":"e","command":"sh","args":["-c","env > {}"]}}"#, out.display());
    let reply = call_with(&socket, "tok", "process.spawn", Some(&params));
    assert!(reply.contains(r#""success":true"#), "{reply}");
    assert!(wait_until(Duration::from_secs(10), || std::fs::read_to_string(&out)
        .is_ok_and(|e| e.contains("HOME="))));
    let env = std::fs::read_to_string(&out).unwrap();
    assert!(!env.contains("REMORA_TEST_ORPHAN_TIMERS"), "{env}");
    shutdown(&socket, "tok");
}

// ------------------------------------------- signals to proven processes only

/// Set in the copy of this binary that stands in for a listener which is
/// not a remora daemon ([`a_foreign_listener_helper`]).
const FOREIGN_LISTENER_ENV: &str = "REMORA_TEST_FOREIGN_LISTENER";

/// Issue 44, item 9: this binary died of SIGKILL, sent by its own
/// `stop_serving`. That helper SIGKILLed the pid it had found at connect
/// (`SO_PEERCRED`) once the pid had not looked gone for 10 s, proving
/// nothing else about it; a listener that is not a daemon (this binary's
/// own stand-ins have been) or a daemon pid reused by then (a thread of
/// this binary: kill(2) of a thread's id ends the whole process) got it,
/// and its children's groups first. The listener here is another process
/// that never exits on its own and whose command line does not name the
/// socket: it must not be signalled.
#[test]
fn stop_serving_never_signals_a_listener_that_is_not_a_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let mut listener = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "upstream_life::a_foreign_listener_helper",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(FOREIGN_LISTENER_ENV, &socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Our own unreaped child: killing it by its handle cannot miss.
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // Its stdin stays open (it waits on it) until the test ends.
    let _hold = listener.stdin.take();
    let mut lines = BufReader::new(listener.stdout.take().unwrap()).lines();
    let mut listener = Reap(listener);
    let mut wait_for = |marker: &str| lines.by_ref().map_while(Result::ok).any(|l| l.contains(marker));
    assert!(wait_for("LISTENING"), "the stand-in listener did not start");
    common::stop_serving(&socket, "tok");
    assert!(wait_for("ASKED"), "stop_serving did not ask the listener");
    assert_eq!(
        listener.0.try_wait().unwrap(),
        None,
        "stop_serving signalled a listener that is not its daemon"
    );
}

/// The stand-in listener of the test above (runs only in the copy that
/// test starts): answers one connection by reading its request, then
/// removes the socket file and closes, and waits for its stdin to close.
#[test]
#[ignore = "the stand-in listener stop_serving_never_signals_a_listener_that_is_not_a_daemon starts"]
fn a_foreign_listener_helper() {
    let Some(path) = std::env::var_os(FOREIGN_LISTENER_ENV) else {
        return;
    };
    let listener = UnixListener::bind(&path).unwrap();
    println!("LISTENING");
    let (conn, _) = listener.accept().unwrap();
    let mut request = String::new();
    BufReader::new(&conn).read_line(&mut request).unwrap();
    std::fs::remove_file(&path).unwrap();
    drop(conn);
    println!("ASKED");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
