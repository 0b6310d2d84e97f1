//! Pruning `-cli-dir` to the `-cli-keep` most recent CLIs.
//!
//! Candidates are the regular files directly in the directory (symlinks,
//! subdirectories and hidden names — which include the install's own
//! temporaries — are never touched). The current version always stays and
//! counts as one of the kept files; the others are ranked by mtime, newest
//! first (ties: name, descending), and those past `keep - 1` are removed.
//! `keep <= 0` is read as 1: the current CLI is never removed. Best effort:
//! a file that cannot be removed is left, and the install still succeeds.

use std::cmp::Reverse;
use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::time::SystemTime;

/// Prunes `dir`, keeping `current` and the `keep - 1` newest other files.
pub fn prune(dir: &Path, current: &str, keep: i64) {
    let keep = usize::try_from(keep.max(1)).unwrap_or(usize::MAX);
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut others: Vec<(SystemTime, OsString)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            if name.as_encoded_bytes().first() == Some(&b'.') || name == current {
                return None;
            }
            // DirEntry::metadata does not follow symlinks.
            let meta = entry.metadata().ok()?;
            if !meta.file_type().is_file() {
                return None;
            }
            Some((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), name))
        })
        .collect();
    others.sort_by_key(|(mtime, name)| Reverse((*mtime, name.clone())));
    for (_, name) in others.into_iter().skip(keep - 1) {
        let _ = fs::remove_file(dir.join(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn file_at(dir: &Path, name: &str, age_secs: u64) {
        let f = fs::File::create(dir.join(name)).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(age_secs))
            .unwrap();
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn keeps_current_and_newest() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        file_at(d, "a", 10);
        file_at(d, "b", 20);
        file_at(d, "c", 30);
        file_at(d, "old-current", 100);
        file_at(d, ".hidden", 1000);
        fs::create_dir(d.join("sub")).unwrap();
        prune(d, "old-current", 3);
        assert_eq!(names(d), [".hidden", "a", "b", "old-current", "sub"]);
        prune(d, "old-current", 0);
        assert_eq!(names(d), [".hidden", "old-current", "sub"]);
    }
}
