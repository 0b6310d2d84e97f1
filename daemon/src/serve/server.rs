//! The RPC server: the accept loop and the teardown. What it accepts from
//! is a [`Listener`] (the owner-only socket of `serve::socket`;
//! on Windows also the named pipe); the state it serves lives in
//! [`crate::serve::state`]; lifecycle concerns (flags, daemonizing,
//! signals) live in [`crate::launch`]; this module only serves.

use crate::serve::admission::Admitted;
use crate::serve::listener::{Accepted, Listener};
use crate::serve::state::Daemon;
use std::io;
use std::sync::Arc;

/// Accepts connections until shutdown is triggered, then closes the
/// listener. Connections notice shutdown themselves.
pub(crate) async fn accept_loop(mut listener: impl Listener, daemon: Arc<Daemon>) -> io::Result<()> {
    let mut shutdown = daemon.shutdown.subscribe();
    let refusals = crate::base::logging::Quota::new(5);
    let crowded = crate::base::logging::Quota::new(5);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                // The admission may wait for a fresh connection's grace
                // to pass; a shutdown does not wait for it.
                Ok(stream) => match tokio::select! {
                    admitted = daemon.admission.admit(stream.peer(), || {
                        stream.has_a_line_waiting() || !listener.has_connections_waiting()
                    }) => admitted,
                    _ = shutdown.wait() => return Ok(()),
                } {
                    Admitted::Yes(ticket) => {
                        let (read_half, write_half) = stream.into_halves();
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

/// How long the teardown waits for connections to close before the last
/// summary of unlogged ones.
const CLOSING_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves what was bound until shutdown, then tears down: children are
/// killed (or kept with `-keep-children`) and the socket file is removed. The
/// teardown completes before this returns.
pub(crate) async fn run(bound: crate::serve::socket::Bound, daemon: Arc<Daemon>) -> io::Result<()> {
    let path = &daemon.options.socket_path;
    let ours = crate::sys::os::path_identity(path);
    let listener = crate::serve::socket::listen(bound)?;
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
    if ours.is_none() || crate::sys::os::path_identity(path) == ours {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}
