//! Signals from the tests to processes they hold no unreaped `Child` for
//! (a daemon found by its socket or its lock record, that daemon's
//! children, a sleeper a daemon started): through a hold taken while the
//! process is known to be the one meant, never by a number read earlier.
//! By the time a test signals, the number may belong to anything, a
//! thread of this very test binary included, and `kill(2)` of a thread's
//! id ends the whole process the thread belongs to (issue 44, item 9:
//! this binary died of its own helper's SIGKILL).
//!
//! The hold is the daemon's own, `remora::sys::process::PidRef` (a pidfd
//! on Linux, the start time compared just before each signal on macOS);
//! this wrapper only gives the tests yes/no answers.

use remora::sys::process::PidRef;

/// A hold on one process.
pub struct Proc(PidRef);

impl Proc {
    /// A hold on the process now at `pid`. Take it while the caller knows
    /// that process is the one it means (it just read the number from a
    /// live process), or use [`Proc::proven`].
    pub fn open(pid: i32) -> Option<Proc> {
        PidRef::open(pid).map(Proc)
    }

    /// A hold on the process at `pid` if `check` (which reads it by its
    /// number, in `/proc`) holds while the process is present before and
    /// after it, so that what `check` read was this process.
    pub fn proven(pid: i32, check: impl FnOnce(i32) -> bool) -> Option<Proc> {
        let held = PidRef::open(pid)?;
        held.confirm(|pid| if check(pid) { Ok(()) } else { Err(String::new()) })
            .ok()?;
        Some(Proc(held))
    }

    pub fn pid(&self) -> i32 {
        self.0.pid()
    }

    /// Whether the process still holds its number (running or a zombie).
    pub fn present(&self) -> bool {
        self.0.present()
    }

    /// Whether it has ended (a zombie counts, as in `common::pid_gone`).
    pub fn gone(&self) -> bool {
        self.0.exited()
    }

    /// Sends `signal` to the process; whether it was delivered.
    pub fn signal(&self, signal: i32) -> bool {
        self.0.signal(signal).is_ok()
    }

    /// Sends `signal` to the group the process leads, by the hold only
    /// (see `PidRef::signal_group`). Whether it was sent.
    pub fn signal_group(&self, signal: i32) -> bool {
        self.0.signal_group(signal).is_ok()
    }
}
