//! The Unix engine of `tarx`: `destDir` and every entry reached
//! through directory descriptors (`openat`, `mkdirat`, `unlinkat`), as
//! the module doc of [`super`] describes.

use super::destdir::{self, create_dest, DestParent};
use super::extract_error::{EntryStep, ExtractError};
use super::removeall::{remove_all, split_path};
use super::texts::{DirStep, Texts};
use super::{
    copy_data, cstr, gzip, last_err, leaves_and_returns, open_dir_at, reader, ExtractResult, Rules, COPY_BUFFER,
};
use crate::base::goerr::path_error;
use crate::base::gojson::go_lossy;
use crate::base::gopath;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Linux `PATH_MAX`. Walking with `openat` could go deeper than a path
/// lookup can; Go's path-based calls fail there with ENAMETOOLONG, and so
/// do we, which also keeps later `RemoveAll` recursion shallow.
const PATH_MAX: usize = 4096;

/// Extracts the gzip'd tar at `archive` into `dest`. Never panics on input
/// and never writes outside `dest`.
pub(crate) fn extract(archive: &Path, dest: &Path, rules: Rules) -> ExtractResult {
    let dest_b = dest.as_os_str().as_bytes();
    if !gopath::is_abs(dest_b) || gopath::clean(dest_b) == b"/" {
        return ExtractResult {
            success: false,
            file_count: None,
            error: format!("destDir must be an absolute, non-root path: {}", go_lossy(dest_b)),
        };
    }
    // remora's own refusal (the reference wipes the home directory): the
    // same body as the check above, before the archive is opened.
    if let Some(error) = crate::base::homeguard::check("destDir", dest) {
        return ExtractResult {
            success: false,
            file_count: None,
            error,
        };
    }
    // remora's own refusal too (audit F2): the directories above destDir
    // must be ones nobody else can change. The wipe and the extraction go
    // on from the descriptor this walk returns.
    let parent = match destdir::trust(dest_b) {
        Ok(parent) => parent,
        Err(error) => {
            return ExtractResult {
                success: false,
                file_count: None,
                error: error.to_string(),
            }
        }
    };
    let archive_text = go_lossy(archive.as_os_str().as_bytes());
    let file = match open_archive(archive, &archive_text) {
        Ok(f) => f,
        Err(e) => return ExtractResult::failed(&e),
    };
    let result = match unpack(file, &archive_text, dest_b, &parent, rules) {
        Ok(count) => ExtractResult {
            success: true,
            file_count: Some(count),
            error: String::new(),
        },
        Err(e) => ExtractResult::failed(&e),
    };
    remove(archive.as_os_str().as_bytes());
    result
}

/// Opens the archive without blocking on its kind (`O_NONBLOCK`, so a
/// FIFO without a writer opens at once), then checks that kind on the
/// descriptor: a regular file (or a directory, which fails later as in
/// Go) is used; anything else (a FIFO, socket or device) is refused
/// before a byte is read: a FIFO would block a pool thread until some
/// writer came. Either failure consumes nothing, and the archive is not
/// removed. `archive_text` is the path for the error texts.
fn open_archive(archive: &Path, archive_text: &str) -> Result<File, ExtractError> {
    use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
    let os = |source: io::Error| ExtractError::Open {
        archive: archive_text.to_string(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(archive)
        .map_err(os)?;
    let kind = file.metadata().map_err(os)?.file_type();
    if kind.is_fifo() || kind.is_socket() || kind.is_char_device() || kind.is_block_device() {
        return Err(ExtractError::NotRegular {
            archive: archive_text.to_string(),
        });
    }
    Ok(file)
}

/// Go's `os.Remove`: unlink, else rmdir; the outcome is not reported.
fn remove(path: &[u8]) {
    if let Ok(c) = CString::new(path) {
        // SAFETY: `c` is a valid NUL-terminated path.
        unsafe {
            if libc::unlink(c.as_ptr()) != 0 {
                libc::rmdir(c.as_ptr());
            }
        }
    }
}

fn unpack(file: File, archive_text: &str, dest: &[u8], parent: &DestParent, rules: Rules) -> Result<u64, ExtractError> {
    let texts = Texts {
        relative: rules.relative_texts,
    };
    let clean_dest = gopath::clean(dest);
    if !texts.relative {
        let (_, base) = split_path(&clean_dest);
        remove_all(dest, &base, parent.now())?;
    }
    let root = create_dest(&clean_dest, parent, texts)?;
    let archive_text = archive_text.to_string();
    let source_error = Box::new(move |e: &io::Error| path_error("read", &archive_text, e));
    let gz = gzip::GzipReader::new(file, source_error)?;
    let mut tar = reader::TarReader::new(gz);
    let mut buf = vec![0u8; COPY_BUFFER];
    let mut count = 0u64;
    while let Some(hdr) = tar.next_entry()? {
        let name = &hdr.name;
        let target = gopath::join(&[dest, name]);
        let unsafe_path = || ExtractError::UnsafePath { name: name.clone() };
        if rules.no_come_back && leaves_and_returns(name) {
            return Err(unsafe_path());
        }
        let rel: &[u8] = if target == clean_dest {
            b""
        } else if target.starts_with(&clean_dest) && target.get(clean_dest.len()) == Some(&b'/') {
            &target[clean_dest.len() + 1..]
        } else {
            return Err(unsafe_path());
        };
        let comps: Vec<&[u8]> = rel.split(|&c| c == b'/').filter(|c| !c.is_empty()).collect();
        match hdr.typeflag {
            b'5' => {
                walk_dirs(&root, &clean_dest, &comps).map_err(|(at, step, e)| ExtractError::Entry {
                    step: EntryStep::Dir,
                    name: name.clone(),
                    detail: texts.dir(&clean_dest, &comps, at, step, &e),
                    source: e,
                })?;
            }
            b'0' => {
                // Build 89cb6289 names the entry before the OS error:
                // `mkdir parent <entry>: ` when a directory above it cannot
                // be made, `create <entry>: ` when the file cannot.
                let create_err = |e: io::Error| ExtractError::Entry {
                    step: EntryStep::File,
                    name: name.clone(),
                    detail: texts.create(&target, &comps, &e),
                    source: e,
                };
                let Some((leaf, parents)) = comps.split_last() else {
                    // The entry names destDir itself.
                    return Err(create_err(io::Error::from_raw_os_error(libc::EISDIR)));
                };
                let parent = walk_dirs(&root, &clean_dest, parents).map_err(|(at, step, e)| ExtractError::Entry {
                    step: EntryStep::Parent,
                    name: name.clone(),
                    detail: texts.dir(&clean_dest, parents, at, step, &e),
                    source: e,
                })?;
                if target.len() >= PATH_MAX {
                    return Err(create_err(io::Error::from_raw_os_error(libc::ENAMETOOLONG)));
                }
                let dir = parent.as_ref().unwrap_or(&root);
                let target_text = go_lossy(&target);
                let mode = if rules.exec_bit && hdr.mode & 0o100 != 0 {
                    0o700
                } else {
                    0o600
                };
                let mut out = create_file(dir, leaf, mode).map_err(create_err)?;
                if let Err(e) = copy_data(&mut tar, &mut out, &mut buf, &target_text) {
                    // No half-written file survives a failure: the archive
                    // was cut short, corrupt, or the disk was full.
                    drop(out);
                    unlink_at(dir, leaf);
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
    // Integrity of the whole stream, trailers included (see
    // `TarReader::drain_to_end`): an archive whose gzip is cut or corrupt
    // after the last entry fails instead of reporting success.
    tar.drain_to_end()?;
    let marker = gopath::join(&[dest, b".synced"]);
    create_marker(&root).map_err(|source| ExtractError::Marker { marker, source })?;
    Ok(count)
}

/// Removes the file `name` in `dir`; a failure is not reported (the
/// extraction is already failing with a better error).
fn unlink_at(dir: &OwnedFd, name: &[u8]) {
    if let Ok(c) = cstr(name) {
        // SAFETY: valid dirfd and NUL-terminated name.
        unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) };
    }
}

/// Walks (creating 0700 as needed) `comps` below `root`; returns the last
/// directory's fd, `None` for `root` itself. A failure says which
/// component (its index), at which step, with the OS error; [`Texts::dir`]
/// words it for the build (Go's `os.MkdirAll`: `mkdir <path>: <err>`, or
/// 5fd08069's `mkdirat`/`openat` relative to `destDir`).
fn walk_dirs(
    root: &OwnedFd,
    root_path: &[u8],
    comps: &[&[u8]],
) -> Result<Option<OwnedFd>, (usize, DirStep, io::Error)> {
    let mut current: Option<OwnedFd> = None;
    let mut path_len = root_path.len();
    for (at, comp) in comps.iter().enumerate() {
        path_len += 1 + comp.len();
        if path_len >= PATH_MAX {
            return Err((at, DirStep::Open, io::Error::from_raw_os_error(libc::ENAMETOOLONG)));
        }
        let parent = current.as_ref().unwrap_or(root);
        let fd = match open_dir_at(Some(parent), comp) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                let c = cstr(comp).map_err(|e| (at, DirStep::Make, e))?;
                // SAFETY: valid dirfd and NUL-terminated name.
                if unsafe { libc::mkdirat(parent.as_raw_fd(), c.as_ptr(), 0o700) } != 0 {
                    let e = last_err();
                    if e.raw_os_error() != Some(libc::EEXIST) {
                        return Err((at, DirStep::Make, e));
                    }
                }
                open_dir_at(Some(parent), comp).map_err(|e| (at, DirStep::Reopen, e))?
            }
            Err(e) => return Err((at, DirStep::Open, e)),
        };
        current = Some(fd);
    }
    Ok(current)
}

/// Creates `name` in `dir` as a fresh file of `mode` (0600 or 0700). A
/// previous entry of that name (a duplicate in the archive) is unlinked
/// first, as Go's `O_TRUNC` would replace its content, but we never write
/// into an existing inode.
fn create_file(dir: &OwnedFd, name: &[u8], mode: libc::mode_t) -> io::Result<File> {
    let c = cstr(name)?;
    // SAFETY: valid dirfd and NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } != 0 {
        let e = last_err();
        if e.raw_os_error() != Some(libc::ENOENT) {
            return Err(e);
        }
    }
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: valid dirfd and NUL-terminated name.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, libc::c_uint::from(mode)) };
    if fd < 0 {
        return Err(last_err());
    }
    // SAFETY: `fd` is a fresh descriptor we own.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// `os.WriteFile(destDir/.synced, nil, 0600)`, without following a link.
fn create_marker(root: &OwnedFd) -> io::Result<()> {
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: valid dirfd and NUL-terminated name.
    let fd = unsafe { libc::openat(root.as_raw_fd(), c".synced".as_ptr(), flags, 0o600 as libc::c_uint) };
    if fd < 0 {
        return Err(last_err());
    }
    // SAFETY: `fd` is a fresh descriptor we own; dropping closes it.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok(())
}
