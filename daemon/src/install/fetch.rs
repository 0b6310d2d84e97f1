//! `-cli-url`: the HTTP(S) download, hashed while it streams to a
//! temporary in `-cli-dir`.
//!
//! Error texts mimic Go's `net/http` (`Get "<url>": dial tcp <addr>:
//! connect: connection refused`); a non-2xx answer is
//! `bad status: <code> <reason>`. Both are wrapped as
//! `download failed: <err>` by the caller's contract.
//!
//! Like Go's default transport, the download honours `HTTPS_PROXY` /
//! `HTTP_PROXY` (by scheme, upper case first) and `NO_PROXY`, and never
//! proxies loopback hosts. `NO_PROXY` entries match a host exactly or as a
//! domain suffix (`*` matches all); CIDR entries are not supported.

use super::stage::{create_error_text, TempFile};
use super::{hex, Limits};
use crate::goerr::go_quote;
use crate::goerr::{io_text, path_error};
use sha2::{Digest, Sha256};
use std::io::{self, Read, Write};
use std::path::Path;

/// Redirects followed, as Go's default client.
const MAX_REDIRECTS: u32 = 10;

/// Downloads `url` into a temporary in `dir`; returns it with the
/// lower-case hex SHA-256 of the body. The temporary is removed when the
/// returned value drops.
pub fn download(url: &str, dir: &Path, version: &str, limits: &Limits) -> Result<(TempFile, String), String> {
    let fail = |text: String| format!("download failed: {text}");
    let mut builder = ureq::AgentBuilder::new()
        .redirects(MAX_REDIRECTS)
        .timeout_connect(limits.connect_timeout)
        .timeout_read(limits.read_timeout)
        .user_agent(&format!("remora/{}", crate::version::ID));
    if let Some(proxy) = env_proxy(url) {
        let parsed =
            ureq::Proxy::new(&proxy).map_err(|_| fail(format!("invalid proxy URL {}", go_quote(proxy.as_bytes()))))?;
        builder = builder.proxy(parsed);
    }
    let response = builder
        .build()
        .get(url)
        .call()
        .map_err(|e| fail(request_error(url, e)))?;

    let mut temp = TempFile::create(dir, version, "dl")
        .map_err(|e| fail(format!("creating temp file: {}", create_error_text(&e))))?;
    let temp_name = temp.path().to_string_lossy().into_owned();
    let mut body = response.into_reader();
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(fail(body_error(&e))),
        };
        hasher.update(&buf[..n]);
        temp.file
            .write_all(&buf[..n])
            .map_err(|e| fail(path_error("write", &temp_name, &e)))?;
    }
    Ok((temp, hex(&hasher.finalize())))
}

/// Go-style text of a failed request (before the body).
fn request_error(url: &str, err: ureq::Error) -> String {
    let transport = match err {
        ureq::Error::Status(code, response) => {
            return format!("bad status: {code} {}", response.status_text())
                .trim_end()
                .to_string();
        }
        ureq::Error::Transport(t) => t,
    };
    let quoted = go_quote(url.as_bytes());
    let source_text = || {
        std::error::Error::source(&transport)
            .and_then(|s| s.downcast_ref::<io::Error>())
            .map(io_text)
            .or_else(|| transport.message().map(str::to_string))
            .unwrap_or_else(|| transport.kind().to_string())
    };
    let parts = split_url(url);
    match transport.kind() {
        ureq::ErrorKind::InvalidUrl | ureq::ErrorKind::UnknownScheme => match parts {
            Some(p) if p.scheme != "http" && p.scheme != "https" => {
                format!(
                    "Get {quoted}: unsupported protocol scheme {}",
                    go_quote(p.scheme.as_bytes())
                )
            }
            Some(_) => format!("parse {quoted}: invalid URL"),
            None if !url.contains("://") => {
                format!("Get {quoted}: unsupported protocol scheme \"\"")
            }
            None => format!("parse {quoted}: invalid URL"),
        },
        ureq::ErrorKind::Dns => match parts {
            Some(p) => format!("Get {quoted}: dial tcp: lookup {}: no such host", p.host),
            None => format!("Get {quoted}: dial tcp: no such host"),
        },
        ureq::ErrorKind::ConnectionFailed => match parts {
            Some(p) => format!("Get {quoted}: dial tcp {}: connect: {}", p.addr(), source_text()),
            None => format!("Get {quoted}: dial tcp: connect: {}", source_text()),
        },
        ureq::ErrorKind::TooManyRedirects => {
            format!("Get {quoted}: stopped after {MAX_REDIRECTS} redirects")
        }
        ureq::ErrorKind::Io => format!("Get {quoted}: {}", timeout_or(source_text())),
        _ => {
            let mut text = transport.kind().to_string();
            if let Some(m) = transport.message() {
                text = format!("{text}: {m}");
            }
            format!("Get {quoted}: {text}")
        }
    }
}

/// Text of an error while reading the body: Go's `unexpected EOF` for a
/// short body, `i/o timeout` for a stalled one.
fn body_error(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => "unexpected EOF".to_string(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => "i/o timeout".to_string(),
        _ if e.raw_os_error().is_some() => io_text(e),
        _ => {
            // ureq reports a short body as a plain message; keep Go's text.
            let text = e.to_string();
            if text.contains("closed before") || text.contains("unexpected EOF") {
                "unexpected EOF".to_string()
            } else {
                text
            }
        }
    }
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
