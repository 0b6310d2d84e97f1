//! The RPC server: the owner-only socket and the accept loop. The state it
//! serves lives in [`crate::serve::state`]; lifecycle concerns (flags,
//! daemonizing, signals) live in [`crate::launch::cli`]; this module only serves.

use crate::serve::admission::Admitted;
use crate::serve::state::Daemon;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixListener as StdUnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why the socket could not be opened, phrased like Go's `net.Listen`.
#[derive(Debug)]
pub(crate) struct BindError {
    pub path: PathBuf,
    pub source: io::Error,
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "listen unix: {}: bind: {}",
            self.path.display(),
            crate::base::goerr::io_text(&self.source)
        )
    }
}

impl std::error::Error for BindError {}

use crate::sys::os::{SOCKET_PATH_MAX, SYSTEM_NAME as SOCKET_PATH_SYSTEM};

/// Refuses a socket path the kernel cannot bind, before anything is
/// created for it: the kernel's own answer is a bare `invalid argument`.
/// Counted as given (a relative path is not made absolute by the kernel).
pub(crate) fn check_socket_path_length(path: &Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let len = path.as_os_str().as_bytes().len();
    if len <= SOCKET_PATH_MAX {
        return Ok(());
    }
    Err(format!(
        "remora: socket path too long: {} is {len} bytes, and a Unix socket path can have at most {SOCKET_PATH_MAX} bytes on {SOCKET_PATH_SYSTEM}; choose a shorter -socket",
        path.display()
    ))
}

/// Creates the listening socket at `path`, mode 0600 from the moment it
/// exists (the file is created under a 0177 umask, so there is no
/// bind-then-chmod window). A stale socket left by a dead daemon is
/// replaced; a live daemon's socket is left alone and reported as in use.
///
/// Call this before starting any threads: the umask is process-wide.
pub(crate) fn bind_socket(path: &Path) -> Result<StdUnixListener, BindError> {
    let fail = |source| BindError {
        path: path.to_path_buf(),
        source,
    };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(fail(io::Error::from_raw_os_error(libc::EADDRINUSE)));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(fail(io::Error::from_raw_os_error(libc::EADDRINUSE)));
        }
        // Nobody is listening: a stale socket from a dead daemon.
        let _ = std::fs::remove_file(path);
    }
    // SAFETY: umask only swaps the process file-creation mask.
    let previous = unsafe { libc::umask(0o177) };
    let bound = StdUnixListener::bind(path);
    // SAFETY: as above; this restores the mask saved before the bind.
    unsafe { libc::umask(previous) };
    let listener = bound.map_err(fail)?;
    listener.set_nonblocking(true).map_err(fail)?;
    Ok(listener)
}

/// Accepts connections until shutdown is triggered, then closes the
/// listener. Connections notice shutdown themselves.
pub(crate) async fn accept_loop(listener: StdUnixListener, daemon: Arc<Daemon>) -> io::Result<()> {
    let listener = tokio::net::UnixListener::from_std(listener)?;
    let listening = std::os::fd::AsRawFd::as_raw_fd(&listener);
    let mut shutdown = daemon.shutdown.subscribe();
    let refusals = crate::base::logging::Quota::new(5);
    let crowded = crate::base::logging::Quota::new(5);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                // The admission may wait for a fresh connection's grace
                // to pass; a shutdown does not wait for it.
                Ok((stream, _)) => match tokio::select! {
                    admitted = daemon.admission.admit(peer_of(&stream), || {
                        let newcomer = std::os::fd::AsRawFd::as_raw_fd(&stream);
                        has_a_line_waiting(newcomer) || !has_connections_waiting(listening)
                    }) => admitted,
                    _ = shutdown.wait() => return Ok(()),
                } {
                    Admitted::Yes(ticket) => {
                        let (read_half, write_half) = stream.into_split();
                        tokio::spawn(crate::serve::connection::serve(read_half, write_half, daemon.clone(), ticket));
                    }
                    // Every place is held by an authenticated client: close
                    // this one at once rather than run out of descriptors.
                    Admitted::Full => {
                        if refusals.allow() {
                            crate::log_warn!(
                                "[Server] refusing a connection: {} authenticated connections are open (the limit)",
                                daemon.admission.cap()
                            );
                        }
                        drop(stream);
                    }
                    // A silent connection in the middle of its own
                    // process's burst: closing it keeps the backlog moving
                    // at the speed of accept and close.
                    Admitted::Crowded => {
                        if crowded.allow() {
                            crate::log_warn!(
                                "[Server] refusing a connection: the connection limit ({}) is reached, its process holds the most connections without the token, all opened in the last {:?}, and more connections wait",
                                daemon.admission.cap(),
                                daemon.admission.fresh_grace()
                            );
                        }
                        drop(stream);
                    }
                },
                Err(e) => {
                    crate::log_error!("[Server] accept failed: {e}");
                    // Out of descriptors and the like: back off briefly
                    // instead of spinning.
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.wait() => return Ok(()),
        }
    }
}

/// Writes the summary of connections that went unlogged (`connlog`) once
/// per period, until aborted.
async fn summarize_unlogged(daemon: Arc<Daemon>) {
    let mut tick = tokio::time::interval(crate::serve::connlog::SUMMARY_EVERY);
    tick.tick().await;
    loop {
        tick.tick().await;
        daemon.admission.log_lines.summarize();
    }
}

/// The process at the other end of an accepted connection.
fn peer_of(stream: &tokio::net::UnixStream) -> Option<i32> {
    crate::sys::os::peer_pid(std::os::fd::AsRawFd::as_raw_fd(stream))
}

/// How far [`has_a_line_waiting`] looks: a first request of a client
/// (Desktop's is `server.capabilities`) fits many times over.
const FIRST_LINE_PEEK: usize = 4096;

/// Whether the accepted connection `fd` has a whole line waiting in its
/// first [`FIRST_LINE_PEEK`] bytes: a client that already wrote its first
/// request, not a partial line or silence.
fn has_a_line_waiting(fd: std::os::fd::RawFd) -> bool {
    let mut head = [0u8; FIRST_LINE_PEEK];
    // SAFETY: recv writes at most `head.len()` bytes into `head`; MSG_PEEK
    // leaves them in the socket and MSG_DONTWAIT never blocks.
    let n = unsafe {
        libc::recv(
            fd,
            head.as_mut_ptr().cast(),
            head.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    usize::try_from(n).is_ok_and(|n| head[..n.min(head.len())].contains(&b'\n'))
}

/// Whether another connection waits in the listen backlog of `fd`.
fn has_connections_waiting(fd: std::os::fd::RawFd) -> bool {
    let mut ready = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll reads and writes the one pollfd we pass; a zero
    // timeout never blocks.
    let n = unsafe { libc::poll(&mut ready, 1, 0) };
    n > 0 && ready.revents & libc::POLLIN != 0
}

/// How long the teardown waits for connections to close before the last
/// summary of unlogged ones.
const CLOSING_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves `listener` until shutdown, then tears down: children are killed
/// (or kept with `-keep-children`) and the socket file is removed. The
/// teardown completes before this returns.
pub(crate) async fn run(listener: StdUnixListener, daemon: Arc<Daemon>) -> io::Result<()> {
    let path = &daemon.options.socket_path;
    let ours = socket_identity(path);
    let summaries = tokio::spawn(summarize_unlogged(daemon.clone()));
    let served = accept_loop(listener, daemon.clone()).await;
    summaries.abort();
    // Every connection notices the shutdown and closes at once; the last
    // summary waits for them (bounded, in case one cannot), so that a
    // connection still in flight is counted, not lost with the process.
    let _ = tokio::time::timeout(CLOSING_WAIT, daemon.admission.all_closed()).await;
    daemon.admission.log_lines.summarize();
    if served.is_err() {
        crate::agent::loginshell::end_all();
    }
    served?;
    crate::log_info!("[Server] Shutting down");
    daemon.processes.shutdown(daemon.options.keep_children).await;
    // A login-shell run still going is ours, kept children or not; so is
    // one a spawn racing this teardown starts (killed at once).
    crate::agent::loginshell::end_all();
    daemon.replay.remove_own_dir();
    // Only remove the socket if it is still the one we bound: a successor
    // started during teardown (e.g. `-stop` then `-serve`) may already have
    // replaced it as stale, and its socket must survive our exit.
    if ours.is_none() || socket_identity(path) == ours {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Device and inode of the file at `path`, if any.
fn socket_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}
