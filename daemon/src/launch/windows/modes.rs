//! The modes other than `-version` on Windows (issue 43). `-serve` runs:
//! the launcher hands the token to a detached child
//! (`windows/daemonize.rs`), which listens on the AF_UNIX socket and,
//! with `-listen-pipe`, on the named pipe (`serve/windows/socket.rs`).
//! `-bridge` and `-stop` dial the socket, else the pipe `rpc.pipe` names
//! (`windows/bridge.rs`, `windows/stop.rs`). `-install` runs
//! `install/` with its Windows halves. The others are not ported
//! yet: each says so on stderr and exits 1, so
//! that a script or client sees a plain refusal rather than a
//! half-working mode.
//!
//! What the Windows daemon does not have: signals (a detached process
//! has no console; `server.shutdown` and `-stop` end it), the run-dir
//! lock, child records and orphan reaping (children live in a Job Object
//! that dies with the daemon), the login-shell PATH and `-keep-children`
//! (ignored with the reference's warning). What it keeps beside the
//! socket (`daemon.token`, `rpc.pipe`, `remote-server.log`) and the
//! socket's missing parents are owner-only by DACL.

use crate::base::flagtable::Flags;
use crate::launch::daemonize;
use crate::launch::serveopts::{open_wire_log, raise_open_files_limit, replay_config, served_build, socket_path};
use crate::protocol::build::{Build, Switch};
use crate::serve::state::{Daemon, Options};
use std::sync::Arc;
use std::time::Duration;

/// The warning a Windows daemon logs at start when asked to keep its
/// children (the reference's `honorKeepChildren`, seed 000).
const KEEP_CHILDREN_IGNORED: &str = "[Server] -keep-children is not supported on Windows and is ignored: child processes are confined to a Job Object that the OS terminates when the daemon exits";

/// No helper roles on Windows: a child is started by `CreateProcess`
/// directly, with no trampoline or spawner in between.
pub(crate) fn helper_role() -> Option<i32> {
    None
}

/// Whether this process is `-serve`'s detached child (the sentinel).
pub(crate) fn take_daemon_child() -> bool {
    daemonize::take_sentinel()
}

/// The refusal every unported mode answers with.
fn not_yet(mode: &str) -> i32 {
    eprintln!("remora: {mode} is not available in this Windows build yet (issue 43)");
    1
}

/// `-install` (`install/`, with its Windows halves): the facts line and
/// exit 0, or the option error and exit 2, as on Unix.
pub(crate) fn install(flags: &Flags) -> i32 {
    match install_options(flags) {
        Ok(options) => crate::install::run(&options),
        Err(message) => {
            eprintln!("{message}");
            2
        }
    }
}

/// The `-install` options, as the Unix half builds them, with the
/// Windows home: a build with [`Switch::DefaultCliDir`] installs
/// `-cli-version` without `-cli-dir` into
/// `%USERPROFILE%\.claude\remote\ccd-cli`; with no `%USERPROFILE%` that
/// is the error line (exit 2). With the managed-launcher gate on (a build
/// with [`Switch::ManagedLauncher`], `CLAUDE_SSH_MANAGED_LAUNCHER=1`) the
/// facts carry `"launcherStatus":"none"`: no settings folder is read on
/// Windows (`install/windows/launcher.rs`).
fn install_options(flags: &Flags) -> Result<crate::install::InstallOptions, String> {
    let text = |s: &std::ffi::OsString| s.to_string_lossy().into_owned();
    let mut cli_dir = text(&flags.cli_dir);
    let (build, _) = Build::for_stamp(&flags.reference_build);
    if cli_dir.is_empty() && !flags.cli_version.is_empty() && build.has(Switch::DefaultCliDir) {
        let home = std::env::var_os("USERPROFILE").filter(|h| !h.is_empty());
        let Some(home) = home else {
            return Err("remora: cannot resolve home directory: %USERPROFILE% is not defined".to_string());
        };
        cli_dir = crate::launch::homepaths::default_cli_dir(std::path::Path::new(&home))
            .to_string_lossy()
            .into_owned();
    }
    let gate = std::env::var_os("CLAUDE_SSH_MANAGED_LAUNCHER").is_some_and(|v| v == "1");
    Ok(crate::install::InstallOptions {
        cli_dir,
        cli_version: text(&flags.cli_version),
        cli_url: text(&flags.cli_url),
        cli_checksum: text(&flags.cli_checksum),
        cli_zst: text(&flags.cli_zst),
        cli_keep: flags.cli_keep,
        download_timeout: flags.cli_download_timeout,
        managed_launcher: (build.has(Switch::ManagedLauncher) && gate).then(std::path::PathBuf::new),
        run_bounds: build.has(Switch::CliRunBounds),
        empty_path_without_cli_dir: build.has(Switch::EmptyPathWithoutCliDir),
    })
}

/// `-probe-cli PATH`: the direct probe. The reference's Windows builds
/// resolve no managed launcher (claustrum's RES-30 and IW rows of
/// `89cb6289`), so `CLAUDE_SSH_MANAGED_LAUNCHER` changes nothing here.
pub(crate) fn probe_cli(flags: &Flags) -> i32 {
    crate::agent::versionprobe::run_direct(&flags.probe_cli)
}

/// `-serve`, on the side of the re-exec this process is on.
pub(crate) fn serve(flags: &Flags, daemon_child: bool) -> i32 {
    if daemon_child {
        serve_child(flags)
    } else {
        serve_launcher(flags)
    }
}

/// Launcher side of `-serve`: the token first, then the detached child.
fn serve_launcher(flags: &Flags) -> i32 {
    let token = match crate::launch::handoff::launcher_token(flags) {
        Ok(t) => t,
        Err(message) => {
            eprintln!("{message}");
            return 1;
        }
    };
    let socket = socket_path(flags);
    if let Err(message) = crate::serve::socket::check_socket_path_length(&socket) {
        eprintln!("{message}");
        return 1;
    }
    create_socket_dir(&socket);
    let (build, _) = Build::for_stamp(&flags.reference_build);
    let stamped = !flags.reference_build.is_empty();
    let style = crate::launch::handoff::BannerStyle {
        stamped,
        ids: stamped && build.has(Switch::BannerIds),
    };
    daemonize::launch(&socket, &token, style)
}

/// Creates the socket's missing parent directories owner-only (a
/// protected DACL granting this user alone, the Windows 0700), as the
/// Unix launcher does; existing ones are left as they are. A failure is
/// not reported here: the bind that follows fails on the same path and
/// says why.
fn create_socket_dir(socket: &std::path::Path) {
    let dir = crate::rundir::tokenfile::socket_dir(socket);
    let mut missing = Vec::new();
    let mut level = dir.as_path();
    while matches!(std::fs::symlink_metadata(level), Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
        missing.push(level);
        match level.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => level = parent,
            _ => break,
        }
    }
    for level in missing.into_iter().rev() {
        if crate::sys::acl::create_dir_owner_only(level).is_err() {
            return;
        }
    }
}

/// Daemon side of `-serve` (the detached child).
fn serve_child(flags: &Flags) -> i32 {
    raise_open_files_limit();
    let (build, peer_check) = served_build(flags);
    let (token, readiness) = match daemonize::adopt_pipes() {
        Ok(pair) => pair,
        Err(Some(message)) => {
            eprintln!("{message}");
            return 1;
        }
        Err(None) => return 1,
    };
    if flags.keep_children {
        crate::log_warn!("{KEEP_CHILDREN_IGNORED}");
    }
    let socket = socket_path(flags);
    let bound = match crate::serve::socket::bind_socket(&socket) {
        Ok(bound) => bound,
        Err(e) if flags.listen_pipe => {
            crate::log_warn!("[Server] remora: {e}; serving the named pipe alone (-listen-pipe)");
            crate::serve::socket::Bound::without_socket()
        }
        Err(e) => {
            readiness.fail(&format!("remora: {e}"));
            return 1;
        }
    };
    // Serving: `remote-server.log` is capped, a full one rotated.
    daemonize::cap_log(&socket);
    let identity = crate::serve::orphan::identity(&socket);
    let wire_log = open_wire_log(flags, &token);
    let daemon = Daemon::with_instance(
        token,
        Options {
            socket_path: socket,
            keep_children: false,
            replay: replay_config(flags),
            retention: crate::process::retention::Retention::from_minutes(
                u64::try_from(flags.exited_retention_min).unwrap_or(0),
            ),
            graces: crate::serve::admission::Graces::from_env(),
            build,
            peer_check,
            wire_log: wire_log.clone(),
        },
        crate::base::instance::Instance::new(),
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            readiness.fail(&format!("remora: start runtime: {e}"));
            return 1;
        }
    };
    let served = Served {
        bound,
        identity,
        listen_pipe: flags.listen_pipe,
        metrics_addr: String::from_utf8_lossy(flags.metrics_addr.as_encoded_bytes()).into_owned(),
        idle_exit: flags.idle_exit_min.clone(),
    };
    let code = runtime.block_on(serve_daemon(served, daemon, readiness));
    if let Some(tap) = wire_log {
        tap.close();
    }
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

/// What the serving side needs besides the daemon state.
struct Served {
    bound: crate::serve::socket::Bound,
    /// The bound socket file's identity (orphan check).
    identity: Option<(u64, u64)>,
    listen_pipe: bool,
    metrics_addr: String,
    idle_exit: crate::base::flagtable::Minutes,
}

async fn serve_daemon(served: Served, daemon: Arc<Daemon>, readiness: daemonize::Readiness) -> i32 {
    let mut bound = served.bound;
    let socket = daemon.options.socket_path.clone();
    if served.listen_pipe {
        // Inside the runtime: the pipe registers with its reactor.
        if let Err(why) = bound.add_pipe(&socket, &daemon.instance.id) {
            if !bound.has_socket() {
                readiness.fail(&format!("remora: {why}"));
                return 1;
            }
            crate::log_warn!("[Server] -listen-pipe: {why}; serving the socket alone");
        }
    }
    if !served.metrics_addr.is_empty() {
        crate::serve::metrics_http::start(&served.metrics_addr, daemon.clone()).await;
    }
    crate::serve::shellenv::spawn(daemon.clone());
    tokio::spawn(crate::serve::orphan::watch(
        daemon.clone(),
        served.identity,
        crate::serve::orphan::Timers::from_env(),
    ));
    if !served.idle_exit.duration.is_zero() {
        tokio::spawn(crate::serve::idle::watch(
            daemon.clone(),
            served.idle_exit.duration,
            served.idle_exit.text,
        ));
    }
    if bound.has_socket() {
        crate::log_info!("[Server] Listening on {}", socket.display());
    }
    if served.listen_pipe {
        crate::log_info!(
            "[Server] Listening on {}",
            crate::sys::pipe::pipe_name(&daemon.instance.id)
        );
    }
    // Once listening, as on Unix: a client that knows only the socket
    // path (or `-stop`) finds the token beside it.
    let token_file = crate::rundir::tokenfile::persist(&socket, &daemon.token);
    readiness.ready(&daemon.instance.id);
    let code = match crate::serve::server::run(bound, daemon).await {
        Ok(()) => {
            crate::log_info!("[Server] Shutdown complete");
            0
        }
        Err(e) => {
            crate::log_error!("[Server] {e}");
            1
        }
    };
    if let Some(file) = token_file {
        file.remove();
    }
    code
}

/// `-bridge`: the socket, else the pipe `rpc.pipe` names
/// (`launch/windows/bridge.rs`).
pub(crate) fn bridge(flags: &Flags) -> i32 {
    crate::launch::bridge::bridge(&socket_path(flags))
}

/// `-stop`: through the same dial as `-bridge` (`launch/windows/stop.rs`).
pub(crate) fn stop(flags: &Flags) -> i32 {
    crate::launch::stop::stop(&socket_path(flags))
}

/// `-doctor`: not ported yet (it reads `/proc` and Unix sockets).
pub(crate) fn doctor(_flags: &Flags) -> i32 {
    not_yet("-doctor")
}
