//! remora: the remote-host daemon that installs the pinned agent CLI,
//! supervises the agent and its MCP servers, and multiplexes clients and
//! output streams over one Unix socket with newline-delimited JSON-RPC 2.0.
//!
//! The folders are the layers of `docs/ARCHITECTURE.md`, lowest first: a
//! module may import only its own folder's layer or a lower one
//! (`daemon/tests/it/layers.rs`). Each folder's `mod.rs` lists what its
//! files own. Public only where the binary, tests, benches and fuzz
//! targets reach in: `launch::cli`, `install`, `rundir::runlock`,
//! `base::version`, `protocol::method` (the harness's differential fuzzer
//! takes its method vocabulary from it), `sys::process::PidRef` (the
//! tests and the harness signal what they did not spawn through it), and
//! the `fuzzing` and `base::alloccount` features.
//!
//! | # | layer | folders |
//! | --- | --- | --- |
//! | 0 | platform | [`sys`] |
//! | 1 | foundation | [`base`] |
//! | 2 | protocol | [`protocol`] |
//! | 3 | engines | [`replay`], [`tarx`], [`install`], [`rundir`], [`agent`] |
//! | 4 | supervisor | [`process`] |
//! | 5 | handlers | [`methods`] |
//! | 6 | serving | [`serve`] |
//! | 7 | entry | [`launch`], `fuzzing` |
//!
//! `unreachable_pub` keeps that true for items: one outside those paths is
//! `pub(crate)` (or narrower), so a `pub` item in this crate is API. (The
//! lint does not look at fields: a `pub` field of a `pub(crate)` struct is
//! as private as its struct.)
//!
//! Which reference build a behaviour comes from is the ledger's business
//! (`docs/UPSTREAM.md`: one row per change, with its source and the module
//! that adopts it); a comment names a build only where builds differ.

#![warn(unreachable_pub)]
// The `fuzzing` module is Unix-only (its checks read modes and link
// counts); on Windows the helpers it alone uses are dead under the feature
// (which the lib's own tests turn on through the dev-dependency).
#![cfg_attr(all(windows, feature = "fuzzing"), allow(dead_code, unused_imports))]

// Windows (issue 43): a folder with a `#[cfg(windows)] #[path]` twin is
// mounted as its Windows half (same names, the Windows behaviour);
// `install` has small Windows halves of its own (`install/windows/`).
// `ci/README.md` has the port's status.
#[cfg(unix)]
pub(crate) mod agent;
#[cfg(windows)]
#[path = "agent/windows.rs"]
pub(crate) mod agent;
pub mod base;
// The fuzz targets' logic is Unix-only (cargo-fuzz runs on Linux); a
// Windows test build (whose dev-dependency turns the feature on) skips it.
#[cfg(all(feature = "fuzzing", unix))]
pub mod fuzzing;
pub mod install;
pub mod launch;
pub(crate) mod methods;
pub(crate) mod process;
pub mod protocol;
pub(crate) mod replay;
#[cfg(unix)]
pub mod rundir;
#[cfg(windows)]
#[path = "rundir/windows.rs"]
pub mod rundir;
pub(crate) mod serve;
pub mod sys;
pub(crate) mod tarx;
