//! The supervisor task of one child: observe the exit without reaping,
//! wait for both output pipes to drain, append the exit frame, then reap
//! (the order the module map of [`super`] explains).

use super::managed::{lock, KilledBy, ManagedProcess};
use crate::protocol::metrics::Metrics;
use crate::replay::frame::ExitFrame;
use crate::sys::process as sys;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Waits for the exit, then for both pipes to drain, appends the exit
/// frame and reaps.
pub(super) async fn supervise(
    process: Arc<ManagedProcess>,
    readers: Option<(tokio::task::JoinHandle<()>, tokio::task::JoinHandle<()>)>,
    metrics: Arc<Metrics>,
) {
    let status = match sys::wait_exit(process.pid).await {
        Ok(status) => status,
        Err(e) => {
            crate::log_error!(
                "[process.Manager] Process {} wait failed: {}",
                crate::base::logging::Untrusted(&process.id),
                e
            );
            sys::ExitStatus { code: -1, signal: None }
        }
    };
    let code = status.code;
    process.exit.send_replace(Some(code));
    crate::rundir::childrec::forget(process.pid);
    process.stop_stdin();
    if let Some((out, err)) = readers {
        let _ = out.await;
        let _ = err.await;
    }
    process.log.push_exit(ExitFrame {
        code,
        signal: status.signal.and_then(sys::signal_name),
        killed_by: lock(&process.killed_by).map(KilledBy::wire),
    });
    let _ = process.finished_at.set(std::time::Instant::now());
    process.finished.send_replace(true);
    process.reap();
    metrics.process_exits.fetch_add(1, Ordering::Relaxed);
    crate::log_info!(
        "[process.Manager] Process {} exited with code {}",
        crate::base::logging::Untrusted(&process.id),
        code
    );
}
