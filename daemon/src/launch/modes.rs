//! The modes other than `-version`, as Unix runs them: `-install`,
//! `-probe-cli`, `-serve` on both sides of the self-daemonize re-exec,
//! `-bridge`, `-stop`, and the helper roles a re-executed remora takes
//! before anything else (the spawn trampoline, the spawner).
//!
//! `-serve` runs twice: the launcher (no sentinel) resolves the token, then
//! [`crate::launch::daemonize::launch`]es the detached child and reports its
//! verdict; the child (sentinel set) binds the socket, starts the runtime,
//! signals, metrics and the login-shell probe, reports readiness, and
//! serves until shutdown.
//!
//! Windows mounts `launch/windows/modes.rs` under this name (issue 43).

use crate::base::flagtable::Flags;
use crate::launch::daemonize::{self, Readiness};
use crate::launch::serveopts::{open_wire_log, raise_open_files_limit, replay_config, served_build, socket_path};
use crate::protocol::build::{Build, Switch};
use crate::serve::server;
use crate::serve::state::{Daemon, Options};
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The helper role this process was started in, if any, run to its end:
/// a spawned child on its way to its program (the trampoline) or the
/// daemon's spawner. Neither touches anything (environment, signals, log)
/// before its work.
pub(crate) fn helper_role() -> Option<i32> {
    let first = std::env::args_os().nth(1)?;
    if first == crate::agent::trampoline::FLAG {
        return Some(crate::agent::trampoline::run(&std::env::args_os().collect::<Vec<_>>()));
    }
    if first == crate::sys::process::SPAWNER_FLAG {
        return Some(crate::sys::process::run_spawner());
    }
    None
}

/// Whether this process is the detached `-serve` child (the sentinel,
/// taken out of the environment here), with SIGCHLD restored. Runs while
/// the process has one thread.
pub(crate) fn take_daemon_child() -> bool {
    let daemon_child = daemonize::take_sentinel();
    crate::base::signals::restore_sigchld();
    daemon_child
}

/// `-install`.
pub(crate) fn install(flags: &Flags) -> i32 {
    match install_options(flags) {
        Ok(options) => crate::install::run(&options),
        Err(message) => {
            eprintln!("{message}");
            2
        }
    }
}

/// `-probe-cli PATH`.
pub(crate) fn probe_cli(flags: &Flags) -> i32 {
    let settings = crate::agent::launcher::settings_folder(managed_launcher(flags));
    crate::agent::probecli::run(&flags.probe_cli, settings.as_deref())
}

/// `-serve`, on the side of the re-exec this process is on.
pub(crate) fn serve(flags: &Flags, daemon_child: bool) -> i32 {
    if daemon_child {
        serve_child(flags)
    } else {
        serve_launcher(flags)
    }
}

/// `-bridge`.
pub(crate) fn bridge(flags: &Flags) -> i32 {
    crate::launch::bridge::bridge(&socket_path(flags))
}

/// `-doctor`.
pub(crate) fn doctor(flags: &Flags) -> i32 {
    crate::launch::doctor::run(&crate::launch::homepaths::home_dir(), flags.json)
}

/// `-stop`.
pub(crate) fn stop(flags: &Flags) -> i32 {
    crate::launch::stop::stop(&socket_path(flags))
}

/// The `-install` options. A build with [`Switch::DefaultCliDir`] installs
/// `-cli-version` without `-cli-dir` into `$HOME/.claude/remote/ccd-cli`;
/// with no `$HOME` that is the error line (exit 2). Without `-cli-version`
/// no folder applies: the facts say what is missing.
fn install_options(flags: &Flags) -> Result<crate::install::InstallOptions, String> {
    let text = |s: &OsString| s.to_string_lossy().into_owned();
    let mut cli_dir = text(&flags.cli_dir);
    let (build, _) = Build::for_stamp(&flags.reference_build);
    if cli_dir.is_empty() && !flags.cli_version.is_empty() && build.has(Switch::DefaultCliDir) {
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
        let Some(home) = home else {
            return Err("remora: cannot resolve home directory: $HOME is not defined".to_string());
        };
        cli_dir = crate::launch::homepaths::default_cli_dir(&PathBuf::from(home))
            .to_string_lossy()
            .into_owned();
    }
    Ok(crate::install::InstallOptions {
        cli_dir,
        cli_version: text(&flags.cli_version),
        cli_url: text(&flags.cli_url),
        cli_checksum: text(&flags.cli_checksum),
        cli_zst: text(&flags.cli_zst),
        cli_keep: flags.cli_keep,
        download_timeout: flags.cli_download_timeout,
        managed_launcher: crate::agent::launcher::settings_folder(managed_launcher(flags)),
        run_bounds: build.has(Switch::CliRunBounds),
        empty_path_without_cli_dir: build.has(Switch::EmptyPathWithoutCliDir),
    })
}

/// Launcher side of `-serve`: the token first (so a missing token is
/// reported before anything touches the socket), then the detached child.
fn serve_launcher(flags: &Flags) -> i32 {
    // Before the token is read: this may re-execute the launcher.
    crate::launch::logind::escape_session_scope();
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
    // Unstamped, the banner is remora's own line; stamped, the build's.
    let (build, _) = Build::for_stamp(&flags.reference_build);
    let stamped = !flags.reference_build.is_empty();
    let style = crate::launch::handoff::BannerStyle {
        stamped,
        ids: stamped && build.has(Switch::BannerIds),
    };
    daemonize::launch(&socket, &token, style)
}

/// Creates the socket's missing parent directories owner-only (0700), as
/// the reference launcher does since `5db5e4a`; existing ones are left as
/// they are. A failure is not reported here: the bind that follows fails
/// on the same path and says why.
fn create_socket_dir(socket: &std::path::Path) {
    use std::os::unix::fs::DirBuilderExt;
    let dir = crate::rundir::tokenfile::socket_dir(socket);
    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
}

/// Daemon side of `-serve` (after the re-exec, in its own session).
fn serve_child(flags: &Flags) -> i32 {
    // First, while this is the only thread: dispositions are process-wide.
    crate::base::signals::reset_inherited();
    raise_open_files_limit();
    // Children spawned by the daemon inherit this, as with the reference.
    std::env::set_var(daemonize::CHILD_MARKER, "1");
    // Also while single-threaded: the peer-check variable leaves the
    // environment before anything could start a child.
    let (build, peer_check) = served_build(flags);
    let (token, mut readiness) = match daemonize::adopt_pipes() {
        Ok(pair) => pair,
        Err(Some(message)) => {
            eprintln!("{message}");
            return 1;
        }
        Err(None) => return 1,
    };
    let socket = socket_path(flags);
    // A full `remote-server.log` is rotated, not started over.
    crate::rundir::daemonlog::arm_rotation(&socket);
    let timers = crate::serve::orphan::Timers::from_env();
    let graces = crate::serve::admission::Graces::from_env();
    let instance = crate::base::instance::Instance::new();
    // Before binding: a live predecessor of this socket is evicted first.
    let run_lock = crate::rundir::runlock::claim(&socket, &instance);
    if let Some(replaced) = run_lock.as_ref().and_then(|lock| lock.replaced) {
        readiness.notice(&replaced.notice());
    }
    // Still before binding: a killed predecessor's children are ended,
    // then this daemon records its own (lock holder only).
    if run_lock.is_some() {
        let run_dir = crate::rundir::childrec::run_dir_of(&socket);
        crate::rundir::orphanreap::reap_orphans(&run_dir);
        crate::rundir::childrec::start_recording(&run_dir, &instance, flags.keep_children);
    } else {
        crate::log_warn!(
            "[daemon] serve: not the run dir's lock holder; leaving any predecessor's children alone and recording none"
        );
    }
    // Bound before the runtime starts: bind_socket swaps the process-wide
    // umask, which must not race with other threads creating files.
    let listener = match crate::serve::socket::bind_socket(&socket) {
        Ok(l) => l,
        Err(e) => {
            if let Some(lock) = run_lock {
                lock.release();
            }
            readiness.fail(&format!("remora: {e}"));
            return 1;
        }
    };
    let bound = crate::serve::orphan::identity(&socket);
    let token_file = crate::rundir::tokenfile::persist(&socket, &token);
    let wire_log = open_wire_log(flags, &token);
    let daemon = Daemon::with_instance(
        token,
        Options {
            socket_path: socket,
            keep_children: flags.keep_children,
            replay: replay_config(flags),
            retention: crate::process::retention::Retention::from_minutes(
                u64::try_from(flags.exited_retention_min).unwrap_or(0),
            ),
            graces,
            build,
            peer_check,
            wire_log: wire_log.clone(),
        },
        instance,
    );
    let on_disk = OnDisk { run_lock, token_file };
    limit_malloc_arenas();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_file(&daemon.options.socket_path);
            on_disk.remove();
            readiness.fail(&format!("remora: start runtime: {e}"));
            return 1;
        }
    };
    let lifecycle = Lifecycle {
        metrics_addr: flags.metrics_addr.clone(),
        bound,
        timers,
        idle_exit: flags.idle_exit_min.clone(),
    };
    let code = runtime.block_on(serve_daemon(listener, daemon, lifecycle, readiness));
    if let Some(tap) = wire_log {
        // Every connection has ended: what they queued is written.
        tap.close();
    }
    on_disk.remove();
    // After the token and lock: a successor's own records are never
    // touched (only this instance's are removed).
    crate::rundir::childrec::forget_all();
    // Teardown is complete once serve_daemon returns; do not let a stray
    // blocking task (a login shell being reaped) hold up the exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

/// The files beside the socket that only a graceful exit cleans up.
struct OnDisk {
    run_lock: Option<crate::rundir::runlock::RunLock>,
    token_file: Option<crate::rundir::tokenfile::Persisted>,
}

impl OnDisk {
    /// Token first, lock last: while the lock is held no successor can
    /// have started writing its own files.
    fn remove(self) {
        if let Some(t) = self.token_file {
            t.remove();
        }
        if let Some(l) = self.run_lock {
            l.release();
        }
    }
}

/// What the serving side needs besides the daemon state.
struct Lifecycle {
    metrics_addr: OsString,
    /// Device and inode of the bound socket (orphan check).
    bound: Option<(u64, u64)>,
    timers: crate::serve::orphan::Timers,
    /// `idle-exit-min`; zero = never.
    idle_exit: crate::base::flagtable::Minutes,
}

async fn serve_daemon(
    listener: std::os::unix::net::UnixListener,
    daemon: Arc<Daemon>,
    lifecycle: Lifecycle,
    readiness: Readiness,
) -> i32 {
    let metrics_addr = lifecycle.metrics_addr;
    let signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&daemon.options.socket_path);
            readiness.fail(&format!("remora: install signal handlers: {e}"));
            return 1;
        }
    };
    tokio::spawn(signals.watch(daemon.clone()));
    if !metrics_addr.is_empty() {
        // Bound before readiness so a scrape right after the banner works;
        // a failure is logged and not fatal.
        crate::serve::metrics_http::start(&String::from_utf8_lossy(metrics_addr.as_bytes()), daemon.clone()).await;
    }
    crate::serve::shellenv::spawn(daemon.clone());
    tokio::spawn(crate::serve::orphan::watch(
        daemon.clone(),
        lifecycle.bound,
        lifecycle.timers,
    ));
    if !lifecycle.idle_exit.duration.is_zero() {
        tokio::spawn(crate::serve::idle::watch(
            daemon.clone(),
            lifecycle.idle_exit.duration,
            lifecycle.idle_exit.text,
        ));
    }
    crate::log_info!("[Server] Listening on {}", daemon.options.socket_path.display());
    readiness.ready(&daemon.instance.id);
    match server::run(listener, daemon).await {
        Ok(()) => {
            crate::log_info!("[Server] Shutdown complete");
            0
        }
        Err(e) => {
            crate::log_error!("[Server] {e}");
            1
        }
    }
}

/// SIGTERM and SIGINT trigger the same graceful shutdown as
/// `server.shutdown`.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn watch(mut self, daemon: Arc<Daemon>) {
        let mut stopped = daemon.shutdown.subscribe();
        let name = tokio::select! {
            _ = self.term.recv() => "terminated",
            _ = self.int.recv() => "interrupt",
            _ = stopped.wait() => return,
        };
        crate::log_info!("[Server] Received signal: {name}, shutting down");
        daemon.shutdown.trigger();
        // Keep the handlers installed through teardown so a second signal
        // does not kill the daemon half-way; it is a no-op instead.
        loop {
            tokio::select! {
                _ = self.term.recv() => {}
                _ = self.int.recv() => {}
            }
        }
    }
}

/// Caps glibc's malloc arenas at [`MALLOC_ARENAS`] before any thread
/// starts. By default every thread that allocates may get its own arena
/// (up to 8 per core); the blocking pool's short-lived threads then leave
/// partly used arenas behind, which `malloc_trim` cannot give back, so a
/// burst of processes would raise RSS for good. The price is contention:
/// on 2 cores one arena costs about 30 % of pipelined pings against two or
/// eight (which tie), but two arenas left RSS 1.1 MiB up after 3,000
/// dropped processes in one run of four, one arena never more than
/// 172 KiB (eight: 684 KiB). Bounded memory is the contract here; a
/// remote's handful of clients never pipelines 100k requests a second.
fn limit_malloc_arenas() {
    // Before the runtime spawns any thread (see `crate::sys::os`).
    crate::sys::os::limit_malloc_arenas(MALLOC_ARENAS);
}

/// glibc malloc arenas (see [`limit_malloc_arenas`]).
const MALLOC_ARENAS: libc::c_int = 1;

/// Whether the served build has the managed launcher, which `-install` and
/// `-probe-cli` use with `CLAUDE_SSH_MANAGED_LAUNCHER=1`.
fn managed_launcher(flags: &Flags) -> bool {
    Build::for_stamp(&flags.reference_build).0.has(Switch::ManagedLauncher)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(id: &str) -> crate::install::InstallOptions {
        let stamp = format!("{id:0<40}");
        let args: Vec<OsString> = [
            "-reference-build",
            stamp.as_str(),
            "-install",
            "-cli-dir",
            "/d",
            "-cli-version",
            "1.0",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        install_options(&crate::launch::flags::parse(&args).expect("flags")).expect("options")
    }

    /// The stamp's row decides the `-install` switches.
    #[test]
    fn install_switches_follow_the_stamp() {
        let old = options("4534d86");
        assert!(!old.run_bounds && !old.empty_path_without_cli_dir);
        let f601 = options("f6010b97");
        assert!(f601.run_bounds && !f601.empty_path_without_cli_dir);
        let newest = options("89cb6289");
        assert!(newest.run_bounds && newest.empty_path_without_cli_dir);
    }
}
