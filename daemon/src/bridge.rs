//! The two client modes: `-bridge` (a dumb stdio↔socket relay, what an SSH
//! session attaches to) and `-stop` (ask a running daemon to shut down).
//!
//! Both are plain blocking programs: they own one connection and exit when
//! it ends, so threads and blocking I/O are simpler than a runtime.
//! Neither ever logs or prints the token.

use std::fs::File;
use std::io::{self, Read, Write};
use std::mem::ManuallyDrop;
use std::net::Shutdown;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long `-stop` waits for the daemon to close the connection.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Go's `net.Dial("unix", path)` error text.
fn dial_error(socket: &Path, e: &io::Error) -> String {
    format!("dial unix {}: connect: {}", socket.display(), crate::goerr::io_text(e))
}

/// Unbuffered access to an inherited standard descriptor. `ManuallyDrop`
/// because the descriptor is not ours to close; Rust's own `Stdin`/`Stdout`
/// are avoided since their buffering would delay or merge relayed bytes.
fn raw_fd(fd: i32) -> ManuallyDrop<File> {
    // SAFETY: 0 and 1 are open for the life of the process (or reads and
    // writes on them fail with EBADF, which the relay treats as the end).
    ManuallyDrop::new(unsafe { File::from_raw_fd(fd) })
}

/// `-bridge`: relays stdin to the socket and the socket to stdout, byte for
/// byte, injecting nothing. Stdin's EOF half-closes the socket's write
/// side, and replies keep flowing until the daemon closes, so the answer
/// to a last request is not lost. The daemon closing ends the relay.
pub fn bridge(socket: &Path) -> i32 {
    let stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("remora: dial server: {}", dial_error(socket, &e));
            return 1;
        }
    };
    let upstream = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("remora: bridge: {}", crate::goerr::io_text(&e));
            return 1;
        }
    };
    std::thread::spawn(move || {
        let mut upstream = upstream;
        let mut stdin = raw_fd(0);
        let _ = pump(&mut *stdin, &mut upstream);
        // EOF on stdin (or a dead socket): tell the daemon no more
        // requests are coming; it answers what is in flight, then closes.
        let _ = upstream.shutdown(Shutdown::Write);
    });
    let mut downstream = stream;
    let mut stdout = raw_fd(1);
    // The relay's end is the daemon closing (or our reader going away);
    // either way there is nothing left to report.
    let _ = pump(&mut downstream, &mut *stdout);
    0
}

/// Copies until EOF or an error, writing each chunk as soon as it arrives.
fn pump(from: &mut impl Read, to: &mut impl Write) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
    }
}

/// `-stop`: sends an authenticated `server.shutdown` (auth from
/// `CLAUDE_RPC_TOKEN`), waits for the daemon to close the connection and,
/// when it accepted, for the daemon process to exit (10 s at most).
/// A missing or unreachable daemon is a silent success. Whatever a live
/// daemon answers (a -32001 for a wrong token) is echoed to stdout.
pub fn stop(socket: &Path) -> i32 {
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return 0;
    };
    let token = std::env::var_os("CLAUDE_RPC_TOKEN").unwrap_or_default();
    let mut line = br#"{"jsonrpc":"2.0","id":1,"method":"server.shutdown","auth":"#.to_vec();
    crate::gojson::write_go_string(&mut line, &crate::gojson::go_lossy(token.as_bytes()));
    line.extend_from_slice(b"}\n");
    if stream.write_all(&line).is_err() {
        return 0;
    }
    // Half-close: a daemon that rejects the request answers and then
    // closes at once, instead of waiting for more requests.
    let _ = stream.shutdown(Shutdown::Write);
    let started = Instant::now();
    let daemon = peer_pid(&stream);
    let _ = stream.set_read_timeout(Some(STOP_TIMEOUT));
    let mut answered = false;
    let mut stdout = raw_fd(1);
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answered = true;
                if stdout.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return 0,
        }
    }
    // No answer means the daemon accepted the shutdown. It closes client
    // connections first and finishes teardown (children, socket file)
    // after; wait for the process to end so that `-stop` returning means
    // the daemon is gone, e.g. before a restart.
    if let (false, Some(pid)) = (answered, daemon) {
        while process_alive(pid) && started.elapsed() < STOP_TIMEOUT {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    0
}

/// The pid at the other end of a Unix socket.
fn peer_pid(stream: &UnixStream) -> Option<i32> {
    crate::os::peer_pid(stream.as_raw_fd())
}

/// Running (on Linux a zombie waiting for its reaper counts as ended).
fn process_alive(pid: i32) -> bool {
    crate::os::process_alive(pid)
}
