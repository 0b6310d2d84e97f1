//! The client ends a Windows `-bridge` and `-stop` dial (issue 43): an
//! AF_UNIX stream socket (Windows 10 1803+, what the reference dials) and
//! the named pipe of `-listen-pipe` (`sys/windows/pipe.rs` serves it).
//! Which one to dial is the caller's rule (`launch/windows/bridge.rs`
//! `dial`); this module only opens them and moves bytes.
//!
//! Both ends are blocking, for a two-thread relay like the Unix bridge.
//! The pipe is opened for overlapped I/O even so: a handle opened for
//! synchronous I/O serializes every call on it, so a read pending on one
//! thread would hold up the other thread's write until the daemon sent
//! something. Each call waits on its own event instead. A pipe read also
//! waits on the pipe's stop event, so another thread can end a read that
//! nothing will ever complete ([`Pipe::stop`]): a named pipe has no
//! half-close to ask the daemon to end the conversation.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::windows::io::{AsRawHandle, FromRawHandle, FromRawSocket, OwnedHandle};
use std::path::Path;
use std::time::Duration;
use windows_sys::Win32::Foundation::{
    ERROR_BROKEN_PIPE, ERROR_IO_PENDING, ERROR_PIPE_BUSY, ERROR_PIPE_NOT_CONNECTED, GENERIC_READ, GENERIC_WRITE,
    HANDLE, INVALID_HANDLE_VALUE, WAIT_OBJECT_0, WAIT_TIMEOUT,
};
use windows_sys::Win32::Networking::WinSock::{
    closesocket, connect, socket, WSAGetLastError, WSAIoctl, WSAStartup, AF_UNIX, INVALID_SOCKET,
    SIO_AF_UNIX_GETPEERPID, SOCKADDR, SOCKADDR_UN, SOCK_STREAM, WSADATA,
};
use windows_sys::Win32::Security::{GetLengthSid, GetTokenInformation, TokenUser, TOKEN_QUERY, TOKEN_USER};
use windows_sys::Win32::Storage::FileSystem::{CreateFileW, ReadFile, WriteFile, FILE_FLAG_OVERLAPPED, OPEN_EXISTING};
use windows_sys::Win32::System::Pipes::{GetNamedPipeServerProcessId, WaitNamedPipeW};
use windows_sys::Win32::System::Threading::{
    CreateEventW, GetCurrentProcess, OpenProcess, OpenProcessToken, SetEvent, WaitForMultipleObjects, INFINITE,
    PROCESS_QUERY_LIMITED_INFORMATION,
};
use windows_sys::Win32::System::IO::{CancelIoEx, GetOverlappedResult, OVERLAPPED};

/// The most of a `rpc.pipe` file that is read: a pipe name is at most 256
/// characters, so anything longer is not one.
const PIPE_FILE_MAX: u64 = 4096;
/// What every pipe name `rpc.pipe` may hold starts with: a pipe on this
/// host. A name of a remote host's pipe (`\\host\pipe\…`), or any other
/// path, is never dialled: opening one would send this user's
/// credentials to that host, or open a file.
const LOCAL_PIPE_PREFIX: &str = r"\\.\pipe\";

/// The pipe name the `rpc.pipe` file at `path` holds: `Ok(None)` when
/// there is no such file or it is empty; an `InvalidData` error when its
/// text is not a local pipe's name (`\\.\pipe\<name>`, the name without
/// `\` or `/`, at most 256 characters).
pub(crate) fn read_pipe_name(path: &Path) -> io::Result<Option<String>> {
    let mut bytes = Vec::new();
    match std::fs::File::open(path) {
        Ok(f) => f.take(PIPE_FILE_MAX).read_to_end(&mut bytes)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let text = String::from_utf8_lossy(&bytes);
    let name = text.trim();
    if name.is_empty() {
        return Ok(None);
    }
    let local = name
        .strip_prefix(LOCAL_PIPE_PREFIX)
        .is_some_and(|rest| !rest.is_empty() && rest.chars().count() <= 256 && !rest.contains(['\\', '/']));
    if !local {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "does not name a local pipe"));
    }
    Ok(Some(name.to_string()))
}

/// Which call of an AF_UNIX dial failed, as Go's `net.OpError` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DialStep {
    /// `socket(AF_UNIX)` itself: the OS has no AF_UNIX (Wine 8,
    /// Windows before 1803: `WSAEAFNOSUPPORT`).
    Socket,
    Connect,
}

impl DialStep {
    pub(crate) fn word(self) -> &'static str {
        match self {
            DialStep::Socket => "socket",
            DialStep::Connect => "connect",
        }
    }
}

/// Connects an AF_UNIX stream socket to `path`. The socket comes back as
/// a `TcpStream`: std's Windows stream type is a plain Winsock socket
/// whose reads, writes, timeouts and `shutdown` are the same calls for
/// any stream family.
pub(crate) fn connect_unix(path: &Path) -> Result<TcpStream, (DialStep, io::Error)> {
    let mut address = SOCKADDR_UN {
        sun_family: AF_UNIX,
        sun_path: [0; 108],
    };
    let bytes = path.as_os_str().as_encoded_bytes();
    // One byte is left for the terminating NUL.
    if bytes.len() >= address.sun_path.len() {
        return Err((DialStep::Connect, io::Error::from_raw_os_error(10063))); // WSAENAMETOOLONG
    }
    for (slot, &b) in address.sun_path.iter_mut().zip(bytes) {
        *slot = b as i8;
    }
    start_winsock();
    // SAFETY: plain Winsock calls; `address` outlives `connect`, and the
    // socket is closed on every path that does not hand it to std.
    unsafe {
        let s = socket(i32::from(AF_UNIX), SOCK_STREAM, 0);
        if s == INVALID_SOCKET {
            return Err((DialStep::Socket, io::Error::from_raw_os_error(WSAGetLastError())));
        }
        let len = std::mem::size_of::<SOCKADDR_UN>() as i32;
        if connect(s, (&address as *const SOCKADDR_UN).cast::<SOCKADDR>(), len) != 0 {
            let e = io::Error::from_raw_os_error(WSAGetLastError());
            closesocket(s);
            return Err((DialStep::Connect, e));
        }
        Ok(TcpStream::from_raw_socket(s as _))
    }
}

/// The pid of the process at the other end of a connected AF_UNIX
/// socket (`SIO_AF_UNIX_GETPEERPID`).
pub(crate) fn unix_peer_pid(stream: &TcpStream) -> Option<u32> {
    use std::os::windows::io::AsRawSocket;
    let mut pid = 0u32;
    let mut returned = 0u32;
    // SAFETY: the socket is open; the output buffer is `pid`, 4 bytes.
    let rc = unsafe {
        WSAIoctl(
            stream.as_raw_socket() as _,
            SIO_AF_UNIX_GETPEERPID,
            std::ptr::null(),
            0,
            (&mut pid as *mut u32).cast(),
            4,
            &mut returned,
            std::ptr::null_mut(),
            None,
        )
    };
    (rc == 0 && returned == 4).then_some(pid)
}

/// Whether process `pid` runs as this process's user (the user SID of
/// its token); `None` when either token cannot be read. What `-stop`
/// asks before it sends a token, as the Unix one compares peer uids.
pub(crate) fn runs_as_us(pid: u32) -> Option<bool> {
    // SAFETY: the pseudo-handle of this process needs no closing.
    let ours = user_sid(unsafe { GetCurrentProcess() })?;
    // SAFETY: a query-only handle, owned below.
    let h = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if h.is_null() {
        return None;
    }
    // SAFETY: a fresh handle nobody else owns; closed on drop.
    let process = unsafe { OwnedHandle::from_raw_handle(h) };
    let theirs = user_sid(process.as_raw_handle())?;
    Some(ours == theirs)
}

/// The bytes of the user SID of `process`'s token.
fn user_sid(process: HANDLE) -> Option<Vec<u8>> {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: `process` is a valid handle; `token` receives a new one.
    if unsafe { OpenProcessToken(process, TOKEN_QUERY, &mut token) } == 0 {
        return None;
    }
    // SAFETY: a fresh handle nobody else owns; closed on drop.
    let token = unsafe { OwnedHandle::from_raw_handle(token) };
    let mut len = 0u32;
    // SAFETY: a size query: no buffer, `len` receives the size needed.
    unsafe { GetTokenInformation(token.as_raw_handle(), TokenUser, std::ptr::null_mut(), 0, &mut len) };
    // u64s, so the TOKEN_USER at its start is aligned.
    let mut buf = vec![0u64; (len as usize).div_ceil(8).max(1)];
    // SAFETY: `buf` holds at least `len` bytes.
    let ok = unsafe { GetTokenInformation(token.as_raw_handle(), TokenUser, buf.as_mut_ptr().cast(), len, &mut len) };
    if ok == 0 {
        return None;
    }
    // SAFETY: on success the buffer starts with a TOKEN_USER whose SID
    // points into the same buffer, valid for GetLengthSid bytes.
    unsafe {
        let user = &*(buf.as_ptr() as *const TOKEN_USER);
        let sid = user.User.Sid;
        let n = GetLengthSid(sid) as usize;
        Some(std::slice::from_raw_parts(sid as *const u8, n).to_vec())
    }
}

/// Winsock must be started before its first call; std does it only on
/// its own first network call. Repeated starts are counted and harmless.
fn start_winsock() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        // SAFETY: WSADATA is plain data that WSAStartup fills in.
        unsafe {
            let mut data: WSADATA = std::mem::zeroed();
            WSAStartup(0x0202, &mut data);
        }
    });
}

/// An event handle, closed on drop.
struct Event(OwnedHandle);

impl Event {
    /// A manual-reset event, not signalled.
    fn new() -> io::Result<Event> {
        // SAFETY: no name, no security attributes; the handle is owned.
        let h = unsafe { CreateEventW(std::ptr::null(), 1, 0, std::ptr::null()) };
        if h.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `h` is a fresh handle nobody else owns.
        Ok(Event(unsafe { OwnedHandle::from_raw_handle(h) }))
    }

    fn raw(&self) -> HANDLE {
        self.0.as_raw_handle()
    }
}

/// The client end of a named pipe, opened for overlapped I/O.
pub(crate) struct Pipe {
    handle: OwnedHandle,
    /// Set by [`Pipe::stop`]: every read pending or to come returns EOF.
    stop: Event,
}

/// How long a dial waits for a free instance when every one is busy
/// (the daemon makes the next one as it accepts, so a wait is short).
const BUSY_WAIT_MS: u32 = 2000;

impl Pipe {
    /// Opens the pipe `name` (`\\.\pipe\…`), waiting a while when all
    /// its instances are busy.
    pub(crate) fn open(name: &str) -> io::Result<Pipe> {
        let wide: Vec<u16> = name.encode_utf16().chain([0]).collect();
        for _ in 0..5 {
            // SAFETY: `wide` is NUL-terminated; no template, no security
            // attributes (a client inherits nothing of them).
            let h = unsafe {
                CreateFileW(
                    wide.as_ptr(),
                    GENERIC_READ | GENERIC_WRITE,
                    0,
                    std::ptr::null(),
                    OPEN_EXISTING,
                    FILE_FLAG_OVERLAPPED,
                    std::ptr::null_mut(),
                )
            };
            if h != INVALID_HANDLE_VALUE {
                return Ok(Pipe {
                    // SAFETY: a fresh handle nobody else owns.
                    handle: unsafe { OwnedHandle::from_raw_handle(h) },
                    stop: Event::new()?,
                });
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(ERROR_PIPE_BUSY as i32) {
                return Err(e);
            }
            // SAFETY: `wide` is NUL-terminated.
            unsafe { WaitNamedPipeW(wide.as_ptr(), BUSY_WAIT_MS) };
        }
        Err(io::Error::from_raw_os_error(ERROR_PIPE_BUSY as i32))
    }

    /// The pid of the process serving the pipe.
    pub(crate) fn server_pid(&self) -> Option<u32> {
        let mut pid = 0u32;
        // SAFETY: the handle is a connected pipe client; `pid` is written.
        let ok = unsafe { GetNamedPipeServerProcessId(self.handle.as_raw_handle(), &mut pid) };
        (ok != 0).then_some(pid)
    }

    /// Ends every read, pending or to come, as if the daemon had closed.
    pub(crate) fn stop(&self) {
        // SAFETY: a valid event handle of ours.
        unsafe { SetEvent(self.stop.raw()) };
    }

    /// One overlapped call: starts it, then waits for it (and, for a read,
    /// for the stop event or `timeout`). A broken pipe, a stop and a
    /// timeout read as 0 bytes for a read, with the timeout as an error.
    fn transfer(&self, buf: *mut u8, len: usize, write: bool, timeout: Option<Duration>) -> io::Result<usize> {
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        let done = Event::new()?;
        // SAFETY: OVERLAPPED is plain data; zeroed is its documented start.
        let mut ov: OVERLAPPED = unsafe { std::mem::zeroed() };
        ov.hEvent = done.raw();
        let h = self.handle.as_raw_handle();
        let mut n = 0u32;
        // SAFETY: `buf` is valid for `len` bytes and `ov` lives until the
        // call has completed or been cancelled and waited for below.
        let started = unsafe {
            if write {
                WriteFile(h, buf, len, &mut n, &mut ov)
            } else {
                ReadFile(h, buf, len, &mut n, &mut ov)
            }
        };
        if started == 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(ERROR_IO_PENDING as i32) {
                return ended(e);
            }
            if !write {
                let waits = [done.raw(), self.stop.raw()];
                let ms = timeout.map_or(INFINITE, |t| u32::try_from(t.as_millis()).unwrap_or(INFINITE - 1));
                // SAFETY: two valid handles.
                let woke = unsafe { WaitForMultipleObjects(2, waits.as_ptr(), 0, ms) };
                if woke != WAIT_OBJECT_0 {
                    // Stopped or timed out: cancel, then wait for the
                    // cancellation so `ov` and `buf` are free again.
                    // SAFETY: `ov` is this call's, still pending.
                    unsafe { CancelIoEx(h, &ov) };
                    // SAFETY: as above.
                    unsafe { GetOverlappedResult(h, &ov, &mut n, 1) };
                    if woke == WAIT_TIMEOUT {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                    return Ok(0);
                }
            }
            // SAFETY: `ov` is this call's; waits for its completion.
            if unsafe { GetOverlappedResult(h, &ov, &mut n, 1) } == 0 {
                return ended(io::Error::last_os_error());
            }
        }
        Ok(n as usize)
    }

    /// A read that gives up after `timeout` (`TimedOut`).
    pub(crate) fn read_within(&self, buf: &mut [u8], timeout: Duration) -> io::Result<usize> {
        self.transfer(buf.as_mut_ptr(), buf.len(), false, Some(timeout))
    }
}

/// The daemon's side closed (or was never connected): the end of the
/// stream for a read; any other error is passed on.
fn ended(e: io::Error) -> io::Result<usize> {
    match e.raw_os_error() {
        Some(c) if c == ERROR_BROKEN_PIPE as i32 || c == ERROR_PIPE_NOT_CONNECTED as i32 => Ok(0),
        _ => Err(e),
    }
}

impl Read for &Pipe {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.transfer(buf.as_mut_ptr(), buf.len(), false, None)
    }
}

impl Write for &Pipe {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.transfer(buf.as_ptr().cast_mut(), buf.len(), true, None)? {
            // A write to a pipe the daemon closed: say so, as a socket would.
            0 if !buf.is_empty() => Err(io::ErrorKind::BrokenPipe.into()),
            n => Ok(n),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_pipe_names_only_a_local_pipe() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rpc.pipe");
        let read = |text: &[u8]| {
            std::fs::write(&file, text).unwrap();
            read_pipe_name(&file)
        };
        assert_eq!(
            read(b"\\\\.\\pipe\\remora-ab12").unwrap().as_deref(),
            Some(r"\\.\pipe\remora-ab12")
        );
        assert_eq!(read(b"  \\\\.\\pipe\\x\r\n").unwrap().as_deref(), Some(r"\\.\pipe\x"));
        assert_eq!(read(b" \n").unwrap(), None);
        for bad in [
            &b"\\\\host\\pipe\\x"[..],
            b"\\\\.\\pipe\\",
            b"\\\\.\\pipe\\a\\..\\..\\C:\\x",
            b"\\\\.\\pipe\\a/b",
            b"C:\\Users\\me\\file",
        ] {
            let e = read(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{}", String::from_utf8_lossy(bad));
        }
        let mut long = b"\\\\.\\pipe\\".to_vec();
        long.extend(std::iter::repeat_n(b'a', 300));
        assert!(read(&long).is_err(), "longer than a pipe name can be");
        std::fs::remove_file(&file).unwrap();
        assert_eq!(read_pipe_name(&file).unwrap(), None, "no file");
    }
}
