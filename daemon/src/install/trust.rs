//! Whether `-cli-dir` may be used at all: remora's own rule (the
//! reference uses whatever directory it is given).
//!
//! `-install` writes an executable into `-cli-dir`, runs it there
//! (`--version`), and deletes files in it (the sweep and the prune), all by
//! path. So the directory must be one nobody else can change: a `0777`
//! directory another user owns let them replace the freshly installed CLI
//! before Desktop ran it. The rule is the replay and socket directories'
//! ([`crate::base::safedir`]), with links allowed where nobody else can
//! repoint them ([`crate::base::trustpath`]): every directory on the way
//! is owned by the user or root and writable by no one else unless
//! sticky, every link on the way is the user's or root's, and an existing
//! `-cli-dir` itself is owned by the user. A part that does not exist yet
//! is fine (it is made `0755` as the user); it is checked again once made,
//! so a name another user wins a race for is refused then.
//!
//! A refusal ([`UnsafeCliDir`]) is the `cliError` `unsafe cli dir
//! "<dir>": <why>`, before anything in the directory is swept, run or
//! made.

use crate::base::goerr::{go_quote, io_text};
use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A `-cli-dir` that may not be used: `unsafe cli dir "<dir>": <why>`.
#[derive(Debug)]
pub(super) struct UnsafeCliDir {
    dir: Vec<u8>,
    why: Why,
}

/// Why a `-cli-dir` is refused.
#[derive(Debug)]
enum Why {
    /// A relative `-cli-dir`, and the working directory it is read
    /// against cannot be found.
    NoCwd(io::Error),
    /// A directory or link on the way another user can change: the trust
    /// walk's words.
    Way(String),
    /// The existing directory is another user's.
    Owner { resolved: PathBuf, uid: u32 },
}

impl fmt::Display for UnsafeCliDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unsafe cli dir {}: ", go_quote(&self.dir))?;
        match &self.why {
            Why::NoCwd(e) => f.write_str(&io_text(e)),
            Why::Way(why) => f.write_str(why),
            Why::Owner { resolved, uid } => {
                write!(f, "{} is owned by uid {uid}, not by this user", resolved.display())
            }
        }
    }
}

impl std::error::Error for UnsafeCliDir {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.why {
            Why::NoCwd(e) => Some(e),
            Why::Way(_) | Why::Owner { .. } => None,
        }
    }
}

/// `Ok` when `dir` may be used; `Err` is the `cliError`.
pub(super) fn check_cli_dir(dir: &Path) -> Result<(), UnsafeCliDir> {
    let refuse = |why: Why| UnsafeCliDir {
        dir: dir.as_os_str().as_encoded_bytes().to_vec(),
        why,
    };
    let absolute = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| refuse(Why::NoCwd(e)))?.join(dir)
    };
    let me = crate::base::safedir::own_uid();
    let walked = crate::base::trustpath::walk(&absolute, me).map_err(|why| refuse(Why::Way(why)))?;
    if !walked.rest.is_empty() {
        // Made by the install, as the user, and checked again then.
        return Ok(());
    }
    let Ok(meta) = std::fs::symlink_metadata(&walked.resolved) else {
        return Ok(());
    };
    if !meta.is_dir() {
        // What an older protocol version left there: moved aside first.
        return Ok(());
    }
    if meta.uid() != me {
        return Err(refuse(Why::Owner {
            resolved: walked.resolved,
            uid: meta.uid(),
        }));
    }
    crate::base::trustpath::safe_directories(&walked.resolved, me).map_err(|why| refuse(Why::Way(why)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn own_missing_and_linked_dirs_pass_shared_ones_do_not() {
        let t = tempfile::tempdir().unwrap();
        let checked = |dir: &Path| check_cli_dir(dir).map_err(|e| e.to_string());
        assert_eq!(checked(t.path()), Ok(()));
        assert_eq!(checked(&t.path().join("not/yet")), Ok(()));
        let shared = t.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = checked(&shared).unwrap_err();
        assert!(why.starts_with("unsafe cli dir \""), "{why}");
        assert!(why.contains("is not private to this user"), "{why}");
        let why = checked(&shared.join("below")).unwrap_err();
        assert!(why.contains("is not private to this user"), "{why}");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(checked(&shared.join("below")), Ok(()), "sticky, like /tmp");
    }
}
