//! The pumps: one task per output pipe copying each read into the replay
//! log as one frame, the stdin writer task draining a process's queue
//! into its pipe, and the daemon-wide budget of enlarged stdout pipes.

use super::managed::{lock, stdin_charge, ManagedProcess};
use crate::protocol::metrics::Metrics;
use crate::replay::frame::Stream;
use crate::replay::log::ReplayLog;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

/// One read of a pipe, hence the largest frame (seed 000: "at most one
/// 32 KiB read").
pub(crate) const READ_BUF: usize = 32 * 1024;
// A read goes straight into a buffer of the replay store's frame pool.
const _: () = assert!(READ_BUF == crate::replay::frame::POOLED_BUF);
/// Size of an enlarged stdout pipe (see [`grow_pipe`]).
#[cfg_attr(windows, allow(dead_code))]
pub(super) const PIPE_SIZE: i32 = 256 << 10;
/// How many enlarged pipes may exist at once.
const GROWN_PIPES_MAX: usize = 64;
pub(super) static GROWN_PIPES: AtomicUsize = AtomicUsize::new(0);

/// Enlarges a child's stdout pipe to [`PIPE_SIZE`] while the daemon-wide
/// budget allows. A bigger pipe lets a fast writer run ahead of the reader
/// instead of ping-ponging every 64 KiB (about +50% stream throughput).
/// The budget matters: pipe buffers count against the user's
/// `pipe-user-pages-soft` (64 MiB by default), and once that is exceeded
/// every *new* pipe of the user (the children's own pipelines included)
/// is cut to two pages. So at most [`GROWN_PIPES_MAX`] pipes are grown at
/// once (16 MiB, a quarter of the default limit); the rest keep the
/// default size. `resize` asks the OS ([`crate::sys::process::resize_pipe`]
/// where it can). Returns whether this pipe was grown (and so holds a
/// slot until its reader reaches EOF).
// Only the Unix launch grows pipes: Windows sizes them at creation.
#[cfg_attr(windows, allow(dead_code))]
pub(super) fn grow_pipe(resize: impl FnOnce() -> bool) -> bool {
    let taken = GROWN_PIPES.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
        (n < GROWN_PIPES_MAX).then_some(n + 1)
    });
    if taken.is_err() {
        return false;
    }
    if !resize() {
        GROWN_PIPES.fetch_sub(1, Ordering::AcqRel);
        return false;
    }
    true
}

/// What a pump reads: the daemon's end of a child's output pipe, with
/// readiness and non-blocking reads (the OS's, `launch::OutPipe`).
pub(super) trait OutputPipe: Send + 'static {
    /// Waits until a read may find data (or EOF).
    fn readable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send;
    /// Reads without waiting; `WouldBlock` when empty.
    fn try_read(&self, buf: &mut [u8]) -> std::io::Result<usize>;
}

/// Copies one output pipe into the log, one frame per read.
///
/// A read buffer is held only while the pipe has something to read: the
/// pump waits for readiness with none, takes one from the store's frame
/// pool, reads until the pipe is empty, and gives it back. So an idle
/// child costs no buffer (a child waiting forever on stdin, an MCP
/// server between requests), and a stream still takes each buffer from
/// the pool, allocating nothing per frame.
pub(super) async fn pump(pipe: impl OutputPipe, stream: Stream, log: Arc<ReplayLog>, metrics: Arc<Metrics>) {
    // Reads go straight into a buffer of the store's frame pool, which the
    // log then keeps as the frame: no copy per read.
    let mut held: Option<Arc<[u8]>> = None;
    loop {
        if let Err(e) = pipe.readable().await {
            crate::log_warn!("[process.Manager] {} read error: {}", stream.name(), e);
            return;
        }
        let mut buf = held.take().unwrap_or_else(|| log.read_buffer());
        let Some(space) = Arc::get_mut(&mut buf) else {
            // Not reached (the pool hands out only buffers nothing else
            // holds), but a shared one must never be written.
            held = Some(std::iter::repeat_n(0u8, READ_BUF).collect());
            continue;
        };
        match pipe.try_read(space) {
            Ok(0) => {
                log.give_back(buf);
                return;
            }
            Ok(n) => {
                // The readiness stays set until a read finds the pipe
                // empty, so the next turn reads again at once.
                held = log.push_read(stream, buf, n);
                metrics.stream_bytes_out.fetch_add(n as u64, Ordering::Relaxed);
                // Waits only when the disk writer is a whole bound behind:
                // the child then sees pipe backpressure, not our memory.
                log.wait_writable().await;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => log.give_back(buf),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => held = Some(buf),
            Err(e) => {
                crate::log_warn!("[process.Manager] {} read error: {}", stream.name(), e);
                return;
            }
        }
    }
}

/// Drains the stdin queue into the child. A failed write (EPIPE: the child
/// closed its stdin or exited) drops what is queued and marks stdin
/// broken; later `process.stdin` calls report the error instead of
/// pretending to deliver.
pub(super) async fn feed_stdin(
    mut pipe: impl tokio::io::AsyncWrite + Unpin,
    mut queue: mpsc::UnboundedReceiver<Vec<u8>>,
    queued: Arc<AtomicUsize>,
    process: Weak<ManagedProcess>,
) {
    while let Some(chunk) = queue.recv().await {
        let written = pipe.write_all(&chunk).await;
        queued.fetch_sub(stdin_charge(chunk.len()), Ordering::AcqRel);
        drop(chunk);
        if let Err(e) = written {
            if let Some(p) = process.upgrade() {
                let why = format!("write |1: {}", crate::base::goerr::io_text(&e));
                crate::log_warn!(
                    "[process.Manager] Process {} stdin: {}",
                    crate::base::logging::Untrusted(&p.id),
                    why
                );
                let mut st = lock(&p.stdin);
                st.broken = Some(why);
                st.queue = None;
            }
            return;
        }
    }
}
