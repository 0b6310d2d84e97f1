//! One connection's receiving side: a reader thread splits lines, keeps
//! replies for the awaits, and reassembles each process's stream frames
//! (bytes, seq runs, frame shapes, the exit frame).

use crate::base::sync::lock;
use base64::Engine;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Child;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// Values larger than this are recorded as length + hash.
pub(super) const INLINE_LIMIT: usize = 16 * 1024;
/// One reply (any non-stream line) received on a connection.
#[derive(Debug)]
pub(super) struct Reply {
    pub(super) id: Option<Value>,
    pub(super) raw: Vec<u8>,
    pub(super) at: Instant,
    pub(super) taken: bool,
}

/// The stream frames one connection received for one process.
#[derive(Debug, Default)]
pub(super) struct ProcStream {
    pub(super) stdout: Vec<u8>,
    pub(super) stderr: Vec<u8>,
    pub(super) seqs: Vec<i64>,
    pub(super) shapes: BTreeSet<Vec<u8>>,
    pub(super) exit: Option<Vec<u8>>,
    pub(super) frames: usize,
    pub(super) frames_after_exit: usize,
    pub(super) recorded_frames: Option<usize>,
    pub(super) bad: Vec<String>,
}

#[derive(Debug, Default)]
pub(super) struct ConnState {
    pub(super) replies: Vec<Reply>,
    pub(super) procs: BTreeMap<String, ProcStream>,
    pub(super) frames: usize,
    pub(super) eof: bool,
}

pub(super) type Shared = Arc<(Mutex<ConnState>, Condvar)>;

pub(super) struct Conn {
    pub(super) writer: Option<Box<dyn Write + Send>>,
    /// The request lines written so far (see [`SentLines`]).
    pub(super) sent: SentLines,
    pub(super) shared: Shared,
    pub(super) stream: Option<UnixStream>,
    pub(super) bridge: Option<Child>,
    pub(super) bridge_err: Option<std::thread::JoinHandle<Vec<u8>>>,
    /// Whether the probe asked for the bridge (`connect c bridge`), so its
    /// exit goes into the transcript; a bridged transport's own bridges
    /// stand for a socket and leave no trace.
    pub(super) record_bridge: bool,
}

/// Counts the lines written on a connection that a daemon answers: every
/// complete line that is not empty once one trailing CR is dropped gets
/// exactly one reply (a line of spaces gets a parse error; an empty line
/// nothing). The end-of-case barrier waits for that many replies: its own
/// ping is answered at once, while an earlier request may still be running
/// in its task.
#[derive(Debug, Default)]
pub(super) struct SentLines {
    pub(super) complete: usize,
    open_len: usize,
    open_ends_in_cr: bool,
}

impl SentLines {
    pub(super) fn observe(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                if self.open_len > usize::from(self.open_ends_in_cr) {
                    self.complete += 1;
                }
                self.open_len = 0;
                self.open_ends_in_cr = false;
            } else {
                self.open_len += 1;
                self.open_ends_in_cr = b == b'\r';
            }
        }
    }
}

/// Replaces `"seq":<n>` with `"seq":<seq>` and `"data":"…"` with `"data":<data>`.
pub(super) fn frame_shape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len().min(256));
    let mut i = 0;
    while i < raw.len() {
        if raw[i..].starts_with(b"\"seq\":") {
            out.extend_from_slice(b"\"seq\":<seq>");
            i += 6;
            while i < raw.len() && (raw[i].is_ascii_digit() || raw[i] == b'-') {
                i += 1;
            }
        } else if raw[i..].starts_with(b"\"data\":\"") {
            out.extend_from_slice(b"\"data\":<data>");
            i += 8;
            while i < raw.len() && raw[i] != b'"' {
                i += 1;
            }
            i += 1;
        } else {
            out.push(raw[i]);
            i += 1;
        }
    }
    out
}

pub(super) fn absorb_line(st: &mut ConnState, line: Vec<u8>) {
    let parsed: Option<Value> = serde_json::from_slice(&line).ok();
    if let Some(Value::Object(m)) = &parsed {
        if m.get("type").and_then(Value::as_str) == Some("stream") {
            st.frames += 1;
            let pid = m
                .get("processId")
                .map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))
                .unwrap_or_default();
            let ps = st.procs.entry(pid).or_default();
            ps.frames += 1;
            if ps.exit.is_some() {
                ps.frames_after_exit += 1;
            }
            match m.get("seq").and_then(Value::as_i64) {
                Some(s) => ps.seqs.push(s),
                None => ps.bad.push("frame without integer seq".into()),
            }
            let stream = m.get("stream").and_then(Value::as_str).unwrap_or("");
            match stream {
                "stdout" | "stderr" => {
                    let data = m.get("data").and_then(Value::as_str).unwrap_or("");
                    match base64::engine::general_purpose::STANDARD.decode(data) {
                        Ok(d) => {
                            if stream == "stdout" {
                                ps.stdout.extend(d)
                            } else {
                                ps.stderr.extend(d)
                            }
                        }
                        Err(e) => ps.bad.push(format!("bad base64 in data: {e}")),
                    }
                    ps.shapes.insert(frame_shape(&line));
                }
                "exit" => {
                    if ps.exit.is_some() {
                        ps.bad.push("second exit frame".into());
                    }
                    ps.exit = Some(frame_shape(&line));
                }
                other => {
                    ps.bad.push(format!("unknown stream {other:?}"));
                    ps.shapes.insert(frame_shape(&line));
                }
            }
            return;
        }
    }
    let id = match &parsed {
        Some(Value::Object(m)) => m.get("id").cloned(),
        _ => None,
    };
    st.replies.push(Reply {
        id,
        raw: line,
        at: Instant::now(),
        taken: false,
    });
}

pub(super) fn spawn_reader(mut r: impl Read + Send + 'static, shared: Shared) {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = match r.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            let mut lines = Vec::new();
            while let Some(pos) = buf.iter().position(|c| *c == b'\n') {
                let mut line: Vec<u8> = buf.drain(..=pos).collect();
                line.pop();
                lines.push(line);
            }
            if !lines.is_empty() {
                let (m, cv) = &*shared;
                let mut st = lock(m);
                for l in lines {
                    absorb_line(&mut st, l);
                }
                cv.notify_all();
            }
        }
        let (m, cv) = &*shared;
        let mut st = lock(m);
        if !buf.is_empty() {
            let mut l = std::mem::take(&mut buf);
            l.extend_from_slice(b"<no trailing newline>");
            absorb_line(&mut st, l);
        }
        st.eof = true;
        cv.notify_all();
    });
}

/// Whether a reply id equals the awaited one (numbers compare as f64).
pub(super) fn id_matches(want: &Value, got: &Option<Value>) -> bool {
    match (want, got) {
        (_, None) => false,
        (Value::Number(a), Some(Value::Number(b))) => a.as_f64() == b.as_f64(),
        (a, Some(b)) => a == b,
    }
}

pub(super) fn bounded(v: &[u8]) -> Vec<u8> {
    if v.len() <= INLINE_LIMIT {
        v.to_vec()
    } else {
        format!(
            "<{} bytes sha256:{}>",
            v.len(),
            crate::probe::fixture::describe_content(v)
        )
        .into_bytes()
    }
}

/// Describes seq runs: the starts of maximal +1 runs, e.g. `runs from 1`.
pub(super) fn seq_runs(seqs: &[i64]) -> String {
    if seqs.is_empty() {
        return "no frames".into();
    }
    let mut starts = vec![seqs[0]];
    for w in seqs.windows(2) {
        if w[1] != w[0] + 1 {
            starts.push(w[1]);
        }
    }
    let s: Vec<String> = starts.iter().map(|s| s.to_string()).collect();
    format!("runs from {}", s.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sent_lines_count_what_a_daemon_answers() {
        let mut sent = SentLines::default();
        sent.observe(b"{\"id\":1}\n\n\r\n");
        assert_eq!(sent.complete, 1, "empty lines (CR or not) get no count");
        sent.observe(b"{\"id\"");
        assert_eq!(sent.complete, 1, "an open line is not counted yet");
        sent.observe(b":2}\r\n{}\n   ");
        assert_eq!(sent.complete, 3);
        sent.observe(b"\n\t\n \r\n\r\r\n");
        assert_eq!(sent.complete, 7, "white space is content: a parse error answers it");
    }

    #[test]
    fn frames_reassemble_and_check_seq() {
        let mut st = ConnState::default();
        let f = |seq: i64, s: &str, d: &str| {
            format!(
                r#"{{"type":"stream","processId":"p1","stream":"{s}","seq":{seq},"data":"{}"}}"#,
                base64::engine::general_purpose::STANDARD.encode(d)
            )
            .into_bytes()
        };
        absorb_line(&mut st, f(1, "stdout", "hel"));
        absorb_line(&mut st, f(2, "stderr", "oops"));
        absorb_line(&mut st, f(3, "stdout", "lo"));
        absorb_line(
            &mut st,
            br#"{"type":"stream","processId":"p1","stream":"exit","seq":4,"exitCode":0}"#.to_vec(),
        );
        absorb_line(&mut st, br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec());
        let ps = &st.procs["p1"];
        assert_eq!(ps.stdout, b"hello");
        assert_eq!(ps.stderr, b"oops");
        assert_eq!(seq_runs(&ps.seqs), "runs from 1");
        assert_eq!(
            ps.exit.as_deref().unwrap(),
            br#"{"type":"stream","processId":"p1","stream":"exit","seq":<seq>,"exitCode":0}"#
        );
        assert_eq!(ps.shapes.len(), 2);
        assert_eq!(st.replies.len(), 1);
        assert_eq!(seq_runs(&[1, 2, 4, 5]), "runs from 1, 4");
        assert_eq!(seq_runs(&[1, 1, 2]), "runs from 1, 1");
    }

    #[test]
    fn stream_mutations_are_visible() {
        use crate::mutant::{mutate_line, Kind, MutState};
        let lines: Vec<Vec<u8>> = vec![
            br#"{"type":"stream","processId":"p1","stream":"stdout","seq":1,"data":"aGVsbG8K"}"#.to_vec(),
            br#"{"type":"stream","processId":"p1","stream":"exit","seq":2,"exitCode":0}"#.to_vec(),
        ];
        let feed = |kind: Kind| {
            let (mut st, mut ms) = (ConnState::default(), MutState::default());
            for l in &lines {
                for m in mutate_line(kind, l, &mut ms) {
                    absorb_line(&mut st, m);
                }
            }
            let ps = &st.procs["p1"];
            (ps.stdout.clone(), seq_runs(&ps.seqs))
        };
        let normal = feed(Kind::None);
        assert_eq!(normal, (b"hello\n".to_vec(), "runs from 1".to_string()));
        let dropped = feed(Kind::DropByte);
        assert_eq!(dropped.0, b"hello".to_vec());
        let extra = feed(Kind::ExtraFrame);
        assert_eq!(extra.1, "runs from 1, 1");
        assert_eq!(extra.0, b"hello\nhello\n".to_vec());
    }

    #[test]
    fn ids_match_numerically() {
        let v: Value = serde_json::from_str("1").unwrap();
        assert!(id_matches(&v, &Some(serde_json::from_str("1.0").unwrap())));
        assert!(!id_matches(&v, &Some(Value::String("1".into()))));
        assert!(id_matches(&Value::Null, &Some(Value::Null)));
        assert!(!id_matches(&Value::Null, &None));
    }
}
