//! Reports: the terminal summary and the JSON form of a run; the HTML page
//! is [`html`]. Both put the verdict first: what ran, whether anything
//! unaccepted differs, which probes are not identical; the rest (every
//! accepted difference in full, the normalisation rules, the provenance of
//! reference-derived transcripts) comes after, folded or behind
//! `--verbose`.

mod html;
pub use html::html;

use crate::transcript::compare::{line_diffs, DerivedCounts, EntryDiff, Status};
use crate::transcript::Entry;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// Timings of one side of one probe.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SideTiming {
    /// Median over repeats of the probe's summed request latencies (µs).
    pub median_us: u64,
    /// Per request label: median latency (µs).
    pub requests: Vec<(String, u64)>,
}

/// The result of one probe.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeResult {
    pub probe: String,
    pub desc: String,
    pub status: Status,
    pub diffs: Vec<EntryDiff>,
    pub error: Option<String>,
    pub reference_timing: Option<SideTiming>,
    pub candidate_timing: Option<SideTiming>,
    /// candidate / reference.
    pub ratio: Option<f64>,
    /// Slower than `--slower-than`.
    pub slow: bool,
    /// Keys that varied between repeats of the same binary.
    pub unstable: Vec<String>,
    pub reference: Vec<Entry>,
    pub candidate: Vec<Entry>,
    /// For a reference-derived transcript (`check`): its frames by verdict.
    #[serde(default)]
    pub derived: Option<DerivedCounts>,
    /// The reference build the probe's transcript records (its `build`
    /// line), the candidate stamped as it; `None`: unstamped.
    #[serde(default)]
    pub build: Option<String>,
}

impl ProbeResult {
    /// A probe not yet run: identical so far, nothing recorded.
    pub fn new(probe: String, desc: String) -> ProbeResult {
        ProbeResult {
            probe,
            desc,
            status: Status::Identical,
            diffs: Vec::new(),
            error: None,
            reference_timing: None,
            candidate_timing: None,
            ratio: None,
            slow: false,
            unstable: Vec::new(),
            reference: Vec::new(),
            candidate: Vec::new(),
            derived: None,
            build: None,
        }
    }
}

/// A whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub mode: String,
    pub reference: String,
    pub candidate: String,
    pub normalisation: Vec<String>,
    pub slower_than: f64,
    pub repeat: usize,
    pub overall_ratio: Option<f64>,
    pub probes: Vec<ProbeResult>,
    /// The reference-derived corpus in one figure (see [`DerivedSummary`]).
    #[serde(default)]
    pub derived: DerivedSummary,
    /// `--slower-than` was given, so a slow probe fails the run too.
    #[serde(default)]
    pub slow_fails: bool,
    /// Probes the candidate's transport cannot run (`--via-bridge`,
    /// `--wine`), never run, each with its reason (`probe/skips.rs`).
    #[serde(default)]
    pub skipped: Vec<Skipped>,
}

/// A probe left out of a run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub probe: String,
    pub reason: String,
}

/// The reference-derived transcripts of a run, summed: how far remora
/// stands from the reference's own recorded frames.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DerivedSummary {
    pub transcripts: usize,
    pub frames: usize,
    pub identical: usize,
    /// Differing frames (pending + unexplained).
    pub differ: usize,
    pub pending: usize,
    pub unexplained: usize,
    pub accepted: usize,
    /// `probe: key glob` of pending lines that no longer differ.
    pub resolved_pending: Vec<String>,
}

impl DerivedSummary {
    /// Sums the derived counts of every probe.
    pub fn of(probes: &[ProbeResult]) -> DerivedSummary {
        let mut s = DerivedSummary::default();
        for p in probes {
            let Some(d) = &p.derived else { continue };
            s.transcripts += 1;
            s.frames += d.frames;
            s.identical += d.identical;
            s.differ += d.differ();
            s.pending += d.pending;
            s.unexplained += d.unexplained;
            s.accepted += d.accepted;
            s.resolved_pending
                .extend(d.resolved_pending.iter().map(|k| format!("{}: {k}", p.probe)));
        }
        s
    }

    /// The one-line figure both the terminal and the page print.
    pub fn line(&self) -> String {
        format!(
            "reference-derived: {} transcripts, {} frames — {} identical / {} differ ({} pending an issue, {} unexplained) / {} accepted",
            self.transcripts, self.frames, self.identical, self.differ, self.pending, self.unexplained, self.accepted
        )
    }
}

impl Report {
    pub fn count(&self, s: Status) -> usize {
        self.probes.iter().filter(|p| p.status == s).count()
    }

    pub fn slow(&self) -> Vec<&ProbeResult> {
        self.probes.iter().filter(|p| p.slow).collect()
    }

    /// Whether anything unaccepted differs (or could not run).
    pub fn failed(&self) -> bool {
        self.probes.iter().any(|p| p.status.fails())
    }

    /// What ran, in words: `harness check: <candidate> against the
    /// transcripts in <dir>` or `harness diff: <candidate> against <reference>`.
    pub fn what_ran(&self) -> String {
        match self.reference.strip_prefix("transcripts ") {
            Some(dir) => format!(
                "harness {}: {} against the transcripts in {dir}",
                self.mode, self.candidate
            ),
            None => format!("harness {}: {} against {}", self.mode, self.candidate, self.reference),
        }
    }

    /// Whether the run fails: something unaccepted differs or could not
    /// run, or a probe is slow and `--slower-than` was given.
    pub fn fails_run(&self) -> bool {
        self.failed() || (self.slow_fails && !self.slow().is_empty())
    }

    /// The verdict in a few words: `PASS: nothing unaccepted differs` or
    /// `FAIL: 2 probe(s) differ, 1 could not run`.
    pub fn verdict(&self) -> String {
        if !self.fails_run() {
            return "PASS: nothing unaccepted differs".to_string();
        }
        let (differ, errors) = (self.count(Status::Differs), self.count(Status::Error));
        let mut parts = Vec::new();
        if differ > 0 {
            parts.push(format!("{differ} probe(s) differ"));
        }
        if errors > 0 {
            parts.push(format!("{errors} could not run"));
        }
        if self.slow_fails && !self.slow().is_empty() {
            parts.push(format!(
                "{} probe(s) slower than {:.2}x",
                self.slow().len(),
                self.slower_than
            ));
        }
        format!("FAIL: {}", parts.join(", "))
    }

    /// One line per reference build the probes were run as, oldest id
    /// order aside, unstamped (the newest recorded build) first:
    /// `build <id>: <n> probes — <a> identical / <b> differ / <c> accepted`
    /// (errors and unrecorded probes, where any, after).
    pub fn by_build(&self) -> Vec<String> {
        let mut builds: Vec<Option<&str>> = self.probes.iter().map(|p| p.build.as_deref()).collect();
        builds.sort();
        builds.dedup();
        builds
            .into_iter()
            .map(|build| {
                let of = |s: Status| {
                    self.probes
                        .iter()
                        .filter(|p| p.build.as_deref() == build && p.status == s)
                        .count()
                };
                let total = self.probes.iter().filter(|p| p.build.as_deref() == build).count();
                let name = build.map_or("unstamped (the newest recorded build)".to_string(), |b| {
                    format!("build {b}")
                });
                let mut line = format!(
                    "{name}: {total} probes — {} identical / {} differ / {} accepted",
                    of(Status::Identical),
                    of(Status::Differs),
                    of(Status::Accepted)
                );
                for (status, word) in [(Status::Error, "errors"), (Status::Unrecorded, "unrecorded")] {
                    if of(status) > 0 {
                        line.push_str(&format!(" / {} {word}", of(status)));
                    }
                }
                line
            })
            .collect()
    }

    /// `<n> probes: <a> identical, … unrecorded` (the page adds a period),
    /// `, <s> skipped` after when the transport skipped some.
    pub fn counts(&self) -> String {
        let mut line = format!(
            "{} probes: {} identical, {} accepted, {} differ, {} errors, {} unrecorded",
            self.probes.len(),
            self.count(Status::Identical),
            self.count(Status::Accepted),
            self.count(Status::Differs),
            self.count(Status::Error),
            self.count(Status::Unrecorded),
        );
        if !self.skipped.is_empty() {
            let _ = write!(line, ", {} skipped", self.skipped.len());
        }
        line
    }

    /// The probes in the order a reader wants them: failing first, then
    /// accepted, unrecorded, identical; the probe order within each.
    pub fn by_severity(&self) -> Vec<&ProbeResult> {
        let rank = |s: Status| match s {
            Status::Differs => 0,
            Status::Error => 1,
            Status::Accepted => 2,
            Status::Unrecorded => 3,
            Status::Identical => 4,
        };
        let mut v: Vec<&ProbeResult> = self.probes.iter().collect();
        v.sort_by_key(|p| rank(p.status));
        v
    }
}

impl ProbeResult {
    /// The reason of its first accepted difference (they are usually all
    /// the same), if any.
    pub fn accepted_reason(&self) -> Option<&str> {
        self.diffs.iter().find_map(|d| d.accepted.as_deref())
    }
}

/// Overall ratio: total candidate time over total reference time across
/// the probes that have both.
pub fn overall_ratio(probes: &[ProbeResult]) -> Option<f64> {
    let (mut r, mut c) = (0u64, 0u64);
    for p in probes {
        if let (Some(a), Some(b)) = (&p.reference_timing, &p.candidate_timing) {
            r += a.median_us;
            c += b.median_us;
        }
    }
    (r > 0).then(|| c as f64 / r as f64)
}

/// How many slow probes the terminal names without `--verbose`.
const SLOW_NAMED: usize = 8;

/// Accepted reasons are cut to this many characters without `--verbose`.
const REASON_CHARS: usize = 110;

/// The terminal summary. Without `verbose` a clean run fits one screen:
/// what ran, one line per probe that is not identical (an accepted one
/// with its reason, cut), every unaccepted difference in full, the counts
/// and the verdict. `verbose` adds the normalisation rules, the identical
/// probes, every accepted difference in full and every slow probe's name.
pub fn terminal(rep: &Report, verbose: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n== {}", rep.what_ran());
    if verbose {
        let _ = writeln!(o, "normalisation:");
        for r in &rep.normalisation {
            let _ = writeln!(o, "  - {r}");
        }
    }
    let shown: Vec<&ProbeResult> = rep
        .by_severity()
        .into_iter()
        .filter(|p| verbose || p.status != Status::Identical || !p.unstable.is_empty() || (p.slow && rep.slow_fails))
        .collect();
    if !shown.is_empty() {
        let _ = writeln!(
            o,
            "\n{:<44} {:<10} {:>10} {:>10} {:>7}",
            "probe", "status", "ref µs", "cand µs", "ratio"
        );
    }
    for p in shown {
        probe_lines(&mut o, p, verbose);
    }
    if !rep.skipped.is_empty() {
        let _ = writeln!(o, "\nskipped (the transport cannot run them):");
        for p in &rep.skipped {
            let _ = writeln!(o, "  {:<44} {}", p.probe, p.reason);
        }
    }
    let _ = writeln!(o, "\n{}", rep.counts());
    // Per build only when the run had more than one (a row that repeats
    // the counts says nothing).
    let builds = rep.by_build();
    for line in builds.iter().filter(|_| builds.len() > 1) {
        let _ = writeln!(o, "  {line}");
    }
    if rep.derived.transcripts > 0 {
        let _ = writeln!(o, "{}", rep.derived.line());
        for k in &rep.derived.resolved_pending {
            let _ = writeln!(o, "  pending line no longer differs (remove it): {k}");
        }
    }
    if let Some(r) = rep.overall_ratio {
        let slow = rep.slow();
        let mut names: Vec<&str> = slow.iter().map(|p| p.probe.as_str()).collect();
        let more = if verbose {
            0
        } else {
            names.len().saturating_sub(SLOW_NAMED)
        };
        names.truncate(names.len() - more);
        let _ =
            writeln!(
            o,
            "timing: overall candidate/reference = {r:.2} (median of {} run(s)); {} probe(s) slower than {:.2}x{}{}",
            rep.repeat,
            slow.len(),
            rep.slower_than,
            if names.is_empty() { String::new() } else { format!(": {}", names.join(", ")) },
            if more > 0 { format!(" and {more} more") } else { String::new() }
        );
    }
    let _ = writeln!(o, "{}", rep.verdict());
    if !verbose {
        let _ = writeln!(
            o,
            "(--verbose adds the normalisation rules, the identical probes and every accepted difference in full)"
        );
    }
    o
}

/// One probe's row, then its error, unstable keys and differences.
fn probe_lines(o: &mut String, p: &ProbeResult, verbose: bool) {
    let us = |t: &Option<SideTiming>| {
        t.as_ref()
            .map(|t| t.median_us.to_string())
            .unwrap_or_else(|| "-".into())
    };
    let ratio = p.ratio.map(|r| format!("{r:.2}")).unwrap_or_else(|| "-".into());
    let _ = writeln!(
        o,
        "{:<44} {:<10} {:>10} {:>10} {:>7}{}",
        p.probe,
        p.status.label(),
        us(&p.reference_timing),
        us(&p.candidate_timing),
        ratio,
        if p.slow { "  SLOW" } else { "" }
    );
    if let Some(e) = &p.error {
        let _ = writeln!(o, "    error: {e}");
    }
    for k in &p.unstable {
        let _ = writeln!(o, "    unstable across repeats: {k}");
    }
    if !verbose && p.status == Status::Accepted {
        let keys = p.diffs.len();
        if let Some(reason) = p.accepted_reason() {
            let cut: String = reason.chars().take(REASON_CHARS).collect();
            let ellipsis = if cut.len() < reason.len() { "…" } else { "" };
            let _ = writeln!(o, "    {keys} key(s) accepted: {cut}{ellipsis}");
        }
        return;
    }
    for d in &p.diffs {
        let tag = match &d.accepted {
            Some(r) => format!(" [accepted: {r}]"),
            None => String::new(),
        };
        let _ = writeln!(o, "  {}{tag}", d.key);
        match (&d.reference, &d.candidate) {
            (Some(r), Some(c)) => {
                for (line, re, ce, caret) in line_diffs(r, c) {
                    let _ = writeln!(o, "    line {line}:");
                    let _ = writeln!(o, "      ref : {re}");
                    let _ = writeln!(o, "      cand: {ce}");
                    let _ = writeln!(o, "            {}^", " ".repeat(caret));
                }
            }
            (Some(r), None) => {
                let _ = writeln!(o, "      only in reference: {}", short(r));
            }
            (None, Some(c)) => {
                let _ = writeln!(o, "      only in candidate: {}", short(c));
            }
            (None, None) => {}
        }
    }
}

fn short(s: &str) -> String {
    let e = crate::transcript::escape(s.as_bytes());
    if e.chars().count() > 160 {
        format!("{}…", e.chars().take(160).collect::<String>())
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, status: Status) -> ProbeResult {
        let e = |v: &str| crate::transcript::Entry {
            key: "L1 c1 reply 1".into(),
            value: v.as_bytes().to_vec(),
        };
        ProbeResult {
            status,
            reference: vec![e("ref")],
            candidate: vec![e("cand")],
            ..ProbeResult::new(name.into(), String::new())
        }
    }

    fn report(probes: Vec<ProbeResult>) -> Report {
        Report {
            mode: "diff".into(),
            reference: "r".into(),
            candidate: "c".into(),
            normalisation: Vec::new(),
            slower_than: 1.5,
            repeat: 1,
            overall_ratio: None,
            derived: DerivedSummary::of(&probes),
            probes,
            slow_fails: false,
            skipped: Vec::new(),
        }
    }

    #[test]
    fn skipped_probes_are_named_with_their_reason_and_counted() {
        let mut rep = report(vec![result("a", Status::Identical)]);
        rep.skipped.push(Skipped {
            probe: "kill-live".into(),
            reason: "Posix: POSIX signals".into(),
        });
        let t = terminal(&rep, false);
        assert!(t.contains("kill-live") && t.contains("Posix: POSIX signals"), "{t}");
        assert!(rep.counts().ends_with(", 1 skipped"), "{}", rep.counts());
        assert!(!rep.failed(), "a skip is not a failure");
        let page = html(&rep);
        assert!(
            page.contains("<code>kill-live</code> — Posix: POSIX signals"),
            "the page lists it too"
        );
    }

    #[test]
    fn one_line_per_build_with_its_verdicts() {
        let stamped = |name: &str, status: Status, build: &str| ProbeResult {
            build: Some(build.to_string()),
            ..result(name, status)
        };
        let rep = report(vec![
            result("a", Status::Identical),
            stamped("b", Status::Differs, "89cb6289"),
            stamped("c", Status::Accepted, "89cb6289"),
            stamped("d", Status::Identical, "f6010b97"),
            stamped("e", Status::Error, "f6010b97"),
        ]);
        assert_eq!(
            rep.by_build(),
            [
                "unstamped (the newest recorded build): 1 probes — 1 identical / 0 differ / 0 accepted",
                "build 89cb6289: 2 probes — 0 identical / 1 differ / 1 accepted",
                "build f6010b97: 2 probes — 1 identical / 0 differ / 0 accepted / 1 errors",
            ]
        );
        assert!(terminal(&rep, false).contains("\n  build 89cb6289: 2 probes"));
    }

    /// The start tag of the section with this id.
    fn section_tag<'a>(page: &'a str, id: &str) -> &'a str {
        let at = page.find(&format!("<details class=\"probe\" id=\"{id}\"")).unwrap();
        &page[at..at + page[at..].find('>').unwrap()]
    }

    #[test]
    fn only_the_first_failing_probes_start_expanded() {
        let mut probes = vec![result("acc", Status::Accepted)];
        for i in 0..25 {
            let s = if i % 5 == 4 { Status::Error } else { Status::Differs };
            probes.push(result(&format!("p{i}"), s));
        }
        let page = html(&report(probes));
        assert_eq!(page.matches("<details class=\"probe\"").count(), 26);
        let open: Vec<usize> = (0..25)
            .filter(|i| section_tag(&page, &format!("p{i}")).ends_with(" open"))
            .collect();
        // The page lists the differing probes before the errored ones, and
        // opens the first ones it lists.
        let mut listed: Vec<usize> = (0..25).filter(|i| i % 5 != 4).collect();
        listed.extend((0..25).filter(|i| i % 5 == 4));
        listed.truncate(html::OPEN_FAILING);
        listed.sort_unstable();
        assert_eq!(open, listed);
        assert!(!section_tag(&page, "acc").ends_with(" open"));
        assert!(
            page.contains("The first 10 of 25 failing probes are expanded"),
            "the page says why the rest are collapsed"
        );
        assert!(page.contains("<button id=\"expand\">") && page.contains("<button id=\"collapse\">"));
    }

    #[test]
    fn a_json_report_reads_back_to_the_same_page() {
        let mut d = result("d", Status::Differs);
        d.diffs.push(EntryDiff {
            key: "L1 c1 reply 1".into(),
            reference: Some("ref".into()),
            candidate: Some("cand".into()),
            first_diff: Some(0),
            accepted: None,
        });
        d.reference_timing = Some(SideTiming {
            median_us: 7,
            requests: vec![("L1".into(), 7)],
        });
        let rep = report(vec![d, result("a", Status::Accepted)]);
        let json = serde_json::to_string(&rep).unwrap();
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(html(&back), html(&rep));
        assert_eq!(terminal(&back, true), terminal(&rep, true));
    }

    #[test]
    fn the_derived_corpus_has_its_own_line_section_and_json_counts() {
        let mut d = result("ref-x", Status::Accepted);
        d.derived = Some(DerivedCounts {
            source: "o/r testdata/x.golden.json @ abc".into(),
            frames: 5,
            identical: 2,
            pending: 2,
            unexplained: 0,
            accepted: 1,
            resolved_pending: vec!["L9 c1 reply 9".into()],
        });
        let rep = report(vec![d, result("plain", Status::Identical)]);
        let line = "reference-derived: 1 transcripts, 5 frames — 2 identical / 2 differ (2 pending an issue, 0 unexplained) / 1 accepted";
        assert_eq!(rep.derived.line(), line);
        assert!(terminal(&rep, false).contains(line));
        assert!(terminal(&rep, false).contains("(remove it): ref-x: L9 c1 reply 9"));
        let page = html(&rep);
        assert!(page.contains("<details id=\"provenance\"><summary>Reference-derived transcripts:"));
        assert!(page.contains("o/r testdata/x.golden.json @ abc"));
        let json: serde_json::Value = serde_json::to_value(&rep).unwrap();
        assert_eq!(json["derived"]["frames"], 5);
        assert_eq!(json["derived"]["pending"], 2);
        assert!(!terminal(&report(vec![result("plain", Status::Identical)]), false).contains("reference-derived"));
    }

    #[test]
    fn a_clean_run_fits_one_screen_and_verbose_has_the_rest() {
        let mut probes: Vec<ProbeResult> = (0..400)
            .map(|i| result(&format!("same-{i}"), Status::Identical))
            .collect();
        for i in 0..11 {
            let mut a = result(&format!("acc-{i}"), Status::Accepted);
            for k in 0..7 {
                a.diffs.push(EntryDiff {
                    key: format!("L{k} c1 reply {k}"),
                    reference: Some("{\"a\":1}".into()),
                    candidate: Some("{\"a\":2}".into()),
                    first_diff: Some(5),
                    accepted: Some(format!("a long reason {}", "why ".repeat(60))),
                });
            }
            probes.push(a);
        }
        let mut rep = report(probes);
        rep.normalisation = (0..14).map(|i| format!("rule {i}")).collect();
        let short = terminal(&rep, false);
        assert!(short.lines().count() <= 30, "{short}");
        assert!(short.contains("\n== harness diff: c against r\n"), "{short}");
        assert!(short.contains("PASS: nothing unaccepted differs"), "{short}");
        assert!(
            short.contains("    7 key(s) accepted: a long reason why why"),
            "{short}"
        );
        assert!(!short.contains("rule 3") && !short.contains("same-7"), "{short}");
        let long = terminal(&rep, true);
        assert!(long.contains("  - rule 3\n") && long.contains("same-7") && long.contains("[accepted: a long reason"));
        rep.probes.push(result("bad", Status::Differs));
        let failing = terminal(&rep, false);
        assert!(failing.contains("FAIL: 1 probe(s) differ"), "{failing}");
        // The failing probe comes first and shows its difference in full.
        let bad = failing.find("\nbad ").unwrap();
        assert!(bad < failing.find("\nacc-0 ").unwrap(), "{failing}");
    }

    #[test]
    fn the_page_opens_with_the_verdict_and_the_failing_probes() {
        let mut acc = result("acc", Status::Accepted);
        acc.diffs.push(EntryDiff {
            key: "L1 c1 reply 1".into(),
            reference: Some("ref".into()),
            candidate: Some("cand".into()),
            first_diff: Some(0),
            accepted: Some("because".into()),
        });
        let page = html(&report(vec![
            result("same", Status::Identical),
            acc,
            result("bad", Status::Differs),
        ]));
        assert!(
            page.contains("<title>FAIL · harness diff: c against r</title>"),
            "{page}"
        );
        let at = |needle: &str| page.find(needle).unwrap_or_else(|| panic!("{needle} missing"));
        assert!(at("<h1 id=\"verdict\" class=\"fail\">FAIL: 1 probe(s) differ</h1>") < at("<p id=\"summary\">"));
        assert!(at("<p id=\"summary\">") < at("id=\"filter\""));
        assert!(at("<tr data-status=\"DIFFERS\" data-probe=\"bad\">") < at("<tr data-status=\"accepted\""));
        assert!(at("<tr data-status=\"accepted\"") < at("<tr data-status=\"identical\""));
        assert!(
            page.contains("title=\"because\">because</td>"),
            "the accepted reason in the table"
        );
        assert!(at("<h2>Transcripts</h2>") < at("<details id=\"normalisation\">"));
        let pass = html(&report(vec![result("same", Status::Identical)]));
        assert!(pass.contains("<h1 id=\"verdict\" class=\"pass\">PASS: nothing unaccepted differs</h1>"));
    }

    #[test]
    fn a_slow_probe_fails_the_verdict_only_when_slower_than_was_given() {
        let mut slow = result("slow", Status::Identical);
        slow.slow = true;
        let mut rep = report(vec![slow]);
        assert!(terminal(&rep, false).contains("PASS"));
        assert!(!terminal(&rep, false).contains("\nslow "));
        rep.slow_fails = true;
        let text = terminal(&rep, false);
        assert!(text.contains("FAIL: 1 probe(s) slower than 1.50x"), "{text}");
        assert!(text.contains("\nslow ") && text.contains("SLOW"), "{text}");
        assert!(html(&rep).contains("class=\"fail\">FAIL: 1 probe(s) slower than 1.50x<"));
    }

    #[test]
    fn a_few_failing_probes_are_all_expanded_without_a_note() {
        let page = html(&report(vec![
            result("a", Status::Differs),
            result("b", Status::Error),
            result("c", Status::Unrecorded),
        ]));
        assert!(section_tag(&page, "a").ends_with(" open"));
        assert!(section_tag(&page, "b").ends_with(" open"));
        assert!(!section_tag(&page, "c").ends_with(" open"));
        assert!(!page.contains("id=\"collapsed\""));
    }
}
