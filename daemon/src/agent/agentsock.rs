//! The SSH agent hand-off of `process.spawn`:
//! a child whose environment has no `SSH_AUTH_SOCK` entry at all gets the
//! agent socket the user's login shell exports.
//!
//! A daemon started from a bare SSH command line (or a service manager)
//! usually has no agent, while the user's interactive shells do: their
//! profiles start one or point at a forwarded one. Git over SSH in a
//! spawned agent CLI needs it. The rules, as the sources measured them:
//!
//! * the login shell (`<shell> -l -i -c <script>`, shell chosen by
//!   [`login_shell`]) runs at the first spawn that needs a socket, never at
//!   start-up, with [`RUN_DEADLINE`]; only its stdout is read, and the line
//!   after a per-run random marker is the answer (empty: no agent; it must
//!   be an absolute path);
//! * the socket must accept a connection within [`DIAL_TIMEOUT`]; a
//!   connection attempt still not back after [`DIAL_BOUND`] (a hung file
//!   system) ends the hand-off for the daemon's life;
//! * the answer is cached: a cached socket that still accepts is handed on
//!   with no shell run and no log line; the shell runs again only
//!   [`REPROBE_AFTER`] after its last run, and not at all after
//!   [`MAX_FAILURES`] failed runs in a row (a success resets the count);
//! * a spawn never fails because of this step; each shell run and each
//!   give-up logs one `[shellenv]` line.
//!
//! Remora's own additions (divergences, `docs/PROTOCOL.md`): the path must
//! be an absolute path to a socket owned by the daemon's user, every link
//! on the way owned by that user or root and every directory it passes
//! through beyond another user's reach ([`crate::agent::sockpath`]),
//! before it is dialled or handed on, so a socket another local user planted at a path a profile
//! names (a stale `/tmp` agent path, say) never reaches a child; and the
//! socket the daemon itself inherited passes the same test ([`HandOff::vet`])
//! before a child gets it.
//!
//! One [`HandOff`] serves the whole daemon; its lock is held across a
//! shell run, so concurrent spawns that need a socket wait for the one run
//! in flight. Abandoned connection attempts are bounded: a thread stuck in
//! one ends the hand-off, so at most one is ever left behind.

use std::time::{Duration, Instant};

/// The variable a child's agent socket is passed in.
pub(crate) const AGENT_SOCK_ENV: &str = "SSH_AUTH_SOCK";
/// How long the login shell may take to print the socket.
pub(crate) const RUN_DEADLINE: Duration = Duration::from_secs(4);
/// How long a socket may take to accept a connection and still count as live.
pub(crate) const DIAL_TIMEOUT: Duration = Duration::from_millis(250);
/// A connection attempt not returned by then ends the hand-off for good.
pub(crate) const DIAL_BOUND: Duration = Duration::from_millis(500);
/// The earliest the login shell runs again after its last run.
pub(crate) const REPROBE_AFTER: Duration = Duration::from_secs(600);
/// Failed runs in a row after which the shell is not asked again.
pub(crate) const MAX_FAILURES: u32 = 3;
/// How much of a bad answer a log line quotes.
const QUOTE_BYTES: usize = 200;

pub(crate) use crate::agent::loginshell::login_shell;

/// The hand-off's tunable clock, so tests need not wait ten minutes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub run_deadline: Duration,
    pub reprobe_after: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            run_deadline: RUN_DEADLINE,
            reprobe_after: REPROBE_AFTER,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// When the login shell last ran.
    last_run: Option<Instant>,
    /// Failed runs in a row; [`MAX_FAILURES`] once the hand-off has ended.
    failures: u32,
    /// The last socket the shell exported, live or not.
    sock: Option<String>,
}

/// What one look at a socket path found.
#[derive(Debug, PartialEq, Eq)]
enum Check {
    Live,
    /// Not usable now (the reason, for the log).
    Dead(String),
    /// The attempt did not come back within [`DIAL_BOUND`].
    Hung,
}

/// The daemon-wide hand-off state.
#[derive(Debug)]
pub(crate) struct HandOff {
    state: tokio::sync::Mutex<State>,
    timing: Timing,
    /// The shell to run; `None` means [`login_shell`] at each run.
    shell: Option<String>,
}

impl Default for HandOff {
    fn default() -> Self {
        HandOff::new(Timing::default(), None)
    }
}

impl HandOff {
    pub(crate) fn new(timing: Timing, shell: Option<String>) -> HandOff {
        HandOff {
            state: tokio::sync::Mutex::new(State::default()),
            timing,
            shell,
        }
    }

    /// A socket to hand to a child that has none, or `None`.
    pub(crate) async fn socket(&self) -> Option<String> {
        let mut st = self.state.lock().await;
        if let Some(sock) = st.sock.clone() {
            match check(&sock).await {
                Check::Live => return Some(sock),
                Check::Hung => {
                    give_up(&mut st, &sock);
                    return None;
                }
                Check::Dead(_) => {}
            }
        }
        let due = st.last_run.is_none_or(|t| t.elapsed() >= self.timing.reprobe_after);
        if !due || st.failures >= MAX_FAILURES {
            return None;
        }
        if let Some(sock) = &st.sock {
            crate::log_warn!(
                "[shellenv] {AGENT_SOCK_ENV}={} no longer accepts connections; asking the login shell again",
                crate::base::logging::Untrusted(sock)
            );
        }
        let shell = self.shell.clone().unwrap_or_else(login_shell);
        let answer = ask_shell(&shell, self.timing.run_deadline).await;
        st.last_run = Some(Instant::now());
        let sock = match answer {
            Err(why) => {
                st.failures += 1;
                crate::log_warn!(
                    "[shellenv] No {AGENT_SOCK_ENV} from login shell {shell}: {}; {}",
                    crate::base::logging::Untrusted(&why),
                    self.budget_note(st.failures)
                );
                return None;
            }
            Ok(None) => {
                st.sock = None;
                st.failures += 1;
                crate::log_info!(
                    "[shellenv] Login shell {shell} exports no {AGENT_SOCK_ENV}; {}",
                    self.budget_note(st.failures)
                );
                return None;
            }
            Ok(Some(sock)) => sock,
        };
        st.sock = Some(sock.clone());
        match check(&sock).await {
            Check::Live => {
                st.failures = 0;
                crate::log_info!(
                    "[shellenv] Login shell {shell} exports {AGENT_SOCK_ENV}={}; children without one get it",
                    crate::base::logging::Untrusted(&sock)
                );
                Some(sock)
            }
            Check::Hung => {
                give_up(&mut st, &sock);
                None
            }
            Check::Dead(why) => {
                st.failures += 1;
                crate::log_warn!(
                    "[shellenv] Login shell {shell} exports {AGENT_SOCK_ENV}={}, not handed on: {why}; {}",
                    crate::base::logging::Untrusted(&sock),
                    self.budget_note(st.failures)
                );
                None
            }
        }
    }

    /// Whether `path`, an agent socket the daemon inherited, may reach a
    /// child: the same test as the login shell's answer. A refusal is
    /// logged; an empty value (an opt-out) passes.
    pub(crate) async fn vet(&self, path: &str) -> bool {
        if path.is_empty() {
            return true;
        }
        match check(path).await {
            Check::Live => true,
            Check::Hung => {
                crate::log_warn!(
                    "[shellenv] The daemon's own {AGENT_SOCK_ENV}={} did not answer in time; not handed on",
                    crate::base::logging::Untrusted(path)
                );
                false
            }
            Check::Dead(why) => {
                crate::log_warn!(
                    "[shellenv] The daemon's own {AGENT_SOCK_ENV}={} is not handed on: {}",
                    crate::base::logging::Untrusted(path),
                    crate::base::logging::Untrusted(&why)
                );
                false
            }
        }
    }

    fn budget_note(&self, failures: u32) -> String {
        if failures >= MAX_FAILURES {
            format!("failed run {failures} of {MAX_FAILURES}, not asking again")
        } else {
            format!(
                "failed run {failures} of {MAX_FAILURES}, asking again in {}s at the earliest",
                self.timing.reprobe_after.as_secs()
            )
        }
    }
}

/// Ends the hand-off for the daemon's life (a connection attempt hung).
fn give_up(st: &mut State, sock: &str) {
    st.sock = None;
    st.failures = MAX_FAILURES;
    crate::log_warn!(
        "[shellenv] Connecting to {AGENT_SOCK_ENV}={} did not return within {}ms (hung file system?); no agent socket is handed on for the rest of this daemon's life",
        crate::base::logging::Untrusted(sock),
        DIAL_BOUND.as_millis()
    );
}

/// Whether `path` is a socket of ours that accepts a connection in time.
/// Runs on a blocking thread: a path on a hung file system blocks the
/// lookup itself, which no timeout inside the thread could interrupt.
async fn check(path: &str) -> Check {
    let owned = path.to_string();
    let started = Instant::now();
    let attempt = tokio::task::spawn_blocking(move || check_blocking(&owned));
    match tokio::time::timeout(DIAL_BOUND, attempt).await {
        Err(_) => Check::Hung,
        Ok(Err(_)) => Check::Dead("the check failed".to_string()),
        Ok(Ok(Ok(()))) if started.elapsed() <= DIAL_TIMEOUT => Check::Live,
        Ok(Ok(Ok(()))) => Check::Dead(format!("it took over {}ms to accept", DIAL_TIMEOUT.as_millis())),
        Ok(Ok(Err(why))) => Check::Dead(why),
    }
}

fn check_blocking(path: &str) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    // The path is handed on as it is and a child resolves it again later:
    // every link and directory it passes through must be beyond another
    // user's reach, not only the last one.
    crate::agent::sockpath::vet(path, me)?;
    connect_within(path, DIAL_TIMEOUT)
}

/// A non-blocking connect, waited for up to `limit`, then closed.
fn connect_within(path: &str, limit: Duration) -> Result<(), String> {
    use nix::sys::socket::{connect, UnixAddr};
    let addr = UnixAddr::new(path).map_err(|e| e.desc().to_string())?;
    let fd = probe_socket()?;
    match connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &addr) {
        Ok(()) => return Ok(()),
        Err(nix::errno::Errno::EINPROGRESS) => {}
        Err(e) => return Err(e.desc().to_string()),
    }
    let mut fds = [nix::poll::PollFd::new(
        std::os::fd::AsFd::as_fd(&fd),
        nix::poll::PollFlags::POLLOUT,
    )];
    let ms = u16::try_from(limit.as_millis()).unwrap_or(u16::MAX);
    match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)) {
        Ok(0) => Err("it did not accept a connection in time".to_string()),
        Ok(_) => match nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::SocketError) {
            Ok(0) => Ok(()),
            Ok(errno) => Err(nix::errno::Errno::from_raw(errno).desc().to_string()),
            Err(e) => Err(e.desc().to_string()),
        },
        Err(e) => Err(e.desc().to_string()),
    }
}

/// A non-blocking, close-on-exec Unix stream socket: a child forked while
/// a check runs must not keep a connection to the user's agent.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn probe_socket() -> Result<std::os::fd::OwnedFd, String> {
    use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
    socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .map_err(|e| e.desc().to_string())
}

/// As on Linux; macOS has no atomic flags, so they are set right after.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn probe_socket() -> Result<std::os::fd::OwnedFd, String> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
    let fd =
        socket(AddressFamily::Unix, SockType::Stream, SockFlag::empty(), None).map_err(|e| e.desc().to_string())?;
    fcntl(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC),
    )
    .map_err(|e| e.desc().to_string())?;
    set_nonblocking(&fd)?;
    Ok(fd)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn set_nonblocking(fd: &std::os::fd::OwnedFd) -> Result<(), String> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let raw = std::os::fd::AsRawFd::as_raw_fd(fd);
    let flags = fcntl(raw, FcntlArg::F_GETFL).map_err(|e| e.desc().to_string())?;
    fcntl(
        raw,
        FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
    )
    .map_err(|e| e.desc().to_string())?;
    Ok(())
}

/// The login shell's environment: the daemon's own without its markers,
/// the SSH session variables and any token, plus the three settings that
/// quieten shell frameworks and tell a profile it is being resolved.
fn shell_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    use std::os::unix::ffi::OsStrExt;
    let dropped = |k: &[u8]| {
        k.starts_with(b"CLAUDE_SSH_")
            || matches!(k, b"SSH_CONNECTION" | b"SSH_CLIENT" | b"SSH_TTY" | b"CLAUDE_RPC_TOKEN")
            || matches!(
                k,
                b"DISABLE_AUTO_UPDATE" | b"ZSH_DISABLE_COMPFIX" | b"CLAUDE_DESKTOP_RESOLVING_ENVIRONMENT"
            )
    };
    let mut env: Vec<_> = std::env::vars_os().filter(|(k, _)| !dropped(k.as_bytes())).collect();
    for (k, v) in [
        ("DISABLE_AUTO_UPDATE", "true"),
        ("ZSH_DISABLE_COMPFIX", "true"),
        ("CLAUDE_DESKTOP_RESOLVING_ENVIRONMENT", "1"),
    ] {
        env.push((k.into(), v.into()));
    }
    env
}

/// Runs the login shell once: `Ok(Some(path))`, `Ok(None)` when it
/// exports no agent socket, `Err(why)` when it gave no usable answer.
async fn ask_shell(shell: &str, deadline: Duration) -> Result<Option<String>, String> {
    let marker = format!("__REMORA_AGENT_SOCK_{}__", crate::base::instance::Instance::new().id);
    let script = format!("printf '%s\\n%s\\n' {marker} \"${AGENT_SOCK_ENV}\"");
    let answered = |out: &[u8]| answer_after(out, &marker).is_some();
    let run = crate::agent::loginshell::ask(shell, &script, Some(shell_env()), deadline, answered).await;
    let out = match run {
        Err(e) => return Err(format!("it did not start: {}", crate::base::goerr::io_text(&e))),
        Ok(None) => return Err(format!("it did not answer within {}s", deadline.as_secs())),
        Ok(Some(out)) => out,
    };
    match answer_after(&out, &marker) {
        Some(line) if line.is_empty() => Ok(None),
        Some(line) if line.starts_with('/') => Ok(Some(line)),
        Some(line) => Err(format!("it printed something other than a path: {}", quote(&line))),
        None => Err("it did not print the variable".to_string()),
    }
}

/// The trimmed line after the marker line, once that line is complete.
fn answer_after(out: &[u8], marker: &str) -> Option<String> {
    let text = String::from_utf8_lossy(out);
    let start = text.find(&format!("{marker}\n"))? + marker.len() + 1;
    let rest = &text[start..];
    let end = rest.find('\n')?;
    Some(rest[..end].trim().to_string())
}

fn quote(s: &str) -> String {
    let mut cut = s.len().min(QUOTE_BYTES);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    if cut < s.len() {
        format!("{}...", &s[..cut])
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake login shell exporting `sock` (or nothing when empty) and
    /// counting its runs in `<dir>/runs`.
    fn fake_shell(dir: &std::path::Path, sock: &str) -> String {
        let path = dir.join("shell");
        let runs = dir.join("runs");
        let script = format!(
            "#!/bin/sh\necho run >> '{}'\nSSH_AUTH_SOCK='{sock}'; export SSH_AUTH_SOCK\necho profile noise\nexec /bin/sh -c \"$4\"\n",
            runs.display()
        );
        // Written by a child of its own: a descriptor open for writing in
        // this process would be inherited by a sibling test's fork, and
        // the exec of the script would then fail with ETXTBSY.
        let mut writer = std::process::Command::new("/bin/sh")
            .args(["-c", "cat > \"$0\" && chmod 755 \"$0\""])
            .arg(&path)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut writer.stdin.take().unwrap(), script.as_bytes()).unwrap();
        assert!(writer.wait().unwrap().success());
        path.to_string_lossy().into_owned()
    }

    fn runs(dir: &std::path::Path) -> usize {
        std::fs::read_to_string(dir.join("runs"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    #[test]
    fn the_answer_is_the_line_after_the_marker() {
        assert_eq!(answer_after(b"noise\nM\n/a/b \nmore", "M").as_deref(), Some("/a/b"));
        assert_eq!(answer_after(b"M\n\n", "M").as_deref(), Some(""));
        assert_eq!(answer_after(b"M\n/a", "M"), None, "the line is not complete yet");
        assert_eq!(answer_after(b"xM\n", "M"), None);
        assert_eq!(quote(&"é".repeat(150)).len(), 200 + 3);
        assert_eq!(
            quote(&format!("{}é", "a".repeat(199))).len(),
            199 + 3,
            "cut at a character boundary"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_live_socket_is_cached_and_a_missing_one_is_not_handed_on() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("agent.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let shell = fake_shell(dir.path(), &sock.to_string_lossy());
        let hand = HandOff::new(Timing::default(), Some(shell));
        assert_eq!(hand.socket().await.as_deref(), Some(&*sock.to_string_lossy()));
        assert_eq!(hand.socket().await.as_deref(), Some(&*sock.to_string_lossy()));
        assert_eq!(runs(dir.path()), 1, "the second answer comes from the cache");

        let other = tempfile::tempdir().unwrap();
        let shell = fake_shell(other.path(), "/nonexistent/agent.sock");
        let hand = HandOff::new(Timing::default(), Some(shell));
        assert_eq!(hand.socket().await, None);
        assert_eq!(hand.socket().await, None);
        assert_eq!(runs(other.path()), 1, "not asked again before the re-ask delay");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn three_failed_runs_end_the_asking() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("not-a-socket");
        std::fs::write(&plain, "").unwrap();
        let shell = fake_shell(dir.path(), &plain.to_string_lossy());
        let timing = Timing {
            reprobe_after: Duration::ZERO,
            ..Timing::default()
        };
        let hand = HandOff::new(timing, Some(shell));
        for _ in 0..5 {
            assert_eq!(hand.socket().await, None, "a regular file is never handed on");
        }
        assert_eq!(runs(dir.path()), MAX_FAILURES as usize);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_relative_answer_or_a_silent_shell_is_no_socket() {
        let dir = tempfile::tempdir().unwrap();
        let hand = HandOff::new(Timing::default(), Some(fake_shell(dir.path(), "agent.sock")));
        assert_eq!(hand.socket().await, None);
        let hand = HandOff::new(Timing::default(), Some("/bin/false".to_string()));
        assert_eq!(hand.socket().await, None);
    }

    #[test]
    fn the_shell_env_drops_markers_and_session_variables() {
        let env = shell_env();
        let keys: Vec<_> = env.iter().map(|(k, _)| k.to_string_lossy().into_owned()).collect();
        assert!(!keys
            .iter()
            .any(|k| k.starts_with("CLAUDE_SSH_") || k == "SSH_TTY" || k == "CLAUDE_RPC_TOKEN"));
        assert!(env
            .iter()
            .any(|(k, v)| k == "CLAUDE_DESKTOP_RESOLVING_ENVIRONMENT" && v == "1"));
    }
}
