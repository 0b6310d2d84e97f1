//! The daemon under test: the one place that starts a binary with the
//! reference's command line (`<bin> -serve -socket <socket> -token-file
//! <file>`), waits for its banner and stops it again.
//!
//! [`launch`] starts a binary on paths the caller chose (the probe runner
//! and its live daemons, whose sandbox holds `$ROOT`, `$HOME` and the
//! socket); [`Daemon`] is a daemon in a private directory of its own
//! (`bench`, `stress`). `client.rs` holds the request lines and the
//! shutdown request, `procfs.rs` the `/proc` figures and the searches by
//! pid, `limits.rs` how many processes the machine lets a daemon hold,
//! `transport.rs` how a daemon is started and dialled (the socket, a
//! `-bridge` child, `remora.exe` under Wine); the probes a transport
//! cannot run are the corpus's business (`probe/skips.rs`).
//! `fuzz-diff` reaches it through the runner's live daemons.

pub(crate) mod client;
mod error;
pub(crate) mod limits;
pub(crate) mod procfs;
pub(crate) mod transport;

pub(crate) use error::Error;
pub use transport::Transport;

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The environment a daemon starts with.
#[derive(Debug, Clone)]
pub(crate) enum Env {
    /// Exactly these variables.
    Exactly(Vec<(String, String)>),
    /// This process's environment, plus these.
    Inherit(Vec<(String, String)>),
}

/// The environment shared by the daemon, command-line runs and fixture
/// commands of a run whose directory is `run` (`HOME` is `run/home`).
pub(crate) fn base_env(run: &Path) -> Vec<(String, String)> {
    let mut env = vec![
        ("HOME".to_string(), run.join("home").to_string_lossy().into_owned()),
        ("LANG".to_string(), "C".to_string()),
        ("LC_ALL".to_string(), "C".to_string()),
        ("TZ".to_string(), "UTC".to_string()),
        ("GIT_CONFIG_NOSYSTEM".to_string(), "1".to_string()),
        (
            "USER".to_string(),
            std::env::var("USER").unwrap_or_else(|_| "probe".into()),
        ),
    ];
    if let Ok(p) = std::env::var("PATH") {
        env.push(("PATH".to_string(), p));
    }
    env
}

/// Where and how to start a daemon.
pub(crate) struct Launch<'a> {
    pub(crate) bin: &'a Path,
    pub(crate) socket: &'a Path,
    pub(crate) token_file: &'a Path,
    /// The daemon's stderr: a regular file, so a self-daemonizing binary
    /// keeps writing to it.
    pub(crate) log: &'a Path,
    /// Whether a relaunch adds to the log rather than starting it afresh.
    pub(crate) append_log: bool,
    /// The working directory.
    pub(crate) cwd: &'a Path,
    pub(crate) env: Env,
    /// Arguments after the reference's four.
    pub(crate) extra: &'a [String],
    /// The descriptor limit (soft and hard) the daemon starts with.
    pub(crate) fd_limit: Option<u64>,
    /// How long to wait for the banner.
    pub(crate) banner_within: Duration,
    /// How the binary runs and is dialled.
    pub(crate) transport: Transport,
}

/// A started launcher and the banner it printed (empty if none came).
pub(crate) struct Started {
    pub(crate) launcher: Child,
    pub(crate) banner: Vec<u8>,
}

/// Writes the token file, starts the launcher and waits for its banner
/// and, after a banner, briefly for the socket: a self-daemonizing
/// launcher exits once the banner is out and the socket may appear a
/// moment later. Standard output is drained for as long as the launcher
/// keeps it open, so a foreground daemon never sees a broken pipe.
pub(crate) fn launch(l: &Launch, token_file: &[u8]) -> Result<Started, Error> {
    std::fs::write(l.token_file, token_file).map_err(Error::Token)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(l.append_log)
        .truncate(!l.append_log)
        .open(l.log)
        .map_err(Error::Log)?;
    let mut cmd = l.transport.command(l.bin);
    cmd.arg("-serve")
        .arg("-socket")
        .arg(l.socket)
        .arg("-token-file")
        .arg(l.token_file)
        .args(l.extra)
        .args(l.transport.serve_extra())
        .current_dir(l.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    let given = match &l.env {
        Env::Exactly(vars) => {
            cmd.env_clear().envs(vars.iter().cloned());
            vars
        }
        Env::Inherit(vars) => {
            cmd.envs(vars.iter().cloned());
            vars
        }
    };
    cmd.envs(l.transport.env(given));
    if let Some(limit) = l.fd_limit {
        limit_descriptors(&mut cmd, limit);
    }
    let mut launcher = cmd.spawn().map_err(Error::Spawn)?;
    let banner = match launcher.stdout.take() {
        Some(stdout) => read_banner(stdout, l.transport.banner_allowance(l.banner_within)),
        None => Vec::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !banner.is_empty() && !l.transport.listening(l.socket) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(Started { launcher, banner })
}

/// The first line of `stdout` (empty if none came within `within`); a
/// thread keeps draining the rest.
fn read_banner(stdout: std::process::ChildStdout, within: Duration) -> Vec<u8> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut banner = Vec::new();
        let _ = r.read_until(b'\n', &mut banner);
        let _ = tx.send(banner);
        let _ = std::io::copy(&mut r, &mut std::io::sink());
    });
    rx.recv_timeout(within).unwrap_or_default()
}

/// Sets the child's descriptor limit between fork and exec.
fn limit_descriptors(cmd: &mut Command, limit: u64) {
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between
    // fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            let lim = libc::rlimit {
                rlim_cur: limit as libc::rlim_t,
                rlim_max: limit as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// How a bridged transport's `server.shutdown` reaches the daemon: the
/// binary and the environment its `-bridge` runs with.
pub(crate) struct Via<'a> {
    pub(crate) transport: Transport,
    pub(crate) bin: &'a Path,
    pub(crate) env: &'a [(String, String)],
}

/// Stops a daemon: an authenticated `server.shutdown` (through a
/// `-bridge` child on a bridged transport), then the socket (or, under
/// Wine, `rpc.pipe`) must vanish and the launcher is reaped (killed past
/// its deadline).
pub(crate) fn stop(socket: &Path, token: &[u8], launcher: &mut Child, via: &Via) {
    let t = via.transport;
    if t.listening(socket) {
        if t.bridged() {
            let line = client::shutdown_line(token);
            transport::bridge_once(t, via.bin, socket, via.env, &line, Duration::from_secs(10));
        } else {
            client::request_shutdown(socket, token, None, Duration::from_secs(5));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while t.listening(socket) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    wait_or_kill(launcher, Instant::now() + Duration::from_secs(5));
}

/// Waits for `child` until `deadline`; past it the child is killed and
/// reaped and `None` is returned.
pub(crate) fn wait_or_kill(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            _ if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            _ => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// How a [`Daemon`] of its own starts.
pub(crate) struct Options {
    /// The prefix of its temporary directory.
    pub(crate) prefix: &'static str,
    /// Extra variables; `isolated` decides what they are added to.
    pub(crate) env: Vec<(String, String)>,
    /// Whether the daemon gets only the harness's base environment
    /// (`HOME` inside its directory, fixed locale and time zone) rather
    /// than this process's.
    pub(crate) isolated: bool,
    pub(crate) fd_limit: Option<u64>,
    pub(crate) banner_within: Duration,
}

/// A daemon in a private temporary directory (`rpc.sock`, `token`,
/// `daemon.log`, `home/`), authenticated with [`client::TOKEN`]. Dropping
/// it stops the daemon and kills whatever names the directory.
pub(crate) struct Daemon {
    dir: tempfile::TempDir,
    socket: PathBuf,
    bin: PathBuf,
    options: Options,
    launcher: Option<Child>,
}

impl Daemon {
    /// Starts `bin` in a fresh directory; an error when no banner or no
    /// socket came.
    pub(crate) fn start(bin: &Path, options: Options) -> Result<Daemon, Error> {
        let dir = tempfile::Builder::new()
            .prefix(options.prefix)
            .tempdir()
            .map_err(Error::Dir)?;
        std::fs::create_dir_all(dir.path().join("home")).map_err(Error::Dir)?;
        let mut d = Daemon {
            socket: dir.path().join("rpc.sock"),
            dir,
            bin: bin.to_path_buf(),
            options,
            launcher: None,
        };
        d.launch()?;
        Ok(d)
    }

    /// Starts the binary on this directory's socket (again, after a kill);
    /// its log is added to.
    pub(crate) fn launch(&mut self) -> Result<(), Error> {
        let token_file = self.dir.path().join("token");
        let mut env = match self.options.isolated {
            true => base_env(self.dir.path()),
            false => Vec::new(),
        };
        env.extend(self.options.env.iter().cloned());
        let launch = Launch {
            bin: &self.bin,
            socket: &self.socket,
            token_file: &token_file,
            log: &self.dir.path().join("daemon.log"),
            append_log: true,
            cwd: self.dir.path(),
            env: if self.options.isolated {
                Env::Exactly(env)
            } else {
                Env::Inherit(env)
            },
            extra: &[],
            fd_limit: self.options.fd_limit,
            banner_within: self.options.banner_within,
            transport: Transport::Socket,
        };
        let started = launch_with_token(&launch)?;
        self.launcher = Some(started.launcher);
        if started.banner.is_empty() || !self.socket.exists() {
            return Err(Error::NotStarted {
                banner: String::from_utf8_lossy(&started.banner).into_owned(),
                log_tail: self.log_tail(),
            });
        }
        Ok(())
    }

    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    /// The launcher, while it has not been reaped.
    pub(crate) fn launcher(&mut self) -> Option<&mut Child> {
        self.launcher.as_mut()
    }

    /// Takes the launcher (to kill or reap it).
    pub(crate) fn take_launcher(&mut self) -> Option<Child> {
        self.launcher.take()
    }

    /// A new connection, replies awaited up to two minutes.
    pub(crate) fn conn(&self) -> Result<UnixStream, Error> {
        let s = UnixStream::connect(&self.socket).map_err(Error::Connect)?;
        s.set_read_timeout(Some(Duration::from_secs(120))).ok();
        Ok(s)
    }

    /// The daemon's pid: the listening process, as the kernel reports it for
    /// a connection to the socket (`SO_PEERCRED`), so neither a launcher
    /// that is still exiting nor another process naming the socket in its
    /// command line can be taken for it. Falls back to the command-line
    /// search where peer credentials are not available.
    pub(crate) fn pid(&self) -> Option<i32> {
        self.conn().ok().and_then(|s| procfs::peer_pid(&s)).or_else(|| {
            let launcher = self.launcher.as_ref().map(|l| l.id() as i32);
            let serving = procfs::pids_mentioning(self.socket.as_os_str().as_encoded_bytes());
            serving
                .iter()
                .copied()
                .filter(|&p| Some(p) != launcher && procfs::rss_kib(p).is_some())
                .max_by_key(|&p| procfs::rss_kib(p).unwrap_or(0))
                .or_else(|| launcher.filter(|l| serving.contains(l)))
        })
    }

    /// The last 400 characters of the daemon's log.
    pub(crate) fn log_tail(&self) -> String {
        let l = std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default();
        let t: String = l.chars().rev().take(400).collect();
        t.chars().rev().collect()
    }
}

/// [`launch`] with the token file of [`client::TOKEN`].
fn launch_with_token(l: &Launch) -> Result<Started, Error> {
    launch(l, format!("{}\n", client::TOKEN).as_bytes())
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut launcher) = self.launcher.take() {
            let via = Via {
                transport: Transport::Socket,
                bin: &self.bin,
                env: &[],
            };
            stop(&self.socket, client::TOKEN.as_bytes(), &mut launcher, &via);
        } else if self.socket.exists() {
            client::request_shutdown(&self.socket, client::TOKEN.as_bytes(), None, Duration::from_secs(5));
        }
        procfs::kill_mentioning(self.dir.path());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in daemon, so launch and stop are shown without building
    /// remora: it prints its banner before its socket exists (so `launch`
    /// must wait for it), makes the socket appear only once it listens
    /// (bound under another name, renamed into place: a real daemon's is
    /// connectable once it is there), and goes away after one request.
    fn fake_daemon(dir: &Path) -> PathBuf {
        let bin = dir.join("fake-daemon");
        std::fs::write(
            &bin,
            "#!/bin/sh\n# -serve -socket S -token-file T\necho \"banner $HARNESS_DUT_VAR\"\n\
             python3 -c 'import os,socket,sys; p=sys.argv[1]; s=socket.socket(socket.AF_UNIX); s.bind(p+\".new\"); s.listen(); os.rename(p+\".new\", p); c,_=s.accept(); c.recv(4096); os.unlink(p)' \"$3\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        bin
    }

    /// A stand-in for a daemon reached only through its `-bridge`: `-serve`
    /// writes the one request it gets to `<socket>.got` before going away;
    /// `-bridge -socket S` relays stdin to S, after the word `bridged ` (so
    /// a test sees which way a request came).
    fn fake_bridged_daemon(dir: &Path) -> PathBuf {
        let bin = dir.join("fake-bridged");
        std::fs::write(
            &bin,
            "#!/bin/sh\nif [ \"$1\" = -bridge ]; then\n\
             exec python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b\"bridged \" + sys.stdin.buffer.read()); s.shutdown(socket.SHUT_WR); s.recv(1)' \"$3\"\nfi\n\
             echo banner\n\
             python3 -c 'import os,socket,sys; p=sys.argv[1]; s=socket.socket(socket.AF_UNIX); s.bind(p+\".new\"); s.listen(); os.rename(p+\".new\", p); c,_=s.accept(); d=b\"\"\n\
while not d.endswith(b\"\\n\"): d+=c.recv(4096)\n\
open(p+\".got\",\"wb\").write(d); os.unlink(p)' \"$3\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        bin
    }

    #[test]
    fn a_bridged_stop_sends_the_shutdown_through_the_bridge() {
        if Command::new("python3").arg("-c").arg("pass").status().is_err() {
            eprintln!("skipping: no python3 here");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_bridged_daemon(dir.path());
        let socket = dir.path().join("s.sock");
        let how = Launch {
            bin: &bin,
            socket: &socket,
            token_file: &dir.path().join("token"),
            log: &dir.path().join("log"),
            append_log: false,
            cwd: dir.path(),
            env: Env::Inherit(Vec::new()),
            extra: &[],
            fd_limit: None,
            banner_within: Duration::from_secs(20),
            transport: Transport::Bridge,
        };
        let mut started = launch(&how, b"tok\n").unwrap();
        assert!(socket.exists());
        let via = Via {
            transport: Transport::Bridge,
            bin: &bin,
            env: &[],
        };
        stop(&socket, b"tok", &mut started.launcher, &via);
        assert!(!socket.exists(), "the daemon went away after the request");
        assert_eq!(
            std::fs::read(dir.path().join("s.sock.got")).unwrap(),
            [b"bridged ".as_slice(), &client::shutdown_line(b"tok")].concat(),
            "what reached the daemon is the shutdown line, relayed by the bridge"
        );
    }

    #[test]
    fn launch_waits_for_the_banner_and_stop_for_the_socket() {
        if Command::new("python3").arg("-c").arg("pass").status().is_err() {
            eprintln!("skipping: no python3 here");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_daemon(dir.path());
        let socket = dir.path().join("s.sock");
        let how = Launch {
            bin: &bin,
            socket: &socket,
            token_file: &dir.path().join("token"),
            log: &dir.path().join("log"),
            append_log: false,
            cwd: dir.path(),
            env: Env::Inherit(vec![("HARNESS_DUT_VAR".into(), "set".into())]),
            extra: &[],
            fd_limit: None,
            banner_within: Duration::from_secs(20),
            transport: Transport::Socket,
        };
        let mut started = launch(&how, b"tok\n").unwrap();
        assert_eq!(started.banner, b"banner set\n");
        assert!(socket.exists(), "the socket came after the banner");
        assert_eq!(std::fs::read(dir.path().join("token")).unwrap(), b"tok\n");
        let via = Via {
            transport: Transport::Socket,
            bin: &bin,
            env: &[],
        };
        stop(&socket, b"tok", &mut started.launcher, &via);
        assert!(!socket.exists());
        assert!(
            started.launcher.try_wait().unwrap().is_some(),
            "the launcher was reaped"
        );
    }
}
