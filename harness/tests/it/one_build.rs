//! One build of remora: its dependencies resolve to the same features
//! whether cargo builds remora alone (`cargo build --release -p remora`,
//! what `harness diff` runs) or the whole workspace (`cargo build
//! --release`, `cargo test --workspace`). A feature only the harness turns
//! on would make the two builds differ, so switching between the README's
//! commands would recompile remora and the binary the harness tested would
//! not be the one the README runs (daemon/Cargo.toml, "One build").

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// The platforms remora is built for: the host (what the README's commands
/// build) and the release targets (`ci/release`: Linux musl, macOS). Each
/// is resolved on its own rather than with `--target all`, which needs the
/// crates of every platform any dependency names (Windows, WASI, …), so
/// the check needs only those of the platforms the project builds.
const RELEASE_TARGETS: &[&str] = &[
    "x86_64-unknown-linux-musl",
    "aarch64-unknown-linux-musl",
    "x86_64-apple-darwin",
    "aarch64-apple-darwin",
];

/// The triple `cargo test` builds this test for.
fn host_target() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc).arg("-vV").output().expect("run rustc -vV");
    assert!(out.status.success(), "rustc -vV failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .trim()
        .to_string()
}

/// `name version` → the feature sets cargo resolves for it on `target`, for
/// the packages in `selection` (normal and build dependencies). A package
/// built both for the host (a build script's dependency) and for the
/// target can have one set for each.
///
/// The host's crates are on disk once the tests are built, so that
/// resolution runs offline. Another target's crates may never have been
/// downloaded on this machine (a Linux build fetches no macOS-only crate):
/// cargo fetches them, at the versions `Cargo.lock` pins, as the README's
/// build fetched the host's.
fn resolved_features(target: &str, offline: bool, selection: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(["tree", "--locked", "-e", "normal,build", "--target", target]);
    if offline {
        command.arg("--offline");
    }
    let out = command
        .args(["--prefix", "none", "-f", "{p}|{f}"])
        .args(selection)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree --target {target} {selection:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut sets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let line = line.trim_end_matches(" (*)");
        let Some((package, features)) = line.split_once('|') else {
            continue;
        };
        // `{p}` ends with the source path for workspace members.
        let Some(key) = package.split(" (").next() else {
            continue;
        };
        sets.entry(key.to_string()).or_default().insert(features.to_string());
    }
    sets
}

/// The packages whose features differ between remora alone and the
/// workspace on `target`, one line each.
fn differing_features(target: &str, offline: bool) -> Vec<String> {
    let alone = resolved_features(target, offline, &["-p", "remora"]);
    let workspace = resolved_features(target, offline, &["--workspace"]);
    assert!(
        alone.len() > 20,
        "cargo tree --target {target} listed too little: {alone:?}"
    );
    // Every feature set remora's own build resolves must be one the
    // workspace build resolves too (the workspace may add a host-side set
    // for a build script of the harness's).
    alone
        .iter()
        .filter(|(package, features)| !workspace.get(*package).is_some_and(|w| w.is_superset(features)))
        .map(|(package, features)| {
            format!(
                "{target}: {package}: alone {features:?}, in the workspace {:?}",
                workspace.get(package)
            )
        })
        .collect()
}

#[test]
fn remora_builds_with_the_same_features_alone_and_in_the_workspace() {
    let host = host_target();
    let mut differing = differing_features(&host, true);
    for target in RELEASE_TARGETS.iter().filter(|t| **t != host) {
        differing.extend(differing_features(target, false));
    }
    assert!(
        differing.is_empty(),
        "turn these features on in daemon/Cargo.toml (\"One build\"):\n{}",
        differing.join("\n")
    );
}
