//! Linux answers for [`super`]: `/proc`, `SO_PEERCRED`, `pipe2`.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

/// The longest socket path `bind(2)` takes, in bytes: `sun_path` (108
/// bytes here) less its terminating NUL.
pub(crate) const SOCKET_PATH_MAX: usize = 107;
/// This system's name in messages.
pub(crate) const SYSTEM_NAME: &str = "Linux";
/// The `open` flag for a directory descriptor used only to reach what is
/// below it: `O_PATH`: the directory need only be searchable, and the descriptor
/// still serves `openat`, `mkdirat`, `unlinkat` and `fstat`.
pub(crate) const OPEN_SEARCH: libc::c_int = libc::O_PATH;
/// The system folder of Claude Code's managed settings (the managed
/// launcher's policy).
pub(crate) const MANAGED_SETTINGS_DIR: &str = "/etc/claude-code";

/// The credentials of the process at the other end of a connected Unix
/// socket (for a listener: of the process that called `listen`); `None`
/// for a socket without them (not a Unix stream) or a peer the kernel
/// reports as pid 0 (another pid namespace).
fn peer_cred(fd: RawFd) -> Option<libc::ucred> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0 && len as usize == std::mem::size_of::<libc::ucred>() && cred.pid > 0).then_some(cred)
}

/// The pid at the other end of a connected Unix socket.
pub(crate) fn peer_pid(fd: RawFd) -> Option<i32> {
    peer_cred(fd).map(|cred| cred.pid)
}

/// The effective uid of the process at the other end of a connected
/// Unix socket (for a listener: of the process that called `listen`).
pub(crate) fn peer_uid(fd: RawFd) -> Option<u32> {
    peer_cred(fd).map(|cred| cred.uid)
}

/// The id of the mount the open file `fd` lies on (`statx` with
/// `STATX_MNT_ID`, Linux 5.8), or `None` when the kernel does not say
/// (an older kernel, or `statx` refused by a seccomp filter). Unlike
/// `st_dev`, it tells a btrfs subvolume (its own device number, the same
/// mount) from a mount, and a bind mount of a directory of the same
/// filesystem from that filesystem.
pub(crate) fn mount_id(fd: RawFd) -> Option<u64> {
    // SAFETY: all-zero bytes are a valid `statx` to be overwritten.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // The system call itself, not libc's `statx` wrapper: musl has the
    // wrapper only since 1.2.5, and glibc since 2.28.
    // SAFETY: an empty NUL-terminated path with `AT_EMPTY_PATH` names
    // `fd` itself; `stx` is a writable `statx`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_statx,
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_MNT_ID,
            &mut stx as *mut libc::statx,
        )
    };
    (rc == 0 && stx.stx_mask & libc::STATX_MNT_ID != 0).then_some(stx.stx_mnt_id)
}

/// Running (a zombie waiting for its reaper counts as ended).
pub(crate) fn process_alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat.rfind(')').and_then(|i| stat.get(i + 2..i + 3));
    !matches!(state, Some("Z") | Some("X") | None)
}

/// What the daemon re-executes to detach: the running image itself.
pub(crate) fn own_executable() -> PathBuf {
    PathBuf::from("/proc/self/exe")
}

/// Names this process (`comm`: what `ps -o comm`, `top` and `pgrep -x`
/// show) after the file it was executed from. The daemon is re-executed
/// through `/proc/self/exe`, and the kernel names a process after the last
/// component of the path it was executed by, so it would be called `exe`.
pub(crate) fn name_after_executable() {
    use std::os::unix::ffi::OsStrExt;
    let Ok(target) = std::fs::read_link("/proc/self/exe") else {
        return;
    };
    // An executable replaced since (an upgrade under a running daemon)
    // reads as `<path> (deleted)`.
    let path = target.as_os_str().as_bytes();
    let path = path.strip_suffix(b" (deleted)").unwrap_or(path);
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    if name.is_empty() || name.contains(&0) {
        return;
    }
    // The kernel keeps 15 bytes and a NUL.
    let mut comm = [0u8; 16];
    let len = name.len().min(15);
    comm[..len].copy_from_slice(&name[..len]);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16
    // bytes from the pointer; `comm` is 16 bytes and ends in a NUL.
    unsafe { libc::prctl(libc::PR_SET_NAME, comm.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

/// The address range of the environment block the kernel set up at exec
/// (`env_start`, `env_end`: fields 50 and 51 of `/proc/self/stat`).
pub(crate) fn initial_env_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name start at field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let start = fields.get(50 - 3)?.parse().ok()?;
    let end = fields.get(51 - 3)?.parse().ok()?;
    Some((start, end))
}

/// This process's open descriptors (the listing's own included; it is
/// closed by the time the caller sees the list).
pub(crate) fn open_fds() -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect()
}

/// A pipe whose both ends are close-on-exec from creation.
pub(crate) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into the array on success.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sets this thread's errno to 0 (for calls that report errors only
/// through errno, like `readdir`).
pub(crate) fn clear_errno() {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = 0 };
}

/// The next entry's name from `readdir64`, or null at the end or on error
/// (clear errno first to tell them apart).
///
/// # Safety
/// `stream` must be a valid `DIR*`; the name lives until the next call on
/// the stream.
pub(crate) unsafe fn next_dir_name(stream: *mut libc::DIR) -> *const libc::c_char {
    // SAFETY: the caller guarantees `stream`.
    let entry = unsafe { libc::readdir64(stream) };
    if entry.is_null() {
        return std::ptr::null();
    }
    // SAFETY: a non-null entry is valid until the next readdir.
    unsafe { (*entry).d_name.as_ptr() }
}

/// Fills `buf` from the kernel's CSPRNG (`getrandom`).
pub(crate) fn fill_random(buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: writes at most the remaining length into `buf`.
        let n = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n > 0 {
            filled += n as usize;
            continue;
        }
        let err = io::Error::last_os_error();
        if n < 0 && err.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return Err(err);
    }
    Ok(())
}

/// The first real-time signal Go's runtime catches; glibc keeps 32–34 for
/// its own use (see [`crate::base::signals`]).
const FIRST_CAUGHT_REALTIME: libc::c_int = 35;

/// Signals only Linux has that a Go program catches and remora drops at
/// start: SIGPWR and the real-time signals from 35 on.
pub(crate) fn is_platform_dropped_signal(signal: libc::c_int) -> bool {
    signal >= FIRST_CAUGHT_REALTIME || signal == libc::SIGPWR
}

/// The real-time signals glibc reserves (32–34): left as inherited.
pub(crate) fn is_libc_reserved_signal(signal: libc::c_int) -> bool {
    (32..FIRST_CAUGHT_REALTIME).contains(&signal)
}

/// The real-time signals a disposition can be held for beyond 1–31.
pub(crate) fn realtime_signals() -> std::ops::Range<libc::c_int> {
    FIRST_CAUGHT_REALTIME..libc::SIGRTMAX() + 1
}

/// Returns free heap pages to the kernel; glibc keeps them otherwise
/// (musl's malloc has no such call and needs none).
pub(crate) fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Caps glibc's malloc arenas (a no-op under musl).
pub(crate) fn limit_malloc_arenas(arenas: libc::c_int) {
    #[cfg(target_env = "gnu")]
    // SAFETY: called before the runtime spawns any thread; mallopt only
    // changes a malloc tunable.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
    #[cfg(not(target_env = "gnu"))]
    let _ = arenas;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn mount_ids_tell_one_mount_from_another() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        let id = |p: &std::path::Path| mount_id(std::fs::File::open(p).unwrap().as_raw_fd());
        let Some(top) = id(tmp.path()) else {
            eprintln!("skipped: this kernel gives no mount id (before 5.8, or statx filtered)");
            return;
        };
        // A directory of the same mount, and `/proc`, always a mount of
        // its own.
        assert_eq!(id(&tmp.path().join("sub")), Some(top));
        assert_ne!(id(std::path::Path::new("/proc")), Some(top));
    }
}
