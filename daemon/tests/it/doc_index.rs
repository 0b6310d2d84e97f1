//! The README's "Layout" names every doc in the repository: each Markdown
//! file (outside build output and what git ignores) appears there in
//! backticks by its path from the root, so a new doc cannot go unlisted.

use std::path::{Path, PathBuf};

/// Folders that hold no docs of the project: build output, fuzzing
/// output git ignores, git itself.
const SKIPPED: &[&str] = &[
    ".git",
    "target",
    "target-base",
    "dist",
    "fuzz/target",
    "fuzz/corpus",
    "fuzz/artifacts",
    "fuzz/coverage",
    "fuzz/out",
];

/// Every `.md` file under `root`, by its `/`-separated path from it.
fn markdown_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            if path.is_dir() {
                if !SKIPPED.contains(&rel.as_str()) && !rel.ends_with("__pycache__") {
                    dirs.push(path);
                }
            } else if rel.ends_with(".md") {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

/// The `## Layout` section of `readme`, up to the next `## ` heading.
fn layout(readme: &str) -> &str {
    const HEADING: &str = "## Layout\n";
    let start = if readme.starts_with(HEADING) {
        0
    } else {
        readme
            .find("\n## Layout\n")
            .expect("a `## Layout` section in README.md")
            + 1
    };
    let section = &readme[start..];
    match section[HEADING.len()..].find("\n## ") {
        Some(end) => &section[..HEADING.len() + end],
        None => section,
    }
}

/// The docs in `docs` that `layout` does not name as `` `path` ``.
fn unlisted(layout: &str, docs: &[String]) -> Vec<String> {
    docs.iter()
        .filter(|doc| !layout.contains(&format!("`{doc}`")))
        .cloned()
        .collect()
}

#[test]
fn the_readme_layout_names_every_doc() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let docs = markdown_files(&root);
    // A wrong root cannot pass by finding nothing.
    for known in ["README.md", "SECURITY.md", "docs/ARCHITECTURE.md", "docs/OPERATING.md"] {
        assert!(docs.iter().any(|d| d == known), "{known} not found in {docs:?}");
    }
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let missing = unlisted(layout(&readme), &docs);
    assert!(
        missing.is_empty(),
        "README.md's \"Layout\" does not name these docs:\n{}",
        missing.join("\n")
    );
}

#[test]
fn an_unlisted_doc_is_caught() {
    let readme = "# x\n## Layout\n| `README.md` | this |\n| `docs/A.md` | a |\n## After\n`docs/B.md`\n";
    let docs = ["README.md", "docs/A.md", "docs/B.md"].map(String::from);
    // Named only outside the section: still unlisted.
    assert_eq!(unlisted(layout(readme), &docs), ["docs/B.md"]);
    assert!(unlisted(layout("## Layout\n`README.md` `docs/A.md` `docs/B.md`"), &docs).is_empty());
}
