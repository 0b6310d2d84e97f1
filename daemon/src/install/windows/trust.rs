//! Whether `-cli-dir` may be used, Windows half of `install/trust.rs`
//! (same names): remora's own rule, the reference uses whatever directory
//! it is given. What exists of the path must be a chain of directories
//! nobody but the user and the system can change, with no link or
//! junction on the way ([`crate::base::safedir`]'s Windows rules), and an
//! existing `-cli-dir` must be the user's ([`safedir::open_own_dir`]). A
//! missing part is made by the install, owner-only, and checked again
//! then. A refusal is the `cliError` `unsafe cli dir "<dir>": <why>`.

use crate::base::goerr::{go_quote, io_text};
use crate::base::safedir;
use std::fmt;
use std::path::Path;

/// A `-cli-dir` that may not be used: `unsafe cli dir "<dir>": <why>`.
#[derive(Debug)]
pub(super) struct UnsafeCliDir {
    dir: Vec<u8>,
    why: String,
}

impl fmt::Display for UnsafeCliDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unsafe cli dir {}: {}", go_quote(&self.dir), self.why)
    }
}

impl std::error::Error for UnsafeCliDir {}

/// `Ok` when `dir` may be used; `Err` is the `cliError`.
pub(super) fn check_cli_dir(dir: &Path) -> Result<(), UnsafeCliDir> {
    let refuse = |why: String| UnsafeCliDir {
        dir: dir.as_os_str().as_encoded_bytes().to_vec(),
        why,
    };
    let absolute = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| refuse(io_text(&e)))?.join(dir)
    };
    match std::fs::symlink_metadata(&absolute) {
        // What an older protocol version left there (a plain file): moved
        // aside first. A link or junction is judged (and refused) below.
        Ok(meta) if !meta.is_dir() && !meta.is_symlink() => Ok(()),
        Ok(_) => safedir::open_own_dir(&absolute)
            .map(drop)
            .map_err(|e| refuse(e.to_string())),
        Err(_) => {
            // The deepest level that exists; the rest is made by the
            // install and judged again once made.
            let mut existing = absolute.as_path();
            while std::fs::symlink_metadata(existing).is_err() {
                match existing.parent() {
                    Some(parent) => existing = parent,
                    None => return Ok(()),
                }
            }
            safedir::open_trusted_dir(existing)
                .map(drop)
                .map_err(|e| refuse(e.to_string()))
        }
    }
}
