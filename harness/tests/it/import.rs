//! `harness import`: a short session recorded by remora's wire log
//! (`-wire-log`), imported into a probe and its transcript, checked
//! against the same remora (identical), then against a transcript with
//! one reply changed (a difference). Neither file holds the token.

use crate::common;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "s3cret-wire-log-token";

fn line(id: u32, method: &str, params: &str) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{params},\"auth\":\"{TOKEN}\"}}\n")
}

#[test]
fn a_recorded_session_replays_identically_and_a_changed_reply_differs() {
    let remora = common::remora();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let sock = dir.path().join("d.sock");
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let log = dir.path().join("wire.jsonl");
    let mut launcher = Command::new(&remora)
        .env(
            "SHELL",
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../daemon/tests/it/support/quick-login-shell"
            ),
        )
        .args(["-serve", "-wire-log-max-string", "0", "-wire-log"])
        .arg(&log)
        .arg("-socket")
        .arg(&sock)
        .arg("-token-file")
        .arg(&token)
        .current_dir(&root)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(launcher.stdout.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    assert!(banner.contains("listening"), "{banner}");
    let _ = launcher.wait();

    let s = UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let mut next = || {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        l
    };
    w.write_all(line(1, "server.ping", "{}").as_bytes()).unwrap();
    assert!(next().contains("pong"));
    w.write_all(line(2, "process.spawn", r#"{"id":"job","command":"echo","args":["hi"]}"#).as_bytes())
        .unwrap();
    while !next().contains("\"exit\"") {}
    // The stop: its connection is the last in the log, and left out.
    let mut stop = UnixStream::connect(&sock).unwrap();
    stop.write_all(
        format!("{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"server.shutdown\",\"auth\":\"{TOKEN}\"}}\n").as_bytes(),
    )
    .unwrap();
    let _ = stop.read_to_end(&mut Vec::new());
    let deadline = Instant::now() + Duration::from_secs(20);
    while sock.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!sock.exists(), "the daemon did not stop");
    drop(w);

    let probes = dir.path().join("probes");
    std::fs::create_dir(&probes).unwrap();
    let transcripts = dir.path().join("transcripts");
    let probe = probes.join("recorded.probe");
    let import = common::run(&[
        "import",
        log.to_str().unwrap(),
        "--out",
        probe.to_str().unwrap(),
        "--binary",
        remora.to_str().unwrap(),
        "--transcripts",
        transcripts.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--socket",
        sock.to_str().unwrap(),
    ]);
    assert!(import.status.success(), "{}", String::from_utf8_lossy(&import.stderr));
    let probe_text = std::fs::read_to_string(&probe).unwrap();
    let transcript = transcripts.join("recorded.txt");
    let text = std::fs::read_to_string(&transcript).unwrap();
    for t in [&probe_text, &text] {
        assert!(!t.contains(TOKEN), "{t}");
    }
    assert!(
        probe_text.contains("$TOKEN") && !probe_text.contains("server.shutdown"),
        "{probe_text}"
    );
    assert!(text.contains("\"pong\":true"), "{text}");

    let check = || {
        common::run(&[
            "check",
            "--binary",
            remora.to_str().unwrap(),
            "--probes",
            probes.to_str().unwrap(),
            "--transcripts",
            transcripts.to_str().unwrap(),
        ])
    };
    let out = check();
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}\n{probe_text}\n{text}");
    assert!(said.contains("1 identical"), "{said}");

    std::fs::write(&transcript, text.replace("\"pong\":true", "\"pong\":false")).unwrap();
    let out = check();
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("DIFFERS") && said.contains("reply 1"), "{said}");
}
