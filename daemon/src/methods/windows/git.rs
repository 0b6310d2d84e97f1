//! The Windows half of `methods::git` (issue 43): the `git.*` handlers
//! are not ported yet (worktrees are made and removed through
//! `base::safedir` directory handles, and git runs in process groups).
//! Each call answers that plainly, as an internal error, except a
//! worktree call with a `worktreeRoot`: the reference's Windows builds
//! refuse every one ([`hostrules::worktree_root_refusal`]), and so does
//! this half, after the param checks that need no git (`branchName` on
//! create, an empty `worktreePath`) but without the repository tests the
//! Unix half runs first.

use super::hostrules::{self, WorktreeCall};
use super::Outcome;
use crate::protocol::build::Build;
use crate::protocol::method::GitMethod;
use crate::protocol::params::GitParams;

/// Refuses: `git.*` is not available on Windows yet; a `worktreeRoot` is
/// refused as the reference refuses it.
pub(crate) async fn handle(method: GitMethod, params: GitParams, _build: &Build) -> Outcome {
    let call = match method {
        GitMethod::WorktreeCreate if params.branch_name.is_empty() => {
            return Outcome::invalid_params("branchName is required")
        }
        GitMethod::WorktreeCreate => Some(WorktreeCall::Create),
        GitMethod::WorktreeRemove => Some(WorktreeCall::Remove),
        _ => None,
    };
    let refusal = call
        .filter(|_| !params.worktree_path.is_empty())
        .and_then(|call| hostrules::worktree_root_refusal(crate::sys::os::HOST, call, &params.worktree_root));
    match refusal {
        Some(refusal) => Outcome::ok(&refusal),
        None => Outcome::internal(format!("{} is not available on Windows yet (issue 43)", method.name())),
    }
}
