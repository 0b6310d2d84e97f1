//! Host probes: "does this CLI run?" and "which libc does this host use?".

use super::Ran;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How many times a spawn failing with ETXTBSY is retried. The error is
/// transient: another thread of this process forked while the file was
/// still open for writing, and the fork holds the descriptor until it execs.
const TXTBSY_RETRIES: u32 = 50;

/// Runs `<cli> --version` for at most `timeout`, with stdin, stdout and
/// stderr on /dev/null and without `CLAUDE_RPC_TOKEN` (a token never
/// reaches a child, whatever the build), in its own process group so a
/// stop kills whatever it started, too
/// ([`crate::sys::process::run_bounded`]). The clock starts before the
/// spawn, as the reference's does; a spawn failing with ETXTBSY is
/// retried within it.
pub(super) fn run_version(cli: &Path, timeout: Duration) -> Ran {
    use crate::sys::process::{run_bounded, Bounded};
    let deadline = Instant::now() + timeout;
    for _ in 0..=TXTBSY_RETRIES {
        let mut cmd = Command::new(cli);
        cmd.arg("--version")
            .env_remove("CLAUDE_RPC_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        match run_bounded(&mut cmd, deadline.saturating_duration_since(Instant::now())) {
            Bounded::Exited(status) if status.success() => return Ran::Answered,
            Bounded::Stopped => return Ran::Stopped,
            Bounded::NotStarted(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Bounded::Exited(_) | Bounded::NotStarted(_) | Bounded::Failed => return Ran::Failed,
        }
    }
    Ran::Failed
}

/// How long `ldd --version` may run, and how long its output may still
/// trickle in after it exited (a child of it holding the pipe).
const LDD_LIMIT: Duration = Duration::from_secs(5);
const LDD_DRAIN: Duration = Duration::from_secs(2);
/// More than any `ldd --version` banner; the rest is not read.
const LDD_OUTPUT_CAP: usize = 64 * 1024;

/// The host's C library, `"musl"` or `"glibc"`, decided as the reference
/// decides it since `3ef9370e`: the combined output of `ldd --version`
/// (exit code ignored) naming `musl` in any case → musl; any other output
/// → glibc; no output (no `ldd`, a silent one, or one killed at the 5 s
/// bound) → a `/lib/ld-musl-*.so.*` loader present → musl, else glibc.
pub fn detect_libc() -> &'static str {
    classify(&ldd_version_output()).unwrap_or_else(|| if musl_loader_present() { "musl" } else { "glibc" })
}

/// The verdict `ldd --version`'s output gives, `None` when it says nothing.
pub(super) fn classify(output: &[u8]) -> Option<&'static str> {
    if output.is_empty() {
        return None;
    }
    let lower = output.to_ascii_lowercase();
    Some(if lower.windows(4).any(|w| w == b"musl") {
        "musl"
    } else {
        "glibc"
    })
}

/// Runs `ldd --version` (found on `PATH`) in its own process group with
/// stdout and stderr on one pipe. Empty when it cannot start or has not
/// exited within [`LDD_LIMIT`] (its output is then dropped); otherwise what
/// arrived until the pipe closed or [`LDD_DRAIN`] passed. The group is
/// killed before returning either way, so nothing it started lingers.
fn ldd_version_output() -> Vec<u8> {
    let Ok((read_end, write_end)) = crate::sys::os::pipe_cloexec() else {
        return Vec::new();
    };
    let Ok(write_err) = write_end.try_clone() else {
        return Vec::new();
    };
    let spawned = Command::new("ldd")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::from(write_err))
        .process_group(0)
        .spawn();
    let Ok(mut child) = spawned else {
        return Vec::new();
    };
    // The spawn consumed our copies of the write end: EOF now depends on
    // ldd and whatever it started only.
    // The reader appends to a shared buffer as bytes arrive, so what came
    // before a drain timeout is kept; it signals when the pipe closes.
    let shared = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let sink = shared.clone();
    let reader = std::thread::spawn(move || {
        let mut pipe = std::fs::File::from(read_end);
        let mut buf = [0u8; 4096];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let mut out = sink.lock().unwrap_or_else(|e| e.into_inner());
                    let room = LDD_OUTPUT_CAP.saturating_sub(out.len());
                    out.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send(());
    });
    let pid = child.id() as i32;
    let in_time = crate::sys::process::exited_within(pid, LDD_LIMIT);
    if in_time {
        let _ = rx.recv_timeout(LDD_DRAIN);
    }
    let output = if in_time {
        std::mem::take(&mut *shared.lock().unwrap_or_else(|e| e.into_inner()))
    } else {
        Vec::new()
    };
    // The leader is not reaped yet, so the group id is still its own.
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    // The kill closed every writer the group held; a writer that escaped
    // the group (a daemonized grandchild) keeps the reader until it exits.
    if rx.recv_timeout(LDD_DRAIN).is_ok() {
        let _ = reader.join();
    }
    output
}

/// Whether a musl loader `/lib/ld-musl-*.so.*` exists.
fn musl_loader_present() -> bool {
    let Ok(entries) = std::fs::read_dir("/lib") else {
        return false;
    };
    entries.flatten().any(|e| {
        e.file_name()
            .to_str()
            .and_then(|n| n.strip_prefix("ld-musl-"))
            .is_some_and(|rest| rest.contains(".so."))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_classes() {
        assert_eq!(classify(b""), None);
        assert_eq!(classify(b"musl libc (x86_64)\nVersion 1.2.4\n"), Some("musl"));
        assert_eq!(classify(b"ldd from MUSL"), Some("musl"));
        assert_eq!(classify(b"ldd (GNU libc) 2.36\n"), Some("glibc"));
        assert_eq!(classify(b"\n"), Some("glibc"));
    }

    #[test]
    fn this_host_has_an_answer() {
        let libc = detect_libc();
        assert!(libc == "glibc" || libc == "musl");
    }

    #[test]
    fn timeout_kills_and_fails() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("slow");
        std::fs::write(&p, "#!/bin/sh\nsleep 30\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let start = Instant::now();
        assert_eq!(run_version(&p, Duration::from_millis(300)), Ran::Stopped);
        assert!(start.elapsed() < Duration::from_secs(5));
        std::fs::write(&p, "#!/bin/sh\nexit 3\n").unwrap();
        assert_eq!(run_version(&p, Duration::from_secs(5)), Ran::Failed);
        std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
        assert_eq!(run_version(&p, Duration::from_secs(5)), Ran::Answered);
    }
}
