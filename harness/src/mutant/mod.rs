//! `harness mutant-proxy`: a wrapper that behaves like the wrapped binary
//! but alters what reaches the client in one specific way. The sensitivity
//! tests diff a binary against itself-behind-a-mutant to prove every kind
//! of alteration is caught.
//!
//! In `-serve` mode the proxy starts the real daemon on `<socket>.real`,
//! listens on the requested socket itself, prints the real banner (with the
//! socket path restored) and relays connections, rewriting the server's
//! lines. It exits and removes its socket once the real socket is gone. In
//! every other mode it runs the real binary with inherited stdio.

use base64::Engine;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The alterations a mutant can make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Relay unchanged.
    None,
    /// Change one byte of every error message.
    ErrorByte,
    /// Swap `jsonrpc` and `id` in every reply.
    SwapFields,
    /// Drop the last byte of the first stdout frame on each connection.
    DropByte,
    /// Send the first stdout frame on each connection twice.
    ExtraFrame,
    /// Command-line modes exit with the real code plus one.
    ExitCode,
    /// Leave a stray file in the working directory at start-up.
    StrayFile,
    /// Delay every reply by 200 ms.
    Slow,
    /// Change one byte of the message of -32602 (invalid params) errors only.
    InvalidParams,
    /// Keep a duplicate of every client connection's descriptor forever.
    LeakFd,
    /// Drop the 20th stdout frame on each connection (a loss under load).
    DropFrame,
    /// Start every spawned command under `setsid -f`, so its tree escapes
    /// the process group the daemon kills on shutdown.
    LeaveGrandchild,
    /// Die (with the real daemon) when a client line passes 1 MiB, as a
    /// 2 MiB line does (checked before the bytes are relayed).
    DieOnLongLine,
    /// Like `error-byte`, but only on connections accepted after the first
    /// `LATE_AFTER`: a difference no single fuzz case shows on fresh
    /// daemons, only after earlier cases ran on the same ones.
    LateErrorByte,
    /// Answer `server.capabilities` without `plugins.prune` (an older
    /// build's list): one method answered differently, every time.
    ForgetPrune,
    /// Like `error-byte`, but only on every other start of the proxy,
    /// counted in the file `$MUTANT_STATE`: a difference that comes and
    /// goes between runs, as a race does, at a rate of exactly one half.
    EveryOtherStart,
}

/// Connections `late-error-byte` relays unchanged before it starts altering.
pub const LATE_AFTER: usize = 12;

/// Per-connection state of a line mutator.
#[derive(Debug, Default)]
pub struct MutState {
    stdout_frames: usize,
    /// The connection came after the first `LATE_AFTER` (late-error-byte).
    pub late: bool,
    /// This start of the proxy is one that alters (every-other-start).
    pub odd_start: bool,
}

/// Bytes of one client line past which `die-on-long-line` dies (the real
/// daemon closes the connection there, so later bytes may never be read).
const LONG_LINE: usize = 1 << 20;

/// Rewrites one server → client line (without its newline) into the lines
/// to send instead.
pub fn mutate_line(kind: Kind, line: &[u8], st: &mut MutState) -> Vec<Vec<u8>> {
    let is_stdout = contains(line, b"\"stream\":\"stdout\"") && contains(line, b"\"data\":\"");
    match kind {
        Kind::InvalidParams if !contains(line, b"\"code\":-32602,") => vec![line.to_vec()],
        Kind::LateErrorByte if !st.late => vec![line.to_vec()],
        Kind::EveryOtherStart if !st.odd_start => vec![line.to_vec()],
        Kind::ErrorByte | Kind::InvalidParams | Kind::LateErrorByte | Kind::EveryOtherStart => {
            let key = b"\"message\":\"";
            if let Some(i) = find(line, key) {
                let at = i + key.len();
                let mut v = line.to_vec();
                if at < v.len() && v[at] != b'"' {
                    v[at] = match v[at] {
                        c @ b'a'..=b'z' => c.to_ascii_uppercase(),
                        c @ b'A'..=b'Z' => c.to_ascii_lowercase(),
                        _ => b'X',
                    };
                }
                return vec![v];
            }
            vec![line.to_vec()]
        }
        Kind::SwapFields => {
            let pre = b"{\"jsonrpc\":\"2.0\",\"id\":";
            if line.starts_with(pre) {
                let rest = &line[pre.len()..];
                let end = find(rest, b",\"result\":").or_else(|| find(rest, b",\"error\":"));
                if let Some(end) = end {
                    let mut v = b"{\"id\":".to_vec();
                    v.extend_from_slice(&rest[..end]);
                    v.extend_from_slice(b",\"jsonrpc\":\"2.0\"");
                    v.extend_from_slice(&rest[end..]);
                    return vec![v];
                }
            }
            vec![line.to_vec()]
        }
        Kind::DropByte if is_stdout => {
            st.stdout_frames += 1;
            if st.stdout_frames == 1 {
                let key = b"\"data\":\"";
                let i = find(line, key).expect("checked") + key.len();
                let j = i + line[i..].iter().position(|c| *c == b'"').unwrap_or(0);
                let b64 = base64::engine::general_purpose::STANDARD;
                if let Ok(mut d) = b64.decode(&line[i..j]) {
                    d.pop();
                    let mut v = line[..i].to_vec();
                    v.extend(b64.encode(d).into_bytes());
                    v.extend_from_slice(&line[j..]);
                    return vec![v];
                }
            }
            vec![line.to_vec()]
        }
        Kind::ExtraFrame if is_stdout => {
            st.stdout_frames += 1;
            if st.stdout_frames == 1 {
                return vec![line.to_vec(), line.to_vec()];
            }
            vec![line.to_vec()]
        }
        Kind::DropFrame if is_stdout => {
            st.stdout_frames += 1;
            if st.stdout_frames == 20 {
                return vec![];
            }
            vec![line.to_vec()]
        }
        Kind::ForgetPrune if contains(line, b"\"methods\":[") => {
            let gone = b",\"plugins.prune\"";
            match find(line, gone) {
                Some(i) => vec![[&line[..i], &line[i + gone.len()..]].concat()],
                None => vec![line.to_vec()],
            }
        }
        Kind::Slow if line.starts_with(b"{\"jsonrpc\"") => {
            // Far above a loaded machine's ping time, so the ratio stays >3×.
            std::thread::sleep(Duration::from_millis(200));
            vec![line.to_vec()]
        }
        _ => vec![line.to_vec()],
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, needle).is_some()
}

fn exit_code(s: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
}

/// Runs the proxy; returns the exit code.
pub fn main(kind: Kind, cmd: &[String]) -> i32 {
    let Some((bin, args)) = cmd.split_first() else {
        eprintln!("mutant-proxy: missing the real binary");
        return 2;
    };
    let serve = args.iter().any(|a| a == "-serve" || a == "--serve");
    let sock_idx = args
        .iter()
        .position(|a| a == "-socket" || a == "--socket")
        .filter(|i| i + 1 < args.len());
    let (true, Some(si)) = (serve, sock_idx) else {
        let status = match Command::new(bin).args(args).status() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("mutant-proxy: {bin}: {e}");
                return 127;
            }
        };
        let code = exit_code(status);
        return if kind == Kind::ExitCode { code + 1 } else { code };
    };
    let socket = PathBuf::from(&args[si + 1]);
    let real = PathBuf::from(format!("{}.real", args[si + 1]));
    let mut real_args = args.to_vec();
    real_args[si + 1] = real.to_string_lossy().into_owned();
    let mut child = match Command::new(bin)
        .args(&real_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mutant-proxy: {bin}: {e}");
            return 127;
        }
    };
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut banner = String::new();
    if out.read_line(&mut banner).unwrap_or(0) == 0 {
        return child.wait().map(exit_code).unwrap_or(1);
    }
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut out, &mut std::io::sink());
    });
    if kind == Kind::StrayFile {
        let _ = std::fs::write("mutant-was-here", "stray\n");
    }
    let _ = std::fs::remove_file(&socket);
    let listener = match UnixListener::bind(&socket) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("mutant-proxy: bind: {e}");
            return 1;
        }
    };
    print!(
        "{}",
        banner.replace(&real.to_string_lossy().into_owned(), &socket.to_string_lossy())
    );
    let _ = std::io::stdout().flush();
    {
        let (real, socket) = (real.clone(), socket.clone());
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(10));
            if !real.exists() {
                let _ = child.try_wait();
                let _ = std::fs::remove_file(&socket);
                std::process::exit(0);
            }
        });
    }
    let odd_start = kind == Kind::EveryOtherStart && count_start() % 2 == 1;
    for (n, client) in listener.incoming().enumerate() {
        let Ok(client) = client else { continue };
        let real = real.clone();
        let st = MutState {
            late: n >= LATE_AFTER,
            odd_start,
            ..MutState::default()
        };
        std::thread::spawn(move || relay(kind, client, &real, st));
    }
    0
}

/// Adds one to the start count in `$MUTANT_STATE` and returns the new
/// count (every-other-start). Starts are sequential in the tests that
/// use it, so a plain read and write is enough.
fn count_start() -> u64 {
    let Some(path) = std::env::var_os("MUTANT_STATE") else {
        eprintln!("mutant-proxy: every-other-start needs MUTANT_STATE");
        return 0;
    };
    let n = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0)
        + 1;
    let _ = std::fs::write(&path, n.to_string());
    n
}

/// Rewrites a `process.spawn` request line to run its command under
/// `setsid -f` (other lines are returned unchanged).
pub fn setsid_spawn(line: &[u8]) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(line) else {
        return line.to_vec();
    };
    if v.get("method").and_then(|m| m.as_str()) != Some("process.spawn") {
        return line.to_vec();
    }
    let Some(p) = v.get_mut("params").and_then(|p| p.as_object_mut()) else {
        return line.to_vec();
    };
    let Some(cmd) = p.get("command").cloned() else {
        return line.to_vec();
    };
    let mut args = vec![serde_json::Value::from("-f"), cmd];
    if let Some(a) = p.get("args").and_then(|a| a.as_array()) {
        args.extend(a.iter().cloned());
    }
    p.insert("command".into(), "setsid".into());
    p.insert("args".into(), args.into());
    serde_json::to_vec(&v).unwrap_or_else(|_| line.to_vec())
}

/// Client → server: unchanged, except for the kinds that act on requests.
fn upstream(kind: Kind, c_r: UnixStream, s_w: &mut UnixStream, real: &std::path::Path) {
    let mut r = BufReader::new(c_r);
    match kind {
        Kind::LeaveGrandchild => loop {
            let mut line = Vec::new();
            match r.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let nl = line.last() == Some(&b'\n');
            if nl {
                line.pop();
            }
            let mut out = setsid_spawn(&line);
            if nl {
                out.push(b'\n');
            }
            if s_w.write_all(&out).is_err() {
                return;
            }
        },
        Kind::DieOnLongLine => {
            let mut since_nl = 0usize;
            loop {
                let n = match r.fill_buf() {
                    Ok([]) | Err(_) => return,
                    Ok(b) => {
                        for c in b {
                            since_nl = if *c == b'\n' { 0 } else { since_nl + 1 };
                            if since_nl > LONG_LINE {
                                crate::runner::kill_mentioning(real);
                                std::process::exit(70);
                            }
                        }
                        if s_w.write_all(b).is_err() {
                            return;
                        }
                        b.len()
                    }
                };
                r.consume(n);
            }
        }
        _ => {
            let _ = std::io::copy(&mut r, s_w);
        }
    }
}

fn relay(kind: Kind, client: UnixStream, real: &std::path::Path, mut st: MutState) {
    let Ok(server) = UnixStream::connect(real) else {
        return;
    };
    let (c_r, mut s_w) = (client.try_clone().expect("clone"), server.try_clone().expect("clone"));
    if kind == Kind::LeakFd {
        std::mem::forget(client.try_clone());
    }
    let real = real.to_path_buf();
    std::thread::spawn(move || {
        upstream(kind, c_r, &mut s_w, &real);
        let _ = s_w.shutdown(std::net::Shutdown::Write);
    });
    let mut reader = BufReader::new(server);
    let mut w = client;
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let nl = line.last() == Some(&b'\n');
        if nl {
            line.pop();
        }
        let mut outb = Vec::new();
        for l in mutate_line(kind, &line, &mut st) {
            outb.extend(l);
            if nl {
                outb.push(b'\n');
            }
        }
        if w.write_all(&outb).is_err() {
            break;
        }
    }
    let _ = w.shutdown(std::net::Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations() {
        let mut st = MutState::default();
        let e = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Unknown namespace: x"}}"#;
        let m = mutate_line(Kind::ErrorByte, e, &mut st);
        assert_eq!(m[0].len(), e.len());
        assert!(contains(&m[0], b"\"message\":\"unknown"));
        assert_eq!(mutate_line(Kind::InvalidParams, e, &mut st)[0], e.to_vec());
        assert_eq!(mutate_line(Kind::LateErrorByte, e, &mut st)[0], e.to_vec());
        let mut late = MutState {
            late: true,
            ..MutState::default()
        };
        assert!(contains(
            &mutate_line(Kind::LateErrorByte, e, &mut late)[0],
            b"\"message\":\"unknown"
        ));
        let p = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params"}}"#;
        assert!(contains(
            &mutate_line(Kind::InvalidParams, p, &mut st)[0],
            b"\"message\":\"invalid params"
        ));
        let m = mutate_line(Kind::SwapFields, e, &mut st);
        assert!(
            m[0].starts_with(br#"{"id":1,"jsonrpc":"2.0","error""#),
            "{}",
            String::from_utf8_lossy(&m[0])
        );
        let f = br#"{"type":"stream","processId":"p","stream":"stdout","seq":1,"data":"aGkK"}"#;
        let m = mutate_line(Kind::DropByte, f, &mut st);
        assert!(contains(&m[0], b"\"data\":\"aGk=\""));
        let mut st = MutState::default();
        assert_eq!(mutate_line(Kind::ExtraFrame, f, &mut st).len(), 2);
        assert_eq!(mutate_line(Kind::ExtraFrame, f, &mut st).len(), 1);
        let mut st = MutState::default();
        let dropped = (0..30)
            .filter(|_| mutate_line(Kind::DropFrame, f, &mut st).is_empty())
            .count();
        assert_eq!(dropped, 1);
        let s = setsid_spawn(br#"{"jsonrpc":"2.0","id":1,"method":"process.spawn","params":{"id":"p","command":"sh","args":["-c","x"]}}"#);
        assert!(
            contains(&s, br#""command":"setsid","args":["-f","sh","-c","x"]"#),
            "{}",
            String::from_utf8_lossy(&s)
        );
        let ping = br#"{"jsonrpc":"2.0","id":1,"method":"server.ping"}"#;
        assert_eq!(setsid_spawn(ping), ping.to_vec());
        let caps =
            br#"{"jsonrpc":"2.0","id":1,"result":{"methods":["process.reattach","plugins.prune"],"features":[]}}"#;
        assert_eq!(
            mutate_line(Kind::ForgetPrune, caps, &mut st)[0],
            br#"{"jsonrpc":"2.0","id":1,"result":{"methods":["process.reattach"],"features":[]}}"#.to_vec()
        );
        assert_eq!(mutate_line(Kind::ForgetPrune, e, &mut st)[0], e.to_vec());
        assert_eq!(mutate_line(Kind::EveryOtherStart, e, &mut st)[0], e.to_vec());
        let mut odd = MutState {
            odd_start: true,
            ..MutState::default()
        };
        assert!(contains(
            &mutate_line(Kind::EveryOtherStart, e, &mut odd)[0],
            b"\"message\":\"unknown"
        ));
    }
}
