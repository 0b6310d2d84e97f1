//! `-install`: ensure the pinned agent CLI is present under `-cli-dir`,
//! then print one `__INSTALL_RESULT__{json}` line. Always exits 0.

/// The `-install` flags, as parsed by `cli`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstallOptions {
    pub cli_dir: String,
    pub cli_version: String,
    pub cli_url: String,
    pub cli_checksum: String,
    pub cli_zst: String,
    /// `-cli-keep`, default 3.
    pub cli_keep: i64,
}

/// Runs the install and prints the facts line; returns the exit code (0).
pub fn run(_options: &InstallOptions) -> i32 {
    0
}
