//! The home guard's property test (issue 44, item 9), and the fixture and
//! spellings it shares with `tarx`'s wipe property.
//!
//! A fake home in a temp dir, `<top>/parent/home`, with links to it, to its
//! parent and to `<top>` in `<top>/links`, a link loop, and (where the
//! process may make a private mount namespace: root) bind mounts of the
//! home, of its parent and of a sibling in `<top>/mnt`. Each case spells a
//! directory of that tree a random way: from `<top>`, `/proc/self/root`,
//! `/proc/thread-self/root`, `/proc/<pid>/cwd` of a child, the thread's
//! own working directory (`/proc/<pid>/task/<tid>/cwd`,
//! `/proc/thread-self/cwd`, a relative path), `~` or `$HOME`'s value;
//! then random steps down into directories, links and mounts and back up
//! through `..`, with `//` and `/./` between them, often ending with a
//! route to the home, its parent or `<top>`, and padded with `/.` runs to
//! either side of `PATH_MAX`. `$HOME` itself is spelled several ways
//! (with `//`, `/./`, a trailing slash, `sibling/..`, through a link).
//!
//! The model is the kernel's own answer, kept apart from the guard's
//! code: `realpath(3)` of the spelling, then the device and inode of what
//! it names. A spelling that names the home, or a directory above it,
//! must be refused; so must one the model cannot resolve (too long, a
//! link loop: "cannot tell" is a no). A spelling the model finds clear,
//! written plainly (its cleaned form is its `realpath`, shorter than
//! `PATH_MAX`) with `$HOME` plain too, must be allowed, so a guard that
//! refused everything fails too. The guard's by-descriptor answers
//! (`holds_dir`, `holds_entry`, what the removals ask) must equal the
//! model's identity test.
//!
//! Nothing outside the temp dir is ever named: a walk never goes above
//! `<top>`, and every link and mount points inside it.

use super::{Homes, Verdict, PATH_MAX};
use crate::base::gopath;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::ffi::{CString, OsStr};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// Device and inode.
type Identity = (u64, u64);

/// What a thread made by [`on_a_private_thread`] got.
pub(crate) struct Private {
    /// A mount namespace of its own, every mount private: bind mounts
    /// made there are seen by nothing else and go with it.
    pub(crate) mounts: bool,
    /// Why not, when not.
    pub(crate) why_not: String,
}

/// Runs `body` on a thread of its own with its own working directory
/// (`unshare(CLONE_FS)`), and, where the process may, its own mount
/// namespace with every mount made private first, so nothing mounted
/// there reaches the rest of the system.
pub(crate) fn on_a_private_thread<T: Send>(body: impl FnOnce(&Private) -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // SAFETY: unshares this thread's own filesystem attributes.
                let rc = unsafe { libc::unshare(libc::CLONE_FS) };
                assert_eq!(rc, 0, "unshare(CLONE_FS): {}", std::io::Error::last_os_error());
                // SAFETY: as above, for the mount namespace (CLONE_NEWNS
                // takes CLONE_FS with it, already done).
                let private = if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
                    Private {
                        mounts: false,
                        why_not: format!("unshare(CLONE_NEWNS): {}", std::io::Error::last_os_error()),
                    }
                } else {
                    // Private first: a new namespace starts as a peer of
                    // the old one, where shared mounts would propagate.
                    // SAFETY: NUL-terminated strings; no data.
                    let rc = unsafe {
                        libc::mount(
                            c"none".as_ptr(),
                            c"/".as_ptr(),
                            std::ptr::null(),
                            libc::MS_REC | libc::MS_PRIVATE,
                            std::ptr::null(),
                        )
                    };
                    Private {
                        mounts: rc == 0,
                        why_not: format!("making / private: {}", std::io::Error::last_os_error()),
                    }
                };
                body(&private)
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

fn cstr(path: &[u8]) -> CString {
    CString::new(path).unwrap()
}

fn b(p: &Path) -> &[u8] {
    p.as_os_str().as_bytes()
}

/// Device and inode of what `path` names, links followed.
fn identity(path: &[u8]) -> Option<(u64, u64)> {
    std::fs::metadata(OsStr::from_bytes(path))
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// `realpath(3)`, or its errno.
pub(crate) fn realpath(path: &[u8]) -> Result<Vec<u8>, i32> {
    let c = CString::new(path).map_err(|_| libc::EINVAL)?;
    // SAFETY: a NUL-terminated path; a null buffer asks for a malloc'd one.
    let out = unsafe { libc::realpath(c.as_ptr(), std::ptr::null_mut()) };
    if out.is_null() {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: realpath returned a NUL-terminated string it allocated.
    let real = unsafe { std::ffi::CStr::from_ptr(out) }.to_bytes().to_vec();
    // SAFETY: allocated by realpath with malloc, freed once.
    unsafe { libc::free(out.cast()) };
    Ok(real)
}

/// `open(path, O_DIRECTORY)`, links followed, as a path-based removal
/// would reach it.
pub(crate) fn open_dir(path: &[u8]) -> Option<OwnedFd> {
    let c = CString::new(path).ok()?;
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    // SAFETY: a fresh descriptor, ours.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What the model says a spelling names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Truth {
    /// The home itself.
    Home,
    /// A directory above the home (its parent, `<top>`, …).
    Above,
    /// Something else.
    Clear,
    /// Nothing (`ENOENT`, `ENOTDIR`): no path-based call reaches anything.
    Absent,
    /// `realpath` fails otherwise (`ENAMETOOLONG`, `ELOOP`): cannot tell.
    CannotTell,
}

impl Truth {
    /// Whether the guard must refuse it.
    pub(crate) fn must_refuse(self) -> bool {
        matches!(self, Truth::Home | Truth::Above | Truth::CannotTell)
    }
}

/// The temp-dir tree the spellings walk (see the module doc).
pub(crate) struct Fixture {
    /// `<top>`, the temp dir resolved.
    pub(crate) top: PathBuf,
    pub(crate) parent: PathBuf,
    pub(crate) home: PathBuf,
    /// Device and inode of the home, and of every directory above it up
    /// to `/` (read again when a failed case lost the home, so shrinking
    /// starts from a whole tree).
    ids: RefCell<(Identity, HashSet<Identity>)>,
    /// The child whose working directory is `<top>` (`/proc/<pid>/cwd`).
    sleeper: Child,
    /// The thread's working directories a case picks from.
    cwds: Vec<PathBuf>,
    /// `$HOME`'s spellings a case picks from; the first four clean to the
    /// home itself.
    home_values: Vec<Vec<u8>>,
    /// Mount point and source of each bind mount.
    binds: Vec<(PathBuf, PathBuf)>,
    /// Link and what it points at.
    links: Vec<(PathBuf, PathBuf)>,
    /// Every directory of the tree, made again by [`Fixture::restore`].
    dirs: Vec<PathBuf>,
}

/// How many `$HOME` spellings clean to the home itself.
const PLAIN_HOME_VALUES: usize = 4;

impl Fixture {
    /// Builds the tree in `dir` (a temp dir), with the bind mounts when
    /// `private` has a mount namespace.
    pub(crate) fn new(dir: &Path, private: &Private) -> Fixture {
        let top = std::fs::canonicalize(dir).unwrap();
        let parent = top.join("parent");
        let home = parent.join("home");
        let dirs = vec![
            home.join("inside/deep"),
            parent.join("sibling/kept"),
            top.join("elsewhere/x"),
            top.join("links"),
            top.join("mnt/home-bind"),
            top.join("mnt/parent-bind"),
            top.join("mnt/sibling-bind"),
        ];
        let links = [
            ("to-home", home.clone()),
            ("to-parent", parent.clone()),
            ("to-top", top.clone()),
            ("to-deep", home.join("inside/deep")),
            ("to-sibling", PathBuf::from("../parent/sibling")),
            ("rel-home", PathBuf::from("../parent/home")),
            ("chain", PathBuf::from("to-home")),
            ("loop-a", PathBuf::from("loop-b")),
            ("loop-b", PathBuf::from("loop-a")),
        ]
        .into_iter()
        .map(|(name, to)| (top.join("links").join(name), to))
        .collect();
        let binds = if private.mounts {
            vec![
                (top.join("mnt/home-bind"), home.clone()),
                (top.join("mnt/parent-bind"), parent.clone()),
                (top.join("mnt/sibling-bind"), parent.join("sibling")),
            ]
        } else {
            Vec::new()
        };
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(home.join("keep"), b"the home's own file").unwrap();
        let sleeper = Command::new("sleep").arg("3600").current_dir(&top).spawn().unwrap();
        let cwds = vec![
            top.clone(),
            parent.clone(),
            home.clone(),
            top.join("elsewhere"),
            home.join("inside/deep"),
        ];
        let t = top.as_os_str().to_str().unwrap();
        let home_values = vec![
            b(&home).to_vec(),
            format!("{t}/parent/home/").into_bytes(),
            format!("{t}//parent/./home").into_bytes(),
            format!("{t}/parent/sibling/../home").into_bytes(),
            format!("{t}/links/to-home").into_bytes(),
        ];
        let fixture = Fixture {
            top,
            parent,
            home,
            ids: RefCell::new(((0, 0), HashSet::new())),
            sleeper,
            cwds,
            home_values,
            binds,
            links,
            dirs,
        };
        fixture.restore();
        fixture
    }

    /// Makes again whatever a wipe took: directories, links, mounts.
    pub(crate) fn restore(&self) {
        for d in &self.dirs {
            std::fs::create_dir_all(d).unwrap();
        }
        if !self.home_intact() {
            std::fs::write(self.home.join("keep"), b"the home's own file").unwrap();
            let mut above = HashSet::new();
            let mut up = self.home.parent();
            while let Some(dir) = up {
                above.insert(identity(b(dir)).unwrap());
                up = dir.parent();
            }
            *self.ids.borrow_mut() = (identity(b(&self.home)).unwrap(), above);
        }
        for (link, to) in &self.links {
            if std::fs::symlink_metadata(link).is_err() {
                symlink(to, link).unwrap();
            }
        }
        for (point, source) in &self.binds {
            if identity(b(point)) == identity(b(source)) {
                continue;
            }
            // Its source was wiped and made again (the mount holds the old
            // one, deleted), or it is not there yet: mounted afresh.
            let dst = cstr(b(point));
            // SAFETY: a NUL-terminated path; failing (nothing mounted) is fine.
            unsafe { libc::umount2(dst.as_ptr(), libc::MNT_DETACH) };
            std::fs::create_dir_all(point).unwrap();
            if let Err(e) = bind_mount(source, point) {
                panic!("bind {source:?} on {point:?}: {e}");
            }
        }
    }

    /// Whether the home and its parent are still there, the home with its
    /// file.
    pub(crate) fn home_intact(&self) -> bool {
        identity(b(&self.home)) == Some(self.ids.borrow().0)
            && std::fs::read(self.home.join("keep")).is_ok_and(|k| k == b"the home's own file")
            && self.parent.is_dir()
    }

    /// Whether the directory `spelling` names holds, in this thread's
    /// mount namespace, a bind mount of the home or of its parent.
    pub(crate) fn holds_a_home_mount(&self, spelling: &[u8]) -> bool {
        ["home-bind", "parent-bind"].iter().any(|name| {
            let below = [spelling, b"/", name.as_bytes()].concat();
            below.len() < PATH_MAX && identity(&below).is_some_and(|id| self.held(id))
        })
    }

    /// The model's answer for `spelling` (see the module doc).
    pub(crate) fn model(&self, spelling: &[u8]) -> Truth {
        let real = match realpath(spelling) {
            Ok(real) => real,
            Err(libc::ENOENT) | Err(libc::ENOTDIR) => return Truth::Absent,
            Err(_) => return Truth::CannotTell,
        };
        // The spelling itself where the kernel takes it: `realpath`'s
        // answer is a string, and through `/proc/self/root` it names what
        // another mount namespace has there.
        let id = if spelling.len() < PATH_MAX {
            identity(spelling)
        } else {
            identity(&real)
        };
        let ids = self.ids.borrow();
        match id {
            Some(id) if id == ids.0 => Truth::Home,
            Some(id) if ids.1.contains(&id) => Truth::Above,
            Some(_) => Truth::Clear,
            None => Truth::CannotTell,
        }
    }

    /// The identities a by-descriptor answer of the guard is held to:
    /// the home's and those of the directories above it.
    fn held(&self, id: (u64, u64)) -> bool {
        let ids = self.ids.borrow();
        id == ids.0 || ids.1.contains(&id)
    }

    /// The guard as the daemon would build it with `$HOME` spelled as the
    /// case says.
    pub(crate) fn homes(&self, spelled: &Spelled) -> Homes {
        Homes::of(&[Path::new(OsStr::from_bytes(&spelled.home_value))])
    }

    /// Spells a directory of the tree as `recipe` says; moves this
    /// thread's working directory to the one the recipe picks.
    pub(crate) fn render(&self, recipe: &Recipe) -> Spelled {
        let cwd = &self.cwds[usize::from(recipe.cwd) % self.cwds.len()];
        std::env::set_current_dir(cwd).unwrap();
        let home_value = self.home_values[usize::from(recipe.home_as) % self.home_values.len()].clone();
        let top = self.top.as_os_str().to_str().unwrap();
        let home_text = String::from_utf8(home_value.clone()).unwrap();
        // `text` is the spelling's start; `probe` a short path to the
        // same place, to list and resolve while walking.
        let (base, probe): (String, String) = match recipe.start {
            Start::Top => (top.into(), top.into()),
            Start::ProcSelfRoot => (format!("/proc/self/root{top}"), format!("/proc/self/root{top}")),
            Start::ThreadSelfRoot => (
                format!("/proc/thread-self/root{top}"),
                format!("/proc/thread-self/root{top}"),
            ),
            Start::ChildCwd => {
                let p = format!("/proc/{}/cwd", self.sleeper.id());
                (p.clone(), p)
            }
            Start::TaskCwd => {
                // SAFETY: gettid has no preconditions.
                let tid = unsafe { libc::gettid() };
                let p = format!("/proc/{}/task/{tid}/cwd", std::process::id());
                (p.clone(), p)
            }
            Start::ThreadSelfCwd => ("/proc/thread-self/cwd".into(), "/proc/thread-self/cwd".into()),
            Start::Relative => (String::new(), ".".into()),
            Start::Dot => (".".into(), ".".into()),
            Start::Tilde => ("~".into(), home_text.clone()),
            Start::HomeValue => (home_text.clone(), home_text.clone()),
        };
        let mut probe = probe;
        let mut segments: Vec<String> = Vec::new();
        let step_to = |segments: &mut Vec<String>, probe: &mut String, name: &str| {
            segments.push(name.to_string());
            probe.push('/');
            probe.push_str(name);
        };
        for &(kind, pick) in &recipe.steps {
            if kind % 4 == 3 {
                // Up, but never above `<top>`.
                match realpath(probe.as_bytes()) {
                    Ok(real) if real != b(&self.top) && real.starts_with(b(&self.top)) => {
                        step_to(&mut segments, &mut probe, "..")
                    }
                    _ => {}
                }
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&probe) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir() || t.is_symlink()))
                .filter_map(|e| e.file_name().into_string().ok())
                .collect();
            names.sort();
            if !names.is_empty() {
                let name = names[usize::from(pick) % names.len()].clone();
                step_to(&mut segments, &mut probe, &name);
            }
        }
        let target = match recipe.steer {
            Steer::Nowhere => None,
            Steer::Home => Some(&self.home),
            Steer::Parent => Some(&self.parent),
            Steer::Top => Some(&self.top),
        };
        if let (Some(target), Ok(here)) = (target, realpath(probe.as_bytes())) {
            let here: Vec<&[u8]> = here.split(|&c| c == b'/').filter(|c| !c.is_empty()).collect();
            let there: Vec<&[u8]> = b(target).split(|&c| c == b'/').filter(|c| !c.is_empty()).collect();
            let common = here.iter().zip(&there).take_while(|(a, b)| a == b).count();
            for _ in common..here.len() {
                step_to(&mut segments, &mut probe, "..");
            }
            for name in &there[common..] {
                step_to(&mut segments, &mut probe, std::str::from_utf8(name).unwrap());
            }
        }
        // The text: separators between the parts, boundaries noted.
        let mut text = base.clone();
        let mut boundaries = vec![text.len()];
        for (i, segment) in segments.iter().enumerate() {
            if !(i == 0 && text.is_empty()) {
                text.push_str(SEPARATORS[usize::from(recipe.seps[i % recipe.seps.len()]) % SEPARATORS.len()]);
            }
            text.push_str(segment);
            boundaries.push(text.len());
        }
        if text.is_empty() {
            text.push('.');
            boundaries = vec![0, 1];
        }
        text.push_str(TAILS[usize::from(recipe.tail) % TAILS.len()]);
        let mut spelling = text.into_bytes();
        let (at, runs) = match recipe.pad {
            Pad::None => (0, 0),
            Pad::Some { at, runs } => (at, usize::from(runs)),
            Pad::ToPathMax { at, by } => {
                let want = (PATH_MAX as i64 + i64::from(by)).max(0) as usize;
                (at, want.saturating_sub(spelling.len()) / 2)
            }
        };
        if runs > 0 {
            let offset = boundaries[usize::from(at) % boundaries.len()];
            // At the start of a relative spelling `./` keeps it relative.
            let run: &[u8] = if offset == 0 { b"./" } else { b"/." };
            let pad: Vec<u8> = run.iter().copied().cycle().take(run.len() * runs).collect();
            spelling.splice(offset..offset, pad);
        }
        if recipe.start == Start::Tilde {
            // As the daemon expands it where params are bound.
            let expanded = gopath::expand_home(std::str::from_utf8(&spelling).unwrap(), Some(&home_text));
            spelling = expanded.into_bytes();
        }
        Spelled {
            spelling,
            home_value,
            plain_home: usize::from(recipe.home_as) % self.home_values.len() < PLAIN_HOME_VALUES,
        }
    }

    /// Every property of one case (see the module doc); the model's truth
    /// and the guard's verdict, for the tally.
    pub(crate) fn check(&self, spelled: &Spelled) -> Result<(Truth, Verdict), TestCaseError> {
        let spelling = &spelled.spelling;
        let path = Path::new(OsStr::from_bytes(spelling));
        let homes = self.homes(spelled);
        let verdict = homes.verdict(path);
        let truth = self.model(spelling);
        let shown = String::from_utf8_lossy(spelling);
        if truth.must_refuse() {
            prop_assert_ne!(
                verdict,
                Verdict::Clear,
                "{:?} ({} bytes) is {:?}",
                shown,
                spelling.len(),
                truth
            );
        }
        // Written plainly: its cleaned absolute form is what the kernel
        // resolves it to, so nothing but the lexical test could refuse it.
        let cwd = std::env::current_dir().unwrap();
        let absolute = if gopath::is_abs(spelling) {
            spelling.clone()
        } else {
            [b(&cwd), b"/", spelling].concat()
        };
        let plain = spelled.plain_home
            && absolute.len() < PATH_MAX
            && realpath(spelling).is_ok_and(|real| real == gopath::clean(&absolute));
        if truth == Truth::Clear && plain {
            prop_assert_eq!(verdict, Verdict::Clear, "{:?} is clear and plainly written", shown);
        }
        if spelling.len() < PATH_MAX {
            // What the removals ask, by descriptor: the directory the
            // spelling opens, and its last name in its parent.
            if let Some(dir) = open_dir(spelling) {
                let st = std::fs::metadata(path).map(|m| (m.dev(), m.ino()));
                if let Ok(id) = st {
                    let held = homes.holds_dir(&dir);
                    if self.held(id) {
                        prop_assert!(held, "holds_dir({:?}) is false", shown);
                    } else if spelled.plain_home {
                        prop_assert!(!held, "holds_dir({:?}) is true", shown);
                    }
                }
            }
            let (dir, name) = split(spelling);
            // `/` splits into no last name: there is no entry to remove or
            // to judge (an empty name is never unlinked, ENOENT).
            if let (false, Some(parent)) = (name.is_empty(), open_dir(&dir)) {
                let held = homes.holds_entry(&parent, &name);
                // The entry as split, not the spelling: a trailing slash
                // would follow a link the removal only unlinks.
                let lstat = std::fs::symlink_metadata(OsStr::from_bytes(&[&dir[..], b"/", &name[..]].concat()));
                match lstat {
                    Ok(m) if self.held((m.dev(), m.ino())) => {
                        prop_assert!(held, "holds_entry({:?}) is false", shown)
                    }
                    Ok(_) if spelled.plain_home => prop_assert!(!held, "holds_entry({:?}) is true", shown),
                    _ => {}
                }
            }
        }
        Ok((truth, verdict))
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.sleeper.kill();
        let _ = self.sleeper.wait();
        for (point, _) in &self.binds {
            let c = cstr(b(point));
            // SAFETY: a NUL-terminated path.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// `path`'s parent and last name, as a removal splits it (Go's
/// `splitPath`: trailing slashes dropped).
pub(crate) fn split(path: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut p = path;
    while p.len() > 1 && p.ends_with(b"/") {
        p = &p[..p.len() - 1];
    }
    match p.iter().rposition(|&c| c == b'/') {
        Some(0) => (b"/".to_vec(), p[1..].to_vec()),
        Some(i) => (p[..i].to_vec(), p[i + 1..].to_vec()),
        None => (b".".to_vec(), p.to_vec()),
    }
}

const SEPARATORS: &[&str] = &["/", "/", "//", "/./", "/.//./"];
const TAILS: &[&str] = &["", "", "/", "/.", "//"];

/// Where a spelling starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    Top,
    ProcSelfRoot,
    ThreadSelfRoot,
    ChildCwd,
    TaskCwd,
    ThreadSelfCwd,
    Relative,
    Dot,
    Tilde,
    HomeValue,
}

/// Where a spelling heads last.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Steer {
    Nowhere,
    Home,
    Parent,
    Top,
}

/// `/.` runs put into a spelling.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pad {
    None,
    /// `runs` of them at boundary `at`.
    Some {
        at: u8,
        runs: u8,
    },
    /// As many as bring the spelling to `PATH_MAX + by` bytes.
    ToPathMax {
        at: u8,
        by: i16,
    },
}

/// One case: how to spell a directory of the [`Fixture`].
#[derive(Debug, Clone)]
pub(crate) struct Recipe {
    home_as: u8,
    cwd: u8,
    start: Start,
    /// (kind, pick): kind 3 of 4 goes up, the others go down into the
    /// `pick`-th directory or link (sorted).
    steps: Vec<(u8, u8)>,
    seps: Vec<u8>,
    steer: Steer,
    tail: u8,
    pad: Pad,
}

/// A spelling, with `$HOME`'s value for the case.
#[derive(Debug)]
pub(crate) struct Spelled {
    pub(crate) spelling: Vec<u8>,
    pub(crate) home_value: Vec<u8>,
    /// `$HOME` cleans to the home itself (not through a link).
    pub(crate) plain_home: bool,
}

/// What the cases mostly aim at.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Aim {
    /// Two in three routes end at the home, its parent or `<top>`.
    AtTheHome,
    /// Most are random walks (the wipe property: what the guard clears).
    Anywhere,
}

/// The cases' generator.
pub(crate) fn recipes(aim: Aim) -> impl Strategy<Value = Recipe> {
    let start = prop_oneof![
        3 => Just(Start::Top),
        2 => Just(Start::ProcSelfRoot),
        1 => Just(Start::ThreadSelfRoot),
        1 => Just(Start::ChildCwd),
        1 => Just(Start::TaskCwd),
        1 => Just(Start::ThreadSelfCwd),
        1 => Just(Start::Relative),
        1 => Just(Start::Dot),
        2 => Just(Start::Tilde),
        1 => Just(Start::HomeValue),
    ];
    let nowhere = match aim {
        Aim::AtTheHome => 2,
        Aim::Anywhere => 12,
    };
    let steer = prop_oneof![
        nowhere => Just(Steer::Nowhere),
        2 => Just(Steer::Home),
        1 => Just(Steer::Parent),
        1 => Just(Steer::Top),
    ];
    let pad = prop_oneof![
        3 => Just(Pad::None),
        1 => (any::<u8>(), 1u8..64).prop_map(|(at, runs)| Pad::Some { at, runs }),
        2 => (any::<u8>(), -40i16..40).prop_map(|(at, by)| Pad::ToPathMax { at, by }),
    ];
    (
        any::<u8>(),
        any::<u8>(),
        start,
        proptest::collection::vec((any::<u8>(), any::<u8>()), 0..8),
        proptest::collection::vec(any::<u8>(), 1..4),
        steer,
        any::<u8>(),
        pad,
    )
        .prop_map(|(home_as, cwd, start, steps, seps, steer, tail, pad)| Recipe {
            home_as,
            cwd,
            start,
            steps,
            seps,
            steer,
            tail,
            pad,
        })
}

/// The number of cases each property runs (`PROPTEST_CASES` overrides).
pub(crate) fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(4096)
}

/// A runner for these properties: no regression file (the inputs name a
/// temp dir that is gone).
pub(crate) fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })
}

#[test]
fn every_spelling_of_the_home_or_above_it_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let tally = on_a_private_thread(|private| {
        let fixture = Fixture::new(tmp.path(), private);
        if !private.mounts {
            eprintln!("no bind mounts: {}", private.why_not);
        }
        let tally: RefCell<BTreeMap<String, usize>> = RefCell::default();
        let result = runner().run(&recipes(Aim::AtTheHome), |recipe| {
            let spelled = fixture.render(&recipe);
            let (truth, verdict) = fixture.check(&spelled)?;
            let mut tally = tally.borrow_mut();
            *tally.entry(format!("{truth:?} -> {verdict:?}")).or_default() += 1;
            if spelled.spelling.len() >= PATH_MAX {
                *tally.entry(format!("{truth:?}, PATH_MAX or longer")).or_default() += 1;
            }
            let through_a_mount = spelled.spelling.windows(5).any(|w| w == b"-bind");
            if truth.must_refuse() && through_a_mount {
                *tally.entry("refused through a bind mount".into()).or_default() += 1;
            }
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}");
        }
        (tally.into_inner(), private.mounts)
    });
    let (tally, mounts) = tally;
    eprintln!("{} cases: {tally:#?}", cases());
    let count = |key: &str| tally.get(key).copied().unwrap_or(0);
    // The generator reaches every kind of case the properties are about
    // (each at least 4 times less often than it does on average, so a
    // random seed does not fail the test).
    let at_least = (cases() / 256) as usize;
    for key in [
        "Home -> Home",
        "Above -> Home",
        "Clear -> Clear",
        "Home, PATH_MAX or longer",
        "Above, PATH_MAX or longer",
        "CannotTell -> LinkLoop",
    ] {
        assert!(count(key) >= at_least, "only {} cases of {key}", count(key));
    }
    if mounts {
        assert!(count("refused through a bind mount") >= at_least);
    }
}

/// Bind-mounts `source` on `point` (both existing directories), in the
/// caller's mount namespace: the one raw `mount(2)` of the property tests.
pub(crate) fn bind_mount(source: &Path, point: &Path) -> std::io::Result<()> {
    let (src, dst) = (cstr(source.as_os_str().as_bytes()), cstr(point.as_os_str().as_bytes()));
    // SAFETY: NUL-terminated paths; no data.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
