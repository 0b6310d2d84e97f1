//! Seeding a new worktree with the repository's git-ignored `.claude/`
//! files (the reference's `.claude/` pass): `git worktree add` checks out
//! tracked files only, so settings a user keeps ignored under `.claude/`
//! would be missing from every session worktree.
//!
//! What is copied is what `git --literal-pathspecs ls-files --others
//! --ignored --exclude-standard -z -- .claude/<child>…` lists for the
//! children of the repository's top-level `.claude/` (in directory-read
//! order, in batches of at most 130 985 bytes of pathspecs, each costing its
//! length + 3), except `worktrees` and, since build `90fca6e6`, the Claude
//! runtime state: nine names matched as whole components directly under
//! `.claude/`, in any letter case. Links are skipped; copies are new files
//! `0666` less the umask and never wider than their source (a `0600`
//! secret stays `0600`: remora's divergence, the reference gives every
//! copy `0666` less the umask); directories made on the way are `0755`
//! less the umask, narrowed the same way. The step is best effort: nothing in it fails the
//! request.
//!
//! Both sides are walked with `openat(O_NOFOLLOW)` from descriptors of the
//! repository's top level and of the new worktree, so neither a link in the
//! repository nor one checked out into the worktree can carry a read or a
//! write elsewhere. Sources are opened `O_NONBLOCK` and must be regular
//! files.
//!
//! The `.worktreeinclude` manifest pass runs before this one
//! ([`super::seed_include`]); both copy through [`copy_into`].

use super::containment::{cstring, open_dir};
use crate::methods::git::gitcli::{self, QUERY_TIMEOUT};
use std::ffi::CString;
use std::fs::{self, File};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Runtime state of a Claude session, never seeded.
const RUNTIME_STATE: [&str; 9] = [
    "scheduled_tasks.json",
    "scheduled_tasks.lock",
    "routines/.state",
    "worktrees",
    "checkpoints",
    "mailbox",
    "agent-registry.json",
    "first-run",
    "assistant-daemon-state.json",
];

/// The pathspec bytes one `ls-files` call may carry.
const BATCH_BUDGET: usize = 130_985;

/// Whether `path` (as `ls-files` prints it, `.claude/…`) is runtime state.
pub(super) fn is_runtime_state(path: &str) -> bool {
    let Some(rest) = path
        .get(..8)
        .filter(|p| p.eq_ignore_ascii_case(".claude/"))
        .map(|_| &path[8..])
    else {
        return false;
    };
    RUNTIME_STATE.iter().any(|name| {
        rest.get(..name.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(name))
            && matches!(rest.as_bytes().get(name.len()), None | Some(b'/'))
    })
}

/// The children of the top level's `.claude/` as pathspecs
/// (`.claude/<name>`), in directory-read order, `worktrees` (any case)
/// left out.
pub(super) fn claude_children(top: &str) -> Vec<String> {
    match fs::read_dir(Path::new(top).join(".claude")) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .filter(|name| !name.as_bytes().eq_ignore_ascii_case(b"worktrees"))
            .filter_map(|name| name.to_str().map(|n| format!(".claude/{n}")))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Copies the ignored `.claude/` files of the repository whose top level
/// is `top` into the worktree open at `dest`.
pub(super) async fn claude_pass(top: &str, dest: &OwnedFd) {
    let children = claude_children(top);
    let mut listed = Vec::new();
    for batch in batches(&children) {
        let mut args = vec![
            "--literal-pathspecs",
            "ls-files",
            "--others",
            "--ignored",
            "--exclude-standard",
            "-z",
            "--",
        ];
        args.extend(batch.iter().map(String::as_str));
        let out = gitcli::run(top, &args, true, QUERY_TIMEOUT).await;
        if out.success {
            listed.extend(
                out.stdout
                    .split(|&b| b == 0)
                    .filter(|p| !p.is_empty())
                    .filter_map(|p| std::str::from_utf8(p).ok().map(str::to_string)),
            );
        }
    }
    listed.retain(|path| !is_runtime_state(path));
    copy_into(top, dest, listed).await;
}

/// Copies each of `paths` (relative to `top`) into the worktree open at
/// `dest`, off the async threads; a path that fails is skipped.
pub(super) async fn copy_into(top: &str, dest: &OwnedFd, paths: Vec<String>) {
    if paths.is_empty() {
        return;
    }
    let top = top.to_string();
    let Ok(dest) = dest.try_clone() else { return };
    let _ = tokio::task::spawn_blocking(move || {
        let Ok(source) = open_dir(libc::AT_FDCWD, &top, true) else {
            return;
        };
        for path in &paths {
            let _ = copy_one(&source, &dest, path);
        }
    })
    .await;
}

/// Pathspecs in order, cut into calls of at most [`BATCH_BUDGET`] bytes.
fn batches(specs: &[String]) -> Vec<&[String]> {
    let mut out = Vec::new();
    let (mut start, mut used) = (0, 0);
    for (i, spec) in specs.iter().enumerate() {
        let cost = spec.len() + 3;
        if used + cost > BATCH_BUDGET && i > start {
            out.push(&specs[start..i]);
            (start, used) = (i, 0);
        }
        used += cost;
    }
    if start < specs.len() {
        out.push(&specs[start..]);
    }
    out
}

/// Copies one relative path from `source` to `dest`, directories made
/// 0755 (less the umask, and no wider than their source) on the way, the
/// file no wider than its source; nothing is followed or replaced.
fn copy_one(source: &OwnedFd, dest: &OwnedFd, path: &str) -> io::Result<()> {
    let names: Vec<&str> = path.split('/').collect();
    let (file, dirs) = names
        .split_last()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    if dirs
        .iter()
        .chain([file])
        .any(|n| n.is_empty() || *n == "." || *n == "..")
    {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut from = source.try_clone()?;
    let mut to = dest.try_clone()?;
    for dir in dirs {
        from = open_dir(from.as_raw_fd(), dir, false)?;
        to = match open_dir(to.as_raw_fd(), dir, false) {
            Ok(next) => next,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                let c = cstring(dir)?;
                let mode = no_wider_than(0o755, File::from(from.try_clone()?).metadata()?.mode()) | 0o700;
                // SAFETY: a valid directory descriptor and a C string.
                if unsafe { libc::mkdirat(to.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                open_dir(to.as_raw_fd(), dir, false)?
            }
            Err(e) => return Err(e),
        };
    }
    let name = cstring(file)?;
    let read_flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
    let mut input = File::from(open_at(&from, &name, read_flags, 0)?);
    let source_meta = input.metadata()?;
    if !source_meta.is_file() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let write_flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let mode = no_wider_than(0o666, source_meta.mode());
    let mut output = File::from(open_at(&to, &name, write_flags, mode)?);
    io::copy(&mut input, &mut output)?;
    Ok(())
}

/// `mode` without any permission bit `source` lacks (remora's rule, a
/// divergence: the reference creates 0666 less the umask whatever the
/// source's bits, so a 0600 `.env` became readable by everyone). The umask
/// still applies on top.
fn no_wider_than(mode: libc::c_uint, source: u32) -> libc::c_uint {
    mode & (source & 0o777)
}

fn open_at(dir: &OwnedFd, name: &CString, flags: libc::c_int, mode: libc::c_uint) -> io::Result<OwnedFd> {
    loop {
        // SAFETY: a valid directory descriptor and a C string.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode) };
        if fd >= 0 {
            // SAFETY: a fresh descriptor owned from here on.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_state_is_whole_components_directly_under_claude() {
        for path in [
            ".claude/mailbox/x",
            ".claude/Checkpoints/a",
            ".claude/routines/.state",
            ".claude/routines/.STATE/y",
            ".claude/first-run",
            ".CLAUDE/agent-registry.json",
        ] {
            assert!(is_runtime_state(path), "{path}");
        }
        for path in [
            ".claude/mailboxes/x",
            ".claude/nested/mailbox/x",
            ".claude/settings.json",
            ".claude/routines/other",
            "sub/.claude/mailbox/x",
            ".claude/first-run2",
        ] {
            assert!(!is_runtime_state(path), "{path}");
        }
    }

    #[test]
    fn batches_respect_the_budget() {
        let specs: Vec<String> = (0..3).map(|_| "x".repeat(60_000)).collect();
        let cut = batches(&specs);
        assert_eq!(cut.iter().map(|b| b.len()).collect::<Vec<_>>(), vec![2, 1]);
        assert!(batches(&[]).is_empty());
    }
}
