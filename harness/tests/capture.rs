//! `harness capture`: a scripted client session (two connections, spawn,
//! stdin with offsets and a large write, reattach, kill, a files and a git
//! call) recorded through the relay into a probe, which then replays under
//! `harness diff` with no difference, uses `$TOKEN`, and keeps the large
//! line as a fixture.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "s3cret-capture-token";

/// One client connection that reads until what it waits for arrived.
struct Client {
    w: UnixStream,
    r: BufReader<UnixStream>,
    seen: Vec<serde_json::Value>,
}

impl Client {
    fn connect(p: &Path) -> Client {
        // The socket file appears at bind(), a moment before listen().
        let deadline = Instant::now() + Duration::from_secs(20);
        let s = loop {
            match UnixStream::connect(p) {
                Ok(s) => break s,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("{}: {e}", p.display()),
            }
        };
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Client {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
            seen: Vec::new(),
        }
    }

    fn until(&mut self, what: &str, pred: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        if let Some(i) = self.seen.iter().position(&pred) {
            return self.seen.remove(i);
        }
        loop {
            let mut l = String::new();
            assert!(self.r.read_line(&mut l).unwrap() > 0, "closed while waiting for {what}");
            let v: serde_json::Value = serde_json::from_str(&l).unwrap();
            if pred(&v) {
                return v;
            }
            self.seen.push(v);
        }
    }

    fn call(&mut self, id: u64, method: &str, params: serde_json::Value) -> serde_json::Value {
        let line = serde_json::json!({"jsonrpc":"2.0","id":id,"method":method,"params":params,"auth":TOKEN});
        writeln!(self.w, "{line}").unwrap();
        self.until(method, |v| v.get("id") == Some(&serde_json::json!(id)))
    }

    fn exit(&mut self, pid: &str) -> serde_json::Value {
        self.until("exit frame", |v| {
            v.get("processId").and_then(|p| p.as_str()) == Some(pid)
                && v.get("stream").and_then(|s| s.as_str()) == Some("exit")
        })
    }
}

fn b64(s: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Kills whatever still mentions the test directory (the daemon and the
/// capture) if the test fails half-way.
struct Reaper(std::path::PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        let needle = self.0.to_string_lossy().into_owned();
        let Ok(rd) = std::fs::read_dir("/proc") else { return };
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if pid != std::process::id() as i32 && String::from_utf8_lossy(&cmd).contains(&needle) {
                // SAFETY: kill(2) on a process this test started.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

#[test]
fn a_captured_session_replays_identically() {
    let remora = common::remora();
    let dir = tempfile::tempdir().unwrap();
    let _reaper = Reaper(dir.path().to_path_buf());
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let daemon_sock = dir.path().join("d.sock");
    let relay_sock = dir.path().join("relay.sock");
    let (tok_daemon, tok_capture) = (dir.path().join("t1"), dir.path().join("t2"));
    std::fs::write(&tok_daemon, format!("{TOKEN}\n")).unwrap();
    std::fs::write(&tok_capture, format!("{TOKEN}\n")).unwrap();
    let out_dir = dir.path().join("captured");
    std::fs::create_dir(&out_dir).unwrap();
    let probe = out_dir.join("session.probe");

    let mut d = Command::new(&remora)
        .args(["-serve", "-socket"])
        .arg(&daemon_sock)
        .arg("-token-file")
        .arg(&tok_daemon)
        .current_dir(&root)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(d.stdout.take().unwrap()).read_line(&mut banner).unwrap();
    assert!(banner.contains("listening"), "{banner}");
    let mut cap = Command::new(common::harness())
        .args(["capture", "--socket"])
        .arg(&daemon_sock)
        .arg("--listen")
        .arg(&relay_sock)
        .arg("--out")
        .arg(&probe)
        .arg("--token-file")
        .arg(&tok_capture)
        .arg("--root")
        .arg(&root)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !relay_sock.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }

    let mut c1 = Client::connect(&relay_sock);
    let mut c2 = Client::connect(&relay_sock);
    let r = c1.call(
        1,
        "files.stat",
        serde_json::json!({"path": root.join("missing").to_str().unwrap()}),
    );
    assert!(r.get("error").is_some() || r.get("result").is_some(), "{r}");
    c1.call(2, "git.info", serde_json::json!({"path": root.to_str().unwrap()}));
    // A child reading one line; stdin with offsets: append, duplicate, rest.
    let reader = "agent-7f3a-reader";
    let r = c1.call(
        3,
        "process.spawn",
        serde_json::json!({"id":reader,"command":"sh","args":["-c","read -r x; printf '%s' \"$x\""]}),
    );
    assert_eq!(r["result"]["success"], true, "{r}");
    let w = |data: &[u8], off: u64| serde_json::json!({"id":reader,"data":b64(data),"offset":off});
    assert_eq!(c1.call(4, "process.stdin", w(b"abc", 0))["result"]["applied"], 3);
    assert_eq!(c1.call(5, "process.stdin", w(b"abc", 0))["result"]["duplicate"], true);
    assert_eq!(c1.call(6, "process.stdin", w(b"cd\n", 2))["result"]["applied"], 5);
    c1.exit(reader);
    // Reattach from the other connection replays it.
    let r = c2.call(7, "process.reattach", serde_json::json!({"id":reader,"fromSeq":0}));
    assert_eq!(r["result"]["found"], true, "{r}");
    c2.exit(reader);
    // A large stdin write (a fixture in the probe), then a kill.
    let counter = "agent-counter";
    c2.call(
        8,
        "process.spawn",
        serde_json::json!({"id":counter,"command":"sh","args":["-c","head -c 5000 | wc -c"]}),
    );
    c2.call(
        9,
        "process.stdin",
        serde_json::json!({"id":counter,"data":b64(&[b'x'; 5000])}),
    );
    c2.exit(counter);
    let sleeper = "agent-sleeper";
    c2.call(
        10,
        "process.spawn",
        serde_json::json!({"id":sleeper,"command":"sleep","args":["30"]}),
    );
    c2.call(11, "process.kill", serde_json::json!({"id":sleeper,"signal":"KILL"}));
    c2.exit(sleeper);
    // Capture waits for the relays of closed connections before writing
    // the probe, so both closes are recorded without a pause here.
    drop(c1);
    drop(c2);
    // SAFETY: SIGTERM to the capture child we started.
    unsafe {
        libc::kill(cap.id() as i32, libc::SIGTERM);
    }
    let st = cap.wait().unwrap();
    // Stop the daemon.
    if let Ok(mut s) = UnixStream::connect(&daemon_sock) {
        let _ = writeln!(
            s,
            "{{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"server.shutdown\",\"auth\":\"{TOKEN}\"}}"
        );
        let mut sink = String::new();
        let _ = BufReader::new(s).read_line(&mut sink);
    }
    let _ = d.wait();
    assert!(st.success(), "capture exited {st:?}");

    let text = std::fs::read_to_string(&probe).unwrap();
    assert!(!text.contains(TOKEN), "the token leaked:\n{text}");
    assert!(!text.contains("agent-"), "process ids not rewritten:\n{text}");
    assert!(!text.contains(root.to_str().unwrap()), "paths not rewritten:\n{text}");
    for needle in [
        "call c1 1 files.stat {\"path\":\"$ROOT/missing\"}",
        "call c1 3 process.spawn {\"id\":\"p1\"",
        "call c1 5 process.stdin",
        "await-exit c1 p1",
        // The replayed frames arrive before the reply: a send, then awaits.
        "send c2 {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"process.reattach\",\"params\":{\"id\":\"p1\",\"fromSeq\":0},\"auth\":\"$TOKEN\"}\nawait-exit c2 p1\nawait c2 7",
        "call c2 11 process.kill {\"id\":\"p3\",\"signal\":\"KILL\"}",
        "await-exit c2 p3",
        "close c1",
        "close c2",
        "$file(session.fixtures/1.line)",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let fixture = std::fs::read_to_string(out_dir.join("session.fixtures/1.line")).unwrap();
    assert!(
        fixture.contains("$TOKEN") && fixture.len() > 4096,
        "{}",
        &fixture[..200]
    );

    // Replayed on both sides: identical.
    let diff = common::run(&[
        "diff",
        "--probes",
        out_dir.to_str().unwrap(),
        "--reference",
        remora.to_str().unwrap(),
        "--candidate",
        remora.to_str().unwrap(),
    ]);
    let dt = String::from_utf8_lossy(&diff.stdout).into_owned() + &String::from_utf8_lossy(&diff.stderr);
    assert!(diff.status.success(), "{dt}\n{text}");
    assert!(dt.contains("1 probes: 1 identical"), "{dt}");
    // And the replay saw what the session saw: the reader's output and the
    // counter's byte count.
    let rec = dir.path().join("transcripts");
    let record = common::run(&[
        "record",
        "--probes",
        out_dir.to_str().unwrap(),
        "--binary",
        remora.to_str().unwrap(),
        "--out",
        rec.to_str().unwrap(),
    ]);
    assert!(record.status.success(), "{}", String::from_utf8_lossy(&record.stderr));
    let t = std::fs::read_to_string(rec.join("session.txt")).unwrap();
    assert!(t.contains("abcd") && t.contains("5000"), "{t}");
}
