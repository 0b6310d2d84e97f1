//! The run-dir lock: a `-serve` daemon holds an
//! exclusive `flock` on `daemon.lock` in its socket's directory for its
//! whole life, with an owner record
//! `{"pid":…,"role":"serve","node":"…","instanceId":"…","startedAt":…}`
//! in it. A newcomer that finds the lock held by a live predecessor of the
//! same socket evicts it — SIGTERM, up to 2 s, then SIGKILL, up to 1 s —
//! before binding, so a restart replaces its predecessor deterministically.
//! At graceful shutdown the record is truncated and the lock dropped; the
//! file stays.
//!
//! Claiming is best-effort: any failure is logged and the daemon serves
//! without run-dir ownership (then the socket's own in-use check decides).
//!
//! Signalling is the dangerous part. First a hold is taken on the
//! recorded pid's process ([`crate::sys::process::PidRef`]: a pidfd on
//! Linux); then the process is proven to be our predecessor, and the
//! proof counts only if the process was present before and after it
//! ([`PidRef::confirm`]); every signal and every liveness question then
//! goes through that hold, never through the number, so a pid reused
//! after the proof is never signalled. The proof is refused unless every
//! one of these holds (checked before SIGTERM and again before SIGKILL):
//! the record says `role:"serve"`; the pid is not ours and is above 1; the
//! record's `node` (boot id + pid namespace) equals ours; the process is in
//! our pid namespace; it belongs to our user; `/proc/locks` shows that very
//! pid holding the flock on this lock file's inode; and its command line is
//! the same program (argv0 base name) with `-serve` and a `-socket` naming
//! the same socket. The lock file itself is opened `O_NOFOLLOW`, must be a
//! regular file owned by our user with a single link, and is created 0600.

use crate::base::flagtable::{Flag, FLAGS};
use crate::sys::process::PidRef;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The fixed name, beside the socket.
pub const NAME: &str = "daemon.lock";

/// Grace after SIGTERM (measured on the reference) and after SIGKILL
/// (remora's own, as in the sources).
const TERM_GRACE: Duration = Duration::from_secs(2);
const KILL_GRACE: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(50);
/// An owner record is a few hundred bytes; anything longer is not ours.
const MAX_RECORD: u64 = 4096;

/// A held run-dir lock; [`RunLock::release`] at graceful shutdown.
#[derive(Debug)]
pub struct RunLock {
    file: File,
    /// The live predecessor this claim evicted, if any.
    pub replaced: Option<Replaced>,
}

/// A daemon of the same socket that a claim ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replaced {
    pub pid: i32,
    /// It ran with `-keep-children`, so its children outlive it.
    pub kept_children: bool,
}

impl Replaced {
    /// The line the `-serve` launcher prints for the operator: a restart
    /// ends the running daemon, and its children with it by default.
    pub fn notice(&self) -> String {
        let pid = self.pid;
        if self.kept_children {
            format!("replacing the daemon pid {pid} on this socket (it runs with -keep-children, so its children keep running)")
        } else {
            format!(
                "replacing the daemon pid {pid} on this socket (its children are stopped; -keep-children keeps them)"
            )
        }
    }
}

impl RunLock {
    /// Truncates the owner record and drops the lock; the file stays.
    pub fn release(self) {
        let _ = self.file.set_len(0);
        drop(self.file);
    }
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Default, Clone, PartialEq, Eq)]
pub struct OwnerRecord {
    #[serde(default)]
    pub pid: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub role: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node: String,
    #[serde(default, rename = "instanceId", skip_serializing_if = "String::is_empty")]
    pub instance_id: String,
    #[serde(default, rename = "startedAt", skip_serializing_if = "is_zero")]
    pub started_at: i64,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// Takes the lock for `socket`, evicting a provable predecessor. `None`
/// means "serve without run-dir ownership" (already logged).
pub(crate) fn claim(socket: &Path, instance: &crate::base::instance::Instance) -> Option<RunLock> {
    let path = crate::rundir::tokenfile::socket_dir(socket).join(NAME);
    let shown = path.display().to_string();
    let mut file = match open_lock_file(&path) {
        Ok(f) => f,
        Err(reason) => {
            crate::log_warn!("[daemon] serve: cannot open {shown} ({reason}); proceeding without run-dir ownership");
            return None;
        }
    };
    let mut replaced = None;
    match try_flock(&file) {
        Ok(true) => {}
        Ok(false) => {
            replaced = Some(evict_holder(&file, &path, socket)?);
            if !matches!(try_flock(&file), Ok(true)) {
                crate::log_warn!(
                    "[daemon] serve: {shown} changed hands during eviction; proceeding without run-dir ownership"
                );
                return None;
            }
        }
        Err(e) => {
            crate::log_warn!(
                "[daemon] serve: flock {shown} unsupported ({}); proceeding without run-dir ownership",
                crate::base::goerr::io_text(&e)
            );
            return None;
        }
    }
    let record = OwnerRecord {
        pid: std::process::id() as i64,
        role: "serve".to_string(),
        node: node_id(),
        instance_id: instance.id.clone(),
        started_at: instance.started_at,
    };
    let body = serde_json::to_vec(&record).unwrap_or_default();
    let written = file
        .set_len(0)
        .and_then(|_| file.rewind())
        .and_then(|_| file.write_all(&body));
    if let Err(e) = written {
        crate::log_warn!(
            "[daemon] serve: write owner record {shown}: {}",
            crate::base::goerr::io_text(&e)
        );
    }
    Some(RunLock { file, replaced })
}

/// Opens (creating 0600) the lock file without following a link, and
/// insists on a regular file of our own.
fn open_lock_file(path: &Path) -> Result<File, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| crate::base::goerr::io_text(&e))?;
    let meta = file.metadata().map_err(|e| crate::base::goerr::io_text(&e))?;
    if !meta.file_type().is_file() {
        return Err("not a regular file".to_string());
    }
    if meta.uid() != euid() {
        return Err(format!("owned by uid {}, not by uid {}", meta.uid(), euid()));
    }
    if meta.nlink() != 1 {
        // A hard link would make the record write truncate another file.
        return Err(format!("has {} links", meta.nlink()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        // A file left with wider bits (made by hand, say) is narrowed
        // before anything is written into it.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| crate::base::goerr::io_text(&e))?;
    }
    Ok(file)
}

/// Non-blocking exclusive flock: `Ok(false)` when someone else holds it.
fn try_flock(file: &File) -> io::Result<bool> {
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// Reads the holder's record and, when it proves to be a live daemon of
/// this socket, runs SIGTERM → SIGKILL. `Some` once the holder is gone.
fn evict_holder(file: &File, path: &Path, socket: &Path) -> Option<Replaced> {
    let shown = path.display();
    let rundir = crate::rundir::tokenfile::socket_dir(socket);
    let summary = |outcome: &str| {
        crate::log_info!("[daemon] serve: previous owner of {}: {outcome}", rundir.display());
    };
    let holder = match read_record(file) {
        Some(r) if r.pid > 1 => r,
        _ => {
            crate::log_warn!(
                "[daemon] serve: {shown} is locked but its owner record is unusable; proceeding without run-dir ownership"
            );
            return None;
        }
    };
    let inode = file.metadata().map(|m| m.ino()).unwrap_or(0);
    let pid = holder.pid as i32;
    let target = match prove(&holder, inode, socket) {
        Ok(target) => target,
        Err(reason) => {
            crate::log_warn!(
                "[daemon] serve: not signaling pid {pid}, the holder of {shown} ({reason}); proceeding without run-dir ownership"
            );
            summary("survivor");
            return None;
        }
    };
    // Read through the hold: its command line says what it does with its
    // children.
    let kept_children = target
        .confirm(|pid| Ok(std::fs::read(format!("/proc/{pid}/cmdline")).map(|c| serve_args(&c).keep_children)))
        .is_ok_and(|kept| kept.unwrap_or(false));
    let replaced = Replaced { pid, kept_children };
    crate::log_info!(
        "[daemon] serve: run dir is held by a live daemon, pid {pid} (instance {}); sending SIGTERM",
        crate::base::goerr::go_quote(holder.instance_id.as_bytes())
    );
    if !send(&target, libc::SIGTERM) {
        return gone_or(&target, file, summary, "terminated").then_some(replaced);
    }
    if wait_gone(&target, file, TERM_GRACE) {
        crate::log_info!(
            "[daemon] serve: previous daemon pid {pid} (instance {}) exited after SIGTERM",
            crate::base::goerr::go_quote(holder.instance_id.as_bytes())
        );
        summary("terminated");
        return Some(replaced);
    }
    // Still present (the hold says so), but it may have changed meanwhile
    // (an exec, a dropped lock): prove it again.
    if let Err(reason) = target.confirm(|_| may_signal(&holder, inode, socket)) {
        crate::log_info!(
            "[daemon] serve: pid {pid} is no longer our serve holder before SIGKILL ({reason}); treating the previous daemon as gone"
        );
        summary("terminated");
        return Some(replaced);
    }
    crate::log_warn!(
        "[daemon] serve: WARNING previous daemon pid {pid} (instance {}) ignored SIGTERM for 2s; sending SIGKILL",
        crate::base::goerr::go_quote(holder.instance_id.as_bytes())
    );
    if !send(&target, libc::SIGKILL) {
        return gone_or(&target, file, summary, "killed").then_some(replaced);
    }
    if wait_gone(&target, file, KILL_GRACE) {
        summary("killed");
        return Some(replaced);
    }
    crate::log_warn!(
        "[daemon] serve: previous daemon pid {pid} survived SIGKILL; proceeding without run-dir ownership"
    );
    summary("survivor");
    None
}

/// Takes a hold on the record's process, then proves it is a daemon we
/// may signal ([`may_signal`]) while the hold shows it present: the proof
/// is about the held process, and every signal goes through the hold.
/// `-stop` proves its lock holder here too.
pub(crate) fn prove(holder: &OwnerRecord, inode: u64, socket: &Path) -> Result<PidRef, String> {
    let held = i32::try_from(holder.pid).ok().and_then(PidRef::open);
    match held {
        Some(target) => target.confirm(|_| may_signal(holder, inode, socket)).map(|()| target),
        // No such process: the checks say why in their own words.
        None => may_signal(holder, inode, socket).and(Err("holder cannot be inspected".to_string())),
    }
}

fn gone_or(target: &PidRef, file: &File, summary: impl Fn(&str), outcome: &str) -> bool {
    if holder_gone(target, file) {
        summary(outcome);
        true
    } else {
        summary("survivor");
        false
    }
}

/// The owner record in an open lock file (at most [`MAX_RECORD`] bytes),
/// `None` when it is not one JSON record.
pub(crate) fn read_record(file: &File) -> Option<OwnerRecord> {
    let mut f = file.try_clone().ok()?;
    f.rewind().ok()?;
    let mut body = Vec::new();
    f.take(MAX_RECORD).read_to_end(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

fn send(target: &PidRef, sig: i32) -> bool {
    let Err(e) = target.signal(sig) else {
        return true;
    };
    if e.raw_os_error() != Some(libc::ESRCH) {
        crate::log_warn!(
            "[daemon] serve: signal {sig} to pid {} failed ({})",
            target.pid(),
            crate::base::goerr::io_text(&e)
        );
    }
    false
}

/// Gone = the lock came free (a zombie has closed its files) or the held
/// process has been reaped.
fn holder_gone(target: &PidRef, file: &File) -> bool {
    !target.present() || lock_is_free(file)
}

/// Whether nobody holds the flock. Probes by taking it and dropping it
/// again on a second open file description (our own `file` must not be
/// locked here: the caller retries on it).
fn lock_is_free(file: &File) -> bool {
    let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) else {
        return false;
    };
    let Ok(probe) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    else {
        return false;
    };
    matches!(try_flock(&probe), Ok(true))
}

fn wait_gone(target: &PidRef, file: &File, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    loop {
        if holder_gone(target, file) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// `Ok` only when the record's pid is provably a remora daemon serving
/// `socket` for our user on this machine and holding the lock `inode`.
pub fn may_signal(holder: &OwnerRecord, inode: u64, socket: &Path) -> Result<(), String> {
    if holder.role != "serve" {
        return Err("holder is not a serve daemon".into());
    }
    if holder.pid < 2 || holder.pid > i32::MAX as i64 {
        return Err("holder recorded no usable pid".into());
    }
    let pid = holder.pid as i32;
    if pid as u32 == std::process::id() {
        return Err("record names our own pid".into());
    }
    let own_node = node_id();
    if holder.node.is_empty() || own_node.is_empty() {
        return Err("the machine identity of the holder or of this process is unknown".into());
    }
    if holder.node != own_node {
        return Err("holder runs on another machine or container that shares this directory".into());
    }
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let own_ns = std::fs::read_link("/proc/self/ns/pid").map_err(|_| "our pid namespace is unreadable")?;
    match std::fs::read_link(proc_dir.join("ns/pid")) {
        Ok(ns) if ns == own_ns => {}
        Ok(_) => return Err("holder runs in another pid namespace".into()),
        Err(_) => return Err("holder cannot be inspected".into()),
    }
    let owner = std::fs::metadata(&proc_dir)
        .map_err(|_| "holder cannot be inspected")?
        .uid();
    if owner != euid() {
        return Err(format!("holder belongs to uid {owner}, not to uid {}", euid()));
    }
    if !holds_flock(pid, inode) {
        return Err("holder does not hold the lock on this file".into());
    }
    let cmdline = std::fs::read(proc_dir.join("cmdline")).map_err(|_| "holder cannot be inspected")?;
    let cwd = std::fs::read_link(proc_dir.join("cwd")).ok();
    if !is_serve_of(&cmdline, cwd.as_deref(), socket, &own_program()) {
        return Err("holder is not our serve process for this socket".into());
    }
    Ok(())
}

/// The pid `/proc/locks` lists holding a FLOCK on inode `inode`, if any
/// (`-stop` asks this without touching the lock itself).
pub fn flock_holder(inode: u64) -> Option<i32> {
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    text.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let at = f.iter().position(|w| *w == "FLOCK")?;
        let pid = f.get(at + 3)?.parse::<i32>().ok()?;
        let ino = f.get(at + 4)?.rsplit(':').next()?.parse::<u64>().ok()?;
        (ino == inode).then_some(pid)
    })
}

/// Whether `/proc/locks` lists `pid` holding a FLOCK on inode `inode`.
/// The device column is not compared: some file systems report a
/// different device number there than `stat` does.
fn holds_flock(pid: i32, inode: u64) -> bool {
    let Ok(text) = std::fs::read_to_string("/proc/locks") else {
        return false;
    };
    text.lines().any(|line| {
        // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(at) = f.iter().position(|w| *w == "FLOCK") else {
            return false;
        };
        let (Some(p), Some(dev_ino)) = (f.get(at + 3), f.get(at + 4)) else {
            return false;
        };
        p.parse::<i32>() == Ok(pid) && dev_ino.rsplit(':').next().and_then(|i| i.parse::<u64>().ok()) == Some(inode)
    })
}

/// The base name this binary was started under.
pub fn own_program() -> Vec<u8> {
    let argv0 = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let first = argv0.split(|b| *b == 0).next().unwrap_or_default();
    base_name(first).to_vec()
}

fn base_name(p: &[u8]) -> &[u8] {
    p.rsplit(|b| *b == b'/').next().unwrap_or(p)
}

/// Whether a NUL-separated command line is `<program> … -serve … -socket
/// <socket>` (Go flag spellings: one or two dashes, `=value` or a separate
/// value; parsing stops at the first non-flag, as Go's does). A relative
/// `-socket` is resolved against the holder's working directory.
pub fn is_serve_of(cmdline: &[u8], cwd: Option<&Path>, socket: &Path, program: &[u8]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let argv: Vec<&[u8]> = cmdline
        .strip_suffix(b"\0")
        .unwrap_or(cmdline)
        .split(|b| *b == 0)
        .collect();
    let Some(first) = argv.first() else {
        return false;
    };
    if program.is_empty() || base_name(first) != program {
        return false;
    }
    let ServeArgs {
        serve, socket: sock, ..
    } = serve_args(cmdline);
    let Some(sock) = sock.filter(|s| !s.is_empty()) else {
        return false;
    };
    let absolute = |p: &[u8], base: Option<&Path>| -> Option<Vec<u8>> {
        if crate::base::gopath::is_abs(p) {
            Some(crate::base::gopath::clean(p))
        } else {
            base.map(|b| crate::base::gopath::clean(&crate::base::gopath::join(&[b.as_os_str().as_bytes(), p])))
        }
    };
    let own_cwd = std::env::current_dir().ok();
    let ours = absolute(socket.as_os_str().as_bytes(), own_cwd.as_deref());
    let theirs = absolute(sock, cwd);
    serve && ours.is_some() && ours == theirs
}

/// What a `-serve` command line says about the daemon it started.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ServeArgs<'a> {
    pub serve: bool,
    pub socket: Option<&'a [u8]>,
    pub keep_children: bool,
}

/// Walks a NUL-separated command line's flags as Go's `flag` would
/// (`remora -doctor` finds daemons with it too).
pub(crate) fn serve_args(cmdline: &[u8]) -> ServeArgs<'_> {
    serve_args_in(FLAGS, cmdline)
}

/// [`serve_args`] with the flags of `table`: the value of every flag that
/// takes one is skipped, so that it is not read as a flag.
fn serve_args_in<'a>(table: &[Flag], cmdline: &'a [u8]) -> ServeArgs<'a> {
    let argv: Vec<&[u8]> = cmdline
        .strip_suffix(b"\0")
        .unwrap_or(cmdline)
        .split(|b| *b == 0)
        .collect();
    let is_true = |value: Option<&[u8]>| matches!(value, None | Some(b"true" | b"1" | b"t" | b"T" | b"TRUE" | b"True"));
    let mut args = ServeArgs::default();
    let mut i = 1;
    while i < argv.len() {
        let a = argv[i];
        let name = match a.strip_prefix(b"--").or_else(|| a.strip_prefix(b"-")) {
            Some(n) if !n.is_empty() && !n.starts_with(b"-") => n,
            _ => break,
        };
        let (key, value) = match name.iter().position(|b| *b == b'=') {
            Some(eq) => (&name[..eq], Some(&name[eq + 1..])),
            None => (name, None),
        };
        match key {
            b"serve" => args.serve = is_true(value),
            b"keep-children" => args.keep_children = is_true(value),
            b"socket" => match value {
                Some(v) => args.socket = Some(v),
                None => {
                    i += 1;
                    args.socket = argv.get(i).copied();
                }
            },
            // Flags that take a value: skip it so it is not read as a flag.
            _ if value.is_none() && table.iter().any(|f| f.takes_value() && f.name.as_bytes() == key) => {
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    args
}

/// This machine and pid namespace: the boot id and the pid-namespace link,
/// joined by `/` (the reference's spelling). Empty when unknown.
pub fn node_id() -> String {
    let Ok(boot) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") else {
        return String::new();
    };
    let boot = boot.trim();
    let Ok(ns) = std::fs::read_link("/proc/self/ns/pid") else {
        return String::new();
    };
    if boot.is_empty() {
        return String::new();
    }
    format!("{boot}/{}", ns.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock() -> PathBuf {
        PathBuf::from("/run/x/rpc.sock")
    }

    #[test]
    fn serve_command_lines() {
        let yes: &[&[u8]] = &[
            b"/srv/remora\0-serve\0-socket\0/run/x/rpc.sock\0-token-file\0/t\0",
            b"remora\0--serve\0--socket=/run/x/./rpc.sock\0",
            b"remora\0-token-fd\x000\0-serve=true\0-socket\0/run/x//rpc.sock\0",
            b"remora\0-replay-dir\0/r\0-replay-budget-mb\x009\0-serve\0-socket\0/run/x/rpc.sock\0",
        ];
        for c in yes {
            assert!(
                is_serve_of(c, None, &sock(), b"remora"),
                "{:?}",
                String::from_utf8_lossy(c)
            );
        }
        let no: &[&[u8]] = &[
            b"/srv/other\0-serve\0-socket\0/run/x/rpc.sock\0",
            b"remora\0-bridge\0-socket\0/run/x/rpc.sock\0",
            b"remora\0-serve=false\0-socket\0/run/x/rpc.sock\0",
            b"remora\0-serve\0-socket\0/run/y/rpc.sock\0",
            b"remora\0-serve\0",
            b"remora\0x\0-serve\0-socket\0/run/x/rpc.sock\0",
            b"remora\0-token-file\0-serve\0-socket\0/run/x/rpc.sock\0",
            b"",
        ];
        for c in no {
            assert!(
                !is_serve_of(c, None, &sock(), b"remora"),
                "{:?}",
                String::from_utf8_lossy(c)
            );
        }
        // A relative socket resolves against the holder's cwd.
        assert!(is_serve_of(
            b"remora\0-serve\0-socket\0rpc.sock\0",
            Some(Path::new("/run/x")),
            &sock(),
            b"remora"
        ));
        assert!(!is_serve_of(
            b"remora\0-serve\0-socket\0rpc.sock\0",
            None,
            &sock(),
            b"remora"
        ));
    }

    #[test]
    fn keep_children_is_read_as_go_flags_are() {
        let keeps: &[&[u8]] = &[
            b"remora\0-serve\0-keep-children\0-socket\0/s\0",
            b"remora\0--keep-children=true\0-serve\0",
        ];
        for c in keeps {
            assert!(serve_args(c).keep_children, "{:?}", String::from_utf8_lossy(c));
        }
        let kills: &[&[u8]] = &[
            b"remora\0-serve\0-socket\0/s\0",
            b"remora\0-keep-children=false\0-serve\0",
            b"remora\0-serve\0x\0-keep-children\0",
            b"remora\0-token-file\0-keep-children\0-serve\0",
        ];
        for c in kills {
            assert!(!serve_args(c).keep_children, "{:?}", String::from_utf8_lossy(c));
        }
    }

    #[test]
    fn the_value_flags_come_from_the_table() {
        // `-planted-knob` takes a value only in the planted table: there
        // `-serve` is its value, not a flag.
        let c: &[u8] = b"remora\0-planted-knob\0-serve\0-socket\0/run/x/rpc.sock\0";
        assert!(serve_args(c).serve);
        assert!(!serve_args_in(&crate::base::flagtable::planted(), c).serve);
        // Every flag of the table that takes a value is skipped with it;
        // a boolean takes none.
        for flag in FLAGS {
            let c = format!("remora\0-{}\0-serve\0", flag.name);
            assert_eq!(serve_args(c.as_bytes()).serve, !flag.takes_value(), "{}", flag.name);
        }
    }

    #[test]
    fn refusals_before_any_process_is_inspected() {
        let node = node_id();
        let base = OwnerRecord {
            pid: 2,
            role: "serve".into(),
            node: node.clone(),
            ..Default::default()
        };
        let stop = OwnerRecord {
            role: "stop".into(),
            ..base.clone()
        };
        assert!(may_signal(&stop, 1, &sock()).unwrap_err().contains("not a serve"));
        let own = OwnerRecord {
            pid: std::process::id() as i64,
            ..base.clone()
        };
        assert!(may_signal(&own, 1, &sock()).unwrap_err().contains("own pid"));
        let elsewhere = OwnerRecord {
            node: "other-boot/pid:[1]".into(),
            ..base.clone()
        };
        assert!(may_signal(&elsewhere, 1, &sock())
            .unwrap_err()
            .contains("another machine"));
        let unknown = OwnerRecord {
            node: String::new(),
            ..base
        };
        assert!(may_signal(&unknown, 1, &sock()).unwrap_err().contains("unknown"));
    }

    #[test]
    fn record_field_order_and_omissions() {
        let r = OwnerRecord {
            pid: 7,
            role: "serve".into(),
            node: String::new(),
            instance_id: "ab".into(),
            started_at: 5,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"pid":7,"role":"serve","instanceId":"ab","startedAt":5}"#
        );
    }
}
