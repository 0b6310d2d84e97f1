//! The daemon's `sys/windows/acl.rs`, as `crate::sys::acl`.

#[path = "../../../../daemon/src/sys/windows/acl.rs"]
pub(crate) mod acl;
