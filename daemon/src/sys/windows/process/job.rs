//! One child inside its own Job Object ([`JobChild`]): the two handles
//! that keep it, the kills (the direct child, or the whole tree through
//! the job), and its exit observed without a thread parked per child.
//!
//! The job is created with `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`: when its
//! last handle closes, Windows ends every process still in it. The only
//! handle is the one [`JobChild`] holds, so dropping it (or the daemon
//! exiting, however it exits) ends the child's whole tree. Seed 000 names
//! this as the reason `-keep-children` is ignored on Windows.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::sync::Mutex;
use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE, WAIT_OBJECT_0, WAIT_TIMEOUT};
use windows_sys::Win32::System::JobObjects::{
    CreateJobObjectW, JobObjectBasicAccountingInformation, JobObjectExtendedLimitInformation,
    QueryInformationJobObject, SetInformationJobObject, TerminateJobObject, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, RegisterWaitForSingleObject, TerminateProcess, UnregisterWaitEx, WaitForSingleObject, INFINITE,
    WT_EXECUTEONLYONCE,
};

/// The exit code of a child the daemon ends, directly or with its job:
/// 1, what the reference's kill gives on Windows (claustrum
/// `docs/protocol/process-killandwait.md`, "Differences by system": "ends
/// the direct child at once, with exit code 1"; Go's `Process.Kill`).
pub(crate) const KILL_EXIT_CODE: u32 = 1;

/// How a child ended. Windows has no signals: `signal` is always `None`
/// (the reference omits `signal` from the exit frame there, claustrum
/// `docs/PROTOCOL.md`, "Stream notifications"), and `code` is the
/// process's exit code as an unsigned 32-bit value (Go's `ExitCode()`:
/// an NTSTATUS such as `0xC000013A` reads 3221225786, not negative).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExitStatus {
    pub code: i64,
    pub signal: Option<i32>,
}

/// A new Job Object that ends its processes when its last handle closes.
/// Not inheritable (no security attributes), unnamed, so no other process
/// can open it by name.
pub(super) fn kill_on_close_job() -> io::Result<OwnedHandle> {
    // SAFETY: both pointers may be null (default security, no name).
    let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if raw.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle that nothing else owns.
    let job = unsafe { OwnedHandle::from_raw_handle(raw) };
    // SAFETY: an all-zero limit structure is valid; one flag is set.
    let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    // SAFETY: the structure and its size match the information class.
    let set = unsafe {
        SetInformationJobObject(
            job.as_raw_handle(),
            JobObjectExtendedLimitInformation,
            (&limits as *const JOBOBJECT_EXTENDED_LIMIT_INFORMATION).cast(),
            std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
        )
    };
    if set == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(job)
}

/// A running (or ended, not yet forgotten) child and the job that holds
/// its tree. Dropping it closes both handles, which ends whatever of the
/// tree still runs.
pub(crate) struct JobChild {
    pid: u32,
    process: OwnedHandle,
    job: OwnedHandle,
}

impl JobChild {
    pub(super) fn new(pid: u32, process: OwnedHandle, job: OwnedHandle) -> JobChild {
        JobChild { pid, process, job }
    }

    /// The child's process id. It stays the child's while this handle
    /// is held: Windows does not reuse an id while a handle to its
    /// process is open.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Ends the whole tree: every process in the job, the child and
    /// whatever it started (`TerminateJobObject`), each with
    /// [`KILL_EXIT_CODE`]. Fine to call after they ended.
    pub(crate) fn kill_tree(&self) -> io::Result<()> {
        // SAFETY: a job handle this value owns.
        if unsafe { TerminateJobObject(self.job.as_raw_handle(), KILL_EXIT_CODE) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Ends the direct child only (`TerminateProcess`), with
    /// [`KILL_EXIT_CODE`]; what it started stays in the job. An error
    /// (access denied) once it has already exited.
    pub(crate) fn kill_child(&self) -> io::Result<()> {
        // SAFETY: a process handle this value owns.
        if unsafe { TerminateProcess(self.process.as_raw_handle(), KILL_EXIT_CODE) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits up to `millis` (`INFINITE` for no limit) for the child's
    /// exit: its status once it exited, `None` while it runs.
    fn exit_within_ms(&self, millis: u32) -> io::Result<Option<ExitStatus>> {
        // SAFETY: a process handle this value owns.
        match unsafe { WaitForSingleObject(self.process.as_raw_handle(), millis) } {
            WAIT_OBJECT_0 => {}
            WAIT_TIMEOUT => return Ok(None),
            _ => return Err(io::Error::last_os_error()),
        }
        let mut code = 0u32;
        // SAFETY: writes one u32 into `code`.
        if unsafe { GetExitCodeProcess(self.process.as_raw_handle(), &mut code) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Some(ExitStatus {
            code: i64::from(code),
            signal: None,
        }))
    }

    /// The exit status if the child has exited, without waiting.
    pub(crate) fn try_exit(&self) -> io::Result<Option<ExitStatus>> {
        self.exit_within_ms(0)
    }

    /// Whether the child exits within `limit`, blocking the caller up to
    /// that long (the caller is a blocking path, as on Unix).
    #[allow(dead_code)] // with `sys::process::exited_within`
    pub(crate) fn exited_within(&self, limit: std::time::Duration) -> bool {
        let millis = u32::try_from(limit.as_millis()).unwrap_or(INFINITE - 1);
        matches!(self.exit_within_ms(millis), Ok(Some(_)))
    }

    /// Waits for the child's exit without blocking a runtime thread: the
    /// system thread pool waits on the process handle
    /// (`RegisterWaitForSingleObject`, many handles per pool thread) and
    /// wakes this task once, so no thread is parked per child.
    pub(crate) async fn wait(&self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_exit()? {
                return Ok(status);
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            let registration = ExitRegistration::new(self.process.as_raw_handle(), tx)?;
            let _ = rx.await;
            drop(registration);
        }
    }

    /// How many processes of the tree are still running (the job's
    /// accounting), 0 once every one ended.
    pub(crate) fn active_processes(&self) -> io::Result<u32> {
        // SAFETY: an all-zero accounting structure is a valid out-parameter.
        let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: the structure and its size match the information class.
        let ok = unsafe {
            QueryInformationJobObject(
                self.job.as_raw_handle(),
                JobObjectBasicAccountingInformation,
                (&mut info as *mut JOBOBJECT_BASIC_ACCOUNTING_INFORMATION).cast(),
                std::mem::size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info.ActiveProcesses)
    }
}

/// What the pool's callback fires: the sender of a one-shot channel,
/// taken once.
type Slot = Mutex<Option<tokio::sync::oneshot::Sender<()>>>;

/// A registered wait on a process handle. Dropping it unregisters the
/// wait and waits for a callback already running to return
/// (`UnregisterWaitEx` with `INVALID_HANDLE_VALUE`: a few instructions at
/// most), so the slot the callback reads is freed only after it.
struct ExitRegistration {
    wait: HANDLE,
    slot: *mut Slot,
}

// SAFETY: the wait handle and the slot pointer are used only by `drop`,
// and the slot's content is behind a mutex.
unsafe impl Send for ExitRegistration {}
// SAFETY: as above; `&ExitRegistration` gives access to nothing.
unsafe impl Sync for ExitRegistration {}

unsafe extern "system" fn exit_fired(context: *mut core::ffi::c_void, _timed_out: bool) {
    // SAFETY: `context` is the slot of a live registration: it is freed
    // only after UnregisterWaitEx has waited for this callback to return.
    let slot = unsafe { &*(context as *const Slot) };
    if let Some(tx) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() {
        let _ = tx.send(());
    }
}

impl ExitRegistration {
    fn new(process: HANDLE, tx: tokio::sync::oneshot::Sender<()>) -> io::Result<ExitRegistration> {
        let slot = Box::into_raw(Box::new(Mutex::new(Some(tx))));
        let mut wait: HANDLE = std::ptr::null_mut();
        // SAFETY: `process` stays open for the registration's life (its
        // JobChild is borrowed across it); `slot` outlives the wait.
        let ok = unsafe {
            RegisterWaitForSingleObject(
                &mut wait,
                process,
                Some(exit_fired),
                slot.cast_const().cast(),
                INFINITE,
                WT_EXECUTEONLYONCE,
            )
        };
        if ok == 0 {
            let err = io::Error::last_os_error();
            // SAFETY: not registered, so nothing else holds the slot.
            drop(unsafe { Box::from_raw(slot) });
            return Err(err);
        }
        Ok(ExitRegistration { wait, slot })
    }
}

impl Drop for ExitRegistration {
    fn drop(&mut self) {
        // SAFETY: a wait this value registered; INVALID_HANDLE_VALUE makes
        // the call return only once no callback of it runs any more.
        unsafe { UnregisterWaitEx(self.wait, INVALID_HANDLE_VALUE) };
        // SAFETY: no callback can read the slot any more.
        drop(unsafe { Box::from_raw(self.slot) });
    }
}

/// A process started elsewhere (std's `Command`: the bounded runs of
/// [`run_bounded`], `-install`'s and `-probe-cli`'s) put into a
/// kill-on-close Job Object of its own after its (suspended) start: what
/// it starts from then on is in the job too. Dropping it ends
/// whatever of the tree still runs.
pub(super) struct Confined {
    job: OwnedHandle,
}

impl Confined {
    /// Ends every process in the job, each with [`KILL_EXIT_CODE`].
    pub(crate) fn kill_tree(&self) -> io::Result<()> {
        // SAFETY: a job handle this value owns.
        if unsafe { TerminateJobObject(self.job.as_raw_handle(), KILL_EXIT_CODE) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Puts the running `child` into a new kill-on-close job.
pub(super) fn confine(child: &std::process::Child) -> io::Result<Confined> {
    use windows_sys::Win32::System::JobObjects::AssignProcessToJobObject;
    let job = kill_on_close_job()?;
    // SAFETY: both handles are open: the job ours, the process the child's.
    if unsafe { AssignProcessToJobObject(job.as_raw_handle(), child.as_raw_handle()) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Confined { job })
}

#[link(name = "ntdll")]
unsafe extern "system" {
    /// Resumes every thread of a process (ntdll; std's `Child` keeps no
    /// handle to the main thread for `ResumeThread`).
    fn NtResumeProcess(process: windows_sys::Win32::Foundation::HANDLE) -> i32;
}

/// Lets a `child` started with `CREATE_SUSPENDED` and then [`confine`]d
/// run: nothing it starts can escape the job, since it ran nothing
/// before it was in it.
pub(super) fn resume(child: &std::process::Child) -> io::Result<()> {
    // SAFETY: the process handle is open (the child's own).
    let status = unsafe { NtResumeProcess(child.as_raw_handle()) };
    if status < 0 {
        return Err(io::Error::other(format!("NtResumeProcess: NTSTATUS {status:#x}")));
    }
    Ok(())
}

/// [`super::run_bounded`]: started suspended, confined, resumed; the exit
/// awaited on the process handle (no polling) until the deadline.
pub(super) fn run_bounded(cmd: &mut std::process::Command, limit: std::time::Duration) -> super::Bounded {
    use super::Bounded;
    use std::os::windows::process::CommandExt;
    use windows_sys::Win32::System::Threading::CREATE_SUSPENDED;
    let deadline = std::time::Instant::now() + limit;
    let mut child = match cmd.creation_flags(CREATE_SUSPENDED).spawn() {
        Ok(child) => child,
        Err(e) => return Bounded::NotStarted(e),
    };
    let Ok(job) = confine(&child).and_then(|job| resume(&child).map(|()| job)) else {
        let _ = child.kill();
        let _ = child.wait();
        return Bounded::Failed;
    };
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    // Below INFINITE (u32::MAX): a bound past 49 days waits that long.
    let millis = u32::try_from(left.as_millis()).unwrap_or(u32::MAX - 1);
    // SAFETY: the child's process handle is open for the call.
    let waited = unsafe { WaitForSingleObject(child.as_raw_handle(), millis) };
    if waited != WAIT_OBJECT_0 {
        let _ = job.kill_tree();
        let _ = child.kill();
    }
    let status = child.wait();
    // Dropping the job ends whatever of the tree still runs.
    drop(job);
    match (waited, status) {
        (WAIT_TIMEOUT, _) => Bounded::Stopped,
        (WAIT_OBJECT_0, Ok(status)) => Bounded::Exited(status),
        // The wait itself failed: ended as at the bound, but not "hung".
        _ => Bounded::Failed,
    }
}
