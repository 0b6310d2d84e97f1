//! `harness bench` memory items: what a daemon's memory does under output
//! it must keep, processes it must forget, and stdin it must refuse. Each
//! item runs in a fresh daemon so its VmHWM is its own.
//!
//! - exited processes: RSS before and after `exited` short-lived processes
//!   with fresh ids, once the retention dropped them (the daemon gets
//!   `REMORA_TEST_RETENTION_MS=2000`; a build without retention ignores it
//!   and keeps them);
//! - stdin into a child that never reads: VmHWM after `stdin_mib` MiB;
//! - `flood_conns` connections each sending `flood_mib` MiB of stdin to one
//!   such child: VmHWM.
//!
//! Writers and readers run on separate threads, so a daemon that pushes
//! back (refuses, or stops reading) never deadlocks the client.

use super::error::{Reading, Unmeasured};
use super::figure::{Figure, Measured};
use super::setup::{MemoryOptions, RETENTION_MS};
use crate::dut::client::{read_line, req};
use crate::dut::procfs::{hwm_kib, rss_kib};
use crate::dut::Daemon;
use std::io::{BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// Raw stdin bytes per request (base64 stays under the 1 MiB line cap).
const STDIN_CHUNK: usize = 700 * 1024;

/// The memory figures of `bin`, each in a daemon of its own.
pub(crate) fn measure(bin: &Path, o: &MemoryOptions) -> Vec<(Figure, Measured)> {
    let (start, end) = match exited(bin, o.exited) {
        Ok((a, b)) => (Ok(a), Ok(b)),
        Err(e) => (Err(e.clone()), Err(e)),
    };
    let delta = match (&start, &end) {
        (Ok(a), Ok(b)) => Ok(b - a),
        (Err(e), _) | (_, Err(e)) => Err(e.clone()),
    };
    [
        (Figure::RssBeforeExited, start),
        (Figure::RssAfterDropped, end),
        (Figure::RssDropDifference, delta),
        (Figure::HwmStdinToSleep, flood(bin, 1, o.stdin_mib)),
        (Figure::HwmStdinFlood, flood(bin, o.flood_conns, o.flood_mib)),
    ]
    .into_iter()
    .map(|(f, v)| (f, Measured::plain(v)))
    .collect()
}

fn daemon_pid(d: &Daemon) -> Result<i32, Unmeasured> {
    d.pid().ok_or(Unmeasured::NoPid)
}

/// Spawns `n` processes running `true` on one connection (pipelined) and
/// waits for each exit frame.
fn spawn_true(d: &Daemon, first_id: usize, n: usize) -> Result<(), Unmeasured> {
    let s = d.conn()?;
    let mut w = s.try_clone()?;
    let writer = std::thread::spawn(move || {
        for i in first_id..first_id + n {
            let p = format!("{{\"id\":\"x-{i:08x}-{}\",\"command\":\"true\"}}", i * 7919);
            if w.write_all(req(i + 1, "process.spawn", &p).as_bytes()).is_err() {
                return;
            }
        }
    });
    let mut r = BufReader::with_capacity(1 << 16, s);
    let mut exits = 0;
    while exits < n {
        let l = read_line(&mut r)?;
        if l.windows(15).any(|w| w == b"\"stream\":\"exit\"") {
            exits += 1;
        }
    }
    let _ = writer.join();
    Ok(())
}

/// RSS (KiB) after a warm-up round was dropped, and after `n` more
/// processes were dropped.
fn exited(bin: &Path, n: usize) -> Result<(f64, f64), Unmeasured> {
    let retention = RETENTION_MS.to_string();
    let d = super::setup::start(bin, &[("REMORA_TEST_RETENTION_MS", &retention)])?;
    let pid = daemon_pid(&d)?;
    // Retention, then the daemon's idle blocking threads (kept 10 s by
    // tokio) exit and the heap is trimmed again.
    let settle = || std::thread::sleep(Duration::from_millis(RETENTION_MS * 2 + 12_000));
    // Warm-up: threads, pools and allocator arenas reach their steady size.
    spawn_true(&d, 0, 200)?;
    settle();
    let start = rss_kib(pid).ok_or(Unmeasured::NoRss)? as f64;
    spawn_true(&d, 1000, n)?;
    settle();
    let end = rss_kib(pid).ok_or(Unmeasured::NoRss)? as f64;
    Ok((start, end))
}

/// `conns` connections each send `mib` MiB of `process.stdin` to one
/// child that never reads; returns the daemon's VmHWM (KiB) afterwards.
fn flood(bin: &Path, conns: usize, mib: u64) -> Reading {
    let d = super::setup::start(bin, &[])?;
    let pid = daemon_pid(&d)?;
    {
        let s = d.conn()?;
        let mut w = s.try_clone()?;
        w.write_all(
            req(
                1,
                "process.spawn",
                "{\"id\":\"sink\",\"command\":\"sleep\",\"args\":[\"600\"]}",
            )
            .as_bytes(),
        )?;
        let mut r = BufReader::new(s);
        read_line(&mut r)?;
    }
    let chunk: String = {
        use base64::Engine;
        let raw: Vec<u8> = (0..STDIN_CHUNK).map(|i| (i * 31 + 7) as u8).collect();
        base64::engine::general_purpose::STANDARD.encode(raw)
    };
    let line = req(9, "process.stdin", &format!("{{\"id\":\"sink\",\"data\":\"{chunk}\"}}"));
    let per_conn = ((mib << 20) as usize).div_ceil(STDIN_CHUNK);
    let started = Instant::now();
    let mut threads = Vec::new();
    for _ in 0..conns {
        let s = d.conn()?;
        let mut w = s.try_clone()?;
        let line = line.clone();
        threads.push(std::thread::spawn(move || {
            let writer = std::thread::spawn(move || {
                for _ in 0..per_conn {
                    if w.write_all(line.as_bytes()).is_err() {
                        return;
                    }
                }
            });
            let mut r = BufReader::with_capacity(1 << 16, s);
            for _ in 0..per_conn {
                if read_line(&mut r).is_err() {
                    break;
                }
            }
            let _ = writer.join();
        }));
    }
    for t in threads {
        let _ = t.join();
    }
    eprintln!("bench: {conns} x {mib} MiB stdin took {:.1?}", started.elapsed());
    hwm_kib(pid).map(|k| k as f64).ok_or(Unmeasured::NoHwm)
}
