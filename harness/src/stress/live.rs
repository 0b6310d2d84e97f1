//! Scenario `live-processes` (issue 45): N = 10 000 `sleep 600` children
//! live in one daemon at once (scaled by `--scale`), then all are killed.
//! Every one must have started and be gone afterwards, no zombie may be
//! left among the daemon's children or the spawner helper's, and a second
//! connection pinging every millisecond throughout must see a p99 of at
//! most 10 ms.
//!
//! 10 000 processes need about 40 000 descriptors in the daemon: the
//! daemon starts with a limit raised to fit where the harness may raise
//! it (`dut::limits`); where it may not, N shrinks to what fits and the
//! run says so (the `live processes` figure and a line on stderr), never
//! passing quietly at a smaller N.

use super::daemon::Daemon;
use super::load::pinger;
use super::wire::{self, Client};
use super::Error;
use super::{Ctx, Obs};
use crate::base::stats::percentile;
use crate::dut::limits::{self, FDS_PER_PROCESS};
use crate::dut::procfs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The ping p99 the daemon must hold while N processes start and die.
const PING_P99_BOUND_MS: f64 = 10.0;
/// Requests in flight on the spawning connection.
const WINDOW: u64 = 256;
/// The tree name the children carry.
const SUB: &str = "live";

/// Sends `n` requests built by `params(i)` with at most [`WINDOW`] in
/// flight and reads every reply; returns the count refused and the first
/// refusal.
fn pipelined(
    c: &mut Client,
    n: u64,
    method: &str,
    params: impl Fn(u64) -> String,
) -> Result<(u64, Option<String>), Error> {
    let (mut sent, mut replies, mut refused, mut first) = (0u64, 0u64, 0u64, None);
    while replies < n {
        while sent < n && sent - replies < WINDOW {
            c.send(&(sent + 10).to_string(), method, &params(sent))?;
            sent += 1;
        }
        if let Some(v) = c.next()? {
            replies += 1;
            if v.get("result").is_none() {
                refused += 1;
                first.get_or_insert_with(|| v.to_string());
            }
        }
    }
    Ok((refused, first))
}

fn id(i: u64) -> String {
    format!("l{i}")
}

/// The zombies among the daemon's children and the spawner helper's
/// (the daemon's own children's), as `pid (parent)` for a report.
fn zombies(d: &Daemon) -> Vec<String> {
    procfs::zombies_below(&d.pids())
        .into_iter()
        .map(|(pid, parent)| format!("{pid} (parent {parent})"))
        .collect()
}

pub fn live_processes(bin: &Path, ctx: &Ctx, o: &mut Obs) -> Result<(), Error> {
    let asked = ctx.n(10_000, 100) as usize;
    let room = limits::room_for(asked, FDS_PER_PROCESS);
    let n = room.n as u64;
    let said = match room.fd_limit {
        Some(l) => format!("{}, the daemon's descriptor limit raised to {l}", room.describe(asked)),
        None => room.describe(asked),
    };
    // Printed even with --quiet: a smaller N is a weaker run.
    eprintln!("stress: live-processes: {said}");
    o.figure("live processes (N)", "processes", true, n as f64);
    let d = match room.fd_limit {
        Some(l) => Daemon::start_with_fd_limit(bin, l)?,
        None => Daemon::start(bin)?,
    };
    let smp = d.sampler(Duration::from_millis(100));
    let base_rss = d.rss_kib();
    let base_fds = d.fds();
    // The same pinger for half a second before any spawn: the machine's
    // own p99 (a loaded machine delays any thread), beside the verdict.
    let stop = Arc::new(AtomicBool::new(false));
    let idle = pinger(&d.socket, stop.clone(), Duration::from_millis(1));
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let (idle_pts, _) = idle.join().map_err(|_| Error::Panicked("pinger"))?;
    let idle_lat: Vec<f64> = idle_pts.iter().map(|p| p.1).collect();
    let idle_p99 = percentile(&idle_lat, 0.99);
    let stop = Arc::new(AtomicBool::new(false));
    let pings = pinger(&d.socket, stop.clone(), Duration::from_millis(1));

    let mut c = Client::connect(&d.socket)?;
    c.hash = false;
    c.set_timeout(Duration::from_secs(120));
    let env = d.child_env(SUB);
    let t = Instant::now();
    let (refused, first) = pipelined(&mut c, n, "process.spawn", |i| {
        wire::spawn_params(&id(i), "sleep", &["600"], &env)
    })?;
    let spawn_secs = t.elapsed().as_secs_f64();
    let live = d.tagged_sub(SUB).len() as u64;
    let (rss, fds) = (d.rss_kib(), d.fds());
    o.check(
        "all N processes started and alive at once",
        refused == 0 && live == n,
        format!(
            "{said}; {live} alive after {n} spawns in {spawn_secs:.1} s; {refused} refused{}",
            first.map(|f| format!(", first: {f}")).unwrap_or_default()
        ),
    );

    let exits_before = c.exits;
    let t = Instant::now();
    let (kill_refused, kill_first) = pipelined(&mut c, n, "process.kill", |i| {
        format!("{{\"id\":{},\"signal\":\"KILL\"}}", wire::js(&id(i)))
    })?;
    while c.exits - exits_before < n - refused {
        c.next()?;
    }
    let kill_secs = t.elapsed().as_secs_f64();
    o.check(
        "every kill accepted and every exit frame sent",
        kill_refused == 0,
        match kill_first {
            Some(f) => format!("{kill_refused} kills refused, first: {f}"),
            None => format!("{n} exits in {kill_secs:.1} s"),
        },
    );
    let gone = Daemon::wait_for(Duration::from_secs(30), || d.tagged_sub(SUB).is_empty());
    let left = d.tagged_sub(SUB);
    o.check(
        "every process gone after the kill",
        gone,
        format!("{} still alive: {:?}", left.len(), &left[..left.len().min(10)]),
    );
    // The exit frame follows the reap, so none should be left; a zombie
    // seen now is one the daemon or its helper never reaps.
    let reaped = Daemon::wait_for(Duration::from_secs(10), || zombies(&d).is_empty());
    let z = zombies(&d);
    o.check(
        "0 zombies among the daemon's and the spawner helper's children",
        reaped,
        format!("{} zombies: {:?}", z.len(), &z[..z.len().min(10)]),
    );
    stop.store(true, Ordering::Relaxed);
    let (pts, ping_err) = pings.join().map_err(|_| Error::Panicked("pinger"))?;
    let lat: Vec<f64> = pts.iter().map(|p| p.1).collect();
    let p99 = percentile(&lat, 0.99);
    o.check(
        "a second connection's pings answered within 10 ms p99 throughout",
        ping_err.is_none() && !lat.is_empty() && p99 <= PING_P99_BOUND_MS,
        match ping_err {
            Some(e) => e,
            None => format!(
                "{} pings, p99 {p99:.2} ms, slowest {:.1} ms (idle before the spawns: p99 {idle_p99:.2} ms)",
                lat.len(),
                lat.iter().cloned().fold(0.0, f64::max)
            ),
        },
    );
    o.check_alive(&d);
    o.check_ok(
        "daemon still answers",
        wire::fresh_ping(&d.socket, Duration::from_secs(10)).map(|m| format!("{m:.1} ms")),
    );
    o.figure("spawns per second up to N", "spawn/s", true, n as f64 / spawn_secs);
    o.figure("kill of all N to the last exit frame", "s", false, kill_secs);
    o.figure(
        "daemon RSS per live process",
        "KiB",
        false,
        rss.saturating_sub(base_rss) as f64 / n.max(1) as f64,
    );
    o.figure(
        "daemon descriptors per live process",
        "fds",
        false,
        fds.saturating_sub(base_fds) as f64 / n.max(1) as f64,
    );
    o.figure("ping latency idle, before the spawns (p99)", "ms", false, idle_p99);
    o.figure(
        "ping latency while N start and die (p50)",
        "ms",
        false,
        percentile(&lat, 0.5),
    );
    o.figure("ping latency while N start and die (p99)", "ms", false, p99);
    o.series("ping latency", "ms", pts);
    o.series("daemon RSS", "MiB", smp.stop());
    Ok(())
}
