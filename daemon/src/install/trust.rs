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
//! A refusal is the `cliError` `unsafe cli dir "<dir>": <why>`, before
//! anything in the directory is swept, run or made.

use crate::base::goerr::go_quote;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// `Ok` when `dir` may be used; `Err` is the `cliError`.
pub(super) fn check_cli_dir(dir: &Path) -> Result<(), String> {
    let refuse = |why: String| format!("unsafe cli dir {}: {why}", go_quote(dir.as_os_str().as_encoded_bytes()));
    let absolute = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| refuse(crate::base::goerr::io_text(&e)))?
            .join(dir)
    };
    let me = crate::base::safedir::own_uid();
    let walked = crate::base::trustpath::walk(&absolute, me).map_err(refuse)?;
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
        return Err(refuse(format!(
            "{} is owned by uid {}, not by this user",
            walked.resolved.display(),
            meta.uid()
        )));
    }
    crate::base::trustpath::safe_directories(&walked.resolved, me).map_err(refuse)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn own_missing_and_linked_dirs_pass_shared_ones_do_not() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(check_cli_dir(t.path()), Ok(()));
        assert_eq!(check_cli_dir(&t.path().join("not/yet")), Ok(()));
        let shared = t.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = check_cli_dir(&shared).unwrap_err();
        assert!(why.starts_with("unsafe cli dir \""), "{why}");
        assert!(why.contains("is not private to this user"), "{why}");
        let why = check_cli_dir(&shared.join("below")).unwrap_err();
        assert!(why.contains("is not private to this user"), "{why}");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(check_cli_dir(&shared.join("below")), Ok(()), "sticky, like /tmp");
    }
}
