//! What a local process without the token can take from the daemon by
//! connecting: descriptors, time, memory and log lines are all bounded
//! (`admission.rs`), and the owner keeps being served.

use crate::common;
use crate::common::{wait_until, Client, TestDaemon};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

fn spawn_true(c: &mut Client, n: usize) {
    for i in 0..n {
        let reply = c.call(
            format!("{i}"),
            "process.spawn",
            &format!(r#"{{"id":"t{i}","command":"true","args":[]}}"#),
        );
        assert!(reply.contains(r#""result":"#), "spawn {i}: {reply}");
    }
}

/// Reads until `n` replies, every one a result, and `n` exit frames have
/// arrived.
fn read_replies_and_exits(c: &mut Client, n: usize) {
    let (mut replies, mut exits) = (0, 0);
    while replies < n || exits < n {
        let line = c.recv_line();
        if line.starts_with(r#"{"jsonrpc":"2.0","id":"#) {
            assert!(line.contains(r#""result":"#), "{line}");
            replies += 1;
        } else if line.contains(r#""stream":"exit""#) {
            exits += 1;
        }
    }
}

/// Waits until the daemon closes `s` (EOF or reset) or `limit` passes.
fn closed_within(s: &mut UnixStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// `n` connections to `socket` held by a process of their own (another
/// same-uid program, as the attacks ran), until the returned guard drops.
struct Crowd {
    child: std::process::Child,
    held: usize,
}

impl Crowd {
    fn hold(socket: &std::path::Path, n: usize) -> Crowd {
        Crowd::start(socket, n, false).0
    }

    /// As [`Crowd::hold`], and then the crowd's own process connects once
    /// more and pings with the token: its answer (the reply line, or how
    /// it failed) comes back with the crowd.
    fn hold_then_ping(socket: &std::path::Path, n: usize) -> (Crowd, String) {
        let (crowd, ping) = Crowd::start(socket, n, true);
        (crowd, ping.expect("the helper reports its ping"))
    }

    fn start(socket: &std::path::Path, n: usize, ping: bool) -> (Crowd, Option<String>) {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "hostile_neighbours::hold_connections_helper",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(HOLD_SOCKET_ENV, socket)
            .env(HOLD_COUNT_ENV, n.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if ping {
            command.env(HOLD_PING_ENV, "1");
        }
        let mut child = command.spawn().unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let held = lines
            .find_map(|l| l.ok()?.strip_prefix("held ")?.parse().ok())
            .expect("the helper reports what it holds");
        let ping = ping.then(|| {
            lines
                .find_map(|l| Some(l.ok()?.strip_prefix("ping ")?.to_string()))
                .unwrap_or_default()
        });
        (Crowd { child, held }, ping)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Crowd {
    fn drop(&mut self) {
        // Its stdin closing ends the helper; its pid ends it otherwise.
        drop(self.child.stdin.take());
        if !wait_until(Duration::from_secs(10), || matches!(self.child.try_wait(), Ok(Some(_)))) {
            // Not reaped yet (try_wait saw it running), so still ours.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

const HOLD_SOCKET_ENV: &str = "REMORA_TEST_HOLD_SOCKET";
const HOLD_COUNT_ENV: &str = "REMORA_TEST_HOLD_COUNT";
/// Set: once it holds its connections, the helper pings with the token.
const HOLD_PING_ENV: &str = "REMORA_TEST_HOLD_PING";

/// Not a test of its own: the body of [`Crowd`]'s helper process, which
/// connects, reports, and holds the connections until its stdin closes.
#[test]
#[ignore = "run by the tests as a helper process"]
fn hold_connections_helper() {
    let (Some(socket), Some(n)) = (std::env::var_os(HOLD_SOCKET_ENV), std::env::var(HOLD_COUNT_ENV).ok()) else {
        return;
    };
    let n: usize = n.parse().unwrap();
    let held: Vec<UnixStream> = (0..n).filter_map(|_| UnixStream::connect(&socket).ok()).collect();
    println!("held {}", held.len());
    if std::env::var_os(HOLD_PING_ENV).is_some() {
        println!("ping {}", ping_once(std::path::Path::new(&socket)));
    }
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// One new connection that pings with the token at once: the reply line,
/// or how it failed. A bound of 20 s limits a hang.
fn ping_once(socket: &std::path::Path) -> String {
    let attempt = || -> std::io::Result<String> {
        let mut s = UnixStream::connect(socket)?;
        s.set_read_timeout(Some(Duration::from_secs(20)))?;
        s.write_all(common::request_line("1", "server.ping", None, common::TOKEN).as_bytes())?;
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(s), &mut line)?;
        Ok(match line.is_empty() {
            true => "closed without a reply".to_string(),
            false => line.trim_end().to_string(),
        })
    };
    attempt().unwrap_or_else(|e| format!("failed: {e}"))
}

#[test]
fn silent_connections_past_the_descriptor_limit_leave_room_for_the_owner() {
    // 256 descriptors: the connection cap is 256 − 128 = 128.
    let d = TestDaemon::start_with_fd_limit(256, &[]);
    let crowd = Crowd::hold(&d.socket, 300);
    assert!(crowd.held >= 250, "connects are accepted (and the oldest evicted)");
    // The owner gets in, past the silent crowd, and can still spawn.
    let mut c = d.connect();
    assert!(c.call(1, "server.ping", "{}").contains(r#""pong":true"#));
    spawn_true(&mut c, 20);
    // Silent connections were closed to make room.
    let log = d.log();
    assert!(log.contains("the connection limit (128) is reached"), "{log}");
    assert!(!log.to_lowercase().contains("too many open files"), "{log}");
    drop(crowd);
}

/// The fresh grace for the tests below: longer than any of them, so a
/// client is served only if a crowd gives way before its grace is over.
const LONG_FRESH_GRACE: (&str, &str) = ("REMORA_TEST_FRESH_GRACE_MS", "600000");

/// Issue 44 item 7: another process fills every place with fresh silent
/// connections (700 at a 512-descriptor limit, cap 384). A client from a
/// process holding none is served at once: the crowd gives way, grace or
/// no grace (it used to wait for the crowd's grace, and under Desktop a
/// refused reconnect replaces the daemon).
#[test]
fn a_burst_from_another_process_does_not_lock_a_client_out() {
    let d = TestDaemon::start_with_fd_limit(512, &[LONG_FRESH_GRACE]);
    let crowd = Crowd::hold(&d.socket, 700);
    // Every connect of the burst has returned, so its connections are
    // accepted or queued ahead of this one: the daemon meets them first,
    // and with the long grace none of the 384 it admits is past it.
    assert_eq!(crowd.held, 700, "the burst's connects all return");
    let reply = ping_once(&d.socket);
    assert!(reply.contains(r#""pong":true"#), "{reply}");
    let log = d.log();
    let gave_way = format!(
        "connections without the token from peer pid {} for a new one from peer pid {}",
        crowd.pid(),
        std::process::id()
    );
    assert!(log.contains(&gave_way), "the crowd gives way to this process: {log}");
    drop(crowd);
}

/// The shape the hardening check found: the process that opened the 700
/// silent connections pings with the token itself, at once. Its newcomers
/// take places of its own crowd, so its client is served too (it was
/// closed at once: the process "already had 8 fresh connections").
#[test]
fn a_client_of_the_bursting_process_itself_is_served() {
    let d = TestDaemon::start_with_fd_limit(512, &[LONG_FRESH_GRACE]);
    let (crowd, reply) = Crowd::hold_then_ping(&d.socket, 700);
    assert_eq!(crowd.held, 700);
    assert!(reply.contains(r#""pong":true"#), "{reply}");
    drop(crowd);
}

#[test]
fn a_connection_without_the_token_is_closed_after_its_grace() {
    let d = TestDaemon::start_with(&[], &[("REMORA_TEST_AUTH_GRACE_MS", "300")]);
    let mut silent = UnixStream::connect(&d.socket).unwrap();
    let mut refused = UnixStream::connect(&d.socket).unwrap();
    refused
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.ping\",\"auth\":\"wrong\"}\n")
        .unwrap();
    // An authenticated connection stays open past the grace.
    let mut owner = d.connect();
    assert!(owner.call(1, "server.ping", "{}").contains("pong"));
    // Each grace runs from its connection's accept: once a connection
    // accepted after the owner's is closed for silence, the owner's grace
    // is over too. The limits bound a hang; the closes are the events.
    let mut later = UnixStream::connect(&d.socket).unwrap();
    let hang = Duration::from_secs(60);
    assert!(closed_within(&mut silent, hang), "silent connection kept");
    assert!(closed_within(&mut refused, hang), "refused connection kept");
    assert!(closed_within(&mut later, hang), "later silent connection kept");
    assert!(
        owner.call(2, "server.ping", "{}").contains("pong"),
        "the owner's connection was closed"
    );
    assert!(d.log().contains("no authenticated request within 300ms"), "{}", d.log());
}

#[test]
fn unauthenticated_partial_lines_share_one_budget() {
    let d = TestDaemon::start();
    // 48 connections x (1 MiB - 1) bytes without a newline: 48 MiB, over
    // the 32 MiB budget for all unauthenticated connections together.
    let chunk = vec![b'x'; (1 << 20) - 1];
    let mut held = Vec::new();
    for _ in 0..48 {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(&chunk);
        held.push(s);
    }
    // Past the first few, connections without the token are not logged
    // one by one (`connlog`): the closes themselves are the signal.
    let closed = |held: &mut Vec<UnixStream>| held.iter_mut().map(is_closed).filter(|c| *c).count();
    assert!(
        wait_until(Duration::from_secs(20), || closed(&mut held) >= 16),
        "only {} of 48 over-budget connections closed",
        closed(&mut held)
    );
    // The owner is unaffected: a short first request authenticates the
    // connection, and its lines are no longer charged.
    let mut c = d.connect();
    assert!(c.call(0, "server.ping", "{}").contains("pong"));
    let big = format!("\"{}\"", "y".repeat(900_000));
    let reply = c.call(1, "server.ping", &big);
    assert!(reply.contains("pong"), "{reply}");
    drop(c);
    let mut d = d;
    d.stop();
    let log = d.log();
    assert!(
        log.contains("reach 32 MiB") || log.contains("closed over the partial-line budget"),
        "{log}"
    );
}

/// Whether the daemon has closed `s` (EOF or reset), without waiting.
fn is_closed(s: &mut UnixStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 4096];
    let closed = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
    };
    s.set_nonblocking(false).unwrap();
    closed
}

#[test]
fn repeated_unauthorized_requests_log_a_bounded_number_of_lines() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let mut lines = String::new();
    for i in 0..200 {
        lines.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"server.ping\",\"auth\":\"wrong\"}}\n"
        ));
    }
    c.send_raw(lines.as_bytes());
    for _ in 0..200 {
        assert!(c.recv_line().contains("-32001"));
    }
    drop(c);
    assert!(wait_until(Duration::from_secs(10), || d
        .log()
        .contains("were not logged")));
    let log = d.log();
    assert_eq!(log.matches("Unauthorized request").count(), 5, "{log}");
    assert!(
        log.contains("195 more unauthorized request(s) on this connection were not logged"),
        "{log}"
    );
}

#[test]
fn a_client_pipelining_thousands_of_spawns_without_reading_is_not_wedged() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    let n: usize = 3000;
    let mut lines = String::new();
    for i in 0..n {
        lines.push_str(&common::request_line(
            &i.to_string(),
            "process.spawn",
            Some(&format!(r#"{{"id":"p{i}","command":"true","args":[]}}"#)),
            common::TOKEN,
        ));
    }
    // Write everything from another thread while this one does not read
    // yet: the daemon must take it all without a reader on our side...
    let mut w = c.stream.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(lines.as_bytes()).is_ok());
    // Not a readiness wait: the scenario is a client that does not read
    // for a while, with its requests piling up behind full buffers.
    std::thread::sleep(Duration::from_secs(2));
    // ...and, once we read, answer every request.
    read_replies_and_exits(&mut c, n);
    assert!(writer.join().unwrap());
    assert!(c.call(n + 1, "server.ping", "{}").contains("pong"));
}

/// The wedge hunt of issue 26, item 12: chatty children, thousands of
/// them, spawned by a client that reads nothing for a while. While it does
/// not read, its connection's writer waits on the socket, its reply queue
/// fills and its reader stops reading (backpressure on this connection
/// only): another connection is served, and once the client reads, every
/// spawn is answered and every exit delivered.
#[test]
fn a_client_pipelining_chatty_spawns_without_reading_recovers_when_it_reads() {
    let n: usize = std::env::var("REMORA_TEST_CHATTY_SPAWNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let bytes: usize = std::env::var("REMORA_TEST_CHATTY_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(65536);
    let d = TestDaemon::start();
    let mut c = d.connect();
    c.stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut lines = String::new();
    for i in 0..n {
        lines.push_str(&common::request_line(
            &i.to_string(),
            "process.spawn",
            Some(&format!(
                r#"{{"id":"chatty{i}","command":"sh","args":["-c","yes | head -c {bytes}"]}}"#
            )),
            common::TOKEN,
        ));
    }
    let mut w = c.stream.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(lines.as_bytes()).is_ok());
    // While this client reads nothing, another is served: pings, and a
    // spawn whose output and exit arrive.
    let mut other = d.connect();
    // Liveness, not speed: 1500 forks of three processes each share two
    // cores with whatever else runs.
    other.stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    for i in 0..20 {
        assert!(other.call(i, "server.ping", "{}").contains(r#""pong":true"#));
    }
    let reply = other.call(
        100,
        "process.spawn",
        r#"{"id":"other","command":"sh","args":["-c","echo other-out"]}"#,
    );
    assert!(reply.contains(r#""result":"#), "{reply}");
    let mut exited = false;
    while !exited {
        exited = other.recv_line().contains(r#""stream":"exit""#);
    }
    // Not a readiness wait: the scenario is a client that does not read
    // for a while, with its requests and output piling up.
    std::thread::sleep(Duration::from_secs(3));
    read_replies_and_exits(&mut c, n);
    assert!(writer.join().unwrap());
    assert!(c.call(n + 1, "server.ping", "{}").contains("pong"));
}

/// A process that writes without end, followed by a client that reads
/// slower than it writes, keeps its stream behind for good. Another
/// process spawned on the same connection still gets its reply and its
/// stream: the writer takes turns between the logs it follows instead of
/// always starting from the oldest.
#[test]
fn an_endless_stream_does_not_starve_another_spawn_on_the_same_connection() {
    let d = TestDaemon::start();
    let mut c = d.connect();
    c.stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let flood = c.call(1, "process.spawn", r#"{"id":"flood","command":"yes","args":["flood"]}"#);
    assert!(flood.contains(r#""result":"#), "{flood}");
    // Not a readiness wait: the client does not read for a while, so the
    // flood's stream is far behind when the second spawn's reply comes.
    std::thread::sleep(Duration::from_secs(2));
    c.send(
        2,
        "process.spawn",
        r#"{"id":"quiet","command":"echo","args":["quiet-out"]}"#,
    );
    let needle = r#"{"jsonrpc":"2.0","id":2,"#;
    let (mut replied, mut quiet_exit, mut flood_bytes) = (false, false, 0usize);
    while !(replied && quiet_exit) {
        let line = c.recv_line();
        if line.starts_with(needle) {
            assert!(line.contains(r#""result":"#), "{line}");
            replied = true;
        } else if line.contains(r#""processId":"quiet","stream":"exit""#) {
            quiet_exit = true;
        } else {
            flood_bytes += line.len();
            // One pass of the writer (256 KiB of frames) and what the
            // socket and the writer's buffer hold; 111 MB went out first
            // before the writer took turns.
            assert!(
                flood_bytes < 16 << 20,
                "16 MiB of the flood went out before the quiet process's reply ({replied}) and exit ({quiet_exit})"
            );
        }
    }
    let killed = c.call(3, "process.kill", r#"{"id":"flood","signal":"KILL"}"#);
    assert!(killed.contains(r#""result":"#), "{killed}");
}

/// Connects as fast as it can until `stop`, holding at most `hold`
/// connections (the oldest dropped first); returns how many it opened.
fn flood(socket: std::path::PathBuf, hold: usize, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> usize {
    let mut held = std::collections::VecDeque::new();
    let mut opened = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if let Ok(s) = UnixStream::connect(&socket) {
            opened += 1;
            held.push_back(s);
            if held.len() > hold {
                held.pop_front();
            }
        }
        // Paced a little below what the daemon can accept, so the listen
        // backlog stays short and a fresh client is accepted at once
        // (behind a full backlog its first line would be in before its
        // turn came, whatever the eviction rule).
        std::thread::sleep(FLOOD_PACE);
    }
    opened
}

/// The pause between two connects of one flooding thread (4 threads: up
/// to 800 connections a second).
const FLOOD_PACE: Duration = Duration::from_millis(5);

/// The pause between a fresh client's connect and its first line: the
/// time its first request takes to come through an SSH hop.
const FIRST_LINE_AFTER: Duration = Duration::from_millis(500);

/// One fresh client, in a process of its own (`remora -bridge`, as an SSH
/// session attaches): connect, ping with the token after
/// [`FIRST_LINE_AFTER`], wait for the pong. `Err` says how it failed.
fn fresh_ping(socket: &std::path::Path) -> Result<(), String> {
    use std::process::Stdio;
    let mut bridge = common::remora_command()
        .args(["-bridge", "-socket"])
        .arg(socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let mut stdin = bridge.stdin.take().unwrap();
    // The bridge connects as it starts; its first line comes later.
    std::thread::sleep(FIRST_LINE_AFTER);
    stdin
        .write_all(common::request_line("1", "server.ping", None, common::TOKEN).as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    drop(stdin);
    let mut stdout = bridge.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let ended = wait_until(Duration::from_secs(20), || matches!(bridge.try_wait(), Ok(Some(_))));
    if !ended {
        // Not reaped yet (try_wait saw it running), so still ours.
        let _ = bridge.kill();
        let _ = bridge.wait();
    }
    let out = reader.join().unwrap_or_default();
    match (ended, out.contains(r#""pong":true"#)) {
        (_, true) => Ok(()),
        (false, false) => Err("no reply within 20 s".into()),
        (true, false) => Err(format!("closed with {out:?}")),
    }
}

/// The daemon's pid, from its owner record in `daemon.lock`.
fn daemon_pid(d: &TestDaemon) -> i32 {
    let record = std::fs::read_to_string(d.root().join("daemon.lock")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&record).unwrap();
    v["pid"].as_i64().unwrap() as i32
}

/// Audit N6: a same-uid flood of connections no longer evicts fresh
/// legitimate clients. The eviction took the oldest connection without
/// the token, which could be a new client whose first line had not
/// arrived yet (here it comes 500 ms after the connect, as through an SSH
/// hop): 15–30% of fresh pings failed under such floods.
#[test]
fn a_connection_flood_does_not_evict_fresh_clients() {
    // 256 descriptors: the connection cap is 128.
    let d = TestDaemon::start_with_fd_limit(256, &[]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooders: Vec<_> = (0..4)
        .map(|_| {
            let (socket, stop) = (d.socket.clone(), stop.clone());
            std::thread::spawn(move || flood(socket, 1500, stop))
        })
        .collect();
    // Let the flood fill the table first: the daemon holds the cap's worth
    // of descriptors for connections.
    let pid = daemon_pid(&d);
    let fds = || std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    assert!(
        wait_until(Duration::from_secs(20), || fds() >= 128),
        "{} descriptors",
        fds()
    );
    let tries = 20;
    let failures: Vec<String> = (0..tries).filter_map(|_| fresh_ping(&d.socket).err()).collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened: usize = flooders.into_iter().map(|f| f.join().unwrap()).sum();
    assert!(opened > 128 * 4, "the flood went on: {opened} connections");
    assert!(
        failures.is_empty(),
        "{} of {tries} fresh pings failed: {:?}",
        failures.len(),
        failures
    );
}
