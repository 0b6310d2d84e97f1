//! Starting a child on Windows: `CreateProcessW` with the child created
//! suspended, put into a Job Object of its own, then resumed, so nothing
//! it starts can escape the job; three pipes whose daemon ends are
//! overlapped named-pipe servers registered with tokio.
//!
//! Why `CreateProcessW` and not `std`/`tokio::process::Command`:
//! - a suspended child must be resumed through its main thread's handle,
//!   which `Command` closes (resuming would mean enumerating the child's
//!   threads with a Toolhelp snapshot);
//! - `Command` sorts the environment block by name (it keeps the
//!   variables in a map), and the reference keeps the order it was given
//!   (claustrum `docs/UPSTREAM-TRACKING.md`, D23: `89cb6289` passes its
//!   launching block in order, then `CLAUDE_SSH_DAEMON_CHILD=1`, then the
//!   request's entries; the sorted block is claustrum's own choice). Here
//!   the block is written in exactly the caller's order;
//! - `Command`'s pipes are anonymous pipes read through tokio's blocking
//!   pool, one pool thread per read in flight; a named pipe opened
//!   overlapped is read through the I/O completion port, with no thread
//!   per child, and offers the same `readable`/`try_read` calls as the
//!   Unix pipe receiver the pumps use.
//!
//! The pipes: for each stream a named pipe `\\.\pipe\remora-child-…` with
//! one instance (`FILE_FLAG_FIRST_PIPE_INSTANCE`, so a squatted name fails
//! the spawn), remote clients rejected, whose client end the daemon opens
//! at once, inheritable, for the child. If anyone else connected first,
//! that open fails and so does the spawn, before a byte is written (what
//! Rust's standard library does for its own pipes). Only those three
//! handles are inherited (`PROC_THREAD_ATTRIBUTE_HANDLE_LIST`), so a
//! concurrent spawn's pipes never leak into this child.

use super::job::{kill_on_close_job, JobChild};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, IntoRawHandle, OwnedHandle};
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::net::windows::named_pipe::NamedPipeServer;
use windows_sys::Win32::Foundation::{GENERIC_READ, GENERIC_WRITE, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::Security::SECURITY_ATTRIBUTES;
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_FLAG_FIRST_PIPE_INSTANCE, FILE_FLAG_OVERLAPPED, FILE_READ_ATTRIBUTES, FILE_WRITE_ATTRIBUTES,
    OPEN_EXISTING, PIPE_ACCESS_INBOUND, PIPE_ACCESS_OUTBOUND,
};
use windows_sys::Win32::System::JobObjects::AssignProcessToJobObject;
use windows_sys::Win32::System::Pipes::{
    CreateNamedPipeW, PIPE_READMODE_BYTE, PIPE_REJECT_REMOTE_CLIENTS, PIPE_TYPE_BYTE, PIPE_WAIT,
};
use windows_sys::Win32::System::Threading::{
    CreateProcessW, DeleteProcThreadAttributeList, InitializeProcThreadAttributeList, ResumeThread, TerminateProcess,
    UpdateProcThreadAttribute, CREATE_NEW_PROCESS_GROUP, CREATE_NO_WINDOW, CREATE_SUSPENDED,
    CREATE_UNICODE_ENVIRONMENT, EXTENDED_STARTUPINFO_PRESENT, PROCESS_INFORMATION, PROC_THREAD_ATTRIBUTE_HANDLE_LIST,
    STARTF_USESTDHANDLES, STARTUPINFOEXW,
};

/// Each pipe's buffer, both ways: the pumps' read size is 32 KiB, and a
/// child may run one read ahead of them.
const PIPE_BUFFER: u32 = 64 << 10;

/// What one spawn asks for. Strings holding a NUL are refused
/// (`InvalidInput`), as is an environment name that is empty or holds a
/// `=` past its first character, and an `argv[0]` holding a `"` (Windows
/// parses the program name without escapes, so it could not arrive).
pub(crate) struct SpawnRequest<'a> {
    /// The resolved path of the executable (`lpApplicationName`).
    pub program: &'a OsStr,
    /// Empty: the daemon's own working directory.
    pub cwd: &'a OsStr,
    /// The arguments as the child sees them, `argv[0]` first (the command
    /// as the request named it, as on Unix). Quoted into one command line
    /// by the rules the C runtime parses back ([`command_line`]).
    pub argv: &'a [&'a OsStr],
    /// The whole environment, `(name, value)`, in this order: the block
    /// keeps it (D23, see the module doc). Nothing is added.
    pub env: &'a [(OsString, OsString)],
}

/// A started child: its job and handles, and the daemon's ends of its
/// pipes, registered with the tokio reactor (`stdin` writable, the other
/// two readable; a read returns 0 once every holder of the child's end,
/// grandchildren included, has closed it).
pub(crate) struct Spawned {
    pub child: JobChild,
    pub stdin: NamedPipeServer,
    pub stdout: NamedPipeServer,
    pub stderr: NamedPipeServer,
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why.to_string())
}

fn wide(s: &OsStr) -> io::Result<Vec<u16>> {
    let mut out: Vec<u16> = s.encode_wide().collect();
    if out.contains(&0) {
        return Err(invalid("a NUL in a spawn string"));
    }
    out.push(0);
    Ok(out)
}

/// Appends `arg` to a command line so that the C runtime's parser (and
/// `CommandLineToArgvW`) gives it back unchanged: as it is when it holds
/// no space, tab or quote and is not empty; else quoted, with each quote
/// escaped by a backslash and the backslashes before a quote (or before
/// the closing quote) doubled. Go's `syscall.EscapeArg` follows the same
/// rules, so the reference's children parse the same arguments.
fn push_arg(line: &mut Vec<u16>, arg: &OsStr) {
    const QUOTE: u16 = b'"' as u16;
    const BACKSLASH: u16 = b'\\' as u16;
    let units: Vec<u16> = arg.encode_wide().collect();
    let spaced = units.iter().any(|&u| u == u16::from(b' ') || u == u16::from(b'\t'));
    let escapes = units.iter().any(|&u| u == QUOTE || u == BACKSLASH);
    if units.is_empty() {
        line.extend([QUOTE, QUOTE]);
        return;
    }
    if !spaced && !escapes {
        line.extend(units);
        return;
    }
    if spaced {
        line.push(QUOTE);
    }
    let mut backslashes = 0usize;
    for u in units {
        match u {
            BACKSLASH => backslashes += 1,
            QUOTE => {
                line.extend(std::iter::repeat_n(BACKSLASH, backslashes + 1));
                backslashes = 0;
            }
            _ => backslashes = 0,
        }
        line.push(u);
    }
    if spaced {
        line.extend(std::iter::repeat_n(BACKSLASH, backslashes));
        line.push(QUOTE);
    }
}

/// The NUL-terminated command line of `argv`, arguments joined by one
/// space.
fn command_line(argv: &[&OsStr]) -> io::Result<Vec<u16>> {
    let mut line = Vec::new();
    for (i, arg) in argv.iter().enumerate() {
        if arg.encode_wide().any(|u| u == 0) {
            return Err(invalid("a NUL in an argument"));
        }
        if i == 0 && arg.encode_wide().any(|u| u == u16::from(b'"')) {
            return Err(invalid("a quote in the program name"));
        }
        if i > 0 {
            line.push(u16::from(b' '));
        }
        push_arg(&mut line, arg);
    }
    line.push(0);
    Ok(line)
}

/// The Unicode environment block: `name=value\0` per entry, in the given
/// order, then one more `\0` (two for an empty environment).
fn environment_block(env: &[(OsString, OsString)]) -> io::Result<Vec<u16>> {
    let mut block = Vec::new();
    for (name, value) in env {
        let name: Vec<u16> = name.encode_wide().collect();
        if name.is_empty() || name.iter().skip(1).any(|&u| u == u16::from(b'=')) {
            return Err(invalid("an environment name that is empty or holds '='"));
        }
        let start = block.len();
        block.extend(name);
        block.push(u16::from(b'='));
        block.extend(value.encode_wide());
        if block[start..].contains(&0) {
            return Err(invalid("a NUL in the environment"));
        }
        block.push(0);
    }
    if block.is_empty() {
        block.push(0);
    }
    block.push(0);
    Ok(block)
}

/// A name no other pipe of this daemon has: its pid, a counter and the
/// clock. Not a secret: the first-instance flag and the client open make
/// a guessed name useless (module doc).
fn pipe_name() -> Vec<u16> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!(
        r"\\.\pipe\remora-child-{}-{}-{nanos:08x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    name.encode_utf16().chain(std::iter::once(0)).collect()
}

/// One pipe: the daemon's end (overlapped, not inheritable, registered
/// with tokio) and the child's (blocking, inheritable). `inbound`: the
/// daemon reads (stdout, stderr); else it writes (stdin).
fn child_pipe(inbound: bool) -> io::Result<(NamedPipeServer, OwnedHandle)> {
    let name = pipe_name();
    let access = if inbound {
        PIPE_ACCESS_INBOUND
    } else {
        PIPE_ACCESS_OUTBOUND
    };
    // SAFETY: `name` is NUL-terminated; null security attributes give a
    // handle that is not inherited.
    let server = unsafe {
        CreateNamedPipeW(
            name.as_ptr(),
            access | FILE_FLAG_OVERLAPPED | FILE_FLAG_FIRST_PIPE_INSTANCE,
            PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
            1,
            PIPE_BUFFER,
            PIPE_BUFFER,
            0,
            std::ptr::null(),
        )
    };
    if server == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle nothing else owns.
    let server = unsafe { OwnedHandle::from_raw_handle(server) };
    let inherit = SECURITY_ATTRIBUTES {
        nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
        lpSecurityDescriptor: std::ptr::null_mut(),
        bInheritHandle: 1,
    };
    // The child's end may also read (stdout) or set (stdin) the pipe's
    // attributes, as console programs probing their handles do.
    let client_access = if inbound {
        GENERIC_WRITE | FILE_READ_ATTRIBUTES
    } else {
        GENERIC_READ | FILE_WRITE_ATTRIBUTES
    };
    // SAFETY: `name` is NUL-terminated; `inherit` outlives the call.
    let client = unsafe {
        CreateFileW(
            name.as_ptr(),
            client_access,
            0,
            &inherit,
            OPEN_EXISTING,
            0,
            std::ptr::null_mut(),
        )
    };
    if client == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle nothing else owns.
    let client = unsafe { OwnedHandle::from_raw_handle(client) };
    // Connected already (the client is open), so the reactor's first
    // read finds a live pipe. SAFETY: an overlapped pipe server handle,
    // given away (tokio closes it, also on error).
    let server = unsafe { NamedPipeServer::from_raw_handle(server.into_raw_handle()) }?;
    Ok((server, client))
}

/// An initialized attribute list naming the handles the child inherits.
struct HandleList {
    buffer: Vec<usize>,
    /// Kept alive: the list points into it.
    _handles: Box<[HANDLE; 3]>,
}

impl HandleList {
    fn new(handles: [HANDLE; 3]) -> io::Result<HandleList> {
        let mut size = 0usize;
        // SAFETY: a size query with no list, as documented; it "fails"
        // with ERROR_INSUFFICIENT_BUFFER and sets `size`.
        unsafe { InitializeProcThreadAttributeList(std::ptr::null_mut(), 1, 0, &mut size) };
        if size == 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buffer = vec![0usize; size.div_ceil(std::mem::size_of::<usize>())];
        // SAFETY: `buffer` holds at least `size` bytes, pointer-aligned.
        if unsafe { InitializeProcThreadAttributeList(buffer.as_mut_ptr().cast(), 1, 0, &mut size) } == 0 {
            return Err(io::Error::last_os_error());
        }
        let handles = Box::new(handles);
        let mut list = HandleList {
            buffer,
            _handles: handles,
        };
        // SAFETY: the list was initialized for one attribute; the value
        // is the boxed array, which lives as long as the list.
        let ok = unsafe {
            UpdateProcThreadAttribute(
                list.buffer.as_mut_ptr().cast(),
                0,
                PROC_THREAD_ATTRIBUTE_HANDLE_LIST as usize,
                list._handles.as_ptr().cast(),
                std::mem::size_of::<[HANDLE; 3]>(),
                std::ptr::null_mut(),
                std::ptr::null(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(list)
    }
}

impl Drop for HandleList {
    fn drop(&mut self) {
        // SAFETY: a list initialized in `new`.
        unsafe { DeleteProcThreadAttributeList(self.buffer.as_mut_ptr().cast()) };
    }
}

/// Starts `req` in a Job Object of its own (see the module doc). Must run
/// inside a tokio runtime (the pipes register with its reactor). The
/// process is created suspended and resumed only once it is in the job:
/// when anything between fails, it is ended before it ran an instruction.
pub(crate) fn spawn(req: &SpawnRequest<'_>) -> io::Result<Spawned> {
    let program = wide(req.program)?;
    let cwd = if req.cwd.is_empty() { None } else { Some(wide(req.cwd)?) };
    let mut line = command_line(req.argv)?;
    let env = environment_block(req.env)?;
    let job = kill_on_close_job()?;
    let (stdin, stdin_child) = child_pipe(false)?;
    let (stdout, stdout_child) = child_pipe(true)?;
    let (stderr, stderr_child) = child_pipe(true)?;
    let inherited = [
        stdin_child.as_raw_handle(),
        stdout_child.as_raw_handle(),
        stderr_child.as_raw_handle(),
    ];
    let mut list = HandleList::new(inherited)?;
    // SAFETY: an all-zero STARTUPINFOEXW is valid; the fields set below.
    let mut startup: STARTUPINFOEXW = unsafe { std::mem::zeroed() };
    startup.StartupInfo.cb = std::mem::size_of::<STARTUPINFOEXW>() as u32;
    startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    startup.StartupInfo.hStdInput = inherited[0];
    startup.StartupInfo.hStdOutput = inherited[1];
    startup.StartupInfo.hStdError = inherited[2];
    startup.lpAttributeList = list.buffer.as_mut_ptr().cast();
    // CREATE_NO_WINDOW: a console program gets a console without a
    // window (the daemon is detached and has none; the system's console
    // host for it joins the job too). A new process group: a console
    // Ctrl event aimed at the daemon's group never reaches the child
    // (which starts with Ctrl+C ignored, Windows' rule for a new group;
    // Ctrl+Break can still address it by its pid).
    let flags = CREATE_SUSPENDED
        | CREATE_NO_WINDOW
        | CREATE_NEW_PROCESS_GROUP
        | CREATE_UNICODE_ENVIRONMENT
        | EXTENDED_STARTUPINFO_PRESENT;
    // SAFETY: an all-zero PROCESS_INFORMATION is a valid out-parameter.
    let mut info: PROCESS_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: every string is NUL-terminated and outlives the call; the
    // command line is writable, as CreateProcessW requires; the handle
    // list names only the three inheritable child ends.
    let created = unsafe {
        CreateProcessW(
            program.as_ptr(),
            line.as_mut_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            1,
            flags,
            env.as_ptr().cast(),
            cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            (&startup as *const STARTUPINFOEXW).cast(),
            &mut info,
        )
    };
    if created == 0 {
        return Err(io::Error::last_os_error());
    }
    drop(list);
    drop((stdin_child, stdout_child, stderr_child));
    // SAFETY: fresh handles CreateProcessW gave us.
    let (process, thread) = unsafe {
        (
            OwnedHandle::from_raw_handle(info.hProcess),
            OwnedHandle::from_raw_handle(info.hThread),
        )
    };
    // SAFETY: live job and process handles.
    let assigned = unsafe { AssignProcessToJobObject(job.as_raw_handle(), process.as_raw_handle()) };
    if assigned == 0 {
        let err = io::Error::last_os_error();
        // SAFETY: our own suspended child: it never ran.
        unsafe { TerminateProcess(process.as_raw_handle(), super::job::KILL_EXIT_CODE) };
        return Err(err);
    }
    // SAFETY: the child's main thread, suspended once by CREATE_SUSPENDED.
    if unsafe { ResumeThread(thread.as_raw_handle()) } == u32::MAX {
        // Dropping the job (its only handle) ends the child.
        return Err(io::Error::last_os_error());
    }
    Ok(Spawned {
        child: JobChild::new(info.dwProcessId, process, job),
        stdin,
        stdout,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(args: &[&str]) -> String {
        let argv: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        let mut units = command_line(&argv).unwrap();
        assert_eq!(units.pop(), Some(0));
        String::from_utf16(&units).unwrap()
    }

    #[test]
    fn arguments_are_quoted_as_the_c_runtime_parses_them() {
        assert_eq!(line(&["prog", "plain", ""]), r#"prog plain """#);
        assert_eq!(line(&["prog", "a b", "tab\there"]), "prog \"a b\" \"tab\there\"");
        assert_eq!(line(&["prog", r#"say "hi""#]), r#"prog "say \"hi\"""#);
        assert_eq!(line(&["prog", r"C:\dir\"]), r"prog C:\dir\");
        assert_eq!(line(&["prog", r"C:\my dir\"]), r#"prog "C:\my dir\\""#);
        assert_eq!(line(&["prog", r#"a\"b"#]), r#"prog a\\\"b"#);
        assert!(command_line(&[OsStr::new("a\"b")]).is_err());
        assert!(command_line(&[OsStr::new("a"), OsStr::new("b\0")]).is_err());
    }

    #[test]
    fn the_environment_block_keeps_the_given_order() {
        let env: Vec<(OsString, OsString)> = [("ZED", "1"), ("alpha", "2"), ("=C:", r"C:\")]
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect();
        let block = environment_block(&env).unwrap();
        let text = String::from_utf16(&block).unwrap();
        assert_eq!(text, "ZED=1\0alpha=2\0=C:=C:\\\0\0");
        assert_eq!(environment_block(&[]).unwrap(), vec![0, 0]);
        let bad = [(OsString::from("A=B"), OsString::from("1"))];
        assert!(environment_block(&bad).is_err());
        let nul = [(OsString::from("A"), OsString::from("1\0"))];
        assert!(environment_block(&nul).is_err());
    }
}
