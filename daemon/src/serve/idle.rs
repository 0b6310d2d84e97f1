//! The idle exit (`idle-exit-min`, remora's own; off by default, as the
//! reference has none): a daemon with no client connected and nothing in
//! its process table (no child running, no exited one kept for reattach)
//! for the set time shuts down through the ordinary graceful path, with
//! one log line saying why.
//!
//! Why: a client that lost its token (a Desktop restart, `Reattach
//! failed: auth error`) starts a fresh daemon on a new socket and never
//! comes back to the old one, and such daemons pile up (#72929 in
//! `anthropics/claude-code`). `remora -doctor` lists them and names this
//! key.
//!
//! Readiness-driven: the task sleeps on [`crate::base::activity`] while
//! the daemon is busy, and on one timer while it is idle; every
//! connection opened or closed and every process registered or dropped
//! wakes it, and an idle period then starts over.

use crate::serve::state::Daemon;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Whether anything keeps the daemon busy: a connection, or a process in
/// the table.
fn busy(daemon: &Daemon) -> bool {
    daemon.clients.load(Ordering::Relaxed) > 0 || daemon.processes.count() > 0
}

/// Runs until shutdown; triggers it after `after` of uninterrupted
/// idleness. `after` is never zero here (zero is off: not started).
pub(crate) async fn watch(daemon: Arc<Daemon>, after: Duration, setting: String) {
    let mut changes = daemon.activity.subscribe();
    let mut stopped = daemon.shutdown.subscribe();
    loop {
        // Marked seen before the check: a change after it wakes the wait.
        changes.borrow_and_update();
        if busy(&daemon) {
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = stopped.wait() => return,
            }
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(after) => {}
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                continue;
            }
            _ = stopped.wait() => return,
        }
        if busy(&daemon) {
            continue;
        }
        crate::log_info!(
            "[Server] Idle for {setting} min (no client connected, no process running or kept): shutting down (idle-exit-min)"
        );
        daemon.shutdown.trigger();
        return;
    }
}
