//! Child records: a SIGKILLed daemon cannot end its children, so the
//! next daemon of the same run directory (the socket's folder) does
//! ([`super::orphanreap`]), from the records this module keeps.
//!
//! While serving, the run-dir lock holder keeps one small JSON file per
//! running child, `<runDir>/children/<pid>.json`:
//! `{"pid","node","host","instance","daemonPid","daemonStart","argv0","start","at"}`
//! (written to a `.rec-<pid>.json.<random>` name and renamed, removed when
//! the child's exit is observed, all removed at graceful shutdown). Every
//! child also gets `CLAUDE_SSH_RUN_DIR=<runDir>` in its environment.
//! A `-keep-children` daemon writes no record (remora's own): it promised
//! its children they outlive it, so no successor may end them, whether it
//! stopped gracefully or was SIGKILLed.
//!
//! Files are reached through a descriptor of the `children` directory
//! (opened without following a link, and only if it is a real directory
//! of our own), never by path; nothing follows a link.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The variable that names a child's run directory.
pub(crate) const RUN_DIR_ENV: &str = "CLAUDE_SSH_RUN_DIR";
/// The variable in which a child names itself, `<pid>:<start ticks>`
/// (stamped by [`crate::agent::trampoline`]).
pub(crate) const CHILD_ENV: &str = "CLAUDE_SSH_CHILD";
/// A record's size cap.
const MAX_RECORD_BYTES: u64 = 4096;

/// One record, members in the reference's order.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub(crate) struct Record {
    pub pid: i64,
    pub node: String,
    pub host: String,
    pub instance: String,
    #[serde(rename = "daemonPid")]
    pub daemon_pid: i64,
    #[serde(rename = "daemonStart")]
    pub daemon_start: String,
    pub argv0: String,
    pub start: String,
    pub at: i64,
}

/// This daemon's recorder, set once it holds the run-dir lock.
struct Recorder {
    dir: OwnedFd,
    run_dir: PathBuf,
    own: Record,
    /// `-keep-children`: children are marked, never recorded.
    keep_children: bool,
}

static RECORDER: OnceLock<Recorder> = OnceLock::new();

/// The run directory of `socket`, as children see it in
/// [`RUN_DIR_ENV`]: the socket's folder, lexically cleaned.
pub(crate) fn run_dir_of(socket: &Path) -> PathBuf {
    let dir = crate::rundir::tokenfile::socket_dir(socket);
    PathBuf::from(OsStr::from_bytes(&crate::base::gopath::clean(
        dir.as_os_str().as_bytes(),
    )))
}

/// The `(name, value)` every child gets, once recording is on.
pub(crate) fn child_marker() -> Option<(&'static str, &'static Path)> {
    RECORDER.get().map(|r| (RUN_DIR_ENV, r.run_dir.as_path()))
}

/// Turns recording on for this daemon (the lock holder): opens, creating
/// it 0700 if missing, `<runDir>/children`. With `keep_children` the
/// children still get the run-dir marker and the trampoline's stamp, but
/// no record.
pub(crate) fn start_recording(run_dir: &Path, instance: &crate::base::instance::Instance, keep_children: bool) {
    let shown = run_dir.join("children");
    let dir = match open_children_dir(run_dir, true) {
        Ok(Some(fd)) => fd,
        failed => {
            crate::log_warn!(
                "[process.Registry] {} {}; recording nothing",
                shown.display(),
                why_not_used(&shown, failed.err())
            );
            return;
        }
    };
    let own = Record {
        pid: i64::from(std::process::id() as i32),
        node: crate::rundir::runlock::node_id(),
        host: host_id(),
        instance: instance.id.clone(),
        daemon_pid: i64::from(std::process::id() as i32),
        daemon_start: start_ticks(std::process::id() as i32).unwrap_or_default(),
        ..Default::default()
    };
    if keep_children {
        crate::log_info!(
            "[process.Registry] -keep-children: no child is recorded, so no later daemon of this run dir ends one"
        );
    }
    let _ = RECORDER.set(Recorder {
        dir,
        run_dir: run_dir.to_path_buf(),
        own,
        keep_children,
    });
}

/// Records child `pid`, started as `argv0`. A no-op when recording is off,
/// under `-keep-children`, or when the child's start time cannot be read
/// (it already ended).
pub(crate) fn record(pid: i32, argv0: &str) {
    let Some(r) = RECORDER.get().filter(|r| !r.keep_children) else {
        return;
    };
    if pid < 2 {
        return;
    }
    let Some(start) = start_ticks(pid) else {
        return;
    };
    let rec = Record {
        pid: i64::from(pid),
        argv0: argv0.to_string(),
        start,
        at: epoch_ms(),
        ..r.own.clone()
    };
    if let Err(e) = write_record(&r.dir, pid, &rec) {
        crate::log_warn!("[process.Registry] cannot record child {pid}: {e}");
    }
}

/// Removes child `pid`'s record (its exit was observed).
pub(crate) fn forget(pid: i32) {
    let Some(r) = RECORDER.get() else {
        return;
    };
    if let Err(e) = unlink_at(&r.dir, &format!("{pid}.json")) {
        if e.raw_os_error() != Some(libc::ENOENT) {
            crate::log_warn!(
                "[process.Registry] cannot remove record of child {pid}: removeat children/{pid}.json: {}",
                crate::base::goerr::io_text(&e)
            );
        }
    }
}

/// Graceful shutdown: this daemon's remaining records go (children kept
/// by `-keep-children` were left running on purpose).
pub(crate) fn forget_all() {
    let Some(r) = RECORDER.get() else {
        return;
    };
    for name in list_dir(&r.dir) {
        if let Some(rec) = read_record(&r.dir, &name) {
            if rec.instance == r.own.instance {
                let _ = unlink_at(&r.dir, &name);
            }
        }
    }
}

/// `/proc/<pid>/stat` after the command name: index 0 is the state,
/// 2 the pgid, 19 the start time in clock ticks.
pub(super) fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    Some(rest.split(' ').map(str::to_string).collect())
}

/// A process's start time in clock ticks since boot, as decimal text.
pub(crate) fn start_ticks(pid: i32) -> Option<String> {
    stat_fields(pid)?.get(19).cloned()
}

/// `machine-id:<id>`, empty when unknown.
pub(super) fn host_id() -> String {
    std::fs::read_to_string("/etc/machine-id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .map(|s| format!("machine-id:{s}"))
        .unwrap_or_default()
}

/// The boot-id part of a `node`.
pub(super) fn boot_of(node: &str) -> &str {
    node.split('/').next().unwrap_or("")
}

fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Opens `<run_dir>/children` without following a link; `Ok(None)` when
/// it is missing (and not to be created) or is not a directory of ours.
pub(super) fn open_children_dir(run_dir: &Path, create: bool) -> std::io::Result<Option<OwnedFd>> {
    let path = run_dir.join("children");
    if create {
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    let c = CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: open(2) on a NUL-terminated path; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) if !create => Ok(None),
            Some(libc::ENOTDIR) | Some(libc::ELOOP) => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let dir = unsafe { OwnedFd::from_raw_fd(fd) };
    let meta = File::from(dir.try_clone()?).metadata()?;
    // SAFETY: geteuid cannot fail.
    if std::os::unix::fs::MetadataExt::uid(&meta) != unsafe { libc::geteuid() } {
        return Ok(None);
    }
    Ok(Some(dir))
}

/// Why `children` was not used, for the log: what stands there (a link,
/// a file, another user's directory) or the error that stopped the open.
fn why_not_used(path: &Path, error: Option<std::io::Error>) -> String {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => "is a symbolic link".to_string(),
        Ok(meta) if !meta.is_dir() => "is not a directory".to_string(),
        // SAFETY: geteuid cannot fail.
        Ok(meta) if meta.uid() != unsafe { libc::geteuid() } => {
            format!("belongs to uid {}, not to this daemon's user", meta.uid())
        }
        Ok(_) => match error {
            Some(e) => format!("cannot be opened: {}", crate::base::goerr::io_text(&e)),
            None => "cannot be used".to_string(),
        },
        Err(e) => format!("cannot be made: {}", crate::base::goerr::io_text(&error.unwrap_or(e))),
    }
}

/// Names in the directory, in directory order.
pub(super) fn list_dir(dir: &OwnedFd) -> Vec<String> {
    let Ok(fd) = dir.try_clone() else {
        return Vec::new();
    };
    let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(path) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect()
}

fn cstr(name: &str) -> std::io::Result<CString> {
    CString::new(name).map_err(std::io::Error::other)
}

/// Reads one record: a regular file (not followed), ≤ 4096 bytes, one
/// JSON record.
pub(super) fn read_record(dir: &OwnedFd, name: &str) -> Option<Record> {
    let c = cstr(name).ok()?;
    // SAFETY: openat relative to our directory descriptor; checked below.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let file = unsafe { File::from_raw_fd(fd) };
    if !file.metadata().ok()?.file_type().is_file() {
        return None;
    }
    let mut body = Vec::new();
    file.take(MAX_RECORD_BYTES + 1).read_to_end(&mut body).ok()?;
    if body.len() as u64 > MAX_RECORD_BYTES {
        return None;
    }
    serde_json::from_slice(&body).ok()
}

pub(super) fn unlink_at(dir: &OwnedFd, name: &str) -> std::io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: unlinkat relative to our directory descriptor.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EISDIR) && crate::base::homeguard::check_entry(dir, c.as_bytes()).is_ok() {
        // SAFETY: as above, removing an (empty) directory planted there
        // (never the user's home, [`crate::base::homeguard`]).
        if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) } == 0 {
            return Ok(());
        }
    }
    Err(e)
}

/// Writes `rec` as `<pid>.json` through a fresh temp name and a rename.
fn write_record(dir: &OwnedFd, pid: i32, rec: &Record) -> Result<(), String> {
    let body = serde_json::to_vec(rec).map_err(|e| e.to_string())?;
    let mut random = [0u8; 6];
    let _ = crate::sys::os::fill_random(&mut random);
    let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let temp = format!(".rec-{pid}.json.{suffix}");
    let final_name = format!("{pid}.json");
    let (t, f) = (
        cstr(&temp).map_err(|e| e.to_string())?,
        cstr(&final_name).map_err(|e| e.to_string())?,
    );
    // SAFETY: openat relative to our directory descriptor, exclusive create.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            t.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(format!(
            "open children/{temp}: {}",
            crate::base::goerr::io_text(&std::io::Error::last_os_error())
        ));
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let mut file = unsafe { File::from_raw_fd(fd) };
    let written = file.write_all(&body);
    drop(file);
    // SAFETY: renameat within our directory descriptor.
    let renamed =
        written.is_ok() && unsafe { libc::renameat(dir.as_raw_fd(), t.as_ptr(), dir.as_raw_fd(), f.as_ptr()) } == 0;
    if !renamed {
        let e = std::io::Error::last_os_error();
        let _ = unlink_at(dir, &temp);
        return Err(match written {
            Err(w) => format!("write children/{temp}: {}", crate::base::goerr::io_text(&w)),
            Ok(()) => format!("rename children/{temp}: {}", crate::base::goerr::io_text(&e)),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_members_in_order() {
        let r = Record {
            pid: 7,
            node: "b/pid:[1]".into(),
            host: "machine-id:ab".into(),
            instance: "i".into(),
            daemon_pid: 3,
            daemon_start: "100".into(),
            argv0: "sleep".into(),
            start: "200".into(),
            at: 5,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"pid":7,"node":"b/pid:[1]","host":"machine-id:ab","instance":"i","daemonPid":3,"daemonStart":"100","argv0":"sleep","start":"200","at":5}"#
        );
    }

    #[test]
    fn run_dir_is_the_cleaned_socket_folder() {
        assert_eq!(
            run_dir_of(Path::new("/r//run/./c1/rpc.sock")),
            PathBuf::from("/r/run/c1")
        );
        assert_eq!(run_dir_of(Path::new("s.sock")), PathBuf::from("."));
    }
}
