//! The harness's integration tests: one binary, one module per concern, as
//! the daemon's (`daemon/tests/it/main.rs`). One module alone:
//! `cargo test -p harness --test it <module>::`. The tests run as threads
//! of one process and change nothing it shares.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly; the lint guards the harness

mod common;

mod capture;
mod derive;
mod fuzz_diff;
mod import;
mod layers;
mod one_build;
mod report_browser;
mod sensitivity;
mod stability;
mod stress;
