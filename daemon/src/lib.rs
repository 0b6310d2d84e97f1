//! remora: the remote-host daemon that installs the pinned agent CLI,
//! supervises the agent and its MCP servers, and multiplexes clients and
//! output streams over one Unix socket with newline-delimited JSON-RPC 2.0.
//!
//! Map of the crate (see `docs/ARCHITECTURE.md` for the invariants):
//!
//! | module | owns |
//! | --- | --- |
//! | [`cli`] | mode selection, the `-serve` start-up sequence |
//! | [`flags`] | Go `flag` parsing, messages and usage text |
//! | [`daemonize`] | self-daemonize re-exec, token and readiness pipes |
//! | [`logind`] | whether logout kills the daemon (`KillUserProcesses`), and escaping the session scope |
//! | [`bridge`] | the `-bridge` relay and `-stop` client |
//! | [`shellenv`] | login-shell PATH extraction |
//! | [`metrics_http`] | the `-metrics-addr` HTTP endpoint |
//! | [`state`] | daemon-wide state shared by connections and handlers |
//! | [`server`] | the owner-only socket, the accept loop |
//! | [`instance`] | per-boot `instanceId` / `startedAt` |
//! | [`tokenfile`] | the persisted `daemon.token` beside the socket |
//! | [`runlock`] | the run-dir lock `daemon.lock` and predecessor eviction |
//! | [`orphan`] | shutting down once the socket path leads elsewhere |
//! | [`connection`] | one client: line reader, request tasks, ordered writer |
//! | [`frame`] | NDJSON framing and the 1 MiB line cap |
//! | [`rpc`] | envelope validation order, error codes and messages |
//! | [`dispatch`] | params gate, method table, panic isolation |
//! | [`params`] | per-namespace params structs |
//! | [`gojson`] | Go-compatible JSON decoding and encoding |
//! | [`goerr`] | Go-style OS error text |
//! | [`filemode`] | Go's `FileMode.String()` for `files.stat` |
//! | [`gopath`] | Go's `filepath.Clean`/`Join` on bytes |
//! | [`tarx`] | `files.extract_tar`: streaming, confined gzip+tar extraction |
//! | [`gitcli`] | running the `git` CLI for `git.*` |
//! | [`methods`] | the 19 handlers |
//! | [`install`] | `-install`: the agent-CLI version manager |
//! | [`process`] | supervisor, stdin offsets, signals |
//! | [`replay`] | the replay engine: frames, segments, store, cursors |
//! | [`shutdown`] | the daemon-wide stop signal |
//! | [`signals`] | inherited signal dispositions, reset for children |
//! | [`metrics`] | counters for `-metrics-addr` |
//! | [`logging`] | leveled Go-format log lines on stderr |
//! | [`version`] | build id, GOOS/GOARCH names |

pub mod admission;
pub mod bridge;
pub mod cli;
pub mod connection;
pub mod daemonize;
pub mod dispatch;
pub mod filemode;
pub mod flags;
pub mod frame;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod gitcli;
pub mod goerr;
pub mod gojson;
pub mod gopath;
pub mod install;
pub mod instance;
pub mod logging;
pub mod logind;
pub mod methods;
pub mod metrics;
pub mod metrics_http;
pub mod orphan;
pub mod os;
pub mod params;
pub mod process;
pub mod replay;
pub mod rpc;
pub mod runlock;
pub mod safedir;
pub mod server;
pub mod shellenv;
pub mod shutdown;
pub mod signals;
pub mod state;
pub mod tarx;
pub mod tokenfile;
pub mod version;
