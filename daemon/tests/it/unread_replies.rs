//! Connections without the token that send requests and never read a
//! reply. None of them may hold a place, or a slot among the connections
//! told to make room, for good: the daemon never waits on such a
//! connection's replies (`serve/connection.rs`), so at the connection cap
//! the owner is still served (`serve/admission.rs`).

use crate::common::{self, TestDaemon};
use std::io::{BufRead, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// 144 descriptors: the connection cap is its floor, 16.
const FD_LIMIT: u64 = 144;
const CAP: usize = 16;
/// Connections told to make room that may still be closing while new ones
/// take their places (`LEAVING_MAX`): past this many, admission waits for
/// one of them to close.
const LEAVING_MAX: usize = 32;

/// What one connection without the token writes before it stops.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// 2 MB of lines that do not parse, each answered with a -32700 line
    /// about 40 times its size: the replies outgrow the socket and the
    /// connection's reply queue (1024) many times over, and the lines
    /// outgrow what the sockets buffer, so the write ends only when the
    /// daemon closes the connection.
    Flood,
    /// 100 pings with a wrong token and an id of 1000 `<`, each answered
    /// with a -32001 line echoing the id as Go writes it (`\u003c` for
    /// each `<`, 6 KB), then a half-close: about 600 KB of replies, more
    /// than twice what the socket takes (212 KB by default), in far fewer
    /// replies than the queue holds. The daemon has read everything and
    /// only has replies left to write.
    HalfClose,
}

impl Kind {
    fn payload(self) -> Vec<u8> {
        match self {
            Kind::Flood => b"x\n".repeat(1_000_000),
            Kind::HalfClose => {
                let id = "<".repeat(1000);
                format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"method\":\"server.ping\",\"auth\":\"wrong\"}}\n")
                    .repeat(100)
                    .into_bytes()
            }
        }
    }
}

/// Writes `payload` on `s` (half-closing after it for [`Kind::HalfClose`])
/// and hands the stream back, with whether the daemon took it all, once
/// it did or closed the connection; never reads. A write the daemon stops
/// taking blocks here, and nothing is handed back.
fn write_and_report(
    mut s: UnixStream,
    kind: Kind,
    payload: std::sync::Arc<Vec<u8>>,
    report: mpsc::Sender<(Kind, bool, UnixStream)>,
) {
    let taken = s.write_all(&payload).is_ok();
    if taken && matches!(kind, Kind::HalfClose) {
        let _ = s.shutdown(Shutdown::Write);
    }
    let _ = report.send((kind, taken, s));
}

/// Whether the daemon wrote to `s` or closed it within `limit`, seen
/// without reading (a read would make room for more replies).
fn answered_or_closed(s: &UnixStream, limit: Duration) -> bool {
    let mut ready = libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(s),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(limit.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: poll reads and writes the one pollfd we pass.
    let n = unsafe { libc::poll(&mut ready, 1, ms) };
    n == 1 && ready.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
}

/// A new connection that pings with the token: the reply line, or how it
/// failed within `limit`.
fn owner_ping(socket: &std::path::Path, limit: Duration) -> String {
    let attempt = || -> std::io::Result<String> {
        let mut s = UnixStream::connect(socket)?;
        s.set_read_timeout(Some(limit))?;
        s.write_all(common::request_line("1", "server.ping", None, common::TOKEN).as_bytes())?;
        let mut line = String::new();
        std::io::BufReader::new(s).read_line(&mut line)?;
        Ok(match line.is_empty() {
            true => "closed without a reply".to_string(),
            false => line.trim_end().to_string(),
        })
    };
    attempt().unwrap_or_else(|e| format!("failed: {e}"))
}

/// The finding: such a connection's reader waited for room in its reply
/// queue, where neither its eviction nor its grace reached it, and once
/// its last request was read its close waited for the writer the same way.
/// Evicted at the cap, it stayed among the connections told to make room;
/// after 32 of them, admission waited for good and the owner was locked
/// out. Here 24 flooders and 56 half-closers, one process's connections
/// (so each newcomer takes the place of another at once), pass through a
/// cap of 16, and the owner pings after them.
#[test]
fn connections_that_never_read_their_replies_cannot_lock_the_owner_out() {
    let d = TestDaemon::start_with_fd_limit(FD_LIMIT, &[]);
    let kinds: Vec<Kind> = (0..80)
        .map(|i| {
            if matches!(i % 10, 0 | 3 | 6) {
                Kind::Flood
            } else {
                Kind::HalfClose
            }
        })
        .collect();
    let half_closers = kinds.iter().filter(|k| matches!(k, Kind::HalfClose)).count();
    assert!(half_closers > CAP + LEAVING_MAX, "enough to be evicted past the window");
    let flood = std::sync::Arc::new(Kind::Flood.payload());
    let half = std::sync::Arc::new(Kind::HalfClose.payload());
    let (report, reports) = mpsc::channel();
    // One connect after another, each writing from a thread of its own;
    // the next one connects once this one was answered or closed, so the
    // daemon meets them one at a time (as it would a process that is
    // slower than it), never a backlog. A connection neither answered nor
    // closed means the daemon stopped accepting: the owner then comes at
    // once.
    let mut connected = 0;
    for kind in &kinds {
        let s = UnixStream::connect(&d.socket).unwrap();
        let watch = s.try_clone().unwrap();
        let payload = match kind {
            Kind::Flood => flood.clone(),
            Kind::HalfClose => half.clone(),
        };
        let (kind, report) = (*kind, report.clone());
        std::thread::spawn(move || write_and_report(s, kind, payload, report));
        connected += 1;
        if !answered_or_closed(&watch, Duration::from_secs(20)) {
            break;
        }
    }
    drop(report);
    // Every writer ends once the daemon took its bytes or closed the
    // connection. The bound only limits a hang: a daemon that waits on a
    // connection that does not read leaves writers blocked.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut held = Vec::new();
    while held.len() < connected {
        let left = deadline.saturating_duration_since(Instant::now());
        match reports.recv_timeout(left) {
            Ok(done) => held.push(done),
            Err(_) => break,
        }
    }
    let ended = held.len();
    // The owner, while the half-closers that kept a place hold it.
    let reply = owner_ping(&d.socket, Duration::from_secs(20));
    assert!(
        reply.contains(r#""pong":true"#),
        "the owner is locked out ({reply}); {connected} of {} connected, {ended} writers ended",
        kinds.len()
    );
    assert_eq!(connected, kinds.len(), "the daemon stopped accepting");
    assert_eq!(ended, connected, "writers blocked on a daemon that stopped reading");
    // Every flooder was closed, by its queue filling up or by an
    // eviction: none was read to the end of its 2 MB.
    let read_through = held
        .iter()
        .filter(|(k, taken, _)| matches!(k, Kind::Flood) && *taken)
        .count();
    assert_eq!(read_through, 0, "flooders that never read were read to their end");
    drop(held);
}

/// A reply echoes its request's id as Go writes it, so a line of 1 MB of
/// `<` asks for a reply of 6 MB (`\u003c` each). A connection that sent
/// such lines and never read had 1024 replies queued before anything
/// stopped it: gigabytes. The replies of all connections without the
/// token waiting to be written share 32 MiB, and the connection whose
/// next reply does not fit is closed: after about six such lines here
/// (the socket takes less than one reply).
#[test]
fn unread_replies_without_the_token_share_one_budget() {
    let d = TestDaemon::start();
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"{}\",\"method\":\"server.ping\",\"auth\":\"wrong\"}}\n",
        "<".repeat(1_000_000)
    );
    let mut s = UnixStream::connect(&d.socket).unwrap();
    let writer = std::thread::spawn(move || {
        let mut sent = 0;
        while sent < 40 && s.write_all(line.as_bytes()).is_ok() {
            sent += 1;
        }
        (sent, s)
    });
    // The writer ends when a write fails, the daemon having closed the
    // connection, or after 40 lines (which the grace of 30 s would close
    // in the end).
    let (sent, _s) = writer.join().unwrap();
    // Six lines' replies pass the budget; one more line may sit in the
    // socket, and one be written while the daemon closes.
    assert!(sent <= 8, "{sent} lines of 1 MB were taken before the close");
    let log = d.log();
    assert!(
        log.contains("replies waiting to be read on all such connections reach 32 MiB"),
        "{log}"
    );
}
