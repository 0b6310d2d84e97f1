//! What the bench steps share: checking a reply, the client's CPU share
//! beside a rate, and the daemon's CPU per unit of work.

use super::error::{Reading, Unmeasured};
use serde_json::Value;
use std::sync::Arc;

/// A rate and the client's CPU share while it was measured.
pub(crate) type Shared = Result<(f64, f64), Unmeasured>;

/// `(Result<T, E>, share)` into `Result<(T, share), E>`.
pub(crate) trait MapResult<T, E> {
    fn map_result(self) -> Result<(T, f64), E>;
}

impl<T, E> MapResult<T, E> for (Result<T, E>, f64) {
    fn map_result(self) -> Result<(T, f64), E> {
        let (r, share) = self;
        r.map(|v| (v, share))
    }
}

/// The first bytes of the reply with id `id`.
pub(crate) fn reply_prefix(id: usize) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},").into_bytes()
}

pub(crate) fn check_ok(l: &[u8]) -> Result<(), Unmeasured> {
    let v = parse(l)?;
    if let Some(e) = v.get("error") {
        let message = e.get("message").and_then(Value::as_str).unwrap_or("error");
        return Err(Unmeasured::Refused(message.to_string()));
    }
    Ok(())
}

/// The daemon's CPU seconds between two readings, per `units` of work.
pub(crate) fn cpu_per(before: Option<f64>, after: Option<f64>, units: f64) -> Reading {
    match (before, after) {
        (Some(a), Some(b)) if units > 0.0 => Ok((b - a) / units),
        _ => Err(Unmeasured::NoCpu),
    }
}

/// [`cpu_per`] GiB of `bytes`.
pub(crate) fn per_gib(before: Option<f64>, after: Option<f64>, bytes: u64) -> Reading {
    cpu_per(before, after, bytes as f64 / (1u64 << 30) as f64)
}

/// The slow path for a reply that is not the expected pong byte for
/// byte: a pong with another id passes, anything else is an error.
pub(crate) fn check_pong(l: &[u8]) -> Result<(), Unmeasured> {
    check_ok(l)?;
    let v = parse(l)?;
    match v.pointer("/result/pong") {
        Some(Value::Bool(true)) => Ok(()),
        _ => Err(Unmeasured::NotPong(String::from_utf8_lossy(l).into_owned())),
    }
}

fn parse(l: &[u8]) -> Result<Value, Unmeasured> {
    serde_json::from_slice(l).map_err(|e| Unmeasured::BadReply(Arc::new(e)))
}
