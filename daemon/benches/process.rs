//! Supervisor benchmarks against a real `remora -serve` (release build):
//!
//! 1. stream throughput: a child writing 1 GiB to stdout, one subscriber;
//! 2. spawn-to-exit-frame latency of `/bin/true` (median, p90);
//! 3. daemon VmHWM while a 256 MiB stream passes through one subscriber
//!    and is then replayed from seq 0 (from disk) to a new connection;
//! 4. 64 chatty children: throughput of a fast subscriber with and without
//!    a stalled subscriber following the same processes.
//!
//! Figures are printed, never asserted. `REMORA_BENCH_SCALE=0.25` shrinks
//! the volumes on a busy machine.

#![allow(clippy::unwrap_used)] // a test or bench that unwraps fails loudly; the lint guards the daemon

#[path = "../tests/it/common/mod.rs"]
mod common;

use common::{Client, TestDaemon};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const PREFIX: &[u8] = br#"{"type":"stream","processId":""#;

fn scale() -> f64 {
    std::env::var("REMORA_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0)
}

/// A fast line reader that understands just enough of a stream frame.
struct FrameReader {
    reader: BufReader<UnixStream>,
    line: Vec<u8>,
}

struct Seen {
    process: String,
    exit: bool,
    /// Decoded length of the data, from the base64 length.
    raw: u64,
    is_frame: bool,
}

impl FrameReader {
    fn new(stream: UnixStream) -> FrameReader {
        FrameReader {
            reader: BufReader::with_capacity(1 << 20, stream),
            line: Vec::with_capacity(64 * 1024),
        }
    }

    fn next(&mut self) -> Seen {
        self.line.clear();
        let n = self.reader.read_until(b'\n', &mut self.line).expect("read");
        assert!(n > 0, "daemon closed the connection");
        let line = &self.line;
        let is_frame = line.starts_with(PREFIX);
        if !is_frame {
            return Seen {
                process: String::new(),
                exit: false,
                raw: 0,
                is_frame,
            };
        }
        // {"type":"stream","processId":"<id>","stream":"<name>","seq":N,"data":"<b64>"}
        let rest = &line[PREFIX.len()..];
        let end = rest.iter().position(|&b| b == b'"').unwrap_or(0);
        let process = String::from_utf8_lossy(&rest[..end]).into_owned();
        let after_id = &rest[end..];
        let exit = after_id.starts_with(br#"","stream":"exit""#);
        let mut raw = 0;
        if !exit {
            // `","stream":"stdout","seq":N,"data":"` — skip it positionally
            // so the client stays cheap next to the daemon.
            let tail = line.len() - 3;
            let seq_at = PREFIX.len() + end + br#"","stream":"stdout","seq":"#.len();
            let digits = line[seq_at..].iter().take_while(|b| b.is_ascii_digit()).count();
            let start = (seq_at + digits + br#","data":""#.len()).min(tail);
            let data = &line[start..tail];
            let pad = data.iter().rev().take_while(|&&b| b == b'=').count() as u64;
            raw = data.len() as u64 / 4 * 3 - pad;
        }
        Seen {
            process,
            exit,
            raw,
            is_frame,
        }
    }
}

fn send(stream: &mut UnixStream, id: u64, method: &str, params: &str) {
    let line = common::request_line(&id.to_string(), method, Some(params), common::TOKEN);
    stream.write_all(line.as_bytes()).expect("send");
}

fn connect(d: &TestDaemon) -> (UnixStream, FrameReader) {
    let s = UnixStream::connect(&d.socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let r = FrameReader::new(s.try_clone().unwrap());
    (s, r)
}

/// The daemon's pid: the process whose command line names our socket and
/// whose parent is not this bench. The `-serve` launcher names it too, and
/// may still be exiting (or a zombie, with no memory figures) when this
/// runs; it is our child, the detached daemon is not.
fn daemon_pid(socket: &std::path::Path) -> Option<u32> {
    let needle = socket.to_string_lossy().into_owned();
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if !cmdline.split(|&b| b == 0).any(|a| a == needle.as_bytes()) {
            continue;
        }
        // ppid is the 2nd field after the parenthesised command name.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid.is_some_and(|p| p != me) && memory(pid).1 > 0 {
            return Some(pid);
        }
    }
    None
}

/// VmRSS and VmHWM of `pid`, in bytes.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn gbps(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / elapsed.as_secs_f64() / 1e9
}

fn bench_throughput() {
    let bytes = ((1u64 << 30) as f64 * scale()) as u64;
    let d = TestDaemon::start();
    let (mut s, mut r) = connect(&d);
    let t = Instant::now();
    send(
        &mut s,
        1,
        "process.spawn",
        &format!(r#"{{"id":"t","command":"head","args":["-c","{bytes}","/dev/zero"]}}"#),
    );
    let mut raw = 0;
    let mut frames = 0u64;
    loop {
        let seen = r.next();
        if !seen.is_frame {
            continue;
        }
        if seen.exit {
            break;
        }
        raw += seen.raw;
        frames += 1;
    }
    let elapsed = t.elapsed();
    assert_eq!(raw, bytes);
    println!(
        "throughput: {} MiB through one subscriber in {:.2?} = {:.2} GB/s raw ({frames} frames, target >= 1 GB/s)",
        bytes / MIB,
        elapsed,
        gbps(raw, elapsed)
    );
}

fn bench_spawn_latency() {
    let d = TestDaemon::start();
    let (mut s, mut r) = connect(&d);
    let runs = (300.0 * scale()).max(20.0) as u64;
    let mut samples = Vec::new();
    for i in 0..runs {
        let id = format!("l{i}");
        let t = Instant::now();
        send(
            &mut s,
            i,
            "process.spawn",
            &format!(r#"{{"id":"{id}","command":"/bin/true"}}"#),
        );
        loop {
            let seen = r.next();
            if seen.is_frame && seen.exit && seen.process == id {
                break;
            }
        }
        samples.push(t.elapsed());
    }
    samples.sort();
    let pct = |p: usize| samples[(samples.len() * p / 100).min(samples.len() - 1)];
    println!(
        "spawn latency: /bin/true spawn request -> exit frame, {} runs: median {:.2?}, p90 {:.2?}, min {:.2?} (target median < 2 ms)",
        samples.len(),
        pct(50),
        pct(90),
        samples[0]
    );
}

fn bench_replay_memory() {
    let bytes = ((256 * MIB) as f64 * scale()) as u64;
    let d = TestDaemon::start();
    let pid = daemon_pid(&d.socket).expect("daemon pid");
    let (rss_start, _) = memory(pid);
    let t_fill = Instant::now();
    {
        // The stream passes through one subscriber (the spawning
        // connection), which is then dropped; the log spills to disk.
        let (mut s, mut r) = connect(&d);
        send(
            &mut s,
            1,
            "process.spawn",
            &format!(r#"{{"id":"m","command":"head","args":["-c","{bytes}","/dev/zero"]}}"#),
        );
        loop {
            let seen = r.next();
            if seen.is_frame && seen.exit {
                break;
            }
        }
    }
    let fill_elapsed = t_fill.elapsed();
    let (rss_filled, hwm_filled) = memory(pid);
    let (mut s, mut r) = connect(&d);
    let sampler_stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = sampler_stop.clone();
    let sampler = std::thread::spawn(move || {
        let mut peak = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            peak = peak.max(memory(pid).0);
            std::thread::sleep(Duration::from_millis(5));
        }
        peak
    });
    let t = Instant::now();
    send(&mut s, 2, "process.reattach", r#"{"id":"m","fromSeq":0}"#);
    let mut raw = 0;
    loop {
        let seen = r.next();
        if !seen.is_frame {
            break; // the reply comes after every replayed frame
        }
        raw += seen.raw;
    }
    let elapsed = t.elapsed();
    sampler_stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak_rss = sampler.join().unwrap_or(0);
    let (_, hwm) = memory(pid);
    assert_eq!(raw, bytes);
    // Issue #11's bound: the whole stream passing and being replayed
    // leaves the daemon's high-water mark at or under 48 MiB.
    let limit = 48 * MIB;
    println!(
        "replay memory: {} MiB stream through one subscriber ({:.2} GB/s), then replayed from seq 0 by a new connection in {:.2?} ({:.2} GB/s); daemon pid {}: RSS idle {:.1} MiB, after the stream {:.1} MiB, VmHWM after the stream {:.1} MiB, peak RSS during replay {:.1} MiB, VmHWM after replay {:.1} MiB (bound {} MiB: {})",
        bytes / MIB,
        gbps(bytes, fill_elapsed),
        elapsed,
        gbps(raw, elapsed),
        pid,
        rss_start as f64 / MIB as f64,
        rss_filled as f64 / MIB as f64,
        hwm_filled as f64 / MIB as f64,
        peak_rss as f64 / MIB as f64,
        hwm as f64 / MIB as f64,
        limit / MIB,
        if hwm <= limit { "within" } else { "OVER" }
    );
}

/// 64 children wait for a newline on stdin, then write `per_child` bytes.
/// Returns the fast subscriber's throughput in GB/s.
fn chatty_round(stalled: bool) -> f64 {
    let children = 64;
    let per_child = ((4 * MIB) as f64 * scale()) as u64;
    let d = TestDaemon::start();
    let (mut fast, mut fast_r) = connect(&d);
    for i in 0..children {
        send(
            &mut fast,
            i,
            "process.spawn",
            &format!(r#"{{"id":"c{i}","command":"sh","args":["-c","read x; exec head -c {per_child} /dev/zero"]}}"#),
        );
    }
    let mut replies = 0;
    while replies < children {
        if !fast_r.next().is_frame {
            replies += 1;
        }
    }
    // The stalled subscriber follows every child and never reads.
    let mut stalled_conn = None;
    if stalled {
        let mut c = Client::connect(&d.socket);
        for i in 0..children {
            let reply = c.call(1000 + i, "process.reattach", &format!(r#"{{"id":"c{i}","fromSeq":0}}"#));
            assert!(reply.contains(r#""found":true"#));
        }
        stalled_conn = Some(c);
    }
    let t = Instant::now();
    for i in 0..children {
        send(
            &mut fast,
            2000 + i,
            "process.stdin",
            &format!(r#"{{"id":"c{i}","data":"Cg=="}}"#),
        );
    }
    let mut raw = 0;
    let mut exits = 0;
    while exits < children {
        let seen = fast_r.next();
        if seen.is_frame {
            raw += seen.raw;
            if seen.exit {
                exits += 1;
            }
        }
    }
    let elapsed = t.elapsed();
    assert_eq!(raw, per_child * children);
    drop(stalled_conn);
    gbps(raw, elapsed)
}

fn bench_stalled_subscriber() {
    let mut without = 0f64;
    let mut with = 0f64;
    // Interleaved, best of 2, to damp noise from the shared machine.
    for _ in 0..2 {
        without = without.max(chatty_round(false));
        with = with.max(chatty_round(true));
    }
    println!(
        "stalled subscriber: 64 chatty children, fast subscriber {:.2} GB/s alone vs {:.2} GB/s with a stalled one ({:+.1}%, target drop <= 10%)",
        without,
        with,
        (with / without - 1.0) * 100.0
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects benches.
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let selected = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    if selected("throughput") {
        bench_throughput();
    }
    if selected("latency") {
        bench_spawn_latency();
    }
    if selected("replay_memory") {
        bench_replay_memory();
    }
    if selected("stalled") {
        bench_stalled_subscriber();
    }
}
