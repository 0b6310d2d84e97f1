//! Why a fuzz-diff case could not be run or written: [`Error`]. What the
//! daemons did is never an error here; it is the case's outcome.

use crate::base::error::IoAt;
use crate::probe::ParseError;
use std::fmt;

#[derive(Debug)]
pub(crate) enum Error {
    /// The generator's probe text for a case does not parse (a generator bug).
    Generated(ParseError),
    /// The probe about to be written does not parse back.
    Unreadable(ParseError),
    /// Writing the probe into the output folder.
    Io(IoAt),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Generated(e) => write!(f, "generated probe does not parse: {e}"),
            Error::Unreadable(e) => write!(f, "{e}"),
            Error::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<IoAt> for Error {
    fn from(e: IoAt) -> Error {
        Error::Io(e)
    }
}
