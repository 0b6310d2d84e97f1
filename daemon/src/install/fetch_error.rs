//! What the `-cli-url` download ([`super::fetch`]) can fail with, displayed
//! as the `cliError` the reference words: Go's `net/http` texts after
//! `download failed: `, the bare `download failed with status <code>`,
//! and build 4534d86's stall text (remora's deadline text beside it).
//!
//! The OS or parse error of a failure is its
//! [`std::error::Error::source`]; the Go texts name it too.

use super::stage::create_error_text;
use crate::base::goerr::{go_quote, io_text, path_error};
use std::fmt;
use std::io;
use std::time::Duration;

/// Why a download gave no verified blob.
#[derive(Debug)]
pub(super) enum FetchError {
    /// An answer other than 200: the reference's wording, measured at
    /// 5db5e4a and kept since (claustrum's catalogue of `cliError`
    /// texts), with neither the URL nor the reason phrase.
    Status(u16),
    /// No answer to read: `download failed: <Go's text>`.
    Request(RequestError),
    /// The download thread could not be started.
    Spawn(io::Error),
    /// The download thread ended without a result (it panicked).
    ThreadGone,
    /// The temporary could not be made:
    /// `download failed: creating temp file: <open's error>`.
    CreateTemp(io::Error),
    /// Reading the body failed: `download failed: <text>` ([`body_text`]).
    Body(io::Error),
    /// Writing the temporary failed: `download failed: write <temp>: <e>`.
    Write { temp: String, source: io::Error },
    /// The finished download could not be rewound for the decompressor:
    /// `download failed: seek <temp>: <e>`.
    Rewind { temp: String, source: io::Error },
    /// No byte within the read-idle bound:
    /// `download stalled: no data for <n>s after <got>/<total> bytes`
    /// (`-1` for a total the answer did not announce).
    Stalled {
        idle_secs: u64,
        got: u64,
        total: Option<u64>,
    },
    /// remora's opt-in overall deadline passed:
    /// `download timed out: not complete within <d> after <got>/<total>
    /// bytes`.
    TimedOut {
        limit: Duration,
        got: u64,
        total: Option<u64>,
    },
}

/// Why a request got no answer, in Go's `net/http` words (the text after
/// `download failed: `).
#[derive(Debug)]
pub(super) enum RequestError {
    /// A scheme other than http(s), first or on a redirect:
    /// `Get "<url>": unsupported protocol scheme "<scheme>"`.
    UnsupportedScheme { url: String, scheme: String },
    /// An http(s) redirect target without a host:
    /// `Get "<url>": http: no Host in request URL`.
    NoHost { url: String },
    /// `parse "<url>": invalid URL`.
    InvalidUrl { url: String },
    /// `Get "<location>": stopped after <after> redirects` (Go's 10).
    TooManyRedirects { location: String, after: u32 },
    /// A `Location` that does not parse against the URL it answered:
    /// `Get "<url>": failed to parse Location header "<location>": <e>`.
    BadLocation {
        url: String,
        location: String,
        source: url::ParseError,
    },
    /// The environment names a proxy that is no URL:
    /// `invalid proxy URL "<proxy>"`.
    InvalidProxy { proxy: String },
    /// The connection or the exchange failed: `Get "<url>": <detail>`,
    /// the detail in Go's dialer words (`dial tcp <addr>: connect:
    /// connection refused`, `i/o timeout`).
    Transport { url: String, detail: String },
}

/// `<total>` of the stall and deadline texts: `-1` when not announced.
fn total_text(total: Option<u64>) -> String {
    total.map_or_else(|| "-1".to_string(), |t| t.to_string())
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::Status(code) => write!(f, "download failed with status {code}"),
            FetchError::Request(e) => write!(f, "download failed: {e}"),
            FetchError::Spawn(e) => write!(f, "download failed: {}", io_text(e)),
            FetchError::ThreadGone => f.write_str("download failed: the download thread ended without a result"),
            FetchError::CreateTemp(e) => write!(f, "download failed: creating temp file: {}", create_error_text(e)),
            FetchError::Body(e) => write!(f, "download failed: {}", body_text(e)),
            FetchError::Write { temp, source } => write!(f, "download failed: {}", path_error("write", temp, source)),
            FetchError::Rewind { temp, source } => write!(f, "download failed: {}", path_error("seek", temp, source)),
            FetchError::Stalled { idle_secs, got, total } => write!(
                f,
                "download stalled: no data for {idle_secs}s after {got}/{} bytes",
                total_text(*total)
            ),
            FetchError::TimedOut { limit, got, total } => write!(
                f,
                "download timed out: not complete within {} after {got}/{} bytes",
                crate::base::goduration::text(*limit),
                total_text(*total)
            ),
        }
    }
}

impl std::error::Error for FetchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FetchError::Request(e) => Some(e),
            FetchError::Spawn(e) | FetchError::CreateTemp(e) | FetchError::Body(e) => Some(e),
            FetchError::Write { source, .. } | FetchError::Rewind { source, .. } => Some(source),
            FetchError::Status(_)
            | FetchError::ThreadGone
            | FetchError::Stalled { .. }
            | FetchError::TimedOut { .. } => None,
        }
    }
}

impl From<RequestError> for FetchError {
    fn from(e: RequestError) -> Self {
        FetchError::Request(e)
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::UnsupportedScheme { url, scheme } => write!(
                f,
                "Get {}: unsupported protocol scheme {}",
                go_quote(url.as_bytes()),
                go_quote(scheme.as_bytes())
            ),
            RequestError::NoHost { url } => write!(f, "Get {}: http: no Host in request URL", go_quote(url.as_bytes())),
            RequestError::InvalidUrl { url } => write!(f, "parse {}: invalid URL", go_quote(url.as_bytes())),
            RequestError::TooManyRedirects { location, after } => write!(
                f,
                "Get {}: stopped after {after} redirects",
                go_quote(location.as_bytes())
            ),
            RequestError::BadLocation { url, location, source } => write!(
                f,
                "Get {}: failed to parse Location header {}: {source}",
                go_quote(url.as_bytes()),
                go_quote(location.as_bytes())
            ),
            RequestError::InvalidProxy { proxy } => write!(f, "invalid proxy URL {}", go_quote(proxy.as_bytes())),
            RequestError::Transport { url, detail } => write!(f, "Get {}: {detail}", go_quote(url.as_bytes())),
        }
    }
}

impl std::error::Error for RequestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RequestError::BadLocation { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Text of an error while reading the body: Go's `unexpected EOF` for a
/// short body, `i/o timeout` for a stalled one.
fn body_text(e: &io::Error) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(unix)] // the errno texts are the Unix ones (Windows words its codes itself)
    fn each_error_is_worded_as_the_reference_words_it() {
        let url = || "http://h/x".to_string();
        let cases = [
            (FetchError::Status(404), "download failed with status 404"),
            (
                FetchError::ThreadGone,
                "download failed: the download thread ended without a result",
            ),
            (
                FetchError::Body(io::Error::from(io::ErrorKind::UnexpectedEof)),
                "download failed: unexpected EOF",
            ),
            (
                FetchError::Body(io::Error::from(io::ErrorKind::TimedOut)),
                "download failed: i/o timeout",
            ),
            (
                FetchError::Write {
                    temp: "/d/.1.dl".into(),
                    source: io::Error::from_raw_os_error(libc::ENOSPC),
                },
                "download failed: write /d/.1.dl: no space left on device",
            ),
            (
                FetchError::Rewind {
                    temp: "/d/.1.dl".into(),
                    source: io::Error::from_raw_os_error(libc::EBADF),
                },
                "download failed: seek /d/.1.dl: bad file descriptor",
            ),
            (
                FetchError::Stalled {
                    idle_secs: 60,
                    got: 5,
                    total: None,
                },
                "download stalled: no data for 60s after 5/-1 bytes",
            ),
            (
                FetchError::TimedOut {
                    limit: Duration::from_secs(90),
                    got: 5,
                    total: Some(9),
                },
                "download timed out: not complete within 1m30s after 5/9 bytes",
            ),
            (
                RequestError::UnsupportedScheme {
                    url: "file:///x".into(),
                    scheme: "file".into(),
                }
                .into(),
                "download failed: Get \"file:///x\": unsupported protocol scheme \"file\"",
            ),
            (
                RequestError::NoHost {
                    url: "http:///x".into(),
                }
                .into(),
                "download failed: Get \"http:///x\": http: no Host in request URL",
            ),
            (
                RequestError::InvalidUrl { url: url() }.into(),
                "download failed: parse \"http://h/x\": invalid URL",
            ),
            (
                RequestError::TooManyRedirects {
                    location: url(),
                    after: 10,
                }
                .into(),
                "download failed: Get \"http://h/x\": stopped after 10 redirects",
            ),
            (
                RequestError::InvalidProxy { proxy: "::".into() }.into(),
                "download failed: invalid proxy URL \"::\"",
            ),
            (
                RequestError::Transport {
                    url: url(),
                    detail: "dial tcp h:80: connect: connection refused".into(),
                }
                .into(),
                "download failed: Get \"http://h/x\": dial tcp h:80: connect: connection refused",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }

    #[test]
    fn a_bad_location_keeps_its_parse_error_as_the_cause() {
        let source = url::Url::parse("http://h/x").unwrap().join("http://[").unwrap_err();
        let e = FetchError::from(RequestError::BadLocation {
            url: "http://h/x".into(),
            location: "http://[".into(),
            source,
        });
        assert_eq!(
            e.to_string(),
            format!("download failed: Get \"http://h/x\": failed to parse Location header \"http://[\": {source}")
        );
        let request = std::error::Error::source(&e).unwrap();
        assert!(std::error::Error::source(request)
            .and_then(|s| s.downcast_ref::<url::ParseError>())
            .is_some());
    }
}
