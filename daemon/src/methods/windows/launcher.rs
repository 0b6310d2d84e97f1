//! The Windows half of `methods::launcher` (issue 43): the managed
//! launcher is listed for the builds that have it, but on Windows every
//! launcher is refused (claustrum's Windows record); reading the managed
//! settings (`agent::launcher::settings`) is not ported yet, so
//! `launcher.resolve` answers that plainly.

use super::Outcome;
use crate::go_struct;
use crate::protocol::method::LauncherMethod;
use crate::protocol::rpc::RpcError;

/// `process.spawn`: the launcher checks refused the `launcher` param.
pub(crate) const LAUNCHER_UNUSABLE: i64 = -32004;
/// `process.spawn`: the launcher passed the checks but did not start.
pub(crate) const LAUNCHER_NOT_STARTED: i64 = -32005;
const MSG_CANNOT_USE: &str = "the managed launcher cannot be used: ";
const NOT_ON_WINDOWS: &str = "managed launchers are not supported on Windows";

go_struct! {
    /// Params of `launcher.resolve`.
    pub(crate) struct LauncherParams {
        pub cli_path: String = "cliPath",
    }
}

go_struct! {
    /// The `launcher` member of `process.*` params, bound only for builds
    /// with the managed launcher.
    pub(crate) struct LauncherParam {
        pub launcher: Option<Vec<String>> = "launcher",
    }
}

/// `process.spawn`'s check of a `launcher`: every one is refused on
/// Windows (`-32004`).
pub(crate) fn check_spawn_launcher(_launcher: &[String], _command: &str) -> Result<(), RpcError> {
    Err(RpcError::new(
        LAUNCHER_UNUSABLE,
        format!("{MSG_CANNOT_USE}{NOT_ON_WINDOWS}"),
    ))
}

/// What a spawned child loses: nothing yet on Windows (the managed
/// settings' variables are not read there).
pub(crate) fn stripped_env(_managed: bool, _with_launcher: bool) -> &'static [&'static str] {
    &[]
}

/// The `-32005` message for a launcher at `path` whose start failed (not
/// reached on Windows: every launcher is refused before).
pub(crate) fn not_started(path: &str, err: &std::io::Error) -> String {
    format!(
        "the managed launcher {path} could not be started: {}",
        crate::base::goerr::io_text(err)
    )
}

/// What the daemon remembers between `launcher.resolve` calls: nothing
/// on Windows yet.
#[derive(Debug, Default)]
pub(crate) struct LauncherLog {}

/// `launcher.resolve`: not available on Windows yet.
pub(crate) fn handle(method: LauncherMethod, _params: LauncherParams, _log: &LauncherLog) -> Outcome {
    Outcome::internal(format!("{} is not available on Windows yet (issue 43)", method.name()))
}
