//! The replay log of one managed process: every stream frame it produced,
//! kept as raw bytes, with a bounded hot tail in RAM and the rest in
//! segment files on disk ([`super::segments`], [`super::store`]).
//!
//! Followers are not queues. A follower of a process keeps a cursor
//! ([`super::cursor::Cursor`], the last seq it wrote) and pulls frames
//! from the log at its own pace, encoding base64 as it writes; the log
//! only wakes it. A cursor inside the hot tail reads RAM; one that fell
//! behind it reads segment files off the async workers and catches up.
//!
//! Who waits on whom: appending never waits for a client. Every appended
//! frame is written to disk by one job per log at a time, run by the
//! store's disk-writer threads ([`super::store`]); the child's pipe
//! reader waits (in [`ReplayLog::wait_writable`]) only when that job is a
//! whole write-behind bound behind, so the child sees ordinary pipe
//! backpressure instead of the daemon growing. A log that cannot use the
//! disk (no directory, a failed write) becomes a bounded RAM ring and
//! never makes anyone wait.
//!
//! Seq numbers start at 1 and are the frame's index + 1; stdout, stderr and
//! exit share one sequence. The last frame always stays in RAM, so a log
//! with frames always keeps at least one.
//!
//! This file holds the log's state, appending and reading; its disk side
//! (the write-behind job, the RAM-ring fallback, what eviction asks of a
//! log) is in `log/disk.rs`, and who follows it in [`super::followers`].

use super::followers::{Followers, Handoff};
use super::frame::{keeps_pool_buffer, raw_len, ExitFrame, Frame, FrameEncoder, Payload, Stream};
use super::ready::ReadyWake;
use super::segments::{read_segment, ReadHint, Segments};
use super::store::{ReplayStore, StoredLog};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// What one disk read returns: the frames, where the next read starts,
/// and the buffer the frames share.
pub(crate) type DiskBatch = (Vec<Frame>, Option<ReadHint>, Option<Arc<[u8]>>);

/// RAM charged for a frame: the bytes it holds (a pooled buffer whole)
/// plus the deque slot and Arc header.
fn cost(frame: &Frame) -> u64 {
    match frame {
        Frame::Data(_, data) => data.held() as u64 + 48,
        Frame::Exit(_) => 48,
    }
}

struct LogState {
    /// Frames `hot_first() ..= last_seq`, never empty once a frame exists.
    hot: VecDeque<Frame>,
    /// Sum of [`cost`] over `hot`.
    hot_bytes: u64,
    last_seq: u64,
    raw_bytes: u64,
    /// Frames with seq `<= written` reached the disk (or never will: see
    /// `spill`).
    written: u64,
    /// Sum of [`cost`] over hot frames with seq `> written`.
    unwritten_bytes: u64,
    /// A disk-writer job is running for this log.
    writer_busy: bool,
    /// False once the log is a RAM ring (no directory, or a write failed).
    spill: bool,
    /// Mirror of the segments' range and size, readable without I/O.
    disk_first: Option<u64>,
    disk_last: Option<u64>,
    disk_bytes: u64,
    /// Set with the exit frame: daemon-wide order of exits.
    exit_stamp: Option<u64>,
    /// Who to wake on new frames, and how far each may deliver; kept
    /// under this lock so a cut and an append never interleave.
    followers: Followers,
}

impl LogState {
    fn hot_first(&self) -> u64 {
        self.last_seq + 1 - self.hot.len() as u64
    }

    /// Where frame `seq` is: RAM, disk, or evicted (then where the kept
    /// frames resume).
    fn locate(&self, seq: u64) -> Where {
        let hot_first = self.hot_first();
        if seq >= hot_first {
            return Where::Ram;
        }
        if let (Some(first), Some(last)) = (self.disk_first, self.disk_last) {
            if seq < first {
                return Where::Skip(first.min(hot_first));
            }
            if seq <= last {
                return Where::Disk;
            }
        }
        Where::Skip(hot_first)
    }
}

enum Where {
    Ram,
    Disk,
    Skip(u64),
}

/// What [`ReplayLog::pull_ram`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pull {
    /// Frames up to this seq were encoded from RAM (maybe none).
    Ram(u64),
    /// The next frame (seq + 1) is on disk: read it with
    /// [`ReplayLog::read_disk`] off the async workers.
    Disk(u64),
}

/// Append-only frame log of one process.
pub(crate) struct ReplayLog {
    key: u64,
    /// Writes this process's frames as wire lines.
    encoder: FrameEncoder,
    process_id: String,
    state: Mutex<LogState>,
    /// Segment files. Lock order: never take `state` while holding this.
    disk: Mutex<Option<Segments>>,
    store: Arc<ReplayStore>,
    /// Signalled after each disk write (wakes a waiting pipe reader).
    flushed: Notify,
    /// The disk writer's batch, kept between jobs so writing a frame
    /// allocates nothing (empty between batches; one writer at a time).
    flush_batch: Mutex<Vec<Frame>>,
}

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);
static NEXT_EXIT_STAMP: AtomicU64 = AtomicU64::new(1);

impl std::fmt::Debug for ReplayLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayLog")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the state consistent at each store;
    // recover from poisoning.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ReplayLog {
    pub(crate) fn new(process_id: &str, store: &Arc<ReplayStore>) -> Arc<ReplayLog> {
        let log = Arc::new(ReplayLog {
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            encoder: FrameEncoder::new(process_id),
            process_id: process_id.to_string(),
            state: Mutex::new(LogState {
                hot: VecDeque::new(),
                hot_bytes: 0,
                last_seq: 0,
                raw_bytes: 0,
                written: 0,
                unwritten_bytes: 0,
                writer_busy: false,
                spill: store.dir().is_some(),
                disk_first: None,
                disk_last: None,
                disk_bytes: 0,
                exit_stamp: None,
                followers: Followers::default(),
            }),
            disk: Mutex::new(None),
            store: store.clone(),
            flushed: Notify::new(),
            flush_batch: Mutex::new(Vec::new()),
        });
        let weak: std::sync::Weak<dyn StoredLog> = Arc::downgrade(&log) as std::sync::Weak<ReplayLog>;
        store.register(log.key, weak);
        log
    }

    /// Identity of this log (a reused process id gets a new log).
    pub(crate) fn key(&self) -> u64 {
        self.key
    }

    fn lock(&self) -> MutexGuard<'_, LogState> {
        lock(&self.state)
    }

    fn append(self: &Arc<Self>, frame: Frame) -> u64 {
        let size = cost(&frame);
        let mut state = self.lock();
        if let Frame::Data(_, data) = &frame {
            state.raw_bytes += data.len() as u64;
        }
        if matches!(frame, Frame::Exit(_)) {
            state.exit_stamp = Some(NEXT_EXIT_STAMP.fetch_add(1, Ordering::Relaxed));
        }
        state.hot.push_back(frame);
        state.last_seq += 1;
        state.hot_bytes += size;
        self.store.metrics.ram_bytes.fetch_add(size, Ordering::Relaxed);
        let mut start_writer = false;
        if state.spill {
            state.unwritten_bytes += size;
            self.store.unwritten.fetch_add(size, Ordering::Relaxed);
            if !state.writer_busy {
                state.writer_busy = true;
                start_writer = true;
            }
        } else {
            self.trim_ring(&mut state);
        }
        state.followers.wake_all();
        let seq = state.last_seq;
        drop(state);
        if start_writer {
            // In the daemon the store's disk-writer threads take the job
            // (no allocation per job, unlike a `spawn_blocking` task);
            // without a runtime (unit tests) it runs inline, deterministic.
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    if let Err(job) = self.store.writers.submit(self.clone()) {
                        rt.spawn_blocking(move || job.write_behind());
                    }
                }
                Err(_) => self.clone().flush(),
            }
        }
        seq
    }

    /// Appends one read of stdout or stderr; returns its seq. Empty reads
    /// are not frames and return the current last seq.
    pub(crate) fn push_output(self: &Arc<Self>, stream: Stream, data: &[u8]) -> u64 {
        if data.is_empty() {
            return self.last_seq();
        }
        let payload = keeps_pool_buffer(data.len())
            .then(|| Payload::pooled(self.store.frame_buffer(), data))
            .flatten();
        self.append(Frame::Data(stream, payload.unwrap_or_else(|| Payload::from(data))))
    }

    /// A buffer of the store's frame pool for the next pipe read, which
    /// [`ReplayLog::push_read`] then keeps without a copy. Nothing else
    /// holds it.
    pub(crate) fn read_buffer(&self) -> Arc<[u8]> {
        self.store.frame_buffer()
    }

    /// Gives back a buffer from [`ReplayLog::read_buffer`] that holds no
    /// frame (the read found nothing), for the next read of any log.
    pub(crate) fn give_back(&self, buf: Arc<[u8]>) {
        self.store.give_back(buf);
    }

    /// Appends the first `len` bytes of `buf` (from
    /// [`ReplayLog::read_buffer`]) as one read of `stream`. A read of at
    /// least [`POOLED_MIN`] bytes keeps the buffer, charged whole, as
    /// [`ReplayLog::push_output`] would; a shorter one is copied into a
    /// buffer of its own size (so a trickle of small reads never holds
    /// 32 KiB each) and `buf` comes back for the next read.
    pub(crate) fn push_read(self: &Arc<Self>, stream: Stream, buf: Arc<[u8]>, len: usize) -> Option<Arc<[u8]>> {
        if !keeps_pool_buffer(len) {
            self.push_output(stream, buf.get(..len).unwrap_or_default());
            return Some(buf);
        }
        match Payload::read_into_pooled(buf, len) {
            Ok(payload) => {
                self.append(Frame::Data(stream, payload));
                None
            }
            Err(buf) => Some(buf),
        }
    }

    /// Appends the exit frame; returns its seq.
    pub(crate) fn push_exit(self: &Arc<Self>, exit: ExitFrame) -> u64 {
        self.append(Frame::Exit(exit))
    }

    /// Seq of the newest frame, 0 if none.
    pub(crate) fn last_seq(&self) -> u64 {
        self.lock().last_seq
    }

    /// Seq of the oldest kept frame, 0 if none.
    pub(crate) fn first_seq(&self) -> u64 {
        let state = self.lock();
        if state.last_seq == 0 {
            return 0;
        }
        let hot_first = state.hot_first();
        state.disk_first.map_or(hot_first, |d| d.min(hot_first))
    }

    /// Whether every frame since seq 1 is still kept, on disk: nothing was
    /// evicted and the log never fell back to a RAM ring (whose frames
    /// cost RAM for as long as it is kept).
    pub(crate) fn kept_whole(&self) -> bool {
        let state = self.lock();
        if !state.spill || state.last_seq == 0 {
            return state.spill;
        }
        state.disk_first.map_or(state.hot_first(), |d| d.min(state.hot_first())) <= 1
    }

    /// Whether the exit frame has been appended.
    pub(crate) fn has_exited(&self) -> bool {
        self.lock().exit_stamp.is_some()
    }

    /// Whether the process id was reused: no more delivery from this log.
    pub(crate) fn is_detached(&self) -> bool {
        self.lock().followers.is_detached()
    }

    /// Registers `follower` with no cut and no handoff; false if the log
    /// was detached ([`Followers::subscribe`], for the log's own tests).
    #[cfg(test)]
    pub(crate) fn subscribe(&self, follower: u64, wake: ReadyWake) -> bool {
        self.lock().followers.subscribe(follower, wake)
    }

    /// Cuts every current follower at the newest frame and returns its
    /// seq: the `lastSeq` of a reattach ([`Followers::cut_at`]), so a
    /// replaced connection never gets a frame past the reply's `lastSeq`.
    pub(crate) fn cut_followers(&self) -> u64 {
        let mut state = self.lock();
        let last = state.last_seq;
        state.followers.cut_at(last);
        last
    }

    /// The newest seq `follower` may deliver (`u64::MAX`: no cut).
    pub(crate) fn limit_for(&self, follower: u64) -> u64 {
        self.lock().followers.limit_for(follower)
    }

    /// Makes `follower` the one connection this process streams to
    /// ([`Followers::follow_exclusively`]). Returns false if the log was
    /// detached (its process id has been reused).
    pub(crate) fn follow_exclusively(&self, follower: u64, wake: ReadyWake, handoff: Handoff) -> bool {
        self.lock()
            .followers
            .follow_exclusively(follower, wake, handoff, &self.process_id)
    }

    pub(crate) fn unsubscribe(&self, follower: u64) {
        self.lock().followers.unsubscribe(follower);
    }

    /// Drops every follower and stops all further delivery (used when a
    /// live process id is reused, before the old tree is torn down).
    pub(crate) fn detach_all(&self) {
        self.lock().followers.detach_all();
    }

    /// Encodes frames with seq in `after+1 ..= upto` (capped at the newest)
    /// that are in RAM as NDJSON lines into `out`, stopping once about
    /// `budget` raw bytes were taken. Evicted frames are skipped (the
    /// cursor jumps to the oldest kept one). Stops at the first frame that
    /// is only on disk. Encoding happens outside the lock.
    /// `batch` is the caller's scratch space (left empty), so a follower
    /// allocates nothing per pull.
    pub(crate) fn pull_ram(
        &self,
        after: u64,
        upto: u64,
        out: &mut Vec<u8>,
        budget: usize,
        batch: &mut Vec<Frame>,
    ) -> Pull {
        batch.clear();
        let mut after = after;
        {
            let state = self.lock();
            let end = state.last_seq.min(upto);
            if after >= end {
                return Pull::Ram(after);
            }
            match state.locate(after + 1) {
                Where::Ram => {}
                Where::Disk => return Pull::Disk(after),
                Where::Skip(to) => {
                    after = to.saturating_sub(1).max(after);
                    if after >= end {
                        return Pull::Ram(after);
                    }
                    if !matches!(state.locate(after + 1), Where::Ram) {
                        return Pull::Disk(after);
                    }
                }
            }
            let skip = (after + 1 - state.hot_first()) as usize;
            let mut taken = 0usize;
            for frame in state.hot.iter().skip(skip).take((end - after) as usize) {
                if taken >= budget && !batch.is_empty() {
                    break;
                }
                if let Frame::Data(_, data) = frame {
                    taken += data.len();
                }
                batch.push(frame.clone());
            }
        }
        let first = after + 1;
        self.encode_frames(first, batch, out);
        let pulled = batch.len() as u64;
        batch.clear();
        Pull::Ram(after + pulled)
    }

    /// Reads frames `after+1 ..= upto` from disk, about `budget` raw bytes
    /// (at least one frame unless none is on disk any more). Blocking: call
    /// from `spawn_blocking`. Returns the frames (which start at `after+1`),
    /// a hint for the next read and the buffer the first segment's frames
    /// live in (`window`, reused when it fits and nothing holds it: see
    /// [`read_segment`]). An empty result means the frames were evicted
    /// meanwhile: pull again.
    pub(crate) fn read_disk(
        &self,
        after: u64,
        upto: u64,
        budget: usize,
        hint: Option<ReadHint>,
        window: Option<Arc<[u8]>>,
    ) -> DiskBatch {
        let mut frames = Vec::new();
        let mut next = after + 1;
        let mut hint = hint;
        let mut window = window;
        let mut taken = 0usize;
        while next <= upto && (frames.is_empty() || taken < budget) {
            let view = {
                let disk = lock(&self.disk);
                disk.as_ref().and_then(|s| s.locate(next, hint))
            };
            let Some(view) = view else { break };
            let left = budget.saturating_sub(taken);
            let mut into = if frames.is_empty() { window.take() } else { None };
            let read = read_segment(&view, next, upto, left, &mut into);
            if frames.is_empty() {
                window = into;
            }
            match read {
                Ok((got, h)) if !got.is_empty() => {
                    taken += got.iter().map(raw_len).sum::<usize>();
                    next += got.len() as u64;
                    hint = Some(h);
                    if frames.is_empty() {
                        frames = got;
                    } else {
                        frames.extend(got);
                    }
                    if next > view.meta.last_seq() {
                        continue;
                    }
                    break;
                }
                Ok(_) => break,
                // Evicted while we looked (then this is a no-op), or the
                // file is gone or damaged: its frames are lost, so drop
                // them from the index and let the caller locate again.
                Err(e) => {
                    self.drop_unreadable(view.meta.number, &e);
                    break;
                }
            }
        }
        (frames, hint, window)
    }

    /// Removes segments up to `number` after a failed read of it.
    fn drop_unreadable(&self, number: u64, error: &std::io::Error) {
        let (freed, mirror) = {
            let mut disk = lock(&self.disk);
            let Some(segs) = disk.as_mut() else { return };
            let mut freed = 0;
            while segs.oldest_number().is_some_and(|n| n <= number) {
                freed += segs.evict_oldest().map_or(0, |s| s.bytes);
            }
            if freed == 0 {
                return;
            }
            (freed, (segs.first_seq(), segs.last_seq(), segs.bytes()))
        };
        self.store.metrics.disk_bytes.fetch_sub(freed, Ordering::Relaxed);
        let mut state = self.lock();
        (state.disk_first, state.disk_last, state.disk_bytes) = mirror;
        drop(state);
        crate::log_warn!(
            "[replay] process {}: reading its replay log failed ({}): {} bytes lost",
            self.process_id,
            crate::base::goerr::io_text(error),
            freed
        );
    }

    /// Encodes `frames` (the first has seq `first`) as NDJSON lines.
    pub(crate) fn encode_frames(&self, first: u64, frames: &[Frame], out: &mut Vec<u8>) {
        for (i, frame) in frames.iter().enumerate() {
            self.encoder.encode(first + i as u64, frame, out);
        }
    }
}

impl Drop for ReplayLog {
    /// Releasing a log (id reuse, retention, shutdown) frees its RAM and
    /// deletes its segments.
    fn drop(&mut self) {
        self.store.unregister(self.key);
        let state = lock(&self.state);
        self.store
            .metrics
            .ram_bytes
            .fetch_sub(state.hot_bytes, Ordering::Relaxed);
        self.store.unwritten.fetch_sub(state.unwritten_bytes, Ordering::Relaxed);
        if state.spill {
            let tail = state.hot_bytes - state.unwritten_bytes;
            self.store.tails.fetch_sub(tail, Ordering::Relaxed);
        }
        drop(state);
        if let Some(segs) = lock(&self.disk).take() {
            // Counted off the budget now, so eviction does not act on bytes
            // that are already on their way out.
            let bytes = segs.bytes();
            self.store.metrics.disk_bytes.fetch_sub(bytes, Ordering::Relaxed);
            let remove = move || {
                let mut segs = segs;
                segs.remove_all();
            };
            // Logs are released inside handlers and under the process
            // table's lock: the unlinks go to a blocking thread there.
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn_blocking(remove)),
                Err(_) => remove(),
            }
        }
    }
}

/// What tests ask of a log beyond what the daemon does.
#[cfg(test)]
impl ReplayLog {
    /// Total stdout+stderr bytes ever appended.
    pub(crate) fn raw_bytes(&self) -> u64 {
        self.lock().raw_bytes
    }

    /// Bytes of this log in RAM and on disk.
    pub(crate) fn footprint(&self) -> (u64, u64) {
        let state = self.lock();
        (state.hot_bytes, state.disk_bytes)
    }

    /// Drops every segment, as the disk budget does to an idle exited log.
    pub(crate) fn evict_whole_for_test(&self) -> bool {
        StoredLog::evict_disk(self, true)
    }

    /// Whether the log spills to disk (false: a RAM ring).
    pub(crate) fn spills(&self) -> bool {
        self.lock().spill
    }

    /// Number of subscribed followers.
    pub(crate) fn follower_count(&self) -> usize {
        self.lock().followers.len()
    }

    /// Blocking convenience for tests and tools: encodes frames
    /// `after+1 ..= upto` from RAM and disk, about `budget` raw bytes.
    /// Returns the seq of the last frame written.
    pub(crate) fn encode_after(&self, after: u64, upto: u64, out: &mut Vec<u8>, budget: usize) -> u64 {
        let mut after = after;
        let mut hint = None;
        let mut batch = Vec::new();
        loop {
            match self.pull_ram(after, upto, out, budget, &mut batch) {
                Pull::Ram(a) => return a,
                Pull::Disk(a) => {
                    let (frames, h, _) = self.read_disk(a, upto, budget.max(1), hint, None);
                    hint = h;
                    self.encode_frames(a + 1, &frames, out);
                    after = a + frames.len() as u64;
                    if !frames.is_empty() {
                        return after;
                    }
                }
            }
        }
    }
}

mod disk;
#[cfg(test)]
mod tests;
