//! The git-directory trust check: before any
//! `git.*` method runs git, the git directory the request would use is
//! found the way git's own discovery finds it and judged on its layout.
//!
//! The point is a planted `commondir`. git reads that file to learn where
//! a linked worktree's shared repository lives, and it obeys one wherever
//! it sits, so a repository (or anyone who can write into it) could
//! redirect git to another repository's objects, config and hooks. git
//! only ever writes `commondir` inside a linked worktree's entry,
//! `<repo>/.git/worktrees/<name>/`, with the content `../..`. So:
//!
//! - a `commondir` anywhere else (a main or bare repository, a submodule
//!   git directory, an entry whose repository is not a valid git
//!   directory), a stray one, is refused (M1); build 89cb6289
//!   ([`StrayRules::DotOnly`]) instead trusts one that reads `.` or `./`
//!   in a valid git directory and words the rest S1 to S3 (see
//!   [`judge_stray`]);
//! - an entry's `commondir` must, trimmed and taken relative to the entry,
//!   name the entry's own repository (M2); it must exist (M3) and be a
//!   regular file of at most 1 MiB (M4);
//! - a `.git` file that does not start with `gitdir:`, is over 1 MiB or
//!   names a directory that is gone means no repository at all, and so
//!   does a `.git` directory that fails git's "is this a git directory"
//!   test (HEAD, `objects`, `refs`) and holds no `commondir`.
//!
//! M5 (a gone entry named by the daemon's own `GIT_DIR`) cannot arise:
//! remora never lets its environment's `GIT_DIR`/`GIT_COMMON_DIR` reach git.
//!
//! Every read opens without blocking (a FIFO never stalls the check) and
//! reads a bounded number of bytes. Paths in the texts are cut to 300
//! characters and quoted as Go's `%q` does.

use super::paths::clean;
use crate::base::goerr::{go_quote, io_text};
use std::fs::{self, File};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The largest `.git` file or `commondir` the check reads (and accepts).
const MAX_POINTER_FILE: u64 = 1 << 20;
/// git reads HEAD into a buffer of this size when it tests a directory.
const HEAD_WINDOW: usize = 255;
/// Paths in the refusal texts are cut to this many characters.
const OPERAND_CHARS: usize = 300;

const PREFIX: &str =
    "the repository's git directory could not be trusted; git not run: commondir not as git writes it: ";
/// The content of a stray `commondir` in the S1 text is cut to this many
/// characters.
const CONTENT_CHARS: usize = 60;
/// The S2 reason of a `commondir` link that leaves its git directory.
const ESCAPES: &str = "openat commondir: path escapes from parent";

/// How a stray `commondir` (one in a git directory that is not a linked
/// worktree's entry) is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StrayRules {
    /// Every one is refused with one text, M1 (builds up to f6010b97).
    Refuse,
    /// One that reads `.` or `./` in a valid git directory is trusted, the
    /// rest refused S1 to S3 (build 89cb6289,
    /// [`crate::protocol::build::Switch::StrayCommondir`]).
    DotOnly,
}

/// What the check says about a request directory.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Run git as usual (also when no repository was found: git says so).
    Trusted,
    /// Answer as for a directory that holds no repository.
    NoRepository,
    /// Refuse with this text.
    Refused(String),
}

/// Judges the git directory that git would use for `dir` (the daemon's
/// cwd when empty). File-system work only, bounded; run off the reactor.
pub(super) async fn judge(dir: &str, rules: StrayRules) -> Verdict {
    judge_with_root(dir, rules).await.0
}

/// [`judge`], and the folder where the walk found the repository: the one
/// holding the `.git` directory or file, with links resolved. `None` when
/// the walk found a git directory with no work tree above it (a bare
/// repository, a path inside `.git`) or nothing at all. Build 89cb6289
/// answers `git.info`'s `root` with this folder.
pub(super) async fn judge_with_root(dir: &str, rules: StrayRules) -> (Verdict, Option<PathBuf>) {
    let dir = dir.to_string();
    tokio::task::spawn_blocking(move || judge_dir(&dir, rules))
        .await
        .unwrap_or((Verdict::Trusted, None))
}

fn judge_dir(dir: &str, rules: StrayRules) -> (Verdict, Option<PathBuf>) {
    let start = if dir.is_empty() { Path::new(".") } else { Path::new(dir) };
    // git runs in the directory with its links resolved (getcwd), and
    // discovers from there; a directory git cannot enter is git's to report.
    let Ok(start) = fs::canonicalize(start) else {
        return (Verdict::Trusted, None);
    };
    if !start.is_dir() {
        return (Verdict::Trusted, None);
    }
    for here in start.ancestors() {
        let dot_git = here.join(".git");
        match fs::metadata(&dot_git) {
            Ok(meta) if meta.is_file() => return (judge_git_file(here, &dot_git, rules), Some(here.to_path_buf())),
            Ok(meta) if meta.is_dir() => {
                if is_git_directory(&dot_git) {
                    return (judge_git_dir(&dot_git, rules), Some(here.to_path_buf()));
                }
                // A broken `.git` directory ends the walk (git would walk on
                // to an outer repository, which is not the one meant).
                let verdict = match fs::symlink_metadata(dot_git.join("commondir")) {
                    Ok(_) => judge_stray(&dot_git, rules),
                    Err(_) => Verdict::NoRepository,
                };
                return (verdict, None);
            }
            _ => {}
        }
        // A bare repository (or the inside of `.git`): the directory itself
        // is the git directory, and there is no work tree.
        if is_git_directory(here) {
            return (judge_git_dir(here, rules), None);
        }
    }
    (Verdict::Trusted, None)
}

/// A `.git` file: `gitdir: <path>`, the path relative to the file's folder.
fn judge_git_file(folder: &Path, dot_git: &Path, rules: StrayRules) -> Verdict {
    let Some(bytes) = read_small(dot_git, MAX_POINTER_FILE).filter(|b| b.len() as u64 <= MAX_POINTER_FILE) else {
        return Verdict::NoRepository;
    };
    let Some(rest) = bytes.strip_prefix(b"gitdir:") else {
        return Verdict::NoRepository;
    };
    let Ok(target) = std::str::from_utf8(rest.trim_ascii()) else {
        return Verdict::NoRepository;
    };
    if target.is_empty() {
        return Verdict::NoRepository;
    }
    let joined = folder.join(target);
    let git_dir = PathBuf::from(clean(&joined.to_string_lossy()));
    if !git_dir.is_dir() {
        return Verdict::NoRepository;
    }
    judge_git_dir(&git_dir, rules)
}

/// A found git directory: an entry of a linked worktree, or anything else.
fn judge_git_dir(git_dir: &Path, rules: StrayRules) -> Verdict {
    let commondir = git_dir.join("commondir");
    let repository = git_dir.parent().and_then(Path::parent);
    let is_entry = git_dir.parent().and_then(Path::file_name) == Some("worktrees".as_ref())
        && git_dir.file_name() != Some(".git".as_ref())
        && repository.is_some_and(is_git_directory);
    let Some(repository) = repository.filter(|_| is_entry) else {
        return match fs::symlink_metadata(&commondir) {
            Ok(_) => judge_stray(git_dir, rules),
            Err(_) => Verdict::Trusted,
        };
    };
    let meta = match fs::metadata(&commondir) {
        Ok(meta) => meta,
        Err(_) if fs::symlink_metadata(&commondir).is_err() => {
            return Verdict::Refused(format!(
                "{PREFIX}worktree entry {} has none (git always writes one there, containing ../..); the entry is damaged or was not made by git — recreate the worktree with git worktree add, or remove the entry",
                operand(git_dir)
            ))
        }
        // A link to nothing: not a plain file.
        Err(_) => return Verdict::Refused(not_plain(&commondir, "commondir is not a regular file")),
    };
    if !meta.is_file() {
        return Verdict::Refused(not_plain(&commondir, "commondir is not a regular file"));
    }
    if meta.len() > MAX_POINTER_FILE {
        return Verdict::Refused(not_plain(&commondir, "commondir is larger than 1048576 bytes"));
    }
    let names_own = read_small(&commondir, MAX_POINTER_FILE).is_some_and(|bytes| {
        let text = bytes.trim_ascii();
        match std::str::from_utf8(text) {
            Ok(text) if !text.is_empty() && !text.contains('\0') => {
                let named = git_dir.join(text);
                clean(&named.to_string_lossy()) == clean(&repository.to_string_lossy())
            }
            _ => false,
        }
    });
    if names_own {
        return Verdict::Trusted;
    }
    Verdict::Refused(format!(
        "{PREFIX}{} does not name the entry's own repository, {}; restore the file to read ../.. or remove that worktree entry and add the worktree again",
        operand(&commondir),
        operand(repository)
    ))
}

/// A stray `commondir` in `git_dir` (one that is not an entry).
///
/// With [`StrayRules::DotOnly`], in this order (PROTOCOL.md "Git-directory
/// trust check", rows T00 to T11 of 89cb6289):
/// 1. a link is followed only when its target is relative and stays in
///    `git_dir`; one that dangles there counts as no file at all (the
///    directory is trusted when it is a valid git directory, else S3);
/// 2. anything but a regular file of at most 1 MiB is S2 with its reason
///    (a link leaving `git_dir`: `openat commondir: path escapes from
///    parent`);
/// 3. the content, every trailing CR and LF removed, must be exactly `.`
///    or `./`, else S1 quoting it (no other blank is trimmed);
/// 4. `git_dir` must pass git's git-directory test, else S3.
fn judge_stray(git_dir: &Path, rules: StrayRules) -> Verdict {
    let commondir = git_dir.join("commondir");
    if rules == StrayRules::Refuse {
        return Verdict::Refused(stray(&commondir));
    }
    let valid = is_git_directory(git_dir);
    let bad_dir = || {
        Verdict::Refused(format!(
            "{PREFIX}{} sits in a git directory git would not take as a repository (its HEAD, objects or refs missing or invalid), so git would look for one somewhere else; repair that directory (usually its HEAD file)",
            operand(&commondir)
        ))
    };
    let content = match stray_content(git_dir, &commondir) {
        Stray::Dangling if valid => return Verdict::Trusted,
        Stray::Dangling => return bad_dir(),
        Stray::NotPlain(reason) => {
            return Verdict::Refused(format!(
                "{PREFIX}{} is not a small plain file ({reason}); git writes that file only inside .git/worktrees/<name>/; one here can send git's configuration and hooks elsewhere, so treat it as tampering: delete it, and if you did not create it, find out what did",
                operand(&commondir)
            ))
        }
        Stray::Content(bytes) => bytes,
    };
    let mut end = content.len();
    while end > 0 && matches!(content[end - 1], b'\r' | b'\n') {
        end -= 1;
    }
    let content = &content[..end];
    if content != b"." && content != b"./" {
        return Verdict::Refused(format!(
            "{PREFIX}{} reads {}; git writes that file only inside .git/worktrees/<name>/, and Claude Code's sandbox may leave one containing just \".\"; anything else sends git's configuration and hooks elsewhere, so treat it as tampering: delete it, and if you did not create it, find out what did",
            operand(&commondir),
            cut_quote(content, CONTENT_CHARS)
        ));
    }
    if !valid {
        return bad_dir();
    }
    Verdict::Trusted
}

/// What a stray `commondir` holds.
enum Stray {
    /// A link, relative and inside its git directory, to nothing.
    Dangling,
    /// Not a small regular file: the S2 reason.
    NotPlain(String),
    Content(Vec<u8>),
}

/// Reads a stray `commondir` as the rules of [`judge_stray`] allow.
fn stray_content(git_dir: &Path, commondir: &Path) -> Stray {
    let Ok(meta) = fs::symlink_metadata(commondir) else {
        return Stray::Dangling;
    };
    let meta = if meta.file_type().is_symlink() {
        let inside = fs::read_link(commondir).is_ok_and(|target| {
            let below = clean(&git_dir.join(&target).to_string_lossy());
            target.is_relative() && below.starts_with(&format!("{}/", clean(&git_dir.to_string_lossy())))
        });
        if !inside {
            return Stray::NotPlain(ESCAPES.to_string());
        }
        match fs::metadata(commondir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Stray::Dangling,
            Err(e) => return Stray::NotPlain(format!("openat commondir: {}", io_text(&e))),
            Ok(meta) => {
                // A chain of links must not lead out either.
                let real = (fs::canonicalize(commondir), fs::canonicalize(git_dir));
                if !matches!(real, (Ok(file), Ok(dir)) if file.starts_with(&dir) && file != dir) {
                    return Stray::NotPlain(ESCAPES.to_string());
                }
                meta
            }
        }
    } else {
        meta
    };
    if !meta.is_file() {
        return Stray::NotPlain("commondir is not a regular file".to_string());
    }
    if meta.len() > MAX_POINTER_FILE {
        return Stray::NotPlain("commondir is larger than 1048576 bytes".to_string());
    }
    let opened = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(commondir);
    let mut bytes = Vec::new();
    match opened.and_then(|file| file.take(MAX_POINTER_FILE + 1).read_to_end(&mut bytes)) {
        Ok(_) if bytes.len() as u64 > MAX_POINTER_FILE => {
            Stray::NotPlain("commondir is larger than 1048576 bytes".to_string())
        }
        Ok(_) => Stray::Content(bytes),
        Err(e) => Stray::NotPlain(format!("openat commondir: {}", io_text(&e))),
    }
}

/// M1: a `commondir` where git never writes one.
fn stray(commondir: &Path) -> String {
    format!(
        "{PREFIX}{} exists where git itself never writes one (git keeps that file only in a linked worktree's entry under .git/worktrees/); remove it if you did not create it, and treat its appearance as tampering",
        operand(commondir)
    )
}

/// M4: an entry's `commondir` that is not a small regular file.
fn not_plain(commondir: &Path, reason: &str) -> String {
    format!(
        "{PREFIX}{} is not a small plain file ({reason}); remove it, or remove that worktree entry and add the worktree again so git rewrites it",
        operand(commondir)
    )
}

/// git's test of a git directory: a HEAD that reads as a ref or an object
/// id, and `objects` and `refs` present (of any type).
fn is_git_directory(dir: &Path) -> bool {
    if fs::symlink_metadata(dir.join("objects")).is_err() || fs::symlink_metadata(dir.join("refs")).is_err() {
        return false;
    }
    let Some(head) = read_small(&dir.join("HEAD"), HEAD_WINDOW as u64) else {
        return false;
    };
    let head = &head[..head.len().min(HEAD_WINDOW)];
    if let Some(rest) = head.strip_prefix(b"ref:") {
        return rest.trim_ascii_start().starts_with(b"refs/");
    }
    head.len() >= 40 && head[..40].iter().all(u8::is_ascii_hexdigit)
}

/// Up to `cap + 1` bytes of a regular file, opened without blocking (so a
/// longer file shows as more than `cap` bytes); `None` for anything that
/// is not a readable regular file.
fn read_small(path: &Path, cap: u64) -> Option<Vec<u8>> {
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// A path as the texts show it: cut to 300 characters (a byte that is not
/// UTF-8 counts as one), then quoted as Go's `%q`.
fn operand(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    cut_quote(path.as_os_str().as_bytes(), OPERAND_CHARS)
}

/// `bytes` cut to `limit` characters (a byte that is not UTF-8 counts as
/// one), then quoted as Go's `%q`.
fn cut_quote(bytes: &[u8], limit: usize) -> String {
    let mut end = 0;
    let mut count = 0;
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if count == limit {
                return go_quote(&bytes[..end]);
            }
            end += c.len_utf8();
            count += 1;
        }
        for _ in chunk.invalid() {
            if count == limit {
                return go_quote(&bytes[..end]);
            }
            end += 1;
            count += 1;
        }
    }
    go_quote(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_are_cut_by_characters_and_quoted() {
        let long = format!("/{}", "é".repeat(400));
        let cut = operand(Path::new(&long));
        assert_eq!(cut, format!("\"/{}\"", "é".repeat(299)));
        assert_eq!(operand(Path::new("/a\"b")), "\"/a\\\"b\"");
        use std::os::unix::ffi::OsStrExt;
        let bad = std::ffi::OsStr::from_bytes(b"/bad\xffname");
        assert_eq!(operand(Path::new(bad)), "\"/bad\\xffname\"");
    }

    #[test]
    fn head_test_follows_gits_window() {
        let dir = tempdir();
        fs::create_dir(dir.join("objects")).unwrap();
        fs::write(dir.join("refs"), b"x").unwrap();
        for (head, ok) in [
            ("ref: refs/heads/main\n".to_string(), true),
            ("ref:\nrefs/heads/main\n".to_string(), true),
            (format!("ref:{}refs/heads/main\n", " ".repeat(246)), true),
            (format!("ref:{}refs/heads/main\n", " ".repeat(247)), false),
            (format!("{}{}", "a".repeat(40), "z".repeat(300)), true),
            ("a".repeat(39), false),
            ("ref: something\n".to_string(), false),
            (String::new(), false),
        ] {
            fs::write(dir.join("HEAD"), &head).unwrap();
            assert_eq!(is_git_directory(&dir), ok, "{head:?}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_stray_commondir_link_is_followed_only_inside_its_git_directory() {
        let dir = std::env::temp_dir().join(format!("remora-trust-stray-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let git = dir.join(".git");
        fs::create_dir_all(git.join("objects")).unwrap();
        fs::create_dir_all(git.join("refs")).unwrap();
        fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let cd = git.join("commondir");
        let judge = |rules| judge_dir(dir.to_str().unwrap(), rules).0;
        // A dangling relative link inside counts as none (row T07c)...
        std::os::unix::fs::symlink("nothing-here", &cd).unwrap();
        assert_eq!(judge(StrayRules::DotOnly), Verdict::Trusted);
        assert!(matches!(judge(StrayRules::Refuse), Verdict::Refused(t) if t.contains("never writes one")));
        // ...unless the directory is no git directory: S3 (row DG2-g).
        fs::write(git.join("HEAD"), "garbage\n").unwrap();
        assert!(matches!(judge(StrayRules::DotOnly), Verdict::Refused(t) if t.contains("sits in a git directory")));
        fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        // A link that leaves the git directory is not followed (T07a, T07e).
        fs::write(dir.join("dot"), ".").unwrap();
        for target in ["../dot", "../nothing"] {
            fs::remove_file(&cd).unwrap();
            std::os::unix::fs::symlink(target, &cd).unwrap();
            assert!(
                matches!(judge(StrayRules::DotOnly), Verdict::Refused(t) if t.contains("(openat commondir: path escapes from parent)")),
                "{target}"
            );
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("remora-trust-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }
}
