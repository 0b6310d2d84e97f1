//! AF_UNIX stream sockets on Windows (10 1803 and later), through
//! Winsock: the listener `-socket` names, as the reference serves it.
//! std and tokio have no Unix sockets on Windows, so the listener accepts
//! on a blocking thread (`serve/windows/socket.rs`) and each accepted
//! socket is handed to tokio as a `TcpStream`: Winsock reads, writes and
//! polls an AF_UNIX socket exactly as a TCP one.
//!
//! Where AF_UNIX is missing (Wine, Windows before 1803) `socket` fails
//! with `WSAEAFNOSUPPORT`, which [`UnixListener::bind`] returns as it is.

use std::io;
use std::os::windows::io::{AsRawSocket, FromRawSocket};
use std::path::Path;
use windows_sys::Win32::Networking::WinSock::{
    accept, bind, closesocket, connect, listen, recv, socket, WSAGetLastError, WSAStartup, AF_UNIX, INVALID_SOCKET,
    MSG_PEEK, SOCKADDR, SOCKADDR_UN, SOCKET, SOCKET_ERROR, SOCK_STREAM, SOMAXCONN, WSADATA,
};

/// Starts Winsock once per process (std does it lazily for its own
/// sockets; these calls come first).
fn startup() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        // SAFETY: an all-zero WSADATA is a valid out-buffer.
        let mut data: WSADATA = unsafe { std::mem::zeroed() };
        // SAFETY: `data` is a valid out-pointer; 2.2 is the current version.
        unsafe { WSAStartup(0x202, &mut data) };
    });
}

fn last_error() -> io::Error {
    // SAFETY: reads the calling thread's Winsock error.
    io::Error::from_raw_os_error(unsafe { WSAGetLastError() })
}

/// The address of `path`: its UTF-8 bytes in `sun_path`, NUL-terminated.
fn address(path: &Path) -> io::Result<SOCKADDR_UN> {
    let bytes = path
        .to_str()
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?
        .as_bytes();
    let mut addr = SOCKADDR_UN {
        sun_family: AF_UNIX,
        ..Default::default()
    };
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    for (slot, byte) in addr.sun_path.iter_mut().zip(bytes) {
        *slot = *byte as i8;
    }
    Ok(addr)
}

/// A socket, closed on drop.
struct Socket(SOCKET);

impl Socket {
    fn new() -> io::Result<Socket> {
        startup();
        // SAFETY: plain call; INVALID_SOCKET means failure.
        let s = unsafe { socket(i32::from(AF_UNIX), SOCK_STREAM, 0) };
        if s == INVALID_SOCKET {
            return Err(last_error());
        }
        Ok(Socket(s))
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // SAFETY: closes a socket this value owns, once.
        unsafe { closesocket(self.0) };
    }
}

/// A listening AF_UNIX socket.
pub(crate) struct UnixListener(Socket);

impl UnixListener {
    /// Creates, binds and listens on `path` (the file must not exist).
    pub(crate) fn bind(path: &Path) -> io::Result<UnixListener> {
        let addr = address(path)?;
        let s = Socket::new()?;
        let len = std::mem::size_of::<SOCKADDR_UN>() as i32;
        // SAFETY: `addr` is a valid SOCKADDR_UN of `len` bytes.
        if unsafe { bind(s.0, (&addr as *const SOCKADDR_UN).cast::<SOCKADDR>(), len) } == SOCKET_ERROR {
            return Err(last_error());
        }
        // SAFETY: plain call on the bound socket.
        if unsafe { listen(s.0, SOMAXCONN as i32) } == SOCKET_ERROR {
            return Err(last_error());
        }
        Ok(UnixListener(s))
    }

    /// Waits for the next connection (blocking) and returns it as a
    /// std `TcpStream`, which Winsock serves for any stream socket.
    pub(crate) fn accept(&self) -> io::Result<std::net::TcpStream> {
        // SAFETY: null address pointers are allowed: the peer's address
        // is not asked for.
        let s = unsafe { accept(self.0 .0, std::ptr::null_mut(), std::ptr::null_mut()) };
        if s == INVALID_SOCKET {
            return Err(last_error());
        }
        // SAFETY: `s` is a fresh socket owned by nobody else.
        Ok(unsafe { std::net::TcpStream::from_raw_socket(s as u64) })
    }
}

/// Whether something listens at `path` (a connection is made and closed).
pub(crate) fn someone_listens(path: &Path) -> bool {
    let Ok(addr) = address(path) else {
        return false;
    };
    let Ok(s) = Socket::new() else {
        return false;
    };
    let len = std::mem::size_of::<SOCKADDR_UN>() as i32;
    // SAFETY: `addr` is a valid SOCKADDR_UN of `len` bytes.
    unsafe { connect(s.0, (&addr as *const SOCKADDR_UN).cast::<SOCKADDR>(), len) != SOCKET_ERROR }
}

/// Whether the connected (non-blocking) socket has a whole line in its
/// first `head.len()` bytes, without taking them (`MSG_PEEK`).
pub(crate) fn has_a_line_waiting(stream: &impl AsRawSocket, head: &mut [u8]) -> bool {
    let len = i32::try_from(head.len()).unwrap_or(i32::MAX);
    // SAFETY: recv writes at most `len` bytes into `head`.
    let n = unsafe { recv(stream.as_raw_socket() as SOCKET, head.as_mut_ptr(), len, MSG_PEEK) };
    usize::try_from(n).is_ok_and(|n| head[..n.min(head.len())].contains(&b'\n'))
}
