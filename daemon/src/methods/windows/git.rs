//! The Windows half of `methods::git` (issue 43): the `git.*` handlers
//! are not ported yet (worktrees are made and removed through
//! `base::safedir` directory handles, and git runs in process groups).
//! Each call answers that plainly, as an internal error.

use super::Outcome;
use crate::protocol::build::Build;
use crate::protocol::method::GitMethod;
use crate::protocol::params::GitParams;

/// Refuses: `git.*` is not available on Windows yet.
pub(crate) async fn handle(method: GitMethod, _params: GitParams, _build: &Build) -> Outcome {
    Outcome::internal(format!("{} is not available on Windows yet (issue 43)", method.name()))
}
