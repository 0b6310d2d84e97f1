//! The stale-registration step of `git.worktree_create` (build 89cb6289,
//! [`crate::protocol::build::Switch::WorktreeRegistration`]; Linux and
//! macOS): right before `git worktree add`, an entry of
//! `<baseRepo>/.git/worktrees` whose `gitdir` record names the `.git` of
//! the new worktree is stale, and the one stale entry of the folder is
//! removed unless it holds a `locked` file.
//!
//! The record is compared as text (claustrum's fit of the A and S cells of
//! `docs/record/git-worktree-create.md`): blanks and newlines cut at both
//! ends, a relative record taken from the entry's folder with its links
//! resolved, then cleaned with no link resolved; the other side is
//! `worktreePath` with the links of its existing part resolved, plus
//! `/.git`. The entry's name does not count. Two or more stale entries,
//! or one that holds `locked`, all stay.
//!
//! The remove is best effort (no error of it reaches the frame): one
//! `RemoveAll` of the entry name through the open `worktrees` folder,
//! never following a link, and never of an entry that is or holds the
//! home directory (remora's D2 guard). Every read goes through the same
//! open folder, without following a link or waiting on a FIFO; an entry
//! that is not a real directory is passed over. Each stale entry that
//! stays is remembered: the test after the add refuses a registration that
//! is one of them ([`super::worktree_registered`]).

use super::paths::clean;
use crate::base::homeguard;
use crate::base::safedir;
use crate::tarx;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The most of a `gitdir` record read (git writes one path and a newline).
pub(super) const RECORD_CAP: u64 = 64 * 1024;

/// The stale entries the step left in place, by device and inode.
#[derive(Debug, Default)]
pub(super) struct KeptStale {
    entries: Vec<(u64, u64)>,
}

impl KeptStale {
    /// Whether the directory with this identity is a stale entry that
    /// stayed.
    pub(super) fn holds(&self, identity: (u64, u64)) -> bool {
        self.entries.contains(&identity)
    }
}

/// One stale entry found by the listing.
struct Stale {
    name: Vec<u8>,
    locked: bool,
}

/// Runs the step for a create of `worktree` (absolute, its parents made)
/// in `repo` (as sent); what stayed.
pub(super) fn drop_stale(repo: &str, worktree: &str) -> KeptStale {
    let registrations = Path::new(repo).join(".git").join("worktrees");
    let Ok(dir) = open_dir_path(&registrations) else {
        return KeptStale::default();
    };
    // A relative record counts from the entry's folder, links resolved.
    let resolved = std::fs::canonicalize(&registrations).unwrap_or(registrations);
    let target = format!("{}/.git", resolve_existing(worktree));
    let Ok(names) = safedir::read_names(&dir) else {
        return KeptStale::default();
    };
    let stale: Vec<Stale> = names
        .into_iter()
        .filter_map(|name| {
            let entry = safedir::open_dir_in(&dir, &name).ok()?;
            let record = read_record(&entry, b"gitdir")?;
            let named = record_path(&record, &resolved.join(std::ffi::OsStr::from_bytes(&name)))?;
            (named == target).then(|| Stale {
                locked: exists_in(&entry, b"locked"),
                name,
            })
        })
        .collect();
    if let [only] = stale.as_slice() {
        if !only.locked && homeguard::check_entry(&dir, &only.name).is_ok() {
            let _ = tarx::remove_tree_errno(&dir, &only.name);
        }
    }
    KeptStale {
        entries: stale.iter().filter_map(|s| identity_in(&dir, &s.name)).collect(),
    }
}

/// The path a record names: trimmed of blanks and newlines at both ends,
/// a relative one joined to `entry`, cleaned; `None` for an empty record
/// or one that is not UTF-8.
pub(super) fn record_path(record: &[u8], entry: &Path) -> Option<String> {
    let text = std::str::from_utf8(record.trim_ascii()).ok()?;
    if text.is_empty() {
        return None;
    }
    if text.starts_with('/') {
        return Some(clean(text));
    }
    Some(clean(&format!("{}/{text}", entry.to_string_lossy())))
}

/// `path` cleaned, with the links of its longest existing part resolved
/// and the rest appended as sent.
pub(super) fn resolve_existing(path: &str) -> String {
    let cleaned = clean(path);
    let mut head = PathBuf::from(&cleaned);
    let mut tail: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&head) {
            let mut out = real;
            out.extend(tail.iter().rev());
            return out.to_string_lossy().into_owned();
        }
        match (
            head.file_name().map(ToOwned::to_owned),
            head.parent().map(Path::to_path_buf),
        ) {
            (Some(name), Some(parent)) => {
                tail.push(name);
                head = parent;
            }
            _ => return cleaned,
        }
    }
}

/// The bytes of the regular file `name` in `dir` (no link followed, no
/// wait on a FIFO), at most [`RECORD_CAP`] + 1; `None` when it cannot be
/// read as a file.
pub(super) fn read_record(dir: &OwnedFd, name: &[u8]) -> Option<Vec<u8>> {
    let file = safedir::open_file_at(dir, name, libc::O_RDONLY, 0).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(RECORD_CAP + 1).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Opens the directory at `path`, following links.
pub(super) fn open_dir_path(path: &Path) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)?;
    Ok(OwnedFd::from(dir))
}

/// Whether `name` exists in `dir`, of any type (a link not followed).
fn exists_in(dir: &OwnedFd, name: &[u8]) -> bool {
    stat_in(dir, name).is_some()
}

/// Device and inode of the real directory `name` in `dir`.
// `dev_t` is `i32` on macOS, `u64` on Linux.
#[allow(clippy::unnecessary_cast)]
pub(super) fn identity_in(dir: &OwnedFd, name: &[u8]) -> Option<(u64, u64)> {
    let st = stat_in(dir, name)?;
    (st.st_mode & libc::S_IFMT == libc::S_IFDIR).then_some((st.st_dev as u64, st.st_ino as u64))
}

fn stat_in(dir: &OwnedFd, name: &[u8]) -> Option<libc::stat> {
    let name = std::ffi::CString::new(name).ok()?;
    // SAFETY: all-zero bytes are a valid `stat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid directory descriptor, a C string and a writable stat.
    let rc = unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    (rc == 0).then_some(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_trimmed_joined_to_its_entry_and_cleaned() {
        let entry = Path::new("/r/.git/worktrees/old9");
        let leaf = "/r/.claude/worktrees/w1/.git";
        for record in [
            "/r/.claude/worktrees/w1/.git/",
            "/r/.claude/worktrees/w1/.git\n",
            "/r/.claude/worktrees/w1/.git//",
            "/r/.claude/worktrees/w1/.git/.",
            "/r/.claude/worktrees/w1/.git \n",
            "../../../.claude/worktrees/w1/.git\n",
        ] {
            assert_eq!(
                record_path(record.as_bytes(), entry).as_deref(),
                Some(leaf),
                "{record:?}"
            );
        }
        for record in ["/r/.claude/worktrees/w1\n", "/r/.claude/worktrees/w1/"] {
            assert_ne!(
                record_path(record.as_bytes(), entry).as_deref(),
                Some(leaf),
                "{record:?}"
            );
        }
        assert_eq!(record_path(b" \n", entry), None);
        assert_eq!(record_path(b"/r/\xff", entry), None);
    }
}
