//! Layer 0, the platform: every OS call whose answer differs between Linux
//! and macOS, behind one function each, so no module above holds a
//! platform `cfg`. Knows only `libc`, `std` and `tokio`.
//!
//! | module | owns |
//! | --- | --- |
//! | [`os`] | peer pid, liveness, mount id, own executable, fd listing, pipe2, errno/readdir, CSPRNG, platform signal sets, glibc malloc tuning |
//! | [`process`] | signal names, group kill, exit observed without reaping (pidfd / kqueue), a hold on a process its pid cannot outlive (`PidRef`: pidfd / start time) |

pub(crate) mod os;
pub mod process;
