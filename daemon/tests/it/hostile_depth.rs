//! Deeply nested request lines against a real daemon: no position of the
//! envelope, authenticated or not, at any log level, may take the daemon
//! down. Go's decoder allows 10 000 levels of nesting in a whole line and
//! rejects more as a syntax error, which the reference answers as a parse
//! error; within the limit the id comes back re-encoded whole.

use crate::common::{Client, TestDaemon, TOKEN};

const PARSE_ERROR: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#;
const PONG_TAIL: &str = r#","result":{"pong":true}}"#;

fn nested_array(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

fn nested_object(depth: usize) -> String {
    format!("{}1{}", r#"{"k":"#.repeat(depth), "}".repeat(depth))
}

/// The envelope with `deep` placed at `position`; the other members are
/// plain (`auth` is the right token when `authed`).
fn line_with(position: &str, deep: &str, authed: bool) -> String {
    let auth = if authed {
        format!("\"{TOKEN}\"")
    } else {
        "\"wrong\"".to_string()
    };
    let mut members = vec![
        ("jsonrpc", "\"2.0\"".to_string()),
        ("id", "7".to_string()),
        ("method", "\"server.ping\"".to_string()),
        ("params", "{}".to_string()),
        ("auth", auth),
    ];
    for member in &mut members {
        if member.0 == position {
            member.1 = deep.to_string();
        }
    }
    let body: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    format!("{{{}}}\n", body.join(","))
}

fn ping(c: &mut Client, id: u32) {
    c.send(id, "server.ping", "{}");
    assert_eq!(c.reply_for(id), format!(r#"{{"jsonrpc":"2.0","id":{id}{PONG_TAIL}"#));
}

fn hostile_lines_leave_the_daemon_serving(env: &[(&str, &str)]) {
    let d = TestDaemon::start_with(&[], env);
    let mut c = d.connect();
    for authed in [false, true] {
        for position in ["id", "params", "method", "auth"] {
            for deep in [nested_array(100_000), nested_object(100_000), nested_array(10_000)] {
                c.send_raw(line_with(position, &deep, authed).as_bytes());
                // Past Go's nesting limit (the envelope adds one level), the
                // whole line is a syntax error.
                assert_eq!(c.recv_line(), PARSE_ERROR, "{position} authed={authed}");
            }
        }
        // Within the limit: an id 9 999 levels deep is echoed whole.
        let id = nested_array(9_999);
        c.send_raw(line_with("id", &id, authed).as_bytes());
        let reply = c.recv_line();
        let want_tail = if authed {
            PONG_TAIL.to_string()
        } else {
            r#","error":{"code":-32001,"message":"Unauthorized: invalid or missing auth token"}}"#.to_string()
        };
        assert_eq!(
            reply,
            format!(r#"{{"jsonrpc":"2.0","id":{id}{want_tail}"#),
            "authed={authed}"
        );
        // Deep params within the limit: server.* ignores params; files.*
        // binds them and refuses.
        c.send_raw(line_with("params", &nested_array(9_999), authed).as_bytes());
        let reply = c.recv_line();
        assert!(reply.starts_with(r#"{"jsonrpc":"2.0","id":7,"#), "{reply}");
        // A string-typed member given a deep array is a decode error, which
        // the reference answers as a parse error.
        c.send_raw(line_with("method", &nested_object(9_998), authed).as_bytes());
        assert_eq!(c.recv_line(), PARSE_ERROR);
    }
    // The same connection, and a new one, are still served.
    ping(&mut c, 1);
    ping(&mut d.connect(), 2);
    let log = d.log();
    assert!(!log.contains("panicked"), "{log}");
    // The unauthorized warnings are single, bounded lines.
    for line in log.lines().filter(|l| l.contains("Unauthorized request")) {
        assert!(line.len() < 4096, "an unbounded log line of {} bytes", line.len());
    }
}

#[test]
fn nesting_at_every_position_and_log_level_never_crashes() {
    hostile_lines_leave_the_daemon_serving(&[("REMORA_LOG_LEVEL", "debug")]);
    hostile_lines_leave_the_daemon_serving(&[("REMORA_LOG_LEVEL", "error")]);
}

#[test]
fn unauthenticated_strings_cannot_forge_log_lines() {
    let d = TestDaemon::start_with(&[], &[("REMORA_LOG_LEVEL", "debug")]);
    let mut c = d.connect();
    let forged = r#"x\n2026/01/01 00:00:00 INFO  [Server] forged"#;
    let long = "m".repeat(100_000);
    c.send_raw(
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"a\\nb\",\"method\":\"{forged}\",\"auth\":\"wrong\"}}\n{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"{long}\",\"auth\":\"wrong\"}}\n"
        )
        .as_bytes(),
    );
    assert!(c.recv_line().contains("-32001"));
    assert!(c.recv_line().contains("-32001"));
    ping(&mut c, 3);
    let log = d.log();
    assert!(
        !log.lines().any(|l| l.contains("forged") && !l.contains("Unauthorized")),
        "{log}"
    );
    assert!(
        log.contains(r#"method=x\n2026/01/01 00:00:00 INFO  [Server] forged, id=a\nb"#),
        "{log}"
    );
    let long_line = log
        .lines()
        .find(|l| l.contains("mmmm"))
        .expect("the long method is logged");
    assert!(long_line.len() < 1024, "{} bytes", long_line.len());
}
