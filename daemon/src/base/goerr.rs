//! Go-style error text for errors that reach the wire.
//!
//! The reference reports OS failures with Go's formats: `*PathError` is
//! `op path: text` (`open /x: no such file or directory`) and the text is
//! Go's lower-case errno string, not Rust's `No such file or directory (os
//! error 2)`. Handlers build wire messages only through these helpers.

use std::io;

/// Go's `syscall.Errno.Error()` text for `errno` (the OS's own error
/// number: an errno on Unix, a Win32 error code on Windows; the table is
/// `sys::os::errno_text`).
pub(crate) fn errno_text(errno: i32) -> String {
    crate::sys::os::errno_text(errno)
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
