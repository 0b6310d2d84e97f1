//! Bounded memory against a real daemon and real children: stdin
//! backpressure (-32002), bounded in-flight bytes per connection, replay
//! logs spilled to disk and read back from every region, eviction under a
//! disk budget, the stale-directory sweep, the RAM fallback, and the
//! retention drop of exited processes.

mod common;

use base64::Engine;
#[allow(unused_imports)]
use common::{wait_until, Client, TestDaemon};
use serde_json::Value;
#[allow(unused_imports)]
use std::time::{Duration, Instant};

/// One stream notification, parsed.
#[derive(Debug, Clone)]
struct Frame {
    stream: String,
    seq: u64,
    data: Vec<u8>,
}

fn parse_frame(line: &str) -> Option<(String, Frame)> {
    let v: Value = serde_json::from_str(line).ok()?;
    if v.get("type")?.as_str()? != "stream" {
        return None;
    }
    let data = v
        .get("data")
        .and_then(Value::as_str)
        .map(|d| b64d(d))
        .unwrap_or_default();
    Some((
        v["processId"].as_str()?.to_string(),
        Frame {
            stream: v["stream"].as_str()?.to_string(),
            seq: v["seq"].as_u64()?,
            data,
        },
    ))
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn b64d(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(text).expect("base64")
}

fn next_line(c: &mut Client) -> String {
    if !c.backlog.is_empty() {
        return c.backlog.remove(0);
    }
    c.recv_line()
}

/// Frames of process `id` up to and including its exit frame; other lines
/// stay in the backlog.
fn frames_until_exit(c: &mut Client, id: &str) -> Vec<Frame> {
    let mut frames = Vec::new();
    let mut kept = Vec::new();
    loop {
        let line = next_line(c);
        match parse_frame(&line) {
            Some((pid, frame)) if pid == id => {
                let done = frame.stream == "exit";
                frames.push(frame);
                if done {
                    break;
                }
            }
            _ => kept.push(line),
        }
    }
    kept.append(&mut c.backlog);
    c.backlog = kept;
    frames
}

fn stdout_of(frames: &[Frame]) -> Vec<u8> {
    frames
        .iter()
        .filter(|f| f.stream == "stdout")
        .flat_map(|f| f.data.clone())
        .collect()
}

fn assert_seq_contiguous(frames: &[Frame], first: u64) {
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.seq, first + i as u64, "seq gap or duplicate at index {i}");
    }
}

fn result_of(reply: &str) -> Value {
    let v: Value = serde_json::from_str(reply).expect("reply json");
    v["result"].clone()
}

/// Deterministic, non-repeating test bytes.
fn pattern(len: usize, salt: u8) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9 ^ u32::from(salt);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// A child that stops reading stdin gets -32002 once its queue holds
/// 16 MiB, with `applied` unchanged; once it reads again, resending from
/// `applied` delivers every byte exactly once, in order.
#[test]
fn stdin_backpressure_then_resend_from_applied() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let reply = c.call(1, "process.spawn", r#"{"id":"cat","command":"cat","wantPid":true}"#);
    let pid = result_of(&reply)["pid"].as_i64().expect("pid") as i32;
    // SAFETY: signalling our own test child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);

    const CHUNK: usize = 512 * 1024;
    let stream = pattern(24 << 20, 7);
    let mut applied = 0usize;
    let mut rid = 10u64;
    let mut refused_at = None;
    while applied < stream.len() {
        let end = (applied + CHUNK).min(stream.len());
        rid += 1;
        let params = format!(
            r#"{{"id":"cat","data":"{}","offset":{applied}}}"#,
            b64(&stream[applied..end])
        );
        let reply = c.call(rid, "process.stdin", &params);
        if reply.contains("\"error\"") {
            assert_eq!(
                reply,
                format!(
                    r#"{{"jsonrpc":"2.0","id":{rid},"error":{{"code":-32002,"message":"stdin backpressure: queue full"}}}}"#
                )
            );
            refused_at = Some(applied);
            break;
        }
        applied = result_of(&reply)["applied"].as_u64().unwrap() as usize;
        assert_eq!(applied, end);
    }
    let refused_at = refused_at.expect("a stopped child must hit the cap");
    // The queue holds at most 16 MiB, the pipe at most a few hundred KiB.
    assert!(
        refused_at >= 16 << 20 && refused_at <= (16 << 20) + (1 << 20),
        "{refused_at}"
    );
    let reply = c.call(2, "process.reattach", r#"{"id":"cat","fromSeq":0}"#);
    assert_eq!(
        result_of(&reply)["stdinApplied"].as_u64(),
        Some(refused_at as u64),
        "a refused write leaves applied unchanged"
    );

    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    while applied < stream.len() {
        let end = (applied + CHUNK).min(stream.len());
        rid += 1;
        let params = format!(
            r#"{{"id":"cat","data":"{}","offset":{applied}}}"#,
            b64(&stream[applied..end])
        );
        let reply = c.call(rid, "process.stdin", &params);
        if reply.contains("-32002") {
            // The child is still draining: retry the same bytes.
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        applied = result_of(&reply)["applied"].as_u64().unwrap() as usize;
    }
    // Resending an already-applied chunk is a duplicate, not a second copy.
    let reply = c.call(
        3,
        "process.stdin",
        &format!(r#"{{"id":"cat","data":"{}","offset":0}}"#, b64(&stream[..CHUNK])),
    );
    assert!(reply.contains(r#""duplicate":true"#), "{reply}");
    let mut echoed = Vec::new();
    while echoed.len() < stream.len() {
        let line = next_line(&mut c);
        if let Some((_, frame)) = parse_frame(&line) {
            assert_eq!(frame.stream, "stdout");
            echoed.extend_from_slice(&frame.data);
        }
    }
    assert!(echoed == stream, "every byte once, in order");
    let reply = c.call(4, "process.kill", r#"{"id":"cat"}"#);
    assert!(reply.contains("success"), "{reply}");
}
