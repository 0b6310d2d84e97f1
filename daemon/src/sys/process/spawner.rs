//! The spawner (Linux): a small helper process that starts the daemon's
//! children, so that starting one costs the same at 10 000 live children
//! as at none.
//!
//! Why a helper: a `fork`/`posix_spawn` from the daemon copies the
//! daemon's descriptor table into the child and the `exec` then walks it
//! closing every close-on-exec entry, four per live child (its three pipes
//! and its pidfd), and a plain `fork` also copies the page tables of a
//! heap that grows with the children. Profiled at 1 000 live children
//! (`docs/PERFORMANCE.md`, "Spawn cost"), those were most of a spawn. The
//! helper holds five descriptors and a few MiB, so its clone and the
//! child's exec cost a constant.
//!
//! The child must still be the *daemon's* child: its exit is observed
//! with `waitid(WNOWAIT)` and its zombie pins its group id until the
//! supervisor reaps it ([`super`]). The helper clones with `CLONE_PARENT`,
//! which makes the new process a child of the helper's parent, the
//! daemon.
//!
//! The exchange, over a socket pair (the helper's end is its stdin), one
//! spawn at a time under a lock:
//!
//! - request: an 8-byte header (body length, flags) carrying the child's
//!   ends of its three pipes (`SCM_RIGHTS`; the daemon made the pipes, so
//!   running out of descriptors fails there, as a direct spawn would),
//!   then the body: the program, the working directory, the name of the
//!   stamp variable, the argv and the environment entries;
//! - the child: its own group (`setpgid(0, 0)`), the pipes as 0, 1 and 2,
//!   `chdir`, an empty signal mask and SIGPIPE at its default (what Rust's
//!   `Command` does), then with the stamp flag `NAME=<pid>:<start ticks>`
//!   appended to the environment (its own identity, as the exec-child
//!   trampoline stamps it), and `execve`;
//! - reply: the child's pid and an errno (0: the program runs; else the
//!   child failed before or at the exec and exits at once, left for the
//!   daemon to reap; a pid of 0: the clone failed). An exec still pending
//!   after `EXEC_REPORT_WAIT_MS` counts as started (`execreport.rs`).
//!
//! **Bound:** one helper per daemon, five descriptors while idle and three
//! more during a spawn; it exits when the daemon's end closes, and the
//! daemon kills and reaps it at shutdown ([`stop`]), so it is never left
//! for init. Spawns are serialized through it (each is a clone and an
//! exec, ~1 ms). If it cannot start, or dies, the daemon starts children
//! itself as before.

use std::ffi::CString;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

use super::{HelperSpawn, SpawnRequest as Request, Spawned};

/// What the daemon executes to start the helper.
const SELF_EXE: &str = "/proc/self/exe";
/// Request flag: append the stamp entry.
const STAMP: u32 = 1;
/// Exit status of a child whose exec failed.
const EXEC_FAILED: i32 = 127;
/// The largest request body accepted (the daemon's own request lines are
/// capped at 1 MiB; a child's argv and environment stay under the
/// kernel's exec limit).
const MAX_BODY: usize = 64 << 20;
/// What the helper writes once it serves.
const READY: [u8; 1] = *b"R";
/// How long a new helper may take to say so.
const READY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// Times the daemon starts a new helper after one died.
const RESTARTS: u32 = 3;

/// The daemon's side: the connection to the helper, while it works.
struct Helper {
    conn: UnixStream,
    process: std::process::Child,
}

struct State {
    helper: Option<Helper>,
    /// Helpers started so far (the first one and restarts).
    started: u32,
}

static STATE: Mutex<State> = Mutex::new(State {
    helper: None,
    started: 0,
});

/// Starts a child through the helper (see [`HelperSpawn`]).
pub(crate) fn spawn(req: &Request<'_>) -> HelperSpawn {
    let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
    if state.helper.is_none() && state.started > RESTARTS {
        return HelperSpawn::NoHelper(None);
    }
    // The pipes are made here: a daemon out of descriptors fails the
    // spawn as a direct one would, before anything starts.
    let pipes = match child_pipes() {
        Ok(p) => p,
        Err(e) => return HelperSpawn::Failed(e),
    };
    let ((in_child, in_ours), (out_ours, out_child), (err_ours, err_child)) = pipes;
    let mut lost = None;
    // A helper found dead when the request goes out started nothing: the
    // spawn is tried once more, on a new one.
    let reply = loop {
        if state.helper.is_none() {
            if state.started > RESTARTS {
                return HelperSpawn::NoHelper(lost);
            }
            state.started += 1;
            match start_helper() {
                Ok(helper) => state.helper = Some(helper),
                Err(e) => {
                    state.started = RESTARTS + 1;
                    return HelperSpawn::NoHelper(Some(format!("cannot start the spawner ({e})")));
                }
            }
        }
        let Some(helper) = state.helper.as_mut() else {
            return HelperSpawn::NoHelper(lost);
        };
        if let Err(e) = send_request(&helper.conn, req, [&in_child, &out_child, &err_child]) {
            lost = Some(lose_helper(&mut state, &e));
            continue;
        }
        let mut reply = [0u8; 8];
        if let Err(e) = helper.conn.read_exact(&mut reply) {
            // The request went out: a child may exist that nobody will
            // know, so the spawn is not tried again.
            let why = lose_helper(&mut state, &e);
            return HelperSpawn::Failed(io::Error::other(why));
        }
        break reply;
    };
    drop((in_child, out_child, err_child));
    drop(state);
    let pid = i32::from_le_bytes([reply[0], reply[1], reply[2], reply[3]]);
    let errno = i32::from_le_bytes([reply[4], reply[5], reply[6], reply[7]]);
    if errno != 0 {
        if pid > 0 {
            // The child exits right after its report: reap it.
            let mut status = 0;
            // SAFETY: waitpid on our own child, writing into `status`.
            while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
                && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
            {}
        }
        return HelperSpawn::Failed(io::Error::from_raw_os_error(errno));
    }
    HelperSpawn::Spawned(Spawned {
        pid,
        stdin: in_ours,
        stdout: out_ours,
        stderr: err_ours,
    })
}

/// Ends the helper at the daemon's shutdown, and keeps a new one from
/// starting: a later spawn (none is expected) starts its child directly.
/// The helper is killed and reaped here, so the daemon never leaves it
/// behind as an orphan for init to reap. Its children are the daemon's
/// own (`CLONE_PARENT`), so they are not touched.
pub(crate) fn stop() {
    let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
    state.started = RESTARTS + 1;
    if let Some(mut helper) = state.helper.take() {
        drop(helper.conn);
        let _ = helper.process.kill();
        let _ = helper.process.wait();
    }
}

/// Drops a helper that failed, reaping it; what to log.
fn lose_helper(state: &mut State, why: &io::Error) -> String {
    if let Some(mut helper) = state.helper.take() {
        drop(helper.conn);
        let _ = helper.process.kill();
        let _ = helper.process.wait();
    }
    format!("the spawner stopped ({why})")
}

/// The three pipes of a child: (child's stdin end, ours), (ours, child's
/// stdout end), (ours, child's stderr end); all close-on-exec.
#[allow(clippy::type_complexity)]
fn child_pipes() -> io::Result<((OwnedFd, OwnedFd), (OwnedFd, OwnedFd), (OwnedFd, OwnedFd))> {
    Ok((
        crate::sys::os::pipe_cloexec()?,
        crate::sys::os::pipe_cloexec()?,
        crate::sys::os::pipe_cloexec()?,
    ))
}

/// Starts `/proc/self/exe --spawner` with its end of a socket pair as
/// stdin (and nothing else: its stdout and stderr are `/dev/null`, so
/// the descriptors it receives never land on 0, 1 or 2), in a group of
/// its own (a terminal's signals are the daemon's to handle).
fn start_helper() -> io::Result<Helper> {
    use std::os::unix::process::CommandExt;
    let (ours, theirs) = UnixStream::pair()?;
    let process = std::process::Command::new(SELF_EXE)
        .arg(super::SPAWNER_FLAG)
        .stdin(std::process::Stdio::from(OwnedFd::from(theirs)))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .env_clear()
        .process_group(0)
        .spawn()?;
    let mut helper = Helper { conn: ours, process };
    // It says it serves before the first request goes out: an executable
    // that is not this daemon's any more, or does not know the flag,
    // costs one fallback, never a request lost in flight.
    let mut ready = [0u8; 1];
    let said = helper
        .conn
        .set_read_timeout(Some(READY_WAIT))
        .and_then(|()| helper.conn.read_exact(&mut ready))
        .and_then(|()| helper.conn.set_read_timeout(None));
    match said {
        Ok(()) if ready == READY => Ok(helper),
        failed => {
            let _ = helper.process.kill();
            let _ = helper.process.wait();
            Err(failed.err().unwrap_or_else(|| io::Error::other("not a spawner")))
        }
    }
}

fn put_str(body: &mut Vec<u8>, s: &[u8]) {
    body.extend_from_slice(&(s.len() as u32).to_le_bytes());
    body.extend_from_slice(s);
}

/// Writes one request: the header with the three descriptors, then the
/// body.
fn send_request(conn: &UnixStream, req: &Request<'_>, fds: [&OwnedFd; 3]) -> io::Result<()> {
    let mut body = Vec::new();
    put_str(&mut body, req.program.as_bytes());
    put_str(&mut body, req.cwd.as_bytes());
    put_str(&mut body, req.stamp.unwrap_or_default().as_bytes());
    body.extend_from_slice(&(req.argv.len() as u32).to_le_bytes());
    for a in req.argv {
        put_str(&mut body, a.as_bytes());
    }
    body.extend_from_slice(&(req.env.len() as u32).to_le_bytes());
    for e in req.env {
        put_str(&mut body, e.as_bytes());
    }
    let flags = if req.stamp.is_some() { STAMP } else { 0 };
    let mut header = [0u8; 8];
    header[..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
    header[4..].copy_from_slice(&flags.to_le_bytes());
    send_with_fds(conn.as_raw_fd(), &header, &fds.map(AsRawFd::as_raw_fd))?;
    (&*conn).write_all(&body)
}

/// `sendmsg` of `data` (all of it: a short header is an error) with `fds`.
fn send_with_fds(sock: RawFd, data: &[u8], fds: &[RawFd; 3]) -> io::Result<()> {
    let fd_bytes = std::mem::size_of_val(fds) as u32;
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: a zeroed msghdr is valid; the pointers set below outlive
    // the sendmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer holds one header of CMSG_SPACE(fd_bytes)
    // bytes, so the first header and its data fit.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), fd_bytes as usize);
    }
    loop {
        // SAFETY: msg points at live buffers.
        let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
        if n == data.len() as isize {
            return Ok(());
        }
        if n >= 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short request header"));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

// ---------------------------------------------------------------- helper side

/// Spawner mode: says it serves, then serves requests on stdin until the
/// daemon's end closes. Returns the exit status.
pub(crate) fn run() -> i32 {
    // SAFETY: a write of one byte from a live buffer to our stdin socket.
    if unsafe { libc::write(0, READY.as_ptr().cast(), 1) } != 1 {
        return 1;
    }
    loop {
        match serve_one() {
            Ok(true) => {}
            Ok(false) => return 0,
            Err(_) => return 1,
        }
    }
}

/// A request as the helper decoded it, ready for `execve`.
struct Decoded {
    program: CString,
    cwd: Option<CString>,
    stamp: Option<Vec<u8>>,
    argv: Vec<CString>,
    env: Vec<CString>,
}

/// Serves one request; false at the end of the daemon's stream.
fn serve_one() -> io::Result<bool> {
    let mut header = [0u8; 8];
    let Some(fds) = recv_header(0, &mut header)? else {
        return Ok(false);
    };
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let flags = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if len > MAX_BODY {
        return Err(io::Error::from_raw_os_error(libc::E2BIG));
    }
    let mut body = vec![0u8; len];
    // SAFETY: fd 0 is the daemon's socket, which this process owns; the
    // File is forgotten below, so it is not closed.
    let mut stdin = unsafe { std::fs::File::from_raw_fd(0) };
    let read = stdin.read_exact(&mut body);
    std::mem::forget(stdin);
    read?;
    let (pid, errno) = match (fds, decode(&body, flags)) {
        (Some(fds), Some(req)) => start_child(&req, &fds),
        _ => (0, libc::EINVAL),
    };
    let mut reply = [0u8; 8];
    reply[..4].copy_from_slice(&pid.to_le_bytes());
    reply[4..].copy_from_slice(&errno.to_le_bytes());
    // SAFETY: as for the body above.
    let mut out = unsafe { std::fs::File::from_raw_fd(0) };
    let wrote = out.write_all(&reply);
    std::mem::forget(out);
    wrote?;
    Ok(true)
}

/// Reads the 8-byte header and the three descriptors that came with it.
/// `Ok(None)` at the end of the stream; `Ok(Some(None))` for a header
/// that came without exactly three descriptors.
#[allow(clippy::type_complexity)]
fn recv_header(sock: RawFd, header: &mut [u8; 8]) -> io::Result<Option<Option<[OwnedFd; 3]>>> {
    let fd_bytes = (3 * std::mem::size_of::<RawFd>()) as u32;
    // SAFETY: a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: header.as_mut_ptr().cast(),
        iov_len: header.len(),
    };
    // SAFETY: a zeroed msghdr is valid; the buffers outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let n = loop {
        // SAFETY: msg points at live buffers; received descriptors are
        // close-on-exec at once.
        let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC | libc::MSG_WAITALL) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel wrote; each
    // SCM_RIGHTS payload is an array of descriptors now ours.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if n == 0 {
        return Ok(None);
    }
    if n != header.len() {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short header"));
    }
    Ok(Some(<[OwnedFd; 3]>::try_from(fds).ok()))
}

/// A little-endian `u32` at `*at`, moving past it.
fn take_u32(body: &[u8], at: &mut usize) -> Option<usize> {
    let b = body.get(*at..at.checked_add(4)?)?;
    *at += 4;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// A length-prefixed string at `*at` as a C string (`None` holding a NUL).
fn take_str(body: &[u8], at: &mut usize) -> Option<CString> {
    let len = take_u32(body, at)?;
    let s = body.get(*at..at.checked_add(len)?)?;
    *at += len;
    CString::new(s).ok()
}

fn decode(body: &[u8], flags: u32) -> Option<Decoded> {
    let at = &mut 0usize;
    let program = take_str(body, at)?;
    let cwd = take_str(body, at)?;
    let stamp = take_str(body, at)?;
    let argc = take_u32(body, at)?;
    let argv = (0..argc).map(|_| take_str(body, at)).collect::<Option<Vec<_>>>()?;
    let envc = take_u32(body, at)?;
    let env = (0..envc).map(|_| take_str(body, at)).collect::<Option<Vec<_>>>()?;
    Some(Decoded {
        program,
        cwd: (!cwd.is_empty()).then_some(cwd),
        stamp: (flags & STAMP != 0 && !stamp.is_empty()).then(|| stamp.into_bytes()),
        argv,
        env,
    })
}

/// Clones the child (a child of the daemon) and waits for its exec's
/// verdict: `(pid, errno)`.
fn start_child(req: &Decoded, fds: &[OwnedFd; 3]) -> (i32, i32) {
    let mut argv: Vec<*const libc::c_char> = req.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    // One slot more for the stamp, filled in by the child.
    let mut envp: Vec<*const libc::c_char> = req.env.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    envp.push(std::ptr::null());
    let stamp_slot = req.env.len();
    let (report_read, report_write) = match super::exec_report_pipe() {
        Ok(p) => p,
        Err(e) => return (0, e.raw_os_error().unwrap_or(libc::EIO)),
    };
    let raw = [fds[0].as_raw_fd(), fds[1].as_raw_fd(), fds[2].as_raw_fd()];
    // SAFETY: a fork-like clone (no shared memory, no new stack) of this
    // single-threaded process; the child only makes system calls on
    // memory prepared before it and never returns.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::CLONE_PARENT as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if pid < 0 {
        return (0, io::Error::last_os_error().raw_os_error().unwrap_or(libc::EAGAIN));
    }
    if pid == 0 {
        // SAFETY: the child, as above.
        unsafe { child(req, raw, &mut envp, stamp_slot, &argv, report_write.as_raw_fd()) }
    }
    let pid = pid as i32;
    drop(report_write);
    (pid, read_verdict(&report_read))
}

/// The child, between the clone and the exec. Never returns.
///
/// # Safety
/// Only in the child of [`start_child`]'s clone.
unsafe fn child(
    req: &Decoded,
    fds: [RawFd; 3],
    envp: &mut [*const libc::c_char],
    stamp_slot: usize,
    argv: &[*const libc::c_char],
    report: RawFd,
) -> ! {
    let fail = |report: RawFd| -> ! {
        super::write_exec_report(report, *libc::__errno_location());
        libc::_exit(EXEC_FAILED)
    };
    if libc::setpgid(0, 0) != 0 {
        fail(report);
    }
    for (target, fd) in fds.into_iter().enumerate() {
        // dup2 onto itself would keep close-on-exec (not reached: the
        // helper's own 0, 1 and 2 are open, so received ones are above).
        let done = if fd == target as RawFd {
            libc::fcntl(fd, libc::F_SETFD, 0)
        } else {
            libc::dup2(fd, target as RawFd)
        };
        if done < 0 {
            fail(report);
        }
    }
    if let Some(cwd) = &req.cwd {
        if libc::chdir(cwd.as_ptr()) != 0 {
            fail(report);
        }
    }
    let mut set: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut set);
    libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    let mut stamp_buf = [0u8; 128];
    if let Some(name) = &req.stamp {
        if let Some(len) = write_stamp(&mut stamp_buf, name) {
            envp[stamp_slot] = stamp_buf[..len].as_ptr().cast();
        }
    }
    libc::execve(req.program.as_ptr(), argv.as_ptr(), envp.as_ptr());
    fail(report)
}

/// Writes `NAME=<pid>:<start ticks>\0` into `buf` (no allocation: this
/// runs in the child); its length with the NUL, or `None` when the start
/// time cannot be read (no stamp then, as the trampoline does).
fn write_stamp(buf: &mut [u8; 128], name: &[u8]) -> Option<usize> {
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::syscall(libc::SYS_getpid) } as u64;
    let mut stat = [0u8; 1024];
    // SAFETY: open/read/close on a stack buffer.
    let n = unsafe {
        let fd = libc::open(c"/proc/self/stat".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, stat.as_mut_ptr().cast(), stat.len());
        libc::close(fd);
        n
    };
    let stat = stat.get(..usize::try_from(n).ok()?)?;
    // "pid (comm) state ppid …": the start time is field 22, the 20th
    // after the comm's closing parenthesis.
    let close = stat.iter().rposition(|&b| b == b')')?;
    let start = stat.get(close + 2..)?.split(|&b| b == b' ').nth(19)?;
    if start.is_empty() || !start.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut digits = [0u8; 20];
    let mut len = 0;
    let mut w = |bytes: &[u8], len: &mut usize| -> Option<()> {
        buf.get_mut(*len..*len + bytes.len())?.copy_from_slice(bytes);
        *len += bytes.len();
        Some(())
    };
    w(name, &mut len)?;
    w(b"=", &mut len)?;
    w(decimal(pid, &mut digits), &mut len)?;
    w(b":", &mut len)?;
    w(start, &mut len)?;
    w(b"\0", &mut len)?;
    Some(len)
}

fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[at..];
        }
    }
}

/// The child's verdict: 0 once its exec succeeded (the report pipe closed
/// empty) or the wait ran out, else the errno it reported.
fn read_verdict(read: &OwnedFd) -> i32 {
    super::read_exec_report(read).unwrap_or(0)
}
