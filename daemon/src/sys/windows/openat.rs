//! The Windows form of the `openat` family: opening, renaming, deleting
//! and listing by handle, relative to an open directory, never following
//! a link. `base::safedir`'s Windows half is built on it (it owns the
//! policy: which names, which owners, which DACLs).
//!
//! Opens are `NtCreateFile` with the directory handle as `RootDirectory`
//! and one name, with `FILE_OPEN_REPARSE_POINT`: a symbolic link or
//! junction is opened itself, and [`open_at`] then refuses it when its
//! reparse tag is a name surrogate (the kinds that redirect a name) with
//! `ERROR_CANT_RESOLVE_FILENAME` (Unix's `ELOOP`). Other reparse points
//! (OneDrive placeholders, deduplicated files) are the object itself.
//! Every handle is shared for reading, writing and deletion, as Unix
//! descriptors do not stop a rename or unlink.

use std::ffi::OsString;
use std::io;
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::Path;

use super::acl::Descriptor;
use windows_sys::Wdk::Foundation::OBJECT_ATTRIBUTES;
use windows_sys::Wdk::Storage::FileSystem::{
    FileRenameInformation, NtCreateFile, NtSetInformationFile, FILE_DIRECTORY_FILE, FILE_OPEN, FILE_OPEN_REPARSE_POINT,
    FILE_RENAME_INFORMATION, FILE_SYNCHRONOUS_IO_NONALERT,
};
use windows_sys::Win32::Foundation::{
    RtlNtStatusToDosError, HANDLE, INVALID_HANDLE_VALUE, OBJ_CASE_INSENSITIVE, UNICODE_STRING,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FileAttributeTagInfo, FileDispositionInfo, FileDispositionInfoEx, FileIdBothDirectoryInfo,
    GetFileInformationByHandle, GetFileInformationByHandleEx, SetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION,
    FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_REPARSE_POINT, FILE_ATTRIBUTE_TAG_INFO, FILE_DISPOSITION_FLAG_DELETE,
    FILE_DISPOSITION_FLAG_IGNORE_READONLY_ATTRIBUTE, FILE_DISPOSITION_FLAG_POSIX_SEMANTICS, FILE_DISPOSITION_INFO,
    FILE_DISPOSITION_INFO_EX, FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT, FILE_ID_BOTH_DIR_INFO,
    FILE_LIST_DIRECTORY, FILE_READ_ATTRIBUTES, FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE, OPEN_EXISTING,
    SYNCHRONIZE,
};
use windows_sys::Win32::System::IO::IO_STATUS_BLOCK;

/// `ERROR_INVALID_NAME`: a name that is not one plain component.
pub(crate) const ERROR_INVALID_NAME: i32 = 123;
/// `ERROR_CANT_RESOLVE_FILENAME`: what opening a link fails with (Unix's
/// `ELOOP`).
pub(crate) const ERROR_CANT_RESOLVE_FILENAME: i32 = 1921;
/// `ERROR_DIRECTORY`: a directory-only open met a file.
pub(crate) const ERROR_DIRECTORY: i32 = 267;
/// `ERROR_NO_MORE_FILES`: the end of a listing.
const ERROR_NO_MORE_FILES: i32 = 18;
/// A reparse tag's name-surrogate bit: links and junctions.
const NAME_SURROGATE: u32 = 0x2000_0000;

/// Opens the single name `name` relative to the directory `dir` (an
/// empty name reopens `dir` itself) with `access`, `disposition`
/// (`FILE_OPEN`, `FILE_CREATE`, `FILE_OPEN_IF`) and `options`
/// (`FILE_DIRECTORY_FILE`, `FILE_NON_DIRECTORY_FILE`); `sd` is the
/// descriptor of what it creates. A link or junction is refused.
pub(crate) fn open_at(
    dir: HANDLE,
    name: &[u16],
    access: u32,
    disposition: u32,
    options: u32,
    sd: Option<&Descriptor>,
) -> io::Result<OwnedHandle> {
    let handle = open_raw(dir, name, access, disposition, options, sd)?;
    refuse_links(&handle)?;
    Ok(handle)
}

/// Opens the entry `name` of `dir` itself, a link included (to delete or
/// rename it).
pub(crate) fn open_entry_at(dir: HANDLE, name: &[u16], access: u32) -> io::Result<OwnedHandle> {
    open_raw(dir, name, access, FILE_OPEN, 0, None)
}

fn open_raw(
    dir: HANDLE,
    name: &[u16],
    access: u32,
    disposition: u32,
    options: u32,
    sd: Option<&Descriptor>,
) -> io::Result<OwnedHandle> {
    let bytes = u16::try_from(name.len() * 2).map_err(|_| io::Error::from_raw_os_error(ERROR_INVALID_NAME))?;
    let object = UNICODE_STRING {
        Length: bytes,
        MaximumLength: bytes,
        Buffer: name.as_ptr().cast_mut(),
    };
    let attributes = OBJECT_ATTRIBUTES {
        Length: std::mem::size_of::<OBJECT_ATTRIBUTES>() as u32,
        RootDirectory: dir,
        ObjectName: &object,
        Attributes: OBJ_CASE_INSENSITIVE,
        SecurityDescriptor: sd.map_or(std::ptr::null(), |d| d.as_ptr().cast_const().cast()),
        SecurityQualityOfService: std::ptr::null(),
    };
    let mut handle: HANDLE = std::ptr::null_mut();
    // SAFETY: all-zero is a valid IO_STATUS_BLOCK to be written.
    let mut status_block: IO_STATUS_BLOCK = unsafe { std::mem::zeroed() };
    // SAFETY: every pointer is to a live local (the name, the attributes,
    // the descriptor outlive the call); `dir` is an open directory handle.
    let status = unsafe {
        NtCreateFile(
            &mut handle,
            access | SYNCHRONIZE,
            &attributes,
            &mut status_block,
            std::ptr::null(),
            FILE_ATTRIBUTE_NORMAL,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
            disposition,
            options | FILE_SYNCHRONOUS_IO_NONALERT | FILE_OPEN_REPARSE_POINT,
            std::ptr::null(),
            0,
        )
    };
    if status < 0 {
        return Err(nt_error(status));
    }
    // SAFETY: a fresh handle nobody else owns.
    Ok(unsafe { OwnedHandle::from_raw_handle(handle) })
}

/// Opens the directory at `path` (the root of a walk: `C:\`,
/// `\\server\share\`), the one open by path; a link or junction is
/// refused.
pub(crate) fn open_dir_path(path: &Path, access: u32) -> io::Result<OwnedHandle> {
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain([0]).collect();
    // SAFETY: a NUL-terminated path; no security attributes or template.
    let handle = unsafe {
        CreateFileW(
            wide.as_ptr(),
            access,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
            std::ptr::null(),
            OPEN_EXISTING,
            FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT,
            std::ptr::null_mut(),
        )
    };
    if handle == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle nobody else owns.
    let handle = unsafe { OwnedHandle::from_raw_handle(handle) };
    refuse_links(&handle)?;
    Ok(handle)
}

fn nt_error(status: i32) -> io::Error {
    // SAFETY: a pure mapping.
    io::Error::from_raw_os_error(unsafe { RtlNtStatusToDosError(status) } as i32)
}

/// The attributes and reparse tag of an open handle.
pub(crate) fn attribute_tag(handle: HANDLE) -> io::Result<FILE_ATTRIBUTE_TAG_INFO> {
    let mut info = FILE_ATTRIBUTE_TAG_INFO::default();
    // SAFETY: `handle` is open; `info` is writable for its size.
    let ok = unsafe {
        GetFileInformationByHandleEx(
            handle,
            FileAttributeTagInfo,
            (&mut info as *mut FILE_ATTRIBUTE_TAG_INFO).cast(),
            std::mem::size_of::<FILE_ATTRIBUTE_TAG_INFO>() as u32,
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

/// Whether `info` is a link or junction's: a name-surrogate reparse
/// point.
pub(crate) fn is_link(info: &FILE_ATTRIBUTE_TAG_INFO) -> bool {
    info.FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 && info.ReparseTag & NAME_SURROGATE != 0
}

fn refuse_links(handle: &OwnedHandle) -> io::Result<()> {
    if is_link(&attribute_tag(handle.as_raw_handle())?) {
        return Err(io::Error::from_raw_os_error(ERROR_CANT_RESOLVE_FILENAME));
    }
    Ok(())
}

/// The identity of an open file or directory: volume serial number and
/// file index (Unix's device and inode).
pub(crate) fn identity(handle: HANDLE) -> io::Result<(u64, u64)> {
    // SAFETY: all-zero is a valid value to be overwritten.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: `handle` is open; `info` is writable.
    if unsafe { GetFileInformationByHandle(handle, &mut info) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((
        u64::from(info.dwVolumeSerialNumber),
        u64::from(info.nFileIndexHigh) << 32 | u64::from(info.nFileIndexLow),
    ))
}

/// Renames the open `source` (opened with `DELETE`) to the name `to` in
/// the directory `dir`, replacing what is there.
pub(crate) fn rename_to(source: &OwnedHandle, dir: HANDLE, to: &[u16]) -> io::Result<()> {
    // FILE_RENAME_INFORMATION with the name in place of its one-element
    // array, in a u64 buffer for its alignment. The size counts the whole
    // struct besides the name (Wine refuses less than the struct).
    let size = std::mem::size_of::<FILE_RENAME_INFORMATION>() + to.len() * 2;
    let mut buf = vec![0u64; size.div_ceil(8)];
    let info = buf.as_mut_ptr().cast::<FILE_RENAME_INFORMATION>();
    // SAFETY: `buf` holds the header and `to.len()` u16s after it.
    unsafe {
        (*info).Anonymous.ReplaceIfExists = true;
        (*info).RootDirectory = dir;
        (*info).FileNameLength = (to.len() * 2) as u32;
        std::ptr::copy_nonoverlapping(
            to.as_ptr(),
            std::ptr::addr_of_mut!((*info).FileName).cast::<u16>(),
            to.len(),
        );
    }
    // SAFETY: all-zero is a valid IO_STATUS_BLOCK to be written.
    let mut status_block: IO_STATUS_BLOCK = unsafe { std::mem::zeroed() };
    // SAFETY: `source` is open with DELETE; `buf` is `size` bytes or more.
    // Called directly rather than through SetFileInformationByHandle,
    // which Wine's kernel32 makes a path of the current directory.
    let status = unsafe {
        NtSetInformationFile(
            source.as_raw_handle(),
            &mut status_block,
            buf.as_ptr().cast(),
            size as u32,
            FileRenameInformation,
        )
    };
    if status < 0 {
        return Err(nt_error(status));
    }
    Ok(())
}

/// Deletes the open `handle` (opened with `DELETE`): POSIX semantics
/// where the system has them (the name goes at once, as `unlink`, and
/// the read-only attribute does not stop it, as file modes do not stop
/// `unlink`), otherwise when the last handle closes.
pub(crate) fn delete(handle: &OwnedHandle) -> io::Result<()> {
    let ex = FILE_DISPOSITION_INFO_EX {
        Flags: FILE_DISPOSITION_FLAG_DELETE
            | FILE_DISPOSITION_FLAG_POSIX_SEMANTICS
            | FILE_DISPOSITION_FLAG_IGNORE_READONLY_ATTRIBUTE,
    };
    // SAFETY: `handle` is open; `ex` is a valid info block of its size.
    let ok = unsafe {
        SetFileInformationByHandle(
            handle.as_raw_handle(),
            FileDispositionInfoEx,
            (&ex as *const FILE_DISPOSITION_INFO_EX).cast(),
            std::mem::size_of::<FILE_DISPOSITION_INFO_EX>() as u32,
        )
    };
    if ok != 0 {
        return Ok(());
    }
    let plain = FILE_DISPOSITION_INFO { DeleteFile: true };
    // SAFETY: as above.
    let ok = unsafe {
        SetFileInformationByHandle(
            handle.as_raw_handle(),
            FileDispositionInfo,
            (&plain as *const FILE_DISPOSITION_INFO).cast(),
            std::mem::size_of::<FILE_DISPOSITION_INFO>() as u32,
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The names in the directory `dir`, without `.` and `..`. Read through
/// a handle reopened from `dir`, so two listings of one directory handle
/// never share a position.
pub(crate) fn list_names(dir: HANDLE) -> io::Result<Vec<OsString>> {
    let list = open_at(
        dir,
        &[],
        FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES,
        FILE_OPEN,
        FILE_DIRECTORY_FILE,
        None,
    )?;
    let mut names = Vec::new();
    let mut buf = vec![0u64; 8192];
    loop {
        // SAFETY: `list` is an open directory; `buf` is writable for its
        // byte size and aligned for the entries.
        let ok = unsafe {
            GetFileInformationByHandleEx(
                list.as_raw_handle(),
                FileIdBothDirectoryInfo,
                buf.as_mut_ptr().cast(),
                (buf.len() * 8) as u32,
            )
        };
        if ok == 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(ERROR_NO_MORE_FILES) {
                return Ok(names);
            }
            return Err(e);
        }
        let base = buf.as_ptr().cast::<u8>();
        let mut offset = 0usize;
        loop {
            // SAFETY: the system wrote a chain of entries into `buf`, each
            // at `offset`, with its name after the fixed part.
            let (next, name) = unsafe {
                let entry = base.add(offset).cast::<FILE_ID_BOTH_DIR_INFO>();
                let len = (*entry).FileNameLength as usize / 2;
                let name = std::slice::from_raw_parts(std::ptr::addr_of!((*entry).FileName).cast::<u16>(), len);
                ((*entry).NextEntryOffset as usize, name)
            };
            let dot = u16::from(b'.');
            if name != [dot] && name != [dot, dot] {
                names.push(OsString::from_wide(name));
            }
            if next == 0 {
                break;
            }
            offset += next;
        }
    }
}
