//! `process.*` against a real daemon and real children: exact reply and
//! frame bytes, the replay/reattach ordering, stdin offsets, kill
//! semantics, and that no child tree outlives its kill.

use crate::common;
use crate::common::frames::{frames_until_exit, next_line, parse_frame, stdout_of, Frame};
use crate::common::reply::{err, ok};
use crate::common::{wait_until, Client, TestDaemon};
use base64::Engine;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};

/// Waits for the next frame of process `id`.
fn next_frame(c: &mut Client, id: &str) -> Frame {
    let mut kept = Vec::new();
    let frame = loop {
        let line = next_line(c);
        match parse_frame(&line) {
            Some((pid, frame)) if pid == id => break frame,
            _ => kept.push(line),
        }
    };
    kept.append(&mut c.backlog);
    c.backlog = kept;
    frame
}

fn exit_code(frames: &[Frame]) -> i64 {
    let last = frames.last().expect("frames");
    assert_eq!(last.stream, "exit");
    last.exit_code.expect("exitCode")
}

fn assert_seq_contiguous(frames: &[Frame], first: u64) {
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.seq, first + i as u64, "seq gap/dup at index {i}: {:?}", f.raw);
    }
}

fn spawn(c: &mut Client, rid: u64, id: &str, command: &str, args: &[&str]) -> String {
    let args = serde_json::to_string(args).unwrap();
    c.call(
        rid,
        "process.spawn",
        &format!(r#"{{"id":"{id}","command":"{command}","args":{args}}}"#),
    )
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn spawn_echo_reply_and_frames_are_byte_exact() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    c.send(1, "process.spawn", r#"{"id":"p1","command":"echo","args":["hi"]}"#);
    // The reply precedes every frame of the new process.
    assert_eq!(c.recv_line(), ok(1, r#"{"success":true}"#));
    assert_eq!(
        c.recv_line(),
        r#"{"type":"stream","processId":"p1","stream":"stdout","seq":1,"data":"aGkK"}"#
    );
    assert_eq!(
        c.recv_line(),
        r#"{"type":"stream","processId":"p1","stream":"exit","seq":2,"exitCode":0}"#
    );
    // The connection stays usable and the exited process is remembered.
    assert_eq!(c.call(2, "server.ping", "{}"), ok(2, r#"{"pong":true}"#));
    assert_eq!(
        c.call(3, "process.killAndWait", r#"{"id":"p1"}"#),
        ok(3, r#"{"found":true,"died":true,"alreadyExited":true}"#)
    );
}

#[test]
fn stderr_frames_and_exit_codes() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    spawn(&mut c, 1, "e", "sh", &["-c", "echo err >&2; exit 3"]);
    let frames = frames_until_exit(&mut c, "e");
    assert_eq!(
        frames[0].raw,
        r#"{"type":"stream","processId":"e","stream":"stderr","seq":1,"data":"ZXJyCg=="}"#
    );
    assert_eq!(
        frames[1].raw,
        r#"{"type":"stream","processId":"e","stream":"exit","seq":2,"exitCode":3}"#
    );

    // Killed by a signal: -1, not 128+signo, and the signal's
    // name; no killedBy, as no request asked for it.
    spawn(&mut c, 2, "s", "sh", &["-c", "kill -9 $$"]);
    let frames = frames_until_exit(&mut c, "s");
    assert_eq!(exit_code(&frames), -1);
    assert_eq!(
        frames.last().unwrap().raw,
        r#"{"type":"stream","processId":"s","stream":"exit","seq":1,"exitCode":-1,"signal":"SIGKILL"}"#
    );

    // stdout and stderr share one sequence.
    spawn(&mut c, 3, "m", "sh", &["-c", "echo a; echo b >&2; echo c; exit 0"]);
    let frames = frames_until_exit(&mut c, "m");
    assert_seq_contiguous(&frames, 1);
    assert_eq!(stdout_of(&frames), b"a\nc\n");
    let stderr: Vec<u8> = frames
        .iter()
        .filter(|f| f.stream == "stderr")
        .flat_map(|f| f.data.clone())
        .collect();
    assert_eq!(stderr, b"b\n");
    assert_eq!(exit_code(&frames), 0);
}

#[test]
fn large_output_is_reassembled_exactly_in_32k_frames() {
    let d = TestDaemon::start();
    // 64 MiB of pseudo-random bytes, written by `cat`.
    let path = d.root().join("big.bin");
    let mut data = vec![0u8; 64 << 20];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for chunk in data.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    std::fs::write(&path, &data).unwrap();
    let want = Sha256::digest(&data);
    drop(data);

    let mut c = d.connect();
    spawn(&mut c, 1, "big", "cat", &[path.to_str().unwrap()]);
    let mut hasher = Sha256::new();
    let mut total = 0usize;
    let mut expect_seq = 1;
    loop {
        let f = next_frame(&mut c, "big");
        assert_eq!(f.seq, expect_seq);
        expect_seq += 1;
        if f.stream == "exit" {
            assert_eq!(f.exit_code, Some(0));
            break;
        }
        assert_eq!(f.stream, "stdout");
        assert!(
            !f.data.is_empty() && f.data.len() <= 32768,
            "frame of {} bytes",
            f.data.len()
        );
        total += f.data.len();
        hasher.update(&f.data);
    }
    assert_eq!(total, 64 << 20);
    assert_eq!(hasher.finalize(), want);
}

#[test]
fn kill_tears_down_the_whole_tree() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    spawn(&mut c, 1, "t", "sh", &["-c", "sleep 1000 & echo $!; wait"]);
    let first = next_frame(&mut c, "t");
    let grandchild: i32 = String::from_utf8_lossy(&first.data)
        .trim()
        .parse()
        .expect("grandchild pid");
    assert!(!common::pid_gone(grandchild));
    // Only KILL reaches the group; other signals go to
    // the direct child alone (daemon/tests/it/kill_reach.rs).
    assert_eq!(
        c.call(2, "process.kill", r#"{"id":"t","signal":"KILL"}"#),
        ok(2, r#"{"success":true}"#)
    );
    let frames = frames_until_exit(&mut c, "t");
    assert_eq!(exit_code(&frames), -1);
    assert!(
        wait_until(Duration::from_secs(5), || common::pid_gone(grandchild)),
        "grandchild {grandchild} survived"
    );
    // Killing an exited process is still a success (and sends nothing).
    assert_eq!(
        c.call(3, "process.kill", r#"{"id":"t","signal":"KILL"}"#),
        ok(3, r#"{"success":true}"#)
    );
    assert_eq!(
        c.call(4, "process.kill", r#"{"id":"nope"}"#),
        err(4, -32602, "Process not found")
    );
}

#[test]
fn kill_signal_names() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    // A child that reports which signal reached it.
    let script = "trap 'echo HUP; exit 0' HUP; trap 'echo INT; exit 0' INT; trap 'echo TERM; exit 0' TERM; \
                  echo ready; while :; do sleep 0.02; done";
    // The reference's eight spellings, case-sensitive; anything else is TERM.
    let cases = [("HUP", "HUP"), ("SIGINT", "INT"), ("hup", "TERM"), ("SIGUSR1", "TERM")];
    for (i, (sig, want)) in cases.into_iter().enumerate() {
        let id = format!("sig{i}");
        spawn(&mut c, 10 + i as u64, &id, "sh", &["-c", script]);
        assert_eq!(next_frame(&mut c, &id).data, b"ready\n");
        c.call(
            20 + i as u64,
            "process.kill",
            &format!(r#"{{"id":"{id}","signal":"{sig}"}}"#),
        );
        let frames = frames_until_exit(&mut c, &id);
        assert_eq!(stdout_of(&frames), format!("{want}\n").as_bytes(), "signal {sig}");
    }
}

#[test]
fn kill_and_wait_outcomes_and_timings() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    assert_eq!(
        c.call(1, "process.killAndWait", r#"{}"#),
        err(1, -32602, "Process ID is required")
    );
    assert_eq!(
        c.call(2, "process.killAndWait", r#"{"id":"ghost"}"#),
        ok(2, r#"{"found":false,"died":false}"#)
    );

    // Cooperative child: dies within the grace.
    spawn(&mut c, 3, "coop", "sleep", &["1000"]);
    assert_eq!(
        c.call(4, "process.killAndWait", r#"{"id":"coop","timeoutMs":5000}"#),
        ok(4, r#"{"found":true,"died":true}"#)
    );

    // TERM-ignoring child (the ignore is inherited by its `sleep`s).
    let stubborn = "trap '' TERM; echo ready; while :; do sleep 0.05; done";
    spawn(&mut c, 5, "stub", "sh", &["-c", stubborn]);
    assert_eq!(next_frame(&mut c, "stub").data, b"ready\n");
    let t = Instant::now();
    assert_eq!(
        c.call(6, "process.killAndWait", r#"{"id":"stub","timeoutMs":50}"#),
        ok(6, r#"{"found":true,"died":true,"escalated":true}"#)
    );
    // Below the 3000 ms default grace: timeoutMs was the grace used.
    let escalated_after = t.elapsed();
    assert!(escalated_after < Duration::from_millis(2900), "{escalated_after:?}");
    assert_eq!(exit_code(&frames_until_exit(&mut c, "stub")), -1);

    // escalate:false leaves it running.
    spawn(&mut c, 7, "stub2", "sh", &["-c", stubborn]);
    assert_eq!(next_frame(&mut c, "stub2").data, b"ready\n");
    assert_eq!(
        c.call(
            8,
            "process.killAndWait",
            r#"{"id":"stub2","timeoutMs":50,"escalate":false}"#
        ),
        ok(8, r#"{"found":true,"died":false}"#)
    );
    assert_eq!(
        c.call(9, "process.reattach", r#"{"id":"stub2","fromSeq":1}"#),
        ok(
            9,
            r#"{"found":true,"running":true,"firstSeq":1,"lastSeq":1,"stdinApplied":0}"#
        )
    );
    // timeoutMs 0 means the 3000 ms default; a hard KILL needs no escalation.
    let t = Instant::now();
    assert_eq!(
        c.call(10, "process.killAndWait", r#"{"id":"stub2","timeoutMs":0}"#),
        ok(10, r#"{"found":true,"died":true,"escalated":true}"#)
    );
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(2900),
        "default grace too short: {waited:?}"
    );
    spawn(&mut c, 11, "stub3", "sh", &["-c", stubborn]);
    assert_eq!(next_frame(&mut c, "stub3").data, b"ready\n");
    assert_eq!(
        c.call(
            12,
            "process.killAndWait",
            r#"{"id":"stub3","signal":"KILL","timeoutMs":5000}"#
        ),
        ok(12, r#"{"found":true,"died":true}"#)
    );
}

#[test]
fn slow_request_does_not_delay_a_fast_one() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    spawn(
        &mut c,
        1,
        "slow",
        "sh",
        &["-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"],
    );
    assert_eq!(next_frame(&mut c, "slow").data, b"ready\n");
    c.send(2, "process.killAndWait", r#"{"id":"slow","timeoutMs":1000}"#);
    c.send(3, "server.ping", "{}");
    // The ping reply is the very next reply line.
    let first_reply = loop {
        let line = next_line(&mut c);
        if line.starts_with("{\"jsonrpc\"") {
            break line;
        }
    };
    assert_eq!(first_reply, ok(3, r#"{"pong":true}"#));
    assert_eq!(c.reply_for(2), ok(2, r#"{"found":true,"died":true,"escalated":true}"#));
}

#[test]
fn reattach_replays_then_follows_without_gap_or_duplicate() {
    let d = TestDaemon::start();
    let mut c1 = d.connect();
    // Writes in bursts, and holds the second half until told on stdin, so
    // the reattach lands mid-stream however slow the machine is.
    let script = "burst() { for i in 1 2 3 4 5 6 7 8 9 10; do seq 1 3000; sleep 0.03; done; }; \
                  burst; read go; burst";
    spawn(&mut c1, 1, "w", "sh", &["-c", script]);
    let first = next_frame(&mut c1, "w");
    assert_eq!(first.seq, 1);

    // Second connection, from the start.
    let mut c2 = d.connect();
    c2.send(7, "process.reattach", r#"{"id":"w","fromSeq":0}"#);
    let mut replayed = Vec::new();
    let reply = loop {
        let line = c2.recv_line();
        match parse_frame(&line) {
            Some((_, f)) => replayed.push(f),
            None => break line,
        }
    };
    let v: Value = serde_json::from_str(&reply).unwrap();
    let last_seq = v["result"]["lastSeq"].as_u64().unwrap();
    assert!(
        reply.starts_with(r#"{"jsonrpc":"2.0","id":7,"result":{"found":true,"running":true,"firstSeq":1,"lastSeq":"#),
        "{reply}"
    );
    assert!(reply.ends_with(r#","stdinApplied":0}}"#), "{reply}");
    let go = d.call("process.stdin", &format!(r#"{{"id":"w","data":"{}"}}"#, b64(b"go\n")));
    assert!(go.contains(r#""applied":3"#), "{go}");
    // Exactly the frames 1..=lastSeq came before the reply...
    assert_eq!(replayed.len() as u64, last_seq);
    assert_seq_contiguous(&replayed, 1);
    // ...and live frames continue at lastSeq+1.
    let live = frames_until_exit(&mut c2, "w");
    assert!(
        live.len() > 1,
        "the reattach should land while the child is still writing"
    );
    assert_eq!(live[0].seq, last_seq + 1);
    assert_seq_contiguous(&live, last_seq + 1);
    let mut all = replayed.clone();
    all.extend(live.iter().cloned());
    let want: String = (0..20)
        .map(|_| (1..=3000).map(|i| format!("{i}\n")).collect::<String>())
        .collect();
    assert_eq!(String::from_utf8(stdout_of(&all)).unwrap(), want);

    // The spawning connection was cut at lastSeq and closed (a reattach
    // transfers the process, 5db5e4a; the replaced connection is closed,
    // 90fca6e6): what it got is a prefix of the stream, nothing after.
    let mut on_c1 = vec![first];
    for line in c1.read_to_eof().lines() {
        on_c1.push(parse_frame(line).expect("only frames").1);
    }
    assert!(on_c1.len() as u64 <= last_seq, "{} > {last_seq}", on_c1.len());
    assert!(on_c1.iter().zip(&all).all(|(a, b)| a.raw == b.raw));

    // After exit: a partial replay from the middle, reply last.
    let mut c3 = d.connect();
    c3.send(8, "process.reattach", r#"{"id":"w","fromSeq":5}"#);
    let total = all.len() as u64;
    for seq in 6..=total {
        let (_, f) = parse_frame(&c3.recv_line()).expect("frame");
        assert_eq!(f.seq, seq);
    }
    assert_eq!(
        c3.recv_line(),
        ok(
            8,
            &format!(r#"{{"found":true,"running":false,"firstSeq":1,"lastSeq":{total},"stdinApplied":3}}"#)
        )
    );
    // A negative fromSeq is refused (uint64 since 5db5e4a); 0 replays
    // everything; beyond lastSeq replays nothing.
    assert_eq!(
        c3.call(91, "process.reattach", r#"{"id":"w","fromSeq":-7}"#),
        err(91, -32602, "Invalid params")
    );
    c3.send(9, "process.reattach", r#"{"id":"w","fromSeq":0}"#);
    for seq in 1..=total {
        assert_eq!(parse_frame(&c3.recv_line()).expect("frame").1.seq, seq);
    }
    assert!(c3
        .recv_line()
        .starts_with(r#"{"jsonrpc":"2.0","id":9,"result":{"found":true"#));
    assert_eq!(
        c3.call(10, "process.reattach", r#"{"id":"w","fromSeq":99999999}"#),
        ok(
            10,
            &format!(r#"{{"found":true,"running":false,"firstSeq":1,"lastSeq":{total},"stdinApplied":3}}"#)
        )
    );
}

#[test]
fn reattach_unknown_and_missing_params() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    assert_eq!(
        c.call(1, "process.reattach", r#"{"id":"nope","fromSeq":0,"wantPid":true}"#),
        ok(
            1,
            r#"{"found":false,"running":false,"firstSeq":0,"lastSeq":0,"stdinApplied":0}"#
        )
    );
    // A missing or empty id is an error, as the reference's record measured.
    assert_eq!(
        c.call(2, "process.reattach", r#"{}"#),
        err(2, -32602, "Process ID is required")
    );
    assert_eq!(
        c.call(4, "process.reattach", r#"{"id":"","fromSeq":0}"#),
        err(4, -32602, "Process ID is required")
    );
    assert_eq!(
        c.call(3, "process.reattach", r#"{"id":"x","fromSeq":"1"}"#),
        err(3, -32602, "Invalid params")
    );
}

#[test]
fn spawn_validation_and_go_error_texts() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    assert_eq!(
        c.call(1, "process.spawn", r#"{"command":"echo"}"#),
        err(1, -32602, "Process ID is required")
    );
    assert_eq!(
        c.call(2, "process.spawn", r#"{"id":"x"}"#),
        err(2, -32602, "Command is required")
    );
    assert_eq!(
        c.call(3, "process.spawn", r#"{"id":"x","command":"/nonexistent"}"#),
        err(3, -32603, "fork/exec /nonexistent: no such file or directory")
    );
    assert_eq!(
        c.call(4, "process.spawn", r#"{"id":"x","command":"nonexistent-cmd"}"#),
        err(
            4,
            -32603,
            r#"exec: \"nonexistent-cmd\": executable file not found in $PATH"#
        )
    );
    let noexec = d.root().join("noexec.sh");
    std::fs::write(&noexec, "#!/bin/sh\necho no\n").unwrap();
    let noexec = noexec.to_str().unwrap();
    assert_eq!(
        c.call(5, "process.spawn", &format!(r#"{{"id":"x","command":"{noexec}"}}"#)),
        err(5, -32603, &format!("fork/exec {noexec}: permission denied"))
    );
    // A bad cwd is caught by a stat before the fork:
    // the stat error wrapped in chdir, and a non-directory named as such.
    let reply = c.call(
        6,
        "process.spawn",
        r#"{"id":"x","command":"/bin/sh","cwd":"/no/such/dir"}"#,
    );
    assert_eq!(
        reply,
        err(
            6,
            -32603,
            "chdir /no/such/dir: stat /no/such/dir: no such file or directory"
        )
    );
    assert_eq!(
        c.call(
            61,
            "process.spawn",
            &format!(r#"{{"id":"x","command":"/bin/sh","cwd":"{noexec}"}}"#)
        ),
        err(61, -32603, &format!("chdir {noexec}: not a directory"))
    );
    // The child's PATH (env override) is what bare names resolve against.
    assert_eq!(
        c.call(
            7,
            "process.spawn",
            r#"{"id":"x","command":"sh","env":{"PATH":"/nonexistent-dir"}}"#
        ),
        err(7, -32603, r#"exec: \"sh\": executable file not found in $PATH"#)
    );
    // A NUL in an environment entry: Go's Cmd.Start refuses it before the
    // fork, so no fork/exec prefix; a NUL in an argument fails in execve.
    assert_eq!(
        c.call(
            71,
            "process.spawn",
            r#"{"id":"x","command":"/bin/sh","env":{"A":"x\u0000y"}}"#
        ),
        err(71, -32603, "exec: environment variable contains NUL")
    );
    assert_eq!(
        c.call(
            72,
            "process.spawn",
            r#"{"id":"x","command":"/bin/sh","args":["a\u0000b"]}"#
        ),
        err(72, -32603, "fork/exec /bin/sh: invalid argument")
    );
    // Nothing was registered by the failures.
    assert_eq!(
        c.call(8, "process.kill", r#"{"id":"x"}"#),
        err(8, -32602, "Process not found")
    );
    // Mistyped params are the gate's -32602.
    assert_eq!(
        c.call(9, "process.spawn", r#"{"id":"x","command":"echo","args":"hi"}"#),
        err(9, -32602, "Invalid params")
    );
    // cwd is honoured.
    let mut c2 = d.connect();
    let root = d.root().to_str().unwrap().to_string();
    c2.call(
        10,
        "process.spawn",
        &format!(r#"{{"id":"cwd","command":"pwd","cwd":"{root}"}}"#),
    );
    let frames = frames_until_exit(&mut c2, "cwd");
    assert_eq!(
        std::fs::canonicalize(String::from_utf8(stdout_of(&frames)).unwrap().trim()).unwrap(),
        std::fs::canonicalize(&root).unwrap()
    );
}

#[test]
fn want_pid_on_spawn_and_reattach_is_identical() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let reply = c.call(
        1,
        "process.spawn",
        r#"{"id":"wp","command":"sleep","args":["1000"],"wantPid":true}"#,
    );
    let prefix = r#"{"jsonrpc":"2.0","id":1,"result":{"success":true,"pid":"#;
    assert!(reply.starts_with(prefix), "{reply}");
    let tail = &reply[prefix.len()..reply.len() - 2];
    let (pid, start) = tail.split_once(",\"startTime\":").expect("startTime");
    let pid: i32 = pid.parse().unwrap();
    let start_f: f64 = start.parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((now - start_f).abs() < 60.0, "startTime {start}");
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    // Reattach reports the very same bytes.
    assert_eq!(
        c.call(2, "process.reattach", r#"{"id":"wp","fromSeq":0,"wantPid":true}"#),
        ok(
            2,
            &format!(
                r#"{{"found":true,"running":true,"firstSeq":0,"lastSeq":0,"stdinApplied":0,"pid":{pid},"startTime":{start}}}"#
            )
        )
    );
    // Without wantPid (or false): the default shapes.
    assert_eq!(
        c.call(3, "process.reattach", r#"{"id":"wp","fromSeq":0,"wantPid":false}"#),
        ok(
            3,
            r#"{"found":true,"running":true,"firstSeq":0,"lastSeq":0,"stdinApplied":0}"#
        )
    );
    assert_eq!(
        c.call(4, "process.spawn", r#"{"id":"wp2","command":"true","wantPid":false}"#),
        ok(4, r#"{"success":true}"#)
    );
    c.call(5, "process.killAndWait", r#"{"id":"wp","signal":"KILL"}"#);
}

#[test]
fn stdin_offsets_through_cat() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    // Bad base64 is reported before the lookup.
    assert_eq!(
        c.call(1, "process.stdin", r#"{"id":"ghost","data":"!!"}"#),
        err(1, -32602, "Invalid base64 data")
    );
    assert_eq!(
        c.call(
            2,
            "process.stdin",
            &format!(r#"{{"id":"ghost","data":"{}"}}"#, b64(b"x"))
        ),
        err(2, -32602, "Process not found")
    );
    spawn(&mut c, 3, "cat", "cat", &[]);
    let send = |c: &mut Client, rid: u64, data: &[u8], offset: Option<i64>| {
        let offset = offset.map(|o| format!(r#","offset":{o}"#)).unwrap_or_default();
        c.call(
            rid,
            "process.stdin",
            &format!(r#"{{"id":"cat","data":"{}"{offset}}}"#, b64(data)),
        )
    };
    assert_eq!(send(&mut c, 4, b"abc", None), ok(4, r#"{"success":true,"applied":3}"#));
    assert_eq!(
        send(&mut c, 5, b"def", Some(3)),
        ok(5, r#"{"success":true,"applied":6}"#)
    );
    assert_eq!(
        send(&mut c, 6, b"abc", Some(0)),
        ok(6, r#"{"success":true,"applied":6,"duplicate":true}"#)
    );
    assert_eq!(
        send(&mut c, 7, b"zz", Some(10)),
        err(7, -32003, "stdin offset gap: offset ahead of applied bytes")
    );
    // Partial overlap: "ef" is already applied, only "gh" is written.
    assert_eq!(
        send(&mut c, 8, b"efgh", Some(4)),
        ok(8, r#"{"success":true,"applied":8}"#)
    );
    assert_eq!(send(&mut c, 9, b"", None), ok(9, r#"{"success":true,"applied":8}"#));
    assert_eq!(
        send(&mut c, 10, b"\n", Some(8)),
        ok(10, r#"{"success":true,"applied":9}"#)
    );
    let mut echoed = Vec::new();
    while echoed.len() < 9 {
        echoed.extend(next_frame(&mut c, "cat").data);
    }
    assert_eq!(echoed, b"abcdefgh\n");
    let reply = c.call(11, "process.reattach", r#"{"id":"cat","fromSeq":999}"#);
    assert!(
        reply.starts_with(r#"{"jsonrpc":"2.0","id":11,"result":{"found":true,"running":true,"firstSeq":1,"lastSeq":"#),
        "{reply}"
    );
    assert!(reply.ends_with(r#","stdinApplied":9}}"#), "{reply}");
    // Once exited: the offset verdict still comes first — a gap
    // is a gap and a replay a duplicate — and only a request that would
    // write is refused as not running.
    assert_eq!(
        c.call(12, "process.killAndWait", r#"{"id":"cat"}"#),
        ok(12, r#"{"found":true,"died":true}"#)
    );
    assert_eq!(
        send(&mut c, 13, b"x", Some(100)),
        err(13, -32003, "stdin offset gap: offset ahead of applied bytes")
    );
    assert_eq!(
        send(&mut c, 15, b"abc", Some(0)),
        ok(15, r#"{"success":true,"applied":9,"duplicate":true}"#)
    );
    assert_eq!(
        send(&mut c, 16, b"\nx", Some(8)),
        err(16, -32602, "Process not running")
    );
    assert_eq!(send(&mut c, 17, b"", None), err(17, -32602, "Process not running"));
    assert_eq!(send(&mut c, 18, b"x", None), err(18, -32602, "Process not running"));
    assert_eq!(
        c.call(14, "process.stdin", r#"{"id":"cat","data":"%"}"#),
        err(14, -32602, "Invalid base64 data")
    );
}

#[test]
fn stdin_to_a_child_that_closed_it_reports_the_pipe_error() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    spawn(&mut c, 1, "closed", "sh", &["-c", "exec 0<&-; echo ready; sleep 1000"]);
    assert_eq!(next_frame(&mut c, "closed").data, b"ready\n");
    // The first write is accepted for delivery; its failure is noticed by
    // the writer, and later writes report Go's pipe error.
    let data = b64(&[b'x'; 1000]);
    let mut rid = 2;
    let broken = wait_until(Duration::from_secs(5), || {
        rid += 1;
        let reply = c.call(rid, "process.stdin", &format!(r#"{{"id":"closed","data":"{data}"}}"#));
        reply == err(rid, -32603, "write |1: broken pipe")
    });
    assert!(broken);
    c.call(100, "process.kill", r#"{"id":"closed","signal":"KILL"}"#);
}

#[test]
fn reusing_a_live_id_kills_the_old_tree_and_hides_its_frames() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    spawn(
        &mut c,
        1,
        "r",
        "sh",
        &["-c", "sleep 1000 & echo $!; while :; do sleep 0.01; echo old; done"],
    );
    let first = next_frame(&mut c, "r");
    let grandchild: i32 = String::from_utf8_lossy(&first.data)
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("grandchild pid");
    c.send(
        2,
        "process.spawn",
        r#"{"id":"r","command":"sh","args":["-c","sleep 0.3; echo new"]}"#,
    );
    // Drain up to the reply: old frames may precede it, none may follow.
    loop {
        let line = next_line(&mut c);
        if line.starts_with("{\"jsonrpc\"") {
            assert_eq!(line, ok(2, r#"{"success":true}"#));
            break;
        }
    }
    assert_eq!(
        c.recv_line(),
        r#"{"type":"stream","processId":"r","stream":"stdout","seq":1,"data":"bmV3Cg=="}"#
    );
    assert_eq!(
        c.recv_line(),
        r#"{"type":"stream","processId":"r","stream":"exit","seq":2,"exitCode":0}"#
    );
    assert!(
        wait_until(Duration::from_secs(5), || common::pid_gone(grandchild)),
        "old grandchild survived"
    );
}

#[test]
fn process_survives_the_spawning_connection() {
    let d = TestDaemon::start();
    {
        let mut c1 = d.connect();
        assert_eq!(
            spawn(&mut c1, 1, "bg", "sh", &["-c", "sleep 0.5; echo later"]),
            ok(1, r#"{"success":true}"#)
        );
    }
    let mut c2 = d.connect();
    c2.send(2, "process.reattach", r#"{"id":"bg","fromSeq":0}"#);
    let frames = frames_until_exit(&mut c2, "bg");
    assert_eq!(stdout_of(&frames), b"later\n");
    assert_eq!(exit_code(&frames), 0);
    assert!(c2.reply_for(2).contains(r#""found":true"#));
}

#[test]
fn child_environment_is_merged_and_never_carries_the_token() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    c.call(
        1,
        "process.spawn",
        r#"{"id":"env","command":"env","env":{"REMORA_TEST_VAR":"a=b c","HOME":"/override"}}"#,
    );
    let frames = frames_until_exit(&mut c, "env");
    let env = String::from_utf8(stdout_of(&frames)).unwrap();
    let lines: Vec<&str> = env.lines().collect();
    assert!(lines.contains(&"REMORA_TEST_VAR=a=b c"), "{env}");
    assert!(lines.contains(&"HOME=/override"), "{env}");
    assert_eq!(lines.iter().filter(|l| l.starts_with("HOME=")).count(), 1);
    assert!(lines.iter().any(|l| l.starts_with("PATH=")), "{env}");
    assert!(
        !env.contains(&d.token),
        "the auth token leaked into a child's environment"
    );
    // Set by the lifecycle code in the daemon's own environment; when it is
    // there, children inherit it verbatim.
    if let Some(marker) = lines.iter().find(|l| l.starts_with("CLAUDE_SSH_DAEMON_CHILD=")) {
        assert_eq!(*marker, "CLAUDE_SSH_DAEMON_CHILD=1");
    }
}

#[test]
fn shutdown_kills_every_child_tree() {
    let mut d = TestDaemon::start();
    let mut c = d.connect();
    spawn(&mut c, 1, "a", "sh", &["-c", "sleep 1000 & echo $!; wait"]);
    let grandchild: i32 = String::from_utf8_lossy(&next_frame(&mut c, "a").data)
        .trim()
        .parse()
        .unwrap();
    let reply = c.call(
        2,
        "process.spawn",
        r#"{"id":"b","command":"sleep","args":["1000"],"wantPid":true}"#,
    );
    let v: Value = serde_json::from_str(&reply).unwrap();
    let child = v["result"]["pid"].as_i64().unwrap() as i32;
    d.stop();
    assert!(wait_until(Duration::from_secs(5), || common::pid_gone(grandchild)
        && common::pid_gone(child)));
    assert!(d.log().contains("[process.Manager] Spawned process a"), "{}", d.log());
}

/// A process whose child has exited is not
/// running while its exit frame still waits for the pipes to drain (a
/// grandchild holds stdout): reattach answers `running:false` and fresh
/// stdin bytes are refused, before any exit frame exists.
#[test]
fn an_exited_child_is_not_running_while_its_output_drains() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    spawn(&mut c, 1, "drain", "sh", &["-c", "sleep 1000 & echo $!"]);
    let first = next_frame(&mut c, "drain");
    let grandchild: i32 = String::from_utf8_lossy(&first.data)
        .trim()
        .parse()
        .expect("grandchild pid");
    // Held while known alive: it holds the pipe, sleeping 1000 s.
    let grandchild = common::proven::Proc::open(grandchild).expect("a hold on the grandchild");
    let mut rid = 10;
    let not_running = wait_until(Duration::from_secs(10), || {
        rid += 1;
        c.call(rid, "process.reattach", r#"{"id":"drain","fromSeq":1}"#)
            == ok(
                rid,
                r#"{"found":true,"running":false,"firstSeq":1,"lastSeq":1,"stdinApplied":0}"#,
            )
    });
    assert!(not_running, "reattach inside the drain reports running:false");
    assert_eq!(
        c.call(2, "process.stdin", r#"{"id":"drain","data":"eA==","offset":0}"#),
        err(2, -32602, "Process not running")
    );
    assert!(grandchild.signal(libc::SIGKILL));
    let frames = frames_until_exit(&mut c, "drain");
    assert_eq!(frames.last().unwrap().seq, 2, "the exit frame follows the drain");
    assert_eq!(exit_code(&frames), 0);
}

/// Found by `harness stress` (floods): a ping used to need one of the
/// connection's 1024 request slots like any other request, so behind a
/// pipeline of slow requests it waited for one of them to finish. Pings
/// are answered by the connection's reader itself: with every slot held
/// by a `killAndWait` that cannot finish yet, a ping is still answered.
#[test]
fn a_ping_is_answered_while_every_request_slot_is_held() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    spawn(
        &mut c,
        1,
        "held",
        "sh",
        &["-c", "trap '' TERM; echo $$; while :; do sleep 0.05; done"],
    );
    let pid: i32 = String::from_utf8_lossy(&next_frame(&mut c, "held").data)
        .trim()
        .parse()
        .expect("pid");
    // Held while known alive: it just printed, and loops until killed.
    let held = common::proven::Proc::open(pid).expect("a hold on the child");
    let slots = 1024;
    let mut batch = String::new();
    for rid in 0..slots {
        batch.push_str(&common::request_line(
            &(1000 + rid).to_string(),
            "process.killAndWait",
            Some(r#"{"id":"held","timeoutMs":60000}"#),
            &d.token,
        ));
    }
    batch.push_str(&common::request_line("2", "server.ping", Some("{}"), &d.token));
    c.send_raw(batch.as_bytes());
    let first_reply = loop {
        let line = next_line(&mut c);
        if line.starts_with("{\"jsonrpc\"") {
            break line;
        }
    };
    assert_eq!(
        first_reply,
        ok(2, r#"{"pong":true}"#),
        "the ping comes before any killAndWait"
    );
    // It ignores SIGTERM.
    assert!(held.signal(libc::SIGKILL));
    for rid in 0..slots {
        let reply = c.reply_for(1000 + rid);
        assert!(reply.contains(r#""found":true"#), "{reply}");
    }
}

/// Audit D15: an `env` key holding `=` is read the way the reference's Go
/// reads it. `{"A=B":"1"}` is the entry `A=B=1`, that is `A` set to `B=1`,
/// and it replaces the daemon's own `A` (Go's `dedupEnv`, the last entry
/// of a name wins). remora used to pass it as a variable of its own beside
/// the daemon's, so the child got two `A` entries.
#[test]
fn an_env_key_holding_an_equals_sign_sets_the_name_before_it() {
    let d = TestDaemon::start_with(&[], &[("REMORA_T_D15", "daemon's")]);
    let mut c = d.connect();
    let reply = c.call(
        1,
        "process.spawn",
        r#"{"id":"e","command":"env","args":[],"env":{"REMORA_T_D15=B":"1","PATH=/usr/bin:/bin":"x"}}"#,
    );
    assert_eq!(reply, r#"{"jsonrpc":"2.0","id":1,"result":{"success":true}}"#);
    let out = String::from_utf8(stdout_of(&frames_until_exit(&mut c, "e"))).unwrap();
    let named = |name: &str| -> Vec<&str> { out.lines().filter(|l| l.starts_with(name)).collect() };
    assert_eq!(named("REMORA_T_D15="), ["REMORA_T_D15=B=1"], "{out}");
    // The lookup of `env` used the same PATH the child got, the one entry.
    assert_eq!(named("PATH="), ["PATH=/usr/bin:/bin=x"], "{out}");
}
