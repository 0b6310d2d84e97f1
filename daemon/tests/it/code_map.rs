//! `docs/ARCHITECTURE.md` stays true about where the code is, both ways.
//!
//! - **Doc → code:** every source path it names in backticks exists.
//!   `daemon/…`, `harness/…` and `fuzz/…` paths are read from the
//!   repository root. Elsewhere outside the harness section a path is read
//!   from `daemon/src/`, `daemon/` or the root, and a bare file name
//!   (`mod.rs` after its folder) may sit anywhere under `daemon/src`; in the
//!   harness section a path may end anywhere under `harness/`.
//! - **Code → doc:** every folder and every `.rs` file under `daemon/src`
//!   is named by its path under `src` (`replay/log/`, `replay/log/disk.rs`)
//!   outside the harness section, and every folder and `.rs` file under
//!   `harness/src` by its path under `src` inside it (or, anywhere, with
//!   its `daemon/src/` or `harness/src/` prefix). A bare `mod.rs` names
//!   nothing, so a new file or folder fails here until the map has it.
//!
//! Brace groups (`replay/{log,store}.rs`) name each member.

use std::collections::BTreeSet;
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

/// Folders the document names that the daemon creates at run time, not
/// source folders.
const RUN_TIME: &[&str] = &["children/", "crashes/", ".claude/"];

/// Every source path the document names, brace groups expanded, each with
/// whether it stands in the harness section and the span it came from.
fn named_paths(document: &str) -> Vec<(bool, String, String)> {
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
                found.push((in_harness, path, span.to_string()));
            }
        }
    }
    found
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

/// Whether some path in `listing` ends with `/name`.
fn anywhere(listing: &[PathBuf], name: &str) -> bool {
    let suffix = format!("/{}", name.trim_end_matches('/'));
    listing.iter().any(|f| f.to_string_lossy().ends_with(&suffix))
}

/// The paths named in `document` that do not exist, given the repository
/// root and listings of everything under `daemon/src` and `harness/`.
fn missing(document: &str, root: &Path, daemon: &[PathBuf], harness: &[PathBuf]) -> Vec<String> {
    let mut found = Vec::new();
    for (in_harness, path, span) in named_paths(document) {
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
    found
}

/// Every folder (as `dir/`) and `.rs` file under `src`, by its path under
/// `src`, `/`-separated.
fn source_listing(src: &Path) -> Vec<String> {
    let mut all = Vec::new();
    files_under(src, &mut all);
    let mut out: Vec<String> = all
        .iter()
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            let rel = p.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
            if p.is_dir() {
                format!("{rel}/")
            } else {
                rel
            }
        })
        .collect();
    out.sort();
    out
}

/// The entries of the two listings (paths under `daemon/src` and under
/// `harness/src`, folders ending in `/`) that `document` does not name by
/// their path, each prefixed with its `src`.
fn unmapped(document: &str, daemon: &[String], harness: &[String]) -> Vec<String> {
    let mut daemon_names = BTreeSet::new();
    let mut harness_names = BTreeSet::new();
    for (in_harness, path, _) in named_paths(document) {
        if let Some(rest) = path.strip_prefix("daemon/src/") {
            daemon_names.insert(rest.to_string());
        } else if let Some(rest) = path.strip_prefix("harness/src/") {
            harness_names.insert(rest.to_string());
        } else if in_harness {
            harness_names.insert(path);
        } else {
            daemon_names.insert(path);
        }
    }
    let daemon_gaps = daemon
        .iter()
        .filter(|e| !daemon_names.contains(*e))
        .map(|e| format!("daemon/src/{e}"));
    let harness_gaps = harness
        .iter()
        .filter(|e| !harness_names.contains(*e))
        .map(|e| format!("harness/src/{e}"));
    daemon_gaps.chain(harness_gaps).collect()
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

fn architecture(root: &Path) -> String {
    std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap()
}

#[test]
fn every_path_architecture_names_exists() {
    let root = root();
    let document = architecture(&root);
    let (daemon, harness) = listings(&root);
    let gone = missing(&document, &root, &daemon, &harness);
    assert!(
        gone.is_empty(),
        "docs/ARCHITECTURE.md names paths that do not exist:\n{}",
        gone.join("\n")
    );
}

#[test]
fn architecture_names_every_source_folder_and_file() {
    let root = root();
    let daemon = source_listing(&root.join("daemon/src"));
    let harness = source_listing(&root.join("harness/src"));
    // A wrong root cannot pass by listing nothing.
    assert!(
        daemon.len() > 100 && daemon.contains(&"serve/".to_string()),
        "{daemon:?}"
    );
    assert!(
        harness.len() > 50 && harness.contains(&"runner/".to_string()),
        "{harness:?}"
    );
    let gaps = unmapped(&architecture(&root), &daemon, &harness);
    assert!(
        gaps.is_empty(),
        "docs/ARCHITECTURE.md's code map does not name these (add each, by its path under src, \
         to its folder's entry; daemon files outside \"## The harness\", harness files inside it):\n{}",
        gaps.join("\n")
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

/// A planted gap: a synthetic listing with one file and one folder the
/// document leaves out, on each side, is reported, and nothing else.
#[test]
fn a_file_or_folder_missing_from_the_map_is_caught() {
    let daemon: Vec<String> = ["lib.rs", "a/", "a/mod.rs", "a/b.rs", "a/new.rs", "c/", "c/mod.rs"]
        .map(String::from)
        .to_vec();
    let harness: Vec<String> = ["main.rs", "x/", "x/mod.rs", "y/", "y/mod.rs"]
        .map(String::from)
        .to_vec();
    let document = "\
## Code map
`lib.rs`; `a/` holds `a/{mod,b}.rs`; `daemon/src/c/mod.rs` (a bare `mod.rs` names nothing).
## The harness (`harness/`)
`main.rs`, `x/` (`x/mod.rs`), `harness/src/y/mod.rs`.
";
    assert_eq!(
        unmapped(document, &daemon, &harness),
        ["daemon/src/a/new.rs", "daemon/src/c/", "harness/src/y/"]
    );
    // A daemon path named only in the harness section does not count, nor
    // a harness path named outside it without its prefix.
    let swapped = "`x/`\n## The harness\n`a/new.rs`, `c/`";
    let gaps = unmapped(swapped, &["a/new.rs".into(), "c/".into()], &["x/".into()]);
    assert_eq!(gaps, ["daemon/src/a/new.rs", "daemon/src/c/", "harness/src/x/"]);
    // Named, the gaps close.
    let complete = format!("{document}`y/`\n## Later\n`a/new.rs`, `c/`");
    assert!(unmapped(&complete, &daemon, &harness).is_empty());
}
