use super::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Instant;

/// An executable `#!/bin/sh` script `name` in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_string_lossy().into_owned()
}

/// Waits (bounded) for the pid a script wrote to `file`.
fn pid_in(file: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", file.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `pid` runs (a zombie, killed and waiting for its reaper, does not).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) if Path::new("/proc/self").exists() => false,
        // No /proc (macOS): whether the pid exists.
        // SAFETY: kill(2) with signal 0 sends nothing.
        Err(_) => unsafe { libc::kill(pid, 0) == 0 },
    }
}

/// Whether `pid` stops running within a few seconds.
fn ends(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn the_stderr_keeps_8192_bytes_and_counts_the_rest() {
    let mut exact = Capped::default();
    exact.push(&[b'E'; 8192]);
    assert_eq!(exact.text(), "E".repeat(8192));
    let mut over = Capped::default();
    over.push(&[b'E'; 5000]);
    over.push(&[b'E'; 5000]);
    assert_eq!(over.text(), format!("{}\n[\u{2026} 1808 more bytes]", "E".repeat(8192)));
    let mut bad = Capped::default();
    bad.push(b"a\xffb");
    assert_eq!(bad.text(), "a\u{fffd}b");
}

#[test]
fn failure_reasons_name_the_exit_status_or_the_signal() {
    assert_eq!(failure_reason(ExitStatus::from_raw(0)), None);
    assert_eq!(
        failure_reason(ExitStatus::from_raw(3 << 8)).as_deref(),
        Some("exit status 3")
    );
    assert_eq!(
        failure_reason(ExitStatus::from_raw(libc::SIGTERM)).as_deref(),
        Some("terminated by SIGTERM")
    );
}

#[test]
fn a_run_passes_the_cli_and_version_after_the_launcher_argv() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let launcher = script(
        dir.path(),
        "wrap",
        &format!("echo \"$@\" > '{}'; echo to-stderr >&2; exit 0", log.display()),
    );
    let argv = vec![launcher, "--flag".to_string()];
    assert_eq!(run(&argv, OsStr::new("/opt/cli"), RUN_BOUND), RunOutcome::Ran);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "--flag /opt/cli --version\n");
}

#[test]
fn a_failed_run_reports_its_reason_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let failing = script(dir.path(), "fail", "printf 'L5: to stderr\\n' >&2; exit 3");
    assert_eq!(
        run(&[failing], OsStr::new("/opt/cli"), RUN_BOUND),
        RunOutcome::Failed {
            reason: "exit status 3".into(),
            stderr: "L5: to stderr\n".into()
        }
    );
    let selfterm = script(dir.path(), "term", "kill -TERM $$");
    assert_eq!(
        run(&[selfterm], OsStr::new("/opt/cli"), RUN_BOUND),
        RunOutcome::Failed {
            reason: "terminated by SIGTERM".into(),
            stderr: String::new()
        }
    );
    // Passed the checks, but its interpreter is missing: Go's start error.
    let orphan = dir.path().join("orphan");
    std::fs::write(&orphan, "#!/nonexistent/interpreter\n").unwrap();
    std::fs::set_permissions(&orphan, std::fs::Permissions::from_mode(0o755)).unwrap();
    let orphan = orphan.to_string_lossy().into_owned();
    assert_eq!(
        run(std::slice::from_ref(&orphan), OsStr::new("/opt/cli"), RUN_BOUND),
        RunOutcome::Failed {
            reason: format!("fork/exec {orphan}: no such file or directory"),
            stderr: String::new()
        }
    );
}

/// The bound stops the launcher and what it started in its group, whether
/// or not they ignore SIGTERM; the run returns at the bound, not when the
/// launcher would have ended.
#[test]
fn the_bound_kills_the_launchers_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let child_pid = dir.path().join("child.pid");
    let launcher = script(
        dir.path(),
        "hang",
        &format!("trap '' TERM; sleep 60 & echo $! > '{}'; sleep 60", child_pid.display()),
    );
    let start = Instant::now();
    assert_eq!(
        run(&[launcher], OsStr::new("/opt/cli"), Duration::from_millis(500)),
        RunOutcome::Stopped
    );
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    assert!(ends(pid_in(&child_pid)), "the launcher's child outlived the stop");
}

/// remora's own rule: a launcher that exits leaves nothing running in its
/// group, even a child holding its stderr open.
#[test]
fn nothing_of_the_run_outlives_a_launcher_that_exited() {
    let dir = tempfile::tempdir().unwrap();
    let child_pid = dir.path().join("child.pid");
    let launcher = script(
        dir.path(),
        "leave",
        &format!("sleep 60 & echo $! > '{}'; exit 0", child_pid.display()),
    );
    let start = Instant::now();
    assert_eq!(run(&[launcher], OsStr::new("/opt/cli"), RUN_BOUND), RunOutcome::Ran);
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    assert!(ends(pid_in(&child_pid)), "the launcher's child outlived the run");
}

#[test]
fn the_unresponsive_text_names_argv0_and_the_reference_bounds() {
    assert_eq!(
        unresponsive_text("/opt/wrap"),
        "cli unresponsive: the installed Claude Code binary was started through the host's managed launcher /opt/wrap and the run did not answer --version within 33s (123s for a first run), so it was stopped; the launcher or the host is not letting it finish"
    );
}
