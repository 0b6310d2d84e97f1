//! The modes other than `-version` on Windows (issue 43): not ported yet.
//! Each says so on stderr and exits 1, so that a script or client sees a
//! plain refusal rather than a half-working daemon. The Unix modes
//! (`launch/modes.rs`) rest on the serve core (`serve/`, `methods/`,
//! `process/`, `replay/`), which `lib.rs` does not yet build for Windows;
//! the Windows `-serve` (detached with `DETACHED_PROCESS`, the named pipe
//! of `sys/windows/pipe.rs`, Job Objects) comes here as those do.

use crate::base::flagtable::Flags;

/// No helper roles on Windows: a child is started by `CreateProcess`
/// directly, with no trampoline or spawner in between.
pub(crate) fn helper_role() -> Option<i32> {
    None
}

/// Never the detached child yet: the Windows `-serve` is not written.
pub(crate) fn take_daemon_child() -> bool {
    false
}

/// The refusal every unported mode answers with.
fn not_yet(mode: &str) -> i32 {
    eprintln!("remora: {mode} is not available in this Windows build yet (issue 43)");
    1
}

/// `-install`: not ported yet.
pub(crate) fn install(_flags: &Flags) -> i32 {
    not_yet("-install")
}

/// `-probe-cli`: not ported yet.
pub(crate) fn probe_cli(_flags: &Flags) -> i32 {
    not_yet("-probe-cli")
}

/// `-serve`: not ported yet.
pub(crate) fn serve(_flags: &Flags, _daemon_child: bool) -> i32 {
    not_yet("-serve")
}

/// `-bridge`: not ported yet.
pub(crate) fn bridge(_flags: &Flags) -> i32 {
    not_yet("-bridge")
}

/// `-stop`: not ported yet.
pub(crate) fn stop(_flags: &Flags) -> i32 {
    not_yet("-stop")
}

/// `-doctor`: not ported yet (it reads `/proc` and Unix sockets).
pub(crate) fn doctor(_flags: &Flags) -> i32 {
    not_yet("-doctor")
}
