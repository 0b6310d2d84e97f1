//! Why a bench figure has no value: [`Unmeasured`] is what the table and
//! the JSON show in its place (`n/a: <reason>` for what a daemon lacks,
//! the failure itself otherwise), and [`StreamFault`] is how a stream
//! failed to reassemble to the bytes the child wrote.

use crate::dut;
use std::fmt;
use std::io;
use std::sync::Arc;

/// Why a figure is missing. Cheap to clone: one failure stands in every
/// figure it stopped.
#[derive(Debug, Clone)]
pub(crate) enum Unmeasured {
    /// No step yielded the figure.
    NotMeasured,
    /// No round has a value and the first kept no reason.
    NoValue,
    /// The daemon's pid was not found.
    NoPid,
    /// The RSS sampler never read the daemon's memory.
    NoPeak,
    /// The daemon's CPU time was not readable.
    NoCpu,
    NoRss,
    NoHwm,
    /// The daemon answered with an error (e.g. a method it lacks); its message.
    Refused(String),
    /// The daemon did not start, or a connection to it failed or closed.
    Daemon(Arc<dut::Error>),
    /// Writing to the daemon or setting up a connection failed.
    Io(Arc<io::Error>),
    /// A reply that is not JSON.
    BadReply(Arc<serde_json::Error>),
    /// A reply to a ping that is not a pong (the line).
    NotPong(String),
    /// A client thread panicked (`""` for a connection's own thread).
    Panicked(&'static str),
    /// A stream that does not reassemble, with what was being read.
    Stream {
        during: Option<&'static str>,
        fault: StreamFault,
    },
    /// The pipe floor's `head` could not start.
    Head(Arc<io::Error>),
    /// The pipe floor got no pipe from `head`.
    NoPipe,
    /// The pipe floor read fewer bytes than `head` wrote.
    PipeShort {
        got: u64,
        want: u64,
    },
    /// No round was run.
    NoRounds,
}

impl fmt::Display for Unmeasured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unmeasured::NotMeasured => f.write_str("n/a: not measured"),
            Unmeasured::NoValue => f.write_str("n/a"),
            Unmeasured::NoPid => f.write_str("n/a: daemon pid not found"),
            Unmeasured::NoPeak => f.write_str("n/a: no daemon pid"),
            Unmeasured::NoCpu => f.write_str("n/a: daemon CPU not readable"),
            Unmeasured::NoRss => f.write_str("n/a: no RSS"),
            Unmeasured::NoHwm => f.write_str("n/a: no VmHWM"),
            Unmeasured::Refused(message) => write!(f, "n/a: {message}"),
            Unmeasured::Daemon(e) => write!(f, "{e}"),
            Unmeasured::Io(e) => write!(f, "{e}"),
            Unmeasured::BadReply(e) => write!(f, "bad reply: {e}"),
            Unmeasured::NotPong(line) => write!(f, "not a pong: {line}"),
            Unmeasured::Panicked("") => f.write_str("panicked"),
            Unmeasured::Panicked(thread) => write!(f, "{thread} panicked"),
            Unmeasured::Stream { during: None, fault } => write!(f, "{fault}"),
            Unmeasured::Stream {
                during: Some(during),
                fault,
            } => write!(f, "{during}: {fault}"),
            Unmeasured::Head(e) => write!(f, "head: {e}"),
            Unmeasured::NoPipe => f.write_str("no pipe"),
            Unmeasured::PipeShort { got, want } => write!(f, "pipe floor: {got} of {want} bytes"),
            Unmeasured::NoRounds => f.write_str("no rounds"),
        }
    }
}

impl std::error::Error for Unmeasured {}

/// In the JSON report a missing figure is its reason, as in the table.
impl serde::Serialize for Unmeasured {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl From<dut::Error> for Unmeasured {
    fn from(e: dut::Error) -> Unmeasured {
        Unmeasured::Daemon(Arc::new(e))
    }
}

impl From<io::Error> for Unmeasured {
    fn from(e: io::Error) -> Unmeasured {
        Unmeasured::Io(Arc::new(e))
    }
}

impl From<StreamFault> for Unmeasured {
    fn from(fault: StreamFault) -> Unmeasured {
        Unmeasured::Stream { during: None, fault }
    }
}

/// How a `head -c N /dev/zero` stream failed the byte-exact check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StreamFault {
    AfterExit,
    SeqGap { seq: u64, want: u64 },
    NoSeq,
    NoData,
    NotZero { seq: u64 },
    NoExit,
    Short { got: u64, want: u64 },
}

impl fmt::Display for StreamFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamFault::AfterExit => f.write_str("a frame after the exit frame"),
            StreamFault::SeqGap { seq, want } => write!(f, "seq {seq} where {want} was due"),
            StreamFault::NoSeq => f.write_str("a frame without seq"),
            StreamFault::NoData => f.write_str("a frame without data"),
            StreamFault::NotZero { seq } => write!(f, "frame {seq} carries bytes that are not zero"),
            StreamFault::NoExit => f.write_str("no exit frame"),
            StreamFault::Short { got, want } => write!(f, "{got} bytes where {want} were written"),
        }
    }
}

impl StreamFault {
    /// The fault, said of the stream being read.
    pub(crate) fn during(self, during: &'static str) -> Unmeasured {
        Unmeasured::Stream {
            during: Some(during),
            fault: self,
        }
    }
}

/// A figure's value, or why it has none.
pub(crate) type Reading = Result<f64, Unmeasured>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_as_the_table_shows_them() {
        assert_eq!(
            Unmeasured::Refused("no such method".into()).to_string(),
            "n/a: no such method"
        );
        assert_eq!(Unmeasured::Panicked("").to_string(), "panicked");
        assert_eq!(Unmeasured::Panicked("writer").to_string(), "writer panicked");
        assert_eq!(
            StreamFault::Short { got: 3, want: 4 }.during("live stream").to_string(),
            "live stream: 3 bytes where 4 were written"
        );
        assert_eq!(Unmeasured::from(StreamFault::NoExit).to_string(), "no exit frame");
        let j = serde_json::to_string(&Reading::Err(Unmeasured::NoPid)).unwrap();
        assert_eq!(j, r#"{"Err":"n/a: daemon pid not found"}"#);
    }
}
