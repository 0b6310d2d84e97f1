//! The on-disk part of one replay log: append-only segment files holding
//! frames as raw bytes, and the compact index that finds a seq in them.
//!
//! A segment file is a run of records `[tag u8][len u32 LE][payload]`:
//! tag 1/2 is a stdout/stderr read (payload = the raw bytes), tag 3 the
//! exit frame (payload = the code as i64 LE, then the signal name and the
//! `killedBy` word, each as a length byte and ASCII, length 0 = absent).
//! Seqs are not stored: a
//! segment knows its first seq and its frame count, and records follow in
//! seq order. The index is one [`SegMeta`] per segment, so RAM grows with
//! the number of segments, not of frames; finding a seq inside a segment
//! scans record headers, and readers carry a [`ReadHint`] so a sequential
//! reader never rescans.
//!
//! Files are reached only through the log directory's descriptor, which
//! the store verified when it made the directory ([`crate::base::safedir`]):
//! `openat` with `O_NOFOLLOW`, `unlinkat`. The segment being written stays
//! open, so a write never resolves a name again.
//!
//! Everything here is blocking file I/O: callers run it off the async
//! workers (`spawn_blocking`). Metadata only ever counts records whose
//! bytes were written completely, so a failed write leaves the index
//! describing exactly what is readable.

use super::frame::{ExitFrame, Frame, Payload, Stream};
use crate::base::safedir;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const TAG_STDOUT: u8 = 1;
const TAG_STDERR: u8 = 2;
const TAG_EXIT: u8 = 3;
/// Bytes of a record header.
pub(crate) const HEADER: u64 = 5;
/// Records per `writev`: at most two slices each and one more, under the
/// 1024 of Linux's and macOS's `IOV_MAX`.
const RECORDS_PER_WRITE: usize = 256;
/// Data from this size on is written from the frame's buffer; smaller
/// records are copied into one run (a chatty child's 100-byte reads would
/// otherwise cost a slice each).
const IN_PLACE_MIN: usize = 4096;
/// The record buffer a log keeps between writes (see [`Segments::append`]).
const SCRATCH_KEEP: usize = 64 << 10;

/// Global age stamps, so eviction can find the oldest segment of all.
static NEXT_STAMP: AtomicU64 = AtomicU64::new(1);

/// One segment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SegMeta {
    /// Number in the file name, unique within the log.
    pub number: u64,
    /// Daemon-wide creation order.
    pub stamp: u64,
    pub first_seq: u64,
    pub frames: u64,
    /// Bytes of complete records in the file.
    pub bytes: u64,
}

impl SegMeta {
    /// Seq of the last frame in the segment (`first_seq - 1` if empty).
    pub(crate) fn last_seq(&self) -> u64 {
        self.first_seq + self.frames - 1
    }
}

/// Where a sequential reader stopped: the next frame is `seq`, at byte
/// `offset` of segment `number`. Valid while that segment exists (files
/// only grow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadHint {
    pub number: u64,
    pub seq: u64,
    pub offset: u64,
}

/// The segment files of one log.
#[derive(Debug)]
pub(crate) struct Segments {
    /// The verified directory the files live in.
    dir: Arc<safedir::Dir>,
    /// The newest segment's number and its open file: appends go there.
    writing: Option<(u64, File)>,
    /// File-name prefix (the log's key).
    key: u64,
    seg_size: u64,
    segs: VecDeque<SegMeta>,
    next_number: u64,
    /// Sum of `bytes` over `segs`.
    bytes: u64,
    /// Reused buffer of record heads for appends.
    scratch: Vec<u8>,
}

/// What a reader needs to read one segment without holding the lock.
#[derive(Debug, Clone)]
pub(crate) struct SegmentView {
    /// The directory and the file's name in it.
    pub dir: Arc<safedir::Dir>,
    pub name: String,
    pub meta: SegMeta,
    /// Where to start: a hint's offset/seq, or the segment start.
    pub start_seq: u64,
    pub start_offset: u64,
}

impl Segments {
    /// An empty set of segments for log `key` in `dir`, rolling to a new
    /// file once one holds `seg_size` bytes.
    pub(crate) fn new(dir: Arc<safedir::Dir>, key: u64, seg_size: u64) -> Segments {
        Segments {
            dir,
            writing: None,
            key,
            seg_size: seg_size.max(1),
            segs: VecDeque::new(),
            next_number: 1,
            bytes: 0,
            scratch: Vec::new(),
        }
    }

    fn name_of(&self, number: u64) -> String {
        format!("{}-{}.seg", self.key, number)
    }

    fn remove_file(&mut self, number: u64) {
        if self.writing.as_ref().is_some_and(|(n, _)| *n == number) {
            self.writing = None;
        }
        let _ = safedir::unlink_in(&self.dir, self.name_of(number).as_bytes());
    }

    /// Bytes on disk.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    pub(crate) fn count(&self) -> usize {
        self.segs.len()
    }

    /// Seq of the oldest frame on disk, if any.
    pub(crate) fn first_seq(&self) -> Option<u64> {
        self.segs.iter().find(|s| s.frames > 0).map(|s| s.first_seq)
    }

    /// Seq of the newest frame on disk, if any.
    pub(crate) fn last_seq(&self) -> Option<u64> {
        self.segs.iter().rev().find(|s| s.frames > 0).map(SegMeta::last_seq)
    }

    /// File number of the oldest segment, if any.
    pub(crate) fn oldest_number(&self) -> Option<u64> {
        self.segs.front().map(|s| s.number)
    }

    /// Age stamp of the oldest segment, if any.
    pub(crate) fn oldest_stamp(&self) -> Option<u64> {
        self.segs.front().map(|s| s.stamp)
    }

    /// Appends `frames`, the first of which has seq `first_seq` (which must
    /// follow the last frame on disk, or start an empty log anywhere).
    /// Returns the bytes added. On error, the frames that were completely
    /// written stay counted and the rest are not; the caller stops
    /// spilling.
    pub(crate) fn append(&mut self, first_seq: u64, frames: &[Frame]) -> io::Result<u64> {
        let mut seq = first_seq;
        let mut added = 0;
        let mut rest = frames;
        while !rest.is_empty() {
            let need_new = match self.segs.back() {
                None => true,
                Some(s) => s.bytes >= self.seg_size,
            };
            if need_new {
                self.segs.push_back(SegMeta {
                    number: self.next_number,
                    stamp: NEXT_STAMP.fetch_add(1, Ordering::Relaxed),
                    first_seq: seq,
                    frames: 0,
                    bytes: 0,
                });
                self.next_number += 1;
            }
            let Some(back) = self.segs.back() else { break };
            let room = self.seg_size.saturating_sub(back.bytes);
            // As many records as fit the segment (at least one) and one
            // `writev`. A large frame's data is written from its own
            // buffer, not copied; everything else (heads, small records
            // whole) is encoded into `heads`, and each run of it between
            // two large frames is one slice.
            let mut heads = std::mem::take(&mut self.scratch);
            heads.clear();
            let (mut n, mut chunk) = (0, 0u64);
            for frame in rest.iter().take(RECORDS_PER_WRITE) {
                let len = record_len(frame);
                if n > 0 && chunk + len > room {
                    break;
                }
                encode_head(frame, &mut heads);
                chunk += len;
                n += 1;
            }
            let mut slices = [io::IoSlice::new(&[]); 2 * RECORDS_PER_WRITE + 1];
            let (mut used, mut run, mut at) = (0, 0, 0);
            for frame in &rest[..n] {
                at += head_len(frame);
                if let Some(data) = written_in_place(frame) {
                    slices[used] = io::IoSlice::new(heads.get(run..at).unwrap_or_default());
                    slices[used + 1] = io::IoSlice::new(data);
                    used += 2;
                    run = at;
                }
            }
            debug_assert_eq!(at, heads.len(), "head_len and encode_head disagree");
            if run < heads.len() {
                slices[used] = io::IoSlice::new(heads.get(run..).unwrap_or_default());
                used += 1;
            }
            let (number, offset) = (back.number, back.bytes);
            let written = self.write_at(number, offset, &mut slices[..used]);
            // Heads of large frames take a few bytes each, but a run of
            // small records can fill a whole batch: a log keeps at most
            // SCRATCH_KEEP of it between writes, not a batch per log.
            if heads.capacity() <= SCRATCH_KEEP {
                self.scratch = heads;
            }
            if let Err(e) = written {
                if let Some(back) = self.segs.back() {
                    if back.frames == 0 {
                        let number = back.number;
                        self.remove_file(number);
                        self.segs.pop_back();
                    }
                }
                return Err(e);
            }
            if let Some(back) = self.segs.back_mut() {
                back.frames += n as u64;
                back.bytes += chunk;
            }
            self.bytes += chunk;
            added += chunk;
            seq += n as u64;
            rest = &rest[n..];
        }
        if matches!(frames.last(), Some(Frame::Exit(_))) {
            // Nothing follows an exit frame: an exited process's log keeps
            // no descriptor (nor a record buffer) while it waits out the
            // retention.
            self.writing = None;
            self.scratch = Vec::new();
        }
        Ok(added)
    }

    fn write_at(&mut self, number: u64, offset: u64, mut bytes: &mut [io::IoSlice<'_>]) -> io::Result<()> {
        if self.writing.as_ref().is_none_or(|(n, _)| *n != number) {
            // A new segment: created here, exclusively, so nothing planted
            // under its name is ever written through.
            let file = safedir::open_file_at(
                &self.dir,
                self.name_of(number).as_bytes(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
                0o600,
            )?;
            self.writing = Some((number, file));
        }
        let Some((_, file)) = self.writing.as_mut() else {
            return Err(io::Error::other("no segment open"));
        };
        file.seek(SeekFrom::Start(offset))?;
        let mut result = Ok(());
        while !bytes.is_empty() {
            match file.write_vectored(bytes) {
                Ok(0) => {
                    result = Err(io::ErrorKind::WriteZero.into());
                    break;
                }
                Ok(n) => io::IoSlice::advance_slices(&mut bytes, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if result.is_err() {
            // Drop the partial record so the file matches the index.
            let _ = file.set_len(offset);
        }
        result
    }

    /// Removes the oldest segment; returns its metadata.
    pub(crate) fn evict_oldest(&mut self) -> Option<SegMeta> {
        let seg = self.segs.pop_front()?;
        self.remove_file(seg.number);
        self.bytes -= seg.bytes;
        Some(seg)
    }

    /// Removes every segment; returns the bytes freed.
    pub(crate) fn remove_all(&mut self) -> u64 {
        let freed = self.bytes;
        while self.evict_oldest().is_some() {}
        freed
    }

    /// Where to read seq `seq` from: the segment holding it and a start
    /// position (the hint's, when it points into that segment at or
    /// before `seq`). `None` if no segment holds `seq`.
    pub(crate) fn locate(&self, seq: u64, hint: Option<ReadHint>) -> Option<SegmentView> {
        let i = self.segs.partition_point(|s| s.first_seq + s.frames <= seq);
        let meta = self.segs.get(i)?;
        if meta.frames == 0 || seq < meta.first_seq {
            return None;
        }
        let (start_seq, start_offset) = match hint {
            Some(h) if h.number == meta.number && h.seq <= seq && h.seq >= meta.first_seq => (h.seq, h.offset),
            _ => (meta.first_seq, 0),
        };
        Some(SegmentView {
            dir: self.dir.clone(),
            name: self.name_of(meta.number),
            meta: meta.clone(),
            start_seq,
            start_offset,
        })
    }
}

impl Drop for Segments {
    fn drop(&mut self) {
        self.remove_all();
    }
}

fn record_len(frame: &Frame) -> u64 {
    HEADER
        + match frame {
            Frame::Data(_, data) => data.len() as u64,
            Frame::Exit(exit) => exit_payload(exit).len() as u64,
        }
}

fn exit_payload(exit: &ExitFrame) -> Vec<u8> {
    let mut out = exit.code.to_le_bytes().to_vec();
    for word in [exit.signal, exit.killed_by] {
        let word = word.unwrap_or("");
        out.push(word.len() as u8);
        out.extend_from_slice(word.as_bytes());
    }
    out
}

/// The `&'static` names an exit frame can carry, back from their bytes.
fn static_name(bytes: &[u8]) -> Option<&'static str> {
    if bytes.is_empty() {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    ["client", "shutdown"].into_iter().find(|w| *w == text).or_else(|| {
        (1..=64)
            .filter_map(crate::sys::process::signal_name)
            .find(|n| *n == text)
    })
}

fn decode_exit(payload: &[u8]) -> Option<ExitFrame> {
    let code = i64::from_le_bytes(payload.get(..8)?.try_into().ok()?);
    let mut rest = payload.get(8..)?;
    let mut words = [None, None];
    for word in &mut words {
        let (&len, tail) = rest.split_first()?;
        let (name, tail) = tail.split_at_checked(len as usize)?;
        *word = static_name(name);
        rest = tail;
    }
    Some(ExitFrame {
        code,
        signal: words[0],
        killed_by: words[1],
    })
}

/// The data of a frame whose record is written from the frame's own
/// buffer (`writev`) rather than copied: one of at least
/// [`IN_PLACE_MIN`] bytes.
fn written_in_place(frame: &Frame) -> Option<&[u8]> {
    match frame {
        Frame::Data(_, data) if data.len() >= IN_PLACE_MIN => Some(data),
        _ => None,
    }
}

/// Bytes of a record that [`encode_head`] writes: the header of one
/// written in place, else the whole record.
fn head_len(frame: &Frame) -> usize {
    match written_in_place(frame) {
        Some(_) => HEADER as usize,
        None => record_len(frame) as usize,
    }
}

/// Appends a record, without its data if that is written in place.
fn encode_head(frame: &Frame, out: &mut Vec<u8>) {
    match frame {
        Frame::Data(stream, data) => {
            out.push(match stream {
                Stream::Stdout => TAG_STDOUT,
                Stream::Stderr => TAG_STDERR,
            });
            // A frame is one pipe read (≤ 32 KiB): the length fits.
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            if written_in_place(frame).is_none() {
                out.extend_from_slice(data);
            }
        }
        Frame::Exit(exit) => {
            let payload = exit_payload(exit);
            out.push(TAG_EXIT);
            out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            out.extend_from_slice(&payload);
        }
    }
}

/// Reads frames `view.start_seq ..` from one segment, skipping those
/// before `from`, stopping after `upto`, at the segment's end, or once
/// about `budget` payload bytes were taken (at least one frame). Returns
/// the frames from `from` on and the hint for the next one.
///
/// `window` is a buffer to read into when it is large enough and nothing
/// else holds it (a cursor's previous batch, all written): on musl a
/// fresh 1 MiB buffer is a new mapping, faulted in page by page and
/// unmapped again. On return it is the buffer the frames live in.
pub(crate) fn read_segment(
    view: &SegmentView,
    from: u64,
    upto: u64,
    budget: usize,
    window: &mut Option<Arc<[u8]>>,
) -> io::Result<(Vec<Frame>, ReadHint)> {
    let mut file = safedir::open_file_at(&view.dir, view.name.as_bytes(), libc::O_RDONLY, 0)?;
    let mut seq = view.start_seq;
    let mut offset = view.start_offset;
    let end = view.meta.bytes;
    let end_seq = view.meta.last_seq().min(upto);
    // Frames before `from`: header by header, their bytes never read.
    while seq < from && seq <= end_seq && offset < end {
        let (_, len) = read_record_header(&mut file, offset, end)?;
        seq += 1;
        offset += HEADER + len;
    }
    // Sized for a batch of whole pipe reads (32 per MiB), so it does
    // not grow step by step in the common case.
    let mut frames = Vec::with_capacity((budget / (32 << 10)).clamp(1, 64) + 1);
    if seq <= end_seq && offset < end {
        // One read for the whole batch (plus a little, so the record that
        // crosses the budget usually comes along), straight into the
        // shared buffer whose ranges are the frames' payloads: one
        // allocation per batch (above musl's mmap threshold, so a Vec
        // copied into it would be a second mapping and a second copy).
        let want = (budget as u64).saturating_add(READ_SLACK).min(end - offset);
        let reusable = window
            .take()
            .filter(|w| w.len() as u64 >= want && Arc::strong_count(w) == 1 && Arc::weak_count(w) == 0);
        let mut buf: Arc<[u8]> = reusable.unwrap_or_else(|| std::iter::repeat_n(0u8, want as usize).collect());
        file.seek(SeekFrom::Start(offset))?;
        let filled = match Arc::get_mut(&mut buf) {
            Some(space) => read_full(&mut file, space)?,
            None => 0,
        };
        *window = Some(buf.clone());
        let window = buf.get(..filled).unwrap_or_default();
        let mut at = 0usize;
        let mut taken = 0usize;
        while seq <= end_seq && offset < end && (frames.is_empty() || taken < budget) {
            let Some(header) = window.get(at..at + HEADER as usize) else {
                if frames.is_empty() {
                    return Err(truncated());
                }
                break;
            };
            let tag = header[0];
            let len = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as u64;
            if offset + HEADER + len > end {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "segment record past its end",
                ));
            }
            let body = at + HEADER as usize..at + (HEADER + len) as usize;
            let frame = match window.get(body.clone()) {
                Some(payload) => match (tag, Payload::slice(&buf, body)) {
                    (TAG_STDOUT, Some(p)) => Frame::Data(Stream::Stdout, p),
                    (TAG_STDERR, Some(p)) => Frame::Data(Stream::Stderr, p),
                    _ => decode_record(tag, payload)?,
                },
                // Larger than the window: only ever the first record.
                None if frames.is_empty() => {
                    let mut payload = vec![0u8; len as usize];
                    file.seek(SeekFrom::Start(offset + HEADER))?;
                    file.read_exact(&mut payload)?;
                    decode_record(tag, &payload)?
                }
                None => break,
            };
            taken += len as usize;
            frames.push(frame);
            seq += 1;
            offset += HEADER + len;
            at += (HEADER + len) as usize;
        }
    }
    Ok((
        frames,
        ReadHint {
            number: view.meta.number,
            seq,
            offset,
        },
    ))
}

/// Reads until `space` is full or the file ends; returns the bytes read.
fn read_full(file: &mut File, space: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while let Some(rest) = space.get_mut(filled..).filter(|r| !r.is_empty()) {
        match file.read(rest) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Bytes a batch read takes past its budget.
const READ_SLACK: u64 = 64 << 10;

fn truncated() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "segment shorter than its index")
}

/// The tag and payload length of the record at `offset`.
fn read_record_header(file: &mut File, offset: u64, end: u64) -> io::Result<(u8, u64)> {
    let mut header = [0u8; HEADER as usize];
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(&mut header)?;
    let len = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as u64;
    if offset + HEADER + len > end {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "segment record past its end",
        ));
    }
    Ok((header[0], len))
}

fn decode_record(tag: u8, payload: &[u8]) -> io::Result<Frame> {
    Ok(match tag {
        TAG_STDOUT => Frame::Data(Stream::Stdout, Payload::from(payload)),
        TAG_STDERR => Frame::Data(Stream::Stderr, Payload::from(payload)),
        TAG_EXIT => Frame::Exit(
            decode_exit(payload).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad exit record"))?,
        ),
        _ => return Err(io::Error::new(io::ErrorKind::InvalidData, "unknown record tag")),
    })
}

#[cfg(test)]
#[cfg(unix)] // Unix modes
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dir_fd(path: &std::path::Path) -> Arc<safedir::Dir> {
        let dir = crate::base::safedir::open_private_dir(path).expect("private dir");
        assert_eq!(dir.path, path, "nobody else can write it: used as it is");
        Arc::new(dir.fd)
    }

    #[test]
    #[cfg(unix)] // a symbolic link fixture
    fn a_planted_file_or_link_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"precious").unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir(&logs).unwrap();
        std::os::unix::fs::symlink(&target, logs.join("3-1.seg")).unwrap();
        let mut segs = Segments::new(dir_fd(&logs), 3, 1 << 20);
        assert!(segs.append(1, &[data(Stream::Stdout, b"x")]).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    }

    fn data(stream: Stream, bytes: &[u8]) -> Frame {
        Frame::Data(stream, Payload::from(bytes))
    }

    fn same(a: &Frame, b: &Frame) -> bool {
        match (a, b) {
            (Frame::Data(s1, d1), Frame::Data(s2, d2)) => s1 == s2 && d1 == d2,
            (Frame::Exit(c1), Frame::Exit(c2)) => c1 == c2,
            _ => false,
        }
    }

    /// Reads every frame from seq `from` (inclusive) to the end, using
    /// hints the way a cursor does, `budget` bytes at a time.
    fn read_all(segs: &Segments, from: u64, budget: usize) -> Vec<Frame> {
        let mut out = Vec::new();
        let mut next = from;
        let mut hint = None;
        while let Some(view) = segs.locate(next, hint) {
            let (frames, h) = read_segment(&view, next, u64::MAX, budget, &mut None).unwrap();
            assert!(!frames.is_empty(), "progress");
            next += frames.len() as u64;
            out.extend(frames);
            hint = Some(h);
        }
        out
    }

    #[test]
    #[cfg(unix)] // reads mode bits
    fn records_round_trip_and_files_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let mut segs = Segments::new(dir_fd(dir.path()), 9, 16);
        let frames = vec![
            data(Stream::Stdout, b"hello"),
            data(Stream::Stderr, b"\xff\x00"),
            data(Stream::Stdout, &[7u8; 40]),
            Frame::Exit(ExitFrame {
                code: -1,
                signal: Some("SIGKILL"),
                killed_by: Some("client"),
            }),
        ];
        let added = segs.append(1, &frames).unwrap();
        assert_eq!(added, 4 * HEADER + 5 + 2 + 40 + 8 + 8 + 7);
        assert_eq!(segs.bytes(), added);
        // 16-byte segments: "hello"+"\xff\x00" share one (17 bytes ≥ 16
        // only after the second), the 45-byte record gets its own.
        assert_eq!(segs.count(), 3);
        assert_eq!((segs.first_seq(), segs.last_seq()), (Some(1), Some(4)));
        let back = read_all(&segs, 1, usize::MAX);
        assert_eq!(back.len(), 4);
        assert!(back.iter().zip(&frames).all(|(a, b)| same(a, b)));
        use std::os::unix::fs::PermissionsExt;
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let mode = entry.unwrap().metadata().unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let oldest = segs.evict_oldest().unwrap();
        assert_eq!((oldest.first_seq, oldest.frames), (1, 2));
        assert_eq!(segs.first_seq(), Some(3));
        assert!(segs.locate(2, None).is_none(), "evicted");
        assert_eq!(read_all(&segs, 3, 1).len(), 2);
        drop(segs);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "drop removes the files"
        );
    }

    #[test]
    fn one_append_of_many_small_and_large_frames_splits_into_writes_and_segments() {
        // 700 records in one append: more than one `writev` takes
        // (RECORDS_PER_WRITE), small ones copied in runs and large ones
        // written from their buffers, across several segments, some
        // chunks starting part-way into one.
        let dir = tempfile::tempdir().unwrap();
        let mut segs = Segments::new(dir_fd(dir.path()), 4, 256 << 10);
        let mut frames: Vec<Frame> = (0..700usize)
            .map(|i| {
                let len = match i % 7 {
                    0 => IN_PLACE_MIN,
                    1 => IN_PLACE_MIN - 1,
                    2 => 0,
                    3 => 32 << 10,
                    _ => i % 300,
                };
                let stream = if i % 3 == 0 { Stream::Stderr } else { Stream::Stdout };
                data(stream, &(0..len).map(|j| (i * 31 + j) as u8).collect::<Vec<u8>>())
            })
            .collect();
        frames.push(Frame::Exit(ExitFrame {
            code: 3,
            signal: None,
            killed_by: Some("shutdown"),
        }));
        let want: u64 = frames.iter().map(record_len).sum();
        assert_eq!(
            segs.append(1, &frames[..10]).unwrap() + segs.append(11, &frames[10..]).unwrap(),
            want
        );
        assert_eq!(segs.bytes(), want);
        assert!(segs.count() > 3, "{} segments", segs.count());
        let on_disk: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert_eq!(on_disk, want);
        let back = read_all(&segs, 1, 100_000);
        assert_eq!(back.len(), frames.len());
        assert!(back.iter().zip(&frames).all(|(a, b)| same(a, b)));
    }

    #[test]
    fn a_failed_write_leaves_the_index_readable() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("gone");
        std::fs::create_dir(&sub).unwrap();
        // One record per segment: the second append needs a new file.
        let mut segs = Segments::new(dir_fd(&sub), 1, 1);
        segs.append(1, &[data(Stream::Stdout, b"kept")]).unwrap();
        std::fs::remove_dir_all(&sub).unwrap();
        // The directory is gone, so the new segment cannot be created.
        assert!(segs.append(2, &[data(Stream::Stdout, b"lost")]).is_err());
        assert_eq!(segs.last_seq(), Some(1));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Frames around and past the size of one batch read (budget +
        /// READ_SLACK) come back whole, whichever record the window cuts.
        #[test]
        fn frames_larger_than_a_batch_window_read_back_whole(
            lens in proptest::collection::vec(0usize..200_000, 1..8),
            budget in prop_oneof![Just(0usize), 1usize..100_000, Just(1usize << 20)],
            from_pick in any::<u16>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut segs = Segments::new(dir_fd(dir.path()), 1, 8 << 20);
            let model: Vec<Frame> = lens
                .iter()
                .enumerate()
                .map(|(i, &len)| data(Stream::Stdout, &vec![i as u8 ^ 0x5a; len]))
                .collect();
            segs.append(1, &model).unwrap();
            let from = 1 + from_pick as u64 % model.len() as u64;
            let back = read_all(&segs, from, budget);
            prop_assert_eq!(back.len() as u64, model.len() as u64 - from + 1);
            prop_assert!(back.iter().zip(&model[from as usize - 1..]).all(|(a, b)| same(a, b)));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any interleaving of appends and reads, with any segment size and
        /// read budget, reads back exactly the frames appended, from any
        /// starting seq.
        #[test]
        fn interleaved_appends_and_reads_are_byte_exact(
            seg_size in 1u64..300,
            budget in 0usize..200,
            ops in proptest::collection::vec((0usize..4, 0usize..80, any::<u8>(), any::<bool>()), 1..40),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut segs = Segments::new(dir_fd(dir.path()), 1, seg_size);
            let mut model: Vec<Frame> = Vec::new();
            for (count, len, byte, read) in ops {
                let batch: Vec<Frame> = (0..count)
                    .map(|i| {
                        let bytes: Vec<u8> = (0..len + i).map(|j| byte.wrapping_add(j as u8)).collect();
                        data(if i % 2 == 0 { Stream::Stdout } else { Stream::Stderr }, &bytes)
                    })
                    .collect();
                segs.append(model.len() as u64 + 1, &batch).unwrap();
                model.extend(batch);
                if read && !model.is_empty() {
                    let from = 1 + (byte as u64 % model.len() as u64);
                    let back = read_all(&segs, from, budget);
                    prop_assert_eq!(back.len() as u64, model.len() as u64 - from + 1);
                    for (a, b) in back.iter().zip(&model[from as usize - 1..]) {
                        prop_assert!(same(a, b));
                    }
                }
            }
            model.push(Frame::Exit(ExitFrame::code(3)));
            segs.append(model.len() as u64, &model[model.len() - 1..]).unwrap();
            let back = read_all(&segs, 1, budget);
            prop_assert_eq!(back.len(), model.len());
            prop_assert!(back.iter().zip(&model).all(|(a, b)| same(a, b)));
            let on_disk: u64 = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
            prop_assert_eq!(on_disk, segs.bytes());
        }
    }
}
