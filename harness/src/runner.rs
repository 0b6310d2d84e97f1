//! Running one probe against one binary and producing its [`Transcript`].
//!
//! Each run gets a fresh temp directory (`$RUN`) holding the fixture root
//! (`$RUN/root`, the daemon's and every command's working directory), the
//! daemon's `HOME` (`$RUN/home`), its socket (`$RUN/rpc.sock`), token file
//! and log (`$RUN/daemon.log`, the daemon's stderr: a regular file, so a
//! self-daemonizing binary keeps writing to it).
//!
//! The daemon is started as `<bin> -serve -socket $SOCKET -token-file
//! $RUN/token` and is ready when its first stdout line (the banner)
//! arrives. It is stopped with an authenticated `server.shutdown`, then
//! the socket file must vanish; anything still running whose command line
//! mentions `$RUN` is killed.

use crate::fixture;
use crate::normalize::Normalizer;
use crate::probe::{Ctx, Probe, StepKind};
use crate::transcript::{Timing, Transcript};
use base64::Engine;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Values larger than this are recorded as length + hash.
const INLINE_LIMIT: usize = 16 * 1024;
/// The id of the end-of-probe barrier ping.
const BARRIER_ID: &str = "\"__harness_barrier__\"";

/// How to run probes.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub bin: PathBuf,
    pub renames: Vec<(String, String)>,
}

/// One reply (any non-stream line) received on a connection.
#[derive(Debug)]
struct Reply {
    id: Option<Value>,
    raw: Vec<u8>,
    at: Instant,
    taken: bool,
}

/// The stream frames one connection received for one process.
#[derive(Debug, Default)]
struct ProcStream {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    seqs: Vec<i64>,
    shapes: BTreeSet<Vec<u8>>,
    exit: Option<Vec<u8>>,
    frames: usize,
    frames_after_exit: usize,
    recorded_frames: Option<usize>,
    bad: Vec<String>,
}

#[derive(Debug, Default)]
struct ConnState {
    replies: Vec<Reply>,
    procs: BTreeMap<String, ProcStream>,
    frames: usize,
    eof: bool,
}

type Shared = Arc<(Mutex<ConnState>, Condvar)>;

struct Conn {
    writer: Option<Box<dyn Write + Send>>,
    shared: Shared,
    stream: Option<UnixStream>,
    bridge: Option<Child>,
    bridge_err: Option<std::thread::JoinHandle<Vec<u8>>>,
}

/// Replaces `"seq":<n>` with `"seq":<seq>` and `"data":"…"` with `"data":<data>`.
fn frame_shape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len().min(256));
    let mut i = 0;
    while i < raw.len() {
        if raw[i..].starts_with(b"\"seq\":") {
            out.extend_from_slice(b"\"seq\":<seq>");
            i += 6;
            while i < raw.len() && (raw[i].is_ascii_digit() || raw[i] == b'-') {
                i += 1;
            }
        } else if raw[i..].starts_with(b"\"data\":\"") {
            out.extend_from_slice(b"\"data\":<data>");
            i += 8;
            while i < raw.len() && raw[i] != b'"' {
                i += 1;
            }
            i += 1;
        } else {
            out.push(raw[i]);
            i += 1;
        }
    }
    out
}

fn absorb_line(st: &mut ConnState, line: Vec<u8>) {
    let parsed: Option<Value> = serde_json::from_slice(&line).ok();
    if let Some(Value::Object(m)) = &parsed {
        if m.get("type").and_then(Value::as_str) == Some("stream") {
            st.frames += 1;
            let pid = m
                .get("processId")
                .map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))
                .unwrap_or_default();
            let ps = st.procs.entry(pid).or_default();
            ps.frames += 1;
            if ps.exit.is_some() {
                ps.frames_after_exit += 1;
            }
            match m.get("seq").and_then(Value::as_i64) {
                Some(s) => ps.seqs.push(s),
                None => ps.bad.push("frame without integer seq".into()),
            }
            let stream = m.get("stream").and_then(Value::as_str).unwrap_or("");
            match stream {
                "stdout" | "stderr" => {
                    let data = m.get("data").and_then(Value::as_str).unwrap_or("");
                    match base64::engine::general_purpose::STANDARD.decode(data) {
                        Ok(d) => {
                            if stream == "stdout" {
                                ps.stdout.extend(d)
                            } else {
                                ps.stderr.extend(d)
                            }
                        }
                        Err(e) => ps.bad.push(format!("bad base64 in data: {e}")),
                    }
                    ps.shapes.insert(frame_shape(&line));
                }
                "exit" => {
                    if ps.exit.is_some() {
                        ps.bad.push("second exit frame".into());
                    }
                    ps.exit = Some(frame_shape(&line));
                }
                other => {
                    ps.bad.push(format!("unknown stream {other:?}"));
                    ps.shapes.insert(frame_shape(&line));
                }
            }
            return;
        }
    }
    let id = match &parsed {
        Some(Value::Object(m)) => m.get("id").cloned(),
        _ => None,
    };
    st.replies.push(Reply {
        id,
        raw: line,
        at: Instant::now(),
        taken: false,
    });
}

fn spawn_reader(mut r: impl Read + Send + 'static, shared: Shared) {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = match r.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            let mut lines = Vec::new();
            while let Some(pos) = buf.iter().position(|c| *c == b'\n') {
                let mut line: Vec<u8> = buf.drain(..=pos).collect();
                line.pop();
                lines.push(line);
            }
            if !lines.is_empty() {
                let (m, cv) = &*shared;
                let mut st = m.lock().unwrap();
                for l in lines {
                    absorb_line(&mut st, l);
                }
                cv.notify_all();
            }
        }
        let (m, cv) = &*shared;
        let mut st = m.lock().unwrap();
        if !buf.is_empty() {
            let mut l = std::mem::take(&mut buf);
            l.extend_from_slice(b"<no trailing newline>");
            absorb_line(&mut st, l);
        }
        st.eof = true;
        cv.notify_all();
    });
}

/// Whether a reply id equals the awaited one (numbers compare as f64).
fn id_matches(want: &Value, got: &Option<Value>) -> bool {
    match (want, got) {
        (_, None) => false,
        (Value::Number(a), Some(Value::Number(b))) => a.as_f64() == b.as_f64(),
        (a, Some(b)) => a == b,
    }
}

fn bounded(v: &[u8]) -> Vec<u8> {
    if v.len() <= INLINE_LIMIT {
        v.to_vec()
    } else {
        format!("<{} bytes sha256:{}>", v.len(), crate::fixture::describe_content(v)).into_bytes()
    }
}

/// Describes seq runs: the starts of maximal +1 runs, e.g. `runs from 1`.
fn seq_runs(seqs: &[i64]) -> String {
    if seqs.is_empty() {
        return "no frames".into();
    }
    let mut starts = vec![seqs[0]];
    for w in seqs.windows(2) {
        if w[1] != w[0] + 1 {
            starts.push(w[1]);
        }
    }
    let s: Vec<String> = starts.iter().map(|s| s.to_string()).collect();
    format!("runs from {}", s.join(", "))
}

/// A started daemon.
struct Daemon {
    launcher: Child,
}

/// Per-run state.
struct Runner<'a> {
    probe: &'a Probe,
    cfg: &'a RunConfig,
    ctx: Ctx,
    run: PathBuf,
    root: PathBuf,
    socket: PathBuf,
    log: PathBuf,
    norm: Normalizer,
    t: Transcript,
    conns: BTreeMap<String, Conn>,
    daemon: Option<Daemon>,
    daemon_started: bool,
    sent: HashMap<(String, String), Instant>,
    /// (conn, request id) → process id, for spawn/reattach requests.
    proc_requests: HashMap<(String, String), String>,
    /// (conn, process id) whose spawn/reattach failed: no frames will come.
    dead_procs: BTreeSet<(String, String)>,
}

/// Runs `probe` against `cfg.bin`; never panics on daemon misbehaviour,
/// everything observed goes into the transcript.
pub fn run_probe(probe: &Probe, cfg: &RunConfig) -> Result<Transcript, String> {
    let dir = tempfile::Builder::new()
        .prefix("hp")
        .tempdir()
        .map_err(|e| format!("tempdir: {e}"))?;
    let run = dir.path().to_path_buf();
    let root = run.join("root");
    let home = run.join("home");
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
    let socket = run.join("rpc.sock");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let ctx = Ctx {
        root: s(&root),
        token: probe.token(),
        socket: s(&socket),
        run: s(&run),
        home: s(&home),
    };
    let norm = Normalizer::new(
        &[
            (s(&root), "$ROOT".into()),
            (s(&socket), "$SOCKET".into()),
            (s(&run), "$RUN".into()),
            (s(&cfg.bin), "$BIN".into()),
        ],
        &cfg.renames,
    )
    .with_masks(&probe.masks);
    let mut r = Runner {
        probe,
        cfg,
        ctx,
        log: run.join("daemon.log"),
        run,
        root,
        socket,
        norm,
        t: Transcript {
            probe: probe.name.clone(),
            ..Default::default()
        },
        conns: BTreeMap::new(),
        daemon: None,
        daemon_started: false,
        sent: HashMap::new(),
        proc_requests: HashMap::new(),
        dead_procs: BTreeSet::new(),
    };
    let result = r.steps();
    r.finish();
    result?;
    Ok(r.t)
}

impl Runner<'_> {
    fn timeout(&self) -> Duration {
        self.probe.timeout
    }

    fn env(&self) -> Vec<(String, String)> {
        let mut e = fixture::base_env(&self.run);
        e.extend(self.probe.env.iter().cloned());
        e
    }

    fn steps(&mut self) -> Result<(), String> {
        for step in &self.probe.steps {
            let l = step.line;
            if step.kind.is_fixture() {
                fixture::build(&step.kind, &self.ctx, &self.root, &self.run)
                    .map_err(|e| format!("{}:{l}: fixture: {e}", self.probe.path.display()))?;
                continue;
            }
            match &step.kind {
                StepKind::Start { args } => {
                    let args: Vec<String> = args.iter().map(|a| a.expand_str(&self.ctx)).collect();
                    self.start(l, &args);
                }
                StepKind::Connect { conn, bridge } => self.connect(l, conn, *bridge),
                StepKind::Send { conn, line, len } => {
                    let mut bytes = line.expand(&self.ctx);
                    if let Some(len) = len {
                        let fill = len.saturating_sub(bytes.len());
                        bytes = line.expand_fill(&self.ctx, fill);
                    }
                    let id = serde_json::from_slice::<Value>(&bytes)
                        .ok()
                        .and_then(|v| v.get("id").cloned());
                    bytes.push(b'\n');
                    self.write(l, conn, &bytes, id);
                }
                StepKind::Raw { conn, bytes } => {
                    let b = bytes.expand(&self.ctx);
                    self.write(l, conn, &b, None);
                }
                StepKind::Call {
                    conn,
                    id,
                    method,
                    params,
                } => {
                    let mut line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\"").into_bytes();
                    if let Some(p) = params {
                        line.extend_from_slice(b",\"params\":");
                        line.extend(p.expand(&self.ctx));
                    }
                    line.extend_from_slice(b",\"auth\":");
                    line.extend(json_string(&self.ctx.token));
                    line.extend_from_slice(b"}\n");
                    let idv: Value = serde_json::from_str(id).unwrap_or(Value::Null);
                    self.write(l, conn, &line, Some(idv));
                    self.await_reply(l, conn, id);
                }
                StepKind::Await { conn, id } => self.await_reply(l, conn, id),
                StepKind::AwaitExit { conn, proc_id } => self.await_exit(l, conn, proc_id),
                StepKind::AwaitOutput {
                    conn,
                    proc_id,
                    stream,
                    needle,
                } => {
                    let needle = needle.expand(&self.ctx);
                    self.await_output(l, conn, proc_id, stream, &needle);
                }
                StepKind::AwaitFrames { conn, count } => {
                    let n = *count;
                    let ok = self.wait_conn(conn, |st| st.frames >= n || st.eof);
                    let v = match ok {
                        Some(true) => "reached".to_string(),
                        Some(false) => "connection closed or timeout first".to_string(),
                        None => "no such connection".to_string(),
                    };
                    self.t.push(format!("L{l} {conn} frames>={n}"), v);
                }
                StepKind::AwaitClose { conn } => self.await_close(l, conn),
                StepKind::AwaitGone => {
                    let deadline = Instant::now() + self.timeout().min(Duration::from_secs(10));
                    while self.socket.exists() && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    let v = if self.socket.exists() {
                        "socket still present"
                    } else {
                        "socket gone"
                    };
                    self.t.push(format!("L{l} socket"), v);
                }
                StepKind::Quiet { conn, ms } => {
                    std::thread::sleep(Duration::from_millis(*ms));
                    let v = self.take_unawaited(conn);
                    self.t.push(
                        format!("L{l} {conn} quiet"),
                        if v.is_empty() { b"silent".to_vec() } else { v },
                    );
                }
                StepKind::Close { conn } => self.close(l, conn),
                StepKind::Sleep { ms } => std::thread::sleep(Duration::from_millis(*ms)),
                StepKind::Run {
                    stdin,
                    env,
                    args,
                    timeout_ms,
                } => {
                    let stdin = stdin.as_ref().map(|s| s.expand(&self.ctx));
                    let env: Vec<(String, String)> =
                        env.iter().map(|(k, v)| (k.clone(), v.expand_str(&self.ctx))).collect();
                    let args: Vec<String> = args.iter().map(|a| a.expand_str(&self.ctx)).collect();
                    let to = timeout_ms.map(Duration::from_millis).unwrap_or(self.timeout());
                    self.run_cli(l, &args, &env, stdin, to);
                }
                StepKind::Snapshot => fixture::snapshot(&self.root, &self.norm, &format!("L{l} "), &mut self.t),
                StepKind::Log { pattern } => {
                    let log = std::fs::read(&self.log).unwrap_or_default();
                    let mut lines = Vec::new();
                    for line in log.split(|c| *c == b'\n') {
                        let n = self.norm.log_line(line);
                        if contains(&n, pattern.as_bytes()) {
                            lines.push(n);
                        }
                    }
                    self.t.push(format!("L{l} log {pattern}"), lines.join(&b'\n'));
                }
                _ => unreachable!("fixtures handled above"),
            }
        }
        Ok(())
    }

    fn start(&mut self, line: usize, extra: &[String]) {
        if self.daemon_started {
            return;
        }
        self.daemon_started = true;
        let token_file = self.run.join("token");
        if let Err(e) = std::fs::write(&token_file, &self.probe.token_file) {
            self.t
                .push(format!("L{line} start"), format!("cannot write token: {e}"));
            return;
        }
        let log = match std::fs::File::create(&self.log) {
            Ok(f) => f,
            Err(e) => {
                self.t.push(format!("L{line} start"), format!("cannot create log: {e}"));
                return;
            }
        };
        let mut cmd = Command::new(&self.cfg.bin);
        cmd.arg("-serve")
            .arg("-socket")
            .arg(&self.socket)
            .arg("-token-file")
            .arg(&token_file)
            .args(extra)
            .current_dir(&self.root)
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                self.t.push(format!("L{line} start"), format!("spawn failed: {e}"));
                return;
            }
        };
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut banner = Vec::new();
            let _ = r.read_until(b'\n', &mut banner);
            let _ = tx.send(banner);
            // Keep draining so a foreground daemon never sees a broken pipe.
            let _ = std::io::copy(&mut r, &mut std::io::sink());
        });
        let banner = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_default();
        let v = self.norm.output(&banner);
        self.t.push(format!("L{line} banner"), v);
        // A self-daemonizing launcher exits once the banner is out; the
        // socket may appear a moment after. Wait for it briefly.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !banner.is_empty() && !self.socket.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.daemon = Some(Daemon { launcher: child });
    }

    fn connect(&mut self, line: usize, name: &str, bridge: bool) {
        if !self.daemon_started {
            self.start(line, &[]);
        }
        let shared: Shared = Arc::new((Mutex::new(ConnState::default()), Condvar::new()));
        if bridge {
            let mut cmd = Command::new(&self.cfg.bin);
            cmd.arg("-bridge")
                .arg("-socket")
                .arg(&self.socket)
                .current_dir(&self.root)
                .env_clear()
                .envs(self.env())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            match cmd.spawn() {
                Ok(mut child) => {
                    let stdin: ChildStdin = child.stdin.take().expect("piped");
                    spawn_reader(child.stdout.take().expect("piped"), shared.clone());
                    let mut err = child.stderr.take().expect("piped");
                    let h = std::thread::spawn(move || {
                        let mut v = Vec::new();
                        let _ = err.read_to_end(&mut v);
                        v
                    });
                    self.conns.insert(
                        name.to_string(),
                        Conn {
                            writer: Some(Box::new(stdin)),
                            shared,
                            stream: None,
                            bridge: Some(child),
                            bridge_err: Some(h),
                        },
                    );
                }
                Err(e) => self
                    .t
                    .push(format!("L{line} connect {name}"), format!("bridge spawn failed: {e}")),
            }
            return;
        }
        match UnixStream::connect(&self.socket) {
            Ok(s) => {
                let r = s.try_clone().expect("clone socket");
                spawn_reader(r, shared.clone());
                let w = s.try_clone().expect("clone socket");
                self.conns.insert(
                    name.to_string(),
                    Conn {
                        writer: Some(Box::new(w)),
                        shared,
                        stream: Some(s),
                        bridge: None,
                        bridge_err: None,
                    },
                );
            }
            Err(e) => self.t.push(
                format!("L{line} connect {name}"),
                format!("connect failed: {}", e.kind()),
            ),
        }
    }

    fn write(&mut self, line: usize, conn: &str, bytes: &[u8], id: Option<Value>) {
        if !self.conns.contains_key(conn) {
            self.connect(line, conn, false);
        }
        let Some(c) = self.conns.get_mut(conn) else {
            self.t.push(format!("L{line} {conn} send"), "no connection");
            return;
        };
        let res = match c.writer.as_mut() {
            Some(w) => w.write_all(bytes).and_then(|_| w.flush()),
            None => Err(std::io::Error::other("closed")),
        };
        // A write to a peer that already closed is not recorded: whether it
        // fails depends on timing. The awaits that follow show the closure.
        let _ = res;
        if let Some(id) = id {
            self.sent.insert((conn.to_string(), id.to_string()), Instant::now());
            // Remember spawn/reattach requests so a failed one does not make
            // a later await-exit wait for frames that will never come.
            if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(bytes) {
                let method = m.get("method").and_then(Value::as_str).unwrap_or("");
                let pid = m.get("params").and_then(|p| p.get("id")).and_then(Value::as_str);
                if let (true, Some(pid)) = (matches!(method, "process.spawn" | "process.reattach"), pid) {
                    self.proc_requests
                        .insert((conn.to_string(), id.to_string()), pid.to_string());
                }
            }
        }
    }

    /// Waits until `cond` holds on `conn`'s state; `None` if no such conn.
    fn wait_conn(&self, conn: &str, mut cond: impl FnMut(&mut ConnState) -> bool) -> Option<bool> {
        let c = self.conns.get(conn)?;
        let (m, cv) = &*c.shared;
        let deadline = Instant::now() + self.timeout();
        let mut st = m.lock().unwrap();
        loop {
            if cond(&mut st) {
                return Some(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Some(false);
            }
            st = cv.wait_timeout(st, deadline - now).unwrap().0;
        }
    }

    fn await_reply(&mut self, line: usize, conn: &str, id: &str) {
        let want: Value = serde_json::from_str(id).unwrap_or(Value::Null);
        let mut got: Option<(Vec<u8>, Instant)> = None;
        let mut eof = false;
        let ok = self.wait_conn(conn, |st| {
            if let Some(r) = st.replies.iter_mut().find(|r| !r.taken && id_matches(&want, &r.id)) {
                r.taken = true;
                got = Some((r.raw.clone(), r.at));
                return true;
            }
            eof = st.eof;
            st.eof
        });
        let key = format!("L{line} {conn} reply {id}");
        match (ok, got) {
            (None, _) => self.t.push(key, "no such connection"),
            (_, Some((raw, at))) => {
                if let Some(sent) = self.sent.remove(&(conn.to_string(), want.to_string())) {
                    self.t.timings.push(Timing {
                        label: key.clone(),
                        micros: at.saturating_duration_since(sent).as_micros() as u64,
                    });
                }
                if let Some(pid) = self.proc_requests.remove(&(conn.to_string(), want.to_string())) {
                    let ok = serde_json::from_slice::<Value>(&raw)
                        .ok()
                        .and_then(|v| v.get("result").cloned());
                    let alive = ok.is_some_and(|r| {
                        r.get("success") == Some(&Value::Bool(true)) || r.get("found") == Some(&Value::Bool(true))
                    });
                    if !alive {
                        self.dead_procs.insert((conn.to_string(), pid));
                    }
                }
                let v = bounded(&self.norm.json(&raw));
                self.t.push(key, v);
            }
            (Some(_), None) if eof => self.t.push(key, "<connection closed, no reply>"),
            (Some(_), None) => self.t.push(key, "<timeout, no reply>"),
        }
    }

    fn await_exit(&mut self, line: usize, conn: &str, proc_id: &str) {
        let p = proc_id.to_string();
        let dead = self.dead_procs.contains(&(conn.to_string(), p.clone()));
        let ok = self.wait_conn(conn, |st| {
            st.eof || st.procs.get(&p).is_some_and(|ps| ps.exit.is_some()) || (dead && !st.procs.contains_key(&p))
        });
        if ok.is_none() {
            self.t.push(format!("L{line} {conn} {proc_id}"), "no such connection");
            return;
        }
        let c = &self.conns[conn];
        let mut st = c.shared.0.lock().unwrap();
        let ps = st.procs.entry(p).or_default();
        ps.recorded_frames = Some(ps.frames);
        let prefix = format!("L{line} {conn} {proc_id}");
        let mut entries: Vec<(String, Vec<u8>)> = vec![
            (format!("{prefix} stdout"), bounded(&ps.stdout)),
            (format!("{prefix} stderr"), bounded(&ps.stderr)),
        ];
        let exit = ps.exit.clone().unwrap_or_else(|| b"<no exit frame>".to_vec());
        entries.push((format!("{prefix} exit"), exit));
        let shapes: Vec<Vec<u8>> = ps.shapes.iter().cloned().collect();
        entries.push((format!("{prefix} shapes"), shapes.join(&b'\n')));
        let mut seq = seq_runs(&ps.seqs);
        if ps.exit.is_some() && ps.seqs.last() != ps.seqs.iter().max() {
            seq.push_str("; exit not last");
        }
        if ps.frames_after_exit > 0 {
            seq.push_str(&format!("; {} frame(s) after exit", ps.frames_after_exit));
        }
        for b in &ps.bad {
            seq.push_str("; ");
            seq.push_str(b);
        }
        entries.push((format!("{prefix} seq"), seq.into_bytes()));
        drop(st);
        for (k, v) in entries {
            let v = self.norm.text(&v);
            self.t.push(k, v);
        }
    }

    fn await_output(&mut self, line: usize, conn: &str, proc_id: &str, stream: &str, needle: &[u8]) {
        let p = proc_id.to_string();
        let dead = self.dead_procs.contains(&(conn.to_string(), p.clone()));
        let mut seen = Vec::new();
        let ok = self.wait_conn(conn, |st| {
            let Some(ps) = st.procs.get(&p) else {
                return st.eof || dead;
            };
            let buf = if stream == "stdout" { &ps.stdout } else { &ps.stderr };
            seen = buf.clone();
            contains(buf, needle) || st.eof
        });
        let v = match ok {
            None => b"no such connection".to_vec(),
            Some(_) if contains(&seen, needle) => b"seen".to_vec(),
            Some(_) => {
                let mut v = b"not seen; got: ".to_vec();
                v.extend(bounded(&seen));
                v
            }
        };
        self.t.push(format!("L{line} {conn} {proc_id} {stream} has"), v);
    }

    /// Unawaited replies that arrived, marked taken, joined by newlines.
    fn take_unawaited(&mut self, conn: &str) -> Vec<u8> {
        let Some(c) = self.conns.get(conn) else {
            return b"no such connection".to_vec();
        };
        let mut st = c.shared.0.lock().unwrap();
        let mut out: Vec<Vec<u8>> = Vec::new();
        for r in st.replies.iter_mut().filter(|r| !r.taken) {
            r.taken = true;
            out.push(r.raw.clone());
        }
        drop(st);
        let out: Vec<Vec<u8>> = out.iter().map(|r| bounded(&self.norm.json(r))).collect();
        out.join(&b'\n')
    }

    fn await_close(&mut self, line: usize, conn: &str) {
        let ok = self.wait_conn(conn, |st| st.eof);
        let v = match ok {
            None => "no such connection",
            Some(true) => "closed by server",
            Some(false) => "still open at timeout",
        };
        self.t.push(format!("L{line} {conn} close"), v);
        let rest = self.take_unawaited(conn);
        if !rest.is_empty() {
            self.t.push(format!("L{line} {conn} unawaited"), rest);
        }
    }

    fn close(&mut self, line: usize, conn: &str) {
        let Some(mut c) = self.conns.remove(conn) else {
            self.t.push(format!("L{line} close {conn}"), "no such connection");
            return;
        };
        if let Some(s) = &c.stream {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        c.writer = None;
        if let Some(v) = self.finish_bridge(&mut c) {
            self.t.push(format!("L{line} {conn} bridge"), v);
        }
    }

    fn finish_bridge(&mut self, c: &mut Conn) -> Option<Vec<u8>> {
        let mut child = c.bridge.take()?;
        c.writer = None;
        let status = wait_or_kill(&mut child, Instant::now() + Duration::from_secs(5));
        let err = c.bridge_err.take().and_then(|h| h.join().ok()).unwrap_or_default();
        let mut v = match status {
            Some(s) => format!("exit={} stderr=", exit_text(&s)).into_bytes(),
            None => b"still running after stdin closed (killed) stderr=".to_vec(),
        };
        v.extend(self.norm.output(&err));
        Some(v)
    }

    fn run_cli(
        &mut self,
        line: usize,
        args: &[String],
        env: &[(String, String)],
        stdin: Option<Vec<u8>>,
        timeout: Duration,
    ) {
        let mut cmd = Command::new(&self.cfg.bin);
        cmd.args(args)
            .current_dir(&self.root)
            .env_clear()
            .envs(self.env())
            .envs(env.iter().cloned())
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                self.t.push(format!("L{line} run exit"), format!("spawn failed: {e}"));
                return;
            }
        };
        if let (Some(data), Some(mut w)) = (stdin, child.stdin.take()) {
            std::thread::spawn(move || {
                let _ = w.write_all(&data);
            });
        }
        let mut out = child.stdout.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let ho = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = out.read_to_end(&mut v);
            v
        });
        let he = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = err.read_to_end(&mut v);
            v
        });
        let status = wait_or_kill(&mut child, started + timeout);
        let elapsed = started.elapsed();
        // A detached grandchild may hold the pipes open: do not wait forever.
        let join = |h: std::thread::JoinHandle<Vec<u8>>| -> Vec<u8> {
            let until = Instant::now() + Duration::from_secs(2);
            while !h.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
            if h.is_finished() {
                h.join().unwrap_or_default()
            } else {
                b"<pipe held open by a detached process>".to_vec()
            }
        };
        let (o, e) = (join(ho), join(he));
        self.t.timings.push(Timing {
            label: format!("L{line} run"),
            micros: elapsed.as_micros() as u64,
        });
        let code = match status {
            Some(s) => exit_text(&s),
            None => "timeout (killed)".to_string(),
        };
        self.t.push(format!("L{line} run exit"), code);
        let o = bounded(&self.norm.output(&o));
        let e = bounded(&self.norm.output(&e));
        self.t.push(format!("L{line} run stdout"), o);
        self.t.push(format!("L{line} run stderr"), e);
    }

    /// End of probe: barrier, leftovers, daemon shutdown, snapshot.
    fn finish(&mut self) {
        let names: Vec<String> = self.conns.keys().cloned().collect();
        for name in &names {
            self.barrier(name);
        }
        for name in names {
            if let Some(mut c) = self.conns.remove(&name) {
                if let Some(s) = &c.stream {
                    let _ = s.shutdown(std::net::Shutdown::Both);
                }
                if let Some(v) = self.finish_bridge(&mut c) {
                    self.t.push(format!("end {name} bridge"), v);
                }
            }
        }
        self.stop_daemon();
        kill_mentioning(&self.run);
        fixture::snapshot(&self.root, &self.norm, "", &mut self.t);
    }

    fn barrier(&mut self, conn: &str) {
        let eof = self.conns[conn].shared.0.lock().unwrap().eof;
        if !eof {
            let mut line =
                format!("{{\"jsonrpc\":\"2.0\",\"id\":{BARRIER_ID},\"method\":\"server.ping\",\"auth\":").into_bytes();
            line.extend(json_string(&self.ctx.token));
            line.extend_from_slice(b"}\n");
            let c = self.conns.get_mut(conn).expect("exists");
            let wrote = c.writer.as_mut().map(|w| w.write_all(&line).and_then(|_| w.flush()));
            if matches!(wrote, Some(Ok(()))) {
                let want: Value = serde_json::from_str(BARRIER_ID).expect("json");
                let _ = self.wait_conn(conn, |st| {
                    if let Some(r) = st.replies.iter_mut().find(|r| !r.taken && id_matches(&want, &r.id)) {
                        r.taken = true;
                        return true;
                    }
                    st.eof
                });
            }
        }
        let rest = self.take_unawaited(conn);
        if !rest.is_empty() {
            self.t.push(format!("end {conn} unawaited"), rest);
        }
        let st = self.conns[conn].shared.0.lock().unwrap();
        let mut late = Vec::new();
        for (p, ps) in &st.procs {
            if let Some(n) = ps.recorded_frames {
                if ps.frames > n {
                    late.push(format!("{p}: {} frame(s) after its exit was recorded", ps.frames - n));
                }
            }
        }
        drop(st);
        if !late.is_empty() {
            self.t.push(format!("end {conn} late frames"), late.join("\n"));
        }
    }

    fn stop_daemon(&mut self) {
        let Some(mut d) = self.daemon.take() else { return };
        if self.socket.exists() {
            if let Ok(mut s) = UnixStream::connect(&self.socket) {
                let mut line = b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"server.shutdown\",\"auth\":".to_vec();
                line.extend(json_string(&self.ctx.token));
                line.extend_from_slice(b"}\n");
                let _ = s.write_all(&line);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut sink = Vec::new();
                let _ = s.read_to_end(&mut sink);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while self.socket.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match d.launcher.try_wait() {
                Ok(Some(_)) => break,
                _ if Instant::now() >= deadline => {
                    let _ = d.launcher.kill();
                    let _ = d.launcher.wait();
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
}

/// `0`, `3`, or `signal 9`.
pub fn exit_text(s: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => c.to_string(),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => "unknown".into(),
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// JSON string literal of (lossy) bytes.
fn json_string(b: &[u8]) -> Vec<u8> {
    serde_json::to_vec(&Value::String(String::from_utf8_lossy(b).into_owned())).expect("string")
}

/// Pids of processes whose command line contains `needle`.
pub fn pids_mentioning(needle: &[u8]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return out };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            if contains(&cmd, needle) {
                out.push(pid);
            }
        }
    }
    out
}

/// SIGKILLs every process whose command line mentions `dir`.
pub fn kill_mentioning(dir: &Path) {
    for pid in pids_mentioning(dir.as_os_str().as_encoded_bytes()) {
        // SAFETY: plain kill(2) on a pid we found; errors are ignored.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Waits for `child` until `deadline`; past it the child is killed and
/// reaped and `None` is returned.
fn wait_or_kill(child: &mut std::process::Child, deadline: Instant) -> Option<std::process::ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            _ if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            _ => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_reassemble_and_check_seq() {
        let mut st = ConnState::default();
        let f = |seq: i64, s: &str, d: &str| {
            format!(
                r#"{{"type":"stream","processId":"p1","stream":"{s}","seq":{seq},"data":"{}"}}"#,
                base64::engine::general_purpose::STANDARD.encode(d)
            )
            .into_bytes()
        };
        absorb_line(&mut st, f(1, "stdout", "hel"));
        absorb_line(&mut st, f(2, "stderr", "oops"));
        absorb_line(&mut st, f(3, "stdout", "lo"));
        absorb_line(
            &mut st,
            br#"{"type":"stream","processId":"p1","stream":"exit","seq":4,"exitCode":0}"#.to_vec(),
        );
        absorb_line(&mut st, br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec());
        let ps = &st.procs["p1"];
        assert_eq!(ps.stdout, b"hello");
        assert_eq!(ps.stderr, b"oops");
        assert_eq!(seq_runs(&ps.seqs), "runs from 1");
        assert_eq!(
            ps.exit.as_deref().unwrap(),
            br#"{"type":"stream","processId":"p1","stream":"exit","seq":<seq>,"exitCode":0}"#
        );
        assert_eq!(ps.shapes.len(), 2);
        assert_eq!(st.replies.len(), 1);
        assert_eq!(seq_runs(&[1, 2, 4, 5]), "runs from 1, 4");
        assert_eq!(seq_runs(&[1, 1, 2]), "runs from 1, 1");
    }

    #[test]
    fn stream_mutations_are_visible() {
        use crate::mutant::{mutate_line, Kind, MutState};
        let lines: Vec<Vec<u8>> = vec![
            br#"{"type":"stream","processId":"p1","stream":"stdout","seq":1,"data":"aGVsbG8K"}"#.to_vec(),
            br#"{"type":"stream","processId":"p1","stream":"exit","seq":2,"exitCode":0}"#.to_vec(),
        ];
        let feed = |kind: Kind| {
            let (mut st, mut ms) = (ConnState::default(), MutState::default());
            for l in &lines {
                for m in mutate_line(kind, l, &mut ms) {
                    absorb_line(&mut st, m);
                }
            }
            let ps = &st.procs["p1"];
            (ps.stdout.clone(), seq_runs(&ps.seqs))
        };
        let normal = feed(Kind::None);
        assert_eq!(normal, (b"hello\n".to_vec(), "runs from 1".to_string()));
        let dropped = feed(Kind::DropByte);
        assert_eq!(dropped.0, b"hello".to_vec());
        let extra = feed(Kind::ExtraFrame);
        assert_eq!(extra.1, "runs from 1, 1");
        assert_eq!(extra.0, b"hello\nhello\n".to_vec());
    }

    #[test]
    fn ids_match_numerically() {
        let v: Value = serde_json::from_str("1").unwrap();
        assert!(id_matches(&v, &Some(serde_json::from_str("1.0").unwrap())));
        assert!(!id_matches(&v, &Some(Value::String("1".into()))));
        assert!(id_matches(&Value::Null, &Some(Value::Null)));
        assert!(!id_matches(&Value::Null, &None));
    }
}
