//! clauster 1.3.2 (PyPI), the one real client outside Desktop, drives this
//! build end to end through its own classes: `compat/clauster/run` installs
//! it into a private venv pinned by hash and runs `compat/clauster/suite.py`
//! (connect-or-spawn and reconnect, streams, a 300 000-byte line, 1.5 MB of
//! stdin, kills, reattach after a clauster restart, the hosted lifecycle
//! with a stream-json fake `claude`, `-keep-children` across a graceful
//! restart and a SIGKILL, two clausters on one daemon).
//!
//! Without python3 3.11+ or PyPI the runner exits 77 and this test skips
//! (`tests/it/common/skip.rs`); under `REMORA_REQUIRE_ALL_TOOLS` it fails.

use crate::common;
use crate::common::skip;
use std::io::Write;
use std::path::Path;
use std::process::Command;

/// The runner's exit status for "could not run here" (automake's).
const SKIPPED: i32 = 77;

#[test]
fn clauster_drives_remora_end_to_end() {
    let runner = Path::new(env!("CARGO_MANIFEST_DIR")).join("../compat/clauster/run");
    let out = Command::new("bash")
        .arg(&runner)
        .arg("--binary")
        .arg(common::remora_bin())
        // Inherited by the daemons clauster spawns (one is killed with
        // SIGKILL): no profile of the developer's runs under them.
        .env("SHELL", common::QUICK_LOGIN_SHELL)
        .env(
            "REMORA_COMPAT_CACHE",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("compat"),
        )
        .output()
        .expect("run compat/clauster/run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => {
            // One line per case with its time, shown in plain `cargo test`
            // output (libtest hides what a passing test prints).
            let mut err = std::io::stderr().lock();
            for line in stdout
                .lines()
                .filter(|l| l.starts_with("ok ") || l.starts_with("clauster "))
            {
                let _ = writeln!(err, "clauster_compat: {line}");
            }
            assert!(
                stdout.contains("cases passed") && !stdout.contains("FAIL"),
                "the suite exited 0 without its summary:\n{stdout}"
            );
        }
        Some(SKIPPED) => {
            let reason = stdout
                .lines()
                .find_map(|l| l.strip_prefix("SKIPPED "))
                .unwrap_or("the runner skipped without a reason");
            skip::skip(reason);
        }
        status => panic!("clauster suite failed ({status:?}):\n{stdout}\n{stderr}"),
    }
}
