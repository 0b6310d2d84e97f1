//! `harness derive`: a reference-derived transcript from a probe and a
//! source of recorded replies (a golden JSON array, or frames typed from a
//! record page), described by a recipe `corpora/sources/<probe>.derive`.
//!
//! The probe is run against remora only to learn the transcript's shape:
//! its keys, and the entries that are not replies (banner, streams,
//! snapshot). Every reply value is then replaced by the source's frame, in
//! order, or by a frame the recipe types from another reference document.
//! The counts must line up exactly and no reply may keep remora's value,
//! so a derived transcript never compares remora with itself.
//!
//! Recipe lines (`#` comments and blank lines skipped):
//!
//! | line | meaning |
//! | --- | --- |
//! | `repository <owner/name>` | where the source lives |
//! | `file <path>` | the source's path in that repository |
//! | `version <commit or index id>` | the version of the source stored here |
//! | `build <id>` | the reference build the source names |
//! | `requests <where>` | where the request sequence was taken from |
//! | `golden <path>` / `typed <path>` | the stored source bytes, relative to the recipe |
//! | `map <FROM> <TO>` | a placeholder of the source and its harness value |
//! | `wrap result` | the source records bare `result` objects |
//! | `frame <key> \| <frame> \| <citation>` | one entry (a reply, or e.g. an exit frame) typed from another reference document |
//! | `replace <key> \| <frame> \| <citation>` | the source's frame for this reply, superseded by a later pinned build's frame typed from another reference document |
//! | `pending <key glob> \| <issue> \| <build> \| <behaviour>` | a known difference an issue adopts |

mod error;
mod frames;

pub use error::{Error, FrameError, LineProblem};

use crate::base::error::At;
use crate::transcript::compare::is_reply_key;
use crate::transcript::{escape, Pending, Transcript, DERIVED_MARK};
use std::path::{Path, PathBuf};

/// Where the stored source bytes are and how to read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceBytes {
    Golden(PathBuf),
    Typed(PathBuf),
}

/// A reply the recipe types from another reference document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedFrame {
    pub key: String,
    pub frame: String,
    pub citation: String,
}

/// A parsed `.derive` recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    pub probe: String,
    pub repository: String,
    pub file: String,
    pub version: String,
    pub build: String,
    pub requests: String,
    pub source: SourceBytes,
    pub maps: Vec<(String, String)>,
    pub wrap_result: bool,
    pub typed: Vec<TypedFrame>,
    /// Source frames superseded by a later build's (`replace` lines).
    pub replaced: Vec<TypedFrame>,
    pub pending: Vec<Pending>,
}

fn field(fields: &[(String, String)], name: &'static str, path: &Path) -> Result<String, Error> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .ok_or_else(|| Error::NoField {
            path: path.to_path_buf(),
            name,
        })
}

impl Recipe {
    /// Reads `<dir>/<probe>.derive`.
    pub fn load(path: &Path) -> Result<Recipe, Error> {
        let text = std::fs::read_to_string(path).at(path)?;
        let probe = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| Error::NoProbeName(path.to_path_buf()))?
            .to_string();
        Recipe::parse(&probe, &text, path.parent().unwrap_or(Path::new(".")), path)
    }

    /// Parses recipe text; `dir` resolves the source path, `path` names
    /// the recipe in errors.
    pub fn parse(probe: &str, text: &str, dir: &Path, path: &Path) -> Result<Recipe, Error> {
        let mut fields = Vec::new();
        let (mut source, mut maps, mut wrap_result, mut typed, mut pending) =
            (None, Vec::new(), false, Vec::new(), Vec::new());
        let mut replaced = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let bad = |problem| Error::Line {
                at: format!("{}:{}", path.display(), i + 1),
                problem,
            };
            let (word, rest) = l.split_once(' ').map(|(w, r)| (w, r.trim())).unwrap_or((l, ""));
            match word {
                "repository" | "file" | "version" | "build" | "requests" => {
                    if rest.is_empty() {
                        return Err(bad(LineProblem::NeedsValue(word.to_string())));
                    }
                    fields.push((word.to_string(), rest.to_string()));
                }
                "golden" => source = Some(SourceBytes::Golden(dir.join(rest))),
                "typed" => source = Some(SourceBytes::Typed(dir.join(rest))),
                "map" => {
                    let (from, to) = rest.split_once(' ').ok_or_else(|| bad(LineProblem::Map))?;
                    maps.push((from.to_string(), to.trim().to_string()));
                }
                "wrap" if rest == "result" => wrap_result = true,
                "frame" | "replace" => {
                    let parts: Vec<&str> = rest.splitn(3, " | ").map(str::trim).collect();
                    match parts.as_slice() {
                        [k, f, c] if !k.is_empty() && !f.is_empty() && !c.is_empty() => {
                            serde_json::from_str::<serde_json::Value>(&bare_tokens_as_zero(f))
                                .map_err(|e| bad(LineProblem::FrameNotJson(e)))?;
                            let t = TypedFrame {
                                key: k.to_string(),
                                frame: f.to_string(),
                                citation: c.to_string(),
                            };
                            if word == "frame" {
                                typed.push(t);
                            } else {
                                replaced.push(t);
                            }
                        }
                        _ => return Err(bad(LineProblem::FrameShape)),
                    }
                }
                "pending" => pending.push(Pending::parse(rest).map_err(|e| bad(LineProblem::Pending(e)))?),
                _ => return Err(bad(LineProblem::Unknown(word.to_string()))),
            }
        }
        Ok(Recipe {
            probe: probe.to_string(),
            repository: field(&fields, "repository", path)?,
            file: field(&fields, "file", path)?,
            version: field(&fields, "version", path)?,
            build: field(&fields, "build", path)?,
            requests: field(&fields, "requests", path)?,
            source: source.ok_or_else(|| Error::NoSource(path.to_path_buf()))?,
            maps,
            wrap_result,
            typed,
            replaced,
            pending,
        })
    }

    /// The source's frames, in order, as stored.
    pub fn frames(&self) -> Result<Vec<String>, Error> {
        let (p, golden) = match &self.source {
            SourceBytes::Golden(p) => (p, true),
            SourceBytes::Typed(p) => (p, false),
        };
        let text = std::fs::read_to_string(p).at(p)?;
        if golden {
            frames::golden_frames(&text)
        } else {
            frames::typed_frames(&text)
        }
        .map_err(|problem| Error::Source {
            path: p.clone(),
            problem,
        })
    }
}

/// The frame with every bare harness token (`<startedAt:1>`, outside
/// strings) read as `0`, so it parses as JSON for the id check.
fn bare_tokens_as_zero(f: &str) -> String {
    let mut out = String::with_capacity(f.len());
    let (mut strings, mut in_token) = (frames::Strings::default(), false);
    for c in f.chars() {
        if in_token {
            if c == '>' {
                in_token = false;
                out.push('0');
            }
            continue;
        }
        if !strings.holds(c) && c == '<' {
            in_token = true;
            continue;
        }
        out.push(c);
    }
    out
}

/// The id token of a reply key (`L5 c1 reply 3 #2` → `3`).
pub(crate) fn key_id(key: &str) -> &str {
    let rest = key.splitn(4, ' ').nth(3).unwrap_or("");
    rest.split(" #").next().unwrap_or(rest)
}

/// Builds the derived transcript's text from remora's run of the probe.
pub fn derived_text(recipe: &Recipe, run: &Transcript) -> Result<String, Error> {
    let frames = recipe.frames()?;
    for t in &recipe.typed {
        if !run.entries.iter().any(|e| e.key == t.key) {
            return Err(Error::NoEntry(t.key.clone()));
        }
    }
    let fill: Vec<&str> = run
        .entries
        .iter()
        .map(|e| e.key.as_str())
        .filter(|k| is_reply_key(k) && !recipe.typed.iter().any(|t| t.key == *k))
        .collect();
    if fill.len() != frames.len() {
        return Err(Error::Count {
            probe: recipe.probe.clone(),
            frames: frames.len(),
            fill: fill.iter().map(|k| k.to_string()).collect(),
        });
    }
    let mut values: Vec<(String, String)> = Vec::new();
    for (key, frame) in fill.iter().zip(&frames) {
        let remora = run
            .entries
            .iter()
            .find(|e| e.key == *key)
            .map(|e| String::from_utf8_lossy(&e.value).into_owned())
            .unwrap_or_default();
        let in_frame = |problem| Error::Frame {
            key: key.to_string(),
            problem,
        };
        let mut f = frames::map_placeholders(frame, &recipe.maps, &remora).map_err(in_frame)?;
        if recipe.wrap_result {
            f = frames::wrap_result(&f, &remora).map_err(in_frame)?;
        }
        let v: serde_json::Value =
            serde_json::from_str(&bare_tokens_as_zero(&f)).map_err(|e| in_frame(FrameError::NotJson(e)))?;
        let id = v.get("id").map(|i| i.to_string()).unwrap_or_default();
        if id != key_id(key) {
            return Err(Error::OutOfStep {
                probe: recipe.probe.clone(),
                n: values.len() + 1,
                id,
                key: key.to_string(),
            });
        }
        values.push((key.to_string(), f));
    }
    for r in &recipe.replaced {
        let Some(slot) = values.iter_mut().find(|(k, _)| *k == r.key) else {
            return Err(Error::NotFilled(r.key.clone()));
        };
        slot.1 = r.frame.clone();
    }
    for t in &recipe.typed {
        values.push((t.key.clone(), t.frame.clone()));
    }
    let mut out = format!(
        "# harness transcript v1\n# probe: {}\n{DERIVED_MARK} {} {} @ {}, build {}; requests from {}\n",
        recipe.probe, recipe.repository, recipe.file, recipe.version, recipe.build, recipe.requests
    );
    out.push_str(&format!(
        "# frames: {} from the source, {} typed from other reference documents; recipe corpora/sources/{}.derive\n",
        frames.len(),
        recipe.typed.len(),
        recipe.probe
    ));
    for t in &recipe.typed {
        out.push_str(&format!("# typed: {} from {}\n", t.key, t.citation));
    }
    for r in &recipe.replaced {
        out.push_str(&format!("# replaced: {} from {}\n", r.key, r.citation));
    }
    for p in &recipe.pending {
        out.push_str(&p.to_line());
        out.push('\n');
    }
    out.push_str("# replies derived by `harness derive` (other entries recorded from remora); `harness record` keeps this file\n");
    for e in &run.entries {
        let value = match values.iter().find(|(k, _)| *k == e.key) {
            Some((_, f)) => escape(f.as_bytes()),
            None => escape(&e.value),
        };
        out.push_str(&e.key);
        out.push('\t');
        out.push_str(&value);
        out.push('\n');
    }
    Ok(out)
}

/// The keys whose values differ between an old and a new transcript text
/// (comments ignored), for the re-derive summary.
pub fn changed_keys(old: &str, new: &str) -> Vec<String> {
    let entries = |t: &str| -> Vec<(String, String)> {
        t.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| l.split_once('\t'))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let (a, b) = (entries(old), entries(new));
    let mut out: Vec<String> = b.iter().filter(|e| !a.contains(e)).map(|(k, _)| k.clone()).collect();
    out.extend(
        a.iter()
            .filter(|(k, _)| !b.iter().any(|(bk, _)| bk == k))
            .map(|(k, _)| k.clone()),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe(dir: &Path, extra: &str) -> Recipe {
        let text = format!(
            "repository o/r\nfile testdata/x.golden.json\nversion abc\nbuild 5db5e4a\nrequests x_test.go TestX\ngolden x.golden.json\n{extra}"
        );
        Recipe::parse("x", &text, dir, Path::new("x.derive")).unwrap()
    }

    fn run() -> Transcript {
        let mut t = Transcript {
            probe: "x".into(),
            ..Default::default()
        };
        t.push("L1 banner", "Remora listening\n");
        t.push("L2 c1 reply 1", r#"{"jsonrpc":"2.0","id":1,"result":{"success":true}}"#);
        t.push("L3 c1 reply 2", r#"{"jsonrpc":"2.0","id":2,"result":{"pong":true}}"#);
        t.push("fs a", "file 0644 1 \"a\"");
        t
    }

    #[test]
    fn a_replace_line_supersedes_the_source_frame_at_its_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("x.golden.json"),
            r#"[{"jsonrpc":"2.0","id":1,"result":{"success":false}},{"jsonrpc":"2.0","id":2,"result":{"pong":true}}]"#,
        )
        .unwrap();
        let r = recipe(
            dir.path(),
            "replace L2 c1 reply 1 | {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"later\":true}} | a later build's page\n",
        );
        let out = derived_text(&r, &run()).unwrap();
        assert!(
            out.contains("L2 c1 reply 1\t{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"later\":true}}"),
            "{out}"
        );
        assert!(
            out.contains("# replaced: L2 c1 reply 1 from a later build's page"),
            "{out}"
        );
        let r = recipe(dir.path(), "replace L9 c1 reply 9 | {\"id\":9} | nowhere\n");
        assert!(
            derived_text(&r, &run()).is_err(),
            "a key the source does not fill is refused"
        );
    }

    #[test]
    fn replies_are_replaced_and_the_rest_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("x.golden.json"),
            "[\n  {\n    \"jsonrpc\": \"2.0\",\n    \"id\": 2,\n    \"result\": {\n      \"pong\": false\n    }\n  }\n]\n",
        )
        .unwrap();
        let r = recipe(
            dir.path(),
            "frame L2 c1 reply 1 | {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"success\":true}} | seed 000\npending L3 c1 reply 2 | issue 23 | 19f30c46 | pong false\n",
        );
        let text = derived_text(&r, &run()).unwrap();
        assert!(text.contains(
            "# derived-from: o/r testdata/x.golden.json @ abc, build 5db5e4a; requests from x_test.go TestX\n"
        ));
        assert!(text.contains("L3 c1 reply 2\t{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"pong\":false}}\n"));
        assert!(text.contains("L1 banner\tRemora listening\\n\n"));
        assert!(text.contains("# pending: L3 c1 reply 2 | issue 23 | 19f30c46 | pong false\n"));
        assert_eq!(derived_text(&r, &run()).unwrap(), text, "deterministic");
    }

    #[test]
    fn counts_and_ids_must_line_up() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("x.golden.json"),
            r#"[{"jsonrpc":"2.0","id":2,"result":{}}]"#,
        )
        .unwrap();
        let e = derived_text(&recipe(dir.path(), ""), &run()).unwrap_err().to_string();
        assert!(e.contains("1 frame(s)") && e.contains("2 repl(ies)"), "{e}");
        let e = derived_text(
            &recipe(
                dir.path(),
                "frame L3 c1 reply 2 | {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}} | seed 000\n",
            ),
            &run(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("out of step"), "{e}");
    }

    #[test]
    fn bare_tokens_read_as_zero_outside_strings() {
        assert_eq!(
            bare_tokens_as_zero(r#"{"a":<startedAt:1>,"b":"<x> \" <y>"}"#),
            r#"{"a":0,"b":"<x> \" <y>"}"#
        );
    }

    #[test]
    fn changed_keys_name_what_a_new_source_changes() {
        assert_eq!(changed_keys("# c\na\t1\nb\t2\n", "# d\na\t1\nb\t3\n"), vec!["b"]);
        assert!(changed_keys("a\t1\n", "# other header\na\t1\n").is_empty());
    }
}
