//! The lean client side of `harness bench`, so its figures are the
//! daemon's and not the client's: lines split in place in one reused
//! buffer, replies matched against their exact expected bytes (parsed
//! only on a mismatch), the client's own CPU share, and the two floors
//! a throughput figure is held against (a pipe into a Unix socket and
//! out with no encoding; base64 encode + decode of 32 KiB chunks on one
//! thread), measured in the same run.

use super::error::Unmeasured;
use crate::dut;
use base64::Engine;
use std::io::{Read, Write};
use std::ops::Range;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

/// Lines of a byte stream, split in place in one buffer that is reused:
/// no allocation or copy per line.
pub(crate) struct Lines<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl<R: Read> Lines<R> {
    pub(crate) fn new(inner: R, capacity: usize) -> Lines<R> {
        Lines {
            inner,
            buf: vec![0; capacity.max(4096)],
            start: 0,
            end: 0,
        }
    }

    /// The next line, without its `\n`.
    pub(crate) fn next_line(&mut self) -> Result<&[u8], Unmeasured> {
        let span = self.next_span()?;
        Ok(&self.buf[span])
    }

    fn next_span(&mut self) -> Result<Range<usize>, Unmeasured> {
        let mut scanned = self.start;
        loop {
            // memchr: a stream frame is ~43 KiB, and a byte-at-a-time scan
            // of it cost the client more than the daemon's own encoder.
            if let Some(i) = memchr::memchr(b'\n', &self.buf[scanned..self.end]) {
                let line = self.start..scanned + i;
                self.start = scanned + i + 1;
                return Ok(line);
            }
            scanned = self.end;
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                scanned -= self.start;
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                let grown = self.buf.len() * 2;
                self.buf.resize(grown, 0);
            }
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(dut::Error::Closed.into()),
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(dut::Error::Read(e).into()),
            }
        }
    }
}

/// Whether `line` is exactly `{"jsonrpc":"2.0","id":<id>,"result":{"pong":true}}`.
pub(crate) fn is_pong(line: &[u8], id: usize) -> bool {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
    const TAIL: &[u8] = br#","result":{"pong":true}}"#;
    let Some(rest) = line.strip_prefix(HEAD).and_then(|r| r.strip_suffix(TAIL)) else {
        return false;
    };
    let mut digits = [0u8; 20];
    let mut n = id;
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    rest == &digits[at..]
}

/// Whether `data` (a frame's base64) encodes only zero bytes: `A`s, then
/// at most two `=`; returns the decoded length.
pub(crate) fn zero_base64_len(data: &[u8]) -> Option<usize> {
    if data.len() & 3 != 0 {
        return None;
    }
    let pad = data.iter().rev().take_while(|&&b| b == b'=').count();
    if pad > 2 || (pad > 0 && pad == data.len()) {
        return None;
    }
    let body = &data[..data.len() - pad];
    // A reduction with no early exit, which the compiler vectorises: any
    // byte other than `A` leaves a bit set.
    let stray = body.iter().fold(0u8, |acc, &b| acc | (b ^ b'A'));
    (stray == 0).then(|| data.len() / 4 * 3 - pad)
}

/// CPU seconds this process (the bench client) used so far.
pub(crate) fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` fills the struct it is given; zeroed is a valid
    // `rusage` should it fail.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Runs `f` and returns its result with the client's CPU share of the
/// wall time (1.0 = one core busy the whole time).
pub(crate) fn with_cpu_share<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let (cpu, wall) = (cpu_seconds(), Instant::now());
    let out = f();
    let elapsed = wall.elapsed().as_secs_f64();
    let share = if elapsed > 0.0 {
        (cpu_seconds() - cpu) / elapsed
    } else {
        0.0
    };
    (out, share)
}

/// The two floors, in MiB/s.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(crate) struct Floors {
    /// `head -c N /dev/zero` through a pipe into a Unix socket and out,
    /// 32 KiB reads, no encoding.
    pub(crate) pipe: f64,
    /// base64 encode + decode of 32 KiB chunks on one thread.
    pub(crate) base64: f64,
}

const CHUNK: usize = 32 * 1024;

/// Measures both floors for `bytes` bytes.
pub(crate) fn floors(bytes: u64) -> Result<Floors, Unmeasured> {
    Ok(Floors {
        pipe: pipe_floor(bytes)?,
        base64: base64_floor(bytes),
    })
}

fn mib_per_s(bytes: u64, since: Instant) -> f64 {
    bytes as f64 / (1 << 20) as f64 / since.elapsed().as_secs_f64()
}

fn pipe_floor(bytes: u64) -> Result<f64, Unmeasured> {
    let (mut into, mut out) = UnixStream::pair()?;
    let started = Instant::now();
    let mut child = Command::new("head")
        .args(["-c", &bytes.to_string(), "/dev/zero"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Unmeasured::Head(Arc::new(e)))?;
    let mut pipe = child.stdout.take().ok_or(Unmeasured::NoPipe)?;
    let relay = std::thread::spawn(move || -> std::io::Result<()> {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = pipe.read(&mut buf)?;
            if n == 0 {
                return Ok(());
            }
            into.write_all(&buf[..n])?;
        }
    });
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    loop {
        let n = out.read(&mut buf)?;
        if n == 0 {
            break;
        }
        got += n as u64;
    }
    let rate = mib_per_s(got, started);
    relay.join().map_err(|_| Unmeasured::Panicked("relay"))??;
    let _ = child.wait();
    if got != bytes {
        return Err(Unmeasured::PipeShort { got, want: bytes });
    }
    Ok(rate)
}

fn base64_floor(bytes: u64) -> f64 {
    let engine = &base64::engine::general_purpose::STANDARD;
    let raw = vec![0u8; CHUNK];
    let mut encoded = vec![0u8; CHUNK / 3 * 4 + 4];
    let mut decoded = vec![0u8; CHUNK + 3];
    let started = Instant::now();
    let mut done = 0u64;
    let mut check = 0usize;
    while done < bytes {
        let n = engine.encode_slice(&raw, &mut encoded).unwrap_or(0);
        check += engine.decode_slice(&encoded[..n], &mut decoded).unwrap_or(0);
        done += CHUNK as u64;
    }
    let rate = mib_per_s(done, started);
    std::hint::black_box(check);
    rate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_across_reads_and_buffer_growth() {
        let input = b"a\nbb\n\nccc".repeat(3000);
        let mut lines = Lines::new(&input[..], 16);
        let mut got = Vec::new();
        while let Ok(line) = lines.next_line() {
            got.push(line.to_vec());
        }
        let want: Vec<Vec<u8>> = input.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        // The unterminated last piece is not a line.
        assert_eq!(got, want[..want.len() - 1]);
    }

    #[test]
    fn pongs_match_only_their_exact_bytes() {
        assert!(is_pong(br#"{"jsonrpc":"2.0","id":0,"result":{"pong":true}}"#, 0));
        assert!(is_pong(br#"{"jsonrpc":"2.0","id":1234,"result":{"pong":true}}"#, 1234));
        assert!(!is_pong(br#"{"jsonrpc":"2.0","id":1234,"result":{"pong":true}}"#, 123));
        assert!(!is_pong(br#"{"jsonrpc":"2.0","id":12,"result":{"pong":false}}"#, 12));
        assert!(!is_pong(
            br#"{"jsonrpc":"2.0","id":12,"error":{"code":-1,"message":"x"}}"#,
            12
        ));
    }

    #[test]
    fn zero_base64_is_checked_to_the_byte() {
        assert_eq!(zero_base64_len(b"AAAAAAAAAAAA"), Some(9));
        assert_eq!(zero_base64_len(b"AAAAAA=="), Some(4));
        assert_eq!(zero_base64_len(b"AAAAAAAAAAA="), Some(8));
        assert_eq!(zero_base64_len(b"AAAAAAAAAAAB"), None);
        assert_eq!(zero_base64_len(b"AABAAAAA"), None);
        assert_eq!(zero_base64_len(b"===="), None);
        assert_eq!(zero_base64_len(b"AAA"), None);
        assert_eq!(zero_base64_len(b"A==="), None);
    }

    #[test]
    fn floors_measure_every_byte() {
        let f = floors(4 << 20).unwrap();
        assert!(f.pipe > 0.0 && f.base64 > 0.0, "{f:?}");
    }
}
