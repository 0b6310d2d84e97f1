//! What a bench run is given ([`BenchOptions`], [`MemoryOptions`]) and
//! the daemons it measures ([`start`]).

use crate::dut::{self, Daemon};
use std::path::Path;
use std::time::Duration;

/// Bench knobs.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub stream_bytes: u64,
    pub pings: usize,
    pub pipelined: usize,
    pub spawns: usize,
    /// Rounds: each measures both binaries, in alternating order; the
    /// table shows medians (see [`super::run`]).
    pub rounds: usize,
    /// Memory items (see [`super::memory`]), run in the first round only;
    /// `None` skips them.
    pub memory: Option<MemoryOptions>,
}

/// Knobs of the memory items.
#[derive(Debug, Clone, Default)]
pub struct MemoryOptions {
    pub exited: usize,
    pub stdin_mib: u64,
    pub flood_conns: usize,
    pub flood_mib: u64,
}

pub(crate) const RETENTION_MS: u64 = 2000;
/// A bench daemon for `bin` in a directory of its own, with this
/// process's environment plus `env`.
pub(crate) fn start(bin: &Path, env: &[(&str, &str)]) -> Result<Daemon, dut::Error> {
    start_with_limit(bin, env, None)
}

/// [`start`] with the daemon's descriptor limit (soft and hard) set to
/// `fd_limit` (`--scale`'s thousands of processes; see `dut::limits`).
pub(crate) fn start_with_limit(bin: &Path, env: &[(&str, &str)], fd_limit: Option<u64>) -> Result<Daemon, dut::Error> {
    let options = crate::dut::Options {
        prefix: "hb",
        env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        isolated: false,
        fd_limit,
        banner_within: Duration::from_secs(30),
    };
    Daemon::start(bin, options)
}
