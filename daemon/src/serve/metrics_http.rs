//! The opt-in `-metrics-addr` endpoint: a deliberately tiny HTTP/1.1
//! server that answers `GET /metrics` with the counters of
//! [`crate::protocol::metrics`] in Prometheus text exposition format 0.0.4.
//!
//! Without the flag no listener exists at all. It has no auth, so it
//! exposes counts only — never tokens, paths or command output — and is
//! meant for a loopback address: an empty host (`:9464`) binds loopback,
//! never every interface. A bind failure is logged
//! (`[Server] metrics: …`) and the daemon carries on. Each connection gets
//! one response and is closed, which is all a scraper needs.
//!
//! Anyone who can reach the port may connect, so its cost is bounded: at
//! most [`MAX_CONNECTIONS`] are served at once, and the next is accepted
//! only when one ends (waiting ones sit in the kernel's backlog and hold
//! no descriptor of ours); each has [`READ_TIMEOUT`] to send its request
//! and [`WRITE_TIMEOUT`] to take the answer. So the endpoint holds at most
//! 1 + [`MAX_CONNECTIONS`] descriptors, whatever other users do, and the
//! RPC socket and spawns never run short because of it.

use crate::protocol::metrics::Metrics;
use crate::serve::state::Daemon;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The largest request head accepted.
const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request head.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a client may take to read the response.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections served at once.
pub(crate) const MAX_CONNECTIONS: usize = 4;
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// Binds `addr` and serves it in the background; logs a bind failure.
pub(crate) async fn start(addr: &str, daemon: Arc<Daemon>) {
    match bind(addr).await {
        Ok(listener) => {
            let shown = listener
                .local_addr()
                .map_or_else(|_| addr.to_string(), |a| a.to_string());
            crate::log_info!("[Server] metrics: serving http://{shown}/metrics");
            tokio::spawn(serve(listener, daemon));
        }
        Err(why) => crate::log_error!("[Server] metrics: {why}"),
    }
}

/// Go's `net.Listen("tcp", addr)`, `host:port`, except that an empty
/// host means loopback (127.0.0.1, else ::1), not every interface: the
/// endpoint has no auth, so exposing it must be spelled out
/// (`0.0.0.0:9464`). Errors are phrased like Go's.
async fn bind(addr: &str) -> Result<TcpListener, String> {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(format!("listen tcp: address {addr}: missing port in address"));
    };
    let Ok(port) = port.parse::<u16>() else {
        return Err(format!("listen tcp: address {addr}: invalid port"));
    };
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let candidates: Vec<SocketAddr> = if host.is_empty() {
        vec![
            SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            SocketAddr::from((Ipv6Addr::LOCALHOST, port)),
        ]
    } else {
        match tokio::net::lookup_host((host, port)).await {
            Ok(found) => found.collect(),
            Err(e) => return Err(format!("listen tcp: lookup {host}: {e}")),
        }
    };
    let mut last = None;
    for candidate in candidates {
        match TcpListener::bind(candidate).await {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    let why = last.map_or_else(
        || "no suitable address found".to_string(),
        |e| crate::base::goerr::io_text(&e),
    );
    Err(format!("listen tcp {addr}: bind: {why}"))
}

async fn serve(listener: TcpListener, daemon: Arc<Daemon>) {
    let mut stop = daemon.shutdown.subscribe();
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        // A slot first, then the accept: past the cap nothing is accepted.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => return,
            },
            _ = stop.wait() => return,
        };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let daemon = daemon.clone();
                    tokio::spawn(async move {
                        answer(stream, daemon).await;
                        drop(slot);
                    });
                }
                Err(e) => {
                    crate::log_warn!("[Server] metrics: accept: {}", crate::base::goerr::io_text(&e));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = stop.wait() => return,
        }
    }
}

async fn answer(mut stream: TcpStream, daemon: Arc<Daemon>) {
    let head = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(Some(head)) => head,
        _ => return,
    };
    let response = respond(&head, &daemon.metrics);
    let _ = tokio::time::timeout(WRITE_TIMEOUT, async {
        let _ = stream.write_all(&response).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// Reads up to the blank line ending the request head.
async fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return (!head.is_empty()).then_some(head);
        }
        head.extend_from_slice(&buf[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            return Some(head);
        }
        if head.len() > MAX_HEAD {
            return Some(head);
        }
    }
}

/// The full HTTP response for a request head.
fn respond(head: &[u8], metrics: &Metrics) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end_matches('\r').split(' ');
    let method = parts.next().unwrap_or_default();
    let target = parts.next().unwrap_or_default();
    let path = target.split('?').next().unwrap_or_default();
    let (status, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => ("200 OK", render(metrics)),
        (_, "/metrics") => ("405 Method Not Allowed", "method not allowed\n".to_string()),
        _ => ("404 Not Found", "404 page not found\n".to_string()),
    };
    let content_type = if status.starts_with("200") {
        CONTENT_TYPE
    } else {
        "text/plain; charset=utf-8"
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// Prometheus text exposition of every counter.
pub(crate) fn render(m: &Metrics) -> String {
    let mut out = String::with_capacity(8 * 1024);
    let counter = |out: &mut String, name: &str, help: &str, value: u64| {
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n");
    };
    let gauge = |out: &mut String, name: &str, help: &str, value: u64| {
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n");
    };
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    counter(
        &mut out,
        "remora_connections_total",
        "Client connections accepted on the RPC socket.",
        get(&m.connections),
    );
    out.push_str("# HELP remora_requests_total Requests dispatched to a method, by method and outcome.\n");
    out.push_str("# TYPE remora_requests_total counter\n");
    for (method, by_outcome) in crate::protocol::rpc::METHODS.iter().zip(m.requests.iter()) {
        for (outcome, value) in ["ok", "error", "no_reply"].iter().zip(by_outcome.iter()) {
            let _ = writeln!(
                out,
                "remora_requests_total{{method=\"{method}\",outcome=\"{outcome}\"}} {}",
                get(value)
            );
        }
    }
    counter(
        &mut out,
        "remora_requests_rejected_total",
        "Requests rejected before dispatch (parse, auth, version or method errors).",
        get(&m.rejected),
    );
    counter(
        &mut out,
        "remora_process_spawns_total",
        "Child processes spawned.",
        get(&m.process_spawns),
    );
    counter(
        &mut out,
        "remora_process_exits_total",
        "Child processes that exited.",
        get(&m.process_exits),
    );
    counter(
        &mut out,
        "remora_process_reattaches_total",
        "Successful process.reattach calls.",
        get(&m.reattaches),
    );
    counter(
        &mut out,
        "remora_stream_bytes_out_total",
        "Child output bytes captured for stream frames (before base64).",
        get(&m.stream_bytes_out),
    );
    counter(
        &mut out,
        "remora_stdin_bytes_in_total",
        "Bytes written to children's stdin via process.stdin.",
        get(&m.stdin_bytes_in),
    );
    gauge(
        &mut out,
        "remora_replay_ram_bytes",
        "Replay-log frame bytes held in memory (hot tails, unwritten frames, RAM rings).",
        get(&m.replay.ram_bytes),
    );
    gauge(
        &mut out,
        "remora_replay_disk_bytes",
        "Replay-log bytes in segment files on disk.",
        get(&m.replay.disk_bytes),
    );
    counter(
        &mut out,
        "remora_replay_evictions_total",
        "Replay logs or segments removed to stay within the disk budget.",
        get(&m.replay.evictions),
    );
    counter(
        &mut out,
        "remora_replay_fallbacks_total",
        "Replay logs that fell back to an in-memory ring after a disk failure.",
        get(&m.replay.fallbacks),
    );
    #[cfg(feature = "alloc-count")]
    counter(
        &mut out,
        "remora_heap_allocations_total",
        "Heap allocations and reallocations since start (alloc-count builds only).",
        crate::base::alloccount::allocations(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_content_type() {
        let m = Metrics::default();
        m.connections.fetch_add(2, Ordering::Relaxed);
        m.count_request(
            crate::protocol::method::Method::Server(crate::protocol::method::ServerMethod::Ping),
            crate::protocol::metrics::Outcome::Ok,
        );
        let ok = String::from_utf8(respond(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &m)).unwrap();
        assert!(
            ok.starts_with("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"),
            "{ok}"
        );
        assert!(ok.contains("\nremora_connections_total 2\n"));
        assert!(ok.contains("\nremora_requests_total{method=\"server.ping\",outcome=\"ok\"} 1\n"));
        let body_len = ok.split_once("\r\n\r\n").unwrap().1.len();
        assert!(ok.contains(&format!("Content-Length: {body_len}\r\n")));
        let missing = String::from_utf8(respond(b"GET / HTTP/1.1\r\n\r\n", &m)).unwrap();
        assert!(missing.starts_with("HTTP/1.1 404 Not Found\r\n"));
        let post = String::from_utf8(respond(b"POST /metrics HTTP/1.1\r\n\r\n", &m)).unwrap();
        assert!(post.starts_with("HTTP/1.1 405 "));
        let head = String::from_utf8(respond(b"HEAD /metrics?x=1 HTTP/1.1\r\n\r\n", &m)).unwrap();
        assert!(head.ends_with("\r\n\r\n"));
    }

    #[test]
    fn every_family_has_help_and_type() {
        let text = render(&Metrics::default());
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(text.contains(&format!("# HELP {name} ")), "{name}");
            assert!(
                text.contains(&format!("# TYPE {name} counter\n")) || text.contains(&format!("# TYPE {name} gauge\n")),
                "{name}"
            );
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn bind_errors_read_like_go() {
        assert_eq!(
            bind("nope").await.err().as_deref(),
            Some("listen tcp: address nope: missing port in address")
        );
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        assert_eq!(
            bind(&addr).await.err(),
            Some(format!("listen tcp {addr}: bind: address already in use"))
        );
    }
}
