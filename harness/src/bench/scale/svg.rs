//! A minimal SVG line plot for the `--scale` curves: axes, a log-scale x
//! (N spans decades), a linear y from 0, one polyline with point markers
//! per binary and a legend. Written by hand: a few lines of markup are
//! all a plot needs, and no crate comes in for them.

use std::fmt::Write;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 400.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 40.0;
/// Room under the plot for the x labels and the legend.
const BOTTOM: f64 = 110.0;
const COLOURS: [&str; 4] = ["#1f77b4", "#d62728", "#7f7f7f", "#2ca02c"];

/// One curve: its legend label and `(N, value)` points.
pub(crate) struct Line<'a> {
    pub(crate) label: &'a str,
    pub(crate) points: Vec<(f64, f64)>,
    /// Drawn dashed (a floor, not a binary).
    pub(crate) dashed: bool,
}

/// The smallest 1, 2 or 5 × 10^k at or above `v` (1 for nothing above 0):
/// the top of the y axis.
pub(crate) fn nice_ceiling(v: f64) -> f64 {
    if v.is_nan() || v <= 0.0 {
        return 1.0;
    }
    let decade = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * decade)
        .find(|c| *c >= v * (1.0 - 1e-12))
        .unwrap_or(10.0 * decade)
}

/// The decades `[lo, hi]` (powers of ten) the x axis spans for Ns from
/// `min` to `max`; at least one decade wide.
pub(crate) fn decades(min: f64, max: f64) -> (i32, i32) {
    let lo = min.max(1.0).log10().floor() as i32;
    let hi = (max.max(1.0).log10().ceil() as i32).max(lo + 1);
    (lo, hi)
}

/// The x pixel of `n` on an axis spanning `decades`.
pub(crate) fn x_of(n: f64, (lo, hi): (i32, i32)) -> f64 {
    let t = (n.max(1.0).log10() - f64::from(lo)) / f64::from(hi - lo);
    LEFT + t * (WIDTH - LEFT - RIGHT)
}

/// The y pixel of `v` on an axis from 0 to `top`.
pub(crate) fn y_of(v: f64, top: f64) -> f64 {
    let plot = HEIGHT - TOP - BOTTOM;
    TOP + plot - (v / top).clamp(0.0, 1.0) * plot
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A tick's text: whole numbers plain, small ones with a decimal.
fn tick(v: f64) -> String {
    if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The SVG document of one figure.
pub(crate) fn render(title: &str, x_label: &str, y_label: &str, lines: &[Line]) -> String {
    let all = lines.iter().flat_map(|l| l.points.iter());
    let (min_n, max_n, max_v) = all.fold((f64::MAX, 1.0f64, 0.0f64), |(a, b, c), (n, v)| {
        (a.min(*n), b.max(*n), c.max(*v))
    });
    let span = decades(if min_n == f64::MAX { 1.0 } else { min_n }, max_n);
    let top = nice_ceiling(max_v * 1.05);
    let (x0, x1, y0, y1) = (LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    // Axes, grid and ticks.
    let _ = writeln!(s, r#"<path d="M{x0} {y0} V{y1} H{x1}" fill="none" stroke="black"/>"#);
    for d in span.0..=span.1 {
        let n = 10f64.powi(d);
        let x = x_of(n, span);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            y1 + 16.0,
            tick(n)
        );
    }
    for i in 0..=5 {
        let v = top * f64::from(i) / 5.0;
        let y = y_of(v, top);
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 - 6.0,
            y + 4.0,
            tick(v)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{} (log scale)</text>"#,
        (x0 + x1) / 2.0,
        y1 + 34.0,
        escape(x_label)
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(18 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (y0 + y1) / 2.0,
        escape(y_label)
    );
    // One polyline per curve, its points marked, and its legend entry.
    for (i, l) in lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let dash = if l.dashed { r#" stroke-dasharray="6 4""# } else { "" };
        let pts: Vec<String> = l
            .points
            .iter()
            .map(|(n, v)| format!("{:.1},{:.1}", x_of(*n, span), y_of(*v, top)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>"#,
            pts.join(" ")
        );
        for (n, v) in &l.points {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"/>"#,
                x_of(*n, span),
                y_of(*v, top)
            );
        }
        let ly = y1 + 54.0 + 16.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{x0}" y1="{ly}" x2="{}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
            x0 + 24.0,
            x0 + 30.0,
            ly + 4.0,
            escape(l.label)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_y_axis_tops_at_a_round_number_at_or_above_the_largest_value() {
        assert_eq!(nice_ceiling(7.3), 10.0);
        assert_eq!(nice_ceiling(0.42), 0.5);
        assert_eq!(nice_ceiling(1200.0), 2000.0);
        assert_eq!(nice_ceiling(200.0), 200.0);
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(f64::NAN), 1.0);
    }

    #[test]
    fn the_x_axis_is_logarithmic_over_whole_decades() {
        assert_eq!(decades(100.0, 10_000.0), (2, 4));
        assert_eq!(decades(150.0, 9_000.0), (2, 4));
        assert_eq!(decades(100.0, 100.0), (2, 3), "at least one decade");
        let span = (2, 4);
        assert_eq!(x_of(100.0, span), LEFT);
        assert_eq!(x_of(10_000.0, span), WIDTH - RIGHT);
        assert!((x_of(1_000.0, span) - (LEFT + (WIDTH - LEFT - RIGHT) / 2.0)).abs() < 1e-9);
        assert_eq!(y_of(0.0, 10.0), HEIGHT - BOTTOM);
        assert_eq!(y_of(10.0, 10.0), TOP);
    }

    #[test]
    fn a_plot_has_a_polyline_and_a_legend_entry_per_curve() {
        let lines = [
            Line {
                label: "old <a&b>",
                points: vec![(100.0, 90.0), (1000.0, 26.0), (10_000.0, 3.0)],
                dashed: false,
            },
            Line {
                label: "new",
                points: vec![(100.0, 300.0), (1000.0, 330.0)],
                dashed: false,
            },
            Line {
                label: "floor",
                points: vec![(100.0, 340.0)],
                dashed: true,
            },
        ];
        let svg = render("spawns/s", "live processes", "spawns/s", &lines);
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"), "{svg}");
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert_eq!(svg.matches("<circle").count(), 6);
        assert!(svg.contains("old &lt;a&amp;b&gt;"), "labels are escaped");
        assert!(svg.contains(r#"stroke-dasharray="6 4""#));
        // The largest value (340) puts the axis top at 500: the first
        // curve's first point sits at 90/500 of the height.
        let y = y_of(90.0, 500.0);
        assert!(svg.contains(&format!("{:.1},{y:.1}", LEFT)), "{svg}");
    }
}
