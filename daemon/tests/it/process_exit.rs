//! The exit frame's `signal` and `killedBy` members (reference build
//! 4534d86) against a real daemon and real children: present after a
//! client's kill or killAndWait, `signal` alone when the child dies of a
//! signal nobody at the daemon sent, and neither on a normal exit.

use crate::common::reply::ok;
use crate::common::{Client, TestDaemon};

/// The raw exit frame of process `id`, skipping its output frames and any
/// other line (kept for later replies).
fn exit_frame(c: &mut Client, id: &str) -> String {
    let prefix = format!("{{\"type\":\"stream\",\"processId\":\"{id}\",\"stream\":\"");
    let mut kept = Vec::new();
    let frame = loop {
        let line = if c.backlog.is_empty() {
            c.recv_line()
        } else {
            c.backlog.remove(0)
        };
        if line.starts_with(&format!("{prefix}exit\"")) {
            break line;
        }
        if !line.starts_with(&prefix) {
            kept.push(line);
        }
    };
    kept.append(&mut c.backlog);
    c.backlog = kept;
    frame
}

/// Skips everything up to the first stdout frame of `id` (a readiness line).
fn await_output(c: &mut Client, id: &str) {
    let prefix = format!("{{\"type\":\"stream\",\"processId\":\"{id}\",\"stream\":\"stdout\"");
    loop {
        let line = if c.backlog.is_empty() {
            c.recv_line()
        } else {
            c.backlog.remove(0)
        };
        if line.starts_with(&prefix) {
            return;
        }
    }
}

fn spawn_sh(c: &mut Client, rid: u64, id: &str, script: &str) {
    let params = serde_json::json!({"id": id, "command": "sh", "args": ["-c", script]});
    assert_eq!(
        c.call(rid, "process.spawn", &params.to_string()),
        ok(rid, r#"{"success":true}"#)
    );
}

fn exit_line(id: &str, seq: u64, tail: &str) -> String {
    format!(r#"{{"type":"stream","processId":"{id}","stream":"exit","seq":{seq},"exitCode":{tail}}}"#)
}

#[test]
fn kill_marks_the_exit_frame_with_signal_and_client() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    spawn_sh(&mut c, 1, "t", "echo ready; exec sleep 1000");
    await_output(&mut c, "t");
    assert_eq!(c.call(2, "process.kill", r#"{"id":"t"}"#), ok(2, r#"{"success":true}"#));
    assert_eq!(
        exit_frame(&mut c, "t"),
        exit_line("t", 2, r#"-1,"signal":"SIGTERM","killedBy":"client""#)
    );

    spawn_sh(&mut c, 3, "k", "echo ready; exec sleep 1000");
    await_output(&mut c, "k");
    c.call(4, "process.kill", r#"{"id":"k","signal":"KILL"}"#);
    assert_eq!(
        exit_frame(&mut c, "k"),
        exit_line("k", 2, r#"-1,"signal":"SIGKILL","killedBy":"client""#)
    );
}

#[test]
fn kill_and_wait_marks_the_exit_frame_even_when_it_escalates() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    spawn_sh(&mut c, 1, "w", "echo ready; exec sleep 1000");
    await_output(&mut c, "w");
    assert_eq!(
        c.call(2, "process.killAndWait", r#"{"id":"w"}"#),
        ok(2, r#"{"found":true,"died":true}"#)
    );
    assert_eq!(
        exit_frame(&mut c, "w"),
        exit_line("w", 2, r#"-1,"signal":"SIGTERM","killedBy":"client""#)
    );

    // TERM is ignored, so the group SIGKILL is what ends it.
    spawn_sh(&mut c, 3, "s", "trap '' TERM; echo ready; while :; do sleep 0.05; done");
    await_output(&mut c, "s");
    assert_eq!(
        c.call(4, "process.killAndWait", r#"{"id":"s","timeoutMs":50}"#),
        ok(4, r#"{"found":true,"died":true,"escalated":true}"#)
    );
    assert_eq!(
        exit_frame(&mut c, "s"),
        exit_line("s", 2, r#"-1,"signal":"SIGKILL","killedBy":"client""#)
    );
}

#[test]
fn normal_and_self_inflicted_exits() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    spawn_sh(&mut c, 1, "n", "exit 3");
    assert_eq!(exit_frame(&mut c, "n"), exit_line("n", 1, "3"));
    // A signal no client asked for: the name, but no killedBy.
    spawn_sh(&mut c, 2, "self", "kill -USR1 $$");
    assert_eq!(
        exit_frame(&mut c, "self"),
        exit_line("self", 1, r#"-1,"signal":"SIGUSR1""#)
    );
    // A kill request that the child survives and then exits normally from:
    // killedBy still names who asked (the signal is not what ended it).
    spawn_sh(
        &mut c,
        3,
        "trap",
        "trap 'exit 0' TERM; echo ready; while :; do sleep 0.02; done",
    );
    await_output(&mut c, "trap");
    c.call(4, "process.kill", r#"{"id":"trap"}"#);
    // (The group's `sleep` may add a stderr frame first: seq varies.)
    let frame = exit_frame(&mut c, "trap");
    assert!(frame.ends_with(r#","exitCode":0,"killedBy":"client"}"#), "{frame}");
    // A kill of an exited process sends nothing and changes nothing.
    c.call(5, "process.kill", r#"{"id":"n"}"#);
    c.send(6, "process.reattach", r#"{"id":"n","fromSeq":0}"#);
    assert_eq!(exit_frame(&mut c, "n"), exit_line("n", 1, "3"));
}
