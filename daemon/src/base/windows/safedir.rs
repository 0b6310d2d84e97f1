//! The Windows stand-in for `base::safedir`, which is Unix-only (issue 43). It is
//! mounted in place of the Unix module on Windows (the parent's
//! `#[cfg(windows)] #[path]` line) and is to expose the same names with
//! the Windows behaviour, so no module above it holds a platform `cfg`.
//! Empty so far: the Windows build does not type-check yet.
