//! Layer 1, the foundation: the Go-compatible building blocks (JSON, error
//! texts, paths, file modes), logging, framing and the daemon-wide signals
//! every layer above uses. Knows nothing of the protocol, processes or
//! connections.
//!
//! | module | owns |
//! | --- | --- |
//! | [`logging`] | leveled Go-format log lines on stderr |
//! | [`goerr`] | Go-style OS error text |
//! | [`gojson`] | Go-compatible JSON decoding and encoding |
//! | [`goduration`] | Go's `time.ParseDuration` and `Duration.String` |
//! | [`gopath`] | Go's `filepath.Clean`/`Join` on bytes, `~` expansion |
//! | [`homeguard`] | no destructive target is, or contains, the user's home directory |
//! | [`filemode`] | Go's `FileMode.String()` for `files.stat` |
//! | [`version`] | build id, GOOS/GOARCH names |
//! | [`flagtable`] | every command-line flag, declared once (the parser, the help, `remora.conf` and the run lock derive from it) |
//! | [`utctime`] | epoch seconds as a UTC RFC 3339 timestamp (shared with `build.rs`) |
//! | [`shutdown`] | the daemon-wide stop signal |
//! | [`activity`] | the daemon-wide "a client or child came or went" signal (idle exit) |
//! | [`ndjson`] | NDJSON framing and the 1 MiB line cap |
//! | [`instance`] | per-boot `instanceId` / `startedAt` |
//! | [`signals`] | inherited signal dispositions, reset for children |
//! | [`safedir`] | opening a directory path no other user can tamper with |
//! | [`trustpath`] | resolving a path no other user can redirect, links judged on the way |
//! | [`privgroup`] | whether a group is the user's own private group (group write that counts as the user's) |
//! | `alloccount` | heap allocation counting (feature `alloc-count`) |

pub(crate) mod activity;
#[cfg(feature = "alloc-count")]
pub mod alloccount;
pub(crate) mod filemode;
pub(crate) mod flagtable;
pub(crate) mod goduration;
pub(crate) mod goerr;
pub(crate) mod gojson;
pub(crate) mod gopath;
#[cfg(unix)]
pub(crate) mod homeguard;
#[cfg(windows)]
#[path = "windows/homeguard.rs"]
pub(crate) mod homeguard;
pub(crate) mod instance;
pub(crate) mod logging;
pub(crate) mod ndjson;
#[cfg(unix)]
pub(crate) mod privgroup;
#[cfg(unix)]
pub(crate) mod safedir;
#[cfg(windows)]
#[path = "windows/safedir.rs"]
pub(crate) mod safedir;
pub(crate) mod shutdown;
#[cfg(unix)]
pub(crate) mod signals;
#[cfg(unix)]
pub(crate) mod trustpath;
pub(crate) mod utctime;
pub mod version;
