//! Layer 3 (engines), the agent's surroundings: what a spawned agent CLI
//! gets from the daemon besides its pipes (the login shell's SSH agent
//! socket, the exec trampoline), and whether an agent CLI binary runs here
//! at all, directly or through the host's managed launcher.
//!
//! | module | owns |
//! | --- | --- |
//! | [`loginshell`] | which login shell, and one bounded run of it |
//! | [`agentsock`] | the login shell's SSH agent socket for `process.spawn` children |
//! | [`sockpath`] | whether an agent socket path can be redirected by anyone else |
//! | [`trampoline`] | the exec-child trampoline that stamps `CLAUDE_SSH_CHILD` |
//! | [`probecli`] | `-probe-cli`: the managed launcher in front of the direct probe |
//! | [`versionprobe`] | the direct, bounded `<path> --version` run and its verdict line (every host) |
//! | [`launcher`] | the managed launcher's settings (also `launcher.resolve`'s) and one bounded run through it, for `-install` and `-probe-cli` |

pub(crate) use versionprobe::PROBE_LIMIT_ENV;

pub(crate) mod agentsock;
pub(crate) mod launcher;
pub(crate) mod loginshell;
pub(crate) mod probecli;
pub(crate) mod sockpath;
pub(crate) mod trampoline;
pub(crate) mod versionprobe;
