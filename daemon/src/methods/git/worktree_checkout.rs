//! `git.worktree_create` after the location checks: the
//! add with `--no-checkout` ([`worktree_add`]), the checkout as its own
//! `git read-tree`, the `.claude/` seeding, and, when the checkout fails
//! or a caller deadline (`timeoutMs`, build 4534d86) fires, the rollback
//! ([`worktree_undo`]).
//!
//! The deadline covers the add, the checkout and the seeding, but only
//! the checkout is killed by it: the add is waited for (a failed add
//! answers its own failure; a successful one past the deadline is
//! "before the checkout started"), and the seeding runs to its end
//! before the deadline is judged ("after the checkout finished").
//! Without `timeoutMs` (or with 0 or less) nothing is timed but git's own
//! limits.

use super::worktree_add::{self, AddPlan, Added};
use super::worktree_registered::{self, BeforeAdd};
use super::worktree_undo::Undo;
use super::{containment::Leaf, WorktreeResult};
use crate::methods::git::gitcli::{self, MUTATE_TIMEOUT};
use crate::methods::Outcome;
use crate::protocol::params::GitParams;
use std::time::Duration;
use tokio::time::Instant;

/// Where the deadline cut the create, as the error's parenthetical says it.
enum Cut {
    Before,
    /// The checkout was killed; git's text about it.
    During(String),
    After,
}

fn timed_out(ms: i64, phase: Cut) -> WorktreeResult {
    let why = match phase {
        Cut::Before => "before the checkout started)".to_string(),
        Cut::During(err) => format!("during the checkout): {err}"),
        Cut::After => "after the checkout finished)".to_string(),
    };
    WorktreeResult::failed(
        format!("git worktree add timed out after {ms}ms (deadline expired {why}"),
        "timeout",
    )
}

fn checkout_failed(text: &str) -> WorktreeResult {
    WorktreeResult::failed(
        format!("git worktree add failed (checkout): {text}"),
        "worktree_add_failed",
    )
}

/// Adds, checks out and seeds the worktree `plan` describes in the leaf
/// the create made; answers the create's frame. With `before_add` (a
/// build with the registration tests), the registration git made is
/// tested right after the add, before the deadline.
pub(super) async fn create(
    repo: &str,
    params: &GitParams,
    plan: &AddPlan<'_>,
    source: &str,
    leaf: &Leaf,
    guard: bool,
    before_add: Option<&BeforeAdd>,
) -> Outcome {
    let ms = params.timeout_ms;
    let deadline = (ms > 0).then(|| Instant::now() + Duration::from_millis(ms.unsigned_abs()));
    let expired = || deadline.is_some_and(|d| Instant::now() >= d);
    let (branch, created) = match worktree_add::add(repo, plan, MUTATE_TIMEOUT, leaf).await {
        Added::Done { branch, created } => (branch, created),
        Added::Failed(result) => return Outcome::ok(&result),
        Added::TimedOut => return Outcome::ok(&worktree_add::add_failed("signal: killed")),
    };
    // A refused registration is answered as it is: no checkout, nothing
    // rolled back.
    let accepted = match before_add.map(|b| b.check(&params.worktree_path, leaf)) {
        Some(Err(text)) => return Outcome::ok(&worktree_registered::refused(text)),
        Some(Ok(accepted)) => accepted,
        None => None,
    };
    let undo = Undo {
        repo,
        worktree: &params.worktree_path,
        branch: &branch,
        created,
        leaf,
        guard,
        accepted: accepted.as_ref(),
    };
    if expired() {
        return fail(&undo, timed_out(ms, Cut::Before)).await;
    }
    // A new branch with a start commit reads that commit; otherwise the
    // branch the worktree checks out.
    let rev = if created && !plan.start.is_empty() {
        plan.start.to_string()
    } else {
        format!("refs/heads/{branch}")
    };
    let limit = deadline.map_or(MUTATE_TIMEOUT, |d| d.saturating_duration_since(Instant::now()));
    let args = ["read-tree", "-u", "--reset", "--no-recurse-submodules", &rev];
    let checkout = gitcli::run(plan.worktree, &args, false, limit).await;
    let text = worktree_add::git_text(&checkout);
    if checkout.timed_out && deadline.is_some() {
        return fail(&undo, timed_out(ms, Cut::During(text))).await;
    }
    if !checkout.success {
        return fail(&undo, checkout_failed(&text)).await;
    }
    // The seeding is not cut short; the deadline is judged after it.
    super::seed_worktree(repo, leaf).await;
    if expired() {
        return fail(&undo, timed_out(ms, Cut::After)).await;
    }
    Outcome::ok(&WorktreeResult::created(params, source, branch.clone()))
}

/// Rolls the create back and answers `result`, with what the rollback
/// could not undo appended to its text.
async fn fail(undo: &Undo<'_>, mut result: WorktreeResult) -> Outcome {
    let undone = undo.run().await;
    result.error.push_str(&undone.text);
    result.branch_kept = undone.branch_kept;
    Outcome::ok(&result)
}
