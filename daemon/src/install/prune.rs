//! Pruning `-cli-dir` to the `-cli-keep` most recent CLIs.
//!
//! Candidates are the regular files directly in the directory (symlinks,
//! subdirectories and hidden names — which include the install's own
//! temporaries — are never touched). The current version always stays and
//! counts as one of the kept files; the others are ranked by mtime, newest
//! first (ties: name, descending), and those past `keep - 1` are removed.
//! `keep <= 0` is read as 1: the current CLI is never removed. Best effort:
//! a file that cannot be removed is left, and the install still succeeds.
//! The prune follows no link: a `-cli-dir` that is itself a link is not
//! pruned (remora's rule; it once deleted a user's own files in the
//! directory such a link named).

use std::cmp::Reverse;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

/// Prunes `dir`, keeping `current` and the `keep - 1` newest other files.
/// The directory is opened without following a link, and its entries are
/// judged and removed through that descriptor: a link at `-cli-dir` (or
/// one swapped in meanwhile) never leads the prune into another directory.
pub(super) fn prune(dir: &Path, current: &str, keep: i64) {
    let keep = usize::try_from(keep.max(1)).unwrap_or(usize::MAX);
    let Some(fd) = open_no_follow(dir) else {
        return;
    };
    let Ok(names) = crate::base::safedir::read_names(&fd) else {
        return;
    };
    let mut others: Vec<((i64, i64), Vec<u8>)> = names
        .into_iter()
        .filter(|name| name.first() != Some(&b'.') && name.as_slice() != current.as_bytes())
        .filter_map(|name| Some((regular_file_mtime(&fd, &name)?, name)))
        .collect();
    others.sort_by_key(|(mtime, name)| Reverse((*mtime, name.clone())));
    for (_, name) in others.into_iter().skip(keep - 1) {
        let Ok(c) = std::ffi::CString::new(name) else {
            continue;
        };
        // SAFETY: `fd` is an open directory and `c` is NUL-terminated.
        unsafe { libc::unlinkat(fd.as_raw_fd(), c.as_ptr(), 0) };
    }
}

/// `dir` as a directory descriptor, `None` if it is a link or no directory.
fn open_no_follow(dir: &Path) -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(dir)
        .ok()?;
    Some(OwnedFd::from(file))
}

/// The modification time (seconds, nanoseconds) of `name` in `dir` when it
/// is a regular file; links are not followed.
fn regular_file_mtime(dir: &OwnedFd, name: &[u8]) -> Option<(i64, i64)> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `dir` is open, `c` is NUL-terminated, `st` is a valid out-pointer.
    if unsafe { libc::fstatat(dir.as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return None;
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    // `time_t` and the nanosecond field differ in width across targets.
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    Some((st.st_mtime as i64, i64::from(st.st_mtime_nsec)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::time::{Duration, SystemTime};

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

    #[test]
    fn a_link_at_the_cli_dir_is_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let own = t.path().join("own");
        fs::create_dir(&own).unwrap();
        file_at(&own, "notes", 10);
        file_at(&own, "photo", 20);
        let link = t.path().join("cli");
        std::os::unix::fs::symlink(&own, &link).unwrap();
        prune(&link, "2.0", 1);
        assert_eq!(names(&own), ["notes", "photo"], "nothing deleted through the link");
        // A link inside the real dir is no candidate either.
        let real = t.path().join("real");
        fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(own.join("notes"), real.join("1.0")).unwrap();
        file_at(&real, "0.9", 50);
        prune(&real, "2.0", 1);
        assert_eq!(names(&real), ["1.0"]);
        assert!(own.join("notes").exists());
    }
}
