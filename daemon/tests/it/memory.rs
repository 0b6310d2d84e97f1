//! Bounded memory against a real daemon and real children: stdin
//! backpressure (-32002), bounded in-flight bytes per connection, replay
//! logs spilled to disk and read back from every region, eviction under a
//! disk budget, the stale-directory sweep, the RAM fallback, and the
//! retention drop of exited processes.

use crate::common;
use crate::common::frames::{frames_until_exit, next_line, parse_frame, reattach, stdout_of, Frame};
use crate::common::{wait_until, Client, TestDaemon};
use base64::Engine;
use serde_json::Value;
use std::time::{Duration, Instant};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Sends `stream[from..to]` to process `cat` at offset `from`; returns the
/// reply.
fn write_stdin(c: &mut Client, rid: u64, stream: &[u8], from: usize, to: usize) -> String {
    let params = format!(r#"{{"id":"cat","data":"{}","offset":{from}}}"#, b64(&stream[from..to]));
    c.call(rid, "process.stdin", &params)
}

fn assert_seq_contiguous(frames: &[Frame], first: u64) {
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.seq, first + i as u64, "seq gap or duplicate at index {i}");
    }
}

fn result_of(reply: &str) -> Value {
    let v: Value = serde_json::from_str(reply).expect("reply json");
    v["result"].clone()
}

/// Deterministic, non-repeating test bytes.
fn pattern(len: usize, salt: u8) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9 ^ u32::from(salt);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// A child that stops reading stdin gets -32002 once its queue holds
/// 16 MiB, with `applied` unchanged; once it reads again, resending from
/// `applied` delivers every byte exactly once, in order.
#[test]
fn stdin_backpressure_then_resend_from_applied() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let reply = c.call(1, "process.spawn", r#"{"id":"cat","command":"cat","wantPid":true}"#);
    let pid = result_of(&reply)["pid"].as_i64().expect("pid") as i32;
    // Held while known alive: `cat` waits on its stdin.
    let cat = common::proven::Proc::open(pid).expect("a hold on cat");
    assert!(cat.signal(libc::SIGSTOP));

    const CHUNK: usize = 512 * 1024;
    let stream = pattern(24 << 20, 7);
    let mut applied = 0usize;
    let mut rid = 10u64;
    let mut refused_at = None;
    while applied < stream.len() {
        let end = (applied + CHUNK).min(stream.len());
        rid += 1;
        let reply = write_stdin(&mut c, rid, &stream, applied, end);
        if reply.contains("\"error\"") {
            assert_eq!(
                reply,
                format!(
                    r#"{{"jsonrpc":"2.0","id":{rid},"error":{{"code":-32002,"message":"stdin backpressure: queue full"}}}}"#
                )
            );
            refused_at = Some(applied);
            break;
        }
        applied = result_of(&reply)["applied"].as_u64().unwrap() as usize;
        assert_eq!(applied, end);
    }
    let refused_at = refused_at.expect("a stopped child must hit the cap");
    // The queue holds at most 16 MiB, the pipe at most a few hundred KiB.
    assert!(
        ((16 << 20)..=(16 << 20) + (1 << 20)).contains(&refused_at),
        "{refused_at}"
    );
    let reply = c.call(2, "process.reattach", r#"{"id":"cat","fromSeq":0}"#);
    assert_eq!(
        result_of(&reply)["stdinApplied"].as_u64(),
        Some(refused_at as u64),
        "a refused write leaves applied unchanged"
    );

    assert!(cat.signal(libc::SIGCONT));
    while applied < stream.len() {
        let end = (applied + CHUNK).min(stream.len());
        rid += 1;
        let reply = write_stdin(&mut c, rid, &stream, applied, end);
        if reply.contains("-32002") {
            // The child is still draining: retry the same bytes.
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        applied = result_of(&reply)["applied"].as_u64().unwrap() as usize;
    }
    // Resending an already-applied chunk is a duplicate, not a second copy.
    let reply = write_stdin(&mut c, 3, &stream, 0, CHUNK);
    assert!(reply.contains(r#""duplicate":true"#), "{reply}");
    let mut echoed = Vec::new();
    while echoed.len() < stream.len() {
        let line = next_line(&mut c);
        if let Some((_, frame)) = parse_frame(&line) {
            assert_eq!(frame.stream, "stdout");
            echoed.extend_from_slice(&frame.data);
        }
    }
    assert!(echoed == stream, "every byte once, in order");
    let reply = c.call(4, "process.kill", r#"{"id":"cat"}"#);
    assert!(reply.contains("success"), "{reply}");
}

/// A daemon spilling into `dir` with a budget in MiB and test overrides.
fn spilling_daemon(dir: &std::path::Path, budget_mib: &str, env: &[(&str, &str)]) -> TestDaemon {
    TestDaemon::start_with(
        &["-replay-dir", dir.to_str().unwrap(), "-replay-budget-mb", budget_mib],
        env,
    )
}

/// The `daemon-<pid>-<n>` directories in a replay dir, with their pids.
fn daemon_dirs(replay: &std::path::Path) -> Vec<(std::path::PathBuf, i32)> {
    let mut dirs: Vec<_> = std::fs::read_dir(replay)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let pid = name.strip_prefix("daemon-")?.split('-').next()?.parse().ok()?;
            Some((e.path(), pid))
        })
        .collect();
    dirs.sort();
    dirs
}

/// Waits until `sample` satisfies `ok` and keeps the same value for 500 ms.
fn wait_steady(limit: Duration, mut sample: impl FnMut() -> u64, ok: impl Fn(u64) -> bool) -> bool {
    let mut last = None;
    let mut since = Instant::now();
    wait_until(limit, || {
        let v = sample();
        if last != Some(v) || !ok(v) {
            (last, since) = (Some(v), Instant::now());
        }
        ok(v) && since.elapsed() >= Duration::from_millis(500)
    })
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.metadata().map_or(0, |m| m.len())).sum())
        .unwrap_or(0)
}

fn spawn(c: &mut Client, rid: u64, id: &str, script: &str) -> Value {
    let script = serde_json::to_string(script).unwrap();
    let reply = c.call(
        rid,
        "process.spawn",
        &format!(r#"{{"id":"{id}","command":"sh","args":["-c",{script}],"wantPid":true}}"#),
    );
    result_of(&reply)
}

/// Live frames of `id` on `c` until its stdout ends with `marker`.
fn frames_until_marker(c: &mut Client, id: &str, marker: &[u8]) -> Vec<Frame> {
    let mut frames: Vec<Frame> = Vec::new();
    let mut out = Vec::new();
    while !out.ends_with(marker) {
        let line = next_line(c);
        if let Some((pid, frame)) = parse_frame(&line) {
            if pid == id {
                out.extend_from_slice(&frame.data);
                frames.push(frame);
            }
        }
    }
    frames
}

fn assert_same_as_live(replayed: &[Frame], live: &[Frame]) {
    assert!(!replayed.is_empty());
    for f in replayed {
        let want = &live[f.seq as usize - 1];
        assert_eq!(want.seq, f.seq);
        assert!(want.stream == f.stream && want.data == f.data, "seq {} differs", f.seq);
    }
}

/// Under a 1 MiB budget: an exited log nobody follows goes first (whole),
/// then the oldest segments of the running one. Reattach works from each
/// region: evicted (replay starts at the oldest kept frame), disk, and the
/// RAM hot tail, byte-exact against the live stream.
#[test]
fn reattach_from_evicted_disk_and_hot_regions_under_a_small_budget() {
    let replay = tempfile::tempdir().unwrap();
    let d = spilling_daemon(
        replay.path(),
        "1",
        &[
            ("REMORA_TEST_SEGMENT_BYTES", "65536"),
            ("REMORA_TEST_HOT_TAIL_BYTES", "65536"),
        ],
    );
    let own_dir = daemon_dirs(replay.path())[0].0.clone();
    let mut a = d.connect();
    spawn(&mut a, 1, "old", "seq 1 100000");
    let old_live = frames_until_exit(&mut a, "old");
    assert_seq_contiguous(&old_live, 1);
    spawn(&mut a, 2, "big", "seq 1 500000; echo done; exec sleep 60");
    // The live follower may itself lag behind the budget and skip evicted
    // frames, so the reference is the known output, not the live frames.
    let live = frames_until_marker(&mut a, "big", b"done\n");
    let mut want: Vec<u8> = (1..=500000).map(|i| format!("{i}\n")).collect::<String>().into_bytes();
    want.extend_from_slice(b"done\n");
    assert!(live.windows(2).all(|w| w[0].seq < w[1].seq));

    // The disk writer and eviction run behind the live stream, and the
    // directory dips under the budget after every eviction while frames
    // are still queued for it: wait until it is within budget and steady.
    assert!(
        wait_steady(Duration::from_secs(30), || dir_bytes(&own_dir), |b| b <= 1 << 20),
        "replay dir never settled under the budget: {} bytes",
        dir_bytes(&own_dir)
    );
    let (old, old_frames) = reattach(&d, "old", 0);
    assert_eq!(
        old["firstSeq"], old["lastSeq"],
        "the idle exited log was dropped whole: {old}"
    );
    assert_eq!(old_frames.len(), 1);
    assert_eq!(old_frames[0].stream, "exit");

    // Evicted region: fromSeq 0 replays from the oldest kept frame, and
    // what is kept is exactly the end of the output.
    let (big, kept) = reattach(&d, "big", 0);
    let (first, last) = (big["firstSeq"].as_u64().unwrap(), big["lastSeq"].as_u64().unwrap());
    assert!(first > 1, "the oldest live segments were evicted: {big}");
    assert_eq!(last, live.last().unwrap().seq);
    assert_seq_contiguous(&kept, first);
    assert_eq!(kept.last().unwrap().seq, last);
    let tail = stdout_of(&kept);
    assert!(tail.len() < want.len() && want.ends_with(&tail), "byte-exact suffix");
    assert!(
        tail.len() <= (1 << 20) + (64 << 10) && tail.len() >= 512 << 10,
        "{}",
        tail.len()
    );
    let by_seq = |seq: u64| &kept[(seq - first) as usize];
    for f in live.iter().filter(|f| f.seq >= first) {
        assert_eq!(f.data, by_seq(f.seq).data, "live and replayed frame {} differ", f.seq);
    }
    // Disk region: just after the oldest kept frame.
    let (_, frames) = reattach(&d, "big", first + 2);
    assert_seq_contiguous(&frames, first + 3);
    assert_eq!(frames.len() as u64, last - first - 2);
    assert!(frames.iter().all(|f| f.data == by_seq(f.seq).data));
    // Hot tail: the newest frame only.
    let (_, frames) = reattach(&d, "big", last - 1);
    assert_eq!(frames.len(), 1);
    assert!(frames[0].seq == last && frames[0].data == by_seq(last).data);

    let log = d.log();
    assert_eq!(
        log.matches("replay log of exited process old").count(),
        1,
        "one WARN per eviction: {log}"
    );
    assert!(log.contains("WARN  [replay] disk budget exceeded: dropped"), "{log}");
    assert!(log.contains("replay log of live process big"), "{log}");
    // `a` was closed by the first reattach from another connection.
    d.call("process.kill", r#"{"id":"big","signal":"KILL"}"#);
}

/// A second reattach on one connection while the first replays a log that
/// lives on disk: the first reply is written when the second arrives, and the
/// second replay starts exactly at its own fromSeq, with no frame of the
/// first replay's read-ahead leaking into it.
#[test]
fn a_second_reattach_mid_replay_restarts_from_its_own_seq() {
    let replay = tempfile::tempdir().unwrap();
    let d = spilling_daemon(
        replay.path(),
        "64",
        &[
            ("REMORA_TEST_SEGMENT_BYTES", "65536"),
            ("REMORA_TEST_HOT_TAIL_BYTES", "0"),
        ],
    );
    let mut a = d.connect();
    spawn(&mut a, 1, "w", "seq 1 400000");
    let live = frames_until_exit(&mut a, "w");
    let last = live.last().unwrap().seq;
    assert!(last > 20, "{last}");
    let (_, full) = reattach(&d, "w", 0);
    assert_seq_contiguous(&full, 1);
    assert_eq!(full.len() as u64, last);

    for restart_at in [3, last / 2, last - 2] {
        let mut c = d.connect();
        c.send(1, "process.reattach", r#"{"id":"w","fromSeq":0}"#);
        // Requests run concurrently: the second goes out once the first
        // replay is under way (its first frame arrived).
        let mut lines = vec![next_line(&mut c)];
        assert!(parse_frame(&lines[0]).is_some(), "{}", lines[0]);
        c.send(
            2,
            "process.reattach",
            &format!(r#"{{"id":"w","fromSeq":{restart_at}}}"#),
        );
        loop {
            let line = next_line(&mut c);
            let done = line.starts_with(r#"{"jsonrpc":"2.0","id":2,"#);
            lines.push(line);
            if done {
                break;
            }
        }
        let first_reply = lines
            .iter()
            .position(|l| l.starts_with(r#"{"jsonrpc":"2.0","id":1,"#))
            .expect("first reply");
        let second: Vec<Frame> = lines[first_reply + 1..]
            .iter()
            .filter_map(|l| parse_frame(l))
            .map(|(_, f)| f)
            .collect();
        assert_seq_contiguous(&second, restart_at + 1);
        assert_eq!(second.last().unwrap().seq, last, "restart at {restart_at}");
        for f in &second {
            let want = &full[f.seq as usize - 1];
            assert!(
                f.stream == want.stream && f.data == want.data,
                "frame {} differs",
                f.seq
            );
        }
    }
}

/// The sweep removes a directory only when its owner record names this
/// host and nobody holds the record's lock: a daemon that died any way
/// (or before a reboot) has let go of it, a live one never has, and on a
/// replay dir shared with other hosts (a home over NFS) their records are
/// not ours to judge.
#[test]
fn the_sweep_leaves_directories_of_other_nodes_alone() {
    let replay = tempfile::tempdir().unwrap();
    let mut first = spilling_daemon(replay.path(), "64", &[]);
    let (first_dir, _) = daemon_dirs(replay.path()).remove(0);
    let here = std::fs::read_to_string(first_dir.join("node")).unwrap();
    assert!(!here.is_empty(), "a daemon directory records its node");
    first.stop();
    drop(first);

    let mut exited = std::process::Command::new("true").spawn().unwrap();
    let dead = exited.id();
    exited.wait().unwrap();
    let make = |n: u32, node: Option<&str>| {
        let dir = replay.path().join(format!("daemon-{dead}-{n}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("1-0.seg"), b"x").unwrap();
        if let Some(node) = node {
            std::fs::write(dir.join("node"), node).unwrap();
        }
        dir
    };
    let same_node = make(1, Some(&here));
    let other_node = make(2, Some("another-host.example"));
    let unrecorded = make(3, None);
    // A live owner elsewhere (another pid namespace on this host, say):
    // its pid means nothing here, its lock does.
    let held = make(4, Some(&here));
    let lock = std::fs::File::open(held.join("node")).unwrap();
    assert_eq!(
        // SAFETY: flock on a descriptor this test owns.
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );

    let second = spilling_daemon(replay.path(), "64", &[]);
    assert!(!same_node.exists(), "an unlocked record of this host is swept");
    assert!(other_node.exists(), "another host's directory is left alone");
    assert!(unrecorded.exists(), "a directory without an owner record is left alone");
    assert!(held.exists(), "a directory whose owner holds its lock is left alone");
    drop(second);
    drop(lock);
}

/// Issue 26 item 9: a FIFO named `node` in a replay directory hung
/// start-up (the sweep opened it and waited for a writer), and a `node`
/// symlink was read and locked through. Both are left alone now, and the
/// daemon starts.
#[test]
fn the_sweep_never_blocks_on_or_follows_a_planted_owner_record() {
    let replay = tempfile::tempdir().unwrap();
    let mut exited = std::process::Command::new("true").spawn().unwrap();
    let dead = exited.id();
    exited.wait().unwrap();
    let fifo_dir = replay.path().join(format!("daemon-{dead}-1"));
    std::fs::create_dir(&fifo_dir).unwrap();
    let c = std::ffi::CString::new(fifo_dir.join("node").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // A symlink to a record naming this host, planted by someone else.
    let host = {
        let mut name = [0u8; 256];
        // SAFETY: the buffer is writable for its whole length.
        assert_eq!(unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) }, 0);
        let len = name.iter().position(|&b| b == 0).unwrap();
        name[..len].to_vec()
    };
    let elsewhere = replay.path().join("elsewhere");
    std::fs::write(&elsewhere, &host).unwrap();
    let link_dir = replay.path().join(format!("daemon-{dead}-2"));
    std::fs::create_dir(&link_dir).unwrap();
    std::os::unix::fs::symlink(&elsewhere, link_dir.join("node")).unwrap();

    let d = spilling_daemon(replay.path(), "64", &[]);
    let mut c = d.connect();
    assert!(c.call(1, "server.ping", "{}").contains(r#""pong":true"#));
    assert!(fifo_dir.join("node").exists(), "a FIFO record is not judged");
    assert!(link_dir.exists(), "a symlinked record is not judged");
}

/// A daemon killed with SIGKILL leaves its directory; the next daemon on
/// the same replay dir removes it, and leaves a live daemon's alone.
#[test]
fn stale_directory_of_a_killed_daemon_is_swept_and_a_live_one_kept() {
    use std::os::unix::fs::PermissionsExt;
    let replay = tempfile::tempdir().unwrap();
    let mode_before = std::fs::metadata(replay.path()).unwrap().permissions().mode() & 0o777;
    let mut x = spilling_daemon(replay.path(), "64", &[]);
    let (x_dir, x_pid) = daemon_dirs(replay.path()).remove(0);
    let mut c = x.connect();
    // Both held while known alive: the daemon serves this connection, and
    // the child was just spawned.
    let x_held = common::proven::Proc::open(x_pid).expect("a pidfd on the daemon");
    let child = spawn(&mut c, 1, "p", "echo hi; exec sleep 60")["pid"].as_i64().unwrap() as i32;
    let child = common::proven::Proc::open(child).expect("a pidfd on the child");
    frames_until_marker(&mut c, "p", b"hi\n");
    assert!(wait_until(Duration::from_secs(5), || dir_bytes(&x_dir) > 0));
    assert!(x_held.signal(libc::SIGKILL));
    child.signal_group(libc::SIGKILL);
    assert!(wait_until(Duration::from_secs(5), || x_held.gone()));
    let _ = std::fs::remove_file(&x.socket);
    x.stop();
    assert!(x_dir.exists(), "nobody swept it yet");

    let y = spilling_daemon(replay.path(), "64", &[]);
    let dirs = daemon_dirs(replay.path());
    assert_eq!(dirs.len(), 1, "the dead daemon's directory is gone: {dirs:?}");
    let (y_dir, _) = dirs[0].clone();
    assert_ne!(y_dir, x_dir);
    assert!(y.log().contains("removed stale replay directory"));
    assert_eq!(std::fs::metadata(&y_dir).unwrap().permissions().mode() & 0o777, 0o700);
    // The configured directory was not made by remora: its mode stays
    // (issue 44, F4).
    assert_eq!(
        std::fs::metadata(replay.path()).unwrap().permissions().mode() & 0o777,
        mode_before
    );

    let z = spilling_daemon(replay.path(), "64", &[]);
    assert!(y_dir.exists(), "a live daemon's directory is left alone");
    assert_eq!(daemon_dirs(replay.path()).len(), 2);
    drop(z);
    drop(y);
    assert!(
        daemon_dirs(replay.path()).is_empty(),
        "a daemon removes its own directory when it stops"
    );
}

/// An unusable replay dir: logs are RAM rings, one WARN, replies and
/// replays unaffected. A directory that disappears while a child writes:
/// that log falls back, the stream goes on.
#[test]
fn disk_trouble_falls_back_to_ram() {
    let tmp = tempfile::tempdir().unwrap();
    let blocker = tmp.path().join("file");
    std::fs::write(&blocker, b"").unwrap();
    let d = TestDaemon::start_with(&["-replay-dir", blocker.join("sub").to_str().unwrap()], &[]);
    let mut c = d.connect();
    spawn(&mut c, 1, "f", "seq 1 20000");
    let live = frames_until_exit(&mut c, "f");
    let (reply, frames) = reattach(&d, "f", 0);
    assert_eq!(reply["firstSeq"], 1);
    assert_seq_contiguous(&frames, 1);
    assert_same_as_live(&frames, &live);
    assert_eq!(d.log().matches("WARN  [replay] cannot use").count(), 1, "{}", d.log());

    let replay = tempfile::tempdir().unwrap();
    let d = spilling_daemon(replay.path(), "64", &[("REMORA_TEST_SEGMENT_BYTES", "4096")]);
    let own_dir = daemon_dirs(replay.path())[0].0.clone();
    let mut c = d.connect();
    spawn(&mut c, 1, "g", "seq 1 1000; read x; seq 1001 30000");
    let mut live = frames_until_marker(&mut c, "g", b"1000\n");
    assert!(wait_until(Duration::from_secs(5), || dir_bytes(&own_dir) > 0));
    std::fs::remove_dir_all(&own_dir).unwrap();
    let reply = c.call(
        2,
        "process.stdin",
        &format!(r#"{{"id":"g","data":"{}"}}"#, b64(b"go\n")),
    );
    assert!(reply.contains(r#""applied":3"#), "{reply}");
    live.extend(frames_until_exit(&mut c, "g"));
    assert_seq_contiguous(&live, 1);
    let want: String = (1..=30000).map(|i| format!("{i}\n")).collect();
    assert!(stdout_of(&live) == want.as_bytes());
    // The disk writer may trail the client by up to its write-behind bound,
    // so the failure can be logged after the exit frame was delivered.
    assert!(
        wait_until(Duration::from_secs(10), || d
            .log()
            .contains("WARN  [replay] process g: writing its replay log failed")),
        "{}",
        d.log()
    );
    // What is kept replays byte-exact and ends with the exit frame.
    let (reply, frames) = reattach(&d, "g", 0);
    assert_eq!(frames.last().unwrap().stream, "exit", "{reply}");
    assert_same_as_live(&frames, &live);
}

/// Exited processes are dropped after the retention (shortened here);
/// running ones never are.
#[test]
fn exited_processes_are_dropped_after_retention() {
    const RETENTION: Duration = Duration::from_millis(1500);
    let retention_ms = RETENTION.as_millis().to_string();
    let d = TestDaemon::start_with(&[], &[("REMORA_TEST_RETENTION_MS", &retention_ms)]);
    let mut c = d.connect();
    spawn(&mut c, 1, "gone", "echo bye");
    spawn(&mut c, 2, "stays", "exec sleep 30");
    frames_until_exit(&mut c, "gone");
    let start = Instant::now();
    let (reply, _) = reattach(&d, "gone", 0);
    // The retention clock starts before the exit frame reaches us, so only
    // a stall longer than the retention may excuse an early drop.
    assert!(
        reply["found"] == true || start.elapsed() >= RETENTION,
        "dropped {} ms after the exit frame: {reply}",
        start.elapsed().as_millis()
    );
    assert!(wait_until(Duration::from_secs(10), || reattach(&d, "gone", 0).0
        ["found"]
        == false));
    eprintln!("dropped {} ms after the exit frame", start.elapsed().as_millis());
    let (reply, frames) = reattach(&d, "gone", 0);
    assert_eq!(
        reply,
        serde_json::json!({"found":false,"running":false,"firstSeq":0,"lastSeq":0,"stdinApplied":0})
    );
    assert!(frames.is_empty());
    assert_eq!(reattach(&d, "stays", 0).0["found"], true);
    // The process is invisible before the line is written.
    assert!(
        wait_until(Duration::from_secs(10), || d
            .log()
            .contains("Dropped 1 exited process(es)")),
        "{}",
        d.log()
    );
    // `c` was closed by the reattach of "stays" from another connection.
    d.call("process.kill", r#"{"id":"stays","signal":"KILL"}"#);
}

fn vm_hwm_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// One connection floods 1 MiB stdin lines at a child that never reads;
/// a second connection's pings keep being answered. The latencies are
/// reported, not asserted; the daemon's peak memory stays bounded.
#[test]
fn a_flooding_connection_does_not_starve_another() {
    let replay = tempfile::tempdir().unwrap();
    let d = spilling_daemon(replay.path(), "64", &[]);
    let pid = daemon_dirs(replay.path())[0].1;
    let mut c = d.connect();
    spawn(&mut c, 1, "sink", "exec sleep 60");

    let mut ping = d.connect();
    let sample = |ping: &mut Client, n: u64| {
        let mut times: Vec<Duration> = (0..n)
            .map(|i| {
                let t = Instant::now();
                let reply = ping.call(100 + i, "server.ping", "{}");
                assert!(reply.contains("result"), "{reply}");
                t.elapsed()
            })
            .collect();
        times.sort();
        (times[times.len() / 2], times[times.len() * 99 / 100])
    };
    let quiet = sample(&mut ping, 200);

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut flood = d.connect();
    let mut drain = flood.stream.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut drain, &mut sink);
    });
    let progress = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = {
        let stop = stop.clone();
        let progress = progress.clone();
        std::thread::spawn(move || {
            let chunk = b64(&pattern(760 * 1024, 1));
            let line = common::request_line(
                "9",
                "process.stdin",
                Some(&format!(r#"{{"id":"sink","data":"{chunk}"}}"#)),
                common::TOKEN,
            );
            let mut sent = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                flood.send_raw(line.as_bytes());
                sent += line.len() as u64;
                progress.store(sent, std::sync::atomic::Ordering::Relaxed);
            }
            let _ = flood.stream.shutdown(std::net::Shutdown::Write);
            sent
        })
    };
    // Sample while the flood runs: until 64 MiB went out (or 20 s).
    let started = Instant::now();
    let mut busy = (Duration::ZERO, Duration::ZERO);
    while progress.load(std::sync::atomic::Ordering::Relaxed) < 64 << 20 && started.elapsed() < Duration::from_secs(20)
    {
        let s = sample(&mut ping, 50);
        busy = (busy.0.max(s.0), busy.1.max(s.1));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = writer.join().unwrap();
    reader.join().unwrap();
    eprintln!(
        "ping p50/p99: quiet {:?}/{:?}, during a {} MiB stdin flood (worst of 50-ping windows) {:?}/{:?}; daemon VmHWM {} KiB",
        quiet.0,
        quiet.1,
        sent >> 20,
        busy.0,
        busy.1,
        vm_hwm_kib(pid)
    );
    assert!(
        vm_hwm_kib(pid) < 96 * 1024,
        "stdin queue and in-flight bytes are bounded"
    );
    c.call(2, "process.kill", r#"{"id":"sink","signal":"KILL"}"#);
}
