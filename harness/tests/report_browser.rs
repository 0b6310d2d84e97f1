//! The HTML report as a person sees it: rendered by headless Chromium
//! (Debian's `chromium`; `.ci/run` installs it) from a real `harness diff`
//! with identical, differing, accepted and errored probes. Checks the
//! summary counts, the first differing byte marked in both columns, the
//! timing bars, the name filter (driven through the URL fragment), and
//! that the page loads nothing besides itself. On failure a screenshot and
//! the page are kept under `target/browser-artifacts/`.
//!
//! Without Chromium the test fails (set `HARNESS_SKIP_BROWSER=1` to skip
//! it on a machine that cannot install it).

mod common;

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

#[test]
fn the_html_report_renders_in_headless_chromium() {
    let Some(bin) = chromium() else {
        if std::env::var_os("HARNESS_SKIP_BROWSER").is_some() {
            eprintln!("skipped: no chromium and HARNESS_SKIP_BROWSER is set");
            return;
        }
        panic!("chromium not found: apt-get install chromium (or set HARNESS_SKIP_BROWSER=1)");
    };
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
    if !failures.is_empty() {
        let keep = common::workspace().join("target/browser-artifacts");
        std::fs::create_dir_all(&keep).unwrap();
        let shot = keep.join("report.png");
        let _ = browse(
            &bin,
            &[
                format!("--screenshot={}", shot.display()),
                "--window-size=1280,2000".into(),
                "--hide-scrollbars".into(),
            ],
            &url,
        );
        let _ = std::fs::copy(&page, keep.join("report.html"));
        panic!(
            "the report does not render as expected (screenshot: {}):\n  {}",
            shot.display(),
            failures.join("\n  ")
        );
    }
}
