//! Starting a child: `process.spawn`'s checks and environment, the
//! superseding of a session's other processes, the launch (directly or
//! through the exec-child trampoline), and the wiring of a new
//! [`ManagedProcess`] to its pumps and supervisor before it is registered.

use super::managed::{lock, KilledBy, ManagedProcess, StdinState};
use super::pumps::{feed_stdin, grow_pipe, pump, GROWN_PIPES};
use super::registry::ProcessManager;
use super::supervise::supervise;
use super::{command, retention, session};
use crate::agent::agentsock;
use crate::replay::frame::Stream;
use crate::replay::log::ReplayLog;
use crate::sys::process as sys;
use std::os::unix::ffi::OsStrExt;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// The grace a superseded session process gets between SIGTERM and the
/// group SIGKILL: `process.killAndWait`'s default.
pub(crate) const SUPERSEDE_GRACE: Duration = Duration::from_millis(3000);

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
    std::io::Result<tokio::process::ChildStdout>,
    std::io::Result<tokio::process::ChildStderr>,
);

/// The output pumps of a child, stdout's then stderr's.
type Readers = (tokio::task::JoinHandle<()>, tokio::task::JoinHandle<()>);

impl ProcessManager {
    /// Starts a child and registers it under `spec.id`, replacing (and
    /// tearing down) a previous process with that id. When the arguments
    /// name an agent CLI session, every other running process of that
    /// session is terminated first ([`session`]), one spawn of a session at
    /// a time. Must run inside the tokio runtime.
    pub(crate) async fn spawn(&self, spec: &SpawnSpec<'_>) -> Result<Arc<ManagedProcess>, SpawnError> {
        command::check_cwd(spec.cwd).map_err(SpawnError::Failed)?;
        // The request's entries named as the child will read them.
        let requested: Vec<(String, String)> = spec.env.iter().map(|(k, v)| command::go_entry(k, v)).collect();
        let mut env = command::merged_env(self.login_path.get().map(String::as_str), &requested);
        env.retain(|(k, _)| !spec.strip_env.iter().any(|s| k == s));
        // An agent socket the daemon itself inherited (say from an SSH
        // session with forwarding, long gone) is checked like the login
        // shell's before a child gets it: its path may since have been
        // re-created by another user. One the caller names is its choice.
        if !requested.iter().any(|(k, _)| k == agentsock::AGENT_SOCK_ENV) {
            if let Some(at) = env.iter().position(|(k, _)| k == agentsock::AGENT_SOCK_ENV) {
                if !self.agent.vet(&env[at].1.to_string_lossy()).await {
                    env.remove(at);
                }
            }
        }
        // The hand-off comes after the caller's entries, and only when no
        // entry names the variable at all (an empty value opts out too).
        if !spec.no_agent_socket && !env.iter().any(|(k, _)| k == agentsock::AGENT_SOCK_ENV) {
            if let Some(sock) = self.agent.socket().await {
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
        // With a launcher the child is `<launcher...> <command> <args...>`:
        // the command is checked as exec would, then the launcher runs.
        let launched: Vec<String>;
        let (run, program, exec_error, failed): (SpawnSpec<'_>, String, ExecError, fn(String) -> SpawnError) =
            match spec.launcher {
                None => (*spec, program, command::fork_exec_error, SpawnError::Failed),
                Some(launcher) => {
                    command::exec_check(&program)
                        .map_err(|e| SpawnError::Failed(command::fork_exec_error(&program, &e)))?;
                    launched = launcher
                        .args
                        .iter()
                        .chain(std::iter::once(&spec.command.to_string()))
                        .chain(spec.args)
                        .cloned()
                        .collect();
                    let run = SpawnSpec {
                        command: launcher.program,
                        args: &launched,
                        ..*spec
                    };
                    (
                        run,
                        launcher.program.to_string(),
                        launcher.not_started,
                        SpawnError::Launcher,
                    )
                }
            };
        let key = session::key_of(spec.args);
        let Some(key) = key else {
            return self.start(&run, &program, env, None, exec_error).map_err(failed);
        };
        let _serial = self.sessions.lock(&key).await;
        self.supersede(&key, spec.id).await;
        if self.is_shutting_down() {
            // Teardown may already have run: a child started now would leak.
            return Err(SpawnError::ShuttingDown);
        }
        self.start(&run, &program, env, Some(key), exec_error).map_err(failed)
    }

    /// Terminates every running process of session `key` other than `id`
    /// (that one is replaced by the id reuse rule), as a client's
    /// killAndWait would, and waits for them.
    async fn supersede(&self, key: &str, id: &str) {
        let rivals: Vec<Arc<ManagedProcess>> = lock(&self.table)
            .values()
            .filter(|p| p.id != id && p.session.as_deref() == Some(key) && !p.exited())
            .cloned()
            .collect();
        for old in rivals {
            crate::log_info!(
                "[process.Manager] Process {} (pid {}) superseded by {} (same session)",
                crate::base::logging::Untrusted(&old.id),
                old.pid,
                crate::base::logging::Untrusted(id)
            );
            old.terminate(libc::SIGTERM, SUPERSEDE_GRACE, true, KilledBy::Client)
                .await;
        }
    }

    fn start(
        &self,
        spec: &SpawnSpec<'_>,
        program: &str,
        env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
        session: Option<String>,
        exec_error: ExecError,
    ) -> Result<Arc<ManagedProcess>, String> {
        let mut child = launch(spec, program, env, exec_error)?;
        let start_time = epoch_seconds();
        let pid = i32::try_from(child.id()).unwrap_or(0);
        crate::rundir::childrec::record(pid, spec.command);
        // From here on the child exists: every path must end in a
        // supervisor that reaps it.
        let grown = child.stdout.as_ref().is_some_and(grow_pipe);
        let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (stdin, stdout, stderr) = match pipes {
            (Some(i), Some(o), Some(e)) => (
                tokio::process::ChildStdin::from_std(i),
                tokio::process::ChildStdout::from_std(o),
                tokio::process::ChildStderr::from_std(e),
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
            log: ReplayLog::new(spec.id, &self.deps.replay),
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
        let readers = Some(self.start_pumps(&process, (stdin, stdout, stderr), queue_rx, grown, program)?);
        // The std handle is not needed any more: the supervisor reaps by
        // pid. Dropping it neither kills nor waits.
        drop(child);
        tokio::spawn(supervise(process.clone(), readers, self.deps.metrics.clone()));
        self.deps.metrics.process_spawns.fetch_add(1, Ordering::Relaxed);
        if !self.sweeper.swap(true, Ordering::AcqRel) {
            tokio::spawn(retention::sweep_exited(
                Arc::downgrade(&self.table),
                self.deps.retention,
                self.deps.shutdown.clone(),
            ));
        }
        crate::log_info!(
            "[process.Manager] Spawned process {} (pid {}): {}",
            crate::base::logging::Untrusted(spec.id),
            pid,
            crate::base::logging::Untrusted(spec.command)
        );
        self.register(spec.id, &process);
        Ok(process)
    }

    /// Starts the stdin writer and the two output pumps of a new child.
    /// When a pipe cannot be registered with the reactor the child is
    /// killed and left to a supervisor of its own, which reaps it.
    fn start_pumps(
        &self,
        process: &Arc<ManagedProcess>,
        pipes: ChildPipes,
        queue_rx: mpsc::UnboundedReceiver<Vec<u8>>,
        grown: bool,
        program: &str,
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
                let (log_out, metrics_out) = (process.log.clone(), self.deps.metrics.clone());
                Ok((
                    tokio::spawn(async move {
                        pump(stdout, Stream::Stdout, log_out, metrics_out).await;
                        if grown {
                            GROWN_PIPES.fetch_sub(1, Ordering::AcqRel);
                        }
                    }),
                    tokio::spawn(pump(
                        stderr,
                        Stream::Stderr,
                        process.log.clone(),
                        self.deps.metrics.clone(),
                    )),
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
                tokio::spawn(supervise(process.clone(), None, self.deps.metrics.clone()));
                let err = err.unwrap_or_else(|| std::io::Error::other("pipe setup failed"));
                Err(command::fork_exec_error(program, &err))
            }
        }
    }

    /// Registers a started child under `id`; a previous process with that
    /// id is torn down.
    fn register(&self, id: &str, process: &Arc<ManagedProcess>) {
        let previous = lock(&self.table).insert(id.to_string(), process.clone());
        if let Some(old) = previous {
            // The old tree would be unreachable: no kill, stdin or
            // reattach can name it any more. Drop its subscribers first so
            // no frame of it arrives under the reused id, then kill it.
            old.log.detach_all();
            old.stop_stdin();
            // Nobody can see its exit frame any more: no reason to record.
            old.kill_tree(None);
            crate::log_info!(
                "[process.Manager] Process id {} reused: killed previous process (pid {})",
                crate::base::logging::Untrusted(&old.id),
                old.pid
            );
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

/// Starts the child: through the trampoline while children are recorded
/// ([`crate::agent::trampoline`]), answering an exec failure there exactly as a
/// direct spawn's; directly otherwise, or when the trampoline itself
/// cannot start.
fn launch(
    spec: &SpawnSpec<'_>,
    program: &str,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    exec_error: ExecError,
) -> Result<std::process::Child, String> {
    let direct = |env: &[(std::ffi::OsString, std::ffi::OsString)]| {
        child_command(spec, program, env, None)
            .spawn()
            .map_err(|e| exec_error(program, &e))
    };
    if !crate::agent::trampoline::enabled() {
        return direct(&env);
    }
    let (read, write) = match crate::agent::trampoline::report_pipe() {
        Ok(pair) => pair,
        Err(_) => return direct(&env),
    };
    let spawned = child_command(spec, program, &env, Some(&write)).spawn();
    drop(write);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            crate::log_warn!(
                "[process.Manager] exec trampoline failed for {} ({}); starting it directly \u{2014} a successor daemon will not be able to reap it",
                crate::base::logging::Untrusted(spec.id),
                command::fork_exec_error(crate::agent::trampoline::SELF_EXE, &e)
            );
            return direct(&env);
        }
    };
    match crate::agent::trampoline::read_report(&read) {
        None => Ok(child),
        Some(errno) => {
            // The trampoline exits right after its report.
            let _ = child.wait();
            Err(exec_error(program, &std::io::Error::from_raw_os_error(errno)))
        }
    }
}

fn epoch_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
