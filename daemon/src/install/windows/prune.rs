//! Pruning `-cli-dir` to the `-cli-keep` most recent CLIs, Windows half
//! of `install/prune.rs` (same rule, same names): the regular files
//! directly in the directory but hidden names and the current CLI, ranked
//! by mtime, newest first (ties: name, descending); the current one
//! always stays and counts as one kept. The directory is opened through
//! [`crate::base::safedir`] (no link or junction on the way, ours), and
//! every entry is judged and removed relative to that handle, so nothing
//! outside it is ever touched. A file another user owns is left. Best
//! effort, as on Unix.

use crate::base::safedir;
use std::cmp::Reverse;
use std::path::Path;

/// Prunes `dir`, keeping `current` (the CLI's file name, matched without
/// letter case, as the file system matches it) and the `keep - 1` newest
/// other files.
pub(super) fn prune(dir: &Path, current: &str, keep: i64) {
    let keep = usize::try_from(keep.max(1)).unwrap_or(usize::MAX);
    let Ok(handle) = safedir::open_own_dir(dir) else {
        return;
    };
    let Ok(names) = safedir::read_names(&handle) else {
        return;
    };
    let mut others: Vec<((i64, i64), Vec<u8>)> = names
        .into_iter()
        .filter(|name| name.first() != Some(&b'.') && !name.eq_ignore_ascii_case(current.as_bytes()))
        .filter_map(|name| Some((regular_file_mtime(&handle, &name)?, name)))
        .collect();
    others.sort_by_key(|(mtime, name)| Reverse((*mtime, name.clone())));
    for (_, name) in others.into_iter().skip(keep - 1) {
        let _ = safedir::unlink_in(&handle, &name);
    }
}

/// The modification time (seconds, nanoseconds since the Unix epoch) of
/// `name` in `dir` when it is a regular file of ours; links are not
/// followed. The handle is closed before the caller removes the file.
fn regular_file_mtime(dir: &safedir::Dir, name: &[u8]) -> Option<(i64, i64)> {
    let file = safedir::open_file_at(dir, name, libc::O_RDONLY, 0).ok()?;
    if !safedir::is_own_regular(&file) {
        return None;
    }
    let since = file
        .metadata()
        .ok()?
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some((i64::try_from(since.as_secs()).ok()?, i64::from(since.subsec_nanos())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn keeps_current_and_newest() {
        let dir = tempfile::tempdir().unwrap();
        let base = SystemTime::now() - Duration::from_secs(3600);
        for (i, name) in ["1.exe", "2.exe", "3.exe", "4.exe", ".5.exe.tmp-1-0123456789abcdef"]
            .iter()
            .enumerate()
        {
            let file = std::fs::File::create(dir.path().join(name)).unwrap();
            file.set_modified(base + Duration::from_secs(60 * i as u64)).unwrap();
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        // The current CLI is the oldest; it stays, with the newest other one.
        prune(dir.path(), "1.exe", 2);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, [".5.exe.tmp-1-0123456789abcdef", "1.exe", "4.exe", "sub"]);
        // `keep` 0 is read as 1: the current one alone.
        prune(dir.path(), "1.exe", 0);
        assert!(!dir.path().join("4.exe").exists());
        assert!(dir.path().join("1.exe").exists());
    }
}
