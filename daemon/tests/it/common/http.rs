//! The server side of the tests' local HTTP servers (install downloads).

use std::io::Read;
use std::net::TcpStream;

/// Reads a request up to the blank line that ends its head (at most
/// 64 KiB). `None` when the client went away first.
pub fn read_request_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 65536 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    Some(req)
}
