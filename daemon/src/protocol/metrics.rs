//! Counters for the opt-in `-metrics-addr` endpoint. Counts only: no
//! command output, no tokens. The handlers bump them; the exposition (HTTP
//! and Prometheus text format) lives in the lifecycle code.

use crate::protocol::method::Method;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Replay-log storage figures, shared with the replay store that updates
/// them (see [`crate::replay::store`]).
#[derive(Debug, Default)]
pub(crate) struct ReplayMetrics {
    /// Gauge: frame bytes held in RAM (hot tails, unwritten frames, rings).
    pub ram_bytes: AtomicU64,
    /// Gauge: bytes in segment files.
    pub disk_bytes: AtomicU64,
    /// Counter: evictions under the disk budget (one per log or segment).
    pub evictions: AtomicU64,
    /// Counter: logs (or the whole store) that fell back to a RAM ring.
    pub fallbacks: AtomicU64,
}

/// Outcome classes of a request, for `requests` counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok = 0,
    Error = 1,
    NoReply = 2,
}

/// Every counter the daemon keeps.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub connections: AtomicU64,
    /// Indexed by [`Method::index`] (the order of
    /// [`crate::protocol::method::METHODS`]), then by [`Outcome`].
    pub requests: [[AtomicU64; 3]; crate::protocol::method::COUNT],
    /// Requests rejected before dispatch (parse, auth, version, method).
    pub rejected: AtomicU64,
    pub process_spawns: AtomicU64,
    pub process_exits: AtomicU64,
    pub reattaches: AtomicU64,
    pub stream_bytes_out: AtomicU64,
    pub stdin_bytes_in: AtomicU64,
    pub replay: Arc<ReplayMetrics>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            connections: AtomicU64::new(0),
            requests: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            rejected: AtomicU64::new(0),
            process_spawns: AtomicU64::new(0),
            process_exits: AtomicU64::new(0),
            reattaches: AtomicU64::new(0),
            stream_bytes_out: AtomicU64::new(0),
            stdin_bytes_in: AtomicU64::new(0),
            replay: Arc::new(ReplayMetrics::default()),
        }
    }
}

impl Metrics {
    pub(crate) fn count_request(&self, method: Method, outcome: Outcome) {
        if let Some(counter) = self
            .requests
            .get(method.index())
            .and_then(|by_outcome| by_outcome.get(outcome as usize))
        {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }
}
