//! The probe language: parsing `probes/<name>.probe` files into [`Probe`]s.
//!
//! A probe is line oriented: one directive per line, `#` starts a comment
//! line, blank lines are ignored. The grammar is documented in
//! `docs/PROBES.md`; every parse error names the file and the line.
//!
//! Arguments are whitespace separated *tokens*. A token is either bare
//! (`$ROOT/a.txt`) or double-quoted (`"hello\n"`). Bare tokens and the
//! rest-of-line payloads of `send`/`call` are *raw* templates: backslashes
//! are kept verbatim (so JSON escapes pass through untouched) and only
//! `$…` templates expand. Quoted tokens additionally process C escapes
//! (`\n \r \t \0 \\ \" \xNN`). See [`Template`].

use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A parse error, pointing at a probe file and line.
#[derive(Debug)]
pub struct ParseError {
    pub file: PathBuf,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

/// A variable a template can reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Var {
    /// The fixture root (the daemon's working directory).
    Root,
    /// The auth token (token file contents minus one line ending).
    Token,
    /// The daemon's socket path.
    Socket,
    /// The per-run directory holding root, home, socket and token.
    Run,
    /// The `HOME` the daemon and commands run with.
    Home,
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Lit(Vec<u8>),
    Var(Var),
    /// `$b64(…)`: standard base64 of the expanded argument.
    B64(Template),
    /// `$repeat(N,…)`: the expanded argument N times.
    Repeat(usize, Template),
    /// `$bytes(…)`: the argument with C escapes processed (in raw context).
    Bytes(Template),
    /// `$FILL`: padding of `x` computed by `sendn`.
    Fill,
}

/// A byte template: literal bytes interleaved with `$…` expansions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Template(pub Vec<Piece>);

/// Values the template variables expand to.
#[derive(Debug, Clone, Default)]
pub struct Ctx {
    pub root: String,
    pub token: Vec<u8>,
    pub socket: String,
    pub run: String,
    pub home: String,
}

impl Template {
    /// A literal template.
    #[cfg(test)]
    pub fn lit(bytes: impl Into<Vec<u8>>) -> Template {
        Template(vec![Piece::Lit(bytes.into())])
    }

    /// Expands the template; `$FILL` becomes `fill` bytes of `x`.
    pub fn expand_fill(&self, ctx: &Ctx, fill: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for p in &self.0 {
            match p {
                Piece::Lit(b) => out.extend_from_slice(b),
                Piece::Var(v) => out.extend_from_slice(match v {
                    Var::Root => ctx.root.as_bytes(),
                    Var::Token => &ctx.token,
                    Var::Socket => ctx.socket.as_bytes(),
                    Var::Run => ctx.run.as_bytes(),
                    Var::Home => ctx.home.as_bytes(),
                }),
                Piece::B64(t) => {
                    use base64::Engine;
                    let raw = t.expand_fill(ctx, fill);
                    out.extend_from_slice(base64::engine::general_purpose::STANDARD.encode(raw).as_bytes());
                }
                Piece::Repeat(n, t) => {
                    let raw = t.expand_fill(ctx, fill);
                    for _ in 0..*n {
                        out.extend_from_slice(&raw);
                    }
                }
                Piece::Bytes(t) => out.extend(t.expand_fill(ctx, fill)),
                Piece::Fill => out.extend(std::iter::repeat_n(b'x', fill)),
            }
        }
        out
    }

    /// Expands the template.
    pub fn expand(&self, ctx: &Ctx) -> Vec<u8> {
        self.expand_fill(ctx, 0)
    }

    /// Expands as a (lossy) string, for command arguments and paths.
    pub fn expand_str(&self, ctx: &Ctx) -> String {
        String::from_utf8_lossy(&self.expand(ctx)).into_owned()
    }

    fn has_fill(&self) -> bool {
        self.0.iter().any(|p| match p {
            Piece::Fill => true,
            Piece::B64(t) | Piece::Repeat(_, t) | Piece::Bytes(t) => t.has_fill(),
            Piece::Lit(_) | Piece::Var(_) => false,
        })
    }
}

/// How a fixture archive is encoded on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TarFormat {
    /// A gzip-compressed tar (the normal case).
    Gzip,
    /// The tar stream without compression (so: bad gzip magic).
    Plain,
    /// The first half of a valid gzip stream.
    Truncated,
    /// Bytes that are not gzip at all.
    Garbage,
}

/// The kind of one entry of a fixture archive.
#[derive(Debug, Clone, PartialEq)]
pub enum TarKind {
    File(Template),
    Dir,
    Symlink(Template),
    Hardlink(Template),
    CharDev(u32, u32),
    BlockDev(u32, u32),
    Fifo,
}

/// One entry of a fixture archive; the name is written verbatim.
#[derive(Debug, Clone, PartialEq)]
pub struct TarEntry {
    pub name: Template,
    pub mode: u32,
    pub kind: TarKind,
}

/// One directive of a probe, in execution order.
#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    File {
        path: Template,
        mode: u32,
        content: Template,
    },
    Dir {
        path: Template,
        mode: u32,
    },
    Symlink {
        path: Template,
        target: Template,
    },
    Hardlink {
        path: Template,
        target: Template,
    },
    Fifo {
        path: Template,
    },
    Chmod {
        mode: u32,
        path: Template,
    },
    Git {
        args: Vec<Template>,
    },
    Sh {
        command: Template,
    },
    Tar {
        path: Template,
        format: TarFormat,
        entries: Vec<TarEntry>,
    },
    Start {
        args: Vec<Template>,
    },
    Connect {
        conn: String,
        bridge: bool,
    },
    Send {
        conn: String,
        line: Template,
        /// `sendn`: the exact line length (without the newline).
        len: Option<usize>,
    },
    Raw {
        conn: String,
        bytes: Template,
    },
    Call {
        conn: String,
        id: String,
        method: String,
        params: Option<Template>,
    },
    Await {
        conn: String,
        id: String,
    },
    AwaitExit {
        conn: String,
        proc_id: String,
    },
    AwaitOutput {
        conn: String,
        proc_id: String,
        stream: String,
        needle: Template,
    },
    AwaitFrames {
        conn: String,
        count: usize,
    },
    AwaitClose {
        conn: String,
    },
    AwaitGone,
    Quiet {
        conn: String,
        ms: u64,
    },
    Close {
        conn: String,
    },
    Sleep {
        ms: u64,
    },
    Run {
        stdin: Option<Template>,
        env: Vec<(String, Template)>,
        args: Vec<Template>,
        timeout_ms: Option<u64>,
    },
    Snapshot,
    Log {
        pattern: String,
    },
}

impl StepKind {
    /// Whether this step is a fixture (runs before the daemon exists).
    pub fn is_fixture(&self) -> bool {
        matches!(
            self,
            StepKind::File { .. }
                | StepKind::Dir { .. }
                | StepKind::Symlink { .. }
                | StepKind::Hardlink { .. }
                | StepKind::Fifo { .. }
                | StepKind::Chmod { .. }
                | StepKind::Git { .. }
                | StepKind::Sh { .. }
                | StepKind::Tar { .. }
        )
    }
}

/// A step with the probe line it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub line: usize,
    pub kind: StepKind,
}

/// A divergence marked as intentional.
#[derive(Debug, Clone, PartialEq)]
pub struct Accept {
    /// Glob (`*`, `?`) over transcript entry keys.
    pub pattern: String,
    pub reason: String,
}

/// A parsed probe.
#[derive(Debug, Clone)]
pub struct Probe {
    pub name: String,
    pub path: PathBuf,
    pub desc: String,
    /// Token file contents.
    pub token_file: Vec<u8>,
    pub timeout: Duration,
    pub env: Vec<(String, String)>,
    pub accepts: Vec<Accept>,
    /// JSON keys whose numeric values depend on pipe scheduling (e.g. a
    /// reattach `lastSeq` after multi-frame output): masked before compare.
    pub masks: Vec<String>,
    pub steps: Vec<Step>,
}

impl Probe {
    /// `$TOKEN`: the token file minus one trailing `\n` / `\r\n`.
    pub fn token(&self) -> Vec<u8> {
        let mut t = self.token_file.clone();
        if t.ends_with(b"\n") {
            t.pop();
            if t.ends_with(b"\r") {
                t.pop();
            }
        }
        t
    }
}

/// A lexed token of a directive line.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Bare(String),
    Quoted(String),
}

impl Tok {
    fn text(&self) -> &str {
        match self {
            Tok::Bare(s) | Tok::Quoted(s) => s,
        }
    }
}

struct LineCx<'a> {
    file: &'a Path,
    line: usize,
}

impl LineCx<'_> {
    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            file: self.file.to_path_buf(),
            line: self.line,
            message: message.into(),
        }
    }
}

fn lex(cx: &LineCx, s: &str) -> Result<Vec<Tok>, ParseError> {
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
fn words(s: &str, n: usize) -> (Vec<&str>, &str) {
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

fn unescape_into(cx: &LineCx, s: &[u8], i: &mut usize, out: &mut Vec<u8>) -> Result<(), ParseError> {
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
fn parse_template(cx: &LineCx, s: &str, escapes: bool) -> Result<Template, ParseError> {
    let b = s.as_bytes();
    let mut i = 0;
    let t = parse_tmpl_until(cx, b, &mut i, escapes, None)?;
    Ok(t)
}

fn parse_tmpl_until(
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
            let piece = match name {
                "b64" => Piece::B64(parse_tmpl_until(cx, b, i, true, Some(b")"))?),
                "bytes" => Piece::Bytes(parse_tmpl_until(cx, b, i, true, Some(b")"))?),
                "file" => {
                    // Contents of a file beside the probe, read as a raw
                    // payload (templates expand, one trailing newline is
                    // dropped): `harness capture` keeps large lines there.
                    let start = *i;
                    while *i < b.len() && b[*i] != b')' {
                        *i += 1;
                    }
                    let rel = std::str::from_utf8(&b[start..*i]).unwrap_or("");
                    let path = cx.file.parent().unwrap_or(Path::new(".")).join(rel);
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| cx.err(format!("$file({rel}): {}: {e}", path.display())))?;
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
            pieces.push(piece);
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

fn tok_template(cx: &LineCx, t: &Tok) -> Result<Template, ParseError> {
    match t {
        Tok::Bare(s) => parse_template(cx, s, false),
        Tok::Quoted(s) => parse_template(cx, s, true),
    }
}

fn parse_mode(cx: &LineCx, s: &str) -> Result<u32, ParseError> {
    u32::from_str_radix(s, 8).map_err(|_| cx.err(format!("bad octal mode {s:?}")))
}

fn is_mode(s: &str) -> bool {
    s.len() >= 3 && s.len() <= 5 && s.bytes().all(|c| (b'0'..=b'7').contains(&c))
}

fn conn_name(cx: &LineCx, s: Option<&str>) -> Result<String, ParseError> {
    let s = s.ok_or_else(|| cx.err("missing connection name"))?;
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-') {
        return Err(cx.err(format!("bad connection name {s:?}")));
    }
    Ok(s.to_string())
}

fn parse_ms(cx: &LineCx, s: Option<&str>) -> Result<u64, ParseError> {
    s.and_then(|s| s.parse().ok())
        .ok_or_else(|| cx.err("expected a duration in milliseconds"))
}

/// Validates that `id` is a JSON value (the reply id to wait for).
fn check_id(cx: &LineCx, id: &str) -> Result<String, ParseError> {
    serde_json::from_str::<Value>(id).map_err(|e| cx.err(format!("reply id {id:?} is not JSON: {e}")))?;
    Ok(id.to_string())
}

/// Parses probe text; `path` is used for the name and error messages.
pub fn parse(path: &Path, text: &str) -> Result<Probe, ParseError> {
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut probe = Probe {
        name,
        path: path.to_path_buf(),
        desc: String::new(),
        token_file: b"probe-token\n".to_vec(),
        timeout: Duration::from_secs(20),
        env: Vec::new(),
        accepts: Vec::new(),
        masks: Vec::new(),
        steps: Vec::new(),
    };
    let mut pending_accept: Option<String> = None;
    let lines: Vec<&str> = text.lines().collect();
    let mut idx = 0;
    while idx < lines.len() {
        let lineno = idx + 1;
        let raw = lines[idx];
        idx += 1;
        let cx = LineCx {
            file: path,
            line: lineno,
        };
        let trimmed = raw.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (head, rest) = words(trimmed, 1);
        let cmd = head[0];
        let kind = match cmd {
            "desc" => {
                if !probe.desc.is_empty() {
                    probe.desc.push(' ');
                }
                probe.desc.push_str(rest.trim_end());
                continue;
            }
            "token" => {
                let toks = lex(&cx, rest)?;
                let [t] = toks.as_slice() else {
                    return Err(cx.err("token takes one string"));
                };
                probe.token_file = tok_template(&cx, t)?.expand(&Ctx::default());
                continue;
            }
            "timeout" => {
                probe.timeout = Duration::from_millis(parse_ms(&cx, Some(rest.trim()))?);
                continue;
            }
            "env" => {
                let (k, v) = rest
                    .trim()
                    .split_once('=')
                    .ok_or_else(|| cx.err("env takes KEY=VALUE"))?;
                probe.env.push((k.to_string(), v.to_string()));
                continue;
            }
            "accept" => {
                let (pat, reason) = rest
                    .split_once('|')
                    .ok_or_else(|| cx.err("accept takes `<key glob> | <reason>`"))?;
                if reason.trim().is_empty() {
                    return Err(cx.err("an accepted divergence needs a reason"));
                }
                probe.accepts.push(Accept {
                    pattern: pat.trim().to_string(),
                    reason: reason.trim().to_string(),
                });
                continue;
            }
            "mask" => {
                let key = rest.trim();
                if key.is_empty() || key.contains(char::is_whitespace) {
                    return Err(cx.err("mask takes one JSON key"));
                }
                probe.masks.push(key.to_string());
                continue;
            }
            "accept-next" => {
                if rest.trim().is_empty() {
                    return Err(cx.err("an accepted divergence needs a reason"));
                }
                pending_accept = Some(rest.trim().to_string());
                continue;
            }
            "file" => {
                let toks = lex(&cx, rest)?;
                let (path, mode, content) = match toks.as_slice() {
                    [p, m, c] if is_mode(m.text()) => (p, parse_mode(&cx, m.text())?, c),
                    [p, c] => (p, 0o644, c),
                    _ => return Err(cx.err("file <path> [<mode>] <content>")),
                };
                StepKind::File {
                    path: tok_template(&cx, path)?,
                    mode,
                    content: tok_template(&cx, content)?,
                }
            }
            "dir" => {
                let toks = lex(&cx, rest)?;
                let (path, mode) = match toks.as_slice() {
                    [p, m] => (p, parse_mode(&cx, m.text())?),
                    [p] => (p, 0o755),
                    _ => return Err(cx.err("dir <path> [<mode>]")),
                };
                StepKind::Dir {
                    path: tok_template(&cx, path)?,
                    mode,
                }
            }
            "symlink" | "hardlink" => {
                let toks = lex(&cx, rest)?;
                let [p, t] = toks.as_slice() else {
                    return Err(cx.err(format!("{cmd} <path> <target>")));
                };
                let (path, target) = (tok_template(&cx, p)?, tok_template(&cx, t)?);
                if cmd == "symlink" {
                    StepKind::Symlink { path, target }
                } else {
                    StepKind::Hardlink { path, target }
                }
            }
            "fifo" => {
                let toks = lex(&cx, rest)?;
                let [p] = toks.as_slice() else {
                    return Err(cx.err("fifo <path>"));
                };
                StepKind::Fifo {
                    path: tok_template(&cx, p)?,
                }
            }
            "chmod" => {
                let toks = lex(&cx, rest)?;
                let [m, p] = toks.as_slice() else {
                    return Err(cx.err("chmod <mode> <path>"));
                };
                StepKind::Chmod {
                    mode: parse_mode(&cx, m.text())?,
                    path: tok_template(&cx, p)?,
                }
            }
            "git" => {
                let toks = lex(&cx, rest)?;
                StepKind::Git {
                    args: toks.iter().map(|t| tok_template(&cx, t)).collect::<Result<_, _>>()?,
                }
            }
            "sh" => StepKind::Sh {
                command: parse_template(&cx, rest.trim_end(), false)?,
            },
            "tar" => {
                let toks = lex(&cx, rest)?;
                let (p, format) = match toks.as_slice() {
                    [p] => (p, TarFormat::Gzip),
                    [p, f] => (
                        p,
                        match f.text() {
                            "gzip" => TarFormat::Gzip,
                            "plain" => TarFormat::Plain,
                            "truncated" => TarFormat::Truncated,
                            "garbage" => TarFormat::Garbage,
                            other => return Err(cx.err(format!("unknown tar format {other:?}"))),
                        },
                    ),
                    _ => return Err(cx.err("tar <path> [gzip|plain|truncated|garbage]")),
                };
                let path = tok_template(&cx, p)?;
                let mut entries = Vec::new();
                loop {
                    let Some(l) = lines.get(idx) else {
                        return Err(cx.err("tar block without `end`"));
                    };
                    let ecx = LineCx {
                        file: path_of(&cx),
                        line: idx + 1,
                    };
                    idx += 1;
                    let t = l.trim();
                    if t.is_empty() || t.starts_with('#') {
                        continue;
                    }
                    if t == "end" {
                        break;
                    }
                    entries.push(parse_tar_entry(&ecx, t)?);
                }
                StepKind::Tar { path, format, entries }
            }
            "start" => {
                let toks = lex(&cx, rest)?;
                StepKind::Start {
                    args: toks.iter().map(|t| tok_template(&cx, t)).collect::<Result<_, _>>()?,
                }
            }
            "connect" => {
                let (w, extra) = words(rest, 2);
                if !extra.is_empty() {
                    return Err(cx.err("connect <conn> [bridge]"));
                }
                let bridge = match w.get(1) {
                    None => false,
                    Some(&"bridge") => true,
                    Some(other) => return Err(cx.err(format!("unknown transport {other:?}"))),
                };
                StepKind::Connect {
                    conn: conn_name(&cx, w.first().copied())?,
                    bridge,
                }
            }
            "send" => {
                let (w, payload) = words(rest, 1);
                StepKind::Send {
                    conn: conn_name(&cx, w.first().copied())?,
                    line: parse_template(&cx, payload.trim_end(), false)?,
                    len: None,
                }
            }
            "sendn" => {
                let (w, payload) = words(rest, 2);
                let len = w
                    .get(1)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| cx.err("sendn <conn> <length> <line with $FILL>"))?;
                let line = parse_template(&cx, payload.trim_end(), false)?;
                if !line.has_fill() {
                    return Err(cx.err("sendn needs a $FILL in its line"));
                }
                StepKind::Send {
                    conn: conn_name(&cx, w.first().copied())?,
                    line,
                    len: Some(len),
                }
            }
            "raw" => {
                let (w, payload) = words(rest, 1);
                let toks = lex(&cx, payload)?;
                let mut pieces = Vec::new();
                for t in &toks {
                    pieces.extend(tok_template(&cx, t)?.0);
                }
                StepKind::Raw {
                    conn: conn_name(&cx, w.first().copied())?,
                    bytes: Template(pieces),
                }
            }
            "call" => {
                let (w, params) = words(rest, 3);
                if w.len() < 3 {
                    return Err(cx.err("call <conn> <id> <method> [<params json>]"));
                }
                let params = params.trim_end();
                StepKind::Call {
                    conn: conn_name(&cx, Some(w[0]))?,
                    id: check_id(&cx, w[1])?,
                    method: w[2].to_string(),
                    params: if params.is_empty() {
                        None
                    } else {
                        Some(parse_template(&cx, params, false)?)
                    },
                }
            }
            "await" => {
                let (w, id) = words(rest, 1);
                StepKind::Await {
                    conn: conn_name(&cx, w.first().copied())?,
                    id: check_id(&cx, id.trim())?,
                }
            }
            "await-exit" => {
                let (w, extra) = words(rest, 2);
                if w.len() != 2 || !extra.is_empty() {
                    return Err(cx.err("await-exit <conn> <process id>"));
                }
                StepKind::AwaitExit {
                    conn: conn_name(&cx, Some(w[0]))?,
                    proc_id: w[1].to_string(),
                }
            }
            "await-output" => {
                let (w, needle) = words(rest, 3);
                if w.len() != 3 || !matches!(w[2], "stdout" | "stderr") {
                    return Err(cx.err("await-output <conn> <process id> stdout|stderr <text>"));
                }
                let toks = lex(&cx, needle)?;
                let [t] = toks.as_slice() else {
                    return Err(cx.err("await-output needs one text argument"));
                };
                StepKind::AwaitOutput {
                    conn: conn_name(&cx, Some(w[0]))?,
                    proc_id: w[1].to_string(),
                    stream: w[2].to_string(),
                    needle: tok_template(&cx, t)?,
                }
            }
            "await-frames" => {
                let (w, _) = words(rest, 2);
                StepKind::AwaitFrames {
                    conn: conn_name(&cx, w.first().copied())?,
                    count: w
                        .get(1)
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| cx.err("await-frames <conn> <count>"))?,
                }
            }
            "await-close" => StepKind::AwaitClose {
                conn: conn_name(&cx, Some(rest.trim()))?,
            },
            "await-gone" => StepKind::AwaitGone,
            "quiet" => {
                let (w, _) = words(rest, 2);
                StepKind::Quiet {
                    conn: conn_name(&cx, w.first().copied())?,
                    ms: parse_ms(&cx, w.get(1).copied())?,
                }
            }
            "close" => StepKind::Close {
                conn: conn_name(&cx, Some(rest.trim()))?,
            },
            "sleep" => StepKind::Sleep {
                ms: parse_ms(&cx, Some(rest.trim()))?,
            },
            "run" => parse_run(&cx, rest)?,
            "snapshot" => StepKind::Snapshot,
            "log" => {
                if rest.trim().is_empty() {
                    return Err(cx.err("log <substring>"));
                }
                StepKind::Log {
                    pattern: rest.trim().to_string(),
                }
            }
            other => return Err(cx.err(format!("unknown directive {other:?}"))),
        };
        if let Some(reason) = pending_accept.take() {
            probe.accepts.push(Accept {
                pattern: format!("L{lineno} *"),
                reason,
            });
        }
        probe.steps.push(Step { line: lineno, kind });
    }
    if pending_accept.is_some() {
        return Err(ParseError {
            file: path.to_path_buf(),
            line: lines.len(),
            message: "accept-next at the end of the probe applies to nothing".into(),
        });
    }
    Ok(probe)
}

fn path_of<'a>(cx: &LineCx<'a>) -> &'a Path {
    cx.file
}

fn parse_run(cx: &LineCx, rest: &str) -> Result<StepKind, ParseError> {
    let toks = lex(cx, rest)?;
    let sep = toks
        .iter()
        .position(|t| t == &Tok::Bare("--".into()))
        .ok_or_else(|| cx.err("run [stdin=<text>] [env=K=V]… [timeout=<ms>] -- <args>…"))?;
    let mut stdin = None;
    let mut env = Vec::new();
    let mut timeout_ms = None;
    let mut i = 0;
    while i < sep {
        let t = toks[i].text();
        let (k, v) = t
            .split_once('=')
            .ok_or_else(|| cx.err(format!("bad run option {t:?}")))?;
        // `stdin=` may be followed by a separate quoted token.
        let value_tok = if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
            Tok::Quoted(v[1..v.len() - 1].to_string())
        } else {
            Tok::Bare(v.to_string())
        };
        match k {
            "stdin" => stdin = Some(tok_template(cx, &value_tok)?),
            "env" => {
                let text = value_tok.text().to_string();
                let (ek, ev) = text.split_once('=').ok_or_else(|| cx.err("env=KEY=VALUE"))?;
                let vt = if ev.len() >= 2 && ev.starts_with('"') && ev.ends_with('"') {
                    Tok::Quoted(ev[1..ev.len() - 1].to_string())
                } else {
                    match value_tok {
                        Tok::Quoted(_) => Tok::Quoted(ev.to_string()),
                        Tok::Bare(_) => Tok::Bare(ev.to_string()),
                    }
                };
                env.push((ek.to_string(), tok_template(cx, &vt)?));
            }
            "timeout" => timeout_ms = Some(parse_ms(cx, Some(value_tok.text()))?),
            other => return Err(cx.err(format!("unknown run option {other:?}"))),
        }
        i += 1;
    }
    Ok(StepKind::Run {
        stdin,
        env,
        args: toks[sep + 1..]
            .iter()
            .map(|t| tok_template(cx, t))
            .collect::<Result<_, _>>()?,
        timeout_ms,
    })
}

fn parse_tar_entry(cx: &LineCx, t: &str) -> Result<TarEntry, ParseError> {
    let (w, rest) = words(t, 1);
    let toks = lex(cx, rest)?;
    let kind = w[0];
    let name = toks
        .first()
        .ok_or_else(|| cx.err("tar entry needs a name"))
        .and_then(|t| tok_template(cx, t))?;
    let args = &toks[1..];
    let (mode, args) = match args.first() {
        Some(m) if is_mode(m.text()) && kind != "chardev" && kind != "blockdev" => {
            (Some(parse_mode(cx, m.text())?), &args[1..])
        }
        _ => (None, args),
    };
    let num = |i: usize| -> Result<u32, ParseError> {
        args.get(i)
            .and_then(|t| t.text().parse().ok())
            .ok_or_else(|| cx.err(format!("{kind} <name> <major> <minor>")))
    };
    let (kind, default_mode) = match (kind, args.len()) {
        ("file", 1) => (TarKind::File(tok_template(cx, &args[0])?), 0o644),
        ("file", 0) => (TarKind::File(Template::default()), 0o644),
        ("dir", 0) => (TarKind::Dir, 0o755),
        ("symlink", 1) => (TarKind::Symlink(tok_template(cx, &args[0])?), 0o777),
        ("hardlink", 1) => (TarKind::Hardlink(tok_template(cx, &args[0])?), 0o644),
        ("chardev", 2) => (TarKind::CharDev(num(0)?, num(1)?), 0o644),
        ("blockdev", 2) => (TarKind::BlockDev(num(0)?, num(1)?), 0o644),
        ("fifo", 0) => (TarKind::Fifo, 0o644),
        _ => {
            return Err(cx.err(format!(
                "bad tar entry {t:?} (file|dir|symlink|hardlink|chardev|blockdev|fifo)"
            )))
        }
    };
    Ok(TarEntry {
        name,
        mode: mode.unwrap_or(default_mode),
        kind,
    })
}

/// Loads every `*.probe` under `dir`, sorted by name.
pub fn load_dir(dir: &Path) -> Result<Vec<Probe>, Box<dyn std::error::Error>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("reading probe directory {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "probe"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        out.push(parse(&p, &text)?);
    }
    Ok(out)
}

/// Shell-style glob with `*` and `?` over bytes.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Probe {
        parse(Path::new("t.probe"), text).unwrap()
    }

    fn ctx() -> Ctx {
        Ctx {
            root: "/r".into(),
            token: b"tok".to_vec(),
            socket: "/s.sock".into(),
            run: "/run".into(),
            home: "/run/home".into(),
        }
    }

    #[test]
    fn comments_blank_lines_and_desc() {
        let pr = p("# c\n\ndesc one\ndesc two\nconnect c1\n");
        assert_eq!(pr.desc, "one two");
        assert_eq!(pr.name, "t");
        assert_eq!(pr.steps.len(), 1);
        assert_eq!(pr.steps[0].line, 5);
    }

    #[test]
    fn send_is_raw_with_templates() {
        let pr = p(r#"send c1 {"a":"x\n","p":"$ROOT/f","t":"$TOKEN","d":"$b64(hi\n)"}"#);
        let StepKind::Send { line, .. } = &pr.steps[0].kind else {
            panic!()
        };
        assert_eq!(
            String::from_utf8(line.expand(&ctx())).unwrap(),
            r#"{"a":"x\n","p":"/r/f","t":"tok","d":"aGkK"}"#
        );
    }

    #[test]
    fn raw_quoted_escapes_and_repeat() {
        let pr = p(r#"raw c1 "a\xff\n" "$repeat(3,ab)" "\$x""#);
        let StepKind::Raw { bytes, .. } = &pr.steps[0].kind else {
            panic!()
        };
        assert_eq!(bytes.expand(&ctx()), b"a\xff\nababab$x");
    }

    #[test]
    fn sendn_fills_to_exact_length() {
        let pr = p(r#"sendn c1 40 {"pad":"$FILL"}"#);
        let StepKind::Send { line, len, .. } = &pr.steps[0].kind else {
            panic!()
        };
        assert_eq!(*len, Some(40));
        let base = line.expand(&ctx()).len();
        assert_eq!(line.expand_fill(&ctx(), 40 - base).len(), 40);
    }

    #[test]
    fn call_with_and_without_params() {
        let pr = p("call c1 7 server.ping\ncall c2 \"x\" files.stat {\"path\": \"$ROOT\"}\n");
        assert_eq!(
            pr.steps[0].kind,
            StepKind::Call {
                conn: "c1".into(),
                id: "7".into(),
                method: "server.ping".into(),
                params: None
            }
        );
        let StepKind::Call {
            params: Some(t), id, ..
        } = &pr.steps[1].kind
        else {
            panic!()
        };
        assert_eq!(id, "\"x\"");
        assert_eq!(t.expand(&ctx()), br#"{"path": "/r"}"#);
    }

    #[test]
    fn fixtures_and_tar_block() {
        let pr = p("file a 0600 \"x\"\nfile b \"y\"\ntar t.tgz\n  file ../e 0755 \"z\"\n  symlink l /etc\n  chardev c 1 3\nend\nrun -- -version\n");
        assert!(matches!(pr.steps[0].kind, StepKind::File { mode: 0o600, .. }));
        assert!(matches!(pr.steps[1].kind, StepKind::File { mode: 0o644, .. }));
        let StepKind::Tar { entries, format, .. } = &pr.steps[2].kind else {
            panic!()
        };
        assert_eq!(*format, TarFormat::Gzip);
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].mode, 0o755);
        assert_eq!(entries[2].kind, TarKind::CharDev(1, 3));
        assert_eq!(pr.steps[3].line, 8);
    }

    #[test]
    fn run_options() {
        let pr = p("run stdin=\"a\\n\" env=CLAUDE_RPC_TOKEN=$TOKEN timeout=500 -- -stop -socket $SOCKET\nrun env=X=\"a b\" stdin=\"c d\" -- -x\n");
        let StepKind::Run {
            stdin,
            env,
            args,
            timeout_ms,
        } = &pr.steps[0].kind
        else {
            panic!()
        };
        assert_eq!(stdin.as_ref().unwrap().expand(&ctx()), b"a\n");
        assert_eq!(env[0].0, "CLAUDE_RPC_TOKEN");
        assert_eq!(env[0].1.expand(&ctx()), b"tok");
        assert_eq!(*timeout_ms, Some(500));
        assert_eq!(args.len(), 3);
        assert_eq!(args[2].expand(&ctx()), b"/s.sock");
        let StepKind::Run { stdin, env, .. } = &pr.steps[1].kind else {
            panic!()
        };
        assert_eq!(stdin.as_ref().unwrap().expand(&ctx()), b"c d");
        assert_eq!(env[0].1.expand(&ctx()), b"a b");
    }

    #[test]
    fn accepts() {
        let pr = p("accept L3 * | because\naccept-next reason two\ncall c1 1 server.ping\n");
        assert_eq!(
            pr.accepts[0],
            Accept {
                pattern: "L3 *".into(),
                reason: "because".into()
            }
        );
        assert_eq!(
            pr.accepts[1],
            Accept {
                pattern: "L3 *".into(),
                reason: "reason two".into()
            }
        );
    }

    #[test]
    fn token_directive() {
        let pr = p("token \" spaced tok \\r\\n\"\n");
        assert_eq!(pr.token_file, b" spaced tok \r\n");
        assert_eq!(pr.token(), b" spaced tok ");
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse(Path::new("x.probe"), "desc ok\n\nbogus thing\n").unwrap_err();
        assert_eq!(e.to_string(), "x.probe:3: unknown directive \"bogus\"");
        let e = parse(Path::new("x.probe"), "send c1 $NOPE\n").unwrap_err();
        assert!(e.to_string().starts_with("x.probe:1: unknown template variable"), "{e}");
        let e = parse(Path::new("x.probe"), "raw c1 \"abc\n").unwrap_err();
        assert!(e.to_string().contains("unterminated"), "{e}");
        let e = parse(Path::new("x.probe"), "tar a\n file x\n").unwrap_err();
        assert!(e.to_string().contains("without `end`"), "{e}");
        let e = parse(Path::new("x.probe"), "await c1 {bad\n").unwrap_err();
        assert!(e.to_string().contains("not JSON"), "{e}");
        let e = parse(Path::new("x.probe"), "accept-next why\n").unwrap_err();
        assert!(e.to_string().contains("applies to nothing"), "{e}");
    }

    #[test]
    fn globbing() {
        assert!(glob_match("L3 *", "L3 c1 reply 1"));
        assert!(!glob_match("L3 *", "L30 c1 reply 1"));
        assert!(glob_match("*reply*", "L3 c1 reply 1"));
        assert!(glob_match("fs a?b", "fs a.b"));
        assert!(glob_match("*", ""));
    }
}
