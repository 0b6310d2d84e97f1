//! The protocol core against a real daemon over a real socket: transport,
//! envelope precedence, params gate, server.* methods.

use crate::common;
use crate::common::reply::err;
use crate::common::{request_line, Client, TestDaemon, TOKEN};
use std::io::Write;

#[test]
fn server_methods_reply_byte_exact() {
    // Unstamped: the newest recorded build (every build's frame:
    // build_profiles.rs).
    let d = TestDaemon::start();
    let mut c = d.connect();
    assert_eq!(
        c.call(1, "server.ping", "{}"),
        r#"{"jsonrpc":"2.0","id":1,"result":{"pong":true}}"#
    );
    // Seed 000 answered server.version with {version, platform, arch}; the
    // reference removed the method at 7d193f89, and every build a client
    // pins answers it as an unknown method, so remora
    // follows them (docs/PROTOCOL.md, "server.version").
    assert_eq!(
        c.call(2, "server.version", "{}"),
        err("2", -32601, "Unknown method: server.version")
    );
    let caps = c.call(3, "server.capabilities", "{}");
    let methods = r#""methods":["server.ping","server.capabilities","server.shutdown","files.list","files.validate","files.stat","files.read","files.extract_tar","git.info","git.status","git.list_branches","git.worktree_create","git.worktree_remove","launcher.resolve","process.spawn","process.stdin","process.kill","process.killAndWait","process.reattach","plugins.prune"],"instanceId":""#;
    // Unstamped: the newest recorded build (5fd08069), `peerCheck` last.
    let features = r#","features":["process.stdin.offset","files.extract_tar.execBit","git.status.baseRepo","git.info.discovered_root","git.worktree_create.timeoutMs","git.worktree_create.existingBranch","git.worktree_remove.unpushedGuard","process.spawn.shellAgentSocket","launcher.managed","server.peer_check","git.worktree.external_root","server.instance_id"],"peerCheck":"off"}}"#;
    assert!(
        caps.starts_with(r#"{"jsonrpc":"2.0","id":3,"result":{"version":""#),
        "{caps}"
    );
    // `instanceId` (32 hex) and `startedAt` (unix ms) between methods
    // and features.
    let at = caps.find(methods).unwrap_or_else(|| panic!("{caps}")) + methods.len();
    let id = &caps[at..at + 32];
    assert!(id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')), "{caps}");
    let rest = &caps[at + 32..];
    let started = rest
        .strip_prefix(r#"","startedAt":"#)
        .and_then(|r| r.strip_suffix(features))
        .unwrap_or_else(|| panic!("{caps}"));
    assert!(
        started.len() == 13 && started.bytes().all(|b| b.is_ascii_digit()),
        "{caps}"
    );
}

#[test]
fn server_methods_ignore_params_of_any_type() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    for (i, params) in ["\"x\"", "[1,2]", "null", "42", "{\"maxBytes\":\"{\"}"]
        .iter()
        .enumerate()
    {
        assert_eq!(
            c.call(i, "server.ping", params),
            format!(r#"{{"jsonrpc":"2.0","id":{i},"result":{{"pong":true}}}}"#)
        );
    }
    c.send_raw(request_line("9", "server.ping", None, TOKEN).as_bytes());
    assert_eq!(c.reply_for(9), r#"{"jsonrpc":"2.0","id":9,"result":{"pong":true}}"#);
}

#[test]
fn validation_precedence_matrix() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let cases: Vec<(String, String)> = vec![
        ("{not json".into(), err("null", -32700, "Parse error")),
        // No auth and no/bad version: auth is checked first.
        (
            r#"{"id":1,"method":"server.ping"}"#.into(),
            err("1", -32001, "Unauthorized: invalid or missing auth token"),
        ),
        (
            r#"{"jsonrpc":"1.0","id":2,"method":"server.ping","auth":"wrong"}"#.into(),
            err("2", -32001, "Unauthorized: invalid or missing auth token"),
        ),
        (
            format!(r#"{{"id":3,"method":"server.ping","auth":"{TOKEN}"}}"#),
            err("3", -32600, "Invalid JSON-RPC version"),
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":4,"method":"bogus","auth":"{TOKEN}"}}"#),
            err("4", -32601, "Invalid method format: bogus"),
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":5,"method":"nope.x","auth":"{TOKEN}"}}"#),
            err("5", -32601, "Unknown namespace: nope"),
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":6,"method":"files.nope","auth":"{TOKEN}"}}"#),
            err("6", -32601, "Unknown method: files.nope"),
        ),
        // Unknown method beats absent params.
        (
            format!(r#"{{"jsonrpc":"2.0","id":7,"method":"git.nope","auth":"{TOKEN}"}}"#),
            err("7", -32601, "Unknown method: git.nope"),
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":8,"method":"files.stat","auth":"{TOKEN}"}}"#),
            err("8", -32602, "Invalid params"),
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":9,"method":"process.kill","params":"x","auth":"{TOKEN}"}}"#),
            err("9", -32602, "Invalid params"),
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":10,"method":"git.status","params":{{"baseRepo":[1,2]}},"auth":"{TOKEN}"}}"#
            ),
            err("10", -32602, "Invalid params"),
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":11,"method":"files.stat","params":{{"maxBytes":"{{"}},"auth":"{TOKEN}"}}"#
            ),
            err("11", -32602, "Invalid params"),
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":12,"method":"files.read","params":{{"path":"/x","maxBytes":1.5}},"auth":"{TOKEN}"}}"#
            ),
            err("12", -32602, "Invalid params"),
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":13,"method":"process.spawn","params":[],"auth":"{TOKEN}"}}"#),
            err("13", -32602, "Invalid params"),
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":"s<1>","method":"server.nope","auth":"{TOKEN}"}}"#),
            err("\"s\\u003c1\\u003e\"", -32601, "Unknown method: server.nope"),
        ),
    ];
    for (line, want) in cases {
        c.send_raw(format!("{line}\n").as_bytes());
        assert_eq!(c.recv_line(), want, "request {line}");
    }
}

#[test]
fn unauthorized_requests_are_logged_without_the_token() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":19,\"method\":\"files.stat\",\"auth\":\"secret-guess\"}\n");
    assert_eq!(
        c.recv_line(),
        err("19", -32001, "Unauthorized: invalid or missing auth token")
    );
    let log = d.log();
    assert!(
        log.contains(" WARN  [Server] Unauthorized request: method=files.stat, id=19\n"),
        "{log}"
    );
    assert!(!log.contains("secret-guess"));
    assert!(!log.contains(TOKEN));
}

#[test]
fn unauthorized_log_prints_the_id_as_go_percent_v() {
    // The reference logs the decoded interface{} id with %v, not as JSON.
    // One connection per id: a connection logs only its first few.
    let d = TestDaemon::start();
    for (id, logged) in [
        ("1000000", "1e+06"),
        ("12345678901234567890", "1.2345678901234567e+19"),
        ("0.00001", "1e-05"),
        ("\"s\"", "s"),
        ("[1,\"a\"]", "[1 a]"),
        ("{\"b\":1,\"a\":2}", "map[a:2 b:1]"),
    ] {
        let mut c = d.connect();
        c.send_raw(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"server.ping\"}}\n").as_bytes());
        assert!(c.recv_line().contains("-32001"), "id {id}");
        let log = d.log();
        assert!(
            log.contains(&format!(
                " WARN  [Server] Unauthorized request: method=server.ping, id={logged}\n"
            )),
            "id {id}: {log}"
        );
    }
}

#[test]
fn empty_lines_get_no_reply_white_space_lines_a_parse_error() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    // Empty, and empty once the one `\r` is dropped: no reply.
    c.send_raw(b"\n\r\n");
    let ping = request_line("1", "server.ping", Some("{}"), TOKEN);
    c.send_raw(ping.trim_end().as_bytes());
    c.send_raw(b"\r\n");
    assert_eq!(c.recv_line(), r#"{"jsonrpc":"2.0","id":1,"result":{"pong":true}}"#);
    // Spaces only, a tab, a doubled `\r`: each is a
    // line that does not decode.
    c.send_raw(b"   \n\t\n\r\r\n");
    for _ in 0..3 {
        assert_eq!(c.recv_line(), err("null", -32700, "Parse error"));
    }
    assert_eq!(
        c.call(2, "server.ping", "{}"),
        r#"{"jsonrpc":"2.0","id":2,"result":{"pong":true}}"#
    );
}

#[test]
fn line_cap_boundary_is_exact() {
    let d = TestDaemon::start();
    // 1,048,575 bytes before the newline: served (a -32700, since the
    // padding makes it invalid JSON, proves it was read as one line).
    let mut c = d.connect();
    let mut line = vec![b' '; 1_048_575 - 1];
    line.push(b'x');
    line.push(b'\n');
    c.send_raw(&line);
    assert_eq!(c.recv_line(), err("null", -32700, "Parse error"));
    // And a valid request padded to exactly 1,048,575 bytes is answered.
    let ping = request_line("2", "server.ping", Some("{}"), TOKEN);
    let ping = ping.trim_end();
    let mut padded = ping.as_bytes().to_vec();
    padded.resize(1_048_575, b' ');
    padded.push(b'\n');
    c.send_raw(&padded);
    assert_eq!(c.recv_line(), r#"{"jsonrpc":"2.0","id":2,"result":{"pong":true}}"#);

    // 1,048,576 bytes: the connection closes with no reply.
    let mut c = d.connect();
    let mut padded = ping.as_bytes().to_vec();
    padded.resize(1_048_576, b' ');
    padded.push(b'\n');
    let _ = c.stream.write_all(&padded);
    assert_eq!(c.read_to_eof(), "");
    // The daemon itself is fine.
    assert_eq!(
        d.call("server.ping", "{}"),
        r#"{"jsonrpc":"2.0","id":1,"result":{"pong":true}}"#
    );
}

#[test]
fn endless_line_without_newline_is_cut_off() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let chunk = vec![b'a'; 1024 * 1024];
    let mut sent = 0usize;
    for _ in 0..100 {
        match c.stream.write_all(&chunk) {
            Ok(()) => sent += chunk.len(),
            Err(_) => break,
        }
    }
    // The daemon stops reading at the cap and closes, long before 100 MiB.
    assert!(sent < 100 * 1024 * 1024, "daemon kept reading {sent} bytes");
    assert_eq!(
        d.call("server.ping", "{}"),
        r#"{"jsonrpc":"2.0","id":1,"result":{"pong":true}}"#
    );
}

#[test]
fn connection_is_persistent_and_ids_echo_exactly() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    for (id, echoed) in [
        ("1.0", "1"),
        ("1e3", "1000"),
        ("12345678901234567890", "12345678901234567000"),
        ("1e21", "1e+21"),
        ("1e-7", "1e-7"),
        ("-0", "-0"),
        ("\"a<b\"", "\"a\\u003cb\""),
        ("{\"b\":1,\"a\":[1, 2]}", "{\"a\":[1,2],\"b\":1}"),
        ("[1,2]", "[1,2]"),
        ("true", "true"),
        ("null", "null"),
    ] {
        c.send_raw(request_line(id, "server.ping", None, TOKEN).as_bytes());
        assert_eq!(
            c.recv_line(),
            format!(r#"{{"jsonrpc":"2.0","id":{echoed},"result":{{"pong":true}}}}"#)
        );
    }
    c.send_raw(format!("{{\"jsonrpc\":\"2.0\",\"method\":\"server.ping\",\"auth\":\"{TOKEN}\"}}\n").as_bytes());
    assert_eq!(c.recv_line(), r#"{"jsonrpc":"2.0","id":null,"result":{"pong":true}}"#);
    c.send_raw(
        format!("{{\"JSONRPC\":\"2.0\",\"ID\":5,\"METHOD\":\"server.ping\",\"AUTH\":\"{TOKEN}\"}}\n").as_bytes(),
    );
    assert_eq!(c.recv_line(), r#"{"jsonrpc":"2.0","id":5,"result":{"pong":true}}"#);
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1e400,\"method\":\"server.ping\"}\n");
    assert_eq!(c.recv_line(), err("null", -32700, "Parse error"));
}

#[test]
fn pipelined_requests_all_answered() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let mut batch = String::new();
    for i in 0..2000 {
        batch.push_str(&request_line(&i.to_string(), "server.ping", None, TOKEN));
    }
    c.send_raw(batch.as_bytes());
    let mut seen = vec![false; 2000];
    for _ in 0..2000 {
        let line = c.recv_line();
        let id: usize = line
            .strip_prefix("{\"jsonrpc\":\"2.0\",\"id\":")
            .and_then(|r| r.split(',').next())
            .and_then(|n| n.parse().ok())
            .expect("id");
        assert!(!seen[id]);
        seen[id] = true;
    }
    assert!(seen.iter().all(|s| *s));
}

/// The reader answers short instant requests itself and hands longer
/// lines to a task (`dispatch::INSTANT_LINE_MAX`, 4096 bytes); the bytes
/// on the wire must not depend on which side of that limit a line falls.
#[test]
fn replies_do_not_depend_on_the_instant_line_limit() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let line_of = |len: usize, auth: &str| {
        let head = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"server.ping\",\"auth\":\"{auth}\",\"params\":{{\"pad\":\""
        );
        let tail = "\"}}";
        format!("{head}{}{tail}\n", "x".repeat(len - head.len() - tail.len()))
    };
    for len in [4000, 4096, 4097, 9000] {
        let ping = line_of(len, TOKEN);
        assert_eq!(ping.len() - 1, len);
        c.send_raw(ping.as_bytes());
        assert_eq!(
            c.recv_line(),
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"pong\":true}}",
            "{len}"
        );
        c.send_raw(line_of(len, "wrong").as_bytes());
        assert_eq!(
            c.recv_line(),
            err("7", -32001, "Unauthorized: invalid or missing auth token"),
            "{len}"
        );
        let garbage = format!("{{{}\n", "y".repeat(len - 1));
        c.send_raw(garbage.as_bytes());
        assert_eq!(c.recv_line(), err("null", -32700, "Parse error"), "{len}");
    }
}

#[test]
fn half_closed_client_still_gets_its_replies() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    c.send_raw(request_line("1", "server.ping", None, TOKEN).as_bytes());
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(
        c.read_to_eof(),
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"pong\":true}}\n"
    );
}

/// `.changeset/eof-parse-error-bridge-drain.md` (measured on f6010b97 and
/// 90fca6e6): a client that half-closes right after a bad line, with or
/// without its final newline, still gets the -32700 or -32001 answer.
#[test]
fn a_bad_line_or_wrong_token_right_before_a_half_close_is_answered() {
    let d = TestDaemon::start();
    let cases: [(&[u8], String); 4] = [
        (b"{bad", err("null", -32700, "Parse error")),
        (b"{bad\n", err("null", -32700, "Parse error")),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"server.ping\",\"auth\":\"wrong\"}",
            err("7", -32001, "Unauthorized: invalid or missing auth token"),
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"server.ping\",\"auth\":\"wrong\"}\n",
            err("7", -32001, "Unauthorized: invalid or missing auth token"),
        ),
    ];
    for (line, answer) in cases {
        let mut c = d.connect();
        c.send_raw(line);
        c.stream.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(
            c.read_to_eof(),
            format!("{answer}\n"),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn shutdown_with_bad_auth_is_rejected_and_daemon_stays_up() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.shutdown\",\"auth\":\"nope\"}\n");
    assert_eq!(
        c.recv_line(),
        err("1", -32001, "Unauthorized: invalid or missing auth token")
    );
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"server.shutdown\"}\n");
    assert_eq!(
        c.recv_line(),
        err("2", -32001, "Unauthorized: invalid or missing auth token")
    );
    assert_eq!(
        c.call(3, "server.ping", "{}"),
        r#"{"jsonrpc":"2.0","id":3,"result":{"pong":true}}"#
    );
    assert!(d.socket.exists());
}

#[test]
fn shutdown_with_valid_auth_closes_without_reply_and_removes_socket() {
    let mut d = TestDaemon::start();
    let mut other = d.connect();
    let mut c = d.connect();
    c.send_raw(request_line("1", "server.shutdown", None, TOKEN).as_bytes());
    assert_eq!(c.read_to_eof(), "");
    assert_eq!(other.read_to_eof(), "");
    assert!(common::wait_until(std::time::Duration::from_secs(10), || !d
        .socket
        .exists()));
    assert!(Client::try_connect(&d.socket).is_none());
    d.stop();
}

#[test]
fn socket_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let d = TestDaemon::start();
    let mode = std::fs::metadata(&d.socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
}
