//! No import circles between the files of `daemon/src` or of
//! `harness/src`. The layer rule (`layers.rs`) stops an import reaching up
//! a layer, but two files of one layer could still import each other; a
//! circle of files means neither can be read, tested or moved alone.
//!
//! The graph is the one `layer_scan` sees: a file's module path comes from
//! where it lies, and an edge A → B is any `crate::…`, `super::…` or
//! `self::…` path in A's non-test code (groups included, and a name
//! brought in by such a path and used as `name::…` later) whose longest
//! prefix naming a file of the crate is B, unless B is A or a module A
//! lies in. A circle is a strongly connected set of two or more files.

use crate::support::layer_scan::{code_of, crate_paths, module_of, rust_files};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `self::x` in `module` is `crate::<module>::x`: rewritten so that
/// [`crate_paths`] reads it.
fn absolute_self(module: &[String], code: &str) -> String {
    let prefix = if module.is_empty() {
        "crate::".to_string()
    } else {
        format!("crate::{}::", module.join("::"))
    };
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("self::") {
        let before = rest[..at].chars().next_back();
        out.push_str(&rest[..at]);
        if before.is_some_and(|c| is_ident(c) || c == ':') {
            out.push_str("self::");
        } else {
            out.push_str(&prefix);
        }
        rest = &rest[at + "self::".len()..];
    }
    out.push_str(rest);
    out
}

/// The paths `module`'s code names: its crate, super and self paths, and
/// `name::…` after one of them brought `name` in (`use crate::methods;`
/// then `methods::files::handle`).
fn paths_of(module: &[String], code: &str) -> Vec<Module> {
    let code = absolute_self(module, code);
    let direct = crate_paths(module, &code);
    let aliases: BTreeMap<&str, &Module> = direct.iter().filter_map(|p| Some((p.last()?.as_str(), p))).collect();
    let mut all = direct.clone();
    let chars: Vec<char> = code.chars().collect();
    for (name, full) in aliases {
        let name: Vec<char> = name.chars().collect();
        let mut i = 0;
        while i + name.len() + 2 <= chars.len() {
            let fits = chars[i..i + name.len()] == name[..]
                && chars[i + name.len()..i + name.len() + 2] == [':', ':']
                && (i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':'));
            if !fits {
                i += 1;
                continue;
            }
            let mut path = full.clone();
            i += name.len();
            while i + 2 <= chars.len() && chars[i..i + 2] == [':', ':'] {
                let start = i + 2;
                let mut end = start;
                while end < chars.len() && is_ident(chars[end]) {
                    end += 1;
                }
                if end == start {
                    break;
                }
                path.push(chars[start..end].iter().collect());
                i = end;
            }
            all.push(path);
        }
    }
    all
}

/// The import circles among `files` (each its path under `src` and its
/// source), one line per circle and one per edge inside it, so the
/// message names the paths that tie it.
fn circles(files: &[(PathBuf, String)]) -> Vec<String> {
    let modules: Vec<Module> = files.iter().map(|(path, _)| module_of(path)).collect();
    let index: BTreeMap<&Module, usize> = modules.iter().enumerate().map(|(i, m)| (m, i)).collect();
    let mut edges: Vec<BTreeMap<usize, BTreeSet<String>>> = vec![BTreeMap::new(); files.len()];
    for (from, (_, source)) in files.iter().enumerate() {
        let own = &modules[from];
        for path in paths_of(own, &code_of(source)) {
            let Some(to) = (1..=path.len()).rev().find_map(|k| index.get(&path[..k].to_vec())) else {
                continue;
            };
            let target = &modules[*to];
            if target.len() <= own.len() && own[..target.len()] == target[..] {
                continue; // itself, or a module it lies in
            }
            edges[from].entry(*to).or_default().insert(path.join("::"));
        }
    }
    // Which files each file reaches (a few hundred files: a walk from each).
    let reach: Vec<BTreeSet<usize>> = (0..files.len())
        .map(|start| {
            let mut seen = BTreeSet::new();
            let mut stack = vec![start];
            while let Some(n) = stack.pop() {
                for &next in edges[n].keys() {
                    if seen.insert(next) {
                        stack.push(next);
                    }
                }
            }
            seen
        })
        .collect();
    let mut placed = BTreeSet::new();
    let mut found = Vec::new();
    for a in 0..files.len() {
        if placed.contains(&a) {
            continue;
        }
        let circle: Vec<usize> = (0..files.len())
            .filter(|&b| b == a || (reach[a].contains(&b) && reach[b].contains(&a)))
            .collect();
        if circle.len() < 2 {
            continue;
        }
        placed.extend(circle.iter().copied());
        let name = |i: usize| files[i].0.display().to_string();
        found.push(format!(
            "circle: {}",
            circle.iter().map(|&i| name(i)).collect::<Vec<_>>().join(", ")
        ));
        for &from in &circle {
            for (to, why) in &edges[from] {
                if circle.contains(to) {
                    let why: Vec<&str> = why.iter().map(String::as_str).take(4).collect();
                    found.push(format!("  {} -> {}: {}", name(from), name(*to), why.join(", ")));
                }
            }
        }
    }
    found
}

/// Every non-test `.rs` file under `src`, by its path under `src`, with
/// its source.
fn crate_files(src: &Path) -> Vec<(PathBuf, String)> {
    rust_files(src)
        .into_iter()
        .map(|path| {
            let source = std::fs::read_to_string(&path).unwrap();
            (path.strip_prefix(src).unwrap().to_path_buf(), source)
        })
        .collect()
}

#[test]
fn no_file_imports_itself_through_others() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (src, at_least) in [("daemon/src", 100), ("harness/src", 60)] {
        let files = crate_files(&root.join(src));
        assert!(files.len() > at_least, "found only {} files under {src}", files.len());
        let found = circles(&files);
        assert!(found.is_empty(), "import circles in {src}:\n{}", found.join("\n"));
    }
}

#[test]
fn a_planted_circle_is_caught() {
    let files = |list: &[(&str, &str)]| -> Vec<(PathBuf, String)> {
        list.iter().map(|(p, s)| (PathBuf::from(p), s.to_string())).collect()
    };
    let crate_with = |extra: &[(&'static str, &'static str)]| {
        let mut list = vec![
            ("lib.rs", "pub mod serve; pub mod methods; use crate::serve::state;"),
            ("serve/mod.rs", "pub mod a; pub mod b; pub mod c;"),
            ("serve/c.rs", "use super::a::Thing; use crate::serve::{self, b};"),
            ("methods/mod.rs", "pub mod files;"),
            ("methods/files.rs", "use crate::serve::c::Thing;"),
        ];
        list.extend_from_slice(extra);
        files(&list)
    };
    // Downward and sideways without a way back, a parent's own `mod`
    // lines, and imports of the module a file lies in: no circle.
    let clean = crate_with(&[
        ("serve/a.rs", "pub struct Thing; use super::Thing as T;"),
        (
            "serve/b.rs",
            "use crate::serve::a::Thing;\n#[cfg(test)]\nuse crate::serve::c::Thing;",
        ),
    ]);
    assert_eq!(circles(&clean), Vec::<String>::new());
    // Each way of spelling the path back closes a circle.
    for back in [
        "use super::b::X;",
        "use crate::serve::{c, b::X};",
        "use crate::serve; fn f() { serve::b::X::new(); }",
        "fn f() { crate::methods::files::run(); }",
    ] {
        let planted = crate_with(&[("serve/a.rs", back), ("serve/b.rs", "use crate::serve::c::Thing;")]);
        let found = circles(&planted);
        assert!(
            found
                .first()
                .is_some_and(|l| l.starts_with("circle: ") && l.contains("serve/a.rs")),
            "{back}: {found:?}"
        );
    }
    // `self::` from a folder's `mod.rs` down to its file, then back up
    // through another folder.
    let mut through_self = crate_with(&[("serve/a.rs", "use crate::methods::Outcome;"), ("serve/b.rs", "")]);
    through_self[3].1 = "pub mod files; use self::files::F;".into();
    assert_eq!(
        circles(&through_self)[0],
        "circle: serve/c.rs, methods/mod.rs, methods/files.rs, serve/a.rs"
    );
    // The message names the files and the paths that tie them.
    let two = files(&[("x.rs", "use crate::y::Y;"), ("y.rs", "use crate::x::X;")]);
    assert_eq!(
        circles(&two),
        ["circle: x.rs, y.rs", "  x.rs -> y.rs: y::Y", "  y.rs -> x.rs: x::X"]
    );
}
