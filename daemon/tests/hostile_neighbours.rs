//! What a local process without the token can take from the daemon by
//! connecting: descriptors, time, memory and log lines are all bounded
//! (`admission.rs`), and the owner keeps being served.

#![allow(clippy::unwrap_used)] // a test or bench that unwraps fails loudly; the lint guards the daemon

mod common;

use common::{wait_until, Client, TestDaemon};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

fn spawn_true(c: &mut Client, n: usize) {
    for i in 0..n {
        let reply = c.call(
            format!("{i}"),
            "process.spawn",
            &format!(r#"{{"id":"t{i}","command":"true","args":[]}}"#),
        );
        assert!(reply.contains(r#""result":"#), "spawn {i}: {reply}");
    }
}

/// Waits until the daemon closes `s` (EOF or reset) or `limit` passes.
fn closed_within(s: &mut UnixStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn silent_connections_past_the_descriptor_limit_leave_room_for_the_owner() {
    // 256 descriptors: the connection cap is 256 − 128 = 128.
    let d = TestDaemon::start_with_fd_limit(256, &[]);
    let mut silent: Vec<UnixStream> = (0..300).filter_map(|_| UnixStream::connect(&d.socket).ok()).collect();
    assert!(silent.len() >= 250, "connects are accepted (and the oldest evicted)");
    // The owner gets in, past the silent crowd, and can still spawn.
    let mut c = d.connect();
    assert!(c.call(1, "server.ping", "{}").contains(r#""pong":true"#));
    spawn_true(&mut c, 20);
    // The oldest silent connections were closed to make room.
    assert!(closed_within(&mut silent[0], Duration::from_secs(10)));
    let log = d.log();
    assert!(log.contains("the connection limit (128) is reached"), "{log}");
    assert!(!log.to_lowercase().contains("too many open files"), "{log}");
}

#[test]
fn a_connection_without_the_token_is_closed_after_its_grace() {
    let d = TestDaemon::start_with(&[], &[("REMORA_TEST_AUTH_GRACE_MS", "300")]);
    let mut silent = UnixStream::connect(&d.socket).unwrap();
    let mut refused = UnixStream::connect(&d.socket).unwrap();
    refused
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.ping\",\"auth\":\"wrong\"}\n")
        .unwrap();
    // An authenticated connection stays open past the grace.
    let mut owner = d.connect();
    assert!(owner.call(1, "server.ping", "{}").contains("pong"));
    assert!(
        closed_within(&mut silent, Duration::from_secs(10)),
        "silent connection kept"
    );
    assert!(
        closed_within(&mut refused, Duration::from_secs(10)),
        "refused connection kept"
    );
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        owner.call(2, "server.ping", "{}").contains("pong"),
        "the owner's connection was closed"
    );
    assert!(d.log().contains("no authenticated request within 300ms"), "{}", d.log());
}

#[test]
fn unauthenticated_partial_lines_share_one_budget() {
    let d = TestDaemon::start();
    // 48 connections x (1 MiB - 1) bytes without a newline: 48 MiB, over
    // the 32 MiB budget for all unauthenticated connections together.
    let chunk = vec![b'x'; (1 << 20) - 1];
    let mut held = Vec::new();
    for _ in 0..48 {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(&chunk);
        held.push(s);
    }
    assert!(
        wait_until(Duration::from_secs(20), || d.log().contains("reach 32 MiB")),
        "{}",
        d.log()
    );
    let closed = held
        .iter_mut()
        .map(|s| closed_within(s, Duration::from_millis(200)))
        .filter(|closed| *closed)
        .count();
    assert!(closed >= 16, "only {closed} of 48 over-budget connections closed");
    // The owner is unaffected: a short first request authenticates the
    // connection, and its lines are no longer charged.
    let mut c = d.connect();
    assert!(c.call(0, "server.ping", "{}").contains("pong"));
    let big = format!("\"{}\"", "y".repeat(900_000));
    let reply = c.call(1, "server.ping", &big);
    assert!(reply.contains("pong"), "{reply}");
}

#[test]
fn repeated_unauthorized_requests_log_a_bounded_number_of_lines() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let mut lines = String::new();
    for i in 0..200 {
        lines.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"server.ping\",\"auth\":\"wrong\"}}\n"
        ));
    }
    c.send_raw(lines.as_bytes());
    for _ in 0..200 {
        assert!(c.recv_line().contains("-32001"));
    }
    drop(c);
    assert!(wait_until(Duration::from_secs(10), || d
        .log()
        .contains("were not logged")));
    let log = d.log();
    assert_eq!(log.matches("Unauthorized request").count(), 5, "{log}");
    assert!(
        log.contains("195 more unauthorized request(s) on this connection were not logged"),
        "{log}"
    );
}

#[test]
fn a_client_pipelining_thousands_of_spawns_without_reading_is_not_wedged() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let n = 3000;
    let mut lines = String::new();
    for i in 0..n {
        lines.push_str(&common::request_line(
            &i.to_string(),
            "process.spawn",
            Some(&format!(r#"{{"id":"p{i}","command":"true","args":[]}}"#)),
            common::TOKEN,
        ));
    }
    // Write everything from another thread while this one does not read
    // yet: the daemon must take it all without a reader on our side...
    let mut w = c.stream.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(lines.as_bytes()).is_ok());
    // Not a readiness wait: the scenario is a client that does not read
    // for a while, with its requests piling up behind full buffers.
    std::thread::sleep(Duration::from_secs(2));
    // ...and, once we read, answer every request.
    let mut replies = 0;
    let mut exits = 0;
    while replies < n || exits < n {
        let line = c.recv_line();
        if line.starts_with(r#"{"jsonrpc":"2.0","id":"#) {
            assert!(line.contains(r#""result":"#), "{line}");
            replies += 1;
        } else if line.contains(r#""stream":"exit""#) {
            exits += 1;
        }
    }
    assert!(writer.join().unwrap());
    assert!(c.call(n + 1, "server.ping", "{}").contains("pong"));
}
