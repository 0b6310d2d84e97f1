//! Scenario 12, the soak: a steady mix of the other scenarios' actions for
//! `--soak` minutes, with RSS, descriptors and ping latency sampled over
//! time and a verdict on growth (least-squares slope per hour). Process
//! ids come from a fixed pool, so retention (exited processes stay until
//! their id is reused) does not count as growth.

use super::daemon::Daemon;
use super::wire::{self, Client};
use super::Error;
use super::{Ctx, Obs};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Least-squares slope of `points` (per second).
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (sx, sy) = points.iter().fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
    let (mx, my) = (sx / n, sy / n);
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in points {
        num += (x - mx) * (y - my);
        den += (x - mx) * (x - mx);
    }
    if den == 0.0 {
        0.0
    } else {
        num / den
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Kinds of action in the mix.
const KINDS: u64 = ACTIONS.len() as u64;

/// An action of the mix, given the daemon, the context and the action's
/// number (its process ids come from a pool of 8 per kind).
type Action = fn(&Daemon, &Ctx, u64) -> Result<(), Error>;

/// The mix; action `k` is `ACTIONS[k % ACTIONS.len()]`.
const ACTIONS: [Action; 10] = [
    pipelined_pings,
    half_lines,
    echo_child,
    replayed_pattern,
    interactive_cat,
    garbage,
    killed_client,
    process_tree,
    stalled_follower,
    stdin_flood,
];

/// One action of the mix; `k` picks which.
fn action(d: &Daemon, ctx: &Ctx, k: u64) -> Result<(), Error> {
    ACTIONS[(k % KINDS) as usize](d, ctx, k)
}

/// Fifty pipelined pings on one connection.
fn pipelined_pings(d: &Daemon, _ctx: &Ctx, _k: u64) -> Result<(), Error> {
    let mut c = Client::connect(&d.socket)?;
    let mut buf = String::new();
    for i in 0..50 {
        buf.push_str(&wire::req(i, "server.ping", "{}"));
    }
    c.send_raw(buf.as_bytes())?;
    c.wait_reply("49").map(|_| ())
}

/// Connections that send half a request line and go (2).
fn half_lines(d: &Daemon, _ctx: &Ctx, _k: u64) -> Result<(), Error> {
    for _ in 0..5 {
        let mut s = UnixStream::connect(&d.socket)?;
        let _ = s.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"me");
    }
    Ok(())
}

/// A child that writes to stdout and stderr, read whole.
fn echo_child(d: &Daemon, _ctx: &Ctx, k: u64) -> Result<(), Error> {
    let pool = k % 8;
    let id = format!("sh{pool}");
    let mut c = Client::connect(&d.socket)?;
    c.call(
        "1",
        "process.spawn",
        &wire::spawn_params(&id, "sh", &["-c", "echo hi; echo err >&2"], &d.child_env("soak")),
    )?;
    let p = c.wait_exit(&id)?;
    p.whole()?;
    (p.stdout_head == b"hi\n")
        .then_some(())
        .ok_or(Error::finding("wrong output"))
}

/// A pattern child read live, then replayed from 0 on another connection
/// (4).
fn replayed_pattern(d: &Daemon, ctx: &Ctx, k: u64) -> Result<(), Error> {
    let pool = k % 8;
    let id = format!("st{pool}");
    let bytes = 256 * 1024;
    let mut c = Client::connect(&d.socket)?;
    let h = ctx.harness.to_string_lossy();
    c.call(
        "1",
        "process.spawn",
        &wire::pattern_spawn_params(&id, &h, k % 1000, bytes, 0, &d.child_env("soak")),
    )?;
    c.wait_exit(&id)?;
    let mut r = Client::connect(&d.socket)?;
    r.call("1", "process.reattach", &format!("{{\"id\":\"{id}\",\"fromSeq\":0}}"))?;
    let p = r.wait_exit(&id)?;
    p.whole()?;
    (p.sha() == wire::pattern_sha(k % 1000, bytes))
        .then_some(())
        .ok_or(Error::finding("replayed stream differs"))
}

/// stdin into `cat`, its echo awaited, then killAndWait.
fn interactive_cat(d: &Daemon, _ctx: &Ctx, k: u64) -> Result<(), Error> {
    let pool = k % 8;
    let id = format!("cat{pool}");
    let mut c = Client::connect(&d.socket)?;
    c.call(
        "1",
        "process.spawn",
        &wire::spawn_params(&id, "cat", &[], &d.child_env("soak")),
    )?;
    c.call(
        "2",
        "process.stdin",
        &format!("{{\"id\":\"{id}\",\"data\":\"aGVsbG8K\",\"offset\":0}}"),
    )?;
    c.wait_output(&id, b"hello\n")?;
    c.call(
        "3",
        "process.killAndWait",
        &format!("{{\"id\":\"{id}\",\"timeoutMs\":1000}}"),
    )?;
    c.wait_exit(&id).map(|_| ())
}

/// Bytes that are not JSON-RPC, then the write side closed (11).
fn garbage(d: &Daemon, _ctx: &Ctx, _k: u64) -> Result<(), Error> {
    let mut s = UnixStream::connect(&d.socket)?;
    let _ = s.write_all(b"\xff\xfe{\"jsonrpc\":[[[[\n\0\0\n{\"id\":1e999}\n");
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = std::io::Read::read_to_end(&mut s, &mut Vec::new());
    Ok(())
}

/// A client process SIGKILLed mid-stream (scenario 6); the id's reuse by a
/// later round tears its writer down.
fn killed_client(d: &Daemon, ctx: &Ctx, k: u64) -> Result<(), Error> {
    let pool = k % 8;
    let id = format!("kc{pool}");
    let (seed, env) = ((k % 1000).to_string(), d.child_env("soak"));
    let args = [
        "--mode",
        "stream",
        "--id",
        &id,
        "--seed",
        &seed,
        "--bytes",
        "1048576",
        "--linger-ms",
        "60000",
        "--env",
        &env,
    ];
    let mut client = None;
    let ready = super::streams::spawn_client(ctx, &d.socket, &args, |c| client = Some(c));
    if let Some(mut c) = client {
        let _ = c.kill();
        let _ = c.wait();
    }
    ready.map(|_| ())
}

/// A tree of background grandchildren, taken down whole (9).
fn process_tree(d: &Daemon, _ctx: &Ctx, k: u64) -> Result<(), Error> {
    let pool = k % 8;
    let id = format!("tree{pool}");
    let mut c = Client::connect(&d.socket)?;
    let script = "for i in 1 2 3 4 5; do sleep 60 & done; echo up; wait";
    c.call(
        "1",
        "process.spawn",
        &wire::spawn_params(&id, "sh", &["-c", script], &d.child_env("soak")),
    )?;
    c.wait_output(&id, b"up\n")?;
    c.call(
        "2",
        "process.killAndWait",
        &format!("{{\"id\":\"{id}\",\"timeoutMs\":2000}}"),
    )?;
    c.wait_exit(&id).map(|_| ())
}

/// A stalled reader beside a follower that replays from 0 (5, 4).
fn stalled_follower(d: &Daemon, ctx: &Ctx, k: u64) -> Result<(), Error> {
    let pool = k % 8;
    let id = format!("stall{pool}");
    let bytes = 1 << 20;
    let seed = 5000 + k % 1000;
    let mut stalled = Client::connect(&d.socket)?;
    let h = ctx.harness.to_string_lossy();
    stalled.call(
        "1",
        "process.spawn",
        &wire::pattern_spawn_params(&id, &h, seed, bytes, 0, &d.child_env("soak")),
    )?;
    let mut r = Client::connect(&d.socket)?;
    // The spawn's reply is the last thing the stalled connection
    // reads, so the reattach finds this round's process, not the
    // exited one of an earlier round with the same id.
    let mut reattached = false;
    for n in 0..500 {
        let reply = r.call(
            &(100 + n).to_string(),
            "process.reattach",
            &format!("{{\"id\":\"{id}\",\"fromSeq\":0}}"),
        )?;
        if reply.get("found") == Some(&serde_json::Value::Bool(true)) {
            reattached = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let p = r.wait_exit(&id)?;
    p.whole()?;
    drop(stalled);
    (reattached && p.sha() == wire::pattern_sha(seed, bytes))
        .then_some(())
        .ok_or(Error::finding("the follower's stream differs"))
}

/// A bounded stdin flood into a child that never reads (7): the daemon may
/// refuse once its queue is full, never block.
fn stdin_flood(d: &Daemon, _ctx: &Ctx, k: u64) -> Result<(), Error> {
    let pool = k % 8;
    let id = format!("flood{pool}");
    let mut c = Client::connect(&d.socket)?;
    c.call(
        "1",
        "process.spawn",
        &wire::spawn_params(&id, "sleep", &["60"], &d.child_env("soak")),
    )?;
    let chunk = "A".repeat(256 * 1024 / 3 * 4);
    let mut offset = 0u64;
    for n in 0..16 {
        let rid = (200 + n).to_string();
        let params = format!("{{\"id\":\"{id}\",\"data\":\"{chunk}\",\"offset\":{offset}}}");
        c.send(&rid, "process.stdin", &params)?;
        let reply = c.wait_reply(&rid)?;
        if let Some(e) = reply.get("error") {
            // A queue-full refusal ends the flood; any other error
            // is a fault.
            if e.get("code") != Some(&serde_json::Value::from(-32002)) {
                return Err(Error::finding(format!("stdin: {e}")));
            }
            break;
        }
        offset += (chunk.len() / 4 * 3) as u64;
    }
    c.call(
        "300",
        "process.kill",
        &format!("{{\"id\":\"{id}\",\"signal\":\"KILL\"}}"),
    )?;
    c.wait_exit(&id).map(|_| ())
}

/// The mix, one action after another until `stop`: how many ran, how
/// many failed, and the first failure.
fn run_mix(d: &Daemon, ctx: &Ctx, stop: &AtomicBool) -> (u64, u64, Option<String>) {
    let mut k = 0u64;
    let (mut n, mut f, mut first) = (0u64, 0u64, None);
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        if let Err(e) = action(d, ctx, k) {
            f += 1;
            first.get_or_insert(format!("action {}: {e}", k % KINDS));
        }
        n += 1;
        k += 1;
        // A steady rate: about 20 actions per second at most.
        if let Some(rest) = Duration::from_millis(50).checked_sub(t.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    (n, f, first)
}

/// 12. The soak.
pub fn soak(bin: &Path, ctx: &Ctx, o: &mut Obs) -> Result<(), Error> {
    let d = Daemon::start(bin)?;
    let total = Duration::from_secs_f64(ctx.soak_minutes * 60.0);
    let every = Duration::from_secs_f64((total.as_secs_f64() / 300.0).max(0.5));
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let (mut rss, mut fds, mut lat) = (Vec::new(), Vec::new(), Vec::new());
    let (mut actions, mut failures, mut first_failure) = (0u64, 0u64, None);
    let mut ping_failures = 0u64;
    std::thread::scope(|sc| {
        let worker = {
            let (d, stop) = (&d, stop.clone());
            sc.spawn(move || run_mix(d, ctx, &stop))
        };
        while t0.elapsed() < total {
            let t = t0.elapsed().as_secs_f64();
            rss.push((t, d.rss_kib() as f64 / 1024.0));
            fds.push((t, d.fds() as f64));
            match wire::fresh_ping(&d.socket, Duration::from_secs(30)) {
                Ok(m) => lat.push((t, m)),
                Err(_) => ping_failures += 1,
            }
            std::thread::sleep(every.min(total.saturating_sub(t0.elapsed())));
        }
        stop.store(true, Ordering::Relaxed);
        let (n, f, first) = worker.join().unwrap_or((0, 1, Some("worker panicked".into())));
        actions = n;
        failures = f;
        first_failure = first;
    });
    let secs = t0.elapsed().as_secs_f64();
    o.check(
        "every action of the mix succeeded",
        failures == 0 && ping_failures == 0,
        format!(
            "{actions} actions, {failures} failed, {ping_failures} sample ping(s) failed{}",
            first_failure.map(|e| format!("; first: {e}")).unwrap_or_default()
        ),
    );
    o.check("the daemon never died", d.alive(), "");
    // Growth: compare the last quarter with the second quarter (the first
    // is warm-up), and fit slopes over the second half.
    let q = |v: &[(f64, f64)], a: usize, b: usize| -> Vec<f64> {
        let n = v.len();
        v[n * a / 4..(n * b / 4).max(n * a / 4 + 1).min(n)]
            .iter()
            .map(|p| p.1)
            .collect()
    };
    if rss.len() >= 4 {
        let (early, late) = (median(&q(&rss, 1, 2)), median(&q(&rss, 3, 4)));
        let (fe, fl) = (median(&q(&fds, 1, 2)), median(&q(&fds, 3, 4)));
        let half = &rss[rss.len() / 2..];
        let rss_slope = slope(half) * 3600.0;
        let fd_slope = slope(&fds[fds.len() / 2..]) * 3600.0;
        let verdict = if late <= early * 1.2 + 4.0 { "flat" } else { "growing" };
        o.check(
            "no sustained RSS growth",
            verdict == "flat",
            format!("{verdict}: median RSS {early:.1} MiB (2nd quarter) -> {late:.1} MiB (last quarter); slope {rss_slope:.1} MiB/h"),
        );
        o.check(
            "no descriptor growth",
            fl <= fe + 8.0,
            format!("median fds {fe:.0} -> {fl:.0}; slope {fd_slope:.1} fds/h"),
        );
        o.figure("RSS slope (second half)", "MiB/h", false, rss_slope.max(0.0));
        o.figure("descriptor slope (second half)", "fds/h", false, fd_slope.max(0.0));
    }
    let l: Vec<f64> = lat.iter().map(|p| p.1).collect();
    o.figure("actions per second", "actions/s", true, actions as f64 / secs);
    o.figure("fresh-connection ping (median)", "ms", false, median(&l));
    o.figure(
        "fresh-connection ping (max)",
        "ms",
        false,
        l.iter().cloned().fold(0.0, f64::max),
    );
    o.figure("daemon VmHWM", "KiB", false, d.hwm_kib() as f64);
    o.series("daemon RSS", "MiB", rss);
    o.series("daemon descriptors", "fds", fds);
    o.series("fresh-connection ping latency", "ms", lat);
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn slope_of_a_line() {
        let pts: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 2.0 * i as f64 + 1.0)).collect();
        assert!((super::slope(&pts) - 2.0).abs() < 1e-9);
        assert_eq!(super::slope(&[(1.0, 1.0)]), 0.0);
    }
}
