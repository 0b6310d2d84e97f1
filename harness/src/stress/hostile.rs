//! Scenario "hostile-neighbours": what a local process without the token
//! can do to the daemon by connecting alone. It opens more silent
//! connections than the daemon has descriptors, floods partial lines of
//! just under 1 MiB that never end, and sends unauthenticated garbage from
//! many connections at once — while an authenticated client keeps pinging
//! and spawning.
//!
//! The daemon runs with a small descriptor limit (512), so the silent
//! connections alone would exhaust it if nothing capped them. Invariants:
//! the daemon lives; the authenticated pinger is answered throughout (its
//! p99 is a figure); every authenticated spawn succeeds (no EMFILE); the
//! daemon's peak RSS stays under the bound `docs/ARCHITECTURE.md` states
//! for unauthenticated input (*Unauthenticated clients*).

use super::daemon::Daemon;
use super::load::pinger;
use super::wire::{self, Client};
use super::Error;
use super::{Ctx, Obs};
use crate::base::stats::percentile;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The daemon's descriptor limit in this scenario (soft and hard).
const DAEMON_FD_LIMIT: u64 = 512;
/// Peak RSS the daemon may reach here: the documented bound for
/// unauthenticated input (32 MiB of partial lines across connections, plus
/// the per-connection state of at most the connection cap) with room for
/// the daemon's own baseline and one authenticated client's work.
const HWM_BOUND_KIB: u64 = 96 * 1024;

/// Opens up to `n` connections and keeps them, sending nothing.
fn silent(socket: &Path, n: usize) -> Vec<UnixStream> {
    (0..n).filter_map(|_| UnixStream::connect(socket).ok()).collect()
}

/// One connection that writes `bytes` without a newline and then holds the
/// line open until `stop`; returns how many bytes the daemon took.
fn partial_line(socket: &Path, bytes: usize, stop: Arc<AtomicBool>) -> usize {
    let Ok(mut s) = UnixStream::connect(socket) else {
        return 0;
    };
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0;
    while sent < bytes {
        let n = chunk.len().min(bytes - sent);
        match s.write(&chunk[..n]) {
            Ok(0) | Err(_) => break,
            Ok(k) => sent += k,
        }
    }
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
    sent
}

/// Unauthenticated requests as fast as the daemon answers them, until
/// `stop`; returns the replies read.
fn garbage(socket: &Path, stop: Arc<AtomicBool>) -> usize {
    let Ok(s) = UnixStream::connect(socket) else {
        return 0;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let Ok(mut w) = s.try_clone() else {
        return 0;
    };
    let stop_w = stop.clone();
    let writer = std::thread::spawn(move || {
        let mut i = 0u64;
        while !stop_w.load(Ordering::Relaxed) {
            i += 1;
            let line = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"process.spawn\\n{}\",\"auth\":\"nope\"}}\n",
                "m".repeat(200)
            );
            if w.write_all(line.as_bytes()).is_err() {
                break;
            }
        }
    });
    let mut replies = 0;
    let mut r = s;
    let mut buf = [0u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => replies += buf[..n].iter().filter(|b| **b == b'\n').count(),
        }
    }
    let _ = r.shutdown(std::net::Shutdown::Both);
    let _ = writer.join();
    replies
}

/// `n` threads each running `f` on the socket until `stop`.
fn crowd(
    socket: &Path,
    n: u64,
    stop: &Arc<AtomicBool>,
    f: fn(&Path, Arc<AtomicBool>) -> usize,
) -> Vec<JoinHandle<usize>> {
    (0..n)
        .map(|_| {
            let (socket, stop) = (socket.to_path_buf(), stop.clone());
            std::thread::spawn(move || f(&socket, stop))
        })
        .collect()
}

/// The owner's `spawns` authenticated spawns of `true` during the
/// hostile load, on its connection made before the crowd; each one that
/// failed, and why.
fn owner_spawns(d: &Daemon, owner: Result<Client, Error>, spawns: u64) -> Vec<String> {
    let mut errors = Vec::new();
    match owner {
        Err(e) => errors.push(format!("connect: {e}")),
        Ok(mut c) => {
            c.set_timeout(Duration::from_secs(30));
            for i in 0..spawns {
                let id = format!("h{i}");
                let params = wire::spawn_params(&id, "true", &[], &d.child_env(&id));
                // `call` returns the result, and an error reply as Err.
                if let Err(e) = c.call(&(1000 + i).to_string(), "process.spawn", &params) {
                    errors.push(e.to_string());
                }
            }
        }
    }
    errors
}

/// The scenario.
pub fn hostile_neighbours(bin: &Path, ctx: &Ctx, o: &mut Obs) -> Result<(), Error> {
    let d = Daemon::start_with_fd_limit(bin, DAEMON_FD_LIMIT)?;
    let smp = d.sampler(Duration::from_millis(50));
    let baseline_kib = d.rss_kib();
    let stop_ping = Arc::new(AtomicBool::new(false));
    let pings = pinger(&d.socket, stop_ping.clone(), Duration::from_millis(5));
    // The owner's second connection is made before the crowd arrives, as
    // the pinger's is: the crowd below comes from this very process, and
    // a daemon may close a silent connection of the process that floods
    // it at once (remora does while that process's connections without
    // the token are all fresh, `serve/admission.rs`), which another
    // program flooding it would be.
    // It authenticates at once, so the crowd cannot evict it either.
    let owner = Client::connect(&d.socket).and_then(|mut c| c.call("0", "server.ping", "{}").map(|_| c));

    // More silent connections than the daemon has descriptors.
    let t = Instant::now();
    let held = silent(&d.socket, (DAEMON_FD_LIMIT as usize) + 100);
    let stop = Arc::new(AtomicBool::new(false));
    // Partial lines of just under the 1 MiB line cap, on many connections.
    let flooders = crowd(&d.socket, ctx.n(1000, 100), &stop, |s, stop| {
        partial_line(s, (1 << 20) - 1, stop)
    });
    let garblers = crowd(&d.socket, ctx.n(16, 4), &stop, garbage);

    // The owner keeps working meanwhile.
    let spawns = ctx.n(40, 10);
    let spawn_errors = owner_spawns(&d, owner, spawns);
    std::thread::sleep(Duration::from_millis(500));
    let hwm = d.hwm_kib();
    stop.store(true, Ordering::Relaxed);
    let taken: usize = flooders.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    let replies: usize = garblers.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    drop(held);
    stop_ping.store(true, Ordering::Relaxed);
    let (pts, ping_err) = pings.join().map_err(|_| Error::Panicked("pinger"))?;
    let took = t.elapsed();

    o.check_alive(&d);
    o.check(
        "the authenticated pinger is answered throughout",
        ping_err.is_none() && !pts.is_empty(),
        match &ping_err {
            Some(e) => format!("after {} pings: {e}", pts.len()),
            None => format!("{} pings", pts.len()),
        },
    );
    o.check(
        "every authenticated spawn succeeds (no EMFILE)",
        spawn_errors.is_empty(),
        spawn_errors
            .first()
            .cloned()
            .unwrap_or_else(|| format!("{spawns} spawns")),
    );
    o.check(
        "peak RSS stays under the unauthenticated-input bound",
        hwm <= HWM_BOUND_KIB,
        format!("VmHWM {hwm} KiB (bound {HWM_BOUND_KIB} KiB; baseline {baseline_kib} KiB)"),
    );
    let lat: Vec<f64> = pts.iter().map(|p| p.1).collect();
    o.figure(
        "authenticated ping p50 under hostile load",
        "ms",
        false,
        percentile(&lat, 0.5),
    );
    o.figure(
        "authenticated ping p99 under hostile load",
        "ms",
        false,
        percentile(&lat, 0.99),
    );
    o.figure(
        "partial-line bytes the daemon took",
        "MiB",
        false,
        taken as f64 / (1 << 20) as f64,
    );
    o.figure("replies to unauthenticated garbage", "lines", true, replies as f64);
    o.figure("daemon VmHWM", "KiB", false, hwm as f64);
    o.figure("hostile round", "ms", false, took.as_secs_f64() * 1e3);
    o.series("daemon RSS", "MiB", smp.stop());
    Ok(())
}
