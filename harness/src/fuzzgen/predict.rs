//! Predicting the reply id of a generated request line the way Go's
//! decoder reads it (case-insensitive keys, last duplicate wins, a wrongly
//! typed envelope field or malformed JSON is a parse error with id null),
//! so a case awaits exactly the reply the daemon will send.

use crate::probe::{Ctx, Piece, Template};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;

/// The context generated templates are expanded with for predictions.
pub(super) fn predict_ctx() -> Ctx {
    Ctx {
        root: "/r".into(),
        token: b"probe-token".to_vec(),
        socket: "/r.sock".into(),
        run: "/run".into(),
        home: "/run/home".into(),
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
pub(super) fn go_lossy(b: &[u8]) -> String {
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
pub(super) fn fix_surrogates(s: &str) -> String {
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
/// `None` when no reply is expected, which is only a line with nothing
/// left after its one trailing `\r` (a line of spaces does not decode:
/// -32700 with id null, docs/PROTOCOL.md).
pub fn predict_reply_id(line: &[u8]) -> Option<Value> {
    if line.strip_suffix(b"\r").unwrap_or(line).is_empty() {
        return None;
    }
    Some(envelope_id(line).unwrap_or(Value::Null))
}

/// The id of a line whose envelope Go decodes (an absent id is null);
/// `None` when the decode fails (-32700, answered with id null), and the
/// daemon does nothing else with the line. This is what tells an explicit
/// `"id":null`, which runs the method, from a parse error, which does not.
pub(super) fn envelope_id(line: &[u8]) -> Option<Value> {
    let text = mark_overflow(&fix_surrogates(&go_lossy(line)));
    serde_json::from_str::<Value>(&text).ok()?;
    let Members(ms) = serde_json::from_str::<Members>(&text).ok()?;
    let mut id = Value::Null;
    let mut overflow = false;
    for (k, v) in ms {
        if fold_eq(&k, "id") {
            // Go saves the decode error of any occurrence, not just the last.
            overflow |= has_overflow(&v);
            id = v;
        } else if ["jsonrpc", "method", "auth"].iter().any(|f| fold_eq(&k, f))
            && (!matches!(v, Value::String(_) | Value::Null) || has_overflow(&v))
        {
            return None;
        }
    }
    // A number out of float64 range fails the decode of the id (an
    // interface{}), but not of params (raw JSON, decoded later).
    if overflow {
        return None;
    }
    Some(id)
}

/// The method Go's decoder reads from one request line (last
/// case-insensitive duplicate wins): `None` when the line does not decode
/// as an object or the method is not a string.
pub fn predict_method(line: &[u8]) -> Option<String> {
    let text = mark_overflow(&fix_surrogates(&go_lossy(line)));
    let Members(ms) = serde_json::from_str::<Members>(&text).ok()?;
    let mut method = None;
    for (k, v) in ms {
        if fold_eq(&k, "method") {
            method = v.as_str().map(str::to_string);
        }
    }
    method
}

/// What a `process.spawn` or `process.reattach` line asks of the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRequest {
    /// The process id it names.
    pub id: String,
    /// A spawn (otherwise a reattach, which replays what exists).
    pub spawn: bool,
    /// A spawn with a command: the only request that can start a process
    /// (a spawn without one fails, a reattach only replays).
    pub starts: bool,
}

/// The [`ProcessRequest`] of a line, as Go's decoder reads it (last
/// case-insensitive `params`, then its last case-insensitive members):
/// `None` for other methods, lines whose envelope does not decode (an id
/// of `1e400` is a parse error), and ids that are not strings (those
/// start and replay nothing).
pub fn predict_process(line: &[u8]) -> Option<ProcessRequest> {
    envelope_id(line)?;
    let method = predict_method(line)?;
    if method != "process.spawn" && method != "process.reattach" {
        return None;
    }
    let text = mark_overflow(&fix_surrogates(&go_lossy(line)));
    let Members(ms) = serde_json::from_str::<Members>(&text).ok()?;
    let params = ms.into_iter().rev().find(|(k, _)| fold_eq(k, "params"))?.1;
    let Members(ps) = serde_json::from_value::<Members>(params).ok()?;
    let last = |key: &str| ps.iter().rev().find(|(k, _)| fold_eq(k, key)).map(|(_, v)| v);
    // A string, and not the marker of a number Go could not decode.
    let text_of = |v: Option<&Value>| match v {
        Some(v @ Value::String(s)) if !has_overflow(v) => Some(s.clone()),
        _ => None,
    };
    let id = text_of(last("id"))?;
    let spawn = method == "process.spawn";
    let starts = spawn && text_of(last("command")).is_some_and(|c| !c.is_empty());
    Some(ProcessRequest { id, spawn, starts })
}

pub(super) const OVERFLOW: &str = "\\u0000overflow";

pub(super) fn has_overflow(v: &Value) -> bool {
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
pub(super) fn mark_overflow(s: &str) -> String {
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
