//! The processes axis of `harness bench --scale`: how a spawn's cost, a
//! process's memory, a ping and a stream fare with N processes already
//! running. For each binary, in a daemon of its own: pipelined
//! `process.spawn`s of `sleep 600` up to each N, then one measured batch,
//! the daemon's RSS per live process, the p99 of sequential pings and a
//! stream on fresh connections. Beside them the machine's floor in the
//! same run: a plain fork/exec loop with three pipes per child (std's
//! `Command`), holding its own children.

use super::super::error::Unmeasured;
use super::super::stream::live_rate;
use super::{ScaleFigure, Side};
use crate::base::stats::percentile;
use crate::dut::client::{read_line, req};
use crate::dut::procfs::rss_kib;
use crate::dut::Daemon;
use std::io::{BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// The measured batch at each N (the ramp stops this many short of it).
pub(super) fn batch_at(n: usize) -> usize {
    (n / 2).clamp(1, 200)
}

/// Sends `n` pipelined spawns (ids from `first`) and waits for every reply.
fn spawn_batch(d: &Daemon, first: usize, n: usize) -> Result<f64, Unmeasured> {
    let s = d.conn()?;
    let mut w = s.try_clone()?;
    let lines: String = (first..first + n)
        .map(|i| {
            req(
                i + 1,
                "process.spawn",
                &format!("{{\"id\":\"scale-{i}\",\"command\":\"sleep\",\"args\":[\"600\"]}}"),
            )
        })
        .collect();
    let mut r = BufReader::with_capacity(1 << 16, s);
    let started = Instant::now();
    let writer = std::thread::spawn(move || w.write_all(lines.as_bytes()));
    let mut replies = 0;
    while replies < n {
        let l = read_line(&mut r)?;
        if l.starts_with(b"{\"jsonrpc\"") {
            if !l.windows(9).any(|w| w == b"\"result\":") {
                return Err(Unmeasured::Refused(String::from_utf8_lossy(&l).into_owned()));
            }
            replies += 1;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let _ = writer.join();
    // The connection closes here: the processes stay (the daemon keeps
    // them; its shutdown ends them).
    Ok(n as f64 / elapsed)
}

/// The p99 (µs) of 200 sequential pings on a fresh connection (the ping
/// figure of both axes).
pub(super) fn ping_p99(d: &Daemon) -> Option<f64> {
    let mut s = d.conn().ok()?;
    let mut r = BufReader::new(s.try_clone().ok()?);
    let mut v = Vec::with_capacity(200);
    for i in 1..=200 {
        let t = Instant::now();
        s.write_all(req(i, "server.ping", "{}").as_bytes()).ok()?;
        read_line(&mut r).ok()?;
        v.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Some(percentile(&v, 0.99))
}

/// Spawns `sleep 600`s until `live` reaches `n`, pipelined in batches of
/// up to 500, stopping `batch` short of it; returns the new count.
fn ramp(d: &Daemon, mut live: usize, n: usize, batch: usize) -> Result<usize, Unmeasured> {
    while live + batch < n {
        let k = (n - batch - live).min(500);
        spawn_batch(d, live, k)?;
        live += k;
    }
    Ok(live)
}

/// One binary's curves into `side`, each pass in a daemon of its own
/// started with `fd_limit`. The first takes the spawn rate, the RSS per
/// process and the ping p99 at each N; the second ramps again and takes
/// the stream beside N. A stream leaves memory in the daemon that it
/// gives back over the following seconds (its log's RAM tail, the disk
/// writers' threads, trimmed chunks), and in one daemon that drift was
/// charged to the processes: a negative KiB per process in a run of
/// 2026-11-29, with a warm-up stream, a 12 s settle and each stream's
/// residue taken off. Apart, the RSS never sees a stream.
pub(super) fn curve(
    bin: &Path,
    ns: &[usize],
    stream_bytes: u64,
    fd_limit: Option<u64>,
    side: &mut Side,
) -> Result<(), Unmeasured> {
    {
        let d = super::super::setup::start_with_limit(bin, &[], fd_limit)?;
        let pid = d.pid().ok_or(Unmeasured::NoPid)?;
        spawn_batch(&d, 0, 1)?;
        let base = rss_kib(pid).ok_or(Unmeasured::NoRss)? as f64;
        let mut live = 1;
        for &n in ns {
            let batch = batch_at(n);
            live = ramp(&d, live, n, batch)?;
            let rate = spawn_batch(&d, live, batch)?;
            live += batch;
            side.push(ScaleFigure::SpawnRate, live, rate);
            if let Some(rss) = rss_kib(pid) {
                let per = (rss as f64 - base) / (live - 1).max(1) as f64;
                side.push(ScaleFigure::RssPerProcess, live, per);
            }
            if let Some(p99) = ping_p99(&d) {
                side.push(ScaleFigure::PingP99Processes, live, p99);
            }
            eprintln!("bench --scale: {live} live, {rate:.0} spawns/s");
        }
    }
    let d = super::super::setup::start_with_limit(bin, &[], fd_limit)?;
    let mut live = 0;
    for &n in ns {
        live = ramp(&d, live, n, 0)?;
        match live_rate(&d, &format!("stream-{live}"), stream_bytes) {
            Ok(mib_s) => side.push(ScaleFigure::StreamBesideProcesses, live, mib_s),
            Err(e) => side.notes.push(format!("stream beside {live}: {e}")),
        }
        eprintln!("bench --scale: stream beside {live} live");
    }
    Ok(())
}

/// The floor: std's `Command` (fork/exec, three pipes) in a loop,
/// holding its children as a daemon would; killed and reaped at the end.
pub(super) fn floor(ns: &[usize], side: &mut Side) {
    let mut children = Vec::new();
    let spawn = |k: usize, children: &mut Vec<std::process::Child>| -> Result<f64, std::io::Error> {
        let started = Instant::now();
        for _ in 0..k {
            let child = Command::new("sleep")
                .arg("600")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?;
            children.push(child);
        }
        Ok(k as f64 / started.elapsed().as_secs_f64())
    };
    for &n in ns {
        let batch = batch_at(n);
        let mut ramp = Ok(0.0);
        while ramp.is_ok() && children.len() + batch < n {
            let k = (n - batch - children.len()).min(500);
            ramp = spawn(k, &mut children);
        }
        match ramp.and_then(|_| spawn(batch, &mut children)) {
            Ok(rate) => side.push(ScaleFigure::SpawnRate, children.len(), rate),
            Err(e) => {
                side.notes.push(format!("stopped at {} children: {e}", children.len()));
                break;
            }
        }
    }
    for c in &mut children {
        let _ = c.kill();
    }
    for c in &mut children {
        let _ = c.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measured_batch_is_at_most_200_and_never_empty() {
        assert_eq!(batch_at(1), 1);
        assert_eq!(batch_at(100), 50);
        assert_eq!(batch_at(10_000), 200);
    }
}
