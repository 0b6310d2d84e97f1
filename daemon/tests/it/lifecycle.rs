//! `-serve` as a real detached daemon: token sources, self-daemonizing,
//! readiness, socket ownership, signals, `-stop`, `-bridge`, the metrics
//! endpoint, logging and the login-shell probe.
//!
//! The daemon is found through `/proc` by its unique socket path. Waits
//! are on real conditions (banner line, EOF, a file disappearing) with
//! deadlines, never fixed sleeps.

use crate::common;
use crate::common::frames::{frames_until_exit, stdout_of};
use crate::common::{request_line, wait_until, Client, TestDaemon, TOKEN};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const UNAUTHORIZED: &str =
    r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Unauthorized: invalid or missing auth token"}}"#;
const PONG: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"pong":true}}"#;

// ---------------------------------------------------------------- helpers

/// Pids whose command line mentions `needle`, other than `except`.
fn pids_mentioning(needle: &str, except: &[u32]) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == std::process::id() || except.contains(&pid) {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            if contains(&cmdline, needle.as_bytes()) {
                found.push(pid);
            }
        }
    }
    found
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The daemon serving `socket` (the launcher, if still around, excluded).
fn daemon_pid(socket: &Path, launcher: Option<u32>) -> u32 {
    let needle = socket.to_str().unwrap();
    let except: Vec<u32> = launcher.into_iter().collect();
    let mut pids = Vec::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            pids = pids_mentioning(needle, &except);
            pids.len() == 1
        }),
        "expected one daemon for {needle}, found {pids:?}"
    );
    pids[0]
}

/// Fields of /proc/<pid>/stat after the command name (index 0 = state).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    Some(rest.split(' ').map(str::to_string).collect())
}

/// Gone, or a zombie waiting for whatever init reaps it.
fn is_dead(pid: u32) -> bool {
    match stat_fields(pid) {
        None => true,
        Some(f) => f[0] == "Z" || f[0] == "X",
    }
}

fn environ(pid: u32) -> Vec<u8> {
    std::fs::read(format!("/proc/{pid}/environ")).expect("read environ")
}

/// A launcher started by hand, for tests that need its pipes.
struct Launch {
    dir: tempfile::TempDir,
    socket: PathBuf,
    child: Child,
    banner: String,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Launch {
    /// Runs `remora <args>` in a fresh temp dir. `{sock}` and `{dir}` in
    /// args are replaced. Stderr goes to `<dir>/daemon.log` unless
    /// `stderr` is given.
    fn start(args: &[&str], token_file: Option<&[u8]>, stdin: Stdio, stderr: Option<Stdio>) -> Launch {
        Launch::start_env(args, token_file, stdin, stderr, &[])
    }

    fn start_env(
        args: &[&str],
        token_file: Option<&[u8]>,
        stdin: Stdio,
        stderr: Option<Stdio>,
        env: &[(&str, &str)],
    ) -> Launch {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("rpc.sock");
        if let Some(token) = token_file {
            std::fs::write(dir.path().join("token"), token).unwrap();
        }
        let d = dir.path().to_str().unwrap();
        let s = socket.to_str().unwrap();
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("{sock}", s).replace("{dir}", d))
            .collect();
        let stderr =
            stderr.unwrap_or_else(|| Stdio::from(std::fs::File::create(dir.path().join("daemon.log")).unwrap()));
        let mut child = common::remora_command()
            .args(&args)
            .current_dir(dir.path())
            .env_remove("CLAUDE_RPC_TOKEN")
            .env_remove("REMORA_LOG_LEVEL")
            .envs(env.iter().copied())
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut banner = String::new();
        // The banner is written once the daemon accepts; for a launcher fed
        // on stdin the caller writes first and reads it with `read_banner`.
        if args.iter().all(|a| !a.contains("token-fd")) {
            stdout.read_line(&mut banner).unwrap();
        }
        Launch {
            dir,
            socket,
            child,
            banner,
            stdout,
        }
    }

    fn read_banner(&mut self) {
        self.stdout.read_line(&mut self.banner).unwrap();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    fn expect_banner(&self) {
        assert_eq!(
            self.banner,
            format!("Remora remote server listening on {}\n", self.socket.display()),
            "log: {}",
            self.log()
        );
    }

    /// Stops the daemon with `-stop` and waits for its socket to go.
    fn stop(&self, token: &str) {
        let out = common::remora_command()
            .args(["-stop", "-socket", self.socket.to_str().unwrap()])
            .env("CLAUDE_RPC_TOKEN", token)
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(wait_until(Duration::from_secs(10), || !self.socket.exists()));
    }
}

impl Drop for Launch {
    fn drop(&mut self) {
        // Best effort for failed tests: never leave a daemon behind.
        let socket = self.socket.to_str().unwrap();
        for pid in pids_mentioning(socket, &[self.child.id()]) {
            // Held, and still the process that mentions the socket.
            let mentions =
                |pid: i32| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| contains(&c, socket.as_bytes()));
            if let Some(daemon) = common::proven::Proc::proven(pid as i32, mentions) {
                daemon.signal(libc::SIGKILL);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One authenticated ping; the token is JSON-escaped (it may hold `\r`).
fn ping_with(socket: &Path, token: &str) -> String {
    let mut c = Client::connect(socket);
    let auth = serde_json::to_string(token).unwrap();
    c.send_raw(format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.ping\",\"auth\":{auth}}}\n").as_bytes());
    c.recv_line()
}

// ------------------------------------------------------------------ tests

#[test]
fn double_dash_and_equals_forms_with_crlf_token_file() {
    let mut l = Launch::start(
        &["--serve", "--socket={sock}", "-token-file={dir}/token"],
        Some(b"crlf-token\r\n"),
        Stdio::null(),
        None,
    );
    l.expect_banner();
    assert!(l.child.wait().unwrap().success());
    // Read once, then unlinked.
    assert!(!l.dir.path().join("token").exists());
    assert_eq!(ping_with(&l.socket, "crlf-token"), PONG);
    assert_eq!(ping_with(&l.socket, "crlf-token\r"), UNAUTHORIZED);
    l.stop("crlf-token");
}

#[test]
fn token_keeps_surrounding_whitespace() {
    let l = Launch::start(
        &["-serve", "-socket", "{sock}", "-token-file", "{dir}/token"],
        Some(b"  two words\t \n"),
        Stdio::null(),
        None,
    );
    l.expect_banner();
    assert_eq!(ping_with(&l.socket, "  two words\t "), PONG);
    assert_eq!(ping_with(&l.socket, "two words"), UNAUTHORIZED);
    l.stop("  two words\t ");
}

#[test]
fn token_fd_from_stdin_never_reaches_argv_or_environ() {
    let token = "fd-token-7f3a9c";
    // A client-side CLAUDE_RPC_TOKEN in the launcher's environment is not
    // passed on to the daemon either.
    let mut l = Launch::start_env(
        &["-serve", "-socket", "{sock}", "-token-fd", "0"],
        None,
        Stdio::piped(),
        None,
        &[("CLAUDE_RPC_TOKEN", "client-side-c0ffee")],
    );
    // The token is one line; stdin stays open, so reading must stop at
    // the newline rather than wait for EOF.
    let mut stdin = l.child.stdin.take().unwrap();
    stdin.write_all(format!("{token}\n").as_bytes()).unwrap();
    l.read_banner();
    l.expect_banner();
    drop(stdin);
    let pid = daemon_pid(&l.socket, Some(l.child.id()));
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(!contains(&cmdline, token.as_bytes()));
    let env = environ(pid);
    assert!(!contains(&env, token.as_bytes()));
    assert!(!contains(&env, b"client-side-c0ffee"));
    // The internal sentinel is gone; the reference's marker is set.
    let vars: Vec<&[u8]> = env.split(|&b| b == 0).collect();
    assert!(!vars.iter().any(|v| v.starts_with(b"REMORA_DAEMON_CHILD")), "{vars:?}");
    assert!(vars.contains(&&b"CLAUDE_SSH_DAEMON_CHILD=1"[..]));
    // The malloc tunable the launcher adds is the daemon's alone.
    if std::env::var_os("GLIBC_TUNABLES").is_none() {
        assert!(!vars.iter().any(|v| v.starts_with(b"GLIBC_TUNABLES")), "{vars:?}");
    }
    assert_eq!(ping_with(&l.socket, token), PONG);
    l.stop(token);
}

/// What a child spawned by a launched daemon finds in its environment.
fn child_environment(launcher_env: &[(&str, &str)]) -> Vec<String> {
    let l = Launch::start_env(
        &["-serve", "-socket", "{sock}", "-token-file", "{dir}/token"],
        Some(format!("{TOKEN}\n").as_bytes()),
        Stdio::null(),
        None,
        launcher_env,
    );
    l.expect_banner();
    let mut c = Client::connect(&l.socket);
    let reply = c.call(1, "process.spawn", r#"{"id":"env","command":"/usr/bin/env"}"#);
    assert!(reply.contains(r#""result""#), "{reply}");
    let out = stdout_of(&frames_until_exit(&mut c, "env"));
    l.stop(TOKEN);
    String::from_utf8(out).unwrap().lines().map(str::to_string).collect()
}

#[test]
fn children_never_see_the_launchers_internal_variables() {
    let vars = child_environment(&[]);
    assert!(vars.iter().any(|v| v == "CLAUDE_SSH_DAEMON_CHILD=1"), "{vars:?}");
    assert!(!vars.iter().any(|v| v.starts_with("REMORA_DAEMON_CHILD")), "{vars:?}");
    // The launcher adds a malloc tunable for the daemon alone (unless the
    // operator set one, which is passed on: see the next test).
    if std::env::var_os("GLIBC_TUNABLES").is_none() {
        assert!(!vars.iter().any(|v| v.starts_with("GLIBC_TUNABLES")), "{vars:?}");
    }
}

#[test]
fn an_operators_glibc_tunables_reach_children_unchanged() {
    let tunable = "glibc.malloc.check=0";
    let vars = child_environment(&[("GLIBC_TUNABLES", tunable)]);
    let found: Vec<&String> = vars.iter().filter(|v| v.starts_with("GLIBC_TUNABLES=")).collect();
    assert_eq!(found, [&format!("GLIBC_TUNABLES={tunable}")], "{vars:?}");
}

#[test]
fn daemon_is_detached_and_holds_none_of_the_launchers_stdio() {
    // Stderr is a pipe here: the daemon must not inherit it, or reading
    // it to EOF (as `$(…)` or a captured subprocess does) would hang.
    let mut l = Launch::start(
        &["-serve", "-socket", "{sock}", "-token-file", "{dir}/token"],
        Some(TOKEN.as_bytes()),
        Stdio::null(),
        Some(Stdio::piped()),
    );
    l.expect_banner();
    // Right after the banner the socket exists, owner-only.
    let mode = std::fs::metadata(&l.socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    // Launcher's stdout and stderr reach EOF: nothing else holds them.
    let mut rest = String::new();
    l.stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "");
    let mut err = String::new();
    l.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(err, "");
    let launcher = l.child.id();
    assert!(l.child.wait().unwrap().success());

    let pid = daemon_pid(&l.socket, Some(launcher));
    let fields = stat_fields(pid).unwrap();
    let (ppid, sid): (u32, u32) = (fields[1].parse().unwrap(), fields[3].parse().unwrap());
    // Its own session (it is the leader), not ours.
    // SAFETY: getsid(0) only queries this process.
    let our_sid = unsafe { libc::getsid(0) } as u32;
    assert_eq!(sid, pid);
    assert_ne!(sid, our_sid);
    // Reparented away from the launcher (to init or a subreaper).
    assert_ne!(ppid, launcher);
    assert_ne!(ppid, std::process::id());
    // stdin and stdout on /dev/null; stderr (the launcher's was a pipe) is
    // the daemon's own `remote-server.log` beside the socket.
    for fd in 0..2 {
        let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).unwrap();
        assert_eq!(target, Path::new("/dev/null"), "fd {fd}");
    }
    let log = std::fs::read_link(format!("/proc/{pid}/fd/2")).unwrap();
    let socket_dir = l.socket.parent().unwrap().canonicalize().unwrap();
    assert_eq!(log, socket_dir.join("remote-server.log"));
    // The daemon keeps the launcher's working directory.
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    assert_eq!(cwd, l.dir.path().canonicalize().unwrap());
    assert_eq!(ping_with(&l.socket, TOKEN), PONG);
    l.stop(TOKEN);
    assert!(wait_until(Duration::from_secs(10), || is_dead(pid)));
}

#[test]
fn the_daemon_is_named_remora_not_exe() {
    // It re-executes /proc/self/exe, which alone would name it `exe`.
    let d = TestDaemon::start();
    let pid = daemon_pid(&d.socket, d.launcher.as_ref().map(Child::id));
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm, "remora\n");
    match Command::new("pgrep").args(["-x", "remora"]).output() {
        Ok(out) => {
            let pids = String::from_utf8_lossy(&out.stdout);
            assert!(
                pids.lines().any(|l| l.trim() == pid.to_string()),
                "`pgrep -x remora` lists {pids:?}, not the daemon {pid}"
            );
        }
        Err(e) => common::skip::skip(&format!("(the /proc/<pid>/comm check passed) cannot run pgrep: {e}")),
    }
}

#[test]
fn daemon_logs_to_a_regular_file_stderr() {
    let d = TestDaemon::start();
    let pid = daemon_pid(&d.socket, d.launcher.as_ref().map(Child::id));
    let target = std::fs::read_link(format!("/proc/{pid}/fd/2")).unwrap();
    assert_eq!(target, d.stderr_path.canonicalize().unwrap());
    d.call("server.ping", "{}");
    assert!(wait_until(Duration::from_secs(5), || d
        .log()
        .contains(" INFO  [Server] New connection from: @\n")));
}

#[test]
fn ambient_claude_marker_does_not_confuse_the_launcher() {
    // A claude-ssh session exports CLAUDE_SSH_DAEMON_CHILD=1 to everything;
    // the launcher must still daemonize and forward the token.
    let d = TestDaemon::start_with(&[], &[("CLAUDE_SSH_DAEMON_CHILD", "1")]);
    assert_eq!(d.call("server.ping", "{}"), PONG);
}

#[test]
fn a_live_foreign_listener_is_not_clobbered() {
    // Since reference 4534d86 a live remora predecessor of the same socket
    // is evicted (tests/it/upstream_life.rs); any other live listener still
    // makes -serve fail without touching it.
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let token = dir.path().join("token2");
    std::fs::write(&token, "other\n").unwrap();
    let out = common::serve_command(&socket, &token).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "remora: listen unix: {}: bind: address already in use\n",
            socket.display()
        )
    );
    assert!(std::os::unix::net::UnixStream::connect(&socket).is_ok());
    assert!(listener.accept().is_ok());
}

#[test]
fn a_stale_socket_file_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rpc.sock");
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let token = dir.path().join("token");
    std::fs::write(&token, "tok\n").unwrap();
    let out = common::serve_command(&socket, &token)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(ping_with(&socket, "tok"), PONG);
    let stop = common::remora_command()
        .args(["-stop", "-socket", socket.to_str().unwrap()])
        .env("CLAUDE_RPC_TOKEN", "tok")
        .output()
        .unwrap();
    assert!(stop.status.success());
    assert!(wait_until(Duration::from_secs(10), || !socket.exists()));
}

fn signal_shuts_down(sig: i32, name: &str) {
    let d = TestDaemon::start();
    let pid = daemon_pid(&d.socket, d.launcher.as_ref().map(Child::id));
    // Held once proven: the lock record's process, naming the socket.
    let daemon = common::recorded_daemon(&d.socket).expect("a hold on the daemon");
    assert_eq!(daemon.pid() as u32, pid);
    // A connected client sees its connection closed.
    let mut c = d.connect();
    assert_eq!(c.call(1, "server.ping", "{}"), PONG);
    assert!(daemon.signal(sig));
    assert_eq!(c.read_to_eof(), "");
    assert!(wait_until(Duration::from_secs(10), || !d.socket.exists()));
    assert!(wait_until(Duration::from_secs(10), || is_dead(pid)));
    let log = d.log();
    assert!(
        log.contains(&format!("[Server] Received signal: {name}, shutting down")),
        "{log}"
    );
    assert!(log.contains("[Server] Shutting down"), "{log}");
}

#[test]
fn sigterm_shuts_down_and_removes_the_socket() {
    signal_shuts_down(libc::SIGTERM, "terminated");
}

#[test]
fn sigint_shuts_down_and_removes_the_socket() {
    signal_shuts_down(libc::SIGINT, "interrupt");
}

#[test]
fn stop_stops_a_live_daemon_and_says_so() {
    let mut d = TestDaemon::start();
    let pid = daemon_pid(&d.socket, d.launcher.as_ref().map(Child::id));
    let out = common::remora_command()
        .args(["-stop", "-socket", d.socket.to_str().unwrap()])
        .env("CLAUDE_RPC_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "stopped\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    // -stop returns once the daemon has finished: no wait needed.
    assert!(!d.socket.exists());
    assert!(is_dead(pid));
    d.stop();
}

#[test]
fn stop_never_relays_the_daemons_reply() {
    let d = TestDaemon::start();
    // An untrusted daemon.token is not used: the wrong environment token
    // is refused, the word is still `stopped` and the refusal goes to
    // stderr, never to stdout.
    std::fs::set_permissions(d.root().join("daemon.token"), std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = common::remora_command()
        .args(["--stop", "--socket", d.socket.to_str().unwrap()])
        .env("CLAUDE_RPC_TOKEN", "wrong")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "stopped\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains(UNAUTHORIZED));
    // The daemon stays up.
    assert_eq!(d.call("server.ping", "{}"), PONG);
}

#[test]
fn a_successor_started_during_teardown_keeps_its_socket() {
    let first = TestDaemon::start();
    let pid = daemon_pid(&first.socket, first.launcher.as_ref().map(Child::id));
    let out = common::remora_command()
        .args(["-stop", "-socket", first.socket.to_str().unwrap()])
        .env("CLAUDE_RPC_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(out.status.success());
    // Start the successor at once, possibly while the first still tears
    // down; the first must not delete the successor's socket on its way out.
    let token = first.root().join("token2");
    std::fs::write(&token, "next\n").unwrap();
    let out = common::serve_command(&first.socket, &token)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(wait_until(Duration::from_secs(10), || is_dead(pid)));
    assert_eq!(ping_with(&first.socket, "next"), PONG);
    let stop = common::remora_command()
        .args(["-stop", "-socket", first.socket.to_str().unwrap()])
        .env("CLAUDE_RPC_TOKEN", "next")
        .output()
        .unwrap();
    assert!(stop.status.success());
    assert!(wait_until(Duration::from_secs(10), || !first.socket.exists()));
}

fn bridge(socket: &Path, input: &[u8]) -> (i32, String, String) {
    let mut child = common::remora_command()
        .args(["-bridge", "-socket", socket.to_str().unwrap()])
        .env_remove("CLAUDE_RPC_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
    // Closing stdin half-closes the relay; the replies must still arrive.
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bridge_relays_requests_and_replies_across_half_close() {
    let d = TestDaemon::start();
    let input = format!(
        "{}{}",
        request_line("1", "server.ping", None, TOKEN),
        request_line("2", "server.capabilities", Some("{}"), TOKEN)
    );
    let (code, out, err) = bridge(&d.socket, input.as_bytes());
    assert_eq!((code, err.as_str()), (0, ""));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines.contains(&PONG), "{out}");
    assert!(lines
        .iter()
        .any(|l| l.starts_with(r#"{"jsonrpc":"2.0","id":2,"result":{"version":""#)));
    // A final line without a newline is still served.
    let (_, out, _) = bridge(
        &d.socket,
        request_line("1", "server.ping", None, TOKEN).trim_end().as_bytes(),
    );
    assert_eq!(out, format!("{PONG}\n"));
}

#[test]
fn bridge_injects_no_auth() {
    let d = TestDaemon::start();
    let (code, out, _) = bridge(
        &d.socket,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.ping\"}\n",
    );
    assert_eq!(code, 0);
    assert_eq!(out, format!("{UNAUTHORIZED}\n"));
}

/// The address the daemon's metrics listener bound, from its log line
/// (the listener is bound, and the line written, before readiness).
fn metrics_addr(d: &TestDaemon) -> String {
    let log = d.log();
    let (_, rest) = log
        .split_once("[Server] metrics: serving http://")
        .unwrap_or_else(|| panic!("no metrics line: {log}"));
    rest.split_once("/metrics").expect("metrics path").0.to_string()
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to metrics");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// TCP sockets in LISTEN state owned by `pid`.
fn tcp_listeners(pid: u32) -> usize {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|t| {
            let t = t.to_string_lossy().into_owned();
            Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let mut count = 0;
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                count += 1;
            }
        }
    }
    count
}

#[test]
fn metrics_endpoint_serves_counters() {
    // Port 0: the kernel picks a free port, no window for another test.
    let d = TestDaemon::start_with(&["-metrics-addr", "127.0.0.1:0"], &[]);
    let addr = metrics_addr(&d);
    let pid = daemon_pid(&d.socket, d.launcher.as_ref().map(Child::id));
    assert_eq!(tcp_listeners(pid), 1);
    let mut c = d.connect();
    for id in 1..=3 {
        c.call(id, "server.ping", "{}");
    }
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"server.ping\",\"auth\":\"nope\"}\n");
    c.reply_for(9);
    let resp = http_get(&addr, "/metrics");
    let (head, body) = resp.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains("\r\nContent-Type: text/plain; version=0.0.4\r\n"),
        "{head}"
    );
    assert!(body.contains("# HELP remora_connections_total "), "{body}");
    assert!(body.contains("# TYPE remora_connections_total counter\n"), "{body}");
    assert!(body.contains("\nremora_connections_total 1\n"), "{body}");
    assert!(
        body.contains("\nremora_requests_total{method=\"server.ping\",outcome=\"ok\"} 3\n"),
        "{body}"
    );
    assert!(body.contains("\nremora_requests_rejected_total 1\n"), "{body}");
    assert!(body.contains("\nremora_process_spawns_total 0\n"), "{body}");
    // A spawn is answered by its follower with a success line: `ok`, not
    // `no_reply`.
    let spawned = c.call(10, "process.spawn", r#"{"id":"m1","command":"true"}"#);
    assert!(spawned.contains("\"result\""), "{spawned}");
    let body = http_get(&addr, "/metrics");
    assert!(
        body.contains("\nremora_requests_total{method=\"process.spawn\",outcome=\"ok\"} 1\n"),
        "{body}"
    );
    assert!(
        body.contains("\nremora_requests_total{method=\"process.spawn\",outcome=\"no_reply\"} 0\n"),
        "{body}"
    );
    // Counts only: never the token.
    assert!(!body.contains(TOKEN) && !body.contains("nope"));
    assert!(http_get(&addr, "/").starts_with("HTTP/1.1 404 Not Found\r\n"));
    assert!(d
        .log()
        .contains(&format!("[Server] metrics: serving http://{addr}/metrics")));
}

/// Issue 26 item 5: `-metrics-addr :<port>` once bound every interface
/// (`[::]`), exposing the unauthenticated endpoint to the network. An
/// empty host is loopback.
#[test]
fn metrics_empty_host_binds_loopback() {
    let d = TestDaemon::start_with(&["-metrics-addr", ":0"], &[]);
    let addr = metrics_addr(&d);
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    assert!(http_get(&addr, "/metrics").starts_with("HTTP/1.1 200 OK\r\n"));
}

/// Issue 26 item 5: every connection to the metrics port was accepted and
/// held for up to 5 s, so another user could take the daemon's
/// descriptors. At most 4 are held at once (the rest wait in the kernel's
/// backlog), and RPC clients are served throughout.
#[test]
fn metrics_connections_are_capped() {
    let d = TestDaemon::start_with(&["-metrics-addr", "127.0.0.1:0"], &[]);
    let addr = metrics_addr(&d);
    let pid = daemon_pid(&d.socket, d.launcher.as_ref().map(Child::id));
    let sockets = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .filter(|t| t.to_string_lossy().starts_with("socket:"))
            .count()
    };
    let mut c = d.connect();
    assert_eq!(c.call(1, "server.ping", "{}"), PONG);
    let before = sockets();
    let silent: Vec<_> = (0..64)
        .map(|_| std::net::TcpStream::connect(&addr).expect("connect to metrics"))
        .collect();
    // The daemon would accept all 64 at once if it could; watch for a
    // while that it holds no more than the cap.
    let over_cap = wait_until(Duration::from_millis(1500), || sockets() > before + 4);
    assert!(!over_cap, "{} sockets, {before} before", sockets());
    assert_eq!(c.call(2, "server.ping", "{}"), PONG.replace("\"id\":1", "\"id\":2"));
    // Once they go, a scraper gets through (one that stayed silent would
    // be dropped after 2 s).
    drop(silent);
    assert!(http_get(&addr, "/metrics").starts_with("HTTP/1.1 200 OK\r\n"));
}

#[test]
fn no_tcp_listener_without_metrics_addr() {
    let d = TestDaemon::start();
    let pid = daemon_pid(&d.socket, d.launcher.as_ref().map(Child::id));
    assert_eq!(d.call("server.ping", "{}"), PONG);
    assert_eq!(tcp_listeners(pid), 0);
}

#[test]
fn metrics_bind_failure_is_logged_and_not_fatal() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let d = TestDaemon::start_with(&["-metrics-addr", &addr], &[]);
    assert_eq!(d.call("server.ping", "{}"), PONG);
    let log = d.log();
    assert!(
        log.contains(&format!(
            " ERROR [Server] metrics: listen tcp {addr}: bind: address already in use\n"
        )),
        "{log}"
    );
}

#[test]
fn log_level_error_suppresses_info_lines() {
    let mut d = TestDaemon::start_with(&[], &[("REMORA_LOG_LEVEL", "error")]);
    assert_eq!(d.call("server.ping", "{}"), PONG);
    let mut c = d.connect();
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server.ping\",\"auth\":\"bad\"}\n");
    assert_eq!(c.recv_line(), UNAUTHORIZED);
    drop(c);
    d.stop();
    let log = d.log();
    assert!(!log.contains(" INFO "), "{log}");
    assert!(!log.contains(" WARN "), "{log}");
}

/// Writes an executable fake login shell running `body` (POSIX sh).
fn fake_shell(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("fake-login-shell");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn login_shell_path_is_extracted() {
    let shells = tempfile::tempdir().unwrap();
    // Called as `<shell> -l -i -c <script>`; noise on stdout is ignored.
    let shell = fake_shell(
        shells.path(),
        "echo 'profile noise'; PATH=/opt/login-only/bin:/usr/bin:/bin; export PATH; shift 3; exec /bin/sh -c \"$1\"",
    );
    let d = TestDaemon::start_with(&[], &[("SHELL", shell.to_str().unwrap())]);
    let want = format!(
        " INFO  [shellenv] Using PATH from login shell {}: /opt/login-only/bin:/usr/bin:/bin\n",
        shell.display()
    );
    assert!(
        wait_until(Duration::from_secs(10), || d.log().contains(&want)),
        "{}",
        d.log()
    );
}

#[test]
fn what_a_login_shell_leaves_running_after_answering_is_ended_with_it() {
    let shells = tempfile::tempdir().unwrap();
    let marker = format!("answered-shell-{}", std::process::id());
    // The profile backgrounds a helper (in the shell's group), then answers.
    let shell = fake_shell(
        shells.path(),
        &format!("/bin/sh -c 'sleep 600; : {marker}' & shift 3; exec /bin/sh -c \"$1\""),
    );
    let d = TestDaemon::start_with(&[], &[("SHELL", shell.to_str().unwrap())]);
    assert!(
        wait_until(Duration::from_secs(10), || d
            .log()
            .contains("[shellenv] Using PATH from login shell")),
        "{}",
        d.log()
    );
    // The daemon keeps serving; the helper is gone all the same.
    assert_eq!(d.call("server.ping", "{}"), PONG);
    assert!(
        wait_until(Duration::from_secs(10), || pids_mentioning(&marker, &[])
            .into_iter()
            .all(is_dead)),
        "the profile's helper outlived its shell"
    );
}

#[test]
fn a_daemon_stopped_while_its_login_shell_hangs_leaves_no_shell_behind() {
    let shells = tempfile::tempdir().unwrap();
    let marker = format!("stopped-shell-{}", std::process::id());
    // The profile starts a helper in the background, as `pyenv init` does,
    // then hangs: both are in the shell's process group.
    let shell = fake_shell(
        shells.path(),
        &format!("/bin/sh -c 'sleep 600; : {marker} helper' & exec /bin/sh -c 'sleep 600; : {marker}'"),
    );
    let mut d = TestDaemon::start_with(&[], &[("SHELL", shell.to_str().unwrap())]);
    assert!(
        wait_until(Duration::from_secs(10), || pids_mentioning(&marker, &[]).len() == 2),
        "the fake shell and its helper never started"
    );
    let started = pids_mentioning(&marker, &[]);
    // Stopped well inside the probe's 5 s: the daemon's teardown, not the
    // probe's deadline, must end the group.
    d.stop();
    assert!(
        wait_until(Duration::from_secs(10), || started.iter().all(|&p| is_dead(p))),
        "left running after the daemon exited: {:?}",
        started.iter().filter(|&&p| !is_dead(p)).collect::<Vec<_>>()
    );
}

#[test]
fn a_hung_login_shell_neither_delays_the_socket_nor_survives() {
    let shells = tempfile::tempdir().unwrap();
    let marker = format!("hung-shell-{}", std::process::id());
    let shell = fake_shell(shells.path(), &format!("exec /bin/sh -c 'sleep 600; : {marker}'"));
    // start_with returns once the banner is out: the socket did not wait.
    let d = TestDaemon::start_with(&[], &[("SHELL", shell.to_str().unwrap())]);
    assert_eq!(d.call("server.ping", "{}"), PONG);
    let want = format!(
        " WARN  [shellenv] Could not read PATH from login shell {}: timed out after 5s",
        shell.display()
    );
    assert!(
        wait_until(Duration::from_secs(20), || d.log().contains(&want)),
        "{}",
        d.log()
    );
    // The probe's 5 s started before readiness, so the order of the two
    // lines, not the time of the ping, shows the socket did not wait.
    let log = d.log();
    let listening = log.find("[Server] Listening on").expect("banner");
    assert!(listening < log.find(&want).unwrap(), "{log}");
    // The shell's whole process group was killed.
    assert!(wait_until(Duration::from_secs(10), || pids_mentioning(&marker, &[])
        .into_iter()
        .all(is_dead)));
}
