//! Windows answers for the OS facts of `sys/os/` that the Windows build
//! uses, under the same names as the Unix halves (`linux.rs`, `macos.rs`).
//! What has no Windows meaning (descriptor listings, `readdir`, signal
//! sets, mount ids, glibc tuning) is not here: the modules that ask for
//! it are Unix-only and have Windows stand-ins of their own.

// Some answers wait for their Windows callers (`-stop`, the managed
// launcher: issue 43).
#![allow(dead_code)]

use std::io;
use std::path::PathBuf;
use windows_sys::Win32::Foundation::{CloseHandle, STILL_ACTIVE};
use windows_sys::Win32::Security::Cryptography::{BCryptGenRandom, BCRYPT_USE_SYSTEM_PREFERRED_RNG};
use windows_sys::Win32::System::Threading::{GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION};

/// The longest AF_UNIX path Windows binds, in bytes: `sun_path` (108
/// bytes, as on Linux) less its terminating NUL.
pub(crate) const SOCKET_PATH_MAX: usize = 107;
/// The host family of this build: the answers the reference's Windows
/// builds give differently (`methods::hostrules`, `protocol::build`).
pub(crate) const HOST: crate::sys::Host = crate::sys::Host::Windows;
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

/// Puts `fresh` on stderr in place of what was there, which is closed, as
/// Unix's `dup2` onto descriptor 2 closes it; whether it worked. std looks
/// the standard handle up on every write, so the next line goes to
/// `fresh`; a duplicate of it stays open as the standard handle until it
/// is replaced in turn. Closing the one replaced is what lets a rotated
/// log be renamed over later (a file still open is not replaced by a
/// rename) and its disk be freed. Callers: the daemon log's rotation
/// (`base::logging`), under the stderr lock, so no std write is between
/// its look-up and its use of the handle; nothing else in the daemon reads
/// the standard error handle (every child it spawns is given its own).
pub(crate) fn replace_stderr(fresh: &std::fs::File) -> bool {
    use std::os::windows::io::{FromRawHandle, IntoRawHandle, OwnedHandle};
    use windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE;
    use windows_sys::Win32::System::Console::{GetStdHandle, SetStdHandle, STD_ERROR_HANDLE};
    let Ok(kept) = fresh.try_clone() else {
        return false;
    };
    let raw = kept.into_raw_handle();
    // SAFETY: GetStdHandle takes no pointers.
    let old = unsafe { GetStdHandle(STD_ERROR_HANDLE) };
    // SAFETY: `raw` is an open handle we own; once set it is never closed
    // here, so the standard handle stays valid.
    if unsafe { SetStdHandle(STD_ERROR_HANDLE, raw) } == 0 {
        // SAFETY: `raw` was not handed over; it is ours to close.
        drop(unsafe { OwnedHandle::from_raw_handle(raw) });
        return false;
    }
    if !old.is_null() && old != INVALID_HANDLE_VALUE {
        // SAFETY: `old` was the standard handle, which nothing else owns
        // (std borrows it per write, under the lock the caller holds).
        unsafe { CloseHandle(old) };
    }
    true
}

/// Truncates the file on stderr to nothing; whether it worked (writing
/// goes on at its new end: it is opened for append).
pub(crate) fn truncate_stderr() -> bool {
    stderr_file().is_some_and(|f| truncate_file(&f))
}

/// Truncates an open file to nothing; whether it worked. Appends through
/// `file` go on at the new end. What the logs fall back on when a full one
/// cannot be renamed (someone holds it, or the name it is to take, open
/// without sharing deletion). A handle opened for appending alone cannot
/// set the end of the file (that takes `FILE_WRITE_DATA`; Wine does not
/// check), so the file is then reopened for writing through it
/// ([`reopened_for_writing`]) and truncated there.
pub(crate) fn truncate_file(file: &std::fs::File) -> bool {
    file.set_len(0).is_ok() || reopened_for_writing(file).is_ok_and(|f| f.set_len(0).is_ok())
}

/// A second handle to the file `file` is open on, which may write data
/// (`FILE_WRITE_DATA`): `NtCreateFile` relative to `file` with an empty
/// name, as `ReOpenFile` does, so it is the same file whatever its name
/// is now (Wine resolves it by the name the file was opened under), and
/// nothing is looked up by path.
pub(crate) fn reopened_for_writing(file: &std::fs::File) -> io::Result<std::fs::File> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Wdk::Storage::FileSystem::{FILE_NON_DIRECTORY_FILE, FILE_OPEN};
    use windows_sys::Win32::Storage::FileSystem::{FILE_READ_ATTRIBUTES, FILE_WRITE_DATA};
    super::openat::open_at(
        file.as_raw_handle(),
        &[],
        FILE_WRITE_DATA | FILE_READ_ATTRIBUTES,
        FILE_OPEN,
        FILE_NON_DIRECTORY_FILE,
        None,
    )
    .map(std::fs::File::from)
}

/// The identity of the file on stderr ([`file_identity`]): what the daemon
/// log's rotation compares with the log's name before renaming it.
pub(crate) fn stderr_identity() -> Option<(u64, u64)> {
    stderr_file().and_then(|f| file_identity(&f))
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

/// The per-user directory for application state that stays on this
/// machine (what `XDG_STATE_HOME` is on Unix): `%LOCALAPPDATA%`, else
/// `%USERPROFILE%\AppData\Local` (its place since Windows Vista), else
/// none. Only an absolute value counts.
pub(crate) fn app_state_dir() -> Option<PathBuf> {
    let absolute = |p: PathBuf| p.is_absolute().then_some(p);
    std::env::var_os("LOCALAPPDATA")
        .map(PathBuf::from)
        .and_then(absolute)
        .or_else(|| {
            account_home()
                .and_then(absolute)
                .map(|h| h.join("AppData").join("Local"))
        })
}

/// Takes the exclusive lock of `file` without waiting (`LockFileEx` over
/// the whole file, through std); whether it was taken. Closing the file
/// releases it, as does the death of the process.
pub(crate) fn try_lock(file: &std::fs::File) -> bool {
    file.try_lock().is_ok()
}

/// This host's name (`%COMPUTERNAME%`), empty when unset.
pub(crate) fn host_name() -> String {
    std::env::var("COMPUTERNAME").unwrap_or_default()
}

/// No uid on Windows: accounts are SIDs, and the ownership checks that
/// compare uids are the DACL checks of `base/windows/safedir.rs`. 0 keeps
/// the names derived from it (`remora-<uid>`) stable.
pub(crate) fn effective_uid() -> u32 {
    0
}

/// Volume serial number and file index of an open file
/// (`GetFileInformationByHandle`): what tells whether a name still names
/// it.
pub(crate) fn file_identity(file: &std::fs::File) -> Option<(u64, u64)> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{GetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION};
    // SAFETY: an all-zero value is valid for this plain C struct.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: the handle is open for the call; `info` is a valid out-pointer.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
        return None;
    }
    let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
    Some((u64::from(info.dwVolumeSerialNumber), index))
}

/// Narrows `file` to the owner-only protected DACL every file the daemon
/// creates gets (the Unix half's `0600` for a wider file): a file it made
/// has it already; one that was there before (a wire log another tool or
/// an older build made, readable by others) loses every grant but its
/// owner's. Through a second handle opened on the file itself with
/// `WRITE_DAC` (relative to it, nothing looked up by path); the caller
/// has checked the file is ours.
pub(crate) fn keep_owner_only(file: &std::fs::File) -> io::Result<()> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Wdk::Storage::FileSystem::{FILE_NON_DIRECTORY_FILE, FILE_OPEN};
    use windows_sys::Win32::Storage::FileSystem::{READ_CONTROL, WRITE_DAC};
    let handle = super::openat::open_at(
        file.as_raw_handle(),
        &[],
        READ_CONTROL | WRITE_DAC,
        FILE_OPEN,
        FILE_NON_DIRECTORY_FILE,
        None,
    )?;
    super::acl::Descriptor::owner_only_files()?.apply_dacl(handle.as_raw_handle())
}

/// Opens `path` for reading. Nothing blocks an open on Windows the way a
/// FIFO does on Unix. `FILE_FLAG_BACKUP_SEMANTICS` lets a directory open
/// too, as Go's `os.Open` on Windows does (its read-only opens set it), so
/// `files.read` of a directory gets to its "path is a directory" check
/// instead of `ERROR_ACCESS_DENIED` (`files-read-directory` under Wine).
pub(crate) fn open_nonblocking(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::windows::fs::OpenOptionsExt;
    use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_BACKUP_SEMANTICS;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(path)
}

/// Checks that `path` is a directory that can be listed, as the Unix
/// `O_DIRECTORY` open does: another kind of file fails with
/// `ERROR_DIRECTORY` ("The directory name is invalid."). Returns the
/// directory opened with `FILE_FLAG_BACKUP_SEMANTICS` (how Windows opens a
/// directory as a file).
pub(crate) fn open_dir_nonblocking(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::windows::fs::OpenOptionsExt;
    use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_BACKUP_SEMANTICS;
    const ERROR_DIRECTORY: i32 = 267;
    if !std::fs::metadata(path)?.is_dir() {
        return Err(io::Error::from_raw_os_error(ERROR_DIRECTORY));
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(path)
}

/// The `st_mode` Go's `os.Stat` gives on Windows: a directory is `0777`,
/// a file `0666`, or `0444` when read-only; with the Unix type bits.
pub(crate) fn st_mode(meta: &std::fs::Metadata) -> u32 {
    const S_IFDIR: u32 = 0o040000;
    const S_IFREG: u32 = 0o100000;
    if meta.is_dir() {
        S_IFDIR | 0o777
    } else if meta.permissions().readonly() {
        S_IFREG | 0o444
    } else {
        S_IFREG | 0o666
    }
}

/// Never: Windows's null device (`NUL`) is not a file a stat returns.
pub(crate) fn is_null_device(_meta: &std::fs::Metadata) -> bool {
    false
}

/// The separator of the entries of `PATH`.
pub(crate) const PATH_LIST_SEPARATOR: u8 = b';';

/// Whether this process may execute `path`: Windows has no execute bit
/// (what runs is decided by the extension), so any file that exists may.
pub(crate) fn may_execute(path: &std::path::Path) -> io::Result<()> {
    std::fs::metadata(path).map(|_| ())
}

/// Volume serial number and file index of the file at `path`, not
/// followed (a reparse point, as an AF_UNIX socket file is, is opened
/// itself): what tells whether the path still names the file bound or
/// created there.
pub(crate) fn path_identity(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::windows::fs::OpenOptionsExt;
    use windows_sys::Win32::Storage::FileSystem::{FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT};
    let file = std::fs::OpenOptions::new()
        .access_mode(0)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)
        .ok()?;
    file_identity(&file)
}

/// Reads one byte from "descriptor" `fd` into `byte`: how many were read
/// (0 at EOF, as a closed pipe ends). Windows has C runtime descriptors
/// only for the standard handles: 0 is stdin (the handle a launcher is
/// given its token on); any other number is `ERROR_INVALID_HANDLE`.
/// Read straight from the handle (std's stdin is buffered), so nothing
/// past the token's line is taken from a shared handle.
pub(crate) fn read_fd_byte(fd: i64, byte: &mut u8) -> io::Result<usize> {
    use windows_sys::Win32::Storage::FileSystem::ReadFile;
    use windows_sys::Win32::System::Console::{GetStdHandle, STD_INPUT_HANDLE};
    const ERROR_INVALID_HANDLE: i32 = 6;
    const ERROR_BROKEN_PIPE: i32 = 109;
    if fd != 0 {
        return Err(io::Error::from_raw_os_error(ERROR_INVALID_HANDLE));
    }
    // SAFETY: GetStdHandle takes no pointers.
    let handle = unsafe { GetStdHandle(STD_INPUT_HANDLE) };
    if handle.is_null() || handle == windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE {
        return Err(io::Error::from_raw_os_error(ERROR_INVALID_HANDLE));
    }
    let mut read = 0u32;
    // SAFETY: reads at most one byte into `byte`; `read` is a valid
    // out-pointer; no OVERLAPPED (a synchronous read).
    let ok = unsafe { ReadFile(handle, byte as *mut u8, 1, &mut read, std::ptr::null_mut()) };
    if ok == 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(ERROR_BROKEN_PIPE) {
            Ok(0)
        } else {
            Err(e)
        };
    }
    Ok(read as usize)
}

/// The characters that make a command name a path (no `PATH` lookup),
/// as Go's `exec.LookPath` on Windows takes them.
pub(crate) const PATH_SEPARATORS: &[char] = &['/', '\\', ':'];

/// Whether two environment variable names are the same variable: Windows
/// compares them without case (`Path` is `PATH`), as Go's `dedupEnv` and
/// `os.Getenv` do there; ASCII case only, which covers the names the
/// daemon reads (Go lowercases by Unicode: a name differing only in a
/// non-ASCII letter's case stays two variables here).
pub(crate) fn env_names_equal(a: &std::ffi::OsStr, b: &std::ffi::OsStr) -> bool {
    a.eq_ignore_ascii_case(b)
}
