//! The stress report: reference and candidate results of each scenario
//! side by side, figures as candidate/reference ratios, rendered for the
//! terminal, as JSON (serialised in field order) and as a self-contained
//! HTML page with SVG time-series plots.

use super::{Invariant, Series, SideResult};
use serde::Serialize;
use std::fmt::Write as _;

/// Ratio past which a figure is flagged when `--slower-than` is not given.
pub const DEFAULT_FLAG: f64 = 1.5;

/// The smallest absolute difference that can flag a figure, by unit:
/// below it a ratio is noise (0.25 ms vs 3 ms of one ping, 1 vs 2
/// descriptors) on a shared machine.
pub fn min_delta(unit: &str) -> f64 {
    match unit {
        "ms" => 5.0,
        "fds" | "chunks" | "processes" => 4.0,
        "KiB" => 4096.0,
        "bytes" => 4096.0,
        "%" => 5.0,
        _ => 0.0,
    }
}

/// One figure, both sides.
#[derive(Debug, Clone, Serialize)]
pub struct FigureRow {
    pub name: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub reference: Option<f64>,
    pub candidate: Option<f64>,
    /// candidate / reference.
    pub ratio: Option<f64>,
    /// How many times worse the candidate is (>1 = worse).
    pub worse_by: Option<f64>,
    pub flagged: bool,
}

/// One scenario, both sides.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub name: String,
    pub desc: String,
    /// `ok`, `broken` (an invariant failed on some side) or `flagged`.
    pub status: String,
    pub reference: Option<SideResult>,
    pub candidate: SideResult,
    pub figures: Vec<FigureRow>,
}

/// A whole `harness stress` run.
#[derive(Debug, Clone, Serialize)]
pub struct StressReport {
    pub mode: String,
    pub reference: Option<String>,
    pub candidate: String,
    pub scale: f64,
    pub slower_than: Option<f64>,
    pub seconds: f64,
    pub scenarios: Vec<ScenarioResult>,
}

impl StressReport {
    pub fn broken(&self) -> bool {
        self.scenarios.iter().any(|s| s.status == "broken")
    }

    pub fn flagged(&self) -> bool {
        self.scenarios.iter().any(|s| s.figures.iter().any(|f| f.flagged))
    }
}

/// Pairs the two sides of one scenario.
pub fn compare(
    name: &str,
    desc: &str,
    reference: Option<SideResult>,
    candidate: SideResult,
    slower_than: Option<f64>,
) -> ScenarioResult {
    let limit = slower_than.unwrap_or(DEFAULT_FLAG);
    let mut figures: Vec<FigureRow> = Vec::new();
    let mut add = |f: &super::Figure, is_ref: bool| {
        let row = match figures.iter_mut().position(|r| r.name == f.name) {
            Some(i) => &mut figures[i],
            None => {
                figures.push(FigureRow {
                    name: f.name.clone(),
                    unit: f.unit.clone(),
                    higher_is_better: f.higher_is_better,
                    reference: None,
                    candidate: None,
                    ratio: None,
                    worse_by: None,
                    flagged: false,
                });
                figures.last_mut().expect("pushed")
            }
        };
        if is_ref {
            row.reference = Some(f.value);
        } else {
            row.candidate = Some(f.value);
        }
    };
    for f in reference.iter().flat_map(|r| &r.figures) {
        add(f, true);
    }
    for f in &candidate.figures {
        add(f, false);
    }
    for r in &mut figures {
        if let (Some(a), Some(b)) = (r.reference, r.candidate) {
            if a > 0.0 && b > 0.0 {
                r.ratio = Some(b / a);
                let worse = if r.higher_is_better { a / b } else { b / a };
                r.worse_by = Some(worse);
                r.flagged = worse > limit && (b - a).abs() >= min_delta(&r.unit);
            }
        }
    }
    let broken = !candidate.holds() || reference.as_ref().is_some_and(|r| !r.holds());
    let status = if broken {
        "broken"
    } else if figures.iter().any(|f| f.flagged) {
        "flagged"
    } else {
        "ok"
    };
    ScenarioResult {
        name: name.into(),
        desc: desc.into(),
        status: status.into(),
        reference,
        candidate,
        figures,
    }
}

fn fmt_v(v: Option<f64>, unit: &str) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.abs() >= 100.0 || v == v.trunc() => format!("{v:.0} {unit}"),
        Some(v) => format!("{v:.2} {unit}"),
    }
}

fn broken_lines(o: &mut String, side: &str, r: &SideResult) {
    for i in r.invariants.iter().filter(|i| !i.holds) {
        let _ = writeln!(o, "    BROKEN on {side}: {}: {}", i.name, i.detail);
    }
}

/// The terminal summary.
pub fn terminal(rep: &StressReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\n== stress ({} vs {}), scale {}",
        rep.reference.as_deref().unwrap_or("no reference"),
        rep.candidate,
        rep.scale
    );
    for s in &rep.scenarios {
        let secs = |r: &Option<SideResult>| r.as_ref().map(|r| format!("{:.1}s", r.seconds)).unwrap_or("-".into());
        let _ = writeln!(
            o,
            "\n{:<24} {:<8} ref {:>7}  cand {:>7}",
            s.name,
            s.status.to_uppercase(),
            secs(&s.reference),
            format!("{:.1}s", s.candidate.seconds)
        );
        if let Some(r) = &s.reference {
            broken_lines(&mut o, "reference", r);
        }
        broken_lines(&mut o, "candidate", &s.candidate);
        for f in &s.figures {
            let _ = writeln!(
                o,
                "    {:<46} {:>14} {:>14} {:>7}{}",
                f.name,
                fmt_v(f.reference, &f.unit),
                fmt_v(f.candidate, &f.unit),
                f.ratio.map(|r| format!("{r:.2}")).unwrap_or_else(|| "-".into()),
                if f.flagged { "  FLAGGED" } else { "" }
            );
        }
    }
    let n = |st: &str| rep.scenarios.iter().filter(|s| s.status == st).count();
    let _ = writeln!(
        o,
        "\n{} scenario(s) in {:.1}s: {} ok, {} flagged, {} broken (figures: reference, candidate, ratio = candidate/reference; flagged when {:.2}x worse)",
        rep.scenarios.len(),
        rep.seconds,
        n("ok"),
        n("flagged"),
        n("broken"),
        rep.slower_than.unwrap_or(DEFAULT_FLAG)
    );
    o
}

fn h(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An SVG line plot of the same series on both sides.
fn plot(name: &str, unit: &str, r: Option<&Series>, c: Option<&Series>) -> String {
    let (w, ht, pad) = (560.0, 180.0, 36.0);
    let pts = r.iter().chain(c.iter()).flat_map(|s| s.points.iter());
    let (mut xmax, mut ymax, mut ymin) = (0.0f64, 0.0f64, f64::MAX);
    for (x, y) in pts {
        xmax = xmax.max(*x);
        ymax = ymax.max(*y);
        ymin = ymin.min(*y);
    }
    if ymin == f64::MAX {
        return String::new();
    }
    let ymin = ymin.min(0.0);
    let (xmax, yspan) = (xmax.max(1e-9), (ymax - ymin).max(1e-9));
    let mut o = format!(
        "<figure><figcaption>{} ({})</figcaption><svg width=\"{w}\" height=\"{ht}\" viewBox=\"0 0 {w} {ht}\">\
         <rect x=\"{pad}\" y=\"4\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#ccc\"/>\
         <text x=\"2\" y=\"12\" font-size=\"10\">{ymax:.1}</text><text x=\"2\" y=\"{}\" font-size=\"10\">{ymin:.1}</text>\
         <text x=\"{}\" y=\"{}\" font-size=\"10\">{xmax:.1}s</text>",
        h(name),
        h(unit),
        w - pad - 4.0,
        ht - pad,
        ht - pad + 4.0,
        w - 40.0,
        ht - pad + 16.0
    );
    for (s, color) in [(r, "#69c"), (c, "#c63")] {
        let Some(s) = s else { continue };
        let p: Vec<String> = s
            .points
            .iter()
            .map(|(x, y)| {
                format!(
                    "{:.1},{:.1}",
                    pad + (w - pad - 4.0) * x / xmax,
                    4.0 + (ht - pad) * (1.0 - (y - ymin) / yspan)
                )
            })
            .collect();
        let _ = write!(
            o,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>",
            p.join(" ")
        );
    }
    o.push_str("</svg></figure>");
    o
}

fn invariant_rows(o: &mut String, r: Option<&SideResult>, c: &SideResult) {
    let mut names: Vec<&str> = Vec::new();
    for i in r.iter().flat_map(|r| &r.invariants).chain(&c.invariants) {
        if !names.contains(&i.name.as_str()) {
            names.push(&i.name);
        }
    }
    let cell = |v: Option<&Invariant>| match v {
        None => "<td>-</td>".to_string(),
        Some(i) => format!(
            "<td class=\"{}\">{}{}</td>",
            if i.holds { "ok" } else { "broken" },
            if i.holds { "holds" } else { "BROKEN" },
            if i.detail.is_empty() {
                String::new()
            } else {
                format!("<br><small>{}</small>", h(&i.detail))
            }
        ),
    };
    for n in names {
        fn find<'a>(s: &'a SideResult, n: &str) -> Option<&'a Invariant> {
            s.invariants.iter().find(|i| i.name == n)
        }
        let _ = write!(
            o,
            "<tr><td>{}</td>{}{}</tr>",
            h(n),
            cell(r.and_then(|r| find(r, n))),
            cell(find(c, n))
        );
    }
}

/// The self-contained HTML page.
pub fn html(rep: &StressReport) -> String {
    let mut o = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>harness stress</title><style>\
         body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;margin:.4em 0}\
         td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}\
         .ok{color:#2a7}.flagged{color:#b80}.broken{color:#c22;font-weight:bold}\
         figure{display:inline-block;margin:.4em}figcaption{font-size:12px}\
         .legend span{display:inline-block;width:14px;height:4px;margin:0 4px 2px 8px}</style></head><body>",
    );
    let _ = write!(
        o,
        "<h1>harness stress</h1><p>reference <code>{}</code> · candidate <code>{}</code> · scale {} · {:.1}s</p>\
         <p class=\"legend\">plots:<span style=\"background:#69c\"></span>reference<span style=\"background:#c63\"></span>candidate</p>",
        h(rep.reference.as_deref().unwrap_or("(none)")),
        h(&rep.candidate),
        rep.scale,
        rep.seconds
    );
    o.push_str("<table><tr><th>scenario</th><th>status</th><th>ref s</th><th>cand s</th><th>description</th></tr>");
    for s in &rep.scenarios {
        let _ = write!(
            o,
            "<tr><td><a href=\"#{0}\">{0}</a></td><td class=\"{1}\">{1}</td><td>{2}</td><td>{3:.1}</td><td>{4}</td></tr>",
            h(&s.name),
            s.status,
            s.reference.as_ref().map(|r| format!("{:.1}", r.seconds)).unwrap_or_default(),
            s.candidate.seconds,
            h(&s.desc)
        );
    }
    o.push_str("</table>");
    for s in &rep.scenarios {
        let _ = write!(
            o,
            "<h2 id=\"{0}\">{0} <span class=\"{1}\">{1}</span></h2><p>{2}</p>",
            h(&s.name),
            s.status,
            h(&s.desc)
        );
        o.push_str("<table><tr><th>invariant</th><th>reference</th><th>candidate</th></tr>");
        invariant_rows(&mut o, s.reference.as_ref(), &s.candidate);
        o.push_str("</table><table><tr><th>figure</th><th>reference</th><th>candidate</th><th>ratio</th></tr>");
        for f in &s.figures {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
                h(&f.name),
                h(&fmt_v(f.reference, &f.unit)),
                h(&fmt_v(f.candidate, &f.unit)),
                if f.flagged { "flagged" } else { "" },
                f.ratio.map(|r| format!("{r:.2}")).unwrap_or_else(|| "-".into())
            );
        }
        o.push_str("</table>");
        let mut names: Vec<(&str, &str)> = Vec::new();
        for x in s.reference.iter().flat_map(|r| &r.series).chain(&s.candidate.series) {
            if !names.iter().any(|(n, _)| *n == x.name) {
                names.push((&x.name, &x.unit));
            }
        }
        for (n, u) in names {
            let r = s.reference.as_ref().and_then(|r| r.series.iter().find(|x| x.name == n));
            let c = s.candidate.series.iter().find(|x| x.name == n);
            o.push_str(&plot(n, u, r, c));
        }
    }
    o.push_str("</body></html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stress::Figure;

    fn side(v: f64, holds: bool) -> SideResult {
        SideResult {
            seconds: 1.0,
            invariants: vec![Invariant {
                name: "x".into(),
                holds,
                detail: String::new(),
            }],
            figures: vec![
                Figure {
                    name: "req/s".into(),
                    unit: "req/s".into(),
                    higher_is_better: true,
                    value: v,
                },
                Figure {
                    name: "hwm".into(),
                    unit: "KiB".into(),
                    higher_is_better: false,
                    value: v * 100.0,
                },
                Figure {
                    name: "fresh ping".into(),
                    unit: "ms".into(),
                    higher_is_better: false,
                    value: 100.0 / v,
                },
            ],
            series: vec![],
        }
    }

    #[test]
    fn ratios_flags_and_status() {
        let s = compare("n", "d", Some(side(100.0, true)), side(50.0, true), None);
        assert_eq!(s.status, "flagged");
        assert_eq!(s.figures[0].ratio, Some(0.5));
        assert!(s.figures[0].flagged, "half the throughput is 2x worse");
        assert!(!s.figures[1].flagged, "half the memory is better");
        assert!(!s.figures[2].flagged, "1 ms -> 2 ms is below the noise floor");
        let s = compare("n", "d", Some(side(100.0, true)), side(100.0, false), None);
        assert_eq!(s.status, "broken");
        let s = compare("n", "d", None, side(100.0, true), None);
        assert_eq!(s.status, "ok");
        assert!(html(&StressReport {
            mode: "stress".into(),
            reference: None,
            candidate: "c".into(),
            scale: 1.0,
            slower_than: None,
            seconds: 1.0,
            scenarios: vec![s],
        })
        .contains("<h2 id=\"n\">"));
    }
}

#[cfg(test)]
mod plot_tests {
    use super::*;

    fn series(name: &str, points: &[(f64, f64)]) -> Series {
        Series {
            name: name.into(),
            unit: "KiB".into(),
            points: points.to_vec(),
        }
    }

    /// The points of each `<polyline>`, in page coordinates.
    fn polylines(svg: &str) -> Vec<Vec<(f64, f64)>> {
        svg.split("points=\"")
            .skip(1)
            .map(|rest| {
                rest[..rest.find('"').unwrap()]
                    .split(' ')
                    .map(|p| {
                        let (x, y) = p.split_once(',').unwrap();
                        (x.parse().unwrap(), y.parse().unwrap())
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_plot_draws_one_line_per_side_scaled_into_the_frame() {
        let r = series("rss", &[(0.0, 1000.0), (5.0, 2000.0), (10.0, 1500.0)]);
        let c = series("rss", &[(0.0, 1000.0), (10.0, 4000.0)]);
        let svg = plot("rss", "KiB", Some(&r), Some(&c));
        assert!(svg.starts_with("<figure><figcaption>rss (KiB)</figcaption><svg"));
        let lines = polylines(&svg);
        assert_eq!(lines.len(), 2, "reference and candidate");
        assert_eq!((lines[0].len(), lines[1].len()), (3, 2));
        let (w, ht, pad) = (560.0, 180.0, 36.0);
        for &(x, y) in lines.iter().flatten() {
            assert!((pad..=w - 4.0).contains(&x), "x {x} inside the frame");
            assert!((4.0..=4.0 + ht - pad).contains(&y), "y {y} inside the frame");
        }
        // The largest value is drawn at the top, time runs left to right.
        assert_eq!(lines[1][1], (w - 4.0, 4.0));
        assert!(lines[0][0].0 < lines[0][1].0 && lines[0][1].0 < lines[0][2].0);
        assert!(svg.contains(">4000.0<"), "the axis names the maximum");
    }

    #[test]
    fn a_plot_without_points_is_left_out() {
        assert_eq!(plot("rss", "KiB", None, Some(&series("rss", &[]))), "");
    }
}
