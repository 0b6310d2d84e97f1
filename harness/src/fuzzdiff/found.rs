//! Writing what fuzz-diff found: a confirmed difference shrunk to a
//! minimal probe, a flaky one unshrunk, and a state-dependent one (it
//! differs only after earlier cases on the same live daemons) with the
//! preceding cases attached.

use super::{shrink::shrink, Checker, Error, Reruns};
use crate::base::error::At;
use crate::fuzzgen::Case;
use crate::transcript::compare::EntryDiff;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

pub(super) fn keys(d: &[EntryDiff]) -> String {
    let mut k: Vec<&str> = d.iter().take(3).map(|d| d.key.as_str()).collect();
    if d.len() > 3 {
        k.push("…");
    }
    k.join(", ")
}

/// Shrinks a difference that differed in every fresh rerun and writes it.
/// The shrunk case must differ in every rerun too: shrinking keeps a
/// candidate that differed once, and a race can do that, so a shrunk case
/// that does not hold up is dropped for the unshrunk one. What the header
/// shows comes from a run that differed, never from an identical one.
pub(super) fn write_shrunk(ck: &Checker, case: &Case, found: &Reruns) -> Result<PathBuf, Error> {
    let before = ck.runs.load(Ordering::Relaxed);
    let min = shrink(ck, case);
    let runs = ck.runs.load(Ordering::Relaxed) - before;
    if min == *case {
        let note = format!(
            "differed in {}; nothing could be shrunk away ({runs} runs)",
            found.rate()
        );
        return write_probe(ck, case, vec![note], &found.diffs, &[]);
    }
    let held = ck.rerun(&min);
    if held.every() {
        let note = format!(
            "shrunk from {} request(s) in {} unit(s) to {} request(s) in {} unit(s) ({runs} runs); differed in {}, and the shrunk case in {}",
            case.requests(),
            case.units.len(),
            min.requests(),
            min.units.len(),
            found.rate(),
            held.rate()
        );
        write_probe(ck, &min, vec![note], &held.diffs, &[])
    } else {
        let note = format!(
            "differed in {}; not shrunk: the shrunk case differed in only {} ({runs} runs)",
            found.rate(),
            held.rate()
        );
        write_probe(ck, case, vec![note], &found.diffs, &[])
    }
}

/// Writes a difference that did not repeat, unshrunk.
pub(super) fn write_flaky(ck: &Checker, case: &Case, diffs: &[EntryDiff], why: &str) -> Result<PathBuf, Error> {
    let note = format!("FLAKY: {why} (not shrunk) — nondeterminism in a daemon or the harness");
    write_probe(ck, case, vec![note], diffs, &[])
}

/// Writes a difference that appears only after `preceding` cases ran on
/// the same live daemons; their probes are attached as comments.
pub(super) fn write_state_dependent(
    ck: &Checker,
    case: &Case,
    preceding: &[u64],
    diffs: &[EntryDiff],
) -> Result<PathBuf, Error> {
    let o = ck.o;
    let list: Vec<String> = preceding.iter().map(u64::to_string).collect();
    let notes = vec![
        format!(
            "STATE-DEPENDENT: identical on fresh daemons; differs when cases {} ran before it on the same daemons",
            list.join(", ")
        ),
        format!(
            "replay: harness fuzz-diff --reference R --candidate C --seed {} --cases {},{}",
            o.seed,
            list.join(","),
            case.n
        ),
    ];
    let mut attached = Vec::new();
    for n in preceding {
        let c = crate::fuzzgen::generate(o.seed, *n);
        attached.push(format!("preceding case {n}:"));
        attached.extend(c.render(&[]).lines().map(|l| format!("  {l}")));
    }
    write_probe(ck, case, notes, diffs, &attached)
}

/// Writes `case` with a header (notes, then what differed, keys shifted to
/// the file's line numbers) and trailing comment lines.
fn write_probe(
    ck: &Checker,
    case: &Case,
    notes: Vec<String>,
    diffs: &[EntryDiff],
    trailer: &[String],
) -> Result<PathBuf, Error> {
    let o = ck.o;
    let shown: Vec<&EntryDiff> = diffs.iter().take(3).collect();
    let header_lines = 2 + notes.len() + 3 * shown.len();
    let mut header = vec![format!(
        "fuzz-diff seed {} iteration {} — move into probes/ (and rename) to keep it",
        o.seed, case.n
    )];
    header.extend(notes);
    header.push(format!(
        "differed ({} entr{}):",
        diffs.len(),
        if diffs.len() == 1 { "y" } else { "ies" }
    ));
    for d in &shown {
        header.push(format!("  {}", shift_key(&d.key, header_lines)));
        header.push(format!("    reference: {}", excerpt(d.reference.as_deref())));
        header.push(format!("    candidate: {}", excerpt(d.candidate.as_deref())));
    }
    debug_assert_eq!(header.len(), header_lines);
    let mut text = case.render(&header);
    for l in trailer {
        text.push_str("# ");
        text.push_str(l);
        text.push('\n');
    }
    crate::probe::parse(Path::new("check.probe"), &text).map_err(Error::Unreadable)?;
    std::fs::create_dir_all(&o.out).at(&o.out)?;
    let path = o.out.join(format!("{}.probe", case.name()));
    std::fs::write(&path, text).at(&path)?;
    Ok(path)
}

/// `L12 c1 reply 3` → `L<12+by> c1 reply 3`; other keys unchanged.
fn shift_key(key: &str, by: usize) -> String {
    let Some(rest) = key.strip_prefix('L') else {
        return key.to_string();
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    match digits.parse::<usize>() {
        Ok(n) => format!("L{}{}", n + by, &rest[digits.len()..]),
        Err(_) => key.to_string(),
    }
}

/// One line, at most 160 characters.
fn excerpt(v: Option<&str>) -> String {
    let Some(v) = v else {
        return "<absent>".into();
    };
    let one: String = v
        .chars()
        .flat_map(|c| match c {
            '\n' => vec!['\\', 'n'],
            '\r' => vec!['\\', 'r'],
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                format!("\\u{{{:x}}}", c as u32).chars().collect()
            }
            c => vec![c],
        })
        .collect();
    if one.chars().count() > 160 {
        one.chars().take(160).collect::<String>() + "…"
    } else {
        one
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzzgen::atoms;

    #[test]
    fn atoms_keep_escapes_and_templates() {
        assert_eq!(
            atoms("a\\u2028$bytes(\\xff)\\n$ROOT$$é"),
            vec!["a", "\\u2028", "$bytes(\\xff)", "\\n", "$ROOT", "$$", "é"]
        );
        assert_eq!(atoms("$repeat(3,(x))y"), vec!["$repeat(3,(x))", "y"]);
    }

    #[test]
    fn keys_shift_by_the_header() {
        assert_eq!(shift_key("L12 c1 reply 3", 5), "L17 c1 reply 3");
        assert_eq!(shift_key("fs a.txt", 5), "fs a.txt");
        assert_eq!(shift_key("end c1 unawaited", 5), "end c1 unawaited");
    }
}
