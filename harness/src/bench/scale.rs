//! `harness bench --scale N,N,…`: how a spawn's cost and a process's
//! memory grow with the processes already running (issue 45). For each
//! binary in turn, in a daemon of its own: pipelined `process.spawn`s of
//! `sleep 600` on one connection up to each N, then one measured batch
//! (spawns a second), the daemon's RSS per live process, and the p99 of
//! sequential pings on a second connection while N live. Beside them the
//! machine's floor in the same run: a plain fork/exec loop with three
//! pipes per child (std's `Command`), holding its own children.

use super::error::Unmeasured;
use crate::dut::client::{read_line, req};
use crate::dut::procfs::rss_kib;
use crate::dut::Daemon;
use std::io::{BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// One measured point: N live, spawns a second at N, KiB of daemon RSS
/// per live process, ping p99 in microseconds at N.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Point {
    pub live: usize,
    pub spawns_per_s: f64,
    pub kib_per_process: Option<f64>,
    pub ping_p99_us: Option<f64>,
}

/// The curves of both binaries and the floor.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Scale {
    pub reference: Result<Vec<Point>, String>,
    pub candidate: Result<Vec<Point>, String>,
    pub floor: Vec<Point>,
}

/// The measured batch at each N (the ramp stops this many short of it).
fn batch_at(n: usize) -> usize {
    (n / 2).clamp(1, 200)
}

/// Runs the curves for `ns` (ascending) on both binaries and the floor.
pub fn run(reference: &Path, candidate: &Path, ns: &[usize]) -> Scale {
    raise_descriptor_limit();
    let mut ns = ns.to_vec();
    ns.sort_unstable();
    eprintln!("bench --scale: floor");
    let floor = floor(&ns);
    eprintln!("bench --scale: {}", reference.display());
    let reference = curve(reference, &ns).map_err(|e| e.to_string());
    eprintln!("bench --scale: {}", candidate.display());
    let candidate = curve(candidate, &ns).map_err(|e| e.to_string());
    Scale {
        reference,
        candidate,
        floor,
    }
}

/// The soft descriptor limit up to the hard one: the floor holds three
/// pipes per child.
fn raise_descriptor_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
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

/// The p99 (µs) of 200 sequential pings on a fresh connection.
fn ping_p99(d: &Daemon) -> Option<f64> {
    let mut s = d.conn().ok()?;
    let mut r = BufReader::new(s.try_clone().ok()?);
    let mut v = Vec::with_capacity(200);
    for i in 1..=200 {
        let t = Instant::now();
        s.write_all(req(i, "server.ping", "{}").as_bytes()).ok()?;
        read_line(&mut r).ok()?;
        v.push(t.elapsed().as_secs_f64() * 1e6);
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v.get(v.len() * 99 / 100).copied()
}

/// One binary's curve, in a daemon of its own.
fn curve(bin: &Path, ns: &[usize]) -> Result<Vec<Point>, Unmeasured> {
    let d = super::setup::start(bin, &[])?;
    let pid = d.pid().ok_or(Unmeasured::NoPid)?;
    spawn_batch(&d, 0, 1)?;
    let base = rss_kib(pid).ok_or(Unmeasured::NoRss)? as f64;
    let mut live = 1;
    let mut points = Vec::new();
    for &n in ns {
        let batch = batch_at(n);
        while live + batch < n {
            let k = (n - batch - live).min(500);
            spawn_batch(&d, live, k)?;
            live += k;
        }
        let rate = spawn_batch(&d, live, batch)?;
        live += batch;
        let kib = rss_kib(pid).map(|r| (r as f64 - base) / (live - 1).max(1) as f64);
        points.push(Point {
            live,
            spawns_per_s: rate,
            kib_per_process: kib,
            ping_p99_us: ping_p99(&d),
        });
        eprintln!("bench --scale: {} live, {rate:.0} spawns/s", live);
    }
    Ok(points)
}

/// The floor: std's `Command` (fork/exec, three pipes) in a loop,
/// holding its children as a daemon would; killed and reaped at the end.
fn floor(ns: &[usize]) -> Vec<Point> {
    let mut children = Vec::new();
    let spawn = |k: usize, children: &mut Vec<std::process::Child>| -> Option<f64> {
        let started = Instant::now();
        for _ in 0..k {
            let child = Command::new("sleep")
                .arg("600")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .ok()?;
            children.push(child);
        }
        Some(k as f64 / started.elapsed().as_secs_f64())
    };
    let mut points = Vec::new();
    for &n in ns {
        let batch = batch_at(n);
        while children.len() + batch < n {
            let k = (n - batch - children.len()).min(500);
            if spawn(k, &mut children).is_none() {
                break;
            }
        }
        let Some(rate) = spawn(batch, &mut children) else {
            break;
        };
        points.push(Point {
            live: children.len(),
            spawns_per_s: rate,
            kib_per_process: None,
            ping_p99_us: None,
        });
    }
    for c in &mut children {
        let _ = c.kill();
    }
    for c in &mut children {
        let _ = c.wait();
    }
    points
}

/// The table: one row per N, each binary's figures and the floor's rate.
pub fn table(s: &Scale, reference: &Path, candidate: &Path) -> String {
    let name = |p: &Path| p.display().to_string();
    let mut out = format!(
        "| live | floor spawns/s | {r} spawns/s | {r} KiB/process | {r} ping p99 µs | {c} spawns/s | {c} KiB/process | {c} ping p99 µs |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
        r = name(reference),
        c = name(candidate)
    );
    let cell = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.0}"));
    let kib = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.1}"));
    let rows = s
        .floor
        .len()
        .max(s.reference.as_ref().map_or(0, Vec::len))
        .max(s.candidate.as_ref().map_or(0, Vec::len));
    for i in 0..rows {
        let of = |c: &Result<Vec<Point>, String>| c.as_ref().ok().and_then(|v| v.get(i).copied());
        let (r, c, f) = (of(&s.reference), of(&s.candidate), s.floor.get(i).copied());
        let live = r.or(c).or(f).map_or(0, |p| p.live);
        out.push_str(&format!(
            "| {live} | {} | {} | {} | {} | {} | {} | {} |\n",
            cell(f.map(|p| p.spawns_per_s)),
            cell(r.map(|p| p.spawns_per_s)),
            kib(r.and_then(|p| p.kib_per_process)),
            cell(r.and_then(|p| p.ping_p99_us)),
            cell(c.map(|p| p.spawns_per_s)),
            kib(c.and_then(|p| p.kib_per_process)),
            cell(c.and_then(|p| p.ping_p99_us)),
        ));
    }
    for (who, c) in [(reference, &s.reference), (candidate, &s.candidate)] {
        if let Err(e) = c {
            out.push_str(&format!("\n{}: {e}\n", name(who)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_row_per_n_and_names_a_failed_binary() {
        let p = |live, rate| Point {
            live,
            spawns_per_s: rate,
            kib_per_process: Some(7.04),
            ping_p99_us: Some(812.0),
        };
        let s = Scale {
            reference: Err("no banner".to_string()),
            candidate: Ok(vec![p(100, 250.0), p(1000, 240.0)]),
            floor: vec![p(100, 900.0), p(1000, 300.0)],
        };
        let t = table(&s, Path::new("old"), Path::new("new"));
        assert!(t.contains("| 100 | 900 | — | — | — | 250 | 7.0 | 812 |"), "{t}");
        assert!(t.contains("| 1000 | 300 | — | — | — | 240 | 7.0 | 812 |"), "{t}");
        assert!(t.contains("\nold: no banner\n"), "{t}");
    }

    #[test]
    fn the_measured_batch_is_at_most_200_and_never_empty() {
        assert_eq!(batch_at(1), 1);
        assert_eq!(batch_at(100), 50);
        assert_eq!(batch_at(10_000), 200);
    }
}
