//! `git.*`: info, status, list_branches, worktree_create, worktree_remove,
//! all by running the real `git` CLI (see [`crate::gitcli`]).
//!
//! Choices where the contract is silent (also in `docs/PROTOCOL.md`):
//! - "is a repo" means `git rev-parse --is-inside-work-tree` prints `true`
//!   in the directory; anything else (missing dir, bare repo, inside
//!   `.git`, git missing) is the method's non-repo body.
//! - `git.info` `repo` is the `path` param verbatim; `root` is
//!   `--show-toplevel`; `branch` is `symbolic-ref --short HEAD`, else
//!   `detached:` + `rev-parse --short HEAD`; `repoSlug` comes from
//!   `git config --get remote.origin.url` (no `insteadOf` rewriting);
//!   `defaultBranch` is `symbolic-ref refs/remotes/origin/HEAD` without
//!   `refs/remotes/origin/`.
//! - `git.list_branches` lists `refs/heads/*` full names minus the prefix,
//!   sorted by bytes (so a branch that shares a name with a tag is never
//!   shortened to `heads/x`).
//! - `git.status` lines are verbatim (4534d86 keeps the first line's
//!   leading space) and, with git ≥ 2.40, attributes come from the empty
//!   tree, so a repo's `.gitattributes` runs no filter.
//! - `git.worktree_create` `timeoutMs` > 0 takes [`worktree_deadline`].
//! - `git.worktree_create` defaults `sourceBranch` to
//!   `git rev-parse --abbrev-ref HEAD`: empty on an unborn HEAD (git then
//!   infers an orphan branch), `HEAD` when detached. The failure text is
//!   git's stderr, trimmed (stdout if stderr is empty, else `exit status N`).
//! - `git.worktree_remove` is lenient: it runs `git worktree remove
//!   --force <path>`, and if that fails `git worktree prune` (for a worktree
//!   whose directory is already gone), and always answers success. It never
//!   deletes a directory itself.

mod worktree_deadline;

use super::Outcome;
use crate::gitcli::{self, porcelain_lines, repo_slug, MUTATE_TIMEOUT, QUERY_TIMEOUT};
use crate::gojson::go_lossy;
use crate::method::GitMethod;
use crate::params::GitParams;
use serde::Serialize;

#[derive(Serialize)]
struct InfoRepo {
    #[serde(rename = "isRepo")]
    is_repo: bool,
    repo: String,
    branch: String,
    root: String,
    #[serde(rename = "repoSlug")]
    repo_slug: String,
    #[serde(rename = "defaultBranch")]
    default_branch: String,
}

#[derive(Serialize)]
struct InfoNotRepo {
    #[serde(rename = "isRepo")]
    is_repo: bool,
    #[serde(rename = "repoSlug")]
    repo_slug: &'static str,
    #[serde(rename = "defaultBranch")]
    default_branch: &'static str,
}

#[derive(Serialize)]
struct StatusResult {
    #[serde(rename = "isRepo")]
    is_repo: bool,
    clean: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    changes: Option<Vec<String>>,
}

#[derive(Serialize)]
struct BranchesResult {
    #[serde(rename = "isRepo")]
    is_repo: bool,
    branches: Vec<String>,
}

#[derive(Serialize, Default)]
pub(super) struct WorktreeResult {
    success: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    path: String,
    #[serde(rename = "sourceBranch", skip_serializing_if = "String::is_empty")]
    source_branch: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    error: String,
    #[serde(rename = "errorCode", skip_serializing_if = "String::is_empty")]
    error_code: String,
}

pub async fn handle(method: GitMethod, params: GitParams) -> Outcome {
    match method {
        GitMethod::Info => info(&params.path).await,
        GitMethod::Status => status(&params.path).await,
        GitMethod::ListBranches => list_branches(&params.path).await,
        GitMethod::WorktreeCreate => worktree_create(&params).await,
        GitMethod::WorktreeRemove => worktree_remove(&params).await,
    }
}

async fn query(dir: &str, args: &[&str]) -> gitcli::GitOutput {
    gitcli::run(dir, args, true, QUERY_TIMEOUT).await
}

async fn info(path: &str) -> Outcome {
    if !gitcli::is_work_tree(path).await {
        return Outcome::ok(&InfoNotRepo {
            is_repo: false,
            repo_slug: "",
            default_branch: "",
        });
    }
    let (symbolic, root, url, origin_head) = tokio::join!(
        query(path, &["symbolic-ref", "--short", "HEAD"]),
        query(path, &["rev-parse", "--show-toplevel"]),
        query(path, &["config", "--get", "remote.origin.url"]),
        query(path, &["symbolic-ref", "refs/remotes/origin/HEAD"]),
    );
    let branch = match symbolic.ok_text() {
        Some(branch) => branch,
        None => match query(path, &["rev-parse", "--short", "HEAD"]).await.ok_text() {
            Some(sha) => format!("detached:{sha}"),
            None => String::new(),
        },
    };
    let default_branch = origin_head
        .ok_text()
        .map(|r| r.strip_prefix("refs/remotes/origin/").unwrap_or(&r).to_string())
        .unwrap_or_default();
    Outcome::ok(&InfoRepo {
        is_repo: true,
        repo: path.to_string(),
        branch,
        root: root.ok_text().unwrap_or_default(),
        repo_slug: url.ok_text().map(|u| repo_slug(&u)).unwrap_or_default(),
        default_branch,
    })
}

async fn status(path: &str) -> Outcome {
    let not_repo = StatusResult {
        is_repo: false,
        clean: false,
        changes: None,
    };
    // One call answers both "is it a work tree" and the object format the
    // empty tree is spelled in.
    let probe = query(path, &["rev-parse", "--is-inside-work-tree", "--show-object-format"]).await;
    let probe = probe.ok_text().unwrap_or_default();
    let mut lines = probe.lines();
    if lines.next() != Some("true") {
        return Outcome::ok(&not_repo);
    }
    // Build 4534d86: attributes come from the empty tree, so a repo's own
    // .gitattributes can neither change the answer nor run its filters.
    let attr_source = format!("--attr-source={}", gitcli::empty_tree(lines.next().unwrap_or("sha1")));
    let mut args = vec!["status", "--porcelain"];
    if gitcli::supports_attr_source().await {
        args.insert(0, &attr_source);
    }
    let out = query(path, &args).await;
    if !out.success {
        return Outcome::ok(&not_repo);
    }
    let changes = porcelain_lines(&out.stdout);
    Outcome::ok(&StatusResult {
        is_repo: true,
        clean: changes.is_empty(),
        changes: (!changes.is_empty()).then_some(changes),
    })
}

async fn list_branches(path: &str) -> Outcome {
    let not_repo = BranchesResult {
        is_repo: false,
        branches: Vec::new(),
    };
    if !gitcli::is_work_tree(path).await {
        return Outcome::ok(&not_repo);
    }
    let out = query(path, &["for-each-ref", "--format=%(refname)", "refs/heads/"]).await;
    if !out.success {
        return Outcome::ok(&not_repo);
    }
    let mut names: Vec<Vec<u8>> = out
        .stdout
        .split(|&b| b == b'\n')
        .filter_map(|line| line.strip_prefix(b"refs/heads/"))
        .filter(|name| !name.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    names.sort_unstable();
    Outcome::ok(&BranchesResult {
        is_repo: true,
        branches: names.iter().map(|n| go_lossy(n)).collect(),
    })
}

async fn worktree_create(params: &GitParams) -> Outcome {
    if params.branch_name.is_empty() {
        return Outcome::invalid_params("branchName is required");
    }
    let repo = params.base_repo.as_str();
    if !gitcli::is_work_tree(repo).await {
        return Outcome::ok(&WorktreeResult {
            success: false,
            error: "not a git repository".to_string(),
            error_code: "not_a_repo".to_string(),
            ..WorktreeResult::default()
        });
    }
    let source = if params.source_branch.is_empty() {
        query(repo, &["rev-parse", "--abbrev-ref", "HEAD"])
            .await
            .ok_text()
            .unwrap_or_default()
    } else {
        params.source_branch.clone()
    };
    if params.timeout_ms > 0 {
        return worktree_deadline::create(repo, params, source).await;
    }
    let mut args = vec![
        "worktree",
        "add",
        "-b",
        params.branch_name.as_str(),
        params.worktree_path.as_str(),
    ];
    if !source.is_empty() {
        args.push(source.as_str());
    }
    let out = gitcli::run(repo, &args, false, MUTATE_TIMEOUT).await;
    if !out.success {
        return Outcome::ok(&add_failed(&out));
    }
    Outcome::ok(&WorktreeResult::created(params, source))
}

impl WorktreeResult {
    fn created(params: &GitParams, source: String) -> Self {
        WorktreeResult {
            success: true,
            path: params.worktree_path.clone(),
            source_branch: source,
            ..WorktreeResult::default()
        }
    }

    fn failed(error: String, code: &str) -> Self {
        WorktreeResult {
            success: false,
            error,
            error_code: code.to_string(),
            ..WorktreeResult::default()
        }
    }
}

/// `git worktree add failed: <detail>`: git's stderr, trimmed (stdout if
/// stderr is empty, else Go's `exit status N`).
fn add_failed(out: &gitcli::GitOutput) -> WorktreeResult {
    let stderr = out.stderr.trim_ascii();
    let detail = if !stderr.is_empty() {
        go_lossy(stderr)
    } else if !out.stdout.trim_ascii().is_empty() {
        out.text()
    } else {
        out.status_text.clone()
    };
    WorktreeResult::failed(format!("git worktree add failed: {detail}"), "worktree_add_failed")
}

async fn worktree_remove(params: &GitParams) -> Outcome {
    let repo = params.base_repo.as_str();
    if !params.worktree_path.is_empty() {
        let args = ["worktree", "remove", "--force", params.worktree_path.as_str()];
        if !gitcli::run(repo, &args, false, MUTATE_TIMEOUT).await.success {
            gitcli::run(repo, &["worktree", "prune"], false, MUTATE_TIMEOUT).await;
        }
    }
    Outcome::ok(&WorktreeResult {
        success: true,
        ..WorktreeResult::default()
    })
}
