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
//!   connection evicts the oldest unauthenticated one; when every open
//!   connection is authenticated, the new one is refused (closed at once).
//! * **Time.** An unauthenticated connection is closed
//!   [`AUTH_GRACE`] (30 s) after it was accepted.
//! * **Memory.** The line buffers of unauthenticated connections together
//!   hold at most [`UNAUTH_LINE_BUDGET`] bytes; a connection whose buffer
//!   would pass it is closed. Their lines are checked on the reader one at
//!   a time, so no unauthenticated request is ever queued in a task.
//!
//! Authenticated connections are the owner's; their own per-connection
//! bounds (`connection.rs`) still apply.

pub use crate::base::frame::SharedBudget;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// How long a connection may stay open without an authenticated request.
pub const AUTH_GRACE: Duration = Duration::from_secs(30);
/// Test-only override of [`AUTH_GRACE`] in milliseconds; not part of the
/// documented interface.
pub const TEST_GRACE_ENV: &str = "REMORA_TEST_AUTH_GRACE_MS";

/// [`AUTH_GRACE`], or the test override. Removes the variable so children
/// never inherit it. Call before threads start.
pub fn grace_from_env() -> Duration {
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
/// Line-buffer bytes all unauthenticated connections together may hold.
pub const UNAUTH_LINE_BUDGET: usize = 32 << 20;
/// Descriptors kept out of the connection cap: at least this many, and at
/// least a quarter of the limit.
pub const MIN_RESERVED_FDS: u64 = 128;
/// The cap never goes below this, even under a tiny descriptor limit.
const MIN_CAP: usize = 16;

/// The connection cap for a soft descriptor limit `soft`:
/// `soft − max(128, soft / 4)`, at least 16.
pub fn connection_cap(soft: u64) -> usize {
    let reserve = MIN_RESERVED_FDS.max(soft / 4);
    (soft.saturating_sub(reserve) as usize).max(MIN_CAP)
}

/// This process's soft descriptor limit (1024 when it cannot be read;
/// "unlimited" counts as 1 << 20).
pub fn soft_fd_limit() -> u64 {
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
}

struct Queue {
    next_id: u64,
    /// Unauthenticated connections not yet chosen for eviction, oldest
    /// first.
    unauthenticated: VecDeque<Waiting>,
}

/// The daemon's connection table, as far as admission needs one.
pub struct Admission {
    cap: usize,
    grace: Duration,
    /// One permit per open connection.
    places: Arc<Semaphore>,
    queue: Mutex<Queue>,
    /// Shared by the line buffers of unauthenticated connections.
    pub unauth_lines: Arc<SharedBudget>,
}

/// Whether a new connection was let in.
pub enum Admitted {
    /// Serve it; it holds its place until the ticket drops.
    Yes(Ticket),
    /// Every place is taken by an authenticated connection.
    Full,
}

impl Admission {
    pub fn new(cap: usize, grace: Duration) -> Arc<Admission> {
        Arc::new(Admission {
            cap,
            grace,
            places: Arc::new(Semaphore::new(cap)),
            queue: Mutex::new(Queue {
                next_id: 0,
                unauthenticated: VecDeque::new(),
            }),
            unauth_lines: Arc::new(SharedBudget::new(UNAUTH_LINE_BUDGET)),
        })
    }

    /// The cap from this process's descriptor limit.
    pub fn from_fd_limit(grace: Duration) -> Arc<Admission> {
        Admission::new(connection_cap(soft_fd_limit()), grace)
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// How long a connection may stay without an authenticated request.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a new connection. At the cap, the oldest unauthenticated
    /// connection is told to close and this waits for a place, so the
    /// daemon never holds more than `cap` connections plus the one being
    /// admitted. The accept loop calls this before it accepts again.
    pub async fn admit(self: &Arc<Self>) -> Admitted {
        let permit = match self.places.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                let Some(oldest) = self.lock().unauthenticated.pop_front() else {
                    return Admitted::Full;
                };
                oldest.evict.notify_one();
                match self.places.clone().acquire_owned().await {
                    Ok(permit) => permit,
                    Err(_) => return Admitted::Full,
                }
            }
        };
        let mut queue = self.lock();
        queue.next_id += 1;
        let id = queue.next_id;
        let evict = Arc::new(Notify::new());
        queue.unauthenticated.push_back(Waiting {
            id,
            evict: evict.clone(),
        });
        Admitted::Yes(Ticket {
            admission: self.clone(),
            id,
            evict,
            _place: permit,
            authenticated: false,
        })
    }

    /// Open connections now.
    #[cfg(test)]
    pub fn open(&self) -> usize {
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
pub struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    evict: Arc<Notify>,
    _place: OwnedSemaphorePermit,
    authenticated: bool,
}

impl Ticket {
    /// Resolves when an admission at the cap chose this connection to make
    /// room. Only unauthenticated connections are chosen; one that
    /// authenticates in the same instant still goes.
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }

    pub fn is_authenticated(&self) -> bool {
        self.authenticated
    }

    /// The connection sent a request with the right token: it is no longer
    /// a candidate for eviction, the grace or the unauthenticated budget.
    pub fn authenticate(&mut self) {
        if !self.authenticated {
            self.authenticated = true;
            self.admission.forget(self.id);
        }
    }

    /// The budget an unauthenticated connection's line buffer charges.
    pub fn line_budget(&self) -> Arc<SharedBudget> {
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
        match poll_once(a.admit()) {
            Some(Admitted::Yes(t)) => t,
            Some(Admitted::Full) => panic!("refused"),
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
        let a = Admission::new(3, AUTH_GRACE);
        let mut owner = yes(&a);
        owner.authenticate();
        let first = yes(&a);
        let second = yes(&a);
        assert_eq!(a.open(), 3);
        let mut admitting = std::pin::pin!(a.admit());
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
        let a = Admission::new(2, AUTH_GRACE);
        let mut x = yes(&a);
        let mut y = yes(&a);
        x.authenticate();
        y.authenticate();
        assert!(matches!(poll_once(a.admit()), Some(Admitted::Full)));
        drop(x);
        let z = yes(&a);
        assert_eq!(a.open(), 2);
        drop((y, z));
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
