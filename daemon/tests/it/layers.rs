//! The layer rule of `docs/ARCHITECTURE.md` ("Layers"), checked on the
//! source: every `crate::…` or `super::…` path in non-test code of
//! `daemon/src` may name only a module of its own layer or a lower one.
//! A tidy test in the spirit of rust-analyzer's: it reads the files, it
//! does not compile them, so it fails the moment an import crosses the
//! layers, with the file and the path that did it.
//!
//! A folder that holds several steps of one path (today `serve/` and
//! `process/`) also has
//! an order inside it ([`INNER`]): there a module may import only modules
//! of its own rank or a lower one, so folding layers into one folder did
//! not let them import each other both ways.

use crate::support::layer_scan;

use std::path::{Path, PathBuf};

/// The layers, lowest first, each the list of top-level folders of
/// `daemon/src` it is made of. A module may import its own layer and the
/// ones before it. Keep in step with `docs/ARCHITECTURE.md`.
const LAYERS: &layer_scan::Layers = &[
    ("platform", &["sys"]),
    ("foundation", &["base"]),
    ("protocol", &["protocol"]),
    ("engines", &["replay", "tarx", "install", "rundir", "agent"]),
    ("supervisor", &["process"]),
    ("handlers", &["methods"]),
    ("serving", &["serve"]),
    ("entry", &["launch", "fuzzing"]),
];

/// The order inside a layer folder, lowest first: each rank lists modules
/// (files directly in the folder) that may import one another and every
/// lower rank, never a higher one. Every module of such a folder must have
/// a rank. Keep in step with the folder's `mod.rs` and
/// `docs/ARCHITECTURE.md`.
const INNER: &[(&str, &[&[&str]])] = &[
    (
        "serve",
        &[
            // The connection cap and the unauthenticated bounds (state holds
            // them), with the log lines such connections may cost and the
            // books admission keeps.
            // The wire log and how it cleans frames. The logs a writer
            // follows. What the accept loop asks of its listeners.
            &[
                "admission",
                "connlog",
                "following",
                "peertable",
                "wirelog",
                "wireredact",
                "listener",
            ],
            // Daemon-wide state, shared by all that follows.
            &["state"],
            // A request line to its reply.
            &["dispatch"],
            // One client: reader and writer.
            &["connection"],
            // The accept loop and its listeners (the socket; on Windows also
            // the named pipe), and what runs beside it from the entry layer.
            &["server", "socket", "orphan", "idle", "metrics_http", "shellenv"],
        ],
    ),
    (
        "process",
        &[
            // Pure helpers: lookup (Go's Windows rule in `lookpath`) and
            // env, the stdin verdict, session keys.
            &["lookpath", "command", "stdin", "session"],
            // The process type and the table of them.
            &["managed"],
            // What runs beside a child: its pumps, its supervisor, the
            // retention sweeper.
            &["pumps", "supervise", "retention"],
            // Checking and starting one child, which wires all of the above,
            // and the OS's part of the start.
            &["spawn", "launch"],
            // The registry: when a spawn may start, id reuse, teardown.
            &["registry"],
        ],
    ),
];

/// Exported macros, by the module that defines them (`crate::log_info!`).
const MACROS: &[(&str, &str)] = &[
    ("log_debug", "base"),
    ("log_info", "base"),
    ("log_warn", "base"),
    ("log_error", "base"),
    ("go_struct", "base"),
];

/// The layer unit (top-level folder) a module path (`["sys", "process", "linux"]`) belongs to.
fn unit_of(path: &[String]) -> Option<&'static str> {
    let first = path.first()?;
    if let Some((_, module)) = MACROS.iter().find(|(m, _)| m == first) {
        return Some(module);
    }
    layer_scan::unit_named(LAYERS, first)
}

/// The ranks of `unit`'s inner order, if it has one.
fn inner_order(unit: &str) -> Option<&'static [&'static [&'static str]]> {
    INNER.iter().find(|(u, _)| *u == unit).map(|(_, ranks)| *ranks)
}

/// The rank of `module` in an inner order.
fn rank_of(ranks: &[&[&str]], module: &str) -> Option<usize> {
    ranks.iter().position(|rank| rank.contains(&module))
}

/// The inner-order violations of one path named in module `own`
/// (`["serve", "state"]`), if both sit in a folder with an inner order.
fn inner_violation(file: &Path, own: &[String], path: &[String]) -> Option<String> {
    let ranks = inner_order(own.first()?)?;
    if path.first() != own.first() {
        return None;
    }
    let (mine, theirs) = (own.get(1)?, path.get(1)?);
    let (Some(my_rank), Some(their_rank)) = (rank_of(ranks, mine), rank_of(ranks, theirs)) else {
        return None; // a module without a rank is reported once, by its own file
    };
    (their_rank > my_rank).then(|| {
        format!(
            "{}: `{}` reaches up inside {} from {} (rank {}) to {} (rank {})",
            file.display(),
            path.join("::"),
            own[0],
            mine,
            my_rank,
            theirs,
            their_rank
        )
    })
}

/// The layer violations of one file (`file` is its path under `src`), and
/// inside a folder with an inner order, a module of no rank and a path
/// that reaches up a rank.
fn violations(file: &Path, source: &str) -> Vec<String> {
    let mut found = layer_scan::layer_violations(LAYERS, unit_of, file, source);
    let module = layer_scan::module_of(file);
    let Some(own) = unit_of(&module) else {
        return found;
    };
    if let (Some(ranks), Some(name)) = (inner_order(own), module.get(1)) {
        if rank_of(ranks, name).is_none() {
            found.push(format!(
                "{}: module has no rank in {}'s order (INNER)",
                file.display(),
                own
            ));
        }
    }
    for path in layer_scan::crate_paths(&module, &layer_scan::code_of(source)) {
        found.extend(inner_violation(file, &module, &path));
    }
    found
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_import_crosses_the_layers() {
    let all = layer_scan::check_tree(&src(), 50, violations);
    assert!(all.is_empty(), "imports across the layers:\n{}", all.join("\n"));
}

#[test]
fn every_top_level_module_has_a_layer() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    for line in lib.lines() {
        let Some(name) = line
            .trim()
            .strip_prefix("pub mod ")
            .or_else(|| line.trim().strip_prefix("pub(crate) mod "))
        else {
            continue;
        };
        let name = name.trim_end_matches(';');
        assert!(unit_of(&[name.to_string()]).is_some(), "`{name}` has no layer");
    }
}

#[test]
fn the_root_holds_only_layer_folders() {
    let src = src();
    let mut loose = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            assert!(
                unit_of(std::slice::from_ref(&name)).is_some(),
                "folder `{name}` has no layer in LAYERS"
            );
        } else if name != "lib.rs" && name != "main.rs" {
            loose.push(name);
        }
    }
    assert!(loose.is_empty(), "files outside a layer folder: {loose:?}");
}

#[test]
fn planted_violations_are_caught() {
    let check = |file: &str, source: &str| violations(Path::new(file), source);
    // Upward, by plain path, group and `super::`.
    assert_eq!(
        check("replay/log.rs", "use crate::serve::connection::Reply;"),
        ["replay/log.rs: `serve::connection::Reply` reaches up from replay (engines) to serve (serving)"]
    );
    assert_eq!(
        check(
            "methods/git/mod.rs",
            "use crate::{base::gojson, serve::dispatch::Call};"
        )
        .len(),
        1
    );
    assert_eq!(
        check("methods/git/mod.rs", "use super::super::serve::state::Daemon;").len(),
        1
    );
    assert_eq!(
        check("replay/store.rs", "fn f() { crate::process::retention(); }").len(),
        1
    );
    assert_eq!(check("sys/process/mod.rs", "use crate::process::Termination;").len(), 1);
    assert_eq!(check("base/ndjson.rs", "use super::super::protocol::rpc;").len(), 1);
    // Downward and sideways within a layer are fine; comments and test
    // code are not imports.
    assert!(check("replay/segments.rs", "use crate::sys::process::signal_name;").is_empty());
    assert!(check("replay/store.rs", "use crate::rundir::tokenfile;").is_empty());
    assert!(check(
        "process/mod.rs",
        "use crate::replay::log::ReplayLog; crate::log_info!(\"x\");"
    )
    .is_empty());
    assert!(check(
        "serve/dispatch.rs",
        "//! see [`crate::launch::cli`]\nuse crate::serve::state::Daemon;"
    )
    .is_empty());
    assert!(check(
        "replay/log.rs",
        "#[cfg(test)]\nmod tests { use crate::serve::state::Daemon; }"
    )
    .is_empty());
    // A new top-level module must be given a layer.
    assert_eq!(check("newthing.rs", "").len(), 1);
    assert_eq!(check("newfolder/mod.rs", "").len(), 1);
}

#[test]
fn planted_violations_inside_serve_are_caught() {
    let check = |file: &str, source: &str| violations(Path::new(file), source);
    // Upward inside the folder, by plain path, group and `super::`.
    assert_eq!(
        check("serve/state.rs", "use crate::serve::dispatch::Reply;"),
        ["serve/state.rs: `serve::dispatch::Reply` reaches up inside serve from state (rank 1) to dispatch (rank 2)"]
    );
    assert_eq!(check("serve/dispatch.rs", "use super::connection::serve;").len(), 1);
    assert_eq!(
        check("serve/dispatch.rs", "use crate::{base::ndjson, serve::server::run};").len(),
        1
    );
    assert_eq!(
        check("serve/admission.rs", "fn f(d: &crate::serve::state::Daemon) {}").len(),
        1
    );
    assert_eq!(check("serve/connection.rs", "use super::metrics_http::serve;").len(), 1);
    // Downward and within a rank are fine, and so is the folder's mod.rs.
    assert!(check(
        "serve/connection.rs",
        "use crate::serve::dispatch::Reply; use super::state::Daemon; use super::admission::Ticket;"
    )
    .is_empty());
    assert!(check("serve/server.rs", "use crate::serve::orphan::watch;").is_empty());
    assert!(check("serve/mod.rs", "pub mod state;\npub mod dispatch;").is_empty());
    // Test code is exempt here too.
    assert!(check(
        "serve/state.rs",
        "#[cfg(test)]\nmod tests { use crate::serve::server::run; }"
    )
    .is_empty());
    // A new module of the folder must be given a rank.
    assert_eq!(check("serve/newthing.rs", "").len(), 1);
    // Other folders have no inner order.
    assert!(check("replay/store.rs", "use crate::replay::cursor::Cursor;").is_empty());
}

#[test]
fn planted_violations_inside_process_are_caught() {
    let check = |file: &str, source: &str| violations(Path::new(file), source);
    // Upward inside the folder, by plain path, group and `super::`.
    assert_eq!(
        check("process/managed.rs", "use super::registry::ProcessManager;"),
        ["process/managed.rs: `process::registry::ProcessManager` reaches up inside process from managed (rank 1) to registry (rank 4)"]
    );
    assert_eq!(
        check("process/pumps.rs", "use crate::process::spawn::SpawnSpec;").len(),
        1
    );
    assert_eq!(
        check(
            "process/spawn.rs",
            "use crate::{base::ndjson, process::registry::ProcessManager};"
        )
        .len(),
        1
    );
    assert_eq!(
        check("process/stdin.rs", "fn f(p: &super::managed::ManagedProcess) {}").len(),
        1
    );
    // Downward and within a rank are fine, and so is the folder's mod.rs.
    assert!(check(
        "process/registry.rs",
        "use super::managed::lock; use super::spawn::SpawnSpec; use super::command::resolve;"
    )
    .is_empty());
    assert!(check("process/supervise.rs", "use super::pumps::pump;").is_empty());
    assert!(check("process/mod.rs", "pub use spawn::SpawnSpec; pub mod managed;").is_empty());
    // A new module of the folder must be given a rank.
    assert_eq!(check("process/newthing.rs", "").len(), 1);
}
