//! Temporaries and the decompress → check → rename step.
//!
//! Everything the install writes is a temporary in `-cli-dir` named
//! `.<version>.<kind>-<pid>-<16 hex>` (`kind` is `tmp` for the CLI being
//! decompressed, `dl` for a download), created exclusively with mode 0600.
//! The final path only ever appears through `rename(2)` of a complete,
//! fsynced, runnable file, so a killed install leaves at worst a temporary,
//! which [`sweep_stale`] removes on the next run.

use super::{host, probe, Ran};
use crate::base::goerr::{io_text, path_error};
use std::collections::hash_map::RandomState;
use std::fmt;
use std::fs::{self, File};
use std::hash::BuildHasher;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A temporary older than this is swept even if its pid looks alive: the
/// pid may have been reused, or belong to another pid namespace. A live
/// install touches its file far more often than this.
const STALE_AFTER: Duration = Duration::from_secs(60 * 60);

/// The zstd frame magic, and the mask/value of skippable frames (which the
/// decoder accepts before a real frame).
const ZSTD_MAGIC: u32 = 0xFD2F_B528;
const SKIPPABLE_MASK: u32 = 0xFFFF_FFF0;
const SKIPPABLE_MAGIC: u32 = 0x184D_2A50;

/// A path in `-cli-dir` removed on drop unless [`PathGuard::persist`]ed.
#[derive(Debug)]
pub(super) struct PathGuard {
    path: PathBuf,
    armed: bool,
}

impl PathGuard {
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps the file: it has been renamed into place.
    fn persist(mut self) {
        self.armed = false;
    }
}

impl Drop for PathGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// An open temporary; removed (through its guard) when dropped.
#[derive(Debug)]
pub(super) struct TempFile {
    pub file: File,
    guard: PathGuard,
}

impl TempFile {
    /// Creates `.<version>.<kind>-<pid>-<random>` in `dir`, exclusively.
    pub(super) fn create(dir: &Path, version: &str, kind: &str) -> io::Result<TempFile> {
        let state = RandomState::new();
        let pid = std::process::id();
        let mut last_err = None;
        // A collision needs the same pid and 64 random bits; retrying a few
        // times only guards against a pathological leftover.
        for attempt in 0u32..16 {
            let nonce = state.hash_one((attempt, SystemTime::now()));
            let path = dir.join(format!(".{version}.{kind}-{pid}-{nonce:016x}"));
            match host::create_private(&path) {
                Ok(file) => {
                    return Ok(TempFile {
                        file,
                        guard: PathGuard { path, armed: true },
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = Some(e),
                Err(e) => return Err(with_path(e, &path)),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists)))
    }

    pub(super) fn path(&self) -> &Path {
        self.guard.path()
    }

    /// Closes the file, keeping the remove-on-drop guard.
    fn close(self) -> PathGuard {
        self.guard
    }
}

/// Carries the path of a failed `open` into the error text.
fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), path_error("open", &path.to_string_lossy(), &e))
}

/// Text of an error from [`TempFile::create`]: the `open <path>: <errno>`
/// built by [`with_path`], or the errno text alone.
pub(super) fn create_error_text(e: &io::Error) -> String {
    if e.raw_os_error().is_none() {
        if let Some(inner) = e.get_ref() {
            return inner.to_string();
        }
    }
    io_text(e)
}

/// Parses a temporary's name: `Some(pid)` for `.<v>.tmp-<pid>-<hex16>` and
/// `.<v>.dl-<pid>-<hex16>`.
pub(super) fn temp_owner(name: &str) -> Option<i32> {
    let rest = name.strip_prefix('.')?;
    let (rest, nonce) = rest.rsplit_once('-')?;
    if nonce.len() != 16 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let (rest, pid) = rest.rsplit_once('-')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let version = rest.strip_suffix(".tmp").or_else(|| rest.strip_suffix(".dl"))?;
    if version.is_empty() {
        return None;
    }
    pid.parse::<i32>().ok().filter(|pid| *pid > 0)
}

/// Removes temporaries whose install is over: the owner pid is gone (or is
/// this process, which has created none yet), or the file is older than
/// [`STALE_AFTER`]. A concurrent install's live temporary is left alone.
/// Best effort: a failure here never fails the install.
pub(super) fn sweep_stale(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id() as i32;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temp_owner) else {
            continue;
        };
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if !meta.file_type().is_file() {
            continue;
        }
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age > STALE_AFTER);
        if pid == me || old || !host::owner_alive(pid) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// The direct check of a new CLI before its rename.
#[derive(Debug, Clone, Copy)]
pub(super) struct Precheck {
    /// How long `--version` may run.
    pub bound: Duration,
    /// A run stopped at the bound still places the CLI (builds with
    /// `Switch::CliRunBounds`, which keep a new CLI that did not answer);
    /// otherwise it is not runnable.
    pub stopped_places: bool,
}

/// How [`install_blob`] left the final path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Placed {
    /// The new CLI is in place (checked, or not checked here).
    Done,
    /// The new CLI is in place, but its check was stopped at the bound.
    Unresponsive,
}

/// Why a new CLI could not be put in place: the `cliError`.
#[derive(Debug)]
pub(super) enum StageError {
    /// `creating temp file: <open's error>`.
    CreateTemp(io::Error),
    /// A blob that is not zstd:
    /// `decompressing: invalid input: magic number mismatch`.
    NotZstd,
    /// The zstd stream is cut short or corrupt (or unreadable):
    /// `decompressing: <text>` ([`decode_text`]).
    Decode(io::Error),
    /// The temporary could not be written:
    /// `decompressing: write <temp>: <error>`.
    WriteTemp { temp: String, source: io::Error },
    /// A step on the decompressed temporary (`chmod`, `sync`): Go's
    /// `<op> <temp>: <error>`.
    Temp {
        op: &'static str,
        temp: String,
        source: io::Error,
    },
    /// The new CLI did not answer `--version`:
    /// `installed cli at <cliPath> is not runnable`.
    NotRunnable { cli_path: String },
    /// `rename <temp> <final>: <error>`.
    Rename {
        temp: String,
        to: String,
        source: io::Error,
    },
}

impl fmt::Display for StageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StageError::CreateTemp(e) => write!(f, "creating temp file: {}", create_error_text(e)),
            StageError::NotZstd => f.write_str("decompressing: invalid input: magic number mismatch"),
            StageError::Decode(e) => write!(f, "decompressing: {}", decode_text(e)),
            StageError::WriteTemp { temp, source } => {
                write!(f, "decompressing: {}", path_error("write", temp, source))
            }
            StageError::Temp { op, temp, source } => f.write_str(&path_error(op, temp, source)),
            StageError::NotRunnable { cli_path } => write!(f, "installed cli at {cli_path} is not runnable"),
            StageError::Rename { temp, to, source } => write!(f, "rename {temp} {to}: {}", io_text(source)),
        }
    }
}

impl std::error::Error for StageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StageError::CreateTemp(e) | StageError::Decode(e) => Some(e),
            StageError::WriteTemp { source, .. }
            | StageError::Temp { source, .. }
            | StageError::Rename { source, .. } => Some(source),
            StageError::NotZstd | StageError::NotRunnable { .. } => None,
        }
    }
}

/// Decompresses the zstd `blob` into a temporary beside the final path,
/// makes it runnable (0755 on Unix), checks it runs (`--version` within the [`Precheck`]
/// bound, when given: the caller checks through the managed launcher after
/// the rename, or not at all), and renames it to `<dir>/<name>` (the
/// CLI's file name, [`host::cli_file_name`]).
/// `cli_path` is the reported path, for the error text.
pub(super) fn install_blob(
    blob: impl Read,
    dir: &Path,
    name: &str,
    cli_path: &str,
    precheck: Option<Precheck>,
) -> Result<Placed, StageError> {
    let final_path = dir.join(name);
    let mut temp = TempFile::create(dir, name, "tmp").map_err(StageError::CreateTemp)?;
    let temp_name = temp.path().to_string_lossy().into_owned();
    let on_temp = |op: &'static str, source: io::Error| StageError::Temp {
        op,
        temp: temp_name.clone(),
        source,
    };

    decompress(blob, &mut temp.file, &temp_name)?;
    host::make_runnable(&temp.file).map_err(|e| on_temp("chmod", e))?;
    // Durable before it becomes visible: after a crash the final path holds
    // either the old CLI or the complete new one.
    temp.file.sync_all().map_err(|e| on_temp("sync", e))?;
    // Executing a file that is still open for writing fails with ETXTBSY;
    // close our handle first (probe also retries for other processes' forks).
    let temp = temp.close();

    let mut placed = Placed::Done;
    if let Some(check) = precheck {
        match probe::run_version(temp.path(), check.bound) {
            Ran::Answered => {}
            Ran::Stopped if check.stopped_places => placed = Placed::Unresponsive,
            Ran::Stopped | Ran::Failed => {
                return Err(StageError::NotRunnable {
                    cli_path: cli_path.to_string(),
                });
            }
        }
    }
    fs::rename(temp.path(), &final_path).map_err(|source| StageError::Rename {
        temp: temp_name.clone(),
        to: final_path.to_string_lossy().into_owned(),
        source,
    })?;
    temp.persist();
    // Make the rename itself durable; best effort.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(placed)
}

/// Streams zstd `blob` into `out`. Memory is the decoder's window plus two
/// fixed buffers, independent of the CLI size. Errors:
/// [`StageError::NotZstd`] for a non-zstd blob, [`StageError::Decode`]
/// for a truncated or corrupt one, [`StageError::WriteTemp`] for a failed
/// write.
fn decompress(blob: impl Read, out: &mut File, out_name: &str) -> Result<(), StageError> {
    let mut input = BufReader::with_capacity(128 * 1024, blob);
    match leading_magic(&mut input).map_err(StageError::Decode)? {
        // An empty blob decodes to an empty file, which then fails the
        // runnable check.
        None => return Ok(()),
        Some(magic) if magic == ZSTD_MAGIC || magic & SKIPPABLE_MASK == SKIPPABLE_MAGIC => {}
        Some(_) => return Err(StageError::NotZstd),
    }
    let mut decoder = zstd::stream::read::Decoder::with_buffer(input).map_err(StageError::Decode)?;
    let mut buf = vec![0u8; 128 * 1024];
    loop {
        let n = match decoder.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(StageError::Decode(e)),
        };
        out.write_all(&buf[..n]).map_err(|source| StageError::WriteTemp {
            temp: out_name.to_string(),
            source,
        })?;
    }
    Ok(())
}

/// The first four bytes as a little-endian u32; `None` for an empty blob,
/// `UnexpectedEof` for one shorter than a magic number.
fn leading_magic(input: &mut BufReader<impl Read>) -> io::Result<Option<u32>> {
    loop {
        let available = match input.fill_buf() {
            Ok(b) => b.len(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available == 0 {
            return Ok(None);
        }
        if available >= 4 {
            let b = input.buffer();
            return Ok(Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        }
        // Fewer than 4 bytes buffered: with a 128 KiB buffer this only
        // happens at the very end of the input (files and sockets alike
        // hand over what they have); treat it as truncated.
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
    }
}

/// The text after `decompressing: ` of a decode failure, in Go's
/// lower-case style: `unexpected EOF` for a truncated blob, the errno
/// text of a read, else the zstd error.
fn decode_text(e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        return "unexpected EOF".to_string();
    }
    if e.raw_os_error().is_some() {
        return io_text(e);
    }
    let text = e.to_string();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => "corrupt input".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let t = TempFile::create(dir.path(), "1.2.3", "tmp").unwrap();
        let name = t.path().file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(temp_owner(&name), Some(std::process::id() as i32));
        drop(t);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0, "dropped temp removed");
        assert_eq!(temp_owner(".1.0.dl-12-0123456789abcdef"), Some(12));
        assert_eq!(temp_owner(".1.0.tmp-12-0123456789abcdeg"), None);
        assert_eq!(temp_owner(".1.0.tmp-12-0123"), None);
        assert_eq!(temp_owner("1.0.tmp-12-0123456789abcdef"), None);
        assert_eq!(temp_owner(".1.0.zip-12-0123456789abcdef"), None);
        assert_eq!(temp_owner("..tmp-12-0123456789abcdef"), None);
        assert_eq!(temp_owner(".1.0.tmp-0-0123456789abcdef"), None);
    }

    #[test]
    fn decompress_errors_are_stable() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = File::create(dir.path().join("o")).unwrap();
        assert_eq!(
            decompress(&b"#!/bin/sh\n"[..], &mut out, "o").unwrap_err().to_string(),
            "decompressing: invalid input: magic number mismatch"
        );
        assert_eq!(
            decompress(&b"\x28\xb5"[..], &mut out, "o").unwrap_err().to_string(),
            "decompressing: unexpected EOF"
        );
        let full = zstd::encode_all(&[7u8; 100_000][..], 3).unwrap();
        assert_eq!(
            decompress(&full[..full.len() / 2], &mut out, "o")
                .unwrap_err()
                .to_string(),
            "decompressing: unexpected EOF"
        );
        assert!(decompress(&b""[..], &mut out, "o").is_ok());
    }
}
