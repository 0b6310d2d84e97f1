//! The params of a request outside a process scenario, one function per
//! kind of method, from the fixture-aware vocabulary. Destructive fields
//! (`archivePath`, `destDir`, `baseRepo`, `worktreePath`, …) only ever
//! name paths of the fixture and are marked sensitive, so they are never
//! shrunk character by character. As in `mutate`, the random numbers are
//! taken in the order that makes case `n` of a seed the same case.

use super::vocab::*;
use super::{Member, Rng, Val};
use remora::protocol::method::{FilesMethod as F, GitMethod as G, Method, PluginsMethod, ProcessMethod as P};

const SAFE_DEST: [&str; 6] = [
    "\"$ROOT/out\"",
    "\"$ROOT/out/sub\"",
    "\"out\"",
    "\"/\"",
    "\"\"",
    "\"$ROOT/d\"",
];
const SAFE_ARCHIVE: [&str; 5] = [
    "\"$ROOT/t.tgz\"",
    "\"$ROOT/bad.tgz\"",
    "\"$ROOT/missing.tgz\"",
    "\"t.tgz\"",
    "\"\"",
];
const SAFE_REPO: [&str; 4] = ["\"$ROOT/repo\"", "\"$ROOT/d\"", "\"$ROOT/missing\"", "\"\""];
const SAFE_WT: [&str; 5] = ["\"$ROOT/wt\"", "\"$ROOT/wt2\"", "\"wt\"", "\"$ROOT/repo\"", "\"\""];

/// Params of a (non-process) method: `None` for no `params` member, an
/// empty list for a name outside the daemon's table.
pub(super) fn params(r: &mut Rng, method: &str) -> Option<Vec<Member>> {
    // Exhaustive over the daemon's table: a new method does not build
    // until it has params here.
    let Ok(method) = Method::from_name(method) else {
        return Some(vec![]);
    };
    let p = match method {
        Method::Server(_) => {
            if r.pct(70) {
                return None;
            }
            vec![Member::new("path", path(r))]
        }
        Method::Files(F::Stat | F::List | F::Validate) | Method::Git(G::Info | G::Status | G::ListBranches) => {
            let good = path(r);
            vec![Member::new("path", field(r, good))]
        }
        Method::Files(F::Read) => read(r),
        Method::Files(F::ExtractTar) => extract_tar(r),
        Method::Git(G::WorktreeCreate) => worktree_create(r),
        Method::Git(G::WorktreeRemove) => {
            let b = r.pick(&SAFE_REPO).to_string();
            let w = r.pick(&SAFE_WT).to_string();
            vec![
                sensitive("baseRepo", field(r, b)),
                sensitive("worktreePath", field(r, w)),
            ]
        }
        Method::Launcher(_) => {
            let good = path(r);
            vec![Member::new("cliPath", field(r, good))]
        }
        Method::Process(p) => process(r, p),
        Method::Plugins(PluginsMethod::Prune) => prune(r),
    };
    Some(p)
}

/// A member never shrunk character by character.
fn sensitive(k: &str, v: String) -> Member {
    Member {
        key: format!("\"{k}\""),
        val: Val::Text(v),
        sensitive: true,
    }
}

fn read(r: &mut Rng) -> Vec<Member> {
    let good = path(r);
    let mut v = vec![Member::new("path", field(r, good))];
    if r.pct(60) {
        let n = r.pick(&INTS).to_string();
        v.push(Member::new("maxBytes", field(r, n)));
    }
    v
}

fn extract_tar(r: &mut Rng) -> Vec<Member> {
    let a = r.pick(&SAFE_ARCHIVE).to_string();
    let d = r.pick(&SAFE_DEST).to_string();
    let mut v = vec![sensitive("archivePath", field(r, a)), sensitive("destDir", field(r, d))];
    if r.pct(15) {
        v.remove(r.below(2));
    }
    v
}

fn worktree_create(r: &mut Rng) -> Vec<Member> {
    let mut v = vec![];
    if r.pct(80) {
        let b = r.pick(&SAFE_REPO).to_string();
        v.push(sensitive("baseRepo", field(r, b)));
    }
    if r.pct(85) {
        let names = ["\"feat\"", "\"side\"", "\"\"", "\"a b\"", "\"-x\"", "\"f\\u2028\""];
        let n = r.pick(&names).to_string();
        v.push(Member::new("branchName", field(r, n)));
    }
    let w = r.pick(&SAFE_WT).to_string();
    v.push(sensitive("worktreePath", field(r, w)));
    if r.pct(40) {
        let s = ["\"main\"", "\"master\"", "\"side\"", "\"nope\"", "\"\""];
        let s = r.pick(&s).to_string();
        v.push(Member::new("sourceBranch", field(r, s)));
    }
    if r.pct(25) {
        // Attach to a local branch instead of creating one.
        let e = ["\"side\"", "\"master\"", "\"nope\"", "\"\"", "\"-x\""];
        let e = r.pick(&e).to_string();
        v.push(sensitive("existingBranch", field(r, e)));
    }
    if r.pct(20) {
        // No small positive deadline: whether git finishes
        // first would depend on the machine's load.
        let t = ["0", "-1", "600000", "\"100\"", "1.5", "null"];
        v.push(Member::new("timeoutMs", r.pick(&t).to_string()));
    }
    v
}

/// Process methods outside a scenario: unknown ids and missing fields
/// only (never a command).
fn process(r: &mut Rng, method: P) -> Vec<Member> {
    match method {
        P::Spawn => match r.below(3) {
            0 => vec![],
            1 => vec![Member::new("id", "\"ghost\"")],
            _ => vec![Member::new("command", "\"\"")],
        },
        P::Stdin => {
            let d = ["\"YWJj\"", "\"!!\"", "\"\"", "1"];
            let d = r.pick(&d).to_string();
            vec![Member::new("id", "\"ghost\""), Member::new("data", d)]
        }
        P::Kill | P::KillAndWait | P::Reattach => {
            if r.pct(30) {
                vec![]
            } else {
                let id = ["\"ghost\"", "\"\"", "1", "null"];
                let id = r.pick(&id).to_string();
                vec![Member::new("id", id)]
            }
        }
    }
}

/// The harness's socket is not under a `run/<client>/` layout, so the
/// sweep is skipped and nothing on disk is touched.
fn prune(r: &mut Rng) -> Vec<Member> {
    let mut v = vec![];
    if r.pct(50) {
        let k = ["[]", "[\"abc\"]", "null", "[1]", "\"abc\"", "[null]"];
        v.push(Member::new("keep", r.pick(&k).to_string()));
    }
    if r.pct(60) {
        let n = r.pick(&INTS).to_string();
        v.push(Member::new("minAgeDays", field(r, n)));
    }
    v
}
