//! Shared integration-test support: a real `remora -serve` daemon on a
//! socket in a temp dir, and a blocking line-oriented client.
//!
//! Readiness is the banner on the launcher's stdout, never a sleep. On drop
//! the daemon is stopped with an authenticated `server.shutdown`.
#![allow(dead_code)]

pub mod frames;
pub mod git;
pub mod http;
pub mod proven;
pub mod reply;
pub mod skip;
pub mod tarball;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const TOKEN: &str = "test-token-\u{e9}";

pub fn remora_bin() -> &'static str {
    env!("CARGO_BIN_EXE_remora")
}

/// The `SHELL` of the daemons started here unless a test sets its own
/// (see the script's comment).
pub const QUICK_LOGIN_SHELL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/support/quick-login-shell");

/// `remora` with [`QUICK_LOGIN_SHELL`]: how every test starts the binary.
pub fn remora_command() -> Command {
    let mut command = Command::new(remora_bin());
    command.env("SHELL", QUICK_LOGIN_SHELL);
    command
}

/// `remora -serve -socket <socket> -token-file <token>` with
/// [`QUICK_LOGIN_SHELL`], ready for the caller's stdio and environment.
pub fn serve_command(socket: &Path, token: &Path) -> Command {
    let mut command = remora_command();
    command
        .arg("-serve")
        .arg("-socket")
        .arg(socket)
        .arg("-token-file")
        .arg(token);
    command
}

/// Starts `command` (a `-serve` launcher) with stdout piped and stderr
/// into `log`, reads the banner it prints once the socket listens, and
/// waits for the launcher to exit; the daemon it started keeps serving
/// (stop it through its socket). Fails unless the banner is the listening
/// line.
pub fn launch_to_banner(command: Command, log: &Path) -> String {
    let banner = launch_to_banner_line(command, log);
    assert!(
        banner.starts_with("Remora remote server listening"),
        "banner {banner:?}; log:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
    banner
}

/// [`launch_to_banner`] for any build's banner (a stamped daemon prints the
/// reference's product name): fails unless the line says it listens.
pub fn launch_to_banner_line(mut command: Command, log: &Path) -> String {
    let mut launcher = command
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(launcher.stdout.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    let _ = launcher.wait();
    assert!(
        banner.contains(" remote server listening on "),
        "banner {banner:?}; log:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
    banner
}

/// The next `-serve` on `socket` (extra `args`), with its token in
/// `<dir>/token2`; returns its log (`<dir>/second.log`) once it listens.
pub fn serve_next(socket: &Path, dir: &Path, args: &[&str]) -> String {
    let token = dir.join("token2");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let log = dir.join("second.log");
    let mut command = serve_command(socket, &token);
    command.args(args);
    launch_to_banner(command, &log);
    std::fs::read_to_string(&log).unwrap()
}

pub struct TestDaemon {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub token: String,
    pub launcher: Option<Child>,
    pub stderr_path: PathBuf,
}

impl TestDaemon {
    pub fn start() -> TestDaemon {
        TestDaemon::start_with(&[], &[])
    }

    /// Starts `remora -serve` with extra flags and environment.
    pub fn start_with(extra_args: &[&str], env: &[(&str, &str)]) -> TestDaemon {
        TestDaemon::start_ignoring(extra_args, env, &[])
    }

    /// Starts `remora -serve` from a parent that ignores `ignored`.
    /// Otherwise SIGHUP is at its default whatever ran `cargo test`: under
    /// `nohup` it would reach the daemon ignored and stay so in children
    /// (as with Go), where a shell cannot trap it.
    pub fn start_ignoring(extra_args: &[&str], env: &[(&str, &str)], ignored: &[libc::c_int]) -> TestDaemon {
        TestDaemon::start_full(extra_args, env, &[], ignored, None)
    }

    /// Starts `remora -serve` with `unset` removed from the environment it
    /// inherits and `env` added.
    pub fn start_without(unset: &[&str], env: &[(&str, &str)]) -> TestDaemon {
        TestDaemon::start_full(&[], env, unset, &[], None)
    }

    /// Starts `remora -serve` with its descriptor limit (soft and hard) set
    /// to `fd_limit`.
    pub fn start_with_fd_limit(fd_limit: u64, env: &[(&str, &str)]) -> TestDaemon {
        TestDaemon::start_full(&[], env, &[], &[], Some(fd_limit))
    }

    /// Starts `binary` (a copy of remora placed elsewhere) with `-serve`
    /// and extra flags.
    pub fn start_binary(binary: &Path, extra_args: &[&str]) -> TestDaemon {
        TestDaemon::start_from(binary, extra_args, &[], &[], &[], None)
    }

    fn start_full(
        extra_args: &[&str],
        env: &[(&str, &str)],
        unset: &[&str],
        ignored: &[libc::c_int],
        fd_limit: Option<u64>,
    ) -> TestDaemon {
        TestDaemon::start_from(Path::new(remora_bin()), extra_args, env, unset, ignored, fd_limit)
    }

    fn start_from(
        binary: &Path,
        extra_args: &[&str],
        env: &[(&str, &str)],
        unset: &[&str],
        ignored: &[libc::c_int],
        fd_limit: Option<u64>,
    ) -> TestDaemon {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("rpc.sock");
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
        let stderr_path = dir.path().join("daemon.log");
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut cmd = Command::new(binary);
        cmd.arg("-serve")
            .arg("-socket")
            .arg(&socket)
            .arg("-token-file")
            .arg(&token_file)
            .args(extra_args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .env("SHELL", QUICK_LOGIN_SHELL);
        for k in unset {
            cmd.env_remove(k);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let ignored = ignored.to_vec();
        // SAFETY: signal(2) and setrlimit(2) are async-signal-safe; nothing
        // else runs between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                libc::signal(libc::SIGHUP, libc::SIG_DFL);
                for s in &ignored {
                    libc::signal(*s, libc::SIG_IGN);
                }
                if let Some(limit) = fd_limit {
                    let lim = libc::rlimit {
                        rlim_cur: limit as libc::rlim_t,
                        rlim_max: limit as libc::rlim_t,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut launcher = cmd.spawn().expect("spawn remora");
        let mut stdout = BufReader::new(launcher.stdout.take().unwrap());
        let mut banner = String::new();
        stdout.read_line(&mut banner).expect("read banner");
        // Unstamped, remora's own line; stamped (remora.conf beside a
        // copied binary), the reference's wording for that build.
        let plain = format!("Remora remote server listening on {}\n", socket.display());
        let stamped = format!("Claude remote server listening on {}", socket.display());
        assert!(
            banner == plain || banner.starts_with(&stamped),
            "daemon did not start: {banner:?}; log: {}",
            std::fs::read_to_string(&stderr_path).unwrap_or_default()
        );
        TestDaemon {
            dir,
            socket,
            token: TOKEN.to_string(),
            launcher: Some(launcher),
            stderr_path,
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn connect(&self) -> Client {
        Client::connect(&self.socket)
    }

    /// Sends one request on a fresh connection and returns its reply line.
    pub fn call(&self, method: &str, params: &str) -> String {
        let mut c = self.connect();
        c.call(1, method, params)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Asks the daemon to stop and waits until it has exited (the socket
    /// goes first, the token file and the lock record after it).
    pub fn stop(&mut self) {
        stop_serving(&self.socket, &self.token);
        if let Some(mut child) = self.launcher.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Stops the daemon serving `socket` and waits for it to exit. The
/// launcher that started it exited long ago (`-serve` detaches), so the
/// daemon is found by its own pid: the socket's peer (`SO_PEERCRED`), else
/// the owner record in `daemon.lock` beside it. Either is held through a
/// pidfd ([`proven::Proc`]) and taken only when that process's command
/// line names the socket: a listener that is not our daemon (a test's own
/// stand-in, this very binary) is never waited for or signalled. First an
/// authenticated `server.shutdown` (the daemon ends its children itself);
/// a daemon still there after 10 s (wrong token, wedged) gets SIGKILL,
/// its children's groups first, so that nothing a test started outlives
/// it (`ci/leftovers` checks). Every signal goes through a hold taken
/// while the target was proven, never through a number read earlier (a
/// number read 20 s ago may be a thread of this binary by now, and a
/// thread's id passed to kill(2) ends its whole process: issue 44 item 9).
pub fn stop_serving(socket: &Path, token: &str) {
    let mut daemon = None;
    let mut asked = false;
    if let Ok(mut s) = UnixStream::connect(socket) {
        daemon = peer_pid(&s).and_then(|pid| proven::Proc::proven(pid, |pid| names_socket(pid, socket)));
        let line = request_line("0", "server.shutdown", None, token);
        asked = s.write_all(line.as_bytes()).is_ok();
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    }
    let daemon = daemon.or_else(|| recorded_daemon(socket));
    if asked || daemon.is_some() {
        wait_until(Duration::from_secs(10), || !socket.exists());
    }
    let Some(daemon) = daemon else {
        return;
    };
    if wait_until(Duration::from_secs(10), || daemon.gone()) {
        return;
    }
    for child in children_of(daemon.pid()) {
        // Its parent is the daemon while the daemon is present: the hold
        // on the daemon says the number is still its own.
        let ours = |pid: i32| parent_of(pid) == Some(daemon.pid()) && daemon.present();
        if let Some(child) = proven::Proc::proven(child, ours) {
            // Every child of the daemon leads a group of its own.
            child.signal_group(libc::SIGKILL);
        }
    }
    daemon.signal(libc::SIGKILL);
    wait_until(Duration::from_secs(10), || daemon.gone());
}

/// Whether process `pid`'s command line names `socket` (a daemon serving
/// it is started with `-socket <socket>`).
fn names_socket(pid: i32, socket: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    cmdline
        .split(|b| *b == 0)
        .any(|arg| arg.ends_with(socket.as_os_str().as_bytes()))
}

/// The daemon named in `daemon.lock` beside `socket`, held, if it is alive
/// and its command line names the socket (so a recycled pid is never
/// taken).
pub fn recorded_daemon(socket: &Path) -> Option<proven::Proc> {
    let record = std::fs::read_to_string(socket.parent()?.join("daemon.lock")).ok()?;
    let value: serde_json::Value = serde_json::from_str(&record).ok()?;
    let pid = i32::try_from(value["pid"].as_i64()?).ok()?;
    let daemon = proven::Proc::proven(pid, |pid| names_socket(pid, socket))?;
    (!daemon.gone()).then_some(daemon)
}

/// Stops the daemon on `socket` when dropped ([`stop_serving`]), so a
/// test that starts a daemon outside [`TestDaemon`] does not leak it when
/// an assertion fails before its own stop. Cheap when the daemon is gone.
pub struct StopOnDrop {
    socket: PathBuf,
    token: String,
}

impl StopOnDrop {
    pub fn new(socket: impl AsRef<Path>, token: &str) -> StopOnDrop {
        StopOnDrop {
            socket: socket.as_ref().to_path_buf(),
            token: token.to_string(),
        }
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        stop_serving(&self.socket, &self.token);
    }
}

/// The pids whose parent is `pid` (from `/proc/<n>/stat`).
pub fn children_of(pid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&n| parent_of(n) == Some(pid))
        .collect()
}

/// The parent of process `pid` (from `/proc/<pid>/stat`).
pub fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid …": comm may hold spaces or ')'.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok())
}

/// The pid of the process at the other end of a connected Unix socket
/// (the daemon, for a connection to its socket). Linux only (`SO_PEERCRED`);
/// elsewhere `None`, and stopping waits for the socket alone.
#[cfg(not(target_os = "linux"))]
pub fn peer_pid(_stream: &UnixStream) -> Option<i32> {
    None
}

#[cfg(target_os = "linux")]
pub fn peer_pid(stream: &UnixStream) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid)
}

/// Polls `cond` until it holds or `limit` passes; returns whether it held.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A request line (with newline). `params: None` omits the member.
pub fn request_line(id: &str, method: &str, params: Option<&str>, token: &str) -> String {
    match params {
        Some(p) => {
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{p},\"auth\":\"{token}\"}}\n")
        }
        None => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"auth\":\"{token}\"}}\n"),
    }
}

pub struct Client {
    pub stream: UnixStream,
    reader: BufReader<UnixStream>,
    /// Lines read while looking for something else.
    pub backlog: Vec<String>,
}

impl Client {
    pub fn connect(socket: &Path) -> Client {
        let stream = UnixStream::connect(socket).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Client {
            stream,
            reader,
            backlog: Vec::new(),
        }
    }

    pub fn try_connect(socket: &Path) -> Option<UnixStream> {
        UnixStream::connect(socket).ok()
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    pub fn send(&mut self, id: impl ToString, method: &str, params: &str) {
        let line = request_line(&id.to_string(), method, Some(params), TOKEN);
        self.send_raw(line.as_bytes());
    }

    /// Next line from the socket (without the newline); panics on timeout.
    pub fn recv_line(&mut self) -> String {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).expect("read reply");
        assert!(n > 0, "connection closed while waiting for a line");
        assert!(line.ends_with('\n'), "partial line {line:?}");
        line.pop();
        line
    }

    /// Reads until the daemon closes the connection; returns what arrived.
    /// A reset counts as a close: the daemon drops connections with unread
    /// input (e.g. after an over-long line), which the kernel reports as
    /// ECONNRESET instead of EOF.
    pub fn read_to_eof(&mut self) -> String {
        let mut rest = Vec::new();
        match self.reader.read_to_end(&mut rest) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("read to eof: {e}"),
        }
        String::from_utf8(rest).expect("utf-8 from daemon")
    }

    /// Waits for the reply with this id; other lines go to `backlog`.
    pub fn reply_for(&mut self, id: impl ToString) -> String {
        let needle = format!("{{\"jsonrpc\":\"2.0\",\"id\":{},", id.to_string());
        if let Some(i) = self.backlog.iter().position(|l| l.starts_with(&needle)) {
            return self.backlog.remove(i);
        }
        loop {
            let line = self.recv_line();
            if line.starts_with(&needle) {
                return line;
            }
            self.backlog.push(line);
        }
    }

    pub fn call(&mut self, id: impl ToString + Clone, method: &str, params: &str) -> String {
        self.send(id.clone(), method, params);
        self.reply_for(id)
    }
}

/// Gone, or a zombie nobody reaped yet (`/proc/<pid>/stat` state Z or X).
pub fn pid_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| matches!(rest.trim_start().chars().next(), Some('Z' | 'X'))),
    }
}

/// `unshare` arguments that give a private mount namespace (as root, or in
/// an unprivileged user namespace), or why this machine allows neither.
pub fn unshare_prefix() -> Result<Vec<&'static str>, String> {
    let mut failures = Vec::new();
    for prefix in [
        vec!["unshare", "--mount"],
        vec!["unshare", "--mount", "--map-root-user"],
    ] {
        match Command::new(prefix[0]).args(&prefix[1..]).arg("true").output() {
            Ok(o) if o.status.success() => return Ok(prefix),
            Ok(o) => failures.push(format!(
                "`{} true`: {}",
                prefix.join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            // Both forms run the same program: no point trying the second.
            Err(e) => return Err(format!("cannot run `{}`: {e}", prefix[0])),
        }
    }
    Err(failures.join("; "))
}
