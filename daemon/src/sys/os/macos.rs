//! macOS answers for [`super`]: no `/proc`, so `kill(pid, 0)`, `/dev/fd`,
//! `LOCAL_PEERPID` and the executable path stand in.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

/// The longest socket path `bind(2)` takes, in bytes: `sun_path` (104
/// bytes here) less its terminating NUL.
pub(crate) const SOCKET_PATH_MAX: usize = 103;
/// This system's name in messages.
pub(crate) const SYSTEM_NAME: &str = "macOS";
/// The `open` flag for a directory descriptor used only to reach what is
/// below it: `O_SEARCH`: the directory need only be searchable, and the descriptor
/// still serves `openat`, `mkdirat`, `unlinkat` and `fstat`.
pub(crate) const OPEN_SEARCH: libc::c_int = libc::O_SEARCH;
/// The system folder of Claude Code's managed settings (the managed
/// launcher's policy).
pub(crate) const MANAGED_SETTINGS_DIR: &str = "/Library/Application Support/ClaudeCode";

/// The id of the mount `fd` lies on: macOS has none to read (a volume
/// is one device, and `st_dev` is what tells one from another).
pub(crate) fn mount_id(_fd: RawFd) -> Option<u64> {
    None
}

/// The pid at the other end of a connected Unix socket.
pub(crate) fn peer_pid(fd: RawFd) -> Option<i32> {
    let mut pid: libc::pid_t = 0;
    let mut len = std::mem::size_of::<libc::pid_t>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `pid`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_LOCAL,
            libc::LOCAL_PEERPID,
            (&mut pid as *mut libc::pid_t).cast(),
            &mut len,
        )
    };
    (rc == 0 && pid > 0).then_some(pid)
}

/// The effective uid of the process at the other end of a connected
/// Unix socket (for a listener: of the process that called `listen`).
pub(crate) fn peer_uid(fd: RawFd) -> Option<u32> {
    let mut uid: libc::uid_t = 0;
    let mut gid: libc::gid_t = 0;
    // SAFETY: getpeereid writes one uid and one gid.
    let rc = unsafe { libc::getpeereid(fd, &mut uid, &mut gid) };
    (rc == 0).then_some(uid)
}

/// Running, or a zombie not yet reaped (launchd, which adopts the
/// detached daemon, reaps at once).
pub(crate) fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 checks existence and sends nothing.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// What the daemon re-executes to detach: the path it was started from.
pub(crate) fn own_executable() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from(std::env::args_os().next().unwrap_or_default()))
}

/// Nothing to do: [`own_executable`] is the file's real path, so the
/// re-executed daemon is already named after it.
pub(crate) fn name_after_executable() {}

/// Not known without `/proc`: the caller unsets the sentinel but leaves
/// the bytes of the initial block alone.
pub(crate) fn initial_env_block() -> Option<(usize, usize)> {
    None
}

/// This process's open descriptors (the listing's own included; it is
/// closed by the time the caller sees the list).
pub(crate) fn open_fds() -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/dev/fd") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect()
}

/// A pipe whose both ends are close-on-exec (set right after creation:
/// Darwin has no `pipe2`; the daemon calls this while single-threaded).
pub(crate) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe writes two descriptors into the array on success.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    let ends = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    for fd in fds {
        // SAFETY: fcntl on descriptors we own.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(ends)
}

/// Sets this thread's errno to 0 (for calls that report errors only
/// through errno, like `readdir`).
pub(crate) fn clear_errno() {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__error() = 0 };
}

/// The next entry's name from `readdir`, or null at the end or on error
/// (clear errno first to tell them apart).
///
/// # Safety
/// `stream` must be a valid `DIR*`; the name lives until the next call on
/// the stream.
pub(crate) unsafe fn next_dir_name(stream: *mut libc::DIR) -> *const libc::c_char {
    // SAFETY: the caller guarantees `stream`.
    let entry = unsafe { libc::readdir(stream) };
    if entry.is_null() {
        return std::ptr::null();
    }
    // SAFETY: a non-null entry is valid until the next readdir.
    unsafe { (*entry).d_name.as_ptr() }
}

/// Fills `buf` (at most 256 bytes) from the kernel's CSPRNG (`getentropy`).
pub(crate) fn fill_random(buf: &mut [u8]) -> io::Result<()> {
    // SAFETY: writes exactly `buf.len()` bytes into `buf`.
    if unsafe { libc::getentropy(buf.as_mut_ptr().cast(), buf.len()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Darwin has no SIGPWR and no real-time signals: nothing beyond the
/// common table is dropped.
pub(crate) fn is_platform_dropped_signal(_signal: libc::c_int) -> bool {
    false
}

/// No real-time signals, so none reserved by libc.
pub(crate) fn is_libc_reserved_signal(_signal: libc::c_int) -> bool {
    false
}

/// No real-time signals.
pub(crate) fn realtime_signals() -> std::ops::Range<libc::c_int> {
    0..0
}

/// Darwin's malloc returns pages by itself: nothing to do.
pub(crate) fn trim_heap() {}

/// Darwin's malloc has no arena tunable: nothing to do.
pub(crate) fn limit_malloc_arenas(_arenas: libc::c_int) {}
