//! The cached plugin directories `plugins.prune` sweeps (reference
//! `19f30c46`): where they are, which are kept, and removing the rest
//! without ever leaving the two roots or following a link.
//!
//! The layout derives from the daemon's own socket. A socket at
//! `<X>/run/<clientId>/rpc.sock` gives the per-install root
//! `<X>/plugins/<clientId>` and the shared legacy root `<X>/plugins`; any
//! other socket has no root at all. Under a root, only directories named
//! by 16 lowercase hex digits (a content hash) are candidates. One is kept
//! when a running child names its hash in its argv (*live*) or when it was
//! used within the retention window (*young*: the newer of its own mtime
//! and its `.synced` marker's); anything else is removed. The legacy root
//! may be in use by another install's daemon on the same host, so it is
//! swept only when no sibling socket under `<X>/run` answers or could.
//!
//! What the OS decides (opening a root, a hash directory's times, asking
//! the siblings) is below for Unix and in `plugindirs/windows.rs` for
//! Windows (issue 43), with the same names.

#[cfg(unix)]
use crate::base::goerr::io_text;
use crate::base::goerr::path_error;
use crate::base::gojson::go_lossy;
use crate::base::safedir::Dir;
use crate::base::utctime;
use std::collections::HashSet;
use std::ffi::OsString;
#[cfg(unix)]
use std::io;
#[cfg(unix)]
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
#[cfg(unix)]
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

#[cfg(windows)]
#[path = "plugindirs/windows.rs"]
mod os;
#[cfg(windows)]
use os::last_used;
#[cfg(windows)]
pub(crate) use os::{blocking_sibling, open_root};

/// `minAgeDays` is clamped to this range; absent reads as 0, so 7.
pub(crate) const MIN_AGE_DAYS: i64 = 7;
pub(crate) const MAX_AGE_DAYS: i64 = 3650;

/// How long a sibling socket may take to accept before it counts as
/// "cannot rule out".
pub(crate) const SIBLING_DIAL_TIMEOUT: Duration = Duration::from_millis(300);

/// Why a daemon whose socket is off the run layout prunes nothing.
pub(crate) const NOT_RUN_SHAPED: &str =
    "this daemon's socket is not under run/<clientId>/, so it has no per-install plugin root to prune";

/// The candidate hash length.
const HASH_LEN: usize = 16;

/// The run layout around a socket at `<base>/run/<client_id>/rpc.sock`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// `<X>`.
    pub base: PathBuf,
    pub client_id: OsString,
}

impl Layout {
    /// The layout of `socket`, if it is run-shaped: the last component is
    /// exactly `rpc.sock`, its folder's folder exactly `run` (case
    /// matters), and the client id is neither empty nor `.`.
    pub(crate) fn of(socket: &Path) -> Option<Layout> {
        let cleaned = crate::base::gopath::clean(socket.as_os_str().as_encoded_bytes());
        // SAFETY: cleaning drops and merges whole components at ASCII
        // separators of an `OsStr`'s encoded bytes, so they stay valid.
        let cleaned = PathBuf::from(unsafe { OsString::from_encoded_bytes_unchecked(cleaned) });
        if cleaned.file_name()? != "rpc.sock" {
            return None;
        }
        let client_dir = cleaned.parent()?;
        let client_id = client_dir.file_name()?;
        if client_id.is_empty() || client_id == "." || client_id == ".." {
            return None;
        }
        let run = client_dir.parent()?;
        if run.file_name()? != "run" {
            return None;
        }
        let base = match run.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Some(Layout {
            base,
            client_id: client_id.to_os_string(),
        })
    }

    pub(crate) fn run_dir(&self) -> PathBuf {
        self.base.join("run")
    }

    pub(crate) fn legacy_root(&self) -> PathBuf {
        self.base.join("plugins")
    }

    pub(crate) fn install_root(&self) -> PathBuf {
        self.legacy_root().join(&self.client_id)
    }
}

/// The plugin hashes a child's argv names: every maximal run of exactly
/// 16 characters of `[0-9a-f]` in any word (`--plugin-dir <…>/<hash>`).
pub(crate) fn hashes_in<'a>(words: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut found = Vec::new();
    for word in words {
        let bytes = word.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if !is_hash_byte(bytes[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && is_hash_byte(bytes[i]) {
                i += 1;
            }
            if i - start == HASH_LEN {
                if let Ok(hash) = std::str::from_utf8(&bytes[start..i]) {
                    found.push(hash.to_string());
                }
            }
        }
    }
    found
}

fn is_hash_byte(b: u8) -> bool {
    matches!(b, b'0'..=b'9' | b'a'..=b'f')
}

fn is_hash_name(name: &[u8]) -> bool {
    name.len() == HASH_LEN && name.iter().all(|&b| is_hash_byte(b))
}

/// The other installs' names under `<X>/run`, sorted (none when it is
/// missing), or the `cannot read …` detail when it cannot be listed: what
/// both halves of [`blocking_sibling`] ask in turn.
fn sibling_names(layout: &Layout) -> Result<Vec<OsString>, String> {
    let run_dir = layout.run_dir();
    let mut names = match std::fs::read_dir(&run_dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .filter(|name| *name != layout.client_id)
            .collect::<Vec<_>>(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            let shown = go_lossy(run_dir.as_os_str().as_encoded_bytes());
            return Err(format!("cannot read {shown}: {}", path_error("open", &shown, &e)));
        }
    };
    names.sort();
    Ok(names)
}

/// The first sibling daemon that blocks the legacy sweep, as the detail of
/// the `skipped: another install's daemon is running (<detail>)` text; or
/// `None` when every other socket under `<X>/run` is provably gone.
#[cfg(unix)]
pub(crate) async fn blocking_sibling(layout: &Layout) -> Option<String> {
    let run_dir = layout.run_dir();
    let names = match sibling_names(layout) {
        Ok(names) => names,
        Err(detail) => return Some(detail),
    };
    for name in names {
        let socket = run_dir.join(&name).join("rpc.sock");
        let shown = go_lossy(socket.as_os_str().as_bytes());
        match std::fs::metadata(&socket) {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => continue,
            Err(e) => return Some(format!("cannot inspect {shown}: {}", path_error("stat", &shown, &e))),
        }
        let rel = format!("run/{}/rpc.sock", go_lossy(name.as_bytes()));
        match tokio::time::timeout(SIBLING_DIAL_TIMEOUT, tokio::net::UnixStream::connect(&socket)).await {
            Ok(Ok(_)) => return Some(format!("{rel} answers")),
            Ok(Err(e))
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ECONNREFUSED) | Some(libc::ENOTSOCK) | Some(libc::ENOENT)
                ) =>
            {
                continue
            }
            Ok(Err(e)) => {
                return Some(format!(
                    "cannot rule out {rel}: dial unix {shown}: connect: {}",
                    io_text(&e)
                ))
            }
            Err(_) => return Some(format!("cannot rule out {rel}: dial unix {shown}: i/o timeout")),
        }
    }
    None
}

/// What sweeping one root did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Swept {
    /// Hashes removed, sorted.
    pub removed: Vec<String>,
    pub live: u64,
    pub young: u64,
    pub errors: Vec<String>,
}

/// Opens `name` inside `dir` as a directory without following a link.
#[cfg(unix)]
fn open_dir_nofollow(dir: Option<&OwnedFd>, name: &Path) -> io::Result<OwnedFd> {
    let c =
        std::ffi::CString::new(name.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: `c` is NUL-terminated and `dirfd` is open or AT_FDCWD.
    let fd = unsafe { libc::openat(dirfd, c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstatat(dir, name, flags)`.
#[cfg(unix)]
fn stat_at(dir: &OwnedFd, name: &[u8], flags: libc::c_int) -> io::Result<libc::stat> {
    let c = std::ffi::CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: valid dirfd, NUL-terminated name, `st` is writable.
    if unsafe { libc::fstatat(dir.as_raw_fd(), c.as_ptr(), st.as_mut_ptr(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatat succeeded and filled `st`.
    Ok(unsafe { st.assume_init() })
}

#[cfg(unix)]
fn mtime_of(st: &libc::stat) -> SystemTime {
    let secs = st.st_mtime;
    let nanos = u32::try_from(st.st_mtime_nsec).unwrap_or(0);
    match u64::try_from(secs) {
        Ok(s) => SystemTime::UNIX_EPOCH + Duration::new(s, nanos),
        Err(_) => SystemTime::UNIX_EPOCH,
    }
}

/// Opens a root: the base folder as given (the daemon's own), then each
/// level below it without following a link. `Ok(None)` when it is missing.
#[cfg(unix)]
pub(crate) fn open_root(base: &Path, below: &[&Path]) -> io::Result<Option<OwnedFd>> {
    let open = |dir: Option<&OwnedFd>, name: &Path| match dir {
        Some(_) => open_dir_nofollow(dir, name),
        None => {
            let c = std::ffi::CString::new(name.as_os_str().as_bytes())
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            // SAFETY: NUL-terminated path.
            let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: a fresh descriptor we own.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        }
    };
    let mut fd = match open(None, base) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    for level in below {
        fd = match open(Some(&fd), level) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
    }
    Ok(Some(fd))
}

/// Sweeps the open root `root` (shown as `root_path`): every hash
/// directory that is neither live nor used after `cutoff` is removed.
/// `legacy` only changes the log line.
pub(crate) fn sweep(root: &Dir, root_path: &Path, live: &HashSet<String>, cutoff: SystemTime, legacy: bool) -> Swept {
    let mut out = Swept::default();
    let shown_root = go_lossy(root_path.as_os_str().as_encoded_bytes());
    let mut names = match crate::base::safedir::read_names(root) {
        Ok(names) => names,
        Err(e) => {
            out.errors
                .push(format!("{shown_root}: {}", path_error("open", &shown_root, &e)));
            return out;
        }
    };
    names.sort();
    for name in names {
        if !is_hash_name(&name) {
            continue;
        }
        // Only a real directory: a link named like a hash is left alone.
        let Some(last_used) = last_used(root, &name) else {
            continue;
        };
        let hash = String::from_utf8_lossy(&name).into_owned();
        if live.contains(&hash) {
            out.live += 1;
            continue;
        }
        if last_used > cutoff {
            out.young += 1;
            continue;
        }
        // The name is 16 ASCII hex digits (`is_hash_name`).
        let dir_path = root_path.join(&hash);
        let shown_dir = go_lossy(dir_path.as_os_str().as_encoded_bytes());
        match crate::tarx::remove_tree_in(root, &name, root_path.as_os_str().as_encoded_bytes()) {
            Ok(()) => {
                let kind = if legacy { "legacy plugin dir" } else { "plugin dir" };
                crate::log_info!(
                    "[Plugins] pruned {kind} {} (last used {})",
                    crate::base::logging::Untrusted(&shown_dir),
                    rfc3339(last_used)
                );
                out.removed.push(hash);
            }
            Err(e) => out.errors.push(format!("{shown_dir}: {e}")),
        }
    }
    out
}

/// When the hash directory `name` of `root` was last used: the newer of
/// its own mtime and its `.synced` marker's; `None` when it is not a real
/// directory (a link named like a hash is left alone).
#[cfg(unix)]
fn last_used(root: &OwnedFd, name: &[u8]) -> Option<SystemTime> {
    let st = stat_at(root, name, libc::AT_SYMLINK_NOFOLLOW).ok()?;
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return None;
    }
    let mut last_used = mtime_of(&st);
    if let Ok(dir) = open_dir_nofollow(Some(root), Path::new(std::ffi::OsStr::from_bytes(name))) {
        if let Ok(synced) = stat_at(&dir, b".synced", 0) {
            last_used = last_used.max(mtime_of(&synced));
        }
    }
    Some(last_used)
}

/// `2006-01-02T15:04:05Z` (UTC) for a log line.
fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    utctime::rfc3339(i64::try_from(secs).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_shape_is_exact() {
        let l = Layout::of(Path::new("/r/run/c1/rpc.sock")).unwrap();
        assert_eq!(l.base, PathBuf::from("/r"));
        assert_eq!(l.install_root(), PathBuf::from("/r/plugins/c1"));
        assert_eq!(
            Layout::of(Path::new("/r//run/./c1/rpc.sock")).unwrap().base,
            PathBuf::from("/r")
        );
        for off in [
            "/r/RUN/c1/rpc.sock",
            "/r/run/c1/rpc.sock2",
            "/r/run/rpc.sock",
            "/r/b/s.sock",
            "rpc.sock",
        ] {
            assert_eq!(Layout::of(Path::new(off)), None, "{off}");
        }
    }

    #[test]
    fn hashes_are_maximal_16_hex_runs() {
        let words = [
            "--plugin-dir",
            "/x/plugins/c1/0123456789abcdef",
            "0123456789abcdef0",
            "0123456789ABCDEF",
            "a-fedcba9876543210-b",
        ];
        assert_eq!(hashes_in(words), ["0123456789abcdef", "fedcba9876543210"]);
    }

    #[test]
    fn log_times_are_utc_rfc3339() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
            "2023-11-14T22:13:20Z"
        );
    }
}
