//! A reattach transfers a process to the reattaching connection
//! and closes the connection it took it from, with two and
//! three real connections to a real daemon and a real child.

use crate::common::{wait_until, TestDaemon};
use std::time::Duration;

/// `sh` that prints `a`, then `b` once a line arrives on stdin.
const STEPPED: &str = r#"{"id":"p1","command":"sh","args":["-c","printf a; read x; printf b"]}"#;

fn is_frame(line: &str, seq: u64) -> bool {
    line.starts_with(r#"{"type":"stream","processId":"p1""#) && line.contains(&format!(r#""seq":{seq},"#))
}

/// The two connection numbers of a "closing connection" line.
fn connections_named(line: &str) -> (u64, u64) {
    let numbers: Vec<u64> = line
        .split("(connection ")
        .skip(1)
        .map(|rest| rest.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(numbers.len(), 2, "{line}");
    (numbers[0], numbers[1])
}

#[test]
fn reattach_cuts_the_old_connection_at_last_seq_and_closes_it() {
    let d = TestDaemon::start();
    let mut a = d.connect();
    a.call(1, "process.spawn", STEPPED);
    let first = a.recv_line();
    assert!(is_frame(&first, 1), "{first}");

    let mut b = d.connect();
    let reply = b.call(2, "process.reattach", r#"{"id":"p1","fromSeq":1}"#);
    assert!(reply.contains(r#""lastSeq":1,"#), "{reply}");
    // Closed without another frame: nothing past lastSeq reaches it.
    assert_eq!(a.read_to_eof(), "");
    // The process goes on, streaming to the new connection only.
    b.call(3, "process.stdin", r#"{"id":"p1","data":"eAo="}"#);
    let second = b.recv_line();
    assert!(is_frame(&second, 2), "{second}");
    assert!(second.contains(r#""data":"Yg==""#), "{second}");
    // The line names both connections (number and peer pid) and the process.
    assert!(wait_until(Duration::from_secs(10), || d
        .log()
        .contains("reattached from another connection")));
    let log = d.log();
    let line = log
        .lines()
        .find(|l| l.contains("[Server] closing connection @ ("))
        .unwrap();
    let me = std::process::id();
    let (closed, taker) = connections_named(line);
    assert_eq!(
        line.split_once(" INFO  ").unwrap().1,
        format!(
            "[Server] closing connection @ (connection {closed}, peer pid {me}): process p1 reattached from another connection (connection {taker}, peer pid {me})"
        )
    );
    assert!(closed < taker, "{line}");
    // The new owner is still served.
    assert!(b.call(4, "server.ping", "{}").contains("pong"));
}

#[test]
fn reattach_on_the_attached_connection_closes_nothing() {
    let d = TestDaemon::start();
    let mut a = d.connect();
    a.call(1, "process.spawn", STEPPED);
    assert!(is_frame(&a.recv_line(), 1));
    let reply = a.call(2, "process.reattach", r#"{"id":"p1","fromSeq":1}"#);
    assert!(reply.contains(r#""found":true"#), "{reply}");
    a.call(3, "process.stdin", r#"{"id":"p1","data":"eAo="}"#);
    let second = a.recv_line();
    assert!(is_frame(&second, 2), "{second}");
    assert!(a.call(4, "server.ping", "{}").contains("pong"));
    assert!(!d.log().contains("reattached from another connection"));
}

#[test]
fn a_connection_following_two_processes_is_closed_when_one_is_taken() {
    let d = TestDaemon::start();
    let mut a = d.connect();
    a.call(1, "process.spawn", STEPPED);
    assert!(is_frame(&a.recv_line(), 1));
    a.call(
        2,
        "process.spawn",
        r#"{"id":"p2","command":"sh","args":["-c","read x; printf z"]}"#,
    );
    let mut b = d.connect();
    b.call(3, "process.reattach", r#"{"id":"p2","fromSeq":0}"#);
    assert_eq!(a.read_to_eof(), "");
    // p1 is still running and can be reattached by anyone.
    let mut c = d.connect();
    let reply = c.call(4, "process.reattach", r#"{"id":"p1","fromSeq":0}"#);
    assert!(reply.contains(r#""running":true"#), "{reply}");
    // The replayed frame precedes the reply.
    assert!(c.backlog.iter().any(|l| is_frame(l, 1)), "{:?}", c.backlog);
    // b keeps p2.
    b.call(5, "process.stdin", r#"{"id":"p2","data":"eAo="}"#);
    let z = b.recv_line();
    assert!(
        z.contains(r#""processId":"p2""#) && z.contains(r#""data":"eg==""#),
        "{z}"
    );
}
