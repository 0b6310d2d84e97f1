//! What reading an archive stream can fail with: one typed error for the
//! gzip layer ([`super::gzip`]) and the tar layer ([`super::reader`]),
//! displayed as Go's `compress/gzip`, `compress/flate` and `archive/tar`
//! word it, since those texts reach `files.extract_tar`'s replies.

use std::fmt;

/// A failure of the archive stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// Go's `io.EOF`: a gzip file with no byte at all.
    Eof,
    /// The stream ended inside a header, a member or an entry.
    UnexpectedEof,
    /// A gzip member's header is not one (magic, method, header CRC, an
    /// over-long name), or garbage follows a member.
    GzipHeader,
    /// A gzip member's trailer does not match its data (CRC-32 or size).
    GzipChecksum,
    /// The deflate data is corrupt; `offset` is the input read so far.
    FlateCorrupt { offset: u64 },
    /// A tar header is malformed (checksum, number, PAX record).
    TarHeader,
    /// A PAX or GNU long-name entry is over Go's 1 MiB cap.
    TarFieldTooLong,
    /// The archive file could not be read: the caller's wording of the
    /// OS error.
    Source(String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Eof => f.write_str("EOF"),
            ReadError::UnexpectedEof => f.write_str("unexpected EOF"),
            ReadError::GzipHeader => f.write_str("gzip: invalid header"),
            ReadError::GzipChecksum => f.write_str("gzip: invalid checksum"),
            ReadError::FlateCorrupt { offset } => write!(f, "flate: corrupt input before offset {offset}"),
            ReadError::TarHeader => f.write_str("archive/tar: invalid tar header"),
            ReadError::TarFieldTooLong => f.write_str("archive/tar: header field too long"),
            ReadError::Source(text) => f.write_str(text),
        }
    }
}

impl std::error::Error for ReadError {}

#[cfg(test)]
mod tests {
    use super::ReadError;

    #[test]
    fn each_error_is_worded_as_go_words_it() {
        let cases = [
            (ReadError::Eof, "EOF"),
            (ReadError::UnexpectedEof, "unexpected EOF"),
            (ReadError::GzipHeader, "gzip: invalid header"),
            (ReadError::GzipChecksum, "gzip: invalid checksum"),
            (
                ReadError::FlateCorrupt { offset: 12 },
                "flate: corrupt input before offset 12",
            ),
            (ReadError::TarHeader, "archive/tar: invalid tar header"),
            (ReadError::TarFieldTooLong, "archive/tar: header field too long"),
            (
                ReadError::Source("read a.tgz: is a directory".into()),
                "read a.tgz: is a directory",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }
}
