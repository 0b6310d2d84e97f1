//! One client connection: the reader that frames and dispatches requests,
//! and the single ordered writer that owns the socket's write half.
//!
//! Every byte a client receives goes through the writer task, so replies
//! and stream frames never interleave mid-line. Replies arrive over a
//! bounded channel; stream frames are pulled by the writer from the replay
//! logs it follows and that moved ([`crate::serve::following`]), so a slow
//! client only ever slows its own writer.
//!
//! The reader hands every line to [`Dispatcher::on_line`], which decides
//! what it becomes ([`Step`]): a reply the reader sends at once (rejections,
//! `server.ping`, `capabilities`, and plain `process.stdin` calls, which
//! never wait), a task of its own (every other request, so a slow request
//! never delays a fast one), or nothing. The reader only carries that out,
//! within the connection's bounds; whatever it waits for (a line, room for
//! a reply or a request), it also waits for the shutdown and for
//! admission's word (an eviction, the end of the grace), so a connection
//! told to close closes at once. When the client half-closes, in-flight
//! requests still get their replies; then the connection closes and its
//! subscriptions end (the processes keep running and can be reattached).
//!
//! A process streams to one connection at a time: a reattach from another
//! connection cuts this one at the reply's `lastSeq` and closes it (the
//! [`Handoff`] carries the process id and the taker's name for the log
//! line, which names both connections by number and peer pid: `@` alone,
//! the reference's address of a Unix socket peer, says nothing).
//!
//! The wire log ([`crate::serve::wirelog`]) taps the two places bytes
//! cross: every line the reader frames, before it goes to dispatch, and
//! every batch the writer has written. Off, each costs one test.

use crate::base::ndjson::{LineReader, ReadEvent, SharedBudget};
use crate::replay::followers::{Handoff, HandoffSlot};
use crate::serve::admission::Ticket;
use crate::serve::connlog::Ended;
use crate::serve::dispatch::{Dispatcher, Handlers, Reply, Step};
use crate::serve::following::Following;
use crate::serve::state::Daemon;
use crate::serve::wirelog::WireTap;
use crate::serve::wireredact::Direction;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// Requests of one connection that may run at once; past this the reader
/// stops reading, which pushes back on the client.
const MAX_IN_FLIGHT: usize = 1024;
/// Request-line bytes of one connection that running requests may hold.
/// A line takes `min(len, MAX_IN_FLIGHT_BYTES)` of it, so one line of any
/// allowed size always fits; past the bound the reader stops reading.
const MAX_IN_FLIGHT_BYTES: usize = crate::base::ndjson::MAX_LINE;
/// Replies that may wait for the writer. An authenticated connection's
/// reader waits for room (back-pressure); one without the token is closed
/// when its queue is full.
const REPLY_QUEUE: usize = 1024;
/// Unauthorized-request warnings one connection may log.
const UNAUTHORIZED_WARNINGS: u32 = 5;

static NEXT_CONN_ID: AtomicU64 = AtomicU64::new(1);

/// How log lines name a connection: its number in this daemon's life and
/// the pid of the process at the other end (when the OS tells it).
fn connection_name(conn_id: u64, peer: Option<i32>) -> String {
    match peer {
        Some(pid) => format!("connection {conn_id}, peer pid {pid}"),
        None => format!("connection {conn_id}"),
    }
}

/// Serves one accepted connection until it closes or the daemon stops.
/// Until it sends a request with the token it is held to the bounds of
/// [`crate::serve::admission`]: its lines are checked on the reader, its buffer
/// is charged to the shared unauthenticated budget, and it is closed
/// after its grace ([`crate::serve::admission::AUTH_GRACE`]) or when a newer connection needs its place.
/// Its replies are never waited for: it is closed when [`REPLY_QUEUE`]
/// of them wait for it to read, and once its requests are read, what is
/// queued goes out only until its grace or an eviction. So whatever it
/// does (or does not read), its place and its slot among the connections
/// told to make room free promptly.
///
/// The connection comes as its two halves, of whatever transport: the
/// Unix socket's `into_split`, or (Windows, `-listen-pipe`) a named
/// pipe's. Every transport is served by this one code.
pub(crate) async fn serve<R, W>(read_half: R, write_half: W, daemon: Arc<Daemon>, ticket: Ticket)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let conn_id = NEXT_CONN_ID.fetch_add(1, Ordering::Relaxed);
    // Past a burst, a connection is logged only once it authenticates
    // (`connlog`): a churn without the token cannot flood the log.
    let mut lines = Lines {
        logged: daemon.admission.log_lines.admit(),
        ended: Ended::Closed,
    };
    if lines.logged {
        crate::log_info!("[Server] New connection from: @");
    }
    let peer = ticket.peer();
    let mut gate = Gate {
        replies: Arc::new(ReplyCharge::new(ticket.reply_budget())),
        ticket,
        grace: Box::pin(tokio::time::sleep(daemon.admission.grace())),
    };
    daemon.metrics.connections.fetch_add(1, Ordering::Relaxed);
    let _open = OpenClient::count(&daemon);
    let (tx, rx) = mpsc::channel(REPLY_QUEUE);
    let handoff = HandoffSlot::new(connection_name(conn_id, peer));
    let tap = daemon.options.wire_log.clone().map(|tap| Tap { tap, conn_id, peer });
    let mut writer = tokio::spawn(write_loop(
        write_half,
        rx,
        conn_id,
        daemon.shutdown.subscribe(),
        handoff.clone(),
        gate.replies.clone(),
        tap.clone(),
    ));
    // An unlogged connection logs no warning of its own either.
    let warnings = if lines.logged { UNAUTHORIZED_WARNINGS } else { 0 };
    let dispatcher = Dispatcher::new(daemon.clone(), warnings, Handlers::All);
    let ends = Ends {
        tx: &tx,
        handoff: &handoff,
        tap: tap.as_ref(),
    };
    let close = read_requests(read_half, &daemon, &mut gate, &dispatcher, ends, &mut lines).await;
    drop(tx);
    if close == Close::Abort {
        writer.abort();
    }
    if gate.ticket.is_authenticated() {
        let _ = writer.await;
    } else {
        // What is queued goes out, but a connection without the token gets
        // no more time for taking it than it had to send its requests: one
        // that never reads must not keep its place, or its slot among the
        // connections told to make room, for good.
        tokio::select! {
            _ = &mut writer => {}
            why = gate.dismissed() => {
                why.record(&mut lines, &daemon);
                writer.abort();
                let _ = writer.await;
            }
        }
    }
    if !lines.logged {
        daemon.admission.log_lines.count_unlogged(lines.ended);
        return;
    }
    let unlogged = dispatcher.unlogged_warnings();
    if unlogged > 0 {
        crate::log_warn!(
            "[Server] {} more unauthorized request(s) on this connection were not logged",
            unlogged
        );
    }
    crate::log_info!("[Server] Connection closed");
}

/// What admission holds over one connection: its place, the grace it has
/// to authenticate (counted from the accept), and what its replies
/// without the token owe the shared budget.
struct Gate {
    ticket: Ticket,
    grace: Pin<Box<tokio::time::Sleep>>,
    replies: Arc<ReplyCharge>,
}

/// The bytes of one connection's replies charged to
/// [`crate::serve::admission::UNAUTH_REPLY_BUDGET`] and not written yet.
/// The reader charges each reply it queues without the token; the writer
/// gives bytes back once it wrote them (first in, first out, so what it
/// writes pays what is owed first); the rest comes back when the
/// connection ends.
struct ReplyCharge {
    budget: Arc<SharedBudget>,
    owed: AtomicUsize,
}

impl ReplyCharge {
    fn new(budget: Arc<SharedBudget>) -> ReplyCharge {
        ReplyCharge {
            budget,
            owed: AtomicUsize::new(0),
        }
    }

    /// Charges `n` bytes if the budget has them.
    fn take(&self, n: usize) -> bool {
        if !self.budget.try_take(n) {
            return false;
        }
        self.owed.fetch_add(n, Ordering::AcqRel);
        true
    }

    /// `n` bytes went out: as much of what is owed comes back.
    fn written(&self, n: usize) {
        // Nothing owed, the authenticated connection's case: one load.
        if self.owed.load(Ordering::Acquire) == 0 {
            return;
        }
        if let Ok(owed) = self
            .owed
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |owed| Some(owed.saturating_sub(n)))
        {
            self.budget.give_back(owed.min(n));
        }
    }
}

impl Drop for ReplyCharge {
    fn drop(&mut self) {
        self.budget.give_back(*self.owed.get_mut());
    }
}

/// Why admission closes a connection, whatever it is doing.
#[derive(Debug, Clone, Copy)]
enum Dismissed {
    /// A newcomer at the connection cap took its place.
    Evicted,
    /// It sent no request with the token within its grace.
    Grace,
}

impl Gate {
    /// Resolves when the connection must close: told to make room (only
    /// connections without the token are chosen, but one that
    /// authenticates in the same instant still goes, so that it frees
    /// the slot it was counted in), or still without the token when its
    /// grace is over.
    async fn dismissed(&mut self) -> Dismissed {
        let unauthenticated = !self.ticket.is_authenticated();
        tokio::select! {
            _ = self.ticket.evicted() => Dismissed::Evicted,
            _ = &mut self.grace, if unauthenticated => Dismissed::Grace,
        }
    }
}

impl Dismissed {
    /// Notes how the connection ended, with its warning when its lines
    /// are logged.
    fn record(self, lines: &mut Lines, daemon: &Daemon) {
        match self {
            Dismissed::Evicted => lines.closing(Ended::Evicted, || {
                crate::log_warn!(
                    "[Server] closing an unauthenticated connection: the connection limit ({}) is reached",
                    daemon.admission.cap()
                )
            }),
            Dismissed::Grace => lines.closing(Ended::Grace, || {
                crate::log_warn!(
                    "[Server] closing connection: no authenticated request within {:?}",
                    daemon.admission.grace()
                )
            }),
        }
    }
}

/// The wire log as one connection taps it.
#[derive(Clone)]
struct Tap {
    tap: Arc<WireTap>,
    conn_id: u64,
    peer: Option<i32>,
}

impl Tap {
    fn frame(&self, direction: Direction, bytes: &[u8]) {
        self.tap.frame(self.conn_id, self.peer, direction, bytes);
    }
}

/// Where the reader's lines go: the writer's queue, the handoff it
/// watches, and the wire log when it is on.
#[derive(Clone, Copy)]
struct Ends<'a> {
    tx: &'a mpsc::Sender<Reply>,
    handoff: &'a Handoff,
    tap: Option<&'a Tap>,
}

/// What one connection writes to the log (`connlog`).
struct Lines {
    /// Whether its lines are logged: from the start, or from the moment
    /// it authenticated.
    logged: bool,
    /// How it ended, for the summary when it never was logged.
    ended: Ended,
}

impl Lines {
    /// The connection authenticated: an unlogged one writes its opening
    /// line now, late, and logs like any other from here on.
    fn authenticated(&mut self) {
        if !self.logged {
            self.logged = true;
            crate::log_info!("[Server] New connection from: @");
        }
    }

    /// The connection is being closed for `why`: logged as `warning` when
    /// its lines are logged, counted otherwise.
    fn closing(&mut self, why: Ended, warning: impl FnOnce()) {
        self.ended = why;
        if self.logged {
            warning();
        }
    }
}

/// How the reader stopped: whether the writer may still send what is
/// queued and what running requests return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    /// The client half-closed, or another connection took a process over:
    /// in-flight requests still get their replies.
    Drain,
    /// Shutdown, an over-long line, or the admission bounds: the writer
    /// stops at once.
    Abort,
}

/// The reader: frames lines and hands each to [`Dispatcher::on_line`],
/// then carries out the [`Step`] it returns, until the connection ends.
async fn read_requests<R: AsyncRead + Unpin>(
    read_half: R,
    daemon: &Daemon,
    gate: &mut Gate,
    dispatcher: &Dispatcher,
    ends: Ends<'_>,
    lines: &mut Lines,
) -> Close {
    let Ends { tx, handoff, tap } = ends;
    let mut shutdown = daemon.shutdown.subscribe();
    let mut replaced = handoff.replaced.subscribe();
    let in_flight = InFlight::new();
    let mut reader = LineReader::new(read_half);
    reader.charge_to(gate.ticket.line_budget());
    loop {
        let event = tokio::select! {
            event = reader.next() => event,
            _ = shutdown.wait() => return Close::Abort,
            why = gate.dismissed() => {
                why.record(lines, daemon);
                return Close::Abort;
            }
            taken = replaced.wait_for(Option::is_some) => {
                // Another connection reattached a process this one
                // followed: the writer stops by itself.
                if let Some(taken) = taken.ok().as_deref().and_then(Option::as_ref) {
                    crate::log_info!(
                        "[Server] closing connection @ ({}): process {} reattached from another connection ({})",
                        handoff.name,
                        crate::base::logging::Untrusted(&taken.process),
                        taken.by
                    );
                }
                return Close::Drain;
            }
        };
        let line = match event {
            ReadEvent::Line(line) => line,
            ReadEvent::TooLong => {
                lines.closing(Ended::TooLong, || {
                    crate::log_warn!("[Server] request line exceeds 1 MiB, closing connection")
                });
                return Close::Abort;
            }
            ReadEvent::OverBudget => {
                lines.closing(Ended::OverBudget, || {
                    crate::log_warn!(
                        "[Server] closing an unauthenticated connection: partial lines of all such connections reach {} MiB",
                        crate::serve::admission::UNAUTH_LINE_BUDGET >> 20
                    )
                });
                return Close::Abort;
            }
            ReadEvent::Eof => return Close::Drain,
        };
        let unauthenticated = !gate.ticket.is_authenticated();
        if unauthenticated {
            // Not silent: evictions at the cap take it after the
            // connections that have said nothing for longer.
            gate.ticket.heard();
        }
        let len = line.len();
        if let Some(tap) = tap {
            tap.frame(Direction::In, line);
        }
        let dispatched = dispatcher.on_line(line, !unauthenticated).await;
        if unauthenticated && dispatched.authenticates {
            gate.ticket.authenticate();
            reader.stop_charging();
            lines.authenticated();
        }
        match dispatched.step {
            Step::Skip => {}
            // Without the token a reply is never waited for: a connection
            // that does not read its replies is closed once its queue is
            // full, rather than hold its reader (and its place) until it
            // reads.
            Step::Reply(reply) if !gate.ticket.is_authenticated() => {
                if !gate.replies.take(reply.held_bytes()) {
                    lines.closing(Ended::OverReplyBudget, || {
                        crate::log_warn!(
                            "[Server] closing an unauthenticated connection: replies waiting to be read on all such connections reach {} MiB",
                            crate::serve::admission::UNAUTH_REPLY_BUDGET >> 20
                        )
                    });
                    return Close::Abort;
                }
                if let Err(TrySendError::Full(_)) = tx.try_send(reply) {
                    lines.closing(Ended::NotReading, || {
                        crate::log_warn!(
                            "[Server] closing an unauthenticated connection: {REPLY_QUEUE} replies wait for it to read"
                        )
                    });
                    return Close::Abort;
                }
                // Still a turn of the runtime's, as waiting for room was:
                // the writer gets to run, so a client that reads never
                // finds its queue full because its writer was not
                // scheduled.
                tokio::task::coop::consume_budget().await;
            }
            // The owner's replies are waited for (back-pressure, nothing
            // lost), until the connection must close anyway.
            Step::Reply(reply) => tokio::select! {
                _ = send(tx, reply) => {}
                _ = shutdown.wait() => return Close::Abort,
                why = gate.dismissed() => {
                    why.record(lines, daemon);
                    return Close::Abort;
                }
            },
            Step::Task(task) => {
                let permits = tokio::select! {
                    permits = in_flight.admit(len) => permits,
                    _ = shutdown.wait() => return Close::Abort,
                    why = gate.dismissed() => {
                        why.record(lines, daemon);
                        return Close::Abort;
                    }
                };
                let Some(permits) = permits else {
                    return Close::Drain;
                };
                let tx = tx.clone();
                tokio::spawn(async move {
                    if let Some(reply) = task.await {
                        send(&tx, reply).await;
                    }
                    drop(permits);
                });
            }
        }
    }
}

/// Queues `reply` for the writer, waiting for room. Silently dropped if
/// the writer is gone (write error, shutdown): there is nobody left to
/// tell.
async fn send(tx: &mpsc::Sender<Reply>, reply: Reply) {
    let _ = tx.send(reply).await;
}

/// The bounds on one connection's running requests: how many, and how
/// many request-line bytes they hold. Past either the reader stops
/// reading, which pushes back on the client.
struct InFlight {
    requests: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
}

impl InFlight {
    fn new() -> InFlight {
        InFlight {
            requests: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            bytes: Arc::new(Semaphore::new(MAX_IN_FLIGHT_BYTES)),
        }
    }

    /// Waits for room for one more request whose line is `len` bytes; the
    /// permits are its room until dropped. `None` once the bounds closed.
    async fn admit(&self, len: usize) -> Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)> {
        // The cost fits in u32: a line is at most MAX_LINE bytes.
        let cost = len.min(MAX_IN_FLIGHT_BYTES) as u32;
        let request = self.requests.clone().acquire_owned().await.ok()?;
        let bytes = self.bytes.clone().acquire_many_owned(cost).await.ok()?;
        Some((request, bytes))
    }
}

/// Keeps [`Daemon::clients`] equal to the number of open connections.
struct OpenClient(Arc<Daemon>);

impl OpenClient {
    fn count(daemon: &Arc<Daemon>) -> OpenClient {
        daemon.clients.fetch_add(1, Ordering::Relaxed);
        daemon.activity.poke();
        OpenClient(daemon.clone())
    }
}

impl Drop for OpenClient {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::Relaxed);
        self.0.activity.poke();
    }
}

/// The connection's only writer. Ends when every sender is gone (reader
/// finished and all handlers replied), on a write error, or on shutdown.
async fn write_loop<W: AsyncWrite + Unpin>(
    mut sink: W,
    mut rx: mpsc::Receiver<Reply>,
    conn_id: u64,
    mut shutdown: crate::base::shutdown::ShutdownWatch,
    handoff: Handoff,
    replies: Arc<ReplyCharge>,
    tap: Option<Tap>,
) {
    let mut replaced = handoff.replaced.subscribe();
    let mut following = Following::new(conn_id, handoff);
    // Grown on first use and kept (up to 1 MiB, see below), so a steady
    // stream allocates nothing per frame while an idle connection holds no
    // output buffer at all (issue 45: 1 000 idle connections cost 15 MiB
    // when each reserved 16 KiB up front).
    let mut out: Vec<u8> = Vec::new();
    let mut senders_gone = false;
    loop {
        // Take everything queued so far.
        while let Ok(item) = rx.try_recv() {
            accept(item, &mut following, &mut out);
        }
        if replaced.borrow().is_some() {
            break;
        }
        let behind = following.pull_frames(&mut out).await;
        if !out.is_empty() {
            let written = tokio::select! {
                r = sink.write_all(&out) => r,
                _ = shutdown.wait() => break,
                _ = replaced.wait_for(Option::is_some) => break,
            };
            if written.is_err() {
                crate::log_warn!("[frameSink] replay write failed, detaching");
                break;
            }
            replies.written(out.len());
            if let Some(tap) = &tap {
                tap.frame(Direction::Out, &out);
            }
            out.clear();
            if out.capacity() > 1024 * 1024 {
                out.shrink_to(64 * 1024);
            }
            continue;
        }
        if behind || following.has_pending() {
            // A disk read came back empty (its segment was evicted), or a
            // log still owes frames: the next pass goes on at once.
            continue;
        }
        if senders_gone {
            break;
        }
        tokio::select! {
            item = rx.recv() => match item {
                Some(item) => accept(item, &mut following, &mut out),
                None => senders_gone = true,
            },
            _ = following.woken() => {}
            _ = replaced.wait_for(Option::is_some) => break,
            _ = shutdown.wait() => break,
        }
    }
    following.unsubscribe_all();
    let _ = sink.shutdown().await;
}

/// Writes a reply, or starts following the log a [`Reply::Follow`] names.
fn accept(item: Reply, following: &mut Following, out: &mut Vec<u8>) {
    match item {
        Reply::Line(_) | Reply::Pong(_) | Reply::StdinAck(..) | Reply::StdinRefused(..) => item.write_line(out),
        Reply::Follow { follow, line } => following.follow(follow, line, out),
    }
}
