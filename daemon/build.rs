//! Stamps the version id (`ci/version`) and build time into the binary.

use std::process::Command;

// The crate's own date code, compiled here as a module: a build script
// cannot import the crate it builds.
#[path = "src/base/utctime.rs"]
mod utctime;

fn main() {
    // ci/version names the build, for this binary and for ci/release's
    // tarballs alike; outside the repository the crate version does.
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/version");
    let id = Command::new("sh")
        .arg(&script)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("v{}", std::env::var("CARGO_PKG_VERSION").unwrap_or_default()));
    let built = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0)
        });
    println!("cargo:rustc-env=REMORA_VERSION_ID={id}");
    println!("cargo:rustc-env=REMORA_BUILD_TIME={}", utctime::rfc3339(built));
    println!("cargo:rerun-if-changed=../.git/HEAD");
    println!("cargo:rerun-if-changed=../.git/refs");
    println!("cargo:rerun-if-changed=../.git/packed-refs");
    println!("cargo:rerun-if-changed=../ci/version");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
}
