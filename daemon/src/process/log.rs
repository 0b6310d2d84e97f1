//! The replay log of one managed process: every stream frame it produced,
//! stored once as raw bytes for the life of the process.
//!
//! Subscribers are not queues. A connection that follows a process keeps a
//! cursor (the last seq it wrote) and pulls frames from the log at its own
//! pace, encoding base64 as it writes; the log only wakes it. So the child's
//! pipe reader never waits for any client, a stalled client delays nobody
//! else, and a subscriber costs one entry in `subscribers`, not a copy of
//! the output.
//!
//! Seq numbers start at 1 and are the frame's index + 1; stdout, stderr and
//! exit share one sequence.

use base64::Engine;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// Which pipe a data frame came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// What the `exit` frame says: `exitCode`, then (build 4534d86) the
/// terminating signal's name and who asked for the kill, both omitted
/// when absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitFrame {
    pub code: i64,
    pub signal: Option<&'static str>,
    pub killed_by: Option<&'static str>,
}

impl ExitFrame {
    /// A normal exit: only `exitCode`.
    pub fn code(code: i64) -> Self {
        ExitFrame {
            code,
            signal: None,
            killed_by: None,
        }
    }
}

#[derive(Debug, Clone)]
enum Frame {
    Data(Stream, Arc<[u8]>),
    Exit(ExitFrame),
}

/// A connection's registration with a log: who to wake on new frames.
struct Subscriber {
    conn: u64,
    wake: Arc<Notify>,
}

struct LogState {
    frames: Vec<Frame>,
    raw_bytes: u64,
    subscribers: Vec<Subscriber>,
    /// Set when the process id was reused: no more delivery from this log.
    detached: bool,
}

/// Append-only frame log of one process.
pub struct ReplayLog {
    key: u64,
    /// `{"type":"stream","processId":"<id>","stream":"` — shared by every frame.
    frame_prefix: Vec<u8>,
    state: Mutex<LogState>,
}

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

impl std::fmt::Debug for ReplayLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayLog")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl ReplayLog {
    pub fn new(process_id: &str) -> Arc<ReplayLog> {
        let mut frame_prefix = br#"{"type":"stream","processId":"#.to_vec();
        crate::gojson::write_go_string(&mut frame_prefix, process_id);
        frame_prefix.extend_from_slice(br#","stream":""#);
        Arc::new(ReplayLog {
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            frame_prefix,
            state: Mutex::new(LogState {
                frames: Vec::new(),
                raw_bytes: 0,
                subscribers: Vec::new(),
                detached: false,
            }),
        })
    }

    /// Identity of this log (a reused process id gets a new log).
    pub fn key(&self) -> u64 {
        self.key
    }

    fn lock(&self) -> MutexGuard<'_, LogState> {
        // A panic while holding the lock cannot leave the log inconsistent
        // (every mutation is a single push or field store), so recover.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn append(&self, frame: Frame) -> u64 {
        let mut state = self.lock();
        if let Frame::Data(_, data) = &frame {
            state.raw_bytes += data.len() as u64;
        }
        state.frames.push(frame);
        for s in &state.subscribers {
            s.wake.notify_one();
        }
        state.frames.len() as u64
    }

    /// Appends one read of stdout or stderr; returns its seq. Empty reads
    /// are not frames and return the current last seq.
    pub fn push_output(&self, stream: Stream, data: &[u8]) -> u64 {
        if data.is_empty() {
            return self.last_seq();
        }
        self.append(Frame::Data(stream, Arc::from(data)))
    }

    /// Appends the exit frame; returns its seq.
    pub fn push_exit(&self, exit: ExitFrame) -> u64 {
        self.append(Frame::Exit(exit))
    }

    /// Seq of the newest frame, 0 if none.
    pub fn last_seq(&self) -> u64 {
        self.lock().frames.len() as u64
    }

    /// Seq of the oldest retained frame, 0 if none (the log keeps
    /// everything, so this is 1 once anything was written).
    pub fn first_seq(&self) -> u64 {
        u64::from(!self.lock().frames.is_empty())
    }

    /// Total stdout+stderr bytes retained.
    pub fn raw_bytes(&self) -> u64 {
        self.lock().raw_bytes
    }

    /// Whether the exit frame has been appended.
    pub fn has_exited(&self) -> bool {
        matches!(self.lock().frames.last(), Some(Frame::Exit(_)))
    }

    pub fn is_detached(&self) -> bool {
        self.lock().detached
    }

    /// Registers a connection to be woken on new frames. Returns false if
    /// the log was detached (its process id has been reused).
    pub fn subscribe(&self, conn: u64, wake: Arc<Notify>) -> bool {
        let mut state = self.lock();
        if state.detached {
            return false;
        }
        if !state.subscribers.iter().any(|s| s.conn == conn) {
            state.subscribers.push(Subscriber { conn, wake });
        }
        true
    }

    pub fn unsubscribe(&self, conn: u64) {
        self.lock().subscribers.retain(|s| s.conn != conn);
    }

    /// Number of subscribed connections.
    pub fn subscriber_count(&self) -> usize {
        self.lock().subscribers.len()
    }

    /// Drops every subscriber and stops all further delivery (used when a
    /// live process id is reused, before the old tree is torn down).
    pub fn detach_all(&self) {
        let mut state = self.lock();
        state.detached = true;
        for s in state.subscribers.drain(..) {
            s.wake.notify_one();
        }
    }

    /// Encodes frames with seq in `after+1 ..= upto` (capped at the newest)
    /// as NDJSON lines into `out`, stopping once about `budget` raw bytes
    /// were taken. Returns the seq of the last frame written (== `after` if
    /// none). Encoding happens outside the lock.
    pub fn encode_after(&self, after: u64, upto: u64, out: &mut Vec<u8>, budget: usize) -> u64 {
        let mut batch: Vec<Frame> = Vec::new();
        {
            let state = self.lock();
            let end = (state.frames.len() as u64).min(upto);
            let mut taken = 0usize;
            let mut seq = after;
            while seq < end && (taken < budget || batch.is_empty()) {
                let frame = &state.frames[seq as usize];
                if let Frame::Data(_, data) = frame {
                    taken += data.len();
                }
                batch.push(frame.clone());
                seq += 1;
            }
        }
        let mut seq = after;
        for frame in &batch {
            seq += 1;
            self.encode_frame(seq, frame, out);
        }
        seq
    }

    fn encode_frame(&self, seq: u64, frame: &Frame, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.frame_prefix);
        match frame {
            Frame::Data(stream, data) => {
                out.extend_from_slice(stream.name().as_bytes());
                out.extend_from_slice(br#"","seq":"#);
                out.extend_from_slice(seq.to_string().as_bytes());
                out.extend_from_slice(br#","data":""#);
                let engine = &base64::engine::general_purpose::STANDARD;
                let start = out.len();
                out.resize(start + base64::encoded_len(data.len(), true).unwrap_or(0), 0);
                let written = engine.encode_slice(data, &mut out[start..]).unwrap_or(0);
                out.truncate(start + written);
                out.extend_from_slice(b"\"}\n");
            }
            Frame::Exit(exit) => {
                out.extend_from_slice(br#"exit","seq":"#);
                out.extend_from_slice(seq.to_string().as_bytes());
                out.extend_from_slice(br#","exitCode":"#);
                out.extend_from_slice(exit.code.to_string().as_bytes());
                // Both values are fixed ASCII names: no escaping needed.
                if let Some(signal) = exit.signal {
                    out.extend_from_slice(br#","signal":""#);
                    out.extend_from_slice(signal.as_bytes());
                    out.push(b'"');
                }
                if let Some(by) = exit.killed_by {
                    out.extend_from_slice(br#","killedBy":""#);
                    out.extend_from_slice(by.as_bytes());
                    out.push(b'"');
                }
                out.extend_from_slice(b"}\n");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode_all(log: &ReplayLog, after: u64) -> String {
        let mut out = Vec::new();
        log.encode_after(after, u64::MAX, &mut out, usize::MAX);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn frames_are_encoded_byte_exact() {
        let log = ReplayLog::new("p<1>");
        assert_eq!(log.push_output(Stream::Stdout, b"hi\n"), 1);
        assert_eq!(log.push_output(Stream::Stderr, b"\xff"), 2);
        let killed = ExitFrame {
            code: -1,
            signal: Some("SIGTERM"),
            killed_by: Some("client"),
        };
        assert_eq!(log.push_exit(killed), 3);
        assert_eq!(
            encode_all(&log, 0),
            concat!(
                "{\"type\":\"stream\",\"processId\":\"p\\u003c1\\u003e\",\"stream\":\"stdout\",\"seq\":1,\"data\":\"aGkK\"}\n",
                "{\"type\":\"stream\",\"processId\":\"p\\u003c1\\u003e\",\"stream\":\"stderr\",\"seq\":2,\"data\":\"/w==\"}\n",
                "{\"type\":\"stream\",\"processId\":\"p\\u003c1\\u003e\",\"stream\":\"exit\",\"seq\":3,\"exitCode\":-1,\"signal\":\"SIGTERM\",\"killedBy\":\"client\"}\n",
            )
        );
        assert_eq!(encode_all(&log, 2).lines().count(), 1);
        assert_eq!(encode_all(&log, 3), "");
        assert_eq!((log.first_seq(), log.last_seq(), log.raw_bytes()), (1, 3, 4));
        assert!(log.has_exited());
    }

    #[test]
    fn exit_frame_fields_are_each_omitted_when_absent() {
        let exit_line = |exit| {
            let log = ReplayLog::new("p");
            log.push_exit(exit);
            encode_all(&log, 0)
        };
        let prefix = "{\"type\":\"stream\",\"processId\":\"p\",\"stream\":\"exit\",\"seq\":1,";
        assert_eq!(exit_line(ExitFrame::code(3)), format!("{prefix}\"exitCode\":3}}\n"));
        let signal_only = ExitFrame {
            code: -1,
            signal: Some("SIGKILL"),
            killed_by: None,
        };
        assert_eq!(
            exit_line(signal_only),
            format!("{prefix}\"exitCode\":-1,\"signal\":\"SIGKILL\"}}\n")
        );
        let by_only = ExitFrame {
            code: 0,
            signal: None,
            killed_by: Some("shutdown"),
        };
        assert_eq!(
            exit_line(by_only),
            format!("{prefix}\"exitCode\":0,\"killedBy\":\"shutdown\"}}\n")
        );
    }

    #[test]
    fn cursor_respects_upto_and_budget() {
        let log = ReplayLog::new("p");
        for _ in 0..10 {
            log.push_output(Stream::Stdout, &[b'x'; 100]);
        }
        let mut out = Vec::new();
        assert_eq!(log.encode_after(0, 4, &mut out, usize::MAX), 4);
        assert_eq!(log.encode_after(4, u64::MAX, &mut out, 250), 7);
        // A budget of zero still makes progress by one frame.
        assert_eq!(log.encode_after(7, u64::MAX, &mut out, 0), 8);
        assert_eq!(log.encode_after(8, u64::MAX, &mut out, usize::MAX), 10);
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 10);
    }

    #[test]
    fn detach_stops_subscriptions() {
        let log = ReplayLog::new("p");
        let wake = Arc::new(Notify::new());
        assert!(log.subscribe(7, wake.clone()));
        assert!(log.subscribe(7, wake.clone()));
        assert_eq!(log.subscriber_count(), 1);
        log.detach_all();
        assert_eq!(log.subscriber_count(), 0);
        assert!(!log.subscribe(8, wake));
        assert!(log.is_detached());
    }
}
