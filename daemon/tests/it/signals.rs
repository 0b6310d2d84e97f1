//! Signals the daemon's parent ignored (`nohup`, a shell's `cmd &`, a
//! supervisor): exit codes survive an ignored SIGCHLD, children start with
//! default dispositions except for SIGHUP, and the daemon drops the
//! signals a Go daemon drops (SIGUSR1, SIGALRM, …) however it started.

use crate::common::frames::{frames_until_exit, stdout_of};
use crate::common::{Client, TestDaemon};

/// Runs `command args` to its exit; returns stdout and the exit code.
fn run(c: &mut Client, id: &str, command: &str, args: &[&str]) -> (String, Option<i64>) {
    let args = serde_json::to_string(args).unwrap();
    let reply = c.call(
        format!("\"{id}\""),
        "process.spawn",
        &format!(r#"{{"id":"{id}","command":"{command}","args":{args}}}"#),
    );
    assert!(reply.contains(r#""result":{"success":true}"#), "{reply}");
    let frames = frames_until_exit(c, id);
    let code = frames.last().and_then(|f| f.exit_code);
    (String::from_utf8(stdout_of(&frames)).unwrap(), code)
}

#[test]
fn an_ignored_sigchld_at_start_loses_no_exit_code() {
    // With SIGCHLD ignored the kernel reaps children itself, and the exit
    // frame could only say -1.
    let d = TestDaemon::start_ignoring(&[], &[], &[libc::SIGCHLD]);
    let mut c = d.connect();
    assert_eq!(run(&mut c, "three", "sh", &["-c", "exit 3"]).1, Some(3));
    assert_eq!(run(&mut c, "zero", "true", &[]).1, Some(0));
}

/// The signals `/proc/<child>/status` lists as ignored.
#[cfg(target_os = "linux")]
fn ignored_in_child(c: &mut Client, id: &str) -> u64 {
    let (out, code) = run(c, id, "grep", &["^SigIgn:", "/proc/self/status"]);
    assert_eq!(code, Some(0), "{out}");
    u64::from_str_radix(out.trim().trim_start_matches("SigIgn:").trim(), 16).expect(&out)
}

#[cfg(target_os = "linux")]
fn bit(signal: libc::c_int) -> u64 {
    1 << (signal - 1)
}

#[cfg(target_os = "linux")]
#[test]
fn children_start_with_default_dispositions_except_an_inherited_sighup() {
    let inherited = [
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGXFSZ,
        libc::SIGCHLD,
        libc::SIGINT,
    ];
    let d = TestDaemon::start_ignoring(&[], &[], &inherited);
    let mut c = d.connect();
    let ignored = ignored_in_child(&mut c, "mask");
    assert_ne!(
        ignored & bit(libc::SIGHUP),
        0,
        "SIGHUP stays ignored (nohup): {ignored:x}"
    );
    for s in [libc::SIGQUIT, libc::SIGUSR1, libc::SIGXFSZ, libc::SIGCHLD, libc::SIGINT] {
        assert_eq!(ignored & bit(s), 0, "signal {s} passed on ignored: {ignored:x}");
    }
    // Without an inherited SIGHUP the child has it at its default.
    let plain = TestDaemon::start();
    let mut c = plain.connect();
    assert_eq!(ignored_in_child(&mut c, "mask") & bit(libc::SIGHUP), 0);
}

/// Signals pending for `pid`, per thread and process-wide.
#[cfg(target_os = "linux")]
fn pending(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .filter(|l| l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
        .filter_map(|l| u64::from_str_radix(l[7..].trim(), 16).ok())
        .fold(0, |a, b| a | b)
}

#[cfg(target_os = "linux")]
#[test]
fn the_daemon_drops_the_signals_go_drops() {
    // SIGUSR1 and SIGALRM inherited ignored, SIGUSR2 at its default: a Go
    // daemon catches all three and does nothing.
    let d = TestDaemon::start_ignoring(&[], &[], &[libc::SIGUSR1, libc::SIGALRM]);
    let mut c = d.connect();
    let (out, _) = run(&mut c, "parent", "sh", &["-c", "echo $PPID"]);
    let daemon: u32 = out.trim().parse().expect(&out);
    // Held while known alive: it serves this test's connection.
    let held = crate::common::proven::Proc::open(daemon as i32).expect("a hold on the daemon");
    for s in [libc::SIGUSR1, libc::SIGALRM, libc::SIGUSR2] {
        assert!(held.signal(s));
    }
    // Delivered once nothing is pending; then the daemon must still serve.
    assert!(crate::common::wait_until(
        std::time::Duration::from_secs(10),
        || pending(daemon) == 0
    ));
    let reply = d.call("server.ping", "{}");
    assert!(reply.contains(r#""result""#), "{reply}");
    // And its children start with all three at their default.
    assert_eq!(
        ignored_in_child(&mut c, "mask") & (bit(libc::SIGUSR1) | bit(libc::SIGALRM) | bit(libc::SIGUSR2)),
        0
    );
}
