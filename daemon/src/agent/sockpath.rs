//! Whether an agent socket path may be handed to a child: nobody but the
//! daemon's user (and root) can make the path lead anywhere else, now or
//! later.
//!
//! A child gets the path as it was given, not resolved (a link a profile
//! keeps pointing at the newest forwarded agent stays useful), and
//! resolves it again each time it connects. So every link and directory
//! the path passes through is judged ([`crate::base::trustpath::walk`]),
//! not only the last one, and the end must be a socket of the user's.
//! The path must be absolute: a child may run in another directory.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Checks `path` for the user `me`; `Ok` is the socket it resolves to
/// now. The `Err` text completes "not handed on: …".
pub(crate) fn vet(path: &str, me: u32) -> Result<PathBuf, String> {
    let walked = crate::base::trustpath::walk(Path::new(path), me)?;
    if !walked.rest.is_empty() {
        let missing = std::io::Error::from_raw_os_error(libc::ENOENT);
        return Err(crate::base::goerr::io_text(&missing));
    }
    let meta = std::fs::symlink_metadata(&walked.resolved).map_err(|e| crate::base::goerr::io_text(&e))?;
    if !meta.file_type().is_socket() {
        return Err("it is not a socket".to_string());
    }
    if meta.uid() != me {
        return Err(format!("it belongs to uid {}, not to this daemon's user", meta.uid()));
    }
    Ok(walked.resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn me() -> u32 {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() }
    }

    fn text(p: &Path) -> String {
        p.to_string_lossy().into_owned()
    }

    #[test]
    fn a_socket_through_links_of_ours_passes_and_through_a_shared_place_does_not() {
        let t = tempfile::tempdir().unwrap();
        let private = t.path().join("private");
        std::fs::create_dir(&private).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        let sock = private.join("agent.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        symlink(&private, t.path().join("via")).unwrap();
        assert_eq!(vet(&text(&t.path().join("via/agent.sock")), me()).unwrap(), sock);
        let shared = t.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        symlink(&private, shared.join("agent-dir")).unwrap();
        let why = vet(&text(&shared.join("agent-dir/agent.sock")), me()).unwrap_err();
        assert!(why.contains("is not private"), "{why}");
    }

    #[test]
    fn missing_relative_and_non_sockets_are_refused() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(vet("agent.sock", me()).unwrap_err(), "it is not an absolute path");
        assert_eq!(
            vet(&text(&t.path().join("none")), me()).unwrap_err(),
            "no such file or directory"
        );
        std::fs::write(t.path().join("plain"), "").unwrap();
        assert_eq!(
            vet(&text(&t.path().join("plain")), me()).unwrap_err(),
            "it is not a socket"
        );
    }
}
