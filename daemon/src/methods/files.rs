//! `files.*`: stat, list, read, validate, extract_tar.
//!
//! Every handler does its filesystem work in `spawn_blocking`, and every OS
//! error that reaches the wire goes through [`crate::goerr`] so it reads the
//! way Go's `*PathError` does (`stat /x: permission denied`).
//!
//! Choices where the contract is silent (also listed in `docs/PROTOCOL.md`):
//! - `files.stat` uses `stat(2)` (Go's `os.Stat`), i.e. it FOLLOWS symlinks:
//!   the documented error text for a NUL in the path is `stat …`, which is
//!   what `os.Stat` produces (`os.Lstat` would say `lstat …`). A symlink is
//!   reported as its target; a dangling one as missing.
//! - "Missing" is `ENOENT` alone (Go's `os.IsNotExist`); any other stat
//!   failure, `ENAMETOOLONG` included (reference build 5db5e4a; seed 000
//!   listed the empty `exists:false` body there as claustrum's own), is
//!   -32603 with the Go error text, or validate's `error` field.
//! - `files.list` on a non-directory: `open <path>: not a directory`, for
//!   any file, readable or not (reference build 7d193f89; the seed-000
//!   build's `os.ReadDir` said `readdirent <path>: not a directory`).

use super::Outcome;
use crate::filemode;
use crate::goerr::path_error;
use crate::gojson::go_lossy;
use crate::gopath;
use crate::method::FilesMethod;
use crate::params::PathParams;
use serde::Serialize;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
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

pub async fn handle(method: FilesMethod, params: PathParams) -> Outcome {
    let work = move || match method {
        FilesMethod::Stat => stat(&params.path),
        FilesMethod::List => list(&params.path),
        FilesMethod::Read => read(&params.path, params.max_bytes),
        FilesMethod::Validate => validate(&params.path),
        FilesMethod::ExtractTar => extract_tar(&params.archive_path, &params.dest_dir),
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
            size: meta.size(),
            mode: filemode::mode_string(meta.mode()),
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
    // O_DIRECTORY (reference 7d193f89): a file of any other kind fails the
    // open with ENOTDIR before its permissions are looked at, and a FIFO
    // is refused without waiting for a writer.
    let dir = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NONBLOCK)
        .open(path)
    {
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
            Ok(entry) => names.push(entry.file_name().as_bytes().to_vec()),
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
            let is_dir = fs::metadata(OsStr::from_bytes(&full)).is_ok_and(|m| m.is_dir());
            ListEntry {
                name: go_lossy(&name),
                path: go_lossy(&full),
                is_dir,
            }
        })
        .collect();
    Outcome::ok(&ListResult { entries })
}

fn read(path: &str, max_bytes: i64) -> Outcome {
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if is_missing(&e) => {
            return Outcome::ok(&ReadResult {
                content: String::new(),
                exists: false,
            })
        }
        Err(e) => return Outcome::internal(path_error("stat", path, &e)),
    };
    if meta.is_dir() {
        return Outcome::invalid_params("files.read: path is a directory");
    }
    // maxBytes <= 0 (absent, 0, -1) means no limit.
    let limit = u64::try_from(max_bytes).ok().filter(|&m| m > 0);
    if let Some(limit) = limit {
        if meta.size() > limit {
            return Outcome::invalid_params("files.read: file exceeds maxBytes");
        }
    }
    let mut options = OpenOptions::new();
    options.read(true);
    if !meta.is_file() {
        // FIFOs and devices: never block a thread forever on open/read.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file: File = match options.open(path) {
        Ok(f) => f,
        Err(e) => return Outcome::internal(path_error("open", path, &e)),
    };
    let mut data = Vec::new();
    let result = match limit {
        // Read at most one byte past the limit: a file that grew since the
        // stat is still refused without buffering all of it.
        Some(limit) => file.take(limit.saturating_add(1)).read_to_end(&mut data),
        None => {
            data.reserve(usize::try_from(meta.size()).unwrap_or(0));
            let mut file = file;
            file.read_to_end(&mut data)
        }
    };
    if let Err(e) = result {
        return Outcome::internal(path_error("read", path, &e));
    }
    if let Some(limit) = limit {
        if data.len() as u64 > limit {
            return Outcome::invalid_params("files.read: file exceeds maxBytes");
        }
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

fn extract_tar(archive: &str, dest: &str) -> Outcome {
    if archive.is_empty() || dest.is_empty() {
        return Outcome::invalid_params("archivePath and destDir are required");
    }
    Outcome::ok(&crate::tarx::extract(Path::new(archive), Path::new(dest)))
}
