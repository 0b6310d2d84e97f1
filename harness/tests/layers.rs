//! The harness's layer rule (`docs/ARCHITECTURE.md`, "The harness"),
//! checked on the source as `daemon/tests/layers.rs` checks the daemon's:
//! every `crate::…` or `super::…` path in non-test code of `harness/src`
//! may name only a module of its own layer or a lower one. It reads the
//! files, it does not compile them, so it fails the moment an import
//! reaches up, with the file and the path that did it.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly; the lint guards the harness

use std::path::{Path, PathBuf};

/// The layers, lowest first, each the list of top-level modules of
/// `harness/src` it is made of. A module may import its own layer and the
/// ones before it. Keep in step with `docs/ARCHITECTURE.md`.
const LAYERS: &[(&str, &[&str])] = &[
    ("foundation", &["error", "sync"]),
    ("daemon under test", &["dut"]),
    (
        "corpus",
        &[
            "probe",
            "normalize",
            "transcript",
            "compare",
            "fixture",
            "derive",
            "report",
        ],
    ),
    ("running", &["runner", "diff"]),
    (
        "tools",
        &["bench", "stress", "capture", "fuzzgen", "fuzzdiff", "mutant"],
    ),
    ("entry", &["cli", "commands"]),
];

fn layer_of(unit: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, units)| units.contains(&unit))
}

/// The module path of a file under `src` (`bench/steps.rs` → `bench::steps`).
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "main")) {
        parts.pop();
    }
    parts
}

/// Source without line comments (doc links name modules too) and without
/// test code: everything from the first `#[cfg(test)]` on.
fn code_of(source: &str) -> String {
    let source = source.split("#[cfg(test)]").next().unwrap_or_default();
    source
        .lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first segment below the crate root of every path the code names:
/// `crate::a::b` gives `a`, `crate::{a, b::c}` gives `a` and `b`, and
/// `super::…` is resolved against `module` (only paths that climb to the
/// root name another top-level module).
fn root_segments(module: &[String], code: &str) -> Vec<(String, String)> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let at_word = i == 0 || !is_ident(chars[i - 1]);
        let rest: String = chars[i..chars.len().min(i + 7)].iter().collect();
        let depth = if at_word && rest == "crate::" {
            i += 7;
            Some(0)
        } else if at_word && rest == "super::" {
            let mut climbed = 0;
            while chars[i..].iter().take(7).collect::<String>() == "super::" {
                climbed += 1;
                i += 7;
            }
            Some(module.len().saturating_sub(climbed))
        } else {
            None
        };
        match depth {
            Some(0) => {
                let start = i;
                for name in names_at(&chars, &mut i) {
                    let text: String = chars[start.saturating_sub(7)..i].iter().collect();
                    found.push((name, text));
                }
            }
            Some(_) => {}
            None => i += 1,
        }
    }
    found
}

/// The first segment at `i`, or each first segment of a `{…}` group.
fn names_at(chars: &[char], i: &mut usize) -> Vec<String> {
    let ident = |i: &mut usize| {
        let start = *i;
        while *i < chars.len() && is_ident(chars[*i]) {
            *i += 1;
        }
        chars[start..*i].iter().collect::<String>()
    };
    if chars.get(*i) != Some(&'{') {
        let name = ident(i);
        return if name.is_empty() || name == "self" {
            Vec::new()
        } else {
            vec![name]
        };
    }
    let mut names = Vec::new();
    let mut depth = 0;
    let mut expect_name = true;
    while *i < chars.len() {
        match chars[*i] {
            '{' => {
                depth += 1;
                expect_name = depth == 1;
                *i += 1;
            }
            '}' => {
                depth -= 1;
                *i += 1;
                if depth == 0 {
                    break;
                }
            }
            ',' => {
                expect_name = depth == 1;
                *i += 1;
            }
            c if c.is_whitespace() => *i += 1,
            c if is_ident(c) && expect_name => {
                let name = ident(i);
                if name != "self" {
                    names.push(name);
                }
                expect_name = false;
            }
            _ => *i += 1,
        }
    }
    names
}

/// The layer violations of one file: `file` is its path under `src`.
fn violations(file: &Path, source: &str) -> Vec<String> {
    let module = module_of(file);
    let Some(own) = module.first() else {
        return Vec::new(); // main.rs: the root declares the modules
    };
    let Some(own_layer) = layer_of(own) else {
        return vec![format!("{}: module `{own}` has no layer in LAYERS", file.display())];
    };
    let mut found = Vec::new();
    for (target, text) in root_segments(&module, &code_of(source)) {
        if target == *own {
            continue;
        }
        match layer_of(&target) {
            None => found.push(format!("{}: `{text}` names no layered module", file.display())),
            Some(l) if l > own_layer => found.push(format!(
                "{}: `{text}` reaches up from {own} ({}) to {target} ({})",
                file.display(),
                LAYERS[own_layer].0,
                LAYERS[l].0
            )),
            Some(_) => {}
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && path.file_name().is_some_and(|n| n != "tests.rs") {
            out.push(path);
        }
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_import_reaches_up_a_layer() {
    let src = src();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 60,
        "found only {} files under {}",
        files.len(),
        src.display()
    );
    let mut all = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        all.extend(violations(file.strip_prefix(&src).unwrap(), &source));
    }
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
    assert!(declared.len() > 15, "found only {declared:?} in main.rs");
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
        ["dut/mod.rs: `crate::runner` reaches up from dut (daemon under test) to runner (running)"]
    );
    assert_eq!(
        check("probe/parse.rs", "use crate::{error::IoAt, runner::run};").len(),
        1
    );
    assert_eq!(check("bench/steps.rs", "use super::super::commands::tools;").len(), 1);
    assert_eq!(
        check("transcript.rs", "fn f() { crate::diff::diff_all(&[], o); }").len(),
        1
    );
    assert_eq!(check("runner/live.rs", "use crate::fuzzdiff::Pair;").len(), 1);
    // Downward and sideways within a layer are fine; a module's own
    // `super::` paths, comments and test code are not imports.
    assert!(check("runner/mod.rs", "use crate::dut::{self, Env}; use crate::probe::Probe;").is_empty());
    assert!(check("diff.rs", "use crate::runner::{self, RunConfig};").is_empty());
    assert!(check(
        "bench/stream.rs",
        "use super::zero::ZeroStream; use crate::dut::client::req;"
    )
    .is_empty());
    assert!(check(
        "capture.rs",
        "//! see [`crate::commands::tools`]\nuse crate::probe::ParseError;"
    )
    .is_empty());
    assert!(check("dut/mod.rs", "#[cfg(test)]\nmod tests { use crate::runner::Sandbox; }").is_empty());
    // A new top-level module must be given a layer, and a path must name one.
    assert_eq!(check("newthing.rs", "").len(), 1);
    assert_eq!(check("probe.rs", "use crate::nowhere::X;").len(), 1);
}
