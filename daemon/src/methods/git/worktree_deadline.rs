//! `git.worktree_create` under a caller deadline (`timeoutMs`, reference
//! build 4534d86): the add and the checkout run as two git commands so a
//! fired deadline can say which phase it cut.
//!
//! Without `timeoutMs` (or with 0 or less) the caller never reaches this
//! module, and the reply is the single-command one, byte for byte.

use super::containment::Leaf;
use super::worktree_add::{self, AddPlan, Added};
use super::WorktreeResult;
use crate::gitcli;
use crate::methods::Outcome;
use crate::params::GitParams;
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;

/// Where the deadline cut the checkout, as the error's parenthetical says it.
enum Cut<'a> {
    Before,
    /// The checkout was killed; git's error (Go's `signal: killed`).
    During(&'a str),
    After,
}

fn timed_out(ms: i64, phase: Cut<'_>) -> WorktreeResult {
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

/// `git worktree add --no-checkout …` (see [`worktree_add`]), then `git
/// read-tree --reset -u HEAD` in the new worktree (one plain add on an
/// unborn source), both within `timeoutMs` of the start. A fired deadline
/// leaves what git had done in place, like the single-command path's
/// failures.
pub(super) async fn create(
    repo: &str,
    params: &GitParams,
    plan: &AddPlan<'_>,
    source: &str,
    head_born: bool,
    leaf: &Leaf,
) -> Outcome {
    let ms = params.timeout_ms;
    let deadline = Instant::now() + Duration::from_millis(ms.unsigned_abs());
    let left = || deadline.saturating_duration_since(Instant::now());
    // An unborn HEAD has nothing to check out (git infers `--orphan`,
    // which refuses `--no-checkout`): then the add is the whole job. A
    // start commit or an existing branch always has one.
    let check_out = head_born || !plan.start.is_empty() || plan.existing.is_some();
    let branch = match worktree_add::add(repo, plan, check_out, left(), leaf).await {
        Added::Done { branch } => branch,
        Added::Failed(result) => return Outcome::ok(&result),
        Added::TimedOut => return Outcome::ok(&timed_out(ms, Cut::Before)),
    };
    if check_out {
        if left().is_zero() {
            return Outcome::ok(&timed_out(ms, Cut::Before));
        }
        let dir = Path::new(repo).join(plan.worktree);
        let dir = dir.to_string_lossy();
        let checkout = gitcli::run(&dir, &["read-tree", "--reset", "-u", "HEAD"], false, left()).await;
        if checkout.timed_out {
            return Outcome::ok(&timed_out(ms, Cut::During(&checkout.status_text)));
        }
        if !checkout.success {
            return Outcome::ok(&worktree_add::add_failed(&worktree_add::git_text(&checkout)));
        }
        // The copy step is not cut short; the deadline is judged after it.
        super::seed_worktree(repo, leaf).await;
        if left().is_zero() {
            return Outcome::ok(&timed_out(ms, Cut::After));
        }
    }
    Outcome::ok(&WorktreeResult::created(params, source, branch))
}
