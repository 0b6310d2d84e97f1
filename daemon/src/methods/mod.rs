//! The method handlers, one module per namespace. Each handler receives
//! its already-bound params and returns an [`Outcome`].

pub mod files;
pub mod git;
pub mod process;
pub mod server;

use crate::gojson::to_go_json;
use crate::rpc::RpcError;
use serde::Serialize;

/// What a handler produced.
#[derive(Debug)]
pub enum Outcome {
    /// The encoded `result` object.
    Result(Vec<u8>),
    Error(RpcError),
    /// Nothing to send now: the daemon is stopping, or the handler queued
    /// its own reply (reattach writes it after the replayed frames).
    NoReply,
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
