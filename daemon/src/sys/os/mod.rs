//! The operating-system facts outside the process supervisor that Linux
//! and macOS answer differently, one function each, so the modules that
//! use them (`bridge`, `daemonize`, `tarx`, `signals`, `cli`, the
//! process supervisor) hold no platform `cfg`.
//!
//! | function | Linux (`linux.rs`) | macOS (`macos.rs`) |
//! | --- | --- | --- |
//! | [`peer_pid`] | `SO_PEERCRED` | `LOCAL_PEERPID` |
//! | [`peer_uid`] | `SO_PEERCRED` | `getpeereid` |
//! | [`process_alive`] | `/proc/<pid>/stat`, a zombie counts as ended | `kill(pid, 0)` (a zombie counts as alive; launchd reaps promptly) |
//! | [`own_executable`] | `/proc/self/exe` (still works if the file was replaced) | `_NSGetExecutablePath` via `current_exe` |
//! | [`name_after_executable`] | `prctl(PR_SET_NAME)` to the name of `/proc/self/exe`'s file | nothing: exec'd by the real path |
//! | [`initial_env_block`] | `/proc/self/stat` fields 50–51 | none: the sentinel is unset but not blanked |
//! | [`mount_id`] (which mount a descriptor lies on) | `statx` `STATX_MNT_ID` (5.8), else `None` | `None`: `st_dev` tells the volume |
//! | [`open_fds`] | `/proc/self/fd` | `/dev/fd` |
//! | [`pipe_cloexec`] | `pipe2(O_CLOEXEC)` | `pipe` + `FD_CLOEXEC` (called single-threaded) |
//! | [`clear_errno`], [`next_dir_name`] | `__errno_location`, `readdir64` | `__error`, `readdir` |
//! | [`fill_random`] | `getrandom` | `getentropy` |
//! | [`SOCKET_PATH_MAX`], [`SYSTEM_NAME`] | 107 bytes, `Linux` | 103 bytes, `macOS` |
//! | [`OPEN_SEARCH`] (a directory opened only to be walked through) | `O_PATH` | `O_SEARCH` |
//! | [`MANAGED_SETTINGS_DIR`] | `/etc/claude-code` | `/Library/Application Support/ClaudeCode` |
//! | [`is_platform_dropped_signal`], [`is_libc_reserved_signal`], [`realtime_signals`] | SIGPWR and real-time 35 and up dropped, 32–34 left to glibc | no SIGPWR, no real-time signals |
//! | [`trim_heap`], [`limit_malloc_arenas`] | `malloc_trim`, `mallopt(M_ARENA_MAX)` under glibc; nothing under musl | nothing |
//!
//! The process supervisor's own mechanisms (exit observation, pipe sizes,
//! signal names) are in `process/sys/`.

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod platform;
#[cfg(target_os = "macos")]
#[path = "macos.rs"]
mod platform;

pub(crate) use platform::{
    clear_errno, fill_random, initial_env_block, is_libc_reserved_signal, is_platform_dropped_signal,
    limit_malloc_arenas, mount_id, name_after_executable, next_dir_name, open_fds, own_executable, peer_pid, peer_uid,
    pipe_cloexec, process_alive, realtime_signals, trim_heap, MANAGED_SETTINGS_DIR, OPEN_SEARCH, SOCKET_PATH_MAX,
    SYSTEM_NAME,
};
