//! `harness capture`: a scripted client session (two connections, spawn,
//! stdin with offsets and a large write, reattach, kill, a files and a git
//! call) recorded through the relay into a probe, which then replays under
//! `harness diff` with no difference, uses `$TOKEN`, and keeps the large
//! line as a fixture; and a session spoken over the capture's own
//! stdin/stdout (its `-bridge`-like mode), replayed through `-bridge`.

use crate::common;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const TOKEN: &str = "s3cret-capture-token";

/// One client connection that reads until what it waits for arrived. A
/// thread reads its lines, so a silent peer fails the test after 20 s
/// instead of hanging it, whether the connection is a socket or a pipe.
struct Client {
    w: Box<dyn Write + Send>,
    /// The socket, shut down on drop so the reader thread's clone closes too.
    sock: Option<UnixStream>,
    lines: mpsc::Receiver<String>,
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
        let mut c = Client::over(s.try_clone().unwrap(), s.try_clone().unwrap());
        c.sock = Some(s);
        c
    }

    /// A client speaking over any reader/writer pair (e.g. a child's pipes).
    fn over(r: impl Read + Send + 'static, w: impl Write + Send + 'static) -> Client {
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Client {
            w: Box::new(w),
            sock: None,
            lines,
            seen: Vec::new(),
        }
    }

    fn until(&mut self, what: &str, pred: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        if let Some(i) = self.seen.iter().position(&pred) {
            return self.seen.remove(i);
        }
        loop {
            let l = match self.lines.recv_timeout(Duration::from_secs(20)) {
                Ok(l) => l,
                Err(e) => panic!("no {what} ({e:?})"),
            };
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

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(s) = &self.sock {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
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

/// A real daemon in a fresh directory, and where a capture writes.
struct Fixture {
    remora: PathBuf,
    root: PathBuf,
    daemon_sock: PathBuf,
    tok_capture: PathBuf,
    out_dir: PathBuf,
    probe: PathBuf,
    daemon: Child,
    _reaper: Reaper,
    dir: tempfile::TempDir,
}

impl Fixture {
    fn start() -> Fixture {
        let remora = common::remora();
        let dir = tempfile::tempdir().unwrap();
        let _reaper = Reaper(dir.path().to_path_buf());
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let daemon_sock = dir.path().join("d.sock");
        let (tok_daemon, tok_capture) = (dir.path().join("t1"), dir.path().join("t2"));
        std::fs::write(&tok_daemon, format!("{TOKEN}\n")).unwrap();
        std::fs::write(&tok_capture, format!("{TOKEN}\n")).unwrap();
        let out_dir = dir.path().join("captured");
        std::fs::create_dir(&out_dir).unwrap();
        let probe = out_dir.join("session.probe");
        let mut daemon = Command::new(&remora)
            // No developer profile under the daemon (see the script).
            .env(
                "SHELL",
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../daemon/tests/it/support/quick-login-shell"
                ),
            )
            .args(["-serve", "-socket"])
            .arg(&daemon_sock)
            .arg("-token-file")
            .arg(&tok_daemon)
            .current_dir(&root)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut banner = String::new();
        BufReader::new(daemon.stdout.take().unwrap())
            .read_line(&mut banner)
            .unwrap();
        assert!(banner.contains("listening"), "{banner}");
        Fixture {
            remora,
            root,
            daemon_sock,
            tok_capture,
            out_dir,
            probe,
            daemon,
            _reaper,
            dir,
        }
    }

    /// `harness capture` relaying to the daemon, writing `self.probe`.
    fn capture(&self) -> Command {
        let mut c = Command::new(common::harness());
        c.args(["capture", "--socket"])
            .arg(&self.daemon_sock)
            .arg("--out")
            .arg(&self.probe)
            .arg("--token-file")
            .arg(&self.tok_capture)
            .arg("--root")
            .arg(&self.root);
        c
    }

    fn stop_daemon(&mut self) {
        if let Ok(mut s) = UnixStream::connect(&self.daemon_sock) {
            let _ = writeln!(
                s,
                "{{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"server.shutdown\",\"auth\":\"{TOKEN}\"}}"
            );
            let mut sink = String::new();
            let _ = BufReader::new(s).read_line(&mut sink);
        }
        let _ = self.daemon.wait();
    }

    /// Replays the captured probe on both sides (it must be identical) and
    /// returns its recorded transcript, to check what the replay saw.
    fn replay(&self, probe_text: &str) -> String {
        let remora = self.remora.to_str().unwrap();
        let diff = common::run(&[
            "diff",
            "--probes",
            self.out_dir.to_str().unwrap(),
            "--reference",
            remora,
            "--candidate",
            remora,
        ]);
        let dt = String::from_utf8_lossy(&diff.stdout).into_owned() + &String::from_utf8_lossy(&diff.stderr);
        assert!(diff.status.success(), "{dt}\n{probe_text}");
        assert!(dt.contains("1 probes: 1 identical"), "{dt}");
        let rec = self.dir.path().join("transcripts");
        let record = common::run(&[
            "record",
            "--probes",
            self.out_dir.to_str().unwrap(),
            "--binary",
            remora,
            "--out",
            rec.to_str().unwrap(),
        ]);
        assert!(record.status.success(), "{}", String::from_utf8_lossy(&record.stderr));
        std::fs::read_to_string(rec.join("session.txt")).unwrap()
    }
}

#[test]
fn a_captured_session_replays_identically() {
    let mut fx = Fixture::start();
    let root = fx.root.clone();
    let relay_sock = fx.dir.path().join("relay.sock");
    let mut cap = fx.capture().arg("--listen").arg(&relay_sock).spawn().unwrap();
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
    fx.stop_daemon();
    assert!(st.success(), "capture exited {st:?}");

    let text = std::fs::read_to_string(&fx.probe).unwrap();
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
        "await-exit c2 p3",
        "close c1",
        "close c2",
        "$file(session.fixtures/1.line)",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    // The kill's reply and the killed process's exit frame race: the reply
    // first is a `call`, the exit first is a `send` with the awaits after it.
    let kill_as_call = "call c2 11 process.kill {\"id\":\"p3\",\"signal\":\"KILL\"}";
    let kill_as_send = "send c2 {\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"process.kill\",\"params\":{\"id\":\"p3\",\"signal\":\"KILL\"},\"auth\":\"$TOKEN\"}\nawait-exit c2 p3\nawait c2 11";
    assert!(
        text.contains(kill_as_call) || text.contains(kill_as_send),
        "the kill is neither a call nor a send with its awaits in:\n{text}"
    );
    let fixture = std::fs::read_to_string(fx.out_dir.join("session.fixtures/1.line")).unwrap();
    assert!(
        fixture.contains("$TOKEN") && fixture.len() > 4096,
        "{}",
        &fixture[..200]
    );

    // Replayed on both sides: identical; and the replay saw what the
    // session saw: the reader's output and the counter's byte count.
    let t = fx.replay(&text);
    assert!(t.contains("abcd") && t.contains("5000"), "{t}");
}

/// The capture's stdio mode: a client speaks to it over its stdin/stdout
/// as it would to `-bridge`; the end of stdin ends the session. The probe
/// starts with `connect c1 bridge`, so `harness diff` replays it through
/// each daemon's own `-bridge` mode.
#[test]
fn a_session_captured_over_stdio_replays_through_bridge() {
    let mut fx = Fixture::start();
    let mut cap = fx
        .capture()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut c = Client::over(cap.stdout.take().unwrap(), cap.stdin.take().unwrap());
    assert_eq!(c.call(1, "server.ping", serde_json::json!({}))["result"]["pong"], true);
    let pid = "agent-bridge-echo";
    let r = c.call(
        2,
        "process.spawn",
        serde_json::json!({"id":pid,"command":"sh","args":["-c","read -r x; echo \"got $x\""]}),
    );
    assert_eq!(r["result"]["success"], true, "{r}");
    let r = c.call(3, "process.stdin", serde_json::json!({"id":pid,"data":b64(b"hi\n")}));
    assert_eq!(r["result"]["applied"], 3, "{r}");
    c.exit(pid);
    // Closing its stdin ends the capture, which then writes the probe.
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(20);
    let st = loop {
        if let Some(st) = cap.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "capture did not end with its stdin");
        std::thread::sleep(Duration::from_millis(10));
    };
    fx.stop_daemon();
    assert!(st.success(), "capture exited {st:?}");

    let text = std::fs::read_to_string(&fx.probe).unwrap();
    assert!(!text.contains(TOKEN), "the token leaked:\n{text}");
    assert!(!text.contains("agent-"), "process ids not rewritten:\n{text}");
    for needle in [
        "connect c1 bridge\n",
        "call c1 1 server.ping {}",
        "call c1 2 process.spawn {\"id\":\"p1\"",
        "call c1 3 process.stdin",
        "await-exit c1 p1",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let t = fx.replay(&text);
    // The replay went through `-bridge` and saw the child's answer.
    assert!(t.contains("c1 p1 stdout\tgot hi\\n"), "{t}");
    assert!(t.contains("end c1 bridge\texit=0"), "{t}");
}
