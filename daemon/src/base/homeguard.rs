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
//! in the daemon's own directories (`safedir`, `childrec`). The removals'
//! descent (`tarx`'s `removeall`) asks it by identity again for every
//! directory it enters ([`Homes::holds_identity`]), so a bind mount of a
//! home inside a tree being deleted is left (audit F3).
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
//! A target the guard cannot judge is refused as if it held a home
//! (audit F1): a path, or its resolution, of `PATH_MAX` bytes or more, or
//! with a name longer than the kernel takes (`ENAMETOOLONG`), which no
//! path-based call reaches but a removal that splits it into a shorter
//! parent and a name would (`/proc/self/root` and 2 025 `/.` before the
//! home passed the guard and the wipe emptied the home); a relative
//! target without a working directory; a target whose resolution meets a
//! loop of links (`ELOOP`, found by the property test in `props.rs`);
//! an entry or a directory whose identity cannot be read. Refused with
//! [`Verdict::text`]'s
//! `<what> is too long to be checked against the home directory …` or
//! `<what> cannot be checked against the home directory …`.
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

/// The kernel's `PATH_MAX` (4096 on Linux, 1024 on macOS): a path this
/// long or longer fails every path-based call with `ENAMETOOLONG`, so the
/// guard cannot resolve it and refuses it ([`Verdict::TooLong`]); the
/// removals refuse it too (`tarx`'s `remove_all`).
pub(crate) const PATH_MAX: usize = libc::PATH_MAX as usize;

/// What the guard says about a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Neither a home nor above one: the step may go on.
    Clear,
    /// A home, or a directory above one.
    Home,
    /// The path or its resolution is `PATH_MAX` bytes or longer, or holds
    /// a name too long for the kernel: it cannot be resolved to be judged.
    TooLong,
    /// Relative, with no working directory to resolve it from.
    Unresolvable,
    /// The kernel meets a loop of links on the way (`ELOOP`): what the
    /// path names cannot be told.
    LinkLoop,
}

/// What [`Homes::lexically`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lexical {
    /// The verdict, told without the kernel.
    Decided(Verdict),
    /// Only the kernel can tell: this absolute path (shorter than
    /// `PATH_MAX`) is to be resolved and its identity read.
    AskTheKernel(Vec<u8>),
}

/// Whether no path-based call can take `path` (`PATH_MAX` bytes or more):
/// the one length rule of the guard and of `tarx`'s `remove_all`.
pub(crate) fn too_long_for_the_kernel(path: &[u8]) -> bool {
    path.len() >= PATH_MAX
}

impl Verdict {
    /// The refusal for a destructive `what` at `path` (the spelling the
    /// request used), `None` when the step may go on.
    pub(crate) fn text(self, what: &str, path: impl AsRef<Path>) -> Option<String> {
        let quoted = || go_quote(path.as_ref().as_os_str().as_bytes());
        match self {
            Verdict::Clear => None,
            Verdict::Home => Some(refusal(what, path)),
            Verdict::TooLong => Some(format!(
                "{what} is too long to be checked against the home directory (a path of {PATH_MAX} bytes or more, or a name of more than {} bytes, is refused): {}",
                NAME_MAX,
                quoted()
            )),
            Verdict::Unresolvable => Some(format!(
                "{what} cannot be checked against the home directory (a relative path, and the working directory is gone): {}",
                quoted()
            )),
            Verdict::LinkLoop => Some(format!(
                "{what} cannot be checked against the home directory (too many levels of symbolic links): {}",
                quoted()
            )),
        }
    }
}

/// The longest name the kernel takes (255 on Linux and macOS), for the
/// text only: the kernel's own `ENAMETOOLONG` is what is acted on.
const NAME_MAX: usize = 255;

/// The refusal text for a destructive `what` (`destDir`, `worktreePath`,
/// `cli path`, …) at `path`: claustrum's D2 wording, `%q`-quoted.
pub(crate) fn refusal(what: &str, path: impl AsRef<Path>) -> String {
    format!(
        "{what} must not be or contain the home directory: {}",
        go_quote(path.as_ref().as_os_str().as_bytes())
    )
}

/// The refusal ([`Verdict::text`]) when `path` is or contains the daemon
/// user's home, or cannot be judged.
pub(crate) fn check(what: &str, path: impl AsRef<Path>) -> Option<String> {
    let path = path.as_ref();
    Homes::of_daemon_user().verdict(path).text(what, path)
}

/// Whether the entry `name` of `dir` is the daemon user's home or a
/// directory above one, by identity (a link is not followed: removing or
/// renaming a link leaves what it points at alone), as the error a
/// removal or rename in a directory descriptor fails with. An entry whose
/// identity cannot be read fails with that error (the guard cannot tell,
/// so the step does not go on); one that is not there passes.
pub(crate) fn check_entry(dir: &OwnedFd, name: &[u8]) -> io::Result<()> {
    let homes = Homes::of_daemon_user();
    if homes.holders.is_empty() {
        return Ok(());
    }
    match entry_identity(dir, name)? {
        Some(id) if homes.holders.contains(&id) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            refusal("directory entry", OsStr::from_bytes(name)),
        )),
        _ => Ok(()),
    }
}

/// Device and inode of the entry `name` of `dir`, not following a link;
/// `None` when there is no such entry (a name with a NUL names none).
fn entry_identity(dir: &OwnedFd, name: &[u8]) -> io::Result<Option<(u64, u64)>> {
    let Ok(cname) = CString::new(name) else {
        return Ok(None);
    };
    // SAFETY: all-zero bytes are a valid `stat` to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: an open directory, a NUL-terminated name, a writable stat.
    let rc = unsafe { libc::fstatat(dir.as_raw_fd(), cname.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            _ => Err(e),
        };
    }
    // `dev_t`/`ino_t` differ in width across targets.
    #[allow(clippy::unnecessary_cast)]
    Ok(Some((st.st_dev as u64, st.st_ino as u64)))
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
        let cwd = cwd.as_deref().map(|cwd| cwd.as_os_str().as_bytes());
        let mut homes = Homes::default();
        for dir in dirs {
            let Some(abs) = absolute(dir.as_ref().as_os_str().as_bytes(), cwd) else {
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

    /// Whether `target` is or contains a home, or cannot be judged (see
    /// [`Homes::verdict`]): either way a destructive step must not go on.
    #[cfg(test)]
    pub(crate) fn holds(&self, target: &Path) -> bool {
        self.verdict(target) != Verdict::Clear
    }

    /// The guard for the homes `dirs` by their spellings alone, with
    /// nothing read from the disk: what [`Homes::lexically`] needs (the
    /// fuzz target `homeguard_paths` builds its homes so).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn of_spellings(dirs: &[&[u8]], cwd: Option<&[u8]>) -> Homes {
        let mut homes = Homes::default();
        for dir in dirs {
            if let Some(abs) = absolute(dir, cwd) {
                homes.spellings.push(gopath::clean(&abs));
            }
        }
        homes
    }

    /// What the guard says about `target` (see the module comment for the
    /// three tests). An empty target names nothing; with no home known
    /// there is nothing to guard.
    pub(crate) fn verdict(&self, target: &Path) -> Verdict {
        let cwd = std::env::current_dir().ok();
        let cwd = cwd.as_deref().map(|cwd| cwd.as_os_str().as_bytes());
        match self.lexically(target.as_os_str().as_bytes(), cwd) {
            Lexical::Decided(verdict) => verdict,
            Lexical::AskTheKernel(abs) => self.by_the_kernel(&abs),
        }
    }

    /// The part of [`Homes::verdict`] that reads nothing: the target
    /// made absolute from `cwd` and cleaned is a home or above one, or is
    /// too long for the kernel to be asked about, or is relative with no
    /// `cwd`; otherwise the kernel has to be asked about the absolute
    /// path. Pure, so the fuzz target `homeguard_paths` runs it at speed.
    pub(crate) fn lexically(&self, raw: &[u8], cwd: Option<&[u8]>) -> Lexical {
        if raw.is_empty() || self.spellings.is_empty() {
            return Lexical::Decided(Verdict::Clear);
        }
        let Some(abs) = absolute(raw, cwd) else {
            // A relative target with no working directory: what it names
            // cannot be told.
            return Lexical::Decided(Verdict::Unresolvable);
        };
        if self.above_a_home(&gopath::clean(&abs)) {
            return Lexical::Decided(Verdict::Home);
        }
        // Past here every test asks the kernel, which cannot resolve a
        // path this long; a removal would split it into a shorter parent
        // that it can (audit F1).
        if too_long_for_the_kernel(&abs) {
            return Lexical::Decided(Verdict::TooLong);
        }
        Lexical::AskTheKernel(abs)
    }

    /// The resolved and identity tests of [`Homes::verdict`] for the
    /// absolute `abs`, shorter than `PATH_MAX`, that is not lexically a
    /// home or above one.
    fn by_the_kernel(&self, abs: &[u8]) -> Verdict {
        let resolved = match resolve(abs) {
            Resolved::Path(resolved) if too_long_for_the_kernel(&resolved) => return Verdict::TooLong,
            Resolved::Path(resolved) => Some(resolved),
            Resolved::TooLong => return Verdict::TooLong,
            Resolved::LinkLoop => return Verdict::LinkLoop,
            Resolved::Nothing => None,
        };
        if resolved.is_some_and(|resolved| self.above_a_home(&resolved)) {
            return Verdict::Home;
        }
        match std::fs::metadata(OsStr::from_bytes(abs)) {
            Ok(meta) if self.holders.contains(&(meta.dev(), meta.ino())) => Verdict::Home,
            Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => Verdict::TooLong,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => Verdict::LinkLoop,
            _ => Verdict::Clear,
        }
    }

    /// Whether the entry `name` of the open directory `dir` is a home or a
    /// directory above one, by identity (a link is not followed: removing
    /// or renaming a link leaves what it points at alone). An entry that
    /// is not there holds nothing; one whose identity cannot be read
    /// counts as held ([`check_entry`] is the daemon's form of it).
    #[cfg(test)]
    pub(crate) fn holds_entry(&self, dir: &OwnedFd, name: &[u8]) -> bool {
        if self.holders.is_empty() {
            return false;
        }
        match entry_identity(dir, name) {
            Ok(Some(id)) => self.holders.contains(&id),
            Ok(None) => false,
            Err(_) => true,
        }
    }

    /// Whether the open directory `dir` is a home or a directory above
    /// one; a directory whose identity cannot be read counts as one.
    // `dev_t`/`ino_t` differ in width across targets.
    #[allow(clippy::unnecessary_cast)]
    pub(crate) fn holds_dir(&self, dir: &OwnedFd) -> bool {
        // SAFETY: all-zero bytes are a valid `stat` to be overwritten.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: an open descriptor and a writable stat.
        let rc = unsafe { libc::fstat(dir.as_raw_fd(), &mut st) };
        rc != 0 || self.holders.contains(&(st.st_dev as u64, st.st_ino as u64))
    }

    /// Whether the device and inode `id` are a home's or a directory's
    /// above one (the removals' descent asks, audit F3).
    pub(crate) fn holds_identity(&self, id: (u64, u64)) -> bool {
        self.holders.contains(&id)
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
fn absolute(path: &[u8], cwd: Option<&[u8]>) -> Option<Vec<u8>> {
    if gopath::is_abs(path) {
        return Some(path.to_vec());
    }
    let cwd = cwd?;
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

/// What [`resolve`] found.
#[derive(Debug, PartialEq, Eq)]
enum Resolved {
    /// The path as the kernel resolves it.
    Path(Vec<u8>),
    /// The kernel could not resolve a prefix for its length
    /// (`ENAMETOOLONG`: a name too long, or links that lead to a path of
    /// `PATH_MAX` or more): what the path names cannot be told.
    TooLong,
    /// The kernel met a loop of links (`ELOOP`): what the path names
    /// cannot be told.
    LinkLoop,
    /// Not even `/` resolves.
    Nothing,
}

/// The absolute `path` as the kernel would resolve it: the longest prefix
/// that `realpath` resolves, followed by the remaining names, cleaned. A
/// prefix that is missing (or below a file) is cut back to its parent;
/// one the kernel refuses for its length is not, since a shorter prefix
/// would then stand for a path the kernel never reaches.
fn resolve(path: &[u8]) -> Resolved {
    let mut head = path;
    loop {
        // Trailing slashes belong to the name before them.
        while head.len() > 1 && head.ends_with(b"/") {
            head = &head[..head.len() - 1];
        }
        match std::fs::canonicalize(OsStr::from_bytes(head)) {
            Ok(real) => {
                let rest = &path[head.len()..];
                return Resolved::Path(gopath::join(&[real.as_os_str().as_bytes(), rest]));
            }
            Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => return Resolved::TooLong,
            // A loop is not a missing name: cutting it off would judge a
            // path that names something else.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Resolved::LinkLoop,
            Err(_) => {}
        }
        let Some(cut) = head.iter().rposition(|&b| b == b'/') else {
            return Resolved::Nothing;
        };
        if cut == 0 {
            if head.len() == 1 {
                return Resolved::Nothing;
            }
            head = b"/";
        } else {
            head = &head[..cut];
        }
    }
}

// Linux only: `/proc`, a private mount namespace.
#[cfg(test)]
#[cfg(target_os = "linux")]
pub(crate) mod props;

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
    fn no_home_refuses_nothing_and_long_paths_are_refused() {
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
        // Below the home lexically, but too long for the kernel to tell
        // where it leads: refused (audit F1).
        let mut deep = b(&home).to_vec();
        for _ in 0..3000 {
            deep.extend_from_slice(b"/a");
        }
        assert_eq!(homes.verdict(Path::new(OsStr::from_bytes(&deep))), Verdict::TooLong);
        drop(tmp);
    }

    /// `<top>/link` (a link to `<top>`), then `/.` until the whole is
    /// `len` bytes or more, then `/home`: lexically not the home (the link
    /// is not resolved by cleaning), and past `PATH_MAX` not resolvable.
    fn long_spelling_through_a_link(top: &Path, len: usize) -> Vec<u8> {
        let mut path = b(&top.join("link")).to_vec();
        while path.len() + b"/home".len() < len {
            path.extend_from_slice(b"/.");
        }
        path.extend_from_slice(b"/home");
        path
    }

    #[test]
    fn a_spelling_of_the_home_of_path_max_bytes_or_more_is_refused() {
        let (tmp, home) = layout();
        let homes = Homes::of(&[&home]);
        symlink(tmp.path(), tmp.path().join("link")).unwrap();
        let short = long_spelling_through_a_link(tmp.path(), 0);
        assert_eq!(homes.verdict(Path::new(OsStr::from_bytes(&short))), Verdict::Home);
        let long = long_spelling_through_a_link(tmp.path(), PATH_MAX);
        assert!(long.len() >= PATH_MAX);
        assert_eq!(homes.verdict(Path::new(OsStr::from_bytes(&long))), Verdict::TooLong);
        let just_below = long_spelling_through_a_link(tmp.path(), PATH_MAX - 2);
        if just_below.len() < PATH_MAX {
            assert_eq!(homes.verdict(Path::new(OsStr::from_bytes(&just_below))), Verdict::Home);
        }
        // A name longer than the kernel takes cannot be resolved either.
        let long_name = home.join("n".repeat(NAME_MAX + 1));
        assert_eq!(homes.verdict(&long_name), Verdict::TooLong);
        assert_eq!(homes.verdict(&home.join("n".repeat(NAME_MAX))), Verdict::Clear);
        let text = Verdict::TooLong.text("destDir", "/x").unwrap();
        assert_eq!(
            text,
            format!("destDir is too long to be checked against the home directory (a path of {PATH_MAX} bytes or more, or a name of more than 255 bytes, is refused): \"/x\"")
        );
        assert_eq!(Verdict::Clear.text("destDir", "/x"), None);
    }

    #[test]
    fn an_entry_whose_identity_cannot_be_read_counts_as_held() {
        let (tmp, home) = layout();
        let homes = Homes::of(&[&home]);
        let top: OwnedFd = fs::File::open(tmp.path()).unwrap().into();
        // A name too long to look up: not "missing", so not "clear".
        let long = vec![b'n'; NAME_MAX + 1];
        assert!(homes.holds_entry(&top, &long));
        assert!(!homes.holds_entry(&top, b"missing"));
        let by_check = check_entry(&top, &long);
        if !Homes::of_daemon_user().holders.is_empty() {
            assert_eq!(by_check.unwrap_err().raw_os_error(), Some(libc::ENAMETOOLONG));
        }
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
    fn the_lexical_part_reads_nothing_and_leaves_the_rest_to_the_kernel() {
        let decided = |v| Lexical::Decided(v);
        let homes = Homes::of_spellings(&[b"/nowhere/u/./home/"], None);
        assert_eq!(homes.lexically(b"/nowhere/u", None), decided(Verdict::Home));
        assert_eq!(homes.lexically(b"//nowhere/u/home/x/..", None), decided(Verdict::Home));
        assert_eq!(
            homes.lexically(b"..", Some(b"/nowhere/u/home/x")),
            decided(Verdict::Home)
        );
        assert_eq!(
            homes.lexically(b"/nowhere/u/home/x", None),
            Lexical::AskTheKernel(b"/nowhere/u/home/x".to_vec())
        );
        assert_eq!(homes.lexically(b"x", None), decided(Verdict::Unresolvable));
        assert_eq!(homes.lexically(b"", None), decided(Verdict::Clear));
        // Padded past PATH_MAX: lexically the home still, else too long.
        let padded = |start: &[u8]| [start, &b"/.".repeat(PATH_MAX / 2)].concat();
        assert_eq!(
            homes.lexically(&padded(b"/nowhere/u/home"), None),
            decided(Verdict::Home)
        );
        assert_eq!(homes.lexically(&padded(b"/nowhere/v"), None), decided(Verdict::TooLong));
        // A relative home is taken from the working directory given.
        let homes = Homes::of_spellings(&[b"rel/home"], Some(b"/cwd"));
        assert_eq!(homes.lexically(b"/cwd/rel", None), decided(Verdict::Home));
        assert!(Homes::of_spellings(&[b"rel/home"], None).spellings.is_empty());
    }

    #[test]
    fn a_loop_of_links_cannot_be_judged() {
        let (tmp, home) = layout();
        let t = tmp.path();
        let homes = Homes::of(&[&home]);
        let o = t.join("other");
        symlink(o.join("loop-b"), o.join("loop-a")).unwrap();
        symlink(o.join("loop-a"), o.join("loop-b")).unwrap();
        // `loop-a/..` is `other` lexically: only the kernel can tell.
        for path in [o.join("loop-a"), o.join("loop-a/x"), o.join("loop-a/..")] {
            assert_eq!(homes.verdict(&path), Verdict::LinkLoop, "{}", path.display());
        }
        assert_eq!(
            Verdict::LinkLoop.text("destDir", "/l").unwrap(),
            "destDir cannot be checked against the home directory (too many levels of symbolic links): \"/l\""
        );
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
        let got = resolve(b(&home.join("missing/x/../y")));
        assert_eq!(got, Resolved::Path(b(&real_top.join("home/missing/y")).to_vec()));
        assert_eq!(resolve(b"/"), Resolved::Path(b"/".to_vec()));
        let long_name = home.join("n".repeat(NAME_MAX + 1)).join("x");
        assert_eq!(resolve(b(&long_name)), Resolved::TooLong);
        assert_eq!(self_and_ancestors(b"/a/b"), vec![&b"/a/b"[..], b"/a", b"/"]);
        assert_eq!(self_and_ancestors(b"/"), vec![&b"/"[..]]);
    }
}
