//! The one place that words `files.extract_tar`'s step failures, for the
//! build being answered as ([`super::Rules::relative_texts`]).
//!
//! The walk reports *what* failed (the step, the components of the
//! cleaned name up to the one that failed, the OS error); [`Texts`] says
//! it the way the build does. The entry prefixes (`mkdir parent <entry>: `,
//! `mkdir <entry>: `, `create <entry>: `) and the destDir step prefixes are
//! the callers'; they are equal on both builds unless said below.
//!
//! - Build `89cb6289` and older name the whole path:
//!   `mkdir <destDir>/a: not a directory`, `open <destDir>/x: is a directory`.
//! - Build `5fd08069` works through a handle of `destDir` and names the
//!   path relative to it (`docs/record/files-extract-tar.md`, the
//!   collision, directory-entry and destDir tables): `mkdirat a: file
//!   exists` where the directory to make is a file, `openat a: not a
//!   directory` where a directory to go through is one, `openat x: file
//!   exists` where a file to create is a directory, `openat .` for the
//!   entry that names `destDir`.

use crate::base::goerr::{go_quote, path_error};
use crate::base::gojson::go_lossy;
use std::io;

/// The step of a directory walk (`mkdir parent`, `mkdir`) that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DirStep {
    /// Going into an existing component (or finding it too long).
    Open,
    /// Making a missing component.
    Make,
    /// Going into the component just made.
    Reopen,
}

/// The destDir steps whose wording differs between the builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DestStep {
    /// Opening the parent of `destDir` (5fd08069: before the clean).
    OpenParent,
    /// Removing the old `destDir` below its parent (5fd08069 only; the
    /// older builds word their path-based `RemoveAll` themselves).
    Clean,
    /// The exclusive `mkdirat` of `destDir` in its parent.
    Make,
    /// Opening the new `destDir` in its parent.
    Open,
    /// 5fd08069's look at `.` inside the new `destDir`.
    Examine,
}

/// How the failures are worded. `relative`: build 5fd08069's texts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Texts {
    pub relative: bool,
}

/// `a/b/c` from the components, `.` for none (as Go's root names `destDir`).
fn rel_name(comps: &[&[u8]]) -> String {
    if comps.is_empty() {
        return ".".to_string();
    }
    go_lossy(&comps.join(&b'/'))
}

/// `<root>/a/b`: the whole path of the older builds.
fn full_name(root: &[u8], comps: &[&[u8]]) -> String {
    let mut path = root.to_vec();
    for comp in comps {
        path.push(b'/');
        path.extend_from_slice(comp);
    }
    go_lossy(&path)
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

/// A symlink met with `O_NOFOLLOW` (ELOOP) reads as any existing
/// non-directory does.
fn not_dir(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) => errno(libc::ENOTDIR),
        Some(code) => errno(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

impl Texts {
    /// A directory walk failed at `comps[..=at]` below `root`; `comps` is
    /// every directory the walk had to make (`at` the failing one).
    pub(super) fn dir(&self, root: &[u8], comps: &[&[u8]], at: usize, step: DirStep, e: &io::Error) -> String {
        let upto = &comps[..=at.min(comps.len().saturating_sub(1))];
        if !self.relative {
            return path_error("mkdir", &full_name(root, upto), &not_dir(e));
        }
        let name = rel_name(upto);
        let last = at + 1 >= comps.len();
        match step {
            DirStep::Make => path_error("mkdirat", &name, e),
            // The directory asked for is there and is not one: 5fd08069's
            // `mkdirat` met it (`file exists`).
            _ if last && matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => {
                path_error("mkdirat", &name, &errno(libc::EEXIST))
            }
            DirStep::Open if last => path_error("mkdirat", &name, e),
            _ => path_error("openat", &name, &not_dir(e)),
        }
    }

    /// The file of an entry could not be created at `comps` (none: the
    /// entry names `destDir` itself, which is reported as `EISDIR`).
    /// `target` is the whole path, for the older builds.
    pub(super) fn create(&self, target: &[u8], comps: &[&[u8]], e: &io::Error) -> String {
        if !self.relative {
            return path_error("open", &go_lossy(target), e);
        }
        // 5fd08069 creates exclusively: a directory in the way is an
        // existing name, not a directory opened for writing.
        let e = match e.raw_os_error() {
            Some(libc::EISDIR) => errno(libc::EEXIST),
            _ => not_dir(e),
        };
        path_error("openat", &rel_name(comps), &e)
    }

    /// A destDir step failed. `parent` and `base` split the cleaned
    /// `destDir`; `dest` is it whole.
    pub(super) fn dest(&self, step: DestStep, parent: &[u8], base: &[u8], dest: &[u8], e: &io::Error) -> String {
        let base_text = go_lossy(base);
        match (step, self.relative) {
            (DestStep::OpenParent, true) => format!("open parent: {}", path_error("open", &go_lossy(parent), e)),
            (DestStep::OpenParent, false) => format!("mkdir destDir: {}", path_error("open", &go_lossy(parent), e)),
            (DestStep::Clean, _) => format!("clean destDir: {}", path_error("RemoveAll", &base_text, e)),
            // A name that came back between the clean and the mkdir is
            // remora's own refusal (no build's record has it): one text,
            // the whole path, on every build.
            (DestStep::Make, true) if e.raw_os_error() != Some(libc::EEXIST) => {
                format!("mkdir destDir: {}", path_error("mkdirat", &base_text, e))
            }
            (DestStep::Make, _) => format!("mkdir destDir: {}", path_error("mkdir", &go_lossy(dest), e)),
            (DestStep::Open, true) => format!("open destDir: {}", path_error("openat", &base_text, e)),
            (DestStep::Open, false) => format!("mkdir destDir: {}", path_error("open", &go_lossy(dest), e)),
            (DestStep::Examine, _) => format!(
                "open destDir: {} could not be examined ({})",
                go_quote(base),
                path_error("statat", ".", e)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: Texts = Texts { relative: false };
    const NEW: Texts = Texts { relative: true };

    #[test]
    fn walk_texts_of_both_builds() {
        let root = b"/w/dest";
        let e = errno(libc::ENOTDIR);
        // file `a`, then `a/b`: the parent `a` is the last to make.
        assert_eq!(
            OLD.dir(root, &[b"a"], 0, DirStep::Open, &e),
            "mkdir /w/dest/a: not a directory"
        );
        assert_eq!(NEW.dir(root, &[b"a"], 0, DirStep::Open, &e), "mkdirat a: file exists");
        // file `a`, then `a/b/c`: `a` is gone through.
        assert_eq!(
            OLD.dir(root, &[b"a", b"b"], 0, DirStep::Open, &e),
            "mkdir /w/dest/a: not a directory"
        );
        assert_eq!(
            NEW.dir(root, &[b"a", b"b"], 0, DirStep::Open, &e),
            "openat a: not a directory"
        );
        // file `s/a`, then `s/a/b`.
        assert_eq!(
            NEW.dir(root, &[b"s", b"a"], 1, DirStep::Open, &e),
            "mkdirat s/a: file exists"
        );
        let eacces = errno(libc::EACCES);
        assert_eq!(
            NEW.dir(root, &[b"a"], 0, DirStep::Make, &eacces),
            "mkdirat a: permission denied"
        );
        assert_eq!(
            OLD.dir(root, &[b"a"], 0, DirStep::Make, &eacces),
            "mkdir /w/dest/a: permission denied"
        );
    }

    #[test]
    fn create_texts_of_both_builds() {
        let eisdir = errno(libc::EISDIR);
        assert_eq!(
            OLD.create(b"/w/dest/x", &[b"x"], &eisdir),
            "open /w/dest/x: is a directory"
        );
        assert_eq!(NEW.create(b"/w/dest/x", &[b"x"], &eisdir), "openat x: file exists");
        assert_eq!(NEW.create(b"/w/dest", &[], &eisdir), "openat .: file exists");
        assert_eq!(OLD.create(b"/w/dest", &[], &eisdir), "open /w/dest: is a directory");
        let eacces = errno(libc::EACCES);
        assert_eq!(
            NEW.create(b"/w/dest/a.txt", &[b"a.txt"], &eacces),
            "openat a.txt: permission denied"
        );
    }

    #[test]
    fn dest_texts_of_5fd08069() {
        let e = errno(libc::EACCES);
        let (parent, base, dest) = (&b"/h/x"[..], &b"dest"[..], &b"/h/x/dest"[..]);
        let t = |s| NEW.dest(s, parent, base, dest, &e);
        assert_eq!(t(DestStep::OpenParent), "open parent: open /h/x: permission denied");
        assert_eq!(t(DestStep::Clean), "clean destDir: RemoveAll dest: permission denied");
        assert_eq!(t(DestStep::Make), "mkdir destDir: mkdirat dest: permission denied");
        assert_eq!(t(DestStep::Open), "open destDir: openat dest: permission denied");
        assert_eq!(
            t(DestStep::Examine),
            r#"open destDir: "dest" could not be examined (statat .: permission denied)"#
        );
        let o = |s| OLD.dest(s, parent, base, dest, &e);
        assert_eq!(o(DestStep::OpenParent), "mkdir destDir: open /h/x: permission denied");
        assert_eq!(o(DestStep::Make), "mkdir destDir: mkdir /h/x/dest: permission denied");
        let eexist = errno(libc::EEXIST);
        assert_eq!(
            NEW.dest(DestStep::Make, parent, base, dest, &eexist),
            "mkdir destDir: mkdir /h/x/dest: file exists"
        );
        assert_eq!(o(DestStep::Open), "mkdir destDir: open /h/x/dest: permission denied");
    }
}
