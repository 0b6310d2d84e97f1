//! Where the modes look under the user's home directory: the home itself
//! (`$HOME`, else the account's), the daemon's default socket and the
//! agent CLI's default folder. `-serve`, `-bridge`, `-stop`, `-install`
//! and `-doctor` all take them from here.

use std::path::{Path, PathBuf};

/// `$HOME` when set and not empty, else the account's home (Windows:
/// `%USERPROFILE%`), else `/`.
pub(crate) fn home_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(home);
    }
    crate::sys::os::account_home().unwrap_or_else(|| PathBuf::from("/"))
}

/// The socket a mode works on: `-socket`'s value, or [`default_socket`]
/// of [`home_dir`] when it is empty. The same on every OS.
pub(crate) fn socket_path(flag: &std::ffi::OsStr) -> PathBuf {
    if !flag.is_empty() {
        return PathBuf::from(flag);
    }
    default_socket(&home_dir())
}

/// The socket of a daemon started without `-socket` by a user whose home
/// is `home`.
pub(crate) fn default_socket(home: &Path) -> PathBuf {
    home.join(".claude").join("remote").join("rpc.sock")
}

/// Where `-install` puts the agent CLI without `-cli-dir` (a build with
/// `Switch::DefaultCliDir`), for the home `home`: it must be a directory
/// (`remora -doctor` checks).
pub(crate) fn default_cli_dir(home: &Path) -> PathBuf {
    home.join(".claude").join("remote").join("ccd-cli")
}
