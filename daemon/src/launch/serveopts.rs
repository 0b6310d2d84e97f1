//! What the `-serve` daemon child takes from its flags before it serves,
//! the same on every OS: the socket path, the build it answers as (and
//! `peerCheck`), the replay store's settings, the wire log, and the
//! open-files limit its children start with.

use crate::base::flagtable::Flags;
use crate::protocol::build::{Build, Choice, Switch};
use std::path::PathBuf;
use std::sync::Arc;

/// `-socket`, or `~/.claude/remote/rpc.sock` when it is empty
/// ([`crate::launch::homepaths::socket_path`]). Only the `-serve`
/// launcher creates a missing parent.
pub(crate) fn socket_path(flags: &Flags) -> PathBuf {
    crate::launch::homepaths::socket_path(&flags.socket)
}

/// The wire log of `-wire-log`/`wire-log`, when set and it can be
/// opened; otherwise the daemon runs without one and the log says why. A
/// relative flag value is taken from the directory the daemon started in.
pub(crate) fn open_wire_log(flags: &Flags, token: &[u8]) -> Option<Arc<crate::serve::wirelog::WireTap>> {
    if flags.wire_log.is_empty() {
        return None;
    }
    let given = std::path::PathBuf::from(&flags.wire_log);
    let path = if given.is_absolute() {
        given
    } else {
        std::env::current_dir().ok()?.join(given)
    };
    let max_string = usize::try_from(flags.wire_log_max_string).unwrap_or(usize::MAX);
    let rules = crate::serve::wireredact::Rules {
        max_string,
        token: token.to_vec(),
    };
    match crate::serve::wirelog::WireTap::open(&path, rules) {
        Ok(tap) => {
            crate::log_info!(
                "[daemon] wire log: every frame is appended to {} (strings cut at {} bytes)",
                tap.path.display(),
                max_string
            );
            if max_string == 0 {
                crate::log_warn!(
                    "[daemon] wire-log-max-string is 0: the wire log keeps stdin, output and file data whole"
                );
            }
            Some(tap)
        }
        Err(why) => {
            crate::log_warn!("[daemon] wire log off: {why}");
            None
        }
    }
}

/// The reference build the daemon answers as (`reference-build`), logged
/// once, and its `peerCheck` member where the build has one.
pub(crate) fn served_build(flags: &Flags) -> (&'static Build, Option<&'static str>) {
    let (build, choice) = Build::for_stamp(&flags.reference_build);
    let line = served_build_line(&flags.reference_build);
    match choice {
        Choice::Recorded | Choice::Unstamped => crate::log_info!("[daemon] {line}"),
        Choice::Unrecorded => crate::log_warn!("[daemon] {line}"),
    }
    (build, peer_check(build))
}

/// The variable a client sets to ask for the peer check.
const PEER_CHECK_ENV: &str = "CLAUDE_SSH_PEER_CHECK";

/// For a build with the `peerCheck` member: reads [`PEER_CHECK_ENV`] once
/// and takes it out of the environment whatever its value, so no child,
/// git call or login shell inherits it. Only `1` asks; remora has no peer
/// check, so it answers `unavailable` and serves every caller, as
/// claustrum's D25 does (5fd08069 on Linux answers `on` and checks
/// namespaces the record does not pin down); anything else is `off`.
/// Must run while the process has one thread.
pub(crate) fn peer_check(build: &Build) -> Option<&'static str> {
    if !build.has(Switch::PeerCheck) {
        return None;
    }
    let asked = std::env::var_os(PEER_CHECK_ENV).is_some_and(|v| v == "1");
    std::env::remove_var(PEER_CHECK_ENV);
    if !asked {
        return Some("off");
    }
    crate::log_warn!("[Server] {PEER_CHECK_ENV} is set: remora has no peer check, serving all callers");
    Some("unavailable")
}

/// The soft limit the daemon (and so every child) gets: the reference
/// raises it to this, or to the hard limit when that is lower.
const OPEN_FILES_TARGET: u64 = 65536;

/// Raises the soft `RLIMIT_NOFILE` to min(hard, [`OPEN_FILES_TARGET`]) and
/// logs what children will start with. A soft limit already above the
/// target is left alone (lowering it could break an operator's setup).
/// Where the OS has no such limit (Windows) nothing is said.
pub(crate) fn raise_open_files_limit() {
    let Some((mut soft, hard)) = crate::sys::os::open_files_limit() else {
        return;
    };
    let target = hard.min(OPEN_FILES_TARGET);
    if soft < target {
        if let Err(e) = crate::sys::os::set_open_files_limit(target, hard) {
            crate::log_warn!(
                "[daemon] cannot raise the open-files limit from {soft} to {target}: {}",
                crate::base::goerr::io_text(&e)
            );
            return;
        }
        soft = target;
    }
    crate::log_info!("[daemon] child processes will start with an open-files limit of {soft}");
}

/// `-replay-dir` / `-replay-budget-mb` as the replay store's settings. A
/// negative budget counts as 0 (keep nothing on disk beyond one segment
/// per log).
pub(crate) fn replay_config(flags: &Flags) -> crate::replay::store::StoreConfig {
    crate::replay::store::StoreConfig {
        dir: (!flags.replay_dir.is_empty()).then(|| std::path::PathBuf::from(&flags.replay_dir)),
        budget_bytes: u64::try_from(flags.replay_budget_mb)
            .unwrap_or(0)
            .saturating_mul(1 << 20),
        ..Default::default()
    }
}

/// Which build a `reference-build` stamp is answered as, and why: the log
/// line at start and the last line of `-print-config`.
pub(crate) fn served_build_line(stamp: &str) -> String {
    let (build, choice) = Build::for_stamp(stamp);
    match choice {
        Choice::Recorded => format!("answering as reference build {}", build.id),
        Choice::Unstamped => format!(
            "no reference-build stamp: answering as the newest recorded build, {}",
            build.id
        ),
        Choice::Unrecorded => format!(
            "reference-build {stamp} has no record: answering as the newest recorded build, {}",
            build.id
        ),
    }
}
