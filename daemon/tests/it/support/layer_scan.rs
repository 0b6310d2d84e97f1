//! The source scanning both layer tests share (`daemon/tests/it/layers.rs`
//! and, through `#[path]`, `harness/tests/it/layers.rs`): the Rust files
//! under `src`, the module path of a file, its code without comments and
//! test code, every path that code names from the crate root, and the
//! rule that such a path names a unit (a top-level module or folder) of
//! the file's own layer or a lower one. Each test keeps its own layer
//! table, the way it maps a path to a unit, and its planted violations.

use std::path::{Path, PathBuf};

/// The layers, lowest first, each a name and the units it is made of.
pub type Layers = [(&'static str, &'static [&'static str])];

/// The index of the layer `unit` belongs to.
pub fn layer_of(layers: &Layers, unit: &str) -> Option<usize> {
    layers.iter().position(|(_, units)| units.contains(&unit))
}

/// The unit of `layers` called `name`, as the table spells it.
pub fn unit_named(layers: &Layers, name: &str) -> Option<&'static str> {
    layers
        .iter()
        .flat_map(|(_, units)| units.iter())
        .find(|u| **u == name)
        .copied()
}

/// Every `.rs` file under `dir`, except test code: `tests/` folders and
/// `tests.rs` files.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect(dir, &mut out);
    out.sort();
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                collect(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") && path.file_name().is_some_and(|n| n != "tests.rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src` (`replay/log.rs` → `replay::log`,
/// `bench/mod.rs` → `bench`, `lib.rs` and `main.rs` → the root).
pub fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    // A Windows stand-in (`serve/windows/server.rs`, `process/windows.rs`)
    // is mounted by a `#[path]` line under the name of the Unix module it
    // stands in for (`serve::server`, `process`), and is judged as that.
    parts.retain(|p| p != "windows");
    parts
}

/// Source without line comments (doc links name modules too) and without
/// test code: everything from the first `#[cfg(test)]` on.
pub fn code_of(source: &str) -> String {
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

/// Every path the code names from the crate root: `crate::a::b`, each
/// entry of `crate::{a, b::c}`, and `super::…` resolved against `module`.
pub fn crate_paths(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let rest: String = chars[i..chars.len().min(i + 8)].iter().collect();
        let at_word = i == 0 || !is_ident(chars[i - 1]);
        if at_word && rest.starts_with("crate::") {
            i += "crate::".len();
            found.extend(paths_at(&chars, &mut i, Vec::new()));
            continue;
        }
        if at_word && rest.starts_with("super::") {
            let mut base: Vec<String> = module.to_vec();
            while chars[i..].iter().take(7).collect::<String>() == "super::" {
                base.pop();
                i += "super::".len();
            }
            found.extend(paths_at(&chars, &mut i, base));
            continue;
        }
        i += 1;
    }
    found
}

/// Reads one path (or a `{…}` group of them) starting at `i`, below `base`.
fn paths_at(chars: &[char], i: &mut usize, base: Vec<String>) -> Vec<Vec<String>> {
    let mut path = base;
    loop {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
        if *i < chars.len() && chars[*i] == '{' {
            // A group: each comma-separated member at depth 1.
            *i += 1;
            let mut out = Vec::new();
            loop {
                while *i < chars.len() && (chars[*i].is_whitespace() || chars[*i] == ',') {
                    *i += 1;
                }
                if *i >= chars.len() || chars[*i] == '}' {
                    *i += 1;
                    return out;
                }
                let before = *i;
                out.extend(paths_at(chars, i, path.clone()));
                if *i == before {
                    *i += 1;
                }
            }
        }
        let start = *i;
        while *i < chars.len() && is_ident(chars[*i]) {
            *i += 1;
        }
        if *i == start {
            return if path.is_empty() { Vec::new() } else { vec![path] };
        }
        let segment: String = chars[start..*i].iter().collect();
        if segment != "self" {
            path.push(segment);
        }
        let next: String = chars[*i..chars.len().min(*i + 2)].iter().collect();
        if next == "::" {
            *i += 2;
            continue;
        }
        return vec![path];
    }
}

/// The layer violations of one file (`file` is its path under `src`):
/// a module of no layer, a path that names no layered unit, and a path
/// that reaches up to a higher layer. `unit_of` maps a module path to its
/// unit; the root (`lib.rs`, `main.rs`) declares the modules and is not
/// checked.
pub fn layer_violations(
    layers: &Layers,
    unit_of: impl Fn(&[String]) -> Option<&'static str>,
    file: &Path,
    source: &str,
) -> Vec<String> {
    let module = module_of(file);
    if module.is_empty() {
        return Vec::new();
    }
    let Some(own) = unit_of(&module).and_then(|u| Some((u, layer_of(layers, u)?))) else {
        return vec![format!(
            "{}: module `{}` has no layer in LAYERS",
            file.display(),
            module[0]
        )];
    };
    let mut found = Vec::new();
    for path in crate_paths(&module, &code_of(source)) {
        if path.is_empty() {
            continue; // `super::{self, …}` up to the root
        }
        let Some(target) = unit_of(&path).and_then(|u| Some((u, layer_of(layers, u)?))) else {
            // `crate::SomeItem` from the root or a typo: either way the
            // rule cannot judge it.
            found.push(format!(
                "{}: `{}` names no layered module",
                file.display(),
                path.join("::")
            ));
            continue;
        };
        if target.0 != own.0 && target.1 > own.1 {
            found.push(format!(
                "{}: `{}` reaches up from {} ({}) to {} ({})",
                file.display(),
                path.join("::"),
                own.0,
                layers[own.1].0,
                target.0,
                layers[target.1].0
            ));
        }
    }
    found
}

/// Every violation `check` finds in the files under `src` (each passed by
/// its path under `src` and its text); fails unless there are more than
/// `at_least` files, so a wrong `src` cannot pass by finding nothing.
pub fn check_tree(src: &Path, at_least: usize, check: impl Fn(&Path, &str) -> Vec<String>) -> Vec<String> {
    let files = rust_files(src);
    assert!(
        files.len() > at_least,
        "found only {} files under {}",
        files.len(),
        src.display()
    );
    let mut all = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        all.extend(check(file.strip_prefix(src).unwrap(), &source));
    }
    all
}
