//! The replay disk budget counts the segments still being written: many
//! running processes, each with one open segment, cannot push the replay
//! directory past `-replay-budget-mb` (plus one write batch).

use crate::common::{wait_until, TestDaemon};
use std::time::Duration;

fn dir_bytes(dir: &std::path::Path) -> u64 {
    walk(dir)
}

fn walk(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => walk(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn open_segments_of_running_processes_count_against_the_budget() {
    let replay = tempfile::tempdir().unwrap();
    // 1 MiB budget, default 8 MiB segments: six running writers of 3 MiB
    // each never fill a segment, so before this rule nothing could be
    // evicted and the directory held 18 MiB.
    let d = TestDaemon::start_with(
        &["-replay-dir", replay.path().to_str().unwrap(), "-replay-budget-mb", "1"],
        &[],
    );
    let marks = tempfile::tempdir().unwrap();
    let mut c = d.connect();
    for i in 0..6 {
        let mark = marks.path().join(format!("w{i}"));
        let reply = c.call(
            i,
            "process.spawn",
            &format!(
                r#"{{"id":"w{i}","command":"sh","args":["-c","head -c 3000000 /dev/zero; touch {}; sleep 60"]}}"#,
                mark.display()
            ),
        );
        assert!(reply.contains(r#""result":"#), "{reply}");
    }
    // Every writer has written everything (the daemon reads its pipes
    // whether or not this client reads the stream).
    assert!(wait_until(Duration::from_secs(30), || std::fs::read_dir(marks.path())
        .map(|e| e.count() == 6)
        .unwrap_or(false)));
    let limit = (1u64 << 20) + (1 << 20) + 64 * 1024;
    assert!(
        wait_until(Duration::from_secs(20), || dir_bytes(replay.path()) <= limit),
        "replay dir holds {} bytes, budget 1 MiB (+ one batch); log: {}",
        dir_bytes(replay.path()),
        d.log()
    );
    assert!(d.log().contains("disk budget exceeded"), "{}", d.log());
    for i in 0..6 {
        c.call(100 + i, "process.kill", &format!(r#"{{"id":"w{i}","signal":"KILL"}}"#));
    }
}
