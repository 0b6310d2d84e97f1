//! `ci/leftovers`, the check `.ci/run` wraps the test suite in: it fails
//! when a process the wrapped command started outlives it, names it, and
//! kills it; a command that stops what it started passes.

use crate::common;
use crate::common::{pid_gone, remora_bin, wait_until, StopOnDrop};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/leftovers")
}

/// Runs `ci/leftovers -- args…`; returns (exit code, stderr).
fn leftovers(args: &[&str]) -> (i32, String) {
    let out = Command::new(script())
        .arg("--")
        .args(args)
        .env("SHELL", common::QUICK_LOGIN_SHELL)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn skip_without_proc() -> bool {
    if Path::new("/proc/self/environ").exists() {
        return false;
    }
    common::skip::skip("no /proc: ci/leftovers runs its command unchecked here");
    true
}

#[test]
fn a_daemon_left_running_fails_the_check_and_is_killed() {
    if skip_without_proc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let token = dir.path().join("token");
    std::fs::write(&token, "tok\n").unwrap();
    // Should the check miss it, the daemon is still stopped by its pid.
    let _stop = StopOnDrop::new(&socket, "tok");
    // The planted leak: a -serve whose daemon nobody stops.
    let (code, stderr) = leftovers(&[
        remora_bin(),
        "-serve",
        "-socket",
        socket.to_str().unwrap(),
        "-token-file",
        token.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stderr}");
    let record = std::fs::read_to_string(dir.path().join("daemon.lock")).unwrap();
    let pid = serde_json::from_str::<serde_json::Value>(&record).unwrap()["pid"]
        .as_i64()
        .unwrap() as i32;
    assert!(
        stderr.contains(" process(es) started by")
            && stderr.contains(&format!("  pid {pid} (parent "))
            && stderr.contains(&format!("-socket {} ", socket.display())),
        "{stderr}"
    );
    assert!(wait_until(Duration::from_secs(10), || pid_gone(pid)), "{stderr}");
}

#[test]
fn a_detached_grandchild_fails_the_check_too() {
    if skip_without_proc() {
        return;
    }
    let (code, stderr) = leftovers(&["sh", "-c", "setsid sleep 321 </dev/null >/dev/null 2>&1 &"]);
    assert_eq!(code, 1, "{stderr}");
    let pid: i32 = stderr
        .lines()
        .find(|l| l.ends_with("sleep 321 "))
        .and_then(|l| l.trim_start().strip_prefix("pid ")?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(wait_until(Duration::from_secs(10), || pid_gone(pid)), "{stderr}");
}

#[test]
fn a_command_that_stops_its_daemon_passes_with_its_own_status() {
    if skip_without_proc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let _stop = StopOnDrop::new(&socket, "tok");
    std::fs::write(dir.path().join("token"), "tok\n").unwrap();
    // -stop waits until the daemon process has exited.
    let session = format!(
        "\"$0\" -serve -socket {s} -token-file {t} >/dev/null && \"$0\" -stop -socket {s} >/dev/null",
        s = socket.display(),
        t = dir.path().join("token").display()
    );
    assert_eq!(leftovers(&["sh", "-c", &session, remora_bin()]), (0, String::new()));
    assert_eq!(leftovers(&["sh", "-c", "exit 3"]), (3, String::new()));
}
