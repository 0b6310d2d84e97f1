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
//!
//! [`skips`] says which probes a transport cannot run (a `-bridge` child,
//! `remora.exe` under Wine), each with its reason.

use crate::base::error::{At, IoAt};
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod directives;
pub(crate) mod fixture;
mod grammar;
mod lex;
mod parse;
pub(crate) mod skips;
pub use parse::parse;

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

/// Why the probe directory cannot be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// The directory itself.
    ReadDir(IoAt),
    /// One probe file.
    Read(IoAt),
    Parse(ParseError),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::ReadDir(e) => write!(f, "reading probe directory {e}"),
            LoadError::Read(e) => write!(f, "{e}"),
            LoadError::Parse(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LoadError {}

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

/// A fixture: a step that prepares the probe's tree before the daemon
/// exists (files, directories, links, fifos, modes, git, shell, tar).
/// [`fixture::build`] makes each kind; nothing else lists them.
#[derive(Debug, Clone, PartialEq)]
pub enum Fixture {
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
}

/// One directive of a probe, in execution order.
#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    /// Runs before the daemon starts (every probe's fixtures come first).
    Fixture(Fixture),
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
        matches!(self, StepKind::Fixture(_))
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
    /// `build <id>`: the reference build the transcript's bytes come from;
    /// the candidate is started stamped as it (`-reference-build`, the id
    /// padded to 40 digits). `None`: unstamped, the newest recorded build.
    pub build: Option<String>,
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

/// Loads every `*.probe` under `dir`, sorted by name.
pub fn load_dir(dir: &Path) -> Result<Vec<Probe>, LoadError> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .at(dir)
        .map_err(LoadError::ReadDir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "probe"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(&p).at(&p).map_err(LoadError::Read)?;
        out.push(parse(&p, &text).map_err(LoadError::Parse)?);
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
mod tests;
