//! The harness's layer rule (`docs/ARCHITECTURE.md`, "The harness"),
//! checked on the source by the scanner `daemon/tests/it/layers.rs` uses
//! (`daemon/tests/it/support/layer_scan.rs`): every `crate::…` or `super::…`
//! path in non-test code of `harness/src` may name only a module of its
//! own layer or a lower one. It reads the files, it does not compile
//! them, so it fails the moment an import reaches up, with the file and
//! the path that did it. This file holds the harness's layer table and
//! its planted violations.

#[path = "../../../daemon/tests/it/support/layer_scan.rs"]
mod layer_scan;

use std::path::{Path, PathBuf};

/// The layers, lowest first, each the list of top-level modules of
/// `harness/src` it is made of. A module may import its own layer and the
/// ones before it. Keep in step with `docs/ARCHITECTURE.md`.
const LAYERS: &layer_scan::Layers = &[
    ("foundation", &["base"]),
    ("daemon under test", &["dut"]),
    ("corpus", &["probe", "transcript", "derive", "report"]),
    ("running", &["runner"]),
    (
        "tools",
        &["bench", "stress", "capture", "fuzzgen", "fuzzdiff", "mutant"],
    ),
    ("entry", &["cli", "commands"]),
];

fn layer_of(unit: &str) -> Option<usize> {
    layer_scan::layer_of(LAYERS, unit)
}

/// A module path's unit: its top-level module, if that has a layer.
fn unit_of(path: &[String]) -> Option<&'static str> {
    layer_scan::unit_named(LAYERS, path.first()?)
}

/// The layer violations of one file: `file` is its path under `src`.
fn violations(file: &Path, source: &str) -> Vec<String> {
    layer_scan::layer_violations(LAYERS, unit_of, file, source)
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_import_reaches_up_a_layer() {
    let all = layer_scan::check_tree(&src(), 60, violations);
    assert!(all.is_empty(), "imports across the layers:\n{}", all.join("\n"));
}

#[test]
fn every_top_level_module_has_a_layer() {
    let main = std::fs::read_to_string(src().join("main.rs")).unwrap();
    let declared: Vec<&str> = main
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .map(|l| l.trim_end_matches(';'))
        .collect();
    assert!(declared.len() > 10, "found only {declared:?} in main.rs");
    for name in &declared {
        assert!(layer_of(name).is_some(), "`{name}` has no layer");
    }
    for (_, units) in LAYERS {
        for unit in *units {
            assert!(
                declared.contains(unit),
                "LAYERS names `{unit}`, which main.rs does not declare"
            );
        }
    }
}

/// ARCHITECTURE's harness section lists the same layers, in order.
#[test]
fn the_layers_are_the_documented_ones() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ARCHITECTURE.md")).unwrap();
    let after = doc.split("## The harness").nth(1).unwrap();
    let section = after.split("\n## ").next().unwrap();
    let rows: Vec<&str> = section
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains('`'))
        .collect();
    let documented: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.split('|')
                .nth(2)
                .unwrap_or_default()
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|m| m.trim_end_matches('/').to_string())
                .collect()
        })
        .collect();
    let wanted: Vec<Vec<String>> = LAYERS
        .iter()
        .map(|(_, units)| units.iter().map(|u| u.to_string()).collect())
        .collect();
    assert_eq!(documented, wanted, "the layer table in docs/ARCHITECTURE.md");
}

#[test]
fn planted_violations_are_caught() {
    let check = |file: &str, source: &str| violations(Path::new(file), source);
    // Upward, by plain path, group and `super::`.
    assert_eq!(
        check("dut/mod.rs", "use crate::runner::Sandbox;"),
        ["dut/mod.rs: `runner::Sandbox` reaches up from dut (daemon under test) to runner (running)"]
    );
    assert_eq!(
        check("probe/parse.rs", "use crate::{base::error::IoAt, runner::run};").len(),
        1
    );
    assert_eq!(check("bench/steps.rs", "use super::super::commands::tools;").len(), 1);
    assert_eq!(
        check("transcript/mod.rs", "fn f() { crate::runner::diff::diff_all(&[], o); }").len(),
        1
    );
    assert_eq!(check("runner/live.rs", "use crate::fuzzdiff::Pair;").len(), 1);
    // Downward and sideways within a layer are fine; a module's own
    // `super::` paths, comments and test code are not imports.
    assert!(check("runner/mod.rs", "use crate::dut::{self, Env}; use crate::probe::Probe;").is_empty());
    assert!(check("runner/diff.rs", "use crate::runner::{self, RunConfig};").is_empty());
    assert!(check(
        "bench/stream.rs",
        "use super::zero::ZeroStream; use crate::dut::client::req;"
    )
    .is_empty());
    assert!(check(
        "capture/mod.rs",
        "//! see [`crate::commands::tools`]\nuse crate::probe::ParseError;"
    )
    .is_empty());
    assert!(check("dut/mod.rs", "#[cfg(test)]\nmod tests { use crate::runner::Sandbox; }").is_empty());
    // A new top-level module must be given a layer, and a path must name one.
    assert_eq!(check("newthing.rs", "").len(), 1);
    assert_eq!(check("probe/mod.rs", "use crate::nowhere::X;").len(), 1);
}
