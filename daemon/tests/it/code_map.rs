//! `docs/ARCHITECTURE.md` stays true about where the code is: every source
//! path it names in backticks exists. `daemon/…`, `harness/…` and `fuzz/…`
//! paths are read from the repository root. Elsewhere outside the harness
//! section a path is read from `daemon/src/`, `daemon/` or the root, and a
//! bare file name (`mod.rs` after its folder) may sit anywhere under
//! `daemon/src`; in the harness section a path may end anywhere under
//! `harness/`.
//! Brace groups (`replay/{log,store}.rs`) name each member.

use std::path::{Path, PathBuf};

/// `a/{b,c}.rs` → `a/b.rs`, `a/c.rs` (one group, as the document writes them).
fn expand(span: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (span.find('{'), span.find('}')) else {
        return vec![span.to_string()];
    };
    span[open + 1..close]
        .split(',')
        .map(|member| format!("{}{}{}", &span[..open], member, &span[close + 1..]))
        .collect()
}

/// A backticked span that names a source file or folder (not a run-time
/// directory such as `children/`, which the document also names).
fn is_source_path(span: &str) -> bool {
    let plain = span.chars().all(|c| c.is_ascii_alphanumeric() || "_-/.{},".contains(c));
    plain && (span.ends_with(".rs") || (span.ends_with('/') && span.len() > 1))
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            out.push(path.clone());
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Folders the document names that the daemon creates at run time, not
/// source folders.
const RUN_TIME: &[&str] = &["children/", "crashes/", ".claude/"];

/// Whether some path in `listing` ends with `/name`.
fn anywhere(listing: &[PathBuf], name: &str) -> bool {
    let suffix = format!("/{}", name.trim_end_matches('/'));
    listing.iter().any(|f| f.to_string_lossy().ends_with(&suffix))
}

/// The paths named in `document` that do not exist, given the repository
/// root and listings of everything under `daemon/src` and `harness/`.
fn missing(document: &str, root: &Path, daemon: &[PathBuf], harness: &[PathBuf]) -> Vec<String> {
    let mut in_harness = false;
    let mut found = Vec::new();
    for line in document.lines() {
        if line.starts_with("## ") {
            in_harness = line.starts_with("## The harness");
        }
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 0 || !is_source_path(span) || RUN_TIME.contains(&span) {
                continue;
            }
            for path in expand(span) {
                let rooted = ["daemon/", "harness/", "fuzz/"].iter().any(|p| path.starts_with(p));
                let exists = if rooted {
                    root.join(&path).exists()
                } else if in_harness {
                    anywhere(harness, &path) || root.join(&path).exists()
                } else {
                    ["daemon/src", "daemon", ""]
                        .iter()
                        .any(|base| root.join(base).join(&path).exists())
                        || (!path.trim_end_matches('/').contains('/') && anywhere(daemon, &path))
                };
                if !exists {
                    found.push(format!("`{path}` (in `{span}`)"));
                }
            }
        }
    }
    found
}

/// Everything under `daemon/src` and under `harness/`.
fn listings(root: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut daemon, mut harness) = (Vec::new(), Vec::new());
    files_under(&root.join("daemon/src"), &mut daemon);
    files_under(&root.join("harness"), &mut harness);
    (daemon, harness)
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

#[test]
fn every_path_architecture_names_exists() {
    let root = root();
    let document = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let (daemon, harness) = listings(&root);
    let gone = missing(&document, &root, &daemon, &harness);
    assert!(
        gone.is_empty(),
        "docs/ARCHITECTURE.md names paths that do not exist:\n{}",
        gone.join("\n")
    );
}

#[test]
fn a_stale_path_is_caught() {
    let root = root();
    let (daemon, harness) = listings(&root);
    let check = |doc: &str| missing(doc, &root, &daemon, &harness);
    assert_eq!(check("see `rpc.rs`").len(), 1);
    assert_eq!(check("see `process/store.rs`").len(), 1);
    assert_eq!(
        check("see `replay/{cursor,store,gone}.rs`"),
        ["`replay/gone.rs` (in `replay/{cursor,store,gone}.rs`)"]
    );
    assert_eq!(check("see `daemon/src/frame.rs`").len(), 1);
    assert_eq!(check("see `os/linux.rs`, `process/sys/`").len(), 2);
    assert_eq!(check("## The harness (`harness/`)\n`nosuch.rs`").len(), 1);
    assert!(check("see `base/ndjson.rs`, `tests/it/layers.rs`, `daemon/src/serve/`, `children/`").is_empty());
    assert!(check("## The harness (`harness/`)\n`runner/daemon.rs`").is_empty());
}
