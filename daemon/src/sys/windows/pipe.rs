//! The named pipe of `-listen-pipe` (issue 43, claustrum's CT-5): the
//! same JSON-RPC as the Unix socket on `\\.\pipe\remora-<id>`, for
//! Windows clients (clauster) and for hosts where no AF_UNIX listener can
//! be made (Wine, Windows before 1803).
//!
//! Every instance is created with a protected DACL that grants the pipe's
//! owner (the daemon's user) all access and nobody else any
//! (`D:P(A;;GA;;;OW)`), and with `PIPE_REJECT_REMOTE_CLIENTS`, so only
//! local processes of the same user connect. The first instance is
//! created with `FILE_FLAG_FIRST_PIPE_INSTANCE`: a name another process
//! already serves is refused instead of shared. A server instance is
//! made before each `connect` returns, so a client never finds the name
//! missing between two accepts.

use std::io;
use tokio::net::windows::named_pipe::{NamedPipeServer, PipeMode, ServerOptions};
use windows_sys::Win32::Security::SECURITY_ATTRIBUTES;

use super::acl::Descriptor;

/// The DACL of every instance: protected (nothing inherited), the owner
/// only.
const OWNER_ONLY_SDDL: &str = "D:P(A;;GA;;;OW)";

/// The pipe's name for a daemon whose instance id is `id`.
pub(crate) fn pipe_name(id: &str) -> String {
    format!(r"\\.\pipe\remora-{id}")
}

/// A listening named pipe: the next server instance, waiting for a client.
pub(crate) struct PipeListener {
    name: String,
    next: NamedPipeServer,
}

/// Creates one server instance of `name` with the owner-only DACL.
fn instance(name: &str, first: bool) -> io::Result<NamedPipeServer> {
    let descriptor = Descriptor::from_sddl(OWNER_ONLY_SDDL)?;
    let mut attributes = SECURITY_ATTRIBUTES {
        nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
        lpSecurityDescriptor: descriptor.as_ptr(),
        bInheritHandle: 0,
    };
    let mut options = ServerOptions::new();
    options
        .first_pipe_instance(first)
        .reject_remote_clients(true)
        .pipe_mode(PipeMode::Byte)
        .access_inbound(true)
        .access_outbound(true);
    // SAFETY: `attributes` and the descriptor it points to live until the
    // call returns; CreateNamedPipeW copies what it keeps.
    unsafe { options.create_with_security_attributes_raw(name, (&mut attributes as *mut SECURITY_ATTRIBUTES).cast()) }
}

impl PipeListener {
    /// Creates the pipe `name`; fails when another process serves it.
    pub(crate) fn bind(name: &str) -> io::Result<PipeListener> {
        Ok(PipeListener {
            name: name.to_string(),
            next: instance(name, true)?,
        })
    }

    /// The pipe's name, as `rpc.pipe` records it. (The daemon tells its
    /// own `rpc.pipe` by the file's identity; `ci/wine/pipecheck` asks.)
    #[allow(dead_code)]
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Waits for the next client and returns its connected instance,
    /// having made the instance the client after it will find.
    pub(crate) async fn accept(&mut self) -> io::Result<NamedPipeServer> {
        self.next.connect().await?;
        let fresh = instance(&self.name, false)?;
        Ok(std::mem::replace(&mut self.next, fresh))
    }
}

/// The pid of the client connected to `pipe`
/// (`GetNamedPipeClientProcessId`).
pub(crate) fn client_pid(pipe: &NamedPipeServer) -> Option<i32> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::System::Pipes::GetNamedPipeClientProcessId;
    let mut pid = 0u32;
    // SAFETY: the handle is open for the call; `pid` is a valid out-pointer.
    let ok = unsafe { GetNamedPipeClientProcessId(pipe.as_raw_handle(), &mut pid) } != 0;
    ok.then(|| i32::try_from(pid).ok()).flatten()
}

/// Whether the client already wrote a whole line within the first
/// `head.len()` bytes, without taking them (`PeekNamedPipe`).
pub(crate) fn has_a_line_waiting(pipe: &NamedPipeServer, head: &mut [u8]) -> bool {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::System::Pipes::PeekNamedPipe;
    let len = u32::try_from(head.len()).unwrap_or(u32::MAX);
    let mut read = 0u32;
    // SAFETY: PeekNamedPipe writes at most `len` bytes into `head`; the
    // other out-pointers are valid or null.
    let ok = unsafe {
        PeekNamedPipe(
            pipe.as_raw_handle(),
            head.as_mut_ptr().cast(),
            len,
            &mut read,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    } != 0;
    ok && head[..(read as usize).min(head.len())].contains(&b'\n')
}
