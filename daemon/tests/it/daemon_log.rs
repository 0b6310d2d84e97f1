//! The daemon's `remote-server.log` beside the socket (reference `4534d86`
//! and later): made by the launcher when its own stderr is not a regular
//! file, `0600`, the previous session's renamed to `.old`, a planted link
//! renamed and never followed.

use crate::common;
use crate::common::{peer_pid, pid_gone, request_line, wait_until, TOKEN};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Starts `remora -serve` on `<dir>/rpc.sock` with its stderr on a pipe
/// (the SSH-session case), waits for the banner, then stops it.
fn one_session(dir: &Path) {
    one_session_with(dir, &[], 0);
}

/// [`one_session`] with extra environment, opening `connections`
/// connections (each logs a line) before the stop.
fn one_session_with(dir: &Path, env: &[(&str, &str)], connections: usize) {
    let socket = dir.join("rpc.sock");
    let token = dir.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let _stop = common::StopOnDrop::new(&socket, TOKEN);
    let mut launcher = common::serve_command(&socket, &token)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .envs(env.iter().copied())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(launcher.stdout.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    assert!(banner.starts_with("Remora remote server listening on"), "{banner}");
    let mut launcher_err = String::new();
    launcher
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut launcher_err)
        .unwrap();
    let _ = launcher.wait();
    assert_eq!(launcher_err, "", "the launcher's own stderr stays empty");
    for _ in 0..connections {
        let mut c = UnixStream::connect(&socket).unwrap();
        c.write_all(request_line("1", "server.ping", None, TOKEN).as_bytes())
            .unwrap();
        let mut reply = String::new();
        BufReader::new(c).read_line(&mut reply).unwrap();
    }
    let mut s = UnixStream::connect(&socket).unwrap();
    let pid = peer_pid(&s);
    s.write_all(request_line("9", "server.shutdown", None, TOKEN).as_bytes())
        .unwrap();
    let _ = s.read_to_end(&mut Vec::new());
    assert!(wait_until(Duration::from_secs(10), || !socket.exists()));
    if let Some(pid) = pid {
        assert!(wait_until(Duration::from_secs(10), || pid_gone(pid)));
    }
}

#[test]
fn each_start_gets_a_fresh_private_log_and_keeps_the_last_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("remote-server.log");
    let old = dir.path().join("remote-server.log.old");
    one_session(dir.path());
    let first_inode = std::fs::metadata(&log).unwrap().ino();
    let first = std::fs::read_to_string(&log).unwrap();
    assert!(first.contains("[Server] Listening on"), "{first}");
    let meta = std::fs::symlink_metadata(&log).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert!(!old.exists());

    one_session(dir.path());
    assert_eq!(
        std::fs::read_to_string(&old).unwrap(),
        first,
        "the last session's log is kept as .old"
    );
    let second = std::fs::read_to_string(&log).unwrap();
    assert!(second.contains("[Server] Listening on"), "{second}");
    assert_ne!(
        std::fs::metadata(&log).unwrap().ino(),
        first_inode,
        "a new file, not the old one reopened"
    );
    assert_eq!(std::fs::metadata(&old).unwrap().ino(), first_inode);
}

#[test]
fn a_planted_link_is_renamed_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "untouched").unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("remote-server.log")).unwrap();
    one_session(dir.path());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    let old = std::fs::symlink_metadata(dir.path().join("remote-server.log.old")).unwrap();
    assert!(old.file_type().is_symlink(), "the link itself moved to .old");
    let log = std::fs::symlink_metadata(dir.path().join("remote-server.log")).unwrap();
    assert!(log.file_type().is_file());
    // SAFETY: geteuid has no preconditions.
    assert_eq!(log.uid(), unsafe { libc::geteuid() });
}

#[test]
fn an_unsafe_directory_gets_no_log() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    one_session(dir.path());
    assert!(
        !dir.path().join("remote-server.log").exists(),
        "a world-writable directory is not used"
    );
}

/// Audit D9: a full log is rotated, never truncated while it is the only
/// copy. The session's first full file keeps its earliest lines (the
/// start-up), a later one the lines before the current file, and the
/// current file the latest; the next launch clears the two.
#[test]
fn a_full_log_is_rotated_and_keeps_its_earliest_lines() {
    let dir = tempfile::tempdir().unwrap();
    one_session_with(dir.path(), &[("REMORA_TEST_DAEMON_LOG_CAP", "2000")], 60);
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    let (first, previous, log) = (
        read("remote-server.log.1"),
        read("remote-server.log.2"),
        read("remote-server.log"),
    );
    assert!(first.contains("[Server] Listening on"), "the start-up is kept: {first}");
    assert!(first.len() <= 2000 + 200, "{} bytes", first.len());
    assert!(!previous.is_empty(), "a later generation is kept too");
    assert!(log.len() <= 2000 + 200, "{} bytes", log.len());
    assert!(
        log.contains("[daemon] the log reached 2000 bytes; the lines before this one are in remote-server.log.2"),
        "{log}"
    );
    assert!(
        log.contains("[Server] Shutdown complete"),
        "the latest lines are kept: {log}"
    );
    assert!(!log.contains("started over") && !first.contains("started over"));
    for name in ["remote-server.log.1", "remote-server.log.2"] {
        let meta = std::fs::symlink_metadata(dir.path().join(name)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{name}");
    }
    // The next session starts clean: its predecessor's latest is `.old`.
    one_session(dir.path());
    assert!(!dir.path().join("remote-server.log.1").exists());
    assert!(!dir.path().join("remote-server.log.2").exists());
    assert!(read("remote-server.log.old").contains("[Server] Shutdown complete"));
}

/// Audit D9: connections without the token cannot flood the log. Each
/// used to log two lines; past a burst they are only counted, in one
/// summary line, while an authenticating connection is still logged.
/// The daemon's stderr is a regular file here, as with `2>>daemon.log`.
#[test]
fn a_churn_of_connections_without_the_token_is_summarised() {
    let d = common::TestDaemon::start();
    for _ in 0..300 {
        drop(UnixStream::connect(&d.socket).unwrap());
    }
    // An owner connecting after the churn is logged all the same.
    assert!(d.call("server.ping", "{}").contains(r#""pong":true"#));
    let opened = |log: &str| log.matches("[Server] New connection from: @").count();
    // The stop is the event: the teardown writes its summary once every
    // connection has closed, so none is still in flight, neither logged
    // nor counted (a churned connection whose task had not run yet went
    // missing: 301).
    let mut d = d;
    d.stop();
    let log = d.log();
    assert!(opened(&log) <= 30, "{} opening lines for 300 connections", opened(&log));
    // The teardown's summary comes after every connection closed (a
    // minute's summary may come before it on a slow run).
    let summaries: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("connection(s) without the token opened and ended unlogged: "))
        .collect();
    assert!(!summaries.is_empty(), "no summary: {log}");
    let counted: usize = summaries
        .iter()
        .map(|summary| {
            summary
                .split("[Server] ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap()
        })
        .sum();
    // The 300, the ping and the stop's own connection.
    assert_eq!(counted + opened(&log), 302, "{summaries:?}");
}
