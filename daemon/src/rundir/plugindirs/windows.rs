//! The Windows half of `plugindirs`' OS steps (issue 43): the roots and
//! the hash directories reached through `base::safedir` handles (links
//! and junctions refused, never followed), and the siblings asked through
//! their pipe (`rpc.pipe`, what `-listen-pipe` writes) and their AF_UNIX
//! socket.

use crate::base::goerr::{io_text, path_error};
use crate::base::gojson::go_lossy;
use crate::base::safedir::{self, Dir, UnsafeDir};
use std::io;
use std::path::Path;
use std::time::SystemTime;

use super::{Layout, SIBLING_DIAL_TIMEOUT};

/// `WSAECONNREFUSED`: a socket file nobody listens on.
const WSAECONNREFUSED: i32 = 10061;

/// Opens a root: the base folder (the daemon's own) judged as safedir's
/// walk judges a trusted directory, then each level below it without
/// following a link. `Ok(None)` when it is missing.
pub(crate) fn open_root(base: &Path, below: &[&Path]) -> io::Result<Option<Dir>> {
    let base = std::path::absolute(base)?;
    let mut dir = match safedir::open_trusted_dir(&base) {
        Ok(dir) => dir,
        Err(UnsafeDir::Io { error, .. }) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(UnsafeDir::Io { error, .. }) => return Err(error),
        Err(other) => return Err(io::Error::new(io::ErrorKind::PermissionDenied, other.to_string())),
    };
    for level in below {
        dir = match safedir::open_dir_in(&dir, level.as_os_str().as_encoded_bytes()) {
            Ok(dir) => dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
    }
    Ok(Some(dir))
}

/// When the hash directory `name` of `root` was last used: the newer of
/// its own last-write time and its `.synced` marker's; `None` when it is
/// not a directory of its own (a link or junction named like a hash is
/// left alone).
pub(super) fn last_used(root: &Dir, name: &[u8]) -> Option<SystemTime> {
    let dir = safedir::open_dir_in(root, name).ok()?;
    let mut last_used = safedir::modified_of(&dir).ok()?;
    if let Ok(synced) = safedir::open_file_at(&dir, b".synced", libc::O_RDONLY, 0) {
        if let Ok(t) = synced.metadata().and_then(|m| m.modified()) {
            last_used = last_used.max(t);
        }
    }
    Some(last_used)
}

/// The first sibling daemon that blocks the legacy sweep, as the detail of
/// the `skipped: another install's daemon is running (<detail>)` text; or
/// `None` when every other install under `<X>/run` is provably gone. A
/// sibling is asked through its pipe first (a daemon under Wine, or one
/// started with `-listen-pipe`, may serve nothing else), then its socket.
/// A host without AF_UNIX (Wine 8) has no sibling listening on one.
pub(crate) async fn blocking_sibling(layout: &Layout) -> Option<String> {
    let run_dir = layout.run_dir();
    let names = match super::sibling_names(layout) {
        Ok(names) => names,
        Err(detail) => return Some(detail),
    };
    for name in names {
        let id = go_lossy(name.as_encoded_bytes());
        if let Some(blocked) = ask_pipe(&run_dir.join(&name).join("rpc.pipe"), &id).await {
            return Some(blocked);
        }
        if let Some(blocked) = ask_socket(&run_dir.join(&name).join("rpc.sock"), &id).await {
            return Some(blocked);
        }
    }
    None
}

/// Runs a blocking dial on the pool, within the sibling timeout; `None`
/// when it took longer.
async fn within<T: Send + 'static>(dial: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    match tokio::time::timeout(SIBLING_DIAL_TIMEOUT, tokio::task::spawn_blocking(dial)).await {
        Ok(Ok(v)) => Some(v),
        _ => None,
    }
}

/// Whether the sibling's pipe (named in its `rpc.pipe`) blocks the sweep.
async fn ask_pipe(file: &Path, id: &str) -> Option<String> {
    let rel = format!("run/{id}/rpc.pipe");
    let pipe = match crate::sys::dial::read_pipe_name(file) {
        Ok(Some(pipe)) => pipe,
        Ok(None) => return None,
        Err(e) => {
            let shown = go_lossy(file.as_os_str().as_encoded_bytes());
            return Some(format!("cannot inspect {shown}: {}", path_error("open", &shown, &e)));
        }
    };
    let dialed = pipe.clone();
    match within(move || crate::sys::dial::Pipe::open(&dialed).map(drop)).await {
        Some(Ok(())) => Some(format!("{rel} answers")),
        // A stale file names a pipe nobody serves.
        Some(Err(e)) if e.kind() == io::ErrorKind::NotFound => None,
        Some(Err(e)) => Some(format!("cannot rule out {rel}: open {pipe}: {}", io_text(&e))),
        None => Some(format!("cannot rule out {rel}: open {pipe}: i/o timeout")),
    }
}

/// Whether the sibling's AF_UNIX socket blocks the sweep (the Unix half's
/// texts).
async fn ask_socket(socket: &Path, id: &str) -> Option<String> {
    let shown = go_lossy(socket.as_os_str().as_encoded_bytes());
    match std::fs::symlink_metadata(socket) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => return Some(format!("cannot inspect {shown}: {}", path_error("stat", &shown, &e))),
    }
    let rel = format!("run/{id}/rpc.sock");
    let dialed = socket.to_path_buf();
    match within(move || crate::sys::dial::connect_unix(&dialed).map(drop)).await {
        Some(Ok(())) => Some(format!("{rel} answers")),
        // No AF_UNIX on this host: nothing listens on one.
        Some(Err((crate::sys::dial::DialStep::Socket, _))) => None,
        Some(Err((_, e))) if e.raw_os_error() == Some(WSAECONNREFUSED) || e.kind() == io::ErrorKind::NotFound => None,
        Some(Err((step, e))) => Some(format!(
            "cannot rule out {rel}: dial unix {shown}: {}: {}",
            step.word(),
            io_text(&e)
        )),
        None => Some(format!("cannot rule out {rel}: dial unix {shown}: i/o timeout")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::sweep;
    use super::*;
    use std::collections::HashSet;
    use std::time::Duration;

    #[test]
    fn a_sweep_removes_old_hash_directories_only() {
        let t = tempfile::tempdir().unwrap();
        let root_path = t.path().join("plugins");
        for name in ["0123456789abcdef", "fedcba9876543210", "1111111111111111", "not-a-hash"] {
            std::fs::create_dir_all(root_path.join(name).join("inner")).unwrap();
            std::fs::write(root_path.join(name).join("inner").join("f"), "x").unwrap();
        }
        // A file named like a hash is not a directory of ours: left.
        std::fs::write(root_path.join("2222222222222222"), "x").unwrap();
        std::fs::write(t.path().join("beside"), "keep").unwrap();
        let root = open_root(t.path(), &[Path::new("plugins")]).unwrap().unwrap();
        let live: HashSet<String> = ["fedcba9876543210".to_string()].into();
        // A cutoff after now: everything not live is old.
        let cutoff = SystemTime::now() + Duration::from_secs(86_400);
        let swept = sweep(&root, &root_path, &live, cutoff, false);
        assert_eq!(swept.removed, ["0123456789abcdef", "1111111111111111"]);
        assert_eq!((swept.live, swept.young), (1, 0));
        assert!(swept.errors.is_empty(), "{:?}", swept.errors);
        assert!(!root_path.join("0123456789abcdef").exists());
        assert!(root_path.join("fedcba9876543210/inner/f").exists());
        assert!(root_path.join("not-a-hash/inner/f").exists());
        assert!(root_path.join("2222222222222222").exists());
        assert!(t.path().join("beside").exists());
        // A cutoff long ago: everything is young.
        let swept = sweep(&root, &root_path, &HashSet::new(), SystemTime::UNIX_EPOCH, false);
        assert_eq!((swept.removed.len(), swept.young), (0, 1));
        // A root that is not there.
        assert!(open_root(t.path(), &[Path::new("gone")]).unwrap().is_none());
    }
}
