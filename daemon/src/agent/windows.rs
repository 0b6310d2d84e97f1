//! The Windows half of `agent` (issue 43): what the serve core asks of it
//! on Unix, with what Windows does. The login shell (and with it the SSH
//! agent socket it reports, and the exec trampoline) does not exist on
//! Windows: the reference has no login-shell probe there
//! (`shellenv_windows.go`). `-probe-cli` is the direct probe alone
//! ([`versionprobe`], shared with Unix): Windows resolves no managed
//! launcher.

#[path = "versionprobe.rs"]
pub(crate) mod versionprobe;

/// The SSH agent hand-off of `process.spawn` children.
pub(crate) mod agentsock {
    /// The variable that names the agent socket.
    pub(crate) const AGENT_SOCK_ENV: &str = "SSH_AUTH_SOCK";

    /// The daemon-wide hand-off state: nothing on Windows, where no login
    /// shell is asked for an agent socket.
    #[derive(Debug, Default)]
    pub(crate) struct HandOff {}

    impl HandOff {
        /// No socket to hand off: there is no login shell to ask.
        pub(crate) async fn socket(&self) -> Option<String> {
            None
        }

        /// An inherited agent variable is passed on as it is: Windows
        /// agents are named pipes, not paths another user could re-create
        /// in a shared directory.
        pub(crate) async fn vet(&self, _path: &str) -> bool {
            true
        }
    }
}

/// Runs of the user's login shell.
pub(crate) mod loginshell {
    /// Nothing to end: no login shell runs on Windows.
    pub(crate) fn end_all() {}
}
