//! The stream items of `harness bench`: a child writing `head -c N
//! /dev/zero` read live and replayed from seq 0, and a reader beside a
//! stalled one. Every stream must reassemble to exactly the bytes the
//! child wrote ([`ZeroStream`]).

use super::error::{Reading, Unmeasured};
use super::lean::{with_cpu_share, Lines};
use super::replies::{check_ok, per_gib, reply_prefix, MapResult, Shared};
use super::zero::ZeroStream;
use crate::dut::client::req;
use crate::dut::procfs::{cpu_seconds_of, rss_kib};
use crate::dut::Daemon;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the stream step measured: the live and replay rates with the
/// client's share, the daemon's peak RSS while streaming, and the daemon's
/// own CPU seconds per GiB live and replayed.
pub(crate) struct StreamFigures {
    pub(crate) live: Shared,
    pub(crate) replay: Shared,
    pub(crate) peak_rss: Reading,
    pub(crate) live_daemon_cpu: Reading,
    pub(crate) replay_daemon_cpu: Reading,
}

/// The daemon's RSS sampled every 20 ms on a thread, keeping the peak. The
/// thread stops however the measurement ends (an early `?` too), so a
/// failed stream leaves no thread reading `/proc` for the rest of the run.
struct PeakRss {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl PeakRss {
    fn start(pid: Option<i32>) -> PeakRss {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, peak) = (stop.clone(), peak.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(k) = pid.and_then(rss_kib) {
                        peak.fetch_max(k, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        PeakRss {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    /// Stops sampling; the peak in KiB (0: never read).
    fn stop(mut self) -> u64 {
        self.halt();
        self.peak.load(Ordering::Relaxed)
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for PeakRss {
    fn drop(&mut self) {
        self.halt();
    }
}

/// A rate in MiB/s and the daemon's CPU seconds per GiB while it was taken.
type RateAndCpu = ((f64, f64), Reading);

/// The `process.spawn` params of a `head -c <bytes> /dev/zero` child.
fn zero_child(id: &str, bytes: u64) -> String {
    format!("{{\"id\":\"{id}\",\"command\":\"head\",\"args\":[\"-c\",\"{bytes}\",\"/dev/zero\"]}}")
}

fn mib_per_s(bytes: u64, since: Instant) -> f64 {
    bytes as f64 / (1 << 20) as f64 / since.elapsed().as_secs_f64()
}

/// The live stream and its replay from seq 0 on the same daemon, and the
/// daemon's peak RSS while it streamed live. One failure fails the three
/// rates (and the CPU figures with them).
pub(crate) fn stream(d: &Daemon, bytes: u64) -> StreamFigures {
    let pid = d.pid();
    let peak = PeakRss::start(pid);
    let measured = (|| -> Result<(RateAndCpu, RateAndCpu, u64), Unmeasured> {
        // The live connection stays open while the replay runs.
        let mut live_conn = d.conn()?;
        let live = live_stream(&mut live_conn, "big", bytes, pid);
        let peak_kib = peak.stop();
        let live = live?;
        let replay = replay_stream(d, bytes, pid)?;
        Ok((live, replay, peak_kib))
    })();
    match measured {
        Ok(((live, live_cpu), (replay, replay_cpu), peak)) => StreamFigures {
            live: Ok(live),
            replay: Ok(replay),
            peak_rss: if peak > 0 {
                Ok(peak as f64)
            } else {
                Err(Unmeasured::NoPeak)
            },
            live_daemon_cpu: live_cpu,
            replay_daemon_cpu: replay_cpu,
        },
        Err(e) => StreamFigures {
            live: Err(e.clone()),
            replay: Err(e.clone()),
            peak_rss: Err(e.clone()),
            live_daemon_cpu: Err(e.clone()),
            replay_daemon_cpu: Err(e),
        },
    }
}

/// Reads a spawned child's stream into `z` up to its exit frame, checking
/// the spawn's reply (id 1) on the way.
fn read_to_exit(r: &mut Lines<UnixStream>, z: &mut ZeroStream) -> Result<(), Unmeasured> {
    let reply_1 = reply_prefix(1);
    loop {
        let l = r.next_line()?;
        if l.starts_with(&reply_1) {
            check_ok(l)?;
        } else if z.take(l)? && z.exited {
            return Ok(());
        }
    }
}

/// The MiB/s of a `head -c <bytes> /dev/zero` child named `id`, spawned
/// on a fresh connection and read to its exit frame, byte-exact (the
/// `--scale` stream figure).
pub(crate) fn live_rate(d: &Daemon, id: &str, bytes: u64) -> Result<f64, Unmeasured> {
    let mut s = d.conn()?;
    Ok(live_stream(&mut s, id, bytes, None)?.0 .0)
}

/// Spawns the child `id` on `s` and reads its stream to the exit frame.
fn live_stream(s: &mut UnixStream, id: &str, bytes: u64, pid: Option<i32>) -> Result<RateAndCpu, Unmeasured> {
    let daemon_cpu = || pid.and_then(cpu_seconds_of);
    let mut r = Lines::new(s.try_clone()?, 1 << 20);
    let cpu_before = daemon_cpu();
    let t = Instant::now();
    s.write_all(req(1, "process.spawn", &zero_child(id, bytes)).as_bytes())?;
    let mut live = ZeroStream::default();
    let ((), share) = with_cpu_share(|| read_to_exit(&mut r, &mut live)).map_result()?;
    live.finish(bytes).map_err(|e| e.during("live stream"))?;
    let rate = mib_per_s(bytes, t);
    Ok(((rate, share), per_gib(cpu_before, daemon_cpu(), bytes)))
}

/// Reattaches to `big` from seq 0 on a new connection and reads the replay
/// up to the reattach reply.
fn replay_stream(d: &Daemon, bytes: u64, pid: Option<i32>) -> Result<RateAndCpu, Unmeasured> {
    let daemon_cpu = || pid.and_then(cpu_seconds_of);
    let mut s = d.conn()?;
    let mut r = Lines::new(s.try_clone()?, 1 << 20);
    let cpu_before = daemon_cpu();
    let t = Instant::now();
    s.write_all(req(2, "process.reattach", "{\"id\":\"big\",\"fromSeq\":0}").as_bytes())?;
    let mut replay = ZeroStream::from_seq(1);
    let reply_2 = reply_prefix(2);
    let ((), share) = with_cpu_share(|| -> Result<(), Unmeasured> {
        loop {
            let l = r.next_line()?;
            if l.starts_with(&reply_2) {
                return check_ok(l);
            }
            replay.take(l)?;
        }
    })
    .map_result()?;
    replay.finish(bytes).map_err(|e| e.during("replay from seq 0"))?;
    let rate = mib_per_s(bytes, t);
    Ok(((rate, share), per_gib(cpu_before, daemon_cpu(), bytes)))
}

/// A reader beside a stalled one: one connection spawns `head -c N
/// /dev/zero` and stops reading once its first frame arrived, so the
/// daemon's writer to it blocks and its frames pile up in the replay log;
/// a second connection spawns the same and reads all of it. Returns the
/// second one's MiB/s and the client's CPU share while it read.
pub(crate) fn beside_stalled(d: &Daemon, bytes: u64) -> Shared {
    let spawn = |id: &str| req(1, "process.spawn", &zero_child(id, bytes));
    let mut stalled = d.conn()?;
    let mut stalled_lines = Lines::new(stalled.try_clone()?, 1 << 16);
    stalled.write_all(spawn("stalled").as_bytes())?;
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
    let mut r = Lines::new(s.try_clone()?, 1 << 20);
    let t = Instant::now();
    s.write_all(spawn("big").as_bytes())?;
    let mut live = ZeroStream::default();
    let ((), cpu) = with_cpu_share(|| read_to_exit(&mut r, &mut live)).map_result()?;
    live.finish(bytes).map_err(|e| e.during("beside a stalled reader"))?;
    let rate = mib_per_s(bytes, t);
    // The stalled child may still be writing into its log: stop it, so the
    // other daemon's half of this step runs beside a quiet one.
    s.write_all(req(2, "process.killAndWait", r#"{"id":"stalled"}"#).as_bytes())?;
    let reply_2 = reply_prefix(2);
    while !r.next_line()?.starts_with(&reply_2) {}
    drop((stalled, stalled_lines));
    Ok((rate, cpu))
}
