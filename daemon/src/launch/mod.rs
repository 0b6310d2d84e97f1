//! The entry layer: the command line, and every mode that runs once and
//! exits or hands over to the server (`-serve`'s start-up and
//! self-daemonizing, `-stop`, `-bridge`, `-doctor`).
//!
//! | module | owns |
//! | --- | --- |
//! | [`cli`] | flag parsing into a mode, `-version` |
//! | [`modes`] | every other mode: `-install`, `-probe-cli`, the `-serve` start-up sequence, `-bridge`, `-stop`, the re-executed helper roles |
//! | [`flags`] | Go `flag` parsing, messages and usage text, from `base::flagtable` |
//! | [`daemonize`] | self-daemonize re-exec, token and readiness pipes (Windows: `DETACHED_PROCESS`, stdin and stdout pipes) |
//! | [`handoff`] | the `-serve` launcher's token sources, the re-exec sentinel and report bytes, the banner |
//! | [`serveopts`] | what the daemon child takes from its flags: socket, served build, replay, wire log, open-files limit |
//! | [`logind`] | whether logout kills the daemon (`KillUserProcesses`), and escaping the session scope |
//! | [`homepaths`] | the home directory, the default socket and the agent CLI's default folder |
//! | [`stop`] | `-stop`: authenticated shutdown, the lock path, its one-word outcome |
//! | [`bridge`] | the `-bridge` relay |
//! | [`doctor`] | `-doctor`: srv dirs, daemons, stale sockets, logind and `ccd-cli`, read-only |
//! | [`settings`] | `remora.conf` beside the binary: trust checks, precedence, the effective-settings report (its keys: `base::flagtable`) |

#[cfg(unix)]
pub(crate) mod bridge;
#[cfg(windows)]
#[path = "windows/bridge.rs"]
pub(crate) mod bridge;
pub mod cli;
#[cfg(unix)]
pub(crate) mod daemonize;
#[cfg(windows)]
#[path = "windows/daemonize.rs"]
pub(crate) mod daemonize;
#[cfg(unix)]
pub(crate) mod doctor;
pub(crate) mod flags;
pub(crate) mod handoff;
pub(crate) mod homepaths;
#[cfg(unix)]
pub(crate) mod logind;
#[cfg(unix)]
pub(crate) mod modes;
#[cfg(windows)]
#[path = "windows/modes.rs"]
pub(crate) mod modes;
pub(crate) mod serveopts;
pub(crate) mod settings;
#[cfg(unix)]
pub(crate) mod stop;
#[cfg(windows)]
#[path = "windows/stop.rs"]
pub(crate) mod stop;
