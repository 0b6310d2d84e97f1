//! The HTML report: one self-contained page (no external resources). The
//! first screen answers "did anything change?": the verdict, what ran, the
//! counts, the filter, and the probe table with the failing and accepted
//! probes first. The side-by-side transcripts follow; the provenance of
//! reference-derived transcripts and the normalisation rules come last,
//! folded.

use super::{ProbeResult, Report, SideTiming};
use crate::transcript::compare::Status;
use crate::transcript::Entry;
use std::fmt::Write as _;

fn h(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Displayed values longer than this (characters) are cut to a window
/// around their first difference.
const SHOWN_CHARS: usize = 6000;

/// Failing probes beyond this many start collapsed: a run with thousands
/// of differences would otherwise lay out thousands of side-by-side tables
/// before anyone can scroll, and the first few are the ones read anyway.
pub(super) const OPEN_FAILING: usize = 10;

/// The page's script: filtering by text and status, expand/collapse all,
/// the URL fragment (`#q=TEXT&st=DIFFERS,ERROR` sets the filter, `st` being
/// the statuses shown; `#PROBE` opens that probe's section), scrolling each
/// first-difference mark into view inside its block when a section opens,
/// and self-checks the browser test reads: `data-resources` on the body
/// (resources the page loaded besides itself; it must be 0, the page is
/// offline), `data-first-screen` on the body (which of the verdict, the
/// counts, the filter and the first row that is not identical lie wholly
/// inside the first viewport) and `data-seen` on each mark that was
/// scrolled into view.
const SCRIPT: &str = r#"
(function(){
  var q=document.getElementById('filter'), boxes=document.querySelectorAll('.st');
  function apply(){
    var t=q.value.toLowerCase(), on={};
    boxes.forEach(function(b){on[b.value]=b.checked;});
    var shown=0;
    document.querySelectorAll('[data-status]').forEach(function(e){
      var ok=on[e.dataset.status]&&(!t||e.dataset.probe.toLowerCase().indexOf(t)>=0);
      e.hidden=!ok; if(ok&&e.tagName==='TR')shown++;
    });
    document.getElementById('shown').textContent=shown;
  }
  function reveal(d){
    d.querySelectorAll('pre mark.fd').forEach(function(m){
      var p=m.closest('pre'), pr=p.getBoundingClientRect(), mr=m.getBoundingClientRect();
      p.scrollTop+=mr.top-pr.top-p.clientHeight/3;
      p.scrollLeft+=mr.left-pr.left-p.clientWidth/3;
      pr=p.getBoundingClientRect(); mr=m.getBoundingClientRect();
      var inside=mr.top>=pr.top&&mr.bottom<=pr.bottom&&mr.left>=pr.left&&mr.right<=pr.right;
      m.dataset.seen=inside?'1':'0';
    });
  }
  // A malformed escape (`#q=100%`) must not stop the rest of the script.
  function dec(s){try{return decodeURIComponent(s);}catch(e){return s;}}
  function fragment(){
    var f=location.hash.slice(1);
    if(!f)return;
    if(f.indexOf('=')<0){
      var d=document.getElementById(dec(f));
      if(d&&d.tagName==='DETAILS'){d.open=true;reveal(d);d.scrollIntoView();}
      return;
    }
    f.split('&').forEach(function(kv){
      var i=kv.indexOf('='), k=kv.slice(0,i), v=dec(kv.slice(i+1));
      if(k==='q')q.value=v;
      if(k==='st'){var want=v.split(',');boxes.forEach(function(b){b.checked=want.indexOf(b.value)>=0;});}
    });
    apply();
  }
  q.addEventListener('input',apply); boxes.forEach(function(b){b.addEventListener('change',apply);});
  // Only sections the filter shows: expanding thousands of hidden ones
  // costs layout for nothing.
  document.getElementById('expand').onclick=function(){document.querySelectorAll('details.probe:not([hidden])').forEach(function(d){d.open=true;});};
  document.getElementById('collapse').onclick=function(){document.querySelectorAll('details.probe').forEach(function(d){d.open=false;});};
  // toggle does not bubble; capturing sees it for every section.
  document.addEventListener('toggle',function(e){var d=e.target;if(d.open&&d.classList&&d.classList.contains('probe'))reveal(d);},true);
  window.addEventListener('hashchange',fragment);
  // A link to the section the fragment already names fires no hashchange.
  document.getElementById('probes').addEventListener('click',function(e){
    var a=e.target.closest('a'), d=a&&document.getElementById(dec(a.hash.slice(1)));
    if(d&&d.tagName==='DETAILS')d.open=true;
  });
  apply();
  // What the first screen shows, before any fragment scrolls: the
  // browser test reads it at the window size a person uses.
  function onScreen(e){if(!e)return false;var r=e.getBoundingClientRect();return r.height>0&&r.top>=0&&r.bottom<=window.innerHeight;}
  var first=[], row=document.querySelector('#probes tr[data-status]:not([data-status="identical"])');
  [['verdict',document.getElementById('verdict')],['counts',document.getElementById('summary')],['filter',q],['first-row',row]]
    .forEach(function(p){if(onScreen(p[1]))first.push(p[0]);});
  document.body.dataset.firstScreen=first.join(',');
  fragment();
  document.querySelectorAll('details.probe[open]').forEach(reveal);
  var res=(performance.getEntriesByType?performance.getEntriesByType('resource').length:0);
  document.body.dataset.resources=String(res);
  document.body.dataset.ready='1';
})();
"#;

/// HTML-escapes `a` and `b` (display forms of two values), marking their
/// first differing character with `<mark class="fd">` (an empty marker at
/// the end of the shorter one), and cuts long values to a window around it.
fn marked_pair(a: &str, b: &str) -> (String, String) {
    let (ac, bc): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let first = ac
        .iter()
        .zip(&bc)
        .position(|(x, y)| x != y)
        .or_else(|| (ac.len() != bc.len()).then(|| ac.len().min(bc.len())));
    let render = |cs: &[char]| -> String {
        let Some(at) = first else { return h(&window(cs, 0)) };
        let from = at.saturating_sub(SHOWN_CHARS / 3);
        let to = (from + SHOWN_CHARS).min(cs.len());
        let mut s = String::new();
        if from > 0 {
            let _ = write!(s, "<i class=\"cut\">… {from} characters …</i>");
        }
        let pre: String = cs[from..at.min(cs.len())].iter().collect();
        s.push_str(&h(&pre));
        if at < cs.len() {
            let _ = write!(
                s,
                "<mark class=\"fd\" title=\"first difference: character {at}\">{}</mark>",
                h(&cs[at].to_string())
            );
            let post: String = cs[(at + 1).min(to)..to].iter().collect();
            s.push_str(&h(&post));
        } else {
            let _ = write!(s, "<mark class=\"fd end\" title=\"ends here (character {at})\"></mark>");
        }
        if to < cs.len() {
            let _ = write!(s, "<i class=\"cut\">… {} more characters</i>", cs.len() - to);
        }
        s
    };
    (render(&ac), render(&bc))
}

/// The first `SHOWN_CHARS` characters of `cs` from `from`, with a note.
fn window(cs: &[char], from: usize) -> String {
    let to = (from + SHOWN_CHARS).min(cs.len());
    let mut s: String = cs[from..to].iter().collect();
    if to < cs.len() {
        let _ = write!(s, "… ({} more characters)", cs.len() - to);
    }
    s
}

/// The reference-derived provenance, folded: the corpus figure in the
/// summary line, one row per derived transcript (its source and frames by
/// verdict) inside.
fn derived_section(o: &mut String, rep: &Report) {
    if rep.derived.transcripts == 0 {
        return;
    }
    let _ = write!(
        o,
        "<details id=\"provenance\"><summary>Reference-derived transcripts: <span id=\"derived\">{}</span></summary><table id=\"derived-table\"><tr><th>probe</th><th>frames</th><th>identical</th><th>pending</th><th>unexplained</th><th>accepted</th><th>source</th></tr>",
        h(&rep.derived.line())
    );
    for p in &rep.probes {
        let Some(d) = &p.derived else { continue };
        let _ = write!(
            o,
            "<tr><td><a href=\"#{0}\">{0}</a></td><td>{1}</td><td>{2}</td><td>{3}</td><td class=\"{4}\">{5}</td><td>{6}</td><td>{7}</td></tr>",
            h(&p.probe),
            d.frames,
            d.identical,
            d.pending,
            if d.unexplained > 0 { "DIFFERS" } else { "" },
            d.unexplained,
            d.accepted,
            h(&d.source)
        );
    }
    o.push_str("</table>");
    for k in &rep.derived.resolved_pending {
        let _ = write!(o, "<p>pending line no longer differs (remove it): {}</p>", h(k));
    }
    o.push_str("</details>");
}

/// Accepted reasons and errors in the probe table are cut to this many
/// characters (the whole text is the cell's tooltip and in the section).
const NOTE_CHARS: usize = 120;

/// The page's style sheet.
const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}\
         .identical{color:#2a7}.accepted{color:#b80}.DIFFERS,.ERROR{color:#c22;font-weight:bold}.unrecorded{color:#888}\
         pre{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font:12px ui-monospace,monospace;max-height:40em;overflow:auto}\
         .d{background:#fee}.a{background:#ffd}.bar{height:8px;display:block}.r{background:#69c}.c{background:#c96}\
         details{margin:.5em 0}summary{cursor:pointer}table.side{table-layout:fixed;width:100%}table.side td:first-child,table.side th:first-child{width:16em}\
         mark.fd{background:#f33;color:#fff;outline:1px solid #900}mark.fd.end{padding:0 .3em}.cut{color:#888}\
         #verdict{margin:0 0 .3em;padding:.3em .6em;border-radius:4px;font-size:1.6em}#verdict.pass{background:#dfd;color:#173}#verdict.fail{background:#fdd;color:#900}\
         #what{margin:.2em 0;color:#444}#summary{margin:.2em 0 .6em;font-size:1.1em}td.note{color:#555;font-size:12px;max-width:60em}\
         .tools{position:sticky;top:0;background:#fff;padding:.4em 0;border-bottom:1px solid #ccc}[hidden]{display:none!important}";

/// A self-contained HTML page (no external resources). First screen: the
/// verdict, what ran, the counts, the filter and the probe table, failing
/// and accepted probes first, each with its reason or error cut to a line.
/// Then the side-by-side transcripts of every probe that is not identical,
/// each differing value's first differing character marked (only the
/// first [`OPEN_FAILING`] failing probes start expanded); then, folded,
/// the reference-derived provenance and the normalisation rules.
pub fn html(rep: &Report) -> String {
    let mut o = String::new();
    let pass = !rep.fails_run();
    let _ = write!(
        o,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{} · {}</title><style>",
        if pass { "PASS" } else { "FAIL" },
        h(&rep.what_ran())
    );
    o.push_str(STYLE);
    o.push_str("</style></head><body>");
    heading(&mut o, rep, pass);
    filter_bar(&mut o, rep);
    let ordered = rep.by_severity();
    probe_table(&mut o, rep, &ordered);
    transcripts(&mut o, rep, &ordered);
    o.push_str("<h2>Provenance</h2>");
    derived_section(&mut o, rep);
    o.push_str("<details id=\"normalisation\"><summary>Normalisation rules</summary><ul>");
    for r in &rep.normalisation {
        let _ = write!(o, "<li>{}</li>", h(r));
    }
    o.push_str("</ul></details>");
    let _ = writeln!(o, "<script>{SCRIPT}</script></body></html>");
    o
}

/// The verdict, what ran and the counts.
fn heading(o: &mut String, rep: &Report, pass: bool) {
    let _ = write!(
        o,
        "<h1 id=\"verdict\" class=\"{}\">{}</h1><p id=\"what\">{}</p>",
        if pass { "pass" } else { "fail" },
        h(&rep.verdict()),
        h(&rep.what_ran())
    );
    let _ = write!(o, "<p id=\"summary\">{}.", h(&rep.counts()));
    let builds = rep.by_build();
    for line in builds.iter().filter(|_| builds.len() > 1) {
        let _ = write!(o, "<br><small>{}</small>", h(line));
    }
    if let Some(r) = rep.overall_ratio {
        let _ = write!(
            o,
            " Overall candidate/reference time: <b>{r:.2}</b>; slower-than threshold {:.2}.",
            rep.slower_than
        );
    }
    if rep.derived.transcripts > 0 {
        let _ = write!(o, "<br><small>{}</small>", h(&rep.derived.line()));
    }
    o.push_str("</p>");
    if !rep.skipped.is_empty() {
        let _ = write!(
            o,
            "<details id=\"skipped\"><summary>{} skipped: the transport cannot run them</summary><ul>",
            rep.skipped.len()
        );
        for p in &rep.skipped {
            let _ = write!(o, "<li><code>{}</code> — {}</li>", h(&p.probe), h(&p.reason));
        }
        o.push_str("</ul></details>");
    }
}

/// The filter: every status is shown by default (the table is one row
/// each, the identical ones last), and the text box narrows by name.
fn filter_bar(o: &mut String, rep: &Report) {
    o.push_str("<div class=\"tools\"><input id=\"filter\" placeholder=\"filter probes by name\" size=\"40\"> ");
    for s in [
        Status::Differs,
        Status::Error,
        Status::Accepted,
        Status::Unrecorded,
        Status::Identical,
    ] {
        let _ = write!(
            o,
            "<label><input type=\"checkbox\" class=\"st\" value=\"{0}\" checked> {0} ({1})</label> ",
            s.label(),
            rep.count(s)
        );
    }
    o.push_str("<button id=\"expand\">expand all</button> <button id=\"collapse\">collapse all</button> <span id=\"shown\"></span> shown</div>");
}

/// One row per probe, most severe first: status, timings with their bars,
/// and the reason or error cut to [`NOTE_CHARS`].
fn probe_table(o: &mut String, rep: &Report, ordered: &[&ProbeResult]) {
    o.push_str("<table id=\"probes\"><tr><th>probe</th><th>status</th><th>ref µs</th><th>cand µs</th><th>ratio</th><th>timing</th><th>why</th></tr>");
    let max = rep
        .probes
        .iter()
        .flat_map(|p| [&p.reference_timing, &p.candidate_timing])
        .filter_map(|t| t.as_ref().map(|t| t.median_us))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    for p in ordered {
        let us = |t: &Option<SideTiming>| t.as_ref().map(|t| t.median_us);
        let bar = |v: Option<u64>, cls: &str| match v {
            Some(v) => format!(
                "<span class=\"bar {cls}\" style=\"width:{:.1}px\" title=\"{v} µs\"></span>",
                1.0 + 300.0 * v as f64 / max
            ),
            None => String::new(),
        };
        let name = if p.status == Status::Identical {
            h(&p.probe)
        } else {
            format!("<a href=\"#{0}\">{0}</a>", h(&p.probe))
        };
        let why = p.error.as_deref().or_else(|| p.accepted_reason()).unwrap_or("");
        let cut: String = why.chars().take(NOTE_CHARS).collect();
        let ellipsis = if cut.len() < why.len() { "…" } else { "" };
        let _ = write!(
            o,
            "<tr data-status=\"{1}\" data-probe=\"{0}\"><td>{name}</td><td class=\"{1}\">{1}{2}</td><td>{3}</td><td>{4}</td><td>{5}</td><td>{6}{7}</td><td class=\"note\" title=\"{8}\">{9}{ellipsis}</td></tr>",
            h(&p.probe),
            p.status.label(),
            if p.slow { " · SLOW" } else { "" },
            us(&p.reference_timing).map(|v| v.to_string()).unwrap_or_default(),
            us(&p.candidate_timing).map(|v| v.to_string()).unwrap_or_default(),
            p.ratio.map(|r| format!("{r:.2}")).unwrap_or_default(),
            bar(us(&p.reference_timing), "r"),
            bar(us(&p.candidate_timing), "c"),
            h(why),
            h(&cut),
        );
    }
}

/// A folded section per probe that is not identical, the first
/// [`OPEN_FAILING`] failing ones open.
fn transcripts(o: &mut String, rep: &Report, ordered: &[&ProbeResult]) {
    let identical = rep.count(Status::Identical);
    let _ = write!(
        o,
        "</table><h2>Transcripts</h2><p>{identical} identical probe(s) are listed above only."
    );
    let failing = rep.probes.iter().filter(|p| p.status.fails()).count();
    if failing > OPEN_FAILING {
        let _ = write!(
            o,
            " <span id=\"collapsed\">The first {OPEN_FAILING} of {failing} failing probes are expanded, the rest collapsed: \
             open one from the table, or filter and expand all.</span>"
        );
    }
    o.push_str("</p>");
    let mut opened = 0;
    for p in ordered.iter().filter(|p| p.status != Status::Identical) {
        let open = p.status.fails() && opened < OPEN_FAILING;
        if open {
            opened += 1;
        }
        probe_section(o, p, open);
    }
}

/// One probe's section: its error, then its entries side by side.
fn probe_section(o: &mut String, p: &ProbeResult, open: bool) {
    let _ = write!(
        o,
        "<details class=\"probe\" id=\"{0}\" data-status=\"{1}\" data-probe=\"{0}\"{open}><summary><b>{0}</b> — <span class=\"{1}\">{1}</span> {2}</summary>",
        h(&p.probe),
        p.status.label(),
        h(&p.desc),
        open = if open { " open" } else { "" },
    );
    if let Some(e) = &p.error {
        let _ = write!(o, "<p class=\"ERROR\">{}</p>", h(e));
    }
    if p.reference.is_empty() && p.candidate.is_empty() {
        o.push_str("</details>");
        return;
    }
    o.push_str("<table class=\"side\"><tr><th>key</th><th>reference</th><th>candidate</th></tr>");
    let mut keys: Vec<&str> = p.reference.iter().map(|e| e.key.as_str()).collect();
    for e in &p.candidate {
        if !keys.contains(&e.key.as_str()) {
            keys.push(&e.key);
        }
    }
    for k in keys {
        side_row(o, p, k);
    }
    o.push_str("</table></details>");
}

/// The row of entry `k`: a differing pair with its first difference
/// marked, an accepted one with its reason.
fn side_row(o: &mut String, p: &ProbeResult, k: &str) {
    let get = |v: &[Entry]| {
        v.iter()
            .find(|e| e.key == k)
            .map(|e| crate::transcript::escape(&e.value).replace("\\n", "\\n\n"))
    };
    let d = p.diffs.iter().find(|d| d.key == k);
    let cls = match d {
        Some(d) if d.accepted.is_some() => " class=\"a\"",
        Some(_) => " class=\"d\"",
        None => "",
    };
    let note = d
        .and_then(|d| d.accepted.as_ref())
        .map(|r| format!("<br><i>accepted: {}</i>", h(r)))
        .unwrap_or_default();
    let (r, c) = match (get(&p.reference), get(&p.candidate)) {
        (Some(r), Some(c)) if d.is_some() => marked_pair(&r, &c),
        (r, c) => {
            let show = |v: Option<String>| match v {
                Some(v) => h(&window(&v.chars().collect::<Vec<_>>(), 0)),
                None => "∅".into(),
            };
            (show(r), show(c))
        }
    };
    let _ = write!(
        o,
        "<tr{cls}><td><pre>{}</pre>{note}</td><td><pre>{r}</pre></td><td><pre>{c}</pre></td></tr>",
        h(k),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARK: &str = "<mark class=\"fd\"";

    #[test]
    fn the_first_differing_character_is_marked_on_both_sides() {
        let (a, b) = marked_pair("abcd", "abXd");
        assert_eq!(
            a,
            "ab<mark class=\"fd\" title=\"first difference: character 2\">c</mark>d"
        );
        assert_eq!(
            b,
            "ab<mark class=\"fd\" title=\"first difference: character 2\">X</mark>d"
        );
    }

    #[test]
    fn a_value_that_is_a_prefix_of_the_other_gets_an_end_marker() {
        let (a, b) = marked_pair("ab", "abc");
        assert_eq!(a, "ab<mark class=\"fd end\" title=\"ends here (character 2)\"></mark>");
        assert!(b.starts_with("ab<mark class=\"fd\""), "{b}");
        assert!(b.ends_with(">c</mark>"), "{b}");
    }

    #[test]
    fn equal_values_are_escaped_and_unmarked() {
        let (a, b) = marked_pair("<a & \"b\">", "<a & \"b\">");
        assert_eq!(a, "&lt;a &amp; &quot;b&quot;&gt;");
        assert_eq!(a, b);
        assert!(!a.contains("<mark"));
    }

    #[test]
    fn positions_count_characters_and_the_marked_one_is_escaped() {
        // Two multi-byte characters before the difference: the title gives
        // the character index, not the byte offset.
        let (a, b) = marked_pair("é€<x", "é€&x");
        assert_eq!(
            a,
            "é€<mark class=\"fd\" title=\"first difference: character 2\">&lt;</mark>x"
        );
        assert!(b.contains(">&amp;</mark>x"), "{b}");
    }

    /// The value's characters a page shows: without tags and cut notes.
    fn shown_text(s: &str) -> String {
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find('<') {
            out.push_str(&rest[..i]);
            rest = &rest[i..];
            let skip = if rest.starts_with("<i class=\"cut\">") {
                rest.find("</i>").unwrap() + 4
            } else {
                rest.find('>').unwrap() + 1
            };
            rest = &rest[skip..];
        }
        out + rest
    }

    #[test]
    fn a_wide_line_is_cut_to_a_window_around_its_first_difference() {
        let at = 15_000;
        let base = "a".repeat(20_000);
        let (mut x, mut y) = (base.clone(), base);
        x.replace_range(at..at + 1, "X");
        y.replace_range(at..at + 1, "Y");
        let (a, b) = marked_pair(&x, &y);
        for (s, c) in [(&a, 'X'), (&b, 'Y')] {
            let from = at - SHOWN_CHARS / 3;
            assert!(
                s.starts_with(&format!("<i class=\"cut\">… {from} characters …</i>")),
                "{}",
                &s[..80]
            );
            let left = 20_000 - (from + SHOWN_CHARS);
            assert!(
                s.ends_with(&format!("<i class=\"cut\">… {left} more characters</i>")),
                "{}",
                &s[s.len() - 80..]
            );
            assert_eq!(s.matches(MARK).count(), 1);
            assert!(s.contains(&format!("title=\"first difference: character {at}\">{c}</mark>")));
            // The window holds SHOWN_CHARS characters of the value.
            assert_eq!(shown_text(s).chars().count(), SHOWN_CHARS);
        }
    }

    #[test]
    fn a_difference_near_the_start_shows_the_start() {
        let (x, y) = (format!("X{}", "a".repeat(9_000)), format!("Y{}", "a".repeat(9_000)));
        let (a, _) = marked_pair(&x, &y);
        assert!(a.starts_with(MARK), "{}", &a[..80]);
        assert!(a.ends_with("… 3001 more characters</i>"), "{}", &a[a.len() - 80..]);
    }

    #[test]
    fn window_keeps_short_values_and_cuts_long_ones() {
        let short: Vec<char> = "héllo".chars().collect();
        assert_eq!(window(&short, 0), "héllo");
        assert_eq!(window(&short, 1), "éllo");
        let long: Vec<char> = "é".repeat(SHOWN_CHARS + 5).chars().collect();
        let w = window(&long, 0);
        assert!(w.ends_with("… (5 more characters)"), "{}", &w[w.len() - 40..]);
        assert_eq!(w.chars().filter(|c| *c == 'é').count(), SHOWN_CHARS);
    }
}
