//! Two `19f30c46` lifecycle rules with real processes: `-probe-cli <path>`
//! (its three outputs, the deadline killing the probe's whole group, no
//! `CLAUDE_RPC_TOKEN` for the probe) and the soft open-files limit a
//! `-serve` daemon gives its children.

use crate::common;
use crate::common::frames::{frames_until_exit, stdout_of};
use crate::common::{pid_gone, remora_bin, request_line, wait_until, Client, TOKEN};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// An executable shell script `name` in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `remora -probe-cli <path>` → (exit code, stdout, stderr).
fn probe(path: &Path, env: &[(&str, &str)]) -> (i32, String, String) {
    let out = common::remora_command()
        .arg("-probe-cli")
        .arg(path)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_cli_that_answers_version_prints_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Exits 0 only when asked for --version and without the client token.
    let cli = script(
        dir.path(),
        "claude",
        r#"[ "$1" = --version ] && [ "$#" = 1 ] && [ -z "${CLAUDE_RPC_TOKEN+set}" ] && echo 1.2.3"#,
    );
    assert_eq!(
        probe(&cli, &[("CLAUDE_RPC_TOKEN", "secret")]),
        (0, String::new(), String::new())
    );
}

#[test]
fn a_failing_or_missing_cli_is_bad() {
    let dir = tempfile::tempdir().unwrap();
    let failing = script(dir.path(), "failing", "echo broken >&2; exit 1");
    let bad = (0, "__CLI_BAD__\n".to_string(), String::new());
    assert_eq!(probe(&failing, &[]), bad);
    assert_eq!(probe(&dir.path().join("missing"), &[]), bad);
    let killed = script(dir.path(), "killed", "kill -9 $$");
    assert_eq!(probe(&killed, &[]), bad);
    // Not executable: cannot be started.
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "#!/bin/sh\nexit 0\n").unwrap();
    assert_eq!(probe(&plain, &[]), bad);
    // -probe-cli wins over -serve, -bridge and -stop.
    let out = common::remora_command()
        .args([
            "-stop",
            "-serve",
            "-bridge",
            "-socket",
            "/nonexistent/s.sock",
            "-probe-cli",
        ])
        .arg(dir.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned()),
        (Some(0), "__CLI_BAD__\n".to_string())
    );
}

#[test]
fn a_hanging_cli_is_killed_with_its_group_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let cli = script(
        dir.path(),
        "hangs",
        &format!("sleep 300 & echo $! > {}; wait", pidfile.display()),
    );
    let out = probe(&cli, &[("REMORA_TEST_PROBE_CLI_LIMIT_MS", "500")]);
    assert_eq!(out, (0, "__CLI_HUNG__\n".to_string(), String::new()));
    // The grandchild was in the probe's group: killed too.
    let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    assert!(wait_until(Duration::from_secs(10), || pid_gone(pid)));
}

#[test]
fn serve_raises_the_soft_open_files_limit_for_children() {
    let mut hard = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut hard) }, 0);
    let want = hard.rlim_max.min(65536);
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let log = dir.path().join("daemon.log");
    // Started from a shell with a low soft limit, so the raise shows.
    let mut launcher = Command::new("sh");
    launcher
        .args([
            "-c",
            "ulimit -Sn 256 && exec \"$0\" \"$@\"",
            remora_bin(),
            "-serve",
            "-socket",
        ])
        .arg(&socket)
        .arg("-token-file")
        .arg(&token)
        .env("SHELL", common::QUICK_LOGIN_SHELL);
    common::launch_to_banner(launcher, &log);
    let mut c = Client::connect(&socket);
    let spawn = r#"{"id":"u","command":"sh","args":["-c","ulimit -Sn; sh -c 'ulimit -Sn'"]}"#;
    let reply = c.call(1, "process.spawn", spawn);
    assert!(reply.contains("\"result\""), "{reply}");
    let frames = frames_until_exit(&mut c, "u");
    assert_eq!(
        String::from_utf8_lossy(&stdout_of(&frames)),
        format!("{want}\n{want}\n")
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains(&format!(
            "[daemon] child processes will start with an open-files limit of {want}\n"
        )),
        "{text}"
    );
    c.send_raw(request_line("9", "server.shutdown", None, TOKEN).as_bytes());
    assert!(wait_until(Duration::from_secs(10), || !socket.exists()));
}
