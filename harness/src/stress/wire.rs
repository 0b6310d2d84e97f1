//! The client side of a stress scenario: request lines, a blocking
//! connection that routes replies by id and stream frames into per-process
//! receivers, and the checks every receiver makes (seqs strictly +1, the
//! exit frame last, SHA-256 of the reassembled stdout).

use super::error::{Error, StreamFault};
use base64::Engine;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

pub(crate) use crate::dut::client::{req, TOKEN};

/// A JSON string literal.
pub fn js(s: &str) -> String {
    Value::from(s).to_string()
}

/// `process.spawn` params.
pub fn spawn_params(id: &str, command: &str, args: &[&str], env: &str) -> String {
    let args: Vec<String> = args.iter().map(|a| js(a)).collect();
    format!(
        "{{\"id\":{},\"command\":{},\"args\":[{}],\"env\":{env}}}",
        js(id),
        js(command),
        args.join(",")
    )
}

/// `process.spawn` params running the harness at `harness` as a pattern
/// writer (`stress-client --mode pattern`): `bytes` of the pattern of
/// `seed`, then `linger_ms` idle. The one builder of that argv.
pub fn pattern_spawn_params(id: &str, harness: &str, seed: u64, bytes: u64, linger_ms: u64, env: &str) -> String {
    let (s, b, l) = (seed.to_string(), bytes.to_string(), linger_ms.to_string());
    let args = [
        "stress-client",
        "--mode",
        "pattern",
        "--seed",
        &s,
        "--bytes",
        &b,
        "--linger-ms",
        &l,
    ];
    spawn_params(id, harness, &args, env)
}

/// The raw value of `"key":` in a single-line JSON object: a string's
/// contents (no unescaping: ids and stream names we use have no escapes)
/// or a number's text.
pub fn field<'a>(line: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let pat = format!("\"{key}\":");
    let at = line.windows(pat.len()).position(|w| w == pat.as_bytes())? + pat.len();
    let rest = &line[at..];
    if rest.first() == Some(&b'"') {
        let end = rest[1..].iter().position(|c| *c == b'"')?;
        Some(&rest[1..1 + end])
    } else {
        let end = rest.iter().position(|c| *c == b',' || *c == b'}').unwrap_or(rest.len());
        Some(&rest[..end])
    }
}

fn num(v: Option<&[u8]>) -> Option<i64> {
    std::str::from_utf8(v?).ok()?.trim().parse().ok()
}

/// What one connection received for one process.
#[derive(Debug, Default)]
pub struct ProcRx {
    pub first_seq: Option<i64>,
    pub last_seq: Option<i64>,
    pub frames: u64,
    pub stdout_len: u64,
    hasher: Sha256,
    pub stderr: Vec<u8>,
    pub stdout_head: Vec<u8>,
    pub exit_code: Option<i64>,
    pub frames_after_exit: u64,
    /// Anomalies seen (first few): seq gaps, bad base64, second exit.
    pub faults: Vec<String>,
    /// Whether stdout is decoded and hashed (else only counted).
    pub hash: bool,
}

impl ProcRx {
    fn fault(&mut self, f: String) {
        if self.faults.len() < 5 {
            self.faults.push(f);
        }
    }

    fn absorb(&mut self, line: &[u8]) {
        let seq = num(field(line, "seq"));
        let Some(seq) = seq else {
            self.fault("frame without a seq".into());
            return;
        };
        if let Some(last) = self.last_seq {
            if seq != last + 1 {
                self.fault(format!("seq {seq} after {last}"));
            }
        } else {
            self.first_seq = Some(seq);
        }
        self.last_seq = Some(seq);
        self.frames += 1;
        if self.exit_code.is_some() {
            self.frames_after_exit += 1;
        }
        if !self.hash && field(line, "stream") == Some(b"stdout") {
            // Counting only: the decoded length follows from the base64.
            let d = field(line, "data").unwrap_or(b"");
            let pad = d.iter().rev().take_while(|c| **c == b'=').count() as u64;
            self.stdout_len += (d.len() as u64 / 4) * 3 - pad;
            return;
        }
        match field(line, "stream") {
            Some(b"exit") => {
                if self.exit_code.is_some() {
                    self.fault("second exit frame".into());
                }
                self.exit_code = Some(num(field(line, "exitCode")).unwrap_or(i64::MIN));
            }
            Some(s) => {
                let data = field(line, "data").unwrap_or(b"");
                match base64::engine::general_purpose::STANDARD.decode(data) {
                    Ok(d) if s == b"stdout" => {
                        self.stdout_len += d.len() as u64;
                        if self.stdout_head.len() < 4096 {
                            self.stdout_head.extend_from_slice(&d[..d.len().min(4096)]);
                        }
                        self.hasher.update(&d);
                    }
                    Ok(d) => {
                        if self.stderr.len() < 65536 {
                            self.stderr.extend_from_slice(&d);
                        }
                    }
                    Err(e) => self.fault(format!("seq {seq}: bad base64: {e}")),
                }
            }
            None => self.fault(format!("seq {seq}: frame without a stream")),
        }
    }

    /// Hex SHA-256 of the stdout bytes received so far.
    pub fn sha(&self) -> String {
        hex(&self.hasher.clone().finalize())
    }

    /// Checks the stream is whole: seqs from 1, strictly +1, exit last.
    pub fn whole(&self) -> Result<(), StreamFault> {
        if !self.faults.is_empty() {
            return Err(StreamFault::Seen(self.faults.clone()));
        }
        if self.first_seq != Some(1) {
            return Err(StreamFault::FirstSeq(self.first_seq));
        }
        if self.exit_code.is_none() {
            return Err(StreamFault::NoExit);
        }
        if self.frames_after_exit > 0 {
            return Err(StreamFault::AfterExit(self.frames_after_exit));
        }
        Ok(())
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A blocking connection.
pub struct Client {
    w: UnixStream,
    r: BufReader<UnixStream>,
    pub procs: BTreeMap<String, ProcRx>,
    /// Replies read while waiting for another id (raw lines).
    pub stray: Vec<Value>,
    /// Exit frames received (any process).
    pub exits: u64,
    /// Whether new receivers decode and hash stdout (default) or only count.
    pub hash: bool,
}

impl Client {
    pub fn connect(socket: &Path) -> Result<Client, Error> {
        let s = UnixStream::connect(socket).map_err(Error::io("connect"))?;
        s.set_read_timeout(Some(Duration::from_secs(60))).ok();
        let r = BufReader::with_capacity(256 * 1024, s.try_clone()?);
        Ok(Client {
            w: s,
            r,
            procs: BTreeMap::new(),
            stray: Vec::new(),
            exits: 0,
            hash: true,
        })
    }

    pub fn set_timeout(&self, t: Duration) {
        let _ = self.w.set_read_timeout(Some(t));
    }

    pub fn stream(&self) -> &UnixStream {
        &self.w
    }

    pub fn send_raw(&mut self, b: &[u8]) -> Result<(), Error> {
        self.w.write_all(b).map_err(Error::io("write"))
    }

    pub fn send(&mut self, id: &str, method: &str, params: &str) -> Result<(), Error> {
        self.send_raw(req(id, method, params).as_bytes())
    }

    /// Reads one line; stream frames are absorbed and returned as `None`.
    pub fn next(&mut self) -> Result<Option<Value>, Error> {
        let mut l = Vec::new();
        match self.r.read_until(b'\n', &mut l) {
            Ok(0) => return Err(Error::Closed),
            Ok(_) => {}
            Err(e) => return Err(Error::io("read")(e)),
        }
        if l.last() == Some(&b'\n') {
            l.pop();
        }
        if !l.starts_with(b"{\"jsonrpc\"") && field(&l, "type") == Some(b"stream") {
            let pid = String::from_utf8_lossy(field(&l, "processId").unwrap_or(b"")).into_owned();
            if field(&l, "stream") == Some(b"exit") {
                self.exits += 1;
            }
            let hash = self.hash;
            self.procs
                .entry(pid)
                .or_insert_with(|| ProcRx {
                    hash,
                    ..Default::default()
                })
                .absorb(&l);
            return Ok(None);
        }
        serde_json::from_slice(&l)
            .map(Some)
            .map_err(|source| Error::Unparsable {
                source,
                line: String::from_utf8_lossy(&l[..l.len().min(200)]).into_owned(),
            })
    }

    /// Reads until the reply with `id` (JSON text) arrives.
    pub fn wait_reply(&mut self, id: &str) -> Result<Value, Error> {
        let want: Value = serde_json::from_str(id).map_err(Error::BadId)?;
        if let Some(i) = self.stray.iter().position(|v| v.get("id") == Some(&want)) {
            return Ok(self.stray.remove(i));
        }
        loop {
            if let Some(v) = self.next()? {
                if v.get("id") == Some(&want) {
                    return Ok(v);
                }
                self.stray.push(v);
            }
        }
    }

    /// Sends a request and returns its `result` (an `error` is Err).
    pub fn call(&mut self, id: &str, method: &str, params: &str) -> Result<Value, Error> {
        self.send(id, method, params)?;
        let v = self.wait_reply(id)?;
        match v.get("result") {
            Some(r) => Ok(r.clone()),
            None => Err(Error::Refused {
                method: method.to_string(),
                error: v.get("error").cloned().unwrap_or(v),
            }),
        }
    }

    /// Reads until process `pid` has sent its exit frame.
    pub fn wait_exit(&mut self, pid: &str) -> Result<&ProcRx, Error> {
        while self.procs.get(pid).and_then(|p| p.exit_code).is_none() {
            self.next()?;
        }
        Ok(&self.procs[pid])
    }

    /// Reads until `pid` has sent at least `n` frames (or its exit).
    pub fn wait_frames(&mut self, pid: &str, n: u64) -> Result<(), Error> {
        loop {
            if let Some(p) = self.procs.get(pid) {
                if p.frames >= n || p.exit_code.is_some() {
                    return Ok(());
                }
            }
            self.next()?;
        }
    }

    /// Reads until `pid`'s stdout contains `needle`.
    pub fn wait_output(&mut self, pid: &str, needle: &[u8]) -> Result<(), Error> {
        loop {
            if let Some(p) = self.procs.get(pid) {
                if p.stdout_head.windows(needle.len()).any(|w| w == needle) {
                    return Ok(());
                }
                if p.exit_code.is_some() {
                    return Err(Error::finding(format!(
                        "{pid} exited before printing {:?}",
                        String::from_utf8_lossy(needle)
                    )));
                }
            }
            self.next()?;
        }
    }
}

/// One ping on a fresh connection, with its round trip in ms.
pub fn fresh_ping(socket: &Path, within: Duration) -> Result<f64, Error> {
    let t = std::time::Instant::now();
    let mut c = Client::connect(socket)?;
    c.set_timeout(within);
    c.call("\"fresh\"", "server.ping", "{}")?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// The deterministic byte pattern `stress-client pattern` writes: an
/// xorshift stream seeded by `seed`, so every writer is distinct and
/// every position matters.
pub fn pattern(seed: u64, len: u64, mut sink: impl FnMut(&[u8]) -> bool) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut buf = vec![0u8; 64 * 1024];
    let mut left = len;
    while left > 0 {
        let n = (left as usize).min(buf.len());
        for c in buf[..n].chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x.to_le_bytes();
            c.copy_from_slice(&b[..c.len()]);
        }
        if !sink(&buf[..n]) {
            return;
        }
        left -= n as u64;
    }
}

/// SHA-256 of `pattern(seed, len)`.
pub fn pattern_sha(seed: u64, len: u64) -> String {
    let mut h = Sha256::new();
    pattern(seed, len, |b| {
        h.update(b);
        true
    });
    hex(&h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_frames() {
        let f = br#"{"type":"stream","processId":"p1","stream":"stdout","seq":1,"data":"aGkK"}"#;
        assert_eq!(field(f, "processId"), Some(&b"p1"[..]));
        assert_eq!(field(f, "seq"), Some(&b"1"[..]));
        let mut p = ProcRx {
            hash: true,
            ..Default::default()
        };
        p.absorb(f);
        p.absorb(br#"{"type":"stream","processId":"p1","stream":"stdout","seq":3,"data":"aGkK"}"#);
        p.absorb(br#"{"type":"stream","processId":"p1","stream":"exit","seq":4,"exitCode":0}"#);
        assert_eq!(p.stdout_len, 6);
        assert_eq!(p.exit_code, Some(0));
        assert!(p.whole().unwrap_err().to_string().contains("seq 3 after 1"));
    }

    #[test]
    fn pattern_is_deterministic_and_seeded() {
        let mut a = Vec::new();
        pattern(1, 100_000, |b| {
            a.extend_from_slice(b);
            true
        });
        assert_eq!(a.len(), 100_000);
        assert_eq!(hex(&Sha256::digest(&a)), pattern_sha(1, 100_000));
        assert_ne!(pattern_sha(1, 1000), pattern_sha(2, 1000));
    }
}
