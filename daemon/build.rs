//! Stamps the version id (`ci/version`) and build time into the binary.

use std::process::Command;

// The crate's own date code, compiled here as a module: a build script
// cannot import the crate it builds.
#[path = "src/base/utctime.rs"]
mod utctime;

fn main() {
    // ci/version names the build, for this binary and for ci/release's
    // tarballs alike; outside the repository the crate version does.
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/version");
    let id = Command::new("sh")
        .arg(&script)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("v{}", std::env::var("CARGO_PKG_VERSION").unwrap_or_default()));
    let built = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0)
        });
    println!("cargo:rustc-env=REMORA_VERSION_ID={id}");
    println!("cargo:rustc-env=REMORA_BUILD_TIME={}", utctime::rfc3339(built));
    // Rerun when the commit or a tag moves. Only files that exist are
    // named: cargo reruns a script on every build while a named file is
    // missing, and a rerun stamps a new build time, so remora would be
    // recompiled by every `cargo build` (in a `git worktree`, whose `.git`
    // is a file; in a source tarball; in a clone without packed-refs).
    // A branch ref that is packed rather than a file is covered by
    // packed-refs.
    for path in git_state_files() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    println!("cargo:rerun-if-changed=../ci/version");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
}

/// The files whose change moves `ci/version`'s answer (`git describe
/// --tags`): HEAD (per work tree), the branch it names, the tags, and
/// packed-refs, as git itself locates them. Not the whole `refs`
/// directory: another branch's commit (a second work tree of the same
/// repository) would otherwise restamp and recompile remora.
fn git_state_files() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(&root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim_end().to_string())
    };
    let Some(dirs) = git(&["rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"]) else {
        return Vec::new();
    };
    let mut dirs = dirs.lines().map(std::path::PathBuf::from);
    let (Some(git_dir), Some(common)) = (dirs.next(), dirs.next()) else {
        return Vec::new();
    };
    let mut files = vec![
        git_dir.join("HEAD"),
        common.join("refs/tags"),
        common.join("packed-refs"),
    ];
    // `refs/heads/<branch>` when HEAD is on a branch (detached: HEAD holds
    // the commit itself).
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]).filter(|b| b.starts_with("refs/")) {
        files.push(common.join(branch));
    }
    files.into_iter().filter(|p| p.exists()).collect()
}
