//! The `.worktreeinclude` pass of seeding a new worktree (build f6010b97,
//! `docs/record/git-worktree-create.md` "Worktree population"): the
//! repository's top-level `.worktreeinclude`, in `.gitignore` syntax, is an
//! include filter over the git-ignored untracked files. A file is copied
//! when the manifest names it and git's standard rules ignore it.
//!
//! The manifest must be a regular file (a link or a directory: nothing,
//! no git). git reads a private temporary copy of its bytes (0600, made
//! with `O_EXCL|O_NOFOLLOW`, removed after). `git version` ≥ 2.32 gets the
//! directory scan, anything else the full scan:
//! - full scan: `ls-files --others --ignored --exclude-from=<copy> -z --
//!   ':(exclude).claude/worktrees'`, then `check-ignore` keeps what the
//!   standard rules ignore; runtime-state paths and nested repositories
//!   (a trailing `/`) never reach it; a failed call copies nothing;
//! - directory scan: `ls-files --others --ignored --exclude-standard
//!   --directory -z` lists the candidates; its files are candidates as
//!   they are, its directories only when [`include_rules`] opens them (the
//!   root `.claude` stands for its children, `worktrees` left out); files
//!   and directories go to `ls-files --others --ignored
//!   --exclude-from=<copy> -z -- <paths>` in separate batches of at most
//!   131 072 argument bytes (each argument its length + 3); what the
//!   directory batches print goes through `check-ignore` unless a file
//!   batch printed it too, it ends in `/`, or it is runtime state. Listed
//!   files totalling more than 1 MiB (length + 3 each) take the full scan.
//!
//! `check-ignore` gets its paths as arguments, batched like the rest, and
//! answers one per line (a path git would quote is asked on its own); the
//! reference feeds them on stdin; the answer is the same. Copies go
//! through [`seed::copy_into`]: links skipped, nothing followed, new files
//! 0666 less the umask and never wider than their source. Nothing here
//! fails the request.

use super::include_rules;
use super::seed;
use crate::base::safedir;
use crate::methods::git::gitcli::{self, GitOutput, QUERY_TIMEOUT};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most of a manifest read (remora's bound; the reference states none).
const MANIFEST_CAP: u64 = 4 << 20;
/// Bytes of arguments one batched call may carry.
const CALL_BUDGET: usize = 131_072;
/// Listed ignored files past which the full scan runs instead.
const LISTING_CAP: usize = 1 << 20;

/// Copies the files the manifest of the repository at `top` selects into
/// the worktree open at `dest`.
pub(super) async fn manifest_pass(top: &str, dest: &OwnedFd) {
    let Some(manifest) = read_manifest(top) else {
        return;
    };
    let Some(copy) = TempCopy::new(&manifest) else {
        return;
    };
    let exclude_from = format!("--exclude-from={}", copy.0.display());
    let paths = if directory_scan_supported().await {
        directory_scan(top, &manifest, &exclude_from).await
    } else {
        full_scan(top, &exclude_from).await
    };
    drop(copy);
    if !paths.is_empty() {
        seed::copy_into(top, dest, paths).await;
    }
}

/// The manifest's bytes, when it is a regular file.
fn read_manifest(top: &str) -> Option<Vec<u8>> {
    let dir = super::containment::open_dir(libc::AT_FDCWD, top, true).ok()?;
    let file = safedir::open_file_at(&dir, b".worktreeinclude", libc::O_RDONLY, 0).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MANIFEST_CAP).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// A private temporary copy of the manifest, removed when dropped.
struct TempCopy(PathBuf);

/// Names tried before a copy gives up (each is new and unguessable, so
/// only a name taken by chance or by our own leftovers costs a try).
const TEMP_NAME_TRIES: usize = 8;

impl TempCopy {
    fn new(bytes: &[u8]) -> Option<TempCopy> {
        Self::new_in(&std::env::temp_dir(), bytes)
    }

    /// The copy in `dir` (shared, like `/tmp`): created exclusively, 0600,
    /// never through a link. Its name carries 64 bits another user cannot
    /// predict, so nobody can take it first and keep the seeding from
    /// running (a counter after the pid could be planted in advance).
    fn new_in(dir: &std::path::Path, bytes: &[u8]) -> Option<TempCopy> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        for _ in 0..TEMP_NAME_TRIES {
            // `RandomState` keys come from the OS's random source once
            // per process; hashing a fresh counter under them gives a
            // value only this process can know.
            let mut h = std::hash::BuildHasher::build_hasher(&std::collections::hash_map::RandomState::new());
            std::hash::Hasher::write_u64(&mut h, NEXT.fetch_add(1, Ordering::Relaxed));
            let name = format!(
                "remora-worktreeinclude-{}-{:016x}",
                std::process::id(),
                std::hash::Hasher::finish(&h)
            );
            let path = dir.join(name);
            let opened = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path);
            match opened {
                Ok(mut file) => {
                    let copy = TempCopy(path);
                    file.write_all(bytes).ok()?;
                    return Some(copy);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(_) => return None,
            }
        }
        None
    }
}

impl Drop for TempCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Whether `git version` (run as the daemon runs, no `-C`) says 2.32 or
/// later; a failed call or text that does not parse says no.
async fn directory_scan_supported() -> bool {
    let out = gitcli::run("", &["version"], true, QUERY_TIMEOUT).await;
    out.success && version_at_least(&out.stdout, (2, 32))
}

fn version_at_least(text: &[u8], want: (u64, u64)) -> bool {
    let marker = b"git version ";
    let Some(at) = text.windows(marker.len()).position(|w| w == marker) else {
        return false;
    };
    let rest = &text[at + marker.len()..];
    let number = |s: &[u8]| -> Option<(u64, usize)> {
        let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        // Too large for a number counts as very large.
        let value = std::str::from_utf8(&s[..digits]).ok()?.parse().unwrap_or(u64::MAX);
        Some((value, digits))
    };
    let Some((major, used)) = number(rest) else {
        return false;
    };
    let minor = match rest.get(used) {
        Some(b'.') => number(&rest[used + 1..]).map_or(0, |(m, _)| m),
        _ => 0,
    };
    (major, minor) >= want
}

fn nul_split(out: &GitOutput) -> Vec<String> {
    out.stdout
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .filter_map(|p| std::str::from_utf8(p).ok().map(str::to_string))
        .collect()
}

/// Paths that are neither runtime state nor a nested repository.
fn copyable(paths: Vec<String>) -> Vec<String> {
    paths
        .into_iter()
        .filter(|p| !p.ends_with('/') && !seed::is_runtime_state(p))
        .collect()
}

async fn full_scan(top: &str, exclude_from: &str) -> Vec<String> {
    let args = [
        "ls-files",
        "--others",
        "--ignored",
        exclude_from,
        "-z",
        "--",
        ":(exclude).claude/worktrees",
    ];
    let out = gitcli::run(top, &args, true, QUERY_TIMEOUT).await;
    if !out.success {
        return Vec::new();
    }
    let paths = copyable(nul_split(&out));
    if paths.is_empty() {
        return paths;
    }
    check_ignored(top, &paths).await.unwrap_or_default()
}

async fn directory_scan(top: &str, manifest: &[u8], exclude_from: &str) -> Vec<String> {
    let args = [
        "ls-files",
        "--others",
        "--ignored",
        "--exclude-standard",
        "--directory",
        "-z",
    ];
    let listing = gitcli::run(top, &args, true, QUERY_TIMEOUT).await;
    if !listing.success {
        return Vec::new();
    }
    let (dirs, files): (Vec<String>, Vec<String>) = nul_split(&listing).into_iter().partition(|p| p.ends_with('/'));
    if files.iter().map(|f| f.len() + 3).sum::<usize>() > LISTING_CAP {
        return full_scan(top, exclude_from).await;
    }
    let dirs: Vec<String> = dirs.into_iter().map(|d| d.trim_end_matches('/').to_string()).collect();
    let mut dir_specs = Vec::new();
    for (dir, open) in dirs.iter().zip(include_rules::opened(manifest, &dirs)) {
        if !open {
            continue;
        }
        if dir.eq_ignore_ascii_case(".claude") {
            dir_specs.extend(seed::claude_children(top));
        } else {
            dir_specs.push(dir.clone());
        }
    }
    let fixed = ["ls-files", "--others", "--ignored", exclude_from, "-z", "--"];
    let from_files = batched_listing(top, &fixed, &files).await;
    let from_dirs = batched_listing(top, &fixed, &dir_specs).await;
    // Sets, not lists: a planted manifest can make both listings long.
    let listed: std::collections::HashSet<&String> = from_files.iter().collect();
    let via_check: Vec<String> = copyable(from_dirs)
        .into_iter()
        .filter(|p| !listed.contains(p))
        .collect();
    drop(listed);
    let mut paths = from_files;
    if !via_check.is_empty() {
        paths.extend(check_ignored(top, &via_check).await.unwrap_or_default());
    }
    paths
}

/// `git <fixed…> <paths…>` in batches; what the successful batches print.
async fn batched_listing(top: &str, fixed: &[&str], paths: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for batch in batches(fixed, paths) {
        let mut args: Vec<&str> = fixed.to_vec();
        args.extend(batch.iter().map(String::as_str));
        let run = gitcli::run(top, &args, true, QUERY_TIMEOUT).await;
        if run.success {
            out.extend(nul_split(&run));
        }
    }
    out
}

/// The paths git's standard rules ignore (`check-ignore`, which exits 1
/// when none is); `None` when a call fails. Paths git would C-quote in
/// its answer are asked one at a time (`-q`, the exit status answers).
async fn check_ignored(top: &str, paths: &[String]) -> Option<Vec<String>> {
    let (quoted, plain): (Vec<String>, Vec<String>) = paths.iter().cloned().partition(|p| needs_quoting(p));
    let fixed = ["-c", "core.quotePath=false", "check-ignore", "--"];
    let mut kept = Vec::new();
    for batch in batches(&fixed, &plain) {
        let mut args: Vec<&str> = fixed.to_vec();
        args.extend(batch.iter().map(String::as_str));
        let run = gitcli::run(top, &args, true, QUERY_TIMEOUT).await;
        if !run.success && run.status_text != "exit status 1" {
            return None;
        }
        let printed: std::collections::HashSet<&[u8]> = run.stdout.split(|&b| b == b'\n').collect();
        kept.extend(batch.iter().filter(|p| printed.contains(&p.as_bytes())).cloned());
    }
    for path in quoted {
        let run = gitcli::run(top, &["check-ignore", "-q", "--", &path], true, QUERY_TIMEOUT).await;
        match run.status_text.as_str() {
            _ if run.success => kept.push(path),
            "exit status 1" => {}
            _ => return None,
        }
    }
    Some(kept)
}

/// Whether git C-quotes `path` even with `core.quotePath=false`.
fn needs_quoting(path: &str) -> bool {
    path.bytes().any(|b| b < 0x20 || b == 0x7f || b == b'"' || b == b'\\')
}

/// `paths` cut so that each call's arguments cost at most
/// [`CALL_BUDGET`] bytes, each argument its length + 3.
fn batches<'a>(fixed: &[&str], paths: &'a [String]) -> Vec<&'a [String]> {
    let base: usize = fixed.iter().map(|a| a.len() + 3).sum();
    let mut out = Vec::new();
    let (mut start, mut used) = (0, base);
    for (i, path) in paths.iter().enumerate() {
        let cost = path.len() + 3;
        if used + cost > CALL_BUDGET && i > start {
            out.push(&paths[start..i]);
            start = i;
            used = base;
        }
        used += cost;
    }
    if start < paths.len() {
        out.push(&paths[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_rule() {
        assert!(version_at_least(b"git version 2.32.0\n", (2, 32)));
        assert!(version_at_least(b"git version 2.32.0.windows.1", (2, 32)));
        assert!(version_at_least(b"noise git version 3.0", (2, 32)));
        assert!(version_at_least(b"git version 99999999999999999999999.1", (2, 32)));
        assert!(!version_at_least(b"git version 2.31.9", (2, 32)));
        assert!(!version_at_least(b"git version x2.40", (2, 32)));
        assert!(!version_at_least(b"version 2.40", (2, 32)));
    }

    #[test]
    fn a_manifest_copy_cannot_be_blocked_by_names_planted_in_advance() {
        // Another user fills the shared directory with every name a
        // counter after our pid would give (the old naming), as links.
        let shared = tempfile::tempdir().unwrap();
        let target = shared.path().join("target");
        for n in 0..2_000 {
            let planted = shared
                .path()
                .join(format!("remora-worktreeinclude-{}-{n}", std::process::id()));
            std::os::unix::fs::symlink(&target, planted).unwrap();
        }
        let a = TempCopy::new_in(shared.path(), b"*.env\n").expect("a copy despite the planted names");
        let b = TempCopy::new_in(shared.path(), b"x").expect("a second copy");
        assert_ne!(a.0, b.0);
        assert_eq!(std::fs::read(&a.0).unwrap(), b"*.env\n");
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::symlink_metadata(&a.0).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert!(!target.exists(), "nothing was written through a link");
        let path = a.0.clone();
        drop(a);
        assert!(!path.exists(), "removed when dropped");
    }

    #[test]
    fn batches_count_the_fixed_arguments() {
        let paths: Vec<String> = (0..3).map(|_| "x".repeat(60_000)).collect();
        let cut = batches(&["ls-files"], &paths);
        assert_eq!(cut.iter().map(|b| b.len()).collect::<Vec<_>>(), vec![2, 1]);
        assert!(batches(&["a"], &[]).is_empty());
    }
}
