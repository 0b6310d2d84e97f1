//! The client side every daemon under test shares: request lines, the
//! token of the daemons the harness starts for itself, reading a reply
//! line, and the authenticated `server.shutdown` that stops a daemon.

use super::Error;
use serde_json::Value;
use std::io::{BufRead, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// The token of the daemons `bench` and `stress` start (a probe brings its own).
pub(crate) const TOKEN: &str = "harness-token";

/// One request line authenticated with [`TOKEN`] (with its newline); `id`
/// is written as JSON text (a number, or a quoted string).
pub(crate) fn req(id: impl std::fmt::Display, method: &str, params: &str) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{params},\"auth\":\"{TOKEN}\"}}\n")
}

/// JSON string literal of (lossy) bytes.
pub(crate) fn json_string(b: &[u8]) -> Vec<u8> {
    Value::String(String::from_utf8_lossy(b).into_owned())
        .to_string()
        .into_bytes()
}

/// The `server.shutdown` line (id 0) authenticated with `token`.
pub(crate) fn shutdown_line(token: &[u8]) -> Vec<u8> {
    let mut line = b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"server.shutdown\",\"auth\":".to_vec();
    line.extend(json_string(token));
    line.extend_from_slice(b"}\n");
    line
}

/// Asks the daemon on `socket` to shut down and reads until it closes the
/// connection (or `read_timeout` passes). False when nothing listened.
pub(crate) fn request_shutdown(
    socket: &Path,
    token: &[u8],
    write_timeout: Option<Duration>,
    read_timeout: Duration,
) -> bool {
    let Ok(mut s) = UnixStream::connect(socket) else {
        return false;
    };
    let _ = s.set_write_timeout(write_timeout);
    let _ = s.write_all(&shutdown_line(token));
    let _ = s.set_read_timeout(Some(read_timeout));
    let _ = s.read_to_end(&mut Vec::new());
    true
}

/// One line with its newline; an error at the end of the stream.
pub(crate) fn read_line(r: &mut impl BufRead) -> Result<Vec<u8>, Error> {
    let mut l = Vec::new();
    match r.read_until(b'\n', &mut l) {
        Ok(0) => Err(Error::Closed),
        Ok(_) => Ok(l),
        Err(e) => Err(Error::Read(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_the_token_and_escape_a_probe_token() {
        assert_eq!(
            req(7, "server.ping", "{}"),
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"server.ping\",\"params\":{},\"auth\":\"harness-token\"}\n"
        );
        assert!(req("\"a\"", "m", "{}").contains("\"id\":\"a\","));
        assert_eq!(
            shutdown_line(b"t\"k"),
            b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"server.shutdown\",\"auth\":\"t\\\"k\"}\n"
        );
    }

    #[test]
    fn read_line_ends_with_the_stream() {
        let mut r = std::io::Cursor::new(b"a\nb".to_vec());
        assert_eq!(read_line(&mut r).unwrap(), b"a\n");
        assert_eq!(read_line(&mut r).unwrap(), b"b");
        assert!(read_line(&mut r).is_err());
    }
}
