//! Windows answers for the OS facts of `sys/os/` that the Windows build
//! uses, under the same names as the Unix halves (`linux.rs`, `macos.rs`).
//! What has no Windows meaning (descriptor listings, `readdir`, signal
//! sets, mount ids, glibc tuning) is not here: the modules that ask for
//! it are Unix-only and have Windows stand-ins of their own.

use std::io;
use std::path::PathBuf;
use windows_sys::Win32::Foundation::{CloseHandle, STILL_ACTIVE};
use windows_sys::Win32::Security::Cryptography::{BCryptGenRandom, BCRYPT_USE_SYSTEM_PREFERRED_RNG};
use windows_sys::Win32::System::Threading::{GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION};

/// The longest AF_UNIX path Windows binds, in bytes: `sun_path` (108
/// bytes, as on Linux) less its terminating NUL.
pub(crate) const SOCKET_PATH_MAX: usize = 107;
/// This system's name in messages.
pub(crate) const SYSTEM_NAME: &str = "Windows";
/// The system folder of Claude Code's managed settings (the managed
/// launcher's policy) on Windows.
pub(crate) const MANAGED_SETTINGS_DIR: &str = r"C:\Program Files\ClaudeCode";

/// Whether the process `pid` still runs (an exited process whose handle
/// someone still holds reports `STILL_ACTIVE` no more).
pub(crate) fn process_alive(pid: i32) -> bool {
    let Ok(pid) = u32::try_from(pid) else {
        return false;
    };
    // SAFETY: OpenProcess takes no pointers; a null handle means failure.
    let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if handle.is_null() {
        // Access denied still means somebody runs under that id.
        return io::Error::last_os_error().raw_os_error() == Some(5);
    }
    let mut code = 0u32;
    // SAFETY: `handle` is the open process handle from above; `code` is a
    // valid out-parameter.
    let ok = unsafe { GetExitCodeProcess(handle, &mut code) } != 0;
    // SAFETY: closes the handle opened above, once.
    unsafe { CloseHandle(handle) };
    ok && code == STILL_ACTIVE as u32
}

/// What the daemon re-executes to detach: the path it was started from.
pub(crate) fn own_executable() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from(std::env::args_os().next().unwrap_or_default()))
}

/// Nothing to do: [`own_executable`] is the file's real path.
pub(crate) fn name_after_executable() {}

/// Not known: the caller unsets the sentinel and leaves the block alone.
pub(crate) fn initial_env_block() -> Option<(usize, usize)> {
    None
}

/// Fills `buf` from the system's preferred CSPRNG (`BCryptGenRandom`).
pub(crate) fn fill_random(buf: &mut [u8]) -> io::Result<()> {
    let len = u32::try_from(buf.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: writes exactly `len` bytes into `buf`; the null algorithm
    // handle is allowed with BCRYPT_USE_SYSTEM_PREFERRED_RNG.
    let status = unsafe {
        BCryptGenRandom(
            std::ptr::null_mut(),
            buf.as_mut_ptr(),
            len,
            BCRYPT_USE_SYSTEM_PREFERRED_RNG,
        )
    };
    if status != 0 {
        return Err(io::Error::other(format!(
            "BCryptGenRandom failed: NTSTATUS {status:#x}"
        )));
    }
    Ok(())
}

/// The allocator returns pages by itself: nothing to do.
pub(crate) fn trim_heap() {}

/// No arena tunable: nothing to do.
pub(crate) fn limit_malloc_arenas(_arenas: i32) {}

/// The size of the file on stderr (0 when it is not a file or cannot be
/// read): where the daemon log's cap starts counting.
pub(crate) fn stderr_len() -> u64 {
    stderr_file().and_then(|f| f.metadata().ok()).map_or(0, |m| m.len())
}

/// A second handle to what stderr is, as a `File` (closing it leaves
/// stderr open).
fn stderr_file() -> Option<std::fs::File> {
    use std::os::windows::io::AsHandle;
    let handle = std::io::stderr().as_handle().try_clone_to_owned().ok()?;
    Some(std::fs::File::from(handle))
}

/// Puts `fresh` on stderr in place of what was there; whether it worked.
/// std looks the standard handle up on every write, so the next line goes
/// to `fresh`; a duplicate of it is kept open for the process's life.
pub(crate) fn replace_stderr(fresh: &std::fs::File) -> bool {
    use std::os::windows::io::IntoRawHandle;
    use windows_sys::Win32::System::Console::{SetStdHandle, STD_ERROR_HANDLE};
    let Ok(kept) = fresh.try_clone() else {
        return false;
    };
    let raw = kept.into_raw_handle();
    // SAFETY: `raw` is an open handle we own and never close, so the
    // standard handle stays valid.
    unsafe { SetStdHandle(STD_ERROR_HANDLE, raw) != 0 }
}

/// Truncates the file on stderr to nothing; whether it worked (a handle
/// opened for appending alone cannot, and the caller then says nothing).
pub(crate) fn truncate_stderr() -> bool {
    stderr_file().is_some_and(|f| f.set_len(0).is_ok())
}

/// The local wall-clock time now: year, month (1–12), day, hour, minute,
/// second (`GetLocalTime`, which cannot fail).
pub(crate) fn local_time() -> Option<[i32; 6]> {
    use windows_sys::Win32::System::SystemInformation::GetLocalTime;
    // SAFETY: SYSTEMTIME is plain integers; GetLocalTime fills it.
    let mut t: windows_sys::Win32::Foundation::SYSTEMTIME = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a valid out-parameter.
    unsafe { GetLocalTime(&mut t) };
    Some([t.wYear, t.wMonth, t.wDay, t.wHour, t.wMinute, t.wSecond].map(i32::from))
}

/// Windows has no per-process open-files limit of the POSIX kind (handles
/// are bounded only by memory): `None`, so nothing is raised or logged and
/// the connection cap uses its default.
pub(crate) fn open_files_limit() -> Option<(u64, u64)> {
    None
}

/// Never called ([`open_files_limit`] reads none); refuses.
pub(crate) fn set_open_files_limit(_soft: u64, _hard: u64) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Go's `syscall.Errno.Error()` text on Windows: the system's message for
/// the Win32 error `code` (`FormatMessage`, trailing line break trimmed,
/// as std prints it), or Go's `winapi error #N` when it has none.
pub(crate) fn errno_text(code: i32) -> String {
    let text = io::Error::from_raw_os_error(code).to_string();
    let suffix = format!(" (os error {code})");
    match text.strip_suffix(&suffix) {
        // "OS Error N (FormatMessageW() returned error M)" is std's text
        // when the system has none (Wine lacks most Winsock messages).
        Some(message)
            if !message.is_empty() && !message.starts_with("Unknown error") && !message.starts_with("OS Error ") =>
        {
            message.to_string()
        }
        _ => format!("winapi error #{code}"),
    }
}

/// The account's home when `$HOME` is not set: `%USERPROFILE%`, as Go's
/// `os.UserHomeDir` on Windows.
pub(crate) fn account_home() -> Option<PathBuf> {
    std::env::var_os("USERPROFILE")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}
