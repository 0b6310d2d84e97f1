//! The serving layer: the daemon's shared state, the way from a request
//! line to its reply, one connection's reader and writer, and the accept
//! loop with what runs beside it. Inside the folder the files import in
//! one direction only, {`admission`, `connlog`, `following`, `peertable`, `wirelog`, `wireredact`, `listener`} ← `state` ←
//! `dispatch` ← `connection` ← {`server`, `socket`, `orphan`, `idle`, `metrics_http`,
//! `shellenv`}: `daemon/tests/it/layers.rs` (`INNER`) fails on an import
//! that reaches up this order, and
//! `daemon/tests/it/import_circles.rs` keeps each rank free of circles.
//!
//! | module | owns |
//! | --- | --- |
//! | [`admission`] | the connection cap and the bounds on connections without the token |
//! | [`connlog`] | how many log lines connections without the token may cost |
//! | [`following`] | the logs one connection's writer follows: its ready list and the pass that moves frames |
//! | [`peertable`] | the books admission reads: connections without the token by silence and by peer process |
//! | [`wirelog`] | the wire log: every frame both ways, queued off the connection, written and rotated by a thread of its own |
//! | [`wireredact`] | what a frame becomes in the wire log: the token and secret-looking env redacted, long strings cut |
//! | [`state`] | daemon-wide state shared by connections and handlers |
//! | [`dispatch`] | the reader's one way in (`on_line`): quick, instant or task; params gate, dispatch by method, panic isolation |
//! | [`connection`] | one client: line reader and its bounds, request tasks, ordered writer |
//! | [`listener`] | what the accept loop asks of a listener and of a connection it accepted |
//! | [`server`] | the accept loop and the teardown |
//! | [`socket`] | the owner-only socket (Windows: also the named pipe of `-listen-pipe` and `rpc.pipe`) |
//! | [`orphan`] | shutting down once the socket path leads elsewhere |
//! | [`idle`] | `idle-exit-min`: shutting down after a time with no client and no process |
//! | [`metrics_http`] | the `-metrics-addr` HTTP endpoint |
//! | [`shellenv`] | login-shell PATH extraction into the state |

pub(crate) mod admission;
pub(crate) mod connection;
pub(crate) mod connlog;
pub(crate) mod dispatch;
pub(crate) mod following;
pub(crate) mod idle;
pub(crate) mod listener;
pub(crate) mod metrics_http;
pub(crate) mod orphan;
pub(crate) mod peertable;
pub(crate) mod server;
#[cfg(unix)]
pub(crate) mod shellenv;
#[cfg(windows)]
#[path = "windows/shellenv.rs"]
pub(crate) mod shellenv;
#[cfg(unix)]
pub(crate) mod socket;
#[cfg(windows)]
#[path = "windows/socket.rs"]
pub(crate) mod socket;
pub(crate) mod state;
pub(crate) mod wirelog;
pub(crate) mod wireredact;
