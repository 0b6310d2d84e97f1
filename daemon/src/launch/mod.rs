//! The entry layer: the command line, and every mode that runs once and
//! exits or hands over to the server (`-serve`'s start-up and
//! self-daemonizing, `-stop`, `-bridge`, `-doctor`).
//!
//! | module | owns |
//! | --- | --- |
//! | [`cli`] | mode selection, the `-serve` start-up sequence |
//! | [`flags`] | Go `flag` parsing, messages and usage text, from `base::flagtable` |
//! | [`daemonize`] | self-daemonize re-exec, token and readiness pipes |
//! | [`logind`] | whether logout kills the daemon (`KillUserProcesses`), and escaping the session scope |
//! | [`homepaths`] | the home directory, the default socket and the agent CLI's default folder |
//! | [`stop`] | `-stop`: authenticated shutdown, the lock path, its one-word outcome |
//! | [`bridge`] | the `-bridge` relay |
//! | [`doctor`] | `-doctor`: srv dirs, daemons, stale sockets, logind and `ccd-cli`, read-only |
//! | [`settings`] | `remora.conf` beside the binary: trust checks, precedence, the effective-settings report (its keys: `base::flagtable`) |

pub(crate) mod bridge;
pub mod cli;
pub(crate) mod daemonize;
pub(crate) mod doctor;
pub(crate) mod flags;
pub(crate) mod homepaths;
pub(crate) mod logind;
pub(crate) mod settings;
pub(crate) mod stop;
