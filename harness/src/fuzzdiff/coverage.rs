//! What the generated cases reached: per method, the requests sent and
//! the distinct outcomes of their replies on the reference side (a result,
//! a result reporting failure, or an error code and message) — the error
//! paths a run exercised.
//!
//! A reply is tied to its request through the probe: every `await` takes
//! the earliest unanswered `send` on its connection whose predicted reply
//! id matches, and the request's method is read the way Go decodes it.

use crate::fuzzgen::{predict_method, predict_reply_id, METHODS};
use crate::probe::{Ctx, Probe, StepKind};
use crate::transcript::Transcript;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

/// Outcomes per method, counted over a run.
#[derive(Debug, Default)]
pub struct Coverage {
    /// method → (requests, outcome → count).
    methods: BTreeMap<String, (u64, BTreeMap<String, u64>)>,
}

/// What a request's method is filed under when it has none we know.
const NO_METHOD: &str = "(no method)";
const OTHER_METHOD: &str = "(other method)";

impl Coverage {
    /// Counts the replies of one case run.
    pub fn record(&mut self, probe: &Probe, reference: &Transcript) {
        let ctx = Ctx {
            token: b"probe-token".to_vec(),
            ..Default::default()
        };
        let mut pending: HashMap<&str, Vec<(Option<Value>, String)>> = HashMap::new();
        let mut by_line: HashMap<usize, String> = HashMap::new();
        for s in &probe.steps {
            match &s.kind {
                StepKind::Send { conn, line, .. } => {
                    let bytes = line.expand(&ctx);
                    let method = match predict_method(&bytes) {
                        Some(m) if METHODS.contains(&m.as_str()) => m,
                        Some(_) => OTHER_METHOD.to_string(),
                        None => NO_METHOD.to_string(),
                    };
                    pending
                        .entry(conn)
                        .or_default()
                        .push((predict_reply_id(&bytes), method));
                }
                StepKind::Await { conn, id } => {
                    let want: Value = serde_json::from_str(id).unwrap_or(Value::Null);
                    let q = pending.entry(conn).or_default();
                    if let Some(i) = q.iter().position(|(p, _)| p.as_ref().is_some_and(|p| same(p, &want))) {
                        by_line.insert(s.line, q.remove(i).1);
                    }
                }
                StepKind::Call { method, .. } => {
                    by_line.insert(s.line, method.clone());
                }
                _ => {}
            }
        }
        for e in &reference.entries {
            let Some(line) = reply_line(&e.key) else { continue };
            let Some(method) = by_line.get(&line) else { continue };
            let slot = self.methods.entry(method.clone()).or_default();
            slot.0 += 1;
            *slot.1.entry(outcome(&e.value)).or_default() += 1;
        }
    }

    pub fn merge(&mut self, other: Coverage) {
        for (m, (n, outs)) in other.methods {
            let slot = self.methods.entry(m).or_default();
            slot.0 += n;
            for (o, c) in outs {
                *slot.1.entry(o).or_default() += c;
            }
        }
    }

    /// How many of the table's methods got a reply that is not an error.
    pub fn methods_reached(&self) -> usize {
        METHODS
            .iter()
            .filter(|m| {
                self.methods
                    .get(**m)
                    .is_some_and(|(_, o)| o.keys().any(|k| !k.starts_with("error")))
            })
            .count()
    }

    /// Distinct (method, error or failure outcome) pairs.
    pub fn error_paths(&self) -> usize {
        self.methods
            .values()
            .map(|(_, o)| o.keys().filter(|k| k.as_str() != "ok").count())
            .sum()
    }

    /// One line per method: requests and distinct outcomes.
    pub fn table(&self) -> String {
        let mut s = String::new();
        for (m, (n, outs)) in &self.methods {
            let errors = outs.keys().filter(|k| k.as_str() != "ok").count();
            let _ = writeln!(s, "  {m:<22} {n:>8} replies  {errors:>3} error/failure outcome(s)");
        }
        s
    }

    /// Every (method, outcome, count), tab-separated.
    pub fn full(&self) -> String {
        let mut s = String::new();
        for (m, (_, outs)) in &self.methods {
            for (o, c) in outs {
                let _ = writeln!(s, "{m}\t{c}\t{o}");
            }
        }
        s
    }
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// `L12 c1 reply 3` → 12.
fn reply_line(key: &str) -> Option<usize> {
    let rest = key.strip_prefix('L')?;
    let (num, tail) = rest.split_once(' ')?;
    let (_, kind) = tail.split_once(' ')?;
    if !kind.starts_with("reply ") {
        return None;
    }
    num.parse().ok()
}

/// `ok`, `success:false`, `errorCode <c>`, `found:false`, `error <code>
/// <message, paths elided>`, or the harness's own marker.
fn outcome(v: &[u8]) -> String {
    let Ok(j) = serde_json::from_slice::<Value>(v) else {
        let s = String::from_utf8_lossy(v);
        return if s.starts_with('<') {
            s.into_owned()
        } else {
            "not JSON".into()
        };
    };
    if let Some(e) = j.get("error") {
        let code = e.get("code").map(|c| c.to_string()).unwrap_or_default();
        let msg = e.get("message").and_then(Value::as_str).unwrap_or("");
        return format!("error {code} {}", elide(msg));
    }
    let r = j.get("result");
    if let Some(c) = r.and_then(|r| r.get("errorCode")).and_then(Value::as_str) {
        return format!("errorCode {c}");
    }
    for k in ["success", "found", "isRepo"] {
        if r.and_then(|r| r.get(k)) == Some(&Value::Bool(false)) {
            return format!("{k}:false");
        }
    }
    "ok".into()
}

/// A message without what varies per request: paths, quoted values and
/// numbers become `…`, and it is cut at 80 characters.
fn elide(msg: &str) -> String {
    let words: Vec<String> = msg
        .split(' ')
        .map(|w| {
            if w.contains('/') || w.contains('$') || w.contains('"') || w.chars().any(|c| c.is_ascii_digit()) {
                "…".to_string()
            } else {
                w.to_string()
            }
        })
        .collect();
    words.join(" ").chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_filed_under_their_request_method() {
        let text =
            "send c1 {\"jsonrpc\":\"2.0\",\"id\":1,\"METHOD\":\"files.stat\",\"params\":{},\"auth\":\"$TOKEN\"}\n\
                    send c1 garbage\n\
                    await c1 1\n\
                    await c1 null\n";
        let p = crate::probe::parse(std::path::Path::new("x.probe"), text).unwrap();
        let mut t = Transcript::default();
        t.push(
            "L3 c1 reply 1",
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"stat /x/y: no such file"}}"#.to_vec(),
        );
        t.push(
            "L4 c1 reply null",
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#.to_vec(),
        );
        let mut c = Coverage::default();
        c.record(&p, &t);
        let full = c.full();
        assert!(
            full.contains("files.stat\t1\terror -32602 stat … no such file"),
            "{full}"
        );
        assert!(full.contains("(no method)\t1\terror -32700 Parse error"), "{full}");
        assert_eq!(c.methods_reached(), 0);
        assert_eq!(c.error_paths(), 2);
        assert_eq!(
            outcome(br#"{"result":{"success":false,"errorCode":"not_a_repo"}}"#),
            "errorCode not_a_repo"
        );
        assert_eq!(outcome(br#"{"result":{"found":false}}"#), "found:false");
        assert_eq!(outcome(b"<timeout, no reply>"), "<timeout, no reply>");
    }
}
