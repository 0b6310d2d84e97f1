//! Exited processes stay answerable while their log is kept
//! (`-exited-retention-min`, `process/retention.rs`), with daemon time
//! shortened by `REMORA_TEST_RETENTION_MINUTE_MS`: one minute lasts 40 ms,
//! so the reference's 15 minutes are 600 ms.

use crate::common::frames::reattach;
use crate::common::{wait_until, TestDaemon};
use serde_json::Value;
use std::time::{Duration, Instant};

const MINUTE_MS: u64 = 40;

fn minutes(n: u64) -> Duration {
    Duration::from_millis(n * MINUTE_MS)
}

fn daemon(replay: &std::path::Path, retention_min: &str, budget_mb: &str) -> TestDaemon {
    TestDaemon::start_with(
        &[
            "-exited-retention-min",
            retention_min,
            "-replay-dir",
            replay.to_str().unwrap(),
            "-replay-budget-mb",
            budget_mb,
        ],
        &[("REMORA_TEST_RETENTION_MINUTE_MS", &MINUTE_MS.to_string())],
    )
}

/// Spawns `sh -c script` as `id` and closes the connection at once: the
/// process goes on, and ends, with no client connected.
fn spawn_and_leave(d: &TestDaemon, id: &str, script: &str) {
    let params = serde_json::json!({"id": id, "command": "sh", "args": ["-c", script]}).to_string();
    let reply = d.call("process.spawn", &params);
    assert!(reply.contains(r#""success":true"#), "{reply}");
}

/// What a reattach says, replaying nothing.
fn status(d: &TestDaemon, id: &str) -> Value {
    reattach(d, id, u64::from(u32::MAX)).0
}

/// Waits until `id` has exited, without following it; returns when that
/// was seen (no earlier than the exit).
fn wait_exited(d: &TestDaemon, id: &str) -> Instant {
    assert!(wait_until(Duration::from_secs(10), || status(d, id)["running"] == false));
    Instant::now()
}

/// Waits until a reattach of `id` finds nothing.
fn wait_dropped(d: &TestDaemon, id: &str) {
    assert!(
        wait_until(Duration::from_secs(10), || status(d, id)["found"] == false),
        "{}",
        d.log()
    );
}

fn sleep_until(at: Instant) {
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
}

#[test]
fn an_exited_process_is_answered_past_the_reference_15_minutes_while_its_log_is_kept() {
    let replay = tempfile::tempdir().unwrap();
    let d = daemon(replay.path(), "60", "2048");
    // The exit comes after this, so a drop is never earlier than this + 60 min.
    let spawned = Instant::now();
    spawn_and_leave(&d, "late", "sleep 0.2; echo bye");
    let exited = wait_exited(&d, "late");
    // 25 minutes of daemon time with no client: the reference would have
    // forgotten it at 15.
    sleep_until(exited + minutes(25));
    let (result, frames) = reattach(&d, "late", 0);
    assert_eq!(
        result,
        serde_json::json!({"found":true,"running":false,"firstSeq":1,"lastSeq":2,"stdinApplied":0})
    );
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(frames[0].data, b"bye\n");
    assert_eq!((frames[1].stream.as_str(), frames[1].exit_code), ("exit", Some(0)));
    // The setting still ends it: at 60 minutes it is dropped.
    wait_dropped(&d, "late");
    assert!(
        spawned.elapsed() >= minutes(60),
        "dropped after {:?}",
        spawned.elapsed()
    );
    assert!(
        d.log()
            .contains("[process.Manager] Dropped 1 exited process(es) after 2 s of retention"),
        "{}",
        d.log()
    );
}

#[test]
fn with_the_setting_at_15_minutes_it_is_the_reference_retention() {
    let replay = tempfile::tempdir().unwrap();
    let d = daemon(replay.path(), "15", "2048");
    let spawned = Instant::now();
    spawn_and_leave(&d, "brief", "echo bye");
    wait_dropped(&d, "brief");
    assert!(
        spawned.elapsed() >= minutes(15),
        "dropped after {:?}",
        spawned.elapsed()
    );
    let (result, frames) = reattach(&d, "brief", 0);
    assert_eq!(
        result,
        serde_json::json!({"found":false,"running":false,"firstSeq":0,"lastSeq":0,"stdinApplied":0})
    );
    assert!(frames.is_empty());
}

#[test]
fn past_15_minutes_a_process_whose_log_was_evicted_answers_found_false() {
    let replay = tempfile::tempdir().unwrap();
    // 1 MiB of disk, small segments: the 3 MB process cannot keep its log.
    let d = TestDaemon::start_with(
        &[
            "-exited-retention-min",
            "600",
            "-replay-dir",
            replay.path().to_str().unwrap(),
            "-replay-budget-mb",
            "1",
        ],
        &[
            ("REMORA_TEST_RETENTION_MINUTE_MS", &MINUTE_MS.to_string()),
            ("REMORA_TEST_SEGMENT_BYTES", "65536"),
        ],
    );
    let spawned = Instant::now();
    spawn_and_leave(&d, "big", "head -c 3000000 /dev/zero");
    let big_exited = wait_exited(&d, "big");
    assert!(
        wait_until(Duration::from_secs(10), || d.log().contains("of the replay log of")),
        "{}",
        d.log()
    );
    spawn_and_leave(&d, "small", "echo kept");
    wait_exited(&d, "small");
    // Within the reference's 15 minutes the evicted one still answers
    // with what is left (as the reference would, for its whole time).
    let early = status(&d, "big");
    assert!(early["found"] == true || spawned.elapsed() >= minutes(15), "{early}");
    wait_dropped(&d, "big");
    assert!(
        spawned.elapsed() >= minutes(15),
        "dropped after {:?}",
        spawned.elapsed()
    );
    // The whole one is still answered, well past 15 minutes.
    sleep_until(big_exited + minutes(30));
    let (result, frames) = reattach(&d, "small", 0);
    assert_eq!(result["found"], true, "{result}");
    assert_eq!(frames[0].data, b"kept\n");
    assert!(
        d.log().contains(
            "[process.Manager] Dropped 1 exited process(es) after 0 s: part of their replay log was no longer kept"
        ),
        "{}",
        d.log()
    );
}
