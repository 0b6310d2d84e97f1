//! The steps of `-install` that differ by OS, Unix half (the Windows half
//! is `windows/host.rs`, same names): how the CLI file is named and
//! reported, how the cli dir and the temporaries are created (owner-only
//! modes), how a staged CLI is made runnable, and whether a temporary's
//! owner still runs.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The CLI's file name in `-cli-dir`: the version itself.
pub(super) fn cli_file_name(version: &str) -> String {
    version.to_string()
}

/// `cliPath` as the facts report it: Go's `filepath.Join(dir, version)`
/// (cleaned), lossy UTF-8.
pub(super) fn cli_path(dir: &str, version: &str) -> String {
    crate::base::gojson::go_lossy(&crate::base::gopath::join(&[dir.as_bytes(), version.as_bytes()]))
}

/// Whether `version` would name something other than one entry directly
/// in `-cli-dir` (a separator, or a NUL the kernel cannot take).
pub(super) fn leaves_dir(version: &str) -> bool {
    version.contains('/') || version.contains('\0')
}

/// `os.MkdirAll(dir, 0700)`: each new level owner-only, as 89cb6289 makes
/// them (older builds asked for 0755, which remora never grants).
pub(super) fn create_cli_dir(dir: &str) -> io::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Creates `path` exclusively, read-write, mode 0600.
pub(super) fn create_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// Makes the decompressed CLI executable: mode 0755 (`chmod`).
pub(super) fn make_runnable(file: &File) -> io::Result<()> {
    file.set_permissions(fs::Permissions::from_mode(0o755))
}

/// Whether `pid` names a live process (EPERM means alive, not ours).
pub(super) fn owner_alive(pid: i32) -> bool {
    use nix::errno::Errno;
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    !matches!(kill(Pid::from_raw(pid), None), Err(Errno::ESRCH))
}

/// Device and inode of the open upload.
pub(super) fn file_identity(file: &File) -> Option<(u64, u64)> {
    file.metadata().ok().map(|m| (m.dev(), m.ino()))
}

/// Device and inode of what `path` names now (links followed, as the
/// upload was opened).
pub(super) fn path_identity(path: &str) -> Option<(u64, u64)> {
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The home guard's refusal of the CLI path (named as the facts line
/// names it, `cliPath`, cleaned) or of the cli dir, `None` when neither
/// is or contains the daemon user's home ([`crate::base::homeguard`]).
pub(super) fn home_refusal(dir: &Path, final_path: &Path, cli_path: &str) -> Option<String> {
    let homes = crate::base::homeguard::Homes::of_daemon_user();
    homes
        .verdict(final_path)
        .text("cli path", cli_path)
        .or_else(|| homes.verdict(dir).text("cli dir", dir))
}
