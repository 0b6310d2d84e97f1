//! The Windows half of `rundir` (issue 43): what the serve core asks of
//! it on Unix, with what Windows does. The reference has no run-dir lock,
//! child records or orphan reaping on Windows: every child is in a Job
//! Object that dies with the daemon, so nothing outlives it to be reaped.
//! The plugin directories are the Unix module's, through its Windows
//! half. The token file and the daemon log's rotation are not ported yet.

/// Child records: none on Windows.
pub(crate) mod childrec {
    /// Nothing to record: a child cannot outlive the daemon's Job Object.
    pub(crate) fn record(_pid: i32, _argv0: &str) {}

    /// Nothing recorded, nothing to forget.
    pub(crate) fn forget(_pid: i32) {}
}

/// The plugin directories `plugins.prune` sweeps: shared with Unix, its
/// OS steps in `plugindirs/windows.rs`.
#[path = "plugindirs.rs"]
pub(crate) mod plugindirs;

/// The daemon log beside the socket.
pub(crate) mod daemonlog {
    /// The identity of the entry `name` of `dir`: not known yet (it waits
    /// on `base/windows/safedir.rs`), so a rotating log never takes a name
    /// for its own and starts over instead.
    pub(crate) fn identity_in(_dir: &crate::base::safedir::Dir, _name: &[u8]) -> Option<(u64, u64)> {
        None
    }
}
