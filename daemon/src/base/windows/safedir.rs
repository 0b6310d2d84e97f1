//! The Windows half of `base::safedir` (issue 43): opening a directory
//! path that other local users cannot have tampered with, one level at a
//! time, as a directory handle, and working inside it by handle. Same
//! names and signatures as the Unix half; what the Unix words mean here:
//!
//! * **relative to a verified directory**: a [`Dir`] is an open directory
//!   handle, and every `*_in`/`*_at` operation is `NtCreateFile` with the
//!   handle as its `RootDirectory` and a single name (`openat`'s Windows
//!   form, [`crate::sys::openat`]), renames are `FileRenameInformation`
//!   with the same root, and listings read the directory through a
//!   handle reopened from it. A path is never resolved again, so renaming or replacing a directory
//!   above (or the directory itself) after it was judged redirects
//!   nothing. Names are one component: empty, `.`, `..`, `\`, `/`, `:`
//!   (a stream), the characters Win32 refuses (`*?"<>|`, controls), a
//!   trailing dot or space (Win32 strips them, so the name would alias
//!   another) and device names (`NUL`, `CON`, `COM1.txt`, …) fail with
//!   `ERROR_INVALID_NAME` before any call.
//! * **opened without following links**: every open passes
//!   `FILE_OPEN_REPARSE_POINT`, so a symbolic link or junction is opened
//!   itself, and is then refused (`ERROR_CANT_RESOLVE_FILENAME`, where
//!   Unix gets `ELOOP`) when its reparse tag is a name surrogate (links,
//!   junctions, the kinds that redirect a name). Other reparse points
//!   (OneDrive placeholders, deduplicated files) are the object itself
//!   and are used.
//! * **owner-only**: what is created here (missing levels, [`make_dir_in`],
//!   files opened with `O_CREAT`) is created with
//!   [`crate::sys::acl::Descriptor::owner_only_files`]: owned by the
//!   current user, a protected DACL granting that user alone full access.
//!   Windows has no mode bits: the `mode` arguments are ignored, and
//!   everything is created owner-only.
//! * **owner checks**: "ours" is the owner SID being this process's user
//!   SID ([`own_uid`]); "root" is `SYSTEM`, `Administrators` or
//!   `TrustedInstaller`, which own the system's directories (`C:\`,
//!   `C:\Users`) and can override any DACL anyway.
//! * **writable by others**: the DACL's allowing entries that apply to
//!   the directory itself (inherit-only ones do not), for anyone but us
//!   and those three. Rights that let another user remove, rename or
//!   re-permission what we keep there (`DELETE`, `FILE_DELETE_CHILD`,
//!   `WRITE_DAC`, `WRITE_OWNER`, `GENERIC_ALL`) refuse a level, as
//!   write without the sticky bit does on Unix
//!   ([`UnsafeDir::WritableByOthers`]). Rights to add entries only
//!   (`FILE_ADD_FILE`, `FILE_ADD_SUBDIRECTORY`, `GENERIC_WRITE`) are the
//!   sticky bit's case, as `C:\` grants authenticated users: such a level
//!   may be passed through, and a private directory asked for there is
//!   our own subdirectory `remora-<SID>` in it. No DACL at all grants
//!   everyone everything. Deny entries are not counted (they only take
//!   away), so the judgement errs towards refusing.
//!
//! The walk starts at the path's root (`C:\`, `\\server\share\`) and
//! holds each level open while it opens the next, as the Unix half does
//! from `/`; missing levels are created owner-only (`FILE_CREATE`, so a
//! name another user wins a race for is opened and judged, not trusted).
//!
//! Under Wine (8.0, what `ci/wine-smoke` runs the tests on) three of these
//! do not hold, as the tests note where they skip: Wine keeps no DACL on
//! files (it renders the Unix mode bits as one and maps a given DACL onto
//! them), makes no links or junctions (and follows Unix symlinks itself,
//! unseen), and resolves a handle through the path it was opened by.

use std::fmt;
use std::io;
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use std::path::{Component, Path, PathBuf, Prefix};

use crate::sys::acl::{self, Descriptor, Security, Sid};
use crate::sys::openat::{self, ERROR_CANT_RESOLVE_FILENAME, ERROR_DIRECTORY, ERROR_INVALID_NAME};
use windows_sys::Wdk::Storage::FileSystem::{
    FILE_CREATE, FILE_DIRECTORY_FILE, FILE_NON_DIRECTORY_FILE, FILE_OPEN, FILE_OPEN_IF,
};
use windows_sys::Win32::Foundation::{GENERIC_ALL, GENERIC_READ, GENERIC_WRITE, HANDLE};
use windows_sys::Win32::Storage::FileSystem::{
    DELETE, FILE_ADD_FILE, FILE_ADD_SUBDIRECTORY, FILE_APPEND_DATA, FILE_ATTRIBUTE_DIRECTORY, FILE_DELETE_CHILD,
    FILE_GENERIC_READ, FILE_GENERIC_WRITE, FILE_LIST_DIRECTORY, FILE_READ_ATTRIBUTES, FILE_READ_DATA, FILE_TRAVERSE,
    FILE_WRITE_DATA, READ_CONTROL, SYNCHRONIZE, WRITE_DAC, WRITE_OWNER,
};

/// An open directory: the handle every operation inside it is relative
/// to (the Unix half's directory fd). Opened with
/// `FILE_LIST_DIRECTORY | FILE_TRAVERSE | READ_CONTROL` and shared for
/// everything, deletion included: nothing here goes back to its path, so
/// it need not pin it, and the daemon's own removal of a directory it
/// still holds (the replay store drops its directory while the handle
/// lives) works as on Unix.
#[derive(Debug)]
pub(crate) struct Dir(OwnedHandle);

impl Dir {
    fn raw(&self) -> HANDLE {
        self.0.as_raw_handle()
    }
}

/// Why a directory is not safe to use.
#[derive(Debug)]
pub(crate) enum UnsafeDir {
    /// The path is not absolute (drive or share and root), names `..`,
    /// is a device path (`\\.\`), or has a level that is no plain name.
    NotPlain(PathBuf),
    /// A level is owned by another user (not us, `SYSTEM`,
    /// `Administrators` or `TrustedInstaller`).
    ForeignOwner { path: PathBuf, owner: Sid },
    /// A level whose DACL lets others remove, rename or re-permission
    /// what is in it (`mask`: the rights they hold).
    WritableByOthers { path: PathBuf, mask: u32 },
    /// A level is a link, a junction or not a directory.
    NotADirectory(PathBuf),
    /// Our own subdirectory in a shared directory exists, but others can
    /// add to it, and it was not made by this walk, so its DACL is not
    /// ours to change.
    TooWide { path: PathBuf, mask: u32 },
    /// A system call failed.
    Io {
        op: &'static str,
        path: PathBuf,
        error: io::Error,
    },
}

impl fmt::Display for UnsafeDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnsafeDir::NotPlain(p) => write!(
                f,
                "{}: not an absolute path of plain names without '..'",
                p.display()
            ),
            UnsafeDir::ForeignOwner { path, owner } => write!(
                f,
                "{}: owned by {owner}, not by this user, SYSTEM or Administrators",
                path.display()
            ),
            UnsafeDir::WritableByOthers { path, mask } => write!(
                f,
                "{}: other users may delete or re-permission its entries (their rights {mask:#x})",
                path.display()
            ),
            UnsafeDir::NotADirectory(p) => write!(f, "{}: a link, a junction or not a directory", p.display()),
            UnsafeDir::TooWide { path, mask } => write!(
                f,
                "{}: other users may write in it (their rights {mask:#x}) and it was not made by this daemon, so left as it is; give it an owner-only DACL or remove it",
                path.display()
            ),
            UnsafeDir::Io { op, path, error } => write!(f, "{op} {}: {error}", path.display()),
        }
    }
}

impl std::error::Error for UnsafeDir {}

// ---- Who counts as us -----------------------------------------------------

/// Rights that let their holder remove, rename or re-permission entries
/// of a directory, or the directory itself.
const CONTROL: u32 = DELETE | WRITE_DAC | WRITE_OWNER | FILE_DELETE_CHILD | GENERIC_ALL;
/// Rights that let their holder add entries (the sticky case), control
/// included.
const ADD: u32 = FILE_ADD_FILE | FILE_ADD_SUBDIRECTORY | GENERIC_WRITE | CONTROL;
/// `INHERIT_ONLY_ACE`: the entry is for children, not this object.
const INHERIT_ONLY: u8 = 0x08;

/// Who we are, for the ownership checks.
#[derive(Debug, Clone)]
struct Identity {
    me: Sid,
    /// `SYSTEM`, `Administrators`, `TrustedInstaller`: the Windows root.
    system: Vec<Sid>,
}

/// `OWNER RIGHTS`: an entry for whoever owns the object.
const OWNER_RIGHTS: &str = "S-1-3-4";
/// `CREATOR OWNER`: a placeholder meaningful only on inherit-only entries.
const CREATOR_OWNER: &str = "S-1-3-0";

impl Identity {
    fn current() -> Identity {
        let system = [
            "S-1-5-18",
            "S-1-5-32-544",
            "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464",
        ]
        .iter()
        .filter_map(|s| Sid::parse(s))
        .collect();
        Identity { me: own_uid(), system }
    }

    fn trusted(&self, sid: &Sid) -> bool {
        *sid == self.me || self.system.contains(sid)
    }

    /// The rights the DACL gives the directory itself to anyone but us
    /// and the system, generic rights unmapped.
    fn others_rights(&self, sec: &Security) -> u32 {
        let Some(aces) = &sec.dacl else {
            return u32::MAX;
        };
        let owner_rights = Sid::parse(OWNER_RIGHTS);
        let creator_owner = Sid::parse(CREATOR_OWNER);
        let mut mask = 0;
        for ace in aces.iter().filter(|a| a.allow && a.flags & INHERIT_ONLY == 0) {
            let other = match &ace.sid {
                None => true,
                Some(sid) if Some(sid) == owner_rights.as_ref() => !self.trusted(&sec.owner),
                Some(sid) if Some(sid) == creator_owner.as_ref() => false,
                Some(sid) => !self.trusted(sid),
            };
            if other {
                mask |= ace.mask;
            }
        }
        mask
    }
}

fn security(dir: &Dir, path: &Path) -> Result<Security, UnsafeDir> {
    acl::security_of(dir.raw()).map_err(|error| UnsafeDir::Io {
        op: "GetSecurityInfo",
        path: path.to_path_buf(),
        error,
    })
}

/// Judges one intermediate level: owned by us or the system, and nobody
/// else may remove or rename what is in it.
fn check_level(sec: &Security, path: &Path, me: &Identity) -> Result<(), UnsafeDir> {
    if !me.trusted(&sec.owner) {
        return Err(UnsafeDir::ForeignOwner {
            path: path.to_path_buf(),
            owner: sec.owner.clone(),
        });
    }
    let mask = me.others_rights(sec);
    if mask & CONTROL != 0 {
        return Err(UnsafeDir::WritableByOthers {
            path: path.to_path_buf(),
            mask,
        });
    }
    Ok(())
}

/// Whether users other than us may add entries to the directory (the
/// sticky case) or more.
fn others_can_write(sec: &Security, me: &Identity) -> bool {
    me.others_rights(sec) & ADD != 0
}

// ---- Opening relative to a handle -------------------------------------------

/// The rights a [`Dir`] is opened with.
const DIR_ACCESS: u32 = FILE_LIST_DIRECTORY | FILE_TRAVERSE | READ_CONTROL | FILE_READ_ATTRIBUTES | SYNCHRONIZE;

/// `name` as the UTF-16 of one plain component, or `ERROR_INVALID_NAME`.
/// `name` is UTF-8, or WTF-8 as [`read_names`] gives names that are not
/// valid Unicode.
fn component(name: &[u8]) -> io::Result<Vec<u16>> {
    let invalid = || io::Error::from_raw_os_error(ERROR_INVALID_NAME);
    let wide = decode_wtf8(name).ok_or_else(invalid)?;
    if !plain_name(&wide) {
        return Err(invalid());
    }
    Ok(wide)
}

/// Whether `name` is one component Win32 takes as it is.
fn plain_name(name: &[u16]) -> bool {
    let dot = u16::from(b'.');
    if name.is_empty() || name == [dot] || name == [dot, dot] {
        return false;
    }
    if name
        .iter()
        .any(|&c| c < 0x20 || b"\\/:*?\"<>|".iter().any(|&b| u16::from(b) == c))
    {
        return false;
    }
    if matches!(name.last(), Some(&c) if c == dot || c == u16::from(b' ')) {
        return false;
    }
    // A device name, alone or before an extension, names the device in
    // Win32 paths (`NUL.txt` is `NUL`).
    let stem = name.split(|&c| c == dot).next().unwrap_or(name);
    let stem = String::from_utf16_lossy(stem)
        .trim_end_matches(' ')
        .to_ascii_uppercase();
    let device = matches!(stem.as_str(), "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$")
        || ["COM", "LPT"].iter().any(|p| {
            stem.strip_prefix(p).is_some_and(|n| {
                let mut chars = n.chars();
                matches!((chars.next(), chars.next()), (Some('0'..='9' | '¹' | '²' | '³'), None))
            })
        });
    !device
}

/// Decodes UTF-8, or WTF-8 (lone surrogates as 3-byte sequences, what
/// `OsString::into_encoded_bytes` gives on Windows), to UTF-16.
fn decode_wtf8(bytes: &[u8]) -> Option<Vec<u16>> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b0 = u32::from(bytes[i]);
        let (mut cp, n) = match b0 {
            0x00..=0x7f => (b0, 1),
            0xc0..=0xdf => (b0 & 0x1f, 2),
            0xe0..=0xef => (b0 & 0x0f, 3),
            0xf0..=0xf7 => (b0 & 0x07, 4),
            _ => return None,
        };
        let tail = bytes.get(i + 1..i + n)?;
        for &b in tail {
            if b & 0xc0 != 0x80 {
                return None;
            }
            cp = cp << 6 | u32::from(b & 0x3f);
        }
        let least = [0, 0, 0x80, 0x800, 0x10000][n];
        if cp < least || cp > 0x10ffff {
            return None;
        }
        if cp >= 0x10000 {
            let c = cp - 0x10000;
            out.push(0xd800 | (c >> 10) as u16);
            out.push(0xdc00 | (c & 0x3ff) as u16);
        } else {
            out.push(cp as u16);
        }
        i += n;
    }
    Some(out)
}

/// Opens the root of an absolute path (`C:\`, `\\server\share\`): the
/// one open by path.
fn open_root(root: &Path) -> io::Result<Dir> {
    openat::open_dir_path(root, DIR_ACCESS).map(Dir)
}

/// Opens the directory `name` of `parent`, or creates it owner-only
/// first when `create` (then says whether it did).
fn open_dir_at(parent: &Dir, name: &[u16], create: bool) -> io::Result<(Dir, bool)> {
    if create {
        let sd = Descriptor::owner_only_files()?;
        match openat::open_at(
            parent.raw(),
            name,
            DIR_ACCESS,
            FILE_CREATE,
            FILE_DIRECTORY_FILE,
            Some(&sd),
        ) {
            Ok(h) => return Ok((Dir(h), true)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    let h = openat::open_at(parent.raw(), name, DIR_ACCESS, FILE_OPEN, FILE_DIRECTORY_FILE, None)?;
    Ok((Dir(h), false))
}

/// A link, a junction or a file where a directory was to be: report it
/// as what it is.
fn refine(error: io::Error, path: &Path) -> UnsafeDir {
    match error.raw_os_error() {
        Some(ERROR_CANT_RESOLVE_FILENAME) | Some(ERROR_DIRECTORY) => UnsafeDir::NotADirectory(path.to_path_buf()),
        _ => UnsafeDir::Io {
            op: "open",
            path: path.to_path_buf(),
            error,
        },
    }
}

// ---- The walk -------------------------------------------------------------

/// A private directory of ours, open.
#[derive(Debug)]
pub(crate) struct PrivateDir {
    pub fd: Dir,
    /// The directory `fd` is: the path asked for, or (when others can
    /// write that one) our own subdirectory in it.
    pub path: PathBuf,
}

/// The subdirectory of our own used inside a configured directory others
/// can write: `remora-<SID>`, so that users sharing one directory each
/// get theirs.
fn own_subdir_name(me: &Sid) -> String {
    format!("remora-{me}")
}

/// Opens `path` as a private directory of ours, creating missing levels
/// owner-only. See the module doc for what is refused, and for the
/// subdirectory used when others can write `path` itself.
pub(crate) fn open_private_dir(path: &Path) -> Result<PrivateDir, UnsafeDir> {
    open_private_dir_as(path, &Identity::current())
}

/// Opens an existing directory `path` of ours without creating or
/// changing anything: every level is judged as in [`open_private_dir`],
/// and the last one must be owned by us and pass the same rule as the
/// levels above it (others may at most add entries), but it may stay
/// readable by others.
// Its daemon callers (the log's rotation in `rundir`, `launch/settings`)
// are Unix-only so far (issue 43); the Wine tests use it.
#[allow(dead_code)]
pub(crate) fn open_own_dir(path: &Path) -> Result<Dir, UnsafeDir> {
    walk_to(path, &Identity::current(), Last::Own)
}

/// Opens an existing directory `path` that nobody but us and the system
/// can change, without creating or changing anything: every level, the
/// last one included, is judged by the rule for the levels above it
/// (owned by us, `SYSTEM`, `Administrators` or `TrustedInstaller`; others
/// may at most add entries).
// Its daemon callers (the log's rotation in `rundir`, `launch/settings`)
// are Unix-only so far (issue 43); the Wine tests use it.
#[allow(dead_code)]
pub(crate) fn open_trusted_dir(path: &Path) -> Result<Dir, UnsafeDir> {
    walk_to(path, &Identity::current(), Last::Trusted)
}

fn open_private_dir_as(path: &Path, me: &Identity) -> Result<PrivateDir, UnsafeDir> {
    let fd = walk_to(path, me, Last::Private)?;
    let sec = security(&fd, path)?;
    if !others_can_write(&sec, me) {
        return Ok(PrivateDir {
            fd,
            path: path.to_path_buf(),
        });
    }
    // A shared directory (others may add entries, as to C:\) that we did
    // not make: not ours to narrow. A subdirectory of our own in it.
    let name = own_subdir_name(&me.me);
    let sub = path.join(&name);
    let wide: Vec<u16> = name.encode_utf16().collect();
    let (sub_fd, created) = open_dir_at(&fd, &wide, true).map_err(|e| refine(e, &sub))?;
    let sec = security(&sub_fd, &sub)?;
    if sec.owner != me.me {
        return Err(UnsafeDir::ForeignOwner {
            path: sub,
            owner: sec.owner,
        });
    }
    if !created && others_can_write(&sec, me) {
        let mask = me.others_rights(&sec);
        return Err(UnsafeDir::TooWide { path: sub, mask });
    }
    Ok(PrivateDir { fd: sub_fd, path: sub })
}

/// Opens the directory at `path` as a [`Dir`] without judging its
/// levels: the system resolves the path, as a Unix open by path does, and
/// only the last level is refused when it is a link or junction (the
/// Unix `O_NOFOLLOW|O_DIRECTORY`). For the files the Unix daemon writes
/// by path beside its socket without walking it (`daemon.token`), and
/// `rpc.pipe` beside them: what is then made inside is made relative to
/// this handle, owner-only.
pub(crate) fn open_dir_nofollow(path: &Path) -> io::Result<Dir> {
    openat::open_dir_path(path, DIR_ACCESS).map(Dir)
}

/// What the last level of a walk must be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    /// Ours; created owner-only when missing, else judged like the levels
    /// above ([`open_private_dir_as`] goes into a subdirectory of its own
    /// when others can add to it).
    Private,
    /// Ours, judged like the levels above.
    #[allow(dead_code)] // with `open_own_dir`
    Own,
    /// Judged like the levels above (ours or the system's).
    Trusted,
}

fn walk_to(path: &Path, me: &Identity, last_rule: Last) -> Result<Dir, UnsafeDir> {
    let not_plain = || UnsafeDir::NotPlain(path.to_path_buf());
    if !path.is_absolute() {
        return Err(not_plain());
    }
    let mut root = PathBuf::new();
    let mut names = Vec::new();
    for c in path.components() {
        match c {
            Component::Prefix(p) if matches!(p.kind(), Prefix::DeviceNS(_)) => return Err(not_plain()),
            Component::Prefix(_) | Component::RootDir if names.is_empty() => root.push(c.as_os_str()),
            Component::Normal(name) => {
                let wide: Vec<u16> = name.encode_wide().collect();
                if !plain_name(&wide) {
                    return Err(not_plain());
                }
                names.push(wide);
            }
            // `.` is dropped by `components`; `..` and anything else out
            // of place is refused.
            _ => return Err(not_plain()),
        }
    }
    let mut current = open_root(&root).map_err(|e| refine(e, &root))?;
    let mut walked = root;
    check_level(&security(&current, &walked)?, &walked, me)?;
    let private = last_rule == Last::Private;
    for (i, name) in names.iter().enumerate() {
        walked.push(std::ffi::OsString::from_wide(name));
        let last = i + 1 == names.len();
        let (next, created) = match open_dir_at(&current, name, false) {
            Ok(opened) => opened,
            Err(e) if private && e.kind() == io::ErrorKind::NotFound => {
                open_dir_at(&current, name, true).map_err(|e| refine(e, &walked))?
            }
            Err(e) => return Err(refine(e, &walked)),
        };
        let sec = security(&next, &walked)?;
        if last && last_rule != Last::Trusted {
            if sec.owner != me.me {
                return Err(UnsafeDir::ForeignOwner {
                    path: walked,
                    owner: sec.owner,
                });
            }
            // One this walk created is owner-only already; one that was
            // there is never narrowed (audit F4) and must pass the rule
            // for the levels above.
            if !created {
                check_level(&sec, &walked, me)?;
            }
        } else {
            check_level(&sec, &walked, me)?;
        }
        current = next;
    }
    Ok(current)
}

// ---- Working inside a verified directory ---------------------------------

/// Opens `name` in `dir` without following a link; the caller checks the
/// kind with [`is_own_regular`] before reading. `flags` are the CRT's
/// `libc::O_*` values: the access mode, `O_APPEND`, `O_CREAT`, `O_EXCL`,
/// `O_TRUNC` (applied after the checks, so a link is never truncated). A
/// file created here is owner-only, whatever `mode` says (Windows has no
/// mode bits). A directory is not opened (`ERROR_ACCESS_DENIED`).
pub(crate) fn open_file_at(dir: &Dir, name: &[u8], flags: libc::c_int, mode: u32) -> io::Result<std::fs::File> {
    let _ = mode;
    let wide = component(name)?;
    let mut access = match flags & (libc::O_WRONLY | libc::O_RDWR) {
        libc::O_RDONLY => FILE_GENERIC_READ,
        libc::O_WRONLY => FILE_GENERIC_WRITE,
        libc::O_RDWR => FILE_GENERIC_READ | FILE_GENERIC_WRITE,
        _ => return Err(io::Error::from_raw_os_error(87)), // ERROR_INVALID_PARAMETER
    };
    if flags & libc::O_APPEND != 0 {
        access &= !FILE_WRITE_DATA;
        access |= FILE_APPEND_DATA;
    }
    access |= READ_CONTROL | FILE_READ_ATTRIBUTES;
    let create = flags & libc::O_CREAT != 0;
    let disposition = match (create, flags & libc::O_EXCL != 0) {
        (true, true) => FILE_CREATE,
        (true, false) => FILE_OPEN_IF,
        (false, _) => FILE_OPEN,
    };
    let sd = if create {
        Some(Descriptor::owner_only_files()?)
    } else {
        None
    };
    let handle = openat::open_at(
        dir.raw(),
        &wide,
        access,
        disposition,
        FILE_NON_DIRECTORY_FILE,
        sd.as_ref(),
    )?;
    let file = std::fs::File::from(handle);
    if flags & libc::O_TRUNC != 0 && flags & (libc::O_WRONLY | libc::O_RDWR) != 0 {
        file.set_len(0)?;
    }
    Ok(file)
}

/// Who may do what to an open file: what the Unix callers read from its
/// uid and mode bits, read here from its owner SID and DACL.
#[derive(Debug, Clone)]
pub(crate) struct FileAccess {
    /// The owner SID.
    pub owner: Sid,
    /// Owned by this process's user ([`own_uid`]).
    pub ours: bool,
    /// Owned by `SYSTEM`, `Administrators` or `TrustedInstaller` (the
    /// Unix half's root).
    pub system: bool,
    /// The rights the DACL grants anyone but us and the system (generic
    /// rights unmapped; no DACL at all is everything): the Unix group and
    /// other bits.
    pub others: u32,
}

/// Rights that let their holder read a file's data (the Unix `r` bit for
/// group and others).
pub(crate) const READ_RIGHTS: u32 = FILE_READ_DATA | GENERIC_READ | GENERIC_ALL;
/// Rights that let their holder change a file's data or its DACL (the
/// Unix `w` bit for group and others).
pub(crate) const WRITE_RIGHTS: u32 = FILE_WRITE_DATA | FILE_APPEND_DATA | GENERIC_WRITE | CONTROL;

/// [`FileAccess`] of an open file or directory.
pub(crate) fn access_of(file: &std::fs::File) -> io::Result<FileAccess> {
    let sec = acl::security_of(file.as_raw_handle())?;
    let me = Identity::current();
    Ok(FileAccess {
        ours: sec.owner == me.me,
        system: me.system.contains(&sec.owner),
        others: me.others_rights(&sec),
        owner: sec.owner,
    })
}

/// Opens the file at `path` to read, never through a link or junction
/// (the Unix `O_NOFOLLOW` open: a name-surrogate reparse point is refused
/// with `ERROR_CANT_RESOLVE_FILENAME`); a directory is not opened. For
/// files the daemon reads by path and then judges with [`access_of`]
/// (`remora.conf`, `-stop`'s `daemon.token`).
pub(crate) fn open_file_nofollow(path: &Path) -> io::Result<std::fs::File> {
    use std::os::windows::fs::OpenOptionsExt;
    use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_OPEN_REPARSE_POINT;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .access_mode(FILE_GENERIC_READ | READ_CONTROL)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    let info = openat::attribute_tag(file.as_raw_handle())?;
    if openat::is_link(&info) {
        return Err(io::Error::from_raw_os_error(ERROR_CANT_RESOLVE_FILENAME));
    }
    Ok(file)
}

/// Writes `bytes` to the entry `name` of `dir` as a whole: first to a
/// fresh `<name>-<n>` created owner-only and exclusive ([`open_file_at`]
/// with `O_CREAT|O_EXCL`), then renamed over `name` (a rename replaces a
/// link, never writes through it), so no reader ever sees a partial file
/// and no other user can read it at any instant. Returns the file's
/// identity (volume serial, file index), which a later removal compares
/// with [`entry_identity`] before it unlinks.
pub(crate) fn replace_file_in(dir: &Dir, name: &str, bytes: &[u8]) -> io::Result<(u64, u64)> {
    use std::io::Write;
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    for attempt in 0u32..100 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let suffix = nanos ^ std::process::id().rotate_left(16) ^ attempt.wrapping_mul(2_654_435_761);
        let tmp = format!("{name}-{suffix}");
        let mut file = match open_file_at(
            dir,
            tmp.as_bytes(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            0o600,
        ) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                last = e;
                continue;
            }
            Err(e) => return Err(e),
        };
        let written = file
            .write_all(bytes)
            .and_then(|()| openat::identity(file.as_raw_handle()));
        drop(file);
        let done = written.and_then(|id| {
            match rename_in(dir, tmp.as_bytes(), name.as_bytes()) {
                // A reader holds the old file open, which a classic
                // rename cannot replace: its name is removed first (POSIX
                // delete, the name goes at once where the system has it).
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    unlink_in(dir, name.as_bytes())?;
                    rename_in(dir, tmp.as_bytes(), name.as_bytes())
                }
                other => other,
            }
            .map(|()| id)
        });
        if done.is_err() {
            let _ = unlink_in(dir, tmp.as_bytes());
        }
        return done;
    }
    Err(last)
}

/// Whether an open file is a regular file (not a directory, link or
/// junction) owned by this user.
pub(crate) fn is_own_regular(file: &std::fs::File) -> bool {
    let handle = file.as_raw_handle();
    let Ok(info) = openat::attribute_tag(handle) else {
        return false;
    };
    if info.FileAttributes & FILE_ATTRIBUTE_DIRECTORY != 0 || openat::is_link(&info) {
        return false;
    }
    acl::security_of(handle).is_ok_and(|sec| sec.owner == own_uid())
}

/// Opens the directory `name` inside `dir` without following a link.
pub(crate) fn open_dir_in(dir: &Dir, name: &[u8]) -> io::Result<Dir> {
    open_dir_at(dir, &component(name)?, false).map(|(d, _)| d)
}

/// Creates the directory `name` inside `dir`, owner-only (`mode` is not
/// used: Windows has no mode bits); fails if it exists
/// (`ERROR_ALREADY_EXISTS`), so what is opened next is what we made.
pub(crate) fn make_dir_in(dir: &Dir, name: &[u8], mode: u32) -> io::Result<()> {
    let _ = mode;
    let sd = Descriptor::owner_only_files()?;
    openat::open_at(
        dir.raw(),
        &component(name)?,
        READ_CONTROL,
        FILE_CREATE,
        FILE_DIRECTORY_FILE,
        Some(&sd),
    )
    .map(drop)
}

/// When an open directory was last written (its entries changed): what
/// `plugins.prune` weighs against its retention window.
pub(crate) fn modified_of(dir: &Dir) -> io::Result<std::time::SystemTime> {
    let handle = dir.0.try_clone()?;
    std::fs::File::from(handle).metadata()?.modified()
}

/// The owner of an open directory: its owner SID (the Unix half's uid).
pub(crate) fn owner_of(dir: &Dir) -> io::Result<Sid> {
    acl::security_of(dir.raw()).map(|sec| sec.owner)
}

/// This process's user: its token's user SID (the Unix half's effective
/// uid), what [`owner_of`] is compared with. Should the token not be
/// readable, the null SID `S-1-0-0`, which owns nothing.
pub(crate) fn own_uid() -> Sid {
    acl::current_user().unwrap_or_else(|_| Sid::null())
}

/// The identity (volume serial number, file index) of the entry `name`
/// of `dir`, a link not followed; `None` when there is no such entry.
/// The home guard's Windows half compares it with the home's
/// ([`guard_home`]); the token file and `rpc.pipe` compare it with the
/// file they wrote before removing it.
pub(crate) fn entry_identity(dir: &Dir, name: &[u8]) -> io::Result<Option<(u64, u64)>> {
    let Ok(wide) = component(name) else {
        return Ok(None);
    };
    match openat::open_entry_at(dir.raw(), &wide, FILE_READ_ATTRIBUTES) {
        Ok(h) => openat::identity(h.as_raw_handle()).map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Refuses when the entry `name` of `dir` is or contains the user's home
/// ([`crate::base::homeguard::check_entry`]).
pub(crate) fn guard_home(dir: &Dir, name: &[u8]) -> io::Result<()> {
    crate::base::homeguard::check_entry(entry_identity(dir, name)?, name)
}

/// Renames the entry `from` of `dir` to `to` in the same directory (a
/// link is renamed itself, never followed; an entry already at `to` is
/// replaced). Neither may be or contain the user's home
/// ([`crate::base::homeguard`]).
pub(crate) fn rename_in(dir: &Dir, from: &[u8], to: &[u8]) -> io::Result<()> {
    guard_home(dir, from)?;
    guard_home(dir, to)?;
    let to = component(to)?;
    let source = openat::open_entry_at(dir.raw(), &component(from)?, DELETE | FILE_READ_ATTRIBUTES)?;
    openat::rename_to(&source, dir.raw(), &to)
}

/// Removes the entry `name` of `dir` (a file, a link or an empty
/// directory), never following it.
pub(crate) fn unlink_in(dir: &Dir, name: &[u8]) -> io::Result<()> {
    let handle = openat::open_entry_at(dir.raw(), &component(name)?, DELETE | FILE_READ_ATTRIBUTES)?;
    let info = openat::attribute_tag(handle.as_raw_handle())?;
    if info.FileAttributes & FILE_ATTRIBUTE_DIRECTORY != 0 && !openat::is_link(&info) {
        // A directory: never the user's home.
        guard_home(dir, name)?;
    }
    openat::delete(&handle)
}

/// Removes the directory `name` of `parent` and the files in it (one
/// level: replay directories hold only files). A subdirectory that is not
/// empty makes it fail, with nothing followed. A directory that is or
/// holds the user's home is refused before anything goes
/// ([`crate::base::homeguard`]).
pub(crate) fn remove_flat_dir_in(parent: &Dir, name: &[u8]) -> io::Result<()> {
    guard_home(parent, name)?;
    let wide = component(name)?;
    let (dir, _) = open_dir_at(parent, &wide, false)?;
    for entry in read_names(&dir)? {
        unlink_in(&dir, &entry)?;
    }
    drop(dir);
    let handle = openat::open_at(
        parent.raw(),
        &wide,
        DELETE | FILE_READ_ATTRIBUTES,
        FILE_OPEN,
        FILE_DIRECTORY_FILE,
        None,
    )?;
    openat::delete(&handle)
}

/// The names in a directory, without `.` and `..`, as UTF-8 (WTF-8 for
/// names that are not valid Unicode; the `*_in` functions take either).
pub(crate) fn read_names(dir: &Dir) -> io::Result<Vec<Vec<u8>>> {
    let names = openat::list_names(dir.raw())?;
    Ok(names.into_iter().map(std::ffi::OsString::into_encoded_bytes).collect())
}

#[cfg(test)]
#[path = "safedir_tests.rs"]
mod tests;
