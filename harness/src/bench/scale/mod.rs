//! `harness bench --scale N,N,…`: how the daemon's costs grow with the
//! work it holds (issue 45), for two binaries in one run. Two axes
//! ([`Axis`]): N live processes (`processes.rs`: spawn rate, RSS per
//! process, ping p99, stream MiB/s, with a fork/exec floor) and N idle
//! connections (`connections.rs`: RSS per connection, ping p99). Each
//! figure is defined once in `figures.rs`; this module runs the curves,
//! keeps the readings ([`Side`]) and renders them as tables and as one
//! SVG plot per figure (`svg.rs`).

mod connections;
mod figures;
mod processes;
mod svg;

use crate::dut::limits::{self, FDS_PER_PROCESS};
use crate::dut::procfs::load_average;
pub(crate) use figures::{Axis, ScaleFigure};
use std::path::{Path, PathBuf};

/// One measured value: a figure at N.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Reading {
    pub figure: ScaleFigure,
    pub n: usize,
    pub value: f64,
}

/// The readings of one binary (or of the floor), and what went wrong.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Side {
    pub label: String,
    pub readings: Vec<Reading>,
    /// Failures and shortened curves, in the words the table prints.
    pub notes: Vec<String>,
    /// The machine's 1-minute load average before and after its curves.
    pub load_average: (f64, f64),
}

impl Side {
    fn new(label: impl Into<String>) -> Side {
        Side {
            label: label.into(),
            ..Side::default()
        }
    }

    pub(crate) fn push(&mut self, figure: ScaleFigure, n: usize, value: f64) {
        self.readings.push(Reading { figure, n, value });
    }

    fn value(&self, figure: ScaleFigure, n: usize) -> Option<f64> {
        self.readings
            .iter()
            .find(|r| r.figure == figure && r.n == n)
            .map(|r| r.value)
    }

    fn has(&self, figure: ScaleFigure) -> bool {
        self.readings.iter().any(|r| r.figure == figure)
    }
}

/// What `--scale` is asked for.
#[derive(Debug, Clone)]
pub(crate) struct ScaleOptions {
    /// Live processes (the processes axis).
    pub(crate) processes: Vec<usize>,
    /// Idle connections (the connections axis).
    pub(crate) connections: Vec<usize>,
    /// Bytes of the stream beside N idle processes.
    pub(crate) stream_bytes: u64,
}

/// The curves: the floor first, then the reference and the candidate.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Scale {
    pub sides: Vec<Side>,
    /// Run-wide notes (an N shrunk to what the machine holds).
    pub notes: Vec<String>,
}

fn sorted(v: &[usize]) -> Vec<usize> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

/// Runs both axes on both binaries and the floor.
pub(crate) fn run(reference: &Path, candidate: &Path, o: &ScaleOptions) -> Scale {
    let mut notes = Vec::new();
    let mut ns = sorted(&o.processes);
    let asked = ns.last().copied().unwrap_or(0);
    let room = limits::room_for(asked, FDS_PER_PROCESS);
    if room.bound.is_some() {
        // Never a quieter run at a smaller N: the largest becomes what
        // fits, and the table says why.
        ns.retain(|&n| n < room.n);
        ns.push(room.n);
        notes.push(format!("processes: {}", room.describe(asked)));
    }
    if let Some(l) = room.fd_limit {
        notes.push(format!("daemons started with a descriptor limit of {l}"));
    }
    for n in &notes {
        eprintln!("bench --scale: {n}");
    }
    let conns = sorted(&o.connections);
    let mut sides = Vec::new();
    eprintln!("bench --scale: floor");
    let mut floor = Side::new("floor: fork/exec, 3 pipes (std Command)");
    floor.load_average.0 = load_average().unwrap_or(f64::NAN);
    // The floor holds three pipe ends per child itself.
    limits::raise_own(3 * asked as u64 + 1024);
    processes::floor(&ns, &mut floor);
    floor.load_average.1 = load_average().unwrap_or(f64::NAN);
    sides.push(floor);
    for bin in [reference, candidate] {
        eprintln!("bench --scale: {}", bin.display());
        let mut side = Side::new(bin.display().to_string());
        side.load_average.0 = load_average().unwrap_or(f64::NAN);
        if let Err(e) = processes::curve(bin, &ns, o.stream_bytes, room.fd_limit, &mut side) {
            side.notes.push(format!("processes: {e}"));
        }
        if let Err(e) = connections::curve(bin, &conns, &mut side) {
            side.notes.push(format!("connections: {e}"));
        }
        side.load_average.1 = load_average().unwrap_or(f64::NAN);
        sides.push(side);
    }
    Scale { sides, notes }
}

/// A table cell: the value with the figure's decimals, `—` where none.
fn cell(f: ScaleFigure, v: Option<f64>) -> String {
    v.map_or("—".to_string(), |v| format!("{v:.*}", f.decimals()))
}

/// One Markdown table per axis (a row per N, a column per figure and
/// side that has it), then the legend of the sides and every note.
pub(crate) fn table(s: &Scale) -> String {
    let mut out = String::new();
    let letter = |i: usize| ["floor", "A", "B", "C"].get(i).copied().unwrap_or("?");
    for axis in Axis::ALL {
        let columns: Vec<(ScaleFigure, usize)> = ScaleFigure::ALL
            .into_iter()
            .filter(|f| f.axis() == axis)
            // The floor's column only where it has readings (spawns).
            .flat_map(|f| {
                (0..s.sides.len())
                    .filter(move |&i| i > 0 || s.sides[0].has(f))
                    .map(move |i| (f, i))
            })
            .collect();
        let mut ns: Vec<usize> = s
            .sides
            .iter()
            .flat_map(|side| side.readings.iter())
            .filter(|r| r.figure.axis() == axis)
            .map(|r| r.n)
            .collect();
        ns = sorted(&ns);
        if ns.is_empty() {
            continue;
        }
        out.push_str(&format!("| {} |", axis.label()));
        for (f, i) in &columns {
            out.push_str(&format!(" {}: {} |", letter(*i), f.name()));
        }
        out.push_str(&format!("\n|{}\n", " --- |".repeat(columns.len() + 1)));
        for n in ns {
            out.push_str(&format!("| {n} |"));
            for (f, i) in &columns {
                out.push_str(&format!(" {} |", cell(*f, s.sides[*i].value(*f, n))));
            }
            out.push('\n');
        }
        out.push('\n');
    }
    for (i, side) in s.sides.iter().enumerate() {
        let (a, b) = side.load_average;
        out.push_str(&format!(
            "{}: {} (load average {a:.2} → {b:.2})\n",
            letter(i),
            side.label
        ));
        for n in &side.notes {
            out.push_str(&format!("  {}: {n}\n", letter(i)));
        }
    }
    for n in &s.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

/// Writes one SVG plot per figure into `dir` (created); returns the files.
pub(crate) fn write_plots(s: &Scale, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for f in ScaleFigure::ALL {
        let lines: Vec<svg::Line> = s
            .sides
            .iter()
            .enumerate()
            .filter(|(_, side)| side.has(f))
            .map(|(i, side)| svg::Line {
                label: &side.label,
                points: side
                    .readings
                    .iter()
                    .filter(|r| r.figure == f)
                    .map(|r| (r.n as f64, r.value))
                    .collect(),
                dashed: i == 0,
            })
            .collect();
        if lines.is_empty() {
            continue;
        }
        let title = format!(
            "{} against {} ({})",
            f.name(),
            f.axis().label(),
            if f.higher_is_better() {
                "higher is better"
            } else {
                "lower is better"
            }
        );
        let path = dir.join(f.file());
        std::fs::write(&path, svg::render(&title, f.axis().label(), f.unit(), &lines))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scale() -> Scale {
        let mut floor = Side::new("floor");
        floor.push(ScaleFigure::SpawnRate, 100, 900.0);
        floor.push(ScaleFigure::SpawnRate, 1000, 300.0);
        let mut old = Side::new("old");
        old.notes.push("connections: no banner".into());
        old.push(ScaleFigure::SpawnRate, 100, 90.0);
        let mut new = Side::new("new");
        new.push(ScaleFigure::SpawnRate, 100, 250.0);
        new.push(ScaleFigure::SpawnRate, 1000, 240.0);
        new.push(ScaleFigure::RssPerProcess, 1000, 7.04);
        new.push(ScaleFigure::RssPerConnection, 10, 6.25);
        Scale {
            sides: vec![floor, old, new],
            notes: vec!["processes: N = 4744 of 10000 asked (bounded by descriptors)".into()],
        }
    }

    #[test]
    fn the_tables_have_a_row_per_n_per_axis_and_name_every_note() {
        let t = table(&scale());
        assert!(
            t.contains("| live processes | floor: spawns/s | A: spawns/s | B: spawns/s | A: daemon KiB per process |"),
            "{t}"
        );
        assert!(t.contains("\n| 100 | 900 | 90 | 250 | — | — |"), "{t}");
        assert!(t.contains("\n| 1000 | 300 | — | 240 | — | 7.0 |"), "{t}");
        assert!(
            t.contains("| idle connections | A: daemon KiB per connection | B: daemon KiB per connection |"),
            "{t}"
        );
        assert!(t.contains("\n| 10 | — | 6.2 |"), "{t}");
        assert!(t.contains("  A: connections: no banner\n"), "{t}");
        assert!(t.contains("note: processes: N = 4744 of 10000 asked"), "{t}");
    }

    #[test]
    fn a_plot_is_written_per_figure_that_has_readings() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_plots(&scale(), dir.path()).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["spawn-rate.svg", "rss-per-process.svg", "rss-per-connection.svg"]
        );
        let spawn = std::fs::read_to_string(dir.path().join("spawn-rate.svg")).unwrap();
        assert_eq!(spawn.matches("<polyline").count(), 3, "floor, old and new");
    }
}
