//! The daemon's Windows `safedir` and `homeguard`, as `crate::base::…`.

#[path = "../../../../daemon/src/base/windows/homeguard.rs"]
pub(crate) mod homeguard;
#[path = "../../../../daemon/src/base/windows/safedir.rs"]
pub(crate) mod safedir;

/// Stands in for the daemon's `base::goerr` (which needs more of the
/// daemon): only the home guard's refusal text uses it.
pub(crate) mod goerr {
    pub(crate) fn go_quote(bytes: &[u8]) -> String {
        format!("{:?}", String::from_utf8_lossy(bytes))
    }
}
