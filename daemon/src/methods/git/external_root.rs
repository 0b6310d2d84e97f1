//! `git.worktree_create` / `git.worktree_remove` with a `worktreeRoot`
//! (feature `git.worktree.external_root`, reference build `7d193f89`):
//! the worktree goes outside the repository, at exactly
//! `<worktreeRoot>/<directory>/<name>`. The rules and texts follow the
//! record (claustrum `docs/record/git-worktree-create.md`, the steps page
//! and the error table; see docs/UPSTREAM.md):
//!
//! 1. the root and `worktreePath` absolute and `..`-free, then `baseRepo`
//!    likewise, then the two-level shape, then a root of `/`, then a root
//!    that is the repository or inside it (by whole components);
//! 2. the ancestor test: every directory above the root (each resolved,
//!    and the chain above the resolved root) owned by the user or uid 0,
//!    and not writable by others or by a shared group unless sticky; then
//!    the checkout tests B and C: the root leads neither into the
//!    repository's top level or main checkout nor into a linked worktree;
//! 3. the root chain: the deepest existing prefix of the root resolved, no
//!    `.git` entry from `/` down to it (a link loop refuses);
//! 4. the root owned by the user, not writable by others or by a shared
//!    group (a private group, by the flat `/etc/passwd`/`/etc/group`, may
//!    write);
//! 5. remora's own: the root reached only through links and directories
//!    of the user or root ([`crate::base::trustpath::walk`]);
//! 6. the `<directory>` level not a link, not a file, no `.git` in it, and
//!    empty unless it holds the marker; the leaf does not exist.
//!
//! The directories are then made from `/` down the resolved path with
//! `O_NOFOLLOW` at each step (missing ones 0700), the 285-byte marker is
//! written at the `<directory>` level if no entry of that name exists, and
//! the leaf is made 0777 (less the umask).

use super::containment::{self, open_dir, Leaf, Refusal, Verb};
use super::paths::{clean, has_dotdot};
use crate::base::goerr::io_text;
use std::fs;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The marker file's name and bytes (285), as the reference writes them.
pub(super) const MARKER: &str = ".claude-managed-worktrees";
pub(super) const MARKER_BODY: &str = "This directory holds Claude Code session worktrees placed here by the\n\
claude-ssh daemon (the \"Worktree location\" setting). Its subdirectories are\n\
managed checkouts; open the repository itself, not one of them, as a\n\
session folder. Safe to delete once the directory is otherwise empty.\n";

const PARENT_STEP: &str = "failed to create parent directory: ";

fn unsafe_path(text: String) -> Refusal {
    Refusal {
        text,
        code: "unsafe_path",
    }
}

fn mkdir_failed(text: String) -> Refusal {
    Refusal {
        text: format!("{PARENT_STEP}{text}"),
        code: "mkdir_failed",
    }
}

/// Step 1: the lexical rules, before any file is looked at.
pub(super) fn spelling_refusal(verb: Verb, root: &str, repo: &str, worktree: &str) -> Option<Refusal> {
    let v = verb.word();
    if !root.starts_with('/') {
        return Some(unsafe_path(format!(
            "refusing to {v} worktree: {root} is a relative path; choose the worktree location by its absolute path, without \"..\", beneath the filesystem root"
        )));
    }
    if has_dotdot(root) {
        return Some(unsafe_path(format!(
            "refusing to {v} worktree: {root} contains a \"..\" component; choose the worktree location by its absolute path, without \"..\", beneath the filesystem root"
        )));
    }
    if let Some(r) = containment::folder_spelling_refusal(verb, worktree) {
        return Some(r);
    }
    if let Some(r) = containment::folder_spelling_refusal(verb, repo) {
        return Some(r);
    }
    let (root_c, wp) = (clean(root), clean(worktree));
    if parent(&parent(&wp)) != root_c || wp == root_c || parent(&wp) == root_c {
        return Some(unsafe_path(format!(
            "refusing to {v} worktree: {wp} is not <worktree location>/<directory>/<name> beneath {root_c}"
        )));
    }
    if matches!(verb, Verb::Create) && root_c == "/" {
        return Some(unsafe_path(
            "refusing to create worktree: / is a filesystem root; choose the worktree location by its absolute path, without \"..\", beneath the filesystem root".to_string(),
        ));
    }
    let repo_c = clean(repo);
    if root_c == repo_c || root_c.starts_with(&format!("{}/", repo_c.trim_end_matches('/'))) {
        return Some(unsafe_path(format!(
            "refusing to {v} worktree: {root} is the repository {repo} or inside it; a worktree location must be outside the repository"
        )));
    }
    None
}

/// What the checkout tests B and C compare the root with: the repository's
/// git top level and `git worktree list --porcelain -z` (main checkout
/// first; a git before 2.36, without `-z`, lists nothing: no error).
#[derive(Default)]
pub(super) struct Checkouts {
    pub top_level: String,
    /// (path as listed, bare)
    pub listed: Vec<(String, bool)>,
}

impl Checkouts {
    pub(super) async fn of(repo: &str) -> Checkouts {
        use super::gitcli::{run, QUERY_TIMEOUT};
        let top = run(repo, &["rev-parse", "--show-toplevel"], true, QUERY_TIMEOUT).await;
        let list = run(repo, &["worktree", "list", "--porcelain", "-z"], true, QUERY_TIMEOUT).await;
        let mut listed: Vec<(String, bool)> = Vec::new();
        if list.success {
            let text = String::from_utf8_lossy(&list.stdout);
            for line in text.trim_end_matches('\n').split('\0') {
                if let Some(path) = line.strip_prefix("worktree ") {
                    listed.push((path.to_string(), false));
                } else if line == "bare" {
                    if let Some(last) = listed.last_mut() {
                        last.1 = true;
                    }
                }
            }
        }
        Checkouts {
            top_level: top.ok_text().unwrap_or_default(),
            listed,
        }
    }
}

/// The root with the links of its longest existing prefix resolved and
/// the missing rest appended.
fn resolved_of_gone(root: &str) -> PathBuf {
    let mut prefix = PathBuf::from(clean(root));
    let mut rest = Vec::new();
    loop {
        if let Ok(resolved) = fs::canonicalize(&prefix) {
            let mut out = resolved;
            out.extend(rest.iter().rev());
            return out;
        }
        let (Some(name), Some(up)) = (prefix.file_name().map(|n| n.to_os_string()), prefix.parent()) else {
            return PathBuf::from(clean(root));
        };
        rest.push(name);
        prefix = up.to_path_buf();
    }
}

/// Checkout tests B (the root leads into the git top level or the main
/// checkout, by file identity, the outermost match named) and C (the root
/// lies in a linked worktree, compared as listed, by whole components).
pub(super) fn checkout_refusal(verb: Verb, root: &str, repo: &str, c: &Checkouts) -> Option<Refusal> {
    let v = verb.word();
    let id = |p: &Path| fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let mut checkouts = Vec::new();
    if !c.top_level.is_empty() {
        checkouts.extend(id(Path::new(&c.top_level)));
    }
    if let Some((main, false)) = c.listed.first() {
        checkouts.extend(id(Path::new(main)));
    }
    let resolved = resolved_of_gone(root);
    if !checkouts.is_empty() {
        let outer = resolved
            .ancestors()
            .filter(|at| id(at).is_some_and(|i| checkouts.contains(&i)))
            .last();
        if let Some(outer) = outer {
            return Some(unsafe_path(format!(
                "refusing to {v} worktree: {root} leads into the repository {repo} (at {}); a worktree location must be outside the repository",
                outer.display()
            )));
        }
    }
    for (path, _) in c.listed.iter().skip(1) {
        if fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            continue;
        }
        if resolved.starts_with(path) {
            return Some(unsafe_path(format!(
                "refusing to {v} worktree: {root} leads into {path}, a worktree of the repository {repo} (at {path}); a worktree location must be outside the repository's checkouts"
            )));
        }
    }
    None
}

/// Go's `filepath.Dir` of a cleaned absolute path.
fn parent(path: &str) -> String {
    match path.rfind('/') {
        Some(0) | None => "/".to_string(),
        Some(i) => path[..i].to_string(),
    }
}

/// The directories from `/` down to `top`, top first (`/` included).
fn chain(top: &Path) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = top.ancestors().map(Path::to_path_buf).collect();
    all.reverse();
    all
}

fn euid() -> u32 {
    // SAFETY: no arguments, no failure.
    unsafe { libc::geteuid() }
}

fn egid() -> u32 {
    // SAFETY: no arguments, no failure.
    unsafe { libc::getegid() }
}

/// Who beyond the owner may write, by the reference's three spellings.
fn writable_who(group_shared: bool, world: bool) -> Option<&'static str> {
    match (group_shared, world) {
        (true, true) => Some("its group and every user on this host"),
        (false, true) => Some("every user on this host"),
        (true, false) => Some("its group"),
        (false, false) => None,
    }
}

/// Whether `gid` is the private group of the user `uid`, by the flat
/// account files only (the record's four tests and line rules).
pub(super) fn group_is_private(gid: u32, uid: u32, passwd: &str, group: &str) -> bool {
    if gid != egid() {
        return false;
    }
    private_in(gid, uid, passwd, group)
}

fn private_in(gid: u32, uid: u32, passwd: &str, group: &str) -> bool {
    let (mut name, mut found) = (None, 0);
    for line in passwd.split('\n') {
        let f: Vec<&str> = line.split(':').collect();
        if line.starts_with('#') || f.len() < 6 || f.len() > 8 {
            continue;
        }
        let (Ok(line_uid), Ok(line_gid)) = (f[2].parse::<u32>(), f[3].parse::<u32>()) else {
            continue;
        };
        if line_gid != gid {
            continue;
        }
        found += 1;
        if line_uid == uid {
            name = Some(f[0]);
        }
    }
    let Some(name) = name.filter(|_| found == 1) else {
        return false;
    };
    let mut seen = false;
    for line in group.split('\n') {
        let f: Vec<&str> = line.split(':').collect();
        if line.starts_with('#') || f.len() != 4 {
            continue;
        }
        if f[2].parse::<u32>().ok() != Some(gid) {
            continue;
        }
        if f[0] != name {
            return false;
        }
        for m in f[3].split(',') {
            let m = m.trim_matches(' ');
            let m = m.strip_suffix('\r').unwrap_or(m).trim_matches(' ');
            if !m.is_empty() && m != name {
                return false;
            }
        }
        seen = true;
    }
    seen
}

fn shared_group(gid: u32) -> bool {
    let read = |p: &str| fs::read_to_string(p).ok();
    match (read("/etc/passwd"), read("/etc/group")) {
        (Some(passwd), Some(group)) => !group_is_private(gid, euid(), &passwd, &group),
        _ => true,
    }
}

/// One directory above the root: the part of the refusal after "which is ".
fn ancestor_fault(meta: &fs::Metadata) -> Option<String> {
    let uid = meta.uid();
    if uid != 0 && uid != euid() {
        return Some(format!(
            "owned by uid {uid}, neither you nor the system; choose a location you reach through your own directories"
        ));
    }
    let mode = meta.permissions().mode();
    // The sticky bit (S_ISVTX, whose type differs between Linux and macOS).
    if mode & 0o1000 != 0 {
        return None;
    }
    let perm = mode & 0o777;
    let who = writable_who(perm & 0o020 != 0 && shared_group(meta.gid()), perm & 0o002 != 0)?;
    Some(format!(
        "writable by {who} without the sticky bit (mode {perm:04o}), so they could replace what is beneath it; choose a location under directories only you (or the system) control, or remove the extra write permission (chmod go-w)"
    ))
}

/// Step 2 (the ancestor test).
fn ancestor_refusal(root: &str) -> Option<Refusal> {
    let cleaned = PathBuf::from(clean(root));
    let mut above: Vec<&Path> = cleaned.ancestors().skip(1).collect();
    above.reverse();
    let mut judged = std::collections::HashSet::new();
    let mut judge = |top: &Path| -> Option<Option<Refusal>> {
        for d in chain(top) {
            if !judged.insert(d.clone()) {
                continue;
            }
            let Ok(meta) = fs::symlink_metadata(&d) else {
                return Some(None);
            };
            if let Some(fault) = ancestor_fault(&meta) {
                return Some(Some(unsafe_path(format!(
                    "refusing to create worktree: {root} passes through {}, which is {fault}",
                    d.display()
                ))));
            }
        }
        None
    };
    for p in above {
        let resolved = fs::canonicalize(p).ok()?;
        if let Some(end) = judge(&resolved) {
            return end;
        }
    }
    let resolved = fs::canonicalize(&cleaned).ok()?;
    judge(resolved.parent()?).flatten()
}

/// Step 3 (the root chain): the `<directory>` level with the root's links
/// resolved, or the refusal.
fn chain_check(root: &str, worktree: &str) -> Result<PathBuf, Refusal> {
    let dir_name = Path::new(&parent(&clean(worktree)))
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    let mut prefix = PathBuf::from(clean(root));
    let mut missing = Vec::new();
    while fs::symlink_metadata(&prefix).is_err() {
        let Some(up) = prefix.parent().map(Path::to_path_buf) else {
            break;
        };
        missing.insert(0, prefix.file_name().map(|n| n.to_os_string()).unwrap_or_default());
        prefix = up;
    }
    let resolved = match fs::canonicalize(&prefix) {
        Ok(r) => r,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(unsafe_path(format!(
                "refusing to create worktree: {} passes through too many symbolic links (a loop?)",
                clean(root)
            )))
        }
        Err(e) => return Err(mkdir_failed(format!("lstat {}: {}", prefix.display(), io_text(&e)))),
    };
    if !fs::symlink_metadata(&resolved).is_ok_and(|m| m.is_dir()) {
        return Err(mkdir_failed(format!("{}: not a directory", resolved.display())));
    }
    for d in chain(&resolved) {
        match fs::symlink_metadata(d.join(".git")) {
            Ok(_) => {
                return Err(unsafe_path(format!(
                    "refusing to create worktree: {root} is inside a git checkout ({} has a .git entry); a worktree location must be outside every checkout, so that no session working in one can reach it — choose a directory that is not part of any repository",
                    d.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(mkdir_failed(format!(
                    "lstat {}: {}",
                    d.join(".git").display(),
                    io_text(&e)
                )))
            }
        }
    }
    let mut dir = resolved;
    dir.extend(missing);
    dir.push(dir_name);
    Ok(dir)
}

/// Step 4 (the root's owner and write bits), on the root as sent.
fn share_refusal(root: &str) -> Option<Refusal> {
    let meta = fs::metadata(root).ok()?;
    let (uid, me) = (meta.uid(), euid());
    if uid != me {
        return Some(unsafe_path(format!(
            "refusing to create worktree: {root} is owned by uid {uid}, not by you (uid {me}); choose a directory you own, for example under your home directory (directories on network or container storage that report a different owner are refused the same way)"
        )));
    }
    let perm = meta.permissions().mode() & 0o777;
    let who = writable_who(perm & 0o020 != 0 && shared_group(meta.gid()), perm & 0o002 != 0)?;
    Some(unsafe_path(format!(
        "refusing to create worktree: {root} is writable by {who} (mode {perm:04o}); choose a directory only you can write to, or remove the extra write permission (chmod go-w)"
    )))
}

/// Steps 2 to 5 on create; the resolved `<directory>` level when they pass.
pub(super) fn create_refusal(root: &str, repo: &str, worktree: &str, c: &Checkouts) -> Result<PathBuf, Refusal> {
    if let Some(r) = ancestor_refusal(root) {
        return Err(r);
    }
    if let Some(r) = checkout_refusal(Verb::Create, root, repo, c) {
        return Err(r);
    }
    let dir = chain_check(root, worktree)?;
    if let Some(r) = share_refusal(root) {
        return Err(r);
    }
    // remora's own (after every recorded test): the root is reached only
    // through links and directories nobody but the user or root controls,
    // so no other user can repoint it between this check and a later use.
    if let Err(reason) = crate::base::trustpath::walk(Path::new(&clean(root)), euid()) {
        return Err(unsafe_path(format!(
            "refusing to create worktree: {root} cannot be used safely: {reason}"
        )));
    }
    if let Some(text) = dir_symlink_refusal(Verb::Create, worktree) {
        return Err(unsafe_path(text));
    }
    if let Ok(meta) = fs::metadata(&dir) {
        if !meta.is_dir() {
            return Err(mkdir_failed(format!("{} is not a directory", dir.display())));
        }
        match fs::symlink_metadata(dir.join(".git")) {
            Ok(_) => {
                return Err(unsafe_path(format!(
                    "refusing to create worktree: {} is itself a git checkout (it has a .git entry); a worktree location must be outside every checkout",
                    dir.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                let base = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                return Err(mkdir_failed(format!("statat {base}/.git: {}", io_text(&e))));
            }
        }
        if let Ok(entries) = fs::read_dir(&dir) {
            let mut names: Vec<String> = entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            if !names.is_empty() && !names.iter().any(|n| n == MARKER) {
                return Err(unsafe_path(format!(
                    "refusing to create worktree: {} already exists, is not marked as a worktree directory, and holds other files (for example {:?}); the per-repository directory under a worktree location must start out empty — remove it, restore its .claude-managed-worktrees file if you deleted it, or choose another location",
                    containment::resolved_leaf(&parent(&clean(worktree))),
                    names[0]
                )));
            }
        }
    }
    if let Some(r) = containment::exists_refusal(worktree) {
        return Err(r);
    }
    Ok(dir)
}

/// The `<directory>` level may not be a symbolic link (create and remove).
pub(super) fn dir_symlink_refusal(verb: Verb, worktree: &str) -> Option<String> {
    let dir = parent(&clean(worktree));
    fs::symlink_metadata(&dir).ok().filter(|m| m.file_type().is_symlink())?;
    Some(format!(
        "refusing to {} worktree: {dir} is a symbolic link; the directory under the worktree location must be a real directory",
        verb.word()
    ))
}

/// Remove only: a root that does not exist or does not resolve.
pub(super) fn missing_root_refusal(root: &str) -> Option<String> {
    let reason = match fs::symlink_metadata(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => format!("{root} does not exist"),
        Err(_) => return None,
        Ok(_) => match fs::canonicalize(root) {
            Ok(_) => return None,
            Err(e) => format!("lstat {root}: {}", io_text(&e)),
        },
    };
    Some(format!(
        "failed to remove worktree: the worktree location {root} is not reachable ({reason}); nothing was removed — retry once it is available, or remove the worktree by hand"
    ))
}

/// Makes the directories down to `dir` (the resolved `<directory>` level,
/// missing levels 0700), the marker, and the leaf `name` (0777). Every
/// step is `openat(O_NOFOLLOW)` from the one above, from `/`.
pub(super) fn make_leaf(dir: &Path, name: &str) -> Result<Leaf, String> {
    let mut fd = open_dir(libc::AT_FDCWD, "/", true).map_err(|e| format!("open /: {}", io_text(&e)))?;
    let mut shown = PathBuf::from("/");
    for component in dir.components().skip(1) {
        let c = component.as_os_str().to_string_lossy().into_owned();
        shown.push(&c);
        fd = match open_dir(fd.as_raw_fd(), &c, false) {
            Ok(next) => next,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                let cname = containment::cstring(&c).map_err(|e| io_text(&e))?;
                // SAFETY: a valid directory descriptor and a C string.
                if unsafe { libc::mkdirat(fd.as_raw_fd(), cname.as_ptr(), 0o700) } != 0 {
                    let e = std::io::Error::last_os_error();
                    return Err(format!("mkdir {}: {}", shown.display(), io_text(&e)));
                }
                open_dir(fd.as_raw_fd(), &c, false)
                    .map_err(|e| format!("mkdir {}: {}", shown.display(), io_text(&e)))?
            }
            Err(e) => return Err(format!("mkdir {}: {}", shown.display(), io_text(&e))),
        };
    }
    write_marker(&fd).map_err(|e| {
        format!(
            "cannot mark {} as a worktree location: openat {MARKER}: {}",
            dir.display(),
            io_text(&e)
        )
    })?;
    containment::make_leaf_in(fd, name, &shown.join(name).to_string_lossy())
}

/// Creates the marker in `dir` unless an entry of that name exists (any
/// kind: it keeps its content and mode). A failed write after the open is
/// not an error (not measured; the reference goes on).
fn write_marker(dir: &OwnedFd) -> std::io::Result<()> {
    let c = containment::cstring(MARKER)?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid directory descriptor and a C string.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, 0o644 as libc::c_uint) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EEXIST) {
            Ok(())
        } else {
            Err(e)
        };
    }
    // SAFETY: a fresh descriptor owned from here on.
    let mut file = unsafe { fs::File::from_raw_fd(fd) };
    let _ = file.write_all(MARKER_BODY.as_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_has_285_bytes() {
        assert_eq!(MARKER_BODY.len(), 285);
    }

    #[test]
    fn the_private_group_rules() {
        let passwd = "# c\nme:x:1000:1000::/home/me:/bin/sh\nother:x:1001:1001::/h:/bin/sh\n";
        assert!(private_in(1000, 1000, passwd, "me:x:1000:\n"));
        assert!(private_in(1000, 1000, passwd, "me:x:1000: me\r,\n"));
        assert!(!private_in(1000, 1000, passwd, "me:x:1000:other\n"));
        assert!(!private_in(1000, 1000, passwd, "staff:x:1000:\n"));
        assert!(!private_in(1000, 1000, passwd, ""));
        let two = "me:x:1000:1000::/h:/s\nyou:x:1002:1000::/h:/s\n";
        assert!(!private_in(1000, 1000, two, "me:x:1000:\n"));
    }

    #[test]
    fn the_lexical_refusals() {
        let r = |root: &str, wp: &str| spelling_refusal(Verb::Create, root, "/r/repo", wp).map(|r| r.text);
        assert_eq!(
            r("/w", "/w/a"),
            Some("refusing to create worktree: /w/a is not <worktree location>/<directory>/<name> beneath /w".into())
        );
        assert_eq!(r("/w", "/w/a/b"), None);
        assert_eq!(r("/w/", "/w//a/b/"), None);
        assert!(r("/", "/a/b").unwrap().contains("/ is a filesystem root"));
        assert!(r("w", "/w/a/b")
            .unwrap()
            .contains("w is a relative path; choose the worktree location"));
        assert!(r("/r/repo/x", "/r/repo/x/a/b")
            .unwrap()
            .contains("is the repository /r/repo or inside it"));
        assert_eq!(r("/r/repox", "/r/repox/a/b"), None);
    }
}
