//! Skipping a test whose outside tool (chromium, sshd, a mount namespace …)
//! this machine lacks: loudly, and never where CI asks for everything.
//!
//! A newcomer's `cargo test --workspace` with only the toolchain and git
//! must pass, so such a test returns early after naming itself and the
//! reason. `.ci/run` sets [`REQUIRE_ALL_TOOLS`], which turns every skip
//! into a failure: CI installs the tools, and a skip there would hide a
//! test that never ran.
//!
//! Dependency-free, so the harness tests include this same file.
#![allow(dead_code)]

use std::io::Write;

/// Set (to anything but empty or `0`) to make every tool-dependent test
/// fail instead of skipping.
pub const REQUIRE_ALL_TOOLS: &str = "REMORA_REQUIRE_ALL_TOOLS";

/// Whether `flag` is set to something other than empty or `0`.
pub fn flag_set(flag: &str) -> bool {
    std::env::var(flag).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Whether skips are forbidden: [`REQUIRE_ALL_TOOLS`] or the test's own
/// `extra_flag` is set.
pub fn required(extra_flag: Option<&str>) -> bool {
    flag_set(REQUIRE_ALL_TOOLS) || extra_flag.is_some_and(flag_set)
}

/// Reports that the calling test did not run because of `why` — or panics,
/// when [`required`] says skipping is not allowed. The caller returns
/// right after.
pub fn skip(why: &str) {
    skip_unless(None, why)
}

/// [`skip`], with one more flag that forbids it (e.g.
/// `REMORA_REQUIRE_STATIC_RESOLVE`).
pub fn skip_unless(extra_flag: Option<&str>, why: &str) {
    // libtest names each test's thread after the test.
    let current = std::thread::current();
    let test = current.name().filter(|n| *n != "main").unwrap_or("this test");
    if required(extra_flag) {
        let flag = match extra_flag {
            Some(f) if flag_set(f) => f,
            _ => REQUIRE_ALL_TOOLS,
        };
        panic!("{flag} is set, so {test} may not skip: {why}");
    }
    // Written to the stderr handle, not with `eprintln!`: libtest hides
    // what the print macros write in a passing test, and a skip must show
    // in the plain `cargo test` output.
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {why}");
}
