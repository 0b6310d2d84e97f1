//! The Windows half of self-daemonizing for `-serve`: the launcher
//! re-executes its own executable detached from its console
//! (`DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP`), as the reference's
//! `detach_windows.go` does, with the sentinel [`SENTINEL`] set and two
//! anonymous pipes as the child's standard handles:
//!
//! - **stdin, the token**: the launcher writes the token and closes it, so
//!   the token never touches argv or the environment (nor disk, with
//!   `-token-fd 0`).
//! - **stdout, the report**: the child writes `ready <instance id>` once
//!   it listens (or the error line, before it, notices for the operator),
//!   then closes it. The launcher reads it to EOF, bounded by
//!   [`READY_TIMEOUT`], and prints the banner (exit 0) or the error
//!   (exit 1), as the Unix launcher does.
//!
//! The child's stderr is the launcher's when that is a file (clauster
//! hands its `daemon.log`), else `remote-server.log` beside the socket,
//! opened for append through `safedir` and created owner-only
//! (`rundir::daemonlog`; none when the socket's directory is not safe),
//! which the daemon then caps and rotates (told so by
//! `REMORA_DAEMON_LOG_CAPPED`, as on Unix).
//! It inherits no other handle of the launcher's.

use crate::launch::handoff::{BannerStyle, MAX_TOKEN, READY};
pub(crate) use crate::launch::handoff::{CHILD_MARKER, SENTINEL};
use std::io::{self, Read, Write};
use std::os::windows::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use windows_sys::Win32::System::Threading::{CREATE_NEW_PROCESS_GROUP, DETACHED_PROCESS};

/// How long the launcher waits for the child to report.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads and removes the sentinel. Call first thing, while the process
/// is single-threaded. Returns whether this process is the detached child.
pub(crate) fn take_sentinel() -> bool {
    let value = std::env::var_os(SENTINEL);
    std::env::remove_var(SENTINEL);
    let child = value.is_some_and(|v| v == "1");
    if child {
        use crate::rundir::daemonlog::{CAP, CAPPED_ENV, TEST_CAP_ENV};
        let test_cap = std::env::var(TEST_CAP_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|cap| *cap > 0);
        std::env::remove_var(TEST_CAP_ENV);
        if std::env::var_os(CAPPED_ENV).is_some() {
            std::env::remove_var(CAPPED_ENV);
            // stderr is the launcher's `remote-server.log`.
            LOG_CAP.store(test_cap.unwrap_or(CAP), std::sync::atomic::Ordering::Relaxed);
        }
    }
    child
}

/// The cap on `remote-server.log` the launcher asked for (0: its stderr is
/// not that log), applied by [`cap_log`].
static LOG_CAP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Once this daemon serves `socket`: caps its `remote-server.log` and arms
/// its rotation (`rundir::daemonlog`). Not before: with no run-dir lock on
/// Windows, a second daemon whose socket is taken appends its few lines
/// to the log the live daemon writes (D21) and exits, and must not rotate
/// that log from under it.
pub(crate) fn cap_log(socket: &Path) {
    let cap = LOG_CAP.load(std::sync::atomic::Ordering::Relaxed);
    if cap > 0 {
        crate::base::logging::cap_stderr(cap);
        crate::rundir::daemonlog::arm_rotation(socket);
    }
}

/// Launcher side: starts the detached daemon, hands it `token`, and waits
/// for its verdict. Returns the launcher's exit code.
pub(crate) fn launch(socket: &Path, token: &[u8], style: BannerStyle) -> i32 {
    match spawn_and_wait(socket, token) {
        Ok((pid, mut report)) => {
            crate::launch::handoff::print_notices(&mut report);
            if let Some(instance) = report.strip_prefix(READY) {
                let instance = String::from_utf8_lossy(instance);
                let mut out = io::stdout().lock();
                let _ = writeln!(out, "{}", crate::launch::handoff::banner(style, socket, pid, &instance));
                let _ = out.flush();
                return 0;
            }
            let mut err = io::stderr().lock();
            if report.is_empty() {
                let _ = writeln!(err, "remora: daemon exited before it was ready");
            } else {
                let _ = err.write_all(&report);
                if !report.ends_with(b"\n") {
                    let _ = err.write_all(b"\n");
                }
            }
            1
        }
        Err(e) => {
            eprintln!("remora: daemonize: {}", crate::base::goerr::io_text(&e));
            1
        }
    }
}

/// Whether the launcher's stderr is a file on disk (an operator's or a
/// client's log), which the daemon then keeps.
fn stderr_is_file() -> bool {
    use windows_sys::Win32::Storage::FileSystem::{GetFileType, FILE_TYPE_DISK};
    use windows_sys::Win32::System::Console::{GetStdHandle, STD_ERROR_HANDLE};
    // SAFETY: plain calls; GetFileType accepts any handle value.
    unsafe { GetFileType(GetStdHandle(STD_ERROR_HANDLE)) == FILE_TYPE_DISK }
}

/// Makes the launcher's own standard handles non-inheritable. Windows
/// hands a child every inheritable handle, not only its stdio, and a
/// daemon holding the launcher's stdout would keep a driver reading it
/// (`$(remora -serve …)`, an SSH session) from ever seeing EOF. std
/// passes the child its stdio as fresh inheritable duplicates, so this
/// takes nothing from it.
fn keep_own_handles() {
    use windows_sys::Win32::Foundation::{SetHandleInformation, HANDLE_FLAG_INHERIT};
    use windows_sys::Win32::System::Console::{GetStdHandle, STD_ERROR_HANDLE, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE};
    for which in [STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, STD_ERROR_HANDLE] {
        // SAFETY: plain calls; an invalid or null handle only makes
        // SetHandleInformation fail, which changes nothing.
        unsafe { SetHandleInformation(GetStdHandle(which), HANDLE_FLAG_INHERIT, 0) };
    }
}

fn spawn_and_wait(socket: &Path, token: &[u8]) -> io::Result<(u32, Vec<u8>)> {
    keep_own_handles();
    let log = (!stderr_is_file())
        .then(|| crate::rundir::daemonlog::open_for_launch(socket))
        .flatten();
    let capped = log.is_some();
    let stderr = match log {
        Some(file) => Stdio::from(file),
        None if stderr_is_file() => Stdio::inherit(),
        None => Stdio::null(),
    };
    let mut cmd = Command::new(crate::sys::os::own_executable());
    cmd.args(std::env::args_os().skip(1))
        .env(SENTINEL, "1")
        .env(CHILD_MARKER, "1")
        .env_remove(crate::rundir::daemonlog::CAPPED_ENV)
        .env_remove("CLAUDE_RPC_TOKEN")
        .creation_flags(DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr);
    if capped {
        // The daemon caps and rotates its own log, not an operator's file.
        cmd.env(crate::rundir::daemonlog::CAPPED_ENV, "1");
    }
    let mut child = cmd.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        // A child that died early closed its end: its report says why.
        let _ = stdin.write_all(token);
    }
    let Some(mut stdout) = child.stdout.take() else {
        return Err(io::Error::other("no report pipe"));
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut report = Vec::new();
        let read = (&mut stdout).take(64 * 1024).read_to_end(&mut report);
        let _ = tx.send(read.map(|_| report));
    });
    let report = rx.recv_timeout(READY_TIMEOUT).map_err(|_| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("daemon did not report readiness within {}s", READY_TIMEOUT.as_secs()),
        )
    })??;
    Ok((child.id(), report))
}

/// The child's way to answer the launcher, exactly once: its stdout.
pub(crate) struct Readiness {
    pipe: Option<std::fs::File>,
}

impl Readiness {
    /// Listening: the launcher may print the banner, naming `instance`.
    pub(crate) fn ready(mut self, instance: &str) {
        let mut bytes = READY.to_vec();
        bytes.extend_from_slice(instance.as_bytes());
        self.send(&bytes);
    }

    /// Start-up failed: the launcher prints `line` and exits 1.
    pub(crate) fn fail(mut self, line: &str) {
        self.send(line.as_bytes());
    }

    fn send(&mut self, bytes: &[u8]) {
        if let Some(mut pipe) = self.pipe.take() {
            let _ = pipe.write_all(bytes);
        }
    }
}

/// Takes a standard handle away from std (it is set to none, so a later
/// print goes nowhere) as a file this process owns.
fn take_std_handle(which: windows_sys::Win32::System::Console::STD_HANDLE) -> Option<std::fs::File> {
    use std::os::windows::io::FromRawHandle;
    use windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE;
    use windows_sys::Win32::System::Console::{GetStdHandle, SetStdHandle};
    // SAFETY: plain calls on the process's standard handle table.
    let handle = unsafe { GetStdHandle(which) };
    if handle.is_null() || handle == INVALID_HANDLE_VALUE {
        return None;
    }
    // SAFETY: as above; the handle now belongs to the file made below.
    unsafe { SetStdHandle(which, std::ptr::null_mut()) };
    // SAFETY: `handle` is open and nothing else in this process uses it.
    Some(unsafe { std::fs::File::from_raw_handle(handle) })
}

/// Child side, first step: takes the token from stdin (to EOF) and the
/// report pipe (stdout), so neither stays open in the daemon.
///
/// `Err(Some(line))`: there is nobody to report to, print `line`;
/// `Err(None)`: the failure was already reported to the launcher.
pub(crate) fn adopt_pipes() -> Result<(Vec<u8>, Readiness), Option<String>> {
    use windows_sys::Win32::System::Console::{STD_INPUT_HANDLE, STD_OUTPUT_HANDLE};
    let (Some(token_pipe), Some(report)) = (take_std_handle(STD_INPUT_HANDLE), take_std_handle(STD_OUTPUT_HANDLE))
    else {
        return Err(Some(format!(
            "remora: {SENTINEL} is internal: the daemon child was started without its pipes"
        )));
    };
    let readiness = Readiness { pipe: Some(report) };
    let mut token = Vec::new();
    match token_pipe.take(MAX_TOKEN as u64 + 1).read_to_end(&mut token) {
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
