//! The method handlers, one module per namespace. Each handler receives
//! its already-bound params and the parts of the daemon state it works on
//! (never the connection or the server), and returns an [`Outcome`]: what
//! to send. The connection's writer carries it out.

pub(crate) mod files;
#[cfg(unix)]
pub(crate) mod git;
#[cfg(windows)]
#[path = "windows/git.rs"]
pub(crate) mod git;
pub(crate) mod hostrules;
#[cfg(unix)]
pub(crate) mod launcher;
#[cfg(windows)]
#[path = "windows/launcher.rs"]
pub(crate) mod launcher;
pub(crate) mod plugins;
pub(crate) mod process;
pub(crate) mod server;

use crate::base::gojson::to_go_json;
use crate::protocol::rpc::RpcError;
use crate::replay::log::ReplayLog;
use serde::Serialize;
use std::sync::Arc;

/// What a handler produced.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The encoded `result` object.
    Result(Vec<u8>),
    Error(RpcError),
    /// Nothing to send: the daemon is stopping.
    NoReply,
    /// Stream a log to the connection, and send the encoded `result` at
    /// the place in it the [`Follow`] names.
    Follow {
        follow: Follow,
        result: Vec<u8>,
    },
}

/// A log for the connection to stream, and where in it the request's
/// reply goes. Handlers make it ([`Outcome::Follow`]) and the connection's
/// writer carries it out (`serve::dispatch::Reply::Follow`).
#[derive(Debug)]
pub(crate) struct Follow {
    pub log: Arc<ReplayLog>,
    /// Stream from seq `after + 1`.
    pub after: u64,
    /// The reply is written once frames up to this seq are out (spawn: 0,
    /// before any frame; reattach: the `lastSeq` it reports, after the
    /// replayed frames).
    pub reply_after: u64,
}

impl Outcome {
    pub(crate) fn ok<T: Serialize + ?Sized>(result: &T) -> Outcome {
        Outcome::Result(to_go_json(result))
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> Outcome {
        Outcome::Error(RpcError::invalid_params(message))
    }

    pub(crate) fn internal(message: impl Into<String>) -> Outcome {
        Outcome::Error(RpcError::internal(message))
    }
}

impl From<RpcError> for Outcome {
    fn from(e: RpcError) -> Self {
        Outcome::Error(e)
    }
}
