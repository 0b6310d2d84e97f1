//! A log's disk side: the write-behind job that moves frames to segment
//! files and trims the hot tail behind it, the back-pressure it puts on the
//! pipe reader, the fall-back to a RAM ring when the disk fails, and what
//! the store's eviction asks of a log ([`StoredLog`]).
//!
//! Lock order as in [`super`]: never take the state while holding the
//! segments.

use super::{cost, lock, LogState, ReplayLog};
use crate::replay::frame::Frame;
use crate::replay::segments::Segments;
use crate::replay::store::{StoredLog, GLOBAL_WRITE_BEHIND, RING_BYTES, WRITE_BEHIND};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Raw bytes a disk writer takes per write.
const WRITE_BATCH: u64 = 1 << 20;

/// The segments' range and size as mirrored in [`LogState`]:
/// `(disk_first, disk_last, disk_bytes)`.
type DiskMirror = (Option<u64>, Option<u64>, u64);

/// Frames the disk writer's kept batch may hold room for between jobs.
const FLUSH_BATCH_KEEP: usize = 1024;

impl ReplayLog {
    /// Waits while this log's disk writer is a whole write-behind bound
    /// behind (or the daemon's writers together are, and this log has
    /// unwritten frames). The pipe reader calls this between reads.
    pub(crate) async fn wait_writable(&self) {
        loop {
            let flushed = self.flushed.notified();
            tokio::pin!(flushed);
            flushed.as_mut().enable();
            {
                let state = self.lock();
                let global = self.store.unwritten.load(Ordering::Relaxed);
                let behind = state.unwritten_bytes >= WRITE_BEHIND
                    || (global >= GLOBAL_WRITE_BEHIND && state.unwritten_bytes > 0);
                if !state.spill || !behind {
                    return;
                }
            }
            flushed.await;
        }
    }

    /// The disk-writer job: writes unwritten frames in batches until none
    /// are left, trimming the hot tail behind it. Runs on a blocking
    /// thread; at most one per log.
    pub(super) fn flush(self: Arc<Self>) {
        let mut batch = std::mem::take(&mut *lock(&self.flush_batch));
        self.flush_jobs(&mut batch);
        batch.clear();
        if batch.capacity() <= FLUSH_BATCH_KEEP {
            *lock(&self.flush_batch) = batch;
        }
    }

    fn flush_jobs(self: &Arc<Self>, batch: &mut Vec<Frame>) {
        loop {
            batch.clear();
            let first = {
                let mut state = self.lock();
                if !state.spill || state.written == state.last_seq {
                    state.writer_busy = false;
                    drop(state);
                    self.flushed.notify_waiters();
                    return;
                }
                let first = state.written + 1;
                let skip = (first - state.hot_first()) as usize;
                let mut taken = 0;
                batch.extend(
                    state
                        .hot
                        .iter()
                        .skip(skip)
                        .take_while(|f| {
                            let go = taken < WRITE_BATCH;
                            taken += cost(f);
                            go
                        })
                        .cloned(),
                );
                first
            };
            let outcome = match self.store.dir() {
                None => Err(None),
                Some(dir) => {
                    let mut disk = lock(&self.disk);
                    let segs = disk.get_or_insert_with(|| Segments::new(dir, self.key, self.store.segment_bytes));
                    let result = segs.append(first, batch);
                    let mirror = (segs.first_seq(), segs.last_seq(), segs.bytes());
                    match result {
                        Ok(added) => Ok((added, mirror)),
                        Err(e) => Err(Some((e, mirror))),
                    }
                }
            };
            match outcome {
                Ok((added, (disk_first, disk_last, disk_bytes))) => {
                    self.store.metrics.disk_bytes.fetch_add(added, Ordering::Relaxed);
                    let mut state = self.lock();
                    let done: u64 = batch.iter().map(cost).sum();
                    state.written += batch.len() as u64;
                    state.unwritten_bytes -= done;
                    self.store.unwritten.fetch_sub(done, Ordering::Relaxed);
                    self.store.tails.fetch_add(done, Ordering::Relaxed);
                    state.disk_first = disk_first;
                    state.disk_last = disk_last;
                    state.disk_bytes = disk_bytes;
                    self.trim_hot(&mut state, false);
                }
                Err(failure) => {
                    self.fall_back(failure);
                    return;
                }
            }
            self.flushed.notify_waiters();
            self.store.enforce_tails();
            self.store.enforce_budget();
        }
    }

    /// Turns the log into a RAM ring after a disk failure (`None`: the
    /// directory went away at shutdown, which is not worth a warning).
    fn fall_back(&self, failure: Option<(std::io::Error, DiskMirror)>) {
        let mut state = self.lock();
        if let Some((e, (disk_first, disk_last, disk_bytes))) = &failure {
            let counted = disk_bytes.saturating_sub(state.disk_bytes);
            self.store.metrics.disk_bytes.fetch_add(counted, Ordering::Relaxed);
            state.disk_first = *disk_first;
            state.disk_last = *disk_last;
            state.disk_bytes = *disk_bytes;
            state.written = state.written.max(disk_last.unwrap_or(0));
            crate::log_warn!(
                "[replay] process {}: writing its replay log failed ({}): keeping the last {} MiB in memory",
                self.process_id,
                crate::base::goerr::io_text(e),
                RING_BYTES >> 20
            );
            self.store.metrics.fallbacks.fetch_add(1, Ordering::Relaxed);
        }
        if state.spill {
            let tail = state.hot_bytes - state.unwritten_bytes;
            self.store.tails.fetch_sub(tail, Ordering::Relaxed);
        }
        state.spill = false;
        state.writer_busy = false;
        self.store.unwritten.fetch_sub(state.unwritten_bytes, Ordering::Relaxed);
        state.unwritten_bytes = 0;
        self.trim_ring(&mut state);
        drop(state);
        self.flushed.notify_waiters();
    }

    /// Drops written frames from RAM past the hot-tail bound (all but the
    /// last frame once the process exited, or while the tails of all logs
    /// together are over their global bound).
    fn trim_hot(&self, state: &mut LogState, force: bool) {
        let keep = if force || state.exit_stamp.is_some() || self.store.tails_over() {
            0
        } else {
            self.store.hot_tail_bytes
        };
        let freed = self.drop_oldest_while(state, |s| {
            s.hot_first() <= s.written && s.hot_bytes - s.unwritten_bytes > keep
        });
        self.store.tails.fetch_sub(freed, Ordering::Relaxed);
    }

    /// RAM-ring bound: the oldest frames go once the ring is full.
    pub(super) fn trim_ring(&self, state: &mut LogState) {
        self.drop_oldest_while(state, |s| s.hot_bytes > RING_BYTES);
    }

    /// Drops the oldest frames from RAM while `over` holds, always keeping
    /// the newest one, and returns the bytes freed (already taken off the
    /// RAM gauge).
    fn drop_oldest_while(&self, state: &mut LogState, over: impl Fn(&LogState) -> bool) -> u64 {
        let mut freed = 0;
        while state.hot.len() > 1 && over(state) {
            let Some(front) = state.hot.pop_front() else { break };
            let c = cost(&front);
            state.hot_bytes -= c;
            freed += c;
            self.store.recycle(front);
        }
        self.store.metrics.ram_bytes.fetch_sub(freed, Ordering::Relaxed);
        freed
    }
}

impl StoredLog for ReplayLog {
    fn write_behind(self: Arc<Self>) {
        self.flush();
    }

    /// Trims this log's hot tail to its unwritten frames now (the global
    /// bound was crossed, possibly by another log's writes).
    fn trim_tail(&self) {
        let mut state = self.lock();
        if state.spill {
            self.trim_hot(&mut state, true);
        }
    }

    /// For eviction: the exit order of an exited log nobody follows that
    /// still has bytes on disk.
    fn idle_exit_stamp(&self) -> Option<u64> {
        let state = self.lock();
        if state.followers.is_empty() && state.disk_bytes > 0 {
            state.exit_stamp
        } else {
            None
        }
    }

    /// For eviction: the age of the oldest segment, if one may go (with
    /// `sealed_only`, never the segment being written).
    fn evictable_stamp(&self, sealed_only: bool) -> Option<u64> {
        let disk = lock(&self.disk);
        disk.as_ref()
            .filter(|s| s.count() >= if sealed_only { 2 } else { 1 })
            .and_then(Segments::oldest_stamp)
    }

    /// Removes this log's segments (`whole`) or its oldest one; logs the
    /// eviction once at WARN. Returns whether anything was removed.
    fn evict_disk(&self, whole: bool) -> bool {
        let (freed, mirror) = {
            let mut disk = lock(&self.disk);
            let Some(segs) = disk.as_mut() else {
                return false;
            };
            let freed = if whole {
                segs.remove_all()
            } else {
                segs.evict_oldest().map_or(0, |s| s.bytes)
            };
            (freed, (segs.first_seq(), segs.last_seq(), segs.bytes()))
        };
        if freed == 0 {
            return false;
        }
        self.store.metrics.disk_bytes.fetch_sub(freed, Ordering::Relaxed);
        let first_kept = {
            let mut state = self.lock();
            (state.disk_first, state.disk_last, state.disk_bytes) = mirror;
            let hot_first = state.hot_first();
            state.disk_first.map_or(hot_first, |d| d.min(hot_first))
        };
        crate::log_warn!(
            "[replay] disk budget exceeded: dropped {} bytes of the replay log of {} process {}; it now starts at seq {}",
            freed,
            if whole { "exited" } else { "live" },
            self.process_id,
            first_kept
        );
        true
    }

    fn has_exited(&self) -> bool {
        ReplayLog::has_exited(self)
    }
}
