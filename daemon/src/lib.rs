//! remora: the remote-host daemon that installs the pinned agent CLI,
//! supervises the agent and its MCP servers, and multiplexes clients and
//! output streams over one Unix socket with newline-delimited JSON-RPC 2.0.
//!
//! Map of the crate (see `docs/ARCHITECTURE.md` for the invariants and
//! the layers: which module may import which). Only the modules the
//! binary, tests, benches and fuzz targets use are public: [`cli`],
//! [`install`], [`runlock`], [`version`], [`method`] (the harness's
//! differential fuzzer takes its method vocabulary from it) and (feature
//! `fuzzing`) `fuzzing`; the rest is `pub(crate)`.
//!
//!
//! | module | owns |
//! | --- | --- |
//! | [`cli`] | mode selection, the `-serve` start-up sequence |
//! | [`flags`] | Go `flag` parsing, messages and usage text |
//! | [`daemonize`] | self-daemonize re-exec, token and readiness pipes |
//! | [`daemonlog`] | `remote-server.log` beside the socket, its `.old` rotation and cap |
//! | [`logind`] | whether logout kills the daemon (`KillUserProcesses`), and escaping the session scope |
//! | [`bridge`] | the `-bridge` relay |
//! | [`stop`] | `-stop`: authenticated shutdown, the lock path, its one-word outcome |
//! | [`shellenv`] | login-shell PATH extraction |
//! | [`agentsock`] | the login shell's SSH agent socket for `process.spawn` children |
//! | [`metrics_http`] | the `-metrics-addr` HTTP endpoint |
//! | [`state`] | daemon-wide state shared by connections and handlers |
//! | [`server`] | the owner-only socket, the accept loop |
//! | [`instance`] | per-boot `instanceId` / `startedAt` |
//! | [`tokenfile`] | the persisted `daemon.token` beside the socket |
//! | [`runlock`] | the run-dir lock `daemon.lock` and predecessor eviction |
//! | [`childrec`] | child records under the run dir, the orphan reap at start |
//! | [`trampoline`] | the exec-child trampoline that stamps `CLAUDE_SSH_CHILD` |
//! | [`orphan`] | shutting down once the socket path leads elsewhere |
//! | [`connection`] | one client: line reader, request tasks, ordered writer |
//! | [`frame`] | NDJSON framing and the 1 MiB line cap |
//! | [`rpc`] | envelope validation order, error codes and messages |
//! | [`method`] | the typed method table: names, capabilities order, -32601 texts |
//! | [`dispatch`] | params gate, dispatch by method, panic isolation |
//! | [`params`] | per-namespace params structs |
//! | [`gojson`] | Go-compatible JSON decoding and encoding |
//! | [`goerr`] | Go-style OS error text |
//! | [`filemode`] | Go's `FileMode.String()` for `files.stat` |
//! | [`gopath`] | Go's `filepath.Clean`/`Join` on bytes |
//! | [`tarx`] | `files.extract_tar`: streaming, confined gzip+tar extraction |
//! | [`gitcli`] | running the `git` CLI for `git.*` |
//! | [`methods`] | the 19 handlers |
//! | [`install`] | `-install`: the agent-CLI version manager |
//! | [`probecli`] | `-probe-cli`: the bounded `--version` probe |
//! | [`process`] | supervisor, stdin offsets, signals |
//! | [`replay`] | the replay engine: frames, segments, store, cursors |
//! | [`shutdown`] | the daemon-wide stop signal |
//! | [`signals`] | inherited signal dispositions, reset for children |
//! | [`metrics`] | counters for `-metrics-addr` |
//! | `alloccount` | heap allocation counting (feature `alloc-count`) |
//! | [`logging`] | leveled Go-format log lines on stderr |
//! | [`version`] | build id, GOOS/GOARCH names |

pub(crate) mod admission;
pub(crate) mod agentsock;
#[cfg(feature = "alloc-count")]
pub mod alloccount;
pub(crate) mod bridge;
pub(crate) mod childrec;
pub mod cli;
pub(crate) mod connection;
pub(crate) mod daemonize;
pub(crate) mod daemonlog;
pub(crate) mod dispatch;
pub(crate) mod filemode;
pub(crate) mod flags;
pub(crate) mod frame;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub(crate) mod gitcli;
pub(crate) mod goerr;
pub(crate) mod gojson;
pub(crate) mod gopath;
pub mod install;
pub(crate) mod instance;
pub(crate) mod logging;
pub(crate) mod logind;
pub(crate) mod loginshell;
pub mod method;
pub(crate) mod methods;
pub(crate) mod metrics;
pub(crate) mod metrics_http;
pub(crate) mod orphan;
pub(crate) mod os;
pub(crate) mod params;
pub(crate) mod plugindirs;
pub(crate) mod probecli;
pub(crate) mod process;
pub(crate) mod replay;
pub(crate) mod rpc;
pub mod runlock;
pub(crate) mod safedir;
pub(crate) mod server;
pub(crate) mod shellenv;
pub(crate) mod shutdown;
pub(crate) mod signals;
pub(crate) mod state;
pub(crate) mod stop;
pub(crate) mod tarx;
pub(crate) mod tokenfile;
pub(crate) mod trampoline;
pub mod version;
