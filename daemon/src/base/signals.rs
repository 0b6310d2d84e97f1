//! The signal dispositions the daemon inherits and hands on to children.
//!
//! An ignored signal survives `exec`, so whatever started the daemon
//! decides what its children ignore: `nohup` ignores SIGHUP, a
//! non-interactive shell's `cmd &` ignores SIGINT and SIGQUIT, a Python
//! supervisor ignores SIGXFSZ and sometimes SIGCHLD. A Go daemon hides
//! most of that, because its runtime installs a handler for nearly every
//! signal at start and handlers are reset by `exec`. [`reset_inherited`]
//! gives the same result, once, before the first thread exists:
//!
//! - Left ignored, as Go leaves them: SIGHUP (the point of `nohup`),
//!   SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT and the real-time signals glibc
//!   keeps for itself (up to 34). SIGPIPE is std's job: the daemon ignores
//!   it and `Command` restores it in every child.
//! - An ignored SIGCHLD would make the kernel reap children on its own, so
//!   every exit code would be lost: it goes back to its default, in every
//!   mode ([`restore_sigchld`]).
//! - SIGQUIT, the faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS,
//!   SIGABRT) and the signals whose default is to do nothing (SIGURG,
//!   SIGWINCH) go back to their default when inherited ignored: Go dies on
//!   SIGQUIT too.
//! - The signals Go's runtime catches and drops unless asked for them
//!   (SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ,
//!   SIGIO, SIGPWR, real-time 35 and up) get a handler that does nothing,
//!   whether inherited ignored or not: `kill -USR1` does not kill the
//!   daemon, a replay write past `RLIMIT_FSIZE` gets EFBIG instead of a
//!   SIGXFSZ death, and children start with the default.
//! - Any other inherited ignore (SIGINT, SIGTERM, which the daemon then
//!   handles itself) gets the same no-op handler.

use libc::c_int;

/// Inherited ignores that stay, for the daemon and its children.
const KEPT: [c_int; 8] = [
    libc::SIGHUP,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGCONT,
    libc::SIGPIPE,
    libc::SIGKILL,
    libc::SIGSTOP,
];

/// Signals restored to their default action when inherited ignored.
const TO_DEFAULT: [c_int; 11] = [
    libc::SIGCHLD,
    libc::SIGQUIT,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
    libc::SIGABRT,
    libc::SIGURG,
    libc::SIGWINCH,
];

/// Signals the daemon catches and drops whatever it inherited, as Go's
/// runtime does for signals nobody asked to be notified of (Linux adds
/// SIGPWR and the real-time signals, see [`is_dropped`]).
const DROPPED: [c_int; 8] = [
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGIO,
];

/// What happens to one signal at start.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reset {
    /// Left as inherited.
    Kept,
    /// Back to the default action (only when inherited ignored).
    Default,
    /// A handler that does nothing: dropped here, default in children.
    NoOp,
}

/// The rule for `signal`, given whether it was inherited ignored.
pub(crate) fn rule(signal: c_int, ignored: bool) -> Reset {
    if KEPT.contains(&signal) || is_glibc_realtime(signal) {
        Reset::Kept
    } else if is_dropped(signal) {
        Reset::NoOp
    } else if !ignored {
        Reset::Kept
    } else if TO_DEFAULT.contains(&signal) {
        Reset::Default
    } else {
        Reset::NoOp
    }
}

fn is_dropped(signal: c_int) -> bool {
    crate::sys::os::is_platform_dropped_signal(signal) || DROPPED.contains(&signal)
}

fn is_glibc_realtime(signal: c_int) -> bool {
    crate::sys::os::is_libc_reserved_signal(signal)
}

/// Every signal number a process can hold a disposition for (macOS has no
/// real-time signals).
fn all_signals() -> impl Iterator<Item = c_int> {
    (1..32).chain(crate::sys::os::realtime_signals())
}

extern "C" fn ignore(_: c_int) {}

/// Restores SIGCHLD if it was inherited ignored, in every mode: `-install`
/// waits for the CLI it probes and the launcher for the daemon it starts,
/// and with SIGCHLD ignored `wait` fails with ECHILD. Anything else
/// inherited is left for the daemon's own [`reset_inherited`].
pub(crate) fn restore_sigchld() {
    if disposition(libc::SIGCHLD) == Some(libc::SIG_IGN) {
        set_disposition(libc::SIGCHLD, libc::SIG_DFL);
    }
}

/// `signal`'s current handler (`SIG_IGN`, `SIG_DFL` or a function).
fn disposition(signal: c_int) -> Option<libc::sighandler_t> {
    // SAFETY: sigaction with a null new action only reads the current
    // disposition into a zeroed struct this frame owns.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(signal, std::ptr::null(), &mut current) == 0).then_some(current.sa_sigaction)
    }
}

/// Installs `handler` (`SIG_DFL` or a function that touches nothing) with
/// an empty mask; SA_RESTART keeps system calls from seeing EINTR.
fn set_disposition(signal: c_int, handler: libc::sighandler_t) -> bool {
    // SAFETY: see above; the action is fully initialised before use.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut()) == 0
    }
}

/// Applies [`rule`] to every signal; returns those it changed. Must run
/// before any thread starts: dispositions are process-wide, and a child
/// forked meanwhile would see half of them.
pub(crate) fn reset_inherited() -> Vec<c_int> {
    let mut changed = Vec::new();
    for signal in all_signals() {
        let Some(current) = disposition(signal) else {
            continue;
        };
        let ignored = current == libc::SIG_IGN;
        if !ignored && current != libc::SIG_DFL {
            // Someone's handler (none exists this early, but never undo one).
            continue;
        }
        let handler = match rule(signal, ignored) {
            Reset::Kept => continue,
            Reset::Default => libc::SIG_DFL,
            Reset::NoOp => ignore as extern "C" fn(c_int) as libc::sighandler_t,
        };
        if set_disposition(signal, handler) {
            changed.push(signal);
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_follow_what_go_leaves_to_children() {
        for s in [libc::SIGHUP, libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU, libc::SIGCONT] {
            assert_eq!(rule(s, true), Reset::Kept, "signal {s}");
        }
        for s in [libc::SIGCHLD, libc::SIGQUIT, libc::SIGSEGV] {
            assert_eq!(rule(s, true), Reset::Default, "signal {s}");
            assert_eq!(rule(s, false), Reset::Kept, "signal {s} at its default");
        }
        for s in [libc::SIGINT, libc::SIGTERM] {
            assert_eq!(rule(s, true), Reset::NoOp, "signal {s}");
            assert_eq!(rule(s, false), Reset::Kept, "signal {s} at its default");
        }
        for s in [libc::SIGUSR1, libc::SIGXFSZ, libc::SIGPROF, libc::SIGALRM] {
            assert_eq!(rule(s, true), Reset::NoOp, "signal {s}");
            assert_eq!(rule(s, false), Reset::NoOp, "signal {s} at its default");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn glibcs_realtime_signals_are_left_alone_and_the_rest_dropped() {
        for s in 32..35 {
            assert_eq!(rule(s, true), Reset::Kept, "signal {s}");
        }
        assert_eq!(rule(35, false), Reset::NoOp);
        assert_eq!(rule(libc::SIGPWR, false), Reset::NoOp);
        assert_eq!(rule(libc::SIGRTMAX(), true), Reset::NoOp);
    }

    #[test]
    fn every_signal_is_in_one_list_at_most() {
        for s in KEPT.iter().chain(TO_DEFAULT.iter()) {
            assert!(!DROPPED.contains(s), "signal {s} also dropped");
        }
        for s in KEPT {
            assert!(!TO_DEFAULT.contains(&s), "signal {s} in both lists");
        }
    }
}
