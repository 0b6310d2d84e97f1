//! `harness`: the differential probe harness for remora.
//!
//! It runs scripted probes (`probes/*.probe`, see `docs/PROBES.md`) against
//! daemon binaries that share the reference command line, normalises what
//! they produce into transcripts and compares them: binary against binary
//! (`diff`), binary against committed transcripts (`check`, `diff` without
//! `--reference`), or writes transcripts (`record`). `bench` compares
//! performance; `mutant-proxy` is the wire-altering wrapper the sensitivity
//! tests use. It never links the remora crate: it only runs binaries.

mod bench;
mod bench_mem;
mod capture;
mod compare;
mod diff;
mod fixture;
mod fuzzdiff;
mod fuzzgen;
mod mutant;
mod normalize;
mod probe;
mod report;
mod runner;
mod stress;
mod transcript;

use clap::{Args, Parser, Subcommand};
use diff::{DiffOptions, Reference};
use runner::RunConfig;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "harness",
    about = "Differential probe harness: compare a remora build with the reference daemon byte for byte"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args, Clone)]
struct Common {
    /// Probe directory (default: <workspace>/probes).
    #[arg(long)]
    probes: Option<PathBuf>,
    /// Only probes whose name matches (glob with * and ?, else substring); repeatable.
    #[arg(long)]
    filter: Vec<String>,
    /// Leave out probes whose name matches (same matching as --filter);
    /// repeatable. Each left-out probe is named on stderr, never dropped silently.
    #[arg(long)]
    exclude: Vec<String>,
    /// Probes run in parallel.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Product-name rename FROM=TO applied to both sides (repeatable; default claustrum=remora, Claustrum=Remora, CLAUSTRUM=REMORA).
    #[arg(long)]
    rename: Vec<String>,
    /// Central accepted-divergence list (default: <probes>/ACCEPTED).
    #[arg(long)]
    accepted: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args, Clone)]
struct ReportArgs {
    /// Write the report as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a self-contained HTML report.
    #[arg(long)]
    html: Option<PathBuf>,
    /// List identical probes in the terminal summary too.
    #[arg(long, short)]
    verbose: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Diff a candidate binary against a reference binary (or, without
    /// --reference, against the committed transcripts).
    Diff {
        /// Reference binary; omitted: compare with --transcripts.
        #[arg(long)]
        reference: Option<PathBuf>,
        /// Candidate binary (default: <workspace>/target/release/remora, built first).
        #[arg(long)]
        candidate: Option<PathBuf>,
        /// Transcripts used when there is no --reference.
        #[arg(long)]
        transcripts: Option<PathBuf>,
        /// Run every probe N times per side; timings are medians, and
        /// differences between repeats are reported as unstable.
        #[arg(long, default_value_t = 1)]
        repeat: usize,
        /// Flag probes whose candidate/reference time ratio exceeds this.
        /// Given explicitly, flagged probes also make the exit code 1.
        #[arg(long)]
        slower_than: Option<f64>,
        /// Minimum absolute slowdown before a probe is flagged (ms).
        #[arg(long, default_value_t = 5.0)]
        min_delta_ms: f64,
        /// Do not build the default candidate.
        #[arg(long)]
        no_build: bool,
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// Diff a binary against committed transcripts (the CI mode).
    Check {
        #[arg(long)]
        binary: PathBuf,
        /// Transcript directory (default: <workspace>/corpora/transcripts).
        #[arg(long)]
        transcripts: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// Render a report saved with `diff`/`check --json` again: the
    /// terminal summary, and the HTML page with --html. Exits 0 once it is
    /// written, whatever the report says.
    Report {
        /// The JSON report.
        json: PathBuf,
        /// Write the self-contained HTML page here.
        #[arg(long)]
        html: Option<PathBuf>,
        /// List identical probes in the terminal summary too.
        #[arg(long, short)]
        verbose: bool,
    },
    /// Write normalised transcripts of a binary, one file per probe.
    Record {
        #[arg(long)]
        binary: PathBuf,
        /// Output directory (default: <workspace>/corpora/transcripts).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Do not write transcripts containing this text (e.g. "is not implemented yet").
        #[arg(long)]
        skip_if: Vec<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Performance comparison (each item fails soft).
    Bench {
        #[arg(long)]
        reference: PathBuf,
        #[arg(long)]
        candidate: PathBuf,
        /// Bytes the stream bench child writes.
        #[arg(long, default_value_t = 268_435_456)]
        stream_bytes: u64,
        #[arg(long, default_value_t = 2000)]
        pings: usize,
        #[arg(long, default_value_t = 20000)]
        pipelined: usize,
        #[arg(long, default_value_t = 30)]
        spawns: usize,
        /// Exited processes with fresh ids (memory once they are dropped).
        #[arg(long, default_value_t = 3000)]
        exited: usize,
        /// MiB of stdin sent to a child that never reads.
        #[arg(long, default_value_t = 64)]
        stdin_mib: u64,
        /// Connections flooding stdin at once, and MiB each sends.
        #[arg(long, default_value_t = 64)]
        flood_conns: usize,
        #[arg(long, default_value_t = 64)]
        flood_mib: u64,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Record a real client's session through a relay and write it as a
    /// probe (token → $TOKEN, process ids → p1…, paths → $ROOT/$SOCKET/$HOME).
    Capture {
        /// The daemon's socket the relay forwards to.
        #[arg(long)]
        socket: PathBuf,
        /// Listen on this socket (otherwise: one connection on stdin/stdout, like -bridge).
        #[arg(long)]
        listen: Option<PathBuf>,
        /// The probe file to write (on SIGINT/SIGTERM, or when stdin ends).
        #[arg(long)]
        out: PathBuf,
        /// The daemon's token file (its token becomes $TOKEN).
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// The directory the session works in (becomes $ROOT).
        #[arg(long)]
        root: Option<PathBuf>,
        /// Lines longer than this many bytes are kept as fixture files.
        #[arg(long, default_value_t = 4096)]
        large: usize,
    },
    /// Differential fuzzing: generate request sequences from a seed, run
    /// each against both binaries as `diff` does, shrink every difference
    /// to a minimal probe and write it to --out.
    FuzzDiff {
        #[arg(long)]
        reference: PathBuf,
        #[arg(long)]
        candidate: PathBuf,
        /// Seed of the case generator (default: derived from the clock, printed).
        #[arg(long)]
        seed: Option<u64>,
        /// Number of cases (default 100 unless --minutes is given).
        #[arg(long, conflicts_with = "minutes")]
        iterations: Option<u64>,
        /// Run cases until this many minutes have passed.
        #[arg(long)]
        minutes: Option<f64>,
        /// Where minimal differing probes are written (default: <workspace>/corpora/fuzz-diffs).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Cases run in parallel.
        #[arg(long, default_value_t = 2)]
        jobs: usize,
        /// Maximum case runs spent shrinking one difference.
        #[arg(long, default_value_t = 150)]
        shrink_budget: usize,
        /// Product-name rename FROM=TO (as for diff).
        #[arg(long)]
        rename: Vec<String>,
        /// Accepted-divergence list (default: <workspace>/probes/ACCEPTED).
        #[arg(long)]
        accepted: Option<PathBuf>,
        /// No progress lines on stderr.
        #[arg(long)]
        quiet: bool,
        /// Print the generated cases (as probe text) instead of running them.
        #[arg(long)]
        print: bool,
        /// Run exactly these case numbers, in order, on one pair of daemons
        /// (replays a state-dependent difference), e.g. --cases 3,17,42.
        #[arg(long, value_delimiter = ',', conflicts_with_all = ["iterations", "minutes"])]
        cases: Option<Vec<u64>>,
        /// Restart a worker's daemons after this many cases.
        #[arg(long, default_value_t = 200)]
        restart_every: usize,
        /// Start fresh daemons for every case (slow; no live pairs).
        #[arg(long)]
        fresh: bool,
        /// Write every (method, reply count, outcome) reached to this file.
        #[arg(long)]
        coverage: Option<PathBuf>,
    },
    /// Load, fault and soak scenarios against one or two binaries
    /// (docs/STRESS.md): invariants fail the run, figures are compared.
    Stress {
        /// Reference binary; omitted: only the candidate runs.
        #[arg(long)]
        reference: Option<PathBuf>,
        #[arg(long)]
        candidate: PathBuf,
        /// Multiplies every count and size (0.1 for CI).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Only this scenario (repeatable).
        #[arg(long)]
        only: Vec<String>,
        /// Run the soak scenario for this many minutes.
        #[arg(long)]
        soak: Option<f64>,
        /// Fail when a figure is this many times worse than the reference.
        #[arg(long)]
        slower_than: Option<f64>,
        #[arg(long)]
        json: Option<PathBuf>,
        #[arg(long)]
        html: Option<PathBuf>,
        /// No progress lines on stderr.
        #[arg(long)]
        quiet: bool,
    },
    /// A client process of `stress` (re-executed by the scenarios).
    #[command(hide = true)]
    StressClient {
        #[arg(long)]
        mode: String,
        #[arg(long)]
        socket: Option<PathBuf>,
        #[arg(long, default_value = "")]
        id: String,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long, default_value_t = 0)]
        bytes: u64,
        #[arg(long, default_value_t = 0)]
        linger_ms: u64,
        #[arg(long, default_value = "{}")]
        env: String,
    },
    /// List the probes.
    List {
        #[command(flatten)]
        common: Common,
    },
    /// Run a binary behind a wire-altering proxy (for sensitivity tests).
    MutantProxy {
        #[arg(long, value_enum)]
        kind: mutant::Kind,
        /// The real binary and its arguments.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
}

/// The workspace root (this crate's parent directory).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn matches_filter(name: &str, filters: &[String]) -> bool {
    filters.is_empty()
        || filters.iter().any(|f| {
            if f.contains('*') || f.contains('?') {
                probe::glob_match(f, name)
            } else {
                name.contains(f.as_str())
            }
        })
}

fn load_probes(c: &Common) -> Result<(Vec<probe::Probe>, PathBuf), String> {
    let dir = c.probes.clone().unwrap_or_else(|| workspace().join("probes"));
    let all = probe::load_dir(&dir).map_err(|e| e.to_string())?;
    let (excluded, probes): (Vec<_>, Vec<_>) = all
        .into_iter()
        .filter(|p| matches_filter(&p.name, &c.filter))
        .partition(|p| !c.exclude.is_empty() && matches_filter(&p.name, &c.exclude));
    for p in &excluded {
        eprintln!("excluded: {} (--exclude)", p.name);
    }
    if probes.is_empty() {
        return Err(format!("no probes selected in {}", dir.display()));
    }
    Ok((probes, dir))
}

fn absolute(p: &Path) -> Result<PathBuf, String> {
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| e.to_string())?.join(p)
    };
    if !p.exists() {
        return Err(format!("binary {} does not exist", p.display()));
    }
    Ok(p)
}

fn run_cfg(bin: &Path, c: &Common) -> Result<RunConfig, String> {
    Ok(RunConfig {
        bin: absolute(bin)?,
        renames: normalize::parse_renames(&c.rename)?,
    })
}

fn default_candidate(no_build: bool) -> Result<PathBuf, String> {
    let ws = workspace();
    if !no_build {
        eprintln!("harness: building the candidate (cargo build --release -p remora)…");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = std::process::Command::new(cargo)
            .args(["build", "--release", "-p", "remora"])
            .current_dir(&ws)
            .status()
            .map_err(|e| format!("cargo: {e}"))?;
        if !st.success() {
            return Err("building remora failed".into());
        }
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| ws.join("target"));
    Ok(target.join("release").join("remora"))
}

fn write_reports(rep: &report::Report, r: &ReportArgs) -> Result<(), String> {
    print!("{}", report::terminal(rep, r.verbose));
    if let Some(p) = &r.json {
        let j = serde_json::to_string_pretty(rep).map_err(|e| e.to_string())?;
        std::fs::write(p, j).map_err(|e| format!("{}: {e}", p.display()))?;
        eprintln!("harness: JSON report written to {}", p.display());
    }
    if let Some(p) = &r.html {
        std::fs::write(p, report::html(rep)).map_err(|e| format!("{}: {e}", p.display()))?;
        eprintln!("harness: HTML report written to {}", p.display());
    }
    Ok(())
}

fn real_main() -> Result<ExitCode, String> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Stress {
            reference,
            candidate,
            scale,
            only,
            soak,
            slower_than,
            json,
            html,
            quiet,
        } => {
            let o = stress::Options {
                reference: reference.as_deref().map(absolute).transpose()?,
                candidate: absolute(&candidate)?,
                ctx: stress::Ctx {
                    scale,
                    harness: std::env::current_exe().map_err(|e| e.to_string())?,
                    soak_minutes: soak.unwrap_or(0.0),
                },
                only,
                slower_than,
                quiet,
            };
            let rep = stress::run(&o)?;
            print!("{}", stress::report::terminal(&rep));
            if let Some(p) = &json {
                let j = serde_json::to_string_pretty(&rep).map_err(|e| e.to_string())?;
                std::fs::write(p, j).map_err(|e| format!("{}: {e}", p.display()))?;
                eprintln!("harness: JSON report written to {}", p.display());
            }
            if let Some(p) = &html {
                std::fs::write(p, stress::report::html(&rep)).map_err(|e| format!("{}: {e}", p.display()))?;
                eprintln!("harness: HTML report written to {}", p.display());
            }
            let slow_fail = slower_than.is_some() && rep.flagged();
            Ok(if rep.broken() || slow_fail {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Cmd::StressClient {
            mode,
            socket,
            id,
            seed,
            bytes,
            linger_ms,
            env,
        } => {
            let a = stress::client::Args {
                mode: &mode,
                socket: socket.as_deref(),
                id: &id,
                seed,
                bytes,
                linger_ms,
                env: &env,
            };
            Ok(ExitCode::from(stress::client::main(&a).clamp(0, 255) as u8))
        }
        Cmd::MutantProxy { kind, cmd } => Ok(ExitCode::from(mutant::main(kind, &cmd).clamp(0, 255) as u8)),
        Cmd::Capture {
            socket,
            listen,
            out,
            token_file,
            root,
            large,
        } => {
            let token = match &token_file {
                Some(f) => {
                    let mut t = std::fs::read(f).map_err(|e| format!("{}: {e}", f.display()))?;
                    if t.ends_with(b"\n") {
                        t.pop();
                        if t.ends_with(b"\r") {
                            t.pop();
                        }
                    }
                    t
                }
                None => std::env::var("CLAUDE_RPC_TOKEN").unwrap_or_default().into_bytes(),
            };
            let o = capture::CaptureOptions {
                socket: absolute(&socket)?,
                listen,
                out,
                token,
                root: root.map(|r| absolute(&r)).transpose()?,
                home: std::env::var_os("HOME").map(PathBuf::from),
                large,
            };
            let p = capture::run(&o)?;
            eprintln!("harness capture: wrote {}", p.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::FuzzDiff {
            reference,
            candidate,
            seed,
            iterations,
            minutes,
            out,
            jobs,
            shrink_budget,
            rename,
            accepted,
            quiet,
            print,
            cases,
            restart_every,
            fresh,
            coverage,
        } => {
            if print {
                let seed = seed.unwrap_or(0);
                for n in 0..iterations.unwrap_or(10) {
                    let c = fuzzgen::generate(seed, n);
                    println!("### {}.probe\n{}", c.name(), c.render(&[]));
                }
                return Ok(ExitCode::SUCCESS);
            }
            let renames = normalize::parse_renames(&rename)?;
            let cfg = |b: &Path| -> Result<RunConfig, String> {
                Ok(RunConfig {
                    bin: absolute(b)?,
                    renames: renames.clone(),
                })
            };
            let seed = seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0)
            });
            let o = fuzzdiff::FuzzOptions {
                reference: cfg(&reference)?,
                candidate: cfg(&candidate)?,
                seed,
                iterations,
                minutes,
                out: out.unwrap_or_else(|| workspace().join("corpora/fuzz-diffs")),
                jobs,
                central: compare::load_accepted(&accepted.unwrap_or_else(|| workspace().join("probes/ACCEPTED")))?,
                shrink_budget,
                quiet,
                cases,
                restart_every,
                fresh,
            };
            eprintln!("fuzz-diff: seed {seed}");
            let sm = fuzzdiff::run(&o);
            print!("{}", fuzzdiff::summary_text(seed, &sm));
            if let Some(p) = coverage {
                std::fs::write(&p, sm.coverage.full()).map_err(|e| format!("{}: {e}", p.display()))?;
            }
            Ok(if sm.differences > 0 || sm.errors > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Cmd::List { common } => {
            let (probes, _) = load_probes(&common)?;
            for p in &probes {
                println!("{:<44} {}", p.name, p.desc);
            }
            println!("{} probes", probes.len());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Diff {
            reference,
            candidate,
            transcripts,
            repeat,
            slower_than,
            min_delta_ms,
            no_build,
            common,
            report: ra,
        } => {
            let (probes, dir) = load_probes(&common)?;
            let cand = match candidate {
                Some(c) => c,
                None => default_candidate(no_build)?,
            };
            let candidate = run_cfg(&cand, &common)?;
            let reference = match reference {
                Some(r) => Reference::Binary(run_cfg(&r, &common)?),
                None => Reference::Transcripts(transcripts.unwrap_or_else(|| workspace().join("corpora/transcripts"))),
            };
            let ref_label = match &reference {
                Reference::Binary(c) => c.bin.display().to_string(),
                Reference::Transcripts(d) => format!("transcripts {}", d.display()),
            };
            let mode = if matches!(reference, Reference::Binary(_)) {
                "diff"
            } else {
                "check"
            };
            let o = DiffOptions {
                reference,
                jobs: common.jobs,
                repeat: repeat.max(1),
                slower_than: slower_than.unwrap_or(1.5),
                min_delta_us: (min_delta_ms * 1000.0) as u64,
                central: compare::load_accepted(&common.accepted.clone().unwrap_or_else(|| dir.join("ACCEPTED")))?,
                progress: !common.quiet,
                candidate: candidate.clone(),
            };
            let results = diff::diff_all(&probes, &o);
            let rep = report::Report {
                mode: mode.into(),
                reference: ref_label,
                candidate: candidate.bin.display().to_string(),
                normalisation: normalize::rules(&candidate.renames),
                slower_than: o.slower_than,
                repeat: o.repeat,
                overall_ratio: report::overall_ratio(&results),
                probes: results,
            };
            write_reports(&rep, &ra)?;
            let slow_fail = slower_than.is_some() && !rep.slow().is_empty();
            Ok(if rep.failed() || slow_fail {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Cmd::Check {
            binary,
            transcripts,
            common,
            report: ra,
        } => {
            let (probes, dir) = load_probes(&common)?;
            let candidate = run_cfg(&binary, &common)?;
            let tdir = transcripts.unwrap_or_else(|| workspace().join("corpora/transcripts"));
            let o = DiffOptions {
                reference: Reference::Transcripts(tdir.clone()),
                jobs: common.jobs,
                repeat: 1,
                slower_than: 1.5,
                min_delta_us: 0,
                central: compare::load_accepted(&common.accepted.clone().unwrap_or_else(|| dir.join("ACCEPTED")))?,
                progress: !common.quiet,
                candidate: candidate.clone(),
            };
            let results = diff::diff_all(&probes, &o);
            let rep = report::Report {
                mode: "check".into(),
                reference: format!("transcripts {}", tdir.display()),
                candidate: candidate.bin.display().to_string(),
                normalisation: normalize::rules(&candidate.renames),
                slower_than: 1.5,
                repeat: 1,
                overall_ratio: None,
                probes: results,
            };
            write_reports(&rep, &ra)?;
            Ok(if rep.failed() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Cmd::Report { json, html, verbose } => {
            let text = std::fs::read_to_string(&json).map_err(|e| format!("{}: {e}", json.display()))?;
            let rep: report::Report =
                serde_json::from_str(&text).map_err(|e| format!("{}: not a JSON report: {e}", json.display()))?;
            write_reports(
                &rep,
                &ReportArgs {
                    json: None,
                    html,
                    verbose,
                },
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Record {
            binary,
            out,
            skip_if,
            common,
        } => {
            let (probes, _) = load_probes(&common)?;
            let cfg = run_cfg(&binary, &common)?;
            let out = out.unwrap_or_else(|| workspace().join("corpora/transcripts"));
            std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            let results = diff::parallel(
                &probes,
                common.jobs,
                !common.quiet,
                |p| runner::run_probe(p, &cfg),
                |r| match r {
                    Ok(_) => "ran".into(),
                    Err(e) => format!("ERROR {e}"),
                },
            );
            let (mut written, mut skipped, mut failed, mut kept) = (0, 0, 0, 0);
            for (p, r) in probes.iter().zip(results) {
                match r {
                    Ok(t) => {
                        let text = t.to_text();
                        let path = out.join(format!("{}.txt", p.name));
                        // Expected bytes taken from the reference's own
                        // record are never replaced by remora's output.
                        if transcript::is_reference_derived(&path) {
                            kept += 1;
                            if text_entries_differ(&text, &path) {
                                eprintln!("{}: differs from its reference-derived transcript (kept)", p.name);
                                failed += 1;
                            }
                            continue;
                        }
                        if skip_if.iter().any(|s| text.contains(s.as_str())) {
                            skipped += 1;
                            let _ = std::fs::remove_file(&path);
                            continue;
                        }
                        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
                        written += 1;
                    }
                    Err(e) => {
                        eprintln!("{}: {e}", p.name);
                        failed += 1;
                    }
                }
            }
            println!(
                "recorded {written} transcript(s) in {} ({skipped} skipped, {kept} reference-derived kept, {failed} failed)",
                out.display()
            );
            Ok(if failed > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Cmd::Bench {
            reference,
            candidate,
            stream_bytes,
            pings,
            pipelined,
            spawns,
            exited,
            stdin_mib,
            flood_conns,
            flood_mib,
            json,
        } => {
            let o = bench::BenchOptions {
                stream_bytes,
                pings,
                pipelined,
                spawns,
                memory: bench_mem::MemoryOptions {
                    exited,
                    stdin_mib,
                    flood_conns,
                    flood_mib,
                },
            };
            let items = bench::run(&absolute(&reference)?, &absolute(&candidate)?, &o);
            print!("{}", bench::table(&items));
            if let Some(p) = json {
                let j = serde_json::to_string_pretty(&items).map_err(|e| e.to_string())?;
                std::fs::write(&p, j).map_err(|e| format!("{}: {e}", p.display()))?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn main() -> ExitCode {
    match real_main() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("harness: {e}");
            ExitCode::from(2)
        }
    }
}

/// Whether a freshly recorded transcript's entries differ from the ones in
/// the file at `path` (comments ignored).
fn text_entries_differ(text: &str, path: &std::path::Path) -> bool {
    let entries = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    std::fs::read_to_string(path).map_or(true, |old| entries(&old) != entries(text))
}
