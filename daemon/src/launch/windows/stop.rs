//! `-stop` on Windows: the connect path of `launch/stop.rs`, through the
//! same dial as `-bridge` ([`crate::launch::bridge::dial`]: the AF_UNIX
//! socket, else the pipe `rpc.pipe` names).
//!
//! - **It answers** → an authenticated `server.shutdown` (with
//!   `CLAUDE_RPC_TOKEN`, then `daemon.token` beside the socket), and,
//!   over the pipe, a wait for the serving process to exit. The word is
//!   `stopped`; a refusal is explained on stderr.
//! - **It does not** → `none`. Windows has no run-dir lock (claustrum's
//!   record: no lock, child records or reaping there), so there is no
//!   silent holder to signal; and nothing is removed (the Unix removal
//!   goes through a descriptor that follows no link, which the Windows
//!   half of `safedir` is still to give).
//!
//! Before any token is written, the listener must run as this user (the
//! user SID of the serving process's token, found by
//! `GetNamedPipeServerProcessId` or `SIO_AF_UNIX_GETPEERPID`; the Unix
//! `-stop` compares peer uids): a pipe or socket another user serves gets
//! nothing, the word is `survivor`, stderr says why, and the exit code is
//! 1.
//!
//! `daemon.token` (which the Windows daemon writes owner-only beside its
//! socket, `rundir::tokenfile`) is read only when it is safe to trust, as
//! on Unix: opened without following a link or junction, a regular file
//! owned by this user whose DACL grants nobody else (but `SYSTEM`,
//! `Administrators` and `TrustedInstaller`, who can read anything anyway)
//! the right to read or change it — the Unix "mode & 077 == 0" —, not
//! empty, at most the token limit.
//!
//! The exit code is 0, except after another user's listener (1).

use crate::launch::bridge::{dial, Conn};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long `-stop` waits for an answer, and then for the daemon to exit.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// The token limit (`launch::handoff::MAX_TOKEN`).
const MAX_TOKEN: u64 = crate::launch::handoff::MAX_TOKEN as u64;

/// Runs `-stop` for `socket`; prints `stopped`, `none` or `survivor`,
/// returns 0 (1 after another user's listener).
pub(crate) fn stop(socket: &Path) -> i32 {
    let (word, code) = match dial(socket) {
        Ok(conn) => match shut_down(conn, socket) {
            Ok(()) => ("stopped", 0),
            Err(why) => {
                eprintln!("remora: stop: {why}");
                ("survivor", 1)
            }
        },
        Err(_) => ("none", 0),
    };
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{word}");
    let _ = out.flush();
    code
}

/// Whether the process serving `conn` may be given a token: it runs as
/// this user. `Err` says why not.
fn trusted_listener(conn: &Conn, socket: &Path) -> Result<(), String> {
    let pid = match conn {
        Conn::Socket(s) => crate::sys::dial::unix_peer_pid(s),
        Conn::Pipe(p) => p.server_pid(),
    };
    match pid.and_then(|pid| crate::sys::dial::runs_as_us(pid).map(|ours| (pid, ours))) {
        Some((_, true)) => Ok(()),
        Some((pid, false)) => Err(format!(
            "{} is served by process {pid} of another user: no token was sent and nothing was stopped",
            socket.display()
        )),
        None => Err(format!(
            "{}: the listener's user cannot be read, so it may be another user's: no token was sent and nothing was stopped",
            socket.display()
        )),
    }
}

/// The connect path: tries each credential until one is accepted. `Err`
/// when a listener is not this user's ([`trusted_listener`]): nothing was
/// sent to it.
fn shut_down(first: Conn, socket: &Path) -> Result<(), String> {
    let mut credentials: Vec<Vec<u8>> = Vec::new();
    if let Some(token) = std::env::var("CLAUDE_RPC_TOKEN").ok().filter(|t| !t.is_empty()) {
        credentials.push(token.into_bytes());
    }
    if let Some(token) = read_token_file(&crate::rundir::tokenfile::path_for(socket)) {
        if !credentials.contains(&token) {
            credentials.push(token);
        }
    }
    if credentials.is_empty() {
        credentials.push(Vec::new());
    }
    let mut conn = Some(first);
    let mut refusal = Vec::new();
    for token in &credentials {
        let c = match conn.take() {
            Some(c) => c,
            None => match dial(socket) {
                Ok(c) => c,
                // Gone meanwhile: whatever stopped it, it is stopped.
                Err(_) => return Ok(()),
            },
        };
        // Every connection: the name may have changed hands in between.
        trusted_listener(&c, socket)?;
        match ask(c, token) {
            None => return Ok(()),
            Some(reply) => refusal = reply,
        }
    }
    let reply = String::from_utf8_lossy(refusal.strip_suffix(b"\n").unwrap_or(&refusal)).into_owned();
    eprintln!("remora: stop: the daemon did not accept server.shutdown: {reply}");
    Ok(())
}

/// Sends one `server.shutdown` with `token`; `None` when it was taken
/// (no reply before the daemon closed), else the daemon's answer.
fn ask(conn: Conn, token: &[u8]) -> Option<Vec<u8>> {
    let mut line = br#"{"jsonrpc":"2.0","id":1,"method":"server.shutdown","auth":"#.to_vec();
    crate::base::gojson::write_go_string(&mut line, &crate::base::gojson::go_lossy(token));
    line.extend_from_slice(b"}\n");
    let started = Instant::now();
    let mut reply = Vec::new();
    match conn {
        Conn::Socket(mut s) => {
            if s.write_all(&line).is_err() {
                return None;
            }
            // Half-close: a daemon that refuses answers, then closes.
            let _ = s.shutdown(Shutdown::Write);
            let _ = s.set_read_timeout(Some(ANSWER_TIMEOUT));
            let _ = (&mut s).take(64 * 1024).read_to_end(&mut reply);
        }
        Conn::Pipe(p) => {
            let daemon = p.server_pid();
            if (&p).write_all(&line).is_err() {
                return None;
            }
            // No half-close on a pipe: a refusal is one line and the
            // connection stays open, so read up to the first newline.
            let mut buf = [0u8; 4096];
            while !reply.contains(&b'\n') && reply.len() < 64 * 1024 {
                let left = ANSWER_TIMEOUT.saturating_sub(started.elapsed());
                match p.read_within(&mut buf, left) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => reply.extend_from_slice(&buf[..n]),
                }
            }
            if reply.is_empty() {
                // Taken: return once the serving process is gone, so a
                // driver can start another at once.
                if let Some(pid) = daemon.and_then(|p| i32::try_from(p).ok()) {
                    while crate::sys::os::process_alive(pid) && started.elapsed() < ANSWER_TIMEOUT {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            }
        }
    }
    (!reply.is_empty()).then_some(reply)
}

/// `daemon.token`, read only when it is safe to trust (the module doc):
/// not through a link, a regular file of our own user that nobody else
/// may read or change, at most the token limit, not empty.
pub(crate) fn read_token_file(path: &Path) -> Option<Vec<u8>> {
    use crate::base::safedir;
    let file = safedir::open_file_nofollow(path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.file_type().is_file() || meta.len() > MAX_TOKEN || !safedir::is_own_regular(&file) {
        return None;
    }
    let access = safedir::access_of(&file).ok()?;
    if !access.ours || access.others & (safedir::READ_RIGHTS | safedir::WRITE_RIGHTS) != 0 {
        return None;
    }
    let mut token = Vec::new();
    file.take(MAX_TOKEN + 1).read_to_end(&mut token).ok()?;
    (!token.is_empty() && token.len() as u64 <= MAX_TOKEN).then_some(token)
}
