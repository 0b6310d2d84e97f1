//! `remora -doctor` on real homes: empty; with a Desktop srv dir holding
//! remora (stamped, the reference kept beside it) and a live daemon
//! started from it with a client and a child; with a stale socket, a
//! token file left alone, a flat `ccd-cli` and FIFOs where files are
//! read; and with a daemon that refuses the token file beside its
//! socket. Each run's exit code, text and `-json` are checked, and the
//! home is snapshotted around the runs that must change nothing.
//!
//! Every daemon here runs with `HOME` set to its test's home, which is
//! how the doctor tells them from the other tests' daemons.

use crate::common::{self, wait_until, Client, StopOnDrop, TOKEN};
use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const SHA: &str = "90fca6e690fca6e690fca6e690fca6e690fca6e6";

/// `~/.claude/remote` of a fresh home.
fn remote(home: &Path) -> PathBuf {
    let remote = home.join(".claude").join("remote");
    std::fs::create_dir_all(&remote).unwrap();
    remote
}

/// Runs `remora -doctor` (plus `args`) for `home`: exit code and stdout.
fn doctor(home: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(common::remora_bin())
        .arg("-doctor")
        .args(args)
        .env("HOME", home)
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap())
}

fn doctor_json(home: &Path) -> (i32, Value) {
    let (code, out) = doctor(home, &["--json"]);
    (
        code,
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")),
    )
}

/// Every path under `dir` with its kind, size, mode, inode and change
/// time: what any write, rename, chmod or removal would alter.
fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(here) = pending.pop() {
        for entry in std::fs::read_dir(&here).unwrap() {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                pending.push(entry.path());
            }
            let stamp = format!(
                "{:?} {} {:o} {} {}.{} {}.{}",
                meta.file_type(),
                meta.len(),
                meta.mode(),
                meta.ino(),
                meta.mtime(),
                meta.mtime_nsec(),
                meta.ctime(),
                meta.ctime_nsec()
            );
            out.push((entry.path(), stamp));
        }
    }
    out.sort();
    out
}

/// `srv/<SHA>/server`: remora, stamped as [`SHA`] by a `remora.conf`,
/// with a stand-in `server.reference` beside it, as `ci/install-remote
/// --desktop` leaves it.
fn desktop_srv(remote: &Path) -> PathBuf {
    let dir = remote.join("srv").join(SHA);
    std::fs::create_dir_all(&dir).unwrap();
    let server = dir.join("server");
    // A hard link: nothing holds a copy open for writing when it runs.
    if std::fs::hard_link(common::remora_bin(), &server).is_err() {
        std::fs::copy(common::remora_bin(), &server).unwrap();
    }
    let conf = dir.join("remora.conf");
    std::fs::write(&conf, format!("reference-build = {SHA}\n")).unwrap();
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(dir.join("server.reference"), "#!/bin/sh\necho claude-ssh reference\n").unwrap();
    server
}

/// Starts `binary -serve` for `home` on `run/<id>/rpc.sock` as Desktop
/// does; returns the socket and the daemon's pid.
fn serve(home: &Path, binary: &Path, id: &str, extra: &[&str]) -> (PathBuf, i32) {
    let run = remote(home).join("run").join(id);
    std::fs::create_dir_all(&run).unwrap();
    let socket = run.join("rpc.sock");
    let token = home.join(format!("token-{id}"));
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let mut command = Command::new(binary);
    command
        .arg("--serve")
        .arg("--socket")
        .arg(&socket)
        .arg("--token-file")
        .arg(&token)
        .args(extra)
        .env("HOME", home)
        .env("SHELL", common::QUICK_LOGIN_SHELL)
        .current_dir(home);
    common::launch_to_banner_line(command, &home.join(format!("launcher-{id}.log")));
    let pid = common::recorded_daemon(&socket)
        .expect("the daemon's lock record")
        .pid();
    (socket, pid)
}

#[test]
fn an_empty_home_is_healthy() {
    let home = tempfile::tempdir().unwrap();
    let before = snapshot(home.path());
    let (code, text) = doctor(home.path(), &[]);
    assert_eq!(code, 0, "{text}");
    for line in [
        "daemons:\n  none running",
        "stale sockets:\n  none",
        "healthy: nothing to do",
    ] {
        assert!(text.contains(line), "{line:?} in {text}");
    }
    let (code, report) = doctor_json(home.path());
    assert_eq!(code, 0);
    let keys: Vec<&str> = report.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "user",
            "healthy",
            "problems",
            "srv",
            "daemons",
            "staleSockets",
            "logind",
            "ccdCli",
            "hint"
        ]
    );
    assert_eq!(report["healthy"], true);
    assert_eq!(report["user"]["home"], home.path().display().to_string());
    assert_eq!(report["ccdCli"]["kind"], "absent");
    assert!(report["hint"].is_null());
    assert_eq!(snapshot(home.path()), before);
}

#[test]
fn a_desktop_srv_dir_and_a_live_daemon_with_a_client_and_a_child() {
    let home = tempfile::tempdir().unwrap();
    let server = desktop_srv(&remote(home.path()));
    let (socket, pid) = serve(home.path(), &server, "c1", &[]);
    let _stop = StopOnDrop::new(&socket, TOKEN);
    let mut client = Client::connect(&socket);
    let spawned = client.call(1, "process.spawn", r#"{"id":"p1","command":"sleep","args":["30"]}"#);
    assert!(spawned.contains("\"result\""), "{spawned}");

    let (code, report) = doctor_json(home.path());
    assert_eq!(code, 0, "{report:#}");
    let srv = &report["srv"][0];
    assert_eq!(srv["name"], SHA);
    assert_eq!(srv["server"]["remora"], true);
    assert_eq!(srv["server"]["token"], SHA);
    assert_eq!(srv["server"]["answersAs"], "90fca6e6");
    assert_eq!(srv["server"]["stamp"], "recorded");
    assert_eq!(srv["serverReference"], true);
    assert_eq!(srv["remoraConf"], "read");
    let daemons = report["daemons"].as_array().unwrap();
    assert_eq!(daemons.len(), 1, "{report:#}");
    let d = &daemons[0];
    assert_eq!(d["pid"], pid);
    assert_eq!(d["socket"], socket.display().to_string());
    assert_eq!(d["program"], server.display().to_string());
    assert_eq!(d["clients"], 1, "{d:#}");
    assert_eq!(d["processes"], 1, "{d:#}");
    assert_eq!(d["token"], "match");
    assert_eq!(d["reachable"], true);
    assert_eq!(d["holdsRunLock"], true);
    assert_eq!(d["stale"], false);
    assert_eq!(d["idle"], false);
    assert_eq!(d["idleExitMin"], "0");
    assert!(d["uptimeSec"].is_u64() && d["replayBytes"].is_u64(), "{d:#}");

    let (code, text) = doctor(home.path(), &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(&format!("  pid {pid} {}\n", server.display())), "{text}");
    assert!(text.contains("clients: 1  processes: 1"), "{text}");
    assert!(
        text.contains(&format!("    --version: claude-ssh {SHA} (via remora ")),
        "{text}"
    );
    assert!(text.contains("    server.reference: kept\n"), "{text}");
    assert!(text.contains("socket path: leads to it  token file: match"), "{text}");

    // The client gone and its child killed and dropped, the daemon is idle.
    let _ = client.call(2, "process.kill", r#"{"id":"p1","signal":"KILL"}"#);
    drop(client);
    assert!(wait_until(Duration::from_secs(10), || {
        let (_, report) = doctor_json(home.path());
        report["daemons"][0]["clients"] == 0 && report["daemons"][0]["processes"] == 0
    }));
    let (code, text) = doctor(home.path(), &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("idle: no client, no process"), "{text}");
    assert!(text.contains("idle-exit-min = 60"), "{text}");
}

#[test]
fn stale_sockets_a_flat_ccd_cli_and_fifos_change_nothing() {
    let home = tempfile::tempdir().unwrap();
    let remote = remote(home.path());
    // A socket nobody listens on any more (bound, never listened, closed).
    let b = remote.join("run").join("b");
    std::fs::create_dir_all(&b).unwrap();
    let stale = b.join("rpc.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    // A token file left without its socket.
    let c = remote.join("run").join("c");
    std::fs::create_dir_all(&c).unwrap();
    std::fs::write(c.join("daemon.token"), "old").unwrap();
    // The leftover flat `ccd-cli` of #106.
    std::fs::write(remote.join("ccd-cli"), "").unwrap();
    // FIFOs where the doctor reads: none may block it.
    let srv = remote.join("srv").join(SHA);
    std::fs::create_dir_all(&srv).unwrap();
    let fifo = |p: &Path| nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    fifo(&srv.join("server"));
    fifo(&srv.join("remora.conf"));
    fifo(&b.join("daemon.lock"));
    let before = snapshot(home.path());

    let (code, text) = doctor(home.path(), &[]);
    assert_eq!(code, 1, "{text}");
    let own = common::remora_bin();
    assert!(
        text.contains(&format!("end it: {own} -stop -socket {}", stale.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("end it: {own} -stop -socket {}", c.join("rpc.sock").display())),
        "{text}"
    );
    assert!(text.contains("ccd-cli: regular file"), "{text}");
    assert!(
        text.contains(&format!("fix: mv {0} {0}.old", remote.join("ccd-cli").display())),
        "{text}"
    );
    assert!(text.contains("    server: other\n"), "{text}");
    assert!(text.contains("remora.conf: refused: is not a regular file"), "{text}");

    let (code, report) = doctor_json(home.path());
    assert_eq!(code, 1);
    assert_eq!(report["healthy"], false);
    let stale_sockets = report["staleSockets"].as_array().unwrap();
    assert_eq!(stale_sockets.len(), 2, "{report:#}");
    assert_eq!(stale_sockets[0]["socket"], stale.display().to_string());
    assert_eq!(report["ccdCli"]["ok"], false);
    let sections: Vec<&str> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["section"].as_str().unwrap())
        .collect();
    assert_eq!(sections, ["staleSockets", "staleSockets", "ccdCli"]);
    assert!(report["hint"].as_str().unwrap().contains("idle-exit-min"));
    assert_eq!(snapshot(home.path()), before, "the doctor changed the home");
}

#[test]
fn a_daemon_that_refuses_its_token_file_is_stale() {
    let home = tempfile::tempdir().unwrap();
    let (socket, pid) = serve(home.path(), Path::new(common::remora_bin()), "t1", &[]);
    let _stop = StopOnDrop::new(&socket, TOKEN);
    // What a client that lost its token finds: another token beside the
    // socket (written as the daemon writes it, owner-only).
    let token = socket.with_file_name("daemon.token");
    std::fs::write(&token, "not-the-token").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (code, text) = doctor(home.path(), &[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("token file: mismatch"), "{text}");
    assert!(text.contains("STALE: it refuses the token file"), "{text}");
    assert!(text.contains(&format!("end it: kill {pid}\n")), "{text}");
    assert!(text.contains("idle-exit-min"), "{text}");
    let (_, report) = doctor_json(home.path());
    assert_eq!(report["daemons"][0]["stale"], true);
    assert_eq!(report["daemons"][0]["fix"], format!("kill {pid}"));
    assert_eq!(report["problems"][0]["section"], "daemons");
}
