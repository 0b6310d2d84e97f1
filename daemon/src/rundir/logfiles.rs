//! The names and the cap of the daemon log beside the socket, one set for
//! both halves of `daemonlog` (Unix `daemonlog.rs`, Windows
//! `rundir/windows.rs`) and for the launchers that hand the detached
//! daemon its log.

/// The log's name in the socket's directory.
pub(crate) const LOG_NAME: &str = "remote-server.log";
/// This session's first full log, kept while the session lasts.
pub(crate) const FIRST_NAME: &str = "remote-server.log.1";
/// This session's latest full log but the first.
pub(crate) const PREVIOUS_NAME: &str = "remote-server.log.2";
/// The most one log file grows to before the daemon starts it over.
pub(crate) const CAP: u64 = 32 << 20;
/// Test-only override of [`CAP`] in bytes (read and removed by the
/// detached daemon); not part of the documented interface.
pub(crate) const TEST_CAP_ENV: &str = "REMORA_TEST_DAEMON_LOG_CAP";
/// Tells the detached daemon that its stderr is this log (so it applies
/// [`CAP`]); removed from its environment at start.
pub(crate) const CAPPED_ENV: &str = "REMORA_DAEMON_LOG_CAPPED";
