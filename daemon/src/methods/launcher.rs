//! `launcher.*` (build 89cb6289's managed launcher, served only to builds
//! with [`crate::protocol::build::Switch::ManagedLauncher`]):
//! `launcher.resolve` reads the host's managed settings on every call and
//! answers which launcher Claude Code would be started through
//! ([`settings`], shared with `-install` and `-probe-cli` in
//! [`crate::agent::launcher`]). Nothing is cached and the launcher is never
//! run here.
//!
//! Params `{"cliPath": "<string>"}` bound with Go's rules: absent or
//! mistyped params are `-32602 Invalid params` (the dispatcher's gate);
//! `null` params, `{}` and a `null` or empty `cliPath` are
//! `-32602 cliPath is required`.

use super::hostrules;
use super::Outcome;
use crate::agent::launcher::settings;
use crate::base::logging::Untrusted;
use crate::go_struct;
use crate::protocol::method::LauncherMethod;
use crate::protocol::rpc::RpcError;
use crate::sys::Host;
use settings::Resolution;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

const MSG_CLI_PATH_REQUIRED: &str = "cliPath is required";
/// `process.spawn`: the launcher checks refused the `launcher` param.
pub(crate) const LAUNCHER_UNUSABLE: i64 = -32004;
/// `process.spawn`: the launcher passed the checks but did not start.
pub(crate) const LAUNCHER_NOT_STARTED: i64 = -32005;
const MSG_RELATIVE_COMMAND: &str = "command must be an absolute path when a launcher is given";
const MSG_CANNOT_USE: &str = "the managed launcher cannot be used: ";
/// The reason when exec finds the launcher but not what it needs to run.
const NO_INTERPRETER: &str = "its interpreter was not found (the program on its #! line, or the loader of an ELF binary; a script saved with Windows CRLF line endings fails this way)";

go_struct! {
    /// Params of `launcher.resolve`.
    pub(crate) struct LauncherParams {
        pub cli_path: String = "cliPath",
    }
}

go_struct! {
    /// The `launcher` member of `process.*` params, bound only for builds
    /// with the managed launcher: `null` or absent is no launcher, `[]` a
    /// launcher with no element (refused).
    pub(crate) struct LauncherParam {
        pub launcher: Option<Vec<String>> = "launcher",
    }
}

/// `process.spawn`'s checks of a `launcher`, in the recorded order, before
/// the cwd check: a relative command is `-32602`, then the
/// `launcher.resolve` checks (the command in place of `cliPath`) are
/// `-32004`.
pub(crate) fn check_spawn_launcher(launcher: &[String], command: &str) -> Result<(), RpcError> {
    check_spawn_launcher_on(crate::sys::os::HOST, launcher, command)
}

/// [`check_spawn_launcher`] as `host` answers: on Windows every launcher
/// is `-32004` first ([`hostrules::launcher_refusal`]; claustrum's order,
/// before the relative-command check, is followed).
fn check_spawn_launcher_on(host: Host, launcher: &[String], command: &str) -> Result<(), RpcError> {
    if let Some(reason) = hostrules::launcher_refusal(host) {
        return Err(RpcError::new(LAUNCHER_UNUSABLE, format!("{MSG_CANNOT_USE}{reason}")));
    }
    if !command.starts_with('/') {
        return Err(RpcError::invalid_params(MSG_RELATIVE_COMMAND));
    }
    settings::check_argv(launcher, command)
        .map_err(|reason| RpcError::new(LAUNCHER_UNUSABLE, format!("{MSG_CANNOT_USE}{reason}")))
}

/// The `-32005` message for a launcher at `path` whose exec failed.
/// What a spawned child loses: nothing for a build without the managed
/// launcher; else [`settings::STRIPPED_ENV`], and with a launcher also
/// [`settings::WRAPPER_ENV`].
pub(crate) fn stripped_env(managed: bool, with_launcher: bool) -> &'static [&'static str] {
    const WITH_LAUNCHER: [&str; 3] = [
        settings::STRIPPED_ENV[0],
        settings::STRIPPED_ENV[1],
        settings::WRAPPER_ENV,
    ];
    match (managed, with_launcher) {
        (false, _) => &[],
        (true, false) => &settings::STRIPPED_ENV,
        (true, true) => &WITH_LAUNCHER,
    }
}

pub(crate) fn not_started(path: &str, err: &std::io::Error) -> String {
    let reason = match err.raw_os_error() {
        // The launcher passed the checks, so it exists: what is missing
        // is its interpreter.
        Some(libc::ENOENT) => NO_INTERPRETER.to_string(),
        _ => crate::base::goerr::io_text(err),
    };
    format!("the managed launcher {path} could not be started: {reason}")
}

/// What the daemon remembers between calls, for its log only: the last
/// answer (a repeat of it is not logged again) and whether the ignored
/// settings-folder override was logged (once per daemon).
#[derive(Debug, Default)]
pub(crate) struct LauncherLog {
    last: Mutex<Option<Resolution>>,
    ignored_override: AtomicBool,
}

impl LauncherLog {
    /// Logs `answer` when it is a refusal and not the previous answer.
    fn note(&self, answer: &Resolution) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.as_ref() == Some(answer) {
            return;
        }
        *last = Some(answer.clone());
        match answer {
            Resolution::Unusable { source, reason } => crate::log_warn!(
                "[LauncherHandler] managed launcher from {} refused: {}",
                Untrusted(source),
                Untrusted(reason)
            ),
            Resolution::Unreadable { reason, path } => crate::log_warn!(
                "[LauncherHandler] managed settings unreadable: {}: {}",
                Untrusted(path),
                Untrusted(reason)
            ),
            Resolution::None | Resolution::Usable { .. } => {}
        }
    }
}

pub(crate) fn handle(method: LauncherMethod, params: LauncherParams, log: &LauncherLog) -> Outcome {
    match method {
        LauncherMethod::Resolve => resolve(&params.cli_path, log),
    }
}

fn resolve(cli_path: &str, log: &LauncherLog) -> Outcome {
    if cli_path.is_empty() {
        return Outcome::invalid_params(MSG_CLI_PATH_REQUIRED);
    }
    if let Some(none) = hostrules::fixed_resolve(crate::sys::os::HOST) {
        return Outcome::ok(&none);
    }
    let (dir, note) = settings::settings_dir();
    if let Some(note) = note {
        if !log.ignored_override.swap(true, Ordering::Relaxed) {
            crate::log_info!("{note}");
        }
    }
    let answer = settings::resolve_in(&dir, cli_path);
    log.note(&answer);
    Outcome::ok(&answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::gojson::to_go_json;

    #[test]
    fn windows_refuses_every_launcher_before_the_other_checks() {
        let refused = RpcError::new(
            LAUNCHER_UNUSABLE,
            "the managed launcher cannot be used: a launcher cannot be applied on a Windows host",
        );
        let cmd = vec![r"C:\Windows\System32\cmd.exe".to_string()];
        for (launcher, command) in [
            (cmd.clone(), "/bin/echo"),
            (Vec::new(), "/bin/echo"),
            // Before the relative-command check (claustrum's order).
            (cmd, "echo"),
        ] {
            assert_eq!(
                check_spawn_launcher_on(Host::Windows, &launcher, command),
                Err(refused.clone())
            );
        }
        // Unix: the relative command is -32602, an empty launcher -32004
        // with the resolve check's own reason.
        assert_eq!(
            check_spawn_launcher_on(Host::Unix, &[], "echo").map_err(|e| e.code),
            Err(-32602)
        );
        let empty = check_spawn_launcher_on(Host::Unix, &[], "/bin/echo").unwrap_err();
        assert_eq!(empty.code, LAUNCHER_UNUSABLE);
        assert_ne!(empty, refused);
    }

    #[test]
    fn the_windows_resolve_answer_is_the_none_result() {
        let none = hostrules::fixed_resolve(Host::Windows).unwrap();
        assert_eq!(to_go_json(&none), to_go_json(&Resolution::None));
    }
}
