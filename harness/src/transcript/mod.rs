//! Transcripts: the normalised record of one probe run, and their stable
//! on-disk text form (`corpora/transcripts/<probe>.txt`).
//!
//! A transcript is an ordered list of `key → value` entries. Keys name
//! where the value came from (`L12 c1 reply 3`: probe line 12, connection
//! `c1`, the reply with id 3; `fs a/b.txt`: the final fixture snapshot) and
//! are unique within a transcript. Values are normalised bytes.
//!
//! The file form is one entry per line, `key<TAB>value`, with the value
//! escaped so that it fits on one line: `\\`, `\n`, `\r`, `\t`, other
//! control bytes and invalid UTF-8 as `\xNN`. Lines starting with `#` are
//! comments.

pub(crate) mod compare;
pub(crate) mod normalize;

use crate::base::error::IoAt;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// A transcript file that cannot be read.
#[derive(Debug)]
pub enum Error {
    Io(IoAt),
    MissingTab {
        line: usize,
    },
    Escape {
        line: usize,
        escape: EscapeError,
    },
    /// A `# pending:` line without its four fields (the text after the mark).
    Pending(String),
    PendingWithoutSource(PathBuf),
    /// One of the above, in a file.
    InFile {
        path: PathBuf,
        error: Box<Error>,
    },
}

impl Error {
    fn in_file(self, path: &Path) -> Error {
        Error::InFile {
            path: path.to_path_buf(),
            error: Box::new(self),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::MissingTab { line } => write!(f, "line {line}: missing tab"),
            Error::Escape { line, escape } => write!(f, "line {line}: {escape}"),
            Error::Pending(rest) => write!(
                f,
                "pending {rest:?}: expected `<key glob> | <issue> | <build> | <behaviour>`"
            ),
            Error::PendingWithoutSource(path) => {
                write!(f, "{}: `# pending:` lines without `{DERIVED_MARK}`", path.display())
            }
            Error::InFile { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for Error {}

/// A value whose escapes do not read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EscapeError {
    /// `\x` without two hex digits.
    Hex,
    /// A backslash before anything else.
    Unknown,
}

impl fmt::Display for EscapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EscapeError::Hex => "bad \\x escape",
            EscapeError::Unknown => "bad escape",
        })
    }
}

/// One transcript entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub key: String,
    #[serde(serialize_with = "ser_bytes", deserialize_with = "de_bytes")]
    pub value: Vec<u8>,
}

fn ser_bytes<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(v))
}

/// The inverse of `ser_bytes` as far as it goes: a JSON report keeps values
/// as text, so bytes that were not UTF-8 come back as U+FFFD.
fn de_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    String::deserialize(d).map(String::into_bytes)
}

/// The latency of one request (or command-line run) of a probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Timing {
    pub label: String,
    pub micros: u64,
}

/// The result of running one probe against one binary.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Transcript {
    pub probe: String,
    pub entries: Vec<Entry>,
    pub timings: Vec<Timing>,
}

impl Transcript {
    /// Adds an entry, making the key unique if it is already taken.
    pub fn push(&mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) {
        let mut key: String = key
            .into()
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        if self.entries.iter().any(|e| e.key == key) {
            let base = key.clone();
            let mut n = 2;
            while self.entries.iter().any(|e| e.key == key) {
                key = format!("{base} #{n}");
                n += 1;
            }
        }
        self.entries.push(Entry {
            key,
            value: value.into(),
        });
    }

    /// Sum of all recorded latencies.
    pub fn total_micros(&self) -> u64 {
        self.timings.iter().map(|t| t.micros).sum()
    }

    /// The stable text form.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "# harness transcript v1\n# probe: {}\n# key<TAB>value (escaped); regenerate with `harness record`\n",
            self.probe
        );
        for e in &self.entries {
            out.push_str(&e.key);
            out.push('\t');
            out.push_str(&escape(&e.value));
            out.push('\n');
        }
        out
    }

    /// Parses the text form.
    pub fn from_text(probe: &str, text: &str) -> Result<Transcript, Error> {
        let mut t = Transcript {
            probe: probe.to_string(),
            ..Default::default()
        };
        for (i, line) in text.lines().enumerate() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let line_no = i + 1;
            let (k, v) = line.split_once('\t').ok_or(Error::MissingTab { line: line_no })?;
            t.entries.push(Entry {
                key: k.to_string(),
                value: unescape(v).map_err(|escape| Error::Escape { line: line_no, escape })?,
            });
        }
        Ok(t)
    }

    /// Reads `<dir>/<probe>.txt`; `Ok(None)` when it does not exist.
    pub fn load(dir: &Path, probe: &str) -> Result<Option<Transcript>, Error> {
        let p = dir.join(format!("{probe}.txt"));
        match std::fs::read_to_string(&p) {
            Ok(text) => Transcript::from_text(probe, &text).map(Some).map_err(|e| e.in_file(&p)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::Io(IoAt::new(&p, e))),
        }
    }
}

/// The comment line that marks a transcript whose expected values were
/// written from the reference's recorded frames (`docs/record/` in the
/// reference's repository), not recorded from remora. `harness record`
/// leaves such files alone.
pub const DERIVED_MARK: &str = "# derived-from:";

/// Whether the transcript file at `path` carries [`DERIVED_MARK`].
pub fn is_reference_derived(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| t.lines().any(|l| l.starts_with(DERIVED_MARK)))
}

/// The comment line, in a reference-derived transcript, that names a
/// difference remora is known not to have adopted yet:
/// `# pending: <key glob> | <issue> | <build> | <behaviour to adopt>`.
pub const PENDING_MARK: &str = "# pending:";

/// One `# pending:` line of a reference-derived transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// Glob over transcript keys.
    pub key: String,
    /// The issue that adopts the behaviour (e.g. `issue 24`).
    pub issue: String,
    /// The reference build the source names.
    pub build: String,
    /// What remora would have to do.
    pub behaviour: String,
}

impl Pending {
    /// Parses the text after [`PENDING_MARK`].
    pub fn parse(rest: &str) -> Result<Pending, Error> {
        let parts: Vec<&str> = rest.splitn(4, '|').map(str::trim).collect();
        match parts.as_slice() {
            [k, i, b, w] if parts.iter().all(|p| !p.is_empty()) => Ok(Pending {
                key: k.to_string(),
                issue: i.to_string(),
                build: b.to_string(),
                behaviour: w.to_string(),
            }),
            _ => Err(Error::Pending(rest.to_string())),
        }
    }

    /// The line as a transcript header writes it.
    pub fn to_line(&self) -> String {
        format!(
            "{PENDING_MARK} {} | {} | {} | {}",
            self.key, self.issue, self.build, self.behaviour
        )
    }

    /// The reason a report shows for a difference this line covers.
    pub fn reason(&self) -> String {
        format!("pending {} (build {}): {}", self.issue, self.build, self.behaviour)
    }
}

/// What the header of a reference-derived transcript says: its source and
/// the differences known to be pending.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DerivedHeader {
    /// The text after [`DERIVED_MARK`].
    pub source: String,
    pub pending: Vec<Pending>,
}

/// Reads the derived header of `<dir>/<probe>.txt`: `Ok(None)` when the
/// file does not exist or is not reference-derived.
pub fn derived_header(dir: &Path, probe: &str) -> Result<Option<DerivedHeader>, Error> {
    let p = dir.join(format!("{probe}.txt"));
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::Io(IoAt::new(&p, e))),
    };
    let mut header: Option<DerivedHeader> = None;
    let mut pending = Vec::new();
    for line in text.lines().take_while(|l| l.starts_with('#')) {
        if let Some(rest) = line.strip_prefix(DERIVED_MARK) {
            header = Some(DerivedHeader {
                source: rest.trim().to_string(),
                pending: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix(PENDING_MARK) {
            pending.push(Pending::parse(rest).map_err(|e| e.in_file(&p))?);
        }
    }
    match header {
        Some(mut h) => {
            h.pending = pending;
            Ok(Some(h))
        }
        None if pending.is_empty() => Ok(None),
        None => Err(Error::PendingWithoutSource(p)),
    }
}

/// Escapes bytes onto one line; valid non-control UTF-8 stays readable.
pub fn escape(v: &[u8]) -> String {
    let mut out = String::with_capacity(v.len());
    for chunk in v.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Inverse of [`escape`].
pub fn unescape(s: &str) -> Result<Vec<u8>, EscapeError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        match b.get(i + 1) {
            Some(b'\\') => out.push(b'\\'),
            Some(b'n') => out.push(b'\n'),
            Some(b'r') => out.push(b'\r'),
            Some(b't') => out.push(b'\t'),
            Some(b'x') => {
                let h = s
                    .get(i + 2..i + 4)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or(EscapeError::Hex)?;
                out.push(h);
                i += 2;
            }
            _ => return Err(EscapeError::Unknown),
        }
        i += 2;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_derived_mark() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.txt");
        std::fs::write(&p, "# harness transcript v1\n# derived-from: a record\nk\tv\n").unwrap();
        assert!(is_reference_derived(&p));
        std::fs::write(&p, "# harness transcript v1\nk\tv\n").unwrap();
        assert!(!is_reference_derived(&p));
        assert!(!is_reference_derived(&dir.path().join("missing.txt")));
    }

    #[test]
    fn derived_header_reads_source_and_pending_lines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("x.txt"),
            "# harness transcript v1\n# derived-from: repo file\n# pending: L2 c1 reply * | issue 24 | 7d193f89 | refuse\nk\tv\n",
        )
        .unwrap();
        let h = derived_header(dir.path(), "x").unwrap().unwrap();
        assert_eq!(h.source, "repo file");
        assert_eq!(h.pending.len(), 1);
        assert_eq!(h.pending[0].issue, "issue 24");
        assert_eq!(
            Pending::parse(h.pending[0].to_line().strip_prefix(PENDING_MARK).unwrap()).unwrap(),
            h.pending[0]
        );
        std::fs::write(dir.path().join("y.txt"), "# pending: a | b | c | d\nk\tv\n").unwrap();
        assert!(derived_header(dir.path(), "y").is_err(), "pending without a source");
        assert!(Pending::parse("a | b | c").is_err());
        assert_eq!(derived_header(dir.path(), "missing").unwrap(), None);
    }

    #[test]
    fn escape_round_trip() {
        let v = b"a\\b\n\r\t\x01\xff\xfe\xc3\xa9 \x7f end".to_vec();
        let e = escape(&v);
        assert!(!e.contains('\n'));
        assert_eq!(unescape(&e).unwrap(), v);
        assert_eq!(escape("é".as_bytes()), "é");
    }

    #[test]
    fn text_round_trip_and_unique_keys() {
        let mut t = Transcript {
            probe: "p".into(),
            ..Default::default()
        };
        t.push("L1 c1 reply 1", b"{\"a\":1}\n".to_vec());
        t.push("L1 c1 reply 1", b"x".to_vec());
        assert_eq!(t.entries[1].key, "L1 c1 reply 1 #2");
        let back = Transcript::from_text("p", &t.to_text()).unwrap();
        assert_eq!(back.entries, t.entries);
    }
}
