//! Layer 2, the protocol: what a request is and what it is called, never
//! what runs it or who serves it.
//!
//! | module | owns |
//! | --- | --- |
//! | [`method`] | the typed method table: names, capabilities order, -32601 texts |
//! | [`build`] | the recorded reference builds: each one's methods, features and behaviour switches |
//! | [`rpc`] | envelope validation order, error codes and messages, the quick path |
//! | [`params`] | per-namespace params structs |
//! | [`metrics`] | counters for `-metrics-addr`, keyed by method (the engines below the handlers bump them too) |

pub mod build;
pub mod method;
pub(crate) mod metrics;
pub(crate) mod params;
pub(crate) mod rpc;
