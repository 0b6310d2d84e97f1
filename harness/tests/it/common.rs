//! Shared support for the harness integration tests.
//!
//! The tests need a real daemon binary. `CARGO_BIN_EXE_*` only covers this
//! package's binaries, so [`remora`] runs `cargo build -p remora` (a no-op
//! when it is up to date) and returns `<target>/debug/remora`.
#![allow(dead_code)]

/// The same skip rules as the daemon's tests (`REMORA_REQUIRE_ALL_TOOLS`).
#[path = "../../../daemon/tests/it/common/skip.rs"]
pub mod skip;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn harness() -> &'static str {
    env!("CARGO_BIN_EXE_harness")
}

/// Builds (if needed) and returns the workspace's debug `remora`.
pub fn remora() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "-q", "-p", "remora"]).current_dir(workspace());
        // What `cargo test` set for this test (its package facts) must not
        // reach the nested build: ring's build script reruns when they
        // change, so the shell's `cargo build -p remora` and this one would
        // each rebuild ring and remora (harness/src/cli.rs, `runner_set`).
        for (name, _) in std::env::vars_os() {
            let name_text = name.to_string_lossy();
            if name_text.starts_with("CARGO_PKG_")
                || [
                    "CARGO_MANIFEST_DIR",
                    "CARGO_MANIFEST_PATH",
                    "CARGO_MANIFEST_LINKS",
                    "CARGO_CRATE_NAME",
                    "CARGO_BIN_NAME",
                    "CARGO_PRIMARY_PACKAGE",
                    "CARGO_TARGET_TMPDIR",
                    "OUT_DIR",
                ]
                .contains(&name_text.as_ref())
            {
                build.env_remove(&name);
            }
        }
        let st = build.status().expect("run cargo build -p remora");
        assert!(st.success(), "cargo build -p remora failed");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace().join("target"));
        let bin = target.join("debug").join("remora");
        assert!(bin.exists(), "{} missing", bin.display());
        bin
    })
    .clone()
}

/// Runs the harness with `args`.
pub fn run(args: &[&str]) -> Output {
    Command::new(harness()).args(args).output().expect("run harness")
}

/// Writes an executable wrapper running remora behind `mutant-proxy`.
pub fn mutant(dir: &Path, kind: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(format!("mutant-{kind}"));
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nexec '{}' mutant-proxy --kind {kind} -- '{}' \"$@\"\n",
            harness(),
            remora().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// Diffs remora (reference) against `candidate` on the probes matching
/// `filter`; returns the exit code and the JSON report.
pub fn diff_json(candidate: &Path, filter: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let remora = remora();
    let mut args = vec![
        "diff",
        "--quiet",
        "--reference",
        remora.to_str().unwrap(),
        "--candidate",
        candidate.to_str().unwrap(),
        "--filter",
        filter,
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no report: {text}"))).unwrap();
    (out.status.code().unwrap_or(-1), v, text)
}

/// The result object of one probe in a JSON report.
pub fn probe<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["probe"] == name)
        .unwrap_or_else(|| panic!("probe {name} not in report"))
}
