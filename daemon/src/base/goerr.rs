//! Go-style error text for errors that reach the wire.
//!
//! The reference reports OS failures with Go's formats: `*PathError` is
//! `op path: text` (`open /x: no such file or directory`) and the text is
//! Go's lower-case errno string, not Rust's `No such file or directory (os
//! error 2)`. Handlers build wire messages only through these helpers.

use std::io;

/// Go's `syscall.Errno.Error()` text for `errno` (Linux).
pub(crate) fn errno_text(errno: i32) -> String {
    let known = match errno {
        libc::EPERM => "operation not permitted",
        libc::ENOENT => "no such file or directory",
        libc::ESRCH => "no such process",
        libc::EINTR => "interrupted system call",
        libc::EIO => "input/output error",
        libc::ENXIO => "no such device or address",
        libc::E2BIG => "argument list too long",
        libc::ENOEXEC => "exec format error",
        libc::EBADF => "bad file descriptor",
        libc::ECHILD => "no child processes",
        libc::EAGAIN => "resource temporarily unavailable",
        libc::ENOMEM => "cannot allocate memory",
        libc::EACCES => "permission denied",
        libc::EFAULT => "bad address",
        libc::EBUSY => "device or resource busy",
        libc::EEXIST => "file exists",
        libc::EXDEV => "invalid cross-device link",
        libc::ENODEV => "no such device",
        libc::ENOTDIR => "not a directory",
        libc::EISDIR => "is a directory",
        libc::EINVAL => "invalid argument",
        libc::ENFILE => "too many open files in system",
        libc::EMFILE => "too many open files",
        libc::ENOTTY => "inappropriate ioctl for device",
        libc::ETXTBSY => "text file busy",
        libc::EFBIG => "file too large",
        libc::ENOSPC => "no space left on device",
        libc::ESPIPE => "illegal seek",
        libc::EROFS => "read-only file system",
        libc::EMLINK => "too many links",
        libc::EPIPE => "broken pipe",
        libc::ENAMETOOLONG => "file name too long",
        libc::ENOSYS => "function not implemented",
        libc::ENOTEMPTY => "directory not empty",
        libc::ELOOP => "too many levels of symbolic links",
        libc::ENOTSOCK => "socket operation on non-socket",
        libc::EADDRINUSE => "address already in use",
        libc::EADDRNOTAVAIL => "cannot assign requested address",
        libc::ECONNRESET => "connection reset by peer",
        libc::ENOTCONN => "transport endpoint is not connected",
        libc::ETIMEDOUT => "connection timed out",
        libc::ECONNREFUSED => "connection refused",
        libc::EOPNOTSUPP => "operation not supported",
        libc::EDQUOT => "disk quota exceeded",
        libc::EPROTOTYPE => "protocol wrong type for socket",
        _ => return format!("errno {errno}"),
    };
    known.to_string()
}

/// Go's text for an `io::Error`: the errno string when there is one.
/// Rust rejects a NUL byte in a path before any syscall; Go reports that
/// case as `EINVAL`, so it maps to "invalid argument".
pub(crate) fn io_text(err: &io::Error) -> String {
    if let Some(errno) = err.raw_os_error() {
        return errno_text(errno);
    }
    match err.kind() {
        io::ErrorKind::InvalidInput => errno_text(libc::EINVAL),
        io::ErrorKind::NotFound => errno_text(libc::ENOENT),
        io::ErrorKind::PermissionDenied => errno_text(libc::EACCES),
        io::ErrorKind::UnexpectedEof => "unexpected EOF".to_string(),
        _ => err.to_string(),
    }
}

/// Go's `*PathError` text: `op path: text`.
pub(crate) fn path_error(op: &str, path: &str, err: &io::Error) -> String {
    format!("{op} {path}: {}", io_text(err))
}

/// Go's `strconv.Quote` (what `%q` prints): printable text raw, the usual
/// backslash escapes, `\xNN` for bytes that are not UTF-8.
pub(crate) fn go_quote(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{7}' => out.push_str("\\a"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{b}' => out.push_str("\\v"),
                c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
                c if !is_go_printable(c) => {
                    if (c as u32) < 0x10000 {
                        out.push_str(&format!("\\u{:04x}", c as u32));
                    } else {
                        out.push_str(&format!("\\U{:08x}", c as u32));
                    }
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
    out
}

/// Go's `strconv.IsPrint` beyond ASCII: everything but controls, spaces
/// other than U+0020, and the common format characters.
pub(crate) fn is_go_printable(c: char) -> bool {
    !(c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_matches_strconv_quote() {
        assert_eq!(go_quote(b"x"), "\"x\"");
        assert_eq!(go_quote(b"a\"b\\c\n\t\x01\x7f"), "\"a\\\"b\\\\c\\n\\t\\x01\\x7f\"");
        assert_eq!(go_quote("é".as_bytes()), "\"é\"");
        assert_eq!(go_quote(b"\xff"), "\"\\xff\"");
        assert_eq!(go_quote(b"a\0b"), "\"a\\x00b\"");
        assert_eq!(go_quote("\u{2028}".as_bytes()), "\"\\u2028\"");
    }

    #[test]
    fn texts_match_go() {
        let missing = std::fs::File::open("/definitely/not/here").unwrap_err();
        assert_eq!(
            path_error("open", "/definitely/not/here", &missing),
            "open /definitely/not/here: no such file or directory"
        );
        let nul = std::fs::metadata("/x/f\0x").unwrap_err();
        assert_eq!(path_error("stat", "/x/f\0x", &nul), "stat /x/f\0x: invalid argument");
        assert_eq!(errno_text(libc::EACCES), "permission denied");
        assert_eq!(errno_text(libc::ENOTDIR), "not a directory");
    }
}
