//! `remora -install -cli-url` instrumentation of reference build 4534d86,
//! through the real binary against slow local HTTP servers:
//! `__INSTALL_PROGRESS__` lines on a ~1 s ticker, the `fetch` object last
//! in the facts line, and the read-idle stall abort (shortened through
//! the test-only `REMORA_TEST_INSTALL_STALL_MS`).

use crate::common::http::read_request_head;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

fn zst(bytes: &[u8]) -> Vec<u8> {
    zstd::encode_all(bytes, 3).unwrap()
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// How the one-shot server answers.
struct Plan {
    body: Vec<u8>,
    /// Send Content-Length (else the body ends at close).
    length: bool,
    /// Pieces the body is cut into, and the pause before each.
    pieces: usize,
    pause: Duration,
    /// After the body's first piece, go silent this long instead.
    stall: Option<Duration>,
}

/// Serves `plan` to every connection on 127.0.0.1; returns the URL.
fn serve(plan: Plan) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/cli.zst", listener.local_addr().unwrap());
    let plan = std::sync::Arc::new(plan);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let plan = plan.clone();
            std::thread::spawn(move || answer(stream, &plan));
        }
    });
    url
}

fn answer(mut stream: TcpStream, plan: &Plan) {
    if read_request_head(&mut stream).is_none() {
        return;
    }
    let length = if plan.length {
        format!("Content-Length: {}\r\n", plan.body.len())
    } else {
        String::new()
    };
    let head = format!("HTTP/1.1 200 OK\r\n{length}Connection: close\r\n\r\n");
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let piece = plan.body.len().div_ceil(plan.pieces);
    for (i, chunk) in plan.body.chunks(piece).enumerate() {
        if i > 0 {
            if let Some(stall) = plan.stall {
                std::thread::sleep(stall);
                return;
            }
        }
        std::thread::sleep(plan.pause);
        if stream.write_all(chunk).and_then(|_| stream.flush()).is_err() {
            return;
        }
    }
}

/// Runs `remora -install` for version 1.0 from `url`; returns stdout.
fn install(dir: &std::path::Path, url: &str, checksum: &str, env: &[(&str, &str)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_remora"))
        .args(["-install", "-cli-dir"])
        .arg(dir)
        .args(["-cli-version", "1.0", "-cli-url", url, "-cli-checksum", checksum])
        .envs(env.iter().copied())
        .output()
        .expect("run remora");
    assert_eq!(out.status.code(), Some(0));
    String::from_utf8(out.stdout).unwrap()
}

/// The `fetch` object of a facts line, which must be its last member in
/// the documented key order: (bytes, ms, longestPauseMs).
fn fetch_of(facts: &str) -> (u64, u64, u64) {
    assert!(facts.starts_with("__INSTALL_RESULT__{"), "{facts}");
    let (_, tail) = facts.split_once(r#","fetch":{"bytes":"#).expect(facts);
    let tail = tail.strip_suffix("}}").expect(facts);
    let (bytes, tail) = tail.split_once(r#","ms":"#).expect(facts);
    let (ms, pause) = tail.split_once(r#","longestPauseMs":"#).expect(facts);
    let num = |s: &str| s.parse::<u64>().unwrap_or_else(|_| panic!("{facts}"));
    (num(bytes), num(ms), num(pause))
}

fn blob() -> Vec<u8> {
    // Incompressible padding keeps the blob large enough to cut up.
    let noise: String = (0..60_000u32)
        .map(|i| format!("{:x}", i.wrapping_mul(2_654_435_761)))
        .collect();
    zst(format!("#!/bin/sh\necho fake-cli\n# {noise}\n").as_bytes())
}

#[test]
fn a_slow_download_reports_progress_then_facts_with_fetch_last() {
    let tmp = tempfile::tempdir().unwrap();
    let body = blob();
    let total = body.len();
    let url = serve(Plan {
        body: body.clone(),
        length: true,
        pieces: 5,
        pause: Duration::from_millis(600),
        stall: None,
    });
    let out = install(&tmp.path().join("cli"), &url, &sha(&body), &[]);
    let lines: Vec<&str> = out.lines().collect();
    let (facts, progress) = lines.split_last().unwrap();
    assert!(!facts.contains("cliError"), "{facts}");
    assert_eq!(
        progress.first().copied(),
        Some(format!(r#"__INSTALL_PROGRESS__{{"phase":"download","bytes":0,"total":{total}}}"#).as_str())
    );
    // ~3 s of body on a 1 s ticker: a few more lines, counts never falling.
    assert!(progress.len() >= 3, "{out}");
    let mut last = 0;
    for line in progress {
        let v: serde_json::Value =
            serde_json::from_str(line.strip_prefix("__INSTALL_PROGRESS__").expect(line)).unwrap();
        assert_eq!(v["phase"], "download");
        assert_eq!(v["total"].as_u64(), Some(total as u64));
        let bytes = v["bytes"].as_u64().unwrap();
        assert!(bytes >= last && bytes <= total as u64, "{out}");
        last = bytes;
    }
    let (bytes, ms, pause) = fetch_of(facts);
    assert_eq!(bytes, total as u64);
    assert!((2500..20_000).contains(&ms), "{facts}");
    assert!((500..ms).contains(&pause), "{facts}");
    assert!(tmp.path().join("cli/1.0").exists());
}

#[test]
fn without_content_length_progress_has_no_total() {
    let tmp = tempfile::tempdir().unwrap();
    let body = blob();
    let url = serve(Plan {
        body: body.clone(),
        length: false,
        pieces: 3,
        pause: Duration::from_millis(600),
        stall: None,
    });
    let out = install(&tmp.path().join("cli"), &url, &sha(&body), &[]);
    let first = out.lines().next().unwrap();
    assert_eq!(first, r#"__INSTALL_PROGRESS__{"phase":"download","bytes":0}"#);
    assert!(out.lines().all(|l| !l.contains("\"total\"")), "{out}");
    assert_eq!(fetch_of(out.lines().last().unwrap()).0, body.len() as u64);
}

#[test]
fn a_stalled_download_is_aborted_with_its_own_cli_error() {
    let tmp = tempfile::tempdir().unwrap();
    let body = blob();
    let url = serve(Plan {
        body: body.clone(),
        length: true,
        pieces: 4,
        pause: Duration::ZERO,
        stall: Some(Duration::from_secs(30)),
    });
    let piece = body.len().div_ceil(4);
    let started = std::time::Instant::now();
    let out = install(
        &tmp.path().join("cli"),
        &url,
        &sha(&body),
        &[("REMORA_TEST_INSTALL_STALL_MS", "1000")],
    );
    assert!(started.elapsed() < Duration::from_secs(10), "the abort did not fire");
    let facts = out.lines().last().unwrap();
    let want = format!(
        r#","cliError":"download stalled: no data for 1s after {piece}/{} bytes","fetch":"#,
        body.len()
    );
    assert!(facts.contains(&want), "{facts}");
    let (bytes, _, pause) = fetch_of(facts);
    assert_eq!(bytes, piece as u64);
    assert!(pause >= 1000, "{facts}");
    assert!(!tmp.path().join("cli/1.0").exists());
}

/// The names in `dir`, sorted (empty when it does not exist).
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A server that drips the body (a piece every 400 ms, each far inside
/// the 60 s read-idle bound), so only an overall deadline ends it.
fn dripping(body: &[u8]) -> String {
    serve(Plan {
        body: body.to_vec(),
        length: true,
        pieces: 200,
        pause: Duration::from_millis(400),
        stall: None,
    })
}

/// Audit D14: `-cli-download-timeout` bounds the whole download. Without
/// it a server sending a byte every 45 s kept `-install` running until it
/// was killed, with no facts line and a `.dl` temporary left behind.
#[test]
fn a_download_past_its_deadline_ends_with_a_cli_error_and_no_temporary() {
    let tmp = tempfile::tempdir().unwrap();
    let body = blob();
    let url = dripping(&body);
    let dir = tmp.path().join("cli");
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_remora"))
        .args(["-install", "-cli-download-timeout", "1.5s", "-cli-dir"])
        .arg(&dir)
        .args(["-cli-version", "1.0", "-cli-url", &url, "-cli-checksum", &sha(&body)])
        .output()
        .expect("run remora");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(10), "the deadline did not fire");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let facts = stdout.lines().last().unwrap();
    let want = r#","cliError":"download timed out: not complete within 1.5s after "#;
    assert!(facts.contains(want), "{facts}");
    assert!(
        facts.contains(&format!("/{} bytes\",\"fetch\":", body.len())),
        "{facts}"
    );
    let (bytes, ms, _) = fetch_of(facts);
    assert!(bytes < body.len() as u64, "{facts}");
    assert!((1500..10_000).contains(&ms), "{facts}");
    assert_eq!(names(&dir), Vec::<String>::new(), "no temporary left");
}

/// The same deadline from `remora.conf` beside the binary: `-install` is
/// run by Desktop with an argv of its own, so the file is what reaches it.
/// The default stays the reference's: no deadline.
#[test]
fn the_download_deadline_comes_from_the_settings_file_too() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let srv = tmp.path().join("srv");
    std::fs::create_dir(&srv).unwrap();
    let bin = srv.join("server");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_remora"), &bin).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_remora"), &bin).unwrap();
    }
    let config = |bin: &std::path::Path| {
        let out = Command::new(bin).arg("-print-config").output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(config(&bin).contains("cli-download-timeout = 0s"), "{}", config(&bin));
    let conf = srv.join("remora.conf");
    std::fs::write(&conf, "cli-download-timeout = 1s\n").unwrap();
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(config(&bin).contains("cli-download-timeout = 1s"), "{}", config(&bin));
    let body = blob();
    let url = dripping(&body);
    let dir = tmp.path().join("cli");
    let out = Command::new(&bin)
        .args(["-install", "-cli-dir"])
        .arg(&dir)
        .args(["-cli-version", "1.0", "-cli-url", &url])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("download timed out: not complete within 1s after "),
        "{stdout}"
    );
    assert_eq!(names(&dir), Vec::<String>::new(), "no temporary left");
}
