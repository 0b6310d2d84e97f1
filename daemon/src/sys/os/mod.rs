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
//! | [`HOST`] (the family the wire answers depend on) | [`crate::sys::Host::Unix`] | the same |
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

/// The host family of this build, for the answers the reference gives
/// differently on Windows (the Windows half says `Windows`).
pub(crate) const HOST: crate::sys::Host = crate::sys::Host::Unix;

pub(crate) use platform::{
    clear_errno, fill_random, initial_env_block, is_libc_reserved_signal, is_platform_dropped_signal,
    limit_malloc_arenas, mount_id, name_after_executable, next_dir_name, open_fds, own_executable, peer_pid, peer_uid,
    pipe_cloexec, process_alive, realtime_signals, trim_heap, MANAGED_SETTINGS_DIR, OPEN_SEARCH, SOCKET_PATH_MAX,
    SYSTEM_NAME,
};

/// The size of the file on stderr (0 when it is not a file or cannot be
/// read): where the daemon log's cap starts counting.
pub(crate) fn stderr_len() -> u64 {
    use std::os::fd::AsRawFd;
    std::fs::metadata(format!("/dev/fd/{}", std::io::stderr().as_raw_fd()))
        .map(|m| m.len())
        .unwrap_or(0)
}

/// Puts `fresh` on stderr in place of what was there; whether it worked.
pub(crate) fn replace_stderr(fresh: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: dup2 of a file the caller holds open onto our own stderr.
    unsafe { libc::dup2(fresh.as_raw_fd(), std::io::stderr().as_raw_fd()) >= 0 }
}

/// Truncates the file on stderr to nothing; whether it worked (it is
/// opened for append, so writing goes on at its new end).
pub(crate) fn truncate_stderr() -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: truncating our own stderr, a regular file we were given.
    unsafe { libc::ftruncate(std::io::stderr().as_raw_fd(), 0) == 0 }
}

/// Truncates an open file to nothing; whether it worked (a file opened
/// for append goes on at its new end). The wire log's fallback when a full
/// one cannot be renamed; the Windows half reopens an append-only handle.
pub(crate) fn truncate_file(file: &std::fs::File) -> bool {
    file.set_len(0).is_ok()
}

/// The local wall-clock time now: year, month (1–12), day, hour, minute,
/// second; `None` when the zone cannot be applied.
pub(crate) fn local_time() -> Option<[i32; 6]> {
    // SAFETY: `time` and `localtime_r` only write into the locals we pass.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            return None;
        }
        Some([
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday,
            tm.tm_hour,
            tm.tm_min,
            tm.tm_sec,
        ])
    }
}

/// This process's open-files limit, soft and hard ("unlimited" as
/// `u64::MAX`); `None` when it cannot be read.
pub(crate) fn open_files_limit() -> Option<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    // `rlim_t` is u64 on Linux and macOS alike today; the conversion keeps
    // this right on a target where it is not.
    #[allow(clippy::unnecessary_cast)]
    let as_u64 = |v: libc::rlim_t| if v == libc::RLIM_INFINITY { u64::MAX } else { v as u64 };
    Some((as_u64(lim.rlim_cur), as_u64(lim.rlim_max)))
}

/// Sets the soft open-files limit to `soft`, keeping the hard one `hard`
/// (as [`open_files_limit`] read them).
pub(crate) fn set_open_files_limit(soft: u64, hard: u64) -> std::io::Result<()> {
    #[allow(clippy::unnecessary_cast)]
    let as_rlim = |v: u64| {
        if v == u64::MAX {
            libc::RLIM_INFINITY
        } else {
            v as libc::rlim_t
        }
    };
    let raised = libc::rlimit {
        rlim_cur: as_rlim(soft),
        rlim_max: as_rlim(hard),
    };
    // SAFETY: setrlimit reads the struct; the soft value is within the hard one.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Go's `syscall.Errno.Error()` text for `errno`.
pub(crate) fn errno_text(errno: i32) -> String {
    let known = match errno {
        libc::EPERM => "operation not permitted",
        libc::ENOENT => "no such file or directory",
        libc::ESRCH => "no such process",
        libc::EINTR => "interrupted system call",
        libc::EIO => "input/output error",
        libc::ENXIO => "no such device or address",
        libc::E2BIG => "argument list too long",
        libc::ENOEXEC => "exec format error",
        libc::EBADF => "bad file descriptor",
        libc::ECHILD => "no child processes",
        libc::EAGAIN => "resource temporarily unavailable",
        libc::ENOMEM => "cannot allocate memory",
        libc::EACCES => "permission denied",
        libc::EFAULT => "bad address",
        libc::EBUSY => "device or resource busy",
        libc::EEXIST => "file exists",
        libc::EXDEV => "invalid cross-device link",
        libc::ENODEV => "no such device",
        libc::ENOTDIR => "not a directory",
        libc::EISDIR => "is a directory",
        libc::EINVAL => "invalid argument",
        libc::ENFILE => "too many open files in system",
        libc::EMFILE => "too many open files",
        libc::ENOTTY => "inappropriate ioctl for device",
        libc::ETXTBSY => "text file busy",
        libc::EFBIG => "file too large",
        libc::ENOSPC => "no space left on device",
        libc::ESPIPE => "illegal seek",
        libc::EROFS => "read-only file system",
        libc::EMLINK => "too many links",
        libc::EPIPE => "broken pipe",
        libc::ENAMETOOLONG => "file name too long",
        libc::ENOSYS => "function not implemented",
        libc::ENOTEMPTY => "directory not empty",
        libc::ELOOP => "too many levels of symbolic links",
        libc::ENOTSOCK => "socket operation on non-socket",
        libc::EADDRINUSE => "address already in use",
        libc::EADDRNOTAVAIL => "cannot assign requested address",
        libc::ECONNRESET => "connection reset by peer",
        libc::ENOTCONN => "transport endpoint is not connected",
        libc::ETIMEDOUT => "connection timed out",
        libc::ECONNREFUSED => "connection refused",
        libc::EOPNOTSUPP => "operation not supported",
        libc::EDQUOT => "disk quota exceeded",
        libc::EPROTOTYPE => "protocol wrong type for socket",
        _ => return format!("errno {errno}"),
    };
    known.to_string()
}

/// The home directory of the account running the daemon, from the user
/// database (used when `$HOME` is unset or empty).
pub(crate) fn account_home() -> Option<std::path::PathBuf> {
    match nix::unistd::User::from_uid(nix::unistd::getuid()) {
        Ok(Some(user)) => Some(user.dir),
        _ => None,
    }
}

/// The OS's per-user directory for application state, when it has one
/// apart from the home: none on Unix, where the caller reads
/// `XDG_STATE_HOME` and `$HOME` itself (Windows: `%LOCALAPPDATA%`).
pub(crate) fn app_state_dir() -> Option<std::path::PathBuf> {
    None
}

/// Takes the exclusive advisory lock of `file` without waiting
/// (`flock(LOCK_EX | LOCK_NB)`); whether it was taken. Closing the file
/// releases it, as does the death of the process.
pub(crate) fn try_lock(file: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor the caller holds open.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// This host's name (`gethostname`), empty when it cannot be read.
pub(crate) fn host_name() -> String {
    let mut name = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length.
    let rc = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) };
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    if rc == 0 {
        String::from_utf8_lossy(&name[..len]).into_owned()
    } else {
        String::new()
    }
}

/// The process's effective uid.
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// Device and inode of an open file: what tells whether a name still
/// names it.
pub(crate) fn file_identity(file: &std::fs::File) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    file.metadata().ok().map(|m| (m.dev(), m.ino()))
}

/// Narrows an open file of ours to `0600` when its mode lets anyone else
/// in; an error says why it could not be.
pub(crate) fn keep_owner_only(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = file.metadata().map(|m| m.permissions().mode()).unwrap_or(0);
    if mode & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

/// Opens `path` for reading without blocking on its kind (a FIFO without
/// a writer, a device: `O_NONBLOCK`), following symlinks.
pub(crate) fn open_nonblocking(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}

/// Opens the directory `path` to check it can be listed: a file of any
/// other kind fails with `ENOTDIR` (`O_DIRECTORY`) before its permissions
/// are looked at, and a FIFO is refused without waiting for a writer.
pub(crate) fn open_dir_nonblocking(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NONBLOCK)
        .open(path)
}

/// The `st_mode` of `meta` (type and permission bits).
pub(crate) fn st_mode(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::MetadataExt;
    meta.mode()
}

/// Whether `meta` is the system's null device itself (by identity:
/// another node with the same device numbers is not).
pub(crate) fn is_null_device(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/dev/null").is_ok_and(|null| null.dev() == meta.dev() && null.ino() == meta.ino())
}

/// The separator of the entries of `PATH`.
pub(crate) const PATH_LIST_SEPARATOR: u8 = b':';

/// Whether this process may execute `path`: `faccessat(X_OK, AT_EACCESS)`,
/// with the error it gives (`EINVAL` for a path holding a NUL).
pub(crate) fn may_execute(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: plain syscall on a NUL-terminated path.
    if unsafe { libc::faccessat(libc::AT_FDCWD, c_path.as_ptr(), libc::X_OK, libc::AT_EACCESS) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Device and inode of the file at `path`, not followed: what tells
/// whether the path still names the file bound or created there.
pub(crate) fn path_identity(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Reads one byte from descriptor `fd` into `byte`: how many were read
/// (0 at EOF). A descriptor out of range is `EBADF`.
pub(crate) fn read_fd_byte(fd: i64, byte: &mut u8) -> std::io::Result<usize> {
    let raw = i32::try_from(fd).map_err(|_| std::io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: reads at most one byte into `byte`; `raw` is only read.
    let n = unsafe { libc::read(raw, (byte as *mut u8).cast(), 1) };
    usize::try_from(n).map_err(|_| std::io::Error::last_os_error())
}

/// The characters that make a command name a path (no `PATH` lookup).
pub(crate) const PATH_SEPARATORS: &[char] = &['/'];

/// Whether two environment variable names are the same variable: byte
/// for byte on Unix.
pub(crate) fn env_names_equal(a: &std::ffi::OsStr, b: &std::ffi::OsStr) -> bool {
    a == b
}
