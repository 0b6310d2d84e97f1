//! The Windows half of `rundir` (issue 43): what the serve core asks of
//! it on Unix, with what Windows does. The reference has no run-dir lock,
//! child records or orphan reaping on Windows: every child is in a Job
//! Object that dies with the daemon, so nothing outlives it to be reaped.
//! The token file, the daemon log's rotation and the plugin directories
//! are not ported yet.

/// Child records: none on Windows.
pub(crate) mod childrec {
    /// Nothing to record: a child cannot outlive the daemon's Job Object.
    pub(crate) fn record(_pid: i32, _argv0: &str) {}

    /// Nothing recorded, nothing to forget.
    pub(crate) fn forget(_pid: i32) {}
}

/// The plugin directories a child uses.
pub(crate) mod plugindirs {
    /// No plugin hashes are tracked: `plugins.prune` is not ported to
    /// Windows yet, so nothing asks which plugin directories are in use.
    pub(crate) fn hashes_in<'a>(_words: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        Vec::new()
    }
}

/// The daemon log beside the socket.
pub(crate) mod daemonlog {
    /// The identity of the entry `name` of `dir`: not known yet (it waits
    /// on `base/windows/safedir.rs`), so a rotating log never takes a name
    /// for its own and starts over instead.
    pub(crate) fn identity_in(_dir: &crate::base::safedir::Dir, _name: &[u8]) -> Option<(u64, u64)> {
        None
    }
}
