//! The spawner (`sys/process/spawner.rs`, Linux) with a real daemon: the
//! children it starts are the daemon's own, its descriptor table stays a
//! handful however many children live, each child starts with exactly
//! its three pipes, a spawner that is killed is replaced at the next
//! spawn without losing it, and at the descriptor limit a spawn is
//! refused cleanly while everything running goes on.

#![cfg(target_os = "linux")]

use crate::common::{self, children_of, parent_of, wait_until, Client, TestDaemon};
use std::time::Duration;

/// The daemon's child running `<exe> --spawner`, if any.
fn spawner_of(daemon: i32) -> Option<i32> {
    children_of(daemon).into_iter().find(|&p| {
        let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        cmdline.split(|&b| b == 0).nth(1) == Some(b"--spawner")
    })
}

fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Spawns `sh -c 'echo $$; <script>'` as `id`; returns the pid it printed
/// and the rest of its first stdout frame.
fn spawn_sh(c: &mut Client, rid: u64, id: &str, script: &str) -> (i32, String) {
    let script = format!("echo $$; {script}");
    let params = serde_json::json!({"id": id, "command": "sh", "args": ["-c", script]}).to_string();
    let reply = c.call(rid, "process.spawn", &params);
    assert!(reply.contains("\"success\":true"), "{reply}");
    let mut out = String::new();
    loop {
        let line = common::frames::next_line(c);
        if let Some((pid, frame)) = common::frames::parse_frame(&line) {
            if pid == id && frame.stream == "stdout" {
                out.push_str(&String::from_utf8(frame.data).unwrap());
                if out.lines().count() >= 2 {
                    break;
                }
            }
        }
    }
    let (pid, rest) = out.split_once('\n').unwrap();
    (pid.trim().parse().unwrap(), rest.to_string())
}

#[test]
fn children_are_the_daemons_and_the_spawner_stays_small() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let daemon = common::peer_pid(&c.stream).expect("daemon pid");
    // The child's own descriptors: its three pipes (and the one `ls`
    // opens to list them), nothing of the daemon's or the spawner's.
    let (first, fds) = spawn_sh(&mut c, 1, "first", "ls /proc/self/fd | tr '\\n' ' '; echo; sleep 600");
    assert_eq!(parent_of(first), Some(daemon), "a child of the daemon itself");
    assert_eq!(fds.split_whitespace().count(), 4, "0, 1, 2 and ls's own: {fds}");
    let spawner = spawner_of(daemon).expect("a spawner runs beside the daemon");
    // Many live children later, the spawner still holds a handful.
    for i in 0..40 {
        let (pid, _) = spawn_sh(&mut c, 10 + i, &format!("s{i}"), "echo up; sleep 600");
        assert_eq!(parent_of(pid), Some(daemon));
    }
    assert!(open_fds(daemon) > 4 * 40, "the daemon holds the children's pipes");
    let held = open_fds(spawner);
    assert!(held <= 5, "the spawner holds {held} descriptors");
    // Killed, it is replaced at the next spawn, which still starts.
    // SAFETY: kill(2) on the spawner this test's daemon started.
    assert_eq!(unsafe { libc::kill(spawner, libc::SIGKILL) }, 0);
    assert!(wait_until(Duration::from_secs(10), || parent_of(spawner)
        != Some(daemon)
        || std::fs::read_to_string(format!("/proc/{spawner}/stat"))
            .map_or(true, |s| s.contains(") Z "))));
    let (after, _) = spawn_sh(&mut c, 100, "after", "echo up; sleep 600");
    assert_eq!(parent_of(after), Some(daemon));
    let replaced = spawner_of(daemon).expect("a new spawner");
    assert_ne!(replaced, spawner);
    assert!(
        wait_until(Duration::from_secs(10), || parent_of(spawner) != Some(daemon)),
        "the old one was reaped"
    );
}

/// At the descriptor limit (256 here, four per running child) a spawn is
/// refused with Go's text for it, -32603 `fork/exec …: too many open
/// files`, and nothing running is harmed: every child started before
/// still runs, the daemon answers, and once one ends a spawn starts again.
#[test]
fn at_the_descriptor_limit_a_spawn_is_refused_and_nothing_running_is_harmed() {
    let d = TestDaemon::start_with_fd_limit(256, &[]);
    let mut c = d.connect();
    let daemon = common::peer_pid(&c.stream).expect("daemon pid");
    let sleeping = || {
        children_of(daemon)
            .into_iter()
            .filter(|p| {
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                stat.contains(" (sleep) S ")
            })
            .count()
    };
    let mut started = 0;
    let refused = loop {
        assert!(started < 256, "no spawn was refused");
        let params = format!(r#"{{"id":"s{started}","command":"sleep","args":["600"]}}"#);
        let reply = c.call(started + 1, "process.spawn", &params);
        if reply.contains(r#""error""#) {
            break reply;
        }
        assert!(reply.contains(r#""success":true"#), "{reply}");
        started += 1;
    };
    assert!(started >= 40, "only {started} children before the limit");
    assert!(refused.contains(r#""code":-32603"#), "{refused}");
    assert!(
        refused.contains("fork/exec /") && refused.contains(": too many open files"),
        "{refused}"
    );
    // Every child started before still sleeps (a refused spawn started
    // nothing beside them).
    assert!(
        wait_until(Duration::from_secs(10), || sleeping() == started),
        "{} of {started}",
        sleeping()
    );
    assert!(c.call(1000, "server.ping", "{}").contains("pong"));
    // One ends (its four descriptors are released with its exit frame):
    // the next spawn starts.
    let reply = c.call(1001, "process.killAndWait", r#"{"id":"s0","signal":"KILL"}"#);
    assert!(reply.contains(r#""result""#), "{reply}");
    let again = c.call(
        1002,
        "process.spawn",
        r#"{"id":"again","command":"sleep","args":["600"]}"#,
    );
    assert!(again.contains(r#""success":true"#), "{again}");
}

/// The daemon ends and reaps its spawner before it exits: at the moment
/// the daemon's own exit is observable (its pidfd turns readable), the
/// spawner's pid is gone from `/proc`. Left to init instead, the spawner
/// would still exist then: it only sees the daemon's end of its socket
/// close at that exit, and init reaps it some time later.
#[test]
fn a_daemon_that_shuts_down_leaves_no_spawner_behind() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let daemon = common::peer_pid(&c.stream).expect("daemon pid");
    let _ = spawn_sh(&mut c, 1, "one", "echo up; sleep 600");
    let spawner = spawner_of(daemon).expect("a spawner runs beside the daemon");
    // SAFETY: pidfd_open(2) on the daemon, which this test started and
    // which has not exited (it just answered).
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, daemon, 0) } as i32;
    assert!(fd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
    c.send_raw(common::request_line("2", "server.shutdown", None, common::TOKEN).as_bytes());
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on the one descriptor this test opened.
    let ready = unsafe { libc::poll(&mut pfd, 1, 20_000) };
    let spawner_left = std::path::Path::new(&format!("/proc/{spawner}")).exists();
    // SAFETY: closes the descriptor opened above.
    unsafe { libc::close(fd) };
    assert_eq!(ready, 1, "the daemon did not exit after server.shutdown");
    assert!(!spawner_left, "the spawner {spawner} outlived its daemon {daemon}");
}
