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

mod conn;
mod daemon;
pub(crate) mod diff;
mod error;
mod exec;
mod live;
mod session;

// `mutant/` finds the processes a wrapped binary left behind here.
pub(crate) use crate::dut::procfs::kill_mentioning;
pub use error::Error;
pub use live::LiveDaemon;

use crate::base::error::At;
use crate::base::sync::lock;
use crate::dut::client::json_string;
use crate::probe::fixture;
use crate::probe::{Ctx, Probe, StepKind, Template};
use crate::transcript::normalize::Normalizer;
use crate::transcript::Transcript;
use conn::{id_matches, Conn};
use daemon::Daemon;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The id of the end-of-probe barrier ping.
const BARRIER_ID: &str = "\"__harness_barrier__\"";
/// How long the end-of-case barrier waits, after its ping, for the replies
/// of requests still running (a daemon that answers fewer lines than were
/// sent costs a case this much, nothing else).
const BARRIER_SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// How to run probes.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub bin: PathBuf,
    pub renames: Vec<(String, String)>,
    /// How the binary runs and is dialled (`--via-bridge`, `--wine`).
    pub transport: crate::dut::Transport,
}

/// The directories of one run: `$RUN` (a temp directory, removed on
/// drop) holding `$ROOT`, `$HOME`, `$SOCKET`, the token file and the log.
pub struct Sandbox {
    _dir: tempfile::TempDir,
    run: PathBuf,
    root: PathBuf,
    home: PathBuf,
    socket: PathBuf,
    log: PathBuf,
}

impl Sandbox {
    pub fn new() -> Result<Sandbox, Error> {
        Self::new_in(&std::env::temp_dir())
    }

    /// A sandbox under `parent`.
    pub fn new_in(parent: &Path) -> Result<Sandbox, Error> {
        let dir = tempfile::Builder::new()
            .prefix("hp")
            .tempdir_in(parent)
            .at(parent)
            .map_err(Error::TempDir)?;
        let run = dir.path().to_path_buf();
        let root = run.join("root");
        let home = run.join("home");
        std::fs::create_dir_all(&root).map_err(Error::Dir)?;
        std::fs::create_dir_all(&home).map_err(Error::Dir)?;
        Ok(Sandbox {
            socket: run.join("rpc.sock"),
            log: run.join("daemon.log"),
            _dir: dir,
            run,
            root,
            home,
        })
    }

    /// The path part of a run's normalisation: `$ROOT`, `$SOCKET`, `$RUN`
    /// (so the daemon's HOME reads `$RUN/home`) and `$BIN`.
    pub fn normalizer(&self, cfg: &RunConfig) -> Normalizer {
        let s = |p: &Path| p.to_string_lossy().into_owned();
        Normalizer::new(
            &[
                (s(&self.root), "$ROOT".into()),
                (s(&self.socket), "$SOCKET".into()),
                (s(&self.run), "$RUN".into()),
                (s(&cfg.bin), "$BIN".into()),
            ],
            &cfg.renames,
        )
    }

    /// The daemon's HOME in this run.
    #[cfg(test)]
    pub fn home(&self) -> &Path {
        &self.home
    }

    fn ctx(&self, token: Vec<u8>) -> Ctx {
        let s = |p: &Path| p.to_string_lossy().into_owned();
        Ctx {
            root: s(&self.root),
            token,
            socket: s(&self.socket),
            run: s(&self.run),
            home: s(&self.home),
        }
    }
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
    /// Live mode: the banner of the daemon that is already running (taken
    /// by the first implicit start); the daemon is left running at the end.
    live_banner: Option<Vec<u8>>,
    live: bool,
    /// Leading fixture steps already built (a live run's cached template).
    skip_fixtures: usize,
    sent: HashMap<(String, String), Instant>,
    /// (conn, request id) → process id, for spawn/reattach requests.
    proc_requests: HashMap<(String, String), String>,
    /// (conn, process id) whose spawn/reattach failed: no frames will come.
    dead_procs: BTreeSet<(String, String)>,
    /// (conn, process id) reattached after it stopped running: its replay
    /// is complete, nothing more will come.
    settled_procs: BTreeSet<(String, String)>,
}

/// Runs `probe` against `cfg.bin`; never panics on daemon misbehaviour,
/// everything observed goes into the transcript.
pub fn run(probe: &Probe, cfg: &RunConfig) -> Result<Transcript, Error> {
    let sb = Sandbox::new()?;
    let mut r = Runner::new(probe, cfg, &sb);
    let result = r.steps();
    r.finish();
    result?;
    Ok(r.t)
}

impl<'a> Runner<'a> {
    fn new(probe: &'a Probe, cfg: &'a RunConfig, sb: &Sandbox) -> Runner<'a> {
        let norm = sb.normalizer(cfg).with_masks(&probe.masks);
        Runner {
            probe,
            cfg,
            ctx: sb.ctx(probe.token()),
            log: sb.log.clone(),
            run: sb.run.clone(),
            root: sb.root.clone(),
            socket: sb.socket.clone(),
            norm,
            t: Transcript {
                probe: probe.name.clone(),
                ..Default::default()
            },
            conns: BTreeMap::new(),
            daemon: None,
            daemon_started: false,
            live_banner: None,
            live: false,
            skip_fixtures: 0,
            sent: HashMap::new(),
            proc_requests: HashMap::new(),
            dead_procs: BTreeSet::new(),
            settled_procs: BTreeSet::new(),
        }
    }
}

impl Runner<'_> {
    fn timeout(&self) -> Duration {
        self.probe.timeout
    }

    fn env(&self) -> Vec<(String, String)> {
        let mut e = crate::dut::base_env(&self.run);
        e.extend(self.probe.env.iter().cloned());
        e
    }

    fn steps(&mut self) -> Result<(), Error> {
        for step in &self.probe.steps[self.skip_fixtures..] {
            self.step(step.line, &step.kind)?;
        }
        Ok(())
    }

    /// Runs the step on probe line `l`; only a fixture that cannot be
    /// built is an error, everything else goes into the transcript.
    fn step(&mut self, l: usize, kind: &StepKind) -> Result<(), Error> {
        match kind {
            StepKind::Fixture(k) => {
                fixture::build(k, &self.ctx, &self.root, &self.run).map_err(|source| Error::Fixture {
                    probe: self.probe.path.clone(),
                    line: l,
                    source,
                })?;
            }
            StepKind::Start { args } => {
                let args: Vec<String> = args.iter().map(|a| a.expand_str(&self.ctx)).collect();
                self.start(l, &args);
            }
            StepKind::Connect { conn, bridge } => self.connect(l, conn, *bridge),
            StepKind::Send { conn, line, len } => self.send(l, conn, line, *len),
            StepKind::Raw { conn, bytes } => {
                let b = bytes.expand(&self.ctx);
                self.write(l, conn, &b, None);
            }
            StepKind::Call {
                conn,
                id,
                method,
                params,
            } => self.call(l, conn, id, method, params.as_ref()),
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
            StepKind::AwaitFrames { conn, count } => self.await_frames(l, conn, *count),
            StepKind::AwaitClose { conn } => self.await_close(l, conn),
            StepKind::AwaitGone => self.await_gone(l),
            StepKind::Quiet { conn, ms } => {
                std::thread::sleep(Duration::from_millis(*ms));
                let v = self.take_unawaited(conn);
                let v = if v.is_empty() { b"silent".to_vec() } else { v };
                self.t.push(format!("L{l} {conn} quiet"), v);
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
            StepKind::Log { pattern } => self.log(l, pattern),
        }
        Ok(())
    }

    /// `send`/`sendn`: the line (padded to `len` with `$FILL`) and its
    /// newline; the reply is awaited under the line's id.
    fn send(&mut self, l: usize, conn: &str, line: &Template, len: Option<usize>) {
        let mut bytes = line.expand(&self.ctx);
        if let Some(len) = len {
            let fill = len.saturating_sub(bytes.len());
            bytes = line.expand_fill(&self.ctx, fill);
        }
        let id = serde_json::from_slice::<Value>(&bytes)
            .ok()
            // An object without an id is answered with id null.
            .and_then(|v| v.as_object().map(|m| m.get("id").cloned().unwrap_or(Value::Null)));
        bytes.push(b'\n');
        self.write(l, conn, &bytes, id);
    }

    /// `call`: the request with the probe's token, then its reply.
    fn call(&mut self, l: usize, conn: &str, id: &str, method: &str, params: Option<&Template>) {
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

    fn await_frames(&mut self, l: usize, conn: &str, n: usize) {
        let ok = self.wait_conn(conn, |st| st.frames >= n || st.eof);
        let v = match ok {
            Some(true) => "reached",
            Some(false) => "connection closed or timeout first",
            None => "no such connection",
        };
        self.t.push(format!("L{l} {conn} frames>={n}"), v);
    }

    fn await_gone(&mut self, l: usize) {
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

    /// `log`: the daemon's log lines that contain `pattern`, normalised.
    fn log(&mut self, l: usize, pattern: &str) {
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
        if !self.live {
            self.stop_daemon();
            kill_mentioning(&self.run);
        }
        fixture::snapshot(&self.root, &self.norm, "", &mut self.t);
    }

    fn barrier(&mut self, conn: &str) {
        let eof = lock(&self.conns[conn].shared.0).eof;
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
                // The ping is answered on the daemon's reader, possibly
                // before a request sent earlier finishes in its own task:
                // also wait (briefly) for one reply per line sent.
                let expected = self.conns[conn].sent.complete;
                let _ = self.wait_conn_for(conn, BARRIER_SETTLE, |st| st.eof || st.replies.len() > expected);
            }
        }
        let rest = self.take_unawaited(conn);
        if !rest.is_empty() {
            self.t.push(format!("end {conn} unawaited"), rest);
        }
        let st = lock(&self.conns[conn].shared.0);
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

pub(super) fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}
