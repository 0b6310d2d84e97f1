//! Signals from the tests to processes they hold no unreaped `Child` for
//! (a daemon found by its socket or its lock record, that daemon's
//! children, a sleeper a daemon started): through a pidfd taken while the
//! process is known to be the one meant, never by a number read earlier.
//! By the time a test signals, the number may belong to anything, a
//! thread of this very test binary included, and `kill(2)` of a thread's
//! id ends the whole process the thread belongs to (issue 44, item 9:
//! this binary died of its own helper's SIGKILL).
//!
//! Linux only: elsewhere no hold can be taken ([`Proc::open`] is `None`),
//! and the callers send nothing.

/// A hold on one process (a pidfd).
pub struct Proc {
    pid: i32,
    #[cfg(target_os = "linux")]
    fd: std::os::fd::OwnedFd,
}

/// `pidfd_send_signal`'s flag (Linux 6.9) for the group the process
/// leads, named by the leader itself, not by its number.
#[cfg(target_os = "linux")]
const PIDFD_SIGNAL_PROCESS_GROUP: libc::c_uint = 1 << 2;

impl Proc {
    /// A hold on the process now at `pid`. Take it while the caller knows
    /// that process is the one it means (it just read the number from a
    /// live daemon), or use [`Proc::proven`].
    #[cfg(target_os = "linux")]
    pub fn open(pid: i32) -> Option<Proc> {
        use std::os::fd::FromRawFd;
        if pid < 2 {
            return None;
        }
        // SAFETY: plain syscall; on success we own the descriptor.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        Some(Proc { pid, fd })
    }

    #[cfg(not(target_os = "linux"))]
    pub fn open(_pid: i32) -> Option<Proc> {
        None
    }

    /// A hold on the process at `pid` if `check` (which reads it by its
    /// number, in `/proc`) holds while the process is present before and
    /// after it, so that what `check` read was this process.
    pub fn proven(pid: i32, check: impl FnOnce(i32) -> bool) -> Option<Proc> {
        let held = Proc::open(pid)?;
        (held.present() && check(pid) && held.present()).then_some(held)
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the process still holds its number (running or a zombie).
    pub fn present(&self) -> bool {
        self.send(0, 0)
    }

    /// Whether it has ended (a zombie counts, as in `common::pid_gone`).
    #[cfg(target_os = "linux")]
    pub fn gone(&self) -> bool {
        use std::os::fd::AsRawFd;
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        unsafe { libc::poll(&mut pfd, 1, 0) == 1 }
    }

    #[cfg(not(target_os = "linux"))]
    pub fn gone(&self) -> bool {
        true
    }

    /// Sends `signal` to the process; whether it was delivered.
    pub fn signal(&self, signal: i32) -> bool {
        self.send(signal, 0)
    }

    /// Sends `signal` to the group the process leads: by the pidfd where
    /// the kernel allows it, else by the id only while the leader is
    /// present (which keeps the id its group's). Whether it was sent.
    pub fn signal_group(&self, signal: i32) -> bool {
        #[cfg(target_os = "linux")]
        {
            if self.send(signal, PIDFD_SIGNAL_PROCESS_GROUP) {
                return true;
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
                return false;
            }
        }
        // SAFETY: kill(2) on the group of a leader present just now.
        self.present() && unsafe { libc::kill(-self.pid, signal) } == 0
    }

    #[cfg(target_os = "linux")]
    fn send(&self, signal: i32, flags: libc::c_uint) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: plain syscall on our own descriptor; no siginfo.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd(),
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                flags,
            )
        };
        rc == 0
    }

    #[cfg(not(target_os = "linux"))]
    fn send(&self, _signal: i32, _flags: u32) -> bool {
        false
    }
}
