//! What the accept loop (`serve::server`) asks of where connections come
//! from ([`Listener`]) and of each connection before it is admitted
//! ([`Accepted`]), so that it serves the Unix socket and, on Windows, the
//! named pipe alike (`serve::socket` and its Windows half implement
//! them).

use std::future::Future;
use std::io;
use tokio::io::{AsyncRead, AsyncWrite};

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
