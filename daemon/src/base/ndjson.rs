//! NDJSON framing: splitting a connection's byte stream into request lines
//! under the 1 MiB cap.
//!
//! The rule is the reference's `bufio.Scanner` with a 1 MiB maximum token:
//! a line whose bytes before `\n` number at most 1 048 575 is served (a
//! trailing `\r` is dropped); a line of 1 048 576 bytes or more ends the
//! connection with no reply. An unterminated last line is served at EOF if
//! it is under the cap. The buffer never holds more than the cap, so a peer
//! streaming 100 MiB without a newline costs at most 1 MiB.
//!
//! [`LineBuffer`] is the pure state machine (fuzzed against a model);
//! [`LineReader`] drives it from an async reader.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The reference's `bufio.Scanner` maximum token size.
pub(crate) const MAX_LINE: usize = 1024 * 1024;

/// Initial buffer size; the buffer doubles on demand up to [`MAX_LINE`].
const INITIAL_CAPACITY: usize = 4 * 1024;

/// What the framing layer hands to the connection.
#[cfg(any(test, feature = "fuzzing"))]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Framed<'a> {
    /// One complete line, without its `\n` and without a trailing `\r`.
    Line(&'a [u8]),
    /// The current line reached [`MAX_LINE`] bytes without a newline:
    /// the connection must be closed without a reply.
    TooLong,
}

/// Buffered bytes of one connection, split into lines.
#[derive(Debug)]
pub(crate) struct LineBuffer {
    buf: Vec<u8>,
    /// Start of the unconsumed region.
    start: usize,
    /// End of the filled region.
    end: usize,
    /// Bytes in `start..scanned` are known to contain no `\n`.
    scanned: usize,
    /// The line cap: always [`MAX_LINE`] in the daemon. The fuzzing build
    /// can lower it ([`LineBuffer::with_cap`]) so that the cap's boundary
    /// is reached with inputs of kilobytes instead of a megabyte.
    cap: usize,
}

impl Default for LineBuffer {
    fn default() -> Self {
        Self::new()
    }
}

impl LineBuffer {
    pub(crate) fn new() -> Self {
        LineBuffer {
            buf: Vec::new(),
            start: 0,
            end: 0,
            scanned: 0,
            cap: MAX_LINE,
        }
    }

    /// A buffer whose lines are capped at `cap` bytes (at least 1) instead
    /// of [`MAX_LINE`]; same rules otherwise. Tests and fuzzing only.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn with_cap(cap: usize) -> Self {
        LineBuffer {
            cap: cap.max(1),
            ..Self::new()
        }
    }

    /// Bytes received but not yet returned as a line.
    pub(crate) fn pending(&self) -> usize {
        self.end - self.start
    }

    /// Returns the next complete line, `TooLong`, or `None` if more input
    /// is needed.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn next_line(&mut self) -> Option<Framed<'_>> {
        match self.next_span()? {
            Ok(span) => Some(Framed::Line(self.line(span))),
            Err(TooLong) => Some(Framed::TooLong),
        }
    }

    /// [`LineBuffer::next_line`] as a range of the buffer, so a caller in
    /// a loop can borrow the line only on the path that returns it.
    fn next_span(&mut self) -> Option<Result<Range<usize>, TooLong>> {
        let from = self.scanned.max(self.start);
        if let Some(i) = self.buf[from..self.end].iter().position(|&b| b == b'\n') {
            let newline = from + i;
            let line_start = self.start;
            self.start = newline + 1;
            self.scanned = self.start;
            return Some(Ok(line_start..newline));
        }
        self.scanned = self.end;
        if self.pending() >= self.cap {
            return Some(Err(TooLong));
        }
        None
    }

    /// The line in `span`, without a trailing `\r`.
    fn line(&self, span: Range<usize>) -> &[u8] {
        drop_cr(&self.buf[span])
    }

    /// At EOF: the unterminated remainder, if any (it is under the cap,
    /// since `next_line` reports `TooLong` first).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn take_final(&mut self) -> Option<&[u8]> {
        let span = self.take_final_span()?;
        Some(self.line(span))
    }

    fn take_final_span(&mut self) -> Option<Range<usize>> {
        if self.pending() == 0 {
            return None;
        }
        let span = self.start..self.end;
        self.start = self.end;
        Some(span)
    }

    /// A writable region for the next read. Never lets the pending bytes
    /// exceed the cap ([`MAX_LINE`]); callers must drain `next_line` first.
    pub(crate) fn spare(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            self.scanned = 0;
            if self.buf.len() > 64 * 1024 {
                // Give memory back after a large line.
                self.buf = Vec::new();
            }
        } else if self.start > 0 && self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.scanned -= self.start;
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            let grown = (self.buf.len() * 2).clamp(INITIAL_CAPACITY.min(self.cap), self.cap);
            if self.buf.is_empty() {
                // Every connection's first buffer: zeroed by the allocator
                // (one `calloc`), not byte by byte, which an unoptimized
                // build pays for on each of a burst's connections.
                self.buf = vec![0; grown];
            } else {
                self.buf.resize(grown, 0);
            }
        }
        let room = (self.cap - self.pending()).min(self.buf.len() - self.end);
        &mut self.buf[self.end..self.end + room]
    }

    /// Records that `n` bytes were written into the region from `spare`.
    pub(crate) fn commit(&mut self, n: usize) {
        self.end += n;
    }

    /// Copies `input` in (a test and fuzzing convenience; the async reader
    /// reads straight into `spare`). Returns how many bytes were taken.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn feed(&mut self, input: &[u8]) -> usize {
        let spare = self.spare();
        let n = spare.len().min(input.len());
        spare[..n].copy_from_slice(&input[..n]);
        self.commit(n);
        n
    }

    /// Bytes currently allocated: what a charged reader pays for, and what
    /// the memory-bound checks measure.
    pub(crate) fn capacity(&self) -> usize {
        self.buf.len()
    }
}

/// The current line reached [`MAX_LINE`] bytes without a newline.
struct TooLong;

fn drop_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A byte budget shared by many line buffers; each takes and gives back
/// its own share (the unauthenticated connections' budget, see
/// `admission.rs`).
#[derive(Debug)]
pub(crate) struct SharedBudget {
    used: AtomicUsize,
    limit: usize,
}

impl SharedBudget {
    pub(crate) fn new(limit: usize) -> SharedBudget {
        SharedBudget {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    /// Takes `n` bytes if they fit under the limit.
    pub(crate) fn try_take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    pub(crate) fn give_back(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }

    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }
}

/// Reads request lines from an async stream.
pub(crate) struct LineReader<R> {
    inner: R,
    buf: LineBuffer,
    eof: bool,
    /// The budget this reader's buffer is charged to, and the bytes taken.
    charge: Option<(Arc<SharedBudget>, usize)>,
}

/// One step of reading a connection. A line borrows the reader's buffer
/// until the next read: no copy per request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReadEvent<'a> {
    Line(&'a [u8]),
    TooLong,
    /// Growing the buffer would pass the budget it is charged to.
    OverBudget,
    Eof,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        LineReader {
            inner,
            buf: LineBuffer::new(),
            eof: false,
            charge: None,
        }
    }

    /// Charges the buffer's allocated bytes to `budget` from now on.
    pub(crate) fn charge_to(&mut self, budget: Arc<SharedBudget>) {
        self.stop_charging();
        self.charge = Some((budget, 0));
    }

    /// Gives back what the buffer took and stops charging.
    pub(crate) fn stop_charging(&mut self) {
        if let Some((budget, taken)) = self.charge.take() {
            budget.give_back(taken);
        }
    }

    /// Brings the charge in line with the buffer's size; false when the
    /// growth does not fit. The first [`INITIAL_CAPACITY`] bytes are every
    /// connection's own and never charged, so a client whose first request
    /// is short is served however full the budget is.
    fn settle_charge(&mut self) -> bool {
        let size = self.buf.capacity().saturating_sub(INITIAL_CAPACITY);
        let Some((budget, taken)) = self.charge.as_mut() else {
            return true;
        };
        if size > *taken {
            if !budget.try_take(size - *taken) {
                return false;
            }
        } else {
            budget.give_back(*taken - size);
        }
        *taken = size;
        true
    }

    /// Returns the next line, `TooLong`, or `Eof` (also on a read error).
    pub(crate) async fn next(&mut self) -> ReadEvent<'_> {
        loop {
            match self.buf.next_span() {
                Some(Ok(span)) => return ReadEvent::Line(self.buf.line(span)),
                Some(Err(TooLong)) => return ReadEvent::TooLong,
                None => {}
            }
            if self.eof {
                return match self.buf.take_final_span() {
                    Some(span) => ReadEvent::Line(self.buf.line(span)),
                    None => ReadEvent::Eof,
                };
            }
            // `spare` may grow the buffer; the growth is charged before
            // anything is read into it.
            self.buf.spare();
            if !self.settle_charge() {
                return ReadEvent::OverBudget;
            }
            match self.inner.read(self.buf.spare()).await {
                Ok(0) | Err(_) => self.eof = true,
                Ok(n) => self.buf.commit(n),
            }
        }
    }
}

impl<R> Drop for LineReader<R> {
    fn drop(&mut self) {
        if let Some((budget, taken)) = self.charge.take() {
            budget.give_back(taken);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_budget_refuses_what_does_not_fit() {
        let b = SharedBudget::new(10);
        assert!(b.try_take(6));
        assert!(!b.try_take(5));
        assert!(b.try_take(4));
        b.give_back(6);
        assert_eq!(b.used(), 4);
        assert!(b.try_take(6));
    }

    fn lines_of(chunks: &[&[u8]]) -> (Vec<Vec<u8>>, bool) {
        let mut b = LineBuffer::new();
        let mut out = Vec::new();
        for chunk in chunks {
            let mut rest = *chunk;
            while !rest.is_empty() {
                let n = b.feed(rest);
                rest = &rest[n..];
                loop {
                    match b.next_line() {
                        Some(Framed::Line(l)) => out.push(l.to_vec()),
                        Some(Framed::TooLong) => return (out, true),
                        None => break,
                    }
                }
            }
        }
        if let Some(l) = b.take_final() {
            out.push(l.to_vec());
        }
        (out, false)
    }

    #[test]
    fn splits_lines_and_drops_cr() {
        let (lines, too_long) = lines_of(&[b"a\r\nb", b"c\n\nd"]);
        assert_eq!(lines, vec![b"a".to_vec(), b"bc".to_vec(), b"".to_vec(), b"d".to_vec()]);
        assert!(!too_long);
    }

    #[test]
    fn cap_boundary_is_exact() {
        let ok = vec![b'x'; MAX_LINE - 1];
        let (lines, too_long) = lines_of(&[&ok, b"\nnext\n"]);
        assert!(!too_long);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].len(), MAX_LINE - 1);

        let over = vec![b'x'; MAX_LINE];
        let (lines, too_long) = lines_of(&[b"first\n", &over, b"\n"]);
        assert!(too_long);
        assert_eq!(lines, vec![b"first".to_vec()]);

        // The CR counts towards the cap, as in bufio.Scanner.
        let (_, too_long) = lines_of(&[&ok, b"\r\n"]);
        assert!(too_long);
    }

    #[test]
    fn unterminated_final_line_is_served_under_the_cap() {
        let ok = vec![b'y'; MAX_LINE - 1];
        let (lines, too_long) = lines_of(&[&ok]);
        assert!(!too_long);
        assert_eq!(lines[0].len(), MAX_LINE - 1);
    }

    #[test]
    fn memory_stays_bounded_without_newlines() {
        let mut b = LineBuffer::new();
        let chunk = vec![b'z'; 64 * 1024];
        let mut fed = 0;
        loop {
            fed += b.feed(&chunk);
            assert!(b.capacity() <= MAX_LINE, "capacity {}", b.capacity());
            if let Some(Framed::TooLong) = b.next_line() {
                break;
            }
            assert!(fed <= MAX_LINE);
        }
        assert_eq!(fed, MAX_LINE);
    }

    #[test]
    fn a_lowered_cap_behaves_like_the_real_one() {
        let mut b = LineBuffer::with_cap(8);
        // Never more than the cap pending: the read stops at 8 bytes.
        assert_eq!(b.feed(b"1234567\n12345678"), 8);
        assert_eq!(b.next_line(), Some(Framed::Line(b"1234567")));
        assert_eq!(b.next_line(), None);
        assert_eq!(b.feed(b"12345678"), 8);
        assert_eq!(b.next_line(), Some(Framed::TooLong));
        assert!(b.capacity() <= 8);
    }

    #[test]
    fn many_small_lines_reuse_the_buffer() {
        let mut b = LineBuffer::new();
        for i in 0..100_000u32 {
            let line = format!("{i}\n");
            assert_eq!(b.feed(line.as_bytes()), line.len());
            assert_eq!(b.next_line(), Some(Framed::Line(i.to_string().as_bytes())));
        }
        assert!(b.capacity() <= 64 * 1024);
    }
}
