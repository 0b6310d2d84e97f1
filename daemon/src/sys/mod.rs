//! Layer 0, the platform: every OS call whose answer differs between Linux
//! and macOS, behind one function each, so no module above holds a
//! platform `cfg`. Knows only `libc`, `std` and `tokio` (and, on Windows,
//! `windows-sys`).
//!
//! Windows has its own half, `windows/`, mounted under the same module
//! names where the concept exists (`os`, `process`) plus what only it has
//! (`pipe`, the named-pipe listener). Its `process` is a stand-in so far:
//! the supervisor above is POSIX-only and has a Windows stand-in of its
//! own (issue 43).
//!
//! | module | owns |
//! | --- | --- |
//! | [`os`] | peer pid, liveness, mount id, own executable, fd listing, pipe2, errno/readdir, CSPRNG, platform signal sets, glibc malloc tuning |
//! | `afunix` (Windows) | the AF_UNIX listener through Winsock (Windows 10 1803+), a socket accepted as a `TcpStream` |
//! | `pipe` (Windows) | the named-pipe listener of `-listen-pipe`: owner-only DACL, remote clients rejected |
//! | [`process`] | signal names, group kill, exit observed without reaping (pidfd / kqueue), a hold on a process its pid cannot outlive (`PidRef`: pidfd / start time) |

#[cfg(windows)]
#[path = "windows/afunix.rs"]
pub(crate) mod afunix;
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
#[path = "windows/process.rs"]
pub mod process;
