//! Why a subcommand failed: [`Error`], one enum for every command, which
//! wraps the error of the module that failed and prints as it does
//! (`main` puts `harness: ` in front).

use crate::base::error::IoAt;
use crate::transcript::{compare, normalize};
use crate::{capture, cli, derive, stress};
use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
pub(crate) enum Error {
    /// An argument that does not resolve, or a report not written.
    Args(cli::Error),
    Stress(stress::Error),
    Capture(capture::Error),
    Accepted(compare::AcceptedError),
    /// A derive recipe that cannot be read.
    Recipe(derive::Error),
    /// `harness report`'s input, read but not a report.
    NotAReport {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// `harness derive` selected no probe with a recipe in this folder.
    NoRecipes(PathBuf),
    /// Reading or writing a file the command line names.
    Io(IoAt),
    Json(serde_json::Error),
    CurrentExe(std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Args(e) => write!(f, "{e}"),
            Error::Stress(e) => write!(f, "{e}"),
            Error::Capture(e) => write!(f, "{e}"),
            Error::Accepted(e) => write!(f, "{e}"),
            Error::Recipe(e) => write!(f, "{e}"),
            Error::NotAReport { path, source } => write!(f, "{}: not a JSON report: {source}", path.display()),
            Error::NoRecipes(dir) => write!(f, "no selected probe has a recipe in {}", dir.display()),
            Error::Io(e) => write!(f, "{e}"),
            Error::Json(e) => write!(f, "{e}"),
            Error::CurrentExe(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<cli::Error> for Error {
    fn from(e: cli::Error) -> Error {
        Error::Args(e)
    }
}

impl From<normalize::BadRename> for Error {
    fn from(e: normalize::BadRename) -> Error {
        Error::Args(cli::Error::Rename(e))
    }
}

impl From<stress::Error> for Error {
    fn from(e: stress::Error) -> Error {
        Error::Stress(e)
    }
}

impl From<capture::Error> for Error {
    fn from(e: capture::Error) -> Error {
        Error::Capture(e)
    }
}

impl From<compare::AcceptedError> for Error {
    fn from(e: compare::AcceptedError) -> Error {
        Error::Accepted(e)
    }
}

impl From<derive::Error> for Error {
    fn from(e: derive::Error) -> Error {
        Error::Recipe(e)
    }
}

impl From<IoAt> for Error {
    fn from(e: IoAt) -> Error {
        Error::Io(e)
    }
}
