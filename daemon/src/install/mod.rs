//! `-install`: ensure the pinned agent CLI is present under `-cli-dir`,
//! then print one `__INSTALL_RESULT__{json}` line. Always exits 0.
//!
//! The steps, each in its own submodule:
//!
//! 1. validate the flags (a version never escapes `-cli-dir`; neither the
//!    CLI path nor `-cli-dir` is or contains the user's home directory,
//!    [`crate::base::homeguard`]) and refuse a `-cli-dir` another user
//!    could change ([`trust`]);
//!    before the directory is first needed, move aside whatever
//!    non-directory an older protocol version left at `-cli-dir`;
//! 2. sweep temporaries left by a killed earlier run ([`stage`]);
//! 3. keep `<cli-dir>/<cli-version>` if it runs `--version` ([`probe`]):
//!    a cache hit, which prunes nothing (nor does a stopped run);
//! 4. otherwise acquire the zstd blob — the local `-cli-zst` first, else
//!    `-cli-url` ([`fetch`]) — verify its SHA-256, decompress it streaming
//!    into a temporary beside the final path, check that runs, and rename it
//!    into place ([`stage`]);
//! 5. prune `-cli-dir` to the `-cli-keep` newest files ([`prune`]), after
//!    an install only.
//!
//! A build with `Switch::CliRunBounds` bounds the direct `--version` run at
//! 30 s on a cache hit and 120 s for a new CLI, and a run stopped there is
//! `cliUnresponsive`: a present CLI stays and nothing is installed; a new
//! one is placed all the same. Older builds give the run 10 s and count a
//! stop as not runnable.
//!
//! With the managed launcher ([`InstallOptions::managed_launcher`]) the
//! checks of steps 3 and 4 go as the host's launcher decides ([`launcher`]):
//! through it on the final path, after the rename, or not at all.
//!
//! Failures never change the exit code: they become `cliError` in the
//! facts line. Every decision the contract leaves open is listed in
//! `docs/PROTOCOL.md` ("-install").

// The OS-specific parts: `host` (naming, modes, liveness) and the Unix
// files below have Windows halves under `windows/` (same item names).
mod fetch;
mod fetch_error;
#[cfg(unix)]
mod host;
#[cfg(windows)]
#[path = "windows/host.rs"]
mod host;
mod install_error;
#[cfg(unix)]
mod launcher;
#[cfg(windows)]
#[path = "windows/launcher.rs"]
mod launcher;
#[cfg(unix)]
mod probe;
#[cfg(windows)]
#[path = "windows/probe.rs"]
mod probe;
#[cfg(unix)]
mod prune;
#[cfg(windows)]
#[path = "windows/prune.rs"]
mod prune;
mod stage;
#[cfg(unix)]
mod trust;
#[cfg(windows)]
#[path = "windows/trust.rs"]
mod trust;

use crate::base::goerr::go_quote;
use fetch_error::FetchError;
use install_error::InstallError;
use launcher::{Checked, How};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use fetch::{FetchStats, PROGRESS_PREFIX};
pub use probe::detect_libc;

/// `cliError` of a direct run stopped at its bound (builds with
/// [`crate::protocol::build::Switch::CliRunBounds`]): one text for both
/// bounds, as the reference words it.
pub(super) const UNRESPONSIVE: &str = "cli unresponsive: the installed Claude Code binary started but did not answer --version within 30s (120s for a first run) and was stopped; the host is not letting it run (endpoint security software or a stalled network home are the usual causes)";

/// How one direct `<cli> --version` run ended ([`probe`]'s `run_version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ran {
    /// It exited 0 within the bound.
    Answered,
    /// It did not start, or exited otherwise.
    Failed,
    /// It still ran at the bound and was killed with what it started.
    Stopped,
}

/// The prefix of the one stdout line `-install` prints.
pub const RESULT_PREFIX: &str = "__INSTALL_RESULT__";

/// The `-install` flags, as parsed by `cli`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstallOptions {
    pub cli_dir: String,
    pub cli_version: String,
    pub cli_url: String,
    pub cli_checksum: String,
    pub cli_zst: String,
    /// `-cli-keep`, default 3.
    pub cli_keep: i64,
    /// `-cli-download-timeout` (remora's own, a flag and a `remora.conf`
    /// key): the most a `-cli-url` download may take in all; zero, the
    /// default, is no deadline, as the reference has none.
    pub download_timeout: Duration,
    /// The managed-settings folder whose launcher checks the CLI: set by
    /// `cli` for a build with the managed launcher when
    /// `CLAUDE_SSH_MANAGED_LAUNCHER` is `1`; `None` checks it directly and
    /// adds no `launcher*` fact.
    pub managed_launcher: Option<PathBuf>,
    /// The served build has `Switch::CliRunBounds` (set by `cli`): the
    /// direct run's bounds are [`Limits::cli_run_timeout`] and
    /// [`Limits::cli_first_run_timeout`], and a stop is `cliUnresponsive`.
    pub run_bounds: bool,
    /// The served build has `Switch::EmptyPathWithoutCliDir` (set by
    /// `cli`): a `-cli-dir` that cannot be made empties `cliPath`.
    pub empty_path_without_cli_dir: bool,
}

/// Time limits of one install. `Default` is what `-install` uses; tests
/// shorten them.
#[derive(Debug, Clone)]
pub struct Limits {
    /// How long `<cli> --version` may run before it is killed and the CLI
    /// counts as not runnable, for a build without `Switch::CliRunBounds`
    /// (remora's own 10 s; no record gives such a build's bound).
    pub probe_timeout: Duration,
    /// The direct run's bound on a cache hit, for a build with
    /// `Switch::CliRunBounds`: 30 s, the reference's.
    pub cli_run_timeout: Duration,
    /// The same for a CLI this install put in place: 120 s.
    pub cli_first_run_timeout: Duration,
    /// TCP connect timeout of the download.
    pub connect_timeout: Duration,
    /// Longest silence between two reads of the download (a stalled server
    /// fails the install instead of hanging it forever): 60 s, the
    /// reference's read-idle abort.
    pub read_timeout: Duration,
    /// Period of the `__INSTALL_PROGRESS__` ticker.
    pub progress_interval: Duration,
    /// How long a run through the managed launcher may take on a cache
    /// hit before its group is killed: 33 s, the reference's.
    pub launcher_timeout: Duration,
    /// The same right after a fresh install: 123 s, the reference's.
    pub launcher_first_timeout: Duration,
}

/// Test-only: overrides the 60 s read-idle abort of `-install`, in ms, so
/// tests can stall a download without waiting a minute. Not a supported
/// knob; the message reports whole seconds.
pub const STALL_MS_ENV: &str = "REMORA_TEST_INSTALL_STALL_MS";

impl Default for Limits {
    fn default() -> Self {
        Limits {
            probe_timeout: Duration::from_secs(10),
            cli_run_timeout: Duration::from_secs(30),
            cli_first_run_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(30),
            read_timeout: Duration::from_secs(60),
            progress_interval: Duration::from_secs(1),
            launcher_timeout: launcher::RUN_BOUND,
            launcher_first_timeout: launcher::FIRST_RUN_BOUND,
        }
    }
}

impl Limits {
    /// The defaults, with the test-only [`STALL_MS_ENV`] override.
    pub fn from_env() -> Self {
        let mut limits = Limits::default();
        if let Some(ms) = std::env::var(STALL_MS_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&ms| ms > 0)
        {
            limits.read_timeout = Duration::from_millis(ms);
        }
        limits
    }
}

/// The `__INSTALL_RESULT__` facts, in the documented key order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallResult {
    pub server_version: String,
    pub os: String,
    pub arch: String,
    pub libc: String,
    pub cli_path: String,
    pub cli_was_present: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cli_error: Option<String>,
    /// A `--version` run, direct (builds with `Switch::CliRunBounds`) or
    /// through the managed launcher, was stopped at its bound (with that
    /// `cliError`). Absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cli_unresponsive: bool,
    /// The download's statistics, when `-cli-url` was attempted: the last
    /// of the reference's fields but the `launcher*` ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fetch: Option<FetchStats>,
    /// The managed launcher's facts (`CLAUDE_SSH_MANAGED_LAUNCHER=1` and a
    /// CLI path only), in the recorded order, each absent where it does
    /// not apply: `none`, `usable`, `unusable`, `unreadable`,
    /// `probe_failed` or `unresponsive`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launcher_status: Option<String>,
    /// The resolved launcher argv.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launcher: Option<Vec<String>>,
    /// The settings file the launcher value came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launcher_source: Option<String>,
    /// The settings file or folder that could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launcher_path: Option<String>,
    /// Why the launcher was refused, failed or was stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launcher_reason: Option<String>,
    /// A failed run's stderr: 8192 bytes, then `\n[… N more bytes]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launcher_stderr: Option<String>,
    /// remora only: where a non-directory found at `-cli-dir` was moved so
    /// the directory could be made. Absent otherwise, so the line is the
    /// reference's whenever the reference would have succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cli_dir_moved_aside: Option<String>,
}

impl InstallResult {
    /// The facts line, `__INSTALL_RESULT__{json}`, without the newline.
    pub fn line(&self) -> String {
        let json = crate::base::gojson::to_go_json(self);
        format!("{RESULT_PREFIX}{}", String::from_utf8_lossy(&json))
    }
}

/// Runs the install and prints the facts line (after any progress lines);
/// returns the exit code (0).
pub fn run(options: &InstallOptions) -> i32 {
    // Nothing useful can be done if stdout is gone; the exit code is 0
    // whatever happens (failures live in the facts).
    let print = |line: &str| {
        let mut stdout = io::stdout().lock();
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    };
    let result = install_reporting(options, &Limits::from_env(), &print);
    print(&result.line());
    0
}

/// Runs the install with the default [`Limits`] and returns the facts.
pub fn install(options: &InstallOptions) -> InstallResult {
    install_with(options, &Limits::default())
}

/// Runs the install and returns the facts without printing anything.
pub fn install_with(options: &InstallOptions, limits: &Limits) -> InstallResult {
    install_reporting(options, limits, &|_| {})
}

/// Runs the install, handing each progress line to `progress`, and
/// returns the facts.
pub fn install_reporting(options: &InstallOptions, limits: &Limits, progress: &(dyn Fn(&str) + Sync)) -> InstallResult {
    let mut result = InstallResult {
        server_version: crate::base::version::ID.to_string(),
        os: crate::base::version::goos().to_string(),
        arch: crate::base::version::goarch().to_string(),
        libc: detect_libc().to_string(),
        cli_path: host::cli_path(&options.cli_dir, &options.cli_version),
        cli_was_present: false,
        cli_error: None,
        cli_unresponsive: false,
        fetch: None,
        launcher_status: None,
        launcher: None,
        launcher_source: None,
        launcher_path: None,
        launcher_reason: None,
        launcher_stderr: None,
        cli_dir_moved_aside: None,
    };
    // Resolved once, for a CLI path, before the CLI runs; an install with
    // no CLI path carries no launcher fact.
    let names_cli = !options.cli_dir.is_empty() && !options.cli_version.is_empty();
    let managed = options
        .managed_launcher
        .as_deref()
        .filter(|_| names_cli)
        .map(|folder| launcher::Managed::resolve(folder, &result.cli_path));
    let mut run = Run {
        options,
        limits,
        progress,
        fetch: None,
        moved_aside: None,
        launcher: managed,
        unresponsive: false,
        dir_failed: false,
    };
    // The last line of defence for "always exits 0 with a facts line": a
    // panic anywhere in the flow (a bug, or one in a dependency reached by
    // hostile input) becomes a `cliError`. Temporaries are removed by
    // their drop guards while unwinding.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run.ensure(&result.cli_path)));
    match outcome {
        Ok(Ok(was_present)) => result.cli_was_present = was_present,
        Ok(Err(error)) => result.cli_error = Some(error.to_string()),
        Err(payload) => result.cli_error = Some(format!("internal error: {}", panic_text(payload.as_ref()))),
    }
    // A cli dir that cannot be made empties the path (cell E10 of 89cb6289).
    if run.dir_failed && options.empty_path_without_cli_dir {
        result.cli_path = String::new();
    }
    result.fetch = run.fetch;
    result.cli_unresponsive = run.unresponsive;
    if let Some(managed) = &run.launcher {
        managed.facts(&mut result);
    }
    result.cli_dir_moved_aside = run
        .moved_aside
        .map(|p| crate::base::gojson::go_lossy(p.as_os_str().as_encoded_bytes()));
    result
}

/// The message of a caught panic (`&str` or `String` payloads; anything
/// else is reported without one).
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}

/// One install in progress: its inputs, and what the download measured.
struct Run<'a> {
    options: &'a InstallOptions,
    limits: &'a Limits,
    progress: &'a (dyn Fn(&str) + Sync),
    fetch: Option<FetchStats>,
    /// Where a non-directory at `-cli-dir` went.
    moved_aside: Option<PathBuf>,
    /// The managed launcher, when it applies.
    launcher: Option<launcher::Managed>,
    /// A check was stopped at its bound (`cliUnresponsive`).
    unresponsive: bool,
    /// `-cli-dir` could not be made (or what stood there moved aside).
    dir_failed: bool,
}

/// Where the blob comes from.
enum Source<'a> {
    /// `-cli-zst`: a local file uploaded by the driver (over SFTP).
    Zst(&'a str),
    /// `-cli-url`: downloaded over HTTP(S).
    Url(&'a str),
}

impl Run<'_> {
    /// The whole install; `Ok(true)` when the CLI was already present and
    /// runnable, `Err` is the `cliError` text.
    fn ensure(&mut self, cli_path: &str) -> Result<bool, InstallError> {
        let (options, limits) = (self.options, self.limits);
        if options.cli_dir.is_empty() {
            return Err(InstallError::NoCliDir);
        }
        validate_version(&options.cli_version)?;
        trust::check_cli_dir(Path::new(&options.cli_dir))?;
        let dir = Path::new(&options.cli_dir);
        let version = options.cli_version.as_str();
        let name = host::cli_file_name(version);
        let final_path = dir.join(&name);
        refuse_home(dir, &final_path, cli_path)?;

        // A killed earlier run is garbage whatever happens next.
        stage::sweep_stale(dir);

        // A cache hit prunes nothing, whatever its check says (the
        // reference touches the folder only when it installs).
        if fs::metadata(&final_path).is_ok_and(|m| m.is_file()) {
            match self.how() {
                How::Direct => {
                    let bound = if options.run_bounds {
                        limits.cli_run_timeout
                    } else {
                        limits.probe_timeout
                    };
                    match probe::run_version(&final_path, bound) {
                        Ran::Answered => return Ok(true),
                        // The CLI stays and nothing is installed: no source
                        // is read, no download made.
                        Ran::Stopped if options.run_bounds => return Err(self.stopped()),
                        Ran::Stopped | Ran::Failed => {}
                    }
                }
                How::Nothing => return Ok(true),
                // A stopped run keeps the CLI and installs nothing; any
                // other run keeps it as present.
                How::Launcher => {
                    self.check_through_launcher(&final_path, false)?;
                    return Ok(true);
                }
            }
        }
        // The direct check runs on the staged file, before the rename; a
        // launcher gets the final path, after it.
        let precheck = (self.how() == How::Direct).then_some(stage::Precheck {
            bound: if options.run_bounds {
                limits.cli_first_run_timeout
            } else {
                limits.probe_timeout
            },
            stopped_places: options.run_bounds,
        });

        // The uploaded file wins: a driver that went to the trouble of an SFTP
        // upload means it, and the URL is only the fallback source.
        let source = if !options.cli_zst.is_empty() {
            Source::Zst(&options.cli_zst)
        } else if !options.cli_url.is_empty() {
            Source::Url(&options.cli_url)
        } else {
            return Err(InstallError::NoSource {
                version: version.to_string(),
            });
        };

        let placed = match source {
            Source::Zst(zst) => {
                let mut input = open_upload(zst)?;
                self.create_dir()?;
                // Opt-in verification (the D1 divergence): only a supplied
                // checksum is checked. Hashing and decompressing go through the
                // same descriptor, so swapping the file in between cannot slip
                // an unverified blob past the check.
                if !options.cli_checksum.is_empty() {
                    let on_input = |op: &'static str, source: io::Error| InstallError::Input {
                        op,
                        path: zst.to_string(),
                        source,
                    };
                    let actual = sha256_hex(&mut input).map_err(|e| on_input("read", e))?;
                    verify_checksum(&options.cli_checksum, &actual)?;
                    input.seek(SeekFrom::Start(0)).map_err(|e| on_input("seek", e))?;
                }
                let opened = host::file_identity(&input);
                let placed = stage::install_blob(&mut input, dir, &name, cli_path, precheck)?;
                // Consumed only once the CLI is in place: a failed install
                // leaves the upload for a retry. Only the file that was read is
                // removed — if the path now names another file (the upload was
                // the final path itself, or was replaced meanwhile), it stays.
                // A failed removal costs disk space, not correctness.
                if opened.is_some() && opened == host::path_identity(zst) {
                    let _ = fs::remove_file(zst);
                }
                placed
            }
            Source::Url(url) => {
                self.create_dir()?;
                // Downloaded in full (and hashed on the way) before the
                // decompressor sees a byte of it: unverified input never
                // reaches zstd.
                let deadline = (!options.download_timeout.is_zero()).then_some(options.download_timeout);
                let (downloaded, stats) = fetch::download(url, dir, version, limits, deadline, self.progress);
                self.fetch = Some(stats);
                let (mut blob, actual) = downloaded?;
                verify_checksum(&options.cli_checksum, &actual)?;
                blob.file
                    .seek(SeekFrom::Start(0))
                    .map_err(|source| FetchError::Rewind {
                        temp: blob.path().to_string_lossy().into_owned(),
                        source,
                    })?;
                stage::install_blob(&mut blob.file, dir, &name, cli_path, precheck)?
                // `blob` drops here and removes the download.
            }
        };
        // A new CLI whose check was stopped stays in place (its upload
        // consumed), and nothing is pruned.
        if placed == stage::Placed::Unresponsive {
            return Err(self.stopped());
        }
        if self.how() == How::Launcher {
            self.check_through_launcher(&final_path, true)?;
        }
        prune::prune(dir, &name, options.cli_keep);
        Ok(false)
    }

    /// How a CLI is checked in this install.
    fn how(&self) -> How {
        self.launcher.as_ref().map_or(How::Direct, launcher::Managed::how)
    }

    /// The run through the launcher (`first`: right after an install);
    /// `Err` is the `cliError` of a stopped run.
    fn check_through_launcher(&mut self, cli: &Path, first: bool) -> Result<(), InstallError> {
        let bound = if first {
            self.limits.launcher_first_timeout
        } else {
            self.limits.launcher_timeout
        };
        let Some(managed) = self.launcher.as_mut() else {
            return Ok(());
        };
        match managed.check(cli, bound, first) {
            Checked::Runnable => Ok(()),
            Checked::Stopped(message) => {
                self.unresponsive = true;
                Err(InstallError::LauncherStopped(message))
            }
        }
    }

    /// A direct run stopped at its bound: `cliUnresponsive` and its error.
    fn stopped(&mut self) -> InstallError {
        self.unresponsive = true;
        InstallError::Unresponsive
    }

    /// Makes `-cli-dir`, first moving aside a non-directory in its place.
    fn create_dir(&mut self) -> Result<(), InstallError> {
        let dir = &self.options.cli_dir;
        let made = self.make_dir();
        if made.is_err() {
            // A cli dir that cannot be made carries no launcher fact (cell
            // G1 of 89cb6289), and, where the build says so, no cliPath.
            self.launcher = None;
            self.dir_failed = true;
        }
        made?;
        // What now stands there is what the install will write into.
        Ok(trust::check_cli_dir(Path::new(dir))?)
    }

    /// [`Run::create_dir`]'s move and mkdir.
    fn make_dir(&mut self) -> Result<(), InstallError> {
        let dir = &self.options.cli_dir;
        if let Some(aside) = move_aside_non_directory(Path::new(dir))? {
            crate::log_warn!(
                "[install] {} was not a directory (state from an older version?): moved it to {} and made the directory",
                go_quote(dir.as_bytes()),
                go_quote(aside.as_os_str().as_encoded_bytes())
            );
            self.moved_aside = Some(aside);
        }
        create_dir(dir)
    }
}

/// remora's own guard ([`crate::base::homeguard`]; the reference replaces the
/// home directory with the CLI file): the CLI path, which the install
/// replaces, and the cli dir, whose files the sweep and the prune delete,
/// must not be or contain the daemon user's home. Checked before anything
/// on disk changes.
fn refuse_home(dir: &Path, final_path: &Path, cli_path: &str) -> Result<(), InstallError> {
    match host::home_refusal(dir, final_path, cli_path) {
        Some(text) => Err(InstallError::Home(text)),
        None => Ok(()),
    }
}

/// Renames whatever non-directory sits at `dir` (a file, a link to one, a
/// dangling link) to `<dir>.moved-aside-<unix seconds>[-<n>]` beside it, and
/// returns that path. A directory, a link to one, or nothing at all is left
/// alone (`None`). Older protocol versions kept the CLI as one flat file
/// where the versioned directory now lives; failing with `mkdir: not a
/// directory` would strand such a remote, and deleting the file could
/// lose someone's data.
fn move_aside_non_directory(dir: &Path) -> Result<Option<PathBuf>, InstallError> {
    let Ok(found) = fs::symlink_metadata(dir) else {
        return Ok(None);
    };
    let is_directory =
        found.is_dir() || (found.file_type().is_symlink() && fs::metadata(dir).is_ok_and(|m| m.is_dir()));
    if is_directory {
        return Ok(None);
    }
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut base = dir.as_os_str().to_os_string();
    base.push(format!(".moved-aside-{seconds}"));
    // The parent is the owner's own directory; the check below only keeps
    // an earlier move's file from being replaced.
    for n in 0..100 {
        let mut name = base.clone();
        if n > 0 {
            name.push(format!("-{n}"));
        }
        let aside = PathBuf::from(name);
        if fs::symlink_metadata(&aside).is_ok() {
            continue;
        }
        return match fs::rename(dir, &aside) {
            Ok(()) => Ok(Some(aside)),
            Err(source) => Err(InstallError::MoveAside {
                dir: dir.to_path_buf(),
                aside,
                source,
            }),
        };
    }
    Err(InstallError::NoNameToMoveAside { dir: dir.to_path_buf() })
}

/// Opens the `-cli-zst` upload without blocking on its kind: a FIFO
/// (which would wait forever for a writer) or a device is refused as
/// `opening input: open <p>: not a regular file`, and is never consumed.
fn open_upload(zst: &str) -> Result<File, InstallError> {
    let fail = |source: io::Error| InstallError::Input {
        op: "open",
        path: zst.to_string(),
        source,
    };
    let input = crate::sys::os::open_nonblocking(Path::new(zst)).map_err(fail)?;
    if !input.metadata().map_err(fail)?.is_file() {
        return Err(InstallError::InputNotRegular { path: zst.to_string() });
    }
    Ok(input)
}

/// Rejects a version that would not name a plain file directly inside
/// `-cli-dir`. A leading dot is refused too: hidden names are where the
/// install keeps its temporaries, and pruning skips them.
fn validate_version(version: &str) -> Result<(), InstallError> {
    if version.is_empty() {
        return Err(InstallError::NoVersion);
    }
    if version.starts_with('.') || host::leaves_dir(version) {
        return Err(InstallError::InvalidVersion(version.to_string()));
    }
    Ok(())
}

/// Makes `-cli-dir` and its missing parents, owner-only
/// ([`host::create_cli_dir`]); the error keeps Go's `mkdir <path>: <errno>`.
fn create_dir(dir: &str) -> Result<(), InstallError> {
    host::create_cli_dir(dir).map_err(|source| InstallError::MakeCliDir {
        dir: dir.to_string(),
        source,
    })
}

/// `checksum mismatch: expected=<a>, actual=<b>` unless they match. Hex
/// case is ignored (`sha256sum` prints lower case, some tools upper); the
/// expected value is echoed exactly as given.
fn verify_checksum(expected: &str, actual: &str) -> Result<(), InstallError> {
    if expected.eq_ignore_ascii_case(actual) {
        Ok(())
    } else {
        Err(InstallError::ChecksumMismatch {
            expected: expected.to_string(),
            actual: actual.to_string(),
        })
    }
}

/// Lower-case hex SHA-256 of everything `reader` yields, streamed.
fn sha256_hex(reader: &mut impl Read) -> io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_stay_inside_the_dir() {
        assert!(validate_version("2.1.3").is_ok());
        assert!(validate_version("v2+build-1").is_ok());
        assert_eq!(
            validate_version("").unwrap_err().to_string(),
            "--cli-version is required"
        );
        assert_eq!(
            validate_version("..").unwrap_err().to_string(),
            "invalid cli version \"..\""
        );
        assert_eq!(
            validate_version(".").unwrap_err().to_string(),
            "invalid cli version \".\""
        );
        assert_eq!(
            validate_version("a/b").unwrap_err().to_string(),
            "invalid cli version \"a/b\""
        );
        assert_eq!(
            validate_version(".hidden").unwrap_err().to_string(),
            "invalid cli version \".hidden\""
        );
        assert_eq!(
            validate_version("a\0").unwrap_err().to_string(),
            "invalid cli version \"a\\x00\""
        );
    }

    #[test]
    fn checksums_compare_case_insensitively() {
        assert!(verify_checksum("ABCDEF", "abcdef").is_ok());
        assert_eq!(
            verify_checksum("", "ab").unwrap_err().to_string(),
            "checksum mismatch: expected=, actual=ab"
        );
    }

    #[test]
    fn facts_line_keeps_key_order_and_omits_empty_error() {
        let mut facts = InstallResult {
            server_version: "v1".into(),
            os: "linux".into(),
            arch: "amd64".into(),
            libc: "glibc".into(),
            cli_path: "/d/1.0".into(),
            cli_was_present: true,
            cli_error: None,
            cli_unresponsive: false,
            fetch: None,
            launcher_status: None,
            launcher: None,
            launcher_source: None,
            launcher_path: None,
            launcher_reason: None,
            launcher_stderr: None,
            cli_dir_moved_aside: None,
        };
        assert_eq!(
            facts.line(),
            "__INSTALL_RESULT__{\"serverVersion\":\"v1\",\"os\":\"linux\",\"arch\":\"amd64\",\
             \"libc\":\"glibc\",\"cliPath\":\"/d/1.0\",\"cliWasPresent\":true}"
        );
        facts.cli_error = Some("x <y>".into());
        assert!(facts
            .line()
            .ends_with(",\"cliWasPresent\":true,\"cliError\":\"x \\u003cy\\u003e\"}"));
        facts.fetch = Some(FetchStats {
            bytes: 5,
            ms: 12,
            longest_pause_ms: 3,
        });
        assert!(facts
            .line()
            .ends_with(",\"cliError\":\"x \\u003cy\\u003e\",\"fetch\":{\"bytes\":5,\"ms\":12,\"longestPauseMs\":3}}"));
        facts.cli_dir_moved_aside = Some("/d.moved-aside-1".into());
        assert!(facts
            .line()
            .ends_with(",\"longestPauseMs\":3},\"cliDirMovedAside\":\"/d.moved-aside-1\"}"));
        // The launcher facts: cliUnresponsive after cliError, the rest
        // after fetch, remora's own member last.
        facts.cli_unresponsive = true;
        facts.launcher_status = Some("probe_failed".into());
        facts.launcher = Some(vec!["/w".into()]);
        facts.launcher_source = Some("/s.json".into());
        facts.launcher_path = Some("/p".into());
        facts.launcher_reason = Some("exit status 3".into());
        facts.launcher_stderr = Some("e".into());
        assert!(facts.line().ends_with(
            "\"cliWasPresent\":true,\"cliError\":\"x \\u003cy\\u003e\",\"cliUnresponsive\":true,\
             \"fetch\":{\"bytes\":5,\"ms\":12,\"longestPauseMs\":3},\"launcherStatus\":\"probe_failed\",\
             \"launcher\":[\"/w\"],\"launcherSource\":\"/s.json\",\"launcherPath\":\"/p\",\
             \"launcherReason\":\"exit status 3\",\"launcherStderr\":\"e\",\"cliDirMovedAside\":\"/d.moved-aside-1\"}"
        ));
    }
}
