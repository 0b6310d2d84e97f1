//! The HTML report as a person sees it, rendered by headless Chromium
//! (Debian's `chromium`; `.ci/run` installs it).
//!
//! - From a real `harness diff` with identical, differing, accepted and
//!   errored probes: the verdict, the counts, the filter and the first
//!   failing probe inside the first 1400×1000 viewport, the summary counts, the first differing byte marked in
//!   both columns, the timing bars, the name filter (driven through the URL
//!   fragment), and that the page loads nothing besides itself.
//! - From a generated JSON report of 3000 probes (`harness report`): the
//!   counts, that only the first few failing sections start expanded, a
//!   20 000-character line whose first difference is marked and scrolled
//!   into view, and the status checkboxes and expand/collapse buttons
//!   working — driven by the URL fragment and by a script appended to a
//!   copy of the page that clicks them, the DOM dumped after it ran.
//!
//! On failure a screenshot and the page are kept under
//! `target/browser-artifacts/`. Without Chromium the tests say that they
//! skipped, and fail instead under `REMORA_REQUIRE_ALL_TOOLS=1` (which
//! `.ci/run` sets).

use crate::common;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HARNESS_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Runs Chromium headless with a fresh profile; returns stdout.
fn browse(bin: &Path, extra: &[String], url: &str) -> Result<String, String> {
    let profile = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(bin);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        // Offline: any request the page made would go to a dead proxy.
        "--proxy-server=http://127.0.0.1:9",
        "--virtual-time-budget=5000",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(extra)
    .arg(url)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", bin.display()))?;
    let mut out = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            _ if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("chromium did not finish within 120 s".into());
            }
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    Ok(reader.join().unwrap_or_default())
}

/// The inner text of every `<mark class="fd"…>…</mark>` in `s`.
fn marks(s: &str) -> Vec<(usize, String)> {
    let mut v = Vec::new();
    let mut from = 0;
    while let Some(i) = s[from..].find("<mark class=\"fd") {
        let at = from + i;
        let open_end = at + s[at..].find('>').unwrap() + 1;
        let close = open_end + s[open_end..].find("</mark>").unwrap();
        v.push((at, s[open_end..close].to_string()));
        from = close;
    }
    v
}

/// The element (by id) as dumped: from its start tag to the next `</details>`.
fn section<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom.find(&format!("id=\"{id}\"")).unwrap_or(dom.len());
    let end = dom[start..].find("</details>").map(|e| start + e).unwrap_or(dom.len());
    &dom[start..end]
}

/// Chromium, or `None` (after saying so) when it is missing.
fn chromium_or_skip() -> Option<PathBuf> {
    let bin = chromium();
    if bin.is_none() {
        common::skip::skip(
            "no chromium, chromium-browser or google-chrome on PATH, nor HARNESS_CHROMIUM (Debian: apt-get install chromium)",
        );
    }
    bin
}

/// Panics with `failures`, if any, after keeping a screenshot of `page`
/// and the page itself as `target/browser-artifacts/<name>.{png,html}`.
fn fail_with_artifacts(bin: &Path, page: &Path, name: &str, failures: &[String]) {
    if failures.is_empty() {
        return;
    }
    let keep = common::workspace().join("target/browser-artifacts");
    std::fs::create_dir_all(&keep).unwrap();
    let shot = keep.join(format!("{name}.png"));
    let _ = browse(
        bin,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,2000".into(),
            "--hide-scrollbars".into(),
        ],
        &format!("file://{}", page.display()),
    );
    let _ = std::fs::copy(page, keep.join(format!("{name}.html")));
    panic!(
        "the report does not render as expected (screenshot: {}):\n  {}",
        shot.display(),
        failures.join("\n  ")
    );
}

#[test]
fn the_html_report_renders_in_headless_chromium() {
    let Some(bin) = chromium_or_skip() else { return };
    let dir = tempfile::tempdir().unwrap();
    let probes = dir.path().join("probes");
    std::fs::create_dir(&probes).unwrap();
    let w = |name: &str, body: &str| std::fs::write(probes.join(format!("{name}.probe")), body).unwrap();
    w("same", "desc nothing differs\ncall c1 1 server.ping\n");
    let bad_stdin = "call c1 1 process.stdin {\"id\":\"x\",\"data\":\"!!\"}\n";
    w(
        "differs",
        &format!("desc the mutant alters -32602 messages\n{bad_stdin}"),
    );
    w(
        "accepted",
        &format!("desc the same difference, accepted\naccept-next planted by the browser test\n{bad_stdin}"),
    );
    w(
        "errored",
        "desc a fixture that fails\nsh exit 3\ncall c1 1 server.ping\n",
    );
    let remora = common::remora();
    let mutant = common::mutant(dir.path(), "invalid-params");
    let page = dir.path().join("report.html");
    let out = common::run(&[
        "diff",
        "--quiet",
        "--probes",
        probes.to_str().unwrap(),
        "--reference",
        remora.to_str().unwrap(),
        "--candidate",
        mutant.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    let url = format!("file://{}", page.display());

    let mut failures: Vec<String> = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    // Nothing external is referenced at all.
    for needle in ["http://", "https://", "src=", "<link", "@import", "url("] {
        check(!html.contains(needle), format!("the page references {needle:?}"));
    }
    match browse(&bin, &["--dump-dom".into()], &url) {
        Err(e) => check(false, e),
        Ok(dom) => {
            check(dom.contains("data-ready=\"1\""), "the page's script did not run".into());
            check(
                dom.contains("data-resources=\"0\""),
                "the page loaded resources besides itself".into(),
            );
            check(
                dom.contains("4 probes: 1 identical, 1 accepted, 1 differ, 1 errors, 0 unrecorded."),
                "summary counts".into(),
            );
            let d = section(&dom, "differs");
            let m = marks(d);
            check(
                m.len() == 2,
                format!("differs: expected a marked first difference in both columns, got {m:?}"),
            );
            check(
                d.matches("data-seen=\"1\"").count() == 2,
                "differs: the marks were not both scrolled into view".into(),
            );
            if m.len() == 2 {
                check(m[0].1 != m[1].1, format!("the marked characters should differ: {m:?}"));
                // The text before each mark (within its cell) is the same.
                let before = |at: usize| {
                    let cell = d[..at].rfind("<pre>").unwrap() + 5;
                    d[cell..at].to_string()
                };
                check(before(m[0].0) == before(m[1].0), "text before the marks differs".into());
                check(
                    before(m[0].0).contains("message"),
                    format!("mark not inside the message: {}", before(m[0].0)),
                );
            }
            check(
                section(&dom, "accepted").contains("accepted: planted by the browser test"),
                "accepted reason shown".into(),
            );
            check(
                section(&dom, "errored").contains("class=\"ERROR\""),
                "error shown".into(),
            );
            check(
                !dom.contains("id=\"same\""),
                "identical probes have no transcript section".into(),
            );
            let bars_r = dom.matches("class=\"bar r\" style=\"width:").count();
            let bars_c = dom.matches("class=\"bar c\" style=\"width:").count();
            check(
                bars_r >= 3 && bars_c >= 3,
                format!("timing bars: {bars_r} reference, {bars_c} candidate"),
            );
        }
    }
    // The first screen a person sees (1400×1000) answers "did anything
    // change?": the verdict, the counts, the filter and the first probe
    // that is not identical, all inside the first viewport.
    match browse(&bin, &["--dump-dom".into(), "--window-size=1400,1000".into()], &url) {
        Err(e) => check(false, e),
        Ok(dom) => {
            check(
                dom.contains("data-first-screen=\"verdict,counts,filter,first-row\""),
                format!(
                    "first screen: {:?}",
                    tags(&dom, "<body").first().copied().unwrap_or("no body")
                ),
            );
            check(
                dom.contains("<h1 id=\"verdict\" class=\"fail\">FAIL: 1 probe(s) differ, 1 could not run</h1>"),
                "the verdict names what failed".into(),
            );
            check(
                dom.contains("<title>FAIL · harness diff: "),
                "the title says the verdict and what ran".into(),
            );
        }
    }
    // The filter, driven through the fragment: only `differs` stays visible.
    match browse(&bin, &["--dump-dom".into()], &format!("{url}#q=differs")) {
        Err(e) => check(false, e),
        Ok(dom) => {
            // The table comes first, so the first element naming a probe is its row.
            let row = |name: &str| {
                let a = dom.find(&format!("data-probe=\"{name}\""))?;
                let start = dom[..a].rfind("<tr")?;
                let end = a + dom[a..].find('>')?;
                Some(dom[start..end].to_string())
            };
            match (row("same"), row("differs")) {
                (Some(s), Some(d)) => {
                    check(s.contains("hidden"), format!("filter: `same` row still visible: {s}"));
                    check(!d.contains("hidden"), format!("filter: `differs` row hidden: {d}"));
                }
                other => check(false, format!("rows not found: {other:?}")),
            }
        }
    }
    fail_with_artifacts(&bin, &page, "report", &failures);
}

/// Start tags (up to, not including, `>`) of the elements starting with `open`.
fn tags<'a>(dom: &'a str, open: &str) -> Vec<&'a str> {
    dom.match_indices(open)
        .map(|(at, _)| &dom[at..at + dom[at..].find('>').unwrap()])
        .collect()
}

fn is_hidden(tag: &str) -> bool {
    tag.contains(" hidden")
}

fn is_open(tag: &str) -> bool {
    tag.contains(" open")
}

/// The text of `<span id="shown">`: how many table rows the filter shows.
fn shown(dom: &str) -> Option<usize> {
    let at = dom.find("<span id=\"shown\">")? + "<span id=\"shown\">".len();
    dom[at..at + dom[at..].find('<')?].parse().ok()
}

/// Probes by status in the generated report, in order.
const STATUSES: [&str; 5] = ["identical", "accepted", "differs", "error", "unrecorded"];

/// A JSON report (as `harness diff --json` writes it) of `n` probes: the
/// first, `wide`, differs at character 15 000 of a 20 000-character line;
/// the rest cycle through the statuses. Returns it with the count of each
/// status, in `STATUSES` order.
fn big_report(n: usize) -> (serde_json::Value, [usize; 5]) {
    use serde_json::json;
    let entry = |v: &str| json!({"key": "L1 c1 reply 1", "value": v});
    let diff = |r: &str, c: &str, accepted: Option<&str>| json!({"key": "L1 c1 reply 1", "reference": r, "candidate": c, "first_diff": null, "accepted": accepted});
    let mut counts = [0; 5];
    let mut probes = Vec::new();
    for i in 0..n {
        let (name, status) = if i == 0 {
            ("wide".to_string(), 2)
        } else {
            let s = match i % 10 {
                0..=5 => 0,
                6 | 7 => 2,
                8 => 1,
                _ if i % 100 == 99 => 4,
                _ => 3,
            };
            (format!("p-{i:05}"), s)
        };
        counts[status] += 1;
        let (r, c) = if i == 0 {
            let mut r = "a".repeat(20_000);
            let mut c = r.clone();
            r.replace_range(15_000..15_001, "R");
            c.replace_range(15_000..15_001, "C");
            (r, c)
        } else {
            (
                format!("{{\"id\":{i},\"result\":\"ref\"}}"),
                format!("{{\"id\":{i},\"result\":\"cand\"}}"),
            )
        };
        let (diffs, reference, candidate, error) = match status {
            0 | 4 => (vec![], vec![], vec![], None),
            1 => (
                vec![diff(&r, &c, Some("generated"))],
                vec![entry(&r)],
                vec![entry(&c)],
                None,
            ),
            2 => (vec![diff(&r, &c, None)], vec![entry(&r)], vec![entry(&c)], None),
            _ => (vec![], vec![], vec![], Some("reference: generated failure")),
        };
        probes.push(json!({
            "probe": name,
            "desc": format!("generated probe {i}"),
            "status": STATUSES[status],
            "diffs": diffs,
            "error": error,
            "reference_timing": {"median_us": 100 + i, "requests": []},
            "candidate_timing": {"median_us": 120 + i, "requests": []},
            "ratio": 1.2,
            "slow": false,
            "unstable": [],
            "reference": reference,
            "candidate": candidate,
        }));
    }
    let rep = json!({
        "mode": "diff",
        "reference": "generated-reference",
        "candidate": "generated-candidate",
        "normalisation": ["none"],
        "slower_than": 1.5,
        "repeat": 1,
        "overall_ratio": 1.2,
        "probes": probes,
    });
    (rep, counts)
}

#[test]
fn a_report_of_thousands_of_probes_stays_usable_in_headless_chromium() {
    let Some(bin) = chromium_or_skip() else { return };
    const N: usize = 3000;
    let dir = tempfile::tempdir().unwrap();
    let (rep, counts) = big_report(N);
    let json = dir.path().join("big.json");
    std::fs::write(&json, serde_json::to_string(&rep).unwrap()).unwrap();
    let page = dir.path().join("big.html");
    let out = common::run(&["report", json.to_str().unwrap(), "--html", page.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    let url = format!("file://{}", page.display());
    let [identical, accepted, differs, errors, unrecorded] = counts;
    let failing = differs + errors;
    let sections = N - identical;

    let mut failures: Vec<String> = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    // A copy of the page with a script appended after the page's own, so
    // the real controls' handlers are attached when it clicks them.
    let driven = |name: &str, script: &str| {
        let p = dir.path().join(format!("{name}.html"));
        let body = html.replacen("</body>", &format!("<script>{script}</script></body>"), 1);
        std::fs::write(&p, body).unwrap();
        format!("file://{}", p.display())
    };
    let dump = |url: &str| browse(&bin, &["--dump-dom".into()], url);

    // Thousands of rows do not push the verdict or the first failing
    // probe off the first screen.
    match browse(&bin, &["--dump-dom".into(), "--window-size=1400,1000".into()], &url) {
        Err(e) => check(false, e),
        Ok(dom) => check(
            dom.contains("data-first-screen=\"verdict,counts,filter,first-row\""),
            format!(
                "first screen: {:?}",
                tags(&dom, "<body").first().copied().unwrap_or("no body")
            ),
        ),
    }
    match dump(&url) {
        Err(e) => check(false, e),
        Ok(dom) => {
            check(dom.contains("data-ready=\"1\""), "the page's script did not run".into());
            check(
                dom.contains(&format!(
                    "{N} probes: {identical} identical, {accepted} accepted, {differs} differ, {errors} errors, {unrecorded} unrecorded."
                )),
                "summary counts".into(),
            );
            let rows = tags(&dom, "<tr data-status=");
            check(rows.len() == N, format!("{} table rows, expected {N}", rows.len()));
            check(
                rows.iter().all(|t| !is_hidden(t)) && shown(&dom) == Some(N),
                format!("every row is shown by default (shown: {:?})", shown(&dom)),
            );
            let secs = tags(&dom, "<details class=\"probe\"");
            let open = secs.iter().filter(|t| is_open(t)).count();
            check(
                secs.len() == sections,
                format!("{} sections, expected {sections}", secs.len()),
            );
            check(
                open == 10,
                format!("{open} sections expanded, expected the first 10 failing"),
            );
            check(
                dom.contains(&format!("The first 10 of {failing} failing probes are expanded")),
                "the note on collapsed sections".into(),
            );
            // The 20 000-character line: cut to a window, its first
            // difference marked on both sides and scrolled into view.
            let w = section(&dom, "wide");
            check(is_open(&w[..w.find('>').unwrap_or(0)]), "wide: not expanded".into());
            let m = marks(w);
            check(
                m.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>() == ["R", "C"],
                format!("wide: marks {m:?}"),
            );
            check(
                w.matches("data-seen=\"1\"").count() == 2,
                format!(
                    "wide: the marks are not visible in their blocks: {:?}",
                    tags(w, "<mark")
                ),
            );
            check(
                w.contains("title=\"first difference: character 15000\""),
                "wide: the mark's position".into(),
            );
            check(
                w.contains("… 13000 characters …"),
                "wide: the cut before the window".into(),
            );
            check(w.len() < 40_000, format!("wide: {} bytes shown, not cut", w.len()));
        }
    }
    // The status filter through the fragment: only errors.
    match dump(&format!("{url}#st=ERROR")) {
        Err(e) => check(false, e),
        Ok(dom) => {
            let rows = tags(&dom, "<tr data-status=");
            let wrong = rows
                .iter()
                .filter(|t| t.starts_with("<tr data-status=\"ERROR\"") == is_hidden(t))
                .count();
            check(wrong == 0, format!("#st=ERROR: {wrong} rows shown or hidden wrongly"));
            check(
                shown(&dom) == Some(errors),
                format!("#st=ERROR: shown {:?}", shown(&dom)),
            );
            check(
                tags(&dom, "<details class=\"probe\"")
                    .iter()
                    .all(|t| t.contains("data-status=\"ERROR\"") != is_hidden(t)),
                "#st=ERROR: sections".into(),
            );
        }
    }
    // A collapsed section named by the fragment opens.
    let last = format!("p-{:05}", N - 2);
    match dump(&format!("{url}#{last}")) {
        Err(e) => check(false, e),
        Ok(dom) => {
            let t = tags(&dom, &format!("<details class=\"probe\" id=\"{last}\""));
            check(
                t.len() == 1 && is_open(t[0]),
                format!("#{last}: section not opened: {t:?}"),
            );
        }
    }
    // The checkboxes and buttons, clicked: only DIFFERS left checked, then
    // expand all opens exactly the shown sections.
    let only_differs = "document.querySelectorAll('.st').forEach(function(b){if(b.value!=='DIFFERS')b.click();});";
    match dump(&driven(
        "expand",
        &format!("{only_differs}document.getElementById('expand').click();"),
    )) {
        Err(e) => check(false, e),
        Ok(dom) => {
            check(
                shown(&dom) == Some(differs),
                format!("clicked: shown {:?}", shown(&dom)),
            );
            let rows = tags(&dom, "<tr data-status=");
            check(
                rows.iter()
                    .all(|t| t.starts_with("<tr data-status=\"DIFFERS\"") != is_hidden(t)),
                "clicked: rows".into(),
            );
            let secs = tags(&dom, "<details class=\"probe\"");
            let visible: Vec<_> = secs.iter().filter(|t| !is_hidden(t)).collect();
            check(
                visible.len() == differs,
                format!("clicked: {} sections shown", visible.len()),
            );
            check(
                visible.iter().all(|t| is_open(t)),
                "expand all left a shown section collapsed".into(),
            );
            check(
                secs.iter().filter(|t| is_open(t)).count() <= differs + 10,
                "expand all opened hidden sections".into(),
            );
        }
    }
    // Collapse all closes everything; a probe's link in the table then
    // opens its section alone.
    let link = format!("p-{:05}", N - 12);
    match dump(&driven(
        "collapse",
        &format!(
            "document.getElementById('expand').click();document.getElementById('collapse').click();\
             document.body.dataset.afterCollapse=document.querySelectorAll('details.probe[open]').length;\
             document.querySelector('#probes a[href=\"#{link}\"]').click();"
        ),
    )) {
        Err(e) => check(false, e),
        Ok(dom) => {
            check(
                dom.contains("data-after-collapse=\"0\""),
                "collapse all left sections open".into(),
            );
            let open: Vec<_> = tags(&dom, "<details class=\"probe\"")
                .into_iter()
                .filter(|t| is_open(t))
                .collect();
            check(
                open.len() == 1 && open[0].contains(&format!("id=\"{link}\"")),
                format!("the link to {link} opened {open:?}"),
            );
        }
    }
    fail_with_artifacts(&bin, &page, "big-report", &failures);
}
