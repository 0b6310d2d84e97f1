//! `harness capture`: a recording relay between a real client and a real
//! daemon that writes the session as a probe.
//!
//! With `--listen PATH` it accepts connections on that socket; without it,
//! it serves one connection on its own stdin/stdout, the way the daemon's
//! `-bridge` mode does (there is no separate flag for that mode). Either
//! way it forwards every byte to the daemon's socket (`--socket`) and logs,
//! in the order they crossed the relay, each client line, each daemon line
//! and each close. When it is stopped (SIGINT/SIGTERM, or the end of stdin
//! in the stdio mode) it writes the probe to `--out`:
//!
//! - a client line is a `call` when it is in the canonical request form
//!   and its reply is the next thing that happened; otherwise a `send`,
//!   with an `await <id>` where its reply arrived;
//! - an exit frame becomes `await-exit` on its connection (which records
//!   the reassembled stream); a client close is `close`, a daemon close
//!   `await-close`;
//! - the token (read from `--token-file`, else `$CLAUDE_RPC_TOKEN`) becomes
//!   `$TOKEN`, `--root`/the socket/`$HOME` paths become
//!   `$ROOT`/`$SOCKET`/`$HOME`, process ids become `p1`, `p2`, … in order
//!   of appearance, a literal `$` becomes `$$`;
//! - a line longer than `--large` bytes goes to `<stem>.fixtures/<n>.line`
//!   and is sent as `$file(…)`;
//! - a client line that followed output (stdout/stderr frames, on any
//!   connection) waits for that output first, with `await-output` and the
//!   shortest tail of the stream so far that occurs in it only once: the
//!   client saw it before it answered (an agent's permission prompt, say),
//!   so a replay must not send the answer, or a signal, any sooner.

pub mod import;

use crate::base::error::{At, IoAt};
use crate::base::sync::lock;
use crate::probe::ParseError;
use serde_json::Value;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a stopped `--listen` capture waits for connections still open
/// to finish before writing what it has.
const RELAY_GRACE: Duration = Duration::from_secs(10);

/// Options of a capture.
#[derive(Debug, Clone)]
pub struct CaptureOptions {
    /// The daemon's socket.
    pub socket: PathBuf,
    /// Listen here (`None`: one connection on stdin/stdout).
    pub listen: Option<PathBuf>,
    pub out: PathBuf,
    pub token: Vec<u8>,
    pub root: Option<PathBuf>,
    pub home: Option<PathBuf>,
    /// Further literal rewrites (`harness import --map FROM=TO`): a path
    /// the session used outside root and home, and the probe text for it.
    pub maps: Vec<(String, String)>,
    /// Probe lines put before the session's first step (fixtures, `env`,
    /// `desc`), so the run that shapes an import's transcript sees them.
    pub prelude: String,
    /// Lines longer than this go to a fixture file.
    pub large: usize,
}

/// What crossed the relay.
#[derive(Debug, Clone)]
enum Event {
    Client(usize, Vec<u8>),
    Daemon(usize, Vec<u8>),
    ClientClosed(usize),
    DaemonClosed(usize),
}

/// Why a capture could not run or its probe could not be written.
#[derive(Debug)]
pub enum Error {
    /// Binding, connecting or writing on a path.
    Io(IoAt),
    /// A socket that could not be set up (cloned, made non-blocking).
    Socket(std::io::Error),
    Accept(std::io::Error),
    /// The probe written from the session does not parse (the probe text
    /// follows the parse error).
    Unparsable {
        error: ParseError,
        probe: String,
    },
    /// A wire log `harness import` cannot use, at a line or a key.
    Log {
        at: String,
        problem: String,
    },
    /// The run that gives an imported transcript its shape failed.
    Run(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Socket(e) => write!(f, "{e}"),
            Error::Accept(e) => write!(f, "accept: {e}"),
            Error::Unparsable { error, probe } => write!(f, "the captured probe does not parse: {error}\n{probe}"),
            Error::Log { at, problem } => write!(f, "{at}: {problem}"),
            Error::Run(e) => write!(f, "running the imported probe: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<IoAt> for Error {
    fn from(e: IoAt) -> Error {
        Error::Io(e)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Socket(e)
    }
}

type Log = Arc<Mutex<Vec<Event>>>;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Runs the relay until stopped, then writes the probe.
pub fn run(o: &CaptureOptions) -> Result<PathBuf, Error> {
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let bridge = o.listen.is_none();
    let mut handles = Vec::new();
    match &o.listen {
        Some(path) => {
            let _ = std::fs::remove_file(path);
            let l = UnixListener::bind(path).at(path)?;
            l.set_nonblocking(true)?;
            let mut n = 0;
            while !STOP.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((c, _)) => {
                        let _ = c.set_nonblocking(false);
                        n += 1;
                        let d = UnixStream::connect(&o.socket).at(&o.socket)?;
                        let (cr, cw) = (c.try_clone()?, c);
                        let (dr, dw) = (d.try_clone()?, d);
                        handles.extend(relay(n, Box::new(cr), Box::new(cw), dr, dw, log.clone()));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    Err(e) => return Err(Error::Accept(e)),
                }
            }
            let _ = std::fs::remove_file(path);
            // Every connection that closed before the stop is recorded
            // whole, its closes included: wait for its relay threads
            // rather than for a moment. One still open when stopped is
            // waited for up to RELAY_GRACE, then recorded as far as it got.
            let deadline = Instant::now() + RELAY_GRACE;
            while handles.iter().any(|h| !h.is_finished()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            for h in handles.drain(..).filter(|h| h.is_finished()) {
                let _ = h.join();
            }
        }
        None => {
            let d = UnixStream::connect(&o.socket).at(&o.socket)?;
            let dr = d.try_clone()?;
            handles.extend(relay(
                1,
                Box::new(std::io::stdin()),
                Box::new(std::io::stdout()),
                dr,
                d,
                log.clone(),
            ));
            for h in handles.drain(..) {
                let _ = h.join();
            }
        }
    }
    let events = lock(&log).clone();
    write_probe(o, &events, bridge)
}

/// Relays one connection in both directions, logging lines.
fn relay(
    n: usize,
    client_r: Box<dyn Read + Send>,
    mut client_w: Box<dyn Write + Send>,
    daemon_r: UnixStream,
    mut daemon_w: UnixStream,
    log: Log,
) -> Vec<std::thread::JoinHandle<()>> {
    let l1 = log.clone();
    let up = std::thread::spawn(move || {
        copy_lines(client_r, &mut daemon_w, &l1, |line| Event::Client(n, line));
        lock(&l1).push(Event::ClientClosed(n));
        let _ = daemon_w.shutdown(std::net::Shutdown::Write);
    });
    let down = std::thread::spawn(move || {
        copy_lines(daemon_r, &mut client_w, &log, |line| Event::Daemon(n, line));
        lock(&log).push(Event::DaemonClosed(n));
    });
    vec![up, down]
}

/// Copies `from` to `to` line by line, logging each line (without its
/// newline) until end of input or a failed write.
fn copy_lines(from: impl Read, to: &mut dyn Write, log: &Log, event: impl Fn(Vec<u8>) -> Event) {
    let mut r = BufReader::new(from);
    loop {
        let mut line = Vec::new();
        match r.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let body = line.strip_suffix(b"\n").unwrap_or(&line).to_vec();
        lock(log).push(event(body));
        if to.write_all(&line).and_then(|_| to.flush()).is_err() {
            return;
        }
    }
}

/// Rewrites one line's text into probe payload syntax.
struct Rewriter {
    /// (literal, replacement), longest literal first.
    subs: Vec<(String, String)>,
    pids: Vec<String>,
}

impl Rewriter {
    fn new(o: &CaptureOptions) -> Rewriter {
        let mut subs = Vec::new();
        let s = |p: &Path| p.to_string_lossy().into_owned();
        if let Some(r) = &o.root {
            subs.push((s(r), "$ROOT".to_string()));
        }
        subs.push((s(&o.socket), "$SOCKET".to_string()));
        if let Some(h) = &o.home {
            subs.push((s(h), "$HOME".to_string()));
        }
        subs.extend(o.maps.iter().cloned());
        if !o.token.is_empty() {
            let t = serde_json::to_string(&String::from_utf8_lossy(&o.token)).unwrap_or_default();
            subs.push((t[1..t.len() - 1].to_string(), "$TOKEN".to_string()));
        }
        // A one-character path (`/`) would rewrite every slash.
        subs.retain(|(k, v)| k.len() > 1 || (v == "$TOKEN" && !k.is_empty()));
        subs.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
        Rewriter { subs, pids: Vec::new() }
    }

    /// Registers a process id (from a request's or frame's `id`/`processId`).
    fn pid(&mut self, id: &str) -> String {
        if let Some(i) = self.pids.iter().position(|p| p == id) {
            return format!("p{}", i + 1);
        }
        self.pids.push(id.to_string());
        format!("p{}", self.pids.len())
    }

    /// The text with `$` escaped, then paths, token and process ids replaced.
    fn text(&self, raw: &str) -> String {
        let mut t = raw.replace('$', "$$");
        for (k, v) in &self.subs {
            t = t.replace(&k.replace('$', "$$"), v);
        }
        for (i, p) in self.pids.iter().enumerate() {
            let from = serde_json::to_string(p).unwrap_or_default().replace('$', "$$");
            t = t.replace(&from, &format!("\"p{}\"", i + 1));
        }
        t
    }
}

/// The process id a request or frame names, if any.
fn process_id(v: &Value) -> Option<&str> {
    if let Some(p) = v.get("processId").and_then(Value::as_str) {
        return Some(p);
    }
    let m = v.get("method").and_then(Value::as_str)?;
    if !m.starts_with("process.") {
        return None;
    }
    v.get("params").and_then(|p| p.get("id")).and_then(Value::as_str)
}

fn is_frame(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("stream")
}

/// `call` arguments when `line` is exactly the canonical request the
/// `call` directive would send.
fn as_call(v: &Value, line: &[u8], token: &[u8]) -> Option<(String, String, Option<String>)> {
    let m = v.as_object()?;
    let keys: Vec<&str> = m.keys().map(String::as_str).collect();
    let want: &[&str] = if m.contains_key("params") {
        &["jsonrpc", "id", "method", "params", "auth"]
    } else {
        &["jsonrpc", "id", "method", "auth"]
    };
    if keys != want || m["jsonrpc"] != "2.0" || m["auth"].as_str()?.as_bytes() != token {
        return None;
    }
    let id = serde_json::to_string(&m["id"]).ok()?;
    let method = m["method"].as_str()?.to_string();
    let params = m.get("params").map(|p| serde_json::to_string(p).unwrap_or_default());
    let mut rebuilt = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":{}",
        serde_json::to_string(&method).ok()?
    );
    if let Some(p) = &params {
        let _ = write!(rebuilt, ",\"params\":{p}");
    }
    let _ = write!(
        rebuilt,
        ",\"auth\":{}}}",
        serde_json::to_string(m["auth"].as_str()?).ok()?
    );
    let plain = |s: &str| !s.is_empty() && !s.chars().any(char::is_whitespace);
    (rebuilt.as_bytes() == line && plain(&id) && plain(&method)).then_some((id, method, params))
}

/// The probe's first lines: its description, what was rewritten, and the
/// bridge connection when the session came over stdin/stdout.
fn probe_header(events: &[Event], rw: &Rewriter, bridge: bool) -> String {
    let mut out = String::new();
    let conns = events
        .iter()
        .map(|e| match e {
            Event::Client(n, _) | Event::Daemon(n, _) | Event::ClientClosed(n) | Event::DaemonClosed(n) => *n,
        })
        .max()
        .unwrap_or(0);
    let _ = writeln!(out, "desc captured by harness capture ({conns} connection(s))");
    let _ = write!(out, "# {} events relayed; the token is $TOKEN", events.len());
    if !rw.pids.is_empty() {
        let _ = write!(out, ", process ids are p1…p{}", rw.pids.len());
    }
    out.push('\n');
    if bridge {
        out.push_str("connect c1 bridge\n");
    }
    out
}

/// What waits for a daemon line on connection `n`: its process's exit
/// frame, or the reply with its id (other frames are waited for by the
/// exit).
fn await_line(out: &mut String, n: usize, l: &[u8], rw: &mut Rewriter) {
    let Ok(v) = serde_json::from_slice::<Value>(l) else {
        return;
    };
    if is_frame(&v) {
        if v.get("stream").and_then(Value::as_str) == Some("exit") {
            let p = v.get("processId").and_then(Value::as_str).unwrap_or("");
            let _ = writeln!(out, "await-exit c{n} {}", rw.pid(p));
        }
    } else if let Some(id) = v.get("id") {
        let id = serde_json::to_string(id).unwrap_or_default();
        let _ = writeln!(out, "await c{n} {id}");
    }
}

/// The output streams seen so far, per connection, process and stream
/// name, and which grew since the last client line.
#[derive(Default)]
struct Outputs {
    /// The reassembled bytes, or `None` once a frame's data did not decode
    /// (a wire log cuts long strings): such a stream is not awaited.
    seen: std::collections::BTreeMap<(usize, String, String), Option<Vec<u8>>>,
    grown: std::collections::BTreeSet<(usize, String, String)>,
}

/// Shortest tail worth waiting for: a few bytes would too often be found
/// in the output of a different run that went astray.
const MIN_TAIL: usize = 24;

impl Outputs {
    fn frame(&mut self, n: usize, v: &Value) {
        use base64::Engine;
        let stream = v.get("stream").and_then(Value::as_str).unwrap_or_default();
        if stream != "stdout" && stream != "stderr" {
            return;
        }
        let p = v.get("processId").and_then(Value::as_str).unwrap_or_default();
        let key = (n, p.to_string(), stream.to_string());
        let data = v
            .get("data")
            .and_then(Value::as_str)
            .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok());
        let entry = self.seen.entry(key.clone()).or_insert_with(|| Some(Vec::new()));
        match (entry.as_mut(), data) {
            (Some(all), Some(d)) => all.extend_from_slice(&d),
            _ => *entry = None,
        }
        self.grown.insert(key);
    }

    /// `await-output` lines for the streams that grew, which then count as
    /// awaited.
    fn awaits(&mut self, out: &mut String, rw: &mut Rewriter) {
        for key in std::mem::take(&mut self.grown) {
            let Some(Some(all)) = self.seen.get(&key) else {
                continue;
            };
            let (n, p, stream) = &key;
            let _ = writeln!(
                out,
                "await-output c{n} {} {stream} \"{}\"",
                rw.pid(p),
                quoted(unique_tail(all))
            );
        }
    }
}

/// The shortest tail of `all` (at least [`MIN_TAIL`] bytes, or all of it)
/// that occurs in `all` only once, so a stream contains it only once it
/// has reached this point.
fn unique_tail(all: &[u8]) -> &[u8] {
    let mut k = MIN_TAIL.min(all.len());
    loop {
        let tail = &all[all.len() - k..];
        if k == all.len() || memchr::memmem::find(all, tail) == Some(all.len() - k) {
            return tail;
        }
        k += 1;
    }
}

/// Bytes as the inside of a quoted probe argument: escapes for what the
/// parser would read otherwise (`\`, `"`, `$` templates) and for anything
/// not printable ASCII.
fn quoted(bytes: &[u8]) -> String {
    let mut s = String::new();
    for &b in bytes {
        match b {
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\r' => s.push_str("\\r"),
            b'\\' | b'"' | b'$' | b'(' | b')' | b',' => {
                s.push('\\');
                s.push(b as char);
            }
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s
}

fn write_probe(o: &CaptureOptions, events: &[Event], bridge: bool) -> Result<PathBuf, Error> {
    let mut rw = Rewriter::new(o);
    // Process ids first, in order of appearance, so every line maps them.
    for e in events {
        if let Event::Client(_, l) | Event::Daemon(_, l) = e {
            if let Ok(v) = serde_json::from_slice::<Value>(l) {
                if let Some(p) = process_id(&v) {
                    rw.pid(p);
                }
            }
        }
    }
    let stem = o
        .out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "captured".into());
    let dir = o.out.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut fixtures = 0usize;
    let mut out = probe_header(events, &rw, bridge);
    out.push_str(&o.prelude);
    if !o.prelude.is_empty() && !o.prelude.ends_with('\n') {
        out.push('\n');
    }
    let mut client_closed = std::collections::BTreeSet::new();
    let mut merged: std::collections::BTreeSet<usize> = std::collections::BTreeSet::new();
    let mut outputs = Outputs::default();
    for (i, e) in events.iter().enumerate() {
        if let Event::Daemon(n, l) = e {
            if let Ok(v) = serde_json::from_slice::<Value>(l) {
                outputs.frame(*n, &v);
            }
        }
        match e {
            Event::Client(n, l) => {
                outputs.awaits(&mut out, &mut rw);
                let v: Option<Value> = serde_json::from_slice(l).ok();
                // A call when its reply is the very next event.
                let call = v
                    .as_ref()
                    .and_then(|v| as_call(v, l, &o.token))
                    .filter(|_| l.len() <= o.large);
                if let Some((id, method, params)) = call {
                    let next_is_reply = match events.get(i + 1) {
                        Some(Event::Daemon(m, r)) if m == n => serde_json::from_slice::<Value>(r)
                            .ok()
                            .filter(|r| !is_frame(r))
                            .and_then(|r| r.get("id").cloned())
                            .is_some_and(|rid| serde_json::to_string(&rid).ok().as_deref() == Some(id.as_str())),
                        _ => false,
                    };
                    if next_is_reply {
                        merged.insert(i + 1);
                        let p = params.map(|p| format!(" {}", rw.text(&p))).unwrap_or_default();
                        let _ = writeln!(out, "call c{n} {id} {method}{p}");
                        continue;
                    }
                }
                let text = rw.text(&String::from_utf8_lossy(l));
                if l.is_empty() {
                    let _ = writeln!(out, "raw c{n} \"\\n\"");
                } else if text.len() > o.large {
                    fixtures += 1;
                    let fdir = dir.join(format!("{stem}.fixtures"));
                    std::fs::create_dir_all(&fdir).at(&fdir)?;
                    let f = fdir.join(format!("{fixtures}.line"));
                    std::fs::write(&f, format!("{text}\n")).at(&f)?;
                    let _ = writeln!(out, "send c{n} $file({stem}.fixtures/{fixtures}.line)");
                } else {
                    let _ = writeln!(out, "send c{n} {text}");
                }
            }
            Event::Daemon(n, l) if !merged.contains(&i) => await_line(&mut out, *n, l, &mut rw),
            Event::Daemon(..) => {}
            Event::ClientClosed(n) => {
                if client_closed.insert(*n) && !bridge {
                    let _ = writeln!(out, "close c{n}");
                }
            }
            Event::DaemonClosed(n) => {
                if !client_closed.contains(n) {
                    let _ = writeln!(out, "await-close c{n}");
                    client_closed.insert(*n);
                }
            }
        }
    }
    if let Err(e) = crate::probe::parse(&o.out, &out) {
        return Err(Error::Unparsable { error: e, probe: out });
    }
    std::fs::write(&o.out, &out).at(&o.out)?;
    Ok(o.out.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_awaited_occurs_once_in_the_stream_so_far() {
        let all = b"{\"type\":\"result\",\"n\":1}\n{\"type\":\"result\",\"n\":1}\n{\"type\":\"result\",\"n\":2}\n";
        let tail = unique_tail(all);
        assert!(tail.len() >= MIN_TAIL, "{}", String::from_utf8_lossy(tail));
        assert_eq!(memchr::memmem::find_iter(all, tail).count(), 1);
        // A repeated line needs a tail reaching into the line before it.
        let twice = b"0123456789abcdefghijklmnopqrstuvwxyz\n0123456789abcdefghijklmnopqrstuvwxyz\n";
        assert_eq!(unique_tail(twice).len(), 38);
        assert_eq!(unique_tail(b"short"), b"short");
    }

    #[test]
    fn awaited_text_is_quoted_for_the_probe_parser() {
        assert_eq!(quoted(b"a\"$HOME\\(x,y)\n\xff"), r#"a\"\$HOME\\\(x\,y\)\n\xff"#);
    }
}
