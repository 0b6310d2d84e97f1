//! What an install can fail with: one typed error for the flow of
//! [`super::Run`], displayed as the facts line's `cliError` (the
//! reference's texts, remora's own refusals beside them; every text is in
//! `docs/PROTOCOL.md`, "-install").
//!
//! The steps with errors of their own ([`super::fetch_error`],
//! [`super::stage`], [`super::trust`]) are wrapped whole; an OS error is
//! the [`std::error::Error::source`] of the failure it caused.

use super::fetch_error::FetchError;
use super::stage::StageError;
use super::trust::UnsafeCliDir;
use crate::base::goerr::{go_quote, io_text, path_error};
use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why an install ended without a runnable CLI in place.
#[derive(Debug)]
pub(super) enum InstallError {
    /// `--cli-dir is required`.
    NoCliDir,
    /// `--cli-version is required`.
    NoVersion,
    /// A version that would not name a plain file directly inside
    /// `-cli-dir`: `invalid cli version "<v>"`.
    InvalidVersion(String),
    /// A `-cli-dir` another user could change.
    UnsafeCliDir(UnsafeCliDir),
    /// The CLI path or `-cli-dir` is or contains the daemon user's home:
    /// the home guard's text ([`crate::base::homeguard`]).
    Home(String),
    /// The CLI is missing and there is nothing to install it from:
    /// `cli <v> missing and no --cli-url or --cli-zst provided`.
    NoSource { version: String },
    /// The `-cli-zst` upload could not be opened or read:
    /// `opening input: <op> <path>: <error>`.
    Input {
        op: &'static str,
        path: String,
        source: io::Error,
    },
    /// The upload is a FIFO, socket or device, and was not read:
    /// `opening input: open <path>: not a regular file`.
    InputNotRegular { path: String },
    /// `-cli-dir` could not be made: `mkdir cli dir: mkdir <dir>: <e>`.
    MakeCliDir { dir: String, source: io::Error },
    /// The non-directory at `-cli-dir` could not be moved aside:
    /// `mkdir cli dir: rename <dir> <aside>: <error>`.
    MoveAside {
        dir: PathBuf,
        aside: PathBuf,
        source: io::Error,
    },
    /// Every name to move the non-directory at `-cli-dir` to is taken.
    NoNameToMoveAside { dir: PathBuf },
    /// `checksum mismatch: expected=<a>, actual=<b>`, the expected value
    /// as given.
    ChecksumMismatch { expected: String, actual: String },
    /// The download failed.
    Fetch(FetchError),
    /// The new CLI could not be put in place.
    Stage(StageError),
    /// A direct `--version` run was stopped at its bound
    /// (`cliUnresponsive`): [`super::UNRESPONSIVE`].
    Unresponsive,
    /// The run through the managed launcher was stopped at its bound
    /// (`cliUnresponsive`): the launcher's text.
    LauncherStopped(String),
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallError::NoCliDir => f.write_str("--cli-dir is required"),
            InstallError::NoVersion => f.write_str("--cli-version is required"),
            InstallError::InvalidVersion(version) => {
                write!(f, "invalid cli version {}", go_quote(version.as_bytes()))
            }
            InstallError::UnsafeCliDir(e) => e.fmt(f),
            InstallError::Home(text) => f.write_str(text),
            InstallError::NoSource { version } => {
                write!(f, "cli {version} missing and no --cli-url or --cli-zst provided")
            }
            InstallError::Input { op, path, source } => write!(f, "opening input: {}", path_error(op, path, source)),
            InstallError::InputNotRegular { path } => write!(f, "opening input: open {path}: not a regular file"),
            InstallError::MakeCliDir { dir, source } => {
                write!(f, "mkdir cli dir: {}", path_error("mkdir", dir, source))
            }
            InstallError::MoveAside { dir, aside, source } => write!(
                f,
                "mkdir cli dir: rename {} {}: {}",
                dir.to_string_lossy(),
                aside.to_string_lossy(),
                io_text(source)
            ),
            InstallError::NoNameToMoveAside { dir } => write!(
                f,
                "mkdir cli dir: {} is not a directory and every name to move it to is taken",
                dir.display()
            ),
            InstallError::ChecksumMismatch { expected, actual } => {
                write!(f, "checksum mismatch: expected={expected}, actual={actual}")
            }
            InstallError::Fetch(e) => e.fmt(f),
            InstallError::Stage(e) => e.fmt(f),
            InstallError::Unresponsive => f.write_str(super::UNRESPONSIVE),
            InstallError::LauncherStopped(text) => f.write_str(text),
        }
    }
}

impl std::error::Error for InstallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InstallError::UnsafeCliDir(e) => Some(e),
            InstallError::Fetch(e) => Some(e),
            InstallError::Stage(e) => Some(e),
            InstallError::Input { source, .. }
            | InstallError::MakeCliDir { source, .. }
            | InstallError::MoveAside { source, .. } => Some(source),
            InstallError::NoCliDir
            | InstallError::NoVersion
            | InstallError::InvalidVersion(_)
            | InstallError::Home(_)
            | InstallError::NoSource { .. }
            | InstallError::InputNotRegular { .. }
            | InstallError::NoNameToMoveAside { .. }
            | InstallError::ChecksumMismatch { .. }
            | InstallError::Unresponsive
            | InstallError::LauncherStopped(_) => None,
        }
    }
}

impl From<UnsafeCliDir> for InstallError {
    fn from(e: UnsafeCliDir) -> Self {
        InstallError::UnsafeCliDir(e)
    }
}

impl From<FetchError> for InstallError {
    fn from(e: FetchError) -> Self {
        InstallError::Fetch(e)
    }
}

impl From<StageError> for InstallError {
    fn from(e: StageError) -> Self {
        InstallError::Stage(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(unix)] // the errno texts are the Unix ones (Windows words its codes itself)
    fn each_error_is_worded_as_the_facts_line_words_it() {
        let cases = [
            (InstallError::NoCliDir, "--cli-dir is required".to_string()),
            (
                InstallError::NoSource { version: "2.1".into() },
                "cli 2.1 missing and no --cli-url or --cli-zst provided".to_string(),
            ),
            (
                InstallError::Input {
                    op: "open",
                    path: "/u/cli.zst".into(),
                    source: io::Error::from_raw_os_error(libc::ENOENT),
                },
                "opening input: open /u/cli.zst: no such file or directory".to_string(),
            ),
            (
                InstallError::InputNotRegular { path: "/u/fifo".into() },
                "opening input: open /u/fifo: not a regular file".to_string(),
            ),
            (
                InstallError::MakeCliDir {
                    dir: "/c".into(),
                    source: io::Error::from_raw_os_error(libc::EACCES),
                },
                "mkdir cli dir: mkdir /c: permission denied".to_string(),
            ),
            (
                InstallError::MoveAside {
                    dir: "/c".into(),
                    aside: "/c.moved-aside-1".into(),
                    source: io::Error::from_raw_os_error(libc::EACCES),
                },
                "mkdir cli dir: rename /c /c.moved-aside-1: permission denied".to_string(),
            ),
            (
                InstallError::NoNameToMoveAside { dir: "/c".into() },
                "mkdir cli dir: /c is not a directory and every name to move it to is taken".to_string(),
            ),
            (
                InstallError::Fetch(FetchError::Status(500)),
                "download failed with status 500".to_string(),
            ),
            (InstallError::Unresponsive, super::super::UNRESPONSIVE.to_string()),
            (
                InstallError::LauncherStopped("launcher stopped".into()),
                "launcher stopped".to_string(),
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }

    #[test]
    fn an_os_error_is_the_cause() {
        let e = InstallError::MakeCliDir {
            dir: "/c".into(),
            source: io::Error::from_raw_os_error(libc::EROFS),
        };
        let cause = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(cause.and_then(io::Error::raw_os_error), Some(libc::EROFS));
        assert!(std::error::Error::source(&InstallError::NoCliDir).is_none());
    }
}
