//! What extracting an archive can fail with once destDir is trusted: one
//! typed error for the steps of [`super::extract`], displayed as the
//! `error` of `files.extract_tar`'s reply (the reference's texts, per
//! build where [`super::texts`] words them).
//!
//! The OS error of a step is its [`std::error::Error::source`]; Go's
//! texts carry it too, so the display already names it.

use super::destdir::DestError;
use super::read_error::ReadError;
use super::removeall::RemoveAllError;
use crate::base::goerr::path_error;
use crate::base::gojson::go_lossy;
use std::fmt;
use std::io;

/// What an entry that could not be put on disk was being made into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EntryStep {
    /// A directory above a file entry: `mkdir parent <entry>: `.
    Parent,
    /// A directory entry: `mkdir <entry>: `.
    Dir,
    /// A file entry: `create <entry>: `.
    File,
}

/// A failure of the extraction.
#[derive(Debug)]
pub(super) enum ExtractError {
    /// The archive could not be opened:
    /// `open archive: open <archive>: <error>`.
    Open { archive: String, source: io::Error },
    /// The archive is a FIFO, socket or device, and was not read.
    NotRegular { archive: String },
    /// The old destDir could not be removed (the builds that wipe it by
    /// path): `clean destDir: <RemoveAll's error>`.
    Clean(RemoveAllError),
    /// destDir could not be made ready.
    Dest(DestError),
    /// The gzip or tar stream is broken, or the archive unreadable.
    Read(ReadError),
    /// An entry's name lands outside destDir, or leaves it and comes
    /// back on a build that refuses that.
    UnsafePath { name: Vec<u8> },
    /// An entry of a kind that is never created.
    Unsupported { typeflag: u8, name: Vec<u8> },
    /// An entry could not be made: `detail` is the OS failure as
    /// [`super::texts::Texts`] words it for the build.
    Entry {
        step: EntryStep,
        name: Vec<u8>,
        detail: String,
        source: io::Error,
    },
    /// A file entry's data could not be written: `write <target>: <error>`.
    Write { target: String, source: io::Error },
    /// The `.synced` marker could not be made:
    /// `write .synced: open <marker>: <error>`.
    Marker { marker: Vec<u8>, source: io::Error },
}

impl fmt::Display for ExtractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExtractError::Open { archive, source } => {
                write!(f, "open archive: {}", path_error("open", archive, source))
            }
            ExtractError::NotRegular { archive } => write!(f, "open archive: open {archive}: not a regular file"),
            ExtractError::Clean(e) => write!(f, "clean destDir: {e}"),
            ExtractError::Dest(e) => e.fmt(f),
            ExtractError::Read(e) => e.fmt(f),
            ExtractError::UnsafePath { name } => write!(f, "unsafe path in archive: {}", go_lossy(name)),
            ExtractError::Unsupported { typeflag, name } => write!(
                f,
                "unsupported tar entry type {}: {}",
                char::from(*typeflag),
                go_lossy(name)
            ),
            ExtractError::Entry {
                step,
                name,
                detail,
                source: _,
            } => {
                let prefix = match step {
                    EntryStep::Parent => "mkdir parent",
                    EntryStep::Dir => "mkdir",
                    EntryStep::File => "create",
                };
                write!(f, "{prefix} {}: {detail}", go_lossy(name))
            }
            ExtractError::Write { target, source } => f.write_str(&path_error("write", target, source)),
            ExtractError::Marker { marker, source } => {
                write!(f, "write .synced: {}", path_error("open", &go_lossy(marker), source))
            }
        }
    }
}

impl std::error::Error for ExtractError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExtractError::Open { source, .. }
            | ExtractError::Entry { source, .. }
            | ExtractError::Write { source, .. }
            | ExtractError::Marker { source, .. } => Some(source),
            ExtractError::Clean(e) => Some(e),
            ExtractError::Dest(e) => Some(e),
            ExtractError::Read(e) => Some(e),
            ExtractError::NotRegular { .. } | ExtractError::UnsafePath { .. } | ExtractError::Unsupported { .. } => {
                None
            }
        }
    }
}

impl From<RemoveAllError> for ExtractError {
    fn from(e: RemoveAllError) -> Self {
        ExtractError::Clean(e)
    }
}

impl From<DestError> for ExtractError {
    fn from(e: DestError) -> Self {
        ExtractError::Dest(e)
    }
}

impl From<ReadError> for ExtractError {
    fn from(e: ReadError) -> Self {
        ExtractError::Read(e)
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;
    use std::error::Error as _;

    fn errno(code: i32) -> io::Error {
        io::Error::from_raw_os_error(code)
    }

    #[test]
    fn each_error_is_worded_as_the_reply_words_it() {
        let cases = [
            (
                ExtractError::Open {
                    archive: "/t/a.tgz".into(),
                    source: errno(libc::ENOENT),
                },
                "open archive: open /t/a.tgz: no such file or directory",
            ),
            (
                ExtractError::NotRegular {
                    archive: "/t/fifo".into(),
                },
                "open archive: open /t/fifo: not a regular file",
            ),
            (ExtractError::Read(ReadError::UnexpectedEof), "unexpected EOF"),
            (
                ExtractError::UnsafePath {
                    name: b"../x\xff".to_vec(),
                },
                "unsafe path in archive: ../x\u{fffd}",
            ),
            (
                ExtractError::Unsupported {
                    typeflag: b'2',
                    name: b"link".to_vec(),
                },
                "unsupported tar entry type 2: link",
            ),
            (
                ExtractError::Entry {
                    step: EntryStep::Parent,
                    name: b"a/b".to_vec(),
                    detail: "mkdir /d/a: not a directory".into(),
                    source: errno(libc::ENOTDIR),
                },
                "mkdir parent a/b: mkdir /d/a: not a directory",
            ),
            (
                ExtractError::Entry {
                    step: EntryStep::Dir,
                    name: b"a/".to_vec(),
                    detail: "mkdirat a: file exists".into(),
                    source: errno(libc::ENOTDIR),
                },
                "mkdir a/: mkdirat a: file exists",
            ),
            (
                ExtractError::Entry {
                    step: EntryStep::File,
                    name: b"x".to_vec(),
                    detail: "open /d/x: is a directory".into(),
                    source: errno(libc::EISDIR),
                },
                "create x: open /d/x: is a directory",
            ),
            (
                ExtractError::Write {
                    target: "/d/x".into(),
                    source: errno(libc::ENOSPC),
                },
                "write /d/x: no space left on device",
            ),
            (
                ExtractError::Marker {
                    marker: b"/d/.synced".to_vec(),
                    source: errno(libc::EACCES),
                },
                "write .synced: open /d/.synced: permission denied",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }

    #[test]
    fn the_os_error_is_the_cause() {
        let e = ExtractError::Entry {
            step: EntryStep::File,
            name: b"x".to_vec(),
            detail: "openat x: file exists".into(),
            source: errno(libc::EISDIR),
        };
        let cause = e.source().and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(cause.and_then(io::Error::raw_os_error), Some(libc::EISDIR));
        assert!(ExtractError::Read(ReadError::TarHeader).source().is_some());
        assert!(ExtractError::UnsafePath { name: b"/x".to_vec() }.source().is_none());
    }
}
