//! The modes other than `-version` on Windows (issue 43): `-bridge` and
//! `-stop` work (over the socket or the pipe); the others are not ported
//! yet. Each of those says so on stderr and exits 1, so that a script or client sees a
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

/// `-bridge`: the socket, else the pipe `rpc.pipe` names
/// (`launch/windows/bridge.rs`).
pub(crate) fn bridge(flags: &Flags) -> i32 {
    crate::launch::bridge::bridge(&crate::launch::homepaths::socket_path(&flags.socket))
}

/// `-stop`: through the same dial as `-bridge` (`launch/windows/stop.rs`).
pub(crate) fn stop(flags: &Flags) -> i32 {
    crate::launch::stop::stop(&crate::launch::homepaths::socket_path(&flags.socket))
}

/// `-doctor`: not ported yet (it reads `/proc` and Unix sockets).
pub(crate) fn doctor(_flags: &Flags) -> i32 {
    not_yet("-doctor")
}
