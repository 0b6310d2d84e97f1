//! `files.extract_tar`: streaming, confined gzip+tar extraction.

use serde::Serialize;
use std::path::Path;

/// The `files.extract_tar` result body.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ExtractResult {
    pub success: bool,
    #[serde(rename = "fileCount", skip_serializing_if = "Option::is_none")]
    pub file_count: Option<u64>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

pub fn extract(_archive: &Path, _dest: &Path) -> ExtractResult {
    ExtractResult {
        success: false,
        file_count: Some(0),
        error: "not implemented".into(),
    }
}
