//! Self-daemonizing for `-serve`: the launcher half and the detached-child
//! half, and the two pipes between them.
//!
//! The launcher (what the operator or driver runs) re-executes
//! `/proc/self/exe` with the same arguments, the internal sentinel
//! `REMORA_DAEMON_CHILD=1`, and two inherited pipes at fixed descriptors:
//!
//! - fd 3, **token pipe**: the launcher writes the auth token and closes it.
//!   The token therefore never touches disk, argv or the environment, even
//!   when it came from `-token-fd`.
//! - fd 4, **readiness pipe**: the child writes `ready` once its socket is
//!   listening (and signals, metrics and the runtime are up), or the full
//!   error line (`remora: listen unix: …`) if it cannot start, then closes
//!   it. The launcher blocks on this pipe — no sleeps, no polling — and then
//!   prints the banner (exit 0) or the error (exit 1). Before its verdict
//!   the child may send notices for the operator (each [`NOTICE`], a line,
//!   `\n`), which the launcher prints on its stderr: the daemon's own log
//!   is often a file nobody watches.
//!
//! The re-executed child renames itself after its executable's file, so
//! `ps`, `top` and `pgrep -x remora` show `remora` rather than `exe`.
//!
//! The child starts in a new session (`setsid` before exec), with stdin and
//! stdout on `/dev/null` so that `$(remora -serve …)`, an SSH session or a
//! captured pipe sees EOF as soon as the launcher exits. Its stderr is the
//! launcher's only when that is a regular file (a `2>>daemon.log`), so the
//! daemon never pins a terminal or a pipe. The working directory is kept.
//! When the launcher exits the child is reparented to init or the nearest
//! subreaper.

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

pub(crate) use crate::launch::handoff::{CHILD_MARKER, SENTINEL};
/// The sentinel's value when the launcher also set [`TUNABLES`].
const TUNED: &str = "1t";
/// glibc reads its malloc tunables from this variable, at exec only.
const TUNABLES: &str = "GLIBC_TUNABLES";
/// No per-thread malloc cache in the daemon. glibc's tcache keeps up to
/// 7 freed chunks of every size class per thread, out of reach of
/// `malloc_trim`; after a burst (3,000 short-lived processes) those
/// scattered chunks pin about 1 MiB of heap pages for good. Without it the
/// daemon's RSS returns to within ~50 KiB of where it started.
const NO_TCACHE: &str = "glibc.malloc.tcache_count=0";

/// Where the child finds the token pipe.
const TOKEN_FD: RawFd = 3;
/// Where the child finds the readiness pipe.
const READY_FD: RawFd = 4;
pub(crate) use crate::launch::handoff::MAX_TOKEN;
use crate::launch::handoff::{NOTICE, READY};
/// How long the launcher waits for the child to report. Start-up is
/// milliseconds; this only bounds a wedged child.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads and removes the sentinel. Call first thing in `main`, while the
/// process is single-threaded (environment writes are not thread-safe).
/// Returns whether this process is the detached daemon child, which it
/// then names after its executable's file (`remora`, not `exe`).
pub(crate) fn take_sentinel() -> bool {
    let Some(value) = take_env(SENTINEL) else {
        return false;
    };
    if value == TUNED {
        // The launcher added the tunable for this process only: children
        // get the environment the operator gave the launcher.
        take_env(TUNABLES);
    }
    let child = value == "1" || value == TUNED;
    if child {
        crate::sys::os::name_after_executable();
        let test_cap = take_env(crate::rundir::daemonlog::TEST_CAP_ENV)
            .and_then(|v| v.to_str().and_then(|v| v.parse::<u64>().ok()))
            .filter(|cap| *cap > 0);
        if take_env(crate::rundir::daemonlog::CAPPED_ENV).is_some() {
            // stderr is the launcher's `remote-server.log`.
            crate::base::logging::cap_stderr(test_cap.unwrap_or(crate::rundir::daemonlog::CAP));
        }
    }
    child
}

/// Removes `name` from the environment, and its bytes from the initial
/// environment block (what /proc/<pid>/environ shows). Single-threaded
/// start-up only.
fn take_env(name: &str) -> Option<OsString> {
    let value = std::env::var_os(name)?;
    let original = original_env_entry(name);
    std::env::remove_var(name);
    if let Some((ptr, len)) = original {
        // `unsetenv` only drops the pointer from `environ`; the bytes stay
        // in the block the kernel set up at exec, which is what
        // /proc/<pid>/environ shows. Blank them so the internal entry is
        // gone from there too.
        // SAFETY: `ptr..ptr+len` lies inside the process's initial
        // environment block (checked against /proc/self/stat), which is
        // writable stack memory, and nothing refers to the entry any more.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
    } else {
        // glibc points `environ` at its own copy of GLIBC_TUNABLES at
        // start, leaving the original bytes in the block.
        blank_in_initial_block(name);
    }
    Some(value)
}

/// Zeroes every `name=…` entry of the initial environment block.
fn blank_in_initial_block(name: &str) {
    let Some((start, end)) = crate::sys::os::initial_env_block() else {
        return;
    };
    let prefix = format!("{name}=");
    // SAFETY: `start..end` is this process's initial environment block
    // (from /proc/self/stat), writable stack memory; callers run
    // single-threaded, and `environ` no longer points at the entry.
    let block = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    let mut at = 0;
    while at < block.len() {
        let len = block[at..].iter().position(|&b| b == 0).unwrap_or(block.len() - at);
        if block[at..at + len].starts_with(prefix.as_bytes()) {
            block[at..at + len].fill(0);
        }
        at += len + 1;
    }
}

/// The `NAME=value` bytes of `name` in the initial environment block, if
/// `environ` still points there (nothing has been set yet).
fn original_env_entry(name: &str) -> Option<(*mut u8, usize)> {
    extern "C" {
        static mut environ: *mut *mut libc::c_char;
    }
    let (start, end) = crate::sys::os::initial_env_block()?;
    let prefix = format!("{name}=");
    // SAFETY: single-threaded start-up; `environ` is a NULL-terminated
    // array of NUL-terminated strings maintained by libc.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = std::ffi::CStr::from_ptr(*entry);
            if text.to_bytes().starts_with(prefix.as_bytes()) {
                let ptr = *entry as usize;
                let len = text.to_bytes().len();
                return (ptr >= start && ptr + len <= end).then_some((ptr as *mut u8, len));
            }
            entry = entry.add(1);
        }
    }
    None
}

/// Launcher side: starts the detached daemon, hands it `token`, and waits
/// for its verdict. Returns the launcher's exit code; prints the banner
/// ([`crate::launch::handoff::banner`]) on success and the daemon's error otherwise.
pub(crate) fn launch(socket: &std::path::Path, token: &[u8], style: crate::launch::handoff::BannerStyle) -> i32 {
    match spawn_and_wait(socket, token) {
        Ok(Verdict::Ready { pid, instance }) => {
            let mut out = io::stdout().lock();
            let _ = writeln!(out, "{}", crate::launch::handoff::banner(style, socket, pid, &instance));
            let _ = out.flush();
            0
        }
        Ok(Verdict::Failed(message)) => {
            let mut err = io::stderr().lock();
            let _ = err.write_all(&message);
            if !message.ends_with(b"\n") {
                let _ = err.write_all(b"\n");
            }
            1
        }
        Err(e) => {
            eprintln!("remora: daemonize: {}", crate::base::goerr::io_text(&e));
            1
        }
    }
}

enum Verdict {
    /// Serving: the daemon's pid and instance id.
    Ready { pid: u32, instance: String },
    /// The line to print (the child's error, or why it vanished).
    Failed(Vec<u8>),
}

fn spawn_and_wait(socket: &std::path::Path, token: &[u8]) -> io::Result<Verdict> {
    let (token_r, token_w) = pipe()?;
    let (ready_r, ready_w) = pipe()?;
    // Lift the child's ends above fd 4 so that moving them onto 3 and 4 in
    // the forked child can never overwrite one with the other.
    let token_r = {
        let original = token_r;
        dup_above(&original, READY_FD + 1)?
    };
    let ready_w = {
        let original = ready_w;
        dup_above(&original, READY_FD + 1)?
    };
    // The operator's own log file wins; otherwise the daemon's log beside
    // the socket (`daemonlog`), else nowhere.
    let log = (!stderr_is_regular_file())
        .then(|| crate::rundir::daemonlog::open_for_launch(socket))
        .flatten();
    let capped = log.is_some();
    let stderr = match log {
        Some(file) => Stdio::from(file),
        None if stderr_is_regular_file() => Stdio::inherit(),
        None => Stdio::null(),
    };
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| OsString::from("remora"));
    let mut cmd = Command::new(crate::sys::os::own_executable());
    // An operator's own GLIBC_TUNABLES is left as it is (and passed on).
    let tuned = cfg!(target_env = "gnu") && std::env::var_os(TUNABLES).is_none();
    if tuned {
        cmd.env(TUNABLES, NO_TCACHE);
    }
    cmd.arg0(argv0)
        .args(args)
        .env(SENTINEL, if tuned { TUNED } else { "1" })
        // In the exec'd environment itself, so it is the daemon's own
        // environment from the start and every child inherits it.
        .env(CHILD_MARKER, "1")
        .env_remove(crate::rundir::daemonlog::CAPPED_ENV)
        // A client-side token has no business in the daemon or anything it
        // spawns; the daemon's token arrives on the pipe only.
        .env_remove("CLAUDE_RPC_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    if capped {
        cmd.env(crate::rundir::daemonlog::CAPPED_ENV, "1");
    }
    let (token_raw, ready_raw) = (token_r.as_raw_fd(), ready_w.as_raw_fd());
    // SAFETY: the closure runs between fork and exec and only makes
    // async-signal-safe system calls (setsid, dup2) on descriptors that
    // are open in the child.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            // dup2 clears close-on-exec on the target, so exactly these two
            // pipe ends survive the exec.
            if libc::dup2(token_raw, TOKEN_FD) < 0 || libc::dup2(ready_raw, READY_FD) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    // Our copies of the child's ends must go, or EOF never arrives.
    drop(token_r);
    drop(ready_w);

    let mut token_w = std::fs::File::from(token_w);
    // A child that died early closes its end: the write then fails with
    // EPIPE (Rust ignores SIGPIPE), and the readiness pipe tells why.
    let _ = token_w.write_all(token);
    drop(token_w);

    let mut report = read_report(ready_r)?;
    crate::launch::handoff::print_notices(&mut report);
    if let Some(instance) = report.strip_prefix(READY) {
        return Ok(Verdict::Ready {
            pid: child.id(),
            instance: String::from_utf8_lossy(instance).into_owned(),
        });
    }
    if !report.is_empty() {
        let _ = child.wait();
        return Ok(Verdict::Failed(report));
    }
    // The child closed the pipe without a word: it died.
    let status = child.wait()?;
    Ok(Verdict::Failed(
        format!("remora: daemon exited before it was ready ({})", go_exit_status(status)).into_bytes(),
    ))
}

/// Reads the child's report until it closes the pipe, within the timeout.
fn read_report(ready_r: OwnedFd) -> io::Result<Vec<u8>> {
    let deadline = std::time::Instant::now() + READY_TIMEOUT;
    let mut file = std::fs::File::from(ready_r);
    let mut report = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut pfd = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("daemon did not report readiness within {}s", READY_TIMEOUT.as_secs()),
            ));
        }
        match file.read(&mut buf) {
            Ok(0) => return Ok(report),
            Ok(n) => {
                report.extend_from_slice(&buf[..n]);
                if report.len() > 64 * 1024 {
                    return Ok(report);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Go's `ProcessState.String()`: `exit status 1`, `signal: killed`.
fn go_exit_status(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("signal: {}", signal_name(sig)),
        _ => status.to_string(),
    }
}

fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGKILL => "killed".into(),
        libc::SIGTERM => "terminated".into(),
        libc::SIGSEGV => "segmentation fault".into(),
        libc::SIGABRT => "aborted".into(),
        libc::SIGINT => "interrupt".into(),
        other => format!("signal {other}"),
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    crate::sys::os::pipe_cloexec()
}

/// Duplicates `fd` onto the lowest free descriptor >= `min`, close-on-exec.
fn dup_above(fd: &OwnedFd, min: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on a valid descriptor returns a new one.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `new` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

fn stderr_is_regular_file() -> bool {
    // SAFETY: fstat fills the zeroed struct or fails.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(2, &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFREG
    }
}

/// The child's way to answer the launcher, exactly once.
pub(crate) struct Readiness {
    pipe: Option<std::fs::File>,
}

impl Readiness {
    /// The socket is accepting: the launcher may print the banner, which
    /// names `instance` (`server.capabilities`' `instanceId`).
    pub(crate) fn ready(mut self, instance: &str) {
        let mut bytes = READY.to_vec();
        bytes.extend_from_slice(instance.as_bytes());
        self.send(&bytes);
    }

    /// Start-up failed: the launcher prints `line` and exits 1.
    pub(crate) fn fail(mut self, line: &str) {
        self.send(line.as_bytes());
    }

    /// One line the launcher prints on its stderr, whatever the verdict.
    pub(crate) fn notice(&mut self, line: &str) {
        if let Some(pipe) = self.pipe.as_mut() {
            let mut bytes = Vec::with_capacity(line.len() + 2);
            bytes.push(NOTICE);
            bytes.extend(line.bytes().filter(|b| *b != b'\n'));
            bytes.push(b'\n');
            let _ = pipe.write_all(&bytes);
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        if let Some(mut pipe) = self.pipe.take() {
            // If the launcher is gone there is nobody to tell.
            let _ = pipe.write_all(bytes);
        }
    }
}

/// Child side, first step: takes over the two pipes and closes every other
/// inherited descriptor above stderr (a driver's pipe or an SSH channel
/// leaked into the daemon would keep the driver waiting). Then reads the
/// token. Call while single-threaded.
///
/// `Err(Some(line))`: there is nobody to report to, print `line`;
/// `Err(None)`: the failure was already reported to the launcher.
pub(crate) fn adopt_pipes() -> Result<(Vec<u8>, Readiness), Option<String>> {
    // SAFETY: fstat only fills the zeroed struct.
    let is_pipe = |fd| unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFIFO
    };
    if !is_pipe(TOKEN_FD) || !is_pipe(READY_FD) {
        return Err(Some(format!(
            "remora: {SENTINEL} is internal: the daemon child was started without its pipes"
        )));
    }
    // SAFETY: both descriptors are open (checked above) and this process
    // takes sole ownership of them; nothing else in it refers to them.
    let (token_fd, ready_fd) = unsafe { (OwnedFd::from_raw_fd(TOKEN_FD), OwnedFd::from_raw_fd(READY_FD)) };
    for fd in [&token_fd, &ready_fd] {
        // SAFETY: setting close-on-exec on our own open descriptors, so
        // that nothing the daemon spawns inherits a pipe.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    close_inherited_above(READY_FD);
    let readiness = Readiness {
        pipe: Some(std::fs::File::from(ready_fd)),
    };
    let mut token = Vec::new();
    let read = std::fs::File::from(token_fd)
        .take(MAX_TOKEN as u64 + 1)
        .read_to_end(&mut token);
    match read {
        Ok(_) if token.len() > MAX_TOKEN => {
            readiness.fail(&format!("remora: token longer than {MAX_TOKEN} bytes"));
            Err(None)
        }
        Ok(_) => Ok((token, readiness)),
        Err(e) => {
            readiness.fail(&format!("remora: read token pipe: {}", crate::base::goerr::io_text(&e)));
            Err(None)
        }
    }
}

/// Closes descriptors above `last` that the process did not open itself.
fn close_inherited_above(last: RawFd) {
    let fds: Vec<RawFd> = crate::sys::os::open_fds().into_iter().filter(|&fd| fd > last).collect();
    // The directory's own descriptor is closed by now (its iterator was
    // consumed and dropped above), so closing it again just fails: EBADF.
    for fd in fds {
        // SAFETY: these descriptors were inherited across exec; nothing in
        // this process holds or uses them.
        unsafe { libc::close(fd) };
    }
}
