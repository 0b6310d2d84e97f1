//! `git.*`: info, status, list_branches, worktree_create, worktree_remove,
//! all by running the real `git` CLI (see [`crate::methods::git::gitcli`]).
//!
//! Before git runs, every method has the git directory judged by
//! [`trust`]. Choices where the contract is silent (also
//! in `docs/PROTOCOL.md`):
//! - "is a repo" means `git rev-parse --git-dir` succeeds in the directory
//!   (a missing dir or git, no repository: the non-repo body). For
//!   `git.list_branches` that is all (a bare repo and the inside of `.git`
//!   list their branches, build 5db5e4a), and a failing `for-each-ref` is
//!   `-32603 exit status <n>`. `git.info` also needs the trust check's walk
//!   to have found a work tree: `root` is the folder
//!   holding `.git`, links resolved; a bare repo or the inside of `.git`
//!   is the non-repo body. `git.status` is gated by [`status_gate`].
//! - `git.info` `repo` is `root`'s folder name, left out when it starts
//!   with `-` or `+`; `branch` is `symbolic-ref --short HEAD`, else
//!   `detached:` + `rev-parse --short HEAD`; `repoSlug` comes from
//!   `git config --get remote.origin.url` (no `insteadOf` rewriting);
//!   `defaultBranch` is `symbolic-ref refs/remotes/origin/HEAD` without
//!   `refs/remotes/origin/`.
//! - `git.list_branches` lists `refs/heads/*` full names minus the prefix,
//!   sorted by bytes (so a branch that shares a name with a tag is never
//!   shortened to `heads/x`).
//! - `git.status` needs `baseRepo` and answers only for a linked worktree
//!   of it ([`status_gate`], build 7d193f89); lines are verbatim (4534d86
//!   keeps the first line's leading space), every untracked file listed,
//!   and, with git ≥ 2.40, attributes come from the empty tree, so a
//!   repo's `.gitattributes` runs no filter.
//! - `git.worktree_create`/`_remove` paths pass [`containment`] first;
//!   create makes the directories itself and takes an empty
//!   leaf back after a failed add.
//! - `git.worktree_create` starts the branch at the commit
//!   [`worktree_add::start_commit`] picks for `sourceBranch`,
//!   else at HEAD, echoing the current branch (none when detached); an
//!   `existingBranch` is attached instead. The add never checks
//!   out; [`worktree_checkout`] does, seeds ([`seed`]) and judges
//!   `timeoutMs`, and a failed checkout or a fired deadline is rolled back
//!   by [`worktree_undo`]. A failure's text is git's stderr by
//!   [`worktree_add::git_text`]. Build 89cb6289 also drops a stale
//!   registration of the path before the add ([`worktree_stale`]) and
//!   tests the registration git made before the checkout
//!   ([`worktree_registered`]).
//! - `git.worktree_remove` refuses a leaf link and a locked worktree,
//!   then [`worktree_remove`] removes it (git, else by hand) and deletes
//!   `branchName` ([`branch_step`]).

mod branch_step;
mod containment;
mod external_root;
mod gitcli;
mod include_rules;
mod paths;
mod seed;
mod seed_include;
mod status_gate;
mod trust;
mod worktree_add;
mod worktree_checkout;
mod worktree_registered;
mod worktree_remove;
mod worktree_stale;
mod worktree_undo;

use super::hostrules::{self, WorktreeCall};
use super::Outcome;
use crate::base::gojson::go_lossy;
use crate::protocol::build::{Build, Switch};
use crate::protocol::method::GitMethod;
use crate::protocol::params::GitParams;
use containment::{Refusal, Verb};
use gitcli::{porcelain_lines, repo_slug, QUERY_TIMEOUT};
use serde::Serialize;
use std::os::unix::ffi::OsStrExt;
use trust::{StrayRules, Verdict};

#[derive(Serialize)]
struct InfoRepo {
    #[serde(rename = "isRepo")]
    is_repo: bool,
    /// The folder name of `root`; left out for a name that starts with
    /// `-` or `+`.
    #[serde(skip_serializing_if = "Option::is_none")]
    repo: Option<String>,
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
    /// The branch the new worktree checks out.
    #[serde(skip_serializing_if = "String::is_empty")]
    branch: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    error: String,
    #[serde(rename = "errorCode", skip_serializing_if = "String::is_empty")]
    error_code: String,
    /// Only ever true: the guard kept the branch (builds with
    /// [`crate::protocol::build::Switch::UnpushedGuard`]); last in every frame that has it.
    #[serde(rename = "branchKept", skip_serializing_if = "std::ops::Not::not")]
    branch_kept: bool,
}

/// Answers `method` as `build` does: with [`Switch::UnpushedGuard`] the
/// branch step of `git.worktree_remove` and of the create rollback guards
/// the branch; with [`Switch::WorktreeRegistration`] the create tests the
/// registration around the add; with [`Switch::StrayCommondir`] the trust
/// check trusts a stray `commondir` of `.` or `./`.
pub(crate) async fn handle(method: GitMethod, params: GitParams, build: &Build) -> Outcome {
    let guard = build.has(Switch::UnpushedGuard);
    let registration = build.has(Switch::WorktreeRegistration);
    let stray = if build.has(Switch::StrayCommondir) {
        StrayRules::DotOnly
    } else {
        StrayRules::Refuse
    };
    match method {
        GitMethod::Info => info(&params.path, stray).await,
        GitMethod::Status => status(&params.path, &params.base_repo, stray).await,
        GitMethod::ListBranches => list_branches(&params.path, stray).await,
        GitMethod::WorktreeCreate => worktree_create(&params, guard, registration, stray).await,
        GitMethod::WorktreeRemove => worktree_remove(&params, guard, stray).await,
    }
}

async fn query(dir: &str, args: &[&str]) -> gitcli::GitOutput {
    gitcli::run(dir, args, true, QUERY_TIMEOUT).await
}

/// `git rev-parse --git-dir` succeeds in `dir`: git finds a repository
/// there, a bare one or the inside of `.git` included (build 5db5e4a's
/// gate for `git.list_branches`, and 89cb6289's for `git.info`).
async fn has_git_dir(dir: &str) -> bool {
    query(dir, &["rev-parse", "--git-dir"]).await.success
}

async fn info(path: &str, stray: StrayRules) -> Outcome {
    let not_repo = || {
        Outcome::ok(&InfoNotRepo {
            is_repo: false,
            repo_slug: "",
            default_branch: "",
        })
    };
    let (verdict, walk_root) = trust::judge_with_root(path, stray).await;
    if let Verdict::Refused(text) = verdict {
        return Outcome::internal(text);
    }
    if verdict == Verdict::NoRepository || !has_git_dir(path).await {
        return not_repo();
    }
    // The root is the folder where the trust check's walk
    // found `.git`, not git's `--show-toplevel` (so `core.worktree` cannot
    // move it); a walk that found no work tree answers the non-repo body.
    let Some(root) = walk_root else {
        return not_repo();
    };
    let root = go_lossy(root.as_os_str().as_bytes());
    let (symbolic, url, origin_head) = tokio::join!(
        query(path, &["symbolic-ref", "--short", "HEAD"]),
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
        repo: folder_name(&root),
        branch,
        root,
        repo_slug: url.ok_text().map(|u| repo_slug(&u)).unwrap_or_default(),
        default_branch,
    })
}

/// `repo` of `git.info`: the last element of `root` as Go's
/// `filepath.Base` gives it (`/` for the file-system root), `None` for a
/// name that starts with `-` or `+` (f6010b97 and 89cb6289 leave the
/// member out then).
fn folder_name(root: &str) -> Option<String> {
    let trimmed = root.trim_end_matches('/');
    let name = if root.is_empty() {
        "."
    } else if trimmed.is_empty() {
        "/"
    } else {
        trimmed.rsplit('/').next().unwrap_or(trimmed)
    };
    (!name.starts_with(['-', '+'])).then(|| name.to_string())
}

async fn status(path: &str, base_repo: &str, stray: StrayRules) -> Outcome {
    // Status is for a session worktree of `baseRepo` only,
    // so a request without one (seed 000's `{path}`) is refused.
    if base_repo.is_empty() {
        return Outcome::invalid_params("baseRepo is required");
    }
    let not_repo = StatusResult {
        is_repo: false,
        clean: false,
        changes: None,
    };
    match trust::judge(base_repo, stray).await {
        Verdict::Refused(text) => return Outcome::internal(text),
        Verdict::NoRepository => return Outcome::ok(&not_repo),
        Verdict::Trusted => {}
    }
    if !status_gate::is_linked_worktree_of(path, base_repo).await {
        return Outcome::ok(&not_repo);
    }
    // One call answers both "is it a work tree" and the object format the
    // empty tree is spelled in.
    let probe = query(path, &["rev-parse", "--is-inside-work-tree", "--show-object-format"]).await;
    let probe = probe.ok_text().unwrap_or_default();
    let mut lines = probe.lines();
    if lines.next() != Some("true") {
        return Outcome::ok(&not_repo);
    }
    // Attributes come from the empty tree, so a repo's own
    // .gitattributes can neither change the answer nor run its filters.
    let attr_source = format!("--attr-source={}", gitcli::empty_tree(lines.next().unwrap_or("sha1")));
    // Every untracked file on its own line, not its directory.
    let mut args = vec!["status", "--porcelain", "--untracked-files=all"];
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

async fn list_branches(path: &str, stray: StrayRules) -> Outcome {
    let not_repo = BranchesResult {
        is_repo: false,
        branches: Vec::new(),
    };
    let verdict = trust::judge(path, stray).await;
    if let Verdict::Refused(text) = verdict {
        return Outcome::internal(text);
    }
    // A bare repository and the inside of `.git` are
    // repositories here (unlike git.info).
    if verdict == Verdict::NoRepository || !has_git_dir(path).await {
        return Outcome::ok(&not_repo);
    }
    let out = query(path, &["for-each-ref", "--format=%(refname)", "refs/heads/"]).await;
    if !out.success {
        // docs/record/git-list-branches.md: the Go error of the call.
        return Outcome::internal(out.status_text);
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

async fn worktree_create(params: &GitParams, guard: bool, registration: bool, stray: StrayRules) -> Outcome {
    if params.branch_name.is_empty() {
        return Outcome::invalid_params("branchName is required");
    }
    let repo = params.base_repo.as_str();
    if containment::under_managed_worktrees(repo) {
        return Outcome::ok(&WorktreeResult::failed(
            containment::NESTED_BASE_REPO.to_string(),
            "nested_base_repo",
        ));
    }
    let not_a_repo = || {
        Outcome::ok(&WorktreeResult::failed(
            "not a git repository".to_string(),
            "not_a_repo",
        ))
    };
    match trust::judge(repo, stray).await {
        Verdict::Refused(text) => return Outcome::ok(&WorktreeResult::failed(text, "worktree_add_failed")),
        Verdict::NoRepository => return not_a_repo(),
        Verdict::Trusted => {}
    }
    if !gitcli::is_work_tree(repo).await {
        return not_a_repo();
    }
    let worktree = params.worktree_path.as_str();
    if worktree.is_empty() {
        return Outcome::ok(&WorktreeResult::failed(
            "failed to create parent directory: \"\" does not name a directory".to_string(),
            "mkdir_failed",
        ));
    }
    let root = params.worktree_root.as_str();
    let external_dir = if root.is_empty() {
        let refusal = containment::location_refusal(Verb::Create, repo, worktree)
            .or_else(|| containment::exists_refusal(worktree));
        if let Some(Refusal { text, code }) = refusal {
            return Outcome::ok(&WorktreeResult::failed(text, code));
        }
        None
    } else {
        if let Some(r) = hostrules::worktree_root_refusal(crate::sys::os::HOST, WorktreeCall::Create, root) {
            return Outcome::ok(&WorktreeResult::failed(r.text, r.code.unwrap_or_default()));
        }
        let checked = match external_root::spelling_refusal(Verb::Create, root, repo, worktree) {
            Some(refusal) => Err(refusal),
            None => {
                let checkouts = external_root::Checkouts::of(repo).await;
                external_root::create_refusal(root, repo, worktree, &checkouts)
            }
        };
        match checked {
            Ok(dir) => Some(dir),
            Err(Refusal { text, code }) => return Outcome::ok(&WorktreeResult::failed(text, code)),
        }
    };
    // A sourceBranch that names a commit is echoed as sent
    // and starts the branch; otherwise the branch starts at HEAD and the
    // reply echoes the current branch (none when detached or unborn).
    let start = match params.source_branch.as_str() {
        "" => None,
        source => worktree_add::start_commit(repo, source).await,
    };
    let source = match start {
        Some(_) => params.source_branch.clone(),
        None => query(repo, &["rev-parse", "--abbrev-ref", "HEAD"])
            .await
            .ok_text()
            .filter(|branch| branch != "HEAD")
            .unwrap_or_default(),
    };
    let start = start.unwrap_or_default();
    let made = match &external_dir {
        Some(dir) => {
            let name = std::path::Path::new(&paths::clean(worktree))
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            external_root::make_leaf(dir, &name)
        }
        // The location rules passed, so the path lies strictly below the repo.
        None => containment::make_leaf(repo, &paths::names_below(worktree, repo).unwrap_or_default()),
    };
    let leaf = match made {
        Ok(leaf) => leaf,
        Err(e) => {
            return Outcome::ok(&WorktreeResult::failed(
                format!("failed to create parent directory: {e}"),
                "mkdir_failed",
            ))
        }
    };
    let plan = worktree_add::AddPlan {
        branch_name: &params.branch_name,
        worktree,
        start: &start,
        existing: worktree_add::existing_branch(repo, &params.existing_branch).await,
    };
    // Right before the add: the stale-entry step, and the git directory
    // the tests after the add judge by.
    let before_add = if registration {
        Some(worktree_registered::BeforeAdd::take(repo, worktree).await)
    } else {
        None
    };
    worktree_checkout::create(repo, params, &plan, &source, &leaf, guard, before_add.as_ref()).await
}

/// Copies the repository's ignored files that `.worktreeinclude` names
/// ([`seed_include`]) and its ignored `.claude/` files ([`seed`]) into the
/// new worktree; best effort.
async fn seed_worktree(repo: &str, leaf: &containment::Leaf) {
    let (Some(top), Ok(dest)) = (
        query(repo, &["rev-parse", "--show-toplevel"]).await.ok_text(),
        leaf.open(),
    ) else {
        return;
    };
    seed_include::manifest_pass(&top, &dest).await;
    seed::claude_pass(&top, &dest).await;
}

impl WorktreeResult {
    fn created(params: &GitParams, source: &str, branch: String) -> Self {
        WorktreeResult {
            success: true,
            path: params.worktree_path.clone(),
            source_branch: source.to_string(),
            branch,
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

async fn worktree_remove(params: &GitParams, guard: bool, stray: StrayRules) -> Outcome {
    let refused = |text: String| {
        Outcome::ok(&WorktreeResult {
            success: false,
            error: text,
            ..WorktreeResult::default()
        })
    };
    let repo = params.base_repo.as_str();
    let worktree = params.worktree_path.as_str();
    if worktree.is_empty() {
        return refused("failed to remove worktree: \"\" does not name a directory".to_string());
    }
    let root = params.worktree_root.as_str();
    let location = if root.is_empty() {
        containment::location_refusal(Verb::Remove, repo, worktree).map(|r| r.text)
    } else if let Some(r) = hostrules::worktree_root_refusal(crate::sys::os::HOST, WorktreeCall::Remove, root) {
        Some(r.text)
    } else if let Some(r) = external_root::spelling_refusal(Verb::Remove, root, repo, worktree) {
        Some(r.text)
    } else {
        let checkouts = external_root::Checkouts::of(repo).await;
        external_root::checkout_refusal(Verb::Remove, root, repo, &checkouts)
            .map(|r| r.text)
            .or_else(|| external_root::missing_root_refusal(root))
            .or_else(|| external_root::dir_symlink_refusal(Verb::Remove, worktree))
    };
    if let Some(text) = location {
        return refused(text);
    }
    // Git resolves a link to the worktree it names, so a
    // planted leaf link could point the remove at any worktree.
    if let Some(text) = containment::leaf_kind_refusal(worktree) {
        return refused(text);
    }
    if containment::under_managed_worktrees(repo) {
        return refused(containment::NESTED_BASE_REPO.to_string());
    }
    let locks = match trust::judge(repo, stray).await {
        Verdict::Trusted => locked_worktrees(repo).await,
        _ => None,
    };
    let Some(locks) = locks else {
        // No repository there (none at all: row X3): the guard's listing
        // would fail, so a guarded build reports the branch kept.
        return Outcome::ok(&WorktreeResult {
            success: false,
            error: format!(
                "failed to remove worktree: could not check whether {worktree} is locked (its registrations could not be examined); retry"
            ),
            branch_kept: guard && branch_step::is_passed_to_git(&params.branch_name),
            ..WorktreeResult::default()
        });
    };
    let spellings = [paths::clean(worktree), containment::resolved_leaf(worktree)];
    if locks.iter().any(|locked| spellings.contains(locked)) {
        return refused(format!(
            "refusing to remove worktree: {worktree} is locked (git worktree lock); unlock it to remove it"
        ));
    }
    worktree_remove::remove(repo, worktree, &params.branch_name, guard, !root.is_empty()).await
}

/// The paths of the locked worktrees registered in `repo`
/// (`git worktree list --porcelain -z`); `None` when git cannot list them
/// (no repository, an unreadable one).
async fn locked_worktrees(repo: &str) -> Option<Vec<String>> {
    if !gitcli::is_work_tree(repo).await {
        return None;
    }
    let out = query(repo, &["worktree", "list", "--porcelain", "-z"]).await;
    if !out.success {
        return None;
    }
    let mut locked = Vec::new();
    let mut current: Option<String> = None;
    for field in out.stdout.split(|&b| b == 0) {
        if let Some(path) = field.strip_prefix(b"worktree ") {
            current = Some(String::from_utf8_lossy(path).into_owned());
        } else if field == b"locked" || field.starts_with(b"locked ") {
            locked.extend(current.clone());
        }
    }
    Some(locked)
}

#[cfg(test)]
mod tests {
    use super::{folder_name, hostrules, WorktreeCall, WorktreeResult};
    use crate::base::gojson::to_go_json;
    use crate::sys::Host;

    /// The handlers answer a Windows `worktreeRoot` refusal through
    /// [`WorktreeResult`] (create with its code, remove without); the
    /// Windows half sends the refusal itself. Both frames must be equal.
    #[test]
    fn a_windows_worktree_root_refusal_has_one_frame() {
        let create = hostrules::worktree_root_refusal(Host::Windows, WorktreeCall::Create, "/r").unwrap();
        let frame = WorktreeResult::failed(create.text.clone(), create.code.unwrap_or_default());
        assert_eq!(to_go_json(&frame), to_go_json(&create));
        let remove = hostrules::worktree_root_refusal(Host::Windows, WorktreeCall::Remove, "/r").unwrap();
        let frame = WorktreeResult {
            success: false,
            error: remove.text.clone(),
            ..WorktreeResult::default()
        };
        assert_eq!(to_go_json(&frame), to_go_json(&remove));
        assert!(hostrules::worktree_root_refusal(Host::Unix, WorktreeCall::Create, "/r").is_none());
    }

    #[test]
    fn repo_is_the_folder_name_of_root_unless_it_starts_with_a_sign() {
        assert_eq!(folder_name("/home/u/work").as_deref(), Some("work"));
        assert_eq!(folder_name("/home/u/work/").as_deref(), Some("work"));
        assert_eq!(folder_name("/").as_deref(), Some("/"));
        assert_eq!(folder_name("/x/a-b+c").as_deref(), Some("a-b+c"));
        assert_eq!(folder_name("/x/-repo"), None);
        assert_eq!(folder_name("/x/+repo"), None);
    }
}
