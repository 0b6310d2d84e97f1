//! The Windows half of `tarx` (issue 43): `files.extract_tar`'s engine is
//! not ported yet (it walks the destination through `base::safedir`
//! directory handles); every extraction answers that plainly, in the
//! result body the handler sends.

use serde::Serialize;
use std::path::Path;

/// The `files.extract_tar` result body, as the Unix engine's.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct ExtractResult {
    pub success: bool,
    #[serde(rename = "fileCount", skip_serializing_if = "Option::is_none")]
    pub file_count: Option<u64>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// The per-build extraction rules, as the Unix engine takes them.
// The fields are read by the Unix engine; here they are only carried.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Rules {
    /// A file whose owner execute bit is set lands `0700`, not `0600`.
    pub exec_bit: bool,
    /// A name that leaves `destDir` and comes back is refused.
    pub no_come_back: bool,
    /// Failures are worded relative to `destDir` (build 5fd08069).
    pub relative_texts: bool,
}

/// Refuses: extraction is not available on Windows yet.
pub(crate) fn extract(_archive: &Path, _dest: &Path, _rules: Rules) -> ExtractResult {
    ExtractResult {
        success: false,
        file_count: Some(0),
        error: "tar extraction is not available on Windows yet (issue 43)".to_string(),
    }
}
