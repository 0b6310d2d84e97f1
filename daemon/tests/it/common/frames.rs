//! Stream frames as tests read them: parsed notifications, and reading a
//! connection up to one process's exit frame while other lines wait in the
//! client's backlog.

use super::{Client, TestDaemon};
use base64::Engine;
use serde_json::Value;

/// One stream notification, parsed.
#[derive(Debug, Clone)]
pub struct Frame {
    pub raw: String,
    pub stream: String,
    pub seq: u64,
    pub data: Vec<u8>,
    pub exit_code: Option<i64>,
}

pub fn parse_frame(line: &str) -> Option<(String, Frame)> {
    let v: Value = serde_json::from_str(line).ok()?;
    if v.get("type")?.as_str()? != "stream" {
        return None;
    }
    let data = v
        .get("data")
        .and_then(Value::as_str)
        .map(|d| {
            base64::engine::general_purpose::STANDARD
                .decode(d)
                .expect("frame base64")
        })
        .unwrap_or_default();
    Some((
        v["processId"].as_str()?.to_string(),
        Frame {
            raw: line.to_string(),
            stream: v["stream"].as_str()?.to_string(),
            seq: v["seq"].as_u64()?,
            data,
            exit_code: v.get("exitCode").and_then(Value::as_i64),
        },
    ))
}

/// Next line: backlog first, then the socket.
pub fn next_line(c: &mut Client) -> String {
    if !c.backlog.is_empty() {
        return c.backlog.remove(0);
    }
    c.recv_line()
}

/// Frames of process `id` up to and including its exit frame. Other lines
/// (replies, other processes) are kept in the backlog.
pub fn frames_until_exit(c: &mut Client, id: &str) -> Vec<Frame> {
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

/// The stdout bytes of `frames`, reassembled.
pub fn stdout_of(frames: &[Frame]) -> Vec<u8> {
    frames
        .iter()
        .filter(|f| f.stream == "stdout")
        .flat_map(|f| f.data.clone())
        .collect()
}

/// `process.reattach` of `id` from `from_seq` on a fresh connection: the
/// reply's result and the frames of `id` replayed before it.
pub fn reattach(d: &TestDaemon, id: &str, from_seq: u64) -> (Value, Vec<Frame>) {
    let mut c = d.connect();
    let reply = c.call(
        1,
        "process.reattach",
        &format!(r#"{{"id":"{id}","fromSeq":{from_seq}}}"#),
    );
    let frames = c
        .backlog
        .iter()
        .filter_map(|l| parse_frame(l))
        .filter(|(p, _)| p == id)
        .map(|(_, f)| f)
        .collect();
    let reply: Value = serde_json::from_str(&reply).expect("reply json");
    (reply["result"].clone(), frames)
}
