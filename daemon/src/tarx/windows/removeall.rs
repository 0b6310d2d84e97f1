//! The Windows half of `tarx/removeall.rs` (issue 43): a tree removed
//! below a directory handle (`base::safedir`), nothing followed, and
//! [`RemoveAllError`], what that fails with.

use crate::base::goerr::path_error;
use crate::base::gojson::go_lossy;
use crate::base::safedir::{self, Dir};
use std::fmt;
use std::io;

/// A removal that failed: `remove <path>: <error>` (Go's `RemoveAll` on
/// Windows removes by path with `Remove`).
#[derive(Debug)]
pub(crate) struct RemoveAllError {
    path: String,
    source: io::Error,
}

impl fmt::Display for RemoveAllError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&path_error("remove", &self.path, &self.source))
    }
}

impl std::error::Error for RemoveAllError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// `path` and `name` joined with `\`, as text.
pub(super) fn shown(path: &str, name: &[u8]) -> String {
    let mut out = path.trim_end_matches('\\').to_string();
    out.push('\\');
    out.push_str(&go_lossy(name));
    out
}

/// Removes the entry `name` of `parent` (shown below `parent_path`) and,
/// when it is a directory, everything in it: nothing is followed (a link
/// or junction is removed itself), the home and the directories above it
/// are never entered nor removed, and the walk holds one handle per level
/// on a heap stack (no recursion). An entry that is not there is no
/// error; the first failure is reported once the rest was tried.
pub(crate) fn remove_tree_in(parent: &Dir, name: &[u8], parent_path: &[u8]) -> Result<(), RemoveAllError> {
    let top_path = shown(&go_lossy(parent_path), name);
    let fail = |path: &str, source: io::Error| RemoveAllError {
        path: path.to_string(),
        source,
    };
    let Some(first) = open_level(parent, name).map_err(|e| fail(&top_path, e))? else {
        return match safedir::unlink_in(parent, name) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(fail(&top_path, e)),
            _ => Ok(()),
        };
    };
    let mut stack = vec![Level {
        left: safedir::read_names(&first).map_err(|e| fail(&top_path, e))?,
        dir: first,
        name: name.to_vec(),
    }];
    let mut first_error: Option<RemoveAllError> = None;
    while let Some(level) = stack.last_mut() {
        if let Some(entry) = level.left.pop() {
            match open_level(&level.dir, &entry) {
                Ok(Some(dir)) => match safedir::read_names(&dir) {
                    Ok(left) => stack.push(Level { dir, name: entry, left }),
                    Err(e) => note(&mut first_error, &top_path, &stack, Some(&entry), e),
                },
                Ok(None) => match safedir::unlink_in(&level.dir, &entry) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        note(&mut first_error, &top_path, &stack, Some(&entry), e)
                    }
                    _ => {}
                },
                Err(e) => note(&mut first_error, &top_path, &stack, Some(&entry), e),
            }
            continue;
        }
        let Some(done) = stack.pop() else { break };
        drop(done.dir);
        let above = stack.last().map_or(parent, |l| &l.dir);
        match safedir::unlink_in(above, &done.name) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                let leaf = (!stack.is_empty()).then_some(done.name.as_slice());
                note(&mut first_error, &top_path, &stack, leaf, e);
            }
            _ => {}
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// One directory being emptied: its handle, its name in the level above,
/// and the names still to remove. The levels' path text is not kept (it
/// would grow with the square of the depth): [`note`] builds it for the
/// one failure reported.
struct Level {
    dir: Dir,
    name: Vec<u8>,
    left: Vec<Vec<u8>>,
}

/// Keeps the first failure: `leaf` (or the deepest level itself) below
/// `top`, through the names on `stack` (its first level is `top`).
fn note(first: &mut Option<RemoveAllError>, top: &str, stack: &[Level], leaf: Option<&[u8]>, source: io::Error) {
    if first.is_some() {
        return;
    }
    let mut path = top.to_string();
    for name in stack.iter().skip(1).map(|l| l.name.as_slice()).chain(leaf) {
        path.push('\\');
        path.push_str(&go_lossy(name));
    }
    *first = Some(RemoveAllError { path, source });
}

/// The entry `name` of `dir` as a directory to descend into (`None` for
/// anything else, a link or junction included, and for nothing there).
/// The home or a directory above it is refused before it is entered.
fn open_level(dir: &Dir, name: &[u8]) -> io::Result<Option<Dir>> {
    match safedir::open_dir_in(dir, name) {
        Ok(sub) => {
            safedir::guard_home(dir, name)?;
            Ok(Some(sub))
        }
        Err(_) => Ok(None),
    }
}
