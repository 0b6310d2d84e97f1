//! The lexer of directive lines: tokens, C escapes, `$…` templates, and
//! the small argument checks every directive shares.

use super::*;

/// A lexed token of a directive line.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Bare(String),
    Quoted(String),
}

impl Tok {
    pub(super) fn text(&self) -> &str {
        match self {
            Tok::Bare(s) | Tok::Quoted(s) => s,
        }
    }
}

pub(super) struct LineCx<'a> {
    pub(super) file: &'a Path,
    pub(super) line: usize,
}

impl LineCx<'_> {
    pub(super) fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            file: self.file.to_path_buf(),
            line: self.line,
            message: message.into(),
        }
    }
}

pub(super) fn lex(cx: &LineCx, s: &str) -> Result<Vec<Tok>, ParseError> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if b[i] == b'"' {
            let start = i + 1;
            let mut j = start;
            loop {
                if j >= b.len() {
                    return Err(cx.err("unterminated quoted string"));
                }
                if b[j] == b'\\' {
                    j += 2;
                    continue;
                }
                if b[j] == b'"' {
                    break;
                }
                j += 1;
            }
            out.push(Tok::Quoted(s[start..j].to_string()));
            i = j + 1;
        } else {
            let start = i;
            // A bare token may contain `$f(…)` with spaces inside the parens.
            let mut depth = 0usize;
            while i < b.len() && (depth > 0 || !b[i].is_ascii_whitespace()) {
                match b[i] {
                    // `key="quoted value"`: the quotes belong to the token.
                    b'"' if i > start && b[i - 1] == b'=' => {
                        i += 1;
                        while i < b.len() && b[i] != b'"' {
                            if b[i] == b'\\' {
                                i += 1;
                            }
                            i += 1;
                        }
                        if i >= b.len() {
                            return Err(cx.err("unterminated quoted string"));
                        }
                    }
                    b'\\' => i += 1,
                    b'(' => depth += 1,
                    b')' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                i += 1;
            }
            out.push(Tok::Bare(s[start..i.min(b.len())].to_string()));
        }
    }
    Ok(out)
}

/// Splits off the first `n` whitespace-separated words; returns them and
/// the rest of the line (leading whitespace removed).
pub(super) fn words(s: &str, n: usize) -> (Vec<&str>, &str) {
    let mut out = Vec::new();
    let mut rest = s.trim_start();
    for _ in 0..n {
        if rest.is_empty() {
            break;
        }
        let end = rest.find(|c: char| c.is_ascii_whitespace()).unwrap_or(rest.len());
        out.push(&rest[..end]);
        rest = rest[end..].trim_start();
    }
    (out, rest)
}

pub(super) fn unescape_into(cx: &LineCx, s: &[u8], i: &mut usize, out: &mut Vec<u8>) -> Result<(), ParseError> {
    // s[*i] == b'\\'
    let c = *s.get(*i + 1).ok_or_else(|| cx.err("dangling backslash"))?;
    *i += 2;
    match c {
        b'n' => out.push(b'\n'),
        b'r' => out.push(b'\r'),
        b't' => out.push(b'\t'),
        b'0' => out.push(0),
        b'e' => out.push(0x1b),
        b'\\' => out.push(b'\\'),
        b'"' => out.push(b'"'),
        b'$' => out.push(b'$'),
        b'(' => out.push(b'('),
        b')' => out.push(b')'),
        b',' => out.push(b','),
        b'x' => {
            let h = s
                .get(*i..*i + 2)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| cx.err("\\x needs two hex digits"))?;
            out.push(h);
            *i += 2;
        }
        other => {
            return Err(cx.err(format!("unknown escape \\{}", other as char)));
        }
    }
    Ok(())
}

/// Parses a template. `escapes`: process C escapes at top level.
pub(super) fn parse_template(cx: &LineCx, s: &str, escapes: bool) -> Result<Template, ParseError> {
    let b = s.as_bytes();
    let mut i = 0;
    let t = parse_tmpl_until(cx, b, &mut i, escapes, None)?;
    Ok(t)
}

pub(super) fn parse_tmpl_until(
    cx: &LineCx,
    b: &[u8],
    i: &mut usize,
    escapes: bool,
    stop: Option<&[u8]>,
) -> Result<Template, ParseError> {
    let mut pieces = Vec::new();
    let mut lit = Vec::new();
    let mut depth = 0usize;
    while *i < b.len() {
        let c = b[*i];
        if let Some(stop) = stop {
            if depth == 0 && stop.contains(&c) {
                break;
            }
        }
        if escapes && c == b'\\' {
            unescape_into(cx, b, i, &mut lit)?;
            continue;
        }
        if c == b'(' {
            depth += 1;
        } else if c == b')' {
            depth = depth.saturating_sub(1);
        }
        if c == b'$' {
            let rest = &b[*i + 1..];
            let name_len = rest
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count();
            let name = std::str::from_utf8(&rest[..name_len]).unwrap_or("");
            if name.is_empty() {
                if rest.first() == Some(&b'$') {
                    lit.push(b'$');
                    *i += 2;
                    continue;
                }
                return Err(cx.err("`$` must start a template (use `$$` for a dollar sign)"));
            }
            if !lit.is_empty() {
                pieces.push(Piece::Lit(std::mem::take(&mut lit)));
            }
            *i += 1 + name_len;
            let simple = match name {
                "ROOT" => Some(Piece::Var(Var::Root)),
                "TOKEN" => Some(Piece::Var(Var::Token)),
                "SOCKET" => Some(Piece::Var(Var::Socket)),
                "RUN" => Some(Piece::Var(Var::Run)),
                "HOME" => Some(Piece::Var(Var::Home)),
                "FILL" => Some(Piece::Fill),
                _ => None,
            };
            if let Some(p) = simple {
                pieces.push(p);
                continue;
            }
            if b.get(*i) != Some(&b'(') {
                return Err(cx.err(format!("unknown template variable ${name}")));
            }
            *i += 1;
            pieces.push(template_fn(cx, b, i, name)?);
            continue;
        }
        lit.push(c);
        *i += 1;
    }
    if !lit.is_empty() {
        pieces.push(Piece::Lit(lit));
    }
    Ok(Template(pieces))
}

/// The `$name(…)` function whose `(` was just read: its piece, with the
/// closing `)` consumed.
fn template_fn(cx: &LineCx, b: &[u8], i: &mut usize, name: &str) -> Result<Piece, ParseError> {
    let piece = match name {
        "b64" => Piece::B64(parse_tmpl_until(cx, b, i, true, Some(b")"))?),
        "bytes" => Piece::Bytes(parse_tmpl_until(cx, b, i, true, Some(b")"))?),
        "file" => {
            // Contents of a file beside the probe, read as a raw payload
            // (templates expand, one trailing newline is dropped):
            // `harness capture` keeps large lines there.
            let start = *i;
            while *i < b.len() && b[*i] != b')' {
                *i += 1;
            }
            let rel = std::str::from_utf8(&b[start..*i]).unwrap_or("");
            let path = cx.file.parent().unwrap_or(Path::new(".")).join(rel);
            let text =
                std::fs::read_to_string(&path).map_err(|e| cx.err(format!("$file({rel}): {}: {e}", path.display())))?;
            let text = text.strip_suffix('\n').unwrap_or(&text);
            Piece::Bytes(parse_template(cx, text, false)?)
        }
        "repeat" => {
            let start = *i;
            while *i < b.len() && b[*i] != b',' {
                *i += 1;
            }
            let n: usize = std::str::from_utf8(&b[start..*i])
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| cx.err("$repeat(N,text): N must be a number"))?;
            if *i >= b.len() {
                return Err(cx.err("$repeat(N,text): missing comma"));
            }
            *i += 1;
            Piece::Repeat(n, parse_tmpl_until(cx, b, i, true, Some(b")"))?)
        }
        other => return Err(cx.err(format!("unknown template function ${other}(…)"))),
    };
    if b.get(*i) != Some(&b')') {
        return Err(cx.err(format!("${name}( is missing its closing parenthesis")));
    }
    *i += 1;
    Ok(piece)
}

pub(super) fn tok_template(cx: &LineCx, t: &Tok) -> Result<Template, ParseError> {
    match t {
        Tok::Bare(s) => parse_template(cx, s, false),
        Tok::Quoted(s) => parse_template(cx, s, true),
    }
}

pub(super) fn parse_mode(cx: &LineCx, s: &str) -> Result<u32, ParseError> {
    u32::from_str_radix(s, 8).map_err(|_| cx.err(format!("bad octal mode {s:?}")))
}

pub(super) fn is_mode(s: &str) -> bool {
    s.len() >= 3 && s.len() <= 5 && s.bytes().all(|c| (b'0'..=b'7').contains(&c))
}

pub(super) fn conn_name(cx: &LineCx, s: Option<&str>) -> Result<String, ParseError> {
    let s = s.ok_or_else(|| cx.err("missing connection name"))?;
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-') {
        return Err(cx.err(format!("bad connection name {s:?}")));
    }
    Ok(s.to_string())
}

pub(super) fn parse_ms(cx: &LineCx, s: Option<&str>) -> Result<u64, ParseError> {
    s.and_then(|s| s.parse().ok())
        .ok_or_else(|| cx.err("expected a duration in milliseconds"))
}

/// Validates that `id` is a JSON value (the reply id to wait for).
pub(super) fn check_id(cx: &LineCx, id: &str) -> Result<String, ParseError> {
    serde_json::from_str::<Value>(id).map_err(|e| cx.err(format!("reply id {id:?} is not JSON: {e}")))?;
    Ok(id.to_string())
}
