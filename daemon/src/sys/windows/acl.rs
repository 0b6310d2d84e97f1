//! Windows security descriptors, the one place that builds and reads
//! them: the owner-only descriptors the daemon creates its pipe, files and
//! directories with, the current user's SID, and an object's owner and
//! DACL read back from its handle (for `base::safedir`'s checks).
//!
//! Judging what a DACL means (who counts as "us", which rights let others
//! tamper) is the caller's business; this module only makes and parses.

use std::fmt;
use std::io;
use std::sync::OnceLock;
use windows_sys::Win32::Foundation::{CloseHandle, LocalFree, HANDLE};
use windows_sys::Win32::Security::Authorization::{
    ConvertSidToStringSidW, ConvertStringSecurityDescriptorToSecurityDescriptorW, GetSecurityInfo, SDDL_REVISION_1,
    SE_FILE_OBJECT,
};
use windows_sys::Win32::Security::{
    GetAce, GetLengthSid, GetSecurityDescriptorControl, GetTokenInformation, IsValidSid, TokenUser, ACCESS_ALLOWED_ACE,
    ACE_HEADER, ACL, DACL_SECURITY_INFORMATION, OWNER_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, PSID,
    SE_DACL_PROTECTED, TOKEN_QUERY, TOKEN_USER,
};
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

/// A security descriptor made from SDDL, freed on drop.
pub(crate) struct Descriptor(PSECURITY_DESCRIPTOR);

impl Descriptor {
    /// The descriptor `sddl` spells (`D:P(A;;GA;;;OW)`, …).
    pub(crate) fn from_sddl(sddl: &str) -> io::Result<Descriptor> {
        let sddl: Vec<u16> = sddl.encode_utf16().chain([0]).collect();
        let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
        // SAFETY: `sddl` is NUL-terminated UTF-16; on success `sd` gets a
        // LocalAlloc'd descriptor we free in Drop.
        let ok = unsafe {
            ConvertStringSecurityDescriptorToSecurityDescriptorW(
                sddl.as_ptr(),
                SDDL_REVISION_1,
                &mut sd,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Descriptor(sd))
    }

    /// What every file and directory the daemon creates gets: owned by
    /// the current user, a protected DACL (nothing inherited from the
    /// parent) with one ACE granting that user full access, inherited by
    /// what is created inside (`O:<me>D:P(A;OICI;FA;;;<me>)`). The user's
    /// SID rather than `OW` (owner rights): an elevated administrator's
    /// token makes `Administrators` the default owner, and the owner is
    /// named explicitly so what we create is ours either way.
    pub(crate) fn owner_only_files() -> io::Result<Descriptor> {
        let me = current_user()?;
        Descriptor::from_sddl(&format!("O:{me}D:P(A;OICI;FA;;;{me})"))
    }

    /// The raw descriptor, valid while `self` lives.
    pub(crate) fn as_ptr(&self) -> PSECURITY_DESCRIPTOR {
        self.0
    }

    /// Puts this descriptor's DACL, protected (nothing inherited), on the
    /// object `handle` is open on; the handle needs `WRITE_DAC`.
    pub(crate) fn apply_dacl(&self, handle: HANDLE) -> io::Result<()> {
        use windows_sys::Win32::Security::Authorization::{SetSecurityInfo, SE_FILE_OBJECT};
        use windows_sys::Win32::Security::{
            GetSecurityDescriptorDacl, ACL, DACL_SECURITY_INFORMATION, PROTECTED_DACL_SECURITY_INFORMATION,
        };
        let (mut present, mut defaulted) = (0, 0);
        let mut dacl: *mut ACL = std::ptr::null_mut();
        // SAFETY: `self.0` is a valid descriptor; the out-params are locals.
        if unsafe { GetSecurityDescriptorDacl(self.0, &mut present, &mut dacl, &mut defaulted) } == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `dacl` points into `self`, alive for the call; the
        // caller's handle is open.
        let rc = unsafe {
            SetSecurityInfo(
                handle,
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                dacl,
                std::ptr::null(),
            )
        };
        match rc {
            0 => Ok(()),
            err => Err(io::Error::from_raw_os_error(err as i32)),
        }
    }
}

impl Drop for Descriptor {
    fn drop(&mut self) {
        // SAFETY: frees the LocalAlloc'd descriptor once.
        unsafe { LocalFree(self.0) };
    }
}

/// A SID, owned (its binary form, which is canonical: equal SIDs have
/// equal bytes).
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Sid(Vec<u8>);

impl Sid {
    /// Copies the SID at `psid`.
    ///
    /// # Safety
    /// `psid` must point to a valid SID or be null.
    unsafe fn copy(psid: PSID) -> io::Result<Sid> {
        // SAFETY: the caller's promise; IsValidSid checks the rest.
        if psid.is_null() || unsafe { IsValidSid(psid) } == 0 {
            return Err(io::Error::from_raw_os_error(1337)); // ERROR_INVALID_SID
        }
        // SAFETY: a valid SID is GetLengthSid bytes long.
        let len = unsafe { GetLengthSid(psid) } as usize;
        // SAFETY: as above.
        Ok(Sid(
            unsafe { std::slice::from_raw_parts(psid.cast::<u8>(), len) }.to_vec()
        ))
    }

    /// The SID spelled `S-1-…` (`ConvertStringSidToSidW`'s input), for
    /// comparisons with the well-known ones.
    pub(crate) fn parse(text: &str) -> Option<Sid> {
        let wide: Vec<u16> = text.encode_utf16().chain([0]).collect();
        let mut psid: PSID = std::ptr::null_mut();
        // SAFETY: NUL-terminated input; on success a LocalAlloc'd SID.
        let ok =
            unsafe { windows_sys::Win32::Security::Authorization::ConvertStringSidToSidW(wide.as_ptr(), &mut psid) };
        if ok == 0 {
            return None;
        }
        // SAFETY: the SID just made; freed once right after.
        let sid = unsafe { Sid::copy(psid) }.ok();
        // SAFETY: as above.
        unsafe { LocalFree(psid) };
        sid
    }

    /// The null SID `S-1-0-0`, which owns nothing and is nobody.
    pub(crate) fn null() -> Sid {
        // Revision 1, one sub-authority, authority 0, sub-authority 0.
        Sid(vec![1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    }

    /// The SID as a `PSID` for calls that read it, valid while `self`
    /// lives.
    pub(crate) fn as_psid(&self) -> PSID {
        self.0.as_ptr() as PSID
    }
}

impl fmt::Display for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text: *mut u16 = std::ptr::null_mut();
        // SAFETY: a valid SID (made by `copy`) in; a LocalAlloc'd
        // NUL-terminated string out, freed below.
        if unsafe { ConvertSidToStringSidW(self.as_psid(), &mut text) } == 0 {
            return f.write_str("S-?");
        }
        // SAFETY: `text` is NUL-terminated.
        let len = (0..).take_while(|&i| unsafe { *text.add(i) } != 0).count();
        // SAFETY: `len` u16s are readable at `text`.
        let s = String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(text, len) });
        // SAFETY: frees the string once.
        unsafe { LocalFree(text.cast()) };
        f.write_str(&s)
    }
}

impl fmt::Debug for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Creates the directory `path` (its parent must exist) with
/// [`Descriptor::owner_only_files`]: the Windows form of Unix's
/// `mkdir(path, 0700)`, for directories made by path (the socket's
/// missing parents, which the Unix launcher makes 0700 by path too).
pub(crate) fn create_dir_owner_only(path: &std::path::Path) -> io::Result<()> {
    use std::os::windows::ffi::OsStrExt;
    use windows_sys::Win32::Security::SECURITY_ATTRIBUTES;
    use windows_sys::Win32::Storage::FileSystem::CreateDirectoryW;
    let sd = Descriptor::owner_only_files()?;
    let attributes = SECURITY_ATTRIBUTES {
        nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
        lpSecurityDescriptor: sd.as_ptr(),
        bInheritHandle: 0,
    };
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain([0]).collect();
    // SAFETY: a NUL-terminated path; `attributes` and the descriptor it
    // points to live across the call.
    if unsafe { CreateDirectoryW(wide.as_ptr(), &attributes) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The user this process runs as (its token's user SID), read once.
pub(crate) fn current_user() -> io::Result<Sid> {
    static USER: OnceLock<Sid> = OnceLock::new();
    if let Some(sid) = USER.get() {
        return Ok(sid.clone());
    }
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: the pseudo-handle of this process; `token` is an out-param.
    if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) } == 0 {
        return Err(io::Error::last_os_error());
    }
    // TOKEN_USER holds a pointer into the same buffer: a u64 buffer keeps
    // it aligned.
    let mut buf = vec![0u64; 64];
    let mut len = 0u32;
    // SAFETY: `token` is open; the buffer is writable for its byte size.
    let ok = unsafe {
        GetTokenInformation(
            token,
            TokenUser,
            buf.as_mut_ptr().cast(),
            (buf.len() * 8) as u32,
            &mut len,
        )
    };
    let error = io::Error::last_os_error();
    // SAFETY: closes the token opened above, once.
    unsafe { CloseHandle(token) };
    if ok == 0 {
        return Err(error);
    }
    // SAFETY: GetTokenInformation filled a TOKEN_USER whose SID lies in
    // `buf`, which outlives the copy.
    let sid = unsafe { Sid::copy((*buf.as_ptr().cast::<TOKEN_USER>()).User.Sid) }?;
    Ok(USER.get_or_init(|| sid).clone())
}

/// One entry of a DACL.
#[derive(Debug, Clone)]
pub(crate) struct Ace {
    /// `true` for an access-allowed entry; `false` for access-denied.
    pub allow: bool,
    /// The ACE flags (`INHERIT_ONLY_ACE`, …).
    pub flags: u8,
    /// The rights granted or denied (generic ones included, unmapped).
    pub mask: u32,
    /// Who; `None` for an allowing entry of a kind not parsed here
    /// (object or callback ACEs), which callers treat as granting
    /// everyone `mask`.
    pub sid: Option<Sid>,
}

/// An object's owner and DACL, read from its handle.
#[derive(Debug, Clone)]
pub(crate) struct Security {
    pub owner: Sid,
    /// Whether the DACL is protected (inherits nothing from the parent).
    /// Read by the tests (the owner-only check).
    #[cfg_attr(not(test), allow(dead_code))]
    pub protected: bool,
    /// `None`: no DACL at all, which grants everyone everything.
    pub dacl: Option<Vec<Ace>>,
}

/// `ACCESS_ALLOWED_ACE_TYPE` and `ACCESS_DENIED_ACE_TYPE`.
const ALLOWED: u8 = 0;
const DENIED: u8 = 1;
/// The allowing ACE kinds not parsed here (object, callback, callback
/// object): conservatively, they grant everyone their mask.
const OTHER_ALLOWED: [u8; 3] = [5, 9, 11];

/// The owner and DACL of the file or directory open as `handle` (which
/// needs `READ_CONTROL`).
pub(crate) fn security_of(handle: HANDLE) -> io::Result<Security> {
    let mut owner: PSID = std::ptr::null_mut();
    let mut dacl: *mut ACL = std::ptr::null_mut();
    let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
    // SAFETY: `handle` is open; the out-params point into the descriptor
    // `sd`, LocalAlloc'd and freed below after everything is copied.
    let rc = unsafe {
        GetSecurityInfo(
            handle,
            SE_FILE_OBJECT,
            OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
            &mut owner,
            std::ptr::null_mut(),
            &mut dacl,
            std::ptr::null_mut(),
            &mut sd,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc as i32));
    }
    let mut control: u16 = 0;
    let mut revision = 0u32;
    // SAFETY: `sd` is the descriptor just returned; out-params are locals.
    let protected = unsafe { GetSecurityDescriptorControl(sd, &mut control, &mut revision) } != 0
        && control & SE_DACL_PROTECTED != 0;
    // SAFETY: `owner` and `dacl` point into `sd`, alive until freed.
    let result = unsafe { Sid::copy(owner) }.and_then(|owner| {
        let dacl = if dacl.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(unsafe { read_acl(dacl) }?)
        };
        Ok(Security { owner, protected, dacl })
    });
    // SAFETY: frees the descriptor once, nothing points into it any more.
    unsafe { LocalFree(sd) };
    result
}

/// The entries of `acl`.
///
/// # Safety
/// `acl` must point to a valid ACL.
unsafe fn read_acl(acl: *mut ACL) -> io::Result<Vec<Ace>> {
    // SAFETY: the caller's promise.
    let count = unsafe { (*acl).AceCount };
    let mut aces = Vec::with_capacity(usize::from(count));
    for i in 0..u32::from(count) {
        let mut ace: *mut core::ffi::c_void = std::ptr::null_mut();
        // SAFETY: `i` is below the ACL's count.
        if unsafe { GetAce(acl, i, &mut ace) } == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: every ACE starts with its header.
        let header = unsafe { *ace.cast::<ACE_HEADER>() };
        match header.AceType {
            ALLOWED | DENIED => {
                let allowed = ace.cast::<ACCESS_ALLOWED_ACE>();
                // SAFETY: both kinds share ACCESS_ALLOWED_ACE's layout; the
                // SID starts at SidStart.
                let (mask, sid) = unsafe {
                    (
                        (*allowed).Mask,
                        Sid::copy(std::ptr::addr_of_mut!((*allowed).SidStart).cast())?,
                    )
                };
                aces.push(Ace {
                    allow: header.AceType == ALLOWED,
                    flags: header.AceFlags,
                    mask,
                    sid: Some(sid),
                });
            }
            t if OTHER_ALLOWED.contains(&t) => {
                let allowed = ace.cast::<ACCESS_ALLOWED_ACE>();
                aces.push(Ace {
                    allow: true,
                    flags: header.AceFlags,
                    // SAFETY: the mask follows the header in every ACE kind.
                    mask: unsafe { (*allowed).Mask },
                    sid: None,
                });
            }
            _ => {}
        }
    }
    Ok(aces)
}

/// Whether this runs under Wine (its ntdll exports `wine_get_version`),
/// for the tests that must skip what Wine cannot show. Wine keeps no DACL
/// on files: it renders the Unix mode bits as one (the owner, SYSTEM, and
/// `Everyone` for the bits of others), and a DACL set on an existing file
/// does not come back as set.
#[cfg(test)]
pub(crate) fn under_wine() -> bool {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
    // SAFETY: NUL-terminated names; ntdll is loaded in every process.
    unsafe {
        let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
        !ntdll.is_null() && GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_some()
    }
}
