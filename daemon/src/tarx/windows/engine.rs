//! The Windows half of `tarx`'s engine (issue 43): `destDir` and every
//! entry reached through directory handles ([`crate::base::safedir`]'s
//! Windows half: `NtCreateFile` relative to a handle, reparse points
//! refused), with the stream pipeline ([`super::gzip`], [`super::reader`]),
//! the result, the rules and the error type shared with Unix.
//!
//! What Windows changes (claustrum `docs/record/files-extract-tar.md`,
//! section "Windows" and the Windows VM rows; `docs/UPSTREAM.md` has the
//! divergences):
//! * names: `\` separates as `/` does; the name is joined to `destDir`
//!   and must stay below it ([`local_target`]); a component holding `:`
//!   (a drive, a stream: `C:x`, `a:b`, `a.txt::$DATA`) or naming a device
//!   (`NUL`, `COM1`, `aux`, `NUL.`, `CONIN$`, `COM¹`) is refused as an
//!   unsafe path, as the reference refuses them; the last component loses
//!   its trailing dots and spaces as Win32 strips them (`a.txt.` lands as
//!   `a.txt`, `...` names its directory);
//! * modes: none. The reference sets the read-only attribute on no entry,
//!   whatever the archive's mode; every file and directory is created
//!   owner-only ([`crate::sys::acl`]);
//! * `destDir`: absolute with a drive or share (`C:\x`, `\\srv\share\x`),
//!   not a root; the levels above it are judged as safedir's walk judges
//!   them (ours or the system's, nobody else may remove or rename), the
//!   missing ones made owner-only; the old `destDir` is removed below its
//!   parent's handle, never through a link or junction, never the home or
//!   a directory above it ([`crate::base::homeguard`]).

use super::destdir::{open_parent, path_of, split_dest, DestError};
use super::extract_error::{EntryStep, ExtractError};
use super::removeall::{remove_tree_in, shown};
use super::{copy_data, gzip, leaves_and_returns, reader, ExtractResult, Rules, COPY_BUFFER};
use crate::base::goerr::path_error;
use crate::base::gojson::go_lossy;
use crate::base::safedir::{self, Dir};
use std::fs::File;
use std::io;
use std::path::Path;

/// `ERROR_PATH_NOT_FOUND`: what Go's `MkdirAll` meets on Windows where a
/// level of the path is a file (the record's Windows rows).
const ERROR_PATH_NOT_FOUND: i32 = 3;
/// `ERROR_DIRECTORY`: a handle asked for a directory found a file.
const ERROR_DIRECTORY: i32 = 267;
/// `ERROR_FILENAME_EXCED_RANGE`: a name longer than Windows takes.
const ERROR_FILENAME_EXCED_RANGE: i32 = 206;
/// The longest path Windows takes (UTF-16 units, with Go's `\\?\`
/// long-path form): an entry whose `destDir\…` is longer is refused
/// before any level is made. It also bounds the depth a hostile archive
/// can build to about 16 000 levels (one letter and a separator each),
/// which the Unix engine bounds with `PATH_MAX`; handle-relative opens
/// could go deeper than any path-based tool could then remove.
const MAX_PATH_UNITS: usize = 32_767;

/// Extracts the gzip'd tar at `archive` into `dest`. Never panics on input
/// and never writes outside `dest`.
pub(crate) fn extract(archive: &Path, dest: &Path, rules: Rules) -> ExtractResult {
    let dest_text = go_lossy(dest.as_os_str().as_encoded_bytes());
    let refused = |error: String| ExtractResult {
        success: false,
        file_count: None,
        error,
    };
    let Some((root, names)) = split_dest(dest) else {
        return refused(format!("destDir must be an absolute, non-root path: {dest_text}"));
    };
    let Some((base, above)) = names.split_last() else {
        return refused(format!("destDir must be an absolute, non-root path: {dest_text}"));
    };
    if let Some(error) = crate::base::homeguard::check("destDir", dest) {
        return refused(error);
    }
    let clean_dest = path_of(&root, &names);
    let clean_text = go_lossy(clean_dest.as_os_str().as_encoded_bytes());
    let parent = match open_parent(&root, above, &dest_text) {
        Ok(p) => p,
        Err(e @ DestError::Untrusted { .. }) => return refused(e.to_string()),
        Err(e) => return ExtractResult::failed(&e.into()),
    };
    let archive_text = go_lossy(archive.as_os_str().as_encoded_bytes());
    let file = match open_archive(archive, &archive_text) {
        Ok(f) => f,
        Err(e) => return ExtractResult::failed(&e),
    };
    let parent_text = go_lossy(path_of(&root, above).as_os_str().as_encoded_bytes());
    let result = match unpack(file, &archive_text, &clean_text, &parent, &parent_text, base, rules) {
        Ok(count) => ExtractResult {
            success: true,
            file_count: Some(count),
            error: String::new(),
        },
        Err(e) => ExtractResult::failed(&e),
    };
    // Go's deferred `os.Remove`: the outcome is not reported.
    if std::fs::remove_file(archive).is_err() {
        let _ = std::fs::remove_dir(archive);
    }
    result
}

/// Opens the archive; only a file (or a directory, which fails on its
/// first read as in Go) is read: a pipe or device is refused unread.
fn open_archive(archive: &Path, archive_text: &str) -> Result<File, ExtractError> {
    let os = |source: io::Error| ExtractError::Open {
        archive: archive_text.to_string(),
        source,
    };
    let file = File::open(archive).map_err(os)?;
    let kind = file.metadata().map_err(os)?.file_type();
    if !kind.is_file() && !kind.is_dir() {
        return Err(ExtractError::NotRegular {
            archive: archive_text.to_string(),
        });
    }
    Ok(file)
}

/// The components of an entry below `destDir`, or why it is unsafe:
/// Go's `filepath.Join(destDir, name)` must stay below `destDir`, and no
/// component may hold `:` or name a device. `\` separates as `/` does.
/// The last component loses its trailing dots and spaces (Win32's rule),
/// and is dropped if nothing is left.
fn local_target(name: &[u8], rules: Rules) -> Option<Vec<Vec<u8>>> {
    let slashed: Vec<u8> = name.iter().map(|&b| if b == b'\\' { b'/' } else { b }).collect();
    let parts: Vec<&[u8]> = slashed.split(|&b| b == b'/').filter(|p| !p.is_empty()).collect();
    if parts.iter().any(|p| p.contains(&b':') || is_device(p)) {
        return None;
    }
    let relative = {
        let mut r = slashed.as_slice();
        while let [b'/', rest @ ..] = r {
            r = rest;
        }
        r
    };
    if rules.no_come_back && leaves_and_returns(relative) {
        return None;
    }
    // Joined below `destDir`: a `..` that climbs past it leaves, even if
    // a later name would come back (its names are not known here, and
    // Go's prefix test would refuse `..\dest2` anyway); a `..` that stays
    // inside is resolved.
    let mut comps: Vec<Vec<u8>> = Vec::new();
    let mut climbed = false;
    for part in &parts {
        match *part {
            b"." => {}
            b".." => {
                if comps.pop().is_none() {
                    climbed = true;
                }
            }
            other => comps.push(other.to_vec()),
        }
    }
    if climbed {
        return None;
    }
    if let Some(last) = comps.last_mut() {
        while matches!(last.last(), Some(b'.' | b' ')) {
            last.pop();
        }
        if last.is_empty() {
            comps.pop();
        }
    }
    Some(comps)
}

/// Whether a component names a Win32 device: `CON`, `PRN`, `AUX`, `NUL`,
/// `CONIN$`, `CONOUT$`, `COM1`–`COM9`, `LPT1`–`LPT9` (and `¹²³`), any
/// letter case, trailing dots and spaces ignored; `CON.txt` and `COM0` are
/// names (the reference's rows).
fn is_device(part: &[u8]) -> bool {
    let mut end = part.len();
    while end > 0 && matches!(part[end - 1], b'.' | b' ') {
        end -= 1;
    }
    let Ok(stem) = std::str::from_utf8(&part[..end]) else {
        return false;
    };
    let upper = stem.to_ascii_uppercase();
    if matches!(upper.as_str(), "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$") {
        return true;
    }
    ["COM", "LPT"].iter().any(|p| {
        upper
            .strip_prefix(p)
            .is_some_and(|n| matches!(n, "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" | "¹" | "²" | "³"))
    })
}

/// How a failed step is worded for the build: Go's path texts
/// (`mkdir <destDir>\a: …`, `open <destDir>\d: …`) or build 5fd08069's,
/// relative to `destDir` (`mkdirat a: …`, `openat s\d: …`).
struct Words<'a> {
    relative: bool,
    dest: &'a str,
}

impl Words<'_> {
    fn joined(&self, comps: &[Vec<u8>]) -> String {
        let rel = comps.iter().map(|c| go_lossy(c)).collect::<Vec<_>>().join("\\");
        if self.relative {
            if rel.is_empty() {
                ".".to_string()
            } else {
                rel
            }
        } else if rel.is_empty() {
            self.dest.to_string()
        } else {
            shown(self.dest, rel.as_bytes())
        }
    }

    /// A directory level `comps[..=at]` failed at `step`.
    fn dir(&self, comps: &[Vec<u8>], at: usize, made: bool, e: &io::Error) -> String {
        let upto = &comps[..=at];
        // A file where a directory is to be: Go's `MkdirAll` on Windows
        // meets "path not found"; 5fd08069 says its `mkdirat` found the
        // last level taken, or its `openat` of an earlier one failed.
        let file_there = e.raw_os_error() == Some(ERROR_DIRECTORY) || e.kind() == io::ErrorKind::AlreadyExists;
        if !self.relative {
            let e = if file_there {
                io::Error::from_raw_os_error(ERROR_PATH_NOT_FOUND)
            } else {
                io::Error::from_raw_os_error(e.raw_os_error().unwrap_or(ERROR_PATH_NOT_FOUND))
            };
            return path_error("mkdir", &self.joined(upto), &e);
        }
        if file_there && at + 1 == comps.len() {
            return path_error("mkdirat", &self.joined(upto), &file_exists());
        }
        if file_there {
            return path_error(
                "openat",
                &self.joined(upto),
                &io::Error::from_raw_os_error(ERROR_PATH_NOT_FOUND),
            );
        }
        let op = if made { "mkdirat" } else { "openat" };
        path_error(op, &self.joined(upto), e)
    }

    /// A file `comps` could not be created.
    fn create(&self, comps: &[Vec<u8>], e: &io::Error) -> String {
        let op = if self.relative { "openat" } else { "open" };
        path_error(op, &self.joined(comps), e)
    }
}

fn file_exists() -> io::Error {
    io::Error::new(io::ErrorKind::AlreadyExists, "file exists")
}

fn is_a_directory() -> io::Error {
    io::Error::new(io::ErrorKind::IsADirectory, "is a directory")
}

/// Walks (making owner-only as needed) `comps` below `root`; `None` is
/// `root` itself. A failure gives the index of the level, whether it was
/// being made, and the OS error.
fn walk_dirs(root: &Dir, comps: &[Vec<u8>]) -> Result<Option<Dir>, (usize, bool, io::Error)> {
    let mut current: Option<Dir> = None;
    for (at, comp) in comps.iter().enumerate() {
        let parent = current.as_ref().unwrap_or(root);
        let next = match safedir::open_dir_in(parent, comp) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match safedir::make_dir_in(parent, comp, 0o700) {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err((at, true, e)),
                    _ => {}
                }
                safedir::open_dir_in(parent, comp).map_err(|e| (at, true, e))?
            }
            Err(e) => return Err((at, false, e)),
        };
        current = Some(next);
    }
    Ok(current)
}

/// Creates `name` in `dir` as a fresh owner-only file. A directory of
/// that name is "is a directory", as in Go; a previous file (a duplicate
/// entry) is removed first, so nothing is written into what was there.
fn create_file(dir: &Dir, name: &[u8]) -> io::Result<File> {
    if safedir::open_dir_in(dir, name).is_ok() {
        return Err(is_a_directory());
    }
    match safedir::unlink_in(dir, name) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    safedir::open_file_at(dir, name, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o600)
}

fn unpack(
    file: File,
    archive_text: &str,
    dest: &str,
    parent: &Dir,
    parent_text: &str,
    base: &[u8],
    rules: Rules,
) -> Result<u64, ExtractError> {
    let words = Words {
        relative: rules.relative_texts,
        dest,
    };
    remove_tree_in(parent, base, parent_text.as_bytes())?;
    let mkdir = |source: io::Error| DestError::Mkdir {
        op: "mkdir",
        path: dest.to_string(),
        source,
    };
    safedir::make_dir_in(parent, base, 0o700).map_err(mkdir)?;
    let root = safedir::open_dir_in(parent, base).map_err(mkdir)?;
    if !matches!(safedir::owner_of(&root), Ok(o) if o == safedir::own_uid()) {
        return Err(DestError::NotOurs { dest: dest.to_string() }.into());
    }
    let archive_text = archive_text.to_string();
    let source_error = Box::new(move |e: &io::Error| path_error("read", &archive_text, e));
    let gz = gzip::GzipReader::new(file, source_error)?;
    let mut tar = reader::TarReader::new(gz);
    let mut buf = vec![0u8; COPY_BUFFER];
    let mut count = 0u64;
    while let Some(hdr) = tar.next_entry()? {
        let name = &hdr.name;
        let Some(comps) = local_target(name, rules) else {
            return Err(ExtractError::UnsafePath { name: name.clone() });
        };
        if !comps.is_empty() && too_long(dest, &comps) {
            let e = io::Error::from_raw_os_error(ERROR_FILENAME_EXCED_RANGE);
            let (step, detail) = if hdr.typeflag == b'5' {
                (EntryStep::Dir, words.dir(&comps, comps.len() - 1, true, &e))
            } else {
                (EntryStep::File, words.create(&comps, &e))
            };
            return Err(ExtractError::Entry {
                step,
                name: name.clone(),
                detail,
                source: e,
            });
        }
        match hdr.typeflag {
            b'5' => {
                walk_dirs(&root, &comps).map_err(|(at, made, e)| ExtractError::Entry {
                    step: EntryStep::Dir,
                    name: name.clone(),
                    detail: words.dir(&comps, at, made, &e),
                    source: e,
                })?;
            }
            b'0' => {
                let create_err = |e: io::Error| ExtractError::Entry {
                    step: EntryStep::File,
                    name: name.clone(),
                    detail: words.create(&comps, &e),
                    source: e,
                };
                let Some((leaf, parents)) = comps.split_last() else {
                    return Err(create_err(is_a_directory()));
                };
                let dir = walk_dirs(&root, parents).map_err(|(at, made, e)| ExtractError::Entry {
                    step: EntryStep::Parent,
                    name: name.clone(),
                    detail: words.dir(parents, at, made, &e),
                    source: e,
                })?;
                let dir = dir.as_ref().unwrap_or(&root);
                let target_text = shown(dest, words_rel(&comps).as_bytes());
                let mut out = create_file(dir, leaf).map_err(create_err)?;
                if let Err(e) = copy_data(&mut tar, &mut out, &mut buf, &target_text) {
                    // No half-written file survives a failure.
                    drop(out);
                    let _ = safedir::unlink_in(dir, leaf);
                    return Err(e);
                }
                count += 1;
            }
            other => {
                return Err(ExtractError::Unsupported {
                    typeflag: other,
                    name: name.clone(),
                });
            }
        }
    }
    tar.drain_to_end()?;
    let marker = shown(dest, b".synced").into_bytes();
    create_marker(&root).map_err(|source| ExtractError::Marker { marker, source })?;
    Ok(count)
}

/// Whether `dest\comps…` is longer than [`MAX_PATH_UNITS`] UTF-16 units
/// (counted without building it).
fn too_long(dest: &str, comps: &[Vec<u8>]) -> bool {
    let units = |b: &[u8]| String::from_utf8_lossy(b).encode_utf16().count();
    let mut total = dest.encode_utf16().count();
    for comp in comps {
        total += 1 + units(comp);
        if total > MAX_PATH_UNITS {
            return true;
        }
    }
    false
}

fn words_rel(comps: &[Vec<u8>]) -> String {
    comps.iter().map(|c| go_lossy(c)).collect::<Vec<_>>().join("\\")
}

/// `os.WriteFile(destDir\.synced, nil, 0600)`: an empty file of ours, a
/// `.synced` directory an entry made replaced (the record's marker rows).
fn create_marker(root: &Dir) -> io::Result<()> {
    if safedir::open_dir_in(root, b".synced").is_ok() {
        remove_tree_in(root, b".synced", b"").map_err(|e| io::Error::other(e.to_string()))?;
    }
    safedir::open_file_at(root, b".synced", libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o600).map(drop)
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
