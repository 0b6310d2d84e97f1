//! The daemon's `sys/windows/{acl,openat}.rs`, as `crate::sys::…`.

#[path = "../../../../daemon/src/sys/windows/acl.rs"]
pub(crate) mod acl;
#[path = "../../../../daemon/src/sys/windows/openat.rs"]
pub(crate) mod openat;
