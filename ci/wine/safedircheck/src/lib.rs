//! Compiles the Windows half of `base::safedir` as it is, with the
//! modules it calls, in the daemon's module layout (`crate::sys::acl`,
//! `crate::base::homeguard`), so its `#[cfg(test)]` tests run under Wine:
//! `cargo test --target x86_64-pc-windows-gnu` with Wine as the runner
//! (`ci/wine-smoke`).
#![allow(dead_code)]

mod base;
mod sys;
