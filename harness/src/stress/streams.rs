//! Stream scenarios: integrity of many concurrent streams, reattach churn
//! against a live writer, a stalled reader next to a following one, and
//! client processes SIGKILLed mid-stream and mid-request.

use super::daemon::Daemon;
use super::error::StreamFault;
use super::wire::{self, fresh_ping, hex, js, Client};
use super::Error;
use super::{Ctx, Obs};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn mib(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / d.as_secs_f64().max(1e-9)
}

/// Spawn params running the harness as a pattern writer.
fn pattern_spawn(ctx: &Ctx, id: &str, seed: u64, bytes: u64, linger_ms: u64, env: &str) -> String {
    wire::pattern_spawn_params(id, &ctx.harness.to_string_lossy(), seed, bytes, linger_ms, env)
}

/// SHA-256 of the last `len` bytes of `pattern(seed, total)`.
fn pattern_tail_sha(seed: u64, total: u64, len: u64) -> String {
    let mut h = Sha256::new();
    let mut pos = 0u64;
    let skip = total.saturating_sub(len);
    wire::pattern(seed, total, |b| {
        let end = pos + b.len() as u64;
        if end > skip {
            let from = skip.saturating_sub(pos) as usize;
            h.update(&b[from..]);
        }
        pos = end;
        true
    });
    hex(&h.finalize())
}

/// What one stream delivered: seed, wholeness, length, SHA-256, exit code.
type Received = (u64, Result<(), StreamFault>, u64, String, Option<i64>);

/// 3. Streaming integrity.
pub fn integrity(bin: &Path, ctx: &Ctx, o: &mut Obs) -> Result<(), Error> {
    let d = Daemon::start(bin)?;
    let smp = d.sampler(Duration::from_millis(50));
    let bytes = ctx.n(4 << 20, 256 << 10);
    let (conns, per) = (4u64, 4u64);
    let env = d.child_env("integrity");
    let t = Instant::now();
    let results: Vec<Result<Vec<Received>, Error>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..conns)
            .map(|c| {
                let (d, env) = (&d, &env);
                sc.spawn(move || -> Result<_, Error> {
                    let mut cl = Client::connect(&d.socket)?;
                    cl.set_timeout(Duration::from_secs(120));
                    for k in 0..per {
                        let seed = c * per + k + 1;
                        cl.send(
                            &seed.to_string(),
                            "process.spawn",
                            &pattern_spawn(ctx, &format!("s{seed}"), seed, bytes, 0, env),
                        )?;
                    }
                    let mut out = Vec::new();
                    for k in 0..per {
                        let seed = c * per + k + 1;
                        let p = cl.wait_exit(&format!("s{seed}"))?;
                        out.push((seed, p.whole(), p.stdout_len, p.sha(), p.exit_code));
                    }
                    for v in &cl.stray {
                        if v.get("result").is_none() {
                            return Err(Error::finding(format!("spawn failed: {v}")));
                        }
                    }
                    Ok(out)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or(Err(Error::Panicked(""))))
            .collect()
    });
    let took = t.elapsed();
    let mut bad = Vec::new();
    let mut n = 0;
    for r in results {
        match r {
            Err(e) => bad.push(e.to_string()),
            Ok(v) => {
                for (seed, whole, len, sha, code) in v {
                    n += 1;
                    if let Err(e) = whole {
                        bad.push(format!("s{seed}: {e}"));
                    } else if len != bytes || sha != wire::pattern_sha(seed, bytes) {
                        bad.push(format!("s{seed}: {len} of {bytes} bytes, sha256 {}", &sha[..16]));
                    } else if code != Some(0) {
                        bad.push(format!("s{seed}: exit code {code:?}"));
                    }
                }
            }
        }
    }
    o.check(
        "every stream whole: SHA-256 matches, seqs strictly +1 from 1, exit frame last",
        bad.is_empty() && n == conns * per,
        if bad.is_empty() {
            format!("{n} streams x {bytes} bytes")
        } else {
            format!("{} bad; first: {}", bad.len(), bad[0])
        },
    );
    o.figure(
        "aggregate stream throughput",
        "MiB/s",
        true,
        mib(bytes * conns * per, took),
    );
    o.figure("daemon VmHWM", "KiB", false, d.hwm_kib() as f64);
    o.series("daemon RSS", "MiB", smp.stop());
    Ok(())
}

/// 4. Reattach churn while a child writes.
pub fn reattach_churn(bin: &Path, ctx: &Ctx, o: &mut Obs) -> Result<(), Error> {
    let d = Daemon::start(bin)?;
    let smp = d.sampler(Duration::from_millis(50));
    let bytes = ctx.n(64 << 20, 4 << 20);
    let seed = 99;
    {
        let mut a = Client::connect(&d.socket)?;
        a.call(
            "1",
            "process.spawn",
            &pattern_spawn(ctx, "big", seed, bytes, 0, &d.child_env("big")),
        )?;
        // The spawner vanishes at once; the process must survive it.
    }
    // One reattach at a time: since 90fca6e6 a reattach closes the
    // connection that followed the process before, so overlapping
    // reattaches from twenty connections would close each other.
    let errs: Vec<String> = (0..20u64)
        .filter_map(|i| one_reattach(&d, i).err())
        .map(|e| e.to_string())
        .collect();
    o.check(
        "each reattach: replay from fromSeq+1, no gap or duplicate up to the reply, then contiguous live frames",
        errs.is_empty(),
        errs.first().cloned().unwrap_or_else(|| "20 reattaches".into()),
    );
    let mut f = Client::connect(&d.socket)?;
    f.set_timeout(Duration::from_secs(120));
    // Wait for the writer to finish so the final replay is all replay.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut probe = Client::connect(&d.socket)?;
        probe.hash = false;
        let r = probe.call(
            "1",
            "process.reattach",
            "{\"id\":\"big\",\"fromSeq\":9223372036854775807}",
        )?;
        if r.get("running") == Some(&serde_json::Value::Bool(false)) || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    let r = f.call("2", "process.reattach", "{\"id\":\"big\",\"fromSeq\":0}")?;
    let p = f.wait_exit("big")?;
    let took = t.elapsed();
    let first_seq = r.get("firstSeq").and_then(|v| v.as_i64()).unwrap_or(0);
    let got = p.stdout_len;
    let exact = if got == bytes {
        p.whole().map_err(Error::from).and_then(|_| {
            (p.sha() == wire::pattern_sha(seed, bytes))
                .then(|| format!("{bytes} bytes byte-exact"))
                .ok_or(Error::finding("SHA-256 differs"))
        })
    } else if first_seq > 1 && p.first_seq == Some(first_seq) && p.faults.is_empty() && got < bytes {
        // A bounded replay: what it kept must be the stream's exact tail.
        (p.sha() == pattern_tail_sha(seed, bytes, got))
            .then(|| format!("bounded replay: the last {got} of {bytes} bytes, byte-exact"))
            .ok_or_else(|| Error::finding(format!("bounded replay of {got} bytes is not the stream's tail")))
    } else {
        Err(Error::finding(format!(
            "{got} of {bytes} bytes, firstSeq {first_seq}, frames from {:?}: {}",
            p.first_seq,
            p.faults.join("; ")
        )))
    };
    o.check_ok("final reattach from 0 reassembles the stream", exact);
    o.figure(
        "replayable share of the stream",
        "%",
        true,
        100.0 * got as f64 / bytes as f64,
    );
    o.figure("final replay throughput", "MiB/s", true, mib(got, took));
    o.figure("daemon VmHWM", "KiB", false, d.hwm_kib() as f64);
    o.series("daemon RSS", "MiB", smp.stop());
    Ok(())
}

/// Reattach churn, reattach `i`: from a `fromSeq` that cycles through
/// the start, the middle and past the end, the replay up to the reply has
/// no gap or duplicate, then live frames follow on; the connection goes
/// away mid-stream.
fn one_reattach(d: &Daemon, i: u64) -> Result<(), Error> {
    let from = [0, 1, 5, 50, 200, 1_000_000][i as usize % 6] + i;
    let mut c = Client::connect(&d.socket)?;
    c.set_timeout(Duration::from_secs(60));
    c.hash = false;
    let r = c.call(
        "1",
        "process.reattach",
        &format!("{{\"id\":\"big\",\"fromSeq\":{from}}}"),
    )?;
    let last = r
        .get("lastSeq")
        .and_then(|v| v.as_i64())
        .ok_or_else(|| Error::finding(format!("no lastSeq in {r}")))?;
    if r.get("found") != Some(&serde_json::Value::Bool(true)) {
        return Err(Error::finding(format!("reattach {i}: not found: {r}")));
    }
    let replayed = c.procs.get("big").map(|p| p.frames).unwrap_or(0) as i64;
    // A bounded replay starts at the oldest kept frame.
    let kept = r.get("firstSeq").and_then(|v| v.as_i64()).unwrap_or(1);
    let start = (from as i64 + 1).max(kept);
    let want = (last - start + 1).max(0);
    if replayed != want {
        return Err(Error::finding(format!(
            "reattach {i} fromSeq {from}: {replayed} frame(s) before the reply, lastSeq {last} means {want}"
        )));
    }
    let running = r.get("running") == Some(&serde_json::Value::Bool(true));
    if !running && from as i64 >= last {
        return Ok(());
    }
    // Read a while, then vanish mid-stream.
    let until = 20 + i * 25;
    c.wait_frames("big", until)?;
    let p = &c.procs["big"];
    if !p.faults.is_empty() {
        return Err(Error::finding(format!("reattach {i}: {}", p.faults.join("; "))));
    }
    let first = p.first_seq.unwrap_or(0);
    if p.frames > 0 && (from as i64) < last && first != start {
        return Err(Error::finding(format!(
            "reattach {i}: first frame seq {first}, fromSeq {from}, firstSeq {kept}"
        )));
    }
    if p.frames > 0 && (from as i64) >= last && first != last + 1 {
        return Err(Error::finding(format!(
            "reattach {i}: first live frame seq {first} after lastSeq {last}"
        )));
    }
    Ok(())
}

fn zero_spawn(id: &str, bytes: u64, env: &str) -> String {
    wire::spawn_params(id, "head", &["-c", &bytes.to_string(), "/dev/zero"], env)
}

/// 5. A stalled reader next to a following one.
pub fn stalled_reader(bin: &Path, ctx: &Ctx, o: &mut Obs) -> Result<(), Error> {
    let d = Daemon::start(bin)?;
    let smp = d.sampler(Duration::from_millis(50));
    let bytes = ctx.n(256 << 20, 16 << 20);
    let env = d.child_env("stall");
    // Solo: the spawner reads.
    let mut s = Client::connect(&d.socket)?;
    s.set_timeout(Duration::from_secs(300));
    s.hash = false;
    let t = Instant::now();
    s.call("1", "process.spawn", &zero_spawn("solo", bytes, &env))?;
    let solo_len = s.wait_exit("solo")?.stdout_len;
    let solo = t.elapsed();
    drop(s);
    // Stalled: the spawner reads its reply, then never again.
    let mut a = Client::connect(&d.socket)?;
    a.set_timeout(Duration::from_secs(60));
    let t = Instant::now();
    a.call("1", "process.spawn", &zero_spawn("big", bytes, &env))?;
    let mut b = Client::connect(&d.socket)?;
    b.set_timeout(Duration::from_secs(300));
    b.hash = false;
    b.call("1", "process.reattach", "{\"id\":\"big\",\"fromSeq\":0}")?;
    let ping_during = fresh_ping(&d.socket, Duration::from_secs(30));
    let p = b.wait_exit("big")?;
    let followed = t.elapsed();
    o.check(
        "the follower gets the whole stream while the spawner stalls",
        p.whole().is_ok() && p.stdout_len == bytes && solo_len == bytes,
        format!(
            "follower {} of {bytes} bytes ({}), solo {solo_len}",
            p.stdout_len,
            p.whole().err().map_or_else(|| "whole".into(), |e| e.to_string())
        ),
    );
    o.check_ok(
        "a fresh connection is answered during the stall",
        ping_during.map(|m| format!("{m:.1} ms")),
    );
    let ping_after = fresh_ping(&d.socket, Duration::from_secs(30));
    o.check_ok("daemon still answers", ping_after.map(|m| format!("{m:.1} ms")));
    drop(a);
    o.figure("solo reader throughput", "MiB/s", true, mib(bytes, solo));
    o.figure(
        "follower throughput next to a stalled reader",
        "MiB/s",
        true,
        mib(bytes, followed),
    );
    o.figure(
        "follower vs solo",
        "%",
        true,
        100.0 * solo.as_secs_f64() / followed.as_secs_f64().max(1e-9),
    );
    o.figure("daemon VmHWM", "KiB", false, d.hwm_kib() as f64);
    o.series("daemon RSS", "MiB", smp.stop());
    Ok(())
}

/// Starts `harness stress-client` and waits for its `ready` line; the
/// daemon's cleanup owns the client from the start.
fn start_client(d: &mut Daemon, ctx: &Ctx, args: &[&str]) -> Result<(), Error> {
    let socket = d.socket.clone();
    spawn_client(ctx, &socket, args, |c| d.clients.push(c)).map(|_| ())
}

/// Starts `harness stress-client` on `socket`, hands the child to `keep`
/// before waiting (so it is cleaned up whatever happens), and waits up to
/// a minute for its `ready` line. Returns the client's pid.
pub fn spawn_client(
    ctx: &Ctx,
    socket: &Path,
    args: &[&str],
    keep: impl FnOnce(std::process::Child),
) -> Result<u32, Error> {
    let mut c = Command::new(&ctx.harness)
        .arg("stress-client")
        .arg("--socket")
        .arg(socket)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(Error::io("client"))?;
    let pid = c.id();
    let out = c.stdout.take().expect("piped");
    let err = c.stderr.take().expect("piped");
    keep(c);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut l = String::new();
        let _ = BufReader::new(out).read_line(&mut l);
        let _ = tx.send(l);
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(l) if l == "ready\n" => Ok(pid),
        _ => {
            let mut e = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(err), &mut e);
            Err(Error::NeverReady {
                args: args.iter().map(|a| a.to_string()).collect(),
                stderr: e,
            })
        }
    }
}

/// Killed clients: the streams `k0`… reattached from 0 on connections of
/// their own; each one that is not the whole pattern, with what it got.
fn streams_not_whole(d: &Daemon, streams: u64, bytes: u64) -> Result<Vec<String>, Error> {
    let mut bad = Vec::new();
    for i in 0..streams {
        let id = format!("k{i}");
        let mut c = Client::connect(&d.socket)?;
        c.set_timeout(Duration::from_secs(60));
        c.call(
            "1",
            "process.reattach",
            &format!("{{\"id\":{},\"fromSeq\":0}}", js(&id)),
        )?;
        while c.procs.get(&id).map(|p| p.stdout_len).unwrap_or(0) < bytes {
            c.next()?;
        }
        let p = &c.procs[&id];
        if !p.faults.is_empty() || p.sha() != wire::pattern_sha(1000 + i, bytes) {
            bad.push(format!("{id}: {} bytes, {}", p.stdout_len, p.faults.join("; ")));
        }
    }
    Ok(bad)
}

/// Killed clients: SIGKILLs the children the dead clients left, the
/// requests' `r0`… and the streams' `k0`….
fn kill_children(d: &Daemon, requests: u64, streams: u64) -> Result<(), Error> {
    let mut c = Client::connect(&d.socket)?;
    c.set_timeout(Duration::from_secs(30));
    for i in 0..requests {
        c.call(
            &(10 + i).to_string(),
            "process.kill",
            &format!("{{\"id\":\"r{i}\",\"signal\":\"KILL\"}}"),
        )?;
    }
    for i in 0..streams {
        c.call(
            &(100 + i).to_string(),
            "process.kill",
            &format!("{{\"id\":\"k{i}\",\"signal\":\"KILL\"}}"),
        )?;
    }
    Ok(())
}

/// 6. Client processes SIGKILLed mid-stream and mid-request.
pub fn killed_clients(bin: &Path, ctx: &Ctx, o: &mut Obs) -> Result<(), Error> {
    let mut d = Daemon::start(bin)?;
    let smp = d.sampler(Duration::from_millis(50));
    let streams = ctx.n(8, 2);
    let requests = ctx.n(4, 1);
    // 8 MiB a stream: within the 16 MiB replay ring of a bounded binary,
    // so "whole on reattach" holds for every binary that keeps that much.
    let bytes = ctx.n(8 << 20, 1 << 20);
    std::thread::sleep(Duration::from_millis(100));
    let base_rss = d.rss_kib();
    for i in 0..streams {
        let env = d.child_env(&format!("k{i}"));
        let (id, seed, b) = (format!("k{i}"), (1000 + i).to_string(), bytes.to_string());
        start_client(
            &mut d,
            ctx,
            &[
                "--mode",
                "stream",
                "--id",
                &id,
                "--seed",
                &seed,
                "--bytes",
                &b,
                "--linger-ms",
                "600000",
                "--env",
                &env,
            ],
        )?;
    }
    for i in 0..requests {
        let env = d.child_env(&format!("r{i}"));
        let id = format!("r{i}");
        start_client(&mut d, ctx, &["--mode", "request", "--id", &id, "--env", &env])?;
    }
    // SIGKILL them all, by pid, mid-stream and mid-request.
    for c in &mut d.clients {
        let _ = c.kill();
        let _ = c.wait();
    }
    d.clients.clear();
    let ping = fresh_ping(&d.socket, Duration::from_secs(30));
    o.check_ok(
        "a fresh connection is answered right after the kills",
        ping.as_ref().map(|m| format!("{m:.1} ms")),
    );
    // Nothing was lost: every stream is complete in the replay.
    let bad = streams_not_whole(&d, streams, bytes)?;
    o.check(
        "streams whose clients died are whole on reattach",
        bad.is_empty(),
        bad.first()
            .cloned()
            .unwrap_or_else(|| format!("{streams} streams x {bytes} bytes")),
    );
    std::thread::sleep(Duration::from_millis(200));
    let rss = d.rss_kib();
    let written_kib = streams * bytes / 1024;
    let bound = base_rss + 2 * written_kib + 32 * 1024;
    o.check(
        "memory bounded while nobody reads",
        rss <= bound,
        format!("RSS {rss} KiB; baseline {base_rss} KiB + 2 x {written_kib} KiB written + 32 MiB = {bound} KiB"),
    );
    // Release the pending killAndWait requests of the dead clients.
    kill_children(&d, requests, streams)?;
    let gone = Daemon::wait_for(Duration::from_secs(10), || d.tagged().is_empty());
    o.check(
        "children killed afterwards are gone",
        gone,
        format!("left: {:?}", d.tagged()),
    );
    o.check_ok(
        "daemon still answers",
        fresh_ping(&d.socket, Duration::from_secs(30)).map(|m| format!("{m:.1} ms")),
    );
    o.figure("fresh ping right after the kills", "ms", false, ping.unwrap_or(0.0));
    o.figure(
        "RSS growth per byte retained",
        "ratio",
        false,
        rss.saturating_sub(base_rss) as f64 / written_kib.max(1) as f64,
    );
    o.figure("daemon VmHWM", "KiB", false, d.hwm_kib() as f64);
    o.series("daemon RSS", "MiB", smp.stop());
    Ok(())
}
