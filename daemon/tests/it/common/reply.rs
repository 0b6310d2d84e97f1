//! The reply lines a test expects, written out byte for byte as the daemon
//! sends them, and the temp-path text that goes into request params.

use std::fmt::Display;
use std::path::Path;

/// A success reply: `result` is the raw JSON of the result member. `id` is
/// written as given, so a string id arrives already quoted.
pub fn ok(id: impl Display, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

/// An error reply with `code` and `message` (the message is not escaped).
pub fn err(id: impl Display, code: i64, message: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":"{message}"}}}}"#)
}

/// A temp path as the text a request carries; temp dirs are UTF-8 here.
pub fn p(path: &Path) -> String {
    path.to_str().expect("utf-8 temp path").to_string()
}
