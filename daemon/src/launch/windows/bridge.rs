//! `-bridge` on Windows: the stdio↔daemon relay of `launch/bridge.rs`,
//! with the one dial rule `-bridge` and `-stop` share ([`dial`]): the
//! AF_UNIX socket at `-socket`, as the reference dials; where that fails
//! (Wine 8 and Windows before 1803 have no AF_UNIX: `WSAEAFNOSUPPORT`; or
//! a daemon that serves only its pipe) the named pipe that `rpc.pipe`
//! beside the socket names (`-listen-pipe`, clauster's convention).
//!
//! Over the socket it is the Unix bridge: stdin's EOF half-closes the
//! socket and replies flow until the daemon closes. A named pipe has no
//! half-close, so over the pipe stdin's EOF starts a drain instead: the
//! relay goes on until every request line sent has had its answer (one
//! per non-empty line, stream frames aside: the daemon's framing rule),
//! the daemon closes, or [`DRAIN_LIMIT`] passes; then the pipe is closed.
//! Exit codes and messages are the Unix bridge's: 1 with `remora: dial
//! server: …` when nothing answers, else 0.

use crate::sys::dial::{connect_unix, DialStep, Pipe};
use std::fs::File;
use std::io::{self, Read, Write};
use std::mem::ManuallyDrop;
use std::net::{Shutdown, TcpStream};
use std::os::windows::io::FromRawHandle;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use windows_sys::Win32::System::Console::{GetStdHandle, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE};

/// The file beside the socket naming the daemon's pipe (clauster 1.3.2's
/// `_pipe_name_path`: `<socket dir>/rpc.pipe`, the name in UTF-8,
/// surrounding white space ignored, empty meaning none).
pub(crate) const PIPE_FILE: &str = "rpc.pipe";

/// How long the pipe drain waits, after stdin ended, for the answers
/// still owed (the bound `-stop` also gives a daemon to answer).
pub(crate) const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// A connection to the daemon.
pub(crate) enum Conn {
    Socket(TcpStream),
    Pipe(Pipe),
}

/// `rpc.pipe` beside `socket`.
pub(crate) fn pipe_file(socket: &Path) -> PathBuf {
    // `with_file_name` keeps the socket's directory, `.` for a bare name.
    socket.with_file_name(PIPE_FILE)
}

/// The pipe name `rpc.pipe` beside `socket` holds: `Ok(None)` when there
/// is no such file or it is empty.
fn read_pipe_file(socket: &Path) -> Result<Option<String>, String> {
    let path = pipe_file(socket);
    crate::sys::dial::read_pipe_name(&path)
        .map_err(|e| format!("read {}: {}", path.display(), crate::base::goerr::io_text(&e)))
}

/// Dials the daemon of `socket`: the AF_UNIX socket first; when that
/// fails, the pipe `rpc.pipe` names. `Err` is the message after
/// `remora: dial server: ` (Go's `dial unix …` text, then what the pipe
/// said when there was one to try).
pub(crate) fn dial(socket: &Path) -> Result<Conn, String> {
    let (step, error) = match connect_unix(socket) {
        Ok(s) => return Ok(Conn::Socket(s)),
        Err(e) => e,
    };
    let unix = format!(
        "dial unix {}: {}: {}",
        socket.display(),
        step.word(),
        crate::base::goerr::io_text(&error)
    );
    let name = match read_pipe_file(socket) {
        Ok(Some(name)) => name,
        Ok(None) => {
            return Err(match step {
                // No AF_UNIX here at all: the pipe is the only way in.
                DialStep::Socket => format!(
                    "{unix} (no {} beside the socket: start the daemon with -listen-pipe)",
                    PIPE_FILE
                ),
                DialStep::Connect => unix,
            });
        }
        Err(why) => return Err(format!("{unix}; {why}")),
    };
    match Pipe::open(&name) {
        Ok(p) => Ok(Conn::Pipe(p)),
        Err(e) => Err(format!(
            "{unix}; {} names the pipe {name}, which does not answer ({}): a stale {}, left by a daemon that has ended?",
            pipe_file(socket).display(),
            crate::base::goerr::io_text(&e),
            PIPE_FILE
        )),
    }
}

/// Unbuffered access to an inherited standard handle, not ours to close.
fn std_handle(which: u32) -> ManuallyDrop<File> {
    // SAFETY: GetStdHandle returns the process's handle (or null/invalid,
    // on which every read or write fails, which the relay takes as the end).
    ManuallyDrop::new(unsafe { File::from_raw_handle(GetStdHandle(which)) })
}

/// The tally, also after a thread panicked holding it (nothing in it
/// can be left half-updated).
fn lock(m: &Mutex<Tally>) -> std::sync::MutexGuard<'_, Tally> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts, on the pipe, the request lines sent and the answers received,
/// for the drain: a daemon answers every line that is not empty once one
/// trailing CR is dropped, and sends nothing else but stream frames.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) sent: usize,
    pub(crate) answered: usize,
    /// stdin has ended: the drain runs.
    pub(crate) draining: bool,
    open_len: usize,
    open_ends_in_cr: bool,
    /// The first bytes of the line being received.
    head: Vec<u8>,
    head_len: usize,
}

/// How a stream frame starts: the daemon writes `type` first.
const FRAME_HEAD: &[u8] = br#"{"type":"stream""#;

impl Tally {
    pub(crate) fn observe_sent(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                if self.open_len > usize::from(self.open_ends_in_cr) {
                    self.sent += 1;
                }
                self.open_len = 0;
                self.open_ends_in_cr = false;
            } else {
                self.open_len += 1;
                self.open_ends_in_cr = b == b'\r';
            }
        }
    }

    pub(crate) fn observe_received(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                if !(self.head_len >= FRAME_HEAD.len() && self.head == FRAME_HEAD) {
                    self.answered += 1;
                }
                self.head.clear();
                self.head_len = 0;
            } else {
                if self.head.len() < FRAME_HEAD.len() {
                    self.head.push(b);
                }
                self.head_len += 1;
            }
        }
    }

    /// The drain is over: stdin ended and every line sent is answered.
    pub(crate) fn settled(&self) -> bool {
        self.draining && self.answered >= self.sent
    }
}

/// `-bridge`: relays stdin to the daemon and the daemon to stdout, byte
/// for byte, injecting nothing.
pub(crate) fn bridge(socket: &Path) -> i32 {
    let conn = match dial(socket) {
        Ok(c) => Arc::new(c),
        Err(message) => {
            eprintln!("remora: dial server: {message}");
            return 1;
        }
    };
    let tally = Arc::new((Mutex::new(Tally::default()), Condvar::new()));
    let up = (conn.clone(), tally.clone());
    std::thread::spawn(move || {
        let (conn, tally) = up;
        let mut stdin = std_handle(STD_INPUT_HANDLE);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // A closed stdin handle reads as broken pipe on Windows.
                Err(_) => break,
            };
            if let Conn::Pipe(_) = &*conn {
                lock(&tally.0).observe_sent(&buf[..n]);
            }
            let written = match &*conn {
                Conn::Socket(s) => (&*s).write_all(&buf[..n]),
                Conn::Pipe(p) => (&*p).write_all(&buf[..n]),
            };
            if written.is_err() {
                break;
            }
        }
        match &*conn {
            // EOF on stdin: no more requests; the daemon answers what is
            // in flight, then closes.
            Conn::Socket(s) => {
                let _ = s.shutdown(Shutdown::Write);
            }
            Conn::Pipe(p) => {
                let (m, cv) = &*tally;
                let mut t = lock(m);
                t.draining = true;
                let _ = cv
                    .wait_timeout_while(t, DRAIN_LIMIT, |t| !t.settled())
                    .map(|(t, _)| drop(t));
                p.stop();
            }
        }
    });
    let mut stdout = std_handle(STD_OUTPUT_HANDLE);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match &*conn {
            Conn::Socket(s) => (&*s).read(&mut buf),
            Conn::Pipe(p) => (&*p).read(&mut buf),
        };
        let n = match n {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if stdout.write_all(&buf[..n]).is_err() {
            break;
        }
        if let Conn::Pipe(p) = &*conn {
            let (m, cv) = &*tally;
            let mut t = lock(m);
            t.observe_received(&buf[..n]);
            if t.settled() {
                p.stop();
            }
            cv.notify_all();
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drain_counts_answers_not_frames() {
        let mut t = Tally::default();
        t.observe_sent(b"{\"id\":1}\n\n\r\n{\"id\"");
        assert_eq!(t.sent, 1);
        t.observe_sent(b":2}\n");
        t.draining = true;
        assert!(!t.settled());
        t.observe_received(b"{\"type\":\"stream\",\"seq\":1}\n{\"jsonrpc\":\"2.0\",\"id\":1}\n{\"type\":\"str");
        assert_eq!(t.answered, 1);
        t.observe_received(b"eam\"}\n{\"id\"");
        assert_eq!(t.answered, 1, "a frame split across reads is still a frame");
        assert!(!t.settled());
        t.observe_received(b":2}\n");
        assert!(t.settled());
    }

    #[test]
    fn rpc_pipe_sits_beside_the_socket() {
        assert_eq!(pipe_file(Path::new(r"C:\u\rpc.sock")), Path::new(r"C:\u\rpc.pipe"));
        assert_eq!(pipe_file(Path::new("rpc.sock")), Path::new("rpc.pipe"));
    }
}
