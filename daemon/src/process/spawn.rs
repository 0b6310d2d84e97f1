//! Starting a child: `process.spawn`'s checks and environment
//! ([`prepare`]), the launch (the OS's part, [`super::launch`]), and the
//! wiring of a new [`ManagedProcess`] to its pumps
//! and supervisor ([`start`]). The registry decides when (one spawn of a
//! session at a time, after superseding its other processes) and
//! registers what starts.

use super::command;
use super::launch::{self, ChildPipes};
use super::managed::{lock, ManagedProcess, StdinState};
use super::pumps::{feed_stdin, pump, GROWN_PIPES};
use super::supervise::supervise;
use crate::agent::agentsock;
use crate::protocol::metrics::Metrics;
use crate::replay::frame::Stream;
use crate::replay::log::ReplayLog;
use crate::replay::store::ReplayStore;
use crate::sys::process as sys;
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

pub(crate) use super::command::{ExecError, Launcher, SpawnSpec};

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
    let program = command::resolve(spec.command, &env, spec.cwd).map_err(SpawnError::Failed)?;
    if env
        .iter()
        .any(|(k, v)| k.as_encoded_bytes().contains(&0) || v.as_encoded_bytes().contains(&0))
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
    let started = launch::launch(&spec, program, &prepared.env, prepared.exec_error);
    let child = started.map_err(prepared.failed)?;
    let start_time = epoch_seconds();
    let pid = child.pid();
    crate::rundir::childrec::record(pid, spec.command);
    // From here on the child exists: every path must end in a
    // supervisor that reaps it.
    let (grown, (stdin, stdout, stderr)) = child.into_pipes();
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
            sys::signal_group(process.pid, sys::SIGKILL);
            tokio::spawn(supervise(process.clone(), None, metrics.clone()));
            let err = err.unwrap_or_else(|| std::io::Error::other("pipe setup failed"));
            Err(command::fork_exec_error(program, &err))
        }
    }
}

fn epoch_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
