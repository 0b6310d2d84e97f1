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
//!   connection takes the place of an unauthenticated one, chosen by peer
//!   process (the pid `SO_PEERCRED` / `LOCAL_PEERPID` names; [`choose`]):
//!   - If the peer holding the most unauthenticated connections (the
//!     newcomer counted with its own peer; a tie is the newcomer's own)
//!     holds at least [`PEER_CROWD`], that peer's connection silent
//!     longest goes, however fresh. A crowd gives way to a lighter peer,
//!     and a crowd's own newcomer takes a place of its own crowd: a peer
//!     with no unauthenticated connection is never refused, nor kept
//!     waiting, because another process floods (issue 44 item 7), and a
//!     flood never waits in front of the listen backlog. One exception
//!     keeps a burst cheap: a crowd's newcomer without a whole line
//!     waiting, while its crowd's connections are all fresh and more
//!     connections wait to be accepted, is closed at once
//!     ([`Admitted::Crowded`]): an accept and a close instead of a
//!     connection set up and torn down. A client of the crowd's own
//!     process still gets in: its line is there, or it is the last of the
//!     burst.
//!   - Otherwise (no peer crowds: many processes with fewer than
//!     [`PEER_CROWD`] connections each) the connection silent longest
//!     overall goes, once it was admitted [`FRESH_GRACE`] ago: a new
//!     client must have the time to send its first line and have it read
//!     (audit N6). While that one is fresher, the connection admitted
//!     first goes instead if it is past the grace: it sent a line since
//!     (else it would be silent longest), so it is no client still to
//!     send its first. Only while every unauthenticated connection is
//!     fresher than the grace does the admission wait, until the oldest of
//!     them is not or a place frees, and the kernel's listen backlog holds
//!     the connections behind it.
//!
//!   "Silent" counts from the admission or from the last complete line
//!   (ties go to the oldest). The newcomer takes the place at once, while
//!   the connection told to go closes; at most [`LEAVING_MAX`] may be
//!   closing so, past which an admission waits for one of them (a
//!   connection told to go closes whatever it is doing,
//!   `connection.rs`). When every open connection is authenticated, the
//!   new one is refused (closed at once). The books are kept in
//!   [`crate::serve::peertable`]: O(1) per admission, per line and per
//!   close.
//!
//!   **The bound.** Once the accept loop takes a newcomer, it waits at
//!   most [`FRESH_GRACE`] for a place (beside the wait for one of the
//!   connections closing), crowd or no crowd. Nothing is admitted while
//!   it waits, so afterwards every connection without the token is past
//!   its grace and the next admissions at the cap take their places at
//!   once, until those are gone: the loop waits at most one
//!   [`FRESH_GRACE`] per `U` admissions, `U` the unauthenticated
//!   connections open when it waited. A flood spread over many processes
//!   (below [`PEER_CROWD`] each) can thus cost a client at most that: one
//!   grace, and one more per `U` connections ahead of it in the listen
//!   backlog. Their lines do not keep them: one that speaks is past its
//!   grace when the one silent longest is not, and goes.
//!
//!   Peers are told apart by process, not by user: the socket is `0600`,
//!   so the kernel lets only the daemon's user and root connect, and the
//!   flood to bound is the same user's. Connections whose pid the kernel
//!   does not name (a peer in a pid namespace it cannot map) count as one
//!   process.
//! * **Time.** An unauthenticated connection is closed
//!   [`AUTH_GRACE`] (30 s) after it was accepted.
//! * **Memory.** The line buffers of unauthenticated connections together
//!   hold at most [`UNAUTH_LINE_BUDGET`] bytes; a connection whose buffer
//!   would pass it is closed. Their lines are checked on the reader one at
//!   a time, so no unauthenticated request is ever queued in a task. Their
//!   replies waiting to be written hold at most [`UNAUTH_REPLY_BUDGET`]
//!   bytes together, and at most 1024 per connection: a connection whose
//!   next reply passes either is closed (`connection.rs`), so one that
//!   never reads costs a bounded amount, and never waits for room.
//! * **Log lines.** Past a burst, connections are logged only once they
//!   authenticate; the others are counted in a summary line
//!   ([`crate::serve::connlog`]).
//!
//! Authenticated connections are the owner's; their own per-connection
//! bounds (`connection.rs`) still apply.

use crate::base::logging::Quota;
pub(crate) use crate::base::ndjson::SharedBudget;
use crate::serve::peertable::{Handle, PeerTable};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long a connection may stay open without an authenticated request.
pub(crate) const AUTH_GRACE: Duration = Duration::from_secs(30);
/// Test-only override of [`AUTH_GRACE`] in milliseconds; not part of the
/// documented interface.
pub(crate) const TEST_GRACE_ENV: &str = "REMORA_TEST_AUTH_GRACE_MS";
/// Test-only override of [`FRESH_GRACE`] in milliseconds (a long one
/// shows that a crowd gives way without its grace running out); not part
/// of the documented interface.
pub(crate) const TEST_FRESH_GRACE_ENV: &str = "REMORA_TEST_FRESH_GRACE_MS";

/// How long a newly admitted connection cannot be evicted while no peer
/// crowds (audit N6: with the oldest evicted first, a flood of same-uid
/// connections evicted 15–30% of fresh clients before their first line
/// was read).
pub(crate) const FRESH_GRACE: Duration = Duration::from_secs(1);

/// Unauthenticated connections from which a peer process (the newcomer's
/// counted) is a crowd: at the cap, the peer holding the most gives way
/// first, without the fresh grace, once it holds this many.
pub(crate) const PEER_CROWD: usize = 8;

/// The two graces, fixed when the daemon starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Graces {
    /// How long a connection may stay without an authenticated request.
    pub auth: Duration,
    /// How long a new connection cannot be evicted while no peer crowds.
    pub fresh: Duration,
}

impl Default for Graces {
    fn default() -> Graces {
        Graces {
            auth: AUTH_GRACE,
            fresh: FRESH_GRACE,
        }
    }
}

impl Graces {
    /// [`AUTH_GRACE`] and [`FRESH_GRACE`], or the test overrides. Removes
    /// the variables so children never inherit them. Call before threads
    /// start.
    pub(crate) fn from_env() -> Graces {
        let defaults = Graces::default();
        Graces {
            auth: ms_from_env(TEST_GRACE_ENV).unwrap_or(defaults.auth),
            fresh: ms_from_env(TEST_FRESH_GRACE_ENV).unwrap_or(defaults.fresh),
        }
    }
}

/// A positive number of milliseconds in variable `name`, which is removed.
fn ms_from_env(name: &str) -> Option<Duration> {
    let value = std::env::var_os(name)?;
    std::env::remove_var(name);
    value
        .to_string_lossy()
        .parse::<u64>()
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
}

/// Line-buffer bytes all unauthenticated connections together may hold.
pub(crate) const UNAUTH_LINE_BUDGET: usize = 32 << 20;
/// Reply bytes all unauthenticated connections together may have waiting
/// to be written (queued, or in a writer's buffer): a reply echoes its
/// request's id, so one line of 1 MiB can ask for a reply of 6 MiB (Go
/// writes `<` as `\u003c`), and a queue of such replies nobody reads
/// would hold gigabytes.
pub(crate) const UNAUTH_REPLY_BUDGET: usize = 32 << 20;
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
    match crate::sys::os::open_files_limit() {
        None => 1024,
        Some((u64::MAX, _)) => 1 << 20,
        Some((soft, _)) => soft,
    }
}

/// What the table keeps of one unauthenticated connection, shared with
/// its [`Ticket`].
#[derive(Default)]
struct Seat {
    /// Tells the connection to close.
    evict: Notify,
    /// Set (under the books' lock) once it was told: from then on it
    /// counts as leaving, no longer in the cap.
    leaving: AtomicBool,
}

/// The unauthenticated connections.
type Table = PeerTable<Arc<Seat>>;

/// What an admission at the cap does.
enum AtCap {
    /// Tell this connection to make room. `gave_way`: when it was taken
    /// from the crowd of another process than the newcomer's, that
    /// process's pid and how many connections it held.
    Evict {
        seat: Arc<Seat>,
        gave_way: Option<(Option<i32>, usize)>,
    },
    /// The newcomer's own peer is the crowd, and its connection silent
    /// longest is fresh: ask whether the newcomer is worth that place.
    OwnFresh,
    /// No peer crowds and the connection silent longest is fresh: try
    /// again at this time (ms on the admission's clock).
    WaitUntil(u64),
    /// Every open connection is authenticated.
    Full,
}

/// The rule at the cap (the module's doc says it in prose): which
/// unauthenticated connection makes room for a newcomer from `peer`, at
/// `now`, with a fresh grace of `fresh` (both in ms). The one chosen is
/// taken out of the table. A crowd's newcomer takes a fresh place of its
/// own crowd only when `own_fresh` (else [`AtCap::OwnFresh`]).
fn choose(table: &mut Table, now: u64, fresh: u64, peer: Option<i32>, own_fresh: bool) -> AtCap {
    let Some((quietest, admitted)) = table.silent_longest() else {
        return AtCap::Full;
    };
    let own = table.peer(peer);
    let mine = own.map_or(0, |p| table.holds(p)) + 1;
    let crowd = match table.heaviest() {
        Some((heaviest, most)) if most > mine => Some((heaviest, most)),
        _ => own.map(|p| (p, mine)),
    };
    if let Some((crowd, _)) = crowd.filter(|&(_, holds)| holds >= PEER_CROWD) {
        let held = table.holds(crowd);
        let pid = table.pid(crowd);
        if let Some((victim, admitted)) = table.silent_longest_of(crowd) {
            if !own_fresh && Some(crowd) == own && admitted.saturating_add(fresh) > now {
                return AtCap::OwnFresh;
            }
            if let Some(seat) = table.remove(victim) {
                return AtCap::Evict {
                    seat,
                    gave_way: (Some(crowd) != own).then_some((pid, held)),
                };
            }
        }
    }
    let victim = if admitted.saturating_add(fresh) <= now {
        quietest
    } else {
        // The one silent longest is fresh. The one admitted first spoke
        // since (else it would be silent longest), so it is no client
        // still to send its first line: past its grace, it goes; if it is
        // fresh too, so is every other.
        match table.admitted_first() {
            Some((first, born)) if born.saturating_add(fresh) <= now => first,
            Some((_, born)) => return AtCap::WaitUntil(born.saturating_add(fresh)),
            None => return AtCap::Full,
        }
    };
    match table.remove(victim) {
        Some(seat) => AtCap::Evict { seat, gave_way: None },
        None => AtCap::Full,
    }
}

/// Connections told to make room that may still be closing while new
/// ones take their places: the cap is exceeded by at most this many
/// (descriptors come out of the reserve), and past it an admission waits
/// for one of them to close. A window rather than one at a time, so a
/// burst behind the listen backlog is worked through at the speed of
/// accepting, not of one close after another.
pub(crate) const LEAVING_MAX: usize = 32;

/// Everything the admission counts, under one lock.
struct Books {
    table: Table,
    /// Open connections that hold a place: all but the leaving ones.
    placed: usize,
    /// Connections told to make room that have not closed yet.
    leaving: usize,
}

/// The daemon's connection table, as far as admission needs one.
pub(crate) struct Admission {
    cap: usize,
    graces: Graces,
    books: Mutex<Books>,
    /// Signalled when a connection closes (a place or a leaving slot
    /// frees).
    room: Notify,
    /// The zero of the table's clock.
    epoch: Instant,
    /// Shared by the line buffers of unauthenticated connections.
    pub unauth_lines: Arc<SharedBudget>,
    /// Shared by the unwritten replies of unauthenticated connections.
    pub unauth_replies: Arc<SharedBudget>,
    /// The log lines connections without the token may cost.
    pub log_lines: crate::serve::connlog::ConnLog,
    /// Warnings that name a crowd made to give way.
    crowd_warnings: Quota,
}

/// Whether a new connection was let in.
pub(crate) enum Admitted {
    /// Serve it; it holds its place until the ticket drops.
    Yes(Ticket),
    /// Every place is taken by an authenticated connection.
    Full,
    /// A silent newcomer of the crowd in the middle of its burst: every
    /// connection of its process is fresh, it has no whole line waiting,
    /// and more connections wait to be accepted. Closing it is the
    /// cheapest way through the backlog.
    Crowded,
}

impl Admission {
    pub(crate) fn new(cap: usize, graces: Graces) -> Arc<Admission> {
        Arc::new(Admission {
            cap,
            graces,
            books: Mutex::new(Books {
                table: PeerTable::with_room_for(cap),
                placed: 0,
                leaving: 0,
            }),
            room: Notify::new(),
            epoch: Instant::now(),
            unauth_lines: Arc::new(SharedBudget::new(UNAUTH_LINE_BUDGET)),
            unauth_replies: Arc::new(SharedBudget::new(UNAUTH_REPLY_BUDGET)),
            log_lines: crate::serve::connlog::ConnLog::default(),
            crowd_warnings: Quota::new(5),
        })
    }

    /// The cap from this process's descriptor limit.
    pub(crate) fn from_fd_limit(graces: Graces) -> Arc<Admission> {
        Admission::new(connection_cap(soft_fd_limit()), graces)
    }

    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// How long a connection may stay without an authenticated request.
    pub(crate) fn grace(&self) -> Duration {
        self.graces.auth
    }

    /// How long a new connection cannot be evicted while no peer crowds.
    pub(crate) fn fresh_grace(&self) -> Duration {
        self.graces.fresh
    }

    fn lock(&self) -> MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Milliseconds since [`Admission::epoch`].
    fn clock_ms(&self) -> u64 {
        millis(self.epoch.elapsed())
    }

    /// Admits a new connection from process `peer` (when the kernel
    /// says). At the cap, the unauthenticated connection [`choose`] picks
    /// is told to close and this one takes its place at once, unless
    /// [`LEAVING_MAX`] told earlier are still closing (then it waits for
    /// one). So the daemon holds at most `cap` + [`LEAVING_MAX`]
    /// connections plus the one being admitted. The accept loop calls this
    /// before it accepts again.
    ///
    /// `worth_a_fresh_place` is asked only when the newcomer's own process
    /// is the crowd and its connection silent longest is fresh: whether
    /// the newcomer has a whole line waiting, or nothing else waits to be
    /// accepted (then it takes that place; else it is [`Admitted::Crowded`]).
    pub(crate) async fn admit(self: &Arc<Self>, peer: Option<i32>, worth_a_fresh_place: impl Fn() -> bool) -> Admitted {
        let mut own_fresh = false;
        loop {
            // Armed before the books are read: a close in between still
            // wakes this.
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            let ripe = {
                let mut books = self.lock();
                if books.placed < self.cap {
                    return self.seat(&mut books, peer);
                }
                if books.leaving >= LEAVING_MAX {
                    None
                } else {
                    match choose(
                        &mut books.table,
                        self.clock_ms(),
                        millis(self.graces.fresh),
                        peer,
                        own_fresh,
                    ) {
                        AtCap::Full => return Admitted::Full,
                        AtCap::OwnFresh => {
                            drop(books);
                            if !worth_a_fresh_place() {
                                return Admitted::Crowded;
                            }
                            own_fresh = true;
                            continue;
                        }
                        AtCap::Evict { seat, gave_way } => {
                            seat.leaving.store(true, Ordering::Relaxed);
                            seat.evict.notify_one();
                            books.leaving += 1;
                            books.placed = books.placed.saturating_sub(1);
                            let admitted = self.seat(&mut books, peer);
                            drop(books);
                            if let Some((pid, held)) = gave_way {
                                self.warn_crowd(pid, held, peer);
                            }
                            return admitted;
                        }
                        AtCap::WaitUntil(ripe) => Some(ripe),
                    }
                }
            };
            match ripe {
                None => room.await,
                Some(ripe) => {
                    let at = self.epoch + Duration::from_millis(ripe);
                    tokio::select! {
                        _ = room => {}
                        _ = tokio::time::sleep_until(at.into()) => {}
                    }
                }
            }
        }
    }

    /// Gives a place to a new connection of `peer`.
    fn seat(self: &Arc<Self>, books: &mut Books, peer: Option<i32>) -> Admitted {
        books.placed += 1;
        let seat = Arc::new(Seat::default());
        let handle = books.table.insert(peer, self.clock_ms(), seat.clone());
        Admitted::Yes(Ticket {
            admission: self.clone(),
            handle,
            seat,
            peer,
            authenticated: false,
        })
    }

    /// Logs (5 times at most) that the crowd of `pid`, holding `held`,
    /// gave a place to a newcomer of another process, `newcomer` (a crowd
    /// that churns through its own connections is not news: their closes
    /// are counted in `connlog`'s summary).
    fn warn_crowd(&self, pid: Option<i32>, held: usize, newcomer: Option<i32>) {
        if !self.crowd_warnings.allow() {
            return;
        }
        let name = |pid: Option<i32>| match pid {
            Some(pid) => format!("peer pid {pid}"),
            None => "a peer the kernel did not name".to_string(),
        };
        crate::log_warn!(
            "[Server] the connection limit ({}) is reached: closing the longest-silent of the {held} connections without the token from {} for a new one from {}",
            self.cap,
            name(pid),
            name(newcomer)
        );
    }

    /// Resolves once every admitted connection has closed (its ticket
    /// dropped). After a shutdown each one notices by itself; the final
    /// summary of `connlog` waits for this so that it counts them all.
    pub(crate) async fn all_closed(&self) {
        loop {
            // Armed before the books are read, as in `admit`.
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let books = self.lock();
                if books.placed + books.leaving == 0 {
                    return;
                }
            }
            room.await;
        }
    }

    /// Open connections now, leaving ones included.
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        let books = self.lock();
        books.placed + books.leaving
    }
}

/// `d` in whole milliseconds (saturating).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One connection's place in the table; dropping it gives the place back.
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    handle: Handle,
    seat: Arc<Seat>,
    peer: Option<i32>,
    authenticated: bool,
}

impl Ticket {
    /// Resolves when an admission at the cap chose this connection to make
    /// room. Only unauthenticated connections are chosen; one that
    /// authenticates in the same instant still goes.
    pub(crate) async fn evicted(&self) {
        self.seat.evict.notified().await;
    }

    pub(crate) fn is_authenticated(&self) -> bool {
        self.authenticated
    }

    /// The process at the other end, as the kernel named it at the accept.
    pub(crate) fn peer(&self) -> Option<i32> {
        self.peer
    }

    /// The connection sent a complete line (without the token, or not yet
    /// checked): it is no longer silent, so evictions take it after the
    /// ones that have said nothing for longer.
    pub(crate) fn heard(&self) {
        if !self.authenticated {
            self.admission.lock().table.heard(self.handle);
        }
    }

    /// The connection sent a request with the right token: it is no longer
    /// a candidate for eviction, the grace or the unauthenticated budget.
    pub(crate) fn authenticate(&mut self) {
        if !self.authenticated {
            self.authenticated = true;
            // The seat comes back out and is dropped after the lock.
            let _seat = self.admission.lock().table.remove(self.handle);
        }
    }

    /// The budget an unauthenticated connection's line buffer charges.
    pub(crate) fn line_budget(&self) -> Arc<SharedBudget> {
        self.admission.unauth_lines.clone()
    }

    /// The budget an unauthenticated connection's unwritten replies
    /// charge.
    pub(crate) fn reply_budget(&self) -> Arc<SharedBudget> {
        self.admission.unauth_replies.clone()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let seat = {
            let mut books = self.admission.lock();
            let seat = match self.authenticated {
                true => None,
                false => books.table.remove(self.handle),
            };
            if self.seat.leaving.load(Ordering::Relaxed) {
                books.leaving = books.leaving.saturating_sub(1);
            } else {
                books.placed = books.placed.saturating_sub(1);
            }
            seat
        };
        drop(seat);
        self.admission.room.notify_one();
    }
}

#[cfg(test)]
mod tests;
