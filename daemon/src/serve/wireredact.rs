//! What one frame becomes in the wire log ([`crate::serve::wirelog`]):
//! the record's JSON line, with secrets taken out and long strings cut.
//!
//! A frame that parses as JSON is logged as the value it is (`"frame"`),
//! anything else as its text (`"raw"`, invalid UTF-8 replaced), so the two
//! never read alike. Before it is written:
//!
//! * every member named `auth`, at any depth, becomes [`REDACTED`]: it is
//!   where every request carries the token;
//! * inside an `env` object (`process.spawn`'s `params.env`), a member
//!   whose name reads like a secret ([`secret_name`]: TOKEN, SECRET, KEY,
//!   PASSWORD, PASSWD, CREDENTIAL, AUTH, any case) becomes [`REDACTED`];
//! * every string longer than the limit (`wire-log-max-string`; 0 keeps
//!   all) is cut at a character boundary and marked with how much was
//!   left out: `process.stdin` data, stream frames' base64, file bodies;
//! * a raw line's `"auth"` string is blanked by a scan of the text
//!   ([`blank_raw_auth`]), since a line that does not parse has no
//!   members;
//! * last, any copy of this daemon's own token left in the record (say, in
//!   a command line) is replaced, so the file never holds it.
//!
//! The walk keeps its own stack: a frame's depth is the client's to
//! choose, and nothing here recurses on it.

use serde_json::{Map, Value};

/// What a secret is replaced by.
pub(crate) const REDACTED: &str = "[redacted]";

/// Whether an environment variable's name reads like it holds a secret.
pub(crate) fn secret_name(name: &str) -> bool {
    const WORDS: [&str; 7] = ["TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH"];
    let upper = name.to_ascii_uppercase();
    WORDS.iter().any(|w| upper.contains(w))
}

/// Which way a frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// From the client to the daemon.
    In,
    /// From the daemon to the client.
    Out,
}

impl Direction {
    fn word(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }
}

/// How frames are cleaned.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    /// Strings longer than this many bytes are cut; 0 keeps all.
    pub max_string: usize,
    /// This daemon's token, never written.
    pub token: Vec<u8>,
}

/// Where a record was seen.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    /// `2006-01-02T15:04:05.000000Z`.
    pub micros: i64,
    pub conn: u64,
    pub peer: Option<i32>,
    pub direction: Direction,
}

impl Rules {
    /// One record, a JSON line with its newline.
    pub(crate) fn record(&self, origin: Origin, frame: &[u8]) -> Vec<u8> {
        let mut record = Map::new();
        record.insert("ts".into(), Value::String(timestamp(origin.micros)));
        record.insert("conn".into(), Value::from(origin.conn));
        record.insert("pid".into(), origin.peer.map_or(Value::Null, Value::from));
        record.insert("dir".into(), Value::String(origin.direction.word().into()));
        let parsed = serde_json::from_slice::<Value>(frame).map(|mut value| {
            let changed = self.clean(&mut value);
            (value, changed)
        });
        match parsed {
            Ok((_, false)) => {
                // Nothing to take out: the frame's own bytes, last, so
                // escapes and number spellings stay as they crossed the
                // wire (`harness import` compares them byte for byte).
                let mut line = serde_json::to_vec(&Value::Object(record)).unwrap_or_default();
                line.pop();
                line.extend_from_slice(b",\"frame\":");
                line.extend_from_slice(frame);
                line.push(b'}');
                self.scrub_token(&mut line);
                line.push(b'\n');
                return line;
            }
            Ok((value, true)) => {
                record.insert("frame".into(), value);
            }
            Err(_) => {
                let mut text = String::from_utf8_lossy(frame).into_owned();
                blank_raw_auth(&mut text);
                let _ = cut(&mut text, self.max_string);
                record.insert("raw".into(), Value::String(text));
            }
        }
        let mut line = serde_json::to_vec(&Value::Object(record)).unwrap_or_default();
        self.scrub_token(&mut line);
        line.push(b'\n');
        line
    }

    /// A line of its own for frames the queue had no room for.
    pub(crate) fn lost(micros: i64, frames: u64) -> Vec<u8> {
        let mut record = Map::new();
        record.insert("ts".into(), Value::String(timestamp(micros)));
        record.insert("lost".into(), Value::from(frames));
        let mut line = serde_json::to_vec(&Value::Object(record)).unwrap_or_default();
        line.push(b'\n');
        line
    }

    /// Redacts and cuts `value` in place, without recursion; true when
    /// anything changed.
    fn clean(&self, value: &mut Value) -> bool {
        let mut changed = false;
        let mut stack: Vec<(&mut Value, bool)> = vec![(value, false)];
        while let Some((value, in_env)) = stack.pop() {
            match value {
                Value::String(s) => changed |= cut(s, self.max_string),
                Value::Array(items) => stack.extend(items.iter_mut().map(|v| (v, false))),
                Value::Object(members) => {
                    for (name, member) in members.iter_mut() {
                        if name == "auth" || (in_env && secret_name(name)) {
                            *member = Value::String(REDACTED.into());
                            changed = true;
                        } else {
                            stack.push((member, name == "env"));
                        }
                    }
                }
                _ => {}
            }
        }
        changed
    }

    /// Replaces every copy of the token in `line`.
    fn scrub_token(&self, line: &mut Vec<u8>) {
        if self.token.is_empty() || memchr::memmem::find(line, &self.token).is_none() {
            return;
        }
        let mut out = Vec::with_capacity(line.len());
        let mut rest: &[u8] = line;
        while let Some(at) = memchr::memmem::find(rest, &self.token) {
            out.extend_from_slice(&rest[..at]);
            out.extend_from_slice(REDACTED.as_bytes());
            rest = &rest[at + self.token.len()..];
        }
        out.extend_from_slice(rest);
        *line = out;
    }
}

/// Cuts `s` to at most `max` bytes (0 = no limit) at a character
/// boundary, and says how many bytes were left out; true when it did.
fn cut(s: &mut String, max: usize) -> bool {
    if max == 0 || s.len() <= max {
        return false;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let dropped = s.len() - end;
    s.truncate(end);
    s.push_str(&format!("...[cut {dropped} bytes]"));
    true
}

/// Blanks the string after every `"auth"` member name in a line that is
/// not JSON: `"auth" : "x"` becomes `"auth" : "[redacted]"`.
fn blank_raw_auth(text: &mut String) {
    const NAME: &str = "\"auth\"";
    let mut from = 0;
    while let Some(found) = text[from..].find(NAME) {
        let mut at = from + found + NAME.len();
        let bytes = text.as_bytes();
        while at < bytes.len() && (bytes[at] == b' ' || bytes[at] == b'\t') {
            at += 1;
        }
        if at >= bytes.len() || bytes[at] != b':' {
            from = at;
            continue;
        }
        at += 1;
        while at < bytes.len() && (bytes[at] == b' ' || bytes[at] == b'\t') {
            at += 1;
        }
        if at >= bytes.len() || bytes[at] != b'"' {
            from = at;
            continue;
        }
        let start = at + 1;
        let mut end = start;
        let mut escaped = false;
        while end < bytes.len() {
            match bytes[end] {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => break,
                _ => {}
            }
            end += 1;
        }
        text.replace_range(start..end, REDACTED);
        from = start + REDACTED.len();
    }
}

/// Microseconds since the epoch as `2006-01-02T15:04:05.000000Z`.
fn timestamp(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let whole = crate::base::utctime::rfc3339(secs);
    format!("{}.{frac:06}Z", whole.trim_end_matches('Z'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(max: usize) -> Rules {
        Rules {
            max_string: max,
            token: b"tok-\xc3\xa9".to_vec(),
        }
    }

    fn origin() -> Origin {
        Origin {
            micros: 1_700_000_000_123_456,
            conn: 3,
            peer: Some(42),
            direction: Direction::In,
        }
    }

    fn record(max: usize, frame: &str) -> String {
        String::from_utf8(rules(max).record(origin(), frame.as_bytes())).unwrap()
    }

    #[test]
    fn a_request_loses_its_token_and_secret_env() {
        let line = record(
            0,
            r#"{"jsonrpc":"2.0","id":1,"method":"process.spawn","params":{"command":"sh","env":{"GH_TOKEN":"a","api_key":"b","PATH":"/bin"},"args":["tok-é"]},"auth":"tok-é"}"#,
        );
        assert_eq!(
            line,
            concat!(
                r#"{"ts":"2023-11-14T22:13:20.123456Z","conn":3,"pid":42,"dir":"in","frame":"#,
                r#"{"jsonrpc":"2.0","id":1,"method":"process.spawn","params":{"command":"sh","env":{"GH_TOKEN":"[redacted]","api_key":"[redacted]","PATH":"/bin"},"args":["[redacted]"]},"auth":"[redacted]"}}"#,
                "\n"
            )
        );
    }

    #[test]
    fn long_strings_are_cut_at_a_character() {
        let line = record(4, r#"{"data":"abcdefgh","k":"é€x"}"#);
        assert!(line.contains(r#""data":"abcd...[cut 4 bytes]""#), "{line}");
        assert!(line.contains(r#""k":"é...[cut 4 bytes]""#), "{line}");
        assert!(record(0, r#"{"data":"abcdefgh"}"#).contains(r#""data":"abcdefgh""#));
    }

    #[test]
    fn a_line_that_is_not_json_is_text_with_its_auth_blanked() {
        let line = record(0, r#"{"auth" : "other-token", "id":"#);
        assert!(
            line.contains(r#""raw":"{\"auth\" : \"[redacted]\", \"id\":""#),
            "{line}"
        );
        assert!(!line.contains("other-token"));
    }

    #[test]
    fn a_frame_with_nothing_to_take_out_keeps_its_bytes() {
        let line = record(0, r#"{"id":1,"result":{"a":"\u003c","n":1.50}}"#);
        assert!(
            line.trim_end()
                .ends_with(r#""dir":"in","frame":{"id":1,"result":{"a":"\u003c","n":1.50}}}"#),
            "{line}"
        );
    }

    #[test]
    fn depth_is_walked_without_recursion() {
        let deep = format!("{}\"x\"{}", "[".repeat(100), "]".repeat(100));
        assert!(record(0, &deep).contains("\"frame\":[[[["));
    }

    #[test]
    fn secret_names() {
        for name in ["GITHUB_TOKEN", "aws_secret_access_key", "DB_PASSWORD", "X_AUTH"] {
            assert!(secret_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "LANG"] {
            assert!(!secret_name(name), "{name}");
        }
    }
}
