//! Who may hold a connection, and what a connection without the token may
//! cost before it is closed.
//!
//! Any local process that can reach the socket's directory can connect;
//! only the token makes it a client. Until a connection has sent one
//! request with the right token it is *unauthenticated*, and the daemon
//! bounds what all such connections together can take:
//!
//! * **Descriptors.** Open connections are capped at
//!   `soft RLIMIT_NOFILE − reserve` ([`connection_cap`]), so children,
//!   pipes and `files.*` always find descriptors. At the cap a new
//!   connection evicts the unauthenticated one that has been silent
//!   longest (no complete line since it was admitted, or since its last
//!   line; ties go to the oldest), but never one admitted less than
//!   [`FRESH_GRACE`] ago: a new client must have the time to send its
//!   first line and have it read, however fast others connect. When every
//!   unauthenticated connection is that fresh, the admission waits until
//!   the first of them is not (or a place frees), and the kernel's listen
//!   backlog holds the connections behind it, except one from a process
//!   that already has [`PEER_FRESH_LIMIT`] such fresh connections open:
//!   that one is closed at once, so a flooding process cannot fill the
//!   backlog in front of another client. When every open connection is
//!   authenticated, the new one is refused (closed at once).
//! * **Time.** An unauthenticated connection is closed
//!   [`AUTH_GRACE`] (30 s) after it was accepted.
//! * **Memory.** The line buffers of unauthenticated connections together
//!   hold at most [`UNAUTH_LINE_BUDGET`] bytes; a connection whose buffer
//!   would pass it is closed. Their lines are checked on the reader one at
//!   a time, so no unauthenticated request is ever queued in a task.
//! * **Log lines.** Past a burst, connections are logged only once they
//!   authenticate; the others are counted in a summary line
//!   ([`crate::serve::connlog`]).
//!
//! Authenticated connections are the owner's; their own per-connection
//! bounds (`connection.rs`) still apply.

pub(crate) use crate::base::ndjson::SharedBudget;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// How long a connection may stay open without an authenticated request.
pub(crate) const AUTH_GRACE: Duration = Duration::from_secs(30);
/// Test-only override of [`AUTH_GRACE`] in milliseconds; not part of the
/// documented interface.
pub(crate) const TEST_GRACE_ENV: &str = "REMORA_TEST_AUTH_GRACE_MS";

/// [`AUTH_GRACE`], or the test override. Removes the variable so children
/// never inherit it. Call before threads start.
pub(crate) fn grace_from_env() -> Duration {
    let Some(value) = std::env::var_os(TEST_GRACE_ENV) else {
        return AUTH_GRACE;
    };
    std::env::remove_var(TEST_GRACE_ENV);
    value
        .to_string_lossy()
        .parse::<u64>()
        .ok()
        .filter(|ms| *ms > 0)
        .map_or(AUTH_GRACE, Duration::from_millis)
}
/// How long a newly admitted connection cannot be evicted (audit N6: with
/// the oldest evicted first, a flood of same-uid connections evicted 15–30%
/// of fresh clients before their first line was read).
pub(crate) const FRESH_GRACE: Duration = Duration::from_secs(1);

/// Fresh unauthenticated connections one process may have open while a
/// newcomer of its own waits for room; past it its new connections are
/// closed at once (the peer is `SO_PEERCRED`'s / `LOCAL_PEERPID`'s pid).
pub(crate) const PEER_FRESH_LIMIT: usize = 8;

/// Line-buffer bytes all unauthenticated connections together may hold.
pub(crate) const UNAUTH_LINE_BUDGET: usize = 32 << 20;
/// Descriptors kept out of the connection cap: at least this many, and at
/// least a quarter of the limit.
pub(crate) const MIN_RESERVED_FDS: u64 = 128;
/// The cap never goes below this, even under a tiny descriptor limit.
const MIN_CAP: usize = 16;

/// The connection cap for a soft descriptor limit `soft`:
/// `soft − max(128, soft / 4)`, at least 16.
pub(crate) fn connection_cap(soft: u64) -> usize {
    let reserve = MIN_RESERVED_FDS.max(soft / 4);
    (soft.saturating_sub(reserve) as usize).max(MIN_CAP)
}

/// This process's soft descriptor limit (1024 when it cannot be read;
/// "unlimited" counts as 1 << 20).
pub(crate) fn soft_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    if lim.rlim_cur == libc::RLIM_INFINITY {
        return 1 << 20;
    }
    // `rlim_t` is u64 on Linux and macOS alike today; the conversion keeps
    // this right on a target where it is not.
    #[allow(clippy::unnecessary_cast)]
    let soft = lim.rlim_cur as u64;
    soft
}

struct Waiting {
    id: u64,
    evict: Arc<Notify>,
    /// When it was admitted.
    admitted: Instant,
    /// When it last sent a complete line (its admission until then), in
    /// ms since [`Admission::epoch`].
    heard: Arc<AtomicU64>,
    /// The connecting process, when the kernel says.
    peer: Option<i32>,
}

struct Queue {
    next_id: u64,
    /// Unauthenticated connections not yet chosen for eviction, oldest
    /// first.
    unauthenticated: VecDeque<Waiting>,
}

/// What an admission at the cap does.
enum AtCap {
    /// Tell this connection to make room.
    Evict(Waiting),
    /// Every unauthenticated connection is fresh: try again then.
    WaitUntil(Instant),
    /// As `WaitUntil`, but the newcomer's process already has
    /// [`PEER_FRESH_LIMIT`] fresh connections: refuse it.
    Crowded,
    /// Every open connection is authenticated.
    Full,
}

impl Queue {
    /// The unauthenticated connection silent longest among those past
    /// their `fresh` grace (ties: the oldest), taken out of the queue.
    /// `peer` is the newcomer's process.
    fn choose(&mut self, now: Instant, fresh: Duration, peer: Option<i32>) -> AtCap {
        let mut best: Option<(u64, usize)> = None;
        let mut first_ripe: Option<Instant> = None;
        for (at, w) in self.unauthenticated.iter().enumerate() {
            let ripe = w.admitted + fresh;
            if ripe > now {
                first_ripe = Some(first_ripe.map_or(ripe, |t| t.min(ripe)));
                continue;
            }
            let heard = w.heard.load(Ordering::Relaxed);
            if best.is_none_or(|(quietest, _)| heard < quietest) {
                best = Some((heard, at));
            }
        }
        match (best, first_ripe) {
            (Some((_, at)), _) => match self.unauthenticated.remove(at) {
                Some(w) => AtCap::Evict(w),
                None => AtCap::Full,
            },
            (None, Some(_)) if peer.is_some_and(|p| self.count_of_peer(p) >= PEER_FRESH_LIMIT) => AtCap::Crowded,
            (None, Some(t)) => AtCap::WaitUntil(t),
            (None, None) => AtCap::Full,
        }
    }
}

impl Queue {
    /// Unauthenticated connections of process `peer`.
    fn count_of_peer(&self, peer: i32) -> usize {
        self.unauthenticated.iter().filter(|w| w.peer == Some(peer)).count()
    }
}

/// The daemon's connection table, as far as admission needs one.
pub(crate) struct Admission {
    cap: usize,
    grace: Duration,
    /// [`FRESH_GRACE`]; shorter in tests.
    fresh: Duration,
    /// One permit per open connection.
    places: Arc<Semaphore>,
    queue: Mutex<Queue>,
    /// The zero of the `heard` clocks.
    epoch: Instant,
    /// Shared by the line buffers of unauthenticated connections.
    pub unauth_lines: Arc<SharedBudget>,
    /// The log lines connections without the token may cost.
    pub log_lines: crate::serve::connlog::ConnLog,
}

/// Whether a new connection was let in.
pub(crate) enum Admitted {
    /// Serve it; it holds its place until the ticket drops.
    Yes(Ticket),
    /// Every place is taken by an authenticated connection.
    Full,
    /// No room yet, and its process already waits with
    /// [`PEER_FRESH_LIMIT`] fresh connections.
    Crowded,
}

impl Admission {
    pub(crate) fn new(cap: usize, grace: Duration) -> Arc<Admission> {
        Admission::with_fresh_grace(cap, grace, FRESH_GRACE)
    }

    /// [`Admission::new`] with another [`FRESH_GRACE`].
    pub(crate) fn with_fresh_grace(cap: usize, grace: Duration, fresh: Duration) -> Arc<Admission> {
        Arc::new(Admission {
            cap,
            grace,
            fresh,
            places: Arc::new(Semaphore::new(cap)),
            queue: Mutex::new(Queue {
                next_id: 0,
                unauthenticated: VecDeque::new(),
            }),
            epoch: Instant::now(),
            unauth_lines: Arc::new(SharedBudget::new(UNAUTH_LINE_BUDGET)),
            log_lines: crate::serve::connlog::ConnLog::default(),
        })
    }

    /// The cap from this process's descriptor limit.
    pub(crate) fn from_fd_limit(grace: Duration) -> Arc<Admission> {
        Admission::new(connection_cap(soft_fd_limit()), grace)
    }

    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// How long a connection may stay without an authenticated request.
    pub(crate) fn grace(&self) -> Duration {
        self.grace
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn clock_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Admits a new connection. At the cap, the unauthenticated connection
    /// silent longest (and past its [`FRESH_GRACE`]) is told to close and
    /// this waits for a place, so the daemon never holds more than `cap`
    /// connections plus the one being admitted. The accept loop calls this
    /// before it accepts again.
    /// `peer` is the connecting process, when known.
    pub(crate) async fn admit(self: &Arc<Self>, peer: Option<i32>) -> Admitted {
        let permit = loop {
            if let Ok(permit) = self.places.clone().try_acquire_owned() {
                break permit;
            }
            let choice = self.lock().choose(Instant::now(), self.fresh, peer);
            match choice {
                AtCap::Full => return Admitted::Full,
                AtCap::Crowded => return Admitted::Crowded,
                AtCap::Evict(quietest) => {
                    quietest.evict.notify_one();
                    match self.places.clone().acquire_owned().await {
                        Ok(permit) => break permit,
                        Err(_) => return Admitted::Full,
                    }
                }
                AtCap::WaitUntil(ripe) => {
                    tokio::select! {
                        place = self.places.clone().acquire_owned() => match place {
                            Ok(permit) => break permit,
                            Err(_) => return Admitted::Full,
                        },
                        _ = tokio::time::sleep_until(ripe.into()) => {}
                    }
                }
            }
        };
        let now = self.clock_ms();
        let mut queue = self.lock();
        queue.next_id += 1;
        let id = queue.next_id;
        let evict = Arc::new(Notify::new());
        let heard = Arc::new(AtomicU64::new(now));
        queue.unauthenticated.push_back(Waiting {
            id,
            evict: evict.clone(),
            admitted: Instant::now(),
            heard: heard.clone(),
            peer,
        });
        Admitted::Yes(Ticket {
            admission: self.clone(),
            id,
            evict,
            heard,
            _place: permit,
            authenticated: false,
        })
    }

    /// Open connections now.
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        self.cap - self.places.available_permits()
    }

    fn forget(&self, id: u64) {
        let mut queue = self.lock();
        if let Some(at) = queue.unauthenticated.iter().position(|w| w.id == id) {
            queue.unauthenticated.remove(at);
        }
    }
}

/// One connection's place in the table; dropping it gives the place back.
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    evict: Arc<Notify>,
    heard: Arc<AtomicU64>,
    _place: OwnedSemaphorePermit,
    authenticated: bool,
}

impl Ticket {
    /// Resolves when an admission at the cap chose this connection to make
    /// room. Only unauthenticated connections are chosen; one that
    /// authenticates in the same instant still goes.
    pub(crate) async fn evicted(&self) {
        self.evict.notified().await;
    }

    pub(crate) fn is_authenticated(&self) -> bool {
        self.authenticated
    }

    /// The connection sent a complete line (without the token, or not yet
    /// checked): it is no longer silent, so evictions take it after the
    /// ones that have said nothing for longer.
    pub(crate) fn heard(&self) {
        if !self.authenticated {
            self.heard.store(self.admission.clock_ms(), Ordering::Relaxed);
        }
    }

    /// The connection sent a request with the right token: it is no longer
    /// a candidate for eviction, the grace or the unauthenticated budget.
    pub(crate) fn authenticate(&mut self) {
        if !self.authenticated {
            self.authenticated = true;
            self.admission.forget(self.id);
        }
    }

    /// The budget an unauthenticated connection's line buffer charges.
    pub(crate) fn line_budget(&self) -> Arc<SharedBudget> {
        self.admission.unauth_lines.clone()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.forget(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yes(a: &Arc<Admission>) -> Ticket {
        match poll_once(a.admit(None)) {
            Some(Admitted::Yes(t)) => t,
            Some(Admitted::Full | Admitted::Crowded) => panic!("refused"),
            None => panic!("still waiting"),
        }
    }

    #[test]
    fn the_cap_keeps_a_reserve_of_descriptors() {
        assert_eq!(connection_cap(1024), 768);
        assert_eq!(connection_cap(512), 384);
        assert_eq!(connection_cap(65536), 49152);
        assert_eq!(connection_cap(100), 16);
    }

    #[test]
    fn at_the_cap_the_oldest_unauthenticated_connection_makes_room() {
        let a = Admission::with_fresh_grace(3, AUTH_GRACE, Duration::ZERO);
        let mut owner = yes(&a);
        owner.authenticate();
        let first = yes(&a);
        let second = yes(&a);
        assert_eq!(a.open(), 3);
        let mut admitting = std::pin::pin!(a.admit(None));
        // At the cap: `first` is told to go and the admission waits.
        assert!(poll_once(admitting.as_mut()).is_none());
        assert!(poll_once(first.evicted()).is_some());
        assert!(poll_once(second.evicted()).is_none());
        assert!(poll_once(owner.evicted()).is_none());
        drop(first);
        let third = match poll_once(admitting.as_mut()) {
            Some(Admitted::Yes(t)) => t,
            _ => panic!("a place was freed"),
        };
        assert_eq!(a.open(), 3);
        drop((second, third, owner));
        assert_eq!(a.open(), 0);
    }

    #[test]
    fn authenticated_connections_are_never_evicted() {
        let a = Admission::with_fresh_grace(2, AUTH_GRACE, Duration::ZERO);
        let mut x = yes(&a);
        let mut y = yes(&a);
        x.authenticate();
        y.authenticate();
        assert!(matches!(poll_once(a.admit(None)), Some(Admitted::Full)));
        drop(x);
        let z = yes(&a);
        assert_eq!(a.open(), 2);
        drop((y, z));
        assert_eq!(a.open(), 0);
    }

    #[test]
    fn the_longest_silent_connection_goes_first() {
        let a = Admission::with_fresh_grace(2, AUTH_GRACE, Duration::ZERO);
        let older = yes(&a);
        let newer = yes(&a);
        // The older one sends a line (without the token) later than the
        // newer one was admitted: the newer one has been silent longer.
        std::thread::sleep(Duration::from_millis(5));
        older.heard();
        let mut admitting = std::pin::pin!(a.admit(None));
        assert!(poll_once(admitting.as_mut()).is_none());
        assert!(poll_once(newer.evicted()).is_some(), "the silent one goes");
        assert!(poll_once(older.evicted()).is_none());
        drop((newer, older));
    }

    /// Audit N6: a connection admitted less than the fresh grace ago is
    /// never evicted; the admission waits for the grace (or a place).
    #[tokio::test(flavor = "current_thread")]
    async fn a_fresh_connection_is_not_evicted() {
        let a = Admission::with_fresh_grace(2, AUTH_GRACE, Duration::from_millis(300));
        let first = yes(&a);
        let second = yes(&a);
        let waited = tokio::time::timeout(Duration::from_millis(100), a.admit(None)).await;
        assert!(waited.is_err(), "no room made within the grace");
        assert!(poll_once(first.evicted()).is_none());
        assert!(poll_once(second.evicted()).is_none());
        // Past the grace the oldest silent one makes room.
        let evicted = tokio::spawn({
            let first = std::sync::Arc::new(first);
            async move {
                first.evicted().await;
                drop(first);
            }
        });
        let third = match tokio::time::timeout(Duration::from_secs(5), a.admit(None)).await {
            Ok(Admitted::Yes(t)) => t,
            _ => panic!("admitted once the grace is over"),
        };
        evicted.await.unwrap();
        assert!(poll_once(second.evicted()).is_none());
        drop((second, third));
        assert_eq!(a.open(), 0);
    }

    /// A process that already waits with its limit of fresh connections
    /// is turned away at once instead of queueing; another is not.
    #[tokio::test(flavor = "current_thread")]
    async fn a_crowding_process_is_turned_away_while_others_wait() {
        let a = Admission::with_fresh_grace(PEER_FRESH_LIMIT, AUTH_GRACE, Duration::from_secs(3600));
        let flood: Vec<Ticket> = (0..PEER_FRESH_LIMIT)
            .map(|_| match poll_once(a.admit(Some(7))) {
                Some(Admitted::Yes(t)) => t,
                _ => panic!("room left"),
            })
            .collect();
        assert!(matches!(poll_once(a.admit(Some(7))), Some(Admitted::Crowded)));
        let other = tokio::time::timeout(Duration::from_millis(50), a.admit(Some(8))).await;
        assert!(other.is_err(), "another process waits for room");
        drop(flood);
        assert_eq!(a.open(), 0);
    }

    /// Polls a future once without a runtime.
    fn poll_once<F: std::future::Future>(fut: F) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut fut = std::pin::pin!(fut);
        match fut.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }
}
