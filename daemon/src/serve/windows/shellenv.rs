//! The Windows half of `serve::shellenv`: no login-shell PATH extraction.
//! Windows has no login shell whose profile sets PATH; children get the
//! daemon's own environment, as the reference's `shellenv_windows.go`
//! gives them.

use crate::serve::state::Daemon;
use std::sync::Arc;

/// Nothing to extract on Windows: children keep the daemon's PATH.
pub(crate) fn spawn(_daemon: Arc<Daemon>) {}
