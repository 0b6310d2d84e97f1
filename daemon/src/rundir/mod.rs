//! Layer 3 (engines), the run directory: what one daemon keeps in its
//! socket's directory and beside it, and how the next daemon of the same
//! directory finds and cleans up after it.
//!
//! | module | owns |
//! | --- | --- |
//! | [`runlock`] | the run-dir lock `daemon.lock` and predecessor eviction |
//! | [`tokenfile`] | the persisted `daemon.token` beside the socket |
//! | [`childrec`] | child records under the run dir |
//! | [`orphanreap`] | the orphan reap at start: a dead predecessor's recorded children ended |
//! | [`daemonlog`] | `remote-server.log` beside the socket, its `.old` rotation and cap |
//! | `logfiles` | the daemon log's names and cap, shared with the Windows half |
//! | [`plugindirs`] | the cached plugin directories `plugins.prune` sweeps |

pub(crate) mod childrec;
pub(crate) mod daemonlog;
mod logfiles;
pub(crate) mod orphanreap;
pub(crate) mod plugindirs;
pub mod runlock;
pub(crate) mod tokenfile;
