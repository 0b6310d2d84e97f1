//! The Windows half of `methods::launcher` (issue 43): the managed
//! launcher is listed for the builds that have it (`launcher.managed`),
//! but the reference's Windows builds apply none: every `process.spawn`
//! `launcher` is refused and `launcher.resolve` answers `none` without
//! reading any settings file ([`hostrules`], which holds both rules and
//! their Linux tests; docs/UPSTREAM.md "Windows").

use super::hostrules;
use super::Outcome;
use crate::go_struct;
use crate::protocol::method::LauncherMethod;
use crate::protocol::rpc::RpcError;

/// `process.spawn`: the launcher checks refused the `launcher` param.
pub(crate) const LAUNCHER_UNUSABLE: i64 = -32004;
/// `process.spawn`: the launcher passed the checks but did not start.
pub(crate) const LAUNCHER_NOT_STARTED: i64 = -32005;
const MSG_CANNOT_USE: &str = "the managed launcher cannot be used: ";
const MSG_CLI_PATH_REQUIRED: &str = "cliPath is required";

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
/// Windows (`-32004`), an empty one too, before the cwd check.
pub(crate) fn check_spawn_launcher(_launcher: &[String], _command: &str) -> Result<(), RpcError> {
    match hostrules::launcher_refusal(crate::sys::os::HOST) {
        Some(reason) => Err(RpcError::new(LAUNCHER_UNUSABLE, format!("{MSG_CANNOT_USE}{reason}"))),
        None => Ok(()),
    }
}

/// What a spawned child loses: nothing yet on Windows (the strip of the
/// managed-launcher variables is not ported).
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

/// `launcher.resolve`: `cliPath is required` as on Unix, else `none`.
pub(crate) fn handle(method: LauncherMethod, params: LauncherParams, _log: &LauncherLog) -> Outcome {
    match method {
        LauncherMethod::Resolve if params.cli_path.is_empty() => Outcome::invalid_params(MSG_CLI_PATH_REQUIRED),
        LauncherMethod::Resolve => match hostrules::fixed_resolve(crate::sys::os::HOST) {
            Some(none) => Outcome::ok(&none),
            None => Outcome::internal(format!("{} is not available in this build", method.name())),
        },
    }
}
