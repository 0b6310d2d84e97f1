//! The stream frames of a replay log and their wire encoding.
//!
//! A frame is stored as raw bytes ([`Frame`]); base64 happens only when a
//! follower writes it, as one NDJSON line of the documented shape:
//! `{"type":"stream","processId":…,"stream":"stdout"|"stderr","seq":…,"data":…}`
//! or, for the exit, `…"stream":"exit","seq":…,"exitCode":…` with the
//! optional `signal` and `killedBy`. The field order and
//! bytes are wire facts: the lines are written by hand here, not through a
//! serializer, because this is the hottest encoding in the daemon.

use std::io::Write;
use std::sync::Arc;

/// Which pipe a data frame came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// What the `exit` frame says: `exitCode`, then the
/// terminating signal's name and who asked for the kill, both omitted
/// when absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExitFrame {
    pub code: i64,
    pub signal: Option<&'static str>,
    pub killed_by: Option<&'static str>,
}

/// One stored frame (raw bytes; base64 happens when a cursor writes it).
#[derive(Debug, Clone)]
pub(crate) enum Frame {
    Data(Stream, Payload),
    Exit(ExitFrame),
}

/// The bytes of a data frame: a range of a shared buffer. A live frame
/// has a buffer of its own (one per pipe read, kept by the log: that one
/// is the data itself); the frames of one disk batch share the batch's
/// read window, so reading a batch back allocates once, not per frame.
/// A window lives as long as any frame of it, and those live only in the
/// cursor's prefetched batches (the replay memory bound counts them).
#[derive(Clone)]
pub(crate) struct Payload {
    buf: Arc<[u8]>,
    start: u32,
    end: u32,
    /// A buffer of the store's frame pool ([`POOLED_BUF`] bytes, this
    /// frame at its start): charged whole, and given back to the pool
    /// when the log drops the frame.
    pooled: bool,
}

/// The size of a pooled frame buffer: one pipe read.
pub(crate) const POOLED_BUF: usize = 32 * 1024;
/// The smallest read that takes a pooled buffer, so a frame never holds
/// more than twice its bytes.
pub(crate) const POOLED_MIN: usize = POOLED_BUF / 2;

/// Whether a read of `len` bytes is kept in a pooled buffer (charged
/// whole) rather than in one of its own size.
pub(crate) fn keeps_pool_buffer(len: usize) -> bool {
    (POOLED_MIN..=POOLED_BUF).contains(&len)
}

impl Payload {
    /// `data` copied into `buf`, a buffer of the pool that nothing else
    /// holds; `None` (and `buf` dropped) if it does not fit or is shared.
    pub(crate) fn pooled(mut buf: Arc<[u8]>, data: &[u8]) -> Option<Payload> {
        let end = u32::try_from(data.len()).ok()?;
        Arc::get_mut(&mut buf)?.get_mut(..data.len())?.copy_from_slice(data);
        Some(Payload {
            buf,
            start: 0,
            end,
            pooled: true,
        })
    }

    /// The first `len` bytes of `buf`, a buffer of the pool that a pipe
    /// read went straight into (no copy); `buf` back if `len` is past its
    /// end or it is not a pool buffer's size.
    pub(crate) fn read_into_pooled(buf: Arc<[u8]>, len: usize) -> Result<Payload, Arc<[u8]>> {
        match u32::try_from(len) {
            Ok(end) if len <= buf.len() && buf.len() == POOLED_BUF => Ok(Payload {
                buf,
                start: 0,
                end,
                pooled: true,
            }),
            _ => Err(buf),
        }
    }

    /// Bytes of RAM this payload keeps: the whole buffer of a pooled one.
    pub(crate) fn held(&self) -> usize {
        if self.pooled {
            self.buf.len()
        } else {
            self.len()
        }
    }

    /// The pooled buffer back, if this was its last holder.
    pub(crate) fn into_pool_buffer(self) -> Option<Arc<[u8]>> {
        let mut buf = self.buf;
        (self.pooled && Arc::get_mut(&mut buf).is_some()).then_some(buf)
    }

    /// `range` of `buf`; `None` if it is out of `buf` or past 4 GiB.
    pub(crate) fn slice(buf: &Arc<[u8]>, range: std::ops::Range<usize>) -> Option<Payload> {
        buf.get(range.clone())?;
        Some(Payload {
            buf: buf.clone(),
            start: u32::try_from(range.start).ok()?,
            end: u32::try_from(range.end).ok()?,
            pooled: false,
        })
    }
}

impl From<&[u8]> for Payload {
    fn from(bytes: &[u8]) -> Payload {
        let buf: Arc<[u8]> = Arc::from(bytes);
        // A pipe read or a segment record: far below 4 GiB (records carry
        // a u32 length).
        let end = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        Payload {
            buf,
            start: 0,
            end,
            pooled: false,
        }
    }
}

impl std::ops::Deref for Payload {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.buf.get(self.start as usize..self.end as usize).unwrap_or_default()
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Payload) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Payload({} bytes)", self.len())
    }
}

/// Raw output bytes a frame carries (0 for the exit frame).
pub(crate) fn raw_len(frame: &Frame) -> usize {
    match frame {
        Frame::Data(_, data) => data.len(),
        Frame::Exit(_) => 0,
    }
}

/// Encodes the frames of one process: the shared line prefix
/// `{"type":"stream","processId":"<id>","stream":"` is built once.
#[derive(Debug)]
pub(crate) struct FrameEncoder {
    prefix: Vec<u8>,
}

impl FrameEncoder {
    pub(crate) fn new(process_id: &str) -> FrameEncoder {
        let mut prefix = br#"{"type":"stream","processId":"#.to_vec();
        crate::base::gojson::write_go_string(&mut prefix, process_id);
        prefix.extend_from_slice(br#","stream":""#);
        FrameEncoder { prefix }
    }

    /// Appends the NDJSON line of `frame`, which has seq `seq`, to `out`.
    pub(crate) fn encode(&self, seq: u64, frame: &Frame, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.prefix);
        match frame {
            Frame::Data(stream, data) => {
                out.extend_from_slice(stream.name().as_bytes());
                out.extend_from_slice(br#"","seq":"#);
                write_int(out, seq);
                out.extend_from_slice(br#","data":""#);
                // Vectorised (SSE/AVX2/NEON, picked at run time): the same
                // bytes as the `base64` crate's STANDARD engine.
                // Encoded straight into the spare capacity: zeroing the
                // ~43 KiB first (a `resize`) cost a memset per frame.
                // `reserve` first so the buffer still grows by doubling.
                let engine = &base64_simd::STANDARD;
                out.reserve(engine.encoded_length(data.len()) + 3);
                engine.encode_append(&data[..], out);
                out.extend_from_slice(b"\"}\n");
            }
            Frame::Exit(exit) => {
                out.extend_from_slice(br#"exit","seq":"#);
                write_int(out, seq);
                out.extend_from_slice(br#","exitCode":"#);
                write_int(out, exit.code);
                // Both values are fixed ASCII names: no escaping needed.
                if let Some(signal) = exit.signal {
                    out.extend_from_slice(br#","signal":""#);
                    out.extend_from_slice(signal.as_bytes());
                    out.push(b'"');
                }
                if let Some(by) = exit.killed_by {
                    out.extend_from_slice(br#","killedBy":""#);
                    out.extend_from_slice(by.as_bytes());
                    out.push(b'"');
                }
                out.extend_from_slice(b"}\n");
            }
        }
    }
}

/// Decimal digits of `n` straight into `out` (no temporary `String`).
fn write_int(out: &mut Vec<u8>, n: impl std::fmt::Display) {
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{n}");
}

#[cfg(test)]
impl ExitFrame {
    /// A normal exit: only `exitCode`.
    pub(crate) fn code(code: i64) -> Self {
        ExitFrame {
            code,
            signal: None,
            killed_by: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    #[test]
    fn data_frames_carry_the_standard_base64_of_their_bytes() {
        let encoder = FrameEncoder::new("p");
        let mut seed = 0x9e37_79b9_u32;
        for len in (0..200).chain([32 * 1024 - 1, 32 * 1024, 32 * 1024 + 1, 100_003]) {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (seed >> 24) as u8
                })
                .collect();
            let mut out = b"kept".to_vec();
            encoder.encode(7, &Frame::Data(Stream::Stderr, Payload::from(&data[..])), &mut out);
            let want = format!(
                "kept{{\"type\":\"stream\",\"processId\":\"p\",\"stream\":\"stderr\",\"seq\":7,\"data\":\"{}\"}}\n",
                base64::engine::general_purpose::STANDARD.encode(&data)
            );
            assert!(out == want.as_bytes(), "length {len}");
        }
    }
}
