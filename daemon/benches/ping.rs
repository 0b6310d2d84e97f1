//! `server.ping` benchmark: round-trip latency on one connection,
//! pipelined throughput on one connection, and idle resident memory of the
//! daemon. Prints figures; asserts nothing about time.
//!
//! Run: `cargo bench -p remora --bench ping` (optionally
//! `REMORA_BENCH_BIN=/path/to/other/daemon` to measure another binary with
//! the same command line).

#![allow(clippy::unwrap_used)] // a test or bench that unwraps fails loudly; the lint guards the daemon

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "bench-token";

fn main() {
    let bin = std::env::var("REMORA_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_remora").to_string());
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("bench.sock");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let mut launcher = Command::new(&bin)
        .args(["-serve", "-socket"])
        .arg(&socket)
        .arg("-token-file")
        .arg(&token_file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env("REMORA_LOG_LEVEL", "error")
        .spawn()
        .expect("start daemon");
    let mut banner = String::new();
    BufReader::new(launcher.stdout.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    assert!(banner.contains("listening on"), "daemon did not start: {banner:?}");

    let pid = find_daemon_pid(&socket.to_string_lossy());
    let idle_rss = pid.and_then(|p| status_kib(p, "VmRSS"));

    let ping = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.ping\",\"auth\":\"{TOKEN}\"}}\n");

    // Round trips.
    let stream = UnixStream::connect(&socket).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let mut line = String::new();
    let mut samples = Vec::with_capacity(20_000);
    for i in 0..22_000 {
        let start = Instant::now();
        writer.write_all(ping.as_bytes()).unwrap();
        line.clear();
        reader.read_line(&mut line).unwrap();
        if i >= 2_000 {
            samples.push(start.elapsed());
        }
    }
    samples.sort();
    let median = samples[samples.len() / 2];
    let p99 = samples[samples.len() * 99 / 100];

    // Pipelined: one writer thread, the reader counts replies.
    const PIPELINED: usize = 200_000;
    let stream = UnixStream::connect(&socket).unwrap();
    let mut reader = BufReader::with_capacity(1 << 16, stream.try_clone().unwrap());
    let mut writer = stream;
    let batch: String = ping.repeat(1000);
    let start = Instant::now();
    let feeder = std::thread::spawn(move || {
        for _ in 0..PIPELINED / 1000 {
            writer.write_all(batch.as_bytes()).unwrap();
        }
        writer
    });
    let mut got = 0;
    while got < PIPELINED {
        line.clear();
        reader.read_line(&mut line).unwrap();
        got += 1;
    }
    let elapsed = start.elapsed();
    drop(feeder.join());
    let loaded_rss = pid.and_then(|p| status_kib(p, "VmHWM"));

    println!("binary: {bin}");
    println!(
        "ping round trip: median {:.1} µs, p99 {:.1} µs ({} samples)",
        micros(median),
        micros(p99),
        samples.len()
    );
    println!(
        "ping pipelined (1 connection): {:.0} requests/s ({PIPELINED} in {:.2} s)",
        PIPELINED as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    match (idle_rss, loaded_rss) {
        (Some(idle), Some(peak)) => println!("daemon RSS: idle {idle} KiB, peak after load {peak} KiB"),
        _ => println!("daemon RSS: n/a (daemon pid not found)"),
    }

    // Stop the daemon.
    if let Ok(mut s) = UnixStream::connect(&socket) {
        let _ = s.write_all(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"server.shutdown\",\"auth\":\"{TOKEN}\"}}\n")
                .as_bytes(),
        );
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while socket.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = launcher.kill();
    let _ = launcher.wait();
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The pid whose command line mentions `needle` (the unique socket path)
/// and is a `-serve` daemon.
fn find_daemon_pid(needle: &str) -> Option<u32> {
    let mut found = None;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.contains(needle) && cmdline.contains("-serve") {
            // The daemonized child outlives the launcher; prefer the newest.
            found = Some(found.map_or(pid, |f: u32| f.max(pid)));
        }
    }
    found
}

fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
