//! `git.*`: info, status, list_branches, worktree_create, worktree_remove.

use super::Outcome;
use crate::dispatch::Call;
use crate::params::GitParams;

pub async fn handle(method: &str, _params: GitParams, _call: &Call<'_>) -> Outcome {
    Outcome::internal(format!("{method} is not implemented yet"))
}
