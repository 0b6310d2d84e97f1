//! `fuzz-diff` case generation: deterministic request sequences expressed
//! as probes.
//!
//! A [`Case`] is a list of [`Unit`]s — fixture lines, single requests,
//! pairs of read-only requests in flight together, and small process
//! scenarios (spawn … await-exit). Every request is a [`Req`]: an ordered
//! list of envelope members whose values are raw JSON text in probe
//! template syntax (`$ROOT`, `$TOKEN`, `$bytes(\xff)`), so it can carry
//! duplicate and case-folded keys, invalid UTF-8 and lone surrogates.
//! [`Case::render`] turns a case into probe text; the reply id each request
//! is awaited with is *predicted* at render time from the bytes on the wire
//! (Go's decoding: case-insensitive keys, last duplicate wins, a wrongly
//! typed envelope field or malformed JSON is a parse error with id null),
//! so shrinking members keeps the awaits consistent.
//!
//! Known accepted divergences (seed 000) are avoided by construction:
//! `server.shutdown` is only ever a final, authenticated, unmutated request;
//! `wantPid` is never sent; only fields the method reads are mistyped
//! (a mistyped namespace field the method does not read is the accepted
//! per-namespace binding divergence); no path is longer than `PATH_MAX`.
//! Destructive parameters (`destDir`, `archivePath`, `worktreePath`,
//! `baseRepo`, commands) come from a fixed vocabulary inside `$ROOT` and
//! are never shrunk character by character.

use crate::probe::{Ctx, Piece, Template};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;
use std::fmt::Write as _;

/// splitmix64: small, fast and good enough for test-case generation.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator of case `n` of `seed` (independent of other cases).
    pub fn for_case(seed: u64, n: u64) -> Rng {
        let mut r = Rng(seed ^ n.wrapping_mul(0xA076_1D64_78BD_642F));
        r.next();
        r
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `pct` percent.
    pub fn pct(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }

    pub fn pick_str(&mut self, v: &[&'static str]) -> &'static str {
        v[self.below(v.len())]
    }

    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// A member value: raw JSON text (template syntax) or an object of members.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Text(String),
    Obj(Vec<Member>),
}

/// One `"key":value` member; `key` is the raw key text including quotes.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub key: String,
    pub val: Val,
    /// Never shrunk character by character (paths a method may delete, commands).
    pub sensitive: bool,
}

impl Member {
    fn new(key: &str, val: impl Into<String>) -> Member {
        Member {
            key: format!("\"{key}\""),
            val: Val::Text(val.into()),
            sensitive: false,
        }
    }
}

/// One request line and how it is awaited.
#[derive(Debug, Clone, PartialEq)]
pub struct Req {
    pub conn: u8,
    /// Bytes before the object (template syntax), e.g. `$bytes(\x20)`.
    pub prefix: String,
    pub members: Vec<Member>,
    /// Bytes after the object, e.g. `$bytes(\r)` or ` x`.
    pub suffix: String,
    /// A whole raw line instead of members (junk that is not an object).
    pub raw: Option<String>,
    /// May be shrunk at member/character level.
    pub shrinkable: bool,
}

/// One shrinkable unit of a case.
#[derive(Debug, Clone, PartialEq)]
pub enum Unit {
    /// Fixture directive line(s), verbatim.
    Fixture(String),
    /// One request, awaited before anything else happens.
    Req(Req),
    /// Two read-only requests sent back to back, then both awaited.
    Pair(Req, Req),
    /// A process scenario: requests, then `await-exit` on `conn` for `proc_id`.
    Proc { reqs: Vec<Req>, conn: u8, proc_id: String },
    /// Disconnect a connection.
    Close(u8),
    /// A final authenticated `server.shutdown`; the connection closes.
    Shutdown(u8),
}

/// A generated case.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub seed: u64,
    pub n: u64,
    pub units: Vec<Unit>,
}

/// Probe timeout of generated cases (ms): bounds the cost of a hang.
pub const CASE_TIMEOUT_MS: u64 = 3000;

impl Case {
    /// The probe name (and file stem) of this case.
    pub fn name(&self) -> String {
        format!("{}-{}", self.seed, self.n)
    }

    /// Renders the case as probe text, after `header` comment lines.
    pub fn render(&self, header: &[String]) -> String {
        let mut out = String::new();
        for h in header {
            for l in h.lines() {
                let _ = writeln!(out, "# {l}");
            }
        }
        let _ = writeln!(out, "desc fuzz-diff seed {} case {}", self.seed, self.n);
        let _ = writeln!(out, "timeout {CASE_TIMEOUT_MS}");
        for u in &self.units {
            match u {
                Unit::Fixture(f) => {
                    out.push_str(f);
                    out.push('\n');
                }
                Unit::Req(r) => {
                    send_line(&mut out, r);
                    await_line(&mut out, r);
                }
                Unit::Pair(a, b) => {
                    let (ia, ib) = (a.predict(), b.predict());
                    // Two replies awaited with equal ids on one connection
                    // could be taken in either order: run those in sequence.
                    let clash = a.conn == b.conn && ia.is_some() && ib.is_some() && same_id(&ia, &ib);
                    if clash {
                        send_line(&mut out, a);
                        await_line(&mut out, a);
                        send_line(&mut out, b);
                        await_line(&mut out, b);
                    } else {
                        send_line(&mut out, a);
                        send_line(&mut out, b);
                        await_line(&mut out, a);
                        await_line(&mut out, b);
                    }
                }
                Unit::Proc { reqs, conn, proc_id } => {
                    for r in reqs {
                        send_line(&mut out, r);
                        await_line(&mut out, r);
                    }
                    let _ = writeln!(out, "await-exit c{conn} {proc_id}");
                }
                Unit::Close(c) => {
                    let _ = writeln!(out, "close c{c}");
                }
                Unit::Shutdown(c) => {
                    let _ = writeln!(
                        out,
                        "send c{c} {{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.shutdown\",\"auth\":\"$TOKEN\"}}"
                    );
                    let _ = writeln!(out, "await-close c{c}");
                    out.push_str("await-gone\n");
                }
            }
        }
        out
    }

    /// Number of requests in the case.
    pub fn requests(&self) -> usize {
        self.units
            .iter()
            .map(|u| match u {
                Unit::Req(_) | Unit::Shutdown(_) => 1,
                Unit::Pair(..) => 2,
                Unit::Proc { reqs, .. } => reqs.len(),
                Unit::Fixture(_) | Unit::Close(_) => 0,
            })
            .sum()
    }
}

fn same_id(a: &Option<Value>, b: &Option<Value>) -> bool {
    match (a, b) {
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

fn send_line(out: &mut String, r: &Req) {
    let text = r.text();
    if text.is_empty() {
        let _ = writeln!(out, "raw c{} \"\\n\"", r.conn);
    } else {
        let _ = writeln!(out, "send c{} {text}", r.conn);
    }
}

fn await_line(out: &mut String, r: &Req) {
    if let Some(id) = r.predict() {
        let _ = writeln!(out, "await c{} {}", r.conn, serde_json::to_string(&id).expect("json"));
    }
}

fn render_members(out: &mut String, ms: &[Member]) {
    out.push('{');
    for (i, m) in ms.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&m.key);
        out.push(':');
        match &m.val {
            Val::Text(t) => out.push_str(t),
            Val::Obj(o) => render_members(out, o),
        }
    }
    out.push('}');
}

/// The context generated templates are expanded with for predictions.
fn predict_ctx() -> Ctx {
    Ctx {
        root: "/r".into(),
        token: b"probe-token".to_vec(),
        socket: "/r.sock".into(),
        run: "/run".into(),
        home: "/run/home".into(),
    }
}

impl Req {
    /// The line in template syntax (no newline).
    pub fn text(&self) -> String {
        if let Some(r) = &self.raw {
            return r.clone();
        }
        let mut s = self.prefix.clone();
        render_members(&mut s, &self.members);
        s.push_str(&self.suffix);
        s
    }

    /// The bytes on the wire (templates expanded with a fixed context).
    pub fn bytes(&self) -> Vec<u8> {
        expand(&self.text())
    }

    /// The id the reply is predicted to carry; `None`: no reply expected.
    pub fn predict(&self) -> Option<Value> {
        predict_reply_id(&self.bytes())
    }
}

/// Expands a send payload template (as the probe parser would).
pub fn expand(text: &str) -> Vec<u8> {
    let line = format!("send c1 {text}");
    match crate::probe::parse(std::path::Path::new("gen.probe"), &line) {
        Ok(p) => match &p.steps[0].kind {
            crate::probe::StepKind::Send { line, .. } => line.expand(&predict_ctx()),
            _ => text.as_bytes().to_vec(),
        },
        Err(_) => Template(vec![Piece::Lit(text.as_bytes().to_vec())]).expand(&predict_ctx()),
    }
}

/// Go's `bytes.EqualFold` for the keys we generate (ASCII, plus the two
/// non-ASCII simple folds of ASCII letters: U+017F ſ ~ s, U+212A K ~ k).
pub fn fold_eq(a: &str, b: &str) -> bool {
    fn canon(c: char) -> char {
        match c {
            '\u{17F}' => 's',
            '\u{212A}' => 'k',
            c => c.to_ascii_lowercase(),
        }
    }
    a.chars().map(canon).eq(b.chars().map(canon))
}

/// Invalid UTF-8 becomes U+FFFD per bad byte, as Go's decoder does.
fn go_lossy(b: &[u8]) -> String {
    let mut out = String::new();
    let mut rest = b;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let (ok, bad) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(ok).expect("valid prefix"));
                let n = e.error_len().unwrap_or(bad.len());
                for _ in 0..n {
                    out.push('\u{FFFD}');
                }
                rest = &bad[n..];
            }
        }
    }
}

/// Replaces `\uD8xx`-style escapes that do not form a surrogate pair with
/// `\ufffd` (Go decodes them to U+FFFD; serde_json rejects them).
fn fix_surrogates(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |i: usize| -> Option<u32> {
        if b.get(i) == Some(&b'\\') && b.get(i + 1) == Some(&b'u') {
            std::str::from_utf8(b.get(i + 2..i + 6)?)
                .ok()
                .and_then(|h| u32::from_str_radix(h, 16).ok())
        } else {
            None
        }
    };
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            if let Some(u) = hex(i) {
                if (0xD800..0xDC00).contains(&u) {
                    if let Some(l) = hex(i + 6) {
                        if (0xDC00..0xE000).contains(&l) {
                            out.push_str(&s[i..i + 12]);
                            i += 12;
                            continue;
                        }
                    }
                    out.push_str("\\ufffd");
                    i += 6;
                    continue;
                }
                if (0xDC00..0xE000).contains(&u) {
                    out.push_str("\\ufffd");
                    i += 6;
                    continue;
                }
            }
            // Any other escape: copy both bytes so `\\u…` is not misread.
            let end = (i + 2).min(b.len());
            out.push_str(&s[i..end]);
            i = end;
            continue;
        }
        let c = s[i..].chars().next().expect("char");
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// An object's members in order, duplicates kept.
struct Members(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Members, A::Error> {
                let mut v = Vec::new();
                while let Some((k, val)) = m.next_entry::<String, Value>()? {
                    v.push((k, val));
                }
                Ok(Members(v))
            }
        }
        d.deserialize_map(V)
    }
}

/// Predicts the id of the reply to one request line (without its `\n`):
/// `None` when no reply is expected (an empty or all-space line).
pub fn predict_reply_id(line: &[u8]) -> Option<Value> {
    if line.iter().all(|c| *c == b' ') {
        return None;
    }
    let text = mark_overflow(&fix_surrogates(&go_lossy(line)));
    if serde_json::from_str::<Value>(&text).is_err() {
        return Some(Value::Null);
    }
    let Ok(Members(ms)) = serde_json::from_str::<Members>(&text) else {
        return Some(Value::Null);
    };
    let mut id = Value::Null;
    let mut overflow = false;
    for (k, v) in ms {
        if fold_eq(&k, "id") {
            overflow = has_overflow(&v);
            id = v;
        } else if ["jsonrpc", "method", "auth"].iter().any(|f| fold_eq(&k, f))
            && (!matches!(v, Value::String(_) | Value::Null) || has_overflow(&v))
        {
            return Some(Value::Null);
        }
    }
    // A number out of float64 range fails the decode of the id (an
    // interface{}), but not of params (raw JSON, decoded later).
    if overflow {
        return Some(Value::Null);
    }
    Some(id)
}

const OVERFLOW: &str = "\\u0000overflow";

fn has_overflow(v: &Value) -> bool {
    match v {
        Value::String(s) => s == "\u{0}overflow",
        Value::Array(a) => a.iter().any(has_overflow),
        Value::Object(m) => m.values().any(has_overflow),
        _ => false,
    }
}

/// Replaces number literals outside strings that overflow float64 (which
/// serde_json rejects, and Go rejects only when it decodes them into a
/// number) with a marker string.
fn mark_overflow(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'"' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(b.len());
            out.push_str(&s[start..i]);
        } else if c == b'-' || c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_digit() || matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E')) {
                i += 1;
            }
            let tok = &s[start..i];
            if tok.parse::<f64>().is_ok_and(|f| f.is_infinite()) {
                out.push('"');
                out.push_str(OVERFLOW);
                out.push('"');
            } else {
                out.push_str(tok);
            }
        } else {
            let ch = s[i..].chars().next().expect("char");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Vocabulary.

/// The 19 methods, in the order server.capabilities lists them.
pub const METHODS: [&str; 19] = [
    "server.ping",
    "server.version",
    "server.capabilities",
    "server.shutdown",
    "files.list",
    "files.validate",
    "files.stat",
    "files.read",
    "files.extract_tar",
    "git.info",
    "git.status",
    "git.list_branches",
    "git.worktree_create",
    "git.worktree_remove",
    "process.spawn",
    "process.stdin",
    "process.kill",
    "process.killAndWait",
    "process.reattach",
];

/// Methods with no side effects (may be in flight together).
const READ_ONLY: [&str; 9] = [
    "server.ping",
    "server.version",
    "server.capabilities",
    "files.list",
    "files.validate",
    "files.stat",
    "files.read",
    "git.info",
    "git.status",
];

/// The base fixture: small files with awkward bytes, a directory, links and
/// a tar archive.
const FIXTURES: [&str; 9] = [
    "file a.txt \"hello\\n\"",
    "file u.txt \"<a>&b\\xe2\\x80\\xa8x\\xff\\xfey\\x01\\x08\\x0c\\\"\\\\\\n\"",
    "dir d",
    "file d/b.txt 0600 \"bee\"",
    "file d/.hidden \"h\"",
    "symlink l a.txt",
    "symlink dangling nowhere",
    "tar t.tgz\n  dir top/\n  file top/x.txt 0755 \"x\\n\"\n  file top/y.txt \"why\"\nend",
    "tar bad.tgz garbage\nend",
];

const GIT_FIXTURE: [&str; 5] = [
    "git init -q repo",
    "file repo/r.txt \"r\\n\"",
    "git -C repo add r.txt",
    "git -C repo commit -q -m init",
    "git -C repo branch side",
];

/// Read-only paths (any of them may also be mangled).
const PATHS: [&str; 16] = [
    "\"$ROOT/a.txt\"",
    "\"$ROOT/u.txt\"",
    "\"$ROOT/d\"",
    "\"$ROOT/d/b.txt\"",
    "\"$ROOT/l\"",
    "\"$ROOT/dangling\"",
    "\"$ROOT/missing\"",
    "\"$ROOT\"",
    "\"$ROOT/repo\"",
    "\"$ROOT/repo/r.txt\"",
    "\"a.txt\"",
    "\"d\"",
    "\"\"",
    "\"/\"",
    "\"/nonexistent/x\"",
    "\"$ROOT/d/\"",
];

/// Strings with awkward content, in JSON (template) syntax without quotes.
const JUNK: [&str; 22] = [
    "",
    "x",
    "\\u2028",
    "\\u2029",
    "<>&",
    "\\u003c\\u003e",
    "\\u0000",
    "\\ud800",
    "\\udc00x",
    "\\ud83d\\ude00",
    "$bytes(\\xff)",
    "$bytes(\\xe2\\x80)",
    "$bytes(\\xc0\\xaf)",
    "é",
    "e\\u0301",
    "\\n\\t\\r",
    "\\\"",
    "\\\\",
    "\\/",
    " ",
    "$repeat(300,a)",
    "$$HOME",
];

/// Values of the wrong type for a field.
const CONFUSED: [&str; 18] = [
    "123",
    "1.5",
    "1e3",
    "\"4\"",
    "true",
    "false",
    "null",
    "[]",
    "{}",
    "[\"a\"]",
    "{\"a\":1}",
    "\"\"",
    "-1",
    "0",
    "[null]",
    "\"x\"",
    "1e400",
    "{\"path\":\"$ROOT/a.txt\"}",
];

/// Numbers for integer fields.
const INTS: [&str; 18] = [
    "0",
    "1",
    "-1",
    "3",
    "4",
    "100",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "1.0",
    "1.5",
    "1e3",
    "1E2",
    "-0",
    "2147483648",
    "\"4\"",
];

/// Request ids of every JSON type.
const IDS: [&str; 30] = [
    "1",
    "2",
    "0",
    "-1",
    "7",
    "1.0",
    "1.5",
    "1e3",
    "-0",
    "1e21",
    "1e-7",
    "0.000001",
    "12345678901234567890",
    "123456789012345678901234567890",
    "1e400",
    "\"a\"",
    "\"a<b\"",
    "\"\"",
    "\"\\u2028\"",
    "\"\\ud800x\"",
    "\"$bytes(\\xff\\xfe)\"",
    "\"\\ud83d\\ude00\"",
    "true",
    "false",
    "null",
    "[]",
    "[1,\"a\"]",
    "{}",
    "{\"b\":1,\"a\":[1, 2]}",
    "9007199254740993",
];

/// Key spellings that Go's decoder matches to a field case-insensitively.
fn fold_key(rng: &mut Rng, key: &str) -> String {
    match rng.below(4) {
        0 => key.to_ascii_uppercase(),
        1 => {
            let mut c = key.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        }
        2 if key.contains('s') => key.replacen('s', "\u{17F}", 1),
        _ if key.contains('k') => key.replacen('k', "\u{212A}", 1),
        _ => key.to_ascii_uppercase(),
    }
}

/// Appends the contents of JSON string `j` to JSON string `s` (a `/`
/// keeps a trailing `$ROOT` from running into the junk).
fn join_junk(s: &str, j: &str) -> String {
    let base = &s[..s.len() - 1];
    let sep = if base.ends_with("$ROOT") { "/" } else { "" };
    format!("{base}{sep}{}", &j[1..])
}

fn junk_string(rng: &mut Rng) -> String {
    let mut s = String::new();
    for _ in 0..1 + rng.below(3) {
        s.push_str(rng.pick_str(&JUNK));
    }
    format!("\"{s}\"")
}

fn path(rng: &mut Rng) -> String {
    let p = rng.pick(&PATHS).to_string();
    if rng.pct(15) {
        // Append junk inside the string (read-only methods only).
        let j = junk_string(rng);
        join_junk(&p, &j)
    } else {
        p
    }
}

/// A value for a field that should hold `good`, sometimes confused.
fn field(rng: &mut Rng, good: String) -> String {
    if rng.pct(18) {
        rng.pick(&CONFUSED).to_string()
    } else {
        good
    }
}

fn b64(s: &str) -> String {
    format!("\"$b64({s})\"")
}

/// State that makes process scenarios and ids coherent within a case.
struct Gen<'a> {
    rng: &'a mut Rng,
    nconns: u8,
    next_id: u64,
    procs: u32,
    /// Process ids that were spawned and have exited (for reattach).
    exited: Vec<(String, u8)>,
}

impl Gen<'_> {
    fn conn(&mut self) -> u8 {
        1 + self.rng.below(self.nconns as usize) as u8
    }

    fn id(&mut self) -> String {
        self.next_id += 1;
        if self.rng.pct(20) {
            self.rng.pick(&IDS).to_string()
        } else if self.rng.pct(20) {
            format!("\"r{}\"", self.next_id)
        } else {
            self.next_id.to_string()
        }
    }

    /// A plain, valid request.
    fn plain(&mut self, conn: u8, method: &str, params: Option<Vec<Member>>) -> Req {
        let id = self.id();
        let mut members = vec![
            Member::new("jsonrpc", "\"2.0\""),
            Member::new("id", id),
            Member::new("method", format!("\"{method}\"")),
        ];
        if let Some(p) = params {
            members.push(Member {
                key: "\"params\"".into(),
                val: Val::Obj(p),
                sensitive: false,
            });
        }
        members.push(Member::new("auth", "\"$TOKEN\""));
        Req {
            conn,
            prefix: String::new(),
            members,
            suffix: String::new(),
            raw: None,
            shrinkable: true,
        }
    }

    /// A spawn request with a plain numeric id (so the harness can tell
    /// whether it failed and not wait for frames that never come).
    fn spawn_req(&mut self, conn: u8, p: Vec<Member>) -> Req {
        let mut r = self.plain(conn, "process.spawn", Some(p));
        self.next_id += 1;
        set(&mut r.members, "id", &self.next_id.to_string());
        r
    }

    /// Params of a (non-process) method, from the fixture-aware vocabulary.
    fn params(&mut self, method: &str) -> Option<Vec<Member>> {
        let r = &mut *self.rng;
        let safe_dest = [
            "\"$ROOT/out\"",
            "\"$ROOT/out/sub\"",
            "\"out\"",
            "\"/\"",
            "\"\"",
            "\"$ROOT/d\"",
        ];
        let safe_archive = [
            "\"$ROOT/t.tgz\"",
            "\"$ROOT/bad.tgz\"",
            "\"$ROOT/missing.tgz\"",
            "\"t.tgz\"",
            "\"\"",
        ];
        let safe_repo = ["\"$ROOT/repo\"", "\"$ROOT/d\"", "\"$ROOT/missing\"", "\"\""];
        let safe_wt = ["\"$ROOT/wt\"", "\"$ROOT/wt2\"", "\"wt\"", "\"$ROOT/repo\"", "\"\""];
        let sens = |k: &str, v: String| Member {
            key: format!("\"{k}\""),
            val: Val::Text(v),
            sensitive: true,
        };
        let p = match method {
            "server.ping" | "server.version" | "server.capabilities" => {
                if r.pct(70) {
                    return None;
                }
                vec![Member::new("path", path(r))]
            }
            "files.stat" | "files.list" | "files.validate" | "git.info" | "git.status" | "git.list_branches" => {
                let good = path(r);
                vec![Member::new("path", field(r, good))]
            }
            "files.read" => {
                let good = path(r);
                let mut v = vec![Member::new("path", field(r, good))];
                if r.pct(60) {
                    let n = r.pick(&INTS).to_string();
                    v.push(Member::new("maxBytes", field(r, n)));
                }
                v
            }
            "files.extract_tar" => {
                let a = r.pick(&safe_archive).to_string();
                let d = r.pick(&safe_dest).to_string();
                let mut v = vec![sens("archivePath", field(r, a)), sens("destDir", field(r, d))];
                if r.pct(15) {
                    v.remove(r.below(2));
                }
                v
            }
            "git.worktree_create" => {
                let mut v = vec![];
                if r.pct(80) {
                    let b = r.pick(&safe_repo).to_string();
                    v.push(sens("baseRepo", field(r, b)));
                }
                if r.pct(85) {
                    let names = ["\"feat\"", "\"side\"", "\"\"", "\"a b\"", "\"-x\"", "\"f\\u2028\""];
                    let n = r.pick(&names).to_string();
                    v.push(Member::new("branchName", field(r, n)));
                }
                let w = r.pick(&safe_wt).to_string();
                v.push(sens("worktreePath", field(r, w)));
                if r.pct(40) {
                    let s = ["\"main\"", "\"master\"", "\"side\"", "\"nope\"", "\"\""];
                    let s = r.pick(&s).to_string();
                    v.push(Member::new("sourceBranch", field(r, s)));
                }
                v
            }
            "git.worktree_remove" => {
                let b = r.pick(&safe_repo).to_string();
                let w = r.pick(&safe_wt).to_string();
                vec![sens("baseRepo", field(r, b)), sens("worktreePath", field(r, w))]
            }
            // Process methods outside a scenario: unknown ids and missing
            // fields only (never a command).
            "process.spawn" => match r.below(3) {
                0 => vec![],
                1 => vec![Member::new("id", "\"ghost\"")],
                _ => vec![Member::new("command", "\"\"")],
            },
            "process.stdin" => {
                let d = ["\"YWJj\"", "\"!!\"", "\"\"", "1"];
                let d = r.pick(&d).to_string();
                vec![Member::new("id", "\"ghost\""), Member::new("data", d)]
            }
            "process.kill" | "process.killAndWait" | "process.reattach" => {
                if r.pct(30) {
                    vec![]
                } else {
                    let id = ["\"ghost\"", "\"\"", "1", "null"];
                    let id = r.pick(&id).to_string();
                    vec![Member::new("id", id)]
                }
            }
            _ => vec![],
        };
        Some(p)
    }

    /// Applies envelope and params mutations to a request.
    fn mutate(&mut self, req: &mut Req) {
        let r = &mut *self.rng;
        if !r.pct(45) {
            return;
        }
        for _ in 0..1 + r.below(2) {
            let ms = &mut req.members;
            match r.below(16) {
                0 => {
                    // Drop a member.
                    if !ms.is_empty() {
                        ms.remove(r.below(ms.len()));
                    }
                }
                1 => {
                    // Wrong jsonrpc.
                    let v = ["\"1.0\"", "\"2.0 \"", "\"\"", "2", "2.0", "null", "\"2\""];
                    set(ms, "jsonrpc", r.pick_str(&v));
                }
                2 => {
                    let v = [
                        "\"wrong\"",
                        "\"\"",
                        "123",
                        "null",
                        "\"PROBE-TOKEN\"",
                        "\"$TOKEN \"",
                        "\"$TOKEN\\u0000\"",
                    ];
                    set(ms, "auth", r.pick_str(&v));
                }
                3 => {
                    // Case-folded key.
                    let i = r.below(ms.len().max(1));
                    if let Some(m) = ms.get_mut(i) {
                        let k = m.key.trim_matches('"').to_string();
                        m.key = format!("\"{}\"", fold_key(r, &k));
                    }
                }
                4 => {
                    // Duplicate key (case-folded or not), good or bad first.
                    if !ms.is_empty() {
                        let i = r.below(ms.len());
                        let mut d = ms[i].clone();
                        if r.pct(50) {
                            let k = d.key.trim_matches('"').to_string();
                            d.key = format!("\"{}\"", fold_key(r, &k));
                        }
                        d.val = Val::Text(match d.key.to_ascii_lowercase().as_str() {
                            "\"auth\"" => "\"bad\"".into(),
                            "\"method\"" => "\"server.ping\"".into(),
                            _ => r.pick(&CONFUSED).to_string(),
                        });
                        d.sensitive = false;
                        let at = if r.pct(50) { i } else { ms.len() };
                        ms.insert(at, d);
                    }
                }
                5 => {
                    let v = [
                        "\"nodot\"",
                        "\"server.\"",
                        "\".ping\"",
                        "\"Server.Ping\"",
                        "\"server.PING\"",
                        "\"bogus.ping\"",
                        "\"files.nope\"",
                        "\"server.ping.x\"",
                        "123",
                        "null",
                        "\"\"",
                        "\"server.ping\\u0000\"",
                        "\"git.info \"",
                    ];
                    set(ms, "method", r.pick_str(&v));
                }
                6 | 7 => {
                    let v = r.pick(&IDS).to_string();
                    if r.pct(10) {
                        ms.retain(|m| m.key != "\"id\"");
                    } else {
                        set(ms, "id", &v);
                    }
                }
                8 => {
                    // An extra unknown member.
                    let k = ["\"extra\"", "\"x\"", "\"\"", "\"id \"", "\"résumé\"", "\"\\u0069d\""];
                    let k = r.pick(&k).to_string();
                    let v = if r.pct(50) {
                        r.pick(&CONFUSED).to_string()
                    } else {
                        junk_string(r)
                    };
                    let at = r.below(ms.len() + 1);
                    ms.insert(
                        at,
                        Member {
                            key: k,
                            val: Val::Text(v),
                            sensitive: false,
                        },
                    );
                }
                9 => {
                    // Shuffle member order.
                    for i in (1..ms.len()).rev() {
                        let j = r.below(i + 1);
                        ms.swap(i, j);
                    }
                }
                10 => {
                    // Params not an object / null / absent.
                    let v = ["\"x\"", "[]", "null", "1", "true", "[{}]", "\"\""];
                    if r.pct(25) {
                        ms.retain(|m| m.key != "\"params\"");
                    } else {
                        set(ms, "params", r.pick_str(&v));
                    }
                }
                11 => {
                    // Case-fold or duplicate a params key / add an unknown one.
                    if let Some(Member { val: Val::Obj(p), .. }) = ms.iter_mut().find(|m| m.key == "\"params\"") {
                        if !p.is_empty() && r.pct(60) {
                            let i = r.below(p.len());
                            let mut d = p[i].clone();
                            let k = d.key.trim_matches('"').to_string();
                            d.key = format!("\"{}\"", fold_key(r, &k));
                            if r.pct(50) {
                                p[i] = d;
                            } else {
                                // Duplicate with a non-destructive junk value first.
                                d.val = Val::Text(if d.sensitive {
                                    "\"\"".into()
                                } else {
                                    r.pick(&CONFUSED).to_string()
                                });
                                d.sensitive = false;
                                p.insert(i, d);
                            }
                        } else {
                            let v = r.pick(&CONFUSED).to_string();
                            p.push(Member::new("zzz", v));
                        }
                    }
                }
                12 => {
                    // Line prefix / suffix.
                    let pre = ["", "$bytes(\\x20)", "$bytes(\\t)", "$bytes(\\xef\\xbb\\xbf)"];
                    let suf = [
                        "$bytes(\\r)",
                        "$bytes(\\x20)",
                        " x",
                        "}",
                        "{}",
                        ",",
                        "$bytes(\\x00)",
                        "\\n",
                    ];
                    if r.pct(40) {
                        req.prefix = r.pick(&pre).to_string();
                    } else {
                        req.suffix = r.pick(&suf).to_string();
                    }
                }
                13 => {
                    // Whitespace between tokens / deep nesting in an unknown member.
                    let deep = if r.pct(50) {
                        format!("{}1{}", "[".repeat(60), "]".repeat(60))
                    } else {
                        "{ \"a\" : [ 1 , 2 ] }".into()
                    };
                    ms.push(Member::new("nest", deep));
                }
                14 => {
                    // Truncate the object (malformed JSON). A truncated
                    // request with destructive parameters is not shrunk
                    // character by character.
                    if ms
                        .iter()
                        .any(|m| m.sensitive || matches!(&m.val, Val::Obj(p) if p.iter().any(|m| m.sensitive)))
                    {
                        req.shrinkable = false;
                    }
                    req.raw = Some({
                        let t = req_text_members(ms);
                        let cut = r.below(atoms(&t).len().max(1));
                        safe_cut(&t, cut)
                    });
                }
                _ => {
                    // Junk inside string values of non-sensitive params.
                    if let Some(Member { val: Val::Obj(p), .. }) = ms.iter_mut().find(|m| m.key == "\"params\"") {
                        for m in p.iter_mut().filter(|m| !m.sensitive) {
                            if let Val::Text(t) = &mut m.val {
                                if t.starts_with('"') && t.ends_with('"') && t.len() >= 2 && r.pct(50) {
                                    let j = junk_string(r);
                                    *t = join_junk(t, &j);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// One plain/mutated request of a non-process method.
    fn request(&mut self, method: &str) -> Req {
        let conn = self.conn();
        let params = self.params(method);
        let mut req = self.plain(conn, method, params);
        self.mutate(&mut req);
        req
    }

    /// A junk line that is not a request object.
    fn junk_line(&mut self) -> Req {
        let lines = [
            "garbage",
            "[1,2]",
            "\"str\"",
            "{",
            "{}",
            "null",
            "1",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.ping\",\"auth\":\"$TOKEN\"} x",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.ping\",\"auth\":\"$TOKEN\",}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"files.stat\",\"params\":{\"x\":[}},\"auth\":\"$TOKEN\"}",
            "$bytes(\\xff\\xfe)",
            "{\"id\":1,\"method\":\"server.ping\"",
            "",
            "$bytes(\\x20\\x20\\x20)",
            "{'id':1}",
            "{\"jsonrpc\":\"2.0\",\"id\":$repeat(50,[)1$repeat(50,]),\"method\":\"server.ping\",\"auth\":\"$TOKEN\"}",
            "{\"a\":\"\\x\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.ping\",\"auth\":\"$TOKEN\"}{\"id\":2}",
        ];
        let conn = self.conn();
        Req {
            conn,
            prefix: String::new(),
            members: Vec::new(),
            suffix: String::new(),
            raw: Some(self.rng.pick(&lines).to_string()),
            shrinkable: true,
        }
    }

    fn pid(&mut self) -> String {
        self.procs += 1;
        format!("p{}", self.procs)
    }

    fn spawn_params(&mut self, pid: &str, cmd: &str, args: &[&str], mutate: bool) -> Vec<Member> {
        let r = &mut *self.rng;
        let mut v = vec![
            Member::new("id", format!("\"{pid}\"")),
            Member {
                key: "\"command\"".into(),
                val: Val::Text(format!("\"{cmd}\"")),
                sensitive: true,
            },
        ];
        if !args.is_empty() {
            let a: Vec<String> = args.iter().map(|a| format!("\"{a}\"")).collect();
            v.push(Member {
                key: "\"args\"".into(),
                val: Val::Text(format!("[{}]", a.join(","))),
                sensitive: true,
            });
        }
        if mutate && r.pct(30) {
            let cwds = [
                "\"$ROOT/d\"",
                "\"d\"",
                "\"/nonexistent\"",
                "\"\"",
                "\"$ROOT/a.txt\"",
                "1",
                "null",
            ];
            v.push(Member {
                key: "\"cwd\"".into(),
                val: Val::Text(r.pick(&cwds).to_string()),
                sensitive: true,
            });
        }
        if mutate && r.pct(25) {
            let envs = [
                "{\"FOO\":\"bar\"}",
                "{\"FOO\":\"\\u2028<>\"}",
                "{\"FOO\":1}",
                "[\"FOO=bar\"]",
                "null",
                "{\"\":\"x\"}",
                "{\"A=B\":\"c\"}",
            ];
            v.push(Member::new("env", r.pick(&envs).to_string()));
        }
        if mutate && r.pct(15) {
            // Type confusion in a field spawn reads.
            let i = r.below(v.len());
            v[i].val = Val::Text(r.pick(&CONFUSED).to_string());
        }
        v
    }

    /// A process scenario.
    fn process(&mut self) -> Unit {
        let conn = self.conn();
        let pid = self.pid();
        let finite: [(&str, &[&str]); 10] = [
            ("echo", &["hi"]),
            ("printf", &["a<b>&\\u2028\\n"]),
            ("true", &[]),
            ("false", &[]),
            ("sh", &["-c", "echo out; echo err >&2; exit 3"]),
            ("sh", &["-c", "printf \\\"%s\\\" \\\"$$FOO\\\""]),
            ("sh", &["-c", "kill -TERM $$$$"]),
            ("nonexistent-cmd", &[]),
            ("/nonexistent", &[]),
            ("printf", &["\\u00ff\\u0000x"]),
        ];
        match self.rng.below(4) {
            0 | 1 => {
                // A finite command, then maybe a reattach on some connection.
                let (cmd, args) = *self.rng.pick(&finite);
                let p = self.spawn_params(&pid, cmd, args, true);
                let mut spawn = self.spawn_req(conn, p);
                spawn.shrinkable = true;
                let mut reqs = vec![spawn];
                if self.rng.pct(20) {
                    // A second spawn with the same id after exit is not
                    // deterministic while the first runs: only an unknown one.
                    let p = vec![Member::new("id", "\"ghost\"")];
                    let mut k = self.plain(conn, "process.kill", Some(p));
                    self.mutate(&mut k);
                    reqs.push(k);
                }
                self.exited.push((pid.clone(), conn));
                Unit::Proc {
                    reqs,
                    conn,
                    proc_id: pid,
                }
            }
            2 => {
                // A long-running child ended by kill / killAndWait, then KILL.
                let p = self.spawn_params(&pid, "sleep", &["30"], false);
                let spawn = self.spawn_req(conn, p);
                let mut reqs = vec![spawn];
                let (method, extra): (&str, Vec<Member>) = if self.rng.pct(50) {
                    let sigs = [
                        "\"TERM\"",
                        "\"KILL\"",
                        "\"INT\"",
                        "\"SIGTERM\"",
                        "\"BOGUS\"",
                        "9",
                        "\"\"",
                        "null",
                    ];
                    let s = self.rng.pick(&sigs).to_string();
                    ("process.kill", vec![Member::new("signal", s)])
                } else {
                    let mut v = vec![];
                    if self.rng.pct(50) {
                        let t = ["50", "200", "0", "-100", "\"100\"", "1.5", "null"];
                        v.push(Member::new("timeoutMs", self.rng.pick(&t).to_string()));
                    }
                    if self.rng.pct(30) {
                        let e = ["true", "false", "\"false\"", "null", "0"];
                        v.push(Member::new("escalate", self.rng.pick(&e).to_string()));
                    }
                    ("process.killAndWait", v)
                };
                let mut p = vec![Member::new("id", format!("\"{pid}\""))];
                p.extend(extra);
                let mut k = self.plain(conn, method, Some(p));
                self.mutate(&mut k);
                reqs.push(k);
                let fin = vec![
                    Member::new("id", format!("\"{pid}\"")),
                    Member::new("signal", "\"KILL\""),
                ];
                let mut fin = self.plain(conn, "process.kill", Some(fin));
                fin.shrinkable = false;
                reqs.push(fin);
                Unit::Proc {
                    reqs,
                    conn,
                    proc_id: pid,
                }
            }
            _ => {
                // stdin: a child reading one line; mutated writes, then "\n".
                let p = self.spawn_params(&pid, "sh", &["-c", "read -r x; printf %s \\\"$$x\\\""], false);
                let spawn = self.spawn_req(conn, p);
                let mut reqs = vec![spawn];
                let mut applied: i64 = 0;
                for _ in 0..1 + self.rng.below(3) {
                    let c2 = self.conn();
                    let datas = ["abc", "x", "", "<>&", "\\xe2\\x80\\xa8", "\\xff"];
                    let d = self.rng.pick(&datas).to_string();
                    let len = expand(&format!("$bytes({d})")).len() as i64;
                    let mut p = vec![Member::new("id", format!("\"{pid}\""))];
                    let data = if self.rng.pct(12) {
                        let bad = ["\"!!!\"", "\"YW\"", "\"YWJj=\"", "123", "null", "\"\""];
                        self.rng.pick(&bad).to_string()
                    } else {
                        b64(&d)
                    };
                    p.push(Member::new("data", data));
                    if self.rng.pct(60) {
                        let offs = [
                            applied.to_string(),
                            (applied + 1).to_string(),
                            (applied - 1).max(0).to_string(),
                            "0".into(),
                            "-1".into(),
                            "9223372036854775807".into(),
                            "-9223372036854775808".into(),
                            "1.0".into(),
                            "\"0\"".into(),
                            "null".into(),
                        ];
                        let o = self.rng.pick(&offs).clone();
                        p.push(Member::new("offset", o));
                    }
                    if !data_is_bad(&p) {
                        applied += len;
                    }
                    let mut w = self.plain(c2, "process.stdin", Some(p));
                    self.mutate(&mut w);
                    reqs.push(w);
                }
                let fin = vec![Member::new("id", format!("\"{pid}\"")), Member::new("data", b64("\\n"))];
                let mut fin = self.plain(conn, "process.stdin", Some(fin));
                fin.shrinkable = false;
                reqs.push(fin);
                self.exited.push((pid.clone(), conn));
                Unit::Proc {
                    reqs,
                    conn,
                    proc_id: pid,
                }
            }
        }
    }

    /// A reattach to an exited process (or an unknown one).
    fn reattach(&mut self) -> Unit {
        let conn = self.conn();
        let known = if self.exited.is_empty() {
            None
        } else {
            let i = self.rng.below(self.exited.len());
            Some(self.exited[i].clone())
        };
        let pid = known.as_ref().map(|k| k.0.clone()).unwrap_or_else(|| "ghost".into());
        let seqs = [
            "0",
            "1",
            "2",
            "-1",
            "100",
            "9223372036854775807",
            "\"0\"",
            "1.5",
            "null",
        ];
        let mut p = vec![Member::new("id", format!("\"{pid}\""))];
        if self.rng.pct(85) {
            p.push(Member::new("fromSeq", self.rng.pick(&seqs).to_string()));
        }
        let mut req = self.plain(conn, "process.reattach", Some(p));
        self.mutate(&mut req);
        match known {
            // Replayed frames land on this connection: record them.
            Some(_) => Unit::Proc {
                reqs: vec![req],
                conn,
                proc_id: pid,
            },
            None => Unit::Req(req),
        }
    }
}

fn data_is_bad(p: &[Member]) -> bool {
    p.iter()
        .any(|m| m.key == "\"data\"" && matches!(&m.val, Val::Text(t) if !t.starts_with("\"$b64")))
}

fn req_text_members(ms: &[Member]) -> String {
    let mut s = String::new();
    render_members(&mut s, ms);
    s
}

/// Cuts template text after `at` atoms (never inside an escape or a
/// `$…` template).
fn safe_cut(t: &str, at: usize) -> String {
    atoms(t).into_iter().take(at).collect()
}

/// Splits template text into atoms that can be removed independently:
/// escapes, `$…` templates (with their parenthesised argument), characters.
pub fn atoms(t: &str) -> Vec<String> {
    let b = t.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        if b[i] == b'\\' {
            i += if b.get(i + 1) == Some(&b'u') { 6 } else { 2 };
        } else if b[i] == b'$' {
            i += 1;
            if b.get(i) == Some(&b'$') {
                i += 1;
            } else {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                if b.get(i) == Some(&b'(') {
                    let mut depth = 0;
                    while i < b.len() {
                        match b[i] {
                            b'\\' => i += 1,
                            b'(' => depth += 1,
                            b')' => {
                                depth -= 1;
                                if depth == 0 {
                                    i += 1;
                                    break;
                                }
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                }
            }
        } else {
            i += t[i..].chars().next().map(char::len_utf8).unwrap_or(1);
        }
        let end = i.min(b.len());
        out.push(t[start..end].to_string());
        i = end;
    }
    out
}

fn set(ms: &mut [Member], key: &str, val: &str) {
    let k = format!("\"{key}\"");
    for m in ms.iter_mut().filter(|m| m.key == k) {
        m.val = Val::Text(val.to_string());
        m.sensitive = false;
    }
}

/// Generates case `n` of `seed`.
pub fn generate(seed: u64, n: u64) -> Case {
    let mut rng = Rng::for_case(seed, n);
    let nconns = 1 + rng.below(3) as u8;
    let mut units: Vec<Unit> = Vec::new();
    let nreq = 1 + rng.below(6);
    let mut g = Gen {
        rng: &mut rng,
        nconns,
        next_id: 0,
        procs: 0,
        exited: Vec::new(),
    };
    let mut body = Vec::new();
    let mut uses_git = false;
    let mut shutdown = None;
    for _ in 0..nreq {
        let roll = g.rng.below(100);
        let unit = if roll < 8 {
            Unit::Req(g.junk_line())
        } else if roll < 22 {
            g.process()
        } else if roll < 27 {
            g.reattach()
        } else if roll < 35 {
            let (a, b) = (*g.rng.pick(&READ_ONLY), *g.rng.pick(&READ_ONLY));
            uses_git |= a.starts_with("git") || b.starts_with("git");
            let (ra, rb) = (g.request(a), g.request(b));
            Unit::Pair(ra, rb)
        } else if roll < 38 {
            Unit::Close(g.conn())
        } else {
            let m = loop {
                let m = *g.rng.pick(&METHODS);
                if m == "server.shutdown" {
                    if shutdown.is_none() && g.rng.pct(30) {
                        shutdown = Some(g.conn());
                    }
                    continue;
                }
                break m;
            };
            uses_git |= m.starts_with("git");
            Unit::Req(g.request(m))
        };
        body.push(unit);
    }
    if g.rng.pct(15) {
        uses_git = true;
    }
    for f in FIXTURES {
        units.push(Unit::Fixture(f.to_string()));
    }
    if uses_git {
        for f in GIT_FIXTURE {
            units.push(Unit::Fixture(f.to_string()));
        }
    }
    units.extend(body);
    if let Some(c) = shutdown {
        units.push(Unit::Shutdown(c));
    }
    Case { seed, n, units }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn same_seed_same_cases() {
        for n in 0..200 {
            assert_eq!(generate(42, n).render(&[]), generate(42, n).render(&[]));
        }
        let a: Vec<String> = (0..20).map(|n| generate(1, n).render(&[])).collect();
        let b: Vec<String> = (0..20).map(|n| generate(2, n).render(&[])).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn every_case_parses_and_covers_all_methods() {
        let mut seen = std::collections::BTreeSet::new();
        for n in 0..3000 {
            let c = generate(7 + n % 5, n);
            let text = c.render(&["header".into()]);
            let p = crate::probe::parse(Path::new("x.probe"), &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert!(!p.steps.is_empty());
            for m in METHODS {
                if text.contains(&format!("\"method\":\"{m}\"")) {
                    seen.insert(m);
                }
            }
        }
        assert_eq!(seen.len(), 19, "{seen:?}");
    }

    #[test]
    fn reply_id_prediction_follows_go() {
        let p = |s: &str| predict_reply_id(&expand(s)).map(|v| v.to_string());
        assert_eq!(p("{\"id\":1}").as_deref(), Some("1"));
        assert_eq!(p("{\"id\":1,\"ID\":2}").as_deref(), Some("2"));
        assert_eq!(p("{\"Id\":\"a\\ud800\"}").as_deref(), Some("\"a\u{fffd}\""));
        assert_eq!(
            p("{\"id\":\"$bytes(\\xe2\\x80)x\"}").as_deref(),
            Some("\"\u{fffd}\u{fffd}x\"")
        );
        assert_eq!(p("{\"id\":1,\"jsonrpc\":2}").as_deref(), Some("null"));
        assert_eq!(p("{\"id\":1,\"method\":null}").as_deref(), Some("1"));
        assert_eq!(p("{\"id\":1e400}").as_deref(), Some("null"));
        assert_eq!(p("{\"id\":[1e400]}").as_deref(), Some("null"));
        assert_eq!(p("{\"id\":2,\"params\":{\"a\":-1e400}}").as_deref(), Some("2"));
        assert_eq!(p("{\"id\":2,\"params\":{\"a\":\"1e400\"}}").as_deref(), Some("2"));
        assert_eq!(p("[1]").as_deref(), Some("null"));
        assert_eq!(p("{\"id\":1} x").as_deref(), Some("null"));
        assert_eq!(p("{\"id\":3,\"jſonrpc\":5}").as_deref(), Some("null"));
        assert_eq!(p(""), None);
        assert_eq!(p("$bytes(\\x20\\x20)"), None);
        assert_eq!(p("{\"id\":{\"b\":1,\"a\":2}}").as_deref(), Some("{\"b\":1,\"a\":2}"));
    }

    #[test]
    fn safe_cut_keeps_templates_whole() {
        assert_eq!(safe_cut("{\"a\":\"$bytes(\\xff)\"}", 7), "{\"a\":\"$bytes(\\xff)");
        assert_eq!(safe_cut("\"$$H\\n", 3), "\"$$H");
    }
}
