//! `-stop`: end the daemon serving a socket, the way the Desktop client
//! does it from a bare SSH command line (no `CLAUDE_RPC_TOKEN`), and print
//! one word saying what happened.
//!
//! Two paths, chosen by whether the socket answers a connect:
//!
//! - **It answers** → `server.shutdown`. The later reference builds serve
//!   that method without auth; remora keeps seed 000's hardening (a
//!   token-less frame gets `-32001`), so `-stop` itself authenticates:
//!   with `CLAUDE_RPC_TOKEN` when set, else (or when that one is refused)
//!   with the `daemon.token` the daemon wrote beside its socket. Whoever
//!   can read that file could have sent the frame anyway, so nothing is
//!   given away. The word is `stopped` whatever the daemon answered, as
//!   the reference prints it; a refusal is explained on stderr. Nothing is
//!   removed on this path. Before any token is written, the listener must
//!   be the user's or root's (the peer's uid, `SO_PEERCRED` /
//!   `getpeereid`; remora's rule, item 8 of the third audit): a socket
//!   path another user took over gets nothing. Then the word is
//!   `survivor`, stderr says whose listener it is, and the exit code is 1.
//! - **It does not** → the run-dir lock decides. A free or missing
//!   `daemon.lock` means nobody serves: `none`. A holder that
//!   [`crate::rundir::runlock::prove`] proves to be this program's `-serve` of
//!   this socket gets SIGTERM (4 s), then SIGKILL (1.5 s), both through
//!   the hold the proof was made on (a pidfd on Linux): `terminated`,
//!   `killed`, or `survivor` if it outlives both. A holder that is not
//!   provably ours is never signalled: `survivor`. Except after
//!   `survivor`, the socket path and `daemon.token` are then removed,
//!   stale or not, through a directory descriptor that follows no link
//!   and only where nobody else can change the directory (remora's rule:
//!   the reference removes by path, so a root `-stop` followed a user's
//!   link). `daemon.lock` itself is never created, locked, written or
//!   removed here.
//!
//! The exit code is 0, except after a listener of another user (1).

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long `-stop` waits for an answer, and then for the daemon to exit.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// The lock path's graces (measured on the reference's `-stop`).
const TERM_GRACE: Duration = Duration::from_secs(4);
const KILL_GRACE: Duration = Duration::from_millis(1500);
const POLL: Duration = Duration::from_millis(20);

/// What `-stop` prints, one word and a newline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The socket answered and was asked to shut down.
    Stopped,
    /// Nothing answered and nothing holds the run dir.
    None,
    /// A silent daemon holding the run dir ended on SIGTERM.
    Terminated,
    /// … or only on SIGKILL.
    Killed,
    /// The holder was not ours to signal, or outlived SIGKILL.
    Survivor,
}

impl Outcome {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Outcome::Stopped => "stopped",
            Outcome::None => "none",
            Outcome::Terminated => "terminated",
            Outcome::Killed => "killed",
            Outcome::Survivor => "survivor",
        }
    }
}

/// Runs `-stop` for `socket`; returns the exit code (0, or 1 when the
/// listener was another user's).
pub(crate) fn stop(socket: &Path) -> i32 {
    let mut code = 0;
    let outcome = match UnixStream::connect(socket) {
        Ok(stream) => match shut_down(stream, socket) {
            Ok(()) => Outcome::Stopped,
            Err(why) => {
                eprintln!("remora: stop: {why}");
                code = 1;
                Outcome::Survivor
            }
        },
        Err(_) => {
            let outcome = end_lock_holder(socket);
            if outcome != Outcome::Survivor {
                remove_leftovers(socket);
            }
            outcome
        }
    };
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{}", outcome.word());
    let _ = out.flush();
    code
}

/// Whether the listener at the other end of `stream` may be given a
/// token: its uid is ours or root's. `Err` says whose it is, or that its
/// uid cannot be read (which counts as another user's).
fn trusted_listener(stream: &UnixStream, socket: &Path) -> Result<(), String> {
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    match crate::sys::os::peer_uid(std::os::fd::AsRawFd::as_raw_fd(stream)) {
        Some(uid) if uid == me || uid == 0 => Ok(()),
        Some(uid) => Err(format!(
            "{} is served by uid {uid}, not by this user (uid {me}) or root: no token was sent and nothing was stopped",
            socket.display()
        )),
        None => Err(format!(
            "{}: the listener's uid cannot be read, so it may be another user's: no token was sent and nothing was stopped",
            socket.display()
        )),
    }
}

/// The connect path: tries each credential until one is accepted. `Err`
/// when a listener is not the user's or root's ([`trusted_listener`]):
/// nothing was sent to it.
fn shut_down(first: UnixStream, socket: &Path) -> Result<(), String> {
    let mut credentials: Vec<Vec<u8>> = Vec::new();
    if let Some(token) = std::env::var_os("CLAUDE_RPC_TOKEN").filter(|t| !t.is_empty()) {
        credentials.push(std::os::unix::ffi::OsStrExt::as_bytes(token.as_os_str()).to_vec());
    }
    if let Some(token) = read_token_file(&crate::rundir::tokenfile::path_for(socket)) {
        if !credentials.contains(&token) {
            credentials.push(token);
        }
    }
    if credentials.is_empty() {
        // Nothing to authenticate with: the daemon will refuse, and says so.
        credentials.push(Vec::new());
    }
    let mut stream = Some(first);
    let mut refusal = Vec::new();
    for token in &credentials {
        let conn = match stream.take() {
            Some(s) => s,
            None => match UnixStream::connect(socket) {
                Ok(s) => s,
                // Gone meanwhile: whatever stopped it, it is stopped.
                Err(_) => return Ok(()),
            },
        };
        // Every connection: the path may have changed hands in between.
        trusted_listener(&conn, socket)?;
        match ask(conn, token) {
            Answer::Accepted => return Ok(()),
            Answer::Refused(reply) => refusal = reply,
        }
    }
    let reply = String::from_utf8_lossy(refusal.strip_suffix(b"\n").unwrap_or(&refusal)).into_owned();
    eprintln!("remora: stop: the daemon did not accept server.shutdown: {reply}");
    Ok(())
}

enum Answer {
    /// No reply: the daemon took the request and has exited (or the
    /// bounded wait for it ran out).
    Accepted,
    /// What the daemon answered instead (a `-32001` for a wrong token).
    Refused(Vec<u8>),
}

/// Sends one authenticated `server.shutdown` on `stream` and waits.
fn ask(mut stream: UnixStream, token: &[u8]) -> Answer {
    let mut line = br#"{"jsonrpc":"2.0","id":1,"method":"server.shutdown","auth":"#.to_vec();
    crate::base::gojson::write_go_string(&mut line, &crate::base::gojson::go_lossy(token));
    line.extend_from_slice(b"}\n");
    if stream.write_all(&line).is_err() {
        return Answer::Accepted;
    }
    // Half-close: a daemon that refuses answers and then closes at once
    // instead of waiting for more requests.
    let _ = stream.shutdown(Shutdown::Write);
    let started = Instant::now();
    let daemon = crate::sys::os::peer_pid(std::os::fd::AsRawFd::as_raw_fd(&stream));
    let _ = stream.set_read_timeout(Some(ANSWER_TIMEOUT));
    let mut reply = Vec::new();
    let _ = (&mut stream).take(64 * 1024).read_to_end(&mut reply);
    if !reply.is_empty() {
        return Answer::Refused(reply);
    }
    // Accepted: the daemon closes its clients first and finishes teardown
    // (children, socket, token, lock) after. Returning once the process
    // is gone lets a driver restart at once.
    if let Some(pid) = daemon {
        while crate::sys::os::process_alive(pid) && started.elapsed() < ANSWER_TIMEOUT {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Answer::Accepted
}

/// `daemon.token`, read only when it is safe to trust: not through a link,
/// a regular file of our own user with no group/other access, at most
/// [`crate::launch::daemonize::MAX_TOKEN`] bytes, not empty. Opened non-blocking
/// so a FIFO planted under the name cannot hang `-stop`.
pub(crate) fn read_token_file(path: &Path) -> Option<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    let limit = crate::launch::daemonize::MAX_TOKEN as u64;
    if !meta.file_type().is_file() || meta.uid() != euid || meta.mode() & 0o077 != 0 || meta.len() > limit {
        return None;
    }
    let mut token = Vec::new();
    file.take(limit + 1).read_to_end(&mut token).ok()?;
    (!token.is_empty() && token.len() as u64 <= limit).then_some(token)
}

/// The lock path, taken when nothing answers on the socket.
fn end_lock_holder(socket: &Path) -> Outcome {
    let dir = crate::rundir::tokenfile::socket_dir(socket);
    let lock_path = dir.join(crate::rundir::runlock::NAME);
    let Ok(file) = open_lock(&lock_path) else {
        return Outcome::None;
    };
    let Ok(meta) = file.metadata() else {
        return Outcome::None;
    };
    if !meta.file_type().is_file() {
        return Outcome::None;
    }
    let inode = meta.ino();
    let Some(holder) = crate::rundir::runlock::flock_holder(inode) else {
        return Outcome::None;
    };
    let record = crate::rundir::runlock::read_record(&file).filter(|r| r.pid == i64::from(holder));
    // Every signal goes through the hold the proof was made on, never by
    // the number (see `runlock::prove`).
    let proven = match &record {
        Some(r) => crate::rundir::runlock::prove(r, inode, socket).map(|target| (r.clone(), target)),
        None => Err("its owner record does not name it".to_string()),
    };
    let (record, target) = match proven {
        Ok(proven) => proven,
        Err(_) => {
            let program = crate::rundir::runlock::own_program();
            crate::log_warn!(
                "[daemon] stop: WARNING {} is held by a live process we will not signal (pid {holder} is not a {} --serve process for {}); leaving it alone",
                lock_path.display(),
                String::from_utf8_lossy(&program),
                socket.display()
            );
            return Outcome::Survivor;
        }
    };
    let who = describe(&record);
    crate::log_info!("[daemon] stop: run dir is held by a live daemon, {who}; sending SIGTERM");
    if target.signal(libc::SIGTERM).is_ok() && !wait_free(holder, inode, TERM_GRACE) {
        // It may have changed during the grace (an exec, a dropped lock):
        // prove it again.
        if target
            .confirm(|_| crate::rundir::runlock::may_signal(&record, inode, socket))
            .is_ok()
        {
            crate::log_warn!(
                "[daemon] stop: WARNING previous daemon {who} ignored SIGTERM for 4s; sending SIGKILL (its Claude Code children, if any, are ended next, before this daemon serves)"
            );
            let _ = target.signal(libc::SIGKILL);
            if wait_free(holder, inode, KILL_GRACE) {
                return Outcome::Killed;
            }
            crate::log_warn!(
                "[daemon] stop: WARNING previous daemon {who} survived SIGKILL (uninterruptible?); proceeding without run-dir ownership"
            );
            return Outcome::Survivor;
        }
    }
    crate::log_info!("[daemon] stop: previous daemon {who} exited after SIGTERM");
    Outcome::Terminated
}

/// `pid <n> (instance "<id>")`, or `pid <n>` for a short record.
fn describe(record: &crate::rundir::runlock::OwnerRecord) -> String {
    if record.instance_id.is_empty() {
        format!("pid {}", record.pid)
    } else {
        format!(
            "pid {} (instance {})",
            record.pid,
            crate::base::goerr::go_quote(record.instance_id.as_bytes())
        )
    }
}

/// Opens the lock file read-only without following a link or creating it
/// (non-blocking: a FIFO under the name cannot hang the caller).
pub(crate) fn open_lock(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
}

/// Polls until `pid` no longer holds the lock on `inode` (it exited, or
/// its files are closed as a zombie's are), at most `grace`.
fn wait_free(pid: i32, inode: u64, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    loop {
        if crate::rundir::runlock::flock_holder(inode) != Some(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// Removes the socket path (a socket or regular file; an empty directory)
/// and `daemon.token`, as the reference's `-stop` does after a failed
/// connect. Both go through a descriptor of the socket's directory opened
/// by [`crate::base::safedir::open_trusted_dir`]: no link on the way is
/// followed, and a directory another user owns or can write (as root: any
/// but root's own) is left alone, with a warning. Failures are ignored:
/// they change nothing about the outcome.
fn remove_leftovers(socket: &Path) {
    let Some(name) = socket.file_name() else {
        return;
    };
    let dir = crate::rundir::tokenfile::socket_dir(socket);
    let dir = if dir.is_absolute() {
        dir
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(dir),
            Err(_) => return,
        }
    };
    let fd = match crate::base::safedir::open_trusted_dir(&dir) {
        Ok(fd) => fd,
        // Nothing there to remove.
        Err(crate::base::safedir::UnsafeDir::Io { error, .. }) if error.kind() == io::ErrorKind::NotFound => return,
        Err(why) => {
            crate::log_warn!(
                "[daemon] stop: not removing the socket or {} there: {why}",
                crate::rundir::tokenfile::NAME
            );
            return;
        }
    };
    use std::os::unix::ffi::OsStrExt;
    let _ = crate::base::safedir::unlink_in(&fd, name.as_bytes());
    let _ = crate::base::safedir::unlink_in(&fd, crate::rundir::tokenfile::NAME.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn token_file_is_trusted_only_when_private_regular_and_ours() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good");
        std::fs::write(&good, b"tok").unwrap();
        std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_token_file(&good), Some(b"tok".to_vec()));
        let wide = dir.path().join("wide");
        std::fs::write(&wide, b"tok").unwrap();
        std::fs::set_permissions(&wide, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read_token_file(&wide), None);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        assert_eq!(read_token_file(&link), None);
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(read_token_file(&fifo), None);
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_token_file(&empty), None);
        assert_eq!(read_token_file(&dir.path().join("missing")), None);
    }

    #[test]
    fn words() {
        let all = [
            Outcome::Stopped,
            Outcome::None,
            Outcome::Terminated,
            Outcome::Killed,
            Outcome::Survivor,
        ];
        let words: Vec<&str> = all.iter().map(|o| o.word()).collect();
        assert_eq!(words, ["stopped", "none", "terminated", "killed", "survivor"]);
    }
}
