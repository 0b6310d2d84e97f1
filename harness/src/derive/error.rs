//! Why a recipe cannot be read, a source cannot be split into frames, or
//! a transcript cannot be derived from them: [`Error`], and
//! [`FrameError`] for one source or frame.

use crate::base::error::IoAt;
use crate::transcript;
use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
pub enum Error {
    Io(IoAt),
    NoProbeName(PathBuf),
    /// A recipe line (`at` is `<recipe>:<line>`).
    Line {
        at: String,
        problem: LineProblem,
    },
    NoField {
        path: PathBuf,
        name: &'static str,
    },
    NoSource(PathBuf),
    /// The source file that does not split into frames.
    Source {
        path: PathBuf,
        problem: FrameError,
    },
    /// A `frame` line for a key the probe's run does not have.
    NoEntry(String),
    /// The source's frames and the replies to fill do not line up.
    Count {
        probe: String,
        frames: usize,
        fill: Vec<String>,
    },
    /// One reply's frame.
    Frame {
        key: String,
        problem: FrameError,
    },
    /// Frame `n` carries id `id` where reply `key` is due.
    OutOfStep {
        probe: String,
        n: usize,
        id: String,
        key: String,
    },
    /// A `replace` line for a reply the source does not fill.
    NotFilled(String),
}

/// What is wrong with one recipe line.
#[derive(Debug)]
pub enum LineProblem {
    NeedsValue(String),
    Map,
    FrameNotJson(serde_json::Error),
    FrameShape,
    Pending(transcript::Error),
    Unknown(String),
}

/// What is wrong with a source or one of its frames.
#[derive(Debug)]
pub enum FrameError {
    NotJson(serde_json::Error),
    NotArray,
    Element {
        element: String,
        source: serde_json::Error,
    },
    Split {
        got: usize,
        want: usize,
    },
    LineNotJson {
        line: usize,
        source: serde_json::Error,
    },
    /// A `<PLACEHOLDER>` no `map` line covers.
    Unmapped(String),
    /// Remora's reply (the text) that is not an envelope.
    NotEnvelope(String),
    NoId(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::NoProbeName(path) => write!(f, "{}: no probe name", path.display()),
            Error::Line { at, problem } => write!(f, "{at}: {problem}"),
            Error::NoField { path, name } => write!(f, "{}: no `{name}` line", path.display()),
            Error::NoSource(path) => write!(f, "{}: no `golden` or `typed` line", path.display()),
            Error::Source { path, problem } => write!(f, "{}: {problem}", path.display()),
            Error::NoEntry(key) => write!(f, "`frame {key}`: the probe's run has no such entry"),
            Error::Count { probe, frames, fill } => write!(
                f,
                "{probe}: the source has {frames} frame(s), the probe's run has {} repl(ies) to fill ({}); refusing to derive",
                fill.len(),
                fill.join(", ")
            ),
            Error::Frame { key, problem } => write!(f, "{key}: {problem}"),
            Error::OutOfStep { probe, n, id, key } => write!(
                f,
                "{probe}: frame {n} has id {id} where reply {key} is due; the source and the probe are out of step"
            ),
            Error::NotFilled(key) => write!(f, "`replace {key}`: not a reply the source fills"),
        }
    }
}

impl fmt::Display for LineProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineProblem::NeedsValue(word) => write!(f, "`{word}` needs a value"),
            LineProblem::Map => f.write_str("`map <FROM> <TO>`"),
            LineProblem::FrameNotJson(e) => write!(f, "the frame is not JSON: {e}"),
            LineProblem::FrameShape => f.write_str("`frame <key> | <frame> | <citation>`"),
            LineProblem::Pending(e) => write!(f, "{e}"),
            LineProblem::Unknown(word) => write!(f, "unknown recipe line {word:?}"),
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::NotJson(e) => write!(f, "not JSON: {e}"),
            FrameError::NotArray => f.write_str("not a JSON array"),
            FrameError::Element { element, source } => write!(f, "element {element:?} is not JSON: {source}"),
            FrameError::Split { got, want } => write!(f, "split {got} elements where the array has {want}"),
            FrameError::LineNotJson { line, source } => write!(f, "line {line}: not JSON: {source}"),
            FrameError::Unmapped(p) => write!(
                f,
                "placeholder {p} has no mapping (add `map {p} <value>` to the recipe)"
            ),
            FrameError::NotEnvelope(remora) => write!(f, "remora's reply is not an envelope: {remora}"),
            FrameError::NoId(remora) => write!(f, "remora's reply has no readable id: {remora}"),
        }
    }
}

impl std::error::Error for Error {}
impl std::error::Error for FrameError {}

impl From<IoAt> for Error {
    fn from(e: IoAt) -> Error {
        Error::Io(e)
    }
}
