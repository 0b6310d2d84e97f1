//! The wire log (`-wire-log FILE`, `serve::wirelog`): a real daemon, real
//! sockets, a real child; the file is read after a graceful stop, which
//! writes out everything queued.

use crate::common::frames::frames_until_exit;
use crate::common::{TestDaemon, TOKEN};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The records of the log at `path`, each parsed.
fn records(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

#[test]
fn every_frame_both_ways_private_without_the_token_and_cut() {
    let logs = tempfile::tempdir().unwrap();
    let path = logs.path().join("wire.jsonl");
    let mut d = TestDaemon::start_with(
        &["-wire-log", path.to_str().unwrap(), "-wire-log-max-string", "16"],
        &[],
    );
    let mut c = d.connect();
    c.call(1, "server.ping", "{}");
    c.send(
        2,
        "process.spawn",
        r#"{"id":"p1","command":"sh","args":["-c","printf 'a long line of output, longer than sixteen bytes'"],"env":{"GH_TOKEN":"env-secret-value","PLAIN":"kept"}}"#,
    );
    let frames = frames_until_exit(&mut c, "p1");
    assert_eq!(frames.last().unwrap().exit_code, Some(0));
    // A line that is not JSON, carrying the token.
    c.send_raw(format!("{{\"auth\":\"{TOKEN}\", not json\n").as_bytes());
    c.recv_line();
    drop(c);
    d.stop();

    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(TOKEN), "the token is in the wire log:\n{text}");
    assert!(!text.contains("env-secret-value"), "{text}");
    let all = records(&path);
    // The test's connection (the stop's own comes after it).
    let conn = all[0]["conn"].clone();
    let ins: Vec<_> = all.iter().filter(|r| r["dir"] == "in" && r["conn"] == conn).collect();
    let outs: Vec<_> = all.iter().filter(|r| r["dir"] == "out" && r["conn"] == conn).collect();
    assert_eq!(ins.len(), 3, "{text}");
    assert!(!outs.is_empty(), "{text}");
    let first = ins[0];
    assert_eq!(first["frame"]["method"], "server.ping");
    assert_eq!(first["frame"]["auth"], "[redacted]");
    assert!(first["conn"].as_u64().unwrap() > 0);
    assert_eq!(first["pid"].as_i64(), Some(i64::from(std::process::id() as i32)));
    assert!(first["ts"].as_str().unwrap().ends_with('Z'));
    let env = &ins[1]["frame"]["params"]["env"];
    assert_eq!(env["GH_TOKEN"], "[redacted]");
    assert_eq!(env["PLAIN"], "kept");
    let cut = ins[1]["frame"]["params"]["args"][1].as_str().unwrap();
    assert!(cut.starts_with("printf 'a long l...[cut "), "{cut}");
    assert!(
        ins[2]["raw"].as_str().unwrap().starts_with("{\"auth\":\"[redact"),
        "{text}"
    );
    // The replies and stream frames, in the order they were written.
    assert_eq!(outs[0]["frame"]["result"]["pong"], true, "{text}");
    let stdout = outs
        .iter()
        .find(|r| r["frame"]["stream"] == "stdout")
        .unwrap_or_else(|| panic!("no stdout frame: {text}"));
    assert!(stdout["frame"]["data"].as_str().unwrap().contains("...[cut "), "{text}");
    assert!(outs.iter().any(|r| r["frame"]["stream"] == "exit"), "{text}");
    assert!(d.log().contains("wire log: every frame is appended to"), "{}", d.log());
}

#[test]
fn zero_keeps_strings_whole_with_a_warning() {
    let logs = tempfile::tempdir().unwrap();
    let path = logs.path().join("wire.jsonl");
    let mut d = TestDaemon::start_with(&["-wire-log", path.to_str().unwrap(), "-wire-log-max-string", "0"], &[]);
    let long = "x".repeat(2000);
    d.call("fs.stat", &format!(r#"{{"path":"/{long}"}}"#));
    d.stop();
    assert!(std::fs::read_to_string(&path).unwrap().contains(&long));
    assert!(d.log().contains("wire-log-max-string is 0"), "{}", d.log());
}

#[test]
fn a_symlinked_log_is_refused_and_its_target_untouched() {
    let logs = tempfile::tempdir().unwrap();
    let target = logs.path().join("target");
    std::fs::write(&target, "").unwrap();
    let path = logs.path().join("wire.jsonl");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let mut d = TestDaemon::start_with(&["-wire-log", path.to_str().unwrap()], &[]);
    d.call("server.ping", "{}");
    d.stop();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
    assert!(
        d.log().contains("wire log off:") && d.log().contains("symbolic link"),
        "{}",
        d.log()
    );
}

#[test]
fn a_full_log_rotates_and_stays_bounded() {
    let logs = tempfile::tempdir().unwrap();
    let path = logs.path().join("wire.jsonl");
    let mut d = TestDaemon::start_with(
        &["-wire-log", path.to_str().unwrap()],
        &[("REMORA_TEST_WIRE_LOG_CAP", "2000")],
    );
    let mut c = d.connect();
    for id in 0..60 {
        c.call(id, "server.ping", "{}");
    }
    drop(c);
    d.stop();
    let first = logs.path().join("wire.jsonl.1");
    let later = logs.path().join("wire.jsonl.2");
    for file in [&path, &first, &later] {
        let meta = std::fs::metadata(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(meta.len() <= 2000, "{}: {}", file.display(), meta.len());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }
    // The session's first full file is its beginning.
    assert_eq!(records(&first)[0]["frame"]["id"], 0);
}
