//! A follower's position in one replay log, and the one call that moves
//! it: [`Cursor::fill`] appends the next batch of wire lines, from the hot
//! tail in RAM or, for a cursor that fell behind it, from segment files.
//!
//! Disk reads run on the blocking pool, at most [`DISK_BATCH`] raw bytes
//! each, and the next batch is read while the current one is written
//! (read-ahead), so a replay from disk waits on the disk or on its
//! follower's socket, not on both in turn. Only the cursor's owner waits
//! for its reads. The cursor knows nothing of who follows: its owner
//! decides budgets and where the lines go.

use super::frame::{raw_len, Frame};
use super::log::{DiskBatch, Pull, ReplayLog};
use super::segments::ReadHint;
use std::collections::VecDeque;
use std::sync::Arc;

/// Raw bytes a disk read takes per blocking call.
pub(crate) const DISK_BATCH: usize = 1 << 20;

type DiskRead = tokio::task::JoinHandle<DiskBatch>;

/// Reads one batch of `log` from disk on a blocking thread, into
/// `window` if it fits and is free.
fn read_disk(
    log: &Arc<ReplayLog>,
    after: u64,
    upto: u64,
    hint: Option<ReadHint>,
    window: Option<Arc<[u8]>>,
) -> DiskRead {
    let log = log.clone();
    tokio::task::spawn_blocking(move || log.read_disk(after, upto, DISK_BATCH, hint, window))
}

/// A followed log and how far its follower has written it.
#[derive(Debug)]
pub(crate) struct Cursor {
    log: Arc<ReplayLog>,
    /// The last seq written.
    after: u64,
    /// Frames `after+1 ..` already read from disk, not yet written.
    prefetched: VecDeque<Frame>,
    /// Where the last disk read stopped.
    hint: Option<ReadHint>,
    /// The next disk batch, read while this one is written: frames from
    /// `after + prefetched.len() + 1` on.
    read_ahead: Option<DiskRead>,
    /// Scratch for [`ReplayLog::pull_ram`], kept so a pull allocates
    /// nothing (empty between calls).
    batch: Vec<Frame>,
    /// The buffer the prefetched frames live in: once they are all
    /// written, the next disk read reuses it (so a cursor holds at most
    /// two, this one and the read ahead's).
    window: Option<Arc<[u8]>>,
}

impl Cursor {
    /// A cursor that writes `log` from seq `after + 1`.
    pub(crate) fn new(log: Arc<ReplayLog>, after: u64) -> Cursor {
        Cursor {
            log,
            after,
            prefetched: VecDeque::new(),
            hint: None,
            read_ahead: None,
            batch: Vec::new(),
            window: None,
        }
    }

    pub(crate) fn log(&self) -> &Arc<ReplayLog> {
        &self.log
    }

    /// The seq of the last frame written.
    pub(crate) fn position(&self) -> u64 {
        self.after
    }

    /// Starts over from seq `after + 1` (the log was followed again).
    pub(crate) fn restart(&mut self, after: u64) {
        self.after = after;
        self.prefetched.clear();
        self.hint = None;
        // Its frames would start at the old position; the blocking read
        // finishes and is dropped.
        self.read_ahead = None;
        self.window = None;
    }

    /// Whether the log has nothing more to give: detached, or exited and
    /// written to its last frame.
    pub(crate) fn is_finished(&self) -> bool {
        self.log.is_detached() || (self.log.has_exited() && self.after >= self.log.last_seq())
    }

    /// Whether frames up to seq `upto` are waiting that a [`Cursor::fill`]
    /// has not written yet (one stopped by its budget or at the end of a
    /// disk batch). The writer visits such a log again without a wake:
    /// the frames were appended before it looked.
    pub(crate) fn has_more(&self, upto: u64) -> bool {
        !self.log.is_detached() && self.after < upto.min(self.log.last_seq())
    }

    /// Appends the wire lines of the frames after the position, up to seq
    /// `upto`, to `out`, stopping once about `budget` raw bytes were taken:
    /// from RAM while the cursor is inside the hot tail, else one disk
    /// batch (awaiting its read) with the next one read ahead. Returns
    /// true if a disk read came back empty (its segment was evicted): no
    /// progress, but the cursor relocates on the next call.
    pub(crate) async fn fill(&mut self, upto: u64, out: &mut Vec<u8>, budget: usize) -> bool {
        if self.log.is_detached() {
            return false;
        }
        let mut behind = false;
        if self.prefetched.is_empty() {
            // Every frame of the last batch is written: its buffer is free.
            let mut spare = self.window.take();
            let from_disk = match self.read_ahead.take() {
                Some(read) => Some(read.await.unwrap_or_default()),
                None => match self.log.pull_ram(self.after, upto, out, budget, &mut self.batch) {
                    Pull::Ram(after) => {
                        self.after = after;
                        None
                    }
                    Pull::Disk(after) => {
                        self.after = after;
                        Some(
                            read_disk(&self.log, after, upto, self.hint, spare.take())
                                .await
                                .unwrap_or_default(),
                        )
                    }
                },
            };
            if let Some((frames, hint, window)) = from_disk {
                if frames.is_empty() {
                    behind = true;
                }
                self.hint = hint;
                self.window = window;
                self.prefetched.extend(frames);
                let next = self.after + self.prefetched.len() as u64;
                if !self.prefetched.is_empty() && next < upto && next < self.log.last_seq() {
                    self.read_ahead = Some(read_disk(&self.log, next, upto, self.hint, spare.take()));
                }
            }
        }
        let mut taken = 0usize;
        let first = self.after + 1;
        let mut n = 0u64;
        while taken < budget && self.after + n < upto {
            let Some(frame) = self.prefetched.pop_front() else {
                break;
            };
            taken += raw_len(&frame);
            self.log.encode_frames(first + n, std::slice::from_ref(&frame), out);
            n += 1;
        }
        self.after += n;
        behind
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::frame::{ExitFrame, Stream};
    use crate::replay::store::{ReplayStore, StoreConfig};

    /// A log of `frames` 32 KiB frames and an exit, spilled to disk with no
    /// hot tail: everything but the last frame must be read back from
    /// segment files.
    async fn spilled_log(dir: &std::path::Path, frames: u32) -> Arc<ReplayLog> {
        let store = ReplayStore::open(
            StoreConfig {
                dir: Some(dir.to_path_buf()),
                budget_bytes: u64::MAX,
                segment_bytes: 1 << 20,
                hot_tail_bytes: 0,
                global_hot_bytes: u64::MAX,
            },
            Arc::default(),
        );
        let log = ReplayLog::new("c", &store);
        for i in 0..frames {
            let stream = if i % 5 == 0 { Stream::Stderr } else { Stream::Stdout };
            log.push_output(stream, &vec![i as u8; 32 * 1024]);
            log.wait_writable().await;
        }
        log.push_exit(ExitFrame::code(0));
        // The disk writer has no completion signal; poll until only the
        // last frame is left in RAM.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while log.footprint().0 > 64 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        assert!(log.footprint().0 <= 64, "the writer did not catch up");
        log
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fill_replays_disk_batches_byte_exact_and_stops_at_upto() {
        let dir = tempfile::tempdir().unwrap();
        // 96 frames of 32 KiB: three disk batches.
        let log = spilled_log(dir.path(), 96).await;
        assert_eq!(log.last_seq(), 97);
        let mut want = Vec::new();
        log.encode_after(0, u64::MAX, &mut want, usize::MAX);

        let mut cursor = Cursor::new(log.clone(), 0);
        let mut got = Vec::new();
        let mut calls = 0;
        while !cursor.is_finished() {
            calls += 1;
            assert!(calls < 10_000, "no progress");
            cursor.fill(u64::MAX, &mut got, 256 * 1024).await;
        }
        assert_eq!(cursor.position(), 97);
        assert!(got == want, "replay differs from the log's own encoding");

        // A bound in the middle of a disk batch: nothing past it.
        cursor.restart(10);
        let mut part = Vec::new();
        while cursor.position() < 40 {
            cursor.fill(40, &mut part, 256 * 1024).await;
        }
        cursor.fill(40, &mut part, 256 * 1024).await;
        assert_eq!(cursor.position(), 40);
        let mut expected = Vec::new();
        log.encode_after(10, 40, &mut expected, usize::MAX);
        assert!(part == expected);
        assert!(!cursor.is_finished());
    }
}
