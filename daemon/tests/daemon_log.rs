//! The daemon's `remote-server.log` beside the socket (reference `4534d86`
//! and later): made by the launcher when its own stderr is not a regular
//! file, `0600`, the previous session's renamed to `.old`, a planted link
//! renamed and never followed.
#![allow(clippy::unwrap_used)]

mod common;

use common::{peer_pid, pid_gone, request_line, wait_until, TOKEN};
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

#[test]
fn the_log_starts_over_at_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    one_session_with(dir.path(), &[("REMORA_TEST_DAEMON_LOG_CAP", "2000")], 60);
    let log = std::fs::read_to_string(dir.path().join("remote-server.log")).unwrap();
    assert!(log.len() <= 2000 + 200, "{} bytes", log.len());
    assert!(
        log.contains("[daemon] the log reached 2000 bytes and was started over"),
        "{log}"
    );
    assert!(
        log.contains("[Server] Shutdown complete"),
        "the latest lines are kept: {log}"
    );
}
