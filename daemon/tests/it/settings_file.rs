//! `remora.conf` beside the executable, as an operator of a Desktop-driven
//! host uses it: every key changes its setting (seen in `-version`,
//! `-print-config`, the start-up log line and the daemon's behaviour), a
//! flag outranks the file, and a hostile file changes nothing while the
//! daemon still starts.
//!
//! Each test runs its own copy of the binary in a temp dir, so the file
//! beside it is the test's own.

use crate::common;
use crate::common::{wait_until, TestDaemon};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const SHA: &str = "90FCA6E690fca6e690fca6e690fca6e690fca6e6";

/// A copy of remora named `server` in `dir/srv`, as Desktop caches it.
fn placed_binary(dir: &Path) -> PathBuf {
    let srv = dir.join("srv");
    std::fs::create_dir(&srv).unwrap();
    let bin = srv.join("server");
    // A hard link shares the inode, and /proc/self/exe names the link used.
    if std::fs::hard_link(common::remora_bin(), &bin).is_err() {
        std::fs::copy(common::remora_bin(), &bin).unwrap();
    }
    bin
}

fn write_conf(bin: &Path, text: &[u8]) -> PathBuf {
    let conf = bin.with_file_name("remora.conf");
    std::fs::write(&conf, text).unwrap();
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o600)).unwrap();
    conf
}

fn stdout_of(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

#[test]
fn every_key_changes_its_setting() {
    let dir = tempfile::tempdir().unwrap();
    let bin = placed_binary(dir.path());
    let replay = dir.path().join("replay-from-conf");
    let metrics = format!("127.0.0.1:{}", free_port());
    let conf = write_conf(
        &bin,
        format!(
            "# written by the test\nreference-build = {SHA}\nreplay-dir = {}\nreplay-budget-mb = 7\n\
             metrics-addr = {metrics}\nkeep-children = true\nexited-retention-min = 90\nlog-level = info\n\
             cli-download-timeout = 1h30m\n",
            replay.display()
        )
        .as_bytes(),
    );
    let sha = SHA.to_ascii_lowercase();

    // -version, as Desktop runs it, and its regex.
    let version = stdout_of(&bin, &["--version"]);
    assert!(
        version.starts_with(&format!("claude-ssh {sha} (via remora ")),
        "{version}"
    );
    let first_token = version.split_whitespace().nth(1).unwrap();
    assert_eq!(first_token, sha);

    // -print-config names the file line of every key.
    let printed = stdout_of(&bin, &["-print-config"]);
    let c = conf.display();
    for (line, setting) in [
        (2, format!("reference-build = {sha}")),
        (3, format!("replay-dir = {}", replay.display())),
        (4, "replay-budget-mb = 7".to_string()),
        (5, format!("metrics-addr = {metrics}")),
        (6, "keep-children = true".to_string()),
        (7, "exited-retention-min = 90".to_string()),
        (8, "log-level = info".to_string()),
        (9, "cli-download-timeout = 1h30m0s".to_string()),
    ] {
        assert!(
            printed.contains(&format!("# from {c}:{line}\n{setting}\n")),
            "{setting}:\n{printed}"
        );
    }

    // The daemon: its start-up line, then each setting's effect.
    let mut daemon = TestDaemon::start_binary(&bin, &[]);
    let log = daemon.log();
    let summary = log.lines().find(|l| l.contains("[daemon] settings: ")).unwrap();
    for key in [
        "reference-build",
        "replay-dir",
        "replay-budget-mb",
        "metrics-addr",
        "keep-children",
        "exited-retention-min",
        "log-level",
        "cli-download-timeout",
    ] {
        assert!(summary.contains(&format!("{key}=")), "{key}: {summary}");
    }
    assert_eq!(summary.matches(&format!("({c}:")).count(), 8, "{summary}");
    // cli-download-timeout: what `-install` applies (its effect is
    // tests/it/install_progress.rs's, through the same flag field).
    assert!(
        summary.contains(&format!("cli-download-timeout=1h30m0s ({c}:9)")),
        "{summary}"
    );
    assert!(summary.contains("replay-budget-mb=7 ("), "{summary}");
    // exited-retention-min: what the sweeper applies (its effect is
    // tests/it/exited_retention.rs's, through the same flag field).
    assert!(
        summary.contains(&format!("exited-retention-min=90 ({c}:7)")),
        "{summary}"
    );
    // log-level = info: no debug line was written.
    assert!(!log.contains(" DEBUG "), "{log}");
    // metrics-addr: served.
    let scraped = http_get(&metrics, "/metrics");
    assert!(
        scraped.starts_with("HTTP/1.1 200") || scraped.starts_with("HTTP/1.0 200"),
        "{scraped}"
    );
    // replay-dir: the store lives there once a process wrote output.
    let reply = daemon.call(
        "process.spawn",
        r#"{"id":"kept","command":"sh","args":["-c","echo $$; exec sleep 60"]}"#,
    );
    assert!(reply.contains(r#""result""#), "{reply}");
    assert!(
        wait_until(Duration::from_secs(10), || replay.is_dir()),
        "no replay dir at {}",
        replay.display()
    );
    let mut c = daemon.connect();
    c.send(2, "process.reattach", r#"{"id":"kept","fromSeq":0}"#);
    let mut pid = None;
    while pid.is_none() {
        let line = c.recv_line();
        if let Some((_, frame)) = common::frames::parse_frame(&line) {
            let out = common::frames::stdout_of(std::slice::from_ref(&frame));
            pid = String::from_utf8_lossy(&out).trim().parse::<i32>().ok();
        }
    }
    // Held from the moment its pid is known (it just printed it).
    let child = common::proven::Proc::open(pid.unwrap()).expect("a pidfd on the child");
    drop(c);
    // keep-children = true: the child outlives a graceful stop.
    daemon.stop();
    let alive = !child.gone();
    child.signal(libc::SIGKILL);
    assert!(alive, "keep-children from the file did not keep the child");
}

#[test]
fn a_flag_outranks_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bin = placed_binary(dir.path());
    write_conf(
        &bin,
        b"replay-budget-mb = 7\nreference-build = 0000000000000000000000000000000000000000\n",
    );
    let printed = stdout_of(&bin, &["-print-config", "-replay-budget-mb", "9", "-reference-build="]);
    assert!(printed.contains("# from flag\nreplay-budget-mb = 9\n"), "{printed}");
    assert!(printed.contains("# from flag\nreference-build = \n"), "{printed}");
    assert!(stdout_of(&bin, &["-version", "-reference-build="]).starts_with("remora "));
}

/// Every setting at its default, and the file's state in the header.
fn assert_all_defaults(bin: &Path, state: &str) -> String {
    let printed = stdout_of(bin, &["-print-config"]);
    assert!(printed.lines().next().unwrap().ends_with(state), "{printed}");
    assert_eq!(printed.matches("(default)\n").count(), 11, "{printed}");
    assert!(stdout_of(bin, &["-version"]).starts_with("remora "));
    printed
}

#[test]
fn a_hostile_file_changes_nothing_and_the_daemon_still_starts() {
    let dir = tempfile::tempdir().unwrap();
    let bin = placed_binary(dir.path());
    let good = format!("reference-build = {SHA}\nreplay-budget-mb = 7\nkeep-children = true\n");
    let conf = bin.with_file_name("remora.conf");

    // A link to a good file.
    let elsewhere = dir.path().join("elsewhere.conf");
    std::fs::write(&elsewhere, &good).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &conf).unwrap();
    let printed = assert_all_defaults(&bin, "(ignored)");
    assert!(printed.contains("is a symbolic link"), "{printed}");
    let mut daemon = TestDaemon::start_binary(&bin, &[]);
    let log = daemon.log();
    assert!(log.contains("is a symbolic link"), "{log}");
    assert!(log.contains("replay-budget-mb=2048 (default)"), "{log}");
    daemon.stop();
    std::fs::remove_file(&conf).unwrap();

    // 1 MiB of valid lines.
    let mut big = good.clone().into_bytes();
    while big.len() < 1 << 20 {
        big.extend_from_slice(b"# padding padding padding padding padding padding padding\n");
    }
    write_conf(&bin, &big);
    assert!(assert_all_defaults(&bin, "(ignored)").contains("larger than 65536 bytes"));

    // Binary garbage of an allowed size: every line ignored, bounded warnings.
    let garbage: Vec<u8> = (0..60_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    write_conf(&bin, &garbage);
    let printed = assert_all_defaults(&bin, "(read)");
    assert!(printed.matches("# warning: ").count() <= 9, "{printed}");
    let mut daemon = TestDaemon::start_binary(&bin, &[]);
    assert!(daemon.log().contains("keep-children=false (default)"));
    daemon.stop();

    // Writable by others.
    write_conf(&bin, good.as_bytes());
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o622)).unwrap();
    assert!(assert_all_defaults(&bin, "(ignored)").contains("writable by group or others"));

    // Another owner (needs root to make).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&conf, Some(65534), Some(65534)).unwrap();
        assert!(assert_all_defaults(&bin, "(ignored)").contains("is owned by uid 65534"));
        let mut daemon = TestDaemon::start_binary(&bin, &[]);
        assert!(daemon.log().contains("is owned by uid 65534"));
        daemon.stop();
    }
}
