//! `files.*`: stat, list, read, validate, extract_tar.
//!
//! Every handler does its filesystem work in `spawn_blocking`, and every OS
//! error that reaches the wire goes through [`crate::base::goerr`] so it reads the
//! way Go's `*PathError` does (`stat /x: permission denied`).
//!
//! Choices where the contract is silent (also listed in `docs/PROTOCOL.md`):
//! - `files.stat` uses `stat(2)` (Go's `os.Stat`), i.e. it FOLLOWS symlinks:
//!   the documented error text for a NUL in the path is `stat …`, which is
//!   what `os.Stat` produces (`os.Lstat` would say `lstat …`). A symlink is
//!   reported as its target; a dangling one as missing.
//! - "Missing" is `ENOENT` alone (Go's `os.IsNotExist`); any other stat
//!   failure, `ENAMETOOLONG` included (seed 000
//!   listed the empty `exists:false` body there as claustrum's own), is
//!   -32603 with the Go error text, or validate's `error` field.
//! - `files.list` on a non-directory: `open <path>: not a directory`, for
//!   any file, readable or not (the seed-000 build's `os.ReadDir` said
//!   `readdirent <path>: not a directory`).
//! - `files.read` follows the builds after seed 000 as
//!   `docs/record/files-read.md` measures them: the path is opened
//!   once, non-blocking, and the open file's kind decides (a directory is
//!   refused, the null device reads empty, any other non-regular file is
//!   `files.read: not a regular file`); `maxBytes <= 0` caps at 262144.
//!
//! Nothing here blocks on a file's kind: every open of a path that may
//! name a FIFO or a device is `O_NONBLOCK`, and the kind is checked on the
//! open descriptor before a byte is read. At most [`FILES_BLOCKING_MAX`]
//! files.* jobs hold a blocking-pool thread at once; the rest wait for a
//! permit without holding one, so files.* can never take the pool from
//! the replay store's disk work.

use super::Outcome;
use crate::base::filemode;
use crate::base::goerr::path_error;
use crate::base::gojson::go_lossy;
use crate::base::gopath;
use crate::protocol::build::{Build, Switch};
use crate::protocol::method::FilesMethod;
use crate::protocol::params::PathParams;
use serde::Serialize;
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::Path;

#[derive(Serialize)]
struct StatResult {
    exists: bool,
    #[serde(rename = "isDir")]
    is_dir: bool,
    size: u64,
    mode: String,
}

#[derive(Serialize)]
struct ListEntry {
    name: String,
    path: String,
    #[serde(rename = "isDir")]
    is_dir: bool,
}

#[derive(Serialize)]
struct ListResult {
    entries: Vec<ListEntry>,
}

#[derive(Serialize)]
struct ReadResult {
    content: String,
    exists: bool,
}

#[derive(Serialize)]
struct ValidateResult {
    valid: bool,
    #[serde(rename = "isDir")]
    is_dir: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Most files.* jobs running on the blocking pool at once (tokio's pool
/// has 512 threads; the replay store's disk writers and readers use the
/// rest).
pub(crate) const FILES_BLOCKING_MAX: usize = 16;

/// The permits behind [`FILES_BLOCKING_MAX`].
static FILES_JOBS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(FILES_BLOCKING_MAX);

/// `files.read`'s cap when `maxBytes` is absent, zero or negative.
pub(crate) const READ_DEFAULT_CAP: u64 = 262_144;

pub(crate) async fn handle(method: FilesMethod, params: PathParams, build: &Build) -> Outcome {
    let tar_rules = crate::tarx::Rules {
        exec_bit: build.has(Switch::TarExecBit),
        no_come_back: build.has(Switch::TarExecBit),
        relative_texts: build.has(Switch::TarExecBit),
    };
    // Never closed, so acquiring only fails if that changes; answer
    // rather than run unbounded.
    let Ok(_permit) = FILES_JOBS.acquire().await else {
        return Outcome::internal(format!("internal error in {method}"));
    };
    let work = move || match method {
        FilesMethod::Stat => stat(&params.path),
        FilesMethod::List => list(&params.path),
        FilesMethod::Read => read(&params.path, params.max_bytes),
        FilesMethod::Validate => validate(&params.path),
        FilesMethod::ExtractTar => extract_tar(&params.archive_path, &params.dest_dir, tar_rules),
    };
    match tokio::task::spawn_blocking(work).await {
        Ok(outcome) => outcome,
        // A panic in the blocking task; the daemon keeps serving.
        Err(_) => Outcome::internal(format!("internal error in {method}")),
    }
}

/// Go's `os.IsNotExist` (see the module doc).
fn is_missing(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotFound
}

fn stat(path: &str) -> Outcome {
    match fs::metadata(path) {
        Ok(meta) => Outcome::ok(&StatResult {
            exists: true,
            is_dir: meta.is_dir(),
            size: meta.len(),
            mode: filemode::mode_string(crate::sys::os::st_mode(&meta)),
        }),
        Err(e) if is_missing(&e) => Outcome::ok(&StatResult {
            exists: false,
            is_dir: false,
            size: 0,
            mode: String::new(),
        }),
        Err(e) => Outcome::internal(path_error("stat", path, &e)),
    }
}

fn list(path: &str) -> Outcome {
    // A file of any other kind fails the open before its permissions
    // are looked at, and a FIFO is refused without waiting for a writer.
    let dir = match crate::sys::os::open_dir_nonblocking(Path::new(path)) {
        Ok(f) => f,
        Err(e) => return Outcome::internal(path_error("open", path, &e)),
    };
    let reader = match fs::read_dir(path) {
        Ok(r) => r,
        Err(e) => return Outcome::internal(path_error("open", path, &e)),
    };
    drop(dir);
    let mut names: Vec<Vec<u8>> = Vec::new();
    for entry in reader {
        match entry {
            Ok(entry) => names.push(entry.file_name().as_encoded_bytes().to_vec()),
            Err(e) => return Outcome::internal(path_error("readdirent", path, &e)),
        }
    }
    // os.ReadDir sorts by name: Go string order is byte order.
    names.sort_unstable();
    let entries = names
        .into_iter()
        .filter(|name| name.first() != Some(&b'.'))
        .map(|name| {
            let full = gopath::join(&[path.as_bytes(), &name]);
            // Stat follows symlinks; a dangling link (or any stat error)
            // is simply not a directory.
            // SAFETY: `full` is `path` (a str) and `name` (as_encoded_bytes of
            // an OsStr) joined and cleaned at ASCII separators only.
            let full_os = unsafe { OsStr::from_encoded_bytes_unchecked(&full) };
            let is_dir = fs::metadata(full_os).is_ok_and(|m| m.is_dir());
            ListEntry {
                name: go_lossy(&name),
                path: go_lossy(&full),
                is_dir,
            }
        })
        .collect();
    Outcome::ok(&ListResult { entries })
}

/// Opens `path` for reading without blocking on its kind (a FIFO without
/// a writer, a device), following symlinks as Go's `os.Open` does.
pub(crate) fn open_nonblocking(path: impl AsRef<Path>) -> io::Result<File> {
    crate::sys::os::open_nonblocking(path.as_ref())
}

/// Test seam: with `REMORA_TEST_FILES_READ_BLOCKS=1`, `files.read` opens
/// its path blocking, as before issue 26, so a test can hold a files.*
/// job (its permit and its blocking thread) on a FIFO for as long as it
/// wants and observe the [`FILES_BLOCKING_MAX`] bound. Only tests set it:
/// it brings back the very hang the non-blocking open prevents.
pub(crate) const TEST_READ_BLOCKS_ENV: &str = "REMORA_TEST_FILES_READ_BLOCKS";

fn test_read_blocks() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var(TEST_READ_BLOCKS_ENV).is_ok_and(|v| v == "1"))
}

/// Whether `meta` is the system's null device itself (by identity, as
/// 5fd08069 tests it: another node with the same device numbers is not).
fn is_null_device(meta: &fs::Metadata) -> bool {
    crate::sys::os::is_null_device(meta)
}

fn read(path: &str, max_bytes: i64) -> Outcome {
    let absent = || {
        Outcome::ok(&ReadResult {
            content: String::new(),
            exists: false,
        })
    };
    let opened = if test_read_blocks() {
        File::open(path)
    } else {
        open_nonblocking(path)
    };
    let file = match opened {
        Ok(f) => f,
        Err(e) if is_missing(&e) => return absent(),
        Err(e) => return Outcome::internal(path_error("open", path, &e)),
    };
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(e) => return Outcome::internal(path_error("stat", path, &e)),
    };
    if meta.is_dir() {
        return Outcome::invalid_params("files.read: path is a directory");
    }
    if !meta.is_file() {
        if is_null_device(&meta) {
            return Outcome::ok(&ReadResult {
                content: String::new(),
                exists: true,
            });
        }
        return Outcome::invalid_params("files.read: not a regular file");
    }
    let limit = u64::try_from(max_bytes)
        .ok()
        .filter(|&m| m > 0)
        .unwrap_or(READ_DEFAULT_CAP);
    if meta.len() > limit {
        return Outcome::invalid_params("files.read: file exceeds maxBytes");
    }
    let mut data = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // Read at most one byte past the limit: a file that grew since the
    // fstat, or one that reports size 0 (`/proc`), is still bounded.
    if let Err(e) = file.take(limit.saturating_add(1)).read_to_end(&mut data) {
        return Outcome::internal(path_error("read", path, &e));
    }
    if data.len() as u64 > limit {
        return Outcome::invalid_params("files.read: file exceeds maxBytes");
    }
    Outcome::ok(&ReadResult {
        content: go_lossy(&data),
        exists: true,
    })
}

fn validate(path: &str) -> Outcome {
    let result = match fs::metadata(path) {
        Ok(meta) => ValidateResult {
            valid: true,
            is_dir: meta.is_dir(),
            error: None,
        },
        Err(e) if is_missing(&e) => ValidateResult {
            valid: false,
            is_dir: false,
            error: Some("Path does not exist".to_string()),
        },
        Err(e) => ValidateResult {
            valid: false,
            is_dir: false,
            error: Some(path_error("stat", path, &e)),
        },
    };
    Outcome::ok(&result)
}

fn extract_tar(archive: &str, dest: &str, rules: crate::tarx::Rules) -> Outcome {
    if archive.is_empty() || dest.is_empty() {
        return Outcome::invalid_params("archivePath and destDir are required");
    }
    Outcome::ok(&crate::tarx::extract(Path::new(archive), Path::new(dest), rules))
}
