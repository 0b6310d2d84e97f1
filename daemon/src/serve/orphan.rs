//! Orphan exit: a daemon whose socket path no
//! longer leads back to it, and that has had no client for a while, shuts
//! itself down gracefully instead of lingering forever.
//!
//! Every check period (60 s) the socket path's device and inode are
//! compared with the ones bound at start. While they match, or while any
//! client is connected, nothing happens. Once the path is gone or
//! different and nobody is connected, a grace clock (10 min) starts; a
//! client or a matching path resets it. After the grace the daemon
//! self-probes: it dials the path and asks the kernel who answered
//! (`SO_PEERCRED`). Reaching itself resets the clock; two failed probes in
//! a row (one check period apart) trigger the ordinary graceful shutdown.
//!
//! Divergence of remora's own: the reference self-probes with an
//! authenticated `server.capabilities` and compares `instanceId`; remora
//! identifies the listener by its peer credentials instead, so its token is
//! never sent to whatever process took the path over.
//!
//! Both periods can be shortened for tests only, through the environment
//! variable [`TEST_TIMERS_ENV`] (`<check ms>,<grace ms>`), read and removed
//! at start; without it the reference's periods apply.

use crate::serve::state::Daemon;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Test-only override of the two periods; not part of the documented
/// interface.
pub(crate) const TEST_TIMERS_ENV: &str = "REMORA_TEST_ORPHAN_TIMERS";

/// The check period and the grace before the first self-probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timers {
    pub check: Duration,
    pub grace: Duration,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            check: Duration::from_secs(60),
            grace: Duration::from_secs(600),
        }
    }
}

impl Timers {
    /// The reference periods, or the test override. Removes the variable
    /// so children never inherit it. Call before threads start.
    pub(crate) fn from_env() -> Timers {
        let Some(value) = std::env::var_os(TEST_TIMERS_ENV) else {
            return Timers::default();
        };
        std::env::remove_var(TEST_TIMERS_ENV);
        Timers::parse(&value.to_string_lossy()).unwrap_or_default()
    }

    fn parse(s: &str) -> Option<Timers> {
        let (check, grace) = s.split_once(',')?;
        let ms = |v: &str| {
            v.trim()
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .map(Duration::from_millis)
        };
        Some(Timers {
            check: ms(check)?,
            grace: Duration::from_millis(grace.trim().parse().ok()?),
        })
    }
}

/// Device and inode of the socket file at `path`.
pub(crate) fn identity(path: &Path) -> Option<(u64, u64)> {
    crate::sys::os::path_identity(path)
}

/// Runs the check until shutdown. A no-op when the bound socket's
/// identity is unknown.
pub(crate) async fn watch(daemon: Arc<Daemon>, bound: Option<(u64, u64)>, timers: Timers) {
    let Some(bound) = bound else {
        return;
    };
    let path = daemon.options.socket_path.clone();
    let mut stopped = daemon.shutdown.subscribe();
    let mut ticker = tokio::time::interval(timers.check);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    let mut orphaned_since: Option<tokio::time::Instant> = None;
    let mut failed_probes = 0u32;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stopped.wait() => return,
        }
        let connected = daemon.clients.load(Ordering::Relaxed) > 0;
        if connected || identity(&path) == Some(bound) {
            orphaned_since = None;
            failed_probes = 0;
            continue;
        }
        let since = *orphaned_since.get_or_insert_with(tokio::time::Instant::now);
        if since.elapsed() < timers.grace {
            continue;
        }
        if crate::serve::socket::reaches_self(&path).await {
            orphaned_since = None;
            failed_probes = 0;
            continue;
        }
        failed_probes += 1;
        crate::log_info!(
            "[Server] Orphan check: socket path {} does not lead back to this daemon (probe {failed_probes} of 2)",
            path.display()
        );
        if failed_probes >= 2 {
            crate::log_info!("[Server] Socket path taken over and no client connected; shutting down");
            daemon.shutdown.trigger();
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_parse_and_default() {
        assert_eq!(
            Timers::parse("50,200"),
            Some(Timers {
                check: Duration::from_millis(50),
                grace: Duration::from_millis(200)
            })
        );
        assert_eq!(Timers::parse("0,5"), None);
        assert_eq!(Timers::parse("x"), None);
        assert_eq!(Timers::default().check, Duration::from_secs(60));
        assert_eq!(Timers::default().grace, Duration::from_secs(600));
    }
}
