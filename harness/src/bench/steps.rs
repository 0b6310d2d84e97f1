//! The steps of a bench round, each run on one daemon and then at once on
//! the other ([`STEPS`]), and the request/reply figures they take: ping
//! round trips, pipelined pings, spawn to exit. The stream items are in
//! [`super::stream`].

use super::error::{Reading, Unmeasured};
use super::figure::{Figure, Measured};
use super::lean::{is_pong, with_cpu_share, Lines};
use super::replies::{check_ok, check_pong, cpu_per, reply_prefix, MapResult};
use super::setup::BenchOptions;
use super::stream::{beside_stalled, stream};
use crate::dut::client::{read_line, req};
use crate::dut::procfs::{cpu_seconds_of, hwm_kib, rss_kib};
use crate::dut::Daemon;
use std::io::{BufReader, Write};
use std::time::Instant;

/// One step of a round, run on both daemons back to back (see
/// [`super::run`]): the figures it took.
type Step = fn(&Daemon, &BenchOptions) -> Vec<(Figure, Measured)>;

/// The steps in the order they run: idle RSS first, the stream and its
/// replay next (so the high-water mark read after them is theirs alone),
/// then the rest.
pub(crate) const STEPS: [Step; 7] = [
    |d, _| vec![(Figure::RssIdle, Measured::plain(pid_figure(d, rss_kib)))],
    |d, o| {
        let f = stream(d, o.stream_bytes);
        vec![
            (Figure::StreamLive, Measured::with_share(f.live)),
            (Figure::StreamReplay, Measured::with_share(f.replay)),
            (Figure::RssPeakStreaming, Measured::plain(f.peak_rss)),
            (Figure::HwmAfterStream, Measured::plain(pid_figure(d, hwm_kib))),
            (Figure::CpuPerGibLive, Measured::plain(f.live_daemon_cpu)),
            (Figure::CpuPerGibReplay, Measured::plain(f.replay_daemon_cpu)),
        ]
    },
    |d, o| vec![(Figure::PingRoundTrip, Measured::plain(ping_rtt(d, o.pings)))],
    |d, o| pipelined_step(d, 1, o.pipelined, [Figure::PipelinedOneConn, Figure::CpuPingsOneConn]),
    |d, o| {
        let per = (o.pipelined / 64).max(10);
        pipelined_step(d, 64, per, [Figure::Pipelined64Conns, Figure::CpuPings64Conns])
    },
    |d, o| vec![(Figure::SpawnToExit, Measured::plain(spawn_exit(d, o.spawns)))],
    |d, o| {
        vec![(
            Figure::BesideStalled,
            Measured::with_share(beside_stalled(d, o.stream_bytes)),
        )]
    },
];

/// A reading (KiB) of the daemon's process.
fn pid_figure(d: &Daemon, read: fn(i32) -> Option<u64>) -> Reading {
    d.pid().and_then(read).map(|k| k as f64).ok_or(Unmeasured::NoPid)
}

fn median_f(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn ping_rtt(d: &Daemon, n: usize) -> Reading {
    let mut s = d.conn()?;
    let mut r = BufReader::new(s.try_clone()?);
    let mut v = Vec::with_capacity(n);
    for i in 1..=n {
        let t = Instant::now();
        s.write_all(req(i, "server.ping", "{}").as_bytes())?;
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
fn pipelined(d: &Daemon, conns: usize, per: usize) -> Reading {
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
                sc.spawn(move || -> Result<(), Unmeasured> {
                    let connected = d.conn().map_err(Unmeasured::from).and_then(|s| {
                        let w = s.try_clone()?;
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
                        Ok(writer.join().map_err(|_| Unmeasured::Panicked("writer"))??)
                    })
                })
            })
            .collect();
        ready.wait();
        let t = Instant::now();
        let results: Vec<Result<(), Unmeasured>> = hs
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(Unmeasured::Panicked(""))))
            .collect();
        (results, t.elapsed())
    });
    for r in results {
        r?;
    }
    Ok((conns * per) as f64 / elapsed.as_secs_f64())
}

fn spawn_exit(d: &Daemon, n: usize) -> Reading {
    let mut s = d.conn()?;
    let mut r = BufReader::new(s.try_clone()?);
    let mut v = Vec::new();
    for i in 1..=n {
        let t = Instant::now();
        let p = format!("{{\"id\":\"b{i}\",\"command\":\"true\"}}");
        s.write_all(req(i, "process.spawn", &p).as_bytes())?;
        let exit = format!("\"processId\":\"b{i}\",\"stream\":\"exit\"");
        loop {
            let l = read_line(&mut r)?;
            if l.starts_with(&reply_prefix(i)) {
                check_ok(&l)?;
            } else if l.windows(exit.len()).any(|w| w == exit.as_bytes()) {
                break;
            }
        }
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median_f(v))
}

/// A pipelined-pings step: the rate with the client's share, and the
/// daemon's CPU per 1000 pings.
fn pipelined_step(d: &Daemon, conns: usize, per: usize, [rate_at, cpu_at]: [Figure; 2]) -> Vec<(Figure, Measured)> {
    let pid = d.pid();
    let before = pid.and_then(cpu_seconds_of);
    let rate = with_cpu_share(|| pipelined(d, conns, per)).map_result();
    // Milliseconds per 1000 pings: seconds per million.
    let cpu = match &rate {
        Ok(_) => cpu_per(before, pid.and_then(cpu_seconds_of), (conns * per) as f64 / 1e6),
        Err(e) => Err(e.clone()),
    };
    vec![(rate_at, Measured::with_share(rate)), (cpu_at, Measured::plain(cpu))]
}
