//! Layer 0, the platform: every OS call whose answer differs between Linux
//! and macOS, behind one function each, so no module above holds a
//! platform `cfg`. Knows only `libc`, `std` and `tokio` (and, on Windows,
//! `windows-sys`).
//!
//! Windows has its own half, `windows/`, mounted under the same module
//! names where the concept exists (`os`, `process`) plus what only it has
//! (`pipe`, the named-pipe listener; `acl`, security descriptors;
//! `openat`, handle-relative file operations). Its `process` starts each
//! child in a Job Object of its own (kill-on-close) and offers the pid
//! functions the supervisor calls on Unix; the supervisor above is still
//! POSIX-only (issue 43).
//!
//! | module | owns |
//! | --- | --- |
//! | `acl` (Windows) | security descriptors: the owner-only ones the daemon creates with, the current user's SID, an object's owner and DACL read back |
//! | `openat` (Windows) | opening, renaming, deleting and listing relative to a directory handle, links not followed (`NtCreateFile` with a root) |
//! | [`os`] | peer pid, liveness, mount id, own executable, fd listing, pipe2, errno/readdir, CSPRNG, platform signal sets, glibc malloc tuning |
//! | `dial` (Windows) | the client ends `-bridge` and `-stop` dial: AF_UNIX through Winsock, the named pipe with overlapped I/O |
//! | `afunix` (Windows) | the AF_UNIX listener through Winsock (Windows 10 1803+), a socket accepted as a `TcpStream` |
//! | `pipe` (Windows) | the named-pipe listener of `-listen-pipe`: owner-only DACL, remote clients rejected |
//! | [`process`] | signal names, group kill, exit observed without reaping (pidfd / kqueue), a hold on a process its pid cannot outlive (`PidRef`: pidfd / start time) |
//!
//! [`Host`] names the host family for the few wire answers the reference's
//! Windows builds give differently (`sys::os::HOST` is this build's); the
//! handlers take it as a value, so a Linux test checks the Windows answer
//! too (`methods::hostrules`, `protocol::build`).

#[cfg(windows)]
#[path = "windows/acl.rs"]
pub(crate) mod acl;
#[cfg(windows)]
#[path = "windows/afunix.rs"]
pub(crate) mod afunix;
#[cfg(windows)]
#[path = "windows/dial.rs"]
pub(crate) mod dial;
#[cfg(windows)]
#[path = "windows/openat.rs"]
pub(crate) mod openat;
#[cfg(unix)]
pub(crate) mod os;
#[cfg(windows)]
#[path = "windows/os.rs"]
pub(crate) mod os;
#[cfg(windows)]
#[path = "windows/pipe.rs"]
pub(crate) mod pipe;
#[cfg(unix)]
pub mod process;
#[cfg(windows)]
#[path = "windows/process/mod.rs"]
pub mod process;

/// The host family a wire answer depends on: the reference's Windows
/// builds drop a feature and refuse what they cannot do there
/// (docs/UPSTREAM.md, "Windows"). `sys::os::HOST` is the family of this
/// build; the deciding functions take it as a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// Linux and macOS.
    Unix,
    Windows,
}
