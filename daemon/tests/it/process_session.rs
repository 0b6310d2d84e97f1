//! Session superseding: a `process.spawn` whose
//! arguments name a stream-json CLI session terminates every other running
//! process of that session — real children, real signals, exact frames.

use crate::common::reply::ok;
use crate::common::{wait_until, Client, TestDaemon};
use std::time::{Duration, Instant};

/// A CLI stand-in: prints `ready`, then runs `body`; the session flags
/// follow as its positional arguments, where the daemon reads them.
fn spawn_cli(c: &mut Client, rid: u64, id: &str, body: &str, flags: &[&str]) -> String {
    let mut args = vec!["-c".to_string(), format!("echo ready; {body}"), "cli".to_string()];
    args.extend(flags.iter().map(|f| f.to_string()));
    let params = serde_json::json!({"id": id, "command": "sh", "args": args, "wantPid": true});
    c.send(rid, "process.spawn", &params.to_string());
    let reply = c.reply_for(rid);
    await_line(c, &format!(r#"{{"type":"stream","processId":"{id}","stream":"stdout""#));
    reply
}

/// Waits for (and removes) the first line starting with `prefix`, keeping
/// the others in the backlog.
fn await_line(c: &mut Client, prefix: &str) -> String {
    if let Some(i) = c.backlog.iter().position(|l| l.starts_with(prefix)) {
        return c.backlog.remove(i);
    }
    loop {
        let line = c.recv_line();
        if line.starts_with(prefix) {
            return line;
        }
        c.backlog.push(line);
    }
}

fn exit_prefix(id: &str) -> String {
    format!(r#"{{"type":"stream","processId":"{id}","stream":"exit""#)
}

fn running(c: &mut Client, rid: u64, id: &str) -> bool {
    let reply = c.call(rid, "process.reattach", &format!(r#"{{"id":"{id}","fromSeq":999}}"#));
    reply.contains(r#""running":true"#)
}

const SJ: &str = "--output-format=stream-json";

#[test]
fn same_session_is_superseded_others_are_not() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let sleeper = "exec sleep 1000";
    spawn_cli(&mut c, 1, "a", sleeper, &[SJ, "--session-id", "S1"]);
    spawn_cli(&mut c, 2, "other", sleeper, &[SJ, "--session-id", "S2"]);
    spawn_cli(&mut c, 3, "plain", sleeper, &["--session-id", "S1"]);

    // A second process of S1: "a" is terminated before "b" starts (its
    // exit frame and b's reply come in either order).
    let params = serde_json::json!({"id": "b", "command": "sh",
        "args": ["-c", "echo ready; exec sleep 1000", "cli", "--input-format=stream-json", "--session-id=S1"]});
    c.send(4, "process.spawn", &params.to_string());
    let (mut a_exit, mut b_reply) = (false, false);
    while !(a_exit && b_reply) {
        let line = c.recv_line();
        if line.starts_with(&exit_prefix("a")) {
            assert!(
                line.ends_with(r#""exitCode":-1,"signal":"SIGTERM","killedBy":"client"}"#),
                "{line}"
            );
            a_exit = true;
        } else if line == ok(4, r#"{"success":true}"#) {
            b_reply = true;
        }
    }
    assert!(running(&mut c, 5, "other"), "a different session is untouched");
    assert!(running(&mut c, 6, "plain"), "not a stream-json CLI: no session");
    assert!(running(&mut c, 7, "b"));

    // --resume names the same session...
    spawn_cli(
        &mut c,
        8,
        "c",
        sleeper,
        &["--output-format", "stream-json", "--resume", "S1"],
    );
    let b_exit = await_line(&mut c, &exit_prefix("b"));
    assert!(b_exit.ends_with(r#""killedBy":"client"}"#), "{b_exit}");
    // ...unless --fork-session makes it a new one.
    spawn_cli(&mut c, 9, "fork", sleeper, &[SJ, "--resume", "S1", "--fork-session"]);
    assert!(running(&mut c, 10, "c"), "a fork supersedes nothing");
    // No session key at all supersedes nothing either.
    spawn_cli(&mut c, 11, "none", sleeper, &[SJ]);
    assert!(running(&mut c, 12, "c"));
    assert!(running(&mut c, 13, "other"));
    for (rid, id) in [(20, "c"), (21, "other"), (22, "plain"), (23, "fork"), (24, "none")] {
        c.call(rid, "process.kill", &format!(r#"{{"id":"{id}","signal":"KILL"}}"#));
    }
}

#[test]
fn a_term_ignoring_session_process_is_escalated() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    // It says so on stderr once the trap is set: SIGTERM must not win that race.
    let stubborn = "trap '' TERM; echo trapped >&2; while :; do sleep 0.05; done";
    spawn_cli(&mut c, 1, "old", stubborn, &[SJ, "--session-id", "S"]);
    await_line(&mut c, r#"{"type":"stream","processId":"old","stream":"stderr""#);
    let t = Instant::now();
    spawn_cli(&mut c, 2, "new", "exec sleep 1000", &[SJ, "--session-id", "S"]);
    let waited = t.elapsed();
    let exit = await_line(&mut c, &exit_prefix("old"));
    assert!(
        exit.ends_with(r#""exitCode":-1,"signal":"SIGKILL","killedBy":"client"}"#),
        "{exit}"
    );
    // The 3000 ms grace, then the group SIGKILL, before the new one ran.
    assert!(waited >= Duration::from_millis(2900), "{waited:?}");
    assert!(waited < Duration::from_secs(8), "{waited:?}");
    c.call(3, "process.kill", r#"{"id":"new","signal":"KILL"}"#);
}

#[test]
fn an_exited_process_of_the_session_and_the_same_id_are_left_to_their_rules() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    // Exited: nothing to terminate, its frames stay as they were.
    let params =
        serde_json::json!({"id": "done", "command": "sh", "args": ["-c", "exit 5", "cli", SJ, "--session-id", "S"]});
    c.call(1, "process.spawn", &params.to_string());
    assert!(await_line(&mut c, &exit_prefix("done")).ends_with(r#""exitCode":5}"#));
    spawn_cli(&mut c, 2, "live", "exec sleep 1000", &[SJ, "--session-id", "S"]);
    c.send(3, "process.reattach", r#"{"id":"done","fromSeq":0}"#);
    assert!(await_line(&mut c, &exit_prefix("done")).ends_with(r#""exitCode":5}"#));
    // Respawning the same id replaces it silently (id reuse), as before.
    spawn_cli(&mut c, 4, "live", "exec sleep 1000", &[SJ, "--session-id", "S"]);
    assert!(running(&mut c, 5, "live"));
    c.call(6, "process.kill", r#"{"id":"live","signal":"KILL"}"#);
    assert!(wait_until(Duration::from_secs(5), || !running(&mut c, 7, "live")));
}

#[test]
fn concurrent_spawns_of_one_session_leave_one_running() {
    let d = TestDaemon::start();
    let mut c1 = d.connect();
    let mut c2 = d.connect();
    let spawn = |c: &mut Client, id: &str| {
        let params = serde_json::json!({"id": id, "command": "sh",
            "args": ["-c", "exec sleep 1000", "cli", SJ, "--session-id", "S"]});
        c.send(1, "process.spawn", &params.to_string());
    };
    spawn(&mut c1, "x1");
    spawn(&mut c2, "x2");
    assert_eq!(c1.reply_for(1), ok(1, r#"{"success":true}"#));
    assert_eq!(c2.reply_for(1), ok(1, r#"{"success":true}"#));
    let alive = [running(&mut c1, 2, "x1"), running(&mut c1, 3, "x2")];
    assert_eq!(alive.iter().filter(|r| **r).count(), 1, "{alive:?}");
    for id in ["x1", "x2"] {
        c1.call(4, "process.kill", &format!(r#"{{"id":"{id}","signal":"KILL"}}"#));
    }
}
