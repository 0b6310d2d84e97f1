//! `harness bench`: performance comparison of two daemons. In each round
//! both binaries run side by side, each in its own fresh daemon, and every
//! item is taken on one and then the other. Items fail soft: one that
//! cannot run (e.g. `process.*` not implemented) is reported as
//! `n/a: <reason>`.

use crate::bench_daemon::{cpu_seconds_of, read_line, req, rss_kib, Live};
use crate::bench_lean::{is_pong, with_cpu_share, zero_base64_len, Floors, Lines};
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
    /// Rounds: each measures both binaries, in alternating order; the
    /// table shows medians (see [`run`]).
    pub rounds: usize,
    /// Memory items (see [`crate::bench_mem`]), run in the first round
    /// only; `None` skips them.
    pub memory: Option<crate::bench_mem::MemoryOptions>,
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

/// The slow path for a reply that is not the expected pong byte for
/// byte: a pong with another id passes, anything else is an error.
fn check_pong(l: &[u8]) -> Result<(), String> {
    check_ok(l)?;
    let v: Value = serde_json::from_slice(l).map_err(|e| format!("bad reply: {e}"))?;
    match v.pointer("/result/pong") {
        Some(Value::Bool(true)) => Ok(()),
        _ => Err(format!("not a pong: {}", String::from_utf8_lossy(l))),
    }
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

/// Pipelined pings: `conns` connections each send `per` pings in one go
/// and read the replies. Connecting, the client threads and the request
/// bytes are ready before the clock starts (a barrier releases every
/// connection at once), so with many connections the figure is the
/// daemon's steady state rather than the client's set-up.
fn pipelined(d: &Live, conns: usize, per: usize) -> Result<f64, String> {
    let mut requests = Vec::new();
    for i in 1..=per {
        requests.extend_from_slice(req(i, "server.ping", "{}").as_bytes());
    }
    let requests = &requests;
    let ready = std::sync::Barrier::new(conns + 1);
    let ready = &ready;
    let (results, elapsed) = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..conns)
            .map(|_| {
                sc.spawn(move || -> Result<(), String> {
                    let connected = d.conn().and_then(|s| {
                        let w = s.try_clone().map_err(|e| e.to_string())?;
                        Ok((s, w))
                    });
                    // Every thread reaches the barrier, even one that
                    // could not connect, so the others are released.
                    ready.wait();
                    let (s, mut w) = connected?;
                    std::thread::scope(|inner| {
                        let writer = inner.spawn(move || w.write_all(requests));
                        let mut lines = Lines::new(s, 1 << 16);
                        for i in 1..=per {
                            let l = lines.next_line()?;
                            if !is_pong(l, i) {
                                check_pong(l)?;
                            }
                        }
                        writer.join().map_err(|_| "writer panicked")?.map_err(|e| e.to_string())
                    })
                })
            })
            .collect();
        ready.wait();
        let t = Instant::now();
        let results: Vec<Result<(), String>> = hs
            .into_iter()
            .map(|h| h.join().unwrap_or(Err("panicked".into())))
            .collect();
        (results, t.elapsed())
    });
    for r in results {
        r?;
    }
    Ok((conns * per) as f64 / elapsed.as_secs_f64())
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

    /// The expected shape of a data frame, checked in place: exact
    /// prefix, seq, all-zero base64, exact suffix. `None` sends the line to
    /// the general check.
    fn fast_data(l: &[u8]) -> Option<(u64, u64)> {
        const HEAD: &[u8] = br#"{"type":"stream","processId":"big","stream":"stdout","seq":"#;
        let rest = l.strip_prefix(HEAD)?;
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || digits > 19 {
            return None;
        }
        let seq = rest[..digits].iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        let data = rest[digits..].strip_prefix(br#","data":""#)?.strip_suffix(br#""}"#)?;
        Some((seq, zero_base64_len(data)? as u64))
    }

    fn advance(&mut self, seq: u64) -> Result<(), String> {
        if self.exited {
            return Err("a frame after the exit frame".into());
        }
        if let Some(want) = self.next_seq {
            if seq != want {
                return Err(format!("seq {seq} where {want} was due"));
            }
        }
        self.next_seq = Some(seq + 1);
        Ok(())
    }

    /// Takes one line; `Ok(false)` when it is not a stream frame.
    fn take(&mut self, l: &[u8]) -> Result<bool, String> {
        if let Some((seq, bytes)) = Self::fast_data(l) {
            self.advance(seq)?;
            self.bytes += bytes;
            return Ok(true);
        }
        if !l.starts_with(b"{\"type\":\"stream\"") {
            return Ok(false);
        }
        let seq: u64 = Self::field(l, b"\"seq\":")
            .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
            .ok_or("a frame without seq")?;
        self.advance(seq)?;
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
/// A rate and the client's CPU share while it was measured.
type RateAndShare = (f64, f64);
type Shared = Result<RateAndShare, String>;

/// What the stream step measured: the live and replay rates with the
/// client's share, the daemon's peak RSS while streaming, and the daemon's
/// own CPU seconds per GiB live and replayed.
struct StreamFigures {
    live: Shared,
    replay: Shared,
    peak_rss: Result<f64, String>,
    live_daemon_cpu: Result<f64, String>,
    replay_daemon_cpu: Result<f64, String>,
}

/// The daemon's CPU seconds between two readings, per `units` of work.
fn cpu_per(before: Option<f64>, after: Option<f64>, units: f64) -> Result<f64, String> {
    match (before, after) {
        (Some(a), Some(b)) if units > 0.0 => Ok((b - a) / units),
        _ => Err("n/a: daemon CPU not readable".into()),
    }
}

/// [`cpu_per`] GiB of `bytes`.
fn per_gib(before: Option<f64>, after: Option<f64>, bytes: u64) -> Result<f64, String> {
    cpu_per(before, after, bytes as f64 / (1u64 << 30) as f64)
}

fn stream(d: &Live, bytes: u64) -> StreamFigures {
    let pid = d.pid();
    let daemon_cpu = || pid.and_then(cpu_seconds_of);
    let mut live_cpu_secs = Err("n/a".to_string());
    let mut replay_cpu_secs = Err("n/a".to_string());
    let mut run = || -> Result<(RateAndShare, RateAndShare, f64), String> {
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
        // Stops the sampler however this closure ends (an early `?` too),
        // so a failed stream leaves no thread reading `/proc` for the rest
        // of the run.
        struct StopOnDrop(std::sync::Arc<std::sync::atomic::AtomicBool>);
        impl Drop for StopOnDrop {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let stop_guard = StopOnDrop(stop.clone());
        let mut s = d.conn()?;
        let mut r = Lines::new(s.try_clone().map_err(|e| e.to_string())?, 1 << 20);
        let p = format!("{{\"id\":\"big\",\"command\":\"head\",\"args\":[\"-c\",\"{bytes}\",\"/dev/zero\"]}}");
        let cpu_before = daemon_cpu();
        let t = Instant::now();
        s.write_all(req(1, "process.spawn", &p).as_bytes())
            .map_err(|e| e.to_string())?;
        let mut live = ZeroStream::default();
        let (reply_1, reply_2) = (reply_prefix(1), reply_prefix(2));
        let ((), live_cpu) = with_cpu_share(|| -> Result<(), String> {
            loop {
                let l = r.next_line()?;
                if l.starts_with(&reply_1) {
                    check_ok(l)?;
                } else if live.take(l)? && live.exited {
                    return Ok(());
                }
            }
        })
        .map_result()?;
        live.finish(bytes).map_err(|e| format!("live stream: {e}"))?;
        let streamed = bytes as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64();
        let cpu_after = daemon_cpu();
        live_cpu_secs = per_gib(cpu_before, cpu_after, bytes);
        drop(stop_guard);
        let _ = sampler.join();
        let mut s2 = d.conn()?;
        let mut r2 = Lines::new(s2.try_clone().map_err(|e| e.to_string())?, 1 << 20);
        let cpu_before = daemon_cpu();
        let t = Instant::now();
        s2.write_all(req(2, "process.reattach", "{\"id\":\"big\",\"fromSeq\":0}").as_bytes())
            .map_err(|e| e.to_string())?;
        let mut replay = ZeroStream {
            next_seq: Some(1),
            ..ZeroStream::default()
        };
        let ((), replay_cpu) = with_cpu_share(|| -> Result<(), String> {
            loop {
                let l = r2.next_line()?;
                if l.starts_with(&reply_2) {
                    return check_ok(l);
                }
                replay.take(l)?;
            }
        })
        .map_result()?;
        replay.finish(bytes).map_err(|e| format!("replay from seq 0: {e}"))?;
        let replayed = bytes as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64();
        replay_cpu_secs = per_gib(cpu_before, daemon_cpu(), bytes);
        Ok((
            (streamed, live_cpu),
            (replayed, replay_cpu),
            peak.load(std::sync::atomic::Ordering::Relaxed) as f64,
        ))
    };
    let (live, replay, peak_rss) = match run() {
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
    };
    StreamFigures {
        live_daemon_cpu: live.as_ref().map_err(Clone::clone).and(live_cpu_secs),
        replay_daemon_cpu: replay.as_ref().map_err(Clone::clone).and(replay_cpu_secs),
        live,
        replay,
        peak_rss,
    }
}

/// A reader beside a stalled one: one connection spawns `head -c N
/// /dev/zero` and stops reading once its first frame arrived, so the
/// daemon's writer to it blocks and its frames pile up in the replay log;
/// a second connection spawns the same and reads all of it. Returns the
/// second one's MiB/s and the client's CPU share while it read.
fn beside_stalled(d: &Live, bytes: u64) -> Shared {
    let spawn = |id: &str| {
        req(
            1,
            "process.spawn",
            &format!("{{\"id\":\"{id}\",\"command\":\"head\",\"args\":[\"-c\",\"{bytes}\",\"/dev/zero\"]}}"),
        )
    };
    let mut stalled = d.conn()?;
    let mut stalled_lines = Lines::new(stalled.try_clone().map_err(|e| e.to_string())?, 1 << 16);
    stalled
        .write_all(spawn("stalled").as_bytes())
        .map_err(|e| e.to_string())?;
    loop {
        let l = stalled_lines.next_line()?;
        if l.starts_with(b"{\"type\":\"stream\"") {
            break;
        }
        if l.starts_with(&reply_prefix(1)) {
            check_ok(l)?;
        }
    }
    let mut s = d.conn()?;
    let mut r = Lines::new(s.try_clone().map_err(|e| e.to_string())?, 1 << 20);
    let t = Instant::now();
    s.write_all(spawn("big").as_bytes()).map_err(|e| e.to_string())?;
    let reply_1 = reply_prefix(1);
    let mut live = ZeroStream::default();
    let ((), cpu) = with_cpu_share(|| -> Result<(), String> {
        loop {
            let l = r.next_line()?;
            if l.starts_with(&reply_1) {
                check_ok(l)?;
            } else if live.take(l)? && live.exited {
                return Ok(());
            }
        }
    })
    .map_result()?;
    live.finish(bytes)
        .map_err(|e| format!("beside a stalled reader: {e}"))?;
    let rate = bytes as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64();
    // The stalled child may still be writing into its log: stop it, so the
    // other daemon's half of this step runs beside a quiet one.
    s.write_all(req(2, "process.killAndWait", r#"{"id":"stalled"}"#).as_bytes())
        .map_err(|e| e.to_string())?;
    let reply_2 = reply_prefix(2);
    while !r.next_line()?.starts_with(&reply_2) {}
    drop((stalled, stalled_lines));
    Ok((rate, cpu))
}

/// The first bytes of the reply with id `id`.
fn reply_prefix(id: usize) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},").into_bytes()
}

/// `(Result<T, E>, share)` into `Result<(T, share), E>`.
trait MapResult<T, E> {
    fn map_result(self) -> Result<(T, f64), E>;
}

impl<T, E> MapResult<T, E> for (Result<T, E>, f64) {
    fn map_result(self) -> Result<(T, f64), E> {
        let (r, share) = self;
        r.map(|v| (v, share))
    }
}

/// One bench line: medians over the rounds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Item {
    pub name: String,
    pub unit: String,
    /// Whether larger is better (throughput) or smaller (latency, memory).
    pub higher_is_better: bool,
    pub reference: Result<f64, String>,
    pub candidate: Result<f64, String>,
    /// The rounds' candidate/reference ratios, paired across rounds of
    /// opposite order ([`paired_ratio`]): each is of two figures taken
    /// seconds apart, so it is steadier on a shared machine than the
    /// ratio of the two medians.
    pub ratio: Option<f64>,
    /// The figure of each round (`None` where it failed).
    pub reference_rounds: Vec<Option<f64>>,
    pub candidate_rounds: Vec<Option<f64>>,
    /// The bench client's CPU share while it measured this figure (1.0 =
    /// one core busy throughout), where it was taken (median).
    pub reference_client_cpu: Option<f64>,
    pub candidate_client_cpu: Option<f64>,
    /// Whether the figure is a stream rate, shown against the floors.
    pub against_floors: bool,
}

/// One measured figure of one binary.
struct Figure {
    name: String,
    unit: String,
    higher_is_better: bool,
    value: Result<f64, String>,
    client_cpu: Option<f64>,
}

impl Figure {
    fn plain((name, unit, higher_is_better, value): (String, String, bool, Result<f64, String>)) -> Figure {
        Figure {
            name,
            unit,
            higher_is_better,
            value,
            client_cpu: None,
        }
    }
}

/// A figure of one step: its place in [`names`] then [`AFTER_NAMES`],
/// its value and the client's CPU share while it was taken.
type Taken = (usize, Result<f64, String>, Option<f64>);

/// Where the figures after [`names`] go: the high-water mark, then the
/// daemon's own CPU per unit of work (a cost, steadier than a rate on a
/// shared machine: it does not count the time the daemon waited for a
/// core).
const HWM: usize = 9;
const CPU_PINGS_1: usize = 10;
const CPU_PINGS_64: usize = 11;
const CPU_LIVE: usize = 12;
const CPU_REPLAY: usize = 13;
const AFTER_NAMES: [(&str, &str, bool); 5] = [
    ("daemon VmHWM after stream + replay", "KiB", false),
    ("daemon CPU, 1000 pings, 1 connection", "ms", false),
    ("daemon CPU, 1000 pings, 64 connections", "ms", false),
    ("daemon CPU per GiB streamed", "s", false),
    ("daemon CPU per GiB replayed", "s", false),
];

/// A pipelined-pings step: the rate (figure `at`) with the client's
/// share, and the daemon's CPU per 1000 pings (figure `cpu_at`).
fn pipelined_step(d: &Live, conns: usize, per: usize, at: usize, cpu_at: usize) -> Vec<Taken> {
    let pid = d.pid();
    let before = pid.and_then(cpu_seconds_of);
    let rate = with_cpu_share(|| pipelined(d, conns, per)).map_result();
    // Milliseconds per 1000 pings: seconds per million.
    let cpu = match &rate {
        Ok(_) => cpu_per(before, pid.and_then(cpu_seconds_of), (conns * per) as f64 / 1e6),
        Err(e) => Err(e.clone()),
    };
    vec![with_share(at, rate), (cpu_at, cpu, None)]
}

/// One step of a round, run on both daemons back to back (see [`run`]).
type Step = fn(&Live, &BenchOptions) -> Vec<Taken>;

fn with_share(at: usize, r: Result<(f64, f64), String>) -> Taken {
    match r {
        Ok((v, cpu)) => (at, Ok(v), Some(cpu)),
        Err(e) => (at, Err(e), None),
    }
}

/// The steps in the order they run: idle RSS first, the stream and its
/// replay next (so the high-water mark read after them is theirs alone),
/// then the rest.
const STEPS: [Step; 7] = [
    |d, _| {
        let idle = d.pid().and_then(rss_kib).map(|k| k as f64);
        vec![(7, idle.ok_or_else(|| "n/a: daemon pid not found".to_string()), None)]
    },
    |d, o| {
        let f = stream(d, o.stream_bytes);
        let hwm = d.pid().and_then(crate::bench_daemon::hwm_kib).map(|k| k as f64);
        vec![
            with_share(4, f.live),
            with_share(5, f.replay),
            (8, f.peak_rss, None),
            (HWM, hwm.ok_or_else(|| "n/a: daemon pid not found".to_string()), None),
            (CPU_LIVE, f.live_daemon_cpu, None),
            (CPU_REPLAY, f.replay_daemon_cpu, None),
        ]
    },
    |d, o| vec![(0, ping_rtt(d, o.pings), None)],
    |d, o| pipelined_step(d, 1, o.pipelined, 1, CPU_PINGS_1),
    |d, o| pipelined_step(d, 64, (o.pipelined / 64).max(10), 2, CPU_PINGS_64),
    |d, o| vec![(3, spawn_exit(d, o.spawns), None)],
    |d, o| vec![with_share(6, beside_stalled(d, o.stream_bytes))],
];

/// The figures of one binary in one round, in [`names`] order then
/// [`AFTER_NAMES`], from what its steps took (or its start-up error).
fn figures(taken: Result<Vec<Taken>, String>) -> Vec<Figure> {
    let mut names = names();
    names.extend(AFTER_NAMES);
    let mut out: Vec<Figure> = names
        .into_iter()
        .map(|(n, u, h)| Figure::plain((n.into(), u.into(), h, Err("n/a: not measured".into()))))
        .collect();
    match taken {
        Ok(taken) => {
            for (at, value, client_cpu) in taken {
                if let Some(f) = out.get_mut(at) {
                    f.value = value;
                    f.client_cpu = client_cpu;
                }
            }
        }
        Err(e) => out.iter_mut().for_each(|f| f.value = Err(e.clone())),
    }
    out
}

/// One round: both daemons started, then each step run on one and at
/// once on the other, `first` (0 = reference) leading in every step.
/// Taking the two figures of an item seconds apart rather than a whole
/// binary's run apart keeps the machine's drift out of their ratio.
fn measure_round(bins: [&Path; 2], first: usize, o: &BenchOptions) -> [Vec<Figure>; 2] {
    let order = [first, 1 - first];
    let lives = bins.map(Live::start);
    let mut taken: [Result<Vec<Taken>, String>; 2] = [0, 1].map(|i| match &lives[i] {
        Ok(_) => Ok(Vec::new()),
        Err(e) => Err(e.clone()),
    });
    for step in STEPS {
        for i in order {
            if let (Ok(d), Ok(t)) = (&lives[i], &mut taken[i]) {
                t.extend(step(d, o));
            }
        }
    }
    drop(lives);
    taken.map(figures)
}

/// The names of the figures shown against the floors.
const STREAM_FIGURES: [&str; 3] = [
    "stream throughput (head -c N /dev/zero)",
    "reattach replay of that stream (byte-exact)",
    "reader beside a stalled reader",
];

fn names() -> Vec<(&'static str, &'static str, bool)> {
    vec![
        ("ping round trip (median)", "µs", false),
        ("pipelined pings, 1 connection", "req/s", true),
        ("pipelined pings, 64 connections", "req/s", true),
        ("spawn `true` to exit frame (median)", "ms", false),
        (STREAM_FIGURES[0], "MiB/s", true),
        (STREAM_FIGURES[1], "MiB/s", true),
        (STREAM_FIGURES[2], "MiB/s", true),
        ("daemon RSS idle", "KiB", false),
        ("daemon RSS peak while streaming", "KiB", false),
    ]
}

/// What `harness bench` measured: the items of both binaries (medians
/// over the rounds), the floors (each round's better of its two
/// measurements, before and after the two binaries, as both only get
/// slower under load; then the median over rounds) and the machine's load
/// average at the start and end of each round.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Bench {
    pub items: Vec<Item>,
    pub floors: Result<Floors, String>,
    pub rounds: usize,
    pub load_average: Vec<(f64, f64)>,
}

/// The 1-minute load average, where `/proc/loadavg` has it.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The median; of an even count, the mean of the two middle values.
fn median_of(v: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = v.into_iter().collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The candidate/reference ratio of an item over the rounds. Rounds
/// come in pairs of opposite order (reference first, then candidate
/// first), and a pair's ratio is the geometric mean of its two rounds'
/// ratios, which cancels a constant advantage of going first or second
/// (on this project's 2-vCPU machine going second was worth up to ±40%
/// on pipelined pings). The result is the median over complete pairs; a
/// round without a partner (an odd last one, or one whose partner failed)
/// counts only where there is no complete pair at all.
fn paired_ratio(rounds: &[Option<f64>]) -> Option<f64> {
    let pairs: Vec<f64> = rounds
        .chunks(2)
        .filter_map(|pair| match pair {
            [Some(a), Some(b)] => Some((a * b).sqrt()),
            _ => None,
        })
        .collect();
    if !pairs.is_empty() {
        return median_of(pairs);
    }
    // No complete pair (one round, or partners that failed): the single
    // rounds, order effect and all; the footer says so.
    median_of(rounds.iter().flatten().copied())
}

/// Runs the bench on both binaries, `o.rounds` times. In a round both
/// daemons run side by side and every item is taken on one and then the
/// other ([`measure_round`]); rounds alternate who goes first (the
/// reference in odd rounds, the candidate in even ones) and the ratio
/// pairs them ([`paired_ratio`]). The memory items run in the first round
/// only, each binary in a daemon of its own.
pub fn run(reference: &Path, candidate: &Path, o: &BenchOptions) -> Bench {
    let rounds = o.rounds.max(1);
    let (mut refs, mut cands, mut floors, mut load) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let load_start = load_average();
        eprintln!("bench: round {} of {rounds}, load {load_start:.2}: floors", round + 1);
        let before = crate::bench_lean::floors(o.stream_bytes);
        let first = round % 2;
        eprintln!(
            "bench: {} first, then {}",
            [reference, candidate][first].display(),
            [reference, candidate][1 - first].display()
        );
        let [mut r, mut c] = measure_round([reference, candidate], first, o);
        if let (0, Some(m)) = (round, o.memory.as_ref()) {
            eprintln!("bench: memory items");
            r.extend(crate::bench_mem::measure(reference, m).into_iter().map(Figure::plain));
            c.extend(crate::bench_mem::measure(candidate, m).into_iter().map(Figure::plain));
        }
        refs.push(r);
        cands.push(c);
        eprintln!("bench: floors again");
        let after = crate::bench_lean::floors(o.stream_bytes);
        floors.push(match (before, after) {
            (Ok(a), Ok(b)) => Ok(Floors {
                pipe: a.pipe.max(b.pipe),
                base64: a.base64.max(b.base64),
            }),
            (Ok(f), Err(_)) | (Err(_), Ok(f)) => Ok(f),
            (Err(e), Err(_)) => Err(e),
        });
        load.push((load_start, load_average()));
    }
    let ok_floors: Vec<Floors> = floors.iter().filter_map(|f| f.as_ref().ok().copied()).collect();
    let floors = match median_of(ok_floors.iter().map(|f| f.pipe)) {
        Some(pipe) => Ok(Floors {
            pipe,
            base64: median_of(ok_floors.iter().map(|f| f.base64)).unwrap_or(0.0),
        }),
        None => floors.into_iter().next().unwrap_or(Err("no rounds".into())),
    };
    // Items by position: every round yields the same list (the memory
    // items, of the first round only, come last).
    let items = (0..refs[0].len())
        .map(|k| {
            let column = |runs: &[Vec<Figure>]| -> Vec<Option<(f64, Option<f64>)>> {
                runs.iter()
                    .filter_map(|r| r.get(k))
                    .map(|f| f.value.as_ref().ok().map(|v| (*v, f.client_cpu)))
                    .collect()
            };
            let (rc, cc) = (column(&refs), column(&cands));
            let value = |c: &[Option<(f64, Option<f64>)>], first: &Figure| {
                median_of(c.iter().flatten().map(|x| x.0)).ok_or_else(|| match &first.value {
                    Err(e) => e.clone(),
                    Ok(_) => "n/a".into(),
                })
            };
            let cpu = |c: &[Option<(f64, Option<f64>)>]| median_of(c.iter().flatten().filter_map(|x| x.1));
            let per_round: Vec<Option<f64>> = rc
                .iter()
                .zip(&cc)
                .map(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) if a.0 > 0.0 => Some(b.0 / a.0),
                    _ => None,
                })
                .collect();
            let ratio = paired_ratio(&per_round);
            let rf = &refs[0][k];
            Item {
                against_floors: STREAM_FIGURES.contains(&rf.name.as_str()),
                name: rf.name.clone(),
                unit: rf.unit.clone(),
                higher_is_better: rf.higher_is_better,
                reference: value(&rc, rf),
                candidate: value(&cc, &cands[0][k]),
                ratio,
                reference_rounds: rc.iter().map(|x| x.map(|x| x.0)).collect(),
                candidate_rounds: cc.iter().map(|x| x.map(|x| x.0)).collect(),
                reference_client_cpu: cpu(&rc),
                candidate_client_cpu: cpu(&cc),
            }
        })
        .collect();
    Bench {
        items,
        floors,
        rounds,
        load_average: load,
    }
}

/// The bench table, the client's CPU share beside each figure it was
/// taken for, then the floors and each stream figure as a fraction of
/// them.
pub fn table(bench: &Bench) -> String {
    let mut o = format!(
        "{:<44} {:>16} {:>16} {:>7}\n",
        "bench", "reference", "candidate", "ratio"
    );
    let cpu = |c: Option<f64>| c.map_or(String::new(), |c| format!(" [{:.0}%]", c * 100.0));
    for i in &bench.items {
        let f = |r: &Result<f64, String>, c: Option<f64>| match r {
            Ok(v) => format!("{v:.1} {}{}", i.unit, cpu(c)),
            Err(e) => e.chars().take(60).collect(),
        };
        let ratio = i.ratio.map_or("-".into(), |r| format!("{r:.2}"));
        o.push_str(&format!(
            "{:<44} {:>16} {:>16} {:>7}\n",
            i.name,
            f(&i.reference, i.reference_client_cpu),
            f(&i.candidate, i.candidate_client_cpu),
            ratio
        ));
    }
    o.push_str(&format!(
        "{} round(s), both daemons side by side, each item taken on one then the other, who goes first alternated; figures are medians over the rounds, ratio the median over pairs of rounds of the geometric mean of their two ratios{}\n",
        bench.rounds,
        if bench.rounds < 2 {
            " (one round: no pair, so its ratio keeps the advantage of going second; the memory items are always of one round, each binary alone)"
        } else if bench.rounds % 2 == 1 {
            " (the odd last round is left out of the ratios; the memory items are of the first round, each binary alone)"
        } else {
            " (the memory items are of the first round, each binary alone)"
        }
    ));
    let loads: Vec<String> = bench
        .load_average
        .iter()
        .map(|(a, b)| format!("{a:.1}->{b:.1}"))
        .collect();
    o.push_str(&format!(
        "load average (1 min) at the start->end of each round: {}\n",
        loads.join(", ")
    ));
    o.push_str(
        "ratio = candidate / reference (for req/s and MiB/s higher is better; for µs, ms, s, KiB lower is better)\n",
    );
    o.push_str("[n%] = the bench client's own CPU share while it took that figure (100% = one core)\n");
    match &bench.floors {
        Ok(fl) => {
            o.push_str(&format!(
                "floors (same run): pipe -> Unix socket -> reader, no encoding: {:.1} MiB/s; base64 encode+decode of 32 KiB chunks, one thread: {:.1} MiB/s\n",
                fl.pipe, fl.base64
            ));
            for i in bench.items.iter().filter(|i| i.against_floors) {
                let frac = |r: &Result<f64, String>| match r {
                    Ok(v) => format!("{:.2} of base64, {:.2} of pipe", v / fl.base64, v / fl.pipe),
                    Err(_) => "-".into(),
                };
                o.push_str(&format!(
                    "  {}: reference {}; candidate {}\n",
                    i.name,
                    frac(&i.reference),
                    frac(&i.candidate)
                ));
            }
        }
        Err(e) => o.push_str(&format!("floors: {e}\n")),
    }
    o
}

#[cfg(test)]
mod tests {
    use super::{paired_ratio, ZeroStream};

    #[test]
    fn figure_places_cover_the_names_once() {
        use super::{names, AFTER_NAMES, CPU_LIVE, CPU_PINGS_1, CPU_PINGS_64, CPU_REPLAY, HWM};
        assert_eq!(names().len(), HWM);
        assert_eq!(
            [HWM, CPU_PINGS_1, CPU_PINGS_64, CPU_LIVE, CPU_REPLAY],
            [HWM, HWM + 1, HWM + 2, HWM + 3, HWM + 4]
        );
        assert_eq!(HWM + AFTER_NAMES.len(), CPU_REPLAY + 1);
    }

    #[test]
    fn paired_ratios_cancel_the_advantage_of_going_second() {
        // The candidate is 10% slower, and whoever goes second gains 40%:
        // reference-first rounds show 0.9 x 1.4, candidate-first 0.9 / 1.4.
        let rounds = [Some(0.9 * 1.4), Some(0.9 / 1.4), Some(0.9 * 1.4), Some(0.9 / 1.4)];
        let r = paired_ratio(&rounds).unwrap();
        assert!((r - 0.9).abs() < 1e-9, "{r}");
        // Rounds without a partner count only where no pair is complete;
        // none at all is no ratio.
        assert_eq!(paired_ratio(&[Some(4.0), Some(1.0), Some(9.0)]), Some(2.0));
        assert_eq!(paired_ratio(&[Some(2.0), None, Some(1.0)]), Some(1.5));
        assert_eq!(paired_ratio(&[None, None]), None);
        assert_eq!(paired_ratio(&[]), None);
    }

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
