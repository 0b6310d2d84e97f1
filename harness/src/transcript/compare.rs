//! Comparing two transcripts of the same probe, and accepted divergences.
//!
//! Entries are aligned by key (reference order first, then keys only the
//! candidate produced). A differing entry whose key matches an accept
//! pattern — from the probe (`accept`, `accept-next`) or from the central
//! `probes/ACCEPTED` list — is reported as *accepted* with its reason; it
//! is never hidden.

use crate::base::error::IoAt;
use crate::probe::{glob_match, Accept, Probe};
use crate::transcript::{DerivedHeader, Entry, Transcript};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// One line of `probes/ACCEPTED`: `<probe glob> | <key glob> | <reason>`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CentralAccept {
    pub probe: String,
    pub key: String,
    pub reason: String,
}

/// A central list of accepted divergences that cannot be read.
#[derive(Debug)]
pub enum AcceptedError {
    Io(IoAt),
    /// A line without its three fields.
    Line {
        path: PathBuf,
        line: usize,
    },
}

impl fmt::Display for AcceptedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcceptedError::Io(e) => write!(f, "{e}"),
            AcceptedError::Line { path, line } => write!(
                f,
                "{}:{line}: expected `<probe glob> | <key glob> | <reason>`",
                path.display()
            ),
        }
    }
}

impl std::error::Error for AcceptedError {}

/// Reads the central list; a missing file is an empty list.
pub fn load_accepted(path: &Path) -> Result<Vec<CentralAccept>, AcceptedError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(AcceptedError::Io(IoAt::new(path, e))),
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = l.splitn(3, '|').map(str::trim).collect();
        match parts.as_slice() {
            [p, k, r] if !p.is_empty() && !k.is_empty() && !r.is_empty() => out.push(CentralAccept {
                probe: p.to_string(),
                key: k.to_string(),
                reason: r.to_string(),
            }),
            _ => {
                return Err(AcceptedError::Line {
                    path: path.to_path_buf(),
                    line: i + 1,
                })
            }
        }
    }
    Ok(out)
}

/// The accept patterns that apply to `probe`.
pub fn accepts_for(probe: &Probe, central: &[CentralAccept]) -> Vec<Accept> {
    let mut v = probe.accepts.clone();
    for c in central {
        if glob_match(&c.probe, &probe.name) {
            v.push(Accept {
                pattern: c.key.clone(),
                reason: c.reason.clone(),
            });
        }
    }
    v
}

/// The verdict for one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Identical,
    Accepted,
    Differs,
    /// The probe could not run (fixture or harness failure).
    Error,
    /// `check`: no committed transcript for this probe.
    Unrecorded,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Identical => "identical",
            Status::Accepted => "accepted",
            Status::Differs => "DIFFERS",
            Status::Error => "ERROR",
            Status::Unrecorded => "unrecorded",
        }
    }

    /// Whether this status makes the run fail.
    pub fn fails(self) -> bool {
        matches!(self, Status::Differs | Status::Error)
    }
}

/// One differing entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EntryDiff {
    pub key: String,
    pub reference: Option<String>,
    pub candidate: Option<String>,
    /// Byte offset of the first difference (when both sides exist).
    pub first_diff: Option<usize>,
    /// The reason, when this difference is accepted.
    pub accepted: Option<String>,
}

fn first_diff(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

/// Compares two transcripts of the same probe.
pub fn compare(reference: &Transcript, candidate: &Transcript, accepts: &[Accept]) -> (Status, Vec<EntryDiff>) {
    let find = |t: &Transcript, k: &str| t.entries.iter().find(|e| e.key == k).map(|e| e.value.clone());
    let mut keys: Vec<&str> = reference.entries.iter().map(|e| e.key.as_str()).collect();
    for e in &candidate.entries {
        if !keys.contains(&e.key.as_str()) {
            keys.push(&e.key);
        }
    }
    let mut diffs = Vec::new();
    for k in keys {
        let (r, c) = (find(reference, k), find(candidate, k));
        if r == c {
            continue;
        }
        let accepted = accepts
            .iter()
            .find(|a| glob_match(&a.pattern, k))
            .map(|a| a.reason.clone());
        diffs.push(EntryDiff {
            key: k.to_string(),
            first_diff: match (&r, &c) {
                (Some(a), Some(b)) => Some(first_diff(a, b)),
                _ => None,
            },
            reference: r.map(|v| String::from_utf8_lossy(&v).into_owned()),
            candidate: c.map(|v| String::from_utf8_lossy(&v).into_owned()),
            accepted,
        });
    }
    let status = if diffs.is_empty() {
        Status::Identical
    } else if diffs.iter().all(|d| d.accepted.is_some()) {
        Status::Accepted
    } else {
        Status::Differs
    };
    (status, diffs)
}

/// How the frames of one reference-derived transcript compared. A frame
/// is a `reply` entry: the values `harness derive` took from the source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DerivedCounts {
    /// The transcript's `# derived-from:` text.
    pub source: String,
    pub frames: usize,
    pub identical: usize,
    /// Differing frames a `# pending:` line names: behaviour of a later
    /// build that an open issue adopts. Reported, not a failure.
    pub pending: usize,
    /// Differing frames nothing explains: these fail the run.
    pub unexplained: usize,
    /// Differing frames `probes/ACCEPTED` or the probe accepts.
    pub accepted: usize,
    /// `# pending:` key globs that no longer match a difference (remora
    /// adopted the behaviour; the line can go).
    pub resolved_pending: Vec<String>,
}

impl DerivedCounts {
    /// Differing frames, pending or not.
    pub fn differ(&self) -> usize {
        self.pending + self.unexplained
    }
}

/// Whether a transcript key names a reply (`L12 c1 reply 3`).
pub fn is_reply_key(key: &str) -> bool {
    key.split(' ').nth(2) == Some("reply")
}

/// Counts the frames of a reference-derived transcript by verdict. A
/// difference counts as pending only when the reason it was accepted with
/// is its `# pending:` line's, so a deliberate `ACCEPTED` entry (matched
/// first) stays "accepted".
pub fn derived_counts(reference: &[Entry], diffs: &[EntryDiff], header: &DerivedHeader) -> DerivedCounts {
    let mut keys: Vec<&str> = reference
        .iter()
        .map(|e| e.key.as_str())
        .filter(|k| is_reply_key(k))
        .collect();
    for d in diffs {
        if is_reply_key(&d.key) && !keys.contains(&d.key.as_str()) {
            keys.push(&d.key);
        }
    }
    let mut c = DerivedCounts {
        source: header.source.clone(),
        frames: keys.len(),
        ..DerivedCounts::default()
    };
    for k in keys {
        match diffs.iter().find(|d| d.key == k) {
            None => c.identical += 1,
            Some(d) => match &d.accepted {
                None => c.unexplained += 1,
                Some(r) if header.pending.iter().any(|p| glob_match(&p.key, k) && p.reason() == *r) => c.pending += 1,
                Some(_) => c.accepted += 1,
            },
        }
    }
    c.resolved_pending = header
        .pending
        .iter()
        .filter(|p| !diffs.iter().any(|d| glob_match(&p.key, &d.key)))
        .map(|p| p.key.clone())
        .collect();
    c
}

/// The accept patterns of a derived transcript's `# pending:` lines.
pub fn pending_accepts(header: &DerivedHeader) -> Vec<Accept> {
    header
        .pending
        .iter()
        .map(|p| Accept {
            pattern: p.key.clone(),
            reason: p.reason(),
        })
        .collect()
}

/// Keys whose values differ between two runs of the same binary.
pub fn unstable_keys(a: &[Entry], b: &[Entry]) -> Vec<String> {
    let ta = Transcript {
        entries: a.to_vec(),
        ..Default::default()
    };
    let tb = Transcript {
        entries: b.to_vec(),
        ..Default::default()
    };
    compare(&ta, &tb, &[]).1.into_iter().map(|d| d.key).collect()
}

/// A compact pointer at the first differing byte of each differing line
/// of one entry: `(line number, ref excerpt, cand excerpt, caret column)`.
pub fn line_diffs(reference: &str, candidate: &str) -> Vec<(usize, String, String, usize)> {
    let (ra, ca): (Vec<&str>, Vec<&str>) = (reference.split('\n').collect(), candidate.split('\n').collect());
    let mut out = Vec::new();
    for i in 0..ra.len().max(ca.len()) {
        let (r, c) = (ra.get(i).copied().unwrap_or(""), ca.get(i).copied().unwrap_or(""));
        if r == c && i < ra.len() && i < ca.len() {
            continue;
        }
        let at = first_diff(r.as_bytes(), c.as_bytes());
        let start = at.saturating_sub(40);
        let cut = |s: &str| -> String {
            let b = s.as_bytes();
            let lo = start.min(b.len());
            let hi = (at + 40).min(b.len());
            let mut t = String::new();
            if lo > 0 {
                t.push('…');
            }
            t.push_str(&crate::transcript::escape(&b[lo..hi]));
            if hi < b.len() {
                t.push('…');
            }
            t
        };
        let prefix = if start > 0 { 1 } else { 0 };
        let caret = prefix
            + crate::transcript::escape(&r.as_bytes()[start.min(r.len())..at.min(r.len())])
                .chars()
                .count();
        out.push((i + 1, cut(r), cut(c), caret));
        if out.len() >= 5 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn derived_frames_are_counted_by_verdict() {
        use crate::transcript::Pending;
        let entry = |k: &str| Entry {
            key: k.into(),
            value: b"v".to_vec(),
        };
        let reference = vec![
            entry("L1 banner"),
            entry("L2 c1 reply 1"),
            entry("L3 c1 reply 2"),
            entry("L4 c1 reply 3"),
            entry("L5 c1 reply 4"),
        ];
        let pending = Pending {
            key: "L3 c1 reply 2".into(),
            issue: "issue 25".into(),
            build: "5db5e4a".into(),
            behaviour: "b".into(),
        };
        let stale = Pending {
            key: "L2 c1 reply 1".into(),
            ..pending.clone()
        };
        let header = DerivedHeader {
            source: "s".into(),
            pending: vec![pending.clone(), stale],
        };
        let diff = |k: &str, accepted: Option<String>| EntryDiff {
            key: k.into(),
            reference: Some("a".into()),
            candidate: Some("b".into()),
            first_diff: Some(0),
            accepted,
        };
        let diffs = vec![
            diff("L1 banner", None),
            diff("L3 c1 reply 2", Some(pending.reason())),
            diff("L4 c1 reply 3", Some("ACCEPTED reason".into())),
            diff("L5 c1 reply 4", None),
        ];
        let c = derived_counts(&reference, &diffs, &header);
        assert_eq!(
            (c.frames, c.identical, c.pending, c.accepted, c.unexplained),
            (4, 1, 1, 1, 1)
        );
        assert_eq!(c.differ(), 2);
        assert_eq!(c.resolved_pending, vec!["L2 c1 reply 1".to_string()]);
    }
    use super::*;

    fn t(entries: &[(&str, &str)]) -> Transcript {
        let mut t = Transcript::default();
        for (k, v) in entries {
            t.push(*k, v.as_bytes().to_vec());
        }
        t
    }

    #[test]
    fn identical_differs_accepted() {
        let a = t(&[("L1 c1 reply 1", "x"), ("fs a", "file")]);
        assert_eq!(compare(&a, &a, &[]).0, Status::Identical);
        let b = t(&[("L1 c1 reply 1", "y"), ("fs a", "file"), ("fs b", "file")]);
        let (s, d) = compare(&a, &b, &[]);
        assert_eq!(s, Status::Differs);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].first_diff, Some(0));
        assert_eq!(d[1].reference, None);
        let acc = [
            Accept {
                pattern: "L1 *".into(),
                reason: "r1".into(),
            },
            Accept {
                pattern: "fs b".into(),
                reason: "r2".into(),
            },
        ];
        let (s, d) = compare(&a, &b, &acc);
        assert_eq!(s, Status::Accepted);
        assert_eq!(d[0].accepted.as_deref(), Some("r1"));
    }

    #[test]
    fn central_list() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ACCEPTED");
        std::fs::write(&p, "# c\nserver-shutdown-* | L* reply * | auth on shutdown\n").unwrap();
        let l = load_accepted(&p).unwrap();
        assert_eq!(l[0].probe, "server-shutdown-*");
        std::fs::write(&p, "bad line\n").unwrap();
        assert!(load_accepted(&p).unwrap_err().to_string().contains(":1:"));
        assert!(load_accepted(&d.path().join("none")).unwrap().is_empty());
    }

    #[test]
    fn line_diff_points_at_first_byte() {
        let d = line_diffs("same\nabcdef", "same\nabcXef");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].0, 2);
        assert_eq!(d[0].3, 3);
    }
}
