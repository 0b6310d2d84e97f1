//! Which `git.status` requests get a status:
//! only a linked worktree of the repository `baseRepo` names. A plain
//! directory, a subdirectory, a nested repository, the repository itself,
//! a worktree of another repository, or the right worktree named against
//! the wrong `baseRepo` all get the bare non-repo body.
//!
//! The decision compares what git reports, as absolute paths with every
//! link resolved: `path` must be the top level of a work tree whose git
//! directory differs from its common directory (a linked worktree), and
//! `baseRepo` must be the top level of a work tree with that same common
//! directory, other than `path`. A path inside `baseRepo` is taken as sent
//! first: a `..` name or a symbolic link between `baseRepo` and `path`
//! gets the non-repo body, as the reference measured.

use super::paths::{clean, has_dotdot, names_below};
use crate::methods::git::gitcli::{self, QUERY_TIMEOUT};
use std::fs;
use std::path::PathBuf;

/// What git says about one directory, links resolved.
struct Layout {
    top_level: PathBuf,
    git_dir: PathBuf,
    common_dir: PathBuf,
}

async fn layout(dir: &str) -> Option<Layout> {
    let args = [
        "rev-parse",
        "--path-format=absolute",
        "--show-toplevel",
        "--git-dir",
        "--git-common-dir",
    ];
    let out = gitcli::run(dir, &args, true, QUERY_TIMEOUT).await;
    let text = out.ok_text()?;
    let mut lines = text.lines().map(|line| fs::canonicalize(line).ok());
    let (Some(Some(top_level)), Some(Some(git_dir)), Some(Some(common_dir)), None) =
        (lines.next(), lines.next(), lines.next(), lines.next())
    else {
        return None;
    };
    Some(Layout {
        top_level,
        git_dir,
        common_dir,
    })
}

/// Whether `path` is a linked worktree of the repository at `base`.
pub(super) async fn is_linked_worktree_of(path: &str, base: &str) -> bool {
    if names_below(path, base).is_some() && (has_dotdot(path) || crosses_link(path, base)) {
        return false;
    }
    let (Ok(path_real), Ok(base_real)) = (fs::canonicalize(path), fs::canonicalize(base)) else {
        return false;
    };
    let (Some(tree), Some(repo)) = tokio::join!(layout(path), layout(base)) else {
        return false;
    };
    tree.top_level == path_real
        && tree.git_dir != tree.common_dir
        && repo.top_level == base_real
        && tree.common_dir == repo.common_dir
        && tree.top_level != repo.top_level
}

/// Whether a directory between `base` and `path` (the leaf excluded) is a
/// symbolic link.
fn crosses_link(path: &str, base: &str) -> bool {
    let Some(names) = names_below(path, base) else {
        return false;
    };
    let mut walked = clean(base);
    names[..names.len() - 1].iter().any(|name| {
        walked = clean(&format!("{walked}/{name}"));
        fs::symlink_metadata(&walked).is_ok_and(|m| m.file_type().is_symlink())
    })
}
