//! Target `dispatch_line`: whole request lines, with and without the
//! token, through the connection's dispatch path and the log at debug
//! level.
//!
//! The input is read as a recipe ([`arbitrary::Unstructured`]), not as the
//! line itself: a few bytes choose an envelope whose members (in any
//! order, case-folded or repeated) hold values built to hurt — nesting far
//! past Go's 10 000 levels in the id, params, method or auth position, long
//! strings of control characters, line and paragraph separators and
//! invalid UTF-8 — and sometimes a line of raw bytes. Nesting and length
//! are described by a number, so the deep and long cases cost a few input
//! bytes while most lines stay short and fast.
//!
//! Each line goes the way the connection's reader sends it, through
//! [`Dispatcher::on_line`] (the quick path takes pings only here: it leaves
//! stdin calls, which have effects, to the full path in this mode), with
//! the connection's warning quota and its unauthenticated → authenticated
//! switch; a request task is awaited in place. Handlers with effects (files, git, process) stop after the
//! params gate ([`Handlers::WithoutSideEffects`]); `plugins.prune` runs,
//! and does nothing, because the daemon's socket path is not run-shaped.
//!
//! Properties: nothing panics or overflows the stack; every reply is one
//! line the Go-compatible parser reads, an object starting with
//! `"jsonrpc":"2.0"` with exactly one of `result` and `error`, whose id is
//! the request's id as Go would decode and re-encode it (`null` for a line
//! that does not decode); only `server.shutdown` goes unanswered; and
//! every log line is one line, bounded, without a raw control character.

use crate::base::gojson::{self, Value};
use crate::base::logging;
use crate::base::ndjson::MAX_LINE;
use crate::protocol::method::{Method, ServerMethod};
use crate::protocol::rpc::{self, Checked, Envelope};
use crate::serve::dispatch::{Dispatcher, Handlers, Reply, Step};
use crate::serve::state::{Daemon, Options};
use arbitrary::{Result, Unstructured};
use std::sync::{Arc, OnceLock};

const TOKEN: &str = "fuzz-token";

/// Lines one input sends on one connection; more than the connection's
/// unauthorized-warning quota (5), so the quota is reached.
const MAX_LINES: usize = 8;

/// Nesting depth of the generated values' own structure (the deep values
/// are written without recursion, whatever their depth).
const SHAPE_DEPTH: u8 = 4;

/// The longest log line any request may cause: the unauthorized warning
/// with a capped method and id is about 2.5 KiB.
const LOG_LINE_MAX: usize = 8192;

/// Keys the envelope and the params structs bind, and case variants the
/// Go decoder folds onto them.
const KEYS: &[&str] = &[
    "jsonrpc",
    "id",
    "method",
    "params",
    "auth",
    "ID",
    "Id",
    "AUTH",
    "Auth",
    "METHOD",
    "Params",
    "JSONRPC",
    "path",
    "command",
    "args",
    "cwd",
    "env",
    "id",
    "data",
    "offset",
    "maxBytes",
    "fromSeq",
    "signal",
    "archivePath",
    "destDir",
    "branchName",
    "worktreePath",
    "timeoutMs",
    "keep",
    "minAgeDays",
    "\u{212a}eep",
];

/// Escapes and characters long strings are made of: what log escaping and
/// Go's string encoder must handle.
const PIECES: &[&str] = &[
    "a",
    "\\n",
    "\\r",
    "\\t",
    "\\u0000",
    "\\u001b[31m",
    "\\u007f",
    "\\u0085",
    "\\u2028",
    "\\u2029",
    "é",
    "\\\"",
    "\\\\",
    "<>&",
    "\\ud800",
    "\\udc00x",
    "\u{10ffff}",
    "%v",
    "\\/",
    " ",
];

/// Target `dispatch_line`.
pub fn dispatch_line(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut lines = Vec::new();
    while lines.len() < MAX_LINES && !u.is_empty() {
        let Ok(line) = request_line(&mut u) else {
            break;
        };
        lines.push(line);
    }
    let ((), log) = logging::capture::lines(|| run_connection(&lines));
    for line in &log {
        check_log_line(line);
    }
}

/// The shared daemon state the lines are dispatched against: the token,
/// RAM-only replay, a socket path outside any run directory.
fn daemon() -> &'static (tokio::runtime::Runtime, Arc<Daemon>) {
    static DAEMON: OnceLock<(tokio::runtime::Runtime, Arc<Daemon>)> = OnceLock::new();
    DAEMON.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime");
        let daemon = {
            let _entered = runtime.enter();
            Daemon::with_instance(
                TOKEN.as_bytes().to_vec(),
                Options::default(),
                crate::base::instance::Instance::new(),
            )
        };
        (runtime, daemon)
    })
}

/// Sends `lines` as the connection's reader does and checks each reply.
fn run_connection(lines: &[Vec<u8>]) {
    let (runtime, daemon) = daemon();
    logging::set_threshold(logging::Level::Debug);
    let dispatcher = Dispatcher::new(daemon.clone(), 5, Handlers::WithoutSideEffects);
    let mut authenticated = false;
    runtime.block_on(async {
        for line in lines {
            // What framing leaves of it: no `\n`, one trailing `\r` gone.
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() || line.len() >= MAX_LINE {
                continue;
            }
            // Whether no reply is right: the oracle decodes the line
            // itself (a panic here is a finding too).
            let shutdown = is_shutdown(&rpc::check(line, TOKEN.as_bytes(), crate::protocol::build::NEWEST));
            let dispatched = dispatcher.on_line(line, authenticated).await;
            authenticated |= dispatched.authenticates;
            let reply = match dispatched.step {
                Step::Reply(reply) => Some(reply),
                Step::Task(task) => task.await,
                Step::Skip => None,
            };
            check_reply(line, reply, !shutdown);
        }
    });
}

fn is_shutdown(checked: &Checked) -> bool {
    matches!(checked, Checked::Valid(r) if r.method == Method::Server(ServerMethod::Shutdown))
}

/// The reply properties (see the module comment).
fn check_reply(line: &[u8], reply: Option<Reply>, must_answer: bool) {
    let Some(reply) = reply else {
        assert!(!must_answer, "no reply to {:?}", String::from_utf8_lossy(line));
        return;
    };
    let mut out = Vec::new();
    reply.write_line(&mut out);
    assert_eq!(out.last(), Some(&b'\n'), "reply without its newline");
    assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1, "reply of several lines");
    let parsed = gojson::parse(&out).expect("the reply parses");
    let Value::Object(members) = &parsed else {
        panic!("the reply is not an object");
    };
    assert_eq!(
        members.first(),
        Some(&("jsonrpc".to_string(), Value::String("2.0".into())))
    );
    assert_eq!(members.get(1).map(|(k, _)| k.as_str()), Some("id"));
    assert_eq!(members.len(), 3, "reply members");
    let (outcome, body) = &members[2];
    assert!(outcome == "result" || outcome == "error", "reply member {outcome}");
    if outcome == "error" {
        let Value::Object(error) = body else {
            panic!("error is not an object");
        };
        assert!(
            matches!(error.as_slice(), [(c, Value::Number(_)), (m, Value::String(_))] if c == "code" && m == "message")
        );
    }
    let sent_id = gojson::parse(line)
        .ok()
        .and_then(|value| Envelope::from_go_value(&value).ok())
        .map(|envelope| envelope.id)
        .unwrap_or(Value::Null);
    assert!(
        go_equal(&sent_id, &members[1].1),
        "the reply's id is not the request's: {:?}",
        String::from_utf8_lossy(&out)
    );
}

/// Whether two decoded values are the same Go `interface{}`: numbers as
/// float64, objects as maps (the last of repeated keys wins, order does not
/// count). Iterative, as the values may nest 10 000 deep.
fn go_equal(a: &Value, b: &Value) -> bool {
    let mut pending = vec![(a, b)];
    while let Some((a, b)) = pending.pop() {
        match (a, b) {
            (Value::Null, Value::Null) => {}
            (Value::Bool(x), Value::Bool(y)) if x == y => {}
            (Value::String(x), Value::String(y)) if x == y => {}
            (Value::Number(x), Value::Number(y)) => {
                let (Ok(x), Ok(y)) = (x.parse::<f64>(), y.parse::<f64>()) else {
                    return false;
                };
                if x != y {
                    return false;
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => pending.extend(x.iter().zip(y)),
            (Value::Object(x), Value::Object(y)) => {
                let (x, y) = (as_go_map(x), as_go_map(y));
                if x.len() != y.len() {
                    return false;
                }
                for ((kx, vx), (ky, vy)) in x.into_iter().zip(y) {
                    if kx != ky {
                        return false;
                    }
                    pending.push((vx, vy));
                }
            }
            _ => return false,
        }
    }
    true
}

fn as_go_map(members: &[(String, Value)]) -> std::collections::BTreeMap<&str, &Value> {
    members.iter().map(|(k, v)| (k.as_str(), v)).collect()
}

/// One log line: a single line, bounded, nothing a terminal or a log
/// reader would take as a control (the escapes are printable).
fn check_log_line(line: &str) {
    let body = line.strip_suffix('\n').expect("a log line ends with its newline");
    assert!(line.len() <= LOG_LINE_MAX, "a log line of {} bytes", line.len());
    assert!(
        !body
            .chars()
            .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}'),
        "a raw control character in a log line: {body:?}"
    );
    assert!(!body.contains("panicked"), "a handler panicked: {body}");
}

/// One request line: mostly an envelope, sometimes raw bytes.
fn request_line(u: &mut Unstructured) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    if u.ratio(1, 8)? {
        let raw: &[u8] = u.arbitrary()?;
        out.extend(raw.iter().copied().filter(|&b| b != b'\n'));
        return Ok(out);
    }
    out.push(b'{');
    let mut first = true;
    let mut member = |u: &mut Unstructured,
                      out: &mut Vec<u8>,
                      key: &str,
                      value: fn(&mut Unstructured, &mut Vec<u8>) -> Result<()>|
     -> Result<()> {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        write_string_literal(out, key);
        out.push(b':');
        value(u, out)
    };
    if u.ratio(7, 8)? {
        member(u, &mut out, "jsonrpc", |u, out| {
            if u.ratio(7, 8)? {
                out.extend_from_slice(b"\"2.0\"");
                Ok(())
            } else {
                value(u, out, SHAPE_DEPTH)
            }
        })?;
    }
    if u.ratio(7, 8)? {
        member(u, &mut out, "id", |u, out| value(u, out, SHAPE_DEPTH))?;
    }
    if u.ratio(7, 8)? {
        member(u, &mut out, "method", |u, out| {
            if u.ratio(3, 4)? {
                write_string_literal(out, u.choose(&rpc::METHODS)?);
                Ok(())
            } else {
                value(u, out, SHAPE_DEPTH)
            }
        })?;
    }
    if u.ratio(3, 4)? {
        member(u, &mut out, "params", |u, out| value(u, out, SHAPE_DEPTH))?;
    }
    if u.ratio(7, 8)? {
        member(u, &mut out, "auth", |u, out| {
            if u.ratio(1, 2)? {
                write_string_literal(out, TOKEN);
                Ok(())
            } else {
                value(u, out, SHAPE_DEPTH)
            }
        })?;
    }
    // Extra members: repeats, case variants, anything.
    for _ in 0..u.int_in_range(0..=3u8)? {
        let key = *u.choose(KEYS)?;
        member(u, &mut out, key, |u, out| value(u, out, SHAPE_DEPTH))?;
    }
    out.push(b'}');
    if u.ratio(1, 16)? {
        // A damaged line: cut, or with trailing bytes.
        let cut = u.int_in_range(0..=out.len())?;
        out.truncate(cut);
        let tail: &[u8] = u.arbitrary()?;
        out.extend(tail.iter().copied().filter(|&b| b != b'\n'));
    }
    Ok(out)
}

/// A JSON value (or, rarely, something almost JSON). `depth` bounds the
/// recursion of this generator; the deep values are written by count.
fn value(u: &mut Unstructured, out: &mut Vec<u8>, depth: u8) -> Result<()> {
    match u.int_in_range(0..=11u8)? {
        0 => out.extend_from_slice(b"null"),
        1 => out.extend_from_slice(if u.arbitrary()? { b"true" } else { b"false" }),
        2 => out.extend_from_slice(u.arbitrary::<i64>()?.to_string().as_bytes()),
        3 => out.extend_from_slice(
            u.choose(&[
                "1.0",
                "1e3",
                "-0",
                "1e400",
                "1E-7",
                "12345678901234567890",
                "0.1",
                "1e21",
                "01",
                "-",
                "1.",
                ".5",
                "1e+2",
                "9007199254740993",
            ])?
            .as_bytes(),
        ),
        4 | 5 => string(u, out)?,
        6 => deep(u, out)?,
        7 | 8 if depth > 0 => {
            out.push(b'[');
            for i in 0..u.int_in_range(0..=4u8)? {
                if i > 0 {
                    out.push(b',');
                }
                value(u, out, depth - 1)?;
            }
            out.push(b']');
        }
        9 | 10 if depth > 0 => {
            out.push(b'{');
            for i in 0..u.int_in_range(0..=4u8)? {
                if i > 0 {
                    out.push(b',');
                }
                if u.ratio(3, 4)? {
                    write_string_literal(out, u.choose(KEYS)?);
                } else {
                    string(u, out)?;
                }
                out.push(b':');
                value(u, out, depth - 1)?;
            }
            out.push(b'}');
        }
        _ => {
            // Raw bytes in a string: invalid UTF-8, raw controls.
            let raw: &[u8] = u.arbitrary()?;
            out.push(b'"');
            out.extend(raw.iter().copied().filter(|&b| b != b'\n' && b != b'"' && b != b'\\'));
            out.push(b'"');
        }
    }
    Ok(())
}

/// Arrays or objects nested `depth` deep around a small leaf, written in a
/// loop: mostly shallow, sometimes at Go's 10 000-level limit or 100 000
/// deep.
fn deep(u: &mut Unstructured, out: &mut Vec<u8>) -> Result<()> {
    let limit = gojson::value::MAX_DEPTH;
    // The deep cases are the slow ones (a 100 000-deep line is up to
    // 600 KB), so they are a few in 32.
    let depth = match u.int_in_range(0..=31u8)? {
        0 => u.int_in_range(100_000..=100_010)?,
        1..=3 => u.int_in_range(limit - 3..=limit + 3)?,
        _ => u.int_in_range(1..=300)?,
    };
    let objects = u.arbitrary::<bool>()?;
    let leaf = *u.choose(&["1", "\"\\n\"", "null", "[]", "{}"])?;
    for _ in 0..depth {
        out.extend_from_slice(if objects { b"{\"id\":" } else { b"[" });
    }
    out.extend_from_slice(leaf.as_bytes());
    out.extend(std::iter::repeat_n(if objects { b'}' } else { b']' }, depth));
    Ok(())
}

/// A JSON string: short text, or a long run of [`PIECES`], past the log's
/// 256-character cap and the 4 KiB instant-line bound.
fn string(u: &mut Unstructured, out: &mut Vec<u8>) -> Result<()> {
    if u.ratio(1, 2)? {
        let text: String = u.arbitrary()?;
        write_string_literal(out, &text);
        return Ok(());
    }
    let pieces: Vec<&str> = (0..u.int_in_range(1..=3u8)?)
        .map(|_| u.choose(PIECES).copied())
        .collect::<Result<_>>()?;
    let count = match u.int_in_range(0..=3u8)? {
        0 => u.int_in_range(0..=30_000usize)?,
        _ => u.int_in_range(0..=600usize)?,
    };
    out.push(b'"');
    for piece in pieces.iter().cycle().take(count) {
        out.extend_from_slice(piece.as_bytes());
    }
    out.push(b'"');
    Ok(())
}

/// `text` as a JSON string literal; control characters escaped so the
/// literal is valid (the raw-byte strings are what tests raw controls).
fn write_string_literal(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    for c in text.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            c if (c as u32) < 0x20 => out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes()),
            c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Vec<u8> {
        text.as_bytes().to_vec()
    }

    #[test]
    fn deep_and_long_lines_in_every_position_pass_the_checks() {
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        let at_limit = "{\"id\":".repeat(9_999) + "1" + &"}".repeat(9_999);
        let long = "\\u2028\\n".repeat(40_000);
        let mut lines = Vec::new();
        for auth in ["\"fuzz-token\"", "\"wrong\""] {
            for value in [&deep, &at_limit, &format!("\"{long}\"")] {
                lines.push(line(&format!(
                    r#"{{"jsonrpc":"2.0","id":{value},"method":"server.ping","auth":{auth}}}"#
                )));
                lines.push(line(&format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":{value},"auth":{auth}}}"#
                )));
                lines.push(line(&format!(
                    r#"{{"jsonrpc":"2.0","id":2,"method":"files.stat","params":{value},"auth":{auth}}}"#
                )));
                lines.push(line(&format!(
                    r#"{{"jsonrpc":"2.0","id":3,"method":"server.ping","auth":{value}}}"#
                )));
            }
        }
        let ((), log) = logging::capture::lines(|| run_connection(&lines));
        assert!(!log.is_empty(), "the unauthorized lines are logged");
        for entry in &log {
            check_log_line(entry);
        }
    }

    #[test]
    fn a_raw_control_character_in_a_log_line_fails_the_check() {
        let caught = std::panic::catch_unwind(|| check_log_line("2026/01/01 00:00:00 WARN  x\u{1b}y\n"));
        assert!(caught.is_err());
        let caught = std::panic::catch_unwind(|| check_log_line("a\nb\n"));
        assert!(caught.is_err());
    }

    #[test]
    fn ids_compare_as_go_decodes_them() {
        let v = |s: &str| gojson::parse(s.as_bytes()).expect("json");
        assert!(go_equal(&v("1.0"), &v("1")));
        assert!(go_equal(&v(r#"{"a":1,"b":2,"a":3}"#), &v(r#"{"b":2,"a":3}"#)));
        assert!(!go_equal(&v(r#"{"a":1,"b":2,"a":3}"#), &v(r#"{"a":1,"b":2}"#)));
        assert!(!go_equal(&v("[1,[2]]"), &v("[1,[3]]")));
        assert!(!go_equal(&v("\"1\""), &v("1")));
    }

    #[test]
    fn arbitrary_inputs_pass_the_checks() {
        // Any bytes make some lines; none panics.
        for seed in 0..200u32 {
            let data: Vec<u8> = (0..400u32)
                .map(|i| (i.wrapping_mul(2654435761) ^ seed.wrapping_mul(40503)) as u8)
                .collect();
            dispatch_line(&data);
        }
    }
}
