//! A gzip reader with the behaviour and error texts of Go's
//! `compress/gzip` (which the Go daemon wraps around the archive file).
//!
//! flate2's `GzDecoder` reports a truncated deflate stream as a clean EOF
//! and has its own error wording, so this drives the raw inflater
//! ([`flate2::Decompress`]) and does the RFC 1952 framing itself, as Go does:
//!
//! - header: 10 bytes (`EOF` if the file is empty, `unexpected EOF` if
//!   shorter), magic/method else `gzip: invalid header`, optional
//!   FEXTRA/FNAME/FCOMMENT (strings capped at 511 bytes)/FHCRC;
//! - body: deflate; corrupt data is `flate: corrupt input before offset N`,
//!   input ending early is `unexpected EOF`;
//! - trailer: CRC-32 and size, else `gzip: invalid checksum`;
//! - multistream: another member may follow; garbage after a member is
//!   `gzip: invalid header`.
//!
//! Like Go, an error discovered while producing the last bytes of a read is
//! returned by the *next* read, after those bytes are delivered.

use super::read_error::ReadError;
use flate2::{Crc, Decompress, FlushDecompress, Status};
use std::io::{self, Read};

const FLAG_HDR_CRC: u8 = 1 << 1;
const FLAG_EXTRA: u8 = 1 << 2;
const FLAG_NAME: u8 = 1 << 3;
const FLAG_COMMENT: u8 = 1 << 4;

const INPUT_BUFFER: usize = 64 * 1024;

enum State {
    Body,
    Done,
    Failed(ReadError),
}

/// Go's `gzip.Reader` over a byte source. Errors display as Go's texts;
/// `source_error` words a failure of the underlying reader.
pub(crate) struct GzipReader<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    eof: bool,
    inflate: Decompress,
    crc: Crc,
    state: State,
    source_error: Box<dyn Fn(&io::Error) -> String + Send>,
}

impl<R: Read> GzipReader<R> {
    /// Reads the first member's header, like `gzip.NewReader`.
    pub(crate) fn new(inner: R, source_error: Box<dyn Fn(&io::Error) -> String + Send>) -> Result<Self, ReadError> {
        let mut reader = GzipReader {
            inner,
            buf: vec![0u8; INPUT_BUFFER].into_boxed_slice(),
            pos: 0,
            len: 0,
            eof: false,
            inflate: Decompress::new(false),
            crc: Crc::new(),
            state: State::Body,
            source_error,
        };
        match reader.read_header()? {
            true => Ok(reader),
            // An empty file: Go returns io.EOF from NewReader.
            false => Err(ReadError::Eof),
        }
    }

    /// Refills the input buffer when it is empty; false at end of input.
    fn fill(&mut self) -> Result<bool, ReadError> {
        if self.pos < self.len {
            return Ok(true);
        }
        if self.eof {
            return Ok(false);
        }
        loop {
            match self.inner.read(&mut self.buf) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.pos = 0;
                    self.len = n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ReadError::Source((self.source_error)(&e))),
            }
        }
    }

    fn read_byte(&mut self) -> Result<Option<u8>, ReadError> {
        if !self.fill()? {
            return Ok(None);
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Ok(Some(b))
    }

    /// `io.ReadFull`: `Ok(0)` when nothing at all could be read, `Ok(n)`
    /// when fully read, `unexpected EOF` when cut short.
    fn read_full(&mut self, out: &mut [u8]) -> Result<usize, ReadError> {
        let mut n = 0;
        while n < out.len() {
            if !self.fill()? {
                return if n == 0 { Ok(0) } else { Err(ReadError::UnexpectedEof) };
            }
            let take = (self.len - self.pos).min(out.len() - n);
            out[n..n + take].copy_from_slice(&self.buf[self.pos..self.pos + take]);
            self.pos += take;
            n += take;
        }
        Ok(n)
    }

    /// `read_full` where a clean EOF is also `unexpected EOF` (Go's `noEOF`).
    fn read_full_no_eof(&mut self, out: &mut [u8]) -> Result<(), ReadError> {
        match self.read_full(out)? {
            0 if !out.is_empty() => Err(ReadError::UnexpectedEof),
            _ => Ok(()),
        }
    }

    /// Go's `readHeader`: `Ok(false)` on a clean EOF before any byte.
    fn read_header(&mut self) -> Result<bool, ReadError> {
        let mut head = [0u8; 10];
        if self.read_full(&mut head)? == 0 {
            return Ok(false);
        }
        if head[0] != 0x1f || head[1] != 0x8b || head[2] != 8 {
            return Err(ReadError::GzipHeader);
        }
        let flags = head[3];
        let mut digest = Crc::new();
        digest.update(&head);
        if flags & FLAG_EXTRA != 0 {
            let mut len = [0u8; 2];
            self.read_full_no_eof(&mut len)?;
            digest.update(&len);
            let mut extra = vec![0u8; usize::from(u16::from_le_bytes(len))];
            self.read_full_no_eof(&mut extra)?;
            digest.update(&extra);
        }
        for flag in [FLAG_NAME, FLAG_COMMENT] {
            if flags & flag != 0 {
                self.read_string(&mut digest)?;
            }
        }
        if flags & FLAG_HDR_CRC != 0 {
            let mut crc = [0u8; 2];
            self.read_full_no_eof(&mut crc)?;
            if u16::from_le_bytes(crc) != (digest.sum() & 0xffff) as u16 {
                return Err(ReadError::GzipHeader);
            }
        }
        self.inflate.reset(false);
        self.crc.reset();
        Ok(true)
    }

    /// A NUL-terminated header string; Go allows 511 bytes before the NUL.
    fn read_string(&mut self, digest: &mut Crc) -> Result<(), ReadError> {
        let mut s = Vec::new();
        loop {
            if s.len() >= 512 {
                return Err(ReadError::GzipHeader);
            }
            let b = self.read_byte()?.ok_or(ReadError::UnexpectedEof)?;
            s.push(b);
            if b == 0 {
                digest.update(&s);
                return Ok(());
            }
        }
    }

    /// The trailer of a finished member, then the next member's header.
    fn finish_member(&mut self) -> Result<(), ReadError> {
        let mut trailer = [0u8; 8];
        self.read_full_no_eof(&mut trailer)?;
        let crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
        let size = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
        if crc != self.crc.sum() || size != self.crc.amount() {
            return Err(ReadError::GzipChecksum);
        }
        if self.read_header()? {
            self.state = State::Body;
        } else {
            self.state = State::Done;
        }
        Ok(())
    }

    /// Decompressed bytes into `out`; `Ok(0)` at the clean end of the
    /// stream, the error on failure (and on every later call).
    pub(crate) fn read_go(&mut self, out: &mut [u8]) -> Result<usize, ReadError> {
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            match &self.state {
                State::Done => return Ok(0),
                State::Failed(msg) => return Err(msg.clone()),
                State::Body => {}
            }
            let have_input = match self.fill() {
                Ok(have) => have,
                Err(e) => return Err(self.fail(e)),
            };
            let before_in = self.inflate.total_in();
            let before_out = self.inflate.total_out();
            let status = self
                .inflate
                .decompress(&self.buf[self.pos..self.len], out, FlushDecompress::None);
            let consumed = (self.inflate.total_in() - before_in) as usize;
            let produced = (self.inflate.total_out() - before_out) as usize;
            self.pos += consumed;
            self.crc.update(&out[..produced]);
            match status {
                Err(_) => {
                    let offset = self.inflate.total_in();
                    return self.deliver(produced, ReadError::FlateCorrupt { offset });
                }
                Ok(Status::StreamEnd) => {
                    if let Err(msg) = self.finish_member() {
                        return self.deliver(produced, msg);
                    }
                    if produced > 0 {
                        return Ok(produced);
                    }
                }
                Ok(_) => {
                    if produced > 0 {
                        return Ok(produced);
                    }
                    if consumed == 0 && !have_input {
                        return self.deliver(0, ReadError::UnexpectedEof);
                    }
                }
            }
        }
    }

    /// Records a sticky error; returns pending bytes first, as Go does.
    fn deliver(&mut self, produced: usize, msg: ReadError) -> Result<usize, ReadError> {
        self.state = State::Failed(msg.clone());
        if produced > 0 {
            Ok(produced)
        } else {
            Err(msg)
        }
    }

    fn fail(&mut self, msg: ReadError) -> ReadError {
        self.state = State::Failed(msg.clone());
        msg
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::Compression;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn read_all(bytes: &[u8]) -> Result<Vec<u8>, ReadError> {
        let mut r = GzipReader::new(bytes, Box::new(|e: &io::Error| e.to_string()))?;
        let mut out = Vec::new();
        let mut buf = [0u8; 7];
        loop {
            let n = r.read_go(&mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    #[test]
    fn round_trips_and_multistream() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(read_all(&gz(&data)).unwrap(), data);
        let mut two = gz(b"hello ");
        two.extend(gz(b"world"));
        assert_eq!(read_all(&two).unwrap(), b"hello world");
        assert_eq!(read_all(&gz(b"")).unwrap(), b"");
    }

    #[test]
    fn errors_use_go_texts() {
        assert_eq!(read_all(b"").unwrap_err().to_string(), "EOF");
        assert_eq!(read_all(b"\x1f\x8b\x08").unwrap_err().to_string(), "unexpected EOF");
        assert_eq!(
            read_all(b"not a gzip stream").unwrap_err().to_string(),
            "gzip: invalid header"
        );
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 256) as u8).collect();
        let good = gz(&data);
        assert_eq!(
            read_all(&good[..good.len() / 2]).unwrap_err().to_string(),
            "unexpected EOF"
        );
        assert_eq!(
            read_all(&good[..good.len() - 4]).unwrap_err().to_string(),
            "unexpected EOF"
        );
        let mut bad_crc = good.clone();
        let n = bad_crc.len();
        bad_crc[n - 8] ^= 0xff;
        assert_eq!(read_all(&bad_crc).unwrap_err().to_string(), "gzip: invalid checksum");
        let mut trailing = good.clone();
        trailing.extend_from_slice(b"garbage!!!!");
        assert_eq!(read_all(&trailing).unwrap_err().to_string(), "gzip: invalid header");
        let mut corrupt = good.clone();
        corrupt[10] = 0xff; // block type 3 (reserved)
        assert!(read_all(&corrupt)
            .unwrap_err()
            .to_string()
            .starts_with("flate: corrupt input before offset "));
    }
}
