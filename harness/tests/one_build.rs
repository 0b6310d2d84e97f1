//! One build of remora: its dependencies resolve to the same features
//! whether cargo builds remora alone (`cargo build --release -p remora`,
//! what `harness diff` runs) or the whole workspace (`cargo build
//! --release`, `cargo test --workspace`). A feature only the harness turns
//! on would make the two builds differ, so switching between the README's
//! commands would recompile remora and the binary the harness tested would
//! not be the one the README runs (daemon/Cargo.toml, "One build").

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// `name version` → the feature sets cargo resolves for it, for the
/// packages in `selection` (normal and build dependencies, every target
/// platform). A package built both for the host (a build script's
/// dependency) and for the target can have one set for each.
fn resolved_features(selection: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "-e", "normal,build", "--target", "all"])
        .args(["--prefix", "none", "-f", "{p}|{f}"])
        .args(selection)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree {selection:?}: {}",
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

#[test]
fn remora_builds_with_the_same_features_alone_and_in_the_workspace() {
    let alone = resolved_features(&["-p", "remora"]);
    let workspace = resolved_features(&["--workspace"]);
    assert!(alone.len() > 20, "cargo tree listed too little: {alone:?}");
    // Every feature set remora's own build resolves must be one the
    // workspace build resolves too (the workspace may add a host-side set
    // for a build script of the harness's).
    let differing: Vec<String> = alone
        .iter()
        .filter(|(package, features)| !workspace.get(*package).is_some_and(|w| w.is_superset(features)))
        .map(|(package, features)| {
            format!(
                "{package}: alone {features:?}, in the workspace {:?}",
                workspace.get(package)
            )
        })
        .collect();
    assert!(
        differing.is_empty(),
        "turn these features on in daemon/Cargo.toml (\"One build\"):\n{}",
        differing.join("\n")
    );
}
