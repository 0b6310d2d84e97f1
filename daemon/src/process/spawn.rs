//! Starting a child: `process.spawn`'s checks and environment
//! ([`prepare`]), the launch (directly or through the exec-child
//! trampoline), and the wiring of a new [`ManagedProcess`] to its pumps
//! and supervisor ([`start`]). The registry decides when (one spawn of a
//! session at a time, after superseding its other processes) and
//! registers what starts.

use super::command;
use super::managed::{lock, ManagedProcess, StdinState};
use super::pumps::{feed_stdin, grow_pipe, pump, GROWN_PIPES};
use super::supervise::supervise;
use crate::agent::agentsock;
use crate::protocol::metrics::Metrics;
use crate::replay::frame::Stream;
use crate::replay::log::ReplayLog;
use crate::replay::store::ReplayStore;
use crate::sys::process as sys;
use std::os::unix::ffi::OsStrExt;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};

/// Why `process.spawn` started nothing.
#[derive(Debug)]
pub(crate) enum SpawnError {
    /// The wire message for -32603.
    Failed(String),
    /// Shutdown began while the spawn waited (to supersede): no reply.
    ShuttingDown,
    /// The managed launcher did not start: the wire message for -32005.
    Launcher(String),
}

/// Words the wire message of a failed exec of `program`.
pub(crate) type ExecError = fn(&str, &std::io::Error) -> String;

/// What `process.spawn` asks for.
#[derive(Clone, Copy)]
pub(crate) struct SpawnSpec<'a> {
    pub id: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
    pub cwd: &'a str,
    pub env: &'a [(String, String)],
    /// Skip the SSH agent hand-off ([`crate::agent::agentsock`]).
    pub no_agent_socket: bool,
    /// Run the command through this managed launcher (build 89cb6289's
    /// `launcher` param, already checked by the handler): the child is
    /// `<launcher...> <command> <args...>`.
    pub launcher: Option<Launcher<'a>>,
    /// Variables the child never gets, whoever set them (the daemon's
    /// environment or the request's `env`): the handler names them.
    pub strip_env: &'a [&'a str],
}

/// A managed launcher to run the command through, as the handler checked
/// it: its program, its own arguments, and how a failed start is worded.
#[derive(Clone, Copy)]
pub(crate) struct Launcher<'a> {
    pub program: &'a str,
    pub args: &'a [String],
    /// The -32005 message for a launcher that did not start.
    pub not_started: ExecError,
}

/// A new child's pipes, as registered with the tokio reactor.
type ChildPipes = (
    std::io::Result<tokio::process::ChildStdin>,
    std::io::Result<tokio::net::unix::pipe::Receiver>,
    std::io::Result<tokio::net::unix::pipe::Receiver>,
);

/// The output pumps of a child, stdout's then stderr's.
type Readers = (tokio::task::JoinHandle<()>, tokio::task::JoinHandle<()>);

/// A child's environment, as `Command::envs` takes it.
type Env = Vec<(std::ffi::OsString, std::ffi::OsString)>;

/// A spawn whose checks passed: what runs, in which environment, and how
/// a failure to start it is worded. [`start`] consumes it.
pub(super) struct Prepared<'a> {
    spec: SpawnSpec<'a>,
    /// With a launcher, the child's arguments: `<launcher args...>
    /// <command> <args...>`.
    launched: Option<Vec<String>>,
    /// The resolved path of what runs (the launcher's, with one).
    program: String,
    env: Env,
    exec_error: ExecError,
    failed: fn(String) -> SpawnError,
}

impl<'a> Prepared<'a> {
    /// The id the client gave.
    pub(super) fn id(&self) -> &'a str {
        self.spec.id
    }

    /// What is started: the request itself, or its launcher with the
    /// command and its arguments after the launcher's own.
    fn run(&self) -> SpawnSpec<'_> {
        match (&self.launched, self.spec.launcher) {
            (Some(args), Some(launcher)) => SpawnSpec {
                command: launcher.program,
                args,
                ..self.spec
            },
            _ => self.spec,
        }
    }
}

/// `process.spawn`'s checks before anything starts, in the reference's
/// order: the cwd, the child's environment (the login shell's PATH, the
/// request's entries, the agent socket hand-off, the handler's strip
/// list), the command's lookup, a NUL in the environment, and the
/// launcher's exec check.
pub(super) async fn prepare<'a>(
    spec: &SpawnSpec<'a>,
    login_path: Option<&str>,
    agent: &agentsock::HandOff,
) -> Result<Prepared<'a>, SpawnError> {
    command::check_cwd(spec.cwd).map_err(SpawnError::Failed)?;
    // The request's entries named as the child will read them.
    let requested: Vec<(String, String)> = spec.env.iter().map(|(k, v)| command::go_entry(k, v)).collect();
    let mut env = command::merged_env(login_path, &requested);
    env.retain(|(k, _)| !spec.strip_env.iter().any(|s| k == s));
    // An agent socket the daemon itself inherited (say from an SSH
    // session with forwarding, long gone) is checked like the login
    // shell's before a child gets it: its path may since have been
    // re-created by another user. One the caller names is its choice.
    if !requested.iter().any(|(k, _)| k == agentsock::AGENT_SOCK_ENV) {
        if let Some(at) = env.iter().position(|(k, _)| k == agentsock::AGENT_SOCK_ENV) {
            if !agent.vet(&env[at].1.to_string_lossy()).await {
                env.remove(at);
            }
        }
    }
    // The hand-off comes after the caller's entries, and only when no
    // entry names the variable at all (an empty value opts out too).
    if !spec.no_agent_socket && !env.iter().any(|(k, _)| k == agentsock::AGENT_SOCK_ENV) {
        if let Some(sock) = agent.socket().await {
            env.push((agentsock::AGENT_SOCK_ENV.into(), sock.into()));
        }
    }
    let program = command::resolve(spec.command, &command::path_of(&env)).map_err(SpawnError::Failed)?;
    if env
        .iter()
        .any(|(k, v)| k.as_bytes().contains(&0) || v.as_bytes().contains(&0))
    {
        // Go's Cmd.Start refuses this before forking (dedupEnv, since
        // Go 1.20), after the lookup and without the fork/exec prefix.
        return Err(SpawnError::Failed(command::ENV_NUL.to_string()));
    }
    let Some(launcher) = spec.launcher else {
        return Ok(Prepared {
            spec: *spec,
            launched: None,
            program,
            env,
            exec_error: command::fork_exec_error,
            failed: SpawnError::Failed,
        });
    };
    // With a launcher the child is `<launcher...> <command> <args...>`:
    // the command is checked as exec would, then the launcher runs.
    command::exec_check(&program).map_err(|e| SpawnError::Failed(command::fork_exec_error(&program, &e)))?;
    let launched = launcher
        .args
        .iter()
        .chain(std::iter::once(&spec.command.to_string()))
        .chain(spec.args)
        .cloned()
        .collect();
    Ok(Prepared {
        spec: *spec,
        launched: Some(launched),
        program: launcher.program.to_string(),
        env,
        exec_error: launcher.not_started,
        failed: SpawnError::Launcher,
    })
}

/// Starts a prepared child and wires it to its stdin writer, output pumps
/// and supervisor. The caller registers it.
pub(super) fn start(
    prepared: Prepared<'_>,
    session: Option<String>,
    replay: &Arc<ReplayStore>,
    metrics: &Arc<Metrics>,
) -> Result<Arc<ManagedProcess>, SpawnError> {
    let spec = prepared.run();
    let program = prepared.program.as_str();
    let started = launch(&spec, program, &prepared.env, prepared.exec_error);
    let child = started.map_err(prepared.failed)?;
    let start_time = epoch_seconds();
    let pid = child.pid;
    crate::rundir::childrec::record(pid, spec.command);
    // From here on the child exists: every path must end in a
    // supervisor that reaps it.
    let grown = child.stdout.as_ref().is_some_and(grow_pipe);
    let pipes = (child.stdin, child.stdout, child.stderr);
    let (stdin, stdout, stderr) = match pipes {
        (Some(i), Some(o), Some(e)) => (
            tokio::process::ChildStdin::from_std(i),
            tokio::net::unix::pipe::Receiver::from_owned_fd(o.into()),
            tokio::net::unix::pipe::Receiver::from_owned_fd(e.into()),
        ),
        _ => (
            Err(std::io::Error::other("missing pipe")),
            Err(std::io::Error::other("missing pipe")),
            Err(std::io::Error::other("missing pipe")),
        ),
    };
    let (exit_tx, _) = watch::channel(None);
    let (queue_tx, queue_rx) = mpsc::unbounded_channel();
    let process = Arc::new(ManagedProcess {
        id: spec.id.to_string(),
        pid,
        start_time,
        log: ReplayLog::new(spec.id, replay),
        exit: exit_tx,
        reaped: Mutex::new(false),
        session,
        plugin_hashes: crate::rundir::plugindirs::hashes_in(
            std::iter::once(spec.command).chain(spec.args.iter().map(String::as_str)),
        ),
        killed_by: Mutex::new(None),
        stdin: Mutex::new(StdinState {
            applied: 0,
            queue: Some(queue_tx),
            broken: None,
            writer: None,
        }),
        stdin_queued: Arc::new(AtomicUsize::new(0)),
        finished_at: std::sync::OnceLock::new(),
        finished: watch::channel(false).0,
    });
    let pumps = start_pumps(&process, (stdin, stdout, stderr), queue_rx, grown, program, metrics);
    let readers = Some(pumps.map_err(prepared.failed)?);
    tokio::spawn(supervise(process.clone(), readers, metrics.clone()));
    metrics.process_spawns.fetch_add(1, Ordering::Relaxed);
    crate::log_info!(
        "[process.Manager] Spawned process {} (pid {}): {}",
        crate::base::logging::Untrusted(spec.id),
        pid,
        crate::base::logging::Untrusted(spec.command)
    );
    Ok(process)
}

/// Starts the stdin writer and the two output pumps of a new child.
/// When a pipe cannot be registered with the reactor the child is
/// killed and left to a supervisor of its own, which reaps it.
fn start_pumps(
    process: &Arc<ManagedProcess>,
    pipes: ChildPipes,
    queue_rx: mpsc::UnboundedReceiver<Vec<u8>>,
    grown: bool,
    program: &str,
    metrics: &Arc<Metrics>,
) -> Result<Readers, String> {
    match pipes {
        (Ok(stdin), Ok(stdout), Ok(stderr)) => {
            let writer = tokio::spawn(feed_stdin(
                stdin,
                queue_rx,
                process.stdin_queued.clone(),
                Arc::downgrade(process),
            ));
            lock(&process.stdin).writer = Some(writer.abort_handle());
            let (log_out, metrics_out) = (process.log.clone(), metrics.clone());
            Ok((
                tokio::spawn(async move {
                    pump(stdout, Stream::Stdout, log_out, metrics_out).await;
                    if grown {
                        GROWN_PIPES.fetch_sub(1, Ordering::AcqRel);
                    }
                }),
                tokio::spawn(pump(stderr, Stream::Stderr, process.log.clone(), metrics.clone())),
            ))
        }
        (i, o, e) => {
            // Registering a pipe with the reactor failed (out of
            // descriptors?): don't leave a child we cannot talk to.
            let err = [i.err(), o.err(), e.err()].into_iter().flatten().next();
            if grown {
                GROWN_PIPES.fetch_sub(1, Ordering::AcqRel);
            }
            sys::signal_group(process.pid, libc::SIGKILL);
            tokio::spawn(supervise(process.clone(), None, metrics.clone()));
            let err = err.unwrap_or_else(|| std::io::Error::other("pipe setup failed"));
            Err(command::fork_exec_error(program, &err))
        }
    }
}

/// The command that runs `program` for `spec`, directly or (with `report`,
/// the trampoline's report pipe) through the exec-child trampoline.
fn child_command(
    spec: &SpawnSpec<'_>,
    program: &str,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    report: Option<&std::os::fd::OwnedFd>,
) -> std::process::Command {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let mut cmd = match report {
        Some(fd) => {
            let mut cmd = std::process::Command::new(crate::agent::trampoline::SELF_EXE);
            cmd.args(crate::agent::trampoline::arguments(
                fd.as_raw_fd(),
                program,
                spec.command,
                spec.args,
            ));
            let raw = fd.as_raw_fd();
            // SAFETY: fcntl is async-signal-safe; it makes the report pipe
            // survive the exec into the trampoline, in the child only.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::fcntl(raw, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            cmd
        }
        None => {
            let mut cmd = std::process::Command::new(program);
            cmd.arg0(spec.command).args(spec.args);
            cmd
        }
    };
    cmd.process_group(0)
        .env_clear()
        .envs(env.iter().cloned())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if !spec.cwd.is_empty() {
        cmd.current_dir(spec.cwd);
    }
    if let Some((name, run_dir)) = crate::rundir::childrec::child_marker() {
        cmd.env(name, run_dir);
    }
    cmd
}

/// A started child: its pid and the daemon's ends of its pipes.
struct Started {
    pid: i32,
    stdin: Option<std::process::ChildStdin>,
    stdout: Option<std::process::ChildStdout>,
    stderr: Option<std::process::ChildStderr>,
}

impl From<std::process::Child> for Started {
    /// The std handle is not kept: the supervisor reaps by pid, and
    /// dropping it neither kills nor waits.
    fn from(mut child: std::process::Child) -> Started {
        Started {
            pid: i32::try_from(child.id()).unwrap_or(0),
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
        }
    }
}

/// Starts the child: through the spawner where there is one
/// ([`sys::spawn_via_helper`], Linux: a spawn's cost then does not grow
/// with the children already running), stamped as the trampoline would;
/// else through the trampoline while children are recorded
/// ([`crate::agent::trampoline`]), answering an exec failure there exactly as a
/// direct spawn's; directly otherwise, or when the trampoline itself
/// cannot start.
fn launch(
    spec: &SpawnSpec<'_>,
    program: &str,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    exec_error: ExecError,
) -> Result<Started, String> {
    if let Some(started) = through_helper(spec, program, env) {
        return started.map_err(|e| exec_error(program, &e));
    }
    let direct = |env: &[(std::ffi::OsString, std::ffi::OsString)]| {
        child_command(spec, program, env, None)
            .spawn()
            .map(Started::from)
            .map_err(|e| exec_error(program, &e))
    };
    if !crate::agent::trampoline::enabled() {
        return direct(env);
    }
    let (read, write) = match crate::sys::process::exec_report_pipe() {
        Ok(pair) => pair,
        Err(_) => return direct(env),
    };
    let spawned = child_command(spec, program, env, Some(&write)).spawn();
    drop(write);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            crate::log_warn!(
                "[process.Manager] exec trampoline failed for {} ({}); starting it directly \u{2014} a successor daemon will not be able to reap it",
                crate::base::logging::Untrusted(spec.id),
                command::fork_exec_error(crate::agent::trampoline::SELF_EXE, &e)
            );
            return direct(env);
        }
    };
    match crate::sys::process::read_exec_report(&read) {
        None => Ok(Started::from(child)),
        Some(errno) => {
            // The trampoline exits right after its report.
            let _ = child.wait();
            Err(exec_error(program, &std::io::Error::from_raw_os_error(errno)))
        }
    }
}

/// Starts the child through the spawner: the same program, argv,
/// working directory, group, signal state and environment (in the same
/// order, stamped as the trampoline stamps it) as [`child_command`]
/// gives. `None` where there is no spawner, or for a string holding a NUL
/// (std's `Command` words that refusal).
fn through_helper(
    spec: &SpawnSpec<'_>,
    program: &str,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> Option<std::io::Result<Started>> {
    use std::ffi::OsStr;
    let argv: Vec<&OsStr> = std::iter::once(spec.command)
        .chain(spec.args.iter().map(String::as_str))
        .map(OsStr::new)
        .collect();
    let has_nul = |s: &str| s.as_bytes().contains(&0);
    if has_nul(program) || has_nul(spec.cwd) || argv.iter().any(|a| a.as_bytes().contains(&0)) {
        return None;
    }
    let (env, stamp) = crate::agent::trampoline::child_environment(env);
    let request = sys::SpawnRequest {
        program: OsStr::new(program),
        cwd: OsStr::new(spec.cwd),
        argv: &argv,
        env: &env,
        stamp,
    };
    match sys::spawn_via_helper(&request) {
        sys::HelperSpawn::Spawned(s) => Some(Ok(Started {
            pid: s.pid,
            stdin: Some(s.stdin.into()),
            stdout: Some(s.stdout.into()),
            stderr: Some(s.stderr.into()),
        })),
        sys::HelperSpawn::Failed(e) => Some(Err(e)),
        sys::HelperSpawn::NoHelper(why) => {
            if let Some(why) = why {
                crate::log_warn!("[process.Manager] {why}; the daemon starts children itself until a spawner starts");
            }
            None
        }
    }
}

fn epoch_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
