//! Why a stress scenario, or one of its steps, could not go on. Its text
//! is what the report shows beside the invariant it broke.

use crate::dut;
use serde_json::Value;
use std::fmt;
use std::io;

#[derive(Debug)]
pub enum Error {
    /// The daemon did not start.
    Daemon(dut::Error),
    /// The daemon started but none of its processes was found.
    NoDaemonProcess,
    /// An I/O error, with what was being done (`connect`, `write`, …;
    /// empty: the error alone).
    Io {
        doing: &'static str,
        source: io::Error,
    },
    /// The daemon closed the connection.
    Closed,
    /// A line that is neither a stream frame nor JSON (its first bytes).
    Unparsable {
        source: serde_json::Error,
        line: String,
    },
    /// A request id that is not JSON text (a scenario's own mistake).
    BadId(serde_json::Error),
    /// The daemon answered a request with an error.
    Refused {
        method: String,
        error: Value,
    },
    /// A client thread or process of the scenario panicked (`""`: a
    /// connection's own thread).
    Panicked(&'static str),
    /// A process's frames that do not make one whole stream.
    Stream(StreamFault),
    /// A ping connection that broke off or got something else, after
    /// `got` of its `want` replies (`line`: what it got instead).
    Pings {
        got: usize,
        want: usize,
        problem: PingProblem,
    },
    /// A re-executed client that never printed `ready`.
    NeverReady {
        args: Vec<String>,
        stderr: String,
    },
    /// What a scenario found, in its own words.
    Finding(String),
    /// `--only` names a scenario that does not exist.
    UnknownScenario {
        name: String,
        known: Vec<&'static str>,
    },
    /// `stress-client` without `--socket`.
    NoSocket,
    UnknownMode(String),
}

/// How a connection of pipelined pings went wrong.
#[derive(Debug)]
pub enum PingProblem {
    Closed,
    Read(io::Error),
    Unexpected(String),
}

/// How the frames one connection got for one process fail to make a
/// whole stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamFault {
    /// Anomalies seen while reading (seq gaps, bad base64, …).
    Seen(Vec<String>),
    FirstSeq(Option<i64>),
    NoExit,
    AfterExit(u64),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Daemon(e) => write!(f, "{e}"),
            Error::NoDaemonProcess => f.write_str("daemon process not found"),
            Error::Io { doing: "", source } => write!(f, "{source}"),
            Error::Io { doing, source } => write!(f, "{doing}: {source}"),
            Error::Closed => f.write_str("connection closed"),
            Error::Unparsable { source, line } => write!(f, "unparsable line ({source}): {line}"),
            Error::BadId(e) => write!(f, "{e}"),
            Error::Refused { method, error } => write!(f, "{method}: {error}"),
            Error::Panicked("") => f.write_str("panicked"),
            Error::Panicked(who) => write!(f, "{who} panicked"),
            Error::Stream(fault) => write!(f, "{fault}"),
            Error::Pings { got, want, problem } => match problem {
                PingProblem::Closed => write!(f, "connection closed after {got} of {want} replies"),
                PingProblem::Read(e) => write!(f, "after {got} of {want} replies: {e}"),
                PingProblem::Unexpected(line) => write!(f, "unexpected line: {line}"),
            },
            Error::NeverReady { args, stderr } => write!(f, "client {args:?} never got ready: {stderr}"),
            Error::Finding(text) => f.write_str(text),
            Error::UnknownScenario { name, known } => {
                write!(f, "unknown scenario {name:?} (known: {})", known.join(", "))
            }
            Error::NoSocket => f.write_str("--socket is required"),
            Error::UnknownMode(m) => write!(f, "unknown mode {m:?}"),
        }
    }
}

impl fmt::Display for StreamFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamFault::Seen(faults) => f.write_str(&faults.join("; ")),
            StreamFault::FirstSeq(seq) => write!(f, "first seq {seq:?}, not 1"),
            StreamFault::NoExit => f.write_str("no exit frame"),
            StreamFault::AfterExit(n) => write!(f, "{n} frame(s) after the exit frame"),
        }
    }
}

impl std::error::Error for Error {}

impl From<dut::Error> for Error {
    fn from(e: dut::Error) -> Error {
        Error::Daemon(e)
    }
}

impl From<StreamFault> for Error {
    fn from(fault: StreamFault) -> Error {
        Error::Stream(fault)
    }
}

impl Error {
    /// An I/O error while `doing` something.
    pub fn io(doing: &'static str) -> impl Fn(io::Error) -> Error {
        move |source| Error::Io { doing, source }
    }

    /// A finding of the scenario, in its own words.
    pub fn finding(text: impl Into<String>) -> Error {
        Error::Finding(text.into())
    }
}

/// A plain I/O error (no context), as `?` converts it.
impl From<io::Error> for Error {
    fn from(source: io::Error) -> Error {
        Error::Io { doing: "", source }
    }
}
