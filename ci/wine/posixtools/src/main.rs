//! A multi-call stand-in for the GNU coreutils the probes run by name,
//! for a Windows daemon under Wine (see Cargo.toml). Which tool runs is
//! the name of the executable (`sleep.exe` is `sleep`). Each tool does
//! what GNU coreutils does for the arguments the probes pass, byte for
//! byte on stdout and stderr and in the exit code; any other use is
//! refused on stderr with exit 125, so a probe that starts needing more
//! fails loudly instead of passing by chance.
//!
//! | tool | what the probes use |
//! | --- | --- |
//! | `true`, `false` | any arguments, exit 0 / 1 |
//! | `sleep N` | whole or decimal seconds |
//! | `printf FORMAT [ARG...]` | text, `\` escapes (`\n`, `\\`, `\NNN` octal, ...), `%s`, `%d`, `%%`, the format reused while arguments remain |
//! | `head -n N`, `head -c N [FILE]` | from stdin, or `/dev/zero` (the zero device); written through a 4 KiB buffer as GNU's stdio does on a pipe, so a partial line waits for the exit |
//! | `cat` | stdin to stdout, each read written at once (GNU cat does not buffer) |
//! | `wc -c` | the count of stdin's bytes |
//! | `seq [FIRST] LAST` | integers, one a line |

use std::io::{Read, Write};
use std::process::ExitCode;

/// The tools this program stands in for, as `--list` prints them.
const TOOLS: &[&str] = &["true", "false", "sleep", "printf", "head", "cat", "wc", "seq"];

fn main() -> ExitCode {
    let args: Vec<Vec<u8>> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned().into_bytes())
        .collect();
    let name = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().to_ascii_lowercase()))
        .unwrap_or_default();
    let mut out = std::io::stdout().lock();
    let code = match name.as_str() {
        "true" => 0,
        "false" => 1,
        "sleep" => sleep(&args),
        "printf" => printf(&args, &mut out),
        "head" => head(&args, &mut out),
        "cat" if args.is_empty() => copy(&mut std::io::stdin().lock(), &mut out, u64::MAX, true),
        "wc" if args == [b"-c".to_vec()] => wc_c(&mut out),
        "seq" => seq(&args, &mut out),
        _ if args.first().map(Vec::as_slice) == Some(b"--list") => {
            let _ = writeln!(out, "{}", TOOLS.join("\n"));
            0
        }
        _ => unsupported(&name, &args),
    };
    let _ = out.flush();
    ExitCode::from(code)
}

/// A use the probes do not make.
fn unsupported(name: &str, args: &[Vec<u8>]) -> u8 {
    let args: Vec<_> = args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    eprintln!("posixtools: `{name}` with {args:?} is not a use this stand-in supports");
    125
}

fn sleep(args: &[Vec<u8>]) -> u8 {
    let [secs] = args else { return unsupported("sleep", args) };
    match String::from_utf8_lossy(secs).parse::<f64>() {
        Ok(s) if s >= 0.0 && s.is_finite() => {
            std::thread::sleep(std::time::Duration::from_secs_f64(s));
            0
        }
        _ => unsupported("sleep", args),
    }
}

/// GNU printf's backslash escape at `s[i]` (just after the `\`): the
/// bytes it stands for and how many bytes of `s` it took.
fn escape(s: &[u8], i: usize) -> (Vec<u8>, usize) {
    let Some(&c) = s.get(i) else { return (b"\\".to_vec(), 0) };
    let simple = match c {
        b'\\' => Some(b'\\'),
        b'"' => Some(b'"'),
        b'a' => Some(7),
        b'b' => Some(8),
        b'f' => Some(12),
        b'n' => Some(b'\n'),
        b'r' => Some(b'\r'),
        b't' => Some(b'\t'),
        b'v' => Some(11),
        _ => None,
    };
    if let Some(b) = simple {
        return (vec![b], 1);
    }
    if (b'0'..=b'7').contains(&c) {
        // Up to three octal digits (a leading 0 counts as one of them).
        let mut v: u32 = 0;
        let mut n = 0;
        while n < 3 && s.get(i + n).is_some_and(|d| (b'0'..=b'7').contains(d)) {
            v = v * 8 + u32::from(s[i + n] - b'0');
            n += 1;
        }
        return (vec![v as u8], n);
    }
    if c == b'x' {
        let mut v: u32 = 0;
        let mut n = 0;
        while n < 2 && s.get(i + 1 + n).is_some_and(u8::is_ascii_hexdigit) {
            v = v * 16 + (s[i + 1 + n] as char).to_digit(16).unwrap_or(0);
            n += 1;
        }
        if n > 0 {
            return (vec![v as u8], 1 + n);
        }
    }
    // Unknown: the backslash and the character stay.
    (vec![b'\\', c], 1)
}

/// `printf FORMAT [ARG...]` for `%s`, `%d`, `%%` and escapes; the format
/// is reused while arguments remain, as POSIX says.
fn printf(args: &[Vec<u8>], out: &mut impl Write) -> u8 {
    let Some((format, mut rest)) = args.split_first() else {
        return unsupported("printf", args);
    };
    let mut buf = Vec::new();
    loop {
        let mut used = false;
        let mut i = 0;
        while i < format.len() {
            match format[i] {
                b'\\' => {
                    let (bytes, took) = escape(format, i + 1);
                    buf.extend_from_slice(&bytes);
                    i += 1 + took;
                }
                b'%' => {
                    match format.get(i + 1) {
                        Some(b'%') => buf.push(b'%'),
                        Some(b's') | Some(b'd') => {
                            let arg = rest.first().map(Vec::as_slice).unwrap_or_default();
                            if format[i + 1] == b'd' {
                                let text = if arg.is_empty() { b"0".as_slice() } else { arg };
                                if std::str::from_utf8(text).ok().and_then(|t| t.parse::<i64>().ok()).is_none() {
                                    return unsupported("printf", args);
                                }
                                buf.extend_from_slice(text);
                            } else {
                                buf.extend_from_slice(arg);
                            }
                            if !rest.is_empty() {
                                rest = &rest[1..];
                            }
                            used = true;
                        }
                        _ => return unsupported("printf", args),
                    }
                    i += 2;
                }
                b => {
                    buf.push(b);
                    i += 1;
                }
            }
        }
        if rest.is_empty() || !used {
            break;
        }
    }
    if out.write_all(&buf).is_err() {
        return 1;
    }
    0
}

/// Copies at most `limit` bytes of `from` to `out`, each read flushed at
/// once when `flush_each` (a reader on the other side sees it as it
/// comes), else left to `out`'s buffer.
fn copy(from: &mut impl Read, out: &mut impl Write, mut limit: u64, flush_each: bool) -> u8 {
    let mut buf = vec![0u8; 64 * 1024];
    while limit > 0 {
        let want = buf.len().min(usize::try_from(limit).unwrap_or(usize::MAX));
        match from.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => {
                if out.write_all(&buf[..n]).is_err() || (flush_each && out.flush().is_err()) {
                    return 1;
                }
                limit -= n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // A closed pipe reads as its end on Windows.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
            Err(_) => return 1,
        }
    }
    0
}

/// `head -n N` and `head -c N [FILE]` (module doc).
fn head(args: &[Vec<u8>], out: &mut impl Write) -> u8 {
    let (flag, count, file) = match args {
        [f, n] => (f.as_slice(), n, None),
        [f, n, file] => (f.as_slice(), n, Some(file.as_slice())),
        _ => return unsupported("head", args),
    };
    let Some(count) = std::str::from_utf8(count).ok().and_then(|c| c.parse::<u64>().ok()) else {
        return unsupported("head", args);
    };
    // GNU head writes through stdio, fully buffered on a pipe (4 KiB, the
    // pipe's st_blksize).
    let mut out = std::io::BufWriter::with_capacity(4096, out);
    let code = match (flag, file) {
        (b"-c", None) => copy(&mut std::io::stdin().lock(), &mut out, count, false),
        (b"-c", Some(b"/dev/zero")) => copy(&mut std::io::repeat(0), &mut out, count, false),
        (b"-n", None) => head_lines(count, &mut out),
        _ => unsupported("head", args),
    };
    match out.flush() {
        Ok(()) => code,
        Err(_) => 1,
    }
}

/// The first `lines` lines of stdin; at the last newline wanted, head
/// stops reading and exits.
fn head_lines(mut lines: u64, out: &mut impl Write) -> u8 {
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0u8; 64 * 1024];
    while lines > 0 {
        let n = match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
            Err(_) => return 1,
        };
        let mut end = n;
        for (i, b) in buf[..n].iter().enumerate() {
            if *b == b'\n' {
                lines -= 1;
                if lines == 0 {
                    end = i + 1;
                    break;
                }
            }
        }
        if out.write_all(&buf[..end]).is_err() {
            return 1;
        }
    }
    0
}

/// `wc -c` of stdin: the count alone, no padding, as GNU prints one
/// count of standard input.
fn wc_c(out: &mut impl Write) -> u8 {
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
            Err(_) => return 1,
        }
    }
    if writeln!(out, "{total}").is_err() {
        return 1;
    }
    0
}

/// `seq [FIRST] LAST` for integers.
fn seq(args: &[Vec<u8>], out: &mut impl Write) -> u8 {
    let num = |a: &Vec<u8>| std::str::from_utf8(a).ok().and_then(|t| t.parse::<i64>().ok());
    let (first, last) = match args {
        [last] => (Some(1), num(last)),
        [first, last] => (num(first), num(last)),
        _ => (None, None),
    };
    let (Some(first), Some(last)) = (first, last) else {
        return unsupported("seq", args);
    };
    let mut text = String::new();
    for i in first..=last {
        text.push_str(&i.to_string());
        text.push('\n');
    }
    if out.write_all(text.as_bytes()).is_err() {
        return 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_printf(args: &[&[u8]]) -> Vec<u8> {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        let mut out = Vec::new();
        assert_eq!(printf(&args, &mut out), 0);
        out
    }

    #[test]
    fn printf_does_what_the_probes_ask() {
        assert_eq!(run_printf(&[b"hello\\n"]), b"hello\n");
        assert_eq!(run_printf(&[b"\\377\\376\\000x"]), b"\xff\xfe\x00x");
        assert_eq!(run_printf(&[b"%s|%s|%s", b"a b", b"$HOME", "é<>".as_bytes()]), "a b|$HOME|é<>".as_bytes());
        assert_eq!(run_printf(&[b"%s,", b"a", b"b"]), b"a,b,");
        assert_eq!(run_printf(&[b"x"]), b"x");
        assert_eq!(run_printf(&[b"100%%\\t\\\\"]), b"100%\t\\");
        assert_eq!(run_printf(&[b"%s-%s.", b"1"]), b"1-.");
    }

    #[test]
    fn seq_counts_lines() {
        let mut out = Vec::new();
        assert_eq!(seq(&[b"1".to_vec(), b"3".to_vec()], &mut out), 0);
        assert_eq!(out, b"1\n2\n3\n");
    }

    #[test]
    fn head_c_of_the_zero_device() {
        let mut out = Vec::new();
        assert_eq!(copy(&mut std::io::repeat(0), &mut out, 100_000, false), 0);
        assert_eq!(out, vec![0u8; 100_000]);
    }
}
