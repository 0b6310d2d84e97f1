//! The Windows half of `serve::socket`: the AF_UNIX socket `-socket`
//! names (Windows 10 1803+, through `sys::afunix`), and with
//! `-listen-pipe` the named pipe `\\.\pipe\remora-<instance id>`
//! (`sys::pipe`: owner-only DACL, remote clients rejected) whose name is
//! written to `rpc.pipe` beside the socket, where clauster's Windows
//! client reads it. The accept loop ([`crate::serve::server`]) serves
//! both as one [`Listener`].
//!
//! Where the AF_UNIX listener cannot be made (Wine, an older Windows) a
//! daemon given `-listen-pipe` serves the pipe alone and logs why; without
//! it the bind error stands, as on Unix. `rpc.pipe` is written as
//! `daemon.token` is (`rundir::tokenfile`): relative to the socket's
//! directory opened as a handle, not through a link or junction, created
//! owner-only and renamed into place (`base::safedir`). Like the Unix
//! socket file, it is only as safe as that directory: whoever can change
//! the directory could point clients at another pipe (`-stop` checks
//! that the pipe's server runs as its user before a token goes to it).
//! It is removed when the listeners are
//! dropped (the daemon stops serving), if it is still the file this
//! daemon wrote.
//!
//! An AF_UNIX socket is accepted on a blocking thread (tokio has no Unix
//! listener on Windows) and handed to the runtime as a `TcpStream`.

use crate::serve::listener::{Accepted, Listener};
use crate::sys::afunix::UnixListener;
use crate::sys::pipe::PipeListener;
use std::io;
use std::path::{Path, PathBuf};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::windows::named_pipe::NamedPipeServer;
use tokio::sync::mpsc;

/// The name of the file beside the socket that holds the pipe's name.
pub(crate) const PIPE_FILE: &str = "rpc.pipe";

/// How far a peek for a first line looks (as the Unix half).
const FIRST_LINE_PEEK: usize = 4096;

pub(crate) use crate::serve::listener::{check_socket_path_length, BindError};

/// What was bound before the runtime serves it: the AF_UNIX socket, the
/// named pipe, or both.
pub(crate) struct Bound {
    socket: Option<UnixListener>,
    pipe: Option<PipeListener>,
    /// `rpc.pipe`, once written.
    pipe_file: Option<PipeFile>,
}

/// `rpc.pipe` as written: the directory handle it was written through
/// and the file's identity, so that only this file is removed.
struct PipeFile {
    dir: crate::base::safedir::Dir,
    identity: (u64, u64),
}

/// Creates the listening AF_UNIX socket at `path`. A stale socket file
/// (nobody listens) is replaced; a live daemon's is reported in use.
pub(crate) fn bind_socket(path: &Path) -> Result<Bound, BindError> {
    let fail = |source| BindError {
        path: path.to_path_buf(),
        source,
    };
    if std::fs::symlink_metadata(path).is_ok() {
        if crate::sys::afunix::someone_listens(path) {
            const WSAEADDRINUSE: i32 = 10048;
            return Err(fail(io::Error::from_raw_os_error(WSAEADDRINUSE)));
        }
        let _ = std::fs::remove_file(path);
    }
    let socket = UnixListener::bind(path).map_err(fail)?;
    Ok(Bound {
        socket: Some(socket),
        pipe: None,
        pipe_file: None,
    })
}

impl Bound {
    /// Nothing bound yet: for a daemon that serves the pipe alone.
    pub(crate) fn without_socket() -> Bound {
        Bound {
            socket: None,
            pipe: None,
            pipe_file: None,
        }
    }

    /// Whether the AF_UNIX socket is bound.
    pub(crate) fn has_socket(&self) -> bool {
        self.socket.is_some()
    }

    /// Creates the named pipe of instance `id` and writes its name to
    /// `rpc.pipe` beside `socket` (no trailing newline, as `daemon.token`).
    /// Call inside the runtime. The error says what failed.
    pub(crate) fn add_pipe(&mut self, socket: &Path, id: &str) -> Result<(), String> {
        let name = crate::sys::pipe::pipe_name(id);
        let pipe = PipeListener::bind(&name)
            .map_err(|e| format!("listen pipe {name}: {}", crate::base::goerr::io_text(&e)))?;
        let file = pipe_file(socket);
        let shown = file.display();
        let dir =
            crate::rundir::socket_dir_abs(socket).ok_or_else(|| format!("write {shown}: no working directory"))?;
        let dir = crate::base::safedir::open_dir_nofollow(&dir)
            .map_err(|e| format!("write {shown}: {}", crate::base::goerr::io_text(&e)))?;
        let identity = crate::base::safedir::replace_file_in(&dir, PIPE_FILE, name.as_bytes())
            .map_err(|e| format!("write {shown}: {}", crate::base::goerr::io_text(&e)))?;
        self.pipe = Some(pipe);
        self.pipe_file = Some(PipeFile { dir, identity });
        Ok(())
    }
}

/// `rpc.pipe` beside `socket`.
pub(crate) fn pipe_file(socket: &Path) -> PathBuf {
    socket.parent().unwrap_or(Path::new(".")).join(PIPE_FILE)
}

/// The bound listeners, registered with the runtime.
pub(crate) struct Listeners {
    /// Sockets the blocking accept thread took.
    socket: Option<mpsc::Receiver<io::Result<std::net::TcpStream>>>,
    pipe: Option<PipeListener>,
    pipe_file: Option<PipeFile>,
}

/// Starts serving what was bound: the socket's accept thread, the pipe.
pub(crate) fn listen(bound: Bound) -> io::Result<Listeners> {
    let socket = bound.socket.map(|listener| {
        let (tx, rx) = mpsc::channel(16);
        // The thread ends when the runtime's receiver is gone and the
        // next accept returns, or with the process.
        std::thread::spawn(move || loop {
            let accepted = listener.accept();
            if tx.blocking_send(accepted).is_err() {
                return;
            }
        });
        rx
    });
    Ok(Listeners {
        socket,
        pipe: bound.pipe,
        pipe_file: bound.pipe_file,
    })
}

impl Drop for Listeners {
    /// Removes `rpc.pipe` if it is still the file this daemon wrote (a
    /// successor may have written its own), through the directory handle
    /// it was written by.
    fn drop(&mut self) {
        let Some(file) = &self.pipe_file else {
            return;
        };
        let name = PIPE_FILE.as_bytes();
        if crate::base::safedir::entry_identity(&file.dir, name).is_ok_and(|id| id == Some(file.identity)) {
            let _ = crate::base::safedir::unlink_in(&file.dir, name);
        }
    }
}

/// One accepted connection, from either listener.
pub(crate) enum Connection {
    Socket(tokio::net::TcpStream),
    Pipe(NamedPipeServer),
}

impl Listener for Listeners {
    type Connection = Connection;

    async fn accept(&mut self) -> io::Result<Connection> {
        let socket = async {
            match self.socket.as_mut() {
                Some(rx) => match rx.recv().await {
                    Some(accepted) => {
                        let stream = accepted?;
                        stream.set_nonblocking(true)?;
                        tokio::net::TcpStream::from_std(stream).map(Connection::Socket)
                    }
                    None => std::future::pending().await,
                },
                None => std::future::pending().await,
            }
        };
        let pipe = async {
            match self.pipe.as_mut() {
                Some(pipe) => pipe.accept().await.map(Connection::Pipe),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            accepted = socket => accepted,
            accepted = pipe => accepted,
        }
    }

    /// Not known for either: a connection is then admitted as if none
    /// waited behind it.
    fn has_connections_waiting(&self) -> bool {
        false
    }
}

impl Accepted for Connection {
    type Read = Box<dyn AsyncRead + Unpin + Send>;
    type Write = Box<dyn AsyncWrite + Unpin + Send>;

    /// The pipe client's pid; an AF_UNIX peer's is not asked for yet.
    fn peer(&self) -> Option<i32> {
        match self {
            Connection::Socket(_) => None,
            Connection::Pipe(pipe) => crate::sys::pipe::client_pid(pipe),
        }
    }

    fn has_a_line_waiting(&self) -> bool {
        let mut head = [0u8; FIRST_LINE_PEEK];
        match self {
            Connection::Socket(stream) => crate::sys::afunix::has_a_line_waiting(stream, &mut head),
            Connection::Pipe(pipe) => crate::sys::pipe::has_a_line_waiting(pipe, &mut head),
        }
    }

    fn into_halves(self) -> (Self::Read, Self::Write) {
        match self {
            Connection::Socket(stream) => {
                let (read, write) = stream.into_split();
                (Box::new(read), Box::new(write))
            }
            Connection::Pipe(pipe) => {
                let (read, write) = tokio::io::split(pipe);
                (Box::new(read), Box::new(write))
            }
        }
    }
}

/// Whether dialling `path` reaches this very process (the orphan check's
/// self-probe): not asked on Windows yet (the AF_UNIX peer's pid is not
/// read), so a socket path taken over is never confirmed as ours.
pub(crate) async fn reaches_self(_path: &Path) -> bool {
    false
}
