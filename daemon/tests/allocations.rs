//! Heap allocations per request and per streamed MiB, counted by the
//! `alloc-count` build's global allocator and read from `-metrics-addr`
//! (`remora_heap_allocations_total`). Deterministic counts, no timing.
//!
//! Run: `cargo test -p remora --features alloc-count --test allocations -- --nocapture`
//! (prints the figures that docs/PERFORMANCE.md records).

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly; the lint guards the daemon

#[path = "it/common/mod.rs"]
mod common;

use common::{TestDaemon, TOKEN};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// The address the daemon's metrics listener bound, from its log line.
fn metrics_addr(d: &TestDaemon) -> String {
    let log = d.log();
    let (_, rest) = log
        .split_once("[Server] metrics: serving http://")
        .unwrap_or_else(|| panic!("no metrics line: {log}"));
    rest.split_once("/metrics").expect("metrics path").0.to_string()
}

/// The daemon's allocation count so far.
fn allocations(addr: &str) -> u64 {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to metrics");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let line = out
        .lines()
        .find(|l| l.starts_with("remora_heap_allocations_total "))
        .unwrap_or_else(|| panic!("no allocation counter: {out}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Allocations the daemon makes between two scrapes with nothing else
/// going on: what one scrape itself costs, taken off every figure.
fn scrape_cost(addr: &str) -> u64 {
    (0..3)
        .map(|_| {
            let a = allocations(addr);
            allocations(addr) - a
        })
        .min()
        .unwrap()
}

struct Conn {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    line: Vec<u8>,
}

impl Conn {
    fn open(d: &TestDaemon) -> Conn {
        let stream = UnixStream::connect(&d.socket).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        Conn {
            reader: BufReader::with_capacity(1 << 16, stream.try_clone().unwrap()),
            writer: stream,
            line: Vec::new(),
        }
    }

    fn next_line(&mut self) -> &[u8] {
        self.line.clear();
        let n = self.reader.read_until(b'\n', &mut self.line).unwrap();
        assert!(n > 0, "connection closed");
        &self.line
    }

    /// Sends `count` pings in batches and reads every reply.
    fn pings(&mut self, count: usize) {
        let ping = format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"server.ping\",\"auth\":\"{TOKEN}\"}}\n");
        let want = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"pong\":true}}\n".to_vec();
        let batch = ping.repeat(500);
        let mut writer = self.writer.try_clone().unwrap();
        let batches = count / 500;
        let feeder = std::thread::spawn(move || {
            for _ in 0..batches {
                writer.write_all(batch.as_bytes()).unwrap();
            }
        });
        for _ in 0..batches * 500 {
            assert_eq!(self.next_line(), want.as_slice());
        }
        feeder.join().unwrap();
    }

    fn call(&mut self, id: u64, method: &str, params: &str) -> Vec<u8> {
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{params},\"auth\":\"{TOKEN}\"}}\n"
        );
        self.writer.write_all(line.as_bytes()).unwrap();
        let prefix = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},");
        loop {
            let got = self.next_line().to_vec();
            if got.starts_with(prefix.as_bytes()) {
                return got;
            }
        }
    }

    /// Reads stream lines of process `id` until its exit frame; returns the
    /// number of data frames.
    fn frames_until_exit(&mut self, id: &str) -> u64 {
        let exit = format!("{{\"type\":\"stream\",\"processId\":\"{id}\",\"stream\":\"exit\"");
        let data = format!("{{\"type\":\"stream\",\"processId\":\"{id}\",\"stream\":\"stdout\"");
        let mut frames = 0;
        loop {
            let line = self.next_line();
            if line.starts_with(exit.as_bytes()) {
                return frames;
            }
            if line.starts_with(data.as_bytes()) {
                frames += 1;
            }
        }
    }
}

fn start() -> (TestDaemon, String) {
    let d = TestDaemon::start_with(&["-metrics-addr", "127.0.0.1:0"], &[]);
    let addr = metrics_addr(&d);
    (d, addr)
}

const PINGS: usize = 10_000;
const SMALL_MIB: usize = 8;
const LARGE_MIB: usize = 40;

/// Pipelined pings on one connection, after a warm-up that sizes the
/// connection's buffers.
fn allocations_per_10k_pings(d: &TestDaemon, addr: &str) -> u64 {
    let mut c = Conn::open(d);
    c.pings(2_000);
    let cost = scrape_cost(addr);
    let before = allocations(addr);
    c.pings(PINGS);
    let after = allocations(addr);
    (after - before).saturating_sub(cost)
}

/// Allocations of one child writing `mib` MiB, followed live, and of its
/// replay from seq 0 on a second connection: (live, replay, data frames).
/// The spawn and the reattach cost the same whatever the size; the
/// difference between two sizes is what the bytes cost.
fn allocations_streamed(d: &TestDaemon, addr: &str, c: &mut Conn, name: &str, mib: usize) -> (u64, u64, u64) {
    let cost = scrape_cost(addr);
    let before = allocations(addr);
    let spawn = format!(
        r#"{{"id":"{name}","command":"head","args":["-c","{}","/dev/zero"]}}"#,
        mib << 20
    );
    c.call(2, "process.spawn", &spawn);
    let frames = c.frames_until_exit(name);
    let live = (allocations(addr) - before).saturating_sub(cost);

    let mut r = Conn::open(d);
    r.call(3, "server.ping", "{}");
    let before = allocations(addr);
    let reattach = format!(r#"{{"id":"{name}","fromSeq":0}}"#);
    r.writer
        .write_all(
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"process.reattach\",\"params\":{reattach},\"auth\":\"{TOKEN}\"}}\n"
            )
            .as_bytes(),
        )
        .unwrap();
    let replayed = r.frames_until_exit(name);
    let reply = r.next_line().to_vec();
    assert!(
        reply.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    assert_eq!(replayed, frames);
    let replay = (allocations(addr) - before).saturating_sub(cost);
    (live, replay, frames)
}

/// `process.stdin` calls of 1 KiB each into `cat >/dev/null`.
fn allocations_per_1k_stdin(d: &TestDaemon, addr: &str) -> u64 {
    let mut c = Conn::open(d);
    c.call(
        1,
        "process.spawn",
        r#"{"id":"in","command":"sh","args":["-c","cat >/dev/null"]}"#,
    );
    let data = base64_of_1k();
    let params = format!(r#"{{"id":"in","data":"{data}"}}"#);
    for i in 0..100 {
        c.call(10 + i, "process.stdin", &params);
    }
    let cost = scrape_cost(addr);
    let before = allocations(addr);
    for i in 0..1_000 {
        c.call(1_000 + i, "process.stdin", &params);
    }
    (allocations(addr) - before).saturating_sub(cost)
}

/// `process.stdin` calls of 1 KiB each for a process that does not
/// exist: each is refused (-32602 `Process not found`).
fn allocations_per_1k_refused_stdin(d: &TestDaemon, addr: &str) -> u64 {
    let mut c = Conn::open(d);
    let params = format!(r#"{{"id":"nobody","data":"{}"}}"#, base64_of_1k());
    for i in 0..100 {
        c.call(10 + i, "process.stdin", &params);
    }
    let cost = scrape_cost(addr);
    let before = allocations(addr);
    for i in 0..1_000 {
        let reply = String::from_utf8(c.call(1_000 + i, "process.stdin", &params)).unwrap();
        assert!(reply.contains(r#""message":"Process not found""#), "{reply}");
    }
    (allocations(addr) - before).saturating_sub(cost)
}

fn base64_of_1k() -> String {
    // 768 zero bytes per 1 KiB of base64.
    "A".repeat(1024)
}

#[test]
fn steady_state_allocations() {
    let (d, addr) = start();
    let pings = allocations_per_10k_pings(&d, &addr);
    let mut c = Conn::open(&d);
    // Warm-up: sizes the writer's buffers and the blocking pool.
    allocations_streamed(&d, &addr, &mut c, "warm", 1);
    let small = allocations_streamed(&d, &addr, &mut c, "small", SMALL_MIB);
    let large = allocations_streamed(&d, &addr, &mut c, "large", LARGE_MIB);
    let stdin = allocations_per_1k_stdin(&d, &addr);
    let refused = allocations_per_1k_refused_stdin(&d, &addr);
    let mib = (LARGE_MIB - SMALL_MIB) as f64;
    let frames = (large.2 - small.2) as f64;
    let live = large.0 as f64 - small.0 as f64;
    let replay = large.1 as f64 - small.1 as f64;
    println!("allocations per {PINGS} pipelined pings: {pings}");
    println!(
        "stream, {SMALL_MIB} MiB: {} live, {} replay; {LARGE_MIB} MiB: {} live, {} replay",
        small.0, small.1, large.0, large.1
    );
    println!(
        "per MiB streamed live: {:.1} ({:.2} per 32 KiB frame); replayed from seq 0: {:.1} ({:.2} per frame)",
        live / mib,
        live / frames,
        replay / mib,
        replay / frames
    );
    println!("allocations per 1000 process.stdin calls of 1 KiB: {stdin}");
    println!("allocations per 1000 refused process.stdin calls of 1 KiB: {refused}");
    // A ping allocated 20 times before the quick path (200 090 per
    // 10 000); what is left is the runtime's occasional bookkeeping.
    assert!(
        pings < (PINGS / 10) as u64,
        "{pings} allocations for {PINGS} pings: the ping path allocates per request again"
    );
    // A stdin call allocated 42 times on the full decoder (the Value
    // tree, the envelope's and params' strings, the decoded bytes and
    // their copy for the queue, the result and the reply line); the quick
    // path keeps one: the decoded bytes the child's queue then owns.
    assert!(
        stdin < 2_000,
        "{stdin} allocations for 1000 process.stdin calls: the stdin path allocates more than its data buffer again"
    );
    // A refused call allocated 3 times (the decoded bytes, the error's
    // text and the reply line); the writer now encodes the fixed
    // refusals, and only the decoded bytes are left.
    assert!(
        refused < 2_000,
        "{refused} allocations for 1000 refused process.stdin calls: a refusal allocates its text or line again"
    );
    // Live: 108 per MiB at first, 78 with a `spawn_blocking` task per disk
    // job (about one per frame), 42 with the store's disk-writer threads
    // (one buffer per 32 KiB read left), about 6 with frame buffers reused
    // from the store's pool. Replay: 42 per MiB with one buffer per frame
    // read back, 9 with the frames of a disk batch sharing its read
    // window, about 4 with the window reused and the frame list sized. The bounds leave room for
    // scheduling (how often a follower wakes) and fail on either return.
    assert!(
        live / mib < 25.0,
        "{:.1} allocations per MiB streamed live: a frame or a disk-writer job allocates again",
        live / mib
    );
    assert!(
        replay / mib < 20.0,
        "{:.1} allocations per MiB replayed from disk: a frame read back allocates again",
        replay / mib
    );
}
