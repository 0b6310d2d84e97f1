//! Why a daemon under test could not be started or reached.

use std::fmt;
use std::io;

/// A daemon that did not start, or a connection that could not be made.
#[derive(Debug)]
pub enum Error {
    /// The private directory or the `home/` inside it.
    Dir(io::Error),
    /// The token file could not be written.
    Token(io::Error),
    /// The log file could not be created.
    Log(io::Error),
    /// The binary could not be started.
    Spawn(io::Error),
    /// The launcher printed no banner, or the socket never appeared.
    NotStarted { banner: String, log_tail: String },
    /// Connecting to the daemon's socket failed.
    Connect(io::Error),
    /// The daemon closed the connection before the line was complete.
    Closed,
    /// Reading from the daemon failed.
    Read(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Dir(e) | Error::Connect(e) | Error::Read(e) => write!(f, "{e}"),
            Error::Closed => f.write_str("connection closed"),
            Error::Token(e) => write!(f, "cannot write token: {e}"),
            Error::Log(e) => write!(f, "cannot create log: {e}"),
            Error::Spawn(e) => write!(f, "spawn failed: {e}"),
            Error::NotStarted { banner, log_tail } => {
                write!(f, "daemon did not start (banner {banner:?}; log: {log_tail})")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Dir(e) | Error::Token(e) | Error::Log(e) | Error::Spawn(e) | Error::Connect(e) | Error::Read(e) => {
                Some(e)
            }
            Error::NotStarted { .. } | Error::Closed => None,
        }
    }
}
