//! Build identity: the id and build time stamped by `build.rs`, and the
//! Go-style names of this platform.

/// What `ci/version` printed for the source tree (`v0.2.0`,
/// `v0.2.0-3-g1a2b3c4`, `v0.1.0-untagged-g1a2b3c4`), or the crate version
/// outside git.
pub const ID: &str = env!("REMORA_VERSION_ID");
/// UTC build time, RFC 3339.
pub const BUILT: &str = env!("REMORA_BUILD_TIME");

/// `-version` output (without the newline). With a `reference-build`
/// (a lower-case commit id, `remora.conf` or `-reference-build`) the line
/// starts the way the reference's does, `claude-ssh <sha>`, which is what
/// Claude Desktop matches (`/claude-ssh\s+(\S+)/`) against the build it
/// pins before it decides to upload its own over this file.
pub fn banner(reference_build: &str) -> String {
    if reference_build.is_empty() {
        format!("remora {ID} (built {BUILT})")
    } else {
        format!("claude-ssh {reference_build} (via remora {ID}, built {BUILT})")
    }
}

/// Go's `runtime.GOOS` for this build.
pub fn goos() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    }
}

/// Go's `runtime.GOARCH` for this build.
pub fn goarch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "x86" => "386",
        "aarch64" => "arm64",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "powerpc64" => "ppc64",
        "loongarch64" => "loong64",
        "mips64" if cfg!(target_endian = "little") => "mips64le",
        "mips" if cfg!(target_endian = "little") => "mipsle",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn go_names() {
        // Go spells macOS "darwin"; every other supported OS keeps Rust's name.
        let want = if cfg!(target_os = "macos") { "darwin" } else { "linux" };
        assert_eq!(super::goos(), want);
        assert!(["amd64", "arm64", "386", "riscv64", "ppc64le", "s390x"].contains(&super::goarch()));
        assert!(super::banner("").starts_with("remora "));
        let sha = "90fca6e6".repeat(5);
        let stamped = super::banner(&sha);
        assert!(
            stamped.starts_with(&format!("claude-ssh {sha} (via remora {}, built ", super::ID)),
            "{stamped}"
        );
    }
}
