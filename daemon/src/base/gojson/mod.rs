//! Go-compatible JSON: the one place where remora decides which bytes
//! Go's `encoding/json` would read and write.
//!
//! The reference daemon is a Go program, so wherever the protocol document
//! is silent, Go's standard library defines the wire: how request lines are
//! parsed ([`value`]), how they bind into typed params ([`bind`]), and how
//! replies are written ([`encode`]). Handlers never touch serde_json
//! directly for wire bytes; they go through this module.

pub mod bind;
pub mod encode;
pub mod text;
pub mod typeerror;
pub mod value;
pub mod walk;

pub use bind::{DecodeError, GoDecode, Raw, StringMap};
#[cfg(any(test, feature = "fuzzing"))]
pub use encode::value_to_json;
pub use encode::{format_go_v, to_go_json, write_go_string, write_value};
pub use text::go_lossy;
pub use value::{parse, Value};
