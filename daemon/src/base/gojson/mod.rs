//! Go-compatible JSON: the one place where remora decides which bytes
//! Go's `encoding/json` would read and write.
//!
//! The reference daemon is a Go program, so wherever the protocol document
//! is silent, Go's standard library defines the wire: how request lines are
//! parsed ([`value`]), how they bind into typed params ([`bind`]), and how
//! replies are written ([`encode`]). Handlers never touch serde_json
//! directly for wire bytes; they go through this module.

pub(crate) mod bind;
pub(crate) mod encode;
pub(crate) mod text;
pub(crate) mod typeerror;
pub(crate) mod value;
pub(crate) mod walk;

pub(crate) use bind::{DecodeError, GoDecode, Raw, StringMap};
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use encode::value_to_json;
pub(crate) use encode::{format_go_v, to_go_json, write_go_string, write_value};
pub(crate) use text::go_lossy;
pub(crate) use value::{parse, Value};
