//! Normalisation: the explicit, listed rewrites applied to everything a
//! binary produces before two transcripts are compared.
//!
//! Everything not rewritten here is compared byte for byte, key order
//! included. [`rules`] returns the human-readable list that every report
//! prints.

use std::collections::HashMap;
use std::fmt;

/// The default product-name rename map (reference → remora).
pub const DEFAULT_RENAMES: &[(&str, &str)] = &[
    ("claustrum", "remora"),
    ("Claustrum", "Remora"),
    ("CLAUSTRUM", "REMORA"),
];

/// A `--rename` argument that is not `FROM=TO` (with a non-empty `FROM`).
#[derive(Debug)]
pub struct BadRename(pub String);

impl fmt::Display for BadRename {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--rename takes FROM=TO, got {:?}", self.0)
    }
}

impl std::error::Error for BadRename {}

/// Parses `FROM=TO` pairs; an empty list means [`DEFAULT_RENAMES`].
pub fn parse_renames(pairs: &[String]) -> Result<Vec<(String, String)>, BadRename> {
    if pairs.is_empty() {
        return Ok(DEFAULT_RENAMES
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect());
    }
    pairs
        .iter()
        .map(|p| {
            p.split_once('=')
                .filter(|(a, _)| !a.is_empty())
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| BadRename(p.clone()))
        })
        .collect()
}

/// The normalisation rules, for the report.
pub fn rules(renames: &[(String, String)]) -> Vec<String> {
    let mut r = vec![
        "paths: the run's fixture root → $ROOT, its socket → $SOCKET, the run directory → $RUN (HOME is $RUN/home), the binary's own path → $BIN (also their canonical forms)".to_string(),
        "pids: every \"pid\":<n> → \"pid\":<pid:k>, k numbering distinct values in order of appearance within the probe (so the same pid on spawn and reattach stays visibly the same); in command output, `the daemon pid <n>` and a stamped banner's `(pid <n>` likewise".to_string(),
        "startTime: \"startTime\":<number> → <startTime:k>, numbered like pids".to_string(),
        "boot identity: \"instanceId\":\"<32 lowercase hex>\" (and a stamped banner's `, instance <32 lowercase hex>`) → <instanceId:k> and \"startedAt\":<integer> → <startedAt:k>, numbered like pids (per-boot values; the same boot keeps its number, a restart gets the next; a value of another shape is left as it is)".to_string(),
        "versions: \"version\":\"…\" and \"serverVersion\":\"…\" string values → \"<version>\"; a command-line output line `<name> <id> (built <time>)` → `<name> <version>`".to_string(),
        "platform: \"arch\":\"…\" → \"<arch>\", \"os\":\"…\" and \"platform\":\"…\" → \"<os>\" (the build's GOARCH/GOOS, so transcripts recorded on linux/amd64 check an arm64 or darwin build)".to_string(),
        "log lines: a leading `YYYY/MM/DD HH:MM:SS ` timestamp → `<time> `".to_string(),
        "replies: matched by id, in the order the probe awaits them, not in arrival order".to_string(),
        "stream frames: per process and connection, compared as reassembled stdout/stderr bytes, the exit frame (seq → <seq>), the set of frame shapes (seq → <seq>, data → <data>) and the seq runs (must be strictly +1 from the first seq, exit last); frame boundaries and counts are not compared".to_string(),
        "fixture snapshot: path, type, permission bits, size, sha256 (contents hashed after path normalisation); mtimes are not compared; inside .git only names and types, objects/ and logs/ skipped".to_string(),
        "masks: a probe's `mask <key>` replaces the numeric value of that key with <masked> (values that depend on pipe scheduling, e.g. lastSeq after multi-frame output)".to_string(),
    ];
    for (a, b) in renames {
        r.push(format!("product name: {a:?} → {b:?} everywhere"));
    }
    r
}

/// Stateful normaliser for one probe run (pid numbering is per run).
#[derive(Debug, Default)]
pub struct Normalizer {
    /// Literal replacements, longest first.
    paths: Vec<(Vec<u8>, Vec<u8>)>,
    renames: Vec<(Vec<u8>, Vec<u8>)>,
    pids: HashMap<Vec<u8>, usize>,
    starts: HashMap<Vec<u8>, usize>,
    instances: HashMap<Vec<u8>, usize>,
    boots: HashMap<Vec<u8>, usize>,
    /// `"key":` prefixes whose numeric values are masked (probe `mask`).
    masks: Vec<Vec<u8>>,
}

fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() || hay.len() < from.len() {
        return hay.to_vec();
    }
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

impl Normalizer {
    /// `paths`: `(actual, placeholder)` pairs; canonical forms are added.
    pub fn new(paths: &[(String, String)], renames: &[(String, String)]) -> Normalizer {
        let mut p: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for (actual, ph) in paths {
            if actual.is_empty() {
                continue;
            }
            p.push((actual.as_bytes().to_vec(), ph.as_bytes().to_vec()));
            if let Ok(c) = std::fs::canonicalize(actual) {
                let c = c.to_string_lossy().into_owned();
                if &c != actual {
                    p.push((c.into_bytes(), ph.as_bytes().to_vec()));
                }
            }
        }
        p.sort_by_key(|e| std::cmp::Reverse(e.0.len()));
        Normalizer {
            paths: p,
            renames: renames
                .iter()
                .map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec()))
                .collect(),
            ..Default::default()
        }
    }

    /// Masks the numeric value of `"key":` in every JSON line.
    pub fn with_masks(mut self, keys: &[String]) -> Normalizer {
        self.masks = keys.iter().map(|k| format!("\"{k}\":").into_bytes()).collect();
        self
    }

    /// Path placeholders only (used for file contents in snapshots).
    pub fn paths_only(&self, b: &[u8]) -> Vec<u8> {
        let mut v = b.to_vec();
        for (from, to) in &self.paths {
            v = replace_all(&v, from, to);
        }
        v
    }

    /// Paths and product names: for any text the binary produced.
    pub fn text(&self, b: &[u8]) -> Vec<u8> {
        let mut v = self.paths_only(b);
        for (from, to) in &self.renames {
            v = replace_all(&v, from, to);
        }
        v
    }

    /// A JSON line (reply or frame): text rules plus version/pid/startTime.
    pub fn json(&mut self, b: &[u8]) -> Vec<u8> {
        let v = self.text(b);
        let v = replace_string_value(&v, b"\"version\":\"", b"<version>");
        let v = replace_string_value(&v, b"\"serverVersion\":\"", b"<version>");
        let v = replace_string_value(&v, b"\"arch\":\"", b"<arch>");
        let v = replace_string_value(&v, b"\"os\":\"", b"<os>");
        let v = replace_string_value(&v, b"\"platform\":\"", b"<os>");
        let v = number_placeholder(&v, b"\"pid\":", "pid", &mut self.pids);
        let v = number_placeholder(&v, b"\"startTime\":", "startTime", &mut self.starts);
        let v = instance_placeholder(&v, b"\"instanceId\":\"", &mut self.instances);
        let mut v = integer_placeholder(&v, b"\"startedAt\":", "startedAt", &mut self.boots);
        for key in &self.masks {
            v = mask_number(&v, key);
        }
        v
    }

    /// Command-line output: text rules plus the `-version` line and
    /// log timestamps.
    pub fn output(&mut self, b: &[u8]) -> Vec<u8> {
        let v = self.text(b);
        let mut out = Vec::with_capacity(v.len());
        for (i, line) in v.split(|c| *c == b'\n').enumerate() {
            if i > 0 {
                out.push(b'\n');
            }
            let line = strip_log_time(line);
            let line = version_line(&line);
            // A second -serve names the daemon it replaces.
            let line = number_placeholder(&line, b"the daemon pid ", "pid", &mut self.pids);
            // A stamped banner ends `(pid <n>, instance <32hex>)`.
            let line = number_placeholder(&line, b" (pid ", "pid", &mut self.pids);
            let line = instance_placeholder(&line, b", instance ", &mut self.instances);
            if line.starts_with(b"__INSTALL_RESULT__") {
                out.extend(self.json(&line));
            } else {
                out.extend(line);
            }
        }
        out
    }

    /// A daemon log line.
    pub fn log_line(&mut self, b: &[u8]) -> Vec<u8> {
        strip_log_time(&self.text(b))
    }
}

/// The one scanner behind the value rewrites below: after every `key`,
/// `value_len` says how many bytes form the value, and `replace` gives
/// what to write instead (`None` keeps the bytes as they are).
fn rewrite_values(
    v: &[u8],
    key: &[u8],
    value_len: impl Fn(&[u8]) -> usize,
    mut replace: impl FnMut(&[u8]) -> Option<Vec<u8>>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i..].starts_with(key) {
            out.extend_from_slice(key);
            i += key.len();
            let value = &v[i..i + value_len(&v[i..])];
            match replace(value) {
                Some(r) => out.extend_from_slice(&r),
                None => out.extend_from_slice(value),
            }
            i += value.len();
        } else {
            out.push(v[i]);
            i += 1;
        }
    }
    out
}

/// Length of the JSON string body up to (not including) its closing quote.
fn string_body_len(v: &[u8]) -> usize {
    let mut i = 0;
    while i < v.len() && v[i] != b'"' {
        if v[i] == b'\\' {
            i += 1;
        }
        i += 1;
    }
    i.min(v.len())
}

/// Length of a JSON number at the start of `v`.
fn number_len(v: &[u8]) -> usize {
    v.iter()
        .take_while(|b| matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'))
        .count()
}

/// Replaces the JSON string following every `key` (which ends with the
/// opening quote) by `placeholder`.
fn replace_string_value(v: &[u8], key: &[u8], placeholder: &[u8]) -> Vec<u8> {
    rewrite_values(v, key, string_body_len, |_| Some(placeholder.to_vec()))
}

/// Replaces the number following every `key` by `<masked>`.
fn mask_number(v: &[u8], key: &[u8]) -> Vec<u8> {
    rewrite_values(v, key, number_len, |_| Some(b"<masked>".to_vec()))
}

/// Replaces the number following every `key` by `<label:k>`, `k` numbering
/// distinct values in order of appearance.
fn number_placeholder(v: &[u8], key: &[u8], label: &str, seen: &mut HashMap<Vec<u8>, usize>) -> Vec<u8> {
    rewrite_values(v, key, number_len, |n| {
        if n.is_empty() {
            return None;
        }
        let next = seen.len() + 1;
        let k = *seen.entry(n.to_vec()).or_insert(next);
        Some(format!("<{label}:{k}>").into_bytes())
    })
}

/// `<key><32 lowercase hex>` → `<key><instanceId:k>`, for the JSON member
/// (`"instanceId":"`) and the stamped banner (`, instance `).
fn instance_placeholder(v: &[u8], key: &[u8], seen: &mut HashMap<Vec<u8>, usize>) -> Vec<u8> {
    let hex_len = |b: &[u8]| b.iter().take_while(|c| c.is_ascii_hexdigit()).count();
    rewrite_values(v, key, hex_len, |id| {
        if id.len() != 32 || !id.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        let next = seen.len() + 1;
        let k = *seen.entry(id.to_vec()).or_insert(next);
        Some(format!("<instanceId:{k}>").into_bytes())
    })
}

/// As [`number_placeholder`], for plain non-negative integers only.
fn integer_placeholder(v: &[u8], key: &[u8], label: &str, seen: &mut HashMap<Vec<u8>, usize>) -> Vec<u8> {
    rewrite_values(
        v,
        key,
        |b| b.iter().take_while(|c| c.is_ascii_digit()).count(),
        |n| {
            if n.is_empty() {
                return None;
            }
            let next = seen.len() + 1;
            let k = *seen.entry(n.to_vec()).or_insert(next);
            Some(format!("<{label}:{k}>").into_bytes())
        },
    )
}

/// `2026/11/22 10:30:09 rest` → `<time> rest`.
fn strip_log_time(line: &[u8]) -> Vec<u8> {
    let shape = b"dddd/dd/dd dd:dd:dd ";
    if line.len() >= shape.len()
        && line
            .iter()
            .zip(shape)
            .all(|(c, s)| if *s == b'd' { c.is_ascii_digit() } else { c == s })
    {
        let mut out = b"<time> ".to_vec();
        out.extend_from_slice(&line[shape.len()..]);
        return out;
    }
    line.to_vec()
}

/// `name id (built time)` → `name <version>`.
fn version_line(line: &[u8]) -> Vec<u8> {
    let s = String::from_utf8_lossy(line);
    if let Some((name, rest)) = s.split_once(' ') {
        if !name.is_empty()
            && !name.contains(' ')
            && rest.contains(" (built ")
            && rest.ends_with(')')
            && !rest.starts_with(' ')
        {
            return format!("{name} <version>").into_bytes();
        }
    }
    line.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n() -> Normalizer {
        Normalizer::new(
            &[
                ("/tmp/run1/root".into(), "$ROOT".into()),
                ("/tmp/run1".into(), "$RUN".into()),
                ("/tmp/run1/rpc.sock".into(), "$SOCKET".into()),
            ],
            &parse_renames(&[]).unwrap(),
        )
    }

    #[test]
    fn masks_hide_scheduling_dependent_numbers() {
        let mut n = Normalizer::default().with_masks(&["lastSeq".to_string()]);
        assert_eq!(
            n.json(br#"{"firstSeq":1,"lastSeq":36,"stdinApplied":0}"#),
            br#"{"firstSeq":1,"lastSeq":<masked>,"stdinApplied":0}"#.to_vec()
        );
    }

    #[test]
    fn paths_longest_first_and_renames() {
        let v = n().text(b"open /tmp/run1/root/x; /tmp/run1/rpc.sock /tmp/run1/home claustrum: Claustrum");
        assert_eq!(v, b"open $ROOT/x; $SOCKET $RUN/home remora: Remora".to_vec());
    }

    #[test]
    fn versions_pids_and_start_times() {
        let mut n = n();
        let a = n.json(br#"{"result":{"version":"v1.2-3 \"x\"","platform":"linux"}}"#);
        assert_eq!(a, br#"{"result":{"version":"<version>","platform":"<os>"}}"#.to_vec());
        let p = n.json(br#"{"platform":"darwin","arch":"arm64","os":"linux"}"#);
        assert_eq!(p, br#"{"platform":"<os>","arch":"<arch>","os":"<os>"}"#.to_vec());
        let b = n.json(br#"{"success":true,"pid":4242,"startTime":1795343369.1085572}"#);
        assert_eq!(
            b,
            br#"{"success":true,"pid":<pid:1>,"startTime":<startTime:1>}"#.to_vec()
        );
        let c = n.json(br#"{"pid":99,"x":{"pid":4242},"startTime":1.5}"#);
        assert_eq!(
            c,
            br#"{"pid":<pid:2>,"x":{"pid":<pid:1>},"startTime":<startTime:2>}"#.to_vec()
        );
        // An escaped occurrence inside a string value is left alone.
        let d = n.json(br#"{"content":"\"pid\":5"}"#);
        assert_eq!(d, br#"{"content":"\"pid\":5"}"#.to_vec());
    }

    #[test]
    fn boot_identity() {
        let mut n = n();
        let a = n.json(br#"{"methods":[],"instanceId":"0123456789abcdef0123456789abcdef","startedAt":1795343369108,"features":[]}"#);
        assert_eq!(
            a,
            br#"{"methods":[],"instanceId":"<instanceId:1>","startedAt":<startedAt:1>,"features":[]}"#.to_vec()
        );
        let b = n.json(br#"{"instanceId":"0123456789abcdef0123456789abcdef","startedAt":1795343369108}"#);
        assert_eq!(
            b,
            br#"{"instanceId":"<instanceId:1>","startedAt":<startedAt:1>}"#.to_vec()
        );
        let c = n.json(br#"{"instanceId":"fedcba9876543210fedcba9876543210","startedAt":1795343369999}"#);
        assert_eq!(
            c,
            br#"{"instanceId":"<instanceId:2>","startedAt":<startedAt:2>}"#.to_vec()
        );
        // Another shape stays visible.
        let d = n.json(br#"{"instanceId":"XYZ","startedAt":-1}"#);
        assert_eq!(d, br#"{"instanceId":"XYZ","startedAt":-1}"#.to_vec());
    }

    #[test]
    fn command_output() {
        let mut n = n();
        assert_eq!(
            n.output(b"claustrum abc123 (built 2024-01-01T00:00:00Z)\n"),
            b"remora <version>\n".to_vec()
        );
        assert_eq!(
            n.output(b"2026/11/22 10:30:09 INFO  [Server] x\nplain"),
            b"<time> INFO  [Server] x\nplain".to_vec()
        );
        assert_eq!(
            n.output(b"__INSTALL_RESULT__{\"serverVersion\":\"abc\",\"os\":\"linux\"}\n"),
            b"__INSTALL_RESULT__{\"serverVersion\":\"<version>\",\"os\":\"<os>\"}\n".to_vec()
        );
        assert_eq!(
            n.output(b"replacing the daemon pid 4242 on this socket (x)\npid 7\n"),
            b"replacing the daemon pid <pid:1> on this socket (x)\npid 7\n".to_vec()
        );
    }

    #[test]
    fn renames_parse() {
        assert_eq!(parse_renames(&["a=b".into()]).unwrap(), vec![("a".into(), "b".into())]);
        assert!(parse_renames(&["ab".into()]).is_err());
        assert!(rules(&parse_renames(&[]).unwrap()).len() > 5);
    }
}
