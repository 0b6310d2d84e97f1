//! `-bridge`: a dumb stdio↔socket relay, what an SSH session attaches to
//! (`-stop` lives in [`crate::launch::stop`]).
//!
//! A plain blocking program: it owns one connection and exits when it
//! ends, so threads and blocking I/O are simpler than a runtime. It never
//! injects, logs or prints a token.

use std::fs::File;
use std::io::{self, Read, Write};
use std::mem::ManuallyDrop;
use std::net::Shutdown;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Go's `net.Dial("unix", path)` error text.
fn dial_error(socket: &Path, e: &io::Error) -> String {
    format!(
        "dial unix {}: connect: {}",
        socket.display(),
        crate::base::goerr::io_text(e)
    )
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
pub(crate) fn bridge(socket: &Path) -> i32 {
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
            eprintln!("remora: bridge: {}", crate::base::goerr::io_text(&e));
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
