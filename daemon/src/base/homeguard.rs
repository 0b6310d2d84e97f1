//! The home guard: nothing the daemon deletes or replaces is, or
//! contains, the daemon user's home directory.
//!
//! The reference wipes whatever `files.extract_tar` names as `destDir`,
//! `"~"` included, and answers `{"success":true}`; its `-install` replaces a
//! directory at `<cli-dir>/<version>` with the CLI file, the home
//! directory included. remora refuses instead (a divergence, recorded in
//! `docs/UPSTREAM.md`; claustrum's D2 refuses the same targets with the
//! texts [`refusal`] reproduces). Every destructive step asks this module
//! first: `tarx::extract` (destDir), `git.worktree_remove` and the
//! rollback of `git.worktree_create`, `-install` (the CLI path, and the
//! cli dir its sweep and prune delete in), and the removals and renames
//! in the daemon's own directories (`safedir`, `childrec`).
//!
//! Which homes: `$HOME` (what a leading `~` expands to) and the home of
//! the effective user's passwd entry; a target is refused when it is or
//! contains either. A home that is relative is taken from the daemon's
//! working directory.
//!
//! "Is or contains" is judged three ways, any one of which refuses:
//! - **lexically**: the target made absolute and cleaned (`..` dropped
//!   with the name before it) is a home's cleaned path or a directory
//!   above it;
//! - **resolved**: the longest prefix of the target that exists, with its
//!   links and `..` resolved by the kernel (`realpath`), followed by the
//!   rest cleaned, is a home's path (as given or resolved) or above it;
//! - **by identity**: the directory the target names (links followed) has
//!   the device and inode of a home or of a directory above one, so a
//!   link to a home, a bind mount of a home or of its parent, and
//!   `$HOME/..` through any spelling are caught.
//!
//! Directories *inside* a home stay allowed: `~/.claude/…` is where the
//! daemon itself is installed and extracts. The guard stops a mistaken or
//! generated path (claustrum's came from a fuzzer), not a determined
//! same-user process, which can remove the home with `process.spawn`
//! anyway; a link swapped between the check and the delete is not in its
//! scope. Not covered: a home that is itself a mount point of a directory
//! elsewhere (the directories above the mounted one are not known here).

use crate::base::goerr::go_quote;
use crate::base::gopath;
use std::collections::HashSet;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Longest path the kernel resolves; a longer one fails every path-based
/// call with `ENAMETOOLONG`, so it is judged lexically only (and the
/// resolution loop stays bounded whatever the request sends).
const PATH_MAX: usize = 4096;

/// The refusal text for a destructive `what` (`destDir`, `worktreePath`,
/// `cli path`, …) at `path`: claustrum's D2 wording, `%q`-quoted.
pub(crate) fn refusal(what: &str, path: impl AsRef<Path>) -> String {
    format!(
        "{what} must not be or contain the home directory: {}",
        go_quote(path.as_ref().as_os_str().as_bytes())
    )
}

/// [`refusal`] when `path` is or contains the daemon user's home.
pub(crate) fn check(what: &str, path: impl AsRef<Path>) -> Option<String> {
    let path = path.as_ref();
    Homes::of_daemon_user().holds(path).then(|| refusal(what, path))
}

/// [`Homes::holds_entry`] for the daemon user, as the error a removal or
/// rename in a directory descriptor fails with.
pub(crate) fn check_entry(dir: &OwnedFd, name: &[u8]) -> io::Result<()> {
    if Homes::of_daemon_user().holds_entry(dir, name) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            refusal("directory entry", OsStr::from_bytes(name)),
        ));
    }
    Ok(())
}

/// The home directories guarded, each as its spellings and as the
/// identities of itself and of every directory above it.
#[derive(Debug, Default)]
pub(crate) struct Homes {
    /// Absolute, cleaned spellings: each home as given and as resolved.
    spellings: Vec<Vec<u8>>,
    /// Device and inode of each home and of each directory above one.
    holders: HashSet<(u64, u64)>,
}

/// The passwd entry's home of the effective user, looked up once (the
/// entry does not change under a running daemon, and the lookup may go
/// to a directory service).
fn passwd_home() -> Option<PathBuf> {
    static HOME: OnceLock<Option<PathBuf>> = OnceLock::new();
    HOME.get_or_init(|| {
        nix::unistd::User::from_uid(nix::unistd::geteuid())
            .ok()
            .flatten()
            .map(|user| user.dir)
            .filter(|dir| !dir.as_os_str().is_empty())
    })
    .clone()
}

impl Homes {
    /// `$HOME` (when set and not empty) and the passwd entry's home.
    pub(crate) fn of_daemon_user() -> Homes {
        let mut dirs: Vec<PathBuf> = Vec::new();
        if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            dirs.push(PathBuf::from(home));
        }
        dirs.extend(passwd_home());
        Homes::of(&dirs)
    }

    /// The guard for the directories `dirs` (tests name their own).
    pub(crate) fn of<P: AsRef<Path>>(dirs: &[P]) -> Homes {
        let cwd = std::env::current_dir().ok();
        let mut homes = Homes::default();
        for dir in dirs {
            let Some(abs) = absolute(dir.as_ref().as_os_str().as_bytes(), cwd.as_deref()) else {
                continue;
            };
            let mut spellings = vec![gopath::clean(&abs)];
            if let Ok(real) = std::fs::canonicalize(OsStr::from_bytes(&abs)) {
                spellings.push(real.as_os_str().as_bytes().to_vec());
            }
            for spelling in spellings {
                for above in self_and_ancestors(&spelling) {
                    if let Ok(meta) = std::fs::metadata(OsStr::from_bytes(above)) {
                        homes.holders.insert((meta.dev(), meta.ino()));
                    }
                }
                if !homes.spellings.contains(&spelling) {
                    homes.spellings.push(spelling);
                }
            }
        }
        homes
    }

    /// Whether `target` is or contains a home (see the module comment for
    /// the three tests). An empty target names nothing.
    pub(crate) fn holds(&self, target: &Path) -> bool {
        let raw = target.as_os_str().as_bytes();
        if raw.is_empty() || self.spellings.is_empty() {
            return false;
        }
        let cwd = std::env::current_dir().ok();
        let Some(abs) = absolute(raw, cwd.as_deref()) else {
            // A relative target with no working directory: the kernel
            // cannot resolve it either.
            return false;
        };
        if self.above_a_home(&gopath::clean(&abs)) {
            return true;
        }
        if abs.len() >= PATH_MAX {
            return false;
        }
        if resolve(&abs).is_some_and(|resolved| self.above_a_home(&resolved)) {
            return true;
        }
        std::fs::metadata(OsStr::from_bytes(&abs)).is_ok_and(|meta| self.holders.contains(&(meta.dev(), meta.ino())))
    }

    /// Whether the entry `name` of the open directory `dir` is a home or a
    /// directory above one, by identity (a link is not followed: removing
    /// or renaming a link leaves what it points at alone).
    pub(crate) fn holds_entry(&self, dir: &OwnedFd, name: &[u8]) -> bool {
        if self.holders.is_empty() {
            return false;
        }
        let Ok(cname) = CString::new(name) else {
            return false;
        };
        // SAFETY: all-zero bytes are a valid `stat` to be overwritten.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: an open directory, a NUL-terminated name, a writable stat.
        let rc = unsafe { libc::fstatat(dir.as_raw_fd(), cname.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        rc == 0 && self.holders.contains(&(st.st_dev as u64, st.st_ino as u64))
    }

    /// Whether the open directory `dir` is a home or a directory above one.
    pub(crate) fn holds_dir(&self, dir: &OwnedFd) -> bool {
        // SAFETY: all-zero bytes are a valid `stat` to be overwritten.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: an open descriptor and a writable stat.
        let rc = unsafe { libc::fstat(dir.as_raw_fd(), &mut st) };
        rc == 0 && self.holders.contains(&(st.st_dev as u64, st.st_ino as u64))
    }

    /// Whether the absolute, cleaned `path` is a home's spelling or a
    /// directory above one (component-wise: `/a` is above `/a/b`, not
    /// above `/ab`).
    fn above_a_home(&self, path: &[u8]) -> bool {
        self.spellings.iter().any(|home| {
            home.starts_with(path) && (home.len() == path.len() || path == b"/" || home.get(path.len()) == Some(&b'/'))
        })
    }
}

/// `path` joined to `cwd` when relative; `None` for a relative path
/// without a working directory.
fn absolute(path: &[u8], cwd: Option<&Path>) -> Option<Vec<u8>> {
    if gopath::is_abs(path) {
        return Some(path.to_vec());
    }
    let cwd = cwd?.as_os_str().as_bytes();
    let mut joined = cwd.to_vec();
    joined.push(b'/');
    joined.extend_from_slice(path);
    Some(joined)
}

/// The absolute, cleaned `path` and every directory above it, up to `/`.
fn self_and_ancestors(path: &[u8]) -> Vec<&[u8]> {
    let mut out = vec![path];
    let mut end = path.len();
    while end > 1 {
        match path[..end].iter().rposition(|&b| b == b'/') {
            Some(0) => {
                out.push(b"/");
                break;
            }
            Some(i) => {
                out.push(&path[..i]);
                end = i;
            }
            None => break,
        }
    }
    out
}

/// The absolute `path` as the kernel would resolve it: the longest prefix
/// that `realpath` resolves, followed by the remaining names, cleaned.
/// `None` when not even `/` resolves.
fn resolve(path: &[u8]) -> Option<Vec<u8>> {
    let mut head = path;
    loop {
        // Trailing slashes belong to the name before them.
        while head.len() > 1 && head.ends_with(b"/") {
            head = &head[..head.len() - 1];
        }
        if let Ok(real) = std::fs::canonicalize(OsStr::from_bytes(head)) {
            let rest = &path[head.len()..];
            return Some(gopath::join(&[real.as_os_str().as_bytes(), rest]));
        }
        let cut = head.iter().rposition(|&b| b == b'/')?;
        if cut == 0 {
            if head.len() == 1 {
                return None;
            }
            head = b"/";
        } else {
            head = &head[..cut];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn b(p: &Path) -> &[u8] {
        p.as_os_str().as_bytes()
    }

    /// A temp dir holding `home/` (with a file) and `other/`.
    fn layout() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        fs::create_dir(&home).unwrap();
        fs::write(home.join("keep"), b"x").unwrap();
        fs::create_dir(tmp.path().join("other")).unwrap();
        (tmp, home)
    }

    #[test]
    fn a_home_and_every_directory_above_it_are_held_but_not_below_or_beside() {
        let (tmp, home) = layout();
        let homes = Homes::of(&[&home]);
        let t = tmp.path();
        let refused = [
            home.clone(),
            t.to_path_buf(),
            PathBuf::from("/"),
            t.join("home/"),
            t.join("home/."),
            t.join("home/.."),
            t.join("home/sub/.."),
            t.join("other/../home"),
            t.join("home/sub/../.."),
            t.join("missing/../home"),
            PathBuf::from(format!("{}//home//", t.display())),
        ];
        for path in &refused {
            assert!(homes.holds(path), "{} should be refused", path.display());
        }
        let allowed = [
            home.join("sub"),
            home.join(".claude/remote"),
            t.join("other"),
            t.join("homes"),
            t.join("hom"),
        ];
        for path in &allowed {
            assert!(!homes.holds(path), "{} should be allowed", path.display());
        }
        assert!(!homes.holds(Path::new("")));
    }

    #[test]
    fn links_are_judged_by_what_they_reach() {
        let (tmp, home) = layout();
        let t = tmp.path();
        let homes = Homes::of(&[&home]);
        symlink(&home, t.join("to-home")).unwrap();
        symlink(t, t.join("other/to-top")).unwrap();
        fs::create_dir(home.join("deep")).unwrap();
        symlink(home.join("deep"), t.join("other/to-deep")).unwrap();
        assert!(homes.holds(&t.join("to-home")));
        assert!(homes.holds(&t.join("to-home/")));
        assert!(homes.holds(&t.join("other/to-top")));
        assert!(homes.holds(&t.join("other/to-top/home")));
        // `..` after a link is the kernel's: the parent of where it leads
        // (lexically this is `other`, which holds no home).
        assert!(homes.holds(&t.join("other/to-deep/..")));
        assert!(!homes.holds(&t.join("other/to-deep")));
        assert!(!homes.holds(&t.join("to-home/new")));
    }

    #[test]
    fn a_home_given_through_a_link_is_held_under_both_spellings() {
        let (tmp, home) = layout();
        let t = tmp.path();
        symlink(&home, t.join("home-link")).unwrap();
        let homes = Homes::of(&[t.join("home-link")]);
        assert!(homes.holds(&home));
        assert!(homes.holds(&t.join("home-link")));
        assert!(homes.holds(t));
        assert!(!homes.holds(&t.join("other")));
    }

    #[test]
    fn a_home_not_made_yet_is_still_matched_through_links() {
        // No identity to compare: only the resolved spelling can tell.
        let (tmp, _) = layout();
        let t = tmp.path();
        let homes = Homes::of(&[t.join("later")]);
        symlink(t, t.join("other/to-top")).unwrap();
        assert!(homes.holds(&t.join("other/to-top/later")));
        assert!(homes.holds(&t.join("other/to-top/later/")));
        assert!(!homes.holds(&t.join("other/to-top/later/sub")));
    }

    #[test]
    fn identity_catches_a_second_path_to_the_same_directory() {
        // A bind mount needs privileges; a hard-to-spell second path is
        // what identity is for, and `/proc/self/cwd` is one on Linux.
        let (tmp, home) = layout();
        let homes = Homes::of(&[&home]);
        let dir = fs::File::open(&home).unwrap();
        let fd: OwnedFd = dir.into();
        assert!(homes.holds_dir(&fd));
        let top: OwnedFd = fs::File::open(tmp.path()).unwrap().into();
        assert!(homes.holds_entry(&top, b"home"));
        assert!(!homes.holds_entry(&top, b"other"));
        assert!(!homes.holds_entry(&top, b"missing"));
        symlink(&home, tmp.path().join("link")).unwrap();
        assert!(!homes.holds_entry(&top, b"link"), "a link itself is not the home");
        if cfg!(target_os = "linux") {
            let by_fd = format!("/proc/self/fd/{}", fd.as_raw_fd());
            assert!(homes.holds(Path::new(&by_fd)));
        }
    }

    #[test]
    fn relative_targets_and_homes_are_taken_from_the_working_directory() {
        let cwd = std::env::current_dir().unwrap();
        let homes = Homes::of(&[PathBuf::from("some/relative/home")]);
        assert!(homes.holds(&cwd.join("some")));
        assert!(homes.holds(Path::new("some/relative")));
        assert!(homes.holds(Path::new("some/relative/home/x/..")));
        assert!(!homes.holds(Path::new("some/relative/home/x")));
        assert!(homes.holds(Path::new(".")));
    }

    #[test]
    fn no_home_refuses_nothing_and_long_paths_stay_lexical() {
        let homes = Homes::of::<PathBuf>(&[]);
        assert!(!homes.holds(Path::new("/")));
        let (tmp, home) = layout();
        let homes = Homes::of(&[&home]);
        let mut long = b(&home.join("x")).to_vec();
        for _ in 0..3000 {
            long.extend_from_slice(b"/..");
        }
        // Lexically this climbs to `/`, which holds the home.
        assert!(homes.holds(Path::new(OsStr::from_bytes(&long))));
        let mut deep = b(&home).to_vec();
        for _ in 0..3000 {
            deep.extend_from_slice(b"/a");
        }
        assert!(!homes.holds(Path::new(OsStr::from_bytes(&deep))));
        drop(tmp);
    }

    #[test]
    fn both_homes_of_the_daemon_user_are_guarded() {
        // Read-only: only asks the guard, never deletes anything.
        let Some(passwd) = passwd_home() else {
            return; // No passwd entry for this uid: nothing to compare.
        };
        assert!(Homes::of_daemon_user().holds(&passwd));
        let env_home = std::env::var_os("HOME").map(PathBuf::from);
        if let Some(home) = env_home.filter(|h| !h.as_os_str().is_empty()) {
            assert!(Homes::of_daemon_user().holds(&home));
        }
    }

    #[test]
    fn the_texts_name_the_path_and_the_rule() {
        assert_eq!(
            refusal("destDir", "/home/u"),
            "destDir must not be or contain the home directory: \"/home/u\""
        );
        assert_eq!(
            refusal("cli path", "/a\"b\n"),
            "cli path must not be or contain the home directory: \"/a\\\"b\\n\""
        );
    }

    #[test]
    fn resolve_keeps_missing_names_and_cleans_them() {
        let (tmp, home) = layout();
        let real_top = fs::canonicalize(tmp.path()).unwrap();
        let got = resolve(b(&home.join("missing/x/../y"))).unwrap();
        assert_eq!(got, b(&real_top.join("home/missing/y")).to_vec());
        assert_eq!(resolve(b"/").unwrap(), b"/".to_vec());
        assert_eq!(self_and_ancestors(b"/a/b"), vec![&b"/a/b"[..], b"/a", b"/"]);
        assert_eq!(self_and_ancestors(b"/"), vec![&b"/"[..]]);
    }
}
