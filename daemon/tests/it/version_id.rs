//! `ci/version`, the id `remora -version` and the release tarballs share,
//! in a throwaway git repository: untagged, at a tag, after it, dirty, and
//! outside git.

use std::path::Path;
use std::process::Command;

fn version_id(repo: &Path) -> String {
    let out = Command::new("sh")
        .arg(repo.join("ci/version"))
        // Whatever repository holds the temp dir, git stops looking here.
        .env("GIT_CEILING_DIRECTORIES", repo.parent().unwrap())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn git(repo: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=Remora Test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `v<crate>-untagged-g<hex>`, with the abbreviated commit id.
fn is_untagged(id: &str, crate_version: &str) -> bool {
    id.strip_prefix(&format!("v{crate_version}-untagged-g"))
        .is_some_and(|hex| hex.len() >= 7 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[test]
fn ids_say_tagged_untagged_dirty_or_outside_git() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path();
    std::fs::create_dir(repo.join("ci")).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/version");
    std::fs::copy(script, repo.join("ci/version")).unwrap();
    std::fs::write(
        repo.join("Cargo.toml"),
        "[workspace]\nmembers = []\n\n[workspace.package]\nversion = \"0.3.0\"\n\n[profile.release]\nopt-level = 3\n",
    )
    .unwrap();

    // Not a repository yet.
    assert_eq!(version_id(repo), "v0.3.0");

    git(repo, &["init", "-q"]);
    git(repo, &["add", "."]);
    git(repo, &["commit", "-qm", "first"]);
    let id = version_id(repo);
    assert!(is_untagged(&id, "0.3.0"), "{id}");
    // A tag that is not a version does not count.
    git(repo, &["tag", "nightly"]);
    let id = version_id(repo);
    assert!(is_untagged(&id, "0.3.0"), "{id}");

    git(repo, &["tag", "v0.3.0"]);
    assert_eq!(version_id(repo), "v0.3.0");
    std::fs::write(repo.join("Cargo.toml"), "changed\n").unwrap();
    assert_eq!(version_id(repo), "v0.3.0-dirty");
    git(repo, &["commit", "-qam", "second"]);
    let id = version_id(repo);
    assert!(id.starts_with("v0.3.0-1-g"), "{id}");
}
