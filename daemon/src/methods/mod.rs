//! The method handlers, one module per namespace. Each handler receives
//! its already-bound params and the parts of the daemon state it works on
//! (never the connection or the server), and returns an [`Outcome`]: what
//! to send. The connection's writer carries it out.

pub mod files;
pub mod git;
pub mod plugins;
pub mod process;
pub mod server;

use crate::base::gojson::to_go_json;
use crate::protocol::rpc::RpcError;
use crate::replay::log::ReplayLog;
use serde::Serialize;
use std::sync::Arc;

/// What a handler produced.
#[derive(Debug)]
pub enum Outcome {
    /// The encoded `result` object.
    Result(Vec<u8>),
    Error(RpcError),
    /// Nothing to send: the daemon is stopping.
    NoReply,
    /// Follow `log` from seq `after + 1`, and send the encoded `result`
    /// right after the frame with seq `reply_after` (spawn: before any
    /// frame; reattach: after the replayed ones).
    Follow {
        log: Arc<ReplayLog>,
        after: u64,
        reply_after: u64,
        result: Vec<u8>,
    },
}

impl Outcome {
    pub fn ok<T: Serialize + ?Sized>(result: &T) -> Outcome {
        Outcome::Result(to_go_json(result))
    }

    pub fn invalid_params(message: impl Into<String>) -> Outcome {
        Outcome::Error(RpcError::invalid_params(message))
    }

    pub fn internal(message: impl Into<String>) -> Outcome {
        Outcome::Error(RpcError::internal(message))
    }
}

impl From<RpcError> for Outcome {
    fn from(e: RpcError) -> Self {
        Outcome::Error(e)
    }
}
