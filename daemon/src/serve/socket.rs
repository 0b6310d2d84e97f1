//! The owner-only Unix socket the daemon listens on: the path's length
//! check, the bind (mode `0600` from the start, a stale socket replaced,
//! a live one left alone), and what the accept loop
//! ([`crate::serve::server`]) asks of it and of each connection: the
//! peer's pid, a first line already waiting, more connections waiting.
//! The Windows half (`windows/socket.rs`) adds the named pipe.

use crate::serve::listener::{Accepted, Listener};
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixListener as StdUnixListener;
use std::path::Path;
use tokio::net::UnixStream;

/// What [`bind_socket`] made: the listening socket, not yet registered
/// with a runtime ([`listen`] does that).
pub(crate) type Bound = StdUnixListener;

pub(crate) use crate::serve::listener::{check_socket_path_length, BindError};

/// Creates the listening socket at `path`, mode 0600 from the moment it
/// exists (the file is created under a 0177 umask, so there is no
/// bind-then-chmod window). A stale socket left by a dead daemon is
/// replaced; a live daemon's socket is left alone and reported as in use.
///
/// Call this before starting any threads: the umask is process-wide.
pub(crate) fn bind_socket(path: &Path) -> Result<Bound, BindError> {
    let fail = |source| BindError {
        path: path.to_path_buf(),
        source,
    };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(fail(io::Error::from_raw_os_error(libc::EADDRINUSE)));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(fail(io::Error::from_raw_os_error(libc::EADDRINUSE)));
        }
        // Nobody is listening: a stale socket from a dead daemon.
        let _ = std::fs::remove_file(path);
    }
    // SAFETY: umask only swaps the process file-creation mask.
    let previous = unsafe { libc::umask(0o177) };
    let bound = StdUnixListener::bind(path);
    // SAFETY: as above; this restores the mask saved before the bind.
    unsafe { libc::umask(previous) };
    let listener = bound.map_err(fail)?;
    listener.set_nonblocking(true).map_err(fail)?;
    Ok(listener)
}

/// The process at the other end of an accepted connection.
fn peer_of(stream: &UnixStream) -> Option<i32> {
    crate::sys::os::peer_pid(std::os::fd::AsRawFd::as_raw_fd(stream))
}

/// How far [`has_a_line_waiting`] looks: a first request of a client
/// (Desktop's is `server.capabilities`) fits many times over.
const FIRST_LINE_PEEK: usize = 4096;

/// Whether the accepted connection `fd` has a whole line waiting in its
/// first [`FIRST_LINE_PEEK`] bytes: a client that already wrote its first
/// request, not a partial line or silence.
fn has_a_line_waiting(fd: std::os::fd::RawFd) -> bool {
    let mut head = [0u8; FIRST_LINE_PEEK];
    // SAFETY: recv writes at most `head.len()` bytes into `head`; MSG_PEEK
    // leaves them in the socket and MSG_DONTWAIT never blocks.
    let n = unsafe {
        libc::recv(
            fd,
            head.as_mut_ptr().cast(),
            head.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    usize::try_from(n).is_ok_and(|n| head[..n.min(head.len())].contains(&b'\n'))
}

/// Whether another connection waits in the listen backlog of `fd`.
fn has_connections_waiting(fd: std::os::fd::RawFd) -> bool {
    let mut ready = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll reads and writes the one pollfd we pass; a zero
    // timeout never blocks.
    let n = unsafe { libc::poll(&mut ready, 1, 0) };
    n > 0 && ready.revents & libc::POLLIN != 0
}

/// The bound socket, registered with the runtime.
pub(crate) struct SocketListener(tokio::net::UnixListener);

/// Registers the bound socket with the runtime.
pub(crate) fn listen(bound: Bound) -> io::Result<SocketListener> {
    tokio::net::UnixListener::from_std(bound).map(SocketListener)
}

impl Listener for SocketListener {
    type Connection = UnixStream;

    async fn accept(&mut self) -> io::Result<UnixStream> {
        self.0.accept().await.map(|(stream, _)| stream)
    }

    fn has_connections_waiting(&self) -> bool {
        has_connections_waiting(std::os::fd::AsRawFd::as_raw_fd(&self.0))
    }
}

impl Accepted for UnixStream {
    type Read = tokio::net::unix::OwnedReadHalf;
    type Write = tokio::net::unix::OwnedWriteHalf;

    fn peer(&self) -> Option<i32> {
        peer_of(self)
    }

    fn has_a_line_waiting(&self) -> bool {
        has_a_line_waiting(std::os::fd::AsRawFd::as_raw_fd(self))
    }

    fn into_halves(self) -> (Self::Read, Self::Write) {
        self.into_split()
    }
}

/// Whether dialling `path` reaches this very process (the orphan check's
/// self-probe, `serve::orphan`): the peer's pid is ours.
pub(crate) async fn reaches_self(path: &Path) -> bool {
    let dial = tokio::time::timeout(std::time::Duration::from_secs(5), UnixStream::connect(path));
    match dial.await {
        Ok(Ok(stream)) => stream
            .peer_cred()
            .ok()
            .and_then(|c| c.pid())
            .is_some_and(|pid| pid as u32 == std::process::id()),
        _ => false,
    }
}
