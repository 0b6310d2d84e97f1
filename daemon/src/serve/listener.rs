//! What the accept loop (`serve::server`) asks of where connections come
//! from ([`Listener`]) and of each connection before it is admitted
//! ([`Accepted`]), so that it serves the Unix socket and, on Windows, the
//! named pipe alike (`serve::socket` and its Windows half implement
//! them).

use std::future::Future;
use std::io;
use tokio::io::{AsyncRead, AsyncWrite};

/// Why the socket could not be opened, phrased like Go's `net.Listen`
/// (both halves of `serve::socket` fail with it).
#[derive(Debug)]
pub(crate) struct BindError {
    pub path: std::path::PathBuf,
    pub source: io::Error,
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "listen unix: {}: bind: {}",
            self.path.display(),
            crate::base::goerr::io_text(&self.source)
        )
    }
}

impl std::error::Error for BindError {}

/// Refuses a socket path the OS cannot bind, before anything is created
/// for it: the kernel's own answer is a bare `invalid argument`. Counted
/// as given (a relative path is not made absolute by the kernel), in the
/// bytes `sun_path` holds (UTF-8 on Windows).
pub(crate) fn check_socket_path_length(path: &std::path::Path) -> Result<(), String> {
    use crate::sys::os::{SOCKET_PATH_MAX, SYSTEM_NAME};
    let len = path.as_os_str().as_encoded_bytes().len();
    if len <= SOCKET_PATH_MAX {
        return Ok(());
    }
    Err(format!(
        "remora: socket path too long: {} is {len} bytes, and a Unix socket path can have at most {SOCKET_PATH_MAX} bytes on {SYSTEM_NAME}; choose a shorter -socket",
        path.display()
    ))
}

/// An accepted connection, before it is admitted.
pub(crate) trait Accepted: Send + 'static {
    /// The halves [`crate::serve::connection::serve`] reads and writes.
    type Read: AsyncRead + Unpin + Send + 'static;
    type Write: AsyncWrite + Unpin + Send + 'static;
    /// The process at the other end, when the OS says.
    fn peer(&self) -> Option<i32>;
    /// Whether a whole line already waits in the first bytes: a client
    /// that wrote its first request, not a partial line or silence.
    fn has_a_line_waiting(&self) -> bool;
    /// Splits into the read and write halves.
    fn into_halves(self) -> (Self::Read, Self::Write);
}

/// Where connections come from.
pub(crate) trait Listener {
    type Connection: Accepted;
    /// The next connection.
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Connection>>;
    /// Whether another connection waits to be accepted.
    fn has_connections_waiting(&self) -> bool;
}
