//! What the error enums of the harness's modules share: an I/O error
//! with the path it happened on ([`IoAt`], shown `<path>: <error>`), and
//! [`At::at`] to attach the path.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// An I/O error on a path.
#[derive(Debug)]
pub struct IoAt {
    pub path: PathBuf,
    pub source: io::Error,
}

impl IoAt {
    pub(crate) fn new(path: &Path, source: io::Error) -> IoAt {
        IoAt {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl fmt::Display for IoAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for IoAt {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Attaches the path an I/O result is about.
pub(crate) trait At<T> {
    fn at(self, path: &Path) -> Result<T, IoAt>;
}

impl<T> At<T> for io::Result<T> {
    fn at(self, path: &Path) -> Result<T, IoAt> {
        self.map_err(|source| IoAt::new(path, source))
    }
}

#[cfg(test)]
mod tests {
    use super::At;
    use std::path::Path;

    #[test]
    fn the_path_comes_first() {
        let e = std::fs::read(Path::new("/nonexistent/x"))
            .at(Path::new("/nonexistent/x"))
            .unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/x: "), "{e}");
        assert_eq!(e.source.kind(), std::io::ErrorKind::NotFound);
    }
}
