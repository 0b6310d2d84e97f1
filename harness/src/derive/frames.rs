//! Recorded reply frames as a source holds them, turned into transcript
//! values: a golden file's pretty-printed JSON array split into compact
//! frames (string escapes kept byte for byte, so `\u003e` stays as the
//! reference wrote it), a typed file read one frame per line, and the
//! source's placeholders mapped onto the harness normalisation.

use super::error::FrameError;
use serde_json::Value;

/// Tells, character by character, whether JSON text is inside a string
/// (its quotes included): the one scanner for every pass here that must
/// leave strings alone.
#[derive(Default)]
pub(super) struct Strings {
    inside: bool,
    escaped: bool,
}

impl Strings {
    /// Takes the next character; true when it belongs to a string.
    pub(super) fn holds(&mut self, c: char) -> bool {
        if self.inside {
            if self.escaped {
                self.escaped = false;
            } else if c == '\\' {
                self.escaped = true;
            } else if c == '"' {
                self.inside = false;
            }
            return true;
        }
        self.inside = c == '"';
        self.inside
    }
}

/// Splits a JSON array into its elements, each compacted: whitespace
/// outside strings is dropped, everything else (member order, number
/// spelling, escapes) is kept exactly. Every element must be valid JSON.
pub fn golden_frames(text: &str) -> Result<Vec<String>, FrameError> {
    let parsed: Value = serde_json::from_str(text).map_err(FrameError::NotJson)?;
    let count = parsed.as_array().ok_or(FrameError::NotArray)?.len();
    let body = text.trim();
    let inner = &body[1..body.len() - 1];
    let mut frames = Vec::new();
    let mut cur = String::new();
    let (mut depth, mut strings) = (0usize, Strings::default());
    for c in inner.chars() {
        if strings.holds(c) {
            cur.push(c);
            continue;
        }
        match c {
            '{' | '[' => {
                depth += 1;
                cur.push(c);
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                cur.push(c);
            }
            ',' if depth == 0 => frames.push(std::mem::take(&mut cur)),
            c if c.is_whitespace() => {}
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        frames.push(cur);
    }
    for f in &frames {
        serde_json::from_str::<Value>(f).map_err(|source| FrameError::Element {
            element: f.clone(),
            source,
        })?;
    }
    if frames.len() != count {
        return Err(FrameError::Split {
            got: frames.len(),
            want: count,
        });
    }
    Ok(frames)
}

/// A typed source: one JSON frame per line, as typed from a record page;
/// blank lines and `#` comment lines are skipped.
pub fn typed_frames(text: &str) -> Result<Vec<String>, FrameError> {
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let l = l.trim_end();
        if l.trim().is_empty() || l.starts_with('#') {
            continue;
        }
        serde_json::from_str::<Value>(l).map_err(|source| FrameError::LineNotJson { line: i + 1, source })?;
        out.push(l.to_string());
    }
    Ok(out)
}

/// The numbered placeholders the harness writes for per-run values, with
/// the source placeholder each one replaces: `"key":"<SRC>"` becomes
/// `"key":<key:k>` (the harness form is a bare token where the wire has a
/// number, a quoted one where it has a string).
const NUMBERED: &[(&str, &str, bool)] = &[
    ("instanceId", "<IID>", true),
    ("startedAt", "<T>", false),
    ("pid", "<PID>", false),
    ("startTime", "<TS>", false),
];

/// Placeholders mapped wherever they stand (after the recipe's own maps).
/// `<HOME>` is the daemon's HOME, which the runner's normalisation writes
/// as `$RUN/home` (it is the run directory's `home`); no normalised
/// transcript ever holds `$HOME`.
const PLAIN: &[(&str, &str)] = &[
    ("\"<V>\"", "\"<version>\""),
    ("<DIR>", "$ROOT"),
    ("<HOME>", "$RUN/home"),
];

/// The `k` remora's normalised reply carries for `"key":<key:k>` (or its
/// quoted form), so a derived frame names the same boot or process.
fn number_in(remora: &str, key: &str) -> String {
    for open in [format!("\"{key}\":<{key}:"), format!("\"{key}\":\"<{key}:")] {
        if let Some(at) = remora.find(&open) {
            let rest = &remora[at + open.len()..];
            let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if !n.is_empty() {
                return n;
            }
        }
    }
    "1".into()
}

/// Maps a source frame's placeholders onto the harness normalisation:
/// first the recipe's `map FROM TO` pairs, then the numbered per-run
/// values (numbered as in remora's own reply, `remora`), then the plain
/// ones. A `<UPPER>` placeholder left over is refused: a frame is never
/// compared with a placeholder nobody mapped.
pub fn map_placeholders(frame: &str, maps: &[(String, String)], remora: &str) -> Result<String, FrameError> {
    let mut f = frame.to_string();
    for (from, to) in maps {
        f = f.replace(from.as_str(), to);
    }
    for (key, src, quoted) in NUMBERED {
        let from = format!("\"{key}\":\"{src}\"");
        if f.contains(&from) {
            let k = number_in(remora, key);
            let to = if *quoted {
                format!("\"{key}\":\"<{key}:{k}>\"")
            } else {
                format!("\"{key}\":<{key}:{k}>")
            };
            f = f.replace(&from, &to);
        }
    }
    for (from, to) in PLAIN {
        f = f.replace(from, to);
    }
    if let Some(p) = leftover_placeholder(&f) {
        return Err(FrameError::Unmapped(p.to_string()));
    }
    Ok(f)
}

/// The first `<NAME>` left in a frame whose name is upper-case letters,
/// digits and `_` (the sources' placeholder spelling).
fn leftover_placeholder(f: &str) -> Option<&str> {
    let b = f.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c != b'<' {
            continue;
        }
        let len = b[i + 1..]
            .iter()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || **c == b'_')
            .count();
        if len > 0 && b.get(i + 1 + len) == Some(&b'>') {
            return Some(&f[i..i + len + 2]);
        }
    }
    None
}

/// Wraps a bare result object (a golden file that records results only)
/// into the reply envelope, with the id remora's reply carries.
pub fn wrap_result(result: &str, remora: &str) -> Result<String, FrameError> {
    // The id is the envelope's second member; it never holds a bare
    // harness token, so it is read off the text.
    let rest = remora
        .strip_prefix("{\"jsonrpc\":\"2.0\",\"id\":")
        .ok_or_else(|| FrameError::NotEnvelope(remora.to_string()))?;
    let id: String = match serde_json::Deserializer::from_str(rest).into_iter::<Value>().next() {
        Some(Ok(v)) => v.to_string(),
        _ => return Err(FrameError::NoId(remora.to_string())),
    };
    Ok(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_elements_are_compacted_with_escapes_kept() {
        let text = "[\n  {\n    \"id\": 1,\n    \"m\": \"a -\\u003e b, [x]\"\n  },\n  {\n    \"id\": null\n  }\n]\n";
        let f = golden_frames(text).unwrap();
        assert_eq!(f, vec![r#"{"id":1,"m":"a -\u003e b, [x]"}"#, r#"{"id":null}"#]);
        assert_eq!(golden_frames("[]").unwrap(), Vec::<String>::new());
        assert!(golden_frames("{}").is_err());
    }

    #[test]
    fn placeholders_map_onto_the_normalisation() {
        let frame = r#"{"version":"<V>","instanceId":"<IID>","startedAt":"<T>","path":"<DIR>/a"}"#;
        let remora = r#"{"instanceId":"<instanceId:2>","startedAt":<startedAt:2>}"#;
        assert_eq!(
            map_placeholders(frame, &[], remora).unwrap(),
            r#"{"version":"<version>","instanceId":"<instanceId:2>","startedAt":<startedAt:2>,"path":"$ROOT/a"}"#
        );
        let long = [("<LONG>".to_string(), "x".repeat(3))];
        assert_eq!(
            map_placeholders(r#"{"m":"<DIR>/<LONG>"}"#, &long, "").unwrap(),
            r#"{"m":"$ROOT/xxx"}"#
        );
        let e = map_placeholders(r#"{"m":"<LONG>"}"#, &[], "").unwrap_err();
        assert!(e.to_string().contains("<LONG>"), "{e}");
        assert!(map_placeholders(r#"{"m":"a \u003cclientId\u003e"}"#, &[], "").is_ok());
    }

    /// A source's `<HOME>` must read as the runner normalises the daemon's
    /// real HOME, or every frame naming it differs.
    #[test]
    fn home_placeholder_matches_the_normalised_daemon_home() {
        let sb = crate::runner::Sandbox::new().unwrap();
        let cfg = crate::runner::RunConfig {
            bin: "/nonexistent/remora".into(),
            renames: Vec::new(),
            transport: crate::dut::Transport::Socket,
        };
        let real = format!(r#"{{"path":"{}/x"}}"#, sb.home().display());
        let normalised = String::from_utf8(sb.normalizer(&cfg).text(real.as_bytes())).unwrap();
        assert_eq!(map_placeholders(r#"{"path":"<HOME>/x"}"#, &[], "").unwrap(), normalised);
        assert_eq!(normalised, r#"{"path":"$RUN/home/x"}"#);
    }

    #[test]
    fn a_bare_result_takes_remoras_id() {
        assert_eq!(
            wrap_result(
                r#"{"success":true}"#,
                r#"{"jsonrpc":"2.0","id":7,"result":{"pid":<pid:1>}}"#
            )
            .unwrap(),
            r#"{"jsonrpc":"2.0","id":7,"result":{"success":true}}"#
        );
    }
}
