//! macOS side of [`super`]: a kqueue with an `EVFILT_PROC`/`NOTE_EXIT`
//! filter reports a child's exit (macOS has no pidfd), pipes keep the size
//! the kernel gives them (there is no `F_SETPIPE_SZ`; Darwin pipes grow to
//! 64 KiB on demand by themselves), `kill(pid, 0)` answers liveness (there
//! is no `/proc`), and Darwin's signal table names the exit frame's signal.
//!
//! There is no pidfd: [`super::pidref`] pins a process by its start time
//! (`proc_pidinfo`, or `sysctl(KERN_PROC_PID)` for a zombie), compared
//! again just before each signal.
//!
//! The kqueue only *observes* the exit: the child stays a zombie until
//! [`super::reap`], so its pgid stays pinned exactly as on Linux.
//!
//! XNU posts `NOTE_EXIT` from `proc_exit` before the process has become a
//! zombie, so a `waitid(WNOHANG)` right after the event can still find
//! nothing (libuv met the same race: "fix hang after NOTE_EXIT"). The
//! filter is one-shot, so [`take_exit_event`] tells the caller when the
//! kqueue has nothing more to say and it must wait by other means.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A kqueue watching `pid` for its exit: readable once the process has
/// exited. `None` when the kqueue cannot be made or the pid is already
/// gone (`ESRCH`); the caller then waits with a blocking `waitid`, which
/// returns at once for a zombie.
pub(crate) fn exit_notifier(pid: i32) -> Option<OwnedFd> {
    // SAFETY: plain syscall; on success we own the returned descriptor.
    let kq = unsafe { libc::kqueue() };
    if kq < 0 {
        return None;
    }
    // SAFETY: `kq` is a fresh descriptor nobody else owns.
    let kq = unsafe { OwnedFd::from_raw_fd(kq) };
    // SAFETY: fcntl on our own descriptor.
    unsafe { libc::fcntl(kq.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    let change = libc::kevent {
        ident: pid as libc::uintptr_t,
        filter: libc::EVFILT_PROC,
        flags: libc::EV_ADD | libc::EV_ONESHOT,
        fflags: libc::NOTE_EXIT,
        data: 0,
        udata: std::ptr::null_mut(),
    };
    // SAFETY: one change record in, no event buffer out.
    let rc = unsafe { libc::kevent(kq.as_raw_fd(), &change, 1, std::ptr::null_mut(), 0, std::ptr::null()) };
    (rc >= 0).then_some(kq)
}

/// No pidfd on macOS: [`super::pidref`] falls back to the start time.
pub(super) fn open_pidfd(_pid: i32) -> Option<OwnedFd> {
    None
}

/// Never called (there is no pidfd to send through).
pub(super) fn pidfd_signal(_fd: &OwnedFd, _signal: i32, _group: bool) -> std::io::Result<()> {
    Err(std::io::Error::from_raw_os_error(libc::ENOSYS))
}

/// When process `pid` started, in microseconds since the epoch; `None`
/// when there is no such process or it cannot be asked. First
/// `proc_pidinfo(PROC_PIDTBSDINFO)`, which may refuse a zombie (its task
/// is gone); then the `kinfo_proc` of `sysctl(KERN_PROC_PID)`, which lists
/// zombies too. Both read the same `p_start`, so a hold taken on a
/// running process still matches it once it is a zombie.
pub(super) fn start_time(pid: i32) -> Option<u64> {
    bsd_start_time(pid).or_else(|| kinfo(pid).map(|k| k.start))
}

fn bsd_start_time(pid: i32) -> Option<u64> {
    // SAFETY: a zeroed proc_bsdinfo is a valid out-parameter.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
    // SAFETY: the buffer is `size` bytes of a proc_bsdinfo we own.
    let n = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTBSDINFO,
            0,
            (&mut info as *mut libc::proc_bsdinfo).cast(),
            size,
        )
    };
    if n != size || info.pbi_pid != pid as u32 {
        return None;
    }
    Some(micros(info.pbi_start_tvsec, info.pbi_start_tvusec))
}

fn micros(sec: u64, usec: u64) -> u64 {
    sec.saturating_mul(1_000_000).saturating_add(usec)
}

/// Whether process `pid` is a zombie (exited, not reaped yet).
pub(super) fn zombie(pid: i32) -> bool {
    kinfo(pid).is_some_and(|k| k.zombie)
}

/// What `sysctl(KERN_PROC_PID)` says of a process (zombies included).
struct Kinfo {
    start: u64,
    zombie: bool,
}

/// The head of XNU's `struct extern_proc`, the first member of `struct
/// kinfo_proc` (libc does not declare them): `p_un` is a union of two
/// pointers and the `struct timeval p_starttime`, 16 bytes either way on
/// the 64-bit targets.
#[repr(C)]
struct ExternProcHead {
    p_starttime: libc::timeval,
    p_vmspace: *mut libc::c_void,
    p_sigacts: *mut libc::c_void,
    p_flag: libc::c_int,
    p_stat: libc::c_char,
    p_pid: libc::pid_t,
}

/// `sizeof(struct kinfo_proc)` on 64-bit macOS (x86_64 and arm64).
const KINFO_PROC_SIZE: usize = 648;
/// `p_stat` of a zombie (`<sys/proc.h>`).
const SZOMB: libc::c_char = 5;

fn kinfo(pid: i32) -> Option<Kinfo> {
    let mut mib = [libc::CTL_KERN, libc::KERN_PROC, libc::KERN_PROC_PID, pid];
    // u64s: a buffer aligned as the struct's pointers are.
    let mut buf = [0u64; KINFO_PROC_SIZE / 8];
    let mut len = KINFO_PROC_SIZE;
    // SAFETY: `buf` is `len` writable bytes; sysctl writes at most that
    // and says how many it wrote.
    let rc = unsafe {
        libc::sysctl(
            mib.as_mut_ptr(),
            mib.len() as libc::c_uint,
            buf.as_mut_ptr().cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    // No such process: success with nothing written.
    if rc != 0 || len < std::mem::size_of::<ExternProcHead>() {
        return None;
    }
    // SAFETY: at least a head's worth of bytes was written, into a buffer
    // aligned for it; every bit pattern is a valid ExternProcHead.
    let head: ExternProcHead = unsafe { std::ptr::read(buf.as_ptr().cast()) };
    if head.p_pid != pid {
        return None;
    }
    let tv = head.p_starttime;
    Some(Kinfo {
        start: micros(
            u64::try_from(tv.tv_sec).unwrap_or(0),
            u64::try_from(tv.tv_usec).unwrap_or(0),
        ),
        zombie: head.p_stat == SZOMB,
    })
}

/// Dequeues the pending exit event. True when one was dequeued: the
/// `EV_ONESHOT` filter is gone with it and the kqueue will never turn
/// readable again, even if the child is not waitable yet. False for a
/// readiness that brought no event; the filter is still armed then.
pub(crate) fn take_exit_event(fd: &OwnedFd) -> bool {
    // SAFETY: a zeroed kevent is a valid out-parameter.
    let mut event: libc::kevent = unsafe { std::mem::zeroed() };
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: room for one event, zero timeout: never blocks.
    let n = unsafe { libc::kevent(fd.as_raw_fd(), std::ptr::null(), 0, &mut event, 1, &zero) };
    n > 0
}

/// No spawner on macOS (it needs `CLONE_PARENT`): the daemon starts its
/// children itself.
pub(crate) fn spawn_via_helper(_req: &super::SpawnRequest<'_>) -> super::HelperSpawn {
    super::HelperSpawn::NoHelper(None)
}

/// No spawner to stop.
pub(crate) fn stop_spawner() {}

/// Spawner mode does not exist here: a usage error.
pub(crate) fn run_spawner() -> i32 {
    2
}

/// Darwin has no way to set a pipe's capacity: always false, so the
/// caller's grown-pipe budget is never charged.
pub(crate) fn resize_pipe(_fd: RawFd, _size: i32) -> bool {
    false
}

/// The SIG-prefixed name the exit frame's `signal` carries: Darwin's
/// signals 1..=31 under their canonical names (Go's names for darwin);
/// anything else has none and the frame omits `signal`.
pub(crate) fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGEMT => "SIGEMT",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGBUS => "SIGBUS",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGSYS => "SIGSYS",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGURG => "SIGURG",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGCONT => "SIGCONT",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGIO => "SIGIO",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGINFO => "SIGINFO",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => return None,
    })
}

/// Whether `pid` exists (a zombie counts): `kill(pid, 0)` succeeds, or
/// fails only for lack of permission.
#[cfg(test)]
pub(crate) fn pid_exists(pid: i32) -> bool {
    // SAFETY: signal 0 checks existence and sends nothing.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_cover_darwins_signals() {
        for n in 1..=31 {
            assert!(signal_name(n).is_some_and(|s| s.starts_with("SIG")), "{n}");
        }
        assert_eq!(signal_name(libc::SIGINFO), Some("SIGINFO"));
        assert_eq!(signal_name(0), None);
        assert_eq!(signal_name(32), None);
    }

    /// A zombie's start time is the one read while it ran, though
    /// `proc_pidinfo` may refuse it by then: a hold taken on the running
    /// process still names its zombie.
    #[test]
    fn a_zombie_keeps_the_start_time_it_ran_with() {
        let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
        let pid = child.id() as i32;
        let running = start_time(pid).expect("a running process's start time");
        assert_eq!(kinfo(pid).map(|k| k.start), Some(running), "both sources agree");
        assert!(!zombie(pid));
        child.kill().unwrap();
        assert!(super::super::exited_within(pid, std::time::Duration::from_secs(10)));
        assert!(zombie(pid), "observed, not reaped");
        assert_eq!(start_time(pid), Some(running));
        child.wait().unwrap();
        assert_eq!(start_time(pid), None);
        assert!(!zombie(pid));
    }

    #[test]
    fn the_kqueue_turns_readable_when_the_child_exits() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 0.1; exit 3"])
            .spawn()
            .unwrap();
        let kq = exit_notifier(child.id() as i32).expect("kqueue");
        let mut pfd = libc::pollfd {
            fd: kq.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 10_000) };
        assert_eq!(n, 1, "the kqueue became readable");
        assert!(take_exit_event(&kq), "the readiness carried the exit event");
        assert!(!take_exit_event(&kq), "one-shot: nothing further queued");
        assert!(pid_exists(child.id() as i32), "observed, not reaped");
        assert_eq!(child.wait().unwrap().code(), Some(3));
    }
}
