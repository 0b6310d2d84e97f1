//! What the `-serve` launcher takes in and gives out, the same on every
//! OS: the token from `-token-file` (read once, then removed) or
//! `-token-fd` (one line), and the readiness banner it prints once the
//! detached daemon listens. How the daemon is detached and handed the
//! token is the OS's (`daemonize.rs`, `windows/daemonize.rs`).

use crate::base::flagtable::Flags;
use std::ffi::OsString;
use std::io::{self, Read, Write};

/// The re-exec marker. Deliberately not `CLAUDE_SSH_DAEMON_CHILD`, which a
/// surrounding claude-ssh session exports to every descendant.
pub(crate) const SENTINEL: &str = "REMORA_DAEMON_CHILD";
/// Set in the daemon's own environment so spawned children inherit it, as
/// the reference does.
pub(crate) const CHILD_MARKER: &str = "CLAUDE_SSH_DAEMON_CHILD";
/// What the child reports when it is serving, followed by its instance id.
pub(crate) const READY: &[u8] = b"ready ";
/// Opens a notice in the child's report: a byte no error line starts with.
pub(crate) const NOTICE: u8 = 0x1e;

/// Upper bound on a token, wherever it comes from: a token is a short
/// secret, and an unbounded read from a descriptor could never end.
pub(crate) const MAX_TOKEN: usize = 1 << 20;

const NO_TOKEN: &str = "remora: daemonized child requires --token-file or --token-fd
remora: -serve needs a token: -token-file FILE or -token-fd N";

/// Resolves the token from `-token-file` (read once, then unlinked) or
/// `-token-fd`. With both, `-token-file` wins, so that its file is still
/// consumed and does not linger on disk. `CLAUDE_RPC_TOKEN` is never used
/// here: the daemon must not start without an explicit token.
pub(crate) fn launcher_token(flags: &Flags) -> Result<Vec<u8>, String> {
    let (source, token) = if !flags.token_file.is_empty() {
        ("--token-file", read_token_file(&flags.token_file)?)
    } else if flags.token_fd >= 0 {
        ("--token-fd", read_token_fd(flags.token_fd)?)
    } else {
        return Err(NO_TOKEN.to_string());
    };
    let token = strip_line_end(token);
    if token.is_empty() {
        // An empty token would accept requests with no auth at all.
        return Err(format!("remora: read {source}: empty token"));
    }
    Ok(token)
}

fn read_token_file(path: &OsString) -> Result<Vec<u8>, String> {
    let shown = path.to_string_lossy();
    let fail = |op: &str, e: &io::Error| {
        format!(
            "remora: read --token-file: {}",
            crate::base::goerr::path_error(op, &shown, e)
        )
    };
    let file = std::fs::File::open(path).map_err(|e| fail("open", &e))?;
    let opened = file.metadata().map_err(|e| fail("stat", &e))?;
    let identity = crate::sys::os::file_identity(&file);
    let mut token = Vec::new();
    file.take(MAX_TOKEN as u64 + 1)
        .read_to_end(&mut token)
        .map_err(|e| fail("read", &e))?;
    // Consume the secret, but only a regular file that is still the one
    // just read: a device node, FIFO, directory or symlink named here is
    // never removed (as root, removing `/dev/null` would be a disaster),
    // whether or not its token is then accepted.
    if is_same_regular_file(path, &opened, identity) {
        if let Err(e) = std::fs::remove_file(path) {
            // Still start: the token is valid, but say the secret stayed.
            eprintln!(
                "remora: warning: {}",
                crate::base::goerr::path_error("remove", &shown, &e)
            );
        }
    } else {
        eprintln!("remora: warning: --token-file {shown} is not a regular file; left in place");
    }
    if token.len() > MAX_TOKEN {
        return Err(format!(
            "remora: read --token-file: token longer than {} bytes",
            MAX_TOKEN
        ));
    }
    Ok(token)
}

/// Whether `path` itself (not following a symlink) is a regular file
/// with the identity (device and inode) of the file opened, `opened`
/// (its metadata) and `identity`.
fn is_same_regular_file(path: &OsString, opened: &std::fs::Metadata, identity: Option<(u64, u64)>) -> bool {
    opened.is_file()
        && std::fs::symlink_metadata(path).is_ok_and(|now| now.is_file())
        && identity.is_some()
        && crate::sys::os::path_identity(path.as_ref()) == identity
}

/// Reads one line from descriptor `fd`: up to and including the first
/// newline, or to EOF. Stopping at the newline lets a driver write the
/// token into a pipe (or an SSH channel's stdin) it keeps open. Reads a
/// byte at a time so nothing past the line is consumed from a shared fd.
fn read_token_fd(fd: i64) -> Result<Vec<u8>, String> {
    let fail = |e: io::Error| {
        format!(
            "remora: read --token-fd: read fd {fd}: {}",
            crate::base::goerr::io_text(&e)
        )
    };
    let mut token = Vec::new();
    let mut byte = 0u8;
    loop {
        let n = match crate::sys::os::read_fd_byte(fd, &mut byte) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(fail(e)),
        };
        if n == 0 {
            break;
        }
        token.push(byte);
        if byte == b'\n' {
            break;
        }
        if token.len() > MAX_TOKEN {
            return Err(format!(
                "remora: read --token-fd: token longer than {} bytes",
                MAX_TOKEN
            ));
        }
    }
    Ok(token)
}

/// A token is read as a line: one trailing `\n` or `\r\n` is removed,
/// everything else is kept verbatim.
pub(crate) fn strip_line_end(mut token: Vec<u8>) -> Vec<u8> {
    if token.ends_with(b"\n") {
        token.pop();
        if token.ends_with(b"\r") {
            token.pop();
        }
    }
    token
}

/// How the readiness banner reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BannerStyle {
    /// Stamped as a reference build: the reference's product name
    /// (`Claude`), which a client waiting for the banner may match.
    pub stamped: bool,
    /// The build ends it with the daemon's pid and instance
    /// ([`crate::protocol::build::Switch::BannerIds`]).
    pub ids: bool,
}

/// The line the launcher prints once the daemon's socket accepts.
pub(crate) fn banner(style: BannerStyle, socket: &std::path::Path, pid: u32, instance: &str) -> String {
    let product = if style.stamped { "Claude" } else { "Remora" };
    let mut line = format!("{product} remote server listening on {}", socket.display());
    if style.ids {
        line.push_str(&format!(" (pid {pid}, instance {instance})"));
    }
    line
}

/// Prints the notices at the front of `report` on stderr and leaves the
/// verdict.
pub(crate) fn print_notices(report: &mut Vec<u8>) {
    let mut err = io::stderr().lock();
    while report.first() == Some(&NOTICE) {
        let end = report.iter().position(|b| *b == b'\n').unwrap_or(report.len());
        let _ = err.write_all(&report[1..end]);
        let _ = err.write_all(b"\n");
        report.drain(..(end + 1).min(report.len()));
    }
}
