//! The process supervisor: registry of managed children, their replay logs,
//! stdin, and kill semantics.
//!
//! Life of a child (one [`ManagedProcess`](managed::ManagedProcess)):
//!
//! 1. spawned in its own process group (`setpgid(0,0)`), with three pipes;
//! 2. one reader task per output pipe appends each read (≤ 32 KiB) to the
//!    [`ReplayLog`](crate::replay::log::ReplayLog) as one frame;
//! 3. a per-process stdin writer task drains a queue into the stdin pipe,
//!    so `process.stdin` never waits on the child;
//! 4. the supervisor task observes the exit with `waitid(WNOWAIT)` (the
//!    child stays a zombie, pinning its pgid — see [`sys`](crate::sys::process)), marks the
//!    process exited (what `running`, `died` and "Process not running"
//!    mean), waits for both pipes to reach EOF — like Go's `cmd.Wait`,
//!    which waits for its output-copying goroutines, so a grandchild that
//!    keeps a pipe open delays the exit frame until it closes it — appends
//!    the exit frame, and only then reaps.
//!
//! So every output byte precedes the exit frame, and a signal to the group
//! can never reach a recycled pgid. Exited processes stay in the registry
//! (reattach replays them, killAndWait reports `alreadyExited`) for as long
//! as [`retention`] keeps them, until the id is reused, or until the
//! daemon stops, whichever comes first; then their log is released.
//!
//! The files, lowest first (each imports only the ones before it):
//! [`lookpath`] (Go's Windows program lookup), [`command`], [`stdin`],
//! [`session`] (pure helpers); [`managed`] (the
//! process type and the table); [`pumps`], [`supervise`], [`retention`]
//! (what runs beside a child); [`registry`] (the [`ProcessManager`]);
//! [`spawn`] (starting a child) and [`launch`], its OS part (Unix:
//! process group, pipes, trampoline, spawner; `windows/launch.rs`, the
//! Windows half, answers every spawn with "not supported" until the Job
//! Object spawn is wired in).

pub(crate) mod command;
#[cfg(unix)]
pub(crate) mod launch;
#[cfg(windows)]
#[path = "windows/launch.rs"]
pub(crate) mod launch;
pub(crate) mod lookpath;
pub(crate) mod managed;
pub(crate) mod pumps;
pub(crate) mod registry;
pub(crate) mod retention;
pub(crate) mod session;
pub(crate) mod spawn;
pub(crate) mod stdin;
pub(crate) mod supervise;

pub(crate) use managed::{KilledBy, StdinResult, Termination};
pub(crate) use registry::{kill_grace_cap_from_env, ProcessManager, Supervision};
pub(crate) use spawn::{Launcher, SpawnError, SpawnSpec};

// Its children are Unix programs (`sleep`, `sh`).
#[cfg(test)]
#[cfg(unix)] // Unix pids and signals
mod tests;
