//! `-cli-url`: the HTTP(S) download, hashed while it streams to a
//! temporary in `-cli-dir`.
//!
//! Error texts mimic Go's `net/http` (`Get "<url>": dial tcp <addr>:
//! connect: connection refused`), wrapped as `download failed: <err>` by
//! the caller's contract; an answer other than 200 is the reference's bare
//! `download failed with status <code>` (no URL, no reason phrase).
//!
//! Build 4534d86 instruments the download: a `__INSTALL_PROGRESS__` line
//! on a ~1 s ticker while the body streams ([`Progress`]), [`FetchStats`]
//! for the facts line, and a read-idle abort with its own `cliError`,
//! `download stalled: no data for <n>s after <got>/<total> bytes`.
//! Remora adds an opt-in overall deadline (`-cli-download-timeout`, audit
//! D14): `download timed out: not complete within <d> after <got>/<total>
//! bytes`, with the temporary removed ([`download`]).
//!
//! Like Go's default transport, the download honours `HTTPS_PROXY` /
//! `HTTP_PROXY` (by scheme, upper case first) and `NO_PROXY`, and never
//! proxies loopback hosts. `NO_PROXY` entries match a host exactly or as a
//! domain suffix (`*` matches all); CIDR entries are not supported.

use super::fetch_error::{FetchError, RequestError};
use super::stage::TempFile;
use super::{hex, Limits};
use crate::base::goerr::io_text;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The prefix of a progress line.
pub const PROGRESS_PREFIX: &str = "__INSTALL_PROGRESS__";

/// The facts line's `fetch` object: bytes read, the download's duration
/// and the longest gap between two reads, in ms. Present whenever a
/// `-cli-url` download was attempted, whatever its outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchStats {
    pub bytes: u64,
    pub ms: u64,
    pub longest_pause_ms: u64,
}

/// One progress line's JSON.
#[derive(Serialize)]
struct Progress {
    phase: &'static str,
    bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    total: Option<u64>,
}

/// Where progress lines go (stdout for `-install`).
pub(super) type ProgressSink<'a> = &'a (dyn Fn(&str) + Sync);

fn progress_line(bytes: u64, total: Option<u64>) -> String {
    let json = crate::base::gojson::to_go_json(&Progress {
        phase: "download",
        bytes,
        total,
    });
    format!("{PROGRESS_PREFIX}{}", String::from_utf8_lossy(&json))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Redirects followed, as Go's default client.
const MAX_REDIRECTS: u32 = 10;

/// Downloads `url` into a temporary in `dir`; returns it with the
/// lower-case hex SHA-256 of the body, and the [`FetchStats`] whatever the
/// outcome. The temporary is removed when the returned value drops.
/// Progress lines go to `sink`: one `bytes:0` line once the answer is a
/// success, then one per `limits.progress_interval` until the body ends.
///
/// The request and the body run on a thread of their own ([`fetch`]);
/// this one prints the progress and, with a `deadline` (`-cli-download-
/// timeout`, remora's own and off by default), gives up once it passes:
/// `download timed out: not complete within <d> after <got>/<total>
/// bytes`. A read in flight cannot be interrupted, so the thread is left
/// to end by itself (at the read-idle bound at the latest, or with the
/// process); its temporary is removed here first, and one it had not made
/// yet is never made.
pub(super) fn download(
    url: &str,
    dir: &Path,
    version: &str,
    limits: &Limits,
    deadline: Option<Duration>,
    sink: ProgressSink<'_>,
) -> (Result<(TempFile, String), FetchError>, FetchStats) {
    let started = Instant::now();
    let shared = Arc::new(Shared {
        started,
        read: AtomicU64::new(0),
        last_read_ms: AtomicU64::new(0),
        longest_pause_ms: AtomicU64::new(0),
        temp: Mutex::new(TempSlot::default()),
    });
    let (tx, rx) = mpsc::channel();
    let job = Job {
        url: url.to_string(),
        dir: dir.to_path_buf(),
        version: version.to_string(),
        limits: limits.clone(),
    };
    let worker = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("download".into())
        .spawn(move || fetch(&job, &worker, &tx));
    let result = match spawned {
        Ok(_) => supervise(&rx, &shared, deadline, limits.progress_interval, sink),
        Err(e) => Err(FetchError::Spawn(e)),
    };
    let stats = FetchStats {
        bytes: shared.read.load(Ordering::Relaxed),
        ms: millis(started.elapsed()),
        longest_pause_ms: shared.longest_pause_ms.load(Ordering::Relaxed),
    };
    (result, stats)
}

/// What the download thread reports.
enum Event {
    /// The answer is a success; the body's announced length.
    Answered(Option<u64>),
    /// The download is over.
    Done(Result<(TempFile, String), FetchError>),
}

/// What the download thread needs, owned (it may outlive the call).
struct Job {
    url: String,
    dir: std::path::PathBuf,
    version: String,
    limits: Limits,
}

/// Counters the thread updates and the caller reads.
struct Shared {
    started: Instant,
    read: AtomicU64,
    /// When the last bytes arrived, in ms since `started`.
    last_read_ms: AtomicU64,
    longest_pause_ms: AtomicU64,
    temp: Mutex<TempSlot>,
}

impl Shared {
    fn since_start_ms(&self) -> u64 {
        millis(self.started.elapsed())
    }

    /// Notes a gap between reads that ends now.
    fn pause_ends_now(&self) {
        let pause = self
            .since_start_ms()
            .saturating_sub(self.last_read_ms.load(Ordering::Relaxed));
        self.longest_pause_ms.fetch_max(pause, Ordering::Relaxed);
    }

    fn lock_temp(&self) -> std::sync::MutexGuard<'_, TempSlot> {
        self.temp.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The download's temporary, as far as the deadline needs it.
#[derive(Default)]
struct TempSlot {
    /// The caller gave up: no temporary may be made any more.
    abandoned: bool,
    path: Option<std::path::PathBuf>,
}

/// The caller's side: progress lines, the deadline, the result.
fn supervise(
    rx: &mpsc::Receiver<Event>,
    shared: &Shared,
    deadline: Option<Duration>,
    interval: Duration,
    sink: ProgressSink<'_>,
) -> Result<(TempFile, String), FetchError> {
    let ends = deadline.map(|d| shared.started + d);
    let mut total: Option<u64> = None;
    let mut next_tick: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if let (Some(ends), Some(limit)) = (ends, deadline) {
            if now >= ends {
                return Err(give_up(shared, limit, total));
            }
        }
        let wait = [ends, next_tick]
            .into_iter()
            .flatten()
            .min()
            .map(|t| t.saturating_duration_since(now));
        let event = match wait {
            Some(wait) => match rx.recv_timeout(wait) {
                Ok(event) => Some(event),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(FetchError::ThreadGone),
            },
            None => Some(rx.recv().map_err(|_| FetchError::ThreadGone)?),
        };
        match event {
            Some(Event::Answered(announced)) => {
                total = announced;
                sink(&progress_line(0, total));
                next_tick = Some(Instant::now() + interval);
            }
            Some(Event::Done(result)) => return result,
            None => {
                if let Some(tick) = next_tick.filter(|t| Instant::now() >= *t) {
                    sink(&progress_line(shared.read.load(Ordering::Relaxed), total));
                    next_tick = Some(tick + interval);
                }
            }
        }
    }
}

/// Gives the download up at its deadline: its temporary goes now, and the
/// thread may make none after this.
fn give_up(shared: &Shared, limit: Duration, total: Option<u64>) -> FetchError {
    {
        let mut slot = shared.lock_temp();
        slot.abandoned = true;
        if let Some(path) = slot.path.take() {
            let _ = std::fs::remove_file(path);
        }
    }
    shared.pause_ends_now();
    FetchError::TimedOut {
        limit,
        got: shared.read.load(Ordering::Relaxed),
        total,
    }
}

/// The download thread: request, temporary, body. Reports through `tx`.
fn fetch(job: &Job, shared: &Shared, tx: &mpsc::Sender<Event>) {
    let done = |result| {
        let _ = tx.send(Event::Done(result));
    };
    let response = match get_following_redirects(&job.url, &job.limits) {
        Ok(response) if response.status() == 200 => response,
        // The reference accepts 200 only (a 3xx it does not follow, a 204
        // or a 206 fails too), and prints no progress line for it.
        Ok(response) => return done(Err(FetchError::Status(response.status()))),
        Err(e) => return done(Err(e)),
    };
    let total: Option<u64> = response.header("Content-Length").and_then(|v| v.trim().parse().ok());
    let _ = tx.send(Event::Answered(total));
    let mut temp = {
        let mut slot = shared.lock_temp();
        if slot.abandoned {
            return;
        }
        match TempFile::create(&job.dir, &job.version, "dl") {
            Ok(temp) => {
                slot.path = Some(temp.path().to_path_buf());
                temp
            }
            Err(e) => return done(Err(FetchError::CreateTemp(e))),
        }
    };
    let temp_name = temp.path().to_string_lossy().into_owned();
    let mut body = response.into_reader();
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    shared.last_read_ms.store(shared.since_start_ms(), Ordering::Relaxed);
    let outcome = loop {
        let n = match body.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_idle_timeout(&e) => {
                shared.pause_ends_now();
                break Err(FetchError::Stalled {
                    idle_secs: job.limits.read_timeout.as_secs(),
                    got: shared.read.load(Ordering::Relaxed),
                    total,
                });
            }
            Err(e) => break Err(FetchError::Body(e)),
        };
        shared.pause_ends_now();
        shared.last_read_ms.store(shared.since_start_ms(), Ordering::Relaxed);
        shared.read.fetch_add(n as u64, Ordering::Relaxed);
        hasher.update(&buf[..n]);
        if let Err(source) = temp.file.write_all(&buf[..n]) {
            break Err(FetchError::Write {
                temp: temp_name,
                source,
            });
        }
    };
    done(outcome.map(|()| (temp, hex(&hasher.finalize()))));
}

/// GET `url`, following up to [`MAX_REDIRECTS`] redirects the way Go's
/// default client does. An error status (ureq reports 4xx and 5xx as
/// errors) is [`FetchError::Status`], as a non-200 answer is.
///
/// ureq is told not to follow redirects itself: ureq 2 panics when a
/// `Location` names a URL without a host (`file:`, `data:`,
/// `javascript:`), and a server must never be able to crash `-install`.
/// Each hop is checked here first, with Go's texts: a scheme other than
/// http(s) is `Get "<next>": unsupported protocol scheme "<s>"`, an http
/// URL without a host `Get "<next>": http: no Host in request URL`. The
/// proxy is chosen again for every hop, as Go's transport does.
fn get_following_redirects(url: &str, limits: &Limits) -> Result<ureq::Response, FetchError> {
    let mut current = url.to_string();
    let mut followed = 0u32;
    loop {
        let response = agent_for(&current, limits)?.get(&current).call().map_err(|e| match e {
            ureq::Error::Status(code, _) => FetchError::Status(code),
            ureq::Error::Transport(t) => transport_error(&current, t).into(),
        })?;
        // Go follows these five; 300, 304, 305 and 306 are answers.
        if !matches!(response.status(), 301 | 302 | 303 | 307 | 308) {
            return Ok(response);
        }
        // A 3xx without a Location is an answer too (Go 1.19+).
        let Some(location) = response.header("Location").filter(|l| !l.is_empty()) else {
            return Ok(response);
        };
        if followed == MAX_REDIRECTS {
            return Err(RequestError::TooManyRedirects {
                location: location.to_string(),
                after: MAX_REDIRECTS,
            }
            .into());
        }
        let next = url::Url::parse(&current)
            .and_then(|base| base.join(location))
            .map_err(|source| RequestError::BadLocation {
                url: current.clone(),
                location: location.to_string(),
                source,
            })?;
        check_fetchable(&next)?;
        current = next.to_string();
        followed += 1;
    }
}

/// Go's transport refusals for a redirect target ureq must never see.
fn check_fetchable(next: &url::Url) -> Result<(), RequestError> {
    let url = || next.as_str().to_string();
    let scheme = next.scheme();
    if scheme != "http" && scheme != "https" {
        return Err(RequestError::UnsupportedScheme {
            url: url(),
            scheme: scheme.to_string(),
        });
    }
    if next.host_str().is_none_or(str::is_empty) {
        return Err(RequestError::NoHost { url: url() });
    }
    Ok(())
}

/// The agent for one request to `url`: no automatic redirects, the
/// install's timeouts, and the proxy the environment names for it.
fn agent_for(url: &str, limits: &Limits) -> Result<ureq::Agent, RequestError> {
    let mut builder = ureq::AgentBuilder::new()
        .redirects(0)
        .timeout_connect(limits.connect_timeout)
        .timeout_read(limits.read_timeout)
        .user_agent(&format!("remora/{}", crate::base::version::ID));
    if let Some(proxy) = env_proxy(url) {
        let parsed = ureq::Proxy::new(&proxy).map_err(|_| RequestError::InvalidProxy { proxy: proxy.clone() })?;
        builder = builder.proxy(parsed);
    }
    Ok(builder.build())
}

/// Whether a body read failed because nothing arrived within the read
/// timeout (the socket's `SO_RCVTIMEO`).
fn is_idle_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)
}

/// A request that failed before an answer, in Go's words.
fn transport_error(url: &str, transport: ureq::Transport) -> RequestError {
    let source_text = || {
        std::error::Error::source(&transport)
            .and_then(|s| s.downcast_ref::<io::Error>())
            .map(io_text)
            .or_else(|| transport.message().map(str::to_string))
            .unwrap_or_else(|| transport.kind().to_string())
    };
    let parts = split_url(url);
    let url = url.to_string();
    let invalid = |url| RequestError::InvalidUrl { url };
    let detail = match transport.kind() {
        ureq::ErrorKind::InvalidUrl | ureq::ErrorKind::UnknownScheme => {
            return match parts {
                Some(p) if p.scheme != "http" && p.scheme != "https" => {
                    RequestError::UnsupportedScheme { url, scheme: p.scheme }
                }
                Some(_) => invalid(url),
                None if !url.contains("://") => RequestError::UnsupportedScheme {
                    url,
                    scheme: String::new(),
                },
                None => invalid(url),
            }
        }
        ureq::ErrorKind::Dns => match parts {
            Some(p) => format!("dial tcp: lookup {}: no such host", p.host),
            None => "dial tcp: no such host".to_string(),
        },
        ureq::ErrorKind::ConnectionFailed => match parts {
            Some(p) => format!("dial tcp {}: connect: {}", p.addr(), source_text()),
            None => format!("dial tcp: connect: {}", source_text()),
        },
        ureq::ErrorKind::Io => timeout_or(source_text()),
        _ => {
            let mut text = transport.kind().to_string();
            if let Some(m) = transport.message() {
                text = format!("{text}: {m}");
            }
            text
        }
    };
    RequestError::Transport { url, detail }
}

/// Maps socket timeout errno texts to Go's `i/o timeout`.
fn timeout_or(text: String) -> String {
    if text == "resource temporarily unavailable" || text == "connection timed out" {
        "i/o timeout".to_string()
    } else {
        text
    }
}

/// The parts of a URL the error texts and proxy choice need.
#[derive(Debug, PartialEq, Eq)]
struct UrlParts {
    scheme: String,
    /// Lower-case host, IPv6 without brackets.
    host: String,
    port: Option<u16>,
}

impl UrlParts {
    /// `host:port` as Go's dialer prints it (default port by scheme).
    fn addr(&self) -> String {
        let port = self.port.unwrap_or(match self.scheme.as_str() {
            "https" => 443,
            _ => 80,
        });
        if self.host.contains(':') {
            format!("[{}]:{port}", self.host)
        } else {
            format!("{}:{port}", self.host)
        }
    }
}

/// A minimal `scheme://[user@]host[:port][/...]` split.
fn split_url(url: &str) -> Option<UrlParts> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let port = match port {
        Some("") | None => None,
        Some(p) => Some(p.parse::<u16>().ok()?),
    };
    Some(UrlParts {
        scheme: scheme.to_ascii_lowercase(),
        host: host.to_ascii_lowercase(),
        port,
    })
}

/// The proxy URL for `url` from the environment, Go's rules (see the module
/// doc).
fn env_proxy(url: &str) -> Option<String> {
    let parts = split_url(url)?;
    let host = parts.host.as_str();
    if host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    {
        return None;
    }
    let no_proxy = env_first(&["NO_PROXY", "no_proxy"]).unwrap_or_default();
    if no_proxy_matches(&no_proxy, host) {
        return None;
    }
    match parts.scheme.as_str() {
        "https" => env_first(&["HTTPS_PROXY", "https_proxy"]),
        "http" => env_first(&["HTTP_PROXY", "http_proxy"]),
        _ => None,
    }
}

/// The first of `names` set to a non-empty value.
fn env_first(names: &[&str]) -> Option<String> {
    names
        .iter()
        .filter_map(|n| std::env::var(n).ok())
        .find(|v| !v.is_empty())
}

/// Whether `NO_PROXY` exempts `host`.
fn no_proxy_matches(no_proxy: &str, host: &str) -> bool {
    no_proxy.split(',').any(|entry| {
        let entry = entry.trim().to_ascii_lowercase();
        if entry.is_empty() {
            return false;
        }
        if entry == "*" {
            return true;
        }
        // Drop a port; bracketed IPv6 keeps its colons.
        let entry = match entry.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or_default().to_string(),
            None if entry.matches(':').count() == 1 => entry.split(':').next().unwrap_or_default().to_string(),
            None => entry,
        };
        let bare = entry.trim_start_matches('.');
        host == bare || host.ends_with(&format!(".{bare}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_like_the_dialer_prints_them() {
        let p = split_url("http://127.0.0.1:8080/x?y").unwrap();
        assert_eq!(p.addr(), "127.0.0.1:8080");
        assert_eq!(
            split_url("https://u:p@Example.com/a").unwrap().addr(),
            "example.com:443"
        );
        assert_eq!(split_url("http://[::1]/").unwrap().addr(), "[::1]:80");
        assert_eq!(split_url("example.com/x"), None);
    }

    #[test]
    fn no_proxy_rules() {
        assert!(no_proxy_matches("*", "a.b"));
        assert!(no_proxy_matches("foo, .example.com", "dl.example.com"));
        assert!(no_proxy_matches("example.com:443", "example.com"));
        assert!(no_proxy_matches("example.com", "x.example.com"));
        assert!(!no_proxy_matches("example.com", "badexample.com"));
        assert!(!no_proxy_matches("", "example.com"));
        assert_eq!(env_proxy("http://127.0.0.1:1/x"), None);
        assert_eq!(env_proxy("http://localhost/x"), None);
    }
}
