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
//!   SIGTSTP, SIGTTIN, SIGTTOU and SIGPROF. SIGPIPE is std's job: the
//!   daemon ignores it and `Command` restores it in every child.
//! - An ignored SIGCHLD would make the kernel reap children on its own, so
//!   every exit code would be lost: it goes back to its default.
//! - Faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT) and
//!   the signals whose default is to do nothing (SIGURG, SIGWINCH,
//!   SIGCONT) go back to their default.
//! - Every other ignored signal gets a handler that does nothing: the
//!   daemon goes on ignoring it, and its children start with the default.

use libc::c_int;

/// Inherited ignores that stay, for the daemon and its children.
const KEPT: [c_int; 8] = [
    libc::SIGHUP,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGPROF,
    libc::SIGPIPE,
    libc::SIGKILL,
    libc::SIGSTOP,
];

/// Signals restored to their default action when inherited ignored.
const TO_DEFAULT: [c_int; 11] = [
    libc::SIGCHLD,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
    libc::SIGABRT,
    libc::SIGURG,
    libc::SIGWINCH,
    libc::SIGCONT,
];

/// What happens to one signal found ignored at start.
#[derive(Debug, PartialEq, Eq)]
pub enum Reset {
    /// Stays ignored, here and in children.
    Kept,
    /// Back to the default action.
    Default,
    /// A handler that does nothing: ignored here, default in children.
    NoOp,
}

/// The rule for `signal`, had it been ignored at start.
pub fn rule(signal: c_int) -> Reset {
    if KEPT.contains(&signal) {
        Reset::Kept
    } else if TO_DEFAULT.contains(&signal) {
        Reset::Default
    } else {
        Reset::NoOp
    }
}

/// Every signal number a process can hold a disposition for.
fn all_signals() -> impl Iterator<Item = c_int> {
    // macOS has no real-time signals.
    #[cfg(target_os = "linux")]
    let realtime = libc::SIGRTMIN()..libc::SIGRTMAX() + 1;
    #[cfg(not(target_os = "linux"))]
    let realtime = 0..0;
    (1..32).chain(realtime)
}

extern "C" fn ignore(_: c_int) {}

/// The launcher's share: it waits for the daemon it starts, which an
/// ignored SIGCHLD would make impossible (`wait` fails with ECHILD). The
/// rest of what it inherited it hands on untouched, for the daemon's own
/// [`reset_inherited`] to sort out.
pub fn restore_sigchld() {
    // SAFETY: sets SIGCHLD's disposition to its default; no handler runs.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
    }
}

/// Applies [`rule`] to every signal the process inherited ignored; returns
/// those it changed. Must run before any thread starts: dispositions are
/// process-wide, and a child forked meanwhile would see half of them.
pub fn reset_inherited() -> Vec<c_int> {
    let mut changed = Vec::new();
    for signal in all_signals() {
        // SAFETY: sigaction with a null new action only reads the current
        // disposition into a zeroed struct this frame owns.
        let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
        if unsafe { libc::sigaction(signal, std::ptr::null(), &mut current) } != 0 {
            continue;
        }
        if current.sa_sigaction != libc::SIG_IGN {
            continue;
        }
        let handler = match rule(signal) {
            Reset::Kept => continue,
            Reset::Default => libc::SIG_DFL,
            Reset::NoOp => ignore as extern "C" fn(c_int) as libc::sighandler_t,
        };
        // SAFETY: installs SIG_DFL or a handler that touches nothing, with
        // an empty mask; SA_RESTART keeps system calls from seeing EINTR.
        let ok = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut()) == 0
        };
        if ok {
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
        for s in [libc::SIGHUP, libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU, libc::SIGPROF] {
            assert_eq!(rule(s), Reset::Kept, "signal {s}");
        }
        assert_eq!(rule(libc::SIGCHLD), Reset::Default);
        assert_eq!(rule(libc::SIGSEGV), Reset::Default);
        for s in [libc::SIGINT, libc::SIGQUIT, libc::SIGUSR1, libc::SIGTERM, libc::SIGXFSZ] {
            assert_eq!(rule(s), Reset::NoOp, "signal {s}");
        }
    }

    #[test]
    fn every_rule_lists_a_signal_once() {
        for s in KEPT {
            assert!(!TO_DEFAULT.contains(&s), "signal {s} in both lists");
        }
    }
}
