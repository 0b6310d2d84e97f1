//! The Windows half of `methods::plugins` (issue 43): `plugins.prune` is
//! not ported yet (it sweeps the plugin directories beside the socket
//! through directory descriptors). It answers that plainly, as an
//! internal error.

use super::Outcome;
use crate::base::gojson::Value;
use crate::process::ProcessManager;
use crate::protocol::method::PluginsMethod;
use std::path::Path;

/// Refuses: `plugins.*` is not available on Windows yet.
pub(crate) async fn handle(
    method: PluginsMethod,
    _params: Option<&Value>,
    _socket: &Path,
    _processes: &ProcessManager,
) -> Outcome {
    Outcome::internal(format!("{} is not available on Windows yet (issue 43)", method.name()))
}
