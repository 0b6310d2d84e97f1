//! Why a probe could not be run (what the daemon did is never an error:
//! it goes into the transcript).

use crate::base::error::IoAt;
use crate::dut;
use crate::probe::fixture;
use std::fmt;
use std::io;
use std::path::PathBuf;

#[derive(Debug)]
pub enum Error {
    /// The run's temporary directory.
    TempDir(IoAt),
    /// `$ROOT` or `$HOME` inside it.
    Dir(io::Error),
    Fixture {
        probe: PathBuf,
        line: usize,
        source: fixture::Error,
    },
    /// A live daemon that did not start.
    Daemon(dut::Error),
    /// A live daemon that printed no banner or made no socket.
    NoBanner(PathBuf),
    /// A probe a live daemon cannot run, and why.
    Unsupported { probe: String, why: String },
    /// Emptying `$ROOT` or copying a fixture template of a live daemon.
    Template { doing: &'static str, source: io::Error },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::TempDir(e) => write!(f, "tempdir in {e}"),
            Error::Dir(e) => write!(f, "{e}"),
            Error::Fixture { probe, line, source } => write!(f, "{}:{line}: fixture: {source}", probe.display()),
            Error::Daemon(e) => write!(f, "{e}"),
            Error::NoBanner(bin) => write!(f, "{}: no banner or no socket at start", bin.display()),
            Error::Unsupported { probe, why } => write!(f, "{probe}: cannot run on a live daemon: {why}"),
            Error::Template { doing, source } => write!(f, "{doing}: {source}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<dut::Error> for Error {
    fn from(e: dut::Error) -> Error {
        Error::Daemon(e)
    }
}
