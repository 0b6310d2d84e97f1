//! Unit tests of the supervisor with real children: shutdown, exit
//! frames (killedBy), and the exit-frame/pipe ordering.

use super::managed::{lock, ManagedProcess, STDIN_CHUNK_MIN_CHARGE, STDIN_QUEUE_CAP};
use super::*;
use crate::base::shutdown::Shutdown;
use crate::replay::store;
use crate::sys::process as sys;
use std::sync::Arc;
use std::time::Duration;

/// A registry with an in-memory replay store, as the daemon would make it.
fn manager(shutdown: &Shutdown) -> ProcessManager {
    ProcessManager::new(Supervision {
        replay: store::ReplayStore::in_memory(),
        metrics: Arc::default(),
        shutdown: shutdown.subscribe(),
        retention: retention::Retention::from_minutes(15),
        kill_grace_cap: super::registry::MAX_KILL_GRACE,
        activity: Default::default(),
    })
}

fn spec<'a>(id: &'a str, command: &'a str, args: &'a [String]) -> SpawnSpec<'a> {
    SpawnSpec {
        id,
        command,
        args,
        cwd: "",
        env: &[],
        // No login shell run from unit tests.
        no_agent_socket: true,
        launcher: None,
        strip_env: &[],
    }
}

/// A child that sleeps for good and never reads its stdin.
async fn sleeper(processes: &ProcessManager, id: &str) -> Arc<ManagedProcess> {
    let args = ["1000".to_string()];
    processes.spawn(&spec(id, "sleep", &args)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_keeps_or_kills_children() {
    let stop = Shutdown::new();
    let processes = manager(&stop);
    let p = sleeper(&processes, "k").await;
    processes.shutdown(true).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !p.exited() && sys::pid_exists(p.pid),
        "-keep-children must leave it running"
    );
    processes.shutdown(false).await;
    assert!(p.exited());
    assert_eq!(*p.exit.borrow(), Some(-1));
    assert!(!sys::pid_exists(p.pid), "killed and reaped");
    // On the wire this frame races the connections' teardown; the log
    // holds it either way.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !p.log.has_exited() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut out = Vec::new();
    p.log.encode_after(0, u64::MAX, &mut out, usize::MAX);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"type\":\"stream\",\"processId\":\"k\",\"stream\":\"exit\",\"seq\":1,\"exitCode\":-1,\"signal\":\"SIGKILL\",\"killedBy\":\"shutdown\"}\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_does_not_claim_a_process_that_already_exited() {
    let stop = Shutdown::new();
    let processes = manager(&stop);
    let args = ["-c".to_string(), "exit 4".to_string()];
    let p = processes.spawn(&spec("done", "sh", &args)).await.unwrap();
    assert!(p.wait_exit(Duration::from_secs(5)).await);
    processes.shutdown(false).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !p.log.has_exited() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut out = Vec::new();
    p.log.encode_after(0, u64::MAX, &mut out, usize::MAX);
    assert!(String::from_utf8(out).unwrap().ends_with("\"exitCode\":4}\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_frame_waits_for_a_grandchild_holding_the_pipe() {
    let stop = Shutdown::new();
    let processes = manager(&stop);
    // The grandchild holds the pipe until the test opens the FIFO.
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let made = std::process::Command::new("mkfifo").arg(&gate).status().unwrap();
    assert!(made.success());
    let script = format!("(read x < '{}'; echo late) &", gate.display());
    let args = ["-c".to_string(), script];
    let p = processes.spawn(&spec("g", "sh", &args)).await.unwrap();
    assert!(p.wait_exit(Duration::from_secs(5)).await);
    // The leader is gone (a zombie pinning the pgid) but the pipe is
    // still open: no exit frame yet.
    assert_eq!(p.log.last_seq(), 0);
    std::fs::write(&gate, b"go\n").unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !p.log.has_exited() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut out = Vec::new();
    p.log.encode_after(0, u64::MAX, &mut out, usize::MAX);
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        text,
        concat!(
            "{\"type\":\"stream\",\"processId\":\"g\",\"stream\":\"stdout\",\"seq\":1,\"data\":\"bGF0ZQo=\"}\n",
            "{\"type\":\"stream\",\"processId\":\"g\",\"stream\":\"exit\",\"seq\":2,\"exitCode\":0}\n",
        )
    );
    // Reaped after the exit frame.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !*lock(&p.reaped) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(*lock(&p.reaped));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_byte_stdin_chunks_are_charged_their_allocation() {
    // A child that never reads: its pipe takes up to 64 KiB of one-byte
    // writes, then the queue fills. Charged by length alone, 16 Mi
    // one-byte chunks (about 1 GiB held) would be accepted first.
    let stop = Shutdown::new();
    let processes = manager(&stop);
    let p = sleeper(&processes, "slow").await;
    let per_queue = STDIN_QUEUE_CAP / STDIN_CHUNK_MIN_CHARGE;
    let mut accepted = 0usize;
    let refused = loop {
        match p.write_stdin(None, vec![b'x']).0 {
            StdinResult::Accepted { .. } => accepted += 1,
            other => break other,
        }
        assert!(
            accepted <= 4 * per_queue,
            "still accepting after {accepted} one-byte chunks"
        );
    };
    assert_eq!(refused, StdinResult::QueueFull);
    // The queue's share is exactly what the minimum charge allows; the
    // pipe's share (what the writer task moved on) is at most its buffer.
    assert!(accepted >= per_queue, "{accepted}");
    assert!(accepted <= per_queue + (1 << 20), "{accepted}");
    processes.shutdown(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_stdin_chunks_fill_the_queue_to_the_byte() {
    // Chunks of 256 bytes or more are charged exactly their length: a
    // child that never reads takes 16 MiB of queued chunks before a write
    // is refused.
    let stop = Shutdown::new();
    let processes = manager(&stop);
    let p = sleeper(&processes, "slow").await;
    let chunk = 64 << 10;
    let mut accepted = 0usize;
    loop {
        match p.write_stdin(None, vec![b'y'; chunk]).0 {
            StdinResult::Accepted { .. } => accepted += chunk,
            StdinResult::QueueFull => break,
            other => panic!("{other:?}"),
        }
        assert!(accepted <= 2 * STDIN_QUEUE_CAP, "{accepted}");
    }
    assert!(accepted >= STDIN_QUEUE_CAP, "{accepted}");
    processes.shutdown(false).await;
}

/// An idle child holds no read buffer: a pump takes one from the frame
/// pool only while its pipe has something to read, and gives it back once
/// the pipe is empty (a pump that kept its buffer for the child's life
/// cost 64 KiB a process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_child_holds_no_read_buffer() {
    let stop = Shutdown::new();
    let processes = manager(&stop);
    let args = ["-c".to_string(), "echo hi; exec sleep 600".to_string()];
    let p = processes.spawn(&spec("idle", "sh", &args)).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while (p.log.last_seq() == 0 || processes.deps.replay.pooled_buffers() == 0)
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(p.log.last_seq(), 1, "the line was read");
    // The one buffer the read took (a 3-byte frame is copied out of it)
    // is back in the pool; the silent stderr pump never took one.
    assert_eq!(processes.deps.replay.pooled_buffers(), 1);
    assert!(!p.exited());
    processes.shutdown(false).await;
}
