//! `harness bench`: performance comparison of two daemons. Every item
//! runs against each binary in its own fresh daemon and fails soft — an
//! item that cannot run (e.g. `process.*` not implemented) is reported as
//! `n/a: <reason>`.

use crate::bench_daemon::{read_line, req, rss_kib, Live};
use serde_json::Value;
use std::io::{BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// Bench knobs.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub stream_bytes: u64,
    pub pings: usize,
    pub pipelined: usize,
    pub spawns: usize,
    /// Memory items (see [`crate::bench_mem`]).
    pub memory: crate::bench_mem::MemoryOptions,
}

fn is_reply(l: &[u8], id: usize) -> bool {
    l.starts_with(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},").as_bytes())
}

fn check_ok(l: &[u8]) -> Result<(), String> {
    let v: Value = serde_json::from_slice(l).map_err(|e| format!("bad reply: {e}"))?;
    if let Some(e) = v.get("error") {
        return Err(format!(
            "n/a: {}",
            e.get("message").and_then(Value::as_str).unwrap_or("error")
        ));
    }
    Ok(())
}

fn median_f(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn ping_rtt(d: &Live, n: usize) -> Result<f64, String> {
    let mut s = d.conn()?;
    let mut r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
    let mut v = Vec::with_capacity(n);
    for i in 1..=n {
        let t = Instant::now();
        s.write_all(req(i, "server.ping", "{}").as_bytes())
            .map_err(|e| e.to_string())?;
        let l = read_line(&mut r)?;
        v.push(t.elapsed().as_secs_f64() * 1e6);
        check_ok(&l)?;
    }
    Ok(median_f(v))
}

fn pipelined(d: &Live, conns: usize, per: usize) -> Result<f64, String> {
    let t = Instant::now();
    let results: Vec<Result<(), String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..conns)
            .map(|_| {
                sc.spawn(move || -> Result<(), String> {
                    let s = d.conn()?;
                    let mut w = s.try_clone().map_err(|e| e.to_string())?;
                    let writer = std::thread::spawn(move || {
                        let mut buf = Vec::new();
                        for i in 1..=per {
                            buf.extend_from_slice(req(i, "server.ping", "{}").as_bytes());
                        }
                        w.write_all(&buf)
                    });
                    let mut r = BufReader::new(s);
                    for _ in 0..per {
                        read_line(&mut r)?;
                    }
                    writer.join().map_err(|_| "writer panicked")?.map_err(|e| e.to_string())
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or(Err("panicked".into())))
            .collect()
    });
    for r in results {
        r?;
    }
    Ok((conns * per) as f64 / t.elapsed().as_secs_f64())
}

fn spawn_exit(d: &Live, n: usize) -> Result<f64, String> {
    let mut s = d.conn()?;
    let mut r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
    let mut v = Vec::new();
    for i in 1..=n {
        let t = Instant::now();
        let p = format!("{{\"id\":\"b{i}\",\"command\":\"true\"}}");
        s.write_all(req(i, "process.spawn", &p).as_bytes())
            .map_err(|e| e.to_string())?;
        let exit = format!("\"processId\":\"b{i}\",\"stream\":\"exit\"");
        loop {
            let l = read_line(&mut r)?;
            if is_reply(&l, i) {
                check_ok(&l)?;
            } else if l.windows(exit.len()).any(|w| w == exit.as_bytes()) {
                break;
            }
        }
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median_f(v))
}

/// Checks a stream of `head -c N /dev/zero` frame by frame, cheaply enough
/// not to be the bottleneck: seqs strictly +1 from the first, every data
/// byte zero (base64 `A`, then padding), the decoded total, the exit last.
#[derive(Default)]
struct ZeroStream {
    next_seq: Option<u64>,
    bytes: u64,
    exited: bool,
}

impl ZeroStream {
    fn field<'a>(l: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
        let at = l.windows(key.len()).position(|w| w == key)? + key.len();
        let rest = &l[at..];
        let end = rest.iter().position(|&b| b == b'"' || b == b',' || b == b'}')?;
        Some(&rest[..end])
    }

    /// Takes one line; `Ok(false)` when it is not a stream frame.
    fn take(&mut self, l: &[u8]) -> Result<bool, String> {
        if !l.starts_with(b"{\"type\":\"stream\"") {
            return Ok(false);
        }
        if self.exited {
            return Err("a frame after the exit frame".into());
        }
        let seq: u64 = Self::field(l, b"\"seq\":")
            .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
            .ok_or("a frame without seq")?;
        if let Some(want) = self.next_seq {
            if seq != want {
                return Err(format!("seq {seq} where {want} was due"));
            }
        }
        self.next_seq = Some(seq + 1);
        if l.windows(15).any(|w| w == b"\"stream\":\"exit\"") {
            self.exited = true;
            return Ok(true);
        }
        let data = Self::field(l, b"\"data\":\"").ok_or("a frame without data")?;
        let pad = data.iter().rev().take_while(|&&b| b == b'=').count();
        if pad > 2 || data[..data.len() - pad].iter().any(|&b| b != b'A') || data.len() % 4 != 0 {
            return Err(format!("frame {seq} carries bytes that are not zero"));
        }
        self.bytes += (data.len() / 4 * 3 - pad) as u64;
        Ok(true)
    }

    fn finish(&self, want: u64) -> Result<(), String> {
        match (self.exited, self.bytes == want) {
            (true, true) => Ok(()),
            (false, _) => Err("no exit frame".into()),
            (true, false) => Err(format!("{} bytes where {want} were written", self.bytes)),
        }
    }
}

/// Returns (MiB/s streamed, MiB/s replayed, peak RSS KiB during the stream).
/// Both the live stream and the replay from seq 0 must reassemble to
/// exactly the bytes the child wrote.
fn stream(d: &Live, bytes: u64) -> (Result<f64, String>, Result<f64, String>, Result<f64, String>) {
    let run = || -> Result<(f64, f64, f64), String> {
        let pid = d.pid();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let sampler = {
            let (stop, peak) = (stop.clone(), peak.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Some(k) = pid.and_then(rss_kib) {
                        peak.fetch_max(k, std::sync::atomic::Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        let mut s = d.conn()?;
        let mut r = BufReader::with_capacity(1 << 20, s.try_clone().map_err(|e| e.to_string())?);
        let p = format!("{{\"id\":\"big\",\"command\":\"head\",\"args\":[\"-c\",\"{bytes}\",\"/dev/zero\"]}}");
        let t = Instant::now();
        s.write_all(req(1, "process.spawn", &p).as_bytes())
            .map_err(|e| e.to_string())?;
        let mut live = ZeroStream::default();
        loop {
            let l = read_line(&mut r)?;
            if is_reply(&l, 1) {
                check_ok(&l)?;
            } else if live.take(&l)? && live.exited {
                break;
            }
        }
        live.finish(bytes).map_err(|e| format!("live stream: {e}"))?;
        let streamed = bytes as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = sampler.join();
        let mut s2 = d.conn()?;
        let mut r2 = BufReader::with_capacity(1 << 20, s2.try_clone().map_err(|e| e.to_string())?);
        let t = Instant::now();
        s2.write_all(req(2, "process.reattach", "{\"id\":\"big\",\"fromSeq\":0}").as_bytes())
            .map_err(|e| e.to_string())?;
        let mut replay = ZeroStream {
            next_seq: Some(1),
            ..ZeroStream::default()
        };
        loop {
            let l = read_line(&mut r2)?;
            if is_reply(&l, 2) {
                check_ok(&l)?;
                break;
            }
            replay.take(&l)?;
        }
        replay.finish(bytes).map_err(|e| format!("replay from seq 0: {e}"))?;
        let replayed = bytes as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64();
        Ok((
            streamed,
            replayed,
            peak.load(std::sync::atomic::Ordering::Relaxed) as f64,
        ))
    };
    match run() {
        Ok((a, b, c)) => (
            Ok(a),
            Ok(b),
            if c > 0.0 {
                Ok(c)
            } else {
                Err("n/a: no daemon pid".into())
            },
        ),
        Err(e) => (Err(e.clone()), Err(e.clone()), Err(e)),
    }
}

/// One bench line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Item {
    pub name: String,
    pub unit: String,
    /// Whether larger is better (throughput) or smaller (latency, memory).
    pub higher_is_better: bool,
    pub reference: Result<f64, String>,
    pub candidate: Result<f64, String>,
}

fn measure(bin: &Path, o: &BenchOptions) -> Vec<(String, String, bool, Result<f64, String>)> {
    let mut out = Vec::new();
    let d = match Live::start(bin) {
        Ok(d) => d,
        Err(e) => {
            for (n, u, h) in names() {
                out.push((n.into(), u.into(), h, Err(e.clone())));
            }
            out.push((
                "daemon VmHWM after stream + replay".into(),
                "KiB".into(),
                false,
                Err(e.clone()),
            ));
            out.extend(crate::bench_mem::measure(bin, &o.memory));
            return out;
        }
    };
    let idle = d
        .pid()
        .and_then(rss_kib)
        .map(|k| k as f64)
        .ok_or_else(|| "n/a: daemon pid not found".to_string());
    let (stream_r, replay_r, rss_load) = stream(&d, o.stream_bytes);
    // Read before the other items run, so it is the stream's and the
    // replay's high-water mark alone.
    let hwm = d
        .pid()
        .and_then(crate::bench_daemon::hwm_kib)
        .map(|k| k as f64)
        .ok_or_else(|| "n/a: daemon pid not found".to_string());
    let results = [
        ping_rtt(&d, o.pings),
        pipelined(&d, 1, o.pipelined),
        pipelined(&d, 64, (o.pipelined / 64).max(10)),
        spawn_exit(&d, o.spawns),
        stream_r,
        replay_r,
        idle,
        rss_load,
    ];
    for ((n, u, h), r) in names().into_iter().zip(results) {
        out.push((n.into(), u.into(), h, r));
    }
    out.push(("daemon VmHWM after stream + replay".into(), "KiB".into(), false, hwm));
    drop(d);
    out.extend(crate::bench_mem::measure(bin, &o.memory));
    out
}

fn names() -> Vec<(&'static str, &'static str, bool)> {
    vec![
        ("ping round trip (median)", "µs", false),
        ("pipelined pings, 1 connection", "req/s", true),
        ("pipelined pings, 64 connections", "req/s", true),
        ("spawn `true` to exit frame (median)", "ms", false),
        ("stream throughput (head -c N /dev/zero)", "MiB/s", true),
        ("reattach replay of that stream (byte-exact)", "MiB/s", true),
        ("daemon RSS idle", "KiB", false),
        ("daemon RSS peak while streaming", "KiB", false),
    ]
}

/// Runs the bench on both binaries.
pub fn run(reference: &Path, candidate: &Path, o: &BenchOptions) -> Vec<Item> {
    eprintln!("bench: reference {}", reference.display());
    let r = measure(reference, o);
    eprintln!("bench: candidate {}", candidate.display());
    let c = measure(candidate, o);
    r.into_iter()
        .zip(c)
        .map(|((name, unit, h, rv), (_, _, _, cv))| Item {
            name,
            unit,
            higher_is_better: h,
            reference: rv,
            candidate: cv,
        })
        .collect()
}

/// The bench table.
pub fn table(items: &[Item]) -> String {
    let mut o = format!(
        "{:<42} {:>14} {:>14} {:>7}\n",
        "bench", "reference", "candidate", "ratio"
    );
    for i in items {
        let f = |r: &Result<f64, String>| match r {
            Ok(v) => format!("{v:.1} {}", i.unit),
            Err(e) => e.chars().take(60).collect(),
        };
        let ratio = match (&i.reference, &i.candidate) {
            (Ok(a), Ok(b)) if *a > 0.0 => format!("{:.2}", b / a),
            _ => "-".into(),
        };
        o.push_str(&format!(
            "{:<42} {:>14} {:>14} {:>7}\n",
            i.name,
            f(&i.reference),
            f(&i.candidate),
            ratio
        ));
    }
    o.push_str(
        "ratio = candidate / reference (for req/s and MiB/s higher is better; for µs, ms, KiB lower is better)\n",
    );
    o
}

#[cfg(test)]
mod tests {
    use super::ZeroStream;

    fn frame(seq: u64, data: &str) -> Vec<u8> {
        format!(r#"{{"type":"stream","processId":"big","stream":"stdout","seq":{seq},"data":"{data}"}}"#).into_bytes()
    }

    fn exit(seq: u64) -> Vec<u8> {
        format!(r#"{{"type":"stream","processId":"big","stream":"exit","seq":{seq},"exitCode":0}}"#).into_bytes()
    }

    #[test]
    fn zero_stream_accepts_exactly_the_written_zeros() {
        let mut z = ZeroStream::default();
        assert!(z.take(&frame(3, "AAAA")).unwrap());
        assert!(z.take(&frame(4, "AA==")).unwrap());
        assert!(!z.take(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap());
        assert!(z.take(&exit(5)).unwrap());
        assert_eq!(z.finish(4), Ok(()));
        assert!(z.finish(5).is_err(), "a byte short");
    }

    #[test]
    fn zero_stream_refuses_gaps_nonzero_bytes_and_late_frames() {
        let mut z = ZeroStream::default();
        z.take(&frame(1, "AAAA")).unwrap();
        assert!(z.take(&frame(3, "AAAA")).is_err(), "seq gap");
        let mut z = ZeroStream::default();
        assert!(z.take(&frame(1, "AAAB")).is_err(), "a non-zero byte");
        let mut z = ZeroStream::default();
        assert!(z.take(&frame(1, "====")).is_err(), "padding only");
        let mut z = ZeroStream::default();
        z.take(&exit(1)).unwrap();
        assert!(z.take(&frame(2, "AAAA")).is_err(), "after the exit");
        let z = ZeroStream::default();
        assert!(z.finish(0).is_err(), "no exit frame");
    }
}
