//! The doctor's look at daemons: every `-serve` process of this user and
//! home that runs now, and every socket or token file of this home that
//! no daemon serves any more.
//!
//! A daemon is a process of this user whose command line is `-serve`
//! (remora's or the reference's: the flags are the same) and whose
//! `HOME` is this home, or whose socket lies under `~/.claude/`; other
//! homes' daemons (a test suite's, another account's) are not this
//! user's concern here. From `/proc` (Linux) come its pid, uptime,
//! children (its direct children, the spawner helper left out) and
//! connected clients (its accepted sockets on that path in
//! `/proc/net/unix`). Then one connection to its socket: whether the path
//! still leads to it (`SO_PEERCRED`), and, when the listener is this
//! user's, `server.capabilities` with the token file beside the socket:
//! whether that file still matches the daemon's token.
//!
//! Stale, each with the command that ends it:
//! - a daemon its socket path no longer leads to (removed, or taken over
//!   by a newer daemon): no client can reach it again (`kill <pid>`, a
//!   graceful SIGTERM);
//! - a daemon that refuses the token file beside its socket: a client
//!   that lost its own token (#72929) cannot re-authenticate
//!   (`kill <pid>`);
//! - a socket (or `daemon.token`) of `~/.claude/remote/rpc.sock` or
//!   `~/.claude/remote/run/*/` that nobody listens on
//!   (`remora -stop -socket <path>`, which removes both).
//!
//! A daemon with no client and no child is idle, not stale: a client may
//! come back to it. The report names `idle-exit-min` for both.

use super::{shell_word, Problem};
use serde::Serialize;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a daemon may take to answer `server.capabilities`.
const ANSWER_BOUND: Duration = Duration::from_secs(5);
/// The most of an answer read.
const MAX_ANSWER: u64 = 64 * 1024;

/// One running daemon, members in this order in the JSON.
#[derive(Debug, Serialize)]
pub(crate) struct Daemon {
    pub pid: i32,
    /// Its executable (`/proc/<pid>/exe`).
    pub program: String,
    pub socket: String,
    #[serde(rename = "uptimeSec")]
    pub uptime_sec: Option<u64>,
    /// Connections open to it now.
    pub clients: Option<usize>,
    /// Its children running now.
    pub processes: Option<usize>,
    /// Where its replay logs spill, and the bytes of its own directory
    /// there (`None` when it has none: a reference daemon keeps them in
    /// memory, or the directory is gone).
    #[serde(rename = "replayDir")]
    pub replay_dir: Option<String>,
    #[serde(rename = "replayBytes")]
    pub replay_bytes: Option<u64>,
    /// Whether dialling its socket path reaches this very process.
    pub reachable: bool,
    /// Who answers on the path instead, when someone else does.
    #[serde(rename = "answeredBy")]
    pub answered_by: Option<i32>,
    /// `match`, `mismatch`, `missing` (no token file this user may read),
    /// or `unchecked` (not reachable, or not this user's listener).
    pub token: &'static str,
    #[serde(rename = "instanceId")]
    pub instance_id: Option<String>,
    /// It holds `daemon.lock` beside its socket.
    #[serde(rename = "holdsRunLock")]
    pub holds_run_lock: bool,
    #[serde(rename = "keepChildren")]
    pub keep_children: bool,
    /// Its effective `idle-exit-min` (its flags, then `remora.conf`
    /// beside its executable); `0` is off.
    #[serde(rename = "idleExitMin")]
    pub idle_exit_min: String,
    /// The login session scope it runs in, when it does.
    #[serde(rename = "sessionScope")]
    pub session_scope: Option<String>,
    pub idle: bool,
    pub stale: bool,
    /// Why it is stale, and the command that ends it.
    pub why: Option<String>,
    pub fix: Option<String>,
}

/// A socket or token file nobody serves.
#[derive(Debug, Serialize)]
pub(crate) struct StaleSocket {
    pub socket: String,
    pub why: String,
    pub fix: String,
}

/// What [`examine`] found.
pub(crate) struct Found {
    pub daemons: Vec<Daemon>,
    pub stale_sockets: Vec<StaleSocket>,
}

/// One process of this user, from `/proc`.
struct Proc {
    pid: i32,
    ppid: i32,
    state: u8,
    start_ticks: u64,
    cmdline: Vec<u8>,
}

/// Finds the daemons of `home` and the sockets under `remote` nobody
/// serves. `kills`: logind kills this user's session processes at logout.
pub(crate) fn examine(home: &Path, remote: &Path, own_exe: &Path, kills: bool, problems: &mut Vec<Problem>) -> Found {
    let procs = scan_processes();
    let sockets = unix_sockets();
    let mut daemons = Vec::new();
    for p in &procs {
        let args = crate::rundir::runlock::serve_args(&p.cmdline);
        if !args.serve || p.pid as u32 == std::process::id() || p.state == b'Z' {
            continue;
        }
        let env = environ(p.pid);
        let their_home = env_value(&env, b"HOME");
        let socket = match socket_of(p.pid, args.socket, their_home.as_deref()) {
            Some(s) => s,
            None => continue,
        };
        let ours = their_home.as_deref() == Some(home.as_os_str()) || socket.starts_with(home.join(".claude"));
        if !ours {
            continue;
        }
        daemons.push(daemon(
            p,
            &procs,
            &sockets,
            socket,
            &env,
            args.keep_children,
            kills,
            problems,
        ));
    }
    daemons.sort_by_key(|d| d.pid);
    let served: Vec<PathBuf> = daemons.iter().map(|d| PathBuf::from(&d.socket)).collect();
    let stale_sockets = stale_sockets(remote, &served, own_exe, problems);
    Found { daemons, stale_sockets }
}

/// The socket a `-serve` command line names, absolute and cleaned: a
/// relative one from the process's working directory, none from
/// `~/.claude/remote/rpc.sock` of its home.
fn socket_of(pid: i32, given: Option<&[u8]>, home: Option<&OsStr>) -> Option<PathBuf> {
    let path = match given.filter(|s| !s.is_empty()) {
        Some(s) if s.starts_with(b"/") => s.to_vec(),
        Some(s) => {
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
            crate::base::gopath::join(&[cwd.as_os_str().as_bytes(), s])
        }
        None => crate::launch::homepaths::default_socket(Path::new(home?))
            .as_os_str()
            .as_bytes()
            .to_vec(),
    };
    Some(PathBuf::from(OsStr::from_bytes(&crate::base::gopath::clean(&path))))
}

#[allow(clippy::too_many_arguments)]
fn daemon(
    p: &Proc,
    procs: &[Proc],
    sockets: &[UnixSocket],
    socket: PathBuf,
    env: &[u8],
    keep_children: bool,
    kills: bool,
    problems: &mut Vec<Problem>,
) -> Daemon {
    let pid = p.pid;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    let exe = PathBuf::from(OsStr::from_bytes(
        exe.as_os_str()
            .as_bytes()
            .strip_suffix(b" (deleted)")
            .unwrap_or(exe.as_os_str().as_bytes()),
    ));
    let flags = effective_flags(p, &exe);
    let replay_dir = replay_dir(&flags, env);
    let replay_bytes = replay_dir.as_deref().and_then(|d| replay_use(d, pid));
    // Counted before this process connects (it would count itself).
    let clients = clients_of(pid, &socket, sockets);
    let processes = Some(
        procs
            .iter()
            .filter(|c| c.ppid == pid && c.state != b'Z' && !is_spawner(&c.cmdline))
            .count(),
    );
    let session_scope = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()
        .and_then(|c| crate::launch::logind::session_scope(&c));
    let holds_run_lock = run_lock_holder(&socket) == Some(pid);
    let mut d = Daemon {
        pid,
        program: exe.display().to_string(),
        socket: socket.display().to_string(),
        uptime_sec: uptime_of(p.start_ticks),
        clients,
        processes,
        replay_dir: replay_dir.map(|d| d.display().to_string()),
        replay_bytes,
        reachable: false,
        answered_by: None,
        token: "unchecked",
        instance_id: None,
        holds_run_lock,
        keep_children,
        idle_exit_min: flags.idle_exit_min.text.clone(),
        session_scope,
        idle: false,
        stale: false,
        why: None,
        fix: None,
    };
    ask(&mut d, &socket);
    d.idle = clients == Some(0) && processes == Some(0);
    let kill = format!("kill {pid}");
    if !d.reachable {
        d.stale = true;
        d.why = Some(match d.answered_by {
            Some(other) => format!(
                "its socket path {} now leads to pid {other}: no client can reach it again",
                d.socket
            ),
            None => format!(
                "its socket path {} no longer leads to it: no client can reach it again",
                d.socket
            ),
        });
    } else if d.token == "mismatch" {
        d.stale = true;
        d.why = Some(format!(
            "it refuses the token file beside {}: a client that lost its own token cannot re-authenticate",
            d.socket
        ));
    }
    if d.stale {
        d.fix = Some(kill.clone());
        problems.push(Problem {
            section: "daemons",
            subject: format!("pid {pid}"),
            problem: format!("stale daemon: {}", d.why.clone().unwrap_or_default()),
            fix: format!("{kill}   (SIGTERM: a graceful stop)"),
        });
    }
    if kills {
        if let Some(scope) = &d.session_scope {
            problems.push(Problem {
                section: "logind",
                subject: format!("pid {pid}"),
                problem: format!(
                    "it runs in the login session's {scope} and systemd-logind kills that session's processes at logout"
                ),
                fix: crate::launch::logind::remedy(&crate::launch::logind::user_name()),
            });
        }
    }
    d
}

/// The daemon's flags as it runs: its command line, then `remora.conf`
/// beside its executable (which it read at start, if unchanged since).
fn effective_flags(p: &Proc, exe: &Path) -> crate::base::flagtable::Flags {
    let argv: Vec<OsString> = p
        .cmdline
        .strip_suffix(b"\0")
        .unwrap_or(&p.cmdline)
        .split(|b| *b == 0)
        .skip(1)
        .map(|a| OsStr::from_bytes(a).to_os_string())
        .collect();
    let mut flags = crate::launch::flags::parse(&argv).unwrap_or_default();
    if let Some(dir) = exe.parent() {
        let loaded = crate::launch::settings::load(&dir.join(crate::launch::settings::FILE_NAME));
        crate::launch::settings::apply(&mut flags, &loaded, None);
    }
    flags
}

/// Where the daemon's replay logs spill: `replay-dir`, else the default
/// for its environment.
fn replay_dir(flags: &crate::base::flagtable::Flags, env: &[u8]) -> Option<PathBuf> {
    if !flags.replay_dir.is_empty() {
        return Some(PathBuf::from(&flags.replay_dir));
    }
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    Some(crate::replay::store::default_dir_for(
        env_value(env, b"XDG_STATE_HOME").as_deref(),
        env_value(env, b"HOME").as_deref(),
        uid,
    ))
}

/// Bytes of the regular files in daemon `pid`'s own directories of
/// `dir` (segments sit flat there). `None` when it has none.
fn replay_use(dir: &Path, pid: i32) -> Option<u64> {
    let prefix = crate::replay::store::own_dir_prefix(pid as u32);
    let mut total = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        if !entry.file_name().as_bytes().starts_with(prefix.as_bytes()) {
            continue;
        }
        // DirEntry::file_type does not follow a link.
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let mut bytes = 0u64;
        if let Ok(files) = std::fs::read_dir(entry.path()) {
            for file in files.flatten() {
                if let Ok(meta) = file.path().symlink_metadata() {
                    if meta.is_file() {
                        bytes = bytes.saturating_add(meta.len());
                    }
                }
            }
        }
        total = Some(total.unwrap_or(0u64).saturating_add(bytes));
    }
    total
}

/// The spawner helper (`remora --spawner`), a child of every Linux
/// daemon that is not one of its processes.
fn is_spawner(cmdline: &[u8]) -> bool {
    cmdline.split(|b| *b == 0).nth(1) == Some(crate::sys::process::SPAWNER_FLAG.as_bytes())
}

/// The pid holding `daemon.lock` beside `socket`, read without taking it.
fn run_lock_holder(socket: &Path) -> Option<i32> {
    let lock = crate::rundir::tokenfile::socket_dir(socket).join(crate::rundir::runlock::NAME);
    let file = crate::launch::stop::open_lock(&lock).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    crate::rundir::runlock::flock_holder(meta.ino())
}

/// Connects once: who answers on `socket`, and whether the token file
/// beside it is accepted ([`Daemon::token`]).
fn ask(d: &mut Daemon, socket: &Path) {
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return;
    };
    let peer = crate::sys::os::peer_pid(stream.as_raw_fd());
    if peer != Some(d.pid) {
        d.answered_by = peer;
        return;
    }
    d.reachable = true;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    // The token goes to a listener of this user only (as `-stop`'s rule).
    if crate::sys::os::peer_uid(stream.as_raw_fd()) != Some(me) {
        return;
    }
    let Some(token) = crate::launch::stop::read_token_file(&crate::rundir::tokenfile::path_for(socket)) else {
        d.token = "missing";
        return;
    };
    let mut line = br#"{"jsonrpc":"2.0","id":1,"method":"server.capabilities","auth":"#.to_vec();
    crate::base::gojson::write_go_string(&mut line, &crate::base::gojson::go_lossy(&token));
    line.extend_from_slice(b"}\n");
    if stream.write_all(&line).is_err() {
        return;
    }
    let _ = stream.set_read_timeout(Some(ANSWER_BOUND));
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    let mut reader = (&mut stream).take(MAX_ANSWER);
    while let Ok(1) = reader.read(&mut byte) {
        if byte[0] == b'\n' {
            break;
        }
        answer.push(byte[0]);
    }
    let Ok(reply) = serde_json::from_slice::<serde_json::Value>(&answer) else {
        return;
    };
    if let Some(result) = reply.get("result") {
        d.token = "match";
        d.instance_id = result.get("instanceId").and_then(|v| v.as_str()).map(str::to_string);
    } else if reply.pointer("/error/code").and_then(|c| c.as_i64()) == Some(-32001) {
        d.token = "mismatch";
    }
}

/// `~/.claude/remote/rpc.sock` and `~/.claude/remote/run/*/rpc.sock`
/// (or their `daemon.token`) that no daemon found serves.
fn stale_sockets(remote: &Path, served: &[PathBuf], own_exe: &Path, problems: &mut Vec<Problem>) -> Vec<StaleSocket> {
    let mut candidates = vec![remote.join("rpc.sock")];
    if let Ok(entries) = std::fs::read_dir(remote.join("run")) {
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path().join("rpc.sock"))
            .collect();
        dirs.sort();
        candidates.extend(dirs);
    }
    let mut stale = Vec::new();
    for socket in candidates {
        if served.contains(&socket) {
            continue;
        }
        let token = crate::rundir::tokenfile::path_for(&socket);
        let why = match std::fs::symlink_metadata(&socket) {
            Ok(m) if m.file_type().is_socket() => match UnixStream::connect(&socket) {
                // Someone serves it that is not a daemon of this home.
                Ok(_) => continue,
                Err(e) => format!("nobody listens on it ({})", crate::base::goerr::io_text(&e)),
            },
            Ok(_) => continue,
            Err(_) if std::fs::symlink_metadata(&token).is_ok() => {
                format!("{} is left with no socket beside it", token.display())
            }
            Err(_) => continue,
        };
        let fix = format!(
            "{} -stop -socket {}   (removes the socket and daemon.token; it signals only a -serve of that socket)",
            shell_word(own_exe),
            shell_word(&socket)
        );
        problems.push(Problem {
            section: "staleSockets",
            subject: socket.display().to_string(),
            problem: format!("stale socket: {why}"),
            fix: fix.clone(),
        });
        stale.push(StaleSocket {
            socket: socket.display().to_string(),
            why,
            fix,
        });
    }
    stale
}

/// Every process of this user in `/proc` (none where there is no
/// `/proc`).
fn scan_processes() -> Vec<Proc> {
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut procs = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let dir = entry.path();
        if !std::fs::metadata(&dir).is_ok_and(|m| m.uid() == me) {
            continue;
        }
        let Ok(stat) = std::fs::read(dir.join("stat")) else {
            continue;
        };
        let Some((state, ppid, start_ticks)) = parse_stat(&stat) else {
            continue;
        };
        let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
        procs.push(Proc {
            pid,
            ppid,
            state,
            start_ticks,
            cmdline,
        });
    }
    procs
}

/// State, parent pid and start time (clock ticks after boot) from
/// `/proc/<pid>/stat`; the command name in parentheses may hold anything,
/// so the fields are counted from its last `)`.
fn parse_stat(stat: &[u8]) -> Option<(u8, i32, u64)> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = *fields.first()?.as_bytes().first()?;
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, ppid, start))
}

/// Seconds since a process started `start_ticks` after boot.
fn uptime_of(start_ticks: u64) -> Option<u64> {
    let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
    let since_boot: f64 = uptime.split_whitespace().next()?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return None;
    }
    let started = start_ticks as f64 / ticks as f64;
    Some((since_boot - started).max(0.0) as u64)
}

/// The NUL-separated environment of `pid` (empty when unreadable).
fn environ(pid: i32) -> Vec<u8> {
    std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default()
}

fn env_value(env: &[u8], name: &[u8]) -> Option<OsString> {
    env.split(|b| *b == 0).find_map(|entry| {
        let value = entry.strip_prefix(name)?.strip_prefix(b"=")?;
        Some(OsStr::from_bytes(value).to_os_string())
    })
}

/// One line of `/proc/net/unix`.
struct UnixSocket {
    inode: u64,
    /// `03` is a connected socket.
    connected: bool,
    path: Vec<u8>,
}

/// The bound Unix sockets of this network namespace (`/proc/net/unix`);
/// an accepted connection shows its listener's path.
fn unix_sockets() -> Vec<UnixSocket> {
    let Ok(text) = std::fs::read("/proc/net/unix") else {
        return Vec::new();
    };
    text.split(|b| *b == b'\n')
        .skip(1)
        .filter_map(|line| {
            // Num RefCount Protocol Flags Type St Inode Path
            let fields: Vec<&[u8]> = line.split(|b| *b == b' ').filter(|f| !f.is_empty()).collect();
            let st = fields.get(5)?;
            let inode = std::str::from_utf8(fields.get(6)?).ok()?.parse().ok()?;
            let path = fields.get(7)?.to_vec();
            Some(UnixSocket {
                inode,
                connected: *st == b"03",
                path,
            })
        })
        .collect()
}

/// Connections open to daemon `pid` on `socket`: its descriptors that are
/// connected sockets bearing that path. `None` when its descriptors
/// cannot be read.
fn clients_of(pid: i32, socket: &Path, sockets: &[UnixSocket]) -> Option<usize> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    let held: Vec<u64> = fds
        .flatten()
        .filter_map(|fd| {
            let target = std::fs::read_link(fd.path()).ok()?;
            let text = target.to_str()?;
            text.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect();
    let path = socket.as_os_str().as_bytes();
    Some(
        sockets
            .iter()
            .filter(|s| s.connected && s.path == path && held.contains(&s.inode))
            .count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_the_command_name() {
        let stat = b"42 (a) b) c) S 7 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 0 0";
        assert_eq!(parse_stat(stat), Some((b'S', 7, 12345)));
        assert_eq!(parse_stat(b"garbage"), None);
    }

    #[test]
    fn environment_values() {
        let env = b"A=1\0HOME=/h\0HOMEX=no\0";
        assert_eq!(env_value(env, b"HOME"), Some(OsString::from("/h")));
        assert_eq!(env_value(env, b"B"), None);
    }

    #[test]
    fn the_spawner_is_not_a_process() {
        assert!(is_spawner(b"/x/remora\0--spawner\0"));
        assert!(!is_spawner(b"/bin/sleep\x0010\0"));
    }
}
