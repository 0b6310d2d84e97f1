//! `harness stress`: load, fault and soak scenarios run against one or two
//! daemon binaries, side by side (`docs/STRESS.md`).
//!
//! Every scenario starts a fresh daemon in a fresh directory
//! ([`daemon::Daemon`]), talks to it over its Unix socket only, is bounded
//! in count (scaled by `--scale`) and time, and kills every process it
//! started (its own children through their `Child`, the daemon's and the
//! tagged ones through a hold proven just before, never by a bare pid
//! read earlier). It records **invariants** (a broken one fails the run)
//! and **figures** (compared as candidate/reference ratios; flagged past a
//! threshold, failing only with `--slower-than`), and optionally time
//! series plotted in the HTML report.

mod burst;
mod children;
pub mod client;
mod daemon;
mod error;
mod faults;
mod fresh;
mod hostile;
mod live;
mod load;
pub mod report;
mod soak;
mod streams;
mod wire;

pub use error::Error;
use serde::Serialize;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What a scenario needs besides the binary.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub scale: f64,
    /// This harness binary, re-executed as client subprocesses and as a
    /// deterministic writer child.
    pub harness: PathBuf,
    pub soak_minutes: f64,
}

impl Ctx {
    /// `base * scale`, at least `min`.
    pub fn n(&self, base: u64, min: u64) -> u64 {
        ((base as f64 * self.scale).round() as u64).max(min)
    }
}

/// One checked property.
#[derive(Debug, Clone, Serialize)]
pub struct Invariant {
    pub name: String,
    pub holds: bool,
    pub detail: String,
}

/// One measured value.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub name: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub value: f64,
}

/// A sampled time series: `(seconds, value)`.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub name: String,
    pub unit: String,
    pub points: Vec<(f64, f64)>,
}

/// One scenario run against one binary.
#[derive(Debug, Clone, Serialize, Default)]
pub struct SideResult {
    pub seconds: f64,
    pub invariants: Vec<Invariant>,
    pub figures: Vec<Figure>,
    pub series: Vec<Series>,
}

impl SideResult {
    pub fn holds(&self) -> bool {
        self.invariants.iter().all(|i| i.holds)
    }
}

/// The recorder a scenario fills.
#[derive(Default)]
pub struct Obs {
    r: SideResult,
}

impl Obs {
    /// Records an invariant.
    pub fn check(&mut self, name: &str, holds: bool, detail: impl Into<String>) {
        self.r.invariants.push(Invariant {
            name: name.into(),
            holds,
            detail: detail.into(),
        });
    }

    /// Records "the daemon never dies" for `d`, naming the death and the
    /// log's tail when it did.
    pub fn check_alive(&mut self, d: &daemon::Daemon) {
        let alive = d.alive();
        let detail = match alive {
            true => String::new(),
            false => format!("{}; log: {}", d.describe(), d.log_tail()),
        };
        self.check("the daemon never dies", alive, detail);
    }

    /// Records an invariant from a result (Err = broken, with its text).
    pub fn check_ok(&mut self, name: &str, r: Result<String, impl Display>) {
        match r {
            Ok(d) => self.check(name, true, d),
            Err(e) => self.check(name, false, e.to_string()),
        }
    }

    pub fn figure(&mut self, name: &str, unit: &str, higher_is_better: bool, value: f64) {
        self.r.figures.push(Figure {
            name: name.into(),
            unit: unit.into(),
            higher_is_better,
            value,
        });
    }

    pub fn series(&mut self, name: &str, unit: &str, points: Vec<(f64, f64)>) {
        if !points.is_empty() {
            self.r.series.push(Series {
                name: name.into(),
                unit: unit.into(),
                points,
            });
        }
    }
}

type Body = fn(&Path, &Ctx, &mut Obs) -> Result<(), Error>;

/// A scenario of the catalogue.
pub struct Scenario {
    pub name: &'static str,
    pub desc: &'static str,
    run: Body,
}

/// The catalogue, in run order (docs/STRESS.md describes each).
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "many-connections",
            desc: "512 connections x 200 pipelined pings at once: every reply exactly once, on its own connection",
            run: load::many_connections,
        },
        Scenario {
            name: "connection-churn",
            desc: "connect/ping/close, close without sending, close mid-line: descriptors and RSS return to baseline",
            run: load::churn,
        },
        Scenario {
            name: "streaming-integrity",
            desc: "16 children writing distinct multi-MiB patterns at once: SHA-256, seqs +1, exit frame last",
            run: streams::integrity,
        },
        Scenario {
            name: "reattach-churn",
            desc: "20 reattaches at various fromSeq while a child writes 64 MiB; a final reattach from 0 is byte-exact",
            run: streams::reattach_churn,
        },
        Scenario {
            name: "stalled-reader",
            desc: "a 256 MiB writer whose spawner never reads; a second connection follows it",
            run: streams::stalled_reader,
        },
        Scenario {
            name: "killed-clients",
            desc: "client processes SIGKILLed mid-stream and mid-request: the daemon stays responsive and bounded",
            run: streams::killed_clients,
        },
        Scenario {
            name: "floods",
            desc: "64 MiB of process.stdin into a child that does not read; many connections flooding at once",
            run: load::floods,
        },
        Scenario {
            name: "process-churn",
            desc: "thousands of short processes with fresh ids: descriptors back to baseline, RSS per retained process",
            run: load::process_churn,
        },
        Scenario {
            name: "misbehaving-children",
            desc: "stdout closed early, grandchild holding the pipes, SIGTERM ignored, 200 background grandchildren",
            run: children::misbehaving,
        },
        Scenario {
            name: "daemon-faults",
            desc: "SIGKILL with children (orphans), restart on the stale socket, SIGTERM with a tree, SIGSTOP/SIGCONT",
            run: faults::daemon_faults,
        },
        Scenario {
            name: "garbage",
            desc: "random bytes, invalid UTF-8, 100k-deep nesting, 2 MiB lines, NULs, huge numbers on many connections",
            run: faults::garbage,
        },
        Scenario {
            name: "hostile-neighbours",
            desc: "silent connections past the fd limit, 1 MiB partial lines, unauthenticated garbage: the owner keeps being served",
            run: hostile::hostile_neighbours,
        },
        Scenario {
            name: "fresh-clients-under-flood",
            desc: "4 processes flooding connections at nofile 1024: at least 99% of fresh authenticated pings are answered",
            run: fresh::fresh_clients_under_flood,
        },
        Scenario {
            name: "client-after-a-burst",
            desc: "one process opens 700 silent connections at nofile 512; another's client 0.1 s later is served within 100 ms p99",
            run: burst::client_after_a_burst,
        },
        Scenario {
            name: "live-processes",
            desc: "10 000 live `sleep`s at once, all killed: every one gone, 0 zombies, a second connection's ping p99 within 10 ms throughout",
            run: live::live_processes,
        },
        Scenario {
            name: "soak",
            desc: "a steady mix of all of the above for --soak minutes: RSS, descriptors, latency over time",
            run: soak::soak,
        },
    ]
}

/// Runs one scenario against one binary; an error becomes a broken
/// `completed` invariant.
pub fn run_one(s: &Scenario, bin: &Path, ctx: &Ctx) -> SideResult {
    let t = Instant::now();
    let mut o = Obs::default();
    let r = (s.run)(bin, ctx, &mut o);
    match r {
        Ok(()) => o.check("completed", true, ""),
        Err(e) => o.check("completed", false, e.to_string()),
    }
    o.r.seconds = t.elapsed().as_secs_f64();
    o.r
}

/// Command-line options of `harness stress`.
pub struct Options {
    pub reference: Option<PathBuf>,
    pub candidate: PathBuf,
    pub ctx: Ctx,
    pub only: Vec<String>,
    pub slower_than: Option<f64>,
    pub quiet: bool,
}

/// Raises this process's soft descriptor limit to its hard limit: at scale
/// 1 `many-connections` holds two descriptors per connection (a stream
/// and its clone for reading), over a common soft limit of 1024.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: get/setrlimit with a valid, initialised struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Scenarios that run only when named with `--only`: `live-processes`
/// bounds the ping p99 by the daemon's own work per spawn and exit, which
/// a debug build (`.ci/run`'s default set) multiplies; `.ci/run` runs it
/// alone against a release daemon (docs/STRESS.md, section 15).
const OPT_IN: [&str; 1] = ["live-processes"];

/// Runs the selected scenarios, reference first, then candidate.
pub fn run(o: &Options) -> Result<report::StressReport, Error> {
    raise_fd_limit();
    let all = scenarios();
    for w in &o.only {
        if !all.iter().any(|s| s.name == w) {
            return Err(Error::UnknownScenario {
                name: w.clone(),
                known: all.iter().map(|s| s.name).collect(),
            });
        }
    }
    let selected: Vec<&Scenario> = all
        .iter()
        .filter(|s| {
            if o.only.is_empty() {
                (s.name != "soak" || o.ctx.soak_minutes > 0.0) && !OPT_IN.contains(&s.name)
            } else {
                o.only.iter().any(|w| w == s.name)
            }
        })
        .collect();
    let mut ctx = o.ctx.clone();
    if ctx.soak_minutes <= 0.0 {
        ctx.soak_minutes = 0.5;
    }
    let t0 = Instant::now();
    let mut out = Vec::new();
    for s in selected {
        let side = |bin: &Path, label: &str| {
            if !o.quiet {
                eprintln!("stress: {} on {label}…", s.name);
            }
            let r = run_one(s, bin, &ctx);
            if !o.quiet {
                eprintln!(
                    "stress: {} on {label}: {} in {:.1}s",
                    s.name,
                    if r.holds() { "ok" } else { "BROKEN" },
                    r.seconds
                );
            }
            r
        };
        let reference = o.reference.as_ref().map(|b| side(b, "reference"));
        let candidate = side(&o.candidate, "candidate");
        out.push(report::compare(s.name, s.desc, reference, candidate, o.slower_than));
        // Let the machine settle between scenarios (children reaped).
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(report::StressReport {
        mode: "stress".into(),
        reference: o.reference.as_ref().map(|p| p.display().to_string()),
        candidate: o.candidate.display().to_string(),
        scale: o.ctx.scale,
        slower_than: o.slower_than,
        seconds: t0.elapsed().as_secs_f64(),
        scenarios: out,
    })
}
