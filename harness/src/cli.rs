//! The command line: clap's description of every subcommand and its
//! arguments, and the small resolutions they share (the workspace root,
//! the probe selection, binary paths made absolute, the report writers).
//! What each subcommand does lives in `commands/`.

use crate::base::error::{At, IoAt};
use crate::runner::RunConfig;
use crate::transcript::normalize;
use crate::{probe, report};
use clap::{Args, Parser, Subcommand};
use std::fmt;
use std::path::{Path, PathBuf};

/// Why an argument does not resolve (a probe selection, a binary, a
/// rename, the candidate build) or a report cannot be written.
#[derive(Debug)]
pub(crate) enum Error {
    Probes(probe::LoadError),
    /// The selection left no probe of the directory.
    NoProbes(PathBuf),
    CurrentDir(std::io::Error),
    NoBinary(PathBuf),
    Rename(normalize::BadRename),
    /// `cargo` could not be started.
    Cargo(std::io::Error),
    BuildFailed,
    Json(serde_json::Error),
    Io(IoAt),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Probes(e) => write!(f, "{e}"),
            Error::NoProbes(dir) => write!(f, "no probes selected in {}", dir.display()),
            Error::CurrentDir(e) => write!(f, "{e}"),
            Error::NoBinary(p) => write!(f, "binary {} does not exist", p.display()),
            Error::Rename(e) => write!(f, "{e}"),
            Error::Cargo(e) => write!(f, "cargo: {e}"),
            Error::BuildFailed => f.write_str("building remora failed"),
            Error::Json(e) => write!(f, "{e}"),
            Error::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<normalize::BadRename> for Error {
    fn from(e: normalize::BadRename) -> Error {
        Error::Rename(e)
    }
}

impl From<IoAt> for Error {
    fn from(e: IoAt) -> Error {
        Error::Io(e)
    }
}

#[derive(Parser)]
#[command(
    name = "harness",
    version,
    about = "Differential probe harness: compare a remora build with the reference daemon byte for byte",
    after_help = "Without a reference binary, `diff` and `check` compare with the transcripts committed in corpora/transcripts/. \
                  bench, fuzz-diff and stress need a --reference: the reference daemon (copy it from a remote where Claude \
                  Desktop installed it) or an older remora build (git worktree add /tmp/old <tag>; cargo build --release there)."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) cmd: Cmd,
}

#[derive(Args, Clone)]
pub(crate) struct Common {
    /// Probe directory (default: <workspace>/probes).
    #[arg(long)]
    pub(crate) probes: Option<PathBuf>,
    /// Only probes whose name matches (glob with * and ?, else substring); repeatable.
    #[arg(long)]
    pub(crate) filter: Vec<String>,
    /// Leave out probes whose name matches (same matching as --filter);
    /// repeatable. Each left-out probe is named on stderr, never dropped silently.
    #[arg(long)]
    pub(crate) exclude: Vec<String>,
    /// Probes run in parallel.
    #[arg(long, default_value_t = 2)]
    pub(crate) jobs: usize,
    /// Product-name rename FROM=TO applied to both sides (repeatable; default claustrum=remora, Claustrum=Remora, CLAUSTRUM=REMORA).
    #[arg(long)]
    pub(crate) rename: Vec<String>,
    /// Central accepted-divergence list (default: <probes>/ACCEPTED).
    #[arg(long)]
    pub(crate) accepted: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long)]
    pub(crate) quiet: bool,
}

#[derive(Args, Clone)]
pub(crate) struct ReportArgs {
    /// Write the report as JSON.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Write a self-contained HTML report.
    #[arg(long)]
    pub(crate) html: Option<PathBuf>,
    /// Terminal summary in full: the normalisation rules, the identical
    /// probes and every accepted difference (by default one line each).
    #[arg(long, short)]
    pub(crate) verbose: bool,
}

#[derive(Subcommand)]
pub(crate) enum Cmd {
    /// Diff a candidate binary against a reference binary (or, without
    /// --reference, against the committed transcripts).
    Diff(DiffArgs),
    /// Diff a binary against committed transcripts (the CI mode).
    Check(CheckArgs),
    /// Render a report saved with `diff`/`check --json` again: the
    /// terminal summary, and the HTML page with --html. Exits 0 once it is
    /// written, whatever the report says.
    Report(RenderArgs),
    /// Write normalised transcripts of a binary, one file per probe.
    Record(RecordArgs),
    /// Derive reference-derived transcripts: run each probe that has a
    /// recipe (<sources>/<probe>.derive) to learn its shape, then replace
    /// every reply with the recorded frame of the recipe's source.
    Derive(DeriveArgs),
    /// Performance comparison (each item fails soft).
    Bench(BenchArgs),
    /// Record a real client's session through a relay and write it as a
    /// probe (token → $TOKEN, process ids → p1…, paths → $ROOT/$SOCKET/$HOME).
    Capture(CaptureArgs),
    /// Turn a daemon's wire log (`-wire-log`) into a probe and its
    /// transcript: replies from the log, the shape from a run of --binary.
    Import(ImportArgs),
    /// Differential fuzzing: generate request sequences from a seed, run
    /// each against both binaries as `diff` does, shrink every difference
    /// to a minimal probe and write it to --out.
    FuzzDiff(FuzzDiffArgs),
    /// Load, fault and soak scenarios against one or two binaries
    /// (docs/STRESS.md): invariants fail the run, figures are compared.
    Stress(StressArgs),
    /// A client process of `stress` (re-executed by the scenarios).
    #[command(hide = true)]
    StressClient(StressClientArgs),
    /// List the probes.
    List(ListArgs),
    /// Run a binary behind a wire-altering proxy (for sensitivity tests).
    MutantProxy(MutantProxyArgs),
}

// The arguments of `harness diff`.
#[derive(Args)]
pub(crate) struct DiffArgs {
    /// Reference binary; omitted: compare with --transcripts. Where to get
    /// one: the reference daemon from a remote where Claude Desktop
    /// installed it, or an older remora (see `harness --help`).
    #[arg(long)]
    pub(crate) reference: Option<PathBuf>,
    /// Candidate binary (default: <workspace>/target/release/remora, built first).
    #[arg(long)]
    pub(crate) candidate: Option<PathBuf>,
    /// Transcripts used when there is no --reference.
    #[arg(long)]
    pub(crate) transcripts: Option<PathBuf>,
    /// Run every probe N times per side; timings are medians, and
    /// differences between repeats are reported as unstable.
    #[arg(long, default_value_t = 1)]
    pub(crate) repeat: usize,
    /// Flag probes whose candidate/reference time ratio exceeds this.
    /// Given explicitly, flagged probes also make the exit code 1.
    #[arg(long)]
    pub(crate) slower_than: Option<f64>,
    /// Minimum absolute slowdown before a probe is flagged (ms).
    #[arg(long, default_value_t = 5.0)]
    pub(crate) min_delta_ms: f64,
    /// Do not build the default candidate.
    #[arg(long)]
    pub(crate) no_build: bool,
    #[command(flatten)]
    pub(crate) common: Common,
    #[command(flatten)]
    pub(crate) transport: TransportArgs,
    #[command(flatten)]
    pub(crate) report: ReportArgs,
}

// The arguments of `harness check`.
#[derive(Args)]
pub(crate) struct CheckArgs {
    /// The daemon binary to check (e.g. target/debug/remora).
    #[arg(long)]
    pub(crate) binary: PathBuf,
    /// Transcript directory (default: <workspace>/corpora/transcripts).
    #[arg(long)]
    pub(crate) transcripts: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) common: Common,
    #[command(flatten)]
    pub(crate) transport: TransportArgs,
    #[command(flatten)]
    pub(crate) report: ReportArgs,
}

// The arguments of `harness report`.
#[derive(Args)]
pub(crate) struct RenderArgs {
    /// The JSON report.
    pub(crate) json: PathBuf,
    /// Write the self-contained HTML page here.
    #[arg(long)]
    pub(crate) html: Option<PathBuf>,
    /// Terminal summary in full: the normalisation rules, the identical
    /// probes and every accepted difference (by default one line each).
    #[arg(long, short)]
    pub(crate) verbose: bool,
}

// The arguments of `harness record`.
#[derive(Args)]
pub(crate) struct RecordArgs {
    /// The daemon binary whose transcripts are written (e.g. target/release/remora).
    #[arg(long)]
    pub(crate) binary: PathBuf,
    /// Output directory (default: <workspace>/corpora/transcripts).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Do not write transcripts containing this text (e.g. "is not implemented yet").
    #[arg(long)]
    pub(crate) skip_if: Vec<String>,
    #[command(flatten)]
    pub(crate) common: Common,
}

// The arguments of `harness derive`.
#[derive(Args)]
pub(crate) struct DeriveArgs {
    /// The binary whose run gives the transcript's shape (remora).
    #[arg(long)]
    pub(crate) binary: PathBuf,
    /// Recipes and stored source bytes (default: <workspace>/corpora/sources).
    #[arg(long)]
    pub(crate) sources: Option<PathBuf>,
    /// Output directory (default: <workspace>/corpora/transcripts).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) common: Common,
}

// The arguments of `harness bench`.
#[derive(Args)]
pub(crate) struct BenchArgs {
    /// The binary to compare against: the reference daemon (copy it from a
    /// remote where Claude Desktop installed it: while a session runs,
    /// `ps -eo args | grep -- -serve` there shows its path) or an older
    /// remora (`git worktree add /tmp/old <tag>`, then `cargo build
    /// --release` in it: /tmp/old/target/release/remora).
    #[arg(long)]
    pub(crate) reference: PathBuf,
    /// The binary measured against it (e.g. target/release/remora).
    #[arg(long)]
    pub(crate) candidate: PathBuf,
    /// Bytes the stream bench child writes.
    #[arg(long, default_value_t = 268_435_456)]
    pub(crate) stream_bytes: u64,
    /// Sequential pings on one connection, for the round-trip figure.
    #[arg(long, default_value_t = 2000)]
    pub(crate) pings: usize,
    /// Pipelined pings in all, on one connection and then spread over 64
    /// (sized so each figure spans a few hundred milliseconds).
    #[arg(long, default_value_t = 200_000)]
    pub(crate) pipelined: usize,
    /// Processes spawned one after another, for the spawn-to-exit figure.
    #[arg(long, default_value_t = 30)]
    pub(crate) spawns: usize,
    /// Rounds, each taking every item on both binaries back to back, who
    /// goes first alternating; the table shows medians, and ratios paired
    /// over rounds of opposite order (give an even count).
    #[arg(long, default_value_t = 1)]
    pub(crate) rounds: usize,
    /// Skip the memory items (they run in the first round otherwise).
    #[arg(long)]
    pub(crate) no_memory: bool,
    /// Exited processes with fresh ids (memory once they are dropped).
    #[arg(long, default_value_t = 3000)]
    pub(crate) exited: usize,
    /// MiB of stdin sent to a child that never reads.
    #[arg(long, default_value_t = 64)]
    pub(crate) stdin_mib: u64,
    /// Connections flooding stdin at once, and MiB each sends.
    #[arg(long, default_value_t = 64)]
    pub(crate) flood_conns: usize,
    /// MiB each of the --flood-conns connections sends.
    #[arg(long, default_value_t = 64)]
    pub(crate) flood_mib: u64,
    /// Also write the figures as JSON here.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Instead of the items: the scale curves at these numbers of live
    /// processes (e.g. 100,1000,10000): spawns a second, daemon KiB per
    /// process, ping p99 and stream MiB/s (of --stream-bytes) for both
    /// binaries, and a fork/exec floor; then the connections axis
    /// (--scale-connections). A table on stdout (PERFORMANCE.md).
    #[arg(long, value_delimiter = ',')]
    pub(crate) scale: Option<Vec<usize>>,
    /// With --scale: the numbers of idle authenticated connections of the
    /// connections axis (RSS per connection, ping p99).
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000")]
    pub(crate) scale_connections: Vec<usize>,
    /// With --scale: write one SVG plot per figure into this directory.
    #[arg(long)]
    pub(crate) plots: Option<PathBuf>,
}

// The arguments of `harness capture`.
#[derive(Args)]
pub(crate) struct CaptureArgs {
    /// The daemon's socket the relay forwards to.
    #[arg(long)]
    pub(crate) socket: PathBuf,
    /// Listen on this socket (otherwise: one connection on stdin/stdout, like -bridge).
    #[arg(long)]
    pub(crate) listen: Option<PathBuf>,
    /// The probe file to write (on SIGINT/SIGTERM, or when stdin ends).
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// The daemon's token file (its token becomes $TOKEN).
    #[arg(long)]
    pub(crate) token_file: Option<PathBuf>,
    /// The directory the session works in (becomes $ROOT).
    #[arg(long)]
    pub(crate) root: Option<PathBuf>,
    /// Lines longer than this many bytes are kept as fixture files.
    #[arg(long, default_value_t = 4096)]
    pub(crate) large: usize,
}

// The arguments of `harness import`.
#[derive(Args)]
pub(crate) struct ImportArgs {
    /// The wire log a daemon wrote (`-wire-log FILE`, `wire-log` in remora.conf).
    pub(crate) log: PathBuf,
    /// The probe file to write (its stem names the transcript).
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// The binary whose run gives the transcript's shape (remora).
    #[arg(long)]
    pub(crate) binary: PathBuf,
    /// Where the transcript goes (default: <workspace>/corpora/transcripts).
    #[arg(long)]
    pub(crate) transcripts: Option<PathBuf>,
    /// The recording's working directory (becomes $ROOT).
    #[arg(long)]
    pub(crate) root: Option<PathBuf>,
    /// The recording daemon's HOME (becomes $HOME).
    #[arg(long)]
    pub(crate) home: Option<PathBuf>,
    /// The recording daemon's socket (becomes $SOCKET).
    #[arg(long)]
    pub(crate) socket: Option<PathBuf>,
    /// Rewrite FROM (a literal, e.g. a program's path on the recording
    /// machine) to TO (probe text, e.g. `$ROOT/bin/tool`) in the probe and
    /// the log's replies (repeatable; longest FROM first, before --root).
    #[arg(long)]
    pub(crate) map: Vec<String>,
    /// A file of probe lines (desc, env, fixtures the session needs) put
    /// before the session's first step.
    #[arg(long)]
    pub(crate) prelude: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) common: Common,
}

// The arguments of `harness fuzz-diff`.
#[derive(Args)]
pub(crate) struct FuzzDiffArgs {
    /// The binary to compare against: the reference daemon (copy it from a
    /// remote where Claude Desktop installed it: while a session runs,
    /// `ps -eo args | grep -- -serve` there shows its path) or an older
    /// remora (`git worktree add /tmp/old <tag>`, then `cargo build
    /// --release` in it: /tmp/old/target/release/remora).
    #[arg(long)]
    pub(crate) reference: PathBuf,
    /// The binary fuzzed against it (e.g. target/release/remora).
    #[arg(long)]
    pub(crate) candidate: PathBuf,
    /// Seed of the case generator (default: derived from the clock, printed).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Number of cases (default 100 unless --minutes is given).
    #[arg(long, conflicts_with = "minutes")]
    pub(crate) iterations: Option<u64>,
    /// Run cases until this many minutes have passed.
    #[arg(long, conflicts_with = "seconds")]
    pub(crate) minutes: Option<f64>,
    /// Run cases until this many seconds have passed.
    #[arg(long, conflicts_with = "iterations")]
    pub(crate) seconds: Option<f64>,
    /// Where differing probes are written (default: <workspace>/fuzz/artifacts/fuzz-diff,
    /// which git ignores; move one into probes/ to keep it).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Cases run in parallel.
    #[arg(long, default_value_t = 2)]
    pub(crate) jobs: usize,
    /// Maximum case runs spent shrinking one difference.
    #[arg(long, default_value_t = 150)]
    pub(crate) shrink_budget: usize,
    /// Fresh-daemon runs of a differing case before it is reported: every
    /// one differs, a difference (shrunk); some, flaky (with the rate).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) reruns: u64,
    /// Product-name rename FROM=TO (as for diff).
    #[arg(long)]
    pub(crate) rename: Vec<String>,
    /// Accepted-divergence list (default: <workspace>/probes/ACCEPTED).
    #[arg(long)]
    pub(crate) accepted: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Print the generated cases (as probe text) instead of running them.
    #[arg(long)]
    pub(crate) print: bool,
    /// Run exactly these case numbers, in order, on one pair of daemons
    /// (replays a state-dependent difference), e.g. --cases 3,17,42.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["iterations", "minutes", "seconds"])]
    pub(crate) cases: Option<Vec<u64>>,
    /// Restart a worker's daemons after this many cases.
    #[arg(long, default_value_t = 200)]
    pub(crate) restart_every: usize,
    /// Start fresh daemons for every case (slow; no live pairs).
    #[arg(long)]
    pub(crate) fresh: bool,
    /// Write every (method, reply count, outcome) reached to this file.
    #[arg(long)]
    pub(crate) coverage: Option<PathBuf>,
}

// The arguments of `harness stress`.
#[derive(Args)]
pub(crate) struct StressArgs {
    /// Reference binary; omitted: only the candidate runs (where to get
    /// one: see `harness --help`).
    #[arg(long)]
    pub(crate) reference: Option<PathBuf>,
    /// The binary under load (e.g. target/release/remora).
    #[arg(long)]
    pub(crate) candidate: PathBuf,
    /// Multiplies every count and size (0.1 for CI).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) scale: f64,
    /// Only this scenario (repeatable).
    #[arg(long)]
    pub(crate) only: Vec<String>,
    /// Run the soak scenario for this many minutes.
    #[arg(long)]
    pub(crate) soak: Option<f64>,
    /// Fail when a figure is this many times worse than the reference.
    #[arg(long)]
    pub(crate) slower_than: Option<f64>,
    /// Also write the results as JSON here.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Also write a self-contained HTML report here.
    #[arg(long)]
    pub(crate) html: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long)]
    pub(crate) quiet: bool,
}

// The arguments of `harness stress-client`.
#[derive(Args)]
pub(crate) struct StressClientArgs {
    /// `pattern` (write --bytes of the seeded pattern to stdout), `stream`
    /// (spawn a pattern child and read its frames slowly) or `request`
    /// (leave a killAndWait and half a line in flight).
    #[arg(long)]
    pub(crate) mode: String,
    /// The daemon's socket (stream, request).
    #[arg(long)]
    pub(crate) socket: Option<PathBuf>,
    /// The process id to spawn (stream, request).
    #[arg(long, default_value = "")]
    pub(crate) id: String,
    /// Seed of the byte pattern.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Bytes of pattern to write.
    #[arg(long, default_value_t = 0)]
    pub(crate) bytes: u64,
    /// How long the pattern child stays after writing (ms).
    #[arg(long, default_value_t = 0)]
    pub(crate) linger_ms: u64,
    /// The spawned child's `env` params, as a JSON object.
    #[arg(long, default_value = "{}")]
    pub(crate) env: String,
    /// `flood`: the most connections held at once (the oldest dropped).
    #[arg(long, default_value_t = 0)]
    pub(crate) hold: u64,
    /// `flood`: the pause between two connects, in microseconds.
    #[arg(long, default_value_t = 0)]
    pub(crate) pace_us: u64,
    /// `burst`: connections opened at once.
    #[arg(long, default_value_t = 0)]
    pub(crate) count: u64,
}

// The arguments of `harness list`.
#[derive(Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    pub(crate) common: Common,
}

// The arguments of `harness mutant-proxy`.
#[derive(Args)]
pub(crate) struct MutantProxyArgs {
    /// How the proxy alters what passes through.
    #[arg(long, value_enum)]
    pub(crate) kind: crate::mutant::Kind,
    /// The real binary and its arguments.
    #[arg(last = true, required = true)]
    pub(crate) cmd: Vec<String>,
}

/// The workspace root (this crate's parent directory), without `..` so
/// that reports name paths as a person would type them.
pub(crate) fn workspace() -> PathBuf {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    ws.canonicalize().unwrap_or(ws)
}

pub(crate) fn matches_filter(name: &str, filters: &[String]) -> bool {
    filters.is_empty()
        || filters.iter().any(|f| {
            if f.contains('*') || f.contains('?') {
                probe::glob_match(f, name)
            } else {
                name.contains(f.as_str())
            }
        })
}

pub(crate) fn load_probes(c: &Common) -> Result<(Vec<probe::Probe>, PathBuf), Error> {
    let dir = c.probes.clone().unwrap_or_else(|| workspace().join("probes"));
    let all = probe::load_dir(&dir).map_err(Error::Probes)?;
    let (excluded, probes): (Vec<_>, Vec<_>) = all
        .into_iter()
        .filter(|p| matches_filter(&p.name, &c.filter))
        .partition(|p| !c.exclude.is_empty() && matches_filter(&p.name, &c.exclude));
    for p in &excluded {
        eprintln!("excluded: {} (--exclude)", p.name);
    }
    if probes.is_empty() {
        return Err(Error::NoProbes(dir));
    }
    Ok((probes, dir))
}

pub(crate) fn absolute(p: &Path) -> Result<PathBuf, Error> {
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().map_err(Error::CurrentDir)?.join(p)
    };
    if !p.exists() {
        return Err(Error::NoBinary(p));
    }
    Ok(p)
}

pub(crate) fn run_cfg(bin: &Path, c: &Common) -> Result<RunConfig, Error> {
    Ok(RunConfig {
        bin: absolute(bin)?,
        renames: normalize::parse_renames(&c.rename)?,
        transport: crate::dut::Transport::Socket,
    })
}

/// How `diff` and `check` run the candidate: natively on its socket (the
/// default), every connection through its `-bridge`, or a `remora.exe`
/// under Wine. The reference binary of `diff` always runs natively.
#[derive(Args, Clone, Copy)]
pub(crate) struct TransportArgs {
    /// Dial every connection through a `<binary> -bridge -socket …` child
    /// over stdio instead of the socket (probes that need a socket of
    /// their own are skipped, each with its reason).
    #[arg(long)]
    pub(crate) via_bridge: bool,
    /// The binary is a remora.exe: run it as `wine <binary>`, served with
    /// -listen-pipe, every connection through `wine <binary> -bridge` over
    /// the pipe (WINEPREFIX from ci/wine-setup). Probes that need AF_UNIX
    /// or a POSIX-only feature are skipped, each with its reason.
    /// REMORA_WINE_TOOLS names a directory of `<tool>.exe` stand-ins for
    /// the POSIX tools probes spawn (ci/wine/posixtools, installed by
    /// ci/wine-smoke): it goes on the daemon's PATH, and the probes that
    /// spawn only those tools run.
    #[arg(long)]
    pub(crate) wine: bool,
}

impl TransportArgs {
    pub(crate) fn transport(self) -> crate::dut::Transport {
        crate::dut::Transport::from_flags(self.via_bridge, self.wine)
    }
}

/// The variables `cargo run` / `cargo test` set for the program they
/// start (this crate's manifest and package facts). A nested `cargo build`
/// must not inherit them: build scripts such as ring's rerun when one of
/// them changes (`rerun-if-env-changed=CARGO_PKG_NAME`, …), so a build from
/// inside the harness and the same build typed in a shell would each find
/// the other's ring stale and recompile ring, rustls, ureq and remora.
pub(crate) fn runner_set(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || matches!(
            name,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_MANIFEST_LINKS"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "OUT_DIR"
        )
}

/// `cargo <args>` in the workspace, in the environment a shell would give
/// it (see [`runner_set`]).
pub(crate) fn plain_cargo(args: &[&str]) -> std::process::Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(args).current_dir(workspace());
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(runner_set) {
            cmd.env_remove(name);
        }
    }
    cmd
}

pub(crate) fn default_candidate(no_build: bool) -> Result<PathBuf, Error> {
    let ws = workspace();
    if !no_build {
        eprintln!("harness: building the candidate (cargo build --release -p remora)…");
        let st = plain_cargo(&["build", "--release", "-p", "remora"])
            .status()
            .map_err(Error::Cargo)?;
        if !st.success() {
            return Err(Error::BuildFailed);
        }
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| ws.join("target"));
    Ok(target.join("release").join("remora"))
}

pub(crate) fn write_reports(rep: &report::Report, r: &ReportArgs) -> Result<(), Error> {
    print!("{}", report::terminal(rep, r.verbose));
    if let Some(p) = &r.json {
        let j = serde_json::to_string_pretty(rep).map_err(Error::Json)?;
        std::fs::write(p, j).at(p)?;
        eprintln!("harness: JSON report written to {}", p.display());
    }
    if let Some(p) = &r.html {
        std::fs::write(p, report::html(rep)).at(p)?;
        eprintln!("harness: HTML report written to {}", p.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_cargo_drops_what_cargo_run_set_for_the_harness() {
        for name in [
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_MANIFEST_DIR",
            "CARGO_BIN_NAME",
            "OUT_DIR",
        ] {
            assert!(runner_set(name), "{name}");
        }
        for name in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_JOBS",
            "PATH",
            "RUSTFLAGS",
        ] {
            assert!(!runner_set(name), "{name}");
        }
        // Under `cargo test` this process has CARGO_PKG_NAME and friends.
        let cmd = plain_cargo(&["--version"]);
        let removed: Vec<String> = cmd
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert!(removed.iter().any(|k| k == "CARGO_PKG_NAME"), "{removed:?}");
        assert!(removed.iter().any(|k| k == "CARGO_MANIFEST_DIR"), "{removed:?}");
    }
}
