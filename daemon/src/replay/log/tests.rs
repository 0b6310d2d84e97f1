//! Unit tests of the replay log: encoding, cursors, the disk writer,
//! budget eviction and the RAM-ring fallback.

use super::*;
use crate::replay::ready::{ReadyList, ReadyWake};
use crate::replay::store::RING_BYTES;

fn encode_all(log: &ReplayLog, after: u64) -> String {
    let mut out = Vec::new();
    log.encode_after(after, u64::MAX, &mut out, usize::MAX);
    String::from_utf8(out).unwrap()
}

#[test]
fn frames_are_encoded_byte_exact() {
    let log = ReplayLog::new("p<1>", &ReplayStore::in_memory());
    assert_eq!(log.push_output(Stream::Stdout, b"hi\n"), 1);
    assert_eq!(log.push_output(Stream::Stderr, b"\xff"), 2);
    let killed = ExitFrame {
        code: -1,
        signal: Some("SIGTERM"),
        killed_by: Some("client"),
    };
    assert_eq!(log.push_exit(killed), 3);
    assert_eq!(
        encode_all(&log, 0),
        concat!(
            "{\"type\":\"stream\",\"processId\":\"p\\u003c1\\u003e\",\"stream\":\"stdout\",\"seq\":1,\"data\":\"aGkK\"}\n",
            "{\"type\":\"stream\",\"processId\":\"p\\u003c1\\u003e\",\"stream\":\"stderr\",\"seq\":2,\"data\":\"/w==\"}\n",
            "{\"type\":\"stream\",\"processId\":\"p\\u003c1\\u003e\",\"stream\":\"exit\",\"seq\":3,\"exitCode\":-1,\"signal\":\"SIGTERM\",\"killedBy\":\"client\"}\n",
        )
    );
    assert_eq!(encode_all(&log, 2).lines().count(), 1);
    assert_eq!(encode_all(&log, 3), "");
    assert_eq!((log.first_seq(), log.last_seq(), log.raw_bytes()), (1, 3, 4));
    assert!(log.has_exited());
}

#[test]
fn exit_frame_fields_are_each_omitted_when_absent() {
    let exit_line = |exit| {
        let log = ReplayLog::new("p", &ReplayStore::in_memory());
        log.push_exit(exit);
        encode_all(&log, 0)
    };
    let prefix = "{\"type\":\"stream\",\"processId\":\"p\",\"stream\":\"exit\",\"seq\":1,";
    assert_eq!(exit_line(ExitFrame::code(3)), format!("{prefix}\"exitCode\":3}}\n"));
    let signal_only = ExitFrame {
        code: -1,
        signal: Some("SIGKILL"),
        killed_by: None,
    };
    assert_eq!(
        exit_line(signal_only),
        format!("{prefix}\"exitCode\":-1,\"signal\":\"SIGKILL\"}}\n")
    );
    let by_only = ExitFrame {
        code: 0,
        signal: None,
        killed_by: Some("shutdown"),
    };
    assert_eq!(
        exit_line(by_only),
        format!("{prefix}\"exitCode\":0,\"killedBy\":\"shutdown\"}}\n")
    );
}

#[test]
fn cursor_respects_upto_and_budget() {
    let log = ReplayLog::new("p", &ReplayStore::in_memory());
    for _ in 0..10 {
        log.push_output(Stream::Stdout, &[b'x'; 100]);
    }
    let mut out = Vec::new();
    assert_eq!(log.encode_after(0, 4, &mut out, usize::MAX), 4);
    assert_eq!(log.encode_after(4, u64::MAX, &mut out, 250), 7);
    // A budget of zero still makes progress by one frame.
    assert_eq!(log.encode_after(7, u64::MAX, &mut out, 0), 8);
    assert_eq!(log.encode_after(8, u64::MAX, &mut out, usize::MAX), 10);
    assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 10);
}

#[test]
fn detach_stops_subscriptions() {
    let log = ReplayLog::new("p", &ReplayStore::in_memory());
    let ready = ReadyList::new();
    let wake = ReadyWake::new(&ready, log.key());
    assert!(log.subscribe(7, wake.clone()));
    assert!(log.subscribe(7, wake.clone()));
    assert_eq!(log.follower_count(), 1);
    log.detach_all();
    assert_eq!(log.follower_count(), 0);
    let mut woken = Vec::new();
    ready.drain_into(&mut woken);
    assert_eq!(
        woken,
        [log.key()],
        "a detach puts the log on its followers' ready lists"
    );
    assert!(!log.subscribe(8, wake));
    assert!(log.is_detached());
}

fn spilling_store(dir: &std::path::Path, segment_bytes: u64, budget_bytes: u64) -> Arc<ReplayStore> {
    ReplayStore::open(
        crate::replay::store::StoreConfig {
            dir: Some(dir.to_path_buf()),
            budget_bytes,
            segment_bytes,
            hot_tail_bytes: 0,
            global_hot_bytes: u64::MAX,
        },
        Arc::default(),
    )
}

/// Waits until the disk writer has caught up (a loaded blocking pool can
/// take a while; the deadline only costs time when the writer is stuck).
async fn settle(log: &ReplayLog) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let settled = {
            let state = log.lock();
            !state.writer_busy && state.written == state.last_seq
        };
        if settled {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    panic!("disk writer did not settle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spilled_frames_read_back_from_every_region() {
    let dir = tempfile::tempdir().unwrap();
    let store = spilling_store(dir.path(), 4096, u64::MAX);
    let log = ReplayLog::new("s", &store);
    assert!(log.spills());
    let mut want = Vec::new();
    for i in 0..400u32 {
        let bytes: Vec<u8> = (0..(i % 97 + 1)).map(|j| (i * 7 + j) as u8).collect();
        log.push_output(if i % 3 == 0 { Stream::Stderr } else { Stream::Stdout }, &bytes);
        want.push(bytes);
        log.wait_writable().await;
    }
    log.push_exit(ExitFrame::code(0));
    settle(&log).await;
    // Exited: only the exit frame stays in RAM.
    assert_eq!(log.lock().hot.len(), 1);
    assert!(log.footprint().1 > 0);
    let mut reference = Vec::new();
    {
        let mem = ReplayLog::new("s", &ReplayStore::in_memory());
        for (i, bytes) in want.iter().enumerate() {
            mem.push_output(if i % 3 == 0 { Stream::Stderr } else { Stream::Stdout }, bytes);
        }
        mem.push_exit(ExitFrame::code(0));
        mem.encode_after(0, u64::MAX, &mut reference, usize::MAX);
    }
    for budget in [0, 1, 100, 5000, usize::MAX] {
        let mut out = Vec::new();
        let mut after = 0;
        while after < log.last_seq() {
            after = log.encode_after(after, u64::MAX, &mut out, budget);
        }
        assert!(out == reference, "budget {budget}");
    }
    // From the middle, and capped by upto.
    let mut out = Vec::new();
    assert_eq!(log.encode_after(150, 160, &mut out, usize::MAX), 160);
    assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 10);
    drop(log);
    // The unlinks run on a blocking thread.
    let own = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
    let segments_left = || {
        std::fs::read_dir(&own)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name() != "node")
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while (segments_left() > 0 || store.metrics.disk_bytes.load(Ordering::Relaxed) > 0)
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    assert_eq!(segments_left(), 0, "a released log deletes its segments");
    assert_eq!(store.metrics.disk_bytes.load(Ordering::Relaxed), 0);
    assert_eq!(store.metrics.ram_bytes.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_evicts_idle_exited_logs_first_then_oldest_live_segments() {
    let dir = tempfile::tempdir().unwrap();
    let store = spilling_store(dir.path(), 1000, 6000);
    let chunk = [b'x'; 495];
    let old = ReplayLog::new("old", &store);
    let followed = ReplayLog::new("followed", &store);
    followed.subscribe(1, ReadyWake::new(&ReadyList::new(), followed.key()));
    let live = ReplayLog::new("live", &store);
    for log in [&old, &followed] {
        for _ in 0..4 {
            log.push_output(Stream::Stdout, &chunk);
        }
        log.push_exit(ExitFrame::code(0));
        settle(log).await;
    }
    assert_eq!(store.metrics.evictions.load(Ordering::Relaxed), 0);
    // The live log pushes the total over 6000 bytes.
    for _ in 0..6 {
        live.push_output(Stream::Stdout, &chunk);
        settle(&live).await;
    }
    assert_eq!(old.footprint().1, 0, "the idle exited log goes first");
    assert_eq!(old.first_seq(), 5, "only its exit frame is left");
    for _ in 0..10 {
        live.push_output(Stream::Stdout, &chunk);
        settle(&live).await;
    }
    assert!(store.metrics.disk_bytes.load(Ordering::Relaxed) <= 6000);
    assert!(live.first_seq() > 1, "then the oldest live segments");
    assert_eq!(followed.first_seq(), 1, "a followed exited log goes last");
    // A cursor from seq 0 resumes at the oldest kept frame.
    let mut out = Vec::new();
    let first = live.first_seq();
    let last = live.encode_after(0, u64::MAX, &mut out, usize::MAX);
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains(&format!("\"seq\":{first},")), "{text}");
    assert!(last >= first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unwritable_directory_falls_back_to_a_ram_ring() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"").unwrap();
    let store = spilling_store(&blocker.join("sub"), 4096, u64::MAX);
    assert_eq!(store.metrics.fallbacks.load(Ordering::Relaxed), 1);
    let log = ReplayLog::new("r", &store);
    assert!(!log.spills());
    for _ in 0..600 {
        log.push_output(Stream::Stdout, &[b'y'; 32 * 1024]);
        log.wait_writable().await;
    }
    let (ram, disk) = log.footprint();
    assert!(ram <= RING_BYTES + 64 * 1024, "{ram}");
    assert_eq!(disk, 0);
    assert!(log.first_seq() > 1, "the ring dropped the oldest frames");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_tails_together_stay_under_the_global_bound() {
    let dir = tempfile::tempdir().unwrap();
    let global = 64 * 1024;
    let store = ReplayStore::open(
        crate::replay::store::StoreConfig {
            dir: Some(dir.path().to_path_buf()),
            budget_bytes: u64::MAX,
            segment_bytes: 1 << 20,
            hot_tail_bytes: 32 * 1024,
            global_hot_bytes: global,
        },
        Arc::default(),
    );
    // Eight running logs, each alone within its own tail bound, together
    // four times over the global one.
    let logs: Vec<_> = (0..8).map(|i| ReplayLog::new(&format!("p{i}"), &store)).collect();
    let chunk: Vec<u8> = (0..1000u32).map(|j| j as u8).collect();
    for round in 0..30 {
        for log in &logs {
            log.push_output(Stream::Stdout, &chunk);
            settle(log).await;
        }
        let tails = store.tails.load(Ordering::Relaxed);
        let hot: u64 = logs.iter().map(|l| l.footprint().0).sum();
        assert!(
            tails <= global + 2 * 1048,
            "round {round}: tails {tails} over the global bound {global}"
        );
        assert_eq!(tails, hot, "round {round}: the counter matches the logs");
    }
    // Trimmed tails lose nothing: every log replays whole from disk.
    for log in &logs {
        let mut out = Vec::new();
        let mut after = 0;
        while after < log.last_seq() {
            after = log.encode_after(after, u64::MAX, &mut out, usize::MAX);
        }
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 30);
    }
    drop(logs);
    assert_eq!(store.tails.load(Ordering::Relaxed), 0);
}

mod interleavings {
    use super::*;
    use proptest::prelude::*;

    fn stream_of(i: usize) -> Stream {
        if i.is_multiple_of(5) {
            Stream::Stderr
        } else {
            Stream::Stdout
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// The whole log, end to end (disk writer, hot-tail and global
        /// trims, RAM and disk reads): whatever the segment size, tail
        /// bounds and the points where a follower reads, the follower's
        /// frames and a replay from seq 0 are byte for byte the frames of
        /// an all-RAM log fed the same writes.
        #[test]
        fn a_follower_and_a_replay_match_an_all_ram_log(
            writes in proptest::collection::vec((0usize..3000, any::<bool>(), 0usize..5000), 1..60),
            segment_bytes in 64u64..20_000,
            hot_tail_bytes in 0u64..8000,
            global_hot_bytes in 0u64..16_000,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let store = ReplayStore::open(
                crate::replay::store::StoreConfig {
                    dir: Some(dir.path().to_path_buf()),
                    budget_bytes: u64::MAX,
                    segment_bytes,
                    hot_tail_bytes,
                    global_hot_bytes,
                },
                Arc::default(),
            );
            // Without a runtime the disk writer runs inline: deterministic.
            let log = ReplayLog::new("p", &store);
            let other = ReplayLog::new("q", &store);
            let mem = ReplayLog::new("p", &ReplayStore::in_memory());
            let (mut followed, mut after) = (Vec::new(), 0u64);
            for (i, (len, read_now, budget)) in writes.iter().enumerate() {
                let bytes: Vec<u8> = (0..*len).map(|j| (i * 31 + j) as u8).collect();
                log.push_output(stream_of(i), &bytes);
                mem.push_output(stream_of(i), &bytes);
                // Another log's writes move the global tail bound.
                other.push_output(Stream::Stdout, &bytes);
                // Past the global bound every tail is trimmed but for its
                // last frame.
                prop_assert!(store.tails.load(Ordering::Relaxed) <= global_hot_bytes.max(2 * hot_tail_bytes) + 2 * 3048);
                if *read_now {
                    after = log.encode_after(after, u64::MAX, &mut followed, *budget);
                }
            }
            log.push_exit(ExitFrame::code(7));
            mem.push_exit(ExitFrame::code(7));
            while after < log.last_seq() {
                after = log.encode_after(after, u64::MAX, &mut followed, 1000);
            }
            let mut reference = Vec::new();
            mem.encode_after(0, u64::MAX, &mut reference, usize::MAX);
            prop_assert!(followed == reference, "the follower's frames differ");
            let mut replay = Vec::new();
            let mut from = 0;
            while from < log.last_seq() {
                from = log.encode_after(from, u64::MAX, &mut replay, 777);
            }
            prop_assert!(replay == reference, "the replay from seq 0 differs");
        }
    }
}

#[test]
fn large_reads_reuse_pooled_buffers_charged_whole() {
    let store = ReplayStore::in_memory();
    let log = ReplayLog::new("p", &store);
    // A read of 20 KiB takes a 32 KiB pooled buffer and is charged for it;
    // a small one is charged its own bytes.
    log.push_output(Stream::Stdout, &[7u8; 20 * 1024]);
    assert_eq!(log.footprint().0, 32 * 1024 + 48);
    log.push_output(Stream::Stdout, b"tiny");
    assert_eq!(log.footprint().0, 32 * 1024 + 48 + 4 + 48);
    // Past the RAM ring's bound the oldest frames go, and their buffers
    // back to the pool (at most its cap), not to the allocator.
    let frames = (RING_BYTES / (32 * 1024)) as usize + 100;
    for i in 0..frames {
        log.push_output(Stream::Stderr, &vec![i as u8; 16 * 1024 + i % 1000]);
    }
    assert!(log.footprint().0 <= RING_BYTES);
    let pooled = store.pooled_buffers();
    assert!(pooled > 0 && pooled <= 32, "{pooled} buffers pooled");
    // Reused buffers carry the new bytes only.
    let mut out = Vec::new();
    log.encode_after(log.last_seq() - 1, u64::MAX, &mut out, usize::MAX);
    let last = frames - 1;
    let want = vec![last as u8; 16 * 1024 + last % 1000];
    let line = String::from_utf8(out).unwrap();
    use base64::Engine;
    let data = line.split("\"data\":\"").nth(1).unwrap().trim_end_matches("\"}\n");
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(data).unwrap(), want);
}

#[test]
fn a_pipe_read_into_a_pool_buffer_is_kept_without_a_copy() {
    let store = ReplayStore::in_memory();
    let log = ReplayLog::new("p", &store);
    // A read of 20 KiB: the frame is the very buffer the read went into,
    // charged whole, and the reader needs a new one.
    let mut buf = log.read_buffer();
    let at = buf.as_ptr();
    Arc::get_mut(&mut buf).unwrap()[..20 * 1024].fill(9);
    assert!(log.push_read(Stream::Stdout, buf, 20 * 1024).is_none());
    assert_eq!(log.footprint().0, 32 * 1024 + 48);
    {
        let state = log.lock();
        let Some(Frame::Data(_, payload)) = state.hot.back() else {
            panic!("no data frame")
        };
        assert_eq!(payload.as_ptr(), at);
        assert_eq!(&payload[..], &[9u8; 20 * 1024][..]);
    }
    // A short read is copied into a buffer of its size, and the pool
    // buffer comes back for the next read.
    let mut buf = log.read_buffer();
    let at = buf.as_ptr();
    Arc::get_mut(&mut buf).unwrap()[..5].copy_from_slice(b"hello");
    let back = log.push_read(Stream::Stderr, buf, 5).expect("the buffer comes back");
    assert_eq!(back.as_ptr(), at);
    assert_eq!(log.footprint().0, 32 * 1024 + 48 + 5 + 48);
    // An empty read is no frame.
    let back = log.push_read(Stream::Stderr, back, 0).expect("the buffer comes back");
    assert_eq!(back.as_ptr(), at);
    assert_eq!(log.last_seq(), 2);
    assert!(encode_all(&log, 1).contains(r#""stream":"stderr","seq":2,"data":"aGVsbG8="}"#));
}
