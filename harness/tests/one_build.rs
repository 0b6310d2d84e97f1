//! One build of remora: its dependencies resolve to the same features
//! whether cargo builds remora alone (`cargo build --release -p remora`,
//! what `harness diff` runs) or the whole workspace (`cargo build
//! --release`, `cargo test --workspace`). A feature only the harness turns
//! on would make the two builds differ, so switching between the README's
//! commands would recompile remora and the binary the harness tested would
//! not be the one the README runs (daemon/Cargo.toml, "One build").

use std::collections::BTreeMap;
use std::process::Command;

/// `name version` → the features cargo resolves for it, for the packages
/// in `selection` (normal and build dependencies, every target platform).
fn resolved_features(selection: &[&str]) -> BTreeMap<String, String> {
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
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let line = line.trim_end_matches(" (*)");
            let (package, features) = line.split_once('|')?;
            // `{p}` ends with the source path for workspace members.
            let key = package.split(" (").next()?.to_string();
            Some((key, features.to_string()))
        })
        .collect()
}

#[test]
fn remora_builds_with_the_same_features_alone_and_in_the_workspace() {
    let alone = resolved_features(&["-p", "remora"]);
    let workspace = resolved_features(&["--workspace"]);
    assert!(alone.len() > 20, "cargo tree listed too little: {alone:?}");
    let differing: Vec<String> = alone
        .iter()
        .filter(|(package, features)| workspace.get(*package) != Some(*features))
        .map(|(package, features)| {
            format!(
                "{package}: alone [{features}], in the workspace [{}]",
                workspace.get(package).map_or("?", String::as_str)
            )
        })
        .collect();
    assert!(
        differing.is_empty(),
        "turn these features on in daemon/Cargo.toml (\"One build\"):\n{}",
        differing.join("\n")
    );
}
