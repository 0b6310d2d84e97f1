//! The process type: one managed child ([`ManagedProcess`]) as the
//! registry holds it, its signals and kills, its stdin queue, and the
//! table the registry and the retention sweeper share.

// The platform half of the supervisor (signals, group kill, exit watch) is
// `crate::sys::process`; `sys::` below names it.
use crate::sys::process as sys;

use super::stdin::{plan_stdin_write, StdinPlan};
use crate::replay::log::ReplayLog;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How long to wait for the reap after SIGKILL: 7 s, as the reference
/// measured (`docs/record/process-killandwait.md`: a `timeoutMs:500`
/// request against an unreapable child answered after 7.5 s). SIGKILL
/// cannot be caught; this only guards against a child stuck in
/// uninterruptible sleep.
const AFTER_KILL_WAIT: Duration = Duration::from_secs(7);

/// How a [`ManagedProcess::terminate`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Termination {
    /// It had already exited: nothing was sent.
    AlreadyExited,
    /// It exited within the grace.
    Died,
    /// Still running after the grace, and escalation was not wanted.
    Survived,
    /// The group got SIGKILL after the grace; whether the exit followed
    /// within [`AFTER_KILL_WAIT`].
    Escalated { died: bool },
}

/// Result of a `process.stdin` request once the process was found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StdinResult {
    Accepted {
        applied: u64,
        duplicate: bool,
    },
    NotRunning,
    Gap,
    /// The queue is non-empty and this write would push it past
    /// [`STDIN_QUEUE_CAP`]: nothing enqueued, `applied` unchanged.
    QueueFull,
    /// An earlier write failed (the child closed its stdin); the text is
    /// Go's error for writing to the pipe, e.g. `write |1: broken pipe`.
    Broken(String),
}

/// Bytes a process's stdin queue may hold (accepted but not yet written
/// to the pipe). A write that would push a non-empty queue past this is
/// refused with -32002; a lone write on an empty queue always fits, since
/// the 1 MiB line cap keeps it far below.
pub(crate) const STDIN_QUEUE_CAP: usize = 16 << 20;

/// The least a queued stdin chunk is charged against [`STDIN_QUEUE_CAP`].
/// A chunk costs its bytes plus its allocation's header and the channel
/// slot that holds it (about 60 bytes together): a flood of one-byte calls
/// charged by length alone would queue 16 Mi chunks and hold ~1 GiB. At
/// 256 bytes a chunk never holds more than 1.25 times its charge, so a
/// process's queue holds at most 20 MiB whatever the chunk sizes; a chunk
/// of 256 bytes or more is charged exactly its length.
pub(crate) const STDIN_CHUNK_MIN_CHARGE: usize = 256;

/// What a queued stdin chunk of `len` bytes counts against the cap.
pub(super) fn stdin_charge(len: usize) -> usize {
    len.max(STDIN_CHUNK_MIN_CHARGE)
}

pub(super) struct StdinState {
    pub(super) applied: u64,
    pub(super) queue: Option<mpsc::UnboundedSender<Vec<u8>>>,
    pub(super) broken: Option<String>,
    pub(super) writer: Option<tokio::task::AbortHandle>,
}

/// Who asked the daemon to kill a process: the exit frame's `killedBy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KilledBy {
    /// `process.kill`, `process.killAndWait`, or a superseding spawn.
    Client,
    /// The graceful-shutdown sweep.
    Shutdown,
}

impl KilledBy {
    pub(crate) fn wire(self) -> &'static str {
        match self {
            KilledBy::Client => "client",
            KilledBy::Shutdown => "shutdown",
        }
    }
}

/// One managed child.
pub(crate) struct ManagedProcess {
    pub id: String,
    pub pid: i32,
    /// Daemon wall clock at spawn, epoch seconds (the CT-1 token).
    pub start_time: f64,
    pub log: Arc<ReplayLog>,
    /// `None` while running, then the exit code (-1: killed by a signal).
    pub(super) exit: watch::Sender<Option<i64>>,
    /// True once the zombie was reaped. Held while signalling so a signal
    /// and the reap never race (after the reap the pgid may be recycled).
    pub(super) reaped: Mutex<bool>,
    /// The agent CLI session its arguments name ([`session::key_of`](super::session::key_of)).
    pub session: Option<String>,
    /// The plugin hashes its argv names (`plugins.prune` keeps those
    /// directories while it runs), from [`crate::rundir::plugindirs::hashes_in`].
    // Windows: `plugins.prune` is not ported yet (issue 43).
    #[cfg_attr(windows, allow(dead_code))]
    pub(super) plugin_hashes: Vec<String>,
    /// The last kill request that signalled the running child; stamped on
    /// the exit frame whatever the child then did with the signal.
    pub(super) killed_by: Mutex<Option<KilledBy>>,
    pub(super) stdin: Mutex<StdinState>,
    /// What the chunks enqueued for stdin and not yet written to the pipe
    /// are charged ([`stdin_charge`]). Raised under the `stdin` lock,
    /// lowered by the writer task after each write.
    pub(super) stdin_queued: Arc<AtomicUsize>,
    /// When the exit frame was appended (starts the retention clock).
    pub(super) finished_at: std::sync::OnceLock<std::time::Instant>,
    /// True once the exit frame was appended: the child exited *and* its
    /// pipes drained. What `process.killAndWait` calls "died".
    pub(super) finished: watch::Sender<bool>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a few field stores; a panic inside one
    // cannot leave the state torn, so recover from poisoning.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ManagedProcess {
    /// Whether the exit has been observed (the process is not running).
    pub(crate) fn exited(&self) -> bool {
        self.exit.borrow().is_some()
    }

    pub(crate) fn stdin_applied(&self) -> u64 {
        lock(&self.stdin).applied
    }

    /// Signals the child unless it has already exited (the wire's
    /// `process.kill` / `killAndWait` rule), recording `by` for the exit
    /// frame. Returns whether it signalled.
    ///
    /// Reach, as the reference measured (`5db5e4a`: `sh -c "sleep 40 &
    /// wait"` + TERM leaves the sleeper; `89cb6289` strace): SIGKILL goes
    /// to the whole group, every other signal to the direct child only.
    /// The zombie is not reaped while the lock is held, so the pid cannot
    /// have been recycled.
    pub(crate) fn signal_if_running(&self, signal: i32, by: KilledBy) -> bool {
        let reaped = lock(&self.reaped);
        if *reaped || self.exited() {
            return false;
        }
        *lock(&self.killed_by) = Some(by);
        if signal == sys::SIGKILL {
            sys::signal_group(self.pid, signal);
        } else {
            sys::signal_child(self.pid, signal);
        }
        true
    }

    /// Teardown: signals whatever is left of the group, even after the
    /// leader exited (grandchildren holding the pipes), as long as the
    /// leader's zombie still pins the pgid. `by` is recorded only when the
    /// leader was still running: a process that already ended on its own
    /// was not killed by anyone.
    pub(super) fn kill_tree(&self, by: Option<KilledBy>) {
        let reaped = lock(&self.reaped);
        if !*reaped {
            if let (Some(by), false) = (by, self.exited()) {
                *lock(&self.killed_by) = Some(by);
            }
            sys::signal_group(self.pid, sys::SIGKILL);
        }
    }

    pub(super) fn reap(&self) {
        let mut reaped = lock(&self.reaped);
        if !*reaped {
            *reaped = sys::reap(self.pid);
        }
    }

    /// The kill path of `process.killAndWait` (and of a superseding
    /// spawn): `signal` unless already exited, up to `grace` for the exit
    /// frame, then, when `escalate`, a group SIGKILL and a bounded wait.
    ///
    /// The grace waits for the exit *frame*, not the exit alone, as the
    /// reference measured (record rows X1, X2a/X2b, B2): a
    /// child that ended on the signal while another member of its group
    /// still holds its output pipe has not died yet, so at the end of the
    /// grace the group gets SIGKILL (the leader's zombie still pins the
    /// pgid until the drain ends, so the signal cannot reach a recycled
    /// group). A child whose output is complete within the grace died, and
    /// its group gets nothing more.
    pub(crate) async fn terminate(&self, signal: i32, grace: Duration, escalate: bool, by: KilledBy) -> Termination {
        if !self.signal_if_running(signal, by) {
            return Termination::AlreadyExited;
        }
        if self.wait_finished(grace).await {
            return Termination::Died;
        }
        if !escalate {
            return Termination::Survived;
        }
        self.kill_tree(Some(by));
        Termination::Escalated {
            died: self.wait_finished(AFTER_KILL_WAIT).await,
        }
    }

    /// Waits up to `limit` for the exit frame; returns whether it came.
    async fn wait_finished(&self, limit: Duration) -> bool {
        let mut rx = self.finished.subscribe();
        let done = tokio::time::timeout(limit, rx.wait_for(|done| *done)).await;
        matches!(done, Ok(Ok(_)))
    }

    /// Waits up to `limit` for the exit; returns whether it happened.
    pub(crate) async fn wait_exit(&self, limit: Duration) -> bool {
        let mut rx = self.exit.subscribe();
        let exited = tokio::time::timeout(limit, rx.wait_for(|code| code.is_some())).await;
        matches!(exited, Ok(Ok(_)))
    }

    /// Applies one decoded `process.stdin` payload (see [`stdin`](super::stdin)). Planning
    /// and enqueueing happen under one lock, so concurrent requests reach
    /// the child in the order their offsets were accepted. An append
    /// enqueues `data` itself; only a partial overlap copies its fresh tail
    /// (so a queued chunk never holds more than the length it is charged).
    pub(crate) fn write_stdin(&self, offset: Option<u64>, data: Vec<u8>) -> (StdinResult, usize) {
        let mut st = lock(&self.stdin);
        let running = !self.exited();
        let (skip, new_applied) = match plan_stdin_write(st.applied, offset, data.len(), running) {
            StdinPlan::Gap => return (StdinResult::Gap, 0),
            StdinPlan::NotRunning => return (StdinResult::NotRunning, 0),
            StdinPlan::Duplicate => {
                return (
                    StdinResult::Accepted {
                        applied: st.applied,
                        duplicate: true,
                    },
                    0,
                )
            }
            StdinPlan::Write { skip, new_applied } => (skip, new_applied),
        };
        let fresh_len = data.len().saturating_sub(skip);
        if fresh_len > 0 {
            if let Some(why) = &st.broken {
                return (StdinResult::Broken(why.clone()), 0);
            }
            let charge = stdin_charge(fresh_len);
            let queued = self.stdin_queued.load(Ordering::Acquire);
            if queued > 0 && queued.saturating_add(charge) > STDIN_QUEUE_CAP {
                return (StdinResult::QueueFull, 0);
            }
            let fresh = match skip {
                0 => data,
                _ => data.get(skip..).unwrap_or_default().to_vec(),
            };
            self.stdin_queued.fetch_add(charge, Ordering::AcqRel);
            let sent = st.queue.as_ref().is_some_and(|q| q.send(fresh).is_ok());
            if !sent {
                self.stdin_queued.fetch_sub(charge, Ordering::AcqRel);
                // The writer is gone only after the exit was observed.
                return (StdinResult::NotRunning, 0);
            }
        }
        st.applied = new_applied;
        (
            StdinResult::Accepted {
                applied: new_applied,
                duplicate: false,
            },
            fresh_len,
        )
    }

    pub(super) fn stop_stdin(&self) {
        let mut st = lock(&self.stdin);
        st.queue = None;
        if let Some(writer) = st.writer.take() {
            writer.abort();
        }
    }
}

/// The table of processes, shared with the retention sweeper (which holds
/// it weakly, so it ends with the registry).
pub(super) type Table = Mutex<HashMap<String, Arc<ManagedProcess>>>;
