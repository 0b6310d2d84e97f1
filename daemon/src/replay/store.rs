//! Daemon-wide side of the replay logs: the private spill directory, the
//! sweep of directories left by dead daemons, the disk budget and its
//! eviction order, RAM accounting across logs, their metrics, and the
//! disk-writer threads that run the logs' write-behind jobs.
//!
//! Layout: `<replay-dir>/daemon-<pid>-<n>/<log key>-<n>.seg`. The replay dir
//! and each daemon directory are 0700, segment files 0600, all owned by
//! the daemon's user. A daemon removes its own directory when it stops; a
//! directory whose owner is gone (a SIGKILLed daemon, a crash before a
//! reboot) is removed by the next daemon that starts on the same replay
//! dir and host: each daemon holds a lock on its directory's `node`
//! record (its host name) for its lifetime. A directory whose lock is
//! held, or that another host wrote, is never touched.

use super::frame::{Frame, POOLED_BUF};
use crate::base::safedir;
use crate::protocol::metrics::ReplayMetrics;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Default disk budget for all logs together.
pub(crate) const DEFAULT_BUDGET_MIB: u64 = 2048;
/// Segment file size.
const SEGMENT_BYTES: u64 = 8 << 20;
/// Written frames a running process keeps in RAM for live followers. A
/// follower reading a fast child lags by about its socket buffer plus one
/// batch; at 256 KiB it fell behind the tail and read its own live stream
/// back from disk (1 GiB stream: 0.70x the all-RAM build's rate, against
/// 0.90x at 1 MiB and 0.89x at 4 MiB, `harness bench`, both orders).
pub(crate) const HOT_TAIL: u64 = 1 << 20;
/// Written frames all running processes together keep in RAM. Past it,
/// every hot tail is trimmed to its unwritten frames (followers then read
/// from disk), so many chatty processes cannot add up to N x HOT_TAIL.
pub(crate) const GLOBAL_HOT_TAIL: u64 = 32 << 20;
/// Frames a process may have in RAM that are not on disk yet; past this
/// its pipe reader waits for the disk writer.
pub(crate) const WRITE_BEHIND: u64 = 1 << 20;
/// Not-yet-written bytes across all processes past which every pipe
/// reader with unwritten frames waits.
pub(crate) const GLOBAL_WRITE_BEHIND: u64 = 16 << 20;
/// The in-memory ring of a log that cannot use the disk (the Go daemon's
/// per-log bound).
pub(crate) const RING_BYTES: u64 = 16 << 20;
/// How long an exited process stays registered after its exit frame.
pub(crate) const RETENTION: std::time::Duration = std::time::Duration::from_secs(15 * 60);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Settings of the store, from the command line (and test-only env).
#[derive(Debug, Clone)]
pub(crate) struct StoreConfig {
    /// `-replay-dir`; `None` = the default location.
    pub dir: Option<PathBuf>,
    pub budget_bytes: u64,
    pub segment_bytes: u64,
    /// Written bytes a running process keeps in RAM.
    pub hot_tail_bytes: u64,
    /// Written bytes all logs together keep in RAM.
    pub global_hot_bytes: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            dir: None,
            budget_bytes: DEFAULT_BUDGET_MIB << 20,
            segment_bytes: test_env("REMORA_TEST_SEGMENT_BYTES").unwrap_or(SEGMENT_BYTES),
            hot_tail_bytes: test_env("REMORA_TEST_HOT_TAIL_BYTES").unwrap_or(HOT_TAIL),
            global_hot_bytes: test_env("REMORA_TEST_GLOBAL_HOT_BYTES").unwrap_or(GLOBAL_HOT_TAIL),
        }
    }
}

/// A numeric test-only override from the environment.
pub(crate) fn test_env(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

/// The default replay directory: on disk under the user's state dir, never
/// a tmpfs by default (that would be memory again). On Windows that is
/// `%LOCALAPPDATA%\remora\replay` ([`crate::sys::os::app_state_dir`]);
/// Unix has no such directory and takes the XDG rule below.
pub(crate) fn default_dir() -> PathBuf {
    if let Some(state) = crate::sys::os::app_state_dir() {
        return state.join("remora").join("replay");
    }
    let uid = crate::sys::os::effective_uid();
    default_dir_for(
        std::env::var_os("XDG_STATE_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
        uid,
    )
}

/// [`default_dir`] for a daemon with these `XDG_STATE_HOME` and `HOME`
/// values and this uid (`remora -doctor` asks it about other daemons).
pub(crate) fn default_dir_for(
    xdg_state_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
    uid: u32,
) -> PathBuf {
    if let Some(state) = xdg_state_home.filter(|v| !v.is_empty()) {
        return PathBuf::from(state).join("remora").join("replay");
    }
    if let Some(home) = home.filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".local/state/remora/replay");
    }
    PathBuf::from(format!("/var/tmp/remora-{uid}/replay"))
}

/// The name of the directory daemon `pid` keeps its segments in starts
/// with this (`daemon-<pid>-<n>`).
pub(crate) fn own_dir_prefix(pid: u32) -> String {
    format!("daemon-{pid}-")
}

/// What the store asks of each registered log when it enforces its
/// bounds. [`super::log::ReplayLog`] implements it; the store never names
/// the log type, so the log may depend on the store and not the reverse.
pub(crate) trait StoredLog: Send + Sync {
    /// Trims the hot tail to the frames not yet on disk (the global
    /// hot-tail bound was crossed).
    fn trim_tail(&self);
    /// The exit order of an exited log nobody follows that still has
    /// bytes on disk (evicted first, oldest exit first).
    fn idle_exit_stamp(&self) -> Option<u64>;
    /// The age of the oldest segment, if one may go: with `sealed_only`,
    /// never the segment being written (the last resort allows it).
    fn evictable_stamp(&self, sealed_only: bool) -> Option<u64>;
    /// Removes all segments (`whole`) or the oldest one; returns whether
    /// anything was removed.
    fn evict_disk(&self, whole: bool) -> bool;
    /// Whether the exit frame was appended.
    fn has_exited(&self) -> bool;
    /// The disk-writer job: writes the frames not yet on disk, until none
    /// are left. Blocking; run by [`DiskWriters`].
    fn write_behind(self: Arc<Self>);
}

/// Frame buffers a store keeps for reuse (1 MiB of 32 KiB buffers).
const FRAME_POOL: usize = 32;

/// Disk-writer threads a store runs at most. Each job writes one log
/// until it caught up; more logs than threads queue for the next free
/// thread (their pipe readers wait at WRITE_BEHIND as they would behind a
/// slow disk).
const DISK_WRITER_THREADS: usize = 4;
/// How long a disk-writer thread waits for work before it exits (the
/// blocking pool's keep-alive), so an idle daemon holds none.
const DISK_WRITER_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(10);

/// The store's disk writers: a queue of logs with frames to write and up
/// to [`DISK_WRITER_THREADS`] threads taking them. A job used to be one
/// `spawn_blocking` each time a log's writer had caught up, which on a
/// fast disk is once per frame, and each was a heap allocation (the
/// task); a queue push is none once the queue has grown.
#[derive(Default)]
pub(crate) struct DiskWriters {
    queue: Mutex<WriterQueue>,
    ready: std::sync::Condvar,
}

#[derive(Default)]
struct WriterQueue {
    jobs: std::collections::VecDeque<Arc<dyn StoredLog>>,
    threads: usize,
    idle: usize,
}

impl std::fmt::Debug for DiskWriters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let q = lock(&self.queue);
        f.debug_struct("DiskWriters")
            .field("jobs", &q.jobs.len())
            .field("threads", &q.threads)
            .finish()
    }
}

impl DiskWriters {
    /// Queues `log`'s write-behind job (the caller makes sure a log is
    /// queued or running at most once). Starts a thread when none is idle
    /// and fewer than the cap run; gives the job back when no thread runs
    /// and none can be started, so the caller runs it another way.
    pub(crate) fn submit(self: &Arc<Self>, log: Arc<dyn StoredLog>) -> Result<(), Arc<dyn StoredLog>> {
        let mut q = lock(&self.queue);
        q.jobs.push_back(log);
        // Idle threads count themselves until they woke, so a second job
        // before the first wake-up finds one idle thread for two jobs and
        // starts another.
        if q.idle >= q.jobs.len() {
            drop(q);
            self.ready.notify_one();
            return Ok(());
        }
        if q.threads >= DISK_WRITER_THREADS {
            return Ok(()); // A busy thread takes it when it is done.
        }
        q.threads += 1;
        let writers = self.clone();
        let started = std::thread::Builder::new()
            .name("remora-disk".into())
            .spawn(move || writers.work());
        if started.is_ok() {
            return Ok(());
        }
        q.threads -= 1;
        if q.threads > 0 {
            return Ok(()); // A running thread takes it.
        }
        q.jobs.pop_back().map_or(Ok(()), Err)
    }

    /// One thread: jobs until the queue stayed empty for the keep-alive.
    fn work(self: Arc<Self>) {
        let mut q = lock(&self.queue);
        loop {
            if let Some(job) = q.jobs.pop_front() {
                // A burst (thousands of exit frames at once) must not
                // leave a queue sized for it.
                if q.jobs.is_empty() && q.jobs.capacity() > 64 {
                    q.jobs.shrink_to(64);
                }
                drop(q);
                job.write_behind();
                q = lock(&self.queue);
                continue;
            }
            q.idle += 1;
            let (next, waited) = self
                .ready
                .wait_timeout(q, DISK_WRITER_KEEP_ALIVE)
                .unwrap_or_else(|p| p.into_inner());
            q = next;
            q.idle -= 1;
            if waited.timed_out() && q.jobs.is_empty() {
                q.threads -= 1;
                return;
            }
        }
    }

    /// Threads running now (tests).
    #[cfg(test)]
    pub(crate) fn threads(&self) -> usize {
        lock(&self.queue).threads
    }
}

/// A registered log, held weakly: the store never keeps a log alive.
type LogRef = Weak<dyn StoredLog>;

/// The replay store shared by every log of one daemon.
#[derive(Debug)]
pub(crate) struct ReplayStore {
    /// This daemon's directory; `None` when the disk cannot be used (every
    /// log is then a RAM ring).
    dir: Option<OwnDir>,
    pub budget_bytes: u64,
    pub segment_bytes: u64,
    pub hot_tail_bytes: u64,
    pub global_hot_bytes: u64,
    pub metrics: Arc<ReplayMetrics>,
    /// Bytes in RAM not yet on disk, across logs.
    pub unwritten: AtomicU64,
    /// Bytes in RAM already on disk (the hot tails), across spilling logs.
    pub tails: AtomicU64,
    logs: Mutex<HashMap<u64, LogRef>>,
    /// Frame buffers the logs dropped, for the next pipe reads (at most
    /// [`FRAME_POOL`]): a stream then allocates nothing per frame.
    frame_pool: Mutex<Vec<Arc<[u8]>>>,
    /// The threads that write logs' frames to disk.
    pub(crate) writers: Arc<DiskWriters>,
    evicting: Mutex<()>,
    trimming: Mutex<()>,
    removed: AtomicBool,
}

impl ReplayStore {
    /// Prepares the replay directory and sweeps stale ones. Any failure
    /// leaves the store RAM-only, with one WARN and a fallback counted.
    pub(crate) fn open(config: StoreConfig, metrics: Arc<ReplayMetrics>) -> Arc<ReplayStore> {
        let base = config.dir.clone().unwrap_or_else(default_dir);
        let dir = match prepare(&base) {
            Ok(dir) => Some(dir),
            Err(e) => {
                crate::log_warn!(
                    "[replay] cannot use {} ({}): replay logs stay in memory, {} MiB per process",
                    base.display(),
                    e,
                    RING_BYTES >> 20
                );
                metrics.fallbacks.fetch_add(1, Ordering::Relaxed);
                None
            }
        };
        ReplayStore::with_dir(dir, &config, metrics)
    }

    /// The store itself, over `dir` (or RAM only), with nothing logged yet.
    fn with_dir(dir: Option<OwnDir>, config: &StoreConfig, metrics: Arc<ReplayMetrics>) -> Arc<ReplayStore> {
        Arc::new(ReplayStore {
            dir,
            budget_bytes: config.budget_bytes,
            segment_bytes: config.segment_bytes.max(1),
            hot_tail_bytes: config.hot_tail_bytes,
            global_hot_bytes: config.global_hot_bytes,
            metrics,
            unwritten: AtomicU64::new(0),
            tails: AtomicU64::new(0),
            logs: Mutex::new(HashMap::new()),
            frame_pool: Mutex::new(Vec::new()),
            writers: Arc::default(),
            evicting: Mutex::new(()),
            trimming: Mutex::new(()),
            removed: AtomicBool::new(false),
        })
    }

    /// This daemon's segment directory, if spilling is possible.
    pub(crate) fn dir(&self) -> Option<Arc<safedir::Dir>> {
        if self.removed.load(Ordering::Acquire) {
            return None;
        }
        self.dir.as_ref().map(|d| d.fd.clone())
    }

    /// A frame buffer of [`POOLED_BUF`] bytes that nothing else holds: one
    /// the logs gave back (the pool keeps only those), else a new one.
    pub(crate) fn frame_buffer(&self) -> Arc<[u8]> {
        let reused = lock(&self.frame_pool).pop();
        reused.unwrap_or_else(|| std::iter::repeat_n(0u8, POOLED_BUF).collect())
    }

    /// Keeps a dropped frame's buffer for the next read when it was the
    /// buffer's last holder and the pool has room; frees it otherwise.
    pub(crate) fn recycle(&self, frame: Frame) {
        if let Frame::Data(_, payload) = frame {
            if let Some(buf) = payload.into_pool_buffer() {
                self.give_back(buf);
            }
        }
    }

    /// Keeps an unused frame buffer (one of the pool's size that nothing
    /// else holds) for the next read while the pool has room; frees it
    /// otherwise.
    pub(crate) fn give_back(&self, mut buf: Arc<[u8]>) {
        if buf.len() != POOLED_BUF || Arc::get_mut(&mut buf).is_none() {
            return;
        }
        let mut pool = lock(&self.frame_pool);
        if pool.len() < FRAME_POOL {
            pool.push(buf);
        }
    }

    /// Buffers in the frame pool now (tests).
    #[cfg(test)]
    pub(crate) fn pooled_buffers(&self) -> usize {
        lock(&self.frame_pool).len()
    }

    /// Registers a log under its key, for the bounds the store enforces.
    pub(crate) fn register(&self, key: u64, log: LogRef) {
        lock(&self.logs).insert(key, log);
    }

    pub(crate) fn unregister(&self, key: u64) {
        let mut logs = lock(&self.logs);
        logs.remove(&key);
        // A burst of processes must not leave a table sized for the burst.
        if logs.capacity() > 2 * logs.len() + 64 {
            logs.shrink_to_fit();
        }
    }

    /// Whether the hot tails together are over their global bound.
    pub(crate) fn tails_over(&self) -> bool {
        self.tails.load(Ordering::Acquire) > self.global_hot_bytes
    }

    /// Enforces the global hot-tail bound (called by disk writers after
    /// they trimmed their own tail): every log's tail goes, quiet ones
    /// included, so the next trim is a whole bound of writes away.
    pub(crate) fn enforce_tails(&self) {
        if !self.tails_over() {
            return;
        }
        let Ok(_one) = self.trimming.try_lock() else {
            return; // Another writer is trimming.
        };
        let logs: Vec<Arc<dyn StoredLog>> = lock(&self.logs).values().filter_map(Weak::upgrade).collect();
        for log in logs {
            log.trim_tail();
        }
    }

    /// Enforces the disk budget (called by disk writers after they wrote).
    /// First the on-disk logs of exited processes nobody follows, oldest
    /// exit first; then the oldest segments of running processes; last
    /// the oldest segments of exited logs someone is still replaying.
    /// Never the segment a log is writing.
    pub(crate) fn enforce_budget(&self) {
        if self.metrics.disk_bytes.load(Ordering::Acquire) <= self.budget_bytes {
            return;
        }
        let Ok(_one) = self.evicting.try_lock() else {
            return; // Another writer is evicting.
        };
        let logs: Vec<Arc<dyn StoredLog>> = lock(&self.logs).values().filter_map(Weak::upgrade).collect();
        let over = || self.metrics.disk_bytes.load(Ordering::Acquire) > self.budget_bytes;
        let mut idle: Vec<(u64, &Arc<dyn StoredLog>)> = logs
            .iter()
            .filter_map(|l| l.idle_exit_stamp().map(|stamp| (stamp, l)))
            .collect();
        idle.sort_by_key(|(stamp, _)| *stamp);
        for (_, log) in idle {
            if !over() {
                return;
            }
            if log.evict_disk(true) {
                self.metrics.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Sealed segments of running logs, then of followed exited ones;
        // then, as the last resort, the segments being written, in the
        // same order, so the budget holds whatever the number of running
        // processes.
        for (exited, sealed_only) in [(false, true), (true, true), (false, false), (true, false)] {
            while over() {
                let oldest = logs
                    .iter()
                    .filter(|l| l.has_exited() == exited)
                    .filter_map(|l| l.evictable_stamp(sealed_only).map(|stamp| (stamp, l)))
                    .min_by_key(|(stamp, _)| *stamp);
                let Some((_, log)) = oldest else {
                    break;
                };
                if !log.evict_disk(false) {
                    break;
                }
                self.metrics.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Removes this daemon's directory (graceful shutdown). Logs still
    /// alive fall back to RAM for anything they append later.
    pub(crate) fn remove_own_dir(&self) {
        if let Some(dir) = &self.dir {
            if !self.removed.swap(true, Ordering::AcqRel)
                && safedir::remove_flat_dir_in(&dir.base, dir.name.as_bytes()).is_err()
            {
                // Where an unlinked file keeps its name until its last
                // handle closes (Windows without POSIX deletes, Wine), the
                // open owner record keeps the directory from going:
                // closed, the second try removes it. (On Unix an unlinked
                // open file leaves the directory at once, so the second
                // try only meets a failure that stays; the record closes
                // with the store soon after anyway.)
                drop(lock(&dir.owner).take());
                let _ = safedir::remove_flat_dir_in(&dir.base, dir.name.as_bytes());
            }
        }
    }
}

impl Drop for ReplayStore {
    fn drop(&mut self) {
        self.remove_own_dir();
    }
}

/// This daemon's own directory inside the replay dir.
#[derive(Debug)]
struct OwnDir {
    /// The verified replay dir, to remove `name` from at the end.
    base: safedir::Dir,
    name: String,
    fd: Arc<safedir::Dir>,
    /// The owner record, flock-ed for the daemon's lifetime: the lock is
    /// what tells a later daemon this directory is live. Taken (closed)
    /// only when the removal at the end cannot go while it is open.
    owner: Mutex<Option<std::fs::File>>,
}

/// Opens the replay dir level by level from `/` ([`safedir`]: every level
/// ours or root's, none writable by others without the sticky bit, the
/// last one ours and 0700, no links followed), sweeps stale daemon
/// directories and creates this daemon's own, all through descriptors.
/// A replay dir the daemon did not make keeps its mode (audit F4); in
/// one others can write (sticky, as `/tmp`) its `remora-<uid>`
/// subdirectory is used instead, and the log says so.
fn prepare(base: &Path) -> std::io::Result<OwnDir> {
    let private = safedir::open_private_dir(base).map_err(std::io::Error::other)?;
    if private.path != base {
        crate::log_info!(
            "[replay] {} is a directory other users can write, and its mode is not this daemon's to change: replay logs go to {}",
            base.display(),
            private.path.display()
        );
    }
    let base_fd = private.fd;
    let base = private.path.as_path();
    sweep_stale(&base_fd, base);
    // The counter keeps two stores of one process apart (unit tests).
    static STORES: AtomicU64 = AtomicU64::new(0);
    let n = STORES.fetch_add(1, Ordering::Relaxed);
    let name = format!("{}{n}", own_dir_prefix(std::process::id()));
    // Only a dead daemon that had our pid can have left this name.
    let _ = safedir::remove_flat_dir_in(&base_fd, name.as_bytes());
    safedir::make_dir_in(&base_fd, name.as_bytes(), 0o700)?;
    let fd = safedir::open_dir_in(&base_fd, name.as_bytes())?;
    if safedir::owner_of(&fd)? != safedir::own_uid() {
        return Err(std::io::Error::other("the new daemon directory is not ours"));
    }
    // The owner record: locked first, then named, so a sweeping daemon
    // never finds this host's name in an unlocked record of a live one.
    let mut owner = safedir::open_file_at(
        &fd,
        OWNER_FILE.as_bytes(),
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        0o600,
    )?;
    // A file system without locks (NFS mounted `nolock`: ENOLCK) fails
    // this; the directory is still usable, and a sweeper, which cannot
    // take the lock either, leaves it alone.
    crate::sys::os::try_lock(&owner);
    std::io::Write::write_all(&mut owner, crate::sys::os::host_name().as_bytes())?;
    Ok(OwnDir {
        base: base_fd,
        name,
        fd: Arc::new(fd),
        owner: Mutex::new(Some(owner)),
    })
}

/// A daemon directory's owner record: the host name of the daemon that
/// made it, flock-ed by that daemon for as long as it runs.
const OWNER_FILE: &str = "node";

/// Removes `daemon-*` directories that are provably stale: their owner
/// record names this host and nobody holds its lock (locks die with their
/// process, whatever killed it, and across a reboot). A directory of
/// another host (a replay dir on a shared home, where a live daemon's lock
/// may not be visible from here), one whose record is held, and one
/// without a record are never touched.
fn sweep_stale(base: &safedir::Dir, base_path: &Path) {
    let Ok(names) = safedir::read_names(base) else {
        return;
    };
    let here = crate::sys::os::host_name();
    if here.is_empty() {
        return;
    }
    for name in names {
        if !name.starts_with(b"daemon-") {
            continue;
        }
        let Ok(dir) = safedir::open_dir_in(base, &name) else {
            continue; // A link or a file: not ours to judge.
        };
        if safedir::owner_of(&dir).ok() != Some(safedir::own_uid()) {
            continue;
        }
        // Opened without blocking and without following: a FIFO or a
        // link planted as the record cannot stall or redirect the sweep.
        let Ok(record) = safedir::open_file_at(&dir, OWNER_FILE.as_bytes(), libc::O_RDONLY, 0) else {
            continue;
        };
        if !safedir::is_own_regular(&record) {
            continue;
        }
        let mut text = Vec::new();
        if std::io::Read::read_to_end(&mut std::io::Read::take(&record, 256), &mut text).is_err()
            || text != here.as_bytes()
        {
            continue;
        }
        // Closing the record drops the lock again.
        if !crate::sys::os::try_lock(&record) {
            continue; // Its daemon is alive.
        }
        let shown = base_path.join(String::from_utf8_lossy(&name).as_ref());
        match safedir::remove_flat_dir_in(base, &name) {
            Ok(()) => crate::log_info!("[replay] removed stale replay directory {}", shown.display()),
            Err(e) => crate::log_warn!("[replay] cannot remove stale {}: {}", shown.display(), e),
        }
    }
}

#[cfg(test)]
impl ReplayStore {
    /// A store that never touches the disk (unit tests).
    pub(crate) fn in_memory() -> Arc<ReplayStore> {
        let config = StoreConfig {
            dir: None,
            budget_bytes: 0,
            segment_bytes: SEGMENT_BYTES,
            hot_tail_bytes: HOT_TAIL,
            global_hot_bytes: GLOBAL_HOT_TAIL,
        };
        ReplayStore::with_dir(None, &config, Arc::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Condvar;

    /// A log whose write-behind job waits at a shared gate, counting how
    /// many jobs run at once and how many finished.
    struct GatedJob {
        running: Arc<AtomicUsize>,
        peak: Arc<AtomicUsize>,
        done: Arc<AtomicUsize>,
        gate: Arc<(Mutex<bool>, Condvar)>,
    }

    impl StoredLog for GatedJob {
        fn trim_tail(&self) {}
        fn idle_exit_stamp(&self) -> Option<u64> {
            None
        }
        fn evictable_stamp(&self, _sealed_only: bool) -> Option<u64> {
            None
        }
        fn evict_disk(&self, _whole: bool) -> bool {
            false
        }
        fn has_exited(&self) -> bool {
            false
        }
        fn write_behind(self: Arc<Self>) {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            let (open, opened) = &*self.gate;
            let mut is_open = lock(open);
            while !*is_open {
                is_open = opened.wait(is_open).unwrap_or_else(|p| p.into_inner());
            }
            drop(is_open);
            self.running.fetch_sub(1, Ordering::SeqCst);
            self.done.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Polls `done` until it holds (the deadline only costs time when a
    /// job was lost).
    fn wait_for(what: &str, done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn disk_writers_run_every_job_on_at_most_their_cap_of_threads() {
        let writers: Arc<DiskWriters> = Arc::default();
        let (running, peak, done) = (Arc::default(), Arc::default(), Arc::<AtomicUsize>::default());
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let job = || {
            Arc::new(GatedJob {
                running: Arc::clone(&running),
                peak: Arc::clone(&peak),
                done: Arc::clone(&done),
                gate: gate.clone(),
            })
        };
        const JOBS: usize = 3 * DISK_WRITER_THREADS + 1;
        for _ in 0..JOBS {
            assert!(writers.submit(job()).is_ok());
        }
        wait_for("the writers did not start", || {
            running.load(Ordering::SeqCst) == DISK_WRITER_THREADS
        });
        assert_eq!(writers.threads(), DISK_WRITER_THREADS);
        *lock(&gate.0) = true;
        gate.1.notify_all();
        wait_for("a queued job never ran", || done.load(Ordering::SeqCst) == JOBS);
        assert_eq!(peak.load(Ordering::SeqCst), DISK_WRITER_THREADS);
        // Idle threads take new jobs: no thread past the cap.
        for _ in 0..JOBS {
            assert!(writers.submit(job()).is_ok());
        }
        wait_for("a job after the idle wait never ran", || {
            done.load(Ordering::SeqCst) == 2 * JOBS
        });
        assert!(writers.threads() <= DISK_WRITER_THREADS);
    }
}
