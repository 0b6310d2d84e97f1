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
