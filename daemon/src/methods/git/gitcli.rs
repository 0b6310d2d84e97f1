//! Running the `git` CLI for the `git.*` methods, and parsing what it says.
//!
//! Every invocation is `git --no-pager …` with stdin closed, in a process
//! group of its own, with a timeout (the whole group — git's helpers and
//! hooks too — is killed when it expires, or when the request is dropped
//! mid-run), `LC_ALL=C` so messages are not
//! translated, `GIT_TERMINAL_PROMPT=0` so a credential prompt can never hang
//! the daemon, and, for read-only queries, `GIT_OPTIONAL_LOCKS=0` so a status
//! never takes the index lock a user's own git might need. Repository
//! selectors inherited from the daemon's environment (`GIT_DIR`, …) are
//! removed: the repo is always the directory the request names.
//!
//! git's exit is observed without reaping it (`waitid(WNOWAIT)`, as the
//! supervisor and the login shell do): a group is killed only while git,
//! running or a zombie, still holds its id, and git is reaped only after
//! that. A helper left holding the pipes after git exited keeps the
//! output open, so the timeout reaches it too, on every kernel.
//!
//! Output is parsed from plumbing-style formats only (`--porcelain`,
//! `--format`, `symbolic-ref`, `rev-parse`), never from human text.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// Time limit for read-only queries.
pub(super) const QUERY_TIMEOUT: Duration = Duration::from_secs(30);
/// Time limit for worktree creation/removal (a checkout can be large).
pub(super) const MUTATE_TIMEOUT: Duration = Duration::from_secs(600);

/// Variables that would point git at a repository other than `dir`.
const SCRUBBED_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
];

/// What one git invocation produced.
#[derive(Debug, Default)]
pub(super) struct GitOutput {
    /// Exited with status 0.
    pub success: bool,
    /// `exit status N` (Go's `ExitError` text), or why git did not run.
    pub status_text: String,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The time limit expired and git was killed.
    pub timed_out: bool,
}

impl GitOutput {
    /// stdout with surrounding white space removed, as Go's
    /// `strings.TrimSpace(string(out))`.
    pub(super) fn text(&self) -> String {
        crate::base::gojson::go_lossy(self.stdout.trim_ascii())
    }

    /// stdout when successful.
    pub(super) fn ok_text(&self) -> Option<String> {
        self.success.then(|| self.text())
    }
}

/// Runs `git <args>` in `dir` (the daemon's cwd when `dir` is empty, like
/// Go's `cmd.Dir = ""`). A failure to start (missing `dir`, no git) or a
/// timeout is an unsuccessful output, never a panic.
pub(super) async fn run(dir: &str, args: &[&str], read_only: bool, timeout: Duration) -> GitOutput {
    run_with_input(dir, args, read_only, timeout, None).await
}

/// [`run`], with `input` written to git's stdin (then closed) when given;
/// the write counts against `timeout` too.
pub(super) async fn run_with_input(
    dir: &str,
    args: &[&str],
    read_only: bool,
    timeout: Duration,
    input: Option<Vec<u8>>,
) -> GitOutput {
    run_program(OsStr::new("git"), dir, args, read_only, timeout, input).await
}

/// [`run_with_input`] with `program` standing for git (tests hand in a
/// stand-in script).
async fn run_program(
    program: &OsStr,
    dir: &str,
    args: &[&str],
    read_only: bool,
    timeout: Duration,
    input: Option<Vec<u8>>,
) -> GitOutput {
    let mut cmd = Command::new(program);
    cmd.arg("--no-pager")
        .args(args)
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own group: git runs helpers and hooks as children (`worktree
        // add -b` runs `git branch`, which runs the reference-transaction
        // hook), and a timeout must take them all down, not orphan them.
        .process_group(0)
        .env("LC_ALL", "C")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat");
    if read_only {
        cmd.env("GIT_OPTIONAL_LOCKS", "0");
    }
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    if !dir.is_empty() {
        cmd.current_dir(Path::new(dir));
    }
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            return GitOutput {
                status_text: e.to_string(),
                ..GitOutput::default()
            }
        }
    };
    let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) else {
        return GitOutput {
            status_text: "git has no pid".to_string(),
            ..GitOutput::default()
        };
    };
    let (stdout, stderr, stdin) = (child.stdout.take(), child.stderr.take(), child.stdin.take());
    let mut git = Unreaped {
        child: Some(child),
        group: pid,
    };
    let (Some(stdout), Some(stderr)) = (stdout, stderr) else {
        return GitOutput {
            status_text: "git started without its pipes".to_string(),
            ..GitOutput::default()
        };
    };
    // Written beside the wait, so a git that answers before reading all of
    // its input (or never reads it) cannot block the daemon; a git that
    // exits early ends the write with a broken pipe, which is ignored.
    let writer = match (input, stdin) {
        (Some(bytes), Some(mut stdin)) => Some(tokio::spawn(async move {
            let _ = stdin.write_all(&bytes).await;
        })),
        _ => None,
    };
    // git's exit is observed, not reaped: until the reap below its pid
    // holds its group's id, so the timeout's kill can reach only git's
    // own group, whatever git did meanwhile.
    let finished = tokio::time::timeout(timeout, async {
        tokio::join!(read_all(stdout), read_all(stderr), crate::sys::process::wait_exit(pid))
    })
    .await;
    if let Some(writer) = writer {
        writer.abort();
    }
    let (stdout, stderr, exited) = match finished {
        Ok(done) => done,
        // `git` drops unreaped: its whole group is killed, git's helpers
        // and hooks too, even those left holding the pipes after git
        // exited.
        Err(_) => {
            return GitOutput {
                status_text: "signal: killed".to_string(),
                timed_out: true,
                ..GitOutput::default()
            }
        }
    };
    if let Err(e) = exited {
        return GitOutput {
            status_text: e.to_string(),
            ..GitOutput::default()
        };
    }
    match git.reap().await {
        Ok(status) => GitOutput {
            success: status.success(),
            status_text: match status.code() {
                Some(code) => format!("exit status {code}"),
                None => "signal: killed".to_string(),
            },
            stdout,
            stderr,
            timed_out: false,
        },
        Err(e) => GitOutput {
            status_text: e.to_string(),
            ..GitOutput::default()
        },
    }
}

/// All of a pipe (up to its EOF); what was read when it fails.
async fn read_all(mut pipe: impl tokio::io::AsyncRead + Unpin) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = pipe.read_to_end(&mut out).await;
    out
}

/// git's process until it is reaped. Dropped unreaped (a timeout, an
/// error, or the caller's future dropped mid-run), it kills git's whole
/// group first, while git's pid, running or a zombie nobody reaped, still
/// holds the group's id; the child then goes to tokio, which kills git
/// itself (`kill_on_drop`) and reaps it.
struct Unreaped {
    child: Option<tokio::process::Child>,
    group: i32,
}

impl Unreaped {
    /// Reaps git, whose exit was observed: from here on nothing is sent
    /// to its group (the id may be another's by then).
    async fn reap(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self.child.take() {
            Some(mut child) => child.wait().await,
            None => Err(std::io::Error::other("git was reaped already")),
        }
    }
}

impl Drop for Unreaped {
    fn drop(&mut self) {
        if self.child.is_some() {
            crate::sys::process::signal_group(self.group, libc::SIGKILL);
        }
    }
}

/// Whether `dir` is inside a git work tree (`rev-parse
/// --is-inside-work-tree` prints `true`; a bare repo or a `.git` directory
/// prints `false`).
pub(super) async fn is_work_tree(dir: &str) -> bool {
    let out = run(dir, &["rev-parse", "--is-inside-work-tree"], true, QUERY_TIMEOUT).await;
    out.success && out.text() == "true"
}

/// `owner/repo` from a remote URL, or `""`.
///
/// Accepted forms: scp-like `[user@]host:owner/repo`, and URLs with a
/// scheme (`https://`, `ssh://`, `git://`, …) with optional userinfo and
/// port. One trailing `/` and then one trailing `.git` are stripped; the
/// path after the host must then be exactly two non-empty segments.
pub(super) fn repo_slug(url: &str) -> String {
    let url = url.trim();
    let path = if let Some(i) = url.find("://") {
        let rest = &url[i + 3..];
        match rest.find('/') {
            Some(j) => &rest[j..],
            None => return String::new(),
        }
    } else {
        // scp-like: a colon before any slash; otherwise a local path,
        // which has no host and so no slug.
        match (url.find(':'), url.find('/')) {
            (Some(c), Some(s)) if c < s => &url[c + 1..],
            (Some(c), None) => &url[c + 1..],
            _ => return String::new(),
        }
    };
    let path = path.trim_start_matches('/');
    let path = path.strip_suffix('/').unwrap_or(path);
    let path = path.strip_suffix(".git").unwrap_or(path);
    let mut segments = path.split('/');
    match (segments.next(), segments.next(), segments.next()) {
        (Some(owner), Some(repo), None) if !owner.is_empty() && !repo.is_empty() => format!("{owner}/{repo}"),
        _ => String::new(),
    }
}

/// Porcelain v1 lines from `git status --porcelain` output, verbatim
/// minus their line endings (seed 000's reference trimmed the whole
/// output first, which took the leading space of an unstaged first entry
/// such as ` M a.txt`).
pub(super) fn porcelain_lines(stdout: &[u8]) -> Vec<String> {
    stdout
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(crate::base::gojson::go_lossy)
        .collect()
}

/// The empty tree of a repository's object format, for `--attr-source`.
pub(super) fn empty_tree(object_format: &str) -> &'static str {
    match object_format {
        "sha256" => "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
        _ => "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    }
}

/// Whether the `git` on PATH has `--attr-source` (git 2.40+). Asked once;
/// a git that cannot be run or parsed counts as too old.
pub(super) async fn supports_attr_source() -> bool {
    static ANSWER: tokio::sync::OnceCell<bool> = tokio::sync::OnceCell::const_new();
    *ANSWER
        .get_or_init(|| async {
            let out = run("", &["version"], true, QUERY_TIMEOUT).await;
            out.success && version_at_least(&out.text(), (2, 40))
        })
        .await
}

/// Whether `git version X.Y…` is at least `want`.
fn version_at_least(banner: &str, want: (u32, u32)) -> bool {
    let Some(version) = banner.strip_prefix("git version ") else {
        return false;
    };
    let mut parts = version.split(|c: char| !c.is_ascii_digit());
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
    match (major, minor) {
        (Some(major), Some(minor)) => (major, minor) >= want,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set for the helper below: where the fake git writes its pid.
    #[cfg(target_os = "linux")]
    const GIT_PID_FILE: &str = "REMORA_TEST_GIT_PID";

    /// Issue 44 (item 8): git's timeout killed `-pgid` after git itself
    /// could have been reaped (tokio's `wait_with_output` reaped git as
    /// soon as it exited, while a helper that left its group still held
    /// the pipes), so a group that took git's number by then got the
    /// SIGKILL. Planted for real in a pid namespace: git exits at once
    /// leaving a `setsid` helper on its pipes; as soon as git is reaped a
    /// new group leader gets its pid. git is now reaped only after its
    /// group's kill, so the planted group must live.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_timed_out_git_never_signals_the_group_that_took_its_pid() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join("git");
        std::fs::write(
            &git,
            format!("#!/bin/sh\necho $$ >\"${GIT_PID_FILE}\"\nsetsid sleep 60 &\nexit 0\n"),
        )
        .unwrap();
        std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}:{}", dir.path().display(), std::env::var("PATH").unwrap_or_default());
        let mark = dir.path().join("git.pid");
        crate::sys::process::pidns::run(
            "methods::git::gitcli::tests::git_reaped_before_its_timeout_helper",
            &[("PATH", path.as_ref()), (GIT_PID_FILE, mark.as_os_str())],
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    #[ignore = "runs only inside the pid namespace its parent test makes"]
    fn git_reaped_before_its_timeout_helper() {
        use crate::sys::process::pidns;
        if !pidns::entered() {
            return;
        }
        let mark = std::path::PathBuf::from(std::env::var_os(GIT_PID_FILE).unwrap());
        let planter = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let pause = || {
                assert!(
                    std::time::Instant::now() < deadline,
                    "git never ran, or was never reaped"
                );
                std::thread::sleep(Duration::from_millis(2));
            };
            // Polled: nothing signals the moment another task reaps git.
            let pid = loop {
                match std::fs::read_to_string(&mark).map(|t| t.trim().parse::<i32>()) {
                    Ok(Ok(pid)) => break pid,
                    _ => pause(),
                }
            };
            while std::path::Path::new(&format!("/proc/{pid}")).exists() {
                pause();
            }
            pidns::plant(pid, || true)
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let out = runtime.block_on(run_with_input("", &["status"], true, Duration::from_secs(3), None));
        assert!(out.timed_out, "{out:?}");
        let mut planted = planter.join().unwrap();
        assert!(
            !pidns::got_sigkill(&mut planted),
            "git's timeout kill reached the group that took its pid"
        );
        planted.kill().unwrap();
        planted.wait().unwrap();
    }

    /// Issue 44 (item 8): git reaped the moment it exited (tokio's
    /// `wait_with_output`), so a timeout that found a helper of it still
    /// holding the pipes had only the bare group id left, and where no
    /// pidfd names a group (before Linux 6.9, macOS) it sent nothing: the
    /// helper lived on. Now git's exit is observed without reaping it and
    /// the group is killed first. A stand-in git leaves a sleeper in its
    /// group on its pipes, and exits at once or keeps running; at the
    /// timeout the sleeper must get the kill, on the path of a kernel
    /// without `PIDFD_SIGNAL_PROCESS_GROUP`.
    #[test]
    fn a_stopped_git_takes_the_helpers_in_its_group_with_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join("git");
        let mark = dir.path().join("helper.pid");
        for (how, end) in [("exits at once", "exit 0"), ("still runs", "exec sleep 60")] {
            let _ = std::fs::remove_file(&mark);
            // Written to a fresh name and renamed: never read half-written.
            let script = format!(
                "#!/bin/sh\nsleep 60 &\necho $! >'{0}.new'\nmv '{0}.new' '{0}'\n{end}\n",
                mark.display()
            );
            std::fs::write(&git, script).unwrap();
            std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
            let watched = mark.clone();
            // The helper is held while it is known alive: it sleeps 60 s
            // and the timeout is 2 s away.
            let holder = std::thread::spawn(move || {
                let deadline = std::time::Instant::now() + Duration::from_secs(20);
                loop {
                    if let Ok(Ok(pid)) = std::fs::read_to_string(&watched).map(|t| t.trim().parse::<i32>()) {
                        return crate::sys::process::PidRef::open(pid).expect("a hold on the helper");
                    }
                    assert!(std::time::Instant::now() < deadline, "the stand-in git never ran");
                    std::thread::sleep(Duration::from_millis(2));
                }
            });
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let out = crate::sys::process::without_group_pidfd(|| {
                runtime.block_on(run_program(
                    git.as_os_str(),
                    "",
                    &["status"],
                    true,
                    Duration::from_secs(2),
                    None,
                ))
            });
            let helper = holder.join().unwrap();
            assert!(out.timed_out, "{how}: {out:?}");
            // Polled: the helper is not this test's child to wait for.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !helper.exited() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let ended = helper.exited();
            let _ = helper.signal(libc::SIGKILL);
            assert!(ended, "git {how}: the helper in its group outlived git's timeout");
        }
    }

    #[test]
    fn slugs() {
        for (url, want) in [
            ("git@github.com:owner/repo.git", "owner/repo"),
            ("git@github.com:owner/repo", "owner/repo"),
            ("github.com:Owner-1/Re_po.js", "Owner-1/Re_po.js"),
            ("https://github.com/owner/repo.git", "owner/repo"),
            ("https://github.com/owner/repo", "owner/repo"),
            ("https://github.com/owner/repo/", "owner/repo"),
            ("https://github.com/owner/repo.git/", "owner/repo"),
            ("https://user:pw@github.com/owner/repo", "owner/repo"),
            ("ssh://git@github.com:22/owner/repo.git", "owner/repo"),
            ("ssh://git@host/owner/repo.git.git", "owner/repo.git"),
            ("git://host/owner/repo", "owner/repo"),
            ("https://gitlab.com/group/sub/proj.git", ""),
            ("https://github.com/owner", ""),
            ("https://github.com", ""),
            ("/srv/git/owner/repo.git", ""),
            ("owner/repo", ""),
            ("", ""),
            ("https://github.com//repo", ""),
        ] {
            assert_eq!(repo_slug(url), want, "{url}");
        }
    }

    #[test]
    fn porcelain() {
        assert_eq!(porcelain_lines(b""), Vec::<String>::new());
        assert_eq!(porcelain_lines(b" M a.txt\n?? new\n"), vec![" M a.txt", "?? new"]);
        assert_eq!(porcelain_lines(b"?? x\n M b\n"), vec!["?? x", " M b"]);
        assert_eq!(porcelain_lines(b"?? \"a b \"\n"), vec!["?? \"a b \""]);
    }

    #[test]
    fn git_versions() {
        assert!(version_at_least("git version 2.47.3", (2, 40)));
        assert!(version_at_least("git version 2.40.0.windows.1", (2, 40)));
        assert!(version_at_least("git version 3.0", (2, 40)));
        assert!(!version_at_least("git version 2.39.5 (Apple Git-154)", (2, 40)));
        assert!(!version_at_least("git version 1.9", (2, 40)));
        assert!(!version_at_least("garbage", (2, 40)));
    }
}
