//! The process supervisor: registry of managed children, their replay logs,
//! stdin, and kill semantics.

pub mod log;

/// Registry of managed processes.
#[derive(Debug, Default)]
pub struct ProcessManager {}

impl ProcessManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// Graceful-shutdown teardown: kill every child tree, or leave them
    /// running when `keep_children` is set.
    pub async fn shutdown(&self, _keep_children: bool) {}
}
