//! The check a streamed `head -c N /dev/zero` must pass, frame by frame
//! and cheaply enough not to be the bench's bottleneck.

use super::error::StreamFault;
use super::lean::zero_base64_len;

/// Checks a stream of `head -c N /dev/zero` frame by frame, cheaply enough
/// not to be the bottleneck: seqs strictly +1 from the first, every data
/// byte zero (base64 `A`, then padding), the decoded total, the exit last.
#[derive(Default)]
pub(crate) struct ZeroStream {
    next_seq: Option<u64>,
    bytes: u64,
    pub(crate) exited: bool,
}

impl ZeroStream {
    /// A stream whose first frame must carry `seq` (a replay from the start).
    pub(crate) fn from_seq(seq: u64) -> ZeroStream {
        ZeroStream {
            next_seq: Some(seq),
            ..ZeroStream::default()
        }
    }

    fn field<'a>(l: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
        let at = l.windows(key.len()).position(|w| w == key)? + key.len();
        let rest = &l[at..];
        let end = rest.iter().position(|&b| b == b'"' || b == b',' || b == b'}')?;
        Some(&rest[..end])
    }

    /// The expected shape of a data frame, checked in place: exact
    /// prefix, seq, all-zero base64, exact suffix. `None` sends the line to
    /// the general check.
    fn fast_data(l: &[u8]) -> Option<(u64, u64)> {
        // Any process id without escapes (each stream has a connection of
        // its own: `big`, or `--scale`'s `stream-<N>`).
        const HEAD: &[u8] = br#"{"type":"stream","processId":""#;
        const AFTER_ID: &[u8] = br#"","stream":"stdout","seq":"#;
        let rest = l.strip_prefix(HEAD)?;
        let id_len = rest.iter().take(64).position(|&b| b == b'"' || b == b'\\')?;
        let rest = rest[id_len..].strip_prefix(AFTER_ID)?;
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || digits > 19 {
            return None;
        }
        let seq = rest[..digits].iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        let data = rest[digits..].strip_prefix(br#","data":""#)?.strip_suffix(br#""}"#)?;
        Some((seq, zero_base64_len(data)? as u64))
    }

    fn advance(&mut self, seq: u64) -> Result<(), StreamFault> {
        if self.exited {
            return Err(StreamFault::AfterExit);
        }
        if let Some(want) = self.next_seq {
            if seq != want {
                return Err(StreamFault::SeqGap { seq, want });
            }
        }
        self.next_seq = Some(seq + 1);
        Ok(())
    }

    /// Takes one line; `Ok(false)` when it is not a stream frame.
    pub(crate) fn take(&mut self, l: &[u8]) -> Result<bool, StreamFault> {
        if let Some((seq, bytes)) = Self::fast_data(l) {
            self.advance(seq)?;
            self.bytes += bytes;
            return Ok(true);
        }
        if !l.starts_with(b"{\"type\":\"stream\"") {
            return Ok(false);
        }
        let seq: u64 = Self::field(l, b"\"seq\":")
            .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
            .ok_or(StreamFault::NoSeq)?;
        self.advance(seq)?;
        if l.windows(15).any(|w| w == b"\"stream\":\"exit\"") {
            self.exited = true;
            return Ok(true);
        }
        let data = Self::field(l, b"\"data\":\"").ok_or(StreamFault::NoData)?;
        let pad = data.iter().rev().take_while(|&&b| b == b'=').count();
        if pad > 2 || data[..data.len() - pad].iter().any(|&b| b != b'A') || data.len() % 4 != 0 {
            return Err(StreamFault::NotZero { seq });
        }
        self.bytes += (data.len() / 4 * 3 - pad) as u64;
        Ok(true)
    }

    pub(crate) fn finish(&self, want: u64) -> Result<(), StreamFault> {
        match (self.exited, self.bytes == want) {
            (true, true) => Ok(()),
            (false, _) => Err(StreamFault::NoExit),
            (true, false) => Err(StreamFault::Short { got: self.bytes, want }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ZeroStream;

    fn frame(seq: u64, data: &str) -> Vec<u8> {
        format!(r#"{{"type":"stream","processId":"big","stream":"stdout","seq":{seq},"data":"{data}"}}"#).into_bytes()
    }

    fn exit(seq: u64) -> Vec<u8> {
        format!(r#"{{"type":"stream","processId":"big","stream":"exit","seq":{seq},"exitCode":0}}"#).into_bytes()
    }

    #[test]
    fn the_fast_path_takes_any_plain_process_id() {
        let l = br#"{"type":"stream","processId":"stream-4744","stream":"stdout","seq":7,"data":"AAAA"}"#;
        assert_eq!(ZeroStream::fast_data(l), Some((7, 3)));
        assert_eq!(ZeroStream::fast_data(&frame(2, "AA==")), Some((2, 1)));
        let escaped = br#"{"type":"stream","processId":"a\"b","stream":"stdout","seq":7,"data":"AAAA"}"#;
        assert_eq!(ZeroStream::fast_data(escaped), None, "left to the general check");
    }

    #[test]
    fn zero_stream_accepts_exactly_the_written_zeros() {
        let mut z = ZeroStream::default();
        assert!(z.take(&frame(3, "AAAA")).unwrap());
        assert!(z.take(&frame(4, "AA==")).unwrap());
        assert!(!z.take(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap());
        assert!(z.take(&exit(5)).unwrap());
        assert_eq!(z.finish(4), Ok(()));
        assert!(z.finish(5).is_err(), "a byte short");
    }

    #[test]
    fn zero_stream_refuses_gaps_nonzero_bytes_and_late_frames() {
        let mut z = ZeroStream::default();
        z.take(&frame(1, "AAAA")).unwrap();
        assert!(z.take(&frame(3, "AAAA")).is_err(), "seq gap");
        let mut z = ZeroStream::default();
        assert!(z.take(&frame(1, "AAAB")).is_err(), "a non-zero byte");
        let mut z = ZeroStream::default();
        assert!(z.take(&frame(1, "====")).is_err(), "padding only");
        let mut z = ZeroStream::default();
        z.take(&exit(1)).unwrap();
        assert!(z.take(&frame(2, "AAAA")).is_err(), "after the exit");
        let z = ZeroStream::default();
        assert!(z.finish(0).is_err(), "no exit frame");
    }
}
