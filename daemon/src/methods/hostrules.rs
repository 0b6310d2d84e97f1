//! The wire answers the reference's Windows builds give differently from
//! its Linux and macOS builds, one function per rule, each taking the
//! host family ([`Host`]) as a value. Handlers pass [`crate::sys::os::HOST`];
//! the tests pass both families, so a Linux run checks the Windows answers
//! too. Sources and the rows behind them: docs/UPSTREAM.md, "Windows".
//!
//! The `features` list of `server.capabilities` has its own rule in
//! [`crate::protocol::build::Build::features`].

use crate::sys::Host;
use serde::Serialize;

/// The text after `refusing to <verb> worktree: <root> cannot be used: `
/// (claustrum `docs/record/git-worktree-create.md`, `worktreeRoot` bullet;
/// `docs/PROTOCOL.md` "git.worktree_create").
const NO_CUSTOM_LOCATION: &str = "a custom worktree location is not supported on Windows hosts yet";

/// The `process.spawn` `-32004` reason for any `launcher` on Windows, an
/// empty one too (claustrum `docs/PROTOCOL.md` error catalogue; rows SW1,
/// SW1x, SW2, SW4 of the 89cb6289 Windows VM captures).
const NO_LAUNCHER_ON_WINDOWS: &str = "a launcher cannot be applied on a Windows host";

/// Which worktree call a `worktreeRoot` came with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorktreeCall {
    Create,
    Remove,
}

/// A refused `worktreeRoot`: `text` goes in `error`; `code` in `errorCode`
/// (`unsafe_path` on create; remove's failures carry none). Serializes
/// as the whole failure frame, for a handler that has no result type of
/// its own.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct WorktreeRootRefusal {
    success: bool,
    #[serde(rename = "error")]
    pub text: String,
    #[serde(rename = "errorCode", skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
}

/// `git.worktree_create` / `git.worktree_remove` with a non-empty
/// `worktreeRoot`: the reference's Windows builds gate the placement off
/// and refuse every root, as sent, before any location test; other hosts
/// go on to the location tests (`None`).
pub(crate) fn worktree_root_refusal(host: Host, call: WorktreeCall, root: &str) -> Option<WorktreeRootRefusal> {
    if host != Host::Windows || root.is_empty() {
        return None;
    }
    let (verb, code) = match call {
        WorktreeCall::Create => ("create", Some("unsafe_path")),
        WorktreeCall::Remove => ("remove", None),
    };
    Some(WorktreeRootRefusal {
        success: false,
        text: format!("refusing to {verb} worktree: {root} cannot be used: {NO_CUSTOM_LOCATION}"),
        code,
    })
}

/// `process.spawn` with a `launcher` (non-null): the reason every one is
/// refused on Windows (`-32004`, before the relative-command and cwd
/// checks); `None` where the launcher checks run.
pub(crate) fn launcher_refusal(host: Host) -> Option<&'static str> {
    (host == Host::Windows).then_some(NO_LAUNCHER_ON_WINDOWS)
}

/// `launcher.resolve`'s answer where the host reads no managed settings:
/// `{"status":"none"}`.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct NoLauncher {
    status: &'static str,
}

/// `launcher.resolve` (after the `cliPath` check): Windows reads no
/// managed settings and answers none for every settings file (RES-30 of
/// the 89cb6289 Windows VM captures); `None` where the settings are read.
pub(crate) fn fixed_resolve(host: Host) -> Option<NoLauncher> {
    (host == Host::Windows).then_some(NoLauncher { status: "none" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::gojson::to_go_json;

    fn json<T: Serialize>(value: &T) -> String {
        String::from_utf8(to_go_json(value)).unwrap()
    }

    #[test]
    fn a_worktree_root_is_refused_on_windows_only() {
        let root = r"C:\Users\me\wt";
        assert_eq!(worktree_root_refusal(Host::Unix, WorktreeCall::Create, root), None);
        assert_eq!(worktree_root_refusal(Host::Unix, WorktreeCall::Remove, root), None);
        assert_eq!(worktree_root_refusal(Host::Windows, WorktreeCall::Create, ""), None);
        let create = worktree_root_refusal(Host::Windows, WorktreeCall::Create, root).unwrap();
        assert_eq!(
            json(&create),
            r#"{"success":false,"error":"refusing to create worktree: C:\\Users\\me\\wt cannot be used: a custom worktree location is not supported on Windows hosts yet","errorCode":"unsafe_path"}"#
        );
        let remove = worktree_root_refusal(Host::Windows, WorktreeCall::Remove, "/tmp/r").unwrap();
        assert_eq!(
            json(&remove),
            r#"{"success":false,"error":"refusing to remove worktree: /tmp/r cannot be used: a custom worktree location is not supported on Windows hosts yet"}"#
        );
    }

    #[test]
    fn every_launcher_is_refused_on_windows_only() {
        assert_eq!(launcher_refusal(Host::Unix), None);
        assert_eq!(
            launcher_refusal(Host::Windows),
            Some("a launcher cannot be applied on a Windows host")
        );
    }

    #[test]
    fn resolve_answers_none_on_windows_only() {
        assert_eq!(fixed_resolve(Host::Unix), None);
        assert_eq!(json(&fixed_resolve(Host::Windows).unwrap()), r#"{"status":"none"}"#);
    }
}
