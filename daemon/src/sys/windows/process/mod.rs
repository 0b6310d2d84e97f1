//! The Windows half of `sys::process`, mounted under the Unix module's
//! name (`sys/mod.rs`): starting a child inside a Job Object of its own,
//! ending it or its whole tree, and observing its exit.
//!
//! Two layers:
//! - the handle API: [`spawn()`] gives a [`JobChild`] (its process and job
//!   handles) and the daemon's ends of its three pipes, as tokio named-pipe
//!   servers; [`JobChild`] kills, waits and counts the tree;
//! - the pid seam, the names `process/` calls on Unix ([`signal_child`],
//!   [`signal_group`], [`wait_exit`], [`exited_within`], [`reap`],
//!   [`parse_signal`], [`signal_name`], [`ExitStatus`]): [`start_child`]
//!   keeps each child's [`JobChild`] in a table by pid, and those
//!   functions find it there. A pid cannot be reused while the table
//!   holds its process handle.
//!
//! What differs from Unix, and why:
//! - No signals. Every "signal" ends a process with exit code 1
//!   ([`KILL_EXIT_CODE`]): [`signal_child`] the direct child
//!   (`TerminateProcess`), [`signal_group`] every process of its job
//!   (`TerminateJobObject`), the Windows counterpart of the Unix group.
//!   The exit frame then carries no `signal`.
//! - No zombie and no reaping: the process handle the table holds is what
//!   keeps the pid (and so the job) from being confused with another
//!   process. [`reap`] forgets the child once it has exited; a job whose
//!   tree still runs (a grandchild outliving the child) is kept until that
//!   tree ends or the daemon exits, when `KILL_ON_JOB_CLOSE` ends it. So
//!   `-keep-children` cannot keep anything on Windows (seed 000).
//! - No spawner and no exec report: `CreateProcessW` reports a program
//!   that cannot start itself, synchronously.

mod job;
mod spawn;

pub(crate) use job::{ExitStatus, JobChild};
pub(crate) use spawn::{spawn, SpawnRequest, Spawned};

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::net::windows::named_pipe::NamedPipeServer;

/// The POSIX numbers of the four names `process.kill` accepts, for the
/// seam only (the C runtime's `libc` has no `SIGKILL` or `SIGHUP` on
/// Windows): a Windows kill ignores which one was asked for.
pub(crate) const SIGHUP: i32 = 1;
pub(crate) const SIGINT: i32 = 2;
pub(crate) const SIGKILL: i32 = 9;
pub(crate) const SIGTERM: i32 = 15;

/// Parses a `signal` param by the same rules as on Unix (exactly `TERM`,
/// `KILL`, `INT`, `HUP`, with or without `SIG`; anything else is
/// `SIGTERM`). On Windows the daemon then ignores the name (claustrum
/// `docs/protocol/process-killandwait.md`, "Differences by system").
pub(crate) fn parse_signal(name: &str) -> i32 {
    match name {
        "KILL" | "SIGKILL" => SIGKILL,
        "INT" | "SIGINT" => SIGINT,
        "HUP" | "SIGHUP" => SIGHUP,
        _ => SIGTERM,
    }
}

/// The exit frame's signal name: none on Windows, whose exits carry no
/// signal.
pub(crate) fn signal_name(_signal: i32) -> Option<&'static str> {
    None
}

/// The children started through [`start_child`], by pid.
fn children() -> MutexGuard<'static, HashMap<i32, Arc<JobChild>>> {
    static CHILDREN: OnceLock<Mutex<HashMap<i32, Arc<JobChild>>>> = OnceLock::new();
    CHILDREN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Jobs of forgotten children whose trees still run (see the module doc).
fn lingering() -> MutexGuard<'static, Vec<Arc<JobChild>>> {
    static LINGERING: Mutex<Vec<Arc<JobChild>>> = Mutex::new(Vec::new());
    LINGERING.lock().unwrap_or_else(|p| p.into_inner())
}

fn child(pid: i32) -> Option<Arc<JobChild>> {
    children().get(&pid).cloned()
}

/// A child started through the seam: its pid and the daemon's pipe ends.
pub(crate) struct StartedChild {
    pub pid: i32,
    pub stdin: NamedPipeServer,
    pub stdout: NamedPipeServer,
    pub stderr: NamedPipeServer,
}

/// [`spawn()`], keeping the child in the table for the pid functions
/// below until [`reap`] forgets it.
pub(crate) fn start_child(req: &SpawnRequest<'_>) -> io::Result<StartedChild> {
    let Spawned {
        child,
        stdin,
        stdout,
        stderr,
    } = spawn(req)?;
    // Windows process ids are multiples of 4 below 2^32; the ones seen
    // in practice fit an i32. One that does not is refused (dropping the
    // job ends the child).
    let pid = i32::try_from(child.pid()).map_err(|_| io::Error::other("process id out of range"))?;
    children().insert(pid, Arc::new(child));
    Ok(StartedChild {
        pid,
        stdin,
        stdout,
        stderr,
    })
}

/// How a bounded run of a program ended ([`run_bounded`]). Each half of
/// `sys::process` has it, the Windows one standing alone (ci/wine/jobcheck
/// mounts it without the rest of the daemon).
#[derive(Debug)]
pub(crate) enum Bounded {
    /// The program exited within the bound.
    Exited(std::process::ExitStatus),
    /// The bound passed: the program and everything it started were
    /// ended.
    Stopped,
    /// The program could not be started: the spawn's error (read by the
    /// Unix `-install`'s ETXTBSY retry; no Windows caller looks at it).
    NotStarted(#[allow(dead_code)] std::io::Error),
    /// The program could not be confined, or its end not observed:
    /// nothing of it runs.
    Failed,
}

/// Runs `cmd` for at most `limit` from the call, confined to a
/// kill-on-close Job Object of its own: it starts suspended and runs only
/// once it is in its job, so nothing it starts can escape it; at the
/// bound the whole job is ended, and whatever of the tree outlives an
/// exit within it ends when the job is dropped here. A program that
/// cannot be confined is killed before it ever ran ([`Bounded::Failed`]).
pub(crate) fn run_bounded(cmd: &mut std::process::Command, limit: std::time::Duration) -> Bounded {
    job::run_bounded(cmd, limit)
}

/// Ends the direct child `pid` (every signal alike: see the module doc).
/// Best-effort, as on Unix: an unknown or ended child is ignored.
pub(crate) fn signal_child(pid: i32, _signal: i32) {
    if let Some(child) = child(pid) {
        let _ = child.kill_child();
    }
}

/// Ends every process of `pid`'s job: the child and all it started.
/// Best-effort, as on Unix.
pub(crate) fn signal_group(pid: i32, _signal: i32) {
    if let Some(child) = child(pid) {
        let _ = child.kill_tree();
    }
}

/// Waits for child `pid`'s exit without blocking a runtime thread
/// ([`JobChild::wait`]). `NotFound` for a pid the table does not hold.
pub(crate) async fn wait_exit(pid: i32) -> io::Result<ExitStatus> {
    let child = child(pid).ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "not a child of this daemon"))?;
    child.wait().await
}

/// Whether child `pid` exits within `limit` (blocking the caller, as on
/// Unix). True for a pid the table does not hold: it is gone.
// The daemon's callers (`agent/launcher`, `agent/probecli`, `install`)
// are Unix-only so far (issue 43); `ci/wine/jobcheck` uses it.
#[allow(dead_code)]
pub(crate) fn exited_within(pid: i32, limit: std::time::Duration) -> bool {
    child(pid).is_none_or(|child| child.exited_within(limit))
}

/// Forgets child `pid` once it has exited: true when it is gone (or was
/// never here), false while it runs. A job whose tree still runs is kept
/// (module doc); kept jobs whose trees have ended are let go here.
pub(crate) fn reap(pid: i32) -> bool {
    let mut table = children();
    let Some(child) = table.get(&pid) else {
        return true;
    };
    if !matches!(child.try_exit(), Ok(Some(_))) {
        return false;
    }
    let Some(child) = table.remove(&pid) else {
        return true;
    };
    drop(table);
    let mut kept = lingering();
    kept.retain(|job| !matches!(job.active_processes(), Ok(0)));
    if !matches!(child.active_processes(), Ok(0)) {
        kept.push(child);
    }
    true
}

/// How many processes of `pid`'s tree run, while the table holds it.
// `ci/wine/jobcheck` reads it; the daemon does not need it yet.
#[allow(dead_code)]
pub(crate) fn active_processes(pid: i32) -> Option<u32> {
    child(pid).and_then(|child| child.active_processes().ok())
}

/// No spawner on Windows: children are started with `CreateProcessW`
/// ([`start_child`]), so there is none to stop.
pub(crate) fn stop_spawner() {}
